//! `telemeter summary`: one account's Usage Summary, one page (or all).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use rayon::prelude::*;

use crate::error::BadRequest;
use crate::query::UsageParams;
use crate::summary::{self, wire::ErrorBody};

/// Arguments of `summary`. Values may start with `-` (`--query '-x=1'`):
/// they are the request's, checked like any other.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// `--data` or `--store`.
    #[command(flatten)]
    pub source: super::SourceArgs,
    /// The account (the `{auth_id}` of the API path).
    #[arg(long, value_parser = parse_auth_id)]
    pub auth_id: String,
    /// The HTTP query string, exactly as the API receives it.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    pub query: String,
    /// "Now" for the date defaults, RFC 3339 (default: the clock).
    #[arg(long, allow_hyphen_values = true)]
    pub now: Option<String>,
    /// Same as the `granularity` key.
    #[arg(long, allow_hyphen_values = true)]
    pub granularity: Option<String>,
    /// Same as the `from_date` key.
    #[arg(long, allow_hyphen_values = true)]
    pub from_date: Option<String>,
    /// Same as the `to_date` key.
    #[arg(long, allow_hyphen_values = true)]
    pub to_date: Option<String>,
    /// Same as the `product` key; repeatable.
    #[arg(long, allow_hyphen_values = true)]
    pub product: Vec<String>,
    /// Same as the `subaccount_auth` key.
    #[arg(long, allow_hyphen_values = true)]
    pub subaccount_auth: Option<String>,
    /// Same as the `error_code` key.
    #[arg(long, allow_hyphen_values = true)]
    pub error_code: Option<String>,
    /// Same as the `hangup_cause` key.
    #[arg(long, allow_hyphen_values = true)]
    pub hangup_cause: Option<String>,
    /// Same as the `direction` key.
    #[arg(long, allow_hyphen_values = true)]
    pub direction: Option<String>,
    /// Same as the `country` key.
    #[arg(long, allow_hyphen_values = true)]
    pub country: Option<String>,
    /// Same as the `page_size` key.
    #[arg(long, allow_hyphen_values = true)]
    pub page_size: Option<String>,
    /// Same as the `page_token` key.
    #[arg(long, allow_hyphen_values = true)]
    pub page_token: Option<String>,
    /// Same as the `timezone` key (IANA name).
    #[arg(long, allow_hyphen_values = true)]
    pub timezone: Option<String>,
    /// Write every page, one JSON document per line.
    #[arg(long)]
    pub all_pages: bool,
    /// Indent the JSON.
    #[arg(long)]
    pub pretty: bool,
    /// How to print the page: json (the API payload), table (aligned, with
    /// totals per unit kind, for a terminal) or csv (the usage rows, the
    /// API's field names as header, for a spreadsheet).
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
    /// Write to FILE instead of stdout; the file appears whole or not at
    /// all (written beside it, then renamed). On a bad request the body
    /// still goes to stdout and FILE is left as it was.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `--format` of `summary`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The API's JSON payload, one document per page (one line unless --pretty).
    Json,
    /// An aligned table with totals per unit kind and the currency.
    Table,
    /// The usage rows as CSV (RFC 4180), one header even with --all-pages.
    Csv,
}

impl Args {
    /// The query's pairs followed by the flags', as one list.
    pub fn pairs(&self) -> Result<Vec<(String, String)>, BadRequest> {
        let mut pairs = crate::query::decode_query(&self.query)?;
        let flags = [
            ("granularity", &self.granularity),
            ("from_date", &self.from_date),
            ("to_date", &self.to_date),
            ("subaccount_auth", &self.subaccount_auth),
            ("error_code", &self.error_code),
            ("hangup_cause", &self.hangup_cause),
            ("direction", &self.direction),
            ("country", &self.country),
            ("page_size", &self.page_size),
            ("page_token", &self.page_token),
            ("timezone", &self.timezone),
        ];
        for (key, value) in flags {
            if let Some(value) = value {
                pairs.push((key.to_owned(), value.clone()));
            }
        }
        pairs.extend(self.product.iter().map(|p| ("product".to_owned(), p.clone())));
        Ok(pairs)
    }
}

