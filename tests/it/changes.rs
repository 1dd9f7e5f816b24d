//! `telemeter changes` on real stores: each ingest's ledger books a record
//! in its month of the account's zone (a call at 03:30Z on 1 November is
//! October's in New York), a re-delivery adds nothing, a late record
//! changes only the ingest that brought it, `--since-report` starts after
//! the report's generation, and the sum over every ingest does not depend
//! on how the files were split into deliveries or in what order.

use std::path::Path;

use crate::common::{self, telemeter, CALLS_HEADER};

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn ingest(data: &Path, store: &Path) {
    telemeter(&["ingest", "--quiet", "--data", s(data), "--store", s(store)]).ok();
}

/// `changes --format csv` with `args`: its lines after the header.
fn changes(store: &Path, args: &[&str]) -> Vec<String> {
    let mut all = vec!["changes", "--store", s(store), "--format", "csv"];
    all.extend_from_slice(args);
    let run = telemeter(&all);
    let mut lines = run.ok().lines().map(str::to_owned);
    assert_eq!(
        lines.next().as_deref(),
        Some("auth_id,month,product,records_added,records_restated,records_withdrawn,units,duration_seconds,amount,surcharge")
    );
    lines.collect()
}

/// The generation the store's manifest holds.
fn manifest_generation(store: &Path) -> u64 {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("manifest.json")).expect("manifest")).expect("JSON");
    manifest["generation"].as_u64().expect("a generation")
}

const ACCOUNTS: &str = "auth_id,currency,timezone\nNY1,USD,America/New_York\nUTC1,USD,\n";

fn call(id: &str, auth_id: &str, time: &str, seconds: u32, amount: &str) -> String {
    format!("{id},{auth_id},,{time},voice,pstn,outbound,US,{seconds},{amount},0.001,4000\n")
}

