//! The ingest's row sink: [`Chunk`] takes the rows of one input file (or of
//! one CSV chunk) from the shared readers, checks each with
//! `records::parse_record`, and keeps every valid row as a fixed-size [`Row`]
//! whose text sits in the chunk's [`Texts`], with its [`Seen`] entry for
//! dedup; a bad row is set aside with its reason, or stops the run. After
//! dedup has marked the rows, [`Chunk::fold`] gathers the chunk's new ones:
//! index entries, an amount, and the rows of each rollup shard
//! ([`ChunkFold`]), one chunk per thread.

use super::key::{shard_of, SHARDS};
use crate::error::{BadRecord, Result};
use crate::intern::{Interner, ShortCache};
use crate::prefetch::prefetch;
use crate::records::bad_rows::{BadRows, OnBadRow};
use crate::records::csv::RowSink;
use crate::records::dedup::{IdHash, Place, Seen};
use crate::records::files::{Format, InputFile};
use crate::records::pieces::Pieces;
use crate::records::{self, Country, Direction, Field, Kind, Product, Record};
use crate::store::index::{self, IndexEntry};
use crate::store::parquet_io::{RecordRows, RecordView};
use crate::time::Instant;

/// How many rows ahead [`Chunk::scattered_rows`] prefetches a row: far
/// enough that a row scattered through the chunk is in cache when the fold
/// reaches it, near enough that it is not evicted before (re-tune with
/// `bench/ingest-ab.sh`).
const ROWS_AHEAD: usize = 32;

/// A string in an arena: its offset and length in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct TextRange {
    pub(super) start: u32,
    pub(super) length: u32,
}

/// The span of `length` bytes at `at` in an arena, or `None` when it would
/// end past what a span addresses (4 GiB), never a span that wraps.
pub(super) fn span_at(at: usize, length: usize) -> Option<TextRange> {
    let (start, length) = (u32::try_from(at).ok()?, u32::try_from(length).ok()?);
    start.checked_add(length)?;
    Some(TextRange { start, length })
}

/// The key fields of a row that [`Texts`] interns, by position in
/// [`Row::names`].
pub(super) const AUTH_ID: usize = 0;
pub(super) const SUBACCOUNT: usize = 1;
pub(super) const TYPE: usize = 2;
pub(super) const CODE: usize = 3;

/// The text of some rows: each record id in one arena, and the key fields
/// (account, subaccount, type, code: a few hundred distinct values in
/// millions of rows) interned once, so that a row names them by id. The
/// rollup fold and the records writer then work from the ids and a small
/// table that stays in cache, instead of reading each row's text back
/// from a batch-sized arena, a cache miss per row.
#[derive(Default)]
pub(super) struct Texts {
    arena: String,
    names: Interner,
    /// The ids of the key fields' recent values (a compare instead of a
    /// hash and a probe).
    recent: ShortCache,
}

impl Texts {
    /// Appends a record id to the arena: its span, or `None` past 4 GiB.
    fn keep(&mut self, text: &str) -> Option<TextRange> {
        let span = span_at(self.arena.len(), text.len())?;
        self.arena.push_str(text);
        Some(span)
    }

    /// The id of `text`, the value of a key field.
    #[inline]
    fn name(&mut self, text: &str) -> u32 {
        self.recent.intern(&mut self.names, text)
    }

    /// The string of a key field's id.
    #[inline]
    pub(super) fn name_of(&self, id: u32) -> &str {
        self.names.get(id)
    }

    /// How many distinct key-field strings these rows hold (their ids are
    /// below this).
    pub(super) fn names(&self) -> usize {
        self.names.len()
    }

    /// The record id of `row`.
    #[inline]
    pub(super) fn record_id(&self, row: &Row) -> &str {
        let TextRange { start, length } = row.record_id;
        self.arena.get(start as usize..(start + length) as usize).unwrap_or("")
    }
}

