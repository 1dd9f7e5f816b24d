//! `ingest --engine spark`: the checking, deduplication and rollup of an
//! ingest run as an Apache Spark job; the result is published here with the
//! same writers, lock and manifest swap as the local ingest.
//!
//! The job is `spark/telemeter_ingest.py` (compiled in, written to the
//! staging folder and handed to `spark-submit`). It works in
//! `STORE/staging/<ingest>/`, a folder no manifest lists:
//!
//! 1. one Spark task per input file runs this binary's hidden
//!    `spark-task` command ([`check_task`]): the same readers and the same
//!    `records::parse_record` as every other command, so every contract
//!    check, message and line number is the local engine's. It writes the
//!    file's valid rows, normalized, to `checked/<n>.parquet` (plus the
//!    record-id and content hashes the dedup index keeps) and its set-aside
//!    rows to `checked/<n>.rejects.json`;
//! 2. Spark SQL deduplicates each kind by `record_id`, against itself and
//!    against the stored records, in (file, line) order: identical rows are
//!    duplicates, different ones a conflict naming both places;
//! 3. it writes the new rows sorted by (file, line) (`new/<kind>/`), the
//!    repeated rows' places and sizes (`dups/<kind>/`), their 15-minute
//!    rollups summed in exact integers (`rollups/`), and `result.json`
//!    (counts per kind, or the first error).
//!
//! [`ingest_spark`] then writes the new rows as records and index files,
//! cut as the local ingest cuts them (its record-id filter and candidate
//! budget replayed: the same files, byte for byte), merges the rollups into each account's files (`Rollups::write`, as the
//! local ingest does, so the rollup files hold the same bytes) and
//! publishes. A failed or killed job leaves only the staging folder, which
//! is removed; the manifest swap stays the one commit point.

mod publish;
mod task;

pub use task::{check_task, TaskError, TaskSummary};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::ingest::{self, IngestOptions, IngestProgress, IngestReport};
use crate::aggregate::OnBadRow;
use crate::error::{Error, Result};
use crate::records::Kind;
use publish::publish;

/// The job, kept in the repository and compiled in.
const JOB: &str = include_str!("../../../spark/telemeter_ingest.py");

/// Spark's logging while the job runs: warnings and errors only, on
/// standard error.
const LOG_CONFIG: &str = "rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
";

/// How to reach Spark.
#[derive(Clone, Debug)]
pub struct SparkOptions {
    /// `$SPARK_HOME/bin/spark-submit`.
    pub spark_submit: PathBuf,
    /// `--master`: `local[N]`, `spark://host:port`, `yarn`, `k8s://...`;
    /// `None` leaves it to the Spark configuration.
    pub master: Option<String>,
    /// `--conf KEY=VALUE` pairs, after (so overriding) the job's defaults.
    pub conf: Vec<(String, String)>,
    /// This program, shipped to the executors (`--files`) for the row check.
    pub binary: PathBuf,
}

/// The Spark configuration every job gets unless `--spark-conf` says
/// otherwise: no UI, quiet logs, ANSI SQL (an overflowing sum is an error,
/// never NULL), nanosecond Parquet timestamps read as integers.
pub const DEFAULT_CONF: [(&str, &str); 6] = [
    ("spark.ui.enabled", "false"),
    ("spark.log.level", "WARN"),
    ("spark.sql.ansi.enabled", "true"),
    ("spark.sql.legacy.parquet.nanosAsLong", "true"),
    ("spark.sql.session.timeZone", "UTC"),
    ("spark.sql.debug.maxToStringFields", "100"),
];

/// One input file in the job's plan.
#[derive(Debug, Serialize, Deserialize)]
struct PlanFile {
    index: u32,
    kind: String,
    path: String,
    name: String,
}

/// What the job is told (`plan.json`).
#[derive(Debug, Serialize)]
struct Plan {
    store: String,
    staging: String,
    ingest_id: String,
    generation: u64,
    on_bad_row: &'static str,
    binary: String,
    files: Vec<PlanFile>,
    /// The stored records files of each kind, absolute paths.
    stored: BTreeMap<String, Vec<String>>,
}

/// What the job found (`result.json`).
#[derive(Debug, Deserialize)]
struct JobResult {
    error: Option<JobError>,
    #[serde(default)]
    kinds: BTreeMap<String, KindResult>,
}

/// The first error of the job, in (kind, file, line) order.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum JobError {
    /// A bad row (with `--on-bad-row fail`).
    BadRecord { file: String, line: u64, is_row: bool, column: String, value: String, reason: String },
    /// Two rows with one record_id and different content: the earlier place
    /// is a stored row (`first_name` is its manifest source) or a new one
    /// (`first_index`).
    Conflict {
        kind: String,
        record_id: String,
        first_index: Option<u32>,
        first_name: Option<String>,
        first_line: u64,
        second_index: u32,
        second_line: u64,
    },
}

/// The counts of one kind.
#[derive(Debug, Default, Deserialize)]
struct KindResult {
    read: u64,
    set_aside: u64,
    duplicates: u64,
    used: u64,
    /// Input files (by index) that set rows aside.
    #[serde(default)]
    rejected_files: Vec<u32>,
}

