//! A vector extended in parts on the threads, each part writing its
//! values straight into the vector's spare capacity.
//!
//! A store answer folds a row group in one part per thread, and each part
//! keeps at most one row per row it reads. Folding into buffers of each
//! thread's and then copying every row into the result touched each row's
//! memory twice (and each fresh page is a page fault on a VM: measure with
//! `bench/store-answer.sh`). Here each part is given the slots of
//! its bound in the vector itself; when all are done, the parts' values are
//! moved down so that they follow each other, and the vector's length is
//! set past them.
//!
//! The vector's pages can be asked for before the parts write
//! ([`populate`]): one `madvise` per thread maps them all, where first
//! writes would take one page fault per 4 KiB page. On a VM each fault
//! costs about as much as zeroing its page; docs/benchmarks.md has the
//! store answer's A/B (`bench/store-answer.sh`).
//!
//! The `unsafe` lines (ARCHITECTURE.md lists them all) are that length and
//! that hint: a part can only add a value through [`Slots::push`], which
//! writes the slot before it counts it, and the parts' counts are what is
//! kept; the hint touches only the vector's spare capacity.

#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::ops::Range;

use rayon::prelude::*;

/// The slots of one part: values written in order, from the first.
pub(crate) struct Slots<'a, T> {
    slots: &'a mut [MaybeUninit<T>],
    len: usize,
}

impl<T> Slots<'_, T> {
    /// Appends `value` after the part's last.
    ///
    /// # Panics
    ///
    /// Past the part's bound: the caller promised at most that many.
    #[inline]
    pub(crate) fn push(&mut self, value: T) {
        self.slots[self.len].write(value);
        self.len += 1;
    }

    /// Values pushed so far.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Appends to `vec` the values of `bounds.len()` parts, made on the
