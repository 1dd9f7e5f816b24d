//! Dedup against the store's index, in file order: the rows of a batch are
//! checked against each other exactly, and against everything stored or
//! seen in earlier batches through a fixed-size filter of record-id hashes
//! (`index::Filter`, loaded from the store's index files at the start of
//! each kind). A row whose id the filter has never seen is new for certain
//! and is written with its batch. The others ("candidates": real repeats
//! and a few false positives) wait in a buffer; when it is full, and at the
//! end of the kind, they are checked exactly, id-hash partition by
//! partition, by streaming that partition of every index file (stored, and
//! written by this ingest so far) past a hash of the partition's
//! candidates: an equal id with equal content is a duplicate, with
//! different content a conflict naming both places. The check only reads,
//! so it runs beside the fold and write of the batch that completed the
//! buffer; what it finds is stored after that batch.

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

use super::chunk::{may_be_corrected, Chunk, Mark, NewVersion, Row, Texts};
use super::Run;
use crate::aggregate::Tally;
use crate::error::{Error, Result};
use crate::money::Amount;
use crate::records::dedup::{Conflict, IdHash, Place, PARTITIONS};
use crate::records::Kind;
use crate::store::index::{self, Filter, IndexFile};
use crate::store::parquet_io::RecordView;
use crate::store::KindFiles;

/// How many ids ahead of its check the dedup (and the filter's load)
/// prefetches an id's filter block: far enough that the block is in cache
/// when the id is checked, near enough that it is not evicted before
/// (re-tune with `bench/ingest-ab.sh`).
const IDS_AHEAD: usize = 8;

