//! Copying and hashing a whole linear memory, split over the cores.
//!
//! # Why this module exists
//!
//! Taking a full image copies the guest's whole memory out and hashes every page of it (an
//! incremental image hashes every page to find those that changed); restoring one copies it
//! back — into the instance, and for incremental images into the owned copy a chain is rebuilt
//! in. A memory can be hundreds of MB, so these passes are split over the cores as
//! [`crate::parallel`] decides: 174 MB took 16 ms on one thread and 13–15 ms on two into
//! resident memory on the 2-core benchmark machine, and fresh buffers fault their pages in on
//! every core. A copy never overlaps guest code.

use std::thread;

use xxhash_rust::xxh3::xxh3_64;

use crate::parallel::{self, run_len};

/// The unit of a wasm linear memory, of an image's page table and of a delta: 64 KiB.
pub const PAGE_SIZE: usize = 64 * 1024;

/// The hash of one page in an image's page table: xxh3-64, seed 0.
pub fn page_hash(page: &[u8]) -> u64 {
    xxh3_64(page)
}

/// Copies `src` into `dest` page by page and writes each 64 KiB page's hash
/// ([`page_hash`]) into `hashes`: what taking a full image does with every memory. Each page is
/// hashed right after it is copied, while it is in the cache.
///
/// # Panics
/// If the lengths differ, or `hashes` does not have one entry per page.
pub(crate) fn copy_hashing(src: &[u8], dest: &mut [u8], hashes: &mut [u64]) {
    assert_eq!(
        src.len(),
        dest.len(),
        "a memory copy between different lengths"
    );
    assert_eq!(
        src.len(),
        hashes.len() * PAGE_SIZE,
        "one hash per 64 KiB page"
    );
    let work = |src: &[u8], dest: &mut [u8], hashes: &mut [u64]| {
        let pages = src
            .chunks_exact(PAGE_SIZE)
            .zip(dest.chunks_exact_mut(PAGE_SIZE));
        for ((from, to), hash) in pages.zip(hashes) {
            to.copy_from_slice(from);
            *hash = page_hash(to);
        }
    };
    let Some(run) = run_len(src.len(), PAGE_SIZE) else {
        return work(src, dest, hashes);
    };
    let pages = run / PAGE_SIZE;
    thread::scope(|scope| {
        let runs = src
            .chunks(pages * PAGE_SIZE)
            .zip(dest.chunks_mut(pages * PAGE_SIZE))
            .zip(hashes.chunks_mut(pages));
        for ((src, dest), hashes) in runs {
            scope.spawn(move || work(src, dest, hashes));
        }
    });
}

/// Writes the hash ([`page_hash`]) of each 64 KiB page of `src` into `hashes`: the page table
/// of a memory, which an incremental image compares with the previous one.
///
/// # Panics
/// If `hashes` does not have one entry per page.
pub(crate) fn hash_pages(src: &[u8], hashes: &mut [u64]) {
    assert_eq!(
        src.len(),
        hashes.len() * PAGE_SIZE,
        "one hash per 64 KiB page"
    );
    let work = |src: &[u8], hashes: &mut [u64]| {
        for (page, hash) in src.chunks_exact(PAGE_SIZE).zip(hashes) {
            *hash = page_hash(page);
        }
    };
    let Some(run) = run_len(src.len(), PAGE_SIZE) else {
        return work(src, hashes);
    };
    let pages = run / PAGE_SIZE;
    thread::scope(|scope| {
        for (src, hashes) in src.chunks(pages * PAGE_SIZE).zip(hashes.chunks_mut(pages)) {
            scope.spawn(move || work(src, hashes));
        }
    });
}

/// An owned copy of `src`. The buffer is allocated zeroed (for a large one the allocator maps
/// fresh pages without writing them), so its pages are faulted in by the copy's threads.
pub(crate) fn to_owned_memory(src: &[u8]) -> Vec<u8> {
    let mut owned = vec![0; src.len()];
    parallel::copy(src, &mut owned);
    owned
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Large enough to be split over the cores.
    const LARGE: usize = 16 << 20;

    #[test]
    fn small_and_split_copies_copy_every_byte() {
        for len in [0, 1, 65536, LARGE + 12345] {
            let src: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
            let mut dest = vec![0xAA; len];
            parallel::copy(&src, &mut dest);
            assert!(dest == src, "{len} bytes");
            assert!(to_owned_memory(&src) == src, "{len} bytes owned");
        }
    }

    #[test]
    fn every_page_is_hashed_with_or_without_a_copy_small_and_split() {
        for pages in [0, 1, 5, LARGE / PAGE_SIZE + 3] {
            let src: Vec<u8> = (0..pages * PAGE_SIZE)
                .map(|i| (i * 7 % 253) as u8)
                .collect();
            let mut dest = vec![0; src.len()];
            let mut hashes = vec![0; pages];
            copy_hashing(&src, &mut dest, &mut hashes);
            assert!(dest == src, "{pages} pages copied");
            let expected: Vec<u64> = src.chunks_exact(PAGE_SIZE).map(page_hash).collect();
            assert_eq!(hashes, expected, "{pages} pages hashed");
            let mut again = vec![0; pages];
            hash_pages(&src, &mut again);
            assert_eq!(again, expected, "{pages} pages hashed without a copy");
        }
    }
}
