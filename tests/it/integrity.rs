//! Damage at rest, through the real binary: a byte flipped in any kind of
//! store file is an error naming the file (or, where the flip changes
//! nothing read, the clean answer), never a changed answer; a store
//! without its manifest is refused with nothing deleted, and `store
//! repair` restores it from the kept manifests; `store verify` names each
//! damaged file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::common::{self, telemeter, Run, NOW};

/// A day window (answered from the day rollups), an hour window (the
/// 15-minute rollups) and one whose buckets are not unions of 15-minute
/// slots (answered from the records files).
const DAY: &str = "from_date=2026-10-01&to_date=2026-12-01&granularity=day";
const HOUR: &str = "from_date=2026-11-18&to_date=2026-11-21&granularity=hour";
const RECORDS: &str = "from_date=1971-06-01&to_date=1971-06-03&granularity=hour&timezone=Africa/Monrovia";

fn s(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// A store of `sample_data/` (records, rollups, accounts, resources), in a
/// temporary folder.
fn sample_store() -> (tempfile::TempDir, PathBuf) {
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    telemeter(&["ingest", "--data", s(&common::sample_data()), "--store", s(&store)]).ok();
    (dir, store)
}

fn answer(store: &Path, account: &str, query: &str) -> Run {
    telemeter(&["summary", "--store", s(store), "--auth-id", account, "--query", query, "--now", NOW, "--all-pages"])
}

fn manifest(store: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(store.join("manifest.json")).expect("manifest")).expect("JSON")
}

/// Every file under `dir`, relative, with its bytes.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let name = path.strip_prefix(root).expect("under root").to_string_lossy().into_owned();
                out.insert(name, std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Offsets spread over a file of `len` bytes: its first and last bytes,
/// and `n` more between.
fn offsets(len: usize, n: usize) -> Vec<usize> {
    let mut at: Vec<usize> = (0..n).map(|i| i * len / n).chain([0, len.saturating_sub(1)]).collect();
    at.sort_unstable();
    at.dedup();
    at
}

/// The account whose rollups are checked, and its rollup file at `grain`.
fn rollup_of(store: &Path, account: &str, grain: &str) -> String {
    manifest(store)["rollups"][account][grain].as_str().expect("a rollup file").to_owned()
}

/// Flips one byte of `name` at each of many offsets, runs `read` and
/// requires an error naming the file, or exactly `clean`'s output; the
/// byte is put back after each try. Returns how many tries were errors.
fn flip_each(store: &Path, name: &str, clean: &Run, read: &dyn Fn() -> Run) -> usize {
    let path = store.join(name);
    let bytes = std::fs::read(&path).expect("a store file");
    let shown = Path::new(name).file_name().expect("a file name").to_string_lossy().into_owned();
    let mut errors = 0;
    for at in offsets(bytes.len(), 24) {
        for mask in [0x01u8, 0x80] {
            let mut damaged = bytes.clone();
            damaged[at] ^= mask;
            std::fs::write(&path, &damaged).expect("damage");
            let run = read();
            if run.code == 0 {
                assert_eq!(run.stdout, clean.stdout, "{name}: a flip at {at} (^{mask:#x}) changed the answer");
            } else {
                assert_eq!(run.code, 1, "{name} at {at}: {}", run.stderr);
                assert!(run.stderr.contains(&shown), "{name} at {at}: the error does not name it: {}", run.stderr);
                errors += 1;
            }
        }
        std::fs::write(&path, &bytes).expect("restore");
    }
    errors
}

/// A file to damage, the clean output, and the run that reads the file.
type Try<'a> = (&'a str, &'a Run, Box<dyn Fn() -> Run + 'a>);

