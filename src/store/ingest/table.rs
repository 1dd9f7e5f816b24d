//! The in-memory rollup groups of one shard ([`GroupTable`]): the groups in
//! one vector, in the order they first appeared, and an open-addressing
//! table of their positions (linear probing) with a tag of each group's
//! hash beside it.
//!
//! Why not a `HashMap`: about two rows in three start a new group, so
//! nearly every add is a slot never seen before, a cache miss. Here a slot
//! is 8 bytes (not the 72 of a key and its sums) and its place is known
//! from the hash alone, so the fold computes a key a few rows ahead and
//! prefetches its slot ([`GroupTable::prefetch`]); a new group is appended
//! at the end of the vector, memory just written. Taking the groups out
//! for a spill copies them out and clears the table, which keeps its
//! memory for the next batches.
//!
//! A group's sums are 64-bit ([`Sums`]), which is nearly always enough
//! (a 15-minute slot of one key); a sum that would pass them is set aside
//! in 128 bits ([`GroupTable::wide`]) and summed again by the merge, so
//! the table is exact whatever the input.

use std::hash::BuildHasher;

use super::key::RollupKey;
use crate::aggregate::Totals;
use crate::error::{Error, Result};

/// Groups and their slots. A slot is 0 when empty, else the high 32 bits
/// of the group's hash (the tag) above its position in `rows` plus one.
#[derive(Default)]
pub(super) struct GroupTable {
    rows: Vec<(RollupKey, Sums)>,
    slots: Vec<u64>,
    /// Sums past 64 bits ([`GroupTable::add`]), each beside a group of
    /// `rows` whose sum went back to zero: both are partial sums of the
    /// same key, summed again by the merge.
    wide: Vec<(RollupKey, Totals)>,
}

/// A group's sums in the fold's table: 40 bytes, not the 72 of [`Totals`]
/// (a group 72 bytes, not 104), so the table's groups, their spill and
/// its gathering move a third fewer bytes. A record's own values always
/// fit; a sum that would pass 64 bits moves to the table's wide groups.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Sums {
    pub(super) records: u64,
    pub(super) units: u64,
    pub(super) duration: i64,
    pub(super) amount: i64,
    pub(super) surcharge: i64,
}

impl Sums {
    /// The sums of one record.
    #[inline]
    pub(super) fn one(units: u64, duration: i64, amount: i64, surcharge: i64) -> Sums {
        Sums { records: 1, units, duration, amount, surcharge }
    }

    /// `totals` if every sum fits 64 bits.
    pub(super) fn narrow(totals: &Totals) -> Option<Sums> {
        Some(Sums {
            records: totals.records,
            units: u64::try_from(totals.units).ok()?,
            duration: i64::try_from(totals.duration).ok()?,
            amount: i64::try_from(totals.amount).ok()?,
            surcharge: i64::try_from(totals.surcharge).ok()?,
        })
    }

    /// The same sums as [`Totals`].
    #[inline]
    pub(super) fn wide(&self) -> Totals {
        Totals {
            records: self.records,
            units: self.units.into(),
            duration: self.duration.into(),
            amount: self.amount.into(),
            surcharge: self.surcharge.into(),
        }
    }

