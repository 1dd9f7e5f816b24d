//! What a store keeps besides its generations, damaged at rest: the
//! deletions database lost, replaced by an older copy or flipped; a DELETE
//! killed right after its answer; a store on a read-only mount; a lost
//! `token.key`; the temporary file of a killed `accounts set-token`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common;
use crate::server::{assert_error, basic, data_dir, get, json, Server, A};

/// `telemeter ingest --data DATA --store STORE`: the run.
fn ingest(data: &Path, store: &Path) -> common::Run {
    let (data, store) = (data.to_str().unwrap(), store.to_str().unwrap());
    common::run_command(&["ingest", "--data", data, "--store", store], common::command())
}

/// `telemeter serve --store STORE` that fails at startup: its run.
fn serve_fails(store: &Path) -> common::Run {
    let store = store.to_str().unwrap();
    let run = common::run_command(
        &["serve", "--store", store, "--listen", "127.0.0.1:0", "--reload-interval", "0"],
        common::command(),
    );
    assert_ne!(run.code, 0, "serve started: {}", run.stderr);
    run
}

fn serve(store: &Path) -> Server {
    Server::start_with("127.0.0.1:0", &["--store".into(), store.as_os_str().to_owned()])
}

/// A store of the test data set with R1 deleted through the API.
fn store_with_a_deletion() -> (tempfile::TempDir, PathBuf) {
    let data = data_dir();
    let store = data.path().join("store");
    ingest(data.path(), &store).ok();
    let server = serve(&store);
    let path = format!("/v1/Account/{A}/Recording/R1/");
    let auth = basic(A, "token-a");
    assert_eq!(server.client().request("DELETE", &path, &[("Authorization", &auth)]).unwrap().status, 204);
    server.stop();
    assert!(!store.join("deletions.sqlite-wal").exists(), "a clean stop folds the log into the database");
    (data, store)
}

fn count_file(store: &Path) -> PathBuf {
    store.join("deletions.sqlite.count")
}

#[test]
fn a_lost_or_older_deletions_file_is_refused_with_the_way_out() {
    let (data, store) = store_with_a_deletion();
    let deletions = store.join("deletions.sqlite");
    assert_eq!(std::fs::read_to_string(count_file(&store)).unwrap(), "{\"deletions\":1}\n");
    let older = data.path().join("older.sqlite");
    std::fs::copy(&deletions, &older).unwrap();
    // A second deletion, then the file is lost.
    let server = serve(&store);
    let auth = basic(A, "token-a");
    let path = format!("/v1/Account/{A}/Recording/R2/");
    assert_eq!(server.client().request("DELETE", &path, &[("Authorization", &auth)]).unwrap().status, 204);
    server.stop();
    std::fs::rename(&deletions, data.path().join("aside.sqlite")).unwrap();

    let run = serve_fails(&store);
    assert!(run.stderr.contains("deletions.sqlite: missing, but"), "{}", run.stderr);
    assert!(run.stderr.contains("deletions.sqlite.count says 2 recordings were deleted"), "{}", run.stderr);
    assert!(run.stderr.contains("Restore it from a backup"), "{}", run.stderr);
    assert!(!deletions.exists(), "nothing is made in its place");
    // The next ingest does not publish a generation without them either.
    let again = ingest(data.path(), &store);
    assert_ne!(again.code, 0, "{}", again.stdout);
    assert!(again.stderr.contains("deletions.sqlite: missing"), "{}", again.stderr);

    // An older copy is refused too.
    std::fs::copy(&older, &deletions).unwrap();
    let run = serve_fails(&store);
    assert!(run.stderr.contains("holds 1 deletions but"), "{}", run.stderr);

    // The latest copy back: both deletions hold.
    std::fs::rename(data.path().join("aside.sqlite"), &deletions).unwrap();
    let server = serve(&store);
    let mut c = server.client();
    for id in ["R1", "R2"] {
        assert_error(&get(&mut c, &format!("/v1/Account/{A}/Recording/{id}/"), &auth), 404, "not found");
    }
}

#[test]
fn a_damaged_deletions_file_is_refused_naming_it() {
    let (_data, store) = store_with_a_deletion();
    let deletions = store.join("deletions.sqlite");
    let clean = std::fs::read(&deletions).unwrap();
    // Every copy of the deleted id (its row and its key in the index).
    let places: Vec<usize> = clean.windows(2).enumerate().filter(|(_, w)| *w == b"R1").map(|(i, _)| i).collect();
    assert!(places.len() >= 2, "the id is in the row and in the index: {places:?}");
    for at in places {
        let mut flipped = clean.clone();
        flipped[at + 1] ^= 0x04; // R1 -> R5
        std::fs::write(&deletions, &flipped).unwrap();
        let run = serve_fails(&store);
        assert!(run.stderr.contains("deletions.sqlite: damaged"), "flip at {at}: {}", run.stderr);
        assert!(run.stderr.contains(".recover"), "{}", run.stderr);
    }
    std::fs::write(&deletions, &clean).unwrap();
    let server = serve(&store);
    let auth = basic(A, "token-a");
    assert_error(&get(&mut server.client(), &format!("/v1/Account/{A}/Recording/R1/"), &auth), 404, "not found");
}

