//! Re-delivered rows: identical ones count once, conflicting ones are errors.
//!
//! A pass leaves one [`Entry`] per valid row (20 bytes): a 64-bit hash of
//! its `record_id`, a 64-bit key of its content and the other 64 bits of
//! the id's hash, and its row within its scan. Entries are spread over
//! [`PARTITIONS`] partitions by id hash as they are made, so the check runs
//! in parallel per partition. A partition whose entries arrive in file order
//! (as a pass makes them) is checked with one hash map from id to its first
//! entry; any other order is sorted first. Every entry after an id's first
//! is either a duplicate (same id hash and key: 128 bits of hash agree, as
//! the 128-bit id hash of [`Seen`] did) or a conflict. A conflict found on
//! 64 bits of id hash may be two ids that collide: the caller confirms it by
//! the record ids at its two places and, for a collision, checks again with
//! another seed ([`Entry::new`]).
//!
//! [`Seen`] is the store's entry (its index and ingest): the full 128-bit id
//! hash, the file and the line.

use rayon::prelude::*;
use rustc_hash::FxHashSet;
use xxhash_rust::xxh3::xxh3_128;

/// Number of id-hash partitions.
pub const PARTITIONS: usize = 64;

/// The 128-bit hash of a record id, or of one version of it, that a
/// store's dedup index is keyed by. Its top six bits pick the id-hash
/// partition.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
pub struct IdHash {
    /// The high half.
    pub hi: u64,
    /// The low half.
    pub lo: u64,
}

impl IdHash {
    /// The two halves of a 128-bit hash.
    fn of(hash: u128) -> IdHash {
        IdHash { hi: (hash >> 64) as u64, lo: hash as u64 }
    }

    /// The id-hash partition, below [`PARTITIONS`].
    pub fn partition(self) -> usize {
        (self.hi >> 58) as usize % PARTITIONS
    }
}

/// The hash of a record id that a store's dedup index is keyed by.
pub fn id_hash(record_id: &str) -> IdHash {
    IdHash::of(xxh3_128(record_id.as_bytes()))
}

/// The dedup id of version `revision` of `record_id`: its [`id_hash`] at
/// revision 0, else the hash seeded with the revision, so that each
/// version of a record is its own id (two rows of one id and revision are
/// a duplicate or a conflict; two revisions are neither).
pub fn version_hash(record_id: &str, revision: u64) -> IdHash {
    IdHash::of(xxhash_rust::xxh3::xxh3_128_with_seed(record_id.as_bytes(), revision))
}

/// One row's identity and place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Seen {
    /// Hash of the record_id.
    pub id: IdHash,
    /// Index of the file in the inventory.
    pub file: u32,
    /// Line or row number within the file.
    pub line: u64,
    /// Hash of the row's content.
    pub content: u64,
}

impl Seen {
    /// The entry of a row.
    pub fn new(record_id: &str, content: u64, file: u32, line: u64) -> Seen {
        Seen { id: id_hash(record_id), file, line, content }
    }

    /// The partition this entry belongs to.
    pub fn partition(&self) -> usize {
        self.id.partition()
    }
}

/// A pass's entry for one row, 24 bytes against [`Seen`]'s 40 (16.1M rows:
/// 386 MB): where it is comes from its scan's [`Origin`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct Entry {
    /// The high half of the record_id's hash.
    id: u64,
    /// The content hash, exclusive-or the low half of the id's hash: equal
    /// for two rows of one id exactly when their contents hash alike, and
    /// for two ids of one high half only by a second 64-bit coincidence.
    key: u64,
    /// The row's line, counted from its scan's first line.
    row: u32,
    /// 32 more bits of the id's hash (the top of its low half): where
    /// revisions are compared, an id is its 96 bits of hash, so that two
    /// ids of one high half are never taken for versions of one record.
    check: u32,
}

impl Entry {
    /// The entry of a row: `content` is [`Record::content_hash`](super::Record::content_hash),
    /// `row` its line minus its scan's first line; `seed` 0 on a first
    /// check, another value for an independent hash after a collision.
    #[inline]
    pub fn new(record_id: &str, content: u64, row: u32, seed: u64) -> Entry {
        let hash = if seed == 0 {
            xxh3_128(record_id.as_bytes())
        } else {
            xxhash_rust::xxh3::xxh3_128_with_seed(record_id.as_bytes(), seed)
        };
        #[cfg(test)]
        let hash = test_collisions::weaken(record_id, hash, seed);
        Entry { id: (hash >> 64) as u64, key: content ^ hash as u64, row, check: (hash >> 32) as u32 }
    }

