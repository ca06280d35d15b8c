//! The checkpoint coordinator: the state machine that decides when a
//! checkpoint is triggered, when it is complete, when it has failed, which
//! completed checkpoints to prune, and when too many failures fail the job
//! (docs/ARCHITECTURE.md, Checkpoints; Flink's `CheckpointCoordinator`).
//!
//! # Why it is a pure state machine
//!
//! Checkpointing is where a streaming engine's correctness lives, and its
//! rules are all about time and ordering — intervals, pauses, timeouts, late
//! and duplicate messages. Such rules are tested properly only when time and
//! messages are in the test's hands. So the [`Coordinator`] does no I/O and
//! reads no clock (house habit 7, functional core): the imperative shell
//! (the runtime's coordinator actor) hands it *facts* — the job status
//! changed, a task acknowledged, the metadata was written, a source finished,
//! the clock reads `now` — and carries out the [`Action`]s it returns:
//! send triggers, write metadata, notify tasks, remove files, fail the job.
//! Tests drive it with a fake clock (`t0 + Duration`) and fake tasks.
//!
//! It keeps no statistics either. Everything they need passes through the
//! shell anyway — the acknowledgements, the instant of every call, the
//! triggers and aborts among the actions, the result of the metadata write —
//! so the shell records them in the job's one
//! [`CheckpointStats`](crate::checkpoint::stats::CheckpointStats), which
//! outlives the attempt and with it the coordinator.
//!
//! # The shell's loop
//!
//! ```text
//! loop {
//!     select {
//!         fact = inbox.recv()                  => actions = coordinator.<fact>(.., now),
//!         _ = sleep_until(next_deadline())     => actions = coordinator.poll(now),
//!     }
//!     carry out actions
//! }
//! ```
//!
//! Every call that changes state ends by doing whatever is due at `now`
//! (timeouts, triggers), so after a call returns nothing is overdue and
//! [`Coordinator::next_deadline`] is the moment the shell must call
//! [`Coordinator::poll`] if no other fact arrives first: the shell sleeps
//! precisely, without a busy loop. A call whose fact is ignored changes
//! nothing, so the shell's deadline stays valid.
//!
//! # Lifecycle of one checkpoint
//!
//! 1. **Trigger** ([`Action::Trigger`]): the shell sends *trigger* to the
//!    sources (the trigger set); the checkpoint is *pending* and expects an
//!    acknowledgement from every task (the ack set).
//! 2. **Acknowledge**: each task reports its state handle and timings. When
//!    the last one arrives the coordinator hands everything to the shell
//!    ([`Action::Finalize`]); the checkpoint is now *finalizing*.
//! 3. **Finalized**: the shell writes the metadata and reports the result with
//!    [`Coordinator::finalized`]. Success completes the checkpoint
//!    ([`Action::NotifyComplete`], [`Action::Prune`]); failure aborts it.
//! 4. **Abort** ([`Action::Abort`]) instead, at any time before step 3: on
//!    timeout, on a task's decline, when subsumed, when the job stops running.
//!    The shell removes its files and tells the tasks to drop its alignment.
//!
//! # Decisions (and where they follow Flink)
//!
//! - **Scheduling.** The periodic scheduler runs only while the job is
//!   RUNNING ([`Coordinator::set_running`], Flink's
//!   `CheckpointCoordinatorDeActivator`). The first periodic trigger comes one
//!   `interval` after the job became running. A periodic trigger is due at
//!   `max(previous periodic trigger + interval, last completion + min_pause)`
//!   and waits while `max_concurrent` checkpoints are in flight; once the
//!   blocking condition clears it fires immediately (Flink's queued request),
//!   not a full interval later. "In flight" counts pending *and* finalizing
//!   checkpoints and savepoints: a checkpoint holds resources until its
//!   metadata is written. Savepoint triggers do not move the periodic
//!   schedule; savepoint completions do count as "last completion" for
//!   `min_pause` (as in Flink).
//! - **Job not running.** Turning the scheduler off aborts every checkpoint
//!   still waiting for acknowledgements, with [`AbortReason::JobNotRunning`],
//!   which does not count as a failure (Flink's
//!   `CHECKPOINT_COORDINATOR_SUSPEND`). A checkpoint whose acknowledgements are
//!   all in keeps finalizing: its state is durable and the shell's metadata
//!   write either lands or fails, and it reports back as usual. It also
//!   forgets which sources finished: after a restart they read again.
//! - **Timeout** applies to checkpoints waiting for acknowledgements, counted
//!   from the trigger; finalization is the shell's own I/O and always
//!   reports back, so it is not timed out here. A call applies its fact
//!   before the timeouts due at the same `now`: an acknowledgement that
//!   arrives before the shell's timer fired still counts.
//! - **Savepoints** ([`Coordinator::trigger_savepoint`]) are allowed regardless
//!   of interval, min pause *and* `max_concurrent` (Flink forces savepoints),
//!   and while periodic checkpoints are disabled; they count as in flight for
//!   periodic triggers. They are never subsumed, never subsume, never pruned,
//!   and their failures neither count against `tolerable_failures` nor reset
//!   the count (Flink's `CheckpointFailureManager` ignores savepoints). An
//!   intermediate savepoint's completion is *not* notified to the tasks, so
//!   sinks commit no side effects for it (Flink ≥ 1.15, FLIP-193): failover
//!   restores the latest *checkpoint*, and output committed for a later
//!   savepoint would be duplicated after such a restore. Its pre-committed
//!   output is committed by the next checkpoint's notification, or by a
//!   restore from the savepoint.
//! - **Stop-with-savepoint** ([`Coordinator::stop_with_savepoint`]) is a
//!   *final* savepoint: its completion is notified (`is_final: true`), sinks
//!   commit, and the shell ends the job. No periodic checkpoint is triggered
//!   while a final snapshot is in flight or after one completed.
//! - **Final checkpoint.** When every source has finished
//!   ([`Coordinator::source_finished`]) a final checkpoint is triggered at
//!   once, regardless of interval, min pause and `max_concurrent`, and even if
//!   periodic checkpoints are disabled: the exactly-once sinks need its
//!   notification to commit their last output. `is_final` on its trigger,
//!   finalize and notification tells the shell to end the job once it is
//!   notified. If it fails it is retried at once (the failure counts, so
//!   `tolerable_failures` bounds the retries). Finished sources must still
//!   answer the final trigger (emit the barrier, acknowledge).
//! - **Subsumption.** Completing checkpoint N aborts the checkpoints older than
//!   N still waiting for acknowledgements ([`AbortReason::Subsumed`], not a
//!   failure), as Flink does. Older checkpoints already finalizing are left to
//!   finish (their metadata write is under way); when one completes after N
//!   it is retained (and pruned by the usual rule) but not notified.
//! - **Notifications are monotonic.** [`Action::NotifyComplete`] is issued only
//!   for an id greater than every id notified before; a notification for N
//!   means "everything up to N is complete" (Flink's contract for
//!   `notifyCheckpointComplete`, which may skip ids). Notifications are
//!   best-effort; a sink that misses one commits on the next or on restore.
//! - **Tolerable failures.** Timeouts, declines and failed metadata writes of
//!   checkpoints count; subsumption and job-not-running do not (Flink's
//!   rules), and neither does a failure of a checkpoint older than the latest
//!   completed one (it no longer matters). When more than
//!   `tolerable_failures` failures happen in a row, the coordinator issues
//!   [`Action::FailJob`], resets the count (as Flink does) and stops its
//!   scheduler as if the job stopped running: the job is about to fail over,
//!   and [`Coordinator::set_running`]`(true, ..)` after the restart resumes
//!   it. A completed checkpoint resets the count.
//! - **Late, duplicate and unknown messages** are never panics: they are
//!   refused with an [`Ignored`] reason the shell can log. A late
//!   acknowledgement of an aborted checkpoint hands its state back
//!   ([`IgnoredAck::state_to_discard`]) because the abort already removed
//!   that checkpoint's files and nobody else will clean up what came late.
//! - **Restores** continue the numbering (`first_id`) and hand over the
//!   completed checkpoints already on disk
//!   ([`Coordinator::with_retained_checkpoints`]) so they are pruned by the
//!   same rule as new ones.
//! - **Retention and what is left behind.** At each completion the
//!   coordinator decides what the storage no longer needs and hands it to the
//!   shell as one [`Action::Prune`]: the completed checkpoints retention drops
//!   ([`files_to_keep`]), and, when something may have been left behind, a
//!   [`Sweep`] of the incomplete directories of aborted checkpoints and of the
//!   shared files no checkpoint needs ([`Coordinator::pruned`]). Something may be left behind at the
//!   start of a run (the one before may have crashed), after an abort (a
//!   task's write still under way recreates what the abort removed), after a
//!   late acknowledgement of an aborted checkpoint, after a pruned checkpoint
//!   that named shared files, and after a removal that failed (a read-only or
//!   failing disk). The shell reports what it could not remove
//!   ([`Coordinator::pruned`], [`Coordinator::swept`]); a checkpoint it could not remove is retried at
//!   the next completion, so a disk that was read-only for a moment does not
//!   leave more than `retained` checkpoints for the rest of the run, and its
//!   shared files stay until it is gone.

