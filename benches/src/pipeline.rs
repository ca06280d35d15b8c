//! Whole jobs through the real engine: generator → `count` (key-hash), `uppercase` (forward)
//! or `window` (key-hash, event time) → blackhole.
//!
//! Each run writes a job file into a fresh temporary directory (the module path absolute, the
//! checkpoint directory inside the temporary one), loads it with [`Job::load`], compiles it with
//! [`JobRunner::new`] — outside the timing — and times [`JobRunner::run`] from the call to the
//! job's end: instantiating the guests, generating, routing, counting and draining every record,
//! and every checkpoint taken on the way. Checkpoint statistics are read back afterwards from
//! the `_metadata` file of each checkpoint, which the job is told to retain.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use weir::ids::CheckpointKind;
use weir::job::{Job, JobStatus};
use weir::runtime::{JobMonitor, JobRunner, RunOptions};

use crate::error::BenchError;
use crate::summary::Summary;
use crate::usage::{SelfMeter, Usage};

/// The wasm operator in the middle of the benchmark job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BenchOperator {
    /// The keyed running count (`examples/rust/count`) behind a `key-hash` edge.
    Count,
    /// The same keyed count with its counts kept on the host (`examples/rust/host-count`,
    /// docs/STATE.md), behind a `key-hash` edge.
    HostCount,
    /// The stateless filter and map (`examples/rust/uppercase`) behind a `forward` edge.
    Uppercase,
    /// A tumbling count per key and second of event time (`examples/rust/window`, `tumbling
    /// 1000`) behind a `key-hash` edge. The generator's record `i` has the timestamp `i`
    /// (milliseconds) less up to 500 ms of disorder, so a window holds 1000 records: with many
    /// keys nearly every record opens a window and sets a timer — the costliest case for timers.
    Window,
    /// The same with windows of 1 000 000 records (`tumbling 1000000`): with 100 000 keys, about
    /// ten records per key and window, as 1 s windows over a million records a second.
    WindowWide,
    /// The same keyed count as a Python component (`examples/python/count`), from the file
    /// `$WEIR_BENCH_PY_COUNT` (`scripts/bench-components.sh` builds it).
    PyCount,
    /// The keyed count as a JavaScript component (`examples/js/count`),
    /// `$WEIR_BENCH_JS_COUNT`.
    JsCount,
    /// The keyed count as a Rust component for WASI 0.2 (`examples/rust-component`),
    /// `$WEIR_BENCH_RUST_COMPONENT_COUNT`.
    RustComponentCount,
}

impl BenchOperator {
    /// The operator's name in the job, and in labels.
    pub fn name(self) -> &'static str {
        match self {
            BenchOperator::Count => "count",
            BenchOperator::HostCount => "host-count",
            BenchOperator::Uppercase => "uppercase",
            BenchOperator::Window => "window",
            BenchOperator::WindowWide => "window-wide",
            BenchOperator::PyCount => "py-count",
            BenchOperator::JsCount => "js-count",
            BenchOperator::RustComponentCount => "rust-component-count",
        }
    }

    /// The operator's config in the job file, if it takes one.
    fn config(self) -> Option<&'static str> {
        match self {
            BenchOperator::Window => Some("tumbling 1000"),
            BenchOperator::WindowWide => Some("tumbling 1000000"),
            _ => None,
        }
    }

    /// Whether its source makes event time: out-of-order timestamps and watermarks.
    fn event_time(self) -> bool {
        matches!(self, BenchOperator::Window | BenchOperator::WindowWide)
    }

    /// The partitioner of the edge from the generator.
    fn partition(self) -> &'static str {
        match self {
            BenchOperator::Uppercase => "forward",
            _ => "key-hash",
        }
    }

    /// The operator's module: built for wasm32 in release by this crate's build script, or for
    /// a component, the file its environment variable names (empty when it is not set, which
    /// the job then refuses, naming the path).
    pub fn module(self) -> PathBuf {
        let from_env = |var: &str| PathBuf::from(std::env::var_os(var).unwrap_or_default());
        match self {
            BenchOperator::Count => crate::guests::COUNT_WASM.into(),
            BenchOperator::HostCount => crate::guests::HOST_COUNT_WASM.into(),
            BenchOperator::Uppercase => crate::guests::UPPERCASE_WASM.into(),
            BenchOperator::Window | BenchOperator::WindowWide => crate::guests::WINDOW_WASM.into(),
            BenchOperator::PyCount => from_env("WEIR_BENCH_PY_COUNT"),
            BenchOperator::JsCount => from_env("WEIR_BENCH_JS_COUNT"),
            BenchOperator::RustComponentCount => from_env("WEIR_BENCH_RUST_COMPONENT_COUNT"),
        }
    }
}

