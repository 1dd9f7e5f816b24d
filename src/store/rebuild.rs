//! `store repair`'s rebuild of what is derived: rollup files and index
//! files made again from the records files, which are the truth, and
//! published as a new generation through the ingest's own publish.
//!
//! 1. The damaged or missing files are sorted: a rollup file names its
//!    account (both of its grains are rebuilt), an index file the records
//!    file written beside it (`index/<kind>/<name>.idx` beside
//!    `records/<kind>/<name>.parquet`). Any other file (records, accounts,
//!    resources, rejected rows) is not derived: it stays damaged.
//! 2. Every records file is checked against its sum first. A damaged
//!    records file stops the rebuild (nothing is written): what it held is
//!    lost, and so is the truth the rollups would be rebuilt from.
//! 3. The records files are read by the raw engine's Parquet reader and
//!    row check. The rows of the accounts to rebuild are folded by the
//!    ingest's `Rollups` (spilled past the ingest's default limit, merged
//!    and written by its writer). Each index file to rebuild gets the
//!    entries of its records file's rows: the record-id hash and content
//!    hash an ingest computes, and the place the row came from (its
//!    `source_file` and `source_line` columns, the source's position in
//!    the manifest's `sources`).
//! 4. The new manifest is the old one with the rebuilt files' names and
//!    sums, one generation on, published as an ingest publishes (temporary
//!    file renamed over `manifest.json`, then the kept copy); files neither
//!    generation lists are collected as after an ingest.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use super::finding::Finding;
use super::index::{self, IndexEntry};
use super::ingest::fold::Rollups;
use super::ingest::IngestOptions;
use super::parquet_io::RecordView;
use super::Manifest;
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::records::csv::RowSink;
use crate::records::dedup::Place;
use crate::records::files::{Format, InputFile};
use crate::records::{parse_record, Field, Kind};

/// What [`rebuild`] did.
#[derive(Clone, Debug)]
pub(super) enum Outcome {
    /// No derived file is damaged or missing.
    Nothing,
    /// The next generation, published, and what was rebuilt.
    Published(Box<Manifest>, Rebuilt),
    /// A records file is damaged or missing: nothing was written (why).
    RecordsDamaged(String),
}

/// What `rebuild` made again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rebuilt {
    /// Accounts whose rollup files (both grains) were rebuilt.
    pub accounts: Vec<String>,
    /// Index files rebuilt, by their damaged name.
    pub index: Vec<String>,
    /// The generation published.
    pub generation: u64,
}

/// One index file to rebuild: its records file and its place in the
/// kind's list.
struct IndexJob {
    kind: Kind,
    position: usize,
    records: String,
}

/// The derived files among `findings` (of `manifest`): the accounts whose
/// rollups and the index files to rebuild.
fn derived(manifest: &Manifest, findings: &[Finding]) -> Result<(BTreeSet<String>, Vec<IndexJob>)> {
    let damaged: BTreeSet<&str> = findings.iter().map(|f| f.name.as_str()).collect();
    let accounts: BTreeSet<String> = manifest
        .rollups
        .iter()
        .filter(|(_, files)| files.values().any(|name| damaged.contains(name.as_str())))
        .map(|(account, _)| account.clone())
        .collect();
    let mut jobs = Vec::new();
    for kind in Kind::ALL {
        let files = manifest.kind(kind);
        for (position, pair) in files.indexed(kind)?.into_iter().enumerate() {
            if damaged.contains(pair.index) {
                jobs.push(IndexJob { kind, position, records: pair.records.to_owned() });
            }
        }
    }
    Ok((accounts, jobs))
}