/// A flipped byte anywhere in a rollup file (both grains), a records
/// file, an index file, the accounts file, the resources database or the
/// manifest is an error naming that file: every flip is found by the
/// file's checksum (or the manifest's own), so none changes an answer.
#[test]
fn a_flipped_byte_in_any_store_file_is_an_error_naming_it() {
    let (_dir, store) = sample_store();
    let listed = manifest(&store);
    assert_eq!(listed["format"], 7);
    let account = "MA001SHGA32ZDQYG9N8T";
    let data = common::sample_data();
    // Answers and the reader of each kind of file.
    let clean_day = answer(&store, account, DAY);
    let clean_hour = answer(&store, account, HOUR);
    let clean_records = answer(&store, account, RECORDS);
    for clean in [&clean_day, &clean_hour, &clean_records] {
        assert!(clean.ok().contains("\"usage\""), "{}", clean.stdout);
    }
    let reingest = || telemeter(&["ingest", "--data", s(&data), "--store", s(&store)]);
    let clean_ingest = reingest();
    clean_ingest.ok();
    let generation = listed["generation"].clone();

    let day = rollup_of(&store, account, "86400");
    let hour = rollup_of(&store, account, "900");
    let records = listed["kinds"]["calls"]["records"][0].as_str().expect("a records file").to_owned();
    let index = listed["kinds"]["calls"]["index"][0].as_str().expect("an index file").to_owned();
    let accounts = listed["accounts_csv"].as_str().expect("an accounts file").to_owned();
    let resources = listed["resources"].as_str().expect("a resources database").to_owned();
    for name in [&day, &hour, &records, &index, &accounts, &resources] {
        assert!(listed["files"][name.as_str()]["xxh3"].as_str().is_some_and(|h| h.len() == 32), "{name}");
    }
    let tries: Vec<Try<'_>> = vec![
        (&day, &clean_day, Box::new(|| answer(&store, account, DAY))),
        (&hour, &clean_hour, Box::new(|| answer(&store, account, HOUR))),
        (&records, &clean_records, Box::new(|| answer(&store, account, RECORDS))),
        (&accounts, &clean_day, Box::new(|| answer(&store, account, DAY))),
        // The next ingest reads the index (its dedup) and the previous
        // resources (copied into the next generation).
        (&index, &clean_ingest, Box::new(reingest)),
        (&resources, &clean_ingest, Box::new(reingest)),
        ("manifest.json", &clean_day, Box::new(|| answer(&store, account, DAY))),
    ];
    for (name, clean, read) in &tries {
        let errors = flip_each(&store, name, clean, read.as_ref());
        assert!(errors > 0, "{name}: no flip was found");
    }
    // The damage never reached a published generation.
    assert_eq!(manifest(&store)["generation"], generation);
    assert_eq!(answer(&store, account, DAY).stdout, clean_day.stdout);
}

/// A flipped byte in the 15-minute rollups fails the next ingest that
/// merges into them (naming the file), so it is never carried into the
/// next generation.
#[test]
fn a_damaged_rollup_is_not_carried_into_the_next_generation() {
    let (dir, store) = sample_store();
    let more = dir.path().join("more");
    common::write(
        &more,
        "calls/more.csv",
        "timestamp,record_id,product,type,auth_id,subaccount_auth,carrier,direction,country,hangup_cause,\
         billed_seconds,surcharge,amount\n\
         2026-11-20T10:00:00Z,extra-1,voice,pstn,MA001SHGA32ZDQYG9N8T,,acme,outbound,US,4000,60,0.001,0.013\n",
    );
    let hour = rollup_of(&store, "MA001SHGA32ZDQYG9N8T", "900");
    let path = store.join(&hour);
    let mut bytes = std::fs::read(&path).expect("rollup");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x04;
    std::fs::write(&path, &bytes).expect("damage");
    let before = manifest(&store);
    let run = telemeter(&["ingest", "--data", s(&more), "--store", s(&store)]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("-900s.parquet") && run.stderr.contains("damaged"), "{}", run.stderr);
    assert!(run.stderr.contains("store repair"), "{}", run.stderr);
    assert_eq!(manifest(&store), before, "nothing published");
}

/// With manifest.json deleted, every command refuses the store and says
/// how to recover; the ingest deletes nothing; `store verify` says the
/// manifest is missing; `store repair` restores it from the kept copy and
/// the answers are those of before. A damaged manifest is restored the
/// same way.
#[test]
fn a_store_without_its_manifest_is_refused_and_repair_restores_it() {
    let (_dir, store) = sample_store();
    let data = common::sample_data();
    let answers = || [DAY, HOUR, RECORDS].map(|query| answer(&store, "MA001SHGA32ZDQYG9N8T", query).stdout);
    let clean = answers();
    let published = std::fs::read(store.join("manifest.json")).expect("manifest");
    for damage in ["delete", "flip"] {
        match damage {
            "delete" => std::fs::remove_file(store.join("manifest.json")).expect("delete"),
            _ => {
                let mut bytes = published.clone();
                let at = bytes.len() / 3;
                bytes[at] ^= 0x02;
                std::fs::write(store.join("manifest.json"), bytes).expect("damage");
            }
        }
        let before = tree(&store);
        for run in [
            telemeter(&["ingest", "--data", s(&data), "--store", s(&store)]),
            answer(&store, "MA001SHGA32ZDQYG9N8T", DAY),
            telemeter(&["accounts", "list", "--store", s(&store)]),
        ] {
            assert_eq!(run.code, 1, "{damage}: {}", run.stderr);
            assert!(run.stderr.contains("telemeter store repair"), "{damage}: {}", run.stderr);
        }
        let after = tree(&store);
        let lost: Vec<&String> = before.keys().filter(|name| !after.contains_key(*name)).collect();
        assert!(lost.is_empty(), "{damage}: the refused commands deleted {lost:?}");
        let verify = telemeter(&["store", "verify", "--store", s(&store)]);
        assert_eq!(verify.code, 1, "{damage}: {}", verify.stdout);
        let said = if damage == "delete" { "manifest.json: missing" } else { "manifest.json: damaged" };
        assert!(verify.stdout.contains(said), "{damage}: {}", verify.stdout);

        let repair = telemeter(&["store", "repair", "--store", s(&store)]);
        assert!(
            repair.ok().contains("restored manifest.json from the kept manifest of generation 1"),
            "{}",
            repair.stdout
        );
        assert_eq!(std::fs::read(store.join("manifest.json")).expect("restored"), published);
        assert_eq!(answers(), clean, "{damage}: the restored store answers as before");
        telemeter(&["store", "verify", "--store", s(&store)]).ok();
    }
}

