//! Inputs at their limits, run by the real binary on real files: a file
//! truncated or grown while a command reads it, a compressed file that
//! expands to one endless line or to endless empty lines, the commands
//! under a 1 GiB address-space limit, FIFOs and sockets in a record
//! folder, and over-long or off-calendar values.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::CALLS_HEADER;
use crate::common::{self, sample_data, NOW};

/// A calls file of `rows` good rows, ids starting at `first`.
fn calls(first: usize, rows: usize, header: bool) -> Vec<u8> {
    let mut text = String::with_capacity(rows * 90 + CALLS_HEADER.len());
    if header {
        text.push_str(CALLS_HEADER);
    }
    for i in first..first + rows {
        text.push_str(&format!(
            "c{i},MA001SHGA32ZDQYG9N8T,,2026-11-20T{:02}:{:02}:01Z,voice,pstn,outbound,US,60,0.0170,0.002,4000\n",
            i / 60 % 24,
            i % 60
        ));
    }
    text.into_bytes()
}

fn s(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// Whether process `pid` has the file `path` open.
fn has_open(pid: u32, path: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return false };
    entries.flatten().any(|entry| std::fs::read_link(entry.path()).is_ok_and(|target| target == path))
}

/// The outcome of a child run to its end: exit code (`None` when killed
/// by a signal) and standard error.
fn finish(child: Child) -> (Option<i32>, String) {
    let output = child.wait_with_output().expect("wait");
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Runs `args` over a data folder whose file `name` (written by `fill`)
/// is changed by `change` as soon as the run has it open, until a run sees
/// the change while it reads (a run that finished reading first, or that
/// was too slow to open the file, is tried again), for at most two
/// minutes. Every run ends with an exit code, never a signal; the run that
/// saw the change fails naming the file.
fn changed_under_a_read(
    name: &str,
    fill: &dyn Fn(&Path),
    args: &dyn Fn(&Path, &Path) -> Vec<String>,
    change: &dyn Fn(&Path),
) {
    let dir = common::temp_dir();
    let data = dir.path().join("data");
    let big = common::write(&data, name, b"");
    let big = big.canonicalize().expect("a path");
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut attempts = 0;
    loop {
        attempts += 1;
        fill(&big);
        let store = dir.path().join(format!("store{attempts}"));
        let mut command = common::command();
        command.args(args(&data, &store)).stdout(Stdio::null()).stderr(Stdio::piped());
        let child = command.spawn().expect("start telemeter");
        while !has_open(child.id(), &big) && Instant::now() < deadline {
            std::thread::yield_now();
        }
        change(&big);
        let (code, stderr) = finish(child);
        assert!(code.is_some(), "killed by a signal (attempt {attempts}):\n{stderr}");
        if code == Some(1) && stderr.contains("changed while being read") {
            assert!(stderr.contains(&format!("{name}: changed while being read")), "{stderr}");
            assert!(!stderr.contains("panicked"), "{stderr}");
            return;
        }
        assert_eq!(code, Some(0), "attempt {attempts}: {stderr}");
        assert!(Instant::now() < deadline, "no run saw the file change in {attempts} attempts");
    }
}

/// `calls/big.csv`, 700,000 good rows.
fn big_csv(path: &Path) {
    std::fs::write(path, calls(0, 700_000, true)).expect("write");
}

/// A copy of the calls Parquet file at `template` ([`big_parquet`]).
fn copy_of(template: &Path) -> impl Fn(&Path) + '_ {
    move |path| {
        std::fs::copy(template, path).expect("copy");
    }
}

