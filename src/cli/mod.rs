//! The command line: one module per subcommand, each with its arguments and
//! `run`. Only this layer prints, reads the clock or the environment, and
//! uses `anyhow`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

pub mod accounts;
pub mod changes;
pub mod completions;
pub mod generate;
pub mod help;
pub mod history;
pub mod ingest;
pub mod loadtest;
pub mod memory;
pub mod progress;
pub mod report;
pub mod serve;
pub mod spark_task;
pub mod store;
pub mod summary;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::{DateTime, Utc};
use clap::{Parser, Subcommand};

use crate::aggregate::OnBadRow;
use crate::dataset::Dataset;
use crate::store::location;
use crate::token::TokenKey;

/// telemeter: usage aggregation and Usage Summary reports.
#[derive(Debug, Parser)]
#[command(name = "telemeter", version, about, after_help = help::top())]
pub struct Cli {
    /// Worker threads (default, or 0: one per core).
    #[arg(long, global = true, env = "TELEMETER_THREADS")]
    pub threads: Option<usize>,
    /// Print nothing but errors: no warnings, no progress.
    #[arg(long, short, global = true)]
    pub quiet: bool,
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
    #[command(after_help = help::after("summary"))]
    Summary(summary::Args),
    /// Serve the HTTP API (usage summary, endpoints, recordings).
    #[command(after_help = help::after("serve"))]
    Serve(serve::Args),
    /// Load-test a running server on loopback (bounded; a developer's tool).
    #[command(hide = true)]
    Loadtest(loadtest::Args),
    /// Check and deduplicate a data directory into a store (rollups and records).
    #[command(after_help = help::after("ingest"))]
    Ingest(ingest::Args),
    /// Write every account's report (JSON pages, CSV, HTML) to a folder.
    #[command(after_help = help::after("report"))]
    Report(report::Args),
    /// Write a synthetic data folder (the layout of `telemeter --help`) for
    /// benchmarks and demos.
    #[command(after_help = help::after("generate"))]
    Generate(generate::Args),
    /// List the accounts, or set an account's API token.
    #[command(after_help = help::after("accounts"))]
    Accounts(accounts::Args),
    /// Check a store's files against their checksums, or repair its manifest.
    #[command(after_help = help::after("store"))]
    Store(store::Args),
    /// Show the stored versions of one record: where each came from, and
    /// which one counts.
    #[command(after_help = help::after("history"))]
    History(history::Args),
    /// Show what moved in each account's months since a generation or a
    /// report: records added, restated, withdrawn, and the exact deltas.
    #[command(after_help = help::after("changes"))]
    Changes(changes::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_help = help::after("completions"))]
    Completions(completions::Args),
    /// Print the man page, or write every page to a folder.
    #[command(after_help = help::after("man"))]
    Man(completions::ManArgs),
    /// One Spark task of `ingest --engine spark`: check one input file
    /// (run by the Spark job, not by hand).
    #[command(hide = true)]
    SparkTask(spark_task::Args),
}

