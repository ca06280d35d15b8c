//! How fast a job starts, and how fast it comes back from a checkpoint.
//!
//! - **process start**: `weir run` of a trivial job (a generator of one record → `uppercase` →
//!   blackhole, checkpointing off), as a child process, timed from spawn to exit: an upper
//!   bound on "process start → job running", since it includes running and ending the job.
//!   Measured with the module compiled on the way (`--no-module-cache`) and loaded from a warm
//!   cache of compiled modules; and, warm, from spawn to the log line `weir run` writes once
//!   the modules are loaded and the job is about to start its tasks.
//! - **restore → first record**: a `count` job that ran until its state was about
//!   `state_bytes` and stopped with a savepoint; then, timed: a new [`JobRunner`] (modules
//!   loaded from the warm cache) restoring that savepoint, until the first record has reached
//!   the sink. In-process, so it leaves out the process start measured above; the two add up to
//!   the "new process restoring a checkpoint → first record processed". Measured twice:
//!   with `count` checkpointed through its exports, and as an image (the savepoint then holds
//!   the guest's memory, and the runner's new engine has no warm pool slot: this is the first
//!   restore of a process, reading included).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::mpsc::UnboundedSender;
use weir::job::{Job, JobStatus};
use weir::runtime::{
    JobMonitor, JobOutcome, JobRequest, JobRunner, RestoreFrom, RunError, RunOptions,
};

use crate::error::BenchError;
use crate::guests::{COUNT_WASM, UPPERCASE_WASM};
use crate::state_size::keys_for;
use crate::summary::Summary;

/// Results of the start-up benchmarks, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StartupResult {
    /// `weir run` of the trivial job, compiling its module.
    pub cold_start_ms: Summary,
    /// `weir run` of the trivial job, its module loaded from the cache.
    pub warm_start_ms: Summary,
    /// Spawn → the log line saying the job starts, module from the cache.
    pub warm_to_running_ms: Summary,
    /// The size of the savepoint's state, bytes.
    pub restore_state_bytes: u64,
    /// New runner restoring the savepoint → first record at the sink.
    pub restore_to_first_record_ms: Summary,
    /// The size of the savepoint of the same keys with `count` checkpointed as an image, bytes.
    pub image_restore_state_bytes: u64,
    /// New runner restoring that image savepoint → first record at the sink.
    pub image_restore_to_first_record_ms: Summary,
}

/// The `weir` binary built next to this benchmark (`cargo build --release -p weir`).
fn weir_binary() -> Result<PathBuf, BenchError> {
    crate::weir_beside_exe(
        "build it first with `cargo build --release -p weir` (scripts/bench.sh does)",
    )
}

