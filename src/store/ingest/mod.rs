//! `ingest`: check and deduplicate a data directory once, against what the
//! store already holds, and publish new record, index and rollup files.
//!
//! The input is read kind by kind, in batches of files (at most
//! [`IngestOptions::batch_bytes`] of input each, in inventory order; a file
//! larger than two batches is read in runs of lines, each run a batch:
//! `piece_lines`), one pipeline over every kind: the next batch is read
//! while this one is taken in (deduplicated, folded, written). Each batch
//! is read in parallel by the same readers and the same row check as every
//! other command (`records::csv::read`, `records::parquet::read`,
//! `records::parse_record`); every valid row leaves its [`Seen`](crate::records::dedup::Seen) entry
//! (record_id hash, content hash, place). New rows are written as one
//! records file and one index file per batch, and folded into rollups.
//!
//! The parts, in the order a row meets them:
//!
//! - this file: the run ([`ingest`]: open the generation, read kind by
//!   kind and batch by batch, publish); the generation itself is opened,
//!   published and, on failure, discarded by `store::generation` (any
//!   error, a full disk included, leaves the store's files as they were);
//! - `options.rs`: the options, progress events and report;
//! - `batches.rs`: how the input is cut into batches (shared with the
//!   Spark engine);
//! - `chunk.rs`: the row sink that reads one file or CSV chunk into rows
//!   whose text sits in one arena, and gathers a chunk's new rows;
//! - `dedup.rs`: dedup against the store's index (the id filter, the
//!   pending candidates, their exact check, conflicts);
//! - `key.rs`: a rollup group's key, and the shard of an account;
//! - `fold.rs`: the rollup groups of the new rows, in shards by account,
//!   folded in parallel;
//! - `spill.rs`: a full shard sorted and written to a partial file, and
//!   that file's row codec;
//! - `merge.rs`: at publish, each account's groups, partial runs and
//!   published file merged into its new rollup files (`strings.rs`: the
//!   account's strings; `day.rs`: the sort and sums of one day).
//!
//! Memory, and what bounds it:
//!
//! - two batches: the one being taken in (its duplicates decided, its new
//!   rows folded and written), and the next, read and checked meanwhile
//!   (at a kind's last batch, the next kind's first); each its rows
//!   (about 250 bytes each: at most about two batches' worth of input, as
//!   a larger file is read a run of lines at a time), and the first its
//!   records and index entries; the input's bytes are not held (a file
//!   is read, and a compressed one decoded, 8 MiB at a time);
//! - the record-id filter: sized for the ids of the kind (stored, and
//!   what the input can hold), at most [`IngestOptions::filter_bytes`];
//! - candidates: [`IngestOptions::pending_bytes`], then one partition's
//!   candidates in a hash map during the exact check (the index itself is
//!   streamed, 1 MiB at a time per thread);
//! - rollup groups: at most [`IngestOptions::max_rollup_groups`] while
//!   reading (then spilled to partial files of fixed-size binary rows); at
//!   publish, as many accounts at a time as threads plus four (plain
//!   threads), each merged one UTC day at a time: one day of the
//!   account's groups (sorted once, summed at every grain from that
//!   order), plus a slice of 64k rows per input (the in-memory groups,
//!   each partial file, the previous 15-minute file) and a row group per
//!   grain being written. So the part that still grows is the number of
//!   spills (one slice each while merging), not the groups.
//!
//! After publishing, files that neither the new nor the previous manifest
//! lists, nor the manifest of any generation a live reader holds a lease on
//! (`lease.rs`), are deleted (superseded rollups, orphans of killed
//! ingests); lease files of readers that are gone go too.

pub(in crate::store) mod batches;
pub(in crate::store) mod chunk;
pub(in crate::store) mod corrections;
pub(in crate::store) mod day;
pub(in crate::store) mod dedup;
pub(in crate::store) mod fold;
mod key;
mod merge;
pub(in crate::store) mod options;
mod spill;
mod strings;
mod table;

