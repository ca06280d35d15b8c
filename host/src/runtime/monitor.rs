//! Live progress of a running job, shared with whoever shows it (the CLI's
//! status line, the control endpoint). Written by the driver and the tasks,
//! read at any time without stopping anything.
//!
//! The checkpoint statistics live here too, and not only in the
//! [`Coordinator`](crate::checkpoint::coordinator::Coordinator): a coordinator
//! lives for one attempt, and a job that restarted must still show the
//! checkpoints of the attempts before. The driver copies each change of the
//! coordinator's records into the monitor's [`CheckpointStats`] as it happens
//! (`JobMonitor::sync_checkpoint`), so the monitor's history spans the
//! whole run of the job in this process.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use crate::checkpoint::stats::{CheckpointRecord, CheckpointStats, CheckpointStatus};
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

/// A checkpoint that failed (declined, expired, or its metadata could not be
/// written), so a status display — or a test — can say why, not only how
/// often.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointFailure {
    /// Its id.
    pub id: CheckpointId,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// Why it failed, naming the task and, for a storage error, the file and
    /// the operating system's message.
    pub reason: String,
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
}

/// Upper bounds, in seconds, of the buckets of [`DurationHistogram`]: from
/// a checkpoint of a small local job (milliseconds) to one near a typical
/// timeout (minutes).
pub const DURATION_BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Trigger-to-completion durations of every checkpoint and savepoint that
/// completed, bucketed as a Prometheus histogram is (cumulative counts).
#[derive(Debug, Clone, PartialEq)]
pub struct DurationHistogram {
    /// `counts[i]`: completions that took at most `DURATION_BUCKETS[i]` seconds.
    pub counts: [u64; DURATION_BUCKETS.len()],
    /// Every completion (the `+Inf` bucket).
    pub count: u64,
    /// The sum of all durations, in seconds.
    pub sum_seconds: f64,
}

impl Default for DurationHistogram {
    fn default() -> Self {
        DurationHistogram {
            counts: [0; DURATION_BUCKETS.len()],
            count: 0,
            sum_seconds: 0.0,
        }
    }
}

impl DurationHistogram {
    /// Counts one duration.
    pub fn observe(&mut self, duration: Duration) {
        let seconds = duration.as_secs_f64();
        for (count, bound) in self.counts.iter_mut().zip(DURATION_BUCKETS) {
            if seconds <= bound {
                *count += 1;
            }
        }
        self.count += 1;
        self.sum_seconds += seconds;
    }
}

/// The checkpoint statistics of the whole run, across attempts.
#[derive(Debug, Default)]
struct History {
    stats: CheckpointStats,
    durations: DurationHistogram,
    restored: Option<RestoredCheckpoint>,
    /// The newest id synced: ids only grow, so an older one missing from
    /// `stats` was evicted, not never seen.
    newest: Option<CheckpointId>,
}

/// How many recent checkpoint failures the monitor keeps.
pub const RECENT_FAILURES: usize = 32;

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
    last_checkpoint: Option<CheckpointSummary>,
    completed: u64,
    failed: u64,
    /// The last [`RECENT_FAILURES`] failures, oldest first.
    recent_failures: VecDeque<CheckpointFailure>,
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
    /// endpoint reads this, and the driver writes it at every acknowledgement.
    history: Arc<Mutex<History>>,
}

impl Default for JobMonitor {
    fn default() -> Self {
        JobMonitor {
            inner: Arc::new(Mutex::new(Inner {
                status: JobStatus::Created,
                tasks: Vec::new(),
                last_checkpoint: None,
                completed: 0,
                failed: 0,
                recent_failures: VecDeque::new(),
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

    pub(crate) fn checkpoint_completed(&self, summary: CheckpointSummary) {
        let mut inner = self.lock();
        inner.completed += 1;
        inner.last_checkpoint = Some(summary);
    }

    pub(crate) fn checkpoint_failed(&self, failure: CheckpointFailure) {
        let mut inner = self.lock();
        inner.failed += 1;
        if inner.recent_failures.len() == RECENT_FAILURES {
            inner.recent_failures.pop_front();
        }
        inner.recent_failures.push_back(failure);
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

    /// Brings the monitor's record of checkpoint `record.id` up to the
    /// coordinator's: adds it if new, adds the acknowledgements it lacks, and
    /// completes or fails it. Called by the driver after each change, so the
    /// monitor keeps the history of every attempt (see the module docs).
    pub(crate) fn sync_checkpoint(&self, record: &CheckpointRecord) {
        let mut guard = self.history();
        let history = &mut *guard;
        let id = record.id;
        if history.stats.get(id).is_none() {
            if history.newest.is_some_and(|newest| newest >= id) {
                // Seen before and since evicted from a full history: nothing to update.
                return;
            }
            history.newest = Some(id);
            history.stats.triggered(
                id,
                record.kind,
                record.is_final,
                record.num_tasks,
                record.triggered_at,
            );
        }
        let Some(mine) = history.stats.get(id) else {
            return;
        };
        let in_progress = mine.status == CheckpointStatus::InProgress;
        let missing: Vec<_> = record
            .tasks
            .iter()
            .filter(|(task, _)| !mine.tasks.contains_key(*task))
            .map(|(task, t)| (task.clone(), *t))
            .collect();
        for (task, t) in missing {
            history.stats.acknowledged(id, task, t);
        }
        if !in_progress {
            return;
        }
        let ended_at = record.ended_at.unwrap_or(record.triggered_at);
        match &record.status {
            CheckpointStatus::InProgress => {}
            CheckpointStatus::Completed => {
                history.stats.completed(id, ended_at);
                history
                    .durations
                    .observe(ended_at.saturating_duration_since(record.triggered_at));
            }
            CheckpointStatus::Failed { reason } => history.stats.failed(id, reason, ended_at),
        }
    }

    /// Reads the checkpoint statistics of the whole run (every attempt) while
    /// the driver waits: keep `read` short.
    pub fn with_checkpoint_stats<R>(&self, read: impl FnOnce(&CheckpointStats) -> R) -> R {
        read(&self.history().stats)
    }

    /// Durations of the checkpoints and savepoints completed so far.
    pub fn checkpoint_durations(&self) -> DurationHistogram {
        self.history().durations.clone()
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
        self.lock().last_checkpoint.clone()
    }

    /// Completed and failed checkpoints so far.
    pub fn checkpoint_counts(&self) -> (u64, u64) {
        let inner = self.lock();
        (inner.completed, inner.failed)
    }

    /// The most recent checkpoint failures (at most [`RECENT_FAILURES`]),
    /// oldest first; [`checkpoint_counts`](Self::checkpoint_counts) counts all.
    pub fn recent_failures(&self) -> Vec<CheckpointFailure> {
        self.lock().recent_failures.iter().cloned().collect()
    }

    /// Restarts after failures so far.
    pub fn restarts(&self) -> u32 {
        self.lock().restarts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_most_recent_failures_and_counts_them_all() {
        let monitor = JobMonitor::default();
        for id in 1..=40 {
            monitor.checkpoint_failed(CheckpointFailure {
                id: CheckpointId(id),
                kind: CheckpointKind::Checkpoint,
                reason: format!("failure {id}"),
            });
        }
        assert_eq!(monitor.checkpoint_counts(), (0, 40));
        let recent = monitor.recent_failures();
        assert_eq!(recent.len(), RECENT_FAILURES);
        assert_eq!(recent[0].id, CheckpointId(40 - RECENT_FAILURES as u64 + 1));
        assert_eq!(recent.last().unwrap().reason, "failure 40");
    }
}
