//! The store's Parquet files, column by column: the normalized records
//! (rollups are in `super::rollup`; the dedup index is `super::index`'s own
//! binary layout). Money is DECIMAL(38,9)
//! (the exact nanos), counts are Int64, timestamps are nanosecond UTC;
//! nothing passes through floats.

use std::path::Path;

use polars::prelude::{
    Column as FrameColumn, DataFrame, Int64Chunked, IntoColumn, IntoSeries, ParquetCompression, ParquetWriter,
};
use rayon::prelude::*;

use super::layout;
use super::parquet_out::{Column, ParquetOut, TextColumn};
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::parquet::{ParquetFile, Rows};
use crate::records::{Kind, Record};

/// Rows per row group: small enough that a reader filtering on statistics
/// skips most of a large file.
pub(super) const ROW_GROUP_ROWS: usize = 64 * 1024;

/// One checked record, borrowed, with where it came from: ready to be
/// written.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    /// The record.
    pub record: Record<'a>,
    /// The input file it came from.
    pub source_file: &'a str,
    /// Its line (CSV) or row (Parquet) there.
    pub source_line: u64,
}

pub(super) fn polars_error(path: &Path) -> impl Fn(polars::prelude::PolarsError) -> Error + '_ {
    move |e| Error::io(path, format!("parquet: {e}"))
}

pub(super) fn int_column(name: &str, values: Vec<i64>) -> FrameColumn {
    Int64Chunked::from_vec(name.into(), values).into_series().into_column()
}

pub(super) fn to_i64(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value).map_err(|_| Error::Limit(format!("{what} {value} is too large for the store (Int64)")))
}

/// The store's timestamp of a record: nanoseconds since the epoch in an
/// `i64`. Every timestamp `records::parse_record` accepts fits (its years
/// are `records::FIRST_YEAR..=records::LAST_YEAR`); an error here is a
/// fault of ours.
pub(super) fn timestamp_nanos(row: &RecordView<'_>) -> Result<i64> {
    let value = (row.record.timestamp.secs as i128) * 1_000_000_000 + row.record.timestamp.nanos as i128;
    i64::try_from(value).map_err(|_| {
        Error::Internal(format!(
            "record '{}' ({}:{}): timestamp outside the years {}-{} the store holds",
            row.record.record_id,
            row.source_file,
            row.source_line,
            crate::records::FIRST_YEAR,
            crate::records::LAST_YEAR
        ))
    })
}

/// Writes the frames `next` gives (until `None`) as one Parquet scratch
/// file at `path` (a Spark ingest's staging files, read back once by the
/// same ingest), a frame at a time: row groups of at most `ROW_GROUP_ROWS`
/// rows, uncompressed pages, not synced (a run that dies starts again from
/// its input); no file without a frame. All frames have the first's
/// columns.
pub(super) fn write_frames(path: &Path, mut next: impl FnMut() -> Result<Option<DataFrame>>) -> Result<()> {
    let Some(first) = next()? else { return Ok(()) };
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut sink = std::io::BufWriter::new(file);
    let mut writer = ParquetWriter::new(&mut sink)
        .with_compression(ParquetCompression::Uncompressed)
        .with_statistics(crate::parquet::STATISTICS)
        .with_row_group_size(Some(ROW_GROUP_ROWS))
        .batched(first.schema())
        .map_err(polars_error(path))?;
    writer.write_batch(&first).map_err(polars_error(path))?;
    drop(first);
    while let Some(frame) = next()? {
        writer.write_batch(&frame).map_err(polars_error(path))?;
    }
    writer.finish().map_err(polars_error(path))?;
    drop(writer);
    sink.into_inner().map_err(|e| Error::io(path, e.error().to_string()))?;
    Ok(())
}

pub(super) fn read_frame(path: &Path, columns: &[&str]) -> Result<DataFrame> {
    crate::parquet::read_frame(path, Some(columns), Rows::All)
}

/// Rows `offset..offset + len` of `columns` (fewer at the end of the file).
pub(super) fn read_frame_slice(path: &Path, columns: &[&str], offset: usize, len: usize) -> Result<DataFrame> {
    crate::parquet::read_frame(path, Some(columns), Rows::Slice { offset, len })
}

/// Rows in a Parquet file (from its footer, checked: [`ParquetFile`]).
pub(super) fn count_rows(path: &Path) -> Result<usize> {
    let file =
        ParquetFile::open(path)?.ok_or_else(|| Error::io(path, "not a readable Parquet file: the file is empty"))?;
    Ok(file.num_rows())
}

