//! Checkpoint statistics: what happened to every recent checkpoint, how long
//! it took and how big it was, task by task.
//!
//! It exists so that operators of a job can see whether checkpointing keeps
//! up — the status line of `weir run`, the summary at exit, the control
//! endpoint and its metrics — without the coordinator's state machine
//! carrying presentation concerns. The coordinator keeps no statistics: the
//! runtime's driver records in the job's one [`CheckpointStats`] (held by
//! the job monitor, so it outlives each attempt) what the coordinator's
//! actions and the shell's own facts say — a checkpoint triggered,
//! acknowledged by a task, completed, aborted.
//!
//! Like the coordinator it is pure: times are [`Instant`]s handed in by the
//! caller. It shapes no answer of its own: the control endpoint turns these
//! records into its JSON (`control/api.rs`), anchoring the instants to the
//! wall clock there.
//!
//! Memory is bounded: the history keeps the last `history_size` checkpoints
//! (default [`DEFAULT_HISTORY`]), never evicting one still in progress; the
//! counts, the summary and the latest completed / savepoint / failed records
//! are kept beyond the history.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::checkpoint::abort::AbortReason;
use crate::checkpoint::pending::{Acknowledgement, SnapshotCost};
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};

/// How many checkpoints the history keeps unless told otherwise (Flink's
/// default for `web.checkpoints.history` is 10; a local engine can afford more).
pub const DEFAULT_HISTORY: usize = 100;

/// How many recent checkpoint failures the statistics keep.
pub const RECENT_FAILURES: usize = 32;

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

/// Where a checkpoint stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointStatus {
    /// Triggered; not every acknowledgement is in, or the metadata is not written yet.
    InProgress,
    /// Fully acknowledged and durably recorded.
    Completed,
    /// Aborted, for the reason given.
    Failed {
        /// Why it was aborted.
        reason: AbortReason,
    },
}

/// One task's contribution to one checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskStats {
    /// When the shell received the task's acknowledgement.
    pub acknowledged_at: Instant,
    /// What the task's snapshot cost, as the acknowledgement reported it.
    pub cost: SnapshotCost,
}

impl TaskStats {
    /// The statistics of `ack`, received by the shell at `at`. (A
    /// constructor rather than `From`, because the receipt time is not part of
    /// the acknowledgement.)
    pub fn acknowledged<H>(ack: &Acknowledgement<H>, at: Instant) -> Self {
        TaskStats {
            acknowledged_at: at,
            cost: ack.cost,
        }
    }
}

/// Everything known about one checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointRecord {
    /// The checkpoint's id.
    pub id: CheckpointId,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// Whether the job ends when it completes (final checkpoint, stop-with-savepoint).
    pub is_final: bool,
    /// In progress, completed or failed.
    pub status: CheckpointStatus,
    /// When it was triggered.
    pub triggered_at: Instant,
    /// When it completed or failed; `None` while in progress.
    pub ended_at: Option<Instant>,
    /// How many tasks must acknowledge it (the ack set).
    pub num_tasks: usize,
    /// The acknowledgements received, by task.
    pub tasks: BTreeMap<TaskId, TaskStats>,
}

impl CheckpointRecord {
    /// Trigger → completion (or failure); `None` while in progress.
    pub fn duration(&self) -> Option<Duration> {
        self.ended_at
            .map(|end| end.saturating_duration_since(self.triggered_at))
    }

    /// Total bytes persisted by the tasks that acknowledged.
    pub fn bytes(&self) -> u64 {
        self.tasks.values().map(|t| t.cost.bytes).sum()
    }

    /// How many tasks have acknowledged.
    pub fn acknowledged(&self) -> usize {
        self.tasks.len()
    }

    /// When the last acknowledgement arrived.
    pub fn latest_ack_at(&self) -> Option<Instant> {
        self.tasks.values().map(|t| t.acknowledged_at).max()
    }

