//! Nothing lost at the edges: `summary`, `report` and `ingest` accept and
//! refuse exactly the same rows with the same messages (one row check), at
//! the limits of what the engine holds (timestamp years, counts above a
//! signed 64-bit integer), for Parquet integers of every width and
//! dictionary-encoded strings, and for empty files of every form.

use std::path::{Path, PathBuf};

use crate::common::CALLS_HEADER;
use crate::common::{gzip, summary, telemeter, temp_dir, write, Run};

fn s(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

const QUERY: &str = "from_date=2026-11-01&to_date=2026-11-21";

const CALL: &str = "c1,A1,,2026-11-20T10:00:00Z,voice,pstn,outbound,US,60,0.0130,0.0010,4000\n";
const CHARGES_HEADER: &str = "record_id,auth_id,timestamp,description,units,amount\n";
const CHARGE: &str = "x1,A1,2026-11-20T00:00:00Z,CNAM Lookup,2,0.01\n";

/// What the three commands made of one data directory.
struct Outcome {
    summary: Run,
    report: Run,
    report_out: PathBuf,
    ingest: Run,
    store: PathBuf,
}

/// Runs `summary`, `report` and `ingest` over `data` (with `extra` for
/// `report` and `ingest`, e.g. `--on-bad-row set-aside`), outputs under
/// `work`.
fn run_all(data: &Path, work: &Path, extra: &[&str]) -> Outcome {
    let summary = summary(data, "A1", QUERY, &[]);
    let report_out = work.join("report");
    let mut args =
        vec!["report", "--data", s(data), "--out", s(&report_out), "--query", QUERY, "--now", crate::common::NOW];
    args.extend_from_slice(extra);
    let report = telemeter(&args);
    let store = work.join("store");
    let mut args = vec!["ingest", "--data", s(data), "--store", s(&store)];
    args.extend_from_slice(extra);
    let ingest = telemeter(&args);
    Outcome { summary, report, report_out, ingest, store }
}

/// The bad-record part of a failed run's message (after `error: ` and any
/// context the command adds in front).
fn refusal(run: &Run, file: &str) -> String {
    assert_eq!(run.code, 1, "expected a refusal; stdout {}\nstderr {}", run.stdout, run.stderr);
    assert!(!run.stderr.contains("internal error"), "{}", run.stderr);
    let at = run.stderr.find(file).unwrap_or_else(|| panic!("{file} not named in: {}", run.stderr));
    run.stderr[at..].trim_end().to_owned()
}

/// The rows of a rejected-rows CSV file (without its header).
fn rejected_rows(path: &Path) -> Vec<Vec<String>> {
    let mut reader = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    reader.records().map(|r| r.expect("a rejected row").iter().map(str::to_owned).collect()).collect()
}

/// The rows of the store's rejected-rows file of its one ingest (none when
/// it set nothing aside).
fn store_rejected(store: &Path) -> Vec<Vec<String>> {
    let Ok(entries) = std::fs::read_dir(store.join("rejected")) else {
        return Vec::new();
    };
    let files: Vec<PathBuf> = entries.map(|e| e.expect("entry").path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    rejected_rows(&files[0])
}

/// The counts of an ingest's `total` line: read, used, set aside,
/// duplicates.
fn ingest_totals(run: &Run) -> Vec<u64> {
    let line = run.ok().lines().find(|l| l.starts_with("total")).expect("a total line");
    line.split_whitespace().filter_map(|w| w.parse().ok()).collect()
}

/// The store's answer to the same request as [`summary`].
fn store_summary(store: &Path) -> Run {
    telemeter(&["summary", "--store", s(store), "--auth-id", "A1", "--query", QUERY, "--now", crate::common::NOW])
}

#[test]
fn rows_the_store_cannot_hold_are_refused_alike_by_every_command() {
    // (file, contents, the expected message of the bad row at line 3)
    let cases: Vec<(&str, String, String)> = vec![
        (
            "calls/c.csv",
            format!("{CALLS_HEADER}{CALL}c2,A1,,0000-01-01T00:00:00Z,voice,pstn,outbound,US,60,0.01,0,4000\n"),
            "calls/c.csv:3: column 'timestamp': '0000-01-01T00:00:00Z' is outside the years 1678 to 2261 (UTC) \
             that telemeter accepts"
                .to_owned(),
        ),
        (
            "calls/c.csv",
            format!("{CALLS_HEADER}{CALL}c2,A1,,9999-12-31T23:59:59Z,voice,pstn,outbound,US,60,0.01,0,4000\n"),
            "calls/c.csv:3: column 'timestamp': '9999-12-31T23:59:59Z' is outside the years 1678 to 2261 (UTC) \
             that telemeter accepts"
                .to_owned(),
        ),
        (
            // In range as written, out of range in UTC.
            "calls/c.csv",
            format!("{CALLS_HEADER}{CALL}c2,A1,,2261-12-31T23:00:00-01:00,voice,pstn,outbound,US,60,0.01,0,4000\n"),
            "calls/c.csv:3: column 'timestamp': '2261-12-31T23:00:00-01:00' is outside the years 1678 to 2261 \
             (UTC) that telemeter accepts"
                .to_owned(),
        ),
        (
            "charges/x.csv",
            format!("{CHARGES_HEADER}{CHARGE}x2,A1,2026-11-20T00:00:00Z,CNAM Lookup,18446744073709551615,0.01\n"),
            "charges/x.csv:3: column 'units': '18446744073709551615' is more than 9223372036854775807, \
             the largest count telemeter accepts"
                .to_owned(),
        ),
        (
            "charges/x.csv",
            format!("{CHARGES_HEADER}{CHARGE}x2,A1,2026-11-20T00:00:00Z,CNAM Lookup,9223372036854775808,0.01\n"),
            "charges/x.csv:3: column 'units': '9223372036854775808' is more than 9223372036854775807, \
             the largest count telemeter accepts"
                .to_owned(),
        ),
        (
            "charges/x.csv",
            format!("{CHARGES_HEADER}{CHARGE}x2,A1,2026-11-20T00:00:00Z,CNAM Lookup,99999999999999999999999,0.01\n"),
            "charges/x.csv:3: column 'units': '99999999999999999999999' is more than 9223372036854775807, \
             the largest count telemeter accepts"
                .to_owned(),
        ),
    ];
    for (file, contents, expected) in cases {
        let work = temp_dir();
        let data = work.path().join("data");
        write(&data, file, &contents);
        let failed = run_all(&data, work.path(), &[]);
        assert_eq!(refusal(&failed.summary, file), expected, "summary");
        assert_eq!(refusal(&failed.report, file), expected, "report");
        assert_eq!(refusal(&failed.ingest, file), expected, "ingest");

        // Set aside: the same row, the same reason, in both rejected files;
        // the good row is used, and the store answers like the raw data.
        let work = temp_dir();
        let set_aside = run_all(&data, work.path(), &["--on-bad-row", "set-aside"]);
        set_aside.report.ok();
        set_aside.ingest.ok();
        let from_report = rejected_rows(&set_aside.report_out.join("rejected.csv"));
        let from_store = store_rejected(&set_aside.store);
        assert_eq!(from_report, from_store, "{file}");
        assert_eq!(from_report.len(), 1, "{from_report:?}");
        let row = &from_report[0];
        assert_eq!(format!("{}:{}: column '{}': '{}' {}", row[0], row[1], row[2], row[3], row[4]), expected);
        assert_eq!(ingest_totals(&set_aside.ingest), [2, 1, 1, 0], "{file}");
        let without_bad_row = temp_dir();
        write(without_bad_row.path(), file, contents.lines().take(2).collect::<Vec<_>>().join("\n") + "\n");
        let raw = summary(without_bad_row.path(), "A1", QUERY, &[]);
        assert_eq!(store_summary(&set_aside.store).ok(), raw.ok(), "{file}");
    }
}

#[test]
fn the_limits_themselves_are_accepted_and_stored() {
    // The first and last instants of the accepted years, and the largest
    // count (twice), in one data set: every command accepts it and the store
    // answers like the raw data.
    let work = temp_dir();
    let data = work.path().join("data");
    write(
        &data,
        "calls/c.csv",
        format!(
            "{CALLS_HEADER}{CALL}\
             c2,A1,,1678-01-01T00:00:00Z,voice,pstn,outbound,US,60,0.01,0,4000\n\
             c3,A1,,2261-12-31T23:59:59.999999999Z,voice,pstn,outbound,US,60,0.01,0,4000\n\
             c4,A1,,1678-01-01T05:30:00+05:30,voice,pstn,outbound,US,60,0.02,0,4000\n"
        ),
    );
    write(
        &data,
        "charges/x.csv",
        // Two of the largest counts in one group (one 15-minute slot):
        // their sum is more than a signed 64-bit integer, in the store too.
        format!(
            "{CHARGES_HEADER}{CHARGE}\
             x2,A1,2026-11-20T01:00:00Z,Number Charges,9223372036854775807,0.01\n\
             x3,A1,2026-11-20T01:05:00Z,Number Charges,9223372036854775807,0.01\n"
        ),
    );
    let outcome = run_all(&data, work.path(), &[]);
    let raw = outcome.summary.ok().to_owned();
    let sum = 2 * i64::MAX as u128;
    assert!(raw.contains(&format!("\"total_units\":{sum}")), "{raw}");
    outcome.report.ok();
    assert_eq!(ingest_totals(&outcome.ingest), [7, 7, 0, 0]);
    assert_eq!(store_summary(&outcome.store).ok(), raw);
    // The records at the ends of the range are stored and answered too.
    for (query, spend) in
        [("from_date=1678-01-01&to_date=1678-01-02", "0.03"), ("from_date=2261-12-31&to_date=2262-01-01", "0.01")]
    {
        let args = |source: &str, path: &Path| {
            telemeter(&["summary", source, s(path), "--auth-id", "A1", "--query", query, "--now", crate::common::NOW])
        };
        let raw = args("--data", &data);
        let raw = raw.ok();
        assert!(raw.contains(&format!("\"total_spend\":{spend},")), "{query}: {raw}");
        assert_eq!(args("--store", &outcome.store).ok(), raw, "{query}");
    }
}

#[test]
fn sums_past_64_bits_in_one_group_are_stored_exactly() {
    // Three calls of the largest amount and three charges of the largest
    // count, each three in one group and 15-minute slot: the ingest's fold
    // sums in 64 bits and sets sums past them aside in 128. Whether the
    // groups stay in memory to the publish or are spilled (one group at a
    // time), and after a second ingest that adds to the same group, the
    // store answers like the raw data, by day and by hour.
    let work = temp_dir();
    let data = work.path().join("data");
    let big = "9223372036.854775807";
    let calls: String =
        (2..=4).map(|i| format!("c{i},A1,,2026-11-20T10:0{i}:00Z,voice,pstn,outbound,US,60,{big},0,4000\n")).collect();
    write(&data, "calls/c.csv", format!("{CALLS_HEADER}{CALL}{calls}"));
    let charges: String =
        (2..=4).map(|i| format!("x{i},A1,2026-11-20T00:0{i}:00Z,CNAM Lookup,9223372036854775807,0.01\n")).collect();
    write(&data, "charges/x.csv", format!("{CHARGES_HEADER}{CHARGE}{charges}"));
    let queries = [QUERY, "from_date=2026-11-19&to_date=2026-11-21&granularity=hour"];
    let answers = |source: &str, path: &Path| -> Vec<String> {
        queries
            .iter()
            .map(|query| {
                let run = telemeter(&[
                    "summary",
                    source,
                    s(path),
                    "--auth-id",
                    "A1",
                    "--query",
                    query,
                    "--now",
                    crate::common::NOW,
                ]);
                run.ok().to_owned()
            })
            .collect()
    };
    let raw = answers("--data", &data);
    let spend = 3 * 9_223_372_036_854_775_807u128 + 13_000_000 + 3 * 10_000_000 + 10_000_000;
    assert!(
        raw[0].contains(&format!("\"total_spend\":{}.{:09},", spend / 1_000_000_000, spend % 1_000_000_000)),
        "{}",
        raw[0]
    );
    assert!(raw[0].contains(&format!("\"total_units\":{}", 3 * i64::MAX as u128 + 2)), "{}", raw[0]);
    // Ingests into two stores (groups kept in memory; spilled one at a
    // time) and checks their counts and answers.
    let ingest_both = |totals: [u64; 4], raw: &[String]| {
        for extra in [&[][..], &["--max-rollup-groups", "1"]] {
            let store = work.path().join(format!("store{}", extra.len()));
            let mut args = vec!["ingest", "--data", s(&data), "--store", s(&store)];
            args.extend_from_slice(extra);
            assert_eq!(ingest_totals(&telemeter(&args)), totals, "{extra:?}");
            assert_eq!(answers("--store", &store), raw, "{extra:?}");
        }
    };
    ingest_both([8, 8, 0, 0], &raw);
    // A second ingest: the first's rows again (duplicates) and one more in
    // the group, merged with the published 15-minute file.
    write(
        &data,
        "calls/d.csv",
        format!("{CALLS_HEADER}c5,A1,,2026-11-20T10:05:00Z,voice,pstn,outbound,US,60,{big},0,4000\n"),
    );
    ingest_both([9, 1, 0, 8], &answers("--data", &data));
}

/// The contract's charges columns, with `units` and `amount` of dtype `ints`
/// holding `units` and `amounts`.
fn charges_frame(ints: &polars::prelude::DataType, units: &[i128], amounts: &[i128]) -> polars::prelude::DataFrame {
    use polars::prelude::{Column, DataFrame, IntoColumn, NamedFrom, Series};
    let n = units.len();
    let ids: Vec<String> = (1..=n).map(|i| format!("x{i}")).collect();
    let text = |name: &str, values: Vec<&str>| Series::new(name.into(), values).into_column();
    let int = |name: &str, values: &[i128]| -> Column {
        // Written as text (which holds every width's values), then cast
        // strictly to the width under test.
        let text: Vec<String> = values.iter().map(i128::to_string).collect();
        let wide = Series::new(name.into(), text);
        wide.strict_cast(ints).unwrap_or_else(|e| panic!("{name} as {ints}: {e}")).into_column()
    };
    let columns = vec![
        text("record_id", ids.iter().map(String::as_str).collect()),
        text("auth_id", vec!["A1"; n]),
        text("timestamp", vec!["2026-11-20T00:00:00Z"; n]),
        text("description", vec!["CNAM Lookup"; n]),
        int("units", units),
        int("amount", amounts),
    ];
    let frame = DataFrame::new(n, columns).expect("a frame");
    assert_eq!(frame.column("units").expect("units").dtype(), ints);
    frame
}

#[test]
fn parquet_integers_of_every_width_are_checked_like_csv() {
    use polars::prelude::DataType;
    let widths = [
        (DataType::Int8, i8::MIN as i128, i8::MAX as i128),
        (DataType::Int16, i16::MIN as i128, i16::MAX as i128),
        (DataType::Int32, i32::MIN as i128, i32::MAX as i128),
        (DataType::Int64, i64::MIN as i128, i64::MAX as i128),
        (DataType::UInt8, 0, u8::MAX as i128),
        (DataType::UInt16, 0, u16::MAX as i128),
        (DataType::UInt32, 0, u32::MAX as i128),
        (DataType::UInt64, 0, u64::MAX as i128),
    ];
    for (dtype, min, max) in widths {
        // Row 1: good. Row 2: the width's smallest units (a negative count
        // for signed widths). Row 3: its largest units (more than a count
        // may be for UInt64). Row 4: its largest amount, in whole units.
        let units = [3, min, max, 1];
        let amounts = [2, 1, 1, max];
        let work = temp_dir();
        let data = work.path().join("data");
        crate::common::write_frame(&data.join("charges/x.parquet"), charges_frame(&dtype, &units, &amounts));
        // What the same rows are as CSV: the CSV verdict is the contract.
        let csv_data = work.path().join("csv");
        let mut text = CHARGES_HEADER.to_owned();
        for i in 0..4 {
            text += &format!("x{},A1,2026-11-20T00:00:00Z,CNAM Lookup,{},{}\n", i + 1, units[i], amounts[i]);
        }
        write(&csv_data, "charges/x.csv", &text);
        let csv_work = temp_dir();
        let csv = run_all(&csv_data, csv_work.path(), &["--on-bad-row", "set-aside"]);
        csv.report.ok();
        let csv_rejects = rejected_rows(&csv.report_out.join("rejected.csv"));

        let outcome = run_all(&data, work.path(), &["--on-bad-row", "set-aside"]);
        outcome.report.ok();
        outcome.ingest.ok();
        let rejects = rejected_rows(&outcome.report_out.join("rejected.csv"));
        let store_rejects = store_rejected(&outcome.store);
        // Same rows (Parquet rows are CSV lines minus the header), same
        // columns, values and reasons.
        let shape = |rows: &[Vec<String>], offset: u64| -> Vec<(u64, String, String, String)> {
            rows.iter()
                .map(|r| {
                    // The number alone, for a Parquet row as for a CSV line.
                    let line: u64 = r[1].parse().expect("a line number");
                    (line + offset, r[2].clone(), r[3].clone(), r[4].clone())
                })
                .collect()
        };
        assert_eq!(shape(&rejects, 1), shape(&csv_rejects, 0), "{dtype}");
        assert_eq!(store_rejects, rejects, "{dtype}: ingest and report set aside the same rows alike");
        assert!(rejects.iter().all(|r| r[0] == "charges/x.parquet"), "{rejects:?}");
        // A negative count; a count above i64::MAX; an amount above
        // 9223372036.854775807.
        let expected_rejects =
            usize::from(min < 0) + usize::from(max > i64::MAX as i128) + usize::from(max > 9_223_372_036);
        assert_eq!(rejects.len(), expected_rejects, "{dtype}: {rejects:?}");
        // The good rows are the same answer as from CSV, from the data and
        // from the store.
        let csv_answer = csv.report_out.join("A1/page-0001.json");
        let answer = outcome.report_out.join("A1/page-0001.json");
        assert_eq!(std::fs::read(&answer).expect("page"), std::fs::read(&csv_answer).expect("page"), "{dtype}");
        assert_eq!(store_summary(&outcome.store).ok(), store_summary(&csv.store).ok(), "{dtype}");

        // Without set-aside, the first bad row stops every command, named.
        if let Some(first) = rejects.first() {
            let expected =
                format!("charges/x.parquet: row {}: column '{}': '{}' {}", first[1], first[2], first[3], first[4]);
            let failed = run_all(&data, temp_dir().path(), &[]);
            assert_eq!(refusal(&failed.summary, "charges/x.parquet"), expected, "{dtype}");
            assert_eq!(refusal(&failed.report, "charges/x.parquet"), expected, "{dtype}");
            assert_eq!(refusal(&failed.ingest, "charges/x.parquet"), expected, "{dtype}");
        }
    }
}

#[test]
fn parquet_timestamps_outside_the_accepted_years_are_bad_rows() {
    use polars::prelude::{DataFrame, Int64Chunked, IntoColumn, IntoSeries, NamedFrom, Series, TimeUnit};
    let millis = |y: i32| {
        chrono::NaiveDate::from_ymd_opt(y, 1, 1).expect("a date").and_hms_opt(0, 0, 0).expect("a time").and_utc()
    };
    for (unit, per_milli, year) in [(TimeUnit::Milliseconds, 1, 2300), (TimeUnit::Microseconds, 1_000, 1600)] {
        let times = [millis(2026).timestamp_millis() * per_milli, millis(year).timestamp_millis() * per_milli];
        let text = |name: &str, values: [&str; 2]| Series::new(name.into(), values).into_column();
        let columns = vec![
            text("record_id", ["x1", "x2"]),
            text("auth_id", ["A1", "A1"]),
            Int64Chunked::from_vec("timestamp".into(), times.to_vec())
                .into_datetime(unit, None)
                .into_series()
                .into_column(),
            text("description", ["CNAM Lookup", "CNAM Lookup"]),
            text("units", ["1", "1"]),
            text("amount", ["0.5", "0.5"]),
        ];
        let work = temp_dir();
        let data = work.path().join("data");
        crate::common::write_frame(&data.join("charges/t.parquet"), DataFrame::new(2, columns).expect("frame"));
        let expected = format!(
            "charges/t.parquet: row 2: column 'timestamp': '{}' is outside the years 1678 to 2261 (UTC) \
             that telemeter accepts",
            millis(year).to_rfc3339()
        );
        let failed = run_all(&data, work.path(), &[]);
        assert_eq!(refusal(&failed.summary, "charges/t.parquet"), expected, "summary");
        assert_eq!(refusal(&failed.report, "charges/t.parquet"), expected, "report");
        assert_eq!(refusal(&failed.ingest, "charges/t.parquet"), expected, "ingest");
    }
}

#[test]
fn parquet_integer_text_columns_and_dictionary_strings_read_like_strings() {
    use polars::prelude::{Categories, Column, DataFrame, DataType, IntoColumn, NamedFrom, Series};
    // The same calls as plain strings and with every text column
    // dictionary-encoded (Categorical), hangup_cause as UInt16 and
    // record_id as Int8.
    let rows = [
        ["1", "A1", "", "2026-11-20T10:00:00Z", "voice", "pstn", "outbound", "US", "60", "0.013", "0.001", "4000"],
        ["2", "A1", "S1", "2026-11-20T11:00:00Z", "zentrunk", "sip", "inbound", "", "30", "0.004", "0", "3010"],
        ["3", "A1", "S1", "2026-11-20 12:00:00+05:30", "voice", "pstn", "outbound", "GB", "5", "0.5", "0.25", ""],
    ];
    let names = [
        "record_id",
        "auth_id",
        "subaccount_auth",
        "timestamp",
        "product",
        "type",
        "direction",
        "country",
        "billed_seconds",
        "amount",
        "surcharge",
        "hangup_cause",
    ];
    let strings = |i: usize| -> Vec<&str> { rows.iter().map(|r| r[i]).collect() };
    let work = temp_dir();
    let plain = work.path().join("plain");
    let plain_columns: Vec<(&str, Vec<&str>)> = names.iter().enumerate().map(|(i, n)| (*n, strings(i))).collect();
    let named: Vec<(&str, &[&str])> = plain_columns.iter().map(|(n, v)| (*n, v.as_slice())).collect();
    crate::common::write_string_parquet(&plain.join("calls/c.parquet"), &named);

    let encoded = work.path().join("encoded");
    let categorical = DataType::from_categories(Categories::global());
    let columns: Vec<Column> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let series = Series::new((*name).into(), strings(i));
            let to = match *name {
                "record_id" => DataType::Int8,
                "hangup_cause" => DataType::String,
                "billed_seconds" | "amount" | "surcharge" => DataType::String,
                _ => categorical.clone(),
            };
            series.strict_cast(&to).expect("cast").into_column()
        })
        .collect();
    let mut frame = DataFrame::new(rows.len(), columns).expect("frame");
    // An empty hangup cause is no cause: as UInt16 it is a null.
    let causes: Vec<Option<u16>> = rows.iter().map(|r| r[11].parse().ok()).collect();
    frame.replace("hangup_cause", Series::new("hangup_cause".into(), causes).into_column()).expect("replace");
    assert!(matches!(frame.column("type").expect("type").dtype(), DataType::Categorical(..)));
    crate::common::write_frame(&encoded.join("calls/c.parquet"), frame);

    let expected = summary(&plain, "A1", QUERY, &[]);
    let expected = expected.ok();
    assert!(expected.contains("\"total_spend\":0.517,"), "{expected}");
    let outcome = run_all(&encoded, work.path(), &[]);
    assert_eq!(outcome.summary.ok(), expected);
    outcome.report.ok();
    outcome.ingest.ok();
    assert_eq!(store_summary(&outcome.store).ok(), expected);
}

