//! `telemeter report` through the binary: pages byte-identical to `summary`,
//! CSV and HTML carrying the JSON's exact numbers, the manifest's hashes,
//! counts and reconciliation, atomic and repeatable output, bad rows set
//! aside, progress output (report.html as a person reads it: `html.rs`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The binary under test.
pub fn telemeter() -> Command {
    // One page-token key for --data and --store: the same bytes from both.
    let mut command = crate::common::command();
    command.env("TELEMETER_TOKEN_KEY", crate::common::TOKEN_KEY);
    command
}

/// Runs the binary; the output.
pub fn run(args: &[&str]) -> Output {
    telemeter().args(args).output().expect("run telemeter")
}

/// Runs the binary and insists on exit 0.
pub fn run_ok(args: &[&str]) -> Output {
    let output = run(args);
    assert!(
        output.status.success(),
        "telemeter {args:?} failed ({:?}):\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Writes `DATA/<path>` with `text`, creating folders.
pub fn put(data: &Path, path: &str, text: &str) {
    let path = data.join(path);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// A small deterministic generator (64-bit LCG), so the data set needs no
/// fixtures and the expected totals are computed while writing it.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Writes `nanos` as a contract decimal (up to nine fractional digits).
fn decimal(nanos: u64) -> String {
    let whole = nanos / 1_000_000_000;
    let frac = nanos % 1_000_000_000;
    if frac == 0 {
        return whole.to_string();
    }
    let text = format!("{whole}.{frac:09}");
    text.trim_end_matches('0').to_owned()
}

/// Writes `nanos` the way the JSON writes amounts (`12.5`, `3.0`).
pub fn json_decimal(nanos: i128) -> String {
    let whole = nanos / 1_000_000_000;
    let frac = nanos % 1_000_000_000;
    if frac == 0 {
        return format!("{whole}.0");
    }
    format!("{whole}.{frac:09}").trim_end_matches('0').to_owned()
}

/// Accounts of the sample: id, currency, time zone.
pub const ACCOUNTS: [(&str, &str, &str); 4] = [
    ("MA100001", "USD", "America/New_York"),
    ("MA200002", "EUR", "Europe/London"),
    ("MA300003", "INR", "Asia/Kolkata"),
    ("MA400004", "USD", ""),
];

/// The window that holds every sample record in every account's zone.
pub const SAMPLE_QUERY: &str = "granularity=day&from_date=2026-10-19&to_date=2026-11-11&page_size=40";
/// "Now" of every sample run.
pub const NOW: &str = "2026-11-21T06:00:00Z";

/// Writes a sample data set (four accounts in four zones, all products,
/// subaccounts, error codes, hangup causes, charges, a re-delivered file)
/// and returns the expected total spend of each account in nanos.
pub fn write_sample(data: &Path, scale: u64) -> BTreeMap<String, i128> {
    let mut rng = Lcg(20261121);
    let mut expected: BTreeMap<String, i128> = BTreeMap::new();
    let mut accounts = String::from("auth_id,currency,timezone\n");
    for (id, currency, tz) in ACCOUNTS {
        let _ = writeln!(accounts, "{id},{currency},{tz}");
        expected.insert(id.to_owned(), 0);
    }
    put(data, "accounts.csv", &accounts);
    // Records between 2026-10-20T12:00Z and 2026-11-09T12:00Z.
    let start = 1_792_497_600u64; // 2026-10-20T12:00:00Z
    let span = 20 * 86_400;
    let timestamp = |rng: &mut Lcg| {
        let secs = start + rng.below(span);
        let (days, rest) = (secs / 86_400, secs % 86_400);
        let date = civil(days as i64);
        format!("{date}T{:02}:{:02}:{:02}Z", rest / 3600, rest % 3600 / 60, rest % 60)
    };
    let subaccounts = ["", "", "SA-north", "SA-south", "SA-west"];
    let countries = ["US", "US", "US", "CA", "GB", "IN", "DE", "BR"];

    let mut calls = String::from(
        "record_id,auth_id,subaccount_auth,timestamp,product,type,direction,country,billed_seconds,amount,surcharge,hangup_cause\n",
    );
    for i in 0..300 * scale {
        let (id, ..) = ACCOUNTS[rng.below(4) as usize];
        let zentrunk = rng.below(4) == 0;
        let (product, type_) =
            if zentrunk { ("zentrunk", "sip") } else { ("voice", rng.pick(&["pstn", "pstn", "app"])) };
        let country = if zentrunk && rng.below(3) == 0 { "" } else { rng.pick(&countries) };
        let seconds = rng.below(1800) * 1_000_000_000 + rng.below(10) * 100_000_000;
        let amount = rng.below(40_000) * 100_000;
        let surcharge = amount / 10 / 100_000 * 100_000;
        let cause = rng.pick(&["4000", "4000", "4000", "4000", "3010", "3000", "3020", "2000", "1010", "9999"]);
        let _ = writeln!(
            calls,
            "C{i:06},{id},{},{},{product},{type_},{},{country},{},{},{},{cause}",
            rng.pick(&subaccounts),
            timestamp(&mut rng),
            rng.pick(&["inbound", "outbound", "outbound"]),
            decimal(seconds),
            decimal(amount),
            decimal(surcharge)
        );
        *expected.get_mut(id).expect("account") += amount as i128;
    }
    put(data, "calls/2026/calls.csv", &calls);
    // Re-delivered: the first 20 lines again, identical: duplicates.
    let again: Vec<&str> = calls.lines().take(21).collect();
    put(data, "calls/2026/calls-redelivered.csv", &(again.join("\n") + "\n"));

    let mut messages = String::from(
        "record_id,auth_id,subaccount_auth,timestamp,type,direction,country,segments,amount,surcharge,error_code\n",
    );
    for i in 0..400 * scale {
        let (id, ..) = ACCOUNTS[rng.below(4) as usize];
        let segments = 1 + rng.below(3);
        let amount = segments * (rng.below(90) + 10) * 100_000;
        let code = rng.pick(&["", "", "", "", "", "", "30", "30", "200", "450", "900", "77"]);
        let _ = writeln!(
            messages,
            "M{i:06},{id},{},{},{},{},{},{segments},{},{},{code}",
            rng.pick(&subaccounts),
            timestamp(&mut rng),
            rng.pick(&["sms", "sms", "sms", "mms"]),
            rng.pick(&["inbound", "outbound", "outbound"]),
            rng.pick(&countries),
            decimal(amount),
            decimal(amount / 20 / 100_000 * 100_000)
        );
        *expected.get_mut(id).expect("account") += amount as i128;
    }
    put(data, "messages/messages.csv", &messages);

    let mut transcriptions = String::from("record_id,auth_id,subaccount_auth,timestamp,type,duration_seconds,amount\n");
    for i in 0..60 * scale {
        let (id, ..) = ACCOUNTS[rng.below(4) as usize];
        let amount = rng.below(5000) * 1_000_000 + 1;
        let _ = writeln!(
            transcriptions,
            "T{i:06},{id},{},{},standard,{},{}",
            rng.pick(&subaccounts),
            timestamp(&mut rng),
            decimal(rng.below(600_000) * 1_000_000),
            decimal(amount)
        );
        *expected.get_mut(id).expect("account") += amount as i128;
    }
    put(data, "transcriptions/transcriptions.csv", &transcriptions);

    let mut charges = String::from("record_id,auth_id,timestamp,description,units,amount\n");
    for i in 0..12 * scale {
        let (id, ..) = ACCOUNTS[rng.below(4) as usize];
        let amount = (rng.below(2000) + 1) * 10_000_000;
        let _ = writeln!(
            charges,
            "X{i:06},{id},{},{},{},{}",
            timestamp(&mut rng),
            rng.pick(&["Number Charges", "CNAM Lookup", "Other Charges"]),
            1 + rng.below(5),
            decimal(amount)
        );
        *expected.get_mut(id).expect("account") += amount as i128;
    }
    put(data, "charges/charges.csv", &charges);
    expected
}

/// `YYYY-MM-DD` of a day count since 1970-01-01.
fn civil(days: i64) -> String {
    let date = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).expect("epoch") + chrono::Days::new(days as u64);
    date.to_string()
}

/// Every file under `dir`, by relative path, with its bytes.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(root, &path, out);
            } else {
                let name = path.strip_prefix(root).expect("prefix").to_string_lossy().into_owned();
                out.insert(name, std::fs::read(&path).expect("read"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn report(data: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["report", "--data", data.to_str().expect("utf-8"), "--out", out.to_str().expect("utf-8")];
    args.extend_from_slice(extra);
    run(&args)
}

fn sample_report(dir: &Path) -> (PathBuf, PathBuf, BTreeMap<String, i128>) {
    let data = dir.join("data");
    let expected = write_sample(&data, 1);
    let out = dir.join("out");
    let output = report(&data, &out, &["--query", SAMPLE_QUERY, "--now", NOW]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    (data, out, expected)
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(path).expect("read")).expect("json")
}

fn page_files(dir: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("page-")))
        .collect();
    pages.sort();
    pages
}

#[test]
fn pages_are_byte_identical_to_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, out, _) = sample_report(dir.path());
    let data = data.to_str().expect("utf-8");
    for (id, ..) in ACCOUNTS {
        let pages = page_files(&out.join(id));
        assert!(pages.len() >= 2, "{id}: the sample should need several pages, got {}", pages.len());
        for (i, name) in pages.iter().enumerate() {
            assert_eq!(name.file_name().expect("name").to_string_lossy(), format!("page-{:04}.json", i + 1));
        }
        // Page by page, following the tokens as a client would.
        let mut query = SAMPLE_QUERY.to_owned();
        for page in &pages {
            let expected = std::fs::read(page).expect("page");
            let summary = run_ok(&["summary", "--data", data, "--auth-id", id, "--query", &query, "--now", NOW]);
            assert_eq!(
                String::from_utf8_lossy(&summary.stdout),
                String::from_utf8_lossy(&expected),
                "{id} {}",
                page.display()
            );
            let value: Value = serde_json::from_slice(&expected).expect("json");
            if let Some(token) = value["meta"]["next_page_token"].as_str() {
                query = format!("{SAMPLE_QUERY}&page_token={token}");
            }
        }
        // And all at once.
        let all =
            run_ok(&["summary", "--data", data, "--auth-id", id, "--query", SAMPLE_QUERY, "--now", NOW, "--all-pages"]);
        let joined: Vec<u8> = pages.iter().flat_map(|p| std::fs::read(p).expect("page")).collect();
        assert_eq!(all.stdout, joined, "{id}: --all-pages");
    }
}

