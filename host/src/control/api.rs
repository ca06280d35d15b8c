//! The JSON answers of the control endpoint's `/api`, built from the job and
//! its monitor. docs/CONTROL.md documents every field; the dashboard and the
//! CLI verbs read them, so names only ever get added, never changed.
//!
//! Each view is a plain serializable struct built by a function taking the
//! clocks as arguments (`now`, `wall_now`), so the shapes are tested without
//! a server or a running job.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::sampler::{Rates, Sampler};
use crate::checkpoint::config::{CheckpointConfig, CheckpointMode, Retention};
use crate::checkpoint::layout::CheckpointLayout;
use crate::checkpoint::stats::{
    CheckpointDetails, CheckpointReport, Counts, ReportStatus, SummaryReport,
};
use crate::dataflow::metrics::TaskMetrics;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::job::Job;
use crate::runtime::JobMonitor;

/// An error answer: `{"error": "..."}`, saying what went wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorView {
    /// The message.
    pub error: String,
}

/// `GET /api/job`: the job, its status and its graph with live figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobView {
    /// The job's name.
    pub name: String,
    /// `RUNNING`, `RESTARTING`, `FINISHED`… as the job status displays.
    pub status: String,
    /// When the job started running, ms since the Unix epoch.
    pub start_timestamp: u64,
    /// When this answer was made, ms since the Unix epoch.
    pub now: u64,
    /// `now - start_timestamp`, ms.
    pub duration: u64,
    /// Restarts after failures so far.
    pub restarts: u32,
    /// Attempts that ended in a failure (restarted or not).
    pub failures: u32,
    /// The job's checkpoint directory.
    pub checkpoint_directory: String,
    /// The process running the job.
    pub pid: u32,
    /// Every vertex, in topological order (a vertex after its inputs).
    pub vertices: Vec<VertexView>,
    /// Every edge.
    pub edges: Vec<EdgeView>,
}

/// One vertex of [`JobView`]: its tasks' figures added up (ratios averaged).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VertexView {
    /// Its name.
    pub name: String,
    /// `source`, `operator` or `sink`.
    pub kind: &'static str,
    /// How many subtasks run it.
    pub parallelism: u32,
    /// Records taken in (for a source: read) in the current attempt.
    pub records_in: u64,
    /// Records sent out in the current attempt.
    pub records_out: u64,
    /// Records in per second over the last few seconds.
    pub rate_in: f64,
    /// Records out per second over the last few seconds.
    pub rate_out: f64,
    /// Share of the time working (back-pressure excluded), 0 to 1.
    pub busy_ratio: f64,
    /// Share of the time blocked on full output channels, 0 to 1.
    pub backpressured_ratio: f64,
    /// Calls into the vertex's wasm guest (operators only; 0 otherwise).
    pub guest_calls: u64,
    /// One entry per subtask.
    pub tasks: Vec<TaskView>,
}

/// One subtask of a [`VertexView`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskView {
    /// Its subtask index, from 0.
    pub subtask: u32,
    /// Records taken in.
    pub records_in: u64,
    /// Records sent out.
    pub records_out: u64,
    /// Records in per second.
    pub rate_in: f64,
    /// Records out per second.
    pub rate_out: f64,
    /// Share of the time working, 0 to 1.
    pub busy_ratio: f64,
    /// Share of the time back-pressured, 0 to 1.
    pub backpressured_ratio: f64,
}

/// One edge of [`JobView`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EdgeView {
    /// The upstream vertex.
    pub from: String,
    /// The downstream vertex.
    pub to: String,
    /// `forward`, `rebalance`, `key-hash` or `broadcast`.
    pub partitioning: &'static str,
}

