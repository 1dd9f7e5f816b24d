//! `report.html` and `index.html`: one self-contained page per account (inline
//! CSS and hand-written SVG; no script, no network), and an index linking them.
//!
//! Every number printed is the exact decimal of the JSON pages (amounts are
//! summed as integers of nano-units and written with [`Amount`]'s `Display`,
//! which is the JSON form). Floating point is used only for the geometry of
//! bars, never for text.
//!
//! Here: the pages' structure, the account's sums by dimension and the
//! tables; `chart` draws the spend-over-time SVG; `report.css` is the style
//! sheet every page inlines.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use crate::aggregate::Totals;
use crate::error::{Error, Result};
use crate::labels;
use crate::money::Amount;
use crate::query::UsageParams;
use crate::records::Product;
use crate::report::options::Formats;
use crate::summary::wire::{ChargeItem, UsageItem};
use crate::summary::Summary;
use crate::time::format_instant;

/// What one account's page is drawn from.
#[derive(Debug)]
pub struct AccountPage<'a> {
    /// The account's whole result.
    pub summary: &'a Summary,
    /// Other charges as page 1 carries them, when returned.
    pub charges: Option<&'a [ChargeItem<'a>]>,
    /// The request's query string, as given.
    pub query: &'a str,
}

/// One line of `index.html`.
#[derive(Debug)]
pub struct IndexEntry<'a> {
    /// The account.
    pub auth_id: &'a str,
    /// Its folder, relative to the output directory.
    pub dir: &'a str,
    /// Its currency.
    pub currency: &'a str,
    /// Its time zone.
    pub timezone: &'a str,
    /// Window start and end, as in `meta`.
    pub window: (String, String),
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
}

/// Product colours, in [`Product`] order (message, transcription, voice,
/// zentrunk, other charges).
const COLOURS: [&str; 5] = ["#3b6fb6", "#a86fb0", "#e8862e", "#4e9f5b", "#9a9a9a"];

/// The pages' style sheet (inlined into every page's `<style>`).
const CSS: &str = include_str!("report.css");

/// Appends formatted text to a `String` (which cannot fail).
macro_rules! w {
    ($out:expr, $($arg:tt)*) => {{
        let _ = write!($out, $($arg)*);
    }};
}

// Declared after `w!`, which it uses.
mod chart;

/// `report.html` of one account, written as it is drawn: [`start`](Self::start)
/// writes everything above the usage table, [`row`](Self::row) one usage
/// row, [`finish`](Self::finish) the table's totals and the footer. Text goes
/// to the sink in blocks of about [`FLUSH_AT`] bytes, so a page of millions
/// of rows is never held in memory.
#[derive(Debug)]
pub struct AccountReport<W: Write> {
    sink: W,
    path: PathBuf,
    out: String,
    currency: String,
    expected_rows: usize,
    rows: usize,
    units: u128,
    duration: i128,
    amount: i128,
    surcharge: i128,
}

/// Bytes of page text buffered before they go to the sink.
pub const FLUSH_AT: usize = 1 << 16;

impl<W: Write> AccountReport<W> {
    /// Writes the head of the page: totals, charts and tables, and the
    /// usage table's header. `path` names the file in error messages.
    pub fn start(page: &AccountPage<'_>, sink: W, path: impl Into<PathBuf>) -> Result<AccountReport<W>> {
        let summary = page.summary;
        let mut report = AccountReport {
            sink,
            path: path.into(),
            out: String::with_capacity(2 * FLUSH_AT),
            currency: esc(&summary.currency),
            expected_rows: summary.rows.len(),
            rows: 0,
            units: 0,
            duration: 0,
            amount: 0,
            surcharge: 0,
        };
        account_head(&mut report.out, page)?;
        report.flush_if_full()?;
        Ok(report)
    }

