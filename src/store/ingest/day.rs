//! The day sort of an account's merge: one UTC day of its rollup rows
//! sorted once by report order and 15-minute slot ([`sort_day`]), then
//! summed at every grain from that one order ([`sum_grain`]).
//!
//! A row's sort key packs its report order (121 bits, string ids ranked in
//! byte order) and its slot in the day (7 bits) into one integer: in 64
//! bits when the day's orders fit them narrowed, else in 128.

use super::key::RollupKey;
use super::spill::gather_at;
use crate::aggregate::dims::Narrowing;
use crate::aggregate::Totals;
use crate::error::{Error, Result};

/// Rollup rows of one account and day, each with its report order packed
/// into one integer ([`RollupKey::order`], `Dims::packed`).
#[derive(Default)]
pub(super) struct DayRows {
    pub(super) rows: Vec<(RollupKey, Totals)>,
    pub(super) orders: Vec<u128>,
}

/// `Dims::packed` takes 121 bits; the 15-minute slot in the day the 7
/// below them in [`sort_day`]'s keys.
pub(super) const ORDER_BITS: u32 = 121;

/// Bits of a 15-minute slot in the day in [`sort_day`]'s keys.
pub(super) const DAY_SLOT_BITS: u32 = 128 - ORDER_BITS;

/// 15-minute slots in a day (at most `1 << DAY_SLOT_BITS`).
pub(super) const SLOTS_A_DAY: u128 = 86_400 / crate::store::SLOT_SECONDS as u128;
const _: () = assert!(SLOTS_A_DAY <= 1 << DAY_SLOT_BITS);

/// The buffers of [`sort_day`] and [`sum_grain`], kept from day to day.
#[derive(Default)]
pub(super) struct DayScratch {
    /// Each row's (order, 15-minute slot in the day) as one integer, and
    /// its position; sorted.
    pub(super) keys: DayKeys,
    /// The day's rows in the order of `keys`: gathered once, so that
    /// each grain's sum reads them in sequence (two passes of random
    /// reads into the day were an eighth of the merge's own time).
    pub(super) sorted: Vec<(RollupKey, Totals)>,
    /// A grain's rows in (order, slot) order, and the slot of each (in
    /// the day, in the grain's units).
    grouped: Vec<(RollupKey, Totals)>,
    slots: Vec<u8>,
    /// Where each slot's rows start in the file's order.
    starts: Vec<usize>,
    /// The positions in `grouped` of the rows in the file's order.
    order: Vec<u32>,
}

/// The sort keys of a day's rows ([`sort_day`]): each row's (order, 15-minute
/// slot in the day) as one integer, and its position; sorted. In 64 bits
/// when the day's orders fit them narrowed ([`Narrowing`]: nearly always,
/// as the ranks are those of the ingest's strings), else in 128.
#[derive(Default)]
pub(super) struct DayKeys {
    wide: Vec<(u128, u32)>,
    narrow: Vec<(u64, u32)>,
    /// Whether `narrow` holds the day's keys (else `wide`).
    narrowed: bool,
}

/// Sorts the rows of one account and day (`input`, the day starting at
/// `start`) into `keys` by report order, then 15-minute slot: one sort,
/// from which [`sum_grain`] sums every grain (rows of one coarser slot and
/// order are a run of it, since a coarser slot is a run of finer ones);
/// and gathers the rows in that order into `sorted`.
pub(super) fn sort_day(
    input: &DayRows,
    start: i64,
    keys: &mut DayKeys,
    sorted: &mut Vec<(RollupKey, Totals)>,
) -> Result<()> {
    let broken = || Error::Internal("a rollup day holds a slot off the 15-minute grid or past the day".to_owned());
    let slot_of = |key: &RollupKey, order: u128| -> Result<u128> {
        let offset = key.slot - start;
        if offset.rem_euclid(crate::store::SLOT_SECONDS) != 0 || order >> ORDER_BITS != 0 {
            return Err(broken());
        }
        let slot = u128::try_from(offset / crate::store::SLOT_SECONDS).map_err(|_| broken())?;
        if slot >= SLOTS_A_DAY {
            return Err(broken());
        }
        Ok(slot)
    };
    let any = input.orders.iter().fold(0, |any, order| any | order);
    sorted.clear();
    keys.wide.clear();
    keys.narrow.clear();
    let narrowing = Narrowing::fitting(any, 64 - DAY_SLOT_BITS);
    keys.narrowed = narrowing.is_some();
    match narrowing {
        Some(narrowing) => sort_keyed(input, &mut keys.narrow, sorted, |key, order| {
            Ok(narrowing.narrow(order) << DAY_SLOT_BITS | slot_of(key, order)? as u64)
        }),
        None => {
            sort_keyed(input, &mut keys.wide, sorted, |key, order| Ok(order << DAY_SLOT_BITS | slot_of(key, order)?))
        }
    }
}

