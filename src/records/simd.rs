//! Finding the structure of CSV bytes without a test per byte.
//!
//! - The structural index of a chunk of printable lines: for each block of
//!   64 bytes, a bit mask of its commas, newlines, quotes and carriage
//!   returns ([`Masks`]), so that the reader walks the set bits
//!   (`trailing_zeros`, [`for_each_line`]) instead of testing bytes one by
//!   one. The bytes inside quotes are the prefix-XOR of the quote mask
//!   ([`prefix_xor`], as simdjson and simd-csv find them), so a comma
//!   inside quotes is masked out; a newline always ends a line, and a line
//!   with a quote open at its newline is marked so that its reader refuses
//!   it. On x86_64, SSE2 (part of the x86_64 baseline, so there is nothing
//!   to detect at run time) compares 16 bytes an instruction and
//!   `pmovmskb` gives the masks; elsewhere a byte loop computes the same
//!   masks ([`masks_scalar`], which the tests and the `csv_reader` fuzz
//!   target hold the SSE2 masks to, byte for byte). AVX2 (32 bytes an
//!   instruction, detected at run time) was not tried: the masks are a
//!   small part of the reader's time once the per-byte work is gone
//!   (`perf` over `bench/run.sh`).
//! - For the lines of other chunks, the SWAR comma scan ([`split_commas`],
//!   eight bytes a step in a `u64`) that also tells what bytes a line holds.
//!
//! This module holds the crate's only `std::arch` code and two of its
//! `unsafe` blocks (ARCHITECTURE.md lists them all): the call of a
//! `#[target_feature]` function, and printable ASCII taken as text without
//! a second UTF-8 check ([`printable_text`]). Miri is not
//! installed here; the SSE2 path is checked against the byte loop by the
//! property tests and the fuzz target.
#![allow(unsafe_code)]

/// Bytes per block.
pub(crate) const BLOCK: usize = 64;

/// The masks of one block: bit `i` of each is set when `block[i]` is that
/// byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Masks {
    pub(crate) commas: u64,
    pub(crate) newlines: u64,
    pub(crate) quotes: u64,
    /// Carriage returns.
    pub(crate) returns: u64,
}

/// The [`Masks`] of one block.
#[inline]
pub(crate) fn masks(block: &[u8; BLOCK]) -> Masks {
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

/// Bit `i` set when an odd number of the bits `0..=i` of `x` are: with `x`
/// a block's quotes, the bytes inside quotes (an opening quote counts as
/// inside, a closing one as outside). Six shifts and exclusive ors, the
/// ladder simdjson uses where it has no carry-less multiply.
#[inline]
pub(crate) fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

/// What the structural index found of one line ([`for_each_line`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexedLine<'m> {
    /// Where the line starts in the bytes.
    pub(crate) start: usize,
    /// Where it ends: at its newline, or at the end of the bytes.
    pub(crate) end: usize,
    /// Its commas outside quotes, from `start`.
    pub(crate) commas: &'m [usize],
    /// Its quotes, from `start`.
    pub(crate) quotes: &'m [usize],
    /// How many carriage returns it holds.
    pub(crate) returns: u32,
    /// Whether it holds an odd number of quotes: a quote open at its end.
    pub(crate) open: bool,
}

/// The buffers [`for_each_line`] keeps a line's positions in.
#[derive(Debug, Default)]
pub(crate) struct LineMarks {
    commas: Vec<usize>,
    quotes: Vec<usize>,
}

/// Pushes the positions of the set bits of `bits` (a block at `base`),
/// from `start`, onto `to`.
#[inline]
fn push_bits(to: &mut Vec<usize>, mut bits: u64, base: usize, start: usize) {
    while bits != 0 {
        to.push(base + bits.trailing_zeros() as usize - start);
        bits &= bits - 1;
    }
}

