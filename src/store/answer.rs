//! One account's request answered from its rollup file: the rows of the
//! result in the report's order, ready for `summary::summarize_rows`, with
//! no owned key per row and no string compared per row.
//!
//! The file's text columns are read as dictionary keys and interned once
//! per distinct key (a row's text is then an index into a small table, no
//! hash), rows are folded per bucket on integer keys, and the rows of each
//! bucket are put in the report's order by the byte-order ranks of the
//! file's few distinct strings. A rollup file is sorted by slot, so the buckets come one after
//! the other; when a bucket is one slot of the grain (a UTC day from the
//! day grain), its rows are already in the report's order and the sort is
//! a check.
//!
//! The work is shared by the threads: a row group's rows are folded in one
//! part per thread, each part's rows written straight into the result
//! ([`crate::parts`]: every row's memory touched once), and the buckets
//! are ordered in parallel. The result is the same on any number of
//! threads (every sum exact, every bucket sorted whole).

use std::ops::Range;
use std::path::Path;

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::rollup::{self, GroupColumns, RollupFile, Text};
use super::Listed;
use crate::aggregate::rows::{sum_repeated, AccountRows, PackedKey, ABSENT};
use crate::aggregate::{Dims, Selector, Totals};
use crate::error::{Error, Result};
use crate::intern::Interner;
use crate::parts::{self, Slots};
use crate::records::{Country, Direction, Product};
use crate::time::{Buckets, Interval};

/// One row of a result: its key and sums.
type Row = (PackedKey, Totals);

/// Rows a thread folds at least, when a row group is split between
/// threads: smaller parts spread a group over more threads, but each part
/// brings its own strings to map and may cut a bucket that is then checked
/// again whole (re-tune with `bench/store-answer.sh`).
const MIN_PART_ROWS: usize = 4096;

/// The rows `selector` keeps from `account`'s rollup file at `grain`
/// seconds, bucketed by `buckets` (every bucket a union of whole slots).
///
/// The file is read a row group at a time; each row group's rows are
/// folded in parts, one per thread, each with text ids of its own, into
/// the result's rows. The parts are then put on one string table, in file
/// order, and each bucket's rows are ordered (on the threads too). The
/// result does not depend on the number of threads: a bucket whose rows lie in several
/// parts is sorted whole, and equal keys are summed exactly.
///
/// The file's bytes (read, never mapped) are checked against its sum before any is
/// decoded (`listed`): a damaged file is an error naming it.
pub(crate) fn account_rows(
    listed: Listed<'_>,
    account: &str,
    grain: i64,
    selector: &Selector,
    buckets: &Buckets,
) -> Result<AccountRows> {
    let path = &listed.path();
    let request = Request { path, account, grain, selector, buckets };
    let window = buckets.whole();
    let file = RollupFile::open(path, listed)?;
    let threads = rayon::current_num_threads();
    let mut merged = Merged::default();
    let groups = file.groups();
    // At most one row out per row read, and rows are read only from the
    // groups that may hold the window: one allocation, each page touched
    // once (growing by doubling copies every row into fresh pages again),
    // its pages asked for in one call per thread.
    merged.rows.reserve(file.rows_in(window));
    parts::populate(&mut merged.rows);
    for index in 0..groups.len() {
        let Some(frame) = file.read_group(index, window, threads > 1)? else { continue };
        let columns = GroupColumns::new(path, &frame)?;
        let n = columns.len();
        let k = threads.min(n.div_ceil(MIN_PART_ROWS)).max(1);
        let ranges: Vec<_> = (0..k).map(|i| i * n / k..(i + 1) * n / k).collect();
        let bounds: Vec<usize> = ranges.iter().map(|range| range.len()).collect();
        // Each part's usage rows folded straight into the result, on the
        // threads.
        let placed = parts::extend(&mut merged.rows, &bounds, |i, out| request.fold(&columns, ranges[i].clone(), out));
        let placed: Result<Vec<(Part, Range<usize>)>> =
            placed.into_iter().map(|(part, range)| part.map(|part| (part, range))).collect();
        merged.add(placed?);
    }
    merged.finish(&request)
}

/// The parts read so far, in file order, on one string table.
#[derive(Default)]
struct Merged {
    strings: Interner,
    /// The usage rows.
    rows: Vec<Row>,
    /// Start of each bucket's rows in `rows`, and the bucket: a bucket that
    /// goes on from one part to the next is one segment.
    segments: Vec<(usize, u32)>,
    /// Per segment, what is known of its rows' order.
    known: Vec<Known>,
    /// The other charges (few: sorted whole at the end).
    charges: Vec<Row>,
}