/// [`sort_day`] with keys `key` makes of each row's key and packed order:
/// the keys and the rows' positions into `keys`, sorted, and the rows
/// gathered in that order onto `sorted`.
pub(super) fn sort_keyed<K: Ord>(
    input: &DayRows,
    keys: &mut Vec<(K, u32)>,
    sorted: &mut Vec<(RollupKey, Totals)>,
    key: impl Fn(&RollupKey, u128) -> Result<K>,
) -> Result<()> {
    for (i, ((row, _), order)) in input.rows.iter().zip(&input.orders).enumerate() {
        keys.push((key(row, *order)?, i as u32));
    }
    keys.sort_unstable();
    sorted.extend(gather_at(&input.rows, keys, |&(_, i)| i).copied());
    Ok(())
}

/// Sums the rows of one day (sorted by [`sort_day`] into `scratch.keys`
/// and `scratch.sorted`) at `grain` onto the end of `out`, in the rollup
/// file's row order: slot first (so row-group statistics can skip by
/// time), then the report's order of the other fields. Rows of one slot
/// and order are one group (the order is one-to-one with the fields after
/// the account and slot). No hashing and no second sort: the sorted rows
/// are summed in one pass, in (order, slot) order, then put in slot order
/// by counting (a day has at most 96 slots; within a slot the order
/// stays). `overflow` is the error of a sum past the totals' range.
pub(super) fn sum_grain(
    start: i64,
    grain: i64,
    scratch: &mut DayScratch,
    out: &mut Vec<(RollupKey, Totals)>,
    overflow: &dyn Fn() -> Error,
) -> Result<()> {
    let per = grain / crate::store::SLOT_SECONDS;
    let day = *crate::store::GRAINS.last().unwrap_or(&86_400);
    if per < 1 || grain % crate::store::SLOT_SECONDS != 0 || day % grain != 0 {
        return Err(Error::Internal(format!("rollup grain {grain} s does not cut the day in 15-minute slots")));
    }
    let per = per as u128;
    let DayScratch { keys, sorted, grouped, slots, starts, order } = scratch;
    grouped.clear();
    slots.clear();
    let day_grain = DayGrain { start, seconds: grain, per };
    if keys.narrowed {
        day_grain.group(&keys.narrow, sorted, (grouped, slots), overflow)?;
    } else {
        day_grain.group(&keys.wide, sorted, (grouped, slots), overflow)?;
    }
    let cuts = (day / grain) as usize;
    if cuts == 1 {
        out.extend_from_slice(grouped);
        return Ok(());
    }
    // A stable counting sort by slot, then the rows gathered in that order
    // (each row moved once).
    starts.clear();
    starts.resize(cuts + 1, 0);
    for &slot in slots.iter() {
        starts[slot as usize + 1] += 1;
    }
    for c in 1..=cuts {
        starts[c] += starts[c - 1];
    }
    order.clear();
    order.resize(grouped.len(), 0);
    for (i, &slot) in slots.iter().enumerate() {
        let at = &mut starts[slot as usize];
        order[*at] = i as u32;
        *at += 1;
    }
    out.extend(order.iter().map(|&i| grouped[i as usize]));
    Ok(())
}

/// One grain of a day's sums ([`sum_grain`]): the day's start, the
/// grain's seconds, and its 15-minute slots.
pub(super) struct DayGrain {
    start: i64,
    seconds: i64,
    per: u128,
}

