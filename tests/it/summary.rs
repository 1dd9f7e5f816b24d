//! Golden tests of `telemeter summary` over `sample_data/`: every request's
//! stdout is compared byte for byte with `tests/golden/<name>.json`
//! (`UPDATE_GOLDEN=1` rewrites them). Every golden file was checked by hand
//! against the raw rows before it was accepted; `sample_data/README.md`
//! lists the rows and how the key numbers are derived.
//!
//! Also: pages concatenate to the unpaged result, thread count and
//! `--pretty` do not change the answer, flags mean the same as query keys,
//! and Parquet input (typed and string columns) answers exactly like the
//! same rows in CSV.

use std::path::Path;

use serde_json::Value;

use crate::common::{self, golden, sample_data, summary, temp_dir, NOW};

/// One golden request: file name, account, query string.
const CASES: &[(&str, &str, &str)] = &[
    // Defaults from --now: day granularity, 2026-11-14..2026-11-21.
    ("defaults", "MA001SHGA32ZDQYG9N8T", ""),
    // Hour buckets of one day; fractional seconds stay in their hour.
    ("hour_one_day", "MA001SHGA32ZDQYG9N8T", "granularity=hour&from_date=2026-11-20&to_date=2026-11-21"),
    // Hour over the default window: exactly the 7-day cap.
    ("hour_defaults", "MA001SHGA32ZDQYG9N8T", "granularity=hour"),
    // Every November day up to now.
    ("day_november", "MA001SHGA32ZDQYG9N8T", "from_date=2026-11-01&to_date=2026-11-21&page_size=1000"),
    // Month buckets clipped to a window starting mid-October.
    ("month_clipped", "MA001SHGA32ZDQYG9N8T", "granularity=month&from_date=2026-10-15&to_date=2026-11-21"),
    // Year buckets: 2025-07-01..2026-01-01 (empty) and 2026-01-01..2026-12-01.
    ("year", "MA001SHGA32ZDQYG9N8T", "granularity=year&from_date=2025-07-01&to_date=2026-12-01"),
    // Only other charges: no usage rows, other_charges kept.
    ("product_other", "MA001SHGA32ZDQYG9N8T", "product=other&from_date=2026-11-01&to_date=2026-11-21"),
    // A list without other (repeated key and comma list): no other_charges.
    (
        "product_voice_message",
        "MA001SHGA32ZDQYG9N8T",
        "product=voice&product=message,voice&from_date=2026-11-14&to_date=2026-11-21",
    ),
    // Country filter: transcriptions kept, empty countries dropped.
    ("country_us", "MA001SHGA32ZDQYG9N8T", "country=US&from_date=2026-11-14&to_date=2026-11-21"),
    // Direction filter, month granularity.
    (
        "direction_inbound",
        "MA001SHGA32ZDQYG9N8T",
        "direction=inbound&granularity=month&from_date=2026-10-01&to_date=2026-11-21",
    ),
    // error_code filters messages only.
    (
        "error_code_30",
        "MA001SHGA32ZDQYG9N8T",
        "error_code=30&product=message,voice&from_date=2026-11-01&to_date=2026-11-21",
    ),
    // hangup_cause filters voice and zentrunk only.
    (
        "hangup_cause_3010",
        "MA001SHGA32ZDQYG9N8T",
        "hangup_cause=3010&product=voice,zentrunk,message&from_date=2026-11-01&to_date=2026-11-21",
    ),
    // A subaccount: meta.subaccount_auth, total_subaccount_spend, no other_charges.
    (
        "subaccount_alpha",
        "MA001SHGA32ZDQYG9N8T",
        "subaccount_auth=SAALPHAKGPP2438DZWD3&granularity=month&from_date=2026-10-01&to_date=2026-12-01",
    ),
    // A EUR account with a subaccount.
    ("currency_eur", "MA002PCHQ444XLFXQN5B", "from_date=2026-11-01&to_date=2026-11-21"),
    // Records but no accounts.csv row: USD.
    ("no_account_row", "MA003GM22SVQQT8ZPDNQ", "granularity=month&from_date=2026-11-01&to_date=2026-12-01"),
    // An accounts.csv row with an empty currency and no records.
    ("no_data", "MA004DEFGZHA3AU3ZWLC", ""),
    // An account nobody has heard of: no data, USD.
    ("unknown_account", "NOBODY", "granularity=year&from_date=2026-01-01&to_date=2027-01-01"),
    // Unknown keys dropped, an auth_id key ignored, percent-encoding read.
    (
        "query_noise",
        "MA002PCHQ444XLFXQN5B",
        "auth_id=MA001SHGA32ZDQYG9N8T&foo=bar&from_date=2026%2D11%2D01&to_date=2026-11-21&product=all",
    ),
];

