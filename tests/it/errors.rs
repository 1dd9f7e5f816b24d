//! Every class of bad request (exit 2: the API's 400 body on stdout, the
//! message on stderr) and of bad record (exit 1: a message naming file,
//! line, column and value on stderr), through the real binary. Bad inputs
//! are real files in temporary directories. Nothing may panic (every run
//! goes through `common::telemeter`, which asserts that).

use serde_json::Value;

use crate::common::{gzip, sample_data, summary, temp_dir, write};

/// Runs a request over `sample_data/` and checks the 400 answer: exit 2,
/// stdout exactly `{"api_id":"<uuid>","error":"<message>"}`, stderr the
/// message.
fn refused(auth_id: &str, query: &str, message: &str) {
    let run = summary(&sample_data(), auth_id, query, &[]);
    assert_eq!(run.code, 2, "{query}: exit code; stderr: {}", run.stderr);
    assert_eq!(run.stderr, format!("error: {message}\n"), "{query}: stderr");
    let body: Value = serde_json::from_str(&run.stdout).expect("stdout is JSON");
    let api_id = body["api_id"].as_str().expect("api_id is a string");
    assert!(is_uuid(api_id), "{query}: api_id {api_id}");
    let expected = format!("{{\"api_id\":\"{api_id}\",\"error\":{}}}\n", serde_json::to_string(message).expect("JSON"));
    assert_eq!(run.stdout, expected, "{query}: stdout");
}

fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && groups.iter().all(|g| g.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

/// Runs a request over `sample_data/` and insists on success.
fn accepted(query: &str) -> Value {
    let run = summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", query, &[]);
    serde_json::from_str(run.ok()).expect("JSON")
}

#[test]
fn malformed_parameters_are_400s_naming_parameter_value_and_what_is_allowed() {
    let cases: &[(&str, &str)] = &[
        ("granularity=week", "invalid granularity 'week': expected one of hour, day, month, year"),
        ("granularity=Day", "invalid granularity 'Day': expected one of hour, day, month, year"),
        (
            "from_date=2026-13-01",
            "invalid from_date '2026-13-01': not a calendar date (there is no month 13; months are 01 to 12)",
        ),
        ("to_date=2026-11-31", "invalid to_date '2026-11-31': not a calendar date (November 2026 has 30 days)"),
        ("from_date=20261101", "invalid from_date '20261101': expected a date YYYY-MM-DD"),
        ("to_date=2026-11-21T00:00:00Z", "invalid to_date '2026-11-21T00:00:00Z': expected a date YYYY-MM-DD"),
        (
            "product=fax",
            "invalid product 'fax': expected one or more of message, voice, zentrunk, transcription, other, all",
        ),
        (
            "product=voice&product=message,Voice",
            "invalid product 'Voice': expected one or more of message, voice, zentrunk, transcription, other, all",
        ),
        ("direction=up", "invalid direction 'up': expected inbound or outbound"),
        ("direction=Inbound", "invalid direction 'Inbound': expected inbound or outbound"),
        (
            "country=usa",
            "invalid country 'usa': expected an ISO-3166-1 alpha-2 code of two upper-case letters, e.g. US",
        ),
        ("country=us", "invalid country 'us': expected an ISO-3166-1 alpha-2 code of two upper-case letters, e.g. US"),
        ("page_size=0", "invalid page_size '0': expected an integer from 1 to 1000"),
        ("page_size=1001", "invalid page_size '1001': expected an integer from 1 to 1000"),
        ("page_size=abc", "invalid page_size 'abc': expected an integer from 1 to 1000"),
        ("page_size=-1", "invalid page_size '-1': expected an integer from 1 to 1000"),
        ("subaccount_auth=", "invalid subaccount_auth '': expected a non-empty subaccount auth ID"),
        (
            "timezone=Mars/Olympus",
            "invalid timezone 'Mars/Olympus': expected an IANA time zone name, e.g. America/New_York",
        ),
        // Not a value U+FFFD in its place: the server's 400 too.
        ("subaccount_auth=SA%FF", "invalid subaccount_auth 'SA%FF': not UTF-8 once percent-decoded"),
        (
            "granularity=day&granularity=hour",
            "parameter granularity is given more than once with different values ('day', 'hour'): give it once",
        ),
    ];
    for (query, message) in cases {
        refused("MA001SHGA32ZDQYG9N8T", query, message);
    }
}

#[test]
fn the_window_must_be_ordered() {
    refused(
        "MA001SHGA32ZDQYG9N8T",
        "from_date=2026-11-10&to_date=2026-11-10",
        "from_date 2026-11-10 must be before to_date 2026-11-10",
    );
    refused(
        "MA001SHGA32ZDQYG9N8T",
        "from_date=2026-11-11&to_date=2026-11-10",
        "from_date 2026-11-11 must be before to_date 2026-11-10",
    );
    // A from_date after the default to_date (today, from --now), and a
    // to_date before the default from_date: the default is said.
    refused(
        "MA001SHGA32ZDQYG9N8T",
        "from_date=2026-12-01",
        "from_date 2026-12-01 must be before to_date 2026-11-21 (to_date defaults to today: 2026-11-21)",
    );
    refused(
        "MA001SHGA32ZDQYG9N8T",
        "to_date=2026-03-01",
        "from_date 2026-11-14 must be before to_date 2026-03-01 (from_date defaults to 7 days before today: 2026-11-14)",
    );
}

#[test]
fn window_caps_accept_the_exact_cap_and_refuse_one_day_more() {
    // hour: 7 days.
    let meta = &accepted("granularity=hour&from_date=2026-11-01&to_date=2026-11-08")["meta"];
    assert_eq!(meta["from_date"], "2026-11-01T00:00:00Z");
    assert_eq!(meta["to_date"], "2026-11-08T00:00:00Z");
    refused(
        "MA001SHGA32ZDQYG9N8T",
        "granularity=hour&from_date=2026-11-01&to_date=2026-11-09",
        "window of 8 days exceeds the 7-day maximum for granularity 'hour'; use granularity 'day'",
    );
    // day: 92 days (2026-01-01 + 92 days = 2026-04-03).
    accepted("granularity=day&from_date=2026-01-01&to_date=2026-04-03");
    accepted("from_date=2026-08-21&to_date=2026-11-21");
    refused(
        "MA001SHGA32ZDQYG9N8T",
        "granularity=day&from_date=2026-08-20&to_date=2026-11-21",
        "window of 93 days exceeds the 92-day maximum for granularity 'day'; use granularity 'month'",
    );
    // month: 24 calendar months.
    accepted("granularity=month&from_date=2024-11-15&to_date=2026-11-15");
    accepted("granularity=month&from_date=2024-02-29&to_date=2026-02-28");
    refused(
        "MA001SHGA32ZDQYG9N8T",
        "granularity=month&from_date=2024-11-15&to_date=2026-11-16",
        "window of 24 months and 1 day exceeds the 24-month maximum for granularity 'month'; use granularity 'year'",
    );
    // year: no cap.
    accepted("granularity=year&from_date=1900-01-01&to_date=2100-01-01");
}

/// The `next_page_token` of page 1 of `query`.
fn first_token(query: &str) -> String {
    accepted(query)["meta"]["next_page_token"].as_str().expect("a next_page_token").to_owned()
}

fn with_token(query: &str, token: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
    format!("{query}&page_token={encoded}")
}

#[test]
fn page_tokens_that_are_not_ours_or_not_for_this_request_are_400s() {
    let query = "from_date=2026-11-01&to_date=2026-11-21&page_size=3";
    let token = first_token(query);
    // The genuine token works.
    assert_eq!(accepted(&with_token(query, &token))["usage"].as_array().expect("usage").len(), 3);
    // An empty page_token means no token: page 1.
    assert_eq!(accepted(&format!("{query}&page_token=")), accepted(query));

    refused(
        "MA001SHGA32ZDQYG9N8T",
        "page_token=garbage",
        "invalid page_token 'garbage': not a page token issued by this service",
    );
    refused(
        "MA001SHGA32ZDQYG9N8T",
        "page_token=%00%EF%BF%BD",
        "invalid page_token '\\u{0}\u{FFFD}': not a page token issued by this service",
    );
    refused("MA001SHGA32ZDQYG9N8T", "page_token=%00%FF", "invalid page_token '%00%FF': not UTF-8 once percent-decoded");

    // Every single-character change of the token is refused, never a crash.
    let mut tampered_count = 0;
    for (i, original) in token.char_indices() {
        let replacement = if original == 'A' { 'B' } else { 'A' };
        let mut tampered = token.clone();
        tampered.replace_range(i..i + original.len_utf8(), &replacement.to_string());
        refused(
            "MA001SHGA32ZDQYG9N8T",
            &with_token(query, &tampered),
            &format!("invalid page_token '{tampered}': not a page token issued by this service"),
        );
        tampered_count += 1;
    }
    assert!(tampered_count > 10);
    // Cut short, or with a byte more.
    for changed in [&token[..token.len() - 1], &format!("{token}A")] {
        refused(
            "MA001SHGA32ZDQYG9N8T",
            &with_token(query, changed),
            &format!("invalid page_token '{changed}': not a page token issued by this service"),
        );
    }

    let reused = "invalid page_token: it was issued for a request with other parameters; \
                  send page_token with all other parameters unchanged";
    for changed in [
        "from_date=2026-11-01&to_date=2026-11-21&page_size=4",
        "from_date=2026-11-02&to_date=2026-11-21&page_size=3",
        "from_date=2026-11-01&to_date=2026-11-21&page_size=3&country=US",
        "from_date=2026-11-01&to_date=2026-11-21&page_size=3&product=voice",
        "from_date=2026-11-01&to_date=2026-11-21&page_size=3&granularity=month",
        "from_date=2026-11-01&to_date=2026-11-21&page_size=3&subaccount_auth=SAALPHAKGPP2438DZWD3",
    ] {
        refused("MA001SHGA32ZDQYG9N8T", &with_token(changed, &token), reused);
    }
    // Another account may not use it either.
    refused("MA002PCHQ444XLFXQN5B", &with_token(query, &token), reused);
}

/// A data directory holding one bad file; the run's stderr.
fn bad_data(files: &[(&str, &[u8])]) -> String {
    let dir = temp_dir();
    write(dir.path(), "accounts.csv", "auth_id,currency\nA1,USD\n");
    for (path, bytes) in files {
        write(dir.path(), path, bytes);
    }
    let run = summary(dir.path(), "A1", "from_date=2026-11-01&to_date=2026-11-21", &[]);
    assert_eq!(
        run.code,
        1,
        "files {:?}: exit code; stdout {}",
        files.iter().map(|f| f.0).collect::<Vec<_>>(),
        run.stdout
    );
    assert_eq!(run.stdout, "", "nothing on stdout");
    assert!(run.stderr.starts_with("error: ") && run.stderr.ends_with('\n') && run.stderr.lines().count() == 1);
    run.stderr.trim_end().trim_start_matches("error: ").to_owned()
}

const CALLS: &str = "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause\n\
                     c1,A1,,2026-11-20T10:00:00Z,voice,pstn,outbound,US,60,0.0130,0.0010,4000\n";
const MESSAGES: &str =
    "record_id,auth_id,subaccount_auth,timestamp,type,direction,country,segments,amount,surcharge,error_code\n\
                        m1,A1,,2026-11-20T10:00:00Z,sms,outbound,US,1,0.0050,0.0005,\n";
const TRANSCRIPTIONS: &str = "record_id,auth_id,subaccount_auth,timestamp,type,duration_seconds,amount\n\
                              t1,A1,,2026-11-20T10:00:00Z,standard,60,0.05\n";
const CHARGES: &str = "record_id,auth_id,timestamp,description,units,amount\n\
                       x1,A1,2026-11-20T00:00:00Z,CNAM Lookup,2,0.01\n";

/// `base` with `row` appended: the bad row is line 3.
fn with_row(base: &str, row: &str) -> Vec<u8> {
    format!("{base}{row}\n").into_bytes()
}

#[test]
fn bad_records_stop_the_run_naming_file_line_column_and_value() {
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "calls/2026/11/20.csv",
            with_row(CALLS, "c2,A1,,2026-11-20T11:00:00Z,voice,pstn,outbound,US,60,1.2e3,0,4000"),
            "calls/2026/11/20.csv:3: column 'amount': '1.2e3' is not a decimal \
             (expected digits with an optional point: no sign, no exponent)",
        ),
        (
            "messages/m.csv",
            with_row(MESSAGES, "m2,A1,,2026-11-20T11:00:00Z,sms,outbound,US,1,-0.5,0,"),
            "messages/m.csv:3: column 'amount': '-0.5' is not a decimal \
             (expected digits with an optional point: no sign, no exponent)",
        ),
        (
            "transcriptions/t.csv",
            with_row(TRANSCRIPTIONS, "t2,A1,,2026-11-20T11:00:00Z,standard,60,0.1234567891"),
            "transcriptions/t.csv:3: column 'amount': '0.1234567891' has more than 9 digits after the point",
        ),
        (
            "calls/c.csv",
            with_row(CALLS, "c2,A1,,2026-11-20T11:00:00Z,voice,pstn,outbound,US,60,0.0100,0.0200,4000"),
            "calls/c.csv:3: column 'surcharge': '0.0200' is more than the amount 0.01",
        ),
        (
            "transcriptions/t.csv",
            with_row(TRANSCRIPTIONS, "t2,A1,,2026-11-20 25:00:00Z,standard,60,0.05"),
            "transcriptions/t.csv:3: column 'timestamp': '2026-11-20 25:00:00Z' is not a time of day \
             (hours are 00 to 23, minutes and seconds 00 to 59)",
        ),
        (
            "charges/x.csv",
            with_row(CHARGES, "x2,A1,20/11/2026,CNAM Lookup,2,0.01"),
            "charges/x.csv:3: column 'timestamp': '20/11/2026' is not an RFC 3339 timestamp \
             (e.g. 2026-11-20T13:45:01Z or 2026-11-20 13:45:01.250+05:30)",
        ),
        (
            "messages/m.csv",
            with_row(MESSAGES, "m2,A1,,2026-11-20T11:00:00Z,sms,outbound,usa,1,0.5,0,"),
            "messages/m.csv:3: column 'country': 'usa' is not a country \
             (two upper-case letters, ISO 3166-1 alpha-2, or empty)",
        ),
        (
            "calls/c.csv",
            with_row(CALLS, "c2,A1,,2026-11-20T11:00:00Z,voice,pstn,out,US,60,0.01,0,4000"),
            "calls/c.csv:3: column 'direction': 'out' is not a direction (inbound or outbound)",
        ),
        (
            "calls/c.csv",
            with_row(CALLS, "c2,A1,,2026-11-20T11:00:00Z,fax,pstn,outbound,US,60,0.01,0,4000"),
            "calls/c.csv:3: column 'product': 'fax' is not a call product (expected voice or zentrunk)",
        ),
        (
            "messages/m.csv",
            with_row(MESSAGES, "m2,A1,,2026-11-20T11:00:00Z,sms,outbound,US,0,0.5,0,"),
            "messages/m.csv:3: column 'segments': '0' is not a segment count (at least 1)",
        ),
        (
            "messages/m.csv",
            with_row(MESSAGES, "m2,A1,,2026-11-20T11:00:00Z,sms,outbound,US,1,0.5,0"),
            "messages/m.csv:3: column 'error_code': 'm2,A1,,2026-11-20T11:00:00Z,sms,outbound,US,1,0.5,0' \
             has 10 fields, the header has 11: column 'error_code' is missing",
        ),
        (
            "charges/x.csv",
            with_row(CHARGES, ",A1,2026-11-20T00:00:00Z,CNAM Lookup,2,0.01"),
            "charges/x.csv:3: column 'record_id': '' is empty; expected an id",
        ),
        (
            "charges/x.csv",
            with_row(CHARGES, "x2,A1,2026-11-20T00:00:00Z,CNAM Lookup,2,0"),
            "charges/x.csv:3: column 'amount': '0' is not greater than 0 (a charge is always positive)",
        ),
        (
            "charges/x.csv",
            with_row(CHARGES, "x2,A1,2026-11-20T00:00:00Z,\"\",2,0.01"),
            "charges/x.csv:3: column 'description': '' is empty; a charge needs a description",
        ),
    ];
    for (path, bytes, message) in cases {
        assert_eq!(bad_data(&[(path, &bytes)]), message, "{path}");
    }
}

