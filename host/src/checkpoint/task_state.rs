//! The bytes a task stores in its state file: a small host-side envelope around the state of
//! what the task runs (a guest's snapshot, a source's position, a sink's pre-committed files),
//! with the sections of the task's host-kept state (`state/`) between them.
//!
//! ```text
//! offset  size  field
//! 0       1     envelope version (2)
//! 1       1     flags: bit 0 = the task had already seen the end of all its inputs
//! 2       1     n, the number of sections
//! 3       ...   n sections, each: u16 its kind (`state::SectionTag`), u32 its length L, L bytes
//! ...     ...   the state of the source, operator or sink
//! ```
//! Numbers are little-endian. Version 1, written before sections, is still read: its flags'
//! bit 1 said that one time section followed (`u32` length, then the bytes), which reads as a
//! section of kind time. A state without sections restores with no watermark and no timers.
//!
//! The file around it (magic, length, checksum) is [`super::format`]'s. The envelope lives
//! beside it, in the checkpoint layer, because reading a checkpoint back decodes it and the
//! tasks that write it sit above that layer; what a section holds is the state layer's.

use weir_abi::wire::{Reader, put_prefixed};

use crate::checkpoint::shared::SharedFile;
use crate::state::keyed::local::RestoredFile;
use crate::state::{Section, SectionTag};

const VERSION: u8 = 2;
/// The envelope before sections, which had at most a time section.
const VERSION_1: u8 = 1;
const FINISHED: u8 = 1;
/// Version 1's flag: a time section follows.
const V1_HAS_TIME: u8 = 2;

/// One task's state at a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskState {
    /// The task had processed the end of all its inputs (its guest's
    /// `weir_finish` ran): after a restore it must not run again.
    pub finished: bool,
    /// The task's host-kept state, one section per kind it keeps (`state::snapshot`).
    pub sections: Vec<Section>,
    /// The state of the source, operator or sink, opaque to the task loop.
    pub inner: Vec<u8>,
}

impl TaskState {
    /// Encodes the envelope.
    ///
    /// # Panics
    /// With more than 255 sections or a section of 4 GiB or more: the state layer writes one
    /// section per kind, each far smaller.
    pub fn encode(&self) -> Vec<u8> {
        let sections: usize = self.sections.iter().map(|s| 6 + s.bytes.len()).sum();
        let mut out = Vec::with_capacity(3 + sections + self.inner.len());
        out.push(VERSION);
        out.push(if self.finished { FINISHED } else { 0 });
        out.push(u8::try_from(self.sections.len()).expect("fewer than 256 sections"));
        for section in &self.sections {
            out.extend_from_slice(&section.tag.code().to_le_bytes());
            put_prefixed(&mut out, &section.bytes);
        }
        out.extend_from_slice(&self.inner);
        out
    }

