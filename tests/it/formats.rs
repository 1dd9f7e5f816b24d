//! Output formats: `summary --format table|csv`, `summary -o FILE` and
//! `report --pages jsonl`, through the binary over `sample_data/`.
//!
//! Golden files (`tests/golden/table_*.txt`, `tests/golden/csv_*.csv`,
//! `UPDATE_GOLDEN=1` rewrites them) hold the exact bytes; besides, every
//! table and CSV is checked against the JSON of the same request: each CSV
//! cell is the JSON value's text, each table row shows the row's exact
//! amount, and the totals lines are the JSON rows summed per unit kind
//! (here, with `money::Amount`). `pages.jsonl` is `summary --all-pages`
//! to the byte, and the rest of the report does not change with `--pages`.

use std::collections::BTreeMap;

use serde_json::value::RawValue;
use serde_json::Value;
use telemeter::money::Amount;

use crate::common::{golden, sample_data, summary, temp_dir, NOW};
use crate::report::{cell, run, run_ok, tree, RawItem, USAGE_FIELDS as API_FIELDS};

/// One request: golden name, account, query, extra flags.
const CASES: &[(&str, &str, &str, &[&str])] = &[
    // Defaults from --now: every product, subaccounts, codes, other charges.
    ("defaults", "MA001SHGA32ZDQYG9N8T", "", &[]),
    // Page 1 of 5: the totals lines are this page's; more rows follow.
    ("paged_1", "MA001SHGA32ZDQYG9N8T", PAGED, &[]),
    // Every page in one table / one CSV with one header.
    ("paged_all_pages", "MA001SHGA32ZDQYG9N8T", PAGED, &["--all-pages"]),
    // A EUR account.
    ("currency_eur", "MA002PCHQ444XLFXQN5B", "from_date=2026-11-01&to_date=2026-11-21", &[]),
    // A subaccount: total_subaccount_spend, no other charges.
    (
        "subaccount_alpha",
        "MA001SHGA32ZDQYG9N8T",
        "subaccount_auth=SAALPHAKGPP2438DZWD3&granularity=month&from_date=2026-10-01&to_date=2026-12-01",
        &[],
    ),
    // No rows at all.
    ("no_data", "MA004DEFGZHA3AU3ZWLC", "", &[]),
];

/// The paged request of `tests/it/summary.rs`: 13 usage rows in pages of 3.
const PAGED: &str = "product=voice,transcription,other&from_date=2026-11-05&to_date=2026-11-21&page_size=3";

fn format(auth_id: &str, query: &str, extra: &[&str], format: &str) -> String {
    let mut args = extra.to_vec();
    args.extend(["--format", format]);
    summary(&sample_data(), auth_id, query, &args).ok().to_owned()
}

/// Every page's top-level fields, raw, from JSON lines.
fn raw_pages(jsonl: &str) -> Vec<BTreeMap<String, Box<RawValue>>> {
    jsonl.lines().map(|line| serde_json::from_str(line).expect("a JSON page")).collect()
}

fn raw_array(page: &BTreeMap<String, Box<RawValue>>, key: &str) -> Vec<RawItem> {
    page.get(key).map(|raw| serde_json::from_str(raw.get()).expect("an array")).unwrap_or_default()
}

fn amount(text: &str) -> Amount {
    Amount::parse(text.as_bytes()).unwrap_or_else(|e| panic!("not a decimal {text}: {e:?}"))
}

