//! The rollups of an ingest's new rows: groups keyed by interned strings and
//! the 15-minute slot ([`Rollups`]), in shards by account, each row summed
//! once into its shard (the shards in parallel); spilled to
//! partial files of fixed-size binary rows (this run's string ids, never
//! published) when more than [`IngestOptions::max_rollup_groups`](super::IngestOptions::max_rollup_groups) are held;
//! and at publish merged into each touched account's rollup files, one UTC
//! day at a time, from a [`Cursor`] per input (the in-memory groups, each
//! account's run of a partial file, the previous 15-minute file), then coarsened grain by grain
//! and written in the rollup file's row order ([`sum_grain`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::chunk::{Chunk, ChunkFold, Row, Texts, AUTH_ID, CODE, SUBACCOUNT, TYPE};
use super::create_parent;
use super::table::{GroupTable, Sums};
use crate::aggregate::order::{Narrowing, Order};
use crate::aggregate::Totals;
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::intern::{self, Interner};
use crate::prefetch::prefetch;
use crate::records::{Country, Direction, Product};
use crate::store::parquet_io::{self, RecordView};
use crate::store::rollup::{self, KeyedRollup, RollupRef};
use crate::store::Manifest;

/// Merges at a time in a publish beyond the pool's threads.
const MORE_MERGES: usize = 4;

/// Rollup groups of one account.
type Groups<'a> = &'a [(RollupKey, Totals)];

/// A row's key, its hash and its sums, computed [`KEYS_AHEAD`] rows
/// before they are added.
type Pending = (RollupKey, u64, Sums);

/// How many rows ahead of its add the fold computes a key and prefetches
/// its slot.
const KEYS_AHEAD: usize = 8;

/// The sums of one record.
#[inline]
fn sums_of(row: &RecordView<'_>) -> Sums {
    Sums::one(row.units, row.duration, row.amount, row.surcharge)
}

/// The sums of one row of a chunk.
#[inline]
fn sums_of_row(row: &Row) -> Sums {
    Sums::one(row.units, row.duration, row.amount, row.surcharge)
}

/// A chunk's key-field id not yet met by a shard ([`Shard::key_of_row`]).
const NO_ID: u32 = u32::MAX;

fn rollup_overflow() -> Error {
    Error::Internal("rollup sum overflow".to_owned())
}

/// A rollup key in interned ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct RollupKey {
    pub(super) account: u32,
    pub(super) subaccount: u32,
    pub(super) slot: i64,
    pub(super) product: Product,
    pub(super) type_: u32,
    pub(super) country: Option<Country>,
    pub(super) direction: Option<Direction>,
    pub(super) code: u32,
}

impl RollupKey {
    /// The fields after the slot in the report's order, text as this run's
    /// string ids. A rollup row's absent subaccount or code is the empty
    /// string, the lowest of all strings, so it sorts first as an absent
    /// value does.
    #[inline]
    fn order(&self) -> Order<u32> {
        Order::of(self.product, self.type_, self.subaccount, self.country, self.direction, self.code)
    }
}

/// Shards of [`Rollups`]: an account's groups all sit in the shard its id
/// hashes to ([`shard_of`]), so shards fold, spill and publish on their own
/// (in parallel), and the output does not depend on the sharding.
pub(super) const SHARDS: usize = 16;

/// The shard of the account `auth_id` (a fixed hash: the same on every run
/// and thread count).
pub(super) fn shard_of(auth_id: &str) -> usize {
    (xxhash_rust::xxh3::xxh3_64(auth_id.as_bytes()) % SHARDS as u64) as usize
}

/// The rollups of this ingest's new rows, in [`SHARDS`] shards by account:
/// each row is folded once, straight into its account's shard (no
/// per-chunk maps merged afterwards), the shards in parallel.
pub(in crate::store) struct Rollups {
    shards: Vec<Shard>,
}

impl Default for Rollups {
    fn default() -> Rollups {
        Rollups { shards: (0..SHARDS).map(|_| Shard::default()).collect() }
    }
}

impl Rollups {
    /// Adds one row to its account's group.
    pub(in crate::store) fn add(&mut self, row: &RecordView<'_>) -> Result<()> {
        self.shard(row.auth_id).add(row)
    }

    /// Adds `add` to the group of `row` (its slot is the 15-minute slot of
    /// `row.secs`): a row of rollups summed elsewhere (the Spark engine).
    pub(in crate::store) fn add_totals(&mut self, row: &RecordView<'_>, add: &Totals) -> Result<()> {
        self.shard(row.auth_id).add_totals(row, add)
    }

    fn shard(&mut self, auth_id: &str) -> &mut Shard {
        &mut self.shards[shard_of(auth_id)]
    }

    /// Folds the new rows of a batch into their shards, the shards in
    /// parallel: each shard the rows `folds` lists for it, chunk by chunk,
    /// their key fields found by the chunk's ids through a table per chunk
    /// (a chunk's ids to the shard's: a few hundred entries, in cache), so
    /// that no row's text is read. (A shard's table of groups grows as it
    /// needs: made at its share of `--max-rollup-groups` up front, a small
    /// ingest's tables would take that memory too, every page of it touched
    /// by the random placement of its groups.)
    pub(super) fn fold_chunks(&mut self, chunks: &[Chunk], folds: &[ChunkFold]) -> Result<()> {
        let folded: Vec<Result<()>> = self
            .shards
            .par_iter_mut()
            .enumerate()
            .map(|(s, shard)| {
                let mut ahead = std::collections::VecDeque::with_capacity(KEYS_AHEAD + 1);
                let mut ids: Vec<u32> = Vec::new();
                shard.groups.reserve(folds.iter().map(|fold| fold.by_shard[s].len()).sum());
                for (chunk, fold) in chunks.iter().zip(folds) {
                    ids.clear();
                    ids.resize(chunk.texts.names(), NO_ID);
                    for row in chunk.scattered_rows(&fold.by_shard[s]) {
                        let key = shard.key_of_row(row, &chunk.texts, &mut ids);
                        shard.add_key(key, sums_of_row(row), &mut ahead)?;
                    }
                }
                shard.flush(&mut ahead)
            })
            .collect();
        folded.into_iter().collect()
    }

    /// Spills every shard that holds at least its share of `max_groups`
    /// (so that all shards together hold about `max_groups` at most).
    /// The shards spill in parallel (each sorts its groups, then writes
    /// one partial file per shard and spill).
    pub(in crate::store) fn spill_full(&mut self, store: &Path, id: &str, max_groups: usize) -> Result<()> {
        let limit = (max_groups / SHARDS).max(1);
        self.shards
            .par_iter_mut()
            .enumerate()
            .filter(|(_, shard)| shard.groups.len() >= limit)
            .try_for_each(|(s, shard)| shard.spill(store, id, s))
    }

