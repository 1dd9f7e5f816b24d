//! The usage table of `report.html`, written row by row as the pages are
//! cut. A small account gets every row, in the pages' order; a large one
//! (more than [`SHOWN_ROWS`]) gets its top rows by amount (ties in the
//! pages' order), so the page stays small; the full table is in usage.csv.
//! The footer has a total per product (units in that product's unit,
//! never segments added to calls) and one money total over every row.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::fmt::Write as _;

use super::format::{duration_html, grouped, money_html, period_html};
use super::{add, esc, esc_into, overflow, PRODUCTS};
use crate::error::Result;
use crate::money::Amount;
use crate::records::Product;
use crate::summary::wire::UsageItem;

/// Rows shown before the table shows only the top rows by amount (about
/// 350 bytes each: the page stays well under a megabyte).
pub const SHOWN_ROWS: usize = 500;

/// The sums of one product's rows.
#[derive(Debug, Default, Clone, Copy)]
struct ProductSum {
    rows: usize,
    units: u128,
    duration: i128,
    amount: i128,
}

/// A row kept for the top of a large table: ordered by amount, then the
/// earlier row first.
#[derive(Debug)]
struct Ranked {
    amount: i128,
    seq: Reverse<usize>,
    html: String,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Ranked {}
impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.amount, self.seq).cmp(&(other.amount, other.seq))
    }
}

/// The table as it is written.
#[derive(Debug)]
pub(super) struct UsageTable {
    currency: String,
    expected: usize,
    rows: usize,
    per_product: [ProductSum; PRODUCTS],
    amount: i128,
    surcharge: i128,
    /// The best [`SHOWN_ROWS`] rows so far (smallest on top), when the
    /// table has more rows than that.
    top: Option<BinaryHeap<Reverse<Ranked>>>,
}

impl UsageTable {
    /// Writes the table's title and header (or the note that there are no
    /// rows) for `expected` rows in `currency`.
    pub(super) fn start(out: &mut String, expected: usize, currency: &str) -> UsageTable {
        let capped = expected > SHOWN_ROWS;
        if capped {
            w!(
                out,
                "<section><h2>Top {} usage rows by amount, of {}</h2>",
                grouped(SHOWN_ROWS as u128),
                grouped(expected as u128)
            );
        } else {
            w!(out, "<section><h2>Usage rows ({})</h2>", grouped(expected as u128));
        }
        if expected > 0 {
            out.push_str("<div class=\"scroll\"><table class=\"usage\"><thead><tr>");
            for (column, numeric) in COLUMNS {
                w!(out, "<th{}>{column}</th>", if numeric { " class=\"n\"" } else { "" });
            }
            w!(out, "<th class=\"n m\">Amount ({})</th></tr></thead><tbody>\n", esc(currency));
        }
        UsageTable {
            currency: currency.to_owned(),
            expected,
            rows: 0,
            per_product: [ProductSum::default(); PRODUCTS],
            amount: 0,
            surcharge: 0,
            top: capped.then(|| BinaryHeap::with_capacity(SHOWN_ROWS + 1)),
        }
    }

    /// One usage row: added to the sums, and written (or kept, when it is
    /// among the top rows of a large table).
    pub(super) fn row(&mut self, out: &mut String, item: &UsageItem<'_>) -> Result<()> {
        self.rows += 1;
        let amount = item.total_amount.0.nanos();
        let sum = &mut self.per_product[product_index(item.product)];
        sum.rows += 1;
        sum.units = sum.units.checked_add(item.total_units).ok_or_else(overflow)?;
        if let Some(d) = item.duration_seconds {
            add(&mut sum.duration, d.0.nanos())?;
        }
        add(&mut sum.amount, amount)?;
        add(&mut self.amount, amount)?;
        if let Some(s) = item.surcharge {
            add(&mut self.surcharge, s.0.nanos())?;
        }
        let Some(top) = &mut self.top else {
            row_html(out, item, &self.currency);
            return Ok(());
        };
        let ranked = Ranked { amount, seq: Reverse(self.rows), html: String::new() };
        if top.len() >= SHOWN_ROWS && top.peek().is_some_and(|Reverse(worst)| *worst >= ranked) {
            return Ok(());
        }
        let mut ranked = ranked;
        row_html(&mut ranked.html, item, &self.currency);
        top.push(Reverse(ranked));
        if top.len() > SHOWN_ROWS {
            top.pop();
        }
        Ok(())
    }

    /// Rows the table is for.
    pub(super) fn expected(&self) -> usize {
        self.expected
    }