/// When the newest generation's manifest and its kept copy are both
/// damaged, repair restores the one before, and deletes nothing: the newer
/// generation's files are whole, and putting a good copy of its manifest
/// back recovers it. The message that passes the kept copy over names the
/// store, not its manifests folder.
#[test]
fn repair_that_goes_back_a_generation_leaves_the_newer_files() {
    let (_dir, store) = sample_store();
    telemeter(&["ingest", "--data", s(&common::root().join("sample_corrections")), "--store", s(&store)]).ok();
    let newest = answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout;
    let published = std::fs::read(store.join("manifest.json")).expect("manifest");
    let kept = store.join("manifests/2.json");
    for path in [store.join("manifest.json"), kept.clone()] {
        let mut bytes = published.clone();
        bytes.extend_from_slice(b"x");
        std::fs::write(path, bytes).expect("damage");
    }
    let before = tree(&store);
    let repair = telemeter(&["store", "repair", "--store", s(&store)]);
    // Rolled back: answered from, not whole (exit 1).
    let said = repair.exited(1);
    assert!(said.contains("restored manifest.json from the kept manifest of generation 1"), "{said}");
    assert!(said.contains("rolled back past the generations passed over"), "{said}");
    assert!(said.contains("left the files no generation lists"), "{said}");
    assert!(said.contains(&format!("store verify --store {}`", s(&store))), "names the store: {said}");
    let after = tree(&store);
    let lost: Vec<&String> = before.keys().filter(|name| !after.contains_key(*name)).collect();
    assert_eq!(lost, ["manifests/2.json"], "repair deleted {lost:?}");
    assert_eq!(after.get("manifests/passed-over/2.json"), before.get("manifests/2.json"), "set aside");
    assert!(said.contains("manifests/passed-over/"), "{said}");

    std::fs::write(store.join("manifest.json"), &published).expect("put back");
    telemeter(&["store", "verify", "--store", s(&store)]).ok();
    assert_eq!(answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout, newest, "generation 2 answers again");
}

/// When a later generation's kept manifest is whole but one of its files
/// is not, repair restores the one before and sets the later kept
/// manifest aside, so that the next ingest builds on the restored one.
#[test]
fn an_ingest_after_a_repair_that_went_back_builds_on_it() {
    let (_dir, store) = sample_store();
    telemeter(&["ingest", "--data", s(&common::root().join("sample_corrections")), "--store", s(&store)]).ok();
    let corrections = manifest(&store)["ingests"][1]["corrections"].as_str().expect("a corrections file").to_owned();
    std::fs::remove_file(store.join("manifest.json")).expect("lose the manifest");
    std::fs::remove_file(store.join(&corrections)).expect("lose a file of generation 2");
    let repair = telemeter(&["store", "repair", "--store", s(&store)]);
    let said = repair.exited(1);
    assert!(said.contains("restored manifest.json from the kept manifest of generation 1"), "{said}");
    assert!(store.join("manifests/passed-over/2.json").exists());
    telemeter(&["store", "verify", "--store", s(&store)]).ok();
    let late = telemeter(&["ingest", "--data", s(&common::root().join("sample_corrections")), "--store", s(&store)]);
    assert!(late.ok().contains("published generation 2"), "{}", late.stdout);
}

