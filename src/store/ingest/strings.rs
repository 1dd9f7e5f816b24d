//! The strings of one account's merge: the run's shared interner, plus
//! the strings of the account's older files that this ingest has not seen,
//! and every id's rank in byte order (the report's order of text).

use super::key::RollupKey;
use crate::aggregate::dims::Dims;
use crate::aggregate::Totals;
use crate::intern::Interner;
use crate::store::rollup::{KeyedRollup, RollupRef};

/// A shard's strings and their byte order, sorted once for every account
/// the shard merges: a sort of the whole table per account made a shard of
/// 100,000 small accounts quadratic (7 minutes for 3M rows).
pub(super) struct SortedStrings<'a> {
    strings: &'a Interner,
    /// The ids in byte order of their strings.
    order: Vec<u32>,
    /// Each id's position in `order`.
    ranks: Vec<u32>,
}

impl<'a> SortedStrings<'a> {
    pub(super) fn new(strings: &'a Interner) -> SortedStrings<'a> {
        let ranks = strings.ranks();
        let mut order = vec![0; ranks.len()];
        for (id, rank) in ranks.iter().enumerate() {
            order[*rank as usize] = id as u32;
        }
        SortedStrings { strings, order, ranks }
    }
}

/// The shared interner of a run, plus the strings of one account's older
/// files that this ingest has not seen (ids after the shared ones).
pub(super) struct AccountStrings<'a> {
    shared: &'a Interner,
    sorted: &'a SortedStrings<'a>,
    extra: Interner,
    extra_ranks: std::cell::RefCell<ExtraRanks>,
}

/// Ranks among the shared and the extra strings together, once there are
/// extra strings: each extra string's, and each shared id's asked for so
/// far (its shared rank plus the extra strings before it). Computed for
/// the extra strings of one account, never for the whole table.
#[derive(Default)]
struct ExtraRanks {
    /// How many extra strings they cover (recomputed when more came).
    covers: usize,
    /// The extra strings' indices in byte order.
    sorted: Vec<u32>,
    /// Each extra string's rank, by index.
    extra: Vec<u32>,
    /// The ranks of shared ids asked for.
    shared: rustc_hash::FxHashMap<u32, u32>,
}

impl<'a> AccountStrings<'a> {
    pub(super) fn new(sorted: &'a SortedStrings<'a>) -> AccountStrings<'a> {
        let shared = sorted.strings;
        AccountStrings { shared, sorted, extra: Interner::default(), extra_ranks: Default::default() }
    }

    pub(super) fn id(&mut self, text: &str) -> u32 {
        match self.shared.lookup(text) {
            Some(id) => id,
            None => (self.shared.len() as u32) + self.extra.intern(text),
        }
    }

    pub(super) fn text(&self, id: u32) -> &str {
        match (id as usize).checked_sub(self.shared.len()) {
            Some(i) => self.extra.get(i as u32),
            None => self.shared.get(id),
        }
    }

    /// The rank of string `id` in byte order of every string, shared and
    /// extra: `rank(a) < rank(b)` exactly when `text(a) < text(b)`, ranks
    /// dense from 0. `u32::MAX` for an id that is neither.
    pub(super) fn rank(&self, id: u32) -> u32 {
        let ranks = &self.sorted.ranks;
        if self.extra.len() == 0 {
            return ranks.get(id as usize).copied().unwrap_or(u32::MAX);
        }
        let mut extra_ranks = self.extra_ranks.borrow_mut();
        if extra_ranks.covers != self.extra.len() {
            *extra_ranks = self.extra_ranks();
        }
        let ExtraRanks { sorted, extra, shared, .. } = &mut *extra_ranks;
        match (id as usize).checked_sub(self.shared.len()) {
            Some(i) => extra.get(i).copied().unwrap_or(u32::MAX),
            None => *shared.entry(id).or_insert_with(|| {
                let Some(rank) = ranks.get(id as usize) else { return u32::MAX };
                let text = self.shared.get(id);
                rank + sorted.partition_point(|&e| self.extra.get(e) < text) as u32
            }),
        }
    }

    /// Each extra string's rank among all: the shared strings before it
    /// (a binary search of the shared order) and the extra ones.
    fn extra_ranks(&self) -> ExtraRanks {
        let n = self.extra.len();
        let mut sorted: Vec<u32> = (0..n as u32).collect();
        sorted.sort_unstable_by(|a, b| self.extra.get(*a).cmp(self.extra.get(*b)));
        let mut extra = vec![0; n];
        for (position, &e) in sorted.iter().enumerate() {
            let text = self.extra.get(e);
            let shared_before = self.sorted.order.partition_point(|&s| self.shared.get(s) < text);
            extra[e as usize] = (shared_before + position) as u32;
        }
        ExtraRanks { covers: n, sorted, extra, shared: Default::default() }
    }

    /// Rows of `account` as the writer takes them (with their string ids).
    pub(super) fn refs<'s>(
        &'s self,
        account: &'s str,
        rows: &'s [(RollupKey, Totals)],
    ) -> impl Iterator<Item = KeyedRollup<'s>> + 's {
        rows.iter().map(move |(key, totals)| KeyedRollup {
            row: RollupRef {
                auth_id: account,
                slot: key.slot,
                dims: Dims {
                    product: key.dims.product,
                    type_: self.text(key.dims.type_),
                    subaccount: self.text(key.dims.subaccount),
                    country: key.dims.country,
                    direction: key.dims.direction,
                    code: self.text(key.dims.code),
                },
                totals: *totals,
            },
            ids: [key.account, key.dims.subaccount, key.dims.type_, key.dims.code],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every id's rank is its position among all strings, shared and
    /// extra, in byte order, as extra strings come in between ranks asked.
    #[test]
    fn ranks_are_positions_in_byte_order_of_shared_and_extra_strings() {
        let mut shared = Interner::default();
        for text in ["sms", "", "S2", "voice", "4000", "é", "MA1", "Z"] {
            shared.intern(text);
        }
        let sorted = SortedStrings::new(&shared);
        let mut strings = AccountStrings::new(&sorted);
        let check = |strings: &AccountStrings<'_>, n: u32| {
            let mut by_text: Vec<u32> = (0..n).collect();
            by_text.sort_by(|a, b| strings.text(*a).cmp(strings.text(*b)));
            let ranks: Vec<u32> = by_text.iter().map(|id| strings.rank(*id)).collect();
            assert_eq!(
                ranks,
                (0..n).collect::<Vec<_>>(),
                "{:?}",
                by_text.iter().map(|id| strings.text(*id)).collect::<Vec<_>>()
            );
        };
        check(&strings, shared.len() as u32);
        assert_eq!(strings.rank(99), u32::MAX);
        for (i, text) in ["S1", "30007", "sms", "A", "zz", "", "3010", "S10"].iter().enumerate() {
            strings.id(text);
            let n = (shared.len() + strings.extra.len()) as u32;
            check(&strings, n);
            assert!(strings.extra.len() <= i + 1);
        }
    }
}