/// Ignores SIGXFSZ: a write past the file-size limit (`ulimit -f`) then
/// fails with EFBIG, an error naming its file, where the signal would
/// have ended the process without a word (and without removing what the
/// run wrote).
#[allow(unsafe_code)]
fn ignore_file_size_limit_signal() {
    // SAFETY: sets the disposition of one signal to SIG_IGN before any
    // thread starts; no handler runs, so nothing is shared with one.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Runs the command line; the process exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    QUIET.store(cli.quiet, std::sync::atomic::Ordering::Relaxed);
    // A panic of polars' decoders on a damaged Parquet file is caught and
    // reported as that file's error (crate::parquet): not printed twice.
    crate::parquet::quiet_caught_panics();
    // A thread refused its signal stack is out of memory, said as such.
    memory::report_thread_start_failures();
    ignore_file_size_limit_signal();
    // The allocator's setup, before any thread starts (cli::memory).
    match &cli.command {
        Command::Summary(args) if args.source.store.is_some() => memory::for_one_answer(),
        // Either engine: the Spark engine's publish, and its tasks, fold and
        // write a batch at a time as the local ingest does.
        Command::Ingest(_) | Command::SparkTask(_) => memory::for_ingest(),
        _ => {}
    }
    // The worker threads start here, so that a process that cannot start
    // them (a small `ulimit -v` or `ulimit -u`) says so instead of
    // panicking at its first parallel step.
    // (0, as rayon takes it: one per core.)
    let pool = rayon::ThreadPoolBuilder::new().num_threads(cli.threads.unwrap_or(0));
    if let Err(e) = pool.build_global() {
        let threads = cli.threads.filter(|n| *n > 0).map_or("the worker".to_owned(), |threads| threads.to_string());
        eprintln!("error: cannot start {threads} threads: {e}; raise the process's memory or process limit (ulimit -v, ulimit -u)");
        return ExitCode::from(1);
    }
    let outcome = match cli.command {
        Command::Summary(args) => summary::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Loadtest(args) => loadtest::run(args),
        Command::Ingest(args) => ingest::run(args),
        Command::Report(args) => report::run(args),
        Command::Generate(args) => generate::run(args),
        Command::Accounts(args) => accounts::run(args),
        Command::Store(args) => store::run(args),
        Command::History(args) => history::run(args),
        Command::Changes(args) => changes::run(args),
        Command::Completions(args) => completions::run(args),
        Command::Man(args) => completions::run_man(args),
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

/// Where a command reads usage from: `--data DIR` or `--store STORE`, one
/// of the two (`summary`, `report` and `serve` flatten it into their
/// arguments).
#[derive(Debug, clap::Args)]
#[group(id = "source", required = true, multiple = false)]
pub struct SourceArgs {
    /// The data directory: accounts.csv and the record folders calls/,
    /// messages/, transcriptions/, charges/ (layout: `telemeter --help`): a path
    /// or a file:// URI.
    #[arg(long, value_parser = LocalPath(location::local_data))]
    pub data: Option<PathBuf>,
    /// A store written by `telemeter ingest`, in place of --data: a path or
    /// a file:// URI.
    #[arg(long, value_parser = LocalPath(location::store_path))]
    pub store: Option<PathBuf>,
}

/// A `--data` or `--store` value read on this machine: a path, or a
/// `file://` URI turned into its path (`store::location`); any other URI
/// is refused with the reason and what to do instead.
#[derive(Clone)]
struct LocalPath(fn(&std::ffi::OsStr) -> crate::error::Result<PathBuf>);

impl clap::builder::TypedValueParser for LocalPath {
    type Value = PathBuf;

    fn parse_ref(
        &self,
        command: &clap::Command,
        _arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<PathBuf, clap::Error> {
        (self.0)(value)
            .map_err(|e| clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n")).with_cmd(command))
    }
}

impl SourceArgs {
    /// Opens the store or the data directory. What is surprising about it
    /// goes to `warn` (each command shows it its own way): a store that
    /// cannot be written is read without a read lease; a data directory
    /// with no record folder, or files and folders nothing reads.
    pub fn open(&self, mut warn: impl FnMut(&str)) -> anyhow::Result<Dataset> {
        use anyhow::Context;
        match (&self.data, &self.store) {
            (_, Some(store)) => {
                let dataset = Dataset::open_store(store).context("cannot open the store")?;
                if let Some(why) = dataset.store().and_then(|s| s.unleased.as_deref()) {
                    warn(&format!(
                        "reading the store without a read lease (it cannot be written: {why}); \
                         an ingest publishing twice meanwhile may remove its files"
                    ));
                }
                Ok(dataset)
            }
            (Some(data), None) => {
                let dataset = Dataset::open(data).context("cannot open the data set")?;
                for notice in dataset.notices()? {
                    warn(&notice.to_string());
                }
                Ok(dataset)
            }
            (None, None) => anyhow::bail!("give --data DIR or --store STORE"),
        }
    }

    /// The page-token key of the source ([`token_key`]).
    pub fn token_key(&self) -> anyhow::Result<TokenKey> {
        token_key(self.store.as_deref())
    }
}

/// `--on-bad-row`: what a command does with a row that breaks the records
/// contract (each command's flag says where its rejected file is).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BadRowArg {
    /// Stop at the first bad row, naming file, line and column.
    Fail,
    /// Write it to the command's rejected file, counted, and go on.
    SetAside,
}

impl From<BadRowArg> for OnBadRow {
    fn from(arg: BadRowArg) -> OnBadRow {
        match arg {
            BadRowArg::Fail => OnBadRow::Fail,
            BadRowArg::SetAside => OnBadRow::SetAside,
        }
    }
}

/// Whether `--quiet` was given (set once, by [`main`]).
static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether `--quiet` was given: no warnings, no progress, only errors.
pub fn quiet() -> bool {
    QUIET.load(std::sync::atomic::Ordering::Relaxed)
}

/// A misuse of the command line found after parsing (options that
/// conflict through their values): said on stderr, nothing on stdout, exit
/// code 2 as for the errors clap finds.
pub fn usage_error(text: &str) -> ExitCode {
    eprintln!("error: {text}");
    ExitCode::from(2)
}

/// Prints a warning on stderr (`warning: ...`), unless `--quiet`: what is
/// surprising about a run, never a change to its output.
pub fn warn(text: &str) {
    if !quiet() {
        eprintln!("warning: {text}");
    }
}

/// Prints each of the library's notices with [`warn`].
pub fn warn_all<'a>(notices: impl IntoIterator<Item = &'a crate::error::Notice>) {
    for notice in notices {
        warn(&notice.to_string());
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
/// random key, readable by its owner only (with a warning in a store that
/// has published: a lost key was replaced). There is no built-in key: one
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
    let existed = std::fs::symlink_metadata(&path).is_ok();
    let key = TokenKey::load_or_create(&path)
        .with_context(|| format!("no page-token key in {} (set TELEMETER_TOKEN_KEY to give one)", path.display()))?;
    // A store that has published had its key made by its first ingest: a
    // key made now replaces a lost one, which the operator must hear of.
    if !existed && store.is_some_and(|store| store.join(crate::store::MANIFEST).exists()) {
        warn(&format!(
            "{} was missing in a store that has published: a new page-token key was made there. Page tokens \
             given out before are refused (clients start their listing again), and every other process \
             answering from this store must be restarted to share the new key; restore the old file from a \
             backup instead to keep them valid",
            path.display()
        ));
    }
    Ok(key)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `summary`, `report` and `serve` take one source, `--data` or
    /// `--store`, with the same flags.
    #[test]
    fn every_command_on_a_data_set_takes_one_source() {
        let commands: [&[&str]; 3] = [
            &["telemeter", "summary", "--auth-id", "A"],
            &["telemeter", "report", "--out", "o"],
            &["telemeter", "serve"],
        ];
        for command in commands {
            let parse = |extra: &[&str]| Cli::try_parse_from(command.iter().chain(extra));
            assert!(parse(&[]).is_err(), "{command:?} without a source");
            assert!(parse(&["--data", "d", "--store", "s"]).is_err(), "{command:?} with both");
            for (flag, data, store) in [("--data", Some("d"), None), ("--store", None, Some("d"))] {
                let source = match parse(&[flag, "d"]).map(|cli| cli.command) {
                    Ok(Command::Summary(args)) => args.source,
                    Ok(Command::Report(args)) => args.source,
                    Ok(Command::Serve(args)) => args.source,
                    other => panic!("{command:?} {flag}: {other:?}"),
                };
                assert_eq!(source.data.as_deref(), data.map(Path::new));
                assert_eq!(source.store.as_deref(), store.map(Path::new));
            }
        }
    }

    #[test]
    fn bad_row_values_are_the_policies() {
        assert_eq!(OnBadRow::from(BadRowArg::Fail), OnBadRow::Fail);
        assert_eq!(OnBadRow::from(BadRowArg::SetAside), OnBadRow::SetAside);
    }
}
