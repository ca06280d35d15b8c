//! What someone outside a running job asks of it — a signal handler, the
//! control endpoint, a test — and, for savepoints, how the answer comes back.
//!
//! Requests travel on the unbounded channel handed to
//! [`JobRunner::run`](super::JobRunner::run); the driver of the running attempt
//! takes them between task events, so a request never blocks the job. A
//! signal handler has nobody to answer to and sends the plain variants; the
//! control endpoint must tell its client the savepoint's id and path, or why
//! there is none, and sends [`JobRequest::Savepoint`] with a [`SavepointReply`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use tokio::sync::oneshot;

use crate::ids::CheckpointId;

/// What someone outside the job asks of it (signals, the control endpoint).
#[derive(Debug)]
pub enum JobRequest {
    /// Stop now; completed checkpoints are kept or deleted per `on_cancel`.
    Cancel,
    /// Take a savepoint, then stop (sinks commit first). If the savepoint is
    /// refused, the job is cancelled: whoever sent this wants the job to stop.
    StopWithSavepoint,
    /// Take a savepoint (and with `stop`, then stop as
    /// [`StopWithSavepoint`](Self::StopWithSavepoint) does), and say on `reply`
    /// when it completed or why it was refused or failed. Unlike
    /// `StopWithSavepoint`, a refused stop leaves the job running: the one
    /// asking hears why and decides (cancel, or ask again).
    Savepoint {
        /// Stop the job once the savepoint is complete.
        stop: bool,
        /// Where the outcome goes.
        reply: SavepointReply,
    },
    /// Change the parallelism of the vertices named in `parallelism`, in the same process: take
    /// a savepoint and stop as [`StopWithSavepoint`](Self::StopWithSavepoint) does, then run
    /// the job at the new parallelisms from it, its keyed state split and merged by key group
    /// (docs/ABI.md §16). The outcome goes on `reply` once the job runs again, or why it does
    /// not: a request the job refuses leaves it running as it was, and a savepoint that cannot
    /// be restored at the new parallelisms is restored at the old ones.
    Rescale {
        /// The new parallelism of each vertex named.
        parallelism: BTreeMap<String, u32>,
        /// Where the outcome goes.
        reply: RescaleReply,
    },
}

impl JobRequest {
    /// A savepoint request (`stop`: then stop the job) and the receiver of its
    /// outcome.
    pub fn savepoint(stop: bool) -> (JobRequest, oneshot::Receiver<SavepointResult>) {
        let (tx, rx) = oneshot::channel();
        (
            JobRequest::Savepoint {
                stop,
                reply: SavepointReply(tx),
            },
            rx,
        )
    }
}

impl JobRequest {
    /// A rescale request and the receiver of its outcome.
    pub fn rescale(
        parallelism: BTreeMap<String, u32>,
    ) -> (JobRequest, oneshot::Receiver<RescaleResult>) {
        let (tx, rx) = oneshot::channel();
        (
            JobRequest::Rescale {
                parallelism,
                reply: RescaleReply(tx),
            },
            rx,
        )
    }
}

/// A savepoint that completed: it is durable and can be restored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavepointTaken {
    /// Its id.
    pub id: CheckpointId,
    /// Its directory: what `weir run --restore` takes.
    pub path: PathBuf,
}

/// Why a requested savepoint does not exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SavepointError {
    /// It was not triggered: the job is not in a state to take one (not
    /// running, restarting, finishing).
    #[error("savepoint refused: {0}")]
    Refused(String),
    /// It was triggered and then aborted (a task declined, it expired, its
    /// metadata could not be written), or the job ended before it completed.
    #[error("savepoint {id} failed: {reason}")]
    Failed {
        /// The savepoint's id.
        id: CheckpointId,
        /// Why, naming the task or file concerned.
        reason: String,
    },
}

/// The outcome of a [`JobRequest::Savepoint`].
pub type SavepointResult = Result<SavepointTaken, SavepointError>;

/// Where the outcome of a [`JobRequest::Savepoint`] goes. Dropping it without
/// an answer tells the receiver nothing more than that the job went away.
#[derive(Debug)]
pub struct SavepointReply(oneshot::Sender<SavepointResult>);

impl SavepointReply {
    /// Answers; a receiver that stopped waiting is no error.
    pub(crate) fn send(self, result: SavepointResult) {
        let _ = self.0.send(result);
    }
}

/// A job that runs again at new parallelisms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescaled {
    /// The savepoint it runs from.
    pub savepoint: SavepointTaken,
    /// Each vertex whose parallelism changed: name, old and new parallelism.
    pub changes: Vec<(String, u32, u32)>,
}

/// Why a job does not run at the parallelisms asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RescaleError {
    /// The request was refused before anything happened: the job runs on as it was.
    #[error("rescale refused: {0}; the job goes on as it was")]
    Refused(String),
    /// The savepoint failed: the job runs on as it was.
    #[error("{0}; the job goes on as it was")]
    Savepoint(SavepointError),
    /// The savepoint was taken and the job stopped, but its state cannot be restored at the new
    /// parallelisms: the job runs on from the savepoint at its old ones.
    #[error("{reason}; the job goes on from {} at its old parallelism", savepoint.display())]
    Restore {
        /// The savepoint.
        savepoint: PathBuf,
        /// Why it cannot be restored at the new parallelisms.
        reason: String,
    },
}

/// The outcome of a [`JobRequest::Rescale`].
pub type RescaleResult = Result<Rescaled, RescaleError>;

/// Where the outcome of a [`JobRequest::Rescale`] goes.
#[derive(Debug)]
pub struct RescaleReply(oneshot::Sender<RescaleResult>);

impl RescaleReply {
    /// Answers; a receiver that stopped waiting is no error.
    pub(crate) fn send(self, result: RescaleResult) {
        let _ = self.0.send(result);
    }
}
