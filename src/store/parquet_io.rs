//! The store's Parquet files, column by column: normalized records, the
//! dedup index and rollups. Money is DECIMAL(38,9) (the exact nanos), counts
//! are Int64, timestamps are nanosecond UTC; nothing passes through floats.

use std::path::Path;

use polars::prelude::{
    Column, DataFrame, DataType, Int128Chunked, Int64Chunked, IntoColumn, IntoSeries, ParquetCompression,
    ParquetReader, ParquetWriter, SerReader, TimeUnit, TimeZone,
};

use crate::aggregate::Totals;
use crate::error::{Error, Result};
use crate::records::{Country, Direction, Kind, Product};

/// Rows per row group: small enough that a reader filtering on statistics
/// skips most of a large file.
const ROW_GROUP_ROWS: usize = 64 * 1024;

/// One normalized record, borrowed, ready to be written.
#[derive(Clone, Copy, Debug)]
pub struct RecordView<'a> {
    /// `record_id`.
    pub record_id: &'a str,
    /// `auth_id`.
    pub auth_id: &'a str,
    /// `subaccount_auth` (empty = parent).
    pub subaccount: &'a str,
    /// Timestamp: UTC seconds and nanoseconds.
    pub secs: i64,
    /// Nanoseconds within the second.
    pub nanos: u32,
    /// Product.
    pub product: Product,
    /// Sub-type or description.
    pub type_: &'a str,
    /// Direction.
    pub direction: Option<Direction>,
    /// Country.
    pub country: Option<Country>,
    /// Segments or units.
    pub units: u64,
    /// Duration nanos.
    pub duration: i64,
    /// Amount nanos.
    pub amount: i64,
    /// Surcharge nanos.
    pub surcharge: i64,
    /// Error code or hangup cause.
    pub code: &'a str,
    /// The input file it came from.
    pub source_file: &'a str,
    /// Its line (CSV) or row (Parquet) there.
    pub source_line: u64,
}

fn polars_error(path: &Path) -> impl Fn(polars::prelude::PolarsError) -> Error + '_ {
    move |e| Error::io(path, format!("parquet: {e}"))
}

fn decimal_column(name: &str, values: Vec<i128>) -> Result<Column> {
    let chunked = Int128Chunked::from_vec(name.into(), values)
        .into_decimal(38, 9)
        .map_err(|e| Error::Internal(format!("column '{name}': {e}")))?;
    Ok(chunked.into_series().into_column())
}

fn int_column(name: &str, values: Vec<i64>) -> Column {
    Int64Chunked::from_vec(name.into(), values).into_series().into_column()
}

fn text_column(name: &str, values: Vec<&str>) -> Column {
    Column::new(name.into(), values)
}

fn to_i64(value: u64, what: &str) -> Result<i64> {
    i64::try_from(value).map_err(|_| Error::Internal(format!("{what} {value} is too large for the store (Int64)")))
}

/// Writes `frame` to `path` (created or truncated), synced to disk.
fn write_frame(path: &Path, frame: &mut DataFrame) -> Result<()> {
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut writer = std::io::BufWriter::new(file);
    // Snappy: fast to write and read, and every Parquet reader has it.
    ParquetWriter::new(&mut writer)
        .with_compression(ParquetCompression::Snappy)
        .with_row_group_size(Some(ROW_GROUP_ROWS))
        .finish(frame)
        .map_err(polars_error(path))?;
    let file = writer.into_inner().map_err(|e| Error::io(path, e.error().to_string()))?;
    file.sync_all().map_err(|e| Error::io(path, e))
}

fn read_frame(path: &Path, columns: &[&str]) -> Result<DataFrame> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    ParquetReader::new(file)
        .with_columns(Some(columns.iter().map(|c| c.to_string()).collect()))
        .finish()
        .map_err(polars_error(path))
}

