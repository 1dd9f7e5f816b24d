//! Differential test: the `telemeter` binary against an independent reference
//! implementation of the Usage Summary contract (`tools/reference/`, Python,
//! written from the specs, not from this crate).
//!
//! For each seed, `gen_random.py` writes a small random data set (DST days,
//! month ends, duplicates in other textual forms, gz, quoting, ...) and a list
//! of random requests; every request runs through
//! `telemeter summary --all-pages`, and `usage_summary.py compare` checks the
//! concatenated `usage` of all pages, page-1 `meta` (totals, currency, window,
//! time zone), `other_charges`, the paging structure, and the 400s.
//!
//! Knobs: `TELEMETER_DIFF_SEEDS` (`N` = seeds 1..=N, or `A..B`, or a single
//! `=S`), `TELEMETER_DIFF_QUERIES` (requests per seed).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const DEFAULT_SEEDS: u64 = 16;
const DEFAULT_QUERIES: u64 = 30;

fn reference_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tools").join("reference")
}

/// Runs python3; fails with a clear message when it is not installed.
fn python(args: &[&std::ffi::OsStr]) -> Output {
    match Command::new("python3").args(args).output() {
        Ok(output) => output,
        Err(e) => panic!(
            "the differential test needs python3 (3.11+, standard library only) on PATH to run \
             tools/reference/*.py, and starting it failed: {e}"
        ),
    }
}

fn env_u64(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The seeds to run, from `TELEMETER_DIFF_SEEDS` or the default.
fn seeds() -> Vec<u64> {
    let Some(text) = env_u64("TELEMETER_DIFF_SEEDS") else { return (1..=DEFAULT_SEEDS).collect() };
    if let Some(single) = text.strip_prefix('=') {
        return vec![single.trim().parse().expect("TELEMETER_DIFF_SEEDS=<=S>")];
    }
    if let Some((a, b)) = text.split_once("..") {
        let a: u64 = a.trim().parse().expect("TELEMETER_DIFF_SEEDS=<A..B>");
        let b: u64 = b.trim().parse().expect("TELEMETER_DIFF_SEEDS=<A..B>");
        return (a..=b).collect();
    }
    (1..=text.trim().parse::<u64>().expect("TELEMETER_DIFF_SEEDS=<N>")).collect()
}

fn queries_per_seed() -> u64 {
    env_u64("TELEMETER_DIFF_QUERIES").map_or(DEFAULT_QUERIES, |v| v.trim().parse().expect("TELEMETER_DIFF_QUERIES"))
}

/// One seed: generate, run every request through the binary, compare.
/// `Err` carries the comparison report.
fn run_seed(seed: u64, count: u64, scale: u64) -> Result<String, String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let cases = dir.path().join("cases.jsonl");
    let actual = dir.path().join("actual.jsonl");
    let reference = reference_dir();

    let seed_text = seed.to_string();
    let count_text = count.to_string();
    let scale_text = scale.to_string();
    let generated = python(&[
        reference.join("gen_random.py").as_os_str(),
        "--seed".as_ref(),
        seed_text.as_ref(),
        "--out".as_ref(),
        data.as_os_str(),
        "--queries".as_ref(),
        cases.as_os_str(),
        "--count".as_ref(),
        count_text.as_ref(),
        "--scale".as_ref(),
        scale_text.as_ref(),
    ]);
    if !generated.status.success() {
        return Err(format!("gen_random.py failed: {}", String::from_utf8_lossy(&generated.stderr)));
    }

    let mut lines = String::new();
    for line in std::fs::read_to_string(&cases).expect("cases file").lines() {
        let case: serde_json::Value = serde_json::from_str(line).expect("case is JSON");
        let text = |key: &str| case[key].as_str().expect("case field").to_owned();
        let output = Command::new(env!("CARGO_BIN_EXE_telemeter"))
            .args(["summary", "--all-pages", "--data"])
            .arg(&data)
            .args(["--auth-id", &text("auth_id"), "--query", &text("query"), "--now", &text("now")])
            .env_remove("TELEMETER_TOKEN_KEY")
            .output()
            .expect("run telemeter");
        let record = serde_json::json!({
            "exit": output.status.code().unwrap_or(-1),
            "stdout": String::from_utf8_lossy(&output.stdout),
            "stderr": String::from_utf8_lossy(&output.stderr),
        });
        lines.push_str(&record.to_string());
        lines.push('\n');
    }
    std::fs::write(&actual, lines).expect("write actual");

    let label = format!("seed {seed} scale {scale}");
    let compared = python(&[
        reference.join("usage_summary.py").as_os_str(),
        "compare".as_ref(),
        "--data".as_ref(),
        data.as_os_str(),
        "--cases".as_ref(),
        cases.as_os_str(),
        "--actual".as_ref(),
        actual.as_os_str(),
        "--label".as_ref(),
        label.as_ref(),
    ]);
    let report = format!("{}{}", String::from_utf8_lossy(&compared.stdout), String::from_utf8_lossy(&compared.stderr));
    if compared.status.success() {
        Ok(report)
    } else {
        Err(format!(
            "{report}\nreproduce: python3 tools/reference/gen_random.py --seed {seed} --scale {scale} --out /tmp/d{seed} \
             --queries /tmp/d{seed}.jsonl --count {count}; then run the case above with \
             `telemeter summary --all-pages --data /tmp/d{seed} ...` and \
             `python3 tools/reference/usage_summary.py summary --data /tmp/d{seed} ...`"
        ))
    }
}

