//! The line-at-a-time reader: a line's commas by the SWAR scan of
//! [`crate::records::simd::split_commas`], and a line with a quote or a
//! carriage return split by [`QuotedLine`], RFC 4180 within the line. It
//! reads the chunks the structural index does not (bytes outside printable
//! ASCII), the lines the index finds faulty, and is the index's oracle.

use super::{shown, strip_cr, wrong_width, Reader, RowSink};
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
    pub(super) fn quoted_line<S: RowSink>(
        &self,
        quoted: &mut QuotedLine,
        text: &[u8],
        line: u64,
        sink: &mut S,
    ) -> bool {
        if let Err(quoting) = quoted.split(text) {
            // The value shown is the line from the field at fault on.
            let column = self.names.get(quoting.field).map_or("-", String::as_str);
            let (value, reason) = (shown(&text[quoting.start..]), quoting.reason(self.names));
            return match quoting.fault {
                QuotingFault::Unclosed => sink.unframed(line, column, value, reason),
                _ => sink.malformed(line, column, value, reason),
            };
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

/// Fields of one line split by RFC 4180 rules, unquoted into a reused
/// buffer. Stricter than a general CSV reader: a field cannot span lines,
/// so a quote open at the end of the line is an error, and so are a quote
/// inside an unquoted field and text after a closing quote (each a sign of
/// damage, never a value).
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
            QuotingFault::Unclosed => {
                format!(
                    "has a quote that opens {field} and does not close on this line (a field cannot span lines; \
                     the lines after it may be part of it, so it is never set aside)"
                )
            }
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
