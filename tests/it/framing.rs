//! Every physical line of a CSV input is accounted for, through the binary.
//! A quote that opens a field takes the lines up to its closing quote
//! (RFC 4180): one record, numbered by its first line, never a line of it
//! read as a record of its own. `summary`, `report` and `ingest` fail
//! naming the file and the line where a bad record starts. With
//! `--on-bad-row set-aside`, a quote inside a field or after a closing one
//! sets aside exactly its line, a bad record that spans lines is set aside
//! whole, and `read = used + set aside + duplicates` holds; a quote that
//! never closes fails `report` and `ingest` there too (the lines after it
//! would be its field's). Control characters are escaped in messages and
//! in both `rejected.csv` writers.

use std::path::Path;

use serde_json::Value;

use crate::common::{copy_tree, summary, telemeter, temp_dir, write, Run};

fn s(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// The generated data set every test damages: one calls file, no
/// duplicates.
fn generate(dir: &Path) {
    telemeter(&[
        "generate",
        "--out",
        s(dir),
        "--calls",
        "1200",
        "--messages",
        "50",
        "--transcriptions",
        "20",
        "--charges",
        "10",
        "--accounts",
        "3",
        "--start",
        "2026-11-01",
        "--days",
        "5",
        "--seed",
        "9",
        "--files",
        "1",
        "--duplicates",
        "0",
    ])
    .ok();
}

const CALLS_FILE: &str = "calls/part-000.csv";
const QUERY: &str = "from_date=2026-11-01&to_date=2026-11-06";
const NOW: &str = "2026-11-21T12:00:00Z";

/// The lines of the generated calls file (header first).
fn calls_lines(data: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(data.join(CALLS_FILE)).expect("calls file");
    assert!(text.ends_with('\n'));
    text.lines().map(str::to_owned).collect()
}

fn write_lines(data: &Path, lines: &[String]) {
    write(data, CALLS_FILE, lines.iter().map(|l| format!("{l}\n")).collect::<String>());
}

/// Inserts a quote into the line at 1-based `line`, before its field
/// `field` (0-based).
fn quote_field(lines: &mut [String], line: usize, field: usize) {
    let text = &lines[line - 1];
    let at = if field == 0 { 0 } else { text.match_indices(',').nth(field - 1).expect("a field").0 + 1 };
    lines[line - 1] = format!("{}\"{}", &text[..at], &text[at..]);
}

/// Appends a quote to field `field` (0-based) of the line at `line`.
fn quote_after_field(lines: &mut [String], line: usize, field: usize) {
    let text = &lines[line - 1];
    let at = text.match_indices(',').nth(field).map_or(text.len(), |(i, _)| i);
    lines[line - 1] = format!("{}\"{}", &text[..at], &text[at..]);
}

fn first_account(data: &Path) -> String {
    let text = std::fs::read_to_string(data.join("accounts.csv")).expect("accounts.csv");
    text.lines().nth(1).expect("an account").split(',').next().expect("auth_id").to_owned()
}

fn report(data: &Path, out: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["report", "--data", s(data), "--out", s(out), "--query", QUERY, "--now", NOW, "--quiet"];
    args.extend_from_slice(extra);
    telemeter(&args)
}

fn ingest(data: &Path, store: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["ingest", "--data", s(data), "--store", s(store)];
    args.extend_from_slice(extra);
    telemeter(&args)
}

/// The error line of a failed run (exit 1), without `error: ` and any
/// context `ingest` puts before the cause.
fn failure(run: &Run) -> String {
    assert_eq!(run.code, 1, "expected a data error; stdout of {} bytes\nstderr {}", run.stdout.len(), run.stderr);
    run.stderr
        .lines()
        .find(|l| l.contains(CALLS_FILE))
        .unwrap_or_else(|| panic!("names the file: {}", run.stderr))
        .to_owned()
}

/// `summary`, `report` and `ingest` all fail naming `CALLS_FILE:line`;
/// the three messages, which must agree.
fn all_fail_at(data: &Path, line: usize) -> String {
    let dir = temp_dir();
    let place = format!("{CALLS_FILE}:{line}: ");
    let one = failure(&summary(data, &first_account(data), QUERY, &[]));
    let two = failure(&report(data, &dir.path().join("out"), &[]));
    let three = failure(&ingest(data, &dir.path().join("store"), &[]));
    for message in [&one, &two, &three] {
        assert!(message.contains(&place), "names {place}: {message}");
    }
    let tail = |m: &str| m[m.find(&place).expect("place")..].to_owned();
    assert_eq!(tail(&one), tail(&two));
    assert_eq!(tail(&one), tail(&three));
    tail(&one)
}

/// Counts of one kind: read, used, set aside, duplicates.
#[derive(Debug, PartialEq, Eq)]
struct Counts {
    read: u64,
    used: u64,
    set_aside: u64,
    duplicates: u64,
}

/// The calls counts of `report --on-bad-row set-aside` (from its
/// manifest) and of `ingest --on-bad-row set-aside` (from its output),
/// which must agree; and the report's reconciled spend and rejected lines.
fn set_aside_counts(data: &Path) -> (Counts, String, Vec<String>) {
    let dir = temp_dir();
    let out = dir.path().join("out");
    report(data, &out, &["--on-bad-row", "set-aside"]).ok();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).expect("manifest")).expect("JSON");
    let calls = &manifest["counts"]["calls"];
    let n = |k: &str| calls[k].as_u64().expect("a count");
    let from_report =
        Counts { read: n("read"), used: n("used"), set_aside: n("set_aside"), duplicates: n("duplicates") };
    let spend = manifest["reconciliation"]["sum_of_account_total_spend"].to_string();
    let rejected = std::fs::read_to_string(out.join("rejected.csv")).expect("rejected.csv");
    let rejected: Vec<String> = rejected.lines().skip(1).map(str::to_owned).collect();

    let store = dir.path().join("store");
    let run = ingest(data, &store, &["--on-bad-row", "set-aside"]);
    let line = run.ok().lines().find(|l| l.starts_with("calls ")).expect("calls line").to_owned();
    let words: Vec<&str> = line.split_whitespace().collect();
    let number = |after: &str| -> u64 {
        let at = words.iter().position(|w| *w == after).expect("a label");
        words[at + 1].parse().expect("a number")
    };
    let from_ingest = Counts {
        read: number("read"),
        used: number("used"),
        set_aside: number("aside"),
        duplicates: number("duplicates"),
    };
    assert_eq!(from_report, from_ingest, "report and ingest agree");
    let folder = store.join("rejected");
    let ingest_rejected: Vec<String> = std::fs::read_dir(&folder)
        .expect("rejected folder")
        .flat_map(|e| {
            std::fs::read_to_string(e.expect("entry").path())
                .expect("rejected file")
                .lines()
                .skip(1)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(rejected, ingest_rejected, "both rejected.csv files list the same rows");
    (from_report, spend, rejected)
}

/// The reconciled spend of the undamaged data, less the amounts of `lines`.
fn spend_without(data: &Path, original: &[String], skipped: &[usize]) -> String {
    let dir = temp_dir();
    let clean = dir.path().join("clean");
    copy_tree(data, &clean);
    let kept: Vec<String> =
        original.iter().enumerate().filter(|(i, _)| !skipped.contains(&(i + 1))).map(|(_, l)| l.clone()).collect();
    write_lines(&clean, &kept);
    let out = dir.path().join("out");
    report(&clean, &out, &[]).ok();
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).expect("manifest")).expect("JSON");
    manifest["reconciliation"]["sum_of_account_total_spend"].to_string()
}