    /// The longest alignment of any task (the one that delayed the checkpoint most).
    pub fn max_alignment(&self) -> Duration {
        self.tasks
            .values()
            .map(|t| t.cost.alignment_duration)
            .max()
            .unwrap_or_default()
    }

    /// The longest synchronous part of any task (the longest processing pause).
    pub fn max_sync(&self) -> Duration {
        self.tasks
            .values()
            .map(|t| t.cost.sync_duration)
            .max()
            .unwrap_or_default()
    }
}

/// How many checkpoints are in each state. Field names are Flink's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// How many were triggered (checkpoints and savepoints).
    pub total: u64,
    /// How many are triggered and neither completed nor failed.
    pub in_progress: u64,
    /// How many completed.
    pub completed: u64,
    /// How many failed (were aborted).
    pub failed: u64,
}

/// Running minimum, maximum and sum of one measure over completed checkpoints.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Measure {
    count: u64,
    min: u64,
    max: u64,
    sum: u64,
}

impl Measure {
    fn add(&mut self, value: u64) {
        if self.count == 0 {
            self.min = value;
            self.max = value;
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.count += 1;
        self.sum = self.sum.saturating_add(value);
    }

    /// The smallest value; 0 before the first.
    pub fn min(&self) -> u64 {
        self.min
    }

    /// The largest value; 0 before the first.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The average, rounded down; 0 before the first.
    pub fn avg(&self) -> u64 {
        self.sum.checked_div(self.count).unwrap_or(0)
    }
}

/// The measures of every completed checkpoint and savepoint, beyond the
/// history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    /// Trigger → completion, in ms.
    pub end_to_end_duration_ms: Measure,
    /// Bytes of state.
    pub state_size: Measure,
    /// Longest task alignment, in ms.
    pub alignment_duration_ms: Measure,
}

/// The tracker: fed by the driver, read by the status line and reports.
#[derive(Debug, Clone)]
pub struct CheckpointStats {
    /// How many records the history keeps (at least 1).
    history_size: usize,
    /// Recent checkpoints by id.
    history: BTreeMap<CheckpointId, CheckpointRecord>,
    /// Counts since the tracker was created.
    counts: Counts,
    /// The most recently completed checkpoint (not savepoint).
    latest_completed: Option<CheckpointRecord>,
    /// The most recently completed savepoint.
    latest_savepoint: Option<CheckpointRecord>,
    /// The most recently failed checkpoint or savepoint.
    latest_failed: Option<CheckpointRecord>,
    /// Duration, size and alignment over completed checkpoints and savepoints.
    summary: Summary,
    /// Trigger → completion of every completed checkpoint and savepoint.
    durations: DurationHistogram,
    /// The kind of the checkpoint or savepoint that completed last.
    last_completed: Option<CheckpointKind>,
    /// Aborts that count as failures ([`AbortReason::counts_as_failure`]).
    failures: u64,
    /// The last [`RECENT_FAILURES`] of those, oldest first.
    recent_failures: VecDeque<CheckpointFailure>,
}

impl Default for CheckpointStats {
    fn default() -> Self {
        CheckpointStats::new(DEFAULT_HISTORY)
    }
}

impl CheckpointStats {
    /// A tracker whose history keeps the last `history_size` checkpoints
    /// (at least one).
    pub fn new(history_size: usize) -> Self {
        CheckpointStats {
            history_size: history_size.max(1),
            history: BTreeMap::new(),
            counts: Counts::default(),
            latest_completed: None,
            latest_savepoint: None,
            latest_failed: None,
            summary: Summary::default(),
            durations: DurationHistogram::default(),
            last_completed: None,
            failures: 0,
            recent_failures: VecDeque::new(),
        }
    }

    /// Records that checkpoint `id` was triggered at `now`, expecting
    /// `num_tasks` acknowledgements.
    pub fn triggered(
        &mut self,
        id: CheckpointId,
        kind: CheckpointKind,
        is_final: bool,
        num_tasks: usize,
        now: Instant,
    ) {
        self.counts.total += 1;
        self.counts.in_progress += 1;
        self.history.insert(
            id,
            CheckpointRecord {
                id,
                kind,
                is_final,
                status: CheckpointStatus::InProgress,
                triggered_at: now,
                ended_at: None,
                num_tasks,
                tasks: BTreeMap::new(),
            },
        );
        self.evict();
    }

