//! Corrections applied to a store (`corrections.md`): revisions and voids.
//!
//! Every version of a record is stored as it arrives: a row of revision
//! above 0 has a dedup id of its own (its record id hashed with its
//! revision, `dedup::version_hash`), so the ingest's dedup makes two rows
//! of one id and revision a duplicate or a conflict, and two revisions
//! neither. New versions are written and folded like any new row. Then,
//! after the kinds are read ([`resolve`]), for each record a correction
//! touched:
//!
//! 1. its versions and voids are gathered: those this ingest wrote or
//!    read, those earlier ingests recorded in their corrections files
//!    ([`Registry`]), and its revision-0 versions, found in one partition
//!    of each index file;
//! 2. the highest revision wins; a void and a version of one revision are
//!    a conflict naming both places;
//! 3. each version that counted and no longer does (the stored one a new
//!    revision or void replaced, this ingest's rows below the highest) is
//!    read back from its records file and subtracted: its rollup group
//!    gets a negative row (`Rollups::subtract`, applied by the merge), and
//!    its month in the ledger is told (`Booking`).
//!
//! Each ingest with corrections writes `corrections/<ingest>.csv`: the
//! versions above revision 0 and the voids it stored, and the stored
//! versions that stopped counting ("dropped"). Those files are the store's
//! memory of corrections: `history` shows them, `store repair` rebuilds
//! without the dropped versions, a store's answer from its records files
//! leaves the dropped versions unread, and the next ingest reads them
//! whole (they hold the corrected records only, not the store).
//!
//! Both engines apply corrections here: the local ingest after its kinds,
//! the Spark publish through `ingest::correct` after it has written the
//! job's new rows.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use super::chunk::NewVersion;
use super::fold::Rollups;
use crate::aggregate::Totals;
use crate::error::{Error, Location, Result};
use crate::records::csv::RowSink;
use crate::records::dedup::{id_hash, IdHash, Place};
use crate::records::files::{Format, InputFile};
use crate::records::{parse_record, Field, Kind, Product, Record};
use crate::store::changes::Booking;
use crate::store::index::{self, IndexFile};
use crate::store::parquet_io::RecordView;
use crate::store::Manifest;
use crate::time::Instant;

/// The header of a corrections file.
pub(in crate::store) const CSV_HEADER: [&str; 8] =
    ["kind", "record_id", "revision", "entry", "records_file", "source_file", "source_line", "reason"];

/// What a row of a corrections file records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(in crate::store) enum Entry {
    /// A stored version of revision above 0.
    Version,
    /// A stored void.
    Void,
    /// A stored version that stopped counting with this ingest.
    Dropped,
}

impl Entry {
    fn name(self) -> &'static str {
        match self {
            Entry::Version => "version",
            Entry::Void => "void",
            Entry::Dropped => "dropped",
        }
    }

    fn of_name(name: &str) -> Option<Entry> {
        [Entry::Version, Entry::Void, Entry::Dropped].into_iter().find(|e| e.name() == name)
    }
}

/// Where a stored version is: its records file, record id and the input
/// place it came from (a records file holds one row of a record id per
/// input line).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(in crate::store) struct VersionAt {
    /// The records file (empty for a void, which has none). Shared: many
    /// versions name one records file and one input file.
    pub(in crate::store) records: Arc<str>,
    pub(in crate::store) record_id: String,
    /// The input file, as its ingest named it.
    pub(in crate::store) source_file: Arc<str>,
    pub(in crate::store) line: u64,
}

/// Names shared among versions: one `Arc` for each distinct text.
#[derive(Default)]
pub(in crate::store) struct Names(FxHashSet<Arc<str>>);

impl Names {
    /// The shared copy of `name`.
    pub(in crate::store) fn of(&mut self, name: &str) -> Arc<str> {
        if let Some(shared) = self.0.get(name) {
            return shared.clone();
        }
        let shared: Arc<str> = name.into();
        self.0.insert(shared.clone());
        shared
    }
}

