//! The per-file state of a pass, [`Scan`] (a [`RowSink`]), and the merge
//! of every scan's groups: interned into one table, folded by key hash into
//! partitions that merge in parallel, sorted by [`report_order`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

use super::dims::Dims;
use super::rows::{sum_repeated, AccountRows, PackedKey};
use super::{sum_sorted, AccountScope, AggregateOptions, GroupKey, Groups, OnBadRow, Selector, Span, Tally, Totals};
use crate::error::{BadRecord, Error, Location, Result};
use crate::intern::{self, Interner};
use crate::records::bad_rows::{position, BadRows, RejectSpool};
use crate::records::csv::RowSink;
use crate::records::dedup::{self, Conflict, Entry, Origin, Place, Revised, ScanEntries, ScanRevised, PARTITIONS};
use crate::records::files::{Format, InputFile, Inventory};
use crate::records::{self, Field, Kind, Product, Record};
use crate::time::Buckets;

/// The scans of one file: one per run of its chunks (CSV) or parts
/// (Parquet) read by one job.
fn scan_file<'s>(
    file: &'s InputFile,
    skipped: Option<&'s std::collections::HashSet<u64>>,
    index: u32,
    selector: &'s Selector,
    on_bad_row: OnBadRow,
    fail_at: Option<&'s AtomicU64>,
    seed: u64,
) -> Result<Vec<Scan<'s>>> {
    if on_bad_row == OnBadRow::Fail && fail_at.is_some_and(|f| f.load(Ordering::Relaxed) < position(index, 0)) {
        return Ok(Vec::new());
    }
    let new_scan = || Scan::new(file, index, selector, on_bad_row, fail_at, seed, skipped);
    match file.format {
        Format::Parquet => records::parquet::read_parts(file, new_scan),
        _ => {
            // Block buffers are reused: a fresh buffer costs a page fault
            // (and a zeroed page) per 4 KiB, as much as decoding into it.
            let take = || BUFFERS.lock().map(|mut pool| pool.pop().unwrap_or_default()).unwrap_or_default();
            let mut buffers = [take(), take()];
            let scans = records::csv::read_stream(file, &mut buffers, new_scan);
            if let Ok(mut pool) = BUFFERS.lock() {
                for bytes in buffers {
                    if pool.len() < 2 * (rayon::current_num_threads() + 1) && bytes.capacity() <= MAX_SPARE_BUFFER {
                        pool.push(bytes);
                    }
                }
            }
            scans
        }
    }
}

/// Scans every file of `inventory` in parallel (a large CSV file in
/// chunks); the error of the first failing row or file in file order.
/// `fail_at` is the position of the first failing row yet, shared by the
/// scans so that they stop early.
///
/// A chunk of a file is read before the reader knows that it starts a
/// record; one that started inside a quoted field spanning lines is read
/// again, but a failure it found meanwhile may have lowered `fail_at` and
/// stopped scans whose rows count. When no error is kept at `fail_at` or
/// before, the files are scanned again with no shared stop (a file with
/// such fields, in fail mode: the early stop is only a saving).
pub(super) fn scan_files<'s>(
    inventory: &'s Inventory,
    selector: &'s Selector,
    options: AggregateOptions<'_>,
    fail_at: &'s AtomicU64,
) -> Result<Vec<Scan<'s>>> {
    let scanned = scan_files_once(inventory, selector, options, Some(fail_at));
    let stopped = fail_at.load(Ordering::Relaxed);
    let kept = scanned.as_ref().err().map_or(u64::MAX, |first| first.position);
    let scanned = match options.on_bad_row == OnBadRow::Fail && stopped < kept {
        true => scan_files_once(inventory, selector, options, None),
        false => scanned,
    };
    scanned.map_err(|first| first.error)
}

/// The first error of a scan, and its position (file and line).
struct FirstError {
    position: u64,
    error: Error,
}

/// [`scan_files`] once, stopping early at `fail_at` when given.
fn scan_files_once<'s>(
    inventory: &'s Inventory,
    selector: &'s Selector,
    options: AggregateOptions<'_>,
    fail_at: Option<&'s AtomicU64>,
) -> std::result::Result<Vec<Scan<'s>>, Box<FirstError>> {
    let bytes_read = AtomicU64::new(0);
    let scanned: Vec<Result<Vec<Scan<'_>>>> = inventory
        .files
        .par_iter()
        .enumerate()
        .map(|(index, file)| {
            let skipped = inventory.skipped_rows.get(&(index as u32));
            let scanned = scan_file(file, skipped, index as u32, selector, options.on_bad_row, fail_at, 0);
            let scanned = match options.spool {
                Some(folder) => scanned.and_then(|mut scans| {
                    for (part, scan) in scans.iter_mut().enumerate() {
                        scan.spool_rejects(folder.join(format!("{index}.{part}.part")))?;
                    }
                    Ok(scans)
                }),
                None => scanned,
            };
            if let Some(on_read) = options.on_read {
                on_read(bytes_read.fetch_add(file.size, Ordering::Relaxed) + file.size);
            }
            scanned
        })
        .collect();
    let mut scans = Vec::new();
    let mut first_error: Option<(u64, Error)> = None;
    for (index, result) in scanned.into_iter().enumerate() {
        let mut keep_error = |position: u64, error: Error| {
            if first_error.as_ref().is_none_or(|(p, _)| position < *p) {
                first_error = Some((position, error));
            }
        };
        match result {
            Ok(file_scans) => {
                for mut scan in file_scans {
                    if scan.too_many_lines {
                        keep_error(position(index as u32, 0), too_many_lines(&inventory.files[index]));
                    }
                    if let Some(error) = scan.bad_rows.take_error() {
                        keep_error(position(index as u32, error.location.line), Error::from(error));
                    }
                    scans.push(scan);
                }
            }
            Err(error) => keep_error(position(index as u32, 0), error),
        }
    }
    if let Some((position, error)) = first_error {
        return Err(Box::new(FirstError { position, error }));
    }
    Ok(scans)
}

