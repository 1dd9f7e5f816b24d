//! `telemeter report`: the nightly job. Every account's report (JSON pages,
//! CSV, HTML) from one pass over the data, written atomically to a folder,
//! with progress on stderr.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};

use super::BadRowArg;
use crate::aggregate::AccountScope;
use crate::query::UsageParams;
use crate::report::{self as batch, Formats, PageFiles, Progress, ReportRequest};
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
}

/// Runs `report`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let now = match super::request_now(args.now.as_deref()) {
        Ok(now) => now,
        Err(bad) => return bad_request(&bad.message),
    };
    let params = match UsageParams::parse_query(&args.query) {
        Ok(params) => params,
        Err(bad) => return bad_request(&bad.message),
    };
    let keys: Vec<String> = form_urlencoded::parse(args.query.trim_start_matches('?').as_bytes())
        .map(|(key, _)| key.into_owned())
        .collect();
    super::warn_all(&crate::query::dropped_keys(keys.iter().map(String::as_str)));
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
    let dataset = args.source.open(super::warn)?;
    let key = args.source.token_key()?;
    let on_bad_row = args.on_bad_row.into();
    let request = ReportRequest {
        batch: BatchRequest { params: &params, accounts: &accounts, now, on_bad_row },
        query: &args.query,
        now_given: args.now.is_some(),
        formats,
        pages,
    };
    let display = Display::new(super::quiet());
    let bytes_read = AtomicU64::new(0);
    let reading_done = AtomicBool::new(false);
    let outcome = std::thread::scope(|scope| {
        // Shows the bytes read so far every 200 ms, so the read phase shows
        // rate and ETA between the pass's events.
        if !super::quiet() {
            let (display, reading_done, bytes_read) = (&display, &reading_done, &bytes_read);
            scope.spawn(move || {
                while !reading_done.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(200));
                    display.show(Progress::Read { bytes: bytes_read.load(Ordering::Relaxed) });
                }
            });
        }
        let outcome = batch::write_reports(&dataset, &request, &key, &args.out, &|p| match p {
            Progress::Read { bytes } => {
                bytes_read.fetch_max(bytes, Ordering::Relaxed);
            }
            Progress::Writing { .. } => {
                reading_done.store(true, Ordering::Relaxed);
                display.show(p)
            }
            _ => display.show(p),
        });
        reading_done.store(true, Ordering::Relaxed);
        outcome
    });
    display.finish();
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(Error::BadRequest(bad)) => return bad_request(&bad.message),
        Err(error) => return Err(error).context(format!("no report written to {}", args.out.display())),
    };
    super::warn_all(&outcome.notices);
    if !super::quiet() {
        let spend: Vec<String> =
            outcome.spend.iter().map(|(currency, amount)| format!("{currency} {amount}")).collect();
        let spend = if spend.is_empty() { "0".to_owned() } else { spend.join(", ") };
        let set_aside = match outcome.counts.set_aside {
            0 => String::new(),
            n => format!(", {n} set aside (rejected.csv)"),
        };
        eprintln!(
            "report: {} accounts, {} usage rows from {} records used of {} read{set_aside}, spend {spend}, {:.2} s -> {}",
            outcome.accounts,
            outcome.usage_rows,
            outcome.counts.used,
            outcome.counts.read,
            started.elapsed().as_secs_f64(),
            args.out.display()
        );
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

/// How progress is shown: a bar on a terminal, plain lines otherwise,
/// nothing with `--quiet`.
enum Display {
    Quiet,
    Bar(Mutex<Option<(ProgressBar, Instant)>>),
    Lines(Mutex<LineState>),
}

struct LineState {
    started: Instant,
    reading_total: u64,
    reading: bool,
    last: Instant,
    writing_since: Instant,
}

/// Seconds between two plain progress lines.
const LINE_EVERY: Duration = Duration::from_secs(2);

impl Display {
    fn new(quiet: bool) -> Display {
        if quiet {
            Display::Quiet
        } else if std::io::stderr().is_terminal() {
            Display::Bar(Mutex::new(None))
        } else {
            let now = Instant::now();
            Display::Lines(Mutex::new(LineState {
                started: now,
                reading_total: 0,
                reading: false,
                last: now,
                writing_since: now,
            }))
        }
    }

    fn show(&self, progress: Progress) {
        match self {
            Display::Quiet => {}
            Display::Bar(bar) => {
                let Ok(mut bar) = bar.lock() else { return };
                show_bar(&mut bar, progress);
            }
            Display::Lines(state) => {
                let Ok(mut state) = state.lock() else { return };
                show_line(&mut state, progress);
            }
        }
    }

    fn finish(&self) {
        if let Display::Bar(bar) = self {
            if let Ok(mut bar) = bar.lock() {
                if let Some((bar, _)) = bar.take() {
                    bar.finish_and_clear();
                }
            }
        }
    }
}

fn show_bar(bar: &mut Option<(ProgressBar, Instant)>, progress: Progress) {
    match progress {
        Progress::Reading { files, bytes } => {
            let reading = ProgressBar::new(bytes);
            let template =
                "{spinner} reading {msg} [{bar:24.cyan/blue}] {bytes}/{total_bytes}, {bytes_per_sec}, ETA {eta}";
            if let Ok(style) = ProgressStyle::with_template(template) {
                reading.set_style(style.progress_chars("=> "));
            }
            reading.set_message(format!("{files} files"));
            reading.enable_steady_tick(Duration::from_millis(120));
            *bar = Some((reading, Instant::now()));
        }
        Progress::Read { bytes } => {
            if let Some((bar, _)) = bar {
                if bar.length().is_some_and(|total| bytes <= total) {
                    bar.set_position(bytes);
                }
            }
        }
        Progress::Writing { rows_read, accounts } => {
            if let Some((spinner, started)) = bar.take() {
                if let Ok(style) = ProgressStyle::with_template("{msg}") {
                    spinner.set_style(style);
                }
                spinner
                    .finish_with_message(format!("read {rows_read} rows in {:.1} s", started.elapsed().as_secs_f64()));
            }
            let writing = ProgressBar::new(accounts as u64);
            let template = "{spinner} writing [{bar:24.cyan/blue}] {pos}/{len} accounts, {msg}, ETA {eta}";
            if let Ok(style) = ProgressStyle::with_template(template) {
                writing.set_style(style.progress_chars("=> "));
            }
            writing.set_message("0.0/s");
            writing.enable_steady_tick(Duration::from_millis(120));
            *bar = Some((writing, Instant::now()));
        }
        Progress::AccountDone { done, .. } => {
            if let Some((bar, started)) = bar {
                bar.set_position(done as u64);
                let rate = done as f64 / started.elapsed().as_secs_f64().max(1e-9);
                bar.set_message(format!("{rate:.1}/s"));
            }
        }
    }
}

fn show_line(state: &mut LineState, progress: Progress) {
    let now = Instant::now();
    match progress {
        Progress::Reading { files, bytes } => {
            eprintln!("report: reading {files} files ({})", indicatif::HumanBytes(bytes));
            state.reading_total = bytes;
            state.reading = true;
            state.last = now;
        }
        Progress::Read { bytes } => {
            if !state.reading || bytes == 0 || now.duration_since(state.last) < LINE_EVERY {
                return;
            }
            state.last = now;
            let seconds = now.duration_since(state.started).as_secs_f64().max(1e-9);
            let rate = bytes as f64 / seconds;
            let eta = state.reading_total.saturating_sub(bytes) as f64 / rate.max(1.0);
            eprintln!(
                "report: read {} of {} ({}/s, ETA {eta:.0} s)",
                indicatif::HumanBytes(bytes),
                indicatif::HumanBytes(state.reading_total),
                indicatif::HumanBytes(rate as u64)
            );
        }
        Progress::Writing { rows_read, accounts } => {
            eprintln!(
                "report: read {rows_read} rows in {:.1} s; writing {accounts} accounts",
                state.started.elapsed().as_secs_f64()
            );
            state.writing_since = now;
            state.reading = false;
            state.last = now;
        }
        Progress::AccountDone { done, total } => {
            if done < total && now.duration_since(state.last) < LINE_EVERY {
                return;
            }
            state.last = now;
            let seconds = now.duration_since(state.writing_since).as_secs_f64().max(1e-9);
            let rate = done as f64 / seconds;
            let eta = (total - done) as f64 / rate.max(1e-9);
            eprintln!("report: {done}/{total} accounts written ({rate:.1}/s, ETA {eta:.0} s)");
        }
    }
}
