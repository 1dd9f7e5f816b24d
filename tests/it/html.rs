//! `report.html` and `index.html` as an analyst reads them: money rounded to
//! the currency's decimals with the exact JSON value attached, durations as
//! h:mm:ss, totals per unit kind, accounts by spend with a total per
//! currency, a large account's page kept small (its top rows by amount,
//! checked against usage.csv), and headless Chromium laying the pages out
//! at 1366 and 390 px with every column in view or reachable whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use super::common::telemeter;
use super::report::{run, write_sample, ACCOUNTS, NOW, SAMPLE_QUERY};

/// The usual decimals of the sample's currencies (ISO 4217).
fn decimals(currency: &str) -> usize {
    match currency {
        "JPY" => 0,
        _ => 2,
    }
}

/// `exact` (a JSON decimal) rounded half up to `decimals` digits, with
/// thousands separators: worked on the digits, as a person would.
fn rounded(exact: &str, decimals: usize) -> String {
    let (whole, fraction) = exact.split_once('.').unwrap_or((exact, ""));
    let fraction = format!("{fraction:0<width$}", width = decimals + 1);
    let mut digits: Vec<u8> = format!("0{whole}{}", &fraction[..decimals]).into_bytes();
    if fraction.as_bytes()[decimals] >= b'5' {
        let mut at = digits.len() - 1;
        loop {
            if digits[at] == b'9' {
                digits[at] = b'0';
                at -= 1;
            } else {
                digits[at] += 1;
                break;
            }
        }
    }
    let text = String::from_utf8(digits).expect("digits");
    let (whole, fraction) = text.split_at(text.len() - decimals);
    let whole = whole.trim_start_matches('0');
    let whole = if whole.is_empty() { "0" } else { whole };
    let mut grouped = String::new();
    for (i, c) in whole.chars().enumerate() {
        if i > 0 && (whole.len() - i).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(c);
    }
    if decimals == 0 {
        grouped
    } else {
        format!("{grouped}.{fraction}")
    }
}

/// How the page must show `exact`: the rounded text, inside a span whose
/// title is the exact value when rounding hid digits.
fn shown(exact: &str, currency: &str) -> String {
    let text = rounded(exact, decimals(currency));
    let digits = exact.split_once('.').map_or("", |(_, f)| f.trim_end_matches('0'));
    if digits.len() > decimals(currency) {
        format!("<span class=\"x\" tabindex=\"0\" title=\"{exact}\">{text}</span>")
    } else {
        text
    }
}

/// Nanos of a JSON decimal.
fn nanos(exact: &str) -> i128 {
    let (whole, fraction) = exact.split_once('.').unwrap_or((exact, ""));
    format!("{whole}{fraction:0<9}").parse().expect("decimal")
}

