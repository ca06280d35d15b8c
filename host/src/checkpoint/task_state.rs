//! The bytes a task stores in its state file: a small host-side envelope
//! around the state of what the task runs (a guest's snapshot, a source's
//! position, a sink's pre-committed files).
//!
//! ```text
//! offset  size  field
//! 0       1     envelope version (1)
//! 1       1     flags: bit 0 = the task had already seen the end of all its inputs
//! 2       ...   the state of the source, operator or sink
//! ```
//! The file around it (magic, length, checksum) is [`super::format`]'s. The
//! envelope lives beside it, in the checkpoint layer, because reading a
//! checkpoint back decodes it and the tasks that write it sit
//! above that layer.

const VERSION: u8 = 1;
const FINISHED: u8 = 1;

/// One task's state at a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskState {
    /// The task had processed the end of all its inputs (its guest's
    /// `weir_finish` ran): after a restore it must not run again.
    pub finished: bool,
    /// The state of the source, operator or sink, opaque to the task loop.
    pub inner: Vec<u8>,
}

impl TaskState {
    /// Encodes the envelope.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(2 + self.inner.len());
        out.push(VERSION);
        out.push(if self.finished { FINISHED } else { 0 });
        out.extend_from_slice(&self.inner);
        out
    }

    /// Decodes an envelope, saying what is wrong with a bad one. Takes the bytes as read, so
    /// that the inner state (for an image, the guest's whole memory) keeps their buffer
    /// instead of being copied into a new one.
    pub fn decode(mut bytes: Vec<u8>) -> Result<Self, TaskStateError> {
        match *bytes.as_slice() {
            [VERSION, flags, ..] if flags & !FINISHED == 0 => {
                bytes.drain(..2);
                Ok(TaskState {
                    finished: flags & FINISHED != 0,
                    inner: bytes,
                })
            }
            [VERSION, flags, ..] => Err(TaskStateError::UnknownFlags { flags }),
            [version, ..] => Err(TaskStateError::UnsupportedVersion { version }),
            [] => Err(TaskStateError::Empty),
        }
    }
}

/// Why a state file's contents (which verified: frame, length and checksum) are not a task
/// state envelope this build reads. The file was written by another build of Weir, or it is
/// not a task's state at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TaskStateError {
    /// The version byte is a known version but the flags byte has bits this build does not
    /// know: a newer build wrote it.
    #[error("unknown task state flags {flags:#04x}")]
    UnknownFlags {
        /// The flags byte as found.
        flags: u8,
    },
    /// The envelope is of another version: restore it with the build that wrote it.
    #[error("task state envelope version {version} is not supported (this build reads {VERSION})")]
    UnsupportedVersion {
        /// The version byte as found.
        version: u8,
    },
    /// The state holds no bytes at all, not even the envelope's.
    #[error("task state is empty")]
    Empty,
}

/// What a restore hands a task: the state of the restored checkpoint and, when that state
/// is an incremental image, the states it builds on (docs/CHECKPOINTS.md §10).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RestoredState {
    /// The task's state at the restored checkpoint.
    pub state: TaskState,
    /// The inner states of the same task at the earlier checkpoints the state builds on,
    /// base first; empty for a self-contained state.
    pub chain: Vec<Vec<u8>>,
    /// Whether new incremental images may build on this state: true when it comes from one
    /// of the job's checkpoints, false for a savepoint (it may be moved or deleted, so no
    /// checkpoint may need it).
    pub resumable: bool,
}

impl RestoredState {
    /// A self-contained state that nothing may build on.
    pub fn alone(state: TaskState) -> Self {
        RestoredState {
            state,
            chain: Vec::new(),
            resumable: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_unknown_versions() {
        let s = TaskState {
            finished: true,
            inner: vec![1, 2, 3],
        };
        assert_eq!(TaskState::decode(s.encode()).unwrap(), s);
        assert!(
            TaskState::decode(vec![9, 0])
                .unwrap_err()
                .to_string()
                .contains("version 9")
        );
        assert!(TaskState::decode(vec![]).is_err());
        assert!(TaskState::decode(vec![1, 2]).is_err());
        assert_eq!(
            TaskState::decode(vec![1, 2]).unwrap_err().to_string(),
            "unknown task state flags 0x02"
        );
    }
}