    /// One usage row, as the JSON pages carry it (in their order).
    pub fn row(&mut self, item: &UsageItem<'_>) -> Result<()> {
        self.rows += 1;
        self.units = self.units.checked_add(item.total_units).ok_or_else(overflow)?;
        if let Some(d) = item.duration_seconds {
            add(&mut self.duration, d.0.nanos())?;
        }
        add(&mut self.amount, item.total_amount.0.nanos())?;
        if let Some(s) = item.surcharge {
            add(&mut self.surcharge, s.0.nanos())?;
        }
        usage_row(&mut self.out, item);
        self.flush_if_full()
    }

    /// The table's totals and the footer; hands the sink back, flushed.
    pub fn finish(mut self) -> Result<W> {
        if self.rows != self.expected_rows {
            return Err(Error::Internal(format!(
                "report.html: {} usage rows written of {}",
                self.rows, self.expected_rows
            )));
        }
        let out = &mut self.out;
        if self.rows > 0 {
            w!(
                out,
                "</tbody><tfoot><tr><td colspan=\"7\">Total ({} rows)</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td><td class=\"n\">{}</td><td colspan=\"3\"></td></tr></tfoot></table></div></section>\n",
                self.rows,
                self.units,
                Amount::from_nanos(self.duration),
                Amount::from_nanos(self.amount),
                Amount::from_nanos(self.surcharge)
            );
        }
        w!(
            out,
            "<footer>Generated by telemeter from the same data and request as the JSON pages in this folder; \
             amounts are exact and in {}. <a href=\"../index.html\">All accounts</a></footer>\n",
            self.currency
        );
        out.push_str("</main></body></html>\n");
        self.flush()?;
        self.sink.flush().map_err(|e| Error::io(&self.path, e))?;
        Ok(self.sink)
    }

    fn flush_if_full(&mut self) -> Result<()> {
        if self.out.len() >= FLUSH_AT {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.sink.write_all(self.out.as_bytes()).map_err(|e| Error::io(&self.path, e))?;
        self.out.clear();
        Ok(())
    }
}

/// The page of one account with `usage` (every usage row), in memory.
pub fn account_report(page: &AccountPage<'_>, usage: &[&UsageItem<'_>]) -> Result<String> {
    let mut report = AccountReport::start(page, Vec::new(), "report.html")?;
    for item in usage {
        report.row(item)?;
    }
    String::from_utf8(report.finish()?).map_err(|e| Error::Internal(format!("report.html is not UTF-8: {e}")))
}

/// Everything above the usage rows.
fn account_head(out: &mut String, page: &AccountPage<'_>) -> Result<()> {
    let summary = page.summary;
    let request = &summary.request;
    let tz = summary.buckets.tz();
    let stats = Stats::of(summary)?;
    let rows = summary.rows.len();
    let title = format!("Usage report: {}", request.auth_id);
    head(out, &title);
    w!(out, "<header><h1>{}</h1>", esc(&request.auth_id));
    w!(
        out,
        "<div class=\"sub\">{} &rarr; {} &middot; {} &middot; by {}",
        esc(&format_instant(request.window.start, tz)),
        esc(&format_instant(request.window.end, tz)),
        esc(tz.name()),
        request.params.granularity.as_str()
    );
    if let Some(subaccount) = &request.params.subaccount_auth {
        w!(out, " &middot; subaccount {}", esc(subaccount));
    }
    if !page.query.is_empty() {
        w!(out, " &middot; query <code>{}</code>", esc(page.query));
    }
    out.push_str("</div></header>\n");

    // Totals.
    let currency = esc(&summary.currency);
    out.push_str("<div class=\"cards\">");
    card(out, "main", "Total spend", &format!("{} <small>{currency}</small>", summary.total_spend));
    card(out, "", &format!("Usage &middot; {currency}"), &summary.usage_spend.to_string());
    match &summary.charges {
        Some(_) => card(out, "", &format!("Other charges &middot; {currency}"), &stats.charge_spend.to_string()),
        None => card(out, "", "Other charges", "<small>not requested</small>"),
    }
    card(out, "", "Usage rows", &rows.to_string());
    card(out, "", "Records", &stats.records.to_string());
    out.push_str("</div>\n");

    chart::spend_over_time(out, summary, &stats)?;

    out.push_str("<div class=\"grid2\">");
    dimension_table(out, "By country", "Country", &stats.by_country, &summary.currency)?;
    dimension_table(out, "By direction", "Direction", &stats.by_direction, &summary.currency)?;
    out.push_str("</div>\n");
    type_table(out, &stats, &summary.currency);

    out.push_str("<div class=\"grid2\">");
    subaccount_table(out, summary)?;
    charges_table(out, page.charges, summary.charges.is_some(), &stats, &summary.currency)?;
    out.push_str("</div>\n");

    out.push_str("<div class=\"grid2\">");
    codes_table(out, "Top message error codes", "Segments", &stats.error_codes, &summary.currency);
    codes_table(out, "Top hangup causes", "Calls", &stats.hangup_causes, &summary.currency);
    out.push_str("</div>\n");

    usage_table_head(out, rows);
    Ok(())
}

