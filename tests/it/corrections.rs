//! Revisions and voids read raw (`corrections.md`): only a record's
//! current version counts, every row is counted, conflicts name both
//! places, a malformed revision names file, line, column and value, and
//! `ingest` applies corrections to a store in any split and order. Real
//! files, the real binary.

use std::path::Path;

use serde_json::Value;

use crate::common::{summary, telemeter, temp_dir, write, write_string_parquet};

const CHARGES: &str = "record_id,auth_id,timestamp,description,units,amount";
const QUERY: &str = "granularity=day&from_date=2026-11-01&to_date=2026-12-01";

/// The summary of A1 over `dir`, its `api_id` left out.
fn answer(dir: &Path) -> Value {
    without_api_id(summary(dir, "A1", QUERY, &[]).ok())
}

/// A summary's JSON without its `api_id` (which names its source); null
/// for text that is no JSON object (a failed run's empty output).
fn without_api_id(text: &str) -> Value {
    let mut value: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.remove("api_id");
    }
    value
}

/// The summary of `account` for `query`, over the raw folder `data` and
/// from `store`, each without its `api_id`.
fn raw_and_stored(data: &Path, store: &Path, account: &str, query: &str) -> (Value, Value) {
    let raw = summary(data, account, query, &[]);
    let store = store.to_str().expect("UTF-8 path");
    let stored =
        telemeter(&["summary", "--store", store, "--auth-id", account, "--query", query, "--now", crate::common::NOW]);
    (without_api_id(&raw.stdout), without_api_id(&stored.stdout))
}

#[test]
fn only_current_versions_count_and_a_void_withdraws_its_record() {
    let corrected = temp_dir();
    let dir = corrected.path();
    // c1 re-rated (revision 2 in an earlier file, 1 later), c2 moved to
    // another day, c3 withdrawn, c4 re-delivered, c5 withdrawn and brought
    // back by a higher revision.
    for (path, text) in corrected_files() {
        write(dir, path, text);
    }

    // The same records as they stand now, without revisions or voids.
    let current = temp_dir();
    write(
        current.path(),
        "charges/now.csv",
        format!(
            "{CHARGES}\n\
        c1,A1,2026-11-20T10:00:00Z,CNAM,1,0.90\n\
        c2,A1,2026-11-23T10:00:00Z,CNAM,3,0.50\n\
        c4,A1,2026-11-21T10:00:00Z,CNAM,1,0.10\n\
        c5,A1,2026-11-22T10:00:00Z,CNAM,1,0.25\n"
        ),
    );
    assert_eq!(answer(dir), answer(current.path()));

    // The report counts every row: 10 charges and 3 voids read.
    let out = temp_dir();
    let out_dir = out.path().join("out");
    let run = telemeter(&[
        "report",
        "--data",
        dir.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--query",
        "granularity=month&from_date=2026-11-01&to_date=2026-12-01",
        "--now",
        "2026-11-25T00:00:00Z",
    ]);
    run.ok();
    assert!(run.stderr.contains("1 duplicates, 6 superseded, 2 voids"), "{}", run.stderr);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("manifest.json")).unwrap()).expect("a manifest");
    let counts = &manifest["counts"];
    let n = |kind: &str, what: &str| counts[kind][what].as_u64().unwrap_or_else(|| panic!("{kind}.{what}"));
    // charges: c1 x3 (2 superseded), c2 x2 (1), c3 (1), c4 x2 (1 dup), c5 x2 (1).
    assert_eq!(["read", "used", "duplicates", "superseded", "voids"].map(|w| n("charges", w)), [10, 4, 1, 5, 0]);
    // voids: c3's holds its record's highest revision, c5's is superseded
    // by revision 3, c9's withdraws a record never delivered.
    assert_eq!(["read", "used", "duplicates", "superseded", "voids"].map(|w| n("voids", w)), [3, 0, 0, 1, 2]);
    assert_eq!(
        n("all", "read"),
        n("all", "used") + n("all", "set_aside") + n("all", "duplicates") + n("all", "superseded") + n("all", "voids")
    );
}

/// The stderr of a failing summary over `dir`.
fn failure(dir: &Path) -> String {
    let run = summary(dir, "A1", QUERY, &[]);
    assert_eq!(run.code, 1, "stderr: {}", run.stderr);
    run.stderr
}

