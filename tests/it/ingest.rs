//! `telemeter ingest` at its memory limits: the smallest record-id filter
//! and candidate budget (every row goes through the exact, partitioned
//! index check) give the same counts and answers as the defaults; conflicts
//! and re-ingests found that way behave the same; superseded files are
//! deleted once no generation a reader may hold lists them.

use std::path::Path;

use crate::common::{sample_data, telemeter, temp_dir, write, Run};

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

/// Every row a reader hands over, as text: its line and its fields, or
/// the line, column and reason of a malformed one.
#[derive(Default)]
struct Lines(Vec<(u64, String)>);

impl telemeter::records::csv::RowSink for Lines {
    fn row(&mut self, line: u64, fields: &[telemeter::records::Field<'_>]) -> bool {
        self.0.push((line, format!("{fields:?}")));
        true
    }
    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.0.push((line, format!("malformed {column} {value} {reason}")));
        true
    }
    fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.0.push((line, format!("unframed {column} {value} {reason}")));
        true
    }
}

/// A large file read in runs of lines (`records::pieces`) hands over the
/// lines the whole-file reader does, in every format, runs of any length
/// (a run that ends inside a Parquet row group, in a compressed stream's
/// block, inside a record whose quoted field spans lines, or at the file's
/// last line), damaged lines included.
#[test]
fn a_file_read_in_runs_of_lines_reads_as_the_whole_file() {
    use std::io::Write;
    use telemeter::records::files::{Format, InputFile};
    use telemeter::records::pieces::Pieces;
    use telemeter::records::{csv as records_csv, parquet as records_parquet, Kind};

    let dir = temp_dir();
    let mut text = String::from("record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,");
    text.push_str("billed_seconds,amount,surcharge,hangup_cause\n");
    for i in 0..5000 {
        match i {
            17 => text.push_str("stray\"quote,MA1,,2026-10-01T00:00:00Z,voice,pstn,inbound,US,1,0.1,0,4000\n"),
            18 => text.push('\n'),
            19 => text.push_str("x19,MA1,,not a time,voice,pstn,inbound,US,1,0.1,0,4000\n"),
            // A hangup cause with a line break: one record of two lines.
            i if i % 999 == 30 => {
                text.push_str(&format!("id-{i},MA1,,2026-10-01T00:00:00Z,voice,pstn,inbound,US,1,0.1,0,\"40\n00\"\n"))
            }
            _ => text.push_str(&format!(
                "id-{i},MA{},,2026-10-01T{:02}:00:00Z,voice,pstn,inbound,US,{i},0.{i:04},0,4000\n",
                i % 3,
                i % 24
            )),
        }
    }
    let plain = write(dir.path(), "calls/a.csv", &text);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(text.as_bytes()).expect("gzip");
    let gz = write(dir.path(), "calls/a.csv.gz", gz.finish().expect("gzip"));
    let zst = write(dir.path(), "calls/a.csv.zst", zstd::encode_all(text.as_bytes(), 1).expect("zstd"));
    let parquet = dir.path().join("calls/b.parquet");
    let valid = write(
        dir.path(),
        "valid.csv",
        // The rows that read as records: no damaged line, no line of a
        // record that spans lines.
        text.lines().filter(|line| !(line.is_empty() || line.contains('"') || line.contains("not a time"))).fold(
            String::new(),
            |mut out, line| {
                out.push_str(line);
                out.push('\n');
                out
            },
        ),
    );
    let spanning = (0..5000).filter(|i| i % 999 == 30).count();
    let physical = 5000 + spanning;
    csv_as_parquet(&valid, &parquet, 700, |_, _| ());
    let files = [(plain, Format::Csv), (gz, Format::CsvGz), (zst, Format::CsvZst), (parquet, Format::Parquet)];
    for (path, format) in files {
        let size = std::fs::metadata(&path).expect("size").len();
        let file = InputFile { kind: Kind::Calls, name: path.display().to_string(), path, format, size, sum: None };
        let whole: Vec<(u64, String)> = match format {
            Format::Parquet => records_parquet::read_parts(&file, Lines::default),
            _ => records_csv::read_stream(&file, &mut Default::default(), Lines::default),
        }
        .expect("read")
        .into_iter()
        .flat_map(|lines| lines.0)
        .collect();
        assert_eq!(whole.len(), if format == Format::Parquet { 4997 - spanning } else { 5000 }, "{format:?}");
        for run in [1, 333, 700, 1000, 4999, 5000, 100_000] {
            let mut pieces = Pieces::open(&file).expect("open");
            let mut read = Vec::new();
            let mut runs = 0;
            // Runs of 1 line: the first 300 lines, then the rest at once.
            while !(pieces.done() || run == 1 && runs == 300) {
                let lines: Vec<(u64, String)> =
                    pieces.next(run, Lines::default).expect("a run").into_iter().flat_map(|l| l.0).collect();
                assert!(lines.len() as u64 <= run, "{format:?}: a run of {run} lines read {}", lines.len());
                read.extend(lines);
                runs += 1;
                assert!(runs <= 5001, "{format:?}: runs of {run} never end");
            }
            if run == 1 {
                read.extend(pieces.next(100_000, Lines::default).expect("the rest").into_iter().flat_map(|l| l.0));
            }
            assert_eq!(read, whole, "{format:?} in runs of {run}");
            // A run ends at its last line, or before a record that runs
            // past it: one more run at most per such record.
            let lines = if format == Format::Parquet { whole.len() } else { physical };
            if run > 1 {
                let least = lines.div_ceil(run as usize);
                assert!((least..=least + spanning).contains(&runs), "{format:?} in runs of {run}: {runs} runs");
            }
            assert_eq!(pieces.next(run, Lines::default).expect("past the end").len(), 0);
        }
    }
}

