//! The bookkeeping of one pending checkpoint: which tasks still owe an
//! acknowledgement, the acknowledgements received so far, and when it was
//! triggered.
//!
//! It exists apart from the coordinator (`coordinator.rs`)
//! so that the coordinator's state machine deals in decisions (trigger, time
//! out, complete, subsume) and this type deals in the one question "is every
//! task of the ack set in?", with its two ways to go wrong (an acknowledgement
//! from a task outside the ack set, and a second acknowledgement from the same
//! task). Like the coordinator it is pure: no I/O, and time arrives as
//! [`Instant`] arguments.
//!
//! The state handle type `H` is opaque here: the runtime uses the storage's
//! state handle, tests use whatever is convenient.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use crate::checkpoint::shared::SharedFile;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};

/// What a task reports when its snapshot for a checkpoint is durable: where
/// the state lives, and the timings and size that go into the statistics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acknowledgement<H> {
    /// Where the task's snapshot lives (opaque to the coordinator; the shell
    /// writes it into the checkpoint's metadata).
    pub handle: H,
    /// What the snapshot cost.
    pub cost: SnapshotCost,
    /// The earlier checkpoints whose states of this task its state builds on
    /// (an incremental image), base first; empty for a self-contained state.
    /// The coordinator completes a checkpoint only when every one of them is
    /// a completed checkpoint, and keeps them while it is retained.
    pub chain: Vec<CheckpointId>,
    /// The shared files its state names (written by this checkpoint or, named
    /// again, by earlier ones); empty for a state all in its own file. The
    /// coordinator keeps them while a retained checkpoint names them.
    pub shared: Vec<SharedFile>,
}

/// What one task's snapshot for one checkpoint cost: reported in its
/// [`Acknowledgement`], kept as it is in the checkpoint statistics, and
/// written in whole milliseconds into the checkpoint's metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SnapshotCost {
    /// How long the synchronous part took: the guest's snapshot export and the
    /// copy out of its memory, the only time the task's processing paused.
    pub sync_duration: Duration,
    /// How long the asynchronous part took: writing the bytes to storage,
    /// fsync and checksum, while the task went on processing.
    pub async_duration: Duration,
    /// How long the task's inputs were aligned: from the first barrier of this
    /// checkpoint to the last (zero for a single input and for sources).
    pub alignment_duration: Duration,
    /// How many bytes of state the task persisted.
    pub bytes: u64,
}

/// Why a [`PendingCheckpoint`] refused an acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckRejection {
    /// The task is not in the checkpoint's ack set.
    NotInAckSet,
    /// The task has already acknowledged this checkpoint; the first
    /// acknowledgement stands.
    AlreadyAcknowledged,
}

impl fmt::Display for AckRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AckRejection::NotInAckSet => "the task is not in the ack set",
            AckRejection::AlreadyAcknowledged => "the task has already acknowledged",
        })
    }
}

/// One triggered checkpoint (or savepoint) waiting for its acknowledgements.
#[derive(Debug, Clone)]
pub struct PendingCheckpoint<H> {
    /// The checkpoint's id.
    id: CheckpointId,
    /// Checkpoint or savepoint.
    kind: CheckpointKind,
    /// Whether the job ends once this completes (final checkpoint, stop-with-savepoint).
    is_final: bool,
    /// When the coordinator triggered it; the timeout and the end-to-end
    /// duration count from here.
    triggered_at: Instant,
    /// The tasks of the ack set that have not acknowledged yet.
    awaiting: BTreeSet<TaskId>,
    /// The acknowledgements received so far, by task.
    acks: BTreeMap<TaskId, Acknowledgement<H>>,
}

impl<H> PendingCheckpoint<H> {
    /// A checkpoint triggered at `triggered_at` that expects one
    /// acknowledgement from every task of `ack_set`.
    pub fn new(
        id: CheckpointId,
        kind: CheckpointKind,
        is_final: bool,
        ack_set: impl IntoIterator<Item = TaskId>,
        triggered_at: Instant,
    ) -> Self {
        PendingCheckpoint {
            id,
            kind,
            is_final,
            triggered_at,
            awaiting: ack_set.into_iter().collect(),
            acks: BTreeMap::new(),
        }
    }

    /// The checkpoint's id.
    pub fn id(&self) -> CheckpointId {
        self.id
    }

    /// Checkpoint or savepoint.
    pub fn kind(&self) -> CheckpointKind {
        self.kind
    }

    /// Whether the job ends once this checkpoint completes.
    pub fn is_final(&self) -> bool {
        self.is_final
    }