    /// Merges the new groups into each touched account's rollups and writes
    /// one new file per touched account and grain (accounts in parallel,
    /// whatever their shard); each partial file is deleted as soon as the
    /// last merge that reads it is done.
    ///
    /// An account's published file (listed by `old`) is checked against its
    /// sum before it is read.
    pub(in crate::store) fn write(
        mut self,
        store: &Path,
        id: &str,
        old: &Manifest,
        manifest: &mut Manifest,
        syncer: &Syncer,
    ) -> Result<()> {
        // Each shard's groups by account, and its partial files by account.
        type Taken = (ByAccount, BTreeMap<String, Vec<Run>>);
        let taken: Vec<Taken> = self
            .shards
            .par_iter_mut()
            .map(|shard| {
                // The partial files are read from here on: each written whole.
                for (path, written) in shard.writing.drain(..) {
                    written.wait().map_err(|e| Error::io(&path, e))?;
                }
                let groups = shard.take_by_account();
                // Nothing more is added: the table's memory goes now.
                shard.groups.release();
                Ok((groups, std::mem::take(&mut shard.spilled)))
            })
            .collect::<Result<_>>()?;
        let mut accounts: BTreeMap<&str, (usize, Groups<'_>)> = BTreeMap::new();
        for (s, (groups, spilled)) in taken.iter().enumerate() {
            for slice in groups.accounts() {
                accounts.insert(self.shards[s].strings.get(slice[0].0.account), (s, slice));
            }
            for account in spilled.keys() {
                accounts.entry(account).or_insert((s, &[]));
            }
        }
        let n_accounts = accounts.len();
        let partial_rows = |s: usize, account: &str| -> u64 {
            taken[s].1.get(account).map_or(0, |runs| runs.iter().map(|run| run.rows).sum())
        };
        let rows = |s: usize, account: &str, groups: Groups<'_>| groups.len() as u64 + partial_rows(s, account);
        let mut largest = [0u64; SHARDS];
        for (account, (s, groups)) in &accounts {
            largest[*s] = largest[*s].max(rows(*s, account, groups));
        }
        // Shard after shard, those with the largest accounts first, and in
        // a shard the largest accounts first (rows in memory and in partial
        // files): the largest account starts first and the last merge to
        // finish is a small one (not a skewed account started late while
        // the other thread has nothing left); and each shard's partial
        // files are read by merges close together, so that they can be
        // deleted while later shards merge.
        let mut accounts: Vec<(&str, (usize, Groups<'_>))> = accounts.into_iter().collect();
        accounts.sort_by_cached_key(|(account, (s, groups))| {
            (std::cmp::Reverse(largest[*s]), *s, std::cmp::Reverse(rows(*s, account, groups)))
        });
        // How many merges still read each partial file.
        let partial_files = |s: usize, account: &str| -> std::collections::BTreeSet<&Path> {
            taken[s].1.get(account).into_iter().flatten().map(|run| run.path.as_path()).collect()
        };
        let mut readers: BTreeMap<&Path, usize> = BTreeMap::new();
        for (account, (s, _)) in &accounts {
            for path in partial_files(*s, account) {
                *readers.entry(path).or_default() += 1;
            }
        }
        let readers = std::sync::Mutex::new(readers);
        // Plain threads, one account each at a time: inside a rayon task, a
        // wait on the pool (every row group's encoding) runs other queued
        // accounts on the same thread, so that every account's merge could
        // be in memory at once.
        let jobs = std::sync::Mutex::new(accounts.into_iter());
        let done = std::sync::Mutex::new(Vec::new());
        let previous = old;
        let (shards, taken, finished, readers, partial_files) = (&self.shards, &taken, &done, &readers, &partial_files);
        std::thread::scope(|scope| {
            // A partial file is deleted once no merge is left to read it, on
            // a thread of its own: on a file system that discards freed
            // blocks, a deletion waits on the device (0.2 ms a MB here),
            // which the merges need not wait for.
            let (delete, deletions) = std::sync::mpsc::channel::<PathBuf>();
            scope.spawn(move || {
                for partial in deletions {
                    // Unpublished scratch files of this run; a leftover is
                    // harmless (the next ingest collects it).
                    let _ = std::fs::remove_file(partial);
                }
            });
            // Four more than the pool's threads: while a merge waits on the
            // pool for its row groups' encoding, or on the device for its
            // partial files' slices (read around the page cache), another
            // merge computes (two more left a publish of the 16.1M set
            // 0.05 s longer; six more, 150 MB more memory and no faster:
            // re-tune with `bench/ingest-ab.sh`).
            for _ in 0..rayon::current_num_threads() + MORE_MERGES {
                // The lock is released inside `next`, before the work.
                let next = || jobs.lock().ok().and_then(|mut jobs| jobs.next());
                let delete = delete.clone();
                scope.spawn(move || {
                    while let Some((account, (s, groups))) = next() {
                        let result = account_inputs(store, previous, &taken[s].1, account)
                            .and_then(|inputs| shards[s].publish_account(store, id, account, groups, inputs, syncer));
                        if let Ok(mut done) = finished.lock() {
                            done.push(result);
                        }
                        let Ok(mut readers) = readers.lock() else { continue };
                        for path in partial_files(s, account) {
                            if let Some(left) = readers.get_mut(path) {
                                *left -= 1;
                                if *left == 0 {
                                    let _ = delete.send(path.to_owned());
                                }
                            }
                        }
                    }
                });
            }
            // The deleting thread ends when the merges' senders are gone.
            drop(delete);
        });
        let written: Vec<Result<Vec<(String, i64, String)>>> = done.into_inner().unwrap_or_default();
        if written.len() != n_accounts {
            return Err(Error::Internal("a rollup merge thread failed".to_owned()));
        }
        for result in written {
            for (account, grain, name) in result? {
                manifest.rollups.entry(account).or_default().insert(grain, name);
            }
        }
        Ok(())
    }
}

/// A shard's groups sorted by account and slot, and where each account's
/// rows end.
struct ByAccount {
    rows: Vec<(RollupKey, Totals)>,
    ends: Vec<usize>,
}

impl ByAccount {
    /// The rows of each account (never empty).
    fn accounts(&self) -> impl Iterator<Item = Groups<'_>> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(start, &end)| &self.rows[start..end])
    }
}

/// The positions of `groups` in (account, slot) order, each as one
/// integer (account, slot, position: ties in the order groups first
/// appeared), sorted: a group is 72 bytes, too many to move around a sort.
fn sorted_order<S>(groups: &[(RollupKey, S)]) -> Vec<u128> {
    let whole = |i: usize, key: &RollupKey| {
        let slot = (key.slot as u64 ^ 1 << 63) as u128;
        (key.account as u128) << 96 | slot << 32 | i as u128
    };
    if let Some(ranked) = radix_order(groups) {
        return ranked.iter().map(|&r| r as u32 as usize).map(|i| whole(i, &groups[i].0)).collect();
    }
    let mut order: Vec<u128> = groups.iter().enumerate().map(|(i, (key, _))| whole(i, key)).collect();
    order.sort_unstable();
    order
}

/// [`sorted_order`] by a radix sort, when the groups' accounts and slots
/// span few enough (account, slot) pairs to rank them in 32 bits (a
/// shard's few accounts over a year of 15-minute slots: 2 passes, where a
/// comparison sort of a spill's 64k groups goes 16 levels deep): each
/// group's rank `<< 32 |` its position, sorted. `None` otherwise.
fn radix_order<S>(groups: &[(RollupKey, S)]) -> Option<Vec<u64>> {
    let (first, _) = groups.first()?;
    u32::try_from(groups.len()).ok()?;
    let (mut accounts, mut slots) = ((first.account, first.account), (first.slot, first.slot));
    for (key, _) in groups {
        if key.slot.rem_euclid(crate::store::SLOT_SECONDS) != 0 {
            return None;
        }
        accounts = (accounts.0.min(key.account), accounts.1.max(key.account));
        slots = (slots.0.min(key.slot), slots.1.max(key.slot));
    }
    let per_account = u64::try_from(slots.1.checked_sub(slots.0)? / crate::store::SLOT_SECONDS).ok()? + 1;
    let ranks = (u64::from(accounts.1 - accounts.0) + 1).checked_mul(per_account).filter(|&r| r <= 1 << 32)?;
    let mut ranked: Vec<u64> = groups
        .iter()
        .enumerate()
        .map(|(i, (key, _))| {
            let slot = ((key.slot - slots.0) / crate::store::SLOT_SECONDS) as u64;
            (u64::from(key.account - accounts.0) * per_account + slot) << 32 | i as u64
        })
        .collect();
    radix_sort(&mut ranked, 32, u64::BITS - (ranks - 1).leading_zeros());
    Some(ranked)
}

/// Sorts `values` by their bits `low..low + bits` (the bits above are
/// zero), stably: a least-significant-digit radix sort, 11 bits a pass.
fn radix_sort(values: &mut Vec<u64>, low: u32, bits: u32) {
    const DIGIT: u32 = 11;
    let mut other = vec![0u64; values.len()];
    let mut shift = low;
    while shift < low + bits {
        let digit = |v: u64| (v >> shift) as usize & ((1 << DIGIT) - 1);
        let mut starts = vec![0usize; 1 << DIGIT];
        for &v in values.iter() {
            starts[digit(v)] += 1;
        }
        let mut sum = 0;
        for start in starts.iter_mut() {
            (*start, sum) = (sum, sum + *start);
        }
        for &v in values.iter() {
            let at = &mut starts[digit(v)];
            other[*at] = v;
            *at += 1;
        }
        std::mem::swap(values, &mut other);
        shift += DIGIT;
    }
}

/// Where each account's items end in `items` (sorted by account: a
/// [`sorted_order`], or rows), `account` giving an item's account.
fn account_ends<T>(items: &[T], account: impl Fn(&T) -> u32) -> Vec<usize> {
    let mut ends = Vec::new();
    for (i, pair) in items.windows(2).enumerate() {
        if account(&pair[0]) != account(&pair[1]) {
            ends.push(i + 1);
        }
    }
    if !items.is_empty() {
        ends.push(items.len());
    }
    ends
}

/// The account of an item of a [`sorted_order`].
fn account_in_order(item: &u128) -> u32 {
    (item >> 96) as u32
}

/// The groups at the positions of `order` (part of a [`sorted_order`]),
/// each prefetched [`GATHER_AHEAD`] groups before its turn.
fn gather<'g, S>(groups: &'g [(RollupKey, S)], order: &'g [u128]) -> impl Iterator<Item = &'g (RollupKey, S)> + 'g {
    gather_at(groups, order, |&k| k as u32)
}

/// The rows at the positions `position` finds in `order`, each
/// prefetched [`GATHER_AHEAD`] rows before its turn: the rows in an order
/// the hardware prefetcher does not follow.
fn gather_at<'g, O, S>(
    rows: &'g [(RollupKey, S)],
    order: &'g [O],
    position: impl Fn(&O) -> u32 + 'g,
) -> impl Iterator<Item = &'g (RollupKey, S)> + 'g {
    let at = move |n: usize| order.get(n).and_then(|o| rows.get(position(o) as usize));
    (0..order.len()).filter_map(move |n| {
        if let Some(later) = at(n + GATHER_AHEAD) {
            prefetch(later);
        }
        at(n)
    })
}