/// A calls Parquet file of 1,000 good rows and a column no reader reads,
/// of 1,000 values of 192 KiB each, stored uncompressed: a file long enough
/// to read that a change lands inside the read.
fn big_parquet(path: &Path) {
    use polars::prelude::{Column, DataFrame, IntoColumn, NamedFrom, ParquetCompression, ParquetWriter, Series};
    let text = String::from_utf8(calls(0, 1000, true)).expect("text");
    let mut lines = text.lines();
    let names: Vec<&str> = lines.next().expect("a header").split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|line| line.split(',').collect()).collect();
    let mut columns: Vec<Column> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let cells: Vec<Option<&str>> = rows.iter().map(|row| Some(row[i]).filter(|c| !c.is_empty())).collect();
            Series::new((*name).into(), cells).into_column()
        })
        .collect();
    let padding: Vec<String> = (0..rows.len()).map(|i| format!("{i:08}{}", "x".repeat(192 << 10))).collect();
    columns.push(Series::new("padding".into(), padding).into_column());
    let mut frame = DataFrame::new(rows.len(), columns).expect("a frame");
    std::fs::create_dir_all(path.parent().expect("a folder")).expect("create folders");
    let file = std::fs::File::create(path).expect("create a Parquet file");
    ParquetWriter::new(file).with_compression(ParquetCompression::Uncompressed).finish(&mut frame).expect("write");
}

fn ingest_args(data: &Path, store: &Path) -> Vec<String> {
    ["ingest", "--quiet", "--data", s(data), "--store", s(store)].map(String::from).to_vec()
}

fn summary_args(data: &Path, _: &Path) -> Vec<String> {
    [
        "summary",
        "--data",
        s(data),
        "--auth-id",
        "MA001SHGA32ZDQYG9N8T",
        "--query",
        "from_date=2026-11-01&to_date=2026-11-30",
        "--now",
        NOW,
    ]
    .map(String::from)
    .to_vec()
}

fn truncate(path: &Path) {
    let file = std::fs::OpenOptions::new().write(true).open(path).expect("open");
    file.set_len(4096).expect("truncate");
}

fn grow(path: &Path) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).expect("open");
    file.write_all(&calls(10_000_000, 1000, false)).expect("append");
}

#[test]
fn a_file_truncated_while_ingested_or_summed_is_an_error_naming_it() {
    changed_under_a_read("calls/big.csv", &big_csv, &ingest_args, &truncate);
    changed_under_a_read("calls/big.csv", &big_csv, &summary_args, &truncate);
}

#[test]
fn a_file_grown_while_ingested_or_summed_is_an_error_naming_it() {
    changed_under_a_read("calls/big.csv", &big_csv, &ingest_args, &grow);
    changed_under_a_read("calls/big.csv", &big_csv, &summary_args, &grow);
}

/// A Parquet input is read whole before it is parsed: truncated or grown
/// during that read, it is the same error naming it, never a signal.
#[test]
fn a_parquet_file_truncated_or_grown_while_read_is_an_error_naming_it() {
    let dir = common::temp_dir();
    let template = dir.path().join("big.parquet");
    big_parquet(&template);
    let fill = copy_of(&template);
    changed_under_a_read("calls/big.parquet", &fill, &ingest_args, &truncate);
    changed_under_a_read("calls/big.parquet", &fill, &summary_args, &truncate);
    changed_under_a_read("calls/big.parquet", &fill, &summary_args, &grow);
}

/// `bytes` gzip-compressed, the member repeated until the file is past
/// `size` bytes: a file that decodes to `bytes` repeated, made without
/// compressing every copy.
fn gzip_members(bytes: &[u8], size: usize) -> Vec<u8> {
    let member = common::gzip(bytes);
    member.repeat(size / member.len() + 1)
}

/// Each of `runs` under each address-space limit of `mibs` (MiB), the
/// folders `clear` removed before every run: the runs that failed, each
/// held to exit 1 (a run that succeeds is left out).
fn failures_under<'a>(
    mibs: impl IntoIterator<Item = u64>,
    runs: &[&'a [&'a str]],
    clear: &[&Path],
) -> Vec<(u64, &'a [&'a str], common::Run)> {
    let mut failed = Vec::new();
    for mib in mibs {
        for &args in runs {
            for folder in clear {
                let _ = std::fs::remove_dir_all(folder);
            }
            let run = limited(mib << 10, args);
            if run.code != 0 {
                assert_eq!(run.code, 1, "{mib} MiB, {args:?}: {}", run.stderr);
                failed.push((mib, args, run));
            }
        }
    }
    failed
}