#[test]
fn each_ingest_books_its_records_in_the_months_of_the_accounts_zone() {
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    let day = dir.path().join("day");
    common::write(&day, "accounts.csv", ACCOUNTS);
    let calls = [
        call("a1", "NY1", "2026-11-01T03:30:00Z", 60, "0.010"),
        call("a2", "NY1", "2026-11-01T04:30:00Z", 120, "0.020"),
        call("a3", "UTC1", "2026-11-01T03:30:00Z", 30, "0.005"),
    ];
    common::write(&day, "calls/day.csv", format!("{CALLS_HEADER}{}", calls.concat()));
    // The same call twice in one delivery: one record.
    common::write(&day, "calls/again.csv", format!("{CALLS_HEADER}{}", calls[0]));
    ingest(&day, &store);
    let first = vec![
        "NY1,2026-10,voice,1,0,0,1,60.0,0.01,0.001".to_owned(),
        "NY1,2026-11,voice,1,0,0,1,120.0,0.02,0.001".to_owned(),
        "UTC1,2026-11,voice,1,0,0,1,30.0,0.005,0.001".to_owned(),
    ];
    assert_eq!(changes(&store, &["--since", "0"]), first);

    // A report of generation 1, then a late October call and a re-delivery.
    let report = dir.path().join("report");
    let now = "2026-11-21T12:00:00Z";
    telemeter(&["report", "--quiet", "--store", s(&store), "--out", s(&report), "--now", now, "--formats", "json"])
        .ok();
    let late = dir.path().join("late");
    common::write(&late, "accounts.csv", ACCOUNTS);
    let late_calls = [call("a9", "NY1", "2026-10-02T10:00:00Z", 90, "0.033"), calls[1].clone()];
    common::write(&late, "calls/late.csv", format!("{CALLS_HEADER}{}", late_calls.concat()));
    ingest(&late, &store);
    let second = vec!["NY1,2026-10,voice,1,0,0,1,90.0,0.033,0.001".to_owned()];
    assert_eq!(changes(&store, &["--since", "1"]), second);
    let manifest = report.join("manifest.json");
    assert_eq!(changes(&store, &["--since-report", s(&manifest)]), second);
    // Since the start: both ingests, summed.
    assert_eq!(
        changes(&store, &["--since", "0"]),
        vec![
            "NY1,2026-10,voice,2,0,0,2,150.0,0.043,0.002".to_owned(),
            "NY1,2026-11,voice,1,0,0,1,120.0,0.02,0.001".to_owned(),
            "UTC1,2026-11,voice,1,0,0,1,30.0,0.005,0.001".to_owned(),
        ]
    );
    assert_eq!(changes(&store, &["--since", "0", "--account", "UTC1"]), vec![first[2].clone()]);
    assert!(changes(&store, &["--since", "2"]).is_empty());
    // An account no one knows is said, beside the empty ledger; a known one is not.
    let unknown = telemeter(&["changes", "--store", s(&store), "--since", "0", "--account", "MA999"]);
    assert!(unknown.ok().lines().count() <= 3 && unknown.stderr.contains("account MA999 is not"), "{}", unknown.stderr);
    let known = telemeter(&["changes", "--store", s(&store), "--since", "0", "--account", "UTC1"]);
    assert!(!known.ok().is_empty() && !known.stderr.contains("is not in"), "{}", known.stderr);

    // A delivery of nothing new publishes nothing and changes nothing.
    ingest(&late, &store);
    assert!(changes(&store, &["--since", "2"]).is_empty());

    // A generation past the store's, and a report of raw files, are errors.
    let past = telemeter(&["changes", "--store", s(&store), "--since", "9"]);
    assert_eq!(past.code, 1, "{}", past.stdout);
    assert!(past.stderr.contains("generation 9 is past the store's current generation 2"), "{}", past.stderr);
    let raw = dir.path().join("raw-report");
    telemeter(&["report", "--quiet", "--data", s(&day), "--out", s(&raw), "--now", now, "--formats", "json"]).ok();
    let from_raw = telemeter(&["changes", "--store", s(&store), "--since-report", s(&raw.join("manifest.json"))]);
    assert_eq!(from_raw.code, 1, "{}", from_raw.stdout);
    assert!(from_raw.stderr.contains("names no store generation"), "{}", from_raw.stderr);
    // A report of another store: its generations mean nothing here.
    let other = dir.path().join("other-store");
    ingest(&day, &other);
    let other_report = dir.path().join("other-report");
    telemeter(&[
        "report",
        "--quiet",
        "--store",
        s(&other),
        "--out",
        s(&other_report),
        "--now",
        now,
        "--formats",
        "json",
    ])
    .ok();
    let foreign = s(&other_report.join("manifest.json")).to_owned();
    let from_other = telemeter(&["changes", "--store", s(&store), "--since-report", &foreign]);
    assert_eq!(from_other.code, 1, "{}", from_other.stdout);
    assert!(from_other.stderr.contains("was made from another store"), "{}", from_other.stderr);
    let into = dir.path().join("into");
    let run = telemeter(&["report", "--quiet", "--store", s(&store), "--out", s(&into), "--changes-since", &foreign]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stderr.contains("was made from another store"), "{}", run.stderr);
}

