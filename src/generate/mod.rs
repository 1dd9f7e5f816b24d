//! Synthetic data sets in the records contract, for benchmarks, demos and
//! tests at scale.
//!
//! A [`Spec`] (row counts, accounts, window, seed, format) becomes a [`Plan`]:
//! the accounts with their ids, currencies, time zones, home countries and
//! subaccounts, and the sampling tables (account sizes, hour-of-window
//! traffic, product, type, country, direction, code mixes). Every row is
//! then a pure function of `(seed, kind, index)`: it draws from its own
//! generator seeded by that triple. That is what makes the output identical
//! on any number of threads, and what makes duplicates cheap: a re-delivered
//! row is the row of an earlier index written again, byte for byte.
//!
//! Each output file holds a contiguous range of row indices plus its share
//! of re-delivered rows (runs of earlier rows, possibly from another file),
//! placed by the file's own seeded generator. Files are written in parallel,
//! each into a large buffer with hand-rolled number formatting (no per-row
//! allocation), then compressed when asked.
//!
//! What the data looks like (decisions the contract leaves open):
//! - account sizes follow Zipf (weight `1/rank`) with a per-kind factor, so
//!   a few big accounts carry most traffic and a long tail has little;
//! - traffic per hour of the window follows a weekly shape (quiet
//!   weekends), a 15 % growth trend and a daily curve peaking in the UTC
//!   afternoon, with a little day-to-day noise;
//! - about 70 % of an account's traffic goes to its home country; SIP calls
//!   have no country; rates depend on country, direction and product;
//! - hangup causes and message error codes come from the shipped tables
//!   (`docs/contracts/*.csv`) plus a few codes those tables do not know;
//! - charges have no subaccount; `Number Charges` accrue at midnight UTC.
//!
//! Here: the [`Spec`], the files' plan and [`generate`]; in `plan.rs` the
//! [`Plan`] (accounts, the draw of one row); in `write.rs` the CSV and
//! Parquet writers; in `tables.rs` the weighted tables and the mixes; in
//! `resources.rs` the server's endpoints, registrations and recordings
//! ([`generate_resources`]).

use std::path::{Path, PathBuf};

use chrono::{Datelike, NaiveDate};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::records::Kind;

mod plan;
mod resources;
mod tables;
mod write;

pub use plan::Plan;

/// How record files are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// Plain `*.csv`.
    Csv,
    /// `*.csv.gz` (fast gzip level).
    CsvGz,
    /// `*.csv.zst` (zstd level 1).
    CsvZst,
    /// `*.parquet` with typed columns (timestamps, DECIMAL(38,9), Int64).
    Parquet,
}

impl OutputFormat {
    /// Parses `csv`, `csv.gz`, `csv.zst` or `parquet`.
    pub fn parse(text: &str) -> Option<OutputFormat> {
        match text {
            "csv" => Some(OutputFormat::Csv),
            "csv.gz" | "gz" => Some(OutputFormat::CsvGz),
            "csv.zst" | "zst" => Some(OutputFormat::CsvZst),
            "parquet" => Some(OutputFormat::Parquet),
            _ => None,
        }
    }

    /// The file name extension, without the leading dot.
    pub fn extension(self) -> &'static str {
        match self {
            OutputFormat::Csv => "csv",
            OutputFormat::CsvGz => "csv.gz",
            OutputFormat::CsvZst => "csv.zst",
            OutputFormat::Parquet => "parquet",
        }
    }
}

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// Rows per kind, in [`Kind::ALL`] order, duplicates included.
    pub rows: [u64; 4],
    /// Parent accounts.
    pub accounts: u32,
    /// Subaccounts of each account.
    pub subaccounts: u32,
    /// First day of the window (UTC).
    pub start: NaiveDate,
    /// Days in the window.
    pub days: u32,
    /// Seed: the same seed gives the same bytes.
    pub seed: u64,
    /// File encoding.
    pub format: OutputFormat,
    /// Files per kind.
    pub files: u32,
    /// Share of each kind's rows that re-deliver an earlier row, in `[0, 0.5]`.
    pub duplicates: f64,
}

impl Spec {
    /// Checks the spec's ranges; the message says what is allowed.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.accounts == 0 && self.rows.iter().any(|&n| n > 0) {
            return Err("--accounts must be at least 1 when any rows are asked for".to_owned());
        }
        if self.accounts > 1_000_000 {
            return Err(format!("--accounts {} is more than 1000000", self.accounts));
        }
        if self.subaccounts > 10_000 {
            return Err(format!("--subaccounts {} is more than 10000", self.subaccounts));
        }
        if self.days == 0 || self.days > 3660 {
            return Err(format!("--days {} is not between 1 and 3660", self.days));
        }
        if self.files == 0 || self.files > 10_000 {
            return Err(format!("--files {} is not between 1 and 10000", self.files));
        }
        if !(0.0..=0.5).contains(&self.duplicates) {
            return Err(format!("--duplicates {} is not between 0 and 0.5", self.duplicates));
        }
        if self.start.year() < 1971 || self.start.year() > 9000 {
            return Err(format!("--start {} is not a year between 1971 and 9000", self.start));
        }
        Ok(())
    }

    /// Duplicate rows of a kind with `rows` rows: never all of them.
    fn duplicate_rows(&self, rows: u64) -> u64 {
        let wanted = (rows as f64 * self.duplicates).round() as u64;
        wanted.min(rows.saturating_sub(1))
    }
}

