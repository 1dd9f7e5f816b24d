//! How a new generation of the store is made and published, whoever makes
//! it: the local ingest, `ingest --engine spark` and `accounts set-token`
//! all go through here.
//!
//! 1. [`open`]: check the ingest id, take the store's writer lock
//!    ([`lock`]), read the manifest the generation builds on.
//! 2. [`Opened::read_inputs`]: read the side inputs (accounts, resources).
//! 3. [`write_files`]: each batch's records and index files, named by the
//!    ingest id and batch number.
//! 4. [`finish`]: write the rejected rows, the accounts file and the
//!    rollups, record every file's sum ([`record_sums`]) and swap the
//!    manifest (the one commit point).
//! 5. [`collect_garbage`]: delete what no kept generation lists.
//!
//! A failed run publishes nothing: [`Unpublished`] deletes what it wrote
//! ([`discard`]) while it still holds the lock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::create_parent;
use super::index::{self, IndexEntry};
use super::ingest::corrections::Applied;
use super::ingest::fold::{PublishedTerms, Rollups};
use super::ingest::options::{BuildResources, IngestReport, PreviousResources, ResourceChanges};
use super::parquet_io::{self, RecordRows};
use super::{Manifest, WithoutManifest, FORMAT_VERSION, MANIFEST};
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::records::accounts::Accounts;
use crate::records::files::Inventory;
use crate::records::Kind;

