//! `ingest --engine spark` against the real Apache Spark: `local[2]`, and a
//! standalone cluster of one master and two workers on 127.0.0.1. Every
//! Spark-built store is compared with a store the local engine built from
//! the same sequence of ingests: the same counts, the same rollup files byte
//! for byte, the same `summary --store` answers in UTC, +05:30, +05:45 and
//! a DST zone, the same errors and set-aside rows.
//!
//! Spark is found through `SPARK_HOME` (`.ci/run` installs the pinned
//! `pyspark` and exports it; the repository's `.venv-spark/` is used when
//! it is there). Without it these tests print a skip line, except under
//! `CI=true`, where a missing Spark is a failure.

use crate::common::CALLS_HEADER;
use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn s(path: &Path) -> &str {
    path.to_str().expect("utf-8 path")
}

fn put(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// The Spark installation and the Python its workers run, or `None` (the
/// test is skipped) when there is none outside CI.
fn spark() -> Option<(PathBuf, Option<PathBuf>)> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv-spark");
    let home = std::env::var_os("SPARK_HOME").map(PathBuf::from).filter(|h| h.join("bin/spark-submit").exists());
    let home = home.or_else(|| {
        let lib = std::fs::read_dir(venv.join("lib")).ok()?;
        lib.flatten().map(|e| e.path().join("site-packages/pyspark")).find(|p| p.join("bin/spark-submit").exists())
    });
    let python = std::env::var_os("PYSPARK_PYTHON")
        .map(PathBuf::from)
        .or_else(|| Some(venv.join("bin/python")).filter(|p| p.exists()));
    match home {
        Some(home) => Some((home, python)),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but no Spark: set SPARK_HOME (.ci/run installs pyspark into .venv-spark)")
        }
        None => {
            crate::common::skipped("no Spark (set SPARK_HOME to a Spark 4 installation, or run .ci/run)");
            None
        }
    }
}

/// `telemeter` with Spark's environment: loopback only.
fn telemeter(spark: &(PathBuf, Option<PathBuf>)) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_telemeter"));
    command
        .env("SPARK_HOME", &spark.0)
        .env("SPARK_LOCAL_IP", "127.0.0.1")
        .env_remove("TELEMETER_THREADS")
        // One page-token key for both stores' answers (each store makes its
        // own random key otherwise, and tokens are sealed with it).
        .env("TELEMETER_TOKEN_KEY", crate::common::TOKEN_KEY)
        .env("TELEMETER_STATE_DIR", crate::common::state_dir())
        // The driver JVM's class archive, shared by these tests.
        .env("XDG_CACHE_HOME", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cache"))
        // The driver's JVM compiles with its quick compiler only: these
        // jobs are seconds long, and C2's compiling cost more than it won
        // (a 9,600-row ingest in local[2]: 37 -> 30 s). Results do not
        // depend on it.
        .env("SPARK_SUBMIT_OPTS", "-XX:TieredStopAtLevel=1");
    if let Some(python) = &spark.1 {
        command.env("PYSPARK_PYTHON", python).env("PYSPARK_DRIVER_PYTHON", python);
    }
    command
}

fn run(spark: &(PathBuf, Option<PathBuf>), args: &[&str]) -> Output {
    let output = telemeter(spark).args(args).output().expect("run telemeter");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "telemeter {args:?} panicked:\n{stderr}");
    output
}

