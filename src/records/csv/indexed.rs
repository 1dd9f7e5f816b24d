//! The structural-index reader: a chunk of printable ASCII lines (quotes,
//! CRLF endings and all) read 64 bytes a step by
//! [`crate::records::simd::for_each_line`], which hands over each line's
//! commas outside quotes and its quotes.
//!
//! A line whose quotes are all simple (a field that opens with a quote and
//! closes with one just before its comma or the line's end, no quote in
//! between) is read in place: a quoted field is the text between its
//! quotes, with no copy. Any other line with a quote (a doubled quote to
//! unescape, or quoting that is wrong), a quote open at the line's end, or
//! a carriage return that is not the line's last byte goes to the
//! line-at-a-time reader's [`QuotedLine`]: it unescapes, and refuses a
//! faulty line with the same words, column and value as when the whole
//! chunk is read a line at a time.

use super::{shown, wrong_width, QuotedLine, Reader, RowSink};
use crate::records::simd::{for_each_line, printable_text, IndexedLine, LineMarks};
use crate::records::Field;

impl Reader<'_> {
    /// Reads the lines of `chunk` (the first at `first_line`) into `sink`,
    /// one row or malformed row per line; whether the sink wants more.
    pub(super) fn chunk<S: RowSink>(&self, chunk: &[u8], first_line: u64, sink: &mut S) -> bool {
        // When the whole chunk is printable ASCII lines (the usual case,
        // quoted or not, CRLF or LF), one vectorised pass says so for every
        // line at once (so the chunk is UTF-8, with no check of its own),
        // and the structural index finds its lines, commas and quotes.
        // Otherwise one UTF-8 check for the whole chunk, not one per field.
        match printable_text(chunk) {
            Some(text) => self.indexed_chunk(text, first_line, sink),
            None => self.chunk_by_lines(chunk, std::str::from_utf8(chunk).ok(), first_line, sink),
        }
    }

    /// [`Reader::chunk`] of a chunk of printable ASCII lines (carriage
    /// returns allowed): lines, commas and quotes from the structural index
    /// ([`crate::records::simd`]), 64 bytes a step.
    pub(crate) fn indexed_chunk<S: RowSink>(&self, text: &str, first_line: u64, sink: &mut S) -> bool {
        let mut line = first_line;
        let mut marks = LineMarks::default();
        let mut quoted = QuotedLine::new();
        for_each_line(text.as_bytes(), &mut marks, |found| {
            let go_on = self.indexed_line(text, found, &mut quoted, line, sink);
            line += 1;
            go_on
        })
    }

    /// One line the index `found` in `text`.
    #[inline]
    fn indexed_line<S: RowSink>(
        &self,
        text: &str,
        found: &IndexedLine<'_>,
        quoted: &mut QuotedLine,
        line: u64,
        sink: &mut S,
    ) -> bool {
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
            return self.line(line_text.as_bytes(), Some(line_text), found.commas, line, sink);
        }
        let commas = found.commas;
        let bounds = |index: usize| {
            let start = if index == 0 { 0 } else { commas[index - 1] + 1 };
            let stop = if index == commas.len() { line_text.len() } else { commas[index] };
            (start, stop)
        };
        // Every field's quoting, before its width (as the line reader).
        let mut quotes = found.quotes.iter().copied().peekable();
        for index in 0..=commas.len() {
            let (start, stop) = bounds(index);
            let (mut n, mut first, mut last) = (0, 0, 0);
            while let Some(at) = quotes.next_if(|&at| at < stop) {
                if n == 0 {
                    first = at;
                }
                last = at;
                n += 1;
            }
            let simple = n == 0 || (n == 2 && first == start && last + 1 == stop);
            if !simple {
                // A doubled quote to unescape, or quoting to refuse.
                return self.quoted_line(quoted, line_text.as_bytes(), line, sink);
            }
        }
        let n_fields = commas.len() + 1;
        if n_fields != self.width {
            let (column, reason) = wrong_width(self.names, n_fields);
            return sink.malformed(line, column, shown(line_text.as_bytes()), reason);
        }
        let mut fields = [Field::Null; 16];
        for (slot, &index) in fields.iter_mut().zip(self.columns) {
            let (start, stop) = bounds(index);
            let value = &line_text[start..stop];
            // A simple quoted field: the text between its quotes.
            *slot = Field::Ascii(match value.len() >= 2 && value.starts_with('"') {
                true => &value[1..value.len() - 1],
                false => value,
            });
        }
        sink.row(line, &fields[..self.columns.len()])
    }
}
