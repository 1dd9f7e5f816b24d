//! Fuzz entry points: each takes arbitrary bytes, runs them through the
//! real code and asserts what must hold for any input. A panic here is a
//! finding (a bug in the code under test, or in the check).
//!
//! The libFuzzer targets in `fuzz/` (`cargo fuzz run <target>`, see
//! `docs/fuzzing.md`) call these, and so does `tests/it/fuzzing.rs`, which
//! replays the seed corpus and a bounded random run in plain `cargo test`.
//! Only wrappers and checks live here: every path goes through the same
//! functions the commands use.
//!
//! - [`csv_reader`]: a records file through `records::csv::read` (compared
//!   row for row with an independent line-by-line reading of the framing:
//!   every line after the header is one row or one malformed row, at its
//!   line; a file past the line limits refused whole), through
//!   `records::csv::Pieces` from disk a few lines at a time (the same rows
//!   or error), and through `aggregate::aggregate`, in both `--on-bad-row` modes:
//!   `read = used + set_aside + duplicates` with `read` the data lines;
//!   and the reader's SIMD structural index against a byte loop.
//! - [`record_checks`]: fields into `records::parse_record` in each input
//!   form; an accepted record reads back the same from its canonical text
//!   and from Parquet-typed fields.
//! - [`query_parser`]: a query string into `UsageParams::parse_query` and
//!   `UsageRequest::resolve` at a fixed `now`: a 400 naming a known key, or
//!   a window within its cap whose buckets tile it; its page token resumes
//!   the same window.
//! - [`token_decoder`]: text, bodies sealed with the key and hand-made
//!   tokens into `PageToken::decode` and `resolve`: a 400, or a sane window.
//! - [`parquet_input`]: a file's bytes as a Parquet records file of each
//!   kind (`records::parquet::read`) and as any Parquet file
//!   (`parquet::read_frame`): rows numbered from 1, or an error; never a
//!   panic or an abort.
//! - [`rollup_file`], [`index_file`], [`records_file`], [`manifest_file`]:
//!   the readers of each kind of store file, each as the store reads it
//!   (a request's and the report's rollup reads and the ingest's merge;
//!   the ingest's index reads and filter; the stored records under a
//!   request no rollup grain answers; the manifest parser): an answer or
//!   an error naming the file, never a panic or an abort.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;

use crate::aggregate::rows::Rows;
use crate::aggregate::{self, AggregateOptions, Bucketing, OnBadRow, Selector};
use crate::error::Error;
use crate::money::{Amount, SCALE};
use crate::query::{UsageParams, UsageRequest, KEYS};
use crate::records::csv::RowSink;
use crate::records::files::{Format, InputFile};
use crate::records::{self, Field, FieldError, Kind, Record};
use crate::store::{Manifest, Store, FORMAT_VERSION};
use crate::time::{Buckets, Granularity};
use crate::token::{self, PageToken, TokenKey};

/// A fuzz target: bytes in, a panic on a broken invariant.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/` file and corpus
/// folder.
pub const TARGETS: [(&str, Target); 9] = [
    ("csv_reader", csv_reader),
    ("record_checks", record_checks),
    ("query_parser", query_parser),
    ("token_decoder", token_decoder),
    ("parquet_input", parquet_input),
    ("rollup_file", rollup_file),
    ("index_file", index_file),
    ("records_file", records_file),
    ("manifest_file", manifest_file),
];

