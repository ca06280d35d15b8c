//! Copying a whole linear memory, split over the cores.
//!
//! # Why this module exists
//!
//! Restoring an image copies the guest's whole memory — into the instance, and for incremental
//! images into the owned copy a chain is rebuilt in — and a memory can be hundreds of MB. Such a
//! copy is bound by memory bandwidth, which one core does not saturate, and into memory fresh
//! from the OS by page faults, which several cores take in parallel: 174 MB took 16 ms on one
//! thread and 13–15 ms on two into resident memory on the 2-core benchmark machine. So a large
//! copy is split into one contiguous run per core, each copied by a scoped thread that ends
//! with the call; the copy never overlaps guest code.

use std::num::NonZeroUsize;
use std::thread;

/// Below this a copy stays on the calling thread: a thread costs ~50 µs to start.
const PARALLEL_BYTES: usize = 16 << 20;

/// Most threads one copy uses.
const MAX_THREADS: usize = 4;

/// Copies `src` into `dest`, which has the same length.
///
/// # Panics
/// If the lengths differ.
pub(crate) fn copy_memory(src: &[u8], dest: &mut [u8]) {
    assert_eq!(
        src.len(),
        dest.len(),
        "a memory copy between different lengths"
    );
    let threads = thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(MAX_THREADS);
    if threads < 2 || src.len() < PARALLEL_BYTES {
        dest.copy_from_slice(src);
        return;
    }
    let run = src.len().div_ceil(threads);
    thread::scope(|scope| {
        for (from, to) in src.chunks(run).zip(dest.chunks_mut(run)) {
            scope.spawn(move || to.copy_from_slice(from));
        }
    });
}

/// An owned copy of `src`. The buffer is allocated zeroed (for a large one the allocator maps
/// fresh pages without writing them), so its pages are faulted in by the copy's threads.
pub(crate) fn to_owned_memory(src: &[u8]) -> Vec<u8> {
    let mut owned = vec![0; src.len()];
    copy_memory(src, &mut owned);
    owned
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_split_copies_copy_every_byte() {
        for len in [0, 1, 65536, PARALLEL_BYTES + 12345] {
            let src: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut dest = vec![0xAA; len];
            copy_memory(&src, &mut dest);
            assert!(dest == src, "{len} bytes");
            assert!(to_owned_memory(&src) == src, "{len} bytes owned");
        }
    }
}
