//! `store verify` and `store repair`: a store's files checked against the
//! sums its manifest records, and a lost or damaged manifest restored from
//! the kept ones.
//!
//! - [`verify`] reads `manifest.json` (its own checksum first), then every
//!   file it lists, on the threads, and reports each file that is missing,
//!   unreadable or whose length or XXH3-128 differs from its sum. A
//!   manifest of format 4 or 5 has no sums: its files are listed as not
//!   checked.
//! - [`repair`], under the store's writer lock: when `manifest.json` is
//!   missing or damaged, the newest kept manifest
//!   (`manifests/<generation>.json`) that matches its own checksum and
//!   whose every file verifies is published again as `manifest.json`
//!   (the same bytes); then the files no kept generation lists (partial
//!   files of failed or killed ingests, leftover temporary manifests) are
//!   deleted, as after a publish, unless a later kept manifest was passed
//!   over. Damaged or missing rollup and index
//!   files are rebuilt from the records files and published as the next
//!   generation (`rebuild.rs`). A listed file that is not derived
//!   (records, accounts, resources, rejected rows, change ledgers) and
//!   stays damaged is reported, not hidden; a damaged records file stops
//!   the rebuild.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

pub use super::finding::{Finding, Problem};
use super::rebuild::Outcome;
use super::{generation, kept_manifests, read_kept, read_kept_or_why, FileSum, Manifest, KEPT_MANIFESTS, MANIFEST};
use crate::error::{Error, Result};

/// The state of `manifest.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ManifestState {
    /// Read, and it matches its own checksum.
    Good,
    /// Read; a format before checksums (4 or 5): its files are not checked.
    NoSums(u32),
    /// There is none.
    Missing,
    /// It cannot be read or does not match its checksum (the reason).
    Damaged(String),
    /// Whole, but a later generation was published after it (the newest
    /// kept manifest's): an older manifest was put back.
    Behind(u64),
}

/// What [`verify`] found.
#[derive(Clone, Debug)]
pub struct Verified {
    /// The state of `manifest.json`.
    pub manifest: ManifestState,
    /// Its generation, when it was read.
    pub generation: Option<u64>,
    /// Files listed (and checked, when the manifest has sums).
    pub files: usize,
    /// Every listed file that does not verify, by name.
    pub findings: Vec<Finding>,
    /// Kept manifests found (`manifests/*.json`).
    pub kept: usize,
    /// Files in the generation folders that no kept manifest lists: left
    /// by a failed or killed ingest (or being written by one at work).
    pub unlisted: usize,
    /// Kept manifests that are damaged (or hold another generation than
    /// their name), with why: repair can restore none of them.
    pub damaged_kept: Vec<(PathBuf, String)>,
}

impl Verified {
    /// Whether everything checked is whole.
    pub fn is_whole(&self) -> bool {
        matches!(self.manifest, ManifestState::Good | ManifestState::NoSums(_))
            && self.findings.is_empty()
            && self.damaged_kept.is_empty()
    }
}

/// The kept manifests of `store` that do not read whole as the generation
/// their name says, with why.
fn damaged_kept(store: &Path) -> Vec<(PathBuf, String)> {
    let kept = kept_manifests(store).unwrap_or_default().into_iter();
    kept.filter_map(|(generation, path)| read_kept_or_why(&path, generation).err().map(|why| (path, why))).collect()
}

/// Checks `store`'s manifest and every file it lists.
pub fn verify(store: &Path) -> Result<Verified> {
    if !store.is_dir() {
        return Err(Error::io(store, "not a folder"));
    }
    let kept = kept_manifests(store)?.len();
    let manifest = match Manifest::read(store) {
        Ok(Some(manifest)) => manifest,
        Ok(None) => {
            return Ok(Verified {
                manifest: ManifestState::Missing,
                generation: None,
                files: 0,
                findings: vec![],
                kept,
                unlisted: 0,
                damaged_kept: damaged_kept(store),
            })
        }
        Err(e) => {
            let why = e.chain();
            return Ok(Verified {
                manifest: ManifestState::Damaged(why),
                generation: None,
                files: 0,
                findings: vec![],
                kept,
                unlisted: 0,
                damaged_kept: damaged_kept(store),
            });
        }
    };
    let findings = check_files(store, &manifest);
    let state = match super::kept_after(store, manifest.generation) {
        Some(newest) => ManifestState::Behind(newest),
        _ if manifest.format >= super::SUMS_FORMAT => ManifestState::Good,
        _ => ManifestState::NoSums(manifest.format),
    };
    Ok(Verified {
        manifest: state,
        generation: Some(manifest.generation),
        files: manifest.listed().len(),
        findings,
        kept,
        unlisted: unlisted(store, &manifest),
        damaged_kept: damaged_kept(store),
    })
}