/// Marks in each scan the rows that repeat an earlier row (record id,
/// revision and content) and the versions and voids below their record's
/// highest revision (`corrections.md`), per kind; a record id and revision
/// with two contents is a conflict. Voids take part in the check of the
/// kind they withdraw.
pub(super) fn drop_duplicates(scans: &mut [Scan<'_>], inventory: &Inventory, selector: &Selector) -> Result<()> {
    for kind in Kind::ALL {
        let parts = scans.iter_mut().filter(|s| s.kind == kind).map(Scan::take_entries).collect();
        let revised: Vec<ScanRevised> =
            scans.iter_mut().map(|s| s.take_revised(kind)).filter(|r| !r.entries.is_empty()).collect();
        let outcome = check_entries(parts, revised, kind, inventory, selector)?;
        let duplicates = lines_by_file(outcome.duplicates);
        let superseded = lines_by_file(outcome.superseded);
        // Each scan takes the lines of its own file and line range.
        for scan in scans.iter_mut().filter(|s| s.kind == kind || s.kind == Kind::Voids) {
            let (first, last) = scan.lines;
            let file = scan.file;
            for (by_file, lines) in [(&duplicates, &mut scan.duplicates), (&superseded, &mut scan.superseded)] {
                if let Some(found) = by_file.get(&file) {
                    let (from, to) = (found.partition_point(|l| *l < first), found.partition_point(|l| *l <= last));
                    lines.extend(found[from..to].iter().copied());
                }
            }
        }
    }
    Ok(())
}

/// Keeps in the scans' spans the times of current rows only: a file with
/// rows that [`drop_duplicates`] found superseded or withdrawn (they
/// count nowhere, corrections.md) is read again without them, and its
/// spans are those of that reading. So an account whose every row was
/// superseded (moved to another account, say) or withdrawn is not one the
/// data knows, as it is not in a store, which keeps current rows only.
/// Files without such rows, most of them, are not read again.
pub(super) fn current_spans(scans: &mut [Scan<'_>], inventory: &Inventory, selector: &Selector) -> Result<()> {
    let mut by_file: BTreeMap<u32, std::collections::HashSet<u64>> = BTreeMap::new();
    for scan in scans.iter().filter(|scan| scan.kind != Kind::Voids && !scan.superseded.is_empty()) {
        by_file.entry(scan.file).or_default().extend(scan.superseded.iter().copied());
    }
    for (file, mut skipped) in by_file {
        skipped.extend(inventory.skipped_rows.get(&file).into_iter().flatten().copied());
        let input = &inventory.files[file as usize];
        let again = scan_file(input, Some(&skipped), file, selector, OnBadRow::SetAside, None, 0)?;
        let mut spans: BTreeMap<&str, Span> = BTreeMap::new();
        let mut span: Option<Span> = None;
        for scan in &again {
            for (id, found) in scan.spans.iter().enumerate().filter(|(_, s)| s.first <= s.last) {
                let text = scan.strings.get(id as u32);
                spans.entry(text).and_modify(|s| *s = s.merge(*found)).or_insert(*found);
            }
            if scan.span.first <= scan.span.last {
                span = Some(span.map_or(scan.span, |s| s.merge(scan.span)));
            }
        }
        let mut of_file = scans.iter_mut().filter(|scan| scan.file == file);
        if let Some(first) = of_file.next() {
            first.spans.fill(NO_SPAN);
            first.span = span.unwrap_or(NO_SPAN);
            for (text, found) in spans {
                let id = first.strings.intern(text) as usize;
                if id >= first.spans.len() {
                    first.spans.resize(id + 1, NO_SPAN);
                }
                first.spans[id] = found;
            }
        }
        for scan in of_file {
            scan.spans.fill(NO_SPAN);
            scan.span = NO_SPAN;
        }
    }
    Ok(())
}

/// Places grouped by file, each file's lines sorted.
fn lines_by_file(places: FxHashSet<Place>) -> FxHashMap<u32, Vec<u64>> {
    let mut by_file: FxHashMap<u32, Vec<u64>> = FxHashMap::default();
    for place in places {
        by_file.entry(place.file).or_default().push(place.line);
    }
    for lines in by_file.values_mut() {
        lines.sort_unstable();
    }
    by_file
}

/// The dedup outcome of one kind's entries, a conflict confirmed: the
/// entries hold 64 bits of id hash, so the record ids at a conflict's two
/// places are read again. The same id is the conflict; two ids are a hash
/// collision (about once in 10^13 runs of 16M rows), and the kind's files
/// are read again for entries with another seed.
fn check_entries(
    parts: Vec<ScanEntries>,
    revised: Vec<ScanRevised>,
    kind: Kind,
    inventory: &Inventory,
    selector: &Selector,
) -> Result<dedup::Outcome> {
    let mut outcome = dedup::check(parts, revised);
    let mut seed = 0;
    while let Some(found) = outcome.conflict {
        let id_at = |place: Place| records::record_id_at(&inventory.files[place.file as usize], place.line);
        if id_at(found.earlier)? == id_at(found.later)? {
            return Err(conflict(inventory, kind, found));
        }
        seed += 1;
        if seed > 2 {
            return Err(Error::Internal(format!("{kind}: record id hashes collide under {seed} seeds")));
        }
        let (parts, revised) = entries_again(inventory, kind, selector, seed)?;
        outcome = dedup::check(parts, revised);
    }
    Ok(outcome)
}

/// The dedup entries of every file of `kind`, and the revised entries of
/// `kind` in its files and the voids, read again with `seed`.
fn entries_again(
    inventory: &Inventory,
    kind: Kind,
    selector: &Selector,
    seed: u64,
) -> Result<(Vec<ScanEntries>, Vec<ScanRevised>)> {
    let scanned: Vec<Vec<Scan<'_>>> = inventory
        .files
        .par_iter()
        .enumerate()
        .filter(|(_, file)| file.kind == kind || file.kind == Kind::Voids)
        .map(|(index, file)| {
            let skipped = inventory.skipped_rows.get(&(index as u32));
            scan_file(file, skipped, index as u32, selector, OnBadRow::SetAside, None, seed)
        })
        .collect::<Result<_>>()?;
    let mut scans: Vec<Scan<'_>> = scanned.into_iter().flatten().collect();
    let revised = scans.iter_mut().map(|scan| scan.take_revised(kind)).filter(|r| !r.entries.is_empty()).collect();
    let parts = scans.iter_mut().filter(|scan| scan.kind == kind).map(Scan::take_entries).collect();
    Ok((parts, revised))
}

/// The error of a scan of more lines than its entries count.
fn too_many_lines(file: &InputFile) -> Error {
    Error::Limit(format!(
        "{}: more than {} lines in one part of the file; split the file into smaller files",
        file.name,
        u32::MAX
    ))
}

/// Merges the scans' groups: counts per kind, rows set aside (file order),
/// and totals per owned group key in the report's order.
pub(super) fn merge(scans: Vec<Scan<'_>>) -> Result<Merged> {
    let MergedIds { strings, groups: groups_by_id, mut merged } = merge_ids(scans)?;
    // Sorted on integer ranks that order like the owned keys, the owned map
    // is built in one pass instead of a string-comparing insert per group;
    // the owned keys are built on the threads too (300k groups for the
    // largest account over 92 days).
    let owned: Vec<(GroupKey, Totals)> =
        groups_by_id.into_par_iter().map(|(key, totals)| (key.owned(&strings), totals)).collect();
    merged.groups = sum_sorted(owned, |key| Error::Internal(format!("sum overflow in group {key:?}")))?;
    Ok(merged)
}

/// [`merge`] for a pass that keeps one account's rows, `account`: its rows
/// as the report orders them, in the ids of the merge's own string table
/// (no owned key per group), usage and charges apart; the pass's counts
/// with no groups.
pub(super) fn merge_account(scans: Vec<Scan<'_>>, account: &str) -> Result<(AccountRows, Merged)> {
    let MergedIds { strings, groups: groups_by_id, merged } = merge_ids(scans)?;
    let id = strings.lookup(account);
    let (mut usage, mut charges) = (Vec::with_capacity(groups_by_id.len()), Vec::new());
    for (key, totals) in groups_by_id {
        if Some(key.account) != id {
            continue;
        }
        let packed = PackedKey::new(key.bucket, key.order());
        let rows = if packed.product == Product::Other { &mut charges } else { &mut usage };
        rows.push((packed, totals));
    }
    // Keys that differ only in what their product does not show (a charge's
    // subaccount) are one row: next to each other in this order.
    for rows in [&mut usage, &mut charges] {
        sum_repeated(rows).ok_or_else(|| Error::Internal(format!("sum overflow in the groups of {account}")))?;
    }
    Ok((AccountRows { strings: strings.into_table(), usage, charges }, merged))
}

/// What [`merge_ids`] gives: every group under ids of one string table.
struct MergedIds {
    /// The strings of every scan.
    strings: Interner,
    /// Every group summed once under its ids, in the report's order.
    groups: IdGroups,
    /// The counts, rows set aside and spans (its `groups` empty).
    merged: Merged,
}

/// The common part of [`merge`] and [`merge_account`]: the strings of
/// every scan in one interner, every group summed once under its ids,
/// sorted in the report's order; the counts, rows set aside and spans
/// (`groups` left empty).
fn merge_ids(scans: Vec<Scan<'_>>) -> Result<MergedIds> {
    // Every scan's strings (a few hundred each) go into one interner first,
    // so that each scan folds its groups straight into the shared ids, filed
    // by key hash into MERGE_PARTS partitions. The partitions then merge
    // independently and in parallel, each key hashed into a map small enough
    // to stay in cache (2.94M groups for every account over 92 days).
    let mut strings = Interner::with_empty();
    let ids: Vec<Vec<u32>> =
        scans.iter().map(|scan| scan.strings.iter().map(|text| strings.intern(text)).collect()).collect();
    let folded: Vec<Folded> = scans.into_par_iter().zip(ids).map(|(scan, ids)| scan.fold(&ids)).collect();
    let mut tallies: BTreeMap<Kind, Tally> = BTreeMap::new();
    let mut rejects = Vec::new();
    let mut spooled = Vec::new();
    let mut span = None;
    let mut span_by_id: FxHashMap<u32, Span> = FxHashMap::default();
    let mut parts: Vec<Vec<Vec<(IdKey, Totals)>>> = (0..MERGE_PARTS).map(|_| Vec::new()).collect();
    for scan in folded {
        *tallies.entry(scan.kind).or_default() += scan.tally;
        rejects.extend(scan.rejects);
        spooled.extend(scan.spooled);
        span = Span::merge_opt(span, scan.span);
        for (account, account_span) in scan.spans {
            span_by_id.entry(account).and_modify(|s| *s = s.merge(account_span)).or_insert(account_span);
        }
        for (part, groups) in parts.iter_mut().zip(scan.parts) {
            if !groups.is_empty() {
                part.push(groups);
            }
        }
    }
    let merged: Vec<Result<Vec<(IdKey, Totals)>>> =
        parts.into_par_iter().map(|part| merge_part(part, &strings)).collect();
    let merged = merged.into_iter().collect::<Result<Vec<_>>>()?;
    let mut groups_by_id: IdGroups = Vec::with_capacity(merged.iter().map(Vec::len).sum());
    for part in merged {
        groups_by_id.extend(part);
    }
    let ranks = strings.ranks();
    // Keys computed once per group, not per comparison (300k groups), and
    // sorted with each group's position (so equal keys keep their order,
    // as a stable sort would); then the groups gathered in that order.
    // All on the threads: `par_sort_by_cached_key` puts the groups in
    // place by swaps on one thread, most of this pass's serial tail.
    let mut order: Vec<(ReportOrder, usize)> =
        groups_by_id.par_iter().enumerate().map(|(i, (key, _))| (report_order(key, &ranks), i)).collect();
    order.par_sort_unstable();
    let groups_by_id: IdGroups = order.par_iter().map(|&(_, i)| groups_by_id[i]).collect();
    let spans = span_by_id.into_iter().map(|(id, s)| (strings.get(id).to_owned(), s)).collect();
    let merged = Merged { groups: Groups::default(), tallies, rejects, spooled, spans, span };
    Ok(MergedIds { strings, groups: groups_by_id, merged })
}

/// What [`merge`] returns: the parts of an [`Aggregate`](super::Aggregate)
/// a pass computes.
pub(super) struct Merged {
    pub(super) groups: Groups,
    pub(super) tallies: BTreeMap<Kind, Tally>,
    pub(super) rejects: Vec<BadRecord>,
    pub(super) spooled: Vec<RejectSpool>,
    pub(super) spans: BTreeMap<String, Span>,
    pub(super) span: Option<Span>,
}

impl Merged {
    /// The aggregate of a pass over `inventory`'s files.
    pub(super) fn into_aggregate(self, inventory: Inventory) -> super::Aggregate {
        let Merged { groups, tallies, rejects, spooled, spans, span } = self;
        super::Aggregate { groups, tallies, rejects, spooled, inventory, spans, span }
    }
}

/// The largest block buffer kept for reuse (a block is about 8 MiB, more
/// where a line is longer).
const MAX_SPARE_BUFFER: usize = 64 << 20;

/// Spare block buffers of compressed files, kept between files and between
/// passes.
static BUFFERS: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());

impl Totals {
    fn add_row(&mut self, row: &KeptRow) {
        // Row values are at most i64::MAX / u64::MAX; overflowing an i128
        // would take more than 2^63 rows.
        self.records += 1;
        self.units += row.units as u128;
        self.duration += row.duration as i128;
        self.amount += row.amount as i128;
        self.surcharge += row.surcharge as i128;
    }
}

/// A kept row: its file-local group and its values.
#[derive(Clone, Copy, Debug)]
struct KeptRow {
    group: u32,
    line: u64,
    units: u64,
    duration: i64,
    amount: i64,
    surcharge: i64,
}

/// Groups under keys in interned ids, with their totals.
type IdGroups = Vec<(IdKey, Totals)>;

/// A group key in file-local interned ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct IdKey {
    account: u32,
    bucket: u32,
    dims: Dims<u32, u32>,
}

