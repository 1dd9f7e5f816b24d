//! The store's Parquet code (polars' crates, through telemeter) against
//! the `parquet` crate (arrow-rs), on the same rows and the same file:
//!
//! - write: the records of one calls CSV as a records file, by
//!   telemeter's writer (what ingest runs) and by arrow-rs' `ArrowWriter`
//!   set as the store is (row groups of 65,536 rows, LZ4_RAW, dictionaries
//!   but for `record_id` and `timestamp`, which are neither dictionary-
//!   encoded nor compressed). The records are parsed once, before.
//! - read: every row group of one rollup file, the columns a store answer
//!   reads (all but `auth_id`), by telemeter's reader and by arrow-rs'
//!   `ParquetRecordBatchReader` (text read as dictionaries, as telemeter
//!   reads it).
//!
//! The two alternate, `ROUNDS` times; medians. Run it with
//! `RAYON_NUM_THREADS=1` too: arrow-rs' writer and reader use one thread,
//! telemeter's use rayon's.
//!
//!     cargo run --release -- CALLS_CSV ROLLUP_FILE [ROUNDS]

use std::error::Error;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant as Clock};

use arrow_array::{ArrayRef, Decimal128Array, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use arrow_schema::{DataType, Field as ArrowField, Schema, TimeUnit};
use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;
use telemeter::records::{parse_record, Field, Kind, Record};
use telemeter::store::bench_hooks;

type Result<T> = std::result::Result<T, Box<dyn Error>>;

const ROW_GROUP_ROWS: usize = 64 * 1024;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let (Some(csv), Some(rollup)) = (args.get(1), args.get(2)) else {
        return Err("usage: parquet-crates CALLS_CSV ROLLUP_FILE [ROUNDS]".into());
    };
    let rounds: usize = args.get(3).map_or(Ok(5), |r| r.parse())?;
    let bytes = std::fs::read(csv)?;
    let mut reader = csv::ReaderBuilder::new().from_reader(&bytes[..]);
    let rows: Vec<csv::ByteRecord> = reader.byte_records().collect::<std::result::Result<_, _>>()?;
    let fields: Vec<Vec<Field<'_>>> = rows.iter().map(|row| row.iter().map(Field::Text).collect()).collect();
    let records: Vec<Record<'_>> = fields
        .iter()
        .map(|f| parse_record(Kind::Calls, f))
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| format!("{e:?}"))?;
    let dir = tempfile_dir()?;
    let (ours, theirs) = (dir.join("telemeter.parquet"), dir.join("arrow-rs.parquet"));
    let rollup = Path::new(rollup);
    let mut times: [Vec<Duration>; 4] = Default::default();
    let mut decoded = (0, 0);
    for _ in 0..rounds {
        let clock = Clock::now();
        bench_hooks::write_records(&ours, Kind::Calls, &records, "calls/part-000.csv")?;
        times[0].push(clock.elapsed());
        let clock = Clock::now();
        arrow_write(&theirs, &records)?;
        times[1].push(clock.elapsed());
        let clock = Clock::now();
        decoded.0 = bench_hooks::decode_rollup(rollup)?;
        times[2].push(clock.elapsed());
        let clock = Clock::now();
        decoded.1 = arrow_read(rollup)?;
        times[3].push(clock.elapsed());
    }
    if decoded.0 != decoded.1 {
        return Err(format!("decoded {} rows by telemeter, {} by arrow-rs", decoded.0, decoded.1).into());
    }
    let size = |path: &Path| std::fs::metadata(path).map(|m| m.len() as f64 / 1048576.0);
    let [write_ours, write_theirs, read_ours, read_theirs] = times.map(median);
    println!("rows written: {}, rollup rows read: {}, rounds: {rounds}", records.len(), decoded.0);
    println!(
        "write: telemeter {write_ours:.1?} ({:.1} MiB), arrow-rs {write_theirs:.1?} ({:.1} MiB): arrow-rs / telemeter {:.2}",
        size(&ours)?,
        size(&theirs)?,
        write_theirs.as_secs_f64() / write_ours.as_secs_f64()
    );
    println!(
        "read:  telemeter {read_ours:.2?}, arrow-rs {read_theirs:.2?}: arrow-rs / telemeter {:.2}",
        read_theirs.as_secs_f64() / read_ours.as_secs_f64()
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn tempfile_dir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("parquet-crates-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// The store's records columns of calls, as arrow-rs writes them.
fn arrow_write(path: &Path, records: &[Record<'_>]) -> Result<()> {
    let text = |name: &str| ArrowField::new(name, DataType::Utf8, false);
    let decimal = |name: &str| ArrowField::new(name, DataType::Decimal128(38, 9), false);
    let schema = Arc::new(Schema::new(vec![
        text("record_id"),
        text("auth_id"),
        text("subaccount_auth"),
        ArrowField::new("timestamp", DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), false),
        text("product"),
        text("type"),
        text("direction"),
        text("country"),
        decimal("billed_seconds"),
        decimal("amount"),
        decimal("surcharge"),
        text("hangup_cause"),
        text("source_file"),
        ArrowField::new("source_line", DataType::Int64, false),
    ]));
    let plain = |props: parquet::file::properties::WriterPropertiesBuilder, name: &str| {
        let column = ColumnPath::from(name);
        props
            .set_column_dictionary_enabled(column.clone(), false)
            .set_column_compression(column, Compression::UNCOMPRESSED)
    };
    let props = WriterProperties::builder()
        .set_compression(Compression::LZ4_RAW)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS));
    let props = plain(plain(props, "record_id"), "timestamp").build();
    let mut writer = ArrowWriter::try_new(File::create(path)?, schema.clone(), Some(props))?;
    for (n, chunk) in records.chunks(ROW_GROUP_ROWS).enumerate() {
        let strings = |f: &dyn for<'a> Fn(&'a Record<'a>) -> &'a str| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(chunk.iter().map(f)))
        };
        let decimals = |f: &dyn Fn(&Record<'_>) -> i64| -> Result<ArrayRef> {
            let values = Decimal128Array::from_iter_values(chunk.iter().map(|r| i128::from(f(r))));
            Ok(Arc::new(values.with_precision_and_scale(38, 9)?))
        };
        let instants = chunk.iter().map(|r| r.timestamp.secs * 1_000_000_000 + i64::from(r.timestamp.nanos));
        let first_line = (n * ROW_GROUP_ROWS) as i64 + 2;
        let columns: Vec<ArrayRef> = vec![
            strings(&|r| r.record_id),
            strings(&|r| r.auth_id),
            strings(&|r| r.subaccount),
            Arc::new(TimestampNanosecondArray::from_iter_values(instants).with_timezone("UTC")),
            strings(&|r| r.product.as_str()),
            strings(&|r| r.type_),
            strings(&|r| r.direction.map_or("", |d| d.as_str())),
            strings(&|r| r.country.map_or("", |c| c.as_static_str())),
            decimals(&|r| r.duration)?,
            decimals(&|r| r.amount)?,
            decimals(&|r| r.surcharge)?,
            strings(&|r| r.code),
            strings(&|_| "calls/part-000.csv"),
            Arc::new(Int64Array::from_iter_values((0..chunk.len() as i64).map(|i| first_line + i))),
        ];
        writer.write(&RecordBatch::try_new(schema.clone(), columns)?)?;
    }
    writer.close()?;
    Ok(())
}

