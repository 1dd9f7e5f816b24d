//! What is surprising about an answer, said beside it (never in it): an
//! account that neither `accounts.csv` nor any record knows, a window that
//! holds none of the account's records (with the dates its records do
//! cover), a report over every account that holds no usage at all. The dates come from the pass that answered ([`Covered`]), or,
//! for an empty answer from a store's rollups, from the account's rollup
//! file alone; a request that finds rows costs nothing more.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate};
use chrono_tz::Tz;

use super::Summary;
use crate::aggregate::Span;
use crate::dataset::Dataset;
use crate::error::{Notice, Result};

/// The record times a pass saw, beside its answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Covered {
    /// The account's records, whatever the window and the filters.
    pub account: Option<Span>,
    /// Every record of the data set, when the pass read them all.
    pub data: Option<Span>,
}

/// The notices of `summary`, answered from `dataset`: an unknown account
/// with no records; else, when the answer is empty, the window and the
/// dates the account's records (or the data set's) cover.
pub fn notices(dataset: &Dataset, summary: &Summary) -> Result<Vec<Notice>> {
    let request = &summary.request;
    let auth_id = crate::error::printable(&request.auth_id);
    let known = dataset.accounts.get(&request.auth_id).is_some();
    if !is_empty(summary) {
        return Ok(Vec::new());
    }
    let covered = match summary.covered {
        Some(covered) => covered,
        None => Covered { account: dataset.account_span(&request.auth_id)?, data: None },
    };
    let window = &request.window;
    let tz = window.tz;
    let dates = |span: Span| format!("{} to {}", local_date(span.first, tz), local_date(span.last, tz));
    let text = match (known, covered.account) {
        (false, None) => unknown_account(&request.auth_id),
        (true, None) => {
            let data = covered.data.map(|span| format!(" (the data covers {})", dates(span))).unwrap_or_default();
            format!("no usage for {auth_id} between {} and {}: it has no records{data}", window.from, window.to)
        }
        (_, Some(span)) if span.overlaps(window.start, window.end) => format!(
            "no usage for {auth_id} between {} and {} matches the request's filters (its data covers {})",
            window.from,
            window.to,
            dates(span)
        ),
        (_, Some(span)) => {
            format!("no usage for {auth_id} between {} and {}; its data covers {}", window.from, window.to, dates(span))
        }
    };
    Ok(vec![Notice(text)])
}

/// The notice of a report over every account whose pages hold no usage and
/// no charge at all although the data has records: the window most likely
/// misses them (a clock far from the data's dates). `spans` are the
/// accounts' record times from the pass that answered.
pub fn empty_report(summaries: &BTreeMap<String, Summary>, spans: &BTreeMap<String, Span>) -> Option<Notice> {
    let data = spans.values().copied().reduce(Span::merge)?;
    if !summaries.values().all(is_empty) {
        return None;
    }
    let window = &summaries.values().next()?.request.window;
    let dates = format!("{} to {}", local_date(data.first, chrono_tz::UTC), local_date(data.last, chrono_tz::UTC));
    Some(Notice(format!(
        "the {} accounts' reports hold no usage between {} and {}; the data covers {dates} (UTC): \
         set the window with --query 'from_date=...&to_date=...' or --now",
        summaries.len(),
        window.from,
        window.to
    )))
}

/// Whether `summary` holds no usage row and no other charge.
fn is_empty(summary: &Summary) -> bool {
    summary.rows.is_empty() && summary.charges.as_ref().is_none_or(|c| c.is_empty())
}

/// What is said of an account that neither `accounts.csv` nor any record
/// knows (`summary`'s notice; `report` adds that it wrote no folder). A
/// subaccount is no account of its own: records name it beside their
/// parent, so its id asked for as an account is told where its usage is.
pub fn unknown_account(auth_id: &str) -> String {
    let id = crate::error::printable(auth_id);
    format!(
        "account {id} is not in accounts.csv and has no records \
         (a subaccount's usage is in its parent account's summary, with subaccount_auth={id})"
    )
}

/// The local date of UTC second `secs` in `tz` (the instant's own text
/// when chrono cannot hold it).
fn local_date(secs: i64, tz: Tz) -> String {
    match DateTime::from_timestamp(secs, 0) {
        Some(instant) => {
            let date: NaiveDate = instant.with_timezone(&tz).date_naive();
            date.to_string()
        }
        None => format!("{secs} s since 1970"),
    }
}