    /// When the checkpoint was triggered.
    pub fn triggered_at(&self) -> Instant {
        self.triggered_at
    }

    /// When the checkpoint times out if it is still waiting for
    /// acknowledgements.
    pub fn expires_at(&self, timeout: Duration) -> Instant {
        self.triggered_at + timeout
    }

    /// Records `task`'s acknowledgement. A task outside the ack set, or one
    /// that already acknowledged, is refused and the acknowledgement handed
    /// back, so the caller decides what becomes of its state.
    pub fn acknowledge(
        &mut self,
        task: TaskId,
        ack: Acknowledgement<H>,
    ) -> Result<(), (AckRejection, Acknowledgement<H>)> {
        if self.awaiting.remove(&task) {
            self.acks.insert(task, ack);
            Ok(())
        } else if self.acks.contains_key(&task) {
            Err((AckRejection::AlreadyAcknowledged, ack))
        } else {
            Err((AckRejection::NotInAckSet, ack))
        }
    }

    /// Whether `task` belongs to the ack set (acknowledged or not).
    pub fn expects(&self, task: &TaskId) -> bool {
        self.awaiting.contains(task) || self.acks.contains_key(task)
    }

    /// Whether every task of the ack set has acknowledged.
    pub fn is_complete(&self) -> bool {
        self.awaiting.is_empty()
    }

    /// The tasks that have not acknowledged yet (for logs: "waiting for …").
    pub fn awaiting(&self) -> impl Iterator<Item = &TaskId> {
        self.awaiting.iter()
    }

    /// How many tasks have acknowledged.
    pub fn acknowledged(&self) -> usize {
        self.acks.len()
    }

    /// The acknowledgements received so far, by task.
    pub fn acks(&self) -> impl Iterator<Item = (&TaskId, &Acknowledgement<H>)> {
        self.acks.iter()
    }

    /// The acknowledgements received, by task (all of them once
    /// [`is_complete`](Self::is_complete)).
    pub fn into_acks(self) -> BTreeMap<TaskId, Acknowledgement<H>> {
        self.acks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(handle: &str) -> Acknowledgement<String> {
        Acknowledgement {
            handle: handle.to_owned(),
            cost: SnapshotCost {
                sync_duration: Duration::from_millis(1),
                async_duration: Duration::from_millis(2),
                alignment_duration: Duration::ZERO,
                bytes: 10,
            },
            chain: Vec::new(),
            shared: Vec::new(),
        }
    }

    fn pending() -> PendingCheckpoint<String> {
        let tasks = [TaskId::new("src", 0), TaskId::new("sink", 0)];
        PendingCheckpoint::new(
            CheckpointId(1),
            CheckpointKind::Checkpoint,
            false,
            tasks,
            Instant::now(),
        )
    }

    #[test]
    fn completes_when_every_task_of_the_ack_set_acknowledged() {
        let mut p = pending();
        assert!(!p.is_complete());
        p.acknowledge(TaskId::new("src", 0), ack("a")).unwrap();
        assert!(!p.is_complete());
        assert_eq!(p.awaiting().collect::<Vec<_>>(), [&TaskId::new("sink", 0)]);
        p.acknowledge(TaskId::new("sink", 0), ack("b")).unwrap();
        assert!(p.is_complete());
        assert_eq!(p.acknowledged(), 2);
        let acks = p.into_acks();
        assert_eq!(acks[&TaskId::new("sink", 0)].handle, "b");
    }

    #[test]
    fn refuses_duplicate_and_foreign_acknowledgements_and_keeps_the_first() {
        let mut p = pending();
        p.acknowledge(TaskId::new("src", 0), ack("first")).unwrap();
        let (why, back) = p
            .acknowledge(TaskId::new("src", 0), ack("second"))
            .unwrap_err();
        assert_eq!(why, AckRejection::AlreadyAcknowledged);
        assert_eq!(back.handle, "second");
        let (why, _) = p
            .acknowledge(TaskId::new("other", 0), ack("x"))
            .unwrap_err();
        assert_eq!(why, AckRejection::NotInAckSet);
        assert!(p.expects(&TaskId::new("src", 0)));
        assert!(!p.expects(&TaskId::new("other", 0)));
        assert_eq!(p.into_acks()[&TaskId::new("src", 0)].handle, "first");
    }

    #[test]
    fn expires_one_timeout_after_the_trigger() {
        let p = pending();
        let timeout = Duration::from_secs(60);
        assert_eq!(p.expires_at(timeout), p.triggered_at() + timeout);
    }
}
