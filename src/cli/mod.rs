//! The command line: one module per subcommand, each with its arguments and
//! `run`. Only this layer prints, reads the clock or the environment, and
//! uses `anyhow`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

pub mod generate;
pub mod ingest;
pub mod loadtest;
pub mod report;
pub mod serve;
pub mod spark_task;
pub mod summary;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};

use crate::dataset::Dataset;
use crate::token::TokenKey;

/// telemeter: usage aggregation and Usage Summary reports.
#[derive(Debug, Parser)]
#[command(name = "telemeter", version, about)]
pub struct Cli {
    /// Worker threads (default: one per core).
    #[arg(long, global = true, env = "TELEMETER_THREADS")]
    pub threads: Option<usize>,
    /// The subcommand.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
// Parsed once per process: the size of the largest argument struct does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the Usage Summary of one account, as the API returns it.
    Summary(summary::Args),
    /// Serve the HTTP API (usage summary, endpoints, recordings).
    Serve(serve::Args),
    /// Load-test a running server on loopback (bounded; see docs/server.md).
    #[command(hide = true)]
    Loadtest(loadtest::Args),
    /// Check and deduplicate a data directory into a store (rollups and records).
    Ingest(ingest::Args),
    /// Write every account's report (JSON pages, CSV, HTML) to a folder.
    Report(report::Args),
    /// Write a synthetic data set (records.md) for benchmarks and demos.
    Generate(generate::Args),
    /// One Spark task of `ingest --engine spark`: check one input file
    /// (run by the Spark job, not by hand).
    #[command(hide = true)]
    SparkTask(spark_task::Args),
}

/// Runs the command line; the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(threads) = cli.threads {
        if let Err(e) = rayon::ThreadPoolBuilder::new().num_threads(threads.max(1)).build_global() {
            eprintln!("error: cannot start {threads} threads: {e}");
            return ExitCode::from(1);
        }
    }
    let outcome = match cli.command {
        Command::Summary(args) => summary::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Loadtest(args) => loadtest::run(args),
        Command::Ingest(args) => ingest::run(args),
        Command::Report(args) => report::run(args),
        Command::Generate(args) => generate::run(args),
        Command::SparkTask(args) => spark_task::run(args),
    };
    match outcome {
        Ok(code) => code,
        Err(error) if is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(1)
        }
    }
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .any(|e| e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}

/// Opens `--store STORE` or `--data DIR`, whichever was given.
pub fn open_dataset(data: Option<&std::path::Path>, store: Option<&std::path::Path>) -> anyhow::Result<Dataset> {
    use anyhow::Context;
    match (data, store) {
        (_, Some(store)) => {
            let dataset = Dataset::open_store(store).context("cannot open the store")?;
            if let Some(why) = dataset.store().and_then(|s| s.unleased.as_deref()) {
                eprintln!("warning: reading the store without a read lease (it cannot be written: {why}); an ingest publishing twice meanwhile may remove its files");
            }
            Ok(dataset)
        }
        (Some(data), None) => Dataset::open(data).context("cannot open the data set"),
        (None, None) => anyhow::bail!("give --data DIR or --store STORE"),
    }
}

/// Parses `--now`: an RFC 3339 instant.
pub fn parse_now(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| format!("'{text}' is not an RFC 3339 instant (e.g. 2026-11-21T00:00:00Z): {e}"))
}

/// `--now` of a request (`summary`, `report`): the clock when not given; a
/// bad value is a bad request like any other (exit 2 with the API's body).
pub fn request_now(given: Option<&str>) -> Result<DateTime<Utc>, crate::error::BadRequest> {
    match given {
        None => Ok(Utc::now()),
        Some(text) => DateTime::parse_from_rfc3339(text).map(|t| t.with_timezone(&Utc)).map_err(|_| {
            crate::error::BadRequest::new(
                "now",
                format!("invalid now '{text}': expected an RFC 3339 instant, e.g. 2026-11-21T00:00:00Z"),
            )
        }),
    }
}

/// The page-token key of a command: `TELEMETER_TOKEN_KEY` when set; else
/// the store's own key (`STORE/token.key`, made by `ingest`) for a command
/// on a store; else the key of the state directory (`token.key` there) for
/// a command on a raw data directory. A missing key file is created with a
/// random key, readable by its owner only. There is no built-in key: one
/// that is public would let anyone forge tokens.
pub fn token_key(store: Option<&Path>) -> anyhow::Result<TokenKey> {
    use anyhow::Context;
    if let Ok(secret) = std::env::var("TELEMETER_TOKEN_KEY") {
        if !secret.is_empty() {
            return Ok(TokenKey::from_secret(&secret));
        }
    }
    let path = match store {
        Some(store) => store.join(crate::store::TOKEN_KEY),
        None => state_dir()?.join(crate::store::TOKEN_KEY),
    };
    TokenKey::load_or_create(&path)
        .with_context(|| format!("no page-token key in {} (set TELEMETER_TOKEN_KEY to give one)", path.display()))
}

/// The state directory: `$TELEMETER_STATE_DIR`, else
/// `$XDG_STATE_HOME/telemeter`, else `~/.local/state/telemeter`.
pub fn state_dir() -> anyhow::Result<PathBuf> {
    match (std::env::var_os("TELEMETER_STATE_DIR"), std::env::var_os("XDG_STATE_HOME"), std::env::var_os("HOME")) {
        (Some(dir), _, _) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        (_, Some(xdg), _) if !xdg.is_empty() => Ok(PathBuf::from(xdg).join("telemeter")),
        (_, _, Some(home)) if !home.is_empty() => Ok(PathBuf::from(home).join(".local/state/telemeter")),
        _ => anyhow::bail!("no state directory: set TELEMETER_STATE_DIR (or TELEMETER_TOKEN_KEY)"),
    }
}

/// Writes `text` and a newline to stdout.
pub fn write_line(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")
}