/// How many files of the generation folders neither `manifest` nor a kept
/// manifest lists.
fn unlisted(store: &Path, manifest: &Manifest) -> usize {
    let kept: Vec<Manifest> = kept_manifests(store)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(generation, path)| read_kept(&path, generation))
        .collect();
    let listed: std::collections::HashSet<&str> =
        std::iter::once(manifest).chain(&kept).flat_map(Manifest::listed).collect();
    generation::unlisted_files(store, &listed).len()
}

/// Every file `manifest` lists that is missing, unreadable or damaged (a
/// manifest without sums: only missing or unreadable ones), by name.
fn check_files(store: &Path, manifest: &Manifest) -> Vec<Finding> {
    let mut names = manifest.listed();
    names.sort_unstable();
    names.dedup();
    names
        .par_iter()
        .filter_map(|name| {
            let path = store.join(name);
            let problem = match FileSum::of_file(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Problem::Missing,
                Err(e) => Problem::Unreadable(e.to_string()),
                Ok(found) => match manifest.files.get(*name) {
                    Some(expected) if *expected == found => return None,
                    Some(expected) => Problem::Damaged { expected: expected.clone(), found },
                    None if manifest.format < super::SUMS_FORMAT => return None,
                    None => Problem::Damaged { expected: FileSum::default(), found },
                },
            };
            Some(Finding { name: (*name).to_owned(), problem })
        })
        .collect()
}

/// Whether damage to the file `name` of `manifest` leaves its money whole,
/// so that repair keeps its generation rather than roll the store back: a
/// file derived from the records files (a rollup or index file, which
/// repair rebuilds), or an ingest's record of what it did (its rejected
/// rows or its ledger of changes, which repair names as still damaged).
fn spares_money(manifest: &Manifest, name: &str) -> bool {
    manifest.rollups.values().any(|files| files.values().any(|file| file == name))
        || manifest.kinds.values().any(|files| files.index.iter().any(|file| file == name))
        || manifest
            .ingests
            .iter()
            .any(|ingest| ingest.rejected.as_deref() == Some(name) || ingest.changes.as_deref() == Some(name))
}

/// The folder under `manifests/` that repair moves the kept manifests it
/// passed over to: out of the generations an ingest builds on, still
/// there to recover from.
pub const PASSED_OVER: &str = "passed-over";

/// Moves each passed-over kept manifest to [`PASSED_OVER`].
fn set_aside_passed_over(store: &Path, passed_over: &[(PathBuf, String)]) -> Result<()> {
    let folder = store.join(KEPT_MANIFESTS).join(PASSED_OVER);
    for (path, _) in passed_over {
        let Some(name) = path.file_name() else { continue };
        std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
        std::fs::rename(path, folder.join(name)).map_err(|e| Error::io(path, e))?;
    }
    if !passed_over.is_empty() {
        super::sync_dir(&folder)?;
        super::sync_dir(&store.join(KEPT_MANIFESTS))?;
    }
    Ok(())
}

/// What [`repair`] did.
#[derive(Clone, Debug, Default)]
pub struct Repaired {
    /// The generation whose kept manifest was published again as
    /// `manifest.json`, when it was missing or damaged.
    pub restored: Option<u64>,
    /// Kept manifests passed over (damaged, or listing a damaged or
    /// missing file), with why.
    pub passed_over: Vec<(PathBuf, String)>,
    /// Files no kept generation lists, deleted (none when a later kept
    /// manifest was passed over).
    pub removed: usize,
    /// Listed files still damaged or missing (not rebuilt).
    pub damaged: Vec<Finding>,
    /// What was rebuilt from the records files, when anything was.
    pub rebuilt: Option<super::rebuild::Rebuilt>,
    /// Why nothing derived was rebuilt although some is damaged (a damaged
    /// records file).
    pub not_rebuilt: Option<String>,
    /// The generation the store answers from afterwards.
    pub generation: u64,
    /// Damaged kept manifests of no use to a repair, moved to
    /// [`PASSED_OVER`], with why.
    pub set_aside: Vec<(PathBuf, String)>,
}

