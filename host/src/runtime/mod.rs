//! Running a job: the execution graph, the attempt driver (the imperative
//! shell around the checkpoint coordinator), restore, and failover by the
//! restart strategy.
//!
//! ```text
//! JobRunner::run ── attempt 1 ── driver loop (tokio) ◄── TaskEvents ◄── task threads
//!               │                    │ Controls ──────────────────────►
//!               ├── task failure → restart strategy → attempt 2 (restored from the latest checkpoint)
//!               └── finished / cancelled / stopped with a savepoint / failed
//! ```

mod attempt;
mod driver;
mod error;
mod history;
pub mod lock;
pub mod monitor;
pub(crate) mod plan;
mod request;
mod restore;
mod runner;
mod start;
mod worker;

use std::path::PathBuf;

pub use crate::connectors::connector::ConnectorSetupError;
pub use error::RunError;
pub use monitor::{CheckpointFailure, CheckpointSummary, JobMonitor, RestoredCheckpoint};
pub use request::{
    JobRequest, RescaleError, RescaleReply, RescaleResult, Rescaled, SavepointError,
    SavepointReply, SavepointResult, SavepointTaken,
};
pub use restore::RestoreError;
pub use runner::JobRunner;
/// The runner tests' wait for a condition, which the control server's tests share.
#[cfg(test)]
pub(crate) use runner::tests::wait_for;
pub use worker::{StageOutcome, WorkerRequest, WorkerRunner, WorkerStartError};

use crate::job::JobStatus;

/// Where to restore a job from when it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreFrom {
    /// The newest complete checkpoint or savepoint in the job's checkpoint
    /// directory. If there is none, a fresh start — unless an earlier run left
    /// evidence that it committed output (damaged checkpoints, a checkpoint
    /// history that records a completed checkpoint, committed part files of a
    /// file sink): then the run is refused ([`RunError::FreshStartRefused`])
    /// unless [`RunOptions::fresh`] accepts replaying from the beginning.
    Latest,
    /// A given checkpoint or savepoint directory (or its `_metadata` file).
    Path(PathBuf),
}

/// How to run a job, beyond what the job file says.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Restore from a checkpoint or savepoint instead of starting fresh.
    pub restore: Option<RestoreFrom>,
    /// Drop state of vertices the job no longer has, instead of refusing to start.
    pub allow_non_restored_state: bool,
    /// Start from the beginning knowingly, even though an earlier run left
    /// checkpoints or committed output: no warning, and `--restore latest`
    /// with nothing to restore is not refused. Meant without `restore`.
    pub fresh: bool,
    /// Keep compiled modules in this directory and load them from there when they are
    /// already compiled (see [`WasmEngine::with_module_cache`](crate::wasm::WasmEngine));
    /// `None` compiles every module. The CLI passes [`default_module_cache_dir`].
    pub module_cache: Option<PathBuf>,
}

/// Where the CLI keeps compiled modules: `$WEIR_CACHE_DIR`, else `$XDG_CACHE_HOME/weir/modules`,
/// else `$HOME/.cache/weir/modules`; `None` when none of those variables is set.
pub fn default_module_cache_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("WEIR_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("weir").join("modules")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("weir").join("modules")))
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    /// FINISHED, CANCELED or FAILED.
    pub status: JobStatus,
    /// The savepoint taken by a stop-with-savepoint.
    pub savepoint: Option<PathBuf>,
    /// Why the job failed, when it did.
    pub failure: Option<String>,
    /// How many times it was restarted after a failure.
    pub restarts: u32,
}