#[test]
fn a_missing_required_column_names_file_and_column() {
    let message = bad_data(&[(
        "charges/x.csv",
        b"record_id,auth_id,timestamp,units,amount\nx1,A1,2026-11-20T00:00:00Z,2,0.01\n",
    )]);
    assert!(message.contains("charges/x.csv: missing required column 'description'"), "{message}");
    assert!(message.contains("record_id, auth_id, timestamp, units, amount"), "{message}");
}

#[test]
fn a_file_whose_lines_end_with_cr_alone_is_named_for_it() {
    let message = bad_data(&[(
        "charges/x.csv",
        b"record_id,auth_id,timestamp,description,units,amount\rx1,A1,2026-11-20T00:00:00Z,d,2,0.01\r",
    )]);
    assert!(message.contains("charges/x.csv: the header line holds a carriage return"), "{message}");
    assert!(message.contains("must end with LF or CRLF"), "{message}");
}

/// A compressed or Parquet export saved under a `.csv` name is named for
/// what it holds, not read as text with odd line endings.
#[test]
fn a_binary_file_named_csv_is_named_for_its_format() {
    let zstd = zstd::stream::encode_all(CALLS.as_bytes(), 3).expect("zstd");
    let cases = [
        ("calls/a.csv", gzip(CALLS.as_bytes()), "holds gzip data, not CSV text: name it `.csv.gz`"),
        ("calls/a.csv", zstd, "holds zstd data, not CSV text: name it `.csv.zst`"),
        ("calls/a.csv", b"PAR1\x15\x04".to_vec(), "holds a Parquet file, not CSV text: name it `.parquet`"),
        ("calls/a.csv.gz", gzip(&gzip(CALLS.as_bytes())), "holds gzip data once decompressed: it was compressed twice"),
    ];
    for (name, bytes, said) in cases {
        let message = bad_data(&[(name, &bytes)]);
        assert_eq!(message, format!("{name}: {said}"));
    }
}

