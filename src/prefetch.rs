//! Software prefetch: a hint that a loop will soon read some memory, so the
//! CPU starts loading its cache lines now. The ingest's rollup fold reads
//! rows, their text and its group table in an order the hardware
//! prefetcher does not follow (a shard's rows are every sixteenth row of a
//! chunk, a group's slot is where its hash falls), and waited on memory
//! for most of its time (measure with `bench/ingest-ab.sh`).
//!
//! A hint only: nothing is read into the program, no result depends on it,
//! and on targets other than x86-64 it does nothing.

/// Starts loading every cache line of `value` (a row of a few lines, or
/// a short text).
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    let first = (value as *const T).cast::<u8>();
    let size = std::mem::size_of_val(value);
    let mut at = 0;
    while at < size {
        line(first.wrapping_add(at));
        at += LINE;
    }
    if size > 0 {
        line(first.wrapping_add(size - 1));
    }
}

/// Bytes of a cache line.
const LINE: usize = 64;

#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(unsafe_code)]
fn line(at: *const u8) {
    use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
    // SAFETY: `prefetch` (SSE, which every x86-64 CPU has) never faults and
    // never reads into the program: the address needs no validity at all
    // (here it is always inside, or one past, a live reference).
    unsafe { _mm_prefetch::<_MM_HINT_T0>(at.cast::<i8>()) }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn line(_at: *const u8) {}