fn ok(output: &Output) -> String {
    assert!(
        output.status.success(),
        "expected success; stderr:\n{}\nstdout:\n{}",
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The per-kind count lines of an ingest's report (the same for both
/// engines; the ingest id differs).
fn counts(stdout: &str) -> Vec<String> {
    stdout.lines().filter(|l| l.contains(" read ")).map(str::to_owned).collect()
}

fn generate(spark: &(PathBuf, Option<PathBuf>), out: &Path, seed: &str, start: &str, format: &str) {
    generate_calls(spark, out, seed, start, format, "2400", "2");
}

/// [`generate`] with `calls` calls in `files` files of each kind.
fn generate_calls(
    spark: &(PathBuf, Option<PathBuf>),
    out: &Path,
    seed: &str,
    start: &str,
    format: &str,
    calls: &str,
    files: &str,
) {
    ok(&run(
        spark,
        &[
            "generate",
            "--out",
            s(out),
            "--calls",
            calls,
            "--messages",
            "1200",
            "--transcriptions",
            "300",
            "--charges",
            "120",
            "--accounts",
            "3",
            "--subaccounts",
            "2",
            "--start",
            start,
            "--days",
            "6",
            "--seed",
            seed,
            "--format",
            format,
            "--files",
            files,
            "--duplicates",
            "0.03",
        ],
    ));
}

/// Calls in 1971 (answered from the stored records, not the rollups: the
/// zone's offset was -00:44:30), with nanoseconds, offsets and the
/// largest amount a record holds (two of them sum past 64 bits).
fn old_calls(account: &str) -> String {
    format!(
        "{CALLS_HEADER}\
         h1,{account},,1971-06-01T10:00:00.123456789Z,voice,pstn,outbound,LR,61,9223372036.854775807,0.000000001,4000\n\
         h2,{account},S9,1971-06-01 23:50:00+05:45,zentrunk,sip,inbound,,30.5,9223372036.854775807,0,\n\
         h3,{account},,1971-06-02T00:10:00-00:44,voice,app,inbound,US,1,1.5,0.5,3010\n"
    )
}

const QUERIES: [&str; 7] = [
    "from_date=2026-10-27&to_date=2026-11-12&granularity=day",
    "from_date=2026-10-30&to_date=2026-11-03&granularity=hour&timezone=America/New_York",
    "from_date=2026-10-27&to_date=2026-11-12&granularity=day&timezone=Asia/Kolkata",
    "from_date=2026-10-28&to_date=2026-10-31&granularity=hour&timezone=Asia/Kathmandu&page_size=50",
    "from_date=2026-10-01&to_date=2026-12-01&granularity=month&product=voice,message&direction=outbound",
    "from_date=2026-10-27&to_date=2026-11-12&granularity=day&product=other",
    "from_date=1971-06-01&to_date=1971-06-03&granularity=hour&timezone=Africa/Monrovia",
];

/// Every answer of `store` for `accounts`, in order.
fn answers(spark: &(PathBuf, Option<PathBuf>), store: &Path, accounts: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for account in accounts {
        for query in QUERIES {
            let output = run(
                spark,
                &[
                    "summary",
                    "--store",
                    s(store),
                    "--auth-id",
                    account,
                    "--query",
                    query,
                    "--now",
                    "2026-11-23T06:00:00Z",
                    "--all-pages",
                ],
            );
            out.push(ok(&output));
        }
    }
    out
}

/// Every file of a store the manifest lists, and the manifest itself, by
/// name: their bytes, with each ingest's id (a clock reading and a process
/// id, the one thing two runs cannot share) replaced by its position, in
/// names and in the manifest's text.
fn store_files(store: &Path) -> BTreeMap<String, Vec<u8>> {
    let text = std::fs::read_to_string(store.join("manifest.json")).expect("manifest");
    let manifest: serde_json::Value = serde_json::from_str(&text).expect("json");
    let ids: Vec<String> = manifest["ingests"]
        .as_array()
        .expect("ingests")
        .iter()
        .map(|i| i["id"].as_str().expect("ingest id").to_owned())
        .collect();
    let normal =
        |name: &str| ids.iter().enumerate().fold(name.to_owned(), |n, (i, id)| n.replace(id, &format!("INGEST{i}")));
    let mut names: Vec<String> = Vec::new();
    for files in manifest["kinds"].as_object().expect("kinds").values() {
        for list in ["records", "index"] {
            names.extend(files[list].as_array().expect("files").iter().map(|n| n.as_str().expect("name").to_owned()));
        }
    }
    for grains in manifest["rollups"].as_object().expect("rollups").values() {
        names.extend(grains.as_object().expect("grains").values().map(|n| n.as_str().expect("name").to_owned()));
    }
    for single in [&manifest["accounts_csv"], &manifest["resources"]] {
        names.extend(single.as_str().map(str::to_owned));
    }
    for ingest in manifest["ingests"].as_array().expect("ingests") {
        names.extend(ingest["rejected"].as_str().map(str::to_owned));
    }
    let mut out = BTreeMap::new();
    for name in names {
        let bytes = std::fs::read(store.join(&name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(out.insert(normal(&name), bytes).is_none(), "{name} listed twice");
    }
    // The manifest's own checksum covers the ingest ids, which differ
    // between the engines' runs: it is compared as the rest of the text
    // is, ids aside, by taking it out (each store's commands check it).
    let own = manifest["checksum"].as_str().expect("a format 6 manifest checksums itself");
    let mut text = text.replace(&format!("\"checksum\": \"{own}\""), "\"checksum\": \"OWN\"");
    // A corrections file names records files, whose names hold the ingest
    // ids: compared with the ids replaced, its sum and size (an id's
    // process number may have more digits in one run) taken out likewise.
    for ingest in manifest["ingests"].as_array().expect("ingests") {
        let Some(name) = ingest["corrections"].as_str() else { continue };
        let bytes = std::fs::read_to_string(store.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        out.insert(normal(name), normal(&bytes).into_bytes());
        let sum = manifest["files"][name]["xxh3"].as_str().expect("a listed sum");
        let size = manifest["files"][name]["bytes"].as_u64().expect("a listed size");
        let listed = format!("\"bytes\": {size},\n      \"xxh3\": \"{sum}\"");
        assert!(text.contains(&listed), "{name}'s size and sum in the manifest");
        text = text.replace(&listed, "\"bytes\": SIZE,\n      \"xxh3\": \"CORRECTIONS\"");
    }
    out.insert("manifest.json".to_owned(), normal(&text).into_bytes());
    out
}

fn accounts_of(data: &[&Path]) -> Vec<String> {
    let mut accounts: Vec<String> = data
        .iter()
        .flat_map(|d| {
            let text = std::fs::read_to_string(d.join("accounts.csv")).expect("accounts.csv");
            text.lines().skip(1).filter_map(|l| l.split(',').next()).map(str::to_owned).collect::<Vec<_>>()
        })
        .collect();
    accounts.sort();
    accounts.dedup();
    accounts
}

/// Ingests `data` into both stores, the local engine and Spark; asserts the
/// same report counts and returns the Spark run's output.
fn ingest_both(
    spark: &(PathBuf, Option<PathBuf>),
    data: &Path,
    local: &Path,
    remote: &Path,
    extra: &[&str],
    master: &str,
) -> (Output, Output) {
    ingest_both_at(spark, data, s(data), local, remote, extra, master)
}

/// [`ingest_both`], Spark reading `data` as `spark_data` (its path, or a
/// URI of it).
fn ingest_both_at(
    spark: &(PathBuf, Option<PathBuf>),
    data: &Path,
    spark_data: &str,
    local: &Path,
    remote: &Path,
    extra: &[&str],
    master: &str,
) -> (Output, Output) {
    let mut args = vec!["ingest", "--data", s(data), "--store", s(local)];
    args.extend_from_slice(extra);
    let by_local = run(spark, &args);
    let mut args =
        vec!["ingest", "--data", spark_data, "--store", s(remote), "--engine", "spark", "--spark-master", master];
    args.extend_from_slice(extra);
    let by_spark = run(spark, &args);
    assert_eq!(
        by_local.status.code(),
        by_spark.status.code(),
        "local: {}\nspark: {}",
        String::from_utf8_lossy(&by_local.stderr),
        String::from_utf8_lossy(&by_spark.stderr)
    );
    if by_local.status.success() {
        assert_eq!(
            counts(&String::from_utf8_lossy(&by_local.stdout)),
            counts(&String::from_utf8_lossy(&by_spark.stdout))
        );
    }
    assert!(!remote.join("staging").exists(), "the Spark ingest left its staging folder");
    (by_local, by_spark)
}

/// Asserts that the two stores hold the same files, byte for byte (the
/// manifest, records, index, rollups, accounts, rejected rows; ingest ids
/// aside), and answer alike.
fn assert_same_stores(spark: &(PathBuf, Option<PathBuf>), local: &Path, remote: &Path, accounts: &[String]) {
    let (a, b) = (store_files(local), store_files(remote));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "the engines' stores list other files");
    for (name, bytes) in &a {
        if name == "manifest.json" {
            assert_eq!(String::from_utf8_lossy(bytes), String::from_utf8_lossy(&b[name]));
        }
        assert!(b[name] == *bytes, "{name} differs between the engines");
    }
    let (a, b) = (answers(spark, local, accounts), answers(spark, remote, accounts));
    assert_eq!(a.len(), accounts.len() * QUERIES.len());
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(x, y, "answer {i} ({})", QUERIES[i % QUERIES.len()]);
    }
}

/// The smallest record-id filter (most new ids are false candidates, held
/// for the exact check and stored in a later file of the ingest), one batch
/// per input file.
const SMALL_FILTER: &[&str] = &["--filter-mb", "0", "--batch-mb", "0"];

/// The same, with the candidates checked after every batch.
const TIGHT: &[&str] = &["--filter-mb", "0", "--pending-mb", "0", "--batch-mb", "0"];

#[test]
fn spark_local_mode_builds_the_same_store_as_the_local_engine() {
    let Some(spark) = spark() else { return };
    let master = "local[2]";
    let temp = tempfile::tempdir().expect("tempdir");
    let (day1, day2) = (temp.path().join("day1"), temp.path().join("day2"));
    generate(&spark, &day1, "11", "2026-10-28", "csv");
    generate(&spark, &day2, "12", "2026-11-03", "parquet");
    let accounts = accounts_of(&[&day1, &day2]);
    let first = accounts[0].clone();
    put(&day1, "calls/1971/history.csv", &old_calls(&first));
    let (local, remote) = (temp.path().join("local"), temp.path().join("spark"));

    // First load: generated duplicates count once. A tiny filter: rows it
    // mistakes for stored ones are stored in an extra file, by both engines.
    let (by_local, _) = ingest_both(&spark, &day1, &local, &remote, SMALL_FILTER, master);
    let text = String::from_utf8_lossy(&by_local.stdout).into_owned();
    let total: Vec<u64> = text
        .lines()
        .find(|l| l.starts_with("total"))
        .expect("total")
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(total[0], total[1] + total[2] + total[3]);
    assert!(total[3] > 0, "the generator re-delivers rows: {text}");
    assert_same_stores(&spark, &local, &remote, &accounts);

    // A killed Spark ingest publishes nothing.
    let before = std::fs::read(remote.join("manifest.json")).expect("manifest");
    let mut child = telemeter(&spark)
        .args(["ingest", "--data", s(&day2), "--store", s(&remote), "--engine", "spark", "--spark-master", master])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(180);
    let staging = remote.join("staging");
    let started = loop {
        let checked = std::fs::read_dir(&staging)
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .is_some_and(|e| e.path().join("checked").exists());
        if checked || Instant::now() > deadline || child.try_wait().expect("wait").is_some() {
            break checked;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let group = format!("-{}", child.id());
    let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    child.wait().expect("reap");
    assert!(started, "the Spark job started before it was killed");
    assert_eq!(std::fs::read(remote.join("manifest.json")).expect("manifest"), before);

    // A new day, with a file of the first re-delivered (duplicates against
    // the store); then the same files again (nothing new). The candidates
    // (re-delivered rows and false ones) are checked after every batch.
    std::fs::copy(day1.join("calls/part-000.csv"), day2.join("calls/redelivered.csv")).expect("copy");
    let (_, by_spark) = ingest_both(&spark, &day2, &local, &remote, TIGHT, master);
    let text = ok(&by_spark);
    assert!(text.contains("published generation 2"), "{text}");
    // Its progress on stderr (not a terminal: plain lines): the job's steps in order.
    let stderr = String::from_utf8_lossy(&by_spark.stderr);
    let steps = ["Spark job running", "writing the new rows (Spark) and folding them", "publishing", "done, elapsed "];
    let at: Vec<usize> = steps
        .iter()
        .map(|step| stderr.find(&format!("ingest: {step}")).unwrap_or_else(|| panic!("no '{step}' in:\n{stderr}")))
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{stderr}");
    let calls: Vec<u64> = counts(&text)[0].split_whitespace().filter_map(|w| w.parse().ok()).collect();
    assert!(calls[3] >= 1000, "the re-delivered file's rows are duplicates of stored ones: {text}");
    assert_same_stores(&spark, &local, &remote, &accounts);
    let (_, by_spark) = ingest_both(&spark, &day2, &local, &remote, &[], master);
    let text = ok(&by_spark);
    assert!(text.contains("nothing new: the store is unchanged at generation 2"), "{text}");

    // A conflicting re-delivery (same record_id, another amount) fails,
    // naming both places, the stored one first.
    let bad = temp.path().join("conflict");
    let stored_row = std::fs::read_to_string(day1.join("calls/1971/history.csv")).expect("history");
    let changed = stored_row.replace("9223372036.854775807,0.000000001", "9223372036.854775806,0.000000001");
    put(&bad, "calls/again.csv", &changed);
    let (by_local, by_spark) = ingest_both(&spark, &bad, &local, &remote, &[], master);
    assert_eq!(by_spark.status.code(), Some(1));
    let error = |o: &Output| {
        let text = String::from_utf8_lossy(&o.stderr).into_owned();
        let line = text.lines().find(|l| l.starts_with("error:")).map(str::to_owned).unwrap_or(text.clone());
        // The engines' stores differ in name and ingest ids only.
        let line = line.replace(s(&local), "STORE").replace(s(&remote), "STORE");
        match (line.find("(ingest "), line.find("):")) {
            (Some(a), Some(b)) if a < b => format!("{}(ingest ID{}", &line[..a], &line[b..]),
            _ => line,
        }
    };
    let message = error(&by_spark);
    assert!(message.contains("conflicting duplicate calls record_id 'h1'"), "{message}");
    assert!(message.contains("calls/1971/history.csv (ingest "), "{message}");
    assert!(message.contains("calls/1971/history.csv (ingest ID):2 and calls/again.csv:2 differ"), "{message}");
    assert_eq!(error(&by_local), message);

    // Bad rows: a failing run names file, line, column and value like the
    // local engine; set aside, they are counted and written alike.
    let dirty = temp.path().join("dirty");
    put(
        &dirty,
        "calls/dirty.csv",
        &format!(
            "{CALLS_HEADER}\
             d1,{first},,2026-11-04T10:00:00Z,voice,pstn,outbound,US,61,0.017,0,4000\n\
             d2,{first},,2026-11-04T10:00:00Z,fax,pstn,outbound,US,61,0.017,0,4000\n\
             d3,{first},,2026-11-04T10:00:00Z,voice,pstn,outbound,US,61,-1,0,4000\n\
             d4,{first},,2026-11-04T10:00:00+05:45,voice,pstn,outbound,US,61,0.5,0.25,4000\n"
        ),
    );
    put(
        &dirty,
        "charges/dirty.csv",
        &format!(
            "record_id,auth_id,timestamp,description,units,amount\n\
             x1,{first},2026-11-04T10:00:00Z,CNAM Lookup,1,0.004\n\
             x2,{first},2026-11-04T10:00:00Z,,1,0.004\n"
        ),
    );
    let (by_local, by_spark) = ingest_both(&spark, &dirty, &local, &remote, &[], master);
    assert_eq!(by_spark.status.code(), Some(1));
    let message = error(&by_spark);
    assert!(message.contains("calls/dirty.csv:3: column 'product': 'fax'"), "{message}");
    assert_eq!(error(&by_local), message);
    let before = std::fs::read(remote.join("manifest.json")).expect("manifest");
    assert_eq!(std::fs::read(remote.join("manifest.json")).expect("manifest"), before);

    let (by_local, by_spark) = ingest_both(&spark, &dirty, &local, &remote, &["--on-bad-row", "set-aside"], master);
    ok(&by_spark);
    let text = String::from_utf8_lossy(&by_local.stdout).into_owned();
    assert!(text.contains("total           read          6  used          3  set aside        3"), "{text}");
    let rejected = |store: &Path| {
        let folder = store.join("rejected");
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(&folder).expect("rejected").flatten().map(|e| e.path()).collect();
        files.sort();
        std::fs::read_to_string(files.last().expect("a rejected file")).expect("read")
    };
    assert_eq!(rejected(&local), rejected(&remote));
    assert_same_stores(&spark, &local, &remote, &accounts);
}

/// A candidate budget that fills up in the middle of a kind: the rows a
/// local ingest holds for the exact check (new ids its tiny filter takes for
/// stored ones, and re-delivered rows) are checked, and the new ones stored
/// in a file of their own, whenever they pass 4 MiB (batches of 1 MiB of
/// input); the Spark publish must count the re-delivered rows too to cut
/// the same files.
#[test]
fn spark_cuts_files_where_the_local_candidate_budget_fills() {
    let Some(spark) = spark() else { return };
    let master = "local[2]";
    let temp = tempfile::tempdir().expect("tempdir");
    let (day1, day2) = (temp.path().join("day1"), temp.path().join("day2"));
    generate_calls(&spark, &day1, "31", "2026-10-28", "csv", "8000", "4");
    generate_calls(&spark, &day2, "32", "2026-11-03", "csv", "40000", "16");
    for part in 0..4 {
        let name = format!("calls/part-{part:03}.csv");
        std::fs::copy(day1.join(&name), day2.join(format!("calls/again-{part}.csv"))).expect("copy");
    }
    let accounts = accounts_of(&[&day1, &day2]);
    let (local, remote) = (temp.path().join("local"), temp.path().join("spark"));
    ok(&ingest_both(&spark, &day1, &local, &remote, SMALL_FILTER, master).1);
    let budget = ["--filter-mb", "0", "--pending-mb", "4", "--batch-mb", "1"];
    ok(&ingest_both(&spark, &day2, &local, &remote, &budget, master).1);
    // The budget mattered: with the default one (never full here) the
    // local ingest cuts other files.
    let roomy = temp.path().join("roomy");
    let first = run(
        &spark,
        &[
            "ingest",
            "--data",
            s(&day1),
            "--store",
            s(&roomy),
            SMALL_FILTER[0],
            SMALL_FILTER[1],
            SMALL_FILTER[2],
            SMALL_FILTER[3],
        ],
    );
    ok(&first);
    ok(&run(&spark, &["ingest", "--data", s(&day2), "--store", s(&roomy), "--filter-mb", "0", "--batch-mb", "1"]));
    assert_ne!(store_files(&local).keys().collect::<Vec<_>>(), store_files(&roomy).keys().collect::<Vec<_>>());
    assert_same_stores(&spark, &local, &remote, &accounts);
}

/// A file of more than two batches is read by the local ingest in runs of
/// lines, each run a batch (its own records and index files, its own turn
/// of the candidate budget): the Spark ingest cuts its rows at the same
/// lines, for CSV, compressed CSV and Parquet, with repeats within a run,
/// across runs and of stored rows.
#[test]
fn spark_cuts_a_large_file_into_the_local_ingests_runs_of_lines() {
    let Some(spark) = spark() else { return };
    let master = "local[2]";
    let temp = tempfile::tempdir().expect("tempdir");
    let (day1, day2) = (temp.path().join("day1"), temp.path().join("day2"));
    generate_calls(&spark, &day1, "41", "2026-10-28", "csv", "30000", "1");
    generate_calls(&spark, &day2, "42", "2026-11-03", "parquet", "60000", "1");
    let calls = std::fs::read(day1.join("calls/part-000.csv")).expect("calls");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &calls).expect("gzip");
    std::fs::write(day2.join("calls/again.csv.gz"), gz.finish().expect("gzip")).expect("write");
    let accounts = accounts_of(&[&day1, &day2]);
    let (local, remote) = (temp.path().join("local"), temp.path().join("spark"));
    let budget = ["--filter-mb", "0", "--pending-mb", "1", "--batch-mb", "1"];
    ok(&ingest_both(&spark, &day1, &local, &remote, TIGHT, master).1);
    ok(&ingest_both(&spark, &day2, &local, &remote, &budget, master).1);
    let records = store_files(&local).keys().filter(|name| name.starts_with("records/calls/")).count();
    assert!(records >= 10, "{records} records files of calls: the files were read in runs");
    assert_same_stores(&spark, &local, &remote, &accounts);
}

/// A run's error message from the calls file's name on (the stores'
/// paths differ).
fn calls_error(run: &Output) -> String {
    let text = String::from_utf8_lossy(&run.stderr).into_owned();
    let line = text.lines().find(|l| l.starts_with("error:")).map(str::to_owned).unwrap_or(text);
    line.find("calls/").map_or(line.clone(), |at| line[at..].to_owned())
}

/// A plain CSV file past `--spark-split-mb` is checked by several tasks,
/// cut where lines start: its rows, repeats, bad rows (empty lines, a bad
/// value; failing or set aside) and runs of lines are numbered and stored
/// as when the local engine reads it whole.
#[test]
fn spark_splits_a_large_csv_file_where_its_lines_start() {
    let Some(spark) = spark() else { return };
    let master = "local[2]";
    let temp = tempfile::tempdir().expect("tempdir");
    let day = temp.path().join("day");
    generate_calls(&spark, &day, "43", "2026-10-28", "csv", "30000", "1");
    let path = day.join("calls/part-000.csv");
    let text = std::fs::read_to_string(&path).expect("calls");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let third = lines.len() / 3;
    // A bad row two thirds in, a repeat of an early row near the end,
    // a run of empty lines and a CRLF line a third in.
    let bad = lines[2 * third].replacen(",voice,", ",fax,", 1);
    assert_ne!(bad, lines[2 * third], "a voice call to spoil");
    lines[2 * third] = bad;
    let repeat = lines[5].clone();
    lines.insert(lines.len() - 3, repeat);
    lines[third] = format!("{}\r", lines[third]);
    for _ in 0..5 {
        lines.insert(third + 1, String::new());
    }
    // The first bad row: the first empty line (a row of no fields).
    let bad_line = third + 2;
    std::fs::write(&path, lines.join("\n") + "\n").expect("write");
    let size = std::fs::metadata(&path).expect("size").len();
    assert!(size > 3 << 20, "{size} bytes: at least four splits of 1 MiB");
    let accounts = accounts_of(&[&day]);
    let (local, remote) = (temp.path().join("local"), temp.path().join("spark"));

    let split = ["--spark-split-mb", "1", "--batch-mb", "1"];
    let (by_local, by_spark) = ingest_both(&spark, &day, &local, &remote, &split, master);
    assert_eq!(by_spark.status.code(), Some(1));
    let said = String::from_utf8_lossy(&by_spark.stderr).into_owned();
    let splits = said
        .lines()
        .find_map(|l| l.split_once("1 file cut into ")?.1.split_once(" splits")?.0.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("the file was not split: {said}"));
    assert!(splits >= 4 && splits <= size.div_ceil(1 << 20), "{splits} splits of about 1 MiB in {size} bytes");
    let message = calls_error(&by_spark);
    assert!(
        message.starts_with(&format!("calls/part-000.csv:{bad_line}: column '-': '' is an empty line")),
        "{message}"
    );
    assert_eq!(calls_error(&by_local), message);

    let set_aside = ["--spark-split-mb", "1", "--batch-mb", "1", "--on-bad-row", "set-aside"];
    let (by_local, by_spark) = ingest_both(&spark, &day, &local, &remote, &set_aside, master);
    ok(&by_spark);
    let text = ok(&by_local);
    assert!(text.contains("set aside        6"), "{text}");
    assert_same_stores(&spark, &local, &remote, &accounts);

    // A quoted description whose lines run across a cut: the local engine
    // reads it; a split cannot tell that it starts inside a field, and the
    // one before it says its split ends inside the field.
    let spanning = temp.path().join("spanning");
    let row = |i: usize| format!("x{i},MA1,2026-11-20T00:00:00Z,CNAM Lookup,1,0.01\n");
    let mut text = String::from("record_id,auth_id,timestamp,description,units,amount\n");
    let mut rows = 0;
    while text.len() < (1 << 20) - 100 {
        text.push_str(&row(rows));
        rows += 1;
    }
    // Lines of 2 bytes from 100 bytes before the first MiB to 100 after.
    text.push_str(&format!("long,MA1,2026-11-20T00:00:00Z,\"{}\",1,0.01\n", "a\n".repeat(100)));
    (rows..rows + 5_000).for_each(|i| text.push_str(&row(i)));
    let long_line = rows + 2;
    put(&spanning, "charges/c.csv", &text);
    let store = |name: &str| temp.path().join(name);
    let (local_store, spark_store) = (store("spanning-local"), store("spanning-spark"));
    ok(&run(&spark, &["ingest", "--data", s(&spanning), "--store", s(&local_store)]));
    let args = ["ingest", "--data", s(&spanning), "--store", s(&spark_store), "--engine", "spark"];
    let by_spark = run(&spark, &[&args[..], &["--spark-master", master, "--spark-split-mb", "1"]].concat());
    assert_eq!(by_spark.status.code(), Some(1));
    let said = String::from_utf8_lossy(&by_spark.stderr).into_owned();
    let at = format!("charges/c.csv:{long_line}:");
    assert!(said.contains(&at) && said.contains("by the end of its Spark split"), "{said}");
}

/// Files at a URI are streamed by Spark's text source, never held whole
/// (so no file size limit): a plain CSV file past `--spark-split-mb` is
/// read in blocks, a task each, its lines numbered after a count of each
/// block's lines. A byte order mark, CRLF endings and a last line without
/// a newline (in a file cut into blocks and in one read whole), a Parquet
/// file, a gzip file, an empty file, a file that is only a byte order
/// mark and names one URL-decoding apart give the store
/// the local engine builds from the path; a run of empty lines across a
/// block's edge is the local engine's error, at the same line (a few,
/// set aside, are counted once), and so is a bad row in the last block.
#[test]
fn spark_streams_files_at_a_uri_in_blocks_as_the_local_engine_reads_them() {
    let Some(spark) = spark() else { return };
    let master = "local[2]";
    let temp = tempfile::tempdir().expect("tempdir");
    let day = temp.path().join("day");
    generate_calls(&spark, &day, "43", "2026-10-28", "csv", "30000", "1");
    let other = temp.path().join("other");
    generate_calls(&spark, &other, "44", "2026-10-28", "parquet", "100", "1");
    std::fs::copy(other.join("messages/part-000.parquet"), day.join("messages/part-001.parquet")).expect("parquet");
    let charges = day.join("charges/part-000.csv");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, &std::fs::read(&charges).expect("charges")).expect("gzip");
    std::fs::write(day.join("charges/part-000.csv.gz"), gz.finish().expect("gzip")).expect("write");
    std::fs::remove_file(&charges).expect("remove");
    put(&day, "transcriptions/empty.csv", "");
    // A file that is only a byte order mark (Hadoop's line reader gives
    // it no line), and two names one URL-decoding apart.
    put(&day, "transcriptions/bom.csv", "\u{FEFF}");
    let account = accounts_of(&[&day]).into_iter().next().expect("an account");
    for (name, id) in [("a b", "sp1"), ("a%20b", "sp2")] {
        let row = format!("{id},{account},2026-10-29T00:00:00Z,CNAM Lookup,1,0.004");
        put(
            &day,
            &format!("charges/{name}.csv"),
            &format!("record_id,auth_id,timestamp,description,units,amount\n{row}\n"),
        );
    }
    // A file read whole (under a block): a byte order mark and no last
    // newline.
    let messages = day.join("messages/part-000.csv");
    let text = std::fs::read(&messages).expect("messages");
    let text = [b"\xEF\xBB\xBF".as_slice(), text.strip_suffix(b"\n").expect("a last newline")].concat();
    std::fs::write(&messages, text).expect("write");
    let path = day.join("calls/part-000.csv");
    let text = std::fs::read(&path).expect("calls");
    let mut calls = b"\xEF\xBB\xBF".to_vec();
    calls.extend(text.strip_suffix(b"\n").expect("a last newline").iter().flat_map(|&b| match b {
        b'\n' => vec![b'\r', b'\n'],
        b => vec![b],
    }));
    std::fs::write(&path, &calls).expect("write");
    assert!(calls.len() > 3 << 20, "{} bytes: at least four blocks of 1 MiB", calls.len());
    let accounts = accounts_of(&[&day]);
    let uri = format!("file://{}", s(&day));
    let (local, remote) = (temp.path().join("local"), temp.path().join("spark"));
    let split = ["--spark-split-mb", "1"];
    let (by_local, by_spark) = ingest_both_at(&spark, &day, &uri, &local, &remote, &split, master);
    ok(&by_local);
    ok(&by_spark);
    let said = String::from_utf8_lossy(&by_spark.stderr).into_owned();
    let blocks = said
        .lines()
        .find_map(|l| l.split_once("1 file cut into ")?.1.split_once(" splits")?.0.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("the file was not read in blocks: {said}"));
    assert_eq!(blocks, calls.len().div_ceil(1 << 20), "{said}");
    assert_same_stores(&spark, &local, &remote, &accounts);

    let line_start_after = |at: usize| calls[at..].iter().position(|&b| b == b'\n').expect("a line") + at + 1;
    let line_of = |at: usize| calls[..at].iter().filter(|&&b| b == b'\n').count() + 1;
    // `count` empty lines (CRLF) from the first line start past `at`,
    // across the block that starts at 2 MiB: the file's bytes and the run's start.
    let empty_lines = |at: usize, count: usize| {
        let start = line_start_after(at);
        let mut bytes = calls[..start].to_vec();
        bytes.extend(b"\r\n".repeat(count));
        bytes.extend(&calls[start..]);
        assert!(start < 2 << 20 && start + 2 * count > 2 << 20, "the run spans a block's edge");
        (bytes, start)
    };
    // 10,001 empty lines, 5,000 of them before that block.
    let (run, run_at) = empty_lines((2 << 20) - 5_000 * 2 - 200, 10_001);
    std::fs::write(&path, &run).expect("write");
    let (by_local, by_spark) = ingest_both_at(&spark, &day, &uri, &local, &remote, &split, master);
    let message = calls_error(&by_spark);
    let expected = format!("calls/part-000.csv: line {}: more than 10000 empty lines in a row", line_of(run_at));
    assert!(message.starts_with(&expected), "{message}");
    assert_eq!(calls_error(&by_local), message);

    // Set aside, a few empty lines on each side of a block's edge are
    // counted and written once, as the local engine does.
    let (few, _) = empty_lines((2 << 20) - 3 * 2 - 200, 300);
    std::fs::write(&path, &few).expect("write");
    let set_aside = ["--spark-split-mb", "1", "--on-bad-row", "set-aside"];
    let (by_local, by_spark) = ingest_both_at(&spark, &day, &uri, &local, &remote, &set_aside, master);
    ok(&by_spark);
    assert!(ok(&by_local).contains("set aside      300"), "{}", ok(&by_local));
    assert_same_stores(&spark, &local, &remote, &accounts);

    // A bad value in the last block.
    let bad_at = line_start_after(calls.len() - 1000);
    let end = bad_at + calls[bad_at..].iter().position(|&b| b == b'\r').expect("CRLF");
    let row = String::from_utf8(calls[bad_at..end].to_vec()).expect("utf-8");
    let fields: Vec<&str> = row.split(',').collect();
    let spoiled = row.replacen(fields[3], "not a time", 1);
    let bad = [&calls[..bad_at], spoiled.as_bytes(), &calls[end..]].concat();
    std::fs::write(&path, &bad).expect("write");
    let (by_local, by_spark) = ingest_both_at(&spark, &day, &uri, &local, &remote, &split, master);
    let message = calls_error(&by_spark);
    assert!(message.starts_with(&format!("calls/part-000.csv:{}: column", line_of(bad_at))), "{message}");
    assert!(message.contains("not a time"), "{message}");
    assert_eq!(calls_error(&by_local), message);
}

/// One master and two workers of a standalone cluster, on 127.0.0.1, each
/// in its own process group; stopped when dropped.
struct Cluster {
    processes: Vec<std::process::Child>,
    url: String,
    work: Vec<PathBuf>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let signal = |child: &std::process::Child, signal: &str| {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args([signal, "--", &group]).stderr(Stdio::null()).status();
        };
        for child in &mut self.processes {
            signal(child, "-TERM");
        }
        for child in &mut self.processes {
            let deadline = Instant::now() + Duration::from_secs(10);
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(100));
            }
            if child.try_wait().ok().flatten().is_none() {
                signal(child, "-KILL");
            }
            let _ = child.wait();
        }
    }
}

