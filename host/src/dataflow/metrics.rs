//! Counters each task keeps for the status line, the summary and (later) the
//! metrics endpoint. Plain relaxed atomics: written by the task's thread, read
//! by anyone.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one task.
#[derive(Debug, Default)]
pub struct TaskMetrics {
    /// Records taken from inputs (for a source: records read).
    pub records_in: AtomicU64,
    /// Records handed to outputs.
    pub records_out: AtomicU64,
    /// Nanoseconds spent blocked on full output channels (back-pressure).
    pub backpressured_nanos: AtomicU64,
    /// Nanoseconds spent inside guest calls or connector work.
    pub busy_nanos: AtomicU64,
}

impl TaskMetrics {
    /// Counts records taken in.
    pub fn add_records_in(&self, n: u64) {
        self.records_in.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts records sent out.
    pub fn add_records_out(&self, n: u64) {
        self.records_out.fetch_add(n, Ordering::Relaxed);
    }

    /// Records taken in so far.
    pub fn records_in(&self) -> u64 {
        self.records_in.load(Ordering::Relaxed)
    }

    /// Records sent out so far.
    pub fn records_out(&self) -> u64 {
        self.records_out.load(Ordering::Relaxed)
    }
}
