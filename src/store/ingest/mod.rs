//! `ingest`: check and deduplicate a data directory once, against what the
//! store already holds, and publish new record, index and rollup files.
//!
//! The input is read kind by kind, in batches of files (at most
//! [`IngestOptions::batch_bytes`] of input each, in inventory order). Each
//! batch is read in parallel by the same readers and the same row check as
//! every other command (`records::csv::read`, `records::parquet::read`,
//! `records::parse_record`); every valid row leaves its [`Seen`] entry
//! (record_id hash, content hash, place).
//!
//! Dedup, in file order: the rows of a batch are checked against each other
//! exactly, and against everything stored or seen in earlier batches through
//! a fixed-size filter of record-id hashes (`index::Filter`, loaded from the
//! store's index files at the start of each kind). A row whose id the filter
//! has never seen is new for certain and is written with its batch. The
//! others ("candidates": real repeats and a few false positives) wait in a
//! buffer; when it is full, and at the end of the kind, they are checked
//! exactly, id-hash partition by partition, by streaming that partition of
//! every index file (stored, and written by this ingest so far) past a hash
//! of the partition's candidates: an equal id with equal content is a
//! duplicate, with different content a conflict naming both places. New
//! rows are written as one records file and one index file per batch, and
//! folded into rollups.
//!
//! Memory, and what bounds it:
//!
//! - one batch: its rows (about 250 bytes each, plus the CSV bytes of its
//!   files: a batch holds at least one whole file), its records and index
//!   entries (written before the next batch);
//! - the record-id filter: [`IngestOptions::filter_bytes`], fixed;
//! - candidates: [`IngestOptions::pending_bytes`], then one partition's
//!   candidates in a hash map during the exact check (the index itself is
//!   streamed, 1 MiB at a time per thread);
//! - rollup groups: at most [`IngestOptions::max_rollup_groups`] while
//!   reading (then spilled to partial files of fixed-size binary rows); at
//!   publish, two accounts at a time (plain threads), each merged one UTC
//!   day at a time: one day of the account's groups, plus a slice of 64k
//!   rows per input (the in-memory groups, each partial file, the previous
//!   15-minute file). So the part that still grows is the number of spills
//!   (one slice each while merging), not the groups.
//!
//! After publishing, files that neither the new nor the previous manifest
//! lists, nor the manifest of any generation a live reader holds a lease on
//! (`lease.rs`), are deleted (superseded rollups, orphans of killed
//! ingests); lease files of readers that are gone go too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

use super::index::{self, Filter, IndexEntry, IndexFile};
use super::parquet_io::{self, RecordView};
use super::rollup::{self, RollupRef};
use super::{KindFiles, Manifest, FORMAT_VERSION};
use crate::aggregate::{OnBadRow, Tally, Totals};
use crate::error::{BadRecord, Error, Location, Result};
use crate::intern::Interner;
use crate::money::Amount;
use crate::records::accounts::Accounts;
use crate::records::csv::RowSink;
use crate::records::dedup::{Seen, PARTITIONS};
use crate::records::files::{Format, InputFile, Inventory};
use crate::records::{self, Country, Direction, Field, Kind, Product};

/// How to ingest.
#[derive(Clone, Debug)]
pub struct IngestOptions {
    /// What to do with a row that breaks the contract.
    pub on_bad_row: OnBadRow,
    /// The ingest's id: letters, digits, `-`, `_`, `.`; used in file names.
    pub ingest_id: String,
    /// Input bytes per batch (at least one file per batch).
    pub batch_bytes: u64,
    /// Rollup groups held in memory before they are spilled to partial
    /// files (about 200 bytes each).
    pub max_rollup_groups: usize,
    /// Size of the record-id filter, in bytes (fixed, whatever the store
    /// holds; a fuller filter only sends more rows to the exact check).
    pub filter_bytes: u64,
    /// Candidate rows (ids the filter may have seen) held before they are
    /// checked exactly against the index, in bytes.
    pub pending_bytes: u64,
}

impl IngestOptions {
    /// Default batch size: 128 MiB of input.
    pub const DEFAULT_BATCH_BYTES: u64 = 128 << 20;

    /// Default rollup groups in memory: about 200 MB.
    pub const DEFAULT_MAX_ROLLUP_GROUPS: usize = 1 << 20;

    /// Default filter size: 256 MiB (about 1 false candidate in 5,000 rows
    /// with 100 million ids stored).
    pub const DEFAULT_FILTER_BYTES: u64 = 256 << 20;

    /// Default candidate budget: 128 MiB (about a million rows).
    pub const DEFAULT_PENDING_BYTES: u64 = 128 << 20;
}

/// What an ingest did.
#[derive(Clone, Debug, Default)]
pub struct IngestReport {
    /// The ingest's id.
    pub id: String,
    /// Input files read.
    pub files: usize,
    /// Counts per kind: `read = used + set_aside + duplicates`.
    pub tallies: BTreeMap<Kind, Tally>,
    /// Rows set aside, in file order.
    pub rejects: Vec<BadRecord>,
    /// Where they were written, when there were any.
    pub rejected_file: Option<PathBuf>,
    /// Superseded or orphaned files deleted after publishing.
    pub removed: usize,
    /// Whether a new generation was published (false when nothing changed).
    pub published: bool,
    /// The generation the store answers from afterwards.
    pub generation: u64,
    /// What this ingest did to the resources (endpoints, registrations,
    /// recordings), when the data directory has any of them.
    pub resources: Option<crate::resources::Changes>,
}

impl IngestReport {
    /// The counts of every kind, added.
    pub fn total(&self) -> Tally {
        let mut total = Tally::default();
        for tally in self.tallies.values() {
            total += *tally;
        }
        total
    }
}

/// Ingests `data` into `store` (created when missing).
pub fn ingest(data: &Path, store: &Path, options: &IngestOptions) -> Result<IngestReport> {
    let id = &options.ingest_id;
    let prepared = prepare(data, store, id)?;
    let mut run = Run {
        store,
        id,
        options,
        inventory: &prepared.inventory,
        old: &prepared.old,
        manifest: prepared.old.clone(),
        rollups: Rollups::default(),
        report: IngestReport { id: id.clone(), files: prepared.inventory.files.len(), ..IngestReport::default() },
        batches: 0,
    };
    for kind in Kind::ALL {
        run.ingest_kind(kind)?;
    }
    let (report, manifest, rollups) = (run.report, run.manifest, run.rollups);
    finish(store, id, prepared, manifest, rollups, report)
}

/// What an ingest holds from its start to its publish: the store's lock,
/// the published manifest it builds on, the input files and accounts.
pub(super) struct Prepared {
    /// Held until the ingest ends (another ingest of the store waits out).
    lock: std::fs::File,
    /// The generation this ingest builds on.
    pub(super) old: Manifest,
    /// The input files, sorted (by kind, then name).
    pub(super) inventory: Inventory,
    /// `DATA/accounts.csv`, checked, when there is one.
    accounts_bytes: Option<Vec<u8>>,
    /// The resources database this ingest built (`resources_name`), when the
    /// data directory has resource inputs.
    resources: Option<crate::resources::Changes>,
    /// Its name in the store.
    resources_name: String,
}

