//! telemeter: a batch usage-aggregation engine and Usage Summary report
//! generator for a telephony platform.
//!
//! Raw usage records (`records.md`) are read from CSV, compressed CSV or
//! Parquet, checked, deduplicated, bucketed and summed exactly, and written
//! as the Usage Summary response of the platform's API (`api.md`).
//!
//! Code map, in the order data flows:
//!
//! - [`error`]: the library's one `Error`, its variants grouped by who must
//!   act: a bad request or option, bad data, a limit of the engine, input
//!   that changed under the run, I/O (with its `io::Error` source), a
//!   program telemeter runs on (Spark), a bug.
//! - [`records`]: the raw contract: finding files, decoding them (one
//!   decoder for gzip, zstd and the BOM), reading CSV and Parquet, checking
//!   each row into a typed [`records::Record`], deduplication, and bad rows
//!   (the one collector of every row sink and the one `rejected.csv`).
//! - [`money`], [`time`]: exact decimals; instants, windows and buckets.
//! - [`checksum`]: a file's length and XXH3-128, the sum every store file
//!   is recorded and checked with.
//! - `threads`: our own threads, started so that one the system will not
//!   give is an error, never a panic.
//! - [`query`], [`token`]: the request: query string to a checked
//!   [`query::UsageRequest`]; page tokens. The 400s of the parameters and
//!   the window are raised here, a stale page token's by the page.
//! - `intern`: the one string interner (ids, and their ranks in byte order).
//! - [`aggregate`]: one parallel pass from files to grouped totals; the
//!   selector, the totals, the report's row order (`aggregate::dims`, its
//!   one definition) and one account's compact rows.
//! - [`dataset`]: what requests are answered from: accounts, and a
//!   [`dataset::Source`] that is a raw data directory or a store.
//! - [`store`]: `ingest` once into Parquet records and 15-minute rollups
//!   (`store/ingest/`: the run and publish, the row sink `chunk`, `dedup`
//!   against the index, the rollups folded (`fold`), spilled (`spill`) and
//!   merged per account (`merge`)); answers
//!   from the rollups (`store/answer.rs`).
//! - [`summary`]: the one core of `summary`, `report` and `serve`:
//!   `resolve` a request, `build` a [`summary::Summary`] (`build_many`: many
//!   accounts in one pass) and cut it into API pages.
//! - [`report`]: `telemeter report`, the nightly job: every account's pages,
//!   CSV and HTML, `manifest.json` with its reconciliation, written
//!   atomically.
//! - [`labels`]: `error_reason` labels.
//! - [`resources`]: SIP endpoints, registrations and recordings in SQLite.
//! - [`server`]: the HTTP API over the same `build` and the resources; one
//!   extractor (`server/authorized.rs`) authorizes every account route.
//! - [`generate`]: synthetic data sets in the records contract, at scale
//!   (`generate/`: the spec, the `plan` of rows, the writers, the `tables`).
//! - [`cli`]: the subcommands (the binary is a thin wrapper), with one
//!   `--data`/`--store` group (`cli::SourceArgs`) and one `--on-bad-row`.
#![deny(clippy::unwrap_used, clippy::print_stdout, clippy::print_stderr)]
#![warn(missing_docs)]

pub mod aggregate;
pub mod checksum;
pub mod cli;
pub mod dataset;
pub(crate) mod direct;
pub(crate) mod durable;
pub mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod generate;
pub(crate) mod intern;
pub mod labels;
pub mod money;
pub(crate) mod parquet;
pub(crate) mod parts;
pub(crate) mod prefetch;
pub mod query;
pub mod records;
pub mod report;
pub mod resources;
pub mod server;
pub mod store;
pub mod summary;
pub(crate) mod threads;
pub mod time;
pub mod token;

pub use error::{Error, Result};