/// One row of a corrections file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(in crate::store) struct Correction {
    pub(in crate::store) kind: Kind,
    pub(in crate::store) revision: u64,
    pub(in crate::store) entry: Entry,
    pub(in crate::store) at: VersionAt,
    /// A void's reason.
    pub(in crate::store) reason: String,
}

/// `corrections` as a corrections file, sorted.
pub(in crate::store) fn to_csv(corrections: &[Correction]) -> Result<Vec<u8>> {
    let mut sorted: Vec<&Correction> = corrections.iter().collect();
    // By record first (records file names share long prefixes, slow to
    // compare), then the whole row: one order on every run.
    sorted.sort_unstable_by(|a, b| {
        (a.kind, &a.at.record_id, a.revision, a.entry)
            .cmp(&(b.kind, &b.at.record_id, b.revision, b.entry))
            .then_with(|| a.cmp(b))
    });
    let mut out = csv::Writer::from_writer(Vec::new());
    let failed = |e: csv::Error| Error::Internal(format!("a corrections file: {e}"));
    out.write_record(CSV_HEADER).map_err(failed)?;
    for c in sorted {
        let (revision, line) = (c.revision.to_string(), c.at.line.to_string());
        out.write_record([
            c.kind.name(),
            &c.at.record_id,
            &revision,
            c.entry.name(),
            &c.at.records,
            &c.at.source_file,
            &line,
            &c.reason,
        ])
        .map_err(failed)?;
    }
    out.into_inner().map_err(|e| Error::Internal(format!("a corrections file: {e}")))
}

/// The rows of the corrections file `bytes` (read from `path`).
pub(in crate::store) fn parse(bytes: &[u8], path: &Path) -> Result<Vec<Correction>> {
    let mut reader = csv::ReaderBuilder::new().has_headers(true).from_reader(bytes);
    let broken = |line: u64, what: String| Error::io(path, format!("not a corrections file: line {line}: {what}"));
    match reader.headers() {
        Ok(header) if header.iter().eq(CSV_HEADER) => {}
        _ => return Err(broken(1, format!("the header is not {}", CSV_HEADER.join(",")))),
    }
    let (mut out, mut names) = (Vec::new(), Names::default());
    for (i, row) in reader.records().enumerate() {
        let line = i as u64 + 2;
        let row = row.map_err(|e| broken(line, e.to_string()))?;
        let field = |at: usize| row.get(at).unwrap_or_default();
        let number = |at: usize| field(at).parse::<u64>().map_err(|_| broken(line, format!("'{}'", field(at))));
        let kind = Kind::of_name(field(0)).ok_or_else(|| broken(line, format!("kind '{}'", field(0))))?;
        let entry = Entry::of_name(field(3)).ok_or_else(|| broken(line, format!("entry '{}'", field(3))))?;
        out.push(Correction {
            kind,
            revision: number(2)?,
            entry,
            at: VersionAt {
                records: names.of(field(4)),
                record_id: field(1).to_owned(),
                source_file: names.of(field(5)),
                line: number(6)?,
            },
            reason: field(7).to_owned(),
        });
    }
    Ok(out)
}

/// A stored version above revision 0, or a stored void.
#[derive(Clone, Debug)]
pub(in crate::store) struct NotedVersion {
    pub(in crate::store) revision: u64,
    pub(in crate::store) void: bool,
    pub(in crate::store) at: VersionAt,
    pub(in crate::store) reason: String,
    /// The ingest that stored it.
    pub(in crate::store) ingest: String,
}

/// Versions above revision 0 and voids, by record-id hash.
pub(in crate::store) type Noted = FxHashMap<IdHash, Vec<NotedVersion>>;

/// What earlier ingests recorded of corrections, for one kind.
#[derive(Default)]
pub(in crate::store) struct Registry {
    /// Versions above revision 0 and voids, by record-id hash.
    pub(in crate::store) noted: Noted,
    /// Stored versions that count nowhere.
    pub(in crate::store) dropped: FxHashSet<VersionAt>,
}