/// Starts an ingest of `data` into `store`: checks the id, creates the
/// store, takes its lock, reads the manifest, the inventory and accounts.
pub(super) fn prepare(data: &Path, store: &Path, id: &str) -> Result<Prepared> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        return Err(Error::BadRequest(crate::error::BadRequest::new(
            "ingest_id",
            format!("ingest id '{id}' must be non-empty: letters, digits, '-', '_' or '.'"),
        )));
    }
    std::fs::create_dir_all(store).map_err(|e| Error::io(store, e))?;
    let lock_path = store.join(".ingest.lock");
    let lock = std::fs::File::create(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
    lock.try_lock().map_err(|_| Error::io(&lock_path, "another ingest is running on this store"))?;

    // The store's own page-token key, made with the store.
    crate::token::TokenKey::load_or_create(&store.join(super::TOKEN_KEY))?;

    let old = Manifest::read(store)?.unwrap_or(Manifest { format: FORMAT_VERSION, ..Manifest::default() });
    let inventory = Inventory::scan(data)?;
    let base = old.sources.len() as u64;
    if base + inventory.files.len() as u64 > u64::from(index::MAX_SOURCE) {
        return Err(Error::io(
            store,
            format!(
                "a store holds at most {} input files; it has {base} and this ingest reads {} more",
                index::MAX_SOURCE,
                inventory.files.len()
            ),
        ));
    }
    let accounts_bytes = read_accounts(data)?;
    // The resources first (they are small, and a bad file fails the run
    // before the records' work): a new database of this generation,
    // published with the manifest, or nothing when nothing changed.
    let resources_name = format!("resources/{id}.sqlite");
    let legacy = store.join(super::LEGACY_RESOURCES_DB);
    let previous_resources = old.resources.as_ref().map(|name| store.join(name));
    let previous = match &previous_resources {
        Some(path) => crate::resources::generation::Previous::Generation(path),
        None if legacy.exists() => crate::resources::generation::Previous::Legacy(&legacy),
        None => crate::resources::generation::Previous::Nothing,
    };
    let resources = crate::resources::generation::build(
        data,
        previous,
        &store.join(super::DELETIONS_DB),
        &store.join(&resources_name),
    )?;
    Ok(Prepared { lock, old, inventory, accounts_bytes, resources, resources_name })
}

/// Ends an ingest whose new records and index files are written and whose
/// new rows are in `rollups` (and whose resources database `prepare`
/// built): writes the rejected rows, copies accounts, writes the rollups and publishes the manifest (the one
/// commit point), then deletes files no generation needs. Nothing is
/// published when nothing changed.
pub(super) fn finish(
    store: &Path,
    id: &str,
    prepared: Prepared,
    mut manifest: Manifest,
    rollups: Rollups,
    mut report: IngestReport,
) -> Result<IngestReport> {
    let Prepared { lock, old, inventory, accounts_bytes, resources, resources_name } = prepared;
    let resources_changed = resources.as_ref().is_some_and(|changes| changes.changed);
    if resources_changed {
        manifest.resources = Some(resources_name);
    }
    report.resources = resources;
    if !report.rejects.is_empty() {
        let folder = store.join("rejected");
        std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
        let path = folder.join(format!("{id}.csv"));
        write_rejects(&path, &report.rejects)?;
        report.rejected_file = Some(path);
    }

    let mut changed = report.total().used > 0 || resources_changed;
    if let Some(bytes) = &accounts_bytes {
        let stored = match &old.accounts_csv {
            Some(name) => std::fs::read(store.join(name)).ok(),
            None => None,
        };
        if stored.as_ref() != Some(bytes) {
            let name = format!("accounts/{id}.csv");
            create_parent(&store.join(&name))?;
            super::write_synced(&store.join(&name), bytes)?;
            manifest.accounts_csv = Some(name);
            changed = true;
        }
    }
    if !changed {
        report.generation = old.generation;
        return Ok(report);
    }
    let partials: Vec<PathBuf> = rollups.spilled.values().flatten().cloned().collect();
    rollups.write(store, id, &mut manifest)?;
    let total = report.total();
    manifest.generation = old.generation + 1;
    manifest.sources.extend(inventory.files.iter().map(|f| format!("{} (ingest {id})", f.name)));
    manifest.ingests.push(super::IngestLog {
        id: id.to_owned(),
        files: inventory.files.len() as u64,
        read: total.read,
        used: total.used,
        set_aside: total.set_aside,
        duplicates: total.duplicates,
        rejected: report.rejected_file.as_ref().map(|_| format!("rejected/{id}.csv")),
    });
    for folder in ["records", "index", "rollups", "accounts", "resources"] {
        let path = store.join(folder);
        if path.exists() {
            super::sync_dir(&path)?;
        }
    }
    manifest.publish(store, id)?;
    for partial in partials {
        // Unpublished scratch files of this run; a leftover is harmless.
        let _ = std::fs::remove_file(partial);
    }
    report.removed = collect_garbage(store, &[&old, &manifest]);
    report.published = true;
    report.generation = manifest.generation;
    drop(lock);
    Ok(report)
}

/// The folders of the store that hold generation files.
const GENERATION_FOLDERS: [&str; 6] = ["records", "index", "rollups", "accounts", "rejected", "resources"];

/// Deletes every file in the generation folders that none of `keep` lists
/// (superseded files, and orphans of failed or killed ingests), and
/// leftover temporary manifests; returns how many were deleted.
///
/// Called after publishing, under the ingest lock (so no other ingest is in
/// flight), with the previous manifest among `keep`. The generations of
/// live read leases are kept as well (a running server, a `summary` still
/// reading); leases whose reader is gone are deleted. Files superseded by
/// this ingest that no lease holds go at the next publish ("one generation
/// late", for readers that cannot take a lease).
/// Best effort: a file that cannot be deleted is left for the next run; a
/// live lease that cannot be read keeps everything.
fn collect_garbage(store: &Path, keep: &[&Manifest]) -> usize {
    let Ok(leases) = super::lease::live_manifests(store) else { return 0 };
    let mut held = Vec::with_capacity(leases.manifests.len());
    for bytes in &leases.manifests {
        match serde_json::from_slice::<Manifest>(bytes) {
            Ok(manifest) => held.push(manifest),
            Err(_) => return leases.removed,
        }
    }
    let mut listed: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for manifest in keep.iter().copied().chain(&held) {
        for files in manifest.kinds.values() {
            listed.extend(files.records.iter().chain(&files.index).map(String::as_str));
        }
        listed.extend(manifest.rollups.values().flat_map(|by_grain| by_grain.values()).map(String::as_str));
        listed.extend(manifest.accounts_csv.as_deref());
        listed.extend(manifest.resources.as_deref());
        listed.extend(manifest.ingests.iter().filter_map(|i| i.rejected.as_deref()));
    }
    let mut removed = leases.removed;
    for folder in GENERATION_FOLDERS {
        let mut files = Vec::new();
        // A folder that is missing or cannot be read all through: what was
        // found is still handled.
        let _ = crate::records::files::walk(&store.join(folder), &mut files);
        for path in files {
            let Ok(relative) = path.strip_prefix(store) else { continue };
            let name: Vec<&str> = relative.iter().filter_map(|part| part.to_str()).collect();
            if !listed.contains(name.join("/").as_str()) && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(store) {
        for entry in entries.flatten() {
            let temporary =
                entry.file_name().to_str().is_some_and(|n| n.starts_with(&format!("{}.tmp-", super::MANIFEST)));
            if temporary && std::fs::remove_file(entry.path()).is_ok() {
                removed += 1;
            }
        }
    }
    // Account folders left empty (an error just means not empty).
    if let Ok(entries) = std::fs::read_dir(store.join("rollups")) {
        for entry in entries.flatten() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
    removed
}

/// `DATA/accounts.csv`, checked, when there is one.
fn read_accounts(data: &Path) -> Result<Option<Vec<u8>>> {
    let path = data.join("accounts.csv");
    if !path.exists() {
        return Ok(None);
    }
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    Accounts::parse(&bytes, "accounts.csv")?;
    Ok(Some(bytes))
}

fn create_parent(path: &Path) -> Result<()> {
    match path.parent() {
        Some(parent) => std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e)),
        None => Ok(()),
    }
}

/// The set-aside rows, in the same CSV as `report`'s `rejected.csv`.
fn write_rejects(path: &Path, rejects: &[BadRecord]) -> Result<()> {
    let bytes = crate::report::csv_out::rejected_csv(rejects)?;
    super::write_synced(path, &bytes)
}

/// The state of one ingest.
struct Run<'a> {
    store: &'a Path,
    id: &'a str,
    options: &'a IngestOptions,
    inventory: &'a Inventory,
    old: &'a Manifest,
    manifest: Manifest,
    rollups: Rollups,
    report: IngestReport,
    batches: u64,
}

