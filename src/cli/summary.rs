//! `telemeter summary`: one account's Usage Summary, one page (or all).

use std::io::Write;
use std::process::ExitCode;

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
    #[arg(long)]
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
}

impl Args {
    /// The query's pairs followed by the flags', as one list.
    pub fn pairs(&self) -> Vec<(String, String)> {
        let query = self.query.strip_prefix('?').unwrap_or(&self.query);
        let mut pairs: Vec<(String, String)> =
            form_urlencoded::parse(query.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
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
        pairs
    }
}

/// Runs `summary`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let now = match super::request_now(args.now.as_deref()) {
        Ok(now) => now,
        Err(bad) => return bad_request(&args, &bad),
    };
    let params = match UsageParams::from_pairs(args.pairs()) {
        Ok(params) => params,
        Err(bad) => return bad_request(&args, &bad),
    };
    let dataset = args.source.open(super::warn)?;
    let key = args.source.token_key()?;
    let request = match summary::resolve(&dataset, &args.auth_id, params, now, &key) {
        Ok(request) => request,
        Err(bad) => return bad_request(&args, &bad),
    };
    let summary = summary::build(&dataset, &request)?;
    if let Some(data) = &args.source.data {
        // Files in record folders that no reader takes are not data: say so.
        for name in crate::records::files::Inventory::scan(data)?.ignored {
            eprintln!("warning: {name}: not a record file (.csv, .csv.gz, .csv.zst, .parquet); skipped");
        }
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    if args.all_pages {
        for page in summary.pages(&key) {
            let page = match page {
                Ok(page) => page,
                Err(bad) => return bad_request(&args, &bad),
            };
            super::write_line(&mut out, &summary::to_json(&page, args.pretty)?)?;
        }
    } else {
        let page = match summary.requested_page(&key) {
            Ok(page) => page,
            Err(bad) => return bad_request(&args, &bad),
        };
        super::write_line(&mut out, &summary::to_json(&page, args.pretty)?)?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Writes the API's 400 body on stdout and the message on stderr; exit 2.
fn bad_request(args: &Args, bad: &BadRequest) -> anyhow::Result<ExitCode> {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(args.auth_id.as_bytes());
    for (key, value) in args.pairs() {
        hash.update(format!("{key}={value}&").as_bytes());
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
