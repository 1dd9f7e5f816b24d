//! Parquet input, through polars: each contract column may hold its natural
//! type (timestamp, integer, decimal) or the string form.
//!
//! Integers of every width, signed or unsigned, are read as integers,
//! dictionary-encoded (categorical) strings as strings, and plain binary
//! (BYTE_ARRAY without the UTF8 annotation) as text checked row by row as
//! UTF-8; ranges are left to [`super::parse_record`], so that an
//! out-of-range value is a bad row like its CSV form. A 0-byte file holds
//! no rows, like a 0-byte CSV file.
//!
//! A file is read in parts (runs of row groups, [`read_parts`]: in
//! parallel, so that a large file is neither one core's work nor all in
//! memory at once as columns). A part's columns are turned into plain
//! vectors a slice of rows at a time, and those rows handed to the same
//! [`RowSink`] as CSV rows, numbered from 1 in the file.

use std::ops::Range;

use polars::prelude::{Column, DataFrame, DataType, TimeUnit};
use rayon::prelude::*;

use super::csv::RowSink;
use super::files::InputFile;
use super::{ColumnType, Field};
use crate::error::Result;
use crate::parquet::ParquetFile;
use crate::time::Instant;

/// One contract column, decoded.
enum Values<'a> {
    Null,
    Text(Vec<Option<&'a str>>),
    OwnedText(Vec<Option<String>>),
    /// Strings as older writers store them (BYTE_ARRAY without the UTF8
    /// annotation): checked as UTF-8 row by row, as CSV text is.
    Bytes(Vec<Option<&'a [u8]>>),
    Int(Vec<Option<i64>>),
    UInt(Vec<Option<u64>>),
    Decimal(Vec<Option<i128>>, usize),
    Time(Vec<Option<i64>>, i128),
}

impl Values<'_> {
    /// Bytes of text the column holds (0 unless it is text).
    fn text_bytes(&self) -> usize {
        match self {
            Values::Text(v) => v.iter().flatten().map(|s| s.len()).sum(),
            Values::OwnedText(v) => v.iter().flatten().map(String::len).sum(),
            Values::Bytes(v) => v.iter().flatten().map(|b| b.len()).sum(),
            _ => 0,
        }
    }

    fn field(&self, row: usize) -> Field<'_> {
        match self {
            Values::Null => Field::Null,
            Values::Text(v) => v[row].map_or(Field::Null, |s| Field::Text(s.as_bytes())),
            Values::OwnedText(v) => v[row].as_deref().map_or(Field::Null, |s| Field::Text(s.as_bytes())),
            Values::Bytes(v) => v[row].map_or(Field::Null, Field::Text),
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

/// Rows a part of a file holds at least: consecutive row groups are read
/// together until they do. A larger row group is a part of its own (writers
/// bound them: polars writes 250k rows or fewer, Arrow 1M, Spark 128 MiB).
const PART_ROWS: usize = 1 << 16;

/// A Parquet file opened for reading as records of one kind: its footer
/// read and its columns checked, and its row groups cut into parts of at
/// least [`PART_ROWS`] rows: (first row, row groups).
struct Parts<'f> {
    parquet: ParquetFile<'f>,
    parts: Vec<(u64, Range<usize>)>,
    /// The columns read: the kind's, then its optional one if the file has it.
    columns: Vec<&'static str>,
    /// Whether the id column (the first) is left unread ([`read_found`]).
    without_id: bool,
    /// The columns declared UUID ([`ParquetFile::uuid_columns`]).
    uuids: Vec<String>,
}

/// The record id of a row read without its id column.
pub const NO_ID: &str = "-";

impl<'f> Parts<'f> {
    /// `None` for a 0-byte file, which holds no rows.
    fn open(file: &'f InputFile) -> Result<Option<Parts<'f>>> {
        let kind = file.kind;
        let check = |bytes: &[u8]| file.sum.as_ref().map_or(Ok(()), |sum| sum.check(&file.path, bytes));
        let Some(parquet) = ParquetFile::open_checked(&file.path, check).map_err(|e| file.renamed(e))? else {
            return Ok(None);
        };
        let names = parquet.column_names();
        if let Some(name) = kind.columns().iter().find(|name| !names.iter().any(|n| n == *name)) {
            return Err(file.bad_file(format!("missing required column '{name}' (the file has: {})", names.join(", "))));
        }
        let optional = kind.optional_column();
        let has_optional = names.iter().any(|n| n == optional);
        let columns: Vec<&str> = kind.columns().iter().copied().chain(has_optional.then_some(optional)).collect();
        if let Some((name, precision, scale)) = parquet.wide_decimal(&columns) {
            return Err(file.bad_file(format!(
                "column '{name}' is DECIMAL({precision},{scale}): more than 38 digits, which no amount, count \
                 or revision needs; write it as DECIMAL(38,{}) or narrower",
                scale.min(38)
            )));
        }
        let parts = cut(parquet.row_groups(), PART_ROWS);
        let uuids = parquet.uuid_columns();
        Ok(Some(Parts { parquet, parts, columns, without_id: false, uuids }))
    }

    /// Reads the rows of the part `(first, groups)` that are in `wanted`
    /// (row indexes in the file, from 0) into `sink`, numbered from 1 in
    /// the file; whether the sink asks for more.
    fn read<S: RowSink>(
        &self,
        file: &InputFile,
        part: &(u64, Range<usize>),
        wanted: &Range<u64>,
        sink: &mut S,
    ) -> Result<bool> {
        let first = part.0;
        // The part's rows that are wanted, from its first.
        let rows = wanted.start.saturating_sub(first) as usize..wanted.end.saturating_sub(first) as usize;
        self.read_rows_of(file, part, Wanted::Range(rows), sink)
    }

    /// [`Parts::read`] of the rows `wanted` of the part.
    fn read_rows_of<S: RowSink>(
        &self,
        file: &InputFile,
        part: &(u64, Range<usize>),
        wanted: Wanted<'_>,
        sink: &mut S,
    ) -> Result<bool> {
        let (frame, rows) = self.frame_of(file, part, wanted)?;
        // The frame's columns are taken as values a slice of rows at a
        // time: values take 16 bytes a text field and row, about what the
        // frame itself holds, so a row group of millions of rows (Spark's
        // 128 MiB ones, or DuckDB's when told) is not held twice.
        let mut reserve = Some(rows.len());
        for slice in slices(&rows) {
            if !self.slice_into(file, &frame, part.0, slice, reserve.take(), sink)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The part's rows that are `wanted`, decoded: the frame, and each of
    /// its rows with its row in the part.
    fn frame_of(
        &self,
        file: &InputFile,
        (_, groups): &(u64, Range<usize>),
        wanted: Wanted<'_>,
    ) -> Result<(DataFrame, Vec<(usize, usize)>)> {
        let read = &self.columns[usize::from(self.without_id)..];
        let frame = match wanted {
            Wanted::Range(_) => self.parquet.read_row_groups(read, groups.clone()),
            Wanted::Picked(picked) => self.parquet.read_picked(read, groups.clone(), picked),
        };
        let frame = frame.map_err(|e| file.renamed(e))?;
        let rows: Vec<(usize, usize)> = match wanted {
            Wanted::Range(rows) => (rows.start..rows.end.min(frame.height())).map(|row| (row, row)).collect(),
            Wanted::Picked(picked) => picked.iter().copied().enumerate().collect(),
        };
        Ok((frame, rows))
    }

    /// Hands the rows `slice` of `frame` (one [`SLICE_ROWS`] run of it) to
    /// `sink`, numbered from `first` + 1; `reserve`: the rows the sink will
    /// be given in all, when this is its first slice. Whether the sink asks
    /// for more.
    fn slice_into<S: RowSink>(
        &self,
        file: &InputFile,
        frame: &DataFrame,
        first: u64,
        slice: &[(usize, usize)],
        reserve: Option<usize>,
        sink: &mut S,
    ) -> Result<bool> {
        // Without its id column, a row's first field is [`NO_ID`].
        let skip = usize::from(self.without_id);
        let read = &self.columns[skip..];
        let start = slice.first().map_or(0, |row| row.0 / SLICE_ROWS * SLICE_ROWS);
        let part_of = frame.slice(start as i64, SLICE_ROWS);
        let mut prepared: Vec<(Column, ColumnType)> = Vec::new();
        for (index, name) in read.iter().enumerate() {
            let column = part_of.column(name).map_err(|e| file.bad_file(format!("column '{name}': {e}")))?;
            let column = match self.uuids.iter().any(|uuid| uuid == name) {
                true => uuid_text(file, column)?,
                false => widen(file, column)?,
            };
            prepared.push((column, file.kind.column_type(index + skip)));
        }
        let mut columns = Vec::with_capacity(prepared.len());
        for ((column, expected), name) in prepared.iter().zip(read) {
            columns.push(decode(file, column, *expected, name)?);
        }
        if let (true, Some(rows)) = (S::ONE_PER_CHUNK, reserve) {
            // A sink that keeps every row keeps its text: about a third of
            // a CSV line, which `reserve` is told of (from this slice's).
            let text = columns.first().map_or(0, Values::text_bytes) * 3;
            sink.reserve(rows, text / part_of.height().max(1) * rows);
        }
        let mut fields = [Field::Ascii(NO_ID); 16];
        let fields = &mut fields[..read.len() + skip];
        for &(row, in_part) in slice {
            for (slot, values) in fields[skip..].iter_mut().zip(&columns) {
                *slot = values.field(row - start);
            }
            if !sink.row(first + in_part as u64 + 1, fields) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A part of more than two slices of wanted rows, decoded once and
    /// read a slice at a time in parallel, a sink each: a file of one
    /// large row group is not one core's work.
    fn read_sliced<S, F>(
        &self,
        file: &InputFile,
        part: &(u64, Range<usize>),
        wanted: &Range<u64>,
        make_sink: &F,
    ) -> Result<Vec<S>>
    where
        S: RowSink + Send,
        F: Fn() -> S + Sync,
    {
        let first = part.0;
        let rows = wanted.start.saturating_sub(first) as usize..wanted.end.saturating_sub(first) as usize;
        let (frame, rows) = self.frame_of(file, part, Wanted::Range(rows))?;
        let read: Vec<Result<S>> = slices(&rows)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|slice| {
                let mut sink = make_sink();
                self.slice_into(file, &frame, first, slice, Some(slice.len()), &mut sink)?;
                Ok(sink)
            })
            .collect();
        read.into_iter().collect()
    }
}

/// The runs of `rows` (frame row, row in the part) in one [`SLICE_ROWS`]
/// slice of the frame each.
fn slices(rows: &[(usize, usize)]) -> impl Iterator<Item = &[(usize, usize)]> {
    rows.chunk_by(|a, b| a.0 / SLICE_ROWS == b.0 / SLICE_ROWS)
}

/// Rows of a decoded part taken as values at a time ([`Parts::read_rows_of`]).
const SLICE_ROWS: usize = 1 << 16;

/// Row groups of `groups` rows each cut into parts of at least `part_rows`
/// rows (the last one may hold fewer): (first row, row groups) of each.
fn cut(groups: impl Iterator<Item = usize>, part_rows: usize) -> Vec<(u64, Range<usize>)> {
    let mut parts = Vec::new();
    let (mut first, mut start, mut rows, mut end) = (0u64, 0, 0, 0);
    for (index, group) in groups.enumerate() {
        (rows, end) = (rows + group, index + 1);
        if rows >= part_rows {
            parts.push((first, start..end));
            (first, start, rows) = (first + rows as u64, end, 0);
        }
    }
    if start < end {
        parts.push((first, start..end));
    }
    parts
}

/// Reads every row of a Parquet file into one sink, part after part.
pub fn read<S: RowSink>(file: &InputFile, sink: &mut S) -> Result<()> {
    let Some(parts) = Parts::open(file)? else { return Ok(()) };
    for part in &parts.parts {
        if !parts.read(file, part, &(0..u64::MAX), sink)? {
            break;
        }
    }
    Ok(())
}

/// Reads the rows `find` picks (indexes from 0, ascending) from the file
/// as opened (read from disk, and checked against its sum, once) into one
/// sink, numbered from 1: only the parts that hold any of them are read,
/// and in them only those rows are decoded (the others' values skipped in
/// their pages, [`ParquetFile::read_picked`]). Without `id`, the record id column
/// (the widest: its text does not compress) is not read, and each row's
/// id is [`NO_ID`]: for a caller that finds the rows by other columns.
pub(crate) fn read_found<S: RowSink>(
    file: &InputFile,
    find: impl FnOnce(&ParquetFile<'_>) -> Result<Vec<u64>>,
    id: bool,
    sink: &mut S,
) -> Result<()> {
    let Some(mut parts) = Parts::open(file)? else { return Ok(()) };
    parts.without_id = !id;
    let rows = find(&parts.parquet)?;
    let rows = &rows[..];
    let ends: Vec<u64> = parts.parts.iter().skip(1).map(|(first, _)| *first).chain([u64::MAX]).collect();
    for (part, end) in parts.parts.iter().zip(ends) {
        let (from, to) = (rows.partition_point(|&r| r < part.0), rows.partition_point(|&r| r < end));
        if from == to {
            continue;
        }
        let picked: Vec<usize> = rows[from..to].iter().map(|&r| (r - part.0) as usize).collect();
        if !parts.read_rows_of(file, part, Wanted::Picked(&picked), sink)? {
            break;
        }
    }
    Ok(())
}

/// The rows of a part to read, counted from its first.
enum Wanted<'r> {
    /// A run of rows (clipped to the part's).
    Range(Range<usize>),
    /// Rows found elsewhere, ascending: only they are decoded.
    Picked(&'r [usize]),
}

/// Reads every row of a Parquet file into sinks made by `make_sink`, as
/// [`super::csv::read_stream`] reads a CSV file: its parts (runs of row
/// groups of at least 64k rows) in parallel, a sink for each
/// part ([`RowSink::ONE_PER_CHUNK`]) or for each run of parts read by one
/// job; the sinks in file order. Only the parts being read are in memory
/// as frames. Of parts that fail, the first one's error.
pub fn read_parts<S, F>(file: &InputFile, make_sink: F) -> Result<Vec<S>>
where
    S: RowSink + Send,
    F: Fn() -> S + Sync,
{
    let Some(parts) = Parts::open(file)? else { return Ok(Vec::new()) };
    parts.read_rows(file, 0..u64::MAX, make_sink)
}

impl Parts<'_> {
    /// [`read_parts`] of the rows `wanted` (row indexes from 0): the
    /// parts that hold any of them.
    fn read_rows<S, F>(&self, file: &InputFile, wanted: Range<u64>, make_sink: F) -> Result<Vec<S>>
    where
        S: RowSink + Send,
        F: Fn() -> S + Sync,
    {
        let ends = self.parts.iter().skip(1).map(|(first, _)| *first).chain([u64::MAX]);
        let parts: Vec<&(u64, Range<usize>)> = self
            .parts
            .iter()
            .zip(ends)
            .filter(|((first, _), end)| *first < wanted.end && *end > wanted.start)
            .map(|(part, _)| part)
            .collect();
        // A part of more wanted rows than two slices is read a slice at a
        // time in parallel (one large row group); then each part gets
        // sinks of its own, in order.
        let groups: Vec<usize> = self.parquet.row_groups().collect();
        let wanted_rows = |(first, range): &(u64, Range<usize>)| {
            let end = first + groups.get(range.clone()).map_or(0, |g| g.iter().sum::<usize>()) as u64;
            end.min(wanted.end).saturating_sub((*first).max(wanted.start))
        };
        let large = |part: &&(u64, Range<usize>)| wanted_rows(part) > 2 * SLICE_ROWS as u64;
        if parts.iter().any(large) {
            let read: Vec<Result<Vec<S>>> = parts
                .par_iter()
                .map(|part| match large(part) {
                    true => self.read_sliced(file, part, &wanted, &make_sink),
                    false => {
                        let mut sink = make_sink();
                        self.read(file, part, &wanted, &mut sink)?;
                        Ok(vec![sink])
                    }
                })
                .collect();
            let read: Vec<Vec<S>> = read.into_iter().collect::<Result<_>>()?;
            return Ok(read.into_iter().flatten().collect());
        }
        // Collected in order, so that the error is the first part's.
        let read: Vec<Result<S>> = if S::ONE_PER_CHUNK {
            parts
                .par_iter()
                .map(|part| {
                    let mut sink = make_sink();
                    self.read(file, part, &wanted, &mut sink)?;
                    Ok(sink)
                })
                .collect()
        } else {
            parts
                .par_iter()
                .fold(
                    || Ok((make_sink(), true)),
                    |state: Result<(S, bool)>, part| {
                        let (mut sink, go_on) = state?;
                        let go_on = go_on && self.read(file, part, &wanted, &mut sink)?;
                        Ok((sink, go_on))
                    },
                )
                .map(|state| state.map(|(sink, _)| sink))
                .collect()
        };
        read.into_iter().collect()
    }
}

/// A Parquet file read a run of rows at a time ([`Pieces::next`]), as
/// [`super::csv::Pieces`] reads a CSV file: each run's parts in parallel.
pub struct Pieces<'f> {
    file: &'f InputFile,
    parts: Parts<'f>,
    /// The file's rows, and the index (from 0) of the next one to read.
    rows: u64,
    next: u64,
}

impl<'f> Pieces<'f> {
    /// `file` opened and its columns checked; `None` for a 0-byte file,
    /// which holds no rows.
    pub fn open(file: &'f InputFile) -> Result<Option<Pieces<'f>>> {
        let Some(parts) = Parts::open(file)? else { return Ok(None) };
        let rows = parts.parquet.num_rows() as u64;
        Ok(Some(Pieces { file, parts, rows, next: 0 }))
    }

    /// Reads the next `rows` rows (fewer at the end of the file) into
    /// sinks made by `make_sink`, in order; none once every row is read.
    pub fn next<S, F>(&mut self, rows: u64, make_sink: F) -> Result<Vec<S>>
    where
        S: RowSink + Send,
        F: Fn() -> S + Sync,
    {
        let wanted = self.next..self.next.saturating_add(rows).min(self.rows);
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        self.next = wanted.end;
        self.parts.read_rows(self.file, wanted, make_sink)
    }

    /// Whether every row has been read.
    pub fn done(&self) -> bool {
        self.next >= self.rows
    }

    /// The file's bytes on disk, in the share of its rows read so far.
    pub fn bytes_read(&self) -> u64 {
        match self.rows {
            0 => self.file.size,
            rows => (self.file.size as u128 * self.next as u128 / rows as u128) as u64,
        }
    }
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

/// A UUID column's 16-byte values as their text, lower-case
/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` (RFC 9562), as DuckDB and
/// pyarrow show them; a value of another length is left as it is (and
/// refused as text that is not UTF-8, naming its row).
fn uuid_text(file: &InputFile, column: &Column) -> Result<Column> {
    let DataType::Binary = column.dtype() else { return Ok(column.clone()) };
    let bytes = column.binary().map_err(|e| file.bad_file(format!("column '{}': {e}", column.name())))?;
    if bytes.iter().flatten().any(|value| value.len() != 16) {
        return Ok(column.clone());
    }
    // Each value written into one buffer, then appended: no allocation a row.
    let mut buffer = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let mut text = polars::prelude::StringChunkedBuilder::new(column.name().clone(), bytes.len());
    for value in bytes.iter() {
        match value.and_then(|b| uuid::Uuid::from_slice(b).ok()) {
            Some(id) => text.append_value(id.hyphenated().encode_lower(&mut buffer)),
            None => text.append_null(),
        }
    }
    Ok(polars::prelude::IntoColumn::into_column(text.finish()))
}

fn decode<'a>(file: &InputFile, column: &'a Column, expected: ColumnType, name: &str) -> Result<Values<'a>> {
    let wrong = |what: &str| file.bad_file(format!("column '{name}' holds {} values; expected {what}", column.dtype()));
    let polars = |e: polars::prelude::PolarsError| file.bad_file(format!("column '{name}': {e}"));
    let dtype = column.dtype().clone();
    Ok(match (&dtype, expected) {
        (DataType::Null, _) => Values::Null,
        (DataType::String, _) => Values::Text(column.str().map_err(polars)?.iter().collect()),
        (DataType::Binary, _) => Values::Bytes(column.binary().map_err(polars)?.iter().collect()),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_groups_are_cut_into_parts_of_at_least_the_part_rows() {
        let parts = cut([10; 15].into_iter(), 25);
        let starts: Vec<(u64, Range<usize>)> = vec![(0, 0..3), (30, 3..6), (60, 6..9), (90, 9..12), (120, 12..15)];
        assert_eq!(parts, starts);
        assert_eq!(cut([100, 5, 5, 30].into_iter(), 25), vec![(0, 0..1), (100, 1..4)]);
        assert_eq!(cut([5, 5].into_iter(), 25), vec![(0, 0..2)]);
        assert_eq!(cut([0, 0].into_iter(), 25), vec![(0, 0..2)]);
        assert_eq!(cut(std::iter::empty(), 25), vec![]);
    }
}
