//! A full disk under a store (and a file-size limit): an ingest that runs
//! out of space fails naming the condition and leaves exactly the files
//! it found, and every
//! reader (`summary --store`, `report --store`, `serve --store`) answers
//! the previous generation as before, on a disk with no byte free.
//!
//! The store lives on a small tmpfs mounted for the test (root only: the
//! test says it was skipped otherwise, on stdout and stderr); a balloon
//! file beside the store leaves the ingest a chosen number of bytes, so
//! that it fails at different points of its run (its first records and
//! index files, those of later batches and of later kinds; its peak is
//! about 1.4 times what it leaves, spilled rollups included, and it fails
//! in the rollups' merge only near that peak, at a point that depends on
//! the timing of its threads, which a test cannot pin). The mount is
//! removed whatever happens (`Mounted`'s drop).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::{self, copy_tree, run_command, Run};
use crate::server::{basic, sha_hex, Server};

/// The token of account MA001SHGA32ZDQYG9N8T in the test's copy of `sample_data/`.
const TOKEN: &str = "disk-full-token";

/// A tmpfs mounted at a folder of its own; unmounted (lazily if it is
/// still busy) on drop.
struct Mounted {
    dir: PathBuf,
}

impl Mounted {
    /// Mounts a tmpfs of `bytes` at `dir`; `Err` says why it could not.
    fn tmpfs(dir: &Path, bytes: u64) -> Result<Mounted, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let output = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={}k", bytes.div_ceil(1024)), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        match output.status.success() {
            true => Ok(Mounted { dir: dir.to_owned() }),
            false => Err(String::from_utf8_lossy(&output.stderr).trim().to_owned()),
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let unmounted = Command::new("umount").arg(&self.dir).status().is_ok_and(|s| s.success());
        if !unmounted {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

/// Whether this process runs as root (mounting needs it).
fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Says, on both streams, that the test did not run and why.
fn skipped(test: &str, why: &str) {
    println!("SKIPPED {test}: {why}");
    eprintln!("SKIPPED {test}: {why}");
}

/// Bytes free on the file system of `dir` (`df`).
fn free_bytes(dir: &Path) -> u64 {
    let output = Command::new("df").args(["-B1", "--output=avail"]).arg(dir).output().expect("df");
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines().nth(1).and_then(|line| line.trim().parse().ok()).expect("df's free bytes")
}

/// Makes `balloon` hold zeros until `free` bytes (or fewer, a page's
/// worth) are left free beside it; `free` 0 fills the disk to its last
/// byte.
fn inflate(balloon: &Path, free: u64) {
    let _ = std::fs::remove_file(balloon);
    let mut file = std::fs::File::create(balloon).expect("balloon");
    let dir = balloon.parent().expect("a folder");
    let chunk = vec![0u8; 1 << 16];
    let mut left = free_bytes(dir).saturating_sub(free);
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        if file.write_all(&chunk[..n]).is_err() {
            break;
        }
        left -= n as u64;
    }
    if free == 0 {
        // Down to the last byte: whatever df rounded away.
        while file.write_all(&chunk[..1]).is_ok() {}
    }
    let _ = file.sync_all();
}

/// Every file under `dir` by its path relative to it, sorted; lease files
/// and temporary files of readers apart.
fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            let path = entry.path();
            if entry.file_type().expect("type").is_dir() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).expect("inside").to_string_lossy().into_owned());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The files of `store` that are neither listed by its manifest nor its
