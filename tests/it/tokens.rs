//! Page tokens at the edges, through the real binary: a token is bound to
//! the data it was cut from (replayed after the data changed it is a 400,
//! never a repeated or skipped row), tokens sealed with a public key are
//! refused, and every bad request of the command line (a query that starts
//! with `-`, a bad `--now`) answers with the API's 400 body.

use std::path::Path;

use serde_json::Value;

use crate::common::{self, temp_dir, write, Run, NOW};

const CALLS: &str =
    "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause\n";

/// Five voice calls of A1 on five days: five usage rows, in day order.
fn five_days(dir: &Path) {
    write(dir, "accounts.csv", "auth_id,currency\nA1,USD\n");
    let mut text = String::from(CALLS);
    for day in 10..15 {
        text.push_str(&format!("c{day},A1,,2026-11-{day}T10:00:00Z,voice,pstn,outbound,US,60,0.01,0,4000\n"));
    }
    write(dir, "calls/november.csv", text);
}

/// A call on a day before every other: its row sorts first.
fn add_first_row(dir: &Path) {
    write(
        dir,
        "calls/late.csv",
        format!("{CALLS}c09,A1,,2026-11-09T10:00:00Z,voice,pstn,outbound,US,60,0.01,0,4000\n"),
    );
}

const QUERY: &str = "product=voice&page_size=3&from_date=2026-11-01&to_date=2026-11-21";