/// `index.html`: every account with its total spend.
/// Each account is linked to its report.html, or with `formats` that leave
/// HTML out, to its first JSON page or its usage.csv.
pub fn index(
    entries: &[IndexEntry<'_>],
    params: &UsageParams,
    query: &str,
    counts: &IndexCounts,
    formats: Formats,
) -> Result<String> {
    let link = if formats.html {
        "report.html"
    } else if formats.json {
        "page-0001.json"
    } else {
        "usage.csv"
    };
    let mut out = String::with_capacity(4096 + entries.len() * 300);
    head(&mut out, "Usage reports");
    out.push_str("<header><h1>Usage reports</h1><div class=\"sub\">");
    w!(out, "{} accounts &middot; by {}", entries.len(), params.granularity.as_str());
    if !query.is_empty() {
        w!(out, " &middot; query <code>{}</code>", esc(query));
    }
    out.push_str("</div></header>\n<div class=\"cards\">");
    let mut by_currency: BTreeMap<&str, i128> = BTreeMap::new();
    for entry in entries {
        add(by_currency.entry(entry.currency).or_default(), entry.total_spend.nanos())?;
    }
    for (currency, nanos) in &by_currency {
        card(
            &mut out,
            "main",
            "Total spend",
            &format!("{} <small>{}</small>", Amount::from_nanos(*nanos), esc(currency)),
        );
    }
    card(&mut out, "", "Rows read", &counts.read.to_string());
    card(&mut out, "", "Used", &counts.used.to_string());
    card(&mut out, "", "Set aside", &counts.set_aside.to_string());
    card(&mut out, "", "Duplicates", &counts.duplicates.to_string());
    out.push_str("</div>\n<section><h2>Accounts</h2><div class=\"scroll\"><table><thead><tr>");
    out.push_str("<th>Account</th><th>Window</th><th>Time zone</th><th class=\"n\">Rows</th><th class=\"n\">Total spend</th><th>Currency</th></tr></thead><tbody>");
    for entry in entries {
        w!(
            out,
            "<tr><td><a href=\"{}/{link}\">{}</a></td><td>{} &rarr; {}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            esc(&href(entry.dir)),
            esc(entry.auth_id),
            esc(&entry.window.0),
            esc(&entry.window.1),
            esc(entry.timezone),
            entry.rows,
            entry.total_spend,
            esc(entry.currency)
        );
    }
    out.push_str("</tbody></table></div></section>\n");
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
        "<footer>Generated by telemeter. Every account folder holds {files}; manifest.json lists the inputs and the reconciliation.</footer>\n"
    );
    out.push_str("</main></body></html>\n");
    Ok(out)
}

/// Sums of one account's rows along the dimensions the page shows.
#[derive(Debug, Default)]
struct Stats {
    records: u64,
    charge_spend: Amount,
    /// Per bucket, spend per product (index = `Product as usize`).
    by_bucket: Vec<[i128; 5]>,
    by_country: BTreeMap<String, Dim>,
    by_direction: BTreeMap<String, Dim>,
    by_type: BTreeMap<(Product, String), Dim>,
    error_codes: BTreeMap<String, Dim>,
    hangup_causes: BTreeMap<String, Dim>,
}