/// Writes records of `kind` in the contract's columns (natural types) plus
/// `source_file` and `source_line`.
pub fn write_records(path: &Path, kind: Kind, rows: &[RecordView<'_>]) -> Result<()> {
    let mut columns = Vec::new();
    for &name in kind.columns() {
        let column = match name {
            "record_id" => text_column(name, rows.iter().map(|r| r.record_id).collect()),
            "auth_id" => text_column(name, rows.iter().map(|r| r.auth_id).collect()),
            "subaccount_auth" => text_column(name, rows.iter().map(|r| r.subaccount).collect()),
            "timestamp" => {
                let mut nanos = Vec::with_capacity(rows.len());
                for r in rows {
                    let value = (r.secs as i128) * 1_000_000_000 + r.nanos as i128;
                    let value = i64::try_from(value).map_err(|_| {
                        Error::Internal(format!(
                            "record '{}' ({}:{}): timestamp outside the years 1678-2261 the store holds",
                            r.record_id, r.source_file, r.source_line
                        ))
                    })?;
                    nanos.push(value);
                }
                Int64Chunked::from_vec(name.into(), nanos)
                    .into_datetime(TimeUnit::Nanoseconds, Some(TimeZone::UTC))
                    .into_series()
                    .into_column()
            }
            "product" => text_column(name, rows.iter().map(|r| r.product.as_str()).collect()),
            "type" | "description" => text_column(name, rows.iter().map(|r| r.type_).collect()),
            "direction" => text_column(name, rows.iter().map(|r| r.direction.map_or("", |d| d.as_str())).collect()),
            "country" => {
                let values: Vec<String> =
                    rows.iter().map(|r| r.country.map_or(String::new(), |c| c.as_str().to_owned())).collect();
                Column::new(name.into(), values)
            }
            "billed_seconds" | "duration_seconds" => {
                decimal_column(name, rows.iter().map(|r| r.duration as i128).collect())?
            }
            "amount" => decimal_column(name, rows.iter().map(|r| r.amount as i128).collect())?,
            "surcharge" => decimal_column(name, rows.iter().map(|r| r.surcharge as i128).collect())?,
            "segments" | "units" => {
                let values = rows.iter().map(|r| to_i64(r.units, name)).collect::<Result<Vec<i64>>>()?;
                int_column(name, values)
            }
            "hangup_cause" | "error_code" => text_column(name, rows.iter().map(|r| r.code).collect()),
            other => return Err(Error::Internal(format!("no store column for '{other}'"))),
        };
        columns.push(column);
    }
    columns.push(text_column("source_file", rows.iter().map(|r| r.source_file).collect()));
    let lines = rows.iter().map(|r| to_i64(r.source_line, "line")).collect::<Result<Vec<i64>>>()?;
    columns.push(int_column("source_line", lines));
    let mut frame = DataFrame::new(rows.len(), columns).map_err(polars_error(path))?;
    write_frame(path, &mut frame)
}

/// One dedup index entry: the record_id hash, the content hash and the
/// place (source number in the manifest, line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// `record_id` hash, high and low halves.
    pub id: (u64, u64),
    /// Content hash.
    pub content: u64,
    /// Position in [`super::Manifest::sources`].
    pub source: u32,
    /// Line or row in that source.
    pub line: u64,
}

const INDEX_COLUMNS: [&str; 5] = ["id_hi", "id_lo", "content", "source", "line"];

/// Writes index entries. Hashes are stored bit-for-bit as Int64.
pub fn write_index(path: &Path, entries: &[IndexEntry]) -> Result<()> {
    let columns = vec![
        int_column(INDEX_COLUMNS[0], entries.iter().map(|e| e.id.0 as i64).collect()),
        int_column(INDEX_COLUMNS[1], entries.iter().map(|e| e.id.1 as i64).collect()),
        int_column(INDEX_COLUMNS[2], entries.iter().map(|e| e.content as i64).collect()),
        int_column(INDEX_COLUMNS[3], entries.iter().map(|e| e.source as i64).collect()),
        int_column(INDEX_COLUMNS[4], entries.iter().map(|e| e.line as i64).collect()),
    ];
    let mut frame = DataFrame::new(entries.len(), columns).map_err(polars_error(path))?;
    write_frame(path, &mut frame)
}

/// Reads index entries, handing each to `each`.
pub fn read_index(path: &Path, mut each: impl FnMut(IndexEntry)) -> Result<()> {
    let frame = read_frame(path, &INDEX_COLUMNS)?;
    let column = |name: &str| -> Result<Vec<i64>> {
        let values = frame.column(name).and_then(|c| c.i64().cloned()).map_err(polars_error(path))?;
        values.iter().map(|v| v.ok_or_else(|| Error::io(path, format!("null in column '{name}'")))).collect()
    };
    let (hi, lo, content, source, line) =
        (column("id_hi")?, column("id_lo")?, column("content")?, column("source")?, column("line")?);
    for i in 0..frame.height() {
        each(IndexEntry {
            id: (hi[i] as u64, lo[i] as u64),
            content: content[i] as u64,
            source: source[i] as u32,
            line: line[i] as u64,
        });
    }
    Ok(())
}

