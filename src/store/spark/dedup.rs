//! The executor side's second step of `ingest --engine spark`: one kind's
//! new rows deduplicated, a range of id-hash partitions at a time, by the
//! hidden `spark-task dedup` command.
//!
//! Each check task wrote its file's dedup entries as an index file
//! (`checked/<n>.<s>.index`: id and content hashes and place, grouped by id-hash
//! partition, as the store's index files are). So a partition of the kind
//! is checked by itself, the way the local ingest checks its candidates:
//!
//! 1. read partition `p` of every new file's entries, files in ingest
//!    order, each file's in line order;
//! 2. stream partition `p` of every stored index file of the kind (the
//!    store's history, in manifest order): the first stored entry of each
//!    id the new entries hold (so memory follows the new rows, and the
//!    history is only read, 32 bytes a row);
//! 3. go through the new entries: an id not seen is new; seen with the
//!    same content hash, a repeat (`dups/<kind>/part-<p>.parquet`: its
//!    place and the place of the row it repeats); with another, a
//!    conflict, and the partition stops there.
//!
//! The id is the 128-bit version hash (record id and revision) and the
//! content the 64-bit content hash, as in the local ingest's dedup, so the
//! two engines call the same rows repeats.

use std::collections::hash_map::Entry;
use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use polars::prelude::DataFrame;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use super::super::index::{self, IndexEntry, IndexFile};
use super::super::parquet_io::{self, int_column, polars_error};
use crate::error::{Error, Result};
use crate::records::dedup::{IdHash, Place, PARTITIONS};

/// What the job gives the dedup tasks (`dedup.json` in the staging
/// folder): each kind's entries files.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct DedupInputs {
    /// By kind name.
    pub kinds: BTreeMap<String, KindInputs>,
}

/// The entries files of one kind.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct KindInputs {
    /// The new rows' entries files, in input file order.
    pub new: Vec<NewEntries<PathBuf>>,
    /// The store's index files of the kind, in manifest order.
    pub stored: Vec<PathBuf>,
}

/// One input file's (or split's) entries file (`checked/<n>.<s>.index`):
/// its path in `dedup.json`, then the file opened.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NewEntries<F> {
    /// The input file's index (the place's source in its entries).
    pub file: u32,
    /// The entries file.
    pub entries: F,
}

/// What one `spark-task dedup` run reports (one JSON line).
#[derive(Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct DedupSummary {
    /// New rows (the first of their id).
    pub new: u64,
    /// Repeats of an earlier row.
    pub duplicates: u64,
    /// The first conflict of the partitions (by the later row's place).
    pub conflict: Option<Clash>,
}

/// Two rows of one id and different content.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Clash {
    /// The earlier row.
    pub first: First,
    /// The later row, always new: its input file index and line.
    pub second_file: u32,
    /// Line (or Parquet row) of the later row.
    pub second_line: u64,
}

/// The columns of a repeats file: the repeat's place, and the place of the
/// row it repeats (`first_file` -1 for a stored row).
pub(super) const REPEAT_COLUMNS: [&str; 4] = ["file", "line", "first_file", "first_line"];

/// Where an id was first seen: a stored row (its source in the
/// manifest) or a new one (its input file index), and its line or
/// Parquet row.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum First {
    /// A stored row.
    Stored {
        /// Its source in the manifest.
        source: u32,
        /// Its line or Parquet row.
        line: u64,
    },
    /// A new row.
    New {
        /// Its input file index.
        file: u32,
        /// Its line or Parquet row.
        line: u64,
    },
}

impl First {
    fn line(self) -> u64 {
        match self {
            First::Stored { line, .. } | First::New { line, .. } => line,
        }
    }
}

/// A repeat and the row it repeats.
struct Repeat {
    at: Place,
    first: First,
}