impl Run<'_> {
    /// Checks every row of a batch in file order: against the rows of the
    /// batch exactly, and against every id stored or seen earlier through
    /// the filter. Rows the filter may have seen are marked candidates (so
    /// are the later rows of the batch with their id), to be checked exactly
    /// by [`check`].
    pub(super) fn dedup(&self, state: &mut KindState, chunks: &[Chunk]) -> Result<Vec<Vec<Mark>>> {
        // Each partition sized for its share of the batch and some more (ids
        // hash evenly), so that it is not copied as it grows. An entry is a
        // row's id and content hashes and where it is in `chunks`, pushed in
        // file order (chunks by file and first line, each chunk's rows in
        // line order), so that each partition is in file order as pushed.
        let rows: usize = chunks.iter().map(|chunk| chunk.rows.len()).sum();
        let share = rows / PARTITIONS;
        let room = share + share / 16 + 64;
        let mut parts: Vec<Vec<BatchEntry>> = (0..PARTITIONS).map(|_| Vec::with_capacity(room)).collect();
        let mut order: Vec<usize> = (0..chunks.len()).collect();
        order.sort_by_key(|&c| chunks[c].rows.first().map(|row| (row.seen.file, row.seen.line)));
        for c in order {
            for (r, row) in chunks[c].rows.iter().enumerate() {
                parts[row.seen.partition()].push(BatchEntry {
                    id: row.seen.id,
                    content: row.seen.content,
                    chunk: c as u32,
                    row: r as u32,
                });
            }
        }
        let base = self.old.sources.len() as u32;
        // A row's place (as the index packs it: lines capped).
        let place = |at: RowAt| {
            let seen = &chunks[at.chunk as usize].rows[at.row as usize].seen;
            index::unpack(index::pack(Place { file: base + seen.file, line: seen.line }))
        };
        let found: Vec<PartMarks> = state
            .filter
            .parts_mut()
            .zip(parts)
            .map(|(mut filter, entries)| {
                // The first row of each id: its content, where it is, and
                // whether the filter may have seen its id.
                let mut first: FxHashMap<IdHash, FirstSeen> =
                    FxHashMap::with_capacity_and_hasher(entries.len(), Default::default());
                let mut marks = Vec::new();
                let mut conflict = None;
                for (i, &BatchEntry { id, content, chunk, row }) in entries.iter().enumerate() {
                    let at = RowAt { chunk, row };
                    if let Some(ahead) = entries.get(i + IDS_AHEAD) {
                        filter.prefetch(ahead.id);
                    }
                    match first.entry(id) {
                        Entry::Vacant(slot) => {
                            let candidate = filter.check_and_insert(id);
                            slot.insert(FirstSeen { content, at, candidate });
                            if candidate {
                                marks.push((at, Mark::Candidate));
                            }
                        }
                        Entry::Occupied(slot) => match *slot.get() {
                            FirstSeen { candidate: true, .. } => marks.push((at, Mark::Candidate)),
                            FirstSeen { content: earlier, .. } if earlier == content => {
                                marks.push((at, Mark::Duplicate))
                            }
                            FirstSeen { at: first_at, .. } => {
                                let places = Conflict { earlier: place(first_at), later: place(at) };
                                conflict = Some(Clash { places, row: at });
                                break;
                            }
                        },
                    }
                }
                PartMarks { marks, conflict }
            })
            .collect();
        let mut out: Vec<Vec<Mark>> = chunks.iter().map(|chunk| vec![Mark::New; chunk.rows.len()]).collect();
        let mut first_conflict: Option<Clash<RowAt>> = None;
        for PartMarks { marks, conflict } in found {
            for (at, mark) in marks {
                out[at.chunk as usize][at.row as usize] = mark;
            }
            first_conflict = Clash::earlier(first_conflict, conflict);
        }
        if let Some(Clash { places, row: at }) = first_conflict {
            let chunk = &chunks[at.chunk as usize];
            let record_id = chunk.view(&chunk.rows[at.row as usize]).record.record_id.to_owned();
            return Err(self.conflict(state.kind, record_id, places));
        }
        Ok(out)
    }

    fn conflict(&self, kind: Kind, record_id: String, places: Conflict) -> Error {
        let (first, second) = (self.location(places.earlier), self.location(places.later));
        Error::Conflict { kind: kind.name(), record_id, first, second }
    }

    /// Stores the candidates of `pending` that [`check`] found new
    /// (`checked`), like any batch's new rows, and counts its duplicates;
    /// or the conflict it found.
    pub(super) fn store_checked(
        &mut self,
        state: &mut KindState,
        pending: Pending,
        checked: Result<Checked>,
    ) -> Result<()> {
        let Checked { new, duplicates, conflict } = checked?;
        if let Some(Clash { places, row: i }) = conflict {
            let record_id = pending.view(&pending.rows[i as usize], "").record.record_id.to_owned();
            return Err(self.conflict(state.kind, record_id, places));
        }
        if pending.rows.is_empty() {
            return Ok(());
        }
        state.tally.duplicates += duplicates;
        let base = self.old.sources.len() as u32;
        let names: Vec<&str> = self.inventory.files.iter().map(|f| f.name.as_str()).collect();
        let mut views = Vec::with_capacity(new.len());
        let mut entries = Vec::with_capacity(new.len());
        let mut amount = 0i128;
        for &i in &new {
            let row = &pending.rows[i as usize];
            let view = pending.view(row, names.get(row.seen.file as usize).copied().unwrap_or(""));
            self.rollups.add(&view)?;
            amount += view.record.amount as i128;
            entries.push(row.entry(base));
            views.push(view);
        }
        state.add_amount(amount)?;
        self.rollups.spill_full(self.store, self.id, self.options.max_rollup_groups)?;
        let written = self.write_new(state.kind, &views[..], &[&entries])?;
        if let Some(written) = &written {
            let touched = pending.touched(Some(&new), self.registered(state.kind), &names);
            self.note_touched(state.kind, &written.records, touched);
        }
        self.add_written(state, views.len(), written)
    }
}