fn sample_report(dir: &Path) -> PathBuf {
    let data = dir.join("data");
    write_sample(&data, 1);
    let out = dir.join("out");
    let (data, out_text) = (data.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
    let output = run(&["report", "--data", data, "--out", out_text, "--query", SAMPLE_QUERY, "--now", NOW]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every usage row of the JSON pages is on the page with its amount
/// rounded to the currency's decimals (exact value in the title when
/// rounding hid digits), its duration as h:mm:ss (never raw seconds), and
/// the footer's unit totals are per product.
#[test]
fn money_is_rounded_with_the_exact_value_attached_and_durations_are_clock_times() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = sample_report(dir.path());
    for (id, currency, _) in ACCOUNTS {
        let html = read(&out.join(id).join("report.html"));
        assert!(html.starts_with("<!DOCTYPE html>"));
        for forbidden in ["<script", "http://", "https://", "<link", "@import", "url("] {
            assert!(!html.contains(forbidden), "{id}: {forbidden}");
        }
        let page1: Value = serde_json::from_str(&read(&out.join(id).join("page-0001.json"))).expect("page");
        let total = page1["meta"]["total_spend"].to_string();
        assert!(html.contains(&format!("{} <small>{currency}</small>", shown(&total, currency))), "{id}: {total}");

        let csv = read(&out.join(id).join("usage.csv"));
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().expect("header").split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).expect("column");
        let body = html.split("<table class=\"usage\">").nth(1).expect("usage table");
        let mut rows = body.split("<tbody>\n").nth(1).expect("rows").split("</tr>\n");
        let mut units: BTreeMap<String, u128> = BTreeMap::new();
        for line in lines {
            let cells: Vec<&str> = line.split(',').collect();
            let row = rows.next().expect("a row per usage line");
            let amount = cells[col("total_amount")];
            assert!(row.ends_with(&format!("<td class=\"n m\">{}</td>", shown(amount, currency))), "{row}");
            let duration = cells[col("duration_seconds")];
            if !duration.is_empty() {
                let seconds = (nanos(duration) + 500_000_000) / 1_000_000_000;
                let clock = format!("{}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
                assert!(row.contains(&format!("title=\"{duration}\">{clock}</span>")), "{duration} in {row}");
                assert!(!row.contains(&format!(">{duration}<")), "raw seconds in {row}");
            }
            *units.entry(cells[col("product")].to_owned()).or_default() +=
                cells[col("total_units")].parse::<u128>().expect("units");
        }
        let footer = body.split("<tfoot>").nth(1).expect("footer");
        for (product, sum) in &units {
            let unit = match product.as_str() {
                "message" => "segments",
                "transcription" => "transcriptions",
                _ => "calls",
            };
            assert!(
                footer.contains(&format!(">{} {unit}</td>", group(*sum as usize))),
                "{id}: {product} {sum} {unit} in {footer}"
            );
        }
        // No line of the footer adds one product's units to another's.
        let all: u128 = units.values().sum();
        if units.len() > 1 {
            assert!(!footer.contains(&format!(">{all}<")), "{id}: mixed units total {all}");
        }
    }
}

/// index.html lists accounts by spend (largest first within a currency,
/// ties by id) and totals each currency on its own line.
#[test]
fn index_is_sorted_by_spend_with_a_total_per_currency() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = sample_report(dir.path());
    let manifest: Value = serde_json::from_str(&read(&out.join("manifest.json"))).expect("manifest");
    let mut expected: Vec<(String, i128, String)> = manifest["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .map(|a| {
            let currency = a["currency"].as_str().expect("currency").to_owned();
            (currency, -nanos(&a["total_spend"].to_string()), a["auth_id"].as_str().expect("id").to_owned())
        })
        .collect();
    expected.sort();
    let index = read(&out.join("index.html"));
    let body = index.split("<tbody>").nth(1).expect("table");
    let order: Vec<&str> = body
        .split("<tr><td><a href=\"")
        .skip(1)
        .map(|row| row.split_once("\">").expect("link").1.split_once('<').expect("id").0)
        .collect();
    assert_eq!(order, expected.iter().map(|e| e.2.as_str()).collect::<Vec<_>>());
    let footer = body.split("<tfoot>").nth(1).expect("footer");
    for (currency, total) in manifest["spend_by_currency"].as_object().expect("spend") {
        let accounts = expected.iter().filter(|e| e.0 == *currency).count();
        let plural = if accounts == 1 { "" } else { "s" };
        let line = format!(
            "Total, {accounts} account{plural}</td><td class=\"n m\">{} <small>{currency}</small></td>",
            shown(&total.to_string(), currency)
        );
        assert!(footer.contains(&line), "{line} in {footer}");
    }
    // Each account's amount carries its currency in the same (pinned) cell.
    let rows: Vec<&str> =
        body.split("<tfoot>").next().expect("rows").split("</tr>").filter(|r| r.contains("<td")).collect();
    assert_eq!(rows.len(), expected.len());
    for (row, (currency, _, _)) in rows.iter().zip(&expected) {
        let pinned = row.split("<td class=\"n m\">").nth(1).expect("pinned cell");
        assert!(pinned.ends_with(&format!(" <small>{currency}</small></td>")), "{row}");
    }
}

