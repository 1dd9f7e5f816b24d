//! Finding the structure of CSV bytes without a test per byte.
//!
//! - The structural index of a chunk of printable lines: for each block of
//!   64 bytes, a bit mask of its commas and one of its newlines, so that
//!   the reader walks the set bits (`trailing_zeros`, [`for_each_line`])
//!   instead of testing bytes one by one. On x86_64, SSE2 (part of the
//!   x86_64 baseline, so there is nothing to detect at run time) compares
//!   16 bytes an instruction and `pmovmskb` gives the masks; elsewhere a
//!   byte loop computes the same masks ([`masks_scalar`], which the tests
//!   and the `csv_reader` fuzz target hold the SSE2 masks to, byte for
//!   byte). AVX2 (32 bytes an instruction, detected at run time) was not
//!   tried: the masks are a small part of the reader's time once the
//!   per-byte work is gone (`perf` over `bench/run.sh`).
//! - For the lines of other chunks, the SWAR comma scan ([`split_commas`],
//!   eight bytes a step in a `u64`) that also tells what bytes a line holds.
//!
//! This module holds the crate's only `std::arch` code and two of its
//! `unsafe` blocks (ARCHITECTURE.md lists them all): the call of a
//! `#[target_feature]` function, and printable ASCII taken as text without
//! a second UTF-8 check ([`printable_unquoted_text`]). Miri is not
//! installed here; the SSE2 path is checked against the byte loop by the
//! property tests and the fuzz target.
#![allow(unsafe_code)]

/// Bytes per block.
pub(crate) const BLOCK: usize = 64;

/// The masks of one block: bit `i` of `.0` is set when `block[i]` is a
/// comma, bit `i` of `.1` when it is a newline.
#[inline]
pub(crate) fn masks(block: &[u8; BLOCK]) -> (u64, u64) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        // SAFETY: `masks_sse2` only needs SSE2, and this code is compiled
        // only when SSE2 is enabled for the whole target (the cfg above;
        // every x86_64 processor has it). It reads nothing but `block`.
        unsafe { masks_sse2(block) }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        masks_scalar(block)
    }
}

/// Calls `line` with the start, end (before its newline) and comma
/// positions (from the line's start) of every line of `bytes`: each line
/// that ends in a newline, and a last one without a newline unless it is
/// empty. Stops when `line` returns `false`; whether it never did. `commas`
/// is the buffer the positions are kept in.
#[inline]
pub(crate) fn for_each_line(
    bytes: &[u8],
    commas: &mut Vec<usize>,
    mut line: impl FnMut(usize, usize, &[usize]) -> bool,
) -> bool {
    commas.clear();
    let mut start = 0;
    let mut base = 0;
    while base < bytes.len() {
        let (mut found_commas, newlines) = match bytes.get(base..base + BLOCK) {
            Some(block) => {
                let mut whole = [0u8; BLOCK];
                whole.copy_from_slice(block);
                masks(&whole)
            }
            None => {
                // The short tail, padded with bytes that are neither.
                let mut tail = [0u8; BLOCK];
                tail[..bytes.len() - base].copy_from_slice(&bytes[base..]);
                masks(&tail)
            }
        };
        let mut found_newlines = newlines;
        // Commas before each newline belong to its line; the rest to the
        // next line.
        while found_newlines != 0 {
            let bit = found_newlines & found_newlines.wrapping_neg();
            let end = base + found_newlines.trailing_zeros() as usize;
            let mut before = found_commas & (bit - 1);
            found_commas &= !(bit - 1);
            while before != 0 {
                commas.push(base + before.trailing_zeros() as usize - start);
                before &= before - 1;
            }
            if !line(start, end, commas) {
                return false;
            }
            commas.clear();
            start = end + 1;
            found_newlines &= found_newlines - 1;
        }
        while found_commas != 0 {
            commas.push(base + found_commas.trailing_zeros() as usize - start);
            found_commas &= found_commas - 1;
        }
        base += BLOCK;
    }
    if start < bytes.len() {
        return line(start, bytes.len(), commas);
    }
    true
}

