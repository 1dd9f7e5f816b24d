//! Bulk files written and read around the page cache (`O_DIRECT`).
//!
//! An ingest writes its records, index, rollup and partial (spill) files
//! once, and reads back only the index (its candidate checks) and the
//! partial files (the merge), in large reads. Through the page cache
//! every byte is copied into a page the kernel must first find and take
//! (and, on a virtual machine whose freed memory goes back to the host,
//! fault in: many times the system time of a direct write; measure with
//! `bench/ingest-ab.sh`). Direct I/O
//! moves the bytes from our own aligned buffer to the device, as
//! databases' bulk writers do.
//!
//! A stored index file is the exception among reads: the ingest first
//! reads it whole through the page cache to check its sum, so its later
//! reads (the filter load, the candidate checks, a Spark dedup task on
//! the same host) take it from there, not from the device again
//! ([`DirectReader::open_cached`]).
//!
//! Where the filesystem refuses `O_DIRECT` at open (tmpfs before Linux
//! 6.6, some FUSE and network filesystems) or at a write or read
//! (`EINVAL`: ext4 refuses a length off the block size), the same code
//! writes and reads through the page cache: the bytes on disk are the same
//! either way.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::checksum::{FileSum, Summer};

/// The alignment of direct I/O's offsets, lengths and buffers (the largest
/// logical block size in use).
const ALIGN: usize = 4096;

/// Bytes written per call: a whole number of [`ALIGN`] blocks.
const WRITE_BYTES: usize = 1 << 20;

/// Buffers of a [`DirectWriter`] of its own at most: one filling, the
/// others queued for the device or being written. With two, a writer that
/// fills a block faster than the device takes one (a Parquet page, a
/// spill's rows) waits on every block; more let it run further ahead of
/// the device, at [`WRITE_BYTES`] of memory each (re-tune with
/// `bench/ingest-ab.sh`). Made as needed: a file of one block has one.
const MAX_BUFFERS: usize = 8;

/// Buffers beyond [`MAX_BUFFERS`] that the process's writers share: a
/// writer whose own are all queued takes one of these while any is left
/// (a burst, such as an index file or a Parquet row group written whole,
/// then queues deeper instead of waiting on the device), and gives it back
/// when its file is done. Shared, so that the bytes queued stay bounded
/// however many files are written at once (re-tune with
/// `bench/ingest-ab.sh`).
const SHARED_BUFFERS: usize = 64;

/// The shared buffers taken now.
static SHARED: Budget = Budget::new(SHARED_BUFFERS);

/// Block buffers kept, at most, for the next writers once a writer is done
/// with them. A new buffer is zeroed (`calloc`'s `memset`, its fresh pages
/// faulted in): the pool spares most writers that cost, which shows in a
/// small ingest's instructions (measure with callgrind over a small
/// ingest). Bounded, so that a burst of writers does not keep its
/// buffers from the rest of the process.
const POOLED: usize = 32;

/// The block buffers writers are done with ([`Pooled`]).
static POOL: std::sync::Mutex<Vec<AlignedBuffer>> = std::sync::Mutex::new(Vec::new());

/// A writer's block buffer ([`WRITE_BYTES`]): from the pool where one is
/// there, else new; back to the pool when dropped, wherever that is (the
/// writer, its thread, a queue), while the pool holds fewer than
/// [`POOLED`]. Its bytes are whatever the last writer left: a writer
/// writes only what it filled, and pads its last block itself.
#[derive(Debug)]
struct Pooled(AlignedBuffer);

impl Pooled {
    fn take() -> Pooled {
        let kept = POOL.lock().ok().and_then(|mut pool| pool.pop());
        Pooled(kept.unwrap_or_else(|| AlignedBuffer::new(WRITE_BYTES)))
    }
}

