//! `ingest --engine spark`: the checking, deduplication, writing and fold
//! of an ingest run as an Apache Spark job, with the local ingest's
//! readers and writers; the result is published here with the same lock,
//! rollup merge and manifest swap as the local ingest.
//!
//! The job is `spark/telemeter_ingest.py` (compiled in, written to the
//! staging folder and handed to `spark-submit`), with its Python workers'
//! daemon (`spark/telemeter_daemon.py`: pyspark's, from the installed
//! pyspark's compiled modules rather than SPARK_HOME's zip). It works in
//! `STORE/staging/<ingest>/`, a folder no manifest lists:
//!
//! 1. each input file, or split of a large plain CSV file
//!    (`records::split`, cut here before the job), is checked by this
//!    binary's hidden `spark-task check` command ([`check_task`]), several
//!    to a Spark task (about 256 MiB a task): the same readers
//!    and the same `records::parse_record` as every other command, so
//!    every contract check, message and line number is the local engine's.
//!    It writes the valid rows of split `s` of file `n`, normalized, to
//!    `checked/<n>.<s>.rows` (their lines, text sizes and id hashes to
//!    `.places`, every 4096th row's offset to `.offsets`: `rows.rs`),
//!    their dedup entries (id hash, content hash, place) to
//!    `.index` (the store's index layout) and its set-aside rows to
//!    `.rejects.csv`;
//! 2. one Spark task per kind and range of id-hash partitions runs
//!    `spark-task dedup` ([`dedup_task`]): those partitions of the store's
//!    index files, then of the new entries, in (file, line) order: a
//!    repeat of an id with the same content is a duplicate
//!    (`dups/<kind>/`: its place and the first row's), with other content
//!    a conflict naming both places. No row crosses the network whole;
//!    each task reads only its partitions;
//! 3. the job hands telemeter its counts (`deduped.json`) and waits for
//!    the write plan (`writes.json`): the driver (`publish.rs`) replays the local
//!    ingest's record-id filter on the rows' places and ids, which cuts the
//!    new rows (the checked rows but the repeats) into the local ingest's
//!    records files, byte for byte. The filters, loaded from the store's
//!    index files, were loading on a thread since the job started
//!    (`filters.rs`), or since the job's listing with DATA at a URI;
//! 4. one Spark task per records file runs `spark-task write`
//!    ([`write_task`]): it writes the file and its index file to the store
//!    with the local writers and folds its rows into rollup groups, spilled
//!    with their own strings;
//! 5. the job writes `result.json` (counts per kind and what each write
//!    task wrote, or the first error) and stops.
//!
//! Each Python worker runs its tasks in one `spark-task serve` process
//! (`cli::spark_task`), which reuses the memory its earlier tasks freed.
//!
//! With DATA at a URI ([`DataLocation::Uri`]: `s3a://`, `hdfs://`,
//! `file://`...), the job first lists it through Hadoop (`listing.json`)
//! and copies the side inputs (accounts, resources) to `side/`; its tasks
//! get each file's lines from Spark's text source, in blocks for a large
//! plain CSV file (each split's first line and the empty lines before it
//! counted first: [`Split::empty_before`]), and a compressed file's bytes
//! from `binaryFile`. The inventory, accounts and resources are then read
//! from those, after the listing.
//!
//! The driver then takes in the write tasks' rollup groups, applies the
//! voids and corrections, merges the rollups into each account's files
//! (`Rollups::write`, as the local ingest does, so the rollup files hold
//! the same bytes) and publishes. A failed or killed job leaves only the
//! staging folder, which is removed, and files no manifest lists; the
//! manifest swap stays the one commit point.

mod class_archive;
mod dedup;
mod filters;
mod publish;
mod rows;
mod task;
mod write;

pub use dedup::{dedup_task, Clash, DedupInputs, DedupSummary, First, KindInputs};
pub use task::{check_task, NumberedSplit, TaskError, TaskInput, TaskSummary};
pub use write::{write_task, Touched, WriteSummary};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

use serde::{Deserialize, Serialize};