/// One valid row: its record id in its [`Texts`]' arena, its key fields as
/// ids of those texts.
#[derive(Clone, Copy, Debug)]
pub(super) struct Row {
    pub(super) seen: Seen,
    pub(super) record_id: TextRange,
    /// auth_id, subaccount, type, code ([`AUTH_ID`], ...).
    pub(super) names: [u32; 4],
    pub(super) secs: i64,
    pub(super) nanos: u32,
    pub(super) product: Product,
    pub(super) direction: Option<Direction>,
    pub(super) country: Option<Country>,
    pub(super) units: u64,
    pub(super) duration: i64,
    pub(super) amount: i64,
    pub(super) surcharge: i64,
    /// The `revision` column (0 when missing): a row above 0 has its own
    /// dedup id, that of its record id and revision
    /// ([`dedup::version_hash`](crate::records::dedup::version_hash)).
    pub(super) revision: u64,
}

impl Row {
    /// The row, its text in `texts`.
    pub(super) fn view<'a>(&self, texts: &'a Texts, source_file: &'a str) -> RecordView<'a> {
        let name = |field: usize| texts.name_of(self.names[field]);
        let record = Record {
            record_id: texts.record_id(self),
            auth_id: name(AUTH_ID),
            subaccount: name(SUBACCOUNT),
            timestamp: Instant { secs: self.secs, nanos: self.nanos },
            product: self.product,
            type_: name(TYPE),
            direction: self.direction,
            country: self.country,
            units: self.units,
            duration: self.duration,
            amount: self.amount,
            surcharge: self.surcharge,
            code: name(CODE),
            revision: self.revision,
        };
        RecordView { record, source_file, source_line: self.seen.line }
    }

    /// The row copied into `texts` from `from` (the texts it was read
    /// with); `None` when its record id does not fit `texts`' arena.
    pub(super) fn copied(&self, from: &Texts, texts: &mut Texts) -> Option<Row> {
        let mut names = self.names;
        for id in names.iter_mut() {
            *id = texts.name(from.name_of(*id));
        }
        Some(Row { record_id: texts.keep(from.record_id(self))?, names, ..*self })
    }

    /// The row of `view` and its dedup entry, its text kept in `texts`;
    /// `None` when its record id does not fit `texts`' arena.
    #[cfg(test)]
    pub(super) fn of_view(view: &RecordView<'_>, seen: Seen, texts: &mut Texts) -> Option<Row> {
        Some(Row {
            seen,
            record_id: texts.keep(view.record.record_id)?,
            names: [
                texts.name(view.record.auth_id),
                texts.name(view.record.subaccount),
                texts.name(view.record.type_),
                texts.name(view.record.code),
            ],
            secs: view.record.timestamp.secs,
            nanos: view.record.timestamp.nanos,
            product: view.record.product,
            direction: view.record.direction,
            country: view.record.country,
            units: view.record.units,
            duration: view.record.duration,
            amount: view.record.amount,
            surcharge: view.record.surcharge,
            revision: view.record.revision,
        })
    }

    /// The row's index entry; `base` is the number of sources stored before
    /// this ingest.
    pub(super) fn entry(&self, base: u32) -> IndexEntry {
        IndexEntry {
            id: self.seen.id,
            content: self.seen.content,
            place: index::pack(Place { file: base + self.seen.file, line: self.seen.line }),
        }
    }
}

/// Whether a correction may touch a new version of `revision` whose dedup
/// id is `id`: one above revision 0, or one of a record whose versions or
/// voids an earlier ingest noted (`registered`, when there are any).
pub(in crate::store) fn may_be_corrected<V>(
    revision: u64,
    id: IdHash,
    registered: Option<&rustc_hash::FxHashMap<IdHash, V>>,
) -> bool {
    revision > 0 || registered.is_some_and(|ids| ids.contains_key(&id))
}

/// A new version written by this ingest that a correction may touch
/// ([`may_be_corrected`]): its record id, revision, dedup entry and input
/// file's name.
#[derive(Clone, Copy, Debug)]
pub(in crate::store) struct NewVersion<'a> {
    pub(in crate::store) record_id: &'a str,
    pub(in crate::store) revision: u64,
    pub(in crate::store) seen: Seen,
    pub(in crate::store) source_file: &'a str,
}

/// A row of `voids/`, checked.
#[derive(Clone, Debug)]
pub(super) struct VoidRow {
    pub(super) kind: Kind,
    pub(super) record_id: String,
    pub(super) revision: u64,
    pub(super) reason: String,
    pub(super) place: Place,
}