/// Deduplicates the new rows of `kind` in id-hash `partitions`, from the
/// files `inputs` lists; writes the repeats to `out/part-<first>.parquet`.
pub fn dedup_task(inputs: &Path, kind: &str, partitions: Range<usize>, out: &Path) -> Result<DedupSummary> {
    if partitions.start >= partitions.end || partitions.end > PARTITIONS {
        return Err(Error::Internal(format!("partitions {partitions:?} of {PARTITIONS}")));
    }
    let mut all: DedupInputs = super::read_json(inputs, "dedup inputs")?;
    let files = all.kinds.remove(kind).unwrap_or_default();
    let stored: Vec<IndexFile> = files.stored.iter().map(|p| IndexFile::open_cached(p)).collect::<Result<_>>()?;
    let new: Vec<NewEntries<IndexFile>> = files
        .new
        .iter()
        .map(|n| Ok(NewEntries { file: n.file, entries: IndexFile::open(&n.entries)? }))
        .collect::<Result<_>>()?;
    let mut summary = DedupSummary::default();
    let mut repeats = Vec::new();
    for p in partitions.clone() {
        let found = dedup_partition(p, &stored, &new, &mut repeats)?;
        summary.new += found.new;
        summary.duplicates += found.duplicates;
        let place = |clash: &Clash| (clash.second_file, clash.second_line);
        summary.conflict = match (summary.conflict, found.conflict) {
            (Some(a), Some(b)) => Some(if place(&b) < place(&a) { b } else { a }),
            (a, b) => a.or(b),
        };
    }
    if summary.conflict.is_none() && !repeats.is_empty() {
        std::fs::create_dir_all(out).map_err(|e| Error::io(out, e))?;
        let path = out.join(format!("part-{:03}.parquet", partitions.start));
        let mut frame = Some(repeats_frame(&path, &repeats)?);
        parquet_io::write_frames(&path, || Ok(frame.take()))?;
    }
    Ok(summary)
}

/// Partition `p`: stored entries first, then the new ones in (file, line)
/// order. Repeats are pushed to `repeats`; a conflict ends the partition.
fn dedup_partition(
    p: usize,
    stored: &[IndexFile],
    new: &[NewEntries<IndexFile>],
    repeats: &mut Vec<Repeat>,
) -> Result<DedupSummary> {
    // The new entries, and the ids they hold: only those are looked up in
    // the stored entries (so a small ingest holds little, however large
    // the store).
    let mut entries: Vec<(u32, IndexEntry)> = Vec::new();
    for NewEntries { file, entries: index } in new {
        index.for_each_in(p, |entry| entries.push((*file, entry)))?;
    }
    let mut first: FxHashMap<IdHash, (u64, First)> = FxHashMap::default();
    // A partition the day has no id in is not read from the store.
    if !stored.is_empty() && !entries.is_empty() {
        let ids: FxHashSet<IdHash> = entries.iter().map(|(_, entry)| entry.id).collect();
        for file in stored {
            file.for_each_in(p, |entry| {
                if ids.contains(&entry.id) {
                    let Place { file: source, line } = index::unpack(entry.place);
                    first.entry(entry.id).or_insert((entry.content, First::Stored { source, line }));
                }
            })?;
        }
    }
    let mut summary = DedupSummary::default();
    for (source, entry) in entries {
        let at = index::unpack(entry.place);
        if at.file != source {
            return Err(Error::Internal(format!("an entry of input file #{} in the entries of #{source}", at.file)));
        }
        match first.entry(entry.id) {
            Entry::Vacant(slot) => {
                slot.insert((entry.content, First::New { file: at.file, line: at.line }));
                summary.new += 1;
            }
            Entry::Occupied(seen) => {
                let (content, earlier) = *seen.get();
                if content == entry.content {
                    repeats.push(Repeat { at, first: earlier });
                    summary.duplicates += 1;
                } else {
                    let clash = Clash { first: earlier, second_file: at.file, second_line: at.line };
                    summary.conflict = Some(clash);
                    return Ok(summary);
                }
            }
        }
    }
    Ok(summary)
}

/// The repeats as a frame of [`REPEAT_COLUMNS`].
fn repeats_frame(path: &Path, repeats: &[Repeat]) -> Result<DataFrame> {
    let int = |f: &dyn Fn(&Repeat) -> u64| -> Result<Vec<i64>> {
        repeats.iter().map(|r| parquet_io::to_i64(f(r), "line")).collect()
    };
    let first_file: Vec<i64> = repeats
        .iter()
        .map(|r| match r.first {
            First::New { file, .. } => i64::from(file),
            First::Stored { .. } => -1,
        })
        .collect();
    let columns = vec![
        int_column("file", int(&|r| u64::from(r.at.file))?),
        int_column("line", int(&|r| r.at.line)?),
        int_column("first_file", first_file),
        int_column("first_line", int(&|r| r.first.line())?),
    ];
    DataFrame::new(repeats.len(), columns).map_err(polars_error(path))
}