/// Milliseconds since the Unix epoch of `t`.
pub fn epoch_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(millis).unwrap_or(0)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Builds `GET /api/job`.
pub fn job_view(
    job: &Job,
    monitor: &JobMonitor,
    sampler: &Sampler,
    now: Instant,
    wall_now: SystemTime,
) -> JobView {
    let tasks = monitor.tasks();
    let start = monitor.started().unwrap_or(wall_now);
    let vertices = job
        .vertices
        .iter()
        .map(|vertex| {
            let subtasks: Vec<(TaskView, Rates, u64)> = (0..vertex.parallelism)
                .map(|subtask| {
                    let id = TaskId::new(vertex.name.as_str(), subtask);
                    let metrics = tasks
                        .iter()
                        .find(|(task, _, _)| *task == id)
                        .map(|(_, _, m)| Arc::clone(m));
                    task_view(subtask, metrics.as_ref(), sampler, now, &id)
                })
                .collect();
            let rates: Vec<Rates> = subtasks.iter().map(|(_, r, _)| *r).collect();
            let combined = Rates::combine(&rates);
            VertexView {
                name: vertex.name.clone(),
                kind: vertex.kind_name(),
                parallelism: vertex.parallelism,
                records_in: subtasks.iter().map(|(t, _, _)| t.records_in).sum(),
                records_out: subtasks.iter().map(|(t, _, _)| t.records_out).sum(),
                rate_in: combined.rate_in,
                rate_out: combined.rate_out,
                busy_ratio: combined.busy_ratio,
                backpressured_ratio: combined.backpressured_ratio,
                guest_calls: subtasks.iter().map(|(_, _, calls)| calls).sum(),
                tasks: subtasks.into_iter().map(|(t, _, _)| t).collect(),
            }
        })
        .collect();
    JobView {
        name: job.name.clone(),
        status: monitor.status().to_string(),
        start_timestamp: epoch_ms(start),
        now: epoch_ms(wall_now),
        duration: wall_now.duration_since(start).map(millis).unwrap_or(0),
        restarts: monitor.restarts(),
        failures: monitor.failures(),
        checkpoint_directory: job.checkpoint.directory.display().to_string(),
        pid: std::process::id(),
        vertices,
        edges: job
            .edges
            .iter()
            .map(|e| EdgeView {
                from: e.from.clone(),
                to: e.to.clone(),
                partitioning: e.partitioner.name(),
            })
            .collect(),
    }
}

/// One subtask's view, its rates and its guest calls; zeros for a task not
/// running (before the first attempt, or between attempts).
fn task_view(
    subtask: u32,
    metrics: Option<&Arc<TaskMetrics>>,
    sampler: &Sampler,
    now: Instant,
    id: &TaskId,
) -> (TaskView, Rates, u64) {
    let rates = metrics.map_or_else(Rates::default, |m| sampler.rates(now, id, m));
    let view = TaskView {
        subtask,
        records_in: metrics.map_or(0, |m| m.records_in()),
        records_out: metrics.map_or(0, |m| m.records_out()),
        rate_in: rates.rate_in,
        rate_out: rates.rate_out,
        busy_ratio: rates.busy_ratio,
        backpressured_ratio: rates.backpressured_ratio,
    };
    (view, rates, metrics.map_or(0, |m| m.guest_calls()))
}

/// `GET /api/checkpoints`: Flink's checkpoint overview, across every attempt
/// of the job in this process.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointsView {
    /// How many checkpoints are in each state.
    pub counts: Counts,
    /// Minimum, maximum and average over completed checkpoints.
    pub summary: SummaryReport,
    /// The latest completed, savepoint, failed and restored.
    pub latest: LatestView,
    /// Recent checkpoints and savepoints, newest first.
    pub history: Vec<CheckpointEntry>,
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

/// A checkpoint as in the stats report, and where it is on disk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointEntry {
    /// The report's fields.
    #[serde(flatten)]
    pub report: CheckpointReport,
    /// The directory of a completed checkpoint or savepoint (a checkpoint
    /// pruned since is no longer there); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_path: Option<String>,
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
}

/// The directory of the checkpoint of `report`, if it completed.
fn external_path(layout: &CheckpointLayout, report: &CheckpointReport) -> Option<String> {
    (report.status == ReportStatus::Completed).then(|| {
        let kind = if report.is_savepoint {
            CheckpointKind::Savepoint
        } else {
            CheckpointKind::Checkpoint
        };
        layout
            .checkpoint_dir(kind, CheckpointId(report.id))
            .display()
            .to_string()
    })
}

