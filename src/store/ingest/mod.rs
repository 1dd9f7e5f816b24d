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
//! - this file: the run ([`ingest`]: lock, inventory, resources, accounts,
//!   kind by kind and batch by batch, rejects, publish), the garbage
//!   collection after publishing, and the discard of what a failed run
//!   wrote (`Unpublished`: any error, a full disk included, leaves the
//!   store's files as they were);
//! - `chunk.rs`: the row sink that reads one file or CSV chunk into rows
//!   whose text sits in one arena, and gathers a chunk's new rows;
//! - `dedup.rs`: dedup against the store's index (the id filter, the
//!   pending candidates, their exact check, conflicts);
//! - `rollups.rs`: the rollup groups of the new rows (in shards by
//!   account, folded in parallel), their spill to partial files, and the
//!   per-account merge into the published rollup files.
//!
//! Memory, and what bounds it:
//!
//! - two batches: the one being taken in (its duplicates decided, its new
//!   rows folded and written), and the next, read and checked meanwhile
//!   (at a kind's last batch, the next kind's first); each its rows
//!   (about 250 bytes each: at most about two batches' worth of input, as
//!   a larger file is read a run of lines at a time), and the first its
//!   records and index entries; the input's bytes are not held (a plain
//!   file is mapped and its pages released as they are read, a compressed
//!   one decoded 32 MiB at a time);
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

mod chunk;
mod dedup;
mod rollups;
mod table;

pub(super) use chunk::{check_file, check_run};
pub(crate) use dedup::load_filter;
pub(super) use dedup::Pending;
pub(super) use rollups::Rollups;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::index::{self, Filter, IndexEntry, IndexFile};
use super::parquet_io::{self, RecordRows};
use super::{Manifest, FORMAT_VERSION};
use crate::aggregate::{OnBadRow, Tally};
use crate::durable::Syncer;
use crate::error::{BadRecord, Error, Location, Result};
use crate::money::Amount;
use crate::records::accounts::Accounts;
use crate::records::files::{InputFile, Inventory};
use crate::records::pieces::Pieces;
use crate::records::Kind;
use chunk::{Chunk, ChunkFold, Kept};
use dedup::{KindState, Mark};

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
    /// Size of the record-id filter, in bytes, at most (each kind's is sized
    /// for its ids within this, see `Filter::for_ids`; a fuller filter
    /// only sends more rows to the exact check).
    pub filter_bytes: u64,
    /// Candidate rows (ids the filter may have seen) held before they are
    /// checked exactly against the index, in bytes.
    pub pending_bytes: u64,
    /// Builds the generation's resources database (endpoints,
    /// registrations, recordings): `resources::generation::build`, given
    /// by the command because `resources` sits above the store, which only
    /// names the file, says what it starts from and publishes it.
    pub resources: BuildResources,
    /// Who hears how far the ingest got (nobody by default).
    pub progress: OnProgress,
}

/// How far an ingest got, as it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngestProgress {
    /// The input is known: this many record files and bytes.
    Started {
        /// Record files.
        files: usize,
        /// Their total size on disk.
        bytes: u64,
    },
    /// One more input file, or run of a large file's lines, read and
    /// checked (from the reading threads, so not in file order): its bytes
    /// on disk and its rows.
    Read {
        /// The file's size on disk (of a run: the bytes read since the
        /// file's last run, all its runs adding up to its size).
        bytes: u64,
        /// Its rows, valid or not.
        rows: u64,
    },
    /// The Spark job was submitted (`ingest --engine spark`).
    Submitted,
    /// The Spark job is done; its result is read.
    JobDone,
    /// The records are in; the rollups are merged and the generation
    /// published.
    Publishing,
}

/// The callback of [`IngestOptions::progress`]: called once per event (at
/// most once per input file while reading), so it may be as cheap as an
/// atomic add.
#[derive(Clone, Default)]
pub struct OnProgress(Option<std::sync::Arc<dyn Fn(IngestProgress) + Send + Sync>>);

impl OnProgress {
    /// Calls `hear` with every event.
    pub fn new(hear: impl Fn(IngestProgress) + Send + Sync + 'static) -> OnProgress {
        OnProgress(Some(std::sync::Arc::new(hear)))
    }

    /// Tells the listener, if any.
    pub(in crate::store) fn tell(&self, event: IngestProgress) {
        if let Some(hear) = &self.0 {
            hear(event);
        }
    }
}

impl std::fmt::Debug for OnProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "OnProgress(Fn)" } else { "OnProgress(none)" })
    }
}