/// Rebuilds the rollups of every account that has a damaged or missing
/// rollup file, and every damaged or missing index file, among `findings`
/// (the files of `manifest`, the published generation, that do not
/// verify), and publishes them as the next generation, under the store's
/// writer lock (held by the caller). A damaged records file stops it
/// before anything is written.
pub(super) fn rebuild(store: &Path, manifest: &Manifest, findings: &[Finding]) -> Result<Outcome> {
    let (accounts, jobs) = derived(manifest, findings)?;
    if accounts.is_empty() && jobs.is_empty() {
        return Ok(Outcome::Nothing);
    }
    let generation = manifest.generation + 1;
    let id = format!("repair-g{generation}");
    // The records files, each checked against its sum before it is read.
    let mut records = Vec::new();
    for kind in Kind::ALL {
        for name in manifest.kind(kind).records {
            if let Some(finding) = findings.iter().find(|finding| finding.name == name) {
                return Ok(Outcome::RecordsDamaged(format!(
                    "{name} is {}: records files are the truth and cannot be rebuilt, so nothing derived was \
                     rebuilt; restore it from a backup, or ingest the data folder into a new store",
                    finding.problem
                )));
            }
            // Checked again, every file before any is read or anything
            // written: it may have been damaged since the findings.
            manifest.file(store, &name)?.check_file()?;
            records.push((kind, name));
        }
    }
    let sources: HashMap<&str, u32> =
        manifest.sources.iter().enumerate().map(|(i, source)| (source.as_str(), i as u32)).collect();
    // Versions a correction dropped count in no rollup.
    let registries = super::ingest::corrections::registries(store, manifest)?;
    let syncer = Syncer::background();
    let mut rollups = Rollups::default();
    let mut next = manifest.clone();
    let mut number = 0u64;
    for (kind, name) in &records {
        let job = jobs.iter().find(|job| job.records == *name);
        let path = store.join(name);
        // And on the bytes the fold reads.
        let sum = manifest.file(store, name)?.expected();
        let file =
            InputFile { kind: *kind, path: path.clone(), name: name.clone(), format: Format::Parquet, size: 0, sum };
        let places = match job {
            Some(_) => Some(Places::read(&path, name, &sources)?),
            None => None,
        };
        let dropped: rustc_hash::FxHashSet<super::ingest::corrections::VersionAt> = registries
            .get(kind)
            .map(|r| r.dropped.iter().filter(|at| *at.records == **name).cloned().collect())
            .unwrap_or_default();
        let skip: rustc_hash::FxHashSet<u64> = match dropped.is_empty() {
            true => Default::default(),
            false => super::ingest::corrections::rows_of(&path, name, &dropped)?.into_keys().collect(),
        };
        // The revision of each row above 0 (its index entry is keyed by it).
        let noted: Vec<(super::ingest::corrections::VersionAt, u64)> = registries
            .get(kind)
            .map(|r| {
                let versions = r.noted.values().flatten().filter(|n| !n.void && *n.at.records == **name);
                versions.map(|n| (n.at.clone(), n.revision)).collect()
            })
            .unwrap_or_default();
        let mut revisions: HashMap<u64, u64> = HashMap::new();
        if !noted.is_empty() {
            let wanted = noted.iter().map(|(at, _)| at.clone()).collect();
            let by_at: HashMap<_, u64> = noted.into_iter().collect();
            for (row, at) in super::ingest::corrections::rows_of(&path, name, &wanted)? {
                revisions.insert(row, by_at.get(&at).copied().unwrap_or(0));
            }
        }
        let mut sink = Fold {
            skip: &skip,
            revisions: &revisions,
            kind: *kind,
            name,
            accounts: &accounts,
            rollups: &mut rollups,
            places: places.as_ref(),
            entries: Vec::new(),
            error: None,
        };
        crate::records::parquet::read(&file, &mut sink)?;
        let Fold { entries, error, .. } = sink;
        if let Some(error) = error {
            return Err(error);
        }
        rollups.spill_full(store, &id, IngestOptions::DEFAULT_MAX_ROLLUP_GROUPS)?;
        if let Some(job) = job {
            let index_name = format!("index/{}/{id}-{number:05}.idx", kind.name());
            number += 1;
            let index_path = store.join(&index_name);
            if let Some(parent) = index_path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            index::write_index(&index_path, &[&entries], &syncer)?;
            if let Some(files) = next.kinds.get_mut(job.kind.name()) {
                files.index[job.position] = index_name;
            }
        }
    }
    let mut previous = manifest.clone();
    previous.rollups.retain(|account, _| !accounts.contains(account));
    next.rollups.retain(|account, _| !accounts.contains(account));
    // A rebuild changes no account's months: its ledger is not kept.
    let (zones, changed) = (crate::records::accounts::Accounts::default(), std::collections::BTreeMap::new());
    let terms = super::ingest::fold::AccountTerms { accounts: &zones, changed: &changed };
    rollups.write(store, &id, &previous, &mut next, terms, &syncer)?;
    let sums = syncer.wait()?;
    for folder in ["index", "rollups"] {
        let path = store.join(folder);
        if path.exists() {
            super::sync_dir(&path)?;
        }
    }
    next.generation = generation;
    super::generation::record_sums(store, manifest, &mut next, &sums)?;
    next.publish(store, &id)?;
    let rebuilt = Rebuilt {
        accounts: accounts.into_iter().collect(),
        index: jobs.iter().filter_map(|job| manifest.kind(job.kind).index.get(job.position).cloned()).collect(),
        generation,
    };
    Ok(Outcome::Published(Box::new(next), rebuilt))
}

