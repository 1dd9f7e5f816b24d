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
//! - the heap grown once by a pad of address space (no memory: pages are
//!   only taken when touched); for an answer, that range is advised for
//!   transparent huge pages, so the kernel fills it 2 MiB at a time (what
//!   glibc's own `glibc.malloc.hugetlb=1` tunable does, which a running
//!   process cannot set).
//!
//! Not the huge pages for an ingest: its gigabyte of batch memory is
//! touched once, and on the VMs measured a fresh huge page is zeroed in
//! memory the host has not backed yet, slowly (2.5 s per GiB against
//! 0.33 s in 4 KiB pages; the 16.1M-record ingest 12.90 -> 11.77 s
//! without the advice, sys 4.07 -> 2.17 s: docs/performance.md, "Round
//! 6"). An answer's 100 MB is reused row group after row group.
//!
//! Not for a pass over raw files, which measured slower with it (2.80 ->
//! 3.12 s, and more memory: docs/performance.md), nor a server (not
//! measured; one arena could contend under concurrent requests). A no-op where the allocator is not glibc's; where the
//! kernel has no transparent huge pages (or they are off), the advice is a
//! no-op.

/// Sets the allocator up for one answer from a store (see the module
/// documentation): 256 MiB of heap advised, far more than the largest
/// answer of the benchmark takes (88 MB). Call before any thread starts.
pub fn for_one_answer() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::set_up(256 << 20, true);
}

/// Sets the allocator up for an ingest on this machine (see the module
/// documentation): 2 GiB of heap padded (the most `mallopt` takes), room
/// for the default budgets (the 16.1M-record benchmark peaks at 1.45 GB,
/// mapped inputs included); larger budgets grow the heap past it in
/// ordinary pages. Call before any thread starts.
pub fn for_ingest() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::set_up(libc::c_int::MAX - (glibc::HUGE_PAGE as libc::c_int - 1), false);
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod glibc {
    /// Blocks up to this size come from the heap.
    const MMAP_THRESHOLD: libc::c_int = 256 << 20;
    /// Free memory at the heap's top is given back only past this.
    const TRIM_THRESHOLD: libc::c_int = 1 << 30;
    /// A transparent huge page.
    pub(super) const HUGE_PAGE: usize = 2 << 20;

    /// One arena, blocks kept, and the heap grown by `pad` bytes of
    /// address space, advised for huge pages when `huge`.
    pub(super) fn set_up(pad: libc::c_int, huge: bool) {
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
        // SAFETY: sbrk(0) only reads the program break. malloc/free of a
        // block we never use makes the heap grow by the pad (or not, if it
        // had room, or the kernel refused the address space: then nothing
        // is advised). madvise(MADV_HUGEPAGE) on pages of the heap, inside
        // [before, after) which the heap maps now, changes how the kernel
        // backs them, never their contents; an error (no transparent huge
        // pages) is ignored.
        unsafe {
            let before = libc::sbrk(0) as usize;
            // (black_box: a malloc whose block is unused may be elided.)
            let block = std::hint::black_box(libc::malloc(HUGE_PAGE));
            libc::free(block);
            let after = libc::sbrk(0) as usize;
            let start = before.next_multiple_of(HUGE_PAGE);
            let end = after - after % HUGE_PAGE;
            if huge && before != usize::MAX && after != usize::MAX && end > start {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
}