/// The registries of every kind of `manifest`'s generation, from the
/// corrections files its ingests list (each checked against its sum).
pub(in crate::store) fn registries(store: &Path, manifest: &Manifest) -> Result<BTreeMap<Kind, Registry>> {
    let mut out: BTreeMap<Kind, Registry> = BTreeMap::new();
    for (ingest, name) in manifest.ingests.iter().filter_map(|log| Some((&log.id, log.corrections.as_deref()?))) {
        let listed = manifest.file(store, name)?;
        let path = listed.path();
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        listed.check(&bytes)?;
        for c in parse(&bytes, &path)? {
            let registry = out.entry(c.kind).or_default();
            match c.entry {
                Entry::Dropped => {
                    registry.dropped.insert(c.at);
                }
                Entry::Version | Entry::Void => {
                    let void = c.entry == Entry::Void;
                    let id = id_hash(&c.at.record_id);
                    registry.noted.entry(id).or_default().push(NotedVersion {
                        revision: c.revision,
                        void,
                        at: c.at,
                        reason: c.reason,
                        ingest: ingest.clone(),
                    });
                }
            }
        }
    }
    Ok(out)
}

/// A version this ingest wrote that a correction may touch: one above
/// revision 0, or one of a record the registry knows.
#[derive(Clone, Debug)]
pub(in crate::store) struct RunVersion {
    pub(in crate::store) revision: u64,
    pub(in crate::store) at: VersionAt,
    /// Its place, for messages.
    pub(in crate::store) place: Place,
}

impl RunVersion {
    /// The noted form of `version`, written to the records file `records`
    /// (`base`: the sources stored before this ingest).
    pub(in crate::store) fn of(
        version: &NewVersion<'_>,
        records: &Arc<str>,
        base: u32,
        names: &mut Names,
    ) -> RunVersion {
        let seen = version.seen;
        RunVersion {
            revision: version.revision,
            at: VersionAt {
                records: records.clone(),
                record_id: version.record_id.to_owned(),
                source_file: names.of(version.source_file),
                line: seen.line,
            },
            place: Place { file: base + seen.file, line: seen.line },
        }
    }
}

/// A void of this ingest, new to the store.
#[derive(Clone, Debug)]
pub(super) struct RunVoid {
    pub(super) revision: u64,
    pub(super) record_id: String,
    pub(super) reason: String,
    pub(super) place: Place,
    /// Its file, as named in messages.
    pub(super) source_file: String,
}

/// What [`resolve`] decided for one kind.
#[derive(Default)]
pub(in crate::store) struct Resolved {
    /// Rows of this ingest below their record's highest revision
    /// (versions, then voids).
    pub(in crate::store) superseded_versions: u64,
    pub(in crate::store) superseded_voids: u64,
    /// Voids that hold their record's highest revision.
    pub(in crate::store) voids: u64,
    /// Stored versions (of earlier ingests) that stopped counting,
    /// replaced by a version, and withdrawn by a void.
    pub(in crate::store) stored_superseded: u64,
    pub(in crate::store) stored_withdrawn: u64,
    /// Stored records (of earlier ingests) that stopped counting, and
    /// their amount.
    pub(in crate::store) stored_dropped_amount: i128,
    /// Amount of this ingest's rows that stopped counting.
    pub(in crate::store) run_dropped_amount: i128,
    pub(in crate::store) corrections: Vec<Correction>,
    pub(in crate::store) bookings: Vec<Booking>,
}

/// What the corrections of an ingest leave to its publish: the rows of
/// its corrections file and the bookings of its ledger.
#[derive(Default)]
pub(in crate::store) struct Applied {
    pub(in crate::store) rows: Vec<Correction>,
    pub(in crate::store) bookings: Vec<Booking>,
}

/// One version or void of a record being resolved.
#[derive(Clone, Debug)]
struct Candidate {
    revision: u64,
    void: bool,
    at: VersionAt,
    /// Stored by an earlier ingest.
    stored: bool,
    /// Counted in the published generation (a stored version not dropped).
    counted: bool,
    origin: Origin,
}

/// Where a candidate was read, for messages.
#[derive(Clone, Debug)]
enum Origin {
    /// A row of an input file: this ingest's, or a stored one's through
    /// the index.
    Row(Place),
    /// A version or void an earlier ingest noted in its corrections file.
    Noted { ingest: String },
}

