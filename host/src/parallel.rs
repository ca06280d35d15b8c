//! Splitting one pass over a large buffer across the cores.
//!
//! # Why this module exists
//!
//! Checkpoints move whole states and memories in one go — an image copied out of an instance or
//! back into one, a state file read and its CRC checked — and they can be hundreds of MB. Such
//! a pass is bound by memory bandwidth, which one core does not saturate, by per-byte work
//! (hashing, CRC), which is one core's, and, into a buffer fresh from the OS, by page faults,
//! which several cores take in parallel. So a large pass is split into one contiguous run per
//! core, each done by a scoped thread that ends with the call. This module decides the split,
//! so every such pass splits alike; the passes themselves live with what they work on.

use std::fs::File;
use std::io;
use std::num::NonZeroUsize;
use std::path::Path;
use std::thread;

/// Below this a pass stays on the calling thread: a thread costs ~50 µs to start.
const PARALLEL_BYTES: usize = 16 << 20;

/// Most threads one pass uses: beyond a few, threads only take cores from the tasks still
/// running.
const MAX_THREADS: usize = 4;

/// The length of each run when a pass over `len` bytes is split over the cores: a multiple of
/// `align` (a page, say), the last run shorter. `None` when the pass should stay on the
/// caller's thread: it is small, or the machine has one core.
pub(crate) fn run_len(len: usize, align: usize) -> Option<usize> {
    let threads = thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(MAX_THREADS);
    if threads < 2 || len < PARALLEL_BYTES {
        return None;
    }
    let align = align.max(1);
    Some(len.div_ceil(threads).div_ceil(align) * align)
}

/// Copies `src` into `dest`, which has the same length.
///
/// # Panics
/// If the lengths differ.
pub(crate) fn copy(src: &[u8], dest: &mut [u8]) {
    assert_eq!(src.len(), dest.len(), "a copy between different lengths");
    let Some(run) = run_len(src.len(), 1) else {
        dest.copy_from_slice(src);
        return;
    };
    thread::scope(|scope| {
        for (from, to) in src.chunks(run).zip(dest.chunks_mut(run)) {
            scope.spawn(move || to.copy_from_slice(from));
        }
    });
}

/// The CRC-32 (IEEE, as `crc32fast` computes it) of `bytes`: a large buffer's runs are
/// checksummed on every core and the results combined.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let Some(run) = run_len(bytes.len(), 1) else {
        return crc32fast::hash(bytes);
    };
    let parts: Vec<crc32fast::Hasher> = thread::scope(|scope| {
        let handles: Vec<_> = bytes
            .chunks(run)
            .map(|part| {
                scope.spawn(move || {
                    let mut hasher = crc32fast::Hasher::new();
                    hasher.update(part);
                    hasher
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|e| std::panic::resume_unwind(e))
            })
            .collect()
    });
    let mut parts = parts.into_iter();
    let mut whole = parts.next().expect("a split pass has runs");
    for part in parts {
        whole.combine(&part);
    }
    whole.finalize()
}

/// The whole content of the file at `path`. A large file is read by one thread per core, each
/// reading its run into a buffer allocated zeroed, so the buffer's page faults are taken in
/// parallel too. (Checkpoint files are written whole and renamed into place: a file that
/// changes length while it is read fails the read.)
pub(crate) fn read_file(path: &Path) -> io::Result<Vec<u8>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt as _;

        let file = File::open(path)?;
        let len = usize::try_from(file.metadata()?.len()).map_err(io::Error::other)?;
        if let Some(run) = run_len(len, 1) {
            let mut bytes = vec![0; len];
            thread::scope(|scope| {
                let handles: Vec<_> = bytes
                    .chunks_mut(run)
                    .enumerate()
                    .map(|(i, part)| {
                        let file = &file;
                        scope.spawn(move || file.read_exact_at(part, (i * run) as u64))
                    })
                    .collect();
                handles.into_iter().try_for_each(|handle| {
                    handle
                        .join()
                        .unwrap_or_else(|e| std::panic::resume_unwind(e))
                })
            })?;
            return Ok(bytes);
        }
    }
    std::fs::read(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_passes_stay_on_the_caller_and_large_ones_split_into_aligned_runs() {
        assert_eq!(run_len(0, 1), None);
        assert_eq!(run_len(PARALLEL_BYTES - 1, 1), None);
        if thread::available_parallelism().map_or(1, NonZeroUsize::get) < 2 {
            return;
        }
        for len in [PARALLEL_BYTES, PARALLEL_BYTES * 3 + 12345] {
            let run = run_len(len, 65536).unwrap();
            assert_eq!(run % 65536, 0, "{len}: aligned");
            let runs = len.div_ceil(run);
            assert!((2..=MAX_THREADS).contains(&runs), "{len}: {runs} runs");
        }
    }

    #[test]
    fn copies_checksums_and_reads_agree_with_one_thread_small_and_split() {
        let dir = tempfile::tempdir().unwrap();
        for len in [0, 1, 4096, PARALLEL_BYTES * 2 + 777] {
            let src: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
            let mut dest = vec![0xAA; len];
            copy(&src, &mut dest);
            assert!(dest == src, "{len} bytes copied");
            assert_eq!(
                crc32(&src),
                crc32fast::hash(&src),
                "{len} bytes checksummed"
            );
            let path = dir.path().join(format!("{len}.bin"));
            std::fs::write(&path, &src).unwrap();
            assert!(read_file(&path).unwrap() == src, "{len} bytes read");
        }
        let err = read_file(&dir.path().join("missing")).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
