//! A store's accounts changed without an ingest: `accounts set-token
//! --store` publishes a new generation whose only new file is
//! `accounts/<name>.csv`, through the same manifest swap as an ingest
//! (under the store's writer lock, then the same garbage collection). No
//! published file is edited; a running `serve --store` follows the new
//! generation like any other.
//!
//! A later ingest whose data folder has an `accounts.csv` publishes that
//! file instead (as it always does): the data folder's file is the source
//! of truth, so a token meant to last goes there too. That ingest names the
//! accounts whose token it removes.

use std::path::Path;

use super::generation;
use super::Manifest;
use crate::error::{Error, Result};

/// Publishes a generation of `store` whose accounts are `edit` applied to
/// the current accounts file (`None`: the store has none); every other file
/// of the generation is kept. Returns the new generation's number.
pub fn publish_accounts(store: &Path, edit: impl FnOnce(Option<&[u8]>) -> Result<Vec<u8>>) -> Result<u64> {
    // Refused before the lock is taken, so that a first ingest at work is
    // told apart from this command's own lock.
    read(store)?;
    let lock = generation::lock(store)?;
    let old = read(store)?;
    // As an ingest: a later generation's files are not collected.
    generation::check_not_behind(store, &old)?;
    old.keep_current(store)?;
    let current = read_accounts(store, &old)?;
    let bytes = edit(current.as_ref().map(|(_, bytes)| bytes.as_slice()))?;
    crate::records::accounts::Accounts::parse(&bytes, "accounts.csv")?;
    let generation = old.generation + 1;
    // A name no file of the current generation has (an ingest's accounts
    // file is accounts/<ingest id>.csv).
    let mut name = format!("accounts/g{generation}.csv");
    if old.accounts_csv.as_deref() == Some(name.as_str()) {
        name = format!("accounts/g{generation}-edit.csv");
    }
    let path = store.join(&name);
    let folder = store.join("accounts");
    std::fs::create_dir_all(&folder).map_err(|e| Error::io(&folder, e))?;
    let mut manifest = old.clone();
    manifest.accounts_csv = Some(name.clone());
    manifest.generation = generation;
    let tag = format!("accounts-g{generation}");
    let published = super::write_synced(&path, &bytes)
        .and_then(|()| super::sync_dir(&folder))
        .and_then(|()| {
            let sums = std::collections::HashMap::from([(path.clone(), crate::checksum::FileSum::of(&bytes))]);
            generation::record_sums(store, &old, &mut manifest, &sums)
        })
        .and_then(|()| manifest.publish(store, &tag));
    if let Err(error) = published {
        // Nothing of the attempt is left (a full disk, say): its accounts
        // file, unless the manifest on disk took it after all, and its
        // temporary manifest.
        let taken = Manifest::read(store).ok().flatten().is_some_and(|now| now.accounts_csv == Some(name));
        if !taken {
            let _ = std::fs::remove_file(&path);
        }
        let _ = std::fs::remove_file(store.join(format!("{}.tmp-{tag}", super::MANIFEST)));
        return Err(error);
    }
    generation::collect_garbage(store, &[&old, &manifest]);
    drop(lock);
    Ok(generation)
}

fn read(store: &Path) -> Result<Manifest> {
    Manifest::read(store)?.ok_or_else(|| super::WithoutManifest::of(store).error(store))
}

fn read_accounts(store: &Path, manifest: &Manifest) -> Result<Option<(String, Vec<u8>)>> {
    match &manifest.accounts_csv {
        Some(name) => {
            let listed = manifest.file(store, name)?;
            let path = listed.path();
            let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
            listed.check(&bytes)?;
            Ok(Some((name.clone(), bytes)))
        }
        None => Ok(None),
    }
}
