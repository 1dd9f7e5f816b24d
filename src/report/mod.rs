//! The nightly batch: every account's report written to one output folder,
//! atomically, with a manifest that proves the numbers add up.
//!
//! [`write_reports`] runs [`build_many`] (one pass over the data for all
//! accounts) while the input files are hashed, cuts every account's pages
//! with the same [`Summary::pages`] as `summary`, renders the CSV and HTML
//! files, checks the reconciliation and only then moves the finished folder
//! into place. Nothing here reads the clock or prints: progress goes to a
//! callback and `now` comes in as a value.

pub mod csv_out;
pub mod html;
pub mod options;

pub use options::{Formats, Progress, ReportRequest};

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use chrono::SecondsFormat;
use rayon::prelude::*;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::aggregate::{AccountScope, OnBadRow, Tally};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::money::Amount;
use crate::records::files::Inventory;
use crate::records::Product;
use crate::summary::wire::Decimal;
use crate::summary::{build_many, to_json, Batch, Summary};
use crate::time::format_instant;
use crate::token::TokenKey;

/// Name of the manifest in the output folder.
pub const MANIFEST: &str = "manifest.json";
/// What the manifest's `generator` says; an existing output folder is only
/// replaced when its manifest says this (or when it is empty).
pub const GENERATOR: &str = "telemeter report";

/// What a finished run produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Accounts written.
    pub accounts: usize,
    /// Usage rows written, over all accounts.
    pub usage_rows: u64,
    /// Rows read, used, set aside and duplicated, over all kinds.
    pub counts: Tally,
    /// Total spend per currency.
    pub spend: BTreeMap<String, Amount>,
}

/// Builds every account's report from `dataset` and writes it to `out`,
/// replacing a previous report there (never any other folder).
pub fn write_reports(
    dataset: &Dataset,
    request: &ReportRequest<'_>,
    key: &TokenKey,
    out: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    check_replaceable(out)?;
    remove_stale(out);
    let inventory = Inventory::scan(&dataset.dir)?;
    let bytes = inventory.files.iter().map(|f| f.size).sum();
    progress(Progress::Reading { files: inventory.files.len(), bytes });
    let (batch, inputs) = rayon::join(
        || {
            let bytes_read = request.bytes_read.clone();
            build_many(
                dataset,
                request.params,
                request.accounts.clone(),
                request.now,
                request.on_bad_row,
                key,
                bytes_read,
            )
        },
        || hash_inputs(&dataset.dir, &inventory),
    );
    let (batch, inputs) = (batch?, inputs?);
    check_inputs_unchanged(&inventory, &batch.aggregate.inventory)?;
    let counts = check_counts(&batch)?;
    progress(Progress::Writing { rows_read: counts.read, accounts: batch.summaries.len() });

    let staging = staging_dir(out, "tmp")?;
    let result = write_all(&batch, request, key, &inputs, counts, &staging, progress);
    match result {
        Ok(outcome) => {
            swap_into_place(&staging, out)?;
            Ok(outcome)
        }
        Err(error) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(error)
        }
    }
}