/// What is known of a segment's rows' order.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Known {
    /// Not checked yet, or found out of order: checked (and sorted if need
    /// be) at the end.
    #[default]
    Unknown,
    /// In the report's order, every key once: it lies in one part, which
    /// found it so.
    InOrder,
    /// Its rows are in more than one part: checked whole at the end.
    Spans,
}

/// The bucket of the rows being read: its index, its slots' span and
/// whether it sums the rows of several slots.
#[derive(Clone, Copy)]
struct CurrentBucket {
    bucket: u32,
    span: Interval,
    folds: bool,
}

/// The last country and direction keys of a part, and what they read as.
#[derive(Clone, Copy)]
struct LastPlace {
    country_key: u32,
    direction_key: u32,
    country: Option<Country>,
    direction: Option<Direction>,
}

/// What [`account_rows`] answers.
struct Request<'a> {
    path: &'a Path,
    account: &'a str,
    grain: i64,
    selector: &'a Selector,
    buckets: &'a Buckets,
}

/// The text and buckets of the rows of a run of a row group, folded per
/// bucket (the rows themselves in buffers of the caller's): text ids of
/// their own.
struct Part {
    strings: Interner,
    /// Start of each bucket's usage rows, and the bucket.
    segments: Vec<(usize, u32)>,
    /// The other charges (few).
    charges: Vec<Row>,
}

impl Request<'_> {
    fn broken(&self, what: String) -> Error {
        Error::io(self.path, format!("not a rollup file: {what}"))
    }

    /// Rows whose sums overflow: no real total comes near the limits, so
    /// the file's values are damaged (past its checksum, or written so).
    fn overflow(&self) -> Error {
        self.broken(format!("the sums of account {}'s rows overflow", self.account))
    }

    /// The rows `range` of `columns` that the selector keeps, with the rows
    /// of one key in one bucket summed: usage rows pushed to `out` (at most
    /// one per row read), other charges in the part.
    fn fold(&self, columns: &GroupColumns<'_>, range: Range<usize>, out: &mut Slots<'_, Row>) -> Result<Part> {
        let (grain, buckets, broken) = (self.grain, self.buckets, |what| self.broken(what));
        // The file holds one account: the account is checked once (by the
        // caller), not per row.
        let mut strings = Dictionary::default();
        let mut charges: Vec<Row> = Vec::new();
        // The usage rows of the current bucket when it sums its slots' rows:
        // pushed to `out` when it ends.
        let mut summed: Vec<Row> = Vec::new();
        let mut segments: Vec<(usize, u32)> = Vec::new();
        let mut by_key: FxHashMap<u128, u32> = FxHashMap::default();
        let mut current: Option<CurrentBucket> = None;
        let mut last_product: Option<(u32, Product)> = None;
        let mut last_place: Option<LastPlace> = None;
        for i in range {
            let row = columns.row(i);
            let slot = row.slot;
            let (bucket, folds) = match current {
                Some(CurrentBucket { bucket, span, folds }) if slot >= span.start && slot < span.end => (bucket, folds),
                _ => {
                    let Some(bucket) = buckets.index(slot) else { continue };
                    let span = buckets.span(bucket);
                    // A bucket of one slot takes each row as it comes; a wider
                    // one sums its slots' rows under one key.
                    let folds = span.end - span.start != grain;
                    current = Some(CurrentBucket { bucket, span, folds });
                    summed.drain(..).for_each(|row| out.push(row));
                    segments.push((out.len(), bucket));
                    by_key.clear();
                    (bucket, folds)
                }
            };
            let product = match last_product {
                Some((key, last)) if key == row.product.key => last,
                _ => {
                    let text = row.product.text();
                    Product::parse(text).ok_or_else(|| broken(format!("unknown product '{text}'")))?
                }
            };
            last_product = Some((row.product.key, product));
            let (country, direction) = match last_place {
                Some(LastPlace { country_key, direction_key, country, direction })
                    if country_key == row.country.key && direction_key == row.direction.key =>
                {
                    (country, direction)
                }
                _ => {
                    let (country, direction) = rollup::place(row.country.text(), row.direction.text(), broken)?;
                    last_place = Some(LastPlace {
                        country_key: row.country.key,
                        direction_key: row.direction.key,
                        country,
                        direction,
                    });
                    (country, direction)
                }
            };
            // Text by id: each distinct value of a part is looked up once.
            let subaccount = strings.id_of(Column::Subaccount, row.subaccount);
            let code = if product.has_error_code() {
                strings.id_of(Column::ErrorCode, row.error_code)
            } else if product.has_hangup_cause() {
                strings.id_of(Column::HangupCause, row.hangup_cause)
            } else {
                ABSENT
            };
            let type_ = strings.id_of(Column::Type, row.type_);
            let dims = Dims {
                product,
                type_: strings.text(type_),
                subaccount: strings.text(subaccount),
                country,
                direction,
                code: if code == ABSENT { "" } else { strings.text(code) },
            };
            if !self.selector.keeps_in_scope(&dims) {
                continue;
            }
            let parent_level = dims.subaccount.is_empty() || product == Product::Other;
            if row.records < 0 || row.units < 0 {
                return Err(broken("negative count".to_owned()));
            }
            let totals = Totals {
                records: row.records as u64,
                units: row.units as u128,
                duration: row.duration,
                amount: row.amount,
                surcharge: row.surcharge,
            };
            // The fields `GroupKey::new` keeps, as ids.
            let has_place = product.has_country_and_direction();
            let key = PackedKey {
                bucket,
                type_,
                subaccount: if parent_level { ABSENT } else { subaccount },
                code,
                product,
                country: country.filter(|_| has_place),
                direction: direction.filter(|_| has_place),
            };
            // (A charge's key never equals a usage row's: the product is in it.)
            let charge = product == Product::Other;
            if folds {
                let rows = if charge { &mut charges } else { &mut summed };
                match by_key.entry(order_key(&key, |id| id)) {
                    std::collections::hash_map::Entry::Occupied(entry) => {
                        let sum = &mut rows[*entry.get() as usize].1;
                        *sum = sum.checked_add(&totals).ok_or_else(|| self.overflow())?;
                    }
                    std::collections::hash_map::Entry::Vacant(entry) => {
                        entry.insert(rows.len() as u32);
                        rows.push((key, totals));
                    }
                }
            } else if charge {
                charges.push((key, totals));
            } else {
                out.push((key, totals));
            }
        }
        summed.into_iter().for_each(|row| out.push(row));
        Ok(Part { strings: strings.strings, segments, charges })
    }
}