impl std::ops::Deref for Pooled {
    type Target = AlignedBuffer;
    fn deref(&self) -> &AlignedBuffer {
        &self.0
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut AlignedBuffer {
        &mut self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let buffer = std::mem::take(&mut self.0);
        if let Ok(mut pool) = POOL.lock() {
            if pool.len() < POOLED {
                pool.push(buffer);
            }
        }
    }
}

/// A count of buffers taken from a fixed number.
#[derive(Debug)]
struct Budget {
    taken: std::sync::atomic::AtomicUsize,
    most: usize,
}

impl Budget {
    const fn new(most: usize) -> Budget {
        Budget { taken: std::sync::atomic::AtomicUsize::new(0), most }
    }
}

/// A byte buffer whose usable part starts at an [`ALIGN`]ed address, from a
/// plain `Vec` (no `unsafe`): it is allocated once, `ALIGN` bytes larger,
/// and never grows, so the aligned start stays where it was found. (The
/// default holds nothing: what a [`Pooled`] leaves behind.)
#[derive(Debug, Default)]
pub(crate) struct AlignedBuffer {
    bytes: Vec<u8>,
    start: usize,
    capacity: usize,
}

impl AlignedBuffer {
    /// A zeroed buffer of at least `capacity` usable bytes (rounded up to
    /// whole blocks).
    pub(crate) fn new(capacity: usize) -> AlignedBuffer {
        let capacity = capacity.div_ceil(ALIGN).max(1) * ALIGN;
        let bytes = vec![0u8; capacity + ALIGN];
        // `align_offset` may (in principle) not find an offset: then the
        // buffer is used unaligned, and direct I/O is not attempted with it.
        let start = bytes.as_ptr().align_offset(ALIGN).min(ALIGN);
        AlignedBuffer { bytes, start, capacity }
    }

    /// A buffer for reads of at most `most` bytes at any offset.
    pub(crate) fn for_reads(most: usize) -> AlignedBuffer {
        AlignedBuffer::new(most + 2 * ALIGN)
    }

    /// Whether the usable part is aligned for direct I/O.
    fn aligned(&self) -> bool {
        self.start < ALIGN
    }

    fn usable(&mut self) -> &mut [u8] {
        &mut self.bytes[self.start..self.start + self.capacity]
    }

    fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Opens `path` with `options`, around the page cache where the filesystem
/// allows (and `around`: the tests' way to take the page cache's path);
/// whether it did.
fn open(path: &Path, options: &std::fs::OpenOptions, around: bool) -> std::io::Result<(File, bool)> {
    if !around {
        return options.open(path).map(|file| (file, false));
    }
    let mut direct = options.clone();
    direct.custom_flags(libc::O_DIRECT);
    match direct.open(path) {
        Ok(file) => Ok((file, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => options.open(path).map(|file| (file, false)),
        Err(e) => Err(e),
    }
}

/// The file under a [`DirectWriter`]: whole blocks written one after the
/// other, around the page cache where the filesystem allows.
#[derive(Debug)]
struct BlockFile {
    path: PathBuf,
    file: File,
    direct: bool,
    /// Bytes written so far.
    written: u64,
    /// The sum of the file's bytes so far (not of a last block's padding);
    /// `None` for a scratch file ([`DirectWriter::scratch`]).
    sum: Option<Summer>,
}

impl BlockFile {
    fn new(path: &Path, file: File, direct: bool, summed: bool) -> BlockFile {
        BlockFile { path: path.to_owned(), file, direct, written: 0, sum: summed.then(Summer::default) }
    }

    /// Appends the buffer's first `len` bytes (whole blocks when direct,
    /// but for the last), adding them to the file's sum.
    fn append(&mut self, buffer: &mut AlignedBuffer, len: usize) -> std::io::Result<()> {
        if let Some(sum) = &mut self.sum {
            sum.update(&buffer.usable()[..len]);
        }
        self.put(buffer, len)
    }

    /// Writes the buffer's first `len` bytes at the end.
    fn put(&mut self, buffer: &mut AlignedBuffer, len: usize) -> std::io::Result<()> {
        let result = self.file.write_all_at(&buffer.usable()[..len], self.written);
        match result {
            // A filesystem that opened the file for direct I/O and then
            // refuses it: the same file, through the page cache.
            Err(e) if self.direct && e.raw_os_error() == Some(libc::EINVAL) => {
                self.file = std::fs::OpenOptions::new().write(true).open(&self.path)?;
                self.direct = false;
                self.file.write_all_at(&buffer.usable()[..len], self.written)?;
            }
            result => result?,
        }
        self.written += len as u64;
        Ok(())
    }

    /// Appends the last `len` bytes (padded to a whole block when direct,
    /// then cut off); the file, to be synced, and the sum of its bytes.
    fn finish(mut self, buffer: &mut AlignedBuffer, len: usize) -> std::io::Result<Finished> {
        if let Some(sum) = &mut self.sum {
            sum.update(&buffer.usable()[..len]);
        }
        if self.direct {
            let padded = len.div_ceil(ALIGN) * ALIGN;
            buffer.usable()[len..padded].fill(0);
            let end = self.written + len as u64;
            self.put(buffer, padded)?;
            self.file.set_len(end)?;
        } else {
            self.put(buffer, len)?;
        }
        Ok(Finished { file: self.file, sum: self.sum.map(|sum| sum.finish()) })
    }
}

/// What a [`DirectWriter`]'s thread is handed: a full buffer, or the last
/// one (its length, and the writer's count of shared buffers, given back
/// once it is written).
enum Block {
    Full(Pooled),
    Last(Pooled, usize, Shared),
}

/// A [`BlockFile`] on a thread of its own, so that the writer goes on
/// filling buffers while the device takes the ones before (a direct write
/// waits for the device; on the writer's thread that wait is a core idle).
#[derive(Debug)]
struct Behind {
    blocks: std::sync::mpsc::SyncSender<Block>,
    /// Buffers written, to be filled again (behind a lock only so that a
    /// writer can be shared, as a Parquet writer's `&self` is, between
    /// threads that do not write).
    spare: std::sync::Mutex<std::sync::mpsc::Receiver<Pooled>>,
    thread: WriteThread,
    /// Buffers of its own made so far (at most [`MAX_BUFFERS`]).
    buffers: usize,
    /// Shared buffers taken.
    shared: Shared,
}

impl Behind {
    fn start(mut file: BlockFile, budget: &'static Budget) -> std::io::Result<Behind> {
        let (blocks, received) = std::sync::mpsc::sync_channel::<Block>(MAX_BUFFERS + SHARED_BUFFERS);
        let (give_back, spare) = std::sync::mpsc::channel();
        let thread = crate::threads::spawn("telemeter-write", move || {
            for block in received {
                match block {
                    Block::Full(mut buffer) => {
                        let len = buffer.capacity();
                        file.append(&mut buffer, len)?;
                        // The writer may have finished (an error of its own).
                        let _ = give_back.send(buffer);
                    }
                    // The shared buffers come back here, once written, even
                    // when nobody waits for the file yet.
                    Block::Last(mut buffer, len, _shared) => return file.finish(&mut buffer, len),
                }
            }
            Err(std::io::Error::other("the writer stopped before its last block"))
        })
        .map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok(Behind { blocks, spare: std::sync::Mutex::new(spare), thread, buffers: 1, shared: Shared::new(budget) })
    }
}

/// The error of a write thread that stopped before its last block, once
/// it has (`blocks`: its queue, closed here).
fn stopped(blocks: std::sync::mpsc::SyncSender<Block>, thread: WriteThread) -> std::io::Error {
    drop(blocks);
    match thread.join() {
        Ok(Err(e)) => e,
        Ok(Ok(_)) => std::io::Error::other("the write thread stopped early"),
        Err(_) => std::io::Error::other("the write thread panicked"),
    }
}

/// A [`Behind`]'s thread: the file, once every block is written.
type WriteThread = std::thread::JoinHandle<std::io::Result<Finished>>;

/// A file written whole: the file, to be synced, and the sum of its bytes
/// when its writer computed one (a [`DirectWriter`] does, as it writes).
#[derive(Debug)]
pub(crate) struct Finished {
    /// The file.
    pub(crate) file: File,
    /// Its length and hash, computed from the bytes as they were written.
    pub(crate) sum: Option<FileSum>,
}

/// A file whose last blocks may still be on their way to the device
/// ([`DirectWriter::finish_behind`]): [`Written::wait`] gives the file
/// (to be synced) once they are written, or the first write error.
#[derive(Debug)]
pub(crate) struct Written(WrittenBy);

#[derive(Debug)]
enum WrittenBy {
    /// Written, or failed, already.
    Done(std::io::Result<Finished>),
    /// The blocks still with the writer's thread.
    Thread(WriteThread),
}

impl Written {
    /// Waits until every block is written; the file, or the first error.
    pub(crate) fn wait(self) -> std::io::Result<File> {
        self.wait_summed().map(|finished| finished.file)
    }

    /// Waits until every block is written; the file and its sum, or the
    /// first error.
    pub(crate) fn wait_summed(self) -> std::io::Result<Finished> {
        match self.0 {
            WrittenBy::Done(finished) => finished,
            WrittenBy::Thread(thread) => {
                thread.join().map_err(|_| std::io::Error::other("the write thread panicked"))?
            }
        }
    }

    /// Waits until every block is written, its sum kept: for a file read
    /// back at once that is still to be synced.
    pub(crate) fn ready(self) -> std::io::Result<Written> {
        self.wait_summed().map(|finished| Written(WrittenBy::Done(Ok(finished))))
    }
}

impl From<File> for Written {
    /// A file written already (through the page cache, say): no sum.
    fn from(file: File) -> Written {
        Written(WrittenBy::Done(Ok(Finished { file, sum: None })))
    }
}

/// A writer's count of buffers taken from a [`Budget`] (the
/// [`SHARED_BUFFERS`]), given back when the writer is done (finished,
/// failed or dropped).
#[derive(Debug)]
struct Shared {
    budget: &'static Budget,
    taken: usize,
}

impl Shared {
    fn new(budget: &'static Budget) -> Shared {
        Shared { budget, taken: 0 }
    }

    /// Takes one more, if any is left.
    fn take(&mut self) -> bool {
        use std::sync::atomic::Ordering;
        let most = self.budget.most;
        let taken =
            self.budget.taken.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < most).then_some(n + 1));
        self.taken += usize::from(taken.is_ok());
        taken.is_ok()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.budget.taken.fetch_sub(self.taken, std::sync::atomic::Ordering::AcqRel);
    }
}

/// Where a [`DirectWriter`]'s blocks go.
#[derive(Debug)]
#[expect(clippy::large_enum_variant, reason = "one per file written, never moved after it starts")]
enum Sink {
    /// Through the page cache, which takes the bytes at once: written on
    /// the writer's thread.
    Here(BlockFile),
    /// Around it: written on a thread of the file's own.
    Behind(Behind),
}

/// A new file written a block at a time around the page cache: bytes are
/// gathered in an aligned buffer, written in whole blocks on a thread of
/// the writer's own (while the next buffers fill); the last, partial block
/// is written padded, then the file is cut to its length
/// (`DirectWriter::finish`). Nothing reaches the file before a block
/// fills: `flush` writes nothing, and a writer dropped without `finish`
/// leaves a file that must not be used (every caller removes or ignores
/// such a file, as after any failed write). Write errors come back from a
/// later `write`, or from `finish`.
#[derive(Debug)]
pub(crate) struct DirectWriter {
    buffer: Pooled,
    /// Bytes in the buffer.
    len: usize,
    sink: Option<Sink>,
}

impl DirectWriter {
    /// Creates (or truncates) the file at `path`.
    pub(crate) fn create(path: &Path) -> std::io::Result<DirectWriter> {
        DirectWriter::create_with(path, true, &SHARED, true)
    }

