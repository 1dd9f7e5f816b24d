//! The allocator's policy for a command that allocates, frees and
//! allocates again blocks of the same sizes on several threads: one answer
//! from a store, and an ingest.
//!
//! A store answer decodes the rollups a row group at a time, each group
//! into blocks of about the same sizes as the last, and gathers its rows in
//! one large buffer; an ingest does the same a batch at a time. With
//! glibc's defaults most of that memory is fresh from the kernel every
//! time: blocks above the mmap threshold are unmapped when freed, the top
//! of the heap is trimmed, each thread allocates from an arena of its own,
//! and every fresh 4 KiB page is a page fault (about 1.6 µs of kernel time
//! on the VMs measured in docs/performance.md: a third of the largest
//! answer's CPU time, and a quarter of an ingest's). So, for those commands:
//!
//! - one arena for every thread, from the heap, for blocks up to 256 MiB,
//!   never trimmed below 1 GiB free: a freed block is reused by the next
//!   row group or batch, whichever thread asks;
//! - the heap grown by a large pad of address space at a time (no memory:
//!   pages are only taken when touched).
//!
//! No transparent huge pages, for either. On the VMs measured, the guest
//! reports its free 2 MiB blocks to the host, which takes them back; a
//! huge page comes from such a block, and is zeroed in memory the host
//! must back again, slowly (2.5 s per GiB against 0.33 s in 4 KiB pages).
//! For an ingest that was 12.90 -> 11.77 s without huge pages, sys 4.07
//! -> 2.17 s (docs/performance.md, "Round 6"). For the largest account's
//! answer it was 165 ms against 69 ms a few seconds after the last
//! command, once those blocks have gone back; huge pages won only when
//! run right after another command (45 against 63 ms: docs/performance.md
//! "Round 19").
//!
//! Not for a pass over raw files, which measured slower with it (2.80 ->
//! 3.12 s, and more memory: docs/performance.md), nor a server (not
//! measured; one arena could contend under concurrent requests). A no-op
//! where the allocator is not glibc's.

/// Sets the allocator up for one answer from a store (see the module
/// documentation): the heap grown 256 MiB at a time, more than the
/// largest answer of the benchmark takes (88 MB). Call before any thread
/// starts.
pub fn for_one_answer() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::set_up(256 << 20);
}

/// Sets the allocator up for an ingest on this machine (see the module
/// documentation): 2 GiB of heap padded (the most `mallopt` takes), room
/// for the default budgets (the 16.1M-record benchmark peaks at 1.45 GB,
/// mapped inputs included); larger budgets grow the heap past it. Call
/// before any thread starts.
pub fn for_ingest() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::set_up(libc::c_int::MAX);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod glibc {
    /// Blocks up to this size come from the heap.
    const MMAP_THRESHOLD: libc::c_int = 256 << 20;
    /// Free memory at the heap's top is given back only past this.
    const TRIM_THRESHOLD: libc::c_int = 1 << 30;

    /// One arena, blocks kept, and the heap grown `pad` bytes at a time.
    pub(super) fn set_up(pad: libc::c_int) {
        // SAFETY: mallopt sets malloc's parameters under malloc's own lock;
        // it touches no memory of ours, and a value glibc refuses leaves the
        // parameter as it was (the call returns 0, which changes nothing
        // but speed).
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
            libc::mallopt(libc::M_TOP_PAD, pad);
        }
    }
}