impl Merged {
    /// Takes in the parts of a row group, in file order: each part's usage
    /// rows, already in `rows` at its range, and its charges, their text ids
    /// made the table's.
    ///
    /// The pass that maps a part's ids also checks whether each of its
    /// buckets is in the report's order, by the byte-order ranks of the
    /// part's own strings (which order any two of them as the table's
    /// ranks would), so that [`Merged::finish`] need not read those rows
    /// again.
    fn add(&mut self, parts: Vec<(Part, Range<usize>)>) {
        let mut work = Vec::with_capacity(parts.len());
        for (part, range) in parts {
            let map: Vec<u32> = part.strings.iter().map(|text| self.strings.intern(text)).collect();
            // Each of the part's buckets: its rows in the part, and its segment.
            let mut buckets = Vec::with_capacity(part.segments.len());
            let ends = part.segments.iter().skip(1).map(|s| s.0).chain(std::iter::once(range.len()));
            for ((start, bucket), end) in part.segments.iter().zip(ends) {
                if let Some(last) = self.segments.len().checked_sub(1).filter(|i| self.segments[*i].1 == *bucket) {
                    // The bucket goes on from the last part: checked whole
                    // at the end.
                    self.known[last] = Known::Spans;
                } else {
                    self.segments.push((range.start + start, *bucket));
                    self.known.push(Known::Unknown);
                }
                buckets.push((*start..end, self.segments.len() - 1));
            }
            self.charges.extend(part.charges.iter().map(|row| remapped(row, &map)));
            work.push((range, map, part.strings.ranks(), buckets));
        }
        // The usage rows checked and their ids mapped in place, a part per
        // thread.
        let Some(first) = work.first().map(|(range, ..)| range.start) else { return };
        let mut rest = &mut self.rows[first..];
        let mut jobs = Vec::with_capacity(work.len());
        for (range, map, ranks, buckets) in &work {
            let (rows, after) = std::mem::take(&mut rest).split_at_mut(range.len());
            jobs.push((rows, map, ranks, buckets));
            rest = after;
        }
        let checked: Vec<Vec<(usize, bool)>> = jobs
            .into_par_iter()
            .map(|(rows, map, ranks, buckets)| {
                let rank = |id: u32| ranks[id as usize];
                let check = |(within, segment): &(Range<usize>, usize)| {
                    let rows = &mut rows[within.clone()];
                    let sorted = in_order(rows, rank);
                    rows.iter_mut().for_each(|row| *row = remapped(row, map));
                    (*segment, sorted)
                };
                buckets.iter().map(check).collect()
            })
            .collect();
        for (segment, sorted) in checked.into_iter().flatten() {
            let known = &mut self.known[segment];
            if *known == Known::Unknown && sorted {
                *known = Known::InOrder;
            }
        }
    }