impl std::str::FromStr for BenchOperator {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "count" => Ok(BenchOperator::Count),
            "host-count" => Ok(BenchOperator::HostCount),
            "uppercase" => Ok(BenchOperator::Uppercase),
            "window" => Ok(BenchOperator::Window),
            "window-wide" => Ok(BenchOperator::WindowWide),
            "py-count" => Ok(BenchOperator::PyCount),
            "js-count" => Ok(BenchOperator::JsCount),
            "rust-component-count" => Ok(BenchOperator::RustComponentCount),
            other => Err(format!(
                "unknown operator {other:?}: expected count, host-count, uppercase, window, window-wide, \
                 py-count, js-count or rust-component-count"
            )),
        }
    }
}

/// One configuration of the benchmark job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PipelineCase {
    /// The operator between the generator and the blackhole.
    pub operator: BenchOperator,
    /// Parallelism of every vertex (generator, count, blackhole).
    pub parallelism: u32,
    /// Checkpoint interval; `None` = checkpointing off.
    pub interval_ms: Option<u64>,
    /// Records the generator emits over all its subtasks.
    pub records: u64,
    /// Distinct keys.
    pub keys: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Whether tasks may be chained (the job's `chain`); when not, every task has a thread.
    pub chain: bool,
}

impl PipelineCase {
    /// A short name for tables and file names, e.g. `count-p2-100ms`.
    pub fn label(&self) -> String {
        let interval = match self.interval_ms {
            None => "off".to_string(),
            Some(ms) if ms % 1000 == 0 => format!("{}s", ms / 1000),
            Some(ms) => format!("{ms}ms"),
        };
        let unchained = if self.chain { "" } else { "-unchained" };
        format!(
            "{}-p{}-{interval}{unchained}",
            self.operator.name(),
            self.parallelism
        )
    }

    /// The job file of this case: `checkpoints` is the checkpoint directory (absolute).
    pub fn job_toml(&self, checkpoints: &Path) -> String {
        let mut toml = format!("name = \"bench-{}\"\n", self.label());
        if !self.chain {
            toml.push_str("chain = false\n");
        }
        toml.push('\n');
        // Checkpointing off is the absence of an interval.
        toml.push_str("[checkpoint]\n");
        if let Some(ms) = self.interval_ms {
            toml.push_str(&format!("interval = \"{ms}ms\"\n"));
        }
        toml.push_str(&format!(
            "directory = {}\n\
             # Keep every checkpoint, so each one's statistics can be read afterwards.\n\
             retained = 100000\n\n\
             [restart]\n\
             strategy = \"none\"\n\n\
             [[source]]\n\
             name = \"gen\"\n\
             type = \"generator\"\n\
             seed = 1\n\
             count = {records}\n\
             keys = {keys}\n\
             value_size = {value_size}\n\
             parallelism = {p}\n\
             {event_time}\n\
             [[operator]]\n\
             name = \"{operator}\"\n\
             module = {module}\n\
             parallelism = {p}\n\
             {config}\
             inputs = [{{ from = \"gen\", partition = \"{partition}\" }}]\n\n\
             [[sink]]\n\
             name = \"sink\"\n\
             type = \"blackhole\"\n\
             parallelism = {p}\n\
             inputs = [{{ from = \"{operator}\", partition = \"forward\" }}]\n",
            toml_string(checkpoints),
            records = self.records,
            keys = self.keys,
            value_size = self.value_size,
            p = self.parallelism,
            module = toml_string(&self.operator.module()),
            operator = self.operator.name(),
            partition = self.operator.partition(),
            event_time = if self.operator.event_time() {
                "disorder = 500\nwatermark = { out_of_orderness = \"500ms\", interval = \"10ms\" }\n"
            } else {
                ""
            },
            config = self
                .operator
                .config()
                .map(|c| format!("config = \"{c}\"\n"))
                .unwrap_or_default(),
        ));
        toml
    }
}

