//! The checkpoint settings of a job: the `[checkpoint]` table of the job file,
//! validated. Each field has the meaning of the Flink setting of the same name.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::checkpoint::layout::CheckpointLayout;
use crate::checkpoint::storage::{
    CheckpointStorage, LocalStorage, ObjectStorage, ObjectStoreOptions, ObjectStoreUrl,
    StorageError,
};

/// How barriers from several inputs are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckpointMode {
    /// Inputs whose barrier arrived are blocked until every input's barrier
    /// arrived (alignment): no record after the barrier is processed before
    /// the snapshot. Flink's `EXACTLY_ONCE`.
    ExactlyOnce,
    /// Barriers are only tracked: the snapshot is taken when the last one
    /// arrives, and records after an early barrier may be processed before it
    /// (and so be replayed after a restore). Flink's `AT_LEAST_ONCE`.
    AtLeastOnce,
}

/// What happens to completed checkpoints when a job is cancelled.
/// (On failure they are always kept.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    /// Keep them, so the job can be restarted from them. Flink's `RETAIN_ON_CANCELLATION`.
    RetainOnCancel,
    /// Delete them. Flink's `DELETE_ON_CANCELLATION`.
    DeleteOnCancel,
}

/// Validated checkpoint settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointConfig {
    /// Time between two periodic checkpoints; `None` disables periodic
    /// checkpoints (savepoints still work). Flink's `enableCheckpointing(ms)`.
    pub interval: Option<Duration>,
    /// Exactly-once (aligned barriers) or at-least-once (tracked barriers).
    pub mode: CheckpointMode,
    /// Least time from the completion of one checkpoint to the trigger of the next.
    pub min_pause: Duration,
    /// A pending checkpoint not complete after this long is aborted.
    pub timeout: Duration,
    /// How many checkpoints may be pending at once (at least 1).
    pub max_concurrent: u32,
    /// What cancel does to completed checkpoints.
    pub on_cancel: Retention,
    /// The job's local directory: its checkpoints and savepoints, unless `object_store` is
    /// set; always the lock that keeps a second run out and the control endpoint's file.
    pub directory: PathBuf,
    /// Where the checkpoints and savepoints are kept instead of `directory`: an S3 bucket and
    /// key prefix (`directory = "s3://bucket/prefix"` in the job file).
    pub object_store: Option<ObjectStoreUrl>,
    /// How the object store's requests are timed and retried.
    pub object_store_options: ObjectStoreOptions,
    /// How many completed checkpoints to keep (at least 1); older ones are pruned.
    pub retained: usize,
    /// How many checkpoint failures in a row are tolerated before the job fails over.
    pub tolerable_failures: u32,
}

impl CheckpointConfig {
    /// The storage of the job's checkpoints as this table says: the object store it names, or
    /// local files in its directory.
    pub fn open_storage(&self) -> Result<Arc<dyn CheckpointStorage>, StorageError> {
        let layout = self.layout();
        Ok(match &self.object_store {
            Some(url) => Arc::new(ObjectStorage::open(
                url,
                layout,
                &self.object_store_options,
            )?),
            None => Arc::new(LocalStorage::new(layout)),
        })
    }

    /// Flink's defaults, with periodic checkpoints off, storing in `directory`.
    pub fn new(directory: PathBuf) -> Self {
        CheckpointConfig {
            interval: None,
            mode: CheckpointMode::ExactlyOnce,
            min_pause: Duration::ZERO,
            timeout: Duration::from_secs(600),
            max_concurrent: 1,
            on_cancel: Retention::RetainOnCancel,
            directory,
            object_store: None,
            object_store_options: ObjectStoreOptions::default(),
            retained: 1,
            tolerable_failures: 0,
        }
    }

    /// Where the checkpoints and savepoints are: the object store's URL, or the directory.
    pub fn storage_root(&self) -> PathBuf {
        match &self.object_store {
            Some(url) => url.as_path(),
            None => self.directory.clone(),
        }
    }

    /// The layout of the checkpoints and savepoints, under [`CheckpointConfig::storage_root`].
    pub fn layout(&self) -> CheckpointLayout {
        CheckpointLayout::new(self.storage_root())
    }
}
