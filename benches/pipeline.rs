//! Criterion benches of each stage of a summary and of the whole, on data
//! from `telemeter::generate` with a fixed seed, built outside the timed
//! loops.
//!
//! Sizes (small enough that `cargo bench` finishes in a few minutes):
//! - parse: one calls CSV file of 200 000 rows (~26 MB) held in memory;
//! - dedup: the dedup entries of 1 000 000 calls (1 % re-delivered);
//! - aggregate, end to end: a data set of 200 000 calls, 100 000 messages,
//!   20 000 transcriptions and 2 000 charges (20 accounts, 30 days, CSV,
//!   4 files per kind) in a temporary directory;
//! - render: page 1 and the JSON of the biggest account's 30-day daily
//!   summary of that data set;
//! - store: that summary from a store ingested from the same data set
//!   (ingested once, outside the timed loop).

use std::path::Path;

use chrono::{DateTime, NaiveDate, Utc};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use telemeter::aggregate::{self, AggregateOptions, Bucketing, OnBadRow, Selector};
use telemeter::dataset::Dataset;
use telemeter::generate::{FilePlan, OutputFormat, Plan, Spec};
use telemeter::query::{UsageParams, UsageRequest};
use telemeter::records::csv::RowSink;
use telemeter::records::dedup::{self, Entry, Origin, ScanEntries, PARTITIONS};
use telemeter::records::files::{Format, InputFile};
use telemeter::records::{self, Field, Kind};
use telemeter::store::IngestOptions;
use telemeter::summary;
use telemeter::time::{Granularity, Window};
use telemeter::token::TokenKey;

const SEED: u64 = 20_261_121;

fn spec(rows: [u64; 4]) -> Spec {
    Spec {
        rows,
        accounts: 20,
        subaccounts: 3,
        start: NaiveDate::from_ymd_opt(2026, 8, 1).expect("a date"),
        days: 30,
        seed: SEED,
        format: OutputFormat::Csv,
        files: 4,
        duplicates: 0.01,
    }
}

fn calls_file(rows: u64) -> (InputFile, Vec<u8>) {
    let plan = Plan::new(&Spec { files: 1, ..spec([rows, 0, 0, 0]) }).expect("a plan");
    let file: FilePlan = plan.files().remove(0);
    let bytes = plan.file_bytes(&file).expect("generated");
    let input = InputFile {
        kind: Kind::Calls,
        path: "calls/part-000.csv".into(),
        name: "calls/part-000.csv".into(),
        format: Format::Csv,
        size: bytes.len() as u64,
        sum: None,
    };
    (input, bytes)
}

/// Counts rows and checks each against the contract, keeping nothing.
#[derive(Default)]
struct Checked {
    rows: u64,
    valid: u64,
}