/// Runs `summary`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // A misuse of the flags is said before any data is read.
    if args.pretty && args.format != Format::Json {
        let name = clap::ValueEnum::to_possible_value(&args.format).map(|v| v.get_name().to_owned());
        let name = name.unwrap_or_default();
        return Ok(super::usage_error(&format!("--pretty indents JSON; it does not apply to --format {name}")));
    }
    let pairs = match args.pairs() {
        Ok(pairs) => pairs,
        Err(bad) => return bad_request(&args, &bad),
    };
    if args.all_pages && pairs.iter().any(|(key, value)| key == "page_token" && !value.is_empty()) {
        return Ok(super::usage_error(
            "--all-pages writes every page from the first; it takes no page token (--page-token, or page_token \
             in --query)",
        ));
    }
    let now = match super::request_now(args.now.as_deref()) {
        Ok(now) => now,
        Err(bad) => return bad_request(&args, &bad),
    };
    let params = match UsageParams::from_pairs(pairs.clone()) {
        Ok(params) => params,
        Err(bad) => return bad_request(&args, &bad),
    };
    super::warn_all(&crate::query::dropped_keys(pairs.iter().map(|(key, _)| key.as_str())));
    let dataset = args.source.open(super::warn)?;
    let key = args.source.token_key()?;
    let request = match summary::resolve(&dataset, &args.auth_id, params, now, &key) {
        Ok(request) => request,
        Err(bad) => return bad_request(&args, &bad),
    };
    let summary = summary::build(&dataset, &request)?;
    super::warn_all(&summary::notices(&dataset, &summary)?);
    let mut out = Output::open(args.output.as_deref())?;
    if let Err(bad) = write_pages(&args, &summary, &key, &mut out)? {
        return bad_request(&args, &bad);
    }
    out.finish()?;
    Ok(ExitCode::SUCCESS)
}

/// Where the output goes: stdout, or the file of `-o`.
enum Output {
    Stdout(std::io::BufWriter<std::io::StdoutLock<'static>>),
    File(crate::durable::AtomicFile),
}

impl Output {
    fn open(path: Option<&std::path::Path>) -> anyhow::Result<Output> {
        Ok(match path {
            None => Output::Stdout(std::io::BufWriter::new(std::io::stdout().lock())),
            Some(path) => Output::File(crate::durable::AtomicFile::create(path)?),
        })
    }

    /// The name of the output in messages.
    fn name(&self) -> PathBuf {
        match self {
            Output::Stdout(_) => PathBuf::from("<stdout>"),
            Output::File(file) => file.path().to_owned(),
        }
    }

    /// Flushes stdout, or puts the file in place.
    fn finish(self) -> anyhow::Result<()> {
        match self {
            Output::Stdout(mut out) => Ok(out.flush()?),
            Output::File(file) => Ok(file.commit()?),
        }
    }
}

impl Write for Output {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        match self {
            Output::Stdout(out) => out.write(bytes),
            Output::File(file) => file.write(bytes),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Output::Stdout(out) => out.flush(),
            Output::File(file) => file.flush(),
        }
    }
}

/// Pages of `--all-pages` made and written as JSON at once, on the threads.
const PAGES_AT_ONCE: usize = 64;

/// Writes the requested page, or every page, in `--format`. A page that
/// cannot be cut (a stale token) is the request's 400, returned as such.
fn write_pages(
    args: &Args,
    summary: &summary::Summary,
    key: &crate::token::TokenKey,
    out: &mut Output,
) -> anyhow::Result<Result<(), BadRequest>> {
    // A page (or, as JSON, two runs of pages) at a time: --all-pages never
    // holds every page (but the table, whose columns are as wide as their
    // widest cell, holds its cells).
    let pages: Box<dyn Iterator<Item = Result<summary::wire::Page<'_>, BadRequest>> + '_> = if args.all_pages {
        Box::new(summary.pages(key))
    } else {
        Box::new(std::iter::once(summary.requested_page(key)))
    };
    match args.format {
        Format::Json if args.all_pages => {
            // Pages do not depend on each other: a run of them is made and
            // written as JSON on the threads while the run before is
            // written out here, in order (the same bytes as one at a time;
            // a run is a few MB).
            let make = |run: &[u64]| -> Vec<PageText> {
                run.par_iter().map(|&offset| page_text(summary.page(offset, key), args.pretty)).collect()
            };
            let offsets: Vec<u64> = summary.page_offsets().collect();
            let mut runs = offsets.chunks(PAGES_AT_ONCE);
            let mut ready = runs.next().map(make).unwrap_or_default();
            while !ready.is_empty() {
                let mut next = Vec::new();
                let written = rayon::in_place_scope(|scope| {
                    if let Some(run) = runs.next() {
                        scope.spawn(|_| next = make(run));
                    }
                    write_texts(out, std::mem::take(&mut ready))
                });
                if let Err(bad) = written? {
                    return Ok(Err(bad));
                }
                ready = next;
            }
        }
        Format::Json => {
            if let Err(bad) = write_texts(out, pages.map(|page| page_text(page, args.pretty)).collect())? {
                return Ok(Err(bad));
            }
        }
        Format::Table => {
            let mut table = summary::render::Table::new();
            for page in pages {
                match page {
                    Ok(page) => table.add(&page)?,
                    Err(bad) => return Ok(Err(bad)),
                }
            }
            let width = match out {
                Output::Stdout(_) => table_width(),
                Output::File(_) => None,
            };
            out.write_all(table.render_within(width)?.as_bytes())?;
        }
        Format::Csv => {
            let name = out.name();
            let account =
                crate::report::csv_out::Account { auth_id: &summary.request.auth_id, currency: &summary.currency };
            let mut csv = crate::report::csv_out::UsageCsv::new(&mut *out, name, account)?;
            for page in pages {
                let page = match page {
                    Ok(page) => page,
                    Err(bad) => return Ok(Err(bad)),
                };
                for item in &page.usage {
                    csv.row(item)?;
                }
                note_charges_left_out(&page);
            }
            csv.finish()?;
        }
    }
    Ok(Ok(()))
}

