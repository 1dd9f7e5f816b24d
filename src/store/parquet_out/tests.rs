//! Tests of the store's Parquet writer: the bytes polars writes, page
//! by page, for each column rule.

use super::super::layout::arrow_schema;
use super::*;
use polars::prelude::DataType;
use polars::prelude::{ParquetReader, SerReader};

/// A decimal column by dictionary has the statistics the plain one has
/// (numeric minimum and maximum, as 16 big-endian bytes), on each of
/// its data pages, after one dictionary page of its distinct values.
#[test]
fn decimal_dictionary_pages_keep_the_statistics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = ParquetOut::create(&dir.path().join("t.parquet"), arrow_schema(&[("d", DataType::Decimal(38, 9))]))
        .expect("created");
    let amounts = [5i128, -3_000_000_000, 0, 1 << 70];
    let values: Vec<i128> = (0..500_000).map(|i| amounts[i % 4]).collect();
    let dictionary = Dictionary::of(&values).expect("few distinct values");
    assert_eq!(dictionary.values, amounts);
    /// A data page's statistics.
    #[derive(Debug, PartialEq)]
    struct Bounds {
        min: Option<Vec<u8>>,
        max: Option<Vec<u8>>,
        nulls: Option<i64>,
    }
    let statistics = |pages: &[Page]| -> Vec<Bounds> {
        pages
            .iter()
            .filter_map(|page| match page {
                Page::Data(page) => match page.header() {
                    DataPageHeader::V1(header) => header.statistics.as_ref(),
                    DataPageHeader::V2(_) => None,
                },
                Page::Dict(_) => None,
            })
            .map(|s| Bounds { min: s.min_value.clone(), max: s.max_value.clone(), nulls: s.null_count })
            .collect()
    };
    let by_dictionary = decimal_dictionary_pages(&dictionary, &out.fields[0]).expect("pages");
    let plain = decimal_pages(&values, &out.fields[0]).expect("pages");
    assert!(matches!(by_dictionary[0], Page::Dict(_)));
    // 500,000 keys: pages of 209,715 keys, as polars cuts them.
    assert_eq!(by_dictionary.len(), 4);
    let expected = Bounds {
        min: Some((-3_000_000_000i128).to_be_bytes().to_vec()),
        max: Some((1i128 << 70).to_be_bytes().to_vec()),
        nulls: Some(0),
    };
    assert!(statistics(&by_dictionary).iter().all(|s| *s == expected));
    assert!(statistics(&plain).iter().all(|s| *s == expected));
    // Mostly distinct values take no dictionary.
    assert!(Dictionary::of(&(0..1000).collect::<Vec<i128>>()).is_none());
    assert!(Dictionary::of(&(0..100).collect::<Vec<i128>>()).is_some());
}

/// One Int64 column of `values` made by `make`, written alone to a file
/// in `dir`: its encoding and the file's bytes.
fn int64_file(dir: &Path, values: &[i64], make: impl Fn(Vec<i64>, &ArrowDataType) -> Column) -> (Encoding, Vec<u8>) {
    let path = dir.join("int64.parquet");
    let mut out = ParquetOut::create(&path, arrow_schema(&[("n", DataType::Int64)])).expect("created");
    let column = make(values.to_vec(), out.dtype(0));
    let encoding = column.encoding;
    let group = out.encode(values.len(), vec![column]).expect("encoded");
    out.write(group).expect("written");
    out.finish(&Syncer::at_once()).expect("finished");
    (encoding, std::fs::read(&path).expect("read"))
}

/// Source lines spread wide are written plain without polars' distinct
/// count, in the bytes polars writes when it counts them; lines close
/// together, or a small group, are left to polars' check.
#[test]
fn lines_are_written_as_polars_writes_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let wide: Vec<i64> = (0..5000).map(|i| 2 + i * 97).collect();
    let close: Vec<i64> = (0..5000).map(|i| 2 + i % 3000).collect();
    let few_wide: Vec<i64> = (0..100).map(|i| 2 + i * 97_000).collect();
    for (lines, plain) in [(&wide, true), (&close, false), (&few_wide, false)] {
        let (encoding, ours) = int64_file(dir.path(), lines, Column::lines);
        let (_, polars) = int64_file(dir.path(), lines, Column::int64);
        assert_eq!(encoding == Encoding::Plain, plain);
        assert!(ours == polars, "{} lines from {}", lines.len(), lines[0]);
    }
}