/// How many rows ahead [`gather_at`] (and so [`gather`]) prefetches. A
/// spill gathers a shard's groups (65,536 of 72 bytes, 4.7 MB, at the
/// default `--max-rollup-groups`) in an order unrelated to where they sit,
/// a read from memory each: 16 ahead, the spill still waited on most of
/// them (2.4 % of the 16.1M-record ingest's samples on its first load of
/// a group); 80 ahead, its share of the samples fell from 2.8 to 1.6 %
/// (re-tune with `bench/ingest-ab.sh`).
const GATHER_AHEAD: usize = 80;

/// The rollup files to merge for `account`: its partial files of this
/// run (`spilled`), and its published finest-grain file (`previous`) if it
/// has one. The finest grain holds everything: the coarser files are
/// derived from it, not read.
fn account_inputs(
    store: &Path,
    previous: &Manifest,
    spilled: &BTreeMap<String, Vec<Run>>,
    account: &str,
) -> Result<Vec<Input>> {
    let mut inputs: Vec<Input> =
        spilled.get(account).map_or(Vec::new(), |runs| runs.iter().cloned().map(Input::Run).collect());
    let finest = crate::store::GRAINS[0];
    if let Some(file) = previous.rollups.get(account).and_then(|files| files.get(&finest)) {
        // Checked whole before its first slice is read: a damaged row is
        // never carried into the next generation.
        let listed = previous.file(store, file)?;
        listed.check_file()?;
        inputs.push(Input::File(listed.path()));
    }
    Ok(inputs)
}

/// One account's rows in a partial file: `rows` rows from row `first`,
/// each of `row_bytes` ([`NARROW_BYTES`] or [`WIDE_BYTES`]).
#[derive(Clone, Debug)]
struct Run {
    path: PathBuf,
    first: u64,
    rows: u64,
    row_bytes: usize,
}

/// An input of an account's merge besides its groups in memory.
enum Input {
    /// Its rows in a partial file of this run.
    Run(Run),
    /// Its published finest-grain rollup file.
    File(PathBuf),
}

/// The rollups of the accounts of one shard.
#[derive(Default)]
struct Shard {
    strings: Interner,
    groups: GroupTable,
    /// The runs of each account in the partial files written by
    /// [`Shard::spill`].
    spilled: BTreeMap<String, Vec<Run>>,
    /// The partial files whose last blocks may still be on their way to
    /// the device (waited for before the merge reads them).
    writing: Vec<(PathBuf, crate::direct::Written)>,
    spills: u32,
    /// The last id of each string field of a key ([`Shard::intern`]).
    recent: [Option<u32>; 4],
}

impl Shard {
    /// The id of `text`, the value of string field `field` of a key:
    /// consecutive rows mostly repeat a field's value, so the last id of
    /// the field is tried first (a compare instead of a hash).
    #[inline]
    fn intern(&mut self, field: usize, text: &str) -> u32 {
        self.strings.intern_after(&mut self.recent[field], text)
    }

    /// Folds one row's `key` and `sums`. Its slot is prefetched now; it
    /// is added [`KEYS_AHEAD`] rows later, from `ahead` (then its slot is
    /// in cache, not a miss to wait for). [`Shard::flush`] adds the rest.
    #[inline]
    fn add_key(&mut self, key: RollupKey, sums: Sums, ahead: &mut std::collections::VecDeque<Pending>) -> Result<()> {
        let hash = GroupTable::hash(&key);
        self.groups.prefetch(hash);
        ahead.push_back((key, hash, sums));
        if ahead.len() > KEYS_AHEAD {
            if let Some((key, hash, sums)) = ahead.pop_front() {
                self.groups.add(key, hash, &sums, rollup_overflow)?;
            }
        }
        Ok(())
    }

