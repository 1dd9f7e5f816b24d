//! `telemeter serve`: the HTTP API on a socket, until SIGTERM or ctrl-c.
//!
//! With `--store STORE` the usage summary reads the store's rollups and the
//! resources are those of the store's generation (written by `ingest`),
//! with deletions in `STORE/deletions.sqlite`. With `--data DIR` the usage
//! summary reads the raw files and the resources are loaded from DIR into
//! `--db` (default: a file under the state directory, never inside DIR) at
//! startup. Not both: a store gets a data directory's resources by
//! `ingest`, published with a generation.
//!
//! Page tokens are sealed with `TELEMETER_TOKEN_KEY` when set, else with
//! the store's `token.key` (`--store`) or the state directory's (`--data`):
//! never with a key that is public.
//!
//! With `--store`, the server follows the store: every `--reload-interval`
//! it looks at the manifest and answers from a newly published generation
//! (`server::follow`). Connections are held to `--header-read-timeout`,
//! `--idle-timeout` and `--max-connections` (`server::listen`).
// The doc comments of the arguments are `--help` text, shown as written
// (`<ingest>`, `local[*]`), not Markdown.
#![allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use chrono::{DateTime, Utc};

use crate::dataset::Source;
use crate::resources::{self, ResourceDb};
use crate::server::listen::Limits;
use crate::server::rate::{RateLimiter, SystemClock};
use crate::server::{self, Current, Generation, Server, DEFAULT_SIP_DOMAIN, RATE_DB, RATE_LIMIT, RATE_WINDOW};

/// Arguments of `serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// `--store` (rollups and resources) or `--data` (small data sets).
    #[command(flatten)]
    pub source: super::SourceArgs,
    /// With --data, whose records are read per request: the SQLite file its
    /// resources are loaded into at startup (default:
    /// $TELEMETER_STATE_DIR, else $XDG_STATE_HOME/telemeter, else
    /// ~/.local/state/telemeter, then resources-<hash of DIR>.sqlite).
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Address to listen on (port 0 picks a free port; the log says which).
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// Domain of the endpoints' `sip_uri`.
    #[arg(long, default_value = DEFAULT_SIP_DOMAIN)]
    pub sip_domain: String,
    /// Take the client address from this header (right-most entry), e.g.
    /// X-Forwarded-For; only behind a proxy that sets it.
    #[arg(long)]
    pub trust_proxy_header: Option<String>,
    /// A fixed "now", RFC 3339 (tests); default: the clock.
    #[arg(long, value_parser = super::parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// With --store: seconds between looks at the store's manifest; a new
    /// generation is answered from within about this long after it is
    /// published. 0: never reload (answer from the generation of startup).
    #[arg(long, value_name = "SECONDS", default_value = "1", value_parser = parse_seconds)]
    pub reload_interval: Duration,
    /// Seconds from the first byte of a request head to its end, and from
    /// its end to the end of its body; a slower one closes the connection.
    #[arg(long, value_name = "SECONDS", default_value = "10", value_parser = parse_positive_seconds)]
    pub header_read_timeout: Duration,
    /// Seconds a connection may stay open without a request in flight (after
    /// the accept or a response, before the next request begins).
    #[arg(long, value_name = "SECONDS", default_value = "30", value_parser = parse_positive_seconds)]
    pub idle_timeout: Duration,
    /// Open connections at most; a new one over it closes the connection idle
    /// longest, or waits in the listen backlog while every one is busy.
    #[arg(long, default_value_t = Limits::MAX_CONNECTIONS as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_connections: u64,
    /// Usage summary requests per account in any 60 seconds; more are
    /// answered 429. The default is the API's.
    #[arg(long, value_name = "REQUESTS", default_value_t = RATE_LIMIT as u64, value_parser = clap::value_parser!(u64).range(1..))]
    pub rate_limit: u64,
}

/// Parses a number of seconds (decimals allowed), 0 or more.
fn parse_seconds(text: &str) -> Result<Duration, String> {
    let seconds: f64 = text.parse().map_err(|_| format!("'{text}' is not a number of seconds"))?;
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("'{text}' is not a number of seconds, 0 or more"))
}

/// Parses a number of seconds over 0.
fn parse_positive_seconds(text: &str) -> Result<Duration, String> {
    match parse_seconds(text)? {
        seconds if seconds.is_zero() => Err(format!("'{text}': the timeout must be over 0 seconds")),
        seconds => Ok(seconds),
    }
}

