//! The gzip decoder's target ([`gunzip`]).

use std::io::Read;

// ------------------------------------------------------------------ gunzip

/// Bytes decoded at most, so that a small bomb stays small.
const MOST_DECODED: u64 = 16 << 20;

/// Bytes as a gzip stream, through the decoder the build reads gzip
/// input with (`records::decode`): ISA-L's when built with it, checked
/// against flate2's, the oracle: the same bytes, or both refuse.
pub fn gunzip(data: &[u8]) {
    let flate = decoded(flate2::read::MultiGzDecoder::new(data));
    #[cfg(isal)]
    {
        let isal = crate::records::decode::isal::Gunzip::new(data).map(decoded);
        assert_eq!(isal.ok().flatten(), flate, "ISA-L and flate2 decode the stream differently");
    }
    #[cfg(not(isal))]
    drop(flate);
}

/// The first [`MOST_DECODED`] bytes `stream` decodes to, or `None` if it
/// refuses them.
fn decoded(stream: impl Read) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    stream.take(MOST_DECODED).read_to_end(&mut out).ok().map(|_| out)
}
