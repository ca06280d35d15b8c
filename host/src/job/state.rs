//! The state settings of a job: the `[state]` table of the job file, validated. Where and
//! within what memory its operators keep keyed state on the host (docs/STATE.md); the stores
//! themselves are [`crate::state::keyed`]'s, which the runner makes from these.

use std::path::PathBuf;

/// The memory the stores of a process share when the job does not say: their block cache and
/// write buffers together (Flink's managed memory for RocksDB is of this order per slot).
pub const DEFAULT_STATE_MEMORY: usize = 512 << 20;

/// The smallest `state.memory` a job may set: RocksDB's write buffers need a few MiB each.
pub const MIN_STATE_MEMORY: u64 = 16 << 20;

/// Validated state settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateConfig {
    /// The memory the stores of the job's process share (`memory`).
    pub memory: usize,
    /// The folder the stores work under (`directory`, resolved against the job file's folder);
    /// `None`: the system's temporary directory.
    pub directory: Option<PathBuf>,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            memory: DEFAULT_STATE_MEMORY,
            directory: None,
        }
    }
}

impl StateConfig {
    /// The folder the stores of a run of job `job` in process `pid` work in: one of their own
    /// under [`directory`](Self::directory), so that two runs never share one.
    pub fn work_dir(&self, job: &str, pid: u32) -> PathBuf {
        self.directory
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join(format!("weir-state-{job}-{pid}"))
    }
}