/// The recordings deleted through the API are in `deletions.sqlite`,
/// which no manifest lists: `store verify` and `store repair` check it as
/// `serve` and `ingest` do, and name it when it is missing while its count
/// file says it held deletions.
#[test]
fn verify_and_repair_check_the_deletions_database() {
    let (_dir, store) = sample_store();
    telemeter(&["store", "verify", "--store", s(&store)]).ok();
    let _ = std::fs::remove_file(store.join("deletions.sqlite"));
    std::fs::write(store.join("deletions.sqlite.count"), br#"{"deletions":3}"#).expect("count file");
    let said = "deletions.sqlite: ";
    let verify = telemeter(&["store", "verify", "--store", s(&store)]);
    assert_eq!(verify.code, 1, "{}", verify.stdout);
    assert!(verify.stdout.contains(said) && verify.stdout.contains("missing, but"), "{}", verify.stdout);
    let repair = telemeter(&["store", "repair", "--store", s(&store)]);
    assert_eq!(repair.code, 1, "{}", repair.stdout);
    assert!(repair.stdout.contains(said), "{}", repair.stdout);
    let serve = telemeter(&["ingest", "--data", s(&common::sample_data()), "--store", s(&store)]);
    assert_eq!(serve.code, 1, "ingest refuses it too: {}", serve.stderr);
    std::fs::remove_file(store.join("deletions.sqlite.count")).expect("accept the loss");
    telemeter(&["store", "verify", "--store", s(&store)]).ok();
}

/// `store verify` checks every listed file: a whole store is ok (exit 0);
/// a damaged rollup and a missing records file are each named (exit 1).
/// `store repair` cannot rebuild from a missing records file and says so
/// (exit 1).
#[test]
fn verify_names_each_damaged_or_missing_file() {
    let (_dir, store) = sample_store();
    let verify = || telemeter(&["store", "verify", "--store", s(&store)]);
    let whole = verify();
    assert!(whole.ok().contains("ok: every listed file is whole"), "{}", whole.stdout);
    let listed = manifest(&store);
    let day = rollup_of(&store, "MA002PCHQ444XLFXQN5B", "86400");
    let records = listed["kinds"]["messages"]["records"][0].as_str().expect("a records file").to_owned();
    let mut bytes = std::fs::read(store.join(&day)).expect("rollup");
    bytes[10] ^= 0x20;
    std::fs::write(store.join(&day), bytes).expect("damage");
    std::fs::remove_file(store.join(&records)).expect("delete");
    let run = verify();
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.stdout.contains(&format!("{day}: damaged (expected")), "{}", run.stdout);
    assert!(run.stdout.contains(&format!("{records}: missing")), "{}", run.stdout);
    assert!(run.stdout.contains("2 file(s) damaged or missing"), "{}", run.stdout);
    let repair = telemeter(&["store", "repair", "--store", s(&store)]);
    assert_eq!(repair.code, 1, "{}", repair.stdout);
    assert!(repair.stdout.contains("records files are the truth and cannot be rebuilt"), "{}", repair.stdout);
}

/// Every publish keeps its manifest as manifests/<generation>.json (the
/// same bytes as manifest.json); collection keeps the newest 8.
#[test]
fn publishes_keep_the_newest_manifests() {
    let (_dir, store) = sample_store();
    for i in 0..10 {
        let mut command = common::command();
        command
            .args(["accounts", "set-token", "MA001SHGA32ZDQYG9N8T", "--store", s(&store)])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().expect("spawn");
        use std::io::Write;
        child.stdin.take().expect("stdin").write_all(format!("token-{i}\n").as_bytes()).expect("token");
        let output = child.wait_with_output().expect("wait");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }
    let generation = manifest(&store)["generation"].as_u64().expect("generation");
    assert_eq!(generation, 11);
    let mut kept: Vec<u64> = std::fs::read_dir(store.join("manifests"))
        .expect("manifests/")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.strip_suffix(".json")?.parse().ok())
        .collect();
    kept.sort_unstable();
    assert_eq!(kept, (4..=11).collect::<Vec<u64>>());
    assert_eq!(
        std::fs::read(store.join("manifests/11.json")).expect("kept"),
        std::fs::read(store.join("manifest.json")).expect("manifest")
    );
    telemeter(&["store", "verify", "--store", s(&store)]).ok();
}

