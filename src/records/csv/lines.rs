//! The line-at-a-time reader: a line's commas by the SWAR scan of
//! [`crate::records::simd::split_commas`], and a line with a quote or a
//! carriage return split by [`QuotedLine`], RFC 4180 within the line. It
//! reads the chunks the structural index does not (bytes outside printable
//! ASCII), the lines the index finds faulty, and is the index's oracle.

use super::{shown, strip_cr, wrong_width, ChunkEnd, Reader, RowSink, Spanned, MAX_LINE_BYTES};
use crate::records::simd::{split_commas, Commas, Line};
use crate::records::Field;

impl Reader<'_> {
    /// [`Reader::chunk`] a line at a time: for a chunk with a byte outside
    /// printable ASCII (other than newlines and carriage returns), or one
    /// that is not UTF-8 (`chunk_text` is `None`). The oracle of the
    /// structural index: both read every printable chunk the same.
    pub(crate) fn chunk_by_lines<S: RowSink>(
        &self,
        chunk: &[u8],
        chunk_text: Option<&str>,
        first_line: u64,
        sink: &mut S,
    ) -> ChunkEnd {
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
                match self.quoted_line(&mut quoted, text, line, sink) {
                    Some(go_on) => go_on,
                    None => return ChunkEnd::Open { at: pos, line },
                }
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
                return ChunkEnd::Stopped;
            }
            pos += end + 1;
            line += 1;
        }
        ChunkEnd::Done
    }

    /// One line without a quote (`text`, without its line ending; `ascii`
    /// the same when it is printable ASCII) whose commas are at `commas`:
    /// a row of [`Field::Ascii`] or [`Field::Text`] fields, or a malformed
    /// row (empty, or not as wide as the header).
    #[inline]
    pub(super) fn line<S: RowSink>(
        &self,
        text: &[u8],
        ascii: Option<&str>,
        commas: &[usize],
        line: u64,
        sink: &mut S,
    ) -> bool {
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
    /// `None` for a line whose quoted field does not close on it: the
    /// record spans lines ([`Reader::spanning_record`]).
    pub(super) fn quoted_line<S: RowSink>(
        &self,
        quoted: &mut QuotedLine,
        text: &[u8],
        line: u64,
        sink: &mut S,
    ) -> Option<bool> {
        match quoted.split(text) {
            Err(quoting) if quoting.fault == QuotingFault::Unclosed => None,
            split => Some(self.split_record(quoted, split, text, line, sink)),
        }
    }

    /// The row of a record (`text`, without its line ending) as `quoted`
    /// split it (`split`), or its malformed row.
    fn split_record<S: RowSink>(
        &self,
        quoted: &QuotedLine,
        split: std::result::Result<(), Quoting>,
        text: &[u8],
        line: u64,
        sink: &mut S,
    ) -> bool {
        if let Err(quoting) = split {
            // The value shown is the record from the field at fault on.
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

    /// The record at `at` in `chunk` (line `line`), whose quoted field
    /// does not close on its first line: under RFC 4180 the line breaks up
    /// to its closing quote are the field's, so the record runs on, a line
    /// at a time, until its quotes close. Its row (or malformed row) is
    /// numbered by its first line, and the next record's line counts every
    /// line it took. A record that runs to the chunk's end is not read
    /// ([`Spanned::Open`]: the caller reads on, or the file ends there); one
    /// longer than [`MAX_LINE_BYTES`] is the file's error
    /// ([`RowSink::unframed`]), as a damaged quote would make it.
    pub(super) fn spanning_record<S: RowSink>(&self, chunk: &[u8], at: usize, line: u64, sink: &mut S) -> Spanned {
        let rest = &chunk[at..];
        let end = record_end(rest);
        if end.unwrap_or(rest.len()) > MAX_LINE_BYTES {
            self.refuse_open(rest, line, MAX_LINE_BYTES, sink);
            return Spanned::Stopped;
        }
        let Some(end) = end else { return Spanned::Open };
        let text = strip_cr(&rest[..end]);
        let mut quoted = QuotedLine::new();
        let split = quoted.split(text);
        let breaks = memchr::memchr_iter(b'\n', text).count() as u64;
        let next = Spanned::Read { next: (at + end + 1).min(chunk.len()), line: line + 1 + breaks };
        match self.split_record(&quoted, split, text, line, sink) {
            true => next,
            false => Spanned::Stopped,
        }
    }

    /// The file's error for the record at `line` (`record`, to the input's
    /// end), whose quoted field does not close: by the input's end
    /// (`limit` 0: [`ChunkEnd::Open`] at its end), or within `limit` bytes.
    pub(super) fn refuse_open<S: RowSink>(&self, record: &[u8], line: u64, limit: usize, sink: &mut S) {
        let first = strip_cr(&record[..memchr::memchr(b'\n', record).unwrap_or(record.len())]);
        let (column, value, quoting) = match QuotedLine::new().split(first) {
            Err(quoting) => (
                self.names.get(quoting.field).map_or("-", String::as_str),
                shown(&first[quoting.start..]),
                Some(quoting),
            ),
            Ok(()) => ("-", shown(first), None),
        };
        sink.unframed(line, column, value, unclosed(self.names, quoting, limit));
    }
}

/// Where the record that starts `rest` ends: the index of the newline
/// after it (or `rest`'s length, for a last record without one); `None`
/// when `rest` ends inside its quoted field. A newline ends the record
/// outside quotes, and inside a field after a fault in its quoting (a
/// quote in an unquoted field, text after a closing quote), as
/// [`QuotedLine::split`] finds them: such a record is malformed, and
/// ends with its line. One pass, so a long record costs its length.
pub(super) fn record_end(rest: &[u8]) -> Option<usize> {
    let line_end = |from: usize| memchr::memchr(b'\n', &rest[from.min(rest.len())..]).map_or(rest.len(), |n| from + n);
    let mut at = 0;
    loop {
        if rest.get(at) == Some(&b'"') {
            at += 1;
            loop {
                at += memchr::memchr(b'"', &rest[at..])? + 1;
                if rest.get(at) == Some(&b'"') {
                    at += 1;
                } else {
                    break;
                }
            }
            match rest.get(at) {
                None => return Some(rest.len()),
                Some(b'\n') => return Some(at),
                Some(b',') => at += 1,
                // Text after the closing quote (a carriage return ending
                // the line included): the record ends with the line.
                Some(_) => return Some(line_end(at)),
            }
        } else {
            let stop = memchr::memchr2(b',', b'\n', &rest[at..]).map_or(rest.len(), |n| at + n);
            if memchr::memchr(b'"', &rest[at..stop]).is_some() {
                return Some(line_end(at));
            }
            match rest.get(stop) {
                Some(b',') => at = stop + 1,
                _ => return Some(stop),
            }
        }
    }
}

/// The reason of a quoted field (whose `quoting` says which) that never
/// closes: by the input's end, or (`limit` > 0) within `limit` bytes.
fn unclosed(names: &[String], quoting: Option<Quoting>, limit: usize) -> String {
    let field = match quoting.map(|quoting| (quoting.field, names.get(quoting.field))) {
        Some((index, Some(name))) => format!("field {} ('{}')", index + 1, crate::error::printable(name)),
        Some((index, None)) => format!("field {}", index + 1),
        None => "a field".to_owned(),
    };
    match limit {
        0 => format!(
            "has a quote that opens {field} and does not close by the end of the input (a quoted field may \
             span lines, but not past the input's end; the lines after it would be part of it, so it is \
             never set aside)"
        ),
        limit => format!(
            "has a quote that opens {field} and does not close within {limit} bytes, the most a record may \
             have (the lines after it would be part of it, so it is never set aside)"
        ),
    }
}

/// Fields of one line split by RFC 4180 rules, unquoted into a reused
/// buffer. Stricter than a general CSV reader: a quote inside an unquoted
/// field and text after a closing quote are errors (each a sign of damage,
/// never a value), and so is a quote still open at the end of the text
/// (a record's reader joins the lines it spans first).
pub(super) struct QuotedLine {
    output: Vec<u8>,
    ends: Vec<usize>,
}

/// Why a line's quoting is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Quoting {
    /// What is wrong.
    pub(super) fault: QuotingFault,
    /// The field at fault, 0-based.
    pub(super) field: usize,
    /// Where that field starts in the line.
    pub(super) start: usize,
}

/// What is wrong with a line's quoting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum QuotingFault {
    /// A quoted field whose closing quote is not on the line.
    Unclosed,
    /// A quote inside a field that does not start with one.
    InsideUnquoted,
    /// Text between a closing quote and the next comma.
    AfterClosing,
}

impl Quoting {
    /// The reason, naming the field by its header name where there is one.
    pub(super) fn reason(self, names: &[String]) -> String {
        let field = match names.get(self.field) {
            Some(name) => format!("field {} ('{}')", self.field + 1, crate::error::printable(name)),
            None => format!("field {}", self.field + 1),
        };
        match self.fault {
            QuotingFault::Unclosed => format!("has a quote that opens {field} and does not close"),
            QuotingFault::InsideUnquoted => {
                format!("has a stray quote in {field} (a field with a quote must be quoted, the quote doubled)")
            }
            QuotingFault::AfterClosing => format!("has text after the closing quote of {field}"),
        }
    }
}

impl QuotedLine {
    pub(super) fn new() -> QuotedLine {
        QuotedLine { output: Vec::with_capacity(1024), ends: Vec::with_capacity(64) }
    }

    /// Splits `line` (without its line ending) into fields.
    pub(super) fn split(&mut self, line: &[u8]) -> std::result::Result<(), Quoting> {
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
    pub(super) fn fields(&self) -> impl Iterator<Item = &[u8]> {
        (0..self.ends.len()).map(|index| self.field(index))
    }
}