#[cfg(test)]
mod tests {
    use super::super::super::parquet_io::read_frame;
    use super::*;
    use crate::durable::Syncer;
    use crate::records::dedup::id_hash;
    use crate::store::index::{write_index, IndexEntry};

    fn entry(id: &str, content: u64, file: u32, line: u64) -> IndexEntry {
        IndexEntry { id: id_hash(id), content, place: index::pack(Place { file, line }) }
    }

    fn index_file(dir: &Path, name: &str, entries: &[IndexEntry]) -> PathBuf {
        let path = dir.join(name);
        write_index(&path, &[entries], &Syncer::at_once()).expect("written");
        path
    }

    fn new_entries(file: u32, entries: PathBuf) -> NewEntries<PathBuf> {
        NewEntries { file, entries }
    }

    /// Every partition, split in ranges as the job splits them: the summed
    /// counts, the first conflict, and the repeats in place order.
    fn run(dir: &Path, inputs: &DedupInputs, ranges: usize) -> (DedupSummary, Vec<Vec<i64>>) {
        let path = dir.join(format!("dedup-{ranges}.json"));
        std::fs::write(&path, serde_json::to_vec(inputs).expect("json")).expect("inputs");
        let out = dir.join(format!("dups-{ranges}"));
        let mut total = DedupSummary::default();
        for r in 0..ranges {
            let (from, to) = (PARTITIONS * r / ranges, PARTITIONS * (r + 1) / ranges);
            let found = dedup_task(&path, "calls", from..to, &out).expect("deduplicated");
            total.new += found.new;
            total.duplicates += found.duplicates;
            let later = |c: &Clash| (c.second_file, c.second_line);
            total.conflict = [total.conflict, found.conflict].into_iter().flatten().min_by_key(later);
        }
        let mut rows = Vec::new();
        for part in std::fs::read_dir(&out).into_iter().flatten().flatten() {
            let frame = read_frame(&part.path(), &REPEAT_COLUMNS).expect("a repeats file");
            let column = |name: &str| -> Vec<i64> {
                frame.column(name).expect("column").i64().expect("ints").into_no_null_iter().collect()
            };
            let columns: Vec<Vec<i64>> = REPEAT_COLUMNS.iter().map(|name| column(name)).collect();
            for i in 0..frame.height() {
                rows.push(columns.iter().map(|c| c[i]).collect());
            }
        }
        rows.sort();
        (total, rows)
    }

    /// Stored rows come first, then new ones in (file, line) order: the
    /// first row of an id is new, a later one with its content a repeat
    /// (naming the first), with other content a conflict (the earliest
    /// later row); whatever the partition ranges.
    #[test]
    fn repeats_name_the_first_row_and_conflicts_the_earliest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ids: Vec<String> = (0..200).map(|i| format!("r{i}")).collect();
        // Source 0 of the store holds r0..r49 at lines 1..
        let stored = index_file(
            dir.path(),
            "stored.idx",
            &ids[..50].iter().enumerate().map(|(i, id)| entry(id, 7, 0, i as u64 + 1)).collect::<Vec<_>>(),
        );
        // Input file 3: r40..r139 (r40..r49 repeat stored rows);
        // input file 5: r130..r199 (r130..r139 repeat file 3's).
        let first = (40..140).map(|i| entry(&ids[i], 7, 3, i as u64)).collect::<Vec<_>>();
        let second = (130..200).map(|i| entry(&ids[i], 7, 5, i as u64 + 1000)).collect::<Vec<_>>();
        let new = vec![
            new_entries(3, index_file(dir.path(), "3.index", &first)),
            new_entries(5, index_file(dir.path(), "5.index", &second)),
        ];
        let mut inputs = DedupInputs::default();
        inputs.kinds.insert("calls".into(), KindInputs { new: new.clone(), stored: vec![stored.clone()] });
        let mut expected: Vec<Vec<i64>> = (40..50).map(|i| vec![3, i, -1, i + 1]).collect();
        expected.extend((130..140).map(|i| vec![5, i + 1000, 3, i]));
        for ranges in [1, 3, 64] {
            let (summary, rows) = run(dir.path(), &inputs, ranges);
            assert_eq!((summary.new, summary.duplicates, summary.conflict), (150, 20, None), "{ranges} ranges");
            assert_eq!(rows, expected, "{ranges} ranges");
        }