pub(crate) use dedup::load_filter;
pub use options::{
    BuildResources, IngestOptions, IngestProgress, IngestReport, OnProgress, PreviousResources, ResourceChanges,
};

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;

use super::generation::{self, Opened, Written};
use super::index::{IndexEntry, IndexFile};
use super::parquet_io::RecordRows;
use super::Manifest;
use crate::aggregate::Tally;
use crate::durable::Syncer;
use crate::error::{Error, Location, Result};
use crate::money::Amount;
use crate::records::dedup::Place;
use crate::records::files::{InputFile, Inventory};
use crate::records::pieces::Pieces;
use crate::records::Kind;
use batches::{batches, Batch};
use chunk::{check_file, Chunk, ChunkFold, Kept, Mark};
use corrections::{Registry, RunVersion, RunVoid};
use dedup::{loaded_filter, stored_index, KindState, Pending};
use fold::Rollups;
use options::started;

/// Ingests `data` into `store` (created when missing). A failed ingest
/// (any error) leaves the store as it was: nothing is published, and what
/// it wrote is deleted before it returns (`Unpublished`).
pub fn ingest(data: &Path, store: &Path, options: &IngestOptions) -> Result<IngestReport> {
    let id = &options.ingest_id;
    let opened = generation::open(store, id)?;
    let unpublished = opened.unpublished(store, id);
    unpublished.settle(ingest_opened(data, store, opened, options))
}

/// [`ingest`] once the store is locked and its manifest read.
fn ingest_opened(data: &Path, store: &Path, opened: Opened, options: &IngestOptions) -> Result<IngestReport> {
    let id = &options.ingest_id;
    let inventory = Inventory::scan(data)?;
    let prepared = opened.read_inputs(data, store, id, inventory, options.resources)?;
    options.progress.tell(started(&prepared.inventory));
    let syncer = Syncer::background();
    let registries = corrections::registries(store, &prepared.old)?;
    let mut run = Run {
        store,
        syncer: &syncer,
        id,
        options,
        inventory: &prepared.inventory,
        old: &prepared.old,
        manifest: prepared.old.clone(),
        rollups: Rollups::default(),
        report: IngestReport { id: id.clone(), files: prepared.inventory.files.len(), ..IngestReport::default() },
        set_aside: generation::RejectedRows::new(store, id),
        batches: 0,
        registries: &registries,
        touched: BTreeMap::new(),
    };
    let voids = run.read_voids()?;
    run.ingest_kinds()?;
    let applied = run.resolve(voids)?;
    let (report, manifest, rollups) = (run.report, run.manifest, run.rollups);
    options.progress.tell(IngestProgress::Publishing);
    let folded = generation::Folded { rollups, applied, set_aside: run.set_aside };
    generation::finish(store, id, prepared, manifest, folded, report, syncer)
}

/// A generation as the Spark publish's kinds left it: what
/// [`correct`] applies the corrections to.
pub(in crate::store) struct Taken {
    pub(in crate::store) manifest: Manifest,
    pub(in crate::store) rollups: Rollups,
    pub(in crate::store) report: IngestReport,
    /// The rows set aside so far (the kinds').
    pub(in crate::store) set_aside: generation::RejectedRows,
    /// The new versions a correction may touch, by kind.
    pub(in crate::store) touched: BTreeMap<Kind, Vec<RunVersion>>,
}

/// What the Spark publish shares with a local run: the store, the options,
/// the input, the previous generation, its corrections and the syncer.
pub(in crate::store) struct Shared<'a> {
    pub(in crate::store) store: &'a Path,
    pub(in crate::store) options: &'a IngestOptions,
    pub(in crate::store) inventory: &'a Inventory,
    pub(in crate::store) old: &'a Manifest,
    pub(in crate::store) registries: &'a BTreeMap<Kind, Registry>,
    pub(in crate::store) syncer: &'a Syncer,
}

