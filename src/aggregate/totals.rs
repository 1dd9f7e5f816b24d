//! What a pass sums: [`Totals`] per group under its owned [`GroupKey`],
//! and the [`Tally`] of rows per kind.

use super::dims::Dims;
use crate::error::{Error, Result};

/// Summed values of a group. Adding is associative and commutative, so
/// partial totals merge in any order to the same result.
///
/// Aligned to 8 bytes, not the 16 of its 128-bit fields (`packed(8)`: a
/// field is read by value, never borrowed): 72 bytes instead of 80, and a
/// result row (a 24-byte key and its totals) 96 instead of 112. The
/// largest account's store answer gathers 311,000 such rows, and each
/// fresh page costs a page fault and its share of the exit
/// (measure with `bench/store-answer.sh`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, packed(8))]
pub struct Totals {
    /// Rows summed.
    pub records: u64,
    /// Units: segments, calls, transcriptions, charge units.
    pub units: u128,
    /// Duration in nanoseconds.
    pub duration: i128,
    /// Amount in nano-units.
    pub amount: i128,
    /// Surcharge in nano-units.
    pub surcharge: i128,
}

impl Totals {
    /// `self + other`, or `None` on overflow.
    pub fn checked_add(&self, other: &Totals) -> Option<Totals> {
        Some(Totals {
            records: self.records.checked_add(other.records)?,
            units: self.units.checked_add(other.units)?,
            duration: self.duration.checked_add(other.duration)?,
            amount: self.amount.checked_add(other.amount)?,
            surcharge: self.surcharge.checked_add(other.surcharge)?,
        })
    }
}

/// The owned key of a group: one output row (or one other-charges item).
///
/// Ordered as the report orders rows: account, bucket, then the usage sort
/// key of `usage-summary.md` ([`Dims`]'s derived order); the test
/// `group_keys_sort_as_the_summary_contract_says` holds it to the contract.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupKey {
    /// Parent account.
    pub account: String,
    /// Bucket index in the selector's [`Buckets`](crate::time::Buckets).
    pub bucket: u32,
    /// The row's dimensions, those its product does not have absent.
    pub dims: Dims<String>,
}

impl GroupKey {
    /// The key of `account`'s row in `bucket` with these dimensions (an
    /// empty subaccount or code is none): the fields its product does not
    /// have are absent.
    pub fn new(account: &str, bucket: u32, dims: Dims<&str, &str>) -> GroupKey {
        GroupKey::from_dims(account, bucket, dims.present().shown(|s| s.is_empty()))
    }

    /// The key of `account`'s row in `bucket` with these dimensions.
    pub(crate) fn from_dims(account: &str, bucket: u32, dims: Dims<&str>) -> GroupKey {
        GroupKey { account: account.to_owned(), bucket, dims: dims.map(str::to_owned) }
    }
}

/// Counts of one pass, per kind. `read = used + set_aside + duplicates`.
/// Also what a store's manifest records of each ingest (`selected` is not
/// written there).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    /// Rows read.
    pub read: u64,
    /// Rows that are valid and not duplicates.
    pub used: u64,
    /// Rows set aside as bad.
    pub set_aside: u64,
    /// Valid rows that repeat an identical earlier row.
    pub duplicates: u64,
    /// Versions and voids below their record's highest revision
    /// (`corrections.md`). Written only when not zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub superseded: u64,
    /// Voids that hold their record's highest revision: the records they
    /// withdraw count nowhere. Written only when not zero.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub voids: u64,
    /// Used rows the selector kept.
    #[serde(skip)]
    pub selected: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Tally {
    /// Whether `read = used + set_aside + duplicates + superseded + voids`,
    /// the identity every run's counts hold.
    pub fn adds_up(&self) -> bool {
        let parts = [self.used, self.set_aside, self.duplicates, self.superseded, self.voids];
        parts.iter().try_fold(0u64, |sum, n| sum.checked_add(*n)) == Some(self.read)
    }
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, other: Tally) {
        self.read += other.read;
        self.used += other.used;
        self.set_aside += other.set_aside;
        self.duplicates += other.duplicates;
        self.superseded += other.superseded;
        self.voids += other.voids;
        self.selected += other.selected;
    }
}