/// The paged request: 13 usage rows, page_size 3, other charges on page 1.
const PAGED: &str = "product=voice,transcription,other&from_date=2026-11-05&to_date=2026-11-21&page_size=3";

fn stdout_of(auth_id: &str, query: &str, extra: &[&str]) -> String {
    summary(&sample_data(), auth_id, query, extra).ok().to_owned()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn golden_requests() {
    for (name, auth_id, query) in CASES {
        let stdout = stdout_of(auth_id, query, &[]);
        assert!(stdout.ends_with('\n') && stdout.matches('\n').count() == 1, "{name}: one JSON line");
        golden(&format!("{name}.json"), &stdout);
    }
}

/// `query` asking for the page of `token`.
fn with_token(query: &str, token: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
    format!("{query}&page_token={encoded}")
}

/// `summary --all-pages` of `data` on `threads` threads.
fn all_pages_on(data: &Path, threads: &str, auth_id: &str, query: &str) -> String {
    let data = data.to_str().expect("UTF-8 path");
    let args = ["--threads", threads, "summary", "--data", data, "--auth-id", auth_id, "--query", query];
    common::telemeter(&[&args[..], &["--now", NOW, "--all-pages"]].concat()).ok().to_owned()
}

/// Follows `next_page_token` from page 1; every page's stdout.
fn follow_pages(auth_id: &str, query: &str) -> Vec<String> {
    let mut pages = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let query = match &token {
            Some(token) => with_token(query, token),
            None => query.to_owned(),
        };
        let stdout = stdout_of(auth_id, &query, &[]);
        token = json(&stdout)["meta"]["next_page_token"].as_str().map(str::to_owned);
        pages.push(stdout);
        if token.is_none() {
            return pages;
        }
        assert!(pages.len() < 50, "paging does not end");
    }
}

#[test]
fn paging_through_every_page() {
    let pages = follow_pages("MA001SHGA32ZDQYG9N8T", PAGED);
    assert_eq!(pages.len(), 5, "13 rows in pages of 3");
    for (i, page) in pages.iter().enumerate() {
        golden(&format!("paged_{}.json", i + 1), page);
        let value = json(page);
        let meta = &value["meta"];
        let first = i == 0;
        assert_eq!(meta.get("total_spend").is_some(), first, "total_spend on page 1 only");
        assert_eq!(meta.get("subaccount_spend").is_some(), first, "subaccount_spend on page 1 only");
        assert_eq!(value.get("other_charges").is_some(), first, "other_charges on page 1 only");
        assert_eq!(meta.get("next_page_token").is_some(), i + 1 < pages.len(), "token exactly when rows remain");
        let rows = value["usage"].as_array().expect("usage").len();
        assert_eq!(rows, if i + 1 < pages.len() { 3 } else { 1 });
    }
    // --all-pages writes the same pages, one per line.
    let all = stdout_of("MA001SHGA32ZDQYG9N8T", PAGED, &["--all-pages"]);
    golden("paged_all_pages.jsonl", &all);
    let lines: Vec<&str> = all.lines().collect();
    assert_eq!(lines.len(), pages.len());
    for (line, page) in lines.iter().zip(&pages) {
        assert_eq!(format!("{line}\n"), *page);
    }
}