/// [`masks`] one byte at a time: the reference the SIMD form must equal.
pub(crate) fn masks_scalar(block: &[u8; BLOCK]) -> (u64, u64) {
    let (mut commas, mut newlines) = (0u64, 0u64);
    for (i, &b) in block.iter().enumerate() {
        commas |= u64::from(b == b',') << i;
        newlines |= u64::from(b == b'\n') << i;
    }
    (commas, newlines)
}

/// [`masks`] with SSE2: four 16-byte compares per byte sought.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
#[inline]
fn masks_sse2(block: &[u8; BLOCK]) -> (u64, u64) {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set1_epi8, _mm_set_epi8};
    let comma = _mm_set1_epi8(b',' as i8);
    let newline = _mm_set1_epi8(b'\n' as i8);
    let (mut commas, mut newlines) = (0u64, 0u64);
    for (k, b) in block.chunks_exact(16).enumerate() {
        // Sixteen byte values the compiler loads as one unaligned vector
        // (no pointer, so no `unsafe` load).
        let v = _mm_set_epi8(
            b[15] as i8,
            b[14] as i8,
            b[13] as i8,
            b[12] as i8,
            b[11] as i8,
            b[10] as i8,
            b[9] as i8,
            b[8] as i8,
            b[7] as i8,
            b[6] as i8,
            b[5] as i8,
            b[4] as i8,
            b[3] as i8,
            b[2] as i8,
            b[1] as i8,
            b[0] as i8,
        );
        // `movemask` sets the low 16 bits of an i32: as u16, then shifted.
        commas |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, comma)) as u16) << (16 * k);
        newlines |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, newline)) as u16) << (16 * k);
    }
    (commas, newlines)
}

/// What [`split_commas`] found a line to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// Every byte printable ASCII (`0x20..=0x7e`), no quote: its fields
    /// are [`Field::Ascii`](crate::records::Field::Ascii).
    Printable,
    /// No quote and no carriage return, but other bytes (non-ASCII, control
    /// characters): its fields are [`Field::Text`](crate::records::Field::Text), checked field by field.
    Text,
    /// A quote or a carriage return: a line for `csv::QuotedLine`.
    Quoted,
}

/// Positions of the commas of a line; the buffer only grows.
#[derive(Debug, Default)]
pub(crate) struct Commas {
    at: Vec<usize>,
    len: usize,
}

impl Commas {
    pub(crate) fn as_slice(&self) -> &[usize] {
        &self.at[..self.len]
    }
}

/// Collects the positions of the commas of `line` and tells what bytes it
/// holds (the positions are complete unless it is [`Line::Quoted`]). Eight
/// bytes at a time: a SWAR scan beats a vectorised search restarted at every
/// one of a dozen commas on a short line.
pub(crate) fn split_commas(line: &[u8], commas: &mut Commas) -> Line {
    // Room for a comma at every byte.
    if commas.at.len() < line.len() + 2 {
        commas.at.resize(line.len() + 2, 0);
    }
    let at = &mut commas.at[..];
    let mut n = 0;
    let mut words = line.chunks_exact(8);
    let mut base = 0;
    let mut odd = 0u64;
    for word in &mut words {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        let word = u64::from_le_bytes(bytes);
        odd |= bytes_equal(word, b'"') | not_printable(word);
        let mut found = bytes_equal(word, b',');
        while found != 0 {
            at[n] = base + (found.trailing_zeros() / 8) as usize;
            n += 1;
            found &= found - 1;
        }
        base += 8;
    }
    let mut odd = odd != 0;
    for (i, &b) in words.remainder().iter().enumerate() {
        match b {
            b',' => {
                at[n] = base + i;
                n += 1;
            }
            b'"' => odd = true,
            0x20..=0x7e => {}
            _ => odd = true,
        }
    }
    commas.len = n;
    if !odd {
        Line::Printable
    } else if memchr::memchr2(b'"', b'\r', line).is_some() {
        Line::Quoted
    } else {
        Line::Text
    }
}