fn entry(layout: &CheckpointLayout, report: CheckpointReport) -> CheckpointEntry {
    CheckpointEntry {
        external_path: external_path(layout, &report),
        report,
    }
}

/// Builds `GET /api/checkpoints`.
pub fn checkpoints_view(
    monitor: &JobMonitor,
    layout: &CheckpointLayout,
    now: Instant,
    wall_now: SystemTime,
) -> CheckpointsView {
    let report = monitor.with_checkpoint_stats(|stats| stats.report(now, wall_now));
    let restored = monitor.restored().map(|r| RestoredView {
        id: r.id.0,
        is_savepoint: r.kind == CheckpointKind::Savepoint,
        path: r.path.display().to_string(),
        restore_timestamp: epoch_ms(r.restored_at),
    });
    CheckpointsView {
        counts: report.counts,
        summary: report.summary,
        latest: LatestView {
            completed: report.latest.completed.map(|r| entry(layout, r)),
            savepoint: report.latest.savepoint.map(|r| entry(layout, r)),
            failed: report.latest.failed.map(|r| entry(layout, r)),
            restored,
        },
        history: report
            .history
            .into_iter()
            .map(|r| entry(layout, r))
            .collect(),
    }
}

/// `GET /api/checkpoints/{id}`: one checkpoint with its per-task figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DetailsView {
    /// The details' fields.
    #[serde(flatten)]
    pub details: CheckpointDetails,
    /// Its directory, if it completed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_path: Option<String>,
}