/// The folder of an account inside the output folder: the `auth_id` with
/// every byte outside `[A-Za-z0-9._-]` percent-encoded, a leading `.`
/// encoded (no hidden or `..` folders), and names of the run's own files
/// (`index.html`, `manifest.json`, `rejected.csv`) made distinct.
pub fn account_dir(auth_id: &str) -> String {
    let mut out = String::with_capacity(auth_id.len());
    for (i, b) in auth_id.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_') || (b == b'.' && i > 0);
        if plain {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if matches!(out.as_str(), "index.html" | "manifest.json" | "rejected.csv") {
        out = out.replacen('.', "%2E", 1);
    }
    out
}

/// One input file in the manifest.
#[derive(Debug, Serialize)]
struct InputEntry {
    file: String,
    kind: &'static str,
    size: u64,
    sha256: String,
}

fn hash_inputs(data: &Path, inventory: &Inventory) -> Result<Vec<InputEntry>> {
    let mut files: Vec<(PathBuf, String, &'static str)> =
        inventory.files.iter().map(|f| (f.path.clone(), f.name.clone(), f.kind.name())).collect();
    let accounts = data.join("accounts.csv");
    if accounts.is_file() {
        files.insert(0, (accounts, "accounts.csv".to_owned(), "accounts"));
    }
    files
        .par_iter()
        .map(|(path, name, kind)| {
            let (size, sha256) = hash_file(path)?;
            Ok(InputEntry { file: name.clone(), kind, size, sha256 })
        })
        .collect()
}

fn hash_file(path: &Path) -> Result<(u64, String)> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut hash = Sha256::new();
    let mut buffer = vec![0u8; 1 << 16];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buffer).map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        size += n as u64;
        hash.update(&buffer[..n]);
    }
    let hex = hash.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Ok((size, hex))
}

fn check_inputs_unchanged(before: &Inventory, after: &Inventory) -> Result<()> {
    let names = |i: &Inventory| i.files.iter().map(|f| (f.name.clone(), f.size)).collect::<Vec<_>>();
    if names(before) != names(after) {
        return Err(Error::Internal(
            "the input files changed while the report was being built (files added, removed or resized); run again"
                .to_owned(),
        ));
    }
    Ok(())
}

/// Checks `read = used + set aside + duplicates` for every kind and that
/// every row set aside is listed; the totals over all kinds.
fn check_counts(batch: &Batch) -> Result<Tally> {
    let mut all = Tally::default();
    for (kind, tally) in &batch.aggregate.tallies {
        if tally.read != tally.used + tally.set_aside + tally.duplicates {
            return Err(Error::Internal(format!(
                "counts of {} do not add up: read {} != used {} + set aside {} + duplicates {}",
                kind.name(),
                tally.read,
                tally.used,
                tally.set_aside,
                tally.duplicates
            )));
        }
        all += *tally;
    }
    if all.set_aside != batch.aggregate.rejects.len() as u64 {
        return Err(Error::Internal(format!(
            "{} rows set aside but {} listed",
            all.set_aside,
            batch.aggregate.rejects.len()
        )));
    }
    Ok(all)
}

/// One account in the manifest.
#[derive(Debug, Serialize)]
struct AccountEntry {
    auth_id: String,
    dir: String,
    currency: String,
    timezone: &'static str,
    from_date: String,
    to_date: String,
    pages: u64,
    usage_rows: u64,
    records: u64,
    usage_spend: Decimal,
    #[serde(skip_serializing_if = "Option::is_none")]
    other_charges_spend: Option<Decimal>,
    total_spend: Decimal,
    #[serde(skip_serializing_if = "Option::is_none")]
    subaccount_spend: Option<BTreeMap<String, Decimal>>,
    /// `total_spend` = sum of the rows' `total_amount` + sum of the other
    /// charges, as written in the pages.
    reconciled: bool,
}

/// What one account's files say, for the index and the manifest.
struct Written {
    entry: AccountEntry,
    total_spend: Amount,
    records: u64,
}