    /// Decodes an envelope, saying what is wrong with a bad one. Takes the bytes as read, so
    /// that the inner state (for an image, the guest's whole memory) keeps their buffer
    /// instead of being copied into a new one.
    pub fn decode(mut bytes: Vec<u8>) -> Result<Self, TaskStateError> {
        let (finished, sections, header) = match *bytes.as_slice() {
            [VERSION, flags, count, ..] if flags & !FINISHED == 0 => {
                let mut r = Reader::new(&bytes[3..]);
                let mut sections = Vec::with_capacity(usize::from(count));
                for _ in 0..count {
                    let code = r.u16().map_err(|_| TaskStateError::Sections)?;
                    let tag = SectionTag::from_code(code)
                        .ok_or(TaskStateError::UnknownSection { code })?;
                    let bytes = r.prefixed().map_err(|_| TaskStateError::Sections)?;
                    sections.push(Section {
                        tag,
                        bytes: bytes.to_vec(),
                    });
                }
                (flags & FINISHED != 0, sections, 3 + r.position())
            }
            [VERSION, flags] if flags & !FINISHED == 0 => return Err(TaskStateError::Sections),
            [VERSION_1, flags, ..] if flags & !(FINISHED | V1_HAS_TIME) == 0 => {
                let mut r = Reader::new(&bytes[2..]);
                let mut sections = Vec::new();
                if flags & V1_HAS_TIME != 0 {
                    let time = r.prefixed().map_err(|_| TaskStateError::Sections)?;
                    sections.push(Section {
                        tag: SectionTag::Time,
                        bytes: time.to_vec(),
                    });
                }
                (flags & FINISHED != 0, sections, 2 + r.position())
            }
            [VERSION | VERSION_1, flags, ..] => return Err(TaskStateError::UnknownFlags { flags }),
            [VERSION | VERSION_1] => return Err(TaskStateError::Sections),
            [version, ..] => return Err(TaskStateError::UnsupportedVersion { version }),
            [] => return Err(TaskStateError::Empty),
        };
        bytes.drain(..header);
        Ok(TaskState {
            finished,
            sections,
            inner: bytes,
        })
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
    #[error(
        "task state envelope version {version} is not supported (this build reads 1 and {VERSION})"
    )]
    UnsupportedVersion {
        /// The version byte as found.
        version: u8,
    },
    /// The state holds no bytes at all, not even the envelope's.
    #[error("task state is empty")]
    Empty,
    /// The bytes end within the sections the header announces.
    #[error("task state is cut short within its sections")]
    Sections,
    /// A section is of a kind this build does not know: a newer build wrote it.
    #[error(
        "task state has a section of kind {code}, which this build does not know: restore it \
         with the build of Weir that wrote it"
    )]
    UnknownSection {
        /// The kind's number as found.
        code: u16,
    },
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
    /// The shared files the state names (its keyed state's kept files), each verified against
    /// its handle: read, or taken from a local copy.
    pub shared: Vec<(SharedFile, RestoredFile)>,
}

impl RestoredState {
    /// A self-contained state that nothing may build on.
    pub fn alone(state: TaskState) -> Self {
        RestoredState {
            state,
            chain: Vec::new(),
            resumable: false,
            shared: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(bytes: &[u8]) -> Section {
        Section {
            tag: SectionTag::Time,
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn sections_round_trip_beside_the_inner_state_and_a_cut_is_refused() {
        let state = TaskState {
            finished: false,
            sections: vec![time(&[1, 2, 3, 4])],
            inner: vec![7, 8, 9],
        };
        let bytes = state.encode();
        assert_eq!(TaskState::decode(bytes.clone()).unwrap(), state);
        // A cut within the header or the sections is refused; one within the inner state is
        // another (shorter) inner state, which the file's frame and checksum guard.
        let header = bytes.len() - state.inner.len();
        for cut in 1..header {
            assert!(
                TaskState::decode(bytes[..cut].to_vec()).is_err(),
                "cut at {cut}"
            );
        }
        let mut unknown = bytes.clone();
        unknown[3] = 99;
        assert_eq!(
            TaskState::decode(unknown).unwrap_err(),
            TaskStateError::UnknownSection { code: 99 }
        );
    }

    /// The envelope before sections: flags bit 1 and a `u32`-prefixed time section, pinned as
    /// bytes — a checkpoint written by an earlier build restores (tests/all/event_time.rs
    /// restores a whole one).
    #[test]
    fn an_envelope_written_before_sections_reads_its_time_section() {
        let v1 = [1, 3, 2, 0, 0, 0, 0xaa, 0xbb, 5, 6];
        assert_eq!(
            TaskState::decode(v1.to_vec()).unwrap(),
            TaskState {
                finished: true,
                sections: vec![time(&[0xaa, 0xbb])],
                inner: vec![5, 6],
            }
        );
        assert_eq!(
            TaskState::decode(vec![1, 0, 9]).unwrap(),
            TaskState {
                finished: false,
                sections: Vec::new(),
                inner: vec![9],
            }
        );
        assert_eq!(
            TaskState::decode(vec![1, 2, 9]).unwrap_err(),
            TaskStateError::Sections
        );
        assert_eq!(
            TaskState::decode(vec![1, 4]).unwrap_err().to_string(),
            "unknown task state flags 0x04"
        );
    }

    #[test]
    fn round_trips_and_rejects_unknown_versions() {
        let s = TaskState {
            finished: true,
            sections: Vec::new(),
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
        assert_eq!(
            TaskState::decode(vec![2, 2, 0]).unwrap_err().to_string(),
            "unknown task state flags 0x02"
        );
    }
}