#[test]
fn conflicts_of_revisions_and_voids_name_both_places() {
    // Same id and revision, different content.
    let t = temp_dir();
    write(t.path(), "charges/a.csv", format!("{CHARGES},revision\nc1,A1,2026-11-20T10:00:00Z,CNAM,1,0.90,2\n"));
    write(t.path(), "charges/b.csv", format!("{CHARGES},revision\nc1,A1,2026-11-20T10:00:00Z,CNAM,1,0.80,2\n"));
    assert_eq!(
        failure(t.path()),
        "error: conflicting duplicate charges record_id 'c1': charges/a.csv:2 and charges/b.csv:2 differ\n"
    );
    // A void and a version of the same revision.
    let t = temp_dir();
    write(t.path(), "charges/a.csv", format!("{CHARGES},revision\nc1,A1,2026-11-20T10:00:00Z,CNAM,1,0.90,2\n"));
    write(t.path(), "voids/v.csv", "record_id,kind,revision\nc1,charges,2\n");
    assert_eq!(
        failure(t.path()),
        "error: conflicting duplicate charges record_id 'c1': charges/a.csv:2 and voids/v.csv:2 differ\n"
    );
    // Two voids of one revision: the same reason is a duplicate, another
    // reason a conflict.
    let t = temp_dir();
    write(t.path(), "charges/a.csv", format!("{CHARGES}\nc1,A1,2026-11-20T10:00:00Z,CNAM,1,0.90\n"));
    write(t.path(), "voids/v.csv", "record_id,kind,revision,reason\nc1,charges,1,late\nc1,charges,1,late\n");
    summary(t.path(), "A1", QUERY, &[]).ok();
    write(t.path(), "voids/w.csv", "record_id,kind,revision,reason\nc1,charges,1,wrong\n");
    assert_eq!(
        failure(t.path()),
        "error: conflicting duplicate charges record_id 'c1': voids/v.csv:2 and voids/w.csv:2 differ\n"
    );

    // A void stored by an earlier ingest is named with that ingest, as a
    // stored version is: against another void, and against a version.
    let t = temp_dir();
    let (first, second, third, store) =
        (t.path().join("first"), t.path().join("second"), t.path().join("third"), t.path().join("store"));
    write(&first, "voids/v.csv", "record_id,kind,revision,reason\nc2,charges,1,dup\n");
    write(&second, "voids/v.csv", "record_id,kind,revision,reason\nc2,charges,1,other\n");
    write(&third, "charges/x.csv", format!("{CHARGES},revision\nc2,A1,2026-11-20T10:00:00Z,CNAM,1,0.50,1\n"));
    let path = |p: &Path| p.to_str().expect("UTF-8 path").to_owned();
    let ingest = |data: &Path| telemeter(&["ingest", "--data", &path(data), "--store", &path(&store)]);
    let out = ingest(&first).ok().to_owned();
    let id = out.split("(ingest ").nth(1).and_then(|rest| rest.split(')').next()).expect("the ingest id").to_owned();
    let stored = format!("voids/v.csv (ingest {id}):2");
    let void = ingest(&second);
    assert_eq!(void.code, 1, "{void:?}");
    assert!(void.stderr.contains(&format!("'c2': {stored} and voids/v.csv:2 differ")), "{}", void.stderr);
    let version = ingest(&third);
    assert_eq!(version.code, 1, "{version:?}");
    assert!(version.stderr.contains(&format!("'c2': charges/x.csv:2 and {stored} differ")), "{}", version.stderr);
}

