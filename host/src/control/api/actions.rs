//! The answers of the control endpoint's actions (`POST /api/savepoints`, `/api/stop`,
//! `/api/rescale`, `/api/cancel`, the dashboard's login link) and of every error.
//!
//! Why a file of its own: these answer what a request *did*, where the other views show what
//! the job *is*; each is small and read by the CLI's verbs.

use super::*;

/// An error answer: `{"error": "..."}`, saying what went wrong and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorView {
    /// The message.
    pub error: String,
}

/// `POST /api/savepoints` and `POST /api/stop`: the savepoint taken.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SavepointView {
    /// Its id.
    pub id: u64,
    /// Its directory, for `weir run --restore`.
    pub path: String,
}

impl SavepointView {
    /// The view of a savepoint at `path`.
    pub fn new(id: CheckpointId, path: &Path) -> SavepointView {
        SavepointView {
            id: id.0,
            path: path.display().to_string(),
        }
    }
}

/// `POST /api/rescale`: the job runs again at new parallelisms.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RescaleView {
    /// The savepoint it runs from.
    pub savepoint: SavepointView,
    /// Each vertex whose parallelism changed.
    pub changes: Vec<ParallelismChange>,
}

/// One vertex's change of parallelism.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParallelismChange {
    /// The vertex.
    pub vertex: String,
    /// Its parallelism before.
    pub from: u32,
    /// Its parallelism now.
    pub to: u32,
}

/// `POST /api/dashboard-login`: a new one-time link that logs a browser
/// into the dashboard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoginLinkView {
    /// `http://HOST/login?once=CODE`, under the Host the request named.
    pub url: String,
    /// Seconds it can be used for (once).
    pub expires_in: u64,
}

/// `POST /api/cancel`: the job is being cancelled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CancelView {
    /// Always `CANCELING`.
    pub status: &'static str,
}
