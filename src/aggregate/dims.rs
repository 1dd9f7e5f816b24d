//! A row's dimensions, and THE report order: within an account and
//! bucket, rows are ordered by product, type, subaccount, country,
//! direction, code; absent values first (`usage-summary.md`). This file is
//! the one place that says so.
//!
//! [`Dims`] holds those fields in that order, and its derived `Ord` is the
//! order. Every key type holds its dimensions as a `Dims` after its account
//! and bucket (or slot), so a new dimension is a field here plus its
//! columns:
//! - owned and borrowed keys ([`GroupKey`](super::GroupKey), the result's
//!   `RowKey`): `Dims<String>` and `Dims<&str>`, their derived `Ord` the
//!   report's order;
//! - interned keys (the pass, ingest): `Dims<u32, u32>`, every text an id,
//!   the empty string where a row has none; [`Dims::present`] and
//!   [`Dims::shown`] make the report's fields of them, and [`Dims::map`]
//!   takes ids to their ranks ([`crate::intern::ranks`]), which order as
//!   the strings do, so a sort compares integers;
//! - where a key must be one integer (a hash key, a cached sort key),
//!   [`Dims::packed`], a `u128` that orders as the `Dims` does;
//! - stored rows (a rollup row as read, a record's filter fields):
//!   `Dims<&str, &str>`.
//!
//! Layouts of bytes spell the fields out on purpose, each beside its
//! codec: the result's packed key (`rows::PackedKey`), the spill's
//! partial row, the files' columns and the API's fields.
//!
//! [`Dims::shown`] is the other half of the rule: which fields a row of a
//! product has at all (the rest are absent, so they do not split groups).

use crate::records::{Country, Direction, Product, Record};

/// A row's dimensions in the report's order (account and bucket aside),
/// text as `T` (`String`, `&str`, or an id or rank among the strings at
/// hand), the text a row may lack (subaccount, code) as `O`: `Option<T>`,
/// or `T` itself where an empty string stands for none (interned keys).
/// The derived `Ord` is the report's order; `None` (absent) sorts first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dims<T, O = Option<T>> {
    /// Product; `Other` for charges.
    pub product: Product,
    /// Sub-type, or a charge's description.
    pub type_: T,
    /// Subaccount, absent on parent-level rows.
    pub subaccount: O,
    /// Country, absent when empty or not a dimension of the product.
    pub country: Option<Country>,
    /// Direction, absent when not a dimension of the product.
    pub direction: Option<Direction>,
    /// Error code (messages) or hangup cause (calls); absent otherwise.
    pub code: O,
}

impl<'a> Dims<&'a str, &'a str> {
    /// A checked record's dimensions, an empty subaccount or code as it is.
    #[inline]
    pub fn of(record: &Record<'a>) -> Self {
        Dims {
            product: record.product,
            type_: record.type_,
            subaccount: record.subaccount,
            country: record.country,
            direction: record.direction,
            code: record.code,
        }
    }
}

impl<T, O> Dims<T, O> {
    /// The same dimensions with the type mapped by `type_` and the text a
    /// row may lack by `other` (called for the subaccount, then the code).
    #[inline]
    pub(crate) fn map_text<U, P>(self, type_: impl FnOnce(T) -> U, mut other: impl FnMut(O) -> P) -> Dims<U, P> {
        let type_ = type_(self.type_);
        let subaccount = other(self.subaccount);
        Dims {
            product: self.product,
            type_,
            subaccount,
            country: self.country,
            direction: self.direction,
            code: other(self.code),
        }
    }
}

impl<T> Dims<T, T> {
    /// The dimensions with every text present (an empty string is a value
    /// here; [`Dims::shown`] makes it absent where it must be).
    #[inline]
    pub(crate) fn present(self) -> Dims<T> {
        self.map_text(|type_| type_, Some)
    }
}

impl<T> Dims<T> {
    /// The fields a row of `self.product` shows, the others absent: no
    /// subaccount on charges or where it is empty (`is_empty`), country and
    /// direction only where the product has them, a code only on products
    /// with an error code or hangup cause.
    #[inline]
    pub(crate) fn shown(self, is_empty: impl Fn(&T) -> bool) -> Dims<T> {
        let product = self.product;
        let has_place = product.has_country_and_direction();
        Dims {
            product,
            type_: self.type_,
            subaccount: self.subaccount.filter(|s| product != Product::Other && !is_empty(s)),
            country: self.country.filter(|_| has_place),
            direction: self.direction.filter(|_| has_place),
            code: self.code.filter(|_| product.has_error_code() || product.has_hangup_cause()),
        }
    }