#[test]
fn summary_agrees_with_the_reference_implementation() {
    let started = Instant::now();
    let count = queries_per_seed();
    let mut failures = Vec::new();
    for seed in seeds() {
        match run_seed(seed, count, 1) {
            Ok(report) => eprint!("{report}"),
            Err(report) => failures.push(report),
        }
    }
    eprintln!("differential: {:.1} s", started.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "telemeter disagrees with tools/reference:\n\n{}", failures.join("\n\n"));
}

#[test]
fn large_files_agree_with_the_reference_implementation() {
    // Files above the engine's 4 MiB chunk size are parsed in parallel chunks;
    // quoted fields with newlines must not confuse the split.
    let started = Instant::now();
    if let Err(report) = run_seed(1_000_003, 6, 400) {
        panic!("telemeter disagrees with tools/reference on large files:\n\n{report}");
    }
    eprintln!("differential (large files): {:.1} s", started.elapsed().as_secs_f64());
}

#[test]
fn reference_and_engine_agree_on_duplicates() {
    // The reference must itself follow records.md, or agreeing with it means little.
    let dir = tempfile::tempdir().expect("temp dir");
    let calls = dir.path().join("calls");
    std::fs::create_dir_all(&calls).expect("mkdir");
    let header = "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,\
                  surcharge,hangup_cause\n";
    std::fs::write(
        calls.join("a.csv"),
        format!("{header}c1,MA1,,2026-03-08T06:59:59Z,voice,pstn,outbound,US,60,0.5,0,\n"),
    )
    .expect("write");
    // Same content in other textual forms: counted once.
    std::fs::write(
        calls.join("b.csv"),
        format!("{header}c1,MA1,,2026-03-08 01:59:59-05:00,voice,pstn,outbound,US,60.0,0.50,0.000,\n"),
    )
    .expect("write");
    let summary = |data: &Path| {
        python(&[
            reference_dir().join("usage_summary.py").as_os_str(),
            "summary".as_ref(),
            "--data".as_ref(),
            data.as_os_str(),
            "--auth-id".as_ref(),
            "MA1".as_ref(),
            "--query".as_ref(),
            "from_date=2026-03-08&to_date=2026-03-09".as_ref(),
        ])
    };
    let engine = |data: &Path| {
        Command::new(env!("CARGO_BIN_EXE_telemeter"))
            .args(["summary", "--data"])
            .arg(data)
            .args(["--auth-id", "MA1", "--query", "from_date=2026-03-08&to_date=2026-03-09"])
            .output()
            .expect("run telemeter")
    };
    let same = summary(dir.path());
    assert!(same.status.success(), "{}", String::from_utf8_lossy(&same.stderr));
    assert!(String::from_utf8_lossy(&same.stdout).contains("\"total_spend\": 0.5,"));
    let same = engine(dir.path());
    assert!(same.status.success(), "{}", String::from_utf8_lossy(&same.stderr));
    assert!(String::from_utf8_lossy(&same.stdout).contains("\"total_spend\":0.5,"));
    // Different content: a conflict.
    std::fs::write(
        calls.join("c.csv"),
        format!("{header}c1,MA1,,2026-03-08T06:59:59Z,voice,pstn,outbound,US,60,0.6,0,\n"),
    )
    .expect("write");
    let conflict = summary(dir.path());
    assert!(!conflict.status.success());
    assert!(String::from_utf8_lossy(&conflict.stderr).contains("conflict"));
    let conflict = engine(dir.path());
    assert_eq!(conflict.status.code(), Some(1), "{}", String::from_utf8_lossy(&conflict.stderr));
}
