//! Reading a file a block at a time: the block being parsed and the next
//! one, decoded meanwhile; each block's lines checked against
//! [`MAX_LINE_BYTES`] and [`MAX_EMPTY_RUN`] before they are parsed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{Header, LineRange, Reader, RowSink, BLOCK_BYTES, CHUNK_BYTES, MAX_EMPTY_RUN, MAX_LINE_BYTES};
use crate::error::{Error, Result};
use crate::records::decode::Stream;
use crate::records::files::InputFile;
use crate::records::split::Split;

/// A decoded stream's lines, a block at a time: the block being read and
/// the next one, decoded meanwhile.
pub(super) struct Blocks<'p> {
    stream: Stream<'p>,
    /// This block, from `start` on not read yet; and the next one.
    pub(super) buffers: [Vec<u8>; 2],
    start: usize,
    /// Whether the stream has no more bytes than this block's.
    ended: bool,
    block_bytes: usize,
    /// After a record was carried into the next block (its quoted field
    /// spans the block's end), how much more the next fill reads (twice
    /// the record): a long record is read in a few blocks, not one per
    /// line, and every fill reads more; 0 otherwise.
    reach: usize,
    /// The lines of this block checked so far ([`LineCheck`]), up to
    /// `checked.to`.
    lines: LineCheck,
    checked: Checked,
}

/// The part of a block last checked, `block[from..to]`, and the lines it
/// holds: the lines of a body that is that part are not counted again.
#[derive(Clone, Copy, Default)]
struct Checked {
    from: usize,
    to: usize,
    lines: u64,
}

impl<'p> Blocks<'p> {
    /// `stream`'s blocks of about `block_bytes`, decoded into `buffers`.
    pub(super) fn new(stream: Stream<'p>, buffers: [Vec<u8>; 2], block_bytes: usize) -> Blocks<'p> {
        Blocks {
            stream,
            buffers,
            start: 0,
            ended: false,
            block_bytes,
            reach: 0,
            lines: LineCheck::new(2),
            checked: Checked::default(),
        }
    }

    /// Reads the first block (more while it holds no whole first line of
    /// a file that is not blank) and the file's header from it: `None`
    /// for a blank file. The lines after the header are read next.
    pub(super) fn header(&mut self, file: &InputFile) -> Result<Option<Header>> {
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
        self.checked = Checked { from: self.start, to: self.start, lines: 0 };
        Ok(header)
    }

    /// Whether every line has been read.
    pub(super) fn done(&self) -> bool {
        self.ended && self.start >= self.buffers[0].len()
    }

    /// Reads up to `limit` lines (the first numbered `line`) into sinks
    /// made by `make_sink`: the sinks in order, and the lines read. Fewer
    /// at the end of the stream, or when a record whose quoted field spans
    /// lines would cross the limit (it is left for the next call); more
    /// when such a record is the first (it is read whole).
    pub(super) fn lines<S, F>(
        &mut self,
        reader: &Reader<'_>,
        mut line: u64,
        limit: u64,
        make_sink: &F,
    ) -> Result<(Vec<S>, u64)>
    where
        S: RowSink + Send,
        F: Fn() -> S + Sync,
    {
        let (mut sinks, mut read) = (Vec::new(), 0u64);
        while read < limit && !self.done() {
            let Blocks { stream, buffers: [block, next], start, ended, block_bytes, reach, lines: check, checked } =
                self;
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
            if checked.to < end {
                let lines = check
                    .check(&block[checked.to..end], *ended)
                    .map_err(|message| Error::bad_file(stream.path(), message))?;
                *checked = Checked { from: checked.to, to: end, lines };
            }
            let body = &block[*start..end];
            // The check counted the lines of a whole block; the rest of a
            // block cut at a limit is counted here.
            let lines = match (checked.from, checked.to) == (*start, end) {
                true => checked.lines,
                false => count_lines(body),
            };
            if lines > limit - read {
                // The limit falls in this block: read up to its line, and
                // leave the rest for the next call; or up to the record
                // that runs past that line (its quoted field spans it).
                let wanted = limit - read;
                let cut = memchr::memchr_iter(b'\n', body).nth(wanted as usize - 1).map_or(body.len(), |at| at + 1);
                let lines = LineRange { first: line, count: wanted };
                match reader.body(&body[..cut], lines, CHUNK_BYTES, make_sink) {
                    (read_cut, None) => {
                        sinks.extend(read_cut);
                        *start += cut;
                        return Ok((sinks, limit));
                    }
                    (read_cut, Some(open)) if open.at > 0 => {
                        sinks.extend(read_cut);
                        *start += open.at;
                        return Ok((sinks, read + (open.line - line)));
                    }
                    // The run's first record runs past the cut: the run is
                    // that record, when it ends in this block (else the
                    // whole block is read below).
                    (_, Some(_)) => {
                        if let Some(end) = super::lines::record_end(body).filter(|end| *end < body.len()) {
                            let cut = end + 1;
                            let count = count_lines(&body[..cut]);
                            let lines = LineRange { first: line, count };
                            let (read_record, _) = reader.body(&body[..cut], lines, CHUNK_BYTES, make_sink);
                            sinks.extend(read_record);
                            *start += cut;
                            return Ok((sinks, read + count));
                        }
                    }
                }
            }
            next.clear();
            next.extend_from_slice(&block[end..]);
            // The next block is read, and its whole lines checked, while
            // this one is parsed.
            let (read_block, filled) = rayon::join(
                || reader.body(body, LineRange { first: line, count: lines }, CHUNK_BYTES, make_sink),
                || -> Result<(bool, Checked)> {
                    if *ended {
                        return Ok((true, Checked::default()));
                    }
                    // After a carried record, read on by at least its
                    // size past what is there, so that it grows.
                    let until = match *reach {
                        0 => *block_bytes,
                        reach => next.len() + reach.max(*block_bytes),
                    };
                    let last = stream.fill(next, until)?;
                    let whole = match last {
                        true => next.len(),
                        false => memchr::memrchr(b'\n', next).map_or(0, |at| at + 1),
                    };
                    let lines =
                        check.check(&next[..whole], last).map_err(|message| Error::bad_file(stream.path(), message))?;
                    Ok((last, Checked { from: 0, to: whole, lines }))
                },
            );
            let (mut read_block, open) = read_block;
            let filled = filled?;
            match open {
                // The file ends inside the record: its error.
                Some(open) if *ended => {
                    if let Some(sink) = read_block.last_mut() {
                        reader.refuse_open(&body[open.at..], open.line, 0, sink);
                    }
                }
                // The record runs on into the next block: its lines go
                // there, ahead of the block's own.
                Some(open) => {
                    let carried = &block[*start + open.at..end];
                    let carried_lines = lines - (open.line - line);
                    next.splice(0..0, carried.iter().copied());
                    sinks.extend(read_block);
                    (read, line) = (read + (open.line - line), open.line);
                    let (last, Checked { to, lines: next_lines, .. }) = filled;
                    (*ended, *checked) =
                        (last, Checked { from: 0, to: to + carried.len(), lines: next_lines + carried_lines });
                    *reach = carried.len().saturating_mul(2);
                    std::mem::swap(block, next);
                    *start = 0;
                    continue;
                }
                None => {}
            }
            sinks.extend(read_block);
            (read, line) = (read + lines, line + lines);
            *reach = 0;
            if *ended {
                *start = block.len();
                break;
            }
            (*ended, *checked) = filled;
            std::mem::swap(block, next);
            *start = 0;
        }
        Ok((sinks, read))
    }
}

/// The lines of `body`, a last one without a newline included.
fn count_lines(body: &[u8]) -> u64 {
    memchr::memchr_iter(b'\n', body).count() as u64 + u64::from(!body.is_empty() && !body.ends_with(b"\n"))
}

/// The check of a file's lines against [`MAX_LINE_BYTES`] and
/// [`MAX_EMPTY_RUN`], a part of the file at a time, each part whole lines
/// (but the file's last).
pub(super) struct LineCheck {
    /// The number of the next line.
    line: u64,
    /// Empty lines just before it.
    empty_run: u64,
}

impl LineCheck {
    /// The check of lines from line `first_line` on.
    pub(super) fn new(first_line: u64) -> LineCheck {
        LineCheck { line: first_line, empty_run: 0 }
    }

