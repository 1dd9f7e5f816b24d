//! The ingested store: records checked and deduplicated once, kept as
//! Parquet, with 15-minute rollups that every report is answered from.
//!
//! Layout of `STORE/` (every path below is relative to it):
//!
//! ```text
//! manifest.json                       the one published pointer (see below)
//! manifests/<generation>.json         the manifest of each recent publish,
//!                                     kept (the newest 8, and any a lease
//!                                     holds): `store repair` restores a lost
//!                                     or damaged manifest.json from them
//! accounts/<ingest>.csv               accounts.csv as of an ingest (or
//!                                     accounts/g<generation>.csv as of an
//!                                     `accounts set-token`: `accounts.rs`)
//! records/<kind>/<ingest>-<n>.parquet normalized records, contract columns in
//!                                     natural types (timestamp ns UTC,
//!                                     DECIMAL(38,9) money), plus source_file
//!                                     and source_line for audit
//! index/<kind>/<ingest>-<n>.idx       dedup index: record_id hash -> content
//!                                     hash and place (source, line), grouped
//!                                     by id-hash partition (see `index.rs`)
//! rollups/<account>/<ingest>-<g>s.parquet
//!                                     one file per account and grain g (900
//!                                     and 86400 s): every rollup row of the
//!                                     account at that grain, sorted by slot
//! rejected/<ingest>.csv               rows set aside by an ingest
//! changes/<ingest>.csv                what an ingest changed in each
//!                                     account's months (`changes.rs`)
//! corrections/<ingest>.csv            the versions above revision 0 and
//!                                     the voids an ingest stored, and the
//!                                     stored versions it dropped
//!                                     (`ingest/corrections.rs`)
//! readers/<generation>.<pid>.<random>.lease
//!                                     a live reader's lease on a generation
//!                                     (`lease.rs`): collection keeps its files
//! resources/<ingest>.sqlite           endpoints, registrations, recordings as
//!                                     of an ingest (`resources::generation`:
//!                                     the previous one plus that ingest's inputs)
//! deletions.sqlite                    recordings deleted through the API:
//!                                     written at runtime (by the server),
//!                                     outside the generations
//! deletions.sqlite.count              how many deletions it holds: its loss
//!                                     is found (`resources::deletions`)
//! rate.sqlite                         the servers' shared rate-limit log
//!                                     (runtime state a crash may lose)
//! .first-ingest                       while the first ingest works: the
//!                                     folder is its new store
//! token.key                           the store's page-token key: random,
//!                                     mode 0600, made with the store
//! ```
//!
//! Published files are never modified. An ingest writes new files, then
//! publishes them by writing `manifest.json.tmp-<ingest>` and renaming it
//! over `manifest.json` (atomic on POSIX file systems), then keeps its copy
//! as `manifests/<generation>.json`. Readers read the manifest
//! once and only open files it lists, so a crash or a kill at any point
//! leaves the previous generation answering; files of an unpublished ingest
//! are orphans that the next ingest ignores (and may overwrite). A reader
//! holds a lease on the generation it read ([`Store::open`], `lease.rs`);
//! after a publish, collection deletes only files that neither the new, the
//! previous, nor any leased generation lists.
//!
//! Checksums (since format 6): the manifest records the length and
//! XXH3-128 of every file it lists (`files`; `crate::checksum`), computed
//! by the writers from the bytes as they write them, and its own
//! XXH3-128 (`checksum`, of its text without that field). Every reader
//! checks a file whole against its sum before it uses any of it
//! ([`Listed::check`]): the store answer hashes the rollup file it read, an
//! ingest the index files and the previous rollups it reads, and so on;
//! a mismatch is an error naming the file and saying to run `telemeter
//! store verify` and `store repair` (`verify.rs`). A folder without a
//! readable `manifest.json` is a new store only when it is empty or its
//! first ingest's (`.first-ingest`); otherwise every command refuses it,
//! nothing deleted ([`WithoutManifest`]). A `manifest.json` older than a
//! whole kept one was put back by hand: what builds on it (an ingest,
//! `accounts set-token`, `store repair`) refuses it, as its collection
//! would delete the later generation ([`kept_after`]).
//!
//! The columns of records and rollup files, with their types and
//! encodings, are declared in `layout.rs`, the files' one contract.
//!
//! Rollups are keyed by (auth_id, subaccount, slot, product, type, country,
//! direction, error_code, hangup_cause), slot = the 15-minute UTC slot start,
//! with the record count (Int64), the units (DECIMAL(38,0), since a group
//! sums counts of up to `i64::MAX` each; since store format 4) and DECIMAL(38,9)
//! sums of money and durations; charges are product `other`
//! with their description as type. Every time zone in use today has an
//! offset that is a multiple of 15 minutes, so every report bucket is a
//! union of slots; when a request's buckets are not (a historical offset),
//! it is answered from the stored records instead ([`Store::aggregate`]).
//!
//! One account's request (`summary`, the server) reads only that account's
//! rollup file at the request's grain and gets its rows in the report's
//! order (`Store::account_rows`, `answer.rs`); several accounts (`report`)
//! go through [`Store::aggregate`].

pub mod accounts;
pub(crate) mod answer;
#[doc(hidden)]
pub mod bench_hooks;
pub mod changes;
pub mod finding;
mod generation;
pub mod history;
pub(crate) mod index;
pub mod ingest;
mod layout;
pub mod lease;
pub mod location;
mod parquet_io;
mod parquet_out;
pub mod rebuild;
mod rle;
pub(crate) mod rollup;
pub mod spark;
pub mod verify;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::aggregate::rows::{AccountRows, Rows};
use crate::aggregate::{self, Aggregate, AggregateOptions, GroupKey, Selector, Span, Tally, Totals};
use crate::error::{Error, Result};
use crate::money::Amount;
use crate::records::accounts::Accounts;
use crate::records::files::{Format, InputFile, Inventory};
use crate::records::Kind;

pub use generation::TokenChanges;
pub use ingest::{
    ingest, BuildResources, IngestOptions, IngestProgress, IngestReport, OnProgress, PreviousResources, ResourceChanges,
};

/// The finest rollup slot, in seconds: every report bucket is a union of
/// them (in every zone whose offset is a multiple of 15 minutes).
pub const SLOT_SECONDS: i64 = 900;

