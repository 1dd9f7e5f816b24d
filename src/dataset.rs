//! A data set to answer requests from: its accounts, loaded once, and the
//! [`Source`] of its records, a raw data directory or an ingested store.
//! Everything that depends on which of the two it is asks here: the pass
//! ([`Dataset::aggregate`]), one account's rows (`Dataset::account_rows`)
//! and the input files a run lists and checks ([`Dataset::inputs`]).

use std::path::{Path, PathBuf};

use crate::aggregate::rows::AccountRows;
use crate::aggregate::{self, Aggregate, AggregateOptions, Selector, Span};
use crate::error::{Notice, Result};
use crate::records::accounts::Accounts;
use crate::records::files::Inventory;
use crate::store::Store;

/// Where records come from, and the accounts that describe them.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// `accounts.csv`, loaded.
    pub accounts: Accounts,
    /// The records.
    pub source: Source,
}

/// Where a data set's records are read from.
#[derive(Clone, Debug)]
#[expect(clippy::large_enum_variant, reason = "one per data set, made once per command or generation")]
pub enum Source {
    /// A raw data directory (`records.md`): every pass reads its files.
    Raw(PathBuf),
    /// A store written by `telemeter ingest`, as of the generation
    /// published when it was opened (its manifest read once).
    Store(Store),
}

/// The files a data set's answers are read from that can change while a
/// run reads them: a raw directory's `accounts.csv` and record files. A
/// store has none: the files of the generation it opened are never
/// modified, and its lease keeps them.
#[derive(Debug, Default)]
pub struct Inputs {
    /// `accounts.csv`, when the directory has one.
    pub accounts: Option<PathBuf>,
    /// The record files, and the files in record folders no reader takes.
    pub inventory: Inventory,
}

impl Dataset {
    /// Opens a raw data directory (`records.md`).
    pub fn open(dir: &Path) -> Result<Dataset> {
        let meta = std::fs::metadata(dir).map_err(|e| crate::Error::io(dir, e))?;
        if !meta.is_dir() {
            return Err(crate::Error::io(dir, "not a directory"));
        }
        Ok(Dataset { accounts: Accounts::load(dir)?, source: Source::Raw(dir.to_owned()) })
    }

    /// Opens a store written by `telemeter ingest`: answers come from its
    /// rollups, as of the generation published when it is opened.
    pub fn open_store(dir: &Path) -> Result<Dataset> {
        let store = Store::open(dir)?;
        Ok(Dataset { accounts: store.accounts()?, source: Source::Store(store) })
    }

    /// The folder the data set was opened from, for display (logs, debug
    /// output): the data directory or the store directory. Code that reads
    /// from it matches on [`Dataset::source`] instead.
    pub fn dir(&self) -> &Path {
        match &self.source {
            Source::Raw(dir) => dir,
            Source::Store(store) => &store.dir,
        }
    }

    /// What is surprising about the data set's layout, for a warning: a
    /// raw directory with no record folder, files no reader takes, entries
    /// nothing reads (`Inventory::notices`). A store has none: `ingest`
    /// said them when it read the directory.
    pub fn notices(&self) -> Result<Vec<Notice>> {
        match &self.source {
            Source::Raw(dir) => Ok(Inventory::scan(dir)?.notices(dir)),
            Source::Store(_) => Ok(Vec::new()),
        }
    }

    /// When the records of `account` lie, for a notice about an empty
    /// answer that came without a pass (a store's rollups). A raw directory
    /// says `None`: only a pass knows, and its answer carries it
    /// (`Summary::covered`).
    pub fn account_span(&self, account: &str) -> Result<Option<Span>> {
        match &self.source {
            Source::Raw(_) => Ok(None),
            Source::Store(store) => store.account_span(account),
        }
    }

    /// The store, when the data set is one.
    pub fn store(&self) -> Option<&Store> {
        match &self.source {
            Source::Raw(_) => None,
            Source::Store(store) => Some(store),
        }
    }

    /// The input files as they are now (see [`Inputs`]): taken before and
    /// after a run, they tell whether the files changed meanwhile.
    pub fn inputs(&self) -> Result<Inputs> {
        match &self.source {
            Source::Raw(dir) => {
                let accounts = dir.join("accounts.csv");
                let accounts = accounts.is_file().then_some(accounts);
                Ok(Inputs { accounts, inventory: Inventory::scan(dir)? })
            }
            Source::Store(_) => Ok(Inputs::default()),
        }
    }

    /// `account`'s rows that `selector` keeps (its scope that account
    /// alone), in the report's order, and the pass that found them: none
    /// where a store's rollups answer, otherwise one pass over the records
    /// (raw files: one that builds no owned key per group).
    pub(crate) fn account_rows(&self, selector: &Selector, account: &str) -> Result<(AccountRows, Option<Aggregate>)> {
        match &self.source {
            Source::Raw(dir) => {
                let (rows, pass) = aggregate::account_rows(dir, selector, account, AggregateOptions::default())?;
                Ok((rows, Some(pass)))
            }
            Source::Store(store) => match store.account_rows(selector, account)? {
                Some(rows) => Ok((rows, None)),
                None => {
                    let pass = store.aggregate(selector)?;
                    Ok((AccountRows::of_groups(&pass.groups, account), Some(pass)))
                }
            },
        }
    }

    /// One pass over every record, keeping what `selector` keeps.
    /// `options` apply to raw data only: a store's rows were checked at
    /// ingest, and it mostly answers from rollups, not files.
    pub fn aggregate(&self, selector: &Selector, options: AggregateOptions<'_>) -> Result<Aggregate> {
        match &self.source {
            Source::Raw(dir) => aggregate::aggregate(dir, selector, options),
            Source::Store(store) => store.aggregate(selector),
        }
    }
}
