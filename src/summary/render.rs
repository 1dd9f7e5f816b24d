//! The usage summary for a person: `summary --format table` renders pages
//! (one, or every page of a result) as an aligned terminal table, with
//! totals per unit kind and the currency. (`--format csv` is the report's
//! `usage.csv` writer, `report::csv_out::UsageCsv`: one CSV dialect.)
//!
//! A table wider than the terminal is fitted in steps, each said in a note
//! under it: day-aligned `FROM` times shown as dates, then `REASON`
//! shortened, then left out. The CSV and JSON keep every field whole.
//!
//! Every number is the exact text of the JSON value (`Decimal`'s form), and
//! every sum is a checked exact add: nothing goes through floating point.
//! Totals never add different units: message segments, calls (voice and
//! zentrunk) with their seconds, and transcriptions with theirs are summed
//! apart; only the money, all in the page's one currency, is summed over
//! every row.

use std::fmt::Write as _;

use super::wire::{Page, UsageItem};
use crate::error::{Error, Result};
use crate::money::Amount;
use crate::records::Product;

/// The units that can be added together: one totals line each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum UnitKind {
    /// Message segments (no duration).
    Segments,
    /// Voice and zentrunk calls, with billed seconds.
    Calls,
    /// Transcriptions, with recording seconds.
    Transcriptions,
}

impl UnitKind {
    fn of(product: Product) -> Option<UnitKind> {
        match product {
            Product::Message => Some(UnitKind::Segments),
            Product::Voice | Product::Zentrunk => Some(UnitKind::Calls),
            Product::Transcription => Some(UnitKind::Transcriptions),
            Product::Other => None,
        }
    }

    /// The unit's name for `n` units.
    fn unit(self, n: u128) -> &'static str {
        match (self, n == 1) {
            (UnitKind::Segments, true) => "segment",
            (UnitKind::Segments, false) => "segments",
            (UnitKind::Calls, true) => "call",
            (UnitKind::Calls, false) => "calls",
            (UnitKind::Transcriptions, true) => "transcription",
            (UnitKind::Transcriptions, false) => "transcriptions",
        }
    }

    /// What the totals line is over.
    fn label(self) -> &'static str {
        match self {
            UnitKind::Segments => "message",
            UnitKind::Calls => "voice+zentrunk",
            UnitKind::Transcriptions => "transcription",
        }
    }
}

/// The sums of one unit kind.
#[derive(Clone, Copy, Debug, Default)]
struct Sums {
    units: u128,
    seconds: Amount,
    amount: Amount,
}

/// A cell's alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Align {
    Left,
    Right,
    /// Decimals with their points in one column (no digit added: the
    /// text stays the exact value); other cells right-aligned.
    Point,
}

/// Longest `REASON` shown; longer labels end in `...` (the CSV and JSON
/// have them whole).
const REASON_WIDTH: usize = 40;

/// Rows of cells printed with aligned columns.
#[derive(Debug, Default)]
struct Grid {
    align: Vec<Align>,
    rows: Vec<Vec<String>>,
    /// Before which row a rule is drawn.
    rule_before: Option<usize>,
}

/// The widths of a grid's columns ([`Grid::columns`]), each list by column.
struct ColumnWidths {
    /// Each column's width.
    widths: Vec<usize>,
    /// Per `Point` column, its widest point and fraction.
    fraction: Vec<usize>,
}

