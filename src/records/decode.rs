//! The one decoder of input files: a file's bytes as its [`Format`] says
//! (gzip and zstd decompressed, CSV and Parquet as they are), and the UTF-8
//! byte-order mark a text file may start with ([`strip_bom`]).
//!
//! The record reader ([`super::csv`]), the accounts file and the resource
//! loader (`resources::load`) all read through here, so every command
//! accepts the same encodings and names a damaged stream the same way.
//!
//! Files are read with `read(2)`, never mapped: a file truncated while a
//! map of it is read kills the process with SIGBUS. A file that changes
//! while it is read (truncated, grown, or rewritten in place) is an error
//! naming it, never a prefix of it: at the end of the stream its size and
//! modification time are compared with those it had when opened, and a
//! plain file's bytes read with its size ([`Stream::fill`]).
//!
//! gzip is decoded by ISA-L (`decode/isal.rs`) when the build found it, else by
//! flate2; zstd by the zstd crate.

#[cfg(isal)]
pub(crate) mod isal;

#[cfg(not(isal))]
use std::io::BufReader;
use std::io::Read;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::files::Format;
use super::split::Split;
use crate::error::{Error, Result};

/// The largest zstd window a `.csv.zst` frame may ask for: 2^31 bytes,
/// zstd's own limit (`zstd --long=31`).
const ZSTD_WINDOW_LOG_MAX: u32 = 31;

/// The bytes of the file at `path`, decoded as `format` says.
///
/// A 0-byte file of any format decodes to no bytes (no records), like a
/// compressed stream of no bytes; a damaged stream is an error naming the
/// file.
pub fn read(path: &Path, format: Format) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    if let Some(mut stream) = Stream::open(path, format)? {
        out.reserve(stream.size_hint());
        stream.fill(&mut out, usize::MAX)?;
    }
    Ok(out)
}

/// The decoded bytes of one file, read a part at a time ([`Stream::fill`]),
/// so that a large compressed file need not be in memory whole.
pub struct Stream<'p> {
    path: &'p Path,
    decoder: Box<dyn Read + Send>,
    /// What a damaged stream is not ("gzip"), or `None` for bytes as they are.
    codec: Option<&'static str>,
    /// The file as it was when opened, and the bytes read of it so far.
    opened: Snapshot,
    /// The bytes a plain file's stream holds: the file's size, or the
    /// size of the split read ([`Stream::open_split`]).
    holds: u64,
    handle: std::fs::File,
    count: Arc<AtomicU64>,
}

/// What a file is compared by, before and after it is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Snapshot {
    size: u64,
    modified: Option<std::time::SystemTime>,
}

impl Snapshot {
    fn of(handle: &std::fs::File) -> std::io::Result<Snapshot> {
        let meta = handle.metadata()?;
        Ok(Snapshot { size: meta.len(), modified: meta.modified().ok() })
    }
}