/// `report --store` holds the rollups against the records' totals the
/// manifest keeps: on a clean store the report is written; when the
/// totals disagree (a manifest rewritten with its checksum, as a bug in
/// the fold would leave it) the report fails naming both totals, and no
/// report folder appears.
#[test]
fn a_report_from_a_store_holds_its_rollups_against_its_records() {
    let (dir, store) = sample_store();
    let out = dir.path().join("report");
    let report = |out: &Path| {
        telemeter(&["report", "--quiet", "--store", s(&store), "--out", s(out), "--now", NOW, "--formats", "json"])
    };
    let clean = report(&out);
    assert_eq!(clean.code, 0, "{}", clean.stderr);

    // One nano-unit more in the calls' total, the manifest's own checksum
    // made again so that only the totals disagree.
    let path = store.join("manifest.json");
    let mut manifest =
        telemeter::store::Manifest::parse(&std::fs::read(&path).expect("manifest"), &path).expect("a clean manifest");
    let calls = manifest.kinds.get_mut("calls").expect("calls are stored");
    let amount = telemeter::money::Amount::parse_total(calls.amount.as_bytes()).expect("an amount");
    calls.amount = telemeter::money::Amount::from_nanos(amount.nanos() + 1).to_string();
    std::fs::write(&path, manifest.to_bytes().expect("JSON")).expect("manifest written");

    let off = dir.path().join("off");
    let failed = report(&off);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    assert!(failed.stderr.contains("hold") && failed.stderr.contains("calls records"), "{}", failed.stderr);
    assert!(!off.exists(), "a failed report leaves no folder");
}

