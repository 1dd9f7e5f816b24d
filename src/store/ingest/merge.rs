//! The merge of one account's rollups at publish: its groups in memory,
//! its runs of this ingest's partial files and its published finest-grain
//! file, each read through a [`Cursor`] a slice at a time, merged one UTC
//! day at a time (`day.rs`), and written at every grain in the rollup
//! file's row order ([`Output`]). The rows of this ingest (not those of
//! the published file) are also summed by month of the account's time
//! zone and product ([`MonthSums`]): the ingest's ledger of changes
//! (`store::changes`). When the ingest changes the account's zone, its
//! published rows that fall in another month are booked as moved.

use std::path::{Path, PathBuf};

use super::day::{sort_day, sum_grain, DayRows, DayScratch};
use super::key::{Groups, MinusRow, RollupKey};
use super::spill::{decode_partial, PartialRun, NARROW_BYTES, WIDE_BYTES};
use super::strings::{AccountStrings, SortedStrings};
use crate::aggregate::dims::Dims;
use crate::aggregate::Totals;
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::records::Product;
use crate::store::changes::{self, overflow, Change, ChangeKey, DayMonths, Ledger, Month};
use crate::store::parquet_io;
use crate::store::rollup;
use crate::store::{create_parent, Manifest};

/// The rollup files to merge for `account`: its partial files of this
/// run (`spilled`), and its published finest-grain file (`previous`) if it
/// has one. The finest grain holds everything: the coarser files are
/// derived from it, not read.
pub(super) fn account_inputs(
    store: &Path,
    previous: &Manifest,
    spilled: &std::collections::BTreeMap<String, Vec<PartialRun>>,
    account: &str,
) -> Result<Vec<Input>> {
    let mut inputs: Vec<Input> =
        spilled.get(account).map_or(Vec::new(), |runs| runs.iter().cloned().map(Input::Partial).collect());
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

/// An input of an account's merge besides its groups in memory.
pub(super) enum Input {
    /// Its rows in a partial file of this run.
    Partial(PartialRun),
    /// Its published finest-grain rollup file.
    File(PathBuf),
}

/// A rollup file [`publish_account`] wrote: its account, grain (seconds)
/// and name relative to the store.
pub(super) struct RollupFileName {
    pub(super) account: String,
    pub(super) grain: i64,
    pub(super) name: String,
}

/// What [`publish_account`] wrote for one account: its rollup files, and
/// the change this ingest's rows made to its months.
pub(super) struct Published {
    pub(super) files: Vec<RollupFileName>,
    pub(super) changes: Ledger,
}

/// An account's terms in the published generation, when the accounts
/// being published change them: its published rows are booked again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::store) struct PublishedTerms {
    /// Its zone there: rows whose month differs move from that month.
    pub(in crate::store) zone: chrono_tz::Tz,
    /// Whether its currency changes: every row is restated in its month
    /// (the same amounts, now in another currency).
    pub(in crate::store) currency_changes: bool,
}

/// One account to merge: its id, the time zone of its months, its groups
/// in memory and its other inputs ([`account_inputs`]).
pub(super) struct AccountMerge<'a> {
    pub(super) account: &'a str,
    pub(super) zone: chrono_tz::Tz,
    /// Its terms in the published generation, when this ingest's
    /// accounts.csv changes them: its published rows are booked again.
    pub(super) published: Option<PublishedTerms>,
    pub(super) groups: Groups<'a>,
    pub(super) inputs: Vec<Input>,
    /// Rows that stopped counting, sorted by slot: subtracted from their
    /// groups.
    pub(super) minus: &'a [MinusRow],
}