/// A revision-0 entry of a touched record: its index file (position),
/// record-id hash and place.
type Found = (usize, IdHash, Place);

/// An index file, opened, and the records file it indexes.
pub(super) struct IndexedRecords {
    pub(super) records: Arc<str>,
    pub(super) index: IndexFile,
}

/// The inputs of [`resolve`] for one kind.
pub(super) struct KindInputs<'a> {
    pub(super) kind: Kind,
    pub(super) registry: &'a Registry,
    pub(super) versions: Vec<RunVersion>,
    pub(super) voids: Vec<RunVoid>,
    /// Every index file of the kind (stored ones first).
    pub(super) index: Vec<IndexedRecords>,
    /// How many of `index` are stored.
    pub(super) stored_index: usize,
}

/// Names for messages and for records files' `source_file`.
pub(super) trait Sources: Sync {
    /// The input file of source `file`, as its ingest named it.
    fn source_file(&self, file: u32) -> String;
    /// The place as messages name it.
    fn location(&self, place: Place) -> Location;
}

/// Resolves the records of one kind that this ingest's corrections touch:
/// decides which version counts, subtracts what stopped counting from
/// `rollups`, and returns the counts, bookings and corrections rows.
///
/// 1. The touched records: every id of this ingest's versions above
///    revision 0 (or of a record the registry knows) and of its voids.
/// 2. Their candidates: the versions and voids earlier ingests noted, the
///    revision-0 rows of every index file (stored and this ingest's),
///    this ingest's versions and voids.
/// 3. Each record decided in id order ([`decide`]); the rows that stopped
///    counting or replace one are read back into the rollups.
pub(super) fn resolve(
    store: &Path,
    old: &Manifest,
    inputs: KindInputs<'_>,
    sources: &dyn Sources,
    rollups: &mut Rollups,
) -> Result<Resolved> {
    let KindInputs { kind, registry, versions, voids, index, stored_index } = inputs;
    let mut out = Resolved::default();
    // The touched records, by id hash, with their text.
    let mut touched: FxHashMap<IdHash, String> = FxHashMap::default();
    for v in &versions {
        touched.entry(id_hash(&v.at.record_id)).or_insert_with(|| v.at.record_id.clone());
    }
    for v in &voids {
        touched.entry(id_hash(&v.record_id)).or_insert_with(|| v.record_id.clone());
    }
    if touched.is_empty() {
        return Ok(out);
    }
    let mut candidates = noted_candidates(registry, &touched);
    let run_rev0 = revision_zero_candidates(&index, stored_index, registry, &touched, sources, &mut candidates)?;
    for v in versions {
        if v.revision == 0 && run_rev0.contains(&v.at) {
            continue;
        }
        let candidate = Candidate {
            revision: v.revision,
            void: false,
            at: v.at,
            stored: false,
            counted: false,
            origin: Origin::Row(v.place),
        };
        candidates.entry(id_hash(&candidate.at.record_id)).or_default().push(candidate);
    }
    for v in voids {
        let at = VersionAt {
            records: Arc::from(""),
            record_id: v.record_id,
            source_file: v.source_file.into(),
            line: v.place.line,
        };
        out.corrections.push(Correction {
            kind,
            revision: v.revision,
            entry: Entry::Void,
            at: at.clone(),
            reason: v.reason,
        });
        let candidate = Candidate {
            revision: v.revision,
            void: true,
            at,
            stored: false,
            counted: false,
            origin: Origin::Row(v.place),
        };
        candidates.entry(id_hash(&candidate.at.record_id)).or_default().push(candidate);
    }
    // Decide each record, in id order (the same on every run).
    let mut ids: Vec<IdHash> = candidates.keys().copied().collect();
    ids.sort_unstable();
    let mut to_read: Vec<(VersionAt, Role)> = Vec::new();
    for id in ids {
        if let Some(list) = candidates.get_mut(&id) {
            decide(kind, list, sources, &mut out, &mut to_read)?;
        }
    }
    read_back(store, old, kind, to_read, rollups, &mut out)?;
    Ok(out)
}

