//! Rows that break the contract: what to do with one ([`OnBadRow`]), the
//! one collector every [`RowSink`](super::csv::RowSink) keeps them in
//! ([`BadRows`]: the pass's `Scan` and the ingest's `Chunk`), and the one
//! `rejected.csv` format that `report` ([`rejected_csv`]) and `ingest`
//! ([`RejectSpool`], [`write_rejected`]: on disk as they come) write.
//!
//! A bad row is either set aside (kept with its reason, counted, and the
//! reading goes on) or the first one stops the sink and becomes the error.
//! A pass over many files can share one stop position, so that every sink
//! stops reading once a row before it has failed (the run reports the first
//! failing row in file order either way).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::files::{Format, InputFile};
use super::{FieldError, Kind};
use crate::checksum::{FileSum, Summer};
use crate::error::{printable, BadRecord, Error, Location, Result};

/// What to do with a row that breaks the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnBadRow {
    /// Stop the run with an error naming the row.
    #[default]
    Fail,
    /// Set the row aside with its reason, count it, and go on.
    SetAside,
}

/// A row's place in a run over many files, file index first: the first
/// failing row is the one with the lowest position.
#[inline]
pub fn position(file: u32, line: u64) -> u64 {
    (file as u64) << 40 | line.min((1 << 40) - 1)
}

/// The bad rows one sink met (one file, or one chunk of a CSV file).
#[derive(Debug)]
pub struct BadRows<'a> {
    on_bad_row: OnBadRow,
    file: u32,
    file_name: String,
    is_parquet: bool,
    /// With [`OnBadRow::Fail`]: the lowest [`position`] of a failing row
    /// yet, shared by the sinks of a run so that they stop early.
    stop: Option<&'a AtomicU64>,
    rejects: Vec<BadRecord>,
    error: Option<BadRecord>,
}

impl<'a> BadRows<'a> {
    /// The collector of a sink reading `input`, the file at index `file` of
    /// its run; `stop` is the run's shared stop position, if it has one.
    pub fn new(input: &InputFile, file: u32, on_bad_row: OnBadRow, stop: Option<&'a AtomicU64>) -> BadRows<'a> {
        BadRows {
            on_bad_row,
            file,
            file_name: input.name.clone(),
            is_parquet: input.format == Format::Parquet,
            stop,
            rejects: Vec::new(),
            error: None,
        }
    }

    /// Whether a row of the run before `line` of this file has failed, so
    /// reading this file further is wasted.
    #[inline]
    pub fn should_stop(&self, line: u64) -> bool {
        self.on_bad_row == OnBadRow::Fail
            && self.stop.is_some_and(|stop| stop.load(Ordering::Relaxed) < position(self.file, line))
    }

    /// A bad row (one the reader could not split into fields, or any
    /// other); returns whether to go on reading.
    pub fn reject(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        let location = Location { file: self.file_name.clone(), line, is_row: self.is_parquet };
        let bad = BadRecord { location, column: column.to_owned(), value, reason };
        match self.on_bad_row {
            OnBadRow::SetAside => {
                self.rejects.push(bad);
                true
            }
            OnBadRow::Fail => {
                if let Some(stop) = self.stop {
                    stop.fetch_min(position(self.file, line), Ordering::Relaxed);
                }
                self.error = Some(bad);
                false
            }
        }
    }

    /// A line after which the file cannot be read as records
    /// ([`RowSink::unframed`](super::csv::RowSink::unframed)): the error,
    /// with either [`OnBadRow`]; returns `false`.
    pub fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        let location = Location { file: self.file_name.clone(), line, is_row: self.is_parquet };
        if let Some(stop) = self.stop {
            stop.fetch_min(position(self.file, line), Ordering::Relaxed);
        }
        self.error = Some(BadRecord { location, column: column.to_owned(), value, reason });
        false
    }