/// One usage item with every value as its raw JSON text.
pub type RawItem = BTreeMap<String, Box<RawValue>>;

fn raw_items(page: &Path, array: &str) -> Vec<RawItem> {
    let text = std::fs::read_to_string(page).expect("page");
    let mut top: BTreeMap<String, Box<RawValue>> = serde_json::from_str(&text).expect("json");
    match top.remove(array) {
        Some(raw) => serde_json::from_str(raw.get()).expect("array"),
        None => Vec::new(),
    }
}

/// The CSV cell text of a raw JSON value: strings decoded, numbers as written.
pub fn cell(raw: Option<&RawValue>) -> String {
    match raw {
        None => String::new(),
        Some(raw) if raw.get().starts_with('"') => serde_json::from_str(raw.get()).expect("string"),
        Some(raw) => raw.get().to_owned(),
    }
}

/// The usage item fields of api.md section 2.3, in its order: the header
/// of every usage CSV.
pub const USAGE_FIELDS: [&str; 14] = [
    "from_date",
    "to_date",
    "product",
    "type",
    "subaccount_auth",
    "country",
    "direction",
    "total_units",
    "duration_seconds",
    "total_amount",
    "surcharge",
    "error_code",
    "hangup_cause",
    "error_reason",
];

#[test]
fn csv_files_carry_every_row_with_the_json_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, out, _) = sample_report(dir.path());
    let columns = USAGE_FIELDS;
    // Every line starts with the account and its currency, so that the
    // files of several accounts can be concatenated.
    let account_cells = |id: &str, currency: &str, row: &csv::StringRecord| {
        assert_eq!(row.get(0), Some(id));
        assert_eq!(row.get(1), Some(currency));
        row.iter().skip(2).map(str::to_owned).collect::<Vec<String>>()
    };
    for (id, currency, _) in ACCOUNTS {
        let account = out.join(id);
        let items: Vec<RawItem> = page_files(&account).iter().flat_map(|p| raw_items(p, "usage")).collect();
        let mut reader = csv::Reader::from_path(account.join("usage.csv")).expect("usage.csv");
        let header: Vec<String> = reader.headers().expect("header").iter().map(str::to_owned).collect();
        assert_eq!(header[..2], ["auth_id", "currency"]);
        assert_eq!(header[2..], columns);
        let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("row")).collect();
        assert_eq!(rows.len(), items.len(), "{id}: one CSV line per usage row");
        for (row, item) in rows.iter().zip(&items) {
            for key in item.keys() {
                assert!(columns.contains(&key.as_str()), "unexpected field {key}");
            }
            let expected: Vec<String> = columns.iter().map(|c| cell(item.get(*c).map(|v| &**v))).collect();
            assert_eq!(account_cells(id, currency, row), expected, "{id}");
        }
        let charges = raw_items(&account.join("page-0001.json"), "other_charges");
        let mut reader = csv::Reader::from_path(account.join("other_charges.csv")).expect("other_charges.csv");
        let header: Vec<String> = reader.headers().expect("header").iter().map(str::to_owned).collect();
        assert_eq!(
            header,
            ["auth_id", "currency", "from_date", "to_date", "description", "total_units", "total_amount"]
        );
        let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("row")).collect();
        assert_eq!(rows.len(), charges.len());
        assert!(!charges.is_empty(), "{id}: the sample has charges for every account");
        for (row, item) in rows.iter().zip(&charges) {
            let expected: Vec<String> = header[2..].iter().map(|c| cell(item.get(c).map(|v| &**v))).collect();
            assert_eq!(account_cells(id, currency, row), expected);
        }
    }
}

