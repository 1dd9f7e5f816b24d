//! CSV input: plain, gzip and zstd (decoded by [`super::decode`]), any
//! column order, extra columns ignored.
//!
//! Every physical line after the header is one record: no field may hold a
//! newline, so a newline is always a record boundary. A quote that does not
//! close on its own line (or any other quoting that is not RFC 4180 within
//! the line) makes that line, and only that line, a malformed row; damage
//! never swallows or merges the lines after it, and every line is handed to
//! the sink exactly once (a row or a malformed row), so `read` counts the
//! file's data lines. A final `\r` (CRLF endings) is dropped. Since every
//! newline is a boundary, a file's bytes are split into chunks at any
//! newline and the chunks are parsed in parallel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rayon::prelude::*;

use super::decode::Stream;
use super::files::InputFile;
use super::simd::{printable_unquoted_text, split_commas, Commas, Line};
use super::Field;
use crate::error::{Error, Result};

/// What a reader hands each row to.
pub trait RowSink {
    /// One row, its fields in [`Kind::columns`](super::Kind::columns) order. `false` stops reading.
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool;
    /// A row that could not be split into the header's fields: the header
    /// column at fault (`-` for the line as a whole), the line as shown and
    /// why. `false` stops reading.
    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool;

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

/// Chunks smaller than this are not split further.
const CHUNK_BYTES: usize = 4 << 20;

/// The longest line a record file may hold, in bytes: 1 MiB, some 500
/// times a calls row of the contract's largest fields (twelve columns, ids
/// of at most 128 bytes, texts of at most [`super::MAX_TEXT_BYTES`]), so
/// that extra columns fit too. A longer line is an error naming the file
/// and the line: a reader holds at most one line past a block in memory.
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
    read_in_chunks(file, bytes, CHUNK_BYTES, make_sink, &|_| ())
}

/// [`read`] with chunks of about `chunk_bytes`, handing each part of
/// `bytes` read to the end to `done` (chunks once counted, and once read).
fn read_in_chunks<S, F>(
    file: &InputFile,
    bytes: &[u8],
    chunk_bytes: usize,
    make_sink: F,
    done: &(dyn Fn(&[u8]) + Sync),
) -> Result<Vec<S>>
where
    S: RowSink + Send,
    F: Fn() -> S + Sync,
{
    let Some(header) = Header::read(file, bytes)? else { return Ok(Vec::new()) };
    let body = &bytes[header.body..];
    let mut lines = LineCheck::new(2);
    lines.check(body, true).map_err(|message| file.bad_file(message))?;
    Ok(header.reader().body(body, 2, chunk_bytes, &make_sink, done))
}

/// Decoded bytes a stream ([`read_stream`]) is read in at a time.
const BLOCK_BYTES: usize = 32 << 20;

/// [`read`] of a file on disk (plain, or compressed with gzip or zstd),
/// read and decoded a block of about 32 MiB at a time (cut after its last
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

/// A decoded stream's lines, a block at a time: the block being read and
/// the next one, decoded meanwhile.
struct Blocks<'p> {
    stream: Stream<'p>,
    /// This block, from `start` on not read yet; and the next one.
    buffers: [Vec<u8>; 2],
    start: usize,
    /// Whether the stream has no more bytes than this block's.
    ended: bool,
    block_bytes: usize,
    /// The lines of this block checked so far ([`LineCheck`]), up to
    /// `checked`.
    lines: LineCheck,
    checked: usize,
}