#[test]
fn a_conflicting_duplicate_names_both_places() {
    let resent = "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause\n\
                  c9,A1,,2026-11-19T10:00:00Z,voice,pstn,outbound,US,60,0.0130,0.0010,4000\n\
                  c1,A1,,2026-11-20T10:00:00Z,voice,pstn,outbound,US,60,0.0131,0.0010,4000\n";
    let message = bad_data(&[("calls/a.csv", CALLS.as_bytes()), ("calls/later/b.csv.gz", &gzip(resent.as_bytes()))]);
    assert_eq!(message, "conflicting duplicate calls record_id 'c1': calls/a.csv:2 and calls/later/b.csv.gz:3 differ");
    // The same id with identical content in another form is not a conflict.
    let dir = temp_dir();
    write(dir.path(), "calls/a.csv", CALLS);
    let identical = resent.replace("0.0131", "0.013").replace("2026-11-20T10:00:00Z", "2026-11-20 15:30:00+05:30");
    write(dir.path(), "calls/later/b.csv.gz", gzip(identical.as_bytes()));
    let run = summary(dir.path(), "A1", "from_date=2026-11-01&to_date=2026-11-21", &[]);
    assert!(run.ok().contains("\"total_spend\":0.026,"), "{}", run.stdout);
}

#[test]
fn unreadable_compressed_files_are_named() {
    let mut truncated = gzip(CALLS.as_bytes());
    truncated.truncate(truncated.len() / 2);
    for (path, bytes, expected) in [
        ("calls/a.csv.gz", b"this is not gzip at all".to_vec(), "not a readable gzip file"),
        ("calls/a.csv.gz", truncated, "not a readable gzip file"),
        ("messages/b.csv.zst", b"this is not zstd".to_vec(), "not a readable zstd file"),
    ] {
        let message = bad_data(&[(path, &bytes)]);
        assert!(message.contains(path) && message.contains(expected), "{message}");
    }
}

