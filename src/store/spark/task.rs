//! The executor side of `ingest --engine spark`: one input file checked by
//! the hidden `spark-task` command, its valid rows written normalized for
//! the job, its set-aside rows as JSON.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::super::index::{self, IndexEntry};
use super::super::ingest::chunk;
use super::rows::{CheckedFile, RowsWriter};
use crate::aggregate::OnBadRow;
use crate::durable::Syncer;
use crate::error::{BadRecord, Error, Result};
use crate::records::bad_rows::RejectSpool;
use crate::records::dedup::Place;
use crate::records::files::{Format, InputFile};
use crate::records::pieces::Pieces;
use crate::records::split::Split;
use crate::records::Kind;

/// What one `spark-task` run reports on its standard output (one JSON line).
#[derive(Debug, Serialize)]
pub struct TaskSummary {
    /// The file's index in the ingest's inventory.
    pub index: u32,
    /// The split checked (0 for a file not split).
    pub split: u32,
    /// Rows read.
    pub read: u64,
    /// Valid rows written to the checked file.
    pub valid: u64,
    /// Rows set aside.
    pub set_aside: u64,
    /// The first bad row, with `--on-bad-row fail`, or what is wrong with
    /// the whole file.
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
    /// Whether the whole file is refused ([`Error::BadFile`]): `reason` is
    /// the message; `line`, `column` and `value` are unused.
    #[serde(default)]
    pub whole_file: bool,
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
            whole_file: false,
        }
    }
}

/// A split of a plain CSV file (`records::split`) and its number, which
/// names its checked files.
#[derive(Clone, Copy, Debug)]
pub struct NumberedSplit {
    /// Its number in the file.
    pub number: u32,
    /// Its bytes and first line.
    pub split: Split,
}

/// What a check task reads: an input file, or one of its splits.
#[derive(Clone, Copy, Debug)]
pub struct TaskInput<'a> {
    /// The record kind.
    pub kind: Kind,
    /// The file.
    pub path: &'a Path,
    /// Its name in messages.
    pub name: &'a str,
    /// Its index in the ingest's inventory.
    pub source: u32,
    /// The split to read; `None`: the whole file.
    pub split: Option<NumberedSplit>,
    /// The file's size when it was split.
    pub size: Option<u64>,
}

/// The Spark task of one input file or split: reads and checks it (as the
/// local ingest does), writes its valid rows to `out/<source>.<split>.rows`,
/// their dedup entries to `out/<source>.<split>.index` (an index file: id
/// and content hashes, place as (source, line), by id-hash partition, for
/// the dedup tasks) and its set-aside rows to
/// `out/<source>.<split>.rejects.csv` (`rows::CheckedFile`: the rows of
/// `rejected.csv`, written as they come). A bad row with
/// [`OnBadRow::Fail`] is reported in the summary, not as an `Err` (the job
/// picks the first one over all files). The file is read in runs of
/// `TASK_RUN_LINES` (1M) lines, each appended to the checked-rows file, so
/// that a task holds one run of rows whatever the file's size (and the
/// file's dedup entries, 32 bytes a row, which the index layout groups by
/// partition once all are known).
pub fn check_task(input: TaskInput<'_>, on_bad_row: OnBadRow, out: &Path) -> Result<TaskSummary> {
    let TaskInput { kind, path, name, source, split, size } = input;
    let format = Format::of(name).ok_or_else(|| Error::io(path, "not a csv, csv.gz, csv.zst or parquet file"))?;
    let size = match size {
        Some(size) => size,
        None => std::fs::metadata(path).map_err(|e| Error::io(path, e))?.len(),
    };
    let file = InputFile { kind, path: path.to_owned(), name: name.to_owned(), format, size, sum: None };
    check_in_runs(&file, source, split, on_bad_row, out, TASK_RUN_LINES)
}

/// What a quoted field left open at a split's end is said to reach (for
/// "by the end of the input"): a split cannot tell that its cut falls
/// inside a field (decisions.md).
const SPLIT_END: &str = "by the end of its Spark split (a plain CSV file past --spark-split-mb is cut where lines \
                         start, and a quoted field across a cut is refused; the local engine reads it)";

