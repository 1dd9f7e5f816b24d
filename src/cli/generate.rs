//! `telemeter generate`: write a synthetic data set (see [`crate::generate`]).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use chrono::{DateTime, Days, NaiveDate, Utc};

use super::progress::{Progress, Unit};
use crate::generate::{self, OutputFormat, Spec};

/// Arguments of `generate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The data directory to write (created; must be empty unless --force).
    #[arg(short = 'o', long)]
    pub out: PathBuf,
    /// Call rows, re-delivered duplicates included [default: 100000, or 0
    /// when another kind's count is given].
    #[arg(long)]
    pub calls: Option<u64>,
    /// Message rows, re-delivered duplicates included [default: 50000, or 0
    /// when another kind's count is given].
    #[arg(long)]
    pub messages: Option<u64>,
    /// Transcription rows, re-delivered duplicates included [default: 10000,
    /// or 0 when another kind's count is given].
    #[arg(long)]
    pub transcriptions: Option<u64>,
    /// Charge rows, re-delivered duplicates included [default: 1000, or 0
    /// when another kind's count is given].
    #[arg(long)]
    pub charges: Option<u64>,
    /// Parent accounts (Zipf-sized: a few big ones and a long tail).
    #[arg(long, default_value_t = 20)]
    pub accounts: u32,
    /// Subaccounts of each account.
    #[arg(long, default_value_t = 3)]
    pub subaccounts: u32,
    /// First day of the window, YYYY-MM-DD (UTC) [default: --days days
    /// before the day of --now, so the data ends yesterday].
    #[arg(long, value_parser = parse_start, conflicts_with = "now")]
    pub start: Option<NaiveDate>,
    /// "Now" for the default --start, RFC 3339 (default: the clock).
    #[arg(long, value_parser = super::parse_now)]
    pub now: Option<DateTime<Utc>>,
    /// Days in the window.
    #[arg(long, default_value_t = 30)]
    pub days: u32,
    /// Seed: the same seed (and arguments) gives the same bytes.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// File format: csv, csv.gz, csv.zst or parquet.
    #[arg(long, default_value = "csv", value_parser = parse_format)]
    pub format: OutputFormat,
    /// Files per kind.
    #[arg(long, default_value_t = 4)]
    pub files: u32,
    /// Share of rows that re-deliver an earlier identical row (0 to 0.5).
    #[arg(long, default_value_t = 0.01)]
    pub duplicates: f64,
    /// Also write the server's resources: endpoints.csv, registrations.csv
    /// and recordings/ for the same accounts (recordings over the window's
    /// last 7 days).
    #[arg(long)]
    pub resources: bool,
    /// Replace the data set files (accounts.csv, the four record folders and
    /// the resources) of a non-empty --out.
    #[arg(long)]
    pub force: bool,
}

fn parse_start(text: &str) -> Result<NaiveDate, String> {
    crate::time::check_date(text).map_err(|e| e.message(text))
}

fn parse_format(text: &str) -> Result<OutputFormat, String> {
    OutputFormat::parse(text).ok_or_else(|| format!("'{text}' is not a format (csv, csv.gz, csv.zst or parquet)"))
}

/// Runs `generate`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let progress = Progress::new("generate", super::quiet());
    let Some(start) = args.start.or_else(|| {
        let today = args.now.unwrap_or_else(Utc::now).date_naive();
        today.checked_sub_days(Days::new(u64::from(args.days)))
    }) else {
        eprintln!("error: --days {} reaches before the calendar's first day", args.days);
        return Ok(ExitCode::from(2));
    };
    let spec = Spec {
        rows: rows([args.calls, args.messages, args.transcriptions, args.charges]),
        accounts: args.accounts,
        subaccounts: args.subaccounts,
        start,
        days: args.days,
        seed: args.seed,
        format: args.format,
        files: args.files,
        duplicates: args.duplicates,
    };
    if let Err(message) = spec.check() {
        eprintln!("error: {message}");
        return Ok(ExitCode::from(2));
    }
    prepare(&args.out, args.force)?;
    let started = std::time::Instant::now();
    let planned: u64 = spec.rows.iter().sum();
    let files = spec.files as usize * spec.rows.iter().filter(|&&rows| rows > 0).count();
    let written = progress.run(|| {
        progress.phase(&format!("writing {files} files"), Unit::Items("rows"), Some(planned), Some(Unit::Bytes));
        generate::generate_with(&spec, &args.out, &|rows, bytes| progress.add(rows, bytes))
    })?;
    let mut written = written;
    if args.resources {
        written.files.extend(generate::generate_resources(&spec, &args.out)?);
    }
    let seconds = started.elapsed().as_secs_f64();
    let rows: u64 = written.rows.iter().sum();
    let duplicates: u64 = written.duplicates.iter().sum();
    println!(
        "wrote {rows} rows ({duplicates} re-delivered duplicates) in {} files, {:.1} MiB, to {} in {seconds:.2} s",
        written.files.len(),
        written.bytes() as f64 / (1024.0 * 1024.0),
        args.out.display()
    );
    progress.note(&format!("done, {}", progress.elapsed()));
    Ok(ExitCode::SUCCESS)
}

/// Rows of each kind when none is given (calls, messages, transcriptions,
/// charges).
const DEFAULT_ROWS: [u64; 4] = [100_000, 50_000, 10_000, 1_000];

/// The rows of each kind: the counts given, 0 for a kind not given when
/// any is given (`--calls 2000` writes calls only), the defaults when none
/// is.
fn rows(given: [Option<u64>; 4]) -> [u64; 4] {
    if given.iter().all(Option::is_none) {
        return DEFAULT_ROWS;
    }
    given.map(|rows| rows.unwrap_or(0))
}

/// Creates `out`, or empties the data set parts of it with `force`.
fn prepare(out: &Path, force: bool) -> anyhow::Result<()> {
    if out.exists() {
        let mut entries = std::fs::read_dir(out).with_context(|| format!("cannot read {}", out.display()))?;
        if entries.next().is_some() {
            if !force {
                bail!("{} is not empty (use --force to replace its data set)", out.display());
            }
            let accounts = out.join("accounts.csv");
            if accounts.exists() {
                std::fs::remove_file(&accounts).with_context(|| format!("cannot remove {}", accounts.display()))?;
            }
            for file in ["endpoints.csv", "registrations.csv"] {
                let path = out.join(file);
                if path.exists() {
                    std::fs::remove_file(&path).with_context(|| format!("cannot remove {}", path.display()))?;
                }
            }
            let folders = crate::records::Kind::ALL.map(|kind| kind.name()).into_iter().chain(["recordings"]);
            for name in folders {
                let folder = out.join(name);
                if folder.exists() {
                    std::fs::remove_dir_all(&folder).with_context(|| format!("cannot remove {}", folder.display()))?;
                }
            }
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_not_asked_for_is_not_written_when_another_is() {
        assert_eq!(rows([None; 4]), DEFAULT_ROWS);
        assert_eq!(rows([Some(2000), None, None, None]), [2000, 0, 0, 0]);
        assert_eq!(rows([Some(2000), Some(1000), None, Some(5)]), [2000, 1000, 0, 5]);
        assert_eq!(rows([None, None, Some(0), None]), [0, 0, 0, 0]);
    }
}