/// The rows of one file or CSV chunk: a [`RowSink`].
pub(in crate::store) struct Chunk {
    kind: Kind,
    file: u32,
    file_name: String,
    /// Without a shared stop: the batch's files are read to their end or
    /// their own first bad row.
    pub(super) bad_rows: BadRows<'static>,
    pub(super) texts: Texts,
    pub(super) rows: Vec<Row>,
    pub(super) read: u64,
    /// The rows of a file of `voids/`, checked.
    pub(super) voids: Vec<VoidRow>,
}

impl Chunk {
    fn new(file: u32, input: &InputFile, on_bad_row: OnBadRow) -> Chunk {
        Chunk {
            kind: input.kind,
            file,
            file_name: input.name.clone(),
            bad_rows: BadRows::new(input, file, on_bad_row, None),
            texts: Texts::default(),
            rows: Vec::new(),
            read: 0,
            voids: Vec::new(),
        }
    }

    /// The input file's name.
    pub(super) fn file_name(&self) -> &str {
        &self.file_name
    }

    pub(super) fn view(&self, row: &Row) -> RecordView<'_> {
        row.view(&self.texts, &self.file_name)
    }

    /// The rows at `positions` (a rollup shard's rows: every sixteenth or
    /// so, an order the hardware prefetcher does not follow), each
    /// prefetched [`ROWS_AHEAD`] rows before its turn.
    pub(super) fn scattered_rows<'c>(&'c self, positions: &'c [u32]) -> impl Iterator<Item = &'c Row> + 'c {
        let row = move |i: usize| positions.get(i).and_then(|&r| self.rows.get(r as usize));
        (0..positions.len()).filter_map(move |i| {
            if let Some(later) = row(i + ROWS_AHEAD) {
                prefetch(later);
            }
            row(i)
        })
    }

    /// The new rows of this chunk (marked [`Mark::New`]), gathered.
    /// A kept row above revision 0, or whose id is in `registered`, is
    /// also listed in `touched`.
    pub(super) fn fold<V>(
        &self,
        marks: &[Mark],
        base: u32,
        registered: Option<&rustc_hash::FxHashMap<IdHash, V>>,
    ) -> ChunkFold {
        let mut fold = ChunkFold {
            touched: Vec::new(),
            amount: 0,
            entries: Vec::with_capacity(self.rows.len()),
            kept: Vec::with_capacity(self.rows.len()),
            by_shard: vec![Vec::new(); SHARDS],
            duplicates: 0,
        };
        let shards: Vec<usize> = (0..self.texts.names() as u32).map(|id| shard_of(self.texts.name_of(id))).collect();
        for (r, (row, mark)) in self.rows.iter().zip(marks).enumerate() {
            match mark {
                Mark::New => {}
                Mark::Duplicate => {
                    fold.duplicates += 1;
                    continue;
                }
                Mark::Candidate => continue,
            }
            fold.by_shard[shards.get(row.names[AUTH_ID] as usize).copied().unwrap_or(0)].push(r as u32);
            fold.amount += row.amount as i128;
            fold.entries.push(row.entry(base));
            fold.kept.push(r as u32);
            if may_be_corrected(row.revision, row.seen.id, registered) {
                fold.touched.push(r as u32);
            }
        }
        fold
    }
}

