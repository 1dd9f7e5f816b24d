//! `telemeter ingest` and `summary --store`, through the binary: answers
//! byte-identical to `summary --data` (time zones, filters, subaccounts,
//! pages, a zone whose offset is not a multiple of 15 minutes), idempotent
//! re-ingests, incremental days, conflicts naming both places, failed and
//! killed ingests leaving the store as it was, set-aside counts that add up.

use crate::common::CALLS_HEADER;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary under test.
fn telemeter() -> Command {
    // One page-token key for --data and --store: the same bytes from both.
    let mut command = crate::common::command();
    command.env("TELEMETER_TOKEN_KEY", crate::common::TOKEN_KEY);
    command
}

fn run(args: &[&str]) -> Output {
    telemeter().args(args).output().expect("run telemeter")
}

fn put(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// A 64-bit LCG: deterministic data without fixtures.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const ACCOUNTS: &str = "auth_id,currency,timezone\nA1,USD,\nA2,EUR,Asia/Kolkata\nA4,INR,Asia/Kathmandu\n";

/// Instants from 2026-10-30 to 2026-11-23 (both DST changes of New York
/// are near), at any second.
fn instant(rng: &mut Lcg) -> String {
    let start = 1_793_318_400i64; // 2026-10-30T00:00:00Z
    let secs = start + rng.below(24 * 86_400) as i64;
    let date = chrono::DateTime::from_timestamp(secs, 0).expect("instant");
    match rng.below(3) {
        0 => date.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        1 => date.with_timezone(&chrono::FixedOffset::east_opt(19_800).expect("offset")).to_rfc3339(),
        _ => date.format("%Y-%m-%d %H:%M:%S.250").to_string(),
    }
}

/// Writes `n` rows of every kind under `dir`, ids prefixed with `tag`.
fn write_data(dir: &Path, tag: &str, seed: u64, n: usize) {
    let mut rng = Lcg(seed);
    let accounts = ["A1", "A1", "A2", "A3", "A4"];
    let subaccounts = ["", "", "S1", "S2"];
    let countries = ["US", "IN", "DE", ""];
    let mut calls = String::from(CALLS_HEADER);
    let mut messages = String::from(
        "record_id,auth_id,subaccount_auth,timestamp,type,direction,country,segments,amount,surcharge,error_code\n",
    );
    let mut transcriptions = String::from("record_id,auth_id,subaccount_auth,timestamp,type,duration_seconds,amount\n");
    let mut charges = String::from("record_id,auth_id,timestamp,description,units,amount\n");
    for i in 0..n {
        let account = rng.pick(&accounts);
        calls.push_str(&format!(
            "{tag}c{i},{account},{},{},{},{},{},{},{}.{:03},0.{:04},0.000{},{}\n",
            rng.pick(&subaccounts),
            instant(&mut rng),
            rng.pick(&["voice", "voice", "zentrunk"]),
            rng.pick(&["pstn", "sip", "app"]),
            rng.pick(&["inbound", "outbound"]),
            rng.pick(&countries),
            rng.below(600),
            rng.below(1000),
            rng.below(10_000) + 10,
            rng.below(10),
            rng.pick(&["4000", "4000", "3010", ""]),
        ));
        messages.push_str(&format!(
            "{tag}m{i},{},{},{},{},{},{},{},0.00{},0.000{},{}\n",
            rng.pick(&accounts),
            rng.pick(&subaccounts),
            instant(&mut rng),
            rng.pick(&["sms", "mms"]),
            rng.pick(&["inbound", "outbound"]),
            rng.pick(&countries),
            rng.below(3) + 1,
            rng.below(90) + 10,
            rng.below(10),
            rng.pick(&["", "", "30001", "30007"]),
        ));
        if i % 3 == 0 {
            transcriptions.push_str(&format!(
                "{tag}t{i},{},{},{},standard,{}.5,0.0{}\n",
                rng.pick(&accounts),
                rng.pick(&subaccounts),
                instant(&mut rng),
                rng.below(300),
                rng.below(90) + 10,
            ));
        }
        if i % 5 == 0 {
            charges.push_str(&format!(
                "{tag}x{i},{},{},{},{},0.{}\n",
                rng.pick(&accounts),
                instant(&mut rng),
                rng.pick(&["Number Charges", "CNAM Lookup"]),
                rng.below(4),
                rng.below(90) + 10,
            ));
        }
    }
    // A few records in 1971, when Africa/Monrovia's offset was -00:44:30.
    calls.push_str(&format!("{tag}old1,A1,,1971-06-01T10:07:00Z,voice,pstn,inbound,LR,10,0.5,0,4000\n"));
    calls.push_str(&format!("{tag}old2,A1,,1971-06-01T23:50:00Z,voice,pstn,inbound,LR,10,0.25,0,4000\n"));
    // Local 00:00:20 on June 2nd, in the slot that starts 23:45:30 local on
    // June 1st: only the stored records can place it.
    calls.push_str(&format!("{tag}old3,A1,,1971-06-02T00:44:50Z,voice,pstn,inbound,LR,10,0.125,0,4000\n"));
    put(dir, &format!("calls/{tag}.csv"), &calls);
    put(dir, &format!("messages/{tag}.csv"), &messages);
    put(dir, &format!("transcriptions/{tag}.csv"), &transcriptions);
    put(dir, &format!("charges/{tag}.csv"), &charges);
}

/// The queries every store is checked with.
const QUERIES: &[&str] = &[
    "from_date=2026-10-29&to_date=2026-11-24&granularity=day",
    "from_date=2026-11-18&to_date=2026-11-21&granularity=hour&page_size=7",
    "from_date=2026-11-18&to_date=2026-11-21&granularity=hour&timezone=Asia/Kolkata",
    "from_date=2026-10-29&to_date=2026-11-24&granularity=day&timezone=Asia/Kolkata&page_size=40",
    "from_date=2026-10-01&to_date=2026-12-01&granularity=month",
    "from_date=2026-11-18&to_date=2026-11-21&granularity=hour&timezone=Asia/Kathmandu&page_size=50",
    "from_date=2026-10-31&to_date=2026-11-03&granularity=hour&timezone=America/New_York",
    "from_date=2026-10-01&to_date=2026-12-01&granularity=month&timezone=America/New_York",
    "from_date=2026-01-01&to_date=2027-01-01&granularity=year",
    "from_date=2026-10-29&to_date=2026-11-24&granularity=day&product=voice,message&country=US",
    "from_date=2026-10-29&to_date=2026-11-24&granularity=day&direction=inbound&product=all",
    "from_date=2026-10-29&to_date=2026-11-24&granularity=day&subaccount_auth=S1",
    "from_date=2026-10-29&to_date=2026-11-24&granularity=day&error_code=30001&product=message",
    "from_date=2026-10-29&to_date=2026-11-24&granularity=day&hangup_cause=4000&page_size=3",
    "from_date=2026-11-01&to_date=2026-11-24&granularity=day&product=other",
    "granularity=day",
    "from_date=1971-01-01&to_date=1972-01-01&granularity=year&timezone=Africa/Monrovia",
    "from_date=1971-06-01&to_date=1971-06-03&granularity=hour&timezone=Africa/Monrovia",
];

/// Every page of one query, from `--data` or `--store`.
fn summary(source: &str, path: &Path, account: &str, query: &str) -> Output {
    run(&[
        "summary",
        source,
        s(path),
        "--auth-id",
        account,
        "--query",
        query,
        "--now",
        "2026-11-23T06:00:00Z",
        "--all-pages",
    ])
}

/// Asserts that `store` answers every query like `data`, byte for byte.
fn assert_same_answers(data: &Path, store: &Path, accounts: &[&str]) {
    let mut compared = 0;
    for account in accounts {
        for query in QUERIES {
            let expected = summary("--data", data, account, query);
            let actual = summary("--store", store, account, query);
            assert_eq!(
                expected.status.code(),
                actual.status.code(),
                "{account} {query}: {}",
                String::from_utf8_lossy(&actual.stderr)
            );
            assert!(expected.status.success(), "{account} {query}: {}", String::from_utf8_lossy(&expected.stderr));
            assert_eq!(
                String::from_utf8_lossy(&expected.stdout),
                String::from_utf8_lossy(&actual.stdout),
                "{account} {query}"
            );
            compared += 1;
        }
    }
    assert_eq!(compared, accounts.len() * QUERIES.len());
}

fn ingest(data: &Path, store: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["ingest", "--data", s(data), "--store", s(store)];
    args.extend_from_slice(extra);
    run(&args)
}

/// The `total` line's counts: read, used, set aside, duplicates.
fn totals(output: &Output) -> (u64, u64, u64, u64) {
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().find(|l| l.starts_with("total")).expect("total line");
    let numbers: Vec<u64> = line.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    (numbers[0], numbers[1], numbers[2], numbers[3])
}

fn manifest(store: &Path) -> String {
    std::fs::read_to_string(store.join("manifest.json")).expect("manifest")
}

/// Every answer of the store, for comparing a store with itself later.
fn answers(store: &Path) -> Vec<Vec<u8>> {
    ["A1", "A2"].iter().flat_map(|a| QUERIES[..4].iter().map(|q| summary("--store", store, a, q).stdout)).collect()
}

#[test]
fn store_answers_byte_identical_to_raw_data() {
    let temp = tempfile::tempdir().expect("tempdir");
    let data = temp.path().join("data");
    write_data(&data, "d", 7, 400);
    put(&data, "accounts.csv", ACCOUNTS);
    let store = temp.path().join("store");
    let output = ingest(&data, &store, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let (read, used, set_aside, duplicates) = totals(&output);
    // 400 calls and 3 old ones, 400 messages, 134 transcriptions, 80 charges.
    assert_eq!((read, used, set_aside, duplicates), (1017, 1017, 0, 0));
    assert_same_answers(&data, &store, &["A1", "A2", "A3", "A4", "nobody"]);
}

#[test]
fn store_answers_like_sample_data() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_data");
    assert!(sample.join("calls").exists(), "sample_data/ holds the calls folder");
    let temp = tempfile::tempdir().expect("tempdir");
    let store = temp.path().join("store");
    let output = ingest(&sample, &store, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = std::fs::read_to_string(sample.join("accounts.csv")).unwrap_or_default();
    let mut accounts: Vec<&str> = text.lines().skip(1).filter_map(|l| l.split(',').next()).collect();
    accounts.push("nobody");
    assert_same_answers(&sample, &store, &accounts);
}

#[test]
fn store_answers_like_generated_data_in_every_format() {
    let temp = tempfile::tempdir().expect("tempdir");
    for format in ["csv.gz", "parquet"] {
        let data = temp.path().join(format!("data-{format}"));
        let output = run(&[
            "generate",
            "--out",
            s(&data),
            "--calls",
            "6000",
            "--messages",
            "3000",
            "--transcriptions",
            "600",
            "--charges",
            "200",
            "--accounts",
            "4",
            "--start",
            "2026-10-28",
            "--days",
            "20",
            "--format",
            format,
            "--files",
            "3",
            "--duplicates",
            "0.05",
        ]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let store = temp.path().join(format!("store-{format}"));
        let output = ingest(&data, &store, &[]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let (read, used, set_aside, duplicates) = totals(&output);
        assert_eq!(read, used + set_aside + duplicates);
        assert!(duplicates > 0, "the generator re-delivers rows");
        let text = std::fs::read_to_string(data.join("accounts.csv")).expect("accounts.csv");
        let accounts: Vec<&str> = text.lines().skip(1).filter_map(|l| l.split(',').next()).take(3).collect();
        assert!(!accounts.is_empty());
        assert_same_answers(&data, &store, &accounts);
    }
}

#[test]
fn ingest_loads_resources_and_a_records_only_day_keeps_them() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_data");
    assert!(sample.join("endpoints.csv").exists(), "sample_data/ holds endpoints.csv");
    let temp = tempfile::tempdir().expect("tempdir");
    let store = temp.path().join("store");
    let output = ingest(&sample, &store, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let endpoint = |store: &Path| {
        let opened = telemeter::store::Store::open(store).expect("open the store");
        let db = telemeter::resources::ResourceDb::open_for_store(&opened).expect("open resources");
        db.endpoint("MA001SHGA32ZDQYG9N8T", "EP_DESK").expect("query").map(|e| e.username)
    };
    assert_eq!(endpoint(&store).as_deref(), Some("frontdesk"));
    let day = temp.path().join("day");
    write_data(&day, "r", 9, 20);
    let output = ingest(&day, &store, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("left as they were"));
    assert_eq!(endpoint(&store).as_deref(), Some("frontdesk"), "a records-only day keeps the resources");
}

/// Two days of generated data and both together (each with the accounts
/// file), and where their store goes: `(temp, day1, day2, both, store)`.
fn two_days() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf, PathBuf) {
    let temp = tempfile::tempdir().expect("tempdir");
    let (day1, day2, both) = (temp.path().join("day1"), temp.path().join("day2"), temp.path().join("both"));
    write_data(&day1, "a", 1, 150);
    write_data(&day2, "b", 2, 150);
    write_data(&both, "a", 1, 150);
    write_data(&both, "b", 2, 150);
    for dir in [&day1, &day2, &both] {
        put(dir, "accounts.csv", ACCOUNTS);
    }
    let store = temp.path().join("store");
    (temp, day1, day2, both, store)
}

#[test]
fn reingesting_the_same_files_changes_nothing_and_a_new_day_adds() {
    let (_temp, day1, day2, both, store) = two_days();
    let first = ingest(&day1, &store, &[]);
    assert!(first.status.success());
    let before = manifest(&store);
    let again = ingest(&day1, &store, &[]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let (read, used, set_aside, duplicates) = totals(&again);
    assert_eq!((used, set_aside, duplicates), (0, 0, read));
    assert_eq!(totals(&first).0, read);
    assert_eq!(manifest(&store), before, "a re-ingest must not change the store");
    assert_same_answers(&day1, &store, &["A1", "A2"]);

    // Day 2 spills its rollups to disk every few groups: same answers.
    let second = ingest(&day2, &store, &["--max-rollup-groups", "40", "--batch-mb", "1"]);
    assert!(second.status.success(), "{}", String::from_utf8_lossy(&second.stderr));
    assert_eq!(totals(&second).1, totals(&first).1, "day 2 has as many rows as day 1, none duplicates");
    let partials: Vec<PathBuf> =
        walk(&store).into_iter().filter(|p| p.extension().is_some_and(|e| e == "bin")).collect();
    assert!(partials.is_empty(), "no partial file of the spills is left: {partials:?}");
    assert_same_answers(&both, &store, &["A1", "A2", "A4"]);
    // Day 1 and day 2 together, once more: all duplicates.
    let all = ingest(&both, &store, &[]);
    let (read, used, _, duplicates) = totals(&all);
    assert_eq!((used, duplicates), (0, read));
    assert_same_answers(&both, &store, &["A1"]);
}

/// A store as format 4 left it (an hour rollup file per account besides
/// the 15-minute and day ones) still answers like the raw data, never from
/// its hour files (here bytes that are not Parquet at all); its next ingest
/// publishes format 5, which no longer lists them.
#[test]
fn a_format_4_store_answers_without_its_hour_files_and_its_next_ingest_drops_them() {
    let (_temp, day1, day2, both, store) = two_days();
    assert!(ingest(&day1, &store, &[]).status.success());
    let mut old: serde_json::Value = serde_json::from_str(&manifest(&store)).expect("manifest is JSON");
    assert_eq!(old["format"], 7);
    old["format"] = 4.into();
    let rollups = old["rollups"].as_object_mut().expect("rollups");
    assert!(rollups.len() >= 4, "{rollups:?}");
    for (n, grains) in rollups.values_mut().enumerate() {
        assert_eq!(grain_names(grains), ["86400", "900"]);
        let grains = grains.as_object_mut().expect("grains");
        let name = format!("rollups/old-{n}-3600s.parquet");
        put(&store, &name, "not a rollup file");
        grains.insert("3600".to_owned(), name.into());
    }
    put(&store, "manifest.json", &serde_json::to_string_pretty(&old).expect("JSON"));
    assert_same_answers(&day1, &store, &["A1", "A2", "nobody"]);

    let next = ingest(&day2, &store, &[]);
    assert!(next.status.success(), "{}", String::from_utf8_lossy(&next.stderr));
    let new: serde_json::Value = serde_json::from_str(&manifest(&store)).expect("manifest is JSON");
    assert_eq!(new["format"], 7);
    for grains in new["rollups"].as_object().expect("rollups").values() {
        assert_eq!(grain_names(grains), ["86400", "900"]);
    }
    assert_same_answers(&both, &store, &["A1", "A2", "A4"]);
}

/// A damaged rollup file (the footer the fuzzer found, which made polars'
/// footer reader ask for 136 GB) fails the answer and the next ingest that
/// merges into it with an error naming it (its checksum, before any of it
/// is parsed): exit 1, not an abort.
#[test]
fn a_damaged_rollup_file_is_an_error_naming_it_for_answers_and_ingest() {
    let (_temp, day1, day2, _both, store) = two_days();
    assert!(ingest(&day1, &store, &[]).status.success());
    let damaged = std::fs::read(crate::common::root().join("fuzz/corpus/parquet_input/regression-footer-list-count"))
        .expect("the fuzz regression");
    let listed: serde_json::Value = serde_json::from_str(&manifest(&store)).expect("manifest is JSON");
    let rollups = listed["rollups"].as_object().expect("rollups");
    let names: Vec<&str> = rollups.values().filter_map(|grains| grains["900"].as_str()).collect();
    assert!(!names.is_empty(), "{rollups:?}");
    for name in &names {
        std::fs::write(store.join(name), &damaged).expect("damaged");
    }
    let account = rollups.keys().next().expect("an account");
    for run in [summary("--store", &store, account, QUERIES[2]), ingest(&day2, &store, &[])] {
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("-900s.parquet: damaged: its bytes do not match the checksum"), "{stderr}");
    }
}

/// The grains of an account's rollup files in a manifest, sorted as text.
fn grain_names(grains: &serde_json::Value) -> Vec<String> {
    let mut names: Vec<String> = grains.as_object().expect("grains").keys().cloned().collect();
    names.sort();
    names
}

/// A voice call of account A1 at 13:45:01 UTC on `day`, billed `amount`.
fn call_row(id: &str, day: &str, amount: &str) -> String {
    format!("{id},A1,,{day}T13:45:01Z,voice,pstn,outbound,US,61,{amount},0,4000\n")
}

#[test]
fn a_conflicting_record_is_an_error_naming_both_places() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (first, second) = (temp.path().join("first"), temp.path().join("second"));
    let header = CALLS_HEADER;
    put(&first, "calls/monday.csv", &format!("{header}{}", call_row("c1", "2026-11-20", "0.017")));
    let tuesday = format!("{header}{}{}", call_row("c9", "2026-11-21", "0.017"), call_row("c1", "2026-11-20", "0.018"));
    put(&second, "calls/later/tuesday.csv", &tuesday);
    let store = temp.path().join("store");
    assert!(ingest(&first, &store, &[]).status.success());
    let before = manifest(&store);
    let output = ingest(&second, &store, &[]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("'c1'"), "{stderr}");
    assert!(stderr.contains("calls/monday.csv (ingest "), "{stderr}");
    assert!(stderr.contains("):2"), "{stderr}");
    assert!(stderr.contains("calls/later/tuesday.csv:3"), "{stderr}");
    assert_eq!(manifest(&store), before);
}

/// Inside one batch of an ingest, an id's first row is the first in file
/// order (the files in their order, each file's lines in theirs), and of
/// two conflicts the error is the one whose later row comes first.
#[test]
fn a_conflict_inside_one_batch_names_the_first_row_in_file_order() {
    let temp = tempfile::tempdir().expect("tempdir");
    let conflict = |a: &str, name: &str| {
        let data = temp.path().join(name);
        put(&data, "calls/a.csv", &format!("{CALLS_HEADER}{a}"));
        put(&data, "calls/b.csv", &format!("{CALLS_HEADER}{}", c20("x", "0.012")));
        let store = temp.path().join(format!("{name}-store"));
        let output = ingest(&data, &store, &[]);
        assert_eq!(output.status.code(), Some(1));
        assert!(!store.join("manifest.json").exists());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    // x: a.csv:3, then b.csv:2 with another amount.
    let stderr = conflict(&format!("{}{}", c20("c0", "0.010"), c20("x", "0.011")), "one");
    assert!(stderr.contains("record_id 'x': calls/a.csv:3 and calls/b.csv:2 differ"), "{stderr}");
    // y at a.csv:2 and a.csv:4 as well: its later row comes before b.csv:2.
    let a = format!("{}{}{}", c20("y", "0.010"), c20("x", "0.011"), c20("y", "0.013"));
    let stderr = conflict(&a, "two");
    assert!(stderr.contains("record_id 'y': calls/a.csv:2 and calls/a.csv:4 differ"), "{stderr}");
}

/// A call of account A1 on 2026-11-20 ([`call_row`]).
fn c20(id: &str, amount: &str) -> String {
    call_row(id, "2026-11-20", amount)
}

/// A store that holds call c1 (0.017), and the folder of a second ingest
/// (empty): the temporary directory, that folder, the store and its
/// manifest.
fn store_of_call_c1() -> (tempfile::TempDir, PathBuf, PathBuf, String) {
    let temp = tempfile::tempdir().expect("tempdir");
    let (first, second) = (temp.path().join("first"), temp.path().join("second"));
    put(&first, "calls/monday.csv", &format!("{CALLS_HEADER}{}", c20("c1", "0.017")));
    let store = temp.path().join("store");
    assert!(ingest(&first, &store, &[]).status.success());
    let before = manifest(&store);
    (temp, second, store, before)
}

/// Asserts that `output` is the failed ingest of a second c1 at `place`
/// (the conflict with the store's c1), that its message does not name
/// `not_named`, and that the store's manifest is still `before`.
fn fails_on_c1(output: &Output, place: &str, not_named: &str, store: &Path, before: &str) {
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("'c1'") && stderr.contains(place), "{stderr}");
    assert!(!stderr.contains(not_named), "{stderr}");
    assert_eq!(manifest(store), before);
}

/// The next batch is read while this one is taken in, but errors come in
/// the order of one batch at a time: a conflict with the store found after
/// the first batch (its candidates checked at once) wins over a bad row of
/// the second file, already read by then.
#[test]
fn a_batch_conflict_comes_before_a_bad_row_of_the_next_batch() {
    let (_temp, second, store, before) = store_of_call_c1();
    // Over 1 MiB (the smallest batch), so that b.csv is a batch of its own.
    let filler: String = (0..20_000).map(|i| c20(&format!("f{i}"), "0.017")).collect();
    put(&second, "calls/a.csv", &format!("{CALLS_HEADER}{}{filler}", c20("c1", "0.018")));
    put(&second, "calls/b.csv", &format!("{CALLS_HEADER}{}{}", c20("c3", "0.017"), c20("c4", "lots")));
    let output = ingest(&second, &store, &["--batch-mb", "0", "--pending-mb", "0"]);
    fails_on_c1(&output, "calls/a.csv:2", "b.csv", &store, &before);
    // Without the conflict, the second file's bad row is the error.
    std::fs::remove_file(second.join("calls/a.csv")).expect("remove");
    let stderr = String::from_utf8_lossy(&ingest(&second, &store, &["--batch-mb", "0"]).stderr).into_owned();
    assert!(stderr.contains("calls/b.csv:3: column 'amount'"), "{stderr}");
}

/// The kinds are one pipeline: the next kind's first batch is read while
/// the last batch of the kind before is taken in and its candidates are
/// checked. A conflict that only the calls' final check finds still wins
/// over a bad row of the first messages file, read by then.
#[test]
fn a_kinds_last_conflict_comes_before_a_bad_row_of_the_next_kind() {
    let (_temp, second, store, before) = store_of_call_c1();
    put(&second, "calls/a.csv", &format!("{CALLS_HEADER}{}{}", c20("c2", "0.017"), c20("c1", "0.018")));
    let messages =
        "record_id,auth_id,subaccount_auth,timestamp,type,direction,country,segments,amount,surcharge,error_code\n\
         m1,A1,,2026-11-20T10:00:00Z,sms,outbound,US,1,lots,0,\n";
    put(&second, "messages/a.csv", messages);
    fails_on_c1(&ingest(&second, &store, &[]), "calls/a.csv:3", "messages/a.csv", &store, &before);
    // Without the conflict, the messages file's bad row is the error.
    std::fs::remove_file(second.join("calls/a.csv")).expect("remove");
    let stderr = String::from_utf8_lossy(&ingest(&second, &store, &[]).stderr).into_owned();
    assert!(stderr.contains("messages/a.csv:2: column 'amount'"), "{stderr}");
    assert_eq!(manifest(&store), before);
}

/// Rows set aside are written to disk as they are read, not held; an
/// ingest that fails after setting some aside deletes what it wrote of
/// them.
#[test]
fn a_failed_ingest_deletes_the_rows_it_set_aside() {
    let (_temp, second, store, before) = store_of_call_c1();
    let bad = call_row("b1", "2026-11-20", "lots");
    put(&second, "calls/a.csv", &format!("{CALLS_HEADER}{bad}{}", c20("c2", "0.017")));
    put(&second, "calls/b.csv", &format!("{CALLS_HEADER}{}", c20("c1", "0.018")));
    let output = ingest(&second, &store, &["--batch-mb", "0", "--on-bad-row", "set-aside"]);
    fails_on_c1(&output, "calls/b.csv:2", "calls/a.csv", &store, &before);
    assert_eq!(walk(&store.join("rejected")), Vec::<PathBuf>::new());
    // Without the conflict: the row, in the one rejected-rows file.
    std::fs::remove_file(second.join("calls/b.csv")).expect("remove");
    assert!(ingest(&second, &store, &["--batch-mb", "0", "--on-bad-row", "set-aside"]).status.success());
    let rejected = walk(&store.join("rejected"));
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    let text = std::fs::read_to_string(&rejected[0]).expect("rejected file");
    assert!(text.starts_with("file,line,column,value,reason\ncalls/a.csv,2,amount,lots,"), "{text}");
}

#[test]
fn a_failed_or_killed_ingest_leaves_the_store_as_it_was() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (good, bad, big) = (temp.path().join("good"), temp.path().join("bad"), temp.path().join("big"));
    write_data(&good, "g", 3, 100);
    put(&good, "accounts.csv", ACCOUNTS);
    let store = temp.path().join("store");
    assert!(ingest(&good, &store, &[]).status.success());
    let (before, answers_before) = (manifest(&store), answers(&store));
    let files_before = walk(&store);

    // New calls and messages are read and written first (one records
    // file per batch, rollups spilled to partial files); a bad charge (the
    // last kind) then fails the run, which deletes what it wrote.
    write_data(&bad, "n", 4, 100);
    put(
        &bad,
        "charges/zz.csv",
        "record_id,auth_id,timestamp,description,units,amount\nz1,A1,2026-11-20T00:00:00Z,CNAM,1,0\n",
    );
    let output = ingest(&bad, &store, &["--batch-mb", "1", "--max-rollup-groups", "1"]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("charges/zz.csv:2: column 'amount'"), "{stderr}");
    assert_eq!(walk(&store), files_before, "the failed run left files of its own");
    assert_eq!(manifest(&store), before);
    assert_eq!(answers(&store), answers_before);

    // Killed mid-run: one batch per file, killed as soon as it has written
    // its first records file.
    for i in 0..8 {
        write_data(&big, &format!("k{i}"), 10 + i, 3000);
    }
    let known = walk(&store.join("records")).len();
    let mut child = telemeter()
        .args(["ingest", "--data", s(&big), "--store", s(&store), "--batch-mb", "1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn ingest");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while walk(&store.join("records")).len() == known && std::time::Instant::now() < deadline {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let finished = child.try_wait().expect("wait").is_some();
    child.kill().ok();
    child.wait().expect("reap");
    if !finished {
        assert_eq!(manifest(&store), before, "a killed ingest published nothing");
        assert_eq!(answers(&store), answers_before);
    }
    // The next ingest still works on top of the orphans.
    let output = ingest(&bad, &store, &["--on-bad-row", "set-aside"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// Every file under `dir`, sorted.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return found };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found.sort();
    found
}

#[test]
fn set_aside_rows_are_counted_and_written_with_their_reason() {
    let temp = tempfile::tempdir().expect("tempdir");
    let (clean, dirty) = (temp.path().join("clean"), temp.path().join("dirty"));
    write_data(&clean, "c", 5, 60);
    write_data(&dirty, "c", 5, 60);
    for dir in [&clean, &dirty] {
        put(dir, "accounts.csv", ACCOUNTS);
    }
    let header = CALLS_HEADER;
    // Two bad rows, one duplicate of a row of calls/c.csv, one good row.
    let extra = format!(
        "{header}e1,A1,,2026-11-20T13:45:01Z,fax,pstn,outbound,US,61,0.017,0,4000\n\
         e2,A1,,2026-11-20T13:45:01Z,voice,pstn,outbound,usa,61,0.017,0,4000\n\
         e3,A1,,2026-11-20T13:45:01Z,voice,pstn,outbound,US,61,0.017,0,4000\n"
    );
    put(&dirty, "calls/extra.csv", &extra);
    put(
        &clean,
        "calls/extra.csv",
        &format!("{header}e3,A1,,2026-11-20T13:45:01Z,voice,pstn,outbound,US,61,0.017,0,4000\n"),
    );
    put(
        &dirty,
        "calls/repeat.csv",
        &format!("{header}e3,A1,,2026-11-20 13:45:01,voice,pstn,outbound,US,61.0,0.0170,0,4000\n"),
    );
    let store = temp.path().join("store");
    let failed = ingest(&dirty, &store, &[]);
    assert_eq!(failed.status.code(), Some(1), "bad rows fail by default");
    assert!(!store.join("manifest.json").exists());
    let output = ingest(&dirty, &store, &["--on-bad-row", "set-aside"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let (read, used, set_aside, duplicates) = totals(&output);
    assert_eq!(read, used + set_aside + duplicates);
    assert_eq!((set_aside, duplicates), (2, 1));
    let rejected = walk(&store.join("rejected"));
    assert_eq!(rejected.len(), 1);
    let text = std::fs::read_to_string(&rejected[0]).expect("rejected file");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "file,line,column,value,reason");
    assert!(lines[1].starts_with("calls/extra.csv,2,product,fax,"), "{text}");
    assert!(lines[2].starts_with("calls/extra.csv,3,country,usa,"), "{text}");
    assert_eq!(lines.len(), 3);
    assert_same_answers(&clean, &store, &["A1", "A2"]);
}

#[test]
fn report_from_the_store_writes_the_same_account_files_as_from_raw_data() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = crate::common::sample_data();
    let store = dir.path().join("store");
    assert!(ingest(&data, &store, &[]).status.success());
    let files =
        assert_same_account_files(dir.path(), &data, &store, "from_date=2026-10-25&to_date=2026-11-21&page_size=5");
    assert!(files.iter().any(|p| p.ends_with("page-0002.json")), "{files:?}");
}

/// A window whose buckets are not unions of 15-minute slots (Africa/Monrovia
/// was UTC-0:44:30 until 1972) is answered from the stored records instead of
/// the rollups: `report --store` still writes what `report --data` writes.
/// (Europe/Amsterdam in 1930, the review's example, no longer is one: the
/// time zone database now gives it Brussels' history, UTC+0 then.)
#[test]
fn report_from_the_store_in_a_historical_offset_writes_what_raw_data_gives() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    put(&data, "accounts.csv", "auth_id,currency,timezone\nA1,USD,\nA2,EUR,Asia/Kolkata\n");
    put(
        &data,
        "calls/1971.csv",
        "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause\n\
         c1,A1,,1971-01-01T00:05:00Z,voice,pstn,outbound,US,60,0.120,0.0010,4000\n\
         c2,A1,S1,1971-01-01T23:50:00Z,voice,sip,inbound,DE,30,0.050,0.0000,\n\
         c3,A2,,1971-01-02T10:00:00Z,zentrunk,sip,outbound,IN,120,0.300,0.0020,3010\n\
         c4,A1,,2026-11-01T10:00:00Z,voice,pstn,outbound,US,60,0.120,0.0010,4000\n",
    );
    put(
        &data,
        "charges/1971.csv",
        "record_id,auth_id,timestamp,description,units,amount\nh1,A1,1971-01-01T12:00:00Z,Number Charges,1,1.500\n",
    );
    let store = dir.path().join("store");
    let output = ingest(&data, &store, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let query = "timezone=Africa/Monrovia&from_date=1971-01-01&to_date=1971-01-03&granularity=hour";
    let files = assert_same_account_files(dir.path(), &data, &store, query);
    // The window holds rows, in hours 44 minutes off the UTC quarter hours:
    // c2 at 23:50Z is 23:05:30 local, in the hour from 23:00 local, written
    // in UTC as its offset has seconds (c1, 00:05Z, is still 1970 there).
    let page = std::fs::read_to_string(dir.path().join("raw/A1/page-0001.json")).expect("A1's page");
    assert!(page.contains(r#""usage":[{"from_date":"1971-01-01T23:44:30Z","#), "{page}");
    assert!(files.iter().any(|p| p.ends_with("A2/page-0001.json")), "{files:?}");
}

/// Runs `report` from `data` into `DIR/raw` and from `store` into
/// `DIR/stored` and asserts that every account's pages, CSV and HTML are the
/// same; only the run-level index and manifest differ (a store has no raw
/// input files to list). The account files, relative to the output folder.
fn assert_same_account_files(dir: &Path, data: &Path, store: &Path, query: &str) -> Vec<PathBuf> {
    let now = "2026-11-21T00:00:00Z";
    let (from_raw, from_store) = (dir.join("raw"), dir.join("stored"));
    for (source, path, out) in [("--data", data, &from_raw), ("--store", store, &from_store)] {
        let output = run(&["report", source, s(path), "--out", s(out), "--query", query, "--now", now, "--quiet"]);
        assert!(output.status.success(), "{source}: {}", String::from_utf8_lossy(&output.stderr));
    }
    let files = |root: &Path| -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = walk(root)
            .into_iter()
            .filter(|p| p.parent() != Some(root))
            .map(|p| p.strip_prefix(root).expect("under root").to_path_buf())
            .collect();
        files.sort();
        files
    };
    let raw_files = files(&from_raw);
    assert_eq!(raw_files, files(&from_store));
    for file in &raw_files {
        let (a, b) = (std::fs::read(from_raw.join(file)), std::fs::read(from_store.join(file)));
        assert_eq!(a.expect("raw file"), b.expect("store file"), "{}", file.display());
    }
    raw_files
}

/// A report of a store names the generation it read (the latest ingest and
/// the store manifest's own checksum); a report of raw files names none.
#[test]
fn a_report_of_a_store_names_the_generation_it_read() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_data");
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let late = dir.path().join("late");
    std::fs::create_dir_all(&late).expect("mkdir");
    std::fs::copy(sample.join("accounts.csv"), late.join("accounts.csv")).expect("copy");
    put(
        &late,
        "calls/late.csv",
        &format!("{CALLS_HEADER}c900,A1,,2026-10-02T10:00:00Z,voice,pstn,outbound,US,60,0.01,0,4000\n"),
    );
    for data in [&sample, &late] {
        let output = ingest(data, &store, &[]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let json = |path: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json")
    };
    let stored = json(&store.join("manifest.json"));
    for (source, path) in [("--store", &store), ("--data", &sample)] {
        let out = dir.path().join(format!("report-{}", &source[2..]));
        let output = run(&["report", source, s(path), "--out", s(&out), "--now", "2026-11-21T00:00:00Z", "--quiet"]);
        assert!(output.status.success(), "{source}: {}", String::from_utf8_lossy(&output.stderr));
        let manifest = json(&out.join("manifest.json"));
        if source == "--data" {
            assert!(manifest.get("store").is_none(), "{manifest}");
            continue;
        }
        let entry = &manifest["store"];
        assert_eq!(entry["generation"], 2, "{entry}");
        assert_eq!(entry["ingest"], stored["ingests"][1]["id"], "{entry}");
        assert_eq!(entry["manifest_checksum"], stored["checksum"], "{entry}");
    }
}
