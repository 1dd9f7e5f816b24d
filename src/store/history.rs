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
//! A stored version is the first delivery of the record: a re-delivery is
//! counted as a duplicate by its ingest and not kept, and a record with a
//! revision is refused by `ingest`. So a stored id has one version, and it
//! counts.

use std::path::Path;

use crate::error::{Error, Result};
use crate::records::csv::RowSink;
use crate::records::dedup;
use crate::records::{Field, Kind};

use super::index::{self, IndexFile};
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
    /// Whether it is the version that counts in every answer.
    pub counts: bool,
    /// Its columns as stored: the kind's contract columns, in the order of
    /// `records.md`, each with its value as text (money exact, to the
    /// nano-unit; times in RFC 3339, UTC).
    pub fields: Vec<(&'static str, String)>,
}

/// The stored versions of the record `record_id` of `kind` in `store`'s
/// generation, oldest ingest first: none when the store holds no such
/// record. A damaged index or records file is an error naming it.
pub fn history(store: &Store, kind: Kind, record_id: &str) -> Result<Vec<Version>> {
    let id = dedup::id_hash(record_id);
    let partition = index::partition_of(id);
    let files = store.manifest.kind(kind);
    let mut versions = Vec::new();
    for index_name in &files.index {
        let listed = store.manifest.file(&store.dir, index_name)?;
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
        let stem = batch_stem(index_name).ok_or_else(|| Error::io(&path, "not named <ingest>-<n>.idx"))?;
        let records_name = format!("records/{}/{stem}.parquet", kind.name());
        if !files.records.contains(&records_name) {
            return Err(Error::io(&path, format!("the store lists no {records_name} beside this index file")));
        }
        let rows = stored_rows(store, kind, &records_name, record_id)?;
        let ingest = stem.rsplit_once('-').map_or(stem, |(ingest, _)| ingest);
        for place in places {
            let source = store.manifest.sources.get(place.file as usize).ok_or_else(|| {
                Error::io(
                    &path,
                    format!("an entry names source {}, the store has {}", place.file, store.manifest.sources.len()),
                )
            })?;
            let fields = rows.first().cloned().ok_or_else(|| {
                Error::io(
                    store.dir.join(&records_name),
                    format!("no row of record_id {record_id}, which the index lists"),
                )
            })?;
            let source = super::source_file(source, ingest).to_owned();
            versions.push(Version { ingest: ingest.to_owned(), source, line: place.line, counts: false, fields });
        }
    }
    // The one version of a record that counts: the last stored (a store
    // keeps one version of an id today).
    if let Some(last) = versions.last_mut() {
        last.counts = true;
    }
    Ok(versions)
}

/// `<ingest>-<n>` of an index file named `index/<kind>/<ingest>-<n>.idx`.
fn batch_stem(index_name: &str) -> Option<&str> {
    Path::new(index_name).file_name()?.to_str()?.strip_suffix(".idx")
}

/// The rows of `record_id` in the records file `name`, each its contract
/// columns as text.
fn stored_rows(store: &Store, kind: Kind, name: &str, record_id: &str) -> Result<Vec<Vec<(&'static str, String)>>> {
    let file = store.record_file(kind, name.to_owned())?;
    let found = crate::records::parquet::read_parts(&file, || Find { kind, record_id, rows: Vec::new(), bad: None })?;
    let mut rows = Vec::new();
    for find in found {
        if let Some(why) = find.bad {
            return Err(Error::io(&file.path, format!("a stored row does not read back: {why}")));
        }
        rows.extend(find.rows);
    }
    Ok(rows)
}

/// A sink that keeps the rows of one record id.
struct Find<'a> {
    kind: Kind,
    record_id: &'a str,
    rows: Vec<Vec<(&'static str, String)>>,
    /// The first row that does not read back, which a records file that
    /// matches its sum never holds.
    bad: Option<String>,
}

impl RowSink for Find<'_> {
    fn row(&mut self, _: u64, fields: &[Field<'_>]) -> bool {
        if fields.first().and_then(Field::text_bytes) == Some(self.record_id.as_bytes()) {
            let names = self.kind.columns().iter().copied().chain([self.kind.optional_column()]);
            self.rows.push(names.zip(fields).map(|(name, field)| (name, shown(field))).collect());
        }
        true
    }

    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.bad = Some(format!("row {line}, column {column}, value {value:?}: {reason}"));
        false
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
