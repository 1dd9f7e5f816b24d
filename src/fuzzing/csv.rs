//! The records reader's targets: a whole file ([`csv_reader`]) and the
//! structural index against the line-at-a-time reader ([`csv_paths`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use chrono_tz::Tz;

use super::scratch_dir;
use crate::aggregate::{self, AggregateOptions, Bucketing, OnBadRow, Selector};
use crate::error::Error;
use crate::records::csv::{ChunkEnd, Reader, RowSink};
use crate::records::files::{Format, InputFile};
use crate::records::{self, Field, FieldError, Kind};
use crate::time::Buckets;

// ---------------------------------------------------------------- csv_reader

/// A records file of one kind. The first byte picks the kind (`& 3`) and,
/// with bit `4` set, starts the file with the kind's contract header (so
/// the fuzzer reaches rows at once); the rest is the file.
pub fn csv_reader(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else { return };
    let kind = Kind::ALL[(control & 3) as usize];
    let mut bytes = Vec::with_capacity(rest.len() + 128);
    if control & 4 != 0 {
        bytes.extend_from_slice(kind.columns().join(",").as_bytes());
        bytes.push(b'\n');
    }
    bytes.extend_from_slice(rest);
    check_index(&bytes);
    check_csv(kind, &bytes);
}

/// A chunk of a records file through the reader's structural index and
/// through its line-at-a-time reader, the oracle: the same events (rows
/// and their fields' text; malformed rows' column, value and reason), one
/// per line, in line order. The first byte picks the header's width
/// (`1 + byte % 16` columns, the contract's columns the header's in
/// reverse); the rest is the chunk, its bytes outside the index's input
/// (printable ASCII, newlines, carriage returns) mapped to structural ones
/// so that every input reaches the index.
pub fn csv_paths(data: &[u8]) {
    const MAPPED: &[u8] = b",\"\r\na9 ~";
    let Some((&control, rest)) = data.split_first() else { return };
    let width = 1 + (control % 16) as usize;
    let names: Vec<String> = (0..width).map(|i| format!("c{i}")).collect();
    let columns: Vec<usize> = (0..width).rev().collect();
    let chunk: Vec<u8> = rest
        .iter()
        .map(|&b| match b {
            b'\n' | b'\r' | 0x20..=0x7e => b,
            _ => MAPPED[b as usize % MAPPED.len()],
        })
        .collect();
    let Some(text) = records::simd::printable_text(&chunk) else {
        panic!("mapped bytes are not printable: {chunk:?}");
    };
    let reader = Reader::new(&columns, &names);
    let (mut indexed, mut by_lines) = (Events::default(), Events::default());
    let ended = reader.chunk_indexed(text, 2, &mut indexed);
    assert_eq!(ended, reader.chunk_lines(&chunk, Some(text), 2, &mut by_lines), "the readers end apart: {text:?}");
    assert_eq!(indexed.0, by_lines.0, "the two readers differ on {text:?}");
    // One event per record, in line order: a line, or the lines of a
    // quoted field that spans them; up to a record still open at the
    // chunk's end (left to the caller), which starts a line.
    let lines = memchr::memchr_iter(b'\n', &chunk).count() + usize::from(!chunk.is_empty() && !chunk.ends_with(b"\n"));
    let end = match ended {
        ChunkEnd::Done => 2 + lines as u64,
        ChunkEnd::Open { at, line } => {
            assert!(at == 0 || chunk[at - 1] == b'\n', "an open record not at a line's start: {text:?}");
            line
        }
        ChunkEnd::Stopped => panic!("the readers stopped: {text:?}"),
    };
    let numbers: Vec<u64> = indexed.0.iter().map(|(line, _)| *line).collect();
    assert!(numbers.windows(2).all(|pair| pair[0] < pair[1]), "lines out of order: {text:?}");
    assert!(numbers.iter().all(|line| (2..end).contains(line)), "a line past the end: {text:?}");
    assert_eq!(numbers.first().copied(), (end > 2).then_some(2), "the first line not read: {text:?}");
}