#[test]
fn tables_and_csvs_are_golden_and_say_what_the_json_says() {
    for (name, auth_id, query, extra) in CASES {
        let json = format(auth_id, query, extra, "json");
        let pages = raw_pages(&json);
        let usage: Vec<RawItem> = pages.iter().flat_map(|p| raw_array(p, "usage")).collect();

        // CSV: the api.md header once, then one line per usage row, each
        // cell the JSON value's text (empty where the JSON omits it).
        let csv = format(auth_id, query, extra, "csv");
        golden(&format!("csv_{name}.csv"), &csv);
        let mut reader = csv::Reader::from_reader(csv.as_bytes());
        let header: Vec<String> = reader.headers().expect("header").iter().map(str::to_owned).collect();
        assert_eq!(header[..2], ["auth_id", "currency"], "{name}");
        assert_eq!(header[2..], API_FIELDS, "{name}");
        let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a CSV row")).collect();
        assert_eq!(rows.len(), usage.len(), "{name}: one line per usage row, one header");
        let currency = pages.first().map(|p| cell(p.get("meta").map(|m| &**m))).unwrap_or_default();
        for (row, item) in rows.iter().zip(&usage) {
            assert!(item.keys().all(|k| API_FIELDS.contains(&k.as_str())), "{name}: {item:?}");
            let expected: Vec<String> = API_FIELDS.iter().map(|c| cell(item.get(*c).map(|v| &**v))).collect();
            assert_eq!(row.get(0), Some(*auth_id), "{name}");
            assert!(currency.contains(&format!("\"currency\":\"{}\"", &row[1])), "{name}: {currency}");
            assert_eq!(row.iter().skip(2).collect::<Vec<_>>(), expected, "{name}");
        }

        // Table: one line per usage row ending in its exact amount, then the
        // totals per unit kind summed here from the JSON.
        let table = format(auth_id, query, extra, "table");
        golden(&format!("table_{name}.txt"), &table);
        let lines: Vec<&str> = table.lines().collect();
        let data: Vec<&str> = lines.iter().copied().filter(|l| l.starts_with("20")).collect();
        let charges: Vec<RawItem> = pages.first().map(|p| raw_array(p, "other_charges")).unwrap_or_default();
        assert_eq!(data.len(), usage.len() + charges.len(), "{name}:\n{table}");
        let mut sums: BTreeMap<&str, (u128, Amount, Amount)> = BTreeMap::new();
        let mut money = Amount::ZERO;
        for (line, item) in data.iter().zip(&usage) {
            let total = item["total_amount"].get();
            assert!(line.ends_with(&format!(" {total}")), "{name}: {line} should end with {total}");
            let kind = match cell(item.get("product").map(|v| &**v)).as_str() {
                "message" => "message",
                "voice" | "zentrunk" => "voice+zentrunk",
                _ => "transcription",
            };
            let sum = sums.entry(kind).or_insert((0, Amount::ZERO, Amount::ZERO));
            sum.0 += cell(item.get("total_units").map(|v| &**v)).parse::<u128>().expect("units");
            if let Some(seconds) = item.get("duration_seconds") {
                sum.1 = sum.1 + amount(seconds.get());
            }
            sum.2 = sum.2 + amount(total);
            money = money + amount(total);
        }
        for (kind, (units, seconds, total)) in &sums {
            let line = lines
                .iter()
                .find(|l| l.split_whitespace().take(2).eq(["total", kind]))
                .unwrap_or_else(|| panic!("{name}: no totals line for {kind}:\n{table}"));
            let words: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(words[2], units.to_string(), "{name}: {line}");
            assert_eq!(words.last(), Some(&total.to_string().as_str()), "{name}: {line}");
            if *kind != "message" {
                assert_eq!(words[words.len() - 2], seconds.to_string(), "{name}: {line}");
            }
        }
        assert_eq!(
            sums.is_empty(),
            table.contains("no usage rows"),
            "{name}: an empty result says so instead of a table:\n{table}"
        );
        if !usage.is_empty() {
            let line = lines.iter().find(|l| l.contains(" usage ")).expect("the usage totals line");
            assert!(line.ends_with(&format!(" {money}")), "{name}: {line}");
        }
        // The whole window's total is the API's total_spend, as written there.
        let meta: BTreeMap<String, Box<RawValue>> =
            serde_json::from_str(pages[0]["meta"].get()).expect("meta of page 1");
        let currency = cell(meta.get("currency").map(|v| &**v));
        if let Some(total) = meta.get("total_spend") {
            assert!(table.contains(&format!("whole window): {} {currency}\n", total.get())), "{name}:\n{table}");
        }
        assert!(lines[0].ends_with(&format!("amounts in {currency}")), "{name}: {}", lines[0]);
        assert_eq!(table.contains("more rows follow"), meta.contains_key("next_page_token") && extra.is_empty());
    }
}