/// A free TCP port on 127.0.0.1 (released before Spark binds it).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

fn start_cluster(spark: &(PathBuf, Option<PathBuf>), dir: &Path) -> Cluster {
    let class = spark.0.join("bin/spark-class");
    let (port, ui) = (free_port(), free_port());
    let url = format!("spark://127.0.0.1:{port}");
    let mut cluster = Cluster { processes: Vec::new(), url: url.clone(), work: Vec::new() };
    let log = |name: &str| std::fs::File::create(dir.join(format!("{name}.log"))).expect("log file");
    let daemon = |args: &[&str], name: &str| {
        let mut command = Command::new(&class);
        command
            .args(args)
            .env("SPARK_HOME", &spark.0)
            .env("SPARK_LOCAL_IP", "127.0.0.1")
            .env("SPARK_LOG_DIR", dir)
            .env("SPARK_WORKER_DIR", dir)
            .env("SPARK_DAEMON_JAVA_OPTS", "-XX:TieredStopAtLevel=1")
            .stdout(log(name))
            .stderr(log(&format!("{name}.err")))
            .process_group(0);
        if let Some(python) = &spark.1 {
            command.env("PYSPARK_PYTHON", python);
        }
        command.spawn().expect("start a Spark daemon")
    };
    let (p, u) = (port.to_string(), ui.to_string());
    cluster.processes.push(daemon(
        &["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", &p, "--webui-port", &u],
        "master",
    ));
    for i in 0..2 {
        let work = dir.join(format!("worker{i}"));
        std::fs::create_dir_all(&work).expect("work dir");
        let w = free_port().to_string();
        let web = free_port().to_string();
        let args = [
            "org.apache.spark.deploy.worker.Worker",
            "--host",
            "127.0.0.1",
            "--port",
            &w,
            "--webui-port",
            &web,
            "--cores",
            "1",
            "--memory",
            "1g",
            "--work-dir",
            s(&work),
            &url,
        ];
        cluster.processes.push(daemon(&args, &format!("worker{i}")));
        cluster.work.push(work);
    }
    // Ready when both workers have registered with the master.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let registered = std::fs::read_to_string(dir.join("master.err.log")).unwrap_or_default();
        if registered.matches("Registering worker").count() >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "the cluster did not start:\n{registered}");
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster
}