/// What a reader hands a sink, in order: a row's fields (their text,
/// whether found printable ASCII or not), or a malformed row's column,
/// value and reason.
#[derive(Default)]
struct Events(Vec<(u64, Event)>);

/// A row's fields' text, or a malformed row's column, value and reason.
type Event = Result<Vec<Vec<u8>>, [String; 3]>;

impl RowSink for Events {
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        let texts = fields.iter().map(|f| f.text_bytes().map(<[u8]>::to_vec).unwrap_or_default()).collect();
        self.0.push((line, Ok(texts)));
        true
    }
    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.0.push((line, Err([column.to_owned(), value, reason])));
        true
    }

    fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.0.push((line, Err([format!("unframed {column}"), value, reason])));
        true
    }
}

/// The reader's structural index (`records::simd`) of every 64-byte block
/// of `bytes` (the tail padded with zeros, as the reader pads it) equals
/// the byte-by-byte masks.
fn check_index(bytes: &[u8]) {
    use records::simd::{masks, masks_scalar, BLOCK};
    for block in bytes.chunks(BLOCK) {
        let mut whole = [0u8; BLOCK];
        whole[..block.len()].copy_from_slice(block);
        assert_eq!(masks(&whole), masks_scalar(&whole), "the SIMD and byte masks of {block:?} differ");
    }
}

/// What became of one row: its line and its outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Row {
    pub(super) line: u64,
    outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// Checked: the record (as text, for comparing), its id, content hash,
    /// amount.
    Record { shown: String, id: String, hash: u64, amount: i64 },
    /// Refused by `parse_record`.
    Refused(FieldError),
    /// Not the header's number of fields, or quoting refused within the
    /// line.
    Malformed,
    /// A quote open at the line's end: the file's error in either mode.
    Unframed,
}

fn outcome(kind: Kind, fields: &[Field<'_>]) -> Outcome {
    match records::parse_record(kind, fields) {
        Ok(record) => Outcome::Record {
            shown: format!("{record:?}"),
            id: record.record_id.to_owned(),
            hash: record.content_hash(),
            amount: record.amount,
        },
        Err(e) => Outcome::Refused(e),
    }
}

/// Collects every row the reader hands over.
pub(super) struct Collect {
    pub(super) kind: Kind,
    pub(super) rows: Vec<Row>,
}

impl RowSink for Collect {
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        assert_eq!(fields.len(), self.kind.columns().len(), "line {line}: a row of the wrong width");
        self.rows.push(Row { line, outcome: outcome(self.kind, fields) });
        true
    }

    fn malformed(&mut self, line: u64, _: &str, value: String, reason: String) -> bool {
        assert!(!reason.is_empty(), "line {line}: a malformed row without a reason ({value:?})");
        self.rows.push(Row { line, outcome: Outcome::Malformed });
        true
    }

    fn unframed(&mut self, line: u64, _: &str, value: String, reason: String) -> bool {
        assert!(!reason.is_empty(), "line {line}: an unframed line without a reason ({value:?})");
        self.rows.push(Row { line, outcome: Outcome::Unframed });
        true
    }
}

/// The rows of `bytes` by the contract's framing, read independently of
/// the reader: a line (without a final `\r`) is a record, with the lines
/// after it while a quoted field is open (RFC 4180); an empty line or bad
/// quoting is a malformed row, but a quote still open at the file's end
/// leaves the file unframed.
/// `None` when the header is refused.
fn line_rows(kind: Kind, bytes: &[u8]) -> Option<Vec<Row>> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return Some(Vec::new());
    }
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if lines.last().is_some_and(|last| last.is_empty()) {
        lines.pop();
    }
    let strip = |line: &'_ [u8]| -> Vec<u8> { line.strip_suffix(b"\r").unwrap_or(line).to_vec() };
    let header = split_line(&strip(lines.first()?)).ok()?;
    let mut columns = Vec::new();
    for column in kind.columns() {
        let mut found = header.iter().enumerate().filter(|(_, n)| n.as_slice() == column.as_bytes());
        match (found.next(), found.next()) {
            (Some((index, _)), None) => columns.push(index),
            _ => return None,
        }
    }
    let mut rows = Vec::new();
    let mut number = 1;
    while number < lines.len() {
        // A record: its line, and the lines after it while a quoted field
        // is open (RFC 4180), joined by the newlines between them.
        let first = number;
        let mut record = lines[number].to_vec();
        let split = loop {
            match split_line(&strip(&record)) {
                Err(Unsplit::Unclosed) if number + 1 < lines.len() => {
                    number += 1;
                    record.push(b'\n');
                    record.extend_from_slice(lines[number]);
                }
                split => break split,
            }
        };
        let record = strip(&record);
        let outcome = match split {
            Ok(fields) if !record.is_empty() && fields.len() == header.len() => {
                let fields: Vec<Field<'_>> = columns.iter().map(|&i| Field::Text(&fields[i])).collect();
                outcome(kind, &fields)
            }
            Err(Unsplit::Unclosed) => Outcome::Unframed,
            _ => Outcome::Malformed,
        };
        rows.push(Row { line: first as u64 + 1, outcome });
        number += 1;
    }
    Some(rows)
}