/// With `--on-bad-row fail`, the first bad row of the delivery's voids:
/// a local run reads them before the kinds, so its first error is theirs;
/// the Spark engine, which reads them after its job, checks them first
/// with this.
pub(in crate::store) fn check_voids(options: &IngestOptions, inventory: &Inventory) -> Result<()> {
    if options.on_bad_row != crate::records::bad_rows::OnBadRow::Fail {
        return Ok(());
    }
    let files: Vec<(u32, &InputFile)> =
        inventory.files.iter().enumerate().filter(|(_, f)| f.kind == Kind::Voids).map(|(i, f)| (i as u32, f)).collect();
    read_batch(options, &files).map(drop)
}

/// Reads the voids of a delivery and applies its corrections to what the
/// Spark publish wrote ([`Taken`]), as a local run does after its kinds:
/// the generation, ready to finish.
pub(in crate::store) fn correct(shared: Shared<'_>, taken: Taken) -> Result<(Taken, corrections::Applied)> {
    let Shared { store, options, inventory, old, registries, syncer } = shared;
    let Taken { manifest, rollups, report, set_aside, touched } = taken;
    let mut run = Run {
        store,
        syncer,
        id: &options.ingest_id,
        options,
        inventory,
        old,
        manifest,
        rollups,
        report,
        set_aside,
        batches: 0,
        registries,
        touched,
    };
    let voids = run.read_voids()?;
    let applied = run.resolve(voids)?;
    let (manifest, rollups, report, set_aside) = (run.manifest, run.rollups, run.report, run.set_aside);
    let taken = Taken { manifest, rollups, report, set_aside, touched: BTreeMap::new() };
    Ok((taken, applied))
}

/// The state of one ingest.
struct Run<'a> {
    store: &'a Path,
    /// Syncs the records and index files while the next batches are read.
    syncer: &'a Syncer,
    id: &'a str,
    options: &'a IngestOptions,
    inventory: &'a Inventory,
    old: &'a Manifest,
    manifest: Manifest,
    rollups: Rollups,
    report: IngestReport,
    set_aside: generation::RejectedRows,
    batches: u64,
    /// What earlier ingests recorded of corrections, by kind.
    registries: &'a BTreeMap<Kind, Registry>,
    /// This ingest's stored versions that a correction may touch (above
    /// revision 0, or of a record the registry knows), by kind.
    touched: BTreeMap<Kind, Vec<RunVersion>>,
}

