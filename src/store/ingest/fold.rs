//! The fold of an ingest's new rows into rollup groups ([`Rollups`]):
//! groups keyed by interned strings and the 15-minute slot, in shards by
//! account, each row summed once into its shard (the shards in parallel).
//!
//! 1. [`Rollups::fold_chunks`]: each shard folds its accounts' rows of a
//!    batch, a key computed a few rows ahead so that its slot is in cache.
//! 2. [`Rollups::spill_full`]: a shard past its share of
//!    `--max-rollup-groups` is sorted and written to a partial file
//!    (`spill.rs`), and its table emptied.
//! 3. [`Rollups::write`]: at publish, each touched account's groups, its
//!    partial runs and its published file are merged (`merge.rs`), the
//!    largest accounts first, on plain threads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::chunk::{Chunk, ChunkFold, Row, Texts, AUTH_ID, CODE, SUBACCOUNT, TYPE};
use super::key::{shard_of, Groups, MinusRow, RollupKey, SHARDS};
pub(in crate::store) use super::merge::PublishedTerms;
use super::merge::{account_inputs, publish_account, AccountMerge, Published, RollupFileName};
use super::spill::{account_ends, account_in_order, gather, sorted_order, PartialRun, Spill, NARROW_BYTES, WIDE_BYTES};
use super::strings::SortedStrings;
use super::table::{GroupTable, Sums};
use crate::aggregate::dims::Dims;
use crate::aggregate::Totals;
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::intern::Interner;
use crate::records::accounts::Accounts;
use crate::store::changes::Ledger;
use crate::store::parquet_io::RecordView;
use crate::store::Manifest;

/// Merges at a time in a publish beyond the pool's threads: while a merge
/// waits on the pool for its row groups' encoding, or on the device for
/// its partial files' slices (read around the page cache), another merge
/// computes. Fewer leave the cores idle in those waits; more hold more
/// merges' memory at once for no more speed (re-tune with
/// `bench/ingest-ab.sh`).
const MORE_MERGES: usize = 4;

/// A row's key, its hash and its sums, computed [`KEYS_AHEAD`] rows
/// before they are added.
struct KeyAhead {
    key: RollupKey,
    hash: u64,
    sums: Sums,
}

/// How many rows ahead of its add the fold computes a key and prefetches
/// its slot: far enough that the slot is in cache when the row is added,
/// near enough that it is not evicted before (re-tune with
/// `bench/ingest-ab.sh`).
const KEYS_AHEAD: usize = 8;

