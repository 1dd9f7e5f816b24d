//! The structural-index reader: a chunk of printable ASCII lines (quotes,
//! CRLF endings and all) read 64 bytes a step by
//! [`crate::records::simd::for_each_line`], which hands over each line's
//! commas outside quotes and its quotes.
//!
//! A line whose quotes are all well placed is read from the index:
//!
//! - a field that opens with a quote and closes with one just before its
//!   comma or the line's end, no quote in between, is the text between
//!   its quotes, with no copy;
//! - such a field whose other quotes come in adjacent pairs (`""`) is
//!   unescaped, that field alone, into a buffer reused from line to line.
//!
//! Any other line with a quote (quoting that is wrong), a quote open at
//! the line's end, or a carriage return that is not the line's last byte
//! goes to the line-at-a-time reader's [`QuotedLine`]: it refuses a faulty
//! line with the same words, column and value as when the whole chunk is
//! read a line at a time.

use super::{shown, wrong_width, ChunkEnd, QuotedLine, Reader, RowSink, Spanned};
use crate::records::simd::{for_each_line, printable_text, IndexedLine, LineMarks};
use crate::records::Field;

impl Reader<'_> {
    /// Reads the records of `chunk` (its first line numbered `first_line`)
    /// into `sink`, one row or malformed row per record: a line, or the
    /// lines a quoted field spans ([`Reader::spanning_record`]).
    pub(super) fn chunk<S: RowSink>(&self, chunk: &[u8], first_line: u64, sink: &mut S) -> ChunkEnd {
        // When the whole chunk is printable ASCII lines (the usual case,
        // quoted or not, CRLF or LF), one vectorised pass says so for every
        // line at once (so the chunk is UTF-8, with no check of its own),
        // and the structural index finds its lines, commas and quotes.
        // Otherwise one UTF-8 check for the whole chunk, not one per field.
        match printable_text(chunk) {
            Some(text) => self.chunk_indexed(text, first_line, sink),
            None => self.chunk_lines(chunk, std::str::from_utf8(chunk).ok(), first_line, sink),
        }
    }

    /// [`Reader::chunk`] of printable ASCII `text` by the structural index.
    pub(crate) fn chunk_indexed<S: RowSink>(&self, text: &str, first_line: u64, sink: &mut S) -> ChunkEnd {
        // `at` follows a newline: a character boundary.
        self.records(text.as_bytes(), first_line, sink, |at, line, sink| self.indexed_chunk(&text[at..], line, sink))
    }

    /// [`Reader::chunk`] a line at a time (`text`: `chunk` when it is
    /// UTF-8).
    pub(crate) fn chunk_lines<S: RowSink>(
        &self,
        chunk: &[u8],
        text: Option<&str>,
        first_line: u64,
        sink: &mut S,
    ) -> ChunkEnd {
        self.records(chunk, first_line, sink, |at, line, sink| {
            self.chunk_by_lines(&chunk[at..], text.map(|text| &text[at..]), line, sink)
        })
    }

    /// The records of `chunk`: passes of `lines` (which reads the lines
    /// from a byte offset, numbered from a line, until a record whose
    /// quoted field does not close on its line), each such record read by
    /// [`Reader::spanning_record`] between two passes.
    fn records<S: RowSink>(
        &self,
        chunk: &[u8],
        first_line: u64,
        sink: &mut S,
        mut lines: impl FnMut(usize, u64, &mut S) -> ChunkEnd,
    ) -> ChunkEnd {
        let (mut at, mut line) = (0, first_line);
        loop {
            let end = lines(at, line, sink);
            let ChunkEnd::Open { at: open, line: open_line } = end else { return end };
            match self.spanning_record(chunk, at + open, open_line, sink) {
                Spanned::Read { next, line: next_line } => (at, line) = (next, next_line),
                Spanned::Stopped => return ChunkEnd::Stopped,
                Spanned::Open => return ChunkEnd::Open { at: at + open, line: open_line },
            }
        }
    }

    /// [`Reader::chunk`] of a chunk of printable ASCII lines (carriage
    /// returns allowed): lines, commas and quotes from the structural index
    /// ([`crate::records::simd`]), 64 bytes a step. It stops at a line
    /// whose quoted field does not close on it ([`ChunkEnd::Open`]).
    pub(crate) fn indexed_chunk<S: RowSink>(&self, text: &str, first_line: u64, sink: &mut S) -> ChunkEnd {
        let mut line = first_line;
        let mut marks = LineMarks::default();
        let mut quoted = QuotedLine::new();
        let mut unescaped = Unescaped::default();
        let mut open = None;
        let read = for_each_line(text.as_bytes(), &mut marks, |found| {
            match self.indexed_line(text, found, &mut quoted, &mut unescaped, line, sink) {
                Some(go_on) => {
                    line += 1;
                    go_on
                }
                None => {
                    open = Some(ChunkEnd::Open { at: found.start, line });
                    false
                }
            }
        });
        match (open, read) {
            (Some(open), _) => open,
            (None, true) => ChunkEnd::Done,
            (None, false) => ChunkEnd::Stopped,
        }
    }

    /// One line the index `found` in `text`.
    #[inline]
    fn indexed_line<S: RowSink>(
        &self,
        text: &str,
        found: &IndexedLine<'_>,
        quoted: &mut QuotedLine,
        unescaped: &mut Unescaped,
        line: u64,
        sink: &mut S,
    ) -> Option<bool> {
        // Cut at ASCII bytes, so at character boundaries.
        let mut line_text = &text[found.start..found.end];
        let mut returns = found.returns;
        if let Some(head) = line_text.strip_suffix('\r') {
            // A CRLF ending: the carriage return is dropped.
            line_text = head;
            returns -= 1;
        }
        if returns > 0 || found.open {
            return self.quoted_line(quoted, line_text.as_bytes(), line, sink);
        }
        if found.quotes.is_empty() {
            return Some(self.line(line_text.as_bytes(), Some(line_text), found.commas, line, sink));
        }
        let commas = found.commas;
        let bounds = |index: usize| {
            let start = if index == 0 { 0 } else { commas[index - 1] + 1 };
            let stop = if index == commas.len() { line_text.len() } else { commas[index] };
            (start, stop)
        };
        // Every field's quoting, before its width (as the line reader).
        // `escaped`: the fields (of the first 64) that hold a doubled quote.
        let (quotes, mut escaped) = (found.quotes, 0u64);
        if !simply_quoted(line_text.as_bytes(), quotes) {
            let mut from = 0;
            for index in 0..=commas.len() {
                let (start, stop) = bounds(index);
                let to = from + quotes[from..].iter().take_while(|&&at| at < stop).count();
                match field_quoting(&quotes[from..to], start, stop) {
                    FieldQuoting::Simple => {}
                    FieldQuoting::Doubled if index < 64 => escaped |= 1 << index,
                    // Quoting to refuse (or a doubled quote past field 64).
                    _ => return self.quoted_line(quoted, line_text.as_bytes(), line, sink),
                }
                from = to;
            }
        }
        let n_fields = commas.len() + 1;
        if n_fields != self.width {
            let (column, reason) = wrong_width(self.names, n_fields);
            return Some(sink.malformed(line, column, shown(line_text.as_bytes()), reason));
        }
        // The chosen fields with a doubled quote, unescaped first: the
        // fields then borrow the buffer.
        let is_escaped = |index: usize| index < 64 && escaped & (1 << index) != 0;
        if escaped != 0 {
            unescaped.clear();
            for (slot, &index) in self.columns.iter().enumerate() {
                if is_escaped(index) {
                    let (start, stop) = bounds(index);
                    unescaped.push(slot, &line_text[start + 1..stop - 1]);
                }
            }
        }
        let mut fields = [Field::Null; 16];
        for (slot, (field, &index)) in fields.iter_mut().zip(self.columns).enumerate() {
            let (start, stop) = bounds(index);
            let value = &line_text[start..stop];
            *field = Field::Ascii(match is_escaped(index).then(|| unescaped.get(slot)).flatten() {
                Some(text) => text,
                // A simple quoted field: the text between its quotes.
                None if value.len() >= 2 && value.starts_with('"') => &value[1..value.len() - 1],
                None => value,
            });
        }
        Some(sink.row(line, &fields[..self.columns.len()]))
    }
}