/// Merges and writes the rollup files of one account.
pub(super) fn publish_account(
    shared: &SortedStrings<'_>,
    store: &Path,
    id: &str,
    merge: AccountMerge<'_>,
    syncer: &Syncer,
) -> Result<Published> {
    let AccountMerge { account, zone, published, groups, inputs, minus } = merge;
    let names: Vec<(i64, String)> = crate::store::GRAINS
        .iter()
        .map(|grain| (*grain, format!("rollups/{}/{id}-{grain}s.parquet", account_folder(account))))
        .collect();
    let paths: Vec<PathBuf> = names.iter().map(|(_, name)| store.join(name)).collect();
    create_parent(&paths[0])?;
    let mut months = MonthSums::new(zone, published);
    let rows = MergeRows { groups, inputs: &inputs, minus };
    merge_account(shared, account, rows, &paths, &mut months, syncer)?;
    let files = names.into_iter().map(|(grain, name)| RollupFileName { account: account.to_owned(), grain, name });
    Ok(Published { files: files.collect(), changes: months.into_ledger(account)? })
}

/// This ingest's rows of one account summed by month (in the account's
/// zone) and product. Rows come in slot order a day at a time, so the
/// sums of the current month are kept by product in an array and added
/// to the map only when the month changes.
///
/// When the account's terms changed, its published rows are booked again
/// ([`MonthSums::rebook_row`]): a row whose month is another in the new
/// zone leaves the old month and enters the new one, both counting its
/// records as restated, as a restated record's months do; with a new
/// currency, every row is restated in its month, its sums unchanged.
struct MonthSums {
    months: DayMonths,
    current: Option<Month>,
    by_product: [Totals; Product::ALL.len()],
    done: std::collections::BTreeMap<(Month, Product), Totals>,
    /// The months of the published zone, when the account's terms changed.
    published_months: Option<DayMonths>,
    /// Whether its currency changed: every published row is restated.
    currency_changes: bool,
    rebooked: std::collections::BTreeMap<(Month, Product), Change>,
}

impl MonthSums {
    fn new(zone: chrono_tz::Tz, published: Option<PublishedTerms>) -> MonthSums {
        MonthSums {
            months: DayMonths::new(zone),
            current: None,
            by_product: Default::default(),
            done: Default::default(),
            published_months: published.map(|published| DayMonths::new(published.zone)),
            currency_changes: published.is_some_and(|published| published.currency_changes),
            rebooked: Default::default(),
        }
    }

    /// Books a published row of `slot` (in the UTC day from `day`) again
    /// when the account's terms changed: as moved when its month in the
    /// published zone is not its month now, as restated in its month when
    /// only the currency changed (nothing when neither did).
    fn rebook_row(&mut self, day: i64, slot: i64, product: Product, totals: &Totals) -> Result<()> {
        let Some(from) = self.published_months.as_mut() else { return Ok(()) };
        let (before, after) = (from.month(day, slot)?, self.months.month(day, slot)?);
        if before == after {
            if self.currency_changes {
                let restated = Change { records_restated: totals.records, ..Change::default() };
                let slot = self.rebooked.entry((after, product)).or_default();
                *slot = slot.checked_add(&restated).ok_or_else(overflow)?;
            }
            return Ok(());
        }
        let entered = Change { records_added: 0, records_restated: totals.records, ..Change::added(totals)? };
        let left = Change {
            records_restated: totals.records,
            units: -entered.units,
            duration: -entered.duration,
            amount: -entered.amount,
            surcharge: -entered.surcharge,
            ..Change::default()
        };
        for (month, change) in [(before, left), (after, entered)] {
            let slot = self.rebooked.entry((month, product)).or_default();
            *slot = slot.checked_add(&change).ok_or_else(overflow)?;
        }
        Ok(())
    }

    /// Adds `totals` of a row of `slot`, in the UTC day from `day`.
    #[inline]
    fn add(&mut self, day: i64, slot: i64, product: Product, totals: &Totals) -> Result<()> {
        let month = self.months.month(day, slot)?;
        if self.current != Some(month) {
            self.flush()?;
            self.current = Some(month);
        }
        let sum = &mut self.by_product[product as usize];
        *sum = sum.checked_add(totals).ok_or_else(overflow)?;
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        let Some(month) = self.current else { return Ok(()) };
        for (product, totals) in Product::ALL.into_iter().zip(std::mem::take(&mut self.by_product)) {
            if totals.records > 0 {
                let sum = self.done.entry((month, product)).or_default();
                *sum = sum.checked_add(&totals).ok_or_else(overflow)?;
            }
        }
        Ok(())
    }