impl IdKey {
    /// The fields of this key in the report's order, the fields its product
    /// does not have left out as [`GroupKey::new`] leaves them out, text as
    /// ids in the interner whose id 0 is the empty string.
    #[inline]
    fn order(&self) -> Dims<u32> {
        self.dims.present().shown(|id| *id == 0)
    }

    /// The owned key of this key in the ids of `strings`.
    fn owned(&self, strings: &Interner) -> GroupKey {
        let dims = self.order().map(|id| strings.get(id));
        GroupKey::from_dims(strings.get(self.account), self.bucket, dims)
    }
}

/// A group's place in the report's order ([`report_order`]): compared
/// field by field, in this order.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct ReportOrder {
    /// The rank of its account's id.
    account: u32,
    /// Its bucket's index.
    bucket: u32,
    /// The ranks of its other ids, in the report's order of dimensions.
    ids: Dims<u32>,
}

/// A sort key of `key` (ids ranked by [`Interner::ranks`]) that orders as
/// its owned key ([`IdKey::owned`]) does.
#[inline]
fn report_order(key: &IdKey, ranks: &[u32]) -> ReportOrder {
    ReportOrder {
        account: ranks[key.account as usize],
        bucket: key.bucket,
        ids: key.order().map(|id| ranks[id as usize]),
    }
}