/// Whether the quotes of `line` (at `quotes`, in order) come in pairs that
/// each open a field and close it: every field [`FieldQuoting::Simple`],
/// found without cutting the line into fields (every text field quoted, or
/// empty strings written `""`, as exports write them). A pair's first
/// quote follows an even count of quotes, so it is outside quotes, and so
/// are the bytes before and after the pair: a comma there ends a field.
fn simply_quoted(line: &[u8], quotes: &[usize]) -> bool {
    quotes.len().is_multiple_of(2)
        && quotes.chunks_exact(2).all(|pair| {
            let (open, close) = (pair[0], pair[1]);
            (open == 0 || line[open - 1] == b',') && (close + 1 == line.len() || line[close + 1] == b',')
        })
}

/// How one field of an indexed line is quoted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldQuoting {
    /// No quote, or one that opens it and one that closes it.
    Simple,
    /// Quoted, with doubled quotes inside and no other quote.
    Doubled,
    /// Any other quoting: a stray, an unclosed or a misplaced quote.
    Refused,
}

/// The quoting of the field `start..stop` of a line whose quotes in it are
/// at `quotes` (in order).
fn field_quoting(quotes: &[usize], start: usize, stop: usize) -> FieldQuoting {
    match quotes {
        [] => FieldQuoting::Simple,
        [first, .., last] if *first == start && last + 1 == stop => {
            let inner = &quotes[1..quotes.len() - 1];
            if inner.is_empty() {
                FieldQuoting::Simple
            } else if inner.len().is_multiple_of(2) && inner.chunks_exact(2).all(|pair| pair[0] + 1 == pair[1]) {
                FieldQuoting::Doubled
            } else {
                FieldQuoting::Refused
            }
        }
        _ => FieldQuoting::Refused,
    }
}

