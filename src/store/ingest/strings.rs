//! The strings of one account's merge: the run's shared interner, plus
//! the strings of the account's older files that this ingest has not seen,
//! and every id's rank in byte order (the report's order of text).

use super::key::RollupKey;
use crate::aggregate::dims::Dims;
use crate::aggregate::Totals;
use crate::intern::{self, Interner};
use crate::store::rollup::{KeyedRollup, RollupRef};

/// The shared interner of a run, plus the strings of one account's older
/// files that this ingest has not seen (ids after the shared ones).
pub(super) struct AccountStrings<'a> {
    shared: &'a Interner,
    extra: Interner,
    ranks: std::cell::RefCell<Vec<u32>>,
}

impl<'a> AccountStrings<'a> {
    pub(super) fn new(shared: &'a Interner) -> AccountStrings<'a> {
        AccountStrings { shared, extra: Interner::default(), ranks: Default::default() }
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

    /// The rank of every string id in byte order of the strings (sorted
    /// again only when strings were added since the last call).
    pub(super) fn ranks(&self) -> std::cell::Ref<'_, Vec<u32>> {
        let n = self.shared.len() + self.extra.len();
        if self.ranks.borrow().len() != n {
            *self.ranks.borrow_mut() = intern::ranks(n, |id| self.text(id));
        }
        self.ranks.borrow()
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