#[test]
fn a_malformed_revision_or_void_names_file_line_column_and_value() {
    let t = temp_dir();
    write(t.path(), "charges/a.csv", format!("{CHARGES},revision\nc1,A1,2026-11-20T10:00:00Z,CNAM,1,0.90,2.5\n"));
    assert_eq!(
        failure(t.path()),
        "error: charges/a.csv:2: column 'revision': '2.5' is not a count (a non-negative integer)\n"
    );
    let t = temp_dir();
    let revision: &[&str] = &["-1"];
    write_string_parquet(
        &t.path().join("charges/a.parquet"),
        &[
            ("record_id", &["c1"]),
            ("auth_id", &["A1"]),
            ("timestamp", &["2026-11-20T10:00:00Z"]),
            ("description", &["CNAM"]),
            ("units", &["1"]),
            ("amount", &["0.9"]),
            ("revision", revision),
        ],
    );
    let stderr = failure(t.path());
    assert!(stderr.starts_with("error: charges/a.parquet"), "{stderr}");
    assert!(stderr.contains("column 'revision': '-1' is not a count"), "{stderr}");
    for (row, message) in [
        ("c1,charges,0", "voids/v.csv:2: column 'revision': '0' is not a void's revision (at least 1)"),
        ("c1,charges,", "voids/v.csv:2: column 'revision': '' is empty; a void needs a revision of at least 1"),
        ("c1,call,1", "voids/v.csv:2: column 'kind': 'call' is not a record kind (expected calls, messages, transcriptions or charges)"),
    ] {
        let t = temp_dir();
        write(t.path(), "charges/a.csv", format!("{CHARGES}\n"));
        write(t.path(), "voids/v.csv", format!("record_id,kind,revision\n{row}\n"));
        assert_eq!(failure(t.path()), format!("error: {message}\n"));
    }
}

/// A folder of charges with revisions and voids, each file as (path,
/// text): its current versions are c1 at 0.90 (revision 2), c2 moved to the
/// 23rd (revision 1), c4 once, c5 at 0.25 (revision 3); c3 is withdrawn.
fn corrected_files() -> Vec<(&'static str, String)> {
    vec![
        (
            "charges/a.csv",
            format!(
                "{CHARGES},revision\n\
            c1,A1,2026-11-20T10:00:00Z,CNAM,1,0.90,2\n\
            c2,A1,2026-11-20T10:00:00Z,CNAM,1,0.50,\n\
            c3,A1,2026-11-20T10:00:00Z,CNAM,1,0.70,0\n\
            c4,A1,2026-11-21T10:00:00Z,CNAM,1,0.10,\n\
            c5,A1,2026-11-22T10:00:00Z,CNAM,1,0.20,0\n"
            ),
        ),
        (
            "charges/b.csv",
            format!("{CHARGES}\nc1,A1,2026-11-20T10:00:00Z,CNAM,1,1.00\nc4,A1,2026-11-21T10:00:00Z,CNAM,1,0.10\n"),
        ),
        (
            "charges/c.csv",
            format!(
                "revision,{CHARGES}\n\
            1,c1,A1,2026-11-20T10:00:00Z,CNAM,1,0.95\n\
            1,c2,A1,2026-11-23T10:00:00Z,CNAM,3,0.50\n\
            3,c5,A1,2026-11-22T10:00:00Z,CNAM,1,0.25\n"
            ),
        ),
        (
            "voids/v.csv",
            "record_id,kind,revision,reason\nc3,charges,1,not billable\nc5,charges,2,\nc9,charges,1,never sent\n"
                .to_owned(),
        ),
    ]
}

/// The summary of A1 from `store`, its `api_id` left out.
fn store_answer(store: &Path) -> Value {
    let store = store.to_str().expect("UTF-8 path");
    let run =
        telemeter(&["summary", "--store", store, "--auth-id", "A1", "--query", QUERY, "--now", crate::common::NOW]);
    without_api_id(run.ok())
}

/// The ledger of `store` since generation 0, as CSV.
fn ledger(store: &Path) -> String {
    telemeter(&["changes", "--store", store.to_str().unwrap(), "--since", "0", "--format", "csv"]).ok().to_owned()
}