/// Writes records of `kind` in the contract's columns (natural types) plus
/// `source_file` and `source_line`: row groups of about [`ROW_GROUP_ROWS`]
/// ([`row_groups`]), made and encoded a few at a time on the threads,
/// written in order; then handed to `syncer`.
pub fn write_records<R: RecordRows + ?Sized>(path: &Path, kind: Kind, rows: &R, syncer: &Syncer) -> Result<()> {
    let columns = layout::records(kind)?;
    let mut out = ParquetOut::create(path, layout::schema(&columns))?;
    let groups: Vec<std::ops::Range<usize>> = row_groups(rows.len()).collect();
    for window in groups.chunks(2 * rayon::current_num_threads().max(1)) {
        let encoded = window
            .par_iter()
            .map(|range| {
                let values = record_columns(&columns, rows, range.clone(), &out)?;
                out.encode(range.len(), values)
            })
            .collect::<Result<Vec<_>>>()?;
        for group in encoded {
            out.write(group)?;
        }
    }
    out.finish(syncer)
}

/// Records to write, by position: a slice of views, or rows that sit
/// elsewhere (ingest's new rows, in their chunks), made into views one at a
/// time as the columns take them.
pub trait RecordRows: Sync {
    /// Number of rows.
    fn len(&self) -> usize;

    /// Whether there are none.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f` with the view of each row of `range` (within `0..len()`),
    /// in order; the first error stops.
    fn each<'s, F: FnMut(&RecordView<'s>) -> Result<()>>(&'s self, range: std::ops::Range<usize>, f: F) -> Result<()>;
}

impl RecordRows for [RecordView<'_>] {
    fn len(&self) -> usize {
        <[RecordView<'_>]>::len(self)
    }

    fn each<'s, F: FnMut(&RecordView<'s>) -> Result<()>>(&'s self, range: std::ops::Range<usize>, f: F) -> Result<()> {
        self[range].iter().try_for_each(f)
    }
}

/// The row groups of `rows` rows, as polars cut a frame for its writer
/// (so that the files are the bytes they were): `rows / ROW_GROUP_ROWS`
/// groups of equal size (at least one, none without rows), the last one
/// taking the rest.
fn row_groups(rows: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let groups = if rows == 0 { 0 } else { (rows / ROW_GROUP_ROWS).max(1) };
    let size = rows / groups.max(1);
    (0..groups).map(move |g| g * size..if g + 1 == groups { rows } else { (g + 1) * size })
}

