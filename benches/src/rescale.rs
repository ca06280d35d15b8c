//! What a rescale costs a restore: a savepoint of the `count` job at parallelism 2 over N keys,
//! restored by a new [`JobRunner`](weir::runtime::JobRunner) at parallelism 2 (each subtask
//! takes its own state) and at 3 (the states are split and merged by key group first,
//! docs/ABI.md §16), timed until the first record reaches the sink, modules loaded from a warm
//! cache. The difference is what splitting the state adds.

use serde::Serialize;

use crate::error::BenchError;
use crate::startup::{count_job, directory_bytes, restore_once, take_savepoint, temp_dir, write};
use crate::summary::Summary;

/// One key count's restores, in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RescaleResult {
    /// Distinct keys in the savepoint.
    pub keys: u64,
    /// The savepoint's size in bytes.
    pub state_bytes: u64,
    /// Restored at parallelism 2, as it was taken: → first record at the sink.
    pub same_parallelism_ms: Summary,
    /// Restored at parallelism 3: → first record at the sink.
    pub rescaled_ms: Summary,
}

/// Takes a savepoint of the count job at parallelism 2 over `keys` keys and restores it `runs`
/// times at parallelism 2 and at 3, alternating.
pub fn measure(keys: u64, runs: usize) -> Result<RescaleResult, BenchError> {
    let dir = temp_dir()?;
    let cache = dir.path().join("module-cache");
    let jobs = dir.path().join("jobs");
    std::fs::create_dir_all(&jobs).map_err(|source| BenchError::Io {
        action: "create",
        path: jobs.clone(),
        source,
    })?;
    let job = |p: u32| -> Result<std::path::PathBuf, BenchError> {
        let path = jobs.join(format!("count-{p}.toml"));
        write(&path, &count_job(dir.path(), keys, "exports", p))?;
        Ok(path)
    };
    let (at_two, at_three) = (job(2)?, job(3)?);
    let savepoint = take_savepoint(&at_two, keys, &cache)?;
    let state_bytes = directory_bytes(&savepoint)?;
    let (mut same, mut rescaled) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        same.push(restore_once(&at_two, &savepoint, &cache)?);
        rescaled.push(restore_once(&at_three, &savepoint, &cache)?);
    }
    let summary = |s: &[f64]| Summary::of(s).expect("at least one run");
    Ok(RescaleResult {
        keys,
        state_bytes,
        same_parallelism_ms: summary(&same),
        rescaled_ms: summary(&rescaled),
    })
}