/// [`check_task`] of `file` (or of its `split`), reading `run_lines`
/// lines at a time.
fn check_in_runs(
    file: &InputFile,
    source: u32,
    split: Option<NumberedSplit>,
    on_bad_row: OnBadRow,
    out: &Path,
    run_lines: u64,
) -> Result<TaskSummary> {
    let number = split.map_or(0, |split| split.number);
    let mut summary = TaskSummary { index: source, split: number, read: 0, valid: 0, set_aside: 0, error: None };
    let checked = CheckedFile::in_folder(out, source, number);
    let mut rejects = RejectSpool::new(checked.rejects.clone());
    let mut entries: Vec<IndexEntry> = Vec::new();
    let written = (|| -> Result<()> {
        let mut pieces = match &split {
            Some(NumberedSplit { split, .. }) => Pieces::open_split(file, split)?,
            None => Pieces::open(file)?,
        };
        std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
        let mut writer: Option<RowsWriter> = None;
        while !pieces.done() {
            let chunks = chunk::check_run(source, file, &mut pieces, run_lines, on_bad_row)?;
            for chunk in &chunks {
                summary.read += chunk.read();
                summary.set_aside += chunk.rejects().len() as u64;
                rejects.append(chunk.rejects())?;
                for (view, seen) in chunk.valid_rows() {
                    let writer = match &mut writer {
                        Some(writer) => writer,
                        None => writer.insert(RowsWriter::create(&checked)?),
                    };
                    writer.push(&view, &seen)?;
                    summary.valid += 1;
                    let place = index::pack(Place { file: seen.file, line: seen.line });
                    entries.push(IndexEntry { id: seen.id, content: seen.content, place });
                }
            }
        }
        if let Some(writer) = writer {
            writer.finish()?;
        }
        if !entries.is_empty() {
            index::write_index(&checked.entries, &[&entries], &Syncer::at_once())?;
        }
        Ok(())
    })();
    let error = match written {
        Ok(()) => None,
        Err(Error::BadRecord(bad)) => {
            let mut error = TaskError::from(&*bad);
            // A split ends at a cut, not at the file's end: say so.
            if split.is_some() {
                error.reason = error.reason.replace("by the end of the input", SPLIT_END);
            }
            Some(error)
        }
        Err(Error::BadFile { path, message }) => Some(TaskError {
            file: path.to_string_lossy().into_owned(),
            line: 0,
            is_row: false,
            column: String::new(),
            value: String::new(),
            reason: message,
            whole_file: true,
        }),
        // The input file itself cannot be read (a damaged gzip or zstd
        // stream, a Parquet file cut short): its error, as the local engine
        // says it, not a failed task for Spark to run again.
        Err(Error::Io { path, source }) if path == file.path || path.as_os_str() == file.name.as_str() => {
            Some(TaskError {
                file: file.name.clone(),
                line: 0,
                is_row: false,
                column: String::new(),
                value: String::new(),
                reason: source.to_string(),
                whole_file: true,
            })
        }
        Err(e) => return Err(e),
    };
    if error.is_some() {
        // A file that failed: its error, and no checked file or counts.
        for path in [&checked.rows, &checked.places, &checked.offsets, &checked.entries] {
            let _ = std::fs::remove_file(path);
        }
        return Ok(TaskSummary { index: source, split: number, read: 0, valid: 0, set_aside: 0, error });
    }
    rejects.keep()?;
    Ok(summary)
}

/// Lines of an input file a Spark task reads and writes at a time: the
/// local ingest's runs at its default batch size.
const TASK_RUN_LINES: u64 =
    super::super::IngestOptions::DEFAULT_BATCH_BYTES / super::super::ingest::batches::PIECE_ROW_BYTES;

#[cfg(test)]
mod tests {
    use super::super::rows::RowsFile;
    use super::*;