const ROLLUP_COLUMNS: [&str; 14] = [
    "auth_id",
    "subaccount_auth",
    "slot_start",
    "product",
    "type",
    "country",
    "direction",
    "error_code",
    "hangup_cause",
    "records",
    "units",
    "duration_seconds",
    "amount",
    "surcharge",
];

/// Writes rollup rows (already sorted). `slot_start` is UTC seconds since
/// the epoch; absent dimensions are empty strings.
///
/// Rows are turned into columns one row group at a time (`row(i)` for
/// `i < n_rows`), so writing holds one row group of columns, not the file.
pub fn write_rollups<'a>(path: &Path, n_rows: usize, row: impl Fn(usize) -> RollupRef<'a>) -> Result<()> {
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut out = std::io::BufWriter::new(file);
    let mut writer = None;
    let mut start = 0;
    loop {
        let end = (start + ROW_GROUP_ROWS).min(n_rows);
        let rows: Vec<RollupRef<'a>> = (start..end).map(&row).collect();
        let frame = rollup_frame(path, &rows)?;
        if writer.is_none() {
            let batched = ParquetWriter::new(&mut out)
                .with_compression(ParquetCompression::Snappy)
                .batched(frame.schema())
                .map_err(polars_error(path))?;
            writer = Some(batched);
        }
        if let Some(batched) = &mut writer {
            batched.write_batch(&frame).map_err(polars_error(path))?;
        }
        start = end;
        if start >= n_rows {
            break;
        }
    }
    if let Some(batched) = writer {
        batched.finish().map_err(polars_error(path))?;
    }
    let file = out.into_inner().map_err(|e| Error::io(path, e.error().to_string()))?;
    file.sync_all().map_err(|e| Error::io(path, e))
}

/// The columns of some rollup rows.
fn rollup_frame(path: &Path, rows: &[RollupRef<'_>]) -> Result<DataFrame> {
    fn code_if<'a>(row: &RollupRef<'a>, has: bool) -> &'a str {
        if has {
            row.code
        } else {
            ""
        }
    }
    let nanos = |value: i128, name: &str| -> Result<i128> {
        if value.unsigned_abs() >= 10u128.pow(38) {
            return Err(Error::Internal(format!("{name} sum {value} does not fit DECIMAL(38,9)")));
        }
        Ok(value)
    };
    let countries: Vec<String> =
        rows.iter().map(|r| r.country.map_or(String::new(), |c| c.as_str().to_owned())).collect();
    let columns = vec![
        text_column(ROLLUP_COLUMNS[0], rows.iter().map(|r| r.auth_id).collect()),
        text_column(ROLLUP_COLUMNS[1], rows.iter().map(|r| r.subaccount).collect()),
        int_column(ROLLUP_COLUMNS[2], rows.iter().map(|r| r.slot).collect()),
        text_column(ROLLUP_COLUMNS[3], rows.iter().map(|r| r.product.as_str()).collect()),
        text_column(ROLLUP_COLUMNS[4], rows.iter().map(|r| r.type_).collect()),
        Column::new(ROLLUP_COLUMNS[5].into(), countries),
        text_column(ROLLUP_COLUMNS[6], rows.iter().map(|r| r.direction.map_or("", |d| d.as_str())).collect()),
        text_column(ROLLUP_COLUMNS[7], rows.iter().map(|r| code_if(r, r.product.has_error_code())).collect()),
        text_column(ROLLUP_COLUMNS[8], rows.iter().map(|r| code_if(r, r.product.has_hangup_cause())).collect()),
        int_column(
            ROLLUP_COLUMNS[9],
            rows.iter().map(|r| to_i64(r.totals.records, "records")).collect::<Result<Vec<_>>>()?,
        ),
        int_column(
            ROLLUP_COLUMNS[10],
            rows.iter()
                .map(|r| u64::try_from(r.totals.units).map_err(|_| Error::Internal("units overflow".into())))
                .map(|u| u.and_then(|u| to_i64(u, "units")))
                .collect::<Result<Vec<_>>>()?,
        ),
        decimal_column(
            ROLLUP_COLUMNS[11],
            rows.iter().map(|r| nanos(r.totals.duration, "duration")).collect::<Result<Vec<_>>>()?,
        )?,
        decimal_column(
            ROLLUP_COLUMNS[12],
            rows.iter().map(|r| nanos(r.totals.amount, "amount")).collect::<Result<Vec<_>>>()?,
        )?,
        decimal_column(
            ROLLUP_COLUMNS[13],
            rows.iter().map(|r| nanos(r.totals.surcharge, "surcharge")).collect::<Result<Vec<_>>>()?,
        )?,
    ];
    DataFrame::new(rows.len(), columns).map_err(polars_error(path))
}

