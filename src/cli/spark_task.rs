//! `telemeter spark-task` (hidden): the tasks the Spark job of
//! `ingest --engine spark` runs on an executor. `check` checks one input
//! file (or split of one) with the same readers and rules as every other command and writes
//! its valid rows, their dedup entries and its set-aside rows to the job's
//! staging folder; `dedup` deduplicates one kind's new rows in a range of
//! id-hash partitions; `write` writes one records file (and its index
//! file) of the driver's write plan. Each prints a one-line JSON summary
//! for the job.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::BadRowArg;
use crate::records::split::Split;
use crate::records::Kind;
use crate::store::spark;

/// Arguments of `spark-task`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which task.
    #[command(subcommand)]
    pub task: Task,
}

/// The three tasks.
#[derive(Debug, clap::Subcommand)]
pub enum Task {
    /// Check one input file.
    Check(CheckArgs),
    /// Deduplicate one kind's new rows in a range of id-hash partitions.
    Dedup(DedupArgs),
    /// Write one file of the write plan.
    Write(WriteArgs),
}

/// Arguments of `spark-task write`.
#[derive(Debug, clap::Args)]
pub struct WriteArgs {
    /// The write plan (`writes.json`).
    #[arg(long)]
    pub plan: PathBuf,
    /// The file to write: its position in the plan.
    #[arg(long)]
    pub task: usize,
}

/// Arguments of `spark-task check`.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// The record kind (calls, messages, transcriptions, charges).
    #[arg(long)]
    pub kind: String,
    /// The input file.
    #[arg(long)]
    pub file: PathBuf,
    /// Its name in messages (relative to the data directory).
    #[arg(long)]
    pub name: String,
    /// Its index in the ingest's inventory.
    #[arg(long)]
    pub source: u32,
    /// The split to check (its number), when the file is split.
    #[arg(long, requires_all = ["from", "to", "line", "size"])]
    pub split: Option<u32>,
    /// The split's first byte.
    #[arg(long, requires = "split")]
    pub from: Option<u64>,
    /// The byte after its last.
    #[arg(long, requires = "split")]
    pub to: Option<u64>,
    /// The number of its first line.
    #[arg(long, requires = "split")]
    pub line: Option<u64>,
    /// The file's size when it was split.
    #[arg(long, requires = "split")]
    pub size: Option<u64>,
    /// Empty lines just before the split (the start of a run it goes on
    /// with).
    #[arg(long, requires = "split", default_value_t = 0)]
    pub empty_before: u64,
    /// What to do with a bad row.
    #[arg(long, value_enum, default_value = "fail")]
    pub on_bad_row: BadRowArg,
    /// The folder the checked rows go to.
    #[arg(long)]
    pub out: PathBuf,
}

/// Arguments of `spark-task dedup`.
#[derive(Debug, clap::Args)]
pub struct DedupArgs {
    /// The job's list of entries files (`dedup.json`).
    #[arg(long)]
    pub inputs: PathBuf,
    /// The record kind.
    #[arg(long)]
    pub kind: String,
    /// The first id-hash partition.
    #[arg(long)]
    pub from: usize,
    /// The partition after the last.
    #[arg(long)]
    pub to: usize,
    /// The folder the repeats go to.
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `spark-task`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let summary = match args.task {
        Task::Check(args) => {
            let kind =
                Kind::of_name(&args.kind).with_context(|| format!("--kind '{}' is not a record kind", args.kind))?;
            let split = match (args.split, args.from, args.to, args.line) {
                (Some(number), Some(from), Some(to), Some(line)) => {
                    Some((number, Split { from, to, line, empty_before: args.empty_before }))
                }
                _ => None,
            };
            let input = spark::TaskInput {
                kind,
                path: &args.file,
                name: &args.name,
                source: args.source,
                split,
                size: args.size,
            };
            let summary = spark::check_task(input, args.on_bad_row.into(), &args.out)
                .with_context(|| format!("cannot check {}", args.file.display()))?;
            serde_json::to_string(&summary)
        }
        Task::Dedup(args) => {
            let summary = spark::dedup_task(&args.inputs, &args.kind, args.from..args.to, &args.out)
                .with_context(|| format!("cannot deduplicate {} partitions {}..{}", args.kind, args.from, args.to))?;
            serde_json::to_string(&summary)
        }
        Task::Write(args) => {
            let summary = spark::write_task(&args.plan, args.task)
                .with_context(|| format!("cannot write file {} of {}", args.task, args.plan.display()))?;
            serde_json::to_string(&summary)
        }
    };
    println!("{}", summary.context("summary")?);
    Ok(ExitCode::SUCCESS)
}