#[test]
fn spark_standalone_cluster_of_two_workers_builds_the_same_store() {
    let Some(spark) = spark() else { return };
    let temp = tempfile::tempdir().expect("tempdir");
    let data = temp.path().join("data");
    generate(&spark, &data, "21", "2026-10-28", "csv.gz");
    let accounts = accounts_of(&[&data]);
    let cluster_dir = temp.path().join("cluster");
    std::fs::create_dir_all(&cluster_dir).expect("cluster dir");
    let cluster = start_cluster(&spark, &cluster_dir);
    let (local, remote) = (temp.path().join("local"), temp.path().join("spark"));
    // Executors log at Spark's default level (INFO) here, so that their
    // logs show the tasks each one ran. The job starts once both executors
    // have registered (the job is a few small tasks: one executor alone
    // could run them all before the other starts; the standalone scheduler
    // counts what it waits for against spark.cores.max).
    let conf = [
        "--spark-conf",
        "spark.executor.memory=512m",
        "--spark-conf",
        "spark.executor.cores=1",
        "--spark-conf",
        "spark.cores.max=2",
        "--spark-conf",
        "spark.scheduler.minRegisteredResourcesRatio=1.0",
        "--spark-conf",
        "spark.scheduler.maxRegisteredResourcesWaitingTime=120s",
        "--spark-conf",
        "spark.executor.extraJavaOptions=-Dtelemeter.test=cluster -XX:TieredStopAtLevel=1",
    ];
    let (_, by_spark) = ingest_both(&spark, &data, &local, &remote, &conf, &cluster.url.clone());
    ok(&by_spark);
    // Both workers ran executors of the job: each work dir holds the app's
    // folder with an executor that ran tasks.
    for work in &cluster.work {
        let apps: Vec<PathBuf> = std::fs::read_dir(work).expect("work dir").flatten().map(|e| e.path()).collect();
        assert_eq!(apps.len(), 1, "one application ran on {}: {apps:?}", work.display());
        let executors: Vec<PathBuf> =
            std::fs::read_dir(&apps[0]).expect("app dir").flatten().map(|e| e.path()).collect();
        let ran = executors
            .iter()
            .any(|e| std::fs::read_to_string(e.join("stderr")).is_ok_and(|log| log.contains("Running task")));
        assert!(ran, "no executor of {} ran a task", work.display());
    }
    // With telemeter's own executor options, whose log configuration's
    // path has a space and quotes: each executor's JVM starts from them as
    // the worker splits them (not through spark-submit's launcher, as the
    // driver's are split).
    let quoted = temp.path().join("a b's \"store\"");
    let args = [
        &["ingest", "--data", s(&data), "--store", s(&quoted), "--engine", "spark", "--spark-master", &cluster.url],
        &conf[..conf.len() - 2],
    ]
    .concat();
    ok(&run(&spark, &args));
    // Each worker's second application: its executor's log begins with
    // the command the worker ran, each word quoted, the log
    // configuration's path one word.
    for work in &cluster.work {
        let mut apps: Vec<PathBuf> = std::fs::read_dir(work).expect("work dir").flatten().map(|e| e.path()).collect();
        apps.sort();
        assert_eq!(apps.len(), 2, "two applications ran on {}: {apps:?}", work.display());
        let logs: String = std::fs::read_dir(&apps[1])
            .expect("app dir")
            .flatten()
            .filter_map(|e| std::fs::read_to_string(e.path().join("stderr")).ok())
            .collect();
        let word = format!("\"-Dlog4j2.configurationFile={}/staging/", s(&quoted));
        assert!(logs.contains(&word), "no {word} in {logs}");
    }
    drop(cluster);
    assert_same_stores(&spark, &local, &remote, &accounts);
    assert_same_stores(&spark, &local, &quoted, &accounts);
}

