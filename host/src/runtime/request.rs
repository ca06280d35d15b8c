//! What someone outside a running job asks of it — a signal handler, the
//! control endpoint, a test — and, for savepoints, how the answer comes back.
//!
//! Requests travel on the unbounded channel handed to
//! [`JobRunner::run`](super::JobRunner::run); the driver of the running attempt
//! takes them between task events, so a request never blocks the job. A
//! signal handler has nobody to answer to and sends the plain variants; the
//! control endpoint must tell its client the savepoint's id and path, or why
//! there is none, and sends [`JobRequest::Savepoint`] with a [`SavepointReply`].

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