use super::abort::{AbortReason, TooManyFailures};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use thiserror::Error;

use crate::checkpoint::config::CheckpointConfig;
use crate::checkpoint::pending::{AckRejection, Acknowledgement, PendingCheckpoint};
use crate::checkpoint::recovery::{checkpoints_to_prune, files_to_keep};
use crate::checkpoint::shared::References;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};

/// How many ended checkpoints the coordinator remembers, to tell a late
/// message ("aborted", "complete") from an unknown one.
const REMEMBERED: usize = 128;

/// What the shell must do, as decided by the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action<H> {
    /// Send *trigger* for checkpoint `id` to every task of the trigger set
    /// (the sources, [`Coordinator::trigger_set`]).
    Trigger {
        /// The new checkpoint's id.
        id: CheckpointId,
        /// Checkpoint or savepoint: where the shell stores it.
        kind: CheckpointKind,
        /// The job ends once this completes (final checkpoint, stop-with-savepoint).
        is_final: bool,
    },
    /// Every task acknowledged checkpoint `id`: write its metadata (and add it
    /// to the completed-checkpoint store), then report with
    /// [`Coordinator::finalized`].
    Finalize {
        /// The checkpoint's id.
        id: CheckpointId,
        /// Checkpoint or savepoint: where the shell stores it.
        kind: CheckpointKind,
        /// The job ends once this completes.
        is_final: bool,
        /// When it was triggered (for the metadata's timings).
        triggered_at: Instant,
        /// Every task's acknowledgement: the state handles and timings.
        acks: BTreeMap<TaskId, Acknowledgement<H>>,
    },
    /// Checkpoint `id` is complete and durable: tell every task of the ack set
    /// (the guest's completion export; sinks commit what they pre-committed up
    /// to `id`). Best-effort. If `is_final`, end the job afterwards.
    NotifyComplete {
        /// The completed checkpoint's id.
        id: CheckpointId,
        /// Checkpoint, or a stop-with-savepoint.
        kind: CheckpointKind,
        /// The job ends now.
        is_final: bool,
    },
    /// Checkpoint `id` is aborted: remove its files and tell the tasks to
    /// drop its alignment and abandon its snapshot.
    Abort {
        /// The aborted checkpoint's id.
        id: CheckpointId,
        /// Checkpoint or savepoint (a failed savepoint is reported to whoever
        /// asked for it).
        kind: CheckpointKind,
        /// Whether it was a final checkpoint or stop-with-savepoint.
        is_final: bool,
        /// Why.
        reason: AbortReason,
    },
    /// Checkpoint `completed` completed: delete the completed checkpoints
    /// `ids`, **newest first**, stopping at the first that cannot be removed
    /// (a delta goes before the images it builds on, so no complete checkpoint
    /// ever loses a link its chain needs); then report what is still there
    /// with [`Coordinator::pruned`], which says whether to sweep. `ids` holds
    /// those retention just dropped and those whose removal failed before,
    /// never a savepoint, and may be empty when only a sweep is due.
    Prune {
        /// The checkpoint whose completion issued it.
        completed: CheckpointId,
        /// The checkpoints to delete, newest first.
        ids: Vec<CheckpointId>,
    },
    /// Too many checkpoints failed in a row: fail the job over. The
    /// coordinator has stopped its scheduler already.
    FailJob {
        /// The failure count and the last failure.
        reason: TooManyFailures,
    },
}