/// One file to write: which rows it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilePlan {
    /// The record kind.
    pub kind: Kind,
    /// Index among the kind's files.
    pub index: u32,
    /// Path relative to the output directory, `/`-separated.
    pub name: String,
    /// First unique row index.
    pub first: u64,
    /// Unique rows.
    pub unique: u64,
    /// Re-delivered rows mixed in.
    pub duplicates: u64,
    /// Unique rows of the whole kind (duplicates repeat one of them).
    pub kind_unique: u64,
}

/// What was written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// Files written, `accounts.csv` excluded, with their sizes in bytes.
    pub files: Vec<(String, u64)>,
    /// Rows written per kind, in [`Kind::ALL`] order.
    pub rows: [u64; 4],
    /// Of which re-delivered duplicates.
    pub duplicates: [u64; 4],
}

impl Written {
    /// Bytes written, `accounts.csv` excluded.
    pub fn bytes(&self) -> u64 {
        self.files.iter().map(|(_, b)| b).sum()
    }
}

/// Writes the data set of `spec` under `out` (which must exist), files in
/// parallel.
pub fn generate(spec: &Spec, out: &Path) -> Result<Written> {
    generate_with(spec, out, &|_, _| {})
}

/// [`generate`], telling `on_written` the rows and bytes written as they
/// are (added amounts, from the writing threads: rows at each 4 MiB of CSV
/// or at the end of a Parquet file, bytes at each write to a file).
pub fn generate_with(spec: &Spec, out: &Path, on_written: &(dyn Fn(u64, u64) + Sync)) -> Result<Written> {
    let plan = Plan::new(spec)?;
    let accounts_path = out.join("accounts.csv");
    std::fs::write(&accounts_path, plan.accounts_csv()).map_err(|e| Error::io(&accounts_path, e))?;
    let files = plan.files();
    for kind in Kind::ALL {
        if files.iter().any(|f| f.kind == kind) {
            let folder = out.join(kind.name());
            std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
        }
    }
    let sizes: Vec<Result<u64>> = files
        .par_iter()
        .map(|file| {
            let path: PathBuf = out.join(&file.name);
            let handle = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
            let counted = Counted { inner: handle, on_written };
            plan.write_file_counted(file, counted, &|rows| on_written(rows, 0)).map_err(|e| Error::io(&path, e))?;
            Ok(std::fs::metadata(&path).map_err(|e| Error::io(&path, e))?.len())
        })
        .collect();
    let mut written = Written::default();
    for (file, size) in files.iter().zip(sizes) {
        let k = file.kind as usize;
        written.rows[k] += file.unique + file.duplicates;
        written.duplicates[k] += file.duplicates;
        written.files.push((file.name.clone(), size?));
    }
    Ok(written)
}

/// Writes the server's resources for the data set of `spec` under `out`:
/// endpoints, registrations and recordings of the same accounts. The files
/// written, with their sizes.
pub fn generate_resources(spec: &Spec, out: &Path) -> Result<Vec<(String, u64)>> {
    resources::write(&Plan::new(spec)?, out)
}

/// A file that tells [`generate_with`]'s listener the bytes written to it.
struct Counted<'a, W> {
    inner: W,
    on_written: &'a (dyn Fn(u64, u64) + Sync),
}

impl<W: std::io::Write> std::io::Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        (self.on_written)(0, n as u64);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::plan::*;
    use super::tables::*;
    use super::write::*;
    use super::*;

    fn spec() -> Spec {
        Spec {
            rows: [2000, 1000, 300, 50],
            accounts: 7,
            subaccounts: 3,
            start: NaiveDate::from_ymd_opt(2026, 8, 1).unwrap_or_default(),
            days: 10,
            seed: 7,
            format: OutputFormat::Csv,
            files: 3,
            duplicates: 0.02,
        }
    }

    #[test]
    fn tables_pick_by_weight_and_never_pick_zero_weights() {
        let table = Table::new(&[1, 0, 3]);
        assert_eq!(pick(&table, 0), 0);
        assert_eq!(pick(&table, (1 << 30) - 1), 0);
        assert_eq!(pick(&table, 1 << 30), 2);
        assert_eq!(pick(&table, u32::MAX), 2);
    }

    #[test]
    fn files_split_rows_and_duplicates_exactly() {
        let plan = Plan::new(&spec()).unwrap();
        let files = plan.files();
        assert_eq!(files.len(), 12);
        for kind in Kind::ALL {
            let of_kind: Vec<&FilePlan> = files.iter().filter(|f| f.kind == kind).collect();
            let rows: u64 = of_kind.iter().map(|f| f.unique + f.duplicates).sum();
            assert_eq!(rows, spec().rows[kind as usize]);
            let duplicates: u64 = of_kind.iter().map(|f| f.duplicates).sum();
            assert_eq!(duplicates, (spec().rows[kind as usize] as f64 * 0.02).round() as u64);
        }
    }

    #[test]
    fn a_row_depends_only_on_seed_kind_and_index() {
        let plan = Plan::new(&spec()).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        plan.push_csv(Kind::Calls, &plan.row(Kind::Calls, 17), &mut a);
        plan.push_csv(Kind::Calls, &plan.row(Kind::Calls, 17), &mut b);
        assert_eq!(a, b);
        let mut c = Vec::new();
        plan.push_csv(Kind::Calls, &plan.row(Kind::Calls, 18), &mut c);
        assert_ne!(a, c);
    }

    #[test]
    fn fixed_point_and_uuid_formats() {
        let mut buf = Vec::new();
        push_fixed5(&mut buf, 1_700);
        buf.push(b' ');
        push_fixed5(&mut buf, 1_234_567);
        assert_eq!(buf, b"0.01700 12.34567");
        let mut id = [0u8; 36];
        uuid(u64::MAX, 0, &mut id);
        assert_eq!(&id, b"ffffffff-ffff-4fff-8000-000000000000");
    }
}