/// `summary --format csv --all-pages` is the report's `usage.csv` of the
/// same account and query, byte for byte: one writer for both.
#[test]
fn csv_of_every_page_is_the_reports_usage_csv() {
    let dir = temp_dir();
    let out = dir.path().join("out");
    let data = sample_data();
    let query = "granularity=day&from_date=2026-10-25&to_date=2026-11-21&page_size=4";
    let data_arg = data.to_str().expect("UTF-8");
    let out_arg = out.to_str().expect("UTF-8");
    run_ok(&["report", "--data", data_arg, "-o", out_arg, "--query", query, "--now", NOW, "--quiet"]);
    for auth_id in ["MA001SHGA32ZDQYG9N8T", "MA002PCHQ444XLFXQN5B", "MA003GM22SVQQT8ZPDNQ", "MA004DEFGZHA3AU3ZWLC"] {
        let csv = format(auth_id, query, &["--all-pages"], "csv");
        let usage = std::fs::read_to_string(out.join(auth_id).join("usage.csv")).expect("usage.csv");
        assert_eq!(csv, usage, "{auth_id}");
    }
}

/// `report --pages jsonl`: each account's `pages.jsonl` is `summary
/// --all-pages` to the byte; no page files; every other file as with the
/// default `--pages files`; the manifest only gains keys (`request.pages`,
/// each account's `pages_file`).
#[test]
fn jsonl_pages_are_summary_all_pages_and_nothing_else_changes() {
    let dir = temp_dir();
    let data = sample_data();
    let data_arg = data.to_str().expect("UTF-8");
    let query = "granularity=day&from_date=2026-10-25&to_date=2026-11-21&page_size=4";
    let report = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let out_arg = out.to_str().expect("UTF-8").to_owned();
        let mut args = vec!["report", "--data", data_arg, "--out", &out_arg, "--query", query, "--now", NOW, "--quiet"];
        args.extend_from_slice(extra);
        run_ok(&args);
        out
    };
    let files = report("files", &[]);
    let jsonl = report("jsonl", &["--pages", "jsonl"]);
    let (files_tree, jsonl_tree) = (tree(&files), tree(&jsonl));

    let mut manifest: Value = serde_json::from_slice(&jsonl_tree["manifest.json"]).expect("manifest");
    assert_eq!(manifest["request"]["pages"], "jsonl");
    let accounts = manifest["accounts"].as_array_mut().expect("accounts");
    assert_eq!(accounts.len(), 4);
    let mut several_pages = false;
    for account in accounts.iter_mut() {
        let auth_id = account["auth_id"].as_str().expect("auth_id").to_owned();
        let file = account["pages_file"].as_str().expect("pages_file").to_owned();
        assert_eq!(file, format!("{}/pages.jsonl", account["dir"].as_str().expect("dir")));
        let all = summary(&data, &auth_id, query, &["--all-pages"]).ok().to_owned();
        let written = String::from_utf8(jsonl_tree[&file].clone()).expect("UTF-8");
        assert_eq!(written, all, "{file}");
        assert_eq!(written.lines().count() as u64, account["pages"].as_u64().expect("pages"), "{file}");
        several_pages |= account["pages"].as_u64() > Some(1);
        // The same pages as the page files of the default layout.
        let dir = account["dir"].as_str().expect("dir");
        let joined: Vec<u8> = files_tree
            .iter()
            .filter(|(name, _)| name.starts_with(&format!("{dir}/page-")))
            .flat_map(|(_, bytes)| bytes.clone())
            .collect();
        assert_eq!(joined, written.as_bytes(), "{file}");
        account.as_object_mut().expect("object").remove("pages_file");
    }
    assert!(several_pages, "the request should need several pages for some account");
    manifest["request"].as_object_mut().expect("request").remove("pages");
    let default_manifest: Value = serde_json::from_slice(&files_tree["manifest.json"]).expect("manifest");
    assert_eq!(manifest, default_manifest, "the manifest only gains keys");

    let rest = |tree: &BTreeMap<String, Vec<u8>>| -> BTreeMap<String, Vec<u8>> {
        tree.iter()
            .filter(|(name, _)| {
                let file = name.rsplit('/').next().unwrap_or(name);
                !file.starts_with("page-") && file != "pages.jsonl" && file != "manifest.json"
            })
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    assert_eq!(rest(&jsonl_tree), rest(&files_tree), "CSV and HTML do not depend on --pages");
    assert!(!jsonl_tree.keys().any(|name| name.contains("/page-")), "no page files with --pages jsonl");

    // jsonl lays out the JSON pages: without json in --formats it is refused.
    let out = dir.path().join("refused");
    let refused = run(&[
        "report",
        "--data",
        data_arg,
        "--out",
        out.to_str().expect("UTF-8"),
        "--formats",
        "csv",
        "--pages",
        "jsonl",
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--pages jsonl"));
    assert!(!out.exists());
}

/// `-o FILE` holds exactly what stdout would have, in every format; a bad
/// request still writes its body on stdout (exit 2) and leaves FILE as it
/// was; no temporary file is left beside it.
#[test]
fn output_file_is_stdout_written_whole_or_not_at_all() {
    let dir = temp_dir();
    let file = dir.path().join("out.txt");
    let file_arg = file.to_str().expect("UTF-8");
    for fmt in ["json", "table", "csv"] {
        for extra in [&[][..], &["--all-pages"]] {
            let stdout = format("MA001SHGA32ZDQYG9N8T", PAGED, extra, fmt);
            let mut args = extra.to_vec();
            args.extend(["--format", fmt, "-o", file_arg]);
            let run = summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", PAGED, &args);
            assert_eq!(run.ok(), "", "{fmt}: nothing on stdout with -o");
            assert_eq!(std::fs::read_to_string(&file).expect("the output file"), stdout, "{fmt} {extra:?}");
        }
    }
    let before = std::fs::read(&file).expect("the output file");
    for fmt in ["json", "table", "csv"] {
        let bad =
            summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", "granularity=week", &["--format", fmt, "-o", file_arg]);
        let plain = summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", "granularity=week", &[]);
        assert_eq!(bad.code, 2, "{fmt}");
        assert_eq!(bad.stdout, plain.stdout, "{fmt}: the API's error body, whatever the format");
        assert!(bad.stdout.contains("\"error\""), "{}", bad.stdout);
        assert_eq!(std::fs::read(&file).expect("the output file"), before, "{fmt}: the file is left as it was");
    }
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into())
        .collect();
    assert_eq!(names, ["out.txt"], "no temporary file left");

    // A folder is not replaced by a file; the message names it.
    let folder = summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", "", &["-o", dir.path().to_str().expect("UTF-8")]);
    assert_eq!(folder.code, 1);
    assert!(folder.stderr.contains("is a folder"), "{}", folder.stderr);
    // --pretty indents JSON only.
    let pretty = summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", "", &["--format", "table", "--pretty"]);
    assert_eq!((pretty.code, pretty.stdout.as_str()), (2, ""), "a usage error, as clap's");
    assert!(pretty.stderr.contains("--pretty"), "{}", pretty.stderr);
    // --all-pages starts at the first page: a page token, given either way,
    // is refused rather than dropped; an empty one is no token.
    for (query, flags) in [("", &["--all-pages", "--page-token", "x"][..]), ("page_token=x", &["--all-pages"][..])] {
        let both = summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", query, flags);
        assert_eq!((both.code, both.stdout.as_str()), (2, ""), "{query} {flags:?}");
        assert!(both.stderr.contains("--all-pages writes every page"), "{}", both.stderr);
    }
    let empty = summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", "page_token=", &["--all-pages"]);
    assert_eq!(empty.code, 0, "{}", empty.stderr);
}

/// `--format csv` holds the usage rows only: other charges returned with
/// the page are named on stderr, not dropped without a word.
#[test]
fn csv_says_other_charges_are_left_out() {
    let with = summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", "", &["--format", "csv"]);
    assert!(with.stderr.contains("other charges") && with.stderr.contains("not in the CSV"), "{}", with.stderr);
    let without = summary(&sample_data(), "MA001SHGA32ZDQYG9N8T", "product=voice", &["--format", "csv"]);
    assert!(!without.stderr.contains("other charges"), "{}", without.stderr);
}

/// A table on a terminal narrower than it is fitted (`COLUMNS` stands for
/// the terminal), says so, and keeps every number; in a pipe it is whole.
/// A charge's description with a line break (a quoted CSV field that
/// spans lines): the JSON keeps it, the table shows it escaped on the
/// charge's one line.
#[test]
fn a_description_with_a_line_break_is_one_table_row() {
    let dir = crate::common::temp_dir();
    crate::common::write(
        dir.path(),
        "charges/a.csv",
        "record_id,auth_id,timestamp,description,units,amount\r\nx1,A1,2026-11-20T10:00:00Z,\"Number Charges\r\nNovember\",1,1.5\r\n",
    );
    let query = "granularity=month&from_date=2026-11-01&to_date=2026-12-01";
    let json = summary(dir.path(), "A1", query, &[]);
    assert_eq!(json.code, 0, "{}", json.stderr);
    assert!(json.stdout.contains(r#""description":"Number Charges\r\nNovember""#), "{}", json.stdout);
    let table = summary(dir.path(), "A1", query, &["--format", "table"]);
    let line = table.stdout.lines().find(|l| l.contains("Number Charges")).expect("the charge's row");
    assert!(line.contains(r"Number Charges\r\nNovember") && line.trim_end().ends_with("1.5"), "{}", table.stdout);
}

#[test]
fn a_table_is_fitted_to_the_terminal() {
    let data = crate::common::sample_data();
    let args = [
        "summary",
        "--data",
        data.to_str().unwrap(),
        "--auth-id",
        "MA001SHGA32ZDQYG9N8T",
        "--format",
        "table",
        "--now",
    ];
    let args: Vec<&str> = args.into_iter().chain([crate::common::NOW]).collect();
    let whole = crate::common::telemeter(&args);
    let mut narrow = crate::common::command();
    narrow.env("TELEMETER_TOKEN_KEY", crate::common::TOKEN_KEY).env("COLUMNS", "100");
    let narrow = crate::common::run_command(&args, narrow);
    let (whole, narrow) = (whole.ok(), narrow.ok());
    assert!(whole.lines().any(|l| l.chars().count() > 100), "the sample's table is wide:\n{whole}");
    assert!(!whole.contains("fitted to"), "{whole}");
    // The sample's columns are wider than 100 even with dates and no
    // REASON: the note says how wide, not "fitted".
    let widest = narrow.lines().filter(|l| l.starts_with("2026-")).map(|l| l.chars().count()).max().unwrap_or(0);
    let said = format!("shortened for 100 columns, still {widest} wide: FROM shown as dates");
    assert!(widest > 100 && narrow.contains(&said), "{narrow}");
    let amounts = |text: &str| -> Vec<String> {
        let lines = text.lines().filter(|l| l.starts_with("2026-") || l.starts_with("total"));
        lines.map(|l| l.split_whitespace().last().unwrap_or_default().to_owned()).collect()
    };
    assert_eq!(amounts(narrow), amounts(whole));
}