/// The fixed clock of the request targets.
fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_795_262_400, 0).unwrap_or_default() // 2026-11-21T12:00:00Z
}

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
struct Row {
    line: u64,
    outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    /// Checked: the record (as text, for comparing), its id, content hash,
    /// amount.
    Record { shown: String, id: String, hash: u64, amount: i64 },
    /// Refused by `parse_record`.
    Refused(FieldError),
    /// Not the header's number of fields.
    Malformed,
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
struct Collect {
    kind: Kind,
    rows: Vec<Row>,
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
}

/// The rows of `bytes` by the contract's framing, read independently of
/// the reader: a line (without a final `\r`) is a record; RFC 4180 quoting
/// within the line; an empty line or bad quoting is a malformed row.
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
    let header = split_line(&strip(lines.first()?))?;
    let mut columns = Vec::new();
    for column in kind.columns() {
        let mut found = header.iter().enumerate().filter(|(_, n)| n.as_slice() == column.as_bytes());
        match (found.next(), found.next()) {
            (Some((index, _)), None) => columns.push(index),
            _ => return None,
        }
    }
    let mut rows = Vec::new();
    for (number, line) in lines.iter().enumerate().skip(1) {
        let line = strip(line);
        let outcome = match split_line(&line) {
            Some(fields) if !line.is_empty() && fields.len() == header.len() => {
                let fields: Vec<Field<'_>> = columns.iter().map(|&i| Field::Text(&fields[i])).collect();
                outcome(kind, &fields)
            }
            _ => Outcome::Malformed,
        };
        rows.push(Row { line: number as u64 + 1, outcome });
    }
    Some(rows)
}

/// The fields of one line: unquoted fields hold no quote; a quoted field
/// doubles its quotes and closes before a comma or the end. `None` for
/// anything else.
fn split_line(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut fields = Vec::new();
    let mut at = 0;
    loop {
        let mut field = Vec::new();
        if line.get(at) == Some(&b'"') {
            at += 1;
            loop {
                match (line.get(at), line.get(at + 1)) {
                    (None, _) => return None,
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
                None => return Some(fields),
                Some(b',') => at += 1,
                Some(_) => return None,
            }
        } else {
            while let Some(&b) = line.get(at).filter(|b| **b != b',') {
                if b == b'"' {
                    return None;
                }
                field.push(b);
                at += 1;
            }
            fields.push(field);
            if at == line.len() {
                return Some(fields);
            }
            at += 1;
        }
    }
}

fn check_csv(kind: Kind, bytes: &[u8]) {
    let name = format!("{}/fuzz.csv", kind.name());
    let file = InputFile { kind, path: PathBuf::from(&name), name, format: Format::Csv, size: bytes.len() as u64 };
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
}

fn expected(rows: &[Row]) -> Expected {
    let mut first: BTreeMap<&str, u64> = BTreeMap::new();
    let mut e =
        Expected { read: rows.len() as u64, bad_lines: Vec::new(), used: 0, duplicates: 0, amount: 0, conflict: false };
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
        }
    }
    e
}

static DIRS: AtomicU64 = AtomicU64::new(0);

/// A fresh directory of this process under the system's temporary one.
fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("telemeter-fuzz-{}-{}", std::process::id(), DIRS.fetch_add(1, Ordering::Relaxed)))
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
    let set_aside = AggregateOptions { on_bad_row: OnBadRow::SetAside, on_read: None };
    let set_aside = aggregate::aggregate(&dir, &everything(), set_aside);
    let fail = aggregate::aggregate(&dir, &everything(), AggregateOptions::default());
    let _ = std::fs::remove_dir_all(&dir);
    let Some(rows) = rows else {
        assert!(matches!(set_aside, Err(Error::BadFile { .. })), "a bad header aggregated: {set_aside:?}");
        assert!(matches!(fail, Err(Error::BadFile { .. })), "a bad header aggregated: {fail:?}");
        return;
    };
    let e = expected(rows);
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

// ------------------------------------------------------------- record_checks

/// One row's fields: the first byte picks the kind (`& 3`); the rest is
/// split at `0xFF` bytes (never part of UTF-8) into the kind's columns,
/// missing ones empty.
pub fn record_checks(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else { return };
    let kind = Kind::ALL[(control & 3) as usize];
    let width = kind.columns().len();
    let mut values: Vec<&[u8]> = rest.split(|b| *b == 0xFF).take(width).collect();
    values.resize(width, b"");
    let text: Vec<Field<'_>> = values.iter().map(|v| Field::Text(v)).collect();
    let result = records::parse_record(kind, &text);

    // The readers' other forms of the same values agree: printable ASCII
    // handed over as `Ascii`, empty values as Parquet nulls.
    let ascii: Vec<Field<'_>> = values
        .iter()
        .map(|v| match std::str::from_utf8(v) {
            Ok(s) if v.iter().all(|b| (0x20..=0x7e).contains(b)) => Field::Ascii(s),
            _ => Field::Text(v),
        })
        .collect();
    assert_eq!(records::parse_record(kind, &ascii), result, "Ascii and Text forms disagree");
    let nulls: Vec<Field<'_>> =
        values.iter().map(|v| if v.is_empty() { Field::Null } else { Field::Text(v) }).collect();
    match (records::parse_record(kind, &nulls), &result) {
        (Ok(a), Ok(b)) => assert_eq!(&a, b, "a null and an empty value read differently"),
        (Err(a), Err(b)) => assert_eq!(a.column, b.column, "a null and an empty value refused at different columns"),
        (a, b) => panic!("a null and an empty value disagree: {a:?} / {b:?}"),
    }

    match result {
        Ok(record) => check_record(kind, &record),
        Err(e) => {
            assert!(e.column < width, "{e:?}");
            assert!(!e.reason.is_empty(), "{e:?}");
        }
    }
}