/// The bytes of every file under `folder` of a store, in name order, names
/// aside (they hold the ingest's id).
fn contents(store: &Path, folder: &str) -> Vec<Vec<u8>> {
    let mut names = Vec::new();
    walk(&store.join(folder), &mut names, store);
    names.sort();
    names.iter().map(|name| std::fs::read(store.join(name)).expect("a store file")).collect()
}

/// The rows of the ingest's rejected file, if any.
fn rejected(store: &Path) -> String {
    contents(store, "rejected").iter().map(|bytes| String::from_utf8_lossy(bytes).into_owned()).collect()
}

/// A file larger than twice a batch is ingested in runs of lines, each a
/// batch of its own, so that the ingest holds one run of its rows at a
/// time: the counts, the answers and the rollup files are those of the
/// file taken in whole, rows re-delivered in a later run count once, and
/// bad rows and a conflict across runs are named by their lines as before.
#[test]
fn a_large_file_is_ingested_in_runs_of_lines_as_it_is_whole() {
    let temp = temp_dir();
    let plain = temp.path().join("plain");
    let mut args = vec!["generate", "--out", s(&plain), "--accounts", "3", "--files", "1", "--seed", "5"];
    args.extend_from_slice(&["--calls", "40000", "--messages", "100", "--transcriptions", "10", "--charges", "10"]);
    args.extend_from_slice(&["--start", "2026-10-01", "--days", "25", "--duplicates", "0.05"]);
    telemeter(&args).ok();
    let calls = std::fs::read(plain.join("calls/part-000.csv")).expect("calls");
    assert!(calls.len() > 2 << 20, "{} bytes: more than two batches of 1 MiB", calls.len());
    let gzipped = temp.path().join("gzipped");
    crate::common::copy_tree(&plain, &gzipped);
    std::fs::remove_file(gzipped.join("calls/part-000.csv")).expect("remove");
    write(&gzipped, "calls/part-000.csv.gz", crate::common::gzip(&calls));

    let accounts = accounts(&plain);
    for data in [&plain, &gzipped] {
        let (whole, runs, tight) = (temp.path().join("whole"), temp.path().join("runs"), temp.path().join("tight"));
        for store in [&whole, &runs, &tight] {
            let _ = std::fs::remove_dir_all(store);
        }
        let by_whole = ingest(data, &whole, &[]);
        let by_runs = ingest(data, &runs, &["--batch-mb", "1"]);
        let by_tight = ingest(data, &tight, TIGHT);
        let calls_line = |run: &Run| run.ok().lines().find(|l| l.starts_with("calls")).expect("calls").to_owned();
        assert_eq!(calls_line(&by_runs), calls_line(&by_whole));
        assert_eq!(calls_line(&by_tight), calls_line(&by_whole));
        assert!(!calls_line(&by_whole).ends_with(" 0"), "re-delivered rows: {}", by_whole.stdout);
        // Runs of 8,192 lines: one records file each (of a 1 MiB batch).
        let files = |store: &Path| contents(store, "records/calls").len();
        assert_eq!(files(&whole), 1);
        assert!(files(&runs) >= 5, "{} records files", files(&runs));
        assert_eq!(contents(&runs, "rollups"), contents(&whole, "rollups"));
        assert_eq!(contents(&tight, "rollups"), contents(&whole, "rollups"));
        for account in &accounts {
            assert_eq!(answer(&runs, account), answer(&whole, account), "{account}");
            assert_eq!(answer(&tight, account), answer(&whole, account), "{account}");
        }
    }

    // Bad rows at the edges of the first two runs (lines 2..=8193 and
    // 8194..=16385) and far inside: set aside with the lines the whole
    // file gives them, or the first one fails the run.
    let text = String::from_utf8(calls).expect("UTF-8");
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    for line in [8193, 8194, 30000] {
        let mut fields: Vec<&str> = lines[line - 1].split(',').collect();
        fields[9] = "1.2e3";
        lines[line - 1] = fields.join(",");
    }
    let damaged = temp.path().join("damaged");
    crate::common::copy_tree(&plain, &damaged);
    write(&damaged, "calls/part-000.csv", lines.join("\n") + "\n");
    let (whole, runs) = (temp.path().join("whole-bad"), temp.path().join("runs-bad"));
    let aside = ["--on-bad-row", "set-aside"];
    let by_whole = ingest(&damaged, &whole, &aside);
    let by_runs = ingest(&damaged, &runs, &[aside[0], aside[1], "--batch-mb", "1"]);
    assert_eq!(total(&by_runs), total(&by_whole));
    let rejects = rejected(&whole);
    assert_eq!(rejected(&runs), rejects);
    for line in ["part-000.csv,8193,", "part-000.csv,8194,", "part-000.csv,30000,"] {
        assert!(rejects.contains(line), "{line} in {rejects}");
    }
    let failed = ingest(&damaged, &temp.path().join("failed"), &["--batch-mb", "1"]);
    assert_eq!(failed.code, 1, "{failed:?}");
    assert!(failed.stderr.contains("calls/part-000.csv:8193: column 'amount': '1.2e3'"), "{}", failed.stderr);

    // A record id of run 0 delivered again in run 2 with other content.
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let first: Vec<String> = lines[99].split(',').map(str::to_owned).collect();
    let mut second: Vec<String> = lines[19999].split(',').map(str::to_owned).collect();
    second[0] = first[0].clone();
    second[9] = "77.5".to_owned();
    lines[19999] = second.join(",");
    let clash = temp.path().join("clash");
    crate::common::copy_tree(&plain, &clash);
    write(&clash, "calls/part-000.csv", lines.join("\n") + "\n");
    let by_whole = ingest(&clash, &temp.path().join("clash-whole"), &[]);
    let by_runs = ingest(&clash, &temp.path().join("clash-runs"), TIGHT);
    assert_eq!((by_whole.code, by_runs.code), (1, 1), "{by_whole:?}\n{by_runs:?}");
    assert_eq!(by_runs.stderr.replace("clash-runs", "clash-whole"), by_whole.stderr);
    assert!(by_runs.stderr.contains("calls/part-000.csv:100") && by_runs.stderr.contains("calls/part-000.csv:20000"));
}