fn write_all(
    batch: &Batch,
    request: &ReportRequest<'_>,
    key: &TokenKey,
    inputs: &[InputEntry],
    counts: Tally,
    staging: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    let accounts: Vec<(&String, &Summary)> = batch.summaries.iter().collect();
    let total = accounts.len();
    // Largest accounts first, each thread taking the next one when it is
    // done, so the biggest account does not start last.
    let mut order: Vec<usize> = (0..total).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(accounts[i].1.rows.len()));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let results: Vec<Mutex<Option<Result<Written>>>> = (0..total).map(|_| Mutex::new(None)).collect();
    rayon::scope(|scope| {
        for _ in 0..rayon::current_num_threads().min(total) {
            scope.spawn(|_| loop {
                let at = next.fetch_add(1, Ordering::Relaxed);
                let Some(&i) = order.get(at) else { break };
                if failed.load(Ordering::Relaxed) {
                    break;
                }
                let (auth_id, summary) = accounts[i];
                let result = write_account(auth_id, summary, request.query, request.formats, key, staging);
                if result.is_err() {
                    failed.store(true, Ordering::Relaxed);
                } else {
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    progress(Progress::AccountDone { done: n, total });
                }
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(result);
                }
            });
        }
    });
    // In account order; the first failed account (by id) is the error.
    let mut written = Vec::with_capacity(total);
    let mut missing = false;
    for slot in results {
        match slot.into_inner().map_err(|_| Error::Internal("a report thread panicked".to_owned()))? {
            Some(result) => written.push(result?),
            None => missing = true,
        }
    }
    if missing {
        return Err(Error::Internal("an account's report was not written".to_owned()));
    }

    let reconciliation = reconcile(batch, &written)?;
    let mut outcome = Outcome { accounts: written.len(), counts, ..Outcome::default() };
    for w in &written {
        outcome.usage_rows += w.entry.usage_rows;
        let spend = outcome.spend.entry(w.entry.currency.clone()).or_default();
        *spend = spend.checked_add(w.total_spend).ok_or_else(overflow)?;
    }

    if request.on_bad_row == OnBadRow::SetAside {
        write_file(&staging.join("rejected.csv"), &csv_out::rejected_csv(&batch.aggregate.rejects)?)?;
    }
    let entries: Vec<html::IndexEntry<'_>> = written
        .iter()
        .map(|w| html::IndexEntry {
            auth_id: &w.entry.auth_id,
            dir: &w.entry.dir,
            currency: &w.entry.currency,
            timezone: w.entry.timezone,
            window: (w.entry.from_date.clone(), w.entry.to_date.clone()),
            rows: w.entry.usage_rows as usize,
            total_spend: w.total_spend,
        })
        .collect();
    let index_counts = html::IndexCounts {
        read: counts.read,
        used: counts.used,
        set_aside: counts.set_aside,
        duplicates: counts.duplicates,
    };
    write_file(
        &staging.join("index.html"),
        html::index(&entries, request.params, request.query, &index_counts, request.formats)?.as_bytes(),
    )?;

    let manifest = Manifest {
        generator: GENERATOR,
        version: env!("CARGO_PKG_VERSION"),
        request: RequestEntry::of(request),
        inputs,
        ignored_files: &batch.aggregate.inventory.ignored,
        counts: counts_entry(batch, counts),
        rejected_file: (request.on_bad_row == OnBadRow::SetAside).then_some("rejected.csv"),
        spend_by_currency: outcome.spend.iter().map(|(c, a)| (c.clone(), Decimal(*a))).collect(),
        accounts: written.into_iter().map(|w| w.entry).collect(),
        reconciliation,
    };
    write_file(&staging.join(MANIFEST), format!("{}\n", to_json(&manifest, true)?).as_bytes())?;
    Ok(outcome)
}