/// Partitions of the group merge (by key hash): enough that each
/// partition's map stays in cache and the partitions keep every thread
/// busy; each is one more vector per scan to fill and merge (re-tune with
/// `bench/ab.sh`'s `aggregate/all` and `bench/run.sh`'s every-account
/// report).
const MERGE_PARTS: usize = 256;
const _: () = assert!(MERGE_PARTS <= 1 << u8::BITS);

/// The merge partition of a key in the shared ids: bits of its hash that
/// the partition's own hash map does not use to place it.
#[inline]
fn merge_part_of(key: &IdKey) -> usize {
    use std::hash::BuildHasher;
    let hash = rustc_hash::FxBuildHasher.hash_one(key).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (hash >> 32) as usize % MERGE_PARTS
}

/// Merges one partition's groups from every scan, largest first.
fn merge_part(mut part: Vec<Vec<(IdKey, Totals)>>, strings: &Interner) -> Result<Vec<(IdKey, Totals)>> {
    if part.len() <= 1 {
        return Ok(part.pop().unwrap_or_default());
    }
    let bound: usize = part.iter().map(Vec::len).sum();
    let largest = part.iter().map(Vec::len).max().unwrap_or(0);
    let mut groups: FxHashMap<IdKey, Totals> =
        FxHashMap::with_capacity_and_hasher(largest.max(bound / 2), Default::default());
    for scan in part {
        for (key, totals) in scan {
            match groups.entry(key) {
                std::collections::hash_map::Entry::Occupied(mut entry) => {
                    let sum = entry
                        .get()
                        .checked_add(&totals)
                        .ok_or_else(|| Error::Internal(format!("sum overflow in group {:?}", key.owned(strings))))?;
                    *entry.get_mut() = sum;
                }
                std::collections::hash_map::Entry::Vacant(entry) => {
                    entry.insert(totals);
                }
            }
        }
    }
    Ok(groups.into_iter().collect())
}

