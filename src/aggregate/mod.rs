//! From files to grouped totals, in one parallel pass.
//!
//! Every file (or chunk of a large CSV file) is read by its own [`Scan`]:
//! rows are checked against the contract, every row leaves a dedup entry,
//! and the rows a [`Selector`] keeps are grouped under file-local interned
//! keys with their values. After the dedup check, each scan folds its kept
//! rows (skipping duplicates) into dense per-group [`Totals`]; the scans'
//! strings go into one shared interner, groups merge under integer keys, and
//! owned [`GroupKey`]s are built once at the end. Totals are integer sums, so
//! the result does not depend on how the work was split or on thread count.
//!
//! Corrections (`corrections.md`): a row of a revision above 0, and every
//! row of `voids/`, leaves a revised entry under the record kind it
//! belongs to; the dedup check keeps only each record's current version
//! and the fold skips superseded rows as it skips duplicates, so nothing
//! is added and then taken away. A pass without corrections takes the
//! check's plain path and pays nothing for them.
//!
//! - `select`: what a pass keeps ([`Selector`]);
//! - `scan`: the [`Scan`] of a file, the dedup marking and the partitioned
//!   merge;
//! - `totals`: [`Totals`], [`Tally`], [`GroupKey`];
//! - `dims`: a row's dimensions ([`Dims`]), held by every key type, and
//!   the report's row order, the one definition of it;
//! - `rows`: one account's result, compact, for pages and reports.

#[cfg(test)]
mod corrections_test;
pub(crate) mod dims;
pub(crate) mod rows;
mod scan;
mod select;
mod totals;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::AtomicU64;

pub use self::dims::Dims;
pub use self::scan::Scan;
pub use self::select::{AccountScope, Bucketing, Selector};
pub(crate) use self::totals::sum_sorted;
pub use self::totals::{GroupKey, Groups, Span, Tally, Totals};
use crate::error::{BadRecord, Result};
pub use crate::records::bad_rows::OnBadRow;
use crate::records::files::Inventory;
use crate::records::Kind;

/// How a pass runs, beside what it keeps (the [`Selector`]): what to do
/// with a bad row, and who hears how far it got. The default fails on the
/// first bad row and tells no one.
#[derive(Clone, Copy, Default)]
pub struct AggregateOptions<'a> {
    /// Fail on a bad row, or set it aside.
    pub on_bad_row: OnBadRow,
    /// Called with the bytes of the input files fully read so far, each time
    /// one more file is (from the pass's threads, so not always in order).
    pub on_read: Option<&'a (dyn Fn(u64) + Sync)>,
    /// With [`OnBadRow::SetAside`]: a folder where the rows each file sets
    /// aside are written as soon as it is read ([`Aggregate::spooled`]),
    /// rather than held ([`Aggregate::rejects`]) until the pass ends.
    pub spool: Option<&'a Path>,
}

impl std::fmt::Debug for AggregateOptions<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AggregateOptions")
            .field("on_bad_row", &self.on_bad_row)
            .field("on_read", &self.on_read.map(|_| "Fn(u64)"))
            .field("spool", &self.spool)
            .finish()
    }
}

/// The result of a pass over a data directory.
#[derive(Debug, Default)]
pub struct Aggregate {
    /// Totals per group.
    pub groups: Groups,
    /// Counts per kind.
    pub tallies: BTreeMap<Kind, Tally>,
    /// Rows set aside, in file order (none with [`AggregateOptions::spool`]).
    pub rejects: Vec<BadRecord>,
    /// With [`AggregateOptions::spool`]: the files of the rows set aside,
    /// in file order, for [`write_rejected`](crate::records::bad_rows::write_rejected).
    pub spooled: Vec<crate::records::bad_rows::RejectSpool>,
    /// The files read.
    pub inventory: Inventory,
    /// The times of the records of each account in the selector's scope
    /// (whatever the window and the other filters), for a warning when a
    /// window holds none: from the pass at no extra cost.
    pub spans: BTreeMap<String, Span>,
    /// The times of every valid record read.
    pub span: Option<Span>,
}