/// Writes one account's folder, page by page: each page is cut, written as
/// JSON and appended to usage.csv and report.html before the next is cut,
/// so memory does not grow with the account's size.
fn write_account(
    auth_id: &str,
    summary: &Summary,
    query: &str,
    formats: Formats,
    key: &TokenKey,
    staging: &Path,
) -> Result<Written> {
    let dir_name = account_dir(auth_id);
    let dir = staging.join(&dir_name);
    std::fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    let first = summary.page(0, key)?;
    let charges = first.other_charges.as_deref();
    let total_spend =
        first.meta.total_spend.map(|d| d.0).ok_or_else(|| Error::Internal("page 1 without total_spend".into()))?;
    let mut charge_sum = Amount::ZERO;
    for item in charges.into_iter().flatten() {
        charge_sum = charge_sum.checked_add(item.total_amount.0).ok_or_else(overflow)?;
    }

    let mut csv = None;
    let mut report = None;
    if formats.csv {
        let path = dir.join("other_charges.csv");
        write_file(&path, &csv_out::charges_csv(charges.into_iter().flatten())?)?;
        let path = dir.join("usage.csv");
        csv = Some(csv_out::UsageCsv::new(create(&path)?, path)?);
    }
    if formats.html {
        let path = dir.join("report.html");
        let page = html::AccountPage { summary, charges, query };
        report = Some(html::AccountReport::start(&page, BufWriter::with_capacity(1 << 16, create(&path)?), path)?);
    }

    let mut usage_sum = Amount::ZERO;
    let mut json = Vec::new();
    let size = summary.request.params.page_size as u64;
    let pages = summary.page_count();
    let mut later;
    for i in 0..pages {
        let page = if i == 0 {
            &first
        } else {
            later = summary.page(i * size, key)?;
            &later
        };
        if formats.json {
            json.clear();
            serde_json::to_writer(&mut json, page).map_err(|e| Error::Internal(format!("cannot write JSON: {e}")))?;
            json.push(b'\n');
            write_file(&dir.join(format!("page-{:04}.json", i + 1)), &json)?;
        }
        for item in &page.usage {
            usage_sum = usage_sum.checked_add(item.total_amount.0).ok_or_else(overflow)?;
            if let Some(csv) = &mut csv {
                csv.row(item)?;
            }
            if let Some(report) = &mut report {
                report.row(item)?;
            }
        }
    }
    if let Some(csv) = csv {
        csv.finish()?;
    }
    if let Some(report) = report {
        let path = dir.join("report.html");
        report.finish()?.into_inner().map_err(|e| Error::io(&path, e.error()))?;
    }

    // Reconcile the account from what the pages say.
    let pages_total = usage_sum.checked_add(charge_sum).ok_or_else(overflow)?;
    if pages_total != total_spend || usage_sum != summary.usage_spend {
        return Err(Error::Internal(format!(
            "reconciliation failed for account {auth_id}: total_spend {total_spend} but rows {usage_sum} + other charges {charge_sum} = {pages_total}"
        )));
    }

    let tz = summary.buckets.tz();
    let records = summary.rows.iter().chain(summary.charges.iter().flatten()).map(|(_, t)| t.records).sum();
    let entry = AccountEntry {
        auth_id: auth_id.to_owned(),
        dir: dir_name,
        currency: summary.currency.clone(),
        timezone: tz.name(),
        from_date: format_instant(summary.request.window.start, tz),
        to_date: format_instant(summary.request.window.end, tz),
        pages,
        usage_rows: summary.rows.len() as u64,
        records,
        usage_spend: Decimal(usage_sum),
        other_charges_spend: charges.map(|_| Decimal(charge_sum)),
        total_spend: Decimal(total_spend),
        subaccount_spend: first
            .meta
            .subaccount_spend
            .as_ref()
            .map(|m| m.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()),
        reconciled: true,
    };
    Ok(Written { entry, total_spend, records })
}

/// The run-wide check: the accounts' totals add up to the sum of every
/// group the pass kept (computed here from the aggregate, not from the
/// summaries), and their records to the rows the pass selected.
#[derive(Debug, Serialize)]
struct Reconciliation {
    accounts_checked: usize,
    sum_of_account_total_spend: Decimal,
    sum_of_selected_records: Decimal,
    account_records: u64,
    selected_records: u64,
    ok: bool,
}

