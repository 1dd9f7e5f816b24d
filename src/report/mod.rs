//! The nightly batch: every account's report written to one output folder,
//! atomically, with a manifest that proves the numbers add up.
//!
//! [`write_reports`] runs [`build_many`] (one pass over the data for all
//! accounts) while the input files are hashed, cuts every account's pages
//! with the same [`Summary::pages`] as `summary`, renders the CSV and HTML
//! files, checks the reconciliation and only then moves the finished folder
//! into place. Nothing here reads the clock or prints: progress goes to a
//! callback and `now` comes in as a value.
//!
//! Here: the run ([`write_reports`], one account's folder, the index).
//! `options` is what the run is asked ([`ReportRequest`], [`Formats`],
//! [`Progress`]); `manifest` the `manifest.json` shapes and the checks it
//! records; `output` the staging folder, atomic swap and input hashing;
//! `html` and `csv_out` the files each account gets.

pub mod csv_out;
pub mod html;
mod manifest;
pub mod options;
mod output;

pub use manifest::{GENERATOR, MANIFEST};
pub use options::{Formats, PageFiles, Progress, ReportRequest};

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::aggregate::{AccountScope, AggregateOptions, OnBadRow, Tally};
use crate::dataset::{Dataset, Inputs};
use crate::error::{Error, Notice, Result};
use crate::money::Amount;
use crate::records::accounts::Accounts;
use crate::summary::wire::Decimal;
use crate::summary::{build_many, to_json, Batch, Summary};
use crate::time::format_instant;
use crate::token::TokenKey;
use manifest::{
    check_counts, counts_entry, overflow, reconcile, AccountEntry, ChangesEntry, InputEntry, ReportManifest,
    RequestEntry, StoreEntry, Written,
};
use output::{
    check_inputs_unchanged, check_replaceable, create, hash_inputs, remove_stale, staging_dir, swap_into_place,
    write_file,
};

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
    /// What is surprising about the run, for a warning: ids of `--accounts`
    /// that neither `accounts.csv` nor any record knows (no folder written).
    pub notices: Vec<Notice>,
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
    let staging = staging_dir(out, "tmp")?;
    match read_and_write(dataset, request, key, &staging, progress) {
        Ok((mut outcome, batch)) => {
            outcome.notices.extend(swap_into_place(&staging, out)?);
            // A run killed between its two renames left the report before
            // in `.old` (kept while OUT was missing): OUT is back now.
            remove_stale(out);
            // An account asked for by name whose report is empty is said,
            // as `summary` says it (with `all`, idle accounts are expected).
            if matches!(request.batch.accounts, AccountScope::Some(_)) {
                for summary in batch.summaries.values() {
                    outcome.notices.extend(crate::summary::notices(dataset, summary)?);
                }
            } else {
                outcome.notices.extend(crate::summary::empty_report(&batch.summaries, &batch.aggregate.spans));
            }
            Ok(outcome)
        }
        Err(error) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(error)
        }
    }
}

