//! The JSON answers of the control endpoint's `/api`, built from the job and
//! its monitor. docs/CONTROL.md documents every field; the dashboard and the
//! CLI verbs read them, so names only ever get added, never changed.
//!
//! Each view is a plain serializable struct built by a function taking the
//! clocks as arguments (`now`, `wall_now`), so the shapes are tested without
//! a server or a running job.
//!
//! The checkpoint views are shaped like Flink's `/jobs/:id/checkpoints` and
//! `/jobs/:id/checkpoints/details/:cid` answers (durations in milliseconds,
//! timestamps in milliseconds since the Unix epoch), so users find the
//! fields they know. They are built here, where they are served, from the
//! records of [`CheckpointStats`], which know nothing of JSON; an `Instant`
//! means nothing outside the process, so the two clocks read together
//! (`now`, `wall_now`) anchor the records' instants to the wall clock. Those are in
//! `api/checkpoints.rs`; the answers of the actions and errors in `api/actions.rs`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use weir_abi::time::END_OF_TIME;

use super::sampler::{Rates, Sampler};
use crate::checkpoint::config::{CheckpointConfig, CheckpointMode, Retention};
use crate::checkpoint::layout::CheckpointLayout;
use crate::checkpoint::stats::{
    CheckpointRecord, CheckpointStats, CheckpointStatus, Counts, Measure, Summary, TaskStats,
};
use crate::dataflow::metrics::TaskMetrics;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::job::Job;
use crate::runtime::JobMonitor;

mod actions;
mod checkpoints;

pub use actions::*;
pub use checkpoints::*;

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
    /// Where the job's checkpoints are: its checkpoint directory, or the `s3://` URL of its
    /// object store.
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
    /// Input its sources dropped as malformed in the current attempt (a file source's lines
    /// under `on_error = "skip"`; 0 otherwise).
    pub records_skipped: u64,
    /// The vertex's watermark, ms (docs/ABI.md §15): its slowest subtask's, over the subtasks
    /// that have one ([`vertex_watermark`]); `null` while none has; [`END_OF_TIME`] once they
    /// reached the end of their input.
    pub watermark: Option<i64>,
    /// How far the watermark is behind the answer's `now`, ms ([`watermark_lag`]); `null`
    /// without a watermark or at the end of time.
    pub watermark_lag: Option<i64>,
    /// Records that arrived at or before their task's watermark (late) in the current attempt.
    pub records_late: u64,
    /// Records its guests emitted on a side output no edge reads, dropped, in the current
    /// attempt.
    pub records_unwired: u64,
    /// Timers its guests have set that have not fired.
    pub pending_timers: u64,
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
    /// Its watermark, ms; `null` before the first; [`END_OF_TIME`] at the end of its input.
    pub watermark: Option<i64>,
    /// How far its watermark is behind the answer's `now`, ms; `null` without a watermark or
    /// at the end of time.
    pub watermark_lag: Option<i64>,
    /// Records that arrived late.
    pub records_late: u64,
    /// Records emitted on a side output no edge reads, dropped.
    pub records_unwired: u64,
    /// Timers set that have not fired.
    pub pending_timers: u64,
    /// What the task's connector shows of itself, under its own key (a Kafka source's
    /// `kafka_source`, an exactly-once Kafka sink's `kafka_sink`); absent for other tasks.
    #[serde(flatten)]
    pub connector: BTreeMap<&'static str, serde_json::Value>,
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

/// A vertex's watermark from its subtasks' (`None` for a subtask without one yet): the
/// smallest of those that have one, since a vertex is only as far on as its slowest
/// subtask; `None` when none has one. A subtask without a watermark is left out rather than
/// holding the vertex's at nothing: a source subtask whose splits are all idle may never
/// have one.
pub fn vertex_watermark(subtasks: impl IntoIterator<Item = Option<i64>>) -> Option<i64> {
    subtasks.into_iter().flatten().min()
}

