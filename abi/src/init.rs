//! The init message: what the host tells a guest instance about itself.
//!
//! Layout, all integers little-endian, no padding (`docs/ABI.md` §Init):
//!
//! ```text
//! offset  size  field
//! 0       4     subtask_index: u32   0-based index of this instance
//! 4       4     parallelism: u32     number of instances of the operator
//! 8       4     name_len: u32
//! 12      ...   name_len bytes: the operator's name (UTF-8)
//! ...     4     config_len: u32
//! ...     ...   config_len bytes: the operator's config from the job file
//! ```

use core::fmt;

use crate::wire::Reader;

/// What a guest instance learns at init: who it is and how it is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitMessage<'a> {
    /// The operator's name in the job.
    pub operator: &'a str,
    /// Which of the operator's instances this is, from 0.
    pub subtask: u32,
    /// How many instances of the operator run.
    pub parallelism: u32,
    /// The operator's `config` from the job file, as bytes (often UTF-8 text).
    pub config: &'a [u8],
}

/// Why a byte string is not a valid init message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitDecodeError {
    /// Which field could not be read.
    pub field: &'static str,
    /// What was wrong with it.
    pub problem: &'static str,
}

impl fmt::Display for InitDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "init message field `{}`: {}", self.field, self.problem)
    }
}

impl std::error::Error for InitDecodeError {}

impl<'a> InitMessage<'a> {
    /// Encodes the message.
    ///
    /// # Panics
    /// If the name or config is longer than `u32::MAX` bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.operator.len() + self.config.len());
        out.extend_from_slice(&self.subtask.to_le_bytes());
        out.extend_from_slice(&self.parallelism.to_le_bytes());
        for field in [self.operator.as_bytes(), self.config] {
            let len = u32::try_from(field.len()).expect("init field longer than u32::MAX bytes");
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(field);
        }
        out
    }

    /// Decodes and validates a message.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, InitDecodeError> {
        let short = |field| {
            move |_| InitDecodeError {
                field,
                problem: "message ends early",
            }
        };
        let mut r = Reader::new(bytes);
        let subtask = r.u32().map_err(short("subtask_index"))?;
        let parallelism = r.u32().map_err(short("parallelism"))?;
        let name_len = r.u32().map_err(short("name_len"))? as usize;
        let name = r.take(name_len).map_err(short("name"))?;
        let operator = core::str::from_utf8(name).map_err(|_| InitDecodeError {
            field: "name",
            problem: "not UTF-8",
        })?;
        let config_len = r.u32().map_err(short("config_len"))? as usize;
        let config = r.take(config_len).map_err(short("config"))?;
        if r.remaining() != 0 {
            return Err(InitDecodeError {
                field: "config",
                problem: "bytes follow the config",
            });
        }
        if subtask >= parallelism {
            return Err(InitDecodeError {
                field: "subtask_index",
                problem: "not below parallelism",
            });
        }
        Ok(InitMessage {
            operator,
            subtask,
            parallelism,
            config,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let msg = InitMessage {
            operator: "count",
            subtask: 1,
            parallelism: 2,
            config: b"k=v",
        };
        let bytes = msg.encode();
        assert_eq!(bytes.len(), 4 + 4 + 4 + 5 + 4 + 3);
        assert_eq!(InitMessage::decode(&bytes).unwrap(), msg);
    }

    #[test]
    fn rejects_bad_messages_naming_the_field() {
        let msg = InitMessage {
            operator: "op",
            subtask: 0,
            parallelism: 1,
            config: b"",
        };
        let bytes = msg.encode();
        for cut in 0..bytes.len() {
            assert!(InitMessage::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let bad = InitMessage {
            subtask: 1,
            parallelism: 1,
            ..msg
        }
        .encode();
        assert_eq!(
            InitMessage::decode(&bad).unwrap_err().to_string(),
            "init message field `subtask_index`: not below parallelism"
        );
    }
}