/// Whether every byte of `bytes` is a newline or printable ASCII
/// (`0x20..=0x7e`) other than a quote. A loop the compiler vectorises.
fn is_printable_unquoted(bytes: &[u8]) -> bool {
    bytes.chunks(4096).all(|block| {
        let mut odd = 0u8;
        for &b in block {
            odd |= ((b.wrapping_sub(0x20) > 0x5e) & (b != b'\n')) as u8 | (b == b'"') as u8;
        }
        odd == 0
    })
}

/// `bytes` as text when every byte is a newline or printable ASCII other
/// than a quote ([`is_printable_unquoted`]), else `None`: that one pass
/// also proves the bytes UTF-8, so the usual chunk is not validated a
/// second time (`std::str::from_utf8` over the benchmark's 2 GB was about
/// 2 % of the ingest's CPU).
pub(crate) fn printable_unquoted_text(bytes: &[u8]) -> Option<&str> {
    if !is_printable_unquoted(bytes) {
        return None;
    }
    // SAFETY: every byte of `bytes` is 0x0a or in 0x20..=0x7e (checked just
    // above; the property test below holds `is_printable_unquoted` to a byte
    // loop): ASCII only, which is valid UTF-8.
    Some(unsafe { std::str::from_utf8_unchecked(bytes) })
}

/// A non-zero value when some byte of `word` is outside `0x20..=0x7e`.
#[inline]
fn not_printable(word: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // A byte below 0x20 (exact as a whole: a borrow only follows such a
    // byte); a byte of 0x7f (its low seven bits plus one carry into the high
    // bit) or 0x80 and above (the high bit set).
    let below = word.wrapping_sub(0x20 * ONES) & !word & HIGH;
    let above = (((word & !HIGH) + ONES) | word) & HIGH;
    below | above
}

