//! The key of a rollup group while an ingest runs: the account and the
//! other text fields as this run's string ids, the 15-minute slot and the
//! fixed fields. An account's groups all sit in one shard ([`shard_of`]).

use crate::aggregate::dims::Dims;
use crate::aggregate::Totals;

/// Rollup groups of one account.
pub(super) type Groups<'a> = &'a [(RollupKey, Totals)];

/// A row to subtract from its rollup group: its key in text and its sums.
#[derive(Clone, Debug)]
pub(super) struct MinusRow {
    pub(super) slot: i64,
    pub(super) product: crate::records::Product,
    pub(super) subaccount: String,
    pub(super) type_: String,
    pub(super) code: String,
    pub(super) country: Option<crate::records::Country>,
    pub(super) direction: Option<crate::records::Direction>,
    pub(super) totals: Totals,
}

/// A rollup key in interned ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct RollupKey {
    pub(super) account: u32,
    pub(super) slot: i64,
    /// Text as string ids, an absent subaccount or code the empty string.
    pub(super) dims: Dims<u32, u32>,
}

impl RollupKey {
    /// The fields after the slot in the report's order, text as this run's
    /// string ids. A rollup row's absent subaccount or code is the empty
    /// string, the lowest of all strings, so it sorts first as an absent
    /// value does.
    #[inline]
    pub(super) fn order(&self) -> Dims<u32> {
        self.dims.present()
    }
}

/// Shards of the rollups (`fold::Rollups`): an account's groups all sit in the shard its id
/// hashes to ([`shard_of`]), so shards fold, spill and publish on their own
/// (in parallel), and the output does not depend on the sharding.
pub(super) const SHARDS: usize = 16;

/// The shard of the account `auth_id` (a fixed hash: the same on every run
/// and thread count).
pub(super) fn shard_of(auth_id: &str) -> usize {
    (xxhash_rust::xxh3::xxh3_64(auth_id.as_bytes()) % SHARDS as u64) as usize
}