/// A damaged or deleted day rollup, 15-minute rollup and index file are
/// each named by `store verify`, rebuilt by `store repair` from the
/// records files (exit 0), and then every file verifies, the answers of
/// every account at every grain and the report are byte for byte those of
/// before, and an index rebuilt holds the bytes of the one lost: a second
/// ingest of the same data finds nothing but duplicates.
#[test]
fn repair_rebuilds_damaged_rollups_and_index_from_the_records() {
    let (dir, store) = sample_store();
    let accounts = ["MA001SHGA32ZDQYG9N8T", "MA002PCHQ444XLFXQN5B", "MA004DEFGZHA3AU3ZWLC"];
    let answers = || accounts.map(|account| [DAY, HOUR, RECORDS].map(|query| answer(&store, account, query).stdout));
    let report = |n: usize| {
        let out = dir.path().join(format!("report{n}"));
        let run = telemeter(&["report", "--quiet", "--store", s(&store), "--out", s(&out), "--now", NOW]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let mut files = tree(&out);
        // The manifest names the generation read, which each repair
        // publishes anew: the rest of it, and every other file, is the same.
        let manifest = files.get_mut("manifest.json").expect("the report's manifest");
        let mut json: serde_json::Value = serde_json::from_slice(manifest).expect("json");
        assert!(json.as_object_mut().expect("an object").remove("store").is_some(), "{json}");
        *manifest = serde_json::to_vec(&json).expect("json");
        files
    };
    let clean = answers();
    for (account, rows) in accounts.iter().zip(&clean) {
        assert!(rows[0].contains("\"usage\""), "{account}: {}", rows[0]);
    }
    let clean_report = report(0);
    assert!(clean_report.len() > 3, "{:?}", clean_report.keys());
    let listed = manifest(&store);
    let index = listed["kinds"]["calls"]["index"][0].as_str().expect("an index file").to_owned();
    let index_bytes = std::fs::read(store.join(&index)).expect("index");
    let damages = [
        (rollup_of(&store, "MA001SHGA32ZDQYG9N8T", "86400"), "flip"),
        (rollup_of(&store, "MA002PCHQ444XLFXQN5B", "900"), "delete"),
        (index.clone(), "flip"),
        (listed["kinds"]["messages"]["index"][0].as_str().expect("an index file").to_owned(), "delete"),
    ];
    for (n, (name, damage)) in damages.iter().enumerate() {
        let path = store.join(name);
        match *damage {
            "delete" => std::fs::remove_file(&path).expect("delete"),
            _ => {
                let mut bytes = std::fs::read(&path).expect("a store file");
                let at = bytes.len() / 2;
                bytes[at] ^= 0x10;
                std::fs::write(&path, bytes).expect("damage");
            }
        }
        let verify = telemeter(&["store", "verify", "--store", s(&store)]);
        assert_eq!(verify.code, 1, "{name}: {}", verify.stdout);
        let said = if *damage == "delete" { "missing" } else { "damaged (expected" };
        assert!(verify.stdout.contains(&format!("{name}: {said}")), "{name}: {}", verify.stdout);
        let before = manifest(&store)["generation"].as_u64().expect("a generation");
        let repair = telemeter(&["store", "repair", "--store", s(&store)]);
        assert!(repair.ok().contains("rebuilt "), "{name}: {}", repair.stdout);
        assert!(repair.stdout.contains(&format!("published generation {}", before + 1)), "{}", repair.stdout);
        let verify = telemeter(&["store", "verify", "--store", s(&store)]);
        assert!(verify.ok().contains("ok: every listed file is whole"), "{name}: {}", verify.stdout);
        assert!(answers() == clean, "{name}: the rebuilt store answers otherwise");
        assert!(report(n + 1) == clean_report, "{name}: the report from the rebuilt store differs");
    }
    let rebuilt = manifest(&store)["kinds"]["calls"]["index"][0].as_str().expect("an index file").to_owned();
    assert_ne!(rebuilt, index, "a rebuilt file is a new file of the new generation");
    assert!(std::fs::read(store.join(&rebuilt)).expect("rebuilt index") == index_bytes, "{rebuilt}");
    let again = telemeter(&["ingest", "--data", s(&common::sample_data()), "--store", s(&store)]);
    let total = again.ok().lines().find(|line| line.starts_with("total")).expect("a total line").to_owned();
    let words: Vec<&str> = total.split_whitespace().collect();
    let count = |at: usize| words[at].parse::<u64>().expect("a count");
    assert_eq!((words[3], count(4)), ("used", 0), "{total}");
    assert_eq!(words[8], "duplicates", "{total}");
    assert_eq!(count(2), count(7) + count(9), "every row read is a duplicate or set aside: {total}");

    // The rebuilt index files pair with their records files: a record's
    // history names the ingest that stored it, corrections apply, and a
    // rebuilt index rebuilds again.
    let history = telemeter(&["history", "--store", s(&store), "--kind", "calls", "--record-id", "c030"]);
    let first_ingest = manifest(&store)["ingests"][0]["id"].as_str().expect("an ingest id").to_owned();
    assert!(history.ok().contains(&format!("ingest {first_ingest}, from calls/")), "{}", history.stdout);
    telemeter(&["ingest", "--data", s(&common::root().join("sample_corrections")), "--store", s(&store)]).ok();
    let rebuilt = manifest(&store)["kinds"]["calls"]["index"][0].as_str().expect("an index file").to_owned();
    std::fs::remove_file(store.join(&rebuilt)).expect("delete");
    telemeter(&["store", "repair", "--store", s(&store)]).ok();
    telemeter(&["history", "--store", s(&store), "--kind", "calls", "--record-id", "c030"]).ok();
}

/// A folder with no manifest and no kept manifests is not taken for a new
/// store unless it is empty: an ingest into a store that lost all its
/// manifests, or into a folder of other files, is refused and deletes
/// nothing, and readers do not advise an ingest there.
#[test]
fn an_ingest_into_a_folder_of_files_without_a_manifest_is_refused() {
    let (dir, store) = sample_store();
    std::fs::remove_file(store.join("manifest.json")).expect("delete");
    std::fs::remove_dir_all(store.join("manifests")).expect("delete");
    let foreign = dir.path().join("home");
    common::write(&foreign, "records/2025-invoices.pdf", b"%PDF");
    common::write(&foreign, "accounts/customers.xlsx", b"PK");
    for folder in [&store, &foreign] {
        let before = tree(folder);
        let run = telemeter(&["ingest", "--data", s(&common::sample_data()), "--store", s(folder)]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(run.stderr.contains("holds files but no manifest.json and no kept manifests"), "{}", run.stderr);
        assert!(run.stderr.contains("nothing was read, written or deleted"), "{}", run.stderr);
        assert_eq!(tree(folder), before, "the refused ingest changed {}", folder.display());
        let read = answer(folder, "MA001SHGA32ZDQYG9N8T", DAY);
        assert_eq!(read.code, 1, "{}", read.stderr);
        assert!(!read.stderr.contains("run `telemeter ingest`"), "{}", read.stderr);
    }
}

/// A first ingest that stopped before it published (here a bad row) leaves
/// its marker: the next ingest makes the store there, and collects what
/// the stopped one left.
#[test]
fn a_first_ingest_that_stopped_is_followed_by_one_that_publishes() {
    let dir = common::temp_dir();
    let (data, store) = (dir.path().join("data"), dir.path().join("store"));
    common::copy_tree(&common::sample_data(), &data);
    let calls = data.join("calls/2026/11/20.csv");
    let good = std::fs::read_to_string(&calls).expect("calls");
    std::fs::write(&calls, format!("{good}bad,row\n")).expect("a bad row");
    assert_eq!(telemeter(&["ingest", "--data", s(&data), "--store", s(&store)]).code, 1);
    assert!(store.join(".first-ingest").exists(), "the stopped ingest's marker stays");
    let read = answer(&store, "MA001SHGA32ZDQYG9N8T", DAY);
    assert!(read.stderr.contains("its first ingest stopped before it published"), "{}", read.stderr);
    common::write(&store, "records/calls/left-00000.parquet", b"a killed run's file");
    std::fs::write(&calls, good).expect("fixed");
    telemeter(&["ingest", "--data", s(&data), "--store", s(&store)]).ok();
    assert!(!store.join(".first-ingest").exists(), "the marker goes once a generation is published");
    assert!(!store.join("records/calls/left-00000.parquet").exists(), "the leftover is collected");
    answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).ok();
}

/// An older manifest put back over a newer one is found by `store verify`
/// and refused by the next ingest, which would otherwise delete the newer
/// generation's files, and by readers, which would answer older money; the
/// newest kept copy put back recovers it.
#[test]
fn an_older_manifest_put_back_is_refused_and_named() {
    let (_dir, store) = sample_store();
    telemeter(&["ingest", "--data", s(&common::root().join("sample_corrections")), "--store", s(&store)]).ok();
    let newest = answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout;
    std::fs::copy(store.join("manifests/1.json"), store.join("manifest.json")).expect("roll back");
    let verify = telemeter(&["store", "verify", "--store", s(&store)]);
    assert_eq!(verify.code, 1, "{}", verify.stdout);
    assert!(verify.stdout.contains("is generation 1, but generation 2 was published after it"), "{}", verify.stdout);
    let before = tree(&store);
    let late = telemeter(&["ingest", "--data", s(&common::sample_data()), "--store", s(&store)]);
    assert_eq!(late.code, 1, "{}", late.stderr);
    assert!(late.stderr.contains("an older manifest was put back; nothing was changed"), "{}", late.stderr);
    assert_eq!(tree(&store), before, "the refused ingest changed the store");
    // Nor does anything else that would build on it.
    let set_token = || {
        use std::io::Write;
        let mut command = common::command();
        command.args(["accounts", "set-token", "MA001SHGA32ZDQYG9N8T", "--store", s(&store)]);
        command.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped());
        let mut child = command.stderr(std::process::Stdio::piped()).spawn().expect("set-token");
        child.stdin.take().expect("stdin").write_all(b"another-token\n").expect("the token");
        let output = child.wait_with_output().expect("set-token ends");
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    };
    for run in [telemeter(&["store", "repair", "--store", s(&store)]), set_token()] {
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(run.stderr.contains("an older manifest was put back"), "{}", run.stderr);
    }
    assert_eq!(tree(&store), before, "a refused command changed the store");
    // Nor is it answered from: its money is older than what was published.
    let read = answer(&store, "MA001SHGA32ZDQYG9N8T", DAY);
    assert_eq!(read.code, 1, "{}", read.stdout);
    assert!(read.stderr.contains("an older manifest was put back"), "{}", read.stderr);
    std::fs::copy(store.join("manifests/2.json"), store.join("manifest.json")).expect("forward");
    telemeter(&["store", "verify", "--store", s(&store)]).ok();
    assert_eq!(answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout, newest);
}