impl Grid {
    /// The width of the widest line.
    fn width(&self) -> usize {
        let widths = self.columns().widths;
        widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1)
    }

    /// Each column's width, and per `Point` column its widest point and
    /// fraction.
    fn columns(&self) -> ColumnWidths {
        let columns = self.align.len();
        let mut widths = vec![0usize; columns];
        // Per `Point` column: the widest whole part and the widest point and fraction.
        let mut whole = vec![0usize; columns];
        let mut fraction = vec![0usize; columns];
        for row in &self.rows {
            for (c, cell) in row.iter().enumerate().take(columns) {
                let width = cell.chars().count();
                match (self.align[c], cell.find('.')) {
                    (Align::Point, Some(point)) => {
                        whole[c] = whole[c].max(point);
                        fraction[c] = fraction[c].max(cell.len() - point);
                    }
                    _ => widths[c] = widths[c].max(width),
                }
            }
        }
        for c in 0..columns {
            widths[c] = widths[c].max(whole[c] + fraction[c]);
        }
        ColumnWidths { widths, fraction }
    }

    fn render(&self, out: &mut String) {
        let columns = self.align.len();
        let ColumnWidths { widths, fraction } = self.columns();
        for (i, row) in self.rows.iter().enumerate() {
            if self.rule_before == Some(i) {
                let total = widths.iter().sum::<usize>() + 2 * columns.saturating_sub(1);
                out.push_str(&"-".repeat(total));
                out.push('\n');
            }
            let mut line = String::new();
            for (c, cell) in row.iter().enumerate().take(columns) {
                if c > 0 {
                    line.push_str("  ");
                }
                let width = cell.chars().count();
                let (left, right) = match (self.align[c], cell.find('.')) {
                    (Align::Left, _) => (0, widths[c].saturating_sub(width)),
                    (Align::Point, Some(point)) => {
                        let right = fraction[c] - (cell.len() - point);
                        (widths[c].saturating_sub(width + right), right)
                    }
                    (Align::Right | Align::Point, _) => (widths[c].saturating_sub(width), 0),
                };
                line.push_str(&" ".repeat(left));
                line.push_str(cell);
                line.push_str(&" ".repeat(right));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
}

/// How the usage grid is fitted into a width (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Fit {
    /// `FROM` as dates (every row starts at midnight UTC).
    dates: bool,
    /// `REASON`'s longest text; `None` leaves the column out.
    reason: Option<usize>,
}

impl Fit {
    /// The table as it is.
    const WHOLE: Fit = Fit { dates: false, reason: Some(REASON_WIDTH) };
}

/// The shortest `REASON` kept before the column is left out.
const REASON_MIN: usize = 12;

/// `text` cut to `max` characters, ending in `...` when cut.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut short: String = text.chars().take(max.saturating_sub(3)).collect();
    short.push_str("...");
    short
}

/// One usage row's cells, before the columns are chosen.
#[derive(Debug)]
struct Row {
    from_date: String,
    product: &'static str,
    type_: String,
    subaccount: Option<String>,
    country: Option<String>,
    direction: Option<&'static str>,
    code: Option<String>,
    reason: Option<&'static str>,
    units: u128,
    kind: UnitKind,
    seconds: Option<Amount>,
    amount: Amount,
}

/// One other-charges item's cells.
#[derive(Debug)]
struct Charge {
    from_date: String,
    description: String,
    units: u128,
    amount: Amount,
}

/// A terminal table of one page or of every page of a result: add the pages
/// in order with [`Table::add`], then [`Table::render`].
#[derive(Debug, Default)]
pub struct Table {
    /// The first page's heading: account, granularity, window, currency.
    heading: Option<String>,
    currency: String,
    rows: Vec<Row>,
    charges: Option<Vec<Charge>>,
    total_spend: Option<Amount>,
    subaccount_spend: Vec<(String, Amount)>,
    total_subaccount_spend: Option<Amount>,
    /// The last page added had a next page.
    more: bool,
    pages: usize,
}

impl Table {
    /// An empty table.
    pub fn new() -> Table {
        Table::default()
    }

    /// Adds a page's rows (and, from page 1, its totals and other charges).
    pub fn add(&mut self, page: &Page<'_>) -> Result<()> {
        let meta = &page.meta;
        if self.heading.is_none() {
            let mut heading = format!("usage of {}", meta.auth_id);
            if let Some(sub) = meta.subaccount_auth {
                let _ = write!(heading, " (subaccount {sub})");
            }
            let _ = write!(heading, ", by {}, {} -> {}", meta.granularity, meta.from_date, meta.to_date);
            if let Some(tz) = meta.timezone {
                let _ = write!(heading, " ({tz})");
            }
            let _ = write!(heading, ", amounts in {}", meta.currency);
            self.heading = Some(heading);
            self.currency = meta.currency.to_owned();
        }
        for item in &page.usage {
            self.rows.push(row(item)?);
        }
        if let Some(charges) = &page.other_charges {
            let list = self.charges.get_or_insert_with(Vec::new);
            list.extend(charges.iter().map(|c| Charge {
                from_date: c.from_date.clone(),
                description: c.description.to_owned(),
                units: c.total_units,
                amount: c.total_amount.0,
            }));
        }
        if let Some(total) = meta.total_spend {
            self.total_spend = Some(total.0);
        }
        if let Some(total) = meta.total_subaccount_spend {
            self.total_subaccount_spend = Some(total.0);
        }
        if let Some(map) = &meta.subaccount_spend {
            self.subaccount_spend = map.iter().map(|(k, v)| ((*k).to_owned(), v.0)).collect();
        }
        self.more = meta.next_page_token.is_some();
        self.pages += 1;
        Ok(())
    }