fn check_record(kind: Kind, record: &Record<'_>) {
    for id in [record.record_id, record.auth_id] {
        assert!(!id.is_empty() && records::check_id(id).is_ok(), "bad id {id:?}");
    }
    assert!(record.subaccount.is_empty() || records::check_id(record.subaccount).is_ok());
    assert!(record.timestamp.nanos < 1_000_000_000);
    assert!(record.amount >= 0 && record.duration >= 0 && record.surcharge >= 0, "{record:?}");
    assert!(record.surcharge <= record.amount, "{record:?}");
    match kind {
        Kind::Messages => assert!(record.units >= 1),
        Kind::Calls | Kind::Transcriptions => assert_eq!(record.units, 1),
        Kind::Charges | Kind::Voids => assert!(record.amount > 0 && !record.type_.is_empty()),
    }

    // Its canonical text reads back to the same record.
    let Some(time) = record.timestamp.to_datetime() else { panic!("{record:?}: not a chrono instant") };
    let time = time.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true);
    let decimal = |n: i64| Amount::from_nanos(n as i128).to_plain_string();
    let units = record.units.to_string();
    let (amount, surcharge, duration) = (decimal(record.amount), decimal(record.surcharge), decimal(record.duration));
    let direction = record.direction.map_or("", |d| d.as_str());
    let country = record.country.as_ref().map_or("", |c| c.as_str());
    let texts: Vec<&str> = match kind {
        Kind::Calls => vec![
            record.record_id,
            record.auth_id,
            record.subaccount,
            &time,
            record.product.as_str(),
            record.type_,
            direction,
            country,
            &duration,
            &amount,
            &surcharge,
            record.code,
        ],
        Kind::Messages => vec![
            record.record_id,
            record.auth_id,
            record.subaccount,
            &time,
            record.type_,
            direction,
            country,
            &units,
            &amount,
            &surcharge,
            record.code,
        ],
        Kind::Transcriptions => {
            vec![record.record_id, record.auth_id, record.subaccount, &time, record.type_, &duration, &amount]
        }
        Kind::Charges | Kind::Voids => vec![record.record_id, record.auth_id, &time, record.type_, &units, &amount],
    };
    // A four-digit year only (an offset can carry a record across year 0 or
    // 9999; such an instant is held, but has no canonical text to compare).
    if (0..=9999).contains(&chrono::Datelike::year(&record.timestamp.to_datetime().unwrap_or_default())) {
        let fields: Vec<Field<'_>> = texts.iter().map(|t| Field::Text(t.as_bytes())).collect();
        match records::parse_record(kind, &fields) {
            Ok(again) => {
                assert_eq!(&again, record, "the canonical text reads differently");
                assert_eq!(again.content_hash(), record.content_hash());
            }
            Err(e) => panic!("the canonical text {texts:?} of {record:?} is refused: {e:?}"),
        }
    }

    // So do Parquet-typed fields: timestamps, decimals, integer counts.
    let columns = kind.columns();
    let fields: Vec<Field<'_>> = texts
        .iter()
        .zip(columns)
        .map(|(text, column)| match *column {
            "timestamp" => Field::Time(record.timestamp),
            "amount" => Field::Decimal { unscaled: record.amount as i128, scale: 9 },
            "surcharge" => Field::Decimal { unscaled: record.surcharge as i128 * 1000, scale: 12 },
            "billed_seconds" | "duration_seconds" if record.duration as i128 % SCALE == 0 => {
                Field::Int(record.duration as i128 / SCALE)
            }
            "billed_seconds" | "duration_seconds" => Field::Decimal { unscaled: record.duration as i128, scale: 9 },
            "segments" | "units" => Field::Int(record.units as i128),
            _ if text.is_empty() => Field::Null,
            _ => Field::Text(text.as_bytes()),
        })
        .collect();
    match records::parse_record(kind, &fields) {
        Ok(again) => assert_eq!(&again, record, "typed fields read differently"),
        Err(e) => panic!("typed fields of {record:?} are refused: {e:?}"),
    }
}

