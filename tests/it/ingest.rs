//! `telemeter ingest` at its memory limits: the smallest record-id filter
//! and candidate budget (every row goes through the exact, partitioned
//! index check) give the same counts and answers as the defaults; conflicts
//! and re-ingests found that way behave the same; superseded files are
//! deleted once no generation a reader may hold lists them.

use std::path::Path;

use crate::common::{telemeter, temp_dir, write, Run};

fn s(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

/// A generated data set with re-delivered duplicates, over `days` days.
fn generate(dir: &Path, seed: &str, start: &str, days: &str) {
    telemeter(&[
        "generate",
        "--out",
        s(dir),
        "--calls",
        "5000",
        "--messages",
        "2500",
        "--transcriptions",
        "500",
        "--charges",
        "100",
        "--accounts",
        "4",
        "--start",
        start,
        "--days",
        days,
        "--seed",
        seed,
        "--files",
        "3",
        "--duplicates",
        "0.05",
    ])
    .ok();
}

fn ingest(data: &Path, store: &Path, extra: &[&str]) -> Run {
    let mut args = vec!["ingest", "--data", s(data), "--store", s(store)];
    args.extend_from_slice(extra);
    telemeter(&args)
}

/// The smallest filter (nearly every id is a candidate), the candidates
/// checked after every batch, and one batch per file.
const TIGHT: &[&str] = &["--filter-mb", "0", "--pending-mb", "0", "--batch-mb", "1"];

/// The `total` line of an ingest.
fn total(run: &Run) -> String {
    run.stdout.lines().find(|l| l.starts_with("total")).expect("total line").to_owned()
}

fn answer(store: &Path, account: &str) -> String {
    telemeter(&[
        "summary",
        "--store",
        s(store),
        "--auth-id",
        account,
        "--query",
        "from_date=2026-10-01&to_date=2026-10-26&granularity=day&timezone=Asia/Kolkata",
        "--now",
        "2026-11-21T00:00:00Z",
        "--all-pages",
    ])
    .ok()
    .to_owned()
}

fn accounts(data: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(data.join("accounts.csv")).expect("accounts.csv");
    text.lines().skip(1).filter_map(|l| l.split(',').next()).map(str::to_owned).collect()
}

#[test]
fn the_exact_index_check_gives_the_filters_answers() {
    let temp = temp_dir();
    let (early, late) = (temp.path().join("early"), temp.path().join("late"));
    generate(&early, "1", "2026-10-01", "12");
    generate(&late, "2", "2026-10-13", "12");
    let (roomy, tight) = (temp.path().join("roomy"), temp.path().join("tight"));
    for data in [&early, &late] {
        let a = ingest(data, &roomy, &[]);
        let b = ingest(data, &tight, TIGHT);
        a.ok();
        b.ok();
        assert_eq!(total(&a), total(&b));
    }
    for account in accounts(&early) {
        assert_eq!(answer(&roomy, &account), answer(&tight, &account), "{account}");
    }
    // Everything again: all duplicates.
    let again = ingest(&early, &tight, TIGHT);
    let line = total(&again);
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!((words[4], words[9]), ("0", words[2]), "{line}");

    // A stored row delivered again with other content, found by the exact check.
    let calls = std::fs::read_to_string(early.join("calls/part-000.csv")).expect("calls");
    let row = calls.lines().nth(5).expect("a row");
    let mut fields: Vec<String> = row.split(',').map(str::to_owned).collect();
    fields[9] = "123.5".to_owned();
    let header = calls.lines().next().expect("header");
    let clash = temp.path().join("clash");
    write(&clash, "calls/zz.csv", format!("{header}\n{}\n", fields.join(",")));
    let failed = ingest(&clash, &tight, TIGHT);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    assert!(failed.stderr.contains(&format!("'{}'", fields[0])), "{}", failed.stderr);
    assert!(failed.stderr.contains("calls/part-000.csv (ingest "), "{}", failed.stderr);
    assert!(failed.stderr.contains("calls/zz.csv:2"), "{}", failed.stderr);
}

fn walk(dir: &Path, out: &mut Vec<String>, root: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(&path, out, root);
        } else {
            let relative = path.strip_prefix(root).expect("under the store");
            out.push(relative.to_str().expect("UTF-8 path").to_owned());
        }
    }
}

