//! An input file of any format read a run of its lines (Parquet: rows) at
//! a time, for a reader that keeps every row it reads (`ingest`): it then
//! holds one run of a large file's rows at once, not the whole file.
//!
//! A run of `n` lines is the next `n` data lines of the file, numbered as
//! every reader numbers them ([`first_line`] on), so where a run ends
//! depends only on the file's lines, not on its bytes or its format's
//! blocks: another engine that knows a row's line knows its run.

use super::csv::RowSink;
use super::files::{Format, InputFile};
use super::split::Split;
use super::{csv, parquet};
use crate::error::Result;

/// An input file opened for reading in runs of lines ([`Pieces::next`]).
pub enum Pieces<'f> {
    /// A CSV file (plain or compressed).
    Csv(csv::Pieces<'f>),
    /// A Parquet file.
    Parquet(parquet::Pieces<'f>),
    /// A file without rows (0 bytes, or a blank CSV file).
    Empty,
}

impl<'f> Pieces<'f> {
    /// `file`, opened as records of its kind (its header or columns checked).
    pub fn open(file: &'f InputFile) -> Result<Pieces<'f>> {
        Ok(match file.format {
            Format::Parquet => parquet::Pieces::open(file)?.map_or(Pieces::Empty, Pieces::Parquet),
            _ => csv::Pieces::open(file)?.map_or(Pieces::Empty, Pieces::Csv),
        })
    }

    /// Split `split` of `file`, a plain CSV file (`records::split`).
    pub fn open_split(file: &'f InputFile, split: &Split) -> Result<Pieces<'f>> {
        match file.format {
            Format::Csv => Ok(csv::Pieces::open_split(file, split)?.map_or(Pieces::Empty, Pieces::Csv)),
            _ => Err(crate::error::Error::Internal(format!("{}: only a plain CSV file is split", file.name))),
        }
    }

    /// Reads the next `lines` lines (about: a CSV record that spans lines
    /// is never cut; fewer at the end of the file) into
    /// sinks made by `make_sink`, as the format's whole-file reader would
    /// hand them over: the sinks in order, none once every line is read.
    pub fn next<S, F>(&mut self, lines: u64, make_sink: F) -> Result<Vec<S>>
    where
        S: RowSink + Send,
        F: Fn() -> S + Sync,
    {
        match self {
            Pieces::Csv(pieces) => pieces.next(lines, make_sink),
            Pieces::Parquet(pieces) => pieces.next(lines, make_sink),
            Pieces::Empty => Ok(Vec::new()),
        }
    }

    /// Whether every line has been read.
    pub fn done(&self) -> bool {
        match self {
            Pieces::Csv(pieces) => pieces.done(),
            Pieces::Parquet(pieces) => pieces.done(),
            Pieces::Empty => true,
        }
    }

    /// About how many of the file's bytes on disk have been read.
    pub fn bytes_read(&self) -> u64 {
        match self {
            Pieces::Csv(pieces) => pieces.bytes_read(),
            Pieces::Parquet(pieces) => pieces.bytes_read(),
            Pieces::Empty => 0,
        }
    }
}

/// The number of a file's first row: 2 in a CSV file (line 1 is the
/// header), 1 in a Parquet file (rows are numbered from 1).
pub fn first_line(format: Format) -> u64 {
    match format {
        Format::Parquet => 1,
        Format::Csv | Format::CsvGz | Format::CsvZst => 2,
    }
}