/// Files a killed ingest left are no damage (verify exits 0) but are
/// named, with what removes them.
#[test]
fn verify_counts_the_files_a_killed_ingest_left() {
    let (_dir, store) = sample_store();
    common::write(&store, "records/calls/killed-00000.parquet", b"half a file");
    let verify = telemeter(&["store", "verify", "--store", s(&store)]);
    assert!(verify.ok().contains("1 file(s) no kept generation lists"), "{}", verify.stdout);
    telemeter(&["store", "repair", "--store", s(&store)]).ok();
    let verify = telemeter(&["store", "verify", "--store", s(&store)]);
    assert!(!verify.ok().contains("no kept generation lists"), "{}", verify.stdout);
}

/// A kept copy cut short (a kill while it was written) is written whole
/// again by the next publisher, so a later loss of `manifest.json` is
/// still repaired to the published generation.
#[test]
fn a_cut_kept_copy_is_written_again() {
    let (_dir, store) = sample_store();
    let kept = store.join("manifests/1.json");
    let whole = std::fs::read(&kept).expect("kept copy");
    std::fs::write(&kept, b"").expect("cut it");
    let late = common::root().join("sample_corrections");
    telemeter(&["ingest", "--data", s(&late), "--store", s(&store)]).ok();
    assert_eq!(std::fs::read(&kept).expect("kept copy"), whole, "written whole again");
    let newest = answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout;
    std::fs::write(store.join("manifest.json"), b"{").expect("damage");
    let repair = telemeter(&["store", "repair", "--store", s(&store)]);
    assert!(repair.ok().contains("restored manifest.json from the kept manifest of generation 2"), "{}", repair.stdout);
    assert_eq!(answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout, newest);
}

