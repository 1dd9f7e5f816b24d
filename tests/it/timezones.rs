//! Local time zones through the binary (`summary` and `report`): DST days of
//! America/New_York and Europe/London (23- and 25-hour days, hours that
//! neither repeat nor skip an instant), half- and quarter-hour offsets
//! (Asia/Kolkata +05:30, Asia/Kathmandu +05:45), a month bucket across a DST
//! change, the `accounts.csv` `timezone` column, defaults, caps and 400s.
//!
//! Expected values are written by hand from the zones' rules (2026: US DST
//! starts 8 March, ends 1 November; EU DST starts 29 March, ends 25 October).

use std::path::{Path, PathBuf};

use chrono::DateTime;
use serde_json::Value;

use crate::report::{put, run, run_ok};

const MESSAGES_HEADER: &str =
    "record_id,auth_id,subaccount_auth,timestamp,type,direction,country,segments,amount,surcharge,error_code\n";

/// A data set with one single-segment message of 0.01 per timestamp, all
/// for account `A`, and `accounts` as `accounts.csv`.
fn data_with(dir: &Path, accounts: &str, timestamps: &[String]) -> PathBuf {
    let data = dir.join("data");
    put(&data, "accounts.csv", accounts);
    let mut text = String::from(MESSAGES_HEADER);
    for (i, t) in timestamps.iter().enumerate() {
        text.push_str(&format!("M{i},A,,{t},sms,outbound,US,1,0.01,0,\n"));
    }
    put(&data, "messages/m.csv", &text);
    data
}

/// Every `step` seconds from `from` (inclusive) to `to` (exclusive), RFC 3339 UTC.
fn every(from: &str, to: &str, step: i64) -> Vec<String> {
    let start = DateTime::parse_from_rfc3339(from).expect("from").timestamp();
    let end = DateTime::parse_from_rfc3339(to).expect("to").timestamp();
    (start..end)
        .step_by(step as usize)
        .map(|s| DateTime::from_timestamp(s, 0).expect("instant").format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .collect()
}

fn summary(data: &Path, auth_id: &str, query: &str) -> Value {
    let output = run_ok(&[
        "summary",
        "--data",
        data.to_str().expect("utf-8"),
        "--auth-id",
        auth_id,
        "--query",
        &format!("page_size=1000&{query}"),
        "--now",
        "2026-11-21T06:00:00Z",
    ]);
    serde_json::from_slice(&output.stdout).expect("json")
}

/// `(from_date, to_date, total_units)` of every usage row.
fn rows(page: &Value) -> Vec<(String, String, u64)> {
    page["usage"]
        .as_array()
        .expect("usage")
        .iter()
        .map(|r| {
            (
                r["from_date"].as_str().expect("from").to_owned(),
                r["to_date"].as_str().expect("to").to_owned(),
                r["total_units"].as_u64().expect("units"),
            )
        })
        .collect()
}

fn seconds(text: &str) -> i64 {
    DateTime::parse_from_rfc3339(text).expect("rfc 3339").timestamp()
}

/// Buckets tile the window: each starts where the previous ended.
fn assert_tiles(page: &Value, rows: &[(String, String, u64)]) {
    assert_eq!(rows.first().expect("rows").0, page["meta"]["from_date"].as_str().expect("from"));
    assert_eq!(rows.last().expect("rows").1, page["meta"]["to_date"].as_str().expect("to"));
    for pair in rows.windows(2) {
        assert_eq!(pair[0].1, pair[1].0, "contiguous");
        assert_eq!(seconds(&pair[0].1), seconds(&pair[1].0));
    }
}

#[test]
fn new_york_spring_forward_day_has_23_hour_buckets() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The local day 2026-03-08 is 05:00Z to 04:00Z the next day: 23 hours.
    let mut stamps = every("2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z", 1800);
    stamps.push("2026-03-08T04:59:59Z".into()); // 23:59:59 EST on the 7th: outside
    stamps.push("2026-03-09T04:00:00Z".into()); // midnight EDT on the 9th: outside
    let data = data_with(dir.path(), "auth_id\nA\n", &stamps);
    let page =
        summary(&data, "A", "granularity=hour&from_date=2026-03-08&to_date=2026-03-09&timezone=America/New_York");
    assert_eq!(page["meta"]["timezone"], "America/New_York");
    assert_eq!(page["meta"]["from_date"], "2026-03-08T00:00:00-05:00");
    assert_eq!(page["meta"]["to_date"], "2026-03-09T00:00:00-04:00");
    let rows = rows(&page);
    assert_eq!(rows.len(), 23);
    assert_tiles(&page, &rows);
    assert!(rows.iter().all(|r| r.2 == 2 && seconds(&r.1) - seconds(&r.0) == 3600), "{rows:?}");
    assert_eq!(rows[1], ("2026-03-08T01:00:00-05:00".into(), "2026-03-08T03:00:00-04:00".into(), 2));
    assert_eq!(rows[2].0, "2026-03-08T03:00:00-04:00");
    assert!(!rows.iter().any(|r| r.0.contains("T02:")), "02:00 does not exist that night");
}