/// Units and money of one value of a dimension.
#[derive(Debug, Default, Clone, Copy)]
struct Dim {
    segments: u128,
    calls: u128,
    units: u128,
    duration: i128,
    amount: i128,
}

impl Dim {
    fn add(&mut self, product: Product, totals: &Totals) -> Result<()> {
        let units = |a: &mut u128, b: u128| -> Result<()> {
            *a = a.checked_add(b).ok_or_else(overflow)?;
            Ok(())
        };
        match product {
            Product::Message => units(&mut self.segments, totals.units)?,
            Product::Voice | Product::Zentrunk => units(&mut self.calls, totals.units)?,
            _ => {}
        }
        units(&mut self.units, totals.units)?;
        add(&mut self.duration, totals.duration)?;
        add(&mut self.amount, totals.amount)
    }
}

impl Stats {
    fn of(summary: &Summary) -> Result<Stats> {
        let mut stats = Stats { by_bucket: vec![[0; 5]; summary.buckets.len()], ..Stats::default() };
        let rows = summary.rows.iter().map(|r| (r, false));
        let charges = summary.charges.iter().flatten().map(|r| (r, true));
        for ((key, totals), is_charge) in rows.chain(charges) {
            stats.records += totals.records;
            if let Some(bucket) = stats.by_bucket.get_mut(key.bucket as usize) {
                add(&mut bucket[key.product as usize], totals.amount)?;
            }
            if is_charge {
                stats.charge_spend =
                    stats.charge_spend.checked_add(Amount::from_nanos(totals.amount)).ok_or_else(overflow)?;
                continue;
            }
            stats.add_row(&key, totals)?;
        }
        Ok(stats)
    }

    fn add_row(&mut self, key: &crate::summary::RowKey<'_>, totals: &Totals) -> Result<()> {
        let product = key.product;
        if product.has_country_and_direction() {
            let country = key.country.as_ref().map_or("(none)", |c| c.as_str()).to_owned();
            self.by_country.entry(country).or_default().add(product, totals)?;
            let direction = key.direction.map_or("(none)", |d| d.as_str()).to_owned();
            self.by_direction.entry(direction).or_default().add(product, totals)?;
        }
        self.by_type.entry((product, key.type_.to_owned())).or_default().add(product, totals)?;
        if let Some(code) = key.code.filter(|c| !c.is_empty()) {
            let table = if product.has_error_code() { &mut self.error_codes } else { &mut self.hangup_causes };
            table.entry(code.to_owned()).or_default().add(product, totals)?;
        }
        Ok(())
    }
}

fn dimension_table(
    out: &mut String,
    title: &str,
    column: &str,
    rows: &BTreeMap<String, Dim>,
    currency: &str,
) -> Result<()> {
    w!(out, "<section><h2>{title}</h2>");
    if rows.is_empty() {
        out.push_str("<p class=\"empty\">No message, voice or zentrunk usage.</p></section>");
        return Ok(());
    }
    let mut sorted: Vec<(&String, &Dim)> = rows.iter().collect();
    sorted.sort_by(|a, b| b.1.amount.cmp(&a.1.amount).then(a.0.cmp(b.0)));
    let max = sorted.iter().map(|(_, d)| d.amount).max().unwrap_or(0);
    w!(
        out,
        "<div class=\"scroll\"><table><thead><tr><th>{column}</th><th class=\"n\">Segments</th><th class=\"n\">Calls</th>\
         <th class=\"n\">Spend ({})</th><th></th></tr></thead><tbody>",
        esc(currency)
    );
    // The top rows, then the rest summed into one (exactly) so the table stays short.
    let shown = if sorted.len() > TOP_ROWS + 1 { TOP_ROWS } else { sorted.len() };
    let mut rest = Dim::default();
    for (_, dim) in &sorted[shown..] {
        rest.segments = rest.segments.checked_add(dim.segments).ok_or_else(overflow)?;
        rest.calls = rest.calls.checked_add(dim.calls).ok_or_else(overflow)?;
        add(&mut rest.amount, dim.amount)?;
    }
    let rest_label = format!("<i>{} others</i>", sorted.len() - shown);
    let rows = sorted[..shown].iter().map(|(name, dim)| (esc(name), **dim));
    let rows = rows.chain((shown < sorted.len()).then_some((rest_label, rest)));
    for (name, dim) in rows {
        w!(
            out,
            "<tr><td>{name}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>{}</tr>",
            dim.segments,
            dim.calls,
            Amount::from_nanos(dim.amount),
            bar(dim.amount, max, None)
        );
    }
    out.push_str("</tbody></table></div></section>");
    Ok(())
}