impl<'p> Blocks<'p> {
    /// `stream`'s blocks of about `block_bytes`, decoded into `buffers`.
    fn new(stream: Stream<'p>, buffers: [Vec<u8>; 2], block_bytes: usize) -> Blocks<'p> {
        Blocks { stream, buffers, start: 0, ended: false, block_bytes, lines: LineCheck::new(2), checked: 0 }
    }

    /// Reads the first block (more while it holds no whole first line of
    /// a file that is not blank) and the file's header from it: `None`
    /// for a blank file. The lines after the header are read next.
    fn header(&mut self, file: &InputFile) -> Result<Option<Header>> {
        let block = &mut self.buffers[0];
        block.clear();
        self.ended = self.stream.fill(block, self.block_bytes)?;
        // Whether the first line is blank and longer than a line may be:
        // an error once anything but blanks follows (a blank file is
        // blank, whatever its size).
        let mut long_blank = false;
        loop {
            let blank = block.iter().all(u8::is_ascii_whitespace);
            if long_blank && !blank {
                return Err(file.bad_file(LineCheck::too_long(1)));
            }
            if self.ended {
                break;
            }
            match memchr::memchr(b'\n', block) {
                None if block.len() > MAX_LINE_BYTES && blank => {
                    long_blank = true;
                    block.clear();
                }
                None if block.len() > MAX_LINE_BYTES => return Err(file.bad_file(LineCheck::too_long(1))),
                None => {}
                // Blank so far: whether the file is blank or its first
                // line is its header depends on the rest; only the first
                // line is kept meanwhile.
                Some(newline) if blank => block.truncate(newline + 1),
                Some(_) => break,
            }
            self.ended = self.stream.fill(block, block.len().saturating_add(self.block_bytes))?;
        }
        let header = Header::read(file, block)?;
        self.start = header.as_ref().map_or(block.len(), |header| header.body);
        self.checked = self.start;
        Ok(header)
    }

    /// Whether every line has been read.
    fn done(&self) -> bool {
        self.ended && self.start >= self.buffers[0].len()
    }

    /// Reads up to `limit` lines (the first numbered `line`) into sinks
    /// made by `make_sink`: the sinks in order, and the lines read (fewer
    /// than `limit` only at the end of the stream).
    fn lines<S, F>(&mut self, reader: &Reader<'_>, mut line: u64, limit: u64, make_sink: &F) -> Result<(Vec<S>, u64)>
    where
        S: RowSink + Send,
        F: Fn() -> S + Sync,
    {
        let (mut sinks, mut read) = (Vec::new(), 0u64);
        while read < limit && !self.done() {
            let Blocks { stream, buffers: [block, next], start, ended, block_bytes, lines: check, checked } = self;
            let end = match *ended {
                true => block.len(),
                false => match memchr::memrchr(b'\n', &block[*start..]) {
                    Some(at) => *start + at + 1,
                    None if block.len() - *start > MAX_LINE_BYTES => {
                        return Err(Error::bad_file(stream.path(), LineCheck::too_long(line)));
                    }
                    None => {
                        // A line longer than a block: read on to its end.
                        *ended = stream.fill(block, block.len().saturating_add(*block_bytes))?;
                        continue;
                    }
                },
            };
            if *checked < end {
                check
                    .check(&block[*checked..end], *ended)
                    .map_err(|message| Error::bad_file(stream.path(), message))?;
                *checked = end;
            }
            let body = &block[*start..end];
            let newlines = memchr::memchr_iter(b'\n', body).count() as u64;
            let lines = newlines + u64::from(!body.is_empty() && !body.ends_with(b"\n"));
            if lines > limit - read {
                // The limit falls in this block: read up to its line, and
                // leave the rest for the next call.
                let wanted = (limit - read) as usize;
                let cut = memchr::memchr_iter(b'\n', body).nth(wanted - 1).map_or(body.len(), |at| at + 1);
                sinks.extend(reader.body(&body[..cut], line, CHUNK_BYTES, make_sink, &|_| ()));
                *start += cut;
                return Ok((sinks, limit));
            }
            next.clear();
            next.extend_from_slice(&block[end..]);
            // The next block is read, and its whole lines checked, while
            // this one is parsed.
            let (read_block, filled) = rayon::join(
                || reader.body(body, line, CHUNK_BYTES, make_sink, &|_| ()),
                || -> Result<(bool, usize)> {
                    if *ended {
                        return Ok((true, 0));
                    }
                    let last = stream.fill(next, *block_bytes)?;
                    let whole = match last {
                        true => next.len(),
                        false => memchr::memrchr(b'\n', next).map_or(0, |at| at + 1),
                    };
                    check.check(&next[..whole], last).map_err(|message| Error::bad_file(stream.path(), message))?;
                    Ok((last, whole))
                },
            );
            sinks.extend(read_block);
            (read, line) = (read + lines, line + lines);
            if *ended {
                *start = block.len();
                break;
            }
            (*ended, *checked) = filled?;
            std::mem::swap(block, next);
            *start = 0;
        }
        Ok((sinks, read))
    }
}

/// The check of a file's lines against [`MAX_LINE_BYTES`] and
/// [`MAX_EMPTY_RUN`], a part of the file at a time, each part whole lines
/// (but the file's last).
struct LineCheck {
    /// The number of the next line.
    line: u64,
    /// Empty lines just before it.
    empty_run: u64,
}

impl LineCheck {
    /// The check of lines from line `first_line` on.
    fn new(first_line: u64) -> LineCheck {
        LineCheck { line: first_line, empty_run: 0 }
    }

    /// Checks the lines of `part`, which ends after a newline unless it is
    /// the `last` of the file; the message of the first fault.
    fn check(&mut self, part: &[u8], last: bool) -> std::result::Result<(), String> {
        let mut start = 0;
        for newline in memchr::memchr_iter(b'\n', part) {
            self.line_of(&part[start..newline])?;
            start = newline + 1;
        }
        if last && start < part.len() {
            self.line_of(&part[start..])?;
        }
        Ok(())
    }

    /// One line, without its newline.
    #[inline]
    fn line_of(&mut self, text: &[u8]) -> std::result::Result<(), String> {
        if text.len() > MAX_LINE_BYTES {
            return Err(LineCheck::too_long(self.line));
        }
        if text.is_empty() || text == b"\r" {
            self.empty_run += 1;
            if self.empty_run > MAX_EMPTY_RUN {
                return Err(format!(
                    "line {}: more than {MAX_EMPTY_RUN} empty lines in a row (from here on): the file is \
                     damaged or not a record file; fix or remove it",
                    self.line + 1 - self.empty_run
                ));
            }
        } else {
            self.empty_run = 0;
        }
        self.line += 1;
        Ok(())
    }

    /// The message of a line longer than [`MAX_LINE_BYTES`].
    fn too_long(line: u64) -> String {
        format!(
            "line {line}: longer than {MAX_LINE_BYTES} bytes, the most a record line may have: the file is \
             damaged or not a record file; fix or remove it"
        )
    }
}

/// A CSV file read a run of lines at a time ([`Pieces::next`]), so that a
/// reader that keeps its rows holds one run of them at a time, whatever
/// the file's size: read and decoded a block at a time.
pub struct Pieces<'f> {
    file: &'f InputFile,
    header: Header,
    blocks: Blocks<'f>,
    /// The bytes of the file read so far.
    count: Arc<AtomicU64>,
    /// The number of the next line to read.
    line: u64,
}

impl<'f> Pieces<'f> {
    /// `file` opened and its header read; `None` for a file without a
    /// header (blank or empty), which holds no rows.
    pub fn open(file: &'f InputFile) -> Result<Option<Pieces<'f>>> {
        let count = Arc::new(AtomicU64::new(0));
        let stream = Stream::open_counted(&file.path, file.format, count.clone()).map_err(|e| file.renamed(e))?;
        let Some(stream) = stream else { return Ok(None) };
        let mut blocks = Blocks::new(stream, Default::default(), BLOCK_BYTES);
        let Some(header) = blocks.header(file).map_err(|e| file.renamed(e))? else { return Ok(None) };
        Ok(Some(Pieces { file, header, blocks, count, line: 2 }))
    }

    /// Reads the next `lines` lines (fewer at the end of the file) into
    /// sinks made by `make_sink`, as [`read`] reads a whole file: the
    /// sinks in order, none once every line has been read.
    pub fn next<S, F>(&mut self, lines: u64, make_sink: F) -> Result<Vec<S>>
    where
        S: RowSink + Send,
        F: Fn() -> S + Sync,
    {
        if self.done() {
            return Ok(Vec::new());
        }
        let reader = self.header.reader();
        let (sinks, read) =
            self.blocks.lines(&reader, self.line, lines, &make_sink).map_err(|e| self.file.renamed(e))?;
        self.line += read;
        Ok(sinks)
    }

    /// Whether every line has been read.
    pub fn done(&self) -> bool {
        self.blocks.done()
    }

    /// Bytes of the file on disk read so far (compressed bytes for a
    /// compressed file).
    pub fn bytes_read(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
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
        Reader { columns: &self.columns, width: self.names.len(), names: &self.names }
    }
}

impl Reader<'_> {
    /// Reads `body` (whole lines after the header, the first at
    /// `first_line`) into sinks made by `make_sink`, in chunks of about
    /// `chunk_bytes` read in parallel (see [`RowSink::ONE_PER_CHUNK`]),
    /// handing each part read to the end to `done`; the sinks in order.
    fn body<S, F>(
        &self,
        body: &[u8],
        first_line: u64,
        chunk_bytes: usize,
        make_sink: &F,
        done: &(dyn Fn(&[u8]) + Sync),
    ) -> Vec<S>
    where
        S: RowSink + Send,
        F: Fn() -> S + Sync,
    {
        let chunks = split(body, first_line, chunk_bytes, done);
        if chunks.len() == 1 {
            let mut sink = make_sink();
            if S::ONE_PER_CHUNK {
                sink.reserve(memchr::memchr_iter(b'\n', body).count() + 1, body.len());
            }
            self.chunk(body, first_line, &mut sink);
            return vec![sink];
        }
        if S::ONE_PER_CHUNK {
            // Each chunk's lines were counted by `split` (up to the next
            // chunk's first line); the last one's are counted here.
            let ends: Vec<u64> = chunks.iter().skip(1).map(|&(_, line, _)| line).chain([u64::MAX]).collect();
            return chunks
                .into_par_iter()
                .zip(ends)
                .map(|((offset, line, end), next)| {
                    let mut sink = make_sink();
                    let lines = match next {
                        u64::MAX => memchr::memchr_iter(b'\n', &body[offset..end]).count() + 1,
                        next => next.saturating_sub(line) as usize,
                    };
                    sink.reserve(lines, end - offset);
                    self.chunk(&body[offset..end], line, &mut sink);
                    done(&body[offset..end]);
                    sink
                })
                .collect();
        }
        // Consecutive chunks share a sink (one per rayon job, not one per
        // chunk): fewer, larger partial results to merge later.
        chunks
            .into_par_iter()
            .fold(
                || (make_sink(), true),
                |(mut sink, go_on), (offset, line, end)| {
                    let go_on = go_on && self.chunk(&body[offset..end], line, &mut sink);
                    done(&body[offset..end]);
                    (sink, go_on)
                },
            )
            .map(|(sink, _)| sink)
            .collect()
    }
}

/// The header index of each contract column, then of the kind's optional
/// column when the header has it.
fn map_columns(file: &InputFile, names: &[String]) -> Result<Vec<usize>> {
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

/// Splits `body` into `(offset, first line, end)` chunks of about
/// `chunk_bytes`, each cut after a newline; each chunk is handed to `done`
/// once its lines are counted. The chunks are found and counted in
/// parallel (chunk `k` starts after the first newline at or past
/// `k * chunk_bytes`), so that a file's first pass is not one core's.
fn split(body: &[u8], first_line: u64, chunk_bytes: usize, done: &(dyn Fn(&[u8]) + Sync)) -> Vec<(usize, u64, usize)> {
    if body.len() <= chunk_bytes * 2 {
        return vec![(0, first_line, body.len())];
    }
    let start = |k: usize| match k.checked_mul(chunk_bytes) {
        Some(0) => 0,
        Some(cut) if cut < body.len() => memchr::memchr(b'\n', &body[cut..]).map_or(body.len(), |at| cut + at + 1),
        _ => body.len(),
    };
    let counted: Vec<(usize, usize, u64)> = (0..body.len().div_ceil(chunk_bytes))
        .into_par_iter()
        .map(|k| {
            let (offset, end) = (start(k), start(k + 1));
            let part = &body[offset..end.max(offset)];
            let lines = memchr::memchr_iter(b'\n', part).count() as u64;
            done(part);
            (offset, end, lines)
        })
        .collect();
    let mut chunks = Vec::with_capacity(counted.len());
    let mut line = first_line;
    // A line longer than `chunk_bytes` leaves chunks with nothing in them.
    for (offset, end, lines) in counted.into_iter().filter(|(offset, end, _)| end > offset) {
        chunks.push((offset, line, end));
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
struct Reader<'h> {
    /// For each contract column, its index in the header.
    columns: &'h [usize],
    /// Fields of the header.
    width: usize,
    /// The header's column names, for messages.
    names: &'h [String],
}

impl Reader<'_> {
    /// Reads the lines of `chunk` (the first at `first_line`) into `sink`,
    /// one row or malformed row per line; whether the sink wants more.
    fn chunk<S: RowSink>(&self, chunk: &[u8], first_line: u64, sink: &mut S) -> bool {
        // When the whole chunk is printable ASCII lines without quotes (the
        // usual case), one vectorised pass says so for every line at once
        // (so the chunk is UTF-8, with no check of its own), and the
        // structural index finds its lines and commas. Otherwise one UTF-8
        // check for the whole chunk, not one per field.
        match printable_unquoted_text(chunk) {
            Some(text) => self.printable_chunk(text, first_line, sink),
            None => self.chunk_by_lines(chunk, std::str::from_utf8(chunk).ok(), first_line, sink),
        }
    }

    /// [`Reader::chunk`] of a chunk of printable ASCII lines without
    /// quotes (so without carriage returns): lines and commas from the
    /// structural index ([`super::simd`]), 64 bytes a step.
    fn printable_chunk<S: RowSink>(&self, text: &str, first_line: u64, sink: &mut S) -> bool {
        let mut line = first_line;
        let mut commas = Vec::with_capacity(64);
        super::simd::for_each_line(text.as_bytes(), &mut commas, |start, end, commas| {
            // Cut at ASCII bytes, so at character boundaries.
            let line_text = &text[start..end];
            let go_on = self.line(line_text.as_bytes(), Some(line_text), commas, line, sink);
            line += 1;
            go_on
        })
    }

    /// [`Reader::chunk`] a line at a time: for a chunk with a quote, a
    /// carriage return, a byte outside printable ASCII, or one that is not
    /// UTF-8 (`chunk_text` is `None`).
    fn chunk_by_lines<S: RowSink>(
        &self,
        chunk: &[u8],
        chunk_text: Option<&str>,
        first_line: u64,
        sink: &mut S,
    ) -> bool {
        // The fast path splits a line at commas: right for every line
        // without a quote (or a carriage return, which goes the slow way
        // too). A line with a quote is split by [`QuotedLine`], which
        // follows RFC 4180 within the line.
        let mut commas = Commas::default();
        let mut quoted = QuotedLine::new();
        let (mut pos, mut line) = (0usize, first_line);
        while pos < chunk.len() {
            let rest = &chunk[pos..];
            let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
            let text = strip_cr(&rest[..end]);
            let shape = if text.is_empty() { Line::Printable } else { split_commas(text, &mut commas) };
            let go_on = if shape == Line::Quoted {
                self.quoted_line(&mut quoted, text, line, sink)
            } else {
                // A printable line is a slice of the chunk's text (cut at
                // ASCII bytes, so at character boundaries) or, in a chunk
                // that is not all UTF-8, checked on its own.
                let line_text = match (shape, chunk_text) {
                    (Line::Printable, Some(chunk_text)) => Some(&chunk_text[pos..pos + text.len()]),
                    (Line::Printable, None) => std::str::from_utf8(text).ok(),
                    _ => None,
                };
                let commas = if text.is_empty() { &[][..] } else { commas.as_slice() };
                self.line(text, line_text, commas, line, sink)
            };
            if !go_on {
                return false;
            }
            pos += end + 1;
            line += 1;
        }
        true
    }

    /// One line without a quote (`text`, without its line ending; `ascii`
    /// the same when it is printable ASCII) whose commas are at `commas`:
    /// a row of [`Field::Ascii`] or [`Field::Text`] fields, or a malformed
    /// row (empty, or not as wide as the header).
    #[inline]
    fn line<S: RowSink>(&self, text: &[u8], ascii: Option<&str>, commas: &[usize], line: u64, sink: &mut S) -> bool {
        if text.is_empty() {
            let reason = format!("is an empty line; every line after the header is a record of {} fields", self.width);
            return sink.malformed(line, "-", String::new(), reason);
        }
        let n_fields = commas.len() + 1;
        if n_fields != self.width {
            let (column, reason) = wrong_width(self.names, n_fields);
            return sink.malformed(line, column, shown(text), reason);
        }
        let bounds = |index: usize| {
            let start = if index == 0 { 0 } else { commas[index - 1] + 1 };
            let stop = if index == commas.len() { text.len() } else { commas[index] };
            (start, stop)
        };
        let mut fields = [Field::Null; 16];
        if let Some(ascii) = ascii {
            for (slot, &index) in fields.iter_mut().zip(self.columns) {
                let (start, stop) = bounds(index);
                *slot = Field::Ascii(&ascii[start..stop]);
            }
        } else {
            for (slot, &index) in fields.iter_mut().zip(self.columns) {
                let (start, stop) = bounds(index);
                *slot = Field::Text(&text[start..stop]);
            }
        }
        sink.row(line, &fields[..self.columns.len()])
    }

    /// A line with a quote (or a carriage return): split by `quoted`.
    fn quoted_line<S: RowSink>(&self, quoted: &mut QuotedLine, text: &[u8], line: u64, sink: &mut S) -> bool {
        if let Err(quoting) = quoted.split(text) {
            // The value shown is the line from the field at fault on.
            let column = self.names.get(quoting.field).map_or("-", String::as_str);
            return sink.malformed(line, column, shown(&text[quoting.start..]), quoting.reason(self.names));
        }
        let n_fields = quoted.ends.len();
        if n_fields != self.width {
            let (column, reason) = wrong_width(self.names, n_fields);
            return sink.malformed(line, column, shown(text), reason);
        }
        let mut fields = [Field::Null; 16];
        for (slot, &index) in fields.iter_mut().zip(self.columns) {
            *slot = Field::Text(quoted.field(index));
        }
        sink.row(line, &fields[..self.columns.len()])
    }
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

/// Fields of one line split by RFC 4180 rules, unquoted into a reused
/// buffer. Stricter than a general CSV reader: a field cannot span lines,
/// so a quote open at the end of the line is an error, and so are a quote
/// inside an unquoted field and text after a closing quote (each a sign of
/// damage, never a value).
struct QuotedLine {
    output: Vec<u8>,
    ends: Vec<usize>,
}

/// Why a line's quoting is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Quoting {
    /// What is wrong.
    fault: QuotingFault,
    /// The field at fault, 0-based.
    field: usize,
    /// Where that field starts in the line.
    start: usize,
}

/// What is wrong with a line's quoting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum QuotingFault {
    /// A quoted field whose closing quote is not on the line.
    Unclosed,
    /// A quote inside a field that does not start with one.
    InsideUnquoted,
    /// Text between a closing quote and the next comma.
    AfterClosing,
}

impl Quoting {
    /// The reason, naming the field by its header name where there is one.
    fn reason(self, names: &[String]) -> String {
        let field = match names.get(self.field) {
            Some(name) => format!("field {} ('{}')", self.field + 1, crate::error::printable(name)),
            None => format!("field {}", self.field + 1),
        };
        match self.fault {
            QuotingFault::Unclosed => {
                format!("has a quote that opens {field} and does not close on this line (a field cannot span lines)")
            }
            QuotingFault::InsideUnquoted => {
                format!("has a stray quote in {field} (a field with a quote must be quoted, the quote doubled)")
            }
            QuotingFault::AfterClosing => format!("has text after the closing quote of {field}"),
        }
    }
}

impl QuotedLine {
    fn new() -> QuotedLine {
        QuotedLine { output: Vec::with_capacity(1024), ends: Vec::with_capacity(64) }
    }

