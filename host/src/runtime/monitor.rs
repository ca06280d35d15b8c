//! Live progress of a running job, shared with whoever shows it (the CLI's
//! status line, later a status endpoint). Written by the driver and the tasks,
//! read at any time without stopping anything.

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

    pub(crate) fn checkpoint_failed(&self) {
        self.lock().failed += 1;
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

    /// Restarts after failures so far.
    pub fn restarts(&self) -> u32 {
        self.lock().restarts
    }
}
