//! The allocator's policy for a command that answers once and exits.
//!
//! A store answer decodes the rollups a row group at a time on several
//! threads, each group into blocks of about the same sizes as the last,
//! and gathers its rows in one large buffer. With glibc's defaults most of
//! that memory is fresh from the kernel every time: blocks above the mmap
//! threshold are unmapped when freed, the top of the heap is trimmed, each
//! thread allocates from an arena of its own, and every fresh 4 KiB page is
//! a page fault (about 1.6 µs of kernel time on the VMs measured in
//! docs/performance.md, a third of the largest answer's CPU time). So, for
//! such a command only:
//!
//! - one arena for every thread, from the heap, for blocks up to 256 MiB,
//!   never trimmed below 1 GiB free: a freed block is reused by the next
//!   row group, whichever thread asks;
//! - the heap grown once by 256 MiB of address space (no memory: pages
//!   are only taken when touched) and that range advised for transparent
//!   huge pages, so the kernel fills it 2 MiB at a time (what glibc's own
//!   `glibc.malloc.hugetlb=1` tunable does, which a running process cannot
//!   set).
//!
//! Not for `ingest` or a pass over raw files, whose peak memory is what
//! their flags bound and which gain nothing from one arena. A no-op where
//! the allocator is not glibc's; where the kernel has no transparent huge
//! pages (or they are off), the advice is a no-op.

/// Sets the allocator up for one answer from a store (see the module
/// documentation). Call before the work allocates, on the main thread.
pub fn for_one_answer() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::for_one_answer();
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod glibc {
    /// Blocks up to this size come from the heap.
    const MMAP_THRESHOLD: libc::c_int = 256 << 20;
    /// Free memory at the heap's top is given back only past this.
    const TRIM_THRESHOLD: libc::c_int = 1 << 30;
    /// Address space the heap grows by when it grows.
    const TOP_PAD: libc::c_int = 256 << 20;
    /// A transparent huge page.
    const HUGE_PAGE: usize = 2 << 20;

    pub(super) fn for_one_answer() {
        // SAFETY: mallopt sets malloc's parameters under malloc's own lock;
        // it touches no memory of ours, and a value glibc refuses leaves the
        // parameter as it was (the call returns 0, which changes nothing
        // but speed).
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
            libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
            libc::mallopt(libc::M_TOP_PAD, TOP_PAD);
        }
        // SAFETY: sbrk(0) only reads the program break. malloc/free of a
        // block we never use makes the heap grow by the pad (or not, if it
        // had room: then nothing is advised). madvise(MADV_HUGEPAGE) on
        // pages of the heap, inside [before, after) which the heap maps
        // now, changes how the kernel backs them, never their contents;
        // an error (no transparent huge pages) is ignored.
        unsafe {
            let before = libc::sbrk(0) as usize;
            // (black_box: a malloc whose block is unused may be elided.)
            let block = std::hint::black_box(libc::malloc(HUGE_PAGE));
            libc::free(block);
            let after = libc::sbrk(0) as usize;
            let start = before.next_multiple_of(HUGE_PAGE);
            let end = after - after % HUGE_PAGE;
            if before != usize::MAX && after != usize::MAX && end > start {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
}