/// own state (the manifest, the lock, the page-token key, the deletions
/// database, the servers' shared rate-limit log).
fn unlisted(store: &Path) -> Vec<String> {
    let listed = listed(store);
    let state = ["manifest.json", ".ingest.lock", "token.key", "deletions.sqlite", "rate.sqlite"];
    // The kept copies of published manifests (`manifests/<generation>.json`),
    // never one of a generation that was not published.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("manifest.json")).expect("manifest")).expect("JSON");
    let generation = manifest["generation"].as_u64().expect("generation");
    let kept = |f: &str| {
        f.strip_prefix("manifests/")
            .and_then(|name| name.strip_suffix(".json"))
            .and_then(|number| number.parse::<u64>().ok())
            .is_some_and(|kept| kept <= generation)
    };
    files(store).into_iter().filter(|f| !listed.contains(f) && !state.contains(&f.as_str()) && !kept(f)).collect()
}

/// The files the manifest of `store` lists.
fn listed(store: &Path) -> Vec<String> {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("manifest.json")).expect("manifest")).expect("JSON");
    let mut listed: Vec<String> = Vec::new();
    for kind in manifest["kinds"].as_object().expect("kinds").values() {
        for key in ["records", "index"] {
            listed.extend(kind[key].as_array().expect("files").iter().map(|v| v.as_str().expect("name").to_owned()));
        }
    }
    for grains in manifest["rollups"].as_object().expect("rollups").values() {
        listed.extend(grains.as_object().expect("grains").values().map(|v| v.as_str().expect("name").to_owned()));
    }
    for key in ["accounts_csv", "resources"] {
        listed.extend(manifest[key].as_str().map(str::to_owned));
    }
    // Each ingest's rows set aside and ledger of changes.
    for ingest in manifest["ingests"].as_array().expect("ingests") {
        for key in ["rejected", "changes"] {
            listed.extend(ingest[key].as_str().map(str::to_owned));
        }
    }
    listed
}

/// What the readers answer: `summary --store` (two queries), the files of
/// `report --store` (written to `out`, on another disk) and one request
/// to `serve --store` on a real port.
#[derive(Debug, PartialEq)]
struct Answers {
    summaries: Vec<String>,
    report: Vec<(String, Vec<u8>)>,
    served: (u16, String),
}

fn answers(store: &Path, out: &Path, full: bool) -> Answers {
    let store_s = store.to_str().expect("UTF-8");
    let lease_notice = |run: &Run| {
        if full {
            assert!(run.stderr.contains("without a read lease"), "no notice of the unleased read: {}", run.stderr);
        }
    };
    let mut summaries = Vec::new();
    for query in ["from_date=2026-11-01&to_date=2026-11-21", "granularity=hour&from_date=2026-11-18&to_date=2026-11-21"]
    {
        let args = [
            "summary",
            "--store",
            store_s,
            "--auth-id",
            "MA001SHGA32ZDQYG9N8T",
            "--query",
            query,
            "--now",
            common::NOW,
        ];
        let run = run_command(&args, common::command());
        lease_notice(&run);
        summaries.push(run.ok().to_owned());
    }
    let _ = std::fs::remove_dir_all(out);
    let out_s = out.to_str().expect("UTF-8");
    let run = run_command(&["report", "--store", store_s, "--out", out_s, "--now", common::NOW], common::command());
    lease_notice(&run);
    run.ok();
    let report =
        files(out).into_iter().map(|f| (f.clone(), std::fs::read(out.join(&f)).expect("a report file"))).collect();
    let server = Server::start_with("127.0.0.1:0", &["--store".into(), store.as_os_str().to_owned()]);
    let path = "/v1/Account/MA001SHGA32ZDQYG9N8T/UsageSummary/?from_date=2026-11-01&to_date=2026-11-21";
    let response =
        server.client().request("GET", path, &[("Authorization", &basic("MA001SHGA32ZDQYG9N8T", TOKEN))]).expect("GET");
    // Stopped, not killed: its lease goes with it.
    server.stop();
    // The server's api_id is new on every request: the rest is compared.
    let mut body: serde_json::Value = serde_json::from_slice(&response.body).expect("a JSON body");
    body.as_object_mut().expect("an object").remove("api_id");
    Answers { summaries, report, served: (response.status, body.to_string()) }
}