use super::generation;
use super::ingest::options::{started, IngestOptions, IngestProgress, IngestReport};
use super::location::{DataLocation, Uri};
use super::Manifest;
use crate::aggregate::OnBadRow;
use crate::error::{Error, Result};
use crate::records::files::{Format, InputFile, Inventory, ListedFile, TopEntry, LAYOUT};
use crate::records::split::{self, Split};
use crate::records::Kind;
use class_archive::ClassArchive;
use publish::publish;

/// The job, kept in the repository and compiled in.
const JOB: &str = include_str!("../../../spark/telemeter_ingest.py");
/// The Python workers' daemon: pyspark's, run from the installed pyspark
/// when there is one (`spark/telemeter_daemon.py`).
const DAEMON: &str = include_str!("../../../spark/telemeter_daemon.py");

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
    /// This program, which the tasks run: shipped with `--files`, or with
    /// a `local` master its own file on this host.
    pub binary: PathBuf,
    /// A local plain CSV file larger than this is checked by several
    /// tasks, a split of about this size each (`records::split`).
    pub split_bytes: u64,
}

/// The Spark configuration every job gets unless `--spark-conf` says
/// otherwise: no UI, quiet logs. (For local data the job computes nothing
/// in Spark SQL: its tasks run this binary.)
pub const DEFAULT_CONF: [(&str, &str); 2] = [("spark.ui.enabled", "false"), ("spark.log.level", "WARN")];

/// The Spark configuration the job needs, whatever `--spark-conf` or
/// spark-defaults.conf say; `--spark-conf` giving another value is a
/// usage error:
/// - no speculative attempts: a task writes its files at fixed names
///   (in the staging folder, and the store's new records and index
///   files), which two attempts at once would both write;
/// - the driver in this process's host (client mode): the job and
///   telemeter share the staging folder and hand each other the write
///   plan, and the job ends when telemeter's process does.
const FIXED_CONF: [(&str, &str); 2] = [("spark.speculation", "false"), ("spark.submit.deployMode", "client")];

/// How the tasks reach this program.
#[derive(Debug, PartialEq)]
struct Shipped {
    /// The plan's `binary`: the file name `--files` gives it, or a path
    /// on this host.
    name: String,
    /// Whether it goes with `--files`.
    ship: bool,
}

impl Shipped {
    /// With a `local` or `local-cluster` master every executor runs on
    /// this host, and the tasks run this very process's program
    /// (`/proc/<pid>/exe`: the running file, even if a newer one has
    /// replaced it since): `--files` would copy its 100 MB twice a job.
    /// Elsewhere it is shipped.
    fn of(spark: &SparkOptions) -> Result<Shipped> {
        let local = spark.master.as_deref().is_some_and(|m| m.starts_with("local"));
        let own = format!("/proc/{}/exe", std::process::id());
        if local && Path::new(&own).exists() {
            return Ok(Shipped { name: own, ship: false });
        }
        let name = spark
            .binary
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| Error::io(&spark.binary, "not a program name"))?
            .to_owned();
        Ok(Shipped { name, ship: true })
    }
}

/// One input file in the job's plan, or one split of it (a task each).
#[derive(Debug, Serialize, Deserialize)]
struct PlanFile {
    index: u32,
    kind: String,
    path: String,
    name: String,
    /// Bytes the task reads: the file's, or its split's.
    bytes: u64,
    /// The split, its number, and the file's size when split; `None`
    /// for a file read whole.
    split: Option<PlanSplit>,
}

/// A split of a file in the plan.
#[derive(Debug, Serialize, Deserialize)]
struct PlanSplit {
    number: u32,
    #[serde(flatten)]
    split: Split,
    size: u64,
}