/// Rows of a dimension table before the rest is summed into one.
const TOP_ROWS: usize = 12;

fn type_table(out: &mut String, stats: &Stats, currency: &str) {
    out.push_str("<section><h2>By product and type</h2>");
    if stats.by_type.is_empty() {
        out.push_str("<p class=\"empty\">No usage in this window.</p></section>\n");
        return;
    }
    let max = stats.by_type.values().map(|d| d.amount).max().unwrap_or(0);
    w!(
        out,
        "<div class=\"scroll\"><table><thead><tr><th>Product</th><th>Type</th><th class=\"n\">Units</th><th>Unit</th>\
         <th class=\"n\">Duration (s)</th><th class=\"n\">Spend ({})</th><th></th></tr></thead><tbody>",
        esc(currency)
    );
    for ((product, type_), dim) in &stats.by_type {
        let (unit, has_duration) = match product {
            Product::Message => ("segments", false),
            Product::Voice | Product::Zentrunk => ("calls", true),
            Product::Transcription => ("transcriptions", true),
            Product::Other => ("units", false),
        };
        let duration = if has_duration { Amount::from_nanos(dim.duration).to_string() } else { String::new() };
        w!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{unit}</td><td class=\"n\">{duration}</td>\
             <td class=\"n\">{}</td>{}</tr>",
            product.as_str(),
            esc(type_),
            dim.units,
            Amount::from_nanos(dim.amount),
            bar(dim.amount, max, Some(COLOURS[*product as usize]))
        );
    }
    out.push_str("</tbody></table></div></section>\n");
}

fn subaccount_table(out: &mut String, summary: &Summary) -> Result<()> {
    out.push_str("<section><h2>Spend per subaccount</h2>");
    if let Some(subaccount) = &summary.request.params.subaccount_auth {
        w!(
            out,
            "<p>Scoped to subaccount <b>{}</b>: {} {}</p></section>",
            esc(subaccount),
            summary.usage_spend,
            esc(&summary.currency)
        );
        return Ok(());
    }
    let mut subaccounts_total = 0i128;
    for spend in summary.subaccount_spend.values() {
        add(&mut subaccounts_total, spend.nanos())?;
    }
    let parent = summary.usage_spend.nanos().checked_sub(subaccounts_total).ok_or_else(overflow)?;
    let mut rows: Vec<(String, i128, bool)> =
        summary.subaccount_spend.iter().map(|(k, v)| (esc(k), v.nanos(), false)).collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    rows.push(("parent account (no subaccount)".to_owned(), parent, true));
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0);
    w!(
        out,
        "<div class=\"scroll\"><table><thead><tr><th>Subaccount</th><th class=\"n\">Spend ({})</th><th></th></tr></thead><tbody>",
        esc(&summary.currency)
    );
    for (name, nanos, is_parent) in &rows {
        let name = if *is_parent { format!("<i>{name}</i>") } else { name.clone() };
        w!(
            out,
            "<tr><td>{name}</td><td class=\"n\">{}</td>{}</tr>",
            Amount::from_nanos(*nanos),
            bar(*nanos, max, None)
        );
    }
    w!(
        out,
        "</tbody><tfoot><tr><td>Usage total</td><td class=\"n\">{}</td><td></td></tr></tfoot></table></div></section>",
        summary.usage_spend
    );
    Ok(())
}