impl Run<'_> {
    /// The place a source number and line name in messages.
    fn place(&self, source: u32, line: u64) -> Location {
        let base = self.old.sources.len();
        let name = match (source as usize).checked_sub(base) {
            Some(i) => self.inventory.files.get(i).map(|f| f.name.clone()),
            None => self.old.sources.get(source as usize).cloned(),
        }
        .unwrap_or_else(|| format!("source #{source}"));
        let is_row = name.split(" (ingest").next().is_some_and(|n| n.to_ascii_lowercase().ends_with(".parquet"));
        Location { file: name, line, is_row }
    }

    fn ingest_kind(&mut self, kind: Kind) -> Result<()> {
        let files: Vec<(u32, &InputFile)> = self
            .inventory
            .files
            .iter()
            .enumerate()
            .filter(|(_, f)| f.kind == kind)
            .map(|(i, f)| (i as u32, f))
            .collect();
        if files.is_empty() {
            self.report.tallies.insert(kind, Tally::default());
            return Ok(());
        }
        let base = self.old.sources.len() as u64;
        let files_of_kind = self.old.kind(kind);
        let amount = match files_of_kind.amount.as_str() {
            "" => Amount::ZERO,
            text => Amount::parse_total(text.as_bytes())
                .map_err(|e| Error::io(self.store.join("manifest.json"), format!("amount of {kind} '{text}' {e}")))?,
        };
        let stored: Vec<IndexFile> =
            files_of_kind.index.iter().map(|name| IndexFile::open(&self.store.join(name))).collect::<Result<_>>()?;
        let mut filter = Filter::new(self.options.filter_bytes);
        load_filter(&mut filter, &stored)?;
        let mut state = KindState {
            kind,
            files: files_of_kind,
            index: stored,
            filter,
            pending: Pending::default(),
            tally: Tally::default(),
            amount,
        };
        for batch in batches(&files, self.options.batch_bytes) {
            let mut chunks = self.read_batch(kind, batch)?;
            let marks = self.dedup(&mut state, &chunks)?;
            for chunk in chunks.iter_mut() {
                state.tally.read += chunk.read;
                state.tally.set_aside += chunk.rejects.len() as u64;
                self.report.rejects.append(&mut chunk.rejects);
            }
            // Each chunk folds its new rows on its own thread; the partial
            // rollups are then merged through a small id translation table.
            let base = base as u32;
            let folds: Vec<Result<ChunkFold>> =
                chunks.par_iter().zip(&marks).map(|(chunk, marks)| chunk.fold(marks, base)).collect();
            let mut views = Vec::new();
            let mut entries: Vec<IndexEntry> = Vec::new();
            for ((chunk, fold), marks) in chunks.iter().zip(folds).zip(&marks) {
                let fold = fold?;
                state.tally.duplicates += fold.duplicates;
                state.add_amount(fold.amount)?;
                self.rollups.merge(fold.rollups)?;
                if self.rollups.groups.len() >= self.options.max_rollup_groups {
                    self.rollups.spill(self.store, self.id)?;
                }
                entries.extend(fold.entries);
                views.extend(fold.kept.iter().map(|&r| chunk.view(&chunk.rows[r as usize])));
                for (row, mark) in chunk.rows.iter().zip(marks) {
                    if *mark == Mark::Candidate {
                        state.pending.push(&chunk.arena, row);
                    }
                }
            }
            self.write_new(&mut state, &views, &mut entries)?;
            drop(views);
            drop(chunks);
            if state.pending.bytes() >= self.options.pending_bytes {
                self.resolve(&mut state)?;
            }
        }
        self.resolve(&mut state)?;
        state.files.count += state.tally.used;
        state.files.amount = state.amount.to_string();
        self.manifest.kinds.insert(kind.name().to_owned(), state.files);
        self.report.tallies.insert(kind, state.tally);
        Ok(())
    }

    /// Writes new rows of `kind` as one records file and their entries as
    /// one index file (nothing when there are none).
    fn write_new(&mut self, state: &mut KindState, views: &[RecordView<'_>], entries: &mut [IndexEntry]) -> Result<()> {
        state.tally.used += views.len() as u64;
        if views.is_empty() {
            return Ok(());
        }
        let kind = state.kind;
        let name = format!("records/{}/{}-{:05}.parquet", kind.name(), self.id, self.batches);
        let path = self.store.join(&name);
        create_parent(&path)?;
        let index_name = format!("index/{}/{}-{:05}.idx", kind.name(), self.id, self.batches);
        let index_path = self.store.join(&index_name);
        create_parent(&index_path)?;
        let (records, index) =
            rayon::join(|| parquet_io::write_records(&path, kind, views), || index::write_index(&index_path, entries));
        records?;
        index?;
        state.files.records.push(name);
        state.files.index.push(index_name);
        state.index.push(IndexFile::open(&index_path)?);
        self.batches += 1;
        Ok(())
    }

    /// Checks every row of a batch in file order: against the rows of the
    /// batch exactly, and against every id stored or seen earlier through
    /// the filter. Rows the filter may have seen are marked candidates (so
    /// are the later rows of the batch with their id), to be checked exactly
    /// by [`Run::resolve`].
    fn dedup(&self, state: &mut KindState, chunks: &[Chunk]) -> Result<Vec<Vec<Mark>>> {
        let mut parts: Vec<Vec<(Seen, u32, u32)>> = (0..PARTITIONS).map(|_| Vec::new()).collect();
        for (c, chunk) in chunks.iter().enumerate() {
            for (r, row) in chunk.rows.iter().enumerate() {
                parts[row.seen.partition()].push((row.seen, c as u32, r as u32));
            }
        }
        let base = self.old.sources.len() as u32;
        type Found = (Vec<(u32, u32, Mark)>, Option<Clash>);
        let found: Vec<Found> = state
            .filter
            .parts_mut()
            .zip(parts)
            .map(|(mut filter, mut entries)| {
                entries.sort_unstable_by_key(|(s, _, _)| (s.file, s.line));
                let mut first: FxHashMap<(u64, u64), (u64, u64, bool)> =
                    FxHashMap::with_capacity_and_hasher(entries.len(), Default::default());
                let mut marks = Vec::new();
                let mut conflict = None;
                for (seen, c, r) in entries {
                    let place = (base + seen.file, seen.line);
                    match first.entry(seen.id) {
                        Entry::Vacant(slot) => {
                            let candidate = filter.check_and_insert(seen.id);
                            slot.insert((seen.content, index::pack(place), candidate));
                            if candidate {
                                marks.push((c, r, Mark::Candidate));
                            }
                        }
                        Entry::Occupied(slot) => match *slot.get() {
                            (_, _, true) => marks.push((c, r, Mark::Candidate)),
                            (content, _, false) if content == seen.content => marks.push((c, r, Mark::Duplicate)),
                            (_, earlier, false) => {
                                conflict = Some((index::unpack(earlier), place, c, r));
                                break;
                            }
                        },
                    }
                }
                (marks, conflict)
            })
            .collect();
        let mut out: Vec<Vec<Mark>> = chunks.iter().map(|chunk| vec![Mark::New; chunk.rows.len()]).collect();
        let mut first_conflict: Option<Clash> = None;
        for (marks, conflict) in found {
            for (c, r, mark) in marks {
                out[c as usize][r as usize] = mark;
            }
            if let Some(c) = conflict {
                if first_conflict.is_none_or(|f| c.1 < f.1) {
                    first_conflict = Some(c);
                }
            }
        }
        if let Some((first, second, c, r)) = first_conflict {
            let chunk = &chunks[c as usize];
            let record_id = chunk.view(&chunk.rows[r as usize]).record_id.to_owned();
            return Err(self.conflict(state.kind, record_id, first, second));
        }
        Ok(out)
    }

    fn conflict(&self, kind: Kind, record_id: String, first: (u32, u64), second: (u32, u64)) -> Error {
        Error::Conflict {
            kind: kind.name(),
            record_id,
            first: self.place(first.0, first.1),
            second: self.place(second.0, second.1),
        }
    }

    /// Checks the pending candidates exactly, partition by partition: each
    /// partition's candidates are hashed, and that partition of every index
    /// file (stored, and written by this ingest so far) is streamed past
    /// them. The new ones are then stored like any batch's new rows.
    fn resolve(&mut self, state: &mut KindState) -> Result<()> {
        let pending = std::mem::take(&mut state.pending);
        if pending.rows.is_empty() {
            return Ok(());
        }
        let mut parts: Vec<Vec<u32>> = (0..PARTITIONS).map(|_| Vec::new()).collect();
        for (i, row) in pending.rows.iter().enumerate() {
            parts[row.seen.partition()].push(i as u32);
        }
        let base = self.old.sources.len() as u32;
        let index_files = &state.index;
        let rows = &pending.rows;
        type Found = (Vec<u32>, u64, Option<PendingClash>);
        let found: Vec<Result<Found>> = parts
            .into_par_iter()
            .enumerate()
            .map(|(p, mine)| {
                if mine.is_empty() {
                    return Ok((Vec::new(), 0, None));
                }
                // Candidates come in file order; an index holds one entry per id.
                let mut known: FxHashMap<(u64, u64), Option<(u64, u64)>> =
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
                    let place = (base + seen.file, seen.line);
                    let Some(slot) = known.get_mut(&seen.id) else { continue };
                    match *slot {
                        None => {
                            *slot = Some((seen.content, index::pack(place)));
                            new.push(i);
                        }
                        Some((content, _)) if content == seen.content => duplicates += 1,
                        Some((_, earlier)) => return Ok((new, duplicates, Some((index::unpack(earlier), place, i)))),
                    }
                }
                Ok((new, duplicates, None))
            })
            .collect();
        let mut new: Vec<u32> = Vec::new();
        let mut first_conflict: Option<PendingClash> = None;
        for result in found {
            let (part_new, duplicates, conflict) = result?;
            new.extend(part_new);
            state.tally.duplicates += duplicates;
            if let Some(c) = conflict {
                if first_conflict.is_none_or(|f| c.1 < f.1) {
                    first_conflict = Some(c);
                }
            }
        }
        if let Some((first, second, i)) = first_conflict {
            let record_id = pending.view(&pending.rows[i as usize], "").record_id.to_owned();
            return Err(self.conflict(state.kind, record_id, first, second));
        }
        new.sort_unstable();
        let names: Vec<&str> = self.inventory.files.iter().map(|f| f.name.as_str()).collect();
        let mut views = Vec::with_capacity(new.len());
        let mut entries = Vec::with_capacity(new.len());
        let mut amount = 0i128;
        for &i in &new {
            let row = &pending.rows[i as usize];
            let view = pending.view(row, names.get(row.seen.file as usize).copied().unwrap_or(""));
            self.rollups.add(&view)?;
            amount += view.amount as i128;
            entries.push(row.entry(base));
            views.push(view);
        }
        state.add_amount(amount)?;
        if self.rollups.groups.len() >= self.options.max_rollup_groups {
            self.rollups.spill(self.store, self.id)?;
        }
        self.write_new(state, &views, &mut entries)
    }

    /// Reads the files of one batch in parallel; the first bad row (in file
    /// order) is an error unless rows are set aside.
    fn read_batch(&self, kind: Kind, batch: &[(u32, &InputFile)]) -> Result<Vec<Chunk>> {
        let on_bad_row = self.options.on_bad_row;
        let read: Vec<Result<Vec<Chunk>>> =
            batch.par_iter().map(|&(index, file)| check_file(kind, index, file, on_bad_row)).collect();
        let mut chunks = Vec::new();
        for file_chunks in read {
            chunks.extend(file_chunks?);
        }
        Ok(chunks)
    }
}

