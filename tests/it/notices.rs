//! Warnings ("notices") on stderr for what is surprising about a run: a
//! query key that is not a parameter, a data directory with no record
//! folder or with files nothing reads, an account no one knows, a window
//! with no data, an `--accounts` id with no data. They never change stdout
//! or the exit code, and `--quiet` silences them. Also the precise
//! messages: calendar-invalid dates, short rows, both source flags named.

use std::path::Path;

use crate::common::{self, sample_data, summary, telemeter, NOW};

/// The `warning:` lines of a run's stderr.
fn warnings(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("warning: ")).collect()
}

/// `summary` over `data` with `query`, with and without `--quiet`: the
/// same stdout and exit code, no warning when quiet. The loud run's
/// warnings.
fn said(data: &Path, auth_id: &str, query: &str) -> Vec<String> {
    let loud = summary(data, auth_id, query, &[]);
    let quiet = summary(data, auth_id, query, &["--quiet"]);
    assert_eq!(loud.code, quiet.code, "exit code: {}", loud.stderr);
    assert_eq!(loud.stdout, quiet.stdout);
    assert!(warnings(&quiet.stderr).is_empty(), "--quiet prints warnings: {}", quiet.stderr);
    warnings(&loud.stderr).into_iter().map(str::to_owned).collect()
}

/// [`said`] with `surprising`, whose stdout and exit code are also those
/// of a run with `plain` (which warns of nothing).
fn same_output(data: &Path, auth_id: &str, surprising: &str, plain: &str) -> Vec<String> {
    let noisy = summary(data, auth_id, surprising, &[]);
    let clean = summary(data, auth_id, plain, &[]);
    assert_eq!(noisy.code, clean.code, "exit code: {}", noisy.stderr);
    assert_eq!(noisy.stdout, clean.stdout, "stdout changed by {surprising:?}");
    assert!(warnings(&clean.stderr).is_empty(), "{plain:?} warns: {}", clean.stderr);
    said(data, auth_id, surprising)
}