    /// Records `task`'s acknowledgement of checkpoint `id`.
    pub fn acknowledged(&mut self, id: CheckpointId, task: TaskId, stats: TaskStats) {
        if let Some(record) = self.history.get_mut(&id) {
            record.tasks.insert(task, stats);
        }
    }

    /// Records that checkpoint `id` completed at `now`.
    pub fn completed(&mut self, id: CheckpointId, now: Instant) {
        self.counts.in_progress = self.counts.in_progress.saturating_sub(1);
        self.counts.completed += 1;
        let Some(record) = self.history.get_mut(&id) else {
            return;
        };
        record.status = CheckpointStatus::Completed;
        record.ended_at = Some(now);
        let record = record.clone();
        let summary = &mut self.summary;
        summary
            .end_to_end_duration_ms
            .add(millis(record.duration().unwrap_or_default()));
        summary.state_size.add(record.bytes());
        summary
            .alignment_duration_ms
            .add(millis(record.max_alignment()));
        self.durations
            .observe(record.duration().unwrap_or_default());
        self.last_completed = Some(record.kind);
        let latest = match record.kind {
            CheckpointKind::Checkpoint => &mut self.latest_completed,
            CheckpointKind::Savepoint => &mut self.latest_savepoint,
        };
        if latest.as_ref().is_none_or(|l| l.id < id) {
            *latest = Some(record);
        }
        self.evict();
    }

    /// Records that checkpoint `id` was aborted at `now` for `reason`; an
    /// abort that counts as a failure is also counted and kept among the
    /// recent failures.
    pub fn failed(&mut self, id: CheckpointId, reason: &AbortReason, now: Instant) {
        self.counts.in_progress = self.counts.in_progress.saturating_sub(1);
        self.counts.failed += 1;
        let Some(record) = self.history.get_mut(&id) else {
            return;
        };
        record.status = CheckpointStatus::Failed {
            reason: reason.clone(),
        };
        record.ended_at = Some(now);
        if reason.counts_as_failure() {
            self.failures += 1;
            if self.recent_failures.len() == RECENT_FAILURES {
                self.recent_failures.pop_front();
            }
            self.recent_failures.push_back(CheckpointFailure {
                id,
                kind: record.kind,
                reason: reason.to_string(),
            });
        }
        self.latest_failed = Some(record.clone());
        self.evict();
    }

    /// The counts since the tracker was created.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The record of checkpoint `id`, if the history still holds it.
    pub fn get(&self, id: CheckpointId) -> Option<&CheckpointRecord> {
        self.history.get(&id)
    }

    /// The history, oldest first.
    pub fn history(&self) -> impl DoubleEndedIterator<Item = &CheckpointRecord> {
        self.history.values()
    }

    /// The most recently completed checkpoint (savepoints excluded).
    pub fn latest_completed(&self) -> Option<&CheckpointRecord> {
        self.latest_completed.as_ref()
    }

    /// The most recently completed savepoint.
    pub fn latest_savepoint(&self) -> Option<&CheckpointRecord> {
        self.latest_savepoint.as_ref()
    }

    /// The most recently failed checkpoint or savepoint.
    pub fn latest_failed(&self) -> Option<&CheckpointRecord> {
        self.latest_failed.as_ref()
    }

    /// The checkpoint or savepoint that completed last (the newest of the
    /// kind that completed last).
    pub fn last_completed(&self) -> Option<&CheckpointRecord> {
        match self.last_completed? {
            CheckpointKind::Checkpoint => self.latest_completed(),
            CheckpointKind::Savepoint => self.latest_savepoint(),
        }
    }

    /// Trigger → completion of every checkpoint and savepoint completed so far.
    pub fn durations(&self) -> &DurationHistogram {
        &self.durations
    }