// -------------------------------------------------------------- query_parser

/// A query string (lossily decoded), parsed and resolved for account `A`
/// at a fixed `now`, with no account zone and with two far-apart ones.
pub fn query_parser(data: &[u8]) {
    let query = String::from_utf8_lossy(data);
    let params = match UsageParams::parse_query(&query) {
        Ok(params) => params,
        Err(e) => {
            assert!(KEYS.contains(&e.parameter.as_str()), "a 400 naming an unknown parameter: {e:?}");
            assert!(!e.message.is_empty());
            return;
        }
    };
    let key = TokenKey::from_secret("fuzz");
    for account_tz in [None, Some(Tz::Pacific__Kiritimati), Some(Tz::Pacific__Pago_Pago)] {
        match UsageRequest::resolve("A", params.clone(), now(), account_tz, &key) {
            Ok(request) => {
                if params.page_token.is_none() {
                    assert_eq!(request.offset, 0);
                }
                check_request(&request);
                // Its token resumes the same window on a later day.
                let offset = u64::from(request.params.page_size) * (1 + data.len() as u64);
                let token = request.token_at(offset, [7; 16], &key);
                let later = now() + chrono::Duration::days(3);
                let next = UsageParams { page_token: Some(token), ..params.clone() };
                match UsageRequest::resolve("A", next, later, account_tz, &key) {
                    Ok(again) => {
                        assert_eq!((again.window, again.offset), (request.window.clone(), offset));
                        assert_eq!(again.snapshot, Some([7; 16]));
                    }
                    Err(e) => panic!("the request's own token is refused: {e:?}"),
                }
            }
            Err(e) => assert!(KEYS.contains(&e.parameter.as_str()), "a 400 naming an unknown parameter: {e:?}"),
        }
    }
}

/// A resolved window is ordered, within its granularity's cap, and its
/// buckets tile it. Its instants may be equal: a window of local days that
/// never happened (Pacific/Apia skipped 2011-12-30) is empty.
fn check_request(request: &UsageRequest) {
    let window = &request.window;
    let granularity = request.params.granularity;
    assert!(window.from < window.to, "{window:?}");
    assert!(window.start <= window.end, "{window:?}");
    let days = (window.to - window.from).num_days();
    match granularity {
        Granularity::Hour => assert!(days <= 7, "{window:?}"),
        Granularity::Day => assert!(days <= 92, "{window:?}"),
        Granularity::Month => {
            assert!(window.from.checked_add_months(chrono::Months::new(24)).is_none_or(|cap| window.to <= cap))
        }
        Granularity::Year => {}
    }
    let buckets = window.buckets(granularity);
    if window.start == window.end {
        // Nothing to tile: no bucket holds an instant.
        for i in 0..buckets.len() as u32 {
            assert_eq!(buckets.span(i), (window.start, window.start), "{window:?}: bucket {i} of an empty window");
        }
        return;
    }
    assert!(!buckets.is_empty(), "{window:?}: no bucket");
    let mut at = window.start;
    for i in 0..buckets.len() as u32 {
        let (start, end) = buckets.span(i);
        assert!(
            start == at && start < end,
            "{window:?} {granularity:?}: bucket {i} is [{start}, {end}), expected from {at}"
        );
        assert_eq!(buckets.index(start), Some(i));
        at = end;
    }
    assert_eq!(at, window.end, "{window:?}: the buckets end early");
    assert_eq!(buckets.index(window.end), None);
}

