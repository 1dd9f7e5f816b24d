//! `telemeter serve --store` while `telemeter ingest` publishes: the server
//! follows each new generation within seconds (usage and resources),
//! answers like `summary --store` byte for byte, never fails while the
//! store changes, and garbage
//! collection keeps the files of a generation a live reader holds (and only
//! of a live one: a killed reader's lease is cleaned).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::server::{basic, get, json, sha_hex, Server, NOW};

const TOKEN: &str = "follow-token";
const QUERY: &str = "granularity=day&from_date=2026-11-01&to_date=2026-11-21";

/// Accounts polled all along, in turn.
fn pollers() -> Vec<String> {
    (0..40).map(|i| format!("MPOLL{i:015}")).collect()
}

/// The account checked after publish `k`.
fn checked(k: usize) -> String {
    format!("MCHECK{k:014}")
}

/// Batch `k`: accounts.csv and one call for every account, on day `k` of
/// November, with an amount that grows with `k`.
fn batch(root: &Path, k: usize) -> PathBuf {
    let dir = root.join(format!("batch-{k}"));
    let accounts: Vec<String> = pollers().into_iter().chain((0..6).map(checked)).collect();
    let mut csv = String::from("auth_id,currency,timezone,auth_token_sha256,allowed_ips\n");
    for account in &accounts {
        csv.push_str(&format!("{account},USD,,{},\n", sha_hex(TOKEN)));
    }
    write(&dir, "accounts.csv", &csv);
    let mut calls = String::from(
        "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause\n",
    );
    for (i, account) in accounts.iter().enumerate() {
        calls.push_str(&format!(
            "b{k}-{i},{account},,2026-11-{:02}T10:00:00Z,voice,pstn,outbound,US,60,{}.25,0,4000\n",
            k + 1,
            k + 1
        ));
    }
    write(&dir, &format!("calls/2026/11-{k}.csv"), &calls);
    // Endpoints: EP of the first poller all along, E1..Ek of the accounts
    // checked so far (a load replaces the table with the files' rows).
    let mut endpoints = String::from("endpoint_id,auth_id,sub_account,alias,username,password,application_id\n");
    endpoints.push_str(&format!("EP,{},,Poll,poll,pw,\n", pollers()[0]));
    for j in 1..=k {
        endpoints.push_str(&format!("E{j},{},,Desk {j},desk{j},pw,\n", checked(j)));
    }
    write(&dir, "endpoints.csv", &endpoints);
    dir
}

/// The status of endpoint `id` of `account`.
fn endpoint(server: &Server, account: &str, id: &str) -> u16 {
    get(&mut server.client(), &format!("/v1/Account/{account}/Endpoint/{id}/"), &basic(account, TOKEN)).status
}

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn ingest(data: &Path, store: &Path) {
    let output =
        crate::common::command().args(["ingest", "--data"]).arg(data).arg("--store").arg(store).output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

/// `summary --store` of `account`, without its trailing newline.
fn summary(store: &Path, account: &str) -> String {
    let output = crate::common::command()
        .args(["summary", "--store"])
        .arg(store)
        .args(["--auth-id", account, "--query", QUERY, "--now", NOW])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim_end_matches('\n').to_owned()
}

/// The server's answer for `account`, its api_id replaced by `expected`'s.
fn served(server: &Server, account: &str, expected: &str) -> (u16, String) {
    let response =
        get(&mut server.client(), &format!("/v1/Account/{account}/UsageSummary/?{QUERY}"), &basic(account, TOKEN));
    if response.status != 200 {
        return (response.status, response.text());
    }
    let api_id = json(&response)["api_id"].as_str().unwrap().to_owned();
    let expected_id = serde_json::from_str::<Value>(expected).unwrap()["api_id"].as_str().unwrap().to_owned();
    (200, response.text().replacen(&api_id, &expected_id, 1))
}

fn serve(store: &Path, extra: &[&str]) -> Server {
    let mut args = vec!["--store".into(), store.as_os_str().to_owned()];
    args.extend(extra.iter().map(Into::into));
    Server::start_with("127.0.0.1:0", &args)
}

/// Files under `dir`, relative to it.
fn files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(folder) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else { continue };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    found.sort();
    found
}