    /// [`DirectWriter::create`] for a scratch file that is never published
    /// (an ingest's partial rollup files): no sum is computed.
    pub(crate) fn scratch(path: &Path) -> std::io::Result<DirectWriter> {
        DirectWriter::create_with(path, true, &SHARED, false)
    }

    /// [`DirectWriter::create`], around the page cache or not, its shared
    /// buffers from `budget`, its bytes summed or not.
    fn create_with(path: &Path, around: bool, budget: &'static Budget, summed: bool) -> std::io::Result<DirectWriter> {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        let buffer = Pooled::take();
        let (file, direct) = open(path, &options, around && buffer.aligned())?;
        let file = BlockFile::new(path, file, direct, summed);
        // The thread is for the device's wait: without direct I/O the page
        // cache takes the bytes at once.
        let sink = match direct {
            true => Sink::Behind(Behind::start(file, budget)?),
            false => Sink::Here(file),
        };
        Ok(DirectWriter { buffer, len: 0, sink: Some(sink) })
    }

    /// Hands the full buffer over and takes an empty one.
    fn full(&mut self) -> std::io::Result<()> {
        match &mut self.sink {
            Some(Sink::Here(file)) => file.append(&mut self.buffer, self.len)?,
            Some(Sink::Behind(behind)) => {
                // A buffer the thread has written if there is one, else a
                // new one while there may be more (its own, then shared),
                // else a wait for one.
                let spare = behind.spare.get_mut().ok();
                let next = match spare.as_ref().and_then(|spare| spare.try_recv().ok()) {
                    Some(buffer) => Some(buffer),
                    None if behind.buffers < MAX_BUFFERS => {
                        behind.buffers += 1;
                        Some(Pooled::take())
                    }
                    None if behind.shared.take() => Some(Pooled::take()),
                    None => spare.and_then(|spare| spare.recv().ok()),
                };
                let full = next.map(|next| std::mem::replace(&mut self.buffer, next));
                let sent = full.is_some_and(|full| behind.blocks.send(Block::Full(full)).is_ok());
                if !sent {
                    // The thread stopped (a write failed): its error.
                    return match self.sink.take() {
                        Some(Sink::Behind(behind)) => Err(stopped(behind.blocks, behind.thread)),
                        _ => Err(std::io::Error::other("the write thread is gone")),
                    };
                }
            }
            None => return Err(std::io::Error::other("a write after an error")),
        }
        self.len = 0;
        Ok(())
    }