    /// Splits `line` (without its line ending) into fields.
    fn split(&mut self, line: &[u8]) -> std::result::Result<(), Quoting> {
        self.output.clear();
        self.ends.clear();
        let mut at = 0;
        loop {
            let (field, start) = (self.ends.len(), at);
            let refuse = |fault| Err(Quoting { fault, field, start });
            if line.get(at) == Some(&b'"') {
                at += 1;
                loop {
                    let Some(quote) = memchr::memchr(b'"', &line[at..]) else {
                        return refuse(QuotingFault::Unclosed);
                    };
                    self.output.extend_from_slice(&line[at..at + quote]);
                    at += quote + 1;
                    if line.get(at) == Some(&b'"') {
                        self.output.push(b'"');
                        at += 1;
                    } else {
                        break;
                    }
                }
                self.ends.push(self.output.len());
                match line.get(at) {
                    None => return Ok(()),
                    Some(b',') => at += 1,
                    Some(_) => return refuse(QuotingFault::AfterClosing),
                }
            } else {
                let end = memchr::memchr(b',', &line[at..]).map_or(line.len(), |comma| at + comma);
                let value = &line[at..end];
                if memchr::memchr(b'"', value).is_some() {
                    return refuse(QuotingFault::InsideUnquoted);
                }
                self.output.extend_from_slice(value);
                self.ends.push(self.output.len());
                if end == line.len() {
                    return Ok(());
                }
                at = end + 1;
            }
        }
    }