/// Strings stored as plain binary (BYTE_ARRAY without the UTF8
/// annotation, as older Spark, Hive and Impala write them) read as the
/// same strings; a value that is not UTF-8 is that row's error, naming its
/// row and column, and set aside alone with `set-aside`.
#[test]
fn parquet_binary_columns_read_like_strings() {
    use polars::prelude::{Column, DataFrame, IntoColumn, NamedFrom, Series};
    let rows: [[&[u8]; 12]; 2] = [
        [
            b"1",
            b"A1",
            b"",
            b"2026-11-20T10:00:00Z",
            b"voice",
            b"pstn",
            b"outbound",
            b"US",
            b"60",
            b"0.013",
            b"0.001",
            b"4000",
        ],
        [
            b"2",
            b"A1",
            b"S1",
            b"2026-11-20T11:00:00Z",
            b"zentrunk",
            b"sip",
            b"inbound",
            b"",
            b"30",
            b"0.004",
            b"0",
            b"3010",
        ],
    ];
    let names = CALLS_HEADER.trim_end().split(',').collect::<Vec<_>>();
    let frame = |rows: &[[&[u8]; 12]]| {
        let columns: Vec<Column> = (0..names.len())
            .map(|i| Series::new(names[i].into(), rows.iter().map(|r| r[i]).collect::<Vec<&[u8]>>()).into_column())
            .collect();
        DataFrame::new(rows.len(), columns).expect("frame")
    };
    let work = temp_dir();
    let text = |r: &[&[u8]; 12]| r.map(|f| std::str::from_utf8(f).expect("UTF-8")).join(",");
    let plain = work.path().join("plain");
    write(&plain, "calls/c.csv", format!("{CALLS_HEADER}{}\n{}\n", text(&rows[0]), text(&rows[1])));
    let binary = work.path().join("binary");
    crate::common::write_frame(&binary.join("calls/c.parquet"), frame(&rows));
    let expected = summary(&plain, "A1", QUERY, &[]);
    let expected = expected.ok();
    let outcome = run_all(&binary, work.path(), &[]);
    assert_eq!(outcome.summary.ok(), expected);
    outcome.ingest.ok();
    assert_eq!(store_summary(&outcome.store).ok(), expected);

    let mut bad = rows.to_vec();
    bad.push([
        b"3\xff",
        b"A1",
        b"",
        b"2026-11-20T12:00:00Z",
        b"voice",
        b"pstn",
        b"outbound",
        b"US",
        b"1",
        b"9",
        b"0",
        b"",
    ]);
    let damaged = work.path().join("damaged");
    crate::common::write_frame(&damaged.join("calls/c.parquet"), frame(&bad));
    let refused = summary(&damaged, "A1", QUERY, &[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(refused.stderr.contains("calls/c.parquet: row 3: column 'record_id'"), "{}", refused.stderr);
    assert!(refused.stderr.contains("is not valid UTF-8"), "{}", refused.stderr);
    let outcome = run_all(&damaged, &work.path().join("set-aside"), &["--on-bad-row", "set-aside"]);
    assert!(outcome.ingest.ok().contains("total           read          3  used          2  set aside        1"));
    assert_eq!(store_summary(&outcome.store).ok(), expected);
}

/// A row group of more rows than a slice of values (here 150,000 in one
/// group) reads as the same rows as CSV, whole and with a correction
/// that picks rows across its slices.
#[test]
fn a_large_row_group_reads_as_its_csv() {
    let rows = 150_000usize;
    let names: Vec<&str> = CALLS_HEADER.trim_end().split(',').collect();
    let row = |i: usize| -> [String; 12] {
        [
            format!("c{i}"),
            format!("A{}", i % 3),
            String::new(),
            format!("2026-11-{:02}T{:02}:{:02}:00Z", 1 + i % 20, i % 24, i % 60),
            "voice".into(),
            "pstn".into(),
            "outbound".into(),
            "US".into(),
            format!("{}", i % 600),
            format!("0.{:03}", i % 1000),
            "0".into(),
            "4000".into(),
        ]
    };
    let all: Vec<[String; 12]> = (0..rows).map(row).collect();
    let work = temp_dir();
    let csv = work.path().join("csv");
    let mut text = CALLS_HEADER.to_owned();
    for r in &all {
        text.push_str(&r.join(","));
        text.push('\n');
    }
    write(&csv, "calls/c.csv", text);
    // The rows as one Parquet file of string columns: one row group.
    let write_parquet = |data: &Path, rows_of: &[[String; 12]]| {
        use polars::prelude::{Column, DataFrame, IntoColumn, NamedFrom, Series};
        let columns: Vec<Column> = (0..names.len())
            .map(|c| {
                Series::new(names[c].into(), rows_of.iter().map(|r| r[c].as_str()).collect::<Vec<&str>>()).into_column()
            })
            .collect();
        crate::common::write_frame(&data.join("calls/c.parquet"), DataFrame::new(rows, columns).expect("frame"));
    };
    let parquet = work.path().join("parquet");
    write_parquet(&parquet, &all);
    let revised = |data: &Path| {
        let revisions = [3usize, 70_000, 140_001]
            .map(|i| format!("{},A0,,2026-11-05T00:00:00Z,voice,pstn,outbound,US,1,9,0,4000,1\n", all[i][0]))
            .concat();
        let header = CALLS_HEADER.trim_end();
        write(data, "calls/revised.csv", format!("{header},revision\n{revisions}"));
    };
    for account in ["A0", "A1"] {
        assert_eq!(summary(&parquet, account, QUERY, &[]).ok(), summary(&csv, account, QUERY, &[]).ok());
    }
    let stores: Vec<PathBuf> = [&csv, &parquet]
        .iter()
        .map(|data| {
            let store = data.with_extension("store");
            telemeter(&["ingest", "--data", s(data), "--store", s(&store)]).ok();
            let again = data.with_extension("revised");
            revised(&again);
            telemeter(&["ingest", "--data", s(&again), "--store", s(&store)]).ok();
            store
        })
        .collect();
    assert_eq!(store_summary(&stores[0]).ok(), store_summary(&stores[1]).ok());

    // Bad rows in two slices read in parallel: the first is the error.
    let mut bad = all.clone();
    bad[140_000][4] = "fax".into();
    bad[100_000][4] = "fax".into();
    let damaged = work.path().join("damaged");
    write_parquet(&damaged, &bad);
    let refused = summary(&damaged, "A0", QUERY, &[]);
    assert!(refused.stderr.contains("calls/c.parquet: row 100001: column 'product': 'fax'"), "{}", refused.stderr);
}

#[test]
fn empty_files_of_every_form_hold_no_records() {
    let zstd_of = |bytes: &[u8]| zstd::stream::encode_all(bytes, 3).expect("zstd");
    // 0-byte files, and compressed streams of no bytes, beside a good file.
    let empties: Vec<(&str, Vec<u8>)> = vec![
        ("calls/empty.csv", Vec::new()),
        ("calls/empty.csv.gz", Vec::new()),
        ("calls/empty.csv.zst", Vec::new()),
        ("calls/empty.parquet", Vec::new()),
        ("calls/nothing.csv.gz", gzip(b"")),
        ("calls/nothing.csv.zst", zstd_of(b"")),
        ("calls/header.csv.gz", gzip(CALLS_HEADER.as_bytes())),
    ];
    let work = temp_dir();
    let reference = work.path().join("reference");
    write(&reference, "calls/c.csv", format!("{CALLS_HEADER}{CALL}"));
    let expected = summary(&reference, "A1", QUERY, &[]);
    let expected = expected.ok();
    for (file, bytes) in &empties {
        let work = temp_dir();
        let data = work.path().join("data");
        write(&data, "calls/c.csv", format!("{CALLS_HEADER}{CALL}"));
        write(&data, file, bytes);
        let outcome = run_all(&data, work.path(), &[]);
        assert_eq!(outcome.summary.ok(), expected, "{file}");
        outcome.report.ok();
        assert_eq!(ingest_totals(&outcome.ingest), [1, 1, 0, 0], "{file}");
        assert_eq!(store_summary(&outcome.store).ok(), expected, "{file}");
    }
    // A damaged compressed file or Parquet file is still an error naming it,
    // in every command.
    let mut truncated_zstd = zstd_of(format!("{CALLS_HEADER}{CALL}").as_bytes());
    truncated_zstd.truncate(truncated_zstd.len() - 3);
    let broken: Vec<(&str, Vec<u8>)> = vec![
        ("calls/bad.csv.gz", vec![0x1f]),
        ("calls/bad.csv.zst", truncated_zstd),
        ("calls/bad.parquet", b"PAR1".to_vec()),
    ];
    for (file, bytes) in &broken {
        let work = temp_dir();
        let data = work.path().join("data");
        write(&data, file, bytes);
        let outcome = run_all(&data, work.path(), &[]);
        for run in [&outcome.summary, &outcome.report, &outcome.ingest] {
            assert_eq!(run.code, 1, "{file}: {run:?}");
            assert!(run.stderr.contains(file) && !run.stderr.contains("internal error"), "{file}: {}", run.stderr);
        }
    }
}

/// A DECIMAL of more than 38 digits (pyarrow's decimal256), which polars
/// cannot read: as a column telemeter reads it is an error naming the
/// file, the column and its type; as an extra column it is ignored.
#[test]
fn parquet_decimals_past_38_digits_are_named_or_ignored() {
    let Some(python) = crate::common::venv_python("spark", "pyarrow", "spark/requirements.txt") else { return };
    let dir = temp_dir();
    let script = r#"
import sys, decimal, pyarrow as pa, pyarrow.parquet as pq
D = decimal.Decimal
rows = {"record_id": ["x1", "x2"], "auth_id": ["A1", "A1"], "timestamp": ["2026-11-01T00:00:00Z"] * 2,
        "description": ["d", "d"], "units": [1, 2]}
wide = lambda values, scale: pa.array([D(v) for v in values], pa.decimal128(38, scale)).cast(pa.decimal256(40, scale))
pq.write_table(pa.table(dict(rows, amount=wide(["1.5", "2.25"], 9))), sys.argv[1] + "/wide/charges/a.parquet")
narrow = pa.array([D("1.5"), D("2.25")], pa.decimal128(18, 9))
pq.write_table(pa.table(dict(rows, amount=narrow, note=wide(["1", "2"], 0))), sys.argv[1] + "/extra/charges/a.parquet")
"#;
    for folder in ["wide/charges", "extra/charges"] {
        std::fs::create_dir_all(dir.path().join(folder)).expect("folder");
    }
    let made = std::process::Command::new(python).args(["-c", script, s(dir.path())]).output().expect("python");
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let query = "from_date=2026-11-01&to_date=2026-11-02";
    let wide = summary(&dir.path().join("wide"), "A1", query, &[]);
    assert_eq!(wide.code, 1, "{wide:?}");
    assert!(
        wide.stderr.contains("charges/a.parquet: column 'amount' is DECIMAL(40,9): more than 38 digits"),
        "{}",
        wide.stderr
    );
    let extra = summary(&dir.path().join("extra"), "A1", query, &[]);
    assert!(extra.ok().contains("\"total_spend\":3.75,"), "{}", extra.stdout);
}