/// What the job is told (`plan.json`).
#[derive(Debug, Serialize)]
struct Plan {
    staging: String,
    on_bad_row: &'static str,
    binary: String,
    /// This process: the job waits for its write plan only while it runs.
    pid: u32,
    /// How often the job looks for the write plan ([`POLL`]).
    poll_seconds: f64,
    /// DATA as a URI: the job lists it (`listing.json`) and reads it
    /// through Hadoop; `files` is then empty.
    data_uri: Option<String>,
    /// What a data directory holds beside the record folders
    /// ([`LAYOUT`]): with `data_uri`, the job copies those it finds to
    /// `side/`.
    side: [&'static str; LAYOUT.len()],
    /// With `data_uri`: a plain CSV file larger than this is read in
    /// blocks of this size, a task each (the job counts their lines
    /// first); 0 reads every file whole.
    split_bytes: u64,
    files: Vec<PlanFile>,
    /// The stored index files of each kind, absolute paths, in manifest
    /// order.
    stored: BTreeMap<String, Vec<String>>,
}

/// What the job found (`deduped.json`, then `result.json` with the write
/// stage's summaries).
#[derive(Debug, Deserialize)]
struct JobResult {
    error: Option<JobError>,
    #[serde(default)]
    kinds: BTreeMap<String, KindResult>,
    /// What each write task wrote.
    #[serde(default)]
    writes: Vec<WriteSummary>,
    /// With DATA at a URI: the plain CSV files the job cut into blocks.
    #[serde(default)]
    blocks: Option<UriBlocks>,
}

/// The plain CSV files at a URI the job cut into blocks, a task each.
#[derive(Clone, Copy, Debug, Deserialize)]
struct UriBlocks {
    split_files: usize,
    splits: usize,
}

/// The first error of the job, in (kind, file, line) order.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum JobError {
    /// A bad row (with `--on-bad-row fail`), or a bad file (`whole_file`:
    /// `reason` is the message, the other fields are unused).
    BadRecord {
        file: String,
        line: u64,
        is_row: bool,
        column: String,
        value: String,
        reason: String,
        #[serde(default)]
        whole_file: bool,
    },
    /// Two rows with one record id (and revision) and different content.
    Conflict {
        kind: String,
        #[serde(flatten)]
        clash: Clash,
    },
    /// DATA (a URI) could not be listed: Hadoop's message (no filesystem
    /// for its scheme, no such directory, access denied...).
    Unreadable { uri: String, message: String },
}

/// What the job found at a DATA URI (`listing.json`).
#[derive(Debug, Deserialize)]
struct Listing {
    /// Every file under the kinds' folders, outside hidden folders.
    files: Vec<ListingEntry>,
    /// The names of the files the job checked, in its index order.
    checked: Vec<String>,
    /// How many of the record folders exist.
    folders: usize,
    /// The entries at DATA's top.
    top: Vec<TopEntry>,
}

/// A file of the listing, as the job wrote it.
#[derive(Debug, Deserialize)]
struct ListingEntry {
    kind: String,
    name: String,
    uri: String,
    size: u64,
}

/// The error of a DATA URI the job could not list.
fn unreadable(uri: &str, message: &str) -> Error {
    let no_connector = message.contains("No FileSystem for scheme") || message.contains("ClassNotFoundException");
    let hint = if no_connector {
        " (a scheme other than file:// and hdfs:// needs its Hadoop connector on Spark's classpath, e.g. \
         --spark-conf spark.jars.packages=org.apache.hadoop:hadoop-aws:<Spark's Hadoop version> for s3a://: \
         docs/guide.md, 'Running on Spark')"
    } else {
        ""
    };
    Error::External(format!("Spark cannot read {uri}: {message}; nothing was published{hint}"))
}

/// What an ingest has read before the job: everything, for a local data
/// directory; only the store, for a URI (the job lists and copies it).
enum Before {
    Prepared(generation::Prepared),
    Opened(generation::Opened, Uri),
}

impl Before {
    fn old(&self) -> &Manifest {
        match self {
            Before::Prepared(prepared) => &prepared.old,
            Before::Opened(opened, _) => &opened.old,
        }
    }

    fn files(&self) -> &[InputFile] {
        match self {
            Before::Prepared(prepared) => &prepared.inventory.files,
            Before::Opened(..) => &[],
        }
    }