/// Every file of the store's generation folders, relative to the store.
fn generation_files(store: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for folder in ["records", "index", "rollups", "accounts", "rejected"] {
        walk(&store.join(folder), &mut files, store);
    }
    files
}

#[test]
fn superseded_and_orphaned_files_are_deleted_a_generation_later() {
    let temp = temp_dir();
    let days: Vec<_> = (0..3).map(|i| temp.path().join(format!("day{i}"))).collect();
    for (i, day) in days.iter().enumerate() {
        generate(day, &format!("{}", 7 + i), &format!("2026-10-{:02}", 1 + 3 * i), "3");
    }
    let store = temp.path().join("store");
    let manifest = || std::fs::read_to_string(store.join("manifest.json")).expect("manifest");
    ingest(&days[0], &store, &[]).ok();
    let first = generation_files(&store);
    // Files a killed ingest left behind.
    let orphans =
        ["records/calls/killed-00000.parquet", "index/calls/killed-00000.idx", "rollups/x/killed-part-00000.bin"];
    for orphan in orphans {
        write(&store, orphan, b"partial");
    }
    write(&store, "manifest.json.tmp-killed", b"{}");

    ingest(&days[1], &store, &[]).ok();
    let second = manifest();
    for orphan in orphans.iter().chain(&["manifest.json.tmp-killed"]) {
        assert!(!store.join(orphan).exists(), "{orphan} is deleted");
    }
    // Generation 1's rollups were superseded, but a reader may still hold
    // generation 1: they stay one more generation.
    for file in &first {
        assert!(store.join(file).exists(), "{file} stays while generation 1 is the previous one");
    }
    let run = ingest(&days[2], &store, &[]);
    run.ok();
    let third = manifest();
    let left = generation_files(&store);
    for file in &left {
        assert!(third.contains(file.as_str()) || second.contains(file.as_str()), "{file} is listed");
    }
    let gone: Vec<&String> = first.iter().filter(|f| !left.contains(f)).collect();
    assert!(!gone.is_empty(), "generation 1's superseded rollups are deleted");
    assert!(run.stdout.contains(&format!("deleted {} files", gone.len())), "{}", run.stdout);
    // What is left answers like all three days read raw.
    let all = temp.path().join("all");
    for (i, day) in days.iter().enumerate() {
        for kind in ["calls", "messages", "transcriptions", "charges"] {
            for entry in std::fs::read_dir(day.join(kind)).expect("kind folder").flatten() {
                let name = format!("{kind}/d{i}-{}", entry.file_name().to_str().expect("name"));
                write(&all, &name, std::fs::read(entry.path()).expect("read"));
            }
        }
    }
    write(&all, "accounts.csv", std::fs::read(days[2].join("accounts.csv")).expect("accounts"));
    for account in accounts(&days[2]) {
        let raw = telemeter(&[
            "summary",
            "--data",
            s(&all),
            "--auth-id",
            &account,
            "--query",
            "from_date=2026-10-01&to_date=2026-10-26&granularity=day&timezone=Asia/Kolkata",
            "--now",
            "2026-11-21T00:00:00Z",
            "--all-pages",
        ]);
        assert_eq!(raw.ok(), answer(&store, &account), "{account}");
    }
}

