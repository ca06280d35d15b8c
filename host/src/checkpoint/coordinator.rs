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
//!   ([`IgnoredAck::should_discard_state`]) because the abort already removed
//!   that checkpoint's files and nobody else will clean up what came late.
//! - **Restores** continue the numbering (`first_id`) and hand over the
//!   completed checkpoints already on disk
//!   ([`Coordinator::with_retained_checkpoints`]) so they are pruned by the
//!   same rule as new ones.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::checkpoint::config::CheckpointConfig;
use crate::checkpoint::pending::{AckRejection, Acknowledgement, PendingCheckpoint};
use crate::checkpoint::recovery::checkpoints_to_prune;
use crate::checkpoint::stats::{CheckpointStats, TaskStats};
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};

/// How many ended checkpoints the coordinator remembers, to tell a late
/// message ("aborted", "complete") from an unknown one.
const REMEMBERED: usize = 128;

/// What the shell must do, as decided by the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<H> {
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
    /// Delete these completed checkpoints: they are beyond the retained count.
    /// Never contains a savepoint.
    Prune {
        /// The checkpoints to delete, oldest first.
        ids: Vec<CheckpointId>,
    },
    /// Too many checkpoints failed in a row: fail the job over. The
    /// coordinator has stopped its scheduler already.
    FailJob {
        /// The failure count and the last failure.
        reason: TooManyFailures,
    },
}

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

/// Why a message was ignored. Not an error of the coordinator: messages race
/// with timeouts and aborts, so the shell logs these (at debug or warn level)
/// and goes on.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Ignored {
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

/// An acknowledgement the coordinator did not accept, handed back with the
/// reason so the shell can log it and decide what becomes of its state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredAck<H> {
    /// Why it was ignored.
    pub reason: Ignored,
    /// The acknowledgement, untouched.
    pub ack: Box<Acknowledgement<H>>,
}

impl<H> IgnoredAck<H> {
    /// Whether the shell should delete the state this acknowledgement points
    /// to: true only for a late acknowledgement of an aborted checkpoint,
    /// whose files the abort already removed, so nobody else will. Otherwise
    /// the state may belong to an accepted acknowledgement (a duplicate points
    /// to the same file) and must be left alone.
    pub fn should_discard_state(&self) -> bool {
        matches!(self.reason, Ignored::Aborted { .. })
    }
}

/// Why a savepoint could not be triggered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SavepointRefused {
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

/// A coordinator that cannot be built from its arguments.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum CoordinatorError {
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
    /// The checkpoints its tasks' image chains need.
    links: BTreeSet<CheckpointId>,
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
pub struct Coordinator<H> {
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
    /// Completed checkpoints (not savepoints) not yet pruned, each with the
    /// checkpoints its image chains need: the `retained` newest and what
    /// their chains need (`recovery::kept_checkpoints`).
    completed: BTreeMap<CheckpointId, BTreeSet<CheckpointId>>,
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
    /// Statistics.
    stats: CheckpointStats,
}

