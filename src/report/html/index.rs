//! `index.html`: every account of the run, by spend (largest first, within
//! each currency), with a total row per currency (USD is never added to
//! EUR) and the run's row counts. Each amount carries its currency code in
//! its own cell, which stays in view when the table scrolls sideways.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::format::{grouped, money_html, period_html};
use super::{add, card, esc, head, href};
use crate::error::Result;
use crate::money::Amount;
use crate::query::UsageParams;
use crate::report::options::{Formats, PageFiles};

/// One line of `index.html`.
#[derive(Debug)]
pub struct IndexEntry<'a> {
    /// The account.
    pub auth_id: &'a str,
    /// Its name in `accounts.csv`, when it has one.
    pub name: Option<&'a str>,
    /// Its folder, relative to the output directory.
    pub dir: &'a str,
    /// Its currency.
    pub currency: &'a str,
    /// Its time zone.
    pub timezone: &'a str,
    /// Window start, as in `meta`.
    pub from_date: String,
    /// Window end, as in `meta`.
    pub to_date: String,
    /// Usage rows.
    pub rows: usize,
    /// `meta.total_spend`.
    pub total_spend: Amount,
}

/// Counts shown at the top of `index.html`.
#[derive(Debug, Default)]
pub struct IndexCounts {
    /// Rows read.
    pub read: u64,
    /// Rows used.
    pub used: u64,
    /// Rows set aside.
    pub set_aside: u64,
    /// Duplicate rows.
    pub duplicates: u64,
    /// Rows an earlier version of their record replaced.
    pub superseded: u64,
    /// Rows of `voids/`.
    pub voids: u64,
    /// Read from a store: the rows its ingests set aside (never stored).
    pub set_aside_at_ingest: Option<u64>,
}

/// `index.html`: every account with its total spend, grouped by currency
/// (codes in byte order), by spend descending within a currency, ties by
/// account id. Each account is linked to its report.html, or with
/// `formats` that leave HTML out, to its first JSON page (`pages.jsonl`
/// with `pages` jsonl) or its usage.csv.
pub fn index(
    entries: &[IndexEntry<'_>],
    params: &UsageParams,
    query: &str,
    counts: &IndexCounts,
    formats: Formats,
    pages: PageFiles,
) -> Result<String> {
    let link = if formats.html {
        "report.html"
    } else if formats.json && pages == PageFiles::Jsonl {
        PageFiles::JSONL_FILE
    } else if formats.json {
        "page-0001.json"
    } else {
        "usage.csv"
    };
    let mut out = String::with_capacity(4096 + entries.len() * 400);
    head(&mut out, "Usage reports");
    out.push_str("<header><h1>Usage reports</h1><div class=\"sub\">");
    w!(out, "{} accounts &middot; by {}", grouped(entries.len() as u128), params.granularity.as_str());
    if !query.is_empty() {
        w!(out, " &middot; query <code>{}</code>", esc(query));
    }
    out.push_str("</div></header>\n<div class=\"cards\">");
    let mut by_currency: BTreeMap<&str, (i128, usize)> = BTreeMap::new();
    for entry in entries {
        let (sum, accounts) = by_currency.entry(entry.currency).or_default();
        add(sum, entry.total_spend.nanos())?;
        *accounts += 1;
    }
    for (currency, (nanos, _)) in &by_currency {
        let mut value = String::new();
        money_html(&mut value, Amount::from_nanos(*nanos), currency);
        w!(value, " <small>{}</small>", esc(currency));
        card(&mut out, "main", "Total spend", &value);
    }
    // From a store, the rows read are those it stores: its ingests left
    // the duplicates out, and counted them (the manifest's ingests).
    let read = if counts.set_aside_at_ingest.is_some() { "Stored rows read" } else { "Rows read" };
    card(&mut out, "", read, &grouped(counts.read.into()));
    card(&mut out, "", "Used", &grouped(counts.used.into()));
    card(&mut out, "", "Set aside", &grouped(counts.set_aside.into()));
    card(&mut out, "", "Duplicates", &grouped(counts.duplicates.into()));
    // Shown when there are any, so that the cards add up to the rows read.
    for (label, count) in [("Superseded", counts.superseded), ("Voids", counts.voids)] {
        if count > 0 {
            card(&mut out, "", label, &grouped(count.into()));
        }
    }
    if let Some(count) = counts.set_aside_at_ingest.filter(|&count| count > 0) {
        card(&mut out, "", "Set aside at ingest", &grouped(count.into()));
    }
    out.push_str("</div>\n<section><h2>Accounts by spend</h2><div class=\"scroll\"><table><thead><tr>");
    out.push_str(
        "<th>Account</th><th>Period</th><th>Time zone</th><th class=\"n\">Usage rows</th>\
         <th class=\"n m\">Total spend</th></tr></thead><tbody>",
    );
    let mut sorted: Vec<&IndexEntry<'_>> = entries.iter().collect();
    sorted.sort_by(|a, b| {
        (a.currency.cmp(b.currency))
            .then(b.total_spend.cmp(&a.total_spend))
            .then(a.auth_id.cmp(b.auth_id))
            .then(a.dir.cmp(b.dir))
    });
    for entry in sorted {
        w!(out, "<tr><td><a href=\"{}/{link}\">", esc(&href(entry.dir)));
        match entry.name {
            Some(name) => w!(out, "{}</a><small class=\"id\">{}</small>", esc(name), esc(entry.auth_id)),
            None => w!(out, "{}</a>", esc(entry.auth_id)),
        }
        out.push_str("</td><td");
        period_html(&mut out, &entry.from_date, &entry.to_date);
        w!(
            out,
            "</td><td>{}</td><td class=\"n\">{}</td><td class=\"n m\">",
            esc(entry.timezone),
            grouped(entry.rows as u128)
        );
        money_html(&mut out, entry.total_spend, entry.currency);
        w!(out, " <small>{}</small></td></tr>", esc(entry.currency));
    }
    out.push_str("</tbody><tfoot>");
    for (currency, (nanos, accounts)) in &by_currency {
        let plural = if *accounts == 1 { "" } else { "s" };
        w!(out, "<tr><td colspan=\"4\">Total, {} account{plural}</td><td class=\"n m\">", grouped(*accounts as u128));
        money_html(&mut out, Amount::from_nanos(*nanos), currency);
        w!(out, " <small>{}</small></td></tr>", esc(currency));
    }
    out.push_str("</tfoot></table></div></section>\n");
    let files = if formats == Formats::ALL {
        "the JSON pages, usage.csv, other_charges.csv and report.html".to_owned()
    } else {
        let mut files = Vec::new();
        if formats.json {
            files.push("the JSON pages");
        }
        if formats.csv {
            files.push("usage.csv, other_charges.csv");
        }
        if formats.html {
            files.push("report.html");
        }
        format!("{} (--formats {})", files.join(", "), formats.names().join(","))
    };
    w!(
        out,
        "<footer>Generated by telemeter. Amounts are rounded to each currency's usual decimals (half up); \
         tap or hover a rounded amount for its exact value. Every account folder holds {files}; \
         manifest.json lists the inputs and the reconciliation.</footer>\n"
    );
    out.push_str("</main></body></html>\n");
    Ok(out)
}