/// The README tour's report: an account with a name in accounts.csv is
/// titled by it (its id beside it), one without by its id; the period is
/// the dates a customer reads, the last day included, with the exact
/// bounds in a title; each usage row's bucket is its date.
#[test]
fn names_and_periods_read_as_a_customer_reads_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("tour");
    let sample = crate::common::sample_data();
    let args = ["report", "--data", sample.to_str().expect("utf-8"), "--out", out.to_str().expect("utf-8")];
    let output = run(&[&args[..], &["--now", "2026-11-21T12:00:00Z"]].concat());
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let named = read(&out.join("MA001SHGA32ZDQYG9N8T").join("report.html"));
    assert!(named.contains("<title>Usage report: Northwind Telecom (MA001SHGA32ZDQYG9N8T)</title>"), "title");
    assert!(named.contains("<h1>Northwind Telecom</h1><div class=\"sub\">MA001SHGA32ZDQYG9N8T &middot; "), "heading");
    let period =
        "<span title=\"2026-11-14T00:00:00Z to 2026-11-21T00:00:00Z, end excluded\">2026-11-14 to 2026-11-20</span>";
    assert!(named.contains(period), "the window as dates, the last one included");
    let first_row = "<tr><td title=\"2026-11-14T00:00:00Z to 2026-11-15T00:00:00Z, end excluded\">2026-11-14</td>";
    assert!(named.contains(first_row), "a day bucket is its date");
    // Its transcription (0.10 on 2026-11-15) has no country or direction:
    // both tables say it is not in them, with its spend.
    let outside = "Transcriptions (";
    assert_eq!(named.matches(outside).count(), 2, "{named}");
    assert!(named.contains("0.10") && named.contains("have no country or direction: not in this table."));
    let unnamed = read(&out.join("MA003GM22SVQQT8ZPDNQ").join("report.html"));
    assert!(unnamed.contains("<h1>MA003GM22SVQQT8ZPDNQ</h1>"), "no row in accounts.csv: the id");
    let index = read(&out.join("index.html"));
    assert!(index.contains(">Northwind Telecom</a><small class=\"id\">MA001SHGA32ZDQYG9N8T</small>"), "index name");
    assert!(index.contains(">MA003GM22SVQQT8ZPDNQ</a></td>"), "index id");
}