/// The high bit of each byte of `word` that equals `byte`, and no other bit.
#[inline]
fn bytes_equal(word: u64, byte: u8) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = word ^ (0x0101_0101_0101_0101 * byte as u64);
    !(((x & LOW7).wrapping_add(LOW7)) | x | LOW7)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Arbitrary bytes, mostly the ones the index and the line scan look
    /// for or sit next to (commas, newlines, quotes, carriage returns, the
    /// edges of printable ASCII, UTF-8 and NUL).
    fn csv_bytes(
        len: impl Into<proptest::collection::SizeRange>,
    ) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            proptest::prop_oneof![
                proptest::sample::select(b",,,\n\na9.-:Z\"\r\t\x00\x7f\x80\xc3\xa9\xff ~".to_vec()),
                proptest::num::u8::ANY,
            ],
            len,
        )
    }

    #[test]
    fn finds_every_comma_and_refuses_quotes_and_carriage_returns() {
        let mut commas = Commas::default();
        for line in [
            "",
            "a",
            ",",
            "a,b",
            "abcdefgh,ijklmnop,",
            ",,,,,,,,,,,,,,,,,",
            "x,y,\u{e9}t\u{e9},,z,0.5,2026-11-20T13:45:01Z",
        ] {
            let expected: Vec<usize> = line.bytes().enumerate().filter(|(_, b)| *b == b',').map(|(i, _)| i).collect();
            let shape = if line.is_ascii() { Line::Printable } else { Line::Text };
            assert_eq!(split_commas(line.as_bytes(), &mut commas), shape, "{line}");
            assert_eq!(commas.as_slice(), expected, "{line}");
        }
        for line in ["a,\"b\"", "abcdefghijklmno\"", "a\rb", "abcdefgh,ijklmnopq\r", "\u{e9},\"x\""] {
            assert_eq!(split_commas(line.as_bytes(), &mut commas), Line::Quoted, "{line:?}");
        }
        for line in ["a\tb", "abcdefgh,ijk\u{7f}", "\u{0}", "abcdefgh\u{1f}", "caf\u{e9},x,y,z,1,2,3"] {
            assert_eq!(split_commas(line.as_bytes(), &mut commas), Line::Text, "{line:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn split_commas_agrees_with_a_byte_by_byte_reading(
            line in csv_bytes(0..80)
        ) {
            let mut commas = Commas::default();
            let shape = split_commas(&line, &mut commas);
            let expected_shape = if line.iter().any(|b| matches!(b, b'"' | b'\r')) {
                Line::Quoted
            } else if line.iter().all(|b| (0x20..=0x7e).contains(b)) {
                Line::Printable
            } else {
                Line::Text
            };
            proptest::prop_assert_eq!(shape, expected_shape);
            let printable = line.iter().all(|b| *b == b'\n' || (*b != b'"' && (0x20..=0x7e).contains(b)));
            proptest::prop_assert_eq!(is_printable_unquoted(&line), printable);
            let text = printable_unquoted_text(&line);
            proptest::prop_assert_eq!(text.is_some(), printable);
            if let Some(text) = text {
                proptest::prop_assert_eq!(Some(text), std::str::from_utf8(&line).ok());
            }
            if shape != Line::Quoted {
                let expected: Vec<usize> =
                    line.iter().enumerate().filter(|(_, b)| **b == b',').map(|(i, _)| i).collect();
                proptest::prop_assert_eq!(commas.as_slice(), &expected[..]);
            }
        }
    }

    #[test]
    fn masks_mark_commas_and_newlines() {
        let mut block = [b'a'; BLOCK];
        block[0] = b',';
        block[15] = b'\n';
        block[16] = b',';
        block[63] = b'\n';
        block[40] = b'"';
        block[41] = b'\r';
        assert_eq!(masks(&block), ((1 << 16) | 1, (1 << 63) | (1 << 15)));
        assert_eq!(masks(&block), masks_scalar(&block));
    }

    /// Every line of `bytes` (as [`for_each_line`] promises) by a byte
    /// loop: start, end, comma positions from the start.
    fn lines_by_bytes(bytes: &[u8]) -> Vec<(usize, usize, Vec<usize>)> {
        let mut lines = Vec::new();
        let mut start = 0;
        while start < bytes.len() {
            let end = bytes[start..].iter().position(|b| *b == b'\n').map_or(bytes.len(), |at| start + at);
            let commas = bytes[start..end].iter().enumerate().filter(|(_, b)| **b == b',').map(|(i, _)| i).collect();
            lines.push((start, end, commas));
            start = end + 1;
        }
        lines
    }

    fn lines_by_masks(bytes: &[u8]) -> Vec<(usize, usize, Vec<usize>)> {
        let mut lines = Vec::new();
        let mut commas = vec![7; 3];
        let whole = for_each_line(bytes, &mut commas, |start, end, commas| {
            lines.push((start, end, commas.to_vec()));
            true
        });
        assert!(whole);
        lines
    }

    #[test]
    fn lines_cross_blocks_and_a_last_line_needs_no_newline() {
        let mut bytes = Vec::new();
        for i in 0..50 {
            bytes.extend_from_slice(format!("{i},ab,{},\n\n", "x".repeat(i * 3)).as_bytes());
        }
        bytes.extend_from_slice(b"tail,without,newline");
        assert_eq!(lines_by_masks(&bytes), lines_by_bytes(&bytes));
        assert_eq!(lines_by_masks(b""), []);
        assert_eq!(lines_by_masks(b"\n"), [(0, 0, vec![])]);
        // Stopping early stops.
        let mut n = 0;
        assert!(!for_each_line(b"a\nb\nc\n", &mut Vec::new(), |_, _, _| {
            n += 1;
            n < 2
        }));
        assert_eq!(n, 2);
    }

    proptest::proptest! {
        #[test]
        fn lines_equal_a_byte_by_byte_reading(
            bytes in csv_bytes(0..400)
        ) {
            proptest::prop_assert_eq!(lines_by_masks(&bytes), lines_by_bytes(&bytes));
        }

        #[test]
        fn simd_masks_equal_a_byte_by_byte_reading(
            bytes in csv_bytes(BLOCK)
        ) {
            let mut block = [0u8; BLOCK];
            block.copy_from_slice(&bytes);
            proptest::prop_assert_eq!(masks(&block), masks_scalar(&block));
        }
    }
}
