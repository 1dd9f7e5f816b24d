//! `telemeter generate`: deterministic for a seed on any thread count, valid
//! under the records contract, and its re-delivered rows count as duplicates.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::NaiveDate;
use telemeter::aggregate::{AggregateOptions, Bucketing, Selector};
use telemeter::dataset::Dataset;
use telemeter::generate::{self, OutputFormat, Spec};
use telemeter::records::Kind;
use telemeter::time::{Granularity, Window};

fn spec(format: OutputFormat) -> Spec {
    Spec {
        rows: [6_000, 3_000, 800, 150],
        accounts: 9,
        subaccounts: 3,
        start: NaiveDate::from_ymd_opt(2026, 3, 25).expect("a date"),
        days: 12,
        seed: 42,
        format,
        files: 3,
        duplicates: 0.03,
    }
}

/// Every file under `dir`, by relative path.
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(folder) = stack.pop() {
        for entry in std::fs::read_dir(&folder).expect("readable") {
            let path = entry.expect("an entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let name = path.strip_prefix(dir).expect("inside").to_string_lossy().into_owned();
                files.insert(name, std::fs::read(&path).expect("readable"));
            }
        }
    }
    files
}

fn generate_with_threads(spec: &Spec, threads: usize) -> (tempfile::TempDir, generate::Written) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a pool");
    let written = pool.install(|| generate::generate(spec, dir.path())).expect("generated");
    (dir, written)
}

#[test]
fn same_seed_gives_the_same_bytes_on_any_thread_count() {
    for format in [OutputFormat::Csv, OutputFormat::CsvGz] {
        let (one, _) = generate_with_threads(&spec(format), 1);
        let (four, _) = generate_with_threads(&spec(format), 4);
        let (a, b) = (contents(one.path()), contents(four.path()));
        assert_eq!(a.len(), 1 + 4 * 3, "accounts.csv and 3 files per kind");
        assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
        for (name, bytes) in &a {
            assert!(b[name] == *bytes, "{name} differs between 1 and 4 threads ({format:?})");
        }
    }
}

#[test]
fn another_seed_gives_other_data() {
    let (a, _) = generate_with_threads(&spec(OutputFormat::Csv), 2);
    let (b, _) = generate_with_threads(&Spec { seed: 43, ..spec(OutputFormat::Csv) }, 2);
    let (a, b) = (contents(a.path()), contents(b.path()));
    assert_ne!(a["calls/part-000.csv"], b["calls/part-000.csv"]);
    assert_ne!(a["accounts.csv"], b["accounts.csv"]);
}

#[test]
fn generated_data_passes_validation_and_duplicates_count_as_duplicates() {
    for format in [OutputFormat::Csv, OutputFormat::CsvZst, OutputFormat::Parquet] {
        let spec = spec(format);
        let (dir, written) = generate_with_threads(&spec, 2);
        let dataset = Dataset::open(dir.path()).expect("accounts.csv is valid");
        let window = Window::new(
            spec.start,
            spec.start + chrono::Days::new(spec.days as u64),
            Granularity::Day,
            chrono_tz::Tz::UTC,
        )
        .expect("a window");
        let selector = Selector::everything(Bucketing::shared(window.buckets(Granularity::Day)));
        // Fail on the first bad row: every row must be valid.
        let aggregate = dataset.aggregate(&selector, AggregateOptions::default()).expect("every row is valid");
        for kind in Kind::ALL {
            let tally = aggregate.tallies[&kind];
            let k = kind as usize;
            assert_eq!(tally.read, spec.rows[k], "{format:?} {kind}");
            assert_eq!(written.rows[k], spec.rows[k]);
            let expected_duplicates = (spec.rows[k] as f64 * spec.duplicates).round() as u64;
            assert!(expected_duplicates > 0);
            assert_eq!(written.duplicates[k], expected_duplicates);
            assert_eq!(tally.duplicates, expected_duplicates, "{format:?} {kind}: re-deliveries are duplicates");
            assert_eq!(tally.set_aside, 0);
            assert_eq!(tally.used, spec.rows[k] - expected_duplicates);
            // Every timestamp falls inside the window.
            assert_eq!(tally.selected, tally.used, "{format:?} {kind}: rows outside the window");
        }
        let accounts: std::collections::BTreeSet<&str> = aggregate.groups.keys().map(|k| k.account.as_str()).collect();
        assert!(accounts.len() > 3, "traffic spreads over accounts");
        let currencies: std::collections::BTreeSet<&str> =
            dataset.accounts.iter().map(|a| a.currency.as_str()).collect();
        assert!(currencies.len() > 1, "several currencies: {currencies:?}");
        let sip_without_country = aggregate
            .groups
            .keys()
            .any(|k| k.dims.type_ == "sip" && k.dims.country.is_none() && k.dims.product.as_str() == "voice");
        assert!(sip_without_country, "SIP calls have no country");
        let subaccount_rows = aggregate.groups.keys().filter(|k| k.dims.subaccount.is_some()).count();
        assert!(subaccount_rows > 0, "some usage is on subaccounts");
    }
}