/// Why a line does not split into fields.
enum Unsplit {
    /// A quoted field that does not close on the line.
    Unclosed,
    /// Any other quoting fault.
    Refused,
}

/// The fields of one line: unquoted fields hold no quote; a quoted field
/// doubles its quotes and closes before a comma or the end. The first
/// fault from the left otherwise.
fn split_line(line: &[u8]) -> Result<Vec<Vec<u8>>, Unsplit> {
    let mut fields = Vec::new();
    let mut at = 0;
    loop {
        let mut field = Vec::new();
        if line.get(at) == Some(&b'"') {
            at += 1;
            loop {
                match (line.get(at), line.get(at + 1)) {
                    (None, _) => return Err(Unsplit::Unclosed),
                    (Some(b'"'), Some(b'"')) => {
                        field.push(b'"');
                        at += 2;
                    }
                    (Some(b'"'), _) => {
                        at += 1;
                        break;
                    }
                    (Some(&b), _) => {
                        field.push(b);
                        at += 1;
                    }
                }
            }
            fields.push(field);
            match line.get(at) {
                None => return Ok(fields),
                Some(b',') => at += 1,
                Some(_) => return Err(Unsplit::Refused),
            }
        } else {
            while let Some(&b) = line.get(at).filter(|b| **b != b',') {
                if b == b'"' {
                    return Err(Unsplit::Refused);
                }
                field.push(b);
                at += 1;
            }
            fields.push(field);
            if at == line.len() {
                return Ok(fields);
            }
            at += 1;
        }
    }
}

fn check_csv(kind: Kind, bytes: &[u8]) {
    let name = format!("{}/fuzz.csv", kind.name());
    let file =
        InputFile { kind, path: PathBuf::from(&name), name, format: Format::Csv, size: bytes.len() as u64, sum: None };
    let read = records::csv::read(&file, bytes, || Collect { kind, rows: Vec::new() });
    check_pieces(&file, bytes, &read);
    if over_limits(bytes) {
        assert!(matches!(read, Err(Error::BadFile { .. })), "read past the reader's limits: {:?}", read.is_ok());
        check_aggregate(kind, bytes, None);
        return;
    }
    let expected = line_rows(kind, bytes);
    let rows: Vec<Row> = match (read, &expected) {
        (Ok(sinks), Some(expected)) => {
            let rows: Vec<Row> = sinks.into_iter().flat_map(|s| s.rows).collect();
            assert_eq!(&rows, expected, "the reader and the line-by-line reading disagree");
            rows
        }
        (Err(Error::BadFile { message, .. }), None) => {
            assert!(!message.is_empty());
            check_aggregate(kind, bytes, None);
            return;
        }
        (Ok(_), None) => panic!("read a file whose header is refused line by line"),
        (Err(e), _) => panic!("refused a file whose header is good: {}", e.chain()),
    };
    check_aggregate(kind, bytes, Some(&rows));
}