fn charges_table(
    out: &mut String,
    charges: Option<&[ChargeItem<'_>]>,
    returned: bool,
    stats: &Stats,
    currency: &str,
) -> Result<()> {
    out.push_str("<section><h2>Other charges</h2>");
    let items = match charges {
        Some(items) if returned => items,
        _ => {
            out.push_str("<p class=\"empty\">Not part of this request (scoped to a subaccount, or product excludes other).</p></section>");
            return Ok(());
        }
    };
    if items.is_empty() {
        out.push_str("<p class=\"empty\">No other charges in this window.</p></section>");
        return Ok(());
    }
    w!(
        out,
        "<div class=\"scroll\"><table><thead><tr><th>From</th><th>Description</th><th class=\"n\">Units</th>\
         <th class=\"n\">Amount ({})</th></tr></thead><tbody>",
        esc(currency)
    );
    let mut units = 0u128;
    for item in items {
        units = units.checked_add(item.total_units).ok_or_else(overflow)?;
        w!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(&item.from_date),
            esc(item.description),
            item.total_units,
            item.total_amount.0
        );
    }
    w!(
        out,
        "</tbody><tfoot><tr><td>Total</td><td></td><td class=\"n\">{units}</td><td class=\"n\">{}</td></tr></tfoot></table></div></section>",
        stats.charge_spend
    );
    Ok(())
}

fn codes_table(out: &mut String, title: &str, unit: &str, codes: &BTreeMap<String, Dim>, currency: &str) {
    w!(out, "<section><h2>{title}</h2>");
    if codes.is_empty() {
        out.push_str("<p class=\"empty\">None in this window.</p></section>");
        return;
    }
    let is_message = unit == "Segments";
    let mut sorted: Vec<(&String, &Dim)> = codes.iter().collect();
    sorted.sort_by(|a, b| b.1.units.cmp(&a.1.units).then(b.1.amount.cmp(&a.1.amount)).then(a.0.cmp(b.0)));
    let shown = sorted.len().min(10);
    let max = sorted.iter().map(|(_, d)| d.units).max().unwrap_or(0);
    w!(
        out,
        "<div class=\"scroll\"><table><thead><tr><th>Code</th><th>Label</th><th class=\"n\">{unit}</th>\
         <th class=\"n\">Spend ({})</th><th></th></tr></thead><tbody>",
        esc(currency)
    );
    for (code, dim) in &sorted[..shown] {
        let label = if is_message { labels::error_code(code) } else { labels::hangup_cause(code) };
        w!(
            out,
            "<tr><td>{}</td><td class=\"label\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>{}</tr>",
            esc(code),
            esc(label),
            dim.units,
            Amount::from_nanos(dim.amount),
            bar(dim.units.min(i128::MAX as u128) as i128, max.min(i128::MAX as u128) as i128, Some("#c0504d"))
        );
    }
    out.push_str("</tbody></table></div>");
    if sorted.len() > shown {
        w!(out, "<p class=\"empty\">{} more codes in usage.csv.</p>", sorted.len() - shown);
    }
    out.push_str("</section>");
}

/// The usage table's title and header (or the note that there are no rows).
fn usage_table_head(out: &mut String, rows: usize) {
    w!(out, "<section><h2>Usage rows ({rows})</h2>");
    if rows == 0 {
        out.push_str("<p class=\"empty\">No usage rows.</p></section>\n");
        return;
    }
    out.push_str("<div class=\"scroll\"><table class=\"usage\"><thead><tr>");
    for column in crate::report::csv_out::USAGE_COLUMNS {
        let numeric = matches!(column, "total_units" | "duration_seconds" | "total_amount" | "surcharge");
        w!(out, "<th{}>{}</th>", if numeric { " class=\"n\"" } else { "" }, column.replace('_', " "));
    }
    out.push_str("</tr></thead><tbody>\n");
}

