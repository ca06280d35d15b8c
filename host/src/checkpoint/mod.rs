//! Checkpoints: the coordinator that triggers and completes them, the barrier
//! bookkeeping, and the storage that makes them durable (docs/ARCHITECTURE.md, docs/CHECKPOINTS.md).

pub mod catalog;
pub mod config;
pub mod coordinator;
pub mod format;
pub mod history;
pub mod layout;
pub mod metadata;
pub mod pending;
pub mod recovery;
pub mod stats;
pub mod storage;

use std::fmt;

use serde::{Deserialize, Serialize};

/// Identifies one checkpoint (or savepoint) of a job. Ids start at 1 and only
/// grow, across restarts too: a restored job continues after the id it
/// restored from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CheckpointId(pub u64);

impl CheckpointId {
    /// The id that follows this one.
    pub fn next(self) -> CheckpointId {
        CheckpointId(self.0 + 1)
    }
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Whether a snapshot of the job was taken by the schedule or asked for by a user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CheckpointKind {
    /// Periodic, owned by Weir: pruned beyond the retained count.
    Checkpoint,
    /// Asked for by a user: stored apart, never pruned automatically.
    Savepoint,
}

impl fmt::Display for CheckpointKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CheckpointKind::Checkpoint => "checkpoint",
            CheckpointKind::Savepoint => "savepoint",
        })
    }
}
