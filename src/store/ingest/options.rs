//! What an ingest is given and what it gives back: its options, the
//! progress events it tells as it goes, the resources step the command
//! passes in, and the report of what it did. Both engines (the local
//! pipeline and `--engine spark`) share them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::aggregate::{OnBadRow, Tally};
use crate::error::Result;
use crate::records::files::Inventory;
use crate::records::Kind;

/// How to ingest.
#[derive(Clone, Debug)]
pub struct IngestOptions {
    /// What to do with a row that breaks the contract.
    pub on_bad_row: OnBadRow,
    /// The ingest's id: letters, digits, `-`, `_`, `.`; used in file names.
    pub ingest_id: String,
    /// Input bytes per batch (at least one file per batch).
    pub batch_bytes: u64,
    /// Rollup groups held in memory before they are spilled to partial
    /// files (about 200 bytes each).
    pub max_rollup_groups: usize,
    /// Size of the record-id filter, in bytes, at most (each kind's is sized
    /// for its ids within this, see `Filter::for_ids`; a fuller filter
    /// only sends more rows to the exact check).
    pub filter_bytes: u64,
    /// Candidate rows (ids the filter may have seen) held before they are
    /// checked exactly against the index, in bytes.
    pub pending_bytes: u64,
    /// Builds the generation's resources database (endpoints,
    /// registrations, recordings): `resources::generation::build`, given
    /// by the command because `resources` sits above the store, which only
    /// names the file, says what it starts from and publishes it.
    pub resources: BuildResources,
    /// Who hears how far the ingest got (nobody by default).
    pub progress: OnProgress,
}

/// How far an ingest got, as it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngestProgress {
    /// The input is known: this many record files and bytes.
    Started {
        /// Record files.
        files: usize,
        /// Their total size on disk.
        bytes: u64,
    },
    /// One more input file, or run of a large file's lines, read and
    /// checked (from the reading threads, so not in file order): its bytes
    /// on disk and its rows.
    Read {
        /// The file's size on disk (of a run: the bytes read since the
        /// file's last run, all its runs adding up to its size).
        bytes: u64,
        /// Its rows, valid or not.
        rows: u64,
    },
    /// `split_files` large plain CSV files cut into `splits` splits, each
    /// checked by its own Spark task (`ingest --engine spark`): told
    /// before the job for local files, after its check for files at a URI
    /// (which the job cuts).
    Split {
        /// Files split.
        split_files: usize,
        /// Their splits, in all.
        splits: usize,
    },
    /// The Spark job was submitted (`ingest --engine spark`).
    Submitted,
    /// The Spark job has checked and deduplicated the rows: its
    /// executors write the new ones and fold their rollups.
    Writing,
    /// The records are in; the rollups are merged and the generation
    /// published.
    Publishing,
}

/// The callback of [`IngestOptions::progress`]: called once per event (at
/// most once per input file while reading), so it may be as cheap as an
/// atomic add.
#[derive(Clone, Default)]
pub struct OnProgress(Option<std::sync::Arc<dyn Fn(IngestProgress) + Send + Sync>>);

impl OnProgress {
    /// Calls `hear` with every event.
    pub fn new(hear: impl Fn(IngestProgress) + Send + Sync + 'static) -> OnProgress {
        OnProgress(Some(std::sync::Arc::new(hear)))
    }

    /// Tells the listener, if any.
    pub(in crate::store) fn tell(&self, event: IngestProgress) {
        if let Some(hear) = &self.0 {
            hear(event);
        }
    }
}

impl std::fmt::Debug for OnProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "OnProgress(Fn)" } else { "OnProgress(none)" })
    }
}