/// Any split of the corrected files into ingests, in any order, gives the
/// answer of the raw folder, and a ledger whose sums are the answer's;
/// every stored row that stopped counting is counted by its ingest.
#[test]
fn ingests_apply_corrections_in_any_split_and_order() {
    let t = temp_dir();
    let all = t.path().join("all");
    for (path, text) in corrected_files() {
        write(&all, path, text);
    }
    let raw = answer(&all);
    assert_eq!(raw["meta"]["total_spend"].as_f64(), Some(1.75), "{raw}");
    let files = corrected_files();
    // One ingest of all; each file an ingest, in several orders; two
    // halves.
    let splits: Vec<Vec<Vec<usize>>> = vec![
        vec![vec![0, 1, 2, 3]],
        vec![vec![0], vec![1], vec![2], vec![3]],
        vec![vec![3], vec![2], vec![1], vec![0]],
        vec![vec![2], vec![3], vec![1], vec![0]],
        vec![vec![1], vec![0], vec![3], vec![2]],
        vec![vec![1, 3], vec![0, 2]],
    ];
    for (n, split) in splits.iter().enumerate() {
        let store = t.path().join(format!("store{n}"));
        for (i, part) in split.iter().enumerate() {
            let data = t.path().join(format!("part{n}-{i}"));
            for &f in part {
                write(&data, files[f].0, files[f].1.clone());
            }
            let run = telemeter(&["ingest", "--data", data.to_str().unwrap(), "--store", store.to_str().unwrap()]);
            run.ok();
        }
        assert_eq!(store_answer(&store), raw, "split {split:?}");
        // The ledger sums to the answer: 4 records (added less withdrawn;
        // how many were restated depends on the order) of 6 units and
        // 1.75 in November.
        let ledger = ledger(&store);
        let row = ledger.lines().nth(1).unwrap_or_default().to_owned();
        let cells: Vec<&str> = row.split(',').collect();
        assert_eq!(cells[..3], ["A1", "2026-11", "other"], "split {split:?}: {ledger}");
        let count = |i: usize| cells[i].parse::<i64>().expect("a count");
        assert_eq!(count(3) - count(5), 4, "records added less withdrawn, split {split:?}: {ledger}");
        assert_eq!([cells[6], cells[8]], ["6", "1.75"], "units and amount, split {split:?}: {ledger}");
        let verify = telemeter(&["store", "verify", "--store", store.to_str().unwrap()]);
        verify.ok();
    }
}

/// A correcting ingest into a store of the plain records: the re-rated
/// record is restated, the voided one withdrawn, each counted, and the
/// history and the ledger say so.
#[test]
fn a_correcting_ingest_restates_and_withdraws_stored_records() {
    let t = temp_dir();
    let store = t.path().join("store");
    let first = t.path().join("first");
    write(
        &first,
        "charges/a.csv",
        format!(
            "{CHARGES}\nc1,A1,2026-10-31T23:30:00Z,CNAM,1,1.00\nc2,A1,2026-11-20T10:00:00Z,CNAM,1,0.50\nc3,A1,2026-11-21T10:00:00Z,CNAM,1,0.25\n"
        ),
    );
    telemeter(&["ingest", "--data", first.to_str().unwrap(), "--store", store.to_str().unwrap()]).ok();
    let second = t.path().join("second");
    // c1 moves from October to November and is re-rated; c2 is withdrawn.
    write(&second, "charges/fix.csv", format!("{CHARGES},revision\nc1,A1,2026-11-01T00:30:00Z,CNAM,1,0.80,1\n"));
    write(&second, "voids/v.csv", "record_id,kind,revision,reason\nc2,charges,1,not billable\n");
    let run = telemeter(&["ingest", "--data", second.to_str().unwrap(), "--store", store.to_str().unwrap()]);
    let out = run.ok();
    assert!(out.contains("restated 1") && out.contains("withdrawn 1"), "{out}");
    let manifest: Value = serde_json::from_slice(&std::fs::read(store.join("manifest.json")).unwrap()).unwrap();
    let log = &manifest["ingests"][1];
    assert_eq!((log["stored_superseded"].as_u64(), log["stored_withdrawn"].as_u64()), (Some(1), Some(1)), "{log}");
    let changes = telemeter(&["changes", "--store", store.to_str().unwrap(), "--since", "1", "--format", "csv"]);
    assert_eq!(
        changes.ok(),
        "auth_id,month,product,records_added,records_restated,records_withdrawn,units,duration_seconds,amount,surcharge\n\
         A1,2026-10,other,0,1,0,-1,0.0,-1.0,0.0\n\
         A1,2026-11,other,0,1,1,0,0.0,0.3,0.0\n"
    );
    let history = telemeter(&[
        "history",
        "--store",
        store.to_str().unwrap(),
        "--kind",
        "charges",
        "--record-id",
        "c1",
        "--format",
        "jsonl",
    ]);
    let versions: Vec<Value> = history.ok().lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    let counts: Vec<(u64, bool)> =
        versions.iter().map(|v| (v["revision"].as_u64().unwrap_or(99), v["counts"] == true)).collect();
    assert_eq!(counts, [(0, false), (1, true)]);
    // c2's void is listed after its version, with its reason and ingest;
    // neither counts.
    let history = telemeter(&[
        "history",
        "--store",
        store.to_str().unwrap(),
        "--kind",
        "charges",
        "--record-id",
        "c2",
        "--format",
        "jsonl",
    ]);
    let versions: Vec<Value> = history.ok().lines().map(|l| serde_json::from_str(l).expect("JSON")).collect();
    assert_eq!(versions.len(), 2, "{versions:?}");
    assert_eq!((versions[1]["void"].clone(), versions[1]["counts"].clone()), (Value::Bool(true), Value::Bool(false)));
    assert_eq!(versions[1]["record"]["reason"], "not billable");
    assert_eq!(versions[1]["source_file"], "voids/v.csv");
    assert!(!versions[1]["ingest"].as_str().unwrap_or_default().is_empty(), "{versions:?}");
    assert_eq!(versions[0]["counts"], false);
    // The store answers as the raw folder of both deliveries does.
    let both = t.path().join("both");
    crate::common::copy_tree(&first, &both);
    crate::common::copy_tree(&second, &both);
    let query = "granularity=month&from_date=2026-10-01&to_date=2026-12-01";
    let (raw, stored) = raw_and_stored(&both, &store, "A1", query);
    assert!(raw.is_object(), "{raw}");
    assert_eq!(stored, raw);
}

