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
//! on a VM: a third of the largest
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
//! must back again, several times slower than 4 KiB pages. An ingest is
//! faster without them (`bench/ingest-ab.sh`), and so is the largest
//! account's answer a few seconds after the last command, once those
//! blocks have gone back; huge pages win only when it runs right after
//! another command (`bench/store-answer.sh` with and without `PAUSE`).
//!
//! Not for a pass over raw files, which is slower with it and takes more
//! memory (`bench/ab.sh`), nor a server (not measured; one arena could
//! contend under concurrent requests). A no-op where the allocator is not
//! glibc's.
//!
//! The pad is address space, not memory, but a limit on address space
//! (`ulimit -v`) counts it: under such a limit the pad is at most an
//! eighth of it, so that a small run fits under a small limit.
//!
//! Every command's allocations go through [`Reporting`], the system
//! allocator that, when an allocation fails, says so in one line and exits
//! with status 1, instead of Rust's abort (a core dump, status 134). A new
//! thread also maps memory outside the allocator (its signal stack); when
//! that fails the standard library panics in the thread, and
//! [`report_thread_start_failures`] turns that panic into the same line.

/// Sets the allocator up for one answer from a store (see the module
/// documentation): the heap grown 256 MiB at a time, more than the
/// largest answer of the benchmark takes (docs/benchmarks.md). Call before
/// any thread starts.
pub fn for_one_answer() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::set_up(256 << 20);
}

/// Sets the allocator up for an ingest on this machine (see the module
/// documentation): 2 GiB of heap padded (the most `mallopt` takes), room
/// for the default budgets (docs/benchmarks.md has the benchmark's peak);
/// larger budgets grow the heap past it. Call before any thread starts.
pub fn for_ingest() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::set_up(libc::c_int::MAX);
}

/// Gives the kernel back the memory the allocator holds free (the ingest
/// policy keeps up to a gigabyte of it for the next batch): for a process
/// that waits with nothing to do, such as `spark-task serve` between
/// tasks. A no-op where the allocator is not glibc's.
pub fn give_back_free() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    glibc::trim();
}

/// The system allocator, but an allocation that fails ends the process
/// with a message and status 1 (see the module documentation).
pub struct Reporting;

#[allow(unsafe_code)]
// SAFETY: every call is handed to `System` unchanged; only a null result
// (a failed allocation) is acted on, by ending the process.
unsafe impl std::alloc::GlobalAlloc for Reporting {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System`'s.
        checked(unsafe { std::alloc::System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        checked(unsafe { std::alloc::System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: as `alloc`: `ptr` came from `System` through this type.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`.
        checked(unsafe { std::alloc::System.realloc(ptr, layout, new_size) }, new_size)
    }
}

/// Wraps the process's panic hook (once) so that a thread that panics
/// because the kernel refused it memory as it started (the standard
/// library maps each new thread's signal stack with `mmap`, outside the
/// allocator) ends the process as a failed allocation does: one line,
/// status 1. Every other panic goes to the hook as before.
pub fn report_thread_start_failures() {
    static WRAPPED: std::sync::Once = std::sync::Once::new();
    WRAPPED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info
                .payload()
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| info.payload().downcast_ref::<&str>().copied());
            if message.is_some_and(is_thread_start_failure) {
                out_of_memory_at("start a thread (its signal stack)");
            }
            previous(info);
        }));
    });
}

/// Whether a panic message is the standard library's for a thread whose
/// signal stack could not be mapped.
fn is_thread_start_failure(message: &str) -> bool {
    message.starts_with("failed to allocate an alternative stack")
}

/// `block`, unless it is null: then the process ends (see [`out_of_memory`]).
#[inline(always)]
fn checked(block: *mut u8, size: usize) -> *mut u8 {
    if block.is_null() {
        out_of_memory(size);
    }
    block
}

/// Writes why to standard error without allocating, and exits with status
/// 1 without running destructors (which could allocate, or wait on a
/// thread that is itself out of memory). Only the first thread to fail
/// says so: any other waits for the exit, so the error is one line.
#[cold]
#[inline(never)]
fn out_of_memory(size: usize) -> ! {
    let mut what = [0u8; 64];
    let mut cursor = std::io::Cursor::new(&mut what[..]);
    let _ = std::io::Write::write_fmt(&mut cursor, format_args!("allocate {size} bytes"));
    let written = cursor.position() as usize;
    out_of_memory_at(std::str::from_utf8(&what[..written]).unwrap_or("allocate"))
}

/// [`out_of_memory`]'s line and exit, for `what` could not be done.
#[cold]
#[inline(never)]
fn out_of_memory_at(what: &str) -> ! {
    use std::io::Write;
    use std::sync::atomic::{AtomicBool, Ordering};
    static REPORTED: AtomicBool = AtomicBool::new(false);
    if REPORTED.swap(true, Ordering::SeqCst) {
        loop {
            // nanosleep: no allocation; the first thread's exit ends this one.
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
    let mut line = [0u8; 256];
    let mut cursor = std::io::Cursor::new(&mut line[..]);
    let _ = writeln!(
        cursor,
        "error: out of memory: cannot {what}; raise the process's memory limit \
         (ulimit -v), or lower an ingest's budgets (--batch-mb)"
    );
    let written = cursor.position() as usize;
    let _ = std::io::stderr().lock().write_all(&line[..written]);
    std::process::exit(1)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
mod glibc {
    /// Blocks up to this size come from the heap.
    const MMAP_THRESHOLD: libc::c_int = 256 << 20;
    /// Free memory at the heap's top is given back only past this.
    const TRIM_THRESHOLD: libc::c_int = 1 << 30;

    /// One arena, blocks kept, and the heap grown `pad` bytes at a time
    /// (at most an eighth of an address-space limit).
    pub(super) fn set_up(pad: libc::c_int) {
        let pad = match address_space_limit() {
            Some(limit) => pad.min(libc::c_int::try_from(limit / 8).unwrap_or(libc::c_int::MAX)),
            None => pad,
        };
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

    /// Every free page of the heap given back.
    pub(super) fn trim() {
        // SAFETY: malloc_trim works under malloc's own locks, on memory
        // malloc holds free; no block of ours is touched.
        unsafe {
            libc::malloc_trim(0);
        }
    }

    /// The process's limit on address space (`ulimit -v`), if it has one.
    fn address_space_limit() -> Option<u64> {
        let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit writes the one struct it is given.
        let read = unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut limit) };
        (read == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
    }
}
