//! gzip decoded by ISA-L's igzip, about 1.7 times as fast as zlib-rs on
//! CSV (docs/benchmarks.md), when the build found the library (`build.rs`).
//!
//! [`Gunzip`] reads a stream of gzip members as flate2's `MultiGzDecoder`
//! does, and refuses what it refuses: a bad header, a damaged deflate
//! stream, a wrong checksum or size, a stream cut inside a member, bytes
//! after a member that do not start another. `isal.c` keeps ISA-L's
//! state behind a pointer, so its layout is the installed header's.
//!
//! Unsafe code: the calls into the C shim, each with the pointers and
//! lengths of live Rust buffers.
#![allow(unsafe_code)]

use std::io::{self, Read};
use std::os::raw::c_int;

/// ISA-L's `struct inflate_state`, never looked into from Rust.
#[repr(C)]
struct State {
    _opaque: [u8; 0],
}

unsafe extern "C" {
    fn telemeter_gunzip_new() -> *mut State;
    fn telemeter_gunzip_free(state: *mut State);
    fn telemeter_gunzip_next_member(state: *mut State);
    fn telemeter_gunzip(
        state: *mut State,
        input: *const u8,
        in_len: u32,
        out: *mut u8,
        out_len: u32,
        consumed: *mut u32,
        produced: *mut u32,
        finished: *mut c_int,
    ) -> c_int;
}

/// Compressed bytes read from the file at a time.
const INPUT_BYTES: usize = 256 << 10;

/// A gzip stream of one or more members, decoded.
pub(crate) struct Gunzip<R> {
    inner: R,
    state: *mut State,
    input: Box<[u8]>,
    /// The part of `input` not decoded yet.
    start: usize,
    end: usize,
    /// Whether the last member ended, so the next byte starts another.
    between_members: bool,
    /// Whether the undecoded bytes start a member whose header flags are
    /// not checked yet.
    member_start: bool,
}

// The state is owned by one `Gunzip` and used only through `&mut self`.
unsafe impl<R: Send> Send for Gunzip<R> {}

impl<R> Drop for Gunzip<R> {
    fn drop(&mut self) {
        // SAFETY: `state` came from `telemeter_gunzip_new` and is freed once.
        unsafe { telemeter_gunzip_free(self.state) }
    }
}

impl<R: Read> Gunzip<R> {
    pub(crate) fn new(inner: R) -> io::Result<Gunzip<R>> {
        // SAFETY: no arguments; a null result is refused below.
        let state = unsafe { telemeter_gunzip_new() };
        if state.is_null() {
            return Err(io::Error::new(io::ErrorKind::OutOfMemory, "no memory for the gzip decoder"));
        }
        let input = vec![0; INPUT_BYTES].into_boxed_slice();
        Ok(Gunzip { inner, state, input, start: 0, end: 0, between_members: false, member_start: true })
    }