/// Runs `work` while `check` (an exact check, when one is due) runs on a
/// thread of its own from the start. The check's index reads wait on the
/// device; as the second half of a `rayon::join` it would start only once
/// a pool thread came free (here, when the batch's work and the next
/// batch's read were both done), and then hold both threads up while it
/// waited (measure with `bench/ingest-ab.sh`).
pub(super) fn beside<R>(
    check: Option<impl FnOnce() -> Result<Checked> + Send>,
    work: impl FnOnce() -> R,
) -> (R, Option<Result<Checked>>) {
    std::thread::scope(|scope| {
        let checking = check.map(|check| crate::threads::spawn_scoped(scope, "telemeter-check", check));
        let done = work();
        let checked = checking.map(|checking| {
            checking?
                .join()
                .unwrap_or_else(|_| Err(Error::Internal("the exact check of candidates panicked".to_owned())))
        });
        (done, checked)
    })
}

/// Checks `pending` candidates exactly against `index_files` (`base`:
/// the sources stored before this ingest), partition by partition: each
/// partition's candidates are hashed, and that partition of every index
/// file is streamed past them. It only reads, so it runs beside the rest
/// of the batch whose candidates complete `pending` ([`Run::take_batch`]).
/// That batch's own index file is not needed: a new row's id is one the
/// filter had never seen, and every candidate's id went into the filter
/// when the candidate was marked, so no candidate repeats a new row of its
/// own batch (nor of a later one).
pub(super) fn check(index_files: &[IndexFile], pending: &Pending, base: u32) -> Result<Checked> {
    if pending.rows.is_empty() {
        return Ok(Checked::default());
    }
    let mut parts: Vec<Vec<u32>> = (0..PARTITIONS).map(|_| Vec::new()).collect();
    for (i, row) in pending.rows.iter().enumerate() {
        parts[row.seen.partition()].push(i as u32);
    }
    let rows = &pending.rows;
    let check = || -> Vec<Result<Checked>> {
        parts
            .into_par_iter()
            .enumerate()
            .map(|(p, mine)| {
                if mine.is_empty() {
                    return Ok(Checked::default());
                }
                // Candidates come in file order; an index holds one entry per id.
                let mut known: FxHashMap<IdHash, Option<(u64, u64)>> =
                    FxHashMap::with_capacity_and_hasher(mine.len(), Default::default());
                for &i in &mine {
                    known.insert(rows[i as usize].seen.id, None);
                }
                for file in index_files {
                    file.for_each_in(p, |entry| {
                        if let Some(slot) = known.get_mut(&entry.id) {
                            *slot = Some((entry.content, entry.place));
                        }
                    })?;
                }
                let (mut new, mut duplicates) = (Vec::new(), 0);
                for &i in &mine {
                    let seen = rows[i as usize].seen;
                    let place = Place { file: base + seen.file, line: seen.line };
                    let Some(slot) = known.get_mut(&seen.id) else { continue };
                    match *slot {
                        None => {
                            *slot = Some((seen.content, index::pack(place)));
                            new.push(i);
                        }
                        Some((content, _)) if content == seen.content => duplicates += 1,
                        Some((_, earlier)) => {
                            let places = Conflict { earlier: index::unpack(earlier), later: place };
                            let conflict = Some(Clash { places, row: i });
                            return Ok(Checked { new, duplicates, conflict });
                        }
                    }
                }
                Ok(Checked { new, duplicates, conflict: None })
            })
            .collect()
    };
    // The partitions' index reads go around the page cache and wait on
    // the device: twice the pool's threads, so that one computes while
    // another waits (measure with `bench/ingest-ab.sh`).
    let io_pool = rayon::ThreadPoolBuilder::new().num_threads(rayon::current_num_threads() * 2).build();
    let found = match io_pool {
        Ok(pool) => pool.install(check),
        Err(_) => check(),
    };
    let mut checked = Checked::default();
    for result in found {
        let Checked { new, duplicates, conflict } = result?;
        checked.new.extend(new);
        checked.duplicates += duplicates;
        checked.conflict = Clash::earlier(checked.conflict, conflict);
    }
    checked.new.sort_unstable();
    Ok(checked)
}

/// A row of a batch: its chunk, and its place among the chunk's rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RowAt {
    chunk: u32,
    row: u32,
}