/// The rollup grains kept, finest first: the same rows summed by 15-minute
/// and day UTC slots. A request is answered from the coarsest grain that
/// divides every one of its bucket boundaries (day for UTC days and
/// months, 15 minutes for hours and for days of other zones), so that a
/// long window reads few rows.
///
/// There is no hour grain (store format 4 had one): an hourly window is at
/// most 7 days (api.md), so it reads at most a week of 15-minute rows, and
/// the hour files were a third of the rollup rows an ingest writes.
pub const GRAINS: [i64; 2] = [SLOT_SECONDS, 86_400];

/// The manifest's file name.
pub const MANIFEST: &str = "manifest.json";

/// The resources database of stores written before resources were part of
/// the generations (read until an ingest brings resource inputs).
pub const LEGACY_RESOURCES_DB: &str = "resources.sqlite";

/// The database of recordings deleted through the API (runtime state).
pub const DELETIONS_DB: &str = "deletions.sqlite";

/// The store's page-token key file (also the name of the state
/// directory's key file for raw data directories).
pub const TOKEN_KEY: &str = "token.key";

/// The version of the layout this code writes.
pub const FORMAT_VERSION: u32 = 7;

/// The oldest layout this code reads: format 6 is format 7 without
/// corrections files (an older store has no correction to remember);
/// format 4 is format 5 plus hour rollup files, which are not read (and
/// not listed after the store's next ingest); format 5 is format 6
/// without checksums (its files are read unchecked until the next ingest
/// records their sums). A telemeter that reads only up to format 6 refuses
/// a format 7 store, whose corrections it would not apply.
pub const OLDEST_FORMAT: u32 = 4;

/// The first format whose manifest holds the sum of every file it lists
/// and of itself.
pub const SUMS_FORMAT: u32 = 6;

/// The folder of kept manifests: `manifests/<generation>.json`, each the
/// copy of a published `manifest.json`.
pub const KEPT_MANIFESTS: &str = "manifests";

/// The file a store's first ingest makes before anything else and removes
/// once it has published: a folder without a manifest that holds it is
/// that ingest's, not a store whose manifest was lost.
pub const FIRST_INGEST: &str = ".first-ingest";

/// How many kept manifests collection leaves (the newest), besides those
/// of generations a reader holds a lease on.
pub const KEEP_MANIFESTS: usize = 8;

pub use crate::checksum::{Expected, FileSum};

/// Creates the folder `path` goes in, when missing.
/// How [`Manifest::sources`] names input file `file` of ingest `ingest`.
pub(crate) fn source_name(file: &str, ingest: &str) -> String {
    format!("{file} (ingest {ingest})")
}

/// The input file of a source name of ingest `ingest` ([`source_name`]).
pub(crate) fn source_file<'a>(source: &'a str, ingest: &str) -> &'a str {
    source.strip_suffix(&format!(" (ingest {ingest})")).unwrap_or(source)
}

fn create_parent(path: &Path) -> Result<()> {
    match path.parent() {
        Some(parent) => std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e)),
        None => Ok(()),
    }
}

/// The published state of a store: every file of the current generation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Layout version ([`FORMAT_VERSION`]).
    pub format: u32,
    /// Number of ingests published so far.
    pub generation: u64,
    /// The accounts file, when an ingest found one.
    pub accounts_csv: Option<String>,
    /// Input files of every published ingest, as named in messages; the
    /// dedup index refers to them by position.
    pub sources: Vec<String>,
    /// Files and counts per record kind, by kind name.
    pub kinds: BTreeMap<String, KindFiles>,
    /// The rollup files of each account, by grain in seconds.
    pub rollups: BTreeMap<String, BTreeMap<i64, String>>,
    /// The resources database of this generation (endpoints,
    /// registrations, recordings), once an ingest brought any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<String>,
    /// What each published ingest did, oldest first.
    pub ingests: Vec<IngestLog>,
    /// The length and XXH3-128 of every file listed above, by name (since
    /// format 6; empty in older manifests).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, FileSum>,
    /// XXH3-128 of this manifest as written without this field (since
    /// format 6): a manifest whose text does not match it is damaged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
}

/// The files of one record kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindFiles {
    /// Normalized record files.
    pub records: Vec<String>,
    /// Dedup index files.
    pub index: Vec<String>,
    /// Records stored.
    pub count: u64,
    /// Sum of their amounts, exact.
    pub amount: String,
}

/// An index file and the records file it indexes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Indexed<'a> {
    pub(crate) index: &'a str,
    pub(crate) records: &'a str,
}

impl KindFiles {
    /// Each index file with the records file it indexes: the manifest
    /// lists them in step (an ingest adds both, a repair rebuilds an index
    /// file in its place under a name of its own).
    pub(crate) fn indexed(&self, kind: Kind) -> Result<Vec<Indexed<'_>>> {
        if self.index.len() != self.records.len() {
            return Err(Error::Internal(format!(
                "the manifest lists {} {kind} index files for {} records files",
                self.index.len(),
                self.records.len()
            )));
        }
        Ok(self.index.iter().zip(&self.records).map(|(index, records)| Indexed { index, records }).collect())
    }

    /// [`KindFiles::amount`] as an exact sum (zero when empty); a damaged
    /// one is an error naming `store`'s manifest and the kind.
    pub(crate) fn total_amount(&self, kind: Kind, store: &Path) -> Result<Amount> {
        match self.amount.as_str() {
            "" => Ok(Amount::ZERO),
            text => Amount::parse_total(text.as_bytes())
                .map_err(|e| Error::io(store.join(MANIFEST), format!("amount of {kind} '{text}' {e}"))),
        }
    }
}