/// Where each row of a records file came from: its `source_file` (as a
/// position in the manifest's `sources`) and `source_line`.
struct Places {
    sources: Vec<u32>,
    lines: Vec<u64>,
}

impl Places {
    /// The places of the rows of the records file `name` at `path`.
    fn read(path: &Path, name: &str, sources: &HashMap<&str, u32>) -> Result<Places> {
        let (source_file, source_line) = (super::layout::SOURCE_FILE, super::layout::SOURCE_LINE);
        let frame = crate::parquet::read_frame(path, Some(&[source_file, source_line]), crate::parquet::Rows::All)?;
        let broken = |what: String| Error::io(path, format!("not a records file: {what}"));
        let files = frame.column(source_file).and_then(|c| c.str()).map_err(|e| broken(e.to_string()))?;
        let lines = frame.column(source_line).and_then(|c| c.i64()).map_err(|e| broken(e.to_string()))?;
        // A records file of ingest `id` names its sources as that ingest
        // read them; the manifest lists them as "NAME (ingest ID)".
        let stem = name.rsplit('/').next().and_then(|n| n.strip_suffix(".parquet")).unwrap_or_default();
        let ingest = stem.rsplit_once('-').map_or(stem, |(id, _)| id);
        let mut by_name: BTreeMap<&str, u32> = BTreeMap::new();
        let mut places = Places { sources: Vec::with_capacity(files.len()), lines: Vec::with_capacity(files.len()) };
        for (file, line) in files.iter().zip(lines.iter()) {
            let (Some(file), Some(line)) = (file, line) else {
                return Err(broken("null in 'source_file' or 'source_line'".to_owned()));
            };
            let source = match by_name.get(file) {
                Some(source) => *source,
                None => {
                    let listed = super::source_name(file, ingest);
                    let source = *sources
                        .get(listed.as_str())
                        .ok_or_else(|| broken(format!("its source '{listed}' is not among the manifest's sources")))?;
                    by_name.insert(file, source);
                    source
                }
            };
            places.sources.push(source);
            places.lines.push(u64::try_from(line).map_err(|_| broken(format!("source_line {line}")))?);
        }
        Ok(places)
    }
}

/// The row sink of one records file: each row checked as the raw engine
/// checks it, folded into the rollups when its account's are rebuilt, and
/// given its index entry when its index file is.
struct Fold<'a> {
    /// Rows (from 1) of versions that count nowhere.
    skip: &'a rustc_hash::FxHashSet<u64>,
    /// Rows (from 1) above revision 0, and their revision.
    revisions: &'a HashMap<u64, u64>,
    kind: Kind,
    name: &'a str,
    accounts: &'a BTreeSet<String>,
    rollups: &'a mut Rollups,
    places: Option<&'a Places>,
    entries: Vec<IndexEntry>,
    error: Option<Error>,
}

impl Fold<'_> {
    fn fail(&mut self, line: u64, why: String) -> bool {
        let why = format!("row {line}: {why}; records files are written checked, so this one is damaged");
        self.error = Some(Error::bad_file(self.name, why));
        false
    }
}

impl RowSink for Fold<'_> {
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        let record = match parse_record(self.kind, fields) {
            Ok(record) => record,
            Err(e) => {
                let column = self.kind.columns().get(e.column).copied().unwrap_or("-");
                return self.fail(line, format!("column '{column}': '{}' {}", e.value, e.reason));
            }
        };
        if let Some(places) = self.places {
            let at = (line as usize).wrapping_sub(1);
            let (Some(source), Some(source_line)) = (places.sources.get(at), places.lines.get(at)) else {
                return self.fail(line, "no source_file or source_line".to_owned());
            };
            let revision = self.revisions.get(&line).copied().unwrap_or(0);
            let id = crate::records::dedup::version_hash(record.record_id, revision);
            let place = index::pack(Place { file: *source, line: *source_line });
            self.entries.push(IndexEntry { id, content: record.content_hash(), place });
        }
        if self.accounts.contains(record.auth_id) && !self.skip.contains(&line) {
            let view = RecordView { record, source_file: "", source_line: 0 };
            if let Err(e) = self.rollups.add(&view) {
                self.error = Some(e);
                return false;
            }
        }
        true
    }

    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.fail(line, format!("column '{column}': '{value}' {reason}"))
    }

    fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.malformed(line, column, value, reason)
    }
}