/// A scan's totals per group, in the shared string ids, by merge partition.
struct Folded {
    kind: Kind,
    parts: Vec<Vec<(IdKey, Totals)>>,
    tally: Tally,
    rejects: Vec<BadRecord>,
    spooled: Option<RejectSpool>,
    /// Record times per account, by shared string id.
    spans: Vec<(u32, Span)>,
    span: Option<Span>,
}

/// The per-file (or per-chunk) state of a pass: a [`RowSink`].
#[derive(Debug)]
pub struct Scan<'s> {
    /// Rows of the file not to read (`Inventory::skipped_rows`).
    skipped: Option<&'s std::collections::HashSet<u64>>,
    selector: &'s Selector,
    bad_rows: BadRows<'s>,
    /// The rows set aside, once written to a file
    /// ([`AggregateOptions::spool`]).
    spooled: Option<RejectSpool>,
    kind: Kind,
    file: u32,
    strings: Interner,
    group_ids: FxHashMap<IdKey, u32>,
    groups: Vec<IdKey>,
    rows: Vec<KeptRow>,
    seen: Vec<Vec<Entry>>,
    /// Entries of rows that take part in corrections (a revision above 0,
    /// or a void), with the record kind they are of: few, so not
    /// partitioned.
    revised: Vec<(Kind, Revised)>,
    /// The first line handed over: entries count rows from it.
    first_line: Option<u64>,
    /// The seed of the entries' id hash (0 but when a collision is checked).
    seed: u64,
    /// A row too far from the first for its entry: the scan stopped.
    too_many_lines: bool,
    read: u64,
    lines: (u64, u64),
    duplicates: FxHashSet<u64>,
    /// Lines of versions and voids below their record's highest revision.
    superseded: FxHashSet<u64>,
    /// Buckets per account string id, once looked up.
    account_buckets: Vec<Option<Option<&'s Buckets>>>,
    /// Record times per account string id of the accounts in scope
    /// (`first > last`: none yet).
    spans: Vec<Span>,
    /// Record times of every valid row (`first > last`: none yet).
    span: Span,
    /// The account of a one-account selector: other accounts' rows are
    /// told apart by [`intern::same`]'s word compares, not a call of
    /// `memcmp` per row.
    one_account: Option<&'s str>,
}

