//! Durable writes: a file written and synced, a directory synced so that a
//! rename in it survives a crash. The store's publish, the key files and
//! the Spark job's plan all go through these two; [`AtomicFile`] is a file
//! that appears whole or not at all (`summary -o`); [`Syncer`] syncs the
//! files of a publish on a thread of its own while the next ones are
//! written.

use std::path::{Path, PathBuf};

use crate::checksum::FileSum;
use crate::direct::Written;
use crate::error::{Error, Result};

/// Writes `bytes` to `path` and syncs the file to disk.
pub(crate) fn write_synced(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut file = std::fs::File::create(path).map_err(|e| Error::io(path, e))?;
    file.write_all(bytes).map_err(|e| Error::io(path, e))?;
    file.sync_all().map_err(|e| Error::io(path, e))
}

/// Syncs finished files to disk: on a thread of its own
/// ([`Syncer::background`]: the writer goes on with its next file while
/// the disk catches up, instead of waiting on each), or at once
/// ([`Syncer::at_once`]). A file may come with its last blocks still on
/// their way to the device ([`Written`]): the syncer waits for them, and
/// their write errors are its errors. A publish calls [`Syncer::wait`]
/// before its commit point: every file handed over is written whole and
/// on disk when it returns `Ok`.
///
/// The syncer also keeps the sum of every file handed over whose writer
/// computed one as it wrote ([`Written`] of a `DirectWriter`):
/// [`Syncer::wait`] gives them, by path, for the manifest.
#[derive(Debug)]
pub(crate) struct Syncer {
    sender: Option<std::sync::mpsc::Sender<Handed>>,
    thread: Option<std::thread::JoinHandle<Result<()>>>,
    sums: std::sync::Arc<std::sync::Mutex<Sums>>,
}

/// What a [`Syncer`]'s thread is handed: a file to sync, or a channel to
/// answer on once every file handed before it is synced.
enum Handed {
    File(PathBuf, Written),
    Barrier(std::sync::mpsc::Sender<()>),
}

/// The sums of the files a [`Syncer`] synced, by path.
pub(crate) type Sums = std::collections::HashMap<PathBuf, FileSum>;

/// Waits for `file`'s blocks, syncs it, and keeps its sum in `sums`.
fn sync_one(path: &Path, file: Written, sums: &std::sync::Mutex<Sums>) -> std::io::Result<()> {
    let finished = file.wait_summed()?;
    finished.file.sync_all()?;
    if let (Some(sum), Ok(mut sums)) = (finished.sum, sums.lock()) {
        sums.insert(path.to_owned(), sum);
    }
    Ok(())
}

impl Syncer {
    /// Files are synced one after the other on a thread of the syncer's.
    pub(crate) fn background() -> Syncer {
        let (sender, files) = std::sync::mpsc::channel::<Handed>();
        let sums = std::sync::Arc::new(std::sync::Mutex::new(Sums::new()));
        let kept = sums.clone();
        let thread = crate::threads::spawn("telemeter-sync", move || {
            let mut first_error = None;
            for handed in files {
                match handed {
                    Handed::File(path, file) => {
                        if let Err(e) = sync_one(&path, file, &kept) {
                            first_error.get_or_insert(Error::io(&path, e));
                        }
                    }
                    // The caller may be gone; nothing to tell then.
                    Handed::Barrier(done) => drop(done.send(())),
                }
            }
            first_error.map_or(Ok(()), Err)
        });
        match thread {
            Ok(thread) => Syncer { sender: Some(sender), thread: Some(thread), sums },
            // No thread to be had: sync in the writer's.
            Err(_) => Syncer::at_once(),
        }
    }

    /// Files are synced by the caller of [`Syncer::sync`], before it returns.
    pub(crate) fn at_once() -> Syncer {
        Syncer { sender: None, thread: None, sums: Default::default() }
    }