/// Runs the binary with `args` under an address-space limit of `kib`
/// KiB (`ulimit -v`).
fn limited(kib: u64, args: &[&str]) -> common::Run {
    let mut command = common::command();
    command.env("TELEMETER_TOKEN_KEY", common::TOKEN_KEY);
    let mut shell = Command::new("sh");
    shell.arg("-c").arg(format!("ulimit -v {kib} && exec \"$0\" \"$@\"")).arg(common::binary()).args(args);
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    common::run_command(&[], shell)
}

const ONE_GIB_KIB: u64 = 1 << 20;

/// The smallest address-space limit, in MiB and a multiple of 4, that the
/// binary loads and prints its version under: it grows with the build's
/// code, so the limit tests start from it rather than from a number.
fn load_floor() -> u64 {
    (16..512)
        .step_by(4)
        .find(|&mib| {
            let script = format!("ulimit -v {} && exec \"$0\" --version", mib << 10);
            let probe = Command::new("sh").arg("-c").arg(script).arg(common::binary()).output();
            probe.is_ok_and(|o| o.status.success())
        })
        .expect("the binary runs under 512 MiB")
}

/// A 10 MB gzip file of one endless line, and one of endless empty lines
/// (set aside, one bad row each, were they read on), each fail at once
/// with the limit that stops them, in bounded memory: under a 1 GiB
/// address-space limit.
#[test]
fn compressed_files_of_an_endless_line_or_endless_empty_lines_fail_in_bounded_memory() {
    let dir = common::temp_dir();
    let cases = [
        ("line", b"x".repeat(16 << 20), "calls/bomb.csv.gz: line 2: longer than 1048576 bytes"),
        ("empty", b"\n".repeat(16 << 20), "calls/bomb.csv.gz: line 2: more than 10000 empty lines in a row"),
    ];
    for (name, repeated, message) in cases {
        let data = dir.path().join(name);
        let mut bytes = common::gzip(CALLS_HEADER.as_bytes());
        bytes.extend(gzip_members(&repeated, 10 << 20));
        assert!(bytes.len() > 10 << 20, "{}", bytes.len());
        common::write(&data, "calls/bomb.csv.gz", &bytes);
        let store = dir.path().join(format!("store-{name}"));
        let out = dir.path().join(format!("out-{name}"));
        let runs = [
            limited(ONE_GIB_KIB, &["ingest", "--data", s(&data), "--store", s(&store), "--on-bad-row", "set-aside"]),
            limited(ONE_GIB_KIB, &["summary", "--data", s(&data), "--auth-id", "MA001SHGA32ZDQYG9N8T", "--now", NOW]),
            limited(
                ONE_GIB_KIB,
                &["report", "--quiet", "--data", s(&data), "--out", s(&out), "--on-bad-row", "set-aside", "--now", NOW],
            ),
        ];
        for run in runs {
            assert_eq!(run.code, 1, "{name}: {}", run.stderr);
            assert!(run.stderr.contains(message), "{name}: {}", run.stderr);
        }
    }
}