/// A span with no time in it yet: merging a time makes it that time.
const NO_SPAN: Span = Span { first: i64::MAX, last: i64::MIN };

impl<'s> Scan<'s> {
    /// Writes the rows set aside to a file at `path`, out of memory.
    fn spool_rejects(&mut self, path: PathBuf) -> Result<()> {
        let rejects = self.bad_rows.take_rejects();
        if !rejects.is_empty() {
            let mut spool = RejectSpool::new(path);
            spool.append(&rejects)?;
            self.spooled = Some(spool);
        }
        Ok(())
    }

    fn new(
        file: &'s InputFile,
        index: u32,
        selector: &'s Selector,
        on_bad_row: OnBadRow,
        fail_at: Option<&'s AtomicU64>,
        seed: u64,
        skipped: Option<&'s std::collections::HashSet<u64>>,
    ) -> Scan<'s> {
        Scan {
            skipped,
            selector,
            bad_rows: BadRows::new(file, index, on_bad_row, fail_at),
            spooled: None,
            kind: file.kind,
            file: index,
            strings: Interner::with_empty(),
            group_ids: FxHashMap::default(),
            groups: Vec::new(),
            rows: Vec::new(),
            seen: (0..PARTITIONS).map(|_| Vec::new()).collect(),
            revised: Vec::new(),
            first_line: None,
            seed,
            too_many_lines: false,
            read: 0,
            lines: (u64::MAX, 0),
            duplicates: FxHashSet::default(),
            superseded: FxHashSet::default(),
            account_buckets: Vec::new(),
            spans: Vec::new(),
            span: NO_SPAN,
            one_account: match &selector.accounts {
                AccountScope::Some(accounts) if accounts.len() == 1 => accounts.first().map(String::as_str),
                _ => None,
            },
        }
    }

    /// Whether the selector's accounts hold `auth_id`.
    #[inline]
    fn in_scope(&self, auth_id: &str) -> bool {
        match self.one_account {
            Some(account) => intern::same(auth_id, account),
            None => self.selector.accounts.contains(auth_id),
        }
    }

    /// This scan's dedup entries, taken, and where they are.
    fn take_entries(&mut self) -> ScanEntries {
        let origin = Origin { file: self.file, first_line: self.first_line.unwrap_or(0) };
        ScanEntries { origin, parts: std::mem::take(&mut self.seen) }
    }

    /// This scan's revised entries of `kind`, taken, and where they are.
    fn take_revised(&mut self, kind: Kind) -> ScanRevised {
        let origin = Origin { file: self.file, first_line: self.first_line.unwrap_or(0) };
        let (of_kind, others): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.revised).into_iter().partition(|(k, _)| *k == kind);
        self.revised = others;
        ScanRevised { origin, entries: of_kind.into_iter().map(|(_, r)| r).collect() }
    }

    /// A row of `voids/` at `line` (`row` from the scan's first line):
    /// its entry, filed under the kind it withdraws, or a bad row.
    fn void_row(&mut self, line: u64, row: u32, fields: &[Field<'_>]) -> bool {
        match records::parse_void(fields) {
            Ok(void) => {
                let entry = Entry::new(void.record_id, void.content_hash(), row, self.seed);
                self.revised.push((void.kind, Revised { entry, revision: void.revision, void: true }));
                true
            }
            Err(e) => self.bad_rows.refused(Kind::Voids, line, e),
        }
    }

    /// Notes a record of the account with string id `account` at `secs`.
    #[inline]
    fn note_time(&mut self, account: u32, secs: i64) {
        let index = account as usize;
        if index >= self.spans.len() {
            self.spans.resize(index + 1, NO_SPAN);
        }
        self.spans[index] = self.spans[index].merge(Span::at(secs));
    }

    /// The buckets of the account with string id `account`.
    #[inline]
    fn buckets_of(&mut self, account: u32) -> Option<&'s Buckets> {
        let index = account as usize;
        if index >= self.account_buckets.len() {
            self.account_buckets.resize(index + 1, None);
        }
        if let Some(buckets) = self.account_buckets[index] {
            return buckets;
        }
        let selector: &'s Selector = self.selector;
        let buckets = selector.bucketing.of(self.strings.get(account));
        self.account_buckets[index] = Some(buckets);
        buckets
    }

    fn keep(&mut self, record: &Record<'_>, account: u32, bucket: u32, line: u64) {
        let product = record.product;
        let dims = Dims {
            product,
            type_: self.strings.intern(record.type_),
            subaccount: self.strings.intern(record.subaccount),
            country: record.country,
            direction: record.direction,
            code: self.strings.intern(record.code),
        };
        let key = IdKey { account, bucket, dims };
        let next = self.groups.len() as u32;
        let group = *self.group_ids.entry(key).or_insert(next);
        if group == next {
            self.groups.push(key);
        }
        self.rows.push(KeptRow {
            group,
            line,
            units: record.units,
            duration: record.duration,
            amount: record.amount,
            surcharge: record.surcharge,
        });
    }

    /// Folds kept rows into groups, skipping duplicates; keys are re-mapped
    /// through `ids` (this scan's string ids to the shared ones).
    fn fold(mut self, ids: &[u32]) -> Folded {
        let mut totals = vec![Totals::default(); self.groups.len()];
        let mut selected = 0;
        for row in &self.rows {
            if !self.duplicates.is_empty() && self.duplicates.contains(&row.line) {
                continue;
            }
            if !self.superseded.is_empty() && self.superseded.contains(&row.line) {
                continue;
            }
            totals[row.group as usize].add_row(row);
            selected += 1;
        }
        // Each partition's groups in a vector of exactly their number: no
        // growth copies (1.3M groups in 104 scans for the largest account),
        // and no room held for none (a pass over 15,000 small files holds
        // all their scans' partitions at once).
        let shared = |key: &IdKey| IdKey {
            account: ids[key.account as usize],
            bucket: key.bucket,
            dims: key.dims.map_text(|id| ids[id as usize], |id| ids[id as usize]),
        };
        let kept = || self.groups.iter().zip(&totals).filter(|(_, totals)| totals.records > 0);
        let of_part: Vec<u8> = kept().map(|(key, _)| merge_part_of(&shared(key)) as u8).collect();
        let mut counts = [0usize; MERGE_PARTS];
        for part in &of_part {
            counts[*part as usize] += 1;
        }
        let mut parts: Vec<Vec<(IdKey, Totals)>> = counts.iter().map(|&n| Vec::with_capacity(n)).collect();
        for ((key, totals), part) in kept().zip(of_part) {
            parts[part as usize].push((shared(key), *totals));
        }
        let rejects = self.bad_rows.take_rejects();
        let spooled = self.spooled.take();
        let set_aside = rejects.len() as u64 + spooled.as_ref().map_or(0, RejectSpool::rows);
        let duplicates = self.duplicates.len() as u64;
        let superseded = self.superseded.len() as u64;
        let current = self.read - set_aside - duplicates - superseded;
        let (used, voids) = if self.kind == Kind::Voids { (0, current) } else { (current, 0) };
        let tally = Tally { read: self.read, used, set_aside, duplicates, superseded, voids, selected };
        let spans =
            self.spans.iter().enumerate().filter(|(_, s)| s.first <= s.last).map(|(id, s)| (ids[id], *s)).collect();
        let span = (self.span.first <= self.span.last).then_some(self.span);
        Folded { kind: self.kind, parts, tally, rejects, spooled, spans, span }
    }
}