fn reconcile(batch: &Batch, written: &[Written]) -> Result<Reconciliation> {
    let mut accounts_sum = Amount::ZERO;
    let mut account_records = 0u64;
    for w in written {
        accounts_sum = accounts_sum.checked_add(w.total_spend).ok_or_else(overflow)?;
        account_records += w.records;
    }
    let mut groups_sum = 0i128;
    let mut group_records = 0u64;
    for totals in batch.aggregate.groups.values() {
        groups_sum = groups_sum.checked_add(totals.amount).ok_or_else(overflow)?;
        group_records += totals.records;
    }
    let groups_sum = Amount::from_nanos(groups_sum);
    let selected: u64 = batch.aggregate.tallies.values().map(|t| t.selected).sum();
    let ok = accounts_sum == groups_sum && account_records == group_records && group_records == selected;
    if !ok {
        return Err(Error::Internal(format!(
            "reconciliation failed: accounts total {accounts_sum} over {account_records} records, \
             but the records in the window sum to {groups_sum} over {group_records} records ({selected} selected)"
        )));
    }
    Ok(Reconciliation {
        accounts_checked: written.len(),
        sum_of_account_total_spend: Decimal(accounts_sum),
        sum_of_selected_records: Decimal(groups_sum),
        account_records,
        selected_records: selected,
        ok,
    })
}

#[derive(Debug, Serialize)]
struct Manifest<'a> {
    generator: &'static str,
    version: &'static str,
    request: RequestEntry,
    inputs: &'a [InputEntry],
    ignored_files: &'a [String],
    counts: BTreeMap<&'static str, CountEntry>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rejected_file: Option<&'static str>,
    spend_by_currency: BTreeMap<String, Decimal>,
    accounts: Vec<AccountEntry>,
    reconciliation: Reconciliation,
}

#[derive(Debug, Serialize)]
struct RequestEntry {
    query: String,
    accounts: serde_json::Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    now: Option<String>,
    on_bad_row: &'static str,
    /// Only when not every format is written.
    #[serde(skip_serializing_if = "Option::is_none")]
    formats: Option<Vec<&'static str>>,
    granularity: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    from_date: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    to_date: Option<String>,
    product: Vec<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subaccount_auth: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hangup_cause: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    direction: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    country: Option<String>,
    page_size: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    timezone: Option<&'static str>,
}

