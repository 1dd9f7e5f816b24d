//! Progress on stderr through the binary: `generate`, `ingest` and `report`
//! with stderr not a terminal write plain lines (every
//! `TELEMETER_PROGRESS_EVERY` seconds; 0 here, so every tick) whose numbers
//! parse and add up, end with the elapsed time (and, for `ingest`, the
//! per-kind counts the store's manifest holds); `--quiet` prints nothing on
//! success; stdout is the same with and without progress.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::{command, run_command, sample_data, temp_dir, Run, NOW, TOKEN_KEY};

fn s(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// Runs the binary with progress lines at every tick.
fn with_progress(args: &[&str]) -> Run {
    let mut command = command();
    command.env("TELEMETER_TOKEN_KEY", TOKEN_KEY).env("TELEMETER_PROGRESS_EVERY", "0");
    let run = run_command(args, command);
    assert_eq!(run.code, 0, "telemeter {args:?}: {}", run.stderr);
    run
}

/// Rows asked of `generate` per kind, in the order of its flags.
const ROWS: [(&str, u64); 4] = [("calls", 6000), ("messages", 3000), ("transcriptions", 500), ("charges", 100)];

/// `generate` into `out` with `extra` flags.
fn generate(out: &Path, extra: &[&str]) -> Run {
    let mut args: Vec<String> =
        ["generate", "--out", s(out), "--files", "2", "--accounts", "5", "--start", "2026-08-01", "--force"]
            .map(str::to_owned)
            .to_vec();
    for (kind, n) in ROWS {
        args.extend([format!("--{kind}"), n.to_string()]);
    }
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    with_progress(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// The number before `unit` (the word after the number) in `line`, e.g.
/// `number_before(line, " records,")`.
fn number_before(line: &str, unit: &str) -> f64 {
    let at = line.find(unit).unwrap_or_else(|| panic!("no '{unit}' in: {line}"));
    let start = line[..at].rfind([' ', '(']).map_or(0, |i| i + 1);
    line[start..at]
        .parse()
        .unwrap_or_else(|e| panic!("'{}' before '{unit}' is not a number ({e}): {line}", &line[start..at]))
}

/// The number after `label` in `line` (up to the next space), e.g.
/// `number_after(line, "elapsed ")`.
fn number_after(line: &str, label: &str) -> f64 {
    let at = line.find(label).unwrap_or_else(|| panic!("no '{label}' in: {line}")) + label.len();
    let text = line[at..].split([' ', ',', '%', ')']).next().unwrap_or("");
    text.parse().unwrap_or_else(|e| panic!("'{text}' after '{label}' is not a number ({e}): {line}"))
}

/// Bytes of a human size: `31.79 MiB`, `512 B`.
fn bytes(text: &str) -> f64 {
    let (number, unit) = text.trim().split_once(' ').unwrap_or_else(|| panic!("not a size: {text}"));
    let number: f64 = number.parse().unwrap_or_else(|e| panic!("not a size: {text} ({e})"));
    let scale = match unit {
        "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        other => panic!("unit {other} in {text}"),
    };
    number * scale
}

/// The elapsed seconds of every line that shows them, in order: they never
/// go back.
fn elapsed_never_goes_back(stderr: &str) {
    let times: Vec<f64> =
        stderr.lines().filter(|l| l.contains("elapsed ")).map(|l| number_after(l, "elapsed ")).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[test]
fn generate_shows_rows_and_bytes_of_the_planned_total_then_elapsed() {
    let dir = temp_dir();
    let out = dir.path().join("data");
    let run = generate(&out, &[]);
    let planned: u64 = ROWS.iter().map(|(_, n)| n).sum();
    let prefix = "generate: writing 8 files: ";
    let lines: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with(prefix) && l.contains(" of ")).collect();
    assert!(!lines.is_empty(), "no progress line: {}", run.stderr);
    for line in &lines {
        let rows = number_before(line, " rows of ");
        assert_eq!(number_before(line, " rows (") as u64, planned, "{line}");
        assert!(rows <= planned as f64, "{line}");
        let percent = number_after(line, "rows (");
        assert!((percent - 100.0 * rows / planned as f64).abs() < 0.06, "{line}");
        number_before(line, " rows/s");
        number_after(line, "elapsed ");
    }
    elapsed_never_goes_back(&run.stderr);
    // The phase's last line: every planned row, and the bytes of the files.
    let written: u64 = walk(&out).iter().filter(|(name, _)| *name != "accounts.csv").map(|(_, b)| b.len() as u64).sum();
    let end = run.stderr.lines().find(|l| l.starts_with(prefix) && l.contains(" in ")).expect("end line");
    assert_eq!(number_before(end, " rows,") as u64, planned, "{end}");
    let size = end.trim_start_matches(prefix).split(", ").nth(1).and_then(|t| t.split(" in ").next()).expect("size");
    assert!((bytes(size) - written as f64).abs() <= 0.005 * written as f64 + 1.0, "{size} vs {written}: {end}");
    let last = run.stderr.lines().last().expect("a last line");
    assert!(last.starts_with("generate: done, elapsed ") && number_after(last, "elapsed ") >= 0.0, "{last}");

    // --quiet: nothing on stderr, the same stdout (but for the seconds) and
    // the same files.
    let quiet_out = dir.path().join("quiet");
    let quiet = generate(&quiet_out, &["--quiet"]);
    assert_eq!(quiet.stderr, "");
    let without_seconds = |stdout: &str, out: &Path| {
        let stdout = stdout.replace(s(out), "OUT");
        stdout.rsplit_once(" in ").map(|(head, _)| head.to_owned()).expect("' in N s'")
    };
    assert_eq!(without_seconds(&quiet.stdout, &quiet_out), without_seconds(&run.stdout, &out));
    assert_eq!(walk(&quiet_out), walk(&out));
}

/// Every file under `dir`: relative name and bytes.
fn walk(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn go(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                go(root, &path, out);
            } else {
                let name = path.strip_prefix(root).expect("under root").to_string_lossy().replace('\\', "/");
                out.insert(name, std::fs::read(&path).expect("read"));
            }
        }
    }
    let mut out = BTreeMap::new();
    go(dir, dir, &mut out);
    out
}

/// The per-kind counts of `ingest`'s last line: kind -> [read, used, set
/// aside, duplicates].
fn final_counts(last: &str) -> BTreeMap<String, [u64; 4]> {
    let (_, kinds) = last.split_once("s: ").unwrap_or_else(|| panic!("no counts: {last}"));
    kinds
        .split("; ")
        .map(|part| {
            let (kind, rest) = part.split_once(' ').expect("kind and counts");
            let n = |label: &str| number_after(rest, label) as u64;
            (kind.to_owned(), [n("read "), n("used "), n("set aside "), n("duplicates ")])
        })
        .collect()
}

#[test]
fn ingest_shows_bytes_and_records_then_the_manifests_counts_and_elapsed() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    generate(&data, &["--quiet"]);
    // One bad row, set aside and counted.
    let part = data.join("calls/part-000.csv");
    let mut text = std::fs::read_to_string(&part).expect("calls");
    text.push_str("not,a,call\n");
    std::fs::write(&part, text).expect("write");
    let input: u64 = walk(&data).iter().filter(|(n, _)| *n != "accounts.csv").map(|(_, b)| b.len() as u64).sum();

    let store = dir.path().join("store");
    let args = ["ingest", "--data", s(&data), "--store", s(&store), "--on-bad-row", "set-aside"];
    let run = with_progress(&args);
    let prefix = "ingest: reading 8 files: ";
    let lines: Vec<&str> = run.stderr.lines().filter(|l| l.starts_with(prefix) && l.contains(" of ")).collect();
    assert!(!lines.is_empty(), "no progress line: {}", run.stderr);
    for line in &lines {
        let (read, total) = line.trim_start_matches(prefix).split_once(" of ").expect("X of Y");
        let total = total.split(" (").next().expect("total");
        assert!((bytes(total) - input as f64).abs() <= 0.005 * input as f64 + 1.0, "{total} vs {input}: {line}");
        assert!(bytes(read) <= bytes(total), "{line}");
        number_before(line, " records,");
        number_before(line, " records/s");
        number_after(line, "elapsed ");
        if bytes(read) > 0.0 {
            assert!(number_after(line, "ETA ") >= 0.0, "{line}");
        }
    }
    elapsed_never_goes_back(&run.stderr);
    assert!(run.stderr.lines().any(|l| l == "ingest: publishing"), "{}", run.stderr);

    // The last line: elapsed time and the counts of every kind, as the
    // manifest has them.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("manifest.json")).expect("manifest")).expect("JSON");
    let last = run.stderr.lines().last().expect("a last line");
    assert!(last.starts_with("ingest: done, elapsed "), "{last}");
    assert!(number_after(last, "elapsed ") > 0.0, "{last}");
    let counts = final_counts(last);
    assert_eq!(counts.len(), ROWS.len(), "{last}");
    let mut total = [0u64; 4];
    for (kind, asked) in ROWS {
        let [read, used, set_aside, duplicates] = counts[kind];
        assert_eq!(used, manifest["kinds"][kind]["count"].as_u64().expect("count"), "{kind}");
        let bad = u64::from(kind == "calls");
        assert_eq!((read, set_aside), (asked + bad, bad), "{kind}");
        assert_eq!(read, used + set_aside + duplicates, "{kind}");
        for (t, n) in total.iter_mut().zip(counts[kind]) {
            *t += n;
        }
    }
    let logged = &manifest["ingests"][0];
    let logged: Vec<u64> =
        ["read", "used", "set_aside", "duplicates"].iter().map(|k| logged[k].as_u64().expect("n")).collect();
    assert_eq!(total.to_vec(), logged);
    // The reading phase's own last line: every byte and row.
    let end = run.stderr.lines().find(|l| l.starts_with(prefix) && l.contains(" in ")).expect("end line");
    assert_eq!(number_before(end, " records in") as u64, total[0], "{end}");

    // --quiet: nothing on stderr, the same stdout (the ingest id aside).
    let id = manifest["ingests"][0]["id"].as_str().expect("id").to_owned();
    std::fs::remove_dir_all(&store).expect("remove the store");
    let quiet = with_progress(&[&args[..], &["--quiet"]].concat());
    assert_eq!(quiet.stderr, "");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.join("manifest.json")).expect("manifest")).expect("JSON");
    let quiet_id = manifest["ingests"][0]["id"].as_str().expect("id");
    assert_eq!(quiet.stdout.replace(quiet_id, "ID"), run.stdout.replace(&id, "ID"));
}