    /// A row of `kind` that `parse_record` refused; returns whether to go on.
    pub fn refused(&mut self, kind: Kind, line: u64, error: FieldError) -> bool {
        self.reject(line, kind.column_name(error.column), error.value, error.reason)
    }

    /// The rows set aside, in line order.
    pub fn rejects(&self) -> &[BadRecord] {
        &self.rejects
    }

    /// The rows set aside, taken out.
    pub fn take_rejects(&mut self) -> Vec<BadRecord> {
        std::mem::take(&mut self.rejects)
    }

    /// With [`OnBadRow::Fail`]: the bad row that stopped the sink, taken out.
    pub fn take_error(&mut self) -> Option<BadRecord> {
        self.error.take()
    }
}

/// The columns of `rejected.csv`.
pub const REJECT_COLUMNS: [&str; 5] = ["file", "line", "column", "value", "reason"];

/// `rejected.csv`: every row set aside, in file order, for `report` and
/// `ingest` alike. `line` is the number alone: the CSV line (the header is
/// line 1) or the Parquet row (`calls/a.parquet: row 41` in a message is
/// `calls/a.parquet,41,...` here). Text is escaped as in messages
/// ([`printable`]).
pub fn rejected_csv(rejects: &[BadRecord]) -> Result<Vec<u8>> {
    let mut writer = rejects_writer(Vec::new());
    writer.write_record(REJECT_COLUMNS).map_err(cannot_write)?;
    for bad in rejects {
        writer.write_record(reject_fields(bad)).map_err(cannot_write)?;
    }
    writer.into_inner().map_err(|e| Error::Internal(format!("cannot write CSV: {e}")))
}

fn rejects_writer<W: std::io::Write>(out: W) -> ::csv::Writer<W> {
    ::csv::WriterBuilder::new().buffer_capacity(1 << 16).from_writer(out)
}

fn cannot_write(e: ::csv::Error) -> Error {
    Error::Internal(format!("cannot write CSV: {e}"))
}

/// One row of `rejected.csv`.
fn reject_fields(bad: &BadRecord) -> [String; 5] {
    [
        printable(&bad.location.file).into_owned(),
        bad.location.line.to_string(),
        printable(&bad.column).into_owned(),
        printable(&bad.value).into_owned(),
        printable(&bad.reason).into_owned(),
    ]
}

/// Rows set aside, written to a file as they come (the rows of
/// `rejected.csv`, without its header, in the order given) rather than
/// held: a delivery may set aside every row of a day, hundreds of bytes a
/// row in memory. The file is created with the first row; it is deleted
/// when the spool is dropped, unless [`RejectSpool::keep`] kept it for
/// another process. [`write_rejected`] joins spools into `rejected.csv`.
#[derive(Debug)]
pub struct RejectSpool {
    path: PathBuf,
    file: Option<std::fs::File>,
    rows: u64,
}

impl RejectSpool {
    /// A spool at `path` (nothing is created before the first row).
    pub fn new(path: PathBuf) -> RejectSpool {
        RejectSpool { path, file: None, rows: 0 }
    }

    /// Whether no row was given.
    pub fn is_empty(&self) -> bool {
        self.file.is_none()
    }