    /// The partition this entry belongs to (as [`Seen::partition`]).
    #[inline]
    pub fn partition(&self) -> usize {
        (self.id >> 58) as usize % PARTITIONS
    }

    fn place(&self, origin: Origin) -> Place {
        Place { file: origin.file, line: origin.first_line + u64::from(self.row) }
    }
}

/// Where a row is: its file and line. Places order as the rows were read
/// (file by file, line by line).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    /// The file: its index in a pass's inventory, or a store's source
    /// number in its index.
    pub file: u32,
    /// The row's line in the file.
    pub line: u64,
}

/// Where a scan's entries are: its file and the line its rows count from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// Index of the file in the inventory.
    pub file: u32,
    /// The line of row 0.
    pub first_line: u64,
}

/// One scan's entries by partition, and where they are.
#[derive(Clone, Debug)]
pub struct ScanEntries {
    /// Where the scan's rows are.
    pub origin: Origin,
    /// Its entries, one list per partition.
    pub parts: Vec<Vec<Entry>>,
}

/// The entry of a row that takes part in corrections: a version of a
/// revision above 0, or a void (of the record kind it withdraws).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Revised {
    /// The row's entry: for a void, its content is its reason's hash.
    pub entry: Entry,
    /// The row's revision.
    pub revision: u64,
    /// Whether the row is a void.
    pub void: bool,
}

/// One scan's revised entries of one kind, and where they are.
#[derive(Clone, Debug)]
pub struct ScanRevised {
    /// Where the scan's rows are.
    pub origin: Origin,
    /// Its revised entries of the kind.
    pub entries: Vec<Revised>,
}

#[cfg(test)]
pub(crate) mod test_collisions {
    //! Unit tests need 64-bit id-hash collisions, which real ids give once
    //! in billions of runs: under `cfg(test)`, ids that start with
    //! `collide` share one high half at seed 0.

    /// `hash`, its high half made one for every `collide` id at seed 0.
    pub(crate) fn weaken(record_id: &str, hash: u128, seed: u64) -> u128 {
        if seed == 0 && record_id.starts_with("collide") {
            (0x1234_5678_9abc_def0u128 << 64) | (hash & u128::from(u64::MAX))
        } else {
            hash
        }
    }
}

/// The places of two rows that conflict: an earlier one and a later one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The row read first.
    pub earlier: Place,
    /// The row that conflicts with it.
    pub later: Place,
}

impl Conflict {
    /// Whether a reading in file order meets this conflict before `other`:
    /// its later row comes first.
    pub fn met_before(&self, other: &Conflict) -> bool {
        self.later < other.later
    }
}

/// Keeps in `kept` whichever of it and `found` a reading in file order
/// meets first.
fn keep_first(kept: &mut Option<Conflict>, found: Conflict) {
    if kept.is_none_or(|c| found.met_before(&c)) {
        *kept = Some(found);
    }
}

/// One partition's duplicates, superseded rows and first conflict.
#[derive(Default)]
struct PartitionOutcome {
    duplicates: Vec<Place>,
    superseded: Vec<Place>,
    conflict: Option<Conflict>,
}

/// What the check found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Places of rows that repeat an earlier identical row: skip them.
    pub duplicates: FxHashSet<Place>,
    /// Places of versions and voids below their record's highest
    /// revision: skip them.
    pub superseded: FxHashSet<Place>,
    /// The first conflict in file order.
    pub conflict: Option<Conflict>,
}