/// A conflict found: the stored or earlier place, the later place, and the
/// later row's (chunk, row).
type Clash = ((u32, u64), (u32, u64), u32, u32);

/// A conflict found among the candidates: the earlier place, the later
/// place, and the later row's position in [`Pending::rows`].
type PendingClash = ((u32, u64), (u32, u64), u32);

/// Splits files into batches of at most `limit` input bytes (at least one
/// file each).
pub(super) fn batches<'f, 'a>(files: &'f [(u32, &'a InputFile)], limit: u64) -> Vec<&'f [(u32, &'a InputFile)]> {
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, (_, file)) in files.iter().enumerate() {
        if i > start && bytes + file.size > limit {
            out.push(&files[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += file.size;
    }
    if start < files.len() {
        out.push(&files[start..]);
    }
    out
}

/// What the batch check decided about a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    /// The first of its id anywhere: stored now.
    New,
    /// Repeats an earlier identical row of the batch: skipped.
    Duplicate,
    /// Its id may be stored or seen in an earlier batch: checked exactly
    /// later ([`Run::resolve`]).
    Candidate,
}

/// The state of one kind during an ingest.
struct KindState {
    kind: Kind,
    /// The kind's files: the stored ones, then this ingest's.
    files: KindFiles,
    /// Every index file of the kind, stored and new, opened.
    index: Vec<IndexFile>,
    filter: Filter,
    pending: Pending,
    tally: Tally,
    /// Sum of the amounts stored, old and new.
    amount: Amount,
}

impl KindState {
    fn add_amount(&mut self, nanos: i128) -> Result<()> {
        self.amount = self
            .amount
            .checked_add(Amount::from_nanos(nanos))
            .ok_or_else(|| Error::Internal(format!("sum overflow of {} amounts", self.kind)))?;
        Ok(())
    }
}

/// Adds every stored id to the filter, partition by partition in parallel
/// (one partition of every index file at a time).
fn load_filter(filter: &mut Filter, stored: &[IndexFile]) -> Result<()> {
    let loaded: Vec<Result<()>> = filter
        .parts_mut()
        .enumerate()
        .map(|(p, mut part)| {
            for file in stored {
                file.for_each_in(p, |entry| {
                    part.check_and_insert(entry.id);
                })?;
            }
            Ok(())
        })
        .collect();
    loaded.into_iter().collect()
}

/// Candidate rows waiting for their exact check, their text in one arena.
#[derive(Default)]
struct Pending {
    arena: String,
    rows: Vec<Row>,
}

impl Pending {
    /// Copies `row` (its text in `arena`) in.
    fn push(&mut self, arena: &str, row: &Row) {
        let mut keep = |(start, length): Span| -> Span {
            let text = arena.get(start as usize..(start + length) as usize).unwrap_or("");
            let at = self.arena.len() as u32;
            self.arena.push_str(text);
            (at, length)
        };
        let row = Row {
            record_id: keep(row.record_id),
            auth_id: keep(row.auth_id),
            subaccount: keep(row.subaccount),
            type_: keep(row.type_),
            code: keep(row.code),
            ..*row
        };
        self.rows.push(row);
    }

    /// Memory held, about.
    fn bytes(&self) -> u64 {
        (self.arena.len() + self.rows.len() * std::mem::size_of::<Row>()) as u64
    }

    fn view<'a>(&'a self, row: &Row, source_file: &'a str) -> RecordView<'a> {
        row.view(&self.arena, source_file)
    }
}

/// A string in a chunk's arena: offset and length.
type Span = (u32, u32);

/// One valid row, its text in the chunk's arena.
#[derive(Clone, Copy, Debug)]
struct Row {
    seen: Seen,
    record_id: Span,
    auth_id: Span,
    subaccount: Span,
    type_: Span,
    code: Span,
    secs: i64,
    nanos: u32,
    product: Product,
    direction: Option<Direction>,
    country: Option<Country>,
    units: u64,
    duration: i64,
    amount: i64,
    surcharge: i64,
}

impl Row {
    /// The row, its text in `arena`.
    fn view<'a>(&self, arena: &'a str, source_file: &'a str) -> RecordView<'a> {
        let text = |(start, length): Span| arena.get(start as usize..(start + length) as usize).unwrap_or("");
        RecordView {
            record_id: text(self.record_id),
            auth_id: text(self.auth_id),
            subaccount: text(self.subaccount),
            secs: self.secs,
            nanos: self.nanos,
            product: self.product,
            type_: text(self.type_),
            direction: self.direction,
            country: self.country,
            units: self.units,
            duration: self.duration,
            amount: self.amount,
            surcharge: self.surcharge,
            code: text(self.code),
            source_file,
            source_line: self.seen.line,
        }
    }

    /// The row's index entry; `base` is the number of sources stored before
    /// this ingest.
    fn entry(&self, base: u32) -> IndexEntry {
        IndexEntry {
            id: self.seen.id,
            content: self.seen.content,
            place: index::pack((base + self.seen.file, self.seen.line)),
        }
    }
}

/// The rows of one file or CSV chunk: a [`RowSink`].
pub(super) struct Chunk {
    kind: Kind,
    file: u32,
    file_name: String,
    is_parquet: bool,
    on_bad_row: OnBadRow,
    arena: String,
    rows: Vec<Row>,
    read: u64,
    rejects: Vec<BadRecord>,
    error: Option<BadRecord>,
}

impl Chunk {
    fn new(kind: Kind, file: u32, input: &InputFile, on_bad_row: OnBadRow) -> Chunk {
        Chunk {
            kind,
            file,
            file_name: input.name.clone(),
            is_parquet: input.format == Format::Parquet,
            on_bad_row,
            arena: String::new(),
            rows: Vec::new(),
            read: 0,
            rejects: Vec::new(),
            error: None,
        }
    }

    fn keep(&mut self, text: &str) -> Option<Span> {
        let start = u32::try_from(self.arena.len()).ok()?;
        let length = u32::try_from(text.len()).ok()?;
        start.checked_add(length)?;
        self.arena.push_str(text);
        Some((start, length))
    }

    fn view(&self, row: &Row) -> RecordView<'_> {
        row.view(&self.arena, &self.file_name)
    }

    /// The new rows of this chunk (marked [`Mark::New`]), folded.
    fn fold(&self, marks: &[Mark], base: u32) -> Result<ChunkFold> {
        let mut fold = ChunkFold::default();
        for (r, (row, mark)) in self.rows.iter().zip(marks).enumerate() {
            match mark {
                Mark::New => {}
                Mark::Duplicate => {
                    fold.duplicates += 1;
                    continue;
                }
                Mark::Candidate => continue,
            }
            let view = self.view(row);
            fold.rollups.add(&view)?;
            fold.amount += view.amount as i128;
            fold.entries.push(row.entry(base));
            fold.kept.push(r as u32);
        }
        Ok(fold)
    }

    fn reject(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        let location = Location { file: self.file_name.clone(), line, is_row: self.is_parquet };
        let bad = BadRecord { location, column: column.to_owned(), value, reason };
        match self.on_bad_row {
            OnBadRow::SetAside => {
                self.rejects.push(bad);
                true
            }
            OnBadRow::Fail => {
                self.error = Some(bad);
                false
            }
        }
    }
}

