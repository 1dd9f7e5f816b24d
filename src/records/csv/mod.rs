//! CSV input: plain, gzip and zstd (decoded by [`super::decode`]), any
//! column order, extra columns ignored.
//!
//! A record is a line, or the lines a quoted field spans up to its closing
//! quote (RFC 4180), numbered by its first line. Quoting that is not RFC
//! 4180 (a quote inside an unquoted field, text after a closing quote)
//! makes its line, and only that line, a malformed row; a quote that never
//! closes (by the input's end, or within [`MAX_LINE_BYTES`]) is the file's
//! error even where bad rows are set aside ([`RowSink::unframed`]): the
//! lines after it would be its field's. Every record is handed to the sink
//! once (a row or a malformed row), so `read` counts the file's records. A
//! final `\r` (CRLF endings) is dropped.
//!
//! Records rarely span lines, so a file's bytes are still cut into chunks
//! at newlines and the chunks parsed in parallel, each assuming it starts
//! a record. A chunk that ends inside a record says so
//! (`ChunkEnd::Open`): a block carries that record into the next one;
//! a body whose inner chunk did is read again whole by one reader, since
//! the chunk after it started inside a field.
//!
//! The steps, a file at a time:
//! - the header (`Header`) maps the contract's columns to the file's;
//! - the file is read whole ([`read`]) or a block at a time
//!   ([`read_stream`], [`Pieces`]; `stream`), its lines checked against
//!   the limits on their length and on empty lines;
//! - the body is split into chunks at newlines and the chunks are read in
//!   parallel; each chunk goes one of two ways:
//!   - `indexed`: a chunk of printable ASCII (quotes and carriage returns
//!     included, so every common dialect) is read by the structural index
//!     of `records::simd`, 64 bytes a step;
//!   - `lines`: any other chunk is read a line at a time, and so is any
//!     line the index finds faulty, so both ways refuse a line with the
//!     same words. This reader is the oracle the index is tested against
//!     (the property tests, and the `csv_paths` fuzz target);
//!   - a line whose quoted field does not close on it stops either pass,
//!     and `Reader::spanning_record` reads that record to its closing
//!     quote before the pass goes on after it.

use rayon::prelude::*;

use super::decode::Stream;
use super::files::InputFile;
use super::Field;
use crate::error::Result;
use lines::QuotedLine;
pub use stream::Pieces;
use stream::{Blocks, LineCheck};

mod indexed;
mod lines;
mod stream;
#[cfg(test)]
mod tests;

/// What a reader hands each row to.
pub trait RowSink {
    /// One row, its fields in [`Kind::columns`](super::Kind::columns) order. `false` stops reading.
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool;
    /// A row that could not be split into the header's fields: the header
    /// column at fault (`-` for the line as a whole), the line as shown and
    /// why. `false` stops reading.
    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool;
    /// A line whose quote is still open at its end: what follows may be
    /// its field (RFC 4180) as well as records, so it is an error whatever
    /// is done with bad rows, never a row set aside. As
    /// [`RowSink::malformed`] otherwise; `false` stops reading.
    fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool;

    /// Whether a large file's chunks each get a sink of their own, told
    /// their size first ([`RowSink::reserve`]): for sinks that keep every
    /// row (ingest), so that they are made at their size instead of grown
    /// by copying. By default consecutive chunks share a sink (one per
    /// parallel job): fewer partial results to merge.
    const ONE_PER_CHUNK: bool = false;

    /// The chunk about to be read: `lines` lines in `bytes` bytes (called
    /// once, before any row, when [`RowSink::ONE_PER_CHUNK`]).
    fn reserve(&mut self, _lines: usize, _bytes: usize) {}
}

/// The size of the chunks a CSV body is cut into and read in parallel
/// (a body of at most two is one chunk): smaller chunks spread a file
/// over more threads, larger ones leave fewer partial results to merge
/// and less set-up per chunk (re-tune with `bench/ab.sh` and
/// `bench/ingest-ab.sh`).
const CHUNK_BYTES: usize = 4 << 20;