// ------------------------------------------------------------- token_decoder

/// Page tokens. The first byte picks the form of the rest: text as sent;
/// a body sealed with the key (past the tag, the decoder's own checks);
/// or an offset and two day numbers, made into a token bound to the
/// request (the decoder's window through `resolve`). The granularity, the
/// zone and the page size (1 or 100) come from the first byte too.
pub fn token_decoder(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else { return };
    let key = TokenKey::from_secret("fuzz");
    let granularity = Granularity::ALL[(control >> 2 & 3) as usize];
    let page_size = if control & 0x40 != 0 { 1 } else { 100 };
    let params = UsageParams { granularity, page_size, ..UsageParams::default() };
    let text = match control & 3 {
        0 => String::from_utf8_lossy(rest).into_owned(),
        1 => token::seal(rest, &key),
        _ => {
            let mut bytes = [0u8; 16];
            let n = rest.len().min(16);
            bytes[..n].copy_from_slice(&rest[..n]);
            let offset =
                u64::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7]]);
            let from = i32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            let to = i32::from_le_bytes([bytes[12], bytes[13], bytes[14], bytes[15]]);
            let (Some(from), Some(to)) =
                (NaiveDate::from_num_days_from_ce_opt(from), NaiveDate::from_num_days_from_ce_opt(to))
            else {
                return;
            };
            PageToken { offset, from, to, digest: params.digest("A"), snapshot: [7; 16] }.encode(&key)
        }
    };
    let decoded = PageToken::decode(&text, &key).ok();
    if let Some(token) = &decoded {
        assert_eq!(PageToken::decode(&token.encode(&key), &key).ok().as_ref(), Some(token), "no round trip");
        assert!(PageToken::decode(&text, &TokenKey::from_secret("another key")).is_err(), "another key's token");
        assert!(token.from < token.to && token.offset > 0, "decoded {token:?}");
        assert!((0..=9999).contains(&chrono::Datelike::year(&token.from)), "decoded {token:?}");
        assert!((0..=9999).contains(&chrono::Datelike::year(&token.to)), "decoded {token:?}");
    }
    let tz = [Tz::UTC, Tz::Pacific__Kiritimati, Tz::Pacific__Pago_Pago, Tz::Asia__Kolkata][(control >> 4 & 3) as usize];
    let params = UsageParams { page_token: Some(text), timezone: Some(tz), ..params };
    match UsageRequest::resolve("A", params, now(), None, &key) {
        Ok(request) => {
            let Some(token) = decoded else { panic!("resolve took a token that does not decode") };
            assert_eq!((request.window.from, request.window.to, request.offset), (token.from, token.to, token.offset));
            assert_eq!(request.snapshot, Some(token.snapshot));
            assert_eq!(request.offset % u64::from(request.params.page_size), 0);
            check_request(&request);
        }
        Err(e) => assert_eq!(e.parameter, "page_token", "{e:?}"),
    }
}

// ------------------------------------------------------------- parquet_input

