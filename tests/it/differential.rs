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
//! The engine reads a copy of the data set in which some files were turned
//! into `.csv.zst` or Parquet (string columns or natural types), so that
//! every input form of records.md is compared; the reference (standard
//! library only) reads the CSV / gzip originals.
//!
//! Knobs: `TELEMETER_DIFF_SEEDS` (`N` = seeds 1..=N, `A..B`, or a list `A,B,C`;
//! one seed: `42..42`), `TELEMETER_DIFF_QUERIES` (requests per seed).

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
    // No __pycache__ beside the scripts in the source tree.
    match Command::new("python3").args(args).env("PYTHONDONTWRITEBYTECODE", "1").output() {
        Ok(output) => output,
        Err(e) => panic!(
            "the differential test needs python3 (3.11+, standard library only) on PATH to run \
             tools/reference/*.py, and starting it failed: {e}"
        ),
    }
}

fn env_text(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The seeds to run, from `TELEMETER_DIFF_SEEDS` or the default.
fn seeds() -> Vec<u64> {
    let Some(text) = env_text("TELEMETER_DIFF_SEEDS") else { return (1..=DEFAULT_SEEDS).collect() };
    if text.contains(',') {
        return text.split(',').map(|s| s.trim().parse().expect("TELEMETER_DIFF_SEEDS=<A,B,C>")).collect();
    }
    if let Some((a, b)) = text.split_once("..") {
        let a: u64 = a.trim().parse().expect("TELEMETER_DIFF_SEEDS=<A..B>");
        let b: u64 = b.trim().parse().expect("TELEMETER_DIFF_SEEDS=<A..B>");
        return (a..=b).collect();
    }
    (1..=text.trim().parse::<u64>().expect("TELEMETER_DIFF_SEEDS=<N>")).collect()
}

fn queries_per_seed() -> u64 {
    env_text("TELEMETER_DIFF_QUERIES").map_or(DEFAULT_QUERIES, |v| v.trim().parse().expect("TELEMETER_DIFF_QUERIES"))
}

/// One seed: generate, run every request through the binary, compare.
/// `Err` carries the comparison report.
/// `other_forms`: the engine reads `.csv.zst` and Parquet copies of some files.
fn run_seed(seed: u64, count: u64, scale: u64, other_forms: bool) -> Result<String, String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let engine_data = dir.path().join("engine-data");
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

    let mut forms = String::new();
    let engine_data = if other_forms {
        let [same, zst, text, typed] = engine_copy(&data, &engine_data, seed);
        forms = format!(
            " [engine input: {same} files as generated, {zst} .csv.zst, {text} Parquet (strings), \
                          {typed} Parquet (typed)]"
        );
        engine_data
    } else {
        data.clone()
    };

    let mut lines = String::new();
    for (index, line) in std::fs::read_to_string(&cases).expect("cases file").lines().enumerate() {
        let case: serde_json::Value = serde_json::from_str(line).expect("case is JSON");
        let text = |key: &str| case[key].as_str().expect("case field").to_owned();
        let mut command = Command::new(env!("CARGO_BIN_EXE_telemeter"));
        // the same bytes with one thread, a few and the default
        match index % 3 {
            0 => command.env("TELEMETER_THREADS", "1"),
            1 => command.env("TELEMETER_THREADS", "3"),
            _ => command.env_remove("TELEMETER_THREADS"),
        };
        let output = command
            .args(["summary", "--all-pages", "--data"])
            .arg(&engine_data)
            .args(["--auth-id", &text("auth_id"), "--query", &text("query"), "--now", &text("now")])
            .env("TELEMETER_TOKEN_KEY", crate::common::TOKEN_KEY)
            .env("TELEMETER_STATE_DIR", crate::common::state_dir())
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

    let label = format!("seed {seed} scale {scale}{forms}");
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
        // Keep the failing data set for a look by hand.
        let engine_dir = engine_data.strip_prefix(dir.path()).map(Path::to_path_buf).unwrap_or_default();
        let kept = dir.keep();
        let (reference_data, engine_data) = (kept.join("data"), kept.join(engine_dir));
        Err(format!(
            "{report}\nkept: the generated data set {reference}, the engine's copy {engine}; rerun a case with \
             `target/debug/telemeter summary --all-pages --data {engine} --auth-id .. --query '..' --now ..` and \
             `python3 tools/reference/usage_summary.py summary --data {reference} --auth-id .. --query '..' --now ..`; \
             regenerate with `python3 tools/reference/gen_random.py --seed {seed} --scale {scale} --out DIR \
             --queries FILE --count {count}`",
            reference = reference_data.display(),
            engine = engine_data.display(),
        ))
    }
}

/// How the engine's copy of one record file is written.
#[derive(Clone, Copy, Debug)]
enum Form {
    Same,
    Zstd,
    ParquetText,
    ParquetTyped,
}