/// The longest line a record file may hold, in bytes: 1 MiB, some 500
/// times a calls row of the contract's largest fields (twelve columns, ids
/// of at most 128 bytes, texts of at most [`super::MAX_TEXT_BYTES`]), so
/// that extra columns fit too; also the most a record whose quoted field
/// spans lines may take. A longer one is an error naming the file and the
/// line: a reader holds at most one line (or record) past a block.
pub const MAX_LINE_BYTES: usize = 1 << 20;

/// The most empty lines a record file may hold in a row. Each is a bad row
/// (set aside, with its reason, under `--on-bad-row set-aside`); a longer
/// run is an error naming the file and the run's first line, so that a
/// small compressed file of endless newlines is refused at once instead of
/// filling memory with rows set aside.
pub const MAX_EMPTY_RUN: u64 = 10_000;

/// Reads every row of a CSV file's `bytes` into sinks made by `make_sink`,
/// each taking a run of consecutive chunks; the sinks come in file order.
pub fn read<S, F>(file: &InputFile, bytes: &[u8], make_sink: F) -> Result<Vec<S>>
where
    S: RowSink + Send,
    F: Fn() -> S + Sync,
{
    read_in_chunks(file, bytes, CHUNK_BYTES, make_sink)
}

/// [`read`] with chunks of about `chunk_bytes`.
fn read_in_chunks<S, F>(file: &InputFile, bytes: &[u8], chunk_bytes: usize, make_sink: F) -> Result<Vec<S>>
where
    S: RowSink + Send,
    F: Fn() -> S + Sync,
{
    let Some(header) = Header::read(file, bytes)? else { return Ok(Vec::new()) };
    let body = &bytes[header.body..];
    let mut lines = LineCheck::new(2);
    let count = lines.check(body, true).map_err(|message| file.bad_file(message))?;
    let reader = header.reader();
    let (mut sinks, open) = reader.body(body, LineRange { first: 2, count }, chunk_bytes, &make_sink);
    if let (Some(open), Some(sink)) = (open, sinks.last_mut()) {
        reader.refuse_open(&body[open.at..], open.line, 0, sink);
    }
    Ok(sinks)
}

/// How a reader's pass over a chunk ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChunkEnd {
    /// Every record read.
    Done,
    /// The sink asked to stop.
    Stopped,
    /// The chunk ends inside the record from byte `at` (line `line`),
    /// whose quoted field runs past the chunk: that record is not read.
    Open { at: usize, line: u64 },
}

/// What [`Reader::spanning_record`] did with a record whose quoted field
/// spans lines.
pub(super) enum Spanned {
    /// Read: the next record is at byte `next`, line `line`.
    Read { next: usize, line: u64 },
    /// The sink asked to stop.
    Stopped,
    /// The chunk ends before the record does.
    Open,
}

/// A record that runs past the end of a body ([`Reader::body`]): where it
/// starts in the body, and its line.
#[derive(Clone, Copy, Debug)]
pub(super) struct OpenRecord {
    at: usize,
    line: u64,
}

/// Decoded bytes a stream ([`read_stream`]) is read in at a time: two per
/// file being read, so this sets the raw path's memory. Two chunks a block
/// keeps both cores busy; 32 MiB took 45 % more memory and 12 % more CPU,
/// 4 MiB was slower on gzip (re-tune with `bench/ab.sh` on plain and gzip
/// inputs).
const BLOCK_BYTES: usize = 8 << 20;

/// [`read`] of a file on disk (plain, or compressed with gzip or zstd),
/// read and decoded a block of about 8 MiB at a time (cut after its last
/// newline) into `buffers` (two, reused), the next block read while this
/// one is parsed: the file is never in memory whole, and reading overlaps
/// parsing. A damaged stream, a line longer than [`MAX_LINE_BYTES`], and
/// a file that changes while it is read are each an error naming the
/// file, wherever they are.
pub fn read_stream<S, F>(file: &InputFile, buffers: &mut [Vec<u8>; 2], make_sink: F) -> Result<Vec<S>>
where
    S: RowSink + Send,
    F: Fn() -> S + Sync,
{
    read_blocks(file, buffers, BLOCK_BYTES, make_sink).map_err(|e| file.renamed(e))
}