/// `ingest`, `summary` and `report` run under a 1 GiB address-space limit;
/// under smaller and smaller limits they still end with one line saying
/// what failed (out of memory, or the threads or a folder that could not
/// be had), never an abort or a panic, and some limit is met by an
/// allocation that fails.
///
/// Which allocation meets a limit first depends on the threads' timing and
/// the build's size, so below 512 and 256 MiB the limits step down 4 MiB
/// at a time, from 64 MiB above the smallest one the binary loads under to
/// that one, until one is met by a failed allocation.
#[test]
fn the_commands_run_under_a_one_gib_address_space_limit_and_say_when_they_cannot() {
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    let out = dir.path().join("out");
    let data = sample_data();
    let query = "from_date=2026-11-14&to_date=2026-11-21";
    let ingest = ["ingest", "--quiet", "--data", s(&data), "--store", s(&store)];
    let runs: [&[&str]; 4] = [
        &ingest,
        &["summary", "--data", s(&data), "--auth-id", "MA001SHGA32ZDQYG9N8T", "--query", query, "--now", NOW],
        &["summary", "--store", s(&store), "--auth-id", "MA001SHGA32ZDQYG9N8T", "--query", query, "--now", NOW],
        &["report", "--quiet", "--data", s(&data), "--out", s(&out), "--query", query, "--now", NOW],
    ];
    for args in runs {
        let run = limited(ONE_GIB_KIB, args);
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr);
    }
    let plain = common::summary(&data, "MA001SHGA32ZDQYG9N8T", query, &[]);
    assert_eq!(limited(ONE_GIB_KIB, runs[1]).stdout, plain.ok(), "the same answer under the limit");
    let mut out_of_memory = 0;
    // The ingests below go into a store of their own, new each time (a
    // second ingest of the same data finds only duplicates, and needs
    // little). A thread that cannot get its signal stack is reported in the
    // same one line (cli::memory).
    let fresh = dir.path().join("fresh");
    let fresh_ingest = ["ingest", "--quiet", "--data", s(&data), "--store", s(&fresh)];
    let lowered: [&[&str]; 4] = [&fresh_ingest, runs[1], runs[2], runs[3]];
    let floor = load_floor();
    let limits = [512, 256].into_iter().chain((floor..=floor + 64).rev().step_by(4));
    for limit in limits {
        for (mib, args, run) in failures_under([limit], &lowered, &[&out, &fresh]) {
            assert_eq!(run.stderr.lines().count(), 1, "{mib} MiB, {args:?}: {}", run.stderr);
            assert!(run.stderr.starts_with("error: "), "{mib} MiB, {args:?}: {}", run.stderr);
            if run.stderr.starts_with("error: out of memory: cannot allocate ") {
                out_of_memory += 1;
            }
        }
        if out_of_memory > 0 {
            break;
        }
    }
    assert!(out_of_memory > 0, "no limit down to {floor} MiB met a failed allocation");
}

/// Under address-space limits too small for every thread's stack,
/// `ingest`, `summary` and `report` (with their progress threads) either
/// succeed or end with exit 1 and an `error:` line last, never a panic or
/// a signal (`common::run_command` checks both); some limit is met by a
/// thread that cannot start, and that is what the error says.
#[test]
fn a_thread_that_cannot_start_is_an_error_not_a_panic() {
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    let out = dir.path().join("out");
    let fresh = dir.path().join("fresh");
    let data = sample_data();
    common::telemeter(&["ingest", "--quiet", "--data", s(&data), "--store", s(&store)]).ok();
    let query = "from_date=2026-11-14&to_date=2026-11-21";
    let runs: [&[&str]; 3] = [
        &["ingest", "--data", s(&data), "--store", s(&fresh)],
        &["summary", "--store", s(&store), "--auth-id", "MA001SHGA32ZDQYG9N8T", "--query", query, "--now", NOW],
        &["report", "--store", s(&store), "--out", s(&out), "--query", query, "--now", NOW],
    ];
    // From the smallest limit the binary loads under to 36 MiB above it:
    // the thread stacks' range.
    let floor = load_floor();
    let mut thread_errors = 0;
    for (mib, args, run) in failures_under((floor..=floor + 36).step_by(4), &runs, &[&out, &fresh]) {
        let last = run.stderr.lines().last().unwrap_or_default();
        assert!(last.starts_with("error: "), "{mib} MiB, {args:?}: {}", run.stderr);
        if last.contains("cannot start") {
            assert!(last.contains("ulimit -v"), "{mib} MiB, {args:?}: {last}");
            thread_errors += 1;
        }
    }
    assert!(thread_errors > 0, "no limit met a thread that could not start");
}