#[test]
fn dropped_query_keys_are_named_with_the_parameter_they_misspell() {
    let plain = "from_date=2026-11-14&to_date=2026-11-21";
    let said = same_output(
        &sample_data(),
        "MA001SHGA32ZDQYG9N8T",
        &format!("{plain}&fromdate=2026-11-01&auth_id=MA002&x=1"),
        plain,
    );
    assert_eq!(
        said,
        [
            "warning: query key 'fromdate' is not an API parameter and was ignored (did you mean 'from_date'?)",
            "warning: query key 'auth_id' was ignored: the account is the one of the request path (--auth-id)",
            "warning: query key 'x' is not an API parameter and was ignored (the parameters are subaccount_auth, \
             granularity, from_date, to_date, product, error_code, hangup_cause, direction, country, page_size, \
             page_token, timezone)",
        ]
    );
    // The same keys in `report --query`.
    let out = common::temp_dir();
    let data = sample_data();
    let run = telemeter(&[
        "report",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.path().join("r").to_str().unwrap(),
        "--accounts",
        "MA001SHGA32ZDQYG9N8T",
        "--formats",
        "json",
        "--query",
        "granularty=day",
        "--now",
        NOW,
    ]);
    run.ok();
    assert!(
        run.stderr.contains(
            "warning: query key 'granularty' is not an API parameter and was ignored (did you mean 'granularity'?)"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn a_data_directory_without_record_folders_or_with_strange_files_is_named() {
    let dir = common::temp_dir();
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    assert_eq!(
        said(&empty, "A1", ""),
        [
            format!(
                "warning: {} has no calls/, messages/, transcriptions/ or charges/ folder: nothing to read",
                empty.display()
            ),
            "warning: account A1 is not in accounts.csv and has no records \
             (a subaccount's usage is in its parent account's summary, with subaccount_auth=A1)"
                .to_owned(),
        ]
    );

    let odd = dir.path().join("odd");
    common::write(&odd, "calls/notes.txt", "not records");
    common::write(&odd, "calls/.hidden", "");
    common::write(&odd, "foo.txt", "");
    common::write(&odd, "README.md", "");
    common::write(&odd, "accounts.csv", "auth_id\nA1\n");
    std::fs::create_dir_all(odd.join("call")).unwrap();
    assert_eq!(
        said(&odd, "A1", ""),
        [
            "warning: ignoring calls/notes.txt: not a record file (.csv, .csv.gz, .csv.zst, .parquet)",
            "warning: ignoring call/: not part of a data directory (calls/, messages/, transcriptions/, charges/, \
             accounts.csv, endpoints.csv, registrations.csv, recordings/)",
            "warning: ignoring foo.txt: not part of a data directory (calls/, messages/, transcriptions/, charges/, \
             accounts.csv, endpoints.csv, registrations.csv, recordings/)",
            "warning: no usage for A1 between 2026-11-14 and 2026-11-21: it has no records",
        ]
    );
    // `ingest` says the same, and still ingests.
    let store = dir.path().join("store");
    let run = telemeter(&["ingest", "--data", odd.to_str().unwrap(), "--store", store.to_str().unwrap()]);
    run.ok();
    assert!(run.stderr.contains("warning: ignoring calls/notes.txt: not a record file"), "{}", run.stderr);
    let quiet = telemeter(&["ingest", "--quiet", "--data", odd.to_str().unwrap(), "--store", store.to_str().unwrap()]);
    quiet.ok();
    assert!(warnings(&quiet.stderr).is_empty(), "{}", quiet.stderr);
    // The sample data set (with its README) is a clean layout: no warning.
    assert!(warnings(&summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", "", &[]).stderr).is_empty());
}

#[test]
fn calendar_invalid_dates_say_why_in_the_400_and_on_stderr() {
    let run = summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", "to_date=2026-11-31", &[]);
    assert_eq!(run.code, 2);
    let message = "invalid to_date '2026-11-31': not a calendar date (November 2026 has 30 days)";
    assert!(run.stdout.contains(&format!("\"error\":\"{message}\"")), "{}", run.stdout);
    assert_eq!(run.stderr.trim_end(), format!("error: {message}"));
    let run = telemeter(&["generate", "--out", "/nonexistent/never-written", "--start", "2026-02-29"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("'2026-02-29' is not a calendar date (February 2026 has 28 days)"), "{}", run.stderr);
}

#[test]
fn a_short_row_names_the_column_it_lacks() {
    let dir = common::temp_dir();
    common::write(
        dir.path(),
        "transcriptions/t.csv",
        "record_id,auth_id,subaccount_auth,timestamp,type,duration_seconds,amount\n\
         t1,A1,,2026-11-20T10:00:00Z,standard,60,0.02\n\
         t2,A1,,2026-11-20T10:00:00Z,standard\n",
    );
    let run = summary(dir.path(), "A1", "", &[]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "transcriptions/t.csv:3: column 'duration_seconds': 't2,A1,,2026-11-20T10:00:00Z,standard' has 5 fields, \
             the header has 7: column 'duration_seconds' (and the 1 column after it) is missing"
        ),
        "{}",
        run.stderr
    );
}

#[test]
fn a_command_without_a_source_names_both_flags() {
    for command in [&["summary", "--auth-id", "A"][..], &["report", "--out", "o"], &["serve"]] {
        let run = telemeter(command);
        assert_eq!(run.code, 2, "{command:?}: {}", run.stderr);
        assert!(run.stderr.contains("--data") && run.stderr.contains("--store"), "{command:?}: {}", run.stderr);
    }
}

#[test]
fn an_unknown_account_is_named_and_its_answer_unchanged() {
    // NOSUCH and MA004DEFGZHA3AU3ZWLC (a row in accounts.csv, no records) answer the same
    // empty usage but for the account id; only NOSUCH is unknown.
    let said_nosuch = said(&sample_data(), "NOSUCH", "");
    assert_eq!(
        said_nosuch,
        ["warning: account NOSUCH is not in accounts.csv and has no records \
             (a subaccount's usage is in its parent account's summary, with subaccount_auth=NOSUCH)"]
    );
    let run = summary(&sample_data(), "NOSUCH", "", &[]);
    assert_eq!(run.code, 0);
    assert!(run.stdout.contains("\"usage\":[]"), "{}", run.stdout);
    // The same from a store.
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    telemeter(&["ingest", "--data", sample_data().to_str().unwrap(), "--store", store.to_str().unwrap()]).ok();
    let from_store = |auth_id: &str, query: &str| {
        telemeter(&[
            "summary",
            "--store",
            store.to_str().unwrap(),
            "--auth-id",
            auth_id,
            "--query",
            query,
            "--now",
            NOW,
        ])
    };
    let stored = from_store("NOSUCH", "");
    assert_eq!(stored.stdout, run.stdout);
    assert_eq!(
        warnings(&stored.stderr),
        ["warning: account NOSUCH is not in accounts.csv and has no records \
             (a subaccount's usage is in its parent account's summary, with subaccount_auth=NOSUCH)"]
    );
    // An account with usage in the window: nothing to say.
    assert!(warnings(&from_store("MA001SHGA32ZDQYG9N8T", "").stderr).is_empty());
}

#[test]
fn a_window_without_the_accounts_data_says_which_dates_the_data_covers() {
    // The dates the data covers, derived from sample_data itself: the
    // earliest and latest timestamps of MA001SHGA32ZDQYG9N8T's records, and of all.
    let (mut account, mut all) = (Vec::new(), Vec::new());
    for kind in ["calls", "messages", "transcriptions", "charges"] {
        let mut files = Vec::new();
        collect(&sample_data().join(kind), &mut files);
        for file in files {
            let bytes = std::fs::read(&file).unwrap();
            let name = file.to_str().unwrap();
            let bytes = if name.ends_with(".gz") {
                let mut text = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut text).unwrap();
                text
            } else if name.ends_with(".zst") {
                zstd::decode_all(&bytes[..]).unwrap()
            } else {
                bytes
            };
            let text = String::from_utf8(bytes).unwrap();
            let mut lines = text.lines();
            let header: Vec<&str> = lines.next().unwrap().split(',').collect();
            let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
            let (auth, time) = (at("auth_id"), at("timestamp"));
            for line in lines.filter(|l| !l.is_empty()) {
                let fields: Vec<&str> = line.split(',').collect();
                let (Some(id), Some(stamp)) = (fields.get(auth), fields.get(time)) else { continue };
                let stamp = stamp.replace(' ', "T");
                let parsed = chrono::DateTime::parse_from_rfc3339(&stamp)
                    .or_else(|_| chrono::DateTime::parse_from_rfc3339(&format!("{stamp}Z")));
                let Ok(instant) = parsed else { panic!("{name}: timestamp '{stamp}'") };
                let date = instant.with_timezone(&chrono::Utc).date_naive().to_string();
                all.push(date.clone());
                if *id == "MA001SHGA32ZDQYG9N8T" {
                    account.push(date);
                }
            }
        }
    }
    let range = |dates: &mut Vec<String>| {
        dates.sort();
        format!("{} to {}", dates[0], dates[dates.len() - 1])
    };
    let (account, all) = (range(&mut account), range(&mut all));
    let window = "from_date=2026-06-01&to_date=2026-06-08";
    assert_eq!(
        said(&sample_data(), "MA001SHGA32ZDQYG9N8T", window),
        [format!(
            "warning: no usage for MA001SHGA32ZDQYG9N8T between 2026-06-01 and 2026-06-08; its data covers {account}"
        )]
    );
    assert_eq!(
        said(&sample_data(), "MA004DEFGZHA3AU3ZWLC", window),
        [format!(
            "warning: no usage for MA004DEFGZHA3AU3ZWLC between 2026-06-01 and 2026-06-08: it has no records (the data covers {all})"
        )]
    );
    // A window inside the data whose filters keep nothing.
    let filtered = said(&sample_data(), "MA001SHGA32ZDQYG9N8T", "product=voice&country=ZZ");
    assert_eq!(filtered.len(), 1, "{filtered:?}");
    assert!(filtered[0].contains("matches the request's filters"), "{filtered:?}");
    // From a store: the account's dates from its rollups (to the day).
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    telemeter(&["ingest", "--data", sample_data().to_str().unwrap(), "--store", store.to_str().unwrap()]).ok();
    let run = telemeter(&[
        "summary",
        "--store",
        store.to_str().unwrap(),
        "--auth-id",
        "MA001SHGA32ZDQYG9N8T",
        "--query",
        window,
        "--now",
        NOW,
    ]);
    assert_eq!(run.stdout, summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", window, &[]).stdout);
    assert_eq!(
        warnings(&run.stderr),
        [format!(
            "warning: no usage for MA001SHGA32ZDQYG9N8T between 2026-06-01 and 2026-06-08; its data covers {account}"
        )]
    );
}

/// Every file below `dir`.
fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, out);
        } else {
            out.push(path);
        }
    }
}

#[test]
fn report_writes_no_folder_for_an_account_no_one_knows() {
    let dir = common::temp_dir();
    let data = sample_data();
    let run_report = |out: &Path, accounts: &str, quiet: bool| {
        let mut args = vec![
            "report",
            "--data",
            data.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--accounts",
            accounts,
            "--now",
            NOW,
        ];
        if quiet {
            args.push("--quiet");
        }
        telemeter(&args)
    };
    let with = dir.path().join("with");
    let run = run_report(&with, "MA001SHGA32ZDQYG9N8T,NOSUCH,MA004DEFGZHA3AU3ZWLC", false);
    run.ok();
    // MA004DEFGZHA3AU3ZWLC is named, known and without records: said as `summary` says it.
    let md004 = said(&data, "MA004DEFGZHA3AU3ZWLC", "");
    assert_eq!(md004.len(), 1, "{md004:?}");
    assert!(md004[0].starts_with("warning: no usage for MA004DEFGZHA3AU3ZWLC between"), "{md004:?}");
    assert_eq!(
        warnings(&run.stderr),
        [
            "warning: account NOSUCH is not in accounts.csv and has no records \
             (a subaccount's usage is in its parent account's summary, with subaccount_auth=NOSUCH): \
             no report written for it",
            &md004[0]
        ]
    );
    assert!(!with.join("NOSUCH").exists());
    // MA004DEFGZHA3AU3ZWLC (in accounts.csv, no records) still gets its report.
    assert!(with.join("MA004DEFGZHA3AU3ZWLC").join("report.html").exists());
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(with.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["skipped_accounts"], serde_json::json!(["NOSUCH"]));
    // The accounts written are those of the run without NOSUCH, byte for byte.
    let without = dir.path().join("without");
    run_report(&without, "MA001SHGA32ZDQYG9N8T,MA004DEFGZHA3AU3ZWLC", false).ok();
    for account in ["MA001SHGA32ZDQYG9N8T", "MA004DEFGZHA3AU3ZWLC"] {
        for entry in std::fs::read_dir(without.join(account)).unwrap() {
            let name = entry.unwrap().file_name();
            let (a, b) = (with.join(account).join(&name), without.join(account).join(&name));
            assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap(), "{}", a.display());
        }
    }
    let quiet = run_report(&dir.path().join("quiet"), "MA001SHGA32ZDQYG9N8T,NOSUCH", true);
    quiet.ok();
    assert!(quiet.stderr.is_empty(), "{}", quiet.stderr);
}