    /// Adds the rows [`Shard::add_key`] still holds.
    fn flush(&mut self, ahead: &mut std::collections::VecDeque<Pending>) -> Result<()> {
        for (key, hash, sums) in ahead.drain(..) {
            self.groups.add(key, hash, &sums, rollup_overflow)?;
        }
        Ok(())
    }

    /// The key of `row`'s group (its slot is the 15-minute slot of
    /// `row.secs`).
    #[inline]
    fn key(&mut self, row: &RecordView<'_>) -> RollupKey {
        RollupKey {
            account: self.intern(0, row.auth_id),
            subaccount: self.intern(1, row.subaccount),
            slot: crate::store::slot_of(row.secs),
            product: row.product,
            type_: self.intern(2, row.type_),
            country: row.country,
            direction: row.direction,
            code: self.intern(3, row.code),
        }
    }

    /// The key of a chunk's `row` (its text in `texts`): its key fields'
    /// ids in `texts` become this shard's through `ids` (indexed by the
    /// chunk's id, [`NO_ID`] until first met, then interned here once).
    #[inline]
    fn key_of_row(&mut self, row: &Row, texts: &Texts, ids: &mut [u32]) -> RollupKey {
        let mut id = |field: usize| {
            let local = row.names[field];
            match ids.get(local as usize) {
                Some(&id) if id != NO_ID => id,
                _ => {
                    let id = self.strings.intern(texts.name_of(local));
                    if let Some(slot) = ids.get_mut(local as usize) {
                        *slot = id;
                    }
                    id
                }
            }
        };
        RollupKey {
            account: id(AUTH_ID),
            subaccount: id(SUBACCOUNT),
            slot: crate::store::slot_of(row.secs),
            product: row.product,
            type_: id(TYPE),
            country: row.country,
            direction: row.direction,
            code: id(CODE),
        }
    }

    /// Adds one row to its group.
    fn add(&mut self, row: &RecordView<'_>) -> Result<()> {
        let key = self.key(row);
        self.groups.add(key, GroupTable::hash(&key), &sums_of(row), rollup_overflow)
    }

    /// Adds `add` to the group of `row`.
    fn add_totals(&mut self, row: &RecordView<'_>, add: &Totals) -> Result<()> {
        let key = self.key(row);
        self.groups.add_wide(key, add, rollup_overflow)
    }

    /// Merges and writes the rollup files of one account (its `groups` in
    /// memory and its `inputs`, [`account_inputs`]); their names, by grain.
    fn publish_account(
        &self,
        store: &Path,
        id: &str,
        account: &str,
        groups: Groups<'_>,
        inputs: Vec<Input>,
        syncer: &Syncer,
    ) -> Result<Vec<(String, i64, String)>> {
        let names: Vec<(i64, String)> = crate::store::GRAINS
            .iter()
            .map(|grain| (*grain, format!("rollups/{}/{id}-{grain}s.parquet", account_folder(account))))
            .collect();
        let paths: Vec<PathBuf> = names.iter().map(|(_, name)| store.join(name)).collect();
        create_parent(&paths[0])?;
        self.merge_account(account, groups, &inputs, &paths, syncer)?;
        Ok(names.into_iter().map(|(grain, name)| (account.to_owned(), grain, name)).collect())
    }

    /// The in-memory groups, copied out and cut by account, each account's
    /// sorted by slot. The table keeps its memory for the next batches (its
    /// pages stay mapped: no fresh page faults, no regrowing).
    fn take_by_account(&mut self) -> ByAccount {
        let groups = self.groups.groups();
        let order = sorted_order(groups);
        let mut rows: Vec<(RollupKey, Totals)> =
            gather(groups, &order).map(|(key, sums)| (*key, sums.wide())).collect();
        let ends = if self.groups.wide().is_empty() {
            account_ends(&order, account_in_order)
        } else {
            // Sums past 64 bits (next to never): beside their keys' other
            // partial sums, which the merge adds.
            rows.extend_from_slice(self.groups.wide());
            rows.sort_by_key(|(key, _)| (key.account, key.slot));
            account_ends(&rows, |(key, _)| key.account)
        };
        self.groups.clear();
        ByAccount { rows, ends }
    }

    /// Writes the in-memory groups to partial files (finest grain, by
    /// account then slot, in this run's string ids: not published, read
    /// back only by [`Rollups::write`] of the same run) and forgets them,
    /// so that rollup memory stays bounded by
    /// [`IngestOptions::max_rollup_groups`](super::IngestOptions::max_rollup_groups).
    /// The groups are written in their sorted order straight from the
    /// table (no sorted copy), in rows of [`NARROW_BYTES`]; each account's
    /// rows are one [`Run`] of the file (one file per spill, not per
    /// account and spill: creating and deleting hundreds of small files
    /// took a tenth of a second). The table's sums past 64 bits, if any,
    /// go to a second file of [`WIDE_BYTES`] rows.
    fn spill(&mut self, store: &Path, id: &str, shard: usize) -> Result<()> {
        let groups = self.groups.groups();
        let mut spill = Spill { strings: &self.strings, writing: &mut self.writing };
        let mut runs = Vec::new();
        // (No groups but wide sums: only totals from the Spark engine that
        // do not fit 64 bits; no empty file for them.)
        if !groups.is_empty() {
            let order = sorted_order(groups);
            let path = store.join(format!("rollups/{id}-part-{shard:02}-{:05}.bin", self.spills));
            runs = spill.write(&path, gather(groups, &order), &order, account_in_order, NARROW_BYTES)?;
        }
        if !self.groups.wide().is_empty() {
            let mut wide = self.groups.wide().to_vec();
            wide.sort_by_key(|(key, _)| (key.account, key.slot));
            let path = store.join(format!("rollups/{id}-part-{shard:02}-{:05}-wide.bin", self.spills));
            runs.extend(spill.write(&path, wide.iter(), &wide, |(key, _)| key.account, WIDE_BYTES)?);
        }
        self.spills += 1;
        self.groups.clear();
        for (account, run) in runs {
            self.spilled.entry(account).or_default().push(run);
        }
        Ok(())
    }