#[test]
fn a_bad_accounts_file_is_refused() {
    let dir = temp_dir();
    write(dir.path(), "accounts.csv", "auth_id,currency\nA1,eur\n");
    let run = summary(dir.path(), "A1", "", &[]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr.contains("accounts.csv:2: column 'currency': 'eur' is not a currency (three upper-case letters)"),
        "{}",
        run.stderr
    );
}

#[test]
fn missing_record_folders_are_fine_but_a_missing_data_dir_is_not() {
    let dir = temp_dir();
    // No accounts.csv, only a messages folder.
    write(dir.path(), "messages/2026/11/m.csv", MESSAGES);
    let run = summary(dir.path(), "A1", "from_date=2026-11-01&to_date=2026-11-21", &[]);
    assert!(run.ok().contains("\"currency\":\"USD\",\"page_size\":100,\"total_spend\":0.005,"), "{}", run.stdout);
    // An empty data directory: an empty answer.
    let empty = temp_dir();
    let run = summary(empty.path(), "A1", "", &[]);
    assert!(run.ok().contains("\"usage\":[],\"other_charges\":[]}"), "{}", run.stdout);

    let missing = dir.path().join("no-such-dir");
    let run = summary(&missing, "A1", "", &[]);
    assert_eq!(run.code, 1);
    assert_eq!(run.stdout, "");
    assert!(run.stderr.contains(missing.to_str().expect("UTF-8")), "{}", run.stderr);
    // A file where the data directory should be.
    let file = write(dir.path(), "plain-file", "x");
    let run = summary(&file, "A1", "", &[]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("not a directory"), "{}", run.stderr);
}

