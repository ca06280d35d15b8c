//! Why a checkpoint ends without completing, and when too many of those fail
//! the job: the reasons the coordinator gives in its abort and fail-over
//! actions, and that statistics, logs and the control endpoint report.

use std::fmt;
use std::time::Duration;

use thiserror::Error;

use crate::ids::{CheckpointId, TaskId};

/// Why a checkpoint was aborted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbortReason {
    /// Not every task acknowledged within the timeout. Counts as a failure.
    Expired {
        /// The configured timeout.
        timeout: Duration,
    },
    /// A task could not take its snapshot. Counts as a failure.
    Declined {
        /// The task that declined.
        task: TaskId,
        /// The task's explanation.
        reason: String,
    },
    /// The shell could not write the metadata. Counts as a failure.
    FinalizeFailed {
        /// The shell's error.
        message: String,
    },
    /// A newer checkpoint completed first. Not a failure.
    Subsumed {
        /// The checkpoint that completed.
        by: CheckpointId,
    },
    /// The job stopped running (failing, cancelled, finished). Not a failure.
    JobNotRunning,
    /// A task's state builds on a checkpoint that is not a completed one
    /// still on disk (it was aborted, or is still in flight): the checkpoint
    /// could not be restored. Not a failure of its own (the link's abort was
    /// counted, if it was one); the abort tells the task to take a full
    /// image next.
    BrokenChain {
        /// The task whose state builds on `link`.
        task: TaskId,
        /// The checkpoint it builds on.
        link: CheckpointId,
    },
}

impl AbortReason {
    /// Whether this abort counts against `tolerable_failures` (for checkpoints;
    /// savepoint failures never count).
    pub fn counts_as_failure(&self) -> bool {
        match self {
            AbortReason::Expired { .. }
            | AbortReason::Declined { .. }
            | AbortReason::FinalizeFailed { .. } => true,
            AbortReason::Subsumed { .. }
            | AbortReason::JobNotRunning
            | AbortReason::BrokenChain { .. } => false,
        }
    }
}

/// Reads after "checkpoint N": "checkpoint 7 expired after 60s before every
/// task acknowledged".
impl fmt::Display for AbortReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AbortReason::Expired { timeout } => {
                write!(
                    f,
                    "expired after {timeout:?} before every task acknowledged"
                )
            }
            AbortReason::Declined { task, reason } => {
                write!(f, "declined by task {task}: {reason}")
            }
            AbortReason::FinalizeFailed { message } => {
                write!(f, "could not be recorded: {message}")
            }
            AbortReason::Subsumed { by } => write!(f, "subsumed by checkpoint {by}"),
            AbortReason::JobNotRunning => f.write_str("aborted because the job stopped running"),
            AbortReason::BrokenChain { task, link } => write!(
                f,
                "aborted because the image of task {task} builds on checkpoint {link}, which \
                 is not a completed checkpoint (the task's next image is full)"
            ),
        }
    }
}

/// Why the coordinator fails the job: more checkpoint failures in a row than
/// tolerated.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "{consecutive} checkpoint {} in a row {} the {tolerable} tolerated \
     (the last: checkpoint {last} {last_reason}); raise the tolerable failures of the job's \
     checkpoint settings to tolerate more",
    if *consecutive == 1 { "failure" } else { "failures" },
    if *consecutive == 1 { "exceeds" } else { "exceed" }
)]
pub struct TooManyFailures {
    /// How many checkpoints failed in a row.
    pub consecutive: u32,
    /// How many were tolerated (the configured `tolerable_failures`).
    pub tolerable: u32,
    /// The checkpoint whose failure was one too many.
    pub last: CheckpointId,
    /// Why it failed.
    pub last_reason: AbortReason,
}
