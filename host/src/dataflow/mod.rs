//! The execution graph and the tasks that run it: channels, partitioners,
//! barrier alignment and the task loop.

pub mod alignment;
pub mod channel;
pub mod message;
pub mod metrics;
pub mod operator;
pub mod persist;
pub mod router;
pub mod task;
pub mod task_state;

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