/// One published ingest.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IngestLog {
    /// The ingest's id (also in its file names).
    pub id: String,
    /// Input files read.
    pub files: u64,
    /// Rows read, used (stored), set aside and duplicates (of a stored or
    /// earlier row), over every kind; written as fields of the entry.
    #[serde(flatten)]
    pub rows: Tally,
    /// The rejected-rows file, when rows were set aside.
    pub rejected: Option<String>,
    /// The generation this ingest published (absent in the logs of
    /// ingests by an older telemeter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<u64>,
    /// Its ledger of changes (`changes/<ingest>.csv`, `changes.rs`), when
    /// it changed any account's months.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<String>,
    /// Its corrections file (`corrections/<ingest>.csv`), when it stored a
    /// revision or a void, or dropped a stored version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrections: Option<String>,
    /// Stored records (of earlier ingests) a higher revision of this
    /// ingest replaced.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stored_superseded: u64,
    /// Stored records (of earlier ingests) a void of this ingest withdrew.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stored_withdrawn: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Manifest {
    /// Reads `STORE/manifest.json`; `None` when the store has none yet.
    pub fn read(store: &Path) -> Result<Option<Manifest>> {
        Ok(Manifest::read_bytes(store)?.map(|(manifest, _)| manifest))
    }

    /// [`Manifest::read`], with the bytes read.
    pub fn read_bytes(store: &Path) -> Result<Option<(Manifest, Vec<u8>)>> {
        let path = store.join(MANIFEST);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(&path, e)),
        };
        Manifest::parse(&bytes, &path).map(|manifest| Some((manifest, bytes)))
    }

    /// Parses the manifest `bytes` of `path` (named in messages); a
    /// manifest of format 6 or later must match its own checksum.
    pub fn parse(bytes: &[u8], path: &Path) -> Result<Manifest> {
        // The store's folder: a kept manifest's is two levels up.
        let folder = path.parent().unwrap_or(Path::new("."));
        let store = match folder.file_name() {
            Some(name) if name == KEPT_MANIFESTS => folder.parent().unwrap_or(Path::new(".")),
            _ => folder,
        };
        let repair = || repair_hint(store);
        let manifest: Manifest = serde_json::from_slice(bytes).map_err(|e| {
            Error::io(path, format!("not a store manifest ({e}): damaged or not a manifest; {}", repair()))
        })?;
        if !(OLDEST_FORMAT..=FORMAT_VERSION).contains(&manifest.format) {
            return Err(Error::io(
                path,
                format!(
                    "store format {} is not supported (this build reads {OLDEST_FORMAT} to {FORMAT_VERSION})",
                    manifest.format
                ),
            ));
        }
        if manifest.format >= SUMS_FORMAT && manifest.checksum.as_deref() != Some(manifest.own_checksum()?.as_str()) {
            return Err(Error::io(
                path,
                format!("damaged: the manifest does not match its own checksum; {}", repair()),
            ));
        }
        Ok(manifest)
    }

    /// XXH3-128 of this manifest's text without its `checksum` field.
    fn own_checksum(&self) -> Result<String> {
        let unsummed = Manifest { checksum: None, ..self.clone() };
        let text =
            serde_json::to_vec_pretty(&unsummed).map_err(|e| Error::Internal(format!("cannot write manifest: {e}")))?;
        Ok(FileSum::of(&text).xxh3)
    }

    /// The manifest's text as published: its checksum set (format 6 or
    /// later).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut manifest = self.clone();
        manifest.checksum = (manifest.format >= SUMS_FORMAT).then(|| self.own_checksum()).transpose()?;
        serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Internal(format!("cannot write manifest: {e}")))
    }

    /// Publishes this manifest atomically: a temporary file, synced,
    /// renamed over `manifest.json`, the directory synced; then its copy
    /// kept as `manifests/<generation>.json`.
    pub fn publish(&self, store: &Path, ingest_id: &str) -> Result<()> {
        let text = self.to_bytes()?;
        let temporary = store.join(format!("{MANIFEST}.tmp-{ingest_id}"));
        write_synced(&temporary, &text)?;
        // A first ingest's marker goes before its commit: a folder that has
        // held a published manifest is never taken for a new store again
        // (killed in between, it holds a run's files and no marker: refused,
        // nothing deleted).
        let marker = store.join(FIRST_INGEST);
        if marker.exists() {
            std::fs::remove_file(&marker).map_err(|e| Error::io(&marker, e))?;
            sync_dir(store)?;
        }
        let path = store.join(MANIFEST);
        std::fs::rename(&temporary, &path).map_err(|e| Error::io(&path, e))?;
        sync_dir(store)?;
        // Kept after the commit, so that no kept manifest names a
        // generation that was never published (a killed run's would be
        // restored by `store repair`). Best effort: the generation is
        // published, and the next publisher writes a kept copy that is
        // missing or not whole ([`Manifest::keep_current`]).
        let _ = self.keep(store);
        Ok(())
    }

    /// Writes this published manifest's kept copy unless it is there
    /// whole (the same bytes): a publish killed or failed after its commit
    /// may have left none, or a cut one.
    pub fn keep_current(&self, store: &Path) -> Result<()> {
        if self.generation == 0 || self.format < SUMS_FORMAT {
            return Ok(());
        }
        let kept = store.join(KEPT_MANIFESTS).join(format!("{}.json", self.generation));
        match std::fs::read(&kept) {
            Ok(bytes) if bytes == self.to_bytes()? => Ok(()),
            _ => self.keep(store),
        }
    }

    /// Writes this published manifest's kept copy,
    /// `manifests/<generation>.json`.
    pub fn keep(&self, store: &Path) -> Result<()> {
        let kept = store.join(KEPT_MANIFESTS);
        std::fs::create_dir_all(&kept).map_err(|e| Error::io(&kept, e))?;
        // Whole or not at all: written beside, then renamed.
        let (path, temporary) = (kept.join(format!("{}.json", self.generation)), kept.join(".tmp-kept"));
        write_synced(&temporary, &self.to_bytes()?)?;
        std::fs::rename(&temporary, &path).map_err(|e| Error::io(&path, e))?;
        sync_dir(&kept)
    }

    /// Rows its ingests set aside (never stored), over all of them.
    pub fn set_aside(&self) -> u64 {
        self.ingests.iter().map(|ingest| ingest.rows.set_aside).sum()
    }

    /// Every file this manifest lists, by name (relative to the store):
    /// records and index files, rollups, the accounts file, the
    /// resources database, the rejected-rows files.
    pub fn listed(&self) -> Vec<&str> {
        let mut names = Vec::new();
        for files in self.kinds.values() {
            names.extend(files.records.iter().chain(&files.index).map(String::as_str));
        }
        names.extend(self.rollups.values().flat_map(|by_grain| by_grain.values()).map(String::as_str));
        names.extend(self.accounts_csv.as_deref());
        names.extend(self.resources.as_deref());
        names.extend(self.ingests.iter().filter_map(|i| i.rejected.as_deref()));
        names.extend(self.ingests.iter().filter_map(|i| i.changes.as_deref()));
        names.extend(self.ingests.iter().filter_map(|i| i.corrections.as_deref()));
        names
    }

    /// The listed file `name` of `store`, with the sum it must match.
    pub fn file<'a>(&'a self, store: &'a Path, name: &'a str) -> Result<Listed<'a>> {
        let sum = self.files.get(name);
        if sum.is_none() && self.format >= SUMS_FORMAT {
            return Err(Error::io(
                store.join(MANIFEST),
                format!("damaged: no checksum for '{name}'; {}", repair_hint(store)),
            ));
        }
        Ok(Listed { store, name, sum })
    }

    /// The files of `kind` (empty when none are stored).
    pub fn kind(&self, kind: Kind) -> KindFiles {
        self.kinds.get(kind.name()).cloned().unwrap_or_default()
    }
}