#[test]
fn new_york_fall_back_day_has_25_hour_buckets_and_1am_twice() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The local day 2026-11-01 is 04:00Z to 05:00Z the next day: 25 hours.
    let stamps = every("2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z", 900);
    let data = data_with(dir.path(), "auth_id\nA\n", &stamps);
    let page =
        summary(&data, "A", "granularity=hour&from_date=2026-11-01&to_date=2026-11-02&timezone=America/New_York");
    let rows = rows(&page);
    assert_eq!(rows.len(), 25);
    assert_tiles(&page, &rows);
    assert!(rows.iter().all(|r| r.2 == 4 && seconds(&r.1) - seconds(&r.0) == 3600), "{rows:?}");
    assert_eq!(
        rows[1..3],
        [
            ("2026-11-01T01:00:00-04:00".into(), "2026-11-01T01:00:00-05:00".into(), 4),
            ("2026-11-01T01:00:00-05:00".into(), "2026-11-01T02:00:00-05:00".into(), 4)
        ]
    );
    let total: u64 = rows.iter().map(|r| r.2).sum();
    assert_eq!(total, stamps.len() as u64, "every instant in exactly one hour");
}

#[test]
fn london_dst_days_are_23_and_25_hours_long() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut stamps = every("2026-03-28T00:00:00Z", "2026-03-31T00:00:00Z", 3600);
    stamps.extend(every("2026-10-23T00:00:00Z", "2026-10-27T00:00:00Z", 3600));
    let data = data_with(dir.path(), "auth_id,timezone\nA,Europe/London\n", &stamps);

    let spring = summary(&data, "A", "granularity=day&from_date=2026-03-28&to_date=2026-03-31");
    let rows_spring = rows(&spring);
    assert_tiles(&spring, &rows_spring);
    assert_eq!(
        rows_spring,
        [
            ("2026-03-28T00:00:00+00:00".into(), "2026-03-29T00:00:00+00:00".into(), 24),
            ("2026-03-29T00:00:00+00:00".into(), "2026-03-30T00:00:00+01:00".into(), 23),
            // 2026-03-31T00:00+01:00 is 2026-03-30T23:00Z: the last UTC hour is outside.
            ("2026-03-30T00:00:00+01:00".into(), "2026-03-31T00:00:00+01:00".into(), 24),
        ]
    );
    let autumn = summary(&data, "A", "granularity=day&from_date=2026-10-24&to_date=2026-10-27");
    let rows_autumn = rows(&autumn);
    assert_tiles(&autumn, &rows_autumn);
    assert_eq!(
        rows_autumn,
        [
            ("2026-10-24T00:00:00+01:00".into(), "2026-10-25T00:00:00+01:00".into(), 24),
            ("2026-10-25T00:00:00+01:00".into(), "2026-10-26T00:00:00+00:00".into(), 25),
            ("2026-10-26T00:00:00+00:00".into(), "2026-10-27T00:00:00+00:00".into(), 24),
        ]
    );
    assert_eq!(spring["meta"]["timezone"], "Europe/London", "from accounts.csv");
}