    /// The rows given.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    fn file(&mut self) -> Result<&mut std::fs::File> {
        if self.file.is_none() {
            if let Some(parent) = self.path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            self.file = Some(std::fs::File::create(&self.path).map_err(|e| Error::io(&self.path, e))?);
        }
        Ok(self.file.as_mut().expect("created above"))
    }

    /// Appends `rejects`, in their order.
    pub fn append(&mut self, rejects: &[BadRecord]) -> Result<()> {
        if rejects.is_empty() {
            return Ok(());
        }
        let path = self.path.clone();
        let mut writer = rejects_writer(self.file()?);
        for bad in rejects {
            writer.write_record(reject_fields(bad)).map_err(|e| spool_error(&path, e))?;
        }
        writer.flush().map_err(|e| Error::io(&path, e))?;
        drop(writer);
        self.rows += rejects.len() as u64;
        Ok(())
    }

    /// Appends the rows of the spool another process kept at `path` (a
    /// line each: their text is [`printable`]).
    pub fn append_kept(&mut self, path: &Path) -> Result<()> {
        use std::io::Read;
        let mut from = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let to = self.path.clone();
        let file = self.file()?;
        let mut buffer = vec![0u8; 1 << 16];
        let mut rows = 0;
        loop {
            let read = from.read(&mut buffer).map_err(|e| Error::io(path, e))?;
            if read == 0 {
                break;
            }
            rows += memchr::memchr_iter(b'\n', &buffer[..read]).count() as u64;
            file.write_all(&buffer[..read]).map_err(|e| Error::io(&to, e))?;
        }
        self.rows += rows;
        Ok(())
    }

    /// Syncs the rows and leaves the file for another process to
    /// [`append_kept`](RejectSpool::append_kept).
    pub fn keep(mut self) -> Result<()> {
        if let Some(file) = self.file.take() {
            file.sync_all().map_err(|e| Error::io(&self.path, e))?;
        }
        Ok(())
    }
}