impl<H> Coordinator<H> {
    /// A coordinator for a job whose tasks are `ack_set` and whose sources are
    /// `trigger_set` (a subset of it), numbering checkpoints from `first_id`
    /// (1 for a fresh job, one past the restored checkpoint after a restore).
    /// The job starts not running: call [`set_running`](Self::set_running).
    pub fn new(
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
            latest_completed: None,
            last_notified: None,
            consecutive_failures: 0,
            finished_sources: BTreeSet::new(),
            ending: Ending::Periodic,
            ended: BTreeMap::new(),
            stats: CheckpointStats::default(),
        })
    }

    /// Hands over the completed checkpoints already on disk (after a restore),
    /// each with the checkpoints its image chains need
    /// ([`CheckpointMetadata::chain_links`](crate::checkpoint::metadata::CheckpointMetadata::chain_links)),
    /// so they count toward `retained` and are pruned by the same rule as new
    /// ones, at the next completion. Ids should be below `first_id`.
    pub fn with_retained_checkpoints(
        mut self,
        checkpoints: impl IntoIterator<Item = (CheckpointId, BTreeSet<CheckpointId>)>,
    ) -> Self {
        self.completed.extend(checkpoints);
        if let Some(&newest) = self.completed.keys().next_back() {
            self.latest_completed = self.latest_completed.max(Some(newest));
            self.last_notified = self.last_notified.max(Some(newest));
        }
        self
    }

    /// The job's checkpoint settings.
    pub fn config(&self) -> &CheckpointConfig {
        &self.config
    }

    /// Every task: each acknowledges every checkpoint and receives the
    /// completion notices.
    pub fn ack_set(&self) -> &BTreeSet<TaskId> {
        &self.ack_set
    }

    /// The sources: they receive the triggers.
    pub fn trigger_set(&self) -> &BTreeSet<TaskId> {
        &self.trigger_set
    }

    /// Whether the scheduler runs (the job is RUNNING).
    pub fn is_running(&self) -> bool {
        self.running_since.is_some()
    }

    /// The id the next trigger will use.
    pub fn next_id(&self) -> CheckpointId {
        self.next_id
    }

    /// Checkpoints waiting for acknowledgements, oldest first.
    pub fn pending(&self) -> impl Iterator<Item = &PendingCheckpoint<H>> {
        self.pending.values()
    }

    /// Checkpoints fully acknowledged whose metadata the shell is writing.
    pub fn finalizing(&self) -> impl Iterator<Item = CheckpointId> + '_ {
        self.finalizing.keys().copied()
    }

    /// How many checkpoints and savepoints are in flight (pending or
    /// finalizing): what `max_concurrent` limits.
    pub fn in_flight(&self) -> usize {
        self.pending.len() + self.finalizing.len()
    }

    /// Completed checkpoints not pruned yet, oldest first (savepoints
    /// excluded): the `retained` newest, and those their image chains need.
    pub fn retained(&self) -> impl Iterator<Item = CheckpointId> + '_ {
        self.completed.keys().copied()
    }

    /// The newest completed checkpoint (savepoints excluded).
    pub fn latest_completed(&self) -> Option<CheckpointId> {
        self.latest_completed
    }

    /// Checkpoint failures in a row so far.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// Whether a final checkpoint or stop-with-savepoint has completed: the job
    /// is over and nothing more will be triggered.
    pub fn is_finished(&self) -> bool {
        matches!(self.ending, Ending::Done(_))
    }

    /// The statistics of this coordinator's checkpoints.
    pub fn stats(&self) -> &CheckpointStats {
        &self.stats
    }

    /// The job status changed: `running` is true when it became RUNNING and
    /// false for any other status. Turning on schedules the first periodic
    /// checkpoint one interval from `now`; turning off aborts every checkpoint
    /// waiting for acknowledgements (not counted as failures) and forgets
    /// which sources finished. Repeating the current status changes nothing
    /// (but, like every call, does what is due at `now`).
    pub fn set_running(&mut self, running: bool, now: Instant) -> Vec<Action<H>> {
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
    pub fn poll(&mut self, now: Instant) -> Vec<Action<H>> {
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
    pub fn next_deadline(&self) -> Option<Instant> {
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
    pub fn trigger_savepoint(
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
    pub fn stop_with_savepoint(
        &mut self,
        now: Instant,
    ) -> Result<(CheckpointId, Vec<Action<H>>), SavepointRefused> {
        self.savepoint(true, now)
    }

    /// `task` acknowledged checkpoint `id` at `now`: its snapshot is durable.
    /// The last acknowledgement yields [`Action::Finalize`]. Acknowledgements
    /// of unknown, aborted or complete checkpoints, from tasks outside the ack
    /// set, and repeated ones are handed back with the reason.
    pub fn acknowledge(
        &mut self,
        id: CheckpointId,
        task: TaskId,
        ack: Acknowledgement<H>,
        now: Instant,
    ) -> Result<Vec<Action<H>>, IgnoredAck<H>> {
        let Some(pending) = self.pending.get_mut(&id) else {
            let reason = self.not_pending(id, Some(task));
            return Err(IgnoredAck {
                reason,
                ack: Box::new(ack),
            });
        };
        let task_stats = TaskStats::acknowledged(&ack, now);
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
        self.stats.acknowledged(id, task, task_stats);
        let mut actions = Vec::new();
        if complete && let Some(broken) = self.broken_link(id) {
            self.abort_pending(id, broken, now, &mut actions);
        } else if complete && let Some(pending) = self.pending.remove(&id) {
            let (kind, is_final) = (pending.kind(), pending.is_final());
            let links = pending
                .acks()
                .flat_map(|(_, ack)| ack.chain.iter().copied())
                .collect();
            self.finalizing.insert(
                id,
                Finalizing {
                    kind,
                    is_final,
                    links,
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
    pub fn decline(
        &mut self,
        id: CheckpointId,
        task: TaskId,
        reason: impl Into<String>,
        now: Instant,
    ) -> Result<Vec<Action<H>>, Ignored> {
        match self.pending.get(&id) {
            None => Err(self.not_pending(id, None)),
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
    pub fn finalized(
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

    /// Source `task` reached the end of its input. When every source has, the
    /// final checkpoint is triggered at once (also with periodic checkpoints
    /// off) and periodic checkpoints stop. Repeating it does nothing.
    pub fn source_finished(
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
        self.stats
            .triggered(id, kind, is_final, self.ack_set.len(), now);
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
            links,
        } = finalizing;
        self.stats.completed(id, now);
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
        self.completed.insert(id, links);
        let pruned = checkpoints_to_prune(&self.completed, self.config.retained);
        for pruned in &pruned {
            self.completed.remove(pruned);
        }
        if !pruned.is_empty() {
            actions.push(Action::Prune { ids: pruned });
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
        self.stats.failed(id, &reason, now);
        self.remember(id, Ended::Aborted(kind));
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
mod tests {
    use std::path::PathBuf;

    use proptest::prelude::*;

    use super::*;
    use crate::checkpoint::stats::CheckpointStatus;

    type Co = Coordinator<String>;
    type Actions = Vec<Action<String>>;

    const CHK: CheckpointKind = CheckpointKind::Checkpoint;
    const SAVE: CheckpointKind = CheckpointKind::Savepoint;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn c(id: u64) -> CheckpointId {
        CheckpointId(id)
    }

    fn src(i: u32) -> TaskId {
        TaskId::new("src", i)
    }

    fn sink() -> TaskId {
        TaskId::new("sink", 0)
    }

    fn all_tasks() -> Vec<TaskId> {
        vec![src(0), src(1), TaskId::new("count", 0), sink()]
    }

    /// Interval 100 ms, timeout 1 s, no min pause, one at a time, keep 1,
    /// tolerate none.
    fn config() -> CheckpointConfig {
        let mut config = CheckpointConfig::new(PathBuf::from("unused"));
        config.interval = Some(ms(100));
        config.timeout = ms(1000);
        config
    }

    fn coordinator(config: CheckpointConfig) -> Co {
        Coordinator::new(config, all_tasks(), [src(0), src(1)], c(1)).unwrap()
    }

    /// A coordinator made RUNNING at `t0`.
    fn running(config: CheckpointConfig, t0: Instant) -> Co {
        let mut co = coordinator(config);
        assert_eq!(co.set_running(true, t0), []);
        co
    }

    fn ack(id: CheckpointId, task: &TaskId) -> Acknowledgement<String> {
        Acknowledgement {
            handle: format!("chk-{id}/{task}"),
            sync_duration: ms(2),
            async_duration: ms(5),
            alignment_duration: ms(1),
            bytes: 100,
            chain: Vec::new(),
        }
    }

    /// Every task acknowledges `id` at `now`; the actions of all the calls.
    fn ack_all(co: &mut Co, id: CheckpointId, now: Instant) -> Actions {
        let mut actions = Vec::new();
        for task in all_tasks() {
            actions.extend(
                co.acknowledge(id, task.clone(), ack(id, &task), now)
                    .unwrap(),
            );
        }
        actions
    }

    /// Every task acknowledges `id` and the metadata is written, at `now`.
    fn complete(co: &mut Co, id: CheckpointId, now: Instant) -> Actions {
        let mut actions = ack_all(co, id, now);
        assert!(
            actions
                .iter()
                .any(|a| matches!(a, Action::Finalize { id: f, .. } if *f == id)),
            "{actions:?}"
        );
        actions.extend(co.finalized(id, Ok(()), now).unwrap());
        actions
    }

    fn trigger(id: u64) -> Action<String> {
        Action::Trigger {
            id: c(id),
            kind: CHK,
            is_final: false,
        }
    }

    fn notify(id: u64) -> Action<String> {
        Action::NotifyComplete {
            id: c(id),
            kind: CHK,
            is_final: false,
        }
    }

    fn abort(id: u64, reason: AbortReason) -> Action<String> {
        Action::Abort {
            id: c(id),
            kind: CHK,
            is_final: false,
            reason,
        }
    }

    fn triggers(actions: &[Action<String>]) -> Vec<u64> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Trigger { id, .. } => Some(id.0),
                _ => None,
            })
            .collect()
    }

    fn fail_job(actions: &[Action<String>]) -> Option<&TooManyFailures> {
        actions.iter().find_map(|a| match a {
            Action::FailJob { reason } => Some(reason),
            _ => None,
        })
    }

    fn expired() -> AbortReason {
        AbortReason::Expired { timeout: ms(1000) }
    }

    // ----- construction ----------------------------------------------------

    #[test]
    fn refuses_inconsistent_construction() {
        let new = |config, acks: Vec<TaskId>, sources: Vec<TaskId>, first| {
            Co::new(config, acks, sources, CheckpointId(first)).unwrap_err()
        };
        assert_eq!(
            new(config(), vec![], vec![src(0)], 1),
            CoordinatorError::EmptyAckSet
        );
        assert_eq!(
            new(config(), all_tasks(), vec![], 1),
            CoordinatorError::NoSources
        );
        assert_eq!(
            new(config(), vec![sink()], vec![src(0)], 1),
            CoordinatorError::SourceNotInAckSet { task: src(0) }
        );
        assert_eq!(
            new(config(), all_tasks(), vec![src(0)], 0),
            CoordinatorError::ZeroFirstId
        );
        let mut zero = config();
        zero.max_concurrent = 0;
        assert_eq!(
            new(zero, all_tasks(), vec![src(0)], 1),
            CoordinatorError::ZeroMaxConcurrent
        );
        let mut zero = config();
        zero.retained = 0;
        assert_eq!(
            new(zero, all_tasks(), vec![src(0)], 1),
            CoordinatorError::ZeroRetained
        );
    }

    #[test]
    fn restored_coordinator_continues_numbering() {
        let t0 = Instant::now();
        let mut co = Co::new(config(), all_tasks(), [src(0), src(1)], c(42)).unwrap();
        co.set_running(true, t0);
        assert_eq!(co.poll(t0 + ms(100)), [trigger(42)]);
        assert_eq!(co.next_id(), c(43));
    }

    // ----- scheduling ------------------------------------------------------

    #[test]
    fn nothing_is_triggered_before_the_job_runs() {
        let t0 = Instant::now();
        let mut co = coordinator(config());
        assert_eq!(co.next_deadline(), None);
        assert_eq!(co.poll(t0 + ms(10_000)), []);
        assert!(!co.is_running());
    }

    #[test]
    fn first_trigger_comes_one_interval_after_running() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        assert_eq!(co.next_deadline(), Some(t0 + ms(100)));
        assert_eq!(co.poll(t0 + ms(99)), []);
        assert_eq!(co.poll(t0 + ms(100)), [trigger(1)]);
    }

    #[test]
    fn periodic_triggers_are_one_interval_apart() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        co.poll(t0 + ms(100));
        complete(&mut co, c(1), t0 + ms(130));
        assert_eq!(co.next_deadline(), Some(t0 + ms(200)));
        assert_eq!(co.poll(t0 + ms(199)), []);
        assert_eq!(co.poll(t0 + ms(200)), [trigger(2)]);
    }

    #[test]
    fn a_late_poll_triggers_once_not_once_per_missed_interval() {
        let t0 = Instant::now();
        let mut config = config();
        config.max_concurrent = 5;
        let mut co = running(config, t0);
        assert_eq!(co.poll(t0 + ms(550)), [trigger(1)]);
        assert_eq!(co.next_deadline(), Some(t0 + ms(650)));
    }

    #[test]
    fn min_pause_is_honoured_after_a_completion() {
        let t0 = Instant::now();
        let mut config = config();
        config.min_pause = ms(80);
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        complete(&mut co, c(1), t0 + ms(170));
        // Not at 200 (interval) but at 170 + 80.
        assert_eq!(co.next_deadline(), Some(t0 + ms(250)));
        assert_eq!(co.poll(t0 + ms(200)), []);
        assert_eq!(co.poll(t0 + ms(249)), []);
        assert_eq!(co.poll(t0 + ms(250)), [trigger(2)]);
        // The next one is an interval after this trigger again.
        complete(&mut co, c(2), t0 + ms(260));
        assert_eq!(co.next_deadline(), Some(t0 + ms(350)));
    }

    #[test]
    fn max_concurrent_is_honoured_and_the_blocked_trigger_fires_as_soon_as_a_slot_frees() {
        let t0 = Instant::now();
        let mut config = config();
        config.max_concurrent = 2;
        let mut co = running(config, t0);
        assert_eq!(co.poll(t0 + ms(100)), [trigger(1)]);
        assert_eq!(co.poll(t0 + ms(200)), [trigger(2)]);
        assert_eq!(co.in_flight(), 2);
        // Blocked: only the timeout of checkpoint 1 is scheduled.
        assert_eq!(co.next_deadline(), Some(t0 + ms(1100)));
        assert_eq!(co.poll(t0 + ms(300)), []);
        assert_eq!(co.poll(t0 + ms(450)), []);
        // Checkpoint 1 completes at 470: checkpoint 3 is triggered by that very
        // call, not at the next interval boundary.
        let actions = complete(&mut co, c(1), t0 + ms(470));
        assert_eq!(triggers(&actions), [3]);
        assert_eq!(co.in_flight(), 2);
    }

    #[test]
    fn finalizing_checkpoints_count_toward_max_concurrent() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        co.poll(t0 + ms(100));
        ack_all(&mut co, c(1), t0 + ms(150));
        assert_eq!(co.finalizing().collect::<Vec<_>>(), [c(1)]);
        assert_eq!(
            co.poll(t0 + ms(300)),
            [],
            "the metadata of 1 is still being written"
        );
        let actions = co.finalized(c(1), Ok(()), t0 + ms(320)).unwrap();
        assert_eq!(actions, [notify(1), trigger(2)]);
    }

    #[test]
    fn min_pause_blocked_trigger_fires_as_soon_as_the_pause_ends() {
        let t0 = Instant::now();
        let mut config = config();
        config.min_pause = ms(150);
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        complete(&mut co, c(1), t0 + ms(120));
        // Due at max(200, 270) = 270: not 300 (the next interval boundary).
        assert_eq!(co.next_deadline(), Some(t0 + ms(270)));
        assert_eq!(co.poll(t0 + ms(270)), [trigger(2)]);
    }

    #[test]
    fn periodic_checkpoints_are_off_without_an_interval() {
        let t0 = Instant::now();
        let mut config = config();
        config.interval = None;
        let mut co = running(config, t0);
        assert_eq!(co.next_deadline(), None);
        assert_eq!(co.poll(t0 + ms(1_000_000)), []);
    }

    // ----- job status ------------------------------------------------------

    #[test]
    fn scheduler_stops_when_the_job_stops_running_and_aborts_pending_without_counting() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        co.poll(t0 + ms(100));
        let actions = co.set_running(false, t0 + ms(150));
        assert_eq!(actions, [abort(1, AbortReason::JobNotRunning)]);
        assert_eq!(co.consecutive_failures(), 0);
        assert!(fail_job(&actions).is_none());
        assert_eq!(co.next_deadline(), None);
        assert_eq!(co.poll(t0 + ms(10_000)), []);
        assert_eq!(
            co.set_running(false, t0 + ms(10_000)),
            [],
            "repeating the status is a no-op"
        );
        // Late acknowledgements of the aborted checkpoint are handed back.
        let late = co
            .acknowledge(c(1), sink(), ack(c(1), &sink()), t0 + ms(200))
            .unwrap_err();
        assert_eq!(
            late.reason,
            Ignored::Aborted {
                id: c(1),
                kind: CHK
            }
        );
        assert!(late.should_discard_state());
    }

    #[test]
    fn scheduler_resumes_one_interval_after_the_job_runs_again() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        co.poll(t0 + ms(100));
        co.set_running(false, t0 + ms(150));
        assert_eq!(co.set_running(true, t0 + ms(5000)), []);
        assert_eq!(co.next_deadline(), Some(t0 + ms(5100)));
        assert_eq!(co.poll(t0 + ms(5100)), [trigger(2)]);
    }

    #[test]
    fn fully_acknowledged_checkpoint_still_completes_after_the_job_stopped() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        co.poll(t0 + ms(100));
        ack_all(&mut co, c(1), t0 + ms(120));
        assert_eq!(co.set_running(false, t0 + ms(130)), []);
        let actions = co.finalized(c(1), Ok(()), t0 + ms(140)).unwrap();
        assert_eq!(actions, [notify(1)]);
        assert_eq!(co.latest_completed(), Some(c(1)));
    }

    // ----- timeout, decline, failures ----------------------------------------

    #[test]
    fn timeout_aborts_the_pending_checkpoint_and_counts_as_a_failure() {
        let t0 = Instant::now();
        let mut config = config();
        config.tolerable_failures = 5;
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        co.acknowledge(c(1), src(0), ack(c(1), &src(0)), t0 + ms(110))
            .unwrap();
        assert_eq!(co.next_deadline(), Some(t0 + ms(1100)));
        assert_eq!(co.poll(t0 + ms(1099)), []);
        let actions = co.poll(t0 + ms(1100));
        assert_eq!(actions, [abort(1, expired()), trigger(2)]);
        assert_eq!(co.consecutive_failures(), 1);
        let record = co.stats().get(c(1)).unwrap();
        assert_eq!(
            record.status,
            CheckpointStatus::Failed { reason: expired() }
        );
        assert_eq!(record.acknowledged(), 1);
    }

    #[test]
    fn decline_aborts_the_checkpoint_and_counts_as_a_failure() {
        let t0 = Instant::now();
        let mut config = config();
        config.tolerable_failures = 5;
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        let actions = co.decline(c(1), sink(), "disk full", t0 + ms(120)).unwrap();
        let reason = AbortReason::Declined {
            task: sink(),
            reason: "disk full".into(),
        };
        assert_eq!(actions, [abort(1, reason)]);
        assert_eq!(co.consecutive_failures(), 1);
        assert_eq!(co.in_flight(), 0);
        assert_eq!(co.next_deadline(), Some(t0 + ms(200)));
        // A second decline, or one for an unknown checkpoint, is ignored.
        assert_eq!(
            co.decline(c(1), sink(), "again", t0).unwrap_err(),
            Ignored::Aborted {
                id: c(1),
                kind: CHK
            }
        );
        assert_eq!(
            co.decline(c(9), sink(), "?", t0).unwrap_err(),
            Ignored::UnknownCheckpoint { id: c(9) }
        );
    }

    #[test]
    fn decline_from_outside_the_ack_set_or_after_all_acks_is_ignored() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        co.poll(t0 + ms(100));
        let stranger = TaskId::new("stranger", 0);
        assert_eq!(
            co.decline(c(1), stranger.clone(), "?", t0).unwrap_err(),
            Ignored::UnknownTask {
                id: c(1),
                task: stranger
            }
        );
        ack_all(&mut co, c(1), t0 + ms(110));
        assert_eq!(
            co.decline(c(1), sink(), "late", t0).unwrap_err(),
            Ignored::Complete { id: c(1) }
        );
    }

    #[test]
    fn failed_metadata_write_aborts_and_counts_as_a_failure() {
        let t0 = Instant::now();
        let mut config = config();
        config.tolerable_failures = 1;
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        ack_all(&mut co, c(1), t0 + ms(110));
        let actions = co.finalized(c(1), Err("no space left on device".into()), t0 + ms(120));
        let reason = AbortReason::FinalizeFailed {
            message: "no space left on device".into(),
        };
        assert_eq!(actions.unwrap(), [abort(1, reason)]);
        assert_eq!(co.consecutive_failures(), 1);
        assert_eq!(co.latest_completed(), None);
    }

    #[test]
    fn job_fails_at_one_more_consecutive_failure_than_tolerated() {
        let t0 = Instant::now();
        let mut config = config();
        config.tolerable_failures = 2;
        let mut co = running(config, t0);
        for (i, id) in [1u64, 2].into_iter().enumerate() {
            let at = t0 + ms(100 * (i as u64 + 1));
            assert_eq!(triggers(&co.poll(at)), [id]);
            let actions = co.decline(c(id), sink(), "no", at).unwrap();
            assert!(fail_job(&actions).is_none(), "failure {id} is tolerated");
        }
        assert_eq!(co.consecutive_failures(), 2);
        co.poll(t0 + ms(300));
        let actions = co.decline(c(3), sink(), "no", t0 + ms(300)).unwrap();
        let reason = fail_job(&actions).expect("the third failure fails the job");
        assert_eq!(reason.consecutive, 3);
        assert_eq!(reason.tolerable, 2);
        assert_eq!(reason.last, c(3));
        assert!(
            reason
                .to_string()
                .contains("checkpoint 3 declined by task sink#0: no"),
            "{reason}"
        );
        // The scheduler stopped with the job; the count starts afresh.
        assert!(!co.is_running());
        assert_eq!(co.consecutive_failures(), 0);
        assert_eq!(co.poll(t0 + ms(10_000)), []);
        co.set_running(true, t0 + ms(20_000));
        assert_eq!(co.poll(t0 + ms(20_100)), [trigger(4)]);
    }

    #[test]
    fn too_many_failures_names_the_count_in_words_that_agree() {
        let reason = |consecutive| TooManyFailures {
            consecutive,
            tolerable: consecutive - 1,
            last: c(4),
            last_reason: AbortReason::FinalizeFailed {
                message: "cannot write x: No space left on device (os error 28)".into(),
            },
        };
        assert_eq!(
            reason(1).to_string(),
            "1 checkpoint failure in a row exceeds the 0 tolerated (the last: checkpoint 4 \
             could not be recorded: cannot write x: No space left on device (os error 28)); \
             raise the tolerable failures of the job's checkpoint settings to tolerate more"
        );
        assert!(
            reason(3)
                .to_string()
                .starts_with("3 checkpoint failures in a row exceed the 2 tolerated"),
            "{}",
            reason(3)
        );
    }

    #[test]
    fn zero_tolerable_failures_fails_the_job_at_the_first_and_aborts_the_rest() {
        let t0 = Instant::now();
        let mut config = config();
        config.max_concurrent = 2;
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        co.poll(t0 + ms(200));
        let actions = co.poll(t0 + ms(1100));
        assert_eq!(actions[0], abort(1, expired()));
        assert!(matches!(actions[1], Action::FailJob { .. }));
        assert_eq!(actions[2], abort(2, AbortReason::JobNotRunning));
        assert_eq!(actions.len(), 3);
    }

    #[test]
    fn a_completed_checkpoint_resets_the_failure_count() {
        let t0 = Instant::now();
        let mut config = config();
        config.tolerable_failures = 2;
        let mut co = running(config, t0);
        let outcomes = ["fail", "fail", "ok", "fail", "fail", "ok", "fail", "fail"];
        for (next, outcome) in (1..).zip(outcomes) {
            let now = t0 + ms(100 * next);
            assert_eq!(co.poll(now), [trigger(next)]);
            let actions = match outcome {
                "ok" => complete(&mut co, c(next), now),
                _ => co.decline(c(next), sink(), "no", now).unwrap(),
            };
            assert!(fail_job(&actions).is_none(), "{outcome} at {next}");
        }
        assert_eq!(co.consecutive_failures(), 2);
    }

    #[test]
    fn savepoint_failures_neither_count_nor_reset() {
        let t0 = Instant::now();
        let mut config = config();
        config.tolerable_failures = 1;
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        co.decline(c(1), sink(), "no", t0 + ms(100)).unwrap();
        let (id, _) = co.trigger_savepoint(t0 + ms(110)).unwrap();
        let actions = co.decline(id, sink(), "no", t0 + ms(120)).unwrap();
        assert_eq!(
            actions,
            [Action::Abort {
                id,
                kind: SAVE,
                is_final: false,
                reason: AbortReason::Declined {
                    task: sink(),
                    reason: "no".into()
                }
            }]
        );
        assert_eq!(co.consecutive_failures(), 1);
        // A late acknowledgement names the kind, so the shell finds its state.
        let late = co
            .acknowledge(id, src(0), ack(id, &src(0)), t0 + ms(125))
            .unwrap_err();
        assert_eq!(late.reason, Ignored::Aborted { id, kind: SAVE });
        assert!(late.should_discard_state());
        let (id, _) = co.trigger_savepoint(t0 + ms(130)).unwrap();
        complete(&mut co, id, t0 + ms(140));
        assert_eq!(
            co.consecutive_failures(),
            1,
            "a savepoint does not reset the count"
        );
    }

    // ----- completion, pruning, subsumption ----------------------------------

    #[test]
    fn completion_notifies_every_task_and_records_statistics() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        co.poll(t0 + ms(100));
        let mut actions = Vec::new();
        for (i, task) in all_tasks().into_iter().enumerate() {
            let at = t0 + ms(110 + 10 * i as u64);
            actions.extend(
                co.acknowledge(c(1), task.clone(), ack(c(1), &task), at)
                    .unwrap(),
            );
        }
        let [
            Action::Finalize {
                id,
                kind,
                is_final,
                triggered_at,
                acks,
            },
        ] = &actions[..]
        else {
            panic!("{actions:?}");
        };
        assert_eq!(
            (*id, *kind, *is_final, *triggered_at),
            (c(1), CHK, false, t0 + ms(100))
        );
        assert_eq!(acks.keys().cloned().collect::<Vec<_>>(), {
            let mut tasks = all_tasks();
            tasks.sort();
            tasks
        });
        assert_eq!(acks[&sink()].handle, "chk-1/sink#0");
        assert_eq!(
            co.finalized(c(1), Ok(()), t0 + ms(180)).unwrap(),
            [notify(1)]
        );
        let record = co.stats().latest_completed().unwrap();
        assert_eq!(record.duration(), Some(ms(80)));
        assert_eq!(record.bytes(), 400);
        assert_eq!(record.tasks[&sink()].async_duration, ms(5));
        assert_eq!(co.stats().counts().completed, 1);
    }

    #[test]
    fn completed_checkpoints_beyond_the_retained_count_are_pruned_but_never_savepoints() {
        let t0 = Instant::now();
        let mut config = config();
        config.retained = 2;
        let mut co = running(config, t0);
        let mut pruned = Vec::new();
        let mut now = t0;
        for round in 0..4 {
            now += ms(100);
            let id = triggers(&co.poll(now))[0];
            pruned.push(
                complete(&mut co, c(id), now)
                    .into_iter()
                    .filter_map(|a| match a {
                        Action::Prune { ids } => Some(ids),
                        _ => None,
                    })
                    .collect::<Vec<_>>(),
            );
            if round == 1 {
                let (sp, _) = co.trigger_savepoint(now).unwrap();
                let actions = complete(&mut co, sp, now);
                assert!(!actions.iter().any(|a| matches!(a, Action::Prune { .. })));
            }
        }
        // Checkpoints 1, 2, (savepoint 3), 4, 5.
        assert_eq!(pruned, [vec![], vec![], vec![vec![c(1)]], vec![vec![c(2)]]]);
        assert_eq!(co.retained().collect::<Vec<_>>(), [c(4), c(5)]);
    }

    #[test]
    fn checkpoints_handed_over_from_a_restore_are_pruned_by_the_same_rule() {
        let t0 = Instant::now();
        let mut config = config();
        config.retained = 2;
        let mut co = Co::new(config, all_tasks(), [src(0), src(1)], c(8))
            .unwrap()
            .with_retained_checkpoints([c(5), c(6), c(7)].map(|id| (id, BTreeSet::new())));
        assert_eq!(co.latest_completed(), Some(c(7)));
        co.set_running(true, t0);
        co.poll(t0 + ms(100));
        let actions = complete(&mut co, c(8), t0 + ms(110));
        assert!(
            actions.contains(&Action::Prune {
                ids: vec![c(6), c(5)]
            }),
            "{actions:?}"
        );
        assert_eq!(co.retained().collect::<Vec<_>>(), [c(7), c(8)]);
    }

    /// Every task acknowledges `id` at `now`, `count#0` with a state that
    /// builds on `chain`; then the metadata is written if all went in.
    fn complete_chained(co: &mut Co, id: CheckpointId, chain: &[u64], now: Instant) -> Actions {
        let mut actions = Vec::new();
        for task in all_tasks() {
            let mut ack = ack(id, &task);
            if task == TaskId::new("count", 0) {
                ack.chain = chain.iter().copied().map(c).collect();
            }
            actions.extend(co.acknowledge(id, task.clone(), ack, now).unwrap());
        }
        if actions
            .iter()
            .any(|a| matches!(a, Action::Finalize { id: f, .. } if *f == id))
        {
            actions.extend(co.finalized(id, Ok(()), now).unwrap());
        }
        actions
    }

    fn pruned(actions: &[Action<String>]) -> Vec<u64> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Prune { ids } => Some(ids.iter().map(|id| id.0)),
                _ => None,
            })
            .flatten()
            .collect()
    }

    #[test]
    fn pruning_keeps_the_image_chains_of_retained_checkpoints_until_a_full_image() {
        // retained = 1, a full image every 4: 1 full, 2..4 deltas, 5 full, 6 delta.
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        let chains: [&[u64]; 6] = [&[], &[1], &[1, 2], &[1, 2, 3], &[], &[5]];
        let mut pruned_at = Vec::new();
        for (i, chain) in chains.iter().enumerate() {
            let at = t0 + ms(100 * (i as u64 + 1));
            co.poll(at);
            pruned_at.push(pruned(&complete_chained(
                &mut co,
                c(i as u64 + 1),
                chain,
                at,
            )));
        }
        let none = Vec::<u64>::new();
        assert_eq!(
            pruned_at,
            [
                none.clone(),
                none.clone(),
                none.clone(),
                none.clone(),
                vec![4, 3, 2, 1],
                none
            ]
        );
        assert_eq!(co.retained().collect::<Vec<_>>(), [c(5), c(6)]);
    }

    #[test]
    fn a_checkpoint_whose_chain_needs_an_aborted_one_is_aborted_without_counting() {
        let t0 = Instant::now();
        let mut config = config();
        config.tolerable_failures = 1;
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        complete(&mut co, c(1), t0 + ms(100));
        co.poll(t0 + ms(200));
        let declined = co.decline(c(2), src(0), "disk full", t0 + ms(210)).unwrap();
        assert!(declined.contains(&abort(
            2,
            AbortReason::Declined {
                task: src(0),
                reason: "disk full".into()
            }
        )));
        assert_eq!(co.consecutive_failures(), 1);
        // count#0 took its image of 3 before it heard of the abort of 2.
        co.poll(t0 + ms(300));
        let actions = complete_chained(&mut co, c(3), &[1, 2], t0 + ms(310));
        let reason = AbortReason::BrokenChain {
            task: TaskId::new("count", 0),
            link: c(2),
        };
        assert!(actions.contains(&abort(3, reason.clone())), "{actions:?}");
        assert!(!reason.counts_as_failure());
        assert_eq!(co.consecutive_failures(), 1, "not counted");
        assert!(
            reason.to_string().contains("builds on checkpoint 2"),
            "{reason}"
        );
        assert_eq!(co.retained().collect::<Vec<_>>(), [c(1)]);
        // A chain through the completed checkpoint 1 completes.
        co.poll(t0 + ms(400));
        let actions = complete_chained(&mut co, c(4), &[1], t0 + ms(410));
        assert!(actions.contains(&notify(4)), "{actions:?}");
        assert_eq!(co.retained().collect::<Vec<_>>(), [c(1), c(4)]);
    }

    #[test]
    fn chains_handed_over_from_a_restore_keep_their_links() {
        let t0 = Instant::now();
        let mut co = Co::new(config(), all_tasks(), [src(0), src(1)], c(8))
            .unwrap()
            .with_retained_checkpoints([
                (c(5), BTreeSet::new()),
                (c(6), BTreeSet::from([c(5)])),
                (c(7), BTreeSet::from([c(5), c(6)])),
            ]);
        co.set_running(true, t0);
        co.poll(t0 + ms(100));
        let actions = complete_chained(&mut co, c(8), &[5, 6, 7], t0 + ms(110));
        assert_eq!(pruned(&actions), Vec::<u64>::new());
        co.poll(t0 + ms(200));
        let actions = complete_chained(&mut co, c(9), &[], t0 + ms(210));
        assert_eq!(pruned(&actions), [8, 7, 6, 5]);
    }

    #[test]
    fn completing_a_checkpoint_subsumes_older_pending_checkpoints_without_counting() {
        let t0 = Instant::now();
        let mut config = config();
        config.max_concurrent = 3;
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        let (savepoint, _) = co.trigger_savepoint(t0 + ms(150)).unwrap();
        co.poll(t0 + ms(200));
        assert_eq!(co.in_flight(), 3);
        let actions = complete(&mut co, c(3), t0 + ms(250));
        assert!(
            actions.contains(&abort(1, AbortReason::Subsumed { by: c(3) })),
            "{actions:?}"
        );
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::Abort { id, .. } if *id == savepoint)),
            "savepoints are never subsumed"
        );
        assert_eq!(co.consecutive_failures(), 0);
        assert_eq!(
            co.pending().map(|p| p.id()).collect::<Vec<_>>(),
            [savepoint]
        );
        // A late acknowledgement of the subsumed checkpoint is handed back.
        let late = co
            .acknowledge(c(1), src(0), ack(c(1), &src(0)), t0 + ms(260))
            .unwrap_err();
        assert_eq!(
            late.reason,
            Ignored::Aborted {
                id: c(1),
                kind: CHK
            }
        );
        assert!(late.should_discard_state());
    }

    #[test]
    fn an_older_checkpoint_finalized_after_a_newer_one_is_retained_but_not_notified() {
        let t0 = Instant::now();
        let mut config = config();
        config.max_concurrent = 2;
        config.retained = 3;
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        co.poll(t0 + ms(200));
        ack_all(&mut co, c(1), t0 + ms(210)); // 1 is finalizing: not subsumed
        let actions = complete(&mut co, c(2), t0 + ms(220));
        assert!(
            !actions.iter().any(|a| matches!(a, Action::Abort { .. })),
            "{actions:?}"
        );
        assert!(actions.contains(&notify(2)));
        let actions = co.finalized(c(1), Ok(()), t0 + ms(230)).unwrap();
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::NotifyComplete { .. }))
        );
        assert_eq!(co.retained().collect::<Vec<_>>(), [c(1), c(2)]);
        assert_eq!(co.latest_completed(), Some(c(2)));
    }

    #[test]
    fn a_failure_older_than_the_latest_completed_checkpoint_does_not_count() {
        let t0 = Instant::now();
        let mut config = config();
        config.max_concurrent = 2;
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        co.poll(t0 + ms(200));
        ack_all(&mut co, c(1), t0 + ms(210));
        complete(&mut co, c(2), t0 + ms(220));
        let actions = co.finalized(c(1), Err("io".into()), t0 + ms(230)).unwrap();
        assert!(fail_job(&actions).is_none(), "{actions:?}");
        assert_eq!(co.consecutive_failures(), 0);
    }

    // ----- ignored messages --------------------------------------------------

    #[test]
    fn unknown_duplicate_and_foreign_acknowledgements_are_ignored() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        co.poll(t0 + ms(100));
        let unknown = co
            .acknowledge(c(7), sink(), ack(c(7), &sink()), t0)
            .unwrap_err();
        assert_eq!(unknown.reason, Ignored::UnknownCheckpoint { id: c(7) });
        assert!(!unknown.should_discard_state());
        assert_eq!(
            unknown.ack.handle, "chk-7/sink#0",
            "the acknowledgement is handed back"
        );

        co.acknowledge(c(1), sink(), ack(c(1), &sink()), t0)
            .unwrap();
        let dup = co
            .acknowledge(c(1), sink(), ack(c(1), &sink()), t0)
            .unwrap_err();
        assert_eq!(
            dup.reason,
            Ignored::Duplicate {
                id: c(1),
                task: sink()
            }
        );
        assert!(
            !dup.should_discard_state(),
            "a duplicate may point at the accepted state"
        );

        let stranger = TaskId::new("stranger", 3);
        let foreign = co
            .acknowledge(c(1), stranger.clone(), ack(c(1), &stranger), t0)
            .unwrap_err();
        assert_eq!(
            foreign.reason,
            Ignored::UnknownTask {
                id: c(1),
                task: stranger.clone()
            }
        );

        // After completion: duplicates and strangers are still told apart.
        let rest: Vec<TaskId> = all_tasks().into_iter().filter(|t| *t != sink()).collect();
        for task in rest {
            co.acknowledge(c(1), task.clone(), ack(c(1), &task), t0)
                .unwrap();
        }
        let dup = co
            .acknowledge(c(1), src(0), ack(c(1), &src(0)), t0)
            .unwrap_err();
        assert_eq!(
            dup.reason,
            Ignored::Duplicate {
                id: c(1),
                task: src(0)
            }
        );
        co.finalized(c(1), Ok(()), t0 + ms(150)).unwrap();
        let dup = co
            .acknowledge(c(1), src(0), ack(c(1), &src(0)), t0)
            .unwrap_err();
        assert_eq!(
            dup.reason,
            Ignored::Duplicate {
                id: c(1),
                task: src(0)
            }
        );
        let foreign = co
            .acknowledge(c(1), stranger.clone(), ack(c(1), &stranger), t0)
            .unwrap_err();
        assert_eq!(
            foreign.reason,
            Ignored::UnknownTask {
                id: c(1),
                task: stranger
            }
        );
    }

    #[test]
    fn unexpected_finalize_reports_are_ignored() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        assert_eq!(
            co.finalized(c(1), Ok(()), t0).unwrap_err(),
            Ignored::UnknownCheckpoint { id: c(1) }
        );
        co.poll(t0 + ms(100));
        assert_eq!(
            co.finalized(c(1), Ok(()), t0).unwrap_err(),
            Ignored::AwaitingAcknowledgements { id: c(1) }
        );
        complete(&mut co, c(1), t0 + ms(110));
        assert_eq!(
            co.finalized(c(1), Ok(()), t0).unwrap_err(),
            Ignored::Complete { id: c(1) }
        );
        assert!(!Ignored::Complete { id: c(1) }.to_string().is_empty());
    }

    #[test]
    fn ignored_messages_change_nothing() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        co.poll(t0 + ms(100));
        let deadline = co.next_deadline();
        // Ignored messages carry a `now` past every deadline: still nothing happens.
        let late = t0 + ms(60_000);
        let _ = co.acknowledge(c(9), sink(), ack(c(9), &sink()), late);
        let _ = co.decline(c(9), sink(), "x", late);
        let _ = co.finalized(c(9), Ok(()), late);
        let _ = co.source_finished(sink(), late);
        assert_eq!(co.next_deadline(), deadline);
        assert_eq!(co.in_flight(), 1);
    }

    // ----- final checkpoint ----------------------------------------------------

    #[test]
    fn final_checkpoint_is_triggered_when_every_source_finished_even_without_periodic_checkpoints()
    {
        let t0 = Instant::now();
        let mut config = config();
        config.interval = None;
        let mut co = running(config, t0);
        assert_eq!(co.source_finished(src(0), t0 + ms(10)).unwrap(), []);
        assert_eq!(
            co.source_finished(src(0), t0 + ms(11)).unwrap(),
            [],
            "repeats are harmless"
        );
        assert_eq!(
            co.source_finished(sink(), t0 + ms(12)).unwrap_err(),
            Ignored::UnknownSource { task: sink() }
        );
        let actions = co.source_finished(src(1), t0 + ms(20)).unwrap();
        assert_eq!(
            actions,
            [Action::Trigger {
                id: c(1),
                kind: CHK,
                is_final: true
            }]
        );
        let actions = complete(&mut co, c(1), t0 + ms(30));
        assert!(matches!(
            actions[0],
            Action::Finalize { is_final: true, .. }
        ));
        assert_eq!(
            actions.last(),
            Some(&Action::NotifyComplete {
                id: c(1),
                kind: CHK,
                is_final: true
            })
        );
        assert!(co.is_finished());
        assert_eq!(co.next_deadline(), None);
        assert_eq!(co.poll(t0 + ms(100_000)), []);
        assert_eq!(
            co.trigger_savepoint(t0 + ms(100_000)).unwrap_err(),
            SavepointRefused::Finished { id: c(1) }
        );
    }

    #[test]
    fn final_checkpoint_ignores_interval_min_pause_and_max_concurrent_and_stops_periodic_ones() {
        let t0 = Instant::now();
        let mut config = config();
        config.min_pause = ms(500);
        config.max_concurrent = 1;
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        complete(&mut co, c(1), t0 + ms(110));
        co.poll(t0 + ms(610));
        assert_eq!(co.in_flight(), 1, "checkpoint 2 is pending");
        co.source_finished(src(0), t0 + ms(620)).unwrap();
        let actions = co.source_finished(src(1), t0 + ms(630)).unwrap();
        assert_eq!(
            actions,
            [Action::Trigger {
                id: c(3),
                kind: CHK,
                is_final: true
            }]
        );
        // Checkpoint 2 may still complete; no more periodic checkpoints.
        complete(&mut co, c(2), t0 + ms(640));
        assert_eq!(co.poll(t0 + ms(1000)), []);
        assert_eq!(
            co.next_deadline(),
            Some(t0 + ms(1630)),
            "only the final's timeout"
        );
    }

    fn abort_final(id: u64, reason: AbortReason) -> Action<String> {
        Action::Abort {
            id: c(id),
            kind: CHK,
            is_final: true,
            reason,
        }
    }

    #[test]
    fn failed_final_checkpoint_is_retried_at_once() {
        let t0 = Instant::now();
        let mut config = config();
        config.tolerable_failures = 3;
        let mut co = running(config, t0);
        co.source_finished(src(0), t0).unwrap();
        co.source_finished(src(1), t0).unwrap();
        let actions = co.decline(c(1), sink(), "busy", t0 + ms(10)).unwrap();
        let reason = AbortReason::Declined {
            task: sink(),
            reason: "busy".into(),
        };
        assert_eq!(
            actions,
            [
                abort_final(1, reason),
                Action::Trigger {
                    id: c(2),
                    kind: CHK,
                    is_final: true
                }
            ]
        );
        let actions = co.poll(t0 + ms(1010));
        assert_eq!(
            actions,
            [
                abort_final(2, expired()),
                Action::Trigger {
                    id: c(3),
                    kind: CHK,
                    is_final: true
                }
            ]
        );
        assert_eq!(co.consecutive_failures(), 2);
    }

    #[test]
    fn sources_that_finished_before_a_restart_must_finish_again() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        co.source_finished(src(0), t0).unwrap();
        co.set_running(false, t0 + ms(10));
        co.set_running(true, t0 + ms(20));
        assert_eq!(co.source_finished(src(1), t0 + ms(30)).unwrap(), []);
        assert_eq!(
            co.poll(t0 + ms(120)),
            [trigger(1)],
            "periodic checkpoints go on"
        );
    }

    #[test]
    fn sources_finishing_before_the_job_runs_trigger_the_final_checkpoint_when_it_does() {
        let t0 = Instant::now();
        let mut co = coordinator(config());
        co.source_finished(src(0), t0).unwrap();
        assert_eq!(co.source_finished(src(1), t0).unwrap(), []);
        assert_eq!(
            co.set_running(true, t0 + ms(5)),
            [Action::Trigger {
                id: c(1),
                kind: CHK,
                is_final: true
            }]
        );
    }

    // ----- savepoints ------------------------------------------------------------

    #[test]
    fn savepoint_while_periodic_checkpoints_are_off() {
        let t0 = Instant::now();
        let mut config = config();
        config.interval = None;
        let mut co = coordinator(config);
        assert_eq!(
            co.trigger_savepoint(t0).unwrap_err(),
            SavepointRefused::NotRunning
        );
        co.set_running(true, t0);
        let (id, actions) = co.trigger_savepoint(t0 + ms(5)).unwrap();
        assert_eq!(id, c(1));
        assert_eq!(
            actions,
            [Action::Trigger {
                id,
                kind: SAVE,
                is_final: false
            }]
        );
        let actions = complete(&mut co, id, t0 + ms(50));
        // Not notified (no side effects committed for an intermediate
        // savepoint), not retained, never pruned.
        assert!(
            matches!(actions[..], [Action::Finalize { kind: SAVE, .. }]),
            "{actions:?}"
        );
        assert_eq!(co.retained().count(), 0);
        assert_eq!(co.latest_completed(), None);
        assert_eq!(co.stats().latest_savepoint().unwrap().id, id);
        assert_eq!(co.next_deadline(), None);
    }

    #[test]
    fn savepoint_ignores_max_concurrent_and_min_pause_but_blocks_periodic_checkpoints() {
        let t0 = Instant::now();
        let mut config = config();
        config.min_pause = ms(1000);
        let mut co = running(config, t0);
        co.poll(t0 + ms(100));
        let (sp, _) = co.trigger_savepoint(t0 + ms(110)).unwrap();
        assert_eq!(sp, c(2));
        assert_eq!(co.in_flight(), 2);
        complete(&mut co, c(1), t0 + ms(120));
        let (sp2, _) = co.trigger_savepoint(t0 + ms(130)).unwrap();
        assert_eq!(sp2, c(3), "min pause does not apply to savepoints");
        complete(&mut co, sp, t0 + ms(140));
        complete(&mut co, sp2, t0 + ms(150));
        // The savepoint's completion counts for min pause: 150 + 1000.
        assert_eq!(co.next_deadline(), Some(t0 + ms(1150)));
    }

    #[test]
    fn stop_with_savepoint_is_notified_as_final_and_pauses_periodic_checkpoints() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        let (id, actions) = co.stop_with_savepoint(t0 + ms(50)).unwrap();
        assert_eq!(
            actions,
            [Action::Trigger {
                id,
                kind: SAVE,
                is_final: true
            }]
        );
        assert_eq!(
            co.trigger_savepoint(t0 + ms(60)).unwrap_err(),
            SavepointRefused::Finishing { id }
        );
        assert_eq!(
            co.poll(t0 + ms(500)),
            [],
            "no periodic checkpoint while stopping"
        );
        let actions = complete(&mut co, id, t0 + ms(600));
        assert_eq!(
            actions.last(),
            Some(&Action::NotifyComplete {
                id,
                kind: SAVE,
                is_final: true
            })
        );
        assert!(co.is_finished());
    }

    #[test]
    fn failed_stop_with_savepoint_lets_the_job_go_on() {
        let t0 = Instant::now();
        let mut co = running(config(), t0);
        let (id, _) = co.stop_with_savepoint(t0 + ms(50)).unwrap();
        let actions = co.decline(id, sink(), "no", t0 + ms(60)).unwrap();
        assert!(matches!(
            actions[..],
            [Action::Abort {
                kind: SAVE,
                is_final: true,
                ..
            }]
        ));
        assert!(!co.is_finished());
        assert_eq!(co.consecutive_failures(), 0);
        assert_eq!(co.poll(t0 + ms(100)), [trigger(2)]);
    }

    // ----- next_deadline ---------------------------------------------------------

    #[test]
    fn next_deadline_is_the_earliest_of_timeout_and_next_trigger() {
        let t0 = Instant::now();
        let mut config = config();
        config.max_concurrent = 3;
        config.timeout = ms(150);
        config.tolerable_failures = 10;
        let mut co = running(config, t0);
        assert_eq!(co.next_deadline(), Some(t0 + ms(100)));
        co.poll(t0 + ms(100));
        // Next trigger at 200, timeout of 1 at 250.
        assert_eq!(co.next_deadline(), Some(t0 + ms(200)));
        co.poll(t0 + ms(200));
        // Timeout of 1 at 250, next trigger at 300.
        assert_eq!(co.next_deadline(), Some(t0 + ms(250)));
        let actions = co.poll(t0 + ms(250));
        assert_eq!(
            actions,
            [abort(1, AbortReason::Expired { timeout: ms(150) })]
        );
        assert_eq!(co.next_deadline(), Some(t0 + ms(300)));
        co.set_running(false, t0 + ms(260));
        assert_eq!(co.next_deadline(), None);
    }

    /// One step of a random run.
    #[derive(Debug, Clone)]
    enum Step {
        Wait(u64),
        Poll,
        AckAll(usize),
        AckOne(usize, usize),
        Decline(usize),
        Finalize(usize, bool),
        Running(bool),
        Savepoint,
        SourceFinished(u32),
    }

    fn step_strategy() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (1u64..300).prop_map(Step::Wait),
            3 => Just(Step::Poll),
            3 => any::<usize>().prop_map(Step::AckAll),
            2 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::AckOne(a, b)),
            1 => any::<usize>().prop_map(Step::Decline),
            3 => (any::<usize>(), prop::bool::weighted(0.9)).prop_map(|(a, b)| Step::Finalize(a, b)),
            1 => any::<bool>().prop_map(Step::Running),
            1 => Just(Step::Savepoint),
            1 => (0u32..2).prop_map(Step::SourceFinished),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever happens, after every call nothing is overdue (so sleeping
        /// until `next_deadline` misses nothing), periodic triggers respect
        /// interval, min pause and max concurrent, ids only grow, and pruning
        /// keeps `retained` checkpoints.
        #[test]
        fn random_runs_keep_the_scheduling_invariants(
            steps in prop::collection::vec(step_strategy(), 1..120),
            min_pause in 0u64..150,
            max_concurrent in 1u32..3,
        ) {
            let t0 = Instant::now();
            let mut config = config();
            config.min_pause = ms(min_pause);
            config.max_concurrent = max_concurrent;
            config.timeout = ms(400);
            config.tolerable_failures = 2;
            config.retained = 2;
            let interval = ms(100);
            let mut co = coordinator(config);
            let mut now = t0;
            let mut last_id = 0u64;
            let mut last_periodic: Option<Instant> = None;
            let mut running_since: Option<Instant> = None;
            let mut last_completion: Option<Instant> = None;
            for step in steps {
                let pick = |co: &Co, i: usize| {
                    let ids: Vec<CheckpointId> = co.pending().map(|p| p.id()).collect();
                    (!ids.is_empty()).then(|| ids[i % ids.len()])
                };
                let was_running = co.is_running();
                // `None`: no call, or the call was ignored (it changes nothing).
                let outcome: Option<Actions> = match step {
                    Step::Wait(n) => {
                        now += ms(n);
                        None
                    }
                    Step::Poll => Some(co.poll(now)),
                    Step::AckAll(i) => pick(&co, i).map(|id| {
                        let awaiting: Vec<TaskId> = co
                            .pending()
                            .find(|p| p.id() == id)
                            .unwrap()
                            .awaiting()
                            .cloned()
                            .collect();
                        let mut actions = Vec::new();
                        for task in awaiting {
                            let ack = ack(id, &task);
                            // An earlier acknowledgement's call may have
                            // expired the checkpoint: then the rest are late.
                            match co.acknowledge(id, task, ack, now) {
                                Ok(more) => actions.extend(more),
                                Err(late) => {
                                    assert!(matches!(late.reason, Ignored::Aborted { id: late_id, .. } if late_id == id));
                                    break;
                                }
                            }
                        }
                        actions
                    }),
                    Step::AckOne(i, t) => pick(&co, i).and_then(|id| {
                        let task = all_tasks()[t % 4].clone();
                        co.acknowledge(id, task.clone(), ack(id, &task), now).ok()
                    }),
                    Step::Decline(i) => {
                        pick(&co, i).map(|id| co.decline(id, sink(), "no", now).unwrap())
                    }
                    Step::Finalize(i, ok) => {
                        let ids: Vec<CheckpointId> = co.finalizing().collect();
                        (!ids.is_empty()).then(|| {
                            let id = ids[i % ids.len()];
                            let result = if ok { Ok(()) } else { Err("io".to_owned()) };
                            co.finalized(id, result, now).unwrap()
                        })
                    }
                    Step::Running(on) => Some(co.set_running(on, now)),
                    Step::Savepoint => co.trigger_savepoint(now).map(|(_, a)| a).ok(),
                    Step::SourceFinished(i) => Some(co.source_finished(src(i), now).unwrap()),
                };
                let called = outcome.is_some();
                let actions = outcome.unwrap_or_default();
                if !was_running && co.is_running() {
                    running_since = Some(now);
                    last_periodic = None;
                }
                if let Some(latest) = co
                    .stats()
                    .history()
                    .filter(|r| r.status == CheckpointStatus::Completed)
                    .filter_map(|r| r.ended_at)
                    .max()
                {
                    last_completion = Some(latest);
                }
                for action in &actions {
                    if let Action::Trigger { id, kind, is_final } = action {
                        prop_assert!(id.0 > last_id, "ids grow: {:?}", actions);
                        last_id = id.0;
                        if *kind == CHK && !*is_final {
                            // Triggers come last in a call: before this one,
                            // fewer than max_concurrent were in flight.
                            prop_assert!(co.in_flight() <= max_concurrent as usize, "{:?}", actions);
                            let base = last_periodic.or(running_since).unwrap();
                            prop_assert!(now >= base + interval);
                            if let Some(done) = last_completion {
                                prop_assert!(now >= done + ms(min_pause));
                            }
                            last_periodic = Some(now);
                        }
                    }
                }
                prop_assert!(co.retained().count() <= 2);
                if called {
                    prop_assert!(
                        co.next_deadline().is_none_or(|d| d > now),
                        "overdue after a call: {:?} <= {:?}",
                        co.next_deadline(),
                        now
                    );
                }
                let counts = co.stats().counts();
                prop_assert_eq!(counts.in_progress as usize, co.in_flight());
            }
        }
    }
}
