//! The spend-over-time chart of an account's page: one stacked bar per
//! bucket and product, drawn twice (wide and narrow screens) as inline SVG,
//! each bar's total printed above it when the bars are few enough to label,
//! and under the chart a "values" table (a `<details>`: one tap opens it,
//! no script) with every bucket's amount per product. Bar geometry is
//! floating point; every amount printed is from the exact decimal
//! (rounded to the currency's decimals, exact in tooltips and titles).

use std::fmt::Write as _;

use super::format::{money, money_html};
use super::{add, esc, product_label, Stats, COLOURS, PRODUCTS};
use crate::error::Result;
use crate::money::Amount;
use crate::summary::Summary;
use crate::time::{format_instant, Granularity, Interval};

/// The chart's section: legend, the two drawings, and the axis note.
pub(super) fn spend_over_time(out: &mut String, summary: &Summary, stats: &Stats) -> Result<()> {
    out.push_str("<section><h2>Spend over time, by product</h2>");
    let present: Vec<usize> = (0..PRODUCTS).filter(|p| stats.by_bucket.iter().any(|b| b[*p] != 0)).collect();
    out.push_str("<div class=\"legend\">");
    for p in &present {
        w!(out, "<span><i style=\"background:{}\"></i>{}</span>", COLOURS[*p], product_label(*p));
    }
    out.push_str("</div>");
    if present.is_empty() {
        out.push_str("<p class=\"empty\">No spend in this window.</p></section>\n");
        return Ok(());
    }
    let mut totals = Vec::with_capacity(stats.by_bucket.len());
    for bucket in &stats.by_bucket {
        let mut sum = 0i128;
        for v in bucket {
            add(&mut sum, *v)?;
        }
        totals.push(sum);
    }
    let tz = summary.buckets.tz();
    let granularity = summary.request.params.granularity;
    let wide = Layout { class: "wide", width: 960.0, height: 300.0, left: 64.0, labels: 12, font: 11.0 };
    let narrow = Layout { class: "narrow", width: 420.0, height: 280.0, left: 44.0, labels: 5, font: 12.0 };
    for layout in [wide, narrow] {
        bar_chart(out, summary, stats, &present, &totals, &layout);
    }
    w!(out, "<p class=\"note\">{}</p>", esc(&axis_note(granularity, tz.name(), &summary.currency)));
    values_table(out, summary, stats, &present, &totals);
    out.push_str("</section>\n");
    Ok(())
}

/// Every non-empty bucket's spend per product, in a `<details>` that a
/// tap opens: the chart's values without hovering.
fn values_table(out: &mut String, summary: &Summary, stats: &Stats, present: &[usize], totals: &[i128]) {
    let tz = summary.buckets.tz();
    let currency = &summary.currency;
    let granularity = summary.request.params.granularity;
    w!(
        out,
        "<details class=\"values\"><summary>Values per {} ({})</summary><div class=\"scroll\"><table><thead><tr><th>{}</th>",
        granularity.as_str(),
        esc(currency),
        capitalized(granularity.as_str())
    );
    for p in present {
        w!(out, "<th class=\"n\">{}</th>", product_label(*p));
    }
    out.push_str("<th class=\"n m\">Total</th></tr></thead><tbody>");
    for (i, bucket) in stats.by_bucket.iter().enumerate() {
        if totals[i] == 0 && bucket.iter().all(|v| *v == 0) {
            continue;
        }
        let start = summary.buckets.span(i as u32).start;
        w!(out, "<tr><td>{}</td>", esc(&format_instant(start, tz)));
        for p in present {
            out.push_str("<td class=\"n\">");
            money_html(out, Amount::from_nanos(bucket[*p]), currency);
            out.push_str("</td>");
        }
        out.push_str("<td class=\"n m\">");
        money_html(out, Amount::from_nanos(totals[i]), currency);
        out.push_str("</td></tr>");
    }
    out.push_str("</tbody></table></div></details>");
}

/// The plot's left margin: the layout's, or more for long tick labels (a
/// digit is about 0.62 of the font's size, and 10 px of room).
fn axis_margin(layout: &Layout, ticks: &[(i128, String)]) -> f64 {
    let longest = ticks.iter().map(|(_, label)| label.chars().count()).max().unwrap_or(0);
    layout.left.max((longest as f64 * layout.font * 0.62 + 10.0).ceil())
}

/// An axis value as written in the pages' tables: its integer part grouped
/// by thousands, its decimals as few as it has (`1,500,000`, `0.05`).
fn axis_label(value: Amount) -> String {
    let plain = value.to_plain_string();
    let (whole, fraction) = plain.split_once('.').unwrap_or((&plain, ""));
    let grouped = whole.parse::<u128>().map_or_else(|_| whole.to_owned(), super::format::grouped);
    match fraction {
        "" => grouped,
        fraction => format!("{grouped}.{fraction}"),
    }
}