        // Other content: r45 (stored) at file 3, r135 (file 3) at file 5
        // and r60 at file 5: the earliest later row is file 3's.
        let mut changed = first.clone();
        changed[5].content = 8;
        let mut later = second.clone();
        later[5].content = 8;
        later.push(entry(&ids[60], 9, 5, 5000));
        let new = vec![
            new_entries(3, index_file(dir.path(), "3b.index", &changed)),
            new_entries(5, index_file(dir.path(), "5b.index", &later)),
        ];
        inputs.kinds.insert("calls".into(), KindInputs { new, stored: vec![stored] });
        for ranges in [1, 3, 64] {
            let (summary, _) = run(dir.path(), &inputs, ranges);
            let clash = Clash { first: First::Stored { source: 0, line: 46 }, second_file: 3, second_line: 45 };
            assert_eq!(summary.conflict, Some(clash), "{ranges} ranges");
        }
        // A kind with no inputs has no rows.
        let path = dir.path().join("none.json");
        std::fs::write(&path, b"{\"kinds\":{}}").expect("inputs");
        let none = dedup_task(&path, "charges", 0..PARTITIONS, &dir.path().join("none")).expect("nothing");
        assert_eq!(none, DedupSummary::default());
    }

    /// A partition the day has no id in is not read from the store:
    /// damage there goes unseen, where a new id's partition holding the
    /// same damage is an error naming the stored file.
    #[test]
    fn only_the_partitions_of_new_ids_are_read_from_the_store() {
        let dir = tempfile::tempdir().expect("tempdir");
        let stored: Vec<IndexEntry> = (0..400).map(|i| entry(&format!("s{i}"), 1, 0, i + 1)).collect();
        let path = index_file(dir.path(), "stored.idx", &stored);
        let new = entry("n0", 1, 2, 1);
        let quiet = (0..PARTITIONS)
            .find(|&p| p != new.partition() && stored.iter().any(|e| e.partition() == p))
            .expect("a stored partition without the new id");
        // The first entry of partition `quiet` takes an id of another one.
        let mut bytes = std::fs::read(&path).expect("stored file");
        let offset = |p: usize| {
            let at = 16 + 8 * p;
            u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes")) as usize
        };
        let at = 16 + 8 * (PARTITIONS + 1) + 32 * offset(quiet);
        bytes[at..at + 8].copy_from_slice(&new.id.hi.to_le_bytes());
        bytes[at + 8..at + 16].copy_from_slice(&new.id.lo.to_le_bytes());
        std::fs::write(&path, &bytes).expect("damaged");

        let inputs = |name: &str, entries: &[IndexEntry]| {
            let mut inputs = DedupInputs::default();
            let new = vec![new_entries(2, index_file(dir.path(), name, entries))];
            inputs.kinds.insert("calls".into(), KindInputs { new, stored: vec![path.clone()] });
            let file = dir.path().join(format!("{name}.json"));
            std::fs::write(&file, serde_json::to_vec(&inputs).expect("json")).expect("inputs");
            file
        };
        let one = inputs("one.idx", &[new]);
        let found = dedup_task(&one, "calls", 0..PARTITIONS, &dir.path().join("out-one")).expect("not read");
        assert_eq!((found.new, found.duplicates), (1, 0));

        let id = (0..).map(|i| format!("m{i}")).find(|id| entry(id, 1, 2, 2).partition() == quiet).expect("an id");
        let two = inputs("two.idx", &[new, entry(&id, 1, 2, 2)]);
        let Err(error) = dedup_task(&two, "calls", 0..PARTITIONS, &dir.path().join("out-two")) else {
            panic!("the damaged partition is read for a new id in it")
        };
        let error = error.chain();
        assert!(error.contains("stored.idx") && error.contains(&format!("in partition {quiet}")), "{error}");
    }
}
