//! `telemeter spark-task` (hidden): the tasks the Spark job of
//! `ingest --engine spark` runs on an executor. `check` checks one input
//! file (or split of one) with the same readers and rules as every other command and writes
//! its valid rows, their dedup entries and its set-aside rows to the job's
//! staging folder; `dedup` deduplicates one kind's new rows in a range of
//! id-hash partitions; `write` writes one records file (and its index
//! file) of the driver's write plan. Each prints a one-line JSON summary
//! for the job.
//!
//! `serve` runs such tasks one after another in one process, for as long
//! as its Python worker lives: a task's command line comes on a line of
//! standard input (a JSON array of the arguments after `spark-task`), and
//! its answer goes out on one line, `{"summary": ...}` or `{"error":
//! "..."}`. A fresh process pays a page fault for every page its task
//! touches (on a VM, a large share of the tasks' time: measure with
//! `bench/spark.sh`), where a served task takes the pages its process's
//! earlier tasks freed (the ingest's allocator policy, `cli::memory`,
//! keeps them).

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

/// The three tasks, and the loop that serves them.
#[derive(Debug, clap::Subcommand)]
pub enum Task {
    /// Check one input file.
    Check(CheckArgs),
    /// Deduplicate one kind's new rows in a range of id-hash partitions.
    Dedup(DedupArgs),
    /// Write one file of the write plan.
    Write(WriteArgs),
    /// Run tasks read from standard input, one a line, until it ends.
    Serve,
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
    if let Task::Serve = args.task {
        serve()?;
    } else {
        println!("{}", summary_of(args.task)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// One task's one-line JSON summary.
fn summary_of(task: Task) -> anyhow::Result<String> {
    let summary = match task {
        Task::Check(args) => {
            let kind =
                Kind::of_name(&args.kind).with_context(|| format!("--kind '{}' is not a record kind", args.kind))?;
            let split = match (args.split, args.from, args.to, args.line) {
                (Some(number), Some(from), Some(to), Some(line)) => {
                    let split = Split { from, to, line, empty_before: args.empty_before };
                    Some(spark::NumberedSplit { number, split })
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
        Task::Serve => anyhow::bail!("spark-task serve runs tasks: it is not one"),
    };
    summary.context("summary")
}

/// A served task's command line: what follows `spark-task`.
#[derive(Debug, clap::Parser)]
#[command(name = "spark-task")]
struct Served {
    #[command(subcommand)]
    task: Task,
}

/// What `serve` answers a task.
#[derive(serde::Serialize)]
#[serde(rename_all = "lowercase")]
enum Answer<'a> {
    /// The task's summary, as `spark-task <task>` prints it.
    Summary(&'a serde_json::value::RawValue),
    /// Why it failed, as `spark-task <task>` says it on standard error.
    Error(String),
}

/// `spark-task serve`: each line of standard input a task, each answered
/// on a line of standard output; ends when standard input does. A line
/// that is not a task is answered with an error, as a task that fails is.
fn serve() -> anyhow::Result<()> {
    use clap::Parser;
    use std::io::{BufRead, Write};
    die_with_parent();
    let idle = give_back_when_idle();
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    for line in stdin.lines() {
        let line = line.context("reading a task")?;
        let _ = idle.send(Waiting::Started);
        let outcome = serde_json::from_str::<Vec<String>>(&line)
            .context("a task is a JSON array of arguments")
            .and_then(|words| {
                let served = Served::try_parse_from(std::iter::once("spark-task".to_owned()).chain(words))?;
                summary_of(served.task)
            });
        let raw;
        let answer = match outcome {
            Ok(summary) => {
                raw = serde_json::value::RawValue::from_string(summary).context("summary")?;
                Answer::Summary(&raw)
            }
            Err(error) => Answer::Error(format!("error: {error:#}")),
        };
        serde_json::to_writer(&mut stdout, &answer).context("answering a task")?;
        stdout.write_all(b"\n").and_then(|()| stdout.flush()).context("answering a task")?;
        let _ = idle.send(Waiting::Answered);
    }
    Ok(())
}

/// Ends this process when the Python worker that started it ends, even in
/// the middle of a task. Spark runs a task again, elsewhere, when its
/// worker is killed (a task cancelled, an executor lost); a served task
/// that went on would write the same files as the new attempt, at the
/// same time. (The worker starts it from its one thread, whose end is the
/// worker's.)
#[allow(unsafe_code)]
fn die_with_parent() {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: getppid and prctl(PR_SET_PDEATHSIG) touch no memory.
        let parent = unsafe { libc::getppid() };
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
        // Gone before the call: its signal will never come.
        if unsafe { libc::getppid() } != parent {
            std::process::exit(1);
        }
    }
}

/// How long `serve` waits for a task before it gives the memory its
/// allocator holds free back to the kernel: longer than the gaps between
/// a job's stages on one worker (the plan's, about a second on the
/// benchmark), so the next stage's tasks still find it. A worker a job
/// no longer uses (the check stage's, for data at a URI) then holds next
/// to nothing. Re-tune with `bench/spark.sh` (its peak memory, and the
/// write stage's time).
const IDLE_BEFORE_GIVING_BACK: std::time::Duration = std::time::Duration::from_secs(2);

/// What `serve` tells the thread that gives memory back.
enum Waiting {
    /// A task came.
    Started,
    /// Its answer went out: waiting for the next.
    Answered,
}

/// Starts the thread that gives the allocator's free memory back once
/// `serve` has waited [`IDLE_BEFORE_GIVING_BACK`] for a task (once per
/// wait); `serve` tells it of each task. Without the thread, memory is
/// only kept longer.
fn give_back_when_idle() -> std::sync::mpsc::Sender<Waiting> {
    use std::sync::mpsc::RecvTimeoutError;
    let (tell, told) = std::sync::mpsc::channel();
    let _ = std::thread::Builder::new().name("telemeter-idle".to_owned()).spawn(move || {
        let mut waiting = false;
        loop {
            let next =
                if waiting { told.recv_timeout(IDLE_BEFORE_GIVING_BACK) } else { told.recv().map_err(Into::into) };
            match next {
                Ok(served) => waiting = matches!(served, Waiting::Answered),
                Err(RecvTimeoutError::Timeout) => {
                    crate::cli::memory::give_back_free();
                    waiting = false;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    });
    tell
}