#[test]
fn pages_concatenate_to_the_unpaged_result() {
    let queries = [
        ("MA001SHGA32ZDQYG9N8T", "from_date=2026-11-01&to_date=2026-11-21"),
        ("MA001SHGA32ZDQYG9N8T", "granularity=hour"),
        ("MA001SHGA32ZDQYG9N8T", "product=message,zentrunk&granularity=month&from_date=2026-10-01&to_date=2026-12-01"),
        ("MA002PCHQ444XLFXQN5B", "from_date=2026-11-01&to_date=2026-11-21"),
    ];
    for (auth_id, query) in queries {
        let whole = json(&stdout_of(auth_id, &format!("{query}&page_size=1000"), &[]));
        let whole_rows = whole["usage"].as_array().expect("usage").clone();
        assert!(!whole_rows.is_empty());
        for size in [1, 3, 7] {
            let pages = follow_pages(auth_id, &format!("{query}&page_size={size}"));
            let mut rows = Vec::new();
            for page in &pages {
                rows.extend(json(page)["usage"].as_array().expect("usage").iter().cloned());
            }
            assert_eq!(rows, whole_rows, "{auth_id} {query} page_size={size}");
            assert_eq!(pages.len(), whole_rows.len().div_ceil(size));
            let first = json(&pages[0]);
            assert_eq!(first["meta"]["total_spend"], whole["meta"]["total_spend"]);
            assert_eq!(first["meta"]["subaccount_spend"], whole["meta"]["subaccount_spend"]);
            assert_eq!(first["other_charges"], whole["other_charges"]);
        }
    }
}

#[test]
fn thread_count_does_not_change_a_byte() {
    let data = sample_data();
    for (_, auth_id, query) in CASES.iter().chain([&("paged", "MA001SHGA32ZDQYG9N8T", PAGED)]) {
        let run = |threads: &str| all_pages_on(&data, threads, auth_id, query);
        let one = run("1");
        assert_eq!(one, run("4"), "{auth_id} {query}");
        assert_eq!(one, stdout_of(auth_id, query, &["--all-pages"]), "{auth_id} {query}");
    }
}

#[test]
fn pretty_is_the_same_json() {
    for (name, auth_id, query) in CASES {
        let compact = stdout_of(auth_id, query, &[]);
        let pretty = stdout_of(auth_id, query, &["--pretty"]);
        assert_ne!(compact, pretty, "{name}");
        assert!(pretty.contains("\n  \"meta\": {"), "{name}: indented");
        assert_eq!(json(&compact), json(&pretty), "{name}");
        // Same key order too.
        let compact_again = serde_json::to_string(&json(&pretty)).expect("JSON");
        assert_eq!(compact_again, serde_json::to_string(&json(&compact)).expect("JSON"), "{name}");
    }
}

#[test]
fn flags_mean_the_same_as_query_keys() {
    let by_query = stdout_of(
        "MA001SHGA32ZDQYG9N8T",
        "granularity=month&from_date=2026-10-15&to_date=2026-11-21&product=voice&product=message\
         &country=US&direction=outbound&page_size=2",
        &[],
    );
    let by_flags = stdout_of(
        "MA001SHGA32ZDQYG9N8T",
        "",
        &[
            "--granularity",
            "month",
            "--from-date",
            "2026-10-15",
            "--to-date",
            "2026-11-21",
            "--product",
            "voice",
            "--product",
            "message",
            "--country",
            "US",
            "--direction",
            "outbound",
            "--page-size",
            "2",
        ],
    );
    assert_eq!(json(&by_query), json(&by_flags));
}