fn run_summary(source: &str, path: &Path, query: &str) -> Run {
    let path = path.to_str().expect("UTF-8 path");
    common::telemeter(&["summary", source, path, "--auth-id", "A1", "--query", query, "--now", NOW])
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn with_token(query: &str, token: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
    format!("{query}&page_token={encoded}")
}

/// Asserts a 400 answer: exit 2, stdout exactly the API's error body, the
/// message containing every one of `parts`; returns the message.
fn assert_refused(run: &Run, parts: &[&str]) -> String {
    assert_eq!(run.code, 2, "exit code; stdout {} stderr {}", run.stdout, run.stderr);
    let body = json(&run.stdout);
    let object = body.as_object().expect("an object");
    assert_eq!(object.keys().map(String::as_str).collect::<Vec<_>>(), ["api_id", "error"], "{body}");
    assert_eq!(body["api_id"].as_str().map(str::len), Some(36), "{body}");
    let message = body["error"].as_str().expect("error").to_owned();
    for part in parts {
        assert!(message.contains(part), "'{part}' not in '{message}'");
    }
    assert_eq!(run.stderr, format!("error: {message}\n"));
    message
}

/// Page 1, the data changes (a row that sorts first), page 2 with the
/// token: refused, never the old page 1's last row again.
fn replay_after_change(source: &str, dir: &Path, path: &Path, change: &dyn Fn()) {
    let first = json(run_summary(source, path, QUERY).ok());
    assert_eq!(first["usage"].as_array().expect("usage").len(), 3);
    let token = first["meta"]["next_page_token"].as_str().expect("a token").to_owned();
    // Unchanged data: page 2 is rows 4 and 5.
    let second = json(run_summary(source, path, &with_token(QUERY, &token)).ok());
    assert_eq!(second["usage"].as_array().expect("usage").len(), 2);
    assert_eq!(second["usage"][0]["from_date"], "2026-11-13T00:00:00Z");

    // Starting again from page 1 shows the new row first.
    refused_after(source, path, &token, &|| add_first_row(dir), change, "2026-11-09T00:00:00Z");
}

/// `alter`s the data and `change` publishes it: `token`, of page 1 before,
/// is refused, and page 1 again starts at `fresh`.
fn refused_after(source: &str, path: &Path, token: &str, alter: &dyn Fn(), change: &dyn Fn(), fresh: &str) {
    alter();
    change();
    let replayed = run_summary(source, path, &with_token(QUERY, token));
    assert_refused(&replayed, &["page_token", "data changed", "page 1"]);
    let fresh_page = json(run_summary(source, path, QUERY).ok());
    assert_eq!(fresh_page["usage"][0]["from_date"], fresh);
}

#[test]
fn a_token_replayed_after_the_raw_data_changed_is_refused() {
    let dir = temp_dir();
    five_days(dir.path());
    replay_after_change("--data", dir.path(), dir.path(), &|| {});
}

#[test]
fn a_token_replayed_after_a_new_generation_of_the_store_is_refused() {
    let temp = temp_dir();
    let data = temp.path().join("data");
    let store = temp.path().join("store");
    five_days(&data);
    let ingest = || {
        let args = ["ingest", "--data", data.to_str().expect("UTF-8"), "--store", store.to_str().expect("UTF-8")];
        common::telemeter(&args).ok().to_owned()
    };
    ingest();
    replay_after_change("--store", &data, &store, &|| {
        assert!(ingest().contains("published generation 2"));
    });
}

/// Page 1 in New York, then the account's zone changes to Kolkata, where
/// each call falls on the same local day: the same rows, numbered by the
/// same buckets, but every date moved, so page 2 with the token is refused.
fn replay_after_zone_change(source: &str, dir: &Path, path: &Path, change: &dyn Fn()) {
    write(dir, "accounts.csv", "auth_id,currency,timezone\nA1,USD,America/New_York\n");
    change();
    let first = json(run_summary(source, path, QUERY).ok());
    assert_eq!(first["usage"][0]["from_date"], "2026-11-10T00:00:00-05:00");
    let token = first["meta"]["next_page_token"].as_str().expect("a token").to_owned();
    let to_kolkata = || drop(write(dir, "accounts.csv", "auth_id,currency,timezone\nA1,USD,Asia/Kolkata\n"));
    refused_after(source, path, &token, &to_kolkata, change, "2026-11-10T00:00:00+05:30");
}

#[test]
fn a_token_replayed_after_the_account_changed_its_zone_is_refused() {
    let dir = temp_dir();
    five_days(dir.path());
    replay_after_zone_change("--data", dir.path(), dir.path(), &|| {});
    let temp = temp_dir();
    let (data, store) = (temp.path().join("data"), temp.path().join("store"));
    five_days(&data);
    let ingest = || {
        let args = ["ingest", "--data", data.to_str().expect("UTF-8"), "--store", store.to_str().expect("UTF-8")];
        common::telemeter(&args).ok();
    };
    replay_after_zone_change("--store", &data, &store, &ingest);
}

#[test]
fn a_token_forged_with_the_public_key_of_earlier_versions_is_refused() {
    let dir = temp_dir();
    five_days(dir.path());
    // A second row in any window: calls to another country.
    write(
        dir.path(),
        "calls/gb.csv",
        format!("{CALLS}g1,A1,,2026-11-10T10:00:00Z,voice,pstn,outbound,GB,60,0.01,0,4000\n"),
    );
    let query = "granularity=year&page_size=1&product=voice";
    let digest = telemeter::query::UsageParams::parse_query(query).expect("a query").digest("A1");
    // A window from the year -261826 to 2027: nonsense dates.
    let days = |y, m, d| chrono::Datelike::num_days_from_ce(&chrono::NaiveDate::from_ymd_opt(y, m, d).expect("a date"));
    let token = common::forged_v1(&common::public_key(), 1, days(-261_826, 12, 15), days(2027, 1, 1), digest);
    // No key configured: what used to fall back to the public one.
    let data = dir.path().to_str().expect("UTF-8 path");
    let query = with_token(query, &token);
    let args = ["summary", "--data", data, "--auth-id", "A1", "--query", &query, "--now", NOW];
    let run = common::run_command(&args, common::command());
    assert_refused(&run, &["page_token"]);
    assert!(!run.stdout.contains("-261826"), "{}", run.stdout);
}

#[test]
fn a_query_that_starts_with_a_dash_is_a_query() {
    let dir = temp_dir();
    five_days(dir.path());
    // An unknown key is dropped, as the server does: the same answer as
    // without it.
    let plain = run_summary("--data", dir.path(), "product=voice");
    let dashed = run_summary("--data", dir.path(), "-x=1&product=voice");
    assert_eq!(dashed.ok(), plain.ok());
    // A bad one is the API's 400.
    let bad = run_summary("--data", dir.path(), "-x=1&granularity=week");
    assert_refused(&bad, &["invalid granularity 'week'"]);
    let bad = run_summary("--data", dir.path(), "-granularity=week&granularity=fortnight");
    assert_refused(&bad, &["invalid granularity 'fortnight'"]);
}

#[test]
fn a_bad_now_is_a_bad_request_with_the_api_body() {
    let dir = temp_dir();
    five_days(dir.path());
    let data = dir.path().to_str().expect("UTF-8 path");
    for now in ["yesterday", "2026-11-21", "-1", ""] {
        let run = common::telemeter(&["summary", "--data", data, "--auth-id", "A1", "--now", now]);
        assert_refused(&run, &["invalid now", "RFC 3339"]);
    }
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).expect("the key file").permissions().mode() & 0o777
}