    fn uri(&self) -> Option<&Uri> {
        match self {
            Before::Prepared(_) => None,
            Before::Opened(_, uri) => Some(uri),
        }
    }
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
///
/// DATA at a URI (`s3a://`, `hdfs://`, `file://`...) is listed and read by
/// the job through Hadoop's `FileSystem`; nothing here touches it: the job
/// writes the listing and copies the side inputs (accounts, resources) to
/// its staging folder, and they are read from there, after the job.
pub fn ingest_spark(
    data: &DataLocation,
    store: &Path,
    options: &IngestOptions,
    spark: &SparkOptions,
) -> Result<IngestReport> {
    let id = &options.ingest_id;
    let opened = generation::open(store, id)?;
    // Whatever fails from here on, what this ingest wrote to the store
    // goes with it (the staging folder below, the rest on the guard's drop).
    let unpublished = opened.unpublished(store, id);
    let outcome = ingest_opened(data, store, opened, options, spark);
    unpublished.settle(outcome)
}

/// [`ingest_spark`] once the store is locked and its manifest read.
fn ingest_opened(
    data: &DataLocation,
    store: &Path,
    opened: generation::Opened,
    options: &IngestOptions,
    spark: &SparkOptions,
) -> Result<IngestReport> {
    let id = &options.ingest_id;
    let before = match data {
        DataLocation::Local(dir) => {
            let inventory = crate::records::files::Inventory::scan(dir)?;
            let prepared = opened.read_inputs(dir, store, id, inventory, options.resources)?;
            options.progress.tell(started(&prepared.inventory));
            super::ingest::check_voids(options, &prepared.inventory)?;
            Before::Prepared(prepared)
        }
        // The input is known after the job, which lists it.
        DataLocation::Uri(uri) => Before::Opened(opened, uri.clone()),
    };
    let store_abs = std::path::absolute(store).map_err(|e| Error::io(store, e))?;
    // Staging folders of earlier runs that failed or were killed: no ingest
    // is running (the lock is held), so they are nobody's.
    let _ = std::fs::remove_dir_all(store_abs.join("staging"));
    let staging = store_abs.join("staging").join(id);
    // The plan's record-id filters load while the job runs.
    let filters = match &before {
        Before::Prepared(prepared) => {
            Some(filters::StoredFilters::start(store, &prepared.old, &prepared.inventory.files, options.filter_bytes))
        }
        Before::Opened(..) => None,
    };
    let outcome = run_job(&store_abs, &staging, id, options, spark, &before).and_then(|started| {
        let (result, job) = match started {
            Started::Done(result) => (result, None),
            Started::Deduplicated(result, job) => (result, Some(job)),
        };
        let (prepared, notices) = match before {
            Before::Prepared(prepared) => (prepared, Vec::new()),
            Before::Opened(opened, uri) => {
                let inventory = read_listing(&staging)?;
                let notices = inventory.notices(Path::new(&uri.text));
                (opened.read_inputs(&staging.join("side"), store, id, inventory, options.resources)?, notices)
            }
        };
        let mut report = publish(store, options, &staging, prepared, result, job, filters)?;
        // The listing's notices first, as the local engine prints its
        // inventory's before it reads; then the publish's own.
        report.notices.splice(0..0, notices);
        Ok(report)
    });
    // Scratch of this ingest: published files were copied out of it.
    let _ = std::fs::remove_dir_all(&staging);
    if let Ok(mut left) = std::fs::read_dir(store.join("staging")) {
        if left.next().is_none() {
            let _ = std::fs::remove_dir(store.join("staging"));
        }
    }
    outcome
}

/// Where a job is once `run_job` returns.
enum Started {
    /// It ended: its result (an error, when it ends before its write stage).
    Done(JobResult),
    /// It has checked and deduplicated the rows (its result so far) and
    /// waits for its write plan.
    Deduplicated(JobResult, Job),
}

/// A running job waiting for, or running, its write stage. Dropped before
/// [`Job::end`], it is stopped.
pub(super) struct Job {
    child: Child,
    staging: PathBuf,
    /// The driver JVM's class archive, used or being saved.
    archive: Option<ClassArchive>,
}

/// How often the job and this program look for each other's files.
const POLL: std::time::Duration = std::time::Duration::from_millis(5);

impl Job {
    /// Hands the job its write plan (`writes.json`): its executors start
    /// writing the files.
    fn start_writes(&self, plan: &write::WritePlan) -> Result<()> {
        let path = self.staging.join("writes.json");
        let temporary = self.staging.join("writes.json.tmp");
        let bytes = serde_json::to_vec(plan).map_err(|e| Error::Internal(format!("write plan: {e}")))?;
        super::write_synced(&temporary, &bytes)?;
        std::fs::rename(&temporary, &path).map_err(|e| Error::io(&path, e))
    }

