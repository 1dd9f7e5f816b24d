//! `manifest.json`: what a run read, wrote and checked. The file is a
//! contract (`tests/golden/report/sample/manifest.json` is its golden file):
//! these types are only its shapes, and their field order is the file's.
//! Also the checks whose results it records: the counts add up
//! ([`check_counts`]) and the accounts reconcile with the pass
//! ([`reconcile`]).

use std::collections::BTreeMap;

use chrono::SecondsFormat;
use serde::Serialize;

use super::options::{Formats, PageFiles, ReportRequest};
use crate::aggregate::{AccountScope, OnBadRow, Tally};
use crate::error::{Error, Result};
use crate::money::Amount;
use crate::records::Product;
use crate::summary::wire::Decimal;
use crate::summary::Batch;

/// Name of the manifest in the output folder.
pub const MANIFEST: &str = "manifest.json";
/// What the manifest's `generator` says; an existing output folder is only
/// replaced when its manifest says this (or when it is empty).
pub const GENERATOR: &str = "telemeter report";

/// One input file in the manifest.
#[derive(Debug, Serialize)]
pub(super) struct InputEntry {
    pub(super) file: String,
    pub(super) kind: &'static str,
    pub(super) size: u64,
    pub(super) sha256: String,
}

/// The store generation a report was built from (what a later
/// `telemeter changes --since-report` starts after), and the rows its
/// ingests set aside, which no report of it holds.
#[derive(Debug, Serialize)]
pub(super) struct StoreEntry {
    /// The generation the report read (its manifest read once).
    pub(super) generation: u64,
    /// The id of that generation's latest ingest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) ingest: Option<String>,
    /// The XXH3-128 its manifest records of itself (stores of format 6
    /// and later).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) manifest_checksum: Option<String>,
    /// Rows the store's ingests set aside, never stored (so never in this
    /// report).
    pub(super) set_aside_at_ingest: u64,
    /// The store's files that list those rows (`rejected/<ingest>.csv`).
    pub(super) rejected: Vec<String>,
}

/// The months that changed since a previous report of the same store:
/// per account, each month (`YYYY-MM` in its zone) where an ingest after
/// that report's generation added, restated or withdrew a record
/// (`store::changes`).
#[derive(Debug, Serialize)]
pub(super) struct ChangesEntry {
    /// The previous report's generation.
    pub(super) generation: u64,
    /// Changed months by account; an account without any is left out.
    pub(super) months: BTreeMap<String, Vec<String>>,
}

impl ChangesEntry {
    pub(super) fn since(store: &crate::store::Store, generation: u64) -> crate::error::Result<ChangesEntry> {
        let ledger = crate::store::changes::since(store, generation, None)?;
        let mut months: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for key in ledger.keys() {
            let list = months.entry(key.auth_id.clone()).or_default();
            let month = key.month.to_string();
            if list.last() != Some(&month) {
                list.push(month);
            }
        }
        Ok(ChangesEntry { generation, months })
    }
}

impl StoreEntry {
    pub(super) fn of(store: &crate::store::Store) -> StoreEntry {
        let manifest = &store.manifest;
        StoreEntry {
            generation: manifest.generation,
            ingest: manifest.ingests.last().map(|ingest| ingest.id.clone()),
            manifest_checksum: manifest.checksum.clone(),
            set_aside_at_ingest: manifest.set_aside(),
            rejected: manifest.ingests.iter().filter_map(|ingest| ingest.rejected.clone()).collect(),
        }
    }
}

/// Checks `read = used + set aside + duplicates + superseded + voids` for
/// every kind (and `voids/`) and that every row set aside is listed; the
/// totals over all kinds.
pub(super) fn check_counts(batch: &Batch) -> Result<Tally> {
    let mut all = Tally::default();
    for (kind, tally) in &batch.aggregate.tallies {
        if !tally.adds_up() {
            return Err(Error::Internal(format!(
                "counts of {} do not add up: read {} != used {} + set aside {} + duplicates {} + superseded {} + voids {}",
                kind.name(),
                tally.read,
                tally.used,
                tally.set_aside,
                tally.duplicates,
                tally.superseded,
                tally.voids
            )));
        }
        all += *tally;
    }
    let aggregate = &batch.aggregate;
    let listed = aggregate.rejects.len() as u64 + aggregate.spooled.iter().map(|s| s.rows()).sum::<u64>();
    if all.set_aside != listed {
        return Err(Error::Internal(format!("{} rows set aside but {listed} listed", all.set_aside)));
    }
    Ok(all)
}