#[test]
fn the_sample_correcting_delivery_changes_what_its_readme_says() {
    let t = temp_dir();
    let data = t.path().join("corrected");
    crate::common::copy_tree(&crate::common::sample_data(), &data);
    let corrections = crate::common::root().join("sample_corrections");
    for folder in ["calls", "charges", "voids"] {
        crate::common::copy_tree(&corrections.join(folder), &data.join(folder));
    }
    let out = t.path().join("out");
    let run = telemeter(&[
        "report",
        "--data",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--query",
        "granularity=month&from_date=2026-10-01&to_date=2026-12-01&page_size=10",
        "--now",
        crate::common::NOW,
    ]);
    run.ok();
    let manifest: Value = serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    let kept = serde_json::json!({ "counts": manifest["counts"], "accounts": manifest["accounts"] });
    crate::common::golden("corrections/sample_manifest.json", &(serde_json::to_string_pretty(&kept).unwrap() + "\n"));
    // Three records changed: the spend of MA001SHGA32ZDQYG9N8T falls by the re-rated
    // call (0.013), the restated charge (0.008) and the withdrawn message
    // (0.01), from the sample's 7.06.
    let ma001 = &manifest["accounts"][0];
    assert_eq!(ma001["auth_id"], "MA001SHGA32ZDQYG9N8T");
    assert_eq!(ma001["total_spend"].as_f64(), Some(7.029));
}

/// One delivered row of the property test: a version of charge `id`
/// (content fixed by its id and revision, so that a repeat is a
/// duplicate) or a void (odd revisions, never a version's).
#[derive(Clone, Debug)]
enum Delivered {
    Version { id: u8, revision: u8 },
    Void { id: u8, revision: u8 },
}

/// The content of version `revision` of charge `id` in a case whose
/// contents are picked by `salt`: its account, day, units and amount in
/// cents.
fn content(salt: u64, id: u8, revision: u8) -> (&'static str, u32, u64, u64) {
    let h = (salt ^ (u64::from(id) << 8 | u64::from(revision))).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let account = if (h >> 7).is_multiple_of(3) { "A2" } else { "A1" };
    (account, 20 + ((h >> 13) % 6) as u32, 1 + (h >> 21) % 3, 1 + (h >> 29) % 499)
}

/// The contract, simply: per account, the units and cents of each
/// record's current version (the highest revision among its versions and
/// voids, when it is a version).
fn reference(salt: u64, rows: &[Delivered]) -> std::collections::BTreeMap<&'static str, (u64, u64)> {
    let mut highest: std::collections::BTreeMap<u8, (u8, bool)> = Default::default();
    for row in rows {
        let (id, revision, void) = match *row {
            Delivered::Version { id, revision } => (id, revision, false),
            Delivered::Void { id, revision } => (id, revision, true),
        };
        let best = highest.entry(id).or_insert((revision, void));
        if revision > best.0 {
            *best = (revision, void);
        }
    }
    let mut totals: std::collections::BTreeMap<&'static str, (u64, u64)> = Default::default();
    for (id, (revision, void)) in highest {
        if !void {
            let (account, _, units, cents) = content(salt, id, revision);
            let total = totals.entry(account).or_default();
            total.0 += units;
            total.1 += cents;
        }
    }
    totals
}