#[test]
fn manifest_hashes_inputs_counts_rows_and_reconciles() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, out, expected) = sample_report(dir.path());
    let manifest = json(&out.join("manifest.json"));
    assert_eq!(manifest["generator"], "telemeter report");
    assert_eq!(manifest["request"]["query"], SAMPLE_QUERY);
    assert_eq!(manifest["request"]["now"], NOW);
    assert_eq!(manifest["request"]["accounts"], "all");

    // Inputs: every file with its size and SHA-256, computed here.
    let inputs = manifest["inputs"].as_array().expect("inputs");
    let names: Vec<&str> = inputs.iter().map(|i| i["file"].as_str().expect("file")).collect();
    assert_eq!(
        names,
        [
            "accounts.csv",
            "calls/2026/calls-redelivered.csv",
            "calls/2026/calls.csv",
            "messages/messages.csv",
            "transcriptions/transcriptions.csv",
            "charges/charges.csv"
        ]
    );
    for input in inputs {
        let bytes = std::fs::read(data.join(input["file"].as_str().expect("file"))).expect("input");
        assert_eq!(input["size"], bytes.len() as u64);
        let hex: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(input["sha256"], hex);
    }

    // Counts: 300 + 20 re-delivered calls, 400 messages, 60 transcriptions, 12 charges.
    let counts = &manifest["counts"];
    assert_eq!(counts["calls"]["read"], 320);
    assert_eq!(counts["calls"]["duplicates"], 20);
    assert_eq!(counts["calls"]["used"], 300);
    assert_eq!(counts["all"]["read"], 320 + 400 + 60 + 12);
    assert_eq!(counts["all"]["used"], 300 + 400 + 60 + 12);
    assert_eq!(counts["all"]["set_aside"], 0);
    assert_eq!(counts["all"]["selected"], 300 + 400 + 60 + 12);

    // Per account: the totals computed while generating the data, equal to
    // page 1's total_spend, and the reconciliation of the run.
    let accounts = manifest["accounts"].as_array().expect("accounts");
    assert_eq!(accounts.len(), 4);
    // Sums per currency: amounts of two currencies are never added.
    let mut sums: std::collections::BTreeMap<&str, i128> = std::collections::BTreeMap::new();
    for account in accounts {
        let id = account["auth_id"].as_str().expect("id");
        let total = expected[id];
        let currency = ACCOUNTS.iter().find(|a| a.0 == id).expect("account").1;
        assert_eq!(account["currency"], currency);
        *sums.entry(currency).or_default() += total;
        let text = |v: &Value| v.to_string();
        assert_eq!(text(&account["total_spend"]), json_decimal(total), "{id}");
        let page1 = json(&out.join(id).join("page-0001.json"));
        assert_eq!(text(&page1["meta"]["total_spend"]), json_decimal(total), "{id}");
        assert_eq!(account["reconciled"], true);
        let tz = ACCOUNTS.iter().find(|a| a.0 == id).expect("account").2;
        assert_eq!(account["timezone"], if tz.is_empty() { "UTC" } else { tz });
    }
    let reconciliation = &manifest["reconciliation"];
    assert_eq!(reconciliation["ok"], true);
    let sums: Vec<String> =
        sums.iter().map(|(currency, sum)| format!("\"{currency}\":{}", json_decimal(*sum))).collect();
    let sums = format!("{{{}}}", sums.join(","));
    assert_eq!(reconciliation["sum_of_account_total_spend"].to_string(), sums);
    assert_eq!(reconciliation["sum_of_selected_records"].to_string(), sums);
    assert_eq!(reconciliation["selected_records"], 772);
}

