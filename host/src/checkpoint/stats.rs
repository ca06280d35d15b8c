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
//! caller. An `Instant` means nothing outside the process, so the
//! serializable views ([`StatsReport`], [`CheckpointDetails`]) are built by
//! [`CheckpointStats::report`] and [`CheckpointStats::details`] from a pair
//! (`now`, `wall_now`) that anchors the monotonic clock to wall-clock time;
//! they are shaped like Flink's `/jobs/:id/checkpoints` and
//! `/jobs/:id/checkpoints/details/:cid` answers (durations in milliseconds,
//! timestamps in milliseconds since the Unix epoch) so users find the fields
//! they know.
//!
//! Memory is bounded: the history keeps the last `history_size` checkpoints
//! (default [`DEFAULT_HISTORY`]), never evicting one still in progress; the
//! counts, the summary and the latest completed / savepoint / failed records
//! are kept beyond the history.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use crate::checkpoint::abort::AbortReason;
use crate::checkpoint::pending::Acknowledgement;
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
    /// Duration of the synchronous part (guest snapshot export + copy out).
    pub sync_duration: Duration,
    /// Duration of the asynchronous part (write, fsync, checksum).
    pub async_duration: Duration,
    /// Duration of the task's barrier alignment.
    pub alignment_duration: Duration,
    /// Bytes of state the task persisted.
    pub bytes: u64,
}

impl TaskStats {
    /// The statistics of `ack`, received by the shell at `at`: the one
    /// place an acknowledgement's measures are copied into the statistics.
    /// (A constructor rather than `From`, because the receipt time is not
    /// part of the acknowledgement.)
    pub fn acknowledged<H>(ack: &Acknowledgement<H>, at: Instant) -> Self {
        TaskStats {
            acknowledged_at: at,
            sync_duration: ack.sync_duration,
            async_duration: ack.async_duration,
            alignment_duration: ack.alignment_duration,
            bytes: ack.bytes,
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
        self.tasks.values().map(|t| t.bytes).sum()
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
            .map(|t| t.alignment_duration)
            .max()
            .unwrap_or_default()
    }

    /// The longest synchronous part of any task (the longest processing pause).
    pub fn max_sync(&self) -> Duration {
        self.tasks
            .values()
            .map(|t| t.sync_duration)
            .max()
            .unwrap_or_default()
    }
}

/// How many checkpoints are in each state. Field names are Flink's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
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
struct Accumulator {
    count: u64,
    min: u64,
    max: u64,
    sum: u64,
}

impl Accumulator {
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

    fn report(&self) -> MinMaxAvg {
        MinMaxAvg {
            min: self.min,
            max: self.max,
            avg: self.sum.checked_div(self.count).unwrap_or(0),
        }
    }
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
    /// Trigger → completion, in ms, over completed checkpoints and savepoints.
    duration_ms: Accumulator,
    /// Bytes, over completed checkpoints and savepoints.
    size: Accumulator,
    /// Longest task alignment, in ms, over completed checkpoints and savepoints.
    alignment_ms: Accumulator,
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
            duration_ms: Accumulator::default(),
            size: Accumulator::default(),
            alignment_ms: Accumulator::default(),
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
        self.duration_ms
            .add(millis(record.duration().unwrap_or_default()));
        self.size.add(record.bytes());
        self.alignment_ms.add(millis(record.max_alignment()));
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

    /// Records that checkpoint `id` was aborted at `now` for `reason`.
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

    /// The serializable overview (Flink's `/jobs/:id/checkpoints`), with
    /// instants turned into wall-clock timestamps by the anchor
    /// (`now`, `wall_now`): two readings of the two clocks taken together.
    pub fn report(&self, now: Instant, wall_now: SystemTime) -> StatsReport {
        let clock = Anchor { now, wall_now };
        StatsReport {
            counts: self.counts,
            summary: SummaryReport {
                end_to_end_duration: self.duration_ms.report(),
                state_size: self.size.report(),
                alignment_duration: self.alignment_ms.report(),
            },
            latest: LatestReport {
                completed: self.latest_completed.as_ref().map(|r| clock.checkpoint(r)),
                savepoint: self.latest_savepoint.as_ref().map(|r| clock.checkpoint(r)),
                failed: self.latest_failed.as_ref().map(|r| clock.checkpoint(r)),
            },
            history: self
                .history
                .values()
                .rev()
                .map(|r| clock.checkpoint(r))
                .collect(),
        }
    }

