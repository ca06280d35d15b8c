//! [`BenchError`]: why a benchmark could not run to the end.

use std::path::PathBuf;

use weir::checkpoint::storage::StorageError;
use weir::job::{JobError, JobStatus};
use weir::runtime::RunError;
use weir::wasm::{EngineError, GuestError, ModuleError};

/// Why a benchmark stopped (the host's errors boxed: some are large). A benchmark that ends with a wrong result (records lost, a state
/// that does not round-trip) is an error too: its timings would mean nothing.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Reading or writing a benchmark's own files failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The job file the benchmark wrote was refused.
    #[error(transparent)]
    Job(Box<JobError>),
    /// The job could not run.
    #[error(transparent)]
    Run(Box<RunError>),
    /// The job ran but did not finish.
    #[error("job {job} ended {status:?} instead of finishing: {failure}")]
    JobEnded {
        /// The benchmark job's name.
        job: String,
        /// How it ended.
        status: JobStatus,
        /// The failure it reported, if any.
        failure: String,
    },
    /// The checkpoint storage failed.
    #[error(transparent)]
    Storage(Box<StorageError>),
    /// The wasm engine could not be set up.
    #[error(transparent)]
    Engine(Box<EngineError>),
    /// The guest module could not be loaded.
    #[error(transparent)]
    Module(Box<ModuleError>),
    /// A guest call failed.
    #[error(transparent)]
    Guest(Box<GuestError>),
    /// The native operator failed.
    #[error("native operator: {0}")]
    Native(String),
    /// A result was wrong, so its timing is void.
    #[error("wrong result: {0}")]
    Wrong(String),
}

/// `?` on the host's errors.
macro_rules! boxed_from {
    ($($variant:ident($error:ty)),* $(,)?) => {
        $(impl From<$error> for BenchError {
            fn from(error: $error) -> Self {
                BenchError::$variant(Box::new(error))
            }
        })*
    };
}

boxed_from!(
    Job(JobError),
    Run(RunError),
    Storage(StorageError),
    Engine(EngineError),
    Module(ModuleError),
    Guest(GuestError),
);