#[test]
fn hostile_inputs_never_panic() {
    // Odd bytes in every column position; the run fails or succeeds, but
    // never panics (checked by `common::telemeter`).
    let rows = [
        "c2,A1,,2026-11-20T11:00:00Z,voice,pstn,outbound,US,99999999999999999999999,0,0,",
        "c2,A1,,2026-11-20T11:00:00Z,voice,pstn,outbound,US,9223372036.854775808,0,0,",
        "c2,A1,,2026-11-20T11:00:00Z\u{e9}\u{e9},voice,pstn,outbound,US,1,0,0,",
        "c2,A1,,\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9}\u{e9},voice,pstn,outbound,US,1,0,0,",
        "c2,A1,,9999-12-31T23:59:59-23:59,voice,pstn,outbound,US,1,0,0,",
        "c2,A1,,0000-01-01T00:00:00+23:59,voice,pstn,outbound,US,1,0,0,",
        "c2,A1,,2026-11-20T11:00:00.1234567891Z,voice,pstn,outbound,US,1,0,0,",
        "c2,A1,,2026-02-29T11:00:00Z,voice,pstn,outbound,US,1,0,0,",
        "\"c2\nc3\",A1,,2026-11-20T11:00:00Z,voice,pstn,outbound,US,1,0,0,",
        "c2,A1,,2026-11-20T11:00:00Z,voice,pstn,outbound,US,.,0,0,",
        "c2,A1,,2026-11-20T11:00:00Z,voice,pstn,outbound,US,1.,0,0,",
        "c2,A1,,2026-11-20T11:00:00Z,voice,pstn,outbound,\u{c9}\u{c9},1,0,0,",
        "\"unterminated,A1,,2026-11-20T11:00:00Z,voice,pstn,outbound,US,1,0,0,",
    ];
    for row in rows {
        let dir = temp_dir();
        write(dir.path(), "calls/c.csv", with_row(CALLS, row));
        let run = summary(dir.path(), "A1", "from_date=2026-11-01&to_date=2026-11-21", &[]);
        assert!(run.code == 0 || (run.code == 1 && run.stderr.contains("calls/c.csv")), "{row}: {run:?}");
    }
    let dir = temp_dir();
    write(dir.path(), "calls/c.csv", [0xff, 0xfe, 0x00, 0x81, b'\n', b'x']);
    write(dir.path(), "charges/empty.csv", "");
    let run = summary(dir.path(), "A1", "", &[]);
    assert_eq!(run.code, 1, "{run:?}");
}