/// A store's bytes are its inputs' alone: not the thread count, nor
/// polars' environment (`POLARS_PARQUET_BINARY_STATISTICS_TRUNCATE_LEN`
/// once cut the text statistics of every Parquet file the ingest wrote,
/// and of `generate --format parquet`'s).
#[test]
fn a_store_is_the_same_bytes_whatever_the_threads_and_the_polars_environment() {
    let temp = temp_dir();
    let data = temp.path().join("data");
    generate(&data, "11", "2026-10-01", "20");
    let other_env = || {
        let mut command = crate::common::command();
        command.env("POLARS_PARQUET_BINARY_STATISTICS_TRUNCATE_LEN", "4").env("TELEMETER_THREADS", "1");
        command
    };
    let (plain, other) = (temp.path().join("plain"), temp.path().join("other"));
    ingest(&data, &plain, &[]).ok();
    crate::common::run_command(&["ingest", "--data", s(&data), "--store", s(&other)], other_env()).ok();
    for folder in ["records", "index", "rollups"] {
        let (expected, got) = (contents(&plain, folder), contents(&other, folder));
        assert!(!expected.is_empty(), "{folder}: no files");
        assert!(expected == got, "{folder}: the files differ");
    }
    let generated = |dir: &Path, command| {
        let args = [
            "generate",
            "--out",
            s(dir),
            "--format",
            "parquet",
            "--files",
            "1",
            "--calls",
            "300",
            "--messages",
            "200",
            "--start",
            "2026-08-01",
        ];
        crate::common::run_command(&args, command).ok();
        contents(dir, "calls").into_iter().chain(contents(dir, "messages")).collect::<Vec<_>>()
    };
    let expected = generated(&temp.path().join("parquet"), crate::common::command());
    assert_eq!(expected.len(), 2, "a calls file and a messages file");
    assert!(generated(&temp.path().join("parquet-other"), other_env()) == expected, "generated files differ");
}

