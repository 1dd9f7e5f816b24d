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
    let said = same_output(&sample_data(), "MA001", &format!("{plain}&fromdate=2026-11-01&auth_id=MA002&x=1"), plain);
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
        "MA001",
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
        [format!(
            "warning: {} has no calls/, messages/, transcriptions/ or charges/ folder: nothing to read",
            empty.display()
        )]
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
    assert!(warnings(&summary(&sample_data(), "MA001", "", &[]).stderr).is_empty());
}

#[test]
fn calendar_invalid_dates_say_why_in_the_400_and_on_stderr() {
    let run = summary(&sample_data(), "MA001", "to_date=2026-11-31", &[]);
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