    /// Field `index` of the last line split.
    fn field(&self, index: usize) -> &[u8] {
        let start = if index == 0 { 0 } else { self.ends[index - 1] };
        &self.output[start..self.ends[index]]
    }

    /// Every field of the last line split.
    fn fields(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.ends.len()).map(|index| self.field(index))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_line_of_the_wrong_width_names_the_column_it_lacks_or_the_field_it_has_too_many() {
        let names: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| (*s).to_owned()).collect();
        let cases = [
            (3, "d", "has 3 fields, the header has 4: column 'd' is missing"),
            (2, "c", "has 2 fields, the header has 4: column 'c' (and the 1 column after it) is missing"),
            (1, "b", "has 1 field, the header has 4: column 'b' (and the 2 columns after it) is missing"),
            (5, "-", "has 5 fields, the header has 4: field 5 and after have no column"),
        ];
        for (n_fields, column, reason) in cases {
            assert_eq!(super::wrong_width(&names, n_fields), (column, reason.to_owned()), "{n_fields}");
        }
    }

    use proptest::strategy::Strategy;

    use super::*;
    use crate::records::files::Format;
    use crate::records::Kind;

    /// Every event a sink receives: a row's fields, or a malformed row's
    /// column, value and reason.
    #[derive(Default)]
    struct Events(Vec<(u64, Vec<String>)>);