fn delivered() -> impl proptest::strategy::Strategy<Value = Delivered> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (0u8..6, 0u8..3).prop_map(|(id, r)| Delivered::Version { id, revision: 2 * r }),
        1 => (0u8..6, 0u8..3).prop_map(|(id, r)| Delivered::Void { id, revision: 2 * r + 1 }),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig {
        cases: 24,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    })]

    /// Random versions and voids, cut into random files, delivered in
    /// random ingests in a random order: the store answers as the raw
    /// folder of all of them and as the reference, and every ingest's
    /// rows add up.
    #[test]
    fn any_split_and_order_of_corrections_answers_as_the_reference(
        salt in proptest::prelude::any::<u64>(),
        rows in proptest::collection::vec((delivered(), 0usize..4), 1..24),
        order in proptest::collection::vec(0usize..4, 4),
    ) {
        let t = temp_dir();
        let all = t.path().join("all");
        // Each row goes to one of four files (calls it `file`), each file
        // to one of up to four ingests (`order[file]`).
        let mut files: Vec<(String, String)> = (0..4).map(|_| (String::new(), String::new())).collect();
        for (row, file) in &rows {
            match *row {
                Delivered::Version { id, revision } => {
                    let (account, day, units, cents) = content(salt, id, revision);
                    files[*file].0 += &format!(
                        "c{id},{account},2026-11-{day}T10:00:00Z,CNAM,{units},{}.{:02},{revision}\n",
                        cents / 100,
                        cents % 100
                    );
                }
                Delivered::Void { id, revision } => {
                    files[*file].1 += &format!("c{id},charges,{revision},reason {}\n", id % 2);
                }
            }
        }
        let mut ingests: Vec<std::path::PathBuf> = Vec::new();
        let mut by_ingest: std::collections::BTreeMap<usize, std::path::PathBuf> = Default::default();
        for (f, (versions, voids)) in files.iter().enumerate() {
            let at = by_ingest.entry(order[f]).or_insert_with(|| t.path().join(format!("ingest{}", order[f]))).clone();
            for dir in [&all, &at] {
                if !versions.is_empty() {
                    write(dir, &format!("charges/f{f}.csv"), format!("{CHARGES},revision\n{versions}"));
                }
                if !voids.is_empty() {
                    write(dir, &format!("voids/f{f}.csv"), format!("record_id,kind,revision,reason\n{voids}"));
                }
            }
        }
        ingests.extend(by_ingest.into_values());
        let store = t.path().join("store");
        for data in &ingests {
            if std::fs::read_dir(data).map(|d| d.count()).unwrap_or(0) == 0 {
                continue;
            }
            let run = telemeter(&["ingest", "--data", data.to_str().unwrap(), "--store", store.to_str().unwrap()]);
            proptest::prop_assert_eq!(run.code, 0, "{}", run.stderr);
        }
        let reference = reference(salt, &rows.iter().map(|(row, _)| row.clone()).collect::<Vec<_>>());
        let query = "granularity=month&from_date=2026-11-01&to_date=2026-12-01";
        for account in ["A1", "A2"] {
            let (raw, stored) = raw_and_stored(&all, &store, account, query);
            proptest::prop_assert_eq!(&stored, &raw, "{}", account);
            let (units, cents) = reference.get(account).copied().unwrap_or_default();
            let spend = raw["meta"]["total_spend"].as_f64().unwrap_or(-1.0);
            proptest::prop_assert!((spend * 100.0 - cents as f64).abs() < 1e-6, "{account}: {spend} against {cents} cents");
            let charged: u64 = raw["other_charges"].as_array().map_or(0, |rows| {
                rows.iter().map(|r| r["total_units"].as_u64().unwrap_or(0)).sum()
            });
            proptest::prop_assert_eq!(charged, units, "{}", account);
        }
        if store.join("manifest.json").exists() {
            let manifest: Value = serde_json::from_slice(&std::fs::read(store.join("manifest.json")).unwrap()).unwrap();
            for log in manifest["ingests"].as_array().into_iter().flatten() {
                let n = |what: &str| log[what].as_u64().unwrap_or(0);
                proptest::prop_assert_eq!(
                    n("read"),
                    n("used") + n("set_aside") + n("duplicates") + n("superseded") + n("voids"),
                    "{}", log
                );
            }
        }
    }
}

