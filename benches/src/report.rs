//! [`Report`]: every result of a benchmark run, written as JSON for machines
//! (`target/bench-results.json`) — and the reader of criterion's own result files, so the
//! guest-call results land in the same file.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use crate::error::BenchError;
use crate::pipeline::PipelineResult;
use crate::startup::StartupResult;
use crate::state_size::StateSizeResult;
use crate::summary::Summary;

/// Everything one `scripts/bench.sh` run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Where it ran.
    pub machine: Machine,
    /// The criterion guest-call benchmark, one entry per benchmark.
    pub guest_call: Vec<CriterionResult>,
    /// The job benchmark, one entry per case.
    pub pipeline: Vec<PipelineResult>,
    /// Checkpoint and restore against state size, one entry per size.
    pub state_size: Vec<StateSizeResult>,
    /// Start-up and restore latency, when measured.
    pub startup: Option<StartupResult>,
    /// Restores at the same parallelism and rescaled, one entry per key count.
    pub rescale: Vec<crate::rescale::RescaleResult>,
    /// A task's state written to and read from S3 (moto) and local files, one entry per size.
    pub object_storage: Vec<crate::object_storage::ObjectStorageResult>,
}

/// The machine and how busy it was.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// Logical CPUs available to this process.
    pub cpus: usize,
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// `/proc/loadavg` when the runtime benchmark started.
    pub load_before: Option<String>,
    /// `/proc/loadavg` when it ended.
    pub load_after: Option<String>,
}

impl Machine {
    /// What a benchmark prints first: `2 CPUs, AMD EPYC; load before: 1.07 2.37 2.79 …`.
    pub fn summary(&self) -> String {
        format!(
            "{} CPUs, {}; load before: {}",
            self.cpus,
            self.cpu_model.as_deref().unwrap_or("unknown CPU"),
            self.load_before.as_deref().unwrap_or("?")
        )
    }

    /// The machine now (`load_after` still unset).
    pub fn now() -> Machine {
        Machine {
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_model: std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|info| {
                    info.lines()
                        .find(|l| l.starts_with("model name"))
                        .and_then(|l| l.split_once(':'))
                        .map(|(_, model)| model.trim().to_string())
                }),
            load_before: load_average(),
            load_after: None,
        }
    }
}

/// `/proc/loadavg`, trimmed.
pub fn load_average() -> Option<String> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.trim().to_string())
}

/// One criterion benchmark over one or more saved baselines (one per repetition of the suite).
#[derive(Debug, Clone, Serialize)]
pub struct CriterionResult {
    /// Criterion's id, e.g. `count/wasm/64`.
    pub id: String,
    /// The group, e.g. `count`.
    pub group: String,
    /// The function, e.g. `wasm`.
    pub function: String,
    /// The parameter: the batch size.
    pub batch_size: Option<u64>,
    /// The baselines read, in order.
    pub baselines: Vec<String>,
    /// Criterion's median time per iteration (one batch), ns, one sample per baseline.
    pub ns_per_batch: Summary,
    /// Records per second from each baseline's median (batch size / time), when the
    /// benchmark declares a throughput in elements.
    pub records_per_s: Option<Summary>,
}

/// Reads every benchmark under `dir` (criterion's output directory, `target/criterion`) that
/// has results saved under the given baseline names (`--save-baseline NAME`).
pub fn read_criterion(
    dir: &Path,
    baselines: &[String],
) -> Result<Vec<CriterionResult>, BenchError> {
    let mut found = Vec::new();
    find_benchmarks(dir, &mut found)?;
    found.sort();
    found.dedup();
    let mut results = Vec::new();
    for bench_dir in found {
        let Some(info_file) = baselines
            .iter()
            .map(|b| bench_dir.join(b).join("benchmark.json"))
            .find(|f| f.is_file())
        else {
            continue;
        };
        let info = read_json(&info_file)?;
        let text = |key: &str| info.get(key).and_then(Value::as_str).map(str::to_string);
        let elements = info
            .get("throughput")
            .and_then(|t| t.get("Elements"))
            .and_then(Value::as_u64);
        let (mut ns, mut rates, mut used) = (Vec::new(), Vec::new(), Vec::new());
        for baseline in baselines {
            let path = bench_dir.join(baseline).join("estimates.json");
            if !path.exists() {
                continue;
            }
            let estimates = read_json(&path)?;
            let Some(median) = estimates
                .get("median")
                .and_then(|m| m.get("point_estimate"))
                .and_then(Value::as_f64)
            else {
                continue;
            };
            ns.push(median);
            if let Some(elements) = elements {
                rates.push(elements as f64 / (median * 1e-9));
            }
            used.push(baseline.clone());
        }
        let Some(ns_per_batch) = Summary::of(&ns) else {
            continue;
        };
        results.push(CriterionResult {
            id: text("full_id").unwrap_or_default(),
            group: text("group_id").unwrap_or_default(),
            function: text("function_id").unwrap_or_default(),
            batch_size: text("value_str").and_then(|v| v.parse().ok()),
            baselines: used,
            ns_per_batch,
            records_per_s: Summary::of(&rates),
        });
    }
    Ok(results)
}

/// Collects the benchmark directories under `dir`: criterion keeps one sub-directory per
/// baseline (`new`, `run1`, …) in each, holding `benchmark.json` and `estimates.json`.
fn find_benchmarks(dir: &Path, found: &mut Vec<PathBuf>) -> Result<(), BenchError> {
    let io = |source| BenchError::Io {
        action: "read the directory",
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
        if !path.is_dir() {
            continue;
        }
        if path.join("benchmark.json").is_file() {
            if found.last().is_none_or(|last| last != dir) {
                found.push(dir.to_path_buf());
            }
        } else {
            find_benchmarks(&path, found)?;
        }
    }
    Ok(())
}

/// Writes a benchmark's results to `path` as pretty JSON, and says where on standard output.
pub fn write_json(path: &Path, results: &impl Serialize) -> Result<(), BenchError> {
    let json = serde_json::to_vec_pretty(results).expect("results serialize to JSON");
    std::fs::write(path, json).map_err(|source| BenchError::Io {
        action: "write",
        path: path.to_path_buf(),
        source,
    })?;
    println!("results written to {}", path.display());
    Ok(())
}

fn read_json(path: &Path) -> Result<Value, BenchError> {
    let bytes = std::fs::read(path).map_err(|source| BenchError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| BenchError::Io {
        action: "parse",
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e),
    })
}
