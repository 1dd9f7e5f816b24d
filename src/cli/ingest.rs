//! `telemeter ingest`: check and deduplicate a data directory once into a
//! store that `summary --store` (and every later command) answers from.
// The doc comments of the arguments are `--help` text, shown as written
// (`<ingest>`, `local[*]`), not Markdown.
#![allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]

use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::Arc;

use anyhow::Context;
use chrono::Utc;

use super::progress::{Progress, Unit};
use super::BadRowArg;
use crate::records::Kind;
use crate::store::location::{self, DataLocation};
use crate::store::{self, IngestOptions, IngestProgress, OnProgress};

/// Arguments of `ingest`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The data directory to read (layout: `telemeter --help`): a path
    /// or a file:// URI; with `--engine spark`, any URI Spark's Hadoop
    /// filesystems read (`s3a://`, `hdfs://`, `gs://`, `abfs://`, `file://`).
    #[arg(long)]
    pub data: PathBuf,
    /// The store to add to (created when missing): a path, or a file:// URI.
    #[arg(long)]
    pub store: PathBuf,
    /// What to do with a row that breaks the contract: stop with an error
    /// (fail), or write it to STORE/rejected/<ingest>.csv and go on
    /// (set-aside).
    #[arg(long, value_enum, default_value = "fail")]
    pub on_bad_row: BadRowArg,
    /// Input megabytes read per batch: bounds the rows held in memory (a
    /// file larger than two batches is read in runs of MB x 8192 lines,
    /// each a batch).
    #[arg(long, default_value_t = IngestOptions::DEFAULT_BATCH_BYTES >> 20)]
    pub batch_mb: u64,
    /// Rollup groups held in memory before they are spilled to disk
    /// (about 200 bytes each): bounds the rollups' memory.
    #[arg(long, default_value_t = IngestOptions::DEFAULT_MAX_ROLLUP_GROUPS)]
    pub max_rollup_groups: usize,
    /// Megabytes of the record-id filter, at most, that spares most rows an
    /// exact look-up in the store's index (sized for the ids of each kind
    /// within this; 0: the smallest, for tests).
    #[arg(long, default_value_t = IngestOptions::DEFAULT_FILTER_BYTES >> 20)]
    pub filter_mb: u64,
    /// Megabytes of rows whose id the filter may have seen, held before they
    /// are checked exactly against the index (0: after every batch).
    #[arg(long, default_value_t = IngestOptions::DEFAULT_PENDING_BYTES >> 20)]
    pub pending_mb: u64,
    /// Where the checking, deduplication and rollups run: here (local), or
    /// as an Apache Spark job (spark; needs SPARK_HOME). Both publish the
    /// same store.
    #[arg(long, value_enum, default_value = "local")]
    pub engine: EngineArg,
    /// With `--engine spark`: the Spark master (`local[N]`,
    /// `spark://host:port`, `yarn`, `k8s://...`); default: Spark's own
    /// configuration (spark-defaults.conf, else local[*]).
    #[arg(long, value_name = "URL")]
    pub spark_master: Option<String>,
    /// With `--engine spark`: a Spark setting, KEY=VALUE (repeatable); it
    /// overrides telemeter's defaults (UI off, WARN logs).
    #[arg(long, value_name = "KEY=VALUE")]
    pub spark_conf: Vec<String>,
    /// With `--engine spark`: a plain CSV file larger than this is checked
    /// by several tasks, one per split of about this size (cut at line
    /// starts; rows and messages numbered as in the whole file).
    #[arg(long, value_name = "MB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
    pub spark_split_mb: u64,
}

/// `--engine` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EngineArg {
    /// This process, on this machine.
    Local,
    /// An Apache Spark job, through `$SPARK_HOME/bin/spark-submit`.
    Spark,
}

