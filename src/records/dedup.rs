//! Re-delivered rows: identical ones count once, conflicting ones are errors.
//!
//! Every row leaves a [`Seen`] entry: a 128-bit hash of its `record_id`, a
//! hash of its content and its place. Entries are spread over
//! [`PARTITIONS`] partitions by id hash as they are made, so the check runs
//! in parallel per partition. A partition whose entries arrive in file order
//! (as a pass makes them) is checked with one hash map from id to its first
//! entry; any other order is sorted first. Every entry after an id's first
//! is either a duplicate (same content) or a conflict (different content).

use rayon::prelude::*;
use rustc_hash::FxHashSet;
use xxhash_rust::xxh3::xxh3_128;

/// Number of id-hash partitions.
pub const PARTITIONS: usize = 64;

/// One row's identity and place.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seen {
    /// Hash of the record_id (high, low halves).
    pub id: (u64, u64),
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
        let hash = xxh3_128(record_id.as_bytes());
        Seen { id: ((hash >> 64) as u64, hash as u64), file, line, content }
    }

    /// The partition this entry belongs to.
    pub fn partition(&self) -> usize {
        (self.id.0 >> 58) as usize % PARTITIONS
    }
}

/// Two places `(file, line)`: an earlier row and a later one.
pub type PlacePair = ((u32, u64), (u32, u64));

/// One partition's duplicates and its first conflict.
type PartitionOutcome = (Vec<(u32, u64)>, Option<PlacePair>);

/// What the check found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Places of rows that repeat an earlier identical row: skip them.
    pub duplicates: FxHashSet<(u32, u64)>,
    /// The first conflict in file order: (earlier place, later place).
    pub conflict: Option<PlacePair>,
}

/// Checks the entries of one kind, given as many lists of partitions (one
/// list per scan, scans in file order).
pub fn check(parts: Vec<Vec<Vec<Seen>>>) -> Outcome {
    // Partition `p` is the `p`-th list of every scan, taken in scan order:
    // read where the scans left them, not copied into one list first (a copy
    // of every entry that ran on one thread and faulted in fresh pages).
    let results: Vec<PartitionOutcome> = (0..PARTITIONS)
        .into_par_iter()
        .map(|p| {
            let lists: Vec<&[Seen]> =
                parts.iter().filter_map(|scan| scan.get(p)).map(|l| &l[..]).filter(|l| !l.is_empty()).collect();
            if in_place_order(&lists) {
                check_in_place_order(lists.iter().flat_map(|l| l.iter()), lists.iter().map(|l| l.len()).sum())
            } else {
                check_sorted(lists.concat())
            }
        })
        .collect();
    let mut outcome = Outcome::default();
    for (duplicates, conflict) in results {
        outcome.duplicates.extend(duplicates);
        if let Some(found) = conflict {
            if outcome.conflict.is_none_or(|c| found.1 < c.1) {
                outcome.conflict = Some(found);
            }
        }
    }
    outcome
}

/// Whether the entries of `lists`, read one list after the other, come in
/// (file, line) order.
fn in_place_order(lists: &[&[Seen]]) -> bool {
    let place = |e: &Seen| (e.file, e.line);
    lists.iter().all(|l| l.windows(2).all(|w| place(&w[0]) <= place(&w[1])))
        && lists.windows(2).all(|w| place(&w[0][w[0].len() - 1]) <= place(&w[1][0]))
}

/// The check of one partition whose entries come in file order (as a pass
/// makes them): the first entry of an id is its earliest, so one hash map
/// from id to first entry replaces the sort, at the same outcome.
fn check_in_place_order<'e>(entries: impl Iterator<Item = &'e Seen>, n_entries: usize) -> PartitionOutcome {
    let mut first: rustc_hash::FxHashMap<(u64, u64), &Seen> =
        rustc_hash::FxHashMap::with_capacity_and_hasher(n_entries, Default::default());
    let mut duplicates = Vec::new();
    let mut conflict: Option<PlacePair> = None;
    for entry in entries {
        match first.entry(entry.id) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(entry);
            }
            std::collections::hash_map::Entry::Occupied(slot) => {
                let earlier = *slot.get();
                if earlier.content == entry.content {
                    duplicates.push((entry.file, entry.line));
                } else {
                    let found = ((earlier.file, earlier.line), (entry.file, entry.line));
                    if conflict.is_none_or(|c| found.1 < c.1) {
                        conflict = Some(found);
                    }
                }
            }
        }
    }
    (duplicates, conflict)
}

/// The check of one partition in any order: sorted by id, then place.
fn check_sorted(mut entries: Vec<Seen>) -> PartitionOutcome {
    entries.sort_unstable_by_key(|e| (e.id, e.file, e.line));
    let mut duplicates = Vec::new();
    let mut conflict: Option<PlacePair> = None;
    let mut first = 0;
    for i in 1..entries.len() {
        if entries[i].id != entries[first].id {
            first = i;
            continue;
        }
        let (a, b) = (&entries[first], &entries[i]);
        if a.content == b.content {
            duplicates.push((b.file, b.line));
        } else {
            let found = ((a.file, a.line), (b.file, b.line));
            if conflict.is_none_or(|c| found.1 < c.1) {
                conflict = Some(found);
            }
        }
    }
    (duplicates, conflict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partitioned(entries: &[Seen]) -> Vec<Vec<Seen>> {
        let mut parts: Vec<Vec<Seen>> = (0..PARTITIONS).map(|_| Vec::new()).collect();
        for e in entries {
            parts[e.partition()].push(*e);
        }
        parts
    }

    #[test]
    fn identical_rows_count_once_and_conflicts_name_both_places() {
        let a = Seen::new("r1", 7, 0, 2);
        let a_again = Seen::new("r1", 7, 1, 5);
        let b = Seen::new("r2", 9, 0, 3);
        let outcome = check(vec![partitioned(&[a, b]), partitioned(&[a_again])]);
        assert_eq!(outcome.duplicates.len(), 1);
        assert!(outcome.duplicates.contains(&(1, 5)));
        assert_eq!(outcome.conflict, None);

        // Out of file order (the sort path) and in file order (the hash
        // path) agree.
        let outcome = check(vec![partitioned(&[a_again]), partitioned(&[a, b])]);
        assert_eq!(outcome.duplicates.len(), 1);
        assert!(outcome.duplicates.contains(&(1, 5)));

        let b_changed = Seen::new("r2", 10, 2, 9);
        let outcome = check(vec![partitioned(&[a, b]), partitioned(&[b_changed])]);
        assert_eq!(outcome.conflict, Some(((0, 3), (2, 9))));
    }
}
