//! The in-memory rollup groups of one shard ([`GroupTable`]): the groups in
//! one vector, in the order they first appeared, and an open-addressing
//! table of their positions (linear probing) with a tag of each group's
//! hash beside it.
//!
//! Why not a `HashMap`: about two rows in three start a new group, so
//! nearly every add is a slot never seen before, a cache miss. Here a slot
//! is 8 bytes (not the 112 of a key and its totals) and its place is known
//! from the hash alone, so the fold computes a key a few rows ahead and
//! prefetches its slot ([`GroupTable::prefetch`]); a new group is appended
//! at the end of the vector, memory just written. Taking the groups out
//! for a spill copies them out and clears the table, which keeps its
//! memory for the next batches.

use std::hash::BuildHasher;

use super::rollups::RollupKey;
use crate::aggregate::Totals;
use crate::error::{Error, Result};

/// Groups and their slots. A slot is 0 when empty, else the high 32 bits
/// of the group's hash (the tag) above its position in `rows` plus one.
#[derive(Default)]
pub(super) struct GroupTable {
    rows: Vec<(RollupKey, Totals)>,
    slots: Vec<u64>,
}

/// Slots of a table's first growth.
const FIRST_SLOTS: usize = 1 << 10;

impl GroupTable {
    /// The hash of `key` (fixed: the same on every run).
    #[inline]
    pub(super) fn hash(key: &RollupKey) -> u64 {
        rustc_hash::FxBuildHasher.hash_one(key)
    }

    /// Groups held.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Makes room for `additional` more groups at once (a batch's rows
    /// for this shard, an upper bound), so that the groups grow at most
    /// once a batch, not by doubling: each growth is a `realloc` that
    /// copies every group, under glibc's arena lock, which the ingest's
    /// threads share. Room never written takes no memory (the
    /// 16.1M-record ingest peaked 10-30 MB lower: docs/performance.md
    /// "Round 17").
    pub(super) fn reserve(&mut self, additional: usize) {
        self.rows.reserve(additional);
    }

    /// Starts loading the slot where a key of hash `hash` is looked up.
    #[inline]
    pub(super) fn prefetch(&self, hash: u64) {
        if let Some(slot) = self.slots.get(self.home(hash)) {
            crate::prefetch::prefetch(slot);
        }
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        hash as usize & self.slots.len().wrapping_sub(1)
    }

    /// Adds `totals` to the group of `key` (`hash` is [`GroupTable::hash`]
    /// of it), making the group if it is new. `overflow` is the error of a
    /// sum past the totals' range.
    #[inline]
    pub(super) fn add(
        &mut self,
        key: RollupKey,
        hash: u64,
        totals: &Totals,
        overflow: impl FnOnce() -> Error,
    ) -> Result<()> {
        if (self.rows.len() + 1) * 2 > self.slots.len() {
            self.grow()?;
        }
        let tag = hash >> 32;
        let mask = self.slots.len() - 1;
        let mut at = hash as usize & mask;
        loop {
            let slot = self.slots[at];
            if slot == 0 {
                self.slots[at] = tag << 32 | (self.rows.len() as u64 + 1);
                self.rows.push((key, *totals));
                return Ok(());
            }
            if slot >> 32 == tag {
                let (held, sum) = &mut self.rows[(slot as u32 - 1) as usize];
                if *held == key {
                    *sum = sum.checked_add(totals).ok_or_else(overflow)?;
                    return Ok(());
                }
            }
            at = (at + 1) & mask;
        }
    }

    /// Doubles the slots (at most half of them are ever used) and places
    /// every group again.
    #[cold]
    fn grow(&mut self) -> Result<()> {
        if self.rows.len() >= u32::MAX as usize - 1 {
            return Err(Error::Limit(format!(
                "a rollup shard holds {} groups; lower --max-rollup-groups",
                self.rows.len()
            )));
        }
        let size = (self.slots.len() * 2).max(FIRST_SLOTS);
        self.slots = vec![0; size];
        let mask = size - 1;
        for (i, (key, _)) in self.rows.iter().enumerate() {
            let hash = GroupTable::hash(key);
            let mut at = hash as usize & mask;
            while self.slots[at] != 0 {
                at = (at + 1) & mask;
            }
            self.slots[at] = (hash >> 32) << 32 | (i as u64 + 1);
        }
        Ok(())
    }