/// A correcting delivery for the calls of `base` (generated: plain CSV):
/// every 20th call re-rated at revision 1, every 150th withdrawn.
pub(crate) fn correcting_delivery(base: &Path, out: &Path) {
    let mut fixes = String::new();
    let mut voids = String::from("record_id,kind,revision,reason\n");
    let mut header = String::new();
    let mut files: Vec<std::path::PathBuf> =
        std::fs::read_dir(base.join("calls")).expect("calls").flatten().map(|e| e.path()).collect();
    files.sort();
    let mut n = 0;
    let mut used = std::collections::HashSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("a calls file");
        let mut lines = text.lines();
        header = lines.next().unwrap_or_default().to_owned();
        for line in lines {
            n += 1;
            let mut cells: Vec<String> = line.split(',').map(str::to_owned).collect();
            // A re-delivered row is corrected once, never voided too.
            if (n % 20 == 0 || n % 150 == 0) && !used.insert(cells[0].clone()) {
                continue;
            }
            if n % 20 == 0 {
                // The amount (column 10) a little higher: a digit more.
                let more = if cells[9].contains('.') { "1" } else { ".1" };
                cells[9] += more;
                fixes += &format!("{},1\n", cells.join(","));
            } else if n % 150 == 0 {
                voids += &format!("{},calls,1,killed test\n", cells[0]);
            }
        }
    }
    write(out, "calls/fix.csv", format!("{header},revision\n{fixes}"));
    write(out, "voids/v.csv", voids);
}

/// The answers of `store` for every account of `accounts` (an
/// accounts.csv), a query each of day and month grain.
fn store_answers(store: &Path, accounts: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let accounts = std::fs::read_to_string(accounts).expect("accounts.csv");
    for account in accounts.lines().skip(1).filter_map(|line| line.split(',').next()) {
        for query in [
            "granularity=day&from_date=2026-11-01&to_date=2026-11-08",
            "granularity=month&from_date=2026-10-01&to_date=2026-12-01",
        ] {
            let run = telemeter(&[
                "summary",
                "--store",
                store.to_str().unwrap(),
                "--auth-id",
                account,
                "--query",
                query,
                "--now",
                crate::common::NOW,
            ]);
            out.push(format!("{}{}", run.stdout, run.stderr));
        }
    }
    out
}