impl RequestEntry {
    fn of(request: &ReportRequest<'_>) -> RequestEntry {
        let p = request.params;
        let accounts = match request.accounts {
            AccountScope::All => serde_json::Value::from("all"),
            AccountScope::Some(set) => serde_json::Value::from(set.iter().cloned().collect::<Vec<_>>()),
        };
        RequestEntry {
            query: request.query.to_owned(),
            accounts,
            now: request.now_given.then(|| request.now.to_rfc3339_opts(SecondsFormat::AutoSi, true)),
            on_bad_row: match request.on_bad_row {
                OnBadRow::Fail => "fail",
                OnBadRow::SetAside => "set-aside",
            },
            formats: (request.formats != Formats::ALL).then(|| request.formats.names()),
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
struct CountEntry {
    read: u64,
    used: u64,
    set_aside: u64,
    duplicates: u64,
    selected: u64,
}

fn counts_entry(batch: &Batch, all: Tally) -> BTreeMap<&'static str, CountEntry> {
    let entry = |t: &Tally| CountEntry {
        read: t.read,
        used: t.used,
        set_aside: t.set_aside,
        duplicates: t.duplicates,
        selected: t.selected,
    };
    let mut counts: BTreeMap<&'static str, CountEntry> =
        batch.aggregate.tallies.iter().map(|(kind, t)| (kind.name(), entry(t))).collect();
    counts.insert("all", entry(&all));
    counts
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::write(path, bytes).map_err(|e| Error::io(path, e))
}

fn create(path: &Path) -> Result<File> {
    File::create(path).map_err(|e| Error::io(path, e))
}

fn overflow() -> Error {
    Error::Internal("sum overflow while writing the report".to_owned())
}

/// A fresh folder beside `out` (same file system, so the final rename is
/// atomic), named after it and this process.
fn staging_dir(out: &Path, what: &str) -> Result<PathBuf> {
    let path = sibling(out, what)?;
    if path.exists() {
        std::fs::remove_dir_all(&path).map_err(|e| Error::io(&path, e))?;
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
    }
    std::fs::create_dir(&path).map_err(|e| Error::io(&path, e))?;
    Ok(path)
}

fn sibling(out: &Path, what: &str) -> Result<PathBuf> {
    let name = out
        .file_name()
        .ok_or_else(|| Error::io(out, "the output folder needs a name (not `/`, `.` or `..`)"))?
        .to_string_lossy()
        .into_owned();
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    Ok(parent.join(format!(".{name}.{what}-{}", std::process::id())))
}

/// Removes what killed runs left beside `out`: staging folders
/// `.NAME.tmp-PID` of processes that no longer run, and `.NAME.old-PID`
/// ones when `out` exists (a run killed between its two renames leaves the
/// previous report only in `.old`, so that one is kept). Best effort: only
/// where `/proc` tells live processes from dead ones, errors ignored.
fn remove_stale(out: &Path) {
    let Some(name) = out.file_name().and_then(|n| n.to_str()) else { return };
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else { return };
    let own = std::process::id().to_string();
    let out_exists = std::fs::symlink_metadata(out).is_ok();
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        let Some(rest) = file.strip_prefix('.').and_then(|f| f.strip_prefix(name)) else { continue };
        let pid = match (rest.strip_prefix(".tmp-"), rest.strip_prefix(".old-")) {
            (Some(pid), _) => pid,
            (None, Some(pid)) if out_exists => pid,
            _ => continue,
        };
        let dead = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && pid != own && !proc.join(pid).exists();
        if dead && entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Refuses to replace anything but an empty folder or an earlier report.
fn check_replaceable(out: &Path) -> Result<()> {
    let meta = match std::fs::symlink_metadata(out) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(out, e)),
    };
    if !meta.is_dir() {
        return Err(Error::io(out, "exists and is not a folder; refusing to replace it"));
    }
    let mut entries = std::fs::read_dir(out).map_err(|e| Error::io(out, e))?;
    if entries.next().is_none() {
        return Ok(());
    }
    let manifest = out.join(MANIFEST);
    let text = std::fs::read_to_string(&manifest).unwrap_or_default();
    let generator = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|v| v.get("generator").and_then(|g| g.as_str()).map(str::to_owned));
    if generator.as_deref() != Some(GENERATOR) {
        return Err(Error::io(
            out,
            "exists, is not empty and is not an earlier `telemeter report` output (no manifest.json); refusing to replace it",
        ));
    }
    Ok(())
}