/// The first row of an id in a batch's partition: its content hash,
/// where it is, and whether the filter may have seen its id.
#[derive(Clone, Copy)]
struct FirstSeen {
    content: u64,
    at: RowAt,
    candidate: bool,
}

/// What one partition of a batch found: each row's mark (rows not marked
/// are new), and its first conflict, if any.
struct PartMarks {
    marks: Vec<(RowAt, Mark)>,
    conflict: Option<Clash<RowAt>>,
}

/// What [`check`] found of the candidates: those new (by their position
/// in [`Pending::rows`], in order), how many repeat a row stored or seen
/// before, and the first conflict (by the later place) if any.
#[derive(Default)]
pub(super) struct Checked {
    new: Vec<u32>,
    duplicates: u64,
    conflict: Option<Clash<u32>>,
}

/// A row of a batch in its id-hash partition: its id and content hashes,
/// and where it is in the batch.
#[derive(Clone, Copy)]
struct BatchEntry {
    id: IdHash,
    content: u64,
    chunk: u32,
    row: u32,
}

/// A conflict found: the stored or earlier place and the later place
/// (their files source numbers), and where the later row is: `R` is its
/// (chunk, row) in a batch, or its position in [`Pending::rows`].
#[derive(Clone, Copy)]
struct Clash<R> {
    places: Conflict,
    row: R,
}

impl<R> Clash<R> {
    /// Of two partitions' conflicts, the one whose later place comes
    /// first: the conflict a one-row-at-a-time reading meets first.
    fn earlier(kept: Option<Self>, found: Option<Self>) -> Option<Self> {
        match (kept, found) {
            (Some(kept), Some(found)) if found.places.met_before(&kept.places) => Some(found),
            (None, found) => found,
            (kept, _) => kept,
        }
    }
}

/// The state of one kind during an ingest.
pub(super) struct KindState {
    pub(super) kind: Kind,
    /// The kind's files: the stored ones, then this ingest's.
    pub(super) files: KindFiles,
    /// Every index file of the kind, stored and new, opened.
    pub(super) index: Vec<IndexFile>,
    pub(super) filter: Filter,
    pub(super) pending: Pending,
    pub(super) tally: Tally,
    /// Sum of the amounts stored, old and new.
    pub(super) amount: Amount,
}

impl KindState {
    pub(super) fn add_amount(&mut self, nanos: i128) -> Result<()> {
        self.amount = self
            .amount
            .checked_add(Amount::from_nanos(nanos))
            .ok_or_else(|| Error::Internal(format!("sum overflow of {} amounts", self.kind)))?;
        Ok(())
    }
}

/// Adds every stored id to the filter, partition by partition in parallel
/// (one partition of every index file at a time). Each id's block is
/// prefetched [`IDS_AHEAD`] ids before its insert: the stored ids are
/// the history, and each is a miss in a filter of megabytes.
pub(crate) fn load_filter(filter: &mut Filter, stored: &[IndexFile]) -> Result<()> {
    let loaded: Vec<Result<()>> = filter
        .parts_mut()
        .enumerate()
        .map(|(p, mut part)| {
            let mut ahead = [IdHash::default(); IDS_AHEAD];
            let mut seen = 0usize;
            for file in stored {
                file.for_each_in(p, |entry| {
                    let slot = &mut ahead[seen % IDS_AHEAD];
                    if seen >= IDS_AHEAD {
                        part.check_and_insert(*slot);
                    }
                    part.prefetch(entry.id);
                    *slot = entry.id;
                    seen += 1;
                })?;
            }
            for k in seen.saturating_sub(IDS_AHEAD)..seen {
                part.check_and_insert(ahead[k % IDS_AHEAD]);
            }
            Ok(())
        })
        .collect();
    loaded.into_iter().collect()
}

/// Candidate rows waiting for their exact check, with their text.
#[derive(Default)]
pub(in crate::store) struct Pending {
    texts: Texts,
    rows: Vec<Row>,
    /// Bytes of the rows' five text fields (record id, account,
    /// subaccount, type, code), each row's counted whole as the Spark
    /// engine counts them (`Pending::bytes_of`), however few distinct
    /// key fields [`Texts`] keeps.
    text: u64,
}