/// Builds `GET /api/checkpoints/{id}`; `None` if the history does not hold it.
pub fn details_view(
    monitor: &JobMonitor,
    layout: &CheckpointLayout,
    id: CheckpointId,
    now: Instant,
    wall_now: SystemTime,
) -> Option<DetailsView> {
    let details = monitor.with_checkpoint_stats(|stats| stats.details(id, now, wall_now))?;
    Some(DetailsView {
        external_path: external_path(layout, &details.checkpoint),
        details,
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

/// `POST /api/savepoints` and `POST /api/stop`: the savepoint taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SavepointView {
    /// Its id.
    pub id: u64,
    /// Its directory, for `weir run --restore`.
    pub path: String,
}

impl SavepointView {
    /// The view of a savepoint at `path`.
    pub fn new(id: CheckpointId, path: &Path) -> SavepointView {
        SavepointView {
            id: id.0,
            path: path.display().to_string(),
        }
    }
}

/// `POST /api/dashboard-login`: a new one-time link that logs a browser
/// into the dashboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoginLinkView {
    /// `http://HOST/login?once=CODE`, under the Host the request named.
    pub url: String,
    /// Seconds it can be used for (once).
    pub expires_in: u64,
}

/// `POST /api/cancel`: the job is being cancelled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CancelView {
    /// Always `CANCELING`.
    pub status: &'static str,
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::checkpoint::abort::AbortReason;
    use crate::checkpoint::stats::{CheckpointStats, CheckpointStatus, TaskStats};
    use crate::dataflow::metrics::TaskMetrics;
    use crate::runtime::monitor::TaskRole;

    const JOB: &str = "name = \"j\"\n\
        [checkpoint]\ninterval = \"1s\"\ntimeout = \"30s\"\ndirectory = \"/data/j\"\n\
        on_cancel = \"delete\"\nretained = 2\n\
        [[source]]\nname = \"gen\"\ntype = \"generator\"\nparallelism = 2\n\
        [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [{ from = \"gen\", partition = \"rebalance\" }]\n";

    fn job() -> Job {
        Job::from_str(JOB, "/jobs", "j.toml").unwrap()
    }

    #[test]
    fn job_view_lists_vertices_with_their_subtasks_and_edges() {
        let job = job();
        let monitor = JobMonitor::default();
        let gen0 = Arc::new(TaskMetrics::default());
        let gen1 = Arc::new(TaskMetrics::default());
        let out = Arc::new(TaskMetrics::default());
        monitor.set_tasks(vec![
            (TaskId::new("gen", 0), TaskRole::Source, Arc::clone(&gen0)),
            (TaskId::new("gen", 1), TaskRole::Source, Arc::clone(&gen1)),
            (TaskId::new("out", 0), TaskRole::Sink, Arc::clone(&out)),
        ]);
        let t0 = Instant::now();
        let mut sampler = Sampler::default();
        let tasks = monitor.tasks();
        sampler.sample(t0, tasks.iter().map(|(id, _, m)| (id, m)));
        gen0.add_records_out(300);
        gen1.add_records_out(100);
        out.add_records_in(400);
        let wall = UNIX_EPOCH + Duration::from_secs(1_000);
        monitor.set_started(wall);
        let view = job_view(
            &job,
            &monitor,
            &sampler,
            t0 + Duration::from_secs(2),
            wall + Duration::from_secs(3),
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["name"], "j");
        assert_eq!(json["status"], "CREATED");
        assert_eq!(json["start_timestamp"], 1_000_000);
        assert_eq!(json["now"], 1_003_000);
        assert_eq!(json["duration"], 3_000);
        assert_eq!(json["checkpoint_directory"], "/data/j");
        assert_eq!(json["vertices"][0]["name"], "gen");
        assert_eq!(json["vertices"][0]["kind"], "source");
        assert_eq!(json["vertices"][0]["parallelism"], 2);
        assert_eq!(json["vertices"][0]["records_out"], 400);
        assert_eq!(json["vertices"][0]["rate_out"], 200.0);
        assert_eq!(json["vertices"][0]["tasks"][1]["subtask"], 1);
        assert_eq!(json["vertices"][0]["tasks"][1]["rate_out"], 50.0);
        assert_eq!(json["vertices"][1]["kind"], "sink");
        assert_eq!(json["vertices"][1]["rate_in"], 200.0);
        assert_eq!(json["vertices"][1]["backpressured_ratio"], 0.0);
        assert_eq!(
            json["edges"],
            serde_json::json!([{"from": "gen", "to": "out", "partitioning": "rebalance"}])
        );
    }

    #[test]
    fn job_view_shows_zeros_for_tasks_not_running() {
        let monitor = JobMonitor::default();
        let now = Instant::now();
        let view = job_view(
            &job(),
            &monitor,
            &Sampler::default(),
            now,
            SystemTime::now(),
        );
        assert_eq!(view.vertices[0].tasks.len(), 2);
        assert_eq!(view.vertices[0].records_out, 0);
        assert_eq!(view.vertices[0].rate_out, 0.0);
    }

    /// Feeds `monitor` checkpoint `id` as the driver would: triggered at
    /// `t0`, acknowledged by its one task 5 ms later, and ended as `status`
    /// says 10 ms after the trigger.
    fn record(
        monitor: &JobMonitor,
        id: u64,
        kind: CheckpointKind,
        status: CheckpointStatus,
        t0: Instant,
    ) {
        let id = CheckpointId(id);
        let ended_at = t0 + Duration::from_millis(10);
        monitor.record_checkpoint(|stats| {
            stats.triggered(id, kind, false, 1, t0);
            stats.acknowledged(
                id,
                TaskId::new("gen", 0),
                TaskStats {
                    acknowledged_at: t0 + Duration::from_millis(5),
                    sync_duration: Duration::from_millis(1),
                    async_duration: Duration::from_millis(2),
                    alignment_duration: Duration::ZERO,
                    bytes: 64,
                },
            );
            match status {
                CheckpointStatus::InProgress => {}
                CheckpointStatus::Completed => stats.completed(id, ended_at),
                CheckpointStatus::Failed { reason } => stats.failed(id, &reason, ended_at),
            }
        });
    }

    #[test]
    fn checkpoints_view_adds_paths_of_completed_ones_and_the_restored_one() {
        let t0 = Instant::now();
        let monitor = JobMonitor::default();
        record(
            &monitor,
            1,
            CheckpointKind::Checkpoint,
            CheckpointStatus::Completed,
            t0,
        );
        record(
            &monitor,
            2,
            CheckpointKind::Savepoint,
            CheckpointStatus::Completed,
            t0,
        );
        record(
            &monitor,
            3,
            CheckpointKind::Checkpoint,
            CheckpointStatus::Failed {
                reason: AbortReason::Expired {
                    timeout: Duration::from_secs(1),
                },
            },
            t0,
        );
        monitor.set_restored(crate::runtime::RestoredCheckpoint {
            id: CheckpointId(7),
            kind: CheckpointKind::Savepoint,
            path: "/data/j/savepoints/sp-0000000007".into(),
            restored_at: UNIX_EPOCH + Duration::from_millis(42),
        });
        let layout = CheckpointLayout::new("/data/j");
        let view = checkpoints_view(
            &monitor,
            &layout,
            t0 + Duration::from_secs(1),
            SystemTime::now(),
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["counts"]["completed"], 2);
        assert_eq!(json["counts"]["failed"], 1);
        assert_eq!(json["history"][0]["id"], 3);
        assert_eq!(json["history"][0]["status"], "FAILED");
        assert!(json["history"][0].get("external_path").is_none());
        assert_eq!(
            json["history"][2]["external_path"],
            "/data/j/chk-0000000001"
        );
        assert_eq!(
            json["latest"]["savepoint"]["external_path"],
            "/data/j/savepoints/sp-0000000002"
        );
        assert_eq!(json["latest"]["completed"]["state_size"], 64);
        assert_eq!(json["latest"]["failed"]["id"], 3);
        assert_eq!(
            json["latest"]["restored"],
            serde_json::json!({
                "id": 7,
                "is_savepoint": true,
                "path": "/data/j/savepoints/sp-0000000007",
                "restore_timestamp": 42
            })
        );

        let details = details_view(
            &monitor,
            &layout,
            CheckpointId(1),
            t0 + Duration::from_secs(1),
            SystemTime::now(),
        )
        .unwrap();
        let json = serde_json::to_value(&details).unwrap();
        assert_eq!(json["id"], 1);
        assert_eq!(json["external_path"], "/data/j/chk-0000000001");
        assert_eq!(json["tasks"][0]["vertex"], "gen");
        assert_eq!(json["tasks"][0]["sync_duration"], 1);
        assert_eq!(json["tasks"][0]["async_duration"], 2);
        assert!(details_view(&monitor, &layout, CheckpointId(9), t0, SystemTime::now()).is_none());
    }

    #[test]
    fn monitor_history_counts_each_checkpoint_once_from_trigger_to_completion() {
        let t0 = Instant::now();
        let monitor = JobMonitor::default();
        record(
            &monitor,
            5,
            CheckpointKind::Checkpoint,
            CheckpointStatus::Completed,
            t0,
        );
        let counts = monitor.with_checkpoint_stats(CheckpointStats::counts);
        assert_eq!(
            (counts.total, counts.completed, counts.in_progress),
            (1, 1, 0)
        );
        let record = monitor.with_checkpoint_stats(|s| s.get(CheckpointId(5)).cloned().unwrap());
        assert_eq!(record.acknowledged(), 1);
        assert_eq!(record.duration(), Some(Duration::from_millis(10)));
        assert_eq!(monitor.checkpoint_durations().count, 1);
    }

    #[test]
    fn config_view_gives_durations_in_milliseconds() {
        let job = job();
        let layout = CheckpointLayout::new(&job.checkpoint.directory);
        let json = serde_json::to_value(config_view(&job.checkpoint, &layout)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "interval": 1000,
                "mode": "exactly-once",
                "timeout": 30000,
                "min_pause": 0,
                "max_concurrent": 1,
                "on_cancel": "delete",
                "retained": 2,
                "tolerable_failures": 0,
                "directory": "/data/j",
                "savepoint_directory": "/data/j/savepoints"
            })
        );
    }
}