impl Run<'_> {
    /// The record ids of `kind` that earlier ingests' corrections name,
    /// when there are any: a new row of revision 0 with one of them is
    /// touched by a correction (as is every row above revision 0).
    fn registered(&self, kind: Kind) -> Option<&corrections::Noted> {
        self.registries.get(&kind).map(|r| &r.noted).filter(|noted| !noted.is_empty())
    }

    /// Notes the new rows of `kind` a correction may touch, written to the
    /// records file `records`: each its record id, row and input file name.
    fn note_touched(&mut self, kind: Kind, records: &str, versions: Vec<chunk::NewVersion<'_>>) {
        let base = self.old.sources.len() as u32;
        let noted = self.touched.entry(kind).or_default();
        let (records, mut names) = (Arc::from(records), corrections::Names::default());
        noted.extend(versions.iter().map(|version| RunVersion::of(version, &records, base, &mut names)));
    }

    /// The file and line a place (its file a source number) names in
    /// messages.
    fn location(&self, place: Place) -> Location {
        let (source, line) = (place.file, place.line);
        let base = self.old.sources.len();
        let name = match (source as usize).checked_sub(base) {
            Some(i) => self.inventory.files.get(i).map(|f| f.name.clone()),
            None => self.old.sources.get(source as usize).cloned(),
        }
        .unwrap_or_else(|| format!("source #{source}"));
        let is_row = name.split(" (ingest").next().is_some_and(|n| n.to_ascii_lowercase().ends_with(".parquet"));
        Location { file: name, line, is_row }
    }

    /// Reads the files of `voids/`: each void new to the store, by the kind
    /// it withdraws from. A void that repeats one read earlier or stored
    /// (same kind, record id, revision and reason) is a duplicate; with
    /// another reason, a conflict naming both places.
    fn read_voids(&mut self) -> Result<BTreeMap<Kind, Vec<RunVoid>>> {
        let inventory = self.inventory;
        let files: Vec<(u32, &InputFile)> = inventory
            .files
            .iter()
            .enumerate()
            .filter(|(_, f)| f.kind == Kind::Voids)
            .map(|(i, f)| (i as u32, f))
            .collect();
        let mut out: BTreeMap<Kind, Vec<RunVoid>> = BTreeMap::new();
        if files.is_empty() {
            return Ok(out);
        }
        let mut tally = Tally::default();
        let chunks = read_batch(self.options, &files)?;
        let base = self.old.sources.len() as u32;
        let mut seen: std::collections::HashMap<(Kind, String, u64), (String, Place)> = Default::default();
        for mut chunk in chunks {
            tally.read += chunk.read;
            let rejects = chunk.bad_rows.take_rejects();
            tally.set_aside += rejects.len() as u64;
            self.set_aside.voids.append(&rejects)?;
            let source_file = chunk.file_name().to_owned();
            for void in std::mem::take(&mut chunk.voids) {
                let place = Place { file: base + void.place.file, line: void.place.line };
                let id = crate::records::dedup::id_hash(&void.record_id);
                let stored = self.registries.get(&void.kind).and_then(|r| r.noted.get(&id)).and_then(|noted| {
                    noted.iter().find(|n| n.void && n.revision == void.revision && n.at.record_id == void.record_id)
                });
                let earlier = match stored {
                    Some(n) => Some((
                        n.reason.clone(),
                        Location {
                            file: super::source_name(&n.at.source_file, &n.ingest),
                            line: n.at.line,
                            is_row: false,
                        },
                    )),
                    None => seen
                        .get(&(void.kind, void.record_id.clone(), void.revision))
                        .map(|(reason, at)| (reason.clone(), self.location(*at))),
                };
                match earlier {
                    Some((reason, _)) if reason == void.reason => tally.duplicates += 1,
                    Some((_, first)) => {
                        return Err(Error::Conflict {
                            kind: Kind::Voids.name(),
                            record_id: void.record_id,
                            first,
                            second: self.location(place),
                        })
                    }
                    None => {
                        seen.insert((void.kind, void.record_id.clone(), void.revision), (void.reason.clone(), place));
                        out.entry(void.kind).or_default().push(RunVoid {
                            revision: void.revision,
                            record_id: void.record_id,
                            reason: void.reason,
                            place,
                            source_file: source_file.clone(),
                        });
                    }
                }
            }
        }
        self.report.tallies.insert(Kind::Voids, tally);
        Ok(out)
    }

    /// Applies this ingest's corrections, kind by kind
    /// ([`corrections::resolve`]): the rows that stop counting leave the
    /// rollups, and the tallies, the kinds' counts and amounts, and the
    /// report say what changed.
    fn resolve(&mut self, mut voids: BTreeMap<Kind, Vec<RunVoid>>) -> Result<corrections::Applied> {
        let mut applied = corrections::Applied::default();
        // This ingest's records files are read back whole.
        if !self.touched.is_empty() || !voids.is_empty() {
            self.syncer.settle();
        }
        for kind in Kind::ALL {
            let versions = self.touched.remove(&kind).unwrap_or_default();
            let kind_voids = voids.remove(&kind).unwrap_or_default();
            if versions.is_empty() && kind_voids.is_empty() {
                continue;
            }
            let files = self.manifest.kind(kind);
            let stored_index = self.old.kind(kind).index.len();
            let mut index = Vec::with_capacity(files.index.len());
            for (i, pair) in files.indexed(kind)?.into_iter().enumerate() {
                let file = match i < stored_index {
                    true => IndexFile::open_checked(self.old.file(self.store, pair.index)?)?,
                    false => IndexFile::open(&self.store.join(pair.index))?,
                };
                index.push(corrections::IndexedRecords { records: pair.records.into(), index: file });
            }
            let empty = Registry::default();
            let registry = self.registries.get(&kind).unwrap_or(&empty);
            let inputs = corrections::KindInputs { kind, registry, versions, voids: kind_voids, index, stored_index };
            let mut rollups = std::mem::take(&mut self.rollups);
            let resolved = corrections::resolve(self.store, self.old, inputs, &*self, &mut rollups);
            self.rollups = rollups;
            let resolved = resolved?;
            let tally = self.report.tallies.entry(kind).or_default();
            tally.used -= resolved.superseded_versions;
            tally.superseded += resolved.superseded_versions;
            if let Some(voids) = self.report.tallies.get_mut(&Kind::Voids) {
                voids.voids += resolved.voids;
                voids.superseded += resolved.superseded_voids;
            }
            let stored_dropped = resolved.stored_superseded + resolved.stored_withdrawn;
            self.report.stored_superseded += resolved.stored_superseded;
            self.report.stored_withdrawn += resolved.stored_withdrawn;
            let mut files = self.manifest.kind(kind);
            files.count = files
                .count
                .checked_sub(resolved.superseded_versions + stored_dropped)
                .ok_or_else(|| Error::Internal(format!("the store's count of {kind} fell below zero")))?;
            let amount = files.total_amount(kind, self.store)?;
            let dropped = Amount::from_nanos(-(resolved.stored_dropped_amount + resolved.run_dropped_amount));
            let overflow = || Error::Internal(format!("sum overflow of {kind} amounts"));
            files.amount = amount.checked_add(dropped).ok_or_else(overflow)?.to_string();
            self.manifest.kinds.insert(kind.name().to_owned(), files);
            applied.rows.extend(resolved.corrections);
            applied.bookings.extend(resolved.bookings);
        }
        Ok(applied)
    }

    /// Ingests every kind's files: their batches, kind after kind, form one
    /// sequence, and the next batch is read and checked while this one is
    /// taken in ([`Run::take_batch`]; at a kind's last batch, also its
    /// candidates' check and its tallies). Reading needs no state of the
    /// run, and taking in has serial stretches (the dedup's partitioning,
    /// a shard's spill, the writer's file and last row groups, the exact
    /// check's index reads), so both cores keep busy. Errors come in the
    /// order the batches would give them one at a time: this batch's rows,
    /// its write, its candidates' check, then the next batch's rows.
    fn ingest_kinds(&mut self) -> Result<()> {
        let options = self.options;
        let by_kind: Vec<(Kind, Vec<(u32, &InputFile)>)> =
            Kind::ALL.iter().map(|&kind| (kind, crate::records::files::of_kind(&self.inventory.files, kind))).collect();
        let mut steps: Vec<Step<'_, '_>> = Vec::new();
        for (kind, files) in &by_kind {
            if files.is_empty() {
                self.report.tallies.insert(*kind, Tally::default());
                continue;
            }
            steps.extend(batches(files, options.batch_bytes).into_iter().map(|batch| Step {
                kind: *kind,
                files,
                batch,
            }));
        }
        let mut feed = Feed { steps: &steps, options, step: 0, in_runs: None };
        let mut state: Option<KindState> = None;
        let mut next = feed.read();
        while let Some(read) = next.take() {
            let ReadBatch { step, chunks, more } = read?;
            let Step { kind, files, .. } = steps[step];
            let last = !more && steps.get(step + 1).is_none_or(|later| later.kind != kind);
            let (taken, read) = rayon::join(
                || -> Result<()> {
                    let mut this = match state.take() {
                        Some(this) => this,
                        None => self.start_kind(kind, files)?,
                    };
                    self.take_batch(&mut this, chunks, last)?;
                    if last {
                        self.finish_kind(this)
                    } else {
                        state = Some(this);
                        Ok(())
                    }
                },
                || feed.read(),
            );
            taken?;
            next = read;
        }
        Ok(())
    }

    /// The state of `kind` before its first batch of `files`: its stored
    /// files, amount and index, and its record-id filter.
    fn start_kind(&self, kind: Kind, files: &[(u32, &InputFile)]) -> Result<KindState> {
        let files_of_kind = self.old.kind(kind);
        let amount = files_of_kind.total_amount(kind, self.store)?;
        let stored = stored_index(self.store, self.old, kind)?;
        let filter = loaded_filter(self.options.filter_bytes, &files_of_kind, &stored, files)?;
        Ok(KindState {
            kind,
            files: files_of_kind,
            index: stored,
            filter,
            pending: Pending::default(),
            tally: Tally::default(),
            amount,
        })
    }

    /// After a kind's last batch (which checked its last candidates):
    /// takes its files, count, amount and tallies into the manifest and the
    /// report.
    fn finish_kind(&mut self, mut state: KindState) -> Result<()> {
        state.files.count += state.tally.used;
        state.files.amount = state.amount.to_string();
        self.manifest.kinds.insert(state.kind.name().to_owned(), state.files);
        self.report.tallies.insert(state.kind, state.tally);
        Ok(())
    }

    /// Writes new rows of `kind` as the run's next records file and their
    /// entries as its next index file; their names (nothing when there are
    /// no new rows).
    fn write_new<R: RecordRows + ?Sized>(
        &self,
        kind: Kind,
        views: &R,
        entries: &[&[IndexEntry]],
    ) -> Result<Option<Written>> {
        if views.is_empty() {
            return Ok(None);
        }
        generation::write_files(self.store, self.id, self.batches, kind, views, entries, self.syncer).map(Some)
    }

    /// Counts `rows` new rows of `state`'s kind, and takes the files
    /// [`Run::write_new`] wrote them to into the manifest.
    fn add_written(&mut self, state: &mut KindState, rows: usize, written: Option<Written>) -> Result<()> {
        state.tally.used += rows as u64;
        if let Some(Written { records: name, index: index_name }) = written {
            state.index.push(IndexFile::open(&self.store.join(&index_name))?);
            state.files.records.push(name);
            state.files.index.push(index_name);
            self.batches += 1;
        }
        Ok(())
    }

    /// Takes in one batch of `state`'s kind: decides its rows' duplicates,
    /// folds its new rows into the rollups (spilling full shards), writes
    /// them as the run's next records and index files, and checks the
    /// pending candidates once they hold enough bytes, or at the kind's
    /// `last` batch: that check only reads, so it runs beside the fold and
    /// the write (its index reads wait on the device, the others compute),
    /// and what it finds is stored once they are done.
    fn take_batch(&mut self, state: &mut KindState, mut chunks: Vec<Chunk>, last: bool) -> Result<()> {
        let marks = self.dedup(state, &chunks)?;
        for chunk in chunks.iter_mut() {
            state.tally.read += chunk.read;
            let rejects = chunk.bad_rows.take_rejects();
            state.tally.set_aside += rejects.len() as u64;
            self.set_aside.kinds.append(&rejects)?;
        }
        for (chunk, marks) in chunks.iter().zip(&marks) {
            for (row, mark) in chunk.rows.iter().zip(marks) {
                if *mark == Mark::Candidate {
                    state.pending.push(&chunk.texts, row)?;
                }
            }
        }
        let pending =
            (last || state.pending.bytes() >= self.options.pending_bytes).then(|| std::mem::take(&mut state.pending));
        let base = self.old.sources.len() as u32;
        let (kind, index_files) = (state.kind, &state.index);
        let (taken, checked) =
            dedup::beside(pending.as_ref().map(|pending| move || dedup::check(index_files, pending, base)), || {
                self.take_new(kind, &chunks, &marks)
            });
        let TakenNew { written, rows, duplicates, amount, touched } = taken?;
        if let Some(written) = &written {
            let versions = touched
                .iter()
                .map(|&(c, r)| {
                    let (chunk, row) = (&chunks[c], &chunks[c].rows[r as usize]);
                    let view = chunk.view(row);
                    let (record_id, source_file) = (view.record.record_id, view.source_file);
                    chunk::NewVersion { record_id, revision: row.revision, seen: row.seen, source_file }
                })
                .collect();
            self.note_touched(kind, &written.records, versions);
        }
        state.tally.duplicates += duplicates;
        state.add_amount(amount)?;
        self.add_written(state, rows, written)?;
        drop(chunks);
        match (pending, checked) {
            (Some(pending), Some(checked)) => self.store_checked(state, pending, checked),
            _ => Ok(()),
        }
    }

    /// The new rows of a batch (`marks`: its dedup's decisions) folded
    /// into the rollups (full shards spilled) and written as the run's
    /// next records and index files: their names, and the rows written,
    /// duplicates skipped and amount of the batch.
    fn take_new(&mut self, kind: Kind, chunks: &[Chunk], marks: &[Vec<Mark>]) -> Result<TakenNew> {
        // Each chunk gathers its new rows on its own thread; then each
        // rollup shard folds its accounts' rows of every chunk.
        let base = self.old.sources.len() as u32;
        let registered = self.registered(kind);
        let folds: Vec<ChunkFold> =
            chunks.par_iter().zip(marks).map(|(chunk, marks)| chunk.fold(marks, base, registered)).collect();
        let touched: Vec<(usize, u32)> =
            folds.iter().enumerate().flat_map(|(c, fold)| fold.touched.iter().map(move |&r| (c, r))).collect();
        let duplicates = folds.iter().map(|fold| fold.duplicates).sum();
        let amount = folds.iter().map(|fold| fold.amount).sum();
        let new_rows = Kept::new(chunks.iter().zip(&folds).map(|(chunk, fold)| (chunk, &fold.kept[..])));
        let entries: Vec<&[IndexEntry]> = folds.iter().map(|fold| &fold.entries[..]).collect();
        // The fold (and the spills) and the write share nothing but the
        // rows: side by side, the tail of one (a shard larger than the
        // others, a file's last row group) leaves the pool to the other.
        // (The rollups are taken out for the fold, so that the write can
        // borrow the run; they are put back whatever the outcome.)
        let mut rollups = std::mem::take(&mut self.rollups);
        let run = &*self;
        let (folded, written) = rayon::join(
            || -> Result<()> {
                rollups.fold_chunks(chunks, &folds)?;
                rollups.spill_full(run.store, run.id, run.options.max_rollup_groups)
            },
            || run.write_new(kind, &new_rows, &entries),
        );
        self.rollups = rollups;
        folded?;
        Ok(TakenNew { written: written?, rows: new_rows.len(), duplicates, amount, touched })
    }
}