/// Calls `line` with every line of `bytes` ([`IndexedLine`]): each line
/// that ends in a newline, and a last one without a newline unless it is
/// empty. Stops when `line` returns `false`; whether it never did. `marks`
/// holds the positions.
///
/// A quote opens or closes a quoted part, so the bytes inside quotes are
/// the prefix-XOR of the quote mask ([`prefix_xor`]), carried from block to
/// block; a comma inside quotes is not a field's end. A newline always ends
/// a line here: when a quote is open at a newline, that line is
/// [`IndexedLine::open`] (its record may span lines, which the reader
/// reads on its own) and the mask is flipped past the newline, so the
/// next line starts outside quotes.
#[inline]
pub(crate) fn for_each_line(
    bytes: &[u8],
    marks: &mut LineMarks,
    mut line: impl FnMut(&IndexedLine<'_>) -> bool,
) -> bool {
    let LineMarks { commas, quotes } = marks;
    commas.clear();
    quotes.clear();
    let mut returns = 0u32;
    let mut start = 0;
    let mut base = 0;
    // All ones when a quote is open at the end of the last block.
    let mut carry = 0u64;
    while base < bytes.len() {
        let found = match bytes.get(base..base + BLOCK) {
            Some(block) => {
                let mut whole = [0u8; BLOCK];
                whole.copy_from_slice(block);
                masks(&whole)
            }
            None => {
                // The short tail, padded with bytes that are none of them.
                let mut tail = [0u8; BLOCK];
                tail[..bytes.len() - base].copy_from_slice(&bytes[base..]);
                masks(&tail)
            }
        };
        let mut inside = prefix_xor(found.quotes) ^ carry;
        let (mut found_commas, mut found_quotes, mut found_returns) = (found.commas, found.quotes, found.returns);
        let mut found_newlines = found.newlines;
        // What comes before each newline belongs to its line; the rest to
        // the next line.
        while found_newlines != 0 {
            let bit = found_newlines & found_newlines.wrapping_neg();
            let before = bit - 1;
            let end = base + found_newlines.trailing_zeros() as usize;
            push_bits(commas, found_commas & before & !inside, base, start);
            found_commas &= !before;
            if found_quotes & before != 0 {
                push_bits(quotes, found_quotes & before, base, start);
                found_quotes &= !before;
            }
            returns += (found_returns & before).count_ones();
            found_returns &= !before;
            let open = inside & bit != 0;
            if open {
                // The next line starts outside quotes.
                inside ^= !(bit | before);
            }
            let indexed = IndexedLine { start, end, commas, quotes, returns, open };
            if !line(&indexed) {
                return false;
            }
            commas.clear();
            quotes.clear();
            returns = 0;
            start = end + 1;
            found_newlines &= found_newlines - 1;
        }
        push_bits(commas, found_commas & !inside, base, start);
        push_bits(quotes, found_quotes, base, start);
        returns += found_returns.count_ones();
        // Open at the block's last byte, unless that byte ends a line.
        carry = 0u64.wrapping_sub((inside & !found.newlines) >> 63);
        base += BLOCK;
    }
    if start < bytes.len() {
        return line(&IndexedLine { start, end: bytes.len(), commas, quotes, returns, open: carry != 0 });
    }
    true
}

/// [`masks`] one byte at a time: the reference the SIMD form must equal.
pub(crate) fn masks_scalar(block: &[u8; BLOCK]) -> Masks {
    let mut masks = Masks::default();
    for (i, &b) in block.iter().enumerate() {
        masks.commas |= u64::from(b == b',') << i;
        masks.newlines |= u64::from(b == b'\n') << i;
        masks.quotes |= u64::from(b == b'"') << i;
        masks.returns |= u64::from(b == b'\r') << i;
    }
    masks
}

/// [`masks`] with SSE2: four 16-byte compares per byte sought.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
#[inline]
fn masks_sse2(block: &[u8; BLOCK]) -> Masks {
    use std::arch::x86_64::{_mm_cmpeq_epi8, _mm_movemask_epi8, _mm_set1_epi8, _mm_set_epi8};
    let comma = _mm_set1_epi8(b',' as i8);
    let newline = _mm_set1_epi8(b'\n' as i8);
    let quote = _mm_set1_epi8(b'"' as i8);
    let cr = _mm_set1_epi8(b'\r' as i8);
    let mut masks = Masks::default();
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
        masks.commas |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, comma)) as u16) << (16 * k);
        masks.newlines |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, newline)) as u16) << (16 * k);
        masks.quotes |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, quote)) as u16) << (16 * k);
        masks.returns |= u64::from(_mm_movemask_epi8(_mm_cmpeq_epi8(v, cr)) as u16) << (16 * k);
    }
    masks
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

/// Whether every byte of `bytes` is printable ASCII (`0x20..=0x7e`), a
/// newline or a carriage return. A loop the compiler vectorises.
fn is_printable(bytes: &[u8]) -> bool {
    bytes.chunks(4096).all(|block| {
        let mut odd = 0u8;
        for &b in block {
            odd |= ((b.wrapping_sub(0x20) > 0x5e) & (b != b'\n') & (b != b'\r')) as u8;
        }
        odd == 0
    })
}