/// The records columns `columns` of `rows` (column `i` of Arrow type
/// `out.dtype(i)`), made in one pass over the rows (a row group's views are
/// about 10 MB: a pass per column read them from memory a dozen times).
/// Each row's values go straight to the builders of the columns asked for
/// (a flag each, known before the rows: no per-value look-up of what a
/// column holds).
fn record_columns<'r, R: RecordRows + ?Sized>(
    columns: &[layout::FileColumn],
    rows: &'r R,
    range: std::ops::Range<usize>,
    out: &ParquetOut,
) -> Result<Vec<Column>> {
    let n = range.len();
    let picks: Vec<Pick> = columns.iter().map(|column| Pick::of(column.name)).collect::<Result<_>>()?;
    let on = |pick: Pick| picks.contains(&pick);
    let text = |pick: Pick| TextColumn::new(if on(pick) { n } else { 0 });
    let values = |pick: Pick| if on(pick) { n } else { 0 };
    let mut texts: [TextColumn<'r>; 8] = TEXTS.map(text);
    let mut ids: Vec<&'r str> = Vec::with_capacity(values(Pick::RecordId));
    let mut instants: Vec<i64> = Vec::with_capacity(values(Pick::Timestamp));
    let mut decimals: [Vec<i128>; 3] = DECIMALS.map(|pick| Vec::with_capacity(values(pick)));
    let mut ints: [Vec<i64>; 2] = INTS.map(|pick| Vec::with_capacity(values(pick)));
    let [auth_id, subaccount, product, type_, direction, country, code, source_file] = TEXTS.map(on);
    let [duration, amount, surcharge] = DECIMALS.map(on);
    let [units, source_line] = INTS.map(on);
    let (record_id, timestamp) = (on(Pick::RecordId), on(Pick::Timestamp));
    let units_name = if columns.iter().any(|c| c.name == "segments") { "segments" } else { "units" };
    rows.each(range, |r| {
        if record_id {
            ids.push(r.record.record_id);
        }
        if auth_id {
            texts[0].push(r.record.auth_id);
        }
        if subaccount {
            texts[1].push(r.record.subaccount);
        }
        if timestamp {
            instants.push(timestamp_nanos(r)?);
        }
        if product {
            texts[2].push_product(r.record.product);
        }
        if type_ {
            texts[3].push(r.record.type_);
        }
        if direction {
            texts[4].push_direction(r.record.direction);
        }
        if country {
            texts[5].push_country(r.record.country);
        }
        if code {
            texts[6].push(r.record.code);
        }
        if source_file {
            texts[7].push(r.source_file);
        }
        if duration {
            decimals[0].push(i128::from(r.record.duration));
        }
        if amount {
            decimals[1].push(i128::from(r.record.amount));
        }
        if surcharge {
            decimals[2].push(i128::from(r.record.surcharge));
        }
        if units {
            ints[0].push(to_i64(r.record.units, units_name)?);
        }
        if source_line {
            ints[1].push(to_i64(r.source_line, "line")?);
        }
        Ok(())
    })?;
    let mut made = Vec::with_capacity(picks.len());
    for (i, (pick, column)) in picks.iter().zip(columns).enumerate() {
        let integers = |values: Vec<i64>| Column::integers_as(column.encoding, values, out.dtype(i));
        made.push(match pick {
            Pick::RecordId => Column::ids(std::mem::take(&mut ids).into_iter(), n)?,
            Pick::Timestamp => integers(std::mem::take(&mut instants))?,
            Pick::Text(at) => std::mem::replace(&mut texts[*at], TextColumn::new(0)).finish()?,
            Pick::Decimal(at) => Column::decimal(std::mem::take(&mut decimals[*at])),
            Pick::Int(at) => integers(std::mem::take(&mut ints[*at]))?,
        });
    }
    Ok(made)
}

/// Which value of a record a records column holds: the record id, the
/// instant, or the builder of its kind at a place ([`TEXTS`], [`DECIMALS`],
/// [`INTS`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pick {
    RecordId,
    Timestamp,
    Text(usize),
    Decimal(usize),
    Int(usize),
}

/// The text columns: auth_id, subaccount, product, type (or description),
/// direction, country, code (hangup cause or error code), source file.
const TEXTS: [Pick; 8] = [
    Pick::Text(0),
    Pick::Text(1),
    Pick::Text(2),
    Pick::Text(3),
    Pick::Text(4),
    Pick::Text(5),
    Pick::Text(6),
    Pick::Text(7),
];

/// The decimal columns: duration (billed or transcribed), amount,
/// surcharge.
const DECIMALS: [Pick; 3] = [Pick::Decimal(0), Pick::Decimal(1), Pick::Decimal(2)];

/// The integer columns: units (or segments), source line.
const INTS: [Pick; 2] = [Pick::Int(0), Pick::Int(LINES)];

/// The place of the source line among [`INTS`].
const LINES: usize = 1;

impl Pick {
    /// Column `name`'s value.
    fn of(name: &str) -> Result<Pick> {
        Ok(match name {
            "record_id" => Pick::RecordId,
            "timestamp" => Pick::Timestamp,
            "auth_id" => Pick::Text(0),
            "subaccount_auth" => Pick::Text(1),
            "product" => Pick::Text(2),
            "type" | "description" => Pick::Text(3),
            "direction" => Pick::Text(4),
            "country" => Pick::Text(5),
            "hangup_cause" | "error_code" => Pick::Text(6),
            layout::SOURCE_FILE => Pick::Text(7),
            "billed_seconds" | "duration_seconds" => Pick::Decimal(0),
            "amount" => Pick::Decimal(1),
            "surcharge" => Pick::Decimal(2),
            "segments" | "units" => Pick::Int(0),
            layout::SOURCE_LINE => Pick::Int(LINES),
            other => return Err(Error::Internal(format!("no store column for '{other}'"))),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{parse_record, Field, Record};
    use crate::time::Instant;

    fn view<'a>(record: &Record<'a>) -> RecordView<'a> {
        RecordView { record: *record, source_file: "x.csv", source_line: 2 }
    }

    /// Whether the store holds every value of `record` exactly, by the
    /// conversions [`write_records`] makes.
    fn holds(record: &Record<'_>) -> bool {
        let view = view(record);
        let decimal = |nanos: i64| (nanos as i128).unsigned_abs() < 10u128.pow(38);
        timestamp_nanos(&view).is_ok()
            && to_i64(view.record.units, "units").is_ok()
            && decimal(view.record.duration)
            && decimal(view.record.amount)
            && decimal(view.record.surcharge)
    }

    /// A timestamp of any four-digit year, with an offset and a fraction.
    fn any_timestamp() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        (0u32..=9999, 1u32..=12, 1u32..=28, 0u32..24, 0u32..60, 0u32..1_000_000_000, -1439i32..=1439).prop_map(
            |(y, mo, d, h, mi, frac, offset)| {
                let sign = if offset < 0 { '-' } else { '+' };
                let (oh, om) = (offset.unsigned_abs() / 60, offset.unsigned_abs() % 60);
                format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:59.{frac:09}{sign}{oh:02}:{om:02}")
            },
        )
    }