/// A FIFO or a socket in a record folder, even one named like a record
/// file, is never opened (a FIFO would block the run): it is named in a
/// warning, and the run goes on as without it.
#[test]
fn a_fifo_or_socket_in_a_record_folder_is_named_and_skipped() {
    let dir = common::temp_dir();
    let data = dir.path().join("data");
    common::copy_tree(&sample_data(), &data);
    let fifo = data.join("calls/late.csv");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let _socket = std::os::unix::net::UnixListener::bind(data.join("messages/feed.csv")).expect("bind");
    let query = "from_date=2026-11-14&to_date=2026-11-21";
    let run = common::summary(&data, "MA001SHGA32ZDQYG9N8T", query, &[]);
    let plain = common::summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", query, &[]);
    assert_eq!(run.ok(), plain.ok());
    let warnings: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with("warning: ")).collect();
    let what = "not a regular file (a FIFO, socket or device); record files must be regular files";
    assert_eq!(
        warnings,
        [format!("warning: ignoring calls/late.csv: {what}"), format!("warning: ignoring messages/feed.csv: {what}")]
    );
    let store = dir.path().join("store");
    let ingest = common::telemeter(&["ingest", "--data", s(&data), "--store", s(&store)]);
    ingest.ok();
    assert!(ingest.stderr.contains("warning: ignoring calls/late.csv: not a regular file"), "{}", ingest.stderr);
}

/// Each value the contract refuses for a reason of its own says that
/// reason: a day off the calendar, a leap second, ten fractional digits,
/// and a text column past its limit (its value shown cut).
#[test]
fn off_calendar_times_and_over_long_texts_say_why() {
    let dir = common::temp_dir();
    let cases = [
        ("2026-02-29T10:00:00Z", "4000", "'2026-02-29T10:00:00Z' is not a calendar date (February 2026 has 28 days)"),
        ("2026-12-31T23:59:60Z", "4000", "'2026-12-31T23:59:60Z' has second 60 (a leap second)"),
        (
            "2026-11-20T10:00:00.1234567890Z",
            "4000",
            "'2026-11-20T10:00:00.1234567890Z' has 10 fractional digits: at most 9 (nanoseconds) are accepted",
        ),
    ];
    let long_cause = "4".repeat(300_000);
    let long = [("2026-11-20T10:00:00Z", long_cause.as_str(), "column 'hangup_cause': '4444")];
    for (n, (timestamp, cause, message)) in cases.iter().chain(&long).enumerate() {
        let data = dir.path().join(format!("data{n}"));
        let row = format!("c1,MA001SHGA32ZDQYG9N8T,,{timestamp},voice,pstn,outbound,US,60,0.0170,0.002,{cause}\n");
        common::write(&data, "calls/a.csv", format!("{CALLS_HEADER}{row}"));
        let run = common::summary(&data, "MA001SHGA32ZDQYG9N8T", "", &[]);
        assert_eq!(run.code, 1, "{}", run.stderr);
        assert!(run.stderr.contains("calls/a.csv:2: column '"), "{}", run.stderr);
        assert!(run.stderr.contains(message), "{}", run.stderr);
        if cause.len() > 1000 {
            assert!(run.stderr.contains("... (300000 bytes in all)' is longer than 1024 bytes"), "{}", run.stderr);
            assert!(run.stderr.len() < 1000, "the value is shown cut: {} bytes", run.stderr.len());
        }
    }
}

/// A Parquet file DuckDB wrote, its `record_id` of DuckDB's `UUID` type
/// (16 bytes, logical type UUID): the ids read as their text, as DuckDB
/// and pyarrow show them. Written by DuckDB 2.0.1: `COPY (SELECT
/// '4e6f1c2a-…'::uuid AS record_id, …) TO '….parquet' (FORMAT parquet)`.
#[test]
fn a_duckdb_uuid_column_is_read_as_its_text() {
    let data = common::root().join("tests/inputs/duckdb_uuid");
    let dir = common::temp_dir();
    let store = dir.path().join("store");
    common::telemeter(&["ingest", "--data", s(&data), "--store", s(&store)]).ok();
    let shown = common::telemeter(&[
        "history",
        "--store",
        s(&store),
        "--kind",
        "calls",
        "--record-id",
        "4e6f1c2a-9b1d-4c3e-8f7a-0123456789ab",
    ]);
    assert!(shown.ok().contains("from calls/2026-11-20.parquet line 1"), "{}", shown.stdout);
    let query = "granularity=day&from_date=2026-11-20&to_date=2026-11-21";
    let answer = common::summary(&data, "MA001", query, &[]);
    assert!(answer.ok().contains("\"total_spend\":0.07"), "{}", answer.stdout);
}