/// Why a message was ignored. Not an error of the coordinator: messages race
/// with timeouts and aborts, so the shell logs these (at debug or warn level)
/// and goes on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum Ignored {
    /// The checkpoint was never triggered, or ended too long ago to be remembered.
    #[error("checkpoint {id} is unknown")]
    UnknownCheckpoint {
        /// The checkpoint named by the message.
        id: CheckpointId,
    },
    /// The checkpoint was aborted already (the message came late).
    #[error("{kind} {id} was aborted already")]
    Aborted {
        /// The checkpoint named by the message.
        id: CheckpointId,
        /// Checkpoint or savepoint: where its late state would lie.
        kind: CheckpointKind,
    },
    /// Every acknowledgement of the checkpoint is in already (it is being
    /// finalized, or is complete).
    #[error("checkpoint {id} is fully acknowledged already")]
    Complete {
        /// The checkpoint named by the message.
        id: CheckpointId,
    },
    /// `finalized` was reported for a checkpoint still waiting for
    /// acknowledgements: the shell finalized something it was not asked to.
    #[error("checkpoint {id} is still waiting for acknowledgements, it cannot be finalized")]
    AwaitingAcknowledgements {
        /// The checkpoint named by the message.
        id: CheckpointId,
    },
    /// The task is not in the ack set.
    #[error("task {task} is not in the ack set of checkpoint {id}")]
    UnknownTask {
        /// The checkpoint named by the message.
        id: CheckpointId,
        /// The task that sent it.
        task: TaskId,
    },
    /// The task has acknowledged this checkpoint already; the first
    /// acknowledgement stands.
    #[error("task {task} has acknowledged checkpoint {id} already")]
    Duplicate {
        /// The checkpoint named by the message.
        id: CheckpointId,
        /// The task that sent it.
        task: TaskId,
    },
    /// `source_finished` named a task that is not a source.
    #[error("task {task} is not a source")]
    UnknownSource {
        /// The task named by the message.
        task: TaskId,
    },
}

/// The sweep that follows an [`Action::Prune`]
/// ([`Coordinator::pruned`]): what the shell lists and removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sweep {
    /// The checkpoint whose completion issued the prune: only incomplete
    /// directories and shared files of older checkpoints go
    /// ([`stray_checkpoints`](crate::checkpoint::recovery::stray_checkpoints),
    /// [`shared_files_to_remove`](crate::checkpoint::recovery::shared_files_to_remove)).
    pub completed: CheckpointId,
    /// The checkpoints pending or being finalized: nothing of theirs goes.
    pub in_flight: BTreeSet<CheckpointId>,
    /// The shared files a kept, not-yet-removed or in-flight checkpoint names.
    pub needed_shared: BTreeSet<String>,
}

/// An acknowledgement the coordinator did not accept, handed back with the
/// reason so the shell can log it and decide what becomes of its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IgnoredAck<H> {
    /// Why it was ignored.
    pub reason: Ignored,
    /// The acknowledgement, untouched.
    pub ack: Box<Acknowledgement<H>>,
}

impl<H> IgnoredAck<H> {
    /// Whether the shell should delete the state this acknowledgement points
    /// to, and of which kind of checkpoint: only for a late acknowledgement of
    /// an aborted checkpoint, whose files the abort already removed, so nobody
    /// else will. Otherwise (`None`) the state may belong to an accepted
    /// acknowledgement (a duplicate points to the same file) and must be left
    /// alone.
    pub(crate) fn state_to_discard(&self) -> Option<CheckpointKind> {
        match self.reason {
            Ignored::Aborted { kind, .. } => Some(kind),
            _ => None,
        }
    }
}