/// A path as a TOML literal string (single quotes: no escapes to get wrong).
fn toml_string(path: &Path) -> String {
    format!("'{}'", path.display())
}

/// What one completed checkpoint cost, from its `_metadata`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckpointSample {
    /// The checkpoint id.
    pub id: u64,
    /// Trigger to completion, in milliseconds.
    pub duration_ms: u64,
    /// State of all tasks, in bytes (sources' positions and sinks' included).
    pub state_bytes: u64,
    /// State of the operator's tasks alone, in bytes.
    pub count_state_bytes: u64,
    /// Longest synchronous part (guest snapshot and copy out) of any task, in milliseconds.
    pub max_sync_ms: u64,
    /// Longest asynchronous part (frame, write, fsync) of any task, in milliseconds.
    pub max_async_ms: u64,
    /// Longest barrier alignment of any task, in milliseconds.
    pub max_alignment_ms: u64,
}

/// One run of a case.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineRun {
    /// `JobRunner::run`, call to return, in seconds.
    pub seconds: f64,
    /// Records through the job per second: generated records / `seconds`.
    pub records_per_s: f64,
    /// Checkpoints completed, as the job's monitor counted them.
    pub checkpoints_completed: u64,
    /// Checkpoints failed.
    pub checkpoints_failed: u64,
    /// Every completed checkpoint, from its metadata.
    pub checkpoints: Vec<CheckpointSample>,
    /// The benchmark process's peak resident memory during the run, bytes (Linux: the peak is
    /// reset through `/proc/self/clear_refs` before the run and read from `VmHWM` after it);
    /// it includes the benchmark's own few MB.
    pub peak_rss_bytes: Option<u64>,
    /// CPU time the process used during the run (every thread, user and system), seconds
    /// (Linux: from `/proc/self/stat`, 10 ms resolution).
    pub cpu_seconds: Option<f64>,
    /// Records through the job per second in the first quarter of the run and in the last,
    /// from the delivered count sampled every [`SAMPLE_EVERY`]: a job that slows down as it
    /// goes (state growing, memory fragmenting, checkpoints piling up) shows it here, where
    /// the average hides it. `None` for a run too short for four samples.
    pub quarters_records_per_s: Option<(f64, f64)>,
}

impl PipelineRun {
    /// Cores the run kept busy on average: CPU time over wall time. With 2 cores, 2.0 means the
    /// job had the whole machine, whatever its parallelism.
    pub fn cores_used(&self) -> Option<f64> {
        self.cpu_seconds.map(|cpu| cpu / self.seconds)
    }
}

/// How often a run samples what it has delivered, for [`PipelineRun::quarters_records_per_s`].
pub const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// Records delivered so far: what reached the sinks, or for a window operator, which emits a
/// record per window, what the operator took in.
fn delivered(monitor: &JobMonitor, operator: BenchOperator) -> u64 {
    if operator.event_time() {
        monitor
            .tasks()
            .iter()
            .filter(|(id, _, _)| id.vertex == operator.name())
            .map(|(_, _, m)| m.records_in())
            .sum()
    } else {
        monitor.records_out()
    }
}

/// The rates of the first and last quarter of a run of `seconds` that delivered `total`, from
/// `(seconds since the start, delivered)` samples in time order; `None` with fewer than four.
fn quarter_rates(samples: &[(f64, u64)], seconds: f64, total: u64) -> Option<(f64, f64)> {
    if samples.len() < 4 || seconds <= 0.0 {
        return None;
    }
    // The count at `t`: the last sample at or before it (the start counts as 0).
    let at = |t: f64| {
        samples
            .iter()
            .take_while(|(when, _)| *when <= t)
            .last()
            .map_or((0.0, 0), |&s| s)
    };
    let (q1, n1) = at(seconds / 4.0);
    let (q3, n3) = at(seconds * 3.0 / 4.0);
    let first = (q1 > 0.0).then(|| n1 as f64 / q1)?;
    let last = (seconds > q3).then(|| total.saturating_sub(n3) as f64 / (seconds - q3))?;
    Some((first, last))
}