/// Whole-data totals per account, computed by hand from the rows listed in
/// `sample_data/README.md` (not from the engine): total_spend, the
/// subaccount spends, the currency.
#[test]
fn whole_data_totals_match_the_readme() {
    let expected: &[(&str, &str, &str, &str)] = &[
        (
            "MA001SHGA32ZDQYG9N8T",
            "USD",
            "7.06",
            r#"{"SAALPHAKGPP2438DZWD3":0.117,"SABETAR7DC58MD39DVS4":0.236,"SAGAMMAGW9CCFK5GBEPU":0.056}"#,
        ),
        ("MA002PCHQ444XLFXQN5B", "EUR", "1.16", r#"{"SAONEP9YKFY3R63AE6L9":0.13}"#),
        ("MA003GM22SVQQT8ZPDNQ", "USD", "0.818", "{}"),
        ("MA004DEFGZHA3AU3ZWLC", "USD", "0.0", "{}"),
    ];
    for (auth_id, currency, total, subaccounts) in expected {
        let stdout = stdout_of(auth_id, "granularity=year&from_date=2026-01-01&to_date=2027-01-01", &[]);
        let value = json(&stdout);
        assert_eq!(value["meta"]["currency"], *currency, "{auth_id}");
        let meta = stdout.split("\"usage\"").next().expect("meta");
        assert!(meta.contains(&format!("\"total_spend\":{total},")), "{auth_id}: {meta}");
        assert!(meta.contains(&format!("\"subaccount_spend\":{subaccounts}}}")), "{auth_id}: {meta}");
    }
    // Usage only (no other charges), MA001SHGA32ZDQYG9N8T: 0.457 calls + 0.148 messages + 0.375 transcriptions.
    let stdout = stdout_of(
        "MA001SHGA32ZDQYG9N8T",
        "granularity=year&from_date=2026-01-01&to_date=2027-01-01&product=message,voice,zentrunk,transcription",
        &[],
    );
    assert!(stdout.contains("\"total_spend\":0.98,"), "{stdout}");
}

/// Converts every sample CSV file (plain, gz, zst) into a Parquet file of
/// the same rows, with natural types (`typed`: Datetime, Int64,
/// Decimal(38, 9), nulls for empty text) or all-string columns.
fn parquet_copy(out: &Path, typed: bool) {
    use polars::prelude::{
        Column, DataFrame, Int128Chunked, Int64Chunked, IntoColumn, IntoSeries, NamedFrom, ParquetWriter, Series,
        TimeUnit, TimeZone,
    };
    use std::io::Read;

    std::fs::copy(sample_data().join("accounts.csv"), out.join("accounts.csv")).expect("copy accounts.csv");
    let mut files = Vec::new();
    // Only the four record folders: sample_data/ also holds files of other
    // resources (endpoints, recordings) that the summary does not read.
    let mut stack: Vec<_> = ["calls", "messages", "transcriptions", "charges"].map(|k| sample_data().join(k)).into();
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read sample_data") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push(path);
            }
        }
    }
    assert!(files.len() >= 10, "the sample files");
    for path in files {
        let name = path.file_name().and_then(|n| n.to_str()).expect("name").to_owned();
        let raw = std::fs::read(&path).expect("read");
        let bytes = if name.ends_with(".gz") {
            let mut text = Vec::new();
            flate2::read::GzDecoder::new(&raw[..]).read_to_end(&mut text).expect("gunzip");
            text
        } else if name.ends_with(".zst") {
            zstd::stream::decode_all(&raw[..]).expect("unzstd")
        } else if name.ends_with(".csv") {
            raw
        } else {
            continue;
        };
        let mut reader = csv::Reader::from_reader(&bytes[..]);
        let headers: Vec<String> = reader.headers().expect("header").iter().map(str::to_owned).collect();
        let rows: Vec<Vec<String>> =
            reader.records().map(|r| r.expect("row").iter().map(str::to_owned).collect()).collect();
        let mut columns = Vec::new();
        for (i, header) in headers.iter().enumerate() {
            let cells: Vec<&str> = rows.iter().map(|r| r[i].as_str()).collect();
            let column: Column = match header.as_str() {
                _ if !typed => Series::new(header.into(), cells).into_column(),
                "timestamp" => {
                    let nanos: Vec<i64> = cells.iter().map(|t| epoch_nanos(t)).collect();
                    Int64Chunked::from_vec(header.into(), nanos)
                        .into_datetime(TimeUnit::Nanoseconds, Some(TimeZone::UTC))
                        .into_series()
                        .into_column()
                }
                "billed_seconds" | "amount" | "surcharge" | "duration_seconds" => {
                    let nanos: Vec<i128> = cells.iter().map(|d| decimal_nanos(d)).collect();
                    Int128Chunked::from_vec(header.into(), nanos)
                        .into_decimal(38, 9)
                        .expect("decimal")
                        .into_series()
                        .into_column()
                }
                "segments" | "units" => {
                    let counts: Vec<i64> = cells.iter().map(|c| c.parse().expect("count")).collect();
                    Int64Chunked::from_vec(header.into(), counts).into_series().into_column()
                }
                _ => {
                    let text: Vec<Option<&str>> = cells.iter().map(|c| (!c.is_empty()).then_some(*c)).collect();
                    Series::new(header.into(), text).into_column()
                }
            };
            columns.push(column);
        }
        let mut frame = DataFrame::new(rows.len(), columns).expect("frame");
        let relative = path.strip_prefix(sample_data()).expect("relative").to_str().expect("UTF-8").to_owned();
        let stem = relative.split('.').next().expect("stem");
        let target = out.join(format!("{stem}.parquet"));
        std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
        let file = std::fs::File::create(&target).expect("create parquet");
        ParquetWriter::new(file).finish(&mut frame).expect("write parquet");
    }
}