/// The versions and voids of `touched` records that earlier ingests
/// noted in their corrections files.
fn noted_candidates(registry: &Registry, touched: &FxHashMap<IdHash, String>) -> FxHashMap<IdHash, Vec<Candidate>> {
    let mut candidates: FxHashMap<IdHash, Vec<Candidate>> = FxHashMap::default();
    for id in touched.keys() {
        let list = candidates.entry(*id).or_default();
        for noted in registry.noted.get(id).into_iter().flatten() {
            let counted = !noted.void && !registry.dropped.contains(&noted.at);
            list.push(Candidate {
                revision: noted.revision,
                void: noted.void,
                at: noted.at.clone(),
                stored: true,
                counted,
                origin: Origin::Noted { ingest: noted.ingest.clone() },
            });
        }
    }
    candidates
}

/// The revision-0 versions of `touched` records, stored or of this
/// ingest, added to `candidates`: one partition of each index file per
/// touched id's partition, the files read in parallel. Returns this
/// ingest's (which its own versions repeat).
fn revision_zero_candidates(
    index: &[IndexedRecords],
    stored_index: usize,
    registry: &Registry,
    touched: &FxHashMap<IdHash, String>,
    sources: &dyn Sources,
    candidates: &mut FxHashMap<IdHash, Vec<Candidate>>,
) -> Result<FxHashSet<VersionAt>> {
    let mut partitions: BTreeMap<usize, FxHashSet<IdHash>> = BTreeMap::new();
    for id in touched.keys() {
        partitions.entry(id.partition()).or_default().insert(*id);
    }
    let found: Vec<Result<Vec<Found>>> = index
        .par_iter()
        .enumerate()
        .map(|(f, indexed)| {
            let mut found = Vec::new();
            for (p, ids) in &partitions {
                indexed.index.for_each_in(*p, |entry| {
                    if ids.contains(&entry.id) {
                        found.push((f, entry.id, index::unpack(entry.place)));
                    }
                })?;
            }
            Ok(found)
        })
        .collect();
    let mut run_rev0: FxHashSet<VersionAt> = FxHashSet::default();
    let mut source_files: FxHashMap<u32, Arc<str>> = FxHashMap::default();
    for found in found {
        for (f, id, place) in found? {
            let records = index[f].records.clone();
            let record_id = touched.get(&id).cloned().unwrap_or_default();
            let source_file =
                source_files.entry(place.file).or_insert_with(|| sources.source_file(place.file).into()).clone();
            let at = VersionAt { records, record_id, source_file, line: place.line };
            let stored = f < stored_index;
            let counted = stored && !registry.dropped.contains(&at);
            if !stored {
                run_rev0.insert(at.clone());
            }
            let candidate = Candidate { revision: 0, void: false, at, stored, counted, origin: Origin::Row(place) };
            candidates.entry(id).or_default().push(candidate);
        }
    }
    Ok(run_rev0)
}

