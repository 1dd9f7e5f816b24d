//! A data set to answer requests from: a raw data directory or an ingested
//! store, with its accounts loaded once.

use std::path::{Path, PathBuf};

use crate::aggregate::{self, Aggregate, OnBadRow, Selector};
use crate::error::Result;
use crate::records::accounts::Accounts;
use crate::store::Store;

/// Where records come from, and the accounts that describe them.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// The data directory (or the store directory).
    pub dir: PathBuf,
    /// `accounts.csv`, loaded.
    pub accounts: Accounts,
    /// The store, when the data set is one (its manifest read once).
    pub store: Option<Store>,
}

impl Dataset {
    /// Opens a raw data directory (`records.md`).
    pub fn open(dir: &Path) -> Result<Dataset> {
        let meta = std::fs::metadata(dir).map_err(|e| crate::Error::io(dir, e))?;
        if !meta.is_dir() {
            return Err(crate::Error::io(dir, "not a directory"));
        }
        Ok(Dataset { dir: dir.to_owned(), accounts: Accounts::load(dir)?, store: None })
    }

    /// Opens a store written by `telemeter ingest`: answers come from its
    /// rollups, as of the generation published when it is opened.
    pub fn open_store(dir: &Path) -> Result<Dataset> {
        let store = Store::open(dir)?;
        Ok(Dataset { dir: dir.to_owned(), accounts: store.accounts()?, store: Some(store) })
    }

    /// One account's rows in the report's order, when the data set can
    /// give them without a pass (a store whose rollups answer `selector`).
    pub(crate) fn account_rows(
        &self,
        selector: &Selector,
        account: &str,
    ) -> Result<Option<crate::store::answer::AccountRows>> {
        match &self.store {
            Some(store) => store.account_rows(selector, account),
            None => Ok(None),
        }
    }

    /// One pass over every record, keeping what `selector` keeps.
    /// A store's rows were checked at ingest: `on_bad_row` applies to raw
    /// data only.
    pub fn aggregate(&self, selector: &Selector, on_bad_row: OnBadRow) -> Result<Aggregate> {
        if let Some(store) = &self.store {
            return store.aggregate(selector);
        }
        aggregate::aggregate(&self.dir, selector, on_bad_row)
    }
}
