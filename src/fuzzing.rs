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

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, NaiveDate, Utc};
use chrono_tz::Tz;

use crate::aggregate::{self, AggregateOptions, Bucketing, OnBadRow, Selector};
use crate::error::Error;
use crate::money::{Amount, SCALE};
use crate::query::{UsageParams, UsageRequest, KEYS};
use crate::records::csv::RowSink;
use crate::records::files::{Format, InputFile};
use crate::records::{self, Field, FieldError, Kind, Record};
use crate::time::{Buckets, Granularity};
use crate::token::{self, PageToken, TokenKey};

/// A fuzz target: bytes in, a panic on a broken invariant.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/` file and corpus
/// folder.
pub const TARGETS: [(&str, Target); 5] = [
    ("csv_reader", csv_reader),
    ("record_checks", record_checks),
    ("query_parser", query_parser),
    ("token_decoder", token_decoder),
    ("parquet_input", parquet_input),
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
        Kind::Charges => assert!(record.amount > 0 && !record.type_.is_empty()),
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
        Kind::Charges => vec![record.record_id, record.auth_id, &time, record.type_, &units, &amount],
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

#[cfg(test)]
mod tests {
    use super::*;

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