/// One account in the manifest.
#[derive(Debug, Serialize)]
pub(super) struct AccountEntry {
    pub(super) auth_id: String,
    pub(super) dir: String,
    pub(super) currency: String,
    pub(super) timezone: &'static str,
    pub(super) from_date: String,
    pub(super) to_date: String,
    pub(super) pages: u64,
    /// `DIR/pages.jsonl` with `--pages jsonl` (the pages, one per line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) pages_file: Option<String>,
    pub(super) usage_rows: u64,
    pub(super) records: u64,
    pub(super) usage_spend: Decimal,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) other_charges_spend: Option<Decimal>,
    pub(super) total_spend: Decimal,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) subaccount_spend: Option<BTreeMap<String, Decimal>>,
    /// `total_spend` = sum of the rows' `total_amount` + sum of the other
    /// charges, as written in the pages.
    pub(super) reconciled: bool,
}

/// What one account's files say, for the index and the manifest.
pub(super) struct Written {
    pub(super) entry: AccountEntry,
    pub(super) total_spend: Amount,
    pub(super) records: u64,
}

/// The run-wide check: the accounts' totals add up to the sum of every
/// group the pass kept (computed here from the aggregate, not from the
/// summaries), currency by currency (an account's groups are in its
/// currency; amounts of two currencies are never added), and their records
/// to the rows the pass selected.
#[derive(Debug, Serialize)]
pub(super) struct Reconciliation {
    pub(super) accounts_checked: usize,
    pub(super) sum_of_account_total_spend: BTreeMap<String, Decimal>,
    pub(super) sum_of_selected_records: BTreeMap<String, Decimal>,
    pub(super) account_records: u64,
    pub(super) selected_records: u64,
    pub(super) ok: bool,
}

pub(super) fn reconcile(batch: &Batch, written: &[Written]) -> Result<Reconciliation> {
    let mut accounts_sum: BTreeMap<String, Amount> = BTreeMap::new();
    let mut account_records = 0u64;
    for w in written {
        let sum = accounts_sum.entry(w.entry.currency.clone()).or_insert(Amount::ZERO);
        *sum = sum.checked_add(w.total_spend).ok_or_else(overflow)?;
        account_records += w.records;
    }
    let mut groups_sum: BTreeMap<String, i128> = BTreeMap::new();
    let mut group_records = 0u64;
    for (key, totals) in batch.aggregate.groups.iter() {
        let Some(summary) = batch.summaries.get(&key.account) else {
            return Err(Error::Internal(format!(
                "reconciliation failed: account '{}' has records in the window but no summary",
                key.account
            )));
        };
        let sum = groups_sum.entry(summary.currency.clone()).or_insert(0);
        *sum = sum.checked_add(totals.amount).ok_or_else(overflow)?;
        group_records += totals.records;
    }
    let groups_sum: BTreeMap<String, Amount> =
        groups_sum.into_iter().map(|(currency, nanos)| (currency, Amount::from_nanos(nanos))).collect();
    // A currency with accounts but no records in the window sums to zero
    // on both sides.
    let nonzero = |sums: &BTreeMap<String, Amount>| -> BTreeMap<String, Amount> {
        sums.iter().filter(|(_, a)| **a != Amount::ZERO).map(|(c, a)| (c.clone(), *a)).collect()
    };
    let selected: u64 = batch.aggregate.tallies.values().map(|t| t.selected).sum();
    let ok =
        nonzero(&accounts_sum) == nonzero(&groups_sum) && account_records == group_records && group_records == selected;
    if !ok {
        return Err(Error::Internal(format!(
            "reconciliation failed: accounts total {} over {account_records} records, \
             but the records in the window sum to {} over {group_records} records ({selected} selected)",
            by_currency(&accounts_sum),
            by_currency(&groups_sum)
        )));
    }
    let mut selected_sums = groups_sum;
    for currency in accounts_sum.keys() {
        selected_sums.entry(currency.clone()).or_insert(Amount::ZERO);
    }
    let decimals = |sums: BTreeMap<String, Amount>| sums.into_iter().map(|(c, a)| (c, Decimal(a))).collect();
    Ok(Reconciliation {
        accounts_checked: written.len(),
        sum_of_account_total_spend: decimals(accounts_sum),
        sum_of_selected_records: decimals(selected_sums),
        account_records,
        selected_records: selected,
        ok,
    })
}