impl RowSink for Chunk {
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        self.read += 1;
        let record = match records::parse_record(self.kind, fields) {
            Ok(record) => record,
            Err(e) => {
                let column = self.kind.columns()[e.column];
                return self.reject(line, column, e.value, e.reason);
            }
        };
        let spans = (|| {
            Some((
                self.keep(record.record_id)?,
                self.keep(record.auth_id)?,
                self.keep(record.subaccount)?,
                self.keep(record.type_)?,
                self.keep(record.code)?,
            ))
        })();
        let Some((record_id, auth_id, subaccount, type_, code)) = spans else {
            let reason = "does not fit the ingest's 4 GiB text buffer for one file; split the file".to_owned();
            return self.reject(line, "-", String::new(), reason);
        };
        self.rows.push(Row {
            seen: Seen::new(record.record_id, record.content_hash(), self.file, line),
            record_id,
            auth_id,
            subaccount,
            type_,
            code,
            secs: record.timestamp.secs,
            nanos: record.timestamp.nanos,
            product: record.product,
            direction: record.direction,
            country: record.country,
            units: record.units,
            duration: record.duration,
            amount: record.amount,
            surcharge: record.surcharge,
        });
        true
    }

    fn malformed(&mut self, line: u64, value: String, reason: String) -> bool {
        self.read += 1;
        self.reject(line, "-", value, reason)
    }
}

/// Reads and checks one input file on its own, as [`Run::read_batch`] reads
/// each file of a batch: its chunks in line order. With
/// [`OnBadRow::Fail`], the first bad row is the `Err`.
pub(super) fn check_file(kind: Kind, source: u32, file: &InputFile, on_bad_row: OnBadRow) -> Result<Vec<Chunk>> {
    let new_chunk = || Chunk::new(kind, source, file, on_bad_row);
    let chunks = match file.format {
        Format::Parquet => {
            let mut chunk = new_chunk();
            records::parquet::read(file, kind, &mut chunk)?;
            vec![chunk]
        }
        _ => {
            let bytes = records::csv::load(file)?;
            records::csv::read(file, kind, &bytes, new_chunk)?
        }
    };
    let mut out = Vec::with_capacity(chunks.len());
    for mut chunk in chunks {
        if let Some(error) = chunk.error.take() {
            return Err(error.into());
        }
        out.push(chunk);
    }
    Ok(out)
}

impl Chunk {
    /// Rows read (valid or not).
    pub(super) fn read(&self) -> u64 {
        self.read
    }

    /// Rows set aside, in line order.
    pub(super) fn rejects(&self) -> &[BadRecord] {
        &self.rejects
    }

    /// Every valid row: its normalized record and its dedup entry, in line
    /// order.
    pub(super) fn valid_rows(&self) -> impl Iterator<Item = (RecordView<'_>, Seen)> + '_ {
        self.rows.iter().map(|row| (self.view(row), row.seen))
    }
}

/// The new rows of one chunk, folded.
#[derive(Default)]
struct ChunkFold {
    rollups: Rollups,
    /// Sum of amounts; a chunk holds far fewer than 2^64 rows of at most
    /// i64::MAX each, so this cannot overflow.
    amount: i128,
    entries: Vec<IndexEntry>,
    kept: Vec<u32>,
    duplicates: u64,
}

/// Rollup groups of one account.
type Groups<'a> = &'a [(RollupKey, Totals)];

/// A rollup key in interned ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct RollupKey {
    account: u32,
    subaccount: u32,
    slot: i64,
    product: Product,
    type_: u32,
    country: Option<Country>,
    direction: Option<Direction>,
    code: u32,
}