    /// Writes the rollups of `account` at every grain to `paths` (one per
    /// [`crate::store::GRAINS`]): `groups` (sorted by slot) summed with the rows of
    /// the `inputs` files (finest grain, sorted by slot).
    ///
    /// One day at a time: every input is read a slice of rows at a time, a
    /// day's rows are sorted once ([`sort_day`]) and summed at every grain
    /// from that order ([`sum_grain`]); so memory holds one day of the
    /// account, not all of it.
    fn merge_account(
        &self,
        account: &str,
        groups: &[(RollupKey, Totals)],
        inputs: &[Input],
        paths: &[PathBuf],
        syncer: &Syncer,
    ) -> Result<()> {
        let overflow = || Error::Internal(format!("rollup sum overflow for account {account}"));
        let mut strings = AccountStrings::new(&self.strings);
        let account_id = strings.id(account);
        let mut cursors: Vec<Cursor> = vec![Cursor::memory(groups)];
        // Partial files share a fixed budget of rows in memory, however
        // many spills there were.
        let row_bytes = std::mem::size_of::<(RollupKey, Totals)>();
        let slice = (MERGE_BUDGET_BYTES / row_bytes / inputs.len().max(1)).clamp(1024, parquet_io::ROW_GROUP_ROWS);
        for input in inputs {
            cursors.push(Cursor::input(input, slice)?);
        }
        let mut outputs: Vec<Output> = paths.iter().map(|p| Output::create(p)).collect::<Result<_>>()?;
        let day = *crate::store::GRAINS.last().unwrap_or(&86_400);
        // The day's rows as read, sorted once by (order, slot), then summed
        // at every grain from that one order; the buffers are kept from day
        // to day.
        let mut day_rows = DayRows::default();
        let mut scratch = DayScratch::default();
        loop {
            let mut first: Option<i64> = None;
            for cursor in cursors.iter_mut() {
                if let Some(slot) = cursor.peek_slot(&mut strings, account_id)? {
                    first = Some(first.map_or(slot, |f| f.min(slot)));
                }
            }
            let Some(first) = first else { break };
            let start = first - first.rem_euclid(day);
            day_rows.rows.clear();
            for cursor in cursors.iter_mut() {
                while let Some(row) = cursor.next_before(start + day, &mut strings, account_id)? {
                    day_rows.rows.push(row);
                }
            }
            {
                let ranks = strings.ranks();
                let rank = |id: u32| ranks.get(id as usize).copied().unwrap_or(u32::MAX);
                day_rows.orders.clear();
                day_rows.orders.extend(day_rows.rows.iter().map(|(key, _)| key.order().map(rank).packed()));
            }
            sort_day(&day_rows, start, &mut scratch.keys, &mut scratch.sorted)?;
            for (output, grain) in outputs.iter_mut().zip(crate::store::GRAINS) {
                sum_grain(start, grain, &mut scratch, &mut output.buffer, &overflow)?;
                output.write_full(account, &strings)?;
            }
        }
        for output in outputs {
            output.finish(account, &strings, syncer)?;
        }
        Ok(())
    }
}

/// Rollup rows of one account and day, each with its report order packed
/// into one integer ([`RollupKey::order`], `Order::packed`).
#[derive(Default)]
struct DayRows {
    rows: Vec<(RollupKey, Totals)>,
    orders: Vec<u128>,
}

/// `Order::packed` takes 121 bits; the 15-minute slot in the day the 7
/// below them in [`sort_day`]'s keys.
const ORDER_BITS: u32 = 121;

/// Bits of a 15-minute slot in the day in [`sort_day`]'s keys.
const DAY_SLOT_BITS: u32 = 128 - ORDER_BITS;

/// 15-minute slots in a day (at most `1 << DAY_SLOT_BITS`).
const SLOTS_A_DAY: u128 = 86_400 / crate::store::SLOT_SECONDS as u128;
const _: () = assert!(SLOTS_A_DAY <= 1 << DAY_SLOT_BITS);