/// A generated account with thousands of usage rows: its page shows the
/// top rows by amount (the same as usage.csv's, ties in row order), says
/// where the rest is, totals every row, and stays under a megabyte.
#[test]
fn a_large_account_page_shows_its_top_rows_and_stays_small() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, out) = (dir.path().join("data"), dir.path().join("out"));
    let (data_text, out_text) = (data.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
    telemeter(&[
        "generate",
        "--out",
        data_text,
        "--calls",
        "20000",
        "--messages",
        "10000",
        "--transcriptions",
        "2000",
        "--charges",
        "200",
        "--accounts",
        "3",
        "--start",
        "2026-08-01",
        "--days",
        "30",
        "--subaccounts",
        "20",
    ])
    .ok();
    let query = "granularity=day&from_date=2026-08-01&to_date=2026-08-31";
    let args = ["report", "--data", data_text, "--out", out_text, "--query", query, "--now", "2026-09-15T00:00:00Z"];
    telemeter(&[&args[..], &["--formats", "csv,html", "--quiet"]].concat()).ok();
    let manifest: Value = serde_json::from_str(&read(&out.join("manifest.json"))).expect("manifest");
    let (mut largest, mut capped_subaccounts) = ((0, String::new()), 0);
    for entry in std::fs::read_dir(&out).expect("out") {
        let folder = entry.expect("entry").path();
        if !folder.is_dir() {
            continue;
        }
        let html = read(&folder.join("report.html"));
        assert!(html.len() < 1 << 20, "{}: {} bytes", folder.display(), html.len());
        // Subaccounts beyond the top 12 are summed into one line.
        let name = folder.file_name().expect("name").to_string_lossy().into_owned();
        let accounts = manifest["accounts"].as_array().expect("accounts");
        let account = accounts.iter().find(|a| a["dir"] == name.as_str()).expect("in the manifest");
        let subaccounts = account["subaccount_spend"].as_object().expect("subaccounts").len();
        let line = format!("<i>{} other subaccounts</i>", subaccounts.saturating_sub(12));
        assert_eq!(html.contains(&line), subaccounts > 13, "{name}: {subaccounts} subaccounts, {line}");
        capped_subaccounts += usize::from(subaccounts > 13);
        let csv = read(&folder.join("usage.csv"));
        let rows = csv.lines().count() - 1;
        if rows > largest.0 {
            largest = (rows, folder.display().to_string());
        }
        let header: Vec<&str> = csv.lines().next().expect("header").split(',').collect();
        let amount_at = header.iter().position(|h| *h == "total_amount").expect("column");
        // CSV amounts, biggest first, ties in the file's order.
        let mut amounts: Vec<(i128, usize, String)> = csv
            .lines()
            .skip(1)
            .enumerate()
            .map(|(i, line)| {
                let exact = line.split(',').nth(amount_at).expect("amount").to_owned();
                (-nanos(&exact), i, exact)
            })
            .collect();
        amounts.sort();
        let shown_rows = rows.min(500);
        let table = html.split("<table class=\"usage\">").nth(1).expect("usage table");
        let body = table.split("<tbody>\n").nth(1).expect("rows").split("</tbody>").next().expect("body");
        let cells: Vec<&str> = body
            .split("</tr>\n")
            .filter(|r| !r.is_empty())
            .map(|r| r.rsplit("<td class=\"n m\">").next().expect("amount"))
            .collect();
        assert_eq!(cells.len(), shown_rows, "{}", folder.display());
        let mut expected: Vec<&(i128, usize, String)> = amounts.iter().take(shown_rows).collect();
        if rows <= 500 {
            expected.sort_by_key(|a| a.1);
        }
        for (cell, (_, _, exact)) in cells.iter().zip(expected) {
            assert_eq!(*cell, format!("{}</td>", shown(exact, "USD")));
        }
        let total: i128 = amounts.iter().map(|a| -a.0).sum();
        let footer = table.split("<tfoot>").nth(1).expect("footer");
        assert!(footer.contains(&format!("Total ({} rows)", group(rows))), "{footer}");
        let fraction = format!("{:09}", total % 1_000_000_000);
        let fraction = fraction.trim_end_matches('0');
        let total_text = format!("{}.{}", total / 1_000_000_000, if fraction.is_empty() { "0" } else { fraction });
        assert!(footer.contains(&shown(&total_text, "USD")), "total {total_text} in {footer}");
        if rows > 500 {
            assert!(html.contains(&format!("Top 500 usage rows by amount, of {}", group(rows))), "heading");
            assert!(html.contains("every row is in usage.csv in this folder"), "where the rest is");
        }
    }
    assert!(capped_subaccounts > 0, "no account with more than 13 subaccounts");
    assert!(largest.0 > 2000, "the generated set should have an account of thousands of rows: {largest:?}");
}

fn group(n: usize) -> String {
    rounded(&n.to_string(), 0)
}

