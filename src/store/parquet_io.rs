//! The store's Parquet files, column by column: normalized records and the
//! dedup index (rollups are in `super::rollup`). Money is DECIMAL(38,9)
//! (the exact nanos), counts are Int64, timestamps are nanosecond UTC;
//! nothing passes through floats.

use std::path::Path;

use polars::prelude::{
    Column, DataFrame, Int128Chunked, Int64Chunked, IntoColumn, IntoSeries, ParquetCompression, ParquetReader,
    ParquetWriter, SerReader, TimeUnit, TimeZone,
};

use crate::error::{Error, Result};
use crate::records::{Country, Direction, Kind, Product};

/// Rows per row group: small enough that a reader filtering on statistics
/// skips most of a large file.
pub(super) const ROW_GROUP_ROWS: usize = 64 * 1024;

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

pub(super) fn polars_error(path: &Path) -> impl Fn(polars::prelude::PolarsError) -> Error + '_ {
    move |e| Error::io(path, format!("parquet: {e}"))
}

pub(super) fn decimal_column(name: &str, values: Vec<i128>) -> Result<Column> {
    let chunked = Int128Chunked::from_vec(name.into(), values)
        .into_decimal(38, 9)
        .map_err(|e| Error::Internal(format!("column '{name}': {e}")))?;
    Ok(chunked.into_series().into_column())
}

pub(super) fn int_column(name: &str, values: Vec<i64>) -> Column {
    Int64Chunked::from_vec(name.into(), values).into_series().into_column()
}

pub(super) fn text_column(name: &str, values: Vec<&str>) -> Column {
    Column::new(name.into(), values)
}

pub(super) fn to_i64(value: u64, what: &str) -> Result<i64> {
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

pub(super) fn read_frame(path: &Path, columns: &[&str]) -> Result<DataFrame> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    ParquetReader::new(file)
        .with_columns(Some(columns.iter().map(|c| c.to_string()).collect()))
        .finish()
        .map_err(polars_error(path))
}

/// Rows `offset..offset + len` of `columns` (fewer at the end of the file).
pub(super) fn read_frame_slice(path: &Path, columns: &[&str], offset: usize, len: usize) -> Result<DataFrame> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    ParquetReader::new(file)
        .with_columns(Some(columns.iter().map(|c| c.to_string()).collect()))
        .with_slice(Some((offset, len)))
        .finish()
        .map_err(polars_error(path))
}

/// Rows in a Parquet file (from its footer).
pub(super) fn count_rows(path: &Path) -> Result<usize> {
    let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    ParquetReader::new(file).num_rows().map_err(polars_error(path))
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
