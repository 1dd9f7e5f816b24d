//! The command line: one module per subcommand, each with its arguments and
//! `run`. Only this layer prints, reads the clock or the environment, and
//! uses `anyhow`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

pub mod generate;
pub mod ingest;
pub mod loadtest;
pub mod report;
pub mod serve;
pub mod summary;

use std::io::Write;
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
            if let Some(why) = dataset.store.as_ref().and_then(|s| s.unleased.as_deref()) {
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

/// The page-token key: `TELEMETER_TOKEN_KEY` when set, else the built-in one.
pub fn token_key() -> TokenKey {
    match std::env::var("TELEMETER_TOKEN_KEY") {
        Ok(secret) if !secret.is_empty() => TokenKey::from_secret(&secret),
        _ => TokenKey::default(),
    }
}

/// Writes `text` and a newline to stdout.
pub fn write_line(out: &mut impl Write, text: &str) -> std::io::Result<()> {
    out.write_all(text.as_bytes())?;
    out.write_all(b"\n")
}