    /// The rows, each bucket's in the report's order (string ids by byte
    /// order), equal keys summed (a bucket's rows in several parts, or a
    /// file holding two rows of one group).
    fn finish(self, request: &Request<'_>) -> Result<AccountRows> {
        let Merged { strings, rows: mut usage, segments, known, mut charges } = self;
        let ranks = strings.ranks();
        let rank = |id: u32| ranks[id as usize];
        let monotone = segments.windows(2).all(|w| w[0].1 < w[1].1);
        // Whether two rows may have one key: then they are summed below.
        let repeats = if monotone {
            // Each bucket sorted by (order key, position): 32-byte pairs
            // move, not rows, and a bucket already in order (one slot per
            // bucket) is only checked, if its part did not already.
            let mut buckets: Vec<&mut [Row]> = Vec::with_capacity(segments.len());
            let mut rest = usage.as_mut_slice();
            let mut ends: Vec<usize> = segments.iter().skip(1).map(|s| s.0).collect();
            ends.push(segments.last().map_or(0, |_| rest.len()));
            let mut at = segments.first().map_or(0, |s| s.0);
            for end in ends {
                let (bucket, after) = std::mem::take(&mut rest).split_at_mut(end - at);
                buckets.push(bucket);
                rest = after;
                at = end;
            }
            buckets
                .into_par_iter()
                .zip(known)
                .map_init(
                    || (Vec::new(), Vec::new()),
                    |(order, sorted): &mut (Vec<(u128, u32)>, Vec<Row>), (rows, known)| {
                        if known == Known::InOrder || in_order(rows, rank) {
                            return false;
                        }
                        order.clear();
                        order.extend(rows.iter().enumerate().map(|(i, (key, _))| (order_key(key, rank), i as u32)));
                        order.sort_unstable();
                        sorted.clear();
                        sorted.extend(order.iter().map(|(_, i)| rows[*i as usize]));
                        rows.copy_from_slice(sorted);
                        true
                    },
                )
                .reduce(|| false, |a, b| a || b)
        } else {
            // Not sorted by slot: one sort of everything.
            usage.sort_unstable_by_key(|(key, _)| (key.bucket, order_key(key, rank)));
            true
        };
        if repeats {
            sum_repeated(&mut usage).ok_or_else(|| request.overflow())?;
        }
        charges.sort_unstable_by_key(|(key, _)| (key.bucket, order_key(key, rank)));
        sum_repeated(&mut charges).ok_or_else(|| request.overflow())?;
        Ok(AccountRows { strings: strings.into_table(), usage, charges })
    }
}

/// `row` with its text ids looked up in `map` (a part's ids to the
/// table's).
#[inline]
fn remapped((key, totals): &Row, map: &[u32]) -> Row {
    let id = |id: u32| if id == ABSENT { ABSENT } else { map[id as usize] };
    (PackedKey { type_: id(key.type_), subaccount: id(key.subaccount), code: id(key.code), ..*key }, *totals)
}

/// Whether `rows` are in the report's order with every key once (their
/// order keys strictly increasing), text ids ranked by `rank`.
fn in_order(rows: &[Row], rank: impl Fn(u32) -> u32) -> bool {
    rows.iter().map(|(key, _)| order_key(key, &rank)).is_sorted_by(|a, b| a < b)
}

/// A key ordered as the report orders rows within a bucket
/// ([`crate::aggregate::Dims`]), text ids mapped to ranks by `rank`.
#[inline]
fn order_key(key: &PackedKey, rank: impl Fn(u32) -> u32) -> u128 {
    key.dims(rank).packed()
}