pub(crate) use crate::durable::{sync_dir, write_synced};

/// What a message about a damaged file of `store` says to do.
pub fn repair_hint(store: &Path) -> String {
    let store = store.display();
    format!("run `telemeter store verify --store {store}` to list the damaged files and `telemeter store repair --store {store}` to recover")
}

/// A file a manifest lists, and the sum its bytes must have (`None` in a
/// manifest older than format 6: not checked).
#[derive(Clone, Copy, Debug)]
pub struct Listed<'a> {
    /// The store directory.
    pub store: &'a Path,
    /// The file's name, relative to the store.
    pub name: &'a str,
    /// Its length and hash, from the manifest.
    pub sum: Option<&'a FileSum>,
}

impl Listed<'_> {
    /// The file's path.
    pub fn path(&self) -> PathBuf {
        self.store.join(self.name)
    }

    /// The sum the file's bytes must have, for a reader that checks them
    /// as it reads ([`InputFile::sum`]); `None` when the manifest has none.
    pub fn expected(&self) -> Option<Expected> {
        self.sum.map(|sum| Expected { sum: sum.clone(), listed_in: MANIFEST, advice: repair_hint(self.store) })
    }

    /// Checks `bytes`, read from the file, against its sum: a mismatch is
    /// an error naming the file, before anything uses the bytes.
    pub fn check(&self, bytes: &[u8]) -> Result<()> {
        match self.expected() {
            Some(expected) => expected.check(&self.path(), bytes),
            None => Ok(()),
        }
    }

    /// Reads the whole file and checks it against its sum.
    pub fn check_file(&self) -> Result<()> {
        let Some(expected) = self.expected() else { return Ok(()) };
        let path = self.path();
        let found = FileSum::of_file(&path).map_err(|e| Error::io(&path, e))?;
        expected.compare(&path, &found)
    }
}

/// Whether `store` holds kept manifests (`manifests/*.json`): a store this
/// build published at least once.
pub fn has_kept_manifests(store: &Path) -> bool {
    std::fs::read_dir(store.join(KEPT_MANIFESTS))
        .map(|entries| entries.flatten().any(|e| e.file_name().to_str().is_some_and(|n| n.ends_with(".json"))))
        .unwrap_or(false)
}

/// The newest generation after `generation` whose kept manifest
/// (`manifests/<n>.json`) is whole: one was published after the manifest
/// of `generation`. A damaged kept copy does not count (`store repair`
/// passes over it to an older one).
pub fn kept_after(store: &Path, generation: u64) -> Option<u64> {
    kept_manifests(store)
        .ok()?
        .into_iter()
        .take_while(|(kept, _)| *kept > generation)
        .find(|(kept, path)| read_kept(path, *kept).is_some())
        .map(|(kept, _)| kept)
}

/// The kept manifests of `store` (`manifests/<generation>.json`), newest
/// generation first: none when the folder is missing.
pub(crate) fn kept_manifests(store: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let folder = store.join(KEPT_MANIFESTS);
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&folder, e)),
    };
    let mut kept: Vec<(u64, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let generation = entry.file_name().to_str()?.strip_suffix(".json")?.parse::<u64>().ok()?;
            Some((generation, entry.path()))
        })
        .collect();
    kept.sort_unstable_by_key(|b| std::cmp::Reverse(b.0));
    Ok(kept)
}

/// The kept manifest at `path` when it is whole and of `generation`.
pub(crate) fn read_kept(path: &Path, generation: u64) -> Option<Manifest> {
    read_kept_or_why(path, generation).ok().map(|(manifest, _)| manifest)
}

/// The kept manifest at `path` and its bytes, when it reads whole as
/// generation `generation`; else why not.
pub(crate) fn read_kept_or_why(path: &Path, generation: u64) -> std::result::Result<(Manifest, Vec<u8>), String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    match Manifest::parse(&bytes, path) {
        Ok(manifest) if manifest.generation == generation => Ok((manifest, bytes)),
        Ok(manifest) => Err(format!("it holds generation {}, not {generation}", manifest.generation)),
        Err(e) => Err(e.chain()),
    }
}

/// What an ingest, a reader and `store verify` say of a manifest of
/// generation `generation` behind the kept one of `newest`.
pub fn manifest_behind(store: &Path, generation: u64, newest: u64) -> String {
    let kept = store.join(KEPT_MANIFESTS).join(format!("{newest}.json"));
    format!(
        "is generation {generation}, but generation {newest} was published after it ({}): an older \
         manifest was put back; nothing was changed. To return to generation {newest}, copy that file over \
         {MANIFEST}; to roll back on purpose, delete the kept manifests above {generation}",
        kept.display()
    )
}

/// What a store folder without a `manifest.json` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WithoutManifest {
    /// Nothing (or no folder, or only the writer lock): a new store.
    Empty,
    /// The files of a first ingest that has not published
    /// ([`FIRST_INGEST`]).
    FirstIngest,
    /// Kept manifests: a store whose `manifest.json` was lost.
    Lost,
    /// Other files: not a store, or one whose manifests were all lost.
    Foreign,
}

impl WithoutManifest {
    /// What the folder `store`, which has no `manifest.json`, holds.
    pub fn of(store: &Path) -> WithoutManifest {
        if has_kept_manifests(store) {
            return WithoutManifest::Lost;
        }
        if store.join(FIRST_INGEST).exists() || first_commit_cut(store) {
            return WithoutManifest::FirstIngest;
        }
        // Hidden entries (the lock, `.DS_Store`, a `.gitkeep`) and a mount
        // point's `lost+found` are no one's data.
        let ours = |name: &std::ffi::OsStr| name.to_str().is_some_and(|n| n.starts_with('.') || n == "lost+found");
        let foreign = std::fs::read_dir(store)
            .is_ok_and(|mut entries| entries.any(|e| e.map_or(true, |e| !ours(&e.file_name()))));
        if foreign {
            WithoutManifest::Foreign
        } else {
            WithoutManifest::Empty
        }
    }