/// Runs `case` once, in a fresh temporary directory.
pub fn run_once(case: &PipelineCase) -> Result<PipelineRun, BenchError> {
    let dir = tempfile::tempdir().map_err(|source| BenchError::Io {
        action: "create a temporary directory",
        path: std::env::temp_dir(),
        source,
    })?;
    let job_file = dir.path().join("job.toml");
    let toml = case.job_toml(&dir.path().join("checkpoints"));
    std::fs::write(&job_file, toml).map_err(|source| BenchError::Io {
        action: "write",
        path: job_file.clone(),
        source,
    })?;
    let job = Job::load(&job_file)?;
    let job_name = job.name.clone();
    let runner = JobRunner::new(job, RunOptions::default())?;
    let monitor = runner.monitor();
    let storage = runner.storage();

    // The sender stays alive for the whole run: nothing is ever requested of the job.
    let (_requests, requests) = tokio::sync::mpsc::unbounded_channel();
    let meter = SelfMeter::start();
    let start = Instant::now();
    let running = AtomicBool::new(true);
    let (outcome, samples) = std::thread::scope(|scope| {
        let sampler = scope.spawn(|| {
            let mut samples = Vec::new();
            while running.load(Ordering::Relaxed) {
                std::thread::sleep(SAMPLE_EVERY);
                let when = start.elapsed().as_secs_f64();
                samples.push((when, delivered(&monitor, case.operator)));
            }
            samples
        });
        let outcome = runner.run(requests);
        running.store(false, Ordering::Relaxed);
        (outcome, sampler.join().unwrap_or_default())
    });
    let outcome = outcome?;
    let seconds = start.elapsed().as_secs_f64();
    let Usage {
        cpu_seconds,
        peak_rss_bytes,
    } = meter.finish();
    if outcome.status != JobStatus::Finished {
        return Err(BenchError::JobEnded {
            job: job_name,
            status: outcome.status,
            failure: outcome.failure.unwrap_or_default(),
        });
    }
    let delivered = delivered(&monitor, case.operator);
    if delivered != case.records {
        return Err(BenchError::Wrong(format!(
            "{} records generated but {delivered} reached the {}",
            case.records,
            if case.operator.event_time() {
                "window operator"
            } else {
                "sink"
            }
        )));
    }

    let (checkpoints_completed, checkpoints_failed) = monitor.checkpoint_counts();
    let mut checkpoints = Vec::new();
    for listing in storage.list()? {
        let Some(meta) = listing.metadata() else {
            continue;
        };
        if meta.kind != CheckpointKind::Checkpoint {
            continue;
        }
        let max = |f: fn(&weir::checkpoint::metadata::TaskStateMeta) -> u64| {
            meta.tasks.iter().map(f).max().unwrap_or(0)
        };
        checkpoints.push(CheckpointSample {
            id: meta.checkpoint_id.0,
            duration_ms: meta.duration_ms,
            state_bytes: meta.state_bytes(),
            count_state_bytes: meta
                .tasks
                .iter()
                .filter(|t| t.task.vertex == case.operator.name())
                .map(|t| t.state_bytes)
                .sum(),
            max_sync_ms: max(|t| t.sync_duration_ms),
            max_async_ms: max(|t| t.async_duration_ms),
            max_alignment_ms: max(|t| t.alignment_duration_ms),
        });
    }
    Ok(PipelineRun {
        seconds,
        records_per_s: case.records as f64 / seconds,
        checkpoints_completed,
        checkpoints_failed,
        checkpoints,
        peak_rss_bytes,
        cpu_seconds,
        quarters_records_per_s: quarter_rates(&samples, seconds, delivered),
    })
}