    /// A file checked in runs of a few lines writes the checked file and
    /// the set-aside rows it writes when read whole (one run), and reports
    /// the same first bad row.
    #[test]
    fn a_file_checked_in_runs_writes_what_it_writes_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut text = String::from("record_id,auth_id,timestamp,description,units,amount\n");
        for i in 0..100 {
            match i {
                40 => text.push_str("x40,A1,not a time,CNAM Lookup,1,0.1\n"),
                _ => text.push_str(&format!(
                    "x{i},A{},2026-11-20T00:00:{:02}Z,CNAM Lookup,{i},1.{i:02}\n",
                    i % 3,
                    i % 60
                )),
            }
        }
        let input = dir.path().join("charges.csv");
        std::fs::write(&input, &text).expect("write");
        let (name, format, size) = ("charges/a.csv".to_owned(), Format::Csv, text.len() as u64);
        let file = InputFile { kind: Kind::Charges, path: input.clone(), name, format, size, sum: None };
        let checked = |run_lines: u64, on_bad_row: OnBadRow| {
            let out = dir.path().join(format!("out-{run_lines}-{on_bad_row:?}"));
            let summary = check_in_runs(&file, 3, None, on_bad_row, &out, run_lines).expect("checked");
            let frame = std::fs::read(out.join("3.0.rows")).ok();
            let rejects = std::fs::read_to_string(out.join("3.0.rejects.csv")).unwrap_or_default();
            (serde_json::to_string(&summary).expect("json"), frame, rejects)
        };
        let (summary, frame, rejects) = checked(u64::MAX, OnBadRow::SetAside);
        assert!(summary.contains("\"read\":100,\"valid\":99,\"set_aside\":1"), "{summary} {rejects}");
        assert!(rejects.starts_with("charges/a.csv,42,"), "{rejects}");
        let frame = frame.expect("valid rows");
        let rows = RowsFile::read(&dir.path().join(format!("out-{}-{:?}/3.0.rows", u64::MAX, OnBadRow::SetAside)))
            .expect("a checked-rows file");
        assert_eq!(rows.len(), 99);
        let row = rows.row(98).expect("the last row");
        assert_eq!((row.view.record.record_id, row.seen.line, row.view.record.amount), ("x99", 101, 1_990_000_000));
        for run_lines in [1, 7, 41, 99] {
            let (s, f, r) = checked(run_lines, OnBadRow::SetAside);
            assert_eq!((s, r), (summary.clone(), rejects.clone()), "runs of {run_lines}");
            assert!(f.expect("valid rows") == frame, "runs of {run_lines}");
            // Failing: the bad row, and no checked file.
            let (s, f, _) = checked(run_lines, OnBadRow::Fail);
            assert!(s.contains("\"line\":42") && s.contains("not a time"), "{s}");
            assert!(f.is_none(), "runs of {run_lines}: a checked file of a failed file");
        }
    }

    /// A fault of the whole file (here a header without a required
    /// column) is the summary's error, with the local reader's message,
    /// whatever `--on-bad-row` says: not a failed task.
    #[test]
    fn a_bad_file_is_the_summarys_error_with_the_local_message() {
        let dir = tempfile::tempdir().expect("tempdir");
        let input = dir.path().join("charges.csv");
        std::fs::write(&input, "record_id,auth_id,timestamp,units,amount\nx1,A1,2026-11-20T00:00:00Z,1,0.1\n")
            .expect("write");
        let size = std::fs::metadata(&input).expect("size").len();
        let (name, format) = ("charges/a.csv".to_owned(), Format::Csv);
        let file = InputFile { kind: Kind::Charges, path: input.clone(), name, format, size, sum: None };
        let local = match crate::records::pieces::Pieces::open(&file) {
            Err(e @ Error::BadFile { .. }) => e.to_string(),
            other => panic!("not a bad file: {:?}", other.map(|_| ())),
        };
        for on_bad_row in [OnBadRow::Fail, OnBadRow::SetAside] {
            let out = dir.path().join(format!("out-{on_bad_row:?}"));
            let summary = check_in_runs(&file, 3, None, on_bad_row, &out, u64::MAX).expect("a summary");
            let error = summary.error.expect("the file's error");
            assert!(error.whole_file, "{error:?}");
            assert_eq!(format!("{}: {}", error.file, error.reason), local);
            assert!(local.contains("missing required column 'description'"), "{local}");
            assert_eq!((summary.read, summary.valid), (0, 0));
        }
    }
}