/// The rollups of this ingest's new rows.
#[derive(Default)]
pub(super) struct Rollups {
    strings: Interner,
    groups: FxHashMap<RollupKey, Totals>,
    /// Partial files written by [`Rollups::spill`], by account.
    spilled: BTreeMap<String, Vec<PathBuf>>,
    spills: u32,
}

impl Rollups {
    /// Adds the groups of `other` (interned on its own).
    fn merge(&mut self, other: Rollups) -> Result<()> {
        let ids: Vec<u32> = other.strings.iter().map(|text| self.strings.intern(text)).collect();
        let id = |local: u32| ids[local as usize];
        for (key, totals) in other.groups {
            let key = RollupKey {
                account: id(key.account),
                subaccount: id(key.subaccount),
                type_: id(key.type_),
                code: id(key.code),
                ..key
            };
            let entry = self.groups.entry(key).or_default();
            *entry = entry.checked_add(&totals).ok_or_else(|| Error::Internal("rollup sum overflow".to_owned()))?;
        }
        Ok(())
    }

    fn add(&mut self, row: &RecordView<'_>) -> Result<()> {
        let add = Totals {
            records: 1,
            units: row.units as u128,
            duration: row.duration as i128,
            amount: row.amount as i128,
            surcharge: row.surcharge as i128,
        };
        self.add_totals(row, &add)
    }

    /// Adds `add` to the group of `row` (its slot is the 15-minute slot of
    /// `row.secs`): a row of rollups summed elsewhere (the Spark engine).
    pub(super) fn add_totals(&mut self, row: &RecordView<'_>, add: &Totals) -> Result<()> {
        let key = RollupKey {
            account: self.strings.intern(row.auth_id),
            subaccount: self.strings.intern(row.subaccount),
            slot: super::slot_of(row.secs),
            product: row.product,
            type_: self.strings.intern(row.type_),
            country: row.country,
            direction: row.direction,
            code: self.strings.intern(row.code),
        };
        let totals = self.groups.entry(key).or_default();
        *totals = totals.checked_add(add).ok_or_else(|| Error::Internal("rollup sum overflow".to_owned()))?;
        Ok(())
    }

    /// Merges the new groups into each touched account's rollups and writes
    /// one new file per touched account and grain (accounts in parallel).
    fn write(mut self, store: &Path, id: &str, manifest: &mut Manifest) -> Result<()> {
        let groups = self.take_by_account();
        let spilled = std::mem::take(&mut self.spilled);
        let mut accounts: BTreeMap<&str, Groups<'_>> = BTreeMap::new();
        for slice in &groups {
            accounts.insert(self.strings.get(slice[0].0.account), slice);
        }
        for account in spilled.keys() {
            accounts.entry(account).or_insert(&[]);
        }
        let n_accounts = accounts.len();
        // Plain threads, one account each at a time: inside a rayon task, a
        // wait on polars' own pool (every file write) runs other queued
        // accounts on the same thread, so that every account's merge could
        // be in memory at once.
        let jobs = std::sync::Mutex::new(accounts.into_iter());
        let done = std::sync::Mutex::new(Vec::new());
        let previous = &manifest.rollups;
        let (this, spilled, finished) = (&self, &spilled, &done);
        std::thread::scope(|scope| {
            for _ in 0..rayon::current_num_threads().max(1) {
                // The lock is released inside `next`, before the work.
                let next = || jobs.lock().ok().and_then(|mut jobs| jobs.next());
                scope.spawn(move || {
                    while let Some((account, groups)) = next() {
                        let result = this.publish_account(store, id, previous, spilled, account, groups);
                        if let Ok(mut done) = finished.lock() {
                            done.push(result);
                        }
                    }
                });
            }
        });
        let written: Vec<Result<Vec<(String, i64, String)>>> = done.into_inner().unwrap_or_default();
        if written.len() != n_accounts {
            return Err(Error::Internal("a rollup merge thread failed".to_owned()));
        }
        for result in written {
            for (account, grain, name) in result? {
                manifest.rollups.entry(account).or_default().insert(grain, name);
            }
        }
        Ok(())
    }

    /// Merges and writes the rollup files of one account; their names, by
    /// grain.
    fn publish_account(
        &self,
        store: &Path,
        id: &str,
        previous: &BTreeMap<String, BTreeMap<i64, String>>,
        spilled: &BTreeMap<String, Vec<PathBuf>>,
        account: &str,
        groups: Groups<'_>,
    ) -> Result<Vec<(String, i64, String)>> {
        let mut inputs: Vec<PathBuf> = spilled.get(account).cloned().unwrap_or_default();
        // The finest grain holds everything: the coarser files are derived
        // from it, not read.
        let finest = super::GRAINS[0];
        if let Some(file) = previous.get(account).and_then(|files| files.get(&finest)) {
            inputs.push(store.join(file));
        }
        let names: Vec<(i64, String)> = super::GRAINS
            .iter()
            .map(|grain| (*grain, format!("rollups/{}/{id}-{grain}s.parquet", account_folder(account))))
            .collect();
        let paths: Vec<PathBuf> = names.iter().map(|(_, name)| store.join(name)).collect();
        create_parent(&paths[0])?;
        self.merge_account(account, groups, &inputs, &paths)?;
        Ok(names.into_iter().map(|(grain, name)| (account.to_owned(), grain, name)).collect())
    }

    /// The in-memory groups, moved out and cut by account, each account's
    /// sorted by slot.
    fn take_by_account(&mut self) -> Vec<Vec<(RollupKey, Totals)>> {
        let mut groups: Vec<(RollupKey, Totals)> = std::mem::take(&mut self.groups).into_iter().collect();
        groups.sort_unstable_by_key(|(key, _)| (key.account, key.slot));
        groups.chunk_by(|a, b| a.0.account == b.0.account).map(<[_]>::to_vec).collect()
    }

    /// Writes the in-memory groups to one partial file per account (finest
    /// grain, sorted by slot, in this run's string ids: not published, read
    /// back only by [`Rollups::write`] of the same run) and forgets them, so that rollup memory stays
    /// bounded by [`IngestOptions::max_rollup_groups`].
    fn spill(&mut self, store: &Path, id: &str) -> Result<()> {
        let groups = self.take_by_account();
        let n = self.spills;
        self.spills += 1;
        let written: Vec<Result<(String, PathBuf)>> = groups
            .into_par_iter()
            .map(|mut rows| {
                let account = self.strings.get(rows[0].0.account);
                let path = store.join(format!("rollups/{}/{id}-part-{n:05}.bin", account_folder(account)));
                create_parent(&path)?;
                rows.sort_unstable_by_key(|(key, _)| key.slot);
                write_partial(&path, &rows)?;
                Ok((account.to_owned(), path))
            })
            .collect();
        for result in written {
            let (account, path) = result?;
            self.spilled.entry(account).or_default().push(path);
        }
        Ok(())
    }