impl Drop for RejectSpool {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn spool_error(path: &Path, e: ::csv::Error) -> Error {
    match e.into_kind() {
        ::csv::ErrorKind::Io(e) => Error::io(path, e),
        other => Error::Internal(format!("cannot write CSV: {other:?}")),
    }
}

/// Writes `rejected.csv` at `path`: the header, then the rows of each
/// spool in turn (each then deleted); syncs it and returns its sum.
pub fn write_rejected(path: &Path, spools: Vec<RejectSpool>) -> Result<FileSum> {
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut out = Summed { file: std::io::BufWriter::with_capacity(1 << 16, file), summer: Summer::default() };
    let header = rejected_csv(&[])?;
    out.write_all(&header).map_err(|e| Error::io(path, e))?;
    for spool in spools {
        if spool.is_empty() {
            continue;
        }
        let mut rows = std::fs::File::open(&spool.path).map_err(|e| Error::io(&spool.path, e))?;
        std::io::copy(&mut rows, &mut out).map_err(|e| Error::io(path, e))?;
    }
    let file = out.file.into_inner().map_err(|e| Error::io(path, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io(path, e))?;
    Ok(out.summer.finish())
}

/// A writer that sums what goes through it.
struct Summed<W> {
    file: W,
    summer: Summer,
}

impl<W: std::io::Write> std::io::Write for Summed<W> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let written = self.file.write(bytes)?;
        self.summer.update(&bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(name: &str, format: Format) -> InputFile {
        InputFile { kind: Kind::Calls, path: name.into(), name: name.into(), format, size: 0, sum: None }
    }

    #[test]
    fn rejects_have_their_header_even_when_empty() {
        assert_eq!(rejected_csv(&[]).unwrap(), b"file,line,column,value,reason\n");
        let bad = BadRecord {
            location: Location { file: "calls/a.csv".into(), line: 7, is_row: false },
            column: "amount".into(),
            value: "1e3".into(),
            reason: "is not a decimal".into(),
        };
        assert_eq!(
            String::from_utf8(rejected_csv(&[bad]).unwrap()).unwrap(),
            "file,line,column,value,reason\ncalls/a.csv,7,amount,1e3,is not a decimal\n"
        );
    }

    #[test]
    fn control_characters_are_escaped_in_rejected_rows() {
        let bad = BadRecord {
            location: Location { file: "calls/a.csv".to_owned(), line: 7, is_row: false },
            column: "hangup_cause".to_owned(),
            value: "40\u{0}0\u{85}\n".to_owned(),
            reason: "contains a control character".to_owned(),
        };
        assert_eq!(
            String::from_utf8(rejected_csv(&[bad]).unwrap()).unwrap(),
            "file,line,column,value,reason\ncalls/a.csv,7,hangup_cause,40\\u{0}0\\u{85}\\n,contains a control character\n"
        );
    }

    fn bad(file: &str, line: u64, value: &str) -> BadRecord {
        let location = Location { file: file.to_owned(), line, is_row: false };
        BadRecord { location, column: "amount".to_owned(), value: value.to_owned(), reason: "is odd".to_owned() }
    }

    #[test]
    fn spools_write_what_rejected_csv_writes_and_leave_no_file() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let rows = [bad("calls/a.csv", 2, "1,5"), bad("calls/a.csv", 9, "\"x\"\n"), bad("voids/v.csv", 3, "")];
        let (first, second) = (dir.path().join("sub/first.part"), dir.path().join("second.part"));
        let mut spool = RejectSpool::new(first.clone());
        spool.append(&[]).expect("nothing appended");
        assert!(spool.is_empty() && !first.exists(), "no file before the first row");
        spool.append(&rows[..1]).expect("appended");
        spool.append(&rows[1..2]).expect("appended");
        // A spool another process kept, appended whole.
        let mut kept = RejectSpool::new(second.clone());
        kept.append(&rows[2..]).expect("appended");
        kept.keep().expect("kept");
        assert!(second.exists(), "a kept spool stays");
        spool.append_kept(&second).expect("appended");
        assert_eq!(spool.rows(), 3);
        let empty = RejectSpool::new(dir.path().join("empty.part"));
        let out = dir.path().join("rejected.csv");
        let sum = write_rejected(&out, vec![empty, spool]).expect("written");
        let written = std::fs::read(&out).expect("read");
        assert_eq!(written, rejected_csv(&rows).expect("csv"));
        assert_eq!(sum, FileSum::of(&written));
        assert!(!first.exists(), "a written spool is deleted");
        // A spool dropped unwritten (a failed run) deletes its file.
        let mut dropped = RejectSpool::new(dir.path().join("dropped.part"));
        dropped.append(&rows).expect("appended");
        drop(dropped);
        assert!(!dir.path().join("dropped.part").exists());
    }

    #[test]
    fn a_parquet_row_is_its_number_in_the_file_and_row_n_in_a_message() {
        let mut bad_rows = BadRows::new(&input("calls/a.parquet", Format::Parquet), 0, OnBadRow::SetAside, None);
        assert!(bad_rows.reject(41, "-", "x".into(), "is odd".into()));
        assert_eq!(bad_rows.rejects()[0].location.to_string(), "calls/a.parquet: row 41");
        assert_eq!(
            String::from_utf8(rejected_csv(bad_rows.rejects()).unwrap()).unwrap(),
            "file,line,column,value,reason\ncalls/a.parquet,41,-,x,is odd\n"
        );
    }

    #[test]
    fn the_first_failure_stops_the_rows_after_it_in_every_sink() {
        let stop = AtomicU64::new(u64::MAX);
        let mut first = BadRows::new(&input("calls/a.csv", Format::Csv), 0, OnBadRow::Fail, Some(&stop));
        let second = BadRows::new(&input("calls/b.csv", Format::Csv), 1, OnBadRow::Fail, Some(&stop));
        assert!(!second.should_stop(2));
        assert!(!first.reject(5, "-", String::new(), "bad".into()));
        assert!(first.rejects().is_empty());
        assert_eq!(first.take_error().map(|e| e.location.line), Some(5));
        assert!(second.should_stop(2), "a later file stops");
        assert!(!first.should_stop(5) && first.should_stop(6), "rows up to the failure are still read");
        let mut alone = BadRows::new(&input("calls/a.csv", Format::Csv), 0, OnBadRow::Fail, None);
        assert!(!alone.reject(5, "-", String::new(), "bad".into()));
        assert!(!alone.should_stop(6), "only a shared stop stops other rows");
        let set_aside = BadRows::new(&input("calls/c.csv", Format::Csv), 2, OnBadRow::SetAside, Some(&stop));
        assert!(!set_aside.should_stop(9), "rows set aside never stop a run");
    }
}