    /// Checks the lines of `part`, which ends after a newline unless it is
    /// the `last` of the file: how many lines it holds (so that the reader
    /// need not count them again), or the message of the first fault.
    pub(super) fn check(&mut self, part: &[u8], last: bool) -> std::result::Result<u64, String> {
        let first = self.line;
        let mut start = 0;
        for newline in memchr::memchr_iter(b'\n', part) {
            self.line_of(&part[start..newline])?;
            start = newline + 1;
        }
        if last && start < part.len() {
            self.line_of(&part[start..])?;
        }
        Ok(self.line - first)
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
    pub(super) fn too_long(line: u64) -> String {
        format!(
            "line {line}: longer than {MAX_LINE_BYTES} bytes, the most a record line may have: the file is \
             damaged or not a record file; fix or remove it"
        )
    }
}

/// The first block a split reads to find the file's header (more is read
/// while it holds no whole line).
const HEADER_BLOCK_BYTES: usize = 64 << 10;

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

    /// Split `split` of `file` (a plain CSV file: `records::split`), its
    /// header read from the start of the file; `None` for a file without
    /// a header. Its lines are numbered from `split.line` on, and checked
    /// as the whole file's are.
    pub fn open_split(file: &'f InputFile, split: &Split) -> Result<Option<Pieces<'f>>> {
        let count = Arc::new(AtomicU64::new(0));
        let stream = Stream::open_split(&file.path, split, file.size, count.clone()).map_err(|e| file.renamed(e))?;
        if split.from == 0 {
            let mut blocks = Blocks::new(stream, Default::default(), BLOCK_BYTES);
            let Some(header) = blocks.header(file).map_err(|e| file.renamed(e))? else { return Ok(None) };
            return Ok(Some(Pieces { file, header, blocks, count, line: 2 }));
        }
        // The header, from the file's first bytes (a small first block:
        // every split reads it again).
        let start = Stream::open(&file.path, file.format).map_err(|e| file.renamed(e))?;
        let Some(start) = start else { return Ok(None) };
        let mut head = Blocks::new(start, Default::default(), HEADER_BLOCK_BYTES);
        let Some(header) = head.header(file).map_err(|e| file.renamed(e))? else { return Ok(None) };
        let mut blocks = Blocks::new(stream, Default::default(), BLOCK_BYTES);
        blocks.lines = LineCheck { line: split.line, empty_run: split.empty_before };
        Ok(Some(Pieces { file, header, blocks, count, line: split.line }))
    }

    /// Reads the next `lines` lines (fewer at the end of the file, or
    /// before a record that spans the limit; more when that record comes
    /// first: `Blocks::lines`) into sinks made by `make_sink`, as `read`
    /// reads a whole file: the sinks in order, none once every line has
    /// been read.
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
