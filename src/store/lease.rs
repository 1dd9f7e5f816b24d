//! Read leases: how a reader of one generation keeps garbage collection
//! away from its files, across processes.
//!
//! A reader (`serve --store`, `summary --store`, `report --store`) holds
//! `STORE/readers/<generation>.<pid>.<random>.lease` while it may open files
//! of that generation. The file holds the manifest the reader read, and the
//! reader keeps it open with a shared lock (`flock`, through
//! [`std::fs::File::lock_shared`]); dropping the [`Lease`] deletes the file
//! and the lock goes with the descriptor, also when the process is killed.
//!
//! Collection ([`live_manifests`], under the ingest lock, after a publish)
//! tries an exclusive lock on each lease file: a lease it cannot lock is
//! live and its manifest's files are kept; a lease it can lock belongs to a
//! reader that is gone, and the file is deleted.
//!
//! A lease is written under a temporary name, locked, filled and only then
//! renamed into place, so that collection never sees a lease that is not
//! locked yet or half written. A reader takes its lease *after* reading the
//! manifest and then reads the manifest again: if the generation is still
//! the same, every later collection (which runs after a later publish) sees
//! the lease; if not, it starts over with the newer generation
//! ([`super::Store::open`]).

use std::fs::{File, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The folder of the leases, in the store.
pub const READERS: &str = "readers";

/// The suffix of a lease file.
const SUFFIX: &str = ".lease";

/// A held lease on one generation; released (and its file deleted) on drop.
#[derive(Debug)]
pub struct Lease {
    path: PathBuf,
    /// Kept open: the lock lives as long as this descriptor.
    _file: File,
}

/// The outcome of [`Lease::take`].
#[derive(Debug)]
pub enum Taken {
    /// The lease is held.
    Held(Lease),
    /// The store cannot be written by this reader (a read-only mount, no
    /// permission, a full disk, a spent quota: [`unwritable`]): it is read
    /// without a lease, protected only by the "one generation late" rule of
    /// collection. The text says why.
    Unwritable(String),
}

impl Lease {
    /// Takes a lease on `generation` of `store`, whose manifest is `manifest`
    /// (the bytes the reader read). An error is a race with collection or
    /// an unexpected failure: the caller may try again.
    pub fn take(store: &Path, generation: u64, manifest: &[u8]) -> Result<Taken> {
        let folder = store.join(READERS);
        let tag = format!("{}.{}", std::process::id(), uuid::Uuid::new_v4().simple());
        let temporary = folder.join(format!(".{tag}.tmp"));
        let path = folder.join(format!("{generation}.{tag}{SUFFIX}"));
        let created = std::fs::create_dir_all(&folder).and_then(|()| File::create(&temporary));
        let mut file = match created {
            Ok(file) => file,
            Err(e) if unwritable(&e) => return Ok(Taken::Unwritable(format!("{}: {e}", folder.display()))),
            Err(e) => return Err(Error::io(&temporary, e)),
        };
        let taken = file
            .lock_shared()
            .and_then(|()| file.write_all(manifest))
            .and_then(|()| std::fs::rename(&temporary, &path));
        if let Err(e) = taken {
            // Nothing of the attempt is left: a full disk leaves no empty
            // lease file behind either.
            drop(file);
            let _ = std::fs::remove_file(&temporary);
            if unwritable(&e) {
                return Ok(Taken::Unwritable(format!("{}: {e}", temporary.display())));
            }
            return Err(Error::io(&path, format!("cannot take a read lease: {e}")));
        }
        Ok(Taken::Held(Lease { path, _file: file }))
    }

    /// The lease file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Whether `error` says the store cannot be written now: a read-only
/// mount, no permission, a full disk or a spent quota. A reader then reads
/// without a lease rather than fail: reading never needs free space.
pub fn unwritable(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    let by_kind = matches!(
        error.kind(),
        ErrorKind::PermissionDenied
            | ErrorKind::ReadOnlyFilesystem
            | ErrorKind::StorageFull
            | ErrorKind::QuotaExceeded
            | ErrorKind::FileTooLarge
    );
    let by_number = matches!(
        error.raw_os_error(),
        Some(libc::EACCES | libc::EPERM | libc::EROFS | libc::ENOSPC | libc::EDQUOT | libc::EFBIG)
    );
    by_kind || by_number
}

impl Drop for Lease {
    fn drop(&mut self) {
        // The lock is released when the descriptor closes, right after.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What collection learns from the leases of a store.
#[derive(Debug, Default)]
pub struct Leases {
    /// The manifests (as written) of every live lease.
    pub manifests: Vec<Vec<u8>>,
    /// Lease files of readers that are gone, deleted now.
    pub removed: usize,
}

/// The manifests held by live readers of `store`; deletes the lease files
/// (and leftover temporary ones) that no process holds any more.
///
/// An error means a live lease could not be read: the caller must then keep
/// everything.
pub fn live_manifests(store: &Path) -> Result<Leases> {
    let folder = store.join(READERS);
    let mut leases = Leases::default();
    let entries = match std::fs::read_dir(&folder) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(leases),
        Err(e) => return Err(Error::io(&folder, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(&folder, e))?;
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let is_lease = name.ends_with(SUFFIX);
        if !is_lease && !name.ends_with(".tmp") {
            continue;
        }
        let file = match File::open(&path) {
            Ok(file) => file,
            // Released (deleted) since the listing.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&path, e)),
        };
        match file.try_lock() {
            Ok(()) => {
                // Nobody holds it: the reader is gone (or a temporary file
                // is not locked yet; its reader then fails and starts over).
                if std::fs::remove_file(&path).is_ok() {
                    leases.removed += 1;
                }
            }
            Err(TryLockError::WouldBlock) if is_lease => {
                let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
                leases.manifests.push(bytes);
            }
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) => return Err(Error::io(&path, e)),
        }
    }
    Ok(leases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_lease_is_live_and_a_released_one_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let Taken::Held(lease) = Lease::take(dir.path(), 7, b"{\"generation\":7}").unwrap() else { panic!() };
        assert!(lease.path().file_name().unwrap().to_string_lossy().starts_with("7."));
        let leases = live_manifests(dir.path()).unwrap();
        assert_eq!((leases.manifests, leases.removed), (vec![b"{\"generation\":7}".to_vec()], 0));
        drop(lease);
        assert!(std::fs::read_dir(dir.path().join(READERS)).unwrap().next().is_none());
    }

    /// A full disk, a spent quota, a read-only mount and a refused
    /// permission make a reader go without a lease; a missing folder or a
    /// lock the file system does not give stay errors.
    #[test]
    fn a_store_that_cannot_be_written_now_is_read_without_a_lease() {
        use std::io::{Error as IoError, ErrorKind};
        for errno in [libc::ENOSPC, libc::EDQUOT, libc::EROFS, libc::EACCES, libc::EPERM, libc::EFBIG] {
            assert!(unwritable(&IoError::from_raw_os_error(errno)), "errno {errno}");
        }
        for kind in [ErrorKind::StorageFull, ErrorKind::PermissionDenied, ErrorKind::ReadOnlyFilesystem] {
            assert!(unwritable(&IoError::from(kind)), "{kind:?}");
        }
        for errno in [libc::ENOENT, libc::ENOLCK, libc::EIO, libc::EMFILE] {
            assert!(!unwritable(&IoError::from_raw_os_error(errno)), "errno {errno}");
        }
    }

    #[test]
    fn an_unlocked_lease_file_is_a_dead_readers_and_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join(READERS);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("3.1234.0123456789abcdef0123456789abcdef.lease"), b"{}").unwrap();
        std::fs::write(folder.join(".1234.0123456789abcdef0123456789abcdef.tmp"), b"").unwrap();
        let Taken::Held(held) = Lease::take(dir.path(), 4, b"four").unwrap() else { panic!() };
        let leases = live_manifests(dir.path()).unwrap();
        assert_eq!((leases.manifests, leases.removed), (vec![b"four".to_vec()], 2));
        let left: Vec<_> = std::fs::read_dir(&folder).unwrap().flatten().map(|e| e.path()).collect();
        assert_eq!(left, vec![held.path().to_owned()]);
    }
}
