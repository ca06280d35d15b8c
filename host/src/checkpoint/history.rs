//! The job's checkpoint history: the one durable record of which checkpoint
//! ids were ever handed out and which ever completed.
//!
//! Why a file of its own: the directories alone cannot say it. Startup cleanup
//! removes incomplete checkpoints, pruning removes old complete ones, and a
//! checkpoint triggered just before a crash may have left no directory at all
//! — yet a sink may already have pre-committed under its id. Deriving the next
//! id from what is left on disk reused ids after a crash (a checkpoint 4 that
//! was removed as incomplete, then a new, different checkpoint 4). And a
//! restore that finds no checkpoint cannot tell "this job never checkpointed"
//! from "its checkpoints are gone while its committed output is still there".
//!
//! So the runtime keeps `<job dir>/_history` (see
//! [`CheckpointLayout::history_file`](crate::checkpoint::layout::CheckpointLayout::history_file)):
//!
//! - `reserved`: the highest id that may have been used. An id is reserved
//!   durably **before** its barrier leaves the coordinator; the next id is
//!   reserved in the background right after a trigger, so the write is off
//!   the trigger's path in the steady state. A new run's first id is above
//!   it, so ids never repeat, across crashes too (at most one id is skipped).
//! - `completed`: the highest id that ever completed, the evidence that a
//!   fresh start would repeat committed output.
//!
//! The file is framed like every checkpoint file (magic `WEIRHIST`, version,
//! length, CRC-32; [`format`](mod@crate::checkpoint::format)) around a small JSON object, and written with
//! tmp + fsync + rename + fsync(dir). Values only grow: [`CheckpointHistory::merge`].

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::checkpoint::format::{self, FileKind, FormatError};
use crate::ids::CheckpointId;

/// What the job's checkpoint history records.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointHistory {
    /// The highest checkpoint or savepoint id that may have been used: no
    /// later checkpoint takes it or a lower one.
    pub reserved: Option<CheckpointId>,
    /// The highest id that completed.
    pub completed: Option<CheckpointId>,
}

/// Why the history file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// The frame does not verify (magic, version, length, checksum).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The frame verifies but its payload is not a history.
    #[error("checkpoint history {path}: {problem}")]
    Malformed {
        /// The history file.
        path: std::path::PathBuf,
        /// What is wrong with it.
        problem: String,
    },
}

impl CheckpointHistory {
    /// Both records at their highest: the history after `self` and `other`.
    pub fn merge(self, other: CheckpointHistory) -> CheckpointHistory {
        CheckpointHistory {
            reserved: self.reserved.max(other.reserved),
            completed: self.completed.max(other.completed),
        }
    }

    /// The history with `id` reserved as well.
    pub fn with_reserved(self, id: CheckpointId) -> CheckpointHistory {
        self.merge(CheckpointHistory {
            reserved: Some(id),
            completed: None,
        })
    }

    /// The history with `id` completed (and so reserved) as well.
    pub fn with_completed(self, id: CheckpointId) -> CheckpointHistory {
        self.merge(CheckpointHistory {
            reserved: Some(id),
            completed: Some(id),
        })
    }

    /// Whether `id` is covered: reserved already, so it may be triggered.
    pub fn covers(&self, id: CheckpointId) -> bool {
        self.reserved.is_some_and(|r| r >= id)
    }

    /// The lowest id no checkpoint may have used yet.
    pub fn next_id(&self) -> CheckpointId {
        self.reserved.map_or(CheckpointId(1), CheckpointId::next)
    }

    /// The history as a framed file.
    pub fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).expect("a history serialises");
        format::encode(FileKind::History, &json)
    }

    /// Reads a history file, read from `path`, back; never panics.
    pub fn decode(path: &Path, bytes: &[u8]) -> Result<CheckpointHistory, HistoryError> {
        let frame = format::decode(FileKind::History, path, bytes)?;
        let history: CheckpointHistory =
            serde_json::from_slice(frame.payload).map_err(|e| HistoryError::Malformed {
                path: path.to_owned(),
                problem: e.to_string(),
            })?;
        if history.completed > history.reserved {
            return Err(HistoryError::Malformed {
                path: path.to_owned(),
                problem: "records a completed id above the reserved one".into(),
            });
        }
        Ok(history)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u64) -> CheckpointId {
        CheckpointId(n)
    }

    #[test]
    fn records_only_grow() {
        let h = CheckpointHistory::default()
            .with_reserved(id(5))
            .with_completed(id(3))
            .with_reserved(id(4));
        assert_eq!(h.reserved, Some(id(5)));
        assert_eq!(h.completed, Some(id(3)));
        assert_eq!(h.next_id(), id(6));
        assert!(h.covers(id(5)) && !h.covers(id(6)));
        assert_eq!(CheckpointHistory::default().next_id(), id(1));
    }

    #[test]
    fn round_trips_and_refuses_damage() {
        let path = Path::new("/jobs/wc/_history");
        let h = CheckpointHistory::default().with_completed(id(7));
        let bytes = h.encode();
        assert_eq!(CheckpointHistory::decode(path, &bytes).unwrap(), h);
        let mut flipped = bytes.clone();
        flipped[22] ^= 1;
        assert!(matches!(
            CheckpointHistory::decode(path, &flipped),
            Err(HistoryError::Format(_))
        ));
        let inconsistent = format::encode(FileKind::History, br#"{"reserved": 2, "completed": 3}"#);
        let e = CheckpointHistory::decode(path, &inconsistent).unwrap_err();
        assert!(e.to_string().contains("completed id above"), "{e}");
        for cut in 0..bytes.len() {
            assert!(CheckpointHistory::decode(path, &bytes[..cut]).is_err());
        }
    }
}
