//! The checkpoint views of `/api`: the overview (`GET /api/checkpoints`), one checkpoint's
//! details per task, and the checkpoint settings, shaped like Flink's answers.
//!
//! Why a file of its own: they are built from the records of [`CheckpointStats`], which know
//! nothing of JSON, and anchor those records' instants to the wall clock: a concern of their
//! own, apart from the job's graph and live figures.

use super::*;

/// `GET /api/checkpoints`: Flink's checkpoint overview, across every attempt
/// of the job in this process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointsView {
    /// How many checkpoints are in each state.
    pub counts: CountsView,
    /// Minimum, maximum and average over completed checkpoints.
    pub summary: SummaryView,
    /// The latest completed, savepoint, failed and restored.
    pub latest: LatestView,
    /// Recent checkpoints and savepoints, newest first.
    pub history: Vec<CheckpointEntry>,
}

/// The `counts` part of [`CheckpointsView`]. Field names are Flink's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CountsView {
    /// How many were triggered (checkpoints and savepoints).
    pub total: u64,
    /// How many are triggered and neither completed nor failed.
    pub in_progress: u64,
    /// How many completed.
    pub completed: u64,
    /// How many failed (were aborted).
    pub failed: u64,
}

impl From<Counts> for CountsView {
    fn from(c: Counts) -> Self {
        CountsView {
            total: c.total,
            in_progress: c.in_progress,
            completed: c.completed,
            failed: c.failed,
        }
    }
}

/// The `summary` part of [`CheckpointsView`]: minimum, maximum and average
/// of the measures of completed checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SummaryView {
    /// Trigger → completion, in ms.
    pub end_to_end_duration: MinMaxAvg,
    /// Bytes of state.
    pub state_size: MinMaxAvg,
    /// Longest task alignment, in ms.
    pub alignment_duration: MinMaxAvg,
}

impl From<&Summary> for SummaryView {
    fn from(s: &Summary) -> Self {
        SummaryView {
            end_to_end_duration: MinMaxAvg::from(&s.end_to_end_duration_ms),
            state_size: MinMaxAvg::from(&s.state_size),
            alignment_duration: MinMaxAvg::from(&s.alignment_duration_ms),
        }
    }
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

impl From<&Measure> for MinMaxAvg {
    fn from(m: &Measure) -> Self {
        MinMaxAvg {
            min: m.min(),
            max: m.max(),
            avg: m.avg(),
        }
    }
}

/// The `latest` part of [`CheckpointsView`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatestView {
    /// The latest completed checkpoint (savepoints excluded).
    pub completed: Option<CheckpointEntry>,
    /// The latest completed savepoint.
    pub savepoint: Option<CheckpointEntry>,
    /// The latest failed checkpoint or savepoint.
    pub failed: Option<CheckpointEntry>,
    /// What the current attempt was restored from.
    pub restored: Option<RestoredView>,
}

/// A checkpoint as in the overview, and where it is on disk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointEntry {
    /// The checkpoint's fields.
    #[serde(flatten)]
    pub checkpoint: CheckpointView,
    /// The directory of a completed checkpoint or savepoint (a checkpoint
    /// pruned since is no longer there); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_path: Option<String>,
}

/// A checkpoint's status as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StatusView {
    /// Triggered, not yet completed or failed.
    InProgress,
    /// Completed.
    Completed,
    /// Failed (aborted).
    Failed,
}

/// One checkpoint as reported, in the overview and in its details.
/// Durations in ms, timestamps in ms since the Unix epoch; an in-progress
/// checkpoint's duration runs to the answer's `now`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointView {
    /// The checkpoint's id.
    pub id: u64,
    /// In progress, completed or failed.
    pub status: StatusView,
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

/// `latest.restored`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RestoredView {
    /// The id restored.
    pub id: u64,
    /// Whether it was a savepoint.
    pub is_savepoint: bool,
    /// Its directory.
    pub path: String,
    /// When the restore began, ms since the Unix epoch.
    pub restore_timestamp: u64,
    /// The vertices it restored at another parallelism than the checkpoint's (docs/ABI.md
    /// §16); left out when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rescaled: Vec<ParallelismChange>,
}