    #[inline]
    fn checked_add(&self, other: &Sums) -> Option<Sums> {
        Some(Sums {
            records: self.records.checked_add(other.records)?,
            units: self.units.checked_add(other.units)?,
            duration: self.duration.checked_add(other.duration)?,
            amount: self.amount.checked_add(other.amount)?,
            surcharge: self.surcharge.checked_add(other.surcharge)?,
        })
    }
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
        self.rows.len() + self.wide.len()
    }

    /// Makes room for `additional` more groups at once (a batch's rows
    /// for this shard, an upper bound), so that the groups grow at most
    /// once a batch, not by doubling: each growth is a `realloc` that
    /// copies every group, under glibc's arena lock, which the ingest's
    /// threads share. Room never written takes no memory (measure the peak
    /// with `bench/ingest-ab.sh`).
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

    /// Adds `sums` to the group of `key` (`hash` is [`GroupTable::hash`]
    /// of it), making the group if it is new. A sum that would pass 64
    /// bits goes to the wide groups with the group's sum so far, and the
    /// group starts again from zero; `overflow` is the error of a sum past
    /// even [`Totals`]' range.
    #[inline]
    pub(super) fn add(
        &mut self,
        key: RollupKey,
        hash: u64,
        sums: &Sums,
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
                self.rows.push((key, *sums));
                return Ok(());
            }
            if slot >> 32 == tag {
                let (held, sum) = &mut self.rows[(slot as u32 - 1) as usize];
                if *held == key {
                    match sum.checked_add(sums) {
                        Some(added) => *sum = added,
                        None => {
                            let wide = sum.wide().checked_add(&sums.wide()).ok_or_else(overflow)?;
                            *sum = Sums::default();
                            self.wide.push((key, wide));
                        }
                    }
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
    pub(super) fn groups(&self) -> &[(RollupKey, Sums)] {
        &self.rows
    }

    /// Partial sums past 64 bits, each of a key that is also one of
    /// [`GroupTable::groups`]' or another of these (sum them all).
    pub(super) fn wide(&self) -> &[(RollupKey, Totals)] {
        &self.wide
    }

    /// Forgets every group; the table keeps its memory.
    pub(super) fn clear(&mut self) {
        self.slots.fill(0);
        self.rows.clear();
        self.wide.clear();
    }

    /// Frees the memory of an empty table.
    pub(super) fn release(&mut self) {
        *self = GroupTable::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::dims::Dims;
    use crate::records::Product;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn key(account: u32, slot: i64, code: u32) -> RollupKey {
        let dims = Dims { product: Product::Voice, type_: 1, subaccount: 0, country: None, direction: None, code };
        RollupKey { account, slot, dims }
    }

    fn one(amount: i64) -> Sums {
        Sums::one(1, 0, amount, 0)
    }

    fn overflow() -> Error {
        Error::Internal("overflow".into())
    }

    /// Every partial sum the table holds, summed by key.
    fn summed(parts: impl IntoIterator<Item = (RollupKey, Totals)>) -> HashMap<RollupKey, Totals> {
        let mut summed: HashMap<RollupKey, Totals> = HashMap::new();
        for (k, t) in parts {
            let sum = summed.entry(k).or_default();
            *sum = sum.checked_add(&t).expect("no overflow past 128 bits");
        }
        summed
    }

    /// The table's groups and its sums past 64 bits.
    fn parts(table: &GroupTable) -> Vec<(RollupKey, Totals)> {
        table.groups().iter().map(|(k, s)| (*k, s.wide())).chain(table.wide().iter().copied()).collect()
    }

    proptest! {
        /// The table sums what a `HashMap` of 128-bit totals sums, across
        /// growth, a clear, and sums past 64 bits (keys drawn from a small
        /// space, so that groups repeat; amounts near the 64-bit limits,
        /// so that sums pass them).
        #[test]
        fn sums_as_a_hash_map_does(
            rows in proptest::collection::vec(
                (0u32..4, 0i64..300, 0u32..5, prop_oneof![-1000i64..1000, Just(i64::MAX), Just(i64::MIN), Just(i64::MAX / 3)]),
                0..3000,
            ),
            cut in 0usize..3000,
        ) {
            let mut table = GroupTable::default();
            let mut expected: Vec<(RollupKey, Totals)> = Vec::new();
            let mut taken: Vec<(RollupKey, Totals)> = Vec::new();
            for (i, &(account, slot, code, amount)) in rows.iter().enumerate() {
                if i == cut {
                    taken.extend(parts(&table));
                    table.clear();
                    prop_assert_eq!(table.len(), 0);
                }
                let k = key(account, slot, code);
                table.add(k, GroupTable::hash(&k), &one(amount), overflow).unwrap();
                expected.push((k, one(amount).wide()));
            }
            taken.extend(parts(&table));
            prop_assert_eq!(summed(taken), summed(expected));
        }
    }

    /// Within one fill, each key is one group, in the order keys first
    /// appeared.
    #[test]
    fn one_group_per_key_in_first_seen_order() {
        let mut table = GroupTable::default();
        let keys: Vec<RollupKey> = (0..5000).map(|i| key(i % 7, i as i64 / 3, i % 11)).collect();
        for k in keys.iter().chain(&keys) {
            table.add(*k, GroupTable::hash(k), &one(2), overflow).unwrap();
        }
        let rows = table.groups();
        let mut first_seen: Vec<RollupKey> = Vec::new();
        for k in &keys {
            if !first_seen.contains(k) {
                first_seen.push(*k);
            }
        }
        assert_eq!(rows.iter().map(|(k, _)| *k).collect::<Vec<_>>(), first_seen);
        assert!(rows.iter().all(|(_, t)| t.records >= 2 && t.amount == 2 * t.records as i64));
        assert!(table.wide().is_empty());
    }

    /// A sum past 64 bits moves to the wide sums with the group's sum so
    /// far, and the group starts again from zero; only a count past 64
    /// bits is the error given.
    #[test]
    fn a_sum_past_64_bits_goes_wide() {
        let mut table = GroupTable::default();
        let k = key(1, 1, 1);
        table.add(k, GroupTable::hash(&k), &one(i64::MAX), overflow).unwrap();
        table.add(k, GroupTable::hash(&k), &one(1), overflow).unwrap();
        assert_eq!(table.groups(), &[(k, Sums::default())]);
        let past = Totals { records: 2, units: 2, amount: i128::from(i64::MAX) + 1, ..Totals::default() };
        assert_eq!(table.wide(), &[(k, past)]);
        table.add(k, GroupTable::hash(&k), &one(5), overflow).unwrap();
        assert_eq!(table.groups(), &[(k, one(5))]);
        assert_eq!(table.len(), 2);

        let full = Sums { records: u64::MAX, ..Sums::default() };
        let other = key(2, 2, 2);
        table.add(other, GroupTable::hash(&other), &full, overflow).unwrap();
        let error = table.add(other, GroupTable::hash(&other), &one(1), || Error::Internal("past".into())).unwrap_err();
        assert!(error.to_string().contains("past"), "{error}");
        table.clear();
        assert_eq!((table.len(), table.wide().len()), (0, 0));
    }
}