/// `--data` as a URI: the job lists and reads it through Hadoop's
/// `FileSystem` (here `file://`, the one scheme this machine has; `s3a://`
/// and `hdfs://` take the same path in the job), and telemeter touches
/// nothing there: the listing, the sizes, accounts.csv and the resources
/// come from the job. The store is the one the local engine builds from the
/// same folder as a path, byte for byte. Hidden and non-record files are
/// left out as locally, and a name with a space is read. A scheme Spark has
/// no filesystem for fails the job with Hadoop's message, publishing
/// nothing.
#[test]
fn spark_reads_data_at_a_uri_as_the_local_engine_reads_the_path() {
    let Some(spark) = spark() else { return };
    let master = "local[2]";
    let temp = tempfile::tempdir().expect("tempdir");
    let data = temp.path().join("exports");
    crate::common::copy_tree(&crate::common::sample_data(), &data);
    let junk = "not,a,record\n\"unclosed\n";
    put(&data, "calls/.partial/part-9.csv", junk);
    put(&data, ".staging/calls/x.csv", junk);
    put(&data, "calls/.in-flight.csv", junk);
    put(&data, "calls/notes.txt", junk);
    put(&data, "old-calls/20.csv", junk);
    put(&data, "README.md", junk);
    let part = std::fs::read_to_string(data.join("messages/2026-11/part-1.csv")).expect("part-1");
    put(&data, "messages/2026-11/part 2 (resent).csv", &part);
    let accounts = accounts_of(&[&data]);
    let (local, remote) = (temp.path().join("local"), temp.path().join("spark"));
    let by_local = run(&spark, &["ingest", "--data", s(&data), "--store", s(&local)]);
    let uri = format!("file://{}", s(&data));
    let by_spark = run(
        &spark,
        &[
            "ingest",
            "--data",
            &uri,
            "--store",
            &format!("file://{}", s(&remote)),
            "--engine",
            "spark",
            "--spark-master",
            master,
            "--spark-conf",
            "spark.sql.shuffle.partitions=4",
        ],
    );
    let (local_text, spark_text) = (ok(&by_local), ok(&by_spark));
    assert_eq!(counts(&local_text), counts(&spark_text));
    // What nothing reads is named as a local folder's is, once the job has
    // listed it.
    let warnings = |output: &Output| -> Vec<String> {
        let stderr = String::from_utf8_lossy(&output.stderr);
        stderr.lines().filter(|l| l.starts_with("warning: ignoring")).map(str::to_owned).collect()
    };
    let local_warnings = warnings(&by_local);
    assert_eq!(local_warnings.len(), 2, "{local_warnings:?}");
    assert!(local_warnings[0].contains("calls/notes.txt: not a record file"), "{local_warnings:?}");
    assert!(local_warnings[1].contains("old-calls/: not part of a data directory"), "{local_warnings:?}");
    assert_eq!(warnings(&by_spark), local_warnings);
    let resources = |text: &str| text.lines().find(|l| l.starts_with("resources")).map(str::to_owned);
    assert!(resources(&local_text).is_some_and(|l| l.contains("endpoints ")), "{local_text}");
    assert_eq!(resources(&local_text), resources(&spark_text));
    assert!(!remote.join("staging").exists(), "the Spark ingest left its staging folder");
    assert_same_stores(&spark, &local, &remote, &accounts);

    let before = std::fs::read(remote.join("manifest.json")).expect("manifest");
    let unknown = run(
        &spark,
        &[
            "ingest",
            "--data",
            "nosuchfs://bucket/exports",
            "--store",
            s(&remote),
            "--engine",
            "spark",
            "--spark-master",
            master,
        ],
    );
    assert_eq!(unknown.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    let message = stderr.lines().find(|l| l.starts_with("error:")).unwrap_or_default();
    assert!(message.contains("Spark cannot read nosuchfs://bucket/exports"), "{stderr}");
    assert!(message.contains("No FileSystem for scheme \"nosuchfs\""), "{stderr}");
    assert!(message.contains("nothing was published"), "{stderr}");
    assert_eq!(std::fs::read(remote.join("manifest.json")).expect("manifest"), before);
    assert!(!remote.join("staging").exists(), "the failed Spark ingest left its staging folder");

    // A name with ':', which Hadoop's paths cannot hold: refused, naming
    // the file, before any row is read.
    put(
        &data,
        "calls/2026-11-20T00:00.csv",
        &std::fs::read_to_string(data.join("calls/2026/11/20.csv")).expect("calls"),
    );
    let colon =
        run(&spark, &["ingest", "--data", &uri, "--store", s(&remote), "--engine", "spark", "--spark-master", master]);
    assert_eq!(colon.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&colon.stderr);
    let message = stderr.lines().find(|l| l.starts_with("error:")).unwrap_or_default();
    assert!(message.contains("calls/2026-11-20T00:00.csv: Hadoop's paths cannot hold ':'"), "{stderr}");
    assert_eq!(std::fs::read(remote.join("manifest.json")).expect("manifest"), before);
}

/// Without Spark: a URI other than `file://` given to a command that reads
/// files here fails before anything is read, saying why and what to run;
/// a `file://` URI is its path.
#[test]
fn uris_need_spark_for_data_and_a_mount_for_the_store() {
    let temp = tempfile::tempdir().expect("tempdir");
    let store = temp.path().join("store");
    let first = crate::common::telemeter(&["ingest", "--data", "s3a://exports/2026-11-20", "--store", s(&store)]);
    assert_eq!(first.code, 1);
    assert!(first.stderr.contains("'s3a://exports/2026-11-20' is a s3a:// location"), "{}", first.stderr);
    assert!(first.stderr.contains("--engine spark"), "{}", first.stderr);
    assert!(!store.exists(), "nothing was created");
    let data = crate::common::sample_data();
    let refused = crate::common::telemeter(&["ingest", "--data", s(&data), "--store", "hdfs://nn:8020/telemeter"]);
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("'hdfs://nn:8020/telemeter' is a hdfs:// location"), "{}", refused.stderr);
    assert!(refused.stderr.contains("atomic rename of manifest.json"), "{}", refused.stderr);
    crate::common::telemeter(&["ingest", "--data", &format!("file://{}", s(&data)), "--store", s(&store)]).ok();
    let query = "from_date=2026-11-01&to_date=2026-11-21&granularity=day";
    let account = accounts_of(&[&data])[0].clone();
    let by_path = crate::common::telemeter(&["summary", "--store", s(&store), "--auth-id", &account, "--query", query]);
    let store_uri = format!("file://{}", s(&store));
    let by_uri = crate::common::telemeter(&["summary", "--store", &store_uri, "--auth-id", &account, "--query", query]);
    assert_eq!(by_path.ok(), by_uri.ok());
    let remote =
        crate::common::telemeter(&["summary", "--store", "s3a://b/store", "--auth-id", &account, "--query", query]);
    assert_eq!(remote.code, 2, "a bad argument: {}", remote.stderr);
    assert!(remote.stderr.contains("'s3a://b/store' is a s3a:// location"), "{}", remote.stderr);
}