/// threads: part `i` pushes at most `bounds[i]` values in
/// `fill(i, slots)`. The parts' values follow each other in part order,
/// whatever the number of threads; returns each part's result and where
/// its values are in `vec`.
///
/// # Panics
///
/// When a part pushes past its bound (and `vec` is then as it was).
pub(crate) fn extend<T, R, F>(vec: &mut Vec<T>, bounds: &[usize], fill: F) -> Vec<(R, Range<usize>)>
where
    T: Copy + Send,
    R: Send,
    F: Fn(usize, &mut Slots<'_, T>) -> R + Sync,
{
    let start = vec.len();
    let total: usize = bounds.iter().sum();
    vec.reserve(total);
    let mut rest = &mut vec.spare_capacity_mut()[..total];
    let mut parts = Vec::with_capacity(bounds.len());
    for bound in bounds {
        let (slots, after) = std::mem::take(&mut rest).split_at_mut(*bound);
        parts.push(slots);
        rest = after;
    }
    let done: Vec<(R, usize)> = parts
        .into_par_iter()
        .enumerate()
        .map(|(i, slots)| {
            let mut slots = Slots { slots, len: 0 };
            let result = fill(i, &mut slots);
            (result, slots.len)
        })
        .collect();
    // Each part's values moved down after the last part's (never up: a
    // part's values start at or after the sum of the earlier parts' counts).
    let spare = vec.spare_capacity_mut();
    let (mut to, mut from) = (0, 0);
    let mut placed = Vec::with_capacity(done.len());
    for ((result, len), bound) in done.into_iter().zip(bounds) {
        spare.copy_within(from..from + len, to);
        placed.push((result, start + to..start + to + len));
        to += len;
        from += bound;
    }
    // SAFETY: the `to` slots after `start` are initialized. Each part's
    // count is of values it wrote, in order from its first slot (`Slots`
    // counts a slot only after writing it, and no `Slots` is made but
    // above, none outlives its part), and the loop above copied each
    // part's written slots, and only those, to follow the previous part's.
    // `T: Copy`, so the values left behind need no drop, and a copy is a
    // valid value.
    unsafe { vec.set_len(start + to) };
    placed
}

/// Asks the kernel for every page of `vec`'s spare capacity now, in one
/// call per thread, instead of one page fault per 4 KiB page as the parts
/// first write them. Only a hint: where it is refused (an old kernel, not
/// Linux, Miri), the pages come as they are written.
pub(crate) fn populate<T>(vec: &mut Vec<T>) {
    #[cfg(not(all(target_os = "linux", not(miri))))]
    let _ = vec;
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        const PAGE: usize = 4096;
        let spare = vec.spare_capacity_mut();
        let start = spare.as_mut_ptr() as usize;
        let end = start + std::mem::size_of_val(spare);
        let (first, last) = (start.next_multiple_of(PAGE), end / PAGE * PAGE);
        if last <= first {
            return;
        }
        let pages = (last - first) / PAGE;
        let threads = rayon::current_num_threads().max(1);
        (0..threads).into_par_iter().for_each(|i| {
            let from = first + i * pages / threads * PAGE;
            let to = first + (i + 1) * pages / threads * PAGE;
            if to > from {
                // SAFETY: [from, to) is whole pages inside `vec`'s spare
                // capacity, which no one reads; MADV_POPULATE_WRITE maps a
                // page that is not mapped yet and never changes the
                // contents of one that is.
                unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_POPULATE_WRITE) };
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The vector holds what pushing each part's values in part order
        /// would: each part keeps some of its bound's values.
        #[test]
        fn parts_follow_each_other(
            before in proptest::collection::vec(any::<u32>(), 0..20),
            parts in proptest::collection::vec((0usize..50, any::<u64>()), 0..8),
        ) {
            let bounds: Vec<usize> = parts.iter().map(|(bound, _)| *bound).collect();
            // Part i keeps the values of its bound whose bit of its mask is set.
            let keeps = |i: usize, j: usize| parts[i].1 >> (j % 64) & 1 == 1;
            let value = |i: usize, j: usize| (i * 1000 + j) as u32;
            let mut vec = before.clone();
            let placed = extend(&mut vec, &bounds, |i, slots| {
                for j in 0..bounds[i] {
                    if keeps(i, j) {
                        slots.push(value(i, j));
                    }
                }
                i
            });
            let mut expected = before.clone();
            let mut ranges = Vec::new();
            for (i, bound) in bounds.iter().enumerate() {
                let at = expected.len();
                expected.extend((0..*bound).filter(|j| keeps(i, *j)).map(|j| value(i, j)));
                ranges.push((i, at..expected.len()));
            }
            prop_assert_eq!(vec, expected);
            prop_assert_eq!(placed, ranges);
        }
    }

    /// A part pushing past its bound panics, and leaves the vector as it was.
    #[test]
    fn a_part_past_its_bound_panics() {
        let mut vec = vec![7u8];
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            extend(&mut vec, &[1, 2], |i, slots| {
                for _ in 0..=i {
                    slots.push(1u8);
                }
                if i == 0 {
                    slots.push(2);
                }
            })
        }));
        assert!(outcome.is_err());
        assert_eq!(vec, [7]);
    }

    /// Asking for the pages of a vector's spare capacity changes neither
    /// its values nor its length, and the slots are written as without it.
    #[test]
    fn populate_keeps_the_values_and_the_length() {
        let size: u64 = if cfg!(miri) { 4096 } else { 3 << 20 };
        let mut vec: Vec<u64> = (0..1000).collect();
        vec.reserve(size as usize);
        populate(&mut vec);
        assert_eq!(vec.len(), 1000);
        assert!(vec.iter().copied().eq(0..1000));
        vec.extend(1000..size);
        assert!(vec.iter().copied().eq(0..size));
        let mut full: Vec<u8> = vec![7; 4096];
        full.shrink_to_fit();
        populate(&mut full);
        assert!(full.iter().all(|&b| b == 7));
    }
}