/// Why a savepoint could not be triggered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub(crate) enum SavepointRefused {
    /// The job is not RUNNING.
    #[error("the job is not running; savepoints are taken of a running job")]
    NotRunning,
    /// Every source has finished; the final checkpoint is due.
    #[error("every source has finished and the job is finishing")]
    SourcesFinished,
    /// A final checkpoint or stop-with-savepoint is in flight.
    #[error("the job is finishing with checkpoint {id}")]
    Finishing {
        /// The final checkpoint or savepoint in flight.
        id: CheckpointId,
    },
    /// A final checkpoint or stop-with-savepoint has completed.
    #[error("the job has finished with checkpoint {id}")]
    Finished {
        /// The final checkpoint or savepoint.
        id: CheckpointId,
    },
}

impl SavepointRefused {
    /// Whether the job is ending by itself — every source finished, or a final checkpoint or
    /// stop-with-savepoint in flight or done: a stop asked now has nothing left to do.
    pub(crate) fn job_is_ending(self) -> bool {
        !matches!(self, SavepointRefused::NotRunning)
    }
}

/// A coordinator that cannot be built from its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub(crate) enum CoordinatorError {
    /// No task to acknowledge.
    #[error("the ack set is empty: a job needs at least one task")]
    EmptyAckSet,
    /// No source to trigger.
    #[error("the trigger set is empty: a job needs at least one source")]
    NoSources,
    /// A source that would not acknowledge its own checkpoints.
    #[error("source {task} is not in the ack set: every source acknowledges its checkpoints")]
    SourceNotInAckSet {
        /// The source.
        task: TaskId,
    },
    /// Checkpoint id 0.
    #[error("checkpoint ids start at 1, got first id 0")]
    ZeroFirstId,
    /// `max_concurrent` of 0 would never trigger.
    #[error("max concurrent checkpoints must be at least 1")]
    ZeroMaxConcurrent,
    /// `retained` of 0 would prune every checkpoint it completes.
    #[error("retained checkpoints must be at least 1")]
    ZeroRetained,
}

/// A checkpoint whose acknowledgements are all in, waiting for the shell to
/// write its metadata.
#[derive(Debug, Clone)]
struct Finalizing {
    kind: CheckpointKind,
    is_final: bool,
    /// What its tasks' states need: the checkpoints their chains build on,
    /// the shared files they name.
    references: References,
}

/// How a remembered checkpoint ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Completed,
    Aborted(CheckpointKind),
}

/// Where the job stands with respect to its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Periodic checkpoints as configured.
    Periodic,
    /// Every source finished at `since`: the final checkpoint is due.
    Due { since: Instant },
    /// A final checkpoint or stop-with-savepoint is in flight.
    InFlight(CheckpointId),
    /// A final checkpoint or stop-with-savepoint completed: nothing more is triggered.
    Done(CheckpointId),
}

/// The checkpoint state machine of one job. `H` is the state handle that
/// acknowledgements carry (opaque here). See the module docs for the rules.
#[derive(Debug)]
pub(crate) struct Coordinator<H> {
    /// The job's checkpoint settings.
    config: CheckpointConfig,
    /// Every task: each acknowledges every checkpoint and is notified.
    ack_set: BTreeSet<TaskId>,
    /// The sources: they receive the triggers.
    trigger_set: BTreeSet<TaskId>,
    /// The id the next trigger uses.
    next_id: CheckpointId,
    /// When the job last became RUNNING; `None` while it is not running.
    running_since: Option<Instant>,
    /// When the last periodic checkpoint was triggered in this run.
    last_periodic_trigger: Option<Instant>,
    /// When the last checkpoint or savepoint completed.
    last_completion: Option<Instant>,
    /// Checkpoints waiting for acknowledgements.
    pending: BTreeMap<CheckpointId, PendingCheckpoint<H>>,
    /// Checkpoints fully acknowledged, waiting for the shell's metadata write.
    finalizing: BTreeMap<CheckpointId, Finalizing>,
    /// Completed checkpoints (not savepoints) not yet pruned, each with what
    /// it needs on disk: the `retained` newest and what their chains need
    /// ([`files_to_keep`]).
    completed: BTreeMap<CheckpointId, References>,
    /// Checkpoints pruned whose removal failed, with what they name: retried
    /// at the next completion, their shared files kept until they are gone.
    unpruned: BTreeMap<CheckpointId, References>,
    /// Whether the storage may hold what nobody needs: incomplete directories
    /// of aborted checkpoints, shared files no checkpoint names (see the
    /// module docs). True at the start: the run before may have left some.
    garbage_possible: bool,
    /// The newest completed checkpoint (not savepoint).
    latest_completed: Option<CheckpointId>,
    /// The newest id whose completion was notified.
    last_notified: Option<CheckpointId>,
    /// Checkpoint failures since the last completed checkpoint (or FailJob).
    consecutive_failures: u32,
    /// Sources that reported their input ended, in this run.
    finished_sources: BTreeSet<TaskId>,
    /// Final checkpoint / stop-with-savepoint progress.
    ending: Ending,
    /// Recently ended checkpoints, to classify late messages.
    ended: BTreeMap<CheckpointId, Ended>,
}