/// Headless Chromium (at `/usr/bin/chromium`, installed in CI; elsewhere the
/// test says it was skipped) lays out the pages of the generated sample and
/// of `sample_data/` (the README tour's, with 20-character ids and account
/// names) at 1366 and 390 px:
/// - nothing makes the page itself scroll sideways;
/// - every money cell of every table lies inside the viewport and inside
///   its table's visible box;
/// - every column a table claims can be seen whole: at 1366 px no table
///   needs scrolling sideways at all; at 390 px each column, its table
///   scrolled to it, lies whole between the table's left edge and the
///   pinned amount column (nothing is only ever half under it);
/// - a rounded amount, focused as a tap focuses it, shows its exact value.
///
/// An inline probe script (added to a copy of the page; the pages have
/// none) writes the boxes into the DOM that `--dump-dom` prints. Also takes
/// screenshots; `TELEMETER_SCREENSHOT=prefix` keeps them.
#[test]
fn chromium_shows_every_column_at_laptop_and_phone_widths() {
    let chromium = Path::new("/usr/bin/chromium");
    if !chromium.exists() {
        crate::common::skipped("/usr/bin/chromium is not installed (apt-get install chromium)");
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let out = sample_report(dir.path());
    let tour = dir.path().join("tour");
    let tour_text = tour.to_str().expect("utf-8");
    let sample = crate::common::sample_data();
    let output = run(&["report", "--data", sample.to_str().expect("utf-8"), "--out", tour_text, "--now", NOW]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let pages = [
        out.join("MA100001").join("report.html"),
        out.join("MA300003").join("report.html"),
        out.join("index.html"),
        tour.join("MA001SHGA32ZDQYG9N8T").join("report.html"),
        tour.join("index.html"),
    ];
    for width in [1366u32, 390] {
        for page in &pages {
            // Headless windows are at least 500 px wide, so the page is laid
            // out in a frame of the width under test.
            let probed = read(page).replace("</main></body>", &format!("</main>{PROBE}</body>"));
            let frame = format!(
                "<!DOCTYPE html><html><body style=\"margin:0\"><iframe style=\"width:{width}px;height:900px;border:0\" \
                 srcdoc=\"{}\"></iframe></body></html>",
                probed.replace('&', "&amp;").replace('"', "&quot;")
            );
            let wrapper = dir.path().join("frame.html");
            std::fs::write(&wrapper, frame).expect("frame");
            let layout = chromium_run(chromium, dir.path(), 1400, 1000, &["--dump-dom".into()], &wrapper);
            let text = String::from_utf8_lossy(&layout.stdout);
            let boxes = text.split("<pre id=\"layout\">").nth(1).and_then(|t| t.split("</pre>").next());
            let boxes = boxes.unwrap_or_else(|| panic!("no layout from {}: {text}", page.display()));
            let mut lines = boxes.split('|');
            let viewport: Vec<f64> = numbers(lines.next().expect("viewport"));
            let name = format!("{} at {width}px", page.display());
            assert_eq!(viewport[0], f64::from(width), "{name}: viewport");
            assert!(viewport[1] <= viewport[0], "{name}: the page scrolls sideways ({} px wide)", viewport[1]);
            let (mut cells, mut columns, mut exact_on_focus) = (0, 0, 0);
            for line in lines {
                if let Some(focused) = line.strip_prefix("x ") {
                    // A rounded value, focused (as a tap does), shows its exact value.
                    let (title, content) = focused.split_once(' ').expect("title and content");
                    assert_eq!(content, format!("\"{title}\""), "{name}: the focused value shows {content}");
                    exact_on_focus += 1;
                } else if let Some(scroll) = line.strip_prefix("s ") {
                    let [client, scrolled] = numbers(&format!("s {scroll}"))[..] else { panic!("{line}") };
                    if width == 1366 {
                        assert!(
                            scrolled <= client,
                            "{name}: a table needs sideways scrolling ({scrolled} > {client} px)"
                        );
                    }
                } else if let Some(column) = line.strip_prefix("c ") {
                    let (place, heading) = column.split_once(" : ").expect("place and heading");
                    let [left, right, box_left, pinned_left] = numbers(&format!("c {place}"))[..] else {
                        panic!("{line}")
                    };
                    assert!(
                        left >= box_left - 0.5 && right <= pinned_left + 0.5,
                        "{name}: column '{heading}' at {left}..{right}, its table shows {box_left}..{pinned_left}"
                    );
                    columns += 1;
                } else {
                    let [left, right, box_left, box_right] = numbers(line)[..] else { panic!("{line}") };
                    assert!(left >= 0.0 && right <= viewport[0] + 0.5, "{name}: money cell at {left}..{right}");
                    assert!(
                        left >= box_left - 0.5 && right <= box_right + 0.5,
                        "{name}: cell {left}..{right} outside its table {box_left}..{box_right}"
                    );
                    cells += 1;
                }
            }
            assert!(cells >= 4, "{name}: only {cells} money cells laid out");
            assert!(columns >= 4, "{name}: only {columns} columns laid out");
            assert_eq!(exact_on_focus, 1, "{name}: no rounded value to focus");
        }
        // The screenshot: a real picture of the right size, not a blank page.
        let png = dir.path().join(format!("report-{width}.png"));
        let arg = format!("--screenshot={}", png.display());
        chromium_run(chromium, dir.path(), width, 2400, &[arg], &pages[0]);
        let bytes = std::fs::read(&png).expect("screenshot written");
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
        let size = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        assert_eq!((size(16), size(20)), (width, 2400), "IHDR dimensions");
        assert!(bytes.len() > 40_000, "{width}: only {} bytes", bytes.len());
        if let Ok(keep) = std::env::var("TELEMETER_SCREENSHOT") {
            std::fs::copy(&png, format!("{keep}.{width}.png")).expect("keep screenshot");
        }
    }
}

/// Writes (into the parent frame's DOM), `|`-separated: the viewport's
/// width and the document's scroll width; each laid-out money cell's left
/// and right and its scroll box's; a focused rounded value's title and
/// shown text; then per scroll box its visible and whole width (`s`), and
/// per visible heading (`c`), the box scrolled so the column ends at the
/// pinned column, the heading's left and right, the box's left and the
/// pinned column's left.
const PROBE: &str = "<script>(function(){var d=document.documentElement,o=['v '+d.clientWidth+' '+d.scrollWidth];\
document.querySelectorAll('.m').forEach(function(e){var r=e.getBoundingClientRect();if(r.width===0)return;\
var s=e.closest('.scroll'),c=s?s.getBoundingClientRect():r;o.push('m '+r.left+' '+r.right+' '+c.left+' '+c.right);});\
var x=document.querySelector('.x');if(x){x.focus();o.push('x '+x.title+' '+getComputedStyle(x,'::after').content);}\
document.querySelectorAll('.scroll').forEach(function(s){var m=s.querySelector('th.m');\
o.push('s '+s.clientWidth+' '+s.scrollWidth);s.querySelectorAll('thead th:not(.m)').forEach(function(th){\
if(th.getBoundingClientRect().width===0)return;s.scrollLeft=0;var pin=m?m.offsetWidth:0;\
s.scrollLeft=Math.max(0,Math.ceil(th.offsetLeft+th.offsetWidth-(s.clientWidth-pin))+1);\
var r=th.getBoundingClientRect(),c=s.getBoundingClientRect(),p=m?m.getBoundingClientRect().left:c.right;\
o.push('c '+r.left+' '+r.right+' '+c.left+' '+p+' : '+th.textContent);});s.scrollLeft=0;});\
var p=parent.document.createElement('pre');p.id='layout';p.textContent=o.join('|');parent.document.body.appendChild(p);})();</script>";

fn numbers(line: &str) -> Vec<f64> {
    line.split(' ').skip(1).map(|n| n.parse().unwrap_or_else(|_| panic!("{line}"))).collect()
}

fn chromium_run(
    chromium: &Path,
    dir: &Path,
    width: u32,
    height: u32,
    extra: &[String],
    page: &Path,
) -> std::process::Output {
    let profile = dir.join("profile");
    let output = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--window-size={width},{height}"))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(output.status.success(), "chromium failed: {}", String::from_utf8_lossy(&output.stderr));
    output
}

/// Without HTML, index.html links every account to a file the run wrote:
/// its first JSON page, its pages.jsonl, or its usage.csv.
#[test]
fn index_links_point_at_files_that_exist() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write_sample(&data, 1);
    for (formats, pages) in [("json", "files"), ("json", "jsonl"), ("csv", "files"), ("json,csv,html", "jsonl")] {
        let out = dir.path().join(format!("out-{formats}-{pages}"));
        let (data, out_text) = (data.to_str().expect("utf-8"), out.to_str().expect("utf-8"));
        let args = ["report", "--data", data, "--out", out_text, "--query", SAMPLE_QUERY, "--now", NOW];
        let output = run(&[&args[..], &["--formats", formats, "--pages", pages, "--quiet"]].concat());
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let index = read(&out.join("index.html"));
        let links: Vec<&str> = index.split("<a href=\"").skip(1).filter_map(|l| l.split('"').next()).collect();
        assert_eq!(links.len(), ACCOUNTS.len(), "{formats} {pages}");
        for link in links {
            assert!(out.join(link).is_file(), "{formats} {pages}: {link} does not exist");
        }
    }
}
