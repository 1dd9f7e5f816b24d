//! CSV input: plain, gzip and zstd, any column order, extra columns ignored.
//!
//! A file's bytes are split at record boundaries into chunks that are parsed
//! in parallel. A boundary is a newline outside quotes: with RFC 4180
//! quoting, that is a newline preceded by an even number of `"` since the
//! start of the body, so finding one takes a counting pass, not a parse.

use std::io::Read;

use rayon::prelude::*;

use super::files::{Format, InputFile};
use super::{Field, Kind};
use crate::error::{Error, Result};

/// What a reader hands each row to.
pub trait RowSink {
    /// One row, its fields in [`Kind::columns`] order. `false` stops reading.
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool;
    /// A row that could not be split into the header's fields. `false`
    /// stops reading.
    fn malformed(&mut self, line: u64, value: String, reason: String) -> bool;
}

/// Chunks smaller than this are not split further.
const CHUNK_BYTES: usize = 4 << 20;

/// The decoded bytes of a CSV file (decompressed when needed).
pub fn load(file: &InputFile) -> Result<Vec<u8>> {
    let raw = std::fs::read(&file.path).map_err(|e| Error::io(&file.path, e))?;
    match file.format {
        Format::Csv | Format::Parquet => Ok(raw),
        Format::CsvGz => {
            let mut out = Vec::with_capacity(raw.len() * 4);
            flate2::read::MultiGzDecoder::new(&raw[..])
                .read_to_end(&mut out)
                .map_err(|e| Error::io(&file.path, format!("not a readable gzip file: {e}")))?;
            Ok(out)
        }
        Format::CsvZst => zstd::stream::decode_all(&raw[..])
            .map_err(|e| Error::io(&file.path, format!("not a readable zstd file: {e}"))),
    }
}

/// Reads every row of a CSV file's `bytes` into sinks made by `make_sink`,
/// one sink per chunk, in file order.
pub fn read<S, F>(file: &InputFile, kind: Kind, bytes: &[u8], make_sink: F) -> Result<Vec<S>>
where
    S: RowSink + Send,
    F: Fn() -> S + Sync,
{
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Ok(Vec::new());
    }
    let mut reader = ::csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(bytes);
    let mut header = ::csv::ByteRecord::new();
    reader.read_byte_record(&mut header).map_err(|e| Error::io(&file.path, format!("unreadable header: {e}")))?;
    let body_start = reader.position().byte() as usize;
    let first_line = reader.position().line();
    let columns = map_columns(file, kind, &header)?;
    let width = header.len();
    let body = &bytes[body_start.min(bytes.len())..];
    let chunks = split(body, first_line);
    let read_chunk = |(offset, line, end): (usize, u64, usize)| {
        let mut sink = make_sink();
        read_chunk(&body[offset..end], line, &columns, width, &mut sink);
        sink
    };
    if chunks.len() == 1 {
        return Ok(chunks.into_iter().map(read_chunk).collect());
    }
    Ok(chunks.into_par_iter().map(read_chunk).collect())
}

fn map_columns(file: &InputFile, kind: Kind, header: &::csv::ByteRecord) -> Result<Vec<usize>> {
    let names: Vec<&[u8]> = header.iter().collect();
    kind.columns()
        .iter()
        .map(|column| {
            let mut found = names.iter().enumerate().filter(|(_, n)| **n == column.as_bytes()).map(|(i, _)| i);
            match (found.next(), found.next()) {
                (Some(index), None) => Ok(index),
                (Some(_), Some(_)) => {
                    Err(Error::io(&file.path, format!("column '{column}' appears more than once in the header")))
                }
                (None, _) => Err(Error::io(
                    &file.path,
                    format!(
                        "missing required column '{column}' (the header has: {})",
                        names.iter().map(|n| String::from_utf8_lossy(n)).collect::<Vec<_>>().join(", ")
                    ),
                )),
            }
        })
        .collect()
}

/// Splits `body` into `(offset, first line, end)` chunks at newlines outside
/// quotes.
fn split(body: &[u8], first_line: u64) -> Vec<(usize, u64, usize)> {
    if body.len() <= CHUNK_BYTES * 2 {
        return vec![(0, first_line, body.len())];
    }
    let mut chunks = Vec::new();
    let (mut start, mut line, mut quotes) = (0usize, first_line, 0usize);
    while start < body.len() {
        let mut cut = (start + CHUNK_BYTES).min(body.len());
        quotes += memchr::memchr_iter(b'"', &body[start..cut]).count();
        while cut < body.len() {
            match memchr::memchr2(b'"', b'\n', &body[cut..]) {
                Some(at) if body[cut + at] == b'"' => {
                    quotes += 1;
                    cut += at + 1;
                }
                Some(at) => {
                    cut += at + 1;
                    if quotes % 2 == 0 {
                        break;
                    }
                }
                None => cut = body.len(),
            }
        }
        chunks.push((start, line, cut));
        line += memchr::memchr_iter(b'\n', &body[start..cut]).count() as u64;
        start = cut;
    }
    chunks
}

fn read_chunk<S: RowSink>(chunk: &[u8], first_line: u64, columns: &[usize], width: usize, sink: &mut S) {
    let mut reader = ::csv::ReaderBuilder::new().has_headers(false).flexible(true).from_reader(chunk);
    let mut record = ::csv::ByteRecord::new();
    loop {
        match reader.read_byte_record(&mut record) {
            Ok(false) => return,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map_or(first_line, |p| first_line + p.line() - 1);
                sink.malformed(line, String::new(), format!("is not readable CSV: {e}"));
                return;
            }
        }
        let line = record.position().map_or(first_line, |p| first_line + p.line() - 1);
        if record.len() != width {
            if record.len() == 1 && record[0].is_empty() {
                continue;
            }
            let fields: Vec<_> = record.iter().map(String::from_utf8_lossy).collect();
            let shown = fields.join(",").chars().take(80).collect();
            if !sink.malformed(line, shown, format!("has {} fields; the header has {width}", record.len())) {
                return;
            }
            continue;
        }
        let mut fields = [Field::Null; 16];
        for (slot, &index) in fields.iter_mut().zip(columns) {
            *slot = Field::Text(&record[index]);
        }
        if !sink.row(line, &fields[..columns.len()]) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_only_outside_quotes() {
        let mut body = Vec::new();
        for i in 0..500_000 {
            body.extend_from_slice(format!("r{i},\"a\nb\"\"c\",x\n").as_bytes());
        }
        let chunks = split(&body, 2);
        assert!(chunks.len() > 1);
        let mut expected_line = 2;
        for (offset, line, end) in &chunks {
            assert!(body[*offset..].starts_with(b"r"), "chunk at {offset} starts mid-record");
            assert_eq!(*line, expected_line);
            expected_line += memchr::memchr_iter(b'\n', &body[*offset..*end]).count() as u64;
        }
        assert_eq!(chunks.last().unwrap().2, body.len());
    }
}