/// `10 EUR + 10 USD` for a message (`0` when empty).
fn by_currency(sums: &BTreeMap<String, Amount>) -> String {
    if sums.is_empty() {
        return "0".to_owned();
    }
    sums.iter().map(|(currency, amount)| format!("{amount} {currency}")).collect::<Vec<_>>().join(" + ")
}

#[derive(Debug, Serialize)]
pub(super) struct ReportManifest<'a> {
    pub(super) generator: &'static str,
    pub(super) version: &'static str,
    pub(super) request: RequestEntry,
    /// The store generation read (absent for a report of raw files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) store: Option<StoreEntry>,
    /// With `--changes-since`: the months each account's data changed in
    /// since the previous report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) changes_since: Option<ChangesEntry>,
    pub(super) inputs: &'a [InputEntry],
    pub(super) ignored_files: &'a [String],
    pub(super) counts: BTreeMap<&'static str, CountEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) rejected_file: Option<&'static str>,
    pub(super) spend_by_currency: BTreeMap<String, Decimal>,
    pub(super) accounts: Vec<AccountEntry>,
    /// Ids of `--accounts` that neither `accounts.csv` nor any record
    /// knows: no folder written (absent when there are none).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub(super) skipped_accounts: &'a [String],
    pub(super) reconciliation: Reconciliation,
}

#[derive(Debug, Serialize)]
pub(super) struct RequestEntry {
    pub(super) query: String,
    pub(super) accounts: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) now: Option<String>,
    pub(super) on_bad_row: &'static str,
    /// Only when not every format is written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) formats: Option<Vec<&'static str>>,
    /// Only with `--pages jsonl`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) pages: Option<&'static str>,
    pub(super) granularity: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) from_date: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) to_date: Option<String>,
    pub(super) product: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) subaccount_auth: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) error_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) hangup_cause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) direction: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) country: Option<String>,
    pub(super) page_size: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) timezone: Option<&'static str>,
}

impl RequestEntry {
    pub(super) fn of(request: &ReportRequest<'_>) -> RequestEntry {
        let p = request.batch.params;
        let accounts = match request.batch.accounts {
            AccountScope::All => serde_json::Value::from("all"),
            AccountScope::Some(set) => serde_json::Value::from(set.iter().cloned().collect::<Vec<_>>()),
        };
        RequestEntry {
            query: request.query.to_owned(),
            accounts,
            now: request.now_given.then(|| request.batch.now.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
            on_bad_row: match request.batch.on_bad_row {
                OnBadRow::Fail => "fail",
                OnBadRow::SetAside => "set-aside",
            },
            formats: (request.formats != Formats::ALL).then(|| request.formats.names()),
            pages: (request.pages != PageFiles::default()).then(|| request.pages.name()),
            granularity: p.granularity.as_str(),
            from_date: p.from_date.map(|d| d.to_string()),
            to_date: p.to_date.map(|d| d.to_string()),
            product: p.products.iter().map(Product::as_str).collect(),
            subaccount_auth: p.subaccount_auth.clone(),
            error_code: p.error_code.clone(),
            hangup_cause: p.hangup_cause.clone(),
            direction: p.direction.map(|d| d.as_str()),
            country: p.country.as_ref().map(|c| c.as_str().to_owned()),
            page_size: p.page_size,
            timezone: p.timezone.map(|tz| tz.name()),
        }
    }
}

#[derive(Debug, Serialize)]
pub(super) struct CountEntry {
    pub(super) read: u64,
    pub(super) used: u64,
    pub(super) set_aside: u64,
    pub(super) duplicates: u64,
    pub(super) superseded: u64,
    pub(super) voids: u64,
    pub(super) selected: u64,
}

pub(super) fn counts_entry(batch: &Batch, all: Tally) -> BTreeMap<&'static str, CountEntry> {
    let entry = |t: &Tally| CountEntry {
        read: t.read,
        used: t.used,
        set_aside: t.set_aside,
        duplicates: t.duplicates,
        superseded: t.superseded,
        voids: t.voids,
        selected: t.selected,
    };
    let mut counts: BTreeMap<&'static str, CountEntry> =
        batch.aggregate.tallies.iter().map(|(kind, t)| (kind.name(), entry(t))).collect();
    counts.insert("all", entry(&all));
    counts
}

pub(super) fn overflow() -> Error {
    Error::Internal("sum overflow while writing the report".to_owned())
}
