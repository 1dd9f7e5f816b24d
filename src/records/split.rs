//! A large plain CSV file cut into splits that separate readers check side
//! by side (`ingest --engine spark` gives each its own task), each split
//! knowing the number of its first line, so that every row, message and
//! run of lines is numbered as when the file is read whole.
//!
//! 1. [`splits`] finds a cut near every `bytes` of the file: the start of
//!    a line after a line that is not empty, so no run of empty lines
//!    spans a cut and the limit on such runs (`csv::MAX_EMPTY_RUN`) counts
//!    what it counts in the whole file. A cut inside a record whose quoted
//!    field spans lines is not known here: the split before it refuses
//!    that record (its quote does not close by the split's end).
//! 2. It counts the newlines between cuts, the pieces in parallel: the
//!    first line of a split is one more than the newlines before it.
//!
//! Compressed files cannot be cut without decoding all that comes before,
//! and Parquet files are read whole: only plain CSV files are split.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use rayon::prelude::*;

use crate::error::{Error, Result};

/// One split of a file: its bytes `from..to`, the first (after the
/// header, for the split at 0) numbered `line`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Split {
    /// The first byte: 0, or the start of a line.
    pub from: u64,
    /// The byte after the last: the start of a line, or the file's size.
    pub to: u64,
    /// The number of the line at `from` (2 for the split at 0: its first
    /// line is the header).
    pub line: u64,
    /// Empty lines just before `from`, the start of a run the split goes
    /// on with: they count toward the limit on such runs. Always 0 for
    /// [`splits`], which never cuts inside a run; a reader that cuts
    /// anywhere (the Spark job's blocks of a file at a URI) counts them.
    pub empty_before: u64,
}

/// Bytes read at a time when looking for a cut or counting lines.
const READ_BYTES: usize = 1 << 20;

/// The splits of the plain CSV file at `path` (`size` bytes), each about
/// `bytes` long, in order: one split, the whole file, when it is no larger
/// than `bytes`.
pub fn splits(path: &Path, size: u64, bytes: u64) -> Result<Vec<Split>> {
    let whole = vec![Split { from: 0, to: size, line: 2, empty_before: 0 }];
    if bytes == 0 || size <= bytes {
        return Ok(whole);
    }
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    let mut cuts = vec![0u64];
    let mut at = bytes;
    while at < size {
        match cut_after(&mut file, at).map_err(|e| Error::io(path, e))? {
            Some(cut) if cut < size => {
                cuts.push(cut);
                at = cut.saturating_add(bytes);
            }
            _ => break,
        }
    }
    cuts.push(size);
    let newlines: Vec<u64> =
        cuts.par_windows(2).map(|piece| newlines_in(path, piece[0], piece[1])).collect::<Result<_>>()?;
    let mut before = 0u64;
    let mut found = Vec::with_capacity(newlines.len());
    for (piece, count) in cuts.windows(2).zip(newlines) {
        let line = if piece[0] == 0 { 2 } else { before + 1 };
        found.push(Split { from: piece[0], to: piece[1], line, empty_before: 0 });
        before += count;
    }
    Ok(found)
}

/// The first cut at or after byte `at`: the start of a line that follows
/// a newline at or after `at` ending a line that is not empty (nor a lone
/// carriage return); `None` if the file has none.
fn cut_after(file: &mut std::fs::File, at: u64) -> std::io::Result<Option<u64>> {
    // The two bytes before `at` tell whether a newline at `at` ends an
    // empty line.
    let start = at.saturating_sub(2);
    file.seek(SeekFrom::Start(start))?;
    let mut window: Vec<u8> = Vec::with_capacity(READ_BYTES + 2);
    let mut window_start = start;
    loop {
        let kept = window.len();
        let read = file.by_ref().take(READ_BYTES as u64).read_to_end(&mut window)?;
        if read == 0 {
            return Ok(None);
        }
        let first = (at.saturating_sub(window_start) as usize).max(kept);
        for i in memchr::memchr_iter(b'\n', &window[first..]).map(|i| i + first) {
            let before = |back: usize| i.checked_sub(back).map(|j| window[j]);
            let empty = match before(1) {
                None | Some(b'\n') => true,
                Some(b'\r') => matches!(before(2), None | Some(b'\n')),
                Some(_) => false,
            };
            if !empty {
                return Ok(Some(window_start + i as u64 + 1));
            }
        }
        // Two bytes of context for the next window.
        let drop = window.len().saturating_sub(2);
        window.drain(..drop);
        window_start += drop as u64;
    }
}

/// The newlines in bytes `from..to` of the file at `path`.
fn newlines_in(path: &Path, from: u64, to: u64) -> Result<u64> {
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(path, e))?;
    file.seek(SeekFrom::Start(from)).map_err(|e| Error::io(path, e))?;
    let mut piece = file.take(to - from);
    let mut buffer = vec![0u8; READ_BYTES];
    let mut count = 0u64;
    loop {
        let read = piece.read(&mut buffer).map_err(|e| Error::io(path, e))?;
        if read == 0 {
            break;
        }
        count += count_newlines(&buffer[..read]);
    }
    Ok(count)
}