impl<'p> Stream<'p> {
    /// The file at `path`, to be decoded as `format` says; `None` for a
    /// 0-byte file, which decodes to no bytes.
    pub fn open(path: &'p Path, format: Format) -> Result<Option<Stream<'p>>> {
        Stream::open_counted(path, format, Arc::default())
    }

    /// [`Stream::open`], counting in `count` the bytes read from the file
    /// (compressed bytes for a compressed file) as it is decoded.
    pub fn open_counted(path: &'p Path, format: Format, count: Arc<AtomicU64>) -> Result<Option<Stream<'p>>> {
        let handle = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let opened = Snapshot::of(&handle).map_err(|e| Error::io(path, e))?;
        if opened.size == 0 {
            return Ok(None);
        }
        let kept = handle.try_clone().map_err(|e| Error::io(path, e))?;
        let handle = Counted { inner: handle, count: count.clone() };
        let (decoder, codec): (Box<dyn Read + Send>, _) = match format {
            Format::Csv | Format::Parquet => (Box::new(handle), None),
            Format::CsvGz => (gunzip(handle).map_err(|e| Error::io(path, e))?, Some("gzip")),
            Format::CsvZst => {
                let unreadable = |e: std::io::Error| Error::io(path, format!("not a readable zstd file: {e}"));
                let mut decoder = zstd::stream::read::Decoder::new(handle).map_err(unreadable)?;
                // Frames made with `zstd --long` (windows past the default
                // 128 MiB limit, up to zstd's 2 GiB) are read; the window
                // is memory the decode holds.
                decoder.window_log_max(ZSTD_WINDOW_LOG_MAX).map_err(unreadable)?;
                (Box::new(decoder), Some("zstd"))
            }
        };
        let holds = opened.size;
        Ok(Some(Stream { path, decoder, codec, opened, holds, handle: kept, count }))
    }

    /// The bytes `split` of the plain file at `path`, which had `size`
    /// bytes when it was split: an error naming the file if it has
    /// another size now, or another once read.
    pub fn open_split(path: &'p Path, split: &Split, size: u64, count: Arc<AtomicU64>) -> Result<Stream<'p>> {
        use std::io::{Seek, SeekFrom};
        let mut handle = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
        let opened = Snapshot::of(&handle).map_err(|e| Error::io(path, e))?;
        if opened.size != size || split.to > size || split.from > split.to {
            let what = format!("{size} bytes when split, {} now", opened.size);
            return Err(Error::changed_while_read(path, what));
        }
        let kept = handle.try_clone().map_err(|e| Error::io(path, e))?;
        handle.seek(SeekFrom::Start(split.from)).map_err(|e| Error::io(path, e))?;
        let holds = split.to - split.from;
        let decoder = Box::new(Counted { inner: handle.take(holds), count: count.clone() });
        Ok(Stream { path, decoder, codec: None, opened, holds, handle: kept, count })
    }

    /// The path of the file, as opened.
    pub fn path(&self) -> &'p Path {
        self.path
    }

    /// About how many bytes the file decodes to: its size, four times
    /// that when compressed.
    pub fn size_hint(&self) -> usize {
        let size = usize::try_from(self.holds).unwrap_or(usize::MAX);
        match self.codec {
            None => size.saturating_add(1),
            Some(_) => size.saturating_mul(4),
        }
    }

    /// Appends decoded bytes to `out` until it holds `until` bytes or the
    /// file ends: whether it ended. A damaged stream, or a file that
    /// changed since it was opened, is an error naming the file.
    pub fn fill(&mut self, out: &mut Vec<u8>, until: usize) -> Result<bool> {
        let want = until.saturating_sub(out.len());
        if want == 0 {
            return Ok(false);
        }
        // Room for the part at once, not grown by copying as it is read.
        out.reserve(want.min(self.size_hint()));
        let read = (&mut self.decoder).take(want as u64).read_to_end(out).map_err(|e| match self.codec {
            Some(codec) => Error::io(self.path, format!("not a readable {codec} file: {e}")),
            None => Error::io(self.path, e),
        })?;
        let ended = read < want;
        if ended {
            self.check_unchanged()?;
        }
        Ok(ended)
    }

    /// At the end of the stream: an error unless the file has the size
    /// and modification time it had when opened, and (plain files) every
    /// byte of that size was read, no more and no fewer.
    fn check_unchanged(&self) -> Result<()> {
        let now = Snapshot::of(&self.handle).map_err(|e| Error::io(self.path, e))?;
        let read = self.count.load(Ordering::Relaxed);
        let what = if now.size != self.opened.size {
            format!("{} bytes when opened, {} now", self.opened.size, now.size)
        } else if now.modified != self.opened.modified {
            "modified since it was opened".to_owned()
        } else if self.codec.is_none() && read != self.holds {
            match self.holds == self.opened.size {
                true => format!("{} bytes when opened, {read} read", self.holds),
                false => format!("{} bytes in its split, {read} read", self.holds),
            }
        } else {
            return Ok(());
        };
        Err(Error::changed_while_read(self.path, what))
    }
}

/// The decoder of a gzip file: ISA-L's when the build has it, else flate2's.
fn gunzip<R: Read + Send + 'static>(file: R) -> std::io::Result<Box<dyn Read + Send>> {
    #[cfg(isal)]
    return Ok(Box::new(isal::Gunzip::new(file)?));
    #[cfg(not(isal))]
    Ok(Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(file))))
}