    /// Syncs `file` (written at `path`, or still being written) now, or
    /// hands it to the thread.
    pub(crate) fn sync(&self, path: &Path, file: impl Into<Written>) -> Result<()> {
        let file = file.into();
        let file = match &self.sender {
            Some(sender) => match sender.send(Handed::File(path.to_owned(), file)) {
                Ok(()) => return Ok(()),
                // The thread is gone: sync here.
                Err(std::sync::mpsc::SendError(Handed::File(_, file))) => file,
                Err(std::sync::mpsc::SendError(Handed::Barrier(_))) => return Ok(()),
            },
            None => file,
        };
        sync_one(path, file, &self.sums).map_err(|e| Error::io(path, e))
    }

    /// Adds the sums of files another process wrote and synced (a Spark
    /// write task's), so that [`Syncer::wait`] gives them too.
    pub(crate) fn add_sums(&self, sums: impl IntoIterator<Item = (PathBuf, FileSum)>) {
        if let Ok(mut kept) = self.sums.lock() {
            kept.extend(sums);
        }
    }

    /// Waits until every file handed over so far is written whole (and
    /// synced), so that it can be read back; a write error is still
    /// [`Syncer::wait`]'s.
    pub(crate) fn settle(&self) {
        if let Some(sender) = &self.sender {
            let (done, settled) = std::sync::mpsc::channel();
            if sender.send(Handed::Barrier(done)).is_ok() {
                // An error means the thread is gone: nothing is in flight.
                let _ = settled.recv();
            }
        }
    }

    /// Waits until every file handed over is synced; the first error, if
    /// any, else the sums of the files whose writers computed one.
    pub(crate) fn wait(mut self) -> Result<Sums> {
        drop(self.sender.take());
        if let Some(thread) = self.thread.take() {
            thread.join().map_err(|_| Error::Internal("the sync thread panicked".to_owned()))??;
        }
        let sums = self.sums.lock().map(|mut sums| std::mem::take(&mut *sums));
        sums.map_err(|_| Error::Internal("the sync thread panicked".to_owned()))
    }
}

/// Syncs a directory, so that a rename in it is durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    match std::fs::File::open(dir) {
        Ok(handle) => handle.sync_all().map_err(|e| Error::io(dir, e)),
        Err(e) => Err(Error::io(dir, e)),
    }
}

/// A file that appears at its path whole or not at all: written to a
/// temporary file beside it (same folder, so the rename is atomic), then
/// [`AtomicFile::commit`] syncs it, renames it over the path and syncs the
/// folder. Dropped without a commit, the temporary file is removed and the
/// path keeps what it held before.
#[derive(Debug)]
pub(crate) struct AtomicFile {
    path: PathBuf,
    temporary: PathBuf,
    file: Option<std::io::BufWriter<std::fs::File>>,
}

impl AtomicFile {
    /// Starts the file that will replace `path`.
    pub(crate) fn create(path: &Path) -> Result<AtomicFile> {
        if path.is_dir() {
            return Err(Error::io(path, "is a folder; give a file name"));
        }
        let name = path.file_name().ok_or_else(|| Error::io(path, "not a file name"))?.to_string_lossy();
        remove_stale_temporaries(path);
        let temporary = folder_of(path).join(format!(".{name}.tmp-{}", std::process::id()));
        // Named by the path asked for: the temporary name is ours, not the user's.
        let file = std::fs::File::create(&temporary).map_err(|e| Error::io(path, e))?;
        Ok(AtomicFile {
            path: path.to_owned(),
            temporary,
            file: Some(std::io::BufWriter::with_capacity(1 << 16, file)),
        })
    }

    /// The path the file will have.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Flushes and syncs the file, renames it over the path, syncs the folder.
    pub(crate) fn commit(mut self) -> Result<()> {
        let Some(file) = self.file.take() else { return Err(Error::Internal("file committed twice".to_owned())) };
        let result = file
            .into_inner()
            .map_err(|e| Error::io(&self.temporary, e.into_error()))
            .and_then(|file| file.sync_all().map_err(|e| Error::io(&self.temporary, e)))
            .and_then(|()| std::fs::rename(&self.temporary, &self.path).map_err(|e| Error::io(&self.path, e)));
        if let Err(error) = result {
            let _ = std::fs::remove_file(&self.temporary);
            return Err(error);
        }
        sync_dir(folder_of(&self.path))
    }