/// With `--on-bad-row set-aside` too, `report` and `ingest` fail naming
/// `CALLS_FILE:line`, and the store is not published.
fn set_aside_fails_at(data: &Path, line: usize) {
    let dir = temp_dir();
    let place = format!("{CALLS_FILE}:{line}: ");
    let aside = ["--on-bad-row", "set-aside"];
    let store = dir.path().join("store");
    for run in [report(data, &dir.path().join("out"), &aside), ingest(data, &store, &aside)] {
        let message = failure(&run);
        assert!(message.contains(&place), "names {place}: {message}");
        assert!(message.contains("never set aside"), "{message}");
    }
    assert!(!store.join("manifest.json").exists(), "nothing is published");
}

/// Set aside: exactly `bad` lines, every other line read, and the spend of
/// the data without those lines.
fn sets_aside_exactly(data: &Path, original: &[String], bad: &[usize]) {
    let data_lines = original.len() as u64 - 1;
    let (counts, spend, rejected) = set_aside_counts(data);
    assert_eq!(counts.read, data_lines, "read counts every data line (wc -l less the header)");
    assert_eq!(counts.set_aside, bad.len() as u64);
    assert_eq!(counts.duplicates, 0);
    assert_eq!(counts.read, counts.used + counts.set_aside + counts.duplicates);
    let lines: Vec<String> = rejected.iter().map(|r| r.split(',').nth(1).expect("line").to_owned()).collect();
    assert_eq!(lines, bad.iter().map(|l| l.to_string()).collect::<Vec<_>>(), "{rejected:?}");
    assert_eq!(spend, spend_without(data, original, bad), "spend drops by the set-aside rows exactly");
}