    /// The sums as `account`'s records added, with the moves.
    fn into_ledger(mut self, account: &str) -> Result<Ledger> {
        self.flush()?;
        let mut ledger = Ledger::new();
        for ((month, product), totals) in self.done {
            let key = ChangeKey { auth_id: account.to_owned(), month, product };
            changes::add(&mut ledger, key, &Change::added(&totals)?)?;
        }
        for ((month, product), change) in self.rebooked {
            changes::add(&mut ledger, ChangeKey { auth_id: account.to_owned(), month, product }, &change)?;
        }
        Ok(ledger)
    }
}

/// The rows of one account's merge: its groups in memory (sorted by
/// slot), its other inputs, and the rows to subtract (sorted by slot).
struct MergeRows<'a> {
    groups: &'a [(RollupKey, Totals)],
    inputs: &'a [Input],
    minus: &'a [MinusRow],
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
    shared: &SortedStrings<'_>,
    account: &str,
    rows: MergeRows<'_>,
    paths: &[PathBuf],
    months: &mut MonthSums,
    syncer: &Syncer,
) -> Result<()> {
    let MergeRows { groups, inputs, minus } = rows;
    let overflow = || Error::Internal(format!("rollup sum overflow for account {account}"));
    let mut strings = AccountStrings::new(shared);
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
    // The rows to subtract, in this merge's string ids, by slot.
    let minus: Vec<(RollupKey, Totals)> = minus
        .iter()
        .map(|row| {
            let dims = Dims {
                product: row.product,
                type_: strings.id(&row.type_),
                subaccount: strings.id(&row.subaccount),
                country: row.country,
                direction: row.direction,
                code: strings.id(&row.code),
            };
            (RollupKey { account: account_id, slot: row.slot, dims }, row.totals)
        })
        .collect();
    let mut minus_at = 0;
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
            // This ingest's rows: the groups in memory and partial files.
            let fresh = cursor.file.is_none();
            while let Some(row) = cursor.next_before(start + day, &mut strings, account_id)? {
                if fresh {
                    months.add(start, row.0.slot, row.0.dims.product, &row.1)?;
                } else {
                    months.rebook_row(start, row.0.slot, row.0.dims.product, &row.1)?;
                }
                day_rows.rows.push(row);
            }
        }
        let minus_end = minus_at + minus[minus_at..].partition_point(|(key, _)| key.slot < start + day);
        if minus_end > minus_at {
            if minus[minus_at].0.slot < start {
                break;
            }
            subtract(&mut day_rows.rows, &minus[minus_at..minus_end], account)?;
            minus_at = minus_end;
        }
        day_rows.orders.clear();
        day_rows.orders.extend(day_rows.rows.iter().map(|(key, _)| key.order().map(|id| strings.rank(id)).packed()));
        sort_day(&day_rows, start, &mut scratch.keys, &mut scratch.sorted)?;
        for (output, grain) in outputs.iter_mut().zip(crate::store::GRAINS) {
            sum_grain(start, grain, &mut scratch, &mut output.buffer, &overflow)?;
            output.write_full(account, &strings)?;
        }
    }
    if minus_at < minus.len() {
        return Err(lost(account));
    }
    for output in outputs {
        output.finish(account, &strings, syncer)?;
    }
    Ok(())
}

/// The error of a row to subtract that no rollup group holds: the store's
/// rollups and records disagree.
fn lost(account: &str) -> Error {
    Error::Internal(format!(
        "a superseded record of account {account} is in no rollup group: the store's rollups and \
         records disagree (run `telemeter store verify`)"
    ))
}

