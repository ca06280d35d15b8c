//! `GET /metrics`: the job's figures in the Prometheus text format 0.0.4.
//!
//! Written by hand rather than with a metrics crate: the format is a few
//! lines of rules (a `# HELP` and a `# TYPE` line per family, then
//! `name{label="value"} number` lines, label values escaped), the figures
//! already exist in the monitor and the task counters, and a registry would
//! only copy them once more. [`TextWriter`] keeps the rules in one place; a
//! test checks its output line by line against them.
//!
//! docs/CONTROL.md lists every family.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use weir_abi::time::END_OF_TIME;

use super::api::watermark_lag;
use crate::checkpoint::stats::DURATION_BUCKETS;
use crate::dataflow::connector_metrics::{Family, FamilyKind};
use crate::job::{Job, JobStatus};
use crate::runtime::JobMonitor;

/// The `Content-Type` of the text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The type of a metric family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricType {
    /// Only grows (resets when the process restarts or a task restarts).
    Counter,
    /// Goes up and down.
    Gauge,
    /// Cumulative buckets, a sum and a count.
    Histogram,
}

impl MetricType {
    fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
        }
    }
}

/// Builds a text-format exposition, family by family.
#[derive(Debug, Default)]
pub struct TextWriter {
    out: String,
}

impl TextWriter {
    /// Starts a family: its `# HELP` and `# TYPE` lines.
    pub fn family(&mut self, name: &str, kind: MetricType, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {}", kind.as_str());
    }

    /// One sample line: `name{labels} value`.
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (key, value)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{key}=\"{}\"", escape_label_value(value));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {}", format_value(value));
    }

    /// The text written so far.
    pub fn finish(self) -> String {
        self.out
    }
}