/// What [`Run::take_new`] did: the files written, the rows written, the
/// duplicates skipped, the amount of the rows written.
struct TakenNew {
    written: Option<Written>,
    rows: usize,
    duplicates: u64,
    amount: i128,
    /// The rows written that a correction may touch (chunk, row).
    touched: Vec<(usize, u32)>,
}

impl corrections::Sources for Run<'_> {
    fn source_file(&self, file: u32) -> String {
        let base = self.old.sources.len();
        match (file as usize).checked_sub(base) {
            Some(i) => self.inventory.files.get(i).map(|f| f.name.clone()).unwrap_or_default(),
            None => {
                let source = self.old.sources.get(file as usize).map(String::as_str).unwrap_or_default();
                match source.rsplit_once(" (ingest ") {
                    Some((name, _)) => name.to_owned(),
                    None => source.to_owned(),
                }
            }
        }
    }

    fn location(&self, place: Place) -> Location {
        Run::location(self, place)
    }
}

/// One batch of a kind's files ([`batches()`]); its kind's files.
#[derive(Clone, Copy)]
struct Step<'s, 'f> {
    kind: Kind,
    files: &'s [(u32, &'f InputFile)],
    batch: Batch<'s, 'f>,
}

/// The input, read a batch at a time ([`Feed::read`]): each batch of
/// files whole, or a file read in runs of lines ([`batches::piece_lines`]) a run
/// at a time.
struct Feed<'s, 'f> {
    steps: &'s [Step<'s, 'f>],
    options: &'s IngestOptions,
    /// The next step to start.
    step: usize,
    /// The file being read in runs, when there is one.
    in_runs: Option<InRuns<'f>>,
}

