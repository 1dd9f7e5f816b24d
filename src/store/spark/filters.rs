//! The record-id filters the driver's plan replays (`publish.rs`), loaded
//! from the store's index files on a thread of their own while the job
//! checks and deduplicates the rows.
//!
//! A filter is the local ingest's (`ingest::dedup::filter_for` and
//! `load_filter`: the same size, the same stored ids), so the plan's
//! decisions do not change; only when it is loaded does. Loading reads
//! 32 bytes per stored row, the one cost of the plan that grows with the
//! store's history, and the driver is otherwise idle while the executors
//! work. One kind at a time, in the plan's order: a kind's filter is
//! loaded while the plan uses the one before it, so at most two are held.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::super::index::{Filter, IndexFile};
use super::super::ingest::dedup::{filter_for, load_filter};
use super::super::Manifest;
use crate::error::{Error, Result};
use crate::records::files::InputFile;
use crate::records::Kind;

/// The filters of every kind, in [`Kind::ALL`] order, as they are loaded.
pub(super) struct StoredFilters {
    /// Each kind's filter (or why it could not be loaded), in order.
    loaded: Option<Receiver<(Kind, Result<Filter>)>>,
    /// Set when the plan is gone: the loader stops after its kind.
    stop: Arc<AtomicBool>,
    loader: Option<JoinHandle<()>>,
}

impl StoredFilters {
    /// Starts loading the filters of an ingest of `files` into the store at
    /// `store`, whose manifest is `old`; `filter_bytes` caps each
    /// (`--filter-mb`).
    pub(super) fn start(store: &Path, old: &Manifest, files: &[InputFile], filter_bytes: u64) -> StoredFilters {
        let (store, old, files): (PathBuf, Manifest, Vec<InputFile>) = (store.to_owned(), old.clone(), files.to_vec());
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        // Rendezvous: the next kind is sent when the plan asks for it.
        let (send, loaded) = sync_channel(0);
        let loader = std::thread::Builder::new().name("telemeter-filters".to_owned()).spawn(move || {
            for kind in Kind::ALL {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                let of_kind: Vec<(u32, &InputFile)> =
                    files.iter().enumerate().filter(|(_, f)| f.kind == kind).map(|(i, f)| (i as u32, f)).collect();
                let filter = load(&store, &old, kind, &of_kind, filter_bytes);
                if send.send((kind, filter)).is_err() {
                    return;
                }
            }
        });
        match loader {
            Ok(loader) => StoredFilters { loaded: Some(loaded), stop, loader: Some(loader) },
            // No thread: each filter is loaded when the plan asks for it.
            Err(_) => StoredFilters { loaded: None, stop, loader: None },
        }
    }

    /// The filter of `kind`, the next in [`Kind::ALL`] order after the
    /// last one asked for; `of_kind` and the rest load it here when no
    /// thread does.
    pub(super) fn next(
        &mut self,
        store: &Path,
        old: &Manifest,
        kind: Kind,
        of_kind: &[(u32, &InputFile)],
        filter_bytes: u64,
    ) -> Result<Filter> {
        let Some(loaded) = &self.loaded else {
            return load(store, old, kind, of_kind, filter_bytes);
        };
        match loaded.recv() {
            Ok((theirs, filter)) if theirs == kind => filter,
            Ok((theirs, _)) => Err(Error::Internal(format!("the {theirs} record-id filter came for {kind}"))),
            Err(_) => Err(Error::Internal(format!("the thread loading the record-id filters stopped before {kind}"))),
        }
    }
}

impl Drop for StoredFilters {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The loader's next send fails, or it sees `stop` before its next kind.
        drop(self.loaded.take());
        if let Some(loader) = self.loader.take() {
            let _ = loader.join();
        }
    }
}

/// The local ingest's filter of `kind` for the new files `of_kind`:
/// sized by the stored rows and the new files, loaded with the stored ids.
fn load(store: &Path, old: &Manifest, kind: Kind, of_kind: &[(u32, &InputFile)], filter_bytes: u64) -> Result<Filter> {
    let files = old.kind(kind);
    let stored: Vec<IndexFile> =
        files.index.iter().map(|name| IndexFile::open_checked(old.file(store, name)?)).collect::<Result<_>>()?;
    let mut filter = filter_for(filter_bytes, &files, of_kind);
    load_filter(&mut filter, &stored)?;
    Ok(filter)
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
        assert!(filters.loader.is_some(), "loaded on a thread");
        let mut calls = filters.next(dir.path(), &old, Kind::Calls, &[], 1 << 30).expect("calls");
        assert_eq!(calls.bytes(), Filter::MIN_BYTES, "sized as the local ingest sizes it");
        assert!(!calls.check_and_insert((1, 2)), "holds no stored id");
        let error = filters.next(dir.path(), &old, Kind::Transcriptions, &[], 1 << 30).err().expect("out of turn");
        assert!(error.to_string().contains("messages record-id filter came for transcriptions"), "{error}");
        drop(filters);

        // Without a thread, each is loaded when asked for.
        let mut inline = StoredFilters { loaded: None, stop: Arc::new(AtomicBool::new(false)), loader: None };
        let charges = inline.next(dir.path(), &old, Kind::Charges, &[], 1 << 30).expect("charges");
        assert_eq!(charges.bytes(), Filter::MIN_BYTES);
    }
}