/// A case measured several times, summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineResult {
    /// What was run.
    pub case: PipelineCase,
    /// Records per second over the runs.
    pub records_per_s: Summary,
    /// Checkpoints completed per run.
    pub checkpoints_completed: Vec<u64>,
    /// Checkpoints failed per run.
    pub checkpoints_failed: Vec<u64>,
    /// Checkpoint duration (trigger to completion, ms) over every checkpoint of every run.
    pub checkpoint_duration_ms: Option<Summary>,
    /// Longest synchronous part of a task, ms, over every checkpoint of every run.
    pub checkpoint_sync_ms: Option<Summary>,
    /// Longest asynchronous part of a task, ms, over every checkpoint of every run.
    pub checkpoint_async_ms: Option<Summary>,
    /// Total state bytes of a checkpoint, over every checkpoint of every run.
    pub checkpoint_bytes: Option<Summary>,
    /// Peak resident memory of the benchmark process per run, bytes.
    pub peak_rss_bytes: Option<Summary>,
    /// Cores kept busy per run ([`PipelineRun::cores_used`]).
    pub cores_used: Option<Summary>,
    /// Records per second in the first quarter of each run ([`PipelineRun::quarters_records_per_s`]).
    pub first_quarter_records_per_s: Option<Summary>,
    /// Records per second in the last quarter of each run.
    pub last_quarter_records_per_s: Option<Summary>,
    /// Every run, as measured.
    pub runs: Vec<PipelineRun>,
}

/// Runs `case` `runs` times (after one unrecorded warm-up run when `warm_up`) and summarises.
///
/// With `min_seconds`, the measured runs last about that long or longer: the warm-up run's
/// rate sets their records (never fewer than the case's, rounded up to a million), so the result's case
/// says how many were run.
pub fn measure(
    case: &PipelineCase,
    runs: usize,
    warm_up: bool,
    min_seconds: Option<f64>,
    mut progress: impl FnMut(&PipelineRun),
) -> Result<PipelineResult, BenchError> {
    let mut case = case.clone();
    if warm_up {
        let trial = run_once(&case)?;
        if let Some(min) = min_seconds {
            // Half again the target: the short warm-up run pays the start-up and a cold cache,
            // and runs here vary by a fifth; at 10 % over, measured runs lasted 16–26 s for 20.
            let wanted = (trial.records_per_s * min * 1.5 / 1e6).ceil() as u64 * 1_000_000;
            case.records = case.records.max(wanted);
        }
    }
    let case = &case;
    let mut done = Vec::with_capacity(runs);
    for _ in 0..runs {
        let run = run_once(case)?;
        progress(&run);
        done.push(run);
    }
    let all = |f: fn(&CheckpointSample) -> u64| {
        let samples: Vec<f64> = done
            .iter()
            .flat_map(|r| r.checkpoints.iter().map(|c| f(c) as f64))
            .collect();
        Summary::of(&samples)
    };
    // A figure of each run that has it.
    let each = |f: fn(&PipelineRun) -> Option<f64>| {
        Summary::of(&done.iter().filter_map(f).collect::<Vec<_>>())
    };
    let rates: Vec<f64> = done.iter().map(|r| r.records_per_s).collect();
    Ok(PipelineResult {
        case: case.clone(),
        records_per_s: Summary::of(&rates).expect("at least one run"),
        checkpoints_completed: done.iter().map(|r| r.checkpoints_completed).collect(),
        checkpoints_failed: done.iter().map(|r| r.checkpoints_failed).collect(),
        checkpoint_duration_ms: all(|c| c.duration_ms),
        checkpoint_sync_ms: all(|c| c.max_sync_ms),
        checkpoint_async_ms: all(|c| c.max_async_ms),
        checkpoint_bytes: all(|c| c.state_bytes),
        peak_rss_bytes: each(|r| r.peak_rss_bytes.map(|b| b as f64)),
        cores_used: each(PipelineRun::cores_used),
        first_quarter_records_per_s: each(|r| r.quarters_records_per_s.map(|q| q.0)),
        last_quarter_records_per_s: each(|r| r.quarters_records_per_s.map(|q| q.1)),
        runs: done,
    })
}
