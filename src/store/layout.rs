//! The store's Parquet files, column by column: each column's name, type
//! and encoding, declared once. This is the on-disk contract of records
//! and rollup files; the writers make each column by its declaration and
//! the readers ask for columns by these names.
//!
//! - [`records`]: a records file of a kind holds the kind's contract
//!   columns (`records.md`, [`Kind::columns`]) and where each row came
//!   from ([`SOURCE_FILE`], [`SOURCE_LINE`]);
//! - [`ROLLUP`]: a rollup file holds one account's groups at one grain;
//! - [`CODEC`]: every compressed page is LZ4_RAW; a [`ColumnEncoding`] says
//!   which pages are compressed at all.
//!
//! The index file is not Parquet: its byte layout is declared in
//! [`super::index`].

use polars::prelude::{CompatLevel, DataType, Schema, SchemaExt, TimeUnit, TimeZone};
use polars_arrow::datatypes::ArrowSchema;
use polars_parquet::write::CompressionOptions;

use crate::error::{Error, Result};
use crate::records::Kind;

/// A column's type in the file (its Arrow type, as polars maps it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ColumnType {
    /// UTF-8 text.
    Text,
    /// A signed 64-bit integer.
    Int64,
    /// DECIMAL(38, scale): exact money, durations and sums.
    Decimal { scale: usize },
    /// Nanoseconds since the epoch, UTC.
    Instant,
}

impl ColumnType {
    /// polars' data type of this type.
    pub(super) fn dtype(self) -> DataType {
        match self {
            ColumnType::Text => DataType::String,
            ColumnType::Int64 => DataType::Int64,
            ColumnType::Decimal { scale } => DataType::Decimal(38, scale),
            ColumnType::Instant => DataType::Datetime(TimeUnit::Nanoseconds, Some(TimeZone::UTC)),
        }
    }
}

/// How a column's values are encoded, and whether its pages are
/// compressed ([`CODEC`]). Each is one constructor of the writer's column
/// (`parquet_out::Column`), whose doc has the measurements behind it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ColumnEncoding {
    /// A dictionary in order of first appearance, plain when most values
    /// of a row group are distinct; compressed.
    Text,
    /// Mostly distinct text (record ids): plain, not compressed.
    Ids,
    /// Integers: a dictionary when polars' min-max check finds it worth
    /// it, else plain; compressed.
    Int64,
    /// Source lines: [`ColumnEncoding::Int64`], plain without the check when
    /// they spread wide; compressed.
    Lines,
    /// Values that never go down (slots): [`ColumnEncoding::Int64`]'s bytes, the
    /// dictionary made in one pass; compressed.
    Slots,
    /// Instants: plain, not compressed.
    Instants,
    /// Decimals: a dictionary (not compressed) unless most values of a row
    /// group are distinct, then plain and compressed.
    Decimal,
}

/// One column of a store file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FileColumn {
    /// The column's name.
    pub(super) name: &'static str,
    /// Its type.
    pub(super) type_: ColumnType,
    /// Its encoding.
    pub(super) encoding: ColumnEncoding,
}

const fn column(name: &'static str, type_: ColumnType, encoding: ColumnEncoding) -> FileColumn {
    FileColumn { name, type_, encoding }
}

/// The codec of every compressed page.
pub(super) const CODEC: CompressionOptions = CompressionOptions::Lz4Raw;

/// The file a record was read from (its path in the data folder).
pub(super) const SOURCE_FILE: &str = "source_file";

/// The line (or Parquet row, from 1) a record was read from.
pub(super) const SOURCE_LINE: &str = "source_line";

/// The columns of a records file of `kind`: its contract columns, then
/// [`SOURCE_FILE`] and [`SOURCE_LINE`].
pub(super) fn records(kind: Kind) -> Result<Vec<FileColumn>> {
    kind.columns().iter().chain(&[SOURCE_FILE, SOURCE_LINE]).map(|name| record_column(name)).collect()
}

