//! The asynchronous part of a task's snapshot, and the events tasks send to
//! the job's driver.
//!
//! A task hands its state bytes to the [`Persister`] and goes on processing;
//! a blocking-pool thread writes the state file (fsync included) and only then
//! sends the acknowledgement. A write that fails declines the checkpoint.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::error::TaskError;
use crate::checkpoint::metadata::StateHandle;
use crate::checkpoint::pending::{Acknowledgement, SnapshotCost};
use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use crate::checkpoint::task_state::TaskState;
use crate::ids::Barrier;
use crate::ids::CheckpointId;
use crate::ids::TaskId;

/// What tasks tell the job's driver.
///
/// The channel carrying these is unbounded on purpose: a task must never
/// block on the driver, and the number of events is bounded by the number of
/// tasks times the checkpoints in flight (plus one exit per task).
#[derive(Debug)]
pub(crate) enum TaskEvent {
    /// The task's state for `id` is durable.
    Ack {
        /// The checkpoint.
        id: CheckpointId,
        /// The task.
        task: TaskId,
        /// Where the state is, what the snapshot cost, and what it builds on:
        /// the coordinator's own record of it, built here so nothing on the
        /// way copies it field by field.
        ack: Acknowledgement<StateHandle>,
    },
    /// The task cannot take part in checkpoint `id`.
    Decline {
        /// The checkpoint.
        id: CheckpointId,
        /// The task.
        task: TaskId,
        /// Why, for the log and the statistics.
        reason: DeclineReason,
    },
    /// A source has emitted its last record.
    SourceFinished(TaskId),
    /// The task's thread ended: `Ok` after a shutdown, or how it failed.
    Exited {
        /// The task.
        task: TaskId,
        /// How it ended.
        result: Result<(), TaskError>,
    },
}

/// Why a task cannot take part in a checkpoint ([`TaskEvent::Decline`]). The coordinator
/// records it as text (the abort reason in the statistics); the event keeps it typed up to
/// there.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeclineReason {
    /// A newer barrier arrived while the task was aligning this checkpoint's: the older one is
    /// given up, and the newer one subsumes it.
    #[error("a newer barrier arrived during alignment")]
    Superseded,
    /// The task's state could not be written; the error names the file and the problem.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Writes snapshots off the task's thread and reports to the driver.
#[derive(Clone)]
pub(crate) struct Persister {
    storage: Arc<dyn CheckpointStorage>,
    runtime: tokio::runtime::Handle,
    events: UnboundedSender<TaskEvent>,
}

impl Persister {
    /// A persister writing to `storage` on `runtime`'s blocking pool.
    pub(crate) fn new(
        storage: Arc<dyn CheckpointStorage>,
        runtime: tokio::runtime::Handle,
        events: UnboundedSender<TaskEvent>,
    ) -> Self {
        Persister {
            storage,
            runtime,
            events,
        }
    }

    /// Writes `state` for `task` at `barrier` in the background; acknowledges
    /// when it is durable, declines if it cannot be written. `chain` names the
    /// earlier checkpoints the state builds on; the acknowledgement carries it
    /// to the metadata. The state is encoded in the background too: for an
    /// image that is a copy of the guest's whole memory, which must not stall
    /// the task.
    pub(crate) fn persist(
        &self,
        barrier: Barrier,
        task: TaskId,
        state: TaskState,
        chain: Vec<CheckpointId>,
        sync: Duration,
        alignment: Duration,
    ) {
        let storage = Arc::clone(&self.storage);
        let events = self.events.clone();
        self.runtime.spawn_blocking(move || {
            let started = Instant::now();
            let state = state.encode();
            let event = match storage.write_state(barrier.kind, barrier.id, &task, &state) {
                Ok(handle) => TaskEvent::Ack {
                    id: barrier.id,
                    task,
                    ack: Acknowledgement {
                        handle,
                        cost: SnapshotCost {
                            sync_duration: sync,
                            async_duration: started.elapsed(),
                            alignment_duration: alignment,
                            bytes: state.len() as u64,
                        },
                        chain,
                        // No section of host-kept state keeps files of its own yet: the
                        // whole state is in the task's state file.
                        shared: Vec::new(),
                    },
                },
                Err(e) => TaskEvent::Decline {
                    id: barrier.id,
                    task,
                    reason: DeclineReason::Storage(e),
                },
            };
            // The driver is gone only when the attempt is over; nothing to tell then.
            let _ = events.send(event);
        });
    }

    /// Declines checkpoint `id` for `task`.
    pub(crate) fn decline(&self, id: CheckpointId, task: &TaskId, reason: DeclineReason) {
        let _ = self.events.send(TaskEvent::Decline {
            id,
            task: task.clone(),
            reason,
        });
    }

    /// Tells the driver a source has emitted its last record.
    pub(crate) fn source_finished(&self, task: &TaskId) {
        let _ = self.events.send(TaskEvent::SourceFinished(task.clone()));
    }

    /// Tells the driver a task's thread ended.
    pub(crate) fn exited(&self, task: TaskId, result: Result<(), TaskError>) {
        let _ = self.events.send(TaskEvent::Exited { task, result });
    }
}