    proptest::proptest! {
        /// For any row: accepted by the row check implies held by the store.
        #[test]
        fn what_the_row_check_accepts_the_store_holds(
            timestamp in any_timestamp(),
            parquet_time in proptest::num::i64::ANY,
            unit in proptest::sample::select(vec![1i128, 1_000, 1_000_000, 1_000_000_000]),
            units in proptest::num::u64::ANY,
            wide_units in proptest::num::i128::ANY,
            amount in proptest::num::u64::ANY,
            scale in 0usize..12,
            as_text in proptest::bool::ANY,
        ) {
            let units_text = units.to_string();
            let amount_text = format!("{}.{:09}", amount / 1_000_000_000, amount % 1_000_000_000);
            let fields: Vec<Field<'_>> = if as_text {
                vec![
                    Field::Text(b"x1"),
                    Field::Text(b"A1"),
                    Field::Text(timestamp.as_bytes()),
                    Field::Text(b"CNAM Lookup"),
                    Field::Text(units_text.as_bytes()),
                    Field::Text(amount_text.as_bytes()),
                ]
            } else {
                vec![
                    Field::Text(b"x1"),
                    Field::Text(b"A1"),
                    Field::Time(Instant::from_epoch_nanos(parquet_time as i128 * unit)),
                    Field::Text(b"CNAM Lookup"),
                    Field::Int(wide_units),
                    Field::Decimal { unscaled: amount as i128, scale },
                ]
            };
            if let Ok(record) = parse_record(Kind::Charges, &fields) {
                proptest::prop_assert!(holds(&record), "{record:?}");
            }
        }
    }

    /// Row groups cover the rows once, in order, each of about
    /// `ROW_GROUP_ROWS` (never more than twice that), none when empty.
    #[test]
    fn row_groups_cover_the_rows_in_order() {
        assert_eq!(row_groups(0).count(), 0);
        for rows in [1, 100, ROW_GROUP_ROWS - 1, ROW_GROUP_ROWS, ROW_GROUP_ROWS + 1, 3 * ROW_GROUP_ROWS + 7, 1_248_525]
        {
            let groups: Vec<_> = row_groups(rows).collect();
            assert_eq!(groups.len(), (rows / ROW_GROUP_ROWS).max(1), "{rows}");
            let mut next = 0;
            for group in &groups {
                assert_eq!(group.start, next);
                assert!(!group.is_empty() && group.len() < 2 * ROW_GROUP_ROWS, "{rows}: {group:?}");
                next = group.end;
            }
            assert_eq!(next, rows);
        }
    }

    #[test]
    fn the_ends_of_the_accepted_range_are_written() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let rows = [
            ["x1", "A1", "1678-01-01T00:00:00Z", "a", "9223372036854775807", "9223372036.854775807"],
            ["x2", "A1", "2261-12-31T23:59:59.999999999Z", "a", "0", "0.000000001"],
        ];
        let mut views = Vec::new();
        let fields: Vec<Vec<Field<'_>>> =
            rows.iter().map(|row| row.iter().map(|v| Field::Text(v.as_bytes())).collect()).collect();
        for fields in &fields {
            let record = parse_record(Kind::Charges, fields).expect("accepted");
            assert!(holds(&record));
            views.push(view(&record));
        }
        write_records(&dir.path().join("r.parquet"), Kind::Charges, &views[..], &Syncer::at_once()).expect("written");
        // One nanosecond before and after the range: refused.
        for timestamp in ["1677-12-31T23:59:59.999999999Z", "2262-01-01T00:00:00Z"] {
            let row = ["x3", "A1", timestamp, "a", "1", "1"];
            let fields: Vec<Field<'_>> = row.iter().map(|v| Field::Text(v.as_bytes())).collect();
            let error = parse_record(Kind::Charges, &fields).expect_err(timestamp);
            assert_eq!(error.column, 2);
        }
    }
}