#[test]
fn a_server_follows_every_publish_without_a_single_failure() {
    let temp = tempfile::tempdir().unwrap();
    let store = temp.path().join("store");
    ingest(&batch(temp.path(), 0), &store);
    let server = Arc::new(serve(&store, &[]));

    // Polled continually while ingests publish and collect garbage.
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(Mutex::new(Vec::new()));
    let polls = Arc::new(Mutex::new(0usize));
    let poller = {
        let (server, stop, failures, polls) = (server.clone(), stop.clone(), failures.clone(), polls.clone());
        std::thread::spawn(move || {
            let accounts = pollers();
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let account = &accounts[i % accounts.len()];
                let response = get(
                    &mut server.client(),
                    &format!("/v1/Account/{account}/UsageSummary/?{QUERY}"),
                    &basic(account, TOKEN),
                );
                if response.status != 200 {
                    failures.lock().unwrap().push(format!("{account}: {} {}", response.status, response.text()));
                }
                let status = endpoint(&server, &accounts[0], "EP");
                if status != 200 {
                    failures.lock().unwrap().push(format!("endpoint EP: {status}"));
                }
                *polls.lock().unwrap() += 1;
                i += 1;
                // Each account every 4 s or more: at most 15 a minute, under
                // the limit of 20.
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };

    for k in 1..=4 {
        let account = checked(k);
        let before = summary(&store, &account);
        assert_eq!(endpoint(&server, &account, &format!("E{k}")), 404);
        ingest(&batch(temp.path(), k), &store);
        let expected = summary(&store, &account);
        assert_ne!(before, expected, "batch {k} changes the answer of {account}");
        let published = Instant::now();
        loop {
            let (status, text) = served(&server, &account, &expected);
            assert_eq!(status, 200, "publish {k}: {text}");
            if text == expected {
                break;
            }
            assert!(published.elapsed() < Duration::from_secs(10), "publish {k} not followed:\n{text}\n{expected}");
            // At most 11 requests of this account: well under the rate limit.
            std::thread::sleep(Duration::from_secs(1));
        }
        // The resources of the generation, and each poller account, follow.
        assert_eq!(endpoint(&server, &account, &format!("E{k}")), 200, "publish {k}");
        let poller_account = &pollers()[k];
        let expected = summary(&store, poller_account);
        assert_eq!(served(&server, poller_account, &expected), (200, expected.clone()), "publish {k}");
    }
    stop.store(true, Ordering::Relaxed);
    poller.join().unwrap();
    assert!(*polls.lock().unwrap() >= 20, "the poller ran");
    assert_eq!(*failures.lock().unwrap(), Vec::<String>::new());
    let logs = server.logs_when(|logs| logs.iter().filter(|l| l.contains("\"event\":\"generation\"")).count() >= 4);
    assert!(logs.iter().filter(|l| l.contains("\"event\":\"generation\"")).count() >= 4, "{logs:?}");
}

#[test]
fn collection_keeps_what_a_live_reader_holds_and_cleans_a_dead_ones_lease() {
    let temp = tempfile::tempdir().unwrap();
    let store = temp.path().join("store");
    ingest(&batch(temp.path(), 0), &store);
    let first_generation = files(&store.join("rollups"));
    // A server pinned to generation 1 (it never reloads).
    let mut server = serve(&store, &["--reload-interval", "0"]);
    let account = checked(1);
    let pinned = summary(&store, &account);
    assert_eq!(served(&server, &account, &pinned), (200, pinned.clone()));
    for k in 1..=3 {
        ingest(&batch(temp.path(), k), &store);
    }
    assert_ne!(summary(&store, &account), pinned);
    // Three publishes later the pinned generation still answers.
    assert_eq!(served(&server, &account, &pinned), (200, pinned.clone()));
    let present = files(&store.join("rollups"));
    assert!(first_generation.iter().all(|f| present.contains(f)), "generation 1 files were removed");
    let leases: Vec<String> = files(&store.join("readers")).into_iter().filter(|f| f.ends_with(".lease")).collect();
    assert_eq!(leases.len(), 1, "{leases:?}");
    assert!(leases[0].starts_with("1."), "{leases:?}");

    // A reader killed without cleaning up: its lease file stays, unlocked.
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    assert_eq!(files(&store.join("readers")), leases);
    ingest(&batch(temp.path(), 4), &store);
    assert_eq!(files(&store.join("readers")), Vec::<String>::new());
    let present = files(&store.join("rollups"));
    assert!(first_generation.iter().all(|f| !present.contains(f)), "generation 1 files are kept after its reader died");
}

#[test]
fn a_failed_reload_keeps_the_generation_answering_and_is_logged() {
    let temp = tempfile::tempdir().unwrap();
    let store = temp.path().join("store");
    ingest(&batch(temp.path(), 0), &store);
    let server = serve(&store, &["--reload-interval", "0.2"]);
    let account = checked(1);
    let expected = summary(&store, &account);
    // A manifest this build cannot read (a newer layout), published the way
    // ingest publishes (rename over manifest.json).
    let manifest = std::fs::read_to_string(store.join("manifest.json")).unwrap();
    let mut newer: Value = serde_json::from_str(&manifest).unwrap();
    newer["format"] = Value::from(99);
    newer["generation"] = Value::from(2);
    std::fs::write(store.join("manifest.json.tmp-test"), newer.to_string()).unwrap();
    std::fs::rename(store.join("manifest.json.tmp-test"), store.join("manifest.json")).unwrap();
    server.logs_when(|logs| logs.iter().any(|l| l.contains("\"event\":\"reload_failed\"")));
    // Tried again every 0.2 s, logged once.
    std::thread::sleep(Duration::from_secs(1));
    let logs = server.logs_when(|_| true);
    let failed: Vec<&String> = logs.iter().filter(|l| l.contains("\"event\":\"reload_failed\"")).collect();
    assert_eq!(failed.len(), 1, "logged once: {logs:?}");
    assert!(failed[0].contains("store format 99 is not supported"), "{failed:?}");
    assert_eq!(served(&server, &account, &expected), (200, expected.clone()));
    // Once the store is readable again, the server follows it.
    std::fs::write(store.join("manifest.json.tmp-test"), &manifest).unwrap();
    std::fs::rename(store.join("manifest.json.tmp-test"), store.join("manifest.json")).unwrap();
    ingest(&batch(temp.path(), 1), &store);
    let expected = summary(&store, &account);
    let published = Instant::now();
    while served(&server, &account, &expected) != (200, expected.clone()) {
        assert!(published.elapsed() < Duration::from_secs(10), "not followed after the failure");
        std::thread::sleep(Duration::from_secs(1));
    }
}