/// The resources step of an ingest: builds `out` from `previous` and the
/// resource inputs of the data directory, skipping recordings deleted in
/// `deletions` (the store's deletions database). `None` when the data
/// directory has no resource input; otherwise what changed, and `out`
/// exists exactly when something did.
pub type BuildResources =
    fn(data: &Path, previous: PreviousResources<'_>, deletions: &Path, out: &Path) -> Result<Option<ResourceChanges>>;

/// Where a new generation's resources start from.
#[derive(Clone, Copy, Debug)]
pub enum PreviousResources<'a> {
    /// A store without resources yet.
    Nothing,
    /// The previous generation's database (never modified: copied).
    Generation(&'a Path),
    /// The `resources.sqlite` of a store written before resources were
    /// part of its generations (a live database: copied by SQLite, and its
    /// deletions moved into the store's deletions database).
    Legacy(&'a Path),
}

/// What an ingest did to a store's resources.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceChanges {
    /// Endpoints held afterwards, when `endpoints.csv` was read (it
    /// replaces them); `None` when they were kept.
    pub endpoints: Option<u64>,
    /// Registrations held afterwards, when `registrations.csv` was read;
    /// `None` when they were kept.
    pub registrations: Option<u64>,
    /// Files read under `recordings/` (0 when there is no such folder).
    pub recording_files: u64,
    /// Recordings added.
    pub recordings_added: u64,
    /// Recordings read that were stored already (same content).
    pub recordings_duplicates: u64,
    /// Recordings read that were deleted through the API: left out.
    pub deleted_skipped: u64,
    /// Whether the new database differs from the previous generation's (it
    /// is only written, and published, when it does).
    pub changed: bool,
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
    pub resources: Option<ResourceChanges>,
    /// Accounts whose API token the new accounts.csv removed (they had one
    /// in the store, and the data folder's file gives none).
    pub tokens_dropped: Vec<String>,
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

/// Ingests `data` into `store` (created when missing). A failed ingest
/// (any error) leaves the store as it was: nothing is published, and what
/// it wrote is deleted before it returns (`Unpublished`).
pub fn ingest(data: &Path, store: &Path, options: &IngestOptions) -> Result<IngestReport> {
    let id = &options.ingest_id;
    let opened = open(store, id)?;
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
        batches: 0,
    };
    run.ingest_kinds()?;
    let (report, manifest, rollups) = (run.report, run.manifest, run.rollups);
    options.progress.tell(IngestProgress::Publishing);
    finish(store, id, prepared, manifest, rollups, report, syncer)
}

/// The event that starts an ingest of `inventory`.
pub(super) fn started(inventory: &Inventory) -> IngestProgress {
    IngestProgress::Started { files: inventory.files.len(), bytes: inventory.files.iter().map(|f| f.size).sum() }
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
    resources: Option<ResourceChanges>,
    /// Its name in the store.
    resources_name: String,
}

/// An ingest that holds its store's lock and has read its manifest, before
/// it reads the data directory.
pub(super) struct Opened {
    lock: std::fs::File,
    /// The generation this ingest builds on.
    pub(super) old: Manifest,
}

/// Checks the id, creates the store, takes its lock, reads the manifest.
pub(super) fn open(store: &Path, id: &str) -> Result<Opened> {
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        return Err(Error::Usage(format!("ingest id '{id}' must be non-empty: letters, digits, '-', '_' or '.'")));
    }
    // A store whose manifest is lost or damaged is refused before anything
    // is created, written or deleted.
    let found = Manifest::read(store)?;
    if found.is_none() && super::has_kept_manifests(store) {
        return Err(super::no_manifest(store));
    }
    std::fs::create_dir_all(store).map_err(|e| Error::io(store, e))?;
    let lock = lock(store)?;

    // Read again under the lock: another publisher may have gone first.
    let old = match Manifest::read(store)? {
        Some(old) => old,
        None if found.is_some() || super::has_kept_manifests(store) => return Err(super::no_manifest(store)),
        None => {
            // The store's own page-token key, made with the store (a
            // published store that lost it gets a new one from the next
            // command that seals tokens, which says so: never silently
            // here).
            crate::token::TokenKey::load_or_create(&store.join(super::TOKEN_KEY))?;
            Manifest { format: FORMAT_VERSION, ..Manifest::default() }
        }
    };
    Ok(Opened { lock, old })
}

impl Opened {
    /// The guard that deletes what this ingest writes unless it publishes.
    pub(super) fn unpublished(&self, store: &Path, id: &str) -> Unpublished {
        Unpublished::new(store, id, &self.old, &self.lock)
    }