/// [`read_stream`] in blocks of about `block_bytes`.
fn read_blocks<S, F>(file: &InputFile, buffers: &mut [Vec<u8>; 2], block_bytes: usize, make_sink: F) -> Result<Vec<S>>
where
    S: RowSink + Send,
    F: Fn() -> S + Sync,
{
    let Some(stream) = Stream::open(&file.path, file.format)? else { return Ok(Vec::new()) };
    let mut blocks = Blocks::new(stream, std::mem::take(buffers), block_bytes);
    let read = blocks.header(file).and_then(|header| match header {
        Some(header) => blocks.lines(&header.reader(), 2, u64::MAX, &make_sink).map(|(sinks, _)| sinks),
        None => Ok(Vec::new()),
    });
    *buffers = blocks.buffers;
    read
}

/// A CSV file's header, read and checked against the contract.
struct Header {
    /// For each contract column, its index in the header.
    columns: Vec<usize>,
    /// The header's column names.
    names: Vec<String>,
    /// Where the lines after the header start.
    body: usize,
}

impl Header {
    /// The header of a file that starts with `bytes` (its first line, or
    /// all of it), or `None` for a blank file, which holds no rows.
    fn read(file: &InputFile, bytes: &[u8]) -> Result<Option<Header>> {
        if let Some((format, suffix)) = binary_format(bytes) {
            let why = match file.name.ends_with(suffix) {
                true => format!("holds {format} once decompressed: it was compressed twice"),
                false => format!("holds {format}, not CSV text: name it `{suffix}`"),
            };
            return Err(file.bad_file(why));
        }
        let text = super::decode::strip_bom(bytes);
        if text.iter().all(|b| b.is_ascii_whitespace()) {
            return Ok(None);
        }
        let header_end = memchr::memchr(b'\n', text).unwrap_or(text.len());
        if header_end > MAX_LINE_BYTES {
            return Err(file.bad_file(LineCheck::too_long(1)));
        }
        let mut header = QuotedLine::new();
        let names = match header.split(strip_cr(&text[..header_end])) {
            Ok(()) => header.fields().map(|name| String::from_utf8_lossy(name).into_owned()).collect::<Vec<_>>(),
            Err(quoting) => {
                return Err(file.bad_file(format!("unreadable header (line 1): {}", quoting.reason(&[]))));
            }
        };
        let columns = map_columns(file, &names)?;
        let body = (bytes.len() - text.len() + header_end + 1).min(bytes.len());
        Ok(Some(Header { columns, names, body }))
    }

    fn reader(&self) -> Reader<'_> {
        Reader::new(&self.columns, &self.names)
    }
}

impl<'h> Reader<'h> {
    /// The reader of the lines under a header of `names`, the contract's
    /// columns at `columns` (at most 16).
    pub(crate) fn new(columns: &'h [usize], names: &'h [String]) -> Reader<'h> {
        Reader { columns, width: names.len(), names }
    }
}