/// Nor past a generation whose only damage is an ingest's rejected-rows
/// file (a record of what it did, not money): with `manifest.json` damaged
/// too, repair restores that generation, names the file, exits 1, and the
/// answers are the newest.
#[test]
fn repair_keeps_the_newest_generation_when_only_its_rejected_rows_are_damaged() {
    let (dir, store) = sample_store();
    let late = dir.path().join("late");
    common::write(
        &late,
        "charges/a.csv",
        "record_id,auth_id,timestamp,description,units,amount\nz1,MA001SHGA32ZDQYG9N8T,2026-11-20T00:00:00Z,d,1,2\n\
         z2,MA001SHGA32ZDQYG9N8T,2026-11-20T00:00:00Z,d,1,-1\n",
    );
    telemeter(&["ingest", "--data", s(&late), "--store", s(&store), "--on-bad-row", "set-aside"]).ok();
    let newest = answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout;
    let rejected = manifest(&store)["ingests"][1]["rejected"].as_str().expect("a rejected file").to_owned();
    let mut bytes = std::fs::read(store.join(&rejected)).expect("rejected rows");
    bytes[0] ^= 0x20;
    std::fs::write(store.join(&rejected), bytes).expect("damage");
    std::fs::write(store.join("manifest.json"), b"{").expect("damage");
    let repair = telemeter(&["store", "repair", "--store", s(&store)]);
    let said = repair.exited(1);
    assert!(said.contains("restored manifest.json from the kept manifest of generation 2"), "{said}");
    assert!(!said.contains("passed over") && said.contains(&rejected), "{said}");
    assert_eq!(answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout, newest);
}

/// Repair does not roll back past a generation whose only damage is a
/// derived file: with `manifest.json` lost and a rollup file of the newest
/// generation damaged, it restores that generation and rebuilds the
/// rollup from its records, and the answers are as before.
#[test]
fn repair_restores_the_newest_generation_and_rebuilds_what_is_derived() {
    let (_dir, store) = sample_store();
    let late = common::root().join("sample_corrections");
    telemeter(&["ingest", "--data", s(&late), "--store", s(&store)]).ok();
    let before = answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout;
    let rollup = manifest(&store)["rollups"]["MA001SHGA32ZDQYG9N8T"]["86400"].as_str().expect("a rollup").to_owned();
    let mut bytes = std::fs::read(store.join(&rollup)).expect("rollup");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x10;
    std::fs::write(store.join(&rollup), bytes).expect("damage");
    std::fs::write(store.join("manifest.json"), b"{").expect("damage");
    let repair = telemeter(&["store", "repair", "--store", s(&store)]);
    let said = repair.ok();
    assert!(said.contains("restored manifest.json from the kept manifest of generation 2"), "{said}");
    assert!(said.contains("rebuilt the rollups of account MA001SHGA32ZDQYG9N8T"), "{said}");
    assert!(!said.contains("passed over"), "{said}");
    telemeter(&["store", "verify", "--store", s(&store)]).ok();
    assert_eq!(answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout, before);
}

/// A damaged kept manifest (repair could restore nothing from it) is named
/// by `store verify`; `store repair` sets it aside, and the store verifies.
#[test]
fn a_damaged_kept_manifest_is_named_and_set_aside() {
    let (_dir, store) = sample_store();
    telemeter(&["ingest", "--data", s(&common::root().join("sample_corrections")), "--store", s(&store)]).ok();
    let newest = answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout;
    std::fs::write(store.join("manifests/1.json"), b"{\"cut").expect("damage");
    let verify = telemeter(&["store", "verify", "--store", s(&store)]);
    let said = verify.exited(1);
    assert!(said.contains("1.json: damaged kept manifest"), "{said}");
    let repair = telemeter(&["store", "repair", "--store", s(&store)]);
    let said = repair.ok();
    assert!(said.contains("set aside the damaged kept manifest") && said.contains("1.json"), "{said}");
    assert!(store.join("manifests/passed-over/1.json").exists());
    telemeter(&["store", "verify", "--store", s(&store)]).ok();
    assert_eq!(answer(&store, "MA001SHGA32ZDQYG9N8T", DAY).stdout, newest);
}