/// The resources step of an ingest: builds `out` from `previous` and the
/// resource inputs of the data directory, skipping recordings deleted in
/// `deletions` (the store's deletions database). `None` when the data
/// directory has no resource input; otherwise what changed, and `out`
/// exists exactly when something did.
pub type BuildResources =
    fn(data: &Path, previous: PreviousResources<'_>, deletions: &Path, out: &Path) -> Result<Option<ResourceChanges>>;

/// Where a new generation's resources start from.
#[derive(Clone, Copy, Debug)]
pub enum PreviousResources<'a> {
    /// A store without resources yet.
    Nothing,
    /// The previous generation's database (never modified: copied).
    Generation(&'a Path),
    /// The `resources.sqlite` of a store written before resources were
    /// part of its generations (a live database: copied by SQLite, and its
    /// deletions moved into the store's deletions database).
    Legacy(&'a Path),
}

/// What an ingest did to a store's resources.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceChanges {
    /// Endpoints held afterwards, when `endpoints.csv` was read (it
    /// replaces them); `None` when they were kept.
    pub endpoints: Option<u64>,
    /// Registrations held afterwards, when `registrations.csv` was read;
    /// `None` when they were kept.
    pub registrations: Option<u64>,
    /// Files read under `recordings/` (0 when there is no such folder).
    pub recording_files: u64,
    /// Recordings added.
    pub recordings_added: u64,
    /// Recordings read that were stored already (same content).
    pub recordings_duplicates: u64,
    /// Recordings read that were deleted through the API: left out.
    pub deleted_skipped: u64,
    /// Whether the new database differs from the previous generation's (it
    /// is only written, and published, when it does).
    pub changed: bool,
}

impl IngestOptions {
    /// Default batch size: 128 MiB of input.
    pub const DEFAULT_BATCH_BYTES: u64 = 128 << 20;

    /// Default rollup groups in memory: about 200 MB.
    pub const DEFAULT_MAX_ROLLUP_GROUPS: usize = 1 << 20;

    /// Default filter size: 256 MiB (about 1 false candidate in 5,000 rows
    /// with 100 million ids stored).
    pub const DEFAULT_FILTER_BYTES: u64 = 256 << 20;

    /// Default candidate budget: 128 MiB (about a million rows).
    pub const DEFAULT_PENDING_BYTES: u64 = 128 << 20;
}

/// What an ingest did.
#[derive(Clone, Debug, Default)]
pub struct IngestReport {
    /// The ingest's id.
    pub id: String,
    /// Input files read.
    pub files: usize,
    /// Counts per kind: `read = used + set_aside + duplicates`.
    pub tallies: BTreeMap<Kind, Tally>,
    /// Where the rows set aside were written, when there were any.
    pub rejected_file: Option<PathBuf>,
    /// Superseded or orphaned files deleted after publishing.
    pub removed: usize,
    /// Whether a new generation was published (false when nothing changed).
    pub published: bool,
    /// The generation the store answers from afterwards.
    pub generation: u64,
    /// What this ingest did to the resources (endpoints, registrations,
    /// recordings), when the data directory has any of them.
    pub resources: Option<ResourceChanges>,
    /// Accounts whose API token the new accounts.csv removed or replaced.
    pub tokens: crate::store::TokenChanges,
    /// Stored records (of earlier ingests) whose version a higher
    /// revision of this ingest replaced.
    pub stored_superseded: u64,
    /// Stored records (of earlier ingests) a void of this ingest withdrew.
    pub stored_withdrawn: u64,
    /// What the listing of a DATA URI found that nothing reads (files of
    /// no record format, unknown entries at its top), as
    /// [`Inventory::notices`](crate::records::files::Inventory::notices)
    /// words it. Empty for a local folder, whose notices the caller has
    /// before the ingest starts.
    pub notices: Vec<crate::error::Notice>,
}

impl IngestReport {
    /// The counts of every kind, added.
    pub fn total(&self) -> Tally {
        let mut total = Tally::default();
        for tally in self.tallies.values() {
            total += *tally;
        }
        total
    }
}

/// The event that starts an ingest of `inventory`.
pub(in crate::store) fn started(inventory: &Inventory) -> IngestProgress {
    IngestProgress::Started { files: inventory.files.len(), bytes: inventory.files.iter().map(|f| f.size).sum() }
}
