//! The vocabulary every layer shares: which task, which checkpoint, and the
//! barrier that carries a checkpoint through the dataflow.
//!
//! This module is the floor of the import graph: it depends on nothing else in
//! the crate, so the wasm layer, the checkpoint layer and the dataflow can all
//! name a checkpoint or a task without reaching into one another.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One parallel instance of a vertex of the job graph: the unit that runs,
/// snapshots and acknowledges.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TaskId {
    /// The vertex's name in the job file (unique across sources, operators and sinks).
    pub vertex: String,
    /// Which parallel instance, from 0.
    pub subtask: u32,
}

impl TaskId {
    /// The task for `subtask` of `vertex`.
    pub fn new(vertex: impl Into<String>, subtask: u32) -> Self {
        TaskId {
            vertex: vertex.into(),
            subtask,
        }
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.vertex, self.subtask)
    }
}

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

/// A checkpoint barrier: everything sent before it on a channel belongs to the
/// checkpoint, everything after it does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Barrier {
    /// The checkpoint the barrier belongs to.
    pub id: CheckpointId,
    /// Periodic checkpoint or savepoint: decides where the state is stored.
    pub kind: CheckpointKind,
}