    /// Writes the rollups of `account` at every grain to `paths` (one per
    /// [`super::GRAINS`]): `groups` (sorted by slot) summed with the rows of
    /// the `inputs` files (finest grain, sorted by slot).
    ///
    /// One day at a time: every input is read a slice of rows at a time, a
    /// day's rows are summed at the finest grain, then coarsened grain by
    /// grain from the finer rows; so memory holds one day of the account,
    /// not all of it.
    fn merge_account(
        &self,
        account: &str,
        groups: &[(RollupKey, Totals)],
        inputs: &[PathBuf],
        paths: &[PathBuf],
    ) -> Result<()> {
        let overflow = || Error::Internal(format!("rollup sum overflow for account {account}"));
        let mut strings = AccountStrings::new(&self.strings);
        let account_id = strings.id(account);
        let mut cursors: Vec<Cursor> = vec![Cursor::memory(groups)];
        // Partial files share a fixed budget of rows in memory, however
        // many spills there were.
        let row_bytes = std::mem::size_of::<(RollupKey, Totals)>();
        let slice = (MERGE_BUDGET_BYTES / row_bytes / inputs.len().max(1)).clamp(1024, parquet_io::ROW_GROUP_ROWS);
        for input in inputs {
            cursors.push(Cursor::file(input, slice)?);
        }
        let mut outputs: Vec<Output> = paths.iter().map(|p| Output::create(p)).collect::<Result<_>>()?;
        let day = *super::GRAINS.last().unwrap_or(&86_400);
        loop {
            let mut first: Option<i64> = None;
            for cursor in cursors.iter_mut() {
                if let Some(slot) = cursor.peek_slot(&mut strings, account_id)? {
                    first = Some(first.map_or(slot, |f| f.min(slot)));
                }
            }
            let Some(first) = first else { break };
            let end = first - first.rem_euclid(day) + day;
            let mut window: FxHashMap<RollupKey, Totals> = FxHashMap::default();
            for cursor in cursors.iter_mut() {
                while let Some((key, totals)) = cursor.next_before(end, &mut strings, account_id)? {
                    let entry = window.entry(key).or_default();
                    *entry = entry.checked_add(&totals).ok_or_else(overflow)?;
                }
            }
            let mut rows: Vec<(RollupKey, Totals)> = window.into_iter().collect();
            for (g, grain) in super::GRAINS.iter().enumerate() {
                if g > 0 {
                    let mut coarser: FxHashMap<RollupKey, Totals> = FxHashMap::default();
                    for (key, totals) in &rows {
                        let key = RollupKey { slot: key.slot - key.slot.rem_euclid(*grain), ..*key };
                        let entry = coarser.entry(key).or_default();
                        *entry = entry.checked_add(totals).ok_or_else(overflow)?;
                    }
                    rows = coarser.into_iter().collect();
                }
                sort_rows(&mut rows, &strings);
                outputs[g].push(&rows, account, &strings)?;
            }
        }
        for output in outputs {
            output.finish(account, &strings)?;
        }
        Ok(())
    }
}

/// Sorts rollup rows like a rollup file: slot first (so row-group statistics
/// can skip by time), then the report's order of the other fields.
fn sort_rows(rows: &mut [(RollupKey, Totals)], strings: &AccountStrings<'_>) {
    let ranks = strings.ranks();
    let rank = |id: u32| ranks.get(id as usize).copied().unwrap_or(u32::MAX);
    rows.sort_by_cached_key(|(k, _)| {
        (k.slot, k.product, rank(k.type_), rank(k.subaccount), k.country, k.direction, rank(k.code))
    });
}

/// The shared interner of a run, plus the strings of one account's older
/// files that this ingest has not seen (ids after the shared ones).
struct AccountStrings<'a> {
    shared: &'a Interner,
    extra: Vec<Box<str>>,
    extra_ids: FxHashMap<Box<str>, u32>,
    ranks: std::cell::RefCell<Vec<u32>>,
}

impl<'a> AccountStrings<'a> {
    fn new(shared: &'a Interner) -> AccountStrings<'a> {
        AccountStrings { shared, extra: Vec::new(), extra_ids: FxHashMap::default(), ranks: Default::default() }
    }

    fn id(&mut self, text: &str) -> u32 {
        if let Some(id) = self.shared.lookup(text).or_else(|| self.extra_ids.get(text).copied()) {
            return id;
        }
        let id = (self.shared.len() + self.extra.len()) as u32;
        self.extra.push(text.into());
        self.extra_ids.insert(text.into(), id);
        id
    }

    fn text(&self, id: u32) -> &str {
        match (id as usize).checked_sub(self.shared.len()) {
            Some(i) => self.extra.get(i).map_or("", |s| s),
            None => self.shared.get(id),
        }
    }

    /// The rank of every string id in byte order of the strings (sorted
    /// again only when strings were added since the last call).
    fn ranks(&self) -> std::cell::Ref<'_, Vec<u32>> {
        let n = self.shared.len() + self.extra.len();
        if self.ranks.borrow().len() != n {
            let mut order: Vec<u32> = (0..n as u32).collect();
            order.sort_unstable_by(|a, b| self.text(*a).cmp(self.text(*b)));
            let mut ranks = vec![0u32; n];
            for (rank, id) in order.into_iter().enumerate() {
                ranks[id as usize] = rank as u32;
            }
            *self.ranks.borrow_mut() = ranks;
        }
        self.ranks.borrow()
    }

    /// Rows of `account` as the writer takes them.
    fn refs<'s>(&'s self, account: &'s str, rows: &[(RollupKey, Totals)]) -> Vec<RollupRef<'s>> {
        rows.iter()
            .map(|(key, totals)| RollupRef {
                auth_id: account,
                subaccount: self.text(key.subaccount),
                slot: key.slot,
                product: key.product,
                type_: self.text(key.type_),
                country: key.country,
                direction: key.direction,
                code: self.text(key.code),
                totals: *totals,
            })
            .collect()
    }
}

/// One input of an account's merge: the in-memory groups, or a rollup file
/// read a slice of rows at a time.
struct Cursor<'g> {
    rows: std::borrow::Cow<'g, [(RollupKey, Totals)]>,
    at: usize,
    /// The file, its row count and the next row to read.
    file: Option<(PathBuf, usize, usize)>,
    /// Or a partial file of this run, and the rows left in it.
    partial: Option<(PathBuf, std::io::BufReader<std::fs::File>, u64)>,
    /// Rows read at a time from a partial file.
    slice: usize,
}

impl<'g> Cursor<'g> {
    fn memory(rows: &'g [(RollupKey, Totals)]) -> Cursor<'g> {
        Cursor { rows: std::borrow::Cow::Borrowed(rows), at: 0, file: None, partial: None, slice: 0 }
    }

    /// A published rollup file, or a partial file of this run (`.bin`).
    fn file(path: &Path, slice: usize) -> Result<Cursor<'g>> {
        let rows = std::borrow::Cow::Owned(Vec::new());
        if path.extension().is_some_and(|e| e == "bin") {
            let file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
            let size = file.metadata().map_err(|e| Error::io(path, e))?.len();
            let reader = std::io::BufReader::with_capacity(64 << 10, file);
            let partial = Some((path.to_owned(), reader, size / PARTIAL_BYTES as u64));
            return Ok(Cursor { rows, at: 0, file: None, partial, slice });
        }
        let n_rows = parquet_io::count_rows(path)?;
        Ok(Cursor { rows, at: 0, file: Some((path.to_owned(), n_rows, 0)), partial: None, slice })
    }

    /// The slot of the next row, reading the next slice when needed.
    fn peek_slot(&mut self, strings: &mut AccountStrings<'_>, account: u32) -> Result<Option<i64>> {
        if self.at == self.rows.len() {
            self.load(strings, account)?;
        }
        Ok(self.rows.get(self.at).map(|(key, _)| key.slot))
    }