impl Pending {
    /// Copies `row` (its text in `texts`) in.
    pub(super) fn push(&mut self, texts: &Texts, row: &Row) -> Result<()> {
        let copied = row.copied(texts, &mut self.texts).ok_or_else(Pending::too_much_text)?;
        self.text += Pending::text_of(&copied.view(&self.texts, ""));
        self.rows.push(copied);
        Ok(())
    }

    /// The error of candidates whose record ids pass the 4 GiB a span
    /// addresses (only reached with a `--pending-mb` or `--batch-mb` in the
    /// gigabytes).
    fn too_much_text() -> Error {
        Error::Limit(
            "the candidate rows waiting for their exact check hold more than 4 GiB of text; \
             lower --pending-mb (or --batch-mb)"
                .to_owned(),
        )
    }

    /// Bytes of the five text fields of `view`.
    pub(in crate::store) fn text_of(view: &RecordView<'_>) -> u64 {
        [view.record.record_id, view.record.auth_id, view.record.subaccount, view.record.type_, view.record.code]
            .iter()
            .map(|t| t.len() as u64)
            .sum()
    }

    /// Memory held, about: what decides when the candidates are checked.
    pub(in crate::store) fn bytes(&self) -> u64 {
        Pending::bytes_of(self.text, self.rows.len() as u64)
    }

    /// What [`Pending::bytes`] counts for `rows` rows of `text` bytes of
    /// text in all (their record_id, auth_id, subaccount, type and code).
    pub(in crate::store) fn bytes_of(text: u64, rows: u64) -> u64 {
        text + rows * std::mem::size_of::<Row>() as u64
    }

    /// Copies in the row of `view` (a test's way to fill candidates).
    #[cfg(test)]
    fn push_view(&mut self, view: &RecordView<'_>, seen: crate::records::dedup::Seen) -> Result<()> {
        let row = Row::of_view(view, seen, &mut self.texts).ok_or_else(Pending::too_much_text)?;
        self.text += Pending::text_of(view);
        self.rows.push(row);
        Ok(())
    }

    fn view<'a>(&'a self, row: &Row, source_file: &'a str) -> RecordView<'a> {
        row.view(&self.texts, source_file)
    }

    /// Of the rows held at `positions` (every row held when `None`), those
    /// a correction may touch ([`may_be_corrected`]); `names`: the input
    /// files' names, by inventory index.
    pub(in crate::store) fn touched<'a, V>(
        &'a self,
        positions: Option<&[u32]>,
        registered: Option<&rustc_hash::FxHashMap<IdHash, V>>,
        names: &[&'a str],
    ) -> Vec<NewVersion<'a>> {
        let rows: Box<dyn Iterator<Item = &Row>> = match positions {
            Some(positions) => Box::new(positions.iter().filter_map(|&i| self.rows.get(i as usize))),
            None => Box::new(self.rows.iter()),
        };
        rows.filter(|row| may_be_corrected(row.revision, row.seen.id, registered))
            .map(|row| NewVersion {
                record_id: self.texts.record_id(row),
                revision: row.revision,
                seen: row.seen,
                source_file: names.get(row.seen.file as usize).copied().unwrap_or(""),
            })
            .collect()
    }
}

/// The index files of `kind` that the store `old` (at `store`) lists, each
/// checked against its sum as it is opened.
pub(in crate::store) fn stored_index(
    store: &std::path::Path,
    old: &crate::store::Manifest,
    kind: Kind,
) -> Result<Vec<IndexFile>> {
    old.kind(kind).index.iter().map(|name| IndexFile::open_checked(old.file(store, name)?)).collect()
}

/// The record-id filter of a kind whose `stored` rows have the index
/// files `index`, for new input `files` ([`filter_for`]), loaded with every
/// stored id: the one both engines start the kind from.
pub(in crate::store) fn loaded_filter(
    max_bytes: u64,
    stored: &KindFiles,
    index: &[IndexFile],
    files: &[(u32, &crate::records::files::InputFile)],
) -> Result<Filter> {
    let mut filter = filter_for(max_bytes, stored, files);
    load_filter(&mut filter, index)?;
    Ok(filter)
}