/// Checks the entries of one kind, given as one [`ScanEntries`] per scan,
/// scans in file order, and the kind's revised entries (versions of a
/// revision above 0 and voids), in any order.
pub fn check(scans: Vec<ScanEntries>, revised: Vec<ScanRevised>) -> Outcome {
    // Revised entries are few: filed by partition here, with their places.
    let mut revised_parts: Vec<Vec<Checked>> = (0..PARTITIONS).map(|_| Vec::new()).collect();
    for ScanRevised { origin, entries } in &revised {
        for r in entries {
            let e = r.entry;
            let checked = Checked {
                id: (e.id, e.check),
                revision: r.revision,
                void: r.void,
                key: e.key,
                place: e.place(*origin),
            };
            revised_parts[e.partition()].push(checked);
        }
    }
    // Partition `p` is the `p`-th list of every scan, taken in scan order:
    // read where the scans left them, not copied into one list first (a copy
    // of every entry that ran on one thread and faulted in fresh pages).
    let results: Vec<PartitionOutcome> = revised_parts
        .into_par_iter()
        .enumerate()
        .map(|(p, revised)| {
            let lists: Vec<ScanList<'_>> = scans
                .iter()
                .filter_map(|scan| scan.parts.get(p).map(|l| ScanList { origin: scan.origin, entries: l }))
                .filter(|list| !list.entries.is_empty())
                .collect();
            let entries = lists.iter().flat_map(|list| {
                list.entries.iter().map(|e| Plain { id: e.id, key: e.key, place: e.place(list.origin) })
            });
            if !revised.is_empty() {
                let base = lists.iter().flat_map(|list| {
                    list.entries.iter().map(|e| Checked {
                        id: (e.id, e.check),
                        revision: 0,
                        void: false,
                        key: e.key,
                        place: e.place(list.origin),
                    })
                });
                check_revisions(base.chain(revised).collect())
            } else if in_place_order(&lists) {
                check_in_place_order(entries, lists.iter().map(|list| list.entries.len()).sum())
            } else {
                check_sorted(entries.collect())
            }
        })
        .collect();
    let mut outcome = Outcome::default();
    for result in results {
        outcome.duplicates.extend(result.duplicates);
        outcome.superseded.extend(result.superseded);
        if let Some(found) = result.conflict {
            keep_first(&mut outcome.conflict, found);
        }
    }
    outcome
}

/// An entry as the check of a partition with revisions reads it.
#[derive(Clone, Copy, Debug)]
struct Checked {
    /// The id's high half and 32 more bits of its hash.
    id: (u64, u32),
    revision: u64,
    void: bool,
    key: u64,
    place: Place,
}

/// The check of one partition that holds revised entries: sorted by id,
/// revision and place. Within an id and revision, the first row (in file
/// order) is the one that counts there and every other is a duplicate
/// (same kind of row, same content) or a conflict; of the id's
/// revisions, every one below the highest is superseded. Sorting makes
/// the outcome independent of the order the entries came in.
fn check_revisions(mut entries: Vec<Checked>) -> PartitionOutcome {
    entries.sort_unstable_by_key(|c| (c.id, c.revision, c.place));
    let mut outcome = PartitionOutcome::default();
    for record in entries.chunk_by(|a, b| a.id == b.id) {
        let highest = record[record.len() - 1].revision;
        for revision in record.chunk_by(|a, b| a.revision == b.revision) {
            let first = revision[0];
            for other in &revision[1..] {
                if other.void == first.void && other.key == first.key {
                    outcome.duplicates.push(other.place);
                } else {
                    keep_first(&mut outcome.conflict, Conflict { earlier: first.place, later: other.place });
                }
            }
            if first.revision < highest {
                outcome.superseded.push(first.place);
            }
        }
    }
    outcome
}

/// One scan's entries of one partition, read where the scan left them.
struct ScanList<'a> {
    /// Where the scan's rows are.
    origin: Origin,
    /// The entries, never empty.
    entries: &'a [Entry],
}

/// Whether the entries of `lists`, read one list after the other, come in
/// (file, line) order.
fn in_place_order(lists: &[ScanList<'_>]) -> bool {
    let rows_rise = |l: &[Entry]| l.windows(2).all(|w| w[0].row <= w[1].row);
    lists.iter().all(|list| rows_rise(list.entries))
        && lists.windows(2).all(|w| {
            let (a, b) = (&w[0], &w[1]);
            a.entries[a.entries.len() - 1].place(a.origin) <= b.entries[0].place(b.origin)
        })
}

/// An entry as the check of a partition without revisions reads it.
#[derive(Clone, Copy, Debug)]
struct Plain {
    /// The high half of the id's hash.
    id: u64,
    /// The content key (see [`Entry`]).
    key: u64,
    place: Place,
}

/// The check of one partition whose entries come in file order (as a pass
/// makes them): the first entry of an id is its earliest, so one hash map
/// from id to first entry replaces the sort, at the same outcome.
fn check_in_place_order(entries: impl Iterator<Item = Plain>, n_entries: usize) -> PartitionOutcome {
    let mut first: rustc_hash::FxHashMap<u64, Plain> =
        rustc_hash::FxHashMap::with_capacity_and_hasher(n_entries, Default::default());
    let mut duplicates = Vec::new();
    let mut conflict = None;
    for entry in entries {
        match first.entry(entry.id) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(entry);
            }
            std::collections::hash_map::Entry::Occupied(slot) => {
                let earlier = *slot.get();
                if earlier.key == entry.key {
                    duplicates.push(entry.place);
                } else {
                    keep_first(&mut conflict, Conflict { earlier: earlier.place, later: entry.place });
                }
            }
        }
    }
    PartitionOutcome { duplicates, superseded: Vec::new(), conflict }
}