/// An accounts.csv that changes an account's zone moves its published
/// records between months: the ingest books each moved record as restated
/// in both months, its sums leaving one and entering the other, so that
/// the ledgers still add up to the store's months and a report names both
/// months as changed. Records whose month is the same in both zones, and
/// accounts whose zone stays, are not booked.
#[test]
fn a_zone_change_books_the_records_it_moves_between_months() {
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    let day = dir.path().join("day");
    common::write(&day, "accounts.csv", ACCOUNTS);
    let calls = [
        call("z1", "UTC1", "2027-01-01T05:00:00Z", 60, "1.5"),
        call("z2", "UTC1", "2027-01-15T05:00:00Z", 30, "0.25"),
        call("z3", "NY1", "2027-01-01T03:00:00Z", 90, "0.5"),
    ];
    common::write(&day, "calls/day.csv", format!("{CALLS_HEADER}{}", calls.concat()));
    ingest(&day, &store);
    let report = dir.path().join("report");
    let now = "2027-01-20T12:00:00Z";
    telemeter(&["report", "--quiet", "--store", s(&store), "--out", s(&report), "--now", now, "--formats", "json"])
        .ok();
    // Only accounts.csv changes: UTC1 moves to Los Angeles (UTC-8), where
    // z1 is on 31 December; NY1 keeps its zone.
    let moved = dir.path().join("moved");
    common::write(
        &moved,
        "accounts.csv",
        "auth_id,currency,timezone\nNY1,USD,America/New_York\nUTC1,USD,America/Los_Angeles\n",
    );
    ingest(&moved, &store);
    assert_eq!(
        changes(&store, &["--since", "1"]),
        vec![
            "UTC1,2026-12,voice,0,1,0,1,60.0,1.5,0.001".to_owned(),
            "UTC1,2027-01,voice,0,1,0,-1,-60.0,-1.5,-0.001".to_owned(),
        ]
    );
    // Summed since the start, the ledgers give the months as they are now.
    assert_eq!(
        changes(&store, &["--since", "0"]),
        vec![
            "NY1,2026-12,voice,1,0,0,1,90.0,0.5,0.001".to_owned(),
            "UTC1,2026-12,voice,0,1,0,1,60.0,1.5,0.001".to_owned(),
            "UTC1,2027-01,voice,2,1,0,1,30.0,0.25,0.001".to_owned(),
        ]
    );
    let again = dir.path().join("again");
    let run = telemeter(&[
        "report",
        "--quiet",
        "--store",
        s(&store),
        "--out",
        s(&again),
        "--now",
        now,
        "--formats",
        "json",
        "--changes-since",
        s(&report.join("manifest.json")),
    ]);
    run.ok();
    let manifest = std::fs::read(again.join("manifest.json")).expect("manifest");
    let manifest: serde_json::Value = serde_json::from_slice(&manifest).expect("JSON");
    let months = serde_json::json!({"UTC1": ["2026-12", "2027-01"]});
    assert_eq!(manifest["changes_since"]["months"], months, "{manifest}");
}

/// An accounts.csv that changes an account's currency (or drops the
/// account, whose currency is then USD) relabels its stored money: the
/// ingest warns, naming the account and the currency, and books every
/// month it has records in as restated, amounts unchanged, so that the
/// re-invoicing job hears of it. A zone and a currency changed together
/// book the moves once.
#[test]
fn a_currency_change_books_every_month_as_restated() {
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    let day = dir.path().join("day");
    common::write(
        &day,
        "accounts.csv",
        "auth_id,currency,timezone\nEU1,EUR,\nEU2,EUR,\nNY1,USD,America/New_York\nUTC1,USD,\n",
    );
    let calls = [
        call("e1", "EU1", "2027-01-01T05:00:00Z", 60, "1.5"),
        call("e2", "EU1", "2027-02-15T05:00:00Z", 30, "0.25"),
        call("e3", "EU1", "2027-02-16T05:00:00Z", 30, "0.25"),
        call("u1", "UTC1", "2027-01-01T05:00:00Z", 60, "2"),
        call("n1", "NY1", "2027-01-03T03:00:00Z", 90, "0.5"),
        call("f1", "EU2", "2027-01-04T03:00:00Z", 90, "0.75"),
    ];
    common::write(&day, "calls/day.csv", format!("{CALLS_HEADER}{}", calls.concat()));
    ingest(&day, &store);
    // EU1 becomes USD; UTC1 becomes GBP and moves to Los Angeles, where
    // u1 is on 31 December; NY1 stays.
    let relabel = dir.path().join("relabel");
    common::write(
        &relabel,
        "accounts.csv",
        "auth_id,currency,timezone\nEU1,USD,\nEU2,EUR,\nNY1,USD,America/New_York\nUTC1,GBP,America/Los_Angeles\n",
    );
    let run = telemeter(&["ingest", "--data", s(&relabel), "--store", s(&store)]);
    run.ok();
    assert!(run.stderr.contains("account EU1: its currency is now USD"), "{}", run.stderr);
    assert!(run.stderr.contains("account UTC1: its currency is now GBP"), "{}", run.stderr);
    assert!(!run.stderr.contains("account NY1") && !run.stderr.contains("account EU2"), "{}", run.stderr);
    assert_eq!(
        changes(&store, &["--since", "1"]),
        vec![
            "EU1,2027-01,voice,0,1,0,0,0.0,0.0,0.0".to_owned(),
            "EU1,2027-02,voice,0,2,0,0,0.0,0.0,0.0".to_owned(),
            "UTC1,2026-12,voice,0,1,0,1,60.0,2.0,0.001".to_owned(),
            "UTC1,2027-01,voice,0,1,0,-1,-60.0,-2.0,-0.001".to_owned(),
        ]
    );
    // Dropping EU1 gives it USD, as it is: nothing to book; dropping EU2
    // moves it from EUR to USD.
    let dropped = dir.path().join("dropped");
    common::write(
        &dropped,
        "accounts.csv",
        "auth_id,currency,timezone\nNY1,USD,America/New_York\nUTC1,GBP,America/Los_Angeles\n",
    );
    let run = telemeter(&["ingest", "--data", s(&dropped), "--store", s(&store)]);
    run.ok();
    assert!(run.stderr.contains("account EU2: its currency is now USD"), "{}", run.stderr);
    assert!(!run.stderr.contains("account EU1"), "{}", run.stderr);
    let since = manifest_generation(&store) - 1;
    assert_eq!(
        changes(&store, &["--since", &since.to_string()]),
        vec!["EU2,2027-01,voice,0,1,0,0,0.0,0.0,0.0".to_owned()]
    );
}