impl RowSink for Scan<'_> {
    #[inline]
    fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
        if self.skipped.is_some_and(|rows| rows.contains(&line)) {
            return true;
        }
        if self.read.is_multiple_of(1024) && self.bad_rows.should_stop(line) {
            return false;
        }
        let first_line = *self.first_line.get_or_insert(line);
        let Some(row) = line.checked_sub(first_line).and_then(|row| u32::try_from(row).ok()) else {
            self.too_many_lines = true;
            return false;
        };
        self.read += 1;
        self.lines = (self.lines.0.min(line), self.lines.1.max(line));
        if self.kind == Kind::Voids {
            return self.void_row(line, row, fields);
        }
        match records::parse_record(self.kind, fields) {
            Ok(record) => {
                let entry = Entry::new(record.record_id, record.content_hash(), row, self.seed);
                if record.revision == 0 {
                    self.seen[entry.partition()].push(entry);
                } else {
                    self.revised.push((self.kind, Revised { entry, revision: record.revision, void: false }));
                }
                let secs = record.timestamp.secs;
                self.span = self.span.merge(Span::at(secs));
                // `Selector::select`, with the account's buckets looked up
                // once per scan and account rather than once per row. The
                // times of an account in scope are noted whatever the
                // other filters (what dates it covers).
                if self.in_scope(record.auth_id) {
                    let account = self.strings.intern(record.auth_id);
                    self.note_time(account, secs);
                    if self.selector.keeps_in_scope(&Dims::of(&record)) {
                        let bucket = self.buckets_of(account).and_then(|b| b.index(secs));
                        if let Some(bucket) = bucket {
                            self.keep(&record, account, bucket, line);
                        }
                    }
                }
                true
            }
            Err(e) => self.bad_rows.refused(self.kind, line, e),
        }
    }

    fn malformed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.read += 1;
        self.bad_rows.reject(line, column, value, reason)
    }

    fn unframed(&mut self, line: u64, column: &str, value: String, reason: String) -> bool {
        self.read += 1;
        self.bad_rows.unframed(line, column, value, reason)
    }
}