#[test]
fn output_is_repeatable_and_replaced_atomically() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, out, _) = sample_report(dir.path());
    let first = tree(&out);
    assert!(first.contains_key("index.html") && first.contains_key("manifest.json"));
    for (id, ..) in ACCOUNTS {
        for file in ["usage.csv", "other_charges.csv", "report.html", "page-0001.json"] {
            assert!(first.contains_key(&format!("{id}/{file}")), "{id}/{file}");
        }
    }
    // The same run again, over the first: identical bytes, nothing left beside.
    let again = report(&data, &out, &["--query", SAMPLE_QUERY, "--now", NOW, "--quiet"]);
    assert!(again.status.success());
    assert!(again.stderr.is_empty(), "--quiet prints nothing: {}", String::from_utf8_lossy(&again.stderr));
    assert_eq!(tree(&out), first);
    let leftovers: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // A failing run (a bad row, --on-bad-row fail) leaves the old report as it was.
    put(&data, "messages/bad.csv", "record_id,auth_id,subaccount_auth,timestamp,type,direction,country,segments,amount,surcharge,error_code\nB1,MA100001,,2026-10-21T00:00:00Z,sms,outbound,US,1,1e3,0,\n");
    let failed = report(&data, &out, &["--query", SAMPLE_QUERY, "--now", NOW]);
    assert_eq!(failed.status.code(), Some(1));
    let message = String::from_utf8_lossy(&failed.stderr);
    assert!(message.contains("messages/bad.csv:2") && message.contains("amount"), "{message}");
    assert_eq!(tree(&out), first);

    // Never replaces a folder that is not a report.
    let other = dir.path().join("precious");
    put(&other, "notes.txt", "keep me");
    let refused = report(&data, &other, &["--query", SAMPLE_QUERY, "--now", NOW, "--on-bad-row", "set-aside"]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("refusing to replace"));
    assert_eq!(std::fs::read_to_string(other.join("notes.txt")).expect("notes"), "keep me");
    // Nor a store, whose manifest.json is not a report's.
    put(&other, "manifest.json", "{\"format\":7}");
    let refused = report(&data, &other, &["--query", SAMPLE_QUERY, "--now", NOW]);
    assert_eq!(refused.status.code(), Some(1));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("its manifest.json is not a report's"), "{said}");
}