    /// Whether an ingest may make a new store there.
    pub fn may_start(self) -> bool {
        matches!(self, WithoutManifest::Empty | WithoutManifest::FirstIngest)
    }

    /// `Ok` when an ingest may make a new store in `store`, else why not.
    pub fn check_new(self, store: &Path) -> Result<()> {
        match self.may_start() {
            true => Ok(()),
            false => Err(self.error(store)),
        }
    }

    /// Why a command that needs a published generation refuses `store`.
    pub fn error(self, store: &Path) -> Error {
        match self {
            WithoutManifest::Lost => no_manifest(store),
            WithoutManifest::FirstIngest if generation::publisher_at_work(store) => Error::io(
                store,
                "has no generation published yet: its first ingest is at work (it holds .ingest.lock); try \
                 again when it ends",
            ),
            WithoutManifest::FirstIngest => Error::io(
                store,
                "has no generation published yet: its first ingest stopped before it published; run the \
                 ingest again",
            ),
            WithoutManifest::Empty => {
                Error::io(store, format!("not a telemeter store (no {MANIFEST}; run `telemeter ingest` first)"))
            }
            WithoutManifest::Foreign => Error::io(
                store,
                format!(
                    "holds files but no {MANIFEST} and no kept manifests: not a telemeter store, or one \
                     whose manifests were all lost; nothing was read, written or deleted (a new store \
                     needs a new or empty folder)"
                ),
            ),
        }
    }
}

/// Whether `store` holds the whole manifest of a generation 1 that was
/// never renamed into place: a first ingest killed at its commit, after
/// it removed its [`FIRST_INGEST`] marker (the manifest is written and
/// synced before), so the folder is that store's, unpublished.
fn first_commit_cut(store: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(store) else { return false };
    let prefix = format!("{MANIFEST}.tmp-");
    entries.flatten().any(|entry| {
        entry.file_name().to_str().is_some_and(|name| name.starts_with(&prefix))
            && std::fs::read(entry.path())
                .ok()
                .and_then(|bytes| Manifest::parse(&bytes, &entry.path()).ok())
                .is_some_and(|manifest| manifest.generation == 1)
    })
}

/// The error for a store folder that holds a store's files but no
/// manifest: refused by every command, nothing changed.
pub fn no_manifest(store: &Path) -> Error {
    Error::io(
        store,
        format!(
            "holds a store's files but no {MANIFEST} (deleted or lost); nothing was read, written or deleted; \
             run `telemeter store repair --store {}` to restore it from the kept manifests",
            store.display()
        ),
    )
}

/// A store opened for reading: its manifest, read once, and a lease on
/// that generation (its files stay until the last clone is dropped).
#[derive(Clone, Debug)]
pub struct Store {
    /// The store directory.
    pub dir: PathBuf,
    /// The generation this handle answers from.
    pub manifest: Manifest,
    /// The read lease, held for as long as a clone lives (its drop ends
    /// it); `None` when the store cannot be written (`unleased`).
    _lease: Option<Arc<lease::Lease>>,
    /// Why the store is read without a lease (read-only): then only the
    /// "one generation late" rule keeps its files, for one publish.
    pub unleased: Option<String>,
}

/// Refuses a `manifest.json` of `generation` behind a whole kept manifest
/// of a later one (an older manifest put back), which would answer with
/// older money: unless a publish raced this check and `manifest.json` is
/// that later generation now.
fn check_current(dir: &Path, generation: u64) -> Result<()> {
    let Some(newest) = kept_after(dir, generation) else { return Ok(()) };
    if Manifest::read(dir)?.is_some_and(|now| now.generation >= newest) {
        return Ok(());
    }
    Err(Error::io(dir.join(MANIFEST), manifest_behind(dir, generation, newest)))
}

/// How many times [`Store::open`] starts over when a publish races it.
const OPEN_ATTEMPTS: usize = 10;

impl Store {
    /// Opens a store written by [`ingest()`] at its current generation, and
    /// takes a lease on that generation: the manifest is read, the lease
    /// taken, and the manifest read again; a publish in between starts over
    /// (so that every collection that could remove these files sees the
    /// lease).
    pub fn open(dir: &Path) -> Result<Store> {
        let mut failure = None;
        for _ in 0..OPEN_ATTEMPTS {
            let Some((manifest, bytes)) = Manifest::read_bytes(dir)? else {
                return Err(WithoutManifest::of(dir).error(dir));
            };
            let generation = manifest.generation;
            let store = |lease, unleased| Store { dir: dir.to_owned(), manifest, _lease: lease, unleased };
            match lease::Lease::take(dir, generation, &bytes) {
                Ok(lease::Taken::Unwritable(why)) => return Ok(store(None, Some(why))),
                Ok(lease::Taken::Held(lease)) => {
                    if Manifest::read(dir)?.is_some_and(|now| now.generation == generation) {
                        check_current(dir, generation)?;
                        return Ok(store(Some(Arc::new(lease)), None));
                    }
                }
                Err(e) => failure = Some(e),
            }
        }
        Err(failure.unwrap_or_else(|| {
            Error::io(dir, format!("the store published {OPEN_ATTEMPTS} generations while it was being opened"))
        }))
    }

    /// The accounts copied in by the latest ingest (checked against their
    /// sum).
    pub fn accounts(&self) -> Result<Accounts> {
        match &self.manifest.accounts_csv {
            Some(name) => {
                let listed = self.manifest.file(&self.dir, name)?;
                let path = listed.path();
                let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
                listed.check(&bytes)?;
                Accounts::parse(&bytes, "accounts.csv")
            }
            None => Ok(Accounts::default()),
        }
    }

    /// Checks this generation's resources database against its sum, when
    /// it has one: for the resources layer, before it opens the file.
    pub fn check_resources(&self) -> Result<()> {
        match &self.manifest.resources {
            Some(name) => self.manifest.file(&self.dir, name)?.check_file(),
            None => Ok(()),
        }
    }

