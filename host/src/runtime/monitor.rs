//! Live progress of a running job, shared with whoever shows it (the CLI's
//! status line, the control endpoint). Written by the driver and the tasks,
//! read at any time without stopping anything.
//!
//! The job's one [`CheckpointStats`] lives here, not in the coordinator
//! (`checkpoint/coordinator.rs`): a coordinator
//! lives for one attempt, and a job that restarted must still show the
//! checkpoints of the attempts before. The driver feeds it from the facts and
//! actions it handles anyway (a trigger, an accepted acknowledgement, a
//! recorded completion, an abort), so the history spans the whole run of the
//! job in this process, and the last checkpoint, the recent failures and the
//! duration histogram are read from it rather than kept beside it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

pub use crate::checkpoint::stats::CheckpointFailure;
use crate::checkpoint::stats::{CheckpointRecord, CheckpointStats, DurationHistogram};
use crate::dataflow::metrics::TaskMetrics;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::job::JobStatus;

/// The last completed checkpoint, as the status line shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointSummary {
    /// Its id.
    pub id: CheckpointId,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// Trigger to completion.
    pub duration: Duration,
    /// Total state bytes.
    pub bytes: u64,
}

impl CheckpointSummary {
    fn of(record: &CheckpointRecord) -> Self {
        CheckpointSummary {
            id: record.id,
            kind: record.kind,
            duration: record.duration().unwrap_or_default(),
            bytes: record.bytes(),
        }
    }
}

/// The checkpoint or savepoint a job was restored from when it started or
/// restarted (Flink's `latest.restored`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoredCheckpoint {
    /// Its id.
    pub id: CheckpointId,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// Its directory.
    pub path: PathBuf,
    /// When the restore began.
    pub restored_at: SystemTime,
    /// The vertices it restored at another parallelism than the checkpoint's (an operator's
    /// state split and merged by key group, docs/ABI.md §16): name, old and new parallelism.
    pub rescaled: Vec<(String, u32, u32)>,
}

/// The checkpoint statistics of the whole run, across attempts.
#[derive(Debug, Default)]
struct History {
    stats: CheckpointStats,
    restored: Option<RestoredCheckpoint>,
}

/// What a task is, for adding up its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskRole {
    /// Reads records into the job.
    Source,
    /// Runs a wasm operator.
    Operator,
    /// Writes records out of the job.
    Sink,
}

#[derive(Debug)]
struct Inner {
    status: JobStatus,
    tasks: Vec<(TaskId, TaskRole, Arc<TaskMetrics>)>,
    restarts: u32,
    /// Attempts that ended in a failure (the last one included, if the job failed).
    failures: u32,
    /// When the job started running (`JobRunner::run`).
    started: Option<SystemTime>,
}

/// A cheap-to-clone view of a running job.
#[derive(Debug, Clone)]
pub struct JobMonitor {
    inner: Arc<Mutex<Inner>>,
    /// Apart from `inner`: the status line reads `inner` often, the control
    /// endpoint reads this, and the driver writes it at every trigger,
    /// acknowledgement, completion and abort.
    history: Arc<Mutex<History>>,
}

impl Default for JobMonitor {
    fn default() -> Self {
        JobMonitor {
            inner: Arc::new(Mutex::new(Inner {
                status: JobStatus::Created,
                tasks: Vec::new(),
                restarts: 0,
                failures: 0,
                started: None,
            })),
            history: Arc::new(Mutex::new(History::default())),
        }
    }
}

impl JobMonitor {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock leaves plain counters behind: still readable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn history(&self) -> MutexGuard<'_, History> {
        self.history
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The job's status.
    pub fn status(&self) -> JobStatus {
        self.lock().status
    }

    pub(crate) fn set_status(&self, status: JobStatus) {
        self.lock().status = status;
    }

    pub(crate) fn set_tasks(&self, tasks: Vec<(TaskId, TaskRole, Arc<TaskMetrics>)>) {
        self.lock().tasks = tasks;
    }

    pub(crate) fn restarted(&self) {
        self.lock().restarts += 1;
    }

    pub(crate) fn attempt_failed(&self) {
        self.lock().failures += 1;
    }

    pub(crate) fn set_started(&self, at: SystemTime) {
        self.lock().started = Some(at);
    }