/// Records column `name`.
fn record_column(name: &'static str) -> Result<FileColumn> {
    let decimal = ColumnType::Decimal { scale: 9 };
    Ok(match name {
        "record_id" => column(name, ColumnType::Text, ColumnEncoding::Ids),
        "timestamp" => column(name, ColumnType::Instant, ColumnEncoding::Instants),
        "billed_seconds" | "duration_seconds" | "amount" | "surcharge" => {
            column(name, decimal, ColumnEncoding::Decimal)
        }
        "segments" | "units" => column(name, ColumnType::Int64, ColumnEncoding::Int64),
        SOURCE_LINE => column(name, ColumnType::Int64, ColumnEncoding::Lines),
        "auth_id" | "subaccount_auth" | "product" | "type" | "description" | "direction" | "country"
        | "hangup_cause" | "error_code" | SOURCE_FILE => column(name, ColumnType::Text, ColumnEncoding::Text),
        other => return Err(Error::Internal(format!("no store column for '{other}'"))),
    })
}

/// The columns of a rollup file, in order: the key (account, subaccount,
/// slot, product, type, country, direction, error code, hangup cause; an
/// absent text is the empty string), the record count, the units (a group
/// may sum many counts of up to `i64::MAX` each) and the sums.
pub(super) const ROLLUP: [FileColumn; 14] = [
    column("auth_id", ColumnType::Text, ColumnEncoding::Text),
    column("subaccount_auth", ColumnType::Text, ColumnEncoding::Text),
    column(SLOT_START, ColumnType::Int64, ColumnEncoding::Slots),
    column("product", ColumnType::Text, ColumnEncoding::Text),
    column("type", ColumnType::Text, ColumnEncoding::Text),
    column("country", ColumnType::Text, ColumnEncoding::Text),
    column("direction", ColumnType::Text, ColumnEncoding::Text),
    column("error_code", ColumnType::Text, ColumnEncoding::Text),
    column("hangup_cause", ColumnType::Text, ColumnEncoding::Text),
    column("records", ColumnType::Int64, ColumnEncoding::Int64),
    column("units", ColumnType::Decimal { scale: 0 }, ColumnEncoding::Decimal),
    column("duration_seconds", ColumnType::Decimal { scale: 9 }, ColumnEncoding::Decimal),
    column("amount", ColumnType::Decimal { scale: 9 }, ColumnEncoding::Decimal),
    column("surcharge", ColumnType::Decimal { scale: 9 }, ColumnEncoding::Decimal),
];

/// The rollup column of the slots' starts (UTC seconds).
pub(super) const SLOT_START: &str = "slot_start";

/// The scale of the decimal rollup column `name` (readers check the
/// file's type against it).
pub(super) fn rollup_scale(name: &str) -> Result<usize> {
    match ROLLUP.iter().find(|c| c.name == name).map(|c| c.type_) {
        Some(ColumnType::Decimal { scale }) => Ok(scale),
        _ => Err(Error::Internal(format!("'{name}' is no decimal rollup column"))),
    }
}

/// The Arrow schema of a file of `columns` (polars' mapping of their
/// types, the metadata its reader checks).
pub(super) fn schema(columns: &[FileColumn]) -> ArrowSchema {
    let columns: Vec<(&str, DataType)> = columns.iter().map(|c| (c.name, c.type_.dtype())).collect();
    arrow_schema(&columns)
}