    /// The groups, in the order they first appeared.
    pub(super) fn groups(&self) -> &[(RollupKey, Totals)] {
        &self.rows
    }

    /// Forgets every group; the table keeps its memory.
    pub(super) fn clear(&mut self) {
        self.slots.fill(0);
        self.rows.clear();
    }

    /// Frees the memory of an empty table.
    pub(super) fn release(&mut self) {
        *self = GroupTable::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Product;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn key(account: u32, slot: i64, code: u32) -> RollupKey {
        RollupKey {
            account,
            subaccount: 0,
            slot,
            product: Product::Voice,
            type_: 1,
            country: None,
            direction: None,
            code,
        }
    }

    fn totals(amount: i128) -> Totals {
        Totals { records: 1, units: 1, duration: 0, amount, surcharge: 0 }
    }

    proptest! {
        /// The table sums what a `HashMap` sums, across growth and a
        /// clear (keys drawn from a small space, so that
        /// groups repeat).
        #[test]
        fn sums_as_a_hash_map_does(
            rows in proptest::collection::vec((0u32..4, 0i64..300, 0u32..5, -1000i128..1000), 0..3000),
            cut in 0usize..3000,
        ) {
            let mut table = GroupTable::default();
            let mut expected: HashMap<RollupKey, Totals> = HashMap::new();
            let mut taken: Vec<(RollupKey, Totals)> = Vec::new();
            for (i, &(account, slot, code, amount)) in rows.iter().enumerate() {
                if i == cut {
                    taken.extend_from_slice(table.groups());
                    table.clear();
                    prop_assert_eq!(table.len(), 0);
                }
                let k = key(account, slot, code);
                table.add(k, GroupTable::hash(&k), &totals(amount), || Error::Internal("overflow".into())).unwrap();
                let sum = expected.entry(k).or_default();
                *sum = sum.checked_add(&totals(amount)).unwrap();
            }
            taken.extend_from_slice(table.groups());
            let mut summed: HashMap<RollupKey, Totals> = HashMap::new();
            for (k, t) in taken {
                let sum = summed.entry(k).or_default();
                *sum = sum.checked_add(&t).unwrap();
            }
            prop_assert_eq!(summed, expected);
        }
    }

    /// Within one fill, each key is one group, in the order keys first
    /// appeared.
    #[test]
    fn one_group_per_key_in_first_seen_order() {
        let mut table = GroupTable::default();
        let keys: Vec<RollupKey> = (0..5000).map(|i| key(i % 7, i as i64 / 3, i % 11)).collect();
        for k in keys.iter().chain(&keys) {
            table.add(*k, GroupTable::hash(k), &totals(2), || Error::Internal("overflow".into())).unwrap();
        }
        let rows = table.groups();
        let mut first_seen: Vec<RollupKey> = Vec::new();
        for k in &keys {
            if !first_seen.contains(k) {
                first_seen.push(*k);
            }
        }
        assert_eq!(rows.iter().map(|(k, _)| *k).collect::<Vec<_>>(), first_seen);
        assert!(rows.iter().all(|(_, t)| t.records >= 2 && t.amount == 2 * t.records as i128));
    }

    /// A sum past the totals' range is the error given, and the group keeps
    /// its sum.
    #[test]
    fn an_overflow_is_the_error_given() {
        let mut table = GroupTable::default();
        let k = key(1, 1, 1);
        let big = Totals { amount: i128::MAX, ..Totals::default() };
        table.add(k, GroupTable::hash(&k), &big, || Error::Internal("first".into())).unwrap();
        let error = table.add(k, GroupTable::hash(&k), &totals(1), || Error::Internal("past".into())).unwrap_err();
        assert!(error.to_string().contains("past"), "{error}");
        assert_eq!(table.groups(), &[(k, big)]);
    }
}