    /// Rows written so far.
    pub(super) fn rows(&self) -> usize {
        self.rows
    }

    /// The kept rows of a large table, the per-product totals and the
    /// total; `full_in` says where every row is (for a large table).
    pub(super) fn finish(&mut self, out: &mut String, full_in: &str) {
        if self.expected == 0 {
            out.push_str("<p class=\"empty\">No usage rows.</p></section>\n");
            return;
        }
        if let Some(top) = self.top.take() {
            let mut kept: Vec<Ranked> = top.into_iter().map(|Reverse(r)| r).collect();
            kept.sort_by(|a, b| b.cmp(a));
            for row in kept {
                out.push_str(&row.html);
            }
        }
        out.push_str("</tbody><tfoot>");
        let span = BEFORE_UNITS;
        for (index, sum) in self.per_product.iter().enumerate() {
            if sum.rows == 0 {
                continue;
            }
            let product = Product::ALL[index];
            let (unit, has_duration) = (product.unit(), product.has_duration());
            w!(
                out,
                "<tr class=\"sum\"><td colspan=\"{span}\">{} &middot; {} rows</td><td class=\"n\">{} {unit}</td><td class=\"n\">",
                product.as_str(),
                grouped(sum.rows as u128),
                grouped(sum.units)
            );
            if has_duration {
                duration_html(out, Amount::from_nanos(sum.duration));
            }
            out.push_str("</td><td colspan=\"3\"></td><td class=\"n m\">");
            money_html(out, Amount::from_nanos(sum.amount), &self.currency);
            out.push_str("</td></tr>");
        }
        w!(
            out,
            "<tr><td colspan=\"{span}\">Total ({} rows)</td><td></td><td></td><td class=\"n\">",
            grouped(self.rows as u128)
        );
        money_html(out, Amount::from_nanos(self.surcharge), &self.currency);
        out.push_str("</td><td colspan=\"2\"></td><td class=\"n m\">");
        money_html(out, Amount::from_nanos(self.amount), &self.currency);
        out.push_str("</td></tr></tfoot></table></div>");
        if self.rows > SHOWN_ROWS {
            w!(
                out,
                "<p class=\"note\">{} more rows, with smaller amounts, are not shown here; every row is in {full_in}. \
                 The totals above are over all {} rows.</p>",
                grouped((self.rows - SHOWN_ROWS) as u128),
                grouped(self.rows as u128)
            );
        }
        out.push_str("</section>\n");
    }
}

/// The usage table's columns before the amount (name, numeric), in the
/// order of usage.csv with the amount moved last (it stays in view). The
/// bucket's bounds are one period as a customer reads it (exact bounds in
/// its title); a row has an error code (messages) or a hangup cause
/// (calls), never both, so they share the code column.
const COLUMNS: [(&str, bool); 11] = [
    ("Period", false),
    ("Product", false),
    ("Type", false),
    ("Subaccount", false),
    ("Country", false),
    ("Direction", false),
    ("Units", true),
    ("Duration", true),
    ("Surcharge", true),
    ("Code", false),
    ("Reason", false),
];

/// Columns before the units, which the footer's labels span.
const BEFORE_UNITS: usize = 6;

fn product_index(name: &str) -> usize {
    Product::parse(name).unwrap_or(Product::Other) as usize
}

/// One line of the usage table: the cells of usage.csv, escaped, numbers
/// formatted (exact values attached where rounding hid digits).
fn row_html(out: &mut String, item: &UsageItem<'_>, currency: &str) {
    let cells = |out: &mut String, values: &[Option<&str>]| {
        for value in values {
            out.push_str("<td>");
            esc_into(out, value.unwrap_or_default());
            out.push_str("</td>");
        }
    };
    out.push_str("<tr><td");
    period_html(out, &item.from_date, &item.to_date);
    out.push_str("</td>");
    cells(out, &[Some(item.product), Some(item.type_), item.subaccount_auth, item.country, item.direction]);
    w!(out, "<td class=\"n\">{}</td><td class=\"n\">", grouped(item.total_units));
    if let Some(d) = item.duration_seconds {
        duration_html(out, d.0);
    }
    out.push_str("</td><td class=\"n\">");
    if let Some(s) = item.surcharge {
        money_html(out, s.0, currency);
    }
    out.push_str("</td>");
    cells(out, &[item.error_code.or(item.hangup_cause)]);
    out.push_str("<td class=\"label\">");
    esc_into(out, item.error_reason.unwrap_or_default());
    out.push_str("</td><td class=\"n m\">");
    money_html(out, item.total_amount.0, currency);
    out.push_str("</td></tr>\n");
}