/// The first and last record times of some rows (UTC seconds, both
/// inclusive): what dates a data set or an account covers, for a warning
/// when a window holds none of them. Merging is `min`/`max`, so any split
/// of the rows gives the same span.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The earliest record's time.
    pub first: i64,
    /// The latest record's time.
    pub last: i64,
}

impl Span {
    /// The span of one instant.
    #[inline]
    pub fn at(secs: i64) -> Span {
        Span { first: secs, last: secs }
    }

    /// The span of both.
    #[inline]
    pub fn merge(self, other: Span) -> Span {
        Span { first: self.first.min(other.first), last: self.last.max(other.last) }
    }

    /// `span` widened by `other`, either possibly absent.
    pub fn merge_opt(span: Option<Span>, other: Option<Span>) -> Option<Span> {
        match (span, other) {
            (Some(a), Some(b)) => Some(a.merge(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether any of it lies in `[start, end)`.
    pub fn overlaps(&self, start: i64, end: i64) -> bool {
        self.first < end && self.last >= start
    }
}

/// Totals per group, in the groups' order ([`GroupKey`]'s `Ord`): a sorted
/// vector, each key once. It is made in one pass from groups already
/// sorted (`sum_sorted`) and read a whole account at a time
/// ([`Groups::of_account`]), so it needs no tree: building a `BTreeMap` of
/// every account's 2.96M groups (`bench/run.sh`'s every-account report) took a
/// second on one core while the other idled.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Groups(Vec<(GroupKey, Totals)>);

impl Groups {
    /// The groups, in order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&GroupKey, &Totals)> + ExactSizeIterator {
        self.0.iter().map(|(key, totals)| (key, totals))
    }

    /// The keys, in order.
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &GroupKey> + ExactSizeIterator {
        self.0.iter().map(|(key, _)| key)
    }

    /// The totals, in the keys' order.
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Totals> + ExactSizeIterator {
        self.0.iter().map(|(_, totals)| totals)
    }

    /// How many groups.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The groups of `account`, in order (accounts come first in the order,
    /// so they are one stretch).
    pub fn of_account(&self, account: &str) -> &[(GroupKey, Totals)] {
        let start = self.0.partition_point(|(key, _)| key.account.as_str() < account);
        let end = start + self.0[start..].partition_point(|(key, _)| key.account == account);
        &self.0[start..end]
    }

    /// Sets the totals of `key` (in its place); the totals it replaced.
    pub fn insert(&mut self, key: GroupKey, totals: Totals) -> Option<Totals> {
        match self.0.binary_search_by(|(k, _)| k.cmp(&key)) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, totals)),
            Err(i) => {
                self.0.insert(i, (key, totals));
                None
            }
        }
    }
}