/// The file written to disk and read through `records::csv::Pieces` (as
/// the ingest reads it: the file read with `read(2)`, a few lines at a
/// time): the rows `read` (the whole bytes) gave, or its error.
fn check_pieces(file: &InputFile, bytes: &[u8], read: &crate::error::Result<Vec<Collect>>) {
    let dir = scratch_dir();
    let path = dir.join("fuzz.csv");
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, bytes)) {
        panic!("cannot write {}: {e}", path.display());
    }
    let on_disk = InputFile { path, ..file.clone() };
    let kind = file.kind;
    let pieces = || -> crate::error::Result<Vec<Row>> {
        let mut rows = Vec::new();
        if let Some(mut pieces) = records::csv::Pieces::open(&on_disk)? {
            while !pieces.done() {
                rows.extend(pieces.next(3, || Collect { kind, rows: Vec::new() })?.into_iter().flat_map(|s| s.rows));
            }
        }
        Ok(rows)
    };
    let pieces = pieces();
    let _ = std::fs::remove_dir_all(&dir);
    match (read, pieces) {
        (Ok(sinks), Ok(rows)) => {
            let whole: Vec<&Row> = sinks.iter().flat_map(|s| &s.rows).collect();
            assert_eq!(whole, rows.iter().collect::<Vec<_>>(), "the file read in pieces and whole differ");
        }
        (Err(whole), Err(pieces)) => assert_eq!(whole.to_string(), pieces.to_string()),
        (whole, pieces) => panic!("read whole: {:?}; in pieces: {:?}", whole.as_ref().err(), pieces.err()),
    }
}

/// Whether a file that is not blank has a line longer than
/// `MAX_LINE_BYTES`, or more than `MAX_EMPTY_RUN` empty lines in a row
/// after its header: a file the reader refuses as a whole.
fn over_limits(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.iter().all(|b| b.is_ascii_whitespace()) {
        return false;
    }
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if lines.last().is_some_and(|last| last.is_empty()) {
        lines.pop();
    }
    let mut run = 0;
    for (number, line) in lines.iter().enumerate() {
        if line.len() > records::csv::MAX_LINE_BYTES {
            return true;
        }
        match number > 0 && (line.is_empty() || *line == b"\r") {
            true => run += 1,
            false => run = 0,
        }
        if run > records::csv::MAX_EMPTY_RUN {
            return true;
        }
    }
    false
}

/// What aggregating one file must give, derived from its rows.
struct Expected {
    read: u64,
    bad_lines: Vec<u64>,
    used: u64,
    duplicates: u64,
    amount: i128,
    conflict: bool,
    /// The first line whose quote is open at its end.
    unframed: Option<u64>,
}

fn expected(rows: &[Row]) -> Expected {
    let mut first: BTreeMap<&str, u64> = BTreeMap::new();
    let mut e = Expected {
        read: rows.len() as u64,
        bad_lines: Vec::new(),
        used: 0,
        duplicates: 0,
        amount: 0,
        conflict: false,
        unframed: None,
    };
    for row in rows {
        match &row.outcome {
            Outcome::Record { id, hash, amount, .. } => match first.get(id.as_str()) {
                Some(seen) if seen == hash => e.duplicates += 1,
                Some(_) => e.conflict = true,
                None => {
                    first.insert(id, *hash);
                    e.used += 1;
                    e.amount += *amount as i128;
                }
            },
            Outcome::Refused(_) | Outcome::Malformed => e.bad_lines.push(row.line),
            Outcome::Unframed => {
                e.bad_lines.push(row.line);
                e.unframed.get_or_insert(row.line);
            }
        }
    }
    e
}