impl DayGrain {
    /// Sums a day's rows, sorted by their `keys` ([`sort_day`]), into the
    /// groups of this grain in (order, slot) order, each group's slot in
    /// the day (in the grain's units) beside it.
    fn group<K: Copy + Into<u128>>(
        &self,
        keys: &[(K, u32)],
        sorted: &[(RollupKey, Totals)],
        (grouped, slots): (&mut Vec<(RollupKey, Totals)>, &mut Vec<u8>),
        overflow: &dyn Fn() -> Error,
    ) -> Result<()> {
        let mut last: Option<u128> = None;
        for (&(k, _), (key, totals)) in keys.iter().zip(sorted) {
            let k: u128 = k.into();
            let slot = (k & ((1 << DAY_SLOT_BITS) - 1)) / self.per;
            let group = (k >> DAY_SLOT_BITS) << DAY_SLOT_BITS | slot;
            match grouped.last_mut() {
                Some((_, sum)) if last == Some(group) => *sum = sum.checked_add(totals).ok_or_else(overflow)?,
                _ => {
                    grouped.push((RollupKey { slot: self.start + slot as i64 * self.seconds, ..*key }, *totals));
                    slots.push(slot as u8);
                    last = Some(group);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::aggregate::dims::Dims;
    use crate::intern::Interner;
    use crate::records::{Country, Direction, Product};
    use crate::store::ingest::strings::{AccountStrings, SortedStrings};

    /// Rollup rows come out of [`sum_grain`] by slot, then in the report's
    /// order of their text ([`Dims`] over the strings, an empty subaccount
    /// or code absent), whether a string is the run's or an older file's;
    /// rows of the same slot and fields are one row, their totals added;
    /// at a coarser grain, slots are cut to it first.
    #[test]
    fn sum_grain_sorts_by_slot_then_the_report_order_and_sums_equal_keys() {
        let mut shared = Interner::default();
        for text in ["sms", "", "S2", "voice", "4000", "Number Charges", "é"] {
            shared.intern(text);
        }
        let sorted = SortedStrings::new(&shared);
        let mut strings = AccountStrings::new(&sorted);
        let older = ["S1", "30007", "mms", "A", "voice", "3010"];
        let mut texts: Vec<u32> = older.iter().map(|text| strings.id(text)).collect();
        texts.extend(0..shared.len() as u32);
        let countries = [None, Country::parse(b"US"), Country::parse(b"DE"), Country::parse(b"UA")];
        let directions = [None, Some(Direction::Inbound), Some(Direction::Outbound)];
        let start = 86_400 * 20_000;
        let mut rows: Vec<(RollupKey, Totals)> = Vec::new();
        for (i, n) in crate::aggregate::dims::walk(3000).enumerate() {
            let pick = |shift: u32, len: usize| (n >> shift) as usize % len;
            let dims = Dims {
                product: Product::ALL[pick(0, Product::ALL.len())],
                type_: texts[pick(12, 3)],
                subaccount: texts[pick(4, texts.len())],
                country: countries[pick(20, countries.len())],
                direction: directions[pick(24, directions.len())],
                code: texts[pick(28, 2)],
            };
            let key = RollupKey { account: 0, slot: start + 900 * pick(8, 6) as i64, dims };
            rows.push((key, Totals { records: 1, amount: i as i128, ..Totals::default() }));
        }
        let by_text = |key: &RollupKey, grain: i64| {
            let text = |id: u32| Some(strings.text(id)).filter(|text| !text.is_empty());
            let order = Dims {
                product: key.dims.product,
                type_: strings.text(key.dims.type_),
                subaccount: text(key.dims.subaccount),
                country: key.dims.country,
                direction: key.dims.direction,
                code: text(key.dims.code),
            };
            (key.slot - (key.slot - start).rem_euclid(grain), order)
        };
        let orders: Vec<u128> = rows.iter().map(|(key, _)| key.order().map(|id| strings.rank(id)).packed()).collect();
        // These few strings' ranks fit 64-bit keys. The same orders with
        // 2^32 added to every type rank order alike, but take 128-bit keys:
        // both give the same sums.
        let wide: Vec<u128> =
            orders.iter().map(|order| order + (1 << (crate::aggregate::dims::PACKED_FIELDS[1].0 + 32))).collect();
        let inputs = [(DayRows { rows: rows.clone(), orders }, true), (DayRows { rows, orders: wide }, false)];
        let overflow = || Error::Internal("overflow".to_owned());
        for ((input, narrowed), grain) in
            inputs.iter().flat_map(|input| [900, 3600, 86_400].map(|grain| (input, grain)))
        {
            let mut expected: BTreeMap<_, (u64, i128)> = BTreeMap::new();
            for (key, totals) in &input.rows {
                let sum = expected.entry(by_text(key, grain)).or_default();
                *sum = (sum.0 + totals.records, sum.1 + totals.amount);
            }
            let (mut scratch, mut out) = (DayScratch::default(), vec![input.rows[0]]);
            sort_day(input, start, &mut scratch.keys, &mut scratch.sorted).expect("sorted");
            assert_eq!(scratch.keys.narrowed, *narrowed);
            sum_grain(start, grain, &mut scratch, &mut out, &overflow).expect("summed");
            assert_eq!(out.remove(0), input.rows[0], "rows are added after those there");
            let got: Vec<_> =
                out.iter().map(|(key, totals)| (by_text(key, grain), (totals.records, totals.amount))).collect();
            assert!(got.len() < input.rows.len(), "some rows share a group");
            assert_eq!(got, expected.into_iter().collect::<Vec<_>>());
        }
        // A slot off the 15-minute grid, or past the day, is a broken
        // input, not a wrong sum.
        let (mut keys, mut sorted) = (DayKeys::default(), Vec::new());
        for ((input, _), slot) in
            inputs.iter().flat_map(|input| [start + 60, start + 86_400 * 2, start - 900].map(|slot| (input, slot)))
        {
            let mut broken = DayRows { rows: input.rows.clone(), orders: input.orders.clone() };
            broken.rows[7].0.slot = slot;
            assert!(sort_day(&broken, start, &mut keys, &mut sorted).is_err(), "slot {slot}");
        }
    }
}