/// The sums of one record.
#[inline]
fn sums_of(row: &RecordView<'_>) -> Sums {
    Sums::one(row.record.units, row.record.duration, row.record.amount, row.record.surcharge)
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

/// The rollups of this ingest's new rows, in [`SHARDS`] shards by account:
/// each row is folded once, straight into its account's shard (no
/// per-chunk maps merged afterwards), the shards in parallel.
pub(in crate::store) struct Rollups {
    shards: Vec<Shard>,
    /// Rows that stopped counting (`corrections.rs`), by account: the
    /// merge subtracts each from its group.
    minus: BTreeMap<String, Vec<MinusRow>>,
}

impl Default for Rollups {
    fn default() -> Rollups {
        Rollups { shards: (0..SHARDS).map(|_| Shard::default()).collect(), minus: BTreeMap::new() }
    }
}

impl Rollups {
    /// Subtracts one row, which counted, from its group at publish.
    pub(super) fn subtract(&mut self, row: &RecordView<'_>) -> Result<()> {
        let totals = sums_of(row).wide();
        self.minus.entry(row.record.auth_id.to_owned()).or_default().push(MinusRow {
            slot: crate::store::slot_of(row.record.timestamp.secs),
            product: row.record.product,
            subaccount: row.record.subaccount.to_owned(),
            type_: row.record.type_.to_owned(),
            code: row.record.code.to_owned(),
            country: row.record.country,
            direction: row.record.direction,
            totals,
        });
        Ok(())
    }

    /// Adds one row to its account's group.
    pub(in crate::store) fn add(&mut self, row: &RecordView<'_>) -> Result<()> {
        self.shard(row.record.auth_id).add(row)
    }

    /// Adds rows (`view` of each item of `rows`) to their accounts'
    /// groups, the shards in parallel: each shard its rows, in their order
    /// (the same groups as [`Rollups::add`] of each row), a key computed
    /// [`KEYS_AHEAD`] rows before it is added, as [`Rollups::fold_chunks`]
    /// does.
    pub(in crate::store) fn add_all<T: Sync>(
        &mut self,
        rows: &[T],
        view: impl Fn(&T) -> &RecordView<'_> + Sync,
    ) -> Result<()> {
        let shard_of_row: Vec<u8> = rows.par_iter().map(|row| shard_of(view(row).record.auth_id) as u8).collect();
        // Each shard's rows, by position: one pass, not one per shard.
        let mut by_shard: Vec<Vec<u32>> = vec![Vec::new(); SHARDS];
        for (i, &s) in shard_of_row.iter().enumerate() {
            by_shard[usize::from(s)].push(i as u32);
        }
        let added: Vec<Result<()>> = self
            .shards
            .par_iter_mut()
            .zip(&by_shard)
            .map(|(shard, mine)| {
                let mut ahead = std::collections::VecDeque::with_capacity(KEYS_AHEAD + 1);
                // A shard's rows are scattered through the batch: each row
                // is fetched 2 * KEYS_AHEAD rows before its key is made, and
                // its text KEYS_AHEAD rows before.
                for (n, &i) in mine.iter().enumerate() {
                    if let Some(&far) = mine.get(n + 2 * KEYS_AHEAD) {
                        crate::prefetch::prefetch(&rows[far as usize]);
                    }
                    if let Some(&near) = mine.get(n + KEYS_AHEAD) {
                        let near = view(&rows[near as usize]);
                        crate::prefetch::prefetch(near.record.auth_id);
                        crate::prefetch::prefetch(near.record.code);
                    }
                    let row = view(&rows[i as usize]);
                    let key = shard.key(row);
                    shard.add_key(key, sums_of(row), &mut ahead)?;
                }
                shard.flush(&mut ahead)
            })
            .collect();
        added.into_iter().collect()
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
            .try_for_each(|(s, shard)| shard.spill(&store.join("rollups"), id, s))
    }

    /// Writes every shard's groups to partial files in `folder` (named
    /// from `name`), waits until they are written, and gives each shard's
    /// strings and runs: what another process's [`Rollups::adopt`] merges
    /// (a Spark write task's fold, for the driver's merge).
    pub(in crate::store) fn spill_all(mut self, folder: &Path, name: &str) -> Result<Vec<ShardPart>> {
        let mut parts = Vec::new();
        for (s, shard) in self.shards.iter_mut().enumerate() {
            shard.spill(folder, name, s)?;
            for (path, written) in shard.writing.drain(..) {
                written.wait().map_err(|e| Error::io(&path, e))?;
            }
            if shard.spilled.is_empty() {
                continue;
            }
            let strings = shard.strings.iter().map(str::to_owned).collect();
            let runs = std::mem::take(&mut shard.spilled).into_iter().collect();
            parts.push(ShardPart { shard: s, strings, runs });
        }
        Ok(parts)
    }

    /// Takes in the partial files of another process's fold
    /// ([`Rollups::spill_all`]) in `folder`: their strings are interned
    /// here, and the runs read through that mapping at the merge (which
    /// deletes each file once read: a run naming a file outside `folder` is
    /// refused).
    pub(in crate::store) fn adopt(&mut self, part: ShardPart, folder: &Path) -> Result<()> {
        for run in part.runs.iter().flat_map(|(_, runs)| runs) {
            let inside = run.path.parent() == Some(folder)
                && run.path.file_name().is_some_and(|name| name.to_str().is_some_and(|n| n.ends_with(".bin")));
            if !inside {
                return Err(Error::io(&run.path, format!("a fold's partial file outside {}", folder.display())));
            }
        }
        let shard = self
            .shards
            .get_mut(part.shard)
            .ok_or_else(|| Error::Internal(format!("a fold's shard {} of {SHARDS}", part.shard)))?;
        let ids: std::sync::Arc<[u32]> = part.strings.iter().map(|text| shard.strings.intern(text)).collect();
        for (account, mut runs) in part.runs {
            for run in &mut runs {
                run.ids = Some(ids.clone());
            }
            shard.spilled.entry(account).or_default().extend(runs);
        }
        Ok(())
    }

    /// Merges the new groups into each touched account's rollups and writes
    /// one new file per touched account and grain (accounts in parallel,
    /// whatever their shard); each partial file is deleted as soon as the
    /// last merge that reads it is done.
    ///
    /// An account's published file (listed by `old`) is checked against its
    /// sum before it is read. The change the new groups make to each
    /// account's months (in its zone of `terms.accounts`) is the ledger
    /// returned; the accounts of `terms.changed` are merged too, and their
    /// published rows are booked again: as moved when they fall in another
    /// month, as restated in theirs when the currency changes.
    pub(in crate::store) fn write(
        mut self,
        store: &Path,
        id: &str,
        old: &Manifest,
        manifest: &mut Manifest,
        terms: AccountTerms<'_>,
        syncer: &Syncer,
    ) -> Result<Ledger> {
        let AccountTerms { accounts: zones, changed } = terms;
        for rows in self.minus.values_mut() {
            rows.sort_by_key(|row| row.slot);
        }
        // Each shard's groups by account, and its partial files by account.
        type ShardGroups = (ByAccount, BTreeMap<String, Vec<PartialRun>>);
        let taken: Vec<ShardGroups> = self
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
        for account in self.minus.keys() {
            accounts.entry(account).or_insert((shard_of(account), &[]));
        }
        // (Accounts with rollups in `old` only: `generation::changed_terms`.)
        for account in changed.keys() {
            accounts.entry(account).or_insert((shard_of(account), &[]));
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
        // Each shard's strings sorted once, for all its accounts' merges.
        let sorted: Vec<SortedStrings<'_>> =
            self.shards.par_iter().map(|shard| SortedStrings::new(&shard.strings)).collect();
        let (shards, taken, finished, readers, partial_files) = (&sorted, &taken, &done, &readers, &partial_files);
        let minus = &self.minus;
        let started = std::thread::scope(|scope| -> Result<()> {
            // A partial file is deleted once no merge is left to read it, on
            // a thread of its own: on a file system that discards freed
            // blocks, a deletion waits on the device (0.2 ms a MB here),
            // which the merges need not wait for.
            // Without that thread (none to be had), the partial files are
            // left for the next ingest to collect.
            let (delete, deletions) = std::sync::mpsc::channel::<PathBuf>();
            let _ = crate::threads::spawn_scoped(scope, "telemeter-delete", move || {
                for partial in deletions {
                    // Unpublished scratch files of this run; a leftover is
                    // harmless (the next ingest collects it).
                    let _ = std::fs::remove_file(partial);
                }
            });
            // As many merges as threads can be had: one is enough; with
            // none, the first refusal is the error.
            let mut merges = 0;
            let mut refused = None;
            // The pool's threads and `MORE_MERGES` more (why: its doc).
            for _ in 0..rayon::current_num_threads() + MORE_MERGES {
                // The lock is released inside `next`, before the work.
                let next = || jobs.lock().ok().and_then(|mut jobs| jobs.next());
                let delete = delete.clone();
                let merge = crate::threads::spawn_scoped(scope, "telemeter-merge", move || {
                    while let Some((account, (s, groups))) = next() {
                        let result = account_inputs(store, previous, &taken[s].1, account).and_then(|inputs| {
                            let zone = zones.get(account).and_then(|a| a.timezone).unwrap_or(chrono_tz::UTC);
                            let minus = minus.get(account).map_or(&[][..], |rows| &rows[..]);
                            let published = changed.get(account).copied();
                            let merge = AccountMerge { account, zone, published, groups, inputs, minus };
                            publish_account(&shards[s], store, id, merge, syncer)
                        });
                        if let Ok(mut done) = finished.lock() {
                            done.push((account.to_owned(), result));
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
                match merge {
                    Ok(_) => merges += 1,
                    Err(error) => refused = refused.or(Some(error)),
                }
            }
            // The deleting thread ends when the merges' senders are gone.
            drop(delete);
            match (merges, refused) {
                (0, Some(error)) => Err(error),
                _ => Ok(()),
            }
        });
        started?;
        let mut written: Vec<(String, Result<Published>)> = done.into_inner().unwrap_or_default();
        if written.len() != n_accounts {
            return Err(Error::Internal("a rollup merge thread failed".to_owned()));
        }
        // In account order, whatever order the merges ended in: the first
        // error is the same on every run.
        written.sort_by(|a, b| a.0.cmp(&b.0));
        let mut ledger = Ledger::new();
        for (_, result) in written {
            let Published { files, changes } = result?;
            for RollupFileName { account, grain, name } in files {
                manifest.rollups.entry(account).or_default().insert(grain, name);
            }
            ledger.extend(changes);
        }
        Ok(ledger)
    }
}

/// The accounts' terms a publish books changes by ([`Rollups::write`]):
/// the zones of their months, and the accounts whose zone or currency
/// changes.
pub(in crate::store) struct AccountTerms<'a> {
    /// Each account's zone in the accounts being published (UTC without
    /// one).
    pub(in crate::store) accounts: &'a Accounts,
    /// The accounts whose zone or currency those accounts change, each
    /// with its terms in the published generation.
    pub(in crate::store) changed: &'a BTreeMap<String, PublishedTerms>,
}

/// One shard of a fold written by [`Rollups::spill_all`]: its strings (in
/// id order) and each account's runs in its partial files.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(in crate::store) struct ShardPart {
    shard: usize,
    strings: Vec<String>,
    runs: Vec<(String, Vec<PartialRun>)>,
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

/// The rollups of the accounts of one shard.
#[derive(Default)]
struct Shard {
    strings: Interner,
    groups: GroupTable,
    /// The runs of each account in the partial files written by
    /// [`Shard::spill`].
    spilled: BTreeMap<String, Vec<PartialRun>>,
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
    fn add_key(&mut self, key: RollupKey, sums: Sums, ahead: &mut std::collections::VecDeque<KeyAhead>) -> Result<()> {
        let hash = GroupTable::hash(&key);
        self.groups.prefetch(hash);
        ahead.push_back(KeyAhead { key, hash, sums });
        if ahead.len() > KEYS_AHEAD {
            if let Some(KeyAhead { key, hash, sums }) = ahead.pop_front() {
                self.groups.add(key, hash, &sums, rollup_overflow)?;
            }
        }
        Ok(())
    }

    /// Adds the rows [`Shard::add_key`] still holds.
    fn flush(&mut self, ahead: &mut std::collections::VecDeque<KeyAhead>) -> Result<()> {
        for KeyAhead { key, hash, sums } in ahead.drain(..) {
            self.groups.add(key, hash, &sums, rollup_overflow)?;
        }
        Ok(())
    }

    /// The key of `row`'s group (its slot is the 15-minute slot of
    /// `row.secs`).
    #[inline]
    fn key(&mut self, row: &RecordView<'_>) -> RollupKey {
        // Interned in this order: account, subaccount, type, code.
        let (account, subaccount) = (self.intern(0, row.record.auth_id), self.intern(1, row.record.subaccount));
        let (type_, code) = (self.intern(2, row.record.type_), self.intern(3, row.record.code));
        let dims = Dims {
            product: row.record.product,
            type_,
            subaccount,
            country: row.record.country,
            direction: row.record.direction,
            code,
        };
        RollupKey { account, slot: crate::store::slot_of(row.record.timestamp.secs), dims }
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
        // Interned in this order: account, subaccount, type, code.
        let (account, subaccount, type_, code) = (id(AUTH_ID), id(SUBACCOUNT), id(TYPE), id(CODE));
        let dims =
            Dims { product: row.product, type_, subaccount, country: row.country, direction: row.direction, code };
        RollupKey { account, slot: crate::store::slot_of(row.secs), dims }
    }

    /// Adds one row to its group.
    fn add(&mut self, row: &RecordView<'_>) -> Result<()> {
        let key = self.key(row);
        self.groups.add(key, GroupTable::hash(&key), &sums_of(row), rollup_overflow)
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
    /// rows are one [`PartialRun`] of the file (one file per spill, not per
    /// account and spill: creating and deleting hundreds of small files
    /// took a tenth of a second). The table's sums past 64 bits, if any,
    /// go to a second file of [`WIDE_BYTES`] rows. The files go to
    /// `folder`, named from `name` (the store's `rollups/` and the ingest
    /// id, or a Spark write task's own).
    fn spill(&mut self, folder: &Path, name: &str, shard: usize) -> Result<()> {
        let groups = self.groups.groups();
        let mut spill = Spill { strings: &self.strings, writing: &mut self.writing };
        let mut runs = Vec::new();
        if !groups.is_empty() {
            let order = sorted_order(groups);
            let path = folder.join(format!("{name}-part-{shard:02}-{:05}.bin", self.spills));
            runs = spill.write(&path, gather(groups, &order), &order, account_in_order, NARROW_BYTES)?;
        }
        if !self.groups.wide().is_empty() {
            let mut wide = self.groups.wide().to_vec();
            wide.sort_by_key(|(key, _)| (key.account, key.slot));
            let path = folder.join(format!("{name}-part-{shard:02}-{:05}-wide.bin", self.spills));
            runs.extend(spill.write(&path, wide.iter(), &wide, |(key, _)| key.account, WIDE_BYTES)?);
        }
        self.spills += 1;
        self.groups.clear();
        for (account, run) in runs {
            self.spilled.entry(account).or_default().push(run);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Country, Direction, Product};

    /// Row `i`: a few accounts, subaccounts, types and codes, each met
    /// first at a different row, over a few days of slots.
    fn view(i: u64) -> RecordView<'static> {
        const ACCOUNTS: [&str; 3] = ["MA1", "MA22", "MA333"];
        const SUBACCOUNTS: [&str; 3] = ["", "SA1", "SA2"];
        const TYPES: [&str; 2] = ["pstn", "app"];
        const CODES: [&str; 4] = ["4000", "5010", "", "3000"];
        RecordView {
            record: crate::records::Record {
                record_id: "r",
                auth_id: ACCOUNTS[(i % 3) as usize],
                subaccount: SUBACCOUNTS[(i / 3 % 3) as usize],
                timestamp: crate::time::Instant { secs: 1_795_000_000 + (i as i64 * 7919) % 400_000, nanos: 0 },
                product: if i.is_multiple_of(5) { Product::Message } else { Product::Voice },
                type_: TYPES[(i / 7 % 2) as usize],
                direction: if i.is_multiple_of(2) { Some(Direction::Inbound) } else { None },
                country: Country::parse(if i.is_multiple_of(4) { b"US" } else { b"IN" }),
                units: i % 13,
                duration: (i % 17) as i64,
                amount: (i * 1_000_003) as i64,
                surcharge: (i % 3) as i64,
                code: CODES[(i / 11 % 4) as usize],
                revision: 0,
            },
            source_file: "",
            source_line: i,
        }
    }

    /// Every file under `dir`, by path relative to it, with its bytes.
    fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut found = Vec::new();
        crate::records::files::walk(dir, &mut found).expect("walked");
        found
            .into_iter()
            .map(|path| {
                let bytes = std::fs::read(&path).expect("read");
                (path.strip_prefix(dir).expect("inside").to_owned(), bytes)
            })
            .collect()
    }

    /// Rollups folded in parts by other processes (each with its own
    /// strings, met in another order) and taken in by `adopt` write the
    /// files one fold of every row writes.
    #[test]
    fn adopted_parts_write_the_rollups_of_one_fold() {
        let rows: Vec<RecordView<'static>> = (0..2000).map(view).collect();
        let write = |rollups: Rollups| {
            let store = tempfile::tempdir().expect("tempdir");
            let mut manifest = Manifest::default();
            let syncer = Syncer::at_once();
            let (old, zones) = (Manifest::default(), Accounts::default());
            rollups
                .write(
                    store.path(),
                    "t",
                    &old,
                    &mut manifest,
                    AccountTerms { accounts: &zones, changed: &BTreeMap::new() },
                    &syncer,
                )
                .expect("written");
            (files(&store.path().join("rollups")), manifest.rollups)
        };
        let mut whole = Rollups::default();
        whole.add_all(&rows, |row| row).expect("folded");
        let expected = write(whole);
        assert!(!expected.0.is_empty());

        let folder = tempfile::tempdir().expect("tempdir");
        let mut adopted = Rollups::default();
        // Parts of unequal sizes, the later rows first: each part meets its
        // strings in another order than the whole fold.
        for (part, range) in [(0, 1500..2000), (1, 0..700), (2, 700..1500)] {
            let mut rollups = Rollups::default();
            let mine: Vec<RecordView<'static>> = rows[range].iter().rev().copied().collect();
            rollups.add_all(&mine, |row| row).expect("folded");
            for shard in rollups.spill_all(folder.path(), &part.to_string()).expect("spilled") {
                // As a write task hands it over: through JSON.
                let text = serde_json::to_string(&shard).expect("json");
                // A run whose file is elsewhere (the merge deletes what it
                // reads) is refused.
                let elsewhere = text.replace(folder.path().to_str().expect("a UTF-8 path"), "/tmp/elsewhere");
                let refused =
                    Rollups::default().adopt(serde_json::from_str(&elsewhere).expect("read back"), folder.path());
                assert!(refused.is_err(), "a partial file outside the folder");
                adopted.adopt(serde_json::from_str(&text).expect("read back"), folder.path()).expect("adopted");
            }
        }
        assert_eq!(write(adopted), expected);
    }
}