/// A file's bytes, read as a Parquet records file of each kind and as any
/// Parquet file. Reading may fail (a damaged file is an error naming it);
/// it may not panic, and rows come numbered 1, 2, 3...
pub fn parquet_input(data: &[u8]) {
    // libFuzzer's hook aborts on any panic, one caught by the reader too.
    crate::parquet::quiet_caught_panics();
    let dir = scratch_dir();
    let path = dir.join("fuzz.parquet");
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, data)) {
        panic!("cannot write {}: {e}", path.display());
    }
    for kind in Kind::ALL {
        let file = InputFile {
            kind,
            path: path.clone(),
            name: format!("{}/fuzz.parquet", kind.name()),
            format: Format::Parquet,
            size: data.len() as u64,
        };
        let mut sink = Collect { kind, rows: Vec::new() };
        match records::parquet::read(&file, &mut sink) {
            Ok(()) => {
                let lines: Vec<u64> = sink.rows.iter().map(|row| row.line).collect();
                assert!(lines.iter().copied().eq(1..=lines.len() as u64), "rows out of order: {lines:?}");
            }
            Err(e) => assert!(e.to_string().starts_with(&file.name), "an error not naming the file: {e}"),
        }
    }
    if let Ok(frame) = crate::parquet::read_frame(&path, None, crate::parquet::Rows::All) {
        assert!(frame.columns().iter().all(|column| column.len() == frame.height()), "a ragged frame");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------- store files

/// The account the store-file targets file their rollups under.
const STORE_ACCOUNT: &str = "MFUZZFUZZFUZZFUZZFUZ";

/// A store in a scratch directory whose files are `files` (name in the
/// store, bytes) and whose manifest is `manifest` (format, generation and
/// the listing the caller gives), opened for reading; the directory and
/// the open store.
fn scratch_store(files: &[(&str, &[u8])], manifest: Manifest) -> (PathBuf, Store) {
    let dir = scratch_dir();
    for (name, bytes) in files {
        let path = dir.join(name);
        let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| std::fs::write(&path, bytes));
        if let Err(e) = written {
            panic!("cannot write {}: {e}", path.display());
        }
    }
    // Format 5, the last without checksums: the targets fuzz the readers
    // below the sums (with them, every damaged byte is refused whole).
    let manifest = Manifest { format: crate::store::SUMS_FORMAT - 1, generation: 1, ..manifest };
    let text = serde_json::to_vec(&manifest).unwrap_or_default();
    if let Err(e) = std::fs::write(dir.join(crate::store::MANIFEST), text) {
        panic!("cannot write the manifest of {}: {e}", dir.display());
    }
    match Store::open(&dir) {
        Ok(store) => (dir, store),
        Err(e) => panic!("a scratch store does not open: {}", e.chain()),
    }
}

/// Buckets of about a month from 2000 to 2100 UTC, each boundary `shift`
/// seconds past midnight: 0 is answered from day rollups, 900 from
/// 15-minute ones, 1 from the records (no rollup grain divides it).
fn fuzz_buckets(shift: i64) -> Buckets {
    const START: i64 = 946_684_800; // 2000-01-01T00:00:00Z
    const MONTH: i64 = 30 * 86_400;
    Buckets::from_bounds((0..=1218).map(|i| START + i * MONTH + shift).collect(), Tz::UTC)
}

/// Asserts that a store reader's error is an I/O error that names the
/// store file `name` (a damaged file is an error naming it).
fn assert_names(error: &Error, name: &str) {
    let text = error.chain();
    assert!(matches!(error, Error::Io { .. }), "not an I/O error: {text}");
    assert!(text.contains(name), "an error not naming {name}: {text}");
}

