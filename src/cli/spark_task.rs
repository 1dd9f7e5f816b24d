//! `telemeter spark-task` (hidden): the task the Spark job of
//! `ingest --engine spark` runs on an executor for one input file. It checks
//! every row with the same readers and rules as every other command, writes
//! the valid rows and the set-aside ones to the job's staging folder, and
//! prints a one-line JSON summary for the job.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use super::BadRowArg;
use crate::records::Kind;
use crate::store::spark;

/// Arguments of `spark-task`.
#[derive(Debug, clap::Args)]
pub struct Args {
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
    /// What to do with a bad row.
    #[arg(long, value_enum, default_value = "fail")]
    pub on_bad_row: BadRowArg,
    /// The folder the checked rows go to.
    #[arg(long)]
    pub out: PathBuf,
}

/// Runs `spark-task`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let kind = Kind::ALL
        .into_iter()
        .find(|k| k.name() == args.kind)
        .with_context(|| format!("--kind '{}' is not a record kind", args.kind))?;
    let summary = spark::check_task(kind, &args.file, &args.name, args.source, args.on_bad_row.into(), &args.out)
        .with_context(|| format!("cannot check {}", args.file.display()))?;
    println!("{}", serde_json::to_string(&summary).context("summary")?);
    Ok(ExitCode::SUCCESS)
}