/// What an ingest holds from its start to its publish: the store's lock,
/// the published manifest it builds on, the input files and accounts.
pub(in crate::store) struct Prepared {
    /// Held until the ingest ends (another ingest of the store waits out).
    lock: std::fs::File,
    /// The generation this ingest builds on.
    pub(in crate::store) old: Manifest,
    /// The input files, sorted (by kind, then name).
    pub(in crate::store) inventory: Inventory,
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
pub(in crate::store) struct Opened {
    lock: std::fs::File,
    /// The generation this ingest builds on.
    pub(in crate::store) old: Manifest,
}

/// Checks the id, creates the store, takes its lock, reads the manifest.
pub(in crate::store) fn open(store: &Path, id: &str) -> Result<Opened> {
    // A letter or digit first: never `.` or `..`, which name the staging
    // folder's parent, nor a hidden file.
    let starts_plain = id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric());
    if !starts_plain || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        return Err(Error::Usage(format!(
            "ingest id '{}' must be letters, digits, '-', '_' or '.', starting with a letter or digit",
            crate::error::printable(id)
        )));
    }
    // A store whose manifest is lost or damaged, or a folder of other
    // files, is refused before anything is created, written or deleted.
    let found = Manifest::read(store)?;
    if found.is_none() {
        WithoutManifest::of(store).check_new(store)?;
    }
    std::fs::create_dir_all(store).map_err(|e| Error::io(store, e))?;
    let lock = lock(store)?;

    // Read again under the lock: another publisher may have gone first.
    let old = match Manifest::read(store)? {
        Some(old) => {
            check_not_behind(store, &old)?;
            old.keep_current(store)?;
            old
        }
        None if found.is_some() => return Err(super::no_manifest(store)),
        None => {
            WithoutManifest::of(store).check_new(store)?;
            // Marks the folder as this new store's before anything else is
            // written there.
            super::write_synced(&store.join(super::FIRST_INGEST), id.as_bytes())?;
            super::sync_dir(store)?;
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
    pub(in crate::store) fn unpublished(&self, store: &Path, id: &str) -> Unpublished {
        Unpublished::new(store, id, &self.old, &self.lock)
    }

    /// Reads what the ingest needs besides the record files of `inventory`
    /// from `data` (a data directory, or the side inputs the Spark job
    /// copied from a URI): accounts and resources.
    pub(in crate::store) fn read_inputs(
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
pub(in crate::store) struct Unpublished {
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
    pub(in crate::store) fn settle<T>(mut self, outcome: Result<T>) -> Result<T> {
        self.armed = outcome.is_err();
        outcome
    }
}

impl Drop for Unpublished {
    fn drop(&mut self) {
        if self.armed {
            discard(&self.store, &self.id, &self.old);
            if self.old.generation == 0 {
                undo_new_store(&self.store);
            }
        }
    }
}

/// After a failed first ingest whose files are gone: the folder empty
/// again, when nothing else is in it. Its page-token key, lock and marker
/// go (the marker last); the folder stays. Anything else (files of an
/// earlier killed first ingest) keeps the marker, for the next ingest to
/// start over.
fn undo_new_store(store: &Path) {
    if !matches!(Manifest::read(store), Ok(None)) {
        return;
    }
    let made = [super::TOKEN_KEY, LOCK_FILE, super::FIRST_INGEST];
    let Ok(entries) = std::fs::read_dir(store) else { return };
    let only_ours = entries.flatten().all(|entry| entry.file_name().to_str().is_some_and(|name| made.contains(&name)));
    if only_ours {
        for name in made {
            let _ = std::fs::remove_file(store.join(name));
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
pub(in crate::store) fn discard(store: &Path, id: &str, old: &Manifest) -> usize {
    let current = match Manifest::read(store) {
        Ok(current) => current,
        // The manifest on disk cannot be read: what it lists is unknown,
        // so only the files no manifest ever lists go.
        Err(_) => return discard_scratch(store, id),
    };
    let mut keep: std::collections::HashSet<&str> = old.listed().into_iter().collect();
    keep.extend(current.iter().flat_map(Manifest::listed));
    let mut removed = discard_scratch(store, id);
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

/// The store's writer lock file.
pub const LOCK_FILE: &str = ".ingest.lock";

/// Refuses to build on `old` when a later generation was published: an
/// older `manifest.json` was put back, and the next collection would
/// delete the later generation's files.
pub(in crate::store) fn check_not_behind(store: &Path, old: &Manifest) -> Result<()> {
    match super::kept_after(store, old.generation) {
        Some(newest) => Err(Error::io(store.join(MANIFEST), super::manifest_behind(store, old.generation, newest))),
        _ => Ok(()),
    }
}

/// Takes the store's writer lock (`STORE/.ingest.lock`), held by every
/// publisher (an ingest, `accounts set-token`) until the file is dropped;
/// another publisher at work is an error.
pub(in crate::store) fn lock(store: &Path) -> Result<std::fs::File> {
    let lock_path = store.join(LOCK_FILE);
    let lock = std::fs::File::create(&lock_path).map_err(|e| Error::io(&lock_path, e))?;
    // A reader's probe (`publisher_at_work`) holds a shared lock for an
    // instant: tried again for a tenth of a second, where another
    // publisher holds it for its whole run.
    let mut tries = 1;
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(lock),
            Err(std::fs::TryLockError::WouldBlock) if tries < LOCK_TRIES => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(_) => return Err(Error::io(&lock_path, "another ingest is running on this store")),
        }
    }
}

/// How many times [`lock`] tries the writer lock, 5 ms apart.
const LOCK_TRIES: usize = 20;

/// Whether a publisher holds the store's writer lock ([`lock`]) now: a
/// shared lock on it is refused. (A lock file that cannot be opened says
/// nothing: `false`.)
pub(in crate::store) fn publisher_at_work(store: &Path) -> bool {
    let Ok(lock) = std::fs::File::open(store.join(LOCK_FILE)) else { return false };
    matches!(lock.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock))
}

/// Ends an ingest whose new records and index files are written and whose
/// new rows are in `rollups` (and whose resources database
/// [`Opened::read_inputs`] built): writes the rejected rows, copies
/// accounts, writes the rollups and publishes the manifest (the one commit
/// point), then deletes files no generation needs. Nothing is published
/// when nothing changed and no row was set aside, unless the store is new.
pub(in crate::store) fn finish(
    store: &Path,
    id: &str,
    prepared: Prepared,
    mut manifest: Manifest,
    folded: Folded,
    mut report: IngestReport,
    syncer: Syncer,
) -> Result<IngestReport> {
    let Folded { rollups, applied, set_aside } = folded;
    let Prepared { lock, old, inventory, accounts_bytes, resources, resources_name } = prepared;
    let resources_changed = resources.as_ref().is_some_and(|changes| changes.changed);
    if resources_changed {
        manifest.resources = Some(resources_name);
    }
    report.resources = resources;
    // The sums of the files written here from bytes in hand.
    let mut sums = std::collections::HashMap::new();
    if !set_aside.is_empty() {
        let path = store.join("rejected").join(format!("{id}.csv"));
        sums.insert(path.clone(), crate::records::bad_rows::write_rejected(&path, set_aside.into_spools())?);
        report.rejected_file = Some(path);
    }

    // Rows set aside publish a generation too: it lists their file, which
    // the collection of unlisted files would otherwise delete. So does a
    // first ingest with nothing to store (a quiet first night): the store
    // exists then, empty, and answers.
    let first = old.generation == 0;
    let mut changed = first
        || report.total().used > 0
        || resources_changed
        || !applied.rows.is_empty()
        || report.rejected_file.is_some();
    // The accounts file of the published generation, when this ingest
    // brings one: what its tokens and zones are compared with.
    let mut stored = None;
    if let Some(bytes) = &accounts_bytes {
        stored = match &old.accounts_csv {
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
                report.tokens = TokenChanges::of(stored, bytes);
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
    // Each account's months are those of its zone in the accounts this
    // generation publishes.
    // A new accounts file may move accounts to other zones or currencies.
    let (accounts, changed) = match &accounts_bytes {
        Some(bytes) => {
            let accounts = Accounts::parse(bytes, "accounts.csv")?;
            let changed = match &stored {
                _ if manifest.accounts_csv == old.accounts_csv => BTreeMap::new(),
                Some(stored) => changed_terms(&Accounts::parse(stored, "accounts.csv")?, &accounts, &old),
                None => changed_terms(&stored_accounts(store, &old)?, &accounts, &old),
            };
            (accounts, changed)
        }
        None => (stored_accounts(store, &old)?, BTreeMap::new()),
    };
    report.notices.extend(currency_notices(&changed, &accounts));
    let terms = super::ingest::fold::AccountTerms { accounts: &accounts, changed: &changed };
    let mut ledger = rollups.write(store, id, &old, &mut manifest, terms, &syncer)?;
    super::changes::book(&mut ledger, &applied.bookings, &accounts)?;
    let corrections = match applied.rows.is_empty() {
        true => None,
        false => {
            let name = format!("corrections/{id}.csv");
            let path = store.join(&name);
            create_parent(&path)?;
            let bytes = super::ingest::corrections::to_csv(&applied.rows)?;
            super::write_synced(&path, &bytes)?;
            sums.insert(path, crate::checksum::FileSum::of(&bytes));
            Some(name)
        }
    };
    let changes = match ledger.is_empty() {
        true => None,
        false => {
            let name = format!("changes/{id}.csv");
            let path = store.join(&name);
            create_parent(&path)?;
            let bytes = super::changes::to_csv(&ledger)?;
            super::write_synced(&path, &bytes)?;
            sums.insert(path, crate::checksum::FileSum::of(&bytes));
            Some(name)
        }
    };
    // Every records, index and rollup file is on disk before the commit
    // point, its sum computed as it was written.
    sums.extend(syncer.wait()?);
    let total = report.total();
    manifest.generation = old.generation + 1;
    manifest.sources.extend(inventory.files.iter().map(|f| super::source_name(&f.name, id)));
    manifest.ingests.push(super::IngestLog {
        id: id.to_owned(),
        files: inventory.files.len() as u64,
        rows: total,
        rejected: report.rejected_file.as_ref().map(|_| format!("rejected/{id}.csv")),
        generation: Some(manifest.generation),
        changes,
        corrections,
        stored_superseded: report.stored_superseded,
        stored_withdrawn: report.stored_withdrawn,
    });
    for folder in ["records", "index", "rollups", "accounts", "resources", "changes", "corrections"] {
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

/// The accounts with rollups in `old` whose zone (UTC without one) or
/// currency (USD without one) is another in `accounts` than in
/// `published`: each with its published terms. Their rows are booked
/// again (`MonthSums::rebook_row`).
fn changed_terms(published: &Accounts, accounts: &Accounts, old: &Manifest) -> BTreeMap<String, PublishedTerms> {
    let zone = |accounts: &Accounts, id: &str| accounts.get(id).and_then(|a| a.timezone).unwrap_or(chrono_tz::UTC);
    old.rollups
        .keys()
        .filter_map(|id| {
            let currency_changes = published.currency(id) != accounts.currency(id);
            let terms = PublishedTerms { zone: zone(published, id), currency_changes };
            (currency_changes || terms.zone != zone(accounts, id)).then(|| (id.clone(), terms))
        })
        .collect()
}

/// A warning for each account of `changed` whose currency changes: its
/// stored amounts are now shown in the new currency, and its months are
/// restated in the change ledger.
fn currency_notices(changed: &BTreeMap<String, PublishedTerms>, accounts: &Accounts) -> Vec<crate::error::Notice> {
    changed
        .iter()
        .filter(|(_, terms)| terms.currency_changes)
        .map(|(id, _)| {
            crate::error::Notice(format!(
                "account {id}: its currency is now {}: its stored amounts are unchanged and shown in {0}; every \
                 month it has records in is booked as restated (see `telemeter changes`)",
                accounts.currency(id)
            ))
        })
        .collect()
}

/// The accounts a store's generation `old` lists, checked against their
/// sum; none when it lists no accounts file.
fn stored_accounts(store: &Path, old: &Manifest) -> Result<crate::records::accounts::Accounts> {
    let Some(name) = &old.accounts_csv else { return Ok(Default::default()) };
    let listed = old.file(store, name)?;
    let path = listed.path();
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    listed.check(&bytes)?;
    crate::records::accounts::Accounts::parse(&bytes, "accounts.csv")
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

/// The rows an ingest sets aside, on disk in the store's `rejected/`
/// folder as they come (never held: a delivery may set aside every row of
/// a day) until the publish writes them as `rejected/<ingest>.csv`: the
/// voids' rows first, then the kinds', whatever order they were read in.
/// A run that fails deletes them; a killed one leaves them to the
/// collection of unlisted files.
#[derive(Debug)]
pub(in crate::store) struct RejectedRows {
    pub(in crate::store) voids: crate::records::bad_rows::RejectSpool,
    pub(in crate::store) kinds: crate::records::bad_rows::RejectSpool,
}

impl RejectedRows {
    pub(in crate::store) fn new(store: &Path, id: &str) -> RejectedRows {
        let spool = |part: &str| {
            crate::records::bad_rows::RejectSpool::new(store.join("rejected").join(format!("{id}.{part}.part")))
        };
        RejectedRows { voids: spool("voids"), kinds: spool("kinds") }
    }

    pub(in crate::store) fn is_empty(&self) -> bool {
        self.voids.is_empty() && self.kinds.is_empty()
    }

    /// The spools in the file's order.
    pub(in crate::store) fn into_spools(self) -> Vec<crate::records::bad_rows::RejectSpool> {
        vec![self.voids, self.kinds]
    }
}

/// What an ingest leaves to the publish: its rollups, what its
/// corrections did, and the rows it set aside.
pub(in crate::store) struct Folded {
    pub(in crate::store) rollups: Rollups,
    pub(in crate::store) applied: Applied,
    pub(in crate::store) set_aside: RejectedRows,
}

/// The folders of the store that hold generation files.
pub(in crate::store) const GENERATION_FOLDERS: [&str; 8] =
    ["records", "index", "rollups", "accounts", "rejected", "resources", "changes", "corrections"];

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
pub(in crate::store) fn collect_garbage(store: &Path, keep: &[&Manifest]) -> usize {
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
    for path in unlisted_files(store, &listed) {
        removed += usize::from(std::fs::remove_file(&path).is_ok());
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

/// The files of the generation folders whose name (relative to `store`)
/// is not in `listed`. A folder that is missing or cannot be read all
/// through: what was found.
pub(in crate::store) fn unlisted_files(store: &Path, listed: &std::collections::HashSet<&str>) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for folder in GENERATION_FOLDERS {
        let _ = crate::records::files::walk(&store.join(folder), &mut files);
    }
    files.retain(|path| {
        let name: Vec<&str> =
            path.strip_prefix(store).map(|r| r.iter().filter_map(|part| part.to_str()).collect()).unwrap_or_default();
        !listed.contains(name.join("/").as_str())
    });
    files
}

/// Deletes the kept manifests (`manifests/<generation>.json`) but the
/// newest [`KEEP_MANIFESTS`](super::KEEP_MANIFESTS) and those of `generations`;
/// returns how many were deleted. Files whose name is not a generation's
/// are left alone.
fn collect_kept_manifests(store: &Path, generations: &std::collections::HashSet<u64>) -> usize {
    let kept = super::kept_manifests(store).unwrap_or_default();
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

/// Writes new rows of `kind` as the records file and the index file number
/// `number` of ingest `id` (both engines name them so); returns their
/// names.
pub(in crate::store) fn write_files<R: RecordRows + ?Sized>(
    store: &Path,
    id: &str,
    number: u64,
    kind: Kind,
    views: &R,
    entries: &[&[IndexEntry]],
    syncer: &Syncer,
) -> Result<Written> {
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
    Ok(Written { records: name, index: index_name })
}

/// The names (relative to the store) of a records file and its index
/// file, as [`write_files`] wrote them.
pub(in crate::store) struct Written {
    /// The records file.
    pub(in crate::store) records: String,
    /// Its index file.
    pub(in crate::store) index: String,
}

/// What publishing a new accounts file over the stored one does to the
/// accounts' API tokens, which the command says: the token is the one
/// credential `serve` checks, so a change an operator did not make (a
/// token rotated with `accounts set-token` and not in the data folder) must
/// not pass unseen.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenChanges {
    /// Accounts that had a token and have none (no row, or an empty
    /// `auth_token_sha256`): their requests are refused.
    pub dropped: Vec<String>,
    /// Accounts whose token is another one: the stored one stops working,
    /// and the new file's (perhaps one rotated away) works again.
    pub replaced: Vec<String>,
}

impl TokenChanges {
    /// The changes from accounts file `old` to `new`. A file that does not
    /// parse has no tokens.
    pub(in crate::store) fn of(old: &[u8], new: &[u8]) -> TokenChanges {
        use crate::records::accounts::Accounts;
        let (Ok(old), Ok(new)) = (Accounts::parse(old, "accounts.csv"), Accounts::parse(new, "accounts.csv")) else {
            return TokenChanges::default();
        };
        let mut changes = TokenChanges::default();
        for account in old.iter() {
            let Some(token) = &account.auth_token_sha256 else { continue };
            match new.get(&account.auth_id).and_then(|row| row.auth_token_sha256.as_ref()) {
                None => changes.dropped.push(account.auth_id.clone()),
                Some(other) if other != token => changes.replaced.push(account.auth_id.clone()),
                Some(_) => {}
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An id that is not a plain name is a bad option (nothing is created);
    /// a store past its input-file limit is a limit of the engine.
    #[test]
    fn a_bad_id_is_usage_and_too_many_files_a_limit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("store");
        for id in ["", "../x", "a b", ".", "..", ".hidden", "-x"] {
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
            "rollups/MA001SHGA32ZDQYG9N8T-0123456789abcdef/i2-900s.parquet",
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
    fn a_token_is_dropped_when_the_new_row_has_none_and_replaced_when_it_differs() {
        let hash = |c: &str| c.repeat(64);
        let old = format!(
            "auth_id,auth_token_sha256\nA,{}\nB,{}\nC,{}\nD,\nE,{}\n",
            hash("a"),
            hash("b"),
            hash("c"),
            hash("e")
        );
        let new = format!("auth_id,auth_token_sha256\nA,\nB,{}\nD,{}\nE,{}\n", hash("2"), hash("d"), hash("e"));
        let (old, new) = (old.as_bytes(), new.as_bytes());
        let changes = TokenChanges::of(old, new);
        assert_eq!(changes.dropped, ["A", "C"]);
        // D gains a token and E keeps its own: neither is said.
        assert_eq!(changes.replaced, ["B"]);
        assert_eq!(TokenChanges::of(old, b"auth_id\nA\n").dropped, ["A", "B", "C", "E"]);
        assert_eq!(TokenChanges::of(b"not, a file", new), TokenChanges::default());
    }
}