/// What a killed run leaves beside OUT (`.out.tmp-PID`, `.out.old-PID`) is
/// removed by the next run when that process is gone; a live one's is not.
#[test]
fn leftovers_of_killed_runs_are_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, out, _) = sample_report(dir.path());
    // Above any pid_max (at most 2^22), so never a live process.
    let dead = [".out.tmp-999999999", ".out.old-999999998"];
    let live = format!(".out.tmp-{}", std::process::id());
    for name in dead.iter().copied().chain([live.as_str(), ".other.tmp-999999999"]) {
        put(&dir.path().join(name), "MA100001/page-0001.json", "{}");
    }
    let again = report(&data, &out, &["--query", SAMPLE_QUERY, "--now", NOW, "--quiet"]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let mut left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    left.sort();
    assert_eq!(left, [".other.tmp-999999999".to_owned(), live]);

    // Killed between its renames, a run leaves OUT missing and the report
    // before only in `.old`: kept by the next run's start, removed once
    // that run has put OUT back.
    std::fs::rename(&out, dir.path().join(".out.old-999999997")).expect("as a killed run leaves it");
    let again = report(&data, &out, &["--query", SAMPLE_QUERY, "--now", NOW, "--quiet"]);
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    assert!(out.join("manifest.json").exists());
    assert!(!dir.path().join(".out.old-999999997").exists(), "the old copy is removed");
}

/// With every account (the default), an account that only records know,
/// all of them outside the window, gets its empty report, from raw files
/// and from a store alike, as an account of `accounts.csv` without
/// records does.
#[test]
fn every_account_includes_one_whose_records_are_outside_the_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    put(&data, "accounts.csv", "auth_id,currency\nACC1,USD\nIDLE,USD\n");
    put(
        &data,
        "charges/a.csv",
        "record_id,auth_id,timestamp,description,units,amount\n\
         x1,ORPHAN,2026-11-11T00:00:00Z,d,1,1\nx2,ACC1,2026-11-15T00:00:00Z,d,1,2\n",
    );
    let store = dir.path().join("store");
    run_ok(&["ingest", "--quiet", "--data", data.to_str().expect("utf-8"), "--store", store.to_str().expect("utf-8")]);
    let query = "from_date=2026-11-14&to_date=2026-11-21";
    for (source, from) in [("--data", &data), ("--store", &store)] {
        let out = dir.path().join(format!("out{source}"));
        let args = ["report", "--quiet", source, from.to_str().expect("utf-8"), "--out", out.to_str().expect("utf-8")];
        run_ok(&[&args[..], &["--query", query, "--now", NOW]].concat());
        let manifest = json(&out.join("manifest.json"));
        let ids: Vec<&str> = manifest["accounts"]
            .as_array()
            .expect("accounts")
            .iter()
            .map(|a| a["auth_id"].as_str().expect("id"))
            .collect();
        assert_eq!(ids, ["ACC1", "IDLE", "ORPHAN"], "{source}");
        let page = json(&out.join("ORPHAN/page-0001.json"));
        assert_eq!(page["usage"], serde_json::json!([]), "{source}: {page}");
    }
}