/// The pass over `dataset` and every file of the report, written to
/// `staging`; the pass's rows set aside go to disk as they are read
/// (`staging/.set-aside/`, gone once `rejected.csv` is written).
fn read_and_write(
    dataset: &Dataset,
    request: &ReportRequest<'_>,
    key: &TokenKey,
    staging: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(Outcome, Batch)> {
    let inputs = dataset.inputs()?;
    let bytes = inputs.inventory.files.iter().map(|f| f.size).sum();
    progress(Progress::Reading { files: inputs.inventory.files.len(), bytes });
    let on_read = |bytes| progress(Progress::Read { bytes });
    let spool = staging.join(SPOOL);
    let pass = AggregateOptions { on_bad_row: request.batch.on_bad_row, on_read: Some(&on_read), spool: Some(&spool) };
    let (batch, hashed) = rayon::join(|| build_many(dataset, &request.batch, key, pass), || hash_inputs(&inputs));
    let (mut batch, hashed) = (batch?, hashed?);
    check_inputs_unchanged(&inputs, &dataset.inputs()?)?;
    let counts = check_counts(&batch)?;
    // From a store, its rollups are also held against its records' totals:
    // the reconciliation below compares the pages with the rollups, this
    // the rollups with the records.
    if let crate::dataset::Source::Store(store) = &dataset.source {
        store.check_rollups()?;
    }
    progress(Progress::Writing { rows_read: counts.read, accounts: batch.summaries.len() });
    if request.batch.on_bad_row == OnBadRow::SetAside {
        let spooled = std::mem::take(&mut batch.aggregate.spooled);
        crate::records::bad_rows::write_rejected(&staging.join("rejected.csv"), spooled)?;
        let _ = std::fs::remove_dir(&spool);
    }
    let store = match &dataset.source {
        crate::dataset::Source::Store(store) => Some(store),
        crate::dataset::Source::Raw(_) => None,
    };
    let read = Read { batch: &batch, accounts: &dataset.accounts, inputs: &inputs, hashed: &hashed, counts, store };
    let outcome = write_all(&read, request, key, staging, progress)?;
    Ok((outcome, batch))
}

/// The folder of the staging folder where a pass writes the rows it sets
/// aside.
const SPOOL: &str = ".set-aside";

/// The longest account folder name: file systems take 255 bytes, and an
/// id of 128 bytes can encode to 384.
const MAX_DIR_BYTES: usize = 200;

/// The folder of an account inside the output folder: the `auth_id` with
/// every byte outside `[A-Za-z0-9._-]` percent-encoded, a leading `.`
/// encoded (no hidden or `..` folders), and names of the run's own files
/// (`index.html`, `manifest.json`, `rejected.csv`) made distinct. A name
/// past 200 bytes (`MAX_DIR_BYTES`) keeps its first encoded characters
/// and ends in `~` and the id's 64-bit hash (`~` is always encoded otherwise, so no
/// two ids share a folder but by a hash collision).
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
    if out.len() > MAX_DIR_BYTES {
        // Cut before an escape it would split: `%` is never plain.
        let mut cut = MAX_DIR_BYTES - 17;
        while let Some(at) = out[..cut].rfind('%').filter(|&at| at + 3 > cut) {
            cut = at;
        }
        out = format!("{}~{:016x}", &out[..cut], xxhash_rust::xxh3::xxh3_64(auth_id.as_bytes()));
    }
    out
}

/// What the run read, for the files it writes.
struct Read<'a> {
    /// Every account's summary and the pass's counts.
    batch: &'a Batch,
    /// `accounts.csv`: the names the HTML pages show.
    accounts: &'a Accounts,
    /// The input files, and their hashes for the manifest.
    inputs: &'a Inputs,
    hashed: &'a [InputEntry],
    /// The pass's counts, checked.
    counts: Tally,
    /// The store generation read, for a report of a store.
    store: Option<&'a crate::store::Store>,
}

