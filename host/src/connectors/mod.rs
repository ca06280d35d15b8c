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

use crate::dataflow::processor::TaskError;

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