/// Decides one record from its candidates: a version and a void of one
/// revision (not both stored) are a conflict; otherwise the highest
/// revision wins (a void over a version). Counts this ingest's versions
/// and voids, writes the corrections rows, and lists in `to_read` the
/// rows to read back: this ingest's versions that lost, and a stored one
/// that stopped counting with the one that replaces it.
fn decide(
    kind: Kind,
    list: &mut [Candidate],
    sources: &dyn Sources,
    out: &mut Resolved,
    to_read: &mut Vec<(VersionAt, Role)>,
) -> Result<()> {
    list.sort_by_key(|c| (c.revision, c.void, c.stored));
    for pair in list.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.revision == b.revision && a.void != b.void && !(a.stored && b.stored) {
            let place = |c: &Candidate| match &c.origin {
                Origin::Row(place) => sources.location(*place),
                Origin::Noted { ingest } => Location {
                    file: crate::store::source_name(&c.at.source_file, ingest),
                    line: c.at.line,
                    is_row: false,
                },
            };
            return Err(Error::Conflict {
                kind: kind.name(),
                record_id: a.at.record_id.clone(),
                first: place(a),
                second: place(b),
            });
        }
    }
    let Some(winner) = list.iter().max_by_key(|c| (c.revision, c.void)).cloned() else { return Ok(()) };
    let old = list.iter().filter(|c| c.stored).max_by_key(|c| (c.revision, c.void)).cloned();
    let old_counted = old.as_ref().filter(|o| o.counted && !o.void).cloned();
    for c in list.iter().filter(|c| !c.stored) {
        let wins = c.at == winner.at && c.void == winner.void && !winner.stored;
        if c.void {
            if wins {
                out.voids += 1;
            } else {
                out.superseded_voids += 1;
            }
            continue;
        }
        if c.revision > 0 {
            out.corrections.push(Correction {
                kind,
                revision: c.revision,
                entry: Entry::Version,
                at: c.at.clone(),
                reason: String::new(),
            });
        }
        if !wins {
            out.superseded_versions += 1;
            out.corrections.push(dropped(kind, c));
            to_read.push((c.at.clone(), Role::RunDropped));
        }
    }
    // A stored winner is the old one, still counting.
    if let Some(o) = old_counted.filter(|_| !winner.stored) {
        // The stored version that counted no longer does.
        out.corrections.push(dropped(kind, &o));
        if winner.void {
            out.stored_withdrawn += 1;
            to_read.push((o.at.clone(), Role::StoredWithdrawn));
        } else {
            out.stored_superseded += 1;
            to_read.push((o.at.clone(), Role::StoredReplaced));
            let of = to_read.len() - 1;
            to_read.push((winner.at.clone(), Role::Replacing { of }));
        }
    }
    Ok(())
}

/// The corrections row of a version that stopped counting.
fn dropped(kind: Kind, c: &Candidate) -> Correction {
    Correction { kind, revision: c.revision, entry: Entry::Dropped, at: c.at.clone(), reason: String::new() }
}

/// Why a version is read back from its records file.
#[derive(Clone, Debug)]
enum Role {
    /// A row of this ingest that does not count: it leaves its group.
    RunDropped,
    /// A stored version a void withdrew.
    StoredWithdrawn,
    /// A stored version a new one replaced.
    StoredReplaced,
    /// The new version that replaced a stored one (read for its month).
    Replacing {
        /// Its position in the versions read back.
        of: usize,
    },
}

/// A version read back: what the rollups and the ledger need.
#[derive(Clone, Debug)]
struct Back {
    auth_id: String,
    subaccount: String,
    type_: String,
    code: String,
    secs: i64,
    nanos: u32,
    product: Product,
    direction: Option<crate::records::Direction>,
    country: Option<crate::records::Country>,
    units: u64,
    duration: i64,
    amount: i64,
    surcharge: i64,
}

impl Back {
    fn view(&self) -> RecordView<'_> {
        let record = Record {
            record_id: "",
            auth_id: &self.auth_id,
            subaccount: &self.subaccount,
            timestamp: Instant { secs: self.secs, nanos: self.nanos },
            product: self.product,
            type_: &self.type_,
            direction: self.direction,
            country: self.country,
            units: self.units,
            duration: self.duration,
            amount: self.amount,
            surcharge: self.surcharge,
            code: &self.code,
            revision: 0,
        };
        RecordView { record, source_file: "", source_line: 0 }
    }

    fn totals(&self) -> Totals {
        Totals {
            records: 1,
            units: u128::from(self.units),
            duration: i128::from(self.duration),
            amount: i128::from(self.amount),
            surcharge: i128::from(self.surcharge),
        }
    }
}

