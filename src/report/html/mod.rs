//! `report.html` and `index.html`: one self-contained page per account (inline
//! CSS and hand-written SVG; no script, no network), and an index linking them.
//!
//! Amounts are summed as integers of nano-units and shown rounded to the
//! currency's usual decimals with thousands separators (`format`); where
//! rounding hid digits the exact decimal of the JSON pages is in a `title`
//! and shown on tap or focus. Durations are `h:mm:ss`; totals are per unit
//! kind (segments, calls, transcriptions are never added together).
//! Floating point is used only for the geometry of bars, never for text.
//!
//! Every table keeps its money column last and sticky, so it stays in view
//! in a table scrolled sideways at any width (checked in headless Chromium
//! at 1366 and 390 px by `tests/it/html.rs`).
//!
//! Here: the pages' structure, the account's sums by dimension and the
//! tables; `chart` draws the spend-over-time SVG, `usage` the usage table,
//! `index` the index page, `format` the numbers; `report.css` is the style
//! sheet every page inlines.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use crate::aggregate::Totals;
use crate::error::{Error, Result};
use crate::labels;
use crate::money::Amount;
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
    /// The account's name in `accounts.csv`, when it has one.
    pub name: Option<&'a str>,
    /// Other charges as page 1 carries them, when returned.
    pub charges: Option<&'a [ChargeItem<'a>]>,
    /// The request's query string, as given.
    pub query: &'a str,
    /// The files the account's folder gets (the page says where the rows
    /// it leaves out are).
    pub formats: Formats,
}

/// Product colours, in [`Product`] order (message, transcription, voice,
/// zentrunk, other charges).
const COLOURS: [&str; PRODUCTS] = ["#3b6fb6", "#a86fb0", "#e8862e", "#4e9f5b", "#9a9a9a"];

/// Products, other charges included: the length of every per-product array.
const PRODUCTS: usize = Product::ALL.len();

/// The pages' style sheet (inlined into every page's `<style>`).
const CSS: &str = include_str!("report.css");

/// Appends formatted text to a `String` (which cannot fail).
macro_rules! w {
    ($out:expr, $($arg:tt)*) => {{
        let _ = write!($out, $($arg)*);
    }};
}

// Declared after `w!`, which they use.
mod chart;
pub mod format;
mod index;
mod usage;

use format::{duration_html, grouped, money_html};
pub use index::{index, IndexCounts, IndexEntry};

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
    formats: Formats,
    table: usage::UsageTable,
}

/// Bytes of page text buffered before they go to the sink.
pub const FLUSH_AT: usize = 1 << 16;

impl<W: Write> AccountReport<W> {
    /// Writes the head of the page: totals, charts and tables, and the
    /// usage table's header. `path` names the file in error messages.
    pub fn start(page: &AccountPage<'_>, sink: W, path: impl Into<PathBuf>) -> Result<AccountReport<W>> {
        let summary = page.summary;
        let mut out = String::with_capacity(2 * FLUSH_AT);
        account_head(&mut out, page)?;
        let table = usage::UsageTable::start(&mut out, summary.rows.len(), &summary.currency);
        let mut report = AccountReport {
            sink,
            path: path.into(),
            out,
            currency: esc(&summary.currency),
            formats: page.formats,
            table,
        };
        report.flush_if_full()?;
        Ok(report)
    }

    /// One usage row, as the JSON pages carry it (in their order).
    pub fn row(&mut self, item: &UsageItem<'_>) -> Result<()> {
        self.table.row(&mut self.out, item)?;
        self.flush_if_full()
    }