    /// The stored record files, as an inventory the raw engine can read,
    /// each with its sum: checked on the bytes the engine reads, before it
    /// parses any.
    pub fn record_files(&self) -> Result<Inventory> {
        let mut inventory = Inventory::default();
        // The versions a correction dropped are not read.
        let registries = ingest::corrections::registries(&self.dir, &self.manifest)?;
        for kind in Kind::ALL {
            let dropped = registries.get(&kind).map(|r| &r.dropped);
            for name in self.manifest.kind(kind).records {
                let file = self.record_file(kind, name)?;
                if let Some(dropped) = dropped.filter(|d| d.iter().any(|at| *at.records == *file.name)) {
                    let rows = ingest::corrections::rows_of(&file.path, &file.name, dropped)?;
                    inventory.skipped_rows.insert(inventory.files.len() as u32, rows.into_keys().collect());
                }
                inventory.files.push(file);
            }
        }
        Ok(inventory)
    }

    /// The stored records file `name` of `kind`, as an input file with its
    /// sum (checked by the reader on the bytes it reads).
    pub(crate) fn record_file(&self, kind: Kind, name: String) -> Result<InputFile> {
        let sum = self.manifest.file(&self.dir, &name)?.expected();
        let path = self.dir.join(&name);
        let size = std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?.len();
        Ok(InputFile { kind, path, name, format: Format::Parquet, size, sum })
    }

    /// The rows of `account` that `selector` keeps, in the report's order,
    /// straight from the account's rollup file: `None` when the selector's
    /// buckets are not unions of rollup slots (then [`Store::aggregate`]
    /// reads the stored records).
    pub(crate) fn account_rows(&self, selector: &Selector, account: &str) -> Result<Option<AccountRows>> {
        let Some(grain) = coarsest_grain(selector) else { return Ok(None) };
        let none = || Ok(Some(AccountRows::default()));
        if !selector.accounts.contains(account) {
            return none();
        }
        let (Some(buckets), Some(files)) = (selector.bucketing.of(account), self.manifest.rollups.get(account)) else {
            return none();
        };
        if buckets.is_empty() {
            return none();
        }
        let Some(file) = files.get(&grain) else {
            return Err(Error::io(&self.dir, format!("no {grain}-second rollups of account {account}")));
        };
        answer::account_rows(self.manifest.file(&self.dir, file)?, account, grain, selector, buckets).map(Some)
    }

    /// When the records of `account` lie: its finest rollup file's first
    /// slot start to its last slot's end (a second before). `None` when
    /// the store holds no record of it. Reads one column of one file.
    pub fn account_span(&self, account: &str) -> Result<Option<Span>> {
        let Some((grain, file)) = self.manifest.rollups.get(account).and_then(|files| files.iter().next()) else {
            return Ok(None);
        };
        let range = rollup::slot_range(self.manifest.file(&self.dir, file)?)?;
        Ok(range.map(|(first, last)| Span { first, last: last.saturating_add(grain - 1) }))
    }

    /// What `selector` keeps, summed: from the rollups when every bucket of
    /// the selector is a union of 15-minute slots, otherwise from the stored
    /// records. Tallies count stored records (read = used; `selected` = the
    /// records behind the kept groups); the inventory is empty (no input
    /// files are read).
    pub fn aggregate(&self, selector: &Selector) -> Result<Aggregate> {
        let Some(grain) = coarsest_grain(selector) else {
            return aggregate::aggregate_files(self.record_files()?, selector, AggregateOptions::default());
        };
        // Each account's rows are read as one account's request reads them
        // (`answer.rs`: the row groups of the window, the threads sharing
        // the work), from the coarsest of its files that answers its own
        // buckets; then the owned keys are sorted once and the map is built
        // from the sorted list.
        let mut groups: Vec<(GroupKey, Totals)> = Vec::new();
        let mut selected: BTreeMap<Kind, u64> = BTreeMap::new();
        let mut spans: BTreeMap<String, Span> = BTreeMap::new();
        // The file each account was answered from, for an error naming it.
        let mut answered: BTreeMap<&str, PathBuf> = BTreeMap::new();
        let no_file =
            |grain: i64, account: &str| Error::io(&self.dir, format!("no {grain}-second rollups of account {account}"));
        for (account, files) in &self.manifest.rollups {
            if !selector.accounts.contains(account) {
                continue;
            }
            let Some(file) = files.get(&grain) else { return Err(no_file(grain, account)) };
            let Some(buckets) = selector.bucketing.of(account) else { continue };
            // The dates the account covers, at the request's grain (the same
            // for every account): its first slot to the end of its last.
            if let Some((first, last)) = rollup::slot_range(self.manifest.file(&self.dir, file)?)? {
                spans.insert(account.clone(), Span { first, last: last.saturating_add(grain - 1) });
            }
            let own = coarsest_grain_of(std::iter::once(buckets)).unwrap_or(grain);
            let Some(file) = files.get(&own) else { return Err(no_file(own, account)) };
            answered.insert(account.as_str(), self.dir.join(file));
            let AccountRows { strings, usage, charges } =
                answer::account_rows(self.manifest.file(&self.dir, file)?, account, own, selector, buckets)?;
            let (usage, charges) = (Rows::new(strings.clone(), usage), Rows::new(strings, charges));
            groups.reserve(usage.len() + charges.len());
            for (key, totals) in usage.iter().chain(charges.iter()) {
                *selected.entry(kind_of(key.dims.product)).or_default() += totals.records;
                groups.push((key.to_group_key(account), *totals));
            }
        }
        groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let groups = aggregate::sum_sorted(groups, |key| match answered.get(key.account.as_str()) {
            Some(path) => overflow(path, &key.account),
            None => Error::Internal(format!("a group of account {} that no rollup file answered", key.account)),
        })?;
        let span = spans.values().copied().reduce(Span::merge);
        let mut result = Aggregate { groups, spans, span, ..Aggregate::default() };
        for kind in Kind::ALL {
            let count = self.manifest.kind(kind).count;
            let tally = Tally {
                read: count,
                used: count,
                set_aside: 0,
                duplicates: 0,
                selected: selected.get(&kind).copied().unwrap_or(0),
                ..Tally::default()
            };
            result.tallies.insert(kind, tally);
        }
        Ok(result)
    }
}

/// One record kind's totals: its records and their amount.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KindTotals {
    /// Records.
    pub records: u64,
    /// The sum of their amounts, exact (every currency together: a
    /// check of the store, not money to show).
    pub amount: Amount,
}