/// An earlier report that cannot be removed once the new one is in place
/// (here a file in it made immutable, which stops root too) does not fail
/// the run: the new report is at OUT, a warning names the old one's
/// folder, and a later run removes it. Skipped where `chattr` cannot set
/// the flag.
#[test]
fn an_earlier_report_that_cannot_be_removed_is_a_warning() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, out, _) = sample_report(dir.path());
    struct Mutable<'a>(&'a Path);
    impl Drop for Mutable<'_> {
        fn drop(&mut self) {
            let _ = Command::new("chattr").arg("-R").arg("-i").arg(self.0).output();
        }
    }
    let _guard = Mutable(dir.path());
    let pinned = out.join("index.html");
    let set = Command::new("chattr").arg("+i").arg(&pinned).output();
    if !set.is_ok_and(|o| o.status.success()) {
        eprintln!("skipped: chattr +i is not available here");
        return;
    }
    let query = "from_date=2026-10-02&to_date=2026-10-21";
    let again = report(&data, &out, &["--query", query, "--now", NOW]);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(again.status.success(), "{said}");
    assert!(said.contains("could not be removed") && said.contains(".out.old-"), "{said}");
    assert!(json(&out.join("manifest.json")).to_string().contains("2026-10-02"), "the new report is at OUT");
    drop(_guard);
    let third = report(&data, &out, &["--query", query, "--now", NOW, "--quiet"]);
    assert!(third.status.success(), "{}", String::from_utf8_lossy(&third.stderr));
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `--formats json` writes the same pages as the full report and nothing
/// else per account; the index links the first page and the manifest says
/// which formats were written.
#[test]
fn formats_restrict_the_files_written() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (data, full, _) = sample_report(dir.path());
    let full = tree(&full);
    let out = dir.path().join("json-only");
    let output = report(&data, &out, &["--query", SAMPLE_QUERY, "--now", NOW, "--quiet", "--formats", "json"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let only = tree(&out);
    for (name, bytes) in &only {
        if name.contains('/') {
            assert!(name.rsplit('/').next().expect("file").starts_with("page-"), "{name}");
            assert_eq!(Some(bytes), full.get(name), "{name}");
        }
    }
    let pages = |t: &BTreeMap<String, Vec<u8>>| t.keys().filter(|n| n.contains("/page-")).count();
    assert_eq!(pages(&only), pages(&full));
    let index = String::from_utf8_lossy(&only["index.html"]).into_owned();
    assert!(index.contains("<a href=\"MA100001/page-0001.json\">MA100001</a>"), "{index}");
    let manifest = json(&out.join("manifest.json"));
    assert_eq!(manifest["request"]["formats"], serde_json::json!(["json"]));
    assert!(json(&dir.path().join("out").join("manifest.json"))["request"].get("formats").is_none());

    let out = dir.path().join("csv-html");
    let output = report(&data, &out, &["--query", SAMPLE_QUERY, "--now", NOW, "--formats", "html,csv", "--quiet"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    for (name, bytes) in tree(&out) {
        if name.contains('/') {
            assert!(!name.contains("/page-"), "{name}");
            assert_eq!(Some(&bytes), full.get(&name), "{name}");
        }
    }
    let bad = report(&data, &dir.path().join("bad"), &["--formats", "json,pdf"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid --formats"));
}

#[test]
fn bad_rows_are_set_aside_and_counted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let expected = write_sample(&data, 1);
    put(
        &data,
        "messages/bad.csv",
        "record_id,auth_id,subaccount_auth,timestamp,type,direction,country,segments,amount,surcharge,error_code\n\
         B1,MA100001,,2026-10-21T00:00:00Z,sms,outbound,US,1,1e3,0,\n\
         B2,MA100001,,2026-10-21T00:00:00Z,sms,sideways,US,1,0.5,0,\n\
         B3,MA100001,,2026-10-21T00:00:00Z,sms,outbound,US,1,0.5,0,\n",
    );
    let out = dir.path().join("out");
    let output = report(&data, &out, &["--query", SAMPLE_QUERY, "--now", NOW, "--on-bad-row", "set-aside"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let rejected = std::fs::read_to_string(out.join("rejected.csv")).expect("rejected.csv");
    let mut lines = rejected.lines();
    assert_eq!(lines.next(), Some("file,line,column,value,reason"));
    let rest: Vec<&str> = lines.collect();
    assert_eq!(rest.len(), 2, "{rejected}");
    assert!(rest[0].starts_with("messages/bad.csv,2,amount,1e3,"), "{}", rest[0]);
    assert!(rest[1].starts_with("messages/bad.csv,3,direction,sideways,"), "{}", rest[1]);
    let manifest = json(&out.join("manifest.json"));
    for (kind, counts) in manifest["counts"].as_object().expect("counts") {
        let n = |k: &str| counts[k].as_u64().expect("count");
        assert_eq!(n("read"), n("used") + n("set_aside") + n("duplicates") + n("superseded") + n("voids"), "{kind}");
    }
    assert_eq!(manifest["counts"]["messages"]["set_aside"], 2);
    assert_eq!(manifest["counts"]["messages"]["used"], 401);
    assert_eq!(manifest["rejected_file"], "rejected.csv");
    // B3 is good and counts: 0.5 more for MA100001.
    let total = expected["MA100001"] + 500_000_000;
    assert_eq!(json(&out.join("MA100001/page-0001.json"))["meta"]["total_spend"].to_string(), json_decimal(total));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("2 set aside"), "{stderr}");

    // From a store, the rows its ingest set aside are never read, and the
    // report says so: in its manifest and on index.html.
    let store = dir.path().join("store");
    let s = |path: &Path| path.to_str().expect("utf-8").to_owned();
    let (data_arg, store_arg) = (s(&data), s(&store));
    let ingest = run(&["ingest", "--data", &data_arg, "--store", &store_arg, "--on-bad-row", "set-aside"]);
    assert!(ingest.status.success(), "{}", String::from_utf8_lossy(&ingest.stderr));
    let from_store = dir.path().join("from-store");
    let out_arg = s(&from_store);
    let args = ["report", "--store", &store_arg, "--out", &out_arg, "--query", SAMPLE_QUERY, "--now", NOW];
    assert!(run(&args).status.success());
    let manifest = json(&from_store.join("manifest.json"));
    assert_eq!(manifest["store"]["set_aside_at_ingest"], 2, "{manifest}");
    assert_eq!(manifest["store"]["rejected"].as_array().map(Vec::len), Some(1), "{manifest}");
    let index = std::fs::read_to_string(from_store.join("index.html")).expect("index");
    assert!(index.contains("Set aside at ingest</div><div class=\"v\">2<"), "{index}");
    // Its rows read are the stored ones, and are called so.
    assert!(index.contains(">Stored rows read</div>") && !index.contains(">Rows read</div>"), "{index}");
}

/// The cards of index.html add up to the rows read: superseded rows and
/// voids are shown when a delivery has them.
#[test]
fn index_cards_add_up_with_corrections() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    crate::common::copy_tree(&crate::common::sample_data(), &data);
    for kind in ["calls", "charges", "voids"] {
        crate::common::copy_tree(&crate::common::root().join("sample_corrections").join(kind), &data.join(kind));
    }
    let out = dir.path().join("out");
    let output =
        report(&data, &out, &["--query", "granularity=month&from_date=2026-10-01&to_date=2026-12-01", "--now", NOW]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let index = std::fs::read_to_string(out.join("index.html")).expect("index");
    let card = |label: &str| -> u64 {
        let at = index.find(&format!("{label}</div><div class=\"v\">")).unwrap_or_else(|| panic!("{label}: {index}"));
        let rest = &index[at + label.len() + "</div><div class=\"v\">".len()..];
        rest[..rest.find('<').expect("end")].replace(',', "").parse().expect("a count")
    };
    let shown = ["Used", "Set aside", "Duplicates", "Superseded", "Voids"].map(card);
    assert!(shown[3] > 0 && shown[4] > 0, "{shown:?}");
    assert_eq!(card("Rows read"), shown.iter().sum::<u64>(), "{shown:?}");
}

#[test]
fn progress_is_plain_lines_when_not_a_terminal_and_ends_with_a_summary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write_sample(&data, 1);
    let out = dir.path().join("out");
    let output = report(&data, &out, &["--query", SAMPLE_QUERY, "--now", NOW, "--accounts", "MA200002,MA300003"]);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("report: reading 5 files"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "no terminal escapes in plain mode: {stderr:?}");
    let last = stderr.lines().last().expect("summary line");
    assert!(last.starts_with("report: 2 accounts, "), "{last}");
    assert!(last.contains("spend EUR ") && last.contains("INR ") && last.contains(" s -> "), "{last}");
    let names: Vec<String> = std::fs::read_dir(&out)
        .expect("out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(names, ["MA200002", "MA300003", "index.html", "manifest.json"]);
    assert!(output.stdout.is_empty());
}

#[test]
fn bad_requests_exit_2_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    write_sample(&data, 1);
    let out = dir.path().join("out");
    for (query, needle) in [
        ("granularity=week", "invalid granularity 'week'"),
        ("timezone=Mars/Olympus", "invalid timezone 'Mars/Olympus'"),
        ("page_token=abc", "page_token"),
        ("granularity=hour&from_date=2026-10-01&to_date=2026-11-01", "use granularity 'day'"),
    ] {
        let output = report(&data, &out, &["--query", query, "--now", NOW]);
        assert_eq!(output.status.code(), Some(2), "{query}");
        assert!(String::from_utf8_lossy(&output.stderr).contains(needle), "{query}");
        assert!(!out.exists(), "{query}");
    }
    let output = report(&data, &out, &["--accounts", "A,,B", "--now", NOW]);
    assert_eq!(output.status.code(), Some(2));
}

/// The report of `sample_data/` over its whole time span, against the
/// totals hand-computed in `sample_data/README.md`, and file for file
/// against `tests/golden/report/sample/` (rewritten with `UPDATE_GOLDEN=1`).
#[test]
fn sample_data_report_matches_hand_totals_and_golden_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let data = root.join("sample_data");
    let golden = root.join("tests/golden/report/sample");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let query = "granularity=month&from_date=2026-10-01&to_date=2026-12-01&page_size=10";
    let output = report(&data, &out, &["--query", query, "--now", "2026-11-21T12:00:00Z", "--quiet"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    // sample_data/README.md: "Hand-computed totals over the whole data".
    let manifest = json(&out.join("manifest.json"));
    let totals: BTreeMap<String, String> = manifest["accounts"]
        .as_array()
        .expect("accounts")
        .iter()
        .map(|a| (a["auth_id"].as_str().expect("id").to_owned(), a["total_spend"].to_string()))
        .collect();
    let hand: BTreeMap<String, String> = [
        ("MA001SHGA32ZDQYG9N8T", "7.06"),
        ("MA002PCHQ444XLFXQN5B", "1.16"),
        ("MA003GM22SVQQT8ZPDNQ", "0.818"),
        ("MA004DEFGZHA3AU3ZWLC", "0.0"),
    ]
    .map(|(a, t)| (a.to_owned(), t.to_owned()))
    .into();
    assert_eq!(totals, hand);
    let ma001 = &manifest["accounts"][0];
    assert_eq!(ma001["usage_spend"].to_string(), "0.98");
    assert_eq!(ma001["other_charges_spend"].to_string(), "6.08");
    assert_eq!(
        ma001["subaccount_spend"].to_string(),
        r#"{"SAALPHAKGPP2438DZWD3":0.117,"SABETAR7DC58MD39DVS4":0.236,"SAGAMMAGW9CCFK5GBEPU":0.056}"#
    );
    assert_eq!(manifest["accounts"][1]["currency"], "EUR");
    assert_eq!(manifest["accounts"][1]["subaccount_spend"].to_string(), r#"{"SAONEP9YKFY3R63AE6L9":0.13}"#);
    assert_eq!(manifest["spend_by_currency"].to_string(), r#"{"EUR":1.16,"USD":7.878}"#);
    // Row counts (read / duplicates / unique): calls 28 / 3 / 25, messages
    // 23 / 2 / 21, transcriptions 8 / 1 / 7, charges 10 / 1 / 9.
    for (kind, read, duplicates, used) in
        [("calls", 28, 3, 25), ("messages", 23, 2, 21), ("transcriptions", 8, 1, 7), ("charges", 10, 1, 9)]
    {
        let counts = &manifest["counts"][kind];
        assert_eq!(
            (&counts["read"], &counts["duplicates"], &counts["used"]),
            (&read.into(), &duplicates.into(), &used.into())
        );
    }
    // Reconciled per currency, never as one sum of both.
    assert_eq!(manifest["reconciliation"]["sum_of_selected_records"].to_string(), r#"{"EUR":1.16,"USD":7.878}"#);
    assert_eq!(manifest["reconciliation"]["sum_of_account_total_spend"].to_string(), r#"{"EUR":1.16,"USD":7.878}"#);

    let actual = tree(&out);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let _ = std::fs::remove_dir_all(&golden);
        for (name, bytes) in &actual {
            let path = golden.join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, bytes).expect("write golden");
        }
    }
    let expected = tree(&golden);
    assert_eq!(actual.keys().collect::<Vec<_>>(), expected.keys().collect::<Vec<_>>(), "files");
    for (name, bytes) in &actual {
        assert!(
            *bytes == expected[name],
            "{name} differs from tests/golden/report/sample/{name} (UPDATE_GOLDEN=1 rewrites it):\n{}",
            String::from_utf8_lossy(bytes)
        );
    }
}

/// An account id is never a path: `../x`, `a/b` and `index.html` become
/// percent-encoded folder names inside OUT, linked from index.html.
#[test]
fn account_ids_cannot_escape_the_output_folder() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut text = String::from(
        "record_id,auth_id,subaccount_auth,timestamp,type,direction,country,segments,amount,surcharge,error_code\n",
    );
    for (i, id) in ["../escape", "a/b", "index.html", ".hidden", "<b>x</b>"].iter().enumerate() {
        text.push_str(&format!("M{i},\"{id}\",,2026-11-20T10:00:00Z,sms,outbound,US,1,0.5,0,\n"));
    }
    put(&data, "messages/m.csv", &text);
    let out = dir.path().join("nested").join("out");
    let output = report(&data, &out, &["--query", "from_date=2026-11-20&to_date=2026-11-21", "--now", NOW]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("out")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["%2E.%2Fescape", "%2Ehidden", "%3Cb%3Ex%3C%2Fb%3E", "a%2Fb", "index%2Ehtml", "index.html", "manifest.json"]
    );
    assert!(!dir.path().join("nested").join("escape").exists());
    let siblings: Vec<String> = std::fs::read_dir(dir.path().join("nested"))
        .expect("nested")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(siblings, ["out"]);
    let index = std::fs::read_to_string(out.join("index.html")).expect("index");
    assert!(index.contains("<a href=\"%252E.%252Fescape/report.html\">../escape</a>"), "{index}");
    assert!(index.contains("&lt;b&gt;x&lt;/b&gt;") && !index.contains("<b>x</b>"));
    let page = json(&out.join("a%2Fb").join("page-0001.json"));
    assert_eq!(page["meta"]["auth_id"], "a/b");
}
