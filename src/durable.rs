//! Durable writes: a file written and synced, a directory synced so that a
//! rename in it survives a crash. The store's publish, the key files and
//! the Spark job's plan all go through these two.

use std::path::Path;

use crate::error::{Error, Result};

/// Writes `bytes` to `path` and syncs the file to disk.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    file.write_all(bytes).map_err(|e| Error::io(path, e))?;
    file.sync_all().map_err(|e| Error::io(path, e))
}

/// Syncs a directory, so that a rename in it is durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    match std::fs::File::open(dir) {
        Ok(handle) => handle.sync_all().map_err(|e| Error::io(dir, e)),
        Err(e) => Err(Error::io(dir, e)),
    }
}