#[test]
fn kolkata_and_kathmandu_days_start_at_their_half_and_quarter_hours() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stamps: Vec<String> = [
        "2026-11-19T18:14:59Z", // Kathmandu 23:59:59 on the 19th; Kolkata 23:44:59
        "2026-11-19T18:15:00Z", // Kathmandu 00:00 on the 20th; Kolkata 23:45
        "2026-11-19T18:29:59Z", // Kolkata 23:59:59 on the 19th
        "2026-11-19T18:30:00Z", // Kolkata 00:00 on the 20th
    ]
    .map(String::from)
    .to_vec();
    let data = data_with(dir.path(), "auth_id\nA\n", &stamps);
    let kolkata = summary(&data, "A", "from_date=2026-11-19&to_date=2026-11-21&timezone=Asia/Kolkata");
    assert_eq!(
        rows(&kolkata),
        [
            ("2026-11-19T00:00:00+05:30".into(), "2026-11-20T00:00:00+05:30".into(), 3),
            ("2026-11-20T00:00:00+05:30".into(), "2026-11-21T00:00:00+05:30".into(), 1),
        ]
    );
    let kathmandu = summary(&data, "A", "from_date=2026-11-19&to_date=2026-11-21&timezone=Asia/Kathmandu");
    assert_eq!(
        rows(&kathmandu),
        [
            ("2026-11-19T00:00:00+05:45".into(), "2026-11-20T00:00:00+05:45".into(), 1),
            ("2026-11-20T00:00:00+05:45".into(), "2026-11-21T00:00:00+05:45".into(), 3),
        ]
    );
    let hours = summary(&data, "A", "granularity=hour&from_date=2026-11-19&to_date=2026-11-20&timezone=Asia/Kathmandu");
    assert_eq!(rows(&hours), [("2026-11-19T23:00:00+05:45".into(), "2026-11-20T00:00:00+05:45".into(), 1)]);
    assert_eq!(hours["meta"]["from_date"], "2026-11-19T00:00:00+05:45");
}

#[test]
fn a_month_bucket_spans_the_dst_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stamps: Vec<String> = [
        "2026-03-01T04:59:59Z", // 23:59:59 EST on 28 February: outside
        "2026-03-01T05:00:00Z", // midnight EST, first instant of March
        "2026-04-01T03:59:59Z", // 23:59:59 EDT on 31 March
        "2026-04-01T04:00:00Z", // midnight EDT, first instant of April
        "2026-10-31T23:59:59Z", // London: 23:59:59 GMT on 31 October
    ]
    .map(String::from)
    .to_vec();
    let data = data_with(dir.path(), "auth_id\nA\n", &stamps);
    let ny = summary(&data, "A", "granularity=month&from_date=2026-03-01&to_date=2026-05-01&timezone=America/New_York");
    assert_eq!(
        rows(&ny),
        [
            ("2026-03-01T00:00:00-05:00".into(), "2026-04-01T00:00:00-04:00".into(), 2),
            ("2026-04-01T00:00:00-04:00".into(), "2026-05-01T00:00:00-04:00".into(), 1),
        ]
    );
    let london =
        summary(&data, "A", "granularity=month&from_date=2026-10-01&to_date=2026-12-01&timezone=Europe/London");
    assert_eq!(rows(&london), [("2026-10-01T00:00:00+01:00".into(), "2026-11-01T00:00:00+00:00".into(), 1)]);
    assert_eq!(london["meta"]["to_date"], "2026-12-01T00:00:00+00:00");
}

#[test]
fn account_zone_applies_unless_the_request_names_one_and_utc_answers_as_before() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stamps = vec!["2026-11-19T20:00:00Z".to_owned()];
    let data = data_with(dir.path(), "auth_id,currency,timezone\nA,USD,Asia/Kolkata\nB,USD,\n", &stamps);
    let query = "from_date=2026-11-19&to_date=2026-11-21";
    let own = summary(&data, "A", query);
    assert_eq!(own["meta"]["timezone"], "Asia/Kolkata");
    assert_eq!(rows(&own)[0].0, "2026-11-20T00:00:00+05:30");
    let named = summary(&data, "A", &format!("{query}&timezone=UTC"));
    assert_eq!(named["meta"]["timezone"], "UTC");
    assert_eq!(rows(&named)[0].0, "2026-11-19T00:00:00Z");
    // B has no zone: no meta.timezone, `Z` timestamps, exactly the api.md shape.
    let output = run_ok(&[
        "summary",
        "--data",
        data.to_str().expect("utf-8"),
        "--auth-id",
        "B",
        "--query",
        query,
        "--now",
        "2026-11-21T06:00:00Z",
    ]);
    let text = String::from_utf8(output.stdout).expect("utf-8");
    assert!(
        text.contains(
            "\"meta\":{\"auth_id\":\"B\",\"granularity\":\"day\",\"from_date\":\"2026-11-19T00:00:00Z\",\
             \"to_date\":\"2026-11-21T00:00:00Z\",\"currency\":\"USD\",\"page_size\":100,\"total_spend\":0.0,\
             \"subaccount_spend\":{}},\"usage\":[],\"other_charges\":[]}"
        ),
        "{text}"
    );
    let plain: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(plain["meta"]["from_date"], "2026-11-19T00:00:00Z");
}