    /// The next row if its slot is before `end`.
    fn next_before(
        &mut self,
        end: i64,
        strings: &mut AccountStrings<'_>,
        account: u32,
    ) -> Result<Option<(RollupKey, Totals)>> {
        match self.peek_slot(strings, account)? {
            Some(slot) if slot < end => {
                self.at += 1;
                Ok(Some(self.rows[self.at - 1]))
            }
            _ => Ok(None),
        }
    }

    fn load(&mut self, strings: &mut AccountStrings<'_>, account: u32) -> Result<()> {
        if let Some((path, reader, left)) = &mut self.partial {
            let n = (*left).min(self.slice.max(1) as u64);
            let mut rows = Vec::with_capacity(n as usize);
            let mut bytes = [0u8; PARTIAL_BYTES];
            for _ in 0..n {
                std::io::Read::read_exact(reader, &mut bytes).map_err(|e| Error::io(&*path, e))?;
                rows.push(
                    decode_partial(&bytes, account).ok_or_else(|| Error::io(&*path, "not a partial rollup file"))?,
                );
            }
            *left -= n;
            self.rows = std::borrow::Cow::Owned(rows);
            self.at = 0;
            return Ok(());
        }
        let Some((path, n_rows, next)) = &mut self.file else { return Ok(()) };
        if *next >= *n_rows {
            return Ok(());
        }
        let frame = rollup::read_rollup_slice(path, *next, parquet_io::ROW_GROUP_ROWS)?;
        *next += frame.height().max(1);
        let mut rows = Vec::with_capacity(frame.height());
        let mut last = i64::MIN;
        let mut sorted = true;
        rollup::for_each_rollup_in(path, &frame, |row| {
            let key = RollupKey {
                account,
                subaccount: strings.id(row.subaccount),
                slot: row.slot,
                product: row.product,
                type_: strings.id(row.type_),
                country: row.country,
                direction: row.direction,
                code: strings.id(row.code),
            };
            sorted &= row.slot >= last;
            last = row.slot;
            rows.push((key, row.totals));
            Ok(())
        })?;
        if !sorted || rows.first().zip(self.rows.last()).is_some_and(|(a, b)| a.0.slot < b.0.slot) {
            return Err(Error::io(&*path, "rollup rows are not sorted by slot"));
        }
        self.rows = std::borrow::Cow::Owned(rows);
        self.at = 0;
        Ok(())
    }
}

/// Memory for the slices of an account's partial files during its merge.
const MERGE_BUDGET_BYTES: usize = 128 << 20;

/// Bytes of one row of a partial file.
const PARTIAL_BYTES: usize = 96;

/// Writes rollup rows of one account to a partial file: fixed-size rows in
/// this run's string ids (little-endian: subaccount, type, code as u32;
/// product, direction, country as bytes; slot; records; units; duration,
/// amount, surcharge).
fn write_partial(path: &Path, rows: &[(RollupKey, Totals)]) -> Result<()> {
    use std::io::Write;
    let file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    for (key, totals) in rows {
        let mut b = [0u8; PARTIAL_BYTES];
        b[0..4].copy_from_slice(&key.subaccount.to_le_bytes());
        b[4..8].copy_from_slice(&key.type_.to_le_bytes());
        b[8..12].copy_from_slice(&key.code.to_le_bytes());
        b[12] = Product::ALL.iter().position(|p| *p == key.product).unwrap_or(0) as u8;
        b[13] = match key.direction {
            None => 0,
            Some(Direction::Inbound) => 1,
            Some(Direction::Outbound) => 2,
        };
        if let Some(country) = key.country {
            b[14..16].copy_from_slice(&country.as_str().as_bytes()[..2]);
        }
        b[16..24].copy_from_slice(&key.slot.to_le_bytes());
        b[24..32].copy_from_slice(&totals.records.to_le_bytes());
        b[32..48].copy_from_slice(&totals.units.to_le_bytes());
        b[48..64].copy_from_slice(&totals.duration.to_le_bytes());
        b[64..80].copy_from_slice(&totals.amount.to_le_bytes());
        b[80..96].copy_from_slice(&totals.surcharge.to_le_bytes());
        out.write_all(&b).map_err(|e| Error::io(path, e))?;
    }
    out.flush().map_err(|e| Error::io(path, e))
}

/// One row of a partial file (see [`write_partial`]).
fn decode_partial(b: &[u8; PARTIAL_BYTES], account: u32) -> Option<(RollupKey, Totals)> {
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let word = |i: usize| -> [u8; 8] { b[i..i + 8].try_into().unwrap_or([0; 8]) };
    let wide = |i: usize| -> [u8; 16] { b[i..i + 16].try_into().unwrap_or([0; 16]) };
    let key = RollupKey {
        account,
        subaccount: u32_at(0),
        type_: u32_at(4),
        code: u32_at(8),
        product: *Product::ALL.get(b[12] as usize)?,
        direction: match b[13] {
            0 => None,
            1 => Some(Direction::Inbound),
            _ => Some(Direction::Outbound),
        },
        country: if b[14] == 0 { None } else { Some(Country::parse(&b[14..16])?) },
        slot: i64::from_le_bytes(word(16)),
    };
    let totals = Totals {
        records: u64::from_le_bytes(word(24)),
        units: u128::from_le_bytes(wide(32)),
        duration: i128::from_le_bytes(wide(48)),
        amount: i128::from_le_bytes(wide(64)),
        surcharge: i128::from_le_bytes(wide(80)),
    };
    Some((key, totals))
}

/// The rows of one grain, buffered to whole row groups before writing.
struct Output {
    writer: rollup::RollupWriter,
    buffer: Vec<(RollupKey, Totals)>,
}

impl Output {
    fn create(path: &Path) -> Result<Output> {
        Ok(Output { writer: rollup::RollupWriter::create(path)?, buffer: Vec::new() })
    }

    fn push(&mut self, rows: &[(RollupKey, Totals)], account: &str, strings: &AccountStrings<'_>) -> Result<()> {
        self.buffer.extend_from_slice(rows);
        if self.buffer.len() >= parquet_io::ROW_GROUP_ROWS {
            self.writer.write(&strings.refs(account, &self.buffer))?;
            self.buffer.clear();
        }
        Ok(())
    }

    fn finish(mut self, account: &str, strings: &AccountStrings<'_>) -> Result<()> {
        if !self.buffer.is_empty() {
            self.writer.write(&strings.refs(account, &self.buffer))?;
        }
        self.writer.finish()
    }
}

/// A file-name-safe folder for an account: a readable prefix and a hash
/// (ids may hold any character but control characters).
fn account_folder(account: &str) -> String {
    let readable: String =
        account.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').take(40).collect();
    let hash = xxhash_rust::xxh3::xxh3_64(account.as_bytes());
    format!("{readable}-{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_hold_at_most_the_limit_but_at_least_one_file() {
        let file = |size: u64| InputFile {
            kind: Kind::Calls,
            path: PathBuf::new(),
            name: String::new(),
            format: Format::Csv,
            size,
        };
        let files = [file(5), file(5), file(20), file(1), file(1)];
        let indexed: Vec<(u32, &InputFile)> = files.iter().enumerate().map(|(i, f)| (i as u32, f)).collect();
        let sizes: Vec<usize> = batches(&indexed, 10).iter().map(|b| b.len()).collect();
        assert_eq!(sizes, [2, 1, 2]);
        assert_eq!(batches(&indexed, 1).len(), 5);
        assert_eq!(batches(&indexed[..0], 10).len(), 0);
    }

    #[test]
    fn account_folders_are_safe_and_distinct() {
        let a = account_folder("MA001");
        let b = account_folder("../MA001/x");
        assert!(a.starts_with("MA001-"));
        assert!(!b.contains('/') && !b.contains('.'));
        assert_ne!(account_folder("a b"), account_folder("a_b"));
    }
}