/// A store whose path holds a space and quotes: the JVMs' options name a
/// file in it, and Spark splits them at whitespace. And the settings the
/// job needs are refused from `--spark-conf` before any work.
#[test]
fn spark_ingests_into_a_store_whose_path_has_spaces_and_quotes() {
    let Some(spark) = spark() else { return };
    let temp = tempfile::tempdir().expect("tempdir");
    let data = crate::common::sample_data();
    let (local, remote) = (temp.path().join("local"), temp.path().join("a b's \"store\""));
    ingest_both(&spark, &data, &local, &remote, &[], "local[1]");
    assert_same_stores(&spark, &local, &remote, &accounts_of(&[&data]));

    let other = temp.path().join("other");
    let args = ["ingest", "--data", s(&data), "--store", s(&other), "--engine", "spark", "--spark-master", "local[1]"];
    let speculative = run(&spark, &[&args[..], &["--spark-conf", "spark.speculation=true"]].concat());
    assert_eq!(speculative.status.code(), Some(1));
    let said = String::from_utf8_lossy(&speculative.stderr);
    assert!(
        said.contains("--spark-conf spark.speculation=true: the Spark engine runs with spark.speculation=false"),
        "{said}"
    );
    assert!(!other.join("manifest.json").exists(), "nothing was published");
}

