//! `telemeter history`: what a store holds of one record id: each stored
//! version, the input file and line it came from, the ingest that stored
//! it, and which version counts.
//!
//! The steps:
//!
//! - the id's hash names one partition of the dedup index (`index.rs`);
//! - that partition of each of the kind's index files, each file checked
//!   against its sum first, gives the id's entries: where each stored
//!   version came from (source and line);
//! - an index file and the records file of the same ingest batch share
//!   their name (`<ingest>-<n>`), so each version's row is read from that
//!   records file (checked against its sum), found by its record id.
//!
//! - the versions above revision 0 and the voids come from the store's
//!   corrections files (`ingest/corrections.rs`), which also name the
//!   versions that stopped counting; a version's row is found in its
//!   records file by its input file and line.
//!
//! A re-delivery is counted as a duplicate by its ingest and not kept.
//! The version that counts is the one of the highest revision, unless a
//! void holds it (then none counts).

use std::path::Path;

use crate::error::{Error, Result};
use crate::records::csv::RowSink;
use crate::records::dedup;
use crate::records::{Field, Kind};

use super::index::{self, IndexFile};
use super::ingest::corrections::{self, VersionAt};
use super::Store;

/// One stored version of a record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    /// The ingest that stored it.
    pub ingest: String,
    /// The input file it came from, as named in messages.
    pub source: String,
    /// Its line (or Parquet row) in that file.
    pub line: u64,
    /// Its revision (`corrections.md`).
    pub revision: u64,
    /// Whether it is a void (its fields are then the void's reason).
    pub void: bool,
    /// Whether it is the version that counts in every answer.
    pub counts: bool,
    /// Its columns as stored: the kind's contract columns, in the order of
    /// `records.md`, each with its value as text (money exact, to the
    /// nano-unit; times in RFC 3339, UTC).
    pub fields: Vec<(&'static str, String)>,
}

/// The stored versions of the record `record_id` of `kind` in `store`'s
/// generation, lowest revision first: none when the store holds no such
/// record. A damaged index or records file is an error naming it.
pub fn history(store: &Store, kind: Kind, record_id: &str) -> Result<Vec<Version>> {
    let id = dedup::id_hash(record_id);
    let partition = id.partition();
    let files = store.manifest.kind(kind);
    let mut found: Vec<(VersionAt, Version)> = Vec::new();
    for pair in files.indexed(kind)? {
        let listed = store.manifest.file(&store.dir, pair.index)?;
        let path = listed.path();
        let mut places = Vec::new();
        IndexFile::open_checked(listed)?.for_each_in(partition, |entry| {
            if entry.id == id {
                places.push(index::unpack(entry.place));
            }
        })?;
        if places.is_empty() {
            continue;
        }
        // The records file's name is the ingest that stored its rows, and
        // a number (the index file's may be a repair's).
        let records_name = pair.records;
        let stem = batch_stem(records_name).ok_or_else(|| Error::io(&path, "not named <ingest>-<n>.parquet"))?;
        let ingest = stem.rsplit_once('-').map_or(stem, |(ingest, _)| ingest);
        for place in places {
            let source = store.manifest.sources.get(place.file as usize).ok_or_else(|| {
                Error::io(
                    &path,
                    format!("an entry names source {}, the store has {}", place.file, store.manifest.sources.len()),
                )
            })?;
            let source = super::source_file(source, ingest).to_owned();
            let at = VersionAt {
                records: records_name.into(),
                record_id: record_id.to_owned(),
                source_file: source.as_str().into(),
                line: place.line,
            };
            let fields = version_fields(store, kind, &at)?;
            let ingest = ingest.to_owned();
            found.push((
                at,
                Version { ingest, source, line: place.line, revision: 0, void: false, counts: false, fields },
            ));
        }
    }
    let registries = corrections::registries(&store.dir, &store.manifest)?;
    let registry = registries.get(&kind);
    for noted in registry.and_then(|r| r.noted.get(&id)).into_iter().flatten() {
        if noted.at.record_id != record_id {
            continue;
        }
        let fields = match noted.void {
            true => vec![("reason", noted.reason.clone())],
            false => version_fields(store, kind, &noted.at)?,
        };
        let ingest = noted.ingest.clone();
        let (source, line) = (noted.at.source_file.to_string(), noted.at.line);
        let version =
            Version { ingest, source, line, revision: noted.revision, void: noted.void, counts: false, fields };
        found.push((noted.at.clone(), version));
    }
    // The version that counts: the highest revision, unless a void holds
    // it or a later ingest dropped it.
    found.sort_by_key(|(_, v)| (v.revision, v.void));
    if let Some((at, last)) = found.last_mut() {
        last.counts = !last.void && !registry.is_some_and(|r| r.dropped.contains(at));
    }
    Ok(found.into_iter().map(|(_, v)| v).collect())
}

/// The columns of the stored version `at` of `kind`.
fn version_fields(store: &Store, kind: Kind, at: &VersionAt) -> Result<Vec<(&'static str, String)>> {
    let file = store.record_file(kind, at.records.to_string())?;
    let wanted: rustc_hash::FxHashSet<VersionAt> = std::iter::once(at.clone()).collect();
    let rows = corrections::rows_of(&file.path, &at.records, &wanted)?;
    let found =
        crate::records::parquet::read_parts(&file, || Find { kind, rows: &rows, rows_found: Vec::new(), bad: None })?;
    let mut fields = Vec::new();
    for find in found {
        if let Some(why) = find.bad {
            return Err(Error::io(&file.path, format!("a stored row does not read back: {why}")));
        }
        fields.extend(find.rows_found);
    }
    fields.into_iter().next().ok_or_else(|| {
        Error::io(&file.path, format!("no row of record_id {} from {}:{}", at.record_id, at.source_file, at.line))
    })
}

/// `<ingest>-<n>` of a records file named `records/<kind>/<ingest>-<n>.parquet`.
fn batch_stem(records_name: &str) -> Option<&str> {
    Path::new(records_name).file_name()?.to_str()?.strip_suffix(".parquet")
}

/// A sink that keeps the rows at given lines.
struct Find<'a> {
    kind: Kind,
    rows: &'a rustc_hash::FxHashMap<u64, VersionAt>,
    rows_found: Vec<Vec<(&'static str, String)>>,
    /// The first row that does not read back, which a records file that
    /// matches its sum never holds.
    bad: Option<String>,
}

impl RowSink for Find<'_> {
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        if self.rows.contains_key(&line) {
            let names = self.kind.columns().iter().copied();
            self.rows_found.push(names.zip(fields).map(|(name, field)| (name, shown(field))).collect());
        }
        true
    }

    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.bad = Some(format!("row {line}, column {column}, value {value:?}: {reason}"));
        false
    }

    fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.malformed(line, column, value, reason)
    }
}

/// A stored value as text: decimals without the trailing zeros of their
/// stored scale (`0.013000000` is `0.013`), exact.
fn shown(field: &Field<'_>) -> String {
    let text = field.display();
    match field {
        Field::Decimal { scale, .. } if *scale > 0 => text.trim_end_matches('0').trim_end_matches('.').to_owned(),
        _ => text,
    }
}