/// A damaged Parquet input is an error naming the file, exit 1, never a
/// crash: a page header whose count was damaged made polars ask for
/// 2^61 bytes (an abort) before `src/parquet.rs` checked each page
/// against its row group; a damaged page that trips one of polars'
/// assertions is caught, and reported once, with no panic message; a
/// damaged footer is refused before polars' footer reader sizes its lists;
/// a page whose writer kept its CRC-32 is checked against it.
/// (`tests/it/fuzzing.rs` damages every byte of these seeds in turn.)
#[test]
fn a_damaged_parquet_file_is_an_error_naming_it_not_a_crash() {
    let seed = |name: &str| std::fs::read(crate::common::root().join("fuzz/corpus/parquet_input").join(name));
    // Undamaged, the checksummed file reads: its sums are checked and agree.
    let dir = temp_dir();
    write(dir.path(), "calls/x.parquet", seed("pyarrow-page-crc-calls.parquet").expect("the seed"));
    let query = "granularity=month&from_date=2026-11-01&to_date=2026-12-01";
    let run = summary(dir.path(), "MA001SHGA32ZDQYG9N8T", query, &[]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("\"total_spend\":4.251031174"), "{}", run.stdout);
    let cases = [
        (
            "generated-calls.parquet",
            "calls/x.parquet",
            165,
            0x7f,
            "column 'record_id': a page header holds a negative count (-58)",
        ),
        (
            "categorical-messages-uncompressed.parquet",
            "messages/x.parquet",
            96,
            0xff,
            // polars (without its debug assertions, as the binary and the
            // tests build it) decodes the damaged page into no values.
            "its pages do not decode (column 'record_id': 0 values for 5 rows)",
        ),
        // pyarrow's write_page_checksum: the last bit of the amount
        // 0.501031174 flipped, which decodes as a valid 0.501031175.
        (
            "pyarrow-page-crc-calls.parquet",
            "calls/x.parquet",
            577,
            0x01,
            "column 'amount': a page's bytes do not match its checksum",
        ),
        // As the fuzzer left it (no byte changed): a list count in the
        // footer that made polars' footer reader ask for 136 GB.
        ("regression-footer-list-count", "calls/x.parquet", 0, 0x00, "its footer does not parse"),
    ];
    for (name, file, at, flip, why) in cases {
        let mut bytes = seed(name).expect("a Parquet seed");
        bytes[at] ^= flip;
        let dir = temp_dir();
        write(dir.path(), file, bytes);
        let run = summary(dir.path(), "A1", "", &[]);
        assert_eq!(run.code, 1, "{run:?}");
        let line = format!("error: {file}: not a readable Parquet file: {why}");
        assert!(run.stderr.starts_with(&line), "{}", run.stderr);
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }
}

const MESSAGE_COLUMNS: [&str; 11] = [
    "record_id",
    "auth_id",
    "subaccount_auth",
    "timestamp",
    "type",
    "direction",
    "country",
    "segments",
    "amount",
    "surcharge",
    "error_code",
];

/// A string-column Parquet messages file of `rows`.
fn message_parquet(path: &std::path::Path, rows: &[[&str; 11]]) {
    let columns: Vec<Vec<&str>> = (0..11).map(|i| rows.iter().map(|r| r[i]).collect()).collect();
    let named: Vec<(&str, &[&str])> = MESSAGE_COLUMNS.iter().zip(&columns).map(|(n, v)| (*n, v.as_slice())).collect();
    crate::common::write_string_parquet(path, &named);
}