    /// Writes what is left and cuts the file to the bytes written; the
    /// file, to be synced, once every block is on the device.
    #[cfg(test)]
    pub(crate) fn finish(self) -> std::io::Result<File> {
        self.finish_behind().wait()
    }

    /// `DirectWriter::finish` without the wait: the last blocks go on to
    /// the device on the writer's thread while the caller goes on; the
    /// file comes from [`Written::wait`]. The shared buffers come back
    /// when the thread is done, waited for or not.
    pub(crate) fn finish_behind(mut self) -> Written {
        Written(match self.sink.take() {
            Some(Sink::Here(file)) => WrittenBy::Done(file.finish(&mut self.buffer, self.len)),
            Some(Sink::Behind(Behind { blocks, thread, shared, .. })) => {
                match blocks.send(Block::Last(self.buffer, self.len, shared)) {
                    Ok(()) => WrittenBy::Thread(thread),
                    Err(_) => WrittenBy::Done(Err(stopped(blocks, thread))),
                }
            }
            None => WrittenBy::Done(Err(std::io::Error::other("a write after an error"))),
        })
    }
}

impl Write for DirectWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        let room = self.buffer.capacity() - self.len;
        let n = bytes.len().min(room);
        let len = self.len;
        self.buffer.usable()[len..len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        if self.len == self.buffer.capacity() {
            self.full()?;
        }
        Ok(n)
    }

    /// Writes nothing: only whole blocks go to the file before
    /// `DirectWriter::finish`.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A file read at offsets around the page cache where the filesystem
/// allows: each read takes the whole blocks that hold the bytes asked for
/// into the caller's [`AlignedBuffer`] (so that threads can share one
/// reader, each with a buffer of its own).
#[derive(Debug)]
pub(crate) struct DirectReader {
    path: PathBuf,
    file: File,
    direct: bool,
}

impl DirectReader {
    /// Opens `path` for reading.
    pub(crate) fn open(path: &Path) -> std::io::Result<DirectReader> {
        DirectReader::open_with(path, true)
    }

    /// Opens `path` for reading through the page cache: for a file just
    /// read whole through it (to check its sum), whose pages are there.
    pub(crate) fn open_cached(path: &Path) -> std::io::Result<DirectReader> {
        DirectReader::open_with(path, false)
    }

    fn open_with(path: &Path, around: bool) -> std::io::Result<DirectReader> {
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        let (file, direct) = open(path, &options, around)?;
        Ok(DirectReader { path: path.to_owned(), file, direct })
    }

    /// The file's length in bytes.
    pub(crate) fn len(&self) -> std::io::Result<u64> {
        Ok(self.file.metadata()?.len())
    }

    /// The `len` bytes at `at`, read into `buffer`; an error if the file
    /// ends before them, or if `buffer` cannot hold them
    /// ([`AlignedBuffer::for_reads`]).
    pub(crate) fn read_at<'b>(&self, buffer: &'b mut AlignedBuffer, at: u64, len: usize) -> std::io::Result<&'b [u8]> {
        let first = at - at % ALIGN as u64;
        let skip = (at - first) as usize;
        let want = (skip + len).div_ceil(ALIGN) * ALIGN;
        if want > buffer.capacity() {
            return Err(std::io::Error::other(format!("a read of {len} bytes, more than {}", buffer.capacity())));
        }
        // A plain handle where direct I/O cannot be used for this read (an
        // unaligned buffer), or is refused by the filesystem.
        let mut plain = match self.direct && !buffer.aligned() {
            true => Some(File::open(&self.path)?),
            false => None,
        };
        let mut got = 0;
        // Whole blocks; the file's last block comes back short.
        while got < skip + len {
            let file = plain.as_ref().unwrap_or(&self.file);
            match file.read_at(&mut buffer.usable()[got..want], first + got as u64) {
                Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if self.direct && plain.is_none() && e.raw_os_error() == Some(libc::EINVAL) => {
                    plain = Some(File::open(&self.path)?);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(&buffer.usable()[skip..skip + len])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 251) as u8).collect()
    }