impl Reader<'_> {
    /// Reads `body` (whole lines after the header, numbered as `lines`
    /// says) into sinks made by `make_sink`, in chunks of about
    /// `chunk_bytes` read in parallel (see [`RowSink::ONE_PER_CHUNK`]);
    /// the sinks in order, and the record that runs past the body's end
    /// (unread), if one does.
    ///
    /// Chunks are cut at newlines, and a newline inside a quoted field is
    /// no record's end: a chunk after one that ends inside a record was
    /// read from the middle of it. Then the body is read again, whole, by
    /// one reader (a file whose quoted fields span lines across a cut).
    fn body<S, F>(
        &self,
        body: &[u8],
        lines: LineRange,
        chunk_bytes: usize,
        make_sink: &F,
    ) -> (Vec<S>, Option<OpenRecord>)
    where
        S: RowSink + Send,
        F: Fn() -> S + Sync,
    {
        let chunks = split(body, lines.first, chunk_bytes);
        let whole = || {
            let mut sink = make_sink();
            if S::ONE_PER_CHUNK {
                sink.reserve(lines.count as usize, body.len());
            }
            let open = match self.chunk(body, lines.first, &mut sink) {
                ChunkEnd::Open { at, line } => Some(OpenRecord { at, line }),
                _ => None,
            };
            (vec![sink], open)
        };
        if chunks.len() == 1 {
            return whole();
        }
        let last = chunks.len() - 1;
        // Each sink, and the chunks (by index) that ended inside a record.
        let read: Vec<(S, Vec<(usize, OpenRecord)>)> = if S::ONE_PER_CHUNK {
            // A chunk's lines run up to the next chunk's first line; the
            // last one's up to the end of `body`.
            let ends: Vec<u64> = chunks.iter().skip(1).map(|chunk| chunk.line).chain([lines.end()]).collect();
            chunks
                .into_par_iter()
                .zip(ends)
                .enumerate()
                .map(|(index, (Chunk { offset, line, end }, next))| {
                    let mut sink = make_sink();
                    sink.reserve(next.saturating_sub(line) as usize, end - offset);
                    let open = match self.chunk(&body[offset..end], line, &mut sink) {
                        ChunkEnd::Open { at, line } => vec![(index, OpenRecord { at: offset + at, line })],
                        _ => Vec::new(),
                    };
                    (sink, open)
                })
                .collect()
        } else {
            // Consecutive chunks share a sink (one per rayon job, not one
            // per chunk): fewer, larger partial results to merge later.
            chunks
                .into_par_iter()
                .enumerate()
                .fold(
                    || (make_sink(), true, Vec::new()),
                    |(mut sink, go_on, mut opens), (index, Chunk { offset, line, end })| {
                        if !go_on {
                            return (sink, false, opens);
                        }
                        let go_on = match self.chunk(&body[offset..end], line, &mut sink) {
                            ChunkEnd::Done => true,
                            ChunkEnd::Stopped => false,
                            ChunkEnd::Open { at, line } => {
                                opens.push((index, OpenRecord { at: offset + at, line }));
                                true
                            }
                        };
                        (sink, go_on, opens)
                    },
                )
                .map(|(sink, _, opens)| (sink, opens))
                .collect()
        };
        let opens: Vec<(usize, OpenRecord)> = read.iter().flat_map(|(_, opens)| opens.iter().copied()).collect();
        match opens.as_slice() {
            [] => (read.into_iter().map(|(sink, _)| sink).collect(), None),
            [(index, open)] if *index == last => (read.into_iter().map(|(sink, _)| sink).collect(), Some(*open)),
            _ => whole(),
        }
    }
}

/// The format of a file whose first bytes are another format's magic
/// number (gzip, zstd, Parquet): a compressed export saved as `.csv`, or
/// one compressed twice.
fn binary_format(bytes: &[u8]) -> Option<(&'static str, &'static str)> {
    const MAGIC: [(&[u8], &str, &str); 3] = [
        (b"\x1f\x8b", "gzip data", ".csv.gz"),
        (b"\x28\xb5\x2f\xfd", "zstd data", ".csv.zst"),
        (b"PAR1", "a Parquet file", ".parquet"),
    ];
    MAGIC.iter().find(|(magic, _, _)| bytes.starts_with(magic)).map(|(_, format, suffix)| (*format, *suffix))
}

/// Why a header holding a carriage return is refused (records files and
/// `accounts.csv` alike).
pub(crate) const CR_IN_HEADER: &str = "the header line holds a carriage return: its lines seem to end with CR alone \
     (classic Mac OS), where they must end with LF or CRLF";

/// The header index of each contract column, then of the kind's optional
/// column when the header has it.
fn map_columns(file: &InputFile, names: &[String]) -> Result<Vec<usize>> {
    if names.iter().any(|name| name.contains('\r')) {
        return Err(file.bad_file(CR_IN_HEADER));
    }
    let optional = file.kind.optional_column();
    let has_optional = names.iter().any(|n| n == optional);
    file.kind
        .columns()
        .iter()
        .chain(has_optional.then_some(&optional))
        .map(|column| {
            let mut found = names.iter().enumerate().filter(|(_, n)| *n == column).map(|(i, _)| i);
            match (found.next(), found.next()) {
                (Some(index), None) => Ok(index),
                (Some(_), Some(_)) => {
                    Err(file.bad_file(format!("column '{column}' appears more than once in the header")))
                }
                (None, _) => Err(file.bad_file(format!(
                    "missing required column '{column}' (the header has: {})",
                    crate::error::printable(&names.join(", "))
                ))),
            }
        })
        .collect()
}