/// A reading of the monotonic and the wall clock taken together, to turn
/// the statistics' instants into timestamps.
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
        wall.map_or(0, epoch_ms)
    }

    fn checkpoint(&self, r: &CheckpointRecord) -> CheckpointView {
        let (status, failure_message) = match &r.status {
            CheckpointStatus::InProgress => (StatusView::InProgress, None),
            CheckpointStatus::Completed => (StatusView::Completed, None),
            CheckpointStatus::Failed { reason } => (StatusView::Failed, Some(reason.to_string())),
        };
        let end = r.ended_at.unwrap_or(self.now);
        CheckpointView {
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

    fn task(&self, r: &CheckpointRecord, task: &TaskId, t: &TaskStats) -> CheckpointTaskView {
        CheckpointTaskView {
            vertex: task.vertex.clone(),
            subtask: task.subtask,
            ack_timestamp: self.epoch_ms(t.acknowledged_at),
            end_to_end_duration: millis(
                t.acknowledged_at.saturating_duration_since(r.triggered_at),
            ),
            state_size: t.cost.bytes,
            sync_duration: millis(t.cost.sync_duration),
            async_duration: millis(t.cost.async_duration),
            alignment_duration: millis(t.cost.alignment_duration),
        }
    }
}

/// The directory of checkpoint `r`, if it completed.
fn external_path(layout: &CheckpointLayout, r: &CheckpointRecord) -> Option<String> {
    (r.status == CheckpointStatus::Completed)
        .then(|| layout.checkpoint_dir(r.kind, r.id).display().to_string())
}

fn entry(clock: &Anchor, layout: &CheckpointLayout, r: &CheckpointRecord) -> CheckpointEntry {
    CheckpointEntry {
        checkpoint: clock.checkpoint(r),
        external_path: external_path(layout, r),
    }
}

/// Builds `GET /api/checkpoints`.
pub fn checkpoints_view(
    monitor: &JobMonitor,
    layout: &CheckpointLayout,
    now: Instant,
    wall_now: SystemTime,
) -> CheckpointsView {
    let restored = monitor.restored().map(|r| RestoredView {
        id: r.id.0,
        is_savepoint: r.kind == CheckpointKind::Savepoint,
        path: r.path.display().to_string(),
        restore_timestamp: epoch_ms(r.restored_at),
        rescaled: r
            .rescaled
            .into_iter()
            .map(|(vertex, from, to)| ParallelismChange { vertex, from, to })
            .collect(),
    });
    monitor.with_checkpoint_stats(|stats| overview_of(stats, layout, restored, now, wall_now))
}

/// [`checkpoints_view`] of `stats`, with instants anchored at (`now`, `wall_now`).
pub(super) fn overview_of(
    stats: &CheckpointStats,
    layout: &CheckpointLayout,
    restored: Option<RestoredView>,
    now: Instant,
    wall_now: SystemTime,
) -> CheckpointsView {
    let clock = Anchor { now, wall_now };
    CheckpointsView {
        counts: stats.counts().into(),
        summary: stats.summary().into(),
        latest: LatestView {
            completed: stats.latest_completed().map(|r| entry(&clock, layout, r)),
            savepoint: stats.latest_savepoint().map(|r| entry(&clock, layout, r)),
            failed: stats.latest_failed().map(|r| entry(&clock, layout, r)),
            restored,
        },
        history: stats
            .history()
            .rev()
            .map(|r| entry(&clock, layout, r))
            .collect(),
    }
}

/// `GET /api/checkpoints/{id}`: one checkpoint with its per-task figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DetailsView {
    /// The checkpoint as in the overview.
    #[serde(flatten)]
    pub checkpoint: CheckpointView,
    /// One entry per task that acknowledged, ordered by task.
    pub tasks: Vec<CheckpointTaskView>,
    /// Its directory, if it completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_path: Option<String>,
}

/// One task's acknowledgement of a checkpoint, in [`DetailsView`]
/// (durations in ms).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointTaskView {
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

/// Builds `GET /api/checkpoints/{id}`; `None` if the history does not hold it.
pub fn details_view(
    monitor: &JobMonitor,
    layout: &CheckpointLayout,
    id: CheckpointId,
    now: Instant,
    wall_now: SystemTime,
) -> Option<DetailsView> {
    monitor.with_checkpoint_stats(|stats| details_of(stats, layout, id, now, wall_now))
}

/// [`details_view`] of `stats`, with instants anchored at (`now`, `wall_now`).
pub(super) fn details_of(
    stats: &CheckpointStats,
    layout: &CheckpointLayout,
    id: CheckpointId,
    now: Instant,
    wall_now: SystemTime,
) -> Option<DetailsView> {
    let clock = Anchor { now, wall_now };
    let r = stats.get(id)?;
    Some(DetailsView {
        checkpoint: clock.checkpoint(r),
        tasks: r
            .tasks
            .iter()
            .map(|(task, t)| clock.task(r, task, t))
            .collect(),
        external_path: external_path(layout, r),
    })
}

/// `GET /api/checkpoints/config`: the job's checkpoint settings (durations in ms).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigView {
    /// Time between periodic checkpoints; `null` when they are off.
    pub interval: Option<u64>,
    /// `exactly-once` or `at-least-once`.
    pub mode: &'static str,
    /// A checkpoint not complete after this long is aborted.
    pub timeout: u64,
    /// Least time from a completion to the next trigger.
    pub min_pause: u64,
    /// Checkpoints in progress at once, at most.
    pub max_concurrent: u32,
    /// What a cancel does to completed checkpoints: `retain` or `delete`.
    pub on_cancel: &'static str,
    /// Completed checkpoints kept.
    pub retained: usize,
    /// Checkpoint failures in a row tolerated before the job fails over.
    pub tolerable_failures: u32,
    /// The job's checkpoint directory.
    pub directory: String,
    /// Where savepoints go.
    pub savepoint_directory: String,
}

/// Builds `GET /api/checkpoints/config`.
pub fn config_view(config: &CheckpointConfig, layout: &CheckpointLayout) -> ConfigView {
    ConfigView {
        interval: config.interval.map(millis),
        mode: match config.mode {
            CheckpointMode::ExactlyOnce => "exactly-once",
            CheckpointMode::AtLeastOnce => "at-least-once",
        },
        timeout: millis(config.timeout),
        min_pause: millis(config.min_pause),
        max_concurrent: config.max_concurrent,
        on_cancel: match config.on_cancel {
            Retention::RetainOnCancel => "retain",
            Retention::DeleteOnCancel => "delete",
        },
        retained: config.retained,
        tolerable_failures: config.tolerable_failures,
        directory: config.directory.display().to_string(),
        savepoint_directory: layout.savepoint_root().display().to_string(),
    }
}