impl Store {
    /// Every account's day rollups summed per record kind, held against
    /// the records' totals the manifest keeps for each kind (counted as the
    /// rows were written to the records files, and checksummed with the
    /// manifest): the report's check that the rollups it answers from hold
    /// every stored record once, whatever spills, merges and later ingests
    /// did to them. Each day file is checked against its sum first. An
    /// error names the kind and both totals.
    pub fn check_rollups(&self) -> Result<BTreeMap<Kind, KindTotals>> {
        let day = GRAINS[GRAINS.len() - 1];
        let mut sums: BTreeMap<Kind, (u64, i128)> = Kind::ALL.iter().map(|kind| (*kind, (0, 0))).collect();
        for (account, files) in &self.manifest.rollups {
            let Some(name) = files.get(&day) else {
                return Err(Error::io(&self.dir, format!("no {day}-second rollups of account {account}")));
            };
            let frame = rollup::read_rollup_checked(self.manifest.file(&self.dir, name)?)?;
            let path = self.dir.join(name);
            rollup::for_each_rollup_in(&path, &frame, |row| {
                let sum = sums.entry(kind_of(row.dims.product)).or_default();
                sum.0 = sum.0.checked_add(row.totals.records).ok_or_else(|| overflow(&path, account))?;
                sum.1 = sum.1.checked_add(row.totals.amount).ok_or_else(|| overflow(&path, account))?;
                Ok(())
            })?;
        }
        let mut checked = BTreeMap::new();
        for (kind, (records, amount)) in sums {
            let files = self.manifest.kind(kind);
            let stored = files.total_amount(kind, &self.dir)?;
            let rolled = KindTotals { records, amount: Amount::from_nanos(amount) };
            if rolled != (KindTotals { records: files.count, amount: stored }) {
                return Err(Error::Internal(format!(
                    "the rollups of {} hold {} {kind} records summing to {}, but its records files hold {} summing to {stored}",
                    self.dir.display(),
                    rolled.records,
                    rolled.amount,
                    files.count,
                )));
            }
            checked.insert(kind, rolled);
        }
        Ok(checked)
    }
}

/// The error for rollup rows of `account` (in the file at `path`) whose
/// sums overflow: no real total comes near the limits, so the file's
/// values are damaged (past its checksum, or written so).
fn overflow(path: &Path, account: &str) -> Error {
    Error::io(path, format!("not a rollup file: the sums of account {account}'s rows overflow"))
}

/// The record kind a product's rows come from.
fn kind_of(product: crate::records::Product) -> Kind {
    use crate::records::Product;
    match product {
        Product::Message => Kind::Messages,
        Product::Transcription => Kind::Transcriptions,
        Product::Voice | Product::Zentrunk => Kind::Calls,
        Product::Other => Kind::Charges,
    }
}

/// The coarsest grain that divides every bucket boundary of the selector,
/// so that each rollup slot lies inside one bucket (or outside the window);
/// `None` when not even 15-minute slots do.
fn coarsest_grain(selector: &Selector) -> Option<i64> {
    let bucketing = &selector.bucketing;
    coarsest_grain_of(bucketing.default.iter().chain(bucketing.by_account.values()))
}

/// The coarsest rollup grain that divides every boundary of every one of
/// `all` buckets.
fn coarsest_grain_of<'a>(all: impl Iterator<Item = &'a crate::time::Buckets> + Clone) -> Option<i64> {
    GRAINS.iter().rev().copied().find(|grain| {
        all.clone().all(|buckets| {
            (0..buckets.len() as u32).all(|i| {
                let crate::time::Interval { start, end } = buckets.span(i);
                start.rem_euclid(*grain) == 0 && end.rem_euclid(*grain) == 0
            })
        })
    })
}