impl RowSink for Checked {
    fn row(&mut self, _line: u64, fields: &[Field<'_>]) -> bool {
        self.rows += 1;
        if records::parse_record(Kind::Calls, fields).is_ok() {
            self.valid += 1;
        }
        true
    }
    fn malformed(&mut self, _line: u64, _column: &str, _value: String, _reason: String) -> bool {
        self.rows += 1;
        true
    }
    fn unframed(&mut self, _line: u64, _column: &str, _value: String, _reason: String) -> bool {
        self.rows += 1;
        true
    }
}

fn parse(c: &mut Criterion) {
    let (file, bytes) = calls_file(200_000);
    let mut group = c.benchmark_group("parse");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    group.sample_size(20);
    group.bench_function("csv_to_checked_records_200k_calls", |b| {
        b.iter(|| {
            let sinks = records::csv::read(&file, &bytes, Checked::default).expect("readable");
            let valid: u64 = sinks.iter().map(|s| s.valid).sum();
            assert_eq!(valid, 200_000);
            valid
        })
    });
    group.finish();
}

fn dedup_entries(rows: u64) -> Vec<ScanEntries> {
    struct Entries(Option<u64>, Vec<Vec<Entry>>);
    impl RowSink for Entries {
        fn row(&mut self, line: u64, fields: &[Field<'_>]) -> bool {
            let first = *self.0.get_or_insert(line);
            if let Ok(record) = records::parse_record(Kind::Calls, fields) {
                let entry = Entry::new(record.record_id, record.content_hash(), (line - first) as u32, 0);
                self.1[entry.partition()].push(entry);
            }
            true
        }
        fn malformed(&mut self, _: u64, _: &str, _: String, _: String) -> bool {
            true
        }
        fn unframed(&mut self, _: u64, _: &str, _: String, _: String) -> bool {
            true
        }
    }
    let (file, bytes) = calls_file(rows);
    let sinks = records::csv::read(&file, &bytes, || Entries(None, (0..PARTITIONS).map(|_| Vec::new()).collect()))
        .expect("readable");
    sinks
        .into_iter()
        .map(|sink| ScanEntries { origin: Origin { file: 0, first_line: sink.0.unwrap_or(0) }, parts: sink.1 })
        .collect()
}

fn dedup(c: &mut Criterion) {
    let parts = dedup_entries(1_000_000);
    let mut group = c.benchmark_group("dedup");
    group.throughput(Throughput::Elements(1_000_000));
    group.sample_size(10);
    group.bench_function("check_1m_calls", |b| {
        b.iter_batched(
            || parts.clone(),
            |parts| {
                let outcome = dedup::check(parts, Vec::new());
                assert_eq!(outcome.duplicates.len(), 10_000);
                outcome.duplicates.len()
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// A generated data set on disk, and the biggest account's request.
struct DataSet {
    dir: tempfile::TempDir,
    dataset: Dataset,
    request: UsageRequest,
    key: TokenKey,
    window: Window,
}

fn data_set() -> DataSet {
    let spec = spec([200_000, 100_000, 20_000, 2_000]);
    let dir = tempfile::tempdir().expect("a temp dir");
    telemeter::generate::generate(&spec, dir.path()).expect("generated");
    let auth_id = Plan::new(&spec).expect("a plan").account_ids()[0].to_owned();
    let dataset = Dataset::open(dir.path()).expect("opens");
    let key = TokenKey::from_secret("bench");
    let now: DateTime<Utc> = "2026-09-01T00:00:00Z".parse().expect("an instant");
    let pairs = [("granularity", "day"), ("from_date", "2026-08-01"), ("to_date", "2026-08-31")]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
    let params = UsageParams::from_pairs(pairs).expect("valid");
    let request = UsageRequest::resolve(&auth_id, params, now, None, &key).expect("valid");
    let window = request.window.clone();
    DataSet { dir, dataset, request, key, window }
}

fn selector(window: &Window) -> Selector {
    Selector::everything(Bucketing::shared(window.buckets(Granularity::Day)))
}

fn aggregate_and_end_to_end(c: &mut Criterion) {
    let data = data_set();
    let dir: &Path = data.dir.path();
    let mut group = c.benchmark_group("aggregate");
    group.throughput(Throughput::Elements(322_000));
    group.sample_size(10);
    group.bench_function("all_accounts_day_322k_rows", |b| {
        let selector = selector(&data.window);
        b.iter(|| {
            let result = aggregate::aggregate(dir, &selector, AggregateOptions::default()).expect("valid");
            result.groups.len()
        })
    });
    group.finish();

    let mut group = c.benchmark_group("end_to_end");
    group.throughput(Throughput::Elements(322_000));
    group.sample_size(10);
    group.bench_function("summary_one_account_30_days_322k_rows", |b| {
        b.iter(|| {
            let summary = summary::build(&data.dataset, &data.request).expect("built");
            let page = summary.requested_page(&data.key).expect("a page");
            summary::to_json(&page, false).expect("json").len()
        })
    });
    group.finish();

    let store_dir = tempfile::tempdir().expect("a temp dir");
    let options = IngestOptions {
        on_bad_row: OnBadRow::Fail,
        ingest_id: "bench".to_owned(),
        batch_bytes: IngestOptions::DEFAULT_BATCH_BYTES,
        max_rollup_groups: IngestOptions::DEFAULT_MAX_ROLLUP_GROUPS,
        filter_bytes: IngestOptions::DEFAULT_FILTER_BYTES,
        pending_bytes: IngestOptions::DEFAULT_PENDING_BYTES,
        resources: telemeter::resources::generation::build,
        progress: Default::default(),
    };
    telemeter::store::ingest(dir, store_dir.path(), &options).expect("ingested");
    let mut group = c.benchmark_group("store");
    group.sample_size(20);
    group.bench_function("summary_one_account_30_days_from_store", |b| {
        b.iter(|| {
            // Opened in the loop, as every `summary --store` run opens it.
            let store = Dataset::open_store(store_dir.path()).expect("opens");
            let summary = summary::build(&store, &data.request).expect("built");
            let page = summary.requested_page(&data.key).expect("a page");
            summary::to_json(&page, false).expect("json").len()
        })
    });
    group.finish();

    let summary = summary::build(&data.dataset, &data.request).expect("built");
    let mut group = c.benchmark_group("render");
    group.bench_function(format!("page_1_and_json_of_{}_rows", summary.rows.len()), |b| {
        b.iter(|| {
            let page = summary.page(0, &data.key).expect("a page");
            summary::to_json(&page, false).expect("json").len()
        })
    });
    group.finish();
}

criterion_group!(benches, parse, dedup, aggregate_and_end_to_end);
criterion_main!(benches);