    /// Waits for the job's result, with the write stage's summaries: the
    /// job writes it before Spark stops, so the publish goes on while the
    /// JVMs shut down ([`Job::end`]).
    fn result(&mut self) -> Result<JobResult> {
        let path = self.staging.join("result.json");
        loop {
            if path.exists() {
                return read_json(&path, "a job result");
            }
            if let Some(status) = self.child.try_wait().map_err(|e| Error::io(&self.staging, e))? {
                return read_result(&self.staging, status);
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits for spark-submit to exit once its result is in hand (its exit
    /// status says nothing more; the drop settles the class archive).
    fn end(mut self) {
        let _ = self.child.wait();
    }
}

impl Drop for Job {
    /// Still running: what comes after the job failed, so it is stopped
    /// (and the archive its driver was saving dropped with it). Ended: the
    /// class archive its driver saved is kept only after a clean exit, and
    /// a job that finished without saving one says so.
    fn drop(&mut self) {
        match self.child.try_wait() {
            Ok(None) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
            Ok(Some(status)) => {
                let finished = self.staging.join("result.json").exists();
                if let Some(archive) = &mut self.archive {
                    archive.settle(status.success(), finished);
                }
            }
            Err(_) => {}
        }
    }
}

/// Where the job's settings point, and what it reads.
struct JobSettings<'a> {
    /// The job's log4j2 configuration.
    log_config: &'a Path,
    /// Whether DATA is a URI (its lines pass through the JVMs).
    uri: bool,
    /// The driver's class archive option ([`ClassArchive`]).
    archive: Option<String>,
}

/// The job's Spark configuration: [`DEFAULT_CONF`] and the JVMs'
/// options, then the user's `given` pairs (the last of a key wins), then
/// [`FIXED_CONF`], which they may only repeat.
///
/// - Quiet from the first line: Spark's start-up INFO lines come before
///   `spark.log.level` applies.
/// - For local data the JVMs compile with C1 only: they schedule tasks and
///   run no heavy code (the tasks are this binary), and C2 compiling
///   Spark's own start-up costs more than it wins (docs/scale.md). Data at
///   a URI passes through the JVMs' line reader, which C2 makes about twice
///   as fast.
/// - The driver maps its class archive ([`ClassArchive`]).
///
/// (The Python workers' daemon is the job's to set, so that a daemon of
/// spark-defaults.conf wins as one of `--spark-conf` does.)
fn job_conf(settings: &JobSettings<'_>, given: &[(String, String)]) -> Result<BTreeMap<String, String>> {
    let mut conf: BTreeMap<String, String> =
        DEFAULT_CONF.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    let compiler = if settings.uri { "" } else { "-XX:TieredStopAtLevel=1 " };
    let log_config = java_word(&format!("-Dlog4j2.configurationFile={}", path_text(settings.log_config)?));
    let java_option = format!("{compiler}{log_config}");
    let driver = match &settings.archive {
        Some(archive) => format!("{archive} {java_option}"),
        None => java_option.clone(),
    };
    conf.insert("spark.driver.extraJavaOptions".to_owned(), driver);
    conf.insert("spark.executor.extraJavaOptions".to_owned(), java_option);
    for (key, value) in given {
        if let Some((_, needed)) = FIXED_CONF.iter().find(|(fixed, _)| fixed == key) {
            if !value.trim().eq_ignore_ascii_case(needed) {
                return Err(Error::Usage(format!(
                    "--spark-conf {key}={value}: the Spark engine runs with {key}={needed}"
                )));
            }
        }
        conf.insert(key.clone(), value.clone());
    }
    conf.extend(FIXED_CONF.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    Ok(conf)
}

/// `word` as one word of a JVM options string (`spark.*.extraJavaOptions`,
/// which Spark splits at whitespace): in double quotes, with `"` and `\`
/// escaped, when it holds any of those (a store path with a space).
fn java_word(word: &str) -> String {
    if !word.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '\\') {
        return word.to_owned();
    }
    let mut quoted = String::with_capacity(word.len() + 2);
    quoted.push('"');
    for c in word.chars() {
        if c == '"' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    quoted
}

/// The job's result (`result.json`) once it ended with `status`. The job
/// writes it, whole, as its last step: a JVM that fails after it (say,
/// saving its class archive) does not change it.
fn read_result(staging: &Path, status: ExitStatus) -> Result<JobResult> {
    let result_path = staging.join("result.json");
    if !result_path.exists() {
        return Err(Error::External(format!(
            "the Spark job failed ({status}); nothing was published (its log is above; run with \
             --spark-conf spark.log.level=INFO for more)"
        )));
    }
    read_json(&result_path, "a job result")
}

/// A JSON file of the staging folder, read as `what` (named in the error
/// of a file that does not parse).
pub(super) fn read_json<T: serde::de::DeserializeOwned>(path: &Path, what: &str) -> Result<T> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| Error::io(path, format!("not {what}: {e}")))
}

/// Writes the plan and the job to `staging`, runs `spark-submit` and waits
/// until the job has deduplicated the rows (or ended).
fn run_job(
    store: &Path,
    staging: &Path,
    id: &str,
    options: &IngestOptions,
    spark: &SparkOptions,
    before: &Before,
) -> Result<Started> {
    if staging.exists() {
        std::fs::remove_dir_all(staging).map_err(|e| Error::io(staging, e))?;
    }
    std::fs::create_dir_all(staging).map_err(|e| Error::io(staging, e))?;
    let mut files = Vec::new();
    for (i, file) in before.files().iter().enumerate() {
        // Voids are read by the publish on this machine (`ingest::correct`).
        if file.kind == Kind::Voids {
            continue;
        }
        let path = std::path::absolute(&file.path).map_err(|e| Error::io(&file.path, e))?;
        let splits = match file.format {
            Format::Csv => split::splits(&path, file.size, spark.split_bytes)?,
            _ => Vec::new(),
        };
        let plan_file = |bytes, split| -> Result<PlanFile> {
            let (index, kind, name) = (i as u32, file.kind.name().to_owned(), file.name.clone());
            Ok(PlanFile { index, kind, path: path_text(&path)?, name, bytes, split })
        };
        match splits.len() {
            0 | 1 => files.push(plan_file(file.size, None)?),
            _ => {
                for (number, split) in splits.into_iter().enumerate() {
                    let split = PlanSplit { number: number as u32, split, size: file.size };
                    files.push(plan_file(split.split.to - split.split.from, Some(split))?);
                }
            }
        }
    }
    let mut stored = BTreeMap::new();
    for kind in Kind::ALL {
        let names = before.old().kind(kind).index;
        let paths = names.iter().map(|n| path_text(&store.join(n))).collect::<Result<Vec<_>>>()?;
        stored.insert(kind.name().to_owned(), paths);
    }
    let shipped = Shipped::of(spark)?;
    let plan = Plan {
        staging: path_text(staging)?,
        on_bad_row: match options.on_bad_row {
            OnBadRow::Fail => "fail",
            OnBadRow::SetAside => "set-aside",
        },
        binary: shipped.name.clone(),
        pid: std::process::id(),
        poll_seconds: POLL.as_secs_f64(),
        data_uri: before.uri().map(|uri| uri.text.clone()),
        side: LAYOUT,
        split_bytes: spark.split_bytes,
        files,
        stored,
    };
    let plan_path = staging.join("plan.json");
    let plan_bytes = serde_json::to_vec_pretty(&plan).map_err(|e| Error::Internal(format!("plan: {e}")))?;
    super::write_synced(&plan_path, &plan_bytes)?;
    let job_path = staging.join("telemeter_ingest.py");
    super::write_synced(&job_path, JOB.as_bytes())?;
    super::write_synced(&staging.join("telemeter_daemon.py"), DAEMON.as_bytes())?;

    let mut command = Command::new(&spark.spark_submit);
    if let Some(master) = &spark.master {
        command.arg("--master").arg(master);
    }
    command.arg("--name").arg(format!(
        "telemeter ingest {} generation {} ({id})",
        store.display(),
        before.old().generation + 1
    ));
    let log_config = staging.join("log4j2.properties");
    super::write_synced(&log_config, LOG_CONFIG.as_bytes())?;
    let archive = ClassArchive::find(&spark.spark_submit);
    let settings = JobSettings {
        log_config: &log_config,
        uri: plan.data_uri.is_some(),
        archive: archive.as_ref().map(ClassArchive::java_option),
    };
    let conf = job_conf(&settings, &spark.conf)?;
    for (key, value) in &conf {
        command.arg("--conf").arg(format!("{key}={value}"));
    }
    if shipped.ship {
        command.arg("--files").arg(&spark.binary);
    }
    command.arg(&job_path).arg(&plan_path);
    // The job's own output goes to our standard error: standard output is
    // the ingest's report.
    command.stdout(Stdio::from(std::io::stderr())).stdin(Stdio::null());
    let split: Vec<&PlanSplit> = plan.files.iter().filter_map(|f| f.split.as_ref()).collect();
    let split_files = split.iter().filter(|s| s.number == 0).count();
    if split_files > 0 {
        options.progress.tell(IngestProgress::Split { split_files, splits: split.len() });
    }
    options.progress.tell(IngestProgress::Submitted);
    let child = command.spawn().map_err(|e| Error::io(&spark.spark_submit, format!("cannot run spark-submit: {e}")))?;
    let mut job = Job { child, staging: staging.to_owned(), archive };
    let deduplicated = staging.join("deduped.json");
    let status = loop {
        if deduplicated.exists() {
            let result: JobResult = read_json(&deduplicated, "a job result")?;
            if let Some(cut) = result.blocks.filter(|cut| cut.split_files > 0) {
                options.progress.tell(IngestProgress::Split { split_files: cut.split_files, splits: cut.splits });
            }
            options.progress.tell(IngestProgress::Writing);
            return Ok(Started::Deduplicated(result, job));
        }
        if let Some(status) = job.child.try_wait().map_err(|e| Error::io(&spark.spark_submit, e))? {
            break status;
        }
        std::thread::sleep(POLL);
    };
    let result = read_result(staging, status)?;
    match &result.error {
        Some(JobError::Unreadable { uri, message }) => Err(unreadable(uri, message)),
        _ => Ok(Started::Done(result)),
    }
}

/// The inventory of a DATA URI, from the job's listing: telemeter's own
/// rule ([`Inventory::from_listing`]) applied to what the job found, which
/// must give the files the job checked.
fn read_listing(staging: &Path) -> Result<Inventory> {
    let path = staging.join("listing.json");
    let listing: Listing = read_json(&path, "a listing")?;
    let mut files = Vec::with_capacity(listing.files.len());
    for file in listing.files {
        let kind = Kind::of_name(&file.kind)
            .ok_or_else(|| Error::io(&path, format!("'{}' is not a record kind", file.kind)))?;
        files.push(ListedFile { kind, uri: file.uri, name: file.name, size: file.size });
    }
    let inventory = Inventory::from_listing(files, listing.folders, listing.top);
    if !inventory.files.iter().map(|f| &f.name).eq(listing.checked.iter()) {
        return Err(Error::Internal(format!(
            "{}: the Spark job checked other files than telemeter would read from its listing",
            path.display()
        )));
    }
    Ok(inventory)
}

pub(super) fn path_text(path: &Path) -> Result<String> {
    path.to_str().map(str::to_owned).ok_or_else(|| Error::io(path, "not a UTF-8 path"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(given: &[(&str, &str)]) -> Vec<(String, String)> {
        given.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    /// The driver maps its class archive; the user's last value of a key
    /// wins.
    #[test]
    fn the_job_conf_puts_the_users_settings_last() {
        let archive = Some("-XX:SharedArchiveFile=/c/driver.jsa".to_owned());
        let settings = JobSettings { log_config: Path::new("/s/log4j2.properties"), uri: false, archive };
        let conf = job_conf(&settings, &[]).expect("conf");
        assert_eq!(conf["spark.ui.enabled"], "false");
        let driver = &conf["spark.driver.extraJavaOptions"];
        assert!(driver.starts_with("-XX:SharedArchiveFile=/c/driver.jsa -XX:TieredStopAtLevel=1 "), "{driver}");
        assert!(conf["spark.executor.extraJavaOptions"].starts_with("-XX:TieredStopAtLevel=1 "));

        let given = pairs(&[
            ("spark.ui.enabled", "true"),
            ("spark.ui.enabled", "false"),
            ("spark.driver.extraJavaOptions", "-Dx=1"),
        ]);
        let conf = job_conf(&settings, &given).expect("conf");
        assert_eq!(conf["spark.ui.enabled"], "false");
        assert_eq!(conf["spark.driver.extraJavaOptions"], "-Dx=1", "the user's options replace the archive's");

        assert_eq!(conf["spark.speculation"], "false", "{conf:?}");
        assert_eq!(conf["spark.submit.deployMode"], "client");
        for (key, value) in [("spark.speculation", "true"), ("spark.submit.deployMode", "cluster")] {
            let error = job_conf(&settings, &pairs(&[(key, value)])).expect_err(key);
            assert!(matches!(error, Error::Usage(_)), "{error}");
            assert!(error.to_string().contains(&format!("{key}={value}")), "{error}");
        }
        assert!(job_conf(&settings, &pairs(&[("spark.speculation", "false")])).is_ok());
        assert!(job_conf(&settings, &pairs(&[("spark.speculation", " False")])).is_ok(), "Spark's spelling of false");

        let uri = JobSettings { uri: true, archive: None, ..settings };
        let conf = job_conf(&uri, &[]).expect("conf");
        assert!(conf["spark.executor.extraJavaOptions"].starts_with("-Dlog4j2.configurationFile=/s/"));
        assert_eq!(conf["spark.driver.extraJavaOptions"], conf["spark.executor.extraJavaOptions"]);
    }

    /// A local master's tasks run this process's own program; any other
    /// master's get it with `--files`, by its file name.
    #[test]
    fn the_program_is_shipped_unless_the_master_is_local() {
        let options = |master: Option<&str>| SparkOptions {
            spark_submit: PathBuf::from("/spark/bin/spark-submit"),
            master: master.map(str::to_owned),
            conf: Vec::new(),
            binary: PathBuf::from("/opt/bin/telemeter"),
            split_bytes: 1,
        };
        let own = Shipped { name: format!("/proc/{}/exe", std::process::id()), ship: false };
        for master in ["local", "local[2]", "local[2,4]", "local-cluster[2,1,1024]"] {
            assert_eq!(Shipped::of(&options(Some(master))).expect("local"), own, "{master}");
        }
        let shipped = Shipped { name: "telemeter".to_owned(), ship: true };
        for master in [Some("spark://h:7077"), Some("yarn"), Some("k8s://https://h"), None] {
            assert_eq!(Shipped::of(&options(master)).expect("shipped"), shipped, "{master:?}");
        }
        let mut root = options(None);
        root.binary = PathBuf::from("/");
        assert!(Shipped::of(&root).is_err(), "no program name");
    }
}
