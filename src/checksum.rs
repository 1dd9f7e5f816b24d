//! File checksums: a file's length and the XXH3-128 hash of its bytes,
//! written as 32 lowercase hex digits.
//!
//! The store records one for every file it publishes (`store::Manifest`'s
//! `files`) and checks it before a reader uses the file. The threat is
//! damage at rest (a flipped bit, a torn or truncated write, a file
//! replaced by another), not a forger, who could rewrite the manifest
//! too: a 128-bit hash misses random damage with probability 2^-128, as
//! SHA-256 would, and runs at memory speed, so a reader can check a whole
//! file on every read. Writers compute the sum from the bytes as they
//! write them ([`Summer`]), never by reading a new file back.

use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A file's length and its XXH3-128 hash (32 lowercase hex digits).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileSum {
    /// The file's length in bytes.
    pub bytes: u64,
    /// XXH3-128 of its bytes, 32 lowercase hex digits.
    pub xxh3: String,
}

impl FileSum {
    /// The sum of `bytes`.
    pub fn of(bytes: &[u8]) -> FileSum {
        FileSum { bytes: bytes.len() as u64, xxh3: hex(xxhash_rust::xxh3::xxh3_128(bytes)) }
    }

    /// The sum of the file at `path`, read in 1 MiB pieces.
    pub fn of_file(path: &Path) -> std::io::Result<FileSum> {
        let mut file = std::fs::File::open(path)?;
        let mut summer = Summer::default();
        let mut buffer = vec![0u8; 1 << 20];
        loop {
            match file.read(&mut buffer) {
                Ok(0) => return Ok(summer.finish()),
                Ok(n) => summer.update(&buffer[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

impl std::fmt::Display for FileSum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bytes, xxh3 {}", self.bytes, self.xxh3)
    }
}

/// The sum of bytes given a piece at a time, in file order.
#[derive(Clone, Default)]
pub struct Summer {
    hasher: xxhash_rust::xxh3::Xxh3Default,
    bytes: u64,
}

impl std::fmt::Debug for Summer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Summer").field("bytes", &self.bytes).finish_non_exhaustive()
    }
}

impl Summer {
    /// Adds the next bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        self.bytes += bytes.len() as u64;
    }

    /// The sum of every byte given.
    pub fn finish(&self) -> FileSum {
        FileSum { bytes: self.bytes, xxh3: hex(self.hasher.digest128()) }
    }
}

/// The sum a file's bytes must have, where it is listed, and what to do
/// when they differ: a reader that reads a file whole checks the bytes it
/// read ([`Expected::check`]) before it parses any, so the file is read
/// once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expected {
    /// The sum.
    pub sum: FileSum,
    /// The file that lists the sum (`manifest.json`).
    pub listed_in: &'static str,
    /// What to do about a damaged file: said last in the error.
    pub advice: String,
}

impl Expected {
    /// Checks `bytes`, read from `path`, against the sum.
    pub fn check(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        self.compare(path, &FileSum::of(bytes))
    }

    /// Compares the sum `found` of `path`'s bytes with the sum expected: a
    /// mismatch is an error naming the file, both sums and the advice.
    pub fn compare(&self, path: &Path, found: &FileSum) -> Result<()> {
        if self.sum == *found {
            return Ok(());
        }
        Err(Error::io(
            path,
            format!(
                "damaged: its bytes do not match the checksum in {} (expected {}, found {found}); \
                 nothing was read from it; {}",
                self.listed_in, self.sum, self.advice
            ),
        ))
    }
}

fn hex(value: u128) -> String {
    format!("{value:032x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sum of bytes given in pieces is the sum of them whole, and of
    /// the file that holds them; one flipped bit changes it.
    #[test]
    fn pieces_whole_and_file_agree_and_a_flip_is_seen() {
        let data: Vec<u8> = (0..3_000_017u32).map(|i| (i * 31 + i / 7) as u8).collect();
        let whole = FileSum::of(&data);
        assert_eq!(whole.xxh3.len(), 32);
        assert!(whole.xxh3.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        let mut summer = Summer::default();
        for piece in data.chunks(65_537) {
            summer.update(piece);
        }
        assert_eq!(summer.finish(), whole);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        std::fs::write(&path, &data).expect("write");
        assert_eq!(FileSum::of_file(&path).expect("read"), whole);
        let mut flipped = data.clone();
        flipped[1_234_567] ^= 0x10;
        assert_ne!(FileSum::of(&flipped), whole);
        assert_eq!(FileSum::of(&flipped).bytes, whole.bytes);
    }
}