/// A piece of a file's body that [`split`] cut: `body[offset..end]`, its
/// first line numbered `line`.
#[derive(Clone, Copy, Debug)]
struct Chunk {
    offset: usize,
    line: u64,
    end: usize,
}

/// The lines of a part of a file: the first one's number, and how many
/// (a last line without a newline counts).
#[derive(Clone, Copy, Debug)]
struct LineRange {
    first: u64,
    count: u64,
}

impl LineRange {
    /// The number of the line after the part.
    fn end(self) -> u64 {
        self.first + self.count
    }
}

/// Splits `body` into chunks of about `chunk_bytes`, each cut after a
/// newline. The chunks are found and counted in parallel (chunk `k`
/// starts after the first newline at or past `k * chunk_bytes`), so that
/// a file's first pass is not one core's.
fn split(body: &[u8], first_line: u64, chunk_bytes: usize) -> Vec<Chunk> {
    if body.len() <= chunk_bytes * 2 {
        return vec![Chunk { offset: 0, line: first_line, end: body.len() }];
    }
    let start = |k: usize| match k.checked_mul(chunk_bytes) {
        Some(0) => 0,
        Some(cut) if cut < body.len() => memchr::memchr(b'\n', &body[cut..]).map_or(body.len(), |at| cut + at + 1),
        _ => body.len(),
    };
    // Each chunk with its count of lines (its `line` set after).
    let counted: Vec<(Chunk, u64)> = (0..body.len().div_ceil(chunk_bytes))
        .into_par_iter()
        .map(|k| {
            let (offset, end) = (start(k), start(k + 1));
            let part = &body[offset..end.max(offset)];
            let lines = memchr::memchr_iter(b'\n', part).count() as u64;
            (Chunk { offset, line: 0, end }, lines)
        })
        .collect();
    let mut chunks = Vec::with_capacity(counted.len());
    let mut line = first_line;
    // A line longer than `chunk_bytes` leaves chunks with nothing in them.
    for (chunk, lines) in counted.into_iter().filter(|(chunk, _)| chunk.end > chunk.offset) {
        chunks.push(Chunk { line, ..chunk });
        line += lines;
    }
    chunks
}

/// The fields of one line of a CSV file (without its line ending) by the
/// rules of record files: RFC 4180 quoting within the line, no field
/// spanning lines. For small files read a line at a time (`accounts.csv`).
pub fn split_line(line: &[u8]) -> std::result::Result<Vec<Vec<u8>>, String> {
    let mut quoted = QuotedLine::new();
    quoted.split(strip_cr(line)).map_err(|quoting| quoting.reason(&[]))?;
    Ok(quoted.fields().map(<[u8]>::to_vec).collect())
}

/// `line` without a final carriage return (of a CRLF ending).
fn strip_cr(line: &[u8]) -> &[u8] {
    match line {
        [head @ .., b'\r'] => head,
        _ => line,
    }
}

/// What a chunk's lines are read against: the header.
pub(crate) struct Reader<'h> {
    /// For each contract column, its index in the header.
    columns: &'h [usize],
    /// Fields of the header.
    width: usize,
    /// The header's column names, for messages.
    names: &'h [String],
}

/// The column and reason of a line of `n_fields` fields under a header of
/// `names`: a short line names the first column it lacks (`has 5 fields,
/// the header has 9: column 'duration' is missing`), a long one the field
/// no column holds. Record files and `accounts.csv` say it the same way.
pub fn wrong_width(names: &[String], n_fields: usize) -> (&str, String) {
    let width = names.len();
    let plural = if n_fields == 1 { "" } else { "s" };
    let head = format!("has {n_fields} field{plural}, the header has {width}");
    match names.get(n_fields) {
        Some(missing) if n_fields < width => {
            let after = match width - n_fields - 1 {
                0 => String::new(),
                1 => " (and the 1 column after it)".to_owned(),
                n => format!(" (and the {n} columns after it)"),
            };
            let missing = missing.as_str();
            (missing, format!("{head}: column '{}'{after} is missing", crate::error::printable(missing)))
        }
        _ => ("-", format!("{head}: field {} and after have no column", width + 1)),
    }
}

/// A line as shown in a message: its first 80 characters.
fn shown(text: &[u8]) -> String {
    String::from_utf8_lossy(text).chars().take(80).collect()
}