#[test]
fn bad_parquet_rows_are_named_by_row() {
    let good = ["m1", "A1", "", "2026-11-20T10:00:00Z", "sms", "outbound", "US", "1", "0.5", "0", ""];
    let bad = ["m2", "A1", "", "2026-11-20T10:00:00Z", "sms", "outbound", "US", "1", "1.2e3", "0", ""];
    let dir = temp_dir();
    message_parquet(&dir.path().join("messages/2026/m.parquet"), &[good, bad]);
    let run = summary(dir.path(), "A1", "", &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.stderr,
        "error: messages/2026/m.parquet: row 2: column 'amount': '1.2e3' is not a decimal \
         (expected digits with an optional point: no sign, no exponent)\n"
    );

    // A conflict between a CSV line and a Parquet row names both.
    let dir = temp_dir();
    write(dir.path(), "messages/a.csv", MESSAGES);
    let changed = ["m1", "A1", "", "2026-11-20T10:00:00Z", "sms", "outbound", "US", "2", "0.0050", "0.0005", ""];
    message_parquet(&dir.path().join("messages/b.parquet"), &[changed]);
    let run = summary(dir.path(), "A1", "", &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert_eq!(
        run.stderr,
        "error: conflicting duplicate messages record_id 'm1': messages/a.csv:2 and messages/b.parquet: row 1 differ\n"
    );

    // Floating-point money is refused, naming the column.
    use polars::prelude::{Column, DataFrame, IntoColumn, NamedFrom, Series};
    let dir = temp_dir();
    let mut columns: Vec<Column> = MESSAGE_COLUMNS
        .iter()
        .zip(good)
        .filter(|(name, _)| **name != "amount")
        .map(|(name, value)| Series::new((*name).into(), [value]).into_column())
        .collect();
    columns.push(Series::new("amount".into(), [0.5f64]).into_column());
    crate::common::write_frame(&dir.path().join("messages/f.parquet"), DataFrame::new(1, columns).expect("frame"));
    let run = summary(dir.path(), "A1", "", &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("messages/f.parquet") && run.stderr.contains("column 'amount'"), "{}", run.stderr);
    assert!(run.stderr.contains("floating point is not exact"), "{}", run.stderr);

    // A file that is not Parquet at all.
    let dir = temp_dir();
    write(dir.path(), "transcriptions/t.parquet", "not parquet");
    let run = summary(dir.path(), "A1", "", &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("transcriptions/t.parquet: not a readable Parquet file"), "{}", run.stderr);
}

/// A reader that stops reading (`| head`) ends the command quietly: exit
/// 0, nothing on stderr, no panic, for every output that writes more than
/// the reader takes. The pipe is closed before the command writes, so the
/// first write fails every time.
#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    let sample = sample_data();
    let data = sample.to_str().expect("a UTF-8 path");
    let summary = ["summary", "--data", data, "--auth-id", "MA001SHGA32ZDQYG9N8T", "--now", "2026-11-21T12:00:00Z"];
    let window = ["--query", "from_date=2026-10-01&to_date=2026-11-21", "--page-size", "1", "--all-pages"];
    let runs: Vec<Vec<&str>> = vec![
        [&summary[..], &window[..]].concat(),
        [&summary[..], &window[..], &["--format", "csv", "-q"][..]].concat(),
        [&summary[..], &window[..], &["--format", "table"][..]].concat(),
        vec!["completions", "bash"],
        vec!["man"],
        vec!["--help"],
    ];
    for args in runs {
        let mut command = crate::common::command();
        command.env("TELEMETER_TOKEN_KEY", "test").args(&args);
        command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let mut child = command.spawn().expect("the binary starts");
        drop(child.stdout.take());
        let output = child.wait_with_output().expect("the binary ends");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(0), "{args:?}: stderr {stderr}");
        assert_eq!(stderr, "", "{args:?}");
    }
}