/// One rollup row as read, borrowing its text from the file's columns.
#[derive(Clone, Copy, Debug)]
pub struct RollupRef<'a> {
    /// Parent account.
    pub auth_id: &'a str,
    /// Subaccount, empty for parent-level rows.
    pub subaccount: &'a str,
    /// Slot start, UTC seconds.
    pub slot: i64,
    /// Product.
    pub product: Product,
    /// Sub-type or description.
    pub type_: &'a str,
    /// Country.
    pub country: Option<Country>,
    /// Direction.
    pub direction: Option<Direction>,
    /// Error code or hangup cause, as the product has.
    pub code: &'a str,
    /// Summed values.
    pub totals: Totals,
}

/// Hands every rollup row of a file to `each`, in file order.
pub fn for_each_rollup(path: &Path, each: impl FnMut(RollupRef<'_>) -> Result<()>) -> Result<()> {
    let frame = read_rollup_frame(path)?;
    for_each_rollup_in(path, &frame, each)
}

/// The columns of a rollup file.
pub fn read_rollup_frame(path: &Path) -> Result<DataFrame> {
    read_frame(path, &ROLLUP_COLUMNS)
}

/// Hands every rollup row of `frame` (read from `path`) to `each`, borrowing
/// text from the frame.
pub fn for_each_rollup_in<'f>(
    path: &Path,
    frame: &'f DataFrame,
    mut each: impl FnMut(RollupRef<'f>) -> Result<()>,
) -> Result<()> {
    let broken = |what: String| Error::io(path, format!("not a rollup file: {what}"));
    let text = |name: &str| -> Result<Vec<&'f str>> {
        let column = frame.column(name).and_then(|c| c.str()).map_err(polars_error(path))?;
        column.iter().map(|v| v.ok_or_else(|| broken(format!("null in '{name}'")))).collect()
    };
    let int = |name: &str| -> Result<Vec<i64>> {
        let column = frame.column(name).and_then(|c| c.i64()).map_err(polars_error(path))?;
        column.iter().map(|v| v.ok_or_else(|| broken(format!("null in '{name}'")))).collect()
    };
    let decimal = |name: &str| -> Result<Vec<i128>> {
        let column = frame.column(name).map_err(polars_error(path))?;
        if *column.dtype() != DataType::Decimal(38, 9) {
            return Err(broken(format!("'{name}' is {}, not decimal(38, 9)", column.dtype())));
        }
        let values = column.decimal().map_err(polars_error(path))?;
        values.physical().iter().map(|v| v.ok_or_else(|| broken(format!("null in '{name}'")))).collect()
    };
    let (auth, sub, slot, product, type_) =
        (text("auth_id")?, text("subaccount_auth")?, int("slot_start")?, text("product")?, text("type")?);
    let (country, direction, error_code, hangup) =
        (text("country")?, text("direction")?, text("error_code")?, text("hangup_cause")?);
    let (records, units) = (int("records")?, int("units")?);
    let (duration, amount, surcharge) = (decimal("duration_seconds")?, decimal("amount")?, decimal("surcharge")?);
    for i in 0..frame.height() {
        let product = Product::parse(product[i]).ok_or_else(|| broken(format!("unknown product '{}'", product[i])))?;
        let code = if product.has_error_code() {
            error_code[i]
        } else if product.has_hangup_cause() {
            hangup[i]
        } else {
            ""
        };
        let country = match country[i] {
            "" => None,
            text => Some(Country::parse(text.as_bytes()).ok_or_else(|| broken(format!("bad country '{text}'")))?),
        };
        let direction = match direction[i] {
            "" => None,
            text => Some(Direction::parse(text.as_bytes()).ok_or_else(|| broken(format!("bad direction '{text}'")))?),
        };
        if records[i] < 0 || units[i] < 0 {
            return Err(broken("negative count".to_owned()));
        }
        each(RollupRef {
            auth_id: auth[i],
            subaccount: sub[i],
            slot: slot[i],
            product,
            type_: type_[i],
            country,
            direction,
            code,
            totals: Totals {
                records: records[i] as u64,
                units: units[i] as u128,
                duration: duration[i],
                amount: amount[i],
                surcharge: surcharge[i],
            },
        })?;
    }
    Ok(())
}