    /// Reads more compressed bytes after those not decoded yet: false at
    /// the end of the file.
    fn refill(&mut self) -> io::Result<bool> {
        if self.start > 0 {
            self.input.copy_within(self.start..self.end, 0);
            (self.start, self.end) = (0, self.end - self.start);
        }
        if self.end == self.input.len() {
            return Err(invalid("a gzip header longer than the decoder reads"));
        }
        loop {
            match self.inner.read(&mut self.input[self.end..]) {
                Ok(read) => {
                    self.end += read;
                    return Ok(read > 0);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl<R: Read> Read for Gunzip<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let out_len = u32::try_from(buf.len()).unwrap_or(u32::MAX);
        loop {
            if self.start == self.end && !self.refill()? {
                return match self.between_members {
                    true => Ok(0),
                    false => Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ends inside a member")),
                };
            }
            if self.between_members {
                // SAFETY: a live state from `telemeter_gunzip_new`.
                unsafe { telemeter_gunzip_next_member(self.state) };
                (self.between_members, self.member_start) = (false, true);
            }
            if self.member_start {
                // ISA-L reads past reserved header flags; RFC 1952 (and
                // flate2) refuse them.
                while self.end - self.start < 4 && self.refill()? {}
                if self.end - self.start >= 4 && self.input[self.start + 3] & 0xE0 != 0 {
                    return Err(invalid("invalid gzip header"));
                }
                self.member_start = false;
            }
            let (mut consumed, mut produced, mut finished) = (0u32, 0u32, 0 as c_int);
            let input = &self.input[self.start..self.end];
            // SAFETY: the input and output pointers are valid for the
            // lengths given (both at most their slices' lengths), and the
            // decoder keeps neither past the call.
            let code = unsafe {
                telemeter_gunzip(
                    self.state,
                    input.as_ptr(),
                    input.len() as u32,
                    buf.as_mut_ptr(),
                    out_len,
                    &mut consumed,
                    &mut produced,
                    &mut finished,
                )
            };
            if code < 0 {
                return Err(invalid(reason(code)));
            }
            self.start += consumed as usize;
            self.between_members = finished != 0;
            if produced > 0 {
                return Ok(produced as usize);
            }
            if consumed == 0 && !self.between_members && self.start < self.end {
                // Nothing taken from bytes at hand: it wants more at once.
                if !self.refill()? {
                    return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the stream ends inside a member"));
                }
            }
        }
    }
}

fn invalid(reason: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, reason)
}

/// What an ISA-L error code says of the stream.
fn reason(code: c_int) -> &'static str {
    match code {
        -1 => "invalid deflate block",
        -2 => "invalid deflate symbol",
        -3 => "invalid deflate distance",
        -4 => "invalid gzip header",
        -5 => "unsupported compression method",
        -6 => "checksum or size mismatch",
        _ => "damaged deflate stream",
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use proptest::prelude::*;

    use super::*;

    fn gzip(text: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(text).unwrap();
        encoder.finish().unwrap()
    }

    /// The bytes `read` gives a stream in reads of at most `step` bytes,
    /// or the error's kind.
    fn decode(read: &mut dyn Read, step: usize) -> Result<Vec<u8>, io::ErrorKind> {
        let (mut out, mut buf) = (Vec::new(), vec![0; step]);
        loop {
            match read.read(&mut buf) {
                Ok(0) => return Ok(out),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(e) => return Err(e.kind()),
            }
        }
    }

    fn both(stream: &[u8], step: usize) -> (Result<Vec<u8>, ()>, Result<Vec<u8>, ()>) {
        let isal = decode(&mut Gunzip::new(stream).unwrap(), step).map_err(|_| ());
        let flate = decode(&mut flate2::read::MultiGzDecoder::new(stream), step).map_err(|_| ());
        (isal, flate)
    }

    /// Text that compresses: lines of a few repeated words and numbers.
    fn text() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec((0u8..6, 0u32..2000), 0..3000).prop_map(|words| {
            let mut text = Vec::new();
            for (word, number) in words {
                let word = ["call", "\"sms\"", ",", "\r\n", "outbound", "2026-08-01T00:00:00Z"][word as usize];
                write!(text, "{word}{number}").unwrap();
            }
            text
        })
    }

    #[test]
    fn members_read_whole_in_any_read_size() {
        let text: Vec<u8> = (0..200_000u32).flat_map(|i| format!("{i},\"x{}\"\r\n", i % 97).into_bytes()).collect();
        let mut stream = gzip(&text[..150_000]);
        stream.extend(gzip(b""));
        stream.extend(gzip(&text[150_000..]));
        for step in [1, 7, 4096, 1 << 20] {
            assert_eq!(decode(&mut Gunzip::new(&stream[..]).unwrap(), step), Ok(text.clone()), "reads of {step}");
        }
        // Cut inside a member, anywhere: refused, never a prefix taken as whole.
        for cut in [1, 10, stream.len() / 2, stream.len() - 1] {
            assert!(decode(&mut Gunzip::new(&stream[..cut]).unwrap(), 4096).is_err(), "cut at {cut}");
        }
    }

    /// Every bit of a member's header and trailer flipped, one at a
    /// time: ISA-L refuses or accepts each as flate2 does.
    #[test]
    fn header_and_trailer_damage_as_flate2() {
        let stream = gzip(b"record_id,account\r\n\"a\",\"b\"\r\n");
        let edges = (0..12).chain(stream.len() - 8..stream.len());
        for (at, bit) in edges.flat_map(|at| (0..8).map(move |bit| (at, bit))) {
            let mut damaged = stream.clone();
            damaged[at] ^= 1 << bit;
            let (isal, flate) = both(&damaged, 4096);
            assert_eq!(isal, flate, "byte {at}, bit {bit}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// ISA-L's decoder agrees with flate2's on streams of members,
        /// damaged or not: the same bytes, or both refuse.
        #[test]
        fn agrees_with_flate2_on_damaged_streams(
            texts in proptest::collection::vec(text(), 1..4),
            damage in 0u8..4,
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
            tail in proptest::collection::vec(any::<u8>(), 1..20),
            step in prop::sample::select(vec![1usize, 13, 4096, 1 << 16]),
        ) {
            let mut stream: Vec<u8> = texts.iter().flat_map(|text| gzip(text)).collect();
            let whole: Vec<u8> = texts.concat();
            let place = at.index(stream.len());
            match damage {
                0 => {}
                1 => stream[place] ^= byte.max(1),
                2 => stream.truncate(place),
                _ => stream.extend_from_slice(&tail),
            }
            let (isal, flate) = both(&stream, step);
            if damage == 0 {
                prop_assert_eq!(&isal, &Ok(whole));
            }
            prop_assert_eq!(isal, flate);
        }
    }
}