#[test]
fn account_sizes_are_skewed() {
    let spec = Spec { rows: [20_000, 0, 0, 0], accounts: 30, duplicates: 0.0, ..spec(OutputFormat::Csv) };
    let (dir, _) = generate_with_threads(&spec, 2);
    let mut per_account: BTreeMap<String, u64> = BTreeMap::new();
    for (name, bytes) in contents(dir.path()) {
        if !name.starts_with("calls") {
            continue;
        }
        for line in String::from_utf8(bytes).expect("utf-8").lines().skip(1) {
            let account = line.split(',').nth(1).expect("an auth_id");
            *per_account.entry(account.to_owned()).or_default() += 1;
        }
    }
    let mut sizes: Vec<u64> = per_account.values().copied().collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let top3: u64 = sizes.iter().take(3).sum();
    assert!(top3 * 100 / 20_000 >= 30, "the three biggest accounts carry at least 30 %: {sizes:?}");
    assert!(sizes[sizes.len() - 1] * 20 < sizes[0], "a long tail: {sizes:?}");
}

/// The command writes the kinds it is asked for, and its default dates end
/// the day before `--now`, so that a report with the same `--now` (its
/// default window: the 7 days before) holds the data.
#[test]
fn the_command_writes_what_is_asked_up_to_now() {
    let dir = crate::common::temp_dir();
    let data = dir.path().join("data");
    let now = "2026-11-28T10:00:00Z";
    let data_arg = data.to_str().expect("UTF-8");
    // --start and --now are two ways to place the window: refused together.
    let both = crate::common::telemeter(&["generate", "--out", data_arg, "--start", "2026-11-01", "--now", now]);
    assert_eq!((both.code, both.stdout.as_str()), (2, ""), "{}", both.stderr);
    assert!(both.stderr.contains("--start") && both.stderr.contains("--now"), "{}", both.stderr);
    assert!(!data.exists());
    crate::common::telemeter(&["generate", "--out", data_arg, "--calls", "500", "--accounts", "2", "--now", now]).ok();
    let files = contents(&data);
    assert!(files.keys().any(|f| f.starts_with("calls/")), "{:?}", files.keys());
    for kind in ["messages", "transcriptions", "charges"] {
        assert!(!files.keys().any(|f| f.starts_with(kind)), "{kind} written: {:?}", files.keys());
    }
    // 30 days by default, ending 2026-11-27.
    let calls: String = files
        .iter()
        .filter(|(name, _)| name.starts_with("calls/"))
        .map(|(_, bytes)| String::from_utf8_lossy(bytes).into_owned())
        .collect();
    let days: std::collections::BTreeSet<&str> =
        calls.lines().filter_map(|l| l.split(',').find(|f| f.starts_with("2026-")).map(|f| &f[..10])).collect();
    assert_eq!(days.first(), Some(&"2026-10-29"), "{days:?}");
    assert_eq!(days.last(), Some(&"2026-11-27"), "{days:?}");
    let out = dir.path().join("out");
    let report =
        crate::common::telemeter(&["report", "--data", data_arg, "--out", out.to_str().expect("UTF-8"), "--now", now]);
    report.ok();
    assert!(!report.stderr.contains("warning"), "{}", report.stderr);
    assert!(!report.stderr.contains(" 0 usage rows"), "{}", report.stderr);
}