/// How far `watermark` is behind the wall clock at `wall_now`, in ms (negative when it is
/// ahead); `None` without a watermark or at the [end of time](END_OF_TIME), where no lag
/// is left. Only meaningful when the job's timestamps are milliseconds since the Unix
/// epoch.
pub fn watermark_lag(watermark: Option<i64>, wall_now: SystemTime) -> Option<i64> {
    let watermark = watermark.filter(|&w| w != END_OF_TIME)?;
    let now = i64::try_from(epoch_ms(wall_now)).unwrap_or(i64::MAX);
    Some(now.saturating_sub(watermark))
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
            // The current attempt's: a live rescale changes it from the job file's.
            let parallelism = match tasks
                .iter()
                .filter(|(t, _, _)| t.vertex == vertex.name)
                .count()
            {
                0 => vertex.parallelism,
                n => n as u32,
            };
            let subtasks: Vec<(TaskView, Rates, u64)> = (0..parallelism)
                .map(|subtask| {
                    let id = TaskId::new(vertex.name.as_str(), subtask);
                    let metrics = tasks
                        .iter()
                        .find(|(task, _, _)| *task == id)
                        .map(|(_, _, m)| Arc::clone(m));
                    task_view(subtask, metrics.as_ref(), sampler, now, wall_now, &id)
                })
                .collect();
            let rates: Vec<Rates> = subtasks.iter().map(|(_, r, _)| *r).collect();
            let combined = Rates::combine(&rates);
            let watermark = vertex_watermark(subtasks.iter().map(|(t, _, _)| t.watermark));
            let sum =
                |figure: fn(&TaskView) -> u64| subtasks.iter().map(|(t, _, _)| figure(t)).sum();
            VertexView {
                name: vertex.name.clone(),
                kind: vertex.kind_name(),
                parallelism,
                records_in: sum(|t| t.records_in),
                records_out: sum(|t| t.records_out),
                rate_in: combined.rate_in,
                rate_out: combined.rate_out,
                busy_ratio: combined.busy_ratio,
                backpressured_ratio: combined.backpressured_ratio,
                guest_calls: subtasks.iter().map(|(_, _, calls)| calls).sum(),
                records_skipped: (0..parallelism)
                    .filter_map(|subtask| {
                        let id = TaskId::new(vertex.name.as_str(), subtask);
                        tasks.iter().find(|(task, _, _)| *task == id)
                    })
                    .map(|(_, _, m)| m.records_skipped())
                    .sum(),
                watermark,
                watermark_lag: watermark_lag(watermark, wall_now),
                records_late: sum(|t| t.records_late),
                records_unwired: sum(|t| t.records_unwired),
                pending_timers: sum(|t| t.pending_timers),
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
        checkpoint_directory: job.checkpoint.storage_root().display().to_string(),
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

/// One subtask's view, its rates and its guest calls, at (`now`, `wall_now`); zeros (and no
/// watermark) for a task not running (before the first attempt, or between attempts).
fn task_view(
    subtask: u32,
    metrics: Option<&Arc<TaskMetrics>>,
    sampler: &Sampler,
    now: Instant,
    wall_now: SystemTime,
    id: &TaskId,
) -> (TaskView, Rates, u64) {
    let rates = metrics.map_or_else(Rates::default, |m| sampler.rates(now, id, m));
    let watermark = metrics.and_then(|m| m.watermark.get());
    let view = TaskView {
        subtask,
        records_in: metrics.map_or(0, |m| m.records_in()),
        records_out: metrics.map_or(0, |m| m.records_out()),
        rate_in: rates.rate_in,
        rate_out: rates.rate_out,
        busy_ratio: rates.busy_ratio,
        backpressured_ratio: rates.backpressured_ratio,
        watermark,
        watermark_lag: watermark_lag(watermark, wall_now),
        records_late: metrics.map_or(0, |m| m.records_late()),
        records_unwired: metrics.map_or(0, |m| m.records_unwired()),
        pending_timers: metrics.map_or(0, |m| m.pending_timers()),
        connector: metrics
            .and_then(|m| m.connector())
            .map(|figures| figures.view())
            .into_iter()
            .collect(),
    };
    (view, rates, metrics.map_or(0, |m| m.guest_calls()))
}

#[cfg(test)]
pub(crate) mod tests {
    use std::time::Duration;

    use super::checkpoints::{details_of, overview_of};
    use super::*;
    use crate::checkpoint::abort::AbortReason;
    use crate::checkpoint::pending::SnapshotCost;
    use crate::checkpoint::stats::tests::task_stats;
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

    /// The metrics of a Kafka source task reading partitions 0 (at offset 40 of 42) and 2 (at
    /// 3, its end not known yet) of `words`, and of a Kafka sink task that committed two
    /// transactions (10 records in 4 ms, 6 in 8 ms) and resent one: what the views of a Kafka
    /// job are tested with.
    pub(crate) fn kafka_tasks() -> (Arc<TaskMetrics>, Arc<TaskMetrics>) {
        use crate::connectors::kafka::figures::{
            KafkaSinkMetrics, KafkaSourceMetrics, PartitionMetrics,
        };
        let source = Arc::new(KafkaSourceMetrics::default());
        let partitions: Arc<[PartitionMetrics]> = Arc::from(vec![
            PartitionMetrics::new("words", 0),
            PartitionMetrics::new("words", 2),
        ]);
        partitions[0].set_next(40);
        partitions[0].set_high_watermark(42);
        partitions[1].set_next(3);
        source.replace(partitions);
        let sink = Arc::new(KafkaSinkMetrics::default());
        sink.committed(10, Duration::from_millis(4));
        sink.committed(6, Duration::from_millis(8));
        sink.resent();
        let source_task = Arc::new(TaskMetrics::default());
        source_task.set_connector(source);
        let sink_task = Arc::new(TaskMetrics::default());
        sink_task.set_connector(sink);
        (source_task, sink_task)
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
        gen1.add_records_skipped(3);
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
        assert_eq!(json["vertices"][0]["records_skipped"], 3);
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
    fn job_view_shows_a_kafka_sources_partitions_and_a_sinks_transactions() {
        let job = job();
        let (gen0, out) = kafka_tasks();
        let monitor = JobMonitor::default();
        monitor.set_tasks(vec![
            (TaskId::new("gen", 0), TaskRole::Source, gen0),
            (
                TaskId::new("gen", 1),
                TaskRole::Source,
                Arc::new(TaskMetrics::default()),
            ),
            (TaskId::new("out", 0), TaskRole::Sink, out),
        ]);
        let view = job_view(
            &job,
            &monitor,
            &Sampler::default(),
            Instant::now(),
            SystemTime::now(),
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(
            json["vertices"][0]["tasks"][0]["kafka_source"],
            serde_json::json!({"partitions": [
                {"topic": "words", "partition": 0, "offset": 40, "high_watermark": 42, "lag": 2},
                {"topic": "words", "partition": 2, "offset": 3, "high_watermark": null,
                 "lag": null}
            ]})
        );
        let other = &json["vertices"][0]["tasks"][1];
        assert!(other.get("kafka_source").is_none() && other.get("kafka_sink").is_none());
        let sink = &json["vertices"][1]["tasks"][0]["kafka_sink"];
        assert_eq!(sink["transactions_committed"], 2);
        assert_eq!(sink["records_committed"], 16);
        assert_eq!(sink["transactions_resent"], 1);
        assert_eq!(sink["commit_duration"]["last"], 8.0);
        assert_eq!(sink["commit_duration"]["max"], 8.0);
        assert_eq!(sink["commit_duration"]["avg"], 6.0);
        let p50 = sink["commit_duration"]["p50"].as_f64().unwrap();
        assert!(p50 > 2.5 && p50 <= 5.0, "{p50}");
        assert_eq!(sink["commit_duration"]["p99"], 8.0);
    }

    #[test]
    fn job_view_shows_each_vertexs_watermark_as_its_slowest_subtasks_and_event_time_counts() {
        let job = job();
        let gen0 = Arc::new(TaskMetrics::default());
        let gen1 = Arc::new(TaskMetrics::default());
        let out = Arc::new(TaskMetrics::default());
        gen0.watermark.set(1_001_500);
        gen1.watermark.set(1_000_250);
        gen1.add_records_late(4);
        gen0.add_records_unwired(2);
        gen1.add_records_unwired(5);
        gen0.set_pending_timers(7);
        gen1.set_pending_timers(3);
        out.watermark.set(i64::MAX);
        let monitor = JobMonitor::default();
        monitor.set_tasks(vec![
            (TaskId::new("gen", 0), TaskRole::Source, Arc::clone(&gen0)),
            (TaskId::new("gen", 1), TaskRole::Source, Arc::clone(&gen1)),
            (TaskId::new("out", 0), TaskRole::Sink, Arc::clone(&out)),
        ]);
        let wall = UNIX_EPOCH + Duration::from_millis(1_003_000);
        let view = job_view(&job, &monitor, &Sampler::default(), Instant::now(), wall);
        let json = serde_json::to_value(&view).unwrap();
        let source = &json["vertices"][0];
        assert_eq!(
            source["watermark"], 1_000_250,
            "the slowest subtask's: {source}"
        );
        assert_eq!(source["watermark_lag"], 2_750);
        assert_eq!(source["records_late"], 4);
        assert_eq!(source["records_unwired"], 7);
        assert_eq!(source["pending_timers"], 10);
        assert_eq!(source["tasks"][0]["watermark"], 1_001_500);
        assert_eq!(source["tasks"][0]["watermark_lag"], 1_500);
        assert_eq!(source["tasks"][0]["records_late"], 0);
        assert_eq!(source["tasks"][0]["records_unwired"], 2);
        assert_eq!(source["tasks"][0]["pending_timers"], 7);
        assert_eq!(source["tasks"][1]["records_late"], 4);
        // The end of input is the end of time: a watermark, but no lag.
        let out_view = &json["vertices"][1];
        assert_eq!(out_view["watermark"], i64::MAX);
        assert!(out_view["watermark_lag"].is_null(), "{out_view}");
        assert_eq!(out_view["tasks"][0]["watermark"], i64::MAX);

        // A subtask without a watermark yet is left out of its vertex's; without any, null.
        gen0.watermark.set(1_002_000);
        let fresh = Arc::new(TaskMetrics::default());
        monitor.set_tasks(vec![
            (TaskId::new("gen", 0), TaskRole::Source, gen0),
            (TaskId::new("gen", 1), TaskRole::Source, Arc::clone(&fresh)),
            (
                TaskId::new("out", 0),
                TaskRole::Sink,
                Arc::new(TaskMetrics::default()),
            ),
        ]);
        let view = job_view(&job, &monitor, &Sampler::default(), Instant::now(), wall);
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["vertices"][0]["watermark"], 1_002_000);
        assert_eq!(json["vertices"][0]["watermark_lag"], 1_000);
        let waiting = &json["vertices"][0]["tasks"][1];
        assert!(waiting["watermark"].is_null() && waiting["watermark_lag"].is_null());
        let none = &json["vertices"][1];
        assert!(
            none["watermark"].is_null() && none["watermark_lag"].is_null(),
            "{none}"
        );
        assert_eq!(none["records_late"], 0);
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
                    cost: SnapshotCost {
                        sync_duration: Duration::from_millis(1),
                        async_duration: Duration::from_millis(2),
                        alignment_duration: Duration::ZERO,
                        bytes: 64,
                    },
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
            rescaled: Vec::new(),
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

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
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
        let layout = CheckpointLayout::new("/data/j");
        let report = overview_of(&s, &layout, None, now, wall_now);
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

        let details = details_of(&s, &layout, CheckpointId(1), now, wall_now).unwrap();
        let json = serde_json::to_value(&details).unwrap();
        assert_eq!(json["id"], 1);
        assert_eq!(json["tasks"][0]["vertex"], "src");
        assert_eq!(json["tasks"][0]["end_to_end_duration"], 40);
        assert_eq!(json["tasks"][0]["sync_duration"], 3);
        assert_eq!(json["tasks"][0]["async_duration"], 7);
        assert!(details_of(&s, &layout, CheckpointId(99), now, wall_now).is_none());
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