/// Corrections on both engines: a store of generated calls, then a
/// delivery that re-rates every 20th call (revision 1) and withdraws every
/// 150th, then the same delivery again (every row a duplicate of a stored
/// revision) with a late revision 0 of a re-rated call: the two engines
/// publish the same store, byte for byte, at each step.
#[test]
fn spark_applies_corrections_as_the_local_engine() {
    let Some(spark) = spark() else { return };
    let master = "local[2]";
    let temp = tempfile::tempdir().expect("tempdir");
    let base = temp.path().join("base");
    generate(&spark, &base, "31", "2026-10-28", "csv");
    let accounts = accounts_of(&[&base]);
    let (local, remote) = (temp.path().join("local"), temp.path().join("spark"));
    ingest_both(&spark, &base, &local, &remote, &[], master);
    let fix = temp.path().join("fix");
    crate::corrections::correcting_delivery(&base, &fix);
    let (by_local, _) = ingest_both(&spark, &fix, &local, &remote, &[], master);
    let out = String::from_utf8_lossy(&by_local.stdout).into_owned();
    assert!(out.contains("restated") && out.contains("withdrawn"), "{out}");
    assert_same_stores(&spark, &local, &remote, &accounts);
    // Again (every row a duplicate of a stored revision or void), with
    // late-x at revision 0 and its void at revision 1, and late-y at
    // revisions 0 and 2: rows superseded within the delivery.
    let again = temp.path().join("again");
    crate::common::copy_tree(&fix, &again);
    let mut calls: Vec<std::path::PathBuf> =
        std::fs::read_dir(base.join("calls")).expect("calls").flatten().map(|e| e.path()).collect();
    calls.sort();
    let text = std::fs::read_to_string(&calls[0]).expect("a calls file");
    let (header, row) = (text.lines().next().unwrap_or_default(), text.lines().nth(1).unwrap_or_default());
    let rest = row.split_once(',').map_or("", |(_, rest)| rest);
    put(&again, "calls/late.csv", &format!("{header},revision\nlate-x,{rest},0\nlate-y,{rest},0\nlate-y,{rest},2\n"));
    put(&again, "voids/late.csv", "record_id,kind,revision,reason\nlate-x,calls,1,late\n");
    let (by_local, _) = ingest_both(&spark, &again, &local, &remote, &[], master);
    let out = String::from_utf8_lossy(&by_local.stdout).into_owned();
    assert!(out.contains("superseded"), "{out}");
    assert_same_stores(&spark, &local, &remote, &accounts);
}

/// Where the engines could part: bad void rows are set aside first in
/// both (the local ingest reads voids before the kinds) and are the first
/// error with `fail`; a damaged gzip file is the same one-line error, not
/// a failed job; a currency change is warned of by both.
#[test]
fn spark_orders_voids_first_and_says_what_the_local_engine_says() {
    let Some(spark) = spark() else { return };
    let master = "local[2]";
    let temp = tempfile::tempdir().expect("tempdir");
    let sample = crate::common::sample_data();
    let accounts = accounts_of(&[&sample]);
    let (local, remote) = (temp.path().join("local"), temp.path().join("spark"));
    ingest_both(&spark, &sample, &local, &remote, &[], master);

    let bad = temp.path().join("bad");
    std::fs::copy(sample.join("accounts.csv"), {
        std::fs::create_dir_all(&bad).expect("folder");
        bad.join("accounts.csv")
    })
    .expect("accounts.csv");
    put(
        &bad,
        "calls/a.csv",
        &format!(
            "{}c1,MA001SHGA32ZDQYG9N8T,,2026-11-01T00:00:00Z,voice,pstn,sideways,US,60,0.01,0,4000\n",
            crate::common::CALLS_HEADER
        ),
    );
    put(&bad, "voids/v.csv", "kind,record_id,revision,reason\ncalls,c9,0,x\n");
    let (by_local, by_spark) = ingest_both(&spark, &bad, &local, &remote, &[], master);
    let said = |output: &Output| String::from_utf8_lossy(&output.stderr).lines().last().unwrap_or_default().to_owned();
    assert!(said(&by_local).contains("voids/v.csv:2: column 'revision'"), "{}", said(&by_local));
    assert_eq!(said(&by_local).replace(s(&local), ""), said(&by_spark).replace(s(&remote), ""));
    ingest_both(&spark, &bad, &local, &remote, &["--on-bad-row", "set-aside"], master);
    assert_same_stores(&spark, &local, &remote, &accounts);

    let damaged = temp.path().join("damaged");
    put(&damaged, "messages/broken.csv.gz", "garbage");
    let (by_local, by_spark) = ingest_both(&spark, &damaged, &local, &remote, &[], master);
    assert!(said(&by_local).ends_with("messages/broken.csv.gz: not a readable gzip file: invalid gzip header"));
    assert_eq!(said(&by_local).replace(s(&local), ""), said(&by_spark).replace(s(&remote), ""));

    let relabel = temp.path().join("relabel");
    let text = std::fs::read_to_string(sample.join("accounts.csv")).expect("accounts.csv");
    let changed = text.replacen(",EUR,", ",GBP,", 1);
    assert_ne!(changed, text, "sample_data has a EUR account");
    put(&relabel, "accounts.csv", &changed);
    let (by_local, by_spark) = ingest_both(&spark, &relabel, &local, &remote, &[], master);
    for output in [&by_local, &by_spark] {
        assert!(String::from_utf8_lossy(&output.stderr).contains("its currency is now GBP"));
    }
    assert_same_stores(&spark, &local, &remote, &accounts);
}

/// The driver JVM's class archive: saved by the first job, used by the
/// next; one cut on disk (which would kill the JVM with SIGBUS if mapped)
/// is set aside and saved again, and the ingest is the same.
#[test]
fn spark_saves_its_class_archive_and_replaces_a_cut_one() {
    let Some(spark) = spark() else { return };
    let temp = tempfile::tempdir().expect("tempdir");
    let cache = temp.path().join("cache");
    let folder = cache.join("telemeter").join("spark");
    let data = crate::common::sample_data();
    let ingest = |store: &str| {
        let store = temp.path().join(store);
        let args =
            ["ingest", "--data", s(&data), "--store", s(&store), "--engine", "spark", "--spark-master", "local[1]"];
        let output = telemeter(&spark).env("XDG_CACHE_HOME", &cache).args(args).output().expect("run telemeter");
        counts(&ok(&output))
    };
    let archives = || -> Vec<(String, u64)> {
        let mut found: Vec<(String, u64)> = std::fs::read_dir(&folder)
            .expect("the archive folder")
            .map(|e| e.expect("entry"))
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().expect("metadata").len()))
            .collect();
        found.sort();
        found
    };
    let first = ingest("first");
    assert!(!first.is_empty(), "the report's counts");
    let saved = archives();
    let names: Vec<&str> = saved.iter().map(|(name, _)| name.as_str()).collect();
    assert!(
        names.len() == 2 && names[0].ends_with(".jsa") && names[1] == format!("{}.sum", names[0]),
        "an archive and its sum, nothing half-saved: {saved:?}"
    );
    let (archive, bytes) = (folder.join(&saved[0].0), saved[0].1);
    assert!(bytes > 1 << 20, "{saved:?}");
    // Used as it is by the next job.
    assert_eq!(ingest("second"), first);
    assert_eq!(archives(), saved);
    // Cut: the job runs without it, and saves it again.
    let whole = std::fs::read(&archive).expect("archive");
    std::fs::write(&archive, &whole[..whole.len() / 2]).expect("cut");
    assert_eq!(ingest("third"), first);
    let again = archives();
    assert_eq!(again.iter().map(|(name, _)| name).collect::<Vec<_>>(), names, "{again:?}");
    assert!(again[0].1 > 1 << 20, "saved whole again: {again:?}");
}