impl RowSink for Chunk {
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        self.read += 1;
        if self.kind == Kind::Voids {
            return match records::parse_void(fields) {
                Ok(void) => {
                    self.voids.push(VoidRow {
                        kind: void.kind,
                        record_id: void.record_id.to_owned(),
                        revision: void.revision,
                        reason: void.reason.to_owned(),
                        place: Place { file: self.file, line },
                    });
                    true
                }
                Err(e) => self.bad_rows.refused(Kind::Voids, line, e),
            };
        }
        let record = match records::parse_record(self.kind, fields) {
            Ok(record) => record,
            Err(e) => return self.bad_rows.refused(self.kind, line, e),
        };
        let Some(record_id) = self.texts.keep(record.record_id) else {
            let reason = "does not fit the ingest's 4 GiB text buffer for one file; split the file".to_owned();
            return self.bad_rows.reject(line, "-", String::new(), reason);
        };
        let texts = &mut self.texts;
        let names = [
            texts.name(record.auth_id),
            texts.name(record.subaccount),
            texts.name(record.type_),
            texts.name(record.code),
        ];
        self.rows.push(Row {
            seen: Seen {
                id: crate::records::dedup::version_hash(record.record_id, record.revision),
                file: self.file,
                line,
                content: record.content_hash(),
            },
            record_id,
            names,
            secs: record.timestamp.secs,
            nanos: record.timestamp.nanos,
            product: record.product,
            direction: record.direction,
            country: record.country,
            units: record.units,
            duration: record.duration,
            amount: record.amount,
            surcharge: record.surcharge,
            revision: record.revision,
        });
        true
    }

    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.read += 1;
        self.bad_rows.reject(line, column, value, reason)
    }

    fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.read += 1;
        self.bad_rows.unframed(line, column, value, reason)
    }

    /// Every row is kept: a chunk's rows and record ids are made at its
    /// size (at most a row per line; a record id takes a third of its line or
    /// less, about a quarter in the benchmark's) instead of grown by
    /// copying.
    const ONE_PER_CHUNK: bool = true;

    fn reserve(&mut self, lines: usize, bytes: usize) {
        self.rows.reserve_exact(lines);
        self.texts.arena.reserve_exact(bytes / 3);
    }
}

/// Reads and checks one input file on its own, as [`read_batch`](super::read_batch) reads
/// each file of a batch: its chunks in line order. With
/// [`OnBadRow::Fail`], the first bad row is the `Err`.
pub(in crate::store) fn check_file(source: u32, file: &InputFile, on_bad_row: OnBadRow) -> Result<Vec<Chunk>> {
    let new_chunk = || Chunk::new(source, file, on_bad_row);
    let chunks = match file.format {
        Format::Parquet => records::parquet::read_parts(file, new_chunk)?,
        // Each chunk keeps its rows' text in its own arena.
        _ => records::csv::read_stream(file, &mut Default::default(), new_chunk)?,
    };
    checked(chunks)
}

/// Reads and checks the next `lines` lines of a file read in runs
/// ([`Pieces`]), as [`check_file`] reads a whole file.
pub(in crate::store) fn check_run(
    source: u32,
    file: &InputFile,
    pieces: &mut Pieces<'_>,
    lines: u64,
    on_bad_row: OnBadRow,
) -> Result<Vec<Chunk>> {
    checked(pieces.next(lines, || Chunk::new(source, file, on_bad_row))?)
}

/// `chunks`, or the first one's error when a bad row stopped the reading
/// ([`OnBadRow::Fail`]).
fn checked(chunks: Vec<Chunk>) -> Result<Vec<Chunk>> {
    let mut out = Vec::with_capacity(chunks.len());
    for mut chunk in chunks {
        if let Some(error) = chunk.bad_rows.take_error() {
            return Err(error.into());
        }
        out.push(chunk);
    }
    Ok(out)
}

impl Chunk {
    /// Rows read (valid or not).
    pub(in crate::store) fn read(&self) -> u64 {
        self.read
    }

    /// Rows set aside, in line order.
    pub(in crate::store) fn rejects(&self) -> &[BadRecord] {
        self.bad_rows.rejects()
    }

    /// Every valid row: its normalized record and its dedup entry, in
    /// line order.
    pub(in crate::store) fn valid_rows(&self) -> impl Iterator<Item = (RecordView<'_>, Seen)> + '_ {
        self.rows.iter().map(|row| (self.view(row), row.seen))
    }
}

/// The new rows of one chunk, gathered.
pub(super) struct ChunkFold {
    /// The new rows of each rollup shard (by account), by position in the
    /// chunk.
    pub(super) by_shard: Vec<Vec<u32>>,
    /// Sum of amounts; a chunk holds far fewer than 2^64 rows of at most
    /// i64::MAX each, so this cannot overflow.
    pub(super) amount: i128,
    pub(super) entries: Vec<IndexEntry>,
    pub(super) kept: Vec<u32>,
    /// The kept rows a correction may touch.
    pub(super) touched: Vec<u32>,
    pub(super) duplicates: u64,
}

/// The new rows of a batch, in their chunks (chunk by chunk, each chunk's
/// in line order), for the records file: made into views a row group at a
/// time instead of all at once.
pub(super) struct Kept<'c> {
    /// Each chunk and the positions of its new rows.
    parts: Vec<(&'c Chunk, &'c [u32])>,
    /// Where each part starts among the rows, and the total at the end.
    starts: Vec<usize>,
}