/// The file as the only file of a data directory, through the aggregate
/// every command runs, in both bad-row modes.
fn check_aggregate(kind: Kind, bytes: &[u8], rows: Option<&[Row]>) {
    let dir = scratch_dir();
    let folder = dir.join(kind.name());
    if let Err(e) = std::fs::create_dir_all(&folder).and_then(|()| std::fs::write(folder.join("fuzz.csv"), bytes)) {
        panic!("cannot write {}: {e}", folder.display());
    }
    let everything =
        || Selector::everything(Bucketing::shared(Buckets::from_bounds(vec![i64::MIN, i64::MAX], Tz::UTC)));
    let set_aside = AggregateOptions { on_bad_row: OnBadRow::SetAside, ..AggregateOptions::default() };
    let set_aside = aggregate::aggregate(&dir, &everything(), set_aside);
    let fail = aggregate::aggregate(&dir, &everything(), AggregateOptions::default());
    let _ = std::fs::remove_dir_all(&dir);
    let Some(rows) = rows else {
        assert!(matches!(set_aside, Err(Error::BadFile { .. })), "a bad header aggregated: {set_aside:?}");
        assert!(matches!(fail, Err(Error::BadFile { .. })), "a bad header aggregated: {fail:?}");
        return;
    };
    let e = expected(rows);
    match (set_aside, e.unframed) {
        (Err(Error::BadRecord(bad)), Some(line)) => assert_eq!(bad.location.line, line, "the first unframed line"),
        (other, Some(line)) => panic!("set-aside mode gave {other:?}; line {line} is unframed"),
        (set_aside, None) => check_set_aside(kind, set_aside, &e),
    }
    match (fail, e.bad_lines.first()) {
        (Err(Error::BadRecord(bad)), Some(&line)) => assert_eq!(bad.location.line, line, "the first bad row"),
        (Err(Error::Conflict { .. }), None) => assert!(e.conflict),
        (Ok(result), None) => {
            assert!(!e.conflict);
            let tally = result.tallies.get(&kind).copied().unwrap_or_default();
            assert_eq!((tally.read, tally.used, tally.set_aside), (e.read, e.used, 0));
        }
        (other, first_bad) => panic!("fail mode gave {other:?}; first bad line {first_bad:?}"),
    }
}

/// Set-aside mode on a file whose lines are all framed: every bad line set
/// aside, the others counted and summed.
fn check_set_aside(kind: Kind, set_aside: crate::error::Result<aggregate::Aggregate>, e: &Expected) {
    match set_aside {
        Err(Error::Conflict { .. }) => assert!(e.conflict, "a conflict without conflicting rows"),
        Err(other) => panic!("set-aside mode failed: {other}"),
        Ok(result) => {
            assert!(!e.conflict, "conflicting rows aggregated");
            let tally = result.tallies.get(&kind).copied().unwrap_or_default();
            assert_eq!(tally.read, tally.used + tally.set_aside + tally.duplicates, "{tally:?}");
            assert_eq!(
                (tally.read, tally.used, tally.set_aside, tally.duplicates),
                (e.read, e.used, e.bad_lines.len() as u64, e.duplicates),
                "tally (read, used, set aside, duplicates)"
            );
            let lines: Vec<u64> = result.rejects.iter().map(|r| r.location.line).collect();
            assert_eq!(lines, e.bad_lines, "set-aside lines");
            assert!(result.rejects.iter().all(|r| r.location.file == format!("{}/fuzz.csv", kind.name())));
            let records: u64 = result.groups.values().map(|t| t.records).sum();
            let amount: i128 = result.groups.values().map(|t| t.amount).sum();
            assert_eq!((records, tally.selected, amount), (e.used, e.used, e.amount), "groups (records, amount)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_good_file_reads_the_same_through_both_readers() {
        let mut data = vec![5u8];
        data.extend_from_slice(
            b"m1,A1,,2026-11-20T13:45:01Z,sms,outbound,US,1,0.0050,0,\n\
              m1,A1,,2026-11-20T13:45:01Z,sms,outbound,US,1,0.005,0,\n\
              \"m2\",A1,,2026-11-20T13:45:01Z,sms,outbound,US,2,0.01,0,\n\
              m3,A1,,bad,sms,outbound,US,1,0.005,0,\n\
              m4,short\n",
        );
        csv_reader(&data);
        let mut bytes = Kind::Messages.columns().join(",").into_bytes();
        bytes.push(b'\n');
        bytes.extend_from_slice(&data[1..]);
        let rows = line_rows(Kind::Messages, &bytes).unwrap_or_default();
        let e = expected(&rows);
        assert_eq!((e.read, e.used, e.duplicates, e.bad_lines), (5, 2, 1, vec![5, 6]));
    }
}
