//! Why a job could not run at all, as opposed to running and failing (which
//! is a [`JobOutcome`](super::JobOutcome) after its restarts): the module, the
//! storage, the restore point, the job's directories, or the runtime itself.

use super::lock::LockError;
use super::restore::RestoreError;
use crate::checkpoint::storage::StorageError;
use crate::wasm::ModuleError;

/// Why a job could not run at all (as opposed to running and failing).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// An operator's module could not be loaded or does not follow the ABI.
    #[error(transparent)]
    Module(#[from] ModuleError),
    /// The checkpoint storage failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The checkpoint or savepoint to restore cannot be used for this job.
    #[error("cannot restore: {0}")]
    Restore(#[from] RestoreError),
    /// Another run holds one of the job's directories.
    #[error(transparent)]
    Locked(#[from] LockError),
    /// `--restore latest` found nothing to restore, but an earlier run left
    /// evidence that starting from the beginning would repeat its committed output.
    #[error(
        "cannot restore the latest checkpoint: there is none to restore, but {}. Starting from \
         the beginning would repeat output this job already committed. Either restore an older \
         checkpoint or savepoint that still verifies (`weir checkpoints {}` lists them; then \
         `--restore PATH`), or start from the beginning on purpose with `--fresh`",
        evidence.join("; "),
        directory.display()
    )]
    FreshStartRefused {
        /// What shows that an earlier run committed output.
        evidence: Vec<String>,
        /// The job's checkpoint directory.
        directory: std::path::PathBuf,
    },
    /// A connector's check refused the job or the restore: what it talks to is not what the
    /// job file says (a Kafka connector's brokers or topics), or no longer what the
    /// checkpoint read (a topic created again).
    #[error(transparent)]
    Connector(#[from] crate::connectors::connector::ConnectorSetupError),
    /// The runtime could not be set up.
    #[error("{0}")]
    Setup(String),
}