    #[test]
    fn a_file_written_in_pieces_holds_exactly_its_bytes() {
        // On disk (direct I/O), and on tmpfs where there is one (direct
        // I/O or the page cache, as the kernel allows).
        let shm = std::path::Path::new("/dev/shm");
        let mut dirs = vec![tempfile::tempdir().unwrap()];
        dirs.extend(shm.is_dir().then(|| tempfile::tempdir_in(shm).ok()).flatten());
        // And through the page cache, as where a filesystem refuses it.
        for dir in &dirs {
            for around in [true, false] {
                write_every_length(dir.path(), around);
            }
        }
    }

    #[test]
    fn shared_buffers_stay_within_their_budget_and_come_back_with_the_writer() {
        static BUDGET: Budget = Budget::new(3);
        let mut a = Shared::new(&BUDGET);
        let mut b = Shared::new(&BUDGET);
        assert!(a.take() && a.take() && b.take());
        assert!(!b.take() && !a.take(), "a fourth buffer from a budget of three");
        drop(a);
        assert!(b.take() && b.take());
        assert!(!b.take());
        drop(b);
        assert_eq!(BUDGET.taken.load(std::sync::atomic::Ordering::Acquire), 0);
    }

    fn write_every_length(dir: &Path, around: bool) {
        // Up to more blocks than the writer may have buffers (each reused).
        let many = (MAX_BUFFERS + SHARED_BUFFERS + 1) * WRITE_BYTES + 17;
        for n in [0, 1, ALIGN - 1, ALIGN, ALIGN + 1, WRITE_BYTES - 3, WRITE_BYTES, 2 * WRITE_BYTES + 5000, many] {
            let path = dir.join(format!("f{n}"));
            let data = bytes(n);
            let mut out = DirectWriter::create_with(&path, around, &SHARED, true).unwrap();
            for piece in data.chunks(977) {
                out.write_all(piece).unwrap();
            }
            let finished = out.finish_behind().wait_summed().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), data, "{n} bytes");
            assert_eq!(finished.sum, Some(FileSum::of(&data)), "{n} bytes");
        }
    }

    /// Writers on several threads at once, each file of several blocks
    /// in buffers other writers left behind (their bytes whatever those
    /// held), hold exactly their own bytes; and the pool keeps at most
    /// [`POOLED`] buffers, whatever was written.
    #[test]
    fn pooled_buffers_carry_nothing_over_and_stay_bounded() {
        let dir = tempfile::tempdir().unwrap();
        std::thread::scope(|scope| {
            for t in 0..4usize {
                let dir = dir.path();
                scope.spawn(move || {
                    for (i, n) in [3 * WRITE_BYTES + 11, 17, ALIGN + 1, 2 * WRITE_BYTES].into_iter().enumerate() {
                        let path = dir.join(format!("t{t}-{i}"));
                        let data: Vec<u8> = bytes(n).iter().map(|b| b.wrapping_add(t as u8 * 31 + i as u8)).collect();
                        let mut out = DirectWriter::create(&path).unwrap();
                        out.write_all(&data).unwrap();
                        out.finish().unwrap();
                        assert!(std::fs::read(&path).unwrap() == data, "thread {t}, file {i}: {n} bytes");
                    }
                });
            }
        });
        assert!(POOL.lock().unwrap().len() <= POOLED);
    }

    /// A file finished without a wait ([`DirectWriter::finish_behind`])
    /// gives its shared buffers back once its thread has written them,
    /// whether anyone waits for it or not (a spill's partial file is
    /// waited for only at the publish); waited for, it holds its bytes.
    #[test]
    fn a_file_finished_behind_gives_its_buffers_back_unwaited_and_holds_its_bytes() {
        static BUDGET: Budget = Budget::new(4);
        let dir = tempfile::tempdir().unwrap();
        let data = bytes((MAX_BUFFERS + 8) * WRITE_BYTES + 5);
        let written: Vec<(PathBuf, Written)> = ["a", "b"]
            .iter()
            .map(|name| {
                let path = dir.path().join(name);
                let mut out = DirectWriter::create_with(&path, true, &BUDGET, true).unwrap();
                out.write_all(&data).unwrap();
                (path, out.finish_behind())
            })
            .collect();
        let start = std::time::Instant::now();
        while BUDGET.taken.load(std::sync::atomic::Ordering::Acquire) != 0 {
            assert!(start.elapsed() < std::time::Duration::from_secs(60), "shared buffers kept by finished files");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        for (path, written) in written {
            written.wait().unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), data, "{}", path.display());
        }
    }

    /// A file opened for direct I/O whose write the filesystem then
    /// refuses (`EINVAL`: here a length off the block size, which ext4 and
    /// XFS refuse) is written through the page cache from there on, the
    /// same bytes at the same offsets.
    #[test]
    fn a_refused_direct_write_goes_through_the_page_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        let (file, direct) = open(&path, &options, true).unwrap();
        let mut block = BlockFile::new(&path, file, direct, true);
        let data = bytes(3 * ALIGN + 100);
        let mut buffer = AlignedBuffer::new(WRITE_BYTES);
        buffer.usable()[..data.len()].copy_from_slice(&data);
        // Whole blocks first (direct, where it was opened so), then a piece
        // no direct write takes, then more.
        block.append(&mut buffer, ALIGN).unwrap();
        buffer.usable().copy_within(ALIGN..data.len(), 0);
        block.append(&mut buffer, 100).unwrap();
        // ext4 (this project's machines' /tmp) refuses it, and the file is
        // reopened; a filesystem that takes it (tmpfs) stays direct. The
        // bytes must be right either way.
        if direct && filesystem_of(dir.path()).as_deref() == Some("ext4") {
            assert!(!block.direct, "ext4 took a direct write of 100 bytes");
        }
        buffer.usable().copy_within(100..data.len() - ALIGN, 0);
        let finished = block.finish(&mut buffer, 2 * ALIGN).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
        assert_eq!(finished.sum, Some(FileSum::of(&data)));
    }

    /// The type of the filesystem `path` is on (its longest mount point in
    /// `/proc/mounts`), where the kernel says.
    fn filesystem_of(path: &Path) -> Option<String> {
        let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
        let mounts = mounts.lines().filter_map(|line| {
            let mut fields = line.split(' ').skip(1);
            Some((fields.next()?, fields.next()?))
        });
        let on = mounts.filter(|(point, _)| path.starts_with(point)).max_by_key(|(point, _)| point.len())?;
        Some(on.1.to_owned())
    }

    /// A device that refuses the bytes is an error from a later write or
    /// from `finish`, never a file silently short.
    #[test]
    fn a_full_device_is_an_error() {
        let full = Path::new("/dev/full");
        if !full.exists() {
            return;
        }
        let mut out = DirectWriter::create(full).unwrap();
        let failed = out.write_all(&bytes(3 * WRITE_BYTES)).is_err() || out.finish().is_err();
        assert!(failed, "writing to /dev/full succeeded");
    }

    #[test]
    fn reads_at_any_offset_give_the_bytes_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data = bytes(6 * ALIGN + 123);
        std::fs::write(&path, &data).unwrap();
        for around in [true, false] {
            let reader = DirectReader::open_with(&path, around).unwrap();
            let mut buffer = AlignedBuffer::for_reads(2 * ALIGN);
            let reads =
                [(0, 0), (0, 10), (5, ALIGN), (ALIGN - 1, 2), (ALIGN, 2 * ALIGN), (6 * ALIGN, 123), (100, 2 * ALIGN)];
            for (at, len) in reads {
                let got = reader.read_at(&mut buffer, at as u64, len).unwrap();
                assert_eq!(got, &data[at..at + len], "{at}+{len}, around the page cache: {around}");
            }
            assert_eq!(reader.len().unwrap(), data.len() as u64);
            assert!(reader.read_at(&mut buffer, 6 * ALIGN as u64, 124).is_err(), "past the end");
            assert!(reader.read_at(&mut buffer, 0, 5 * ALIGN).is_err(), "more than the buffer holds");
        }
    }
}