/// `kill -9` of a correcting ingest as it writes its records, its
/// corrections file and its rollups leaves the previous generation
/// answering; a run after each gives the store an uninterrupted run
/// gives.
#[test]
fn a_killed_correcting_ingest_leaves_the_previous_generation_and_a_rerun_completes_it() {
    let t = temp_dir();
    let base = t.path().join("base");
    telemeter(&[
        "generate",
        "--out",
        base.to_str().unwrap(),
        "--calls",
        "60000",
        "--accounts",
        "3",
        "--start",
        "2026-10-20",
        "--days",
        "20",
        "--files",
        "2",
        "--quiet",
    ])
    .ok();
    let fix = t.path().join("fix");
    correcting_delivery(&base, &fix);
    let (store, whole) = (t.path().join("store"), t.path().join("whole"));
    for s in [&store, &whole] {
        telemeter(&["ingest", "--data", base.to_str().unwrap(), "--store", s.to_str().unwrap(), "--quiet"]).ok();
    }
    let before = std::fs::read(store.join("manifest.json")).expect("a manifest");
    let accounts = base.join("accounts.csv");
    let answers_before = store_answers(&store, &accounts);
    telemeter(&["ingest", "--data", fix.to_str().unwrap(), "--store", whole.to_str().unwrap(), "--quiet"]).ok();
    let expected = store_answers(&whole, &accounts);
    assert_ne!(expected, answers_before, "the delivery changes the answers");
    let count = |dir: &str| -> usize {
        let mut n = 0;
        let mut stack = vec![store.join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                } else {
                    n += 1;
                }
            }
        }
        n
    };
    for point in ["records", "corrections", "rollups"] {
        let known = count(point);
        let mut child = crate::common::command()
            .args(["ingest", "--data", fix.to_str().unwrap(), "--store", store.to_str().unwrap(), "--quiet"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn ingest");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while count(point) == known && std::time::Instant::now() < deadline {
            if child.try_wait().expect("wait").is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let finished = child.try_wait().expect("wait").is_some();
        child.kill().ok();
        child.wait().expect("reap");
        if finished {
            break;
        }
        assert_eq!(std::fs::read(store.join("manifest.json")).expect("a manifest"), before, "killed at {point}");
        assert_eq!(store_answers(&store, &accounts), answers_before, "killed at {point}");
    }
    // Whatever the kills left, the next run completes the delivery.
    telemeter(&["ingest", "--data", fix.to_str().unwrap(), "--store", store.to_str().unwrap(), "--quiet"]).ok();
    assert_eq!(store_answers(&store, &accounts), expected);
    telemeter(&["store", "verify", "--store", store.to_str().unwrap()]).ok();
}

/// Buckets that are not unions of 15-minute slots (Monrovia's offset in
/// 1971 was -0:44:30) are answered from the stored records, not the
/// rollups: there too, only the current versions count.
#[test]
fn a_store_answers_from_its_records_with_only_current_versions() {
    let t = temp_dir();
    let store = t.path().join("store");
    let first = t.path().join("first");
    write(
        &first,
        "charges/a.csv",
        format!("{CHARGES}\nc1,A1,1971-06-01T10:00:00Z,CNAM,1,1.00\nc2,A1,1971-06-01T11:00:00Z,CNAM,1,0.50\n"),
    );
    telemeter(&["ingest", "--data", first.to_str().unwrap(), "--store", store.to_str().unwrap()]).ok();
    let second = t.path().join("second");
    write(&second, "charges/fix.csv", format!("{CHARGES},revision\nc1,A1,1971-06-01T12:00:00Z,CNAM,2,0.80,1\n"));
    write(&second, "voids/v.csv", "record_id,kind,revision\nc2,charges,1\n");
    telemeter(&["ingest", "--data", second.to_str().unwrap(), "--store", store.to_str().unwrap()]).ok();
    let both = t.path().join("both");
    crate::common::copy_tree(&first, &both);
    crate::common::copy_tree(&second, &both);
    let query = "granularity=hour&timezone=Africa/Monrovia&from_date=1971-06-01&to_date=1971-06-02";
    let (raw, stored) = raw_and_stored(&both, &store, "A1", query);
    assert_eq!(stored, raw);
    assert_eq!(raw["meta"]["total_spend"].as_f64(), Some(0.8), "{raw}");
}

/// An account whose every row was moved to another account (a revision
/// with another `auth_id`) or withdrawn counts nowhere: `report` over the
/// raw files writes no folder for it, as `report` over a store (which
/// keeps current rows only) does not, and the folders they write match.
#[test]
fn an_account_whose_rows_all_moved_or_were_withdrawn_gets_no_report() {
    let temp = temp_dir();
    let (data, store) = (temp.path().join("data"), temp.path().join("store"));
    write(&data, "accounts.csv", "auth_id,currency\nA1,USD\n");
    let header = "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,\
                  surcharge,hangup_cause,revision";
    let call = |id: &str, account: &str, revision: u8| {
        format!("{id},{account},,2026-11-20T10:00:00Z,voice,pstn,outbound,US,60,0.01,0,4000,{revision}\n")
    };
    let calls = format!(
        "{header}\n{}{}{}{}",
        call("r1", "A2", 0),
        call("r1", "A1", 1),
        call("r2", "A3", 0),
        call("r3", "A4", 0)
    );
    write(&data, "calls/a.csv", calls);
    write(&data, "voids/v.csv", "kind,record_id,revision,reason\ncalls,r2,1,not billable\n");
    let s = |path: &Path| path.to_str().expect("UTF-8 path").to_owned();
    telemeter(&["ingest", "--quiet", "--data", &s(&data), "--store", &s(&store)]).ok();
    let now = crate::common::NOW;
    let mut folders = Vec::new();
    for (source, path, out) in [("--data", &data, "raw"), ("--store", &store, "stored")] {
        let out = temp.path().join(out);
        telemeter(&["report", "--quiet", source, &s(path), "--out", &s(&out), "--now", now, "--formats", "json"]).ok();
        let mut names: Vec<String> = std::fs::read_dir(&out)
            .expect("the report")
            .flatten()
            .filter(|entry| entry.path().is_dir())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        folders.push(names);
    }
    assert_eq!(folders[0], ["A1", "A4"], "A2's row moved to A1 and A3's was withdrawn");
    assert_eq!(folders[0], folders[1]);
}