fn write_all(
    read: &Read<'_>,
    request: &ReportRequest<'_>,
    key: &TokenKey,
    staging: &Path,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<Outcome> {
    let Read { batch, accounts: names, inputs, hashed, counts, store } = *read;
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
                let result = write_account(auth_id, names.name(auth_id), summary, request, key, staging);
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
    let notices = batch
        .skipped
        .iter()
        .map(|id| Notice(format!("{}: no report written for it", crate::summary::unknown_account(id))))
        .collect();
    let mut outcome = Outcome { accounts: written.len(), counts, notices, ..Outcome::default() };
    for w in &written {
        outcome.usage_rows += w.entry.usage_rows;
        let spend = outcome.spend.entry(w.entry.currency.clone()).or_default();
        *spend = spend.checked_add(w.total_spend).ok_or_else(overflow)?;
    }

    let entries: Vec<html::IndexEntry<'_>> = written
        .iter()
        .map(|w| html::IndexEntry {
            auth_id: &w.entry.auth_id,
            name: names.name(&w.entry.auth_id),
            dir: &w.entry.dir,
            currency: &w.entry.currency,
            timezone: w.entry.timezone,
            from_date: w.entry.from_date.clone(),
            to_date: w.entry.to_date.clone(),
            rows: w.entry.usage_rows as usize,
            total_spend: w.total_spend,
        })
        .collect();
    let index_counts = html::IndexCounts {
        read: counts.read,
        used: counts.used,
        set_aside: counts.set_aside,
        duplicates: counts.duplicates,
        superseded: counts.superseded,
        voids: counts.voids,
        set_aside_at_ingest: store.map(|store| store.manifest.set_aside()),
    };
    write_file(
        &staging.join("index.html"),
        html::index(&entries, request.batch.params, request.query, &index_counts, request.formats, request.pages)?
            .as_bytes(),
    )?;

    let manifest = ReportManifest {
        generator: GENERATOR,
        version: env!("CARGO_PKG_VERSION"),
        request: RequestEntry::of(request),
        store: store.map(StoreEntry::of),
        changes_since: match (store, request.changes_since) {
            (Some(store), Some(generation)) => Some(ChangesEntry::since(store, generation)?),
            _ => None,
        },
        inputs: hashed,
        ignored_files: &inputs.inventory.ignored,
        counts: counts_entry(batch, counts),
        rejected_file: (request.batch.on_bad_row == OnBadRow::SetAside).then_some("rejected.csv"),
        spend_by_currency: outcome.spend.iter().map(|(c, a)| (c.clone(), Decimal(*a))).collect(),
        accounts: written.into_iter().map(|w| w.entry).collect(),
        skipped_accounts: &batch.skipped,
        reconciliation,
    };
    write_file(&staging.join(MANIFEST), format!("{}\n", to_json(&manifest, true)?).as_bytes())?;
    Ok(outcome)
}

/// Writes one account's folder, page by page: each page is cut, written as
/// JSON (its own file, or a line of `pages.jsonl`) and appended to
/// usage.csv and report.html before the next is cut, so memory does not
/// grow with the account's size.
fn write_account(
    auth_id: &str,
    name: Option<&str>,
    summary: &Summary,
    request: &ReportRequest<'_>,
    key: &TokenKey,
    staging: &Path,
) -> Result<Written> {
    let (query, formats) = (request.query, request.formats);
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
        let account = csv_out::Account { auth_id, currency: &summary.currency };
        let path = dir.join("other_charges.csv");
        write_file(&path, &csv_out::charges_csv(account, charges.into_iter().flatten())?)?;
        let path = dir.join("usage.csv");
        csv = Some(csv_out::UsageCsv::new(create(&path)?, path, account)?);
    }
    if formats.html {
        let path = dir.join("report.html");
        let page = html::AccountPage { summary, name, charges, query, formats };
        report = Some(html::AccountReport::start(&page, BufWriter::with_capacity(1 << 16, create(&path)?), path)?);
    }

    let jsonl_path = dir.join(PageFiles::JSONL_FILE);
    let mut jsonl = match (formats.json, request.pages) {
        (true, PageFiles::Jsonl) => Some(BufWriter::with_capacity(1 << 16, create(&jsonl_path)?)),
        _ => None,
    };

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
            match &mut jsonl {
                Some(jsonl) => jsonl.write_all(&json).map_err(|e| Error::io(&jsonl_path, e))?,
                None => write_file(&dir.join(format!("page-{:04}.json", i + 1)), &json)?,
            }
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
    let pages_file = match jsonl {
        Some(jsonl) => {
            jsonl.into_inner().map_err(|e| Error::io(&jsonl_path, e.into_error()))?;
            Some(format!("{dir_name}/{}", PageFiles::JSONL_FILE))
        }
        None => None,
    };
    if let Some(csv) = csv {
        csv.finish()?;
    }
    if let Some(report) = report {
        let path = dir.join("report.html");
        report.finish()?.into_inner().map_err(|e| Error::io(&path, e.into_error()))?;
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
        pages_file,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aggregate::{Aggregate, Dims, GroupKey, Totals};
    use crate::query::{UsageParams, UsageRequest};
    use crate::records::Product;
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
        let key = |product: Product, type_: &str| {
            let dims =
                Dims { product, type_: type_.into(), subaccount: None, country: None, direction: None, code: None };
            GroupKey { account: "A".into(), bucket: 0, dims }
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
        Batch { summaries: BTreeMap::from([("A".to_owned(), summary)]), aggregate, skipped: Vec::new() }
    }

    /// A request for every file, the query empty.
    fn every_file<'a>(params: &'a UsageParams, accounts: &'a crate::aggregate::AccountScope) -> ReportRequest<'a> {
        let now = DateTime::parse_from_rfc3339("2026-11-21T00:00:00Z").unwrap().with_timezone(&Utc);
        ReportRequest {
            batch: crate::summary::BatchRequest { params, accounts, now, on_bad_row: OnBadRow::Fail },
            query: "",
            now_given: true,
            formats: Formats::ALL,
            pages: PageFiles::Files,
            changes_since: None,
        }
    }

    #[test]
    fn reconciliation_holds_and_fails_on_one_nano_of_difference() {
        let batch = one_account_batch();
        let dir = tempfile::tempdir().unwrap();
        let summary = &batch.summaries["A"];
        let (params, accounts) = (UsageParams::default(), crate::aggregate::AccountScope::All);
        let request = every_file(&params, &accounts);
        let written =
            write_account("A", None, summary, &request, &TokenKey::from_secret("unit tests"), dir.path()).unwrap();
        assert_eq!(written.total_spend, Amount::from_nanos(3_750_000_000));
        let check = reconcile(&batch, std::slice::from_ref(&written)).unwrap();
        assert!(check.ok);
        let currency = summary.currency.clone();
        assert_eq!(check.sum_of_selected_records[&currency], Decimal(Amount::from_nanos(3_750_000_000)));
        assert_eq!(check.sum_of_account_total_spend.keys().collect::<Vec<_>>(), [&currency]);

        let mut off = written;
        off.total_spend = Amount::from_nanos(3_750_000_001);
        let error = reconcile(&batch, &[off]).unwrap_err().to_string();
        assert!(error.contains("reconciliation failed"), "{error}");

        // A group the accounts do not account for (e.g. a lost account) fails too.
        let mut extra = one_account_batch();
        let key = TokenKey::from_secret("unit tests");
        let write = |into: &Path| write_account("A", None, &extra.summaries["A"], &request, &key, into);
        assert!(write(&dir.path().join("x")).is_err(), "the account folder's parent must exist");
        let dir2 = tempfile::tempdir().unwrap();
        let written = write(dir2.path()).unwrap();
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
        // A long id (128 bytes may encode to 384) is cut whole escapes
        // short and keeps its hash: two ids with one prefix stay apart.
        for id in ["é".repeat(64), "<".repeat(128), format!("{}a", "é".repeat(63)), "x".repeat(128)] {
            let dir = account_dir(&id);
            assert!(dir.len() <= MAX_DIR_BYTES, "{} bytes: {dir}", dir.len());
            let prefix = dir.split('~').next().expect("a prefix");
            assert!(!prefix.ends_with('%') && !prefix[prefix.len().saturating_sub(2)..].starts_with('%'), "{dir}");
        }
        assert_ne!(account_dir(&"é".repeat(64)), account_dir(&format!("{}a", "é".repeat(63))));
        assert_eq!(account_dir(&"x".repeat(128)), "x".repeat(128));
    }

    /// The pass's byte counts reach the run's one progress callback: every
    /// `Read` comes between `Reading` and `Writing`, and the last file read
    /// brings the count to the total `Reading` announced.
    #[test]
    fn progress_hears_the_bytes_the_pass_reads() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("sample_data");
        let dataset = Dataset::open(&data).unwrap();
        let now = DateTime::parse_from_rfc3339("2026-11-21T00:00:00Z").unwrap().with_timezone(&Utc);
        let params = UsageParams::default();
        let accounts = crate::aggregate::AccountScope::All;
        let request = ReportRequest {
            batch: crate::summary::BatchRequest {
                params: &params,
                accounts: &accounts,
                now,
                on_bad_row: OnBadRow::SetAside,
            },
            query: "",
            now_given: true,
            formats: Formats { json: true, csv: false, html: false },
            pages: PageFiles::Files,
            changes_since: None,
        };
        let out = tempfile::tempdir().unwrap();
        let events = Mutex::new(Vec::new());
        let key = TokenKey::from_secret("unit tests");
        write_reports(&dataset, &request, &key, &out.path().join("report"), &|p| events.lock().unwrap().push(p))
            .unwrap();
        let events = events.into_inner().unwrap();
        let Some(Progress::Reading { files, bytes: total }) = events.first().copied() else { panic!("{events:?}") };
        let writing = events.iter().position(|p| matches!(p, Progress::Writing { .. })).unwrap();
        let read: Vec<u64> =
            events.iter().filter_map(|p| if let Progress::Read { bytes } = p { Some(*bytes) } else { None }).collect();
        assert!(files > 1 && total > 0, "{events:?}");
        assert_eq!(read.len(), files, "one event per file read: {events:?}");
        assert_eq!(read.iter().max(), Some(&total), "{events:?}");
        assert!(events[1..writing].iter().all(|p| matches!(p, Progress::Read { .. })), "{events:?}");
    }
}