/// A page as JSON, or the 400 of a page that could not be cut.
type PageText = crate::error::Result<Result<String, BadRequest>>;

/// `page` as JSON (indented with `pretty`).
fn page_text(page: Result<summary::wire::Page<'_>, BadRequest>, pretty: bool) -> PageText {
    match page {
        Ok(page) => summary::to_json(&page, pretty).map(Ok),
        Err(bad) => Ok(Err(bad)),
    }
}

/// Writes pages made as JSON ([`page_text`]), one a line, up to the first
/// that could not be made: its 400.
fn write_texts(out: &mut Output, texts: Vec<PageText>) -> anyhow::Result<Result<(), BadRequest>> {
    for text in texts {
        match text? {
            Ok(text) => super::write_line(out, &text)?,
            Err(bad) => return Ok(Err(bad)),
        }
    }
    Ok(Ok(()))
}

/// `--format csv` holds the usage rows only: other charges returned with
/// the page are said on stderr, not dropped silently.
fn note_charges_left_out(page: &summary::wire::Page<'_>) {
    let Some(charges) = page.other_charges.as_deref().filter(|c| !c.is_empty()) else { return };
    let total = charges.iter().try_fold(crate::money::Amount::ZERO, |sum, c| sum.checked_add(c.total_amount.0));
    let total = total.map(|t| format!(" ({t} {})", page.meta.currency)).unwrap_or_default();
    super::warn(&format!(
        "{} other charges{total} are not in the CSV, which holds the usage rows; --format table or json shows them",
        charges.len()
    ));
}

/// Writes the API's 400 body on stdout and the message on stderr; exit 2.
fn bad_request(args: &Args, bad: &BadRequest) -> anyhow::Result<ExitCode> {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(args.auth_id.as_bytes());
    match args.pairs() {
        Ok(pairs) => pairs.iter().for_each(|(key, value)| hash.update(format!("{key}={value}&").as_bytes())),
        Err(_) => hash.update(args.query.as_bytes()),
    }
    hash.update(bad.message.as_bytes());
    let api_id = summary::uuid_text(&hash.finalize());
    let body = ErrorBody { api_id: &api_id, error: &bad.message };
    let mut out = std::io::stdout().lock();
    super::write_line(&mut out, &summary::to_json(&body, args.pretty)?)?;
    out.flush()?;
    eprintln!("error: {}", bad.message);
    Ok(ExitCode::from(2))
}

/// The width a table on stdout is fitted to: `COLUMNS` when set, else the
/// terminal's when stdout is one; none for a pipe.
#[allow(unsafe_code)]
fn table_width() -> Option<usize> {
    use std::io::IsTerminal;
    if let Some(columns) = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()) {
        return Some(columns);
    }
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let mut size = libc::winsize { ws_row: 0, ws_col: 0, ws_xpixel: 0, ws_ypixel: 0 };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which
    // points at a live, writable `winsize`; fd 1 is open (stdout).
    let ok = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// An account id as the API path would carry it: an id of the records
/// contract (non-empty, at most 128 bytes, no control character).
fn parse_auth_id(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("an account id is not empty".to_owned());
    }
    crate::records::check_id(text).map_err(|why| format!("an account id {why}"))?;
    Ok(text.to_owned())
}