/// Every record kind of sample_data/ delivered in one ingest, or split by
/// kind into deliveries in two orders: the same ledger summed since 0,
/// with as many records added as the ingests used.
#[test]
fn the_sum_of_the_ledgers_does_not_depend_on_the_split_or_its_order() {
    let dir = common::temp_dir();
    let sample = common::sample_data();
    let parts = [dir.path().join("calls-and-charges"), dir.path().join("messages-and-transcriptions")];
    for (part, kinds) in parts.iter().zip([["calls", "charges"], ["messages", "transcriptions"]]) {
        std::fs::create_dir_all(part).expect("mkdir");
        std::fs::copy(sample.join("accounts.csv"), part.join("accounts.csv")).expect("copy");
        for kind in kinds {
            common::copy_tree(&sample.join(kind), &part.join(kind));
        }
    }
    let whole = dir.path().join("whole");
    ingest(&sample, &whole);
    let expected = changes(&whole, &["--since", "0"]);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(whole.join("manifest.json")).expect("manifest")).expect("json");
    let used = manifest["ingests"][0]["used"].as_u64().expect("used");
    let added: u64 = expected
        .iter()
        .map(|line| line.split(',').nth(3).expect("records_added").parse::<u64>().expect("a count"))
        .sum();
    assert_eq!(added, used);
    for (name, order) in [("forward", [0, 1]), ("backward", [1, 0])] {
        let store = dir.path().join(name);
        for i in order {
            ingest(&parts[i], &store);
        }
        assert_eq!(changes(&store, &["--since", "0"]), expected, "{name}");
    }
}

/// A nightly report given the previous report's manifest lists, per
/// account, the months that changed since: here the sample correcting
/// delivery's October message and November call and charge.
#[test]
fn a_report_names_the_months_that_changed_since_the_previous_one() {
    let t = common::temp_dir();
    let store = t.path().join("store");
    ingest(&common::sample_data(), &store);
    let first = t.path().join("first");
    let report = |out: &Path, extra: &[&str]| {
        let mut args =
            vec!["report", "--store", s(&store), "--out", s(out), "--now", common::NOW, "--formats", "csv", "--quiet"];
        args.extend_from_slice(extra);
        telemeter(&args).ok();
        let bytes = std::fs::read(out.join("manifest.json")).expect("a report manifest");
        serde_json::from_slice::<serde_json::Value>(&bytes).expect("JSON")
    };
    let previous = report(&first, &[]);
    assert!(previous.get("changes_since").is_none());
    ingest(&common::root().join("sample_corrections"), &store);
    let second = t.path().join("second");
    let manifest = report(&second, &["--changes-since", s(&first.join("manifest.json"))]);
    assert_eq!(
        manifest["changes_since"],
        serde_json::json!({"generation": 1, "months": {"MA001SHGA32ZDQYG9N8T": ["2026-10", "2026-11"]}})
    );
    // Raw files have no ledger: a usage error.
    let raw = telemeter(&[
        "report",
        "--data",
        s(&common::sample_data()),
        "--out",
        s(&t.path().join("raw")),
        "--changes-since",
        s(&first.join("manifest.json")),
    ]);
    assert_eq!(raw.code, 2, "{}", raw.stderr);
}