/// Repairs `store`: restores `manifest.json` from the newest kept manifest
/// that verifies when it is missing or damaged, rebuilds damaged rollup
/// and index files from the records files (a new generation), then
/// deletes files no kept generation lists, unless it passed over a later
/// kept manifest (that generation's files may be whole). Listed files
/// that stay damaged are in the answer.
pub fn repair(store: &Path) -> Result<Repaired> {
    if !store.is_dir() {
        return Err(Error::io(store, "not a folder"));
    }
    let lock = generation::lock(store)?;
    let mut repaired = Repaired::default();
    let manifest = match Manifest::read(store) {
        Ok(Some(manifest)) => {
            // Put back over a later generation: its files are not
            // collected, nor is its kept manifest overwritten by a rebuild.
            generation::check_not_behind(store, &manifest)?;
            manifest
        }
        Ok(None) | Err(_) => {
            let mut found = None;
            for (generation, path) in kept_manifests(store)? {
                let (manifest, bytes) = match read_kept_or_why(&path, generation) {
                    Ok(read) => read,
                    Err(why) => {
                        repaired.passed_over.push((path, why));
                        continue;
                    }
                };
                // Damaged rollup or index files are rebuilt from the
                // records below, and damaged records of what an ingest did
                // are named: only damage to money passes a generation over.
                let findings = check_files(store, &manifest);
                let findings: Vec<Finding> =
                    findings.into_iter().filter(|f| !spares_money(&manifest, &f.name)).collect();
                if let Some(first) = findings.first() {
                    let why =
                        format!("{} of its files do not verify ({}: {})", findings.len(), first.name, first.problem);
                    repaired.passed_over.push((path, why));
                    continue;
                }
                found = Some((manifest, bytes));
                break;
            }
            let Some((manifest, bytes)) = found else {
                return Err(Error::io(
                    store,
                    format!(
                        "no kept manifest in {KEPT_MANIFESTS}/ verifies ({} found); {MANIFEST} cannot be restored; \
                         nothing was changed",
                        repaired.passed_over.len()
                    ),
                ));
            };
            // The later kept manifests passed over go aside first, kept for
            // the user, so that what builds on the restored one (this
            // repair run again too, if it is killed) finds it the newest.
            set_aside_passed_over(store, &repaired.passed_over)?;
            let temporary = store.join(format!("{MANIFEST}.tmp-repair"));
            super::write_synced(&temporary, &bytes)?;
            let path = store.join(MANIFEST);
            std::fs::rename(&temporary, &path).map_err(|e| Error::io(&path, e))?;
            super::sync_dir(store)?;
            repaired.restored = Some(manifest.generation);
            manifest
        }
    };
    // The current generation's kept copy, if it was lost or cut.
    manifest.keep_current(store)?;
    let findings = check_files(store, &manifest);
    let (manifest, previous) = match super::rebuild::rebuild(store, &manifest, &findings)? {
        Outcome::Published(next, rebuilt) => {
            repaired.rebuilt = Some(rebuilt);
            (*next, Some(manifest))
        }
        Outcome::Nothing => (manifest, None),
        Outcome::RecordsDamaged(why) => {
            repaired.not_rebuilt = Some(why);
            (manifest, None)
        }
    };
    // The previous generation's files stay too, as after a publish (a
    // reader without a lease may still be on it).
    let previous = previous.or_else(|| {
        kept_manifests(store)
            .ok()?
            .into_iter()
            .find(|(generation, _)| *generation + 1 == manifest.generation)
            .and_then(|(generation, path)| read_kept(&path, generation))
    });
    // Files no kept generation lists are deleted, unless repair passed over
    // a later kept manifest: that generation's manifests are damaged, but
    // its records files may be whole, and are left for the user to recover
    // (the next ingest's collection deletes them).
    if repaired.passed_over.is_empty() {
        let keep: Vec<&Manifest> = std::iter::once(&manifest).chain(&previous).collect();
        repaired.removed = generation::collect_garbage(store, &keep);
    }
    repaired.damaged = check_files(store, &manifest);
    repaired.generation = manifest.generation;
    // Damaged kept manifests restore nothing: set aside, named.
    let unreadable = damaged_kept(store);
    set_aside_passed_over(store, &unreadable)?;
    repaired.set_aside = unreadable;
    drop(lock);
    Ok(repaired)
}