/// Which column a text came from (keys of different columns index
/// different dictionaries).
#[derive(Clone, Copy)]
enum Column {
    Type,
    Subaccount,
    ErrorCode,
    HangupCause,
}

/// The distinct strings of a part of a row group, interned as they come
/// (the one [`Interner`]), with the id of each column's dictionary keys
/// seen (keys are a row group's).
#[derive(Default)]
struct Dictionary {
    strings: Interner,
    /// Per column, the id of each key seen, by key ([`UNSEEN`] for others).
    by_key: [Vec<u32>; 4],
}

/// A key not seen yet in [`Dictionary::by_key`].
const UNSEEN: u32 = u32::MAX;

impl Dictionary {
    /// The id of a text by its key: `text` is called only for a key not
    /// seen in this part.
    #[inline]
    fn id<'a>(&mut self, column: Column, key: u32, text: impl FnOnce() -> &'a str) -> u32 {
        match self.by_key[column as usize].get(key as usize) {
            Some(&id) if id != UNSEEN => id,
            _ => self.id_of_key(column, key, text()),
        }
    }

    /// [`Dictionary::id`] for a key not seen yet.
    #[inline(never)]
    fn id_of_key(&mut self, column: Column, key: u32, text: &str) -> u32 {
        let id = self.strings.intern(text);
        let ids = &mut self.by_key[column as usize];
        if ids.len() <= key as usize {
            ids.resize(key as usize + 1, UNSEEN);
        }
        ids[key as usize] = id;
        id
    }

    /// The id of a row's text.
    #[inline]
    fn id_of(&mut self, column: Column, text: Text<'_>) -> u32 {
        self.id(column, text.key, || text.text())
    }

    /// The text of `id`.
    #[inline]
    fn text(&self, id: u32) -> &str {
        self.strings.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test's rollup file, read without a sum to check.
    fn unsummed(path: &Path) -> Listed<'_> {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        Listed { store: path.parent().unwrap_or(Path::new(".")), name, sum: None }
    }
    use crate::aggregate::rows::Rows;

    /// Keys sorted by [`order_key`] over ranked ids come out in the order
    /// of their owned [`crate::aggregate::GroupKey`]s (the report's order).
    #[test]
    fn order_keys_sort_like_group_keys() {
        let mut strings = Dictionary::default();
        let texts = ["sms", "", "S2", "voice", "S1", "4000", "30007", "Number Charges", "mms", "3010"];
        let ids: Vec<u32> = texts.iter().enumerate().map(|(i, t)| strings.id(Column::Type, i as u32, || t)).collect();
        let id = |text: &str| ids[texts.iter().position(|t| *t == text).unwrap()];
        let ranks = strings.strings.ranks();
        let table = strings.strings.into_table();
        let us = Country::parse(b"US");
        let de = Country::parse(b"DE");
        let key = |product, type_: &str, sub: Option<&str>, country, direction, code: Option<&str>| PackedKey {
            bucket: 0,
            type_: id(type_),
            subaccount: sub.map_or(ABSENT, id),
            code: code.map_or(ABSENT, id),
            product,
            country,
            direction,
        };
        let (inbound, outbound) = (Some(Direction::Inbound), Some(Direction::Outbound));
        let mut keys = vec![
            key(Product::Voice, "voice", Some("S2"), us, inbound, Some("4000")),
            key(Product::Voice, "voice", None, us, inbound, Some("4000")),
            key(Product::Voice, "voice", Some("S1"), None, outbound, Some("")),
            key(Product::Voice, "voice", Some("S1"), de, outbound, Some("3010")),
            key(Product::Voice, "voice", Some("S1"), de, inbound, Some("4000")),
            key(Product::Message, "sms", None, us, outbound, Some("30007")),
            key(Product::Message, "sms", None, us, outbound, Some("")),
            key(Product::Message, "mms", Some("S2"), None, inbound, Some("")),
            key(Product::Transcription, "", None, None, None, None),
            key(Product::Other, "Number Charges", None, None, None, None),
            key(Product::Zentrunk, "voice", None, us, inbound, Some("")),
        ];
        keys.sort_unstable_by_key(|k| order_key(k, |id| ranks[id as usize]));
        let rows = Rows::new(table, keys.into_iter().map(|k| (k, Totals::default())).collect());
        let owned: Vec<_> = rows.iter().map(|(key, _)| key.to_group_key("A")).collect();
        let mut sorted = owned.clone();
        sorted.sort();
        assert_eq!(owned, sorted);
    }

    /// Rows out of slot order and two rows of one group (which a file
    /// should not have, but a reader must not get wrong) still come out
    /// summed, one per group, in the report's order; for buckets of one
    /// slot and of many.
    #[test]
    fn rows_out_of_order_or_repeated_are_summed_and_ordered() {
        use crate::aggregate::Bucketing;
        use crate::store::rollup::{RollupRef, RollupWriter};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.parquet");
        let row = |slot: i64, type_: &'static str, subaccount: &'static str, amount: i128| RollupRef {
            auth_id: "A",
            slot,
            dims: Dims {
                product: Product::Message,
                type_,
                subaccount,
                country: Country::parse(b"US"),
                direction: Some(Direction::Outbound),
                code: "",
            },
            totals: Totals { records: 1, units: 1, duration: 0, amount, surcharge: 0 },
        };
        let day = 86_400;
        let rows = [
            row(day + 900, "sms", "S1", 1),
            row(0, "sms", "", 2),
            row(900, "mms", "", 4),
            row(0, "sms", "", 8),
            row(day, "mms", "S1", 16),
        ];
        let mut writer = RollupWriter::create(&path).expect("writer");
        writer.write(&rows).expect("written");
        writer.finish(&crate::durable::Syncer::at_once()).expect("finished");
        let summed = |grain: i64, bounds: Vec<i64>| {
            let buckets = Buckets::from_bounds(bounds, chrono_tz::Tz::UTC);
            let selector = Selector::everything(Bucketing::shared(buckets.clone()));
            let AccountRows { strings, usage, charges } =
                account_rows(unsummed(&path), "A", grain, &selector, &buckets).expect("read");
            assert!(charges.is_empty());
            let rows = Rows::new(strings, usage);
            rows.iter()
                .map(|(key, totals)| {
                    (key.bucket, key.dims.type_.to_owned(), key.dims.subaccount.map(str::to_owned), totals.amount)
                })
                .collect::<Vec<_>>()
        };
        let s1 = || Some("S1".to_owned());
        // Days: every slot of a day in one bucket.
        assert_eq!(
            summed(900, vec![0, day, 2 * day]),
            [
                (0, "mms".into(), None, 4),
                (0, "sms".into(), None, 10),
                (1, "mms".into(), s1(), 16),
                (1, "sms".into(), s1(), 1)
            ]
        );
        // 15-minute buckets: one slot each.
        let slots: Vec<i64> = (0..=2 * 96).map(|i| i * 900).collect();
        assert_eq!(
            summed(900, slots),
            [
                (0, "sms".into(), None, 10),
                (1, "mms".into(), None, 4),
                (96, "mms".into(), s1(), 16),
                (97, "sms".into(), s1(), 1)
            ]
        );
    }

    /// A file in slot order whose slot holds two rows of one key, usage and
    /// charges alike (which a file should not have): each bucket of one
    /// slot is found out of order and summed, the charges come apart from
    /// the usage rows, each in the report's order; in a bucket of two
    /// slots, every row of a key is summed as it is folded.
    #[test]
    fn repeated_keys_in_slot_order_are_summed_and_charges_come_apart() {
        use crate::aggregate::Bucketing;
        use crate::store::rollup::{RollupRef, RollupWriter};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.parquet");
        let row = |slot: i64, product: Product, type_: &'static str, amount: i128| RollupRef {
            auth_id: "A",
            slot,
            dims: Dims {
                product,
                type_,
                subaccount: "",
                country: (product == Product::Message).then(|| Country::parse(b"US")).flatten(),
                direction: (product == Product::Message).then_some(Direction::Outbound),
                code: "",
            },
            totals: Totals { records: 1, units: 1, duration: 0, amount, surcharge: 0 },
        };
        let rows = [
            row(0, Product::Other, "fee", 1),
            row(0, Product::Message, "sms", 2),
            row(0, Product::Message, "mms", 4),
            row(0, Product::Message, "sms", 8),
            row(900, Product::Other, "fee", 16),
            row(900, Product::Other, "fee", 32),
            row(900, Product::Message, "mms", 64),
        ];
        let mut writer = RollupWriter::create(&path).expect("writer");
        writer.write(&rows).expect("written");
        writer.finish(&crate::durable::Syncer::at_once()).expect("finished");
        /// A row as the test lists it.
        #[derive(Debug, PartialEq)]
        struct Item {
            bucket: u32,
            type_: String,
            amount: i128,
        }
        let item = |bucket: u32, type_: &str, amount: i128| Item { bucket, type_: type_.to_owned(), amount };
        // The usage rows and the charges.
        let read = |bounds: Vec<i64>| -> (Vec<Item>, Vec<Item>) {
            let buckets = Buckets::from_bounds(bounds, chrono_tz::Tz::UTC);
            let selector = Selector::everything(Bucketing::shared(buckets.clone()));
            let AccountRows { strings, usage, charges } =
                account_rows(unsummed(&path), "A", 900, &selector, &buckets).expect("read");
            let listed = |rows: Vec<Row>| {
                let rows = Rows::new(strings.clone(), rows);
                rows.iter().map(|(key, totals)| item(key.bucket, key.dims.type_, totals.amount)).collect()
            };
            (listed(usage), listed(charges))
        };
        let (usage, charges) = read(vec![0, 900, 1800]);
        assert_eq!(usage, [item(0, "mms", 4), item(0, "sms", 10), item(1, "mms", 64)]);
        assert_eq!(charges, [item(0, "fee", 1), item(1, "fee", 48)]);
        // Both slots in one bucket: summed as they are folded.
        let (usage, charges) = read(vec![0, 1800]);
        assert_eq!(usage, [item(0, "mms", 68), item(0, "sms", 10)]);
        assert_eq!(charges, [item(0, "fee", 49)]);
    }

    /// The same rows on 1, 2 and 3 threads: row groups of thousands of
    /// rows split between threads, buckets (days of 15-minute slots, and
    /// 15-minute buckets) that go on from one part and one row group to
    /// the next.
    #[test]
    fn the_rows_do_not_depend_on_the_threads() {
        use crate::aggregate::Bucketing;
        use crate::store::rollup::{RollupRef, RollupWriter};
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.parquet");
        let subaccounts = ["", "S1", "S2", "S3"];
        let types = ["sms", "mms"];
        let codes = ["", "30007", "4000"];
        let mut writer = RollupWriter::create(&path).expect("writer");
        let day = 86_400;
        // Three row groups of 9,216 rows, noon to noon: 96 slots of 96
        // keys each.
        let countries = [Country::parse(b"US"), Country::parse(b"DE")];
        let directions = [Some(Direction::Inbound), Some(Direction::Outbound)];
        for group in 0..3i64 {
            let mut rows = Vec::new();
            for slot in (0..96i64).map(|s| (group * 96 + s) * 900 + day / 2) {
                let mut n = 0;
                for subaccount in subaccounts {
                    for type_ in types {
                        for code in codes {
                            for country in countries {
                                for direction in directions {
                                    n += 1;
                                    rows.push(RollupRef {
                                        auth_id: "A",
                                        slot,
                                        dims: Dims {
                                            product: Product::Message,
                                            type_,
                                            subaccount,
                                            country,
                                            direction,
                                            code,
                                        },
                                        totals: Totals {
                                            records: 1,
                                            units: n as u128,
                                            duration: 0,
                                            amount: slot as i128 * 1_000 + n,
                                            surcharge: 0,
                                        },
                                    });
                                }
                            }
                        }
                    }
                }
            }
            writer.write(&rows).expect("written");
        }
        writer.finish(&crate::durable::Syncer::at_once()).expect("finished");
        let read = |threads: usize, bounds: Vec<i64>| {
            let buckets = Buckets::from_bounds(bounds, chrono_tz::Tz::UTC);
            let selector = Selector::everything(Bucketing::shared(buckets.clone()));
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool");
            let AccountRows { strings, usage, charges } =
                pool.install(|| account_rows(unsummed(&path), "A", 900, &selector, &buckets)).expect("read");
            assert!(charges.is_empty());
            let rows = Rows::new(strings, usage);
            rows.iter().map(|(key, totals)| (format!("{key:?}"), *totals)).collect::<Vec<_>>()
        };
        let days = vec![0, day, 2 * day, 3 * day];
        let slots: Vec<i64> = (0..=3 * 96).map(|i| i * 900).collect();
        for bounds in [days, slots] {
            let one = read(1, bounds.clone());
            assert!(one.len() > 100, "{}", one.len());
            assert!(one.windows(2).all(|w| w[0].0 != w[1].0), "one row per key");
            assert_eq!(read(2, bounds.clone()), one);
            assert_eq!(read(3, bounds), one);
        }
    }
}