/// Reads every record file under `data` once and aggregates what
/// `selector` keeps.
pub fn aggregate(data: &Path, selector: &Selector, options: AggregateOptions<'_>) -> Result<Aggregate> {
    let inventory = Inventory::scan(data)?;
    aggregate_files(inventory, selector, options)
}

/// One account's rows from a pass over every record file under `data`
/// (`selector` keeps that account alone): the rows in the report's order,
/// usage and charges apart, and the pass (with no groups: they are the
/// rows).
pub(crate) fn account_rows(
    data: &Path,
    selector: &Selector,
    account: &str,
    options: AggregateOptions<'_>,
) -> Result<(rows::AccountRows, Aggregate)> {
    let inventory = Inventory::scan(data)?;
    let (rows, merged) = pass(&inventory, selector, options, |scans| scan::merge_account(scans, account))?;
    Ok((rows, merged.into_aggregate(inventory)))
}

/// [`aggregate`] over an inventory already taken.
pub fn aggregate_files(inventory: Inventory, selector: &Selector, options: AggregateOptions<'_>) -> Result<Aggregate> {
    let merged = pass(&inventory, selector, options, scan::merge)?;
    Ok(merged.into_aggregate(inventory))
}

/// The pass over `inventory`'s files: every file scanned, duplicates
/// dropped, and the scans given to `merge`.
fn pass<T>(
    inventory: &Inventory,
    selector: &Selector,
    options: AggregateOptions<'_>,
    merge: impl FnOnce(Vec<scan::Scan<'_>>) -> Result<T>,
) -> Result<T> {
    let fail_at = AtomicU64::new(u64::MAX);
    let mut scans = scan::scan_files(inventory, selector, options, &fail_at)?;
    scan::drop_duplicates(&mut scans, inventory, selector)?;
    scan::current_spans(&mut scans, inventory, selector)?;
    merge(scans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Buckets;

    /// One account's pass without owned keys gives the rows, counts and
    /// spans of the pass with them: each account of the sample data, by
    /// day and in one bucket (where rows of several days sum).
    #[test]
    fn one_accounts_rows_are_its_groups_of_the_full_pass() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_data");
        let day = 86_400;
        let start = 1_790_000_000 - 1_790_000_000 % day - 120 * day;
        let days: Vec<i64> = (0..=240).map(|i| start + i * day).collect();
        let (mut usage, mut charges) = (0, 0);
        for bounds in [days, vec![start, start + 240 * day]] {
            let buckets = Buckets::from_bounds(bounds, chrono_tz::Tz::UTC);
            for account in
                ["MA001SHGA32ZDQYG9N8T", "MA002PCHQ444XLFXQN5B", "MA003GM22SVQQT8ZPDNQ", "MA004DEFGZHA3AU3ZWLC"]
            {
                let selector = Selector {
                    accounts: AccountScope::one(account),
                    ..Selector::everything(Bucketing::shared(buckets.clone()))
                };
                let full = aggregate(&data, &selector, AggregateOptions::default()).expect("a pass");
                let (rows, pass) =
                    account_rows(&data, &selector, account, AggregateOptions::default()).expect("a pass");
                let expected = rows::AccountRows::of_groups(&full.groups, account);
                let listed = |rows: &rows::AccountRows| {
                    let list = |part: &[(rows::PackedKey, Totals)]| {
                        let part = rows::Rows::new(rows.strings.clone(), part.to_vec());
                        part.iter().map(|(key, totals)| (key.to_group_key(account), *totals)).collect::<Vec<_>>()
                    };
                    (list(&rows.usage), list(&rows.charges))
                };
                assert_eq!(listed(&rows), listed(&expected), "{account}");
                (usage, charges) = (usage + rows.usage.len(), charges + rows.charges.len());
                assert!(pass.groups.is_empty());
                assert_eq!((pass.tallies, pass.spans, pass.span), (full.tallies, full.spans, full.span));
            }
        }
        assert!(usage > 20 && charges > 4, "{usage} usage rows, {charges} charges");
    }
}
