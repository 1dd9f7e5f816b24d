//! The executor side of `ingest --engine spark`: one input file checked by
//! the hidden `spark-task` command, its valid rows written normalized for
//! the job, its set-aside rows as JSON.

use std::path::Path;

use polars::prelude::DataFrame;
use serde::{Deserialize, Serialize};

use super::super::ingest;
use super::super::parquet_io::{self, int_column, polars_error, text_column, RecordView};
use crate::aggregate::OnBadRow;
use crate::error::{BadRecord, Error, Location, Result};
use crate::records::dedup::Seen;
use crate::records::files::{Format, InputFile};
use crate::records::{Country, Direction, Kind};

/// What one `spark-task` run reports on its standard output (one JSON line).
#[derive(Debug, Serialize)]
pub struct TaskSummary {
    /// The file's index in the ingest's inventory.
    pub index: u32,
    /// Rows read.
    pub read: u64,
    /// Valid rows written to the checked file.
    pub valid: u64,
    /// Rows set aside.
    pub set_aside: u64,
    /// The first bad row, with `--on-bad-row fail`.
    pub error: Option<TaskError>,
}

/// A bad row as a task reports it.
#[derive(Debug, Serialize, Deserialize)]
pub struct TaskError {
    /// The file, as named in messages.
    pub file: String,
    /// Line or Parquet row.
    pub line: u64,
    /// Whether `line` is a Parquet row.
    pub is_row: bool,
    /// The column (or `-`).
    pub column: String,
    /// The value as read.
    pub value: String,
    /// Why it was refused.
    pub reason: String,
}

impl From<&BadRecord> for TaskError {
    fn from(bad: &BadRecord) -> TaskError {
        TaskError {
            file: bad.location.file.clone(),
            line: bad.location.line,
            is_row: bad.location.is_row,
            column: bad.column.clone(),
            value: bad.value.clone(),
            reason: bad.reason.clone(),
        }
    }
}

impl From<TaskError> for BadRecord {
    fn from(e: TaskError) -> BadRecord {
        BadRecord {
            location: Location { file: e.file, line: e.line, is_row: e.is_row },
            column: e.column,
            value: e.value,
            reason: e.reason,
        }
    }
}

/// The columns of a checked file and of the job's new rows.
pub(super) const CHECKED_COLUMNS: [&str; 19] = [
    "record_id",
    "auth_id",
    "subaccount",
    "secs",
    "nanos",
    "product",
    "type",
    "direction",
    "country",
    "units",
    "duration",
    "amount",
    "surcharge",
    "code",
    "file",
    "line",
    "id_hi",
    "id_lo",
    "content",
];

/// The Spark task of one input file: reads and checks it (as the local
/// ingest does), writes its valid rows to `out/<source>.parquet` and its
/// set-aside rows to `out/<source>.rejects.json`. A bad row with
/// [`OnBadRow::Fail`] is reported in the summary, not as an `Err` (the job
/// picks the first one over all files).
pub fn check_task(
    kind: Kind,
    path: &Path,
    name: &str,
    source: u32,
    on_bad_row: OnBadRow,
    out: &Path,
) -> Result<TaskSummary> {
    let format = Format::of(name).ok_or_else(|| Error::io(path, "not a csv, csv.gz, csv.zst or parquet file"))?;
    let size = std::fs::metadata(path).map_err(|e| Error::io(path, e))?.len();
    let file = InputFile { kind, path: path.to_owned(), name: name.to_owned(), format, size };
    let mut summary = TaskSummary { index: source, read: 0, valid: 0, set_aside: 0, error: None };
    let chunks = match ingest::check_file(kind, source, &file, on_bad_row) {
        Ok(chunks) => chunks,
        Err(Error::BadRecord(bad)) => {
            summary.error = Some(TaskError::from(&*bad));
            return Ok(summary);
        }
        Err(e) => return Err(e),
    };
    std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
    let mut rows: Vec<(RecordView<'_>, Seen)> = Vec::new();
    let mut rejects: Vec<TaskError> = Vec::new();
    for chunk in &chunks {
        summary.read += chunk.read();
        rejects.extend(chunk.rejects().iter().map(TaskError::from));
        rows.extend(chunk.valid_rows());
    }
    summary.valid = rows.len() as u64;
    summary.set_aside = rejects.len() as u64;
    if !rows.is_empty() {
        let path = out.join(format!("{source}.parquet"));
        write_checked(&path, &rows)?;
    }
    if !rejects.is_empty() {
        let path = out.join(format!("{source}.rejects.json"));
        let bytes = serde_json::to_vec(&rejects).map_err(|e| Error::Internal(format!("rejects: {e}")))?;
        super::super::write_synced(&path, &bytes)?;
    }
    Ok(summary)
}

/// Writes checked rows in [`CHECKED_COLUMNS`]: integers for time (UTC
/// seconds and nanoseconds) and money (nano-units), hashes as the bits of
/// an `i64`.
fn write_checked(path: &Path, rows: &[(RecordView<'_>, Seen)]) -> Result<()> {
    let ints = |f: &dyn Fn(&(RecordView<'_>, Seen)) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
    let texts = |f: &dyn for<'r> Fn(&'r (RecordView<'r>, Seen)) -> &'r str| rows.iter().map(f).collect::<Vec<&str>>();
    let units = rows.iter().map(|(r, _)| parquet_io::to_i64(r.units, "units")).collect::<Result<Vec<i64>>>()?;
    let lines = rows.iter().map(|(_, s)| parquet_io::to_i64(s.line, "line")).collect::<Result<Vec<i64>>>()?;
    let countries: Vec<&str> = rows.iter().map(|(r, _)| r.country.as_ref().map_or("", Country::as_str)).collect();
    let columns = vec![
        text_column("record_id", texts(&|(r, _)| r.record_id)),
        text_column("auth_id", texts(&|(r, _)| r.auth_id)),
        text_column("subaccount", texts(&|(r, _)| r.subaccount)),
        int_column("secs", ints(&|(r, _)| r.secs)),
        int_column("nanos", ints(&|(r, _)| i64::from(r.nanos))),
        text_column("product", texts(&|(r, _)| r.product.as_str())),
        text_column("type", texts(&|(r, _)| r.type_)),
        text_column("direction", texts(&|(r, _)| r.direction.map_or("", Direction::as_str))),
        text_column("country", countries),
        int_column("units", units),
        int_column("duration", ints(&|(r, _)| r.duration)),
        int_column("amount", ints(&|(r, _)| r.amount)),
        int_column("surcharge", ints(&|(r, _)| r.surcharge)),
        text_column("code", texts(&|(r, _)| r.code)),
        int_column("file", ints(&|(_, s)| i64::from(s.file))),
        int_column("line", lines),
        int_column("id_hi", ints(&|(_, s)| s.id.0 as i64)),
        int_column("id_lo", ints(&|(_, s)| s.id.1 as i64)),
        int_column("content", ints(&|(_, s)| s.content as i64)),
    ];
    let mut frame = DataFrame::new(rows.len(), columns).map_err(polars_error(path))?;
    parquet_io::write_frame(path, &mut frame)
}