/// A record timestamp (every accepted form) as Unix nanoseconds.
fn epoch_nanos(text: &str) -> i64 {
    let mut text = text.replacen(' ', "T", 1);
    let has_offset = text.ends_with('Z') || text[19..].contains(['+', '-']);
    if !has_offset {
        text.push('Z');
    }
    chrono::DateTime::parse_from_rfc3339(&text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .timestamp_nanos_opt()
        .expect("in range")
}

/// A decimal string as an integer of 1e-9 units.
fn decimal_nanos(text: &str) -> i128 {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    assert!(fraction.len() <= 9);
    let whole: i128 = whole.parse().expect("whole part");
    let fraction: i128 = format!("{fraction:0<9}").parse().expect("fraction");
    whole * 1_000_000_000 + fraction
}

#[test]
fn parquet_answers_like_csv() {
    for typed in [true, false] {
        let dir = temp_dir();
        parquet_copy(dir.path(), typed);
        let parquet_files = walk_count(dir.path(), ".parquet");
        assert_eq!(parquet_files, 11, "one Parquet file per sample CSV file");
        for (name, auth_id, query) in CASES.iter().chain([&("paged", "MA001SHGA32ZDQYG9N8T", PAGED)]) {
            let from_csv = stdout_of(auth_id, query, &["--all-pages"]);
            let from_parquet = summary(dir.path(), auth_id, query, &["--all-pages"]).ok().to_owned();
            assert_eq!(from_parquet, from_csv, "{name} (typed columns: {typed})");
        }
    }
}

fn walk_count(dir: &Path, suffix: &str) -> usize {
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            n += walk_count(&path, suffix);
        } else if path.to_string_lossy().ends_with(suffix) {
            n += 1;
        }
    }
    n
}

/// Runs a request over `sample_data/` with another "now".
fn at_now(now: &str, query: &str) -> Value {
    let data = sample_data();
    let data = data.to_str().expect("UTF-8 path");
    let args = ["summary", "--data", data, "--auth-id", "MA001SHGA32ZDQYG9N8T", "--query", query, "--now", now];
    json(common::telemeter(&args).ok())
}

#[test]
fn defaults_follow_the_utc_day_of_now_and_do_not_drift_between_pages() {
    // 02:00+05:00 on the 21st is 21:00Z on the 20th: today is the 20th.
    let meta = &at_now("2026-11-21T02:00:00+05:00", "")["meta"];
    assert_eq!(
        (meta["from_date"].as_str(), meta["to_date"].as_str()),
        (Some("2026-11-13T00:00:00Z"), Some("2026-11-20T00:00:00Z"))
    );

    // Page 1 just before midnight, page 2 just after: the window stays.
    let first = at_now("2026-11-21T23:59:59Z", "page_size=5");
    let token = first["meta"]["next_page_token"].as_str().expect("a token").to_owned();
    let encoded: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
    let second = at_now("2026-11-22T00:00:01Z", &format!("page_size=5&page_token={encoded}"));
    assert_eq!(second["meta"]["from_date"], "2026-11-14T00:00:00Z");
    assert_eq!(second["meta"]["to_date"], "2026-11-21T00:00:00Z");
    let all = json(&stdout_of("MA001SHGA32ZDQYG9N8T", "page_size=1000", &[]));
    let expected: Vec<Value> = all["usage"].as_array().expect("usage")[5..10].to_vec();
    assert_eq!(second["usage"].as_array().expect("usage"), &expected);
}