#[test]
fn a_delete_answered_204_survives_a_kill_at_once() {
    let data = data_dir();
    let store = data.path().join("store");
    ingest(data.path(), &store).ok();
    let auth = basic(A, "token-a");
    for id in ["R1", "R2", "R3"] {
        let mut server = serve(&store);
        let path = format!("/v1/Account/{A}/Recording/{id}/");
        assert_eq!(server.client().request("DELETE", &path, &[("Authorization", &auth)]).unwrap().status, 204);
        // SIGKILL as soon as the answer is in: no shutdown, no checkpoint.
        server.child.kill().unwrap();
        server.child.wait().unwrap();
    }
    let server = serve(&store);
    let mut c = server.client();
    for id in ["R1", "R2", "R3"] {
        assert_error(&get(&mut c, &format!("/v1/Account/{A}/Recording/{id}/"), &auth), 404, "not found");
    }
    assert_eq!(std::fs::read_to_string(count_file(&store)).unwrap(), "{\"deletions\":3}\n");
    // The database is in WAL mode (each commit syncs its log).
    let db = rusqlite::Connection::open(store.join("deletions.sqlite")).unwrap();
    let mode: String = db.query_row("PRAGMA journal_mode", [], |row| row.get(0)).unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_read_only_store_is_served_and_refuses_deletes() {
    let (_data, store) = store_with_a_deletion();
    // The store mounted read-only for the server alone (its own mount
    // namespace), as on a read-only volume.
    let mut command = Command::new("unshare");
    command.args([
        "-m",
        "sh",
        "-c",
        "mount --bind -o ro \"$STORE\" \"$STORE\" && exec \"$0\" \"$@\"",
        common::binary(),
    ]);
    command.env("STORE", &store);
    let server = Server::start_command(command, "127.0.0.1:0", &["--store".into(), store.as_os_str().to_owned()]);
    let logs = server.logs_when(|logs| logs.iter().any(|l| l.contains("DELETE is answered 503")));
    assert!(
        logs.iter().any(|l| l.contains("\"event\":\"warning\"") && l.contains("DELETE is answered 503")),
        "{logs:?}"
    );
    let auth = basic(A, "token-a");
    let mut c = server.client();
    assert_error(&get(&mut c, &format!("/v1/Account/{A}/Recording/R1/"), &auth), 404, "not found");
    let list = json(&get(&mut c, &format!("/v1/Account/{A}/Recording/"), &auth));
    assert_eq!(list["meta"]["total_count"], 11, "the deletion made before still holds");
    let path = format!("/v1/Account/{A}/Recording/R2/");
    assert_error(&c.request("DELETE", &path, &[("Authorization", &auth)]).unwrap(), 503, "cannot write");
    assert_eq!(get(&mut c, &path, &auth).status, 200);
}

#[test]
fn a_lost_token_key_is_replaced_loudly_never_silently() {
    let data = data_dir();
    let store = data.path().join("store");
    ingest(data.path(), &store).ok();
    let key = store.join("token.key");
    let before = std::fs::read(&key).unwrap();
    std::fs::remove_file(&key).unwrap();
    // An ingest does not make a new one behind the operator's back.
    ingest(data.path(), &store).ok();
    assert!(!key.exists(), "ingest made a new key silently");
    let store_s = store.to_str().unwrap();
    let summary = ["summary", "--store", store_s, "--auth-id", A, "--now", common::NOW];
    let run = common::run_command(&summary, common::command());
    run.ok();
    assert!(run.stderr.contains("token.key was missing in a store that has published"), "{}", run.stderr);
    assert!(run.stderr.contains("Page tokens given out before are refused"), "{}", run.stderr);
    assert_ne!(std::fs::read(&key).unwrap(), before);
    // Once: the new key is the store's key from then on.
    let run = common::run_command(&summary, common::command());
    run.ok();
    assert!(!run.stderr.contains("token.key"), "{}", run.stderr);
}

#[test]
fn a_killed_set_token_leaves_no_temporary_file_behind() {
    let data = data_dir();
    // What `accounts set-token --data` killed before its rename leaves: its
    // temporary file, named for its process (one that no longer runs), and
    // one of a process that still runs (this one), left alone.
    let dead = data.path().join(".accounts.csv.tmp-4194399");
    let live = data.path().join(format!(".accounts.csv.tmp-{}", std::process::id()));
    std::fs::write(&dead, "auth_id\nhalf").unwrap();
    std::fs::write(&live, "auth_id\nbusy").unwrap();
    let mut child = common::command()
        .args(["accounts", "set-token", A, "--data"])
        .arg(data.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), b"fresh-token\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    assert!(!dead.exists(), "the dead process's temporary file is still there");
    assert!(live.exists(), "a live process's temporary file was removed");
    let accounts = std::fs::read_to_string(data.path().join("accounts.csv")).unwrap();
    assert!(accounts.contains(&crate::server::sha_hex("fresh-token")), "{accounts}");
}