/// The record-id filter of one kind (both engines make the same one, so
/// that they take the same rows for candidates): sized for the ids it will
/// hold, those `stored` and about as many new ones as the input `files`
/// can hold (CSV rows of at least [`CSV_ROW_BYTES`], compressed or Parquet
/// rows of at least [`PACKED_ROW_BYTES`]), within `max_bytes`
/// (`--filter-mb`). An estimate too low only sends more rows to the exact
/// check.
fn filter_for(max_bytes: u64, stored: &KindFiles, files: &[(u32, &crate::records::files::InputFile)]) -> Filter {
    let new: u64 = files
        .iter()
        .map(|(_, file)| match file.format {
            crate::records::files::Format::Csv => file.size / CSV_ROW_BYTES,
            crate::records::files::Format::CsvGz
            | crate::records::files::Format::CsvZst
            | crate::records::files::Format::Parquet => file.size / PACKED_ROW_BYTES,
        })
        .sum();
    Filter::for_ids(max_bytes, stored.count.saturating_add(new))
}

/// Bytes of the shortest CSV row [`filter_for`] expects (the benchmark's are
/// about 120).
const CSV_ROW_BYTES: u64 = 48;

/// Bytes of the shortest compressed or Parquet row [`filter_for`] expects.
const PACKED_ROW_BYTES: u64 = 8;

#[cfg(test)]
mod tests {
    use super::*;

    use crate::store::ingest::chunk::{span_at, TextRange};

    /// Text past 4 GiB is no span (never one that wraps around to the
    /// start of the arena); for candidates, a limit naming the option that
    /// bounds it.
    #[test]
    fn spans_past_4_gib_are_a_limit_not_a_wrap() {
        let max = u32::MAX as usize;
        assert_eq!(span_at(0, 5), Some(TextRange { start: 0, length: 5 }));
        assert_eq!(span_at(max - 5, 5), Some(TextRange { start: u32::MAX - 5, length: 5 }));
        for (at, length) in [(max - 4, 5), (max + 1, 0), (1 << 33, 3), (0, max + 1)] {
            assert_eq!(span_at(at, length), None, "{at} {length}");
        }
        let error = Pending::too_much_text();
        assert!(matches!(error, Error::Limit(_)), "{error}");
        assert!(error.to_string().contains("--pending-mb"), "{error}");
    }

    /// A candidate keeps its text, and counts its five text fields whole
    /// (as the Spark engine does) however few distinct key fields there
    /// are.
    #[test]
    fn candidates_keep_their_text_and_count_it_whole() {
        let view = |id: &'static str| RecordView {
            record: crate::records::Record {
                record_id: id,
                auth_id: "MA1",
                subaccount: "",
                timestamp: crate::time::Instant { secs: 0, nanos: 0 },
                product: crate::records::Product::Voice,
                type_: "pstn",
                direction: None,
                country: None,
                units: 1,
                duration: 0,
                amount: 0,
                surcharge: 0,
                code: "4000",
                revision: 0,
            },
            source_file: "",
            source_line: 2,
        };
        let seen = crate::records::dedup::Seen::new("r", 0, 0, 2);
        let mut pending = Pending::default();
        pending.push_view(&view("r1"), seen).expect("kept");
        pending.push_view(&view("r22"), seen).expect("kept");
        let mut copy = Pending::default();
        copy.push(&pending.texts, &pending.rows[1]).expect("copied");
        assert_eq!(copy.view(&copy.rows[0], "").record.record_id, "r22");
        assert_eq!(copy.view(&copy.rows[0], "").record.code, "4000");
        assert_eq!(pending.text, (2 + 3 + 4 + 4) * 2 + 1);
        assert_eq!(pending.bytes(), Pending::bytes_of(pending.text, 2));
    }
}