#[test]
fn file_errors_name_the_file_relative_to_the_data_directory() {
    let dir = common::temp_dir();
    let data = dir.path().join("data");
    common::write(
        &data,
        "charges/x.csv",
        "record_id,auth_id,timestamp,units,amount\nx1,A1,2026-11-20T00:00:00Z,2,0.01\n",
    );
    let run = summary(&data, "A1", "", &[]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stderr.trim_end(),
        "error: charges/x.csv: missing required column 'description' (the header has: record_id, auth_id, \
         timestamp, units, amount)"
    );
    std::fs::remove_file(data.join("charges/x.csv")).unwrap();
    common::write(&data, "calls/a.csv.gz", "not gzip");
    let run = summary(&data, "A1", "", &[]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.starts_with("error: calls/a.csv.gz: not a readable gzip file"), "{}", run.stderr);
    assert!(!run.stderr.contains(dir.path().to_str().unwrap()), "{}", run.stderr);
}

#[test]
fn a_report_of_every_account_with_no_usage_in_its_window_says_where_the_data_is() {
    let dir = common::temp_dir();
    let data = sample_data();
    let store = dir.path().join("store");
    telemeter(&["ingest", "--data", data.to_str().unwrap(), "--store", store.to_str().unwrap()]).ok();
    for (source, path) in [("--data", &data), ("--store", &store)] {
        let out = dir.path().join(format!("out{source}"));
        let run = |now: &str| {
            telemeter(&["report", source, path.to_str().unwrap(), "--out", out.to_str().unwrap(), "--now", now])
        };
        // Months after the data: every report is empty, and that is said
        // once. Four accounts: the three of accounts.csv, and MA003, which
        // only records know.
        let late = run("2027-06-01T00:00:00Z");
        late.ok();
        let said = warnings(&late.stderr);
        assert_eq!(said.len(), 1, "{source}: {}", late.stderr);
        assert!(
            said[0].starts_with("warning: the 4 accounts' reports hold no usage between 2027-05-25 and 2027-06-01;"),
            "{}",
            said[0]
        );
        assert!(said[0].contains("the data covers 2026-10-01 to 2026-11-21 (UTC)"), "{}", said[0]);
        // Over the data: nothing to say.
        let timely = run(NOW);
        timely.ok();
        assert!(warnings(&timely.stderr).is_empty(), "{source}: {}", timely.stderr);
    }
}

/// An account id no API path could carry (empty, a control character) is
/// a usage error naming the flag, not an answer for it.
#[test]
fn an_account_id_that_is_no_id_is_refused() {
    let data = sample_data();
    for id in ["", "MA\u{1}"] {
        let run = telemeter(&["summary", "--data", data.to_str().unwrap(), "--auth-id", id, "--now", NOW]);
        assert_eq!(run.code, 2, "{id:?}: {}", run.stderr);
        assert!(run.stderr.contains("--auth-id") && run.stdout.is_empty(), "{}", run.stderr);
    }
}