/// The buffers of [`sort_day`] and [`sum_grain`], kept from day to day.
#[derive(Default)]
struct DayScratch {
    /// Each row's (order, 15-minute slot in the day) as one integer, and
    /// its position; sorted.
    keys: DayKeys,
    /// The day's rows in the order of `keys`: gathered once, so that
    /// each grain's sum reads them in sequence (two passes of random
    /// reads into the day were an eighth of the merge's own time).
    sorted: Vec<(RollupKey, Totals)>,
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
struct DayKeys {
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
fn sort_day(input: &DayRows, start: i64, keys: &mut DayKeys, sorted: &mut Vec<(RollupKey, Totals)>) -> Result<()> {
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
fn sort_keyed<K: Ord>(
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
fn sum_grain(
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
struct DayGrain {
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

/// The shared interner of a run, plus the strings of one account's older
/// files that this ingest has not seen (ids after the shared ones).
struct AccountStrings<'a> {
    shared: &'a Interner,
    extra: Interner,
    ranks: std::cell::RefCell<Vec<u32>>,
}

impl<'a> AccountStrings<'a> {
    fn new(shared: &'a Interner) -> AccountStrings<'a> {
        AccountStrings { shared, extra: Interner::default(), ranks: Default::default() }
    }

    fn id(&mut self, text: &str) -> u32 {
        match self.shared.lookup(text) {
            Some(id) => id,
            None => (self.shared.len() as u32) + self.extra.intern(text),
        }
    }

    fn text(&self, id: u32) -> &str {
        match (id as usize).checked_sub(self.shared.len()) {
            Some(i) => self.extra.get(i as u32),
            None => self.shared.get(id),
        }
    }

    /// The rank of every string id in byte order of the strings (sorted
    /// again only when strings were added since the last call).
    fn ranks(&self) -> std::cell::Ref<'_, Vec<u32>> {
        let n = self.shared.len() + self.extra.len();
        if self.ranks.borrow().len() != n {
            *self.ranks.borrow_mut() = intern::ranks(n, |id| self.text(id));
        }
        self.ranks.borrow()
    }

    /// Rows of `account` as the writer takes them (with their string ids).
    fn refs<'s>(
        &'s self,
        account: &'s str,
        rows: &'s [(RollupKey, Totals)],
    ) -> impl Iterator<Item = KeyedRollup<'s>> + 's {
        rows.iter().map(move |(key, totals)| KeyedRollup {
            row: RollupRef {
                auth_id: account,
                subaccount: self.text(key.subaccount),
                slot: key.slot,
                product: key.product,
                type_: self.text(key.type_),
                country: key.country,
                direction: key.direction,
                code: self.text(key.code),
                totals: *totals,
            },
            ids: [key.account, key.subaccount, key.type_, key.code],
        })
    }
}

/// One input of an account's merge: the in-memory groups, or a rollup file
/// read a slice of rows at a time.
struct Cursor<'g> {
    rows: std::borrow::Cow<'g, [(RollupKey, Totals)]>,
    at: usize,
    /// The file, its row count and the next row to read.
    file: Option<(PathBuf, usize, usize)>,
    /// Or a run of a partial file of this run (read around the page cache:
    /// it is read once, right after it was written the same way).
    partial: Option<Partial>,
    /// Rows read at a time from a partial file.
    slice: usize,
}

/// The rows of a partial file's run not read yet.
#[derive(Debug)]
struct Partial {
    path: PathBuf,
    file: crate::direct::DirectReader,
    /// What a slice is read into.
    buffer: crate::direct::AlignedBuffer,
    /// The offset of the next row.
    at: u64,
    /// The rows left.
    left: u64,
    /// The bytes of a row.
    row_bytes: usize,
}

impl<'g> Cursor<'g> {
    fn memory(rows: &'g [(RollupKey, Totals)]) -> Cursor<'g> {
        Cursor { rows: std::borrow::Cow::Borrowed(rows), at: 0, file: None, partial: None, slice: 0 }
    }

    /// A published rollup file, or a run of a partial file of this run.
    fn input(input: &Input, slice: usize) -> Result<Cursor<'g>> {
        let rows = std::borrow::Cow::Owned(Vec::new());
        match input {
            Input::Run(run) => {
                let path = &run.path;
                let file = crate::direct::DirectReader::open(path).map_err(|e| Error::io(path, e))?;
                // A slice, or the whole run when it is shorter (the buffer
                // is zeroed when made: no more of it than is read).
                let most = (slice.max(1) as u64).min(run.rows.max(1)) as usize;
                let buffer = crate::direct::AlignedBuffer::for_reads(most * run.row_bytes);
                let at = run.first * run.row_bytes as u64;
                let (left, row_bytes) = (run.rows, run.row_bytes);
                let partial = Some(Partial { path: path.to_owned(), file, buffer, at, left, row_bytes });
                Ok(Cursor { rows, at: 0, file: None, partial, slice })
            }
            Input::File(path) => {
                let n_rows = parquet_io::count_rows(path)?;
                let file = Some((path.to_owned(), n_rows, 0));
                Ok(Cursor { rows, at: 0, file, partial: None, slice })
            }
        }
    }

    /// The slot of the next row, reading the next slice when needed.
    fn peek_slot(&mut self, strings: &mut AccountStrings<'_>, account: u32) -> Result<Option<i64>> {
        if self.at == self.rows.len() {
            self.load(strings, account)?;
        }
        Ok(self.rows.get(self.at).map(|(key, _)| key.slot))
    }

    /// The next row if its slot is before `end`.
    fn next_before(
        &mut self,
        end: i64,
        strings: &mut AccountStrings<'_>,
        account: u32,
    ) -> Result<Option<(RollupKey, Totals)>> {
        match self.peek_slot(strings, account)? {
            Some(slot) if slot < end => {
                self.at += 1;
                Ok(Some(self.rows[self.at - 1]))
            }
            _ => Ok(None),
        }
    }

    fn load(&mut self, strings: &mut AccountStrings<'_>, account: u32) -> Result<()> {
        if let Some(Partial { path, file, buffer, at, left, row_bytes }) = &mut self.partial {
            let n = (*left).min(self.slice.max(1) as u64);
            // One read per slice, into the reader's buffer.
            let len = n as usize * *row_bytes;
            let bytes = file.read_at(buffer, *at, len).map_err(|e| Error::io(&*path, e))?;
            *at += len as u64;
            let mut rows = match std::mem::take(&mut self.rows) {
                std::borrow::Cow::Owned(rows) => rows,
                std::borrow::Cow::Borrowed(_) => Vec::new(),
            };
            rows.clear();
            rows.reserve(n as usize);
            let broken = || Error::io(&*path, "not a partial rollup file");
            if *row_bytes == NARROW_BYTES {
                for row in bytes.as_chunks::<NARROW_BYTES>().0 {
                    rows.push(decode_partial(row, account).ok_or_else(broken)?);
                }
            } else {
                for row in bytes.as_chunks::<WIDE_BYTES>().0 {
                    rows.push(decode_partial(row, account).ok_or_else(broken)?);
                }
            }
            *left -= n;
            self.rows = std::borrow::Cow::Owned(rows);
            self.at = 0;
            return Ok(());
        }
        let Some((path, n_rows, next)) = &mut self.file else { return Ok(()) };
        if *next >= *n_rows {
            return Ok(());
        }
        let frame = rollup::read_rollup_slice(path, *next, parquet_io::ROW_GROUP_ROWS)?;
        *next += frame.height().max(1);
        let mut rows = Vec::with_capacity(frame.height());
        let mut last = i64::MIN;
        let mut sorted = true;
        rollup::for_each_rollup_in(path, &frame, |row| {
            // The merge sums a day's rows by 15-minute slot: a slot off that
            // grid is a damaged file (named here), not a wrong sum later.
            if row.slot.rem_euclid(crate::store::SLOT_SECONDS) != 0 {
                let slot = row.slot;
                return Err(Error::io(&*path, format!("rollup slot_start {slot} is not on the 15-minute grid")));
            }
            let key = RollupKey {
                account,
                subaccount: strings.id(row.subaccount),
                slot: row.slot,
                product: row.product,
                type_: strings.id(row.type_),
                country: row.country,
                direction: row.direction,
                code: strings.id(row.code),
            };
            sorted &= row.slot >= last;
            last = row.slot;
            rows.push((key, row.totals));
            Ok(())
        })?;
        if !sorted || rows.first().zip(self.rows.last()).is_some_and(|(a, b)| a.0.slot < b.0.slot) {
            return Err(Error::io(&*path, "rollup rows are not sorted by slot"));
        }
        self.rows = std::borrow::Cow::Owned(rows);
        self.at = 0;
        Ok(())
    }
}

/// What a spill's partial files need of their shard: its strings (each
/// run's account) and its files still being written.
struct Spill<'s> {
    strings: &'s Interner,
    writing: &'s mut Vec<(PathBuf, crate::direct::Written)>,
}

impl Spill<'_> {
    /// Writes `rows` (sorted by account, then slot) to a new partial file
    /// at `path` in rows of `row_bytes`, `sorted` telling each row's
    /// account through `account`; each account's run.
    fn write<'r, S: PartialSums + 'r, T>(
        &mut self,
        path: &Path,
        mut rows: impl Iterator<Item = &'r (RollupKey, S)>,
        sorted: &[T],
        account: impl Fn(&T) -> u32,
        row_bytes: usize,
    ) -> Result<Vec<(String, Run)>> {
        create_parent(path)?;
        // Around the page cache: written once, read back once.
        let mut out = crate::direct::DirectWriter::scratch(path).map_err(|e| Error::io(path, e))?;
        let ends = account_ends(sorted, &account);
        let starts = std::iter::once(0).chain(ends.iter().copied());
        let mut runs = Vec::new();
        for (start, &end) in starts.zip(&ends) {
            let id = account(&sorted[start]);
            let run = rows.by_ref().take(end - start);
            write_partial(&mut out, run, row_bytes).map_err(|e| Error::io(path, e))?;
            let run = Run { path: path.to_owned(), first: start as u64, rows: (end - start) as u64, row_bytes };
            runs.push((self.strings.get(id).to_owned(), run));
        }
        // The batch goes on while the last blocks reach the device.
        self.writing.push((path.to_owned(), out.finish_behind()));
        Ok(runs)
    }
}

/// Memory for the slices of an account's partial files during its merge.
const MERGE_BUDGET_BYTES: usize = 128 << 20;

/// Bytes of one row of a partial file whose sums all fit 64 bits.
const NARROW_BYTES: usize = 64;

/// Bytes of one row of a partial file with a sum past 64 bits.
const WIDE_BYTES: usize = 96;

/// Sums as a partial file holds them ([`write_partial`]).
trait PartialSums: Copy {
    /// Puts the rows' count and sums at bytes 24.. of `b`: as 64-bit
    /// integers in a row of [`NARROW_BYTES`] (an error if one does not
    /// fit), as 128-bit ones in a row of [`WIDE_BYTES`].
    fn put(&self, b: &mut [u8; WIDE_BYTES], row_bytes: usize) -> std::io::Result<()>;
}

impl PartialSums for Sums {
    #[inline]
    fn put(&self, b: &mut [u8; WIDE_BYTES], row_bytes: usize) -> std::io::Result<()> {
        if row_bytes != NARROW_BYTES {
            return self.wide().put(b, row_bytes);
        }
        b[24..32].copy_from_slice(&self.records.to_le_bytes());
        b[32..40].copy_from_slice(&self.units.to_le_bytes());
        b[40..48].copy_from_slice(&self.duration.to_le_bytes());
        b[48..56].copy_from_slice(&self.amount.to_le_bytes());
        b[56..64].copy_from_slice(&self.surcharge.to_le_bytes());
        Ok(())
    }
}

impl PartialSums for Totals {
    fn put(&self, b: &mut [u8; WIDE_BYTES], row_bytes: usize) -> std::io::Result<()> {
        if row_bytes == NARROW_BYTES {
            let narrow =
                Sums::narrow(self).ok_or_else(|| std::io::Error::other("a sum past 64 bits in a narrow row"))?;
            return narrow.put(b, row_bytes);
        }
        b[24..32].copy_from_slice(&self.records.to_le_bytes());
        b[32..48].copy_from_slice(&self.units.to_le_bytes());
        b[48..64].copy_from_slice(&self.duration.to_le_bytes());
        b[64..80].copy_from_slice(&self.amount.to_le_bytes());
        b[80..96].copy_from_slice(&self.surcharge.to_le_bytes());
        Ok(())
    }
}

/// Writes rollup rows of one account to a partial file: rows of
/// `row_bytes` in this run's string ids (little-endian: subaccount, type,
/// code as u32; product, direction, country as bytes; slot; records; then
/// units, duration, amount, surcharge as 64-bit integers in a row of
/// [`NARROW_BYTES`] (each must fit), as 128-bit ones in a row of
/// [`WIDE_BYTES`]).
fn write_partial<'r, S: PartialSums + 'r>(
    out: &mut impl std::io::Write,
    rows: impl Iterator<Item = &'r (RollupKey, S)>,
    row_bytes: usize,
) -> std::io::Result<()> {
    for (key, sums) in rows {
        let mut b = [0u8; WIDE_BYTES];
        b[0..4].copy_from_slice(&key.subaccount.to_le_bytes());
        b[4..8].copy_from_slice(&key.type_.to_le_bytes());
        b[8..12].copy_from_slice(&key.code.to_le_bytes());
        b[12] = Product::ALL.iter().position(|p| *p == key.product).unwrap_or(0) as u8;
        b[13] = match key.direction {
            None => 0,
            Some(Direction::Inbound) => 1,
            Some(Direction::Outbound) => 2,
        };
        if let Some(country) = key.country {
            b[14..16].copy_from_slice(&country.as_str().as_bytes()[..2]);
        }
        b[16..24].copy_from_slice(&key.slot.to_le_bytes());
        sums.put(&mut b, row_bytes)?;
        out.write_all(&b[..row_bytes])?;
    }
    Ok(())
}

/// One row of a partial file of rows of `N` bytes, [`NARROW_BYTES`] or
/// [`WIDE_BYTES`] (see [`write_partial`]).
fn decode_partial<const N: usize>(b: &[u8; N], account: u32) -> Option<(RollupKey, Totals)> {
    let word = |i: usize| -> [u8; 8] { b[i..i + 8].try_into().unwrap_or([0; 8]) };
    let wide = |i: usize| -> [u8; 16] { b[i..i + 16].try_into().unwrap_or([0; 16]) };
    let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let key = RollupKey {
        account,
        subaccount: u32_at(0),
        type_: u32_at(4),
        code: u32_at(8),
        product: *Product::ALL.get(b[12] as usize)?,
        direction: match b[13] {
            0 => None,
            1 => Some(Direction::Inbound),
            _ => Some(Direction::Outbound),
        },
        country: if b[14] == 0 { None } else { Some(Country::parse(&b[14..16])?) },
        slot: i64::from_le_bytes(word(16)),
    };
    let records = u64::from_le_bytes(word(24));
    let totals = match N {
        NARROW_BYTES => Totals {
            records,
            units: u64::from_le_bytes(word(32)).into(),
            duration: i64::from_le_bytes(word(40)).into(),
            amount: i64::from_le_bytes(word(48)).into(),
            surcharge: i64::from_le_bytes(word(56)).into(),
        },
        WIDE_BYTES => Totals {
            records,
            units: u128::from_le_bytes(wide(32)),
            duration: i128::from_le_bytes(wide(48)),
            amount: i128::from_le_bytes(wide(64)),
            surcharge: i128::from_le_bytes(wide(80)),
        },
        _ => return None,
    };
    Some((key, totals))
}

/// The rows of one grain, buffered to whole row groups before writing.
struct Output {
    writer: rollup::RollupWriter,
    buffer: Vec<(RollupKey, Totals)>,
}

impl Output {
    fn create(path: &Path) -> Result<Output> {
        // Room for a row group and a day after it: the buffer seldom grows
        // (growing by doubling copied each account's rows a second time).
        let buffer = Vec::with_capacity(parquet_io::ROW_GROUP_ROWS + parquet_io::ROW_GROUP_ROWS / 4);
        Ok(Output { writer: rollup::RollupWriter::create(path)?, buffer })
    }

