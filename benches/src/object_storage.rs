//! A task's state written to object storage against the same state written to local files:
//! what `[checkpoint] directory = "s3://…"` costs a checkpoint (docs/CHECKPOINTS.md §8).
//!
//! For each size, `runs` times: [`CheckpointStorage::write_state`] of that many bytes (the
//! asynchronous part of a checkpoint: frame, CRC-32, then a durable local write — tmp, fsync,
//! rename, fsync of the directory — or one `PUT`, a multipart upload above
//! [`MULTIPART_THRESHOLD`]), then [`CheckpointStorage::read_state`] (what a restore reads),
//! then the checkpoint discarded. The S3 side is the tests' moto server on loopback
//! (`weir-test-servers`), so it measures the client's and the protocol's cost — signing,
//! HTTP, the upload — without a network or a real store's latency, which a real bucket adds
//! on top (tens of ms a request on AWS).

use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use weir::checkpoint::layout::CheckpointLayout;
use weir::checkpoint::storage::{
    CheckpointStorage, LocalStorage, MULTIPART_THRESHOLD, ObjectStorage, ObjectStoreOptions,
    ObjectStoreUrl, StaticCredentials,
};
use weir::ids::{CheckpointId, CheckpointKind, TaskId};
use weir_test_servers::rng::Rng;
use weir_test_servers::s3::{self as server, S3Process};

use crate::error::BenchError;
use crate::summary::Summary;

/// One size, both storages, ms.
#[derive(Debug, Clone, Serialize)]
pub struct ObjectStorageResult {
    /// Bytes of state.
    pub bytes: u64,
    /// Whether the S3 write was a multipart upload.
    pub multipart: bool,
    /// `write_state` to local files.
    pub local_write_ms: Summary,
    /// `read_state` from local files.
    pub local_read_ms: Summary,
    /// `write_state` to S3 (moto).
    pub s3_write_ms: Summary,
    /// `read_state` from S3 (moto).
    pub s3_read_ms: Summary,
}

/// Measures every size of `sizes`, `runs` times each, on local files and on a moto server
/// started for it (installed with the workspace at `root`'s script when missing).
pub fn measure(
    root: &Path,
    sizes: &[u64],
    runs: usize,
) -> Result<Vec<ObjectStorageResult>, BenchError> {
    let wrong = |e: String| BenchError::Wrong(e);
    let exe = server::install(root).map_err(wrong)?;
    let dir = tempfile::tempdir().map_err(|source| BenchError::Io {
        action: "create a temporary directory",
        path: std::env::temp_dir(),
        source,
    })?;
    let s3 = S3Process::start(&exe, dir.path()).map_err(wrong)?;
    s3.create_bucket("bench").map_err(wrong)?;
    let url = ObjectStoreUrl::parse("s3://bench/job")
        .ok()
        .flatten()
        .expect("a valid URL");
    let options = ObjectStoreOptions {
        endpoint: Some(s3.endpoint()),
        credentials: Some(StaticCredentials {
            key_id: server::ACCESS_KEY_ID.into(),
            secret: server::SECRET_ACCESS_KEY.into(),
        }),
        ..ObjectStoreOptions::default()
    };
    let remote = ObjectStorage::open(&url, CheckpointLayout::new(url.as_path()), &options)
        .map_err(|e| BenchError::Storage(Box::new(e.into())))?;
    let local = LocalStorage::new(CheckpointLayout::new(dir.path().join("local")));
    let mut results = Vec::new();
    for &bytes in sizes {
        let state = state_of(bytes);
        let (local_write_ms, local_read_ms) = write_and_read(&local, &state, runs)?;
        let (s3_write_ms, s3_read_ms) = write_and_read(&remote, &state, runs)?;
        results.push(ObjectStorageResult {
            bytes,
            multipart: state.len() > MULTIPART_THRESHOLD,
            local_write_ms,
            local_read_ms,
            s3_write_ms,
            s3_read_ms,
        });
    }
    Ok(results)
}

/// `bytes` of state that does not compress to nothing (no layer here compresses, but the
/// bytes should look like a real snapshot's).
fn state_of(bytes: u64) -> Vec<u8> {
    Rng::new(0x5eed).bytes(bytes as usize)
}

/// `runs` writes and reads of `state` (after one of each not counted), each checkpoint
/// discarded after; checks every read returns the state.
fn write_and_read(
    storage: &dyn CheckpointStorage,
    state: &[u8],
    runs: usize,
) -> Result<(Summary, Summary), BenchError> {
    let storage_error = |e| BenchError::Storage(Box::new(e));
    let task = TaskId::new("count", 0);
    let (mut writes, mut reads) = (Vec::new(), Vec::new());
    for run in 0..=runs {
        let id = CheckpointId(run as u64 + 1);
        let start = Instant::now();
        let handle = storage
            .write_state(CheckpointKind::Checkpoint, id, &task, state)
            .map_err(storage_error)?;
        let write_ms = start.elapsed().as_secs_f64() * 1e3;
        let location = storage.layout().location(CheckpointKind::Checkpoint, id);
        let start = Instant::now();
        let read = storage
            .read_state(&location, &handle)
            .map_err(storage_error)?;
        let read_ms = start.elapsed().as_secs_f64() * 1e3;
        if read != state {
            return Err(BenchError::Wrong(format!(
                "the state read back from {} is not the state written",
                location.dir().display()
            )));
        }
        storage
            .discard(CheckpointKind::Checkpoint, id)
            .map_err(storage_error)?;
        if run > 0 {
            writes.push(write_ms);
            reads.push(read_ms);
        }
    }
    let summary = |samples: &[f64]| Summary::of(samples).expect("at least one run");
    Ok((summary(&writes), summary(&reads)))
}