/// One line of the usage table: the cells of usage.csv, escaped.
fn usage_row(out: &mut String, item: &UsageItem<'_>) {
    let text = |out: &mut String, v: Option<&str>| esc_into(out, v.unwrap_or_default());
    let number = |out: &mut String, d: Option<crate::summary::wire::Decimal>| {
        if let Some(d) = d {
            w!(out, "{}", d.0);
        }
    };
    out.push_str("<tr><td>");
    esc_into(out, &item.from_date);
    out.push_str("</td><td>");
    esc_into(out, &item.to_date);
    out.push_str("</td><td>");
    out.push_str(item.product);
    out.push_str("</td><td>");
    esc_into(out, item.type_);
    out.push_str("</td><td>");
    text(out, item.subaccount_auth);
    out.push_str("</td><td>");
    text(out, item.country);
    out.push_str("</td><td>");
    text(out, item.direction);
    w!(out, "</td><td class=\"n\">{}</td><td class=\"n\">", item.total_units);
    number(out, item.duration_seconds);
    w!(out, "</td><td class=\"n\">{}</td><td class=\"n\">", item.total_amount.0);
    number(out, item.surcharge);
    out.push_str("</td><td>");
    text(out, item.error_code);
    out.push_str("</td><td>");
    text(out, item.hangup_cause);
    out.push_str("</td><td class=\"label\">");
    text(out, item.error_reason);
    out.push_str("</td></tr>\n");
}

fn head(out: &mut String, title: &str) {
    w!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>\n{CSS}</style></head><body><main>\n",
        esc(title)
    );
}

fn card(out: &mut String, class: &str, key: &str, value: &str) {
    let visible = value.split('<').next().unwrap_or_default().trim().len();
    let long = if class != "main" && visible > 10 { " long" } else { "" };
    w!(out, "<div class=\"card {class}{long}\"><div class=\"k\">{key}</div><div class=\"v\">{value}</div></div>");
}

/// A table cell with a bar of `value / max` of its width.
fn bar(value: i128, max: i128, colour: Option<&str>) -> String {
    let share = if max > 0 { (value.max(0) as f64 / max as f64 * 100.0).clamp(0.0, 100.0) } else { 0.0 };
    let style = colour.map(|c| format!(";background:{c}")).unwrap_or_default();
    format!("<td class=\"bar\"><span style=\"width:{share:.1}%{style}\"></span></td>")
}

fn product_label(index: usize) -> &'static str {
    match index {
        0 => "message",
        1 => "transcription",
        2 => "voice",
        3 => "zentrunk",
        _ => "other charges",
    }
}

fn add(sum: &mut i128, value: i128) -> Result<()> {
    *sum = sum.checked_add(value).ok_or_else(overflow)?;
    Ok(())
}

fn overflow() -> Error {
    Error::Internal("sum overflow while drawing the report".to_owned())
}

/// Escapes text for HTML content and attribute values.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    esc_into(&mut out, text);
    out
}

/// Appends `text` to `out`, escaped as [`esc`] does.
pub fn esc_into(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(at) = rest.bytes().position(|b| matches!(b, b'&' | b'<' | b'>' | b'"' | b'\'')) {
        out.push_str(&rest[..at]);
        out.push_str(match rest.as_bytes()[at] {
            b'&' => "&amp;",
            b'<' => "&lt;",
            b'>' => "&gt;",
            b'"' => "&quot;",
            _ => "&#39;",
        });
        rest = &rest[at + 1..];
    }
    out.push_str(rest);
}

/// A folder name as a relative URL path segment (`%` and other unsafe
/// bytes percent-encoded).
fn href(dir: &str) -> String {
    let mut out = String::with_capacity(dir.len());
    for b in dir.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
            out.push(b as char);
        } else {
            w!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_encodes_links() {
        assert_eq!(esc("<a href=\"x\">&'"), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(esc("é<ü>ß&"), "é&lt;ü&gt;ß&amp;");
        assert_eq!(esc("plain"), "plain");
        assert_eq!(href("A%2FB c"), "A%252FB%20c");
    }
}