/// Slots in order take the dictionary polars makes of them, or none
/// where it takes none, in the same bytes; slots out of order are left
/// to polars.
#[test]
fn slots_are_written_as_polars_writes_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let start = 1_785_542_400i64;
    // 15-minute slots of 92 days, a few rows each; days; slots within
    // 18 hours; distinct slots, many and few; slots out of order.
    let quarters: Vec<i64> = (0..20_000).map(|i| start + 900 * (i / 3)).collect();
    let days: Vec<i64> = (0..5_000).map(|i| start + 86_400 * (i / 60)).collect();
    let close: Vec<i64> = (0..5_000).map(|i| start + 900 * (i / 100)).collect();
    let distinct: Vec<i64> = (0..5_000).map(|i| start + 900 * i).collect();
    let few_distinct: Vec<i64> = (0..100).map(|i| start + 900 * i).collect();
    let unordered: Vec<i64> = (0..5_000).map(|i| start + 900 * ((i * 7919) % 300)).collect();
    let (by_dictionary, plain) = (Encoding::RleDictionary, Encoding::Plain);
    // (Out of order, the column is polars' to decide: as asked for.)
    for (slots, expected) in [
        (&quarters, by_dictionary),
        (&days, by_dictionary),
        (&close, by_dictionary),
        (&distinct, plain),
        (&few_distinct, by_dictionary),
        (&unordered, by_dictionary),
    ] {
        let (encoding, ours) = int64_file(dir.path(), slots, Column::slots);
        let (_, polars) = int64_file(dir.path(), slots, Column::int64);
        assert_eq!(encoding, expected, "{} slots from {}", slots.len(), slots[0]);
        assert!(ours == polars, "{} slots from {}", slots.len(), slots[0]);
    }
}

/// Text columns come back as the strings written, whether the writer
/// took a dictionary (few distinct values, or a small group) or wrote
/// them plain (mostly distinct); integers and decimals likewise.
#[test]
fn columns_read_back_as_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.parquet");
    let schema = arrow_schema(&[
        ("few", DataType::String),
        ("distinct", DataType::String),
        ("n", DataType::Int64),
        ("d", DataType::Decimal(38, 9)),
        ("repeating", DataType::Decimal(38, 9)),
    ]);
    // Few distinct amounts, negative, zero and past i64 among them.
    let amounts = [0i128, -1_500_000_000, 2_500_000_000, i128::from(i64::MAX) * 1000, -7];
    let ids: Vec<String> = (0..1000).map(|i| format!("record-{i:05}")).collect();
    let few = ["", "a", "é", "a"];
    let mut out = ParquetOut::create(&path, schema).expect("created");
    let mut kinds = Vec::new();
    for rows in [1000usize, 100] {
        let columns = vec![
            Column::text((0..rows).map(|i| few[i % few.len()]), rows).expect("few"),
            Column::ids(ids[..rows].iter().map(String::as_str), rows).expect("ids"),
            Column::int64((0..rows as i64).map(|i| i * 7 - 3).collect(), out.dtype(2)),
            Column::decimal((0..rows as i128).map(|i| i * 1_000_000_001 - 5).collect()),
            Column::decimal((0..rows).map(|i| amounts[i * i % amounts.len()]).collect()),
        ];
        kinds.push(columns.iter().map(|c| c.encoding).collect::<Vec<_>>());
        let group = out.encode(rows, columns).expect("encoded");
        out.write(group).expect("written");
    }
    out.finish(&Syncer::at_once()).expect("finished");
    // 1,000 distinct ids are plain; 100 take a dictionary, as polars does.
    assert_eq!(kinds[0][..2], [Encoding::RleDictionary, Encoding::Plain]);
    assert_eq!(kinds[1][..2], [Encoding::RleDictionary, Encoding::RleDictionary]);
    // Distinct decimals are plain; repeating ones take a dictionary.
    assert_eq!(kinds[0][3..], [Encoding::Plain, Encoding::RleDictionary]);

    let file = std::fs::File::open(&path).expect("opened");
    let frame = ParquetReader::new(file).finish().expect("read");
    assert_eq!(frame.height(), 1100);
    let text = |name: &str| -> Vec<String> {
        let column = frame.column(name).expect("column").str().expect("text").clone();
        column.iter().map(|v| v.expect("not null").to_owned()).collect()
    };
    let expected_few: Vec<String> = (0..1000).chain(0..100).map(|i| few[i % few.len()].to_owned()).collect();
    assert_eq!(text("few"), expected_few);
    let expected_ids: Vec<String> = ids.iter().chain(&ids[..100]).cloned().collect();
    assert_eq!(text("distinct"), expected_ids);
    let n: Vec<i64> = frame.column("n").expect("n").i64().expect("i64").into_no_null_iter().collect();
    let expected_n: Vec<i64> = (0..1000).chain(0..100).map(|i| i * 7 - 3).collect();
    assert_eq!(n, expected_n);
    let d = frame.column("d").expect("d").decimal().expect("decimal").physical().clone();
    let d: Vec<i128> = d.into_no_null_iter().collect();
    let expected_d: Vec<i128> = (0..1000).chain(0..100).map(|i| i * 1_000_000_001 - 5).collect();
    assert_eq!(d, expected_d);
    let repeating = frame.column("repeating").expect("repeating").decimal().expect("decimal").physical().clone();
    let repeating: Vec<i128> = repeating.into_no_null_iter().collect();
    let expected: Vec<i128> = (0..1000).chain(0..100).map(|i| amounts[i * i % amounts.len()]).collect();
    assert_eq!(repeating, expected);
}