    /// The table as text: a heading, the usage rows, a totals line per unit
    /// kind and one for the money, the other charges, then the page-1
    /// totals of the whole result.
    pub fn render(&self) -> Result<String> {
        self.render_within(None)
    }

    /// [`Table::render`] fitted, as far as it goes, into `width` columns
    /// (a terminal's): each step taken is said in a note.
    pub fn render_within(&self, width: Option<usize>) -> Result<String> {
        let currency = &self.currency;
        let mut out = String::new();
        if let Some(heading) = &self.heading {
            out.push_str(heading);
            out.push_str("\n\n");
        }
        let mut fit = Fit::WHOLE;
        let mut widest = 0;
        if self.rows.is_empty() {
            out.push_str("no usage rows\n");
        } else {
            let (grid, fitted) = self.fitted_grid(width)?;
            let start = out.len();
            grid.render(&mut out);
            widest = out[start..].lines().map(|line| line.chars().count()).max().unwrap_or(0);
            fit = fitted;
        }
        if let Some(charges) = &self.charges {
            out.push('\n');
            if charges.is_empty() {
                out.push_str("no other charges\n");
            } else {
                charges_grid(charges, currency, fit.dates)?.render(&mut out);
            }
        }
        let mut notes = Vec::new();
        if fit != Fit::WHOLE {
            let mut steps = Vec::new();
            if fit.dates {
                steps.push("FROM shown as dates");
            }
            match fit.reason {
                Some(REASON_WIDTH) => {}
                Some(_) => steps.push("REASON shortened"),
                None => steps.push("REASON left out"),
            }
            // Said as done only when the table does fit: the other columns
            // are never cut.
            let width = width.unwrap_or_default();
            let done = match widest > width {
                true => format!("shortened for {width} columns, still {widest} wide"),
                false => format!("fitted to {width} columns"),
            };
            notes.push(format!("{done}: {} (--format csv or json has every field)", steps.join(", ")));
        }
        if let Some(total) = self.total_spend {
            let what = if self.charges.is_some() { "usage and other charges" } else { "usage" };
            notes.push(format!("total spend ({what}, whole window): {total} {currency}"));
        }
        if let Some(total) = self.total_subaccount_spend {
            notes.push(format!("subaccount spend (whole window): {total} {currency}"));
        }
        if !self.subaccount_spend.is_empty() {
            let list: Vec<String> = self.subaccount_spend.iter().map(|(k, v)| format!("{k} {v}")).collect();
            notes.push(format!("spend by subaccount (whole window, {currency}): {}", list.join(", ")));
        }
        if self.more || (self.total_spend.is_none() && self.total_subaccount_spend.is_none()) {
            notes.push("the totals lines are over the rows shown (the whole result's totals are on page 1)".to_owned());
        }
        if self.more {
            notes.push(
                "more rows follow: --all-pages for every page, or the next page's token with --page-token \
                 (--format json shows it)"
                    .to_owned(),
            );
        }
        if !notes.is_empty() {
            out.push('\n');
            for note in notes {
                out.push_str(&note);
                out.push('\n');
            }
        }
        Ok(out)
    }

    /// The usage grid within `width`: the first step that fits, or the
    /// last step.
    fn fitted_grid(&self, width: Option<usize>) -> Result<(Grid, Fit)> {
        let whole = self.usage_grid(Fit::WHOLE)?;
        let Some(width) = width else { return Ok((whole, Fit::WHOLE)) };
        if whole.width() <= width {
            return Ok((whole, Fit::WHOLE));
        }
        let dates = self.rows.iter().all(|r| r.from_date.ends_with("T00:00:00Z"))
            && self.charges.iter().flatten().all(|c| c.from_date.ends_with("T00:00:00Z"));
        let mut steps = vec![Fit { dates, reason: Some(REASON_WIDTH) }];
        let over = self.usage_grid(steps[0])?.width().saturating_sub(width);
        if over > 0 && REASON_WIDTH.saturating_sub(over) >= REASON_MIN {
            steps.push(Fit { dates, reason: Some(REASON_WIDTH - over) });
        }
        steps.push(Fit { dates, reason: None });
        let mut last = (whole, Fit::WHOLE);
        for fit in steps {
            let grid = self.usage_grid(fit)?;
            let fits = grid.width() <= width;
            last = (grid, fit);
            if fits {
                break;
            }
        }
        Ok(last)
    }