/// Copies the data set `src` to `dst`, turning about three files in four
/// into `.csv.zst` or Parquet (deterministic in the seed and the path).
/// Returns how many files of each form it wrote.
fn engine_copy(src: &Path, dst: &Path, seed: u64) -> [usize; 4] {
    let mut written = [0; 4];
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read data dir") {
            let path = entry.expect("dir entry").path();
            let relative = path.strip_prefix(src).expect("inside the data dir").to_path_buf();
            if path.is_dir() {
                std::fs::create_dir_all(dst.join(&relative)).expect("mkdir");
                stack.push(path);
                continue;
            }
            let name = relative.to_string_lossy().into_owned();
            let hash = name.bytes().fold(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3)
            });
            let form = if name == "accounts.csv" {
                Form::Same
            } else {
                [Form::Same, Form::Zstd, Form::ParquetText, Form::ParquetTyped][(hash >> 32) as usize % 4]
            };
            let raw = std::fs::read(&path).expect("read data file");
            let text = if name.ends_with(".gz") {
                let mut out = Vec::new();
                std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&raw[..]), &mut out).expect("gunzip");
                out
            } else {
                raw.clone()
            };
            let stem = name.strip_suffix(".csv.gz").or_else(|| name.strip_suffix(".csv")).expect("a CSV file");
            let target = |suffix: &str| {
                let target = dst.join(format!("{stem}{suffix}"));
                assert!(!target.exists(), "{} written twice", target.display());
                target
            };
            written[form as usize] += 1;
            match form {
                Form::Same => std::fs::write(dst.join(&relative), &raw).expect("copy"),
                Form::Zstd => {
                    std::fs::write(target(".csv.zst"), zstd::encode_all(&text[..], 3).expect("zstd")).expect("write")
                }
                Form::ParquetText => write_parquet(&text, &target(".parquet"), false),
                Form::ParquetTyped => write_parquet(&text, &target(".parquet"), true),
            }
        }
    }
    written
}

/// Writes the rows of a CSV file as Parquet: all-string columns, or natural
/// types (Datetime(ns, UTC), Decimal(38, 9), Int64, null for empty text).
fn write_parquet(csv_bytes: &[u8], target: &Path, typed: bool) {
    use polars::prelude::{
        Column, DataFrame, Int128Chunked, Int64Chunked, IntoColumn, IntoSeries, NamedFrom, ParquetWriter, Series,
        TimeUnit, TimeZone,
    };
    let mut reader = csv::Reader::from_reader(csv_bytes);
    let headers: Vec<String> = reader.headers().expect("CSV header").iter().map(str::to_owned).collect();
    let rows: Vec<Vec<String>> =
        reader.records().map(|r| r.expect("CSV row").iter().map(str::to_owned).collect()).collect();
    let mut columns = Vec::new();
    for (i, header) in headers.iter().enumerate() {
        let cells: Vec<&str> = rows.iter().map(|r| r[i].as_str()).collect();
        let column: Column = match header.as_str() {
            _ if !typed => Series::new(header.into(), cells).into_column(),
            "timestamp" => Int64Chunked::from_vec(header.into(), cells.iter().map(|t| epoch_nanos(t)).collect())
                .into_datetime(TimeUnit::Nanoseconds, Some(TimeZone::UTC))
                .into_series()
                .into_column(),
            "billed_seconds" | "amount" | "surcharge" | "duration_seconds" => {
                Int128Chunked::from_vec(header.into(), cells.iter().map(|d| decimal_nanos(d)).collect())
                    .into_decimal(38, 9)
                    .expect("decimal column")
                    .into_series()
                    .into_column()
            }
            "segments" | "units" => {
                Int64Chunked::from_vec(header.into(), cells.iter().map(|c| c.parse().expect("count")).collect())
                    .into_series()
                    .into_column()
            }
            _ => {
                let text: Vec<Option<&str>> = cells.iter().map(|c| (!c.is_empty()).then_some(*c)).collect();
                Series::new(header.into(), text).into_column()
            }
        };
        columns.push(column);
    }
    let mut frame = DataFrame::new(rows.len(), columns).expect("data frame");
    let file = std::fs::File::create(target).expect("create Parquet file");
    ParquetWriter::new(file).finish(&mut frame).expect("write Parquet");
}

/// A record timestamp (RFC 3339, `T` or space, offset optional) as Unix nanoseconds.
fn epoch_nanos(text: &str) -> i64 {
    let mut text = text.replacen(' ', "T", 1);
    if !(text.ends_with('Z') || text.get(19..).is_some_and(|tail| tail.contains(['+', '-']))) {
        text.push('Z');
    }
    chrono::DateTime::parse_from_rfc3339(&text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .timestamp_nanos_opt()
        .expect("instant in range")
}

/// A decimal string as an integer of 1e-9 units.
fn decimal_nanos(text: &str) -> i128 {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let whole: i128 = whole.parse().expect("whole part");
    let fraction: i128 = format!("{fraction:0<9}").parse().expect("fraction");
    whole * 1_000_000_000 + fraction
}

#[test]
fn summary_agrees_with_the_reference_implementation() {
    let started = Instant::now();
    let count = queries_per_seed();
    let mut failures = Vec::new();
    for seed in seeds() {
        match run_seed(seed, count, 1, true) {
            Ok(report) => eprint!("{report}"),
            Err(report) => failures.push(report),
        }
    }
    eprintln!("differential: {:.1} s", started.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "telemeter disagrees with tools/reference:\n\n{}", failures.join("\n\n"));
}

#[test]
fn large_files_agree_with_the_reference_implementation() {
    // Plain CSV files of 8-12 MB, above the engine's 4 MiB chunk size, so they
    // are parsed in parallel chunks; an extra column with quoted commas and
    // quotes must not confuse the split.
    let started = Instant::now();
    if let Err(report) = run_seed(1_000_003, 6, 400, false) {
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