/// `bytes` as text when every byte is printable ASCII, a newline or a
/// carriage return ([`is_printable`]), else `None`: that one pass also
/// proves the bytes UTF-8, so the usual chunk is not validated a second
/// time (`std::str::from_utf8` would read every byte again).
pub(crate) fn printable_text(bytes: &[u8]) -> Option<&str> {
    if !is_printable(bytes) {
        return None;
    }
    // SAFETY: every byte of `bytes` is 0x0a, 0x0d or in 0x20..=0x7e
    // (checked just above; the property test below holds `is_printable` to
    // a byte loop): ASCII only, which is valid UTF-8.
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
            let printable = line.iter().all(|b| matches!(b, b'\n' | b'\r' | 0x20..=0x7e));
            proptest::prop_assert_eq!(is_printable(&line), printable);
            let text = printable_text(&line);
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
    fn masks_mark_commas_newlines_quotes_and_carriage_returns() {
        let mut block = [b'a'; BLOCK];
        block[0] = b',';
        block[15] = b'\n';
        block[16] = b',';
        block[63] = b'\n';
        block[40] = b'"';
        block[41] = b'\r';
        let expected =
            Masks { commas: (1 << 16) | 1, newlines: (1 << 63) | (1 << 15), quotes: 1 << 40, returns: 1 << 41 };
        assert_eq!(masks(&block), expected);
        assert_eq!(masks_scalar(&block), expected);
    }

    #[test]
    fn prefix_xor_marks_the_bytes_inside_quotes() {
        assert_eq!(prefix_xor(0), 0);
        assert_eq!(prefix_xor(1), !0);
        // Quotes at 1 and 6: bytes 1 to 5 inside.
        assert_eq!(prefix_xor(0b0100_0010), 0b0011_1110);
        for x in [0x8000_0000_0000_0001u64, 0xdead_beef_0123_4567, u64::MAX] {
            let by_bits = (0..64).fold(0u64, |acc, i| {
                let through = if i == 63 { u64::MAX } else { (2u64 << i) - 1 };
                acc | (u64::from((x & through).count_ones() % 2) << i)
            });
            assert_eq!(prefix_xor(x), by_bits, "{x:#x}");
        }
    }

    /// One line as [`for_each_line`] promises it, owned.
    #[derive(Debug, PartialEq, Eq)]
    struct Found {
        start: usize,
        end: usize,
        commas: Vec<usize>,
        quotes: Vec<usize>,
        returns: u32,
        open: bool,
    }

    /// Every line of `bytes` by a byte loop, each starting outside quotes.
    fn lines_by_bytes(bytes: &[u8]) -> Vec<Found> {
        let mut lines = Vec::new();
        let mut start = 0;
        while start < bytes.len() {
            let end = bytes[start..].iter().position(|b| *b == b'\n').map_or(bytes.len(), |at| start + at);
            let mut found = Found { start, end, commas: vec![], quotes: vec![], returns: 0, open: false };
            for (i, &b) in bytes[start..end].iter().enumerate() {
                match b {
                    b',' if !found.open => found.commas.push(i),
                    b'"' => {
                        found.quotes.push(i);
                        found.open = !found.open;
                    }
                    b'\r' => found.returns += 1,
                    _ => {}
                }
            }
            lines.push(found);
            start = end + 1;
        }
        lines
    }

    fn lines_by_masks(bytes: &[u8]) -> Vec<Found> {
        let mut lines = Vec::new();
        let mut marks = LineMarks { commas: vec![7; 3], quotes: vec![8] };
        let whole = for_each_line(bytes, &mut marks, |line| {
            lines.push(Found {
                start: line.start,
                end: line.end,
                commas: line.commas.to_vec(),
                quotes: line.quotes.to_vec(),
                returns: line.returns,
                open: line.open,
            });
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
            bytes.extend_from_slice(format!("\"{i},\",\"a\"\"b\",{}\"\r\n", ",".repeat(i * 2)).as_bytes());
            bytes.extend_from_slice(format!("open \"{},\n", ",".repeat(i)).as_bytes());
        }
        bytes.extend_from_slice(b"tail,without,\"newline");
        assert_eq!(lines_by_masks(&bytes), lines_by_bytes(&bytes));
        assert!(lines_by_masks(&bytes).last().is_some_and(|line| line.open));
        assert_eq!(lines_by_masks(b""), []);
        let empty = Found { start: 0, end: 0, commas: vec![], quotes: vec![], returns: 0, open: false };
        assert_eq!(lines_by_masks(b"\n"), [empty]);
        // Stopping early stops.
        let mut n = 0;
        assert!(!for_each_line(b"a\nb\nc\n", &mut LineMarks::default(), |_| {
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

        #[test]
        fn lines_with_quotes_equal_a_byte_by_byte_reading(
            bytes in proptest::collection::vec(proptest::sample::select(b",\"\"\n\ra".to_vec()), 0..400)
        ) {
            proptest::prop_assert_eq!(lines_by_masks(&bytes), lines_by_bytes(&bytes));
        }
    }
}