    /// The serializable per-task details of checkpoint `id` (Flink's
    /// `/jobs/:id/checkpoints/details/:cid`), if the history still holds it.
    pub fn details(
        &self,
        id: CheckpointId,
        now: Instant,
        wall_now: SystemTime,
    ) -> Option<CheckpointDetails> {
        let clock = Anchor { now, wall_now };
        let record = self.history.get(&id)?;
        Some(CheckpointDetails {
            checkpoint: clock.checkpoint(record),
            tasks: record
                .tasks
                .iter()
                .map(|(task, t)| TaskReport {
                    vertex: task.vertex.clone(),
                    subtask: task.subtask,
                    ack_timestamp: clock.epoch_ms(t.acknowledged_at),
                    end_to_end_duration: millis(
                        t.acknowledged_at
                            .saturating_duration_since(record.triggered_at),
                    ),
                    state_size: t.bytes,
                    sync_duration: millis(t.sync_duration),
                    async_duration: millis(t.async_duration),
                    alignment_duration: millis(t.alignment_duration),
                })
                .collect(),
        })
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

/// A reading of the monotonic and the wall clock taken together, to turn
/// instants into timestamps.
struct Anchor {
    now: Instant,
    wall_now: SystemTime,
}

impl Anchor {
    /// Milliseconds since the Unix epoch at which `at` happened.
    fn epoch_ms(&self, at: Instant) -> u64 {
        let wall = match self.now.checked_duration_since(at) {
            Some(ago) => self.wall_now.checked_sub(ago),
            None => self.wall_now.checked_add(at.duration_since(self.now)),
        };
        wall.and_then(|w| w.duration_since(UNIX_EPOCH).ok())
            .map(millis)
            .unwrap_or(0)
    }

    fn checkpoint(&self, r: &CheckpointRecord) -> CheckpointReport {
        let (status, failure_message) = match &r.status {
            CheckpointStatus::InProgress => (ReportStatus::InProgress, None),
            CheckpointStatus::Completed => (ReportStatus::Completed, None),
            CheckpointStatus::Failed { reason } => (ReportStatus::Failed, Some(reason.to_string())),
        };
        let end = r.ended_at.unwrap_or(self.now);
        CheckpointReport {
            id: r.id.0,
            status,
            is_savepoint: r.kind == CheckpointKind::Savepoint,
            is_final: r.is_final,
            trigger_timestamp: self.epoch_ms(r.triggered_at),
            latest_ack_timestamp: r.latest_ack_at().map(|t| self.epoch_ms(t)),
            end_to_end_duration: millis(end.saturating_duration_since(r.triggered_at)),
            state_size: r.bytes(),
            alignment_duration: millis(r.max_alignment()),
            num_subtasks: r.num_tasks,
            num_acknowledged_subtasks: r.acknowledged(),
            failure_timestamp: match r.status {
                CheckpointStatus::Failed { .. } => r.ended_at.map(|t| self.epoch_ms(t)),
                _ => None,
            },
            failure_message,
        }
    }
}

/// The serializable overview of checkpointing, Flink's `/jobs/:id/checkpoints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatsReport {
    /// How many checkpoints are in each state.
    pub counts: Counts,
    /// Minimum, maximum and average over completed checkpoints.
    pub summary: SummaryReport,
    /// The latest completed checkpoint, savepoint and failure.
    pub latest: LatestReport,
    /// Recent checkpoints, newest first.
    pub history: Vec<CheckpointReport>,
}

/// Minimum, maximum and average of the measures of completed checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SummaryReport {
    /// Trigger → completion, in ms.
    pub end_to_end_duration: MinMaxAvg,
    /// Bytes of state.
    pub state_size: MinMaxAvg,
    /// Longest task alignment, in ms.
    pub alignment_duration: MinMaxAvg,
}

/// Minimum, maximum and (integer) average of one measure; all zero when
/// nothing completed yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MinMaxAvg {
    /// Smallest value.
    pub min: u64,
    /// Largest value.
    pub max: u64,
    /// Average value, rounded down.
    pub avg: u64,
}

/// The latest checkpoint of each outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LatestReport {
    /// The latest completed checkpoint (savepoints excluded).
    pub completed: Option<CheckpointReport>,
    /// The latest completed savepoint.
    pub savepoint: Option<CheckpointReport>,
    /// The latest failed checkpoint or savepoint.
    pub failed: Option<CheckpointReport>,
}

/// A checkpoint's status as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReportStatus {
    /// Triggered, not yet completed or failed.
    InProgress,
    /// Completed.
    Completed,
    /// Failed (aborted).
    Failed,
}

/// One checkpoint as reported. Durations in ms, timestamps in ms since the
/// Unix epoch; an in-progress checkpoint's duration runs to the report's `now`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointReport {
    /// The checkpoint's id.
    pub id: u64,
    /// In progress, completed or failed.
    pub status: ReportStatus,
    /// Whether it is a savepoint.
    pub is_savepoint: bool,
    /// Whether the job ends when it completes.
    pub is_final: bool,
    /// When it was triggered.
    pub trigger_timestamp: u64,
    /// When the last acknowledgement arrived, if any did.
    pub latest_ack_timestamp: Option<u64>,
    /// Trigger → completion, failure, or now.
    pub end_to_end_duration: u64,
    /// Bytes persisted by the tasks that acknowledged.
    pub state_size: u64,
    /// Longest task alignment.
    pub alignment_duration: u64,
    /// How many tasks must acknowledge.
    pub num_subtasks: usize,
    /// How many tasks have acknowledged.
    pub num_acknowledged_subtasks: usize,
    /// When it failed, if it did.
    pub failure_timestamp: Option<u64>,
    /// Why it failed, if it did.
    pub failure_message: Option<String>,
}