/// Reads the versions of `to_read` back from their records files (each
/// stored one checked against its sum), subtracts those that stopped
/// counting from `rollups`, and books their months.
fn read_back(
    store: &Path,
    old: &Manifest,
    kind: Kind,
    to_read: Vec<(VersionAt, Role)>,
    rollups: &mut Rollups,
    out: &mut Resolved,
) -> Result<()> {
    // The versions of each records file, as places (input file and line,
    // one row each) to their positions in `to_read`.
    let mut by_file: BTreeMap<&str, Places<'_, usize>> = BTreeMap::new();
    for (i, (at, _)) in to_read.iter().enumerate() {
        let lines = by_file.entry(&at.records).or_default().entry(&at.source_file).or_default();
        if lines.insert(at.line, i).is_some() {
            return Err(Error::Internal(format!("{}:{} read back twice", at.source_file, at.line)));
        }
    }
    let read: Vec<Result<Vec<(usize, Back)>>> =
        by_file.into_par_iter().map(|(name, places)| read_versions(store, old, kind, name, &places)).collect();
    let mut backs: Vec<Option<Back>> = vec![None; to_read.len()];
    for found in read {
        for (i, back) in found? {
            backs[i] = Some(back);
        }
    }
    let back = |i: usize| {
        backs[i].as_ref().ok_or_else(|| {
            let at = &to_read[i].0;
            Error::io(
                store.join(&*at.records),
                format!("holds no row of record_id '{}' from {}:{}", at.record_id, at.source_file, at.line),
            )
        })
    };
    for (i, (_, role)) in to_read.iter().enumerate() {
        let row = back(i)?;
        let booking = |added: i64, restated: u64, withdrawn: u64, left: Totals, replaced| Booking {
            auth_id: row.auth_id.clone(),
            secs: row.secs,
            product: row.product,
            added,
            restated,
            withdrawn,
            left,
            replaced,
        };
        match role {
            Role::Replacing { of } => {
                let of = back(*of)?;
                let replaced = Some((of.auth_id.clone(), of.secs, of.product));
                out.bookings.push(booking(-1, 1, 0, Totals::default(), replaced));
                continue;
            }
            Role::RunDropped => {
                out.run_dropped_amount += i128::from(row.amount);
                out.bookings.push(booking(-1, 0, 0, row.totals(), None));
            }
            Role::StoredWithdrawn => {
                out.stored_dropped_amount += i128::from(row.amount);
                out.bookings.push(booking(0, 0, 1, row.totals(), None));
            }
            Role::StoredReplaced => {
                out.stored_dropped_amount += i128::from(row.amount);
                out.bookings.push(booking(0, 1, 0, row.totals(), None));
            }
        }
        rollups.subtract(&row.view())?;
    }
    Ok(())
}

/// Places in one records file: input file, then line, to what the caller
/// keys them by.
type Places<'a, T> = FxHashMap<&'a str, FxHashMap<u64, T>>;

/// The rows of the versions at `places` in the records file `name` of
/// `kind`, each with its key.
fn read_versions(
    store: &Path,
    old: &Manifest,
    kind: Kind,
    name: &str,
    places: &Places<'_, usize>,
) -> Result<Vec<(usize, Back)>> {
    // A stored file is checked against its sum; one of this ingest was
    // just written.
    let (path, sum) = match old.files.contains_key(name) {
        true => {
            let listed = old.file(store, name)?;
            (listed.path(), listed.expected())
        }
        false => (store.join(name), None),
    };
    let file = InputFile { kind, path: path.clone(), name: name.to_owned(), format: Format::Parquet, size: 0, sum };
    // The rows are found in the file as read once (and checked), by input
    // file and line: the id column is not read.
    let rows = std::cell::RefCell::new(FxHashMap::default());
    let find = |parquet: &crate::parquet::ParquetFile<'_>| -> Result<Vec<u64>> {
        let found = rows_found(parquet, name, places)?;
        let mut picked: Vec<u64> = found.iter().map(|(row, _)| row - 1).collect();
        picked.sort_unstable();
        *rows.borrow_mut() = found.into_iter().collect();
        Ok(picked)
    };
    let mut sink = Pick { kind, rows: &rows, found: Vec::new(), error: None, name };
    crate::records::parquet::read_found(&file, find, false, &mut sink)?;
    match sink.error {
        Some(error) => Err(error),
        None => Ok(sink.found),
    }
}