    fn usage_grid(&self, fit: Fit) -> Result<Grid> {
        let rows = &self.rows;
        let subaccount = rows.iter().any(|r| r.subaccount.is_some());
        let country = rows.iter().any(|r| r.country.is_some());
        let direction = rows.iter().any(|r| r.direction.is_some());
        let code = rows.iter().any(|r| r.code.as_deref().is_some_and(|c| !c.is_empty()));
        let reason = fit.reason.is_some() && rows.iter().any(|r| r.reason.is_some());
        let seconds = rows.iter().any(|r| r.seconds.is_some());
        let mut align = vec![Align::Left, Align::Left, Align::Left];
        let mut head = vec!["FROM".to_owned(), "PRODUCT".to_owned(), "TYPE".to_owned()];
        let optional = [
            (subaccount, "SUBACCOUNT"),
            (country, "COUNTRY"),
            (direction, "DIRECTION"),
            (code, "CODE"),
            (reason, "REASON"),
        ];
        for (_, name) in optional.iter().filter(|(on, _)| *on) {
            align.push(Align::Left);
            head.push((*name).to_owned());
        }
        align.extend([Align::Right, Align::Left]);
        head.extend(["UNITS".to_owned(), String::new()]);
        if seconds {
            align.push(Align::Point);
            head.push("SECONDS".to_owned());
        }
        align.push(Align::Point);
        head.push(format!("AMOUNT {}", self.currency));
        let n_optional = optional.iter().filter(|(on, _)| *on).count();

        let mut grid = Grid { align, rows: vec![head], rule_before: None };
        let mut sums: std::collections::BTreeMap<UnitKind, Sums> = Default::default();
        let mut money = Amount::ZERO;
        for r in rows {
            let mut cells = vec![from(&r.from_date, fit.dates), r.product.to_owned(), r.type_.clone()];
            let values = [
                (subaccount, r.subaccount.clone()),
                (country, r.country.clone()),
                (direction, r.direction.map(str::to_owned)),
                (code, r.code.clone()),
                (reason, r.reason.map(|r| shorten(r, fit.reason.unwrap_or(REASON_WIDTH)))),
            ];
            cells.extend(values.into_iter().filter(|(on, _)| *on).map(|(_, v)| v.unwrap_or_default()));
            cells.extend([r.units.to_string(), r.kind.unit(r.units).to_owned()]);
            if seconds {
                cells.push(r.seconds.map(|s| s.to_string()).unwrap_or_default());
            }
            cells.push(r.amount.to_string());
            grid.rows.push(cells);

            let sum = sums.entry(r.kind).or_default();
            sum.units = sum.units.checked_add(r.units).ok_or_else(overflow)?;
            if let Some(s) = r.seconds {
                sum.seconds = sum.seconds.checked_add(s).ok_or_else(overflow)?;
            }
            sum.amount = sum.amount.checked_add(r.amount).ok_or_else(overflow)?;
            money = money.checked_add(r.amount).ok_or_else(overflow)?;
        }
        grid.rule_before = Some(grid.rows.len());
        let blanks = 1 + n_optional;
        for (kind, sum) in &sums {
            let mut cells = vec!["total".to_owned(), kind.label().to_owned()];
            cells.extend(std::iter::repeat_n(String::new(), blanks));
            cells.extend([sum.units.to_string(), kind.unit(sum.units).to_owned()]);
            if seconds {
                cells.push(if *kind == UnitKind::Segments { String::new() } else { sum.seconds.to_string() });
            }
            cells.push(sum.amount.to_string());
            grid.rows.push(cells);
        }
        let mut cells = vec![format!("total {}", rows_text(rows.len())), "usage".to_owned()];
        cells.extend(std::iter::repeat_n(String::new(), blanks + 2 + usize::from(seconds)));
        cells.push(money.to_string());
        grid.rows.push(cells);
        Ok(grid)
    }
}

fn rows_text(n: usize) -> String {
    if n == 1 {
        "(1 row)".to_owned()
    } else {
        format!("({n} rows)")
    }
}

/// A `FROM` cell: the time, or its date when `dates`.
fn from(time: &str, dates: bool) -> String {
    match dates {
        true => time.strip_suffix("T00:00:00Z").unwrap_or(time).to_owned(),
        false => time.to_owned(),
    }
}