/// Subtracts `minus` from the day's `rows`: the rows of a key some row
/// to subtract names are first summed into the first of them (the inputs
/// each hold a group once, several inputs may hold it), then each row to
/// subtract leaves its group, and a group left with no record goes. Only
/// those keys are hashed (a few per day), not every row.
fn subtract(rows: &mut Vec<(RollupKey, Totals)>, minus: &[(RollupKey, Totals)], account: &str) -> Result<()> {
    let overflow = || Error::Internal(format!("rollup sum overflow for account {account}"));
    let mut less: rustc_hash::FxHashMap<RollupKey, (Totals, Option<usize>)> = rustc_hash::FxHashMap::default();
    for (key, totals) in minus {
        let sum = &mut less.entry(*key).or_insert((Totals::default(), None)).0;
        *sum = sum.checked_add(totals).ok_or_else(overflow)?;
    }
    let mut emptied = false;
    for i in 0..rows.len() {
        let Some((_, first)) = less.get_mut(&rows[i].0) else { continue };
        match *first {
            None => *first = Some(i),
            Some(j) => {
                let moved = std::mem::take(&mut rows[i].1);
                rows[j].1 = rows[j].1.checked_add(&moved).ok_or_else(overflow)?;
                emptied = true;
            }
        }
    }
    for (less, first) in less.values() {
        let t = &mut rows[first.ok_or_else(|| lost(account))?].1;
        *t = Totals {
            records: t.records.checked_sub(less.records).ok_or_else(|| lost(account))?,
            units: t.units.checked_sub(less.units).ok_or_else(|| lost(account))?,
            duration: t.duration.checked_sub(less.duration).ok_or_else(overflow)?,
            amount: t.amount.checked_sub(less.amount).ok_or_else(overflow)?,
            surcharge: t.surcharge.checked_sub(less.surcharge).ok_or_else(overflow)?,
        };
        if t.records == 0 {
            if t.units != 0 || t.duration != 0 || t.amount != 0 || t.surcharge != 0 {
                return Err(lost(account));
            }
            emptied = true;
        }
    }
    if emptied {
        rows.retain(|(_, t)| t.records > 0);
    }
    Ok(())
}

/// A rollup file read a slice at a time.
struct FileCursor {
    path: PathBuf,
    /// Its rows.
    rows: usize,
    /// The next row to read.
    next: usize,
}

/// One input of an account's merge: the in-memory groups, or a rollup file
/// read a slice of rows at a time.
struct Cursor<'g> {
    rows: std::borrow::Cow<'g, [(RollupKey, Totals)]>,
    at: usize,
    /// The rollup file it reads.
    file: Option<FileCursor>,
    /// Or a run of a partial file of this run (read around the page cache:
    /// it is read once, right after it was written the same way).
    partial: Option<PartialReader>,
    /// Rows read at a time from a partial file.
    slice: usize,
}

/// The rows of a partial file's run not read yet.
#[derive(Debug)]
struct PartialReader {
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
    /// The run's string ids in this run's interner, when it has its own.
    ids: Option<std::sync::Arc<[u32]>>,
}

