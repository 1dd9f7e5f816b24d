//! Plivo's Python SDK, unpatched and pinned (`tests/sdk/requirements.txt`),
//! as a client of `telemeter serve` over the README tour's store and a
//! generated data set with resources: it lists, gets and deletes recordings and gets an endpoint,
//! and what it returns is held against the server's own answers.
//!
//! The SDK is found in `.venv-sdk` at the repository root (`.ci/run`
//! installs it). Without it the test says it is skipped, except under
//! `CI=true`, where a missing SDK is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::common::{self, NOW};
use crate::server::{basic, get, json, Server};

/// The README tour's store: `sample_data/` ingested, served with the
/// tour's `--now` (the tests' server always gets it).
#[test]
fn plivos_python_sdk_works_unpatched_on_the_tour_store() {
    let Some(python) = common::venv_python("sdk", "plivo", "tests/sdk/requirements.txt") else { return };
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    let sample = common::root().join("sample_data");
    common::telemeter(&["ingest", "--data", &path_text(&sample), "--store", &path_text(&store)]).ok();
    let accounts = std::fs::read_to_string(sample.join("accounts.csv")).expect("accounts.csv");
    for auth_id in accounts.lines().skip(1).filter_map(|l| l.split(',').next()) {
        assert!(auth_id.len() == 20 && auth_id.starts_with("MA"), "{auth_id}: Plivo's shape");
    }
    let auth_id = first_account(&accounts);
    let check = SdkCheck { python, store, auth_id, endpoint: "EP_DESK" };
    check.run();
}

/// A generated data set with resources.
#[test]
fn plivos_python_sdk_works_unpatched_on_generated_data() {
    let Some(python) = common::venv_python("sdk", "plivo", "tests/sdk/requirements.txt") else { return };
    let dir = common::temp_dir();
    let (data, store) = (dir.path().join("data"), dir.path().join("store"));
    common::telemeter(&[
        "generate",
        "--out",
        &path_text(&data),
        "--calls",
        "2000",
        "--accounts",
        "2",
        "--resources",
        "--now",
        NOW,
    ])
    .ok();
    common::telemeter(&["ingest", "--data", &path_text(&data), "--store", &path_text(&store)]).ok();
    let accounts = std::fs::read_to_string(data.join("accounts.csv")).expect("accounts.csv");
    let auth_id = first_account(&accounts);
    assert!(auth_id.len() == 20 && auth_id.starts_with("MA"), "{auth_id}: Plivo's shape");
    let check = SdkCheck { python, store, auth_id, endpoint: "EP000000" };
    check.run();
}

fn path_text(path: &Path) -> String {
    path.to_str().expect("UTF-8").to_owned()
}

fn first_account(accounts_csv: &str) -> String {
    accounts_csv.lines().nth(1).and_then(|l| l.split(',').next()).expect("an account").to_owned()
}

/// One run of the SDK against a store: the token set as the README sets it,
/// the server started, the script run, and what the SDK
/// returned held against the server's own answers.
struct SdkCheck {
    python: PathBuf,
    store: PathBuf,
    auth_id: String,
    endpoint: &'static str,
}

impl SdkCheck {
    fn run(self) {
        let SdkCheck { python, store, auth_id, endpoint: endpoint_id } = self;
        let token = "sdk-token-1";
        let mut set = common::command()
            .args(["accounts", "set-token", &auth_id, "--store", &path_text(&store), "-q"])
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("set-token");
        std::io::Write::write_all(set.stdin.as_mut().expect("stdin"), format!("{token}\n").as_bytes()).expect("token");
        assert!(set.wait().expect("set-token").success());

        let server = Server::start_with("127.0.0.1:0", &["--store".into(), store.into_os_string()]);
        let auth = basic(&auth_id, token);
        let mut http = server.client();
        let listing = json(&get(&mut http, &format!("/v1/Account/{auth_id}/Recording/?limit=20"), &auth));
        let ids: Vec<&str> = listing["objects"]
            .as_array()
            .expect("objects")
            .iter()
            .map(|r| r["recording_id"].as_str().expect("id"))
            .collect();
        assert!(!ids.is_empty(), "recordings are within the default window: {listing}");
        let first = json(&get(&mut http, &format!("/v1/Account/{auth_id}/Recording/{}/", ids[0]), &auth));
        let endpoint = json(&get(&mut http, &format!("/v1/Account/{auth_id}/Endpoint/{endpoint_id}/"), &auth));
        assert_eq!(endpoint["endpoint_id"].as_str(), Some(endpoint_id), "{endpoint}");

        let base = format!("http://{}", server.addr);
        let script = common::root().join("tests/sdk/plivo_client.py");
        let output =
            Command::new(&python).arg(&script).args([&base, &auth_id, token, endpoint_id]).output().expect("python");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let sdk: Value = serde_json::from_slice(&output.stdout).expect("the script's JSON");

        assert_eq!(sdk["listed"], serde_json::json!(ids));
        assert_eq!(sdk["total_count"], listing["meta"]["total_count"]);
        for field in ["recording_id", "recording_duration_ms", "recording_format", "recording_type", "call_uuid"] {
            assert_eq!(sdk["recording"][field].as_str(), first[field].as_str(), "{field}");
        }
        for field in ["endpoint_id", "username", "sip_uri", "sip_registered"] {
            assert_eq!(sdk["endpoint"][field].as_str(), endpoint[field].as_str(), "{field}");
        }
        assert_eq!(sdk["deleted"], "not found");
        assert_eq!(sdk["wrong_token"], "authentication error");
        let gone = get(&mut http, &format!("/v1/Account/{auth_id}/Recording/{}/", ids[0]), &auth);
        assert_eq!(gone.status, 404, "the SDK's DELETE took effect");
        server.stop();
    }
}