    fn writer(&mut self) -> std::io::Result<&mut std::io::BufWriter<std::fs::File>> {
        self.file.as_mut().ok_or_else(|| std::io::Error::other("file already committed"))
    }
}

/// Removes the temporary files `.NAME.tmp-PID` that [`AtomicFile`]s for
/// `path` left when their process was killed: those of processes that no
/// longer run. Best effort: only where `/proc` tells live processes from
/// dead ones, errors ignored.
fn remove_stale_temporaries(path: &Path) {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return };
    let proc = Path::new("/proc");
    if !proc.join("self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(folder_of(path)) else { return };
    let prefix = format!(".{name}.tmp-");
    let own = std::process::id().to_string();
    for entry in entries.flatten() {
        let file = entry.file_name();
        let Some(pid) = file.to_str().and_then(|f| f.strip_prefix(&prefix)) else { continue };
        let dead = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && pid != own && !proc.join(pid).exists();
        if dead && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The folder `path` is in (`.` for a bare file name).
fn folder_of(path: &Path) -> &Path {
    path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

impl std::io::Write for AtomicFile {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.writer()?.write(bytes)
    }

    fn write_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.writer()?.write_all(bytes)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.writer()?.flush()
    }
}

impl Drop for AtomicFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// Files handed to a background syncer from several threads are all
    /// written and synced when `wait` returns; at once, before `sync`
    /// returns.
    #[test]
    fn a_syncer_takes_files_from_any_thread() {
        let dir = tempfile::tempdir().unwrap();
        for syncer in [Syncer::background(), Syncer::at_once()] {
            std::thread::scope(|scope| {
                for t in 0..4 {
                    let (dir, syncer) = (dir.path(), &syncer);
                    scope.spawn(move || {
                        for i in 0..8 {
                            let path = dir.join(format!("{t}-{i}"));
                            let mut file = std::fs::File::create(&path).unwrap();
                            file.write_all(format!("{t} {i}").as_bytes()).unwrap();
                            syncer.sync(&path, file).unwrap();
                        }
                    });
                }
            });
            syncer.wait().unwrap();
            for (t, i) in (0..4).flat_map(|t| (0..8).map(move |i| (t, i))) {
                assert_eq!(std::fs::read_to_string(dir.path().join(format!("{t}-{i}"))).unwrap(), format!("{t} {i}"));
            }
        }
    }

    /// A file handed over with its last blocks still being written is
    /// whole on disk when `wait` returns; a write that failed is the
    /// syncer's error, naming the file.
    #[test]
    fn a_file_still_being_written_is_whole_after_the_wait_and_its_failure_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..3 * (1 << 20) + 77).map(|i: usize| (i % 251) as u8).collect();
        for syncer in [Syncer::background(), Syncer::at_once()] {
            let path = dir.path().join("behind");
            let mut out = crate::direct::DirectWriter::create(&path).unwrap();
            out.write_all(&data).unwrap();
            syncer.sync(&path, out.finish_behind()).unwrap();
            let sums = syncer.wait().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), data);
            assert_eq!(sums.get(&path), Some(&FileSum::of(&data)), "the sum of the bytes written");
        }
        let full = Path::new("/dev/full");
        if full.exists() {
            let syncer = Syncer::background();
            let mut out = crate::direct::DirectWriter::create(full).unwrap();
            // Less than a block: nothing reaches the device before the
            // last block, so the error comes with the file, to the syncer.
            out.write_all(&data[..100]).unwrap();
            syncer.sync(full, out.finish_behind()).unwrap();
            let error = syncer.wait().expect_err("a file written to /dev/full synced");
            assert!(error.to_string().contains("/dev/full"), "{error}");
        }
    }

    #[test]
    fn the_path_changes_only_on_commit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        std::fs::write(&path, "old").unwrap();
        let mut file = AtomicFile::create(&path).unwrap();
        file.write_all(b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        drop(file);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old", "dropped: nothing replaced");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "no temporary file left");

        let mut file = AtomicFile::create(&path).unwrap();
        file.write_all(b"new").unwrap();
        file.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(AtomicFile::create(dir.path()).is_err(), "a folder is not replaced");
    }
}