/// Moves the finished `staging` folder to `out`. An earlier report at `out`
/// is moved aside first and removed after, so `out` is always either the
/// old report or the new one, complete.
fn swap_into_place(staging: &Path, out: &Path) -> Result<()> {
    if std::fs::symlink_metadata(out).is_err() {
        return std::fs::rename(staging, out).map_err(|e| Error::io(out, e));
    }
    let old = sibling(out, "old")?;
    if old.exists() {
        std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))?;
    }
    std::fs::rename(out, &old).map_err(|e| Error::io(out, e))?;
    if let Err(e) = std::fs::rename(staging, out) {
        let _ = std::fs::rename(&old, out);
        return Err(Error::io(out, e));
    }
    std::fs::remove_dir_all(&old).map_err(|e| Error::io(&old, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{Aggregate, GroupKey, Totals};
    use crate::query::{UsageParams, UsageRequest};
    use crate::summary::summarize;
    use chrono::{DateTime, Utc};

    /// A batch of one account `A` with one usage row of 1.5 and one charge of 2.25.
    fn one_account_batch() -> Batch {
        let now = DateTime::parse_from_rfc3339("2026-11-21T00:00:00Z").unwrap().with_timezone(&Utc);
        let request =
            UsageRequest::resolve("A", UsageParams::default(), now, None, &TokenKey::from_secret("unit tests"))
                .unwrap();
        let buckets = request.window.buckets(request.params.granularity);
        let mut aggregate = Aggregate::default();
        let key = |product: Product, type_: &str| GroupKey {
            account: "A".into(),
            bucket: 0,
            product,
            type_: type_.into(),
            subaccount: None,
            country: None,
            direction: None,
            code: None,
        };
        let totals = |amount: i128| Totals { records: 1, units: 1, duration: 0, amount, surcharge: 0 };
        aggregate.groups.insert(key(Product::Transcription, "standard"), totals(1_500_000_000));
        aggregate.groups.insert(key(Product::Other, "Number Charges"), totals(2_250_000_000));
        aggregate
            .tallies
            .insert(crate::records::Kind::Transcriptions, Tally { read: 1, used: 1, selected: 1, ..Tally::default() });
        aggregate
            .tallies
            .insert(crate::records::Kind::Charges, Tally { read: 1, used: 1, selected: 1, ..Tally::default() });
        let summary = summarize(&request, "USD", &buckets, &aggregate).unwrap();
        Batch { summaries: BTreeMap::from([("A".to_owned(), summary)]), aggregate }
    }

    #[test]
    fn reconciliation_holds_and_fails_on_one_nano_of_difference() {
        let batch = one_account_batch();
        let dir = tempfile::tempdir().unwrap();
        let summary = &batch.summaries["A"];
        let written =
            write_account("A", summary, "", Formats::ALL, &TokenKey::from_secret("unit tests"), dir.path()).unwrap();
        assert_eq!(written.total_spend, Amount::from_nanos(3_750_000_000));
        let check = reconcile(&batch, std::slice::from_ref(&written)).unwrap();
        assert!(check.ok);
        assert_eq!(check.sum_of_selected_records, Decimal(Amount::from_nanos(3_750_000_000)));

        let mut off = written;
        off.total_spend = Amount::from_nanos(3_750_000_001);
        let error = reconcile(&batch, &[off]).unwrap_err().to_string();
        assert!(error.contains("reconciliation failed"), "{error}");

        // A group the accounts do not account for (e.g. a lost account) fails too.
        let mut extra = one_account_batch();
        let written = write_account(
            "A",
            &extra.summaries["A"],
            "",
            Formats::ALL,
            &TokenKey::from_secret("unit tests"),
            &dir.path().join("x"),
        )
        .err();
        assert!(written.is_some(), "the account folder's parent must exist");
        let dir2 = tempfile::tempdir().unwrap();
        let written = write_account(
            "A",
            &extra.summaries["A"],
            "",
            Formats::ALL,
            &TokenKey::from_secret("unit tests"),
            dir2.path(),
        )
        .unwrap();
        let mut lost = extra.aggregate.groups.keys().next().unwrap().clone();
        lost.account = "B".into();
        extra.aggregate.groups.insert(lost, Totals { records: 1, units: 1, duration: 0, amount: 1, surcharge: 0 });
        assert!(reconcile(&extra, &[written]).is_err());
    }

    #[test]
    fn counts_must_add_up() {
        let mut batch = one_account_batch();
        assert_eq!(check_counts(&batch).unwrap().read, 2);
        batch
            .aggregate
            .tallies
            .insert(crate::records::Kind::Calls, Tally { read: 3, used: 1, duplicates: 1, ..Tally::default() });
        assert!(check_counts(&batch).unwrap_err().to_string().contains("do not add up"));
    }

    #[test]
    fn account_folders_are_safe_names() {
        assert_eq!(account_dir("MA1234_abc-9.x"), "MA1234_abc-9.x");
        assert_eq!(account_dir("../etc"), "%2E.%2Fetc");
        assert_eq!(account_dir(".."), "%2E.");
        assert_eq!(account_dir("a/b c%"), "a%2Fb%20c%25");
        assert_eq!(account_dir("index.html"), "index%2Ehtml");
        assert_eq!(account_dir("é"), "%C3%A9");
    }
}