    /// The same fields with the text mapped by `f` (ids to ranks, say).
    #[inline]
    pub(crate) fn map<U>(self, f: impl Fn(T) -> U) -> Dims<U> {
        self.map_text(&f, |text| text.map(&f))
    }
}

impl Dims<String> {
    /// The same dimensions, text borrowed.
    pub fn as_deref(&self) -> Dims<&str> {
        Dims {
            product: self.product,
            type_: self.type_.as_str(),
            subaccount: self.subaccount.as_deref(),
            country: self.country,
            direction: self.direction,
            code: self.code.as_deref(),
        }
    }
}

impl Dims<u32> {
    /// One integer that orders as `self` does (ranks below `u32::MAX`):
    /// its fields side by side, in [`PACKED_FIELDS`].
    #[inline]
    pub(crate) fn packed(&self) -> u128 {
        let text = |rank: Option<u32>| rank.map_or(0, |r| r as u128 + 1);
        let country = self.country.map_or(0, |c| {
            let [a, b] = *c.as_bytes();
            1 + ((a as u128) << 8 | b as u128)
        });
        let direction = self.direction.map_or(0, |d| 1 + d as u128);
        let values =
            [self.product as u128, text(Some(self.type_)), text(self.subaccount), country, direction, text(self.code)];
        values.iter().zip(PACKED_FIELDS).fold(0, |packed, (value, (shift, _))| packed | value << shift)
    }
}

/// Where each field of [`Dims::packed`] sits (shift, bits), most
/// significant first: product, type, subaccount, country, direction, code
/// (3 + 33 + 33 + 17 + 2 + 33 bits).
pub(crate) const PACKED_FIELDS: [(u32, u32); 6] = [(118, 3), (85, 33), (52, 33), (35, 17), (33, 2), (0, 33)];

/// Packed orders ([`Dims::packed`]) in fewer bits, still in the same
/// order: each field cut to the bits that the largest of its values in a
/// given set needs. A sort of a few thousand keys moves half the bytes
/// with 64-bit keys than with 128-bit ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Narrowing {
    bits: [u32; 6],
}

impl Narrowing {
    /// The narrowing of packed orders whose bits, all together, are `any`
    /// (the OR of them all), when it fits `most` bits (at most 64).
    pub(crate) fn fitting(any: u128, most: u32) -> Option<Narrowing> {
        let bits = PACKED_FIELDS.map(|(shift, width)| 128 - ((any >> shift) & mask(width)).leading_zeros());
        (bits.iter().sum::<u32>() <= most.min(64)).then_some(Narrowing { bits })
    }

    /// `packed` (one of the orders of [`Narrowing::fitting`]) in its
    /// fields' bits: as `packed` orders among those orders, so does this.
    #[inline]
    pub(crate) fn narrow(&self, packed: u128) -> u64 {
        let mut narrow = 0u64;
        for ((shift, width), bits) in PACKED_FIELDS.iter().zip(self.bits) {
            // A field of no bits is zero in every order: nothing to add.
            if bits > 0 {
                narrow = narrow << bits | ((packed >> shift) & mask(*width)) as u64;
            }
        }
        narrow
    }
}

/// The low `bits` bits (below 128).
fn mask(bits: u32) -> u128 {
    (1u128 << bits) - 1
}

