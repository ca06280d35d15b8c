//! Counters each task keeps for the status line, the summary and the control
//! endpoint's `/metrics`. Plain relaxed atomics: written by the task's thread,
//! read by anyone. A connector may add figures of its own
//! ([`connector`](TaskMetrics::connector)), which the task loop never looks at.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::connector_metrics::ConnectorFigures;

/// Live counters of one task.
#[derive(Debug, Default)]
pub struct TaskMetrics {
    /// Records taken from inputs (for a source: records read).
    pub records_in: AtomicU64,
    /// Records handed to outputs.
    pub records_out: AtomicU64,
    /// Nanoseconds spent blocked on full output channels (back-pressure).
    pub backpressured_nanos: AtomicU64,
    /// Nanoseconds spent handling input: guest calls or connector work, and
    /// routing the output (so back-pressure met while routing counts too).
    pub busy_nanos: AtomicU64,
    /// Calls into the task's wasm guest (process, finish, snapshot, restore,
    /// checkpoint complete); zero for sources and sinks.
    pub guest_calls: AtomicU64,
    /// Nanoseconds spent inside those calls, and nothing else: what the
    /// operator's own code costs.
    pub guest_nanos: AtomicU64,
    /// Input a source read but could not turn into a record and dropped (a file source's
    /// malformed lines under `on_error = "skip"`); zero for other tasks.
    pub records_skipped: AtomicU64,
    /// The task's watermark (`docs/ABI.md` §15): `i64::MIN` until the first.
    pub watermark: WatermarkGauge,
    /// Records that arrived at or before the task's watermark: late (`docs/ABI.md` §15).
    pub records_late: AtomicU64,
    /// Records the task's guest emitted on a side output nothing reads, dropped.
    pub records_unwired: AtomicU64,
    /// Timers the task's guest has set and that have not fired, over both domains.
    pub pending_timers: AtomicU64,
    /// What the task's connector reports of itself (a Kafka source's partitions, a Kafka
    /// sink's transactions), set once when it is built; empty for other tasks.
    connector: OnceLock<Arc<dyn ConnectorFigures>>,
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

    /// Counts records a source dropped as malformed.
    pub fn add_records_skipped(&self, n: u64) {
        self.records_skipped.fetch_add(n, Ordering::Relaxed);
    }

    /// Records dropped as malformed so far.
    pub fn records_skipped(&self) -> u64 {
        self.records_skipped.load(Ordering::Relaxed)
    }

    /// Counts one guest call that took `elapsed`.
    pub fn add_guest_call(&self, elapsed: Duration) {
        self.guest_calls.fetch_add(1, Ordering::Relaxed);
        self.guest_nanos
            .fetch_add(nanos(elapsed), Ordering::Relaxed);
    }

    /// Counts `elapsed` as busy time.
    pub fn add_busy(&self, elapsed: Duration) {
        self.busy_nanos.fetch_add(nanos(elapsed), Ordering::Relaxed);
    }

    /// Records taken in so far.
    pub fn records_in(&self) -> u64 {
        self.records_in.load(Ordering::Relaxed)
    }

    /// Records sent out so far.
    pub fn records_out(&self) -> u64 {
        self.records_out.load(Ordering::Relaxed)
    }

    /// Nanoseconds busy so far (see [`busy_nanos`](Self::busy_nanos)).
    pub fn busy_nanos(&self) -> u64 {
        self.busy_nanos.load(Ordering::Relaxed)
    }

    /// Nanoseconds blocked on full output channels so far.
    pub fn backpressured_nanos(&self) -> u64 {
        self.backpressured_nanos.load(Ordering::Relaxed)
    }

    /// Installs the figures the task's connector keeps of itself; a second call is ignored
    /// (a task has one connector).
    pub fn set_connector(&self, figures: Arc<dyn ConnectorFigures>) {
        let _ = self.connector.set(figures);
    }

    /// The figures the task's connector keeps of itself, if it keeps any.
    pub fn connector(&self) -> Option<&Arc<dyn ConnectorFigures>> {
        self.connector.get()
    }

    /// Counts records that arrived late.
    pub fn add_records_late(&self, n: u64) {
        self.records_late.fetch_add(n, Ordering::Relaxed);
    }

    /// Late records so far.
    pub fn records_late(&self) -> u64 {
        self.records_late.load(Ordering::Relaxed)
    }

    /// Counts records dropped for want of an edge reading their side output.
    pub fn add_records_unwired(&self, n: u64) {
        self.records_unwired.fetch_add(n, Ordering::Relaxed);
    }

    /// Records dropped from unwired side outputs so far.
    pub fn records_unwired(&self) -> u64 {
        self.records_unwired.load(Ordering::Relaxed)
    }

    /// Sets how many timers are pending.
    pub fn set_pending_timers(&self, n: usize) {
        self.pending_timers.store(n as u64, Ordering::Relaxed);
    }

    /// Timers pending, as last set.
    pub fn pending_timers(&self) -> u64 {
        self.pending_timers.load(Ordering::Relaxed)
    }

    /// Guest calls so far.
    pub fn guest_calls(&self) -> u64 {
        self.guest_calls.load(Ordering::Relaxed)
    }

    /// Nanoseconds inside guest calls so far.
    pub fn guest_nanos(&self) -> u64 {
        self.guest_nanos.load(Ordering::Relaxed)
    }
}

/// A watermark that can be read from any thread: `i64::MIN` (none yet) by default.
#[derive(Debug)]
pub struct WatermarkGauge(AtomicI64);

impl Default for WatermarkGauge {
    fn default() -> Self {
        WatermarkGauge(AtomicI64::new(i64::MIN))
    }
}

impl WatermarkGauge {
    /// The watermark: `None` before the first.
    pub fn get(&self) -> Option<i64> {
        Some(self.0.load(Ordering::Relaxed)).filter(|&w| w != i64::MIN)
    }

    /// Sets the watermark.
    pub fn set(&self, watermark: i64) {
        self.0.store(watermark, Ordering::Relaxed);
    }
}

/// Whole nanoseconds of `d`, saturating (585 years do not fit in a u64).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
