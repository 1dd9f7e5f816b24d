//! Entry points for `bench/parquet-crates`, which times the store's
//! Parquet code against the `parquet` crate (arrow-rs) on the same files
//! and rows. Each runs the code the commands run, nothing of its own.

use std::path::Path;

use super::parquet_io::{write_records as write, RecordView};
use super::rollup::{GroupColumns, RollupFile};
use super::Listed;
use crate::durable::Syncer;
use crate::error::{Error, Result};
use crate::records::{Kind, Record};

/// Decodes every row group of the rollup file at `path` as a store answer
/// does (the columns a request reads, on the threads); the rows decoded.
pub fn decode_rollup(path: &Path) -> Result<usize> {
    let missing = || Error::io(path, "not a file path");
    let (store, name) = (path.parent().ok_or_else(missing)?, path.file_name().ok_or_else(missing)?);
    let name = name.to_str().ok_or_else(missing)?;
    let file = RollupFile::open(path, Listed { store, name, sum: None })?;
    let mut rows = 0;
    for index in 0..file.groups().len() {
        if let Some(group) = file.read_group(index, crate::time::Interval::ALL, true)? {
            rows += GroupColumns::new(path, &group)?.len();
        }
    }
    Ok(rows)
}

/// Writes `records` of `kind` to a records file at `path`, as ingest
/// writes one (their source `source_file`, lines from 2).
pub fn write_records(path: &Path, kind: Kind, records: &[Record<'_>], source_file: &str) -> Result<()> {
    let views: Vec<RecordView<'_>> = records
        .iter()
        .enumerate()
        .map(|(i, r)| RecordView { record: *r, source_file, source_line: i as u64 + 2 })
        .collect();
    write(path, kind, &views[..], &Syncer::at_once())
}