/// The 15-minute slot that holds `secs`.
pub fn slot_of(secs: i64) -> i64 {
    secs - secs.rem_euclid(SLOT_SECONDS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::Bucketing;
    use crate::time::{parse_date, Granularity, Window};
    use chrono_tz::Tz;

    /// A folder without a manifest says what it holds: nothing, a first
    /// ingest at work or stopped, a lost manifest (kept ones to repair
    /// from), or files that are not a store's. Only the first two may
    /// become a new store.
    #[test]
    fn a_folder_without_a_manifest_says_what_it_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path();
        let says = |what: &str| {
            let error = Store::open(store).unwrap_err().chain();
            assert!(error.contains(what), "{error}");
        };
        assert_eq!(WithoutManifest::of(&store.join("absent")), WithoutManifest::Empty);
        let lock = generation::lock(store).unwrap();
        assert_eq!(WithoutManifest::of(store), WithoutManifest::Empty);
        says("run `telemeter ingest` first");

        std::fs::write(store.join(FIRST_INGEST), b"i1").unwrap();
        std::fs::create_dir_all(store.join("records")).unwrap();
        assert_eq!(WithoutManifest::of(store), WithoutManifest::FirstIngest);
        says("its first ingest is at work");
        drop(lock);
        says("its first ingest stopped before it published");
        assert!(WithoutManifest::of(store).may_start());

        std::fs::remove_file(store.join(FIRST_INGEST)).unwrap();
        assert_eq!(WithoutManifest::of(store), WithoutManifest::Foreign);
        assert!(!WithoutManifest::of(store).may_start());
        says("holds files but no manifest.json and no kept manifests");

        // Killed at its commit: the marker gone, the whole manifest of
        // generation 1 not yet renamed into place. A damaged one, or one of
        // another generation, is no such sign.
        let manifest = Manifest { format: FORMAT_VERSION, generation: 1, ..Manifest::default() };
        let temporary = store.join(format!("{MANIFEST}.tmp-i1"));
        let mut bytes = manifest.to_bytes().unwrap();
        std::fs::write(&temporary, &bytes[..bytes.len() - 2]).unwrap();
        assert_eq!(WithoutManifest::of(store), WithoutManifest::Foreign);
        std::fs::write(&temporary, Manifest { generation: 2, ..manifest.clone() }.to_bytes().unwrap()).unwrap();
        assert_eq!(WithoutManifest::of(store), WithoutManifest::Foreign);
        bytes = manifest.to_bytes().unwrap();
        std::fs::write(&temporary, &bytes).unwrap();
        assert_eq!(WithoutManifest::of(store), WithoutManifest::FirstIngest);
        says("its first ingest stopped before it published");
        std::fs::remove_file(&temporary).unwrap();

        std::fs::create_dir_all(store.join(KEPT_MANIFESTS)).unwrap();
        std::fs::write(store.join(KEPT_MANIFESTS).join("1.json"), b"{}").unwrap();
        assert_eq!(WithoutManifest::of(store), WithoutManifest::Lost);
        says("store repair");
    }

    /// A manifest as earlier versions wrote it reads back and writes again
    /// byte for byte: `manifest.json` is the store's commit point, and an
    /// older store must stay readable and unchanged by a rewrite.
    #[test]
    fn a_manifest_written_before_reads_and_writes_the_same_bytes() {
        let written = r#"{
  "format": 4,
  "generation": 2,
  "accounts_csv": "accounts/i2.csv",
  "sources": [
    "calls/a.csv (ingest i1)"
  ],
  "kinds": {
    "calls": {
      "records": [
        "records/calls/i1-00000.parquet"
      ],
      "index": [
        "index/calls/i1-00000.idx"
      ],
      "count": 25,
      "amount": "1.250000000"
    }
  },
  "rollups": {
    "MA001SHGA32ZDQYG9N8T": {
      "900": "rollups/MA001SHGA32ZDQYG9N8T-0123456789abcdef/i1-900s.parquet"
    }
  },
  "resources": "resources/i2.sqlite",
  "ingests": [
    {
      "id": "i1",
      "files": 4,
      "read": 28,
      "used": 25,
      "set_aside": 0,
      "duplicates": 3,
      "rejected": null
    },
    {
      "id": "i2",
      "files": 11,
      "read": 69,
      "used": 36,
      "set_aside": 1,
      "duplicates": 32,
      "rejected": "rejected/i2.csv"
    }
  ]
}"#;
        let manifest: Manifest = serde_json::from_str(written).expect("an older manifest");
        assert_eq!(manifest.ingests[1].rejected.as_deref(), Some("rejected/i2.csv"));
        assert_eq!(serde_json::to_string_pretty(&manifest).expect("JSON"), written);
    }

    /// Formats 4 to 7 are read; any other is refused by its number.
    #[test]
    fn a_manifest_of_a_format_this_build_does_not_read_is_refused_by_name() {
        let path = Path::new("STORE/manifest.json");
        for format in 0..9u32 {
            let manifest = Manifest { format, ..Manifest::default() };
            let bytes = manifest.to_bytes().expect("JSON");
            match Manifest::parse(&bytes, path) {
                Ok(read) => {
                    assert!((4..=7).contains(&format), "format {format}");
                    assert_eq!(read.checksum.is_some(), format >= SUMS_FORMAT, "format {format}");
                    assert_eq!(Manifest { checksum: None, ..read }, manifest, "format {format}");
                }
                Err(e) => {
                    assert!(!(4..=7).contains(&format), "format {format}: {e}");
                    let text = e.chain();
                    assert!(text.contains(&format!("store format {format} is not supported")), "{text}");
                    assert!(text.contains("this build reads 4 to 7"), "{text}");
                }
            }
        }
    }

    /// A format 6 manifest reads back only with its own checksum: any
    /// changed value, or no checksum, is damage naming the file and
    /// saying how to recover; the text's layout is not part of it.
    #[test]
    fn a_manifest_that_does_not_match_its_checksum_is_damaged() {
        let path = Path::new("STORE/manifest.json");
        let mut manifest = Manifest { format: FORMAT_VERSION, generation: 3, ..Manifest::default() };
        manifest.files.insert("records/calls/i1-00000.parquet".into(), FileSum::of(b"rows"));
        manifest.kinds.insert(
            "calls".into(),
            KindFiles { records: vec!["records/calls/i1-00000.parquet".into()], ..KindFiles::default() },
        );
        let bytes = manifest.to_bytes().expect("JSON");
        let read = Manifest::parse(&bytes, path).expect("its own checksum");
        assert_eq!(read.files, manifest.files);
        let text = String::from_utf8(bytes).expect("UTF-8");
        let changed = text.replace("\"generation\": 3", "\"generation\": 4");
        let unsummed = serde_json::to_string_pretty(&manifest).expect("JSON");
        for damaged in [changed, unsummed] {
            let error = Manifest::parse(damaged.as_bytes(), path).expect_err("damaged").chain();
            assert!(error.starts_with("STORE/manifest.json: damaged"), "{error}");
            assert!(error.contains("telemeter store repair --store STORE"), "{error}");
        }
        assert!(read.file(Path::new("STORE"), "records/calls/i1-00000.parquet").is_ok());
        assert!(read.file(Path::new("STORE"), "records/calls/other.parquet").is_err(), "a listed file without a sum");
    }

    fn selector(from: &str, to: &str, granularity: Granularity, tz: &str) -> Selector {
        let tz: Tz = tz.parse().unwrap();
        let window = Window::new(parse_date(from).unwrap(), parse_date(to).unwrap(), granularity, tz).unwrap();
        Selector::everything(Bucketing::shared(window.buckets(granularity)))
    }

    #[test]
    fn requests_read_the_coarsest_grain_their_buckets_allow() {
        let cases = [
            ("2026-11-01", "2026-11-08", Granularity::Day, "UTC", Some(86_400)),
            ("2026-01-01", "2026-12-01", Granularity::Month, "UTC", Some(86_400)),
            ("2026-11-01", "2026-11-03", Granularity::Hour, "UTC", Some(900)),
            ("2026-10-31", "2026-11-03", Granularity::Hour, "America/New_York", Some(900)),
            ("2026-11-01", "2026-11-08", Granularity::Day, "Asia/Kolkata", Some(900)),
            ("2026-11-01", "2026-11-03", Granularity::Hour, "Asia/Kathmandu", Some(900)),
            ("1971-06-01", "1971-06-03", Granularity::Day, "Africa/Monrovia", None),
        ];
        for (from, to, granularity, tz, grain) in cases {
            assert_eq!(coarsest_grain(&selector(from, to, granularity, tz)), grain, "{from} {to} {granularity:?} {tz}");
        }
    }

    #[test]
    fn slots_start_on_quarter_hours_before_and_after_the_epoch() {
        assert_eq!(slot_of(0), 0);
        assert_eq!(slot_of(899), 0);
        assert_eq!(slot_of(900), 900);
        assert_eq!(slot_of(-1), -900);
        assert_eq!(slot_of(1_795_700_701), 1_795_700_700);
    }
}
