//! What a pass keeps: the [`Selector`] (accounts, products, dimension
//! filters, and each account's buckets). It filters a row's [`Dims`], so
//! raw records and stored rollup rows share one filter.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use super::dims::Dims;
use crate::records::{Country, Direction, Product, ProductSet, Record};
use crate::time::Buckets;

/// Which accounts a pass keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccountScope {
    /// Every account.
    All,
    /// These accounts.
    Some(BTreeSet<String>),
}

impl AccountScope {
    /// One account.
    pub fn one(auth_id: &str) -> AccountScope {
        AccountScope::Some(BTreeSet::from([auth_id.to_owned()]))
    }

    /// Whether `auth_id` is in scope.
    pub fn contains(&self, auth_id: &str) -> bool {
        match self {
            AccountScope::All => true,
            AccountScope::Some(set) => set.contains(auth_id),
        }
    }
}

/// What a pass keeps, and how it buckets time.
#[derive(Clone, Debug)]
pub struct Selector {
    /// Accounts to keep.
    pub accounts: AccountScope,
    /// Keep only this subaccount's usage (and no charges).
    pub subaccount: Option<String>,
    /// Products to keep; `Other` keeps charges.
    pub products: ProductSet,
    /// Country filter, for products that have a country.
    pub country: Option<Country>,
    /// Direction filter, for products that have a direction.
    pub direction: Option<Direction>,
    /// Error code filter, for messages.
    pub error_code: Option<String>,
    /// Hangup cause filter, for calls.
    pub hangup_cause: Option<String>,
    /// The window's buckets: rows outside them are not kept.
    pub bucketing: Bucketing,
}

/// The buckets of each account: one set for all, or one per account (each
/// account's window in its own time zone), with a default for the rest.
#[derive(Clone, Debug)]
pub struct Bucketing {
    /// Buckets of accounts without their own; `None` keeps no other account.
    pub default: Option<Buckets>,
    /// Buckets per account.
    pub by_account: FxHashMap<String, Buckets>,
}

impl Bucketing {
    /// The same buckets for every account.
    pub fn shared(buckets: Buckets) -> Bucketing {
        Bucketing { default: Some(buckets), by_account: FxHashMap::default() }
    }

    /// The buckets of `auth_id`.
    #[inline]
    pub fn of(&self, auth_id: &str) -> Option<&Buckets> {
        if self.by_account.is_empty() {
            return self.default.as_ref();
        }
        self.by_account.get(auth_id).or(self.default.as_ref())
    }
}

impl Selector {
    /// Keeps every account, product and dimension, bucketed by `bucketing`.
    pub fn everything(bucketing: Bucketing) -> Selector {
        Selector {
            accounts: AccountScope::All,
            subaccount: None,
            products: ProductSet::ALL,
            country: None,
            direction: None,
            error_code: None,
            hangup_cause: None,
            bucketing,
        }
    }

    /// The bucket of a record this selector keeps, or `None`.
    #[inline]
    pub fn select(&self, record: &Record<'_>) -> Option<u32> {
        if !self.keeps(record.auth_id, &Dims::of(record)) {
            return None;
        }
        self.bucketing.of(record.auth_id)?.index(record.timestamp.secs)
    }

    /// Whether the account, product and filters keep a row of `auth_id`
    /// with these dimensions (the window is not checked here). A raw
    /// record and a stored rollup row are filtered by this one piece of
    /// code.
    #[inline]
    pub fn keeps(&self, auth_id: &str, row: &Dims<&str, &str>) -> bool {
        self.products.contains(row.product) && self.accounts.contains(auth_id) && self.keeps_in_scope(row)
    }

    /// [`Selector::keeps`] for a row whose account is known to be in
    /// scope: the product and the filters alone.
    #[inline]
    pub fn keeps_in_scope(&self, row: &Dims<&str, &str>) -> bool {
        if !self.products.contains(row.product) {
            return false;
        }
        let product = row.product;
        if product == Product::Other {
            return self.subaccount.is_none();
        }
        if self.subaccount.as_deref().is_some_and(|s| s != row.subaccount) {
            return false;
        }
        if product.has_country_and_direction() {
            if self.country.is_some_and(|c| row.country != Some(c)) {
                return false;
            }
            if self.direction.is_some_and(|d| row.direction != Some(d)) {
                return false;
            }
        }
        if product.has_error_code() && self.error_code.as_deref().is_some_and(|c| c != row.code) {
            return false;
        }
        if product.has_hangup_cause() && self.hangup_cause.as_deref().is_some_and(|c| c != row.code) {
            return false;
        }
        true
    }
}
