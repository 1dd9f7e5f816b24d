//! The record-id filters the driver's plan replays (`publish.rs`), loaded
//! from the store's index files on a thread of their own while the job
//! checks and deduplicates the rows.
//!
//! A filter is the local ingest's (`ingest::dedup::loaded_filter`: the
//! same size, the same stored ids), so the plan's
//! decisions do not change; only when it is loaded does. Loading reads
//! 32 bytes per stored row, the one cost of the plan that grows with the
//! store's history, and the driver is otherwise idle while the executors
//! work. One kind at a time, in the plan's order: a kind's filter is
//! loaded while the plan uses the one before it, so at most two are held.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver};

use super::super::index::Filter;
use super::super::ingest::dedup::{loaded_filter, stored_index};
use super::super::Manifest;
use crate::error::{Error, Result};
use crate::records::files::InputFile;
use crate::records::Kind;

/// The filters of every kind, in [`Kind::ALL`] order, as they are loaded.
pub(super) enum StoredFilters {
    /// On a thread: each kind's filter (or why it could not be loaded),
    /// in order. Dropped, the thread stops at its next send, once the kind
    /// it loads is loaded; it is not waited for, so an ingest that fails
    /// (a bad row, a conflict, a failed job) says so at once, not after a
    /// filter of a long history has loaded. It only reads the store.
    Loading { loaded: Receiver<(Kind, Result<Filter>)> },
    /// No thread could start: each is loaded when the plan asks for it.
    Asked(Box<FilterSources>),
}

/// What the filters are loaded from.
pub(super) struct FilterSources {
    store: PathBuf,
    old: Manifest,
    files: Vec<InputFile>,
    /// The most bytes of a filter (`--filter-mb`).
    filter_bytes: u64,
}

impl StoredFilters {
    /// Starts loading the filters of an ingest of `files` into the store at
    /// `store`, whose manifest is `old`; `filter_bytes` caps each
    /// (`--filter-mb`).
    pub(super) fn start(store: &Path, old: &Manifest, files: &[InputFile], filter_bytes: u64) -> StoredFilters {
        let stored =
            || FilterSources { store: store.to_owned(), old: old.clone(), files: files.to_vec(), filter_bytes };
        let theirs = stored();
        // Rendezvous: the next kind is sent when the plan asks for it.
        let (send, loaded) = sync_channel(0);
        let loader = std::thread::Builder::new().name("telemeter-filters".to_owned()).spawn(move || {
            for kind in Kind::ALL {
                // The plan is gone (an error, or the end): stop.
                if send.send((kind, theirs.load(kind))).is_err() {
                    return;
                }
            }
        });
        match loader {
            Ok(_) => StoredFilters::Loading { loaded },
            Err(_) => StoredFilters::Asked(Box::new(stored())),
        }
    }

    /// The filter of `kind`, the next in [`Kind::ALL`] order after the
    /// last one asked for.
    pub(super) fn next(&mut self, kind: Kind) -> Result<Filter> {
        match self {
            StoredFilters::Asked(stored) => stored.load(kind),
            StoredFilters::Loading { loaded } => match loaded.recv() {
                Ok((theirs, filter)) if theirs == kind => filter,
                Ok((theirs, _)) => Err(Error::Internal(format!("the {theirs} record-id filter came for {kind}"))),
                _ => Err(Error::Internal(format!("the thread loading the record-id filters stopped before {kind}"))),
            },
        }
    }
}

impl FilterSources {
    /// The local ingest's filter of `kind` for the new files of that kind:
    /// sized by the stored rows and the new files, loaded with the stored
    /// ids.
    fn load(&self, kind: Kind) -> Result<Filter> {
        let of_kind = crate::records::files::of_kind(&self.files, kind);
        let index = stored_index(&self.store, &self.old, kind)?;
        loaded_filter(self.filter_bytes, &self.old.kind(kind), &index, &of_kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The filters come in the plan's order, each sized as the local
    /// ingest sizes it; a kind asked for out of turn is an error, and
    /// dropping the filters before the last stops the loader.
    #[test]
    fn filters_come_in_kind_order_and_stop_when_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let old = Manifest::default();
        let mut filters = StoredFilters::start(dir.path(), &old, &[], 1 << 30);
        assert!(matches!(filters, StoredFilters::Loading { .. }), "loaded on a thread");
        let mut calls = filters.next(Kind::Calls).expect("calls");
        assert_eq!(calls.bytes(), Filter::MIN_BYTES, "sized as the local ingest sizes it");
        assert!(!calls.check_and_insert(crate::records::dedup::IdHash { hi: 1, lo: 2 }), "holds no stored id");
        let error = filters.next(Kind::Transcriptions).err().expect("out of turn");
        assert!(error.to_string().contains("messages record-id filter came for transcriptions"), "{error}");
        drop(filters);

        // Without a thread, each is loaded when asked for.
        let stored = FilterSources { store: dir.path().to_owned(), old, files: Vec::new(), filter_bytes: 1 << 30 };
        let mut asked = StoredFilters::Asked(Box::new(stored));
        assert_eq!(asked.next(Kind::Charges).expect("charges").bytes(), Filter::MIN_BYTES);
    }
}
