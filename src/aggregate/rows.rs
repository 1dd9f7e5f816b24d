//! The rows of one account's result, compact: each key's text is an id into
//! one string table ([`Interner::into_table`]) shared by the usage rows and
//! the other charges, so a result of hundreds of thousands of rows holds
//! each distinct subaccount, type and code once instead of an owned copy
//! per row. Pages, digests and reports borrow the text ([`RowKey`]);
//! nothing is copied per row.

use std::sync::Arc;

use super::dims::Dims;
use crate::aggregate::{GroupKey, Groups, Totals};
use crate::intern::Interner;
use crate::records::{Country, Direction, Product};

/// No string: the id of an absent subaccount or code.
pub(crate) const ABSENT: u32 = u32::MAX;

/// One account's result before paging: its usage rows and its other
/// charges (product `other`), each in the report's order, their text in
/// one table.
#[derive(Debug, Default)]
pub(crate) struct AccountRows {
    /// Every string the keys name, by id.
    pub strings: Arc<[Box<str>]>,
    /// The usage rows.
    pub usage: Vec<(PackedKey, Totals)>,
    /// The other charges.
    pub charges: Vec<(PackedKey, Totals)>,
}

impl AccountRows {
    /// `account`'s rows of `groups`, their text interned anew.
    pub(crate) fn of_groups(groups: &Groups, account: &str) -> AccountRows {
        let mut strings = Interner::default();
        let (mut usage, mut charges) = (Vec::new(), Vec::new());
        for (key, totals) in groups.of_account(account).iter() {
            let rows = if key.dims.product == Product::Other { &mut charges } else { &mut usage };
            rows.push((pack(key, &mut strings), *totals));
        }
        AccountRows { strings: strings.into_table(), usage, charges }
    }
}

/// Sums rows of one key (sorted: next to each other) into one; `None` on
/// an overflow.
pub(crate) fn sum_repeated(rows: &mut Vec<(PackedKey, Totals)>) -> Option<()> {
    let mut overflowed = false;
    rows.dedup_by(|(key, totals), (kept, sum)| {
        if key != kept {
            return false;
        }
        match sum.checked_add(totals) {
            Some(total) => *sum = total,
            None => overflowed = true,
        }
        true
    });
    (!overflowed).then_some(())
}

/// A row's key in string ids: [`GroupKey`] without the account (one account
/// per result), text as ids into the result's string table. Stored packed
/// (an absent text is [`ABSENT`], not an `Option`): a result holds hundreds
/// of thousands of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PackedKey {
    /// Bucket index.
    pub bucket: u32,
    /// Sub-type or charge description.
    pub type_: u32,
    /// Subaccount, or [`ABSENT`].
    pub subaccount: u32,
    /// Error code or hangup cause, or [`ABSENT`].
    pub code: u32,
    /// Product.
    pub product: Product,
    /// Country.
    pub country: Option<Country>,
    /// Direction.
    pub direction: Option<Direction>,
}

impl PackedKey {
    /// The key of the row at `bucket` with these dimensions (text as ids):
    /// the inverse of [`PackedKey::dims`].
    pub(crate) fn new(bucket: u32, dims: Dims<u32>) -> PackedKey {
        PackedKey {
            bucket,
            type_: dims.type_,
            subaccount: dims.subaccount.unwrap_or(ABSENT),
            code: dims.code.unwrap_or(ABSENT),
            product: dims.product,
            country: dims.country,
            direction: dims.direction,
        }
    }

    /// The dimensions, text ids mapped by `rank` (to their ranks among the
    /// table's strings, say).
    #[inline]
    pub(crate) fn dims<T>(&self, rank: impl Fn(u32) -> T) -> Dims<T> {
        let text = |id: u32| (id != ABSENT).then_some(id);
        Dims {
            product: self.product,
            type_: self.type_,
            subaccount: text(self.subaccount),
            country: self.country,
            direction: self.direction,
            code: text(self.code),
        }
        .map(rank)
    }
}

/// One row's key, borrowing its text from the result: the fields of
/// [`GroupKey`] but the account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RowKey<'a> {
    /// Bucket index in the summary's buckets.
    pub bucket: u32,
    /// The row's dimensions, those its product does not have absent.
    pub dims: Dims<&'a str>,
}

impl RowKey<'_> {
    /// The owned key of this row of `account`.
    pub fn to_group_key(&self, account: &str) -> GroupKey {
        GroupKey::from_dims(account, self.bucket, self.dims)
    }
}

/// Rows in the report's order, with their totals.
#[derive(Clone, Debug, Default)]
pub struct Rows {
    strings: Arc<[Box<str>]>,
    rows: Vec<(PackedKey, Totals)>,
}

impl Rows {
    /// Rows over `strings` (every id of `rows` indexes it).
    pub(crate) fn new(strings: Arc<[Box<str>]>, rows: Vec<(PackedKey, Totals)>) -> Rows {
        Rows { strings, rows }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows from `start` to `end` (exclusive), in order.
    pub fn range(&self, start: usize, end: usize) -> RowsIter<'_> {
        RowsIter { rows: self, inner: self.rows[start..end].iter() }
    }

    /// Every row, in order.
    pub fn iter(&self) -> RowsIter<'_> {
        self.range(0, self.rows.len())
    }

    fn key(&self, key: &PackedKey) -> RowKey<'_> {
        RowKey { bucket: key.bucket, dims: key.dims(|id| self.strings.get(id as usize).map_or("", |s| &**s)) }
    }
}

impl<'a> IntoIterator for &'a Rows {
    type Item = (RowKey<'a>, &'a Totals);
    type IntoIter = RowsIter<'a>;

    fn into_iter(self) -> RowsIter<'a> {
        self.iter()
    }
}

/// Rows of a [`Rows`] in order, their keys borrowing its text.
#[derive(Clone, Debug)]
pub struct RowsIter<'a> {
    rows: &'a Rows,
    inner: std::slice::Iter<'a, (PackedKey, Totals)>,
}

impl<'a> Iterator for RowsIter<'a> {
    type Item = (RowKey<'a>, &'a Totals);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|(key, totals)| (self.rows.key(key), totals))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl ExactSizeIterator for RowsIter<'_> {}

/// The packed key of an owned key, its text interned in `strings`.
pub(crate) fn pack(key: &GroupKey, strings: &mut Interner) -> PackedKey {
    // Interned in this order: type, subaccount, code.
    let dims = key.dims.as_deref();
    let type_ = strings.intern(dims.type_);
    PackedKey::new(key.bucket, dims.map_text(|_| type_, |text| text.map(|s| strings.intern(s))))
}
