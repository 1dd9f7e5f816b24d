//! `telemeter history` on real stores: a stored record's columns equal the
//! row it came from in sample_data/ (read here with the csv crate), a
//! re-delivered record keeps its first delivery, a record of a later
//! ingest names that ingest, an id the store lacks exits 1, and a damaged
//! index file is an error naming it, never a wrong answer.

use std::path::Path;

use crate::common::{self, telemeter};

/// `history --format jsonl` of `kind` `id` in `store`: each version.
fn versions(store: &Path, kind: &str, id: &str) -> Vec<serde_json::Value> {
    let run = telemeter(&["history", "--store", s(store), "--kind", kind, "--record-id", id, "--format", "jsonl"]);
    run.ok().lines().map(|line| serde_json::from_str(line).expect("a JSON line")).collect()
}

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

/// The row of `id` in a CSV file, by header name.
fn csv_row(path: &Path, id: &str) -> (u64, std::collections::HashMap<String, String>) {
    let mut reader = csv::Reader::from_path(path).expect("open");
    let header: Vec<String> = reader.headers().expect("header").iter().map(str::to_owned).collect();
    for (n, row) in reader.records().enumerate() {
        let row = row.expect("row");
        if row.get(header.iter().position(|h| h == "record_id").expect("record_id")) == Some(id) {
            return (n as u64 + 2, header.iter().cloned().zip(row.iter().map(str::to_owned)).collect());
        }
    }
    panic!("{id} not in {}", path.display())
}

#[test]
fn a_stored_record_shows_the_row_it_came_from() {
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    telemeter(&["ingest", "--data", s(&common::sample_data()), "--store", s(&store)]).ok();

    // c030 is delivered once; c031 again in calls/redelivery/, a duplicate.
    for id in ["c030", "c031"] {
        let found = versions(&store, "calls", id);
        assert_eq!(found.len(), 1, "{id}: {found:?}");
        let version = &found[0];
        let (line, row) = csv_row(&common::sample_data().join("calls/2026/11/20.csv"), id);
        assert_eq!(version["source_file"], "calls/2026/11/20.csv", "{version}");
        assert_eq!(version["source_line"], line, "{version}");
        assert_eq!(version["counts"], true);
        let record = &version["record"];
        for column in ["record_id", "auth_id", "product", "type", "direction", "country", "hangup_cause"] {
            assert_eq!(record[column], row[column].as_str(), "{id} {column}");
        }
        // Numbers as exact decimals, equal in value to the delivered text.
        for column in ["amount", "surcharge", "billed_seconds"] {
            let stored: f64 = record[column].as_str().expect("text").parse().expect("a number");
            let delivered: f64 = row[column].parse().expect("a number");
            assert_eq!(stored, delivered, "{id} {column}");
        }
        let stored = chrono::DateTime::parse_from_rfc3339(record["timestamp"].as_str().expect("text")).expect("time");
        let delivered = chrono::DateTime::parse_from_rfc3339(&row["timestamp"]).expect("time");
        assert_eq!(stored, delivered, "{id}");
    }

    // The listing says the same, aligned.
    let table = telemeter(&["history", "--store", s(&store), "--kind", "calls", "--record-id", "c030"]);
    let text = table.ok();
    assert!(text.starts_with("calls record c030 in generation 1: 1 stored version\n"), "{text}");
    assert!(text.contains("from calls/2026/11/20.csv line 2\n"), "{text}");
    assert!(text.contains("\n  amount           0.013\n"), "{text}");

    // An id the store lacks, or lacks in that kind: exit 1, said on stderr.
    for (kind, id) in [("calls", "no-such-record"), ("messages", "c030")] {
        let missing = telemeter(&["history", "--store", s(&store), "--kind", kind, "--record-id", id]);
        assert_eq!(missing.code, 1, "{}", missing.stderr);
        assert!(missing.stdout.is_empty(), "{}", missing.stdout);
        assert!(
            missing.stderr.contains(&format!("{kind} record {id}: not in the store (generation 1)")),
            "{}",
            missing.stderr
        );
    }
    let bad_kind = telemeter(&["history", "--store", s(&store), "--kind", "voids", "--record-id", "c030"]);
    assert_eq!(bad_kind.code, 2, "{}", bad_kind.stderr);
}

#[test]
fn a_record_of_a_later_ingest_names_that_ingest() {
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    telemeter(&["ingest", "--data", s(&common::sample_data()), "--store", s(&store)]).ok();
    let late = dir.path().join("late");
    std::fs::create_dir_all(&late).expect("mkdir");
    std::fs::copy(common::sample_data().join("accounts.csv"), late.join("accounts.csv")).expect("copy");
    common::write(
        &late,
        "calls/late.csv",
        format!(
            "{}c900,MA001SHGA32ZDQYG9N8T,,2026-10-02T10:00:00Z,voice,pstn,outbound,US,60,0.0100,0.0010,4000\n",
            common::CALLS_HEADER
        ),
    );
    telemeter(&["ingest", "--data", s(&late), "--store", s(&store)]).ok();
    let found = versions(&store, "calls", "c900");
    assert_eq!(found.len(), 1, "{found:?}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("manifest.json")).expect("manifest")).expect("json");
    let ingests = manifest["ingests"].as_array().expect("ingests");
    assert_eq!(ingests.len(), 2);
    assert_eq!(found[0]["ingest"], ingests[1]["id"]);
    assert_eq!(found[0]["source_file"], "calls/late.csv");
    assert_eq!(found[0]["source_line"], 2);
    assert_eq!(found[0]["record"]["amount"], "0.01");
    // The first ingest's records are still found, under their ingest.
    let first = versions(&store, "calls", "c030");
    assert_eq!(first[0]["ingest"], ingests[0]["id"]);
}

#[test]
fn a_damaged_index_file_is_an_error_naming_it() {
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    telemeter(&["ingest", "--data", s(&common::sample_data()), "--store", s(&store)]).ok();
    let index_dir = store.join("index/calls");
    let index = std::fs::read_dir(&index_dir).expect("index/calls").next().expect("a file").expect("entry").path();
    let mut bytes = std::fs::read(&index).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&index, bytes).expect("write");
    let run = telemeter(&["history", "--store", s(&store), "--kind", "calls", "--record-id", "c030"]);
    assert_eq!(run.code, 1, "{}", run.stdout);
    let name = index.file_name().and_then(|n| n.to_str()).expect("name");
    assert!(run.stderr.contains(name), "{}", run.stderr);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}