fn capitalized(word: &str) -> String {
    let mut chars = word.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

/// The size of one drawing of the spend chart.
struct Layout {
    class: &'static str,
    width: f64,
    height: f64,
    left: f64,
    labels: usize,
    font: f64,
}

/// One stacked bar per bucket; amounts are exact in the tooltips and axis.
fn bar_chart(out: &mut String, summary: &Summary, stats: &Stats, present: &[usize], totals: &[i128], layout: &Layout) {
    let max = totals.iter().copied().max().unwrap_or(0).max(1);
    let step = nice_step(max);
    let top = (max + step - 1) / step * step;
    let Layout { width, height, font, .. } = *layout;
    // The axis labels, grouped (`50,000,000`), and a margin wide enough
    // for the longest (a digit is about 0.62 of the font's size).
    let ticks: Vec<(i128, String)> =
        (0..=top / step).map(|k| k * step).map(|tick| (tick, axis_label(Amount::from_nanos(tick)))).collect();
    let left = axis_margin(layout, &ticks);
    let n = stats.by_bucket.len().max(1);
    // Few bars: each one's total is printed above it (room made at the top).
    let labelled = n <= layout.labels;
    let (right, top_pad, bottom) = (10.0, if labelled { 10.0 + font * 1.6 } else { 10.0 }, 26.0);
    let plot_w = width - left - right;
    let plot_h = height - top_pad - bottom;
    let slot = plot_w / n as f64;
    let bar_w = (slot * 0.78).max(1.0);
    let y = |nanos: i128| top_pad + plot_h - plot_h * (nanos as f64 / top as f64);
    w!(
        out,
        "<svg class=\"{}\" viewBox=\"0 0 {width} {height}\" role=\"img\" aria-label=\"Spend per {} by product\" \
         style=\"font-size:{font}px\">",
        layout.class,
        summary.request.params.granularity.as_str()
    );
    for (tick, label) in &ticks {
        let ty = y(*tick);
        w!(out, "<line x1=\"{left}\" x2=\"{}\" y1=\"{ty:.1}\" y2=\"{ty:.1}\" stroke=\"#e3e7ee\"/>", width - right);
        w!(out, "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>", left - 6.0, ty + 4.0);
    }
    let tz = summary.buckets.tz();
    let granularity = summary.request.params.granularity;
    let label_every = n.div_ceil(layout.labels);
    for (i, bucket) in stats.by_bucket.iter().enumerate() {
        let x = left + slot * i as f64 + (slot - bar_w) / 2.0;
        let Interval { start, end } = summary.buckets.span(i as u32);
        let mut title = format!("{} to {}", format_instant(start, tz), format_instant(end, tz));
        let mut base = 0i128;
        let mut rects = String::new();
        for p in present {
            let value = bucket[*p];
            if value == 0 {
                continue;
            }
            let (y0, y1) = (y(base), y(base + value));
            w!(
                rects,
                "<rect x=\"{x:.2}\" y=\"{y1:.2}\" width=\"{bar_w:.2}\" height=\"{:.2}\" fill=\"{}\"/>",
                (y0 - y1).max(0.5),
                COLOURS[*p]
            );
            w!(title, "\n{}: {}", product_label(*p), Amount::from_nanos(value));
            base += value;
        }
        w!(title, "\ntotal: {}", Amount::from_nanos(totals[i]));
        w!(out, "<g><title>{}</title>{rects}</g>", esc(&title));
        if labelled && totals[i] != 0 {
            w!(
                out,
                "<text class=\"val\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                x + bar_w / 2.0,
                y(totals[i]) - 5.0,
                esc(&money(Amount::from_nanos(totals[i]), &summary.currency))
            );
        }
        if i % label_every == 0 {
            w!(
                out,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                x + bar_w / 2.0,
                height - bottom + 16.0,
                esc(&bucket_label(start, tz, granularity))
            );
        }
    }
    w!(out, "<line x1=\"{left}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#1d2433\"/>", width - right, y(0), y(0));
    out.push_str("</svg>");
}

/// A round step (1, 2 or 5 times a power of ten, in nanos) giving about
/// four grid lines up to `max`.
fn nice_step(max: i128) -> i128 {
    let rough = (max / 4).max(1);
    let mut power = 1i128;
    while power.saturating_mul(10) <= rough {
        power *= 10;
    }
    for factor in [1, 2, 5, 10] {
        let step = power.saturating_mul(factor);
        if step >= rough {
            return step;
        }
    }
    power.saturating_mul(10)
}

fn bucket_label(start: i64, tz: chrono_tz::Tz, granularity: Granularity) -> String {
    let Some(utc) = chrono::DateTime::from_timestamp(start, 0) else { return String::new() };
    let local = utc.with_timezone(&tz);
    let format = match granularity {
        Granularity::Hour => "%d %H:%M",
        Granularity::Day => "%b %d",
        Granularity::Month => "%b %Y",
        Granularity::Year => "%Y",
    };
    local.format(format).to_string()
}

fn axis_note(granularity: Granularity, tz: &str, currency: &str) -> String {
    format!(
        "Amounts in {currency}; one bar per {}, local time {tz}. Hover a bar for its exact amounts, \
         or open the values below.",
        granularity.as_str()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_steps_are_round_numbers() {
        let unit = 1_000_000_000i128;
        assert_eq!(nice_step(10 * unit), 5 * unit);
        assert_eq!(nice_step(100 * unit), 50 * unit);
        assert_eq!(nice_step(7 * unit / 100), 2 * unit / 100);
        assert_eq!(nice_step(1), 1);
    }

    /// Axis labels are grouped as the tables' numbers are, and the margin
    /// holds the longest: a JPY account's 100 million is not cut off.
    #[test]
    fn axis_labels_are_grouped_and_fit_their_margin() {
        let unit = 1_000_000_000i128;
        assert_eq!(axis_label(Amount::from_nanos(150_000_000 * unit)), "150,000,000");
        assert_eq!(axis_label(Amount::from_nanos(5 * unit / 100)), "0.05");
        assert_eq!(axis_label(Amount::from_nanos(0)), "0");
        let layout = Layout { class: "narrow", width: 420.0, height: 280.0, left: 44.0, labels: 5, font: 12.0 };
        let small = [(0, "0".to_owned()), (unit, "1".to_owned())];
        assert_eq!(axis_margin(&layout, &small), 44.0);
        let large = [(0, "0".to_owned()), (150_000_000 * unit, "150,000,000".to_owned())];
        assert!(axis_margin(&layout, &large) >= 11.0 * 12.0 * 0.6 + 6.0, "{}", axis_margin(&layout, &large));
    }
}