    impl RowSink for Events {
        fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
            self.0.push((line, fields.iter().map(|f| format!("{f:?}")).collect()));
            true
        }
        fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
            self.0.push((line, vec![column.to_owned(), value, reason]));
            true
        }
    }

    proptest::proptest! {
        #[test]
        fn the_structural_index_reads_printable_chunks_as_the_line_reader_does(
            chunk in proptest::collection::vec(proptest::sample::select(b",,,,\n\nab9 ~".to_vec()), 0..600),
            first_line in 2u64..1000,
        ) {
            let names: Vec<String> = Kind::Charges.columns().iter().map(|c| (*c).to_owned()).collect();
            let columns = [3, 0, 5, 1, 2, 4];
            let reader = Reader { columns: &columns, width: names.len(), names: &names };
            let text = std::str::from_utf8(&chunk).unwrap();
            let (mut indexed, mut by_lines) = (Events::default(), Events::default());
            proptest::prop_assert!(reader.printable_chunk(text, first_line, &mut indexed));
            proptest::prop_assert!(reader.chunk_by_lines(&chunk, Some(text), first_line, &mut by_lines));
            proptest::prop_assert_eq!(indexed.0, by_lines.0);
        }
    }

    /// What a reader handed over for each line: the fields of a row that
    /// [`crate::records::parse_record`] accepts, or why the line or row was
    /// refused.
    type Lines = Vec<(u64, std::result::Result<Vec<String>, String>)>;

    #[derive(Default)]
    struct Collect {
        lines: Lines,
    }

    impl RowSink for Collect {
        fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
            let entry = match crate::records::parse_record(Kind::Charges, fields) {
                Ok(_) => Ok(fields.iter().map(Field::display).collect()),
                Err(e) => Err(format!("column {}: {}", e.column, e.reason)),
            };
            self.lines.push((line, entry));
            true
        }
        fn malformed(&mut self, line: u64, _: &str, _: String, reason: String) -> bool {
            self.lines.push((line, Err(reason)));
            true
        }
    }

    fn charges_file() -> InputFile {
        InputFile {
            kind: Kind::Charges,
            path: std::path::PathBuf::from("charges/t.csv"),
            name: "charges/t.csv".to_owned(),
            format: Format::Csv,
            size: 0,
        }
    }

    /// Every line a charges file's `bytes` hand over, in order.
    fn read_lines(bytes: &[u8]) -> Result<Lines> {
        let sinks = read(&charges_file(), bytes, Collect::default)?;
        Ok(sinks.into_iter().flat_map(|s| s.lines).collect())
    }

    /// [`read_lines`] in chunks of about `chunk_bytes`.
    fn read_lines_in_chunks(bytes: &[u8], chunk_bytes: usize) -> Result<Lines> {
        let sinks = read_in_chunks(&charges_file(), bytes, chunk_bytes, Collect::default, &|_| ())?;
        Ok(sinks.into_iter().flat_map(|s| s.lines).collect())
    }

    /// [`read_lines`] of `bytes` written compressed (gzip when `zstd` is
    /// false) and read as a stream in blocks of about `block_bytes`.
    fn read_lines_streamed(bytes: &[u8], zstd: bool, block_bytes: usize) -> Result<Lines> {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let (format, path) = match zstd {
            true => (Format::CsvZst, dir.path().join("t.csv.zst")),
            false => (Format::CsvGz, dir.path().join("t.csv.gz")),
        };
        let compressed = match zstd {
            true => ::zstd::encode_all(bytes, 1).unwrap(),
            false => {
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                encoder.write_all(bytes).unwrap();
                encoder.finish().unwrap()
            }
        };
        std::fs::write(&path, compressed).unwrap();
        let file = InputFile { path, format, size: bytes.len() as u64, ..charges_file() };
        let mut buffers = Default::default();
        let sinks = read_blocks(&file, &mut buffers, block_bytes, Collect::default).map_err(|e| file.renamed(e))?;
        Ok(sinks.into_iter().flat_map(|s| s.lines).collect())
    }

    /// A compressed file read in blocks hands over the lines the whole
    /// file does: a BOM, a header and lines longer than a block, CRLF
    /// endings, a last line without a newline, blank and damaged lines.
    #[test]
    fn a_compressed_file_read_in_blocks_reads_as_the_whole_file() {
        let mut rows = charges_rows(3000);
        rows[7] = String::new();
        rows[100] = format!("x100,A1,2026-11-20T00:00:00Z,{},100,0.1", "long ".repeat(200));
        rows[2000] = "x2000,A1,\"open,CNAM Lookup,2000,0.1".to_owned();
        let text = file_of(&rows);
        let long_header = format!("{}{}\n", CHARGES_HEADER.trim_end(), ",extra".repeat(100));
        let cases = [
            text.clone().into_bytes(),
            [b"\xEF\xBB\xBF".as_slice(), text.as_bytes()].concat(),
            text.replace('\n', "\r\n").into_bytes(),
            text.trim_end().as_bytes().to_vec(),
            text.replacen(CHARGES_HEADER, &long_header, 1).replace('\n', ",e\n").replacen(",e\n", "\n", 1).into_bytes(),
            b"\n\n  \n".to_vec(),
            CHARGES_HEADER.as_bytes().to_vec(),
            Vec::new(),
        ];
        for (case, bytes) in cases.iter().enumerate() {
            let whole = read_lines(bytes).map_err(|e| e.to_string());
            for zstd in [false, true] {
                for block_bytes in [1, 50, 999, 64 << 10, BLOCK_BYTES] {
                    let streamed = read_lines_streamed(bytes, zstd, block_bytes).map_err(|e| e.to_string());
                    assert_eq!(streamed, whole, "case {case}, zstd {zstd}, blocks of {block_bytes}");
                }
            }
        }
        assert_eq!(read_lines(&cases[0]).unwrap().len(), 3000);
    }

    /// A stream damaged past its first block is an error naming the file,
    /// not the rows before the damage.
    #[test]
    fn a_compressed_file_damaged_after_its_first_block_is_an_error_naming_it() {
        use std::io::Write;
        let text = file_of(&charges_rows(20_000));
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(text.as_bytes()).unwrap();
        let mut compressed = encoder.finish().unwrap();
        compressed.truncate(compressed.len() * 3 / 4);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv.gz");
        std::fs::write(&path, compressed).unwrap();
        let file = InputFile { path, format: Format::CsvGz, ..charges_file() };
        let error = read_blocks(&file, &mut Default::default(), 4096, Collect::default)
            .map_err(|e| file.renamed(e))
            .err()
            .expect("a truncated stream is an error");
        let message = error.chain();
        assert!(message.starts_with("charges/t.csv: not a readable gzip file"), "{message}");
    }

    /// [`Collect`] with a sink per chunk, and the lines each was told of.
    #[derive(Default)]
    struct PerChunk {
        collect: Collect,
        reserved: Option<(usize, usize)>,
    }

    impl RowSink for PerChunk {
        fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
            self.collect.row(line, fields)
        }
        fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
            self.collect.malformed(line, column, value, reason)
        }
        const ONE_PER_CHUNK: bool = true;
        fn reserve(&mut self, lines: usize, bytes: usize) {
            assert!(self.reserved.is_none(), "told once");
            self.reserved = Some((lines, bytes));
        }
    }

    /// Sinks made one per chunk hand over the same lines as shared ones,
    /// each told first of at least its own lines, and of its bytes.
    #[test]
    fn one_sink_per_chunk_reads_the_same_lines_and_is_told_its_size() {
        let mut rows = charges_rows(700);
        rows[40] = "x40,A1,2026-11-20T00:00:00Z,\"CNAM\nLookup\",40,0.41".to_owned();
        rows[300] = "x300,A1,not a time,CNAM Lookup,300,0.1".to_owned();
        let text = file_of(&rows);
        let shared = read_lines_in_chunks(text.as_bytes(), 2000).expect("read");
        for chunk_bytes in [1000, 2000, 1 << 20] {
            let sinks = read_in_chunks(&charges_file(), text.as_bytes(), chunk_bytes, PerChunk::default, &|_| ())
                .expect("read");
            if chunk_bytes < text.len() / 2 {
                assert!(sinks.len() > 10, "{} sinks", sinks.len());
            }
            let body_bytes: usize = sinks.iter().map(|s| s.reserved.expect("told").1).sum();
            assert_eq!(body_bytes, text.len() - CHARGES_HEADER.len());
            for sink in &sinks {
                let (lines, _) = sink.reserved.expect("told");
                assert!(lines >= sink.collect.lines.len(), "{lines} < {}", sink.collect.lines.len());
            }
            let lines: Lines = sinks.into_iter().flat_map(|s| s.collect.lines).collect();
            assert_eq!(lines, shared);
        }
    }

    const CHARGES_HEADER: &str = "record_id,auth_id,timestamp,description,units,amount\n";

    /// A charges file of `n` good rows, lines 2..=n+1.
    fn charges_rows(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("x{i},A1,2026-11-20T00:00:00Z,CNAM Lookup,{i},0.0{}", i + 1)).collect()
    }

    fn file_of(rows: &[String]) -> String {
        let mut text = CHARGES_HEADER.to_owned();
        for row in rows {
            text.push_str(row);
            text.push('\n');
        }
        text
    }

    /// Reads `rows` and checks that every line is handed over once, in
    /// order, and that exactly the lines `bad` are refused, each with a
    /// reason containing `why`.
    fn refuses_exactly(rows: &[String], bad: &[u64], why: &str) {
        let lines = read_lines(file_of(rows).as_bytes()).unwrap();
        let numbers: Vec<u64> = lines.iter().map(|(l, _)| *l).collect();
        assert_eq!(numbers, (2..rows.len() as u64 + 2).collect::<Vec<_>>(), "every line once: {lines:?}");
        for (line, entry) in &lines {
            match entry {
                Err(reason) => {
                    assert!(bad.contains(line), "line {line} refused: {reason}");
                    assert!(reason.contains(why), "line {line}: {reason}");
                }
                Ok(_) => assert!(!bad.contains(line), "line {line} accepted: {entry:?}"),
            }
        }
    }

    #[test]
    fn a_quote_that_never_closes_is_refused_on_its_line_only() {
        let mut rows = charges_rows(12);
        rows[3] = "x3,A1,2026-11-20T00:00:00Z,CNAM Lookup,3,\"0.04".to_owned();
        refuses_exactly(&rows, &[5], "quote");
    }

    #[test]
    fn balanced_stray_quotes_lines_apart_merge_nothing() {
        let mut rows = charges_rows(12);
        rows[2] = "x2,A1,2026-11-20T00:00:00Z,CNAM Lookup,2,\"0.03".to_owned();
        rows[7] = "x7,A1,2026-11-20T00:00:00Z,CNAM Lookup,7,0.08\"".to_owned();
        refuses_exactly(&rows, &[4, 9], "quote");
    }

    #[test]
    fn a_mid_row_stray_quote_is_refused_on_its_line_only() {
        let mut rows = charges_rows(12);
        rows[4] = "x4,A1,2026-11-20T00:00:00Z,\"CNAM Lookup,4,0.05".to_owned();
        refuses_exactly(&rows, &[6], "quote");
        rows[4] = "x4,A1,2026-11-20T00:00:00Z,\"CNAM\" Lookup,4,0.05".to_owned();
        refuses_exactly(&rows, &[6], "quote");
        rows[4] = "x4,A1,2026-11-20T00:00:00Z,CNAM \"Lookup\",4,0.05".to_owned();
        refuses_exactly(&rows, &[6], "quote");
    }

    #[test]
    fn a_field_cannot_span_lines() {
        let mut rows = charges_rows(6);
        rows[1] = "x1,A1,2026-11-20T00:00:00Z,\"CNAM".to_owned();
        rows[2] = "Lookup\",1,0.02".to_owned();
        refuses_exactly(&rows, &[3, 4], "");
    }

    #[test]
    fn a_blank_line_is_refused() {
        let mut rows = charges_rows(6);
        rows[2] = String::new();
        refuses_exactly(&rows, &[4], "empty line");
        rows[2] = "\r".to_owned();
        refuses_exactly(&rows, &[4], "empty line");
    }

    #[test]
    fn quoted_fields_hold_commas_and_doubled_quotes_and_crlf_endings_are_dropped() {
        let text = format!(
            "{}\"x1\",A1,2026-11-20T00:00:00Z,\"Porting, \"\"express\"\"\",\"\",1\r\nx2,A1,2026-11-20T00:00:00Z,CNAM,2,3\r\n",
            CHARGES_HEADER.replace('\n', "\r\n")
        );
        let lines = read_lines(text.as_bytes()).unwrap();
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert_eq!(lines[0].0, 2);
        assert!(lines[0].1.as_ref().is_err_and(|e| e.starts_with("column 4")), "{lines:?}");
        assert_eq!(
            lines[1],
            (3, Ok(["x2", "A1", "2026-11-20T00:00:00Z", "CNAM", "2", "3"].map(String::from).to_vec()))
        );
        let text = format!("{CHARGES_HEADER}\"x1\",A1,2026-11-20T00:00:00Z,\"Porting, \"\"express\"\"\",\"1\",1\n");
        let lines = read_lines(text.as_bytes()).unwrap();
        assert_eq!(
            lines,
            [(
                2,
                Ok(["x1", "A1", "2026-11-20T00:00:00Z", "Porting, \"express\"", "1", "1"].map(String::from).to_vec())
            )]
        );
    }

    /// A valid charges record, as the text of its six fields.
    fn charge() -> impl proptest::strategy::Strategy<Value = [String; 6]> {
        use proptest::prelude::*;
        let id = "[A-Za-z0-9_. ,\"\u{e9}\u{20ac}-]{1,12}";
        (
            id,
            id,
            proptest::sample::select(vec![
                "2026-11-20T13:45:01Z",
                "2026-11-20 13:45:01.250+05:30",
                "2026-01-01T00:00:00-08:00",
            ]),
            "[ -~\u{e9}\u{20ac}]{1,16}",
            0u32..1000,
            (0u32..1000, 1u32..1000),
        )
            .prop_map(|(record_id, auth_id, timestamp, description, units, (whole, part))| {
                [record_id, auth_id, timestamp.to_owned(), description, units.to_string(), format!("{whole}.{part:03}")]
            })
    }

    /// `records` written by the csv crate's writer with `style` and
    /// `crlf` endings, the columns in `order` (indexes into the contract's
    /// columns; `6` is an extra column).
    fn written(records: &[[String; 6]], style: ::csv::QuoteStyle, crlf: bool, order: &[usize]) -> Vec<u8> {
        let terminator = if crlf { ::csv::Terminator::CRLF } else { ::csv::Terminator::Any(b'\n') };
        let mut writer = ::csv::WriterBuilder::new().quote_style(style).terminator(terminator).from_writer(Vec::new());
        let columns = Kind::Charges.columns();
        writer.write_record(order.iter().map(|&i| columns.get(i).copied().unwrap_or("export_batch"))).unwrap();
        for (n, record) in records.iter().enumerate() {
            let extra = format!("batch, \"{n}\"");
            writer.write_record(order.iter().map(|&i| record.get(i).unwrap_or(&extra))).unwrap();
        }
        writer.into_inner().unwrap()
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(200))]

        #[test]
        fn records_written_by_a_csv_writer_read_back_identically(
            records in proptest::collection::vec(charge(), 0..40),
            style in proptest::sample::select(vec![
                ::csv::QuoteStyle::Always,
                ::csv::QuoteStyle::Necessary,
                ::csv::QuoteStyle::NonNumeric,
            ]),
            crlf in proptest::bool::ANY,
            order in proptest::strategy::Just((0..7).collect::<Vec<usize>>()).prop_shuffle(),
            chunk_bytes in proptest::num::usize::ANY,
        ) {
            let bytes = written(&records, style, crlf, &order);
            let lines = read_lines(&bytes).unwrap();
            let expected: Lines =
                records.iter().enumerate().map(|(i, r)| (i as u64 + 2, Ok(r.to_vec()))).collect();
            proptest::prop_assert_eq!(&lines, &expected);
            // Chunks of any size read the same lines.
            proptest::prop_assert_eq!(&read_lines_in_chunks(&bytes, 1 + chunk_bytes % 200).unwrap(), &expected);
        }

        #[test]
        fn damage_never_spreads_beyond_its_line(
            records in proptest::collection::vec(charge(), 1..30),
            crlf in proptest::bool::ANY,
            damage in 0u8..6,
            at in proptest::num::usize::ANY,
            byte in proptest::num::u8::ANY,
        ) {
            let original = written(&records, ::csv::QuoteStyle::Necessary, crlf, &[0, 1, 2, 3, 4, 5]);
            let mut bytes = original.clone();
            let at = at % (bytes.len() + 1);
            match damage {
                0 if at < bytes.len() => bytes[at] ^= byte.max(1),
                1 => bytes.insert(at, byte),
                2 if at < bytes.len() => {
                    bytes.remove(at);
                }
                3 => bytes.insert(at, b'"'),
                4 => bytes.insert(at, b'\n'),
                _ => bytes.insert(at, 0),
            }
            let strict = matches!(damage, 3..=5);
            // Compressed and read in blocks, the same lines (or error).
            let streamed = read_lines_streamed(&bytes, damage % 2 == 0, 1 + at % 97);
            proptest::prop_assert_eq!(
                streamed.map_err(|e| e.to_string()),
                read_lines(&bytes).map_err(|e| e.to_string())
            );
            let Ok(lines) = read_lines(&bytes) else {
                // An error names the file: nothing is silently changed.
                return Ok(());
            };
            // Every physical line after the header is handed over once.
            let header_end = memchr::memchr(b'\n', &bytes).map_or(bytes.len(), |i| i + 1);
            let body = &bytes[header_end..];
            let physical = memchr::memchr_iter(b'\n', body).count() as u64
                + u64::from(!body.is_empty() && !body.ends_with(b"\n"));
            let numbers: Vec<u64> = lines.iter().map(|(l, _)| *l).collect();
            proptest::prop_assert_eq!(numbers, (2..physical + 2).collect::<Vec<_>>());
            // Lines the damage did not touch read as before; the damaged
            // line (or the two it became) at most differ. A damaged header
            // that still names every column (a comma that adds an unnamed
            // one) may refuse every line, but changes none silently.
            let expected = read_lines(&original).unwrap();
            let delta = physical as i64 - expected.len() as i64;
            let damaged_line = 1 + memchr::memchr_iter(b'\n', &bytes[..at.min(bytes.len())]).count() as i64;
            for (line, entry) in &lines {
                let line = *line as i64;
                let before = line < damaged_line;
                let after = line > damaged_line + delta.max(0);
                if (before || after) && !(damaged_line == 1 && entry.is_err()) {
                    let source = if before { line } else { line - delta };
                    let original_entry = &expected[(source - 2) as usize];
                    proptest::prop_assert_eq!(&original_entry.1, entry, "line {} (was {})", line, source);
                }
            }
            // Quotes, newlines and NULs are never taken silently: either
            // nothing changed or some line is refused.
            if strict {
                let refused = lines.iter().any(|(_, e)| e.is_err());
                proptest::prop_assert!(refused || lines == expected, "{:?}", String::from_utf8_lossy(&bytes));
            }
        }
    }

    #[test]
    fn a_plain_file_read_in_blocks_reads_as_its_bytes() {
        let text = file_of(&charges_rows(20_000));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, &text).unwrap();
        let file = InputFile { path, size: text.len() as u64, ..charges_file() };
        let expected = read_lines(text.as_bytes()).unwrap();
        assert_eq!(expected.len(), 20_000);
        for block_bytes in [999, 64 << 10, BLOCK_BYTES] {
            let sinks = read_blocks(&file, &mut Default::default(), block_bytes, Collect::default).unwrap();
            assert_eq!(sinks.into_iter().flat_map(|s| s.lines).collect::<Lines>(), expected);
        }
        let mut pieces = Pieces::open(&file).unwrap().expect("a header");
        let mut lines = Lines::new();
        while !pieces.done() {
            lines.extend(pieces.next(777, Collect::default).unwrap().into_iter().flat_map(|s| s.lines));
        }
        assert_eq!(lines, expected);
        assert_eq!(pieces.bytes_read(), text.len() as u64);
    }

    /// A line past [`MAX_LINE_BYTES`] and a run of empty lines past
    /// [`MAX_EMPTY_RUN`] are errors naming the file and the line, read
    /// whole or streamed; a line or a run at the limit is read.
    #[test]
    fn a_line_too_long_or_too_many_empty_lines_is_an_error_naming_the_line() {
        let rows = charges_rows(5);
        let long = format!("x9,A1,2026-11-20T00:00:00Z,{},1,0.1", "d".repeat(MAX_LINE_BYTES));
        let at_limit = long[..MAX_LINE_BYTES].to_owned();
        let empties = |n: u64| vec![String::new(); n as usize];
        let cases: [(Vec<String>, Option<&str>); 6] = [
            ([&rows[..2], std::slice::from_ref(&long), &rows[2..]].concat(), Some("line 4: longer than 1048576 bytes")),
            ([&rows[..], std::slice::from_ref(&long)].concat(), Some("line 7: longer than 1048576 bytes")),
            ([&rows[..2], &[at_limit], &rows[2..]].concat(), None),
            ([&rows[..1], &empties(MAX_EMPTY_RUN + 1)[..], &rows[1..]].concat(), Some("line 3: more than 10000 empty")),
            ([&rows[..1], &empties(MAX_EMPTY_RUN)[..], &rows[1..]].concat(), None),
            ([&rows[..1], &empties(MAX_EMPTY_RUN / 2)[..], &rows[1..2], &empties(MAX_EMPTY_RUN)[..]].concat(), None),
        ];
        for (case, (rows, fault)) in cases.iter().enumerate() {
            let text = file_of(rows);
            let whole = read_lines(text.as_bytes()).map_err(|e| e.to_string());
            for zstd in [false, true] {
                for block_bytes in [4096, 1 << 20, BLOCK_BYTES] {
                    let streamed = read_lines_streamed(text.as_bytes(), zstd, block_bytes);
                    assert_eq!(streamed.map_err(|e| e.to_string()), whole, "case {case}, blocks of {block_bytes}");
                }
            }
            match fault {
                Some(fault) => {
                    let message = whole.expect_err("refused");
                    assert!(message.starts_with("charges/t.csv: ") && message.contains(fault), "{case}: {message}");
                }
                None => assert_eq!(whole.expect("read").len(), rows.len(), "case {case}"),
            }
        }
        // A header past the limit too, and one that never ends.
        let header = format!("record_id,{}\n", "x".repeat(MAX_LINE_BYTES));
        let message = read_lines(header.as_bytes()).expect_err("refused").to_string();
        assert!(message.contains("line 1: longer than"), "{message}");
        let endless = "x".repeat(3 * MAX_LINE_BYTES);
        let message = read_lines_streamed(endless.as_bytes(), false, 4096).expect_err("refused").to_string();
        assert!(message.contains("line 1: longer than"), "{message}");
    }

    #[test]
    fn splits_at_newlines_into_chunks_that_cover_the_body() {
        let mut body = Vec::new();
        for i in 0..2000 {
            body.extend_from_slice(format!("r{i},\"a \"\"b\"\"\",x\n").as_bytes());
        }
        body.extend_from_slice(b"last,no newline");
        for chunk_bytes in [1, 7, 100, 4096] {
            let chunks = split(&body, 2, chunk_bytes, &|_| ());
            if chunk_bytes == 4096 {
                assert_eq!(chunks[1].0, 4096 + 1 + memchr::memchr(b'\n', &body[4096..]).unwrap_or(0));
            }
            assert!(chunks.len() > 1);
            let mut expected_line = 2;
            let mut expected_offset = 0;
            for (offset, line, end) in &chunks {
                assert_eq!(*offset, expected_offset);
                assert!(body[*offset..].starts_with(b"r") || body[*offset..].starts_with(b"last"));
                assert_eq!(*line, expected_line);
                expected_line += memchr::memchr_iter(b'\n', &body[*offset..*end]).count() as u64;
                expected_offset = *end;
            }
            assert_eq!(expected_offset, body.len());
        }
    }
}