    /// Reads what the ingest needs besides the record files of `inventory`
    /// from `data` (a data directory, or the side inputs the Spark job
    /// copied from a URI): accounts and resources.
    pub(super) fn read_inputs(
        self,
        data: &Path,
        store: &Path,
        id: &str,
        inventory: Inventory,
        build_resources: BuildResources,
    ) -> Result<Prepared> {
        let Opened { lock, old } = self;
        check_source_count(store, old.sources.len() as u64, inventory.files.len() as u64)?;
        let accounts_bytes = read_accounts(data)?;
        // The resources first (they are small, and a bad file fails the run
        // before the records' work): a new database of this generation,
        // published with the manifest, or nothing when nothing changed.
        let resources_name = format!("resources/{id}.sqlite");
        let legacy = store.join(super::LEGACY_RESOURCES_DB);
        // The previous generation's database is copied: checked first.
        if let Some(name) = &old.resources {
            old.file(store, name)?.check_file()?;
        }
        let previous_resources = old.resources.as_ref().map(|name| store.join(name));
        let previous = match &previous_resources {
            Some(path) => PreviousResources::Generation(path),
            None if legacy.exists() => PreviousResources::Legacy(&legacy),
            None => PreviousResources::Nothing,
        };
        let resources =
            build_resources(data, previous, &store.join(super::DELETIONS_DB), &store.join(&resources_name))?;
        Ok(Prepared { lock, old, inventory, accounts_bytes, resources, resources_name })
    }
}

/// What an ingest that does not publish leaves: nothing. Made once the
/// store is locked; when the ingest fails (an error, or a panic that
/// unwinds), dropping it deletes every file the ingest wrote ([`discard`])
/// while it still holds the store's lock (a handle of its own on the lock
/// file), so that no other ingest starts among the half-deleted files.
/// [`Unpublished::settle`] disarms it when the ingest succeeded.
pub(super) struct Unpublished {
    store: PathBuf,
    id: String,
    /// The generation the ingest builds on (its files are never deleted).
    old: Manifest,
    /// The store's lock, held until the files are gone (`None` when no
    /// second handle could be had: then the files go after the lock).
    _lock: Option<std::fs::File>,
    armed: bool,
}

impl Unpublished {
    fn new(store: &Path, id: &str, old: &Manifest, lock: &std::fs::File) -> Unpublished {
        Unpublished {
            store: store.to_owned(),
            id: id.to_owned(),
            old: old.clone(),
            _lock: lock.try_clone().ok(),
            armed: true,
        }
    }

    /// Passes the ingest's outcome on: on success the guard is disarmed;
    /// on failure this ingest's files are deleted first.
    pub(super) fn settle<T>(mut self, outcome: Result<T>) -> Result<T> {
        self.armed = outcome.is_err();
        outcome
    }
}

impl Drop for Unpublished {
    fn drop(&mut self) {
        if self.armed {
            discard(&self.store, &self.id, &self.old);
        }
    }
}