#[test]
fn defaults_and_caps_count_local_days() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = data_with(dir.path(), "auth_id\nA\n", &[]);
    let now = "2026-11-20T20:00:00Z"; // already the 21st in Kolkata
    let data_arg = data.to_str().expect("utf-8");
    let page = |query: &str| {
        let output = run(&["summary", "--data", data_arg, "--auth-id", "A", "--query", query, "--now", now]);
        (output.status.code(), serde_json::from_slice::<Value>(&output.stdout).expect("json"))
    };
    let (code, kolkata) = page("timezone=Asia/Kolkata");
    assert_eq!(code, Some(0));
    assert_eq!(kolkata["meta"]["from_date"], "2026-11-14T00:00:00+05:30");
    assert_eq!(kolkata["meta"]["to_date"], "2026-11-21T00:00:00+05:30");
    let (_, ny) = page("timezone=America/New_York");
    assert_eq!(ny["meta"]["to_date"], "2026-11-20T00:00:00-05:00");
    // Hour cap: 7 local days, even across the fall-back day (169 hours).
    let (code, _) = page("granularity=hour&from_date=2026-10-29&to_date=2026-11-05&timezone=America/New_York");
    assert_eq!(code, Some(0));
    let (code, refused) = page("granularity=hour&from_date=2026-10-29&to_date=2026-11-06&timezone=America/New_York");
    assert_eq!(code, Some(2));
    assert_eq!(
        refused["error"],
        "window of 8 days exceeds the 7-day maximum for granularity 'hour'; use granularity 'day'"
    );
    let (code, unknown) = page("timezone=Europe/Atlantis");
    assert_eq!(code, Some(2));
    let message = unknown["error"].as_str().expect("error");
    assert!(message.contains("timezone") && message.contains("Europe/Atlantis"), "{message}");
}

#[test]
fn report_answers_each_account_in_its_own_zone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    put(&data, "accounts.csv", "auth_id,timezone\nNY,America/New_York\nKTM,Asia/Kathmandu\nUTC0,\n");
    let mut text = String::from(MESSAGES_HEADER);
    for (i, id) in ["NY", "KTM", "UTC0"].iter().enumerate() {
        text.push_str(&format!("M{i},{id},,2026-11-01T05:30:00Z,sms,outbound,US,1,0.01,0,\n"));
    }
    put(&data, "messages/m.csv", &text);
    let out = dir.path().join("out");
    let query = "granularity=hour&from_date=2026-11-01&to_date=2026-11-02";
    let args = ["report", "--data", data.to_str().expect("utf-8"), "--out", out.to_str().expect("utf-8")];
    run_ok(&[&args[..], &["--query", query, "--now", "2026-11-21T00:00:00Z", "--quiet"]].concat());
    let page = |id: &str| -> Value {
        serde_json::from_slice(&std::fs::read(out.join(id).join("page-0001.json")).expect("page")).expect("json")
    };
    let ny = page("NY");
    assert_eq!(ny["meta"]["timezone"], "America/New_York");
    // 05:30Z is 01:30 EDT, the first of the two 01:00 hours.
    assert_eq!(rows(&ny), [("2026-11-01T01:00:00-04:00".into(), "2026-11-01T01:00:00-05:00".into(), 1)]);
    let ktm = page("KTM");
    assert_eq!(rows(&ktm), [("2026-11-01T11:00:00+05:45".into(), "2026-11-01T12:00:00+05:45".into(), 1)]);
    let utc = page("UTC0");
    assert!(utc["meta"].get("timezone").is_none());
    assert_eq!(rows(&utc), [("2026-11-01T05:00:00Z".into(), "2026-11-01T06:00:00Z".into(), 1)]);
    // The request's zone wins over every account's.
    let out2 = dir.path().join("out2");
    let args = ["report", "--data", data.to_str().expect("utf-8"), "--out", out2.to_str().expect("utf-8")];
    let zoned = format!("{query}&timezone=Asia/Kolkata");
    run_ok(&[&args[..], &["--query", &zoned, "--now", "2026-11-21T00:00:00Z", "--quiet"]].concat());
    for id in ["NY", "KTM", "UTC0"] {
        let page: Value =
            serde_json::from_slice(&std::fs::read(out2.join(id).join("page-0001.json")).expect("page")).expect("json");
        assert_eq!(page["meta"]["timezone"], "Asia/Kolkata", "{id}");
        assert_eq!(rows(&page)[0].0, "2026-11-01T11:00:00+05:30", "{id}");
    }
}
