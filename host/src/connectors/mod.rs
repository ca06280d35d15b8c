//! Sources and sinks: where records enter and leave a job.
//!
//! Each connector owns what makes it restartable: a source its position
//! (checkpointed as bytes, restored with [`Source::seek`]), the exactly-once
//! file sink its two-phase commit (pre-commit at the barrier, commit when the
//! checkpoint completes, recover on restore).

pub mod blackhole;
pub mod file_sink;
pub mod file_source;
pub mod generator;
pub mod stdout_sink;

use std::time::Duration;

use crate::dataflow::router::Router;
use crate::dataflow::task::TaskError;

/// What one [`Source::poll`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourcePoll {
    /// Records were emitted (maybe zero); poll again soon.
    Emitted,
    /// Nothing to read right now (rate limit, or a followed file not growing): poll again after this long.
    Idle(Duration),
    /// The source has no more records, ever.
    Exhausted,
}

/// A source of records with a checkpointable position.
pub trait Source: Send {
    /// Emits up to `max` records into `out`.
    fn poll(&mut self, out: &mut Router, max: usize) -> Result<SourcePoll, TaskError>;
    /// The current position: everything before it has been emitted.
    fn position(&self) -> Vec<u8>;
    /// Moves to a position returned by [`position`](Self::position).
    fn seek(&mut self, position: &[u8]) -> Result<(), TaskError>;
}

/// Reads a little-endian `u64` position, naming the source when it is malformed.
pub(crate) fn decode_u64_position(what: &str, bytes: &[u8]) -> Result<u64, TaskError> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| {
        TaskError::Restore(format!(
            "{what} position must be 8 bytes, found {}",
            bytes.len()
        ))
    })?;
    Ok(u64::from_le_bytes(arr))
}

/// The line a sink writes for a record: `key<TAB>value`, or just `value` when the key is empty.
pub(crate) fn write_record_line(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    if !key.is_empty() {
        out.extend_from_slice(key);
        out.push(b'\t');
    }
    out.extend_from_slice(value);
    out.push(b'\n');
}