/// Runs `serve`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(name) = &args.trust_proxy_header {
        if axum::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
            bail!("--trust-proxy-header '{name}' is not an HTTP header name");
        }
    }
    let dataset = args.source.open(|warning| {
        if !super::quiet() {
            log(&serde_json::json!({"event": "warning", "message": warning}))
        }
    })?;
    let resources = match &dataset.source {
        Source::Store(store) => ResourceDb::open_for_store(store).context("cannot open the store's resources")?,
        Source::Raw(dir) => load_resources(dir, args.db.as_deref())?,
    };
    if !resources.writable() {
        let message = "the store cannot be written: its deletions are read-only, and a DELETE is answered 503";
        log(&serde_json::json!({"event": "warning", "message": message}));
    }
    let token_key = args.source.token_key()?;
    let generation = Generation::new(dataset, Arc::new(resources));
    if generation.credentials.n_with_tokens() == 0 {
        log(
            &serde_json::json!({"event": "warning", "message": "no account has an auth_token_sha256: every request will be refused with 401 (give one a token: printf '%s\\n' TOKEN | telemeter accounts set-token ACCOUNT --store STORE, or --data DIR)"}),
        );
    }
    let limits = Limits {
        header_read_timeout: args.header_read_timeout,
        idle_timeout: args.idle_timeout,
        max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
    };
    // The rate limit's log, shared with the other servers of the store (or
    // data folder) beside its deletions; this process's own when it cannot
    // be written there.
    let rate_limit = usize::try_from(args.rate_limit).unwrap_or(usize::MAX);
    let clock = Arc::new(SystemClock::default());
    let rate_log = generation.resources.deletions_path().with_file_name(RATE_DB);
    let rate = match RateLimiter::shared(rate_limit, RATE_WINDOW, clock.clone(), &rate_log) {
        Ok(shared) => shared,
        Err(e) => {
            let message = format!("{}: the rate limit holds for this server alone", e.chain());
            log(&serde_json::json!({"event": "warning", "message": message}));
            RateLimiter::new(rate_limit, RATE_WINDOW, clock)
        }
    };
    let server = Arc::new(Server {
        current: Current::new(generation),
        rate,
        token_key,
        sip_domain: args.sip_domain,
        trust_proxy_header: args.trust_proxy_header,
        fixed_now: args.now,
        body_read_timeout: args.header_read_timeout,
        log: Arc::new(|line: &str| eprintln!("{line}")),
    });
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start tokio")?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        let addr = listener.local_addr()?;
        if let (Some(store), false) = (&args.source.store, args.reload_interval.is_zero()) {
            tokio::spawn(server::follow::follow(server.clone(), store.clone(), args.reload_interval));
        }
        log(&serde_json::json!({"event": "listening", "addr": addr.to_string()}));
        server::listen::serve(listener, server, limits, shutdown_signal()).await.context("server failed")?;
        log(&serde_json::json!({"event": "stopped"}));
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// The resources of the data directory `data`, loaded into `db` (default:
/// [`default_db`]).
fn load_resources(data: &Path, db: Option<&Path>) -> anyhow::Result<ResourceDb> {
    let db = match db {
        Some(db) => db.to_owned(),
        None => default_db(data)?,
    };
    let stats = resources::load(data, &db).context("cannot load endpoints, registrations and recordings")?;
    log(&serde_json::json!({
        "event": "loaded", "db": db.display().to_string(), "endpoints": stats.endpoints,
        "registrations": stats.registrations, "recordings": stats.recordings,
        "deleted_skipped": stats.deleted_skipped,
    }));
    ResourceDb::open(&db).with_context(|| format!("cannot open {}", db.display()))
}

fn log(value: &serde_json::Value) {
    eprintln!("{value}");
}

/// Waits for ctrl-c or SIGTERM; in-flight requests then finish.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
    log(&serde_json::json!({"event": "shutting down"}));
}

/// The default database of `--data DIR`: one file per data directory under
/// the state directory.
fn default_db(data: &Path) -> anyhow::Result<PathBuf> {
    use sha2::Digest;
    let state = super::state_dir().context("give --db PATH")?;
    let canonical = data.canonicalize().with_context(|| format!("cannot resolve {}", data.display()))?;
    let hash = sha2::Sha256::digest(canonical.to_string_lossy().as_bytes());
    let name: String = hash[..8].iter().map(|b| format!("{b:02x}")).collect();
    Ok(state.join(format!("resources-{name}.sqlite")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    #[test]
    fn the_flags_default_to_the_library_limits_and_take_decimal_seconds() {
        let cli = Cli::try_parse_from(["serve", "--data", "d"]).unwrap();
        let limits = Limits::default();
        assert_eq!(cli.args.header_read_timeout, limits.header_read_timeout);
        assert_eq!(cli.args.idle_timeout, limits.idle_timeout);
        assert_eq!(cli.args.max_connections, limits.max_connections as u64);
        assert_eq!(cli.args.reload_interval, Duration::from_secs(1));
        assert_eq!(parse_seconds("0.25"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_seconds("0"), Ok(Duration::ZERO));
        for bad in ["-1", "NaN", "inf", "soon"] {
            assert!(parse_seconds(bad).is_err(), "{bad}");
        }
        assert!(parse_positive_seconds("0").is_err());
        assert!(Cli::try_parse_from(["serve", "--data", "d", "--max-connections", "0"]).is_err());
        assert!(Cli::try_parse_from(["serve", "--data", "d", "--store", "s"]).is_err(), "one source");
    }
}