/// Deletes what ingest `id` wrote to `store` and did not publish: every
/// file of the generation folders named by the id (records, index, rollup
/// files and the partial files of their spills, rejected rows, accounts,
/// the resources database and its SQLite side files), its temporary
/// manifest, and the folders it left empty. A file that a published
/// manifest lists (`old`, or the one on disk now, should the commit have
/// happened before a later step failed) is never deleted. Best effort; how
/// many files went.
pub(super) fn discard(store: &Path, id: &str, old: &Manifest) -> usize {
    let current = match Manifest::read(store) {
        Ok(current) => current,
        // The manifest on disk cannot be read: what it lists is unknown,
        // so only the files no manifest ever lists go.
        Err(_) => return discard_scratch(store, id),
    };
    let mut keep: std::collections::HashSet<&str> = old.listed().into_iter().collect();
    keep.extend(current.iter().flat_map(Manifest::listed));
    let mut removed = discard_scratch(store, id);
    // The kept copy of a manifest that was never published: the
    // generation after the one on disk.
    let published = current.as_ref().map_or(0, |current| current.generation);
    if published == old.generation {
        let kept = store.join(super::KEPT_MANIFESTS).join(format!("{}.json", old.generation + 1));
        removed += usize::from(std::fs::remove_file(kept).is_ok());
    }
    for folder in GENERATION_FOLDERS {
        let mut files = Vec::new();
        let _ = crate::records::files::walk(&store.join(folder), &mut files);
        for path in files {
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            if !written_by(name, id) {
                continue;
            }
            let Ok(relative) = path.strip_prefix(store) else { continue };
            let relative: Vec<&str> = relative.iter().filter_map(|part| part.to_str()).collect();
            if !keep.contains(relative.join("/").as_str()) && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
        remove_empty_folders(&store.join(folder));
    }
    removed
}

/// Deletes the files of ingest `id` that no manifest ever lists: its
/// temporary manifest and the partial files of its rollup spills.
fn discard_scratch(store: &Path, id: &str) -> usize {
    let mut removed = 0;
    let temporary = store.join(format!("{}.tmp-{id}", super::MANIFEST));
    removed += usize::from(std::fs::remove_file(temporary).is_ok());
    if let Ok(entries) = std::fs::read_dir(store.join("rollups")) {
        for entry in entries.flatten() {
            let partial = entry.file_name().to_str().is_some_and(|n| n.starts_with(&format!("{id}-part-")));
            removed += usize::from(partial && std::fs::remove_file(entry.path()).is_ok());
        }
    }
    removed
}

/// Whether a file named `name` is one that ingest `id` writes: its
/// numbered records and index files, rollup files and partial files
/// (`<id>-...`), or its rejected rows, accounts and resources database
/// (`<id>.csv`, `<id>.sqlite` and SQLite's `-journal`, `-wal`, `-shm`).
fn written_by(name: &str, id: &str) -> bool {
    name.strip_prefix(id).is_some_and(|rest| {
        rest.starts_with('-')
            || rest == ".csv"
            || rest.strip_prefix(".sqlite").is_some_and(|side| side.is_empty() || side.starts_with('-'))
    })
}

/// Removes the empty folders under `folder`, and `folder` itself when it
/// is left empty (an error just means not empty).
fn remove_empty_folders(folder: &Path) {
    if let Ok(entries) = std::fs::read_dir(folder) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_empty_folders(&entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(folder);
}

/// Takes the store's writer lock (`STORE/.ingest.lock`), held by every
/// publisher (an ingest, `accounts set-token`) until the file is dropped;
/// another publisher at work is an error.
pub(super) fn lock(store: &Path) -> Result<std::fs::File> {
    let lock_path = store.join(".ingest.lock");
    let lock = std::fs::File::create(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
    lock.try_lock().map_err(|_| Error::io(&lock_path, "another ingest is running on this store"))?;
    Ok(lock)
}

/// Ends an ingest whose new records and index files are written and whose
/// new rows are in `rollups` (and whose resources database
/// [`Opened::read_inputs`] built): writes the rejected rows, copies accounts, writes the rollups and publishes the manifest (the one
/// commit point), then deletes files no generation needs. Nothing is
/// published when nothing changed.
pub(super) fn finish(
    store: &Path,
    id: &str,
    prepared: Prepared,
    mut manifest: Manifest,
    rollups: Rollups,
    mut report: IngestReport,
    syncer: Syncer,
) -> Result<IngestReport> {
    let Prepared { lock, old, inventory, accounts_bytes, resources, resources_name } = prepared;
    let resources_changed = resources.as_ref().is_some_and(|changes| changes.changed);
    if resources_changed {
        manifest.resources = Some(resources_name);
    }
    report.resources = resources;
    // The sums of the files written here from bytes in hand.
    let mut sums = std::collections::HashMap::new();
    if !report.rejects.is_empty() {
        let folder = store.join("rejected");
        std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
        let path = folder.join(format!("{id}.csv"));
        sums.insert(path.clone(), write_rejects(&path, &report.rejects)?);
        report.rejected_file = Some(path);
    }

    let mut changed = report.total().used > 0 || resources_changed;
    if let Some(bytes) = &accounts_bytes {
        let stored = match &old.accounts_csv {
            Some(name) => {
                let listed = old.file(store, name)?;
                match std::fs::read(listed.path()) {
                    Ok(stored) => {
                        listed.check(&stored)?;
                        Some(stored)
                    }
                    Err(_) => None,
                }
            }
            None => None,
        };
        if stored.as_ref() != Some(bytes) {
            if let Some(stored) = &stored {
                report.tokens_dropped = super::accounts::tokens_dropped(stored, bytes);
            }
            let name = format!("accounts/{id}.csv");
            create_parent(&store.join(&name))?;
            super::write_synced(&store.join(&name), bytes)?;
            sums.insert(store.join(&name), crate::checksum::FileSum::of(bytes));
            manifest.accounts_csv = Some(name);
            changed = true;
        }
    }
    if !changed {
        report.generation = old.generation;
        return Ok(report);
    }
    // The generation is written in this build's layout: an older store's
    // hour rollups, which nothing reads, are no longer listed (collected
    // with the files superseded by this ingest).
    manifest.format = FORMAT_VERSION;
    for files in manifest.rollups.values_mut() {
        files.retain(|grain, _| super::GRAINS.contains(grain));
    }
    rollups.write(store, id, &old, &mut manifest, &syncer)?;
    // Every records, index and rollup file is on disk before the commit
    // point, its sum computed as it was written.
    sums.extend(syncer.wait()?);
    let total = report.total();
    manifest.generation = old.generation + 1;
    manifest.sources.extend(inventory.files.iter().map(|f| format!("{} (ingest {id})", f.name)));
    manifest.ingests.push(super::IngestLog {
        id: id.to_owned(),
        files: inventory.files.len() as u64,
        rows: total,
        rejected: report.rejected_file.as_ref().map(|_| format!("rejected/{id}.csv")),
    });
    for folder in ["records", "index", "rollups", "accounts", "resources"] {
        let path = store.join(folder);
        if path.exists() {
            super::sync_dir(&path)?;
        }
    }
    record_sums(store, &old, &mut manifest, &sums)?;
    manifest.publish(store, id)?;
    report.removed = collect_garbage(store, &[&old, &manifest]);
    report.published = true;
    report.generation = manifest.generation;
    drop(lock);
    Ok(report)
}

/// Sets `manifest` (built on `old`) to this build's format and records the
/// sum of every file it lists: those written by this publish from `sums`
/// (by path: computed as they were written), those carried forward from
/// `old`, and the rest read once here (the resources database, which
/// SQLite writes; and the files of a store of format 4 or 5, whose
/// manifest has no sums, trusted as they are).
pub(in crate::store) fn record_sums(
    store: &Path,
    old: &Manifest,
    manifest: &mut Manifest,
    sums: &std::collections::HashMap<PathBuf, crate::checksum::FileSum>,
) -> Result<()> {
    manifest.format = FORMAT_VERSION;
    for files in manifest.rollups.values_mut() {
        files.retain(|grain, _| super::GRAINS.contains(grain));
    }
    let mut files = BTreeMap::new();
    for name in manifest.listed() {
        let path = store.join(name);
        let sum = match (sums.get(&path), old.files.get(name)) {
            (Some(sum), _) | (None, Some(sum)) => sum.clone(),
            (None, None) => crate::checksum::FileSum::of_file(&path).map_err(|e| Error::io(&path, e))?,
        };
        files.insert(name.to_owned(), sum);
    }
    manifest.files = files;
    manifest.checksum = None;
    Ok(())
}

/// The folders of the store that hold generation files.
pub(in crate::store) const GENERATION_FOLDERS: [&str; 6] =
    ["records", "index", "rollups", "accounts", "rejected", "resources"];

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
pub(super) fn collect_garbage(store: &Path, keep: &[&Manifest]) -> usize {
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
        listed.extend(manifest.listed());
    }
    let mut removed = leases.removed;
    // Kept manifests: the newest few, and those of every generation kept.
    let generations: std::collections::HashSet<u64> =
        keep.iter().copied().chain(&held).map(|manifest| manifest.generation).collect();
    removed += collect_kept_manifests(store, &generations);
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

/// Deletes the kept manifests (`manifests/<generation>.json`) but the
/// newest [`KEEP_MANIFESTS`](super::KEEP_MANIFESTS) and those of `generations`;
/// returns how many were deleted. Files whose name is not a generation's
/// are left alone.
fn collect_kept_manifests(store: &Path, generations: &std::collections::HashSet<u64>) -> usize {
    let folder = store.join(super::KEPT_MANIFESTS);
    let Ok(entries) = std::fs::read_dir(&folder) else { return 0 };
    let mut kept: Vec<(u64, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name();
            let generation = name.to_str()?.strip_suffix(".json")?.parse::<u64>().ok()?;
            Some((generation, entry.path()))
        })
        .collect();
    kept.sort_unstable_by_key(|b| std::cmp::Reverse(b.0));
    let mut removed = 0;
    for (generation, path) in kept.into_iter().skip(super::KEEP_MANIFESTS) {
        if !generations.contains(&generation) && std::fs::remove_file(&path).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// Refuses an ingest of `new` input files into a store that holds `base`
/// when the index could not name them all ([`index::MAX_SOURCE`]).
fn check_source_count(store: &Path, base: u64, new: u64) -> Result<()> {
    if base + new > u64::from(index::MAX_SOURCE) {
        return Err(Error::Limit(format!(
            "{}: a store holds at most {} input files; it has {base} and this ingest reads {new} more",
            store.display(),
            index::MAX_SOURCE,
        )));
    }
    Ok(())
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

/// The set-aside rows, in the same CSV as `report`'s `rejected.csv`; the
/// file's sum.
fn write_rejects(path: &Path, rejects: &[BadRecord]) -> Result<crate::checksum::FileSum> {
    let bytes = crate::records::bad_rows::rejected_csv(rejects)?;
    super::write_synced(path, &bytes)?;
    Ok(crate::checksum::FileSum::of(&bytes))
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
        let by_kind: Vec<(Kind, Vec<(u32, &InputFile)>)> = Kind::ALL
            .iter()
            .map(|&kind| {
                let files = self.inventory.files.iter().enumerate().filter(|(_, f)| f.kind == kind);
                (kind, files.map(|(i, f)| (i as u32, f)).collect())
            })
            .collect();
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
            let (step, chunks, more) = read?;
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
        let amount = match files_of_kind.amount.as_str() {
            "" => Amount::ZERO,
            text => Amount::parse_total(text.as_bytes())
                .map_err(|e| Error::io(self.store.join("manifest.json"), format!("amount of {kind} '{text}' {e}")))?,
        };
        let stored: Vec<IndexFile> = files_of_kind
            .index
            .iter()
            .map(|name| IndexFile::open_checked(self.old.file(self.store, name)?))
            .collect::<Result<_>>()?;
        let mut filter = filter_for(self.options.filter_bytes, &files_of_kind, files);
        load_filter(&mut filter, &stored)?;
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
    ) -> Result<Option<(String, String)>> {
        if views.is_empty() {
            return Ok(None);
        }
        write_files(self.store, self.id, self.batches, kind, views, entries, self.syncer).map(Some)
    }

    /// Counts `rows` new rows of `state`'s kind, and takes the files
    /// [`Run::write_new`] wrote them to into the manifest.
    fn add_written(&mut self, state: &mut KindState, rows: usize, written: Option<(String, String)>) -> Result<()> {
        state.tally.used += rows as u64;
        if let Some((name, index_name)) = written {
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
    /// and what it finds is stored after the batch, as before.
    fn take_batch(&mut self, state: &mut KindState, mut chunks: Vec<Chunk>, last: bool) -> Result<()> {
        let marks = self.dedup(state, &chunks)?;
        for chunk in chunks.iter_mut() {
            state.tally.read += chunk.read;
            let mut rejects = chunk.bad_rows.take_rejects();
            state.tally.set_aside += rejects.len() as u64;
            self.report.rejects.append(&mut rejects);
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
        let (written, rows, duplicates, amount) = taken?;
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
        let folds: Vec<ChunkFold> =
            chunks.par_iter().zip(marks).map(|(chunk, marks)| chunk.fold(marks, base)).collect();
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
        Ok((written?, new_rows.len(), duplicates, amount))
    }
}

/// What [`Run::take_new`] did: the files written, the rows written, the
/// duplicates skipped, the amount of the rows written.
type TakenNew = (Option<(String, String)>, usize, u64, i128);

/// One batch of a kind's files ([`batches`]); its kind's files.
#[derive(Clone, Copy)]
struct Step<'s, 'f> {
    kind: Kind,
    files: &'s [(u32, &'f InputFile)],
    batch: Batch<'s, 'f>,
}

/// The input, read a batch at a time ([`Feed::read`]): each batch of
/// files whole, or a file read in runs of lines ([`piece_lines`]) a run
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
type ReadBatch = (usize, Vec<Chunk>, bool);

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
                return Some(read_batch(self.options, step.batch.files).map(|chunks| (index, chunks, false)));
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
        Some(read.map(|chunks| (step, chunks, !done)))
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

/// Writes new rows of `kind` as the records file and the index file number
/// `number` of ingest `id` (both engines name them so); returns their names.
pub(super) fn write_files<R: RecordRows + ?Sized>(
    store: &Path,
    id: &str,
    number: u64,
    kind: Kind,
    views: &R,
    entries: &[&[IndexEntry]],
    syncer: &Syncer,
) -> Result<(String, String)> {
    let name = format!("records/{}/{id}-{number:05}.parquet", kind.name());
    let path = store.join(&name);
    create_parent(&path)?;
    let index_name = format!("index/{}/{id}-{number:05}.idx", kind.name());
    let index_path = store.join(&index_name);
    create_parent(&index_path)?;
    let (records, index) = rayon::join(
        || parquet_io::write_records(&path, kind, views, syncer),
        || index::write_index(&index_path, entries, syncer),
    );
    records?;
    index?;
    Ok((name, index_name))
}

/// The record-id filter of one kind (both engines make the same one, so
/// that they take the same rows for candidates): sized for the ids it will
/// hold, those `stored` and about as many new ones as the input `files`
/// can hold (CSV rows of at least [`CSV_ROW_BYTES`], compressed or Parquet
/// rows of at least [`PACKED_ROW_BYTES`]), within `max_bytes`
/// (`--filter-mb`). An estimate too low only sends more rows to the exact
/// check.
pub(super) fn filter_for(max_bytes: u64, stored: &super::KindFiles, files: &[(u32, &InputFile)]) -> Filter {
    use crate::records::files::Format;
    let new: u64 = files
        .iter()
        .map(|(_, file)| match file.format {
            Format::Csv => file.size / CSV_ROW_BYTES,
            Format::CsvGz | Format::CsvZst | Format::Parquet => file.size / PACKED_ROW_BYTES,
        })
        .sum();
    Filter::for_ids(max_bytes, stored.count.saturating_add(new))
}

/// Bytes of the shortest CSV row [`filter_for`] expects (the benchmark's are
/// about 120).
const CSV_ROW_BYTES: u64 = 48;

/// Bytes of the shortest compressed or Parquet row [`filter_for`] expects.
const PACKED_ROW_BYTES: u64 = 8;

/// One batch of a kind's input files ([`batches`]).
#[derive(Clone, Copy)]
pub(super) struct Batch<'f, 'a> {
    /// Its files, in inventory order.
    pub(super) files: &'f [(u32, &'a InputFile)],
    /// Lines in each run when the batch is one file read in runs of lines
    /// ([`piece_lines`]), each run a batch of its own.
    pub(super) run_lines: Option<u64>,
}

/// Splits files into batches of at most `limit` input bytes (at least one
/// file each); a file read in runs of lines ([`piece_lines`]) is a batch
/// of its own.
pub(super) fn batches<'f, 'a>(files: &'f [(u32, &'a InputFile)], limit: u64) -> Vec<Batch<'f, 'a>> {
    let mut out = Vec::new();
    let (mut start, mut bytes, mut run_lines) = (0, 0u64, None);
    for (i, (_, file)) in files.iter().enumerate() {
        let lines = piece_lines(file, limit);
        if i > start && (run_lines.is_some() || lines.is_some() || bytes + file.size > limit) {
            out.push(Batch { files: &files[start..i], run_lines });
            (start, bytes) = (i, 0);
        }
        bytes += file.size;
        // A file that joins a batch is never read in runs (it would have
        // started one of its own), so this is the batch's.
        run_lines = lines;
    }
    if start < files.len() {
        out.push(Batch { files: &files[start..], run_lines });
    }
    out
}

/// Lines in each run of a file that is read a run of lines at a time
/// (each run a batch: [`Feed`]), or `None` for a file read whole: a file
/// whose rows would take more than twice a batch's `limit` of input bytes
/// (the size on disk of a plain CSV file, four times that compressed or
/// Parquet) is read in runs of `limit / 128` lines (a 128-byte CSV row's
/// worth), so that an ingest holds one run of its rows at a time. Both
/// engines cut at the same lines ([`run_of`]).
pub(super) fn piece_lines(file: &InputFile, limit: u64) -> Option<u64> {
    use crate::records::files::Format;
    let bytes = match file.format {
        Format::Csv => file.size,
        Format::CsvGz | Format::CsvZst | Format::Parquet => file.size.saturating_mul(4),
    };
    (bytes > limit.saturating_mul(2)).then_some((limit / PIECE_ROW_BYTES).max(1))
}

/// The run of a file (from 0) that its row at `line` is read in, for a file
/// read in runs of `lines` lines ([`piece_lines`]).
pub(super) fn run_of(file: &InputFile, line: u64, lines: u64) -> u64 {
    line.saturating_sub(crate::records::pieces::first_line(file.format)) / lines.max(1)
}

/// Bytes of input a row of a file read in runs counts for ([`piece_lines`]).
const PIECE_ROW_BYTES: u64 = 128;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::files::Format;

    /// An id that is not a plain name is a bad option (nothing is created);
    /// a store past its input-file limit is a limit of the engine.
    #[test]
    fn a_bad_id_is_usage_and_too_many_files_a_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("store");
        for id in ["", "../x", "a b"] {
            let error = open(&store, id).err().expect("refused");
            assert!(matches!(error, Error::Usage(_)), "{id}: {error}");
        }
        assert!(!store.exists());

        let max = u64::from(index::MAX_SOURCE);
        assert!(check_source_count(&store, max - 1, 1).is_ok());
        let error = check_source_count(&store, max - 1, 2).expect_err("one too many");
        assert!(matches!(error, Error::Limit(_)), "{error}");
        assert!(error.to_string().contains("a store holds at most"), "{error}");
    }

    /// The names an ingest writes are told apart from other ingests'
    /// (whose id this one's is not a prefix of), published or not.
    #[test]
    fn an_ingests_files_are_known_by_its_id() {
        let id = "20261128T114736123Z-8552";
        let ours = [
            "20261128T114736123Z-8552-00000.parquet",
            "20261128T114736123Z-8552-00003.idx",
            "20261128T114736123Z-8552-part-01-00000.bin",
            "20261128T114736123Z-8552-part-01-00002-wide.bin",
            "20261128T114736123Z-8552-900s.parquet",
            "20261128T114736123Z-8552.csv",
            "20261128T114736123Z-8552.sqlite",
            "20261128T114736123Z-8552.sqlite-journal",
            "20261128T114736123Z-8552.sqlite-wal",
        ];
        for name in ours {
            assert!(written_by(name, id), "{name}");
        }
        let theirs = [
            "20261128T114736123Z-85521-00000.parquet",
            "20261128T114736123Z-855.csv",
            "20261128T114736124Z-8552-00000.parquet",
            "g3.csv",
            "20261128T114736123Z-8552.sqlitex",
            "x20261128T114736123Z-8552.csv",
        ];
        for name in theirs {
            assert!(!written_by(name, id), "{name}");
        }
    }

    /// What a failed ingest deletes: its own files and temporary
    /// manifest, never a file the manifest on disk lists (its commit may
    /// have happened before a later step failed), nor another ingest's.
    #[test]
    fn a_failed_ingest_discards_its_files_but_never_a_published_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path();
        let id = "i2";
        let files = [
            "records/calls/i2-00000.parquet",
            "records/calls/i2-00001.parquet",
            "index/calls/i2-00001.idx",
            "rollups/i2-part-03-00000.bin",
            "rollups/MA001-0123456789abcdef/i2-900s.parquet",
            "resources/i2.sqlite",
            "resources/i2.sqlite-journal",
            "accounts/i2.csv",
            "manifest.json.tmp-i2",
            "records/calls/i1-00000.parquet",
            "records/calls/i3-00000.parquet",
        ];
        for name in files {
            let path = store.join(name);
            std::fs::create_dir_all(path.parent().expect("a folder")).expect("folder");
            std::fs::write(path, b"x").expect("file");
        }
        let kind = |records: &[&str]| super::super::KindFiles {
            records: records.iter().map(|r| (*r).to_owned()).collect(),
            ..super::super::KindFiles::default()
        };
        let old = Manifest {
            format: FORMAT_VERSION,
            generation: 1,
            kinds: BTreeMap::from([("calls".to_owned(), kind(&["records/calls/i1-00000.parquet"]))]),
            ..Manifest::default()
        };
        // The commit happened: the manifest on disk lists i2's first file.
        let published = Manifest {
            generation: 2,
            kinds: BTreeMap::from([(
                "calls".to_owned(),
                kind(&["records/calls/i1-00000.parquet", "records/calls/i2-00000.parquet"]),
            )]),
            ..old.clone()
        };
        std::fs::write(store.join(super::super::MANIFEST), published.to_bytes().expect("JSON")).expect("manifest");
        assert_eq!(discard(store, id, &old), 8);
        let left: Vec<&str> = files.into_iter().filter(|name| store.join(name).exists()).collect();
        assert_eq!(
            left,
            ["records/calls/i2-00000.parquet", "records/calls/i1-00000.parquet", "records/calls/i3-00000.parquet"]
        );
        for folder in ["rollups", "resources", "accounts", "index"] {
            assert!(!store.join(folder).exists(), "{folder} left empty");
        }
    }

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
        let sizes: Vec<usize> = batches(&indexed, 10).iter().map(|b| b.files.len()).collect();
        assert_eq!(sizes, [2, 1, 2]);
        assert_eq!(batches(&indexed, 1).len(), 5);
        assert_eq!(batches(&indexed[..0], 10).len(), 0);
    }

    /// A file whose rows take more than two batches (four times its size
    /// when compressed or Parquet) is read in runs of lines, each run a
    /// batch of its own; the runs are cut at fixed line numbers.
    #[test]
    fn a_file_of_more_than_two_batches_is_a_batch_of_its_own_read_in_runs() {
        const MIB: u64 = 1 << 20;
        let file = |size: u64, format: Format| InputFile {
            kind: Kind::Calls,
            path: PathBuf::new(),
            name: String::new(),
            format,
            size: size * MIB,
        };
        let files = [
            file(3, Format::Csv),
            file(4, Format::Csv),
            file(6, Format::CsvGz),
            file(1, Format::Csv),
            file(21, Format::Csv),
            file(5, Format::Parquet),
            file(2, Format::CsvZst),
            file(2, Format::Csv),
        ];
        let indexed: Vec<(u32, &InputFile)> = files.iter().enumerate().map(|(i, f)| (i as u32, f)).collect();
        let in_runs: Vec<Option<u64>> = files.iter().map(|f| piece_lines(f, 10 * MIB)).collect();
        let lines = Some(10 * MIB / 128);
        assert_eq!(in_runs, [None, None, lines, None, lines, None, None, None]);
        let cut = batches(&indexed, 10 * MIB);
        let sizes: Vec<(usize, Option<u64>)> = cut.iter().map(|b| (b.files.len(), b.run_lines)).collect();
        assert_eq!(sizes, [(2, None), (1, lines), (1, None), (1, lines), (3, None)]);
        // CSV data lines start at 2, Parquet rows at 1.
        let (csv, parquet) = (&files[4], &files[5]);
        assert_eq!([2, 81921, 81922, 163842].map(|line| run_of(csv, line, 81920)), [0, 0, 1, 2]);
        assert_eq!([1, 81920, 81921].map(|row| run_of(parquet, row, 81920)), [0, 0, 1]);
    }
}