/// Runs `ingest`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let progress = Arc::new(Progress::new("ingest", super::quiet()));
    let on_bad_row = args.on_bad_row.into();
    let ingest_id = format!("{}-{}", Utc::now().format("%Y%m%dT%H%M%S%3fZ"), std::process::id());
    let options = IngestOptions {
        on_bad_row,
        ingest_id,
        batch_bytes: args.batch_mb.max(1) << 20,
        max_rollup_groups: args.max_rollup_groups.max(1),
        filter_bytes: args.filter_mb << 20,
        pending_bytes: args.pending_mb << 20,
        resources: crate::resources::generation::build,
        progress: if progress.is_quiet() { OnProgress::default() } else { on_progress(&progress, args.engine) },
    };
    let store = location::store_path(args.store.as_os_str())?;
    let data = match args.engine {
        EngineArg::Local => DataLocation::Local(location::local_data(args.data.as_os_str())?),
        EngineArg::Spark => DataLocation::for_spark(args.data.as_os_str()),
    };
    // The data directory's surprises (no record folder, files nothing
    // reads); a directory that cannot be listed fails the ingest below. (A
    // URI is listed by the Spark job.)
    if let DataLocation::Local(dir) = &data {
        if let Ok(inventory) = crate::records::files::Inventory::scan(dir) {
            super::warn_all(&inventory.notices(dir));
        }
    }
    let failed = || format!("cannot ingest {} into {}", args.data.display(), args.store.display());
    let spark = match args.engine {
        EngineArg::Local => None,
        EngineArg::Spark => Some(spark_options(&args).with_context(failed)?),
    };
    let report = progress
        .run(|| match (&spark, &data) {
            (Some(spark), data) => store::spark::ingest_spark(data, &store, &options, spark),
            (None, DataLocation::Local(dir)) => store::ingest(dir, &store, &options),
            // (The local engine's data went through `local_data`: a URI
            // here would be refused the same way.)
            (None, DataLocation::Uri(uri)) => location::local_data(std::ffi::OsStr::new(&uri.text))
                .and_then(|dir| store::ingest(&dir, &store, &options)),
        })
        .with_context(failed)?;
    // A DATA URI's surprises, known once the job has listed it.
    super::warn_all(&report.notices);
    // Superseded rows and voids are shown when the input held corrections.
    let total = report.total();
    let corrected = total.superseded > 0 || total.voids > 0 || report.tallies.contains_key(&Kind::Voids);
    let line = |name: &str, t: &crate::aggregate::Tally| {
        let mut text = format!(
            "{:<15} read {:>10}  used {:>10}  set aside {:>8}  duplicates {:>10}",
            name, t.read, t.used, t.set_aside, t.duplicates
        );
        if corrected {
            text += &format!("  superseded {:>8}  voids {:>8}", t.superseded, t.voids);
        }
        println!("{text}");
    };
    for kind in Kind::FOLDERS {
        if kind == Kind::Voids && !report.tallies.contains_key(&kind) {
            continue;
        }
        line(kind.name(), &report.tallies.get(&kind).copied().unwrap_or_default());
    }
    line("total", &total);
    if report.stored_superseded > 0 || report.stored_withdrawn > 0 {
        println!(
            "stored records  restated {} (a higher revision replaced them), withdrawn {} (by a void)",
            report.stored_superseded, report.stored_withdrawn
        );
    }
    match &report.resources {
        Some(r) => {
            let table = |n: Option<u64>, file: &str| match n {
                Some(n) => format!("{n} (from {file})"),
                None => format!("kept (no {file})"),
            };
            println!(
                "resources       endpoints {}  registrations {}  recordings {}",
                table(r.endpoints, "endpoints.csv"),
                table(r.registrations, "registrations.csv"),
                if r.recording_files == 0 {
                    "kept (no recording files)".to_owned()
                } else {
                    format!(
                        "{} added, {} already stored, {} deleted earlier and skipped",
                        r.recordings_added, r.recordings_duplicates, r.deleted_skipped
                    )
                }
            );
        }
        None => println!("resources       no endpoints.csv, registrations.csv or recordings/: left as they were"),
    }
    if let Some(path) = &report.rejected_file {
        println!("set-aside rows: {}", path.display());
    }
    if report.published && !report.tokens.dropped.is_empty() {
        super::warn(&format!(
            "{}'s accounts.csv gives no token to {} account(s) that had one in the store ({}): their API \
             requests are now refused (401); set tokens in the data folder's accounts.csv \
             (telemeter accounts set-token ACCOUNT --data DIR) so that ingests keep them",
            args.data.display(),
            report.tokens.dropped.len(),
            report.tokens.dropped.join(", ")
        ));
    }
    if report.published && !report.tokens.replaced.is_empty() {
        super::warn(&format!(
            "{}'s accounts.csv gives {} account(s) another token than the store's ({}): the store's tokens \
             are now refused (401) and the data folder's accepted, even one rotated away with `accounts \
             set-token --store`; set tokens in the data folder's accounts.csv \
             (telemeter accounts set-token ACCOUNT --data DIR) so that ingests keep them",
            args.data.display(),
            report.tokens.replaced.len(),
            report.tokens.replaced.join(", ")
        ));
    }
    if report.published {
        println!("published generation {} (ingest {})", report.generation, report.id);
        if report.removed > 0 {
            println!("deleted {} files no longer listed by this or the previous generation", report.removed);
        }
    } else {
        println!("nothing new: the store is unchanged at generation {}", report.generation);
    }
    if !progress.is_quiet() {
        let kinds: Vec<String> = Kind::FOLDERS
            .iter()
            .filter(|kind| **kind != Kind::Voids || report.tallies.contains_key(kind))
            .map(|kind| {
                let t = report.tallies.get(kind).copied().unwrap_or_default();
                let mut text = format!(
                    "{} read {} used {} set aside {} duplicates {}",
                    kind.name(),
                    t.read,
                    t.used,
                    t.set_aside,
                    t.duplicates
                );
                if corrected {
                    text += &format!(" superseded {} voids {}", t.superseded, t.voids);
                }
                text
            })
            .collect();
        progress.note(&format!("done, {}: {}", progress.elapsed(), kinds.join("; ")));
    }
    Ok(ExitCode::SUCCESS)
}

