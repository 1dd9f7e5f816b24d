//! Fuzz entry points: each takes arbitrary bytes, runs them through the
//! real code and asserts what must hold for any input. A panic here is a
//! finding (a bug in the code under test, or in the check).
//!
//! The libFuzzer targets in `fuzz/` (`cargo fuzz run <target>`, see
//! `docs/fuzzing.md`) call these, and so does `tests/it/fuzzing.rs`, which
//! replays the seed corpus and a bounded random run in plain `cargo test`.
//! Only wrappers and checks live here: every path goes through the same
//! functions the commands use.
//!
//! - [`csv_paths`]: printable bytes as a chunk of a records file, through
//!   the reader's structural index and through its line-at-a-time reader,
//!   the oracle: the same rows, fields, malformed rows (column, value,
//!   reason) and line numbers, one per record.
//! - [`csv_reader`]: a records file through `records::csv::read` (compared
//!   row for row with an independent reading of the framing: every record
//!   after the header (a line, or the lines a quoted field spans) is one
//!   row or one malformed row, at its first line; a file past the line
//!   limits refused whole), through
//!   `records::csv::Pieces` from disk a few lines at a time (the same rows
//!   or error), and through `aggregate::aggregate`, in both `--on-bad-row` modes:
//!   `read = used + set_aside + duplicates` with `read` the records;
//!   and the reader's SIMD structural index against a byte loop.
//! - [`record_checks`]: fields into `records::parse_record` in each input
//!   form; an accepted record reads back the same from its canonical text
//!   and from Parquet-typed fields.
//! - [`query_parser`]: a query string into `UsageParams::parse_query` and
//!   `UsageRequest::resolve` at a fixed `now`: a 400 naming a known key, or
//!   a window within its cap whose buckets tile it; its page token resumes
//!   the same window.
//! - [`token_decoder`]: text, bodies sealed with the key and hand-made
//!   tokens into `PageToken::decode` and `resolve`: a 400, or a sane window.
//! - [`parquet_input`]: a file's bytes as a Parquet records file of each
//!   kind (`records::parquet::read`) and as any Parquet file
//!   (`parquet::read_frame`): rows numbered from 1, or an error; never a
//!   panic or an abort.
//! - [`rollup_file`], [`index_file`], [`records_file`], [`manifest_file`]:
//!   the readers of each kind of store file, each as the store reads it
//!   (a request's and the report's rollup reads and the ingest's merge;
//!   the ingest's index reads and filter; the stored records under a
//!   request no rollup grain answers; the manifest parser): an answer or
//!   an error naming the file, never a panic or an abort.
//! - [`gunzip`]: bytes as a gzip input file, through the build's gzip
//!   decoder (ISA-L's, when built with it) and flate2's, the oracle: the
//!   same bytes, or both refuse the stream.
//!
//! One file per input: `csv` (the records reader), `gzip` (compressed
//! input), `records` (the field
//! checks), `requests` (query strings and page tokens), `store` (Parquet
//! inputs and the store's files).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};

mod csv;
mod gzip;
mod records;
mod requests;
mod store;

pub use csv::{csv_paths, csv_reader};
pub use gzip::gunzip;
pub use records::record_checks;
pub use requests::{query_parser, token_decoder};
pub use store::{index_file, manifest_file, parquet_input, records_file, rollup_file};

/// A fuzz target: bytes in, a panic on a broken invariant.
pub type Target = fn(&[u8]);

/// Every target, by the name of its `fuzz/fuzz_targets/` file and corpus
/// folder.
pub const TARGETS: [(&str, Target); 11] = [
    ("csv_reader", csv_reader),
    ("csv_paths", csv_paths),
    ("record_checks", record_checks),
    ("query_parser", query_parser),
    ("token_decoder", token_decoder),
    ("parquet_input", parquet_input),
    ("rollup_file", rollup_file),
    ("index_file", index_file),
    ("records_file", records_file),
    ("manifest_file", manifest_file),
    ("gunzip", gunzip),
];

/// The fixed clock of the request targets.
fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_795_262_400, 0).unwrap_or_default() // 2026-11-21T12:00:00Z
}

static DIRS: AtomicU64 = AtomicU64::new(0);

/// A fresh directory of this process under the system's temporary one.
fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("telemeter-fuzz-{}-{}", std::process::id(), DIRS.fetch_add(1, Ordering::Relaxed)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fixed_clock_is_the_documented_day() {
        assert_eq!(now().to_rfc3339(), "2026-11-21T12:00:00+00:00");
    }
}