/// A reader that counts the bytes it reads.
struct Counted<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.count.fetch_add(read as u64, Ordering::Relaxed);
        Ok(read)
    }
}

/// `bytes` without the UTF-8 byte-order mark they may start with.
#[inline]
pub fn strip_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A frame written with `zstd --long=31` (a window past the default
    /// 128 MiB limit, its size unknown to the encoder) is read.
    #[test]
    fn a_zstd_frame_with_a_long_window_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let text = b"a,b\n1,2\n".repeat(1000);
        let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        encoder.long_distance_matching(true).unwrap();
        encoder.window_log(ZSTD_WINDOW_LOG_MAX).unwrap();
        encoder.write_all(&text).unwrap();
        let zst = dir.path().join("long.csv.zst");
        std::fs::write(&zst, encoder.finish().unwrap()).unwrap();
        let mut plain = zstd::stream::read::Decoder::new(std::fs::File::open(&zst).unwrap()).unwrap();
        assert!(plain.read_to_end(&mut Vec::new()).is_err(), "a default decoder refuses the frame");
        assert_eq!(read(&zst, Format::CsvZst).unwrap(), text);
    }

    #[test]
    fn every_format_decodes_to_the_same_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let text = b"\xEF\xBB\xBFa,b\n1,2\n".repeat(1000);
        let plain = dir.path().join("x.csv");
        std::fs::write(&plain, &text).unwrap();
        let gz = dir.path().join("x.csv.gz");
        // Two members: a concatenated gzip file is read whole.
        let mut bytes = Vec::new();
        for half in text.chunks(text.len() / 2) {
            let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            encoder.write_all(half).unwrap();
            bytes.extend(encoder.finish().unwrap());
        }
        std::fs::write(&gz, bytes).unwrap();
        let zst = dir.path().join("x.csv.zst");
        std::fs::write(&zst, zstd::stream::encode_all(&text[..], 1).unwrap()).unwrap();
        for (path, format) in [(&plain, Format::Csv), (&gz, Format::CsvGz), (&zst, Format::CsvZst)] {
            assert_eq!(read(path, format).unwrap(), text, "{format:?}");
            // A part at a time, across the members: the same bytes.
            let mut stream = Stream::open(path, format).unwrap().expect("not empty");
            let mut parts = Vec::new();
            loop {
                let until = parts.len() + 777;
                if stream.fill(&mut parts, until).unwrap() {
                    break;
                }
            }
            assert_eq!(parts, text, "{format:?}");
        }
        assert_eq!(strip_bom(&text), &text[3..]);
        assert_eq!(strip_bom(b"a,b"), b"a,b");
    }

    #[test]
    fn empty_files_hold_nothing_and_damaged_streams_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        for (name, format) in [("e.csv", Format::Csv), ("e.csv.gz", Format::CsvGz), ("e.csv.zst", Format::CsvZst)] {
            let path = dir.path().join(name);
            std::fs::write(&path, b"").unwrap();
            assert_eq!(read(&path, format).unwrap(), b"");
        }
        for (name, format, what) in [("d.csv.gz", Format::CsvGz, "gzip"), ("d.csv.zst", Format::CsvZst, "zstd")] {
            let path = dir.path().join(name);
            std::fs::write(&path, b"not compressed").unwrap();
            let error = read(&path, format).unwrap_err().chain();
            assert!(error.contains(name) && error.contains(&format!("not a readable {what} file")), "{error}");
        }
    }
}