#[test]
fn a_full_disk_fails_the_ingest_cleanly_and_every_reader_answers_as_before() {
    const TEST: &str = "faults::a_full_disk_fails_the_ingest_cleanly_and_every_reader_answers_as_before";
    if !is_root() {
        return skipped(TEST, "mounting a tmpfs needs root");
    }
    let temp = common::temp_dir();
    // sample_data, with a token for MA001SHGA32ZDQYG9N8T, ingested into a store on the
    // test's own disk; and a second, larger data set.
    let data = temp.path().join("data");
    copy_tree(&common::sample_data(), &data);
    let accounts = std::fs::read_to_string(data.join("accounts.csv")).expect("accounts.csv");
    let hash = common::account_cell(&accounts, "MA001SHGA32ZDQYG9N8T", "auth_token_sha256");
    std::fs::write(data.join("accounts.csv"), accounts.replace(hash, &sha_hex(TOKEN))).expect("accounts.csv");
    let store = temp.path().join("store");
    let s = |path: &Path| path.to_str().expect("UTF-8").to_owned();
    common::telemeter(&["ingest", "--data", &s(&data), "--store", &s(&store)]).ok();
    let more = temp.path().join("more");
    let generated = [
        "generate",
        "-o",
        &s(&more),
        "--calls",
        "30000",
        "--messages",
        "15000",
        "--transcriptions",
        "3000",
        "--charges",
        "300",
        "--accounts",
        "6",
        "--start",
        "2026-08-01",
        "--days",
        "20",
        "--seed",
        "7",
    ];
    common::telemeter(&generated).ok();
    // What the second ingest needs: measured on the test's own disk.
    let measured = temp.path().join("measured");
    copy_tree(&store, &measured);
    let store_bytes: u64 = files(&store).iter().map(|f| std::fs::metadata(store.join(f)).expect("size").len()).sum();
    let ingest = |store: &Path| {
        let args =
            ["ingest", "--data", &s(&more), "--store", &s(store), "--batch-mb", "1", "--max-rollup-groups", "5000"];
        common::telemeter(&args)
    };
    ingest(&measured).ok();
    let measured_bytes: u64 =
        files(&measured).iter().map(|f| std::fs::metadata(measured.join(f)).expect("size").len()).sum();
    let needed = measured_bytes - store_bytes;

    let mount = temp.path().join("mnt");
    let size = (store_bytes + needed) * 2 + (8 << 20);
    let mounted = match Mounted::tmpfs(&mount, size) {
        Ok(mounted) => mounted,
        Err(why) => return skipped(TEST, &format!("cannot mount a tmpfs: {why}")),
    };
    let (on_tmpfs, balloon) = (mounted.dir.join("store"), mounted.dir.join("balloon"));
    copy_tree(&store, &on_tmpfs);
    assert_eq!(unlisted(&on_tmpfs), Vec::<String>::new(), "the copied store holds files of its own");
    let out = temp.path().join("report");
    let before = answers(&on_tmpfs, &out, false);
    assert_eq!(before.served.0, 200, "{}", before.served.1);
    // (After a server has run: it keeps its rate-limit log there.)
    let found = files(&on_tmpfs);

    // Free space from a few pages to 1.3 times what the ingest leaves
    // (below its peak): each run stops at another point of its work.
    let mut failures = Vec::new();
    for percent in [0, 3, 15, 35, 60, 85, 100, 115, 130] {
        let free = needed * percent / 100;
        inflate(&balloon, free);
        let run = ingest(&on_tmpfs);
        let place = format!("{percent}% of the {needed} bytes the ingest adds free");
        assert_ne!(run.code, 0, "{place}: the ingest succeeded:\n{}", run.stdout);
        assert!(
            run.stderr.contains("No space left on device") || run.stderr.contains("disk is full"),
            "{place}: the error does not name the full disk:\n{}",
            run.stderr
        );
        assert!(!run.stderr.contains("panicked"), "{place}:\n{}", run.stderr);
        assert_eq!(files(&on_tmpfs), found, "{place}: the failed ingest left files of its own");
        // Where it stopped: the folder of the file it could not write.
        let last = run.stderr.lines().last().unwrap_or_default();
        let file = last.split("/store/").nth(1).and_then(|rest| rest.split(':').next()).unwrap_or(last);
        failures.push(file.rsplit_once('/').map_or(file, |(folder, _)| folder).to_owned());

        // Not a byte free: every reader reads without writing.
        inflate(&balloon, 0);
        assert_eq!(free_bytes(&mounted.dir), 0, "{place}: the disk is not full");
        let after = answers(&on_tmpfs, &out, true);
        assert_eq!(after.summaries, before.summaries, "{place}: summary --store answers otherwise");
        let names = |answers: &Answers| answers.report.iter().map(|(name, _)| name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&after), names(&before), "{place}: report --store writes other files");
        for ((name, bytes), (_, expected)) in after.report.iter().zip(&before.report) {
            assert!(bytes == expected, "{place}: report --store writes another {name}");
        }
        assert_eq!(after.served, before.served, "{place}: serve --store answers otherwise");
        assert_eq!(files(&on_tmpfs), found, "{place}: a reader left files in the store");
    }
    // `accounts set-token`, the other publisher, on the full disk: it
    // fails naming it and leaves nothing either.
    let mut set_token = common::command();
    set_token
        .args(["accounts", "set-token", "MA001SHGA32ZDQYG9N8T", "--store", &s(&on_tmpfs)])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = set_token.spawn().expect("set-token");
    child.stdin.take().expect("stdin").write_all(b"another-token\n").expect("the token");
    let output = child.wait_with_output().expect("set-token ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "set-token published on a full disk");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    assert_eq!(files(&on_tmpfs), found, "set-token left files of its own");

    // The runs failed at more than one point of the ingest.
    failures.sort();
    failures.dedup();
    assert!(failures.len() > 2, "the runs failed in too few places: {failures:?}");
    println!("the ingests failed writing in: {failures:?}");

    // With the space back, the same ingest publishes; the files it
    // superseded stay for a generation (for readers without a lease).
    std::fs::remove_file(&balloon).expect("balloon");
    let previous = listed(&on_tmpfs);
    ingest(&on_tmpfs).ok();
    let left: Vec<String> = unlisted(&on_tmpfs).into_iter().filter(|f| !previous.contains(f)).collect();
    assert_eq!(left, Vec::<String>::new(), "files of no generation beside the new one");
    drop(mounted);
}