impl<'c> Kept<'c> {
    pub(super) fn new(parts: impl Iterator<Item = (&'c Chunk, &'c [u32])>) -> Kept<'c> {
        let parts: Vec<(&Chunk, &[u32])> = parts.collect();
        let mut starts = Vec::with_capacity(parts.len() + 1);
        let mut total = 0;
        for (_, rows) in &parts {
            starts.push(total);
            total += rows.len();
        }
        starts.push(total);
        Kept { parts, starts }
    }
}

impl RecordRows for Kept<'_> {
    fn len(&self) -> usize {
        self.starts.last().copied().unwrap_or(0)
    }

    fn each<'s, F: FnMut(&RecordView<'s>) -> Result<()>>(
        &'s self,
        range: std::ops::Range<usize>,
        mut f: F,
    ) -> Result<()> {
        // The last part starting at or before the range's start.
        let mut part = self.starts.partition_point(|&start| start <= range.start).saturating_sub(1);
        let mut at = range.start;
        while at < range.end && part < self.parts.len() {
            let (chunk, rows) = self.parts[part];
            let from = at - self.starts[part];
            let to = (range.end - self.starts[part]).min(rows.len());
            for &r in &rows[from..to] {
                f(&chunk.view(&chunk.rows[r as usize]))?;
            }
            at = self.starts[part] + to;
            part += 1;
        }
        Ok(())
    }
}

/// What the batch check decided about a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mark {
    /// The first of its id anywhere: stored now.
    New,
    /// Repeats an earlier identical row of the batch: skipped.
    Duplicate,
    /// Its id may be stored or seen in an earlier batch: checked exactly
    /// later (`dedup::check`).
    Candidate,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The views of any range of a batch's new rows are those rows, in
    /// order, whichever chunks (some with no new rows) they sit in.
    #[test]
    fn kept_rows_are_viewed_in_order_across_chunks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut chunks = Vec::new();
        for f in 0..3 {
            let path = dir.path().join(format!("c{f}.csv"));
            let mut text = "record_id,auth_id,timestamp,description,units,amount\n".to_owned();
            for i in 0..10 {
                text.push_str(&format!("f{f}r{i},A{f},2026-11-20T00:00:0{i}Z,CNAM Lookup,{i},0.1{i}\n"));
            }
            std::fs::write(&path, &text).expect("written");
            let file = InputFile {
                kind: Kind::Charges,
                path,
                name: format!("charges/c{f}.csv"),
                format: Format::Csv,
                size: text.len() as u64,
                sum: None,
            };
            chunks.extend(check_file(f, &file, OnBadRow::Fail).expect("read"));
        }
        let kept: [Vec<u32>; 3] = [(0..10).collect(), Vec::new(), (0..10).step_by(3).collect()];
        let rows = Kept::new(chunks.iter().zip(&kept).map(|(chunk, kept)| (chunk, &kept[..])));
        let all: Vec<String> = chunks
            .iter()
            .zip(&kept)
            .flat_map(|(chunk, kept)| {
                kept.iter().map(|&r| chunk.view(&chunk.rows[r as usize]).record.record_id.to_owned())
            })
            .collect();
        assert_eq!(rows.len(), 14);
        assert_eq!(all.len(), 14);
        for start in 0..=all.len() {
            for end in start..=all.len() {
                let mut ids: Vec<&str> = Vec::new();
                rows.each(start..end, |view| {
                    ids.push(view.record.record_id);
                    Ok(())
                })
                .expect("viewed");
                assert_eq!(ids, all[start..end], "{start}..{end}");
            }
        }
    }
}