/// The ingest's events, shown by `progress`: the input's reading as a bar
/// over its bytes, with the records read (here; on Spark, a line saying
/// what the job reads); Spark's steps and the publish as phases of their
/// own.
fn on_progress(progress: &Arc<Progress>, engine: EngineArg) -> OnProgress {
    let progress = Arc::clone(progress);
    OnProgress::new(move |event| match event {
        IngestProgress::Started { files, bytes } if engine == EngineArg::Spark => {
            progress.note(&format!("{files} files ({}) for the Spark job to read", indicatif::HumanBytes(bytes)))
        }
        IngestProgress::Started { files, bytes } => {
            progress.phase(&format!("reading {files} files"), Unit::Bytes, Some(bytes), Some(Unit::Items("records")))
        }
        IngestProgress::Read { bytes, rows } => progress.add(bytes, rows),
        IngestProgress::Split { split_files, splits } => {
            let files = if split_files == 1 { "file" } else { "files" };
            progress.note(&format!("{split_files} {files} cut into {splits} splits (--spark-split-mb)"))
        }
        IngestProgress::Submitted => progress.phase("Spark job running", Unit::Time, None, None),
        IngestProgress::Writing => {
            progress.phase("writing the new rows (Spark) and folding them", Unit::Time, None, None)
        }
        IngestProgress::Publishing => progress.phase("publishing", Unit::Time, None, None),
    })
}

/// Where Spark is (`SPARK_HOME`), and the job's settings.
fn spark_options(args: &Args) -> anyhow::Result<store::spark::SparkOptions> {
    let home = std::env::var_os("SPARK_HOME").filter(|h| !h.is_empty()).context(
        "--engine spark needs SPARK_HOME: a Spark 4 installation whose bin/spark-submit runs the job \
         (see docs/guide.md, 'Running on Spark')",
    )?;
    let spark_submit = PathBuf::from(home).join("bin").join("spark-submit");
    anyhow::ensure!(spark_submit.exists(), "{} does not exist (check SPARK_HOME)", spark_submit.display());
    let mut conf = Vec::new();
    for pair in &args.spark_conf {
        let (key, value) = pair.split_once('=').with_context(|| format!("--spark-conf '{pair}' is not KEY=VALUE"))?;
        anyhow::ensure!(!key.trim().is_empty(), "--spark-conf '{pair}' has an empty key");
        conf.push((key.trim().to_owned(), value.to_owned()));
    }
    let binary = std::env::current_exe().context("cannot find this program to ship to Spark's executors")?;
    Ok(store::spark::SparkOptions {
        spark_submit,
        master: args.spark_master.clone(),
        conf,
        binary,
        split_bytes: args.spark_split_mb << 20,
    })
}