/// An ingest whose rows were all set aside (or set aside and repeats)
/// publishes a generation that lists its rejected rows' file, so the next
/// ingest's collection of unlisted files keeps it; an ingest of repeats
/// alone publishes nothing.
#[test]
fn rows_set_aside_are_kept_when_nothing_else_is_new() {
    let temp = temp_dir();
    let header = "record_id,auth_id,timestamp,description,units,amount\n";
    let (bad, good, store) = (temp.path().join("bad"), temp.path().join("good"), temp.path().join("store"));
    write(&bad, "charges/a.csv", format!("{header}b0,MA001,2026-11-01T00:00:00Z,d,1,-1\n"));
    write(&good, "charges/a.csv", format!("{header}x5,MA001,2026-11-01T00:00:00Z,d,1,5\n"));
    let aside = ["--on-bad-row", "set-aside"];
    let first = ingest(&bad, &store, &aside);
    assert!(first.ok().contains("published generation 1"), "{}", first.stdout);
    let kept = rejected(&store);
    assert!(kept.contains("charges/a.csv,2,amount,-1,"), "{kept}");
    let manifest = std::fs::read_to_string(store.join("manifest.json")).expect("manifest");
    assert!(manifest.contains("\"rejected/"), "the generation lists the file: {manifest}");

    let second = ingest(&good, &store, &aside);
    assert!(second.ok().contains("published generation 2"), "{}", second.stdout);
    // The bad row again, beside a repeat of the good one.
    write(&good, "charges/b.csv", format!("{header}b0,MA001,2026-11-01T00:00:00Z,d,1,-1\n"));
    let third = ingest(&good, &store, &aside);
    assert!(third.ok().contains("published generation 3"), "{}", third.stdout);
    std::fs::remove_file(good.join("charges/b.csv")).expect("removed");
    let fourth = ingest(&good, &store, &aside);
    assert!(fourth.ok().contains("nothing new: the store is unchanged at generation 3"), "{}", fourth.stdout);
    let rejects = contents(&store, "rejected");
    assert_eq!(rejects.len(), 2, "both ingests' rejected files are kept");
    assert!(rejects.iter().all(|bytes| String::from_utf8_lossy(bytes).contains(",amount,-1,")));
}