/// The check of one partition in any order: sorted by id, then place.
fn check_sorted(mut entries: Vec<Plain>) -> PartitionOutcome {
    entries.sort_unstable_by_key(|e| (e.id, e.place));
    let mut duplicates = Vec::new();
    let mut conflict = None;
    let mut first = 0;
    for i in 1..entries.len() {
        if entries[i].id != entries[first].id {
            first = i;
            continue;
        }
        let (a, b) = (&entries[first], &entries[i]);
        if a.key == b.key {
            duplicates.push(b.place);
        } else {
            keep_first(&mut conflict, Conflict { earlier: a.place, later: b.place });
        }
    }
    PartitionOutcome { duplicates, superseded: Vec::new(), conflict }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `entries` (record id, content, line) of one scan of `file` whose
    /// first line is 2, by partition.
    fn scan(file: u32, entries: &[(&str, u64, u64)]) -> ScanEntries {
        let mut parts: Vec<Vec<Entry>> = (0..PARTITIONS).map(|_| Vec::new()).collect();
        for &(id, content, line) in entries {
            let e = Entry::new(id, content, (line - 2) as u32, 0);
            parts[e.partition()].push(e);
        }
        ScanEntries { origin: Origin { file, first_line: 2 }, parts }
    }

    fn at(file: u32, line: u64) -> Place {
        Place { file, line }
    }

    fn conflict(earlier: Place, later: Place) -> Option<Conflict> {
        Some(Conflict { earlier, later })
    }

    #[test]
    fn an_entry_is_twenty_four_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 24);
    }

    #[test]
    fn identical_rows_count_once_and_conflicts_name_both_places() {
        let outcome = check(vec![scan(0, &[("r1", 7, 2), ("r2", 9, 3)]), scan(1, &[("r1", 7, 5)])], Vec::new());
        assert_eq!(outcome.duplicates.len(), 1);
        assert!(outcome.duplicates.contains(&at(1, 5)));
        assert_eq!(outcome.conflict, None);

        // Out of file order (the sort path) and in file order (the hash
        // path) agree.
        let outcome = check(vec![scan(1, &[("r1", 7, 5)]), scan(0, &[("r1", 7, 2), ("r2", 9, 3)])], Vec::new());
        assert_eq!(outcome.duplicates.len(), 1);
        assert!(outcome.duplicates.contains(&at(1, 5)));

        let outcome = check(vec![scan(0, &[("r1", 7, 2), ("r2", 9, 3)]), scan(2, &[("r2", 10, 9)])], Vec::new());
        assert_eq!(outcome.conflict, conflict(at(0, 3), at(2, 9)));
        let outcome = check(vec![scan(2, &[("r2", 10, 9)]), scan(0, &[("r1", 7, 2), ("r2", 9, 3)])], Vec::new());
        assert_eq!(outcome.conflict, conflict(at(0, 3), at(2, 9)));
    }

    #[test]
    fn colliding_ids_show_as_a_conflict_never_as_a_duplicate() {
        // Two ids of one high half (the cfg(test) collision), same content:
        // the keys differ by the ids' low halves, so it is a conflict for
        // the caller to confirm, not a duplicate.
        let outcome = check(vec![scan(0, &[("collide-a", 7, 2), ("collide-b", 7, 3)])], Vec::new());
        assert!(outcome.duplicates.is_empty());
        assert_eq!(outcome.conflict, conflict(at(0, 2), at(0, 3)));
        // Another seed tells them apart.
        let a = Entry::new("collide-a", 7, 0, 1);
        let b = Entry::new("collide-b", 7, 1, 1);
        assert_ne!({ a.id }, { b.id });
    }
}