fn charges_grid(charges: &[Charge], currency: &str, dates: bool) -> Result<Grid> {
    let align = vec![Align::Left, Align::Left, Align::Right, Align::Point];
    let head = ["FROM", "OTHER CHARGE", "UNITS"].map(str::to_owned).into_iter().chain([format!("AMOUNT {currency}")]);
    let mut grid = Grid { align, rows: vec![head.collect()], rule_before: None };
    let mut money = Amount::ZERO;
    for c in charges {
        grid.rows.push(vec![
            from(&c.from_date, dates),
            // One line a row: a description's tabs and line breaks escaped.
            crate::error::printable(&c.description).into_owned(),
            c.units.to_string(),
            c.amount.to_string(),
        ]);
        money = money.checked_add(c.amount).ok_or_else(overflow)?;
    }
    grid.rule_before = Some(grid.rows.len());
    grid.rows.push(vec![
        format!("total {}", rows_text(charges.len())),
        "other charges".to_owned(),
        String::new(),
        money.to_string(),
    ]);
    Ok(grid)
}

fn row(item: &UsageItem<'_>) -> Result<Row> {
    let kind = Product::parse(item.product)
        .and_then(UnitKind::of)
        .ok_or_else(|| Error::Internal(format!("a usage row of product '{}'", item.product)))?;
    Ok(Row {
        from_date: item.from_date.clone(),
        product: item.product,
        type_: item.type_.to_owned(),
        subaccount: item.subaccount_auth.map(str::to_owned),
        country: item.country.map(str::to_owned),
        direction: item.direction,
        code: item.error_code.or(item.hangup_cause).map(str::to_owned),
        reason: item.error_reason,
        units: item.total_units,
        kind,
        seconds: item.duration_seconds.map(|d| d.0),
        amount: item.total_amount.0,
    })
}