/// The unescaped text of a line's fields that hold doubled quotes, each
/// under its slot among the chosen columns; reused from line to line.
#[derive(Default)]
struct Unescaped {
    /// The fields' text, one after the other.
    text: String,
    /// Per field: its slot and its range in `text`.
    fields: Vec<(usize, std::ops::Range<usize>)>,
}

impl Unescaped {
    fn clear(&mut self) {
        self.text.clear();
        self.fields.clear();
    }

    /// Adds the text between a field's quotes, each doubled quote made one.
    fn push(&mut self, slot: usize, quoted: &str) {
        let start = self.text.len();
        let mut rest = quoted;
        while let Some(at) = rest.find("\"\"") {
            self.text.push_str(&rest[..at + 1]);
            rest = &rest[at + 2..];
        }
        self.text.push_str(rest);
        self.fields.push((slot, start..self.text.len()));
    }

    /// The unescaped text of the field in `slot`, if it has one.
    fn get(&self, slot: usize) -> Option<&str> {
        self.fields.iter().find(|(s, _)| *s == slot).map(|(_, range)| &self.text[range.clone()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A field's quoting, from its quotes' places, and the unescaped text
    /// of fields with doubled quotes.
    #[test]
    fn field_quoting_and_unescaping() {
        let quoting = |field: &str| {
            let quotes: Vec<usize> = field.match_indices('"').map(|(at, _)| at).collect();
            field_quoting(&quotes, 0, field.len())
        };
        let cases = [
            ("ab", FieldQuoting::Simple),
            ("", FieldQuoting::Simple),
            ("\"\"", FieldQuoting::Simple),
            ("\"a,b\"", FieldQuoting::Simple),
            ("\"a\"\"b\"", FieldQuoting::Doubled),
            ("\"\"\"\"", FieldQuoting::Doubled),
            ("\"\"\"\"\"\"", FieldQuoting::Doubled),
            ("\"\"\"", FieldQuoting::Refused),
            ("\"a\"b\"", FieldQuoting::Refused),
            ("a\"b", FieldQuoting::Refused),
            ("\"a\"b", FieldQuoting::Refused),
            ("\"a\" \"b\"", FieldQuoting::Refused),
        ];
        for (field, expected) in cases {
            assert_eq!(quoting(field), expected, "{field}");
        }
        // A line simply quoted is one whose every field is Simple, and
        // doubled quotes are not simple.
        let lines = [
            "a,b",
            "\"a\",\"b\"",
            "\"\",,\"x,y\"",
            "\"a\"\"b\",c",
            "\"a\"b,c",
            "a\"b\",c",
            "\"a\" ,b",
            "\"\"\"\"",
            "\"a,\"\"",
            ",\"\"",
        ];
        for line in lines {
            let quotes: Vec<usize> = line.match_indices('"').map(|(at, _)| at).collect();
            // Commas outside quotes, as the structural index finds them.
            let mut commas = Vec::new();
            for (at, byte) in line.bytes().enumerate() {
                if byte == b',' && quotes.iter().filter(|&&q| q < at).count() % 2 == 0 {
                    commas.push(at);
                }
            }
            let starts = std::iter::once(0).chain(commas.iter().map(|c| c + 1));
            let stops = commas.iter().copied().chain(std::iter::once(line.len()));
            let every_simple = starts.zip(stops).all(|(start, stop)| {
                let inside: Vec<usize> = quotes.iter().copied().filter(|&q| q >= start && q < stop).collect();
                field_quoting(&inside, start, stop) == FieldQuoting::Simple
            });
            assert_eq!(simply_quoted(line.as_bytes(), &quotes), every_simple, "{line}");
        }
        let mut unescaped = Unescaped::default();
        unescaped.push(3, "a\"\"b");
        unescaped.push(0, "\"\"");
        unescaped.push(5, "\"\"x\"\"\"\"");
        assert_eq!(unescaped.get(3), Some("a\"b"));
        assert_eq!(unescaped.get(0), Some("\""));
        assert_eq!(unescaped.get(5), Some("\"x\"\""));
        assert_eq!(unescaped.get(1), None);
        unescaped.clear();
        assert_eq!(unescaped.get(3), None);
    }
}