pub(crate) fn write(path: &Path, text: &str) -> Result<(), BenchError> {
    std::fs::write(path, text).map_err(|source| BenchError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn temp_dir() -> Result<tempfile::TempDir, BenchError> {
    tempfile::tempdir().map_err(|source| BenchError::Io {
        action: "create a temporary directory",
        path: std::env::temp_dir(),
        source,
    })
}

/// `weir run JOB` with compiled modules kept in `cache`, logging at `log_level` to a pipe.
fn weir_run(weir: &Path, job: &Path, cache: &Path, log_level: &str) -> Command {
    let mut command = Command::new(weir);
    command
        .arg("run")
        .arg(job)
        .env("WEIR_CACHE_DIR", cache)
        .env("RUST_LOG", log_level)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Times `weir run JOB` `runs` times, in ms; fails unless every run exits 0.
fn time_runs(
    weir: &Path,
    job: &Path,
    cache: &Path,
    extra: &[&str],
    runs: usize,
) -> Result<Vec<f64>, BenchError> {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let output = weir_run(weir, job, cache, "warn")
            .args(extra)
            .output()
            .map_err(|source| BenchError::Io {
                action: "run",
                path: weir.to_path_buf(),
                source,
            })?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        if !output.status.success() {
            return Err(BenchError::Wrong(format!(
                "`weir run {}` ended with {}: {}",
                job.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        samples.push(ms);
    }
    Ok(samples)
}

/// What `weir run` logs once its modules are loaded and the job is about to run.
const STARTING: &str = " starting; checkpoints in ";

/// Times `weir run JOB` from spawn to its log line saying the job starts (modules loaded, the
/// task threads about to be spawned), `runs` times, in ms; each process then runs to its end.
fn time_to_start(
    weir: &Path,
    job: &Path,
    cache: &Path,
    runs: usize,
) -> Result<Vec<f64>, BenchError> {
    use std::io::{BufRead, BufReader};
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        let mut child = weir_run(weir, job, cache, "info")
            .spawn()
            .map_err(|source| BenchError::Io {
                action: "run",
                path: weir.to_path_buf(),
                source,
            })?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let mut seen = Vec::new();
        let mut started = None;
        for line in BufReader::new(stderr).lines() {
            let line = line.unwrap_or_default();
            if started.is_none() && line.contains(STARTING) {
                started = Some(start.elapsed().as_secs_f64() * 1e3);
            }
            seen.push(line);
        }
        let status = child.wait().map_err(|source| BenchError::Io {
            action: "wait for",
            path: weir.to_path_buf(),
            source,
        })?;
        match started {
            Some(ms) if status.success() => samples.push(ms),
            _ => {
                return Err(BenchError::Wrong(format!(
                    "`weir run {}` ended with {status} without saying it started: {}",
                    job.display(),
                    seen.join("\n")
                )));
            }
        }
    }
    Ok(samples)
}

/// The trivial job: one generated record through `uppercase` into a blackhole.
fn trivial_job(dir: &Path) -> String {
    format!(
        "name = \"startup\"\n\n\
         [checkpoint]\n\
         directory = '{}'\n\n\
         [[source]]\nname = \"gen\"\ntype = \"generator\"\ncount = 1\n\n\
         [[operator]]\nname = \"map\"\nmodule = '{UPPERCASE_WASM}'\ninputs = [\"gen\"]\n\n\
         [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"map\"]\n",
        dir.join("checkpoints").display()
    )
}

/// The restore job: an unbounded generator over `keys` keys → key-hash → `count` (of
/// `parallelism` subtasks) → blackhole, `count` checkpointed as `capture` says.
pub(crate) fn count_job(dir: &Path, keys: u64, capture: &str, parallelism: u32) -> String {
    format!(
        "name = \"restore\"\n\n\
         [checkpoint]\n\
         directory = '{}'\n\n\
         [restart]\nstrategy = \"none\"\n\n\
         [[source]]\nname = \"gen\"\ntype = \"generator\"\nseed = 3\nkeys = {keys}\n\n\
         [[operator]]\nname = \"count\"\nmodule = '{COUNT_WASM}'\ncheckpoint = \"{capture}\"\n\
         parallelism = {parallelism}\n\
         inputs = [{{ from = \"gen\", partition = \"key-hash\" }}]\n\n\
         [[sink]]\nname = \"out\"\ntype = \"blackhole\"\n\
         inputs = [{{ from = \"count\", partition = \"rebalance\" }}]\n",
        dir.join("checkpoints").display()
    )
}

/// A job loaded from `job` and running on a thread of its own.
struct Running {
    monitor: JobMonitor,
    requests: UnboundedSender<JobRequest>,
    running: JoinHandle<Result<JobOutcome, RunError>>,
}

impl Running {
    fn start(job: &Path, options: RunOptions) -> Result<Running, BenchError> {
        let runner = JobRunner::new(Job::load(job)?, options)?;
        let monitor = runner.monitor();
        let (requests, rx) = tokio::sync::mpsc::unbounded_channel();
        let running = std::thread::spawn(move || runner.run(rx));
        Ok(Running {
            monitor,
            requests,
            running,
        })
    }

    /// Polls every `every` until `done` says so of the job's figures, or the job ends first.
    fn wait_until(&self, every: Duration, done: impl Fn(&JobMonitor) -> bool) {
        while !done(&self.monitor) && !self.running.is_finished() {
            std::thread::sleep(every);
        }
    }

    /// Sends `request` and waits for the job's outcome; `what` names the run if it panicked.
    fn end(self, request: JobRequest, what: &str) -> Result<JobOutcome, BenchError> {
        let _ = self.requests.send(request);
        self.running
            .join()
            .map_err(|_| BenchError::Wrong(format!("the {what} run panicked")))?
            .map_err(BenchError::from)
    }
}

/// Runs the count job until every key was likely seen (`keys · ln keys` records, twice), then
/// stops it with a savepoint; returns the savepoint's directory.
pub(crate) fn take_savepoint(job: &Path, keys: u64, cache: &Path) -> Result<PathBuf, BenchError> {
    let options = RunOptions {
        module_cache: Some(cache.to_path_buf()),
        ..RunOptions::default()
    };
    let job = Running::start(job, options)?;
    let enough = (2.0 * keys as f64 * (keys as f64).ln()) as u64;
    job.wait_until(Duration::from_millis(20), |m| m.records_out() >= enough);
    let outcome = job.end(JobRequest::StopWithSavepoint, "savepoint")?;
    outcome.savepoint.ok_or_else(|| {
        BenchError::Wrong(format!(
            "the savepoint run ended {:?} without a savepoint: {}",
            outcome.status,
            outcome.failure.unwrap_or_default()
        ))
    })
}

/// A new runner restoring `savepoint`, until the first record reaches the sink, in ms.
pub(crate) fn restore_once(job: &Path, savepoint: &Path, cache: &Path) -> Result<f64, BenchError> {
    let start = Instant::now();
    let options = RunOptions {
        restore: Some(RestoreFrom::Path(savepoint.to_path_buf())),
        module_cache: Some(cache.to_path_buf()),
        ..RunOptions::default()
    };
    let job = Running::start(job, options)?;
    job.wait_until(Duration::from_micros(200), |m| m.records_out() > 0);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    let outcome = job.end(JobRequest::Cancel, "restored")?;
    if outcome.status != JobStatus::Canceled {
        return Err(BenchError::Wrong(format!(
            "the restored run ended {:?} before it was cancelled: {}",
            outcome.status,
            outcome.failure.unwrap_or_default()
        )));
    }
    Ok(ms)
}

/// Runs both benchmarks, `runs` times each.
pub fn measure(state_bytes: u64, runs: usize) -> Result<StartupResult, BenchError> {
    let dir = temp_dir()?;
    let cache = dir.path().join("module-cache");
    let weir = weir_binary()?;

    let trivial = dir.path().join("trivial.toml");
    write(&trivial, &trivial_job(dir.path()))?;
    let cold = time_runs(&weir, &trivial, &cache, &["--no-module-cache"], runs)?;
    // The first run with the cache fills it.
    time_runs(&weir, &trivial, &cache, &[], 1)?;
    let warm = time_runs(&weir, &trivial, &cache, &[], runs)?;
    let to_running = time_to_start(&weir, &trivial, &cache, runs)?;

    let keys = keys_for(state_bytes);
    let (restore_state_bytes, restores) = restore_runs(dir.path(), &cache, keys, "exports", runs)?;
    let (image_restore_state_bytes, image_restores) =
        restore_runs(dir.path(), &cache, keys, "image", runs)?;
    let summary = |s: &[f64]| Summary::of(s).expect("at least one run");
    Ok(StartupResult {
        cold_start_ms: summary(&cold),
        warm_start_ms: summary(&warm),
        warm_to_running_ms: summary(&to_running),
        restore_state_bytes,
        restore_to_first_record_ms: summary(&restores),
        image_restore_state_bytes,
        image_restore_to_first_record_ms: summary(&image_restores),
    })
}

/// Takes a savepoint of the count job over `keys` keys, `count` checkpointed as `capture`, and
/// restores it `runs` times; returns the savepoint's size in bytes and each restore's ms.
fn restore_runs(
    dir: &Path,
    cache: &Path,
    keys: u64,
    capture: &str,
    runs: usize,
) -> Result<(u64, Vec<f64>), BenchError> {
    let job = dir.join(format!("restore-{capture}.toml"));
    write(&job, &count_job(&dir.join(capture), keys, capture, 1))?;
    let savepoint = take_savepoint(&job, keys, cache)?;
    let bytes = directory_bytes(&savepoint)?;
    let mut restores = Vec::with_capacity(runs);
    for _ in 0..runs {
        restores.push(restore_once(&job, &savepoint, cache)?);
    }
    Ok((bytes, restores))
}

/// The bytes of the files in `dir` (not below it).
pub(crate) fn directory_bytes(dir: &Path) -> Result<u64, BenchError> {
    Ok(std::fs::read_dir(dir)
        .map_err(|source| BenchError::Io {
            action: "list",
            path: dir.to_path_buf(),
            source,
        })?
        .filter_map(|e| e.ok()?.metadata().ok())
        .map(|m| m.len())
        .sum())
}
