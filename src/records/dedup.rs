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

/// Checks the entries of one kind, given as many lists of partitions.
pub fn check(parts: Vec<Vec<Vec<Seen>>>) -> Outcome {
    // Each partition is allocated once, at its final size.
    let mut sizes = [0usize; PARTITIONS];
    for scan in &parts {
        for (p, entries) in scan.iter().enumerate() {
            sizes[p % PARTITIONS] += entries.len();
        }
    }
    let mut by_partition: Vec<Vec<Seen>> = sizes.iter().map(|&n| Vec::with_capacity(n)).collect();
    for scan in parts {
        for (p, entries) in scan.into_iter().enumerate() {
            by_partition[p % PARTITIONS].extend_from_slice(&entries);
        }
    }
    let results: Vec<PartitionOutcome> = by_partition
        .into_par_iter()
        .map(|mut entries| {
            let in_place_order = entries.windows(2).all(|w| (w[0].file, w[0].line) <= (w[1].file, w[1].line));
            if in_place_order && entries.len() < u32::MAX as usize {
                return check_in_place_order(&entries);
            }
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

/// The check of one partition whose entries come in file order (as a pass
/// makes them): the first entry of an id is its earliest, so one hash map
/// from id to first entry replaces the sort, at the same outcome.
#[allow(clippy::type_complexity)]
fn check_in_place_order(entries: &[Seen]) -> (Vec<(u32, u64)>, Option<((u32, u64), (u32, u64))>) {
    let mut first: rustc_hash::FxHashMap<(u64, u64), u32> =
        rustc_hash::FxHashMap::with_capacity_and_hasher(entries.len(), Default::default());
    let mut duplicates = Vec::new();
    let mut conflict: Option<((u32, u64), (u32, u64))> = None;
    for (i, entry) in entries.iter().enumerate() {
        match first.entry(entry.id) {
            std::collections::hash_map::Entry::Vacant(slot) => {
                slot.insert(i as u32);
            }
            std::collections::hash_map::Entry::Occupied(slot) => {
                let earlier = &entries[*slot.get() as usize];
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