/// `spark-task serve` (no Spark needed) answers each task on a line as
/// `spark-task <task>` would: the same summary and files, the same error
/// text, a line that is not a task refused, and it ends with its input.
#[test]
fn spark_task_serve_answers_each_task_as_its_own_command() {
    let dir = tempfile::tempdir().expect("tempdir");
    let calls = dir.path().join("a.csv");
    std::fs::write(&calls, old_calls("ACSERVE")).expect("write");
    let check = |out: &Path| -> Vec<String> {
        ["check", "--kind", "calls", "--file", s(&calls), "--name", "calls/a.csv", "--source", "0", "--out", s(out)]
            .map(str::to_owned)
            .to_vec()
    };
    let alone = dir.path().join("alone");
    let served = dir.path().join("served");
    let output = Command::new(env!("CARGO_BIN_EXE_telemeter"))
        .args(["--threads", "1", "spark-task"])
        .args(check(&alone))
        .output()
        .expect("run");
    let summary = ok(&output);
    let missing = dir.path().join("missing.csv");
    let mut missing_check = check(&alone);
    missing_check[4] = s(&missing).to_owned();
    let failed = Command::new(env!("CARGO_BIN_EXE_telemeter"))
        .args(["--threads", "1", "spark-task"])
        .args(&missing_check)
        .output()
        .expect("run");
    assert!(!failed.status.success());
    let error = String::from_utf8_lossy(&failed.stderr).trim().to_owned();
    assert!(error.starts_with("error: cannot check"), "{error}");

    let lines = [
        serde_json::to_string(&check(&served)).expect("json"),
        "not a task".to_owned(),
        serde_json::to_string(&missing_check).expect("json"),
        r#"["serve"]"#.to_owned(),
        serde_json::to_string(&check(&served)).expect("json"),
    ];
    let mut child = Command::new(env!("CARGO_BIN_EXE_telemeter"))
        .args(["--threads", "1", "spark-task", "serve"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all((lines.join("\n") + "\n").as_bytes()).expect("tasks");
    }
    let output = child.wait_with_output().expect("ends with its input");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let answers: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("an answer is JSON"))
        .collect();
    assert_eq!(answers.len(), lines.len(), "one answer a task");
    let alone_summary: serde_json::Value = serde_json::from_str(summary.trim()).expect("summary");
    // The summary names the output folder: the same one, renamed.
    let same = |answer: &serde_json::Value| {
        let text = answer["summary"].to_string().replace(s(&served), s(&alone));
        serde_json::from_str::<serde_json::Value>(&text).expect("json") == alone_summary
    };
    assert!(same(&answers[0]), "{} against {alone_summary}", answers[0]);
    assert!(same(&answers[4]), "a task after failures: {}", answers[4]);
    assert!(answers[1]["error"].as_str().is_some_and(|e| e.contains("a task is a JSON array")), "{}", answers[1]);
    assert_eq!(answers[2]["error"].as_str(), Some(error.as_str()));
    assert!(answers[3]["error"].as_str().is_some_and(|e| e.starts_with("error: ")), "{}", answers[3]);
    for file in std::fs::read_dir(&alone).expect("alone").flatten() {
        let theirs = std::fs::read(served.join(file.file_name())).expect("served wrote the same files");
        assert_eq!(std::fs::read(file.path()).expect("read"), theirs, "{:?}", file.file_name());
    }
}

/// `spark-task serve` ends with the Python worker that started it, even
/// while its input stays open (here held by this test): a task of a killed
/// worker stops, and does not write beside the attempt Spark runs again.
#[test]
fn spark_task_serve_ends_with_the_process_that_started_it() {
    let mut worker = Command::new("sh")
        // (sh gives a background command /dev/null for input: it gets the
        // test's pipe through another descriptor.)
        .args([
            "-c",
            "exec 3<&0; \"$0\" --threads 1 spark-task serve <&3 & echo $!; exec sleep 60",
            env!("CARGO_BIN_EXE_telemeter"),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("sh");
    let mut out = std::io::BufReader::new(worker.stdout.take().expect("stdout"));
    let mut pid = String::new();
    std::io::BufRead::read_line(&mut out, &mut pid).expect("read the pid");
    let served = format!("/proc/{}", pid.trim());
    // Its answer to a line: it is serving.
    let mut input = worker.stdin.take().expect("stdin");
    std::io::Write::write_all(&mut input, b"not a task\n").expect("send a line");
    let mut answer = String::new();
    std::io::BufRead::read_line(&mut out, &mut answer).expect("read the answer");
    assert!(answer.contains("a task is a JSON array"), "{answer}");
    let running = |path: &str| {
        std::fs::read_to_string(format!("{path}/stat"))
            .map(|stat| !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'))
            .unwrap_or(false)
    };
    assert!(running(&served), "serve runs");
    worker.kill().expect("kill the worker");
    worker.wait().expect("wait");
    let killed = Instant::now();
    while running(&served) && killed.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!running(&served), "serve ended with its worker, its input still open");
    drop(input);
}

/// The processes below `root` (its children, theirs, ...), from `/proc`.
fn descendants(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // pid (comm) state ppid ...: the command may hold spaces and ')'.
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) {
            parent_of.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut at = 0;
    while at < found.len() {
        let parent = found[at];
        found.extend(parent_of.iter().filter(|(_, ppid)| *ppid == parent).map(|(pid, _)| *pid));
        at += 1;
    }
    found.split_off(1)
}

/// `spark-task serve` processes killed while the job runs: Spark runs
/// their tasks again (`local[2,4]`: four attempts a task) in new ones, and
/// the store is the local engine's.
#[test]
fn spark_runs_a_task_again_when_its_serve_process_dies() {
    let Some(spark) = spark() else { return };
    let temp = tempfile::tempdir().expect("tempdir");
    let day = temp.path().join("day");
    generate_calls(&spark, &day, "31", "2026-10-28", "csv", "24000", "4");
    let accounts = accounts_of(&[&day]);
    let (local, remote) = (temp.path().join("local"), temp.path().join("spark"));
    ok(&run(&spark, &["ingest", "--data", s(&day), "--store", s(&local)]));
    let (out, err) = (temp.path().join("out"), temp.path().join("err"));
    let mut child = telemeter(&spark)
        .args(["ingest", "--data", s(&day), "--store", s(&remote), "--engine", "spark", "--spark-master", "local[2,4]"])
        .stdout(std::fs::File::create(&out).expect("out"))
        .stderr(std::fs::File::create(&err).expect("err"))
        .spawn()
        .expect("spawn");
    // A task whose process died fails with this, and runs again.
    let lost = "it stopped (status";
    let said = || std::fs::read_to_string(&err).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(180);
    // At most three kills: even all in one task leave it a fourth attempt.
    let mut killed = 0;
    while killed < 3 && !said().contains(lost) && Instant::now() < deadline && child.try_wait().expect("wait").is_none()
    {
        for pid in descendants(child.id()) {
            let command = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let words: Vec<&[u8]> = command.split(|&b| b == 0).collect();
            if killed < 3 && words.windows(2).any(|w| w == [&b"spark-task"[..], &b"serve"[..]]) {
                let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
                killed += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = child.wait().expect("ends");
    let said = said();
    assert!(said.contains(lost), "no task lost its serve process ({killed} killed):\n{said}");
    assert!(status.success(), "the ingest failed after {killed} serve processes were killed:\n{said}");
    let text = std::fs::read_to_string(&out).expect("out");
    assert!(text.contains("published generation 1"), "{text}");
    assert_same_stores(&spark, &local, &remote, &accounts);
}
