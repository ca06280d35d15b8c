//! Live progress of a running job, shared with whoever shows it (the CLI's
//! status line, later a status endpoint). Written by the driver and the tasks,
//! read at any time without stopping anything.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::checkpoint::{CheckpointId, CheckpointKind};
use crate::dataflow::TaskId;
use crate::dataflow::metrics::TaskMetrics;
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
}

/// A cheap-to-clone view of a running job.
#[derive(Debug, Clone)]
pub struct JobMonitor(Arc<Mutex<Inner>>);

impl Default for JobMonitor {
    fn default() -> Self {
        JobMonitor(Arc::new(Mutex::new(Inner {
            status: JobStatus::Created,
            tasks: Vec::new(),
            last_checkpoint: None,
            completed: 0,
            failed: 0,
            recent_failures: VecDeque::new(),
            restarts: 0,
        })))
    }
}

impl JobMonitor {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock leaves plain counters behind: still readable.
        self.0
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