impl<H> Coordinator<H> {
    /// A coordinator for a job whose tasks are `ack_set` and whose sources are
    /// `trigger_set` (a subset of it), numbering checkpoints from `first_id`
    /// (1 for a fresh job, one past the restored checkpoint after a restore).
    /// The job starts not running: call [`set_running`](Self::set_running).
    pub(crate) fn new(
        config: CheckpointConfig,
        ack_set: impl IntoIterator<Item = TaskId>,
        trigger_set: impl IntoIterator<Item = TaskId>,
        first_id: CheckpointId,
    ) -> Result<Self, CoordinatorError> {
        let ack_set: BTreeSet<TaskId> = ack_set.into_iter().collect();
        let trigger_set: BTreeSet<TaskId> = trigger_set.into_iter().collect();
        if ack_set.is_empty() {
            return Err(CoordinatorError::EmptyAckSet);
        }
        if trigger_set.is_empty() {
            return Err(CoordinatorError::NoSources);
        }
        if let Some(task) = trigger_set.iter().find(|t| !ack_set.contains(*t)) {
            return Err(CoordinatorError::SourceNotInAckSet { task: task.clone() });
        }
        if first_id.0 == 0 {
            return Err(CoordinatorError::ZeroFirstId);
        }
        if config.max_concurrent == 0 {
            return Err(CoordinatorError::ZeroMaxConcurrent);
        }
        if config.retained == 0 {
            return Err(CoordinatorError::ZeroRetained);
        }
        Ok(Coordinator {
            config,
            ack_set,
            trigger_set,
            next_id: first_id,
            running_since: None,
            last_periodic_trigger: None,
            last_completion: None,
            pending: BTreeMap::new(),
            finalizing: BTreeMap::new(),
            completed: BTreeMap::new(),
            unpruned: BTreeMap::new(),
            garbage_possible: true,
            latest_completed: None,
            last_notified: None,
            consecutive_failures: 0,
            finished_sources: BTreeSet::new(),
            ending: Ending::Periodic,
            ended: BTreeMap::new(),
        })
    }

    /// Hands over the completed checkpoints already on disk (after a restore),
    /// each with what it needs on disk
    /// ([`CheckpointMetadata::references`](crate::checkpoint::metadata::CheckpointMetadata::references)),
    /// so they count toward `retained` and are pruned by the same rule as new
    /// ones, at the next completion. Ids should be below `first_id`.
    pub(crate) fn with_retained_checkpoints(
        mut self,
        checkpoints: impl IntoIterator<Item = (CheckpointId, References)>,
    ) -> Self {
        self.completed.extend(checkpoints);
        if let Some(&newest) = self.completed.keys().next_back() {
            self.latest_completed = self.latest_completed.max(Some(newest));
            self.last_notified = self.last_notified.max(Some(newest));
        }
        self
    }

    /// Every task: each acknowledges every checkpoint and receives the
    /// completion notices.
    pub(crate) fn ack_set(&self) -> &BTreeSet<TaskId> {
        &self.ack_set
    }

    /// The sources: they receive the triggers.
    pub(crate) fn trigger_set(&self) -> &BTreeSet<TaskId> {
        &self.trigger_set
    }

    /// Whether the scheduler runs (the job is RUNNING).
    pub(crate) fn is_running(&self) -> bool {
        self.running_since.is_some()
    }

    /// The id the next trigger will use.
    pub(crate) fn next_id(&self) -> CheckpointId {
        self.next_id
    }