/// The rows of every row group of the rollup file at `path`, its columns
/// but `auth_id`, text as dictionaries.
fn arrow_read(path: &Path) -> Result<usize> {
    let dictionary = DataType::Dictionary(Box::new(DataType::UInt32), Box::new(DataType::Utf8));
    let text = |name: &str| ArrowField::new(name, dictionary.clone(), true);
    let schema = Arc::new(Schema::new(vec![
        text("auth_id"),
        text("subaccount_auth"),
        ArrowField::new("slot_start", DataType::Int64, true),
        text("product"),
        text("type"),
        text("country"),
        text("direction"),
        text("error_code"),
        text("hangup_cause"),
        ArrowField::new("records", DataType::Int64, true),
        ArrowField::new("units", DataType::Decimal128(38, 0), true),
        ArrowField::new("duration_seconds", DataType::Decimal128(38, 9), true),
        ArrowField::new("amount", DataType::Decimal128(38, 9), true),
        ArrowField::new("surcharge", DataType::Decimal128(38, 9), true),
    ]));
    let options = ArrowReaderOptions::new().with_skip_arrow_metadata(true).with_schema(schema);
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(File::open(path)?, options)?;
    let mask = ProjectionMask::roots(builder.parquet_schema(), 1..14);
    let mut rows = 0;
    for batch in builder.with_projection(mask).with_batch_size(ROW_GROUP_ROWS).build()? {
        rows += batch?.num_rows();
    }
    Ok(rows)
}