/// A label value as the format wants it: `\`, `"` and newlines escaped.
pub fn escape_label_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A `# HELP` text as the format wants it: `\` and newlines escaped.
pub fn escape_help(help: &str) -> String {
    help.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A sample value: integers without a fraction, `+Inf`, `-Inf`, `NaN`.
pub fn format_value(value: f64) -> String {
    if value.is_nan() {
        "NaN".into()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{}", value as i64)
    } else {
        format!("{value}")
    }
}

fn seconds(nanos: u64) -> f64 {
    nanos as f64 / 1e9
}

/// The whole exposition of a job.
pub fn render(job: &Job, monitor: &JobMonitor, wall_now: SystemTime) -> String {
    let mut w = TextWriter::default();
    let name = job.name.as_str();

    w.family(
        "weir_job_info",
        MetricType::Gauge,
        "Always 1; labels name the job and its process.",
    );
    let pid = std::process::id().to_string();
    w.sample("weir_job_info", &[("job_name", name), ("pid", &pid)], 1.0);

    w.family(
        "weir_job_status",
        MetricType::Gauge,
        "1 for the job's current status, 0 for the others.",
    );
    let status = monitor.status();
    for s in JobStatus::ALL {
        w.sample(
            "weir_job_status",
            &[("status", s.as_str())],
            f64::from(u8::from(s == status)),
        );
    }

    w.family(
        "weir_job_uptime_seconds",
        MetricType::Gauge,
        "Time since the job started running.",
    );
    let uptime = monitor
        .started()
        .and_then(|start| wall_now.duration_since(start).ok())
        .unwrap_or(Duration::ZERO);
    w.sample("weir_job_uptime_seconds", &[], uptime.as_secs_f64());

    w.family(
        "weir_job_restarts_total",
        MetricType::Counter,
        "Restarts after a failure.",
    );
    w.sample(
        "weir_job_restarts_total",
        &[],
        f64::from(monitor.restarts()),
    );

    w.family(
        "weir_job_failures_total",
        MetricType::Counter,
        "Attempts that ended in a failure (a task failed, or too many checkpoints did), restarted or not.",
    );
    w.sample(
        "weir_job_failures_total",
        &[],
        f64::from(monitor.failures()),
    );

    task_families(&mut w, monitor);
    watermark_families(&mut w, monitor, wall_now);
    connector_families(&mut w, monitor);
    checkpoint_families(&mut w, monitor);
    w.finish()
}

/// Per-task counters, labelled `vertex` and `subtask`.
fn task_families(w: &mut TextWriter, monitor: &JobMonitor) {
    let tasks = monitor.tasks();
    let labels: Vec<(String, String)> = tasks
        .iter()
        .map(|(id, _, _)| (id.vertex.to_string(), id.subtask.to_string()))
        .collect();
    type Read = fn(&crate::dataflow::metrics::TaskMetrics) -> f64;
    let families: [(&str, MetricType, &str, Read); 10] = [
        (
            "weir_task_records_in_total",
            MetricType::Counter,
            "Records a task took in (for a source: read) in the current attempt.",
            |m| m.records_in() as f64,
        ),
        (
            "weir_task_records_out_total",
            MetricType::Counter,
            "Records a task sent out in the current attempt.",
            |m| m.records_out() as f64,
        ),
        (
            "weir_task_records_skipped_total",
            MetricType::Counter,
            "Input a source dropped as malformed (a file source's lines under on_error = \"skip\") in the current attempt.",
            |m| m.records_skipped() as f64,
        ),
        (
            "weir_task_busy_seconds_total",
            MetricType::Counter,
            "Time a task spent handling input: guest calls or connector work and routing output (back-pressure met while routing included).",
            |m| seconds(m.busy_nanos()),
        ),
        (
            "weir_task_backpressured_seconds_total",
            MetricType::Counter,
            "Time a task spent blocked on full output channels.",
            |m| seconds(m.backpressured_nanos()),
        ),
        (
            "weir_task_guest_call_seconds_total",
            MetricType::Counter,
            "Time spent inside calls into a task's wasm guest (operators only).",
            |m| seconds(m.guest_nanos()),
        ),
        (
            "weir_task_guest_calls_total",
            MetricType::Counter,
            "Calls into a task's wasm guest: process, finish, snapshot, restore, checkpoint complete (operators only).",
            |m| m.guest_calls() as f64,
        ),
        (
            "weir_task_records_late_total",
            MetricType::Counter,
            "Records that arrived at or before their task's watermark (late) in the current attempt.",
            |m| m.records_late() as f64,
        ),
        (
            "weir_task_records_unwired_total",
            MetricType::Counter,
            "Records a task's guest emitted on a side output no edge reads, dropped, in the current attempt.",
            |m| m.records_unwired() as f64,
        ),
        (
            "weir_task_pending_timers",
            MetricType::Gauge,
            "Timers a task's guest has set that have not fired (event and processing time).",
            |m| m.pending_timers() as f64,
        ),
    ];
    for (family, kind, help, read) in families {
        w.family(family, kind, help);
        for ((_, _, metrics), (vertex, subtask)) in tasks.iter().zip(&labels) {
            w.sample(
                family,
                &[("vertex", vertex), ("subtask", subtask)],
                read(metrics),
            );
        }
    }
}

/// Each task's watermark and how far it is behind `wall_now`, labelled `vertex` and
/// `subtask`. A task without a watermark yet has no sample in either family. At the end of
/// its input a task's watermark is the end of time, written `+Inf` (later than any
/// timestamp, so a `min` over tasks still finds the slowest), and it has no lag.
fn watermark_families(w: &mut TextWriter, monitor: &JobMonitor, wall_now: SystemTime) {
    let tasks = monitor.tasks();
    let watermarks: Vec<(String, String, Option<i64>)> = tasks
        .iter()
        .map(|(id, _, m)| {
            (
                id.vertex.to_string(),
                id.subtask.to_string(),
                m.watermark.get(),
            )
        })
        .collect();
    let family = "weir_task_watermark_milliseconds";
    w.family(
        family,
        MetricType::Gauge,
        "A task's watermark, in the job's timestamps (ms); +Inf once it reached the end of its input; absent before its first.",
    );
    for (vertex, subtask, watermark) in &watermarks {
        let Some(watermark) = *watermark else {
            continue;
        };
        let value = if watermark == END_OF_TIME {
            f64::INFINITY
        } else {
            watermark as f64
        };
        w.sample(family, &[("vertex", vertex), ("subtask", subtask)], value);
    }
    let family = "weir_task_watermark_lag_milliseconds";
    w.family(
        family,
        MetricType::Gauge,
        "Wall-clock time now less a task's watermark, in ms (meaningful for timestamps in ms since the Unix epoch); absent without a watermark or at the end of input.",
    );
    for (vertex, subtask, watermark) in &watermarks {
        let Some(lag) = watermark_lag(*watermark, wall_now) else {
            continue;
        };
        w.sample(
            family,
            &[("vertex", vertex), ("subtask", subtask)],
            lag as f64,
        );
    }
}

/// The connectors' own figures (`ConnectorFigures::families`, `dataflow/connector_metrics.rs`):
/// each family once, in the order the tasks first name them, with every task's samples
/// labelled `vertex` and `subtask` before the connector's own labels. Only the families of
/// connectors the attempt runs are written.
fn connector_families(w: &mut TextWriter, monitor: &JobMonitor) {
    let mut families: Vec<(Family, Vec<[String; 2]>)> = Vec::new();
    for (id, _, metrics) in &monitor.tasks() {
        let Some(figures) = metrics.connector() else {
            continue;
        };
        let task = [id.vertex.to_string(), id.subtask.to_string()];
        for family in figures.families() {
            let at = match families.iter().position(|(f, _)| f.name == family.name) {
                Some(at) => {
                    families[at].0.samples.extend(family.samples);
                    at
                }
                None => {
                    families.push((family, Vec::new()));
                    families.len() - 1
                }
            };
            // Which task each sample is of, in step with the samples.
            let (family, tasks) = &mut families[at];
            tasks.resize(family.samples.len(), task.clone());
        }
    }
    for (family, tasks) in &families {
        let kind = match family.kind {
            FamilyKind::Counter => MetricType::Counter,
            FamilyKind::Gauge => MetricType::Gauge,
            FamilyKind::Histogram => MetricType::Histogram,
        };
        w.family(family.name, kind, family.help);
        for (sample, [vertex, subtask]) in family.samples.iter().zip(tasks) {
            let mut labels = vec![("vertex", vertex.as_str()), ("subtask", subtask.as_str())];
            labels.extend(sample.labels.iter().map(|(k, v)| (*k, v.as_str())));
            w.sample(
                &format!("{}{}", family.name, sample.suffix),
                &labels,
                sample.value,
            );
        }
    }
}

/// Checkpoint counts, the last completed one, and the duration histogram.
fn checkpoint_families(w: &mut TextWriter, monitor: &JobMonitor) {
    let counts = monitor.with_checkpoint_stats(|stats| stats.counts());
    let counters = [
        (
            "weir_checkpoints_triggered_total",
            "Checkpoints and savepoints triggered.",
            counts.total,
        ),
        (
            "weir_checkpoints_completed_total",
            "Checkpoints and savepoints completed.",
            counts.completed,
        ),
        (
            "weir_checkpoints_failed_total",
            "Checkpoints and savepoints that failed (declined, expired, not recorded) or were aborted.",
            counts.failed,
        ),
    ];
    for (family, help, value) in counters {
        w.family(family, MetricType::Counter, help);
        w.sample(family, &[], value as f64);
    }
    w.family(
        "weir_checkpoints_in_progress",
        MetricType::Gauge,
        "Checkpoints and savepoints triggered and not yet completed or failed.",
    );
    w.sample(
        "weir_checkpoints_in_progress",
        &[],
        counts.in_progress as f64,
    );

    let last = monitor.last_checkpoint();
    w.family(
        "weir_checkpoint_last_duration_seconds",
        MetricType::Gauge,
        "Trigger to completion of the last completed checkpoint or savepoint (0 before the first).",
    );
    w.sample(
        "weir_checkpoint_last_duration_seconds",
        &[],
        last.as_ref().map_or(0.0, |l| l.duration.as_secs_f64()),
    );
    w.family(
        "weir_checkpoint_last_size_bytes",
        MetricType::Gauge,
        "State bytes of the last completed checkpoint or savepoint (0 before the first).",
    );
    w.sample(
        "weir_checkpoint_last_size_bytes",
        &[],
        last.as_ref().map_or(0.0, |l| l.bytes as f64),
    );
    w.family(
        "weir_checkpoint_last_id",
        MetricType::Gauge,
        "Id of the last completed checkpoint or savepoint (0 before the first).",
    );
    w.sample(
        "weir_checkpoint_last_id",
        &[],
        last.as_ref().map_or(0.0, |l| l.id.0 as f64),
    );

    let histogram = monitor.checkpoint_durations();
    let family = "weir_checkpoint_duration_seconds";
    w.family(
        family,
        MetricType::Histogram,
        "Trigger to completion of every completed checkpoint and savepoint.",
    );
    let bucket = format!("{family}_bucket");
    for (bound, count) in DURATION_BUCKETS.iter().zip(histogram.counts) {
        w.sample(&bucket, &[("le", &format_value(*bound))], count as f64);
    }
    w.sample(&bucket, &[("le", "+Inf")], histogram.count as f64);
    w.sample(&format!("{family}_sum"), &[], histogram.sum_seconds);
    w.sample(&format!("{family}_count"), &[], histogram.count as f64);
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;
    use std::time::{Instant, UNIX_EPOCH};

    use super::*;
    use crate::dataflow::metrics::TaskMetrics;
    use crate::ids::TaskId;
    use crate::ids::{CheckpointId, CheckpointKind};
    use crate::runtime::monitor::TaskRole;

    /// Figures of a connector as a test writes them: one gauge, labelled `part`.
    #[derive(Debug)]
    struct Parts(Vec<(&'static str, f64)>);

    impl crate::dataflow::connector_metrics::ConnectorFigures for Parts {
        fn view(&self) -> (&'static str, serde_json::Value) {
            ("parts", serde_json::Value::Null)
        }

        fn families(&self) -> Vec<Family> {
            vec![Family {
                name: "weir_test_part",
                kind: FamilyKind::Gauge,
                help: "A part.",
                samples: self
                    .0
                    .iter()
                    .map(|(part, value)| crate::dataflow::connector_metrics::Sample {
                        suffix: "",
                        labels: vec![("part", (*part).to_owned())],
                        value: *value,
                    })
                    .collect(),
            }]
        }
    }

    #[test]
    fn a_connectors_family_is_written_once_with_every_tasks_samples_labelled_by_task() {
        let task = |parts: Vec<(&'static str, f64)>| {
            let metrics = Arc::new(TaskMetrics::default());
            metrics.set_connector(Arc::new(Parts(parts)));
            metrics
        };
        let monitor = JobMonitor::default();
        monitor.set_tasks(vec![
            (
                TaskId::new("in", 0),
                TaskRole::Source,
                task(vec![("a", 1.0)]),
            ),
            (TaskId::new("in", 1), TaskRole::Source, task(Vec::new())),
            (
                TaskId::new("in", 2),
                TaskRole::Source,
                task(vec![("b", 2.0), ("c", 3.0)]),
            ),
        ]);
        let mut w = TextWriter::default();
        connector_families(&mut w, &monitor);
        assert_eq!(
            w.finish(),
            "# HELP weir_test_part A part.\n# TYPE weir_test_part gauge\n\
             weir_test_part{vertex=\"in\",subtask=\"0\",part=\"a\"} 1\n\
             weir_test_part{vertex=\"in\",subtask=\"2\",part=\"b\"} 2\n\
             weir_test_part{vertex=\"in\",subtask=\"2\",part=\"c\"} 3\n"
        );
        // A task without samples still declares the family.
        let monitor = JobMonitor::default();
        monitor.set_tasks(vec![(
            TaskId::new("in", 0),
            TaskRole::Source,
            task(Vec::new()),
        )]);
        let mut w = TextWriter::default();
        connector_families(&mut w, &monitor);
        assert_eq!(
            w.finish(),
            "# HELP weir_test_part A part.\n# TYPE weir_test_part gauge\n"
        );
    }

    /// Fails unless every one of `lines` is a whole line of `text`, naming the first missing.
    #[track_caller]
    fn assert_lines(text: &str, lines: &[impl AsRef<str>]) {
        for line in lines {
            let line = line.as_ref();
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in:\n{text}"
            );
        }
    }

    #[test]
    fn escapes_label_values_and_help() {
        assert_eq!(escape_label_value(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape_label_value("two\nlines"), "two\\nlines");
        assert_eq!(escape_help("back\\slash\nnew"), "back\\\\slash\\nnew");
        let mut w = TextWriter::default();
        w.family("x_total", MetricType::Counter, "Help.");
        w.sample(
            "x_total",
            &[("vertex", "we\"ird\\name\n"), ("subtask", "0")],
            3.0,
        );
        assert_eq!(
            w.finish(),
            "# HELP x_total Help.\n# TYPE x_total counter\n\
             x_total{vertex=\"we\\\"ird\\\\name\\n\",subtask=\"0\"} 3\n"
        );
    }

    #[test]
    fn formats_values_as_the_format_reads_them() {
        assert_eq!(format_value(3.0), "3");
        assert_eq!(format_value(0.25), "0.25");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(1e20), "100000000000000000000");
    }

    /// Every line is a comment of the two kinds or a sample of the family
    /// declared last; every family has HELP and TYPE; no family twice.
    fn assert_well_formed(text: &str) -> HashSet<String> {
        let mut families = HashSet::new();
        let mut current: Option<(String, String)> = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let name = rest.split(' ').next().unwrap().to_string();
                assert!(families.insert(name.clone()), "family {name} twice");
                current = Some((name, String::new()));
            } else if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                let (family, k) = current.as_mut().expect("TYPE after HELP");
                assert_eq!(family, name);
                assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
                *k = kind.to_string();
            } else {
                let (family, kind) = current.as_ref().expect("a sample after HELP/TYPE");
                let name = line.split(['{', ' ']).next().unwrap();
                let allowed = if kind == "histogram" {
                    [
                        format!("{family}_bucket"),
                        format!("{family}_sum"),
                        format!("{family}_count"),
                    ]
                    .contains(&name.to_string())
                } else {
                    name == family
                };
                assert!(allowed, "sample {name} under family {family}: {line}");
                let value = line.rsplit(' ').next().unwrap();
                assert!(
                    value.parse::<f64>().is_ok() || ["+Inf", "-Inf", "NaN"].contains(&value),
                    "{line}"
                );
            }
        }
        families
    }

    #[test]
    fn renders_every_family_of_a_running_job() {
        let job = crate::job::Job::from_str(
            "name = \"j\"\n[[source]]\nname = \"gen\"\ntype = \"generator\"\n\
             [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"gen\"]\n",
            "/jobs",
            "j.toml",
        )
        .unwrap();
        let monitor = JobMonitor::default();
        let gen_metrics = Arc::new(TaskMetrics::default());
        gen_metrics.add_records_out(12);
        gen_metrics.add_records_skipped(2);
        gen_metrics.add_busy(Duration::from_millis(1500));
        gen_metrics.watermark.set(12_000);
        gen_metrics.add_records_late(6);
        gen_metrics.set_pending_timers(4);
        let out_metrics = Arc::new(TaskMetrics::default());
        out_metrics.watermark.set(i64::MAX);
        out_metrics.add_records_unwired(9);
        monitor.set_tasks(vec![
            (TaskId::new("gen", 0), TaskRole::Source, gen_metrics),
            (TaskId::new("out", 0), TaskRole::Sink, out_metrics),
        ]);
        monitor.set_status(JobStatus::Running);
        monitor.set_started(UNIX_EPOCH + Duration::from_secs(10));
        let t0 = Instant::now();
        monitor.record_checkpoint(|stats| {
            stats.triggered(CheckpointId(1), CheckpointKind::Checkpoint, false, 2, t0);
            stats.completed(CheckpointId(1), t0 + Duration::from_millis(30));
        });
        let text = render(&job, &monitor, UNIX_EPOCH + Duration::from_secs(15));
        let families = assert_well_formed(&text);
        for family in [
            "weir_job_info",
            "weir_job_status",
            "weir_job_uptime_seconds",
            "weir_job_restarts_total",
            "weir_job_failures_total",
            "weir_task_records_in_total",
            "weir_task_records_out_total",
            "weir_task_records_skipped_total",
            "weir_task_busy_seconds_total",
            "weir_task_backpressured_seconds_total",
            "weir_task_guest_call_seconds_total",
            "weir_task_guest_calls_total",
            "weir_task_watermark_milliseconds",
            "weir_task_watermark_lag_milliseconds",
            "weir_task_records_late_total",
            "weir_task_records_unwired_total",
            "weir_task_pending_timers",
            "weir_checkpoints_triggered_total",
            "weir_checkpoints_completed_total",
            "weir_checkpoints_failed_total",
            "weir_checkpoints_in_progress",
            "weir_checkpoint_last_duration_seconds",
            "weir_checkpoint_last_size_bytes",
            "weir_checkpoint_last_id",
            "weir_checkpoint_duration_seconds",
        ] {
            assert!(families.contains(family), "{family} missing:\n{text}");
        }
        assert_lines(
            &text,
            &[
                "weir_job_status{status=\"RUNNING\"} 1",
                "weir_job_status{status=\"FAILED\"} 0",
                "weir_job_uptime_seconds 5",
                "weir_task_records_out_total{vertex=\"gen\",subtask=\"0\"} 12",
                "weir_task_records_skipped_total{vertex=\"gen\",subtask=\"0\"} 2",
                "weir_task_records_skipped_total{vertex=\"out\",subtask=\"0\"} 0",
                "weir_task_busy_seconds_total{vertex=\"gen\",subtask=\"0\"} 1.5",
                "weir_task_watermark_milliseconds{vertex=\"gen\",subtask=\"0\"} 12000",
                "weir_task_watermark_lag_milliseconds{vertex=\"gen\",subtask=\"0\"} 3000",
                // The end of input is the end of time: later than any timestamp, and no lag.
                "weir_task_watermark_milliseconds{vertex=\"out\",subtask=\"0\"} +Inf",
                "weir_task_records_late_total{vertex=\"gen\",subtask=\"0\"} 6",
                "weir_task_records_late_total{vertex=\"out\",subtask=\"0\"} 0",
                "weir_task_records_unwired_total{vertex=\"out\",subtask=\"0\"} 9",
                "weir_task_pending_timers{vertex=\"gen\",subtask=\"0\"} 4",
                "weir_checkpoints_completed_total 1",
                "weir_checkpoint_duration_seconds_bucket{le=\"0.025\"} 0",
                "weir_checkpoint_duration_seconds_bucket{le=\"0.05\"} 1",
                "weir_checkpoint_duration_seconds_bucket{le=\"+Inf\"} 1",
                "weir_checkpoint_duration_seconds_count 1",
            ],
        );
        assert!(
            !text.contains("weir_kafka_"),
            "no Kafka families without Kafka connectors:\n{text}"
        );
        assert!(
            !text.contains("weir_task_watermark_lag_milliseconds{vertex=\"out\""),
            "no lag at the end of time:\n{text}"
        );
    }

    #[test]
    fn renders_kafka_partitions_and_transactions_with_their_labels() {
        let job = crate::job::Job::from_str(
            "name = \"j\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
             [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"in\"]\n",
            "/jobs",
            "j.toml",
        )
        .unwrap();
        let (in_metrics, out_metrics) = crate::control::api::tests::kafka_tasks();
        let monitor = JobMonitor::default();
        monitor.set_tasks(vec![
            (TaskId::new("in", 0), TaskRole::Source, in_metrics),
            (TaskId::new("out", 0), TaskRole::Sink, out_metrics),
        ]);
        let text = render(&job, &monitor, UNIX_EPOCH);
        let families = assert_well_formed(&text);
        for family in [
            "weir_kafka_source_offset",
            "weir_kafka_source_high_watermark",
            "weir_kafka_source_lag_records",
            "weir_kafka_sink_transactions_total",
            "weir_kafka_sink_records_committed_total",
            "weir_kafka_sink_transactions_resent_total",
            "weir_kafka_sink_commit_seconds",
        ] {
            assert!(families.contains(family), "{family} missing:\n{text}");
        }
        let p0 = "vertex=\"in\",subtask=\"0\",topic=\"words\",partition=\"0\"";
        let p2 = "vertex=\"in\",subtask=\"0\",topic=\"words\",partition=\"2\"";
        assert_lines(&text, &[
            format!("weir_kafka_source_offset{{{p0}}} 40"),
            format!("weir_kafka_source_offset{{{p2}}} 3"),
            format!("weir_kafka_source_high_watermark{{{p0}}} 42"),
            format!("weir_kafka_source_lag_records{{{p0}}} 2"),
            "weir_kafka_sink_transactions_total{vertex=\"out\",subtask=\"0\"} 2".into(),
            "weir_kafka_sink_records_committed_total{vertex=\"out\",subtask=\"0\"} 16".into(),
            "weir_kafka_sink_transactions_resent_total{vertex=\"out\",subtask=\"0\"} 1".into(),
            "weir_kafka_sink_commit_seconds_bucket{vertex=\"out\",subtask=\"0\",le=\"0.001\"} 0"
                .into(),
            "weir_kafka_sink_commit_seconds_bucket{vertex=\"out\",subtask=\"0\",le=\"0.005\"} 1"
                .into(),
            "weir_kafka_sink_commit_seconds_bucket{vertex=\"out\",subtask=\"0\",le=\"+Inf\"} 2"
                .into(),
            "weir_kafka_sink_commit_seconds_sum{vertex=\"out\",subtask=\"0\"} 0.012".into(),
            "weir_kafka_sink_commit_seconds_count{vertex=\"out\",subtask=\"0\"} 2".into(),
        ]);
        // Partition 2's end is not known yet: no high watermark, no lag.
        assert!(!text.contains(&format!("weir_kafka_source_lag_records{{{p2}}}")));
        // Neither task has a watermark yet: the families are declared, without samples.
        assert!(families.contains("weir_task_watermark_milliseconds"));
        assert!(
            !text.contains("weir_task_watermark_milliseconds{"),
            "{text}"
        );
        assert!(
            !text.contains("weir_task_watermark_lag_milliseconds{"),
            "{text}"
        );
    }
}