/// The rows of a CSV record file as a Parquet file of string columns (empty
/// text as null), in row groups of `group_rows`; `edit` may change a row
/// (its index from 0) first.
fn csv_as_parquet(csv_file: &Path, target: &Path, group_rows: usize, edit: impl Fn(usize, &mut Vec<String>)) {
    use polars::prelude::{Column, DataFrame, IntoColumn, NamedFrom, ParquetWriter, Series};
    let mut reader = csv::Reader::from_path(csv_file).expect("a CSV file");
    let names: Vec<String> = reader.headers().expect("a header").iter().map(str::to_owned).collect();
    let mut rows: Vec<Vec<String>> =
        reader.records().map(|r| r.expect("a CSV row").iter().map(str::to_owned).collect()).collect();
    for (i, row) in rows.iter_mut().enumerate() {
        edit(i, row);
    }
    let columns: Vec<Column> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let cells: Vec<Option<&str>> = rows.iter().map(|r| Some(r[i].as_str()).filter(|c| !c.is_empty())).collect();
            Series::new(name.into(), cells).into_column()
        })
        .collect();
    let mut frame = DataFrame::new(rows.len(), columns).expect("a frame");
    std::fs::create_dir_all(target.parent().expect("a folder")).expect("create folders");
    let file = std::fs::File::create(target).expect("create a Parquet file");
    ParquetWriter::new(file).with_row_group_size(Some(group_rows)).finish(&mut frame).expect("write Parquet");
}

/// A Parquet file of many row groups is read in parts, in parallel (and
/// never whole into memory): its rows are still numbered through the file,
/// re-delivered rows in later parts are duplicates of earlier ones, and the
/// counts and answers are those of the same rows as CSV, for `ingest` and
/// for `summary` on the raw files alike.
#[test]
fn a_parquet_file_of_many_row_groups_reads_in_parts_like_its_csv() {
    let csv_dir = temp_dir();
    let args = ["--calls", "10", "--messages", "150000", "--transcriptions", "10", "--charges", "10"];
    let mut generate = vec!["generate", "--out", s(csv_dir.path()), "--accounts", "3", "--files", "1"];
    generate.extend_from_slice(&["--start", "2026-10-01", "--days", "25", "--duplicates", "0.02"]);
    generate.extend_from_slice(&args);
    telemeter(&generate).ok();
    let messages = csv_dir.path().join("messages/part-000.csv");
    let parquet_dir = temp_dir();
    crate::common::copy_tree(csv_dir.path(), parquet_dir.path());
    std::fs::remove_file(parquet_dir.path().join("messages/part-000.csv")).expect("remove the CSV copy");
    // 15 row groups of 10,000 rows: parts of 7, 7 and 1 row groups.
    csv_as_parquet(&messages, &parquet_dir.path().join("messages/part-000.parquet"), 10_000, |_, _| ());

    let (csv_store, parquet_store) = (temp_dir(), temp_dir());
    let from_csv = ingest(csv_dir.path(), csv_store.path(), &[]).ok().to_owned();
    let from_parquet = ingest(parquet_dir.path(), parquet_store.path(), &[]).ok().to_owned();
    let messages_line =
        |out: &str| out.lines().find(|l| l.starts_with("messages")).expect("a messages line").to_owned();
    assert_eq!(messages_line(&from_parquet), messages_line(&from_csv));
    assert!(!messages_line(&from_csv).ends_with(" 0"), "re-delivered rows: {from_csv}");
    let accounts = accounts(csv_dir.path());
    for account in &accounts {
        let raw = |dir: &Path| {
            crate::common::summary(dir, account, "from_date=2026-10-01&to_date=2026-10-26", &["--all-pages"])
                .ok()
                .to_owned()
        };
        let from_raw_parquet = raw(parquet_dir.path());
        assert_eq!(from_raw_parquet, raw(csv_dir.path()), "{account}");
        assert_eq!(answer(parquet_store.path(), account), answer(csv_store.path(), account), "{account}");
    }

    // A bad value in the last part is named by its row in the file.
    csv_as_parquet(&messages, &parquet_dir.path().join("messages/part-000.parquet"), 10_000, |i, row| {
        if i == 140_000 {
            row[8] = "1.2e3".to_owned();
        }
    });
    let run = crate::common::summary(parquet_dir.path(), &accounts[0], "", &[]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.starts_with("error: messages/part-000.parquet: row 140001: column 'amount': '1.2e3'"),
        "{run:?}"
    );
    let run = ingest(parquet_dir.path(), temp_dir().path(), &[]);
    assert_eq!(run.code, 1, "{run:?}");
    let named = "messages/part-000.parquet: row 140001: column 'amount': '1.2e3' is not a decimal";
    assert!(run.stderr.contains(named), "{run:?}");
}