    /// The table's totals and the footer; hands the sink back, flushed.
    pub fn finish(mut self) -> Result<W> {
        if self.table.rows() != self.table.expected() {
            return Err(Error::Internal(format!(
                "report.html: {} usage rows written of {}",
                self.table.rows(),
                self.table.expected()
            )));
        }
        let full_in = if self.formats.csv {
            "usage.csv in this folder"
        } else if self.formats.json {
            "the JSON pages in this folder"
        } else {
            "none of this run's files (--formats without csv or json: add csv for usage.csv)"
        };
        let out = &mut self.out;
        self.table.finish(out, full_in);
        w!(
            out,
            "<footer>Generated by telemeter from the same data and request as the JSON pages and CSV files. \
             Amounts are in {} rounded to its usual decimals (half up); tap or hover a rounded amount or a \
             duration for its exact value. <a href=\"../index.html\">All accounts</a></footer>\n",
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

/// Everything above the usage rows.
fn account_head(out: &mut String, page: &AccountPage<'_>) -> Result<()> {
    let summary = page.summary;
    let request = &summary.request;
    let tz = summary.buckets.tz();
    let stats = Stats::of(summary)?;
    let auth_id = &request.auth_id;
    let title = match page.name {
        Some(name) => format!("Usage report: {name} ({auth_id})"),
        None => format!("Usage report: {auth_id}"),
    };
    head(out, &title);
    w!(out, "<header><h1>{}</h1><div class=\"sub\">", esc(page.name.unwrap_or(auth_id)));
    if page.name.is_some() {
        w!(out, "{} &middot; ", esc(auth_id));
    }
    out.push_str("<span");
    let (from, to) = (format_instant(request.window.start, tz), format_instant(request.window.end, tz));
    format::period_html(out, &from, &to);
    w!(out, "</span> &middot; {} &middot; by {}", esc(tz.name()), request.params.granularity.as_str());
    if let Some(subaccount) = &request.params.subaccount_auth {
        w!(out, " &middot; subaccount {}", esc(subaccount));
    }
    if !page.query.is_empty() {
        w!(out, " &middot; query <code>{}</code>", esc(page.query));
    }
    out.push_str("</div></header>\n");

    // Totals.
    let currency = &summary.currency;
    let money = |amount: Amount| {
        let mut text = String::new();
        money_html(&mut text, amount, currency);
        text
    };
    out.push_str("<div class=\"cards\">");
    card(out, "main", "Total spend", &format!("{} <small>{}</small>", money(summary.total_spend), esc(currency)));
    card(out, "", &format!("Usage &middot; {}", esc(currency)), &money(summary.usage_spend));
    match &summary.charges {
        Some(_) => card(out, "", &format!("Other charges &middot; {}", esc(currency)), &money(stats.charge_spend)),
        None => card(out, "", "Other charges", "<small>not requested</small>"),
    }
    card(out, "", "Usage rows", &grouped(summary.rows.len() as u128));
    card(out, "", "Records", &grouped(stats.records.into()));
    out.push_str("</div>\n");

    chart::spend_over_time(out, summary, &stats)?;

    out.push_str("<div class=\"grid2\">");
    // Usage of products without a country or direction (transcriptions)
    // is not in those tables: said under each, with its spend, so that
    // their sums are not taken for the account's.
    let mut outside = 0i128;
    for ((product, _), dim) in &stats.by_type {
        if !product.has_country_and_direction() {
            add(&mut outside, dim.amount)?;
        }
    }
    let outside = (outside != 0).then(|| {
        format!(
            "Transcriptions ({} {}) have no country or direction: not in this table.",
            money(Amount::from_nanos(outside)),
            esc(currency)
        )
    });
    dimension_table(out, "By country", "Country", &stats.by_country, currency, outside.as_deref())?;
    dimension_table(out, "By direction", "Direction", &stats.by_direction, currency, outside.as_deref())?;
    out.push_str("</div>\n");
    type_table(out, &stats, currency);

    out.push_str("<div class=\"grid2\">");
    subaccount_table(out, summary)?;
    charges_table(out, page.charges, summary.charges.is_some(), &stats, currency)?;
    out.push_str("</div>\n");

    out.push_str("<div class=\"grid2\">");
    codes_table(out, "Top message error codes", "Segments", labels::error_code, &stats.error_codes, currency);
    codes_table(out, "Top hangup causes", "Calls", labels::hangup_cause, &stats.hangup_causes, currency);
    out.push_str("</div>\n");
    Ok(())
}

/// Sums of one account's rows along the dimensions the page shows.
#[derive(Debug, Default)]
struct Stats {
    records: u64,
    charge_spend: Amount,
    /// Per bucket, spend per product (index = `Product as usize`).
    by_bucket: Vec<[i128; PRODUCTS]>,
    by_country: BTreeMap<String, Dim>,
    by_direction: BTreeMap<String, Dim>,
    by_type: BTreeMap<(Product, String), Dim>,
    error_codes: BTreeMap<String, Dim>,
    hangup_causes: BTreeMap<String, Dim>,
}

/// Units and money of one value of a dimension. `units` is only ever
/// shown where every row has one product's unit (a product and type, a
/// message error code, a hangup cause).
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
        let mut stats = Stats { by_bucket: vec![[0; PRODUCTS]; summary.buckets.len()], ..Stats::default() };
        let rows = summary.rows.iter().map(|r| (r, false));
        let charges = summary.charges.iter().flatten().map(|r| (r, true));
        for ((key, totals), is_charge) in rows.chain(charges) {
            stats.records += totals.records;
            if let Some(bucket) = stats.by_bucket.get_mut(key.bucket as usize) {
                add(&mut bucket[key.dims.product as usize], totals.amount)?;
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
        let product = key.dims.product;
        if product.has_country_and_direction() {
            let country = key.dims.country.as_ref().map_or("(none)", |c| c.as_str()).to_owned();
            self.by_country.entry(country).or_default().add(product, totals)?;
            let direction = key.dims.direction.map_or("(none)", |d| d.as_str()).to_owned();
            self.by_direction.entry(direction).or_default().add(product, totals)?;
        }
        self.by_type.entry((product, key.dims.type_.to_owned())).or_default().add(product, totals)?;
        if let Some(code) = key.dims.code.filter(|c| !c.is_empty()) {
            let table = if product.has_error_code() { &mut self.error_codes } else { &mut self.hangup_causes };
            table.entry(code.to_owned()).or_default().add(product, totals)?;
        }
        Ok(())
    }
}

/// A table of one dimension's values by spend: the top [`TOP_ROWS`], then
/// the rest summed (exactly) into one row so the table stays short.
fn dimension_table(
    out: &mut String,
    title: &str,
    column: &str,
    rows: &BTreeMap<String, Dim>,
    currency: &str,
    outside: Option<&str>,
) -> Result<()> {
    w!(out, "<section><h2>{title}</h2>");
    if rows.is_empty() {
        out.push_str("<p class=\"empty\">No message, voice or zentrunk usage.</p>");
        if let Some(note) = outside {
            w!(out, "<p class=\"note\">{note}</p>");
        }
        out.push_str("</section>");
        return Ok(());
    }
    let mut sorted: Vec<(&String, &Dim)> = rows.iter().collect();
    sorted.sort_by(|a, b| b.1.amount.cmp(&a.1.amount).then(a.0.cmp(b.0)));
    let max = sorted.iter().map(|(_, d)| d.amount).max().unwrap_or(0);
    w!(
        out,
        "<div class=\"scroll\"><table><thead><tr><th>{column}</th><th class=\"n\">Segments</th><th class=\"n\">Calls</th>\
         <th class=\"bar\"></th><th class=\"n m\">Spend ({})</th></tr></thead><tbody>",
        esc(currency)
    );
    let shown = if sorted.len() > TOP_ROWS + 1 { TOP_ROWS } else { sorted.len() };
    let mut rest = Dim::default();
    for (_, dim) in &sorted[shown..] {
        rest.segments = rest.segments.checked_add(dim.segments).ok_or_else(overflow)?;
        rest.calls = rest.calls.checked_add(dim.calls).ok_or_else(overflow)?;
        add(&mut rest.amount, dim.amount)?;
    }
    let rest_label = format!("<i>{} others</i>", grouped((sorted.len() - shown) as u128));
    let rows = sorted[..shown].iter().map(|(name, dim)| (esc(name), **dim));
    let rows = rows.chain((shown < sorted.len()).then_some((rest_label, rest)));
    for (name, dim) in rows {
        w!(
            out,
            "<tr><td>{name}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>{}<td class=\"n m\">",
            grouped(dim.segments),
            grouped(dim.calls),
            bar(dim.amount, max, None)
        );
        money_html(out, Amount::from_nanos(dim.amount), currency);
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table></div>");
    if let Some(note) = outside {
        w!(out, "<p class=\"note\">{note}</p>");
    }
    out.push_str("</section>");
    Ok(())
}

/// Rows of a dimension or subaccount table before the rest is summed into
/// one.
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
         <th class=\"n\">Duration</th><th class=\"bar\"></th><th class=\"n m\">Spend ({})</th></tr></thead><tbody>",
        esc(currency)
    );
    for ((product, type_), dim) in &stats.by_type {
        let (unit, has_duration) = (product.unit(), product.has_duration());
        w!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td>{unit}</td><td class=\"n\">",
            product.as_str(),
            esc(type_),
            grouped(dim.units)
        );
        if has_duration {
            duration_html(out, Amount::from_nanos(dim.duration));
        }
        w!(out, "</td>{}<td class=\"n m\">", bar(dim.amount, max, Some(COLOURS[*product as usize])));
        money_html(out, Amount::from_nanos(dim.amount), currency);
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table></div></section>\n");
}

fn subaccount_table(out: &mut String, summary: &Summary) -> Result<()> {
    let currency = &summary.currency;
    out.push_str("<section><h2>Spend per subaccount</h2>");
    if let Some(subaccount) = &summary.request.params.subaccount_auth {
        w!(out, "<p>Scoped to subaccount <b>{}</b>: ", esc(subaccount));
        money_html(out, summary.usage_spend, currency);
        w!(out, " {}</p></section>", esc(currency));
        return Ok(());
    }
    let mut subaccounts_total = 0i128;
    for spend in summary.subaccount_spend.values() {
        add(&mut subaccounts_total, spend.nanos())?;
    }
    let parent = summary.usage_spend.nanos().checked_sub(subaccounts_total).ok_or_else(overflow)?;
    // Label (HTML) and spend: the top subaccounts, the rest summed into one
    // line (exactly), then the parent's own usage.
    let mut rows: Vec<(String, i128)> = summary.subaccount_spend.iter().map(|(k, v)| (esc(k), v.nanos())).collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    if rows.len() > TOP_ROWS + 1 {
        let rest = rows.split_off(TOP_ROWS);
        let mut sum = 0i128;
        for (_, nanos) in &rest {
            add(&mut sum, *nanos)?;
        }
        rows.push((format!("<i>{} other subaccounts</i>", grouped(rest.len() as u128)), sum));
    }
    rows.push(("<i>parent account (no subaccount)</i>".to_owned(), parent));
    let max = rows.iter().map(|r| r.1).max().unwrap_or(0);
    w!(
        out,
        "<div class=\"scroll\"><table><thead><tr><th>Subaccount</th><th class=\"bar\"></th><th class=\"n m\">Spend ({})</th></tr></thead><tbody>",
        esc(currency)
    );
    for (label, nanos) in &rows {
        w!(out, "<tr><td>{label}</td>{}<td class=\"n m\">", bar(*nanos, max, None));
        money_html(out, Amount::from_nanos(*nanos), currency);
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody><tfoot><tr><td>Usage total</td><td></td><td class=\"n m\">");
    money_html(out, summary.usage_spend, currency);
    out.push_str("</td></tr></tfoot></table></div></section>");
    Ok(())
}

fn charges_table(
    out: &mut String,
    charges: Option<&[ChargeItem<'_>]>,
    returned: bool,
    stats: &Stats,
    currency: &str,
) -> Result<()> {
    out.push_str("<section><h2>Other charges by description</h2>");
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
    // Summed per description (the per-bucket lines are in other_charges.csv
    // and the JSON), so the table stays short over a long window.
    let mut by_description: BTreeMap<&str, (usize, u128, i128)> = BTreeMap::new();
    for item in items {
        let (lines, units, amount) = by_description.entry(item.description).or_default();
        *lines += 1;
        *units = units.checked_add(item.total_units).ok_or_else(overflow)?;
        add(amount, item.total_amount.0.nanos())?;
    }
    let mut sorted: Vec<(&str, (usize, u128, i128))> = by_description.into_iter().collect();
    sorted.sort_by(|a, b| b.1 .2.cmp(&a.1 .2).then(a.0.cmp(b.0)));
    w!(
        out,
        "<div class=\"scroll\"><table><thead><tr><th>Description</th><th class=\"n\">Lines</th><th class=\"n\">Units</th>\
         <th class=\"n m\">Amount ({})</th></tr></thead><tbody>",
        esc(currency)
    );
    for (description, (lines, units, amount)) in &sorted {
        w!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n m\">",
            esc(description),
            grouped(*lines as u128),
            grouped(*units)
        );
        money_html(out, Amount::from_nanos(*amount), currency);
        out.push_str("</td></tr>");
    }
    w!(
        out,
        "</tbody><tfoot><tr><td>Total</td><td class=\"n\">{}</td><td></td><td class=\"n m\">",
        grouped(items.len() as u128)
    );
    money_html(out, stats.charge_spend, currency);
    out.push_str("</td></tr></tfoot></table></div></section>");
    Ok(())
}

/// The top codes by units; `label` names a code.
fn codes_table(
    out: &mut String,
    title: &str,
    unit: &str,
    label: fn(&str) -> &'static str,
    codes: &BTreeMap<String, Dim>,
    currency: &str,
) {
    w!(out, "<section><h2>{title}</h2>");
    if codes.is_empty() {
        out.push_str("<p class=\"empty\">None in this window.</p></section>");
        return;
    }
    let mut sorted: Vec<(&String, &Dim)> = codes.iter().collect();
    sorted.sort_by(|a, b| b.1.units.cmp(&a.1.units).then(b.1.amount.cmp(&a.1.amount)).then(a.0.cmp(b.0)));
    let shown = sorted.len().min(10);
    let max = sorted.iter().map(|(_, d)| d.units).max().unwrap_or(0);
    w!(
        out,
        "<div class=\"scroll\"><table><thead><tr><th>Code</th><th>Label</th><th class=\"n\">{unit}</th>\
         <th class=\"bar\"></th><th class=\"n m\">Spend ({})</th></tr></thead><tbody>",
        esc(currency)
    );
    for (code, dim) in &sorted[..shown] {
        w!(
            out,
            "<tr><td>{}</td><td class=\"label\">{}</td><td class=\"n\">{}</td>{}<td class=\"n m\">",
            esc(code),
            esc(label(code)),
            grouped(dim.units),
            bar(dim.units.min(i128::MAX as u128) as i128, max.min(i128::MAX as u128) as i128, Some("#c0504d"))
        );
        money_html(out, Amount::from_nanos(dim.amount), currency);
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table></div>");
    if sorted.len() > shown {
        w!(out, "<p class=\"empty\">{} more codes in usage.csv.</p>", grouped((sorted.len() - shown) as u128));
    }
    out.push_str("</section>");
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
    let visible = visible_text(value.split("<small>").next().unwrap_or_default()).trim().len();
    let long = if class != "main" && visible > 10 { " long" } else { "" };
    w!(out, "<div class=\"card {class}{long}\"><div class=\"k\">{key}</div><div class=\"v\">{value}</div></div>");
}

/// `html` without its tags (entities are left as they are).
fn visible_text(html: &str) -> String {
    let mut text = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            _ if !in_tag => text.push(c),
            _ => {}
        }
    }
    text
}

/// A table cell with a bar of `value / max` of its width.
fn bar(value: i128, max: i128, colour: Option<&str>) -> String {
    let share = if max > 0 { (value.max(0) as f64 / max as f64 * 100.0).clamp(0.0, 100.0) } else { 0.0 };
    let style = colour.map(|c| format!(";background:{c}")).unwrap_or_default();
    format!("<td class=\"bar\"><span style=\"width:{share:.1}%{style}\"></span></td>")
}

/// The chart's name of product `index` (`Product as usize`): the API name,
/// "other charges" for other.
fn product_label(index: usize) -> &'static str {
    match Product::ALL.get(index) {
        Some(Product::Other) | None => "other charges",
        Some(product) => product.as_str(),
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