/// The rows (from 1) of the records file `name` at `path` that hold the
/// versions `wanted`, found by their input file and line (one row of a
/// records file each: a records file is one batch of one ingest).
pub(in crate::store) fn rows_of(
    path: &Path,
    name: &str,
    wanted: &FxHashSet<VersionAt>,
) -> Result<FxHashMap<u64, VersionAt>> {
    let mut places: Places<'_, &VersionAt> = FxHashMap::default();
    for at in wanted.iter().filter(|at| &*at.records == name) {
        places.entry(&at.source_file).or_default().insert(at.line, at);
    }
    let found = match crate::parquet::ParquetFile::open(path)? {
        Some(parquet) => rows_found(&parquet, name, &places)?,
        None => Vec::new(),
    };
    Ok(found.into_iter().map(|(row, at)| (row, at.clone())).collect())
}

/// The rows (from 1) of the records file `parquet` (named `name`) at
/// `places`, with their keys, read by its `source_file` (as dictionary
/// keys: no text per row) and `source_line` columns.
fn rows_found<T: Copy>(
    parquet: &crate::parquet::ParquetFile<'_>,
    name: &str,
    places: &Places<'_, T>,
) -> Result<Vec<(u64, T)>> {
    use polars_arrow::array::{DictionaryArray, PrimitiveArray, Utf8ViewArray};
    let (source_file, source_line) = (crate::store::layout::SOURCE_FILE, crate::store::layout::SOURCE_LINE);
    let broken = |what: &str| Error::bad_file(name, format!("not a records file: {what}"));
    let files = parquet.read_column_keyed(source_file)?;
    let lines = parquet.read_column_keyed(source_line)?;
    let mut rows = Vec::new();
    let mut first = 0u64;
    for (files, lines) in files.iter().zip(&lines) {
        let files = files.as_any().downcast_ref::<DictionaryArray<u32>>().ok_or_else(|| broken("source_file"))?;
        let values = files.values().as_any().downcast_ref::<Utf8ViewArray>().ok_or_else(|| broken("source_file"))?;
        let lines = lines.as_any().downcast_ref::<PrimitiveArray<i64>>().ok_or_else(|| broken("source_line"))?;
        // Each distinct input file of the row group, looked up once.
        let of_key: Vec<Option<&FxHashMap<u64, T>>> = values.values_iter().map(|file| places.get(file)).collect();
        for (row, (key, line)) in files.keys().iter().zip(lines.iter()).enumerate() {
            let (Some(key), Some(line)) = (key, line) else { continue };
            let Some(Some(lines)) = of_key.get(*key as usize) else { continue };
            let Ok(line) = u64::try_from(*line) else { continue };
            if let Some(key) = lines.get(&line) {
                rows.push((first + row as u64 + 1, *key));
            }
        }
        first += files.len() as u64;
    }
    Ok(rows)
}

/// A sink that keeps the rows at given lines, each with its key.
struct Pick<'a> {
    kind: Kind,
    rows: &'a std::cell::RefCell<FxHashMap<u64, usize>>,
    found: Vec<(usize, Back)>,
    error: Option<Error>,
    name: &'a str,
}

impl RowSink for Pick<'_> {
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        let Some(&at) = self.rows.borrow().get(&line) else { return true };
        match parse_record(self.kind, fields) {
            Ok(r) => {
                self.found.push((
                    at,
                    Back {
                        auth_id: r.auth_id.to_owned(),
                        subaccount: r.subaccount.to_owned(),
                        type_: r.type_.to_owned(),
                        code: r.code.to_owned(),
                        secs: r.timestamp.secs,
                        nanos: r.timestamp.nanos,
                        product: r.product,
                        direction: r.direction,
                        country: r.country,
                        units: r.units,
                        duration: r.duration,
                        amount: r.amount,
                        surcharge: r.surcharge,
                    },
                ));
                true
            }
            Err(e) => {
                let why = format!("row {line}: '{}' {}; records files are written checked", e.value, e.reason);
                self.error = Some(Error::bad_file(self.name, why));
                false
            }
        }
    }

    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.error = Some(Error::bad_file(self.name, format!("row {line}, column '{column}': '{value}' {reason}")));
        false
    }

    fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.malformed(line, column, value, reason)
    }
}