/// A first ingest with nothing to store (a quiet first night: no folder,
/// or files of headers only) publishes an empty store that every command
/// reads; the next ingest of nothing leaves it as it is.
#[test]
fn a_first_ingest_of_nothing_publishes_an_empty_store() {
    let temp = temp_dir();
    let (data, store) = (temp.path().join("data"), temp.path().join("store"));
    write(
        &data,
        "calls/a.csv",
        "timestamp,record_id,product,type,auth_id,subaccount_auth,direction,country,hangup_cause,billed_seconds,surcharge,amount\n",
    );
    let first = ingest(&data, &store, &[]);
    assert!(first.ok().contains("published generation 1"), "{}", first.stdout);
    telemeter(&["store", "verify", "--store", s(&store)]).ok();
    let summary = telemeter(&["summary", "--store", s(&store), "--auth-id", "MA001", "--now", "2026-11-21T12:00:00Z"]);
    assert!(summary.ok().contains("\"usage\":[]"), "{}", summary.stdout);
    let again = ingest(&data, &store, &[]);
    assert!(again.ok().contains("nothing new: the store is unchanged at generation 1"), "{}", again.stdout);
}

/// A first ingest killed at its commit (its marker removed, its whole
/// manifest not yet renamed into place) leaves a folder the next ingest
/// takes for that store, unpublished: run again, it publishes the same
/// answers.
#[test]
fn a_first_ingest_killed_at_its_commit_is_run_again() {
    let temp = temp_dir();
    let store = temp.path().join("store");
    ingest(&sample_data(), &store, &[]).ok();
    let first = answer(&store, "MA001SHGA32ZDQYG9N8T");
    std::fs::rename(store.join("manifest.json"), store.join("manifest.json.tmp-killed")).expect("cut the commit");
    std::fs::remove_dir_all(store.join("manifests")).expect("no kept copy yet");
    let refused = telemeter(&["store", "verify", "--store", s(&store)]);
    assert!(refused.stdout.contains("first ingest stopped before it published"), "{}", refused.stdout);
    let again = ingest(&sample_data(), &store, &[]);
    assert!(again.ok().contains("published generation 1"), "{}", again.stdout);
    assert_eq!(answer(&store, "MA001SHGA32ZDQYG9N8T"), first);
}

/// A first ingest that fails (a bad row) leaves the folder empty, as a
/// failed ingest leaves a store as it was: no marker, key or lock that
/// would make readers say a first ingest stopped.
#[test]
fn a_failed_first_ingest_leaves_an_empty_folder() {
    let temp = temp_dir();
    let (data, store) = (temp.path().join("data"), temp.path().join("store"));
    let header = "record_id,auth_id,timestamp,description,units,amount\n";
    write(&data, "charges/a.csv", format!("{header}b0,MA001,2026-11-01T00:00:00Z,d,1,-1\n"));
    let failed = ingest(&data, &store, &[]);
    assert_eq!(failed.code, 1, "{}", failed.stderr);
    let left: Vec<String> = std::fs::read_dir(&store)
        .map(|entries| entries.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left {left:?}");
    let read = telemeter(&["summary", "--store", s(&store), "--auth-id", "MA001"]);
    assert!(read.stderr.contains("not a telemeter store"), "{}", read.stderr);
}