fn conflict(inventory: &Inventory, kind: Kind, found: Conflict) -> Error {
    let location = |place: Place| {
        let input = &inventory.files[place.file as usize];
        Location { file: input.name.clone(), line: place.line, is_row: input.format == Format::Parquet }
    };
    let input = &inventory.files[found.earlier.file as usize];
    Error::Conflict {
        kind: kind.name(),
        record_id: records::record_id_at(input, found.earlier.line).ok().flatten().unwrap_or_else(|| "?".to_owned()),
        first: location(found.earlier),
        second: location(found.later),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{Country, Direction};

    /// The charges tally of a data folder holding `rows` as one charges
    /// file, or the error.
    fn charges_tally(rows: &[&str]) -> Result<Tally> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("charges")).unwrap();
        let mut text = "record_id,auth_id,timestamp,description,units,amount\n".to_owned();
        for row in rows {
            text.push_str(row);
            text.push('\n');
        }
        std::fs::write(dir.path().join("charges/a.csv"), text).unwrap();
        let selector =
            Selector::everything(super::super::Bucketing { default: None, by_account: FxHashMap::default() });
        let options = AggregateOptions { on_bad_row: OnBadRow::Fail, ..AggregateOptions::default() };
        let aggregate = crate::aggregate::aggregate(dir.path(), &selector, options)?;
        Ok(aggregate.tallies.get(&Kind::Charges).copied().unwrap_or_default())
    }

    #[test]
    fn ids_whose_hashes_collide_are_told_apart_by_reading_them_again() {
        // Under cfg(test) the ids `collide*` share one 64-bit id hash at the
        // first seed (`dedup::test_collisions`).
        let a = "collide-a,A1,2026-11-20T00:00:00Z,CNAM,1,0.5";
        let b = "collide-b,A1,2026-11-20T00:00:00Z,CNAM,2,0.5";
        let tally = charges_tally(&[a, b, "x,A1,2026-11-20T00:00:00Z,CNAM,1,0.5"]).unwrap();
        assert_eq!((tally.read, tally.used, tally.duplicates), (3, 3, 0));
        // The same content under two colliding ids is no duplicate either.
        let b_like_a = "collide-b,A1,2026-11-20T00:00:00Z,CNAM,1,0.5";
        let tally = charges_tally(&[a, b_like_a]).unwrap();
        assert_eq!((tally.read, tally.used, tally.duplicates), (2, 2, 0));
        // A real re-delivery among collisions is still one.
        let tally = charges_tally(&[a, b, a, b_like_a.replace("collide-b", "collide-c").as_str()]).unwrap();
        assert_eq!((tally.read, tally.used, tally.duplicates), (4, 3, 1));
        // And a real conflict is still a conflict, naming its id and places.
        let a_changed = "collide-a,A1,2026-11-20T00:00:00Z,CNAM,1,0.6";
        match charges_tally(&[a, b, a_changed]) {
            Err(Error::Conflict { record_id, first, second, .. }) => {
                assert_eq!(record_id, "collide-a");
                assert_eq!((first.line, second.line), (2, 4));
            }
            other => panic!("expected a conflict: {other:?}"),
        }
    }

    #[test]
    fn report_order_sorts_like_the_owned_keys() {
        let mut strings = Interner::with_empty();
        let texts = ["", "b", "a", "zz", "A", "sms", "pstn", "4000", "30", "Number Charges", "SA1", "SA0"];
        let ids: Vec<u32> = texts.iter().map(|t| strings.intern(t)).collect();
        let countries = [None, Country::parse(b"US"), Country::parse(b"CA")];
        let directions = [None, Some(Direction::Inbound), Some(Direction::Outbound)];
        let mut keys = Vec::new();
        for n in crate::aggregate::dims::walk(4000) {
            let pick = |shift: u32, len: usize| (n >> shift) as usize % len;
            let dims = Dims {
                product: Product::ALL[pick(12, Product::ALL.len())],
                type_: ids[pick(16, ids.len())],
                subaccount: ids[pick(24, ids.len())],
                country: countries[pick(32, 3)],
                direction: directions[pick(36, 3)],
                code: ids[pick(40, ids.len())],
            };
            keys.push(IdKey { account: ids[pick(0, ids.len())], bucket: pick(8, 3) as u32, dims });
        }
        let ranks = strings.ranks();
        let mut by_rank = keys.clone();
        by_rank.sort_by_key(|k| report_order(k, &ranks));
        let ranked: Vec<GroupKey> = by_rank.iter().map(|k| k.owned(&strings)).collect();
        let mut owned: Vec<GroupKey> = keys.iter().map(|k| k.owned(&strings)).collect();
        owned.sort();
        assert_eq!(ranked, owned);
    }
}
