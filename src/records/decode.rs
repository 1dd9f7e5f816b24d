//! The one decoder of input files: a file's bytes as its [`Format`] says
//! (gzip and zstd decompressed, CSV and Parquet as they are), and the UTF-8
//! byte-order mark a text file may start with ([`strip_bom`]).
//!
//! The record reader ([`super::csv`]), the accounts file and the resource
//! loader (`resources::load`) all read through here, so every command
//! accepts the same encodings and names a damaged stream the same way.

use std::io::{BufReader, Read};
use std::path::Path;

use super::files::Format;
use crate::error::{Error, Result};

/// The bytes of the file at `path`, decoded as `format` says.
///
/// A 0-byte file of any format decodes to no bytes (no records), like a
/// compressed stream of no bytes; a damaged stream is an error naming the
/// file.
pub fn read(path: &Path, format: Format) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    read_into(path, format, &mut out)?;
    Ok(out)
}

/// [`read`] into `out` (cleared first), reusing its allocation.
pub fn read_into(path: &Path, format: Format, out: &mut Vec<u8>) -> Result<()> {
    out.clear();
    let mut handle = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let size = handle.metadata().map_err(|e| Error::io(path, e))?.len() as usize;
    if size == 0 {
        return Ok(());
    }
    match format {
        Format::Csv | Format::Parquet => {
            out.reserve(size + 1);
            handle.read_to_end(out).map_err(|e| Error::io(path, e))?;
        }
        Format::CsvGz => {
            out.reserve(size * 4);
            flate2::read::MultiGzDecoder::new(BufReader::new(handle))
                .read_to_end(out)
                .map_err(|e| Error::io(path, format!("not a readable gzip file: {e}")))?;
        }
        Format::CsvZst => {
            out.reserve(size * 4);
            zstd::stream::read::Decoder::new(handle)
                .and_then(|mut decoder| decoder.read_to_end(out))
                .map_err(|e| Error::io(path, format!("not a readable zstd file: {e}")))?;
        }
    }
    Ok(())
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
        let mut reused = b"left over".to_vec();
        for (path, format) in [(&plain, Format::Csv), (&gz, Format::CsvGz), (&zst, Format::CsvZst)] {
            assert_eq!(read(path, format).unwrap(), text, "{format:?}");
            read_into(path, format, &mut reused).unwrap();
            assert_eq!(reused, text, "{format:?}");
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
