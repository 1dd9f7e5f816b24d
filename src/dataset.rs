//! A data set to answer requests from: a raw data directory today, with its
//! accounts loaded once.

use std::path::{Path, PathBuf};

use crate::aggregate::{self, Aggregate, OnBadRow, Selector};
use crate::error::Result;
use crate::records::accounts::Accounts;

/// Where records come from, and the accounts that describe them.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// The data directory.
    pub dir: PathBuf,
    /// `accounts.csv`, loaded.
    pub accounts: Accounts,
}

impl Dataset {
    /// Opens a raw data directory (`records.md`).
    pub fn open(dir: &Path) -> Result<Dataset> {
        let meta = std::fs::metadata(dir).map_err(|e| crate::Error::io(dir, e))?;
        if !meta.is_dir() {
            return Err(crate::Error::io(dir, "not a directory"));
        }
        Ok(Dataset { dir: dir.to_owned(), accounts: Accounts::load(dir)? })
    }

    /// One pass over every record, keeping what `selector` keeps.
    pub fn aggregate(&self, selector: &Selector, on_bad_row: OnBadRow) -> Result<Aggregate> {
        aggregate::aggregate(&self.dir, selector, on_bad_row)
    }
}