    /// How many aborts counted as failures (declined, expired, not recorded;
    /// not subsumed or ended with the job): fewer than [`Counts::failed`],
    /// which counts every abort.
    pub fn failures(&self) -> u64 {
        self.failures
    }

    /// The most recent of those failures (at most [`RECENT_FAILURES`]),
    /// oldest first.
    pub fn recent_failures(&self) -> impl ExactSizeIterator<Item = &CheckpointFailure> {
        self.recent_failures.iter()
    }

    /// Minimum, maximum and average duration, size and alignment of the
    /// checkpoints and savepoints completed so far.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Drops the oldest finished records beyond the history size. Records in
    /// progress are never dropped (there are at most `max_concurrent` of them
    /// plus savepoints), so every later event still finds its record.
    fn evict(&mut self) {
        while self.history.len() > self.history_size {
            let oldest_finished = self
                .history
                .values()
                .find(|r| r.status != CheckpointStatus::InProgress)
                .map(|r| r.id);
            match oldest_finished {
                Some(id) => {
                    self.history.remove(&id);
                }
                None => break,
            }
        }
    }
}

/// Whole milliseconds of `d`, saturating.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A task's statistics acknowledged at `at` with `bytes` of state (and `bytes` ms of
    /// alignment, so records differ in both); also for the JSON views' tests.
    pub(crate) fn task_stats(at: Instant, bytes: u64) -> TaskStats {
        TaskStats {
            acknowledged_at: at,
            cost: SnapshotCost {
                sync_duration: ms(3),
                async_duration: ms(7),
                alignment_duration: ms(bytes),
                bytes,
            },
        }
    }

    #[test]
    fn task_stats_take_every_measure_of_the_acknowledgement() {
        let at = Instant::now();
        let ack = Acknowledgement {
            handle: "count-0.state",
            cost: SnapshotCost {
                sync_duration: ms(3),
                async_duration: ms(7),
                alignment_duration: ms(2),
                bytes: 42,
            },
            chain: vec![CheckpointId(1)],
            shared: Vec::new(),
        };
        assert_eq!(
            TaskStats::acknowledged(&ack, at),
            TaskStats {
                acknowledged_at: at,
                cost: SnapshotCost {
                    sync_duration: ms(3),
                    async_duration: ms(7),
                    alignment_duration: ms(2),
                    bytes: 42,
                },
            }
        );
    }

    #[test]
    fn counts_follow_trigger_completion_and_failure() {
        let t0 = Instant::now();
        let mut s = CheckpointStats::default();
        s.triggered(CheckpointId(1), CheckpointKind::Checkpoint, false, 2, t0);
        s.triggered(CheckpointId(2), CheckpointKind::Checkpoint, false, 2, t0);
        assert_eq!(
            s.counts(),
            Counts {
                total: 2,
                in_progress: 2,
                completed: 0,
                failed: 0
            }
        );
        s.completed(CheckpointId(1), t0 + ms(10));
        s.failed(
            CheckpointId(2),
            &AbortReason::Expired { timeout: ms(5) },
            t0 + ms(20),
        );
        assert_eq!(
            s.counts(),
            Counts {
                total: 2,
                in_progress: 0,
                completed: 1,
                failed: 1
            }
        );
        assert_eq!(s.latest_completed().unwrap().id, CheckpointId(1));
        assert_eq!(s.latest_failed().unwrap().id, CheckpointId(2));
        assert!(s.latest_savepoint().is_none());
    }

    #[test]
    fn record_sums_bytes_and_measures_trigger_to_completion() {
        let t0 = Instant::now();
        let mut s = CheckpointStats::default();
        s.triggered(CheckpointId(4), CheckpointKind::Savepoint, false, 2, t0);
        s.acknowledged(
            CheckpointId(4),
            TaskId::new("a", 0),
            task_stats(t0 + ms(5), 100),
        );
        s.acknowledged(
            CheckpointId(4),
            TaskId::new("b", 0),
            task_stats(t0 + ms(8), 30),
        );
        s.completed(CheckpointId(4), t0 + ms(12));
        let r = s.latest_savepoint().unwrap();
        assert_eq!(r.duration(), Some(ms(12)));
        assert_eq!(r.bytes(), 130);
        assert_eq!(r.acknowledged(), 2);
        assert_eq!(r.latest_ack_at(), Some(t0 + ms(8)));
        assert_eq!(r.max_alignment(), ms(100));
        assert_eq!(r.max_sync(), ms(3));
        assert!(
            s.latest_completed().is_none(),
            "a savepoint is not the latest checkpoint"
        );
    }

    #[test]
    fn history_is_bounded_but_keeps_checkpoints_in_progress() {
        let t0 = Instant::now();
        let mut s = CheckpointStats::new(3);
        s.triggered(CheckpointId(1), CheckpointKind::Savepoint, false, 1, t0);
        for id in 2..=10 {
            s.triggered(CheckpointId(id), CheckpointKind::Checkpoint, false, 1, t0);
            s.completed(CheckpointId(id), t0);
        }
        let ids: Vec<u64> = s.history().map(|r| r.id.0).collect();
        assert_eq!(ids, [1, 9, 10]);
        s.completed(CheckpointId(1), t0 + ms(1));
        assert_eq!(s.latest_savepoint().unwrap().id, CheckpointId(1));
        assert_eq!(s.counts().completed, 10);
        assert_eq!(s.counts().in_progress, 0);
    }

    #[test]
    fn only_aborts_that_count_as_failures_are_counted_and_kept() {
        let t0 = Instant::now();
        let mut s = CheckpointStats::default();
        for id in 1..=3 {
            s.triggered(CheckpointId(id), CheckpointKind::Checkpoint, false, 1, t0);
        }
        s.failed(
            CheckpointId(1),
            &AbortReason::Expired { timeout: ms(5) },
            t0,
        );
        s.failed(CheckpointId(2), &AbortReason::JobNotRunning, t0);
        s.failed(
            CheckpointId(3),
            &AbortReason::Subsumed {
                by: CheckpointId(4),
            },
            t0,
        );
        assert_eq!(s.counts().failed, 3);
        assert_eq!(s.failures(), 1);
        let recent: Vec<_> = s.recent_failures().collect();
        assert_eq!(recent.len(), 1);
        assert_eq!(recent[0].id, CheckpointId(1));
        assert_eq!(
            recent[0].reason,
            AbortReason::Expired { timeout: ms(5) }.to_string()
        );
        assert_eq!(s.latest_failed().unwrap().id, CheckpointId(3));
    }

    #[test]
    fn last_completed_and_durations_follow_every_completion_of_either_kind() {
        let t0 = Instant::now();
        let mut s = CheckpointStats::default();
        assert!(s.last_completed().is_none());
        s.triggered(CheckpointId(1), CheckpointKind::Checkpoint, false, 1, t0);
        s.completed(CheckpointId(1), t0 + ms(20));
        assert_eq!(s.last_completed().unwrap().id, CheckpointId(1));
        s.triggered(CheckpointId(2), CheckpointKind::Savepoint, false, 1, t0);
        s.completed(CheckpointId(2), t0 + ms(40));
        let last = s.last_completed().unwrap();
        assert_eq!(
            (last.id, last.kind),
            (CheckpointId(2), CheckpointKind::Savepoint)
        );
        assert_eq!(last.duration(), Some(ms(40)));
        let durations = s.durations();
        assert_eq!(durations.count, 2);
        // 20 ms and 40 ms: one within 25 ms, both within 50 ms.
        assert_eq!(&durations.counts[..4], &[0, 0, 1, 2]);
        assert!((durations.sum_seconds - 0.06).abs() < 1e-9);
        assert_eq!(s.summary().end_to_end_duration_ms.max(), 40);
        assert_eq!(s.summary().end_to_end_duration_ms.avg(), 30);
    }
}
