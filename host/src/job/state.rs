//! The state settings of a job: the `[state]` table of the job file, validated. Where and
//! within what memory its operators keep keyed state on the host (docs/STATE.md); the stores
//! themselves are [`crate::state::keyed`]'s, which the runner makes from these.

use std::path::{Path, PathBuf};

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
        self.parent().join(format!("weir-state-{job}-{pid}"))
    }

    /// The folder where the tasks of job `job` keep local copies of the checkpoints they store
    /// under `checkpoints` (`state::keyed::local`), under [`directory`](Self::directory): the
    /// same for every run of the job, since a run restores from what an earlier one kept, and
    /// named by the checkpoints' place too, since the workers of a job run as many processes
    /// (each with checkpoints of its own) have tasks of the same names.
    pub fn local_dir(&self, job: &str, checkpoints: &Path) -> PathBuf {
        let place = xxhash_rust::xxh3::xxh3_64(checkpoints.as_os_str().as_encoded_bytes());
        self.parent().join(format!("weir-local-{job}-{place:016x}"))
    }

    /// The working folders of job `job`'s runs under [`directory`](Self::directory), each
    /// with the id of the process it is (or was) of: what [`StateConfig::work_dir`] made.
    /// A folder that cannot be listed gives none.
    pub fn runs(&self, job: &str) -> Vec<(u32, PathBuf)> {
        let prefix = format!("weir-state-{job}-");
        let Ok(entries) = std::fs::read_dir(self.parent()) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter_map(|entry| {
                let name = entry.file_name();
                // Digits only after the prefix: `weir-state-a-b-1` is job `a-b`'s, not `a`'s.
                let pid = name.to_str()?.strip_prefix(&prefix)?;
                let pid = pid.bytes().all(|b| b.is_ascii_digit()).then_some(pid)?;
                Some((pid.parse().ok()?, entry.path()))
            })
            .collect()
    }

    fn parent(&self) -> PathBuf {
        self.directory.clone().unwrap_or_else(std::env::temp_dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jobs_runs_are_the_folders_of_its_name_and_a_process_id() {
        let dir = tempfile::tempdir().unwrap();
        let config = StateConfig {
            directory: Some(dir.path().to_path_buf()),
            ..StateConfig::default()
        };
        for name in [
            "weir-state-count-12",
            "weir-state-count-34",
            "weir-state-count-by-word-56",
            "weir-state-count-7x",
            "weir-state-count-",
            "elsewhere",
        ] {
            std::fs::create_dir(dir.path().join(name)).unwrap();
        }
        let mut runs = config.runs("count");
        runs.sort();
        assert_eq!(
            runs,
            vec![
                (12, dir.path().join("weir-state-count-12")),
                (34, dir.path().join("weir-state-count-34")),
            ]
        );
        assert_eq!(config.runs("count-by-word").len(), 1);
        assert_eq!(config.work_dir("count", 12), runs[0].1);
    }
}
