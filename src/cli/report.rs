//! `telemeter report`: the nightly job. Every account's report (JSON pages,
//! CSV, HTML) from one pass over the data, written atomically to a folder,
//! with progress on stderr.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::progress::{Progress, Unit};
use super::BadRowArg;
use crate::aggregate::AccountScope;
use crate::query::UsageParams;
use crate::report::{self as batch, Formats, PageFiles, Progress as ReportProgress, ReportRequest};
use crate::summary::BatchRequest;
use crate::Error;

/// Arguments of `report`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// `--data` or `--store`.
    #[command(flatten)]
    pub source: super::SourceArgs,
    /// The output folder; replaced as a whole when the run succeeds.
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// `all`, or a comma-separated list of account ids.
    #[arg(long, default_value = "all")]
    pub accounts: String,
    /// The usage summary query string applied to every account (no page_token).
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub query: String,
    /// "Now" for the date defaults, RFC 3339 (default: the clock).
    #[arg(long, allow_hyphen_values = true)]
    pub now: Option<String>,
    /// What to do with a row that breaks the records contract.
    #[arg(long, value_enum, default_value = "fail")]
    pub on_bad_row: BadRowArg,
    /// Which files each account gets: a comma-separated subset of json (the
    /// pages), csv (usage.csv, other_charges.csv) and html (report.html).
    #[arg(long, default_value = "json,csv,html")]
    pub formats: String,
    /// How each account's JSON pages are written: files (page-0001.json,
    /// ...) or jsonl (one pages.jsonl per account, one page per line: the
    /// bytes of `summary --all-pages`; far fewer files for large runs).
    #[arg(long, value_enum, default_value = "files")]
    pub pages: PagesArg,
    /// With --store: the manifest.json of the previous report of the same
    /// store; this report's manifest then lists, per account, the months
    /// that changed since (`changes_since`).
    #[arg(long)]
    pub changes_since: Option<PathBuf>,
}

/// Runs `report`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let progress = Progress::new("report", super::quiet());
    let now = match super::request_now(args.now.as_deref()) {
        Ok(now) => now,
        Err(bad) => return bad_request(&bad.message),
    };
    // Decoded once: the same pairs are checked and their dropped keys said.
    let pairs = match crate::query::decode_query(&args.query) {
        Ok(pairs) => pairs,
        Err(bad) => return bad_request(&bad.message),
    };
    let params = match UsageParams::from_pairs(pairs.iter().cloned()) {
        Ok(params) => params,
        Err(bad) => return bad_request(&bad.message),
    };
    super::warn_all(&crate::query::dropped_keys(pairs.iter().map(|(key, _)| key.as_str())));
    if params.page_token.is_some() {
        return bad_request("invalid page_token: report writes every page; leave page_token out of --query");
    }
    let accounts = match parse_accounts(&args.accounts) {
        Ok(accounts) => accounts,
        Err(message) => return bad_request(&message),
    };
    let formats = match Formats::parse(&args.formats) {
        Ok(formats) => formats,
        Err(message) => return bad_request(&message),
    };
    let pages = match page_files(args.pages, formats) {
        Ok(pages) => pages,
        Err(message) => return bad_request(&message),
    };
    if args.changes_since.is_some() && args.source.store.is_none() {
        return bad_request("--changes-since needs --store: a report of raw files has no ledger");
    }
    let dataset = args.source.open(super::warn)?;
    let changes_since = match (&args.changes_since, &dataset.source) {
        (Some(previous), crate::dataset::Source::Store(store)) => {
            Some(crate::store::changes::report_generation(previous, &store.manifest)?)
        }
        _ => None,
    };
    let key = args.source.token_key()?;
    let on_bad_row = args.on_bad_row.into();
    let request = ReportRequest {
        batch: BatchRequest { params: &params, accounts: &accounts, now, on_bad_row },
        query: &args.query,
        now_given: args.now.is_some(),
        formats,
        pages,
        changes_since,
    };
    let outcome = progress.run(|| {
        batch::write_reports(&dataset, &request, &key, &args.out, &|event| match event {
            ReportProgress::Reading { files, bytes } => {
                progress.phase(&format!("reading {files} files"), Unit::Bytes, Some(bytes), None)
            }
            ReportProgress::Read { bytes } => progress.reach(bytes),
            ReportProgress::Writing { rows_read, accounts } => {
                progress.end(&format!(", {rows_read} rows"));
                progress.phase("writing", Unit::Items("accounts"), Some(accounts as u64), None)
            }
            ReportProgress::AccountDone { done, .. } => progress.reach(done as u64),
        })
    });
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(Error::BadRequest(bad)) => return bad_request(&bad.message),
        Err(error) => return Err(error).context(format!("no report written to {}", args.out.display())),
    };
    super::warn_all(&outcome.notices);
    if !progress.is_quiet() {
        let spend: Vec<String> =
            outcome.spend.iter().map(|(currency, amount)| format!("{currency} {amount}")).collect();
        let spend = if spend.is_empty() { "0".to_owned() } else { spend.join(", ") };
        let counts = &outcome.counts;
        let mut set_aside = match counts.set_aside {
            0 => String::new(),
            n => format!(", {n} set aside (rejected.csv)"),
        };
        // Corrections are named when a delivery had any, so that
        // read = used + set aside + duplicates + superseded + voids shows.
        if counts.superseded + counts.voids > 0 {
            set_aside.push_str(&format!(
                ", {} duplicates, {} superseded, {} voids",
                counts.duplicates, counts.superseded, counts.voids
            ));
        }
        progress.note(&format!(
            "{} accounts, {} usage rows from {} records used of {} read{set_aside}, spend {spend}, {} -> {}",
            outcome.accounts,
            outcome.usage_rows,
            outcome.counts.used,
            outcome.counts.read,
            progress.elapsed(),
            args.out.display()
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--pages`: how each account's JSON pages are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PagesArg {
    /// page-0001.json, page-0002.json, ...
    Files,
    /// One pages.jsonl per account, one page per line.
    Jsonl,
}

/// `--pages`; `jsonl` lays out the JSON pages, so it needs json in `--formats`.
fn page_files(arg: PagesArg, formats: Formats) -> Result<PageFiles, String> {
    let pages = match arg {
        PagesArg::Files => PageFiles::Files,
        PagesArg::Jsonl => PageFiles::Jsonl,
    };
    if pages == PageFiles::Jsonl && !formats.json {
        return Err(format!(
            "--pages jsonl writes the JSON pages, but --formats {} leaves json out",
            formats.names().join(",")
        ));
    }
    Ok(pages)
}

fn parse_accounts(text: &str) -> Result<AccountScope, String> {
    if text == "all" {
        return Ok(AccountScope::All);
    }
    let ids: BTreeSet<String> = text.split(',').map(str::to_owned).collect();
    if ids.iter().any(String::is_empty) {
        return Err(format!("invalid --accounts '{text}': expected all or a comma-separated list of account ids"));
    }
    Ok(AccountScope::Some(ids))
}

fn bad_request(message: &str) -> anyhow::Result<ExitCode> {
    eprintln!("error: {message}");
    Ok(ExitCode::from(2))
}