/// A file read in runs of lines, each run a batch.
struct InRuns<'f> {
    /// Its step (a batch of this one file).
    step: usize,
    source: u32,
    file: &'f InputFile,
    pieces: Pieces<'f>,
    /// Lines in a run.
    lines: u64,
    /// Its bytes on disk told to the progress so far.
    told: u64,
}

/// A batch read: its step, its rows (in chunks), and whether more of
/// its step (a later run of its file) follows.
struct ReadBatch {
    step: usize,
    chunks: Vec<Chunk>,
    more: bool,
}

impl Feed<'_, '_> {
    /// The next batch (its files' rows, or the next run of a file read
    /// in runs); `None` once all is read. The first bad row (in file
    /// order) is an error unless rows are set aside.
    fn read(&mut self) -> Option<Result<ReadBatch>> {
        if self.in_runs.is_none() {
            let index = self.step;
            let step = self.steps.get(index)?;
            self.step += 1;
            let (Some(lines), [(source, file)]) = (step.batch.run_lines, step.batch.files) else {
                return Some(read_batch(self.options, step.batch.files).map(|chunks| ReadBatch {
                    step: index,
                    chunks,
                    more: false,
                }));
            };
            let pieces = match Pieces::open(file) {
                Ok(pieces) => pieces,
                Err(error) => return Some(Err(error)),
            };
            self.in_runs = Some(InRuns { step: index, source: *source, file, pieces, lines, told: 0 });
        }
        let runs = self.in_runs.as_mut()?;
        let on_bad_row = self.options.on_bad_row;
        let read = chunk::check_run(runs.source, runs.file, &mut runs.pieces, runs.lines, on_bad_row);
        let done = runs.pieces.done();
        let rows = read.as_ref().map_or(0, |chunks| chunks.iter().map(|c| c.read).sum());
        let bytes = if done { runs.file.size } else { runs.pieces.bytes_read().min(runs.file.size) };
        self.options.progress.tell(IngestProgress::Read { bytes: bytes.saturating_sub(runs.told), rows });
        runs.told = bytes.max(runs.told);
        let step = runs.step;
        if done || read.is_err() {
            self.in_runs = None;
        }
        Some(read.map(|chunks| ReadBatch { step, chunks, more: !done }))
    }
}

/// Reads the files of one batch (files of one kind) in parallel; the first bad row
/// (in file order) is an error unless rows are set aside.
fn read_batch(options: &IngestOptions, batch: &[(u32, &InputFile)]) -> Result<Vec<Chunk>> {
    let on_bad_row = options.on_bad_row;
    let read: Vec<Result<Vec<Chunk>>> = batch
        .par_iter()
        .map(|&(index, file)| {
            let chunks = check_file(index, file, on_bad_row);
            if let Ok(chunks) = &chunks {
                let rows = chunks.iter().map(|c| c.read).sum();
                options.progress.tell(IngestProgress::Read { bytes: file.size, rows });
            }
            chunks
        })
        .collect();
    let mut chunks = Vec::new();
    for file_chunks in read {
        chunks.extend(file_chunks?);
    }
    Ok(chunks)
}