impl<'g> Cursor<'g> {
    fn memory(rows: &'g [(RollupKey, Totals)]) -> Cursor<'g> {
        Cursor { rows: std::borrow::Cow::Borrowed(rows), at: 0, file: None, partial: None, slice: 0 }
    }

    /// A published rollup file, or a run of a partial file of this run.
    fn input(input: &Input, slice: usize) -> Result<Cursor<'g>> {
        let rows = std::borrow::Cow::Owned(Vec::new());
        match input {
            Input::Partial(run) => {
                let path = &run.path;
                let file = crate::direct::DirectReader::open(path).map_err(|e| Error::io(path, e))?;
                // A slice, or the whole run when it is shorter (the buffer
                // is zeroed when made: no more of it than is read).
                let most = (slice.max(1) as u64).min(run.rows.max(1)) as usize;
                let buffer = crate::direct::AlignedBuffer::for_reads(most * run.row_bytes);
                let at = run.first * run.row_bytes as u64;
                let (left, row_bytes, ids) = (run.rows, run.row_bytes, run.ids.clone());
                let partial = Some(PartialReader { path: path.to_owned(), file, buffer, at, left, row_bytes, ids });
                Ok(Cursor { rows, at: 0, file: None, partial, slice })
            }
            Input::File(path) => {
                let n_rows = parquet_io::count_rows(path)?;
                let file = Some(FileCursor { path: path.to_owned(), rows: n_rows, next: 0 });
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
        if let Some(PartialReader { path, file, buffer, at, left, row_bytes, ids }) = &mut self.partial {
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
            if let Some(ids) = ids {
                let id = |id: u32| ids.get(id as usize).copied().ok_or_else(broken);
                for (key, _) in &mut rows {
                    let dims = &mut key.dims;
                    (dims.subaccount, dims.type_, dims.code) = (id(dims.subaccount)?, id(dims.type_)?, id(dims.code)?);
                }
            }
            *left -= n;
            self.rows = std::borrow::Cow::Owned(rows);
            self.at = 0;
            return Ok(());
        }
        let Some(FileCursor { path, rows: n_rows, next }) = &mut self.file else { return Ok(()) };
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
            let (subaccount, type_, code) =
                (strings.id(row.dims.subaccount), strings.id(row.dims.type_), strings.id(row.dims.code));
            let dims = Dims {
                product: row.dims.product,
                type_,
                subaccount,
                country: row.dims.country,
                direction: row.dims.direction,
                code,
            };
            let key = RollupKey { account, slot: row.slot, dims };
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

/// Memory for the slices of an account's partial files during its merge,
/// shared by its partial runs: larger slices mean fewer reads of each
/// file (each a wait on the device), but every merge running at once holds
/// its own (re-tune with `bench/ingest-ab.sh`, its peak memory too).
const MERGE_BUDGET_BYTES: usize = 128 << 20;

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
    use crate::intern::Interner;

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
            let sorted = SortedStrings::new(&shared);
            let mut strings = AccountStrings::new(&sorted);
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
        let a = account_folder("MA001SHGA32ZDQYG9N8T");
        let b = account_folder("../MA001SHGA32ZDQYG9N8T/x");
        assert!(a.starts_with("MA001SHGA32ZDQYG9N8T-"));
        assert!(!b.contains('/') && !b.contains('.'));
        assert_ne!(account_folder("a b"), account_folder("a_b"));
    }

    /// An account's rollups merged from its groups in memory and its runs
    /// of two partial files (narrow rows, and wide ones with sums past 64
    /// bits, each run after another account's rows) hold at every grain
    /// what a plain map of the same rows sums, each group once, in slot
    /// order.
    #[test]
    fn a_merge_sums_what_a_map_of_the_same_rows_sums() {
        use super::super::spill::write_partial;
        use crate::records::{Country, Direction, Product};
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut shared = Interner::default();
        let texts: Vec<u32> = ["", "S1", "S2", "voice", "sms", "4000"].iter().map(|t| shared.intern(t)).collect();
        let (account, other) = (shared.intern("MA1"), shared.intern("MA2"));
        let start = 86_400 * 20_000;
        let row = |n: u64, wide: bool| -> (RollupKey, Totals) {
            let pick = |shift: u32, len: usize| (n >> shift) as usize % len;
            // Dimensions as records give them: a country and a direction
            // only for the products that have them, a code only for those
            // with one.
            let product = Product::ALL[pick(14, Product::ALL.len())];
            let located = product.has_country_and_direction();
            let coded = product.has_error_code() || product.has_hangup_cause();
            let dims = Dims {
                product,
                type_: texts[3 + pick(18, 2)],
                subaccount: texts[pick(0, 3)],
                country: [None, Country::parse(b"US")][pick(22, 2) * usize::from(located)],
                direction: [None, Some(Direction::Inbound), Some(Direction::Outbound)]
                    [pick(24, 3) * usize::from(located)],
                code: [texts[0], texts[5]][pick(28, 2) * usize::from(coded)],
            };
            let key = RollupKey { account, slot: start + 900 * pick(4, 300) as i64, dims };
            let amount = (n % 1000) as i128 - 300 + if wide { 1 << 80 } else { 0 };
            (
                key,
                Totals {
                    records: 1 + n % 3,
                    units: (n % 7) as u128,
                    duration: -((n % 5) as i128),
                    amount,
                    surcharge: 1,
                },
            )
        };
        // Each input holds a group once, as the fold's and a spill's do.
        let sorted = |rows: Vec<(RollupKey, Totals)>| {
            let mut groups: std::collections::HashMap<RollupKey, Totals> = Default::default();
            for (key, totals) in rows {
                let sum = groups.entry(key).or_default();
                *sum = sum.checked_add(&totals).expect("no overflow");
            }
            let mut rows: Vec<(RollupKey, Totals)> = groups.into_iter().collect();
            rows.sort_by_key(|(key, _)| (key.slot, key.order()));
            rows
        };
        let walk: Vec<u64> = crate::aggregate::dims::walk(9000).collect();
        let memory = sorted(walk[..3000].iter().map(|&n| row(n, false)).collect());
        let narrow = sorted(walk[3000..7000].iter().map(|&n| row(n, false)).collect());
        let wide = sorted(walk[7000..].iter().map(|&n| row(n, n % 2 == 0)).collect());
        let mut inputs = Vec::new();
        for (name, rows, row_bytes) in [("narrow.bin", &narrow, NARROW_BYTES), ("wide.bin", &wide, WIDE_BYTES)] {
            let before: Vec<(RollupKey, Totals)> =
                rows[..5].iter().map(|(key, totals)| (RollupKey { account: other, ..*key }, *totals)).collect();
            let mut bytes = Vec::new();
            write_partial(&mut bytes, before.iter().chain(rows.iter()), row_bytes).expect("encoded");
            let path = dir.path().join(name);
            std::fs::write(&path, &bytes).expect("written");
            let run = PartialRun { path, first: before.len() as u64, rows: rows.len() as u64, row_bytes, ids: None };
            inputs.push(Input::Partial(run));
        }
        let paths: Vec<PathBuf> =
            crate::store::GRAINS.iter().map(|g| dir.path().join(format!("{g}.parquet"))).collect();
        let mut months = MonthSums::new(chrono_tz::UTC, None);
        let rows = MergeRows { groups: &memory, inputs: &inputs, minus: &[] };
        merge_account(&SortedStrings::new(&shared), "MA1", rows, &paths, &mut months, &Syncer::at_once())
            .expect("merged");
        for (path, grain) in paths.iter().zip(crate::store::GRAINS) {
            let group = |slot: i64, subaccount: &str, rest: String, type_: &str, code: &str| {
                (
                    slot - (slot - start).rem_euclid(grain),
                    subaccount.to_owned(),
                    rest,
                    type_.to_owned(),
                    code.to_owned(),
                )
            };
            let mut expected = std::collections::BTreeMap::new();
            for (key, totals) in memory.iter().chain(&narrow).chain(&wide) {
                let dims = &key.dims;
                let rest = format!("{:?} {:?} {:?}", dims.product, dims.country, dims.direction);
                let text = |id: u32| shared.get(id);
                let at = group(key.slot, text(dims.subaccount), rest, text(dims.type_), text(dims.code));
                let sum: &mut Totals = expected.entry(at).or_default();
                *sum = sum.checked_add(totals).expect("no overflow");
            }
            let rows = parquet_io::count_rows(path).expect("counted");
            let frame = rollup::read_rollup_slice(path, 0, rows).expect("read");
            let mut got = std::collections::BTreeMap::new();
            let mut last = i64::MIN;
            rollup::for_each_rollup_in(path, &frame, |r| {
                assert_eq!(r.auth_id, "MA1");
                assert!(r.slot >= last, "{}: rows in slot order", path.display());
                last = r.slot;
                let rest = format!("{:?} {:?} {:?}", r.dims.product, r.dims.country, r.dims.direction);
                let at = group(r.slot, r.dims.subaccount, rest, r.dims.type_, r.dims.code);
                assert!(got.insert(at, r.totals).is_none(), "{}: one row per group", path.display());
                Ok(())
            })
            .expect("parsed");
            assert!(got.len() < memory.len() + narrow.len() + wide.len(), "some rows share a group");
            assert_eq!(got, expected, "grain {grain}");
        }
    }
}