#[test]
fn a_quote_that_never_closes_fails_every_command_naming_its_line() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    generate(&data);
    let original = calls_lines(&data);
    let mut lines = original.clone();
    // `4000` -> `"4000`: the last field of line 300.
    quote_field(&mut lines, 300, 11);
    write_lines(&data, &lines);
    let message = all_fail_at(&data, 300);
    assert!(message.contains("quote"), "{message}");
    set_aside_fails_at(&data, 300);
    // Before the `type` field: under RFC 4180 the field would take the
    // commas and lines after it.
    let mut lines = original.clone();
    quote_field(&mut lines, 100, 5);
    write_lines(&data, &lines);
    all_fail_at(&data, 100);
    set_aside_fails_at(&data, 100);
}

/// Set aside: one bad record from line `first` that holds the original
/// lines `held` (its own and those its quoted field took), every other
/// line read as before; `read` counts the file's records, and the spend is
/// that of the data without the lines held.
fn sets_aside_one_record(data: &Path, original: &[String], first: usize, held: &[usize]) {
    let (counts, spend, rejected) = set_aside_counts(data);
    assert_eq!(counts.read, original.len() as u64 - 1 - (held.len() as u64 - 1), "one record for its lines");
    assert_eq!((counts.set_aside, counts.duplicates), (1, 0));
    assert_eq!(counts.read, counts.used + counts.set_aside + counts.duplicates);
    let lines: Vec<String> = rejected.iter().map(|r| r.split(',').nth(1).expect("line").to_owned()).collect();
    assert_eq!(lines, [first.to_string()], "{rejected:?}");
    assert_eq!(spend, spend_without(data, original, held), "spend drops by the lines held exactly");
}

/// A quote before line 200's last field and one after line 205's: the
/// first opens a field the second closes, so lines 200 to 205 are one
/// record (as any RFC 4180 reader reads them), refused for the line breaks
/// in its hangup cause; none of its lines is counted.
#[test]
fn two_stray_quotes_five_lines_apart_make_one_bad_record() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    generate(&data);
    let original = calls_lines(&data);
    let mut lines = original.clone();
    quote_field(&mut lines, 200, 11);
    quote_after_field(&mut lines, 205, 11);
    write_lines(&data, &lines);
    let message = all_fail_at(&data, 200);
    assert!(message.contains("column 'hangup_cause'") && message.contains("control character"), "{message}");
    sets_aside_one_record(&data, &original, 200, &[200, 201, 202, 203, 204, 205]);
}

#[test]
fn stray_quotes_inside_a_line_set_aside_their_lines_only() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    generate(&data);
    let original = calls_lines(&data);
    let mut lines = original.clone();
    // After the `type` field's value (`local"`), and after the last
    // field's (`4000"`) five lines below: neither opens a field.
    quote_after_field(&mut lines, 100, 5);
    quote_after_field(&mut lines, 105, 11);
    write_lines(&data, &lines);
    all_fail_at(&data, 100);
    sets_aside_exactly(&data, &original, &[100, 105]);
}

#[test]
fn a_quoted_field_that_spans_lines_is_one_record_at_the_line_it_opens() {
    let dir = temp_dir();
    let data = dir.path().join("data");
    generate(&data);
    let original = calls_lines(&data);
    let mut lines = original.clone();
    // A well-formed RFC 4180 field with a line break inside: one record of
    // lines 50 and 51, whose hangup cause (a code) holds a line break:
    // refused at line 50 in every mode, set aside whole.
    let text = lines[49].clone();
    let at = text.rfind(',').expect("a comma") + 1;
    lines[49] = format!("{}\"40", &text[..at]);
    lines.insert(50, "00\"".to_owned());
    write_lines(&data, &lines);
    all_fail_at(&data, 50);
    sets_aside_one_record(&data, &original, 50, &[50]);
    // A field whose second line is a calls record of its own, as a note
    // quoting another row would be: part of the field, never counted.
    let mut lines = original.clone();
    let text = lines[49].clone();
    let at = text.rfind(',').expect("a comma") + 1;
    lines[49] = format!("{}\"40", &text[..at]);
    let quoted_row = lines[60].replacen(&lines[60][..lines[60].find(',').expect("a comma")], "quoted-row", 1);
    lines.insert(50, quoted_row);
    lines.insert(51, "00\"".to_owned());
    write_lines(&data, &lines);
    all_fail_at(&data, 50);
    sets_aside_one_record(&data, &original, 50, &[50]);
}