/// A window that holds sample_data's records.
const QUERY: &str = "from_date=2026-10-25&to_date=2026-11-21";

#[test]
fn report_shows_its_phases_and_ends_with_elapsed_and_quiet_changes_nothing_else() {
    let dir = temp_dir();
    let data = sample_data();
    let out = dir.path().join("out");
    let args = [
        "report",
        "--data",
        s(&data),
        "--out",
        s(&out),
        "--now",
        NOW,
        "--accounts",
        "MA001SHGA32ZDQYG9N8T,MA002PCHQ444XLFXQN5B",
        "--query",
        QUERY,
    ];
    let run = with_progress(&args);
    let stderr = &run.stderr;
    let first = stderr.lines().next().expect("a first line");
    assert!(first.starts_with("report: reading ") && first.ends_with(')'), "{first}");
    let files = number_after(first, "report: reading ");
    let reading: Vec<&str> =
        stderr.lines().filter(|l| l.starts_with("report: reading ") && l.contains(" of ")).collect();
    for line in &reading {
        number_after(line, "elapsed ");
        assert!(number_after(line, " (") <= 100.0, "{line}");
    }
    let read = stderr.lines().find(|l| l.contains(" rows in ")).expect("the reading phase's end");
    assert_eq!(number_after(read, "report: reading "), files, "{read}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).expect("manifest")).expect("JSON");
    let rows_read = manifest["counts"]["all"]["read"].as_u64().expect("rows read");
    assert_eq!(number_before(read, " rows in") as u64, rows_read, "{read}");
    assert!(stderr.lines().any(|l| l == "report: writing (2 accounts)"), "{stderr}");
    let written = stderr.lines().find(|l| l.starts_with("report: writing: ") && l.contains(" in ")).expect("end");
    assert_eq!(number_before(written, " accounts in"), 2.0, "{written}");
    elapsed_never_goes_back(stderr);
    assert!(!stderr.contains("warning"), "{stderr}");
    let last = stderr.lines().last().expect("a last line");
    assert!(last.starts_with("report: 2 accounts, ") && number_after(last, "elapsed ") > 0.0, "{last}");

    let tree = walk(&out);
    let quiet = with_progress(&[&args[..], &["--quiet"]].concat());
    assert_eq!(quiet.stderr, "");
    assert_eq!(quiet.stdout, run.stdout);
    assert_eq!(walk(&out), tree);
}