/// The newlines in `bytes`, counted in byte-wide lanes (which the compiler
/// vectorizes: a plain `filter().count()` widened every byte to 64 bits
/// and ran at a fifth of the speed).
fn count_newlines(bytes: &[u8]) -> u64 {
    const LANES: usize = 64;
    let mut count = 0u64;
    // A lane counts at most 255 before it is added up.
    for block in bytes.chunks(255 * LANES) {
        let mut lanes = [0u8; LANES];
        let mut parts = block.chunks_exact(LANES);
        for part in &mut parts {
            for (lane, &byte) in lanes.iter_mut().zip(part) {
                *lane += u8::from(byte == b'\n');
            }
        }
        count += lanes.iter().map(|&lane| u64::from(lane)).sum::<u64>();
        count += parts.remainder().iter().filter(|&&byte| byte == b'\n').count() as u64;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every split starts a line that follows a line that is not empty,
    /// its number is the line's number in the whole file, and the splits
    /// cover the file in order.
    #[test]
    fn splits_start_lines_numbered_as_in_the_whole_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut text = String::from("a,b\r\n");
        for i in 0..500 {
            match i % 37 {
                0 => text.push_str("\n\n\r\n"),
                5 => text.push_str(&format!("{i},\"quoted, {i}\"\r\n")),
                _ => text.push_str(&format!("{i},{}\n", "x".repeat(i % 13))),
            }
        }
        text.push_str("last,line");
        let path = dir.path().join("f.csv");
        std::fs::write(&path, &text).expect("write");
        let size = text.len() as u64;
        // The line each byte's line has in the whole file.
        let line_at = |byte: u64| 1 + text.as_bytes()[..byte as usize].iter().filter(|&&b| b == b'\n').count() as u64;
        for bytes in [1, 2, 7, 64, 100, 1000, size - 1, size, size + 5] {
            let found = splits(&path, size, bytes).expect("split");
            assert_eq!(found.first().map(|s| (s.from, s.line)), Some((0, 2)), "{bytes}");
            assert_eq!(found.last().map(|s| s.to), Some(size), "{bytes}");
            for pair in found.windows(2) {
                assert_eq!(pair[0].to, pair[1].from, "{bytes}: the splits cover the file");
                assert!(pair[1].from > pair[0].from, "{bytes}: in order");
            }
            for split in &found[1..] {
                let at = split.from as usize;
                assert_eq!(split.line, line_at(split.from), "{bytes}: split at {at}");
                let before = &text.as_bytes()[..at];
                assert!(before.ends_with(b"\n"), "{bytes}: split at {at} starts a line");
                let previous = before[..at - 1].rsplit(|&b| b == b'\n').next().unwrap_or_default();
                assert!(!previous.is_empty() && previous != b"\r", "{bytes}: after an empty line at {at}");
                assert!(split.from >= bytes, "{bytes}: no split before the first cut");
            }
            if bytes >= size {
                assert_eq!(found, vec![Split { from: 0, to: size, line: 2, empty_before: 0 }]);
            }
        }
    }

    /// The lane count is the plain count, at every length and lane fill.
    #[test]
    fn newlines_are_counted_in_lanes_as_one_by_one() {
        let bytes: Vec<u8> = (0..40_000u32).map(|i| if i % 7 == 0 || i % 256 < 3 { b'\n' } else { b'x' }).collect();
        for end in [0, 1, 63, 64, 65, 255 * 64 - 1, 255 * 64, 255 * 64 + 1, 40_000] {
            let plain = bytes[..end].iter().filter(|&&b| b == b'\n').count() as u64;
            assert_eq!(count_newlines(&bytes[..end]), plain, "{end}");
        }
        assert_eq!(count_newlines(&[b'\n'; 255 * 64 + 10]), 255 * 64 + 10, "every lane full");
    }

    /// A file with no cut after the first `bytes` (one long line, or only
    /// empty lines after) is one split.
    #[test]
    fn a_file_without_a_cut_is_one_split() {
        let dir = tempfile::tempdir().expect("tempdir");
        for text in ["h\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "h\nrow\n\n\n\n\n\n\n\n\n\n\n\n\n", "h\n"] {
            let path = dir.path().join("f.csv");
            std::fs::write(&path, text).expect("write");
            let size = text.len() as u64;
            let found = splits(&path, size, 1).expect("split");
            let expected = match text {
                "h\nrow\n\n\n\n\n\n\n\n\n\n\n\n\n" => vec![
                    Split { from: 0, to: 2, line: 2, empty_before: 0 },
                    Split { from: 2, to: 6, line: 2, empty_before: 0 },
                    Split { from: 6, to: size, line: 3, empty_before: 0 },
                ],
                _ if text.len() > 3 => vec![
                    Split { from: 0, to: 2, line: 2, empty_before: 0 },
                    Split { from: 2, to: size, line: 2, empty_before: 0 },
                ],
                _ => vec![Split { from: 0, to: size, line: 2, empty_before: 0 }],
            };
            assert_eq!(found, expected, "{text:?}");
        }
    }
}