    /// Writes the rows added to `buffer` as a row group once they fill one.
    fn write_full(&mut self, account: &str, strings: &AccountStrings<'_>) -> Result<()> {
        if self.buffer.len() >= parquet_io::ROW_GROUP_ROWS {
            self.writer.write_rows(self.buffer.len(), strings.refs(account, &self.buffer))?;
            self.buffer.clear();
        }
        Ok(())
    }

    fn finish(mut self, account: &str, strings: &AccountStrings<'_>, syncer: &Syncer) -> Result<()> {
        if !self.buffer.is_empty() {
            self.writer.write_rows(self.buffer.len(), strings.refs(account, &self.buffer))?;
        }
        self.writer.finish(syncer)
    }
}

/// A file-name-safe folder for an account: a readable prefix and a hash
/// (ids may hold any character but control characters).
fn account_folder(account: &str) -> String {
    let readable: String =
        account.chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').take(40).collect();
    let hash = xxhash_rust::xxh3::xxh3_64(account.as_bytes());
    format!("{readable}-{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The radix sort orders groups as the comparison sort does, ties
        /// in their first order; accounts and slots too far apart for it
        /// (or a slot off the grid) take the comparison sort.
        #[test]
        fn sorted_order_is_the_comparison_sort(
            keys in proptest::collection::vec((0u32..6, -3i64..3000, proptest::bool::ANY), 0..3000),
            far in proptest::sample::select(vec![0i64, 1, 900 << 32, 1 << 62]),
        ) {
            let groups: Vec<(RollupKey, Totals)> = keys
                .iter()
                .map(|&(account, slot, off)| {
                    let key = RollupKey {
                        account: account * 1000,
                        subaccount: 0,
                        slot: slot * 900 + if off { far } else { 0 },
                        product: Product::Voice,
                        type_: 0,
                        country: None,
                        direction: None,
                        code: 0,
                    };
                    (key, Totals { records: 1, units: 1, duration: 0, amount: 0, surcharge: 0 })
                })
                .collect();
            let mut expected: Vec<u128> = groups
                .iter()
                .enumerate()
                .map(|(i, (key, _))| (key.account as u128) << 96 | ((key.slot as u64 ^ 1 << 63) as u128) << 32 | i as u128)
                .collect();
            expected.sort_unstable();
            proptest::prop_assert_eq!(sorted_order(&groups), expected);
        }
    }

    /// Rollup rows come out of [`sum_grain`] by slot, then in the report's
    /// order of their text ([`Order`] over the strings, an empty subaccount
    /// or code absent), whether a string is the run's or an older file's;
    /// rows of the same slot and fields are one row, their totals added;
    /// at a coarser grain, slots are cut to it first.
    #[test]
    fn sum_grain_sorts_by_slot_then_the_report_order_and_sums_equal_keys() {
        let mut shared = Interner::default();
        for text in ["sms", "", "S2", "voice", "4000", "Number Charges", "é"] {
            shared.intern(text);
        }
        let mut strings = AccountStrings::new(&shared);
        let older = ["S1", "30007", "mms", "A", "voice", "3010"];
        let mut texts: Vec<u32> = older.iter().map(|text| strings.id(text)).collect();
        texts.extend(0..shared.len() as u32);
        let countries = [None, Country::parse(b"US"), Country::parse(b"DE"), Country::parse(b"UA")];
        let directions = [None, Some(Direction::Inbound), Some(Direction::Outbound)];
        let start = 86_400 * 20_000;
        let mut rows: Vec<(RollupKey, Totals)> = Vec::new();
        for (i, n) in crate::aggregate::order::walk(3000).enumerate() {
            let pick = |shift: u32, len: usize| (n >> shift) as usize % len;
            let key = RollupKey {
                account: 0,
                subaccount: texts[pick(4, texts.len())],
                slot: start + 900 * pick(8, 6) as i64,
                product: Product::ALL[pick(0, Product::ALL.len())],
                type_: texts[pick(12, 3)],
                country: countries[pick(20, countries.len())],
                direction: directions[pick(24, directions.len())],
                code: texts[pick(28, 2)],
            };
            rows.push((key, Totals { records: 1, amount: i as i128, ..Totals::default() }));
        }
        let by_text = |key: &RollupKey, grain: i64| {
            let text = |id: u32| Some(strings.text(id)).filter(|text| !text.is_empty());
            let order = Order {
                product: key.product,
                type_: strings.text(key.type_),
                subaccount: text(key.subaccount),
                country: key.country,
                direction: key.direction,
                code: text(key.code),
            };
            (key.slot - (key.slot - start).rem_euclid(grain), order)
        };
        let ranks = strings.ranks().clone();
        let orders: Vec<u128> = rows.iter().map(|(key, _)| key.order().map(|id| ranks[id as usize]).packed()).collect();
        // These few strings' ranks fit 64-bit keys. The same orders with
        // 2^32 added to every type rank order alike, but take 128-bit keys:
        // both give the same sums.
        let wide: Vec<u128> =
            orders.iter().map(|order| order + (1 << (crate::aggregate::order::PACKED_FIELDS[1].0 + 32))).collect();
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

    /// A partial row reads back as written, narrow when its sums fit 64
    /// bits and wide otherwise; a narrow row refuses a sum past them, and
    /// bytes of another width are no row. The fold's [`Sums`] write what
    /// the same [`Totals`] write.
    #[test]
    fn partial_rows_read_back_narrow_or_wide() {
        let key = RollupKey {
            account: 7,
            subaccount: 3,
            slot: -900,
            product: Product::Voice,
            type_: 1,
            country: Country::parse(b"DE"),
            direction: Some(Direction::Outbound),
            code: 2,
        };
        let small = Totals { records: 2, units: 3, duration: -4, amount: i64::MAX.into(), surcharge: i64::MIN.into() };
        let large = Totals { amount: i128::from(i64::MAX) + 1, ..small };
        for (totals, row_bytes) in [(small, NARROW_BYTES), (large, WIDE_BYTES), (small, WIDE_BYTES)] {
            let mut bytes = Vec::new();
            write_partial(&mut bytes, [(key, totals)].iter(), row_bytes).expect("written");
            assert_eq!(bytes.len(), row_bytes);
            let decoded = match row_bytes {
                NARROW_BYTES => bytes.as_chunks::<NARROW_BYTES>().0.first().and_then(|row| decode_partial(row, 7)),
                _ => bytes.as_chunks::<WIDE_BYTES>().0.first().and_then(|row| decode_partial(row, 7)),
            };
            assert_eq!(decoded, Some((key, totals)));
        }
        assert_eq!(decode_partial(&[0u8; 80], 7), None, "no row is 80 bytes");
        assert!(Sums::narrow(&large).is_none());
        assert!(write_partial(&mut Vec::new(), [(key, large)].iter(), NARROW_BYTES).is_err());
        // The fold's own sums write the same bytes as the same totals do.
        let sums = Sums::narrow(&small).expect("fits");
        for row_bytes in [NARROW_BYTES, WIDE_BYTES] {
            let (mut of_sums, mut of_totals) = (Vec::new(), Vec::new());
            write_partial(&mut of_sums, [(key, sums)].iter(), row_bytes).expect("written");
            write_partial(&mut of_totals, [(key, small)].iter(), row_bytes).expect("written");
            assert_eq!(of_sums, of_totals);
        }
    }

    /// A published rollup file whose slot is off the 15-minute grid (a
    /// damaged store, or a file from another writer) is an error naming the
    /// file and the slot when the merge reads it, not an internal error
    /// later; a file on the grid reads back.
    #[test]
    fn a_published_slot_off_the_grid_names_its_file() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let totals = Totals { records: 1, units: 1, duration: 0, amount: 5, surcharge: 0 };
        let row = |slot| rollup::tests::charge_row(slot, totals);
        let shared = Interner::default();
        for (name, slot, ok) in
            [("on.parquet", 1_800, true), ("off.parquet", 1_860, false), ("neg.parquet", -60, false)]
        {
            let path = dir.path().join(name);
            let mut writer = rollup::RollupWriter::create(&path).expect("created");
            writer.write(&[row(0), row(slot)]).expect("written");
            writer.finish(&Syncer::at_once()).expect("finished");
            let mut strings = AccountStrings::new(&shared);
            let mut cursor = Cursor::input(&Input::File(path.clone()), 1024).expect("opened");
            match cursor.peek_slot(&mut strings, 0) {
                Ok(first) => {
                    assert!(ok, "{name} read");
                    assert_eq!(first, Some(0));
                }
                Err(error) => {
                    assert!(!ok, "{name}: {error}");
                    // The file, then the operating system's or our message.
                    let error = format!(
                        "{error}: {}",
                        std::error::Error::source(&error).map(|s| s.to_string()).unwrap_or_default()
                    );
                    assert!(error.contains(name) && error.contains(&format!("slot_start {slot}")), "{error}");
                    assert!(error.contains("15-minute grid"), "{error}");
                }
            }
        }
    }

    #[test]
    fn account_folders_are_safe_and_distinct() {
        let a = account_folder("MA001");
        let b = account_folder("../MA001/x");
        assert!(a.starts_with("MA001-"));
        assert!(!b.contains('/') && !b.contains('.'));
        assert_ne!(account_folder("a b"), account_folder("a_b"));
    }
}