/// The groups of `sorted` (sorted by key), equal keys summed into one, in
/// place and in one pass; `overflow` is the error of a group whose sum
/// overflows.
pub(crate) fn sum_sorted(mut sorted: Vec<(GroupKey, Totals)>, overflow: impl Fn(&GroupKey) -> Error) -> Result<Groups> {
    debug_assert!(sorted.is_sorted_by(|a, b| a.0 <= b.0), "sum_sorted of unsorted groups");
    let mut error = None;
    sorted.dedup_by(|later, kept| {
        if later.0 != kept.0 {
            return false;
        }
        match kept.1.checked_add(&later.1) {
            Some(sum) => kept.1 = sum,
            None => {
                error.get_or_insert_with(|| overflow(&later.0));
            }
        }
        true
    });
    match error {
        Some(error) => Err(error),
        None => Ok(Groups(sorted)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Country, Direction, Product};

    /// A result row is a 24-byte key and 72 bytes of totals, with no
    /// padding between or after them.
    #[test]
    fn a_result_row_is_96_bytes() {
        assert_eq!(std::mem::size_of::<Totals>(), 72);
        assert_eq!(std::mem::size_of::<(crate::aggregate::rows::PackedKey, Totals)>(), 96);
    }

    /// [`sum_sorted`] and [`Groups`] give what a `BTreeMap` summing the same
    /// groups gives: the same groups in the same order, each account's
    /// stretch its own keys (accounts that are prefixes of others, and
    /// absent ones, included), and an overflow an error.
    #[test]
    fn groups_are_a_sorted_map_summed_once() {
        let accounts = ["", "A", "AB", "B", "BA"];
        let key = |n: u64| {
            let dims = Dims {
                product: [Product::Voice, Product::Message][(n / 5 % 2) as usize],
                type_: "",
                subaccount: ["", "S1"][(n / 10 % 2) as usize],
                country: None,
                direction: None,
                code: "",
            };
            GroupKey::new(accounts[(n % 5) as usize], (n / 20 % 3) as u32, dims)
        };
        let totals = |n: u64| Totals { records: 1, units: n as u128, duration: 0, amount: n as i128, surcharge: 0 };
        let mut model: std::collections::BTreeMap<GroupKey, Totals> = Default::default();
        let mut sorted = Vec::new();
        for n in super::super::dims::walk(2000).map(|n| n % 97) {
            let sum = model.get(&key(n)).map_or(totals(n), |t| t.checked_add(&totals(n)).unwrap());
            model.insert(key(n), sum);
            sorted.push((key(n), totals(n)));
        }
        sorted.sort_by(|a, b| a.0.cmp(&b.0));
        let groups = sum_sorted(sorted, |_| Error::Internal("overflow".into())).unwrap();
        assert!(groups.iter().map(|(k, t)| (k.clone(), *t)).eq(model.clone()));
        assert_eq!(groups.len(), model.len());
        for account in accounts.iter().chain(&["C", "AA", "0"]) {
            let stretch: Vec<&GroupKey> = groups.of_account(account).iter().map(|(k, _)| k).collect();
            let expected: Vec<&GroupKey> = model.keys().filter(|k| k.account == *account).collect();
            assert_eq!(stretch, expected, "account {account:?}");
        }
        let mut inserted = Groups::default();
        for (k, t) in model.iter().rev() {
            assert_eq!(inserted.insert(k.clone(), *t), None);
        }
        assert_eq!(inserted, groups);

        let big = Totals { records: 1, units: 1, duration: 0, amount: i128::MAX, surcharge: 0 };
        let overflowing = vec![(key(0), big), (key(0), big)];
        assert!(sum_sorted(overflowing, |_| Error::Internal("overflow".into())).is_err());
    }

    /// `usage-summary.md`, "Order and pages": rows sort by (from_date,
    /// product, type, subaccount_auth, country, direction, error_code,
    /// hangup_cause), byte-wise, an absent value first. The list below is
    /// written in that order from the rule; sorting it reversed must give
    /// it back.
    #[test]
    fn group_keys_sort_as_the_summary_contract_says() {
        let key = |bucket, product, type_: &str, subaccount: &str, country: &[u8], direction, code: &str| {
            let dims = Dims { product, type_, subaccount, country: Country::parse(country), direction, code };
            GroupKey::new("A", bucket, dims)
        };
        let (inbound, outbound) = (Some(Direction::Inbound), Some(Direction::Outbound));
        let (message, voice) = (Product::Message, Product::Voice);
        let in_order = vec![
            key(0, message, "mms", "", b"US", outbound, ""),
            key(0, message, "sms", "", b"", inbound, "30007"),
            key(0, message, "sms", "", b"CA", inbound, ""),
            key(0, message, "sms", "", b"US", inbound, ""),
            key(0, message, "sms", "", b"US", outbound, ""),
            key(0, message, "sms", "", b"US", outbound, "30007"),
            key(0, message, "sms", "", b"US", outbound, "4000"),
            key(0, message, "sms", "S1", b"", inbound, ""),
            key(0, message, "sms", "S2", b"", inbound, ""),
            key(0, Product::Transcription, "", "", b"", None, ""),
            key(0, Product::Transcription, "", "S1", b"", None, ""),
            key(0, voice, "", "", b"US", inbound, "NORMAL_CLEARING"),
            key(0, Product::Zentrunk, "voice", "", b"US", inbound, ""),
            key(0, Product::Other, "Number Charges", "S1", b"US", inbound, ""),
            key(1, message, "mms", "", b"US", outbound, ""),
        ];
        let mut sorted: Vec<GroupKey> = in_order.iter().rev().cloned().collect();
        sorted.sort();
        assert_eq!(sorted, in_order);
        // The fields a product does not have are absent, so they neither
        // split nor order groups.
        assert_eq!(in_order[9].dims.country, None);
        assert_eq!(in_order[13].dims.subaccount, None);
        assert_eq!(in_order[1].dims.code.as_deref(), Some("30007"));
    }
}