/// Without `TELEMETER_TOKEN_KEY`: raw data pages with the state directory's
/// key, a store with its own; both random, private, and kept between runs.
#[test]
fn without_a_configured_key_each_store_and_the_state_directory_have_their_own() {
    let temp = temp_dir();
    let (data, store, state) = (temp.path().join("data"), temp.path().join("store"), temp.path().join("state"));
    five_days(&data);
    let run = |args: &[&str]| {
        let mut command = common::command();
        command.env("TELEMETER_STATE_DIR", &state);
        common::run_command(args, command)
    };
    let summary = |source: &str, path: &Path, query: &str| {
        run(&["summary", source, path.to_str().expect("UTF-8"), "--auth-id", "A1", "--query", query, "--now", NOW])
    };
    let first = json(summary("--data", &data, QUERY).ok());
    let raw_token = first["meta"]["next_page_token"].as_str().expect("a token").to_owned();
    assert!(state.join("token.key").exists());
    #[cfg(unix)]
    assert_eq!(mode(&state.join("token.key")), 0o600);
    // The next run reads the same key: page 2.
    assert_eq!(
        json(summary("--data", &data, &with_token(QUERY, &raw_token)).ok())["usage"][0]["from_date"],
        "2026-11-13T00:00:00Z"
    );

    run(&["ingest", "--data", data.to_str().expect("UTF-8"), "--store", store.to_str().expect("UTF-8")]).ok();
    assert!(store.join("token.key").exists(), "ingest made the store's key");
    #[cfg(unix)]
    assert_eq!(mode(&store.join("token.key")), 0o600);
    assert_ne!(std::fs::read(store.join("token.key")).ok(), std::fs::read(state.join("token.key")).ok());
    let page = json(summary("--store", &store, QUERY).ok());
    let store_token = page["meta"]["next_page_token"].as_str().expect("a token").to_owned();
    assert_ne!(store_token, raw_token, "another key");
    summary("--store", &store, &with_token(QUERY, &store_token)).ok();
    // A token of one key is not one of the other.
    assert_refused(
        &summary("--store", &store, &with_token(QUERY, &raw_token)),
        &["not a page token issued by this service"],
    );
    assert_refused(
        &summary("--data", &data, &with_token(QUERY, &store_token)),
        &["not a page token issued by this service"],
    );
    // A configured key is used instead of either.
    let mut command = common::command();
    command.env("TELEMETER_STATE_DIR", &state).env("TELEMETER_TOKEN_KEY", "ours");
    let args =
        ["summary", "--store", store.to_str().expect("UTF-8"), "--auth-id", "A1", "--query", QUERY, "--now", NOW];
    let configured = json(common::run_command(&args, command).ok());
    assert_ne!(configured["meta"]["next_page_token"].as_str(), Some(store_token.as_str()));
}

#[test]
fn report_takes_a_bad_now_and_a_dashed_query_as_bad_requests() {
    let temp = temp_dir();
    let data = temp.path().join("data");
    five_days(&data);
    let out = temp.path().join("out");
    let (data, out) = (data.to_str().expect("UTF-8"), out.to_str().expect("UTF-8"));
    let bad_now = common::telemeter(&["report", "--data", data, "--out", out, "--now", "-1", "--quiet"]);
    assert_eq!(
        (bad_now.code, bad_now.stderr.as_str()),
        (2, "error: invalid now '-1': expected an RFC 3339 instant, e.g. 2026-11-21T00:00:00Z\n")
    );
    let bad_query =
        common::telemeter(&["report", "--data", data, "--out", out, "--query", "-x=1&granularity=week", "--quiet"]);
    assert_eq!(bad_query.code, 2, "{}", bad_query.stderr);
    assert!(bad_query.stderr.contains("invalid granularity 'week'"), "{}", bad_query.stderr);
    let not_utf8 = common::telemeter(&["report", "--data", data, "--out", out, "--query", "country=U%FF", "--quiet"]);
    assert_eq!(
        (not_utf8.code, not_utf8.stderr.as_str()),
        (2, "error: invalid country 'U%FF': not UTF-8 once percent-decoded\n")
    );
    let fine = common::telemeter(&["report", "--data", data, "--out", out, "--query", "-x=1", "--now", NOW, "--quiet"]);
    fine.ok();
}