/// A million transcriptions of 0.000000001 each, in four files (one of
/// them gzip, each big enough to be read in several chunks): the sums are
/// exactly 0.001, with one thread or several.
#[test]
fn a_million_nanos_sum_exactly_through_the_binary() {
    let dir = temp_dir();
    let header = "record_id,auth_id,subaccount_auth,timestamp,type,duration_seconds,amount\n";
    for part in 0..4 {
        let mut text = String::with_capacity(250_000 * 70 + header.len());
        text.push_str(header);
        for i in 0..250_000 {
            text.push_str(&format!("t{part}_{i},A1,,2026-11-20T10:00:00Z,standard,0.000000001,0.000000001\n"));
        }
        if part == 3 {
            common::write(dir.path(), "transcriptions/part3.csv.gz", common::gzip(text.as_bytes()));
        } else {
            common::write(dir.path(), &format!("transcriptions/part{part}.csv"), text);
        }
    }
    let run = |threads: &str| {
        let data = dir.path().to_str().expect("UTF-8 path").to_owned();
        let args = ["--threads", threads, "summary", "--data", &data, "--auth-id", "A1", "--now", NOW];
        common::telemeter(&args).ok().to_owned()
    };
    let many = run("4");
    assert!(
        many.contains(
            "\"usage\":[{\"from_date\":\"2026-11-20T00:00:00Z\",\"to_date\":\"2026-11-21T00:00:00Z\",\
             \"product\":\"transcription\",\"type\":\"standard\",\"total_units\":1000000,\
             \"duration_seconds\":0.001,\"total_amount\":0.001}]"
        ),
        "{many}"
    );
    assert!(many.contains("\"total_spend\":0.001,"), "{many}");
    assert_eq!(run("1"), many);
}

/// `--all-pages` makes its pages a run at a time on the threads: across the
/// runs' edges (64 pages a run) each line is still the page a client gets
/// by following the token of the line before, and one thread writes the
/// same bytes.
#[test]
fn all_pages_across_runs_are_the_pages_the_tokens_give() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    let data_arg = data.to_str().expect("UTF-8 path");
    common::telemeter(&[
        "generate",
        "--out",
        data_arg,
        "--calls",
        "4000",
        "--messages",
        "2000",
        "--transcriptions",
        "0",
        "--charges",
        "0",
        "--accounts",
        "1",
        "--start",
        "2026-10-01",
        "--days",
        "20",
        "--seed",
        "3",
        "--quiet",
    ])
    .ok();
    let accounts = std::fs::read_to_string(data.join("accounts.csv")).expect("accounts.csv");
    let auth_id = accounts.lines().nth(1).and_then(|line| line.split(',').next()).expect("an account");
    let query = "from_date=2026-10-01&to_date=2026-10-21&page_size=2";
    let all = summary(&data, auth_id, query, &["--all-pages"]).ok().to_owned();
    let lines: Vec<&str> = all.lines().collect();
    assert!(lines.len() > 2 * 64 + 1, "{} pages: fewer than three runs", lines.len());
    let last = json(lines[lines.len() - 1]);
    assert!(last["meta"].get("next_page_token").is_none(), "the last line is the last page");
    for k in [1, 63, 64, 65, 127, 128, 129, lines.len() - 1] {
        let token = json(lines[k - 1])["meta"]["next_page_token"].as_str().expect("a token").to_owned();
        let page = summary(&data, auth_id, &with_token(query, &token), &[]).ok().to_owned();
        assert_eq!(page, format!("{}\n", lines[k]), "page {k}");
    }
    let all_one_thread = all_pages_on(&data, "1", auth_id, query);
    assert_eq!(all_one_thread, all, "one thread");
}