    pub(crate) fn set_restored(&self, restored: RestoredCheckpoint) {
        self.history().restored = Some(restored);
    }

    /// Records a fact about a checkpoint in the statistics of the whole run
    /// (see the module docs): called by the driver, once per fact.
    pub(crate) fn record_checkpoint(&self, record: impl FnOnce(&mut CheckpointStats)) {
        record(&mut self.history().stats);
    }

    /// Reads the checkpoint statistics of the whole run (every attempt) while
    /// the driver waits: keep `read` short.
    pub fn with_checkpoint_stats<R>(&self, read: impl FnOnce(&CheckpointStats) -> R) -> R {
        read(&self.history().stats)
    }

    /// Durations of the checkpoints and savepoints completed so far.
    pub fn checkpoint_durations(&self) -> DurationHistogram {
        self.history().stats.durations().clone()
    }

    /// The checkpoint or savepoint the current attempt was restored from.
    pub fn restored(&self) -> Option<RestoredCheckpoint> {
        self.history().restored.clone()
    }

    /// When the job started running; `None` before [`JobRunner::run`](super::JobRunner::run).
    pub fn started(&self) -> Option<SystemTime> {
        self.lock().started
    }

    /// Attempts that ended in a failure (a task failure, too many checkpoint
    /// failures), restarted or not.
    pub fn failures(&self) -> u32 {
        self.lock().failures
    }

    /// The tasks of the current attempt, each with its role and counters (a
    /// restart replaces them, counters from zero).
    pub fn tasks(&self) -> Vec<(TaskId, TaskRole, Arc<TaskMetrics>)> {
        self.lock().tasks.clone()
    }

    /// Records read by all sources of the current attempt.
    pub fn records_in(&self) -> u64 {
        self.sum(TaskRole::Source, TaskMetrics::records_out)
    }

    /// Records taken in by all sinks of the current attempt.
    pub fn records_out(&self) -> u64 {
        self.sum(TaskRole::Sink, TaskMetrics::records_in)
    }

    fn sum(&self, role: TaskRole, counter: fn(&TaskMetrics) -> u64) -> u64 {
        self.lock()
            .tasks
            .iter()
            .filter(|(_, r, _)| *r == role)
            .map(|(_, _, m)| counter(m))
            .sum()
    }

    /// The last completed checkpoint.
    pub fn last_checkpoint(&self) -> Option<CheckpointSummary> {
        self.history()
            .stats
            .last_completed()
            .map(CheckpointSummary::of)
    }

    /// Completed checkpoints and savepoints so far, and the aborts that
    /// counted as failures ([`CheckpointStats::failures`]).
    pub fn checkpoint_counts(&self) -> (u64, u64) {
        let history = self.history();
        (history.stats.counts().completed, history.stats.failures())
    }

    /// The most recent checkpoint failures (at most
    /// [`RECENT_FAILURES`](crate::checkpoint::stats::RECENT_FAILURES)),
    /// oldest first; [`checkpoint_counts`](Self::checkpoint_counts) counts all.
    pub fn recent_failures(&self) -> Vec<CheckpointFailure> {
        self.history().stats.recent_failures().cloned().collect()
    }

    /// Restarts after failures so far.
    pub fn restarts(&self) -> u32 {
        self.lock().restarts
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::checkpoint::abort::AbortReason;
    use crate::checkpoint::stats::RECENT_FAILURES;

    #[test]
    fn keeps_the_most_recent_failures_and_counts_them_all() {
        let monitor = JobMonitor::default();
        let t0 = Instant::now();
        for id in 1..=40 {
            let id = CheckpointId(id);
            monitor.record_checkpoint(|stats| {
                stats.triggered(id, CheckpointKind::Checkpoint, false, 1, t0);
                let message = format!("failure {id}");
                stats.failed(id, &AbortReason::FinalizeFailed { message }, t0);
            });
        }
        assert_eq!(monitor.checkpoint_counts(), (0, 40));
        let recent = monitor.recent_failures();
        assert_eq!(recent.len(), RECENT_FAILURES);
        assert_eq!(recent[0].id, CheckpointId(40 - RECENT_FAILURES as u64 + 1));
        assert_eq!(
            recent.last().unwrap().reason,
            "could not be recorded: failure 40"
        );
    }
}