/// The Arrow schema polars writes for columns of these types (its
/// `ARROW:schema` metadata, and so the types every reader gets back).
pub(super) fn arrow_schema(columns: &[(&str, DataType)]) -> ArrowSchema {
    let schema: Schema = columns.iter().map(|(name, dtype)| ((*name).into(), dtype.clone())).collect();
    schema.to_arrow(CompatLevel::newest())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{Dims, Totals};
    use crate::durable::Syncer;
    use crate::records::{parse_record, Field, Product};
    use crate::store::parquet_io::{write_records, RecordView};
    use crate::store::rollup::{RollupRef, RollupWriter};
    use polars_parquet::parquet::compression::Compression;
    use std::path::Path;

    /// The file at `path` holds `columns`, in order, of their types, and
    /// each column chunk is compressed as its encoding says: never
    /// ([`ColumnEncoding::Ids`], [`ColumnEncoding::Instants`]), or by [`CODEC`] (or not
    /// at all, for a decimal dictionary).
    fn holds(path: &Path, columns: &[FileColumn]) {
        let frame = crate::parquet::read_frame(path, None, crate::parquet::Rows::All).expect("read");
        let found: Vec<(String, DataType)> =
            frame.columns().iter().map(|c| (c.name().to_string(), c.dtype().clone())).collect();
        let declared: Vec<(String, DataType)> = columns.iter().map(|c| (c.name.to_owned(), c.type_.dtype())).collect();
        assert_eq!(found, declared, "{}", path.display());
        let file = crate::parquet::ParquetFile::open(path).expect("opened").expect("not empty");
        let (_, metadata) = file.into_parts();
        for group in &metadata.row_groups {
            for (chunk, column) in group.parquet_columns().iter().zip(columns) {
                let codec = chunk.compression();
                let allowed: &[Compression] = match column.encoding {
                    ColumnEncoding::Ids | ColumnEncoding::Instants => &[Compression::Uncompressed],
                    ColumnEncoding::Decimal => &[Compression::Uncompressed, Compression::Lz4Raw],
                    _ => &[Compression::Lz4Raw],
                };
                assert!(allowed.contains(&codec), "{}: {} is {codec:?}", path.display(), column.name);
            }
        }
        assert_eq!(CODEC, CompressionOptions::Lz4Raw);
    }

    /// A rollup file and a records file of each kind, as the writers
    /// write them, are what this module declares.
    #[test]
    fn the_writers_write_the_declared_columns() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("rollup.parquet");
        let rows: Vec<RollupRef<'_>> = (0..300)
            .map(|i| RollupRef {
                auth_id: "A1",
                slot: i / 3 * 900,
                dims: Dims {
                    product: Product::Voice,
                    type_: ["", "sip"][i as usize % 2],
                    subaccount: "",
                    country: None,
                    direction: None,
                    code: "",
                },
                totals: Totals { records: 1, units: 1, duration: i.into(), amount: (i * 7).into(), surcharge: 0 },
            })
            .collect();
        let mut writer = RollupWriter::create(&path).expect("created");
        writer.write(&rows).expect("written");
        writer.finish(&Syncer::at_once()).expect("finished");
        holds(&path, &ROLLUP);

        let values = |kind: Kind, i: usize| -> Vec<String> {
            kind.columns()
                .iter()
                .map(|name| match *name {
                    "record_id" => format!("r{i}"),
                    "auth_id" => "MA1".to_owned(),
                    "description" => "Number Charges".to_owned(),
                    "timestamp" => format!("2026-08-01T00:{:02}:00Z", i % 60),
                    "product" => "voice".to_owned(),
                    "direction" => "outbound".to_owned(),
                    "country" => "US".to_owned(),
                    "billed_seconds" | "duration_seconds" | "segments" | "units" => (i % 9 + 1).to_string(),
                    "amount" | "surcharge" => format!("0.{:03}", i % 999 + 1),
                    "type" => ["sms", "mms"][i % 2].to_owned(),
                    _ => String::new(),
                })
                .collect()
        };
        for kind in [Kind::Calls, Kind::Messages, Kind::Transcriptions, Kind::Charges] {
            let rows: Vec<Vec<String>> = (0..500).map(|i| values(kind, i)).collect();
            let fields: Vec<Vec<Field<'_>>> =
                rows.iter().map(|row| row.iter().map(|v| Field::Text(v.as_bytes())).collect()).collect();
            let parsed: Vec<_> = fields.iter().map(|f| parse_record(kind, f).expect("a record")).collect();
            let views: Vec<RecordView<'_>> = parsed
                .iter()
                .enumerate()
                .map(|(i, r)| RecordView { record: *r, source_file: "x.csv", source_line: i as u64 + 2 })
                .collect();
            let path = dir.path().join(format!("{}.parquet", kind.name()));
            write_records(&path, kind, &views[..], &Syncer::at_once()).expect("written");
            holds(&path, &records(kind).expect("columns"));
        }
    }
}
