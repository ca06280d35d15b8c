//! The bytes a task stores in its state file: a small host-side envelope
//! around the state of what the task runs (a guest's snapshot, a source's
//! position, a sink's pre-committed files).
//!
//! ```text
//! offset  size  field
//! 0       1     envelope version (1)
//! 1       1     flags: bit 0 = the task had already seen the end of all its inputs,
//!                      bit 1 = a time section follows
//! 2       4     (with bit 1) the time section's length T, u32 little-endian
//! 6       T     (with bit 1) the time section: see [`TimeState`]
//! ...     ...   the state of the source, operator or sink
//! ```
//!
//! The time section is the host's part of event time (`docs/ABI.md` §15): the task's
//! watermark, its inputs' (or, for a source, its splits'), and its guest's timers. It is the
//! host's and not the guest's, so it is the same whether the guest's state is its own snapshot
//! or an image. States written before it existed have no such section and restore with no
//! watermark and no timers.
//! The file around it (magic, length, checksum) is [`super::format`]'s. The
//! envelope lives beside it, in the checkpoint layer, because reading a
//! checkpoint back decodes it and the tasks that write it sit
//! above that layer.

use weir_abi::Timers;

const VERSION: u8 = 1;
const FINISHED: u8 = 1;
const HAS_TIME: u8 = 2;

/// One task's state at a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskState {
    /// The task had processed the end of all its inputs (its guest's
    /// `weir_finish` ran): after a restore it must not run again.
    pub finished: bool,
    /// The encoded time section ([`TimeState::encode`]), if the task keeps one.
    pub time: Option<Vec<u8>>,
    /// The state of the source, operator or sink, opaque to the task loop.
    pub inner: Vec<u8>,
}

impl TaskState {
    /// Encodes the envelope.
    pub fn encode(&self) -> Vec<u8> {
        let time_len = self.time.as_ref().map_or(0, |t| 4 + t.len());
        let mut out = Vec::with_capacity(2 + time_len + self.inner.len());
        out.push(VERSION);
        let mut flags = if self.finished { FINISHED } else { 0 };
        if self.time.is_some() {
            flags |= HAS_TIME;
        }
        out.push(flags);
        if let Some(time) = &self.time {
            let len = u32::try_from(time.len()).expect("a time section is below 4 GiB");
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(time);
        }
        out.extend_from_slice(&self.inner);
        out
    }

    /// Decodes an envelope, saying what is wrong with a bad one. Takes the bytes as read, so
    /// that the inner state (for an image, the guest's whole memory) keeps their buffer
    /// instead of being copied into a new one.
    pub fn decode(mut bytes: Vec<u8>) -> Result<Self, TaskStateError> {
        match *bytes.as_slice() {
            [VERSION, flags, ..] if flags & !(FINISHED | HAS_TIME) == 0 => {
                let mut header = 2;
                let time = if flags & HAS_TIME != 0 {
                    let len = bytes
                        .get(2..6)
                        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                        .ok_or(TaskStateError::TimeSection)?;
                    let section = bytes.get(6..6 + len).ok_or(TaskStateError::TimeSection)?;
                    header = 6 + len;
                    Some(section.to_vec())
                } else {
                    None
                };
                bytes.drain(..header);
                Ok(TaskState {
                    finished: flags & FINISHED != 0,
                    time,
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
    /// The flags say a time section follows, and the bytes end within it.
    #[error("task state is cut short within its time section")]
    TimeSection,
}

/// One input's watermark in a [`TimeState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputTime {
    /// The highest watermark the input sent (`i64::MIN` before the first).
    pub watermark: i64,
    /// The input is idle.
    pub idle: bool,
    /// The input ended.
    pub ended: bool,
}

/// One split of a source in a [`TimeState`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitTime {
    /// How the source names it (`topic/partition` for Kafka).
    pub name: String,
    /// The largest timestamp read from it (`i64::MIN` before the first).
    pub max_timestamp: i64,
    /// It was idle: it had read nothing for the source's `idle_timeout`.
    pub idle: bool,
}

/// A task's part of event time at a checkpoint: what the time section of [`TaskState`] holds.
///
/// ```text
/// i64      the task's watermark (for a source: the highest it sent)
/// u32 n    then n inputs:   i64 watermark, u8 flags (bit 0 idle, bit 1 ended)
/// u32 m    then m splits:   u32 length + the split's name, i64 its largest timestamp
/// twice, event time then processing time:
///   u32 k  then k timers:   i64 timestamp, u32 length + the key
/// u32 m    then m u8 split flags, one per split in order (bit 0 idle)
/// ```
/// Every number little-endian. The split flags came last, later than the rest: a section
/// without them (written before) restores every split active.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TimeState {
    /// The task's watermark; for a source, the highest it sent.
    pub watermark: i64,
    /// A processing task's inputs, in input order.
    pub inputs: Vec<InputTime>,
    /// A source's splits: their names, largest timestamps and idleness.
    pub splits: Vec<SplitTime>,
    /// The guest's timers, event time then processing time.
    pub timers: [Timers; 2],
}

impl TimeState {
    /// Encodes a time section from its parts, the timers borrowed (they may be many).
    pub fn encode(
        watermark: i64,
        inputs: &[InputTime],
        splits: &[SplitTime],
        timers: &[Timers; 2],
    ) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&watermark.to_le_bytes());
        push_len(&mut out, inputs.len());
        for input in inputs {
            out.extend_from_slice(&input.watermark.to_le_bytes());
            out.push(u8::from(input.idle) | (u8::from(input.ended) << 1));
        }
        push_len(&mut out, splits.len());
        for split in splits {
            push_len(&mut out, split.name.len());
            out.extend_from_slice(split.name.as_bytes());
            out.extend_from_slice(&split.max_timestamp.to_le_bytes());
        }
        for domain in timers {
            push_len(&mut out, domain.len());
            for (timestamp, key) in domain.iter() {
                out.extend_from_slice(&timestamp.to_le_bytes());
                push_len(&mut out, key.len());
                out.extend_from_slice(key);
            }
        }
        push_len(&mut out, splits.len());
        out.extend(splits.iter().map(|split| u8::from(split.idle)));
        out
    }