fn overflow() -> Error {
    Error::Internal("sum overflow while writing the table".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::wire::{ChargeItem, Decimal, Meta};

    fn amount(text: &str) -> Decimal {
        Decimal(Amount::parse(text.as_bytes()).unwrap())
    }

    fn item(product: &'static str, units: u128, seconds: Option<&str>, total: &str) -> UsageItem<'static> {
        UsageItem {
            from_date: "2026-11-20T00:00:00Z".into(),
            to_date: "2026-11-21T00:00:00Z".into(),
            product,
            type_: "t",
            subaccount_auth: None,
            country: None,
            direction: None,
            total_units: units,
            duration_seconds: seconds.map(amount),
            total_amount: amount(total),
            surcharge: None,
            error_code: None,
            hangup_cause: None,
            error_reason: None,
        }
    }

    fn page(usage: Vec<UsageItem<'static>>, charges: Option<Vec<ChargeItem<'static>>>) -> Page<'static> {
        Page {
            api_id: "id".into(),
            meta: Meta {
                auth_id: "A",
                subaccount_auth: None,
                granularity: "day",
                from_date: "2026-11-20T00:00:00Z".into(),
                to_date: "2026-11-21T00:00:00Z".into(),
                timezone: None,
                currency: "USD",
                page_size: 100,
                next_page_token: None,
                total_spend: Some(amount("0.300000001")),
                total_subaccount_spend: None,
                subaccount_spend: Some(Default::default()),
            },
            usage,
            other_charges: charges,
        }
    }

    /// Segments, calls and transcriptions get a totals line each (voice and
    /// zentrunk calls together), seconds are summed per kind, and the money
    /// of every row is summed exactly (0.1 + 0.2 is 0.3, not 0.30000000000000004).
    #[test]
    fn totals_never_mix_units_and_money_is_exact() {
        let usage = vec![
            item("message", 3, None, "0.1"),
            item("voice", 2, Some("60.5"), "0.2"),
            item("zentrunk", 1, Some("1.000000001"), "0.000000001"),
            item("transcription", 1, Some("30"), "0.0"),
        ];
        let mut table = Table::new();
        table.add(&page(usage, None)).unwrap();
        let text = table.render().unwrap();
        let words = |l: &str| l.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let line = |start: &str| {
            let start = words(start);
            let found = text.lines().map(words).find(|w| w.starts_with(&start));
            found.unwrap_or_else(|| panic!("no {start:?} in\n{text}"))
        };
        assert_eq!(line("total message"), ["total", "message", "3", "segments", "0.1"]);
        assert_eq!(
            line("total voice+zentrunk"),
            ["total", "voice+zentrunk", "3", "calls", "61.500000001", "0.200000001"]
        );
        assert_eq!(line("total transcription"), ["total", "transcription", "1", "transcription", "30.0", "0.0"]);
        assert_eq!(line("total (4 rows)"), ["total", "(4", "rows)", "usage", "0.300000001"]);
        assert!(text.contains("total spend (usage, whole window): 0.300000001 USD"), "{text}");
        // Decimal points in one column, every amount as the API writes it.
        let points: Vec<usize> = text
            .lines()
            .filter(|l| l.starts_with("20") || l.starts_with("total ("))
            .map(|l| l.rfind('.').unwrap())
            .collect();
        assert!(points.len() == 5 && points.windows(2).all(|w| w[0] == w[1]), "{text}");
    }

    #[test]
    fn other_charges_get_their_own_totals() {
        let charge = |d: &'static str, a: &str| ChargeItem {
            from_date: "2026-11-20T00:00:00Z".into(),
            to_date: "2026-11-21T00:00:00Z".into(),
            description: d,
            total_units: 1,
            total_amount: amount(a),
        };
        let mut table = Table::new();
        table.add(&page(vec![], Some(vec![charge("Number Charges", "1.5"), charge("CNAM", "0.25")]))).unwrap();
        let text = table.render().unwrap();
        assert!(text.contains("no usage rows"), "{text}");
        let total = text.lines().find(|l| l.contains("other charges")).unwrap();
        assert!(total.ends_with("1.75"), "{text}");
        assert!(text.contains("total spend (usage and other charges, whole window)"), "{text}");
    }

    /// A table wider than the terminal is fitted step by step, each step
    /// said; a table that fits, or one with no width, is left whole.
    #[test]
    fn a_wide_table_is_fitted_and_says_how() {
        let mut usage = vec![item("message", 3, None, "0.1"), item("voice", 2, Some("60.5"), "0.2")];
        usage[0].error_code = Some("30");
        usage[0].error_reason = Some("A reason that is much longer than any terminal would like to show");
        usage[1].hangup_cause = Some("4000");
        let mut table = Table::new();
        table.add(&page(usage, None)).unwrap();
        let whole = table.render().unwrap();
        assert_eq!(table.render_within(None).unwrap(), whole);
        assert_eq!(table.render_within(Some(500)).unwrap(), whole);
        let grid_width = |text: &str| {
            let grid = text.lines().skip(2).take_while(|l| !l.is_empty());
            grid.map(|l| l.chars().count()).max().unwrap()
        };
        let wide = grid_width(&whole);
        // Dates first, then REASON shortened, then left out.
        let dated = table.render_within(Some(wide - 1)).unwrap();
        assert!(grid_width(&dated) < wide, "{dated}");
        assert!(dated.contains("\n2026-11-20  "), "{dated}");
        assert!(dated.contains("fitted to"), "{dated}");
        assert!(dated.contains("FROM shown as dates (--format csv"), "{dated}");
        let shortened = table.render_within(Some(wide - 20)).unwrap();
        assert_eq!(grid_width(&shortened), wide - 20, "{shortened}");
        assert!(shortened.contains("FROM shown as dates, REASON shortened"), "{shortened}");
        assert!(shortened.contains(" A reason that is much l...  "), "{shortened}");
        let narrow = table.render_within(Some(60)).unwrap();
        assert!(!narrow.lines().nth(2).unwrap().contains("REASON"), "{narrow}");
        // Still wider than asked: said so, not "fitted".
        let still = grid_width(&narrow);
        if still > 60 {
            assert!(narrow.contains(&format!("shortened for 60 columns, still {still} wide")), "{narrow}");
        } else {
            assert!(narrow.contains("fitted to 60 columns"), "{narrow}");
        }
        let tiny = table.render_within(Some(10)).unwrap();
        assert!(tiny.contains("shortened for 10 columns, still") && !tiny.contains("fitted to"), "{tiny}");
        assert!(narrow.contains("REASON left out"), "{narrow}");
        // The numbers are the same in every form.
        for text in [&dated, &shortened, &narrow] {
            assert!(text.contains("total (2 rows)"), "{text}");
            assert!(text.lines().any(|l| l.ends_with(" 0.3")), "{text}");
        }
    }
}