/// A fixed pseudo-random walk of `steps` values (xorshift), for tests
/// that pick keys over every field's values.
#[cfg(test)]
pub(crate) fn walk(steps: usize) -> impl Iterator<Item = u64> {
    let mut n: u64 = 0x9E37_79B9_7F4A_7C15;
    std::iter::repeat_with(move || {
        n ^= n << 13;
        n ^= n >> 7;
        n ^= n << 17;
        n
    })
    .take(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intern::Interner;

    /// Orders of ranks sort as the orders of their strings, and packed as
    /// they sort unpacked.
    #[test]
    fn ranks_and_packed_orders_sort_like_the_text() {
        let mut strings = Interner::default();
        let texts = ["", "b", "a", "zz", "A", "sms", "pstn", "4000", "30", "Number Charges", "SA1", "SA0", "é"];
        let ids: Vec<u32> = texts.iter().map(|t| strings.intern(t)).collect();
        let ranks = strings.ranks();
        let countries = [None, Country::parse(b"US"), Country::parse(b"CA"), Country::parse(b"UA")];
        let directions = [None, Some(Direction::Inbound), Some(Direction::Outbound)];
        let mut orders: Vec<Dims<u32>> = Vec::new();
        for n in walk(4000) {
            let pick = |shift: u32, len: usize| (n >> shift) as usize % len;
            let text = |shift: u32| {
                let i = pick(shift, ids.len() + 1);
                ids.get(i).copied()
            };
            let order = Dims {
                product: Product::ALL[pick(0, Product::ALL.len())],
                type_: ids[pick(4, ids.len())],
                subaccount: text(12),
                country: countries[pick(20, countries.len())],
                direction: directions[pick(24, directions.len())],
                code: text(28),
            };
            orders.push(if pick(36, 2) == 0 { order.shown(|id| strings.get(*id).is_empty()) } else { order });
        }
        let as_text = |o: &Dims<u32>| o.map(|id| strings.get(id));
        let mut by_text = orders.clone();
        by_text.sort_by(|a, b| as_text(a).cmp(&as_text(b)));
        let mut by_rank = orders.clone();
        by_rank.sort_by_key(|o| o.map(|id| ranks[id as usize]));
        let mut by_packed = orders;
        by_packed.sort_by_key(|o| o.map(|id| ranks[id as usize]).packed());
        let text_of = |list: &[Dims<u32>]| list.iter().map(as_text).collect::<Vec<_>>();
        assert_eq!(text_of(&by_rank), text_of(&by_text));
        assert_eq!(text_of(&by_packed), text_of(&by_text));
    }

    /// Orders of ranks from small to past 32 bits.
    fn any_order() -> impl proptest::strategy::Strategy<Value = Dims<u32>> {
        use proptest::prelude::*;
        let rank = prop_oneof![0u32..8, 0u32..5000, 0u32..u32::MAX - 1];
        let countries = prop_oneof![Just(None), Just(Country::parse(b"US")), Just(Country::parse(b"CA"))];
        let directions = prop_oneof![Just(None), Just(Some(Direction::Inbound)), Just(Some(Direction::Outbound))];
        let text = proptest::option::of(rank.clone());
        (0..Product::ALL.len(), rank, text.clone(), countries, directions, text).prop_map(
            |(product, type_, subaccount, country, direction, code)| Dims {
                product: Product::ALL[product],
                type_,
                subaccount,
                country,
                direction,
                code,
            },
        )
    }

    proptest::proptest! {
        /// Narrowed, packed orders sort as they do packed, and are equal
        /// only where they are; a narrowing fits the bits it was asked to.
        #[test]
        fn narrowed_orders_sort_as_packed(orders in proptest::collection::vec(any_order(), 1..200), most in 20u32..=64) {
            let packed: Vec<u128> = orders.iter().map(Dims::packed).collect();
            let any = packed.iter().fold(0, |any, p| any | p);
            let Some(narrowing) = Narrowing::fitting(any, most) else {
                let needed: u32 = PACKED_FIELDS.iter().map(|(shift, width)| 128 - ((any >> shift) & mask(*width)).leading_zeros()).sum();
                proptest::prop_assert!(needed > most);
                return Ok(());
            };
            for a in &packed {
                proptest::prop_assert!(most == 64 || narrowing.narrow(*a) >> most == 0);
                for b in &packed {
                    proptest::prop_assert_eq!(a.cmp(b), narrowing.narrow(*a).cmp(&narrowing.narrow(*b)));
                }
            }
        }
    }

    #[test]
    fn shown_leaves_out_what_a_product_does_not_have() {
        let all = |product| Dims {
            product,
            type_: "t",
            subaccount: Some("S1"),
            country: Country::parse(b"US"),
            direction: Some(Direction::Inbound),
            code: Some("30"),
        };
        let charge = all(Product::Other).shown(|s| s.is_empty());
        assert_eq!((charge.subaccount, charge.country, charge.direction, charge.code), (None, None, None, None));
        let transcription = all(Product::Transcription).shown(|s| s.is_empty());
        assert_eq!(transcription.subaccount, Some("S1"));
        assert_eq!((transcription.country, transcription.code), (None, None));
        assert_eq!(all(Product::Voice).shown(|s| s.is_empty()), all(Product::Voice));
        let parent = Dims { subaccount: Some(""), ..all(Product::Message) }.shown(|s| s.is_empty());
        assert_eq!(parent, Dims { subaccount: None, ..all(Product::Message) });
    }
}