/// A rollup file's bytes as both grain files of one account of a store:
/// read by an account's request at each grain (`Store::account_rows`, what
/// `summary` and the server run), by the report's pass over the accounts
/// (`Store::aggregate`), by `Store::account_span`, and by the ingest's
/// merge (`read_rollup_slice`, `for_each_rollup_in`, which also checks
/// each row's values). Each is an answer or an I/O error naming the file;
/// never a panic or an abort. An answer's rows lie in the request's
/// buckets, and the report's pass agrees with the account's request.
pub fn rollup_file(data: &[u8]) {
    crate::parquet::quiet_caught_panics();
    let name = "rollups/fuzz/f-900s.parquet";
    let by_grain: BTreeMap<i64, String> = crate::store::GRAINS.iter().map(|&g| (g, name.to_owned())).collect();
    let manifest = Manifest { rollups: BTreeMap::from([(STORE_ACCOUNT.to_owned(), by_grain)]), ..Manifest::default() };
    let (dir, store) = scratch_store(&[(name, data)], manifest);
    for shift in [0, 900] {
        let buckets = fuzz_buckets(shift);
        let selector = Selector::everything(Bucketing::shared(buckets.clone()));
        let rows = match store.account_rows(&selector, STORE_ACCOUNT) {
            Ok(Some(rows)) => rows,
            Ok(None) => panic!("buckets on the {shift}-second grid were not answered from rollups"),
            Err(e) => {
                assert_names(&e, name);
                continue;
            }
        };
        let (usage, charges) = (Rows::new(rows.strings.clone(), rows.usage), Rows::new(rows.strings, rows.charges));
        for (key, _) in usage.iter().chain(charges.iter()) {
            assert!((key.bucket as usize) < buckets.len(), "a row in bucket {} of {}", key.bucket, buckets.len());
        }
        match store.aggregate(&selector) {
            Ok(all) => {
                let records: u64 = all.groups.values().map(|t| t.records).sum();
                let expected: u64 = usage.iter().chain(charges.iter()).map(|(_, t)| t.records).sum();
                assert_eq!(records, expected, "the report's pass and the account's request disagree");
            }
            Err(e) => assert_names(&e, name),
        }
    }
    if let Err(e) = store.account_span(STORE_ACCOUNT) {
        assert_names(&e, name);
    }
    let path = dir.join(name);
    // One slice, as the merge reads a file (64k rows at a time).
    let merged = crate::store::rollup::read_rollup_slice(&path, 0, 1 << 16)
        .and_then(|frame| crate::store::rollup::for_each_rollup_in(&path, &frame, |_| Ok(())));
    if let Err(e) = merged {
        assert_names(&e, name);
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A dedup index file's bytes, read as an ingest reads a stored index:
/// opened (its partition table checked against its size), loaded into a
/// record-id filter, and every partition streamed. An error names the
/// file; a file that opens gives exactly the entries its size holds, each
/// then found by the filter.
pub fn index_file(data: &[u8]) {
    use crate::store::index::{Filter, IndexFile};
    let dir = scratch_dir();
    let path = dir.join("index/calls/fuzz-00000.idx");
    let written = std::fs::create_dir_all(dir.join("index/calls")).and_then(|()| std::fs::write(&path, data));
    if let Err(e) = written {
        panic!("cannot write {}: {e}", path.display());
    }
    match IndexFile::open(&path) {
        Err(e) => assert_names(&e, "fuzz-00000.idx"),
        Ok(file) => {
            let mut filter = Filter::new(Filter::MIN_BYTES);
            let mut ids = Vec::new();
            let mut whole = true;
            for p in 0..crate::records::dedup::PARTITIONS {
                if let Err(e) = file.for_each_in(p, |entry| ids.push(entry.id)) {
                    assert_names(&e, "fuzz-00000.idx");
                    whole = false;
                }
            }
            if whole {
                let header = 16 + (crate::records::dedup::PARTITIONS + 1) * 8;
                assert_eq!(ids.len(), (data.len() - header) / 32, "entries read against the file's size");
            }
            match crate::store::ingest::load_filter(&mut filter, std::slice::from_ref(&file)) {
                Ok(()) => {
                    assert!(whole, "the filter loaded a file whose partitions do not read");
                    assert!(ids.iter().all(|&id| filter.check_and_insert(id)), "an entry the filter lost");
                }
                Err(e) => assert_names(&e, "fuzz-00000.idx"),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A records file's bytes as a store's records file of one kind (the first
/// byte picks it, `& 3`; the rest is the file), read as the store reads its
/// records when a request's buckets are not unions of rollup slots
/// (`Store::aggregate` over the stored records: `records::parquet::read`
/// and the one row check). An answer counts every row it read as used or a
/// duplicate, and its groups hold the rows it used; an error names the
/// file. Never a panic or an abort.
pub fn records_file(data: &[u8]) {
    crate::parquet::quiet_caught_panics();
    let Some((&control, bytes)) = data.split_first() else { return };
    let kind = Kind::ALL[(control & 3) as usize];
    let name = format!("records/{}/fuzz-00000.parquet", kind.name());
    let files = crate::store::KindFiles { records: vec![name.clone()], ..crate::store::KindFiles::default() };
    let manifest = Manifest { kinds: BTreeMap::from([(kind.name().to_owned(), files)]), ..Manifest::default() };
    let (dir, store) = scratch_store(&[(name.as_str(), bytes)], manifest);
    let selector = Selector::everything(Bucketing::shared(fuzz_buckets(1)));
    match store.aggregate(&selector) {
        Ok(all) => {
            let tally = all.tallies.get(&kind).copied().unwrap_or_default();
            assert_eq!(tally.read, tally.used + tally.set_aside + tally.duplicates, "{tally:?}");
            let records: u64 = all.groups.values().map(|t| t.records).sum();
            assert_eq!(records, tally.selected, "groups against the rows selected");
            assert!(tally.selected <= tally.used, "{tally:?}");
        }
        Err(e) => {
            let text = e.chain();
            assert!(!matches!(e, Error::Internal(_)), "an internal error from a damaged file: {text}");
            assert!(text.contains("fuzz-00000.parquet"), "an error not naming the file: {text}");
        }
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A manifest's bytes through `Manifest::parse` (what every reader and
/// ingest reads first): an error naming the file, or a manifest of a
/// format this build reads that writes back to text which parses to the
/// same manifest. Never a panic.
pub fn manifest_file(data: &[u8]) {
    let path = std::path::Path::new("STORE/manifest.json");
    match Manifest::parse(data, path) {
        Ok(manifest) => {
            assert!((crate::store::OLDEST_FORMAT..=FORMAT_VERSION).contains(&manifest.format), "{manifest:?}");
            let text = serde_json::to_vec_pretty(&manifest).unwrap_or_default();
            match Manifest::parse(&text, path) {
                Ok(again) => assert_eq!(again, manifest, "a manifest that does not read back"),
                Err(e) => panic!("a parsed manifest does not parse again: {}", e.chain()),
            }
        }
        Err(e) => assert_names(&e, "STORE/manifest.json"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed files of `target` in `fuzz/corpus/`.
    fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
        let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target);
        let mut seeds: Vec<(String, Vec<u8>)> = std::fs::read_dir(&folder)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .map(|path| (path.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(path).unwrap()))
            .collect();
        seeds.sort();
        seeds
    }

    /// The store-file seeds read cleanly as the targets read them (so that
    /// mutations of them reach past the first check): each rollup seed
    /// answers with rows at both grains, each records seed is read whole,
    /// each index seed opens, and the stores' manifests parse.
    #[test]
    fn the_store_file_seeds_read_cleanly() {
        for (name, data) in seeds("rollup_file") {
            let by_grain: BTreeMap<i64, String> =
                crate::store::GRAINS.iter().map(|&g| (g, "rollups/f/seed.parquet".to_owned())).collect();
            let rollups = BTreeMap::from([(STORE_ACCOUNT.to_owned(), by_grain)]);
            let (dir, store) =
                scratch_store(&[("rollups/f/seed.parquet", &data)], Manifest { rollups, ..Manifest::default() });
            for shift in [0, 900] {
                let selector = Selector::everything(Bucketing::shared(fuzz_buckets(shift)));
                let rows = store.account_rows(&selector, STORE_ACCOUNT).unwrap().unwrap();
                assert!(!rows.usage.is_empty() || !rows.charges.is_empty(), "{name} at {shift}");
            }
            std::fs::remove_dir_all(dir).unwrap();
        }
        for (name, data) in seeds("records_file") {
            let kind = Kind::ALL[data[0] as usize];
            let file = format!("records/{}/seed.parquet", kind.name());
            let files = crate::store::KindFiles { records: vec![file.clone()], ..Default::default() };
            let kinds = BTreeMap::from([(kind.name().to_owned(), files)]);
            let (dir, store) = scratch_store(&[(file.as_str(), &data[1..])], Manifest { kinds, ..Manifest::default() });
            let all = store.aggregate(&Selector::everything(Bucketing::shared(fuzz_buckets(1)))).unwrap();
            assert!(all.tallies[&kind].used > 0, "{name}");
            std::fs::remove_dir_all(dir).unwrap();
        }
        let dir = scratch_dir();
        std::fs::create_dir_all(&dir).unwrap();
        for (name, data) in seeds("index_file") {
            std::fs::write(dir.join(&name), data).unwrap();
            crate::store::index::IndexFile::open(&dir.join(&name)).unwrap();
        }
        std::fs::remove_dir_all(dir).unwrap();
        let path = std::path::Path::new("manifest.json");
        for (name, data) in seeds("manifest_file").into_iter().filter(|(name, _)| name != "unsupported-format.json") {
            assert!(Manifest::parse(&data, path).is_ok(), "{name}");
        }
    }

    #[test]
    fn the_fixed_clock_is_the_documented_day() {
        assert_eq!(now().to_rfc3339(), "2026-11-21T12:00:00+00:00");
    }

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
