//! Parquet input, through polars: each contract column may hold its natural
//! type (timestamp, integer, decimal) or the string form.
//!
//! Integers of every width, signed or unsigned, are read as integers and
//! dictionary-encoded (categorical) strings as strings; ranges are left to
//! [`super::parse_record`], so that an out-of-range value is a bad row like
//! its CSV form. A 0-byte file holds no rows, like a 0-byte CSV file.
//!
//! Columns are turned into plain vectors once, then rows are handed to the
//! same [`RowSink`] as CSV rows, numbered from 1.

use polars::prelude::{Column, DataType, TimeUnit};

use super::csv::RowSink;
use super::files::InputFile;
use super::{ColumnType, Field, Kind};
use crate::error::Result;
use crate::parquet::{ParquetFile, Rows};
use crate::time::Instant;

/// One contract column, decoded.
enum Values<'a> {
    Null,
    Text(Vec<Option<&'a str>>),
    OwnedText(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
    UInt(Vec<Option<u64>>),
    Decimal(Vec<Option<i128>>, usize),
    Time(Vec<Option<i64>>, i128),
}

impl Values<'_> {
    fn field(&self, row: usize) -> Field<'_> {
        match self {
            Values::Null => Field::Null,
            Values::Text(v) => v[row].map_or(Field::Null, |s| Field::Text(s.as_bytes())),
            Values::OwnedText(v) => v[row].as_deref().map_or(Field::Null, |s| Field::Text(s.as_bytes())),
            Values::Int(v) => v[row].map_or(Field::Null, |i| Field::Int(i as i128)),
            Values::UInt(v) => v[row].map_or(Field::Null, |i| Field::Int(i as i128)),
            Values::Decimal(v, scale) => {
                v[row].map_or(Field::Null, |unscaled| Field::Decimal { unscaled, scale: *scale })
            }
            Values::Time(v, nanos_per_unit) => {
                v[row].map_or(Field::Null, |t| Field::Time(Instant::from_epoch_nanos(t as i128 * nanos_per_unit)))
            }
        }
    }
}

/// Reads every row of a Parquet file into one sink.
pub fn read<S: RowSink>(file: &InputFile, kind: Kind, sink: &mut S) -> Result<()> {
    let Some(parquet) = ParquetFile::open(&file.path).map_err(|e| file.renamed(e))? else {
        return Ok(());
    };
    let names = parquet.column_names();
    if let Some(name) = kind.columns().iter().find(|name| !names.iter().any(|n| n == *name)) {
        return Err(file.bad_file(format!("missing required column '{name}' (the file has: {})", names.join(", "))));
    }
    let frame = parquet.read(Some(kind.columns()), Rows::All).map_err(|e| file.renamed(e))?;
    let mut prepared: Vec<(Column, ColumnType, &str)> = Vec::new();
    for (index, name) in kind.columns().iter().enumerate() {
        let column = frame.column(name).map_err(|e| file.bad_file(format!("column '{name}': {e}")))?;
        prepared.push((widen(file, column)?, kind.column_type(index), name));
    }
    let mut columns = Vec::with_capacity(prepared.len());
    for (column, expected, name) in &prepared {
        columns.push(decode(file, column, *expected, name)?);
    }
    let mut fields = [Field::Null; 16];
    let fields = &mut fields[..columns.len()];
    for row in 0..frame.height() {
        for (slot, values) in fields.iter_mut().zip(&columns) {
            *slot = values.field(row);
        }
        if !sink.row(row as u64 + 1, fields) {
            break;
        }
    }
    Ok(())
}

/// Nanoseconds in one tick of a Parquet timestamp of `unit`.
pub fn nanos_per_unit(unit: TimeUnit) -> i128 {
    match unit {
        TimeUnit::Nanoseconds => 1,
        TimeUnit::Microseconds => 1_000,
        TimeUnit::Milliseconds => 1_000_000,
    }
}

/// The column in a form [`decode`] takes, without loss: integers narrower
/// than 64 bits (and UInt32) widened to Int64, dictionary-encoded strings
/// (Categorical, Enum) decoded to strings; every other column as it is.
fn widen(file: &InputFile, column: &Column) -> Result<Column> {
    let cast =
        |to: &DataType| column.strict_cast(to).map_err(|e| file.bad_file(format!("column '{}': {e}", column.name())));
    match column.dtype() {
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::UInt8 | DataType::UInt16 | DataType::UInt32 => {
            cast(&DataType::Int64)
        }
        DataType::Categorical(..) | DataType::Enum(..) => cast(&DataType::String),
        _ => Ok(column.clone()),
    }
}

fn decode<'a>(file: &InputFile, column: &'a Column, expected: ColumnType, name: &str) -> Result<Values<'a>> {
    let wrong = |what: &str| file.bad_file(format!("column '{name}' holds {} values; expected {what}", column.dtype()));
    let polars = |e: polars::prelude::PolarsError| file.bad_file(format!("column '{name}': {e}"));
    let dtype = column.dtype().clone();
    Ok(match (&dtype, expected) {
        (DataType::Null, _) => Values::Null,
        (DataType::String, _) => Values::Text(column.str().map_err(polars)?.iter().collect()),
        (DataType::Int64, ColumnType::Text) => {
            Values::OwnedText(column.i64().map_err(polars)?.iter().map(|v| v.map(|i| i.to_string())).collect())
        }
        (DataType::Int64, ColumnType::Count | ColumnType::Decimal) => {
            Values::Int(column.i64().map_err(polars)?.iter().collect())
        }
        (DataType::UInt64, ColumnType::Text) => {
            Values::OwnedText(column.u64().map_err(polars)?.iter().map(|v| v.map(|i| i.to_string())).collect())
        }
        (DataType::UInt64, ColumnType::Count | ColumnType::Decimal) => {
            Values::UInt(column.u64().map_err(polars)?.iter().collect())
        }
        (DataType::Decimal(_, scale), ColumnType::Decimal | ColumnType::Count) => {
            let decimals = column.decimal().map_err(polars)?;
            Values::Decimal(decimals.physical().iter().collect(), *scale)
        }
        (DataType::Datetime(unit, _), ColumnType::Timestamp) => {
            let times = column.datetime().map_err(polars)?;
            Values::Time(times.physical().iter().collect(), nanos_per_unit(*unit))
        }
        (DataType::Float32 | DataType::Float64, ColumnType::Decimal) => {
            return Err(wrong("a decimal or string column (floating point is not exact)"))
        }
        (_, ColumnType::Text) => return Err(wrong("string")),
        (_, ColumnType::Timestamp) => return Err(wrong("a timestamp or string column")),
        (_, ColumnType::Decimal) => return Err(wrong("a decimal, integer or string column")),
        (_, ColumnType::Count) => return Err(wrong("an integer or string column")),
    })
}