    /// Checkpoints waiting for acknowledgements, oldest first.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> impl Iterator<Item = &PendingCheckpoint<H>> {
        self.pending.values()
    }

    /// Checkpoints fully acknowledged whose metadata the shell is writing.
    #[cfg(test)]
    pub(crate) fn finalizing(&self) -> impl Iterator<Item = CheckpointId> + '_ {
        self.finalizing.keys().copied()
    }

    /// How many checkpoints and savepoints are in flight (pending or
    /// finalizing): what `max_concurrent` limits.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending.len() + self.finalizing.len()
    }

    /// The job status changed: `running` is true when it became RUNNING and
    /// false for any other status. Turning on schedules the first periodic
    /// checkpoint one interval from `now`; turning off aborts every checkpoint
    /// waiting for acknowledgements (not counted as failures) and forgets
    /// which sources finished. Repeating the current status changes nothing
    /// (but, like every call, does what is due at `now`).
    pub(crate) fn set_running(&mut self, running: bool, now: Instant) -> Vec<Action<H>> {
        let mut actions = Vec::new();
        match (self.is_running(), running) {
            (false, true) => {
                self.running_since = Some(now);
                self.last_periodic_trigger = None;
            }
            (true, false) => self.stop(now, &mut actions),
            _ => {}
        }
        self.advance(now, &mut actions);
        actions
    }

    /// Does what is due at `now`: aborts the checkpoints whose timeout passed,
    /// then triggers the final checkpoint or a periodic one if due. Call it at
    /// [`next_deadline`](Self::next_deadline).
    pub(crate) fn poll(&mut self, now: Instant) -> Vec<Action<H>> {
        let mut actions = Vec::new();
        self.advance(now, &mut actions);
        actions
    }

    /// When [`poll`](Self::poll) has something to do next, if nothing else
    /// happens first: the earliest timeout of a pending checkpoint, the final
    /// checkpoint, or the next periodic trigger (none while `max_concurrent`
    /// are in flight: the call that frees a slot triggers itself). `None` when
    /// nothing is scheduled (not running, periodic checkpoints off and nothing
    /// pending).
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.running_since?;
        let expiry = self
            .pending
            .values()
            .map(|p| p.expires_at(self.config.timeout))
            .min();
        let trigger = match self.ending {
            Ending::Due { since } => Some(since),
            Ending::Periodic => self.periodic_due(),
            Ending::InFlight(_) | Ending::Done(_) => None,
        };
        match (expiry, trigger) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A user asked for a savepoint: triggered at once, regardless of
    /// interval, min pause and `max_concurrent`, also when periodic
    /// checkpoints are off. Its completion is not notified to the tasks (see
    /// the module docs). Refused when the job is not running or is finishing.
    pub(crate) fn trigger_savepoint(
        &mut self,
        now: Instant,
    ) -> Result<(CheckpointId, Vec<Action<H>>), SavepointRefused> {
        self.savepoint(false, now)
    }

    /// A user asked to stop the job with a savepoint: like
    /// [`trigger_savepoint`](Self::trigger_savepoint), but *final*: its
    /// completion is notified with `is_final` (sinks commit) and the shell
    /// ends the job; no periodic checkpoint is triggered while it is in
    /// flight. If it fails, the job goes on as before.
    pub(crate) fn stop_with_savepoint(
        &mut self,
        now: Instant,
    ) -> Result<(CheckpointId, Vec<Action<H>>), SavepointRefused> {
        self.savepoint(true, now)
    }

    /// `task` acknowledged checkpoint `id` at `now`: its snapshot is durable.
    /// The last acknowledgement yields [`Action::Finalize`]. Acknowledgements
    /// of unknown, aborted or complete checkpoints, from tasks outside the ack
    /// set, and repeated ones are handed back with the reason.
    pub(crate) fn acknowledge(
        &mut self,
        id: CheckpointId,
        task: TaskId,
        ack: Acknowledgement<H>,
        now: Instant,
    ) -> Result<Vec<Action<H>>, IgnoredAck<H>> {
        let Some(pending) = self.pending.get_mut(&id) else {
            let reason = self.not_pending(id, Some(task));
            // Its state was written after the abort removed the checkpoint's files.
            self.garbage_possible |= matches!(reason, Ignored::Aborted { .. });
            return Err(IgnoredAck {
                reason,
                ack: Box::new(ack),
            });
        };
        if let Err((rejection, ack)) = pending.acknowledge(task.clone(), ack) {
            let reason = match rejection {
                AckRejection::NotInAckSet => Ignored::UnknownTask { id, task },
                AckRejection::AlreadyAcknowledged => Ignored::Duplicate { id, task },
            };
            return Err(IgnoredAck {
                reason,
                ack: Box::new(ack),
            });
        }
        let complete = pending.is_complete();
        let mut actions = Vec::new();
        if complete && let Some(broken) = self.broken_link(id) {
            self.abort_pending(id, broken, now, &mut actions);
        } else if complete && let Some(pending) = self.pending.remove(&id) {
            let (kind, is_final) = (pending.kind(), pending.is_final());
            let references = References::of(
                pending
                    .acks()
                    .map(|(_, ack)| (ack.chain.as_slice(), ack.shared.as_slice())),
            );
            self.finalizing.insert(
                id,
                Finalizing {
                    kind,
                    is_final,
                    references,
                },
            );
            actions.push(Action::Finalize {
                id,
                kind,
                is_final,
                triggered_at: pending.triggered_at(),
                acks: pending.into_acks(),
            });
        }
        self.advance(now, &mut actions);
        Ok(actions)
    }

    /// `task` could not take its snapshot for checkpoint `id`: the checkpoint
    /// is aborted ([`AbortReason::Declined`], counted as a failure). Ignored
    /// for a checkpoint not waiting for acknowledgements, or from a task
    /// outside the ack set.
    pub(crate) fn decline(
        &mut self,
        id: CheckpointId,
        task: TaskId,
        reason: impl Into<String>,
        now: Instant,
    ) -> Result<Vec<Action<H>>, Ignored> {
        match self.pending.get(&id) {
            None => {
                let ignored = self.not_pending(id, None);
                // A write that failed after the abort may have left part of a file behind.
                self.garbage_possible |= matches!(ignored, Ignored::Aborted { .. });
                Err(ignored)
            }
            Some(pending) if !pending.expects(&task) => Err(Ignored::UnknownTask { id, task }),
            Some(_) => {
                let mut actions = Vec::new();
                let reason = AbortReason::Declined {
                    task,
                    reason: reason.into(),
                };
                self.abort_pending(id, reason, now, &mut actions);
                self.advance(now, &mut actions);
                Ok(actions)
            }
        }
    }

    /// The shell finished writing the metadata of checkpoint `id` (after
    /// [`Action::Finalize`]): `Ok` completes it — notification, pruning,
    /// subsumption of older pending checkpoints; `Err` (the shell's message)
    /// aborts it as [`AbortReason::FinalizeFailed`], counted as a failure.
    pub(crate) fn finalized(
        &mut self,
        id: CheckpointId,
        result: Result<(), String>,
        now: Instant,
    ) -> Result<Vec<Action<H>>, Ignored> {
        let Some(finalizing) = self.finalizing.remove(&id) else {
            return Err(if self.pending.contains_key(&id) {
                Ignored::AwaitingAcknowledgements { id }
            } else {
                self.not_pending(id, None)
            });
        };
        let mut actions = Vec::new();
        match result {
            Ok(()) => self.complete(id, finalizing, now, &mut actions),
            Err(message) => {
                let reason = AbortReason::FinalizeFailed { message };
                self.abort(
                    id,
                    finalizing.kind,
                    finalizing.is_final,
                    reason,
                    now,
                    &mut actions,
                );
            }
        }
        self.advance(now, &mut actions);
        Ok(actions)
    }

    /// The shell carried out the [`Action::Prune`] issued when `completed`
    /// completed, and `not_removed` of its checkpoints are still on disk: they
    /// are tried again at the next completion. Returns the sweep to carry out
    /// next if something may have been left behind (then report with
    /// [`swept`](Self::swept)).
    pub(crate) fn pruned(
        &mut self,
        completed: CheckpointId,
        not_removed: &BTreeSet<CheckpointId>,
    ) -> Option<Sweep> {
        self.unpruned.retain(|id, _| not_removed.contains(id));
        if !self.garbage_possible {
            return None;
        }
        let in_flight = self
            .pending
            .keys()
            .chain(self.finalizing.keys())
            .copied()
            .collect();
        let mut needed_shared = files_to_keep(&self.completed, self.config.retained).shared;
        let named_elsewhere = self
            .pending
            .values()
            .flat_map(|pending| pending.acks().flat_map(|(_, ack)| &ack.shared))
            .map(|file| &file.name)
            .chain(self.finalizing.values().flat_map(|f| &f.references.shared))
            .chain(self.unpruned.values().flat_map(|r| &r.shared));
        needed_shared.extend(named_elsewhere.cloned());
        Some(Sweep {
            completed,
            in_flight,
            needed_shared,
        })
    }

    /// The shell carried out a [`Sweep`]; `failed` if something could not be
    /// listed or removed, which the next completion sweeps again.
    pub(crate) fn swept(&mut self, failed: bool) {
        self.garbage_possible = failed;
    }

    /// Source `task` reached the end of its input. When every source has, the
    /// final checkpoint is triggered at once (also with periodic checkpoints
    /// off) and periodic checkpoints stop. Repeating it does nothing.
    pub(crate) fn source_finished(
        &mut self,
        task: TaskId,
        now: Instant,
    ) -> Result<Vec<Action<H>>, Ignored> {
        if !self.trigger_set.contains(&task) {
            return Err(Ignored::UnknownSource { task });
        }
        self.finished_sources.insert(task);
        if self.all_sources_finished() && self.ending == Ending::Periodic {
            self.ending = Ending::Due { since: now };
        }
        let mut actions = Vec::new();
        self.advance(now, &mut actions);
        Ok(actions)
    }

    // ----- internals -------------------------------------------------------

    /// Why pending checkpoint `id` cannot complete, if a task's state builds
    /// on a checkpoint that is not completed and on disk: a delta taken
    /// before its parent's abort reached the task, or chained to a
    /// checkpoint still in flight.
    fn broken_link(&self, id: CheckpointId) -> Option<AbortReason> {
        let pending = self.pending.get(&id)?;
        pending.acks().find_map(|(task, ack)| {
            ack.chain
                .iter()
                .find(|link| !self.completed.contains_key(link))
                .map(|&link| AbortReason::BrokenChain {
                    task: task.clone(),
                    link,
                })
        })
    }

    fn all_sources_finished(&self) -> bool {
        self.finished_sources.len() == self.trigger_set.len()
    }

    /// When the next periodic checkpoint is due, if periodic checkpoints are
    /// on, the job runs and a slot is free.
    fn periodic_due(&self) -> Option<Instant> {
        let interval = self.config.interval?;
        let running_since = self.running_since?;
        if self.ending != Ending::Periodic
            || self.in_flight() >= self.config.max_concurrent as usize
        {
            return None;
        }
        let after_trigger = self.last_periodic_trigger.unwrap_or(running_since) + interval;
        let after_completion = self.last_completion.map(|t| t + self.config.min_pause);
        Some(after_completion.map_or(after_trigger, |c| c.max(after_trigger)))
    }

    /// Expires overdue checkpoints, then triggers what is due.
    fn advance(&mut self, now: Instant, actions: &mut Vec<Action<H>>) {
        if !self.is_running() {
            return;
        }
        let timeout = self.config.timeout;
        let expired: Vec<CheckpointId> = self
            .pending
            .values()
            .filter(|p| p.expires_at(timeout) <= now)
            .map(|p| p.id())
            .collect();
        for id in expired {
            self.abort_pending(id, AbortReason::Expired { timeout }, now, actions);
        }
        if !self.is_running() {
            return; // too many failures stopped the scheduler
        }
        match self.ending {
            Ending::Due { .. } => {
                self.trigger(CheckpointKind::Checkpoint, true, now, actions);
            }
            Ending::Periodic => {
                if self.periodic_due().is_some_and(|due| due <= now) {
                    self.last_periodic_trigger = Some(now);
                    self.trigger(CheckpointKind::Checkpoint, false, now, actions);
                }
            }
            Ending::InFlight(_) | Ending::Done(_) => {}
        }
    }

    fn savepoint(
        &mut self,
        is_final: bool,
        now: Instant,
    ) -> Result<(CheckpointId, Vec<Action<H>>), SavepointRefused> {
        if !self.is_running() {
            return Err(SavepointRefused::NotRunning);
        }
        match self.ending {
            Ending::Periodic => {}
            Ending::Due { .. } => return Err(SavepointRefused::SourcesFinished),
            Ending::InFlight(id) => return Err(SavepointRefused::Finishing { id }),
            Ending::Done(id) => return Err(SavepointRefused::Finished { id }),
        }
        let mut actions = Vec::new();
        let id = self.trigger(CheckpointKind::Savepoint, is_final, now, &mut actions);
        self.advance(now, &mut actions);
        Ok((id, actions))
    }

    fn trigger(
        &mut self,
        kind: CheckpointKind,
        is_final: bool,
        now: Instant,
        actions: &mut Vec<Action<H>>,
    ) -> CheckpointId {
        let id = self.next_id;
        self.next_id = id.next();
        let pending = PendingCheckpoint::new(id, kind, is_final, self.ack_set.iter().cloned(), now);
        self.pending.insert(id, pending);
        if is_final {
            self.ending = Ending::InFlight(id);
        }
        actions.push(Action::Trigger { id, kind, is_final });
        id
    }

    /// Why a message about `id` (from `task`, for acknowledgements) finds no
    /// pending checkpoint.
    fn not_pending(&self, id: CheckpointId, task: Option<TaskId>) -> Ignored {
        let ended = if self.finalizing.contains_key(&id) {
            Some(Ended::Completed)
        } else {
            self.ended.get(&id).copied()
        };
        match (ended, task) {
            (None, _) => Ignored::UnknownCheckpoint { id },
            (Some(Ended::Aborted(kind)), _) => Ignored::Aborted { id, kind },
            (Some(Ended::Completed), None) => Ignored::Complete { id },
            (Some(Ended::Completed), Some(task)) if self.ack_set.contains(&task) => {
                Ignored::Duplicate { id, task }
            }
            (Some(Ended::Completed), Some(task)) => Ignored::UnknownTask { id, task },
        }
    }

    fn remember(&mut self, id: CheckpointId, how: Ended) {
        self.ended.insert(id, how);
        while self.ended.len() > REMEMBERED {
            self.ended.pop_first();
        }
    }

    fn complete(
        &mut self,
        id: CheckpointId,
        finalizing: Finalizing,
        now: Instant,
        actions: &mut Vec<Action<H>>,
    ) {
        let Finalizing {
            kind,
            is_final,
            references,
        } = finalizing;
        self.remember(id, Ended::Completed);
        self.last_completion = Some(now);
        if self.ending == Ending::InFlight(id) {
            self.ending = Ending::Done(id);
        }
        let notify = kind == CheckpointKind::Checkpoint || is_final;
        if notify && self.last_notified.is_none_or(|n| n < id) {
            self.last_notified = Some(id);
            actions.push(Action::NotifyComplete { id, kind, is_final });
        }
        if kind == CheckpointKind::Savepoint {
            return;
        }
        self.consecutive_failures = 0;
        self.latest_completed = self.latest_completed.max(Some(id));
        let subsumed: Vec<CheckpointId> = self
            .pending
            .range(..id)
            .filter(|(_, p)| p.kind() == CheckpointKind::Checkpoint)
            .map(|(&older, _)| older)
            .collect();
        for older in subsumed {
            self.abort_pending(older, AbortReason::Subsumed { by: id }, now, actions);
        }
        self.completed.insert(id, references);
        for pruned in checkpoints_to_prune(&self.completed, self.config.retained) {
            let references = self.completed.remove(&pruned).unwrap_or_default();
            // Its shared files may be nobody's now.
            self.garbage_possible |= !references.shared.is_empty();
            self.unpruned.insert(pruned, references);
        }
        if !self.unpruned.is_empty() || self.garbage_possible {
            actions.push(Action::Prune {
                completed: id,
                ids: self.unpruned.keys().rev().copied().collect(),
            });
        }
    }

    /// Aborts `id` if it is waiting for acknowledgements.
    fn abort_pending(
        &mut self,
        id: CheckpointId,
        reason: AbortReason,
        now: Instant,
        actions: &mut Vec<Action<H>>,
    ) {
        if let Some(pending) = self.pending.remove(&id) {
            self.abort(id, pending.kind(), pending.is_final(), reason, now, actions);
        }
    }

    /// Records the abort of `id` (already removed from `pending` or
    /// `finalizing`), tells the shell, and counts the failure.
    fn abort(
        &mut self,
        id: CheckpointId,
        kind: CheckpointKind,
        is_final: bool,
        reason: AbortReason,
        now: Instant,
        actions: &mut Vec<Action<H>>,
    ) {
        self.remember(id, Ended::Aborted(kind));
        // A task's write still under way may recreate what the abort removes.
        self.garbage_possible = true;
        if self.ending == Ending::InFlight(id) {
            self.ending = if self.all_sources_finished() {
                Ending::Due { since: now }
            } else {
                Ending::Periodic
            };
        }
        let counts = kind == CheckpointKind::Checkpoint
            && reason.counts_as_failure()
            && self.latest_completed.is_none_or(|latest| latest < id);
        actions.push(Action::Abort {
            id,
            kind,
            is_final,
            reason: reason.clone(),
        });
        if !counts {
            return;
        }
        self.consecutive_failures += 1;
        if self.consecutive_failures > self.config.tolerable_failures {
            let reason = TooManyFailures {
                consecutive: self.consecutive_failures,
                tolerable: self.config.tolerable_failures,
                last: id,
                last_reason: reason,
            };
            self.consecutive_failures = 0;
            actions.push(Action::FailJob { reason });
            self.stop(now, actions);
        }
    }

    /// Turns the scheduler off: aborts what waits for acknowledgements,
    /// forgets the finished sources and the job's ending.
    fn stop(&mut self, now: Instant, actions: &mut Vec<Action<H>>) {
        self.running_since = None;
        let waiting: Vec<CheckpointId> = self.pending.keys().copied().collect();
        for id in waiting {
            self.abort_pending(id, AbortReason::JobNotRunning, now, actions);
        }
        self.finished_sources.clear();
        // A restart after a completed final checkpoint (a failure while the
        // job was ending) restores from it; its sources finish again and a new
        // final checkpoint ends the job.
        self.ending = Ending::Periodic;
    }
}

#[cfg(test)]
mod tests;