/// One checkpoint with its per-task figures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointDetails {
    /// The checkpoint as in the overview.
    #[serde(flatten)]
    pub checkpoint: CheckpointReport,
    /// One entry per task that acknowledged, ordered by task.
    pub tasks: Vec<TaskReport>,
}

/// One task's acknowledgement as reported (durations in ms).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskReport {
    /// The task's vertex.
    pub vertex: String,
    /// The task's subtask index.
    pub subtask: u32,
    /// When the acknowledgement arrived.
    pub ack_timestamp: u64,
    /// Trigger → this task's acknowledgement.
    pub end_to_end_duration: u64,
    /// Bytes the task persisted.
    pub state_size: u64,
    /// Synchronous part.
    pub sync_duration: u64,
    /// Asynchronous part.
    pub async_duration: u64,
    /// Barrier alignment.
    pub alignment_duration: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn task_stats(at: Instant, bytes: u64) -> TaskStats {
        TaskStats {
            acknowledged_at: at,
            sync_duration: ms(3),
            async_duration: ms(7),
            alignment_duration: ms(bytes),
            bytes,
        }
    }

    #[test]
    fn task_stats_take_every_measure_of_the_acknowledgement() {
        let at = Instant::now();
        let ack = Acknowledgement {
            handle: "count-0.state",
            sync_duration: ms(3),
            async_duration: ms(7),
            alignment_duration: ms(2),
            bytes: 42,
            chain: vec![CheckpointId(1)],
        };
        assert_eq!(
            TaskStats::acknowledged(&ack, at),
            TaskStats {
                acknowledged_at: at,
                sync_duration: ms(3),
                async_duration: ms(7),
                alignment_duration: ms(2),
                bytes: 42,
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
    fn report_is_shaped_like_flinks_and_anchored_to_the_wall_clock() {
        let t0 = Instant::now();
        let wall0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut s = CheckpointStats::default();
        s.triggered(CheckpointId(1), CheckpointKind::Checkpoint, false, 1, t0);
        s.acknowledged(
            CheckpointId(1),
            TaskId::new("src", 0),
            task_stats(t0 + ms(40), 64),
        );
        s.completed(CheckpointId(1), t0 + ms(50));
        s.triggered(
            CheckpointId(2),
            CheckpointKind::Checkpoint,
            false,
            1,
            t0 + ms(100),
        );
        s.failed(
            CheckpointId(2),
            &AbortReason::Declined {
                task: TaskId::new("src", 0),
                reason: "disk full".into(),
            },
            t0 + ms(130),
        );
        s.triggered(
            CheckpointId(3),
            CheckpointKind::Checkpoint,
            false,
            1,
            t0 + ms(200),
        );
        let now = t0 + ms(1000);
        let wall_now = wall0 + ms(1000);
        let report = s.report(now, wall_now);
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["counts"]["total"], 3);
        assert_eq!(json["counts"]["in_progress"], 1);
        assert_eq!(json["history"][0]["id"], 3);
        assert_eq!(json["history"][0]["status"], "IN_PROGRESS");
        assert_eq!(json["history"][0]["end_to_end_duration"], 800);
        assert_eq!(
            json["history"][2]["trigger_timestamp"],
            1_700_000_000_000u64
        );
        assert_eq!(json["latest"]["completed"]["end_to_end_duration"], 50);
        assert_eq!(json["latest"]["completed"]["state_size"], 64);
        assert_eq!(
            json["latest"]["completed"]["latest_ack_timestamp"],
            1_700_000_000_040u64
        );
        assert_eq!(json["latest"]["failed"]["status"], "FAILED");
        assert_eq!(
            json["latest"]["failed"]["failure_timestamp"],
            1_700_000_000_130u64
        );
        let message = json["latest"]["failed"]["failure_message"]
            .as_str()
            .unwrap();
        assert!(
            message.contains("src#0") && message.contains("disk full"),
            "{message}"
        );
        assert_eq!(json["summary"]["end_to_end_duration"]["max"], 50);

        let details = s.details(CheckpointId(1), now, wall_now).unwrap();
        let json = serde_json::to_value(&details).unwrap();
        assert_eq!(json["id"], 1);
        assert_eq!(json["tasks"][0]["vertex"], "src");
        assert_eq!(json["tasks"][0]["end_to_end_duration"], 40);
        assert_eq!(json["tasks"][0]["sync_duration"], 3);
        assert_eq!(json["tasks"][0]["async_duration"], 7);
        assert!(s.details(CheckpointId(99), now, wall_now).is_none());
    }
}