    /// Decodes a time section, or says where it is cut short or malformed.
    pub fn decode(bytes: &[u8]) -> Result<TimeState, TaskStateError> {
        let mut r = Reader(bytes);
        let watermark = r.i64()?;
        let mut inputs = Vec::new();
        for _ in 0..r.len()? {
            let watermark = r.i64()?;
            let flags = r.take(1)?[0];
            inputs.push(InputTime {
                watermark,
                idle: flags & 1 != 0,
                ended: flags & 2 != 0,
            });
        }
        let mut splits = Vec::new();
        for _ in 0..r.len()? {
            let len = r.len()?;
            let name = String::from_utf8(r.take(len)?.to_vec())
                .map_err(|_| TaskStateError::TimeSection)?;
            splits.push(SplitTime {
                name,
                max_timestamp: r.i64()?,
                idle: false,
            });
        }
        let mut timers = [Timers::new(), Timers::new()];
        for domain in &mut timers {
            for _ in 0..r.len()? {
                let timestamp = r.i64()?;
                let len = r.len()?;
                domain.set(timestamp, r.take(len)?);
            }
        }
        if !r.0.is_empty() {
            if r.len()? != splits.len() {
                return Err(TaskStateError::TimeSection);
            }
            for split in &mut splits {
                split.idle = r.take(1)?[0] & 1 != 0;
            }
        }
        if !r.0.is_empty() {
            return Err(TaskStateError::TimeSection);
        }
        Ok(TimeState {
            watermark,
            inputs,
            splits,
            timers,
        })
    }
}

fn push_len(out: &mut Vec<u8>, len: usize) {
    let len = u32::try_from(len).expect("a time section's counts are below 2^32");
    out.extend_from_slice(&len.to_le_bytes());
}

/// Reads a time section front to back.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], TaskStateError> {
        if self.0.len() < n {
            return Err(TaskStateError::TimeSection);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn len(&mut self) -> Result<usize, TaskStateError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
    }

    fn i64(&mut self) -> Result<i64, TaskStateError> {
        let b = self.take(8)?;
        Ok(i64::from_le_bytes(b.try_into().expect("8 bytes")))
    }
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
    fn a_time_section_round_trips_beside_the_inner_state() {
        let mut timers = [Timers::new(), Timers::new()];
        timers[0].set(999, b"k1");
        timers[0].set(1999, b"");
        timers[1].set(1_700_000_000_000, b"session");
        let inputs = [
            InputTime {
                watermark: 500,
                idle: true,
                ended: false,
            },
            InputTime {
                watermark: i64::MIN,
                idle: false,
                ended: true,
            },
        ];
        let splits = [
            SplitTime {
                name: "events/0".to_string(),
                max_timestamp: 1_234,
                idle: false,
            },
            SplitTime {
                name: "events/1".to_string(),
                max_timestamp: i64::MIN,
                idle: true,
            },
        ];
        let time = TimeState::encode(499, &inputs, &splits, &timers);
        let state = TaskState {
            finished: false,
            time: Some(time),
            inner: vec![7, 8, 9],
        };
        let back = TaskState::decode(state.encode()).unwrap();
        assert_eq!(back, state);
        let decoded = TimeState::decode(back.time.as_deref().unwrap()).unwrap();
        assert_eq!(
            decoded,
            TimeState {
                watermark: 499,
                inputs: inputs.to_vec(),
                splits: splits.to_vec(),
                timers,
            }
        );
        // Cut anywhere, or with a byte too many, the section is refused rather than misread —
        // but for where the split flags begin: a section written before they existed ends
        // there, and restores every split active.
        let section = back.time.unwrap();
        let before_flags = section.len() - 4 - splits.len();
        for cut in (0..section.len()).filter(|&cut| cut != before_flags) {
            assert!(TimeState::decode(&section[..cut]).is_err(), "cut at {cut}");
        }
        let older = TimeState::decode(&section[..before_flags]).unwrap();
        assert!(older.splits.iter().all(|split| !split.idle), "{older:?}");
        assert_eq!(older.splits[1].max_timestamp, i64::MIN);
        let mut longer = section.clone();
        longer.push(0);
        assert!(TimeState::decode(&longer).is_err());
    }

    #[test]
    fn round_trips_and_rejects_unknown_versions() {
        let s = TaskState {
            finished: true,
            time: None,
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
            TaskState::decode(vec![1, 4]).unwrap_err().to_string(),
            "unknown task state flags 0x04"
        );
        assert_eq!(
            TaskState::decode(vec![1, 2, 9]).unwrap_err(),
            TaskStateError::TimeSection
        );
    }
}