#[test]
fn control_characters_are_refused_in_codes_and_escaped_in_messages_and_rejected_files() {
    for (raw, shown) in [("40\u{0}00", "40\\u{0}00"), ("40\u{85}00", "40\\u{85}00"), ("40\t00", "40\\t00")] {
        let dir = temp_dir();
        let data = dir.path().join("data");
        generate(&data);
        let original = calls_lines(&data);
        let mut lines = original.clone();
        let text = lines[9].clone();
        let at = text.rfind(',').expect("a comma") + 1;
        lines[9] = format!("{}{raw}", &text[..at]);
        write_lines(&data, &lines);
        let message = all_fail_at(&data, 10);
        assert!(!message.chars().any(char::is_control), "{message:?}");
        assert!(message.contains("column 'hangup_cause'"), "{message}");
        assert!(message.contains(shown), "{message} shows {shown}");
        let (counts, _, rejected) = set_aside_counts(&data);
        assert_eq!(counts.set_aside, 1);
        assert_eq!(counts.read, original.len() as u64 - 1);
        assert_eq!(rejected.len(), 1);
        assert!(!rejected[0].chars().any(char::is_control), "{:?}", rejected[0]);
        assert!(rejected[0].contains(shown), "{} shows {shown}", rejected[0]);
    }
}

#[test]
fn control_characters_are_refused_in_parquet_strings_too() {
    let columns = [
        "record_id",
        "auth_id",
        "subaccount_auth",
        "timestamp",
        "type",
        "direction",
        "country",
        "segments",
        "amount",
        "surcharge",
        "error_code",
    ];
    let good = ["m1", "A1", "", "2026-11-20T10:00:00Z", "sms", "outbound", "US", "1", "0.5", "0", "30"];
    for (column, raw, shown) in [(10, "30\u{0}", "30\\u{0}"), (4, "s\u{85}ms", "s\\u{85}ms"), (0, "m\n2", "m\\n2")] {
        let mut bad = good;
        bad[0] = "m2";
        bad[column] = raw;
        let dir = temp_dir();
        write(dir.path(), "accounts.csv", "auth_id,currency\nA1,USD\n");
        let values: Vec<Vec<&str>> = (0..columns.len()).map(|i| vec![good[i], bad[i]]).collect();
        let named: Vec<(&str, &[&str])> = columns.iter().zip(&values).map(|(n, v)| (*n, v.as_slice())).collect();
        crate::common::write_string_parquet(&dir.path().join("messages/m.parquet"), &named);
        let run = summary(dir.path(), "A1", "", &[]);
        assert_eq!(run.code, 1, "{run:?}");
        assert_eq!(
            run.stderr,
            format!(
                "error: messages/m.parquet: row 2: column '{}': '{shown}' contains a control character\n",
                columns[column]
            )
        );
    }
}

/// 20,000 charges whose note (a column nothing reads) spans two lines, its
/// second starting `"b` (doubled: `""b`): 30 MB, so that some cut between
/// two chunks read in parallel falls inside a note, and the chunk after it,
/// read from there, finds a bad line. That chunk is read again from the
/// record's start; its failure must neither stop the other chunks nor be
/// the answer: every charge counts, in fail mode.
#[test]
fn a_cut_inside_a_spanning_field_loses_no_row_and_fails_nothing() {
    let dir = temp_dir();
    let mut text = String::from("record_id,auth_id,timestamp,description,units,amount,note\n");
    for i in 0..20_000usize {
        let (a, b) = ("a".repeat(500 + i * 31 % 1001), "b".repeat(500 + i * 31 * 31 % 1003));
        text.push_str(&format!("x{i},A1,2026-11-20T10:00:00Z,CNAM,1,0.5,\"{a}\n\"\"b{b}\"\n"));
    }
    write(dir.path(), "charges/a.csv", &text);
    let query = "granularity=month&from_date=2026-11-01&to_date=2026-12-01";
    let run = summary(dir.path(), "A1", query, &[]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let page: Value = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(page["other_charges"][0]["total_units"], 20_000, "{}", run.stdout.chars().take(400).collect::<String>());
}