/// A write past the file-size limit (`ulimit -f`) is an error naming its
/// file, not a signal that ends the ingest without a word; the store
/// keeps its generation.
#[test]
fn a_file_size_limit_fails_the_ingest_with_a_message() {
    let temp = common::temp_dir();
    let s = |path: &Path| path.to_str().expect("UTF-8").to_owned();
    let store = temp.path().join("store");
    common::telemeter(&["ingest", "--data", &s(&common::sample_data()), "--store", &s(&store)]).ok();
    let more = temp.path().join("more");
    let generated = ["generate", "-o", &s(&more), "--calls", "30000", "--start", "2026-08-01", "--seed", "7"];
    common::telemeter(&generated).ok();
    let before = listed(&store);
    let mut command = Command::new("sh");
    let script =
        format!("ulimit -f 256; exec {} ingest --data '{}' --store '{}'", common::binary(), s(&more), s(&store));
    command.args(["-c", &script]);
    let run = run_command(&[], command);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("File too large"), "{}", run.stderr);
    assert!(run.stderr.contains(&s(&store)), "names the file: {}", run.stderr);
    assert_eq!(listed(&store), before);
    assert!(unlisted(&store).is_empty(), "{:?}", unlisted(&store));
    common::telemeter(&["store", "verify", "--store", &s(&store)]).ok();
}