/// Ingests `data` into `store` with the checking, deduplication and rollups
/// run as a Spark job; publishes like [`super::ingest()`].
pub fn ingest_spark(data: &Path, store: &Path, options: &IngestOptions, spark: &SparkOptions) -> Result<IngestReport> {
    let id = &options.ingest_id;
    let prepared = ingest::prepare(data, store, id, options.resources)?;
    options.progress.tell(ingest::started(&prepared.inventory));
    let store_abs = std::path::absolute(store).map_err(|e| Error::io(store, e))?;
    // Staging folders of earlier runs that failed or were killed: no ingest
    // is running (the lock is held), so they are nobody's.
    let _ = std::fs::remove_dir_all(store_abs.join("staging"));
    let staging = store_abs.join("staging").join(id);
    let outcome = run_job(&store_abs, &staging, id, options, spark, &prepared)
        .and_then(|result| publish(store, options, &staging, prepared, result));
    // Scratch of this ingest: published files were copied out of it.
    let _ = std::fs::remove_dir_all(&staging);
    if let Ok(mut left) = std::fs::read_dir(store.join("staging")) {
        if left.next().is_none() {
            let _ = std::fs::remove_dir(store.join("staging"));
        }
    }
    outcome
}

/// Writes the plan and the job to `staging`, runs `spark-submit` and reads
/// the job's result.
fn run_job(
    store: &Path,
    staging: &Path,
    id: &str,
    options: &IngestOptions,
    spark: &SparkOptions,
    prepared: &ingest::Prepared,
) -> Result<JobResult> {
    if staging.exists() {
        std::fs::remove_dir_all(staging).map_err(|e| Error::io(staging, e))?;
    }
    std::fs::create_dir_all(staging).map_err(|e| Error::io(staging, e))?;
    let mut files = Vec::new();
    for (i, file) in prepared.inventory.files.iter().enumerate() {
        let path = std::path::absolute(&file.path).map_err(|e| Error::io(&file.path, e))?;
        files.push(PlanFile {
            index: i as u32,
            kind: file.kind.name().to_owned(),
            path: path_text(&path)?,
            name: file.name.clone(),
        });
    }
    let mut stored = BTreeMap::new();
    for kind in Kind::ALL {
        let names = prepared.old.kind(kind).records;
        let paths = names.iter().map(|n| path_text(&store.join(n))).collect::<Result<Vec<_>>>()?;
        stored.insert(kind.name().to_owned(), paths);
    }
    let binary_name = spark
        .binary
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| Error::io(&spark.binary, "not a program name"))?
        .to_owned();
    let generation = prepared.old.generation + 1;
    let plan = Plan {
        store: path_text(store)?,
        staging: path_text(staging)?,
        ingest_id: id.to_owned(),
        generation,
        on_bad_row: match options.on_bad_row {
            OnBadRow::Fail => "fail",
            OnBadRow::SetAside => "set-aside",
        },
        binary: binary_name,
        files,
        stored,
    };
    let plan_path = staging.join("plan.json");
    let plan_bytes = serde_json::to_vec_pretty(&plan).map_err(|e| Error::Internal(format!("plan: {e}")))?;
    super::write_synced(&plan_path, &plan_bytes)?;
    let job_path = staging.join("telemeter_ingest.py");
    super::write_synced(&job_path, JOB.as_bytes())?;

    let mut command = Command::new(&spark.spark_submit);
    if let Some(master) = &spark.master {
        command.arg("--master").arg(master);
    }
    command.arg("--name").arg(format!("telemeter ingest {} generation {generation} ({id})", store.display()));
    let mut conf: BTreeMap<String, String> =
        DEFAULT_CONF.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    // Quiet from the first line: Spark's start-up INFO lines come before
    // `spark.log.level` applies. (A `--spark-conf` of these keys wins.)
    let log_config = staging.join("log4j2.properties");
    super::write_synced(&log_config, LOG_CONFIG.as_bytes())?;
    let java_option = format!("-Dlog4j2.configurationFile=file:{}", path_text(&log_config)?);
    for key in ["spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"] {
        conf.insert(key.to_owned(), java_option.clone());
    }
    for (key, value) in &spark.conf {
        conf.insert(key.clone(), value.clone());
    }
    for (key, value) in &conf {
        command.arg("--conf").arg(format!("{key}={value}"));
    }
    command.arg("--files").arg(&spark.binary).arg(&job_path).arg(&plan_path);
    // The job's own output goes to our standard error: standard output is
    // the ingest's report.
    command.stdout(Stdio::from(std::io::stderr())).stdin(Stdio::null());
    options.progress.tell(IngestProgress::Submitted);
    let status =
        command.status().map_err(|e| Error::io(&spark.spark_submit, format!("cannot run spark-submit: {e}")))?;
    options.progress.tell(IngestProgress::JobDone);
    let result_path = staging.join("result.json");
    if !status.success() || !result_path.exists() {
        return Err(Error::External(format!(
            "the Spark job failed ({status}); nothing was published (its log is above; run with \
             --spark-conf spark.log.level=INFO for more)"
        )));
    }
    let bytes = std::fs::read(&result_path).map_err(|e| Error::io(&result_path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::io(&result_path, format!("not a job result: {e}")))
}

fn path_text(path: &Path) -> Result<String> {
    path.to_str().map(str::to_owned).ok_or_else(|| Error::io(path, "not a UTF-8 path"))
}
