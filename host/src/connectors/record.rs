//! Helpers several connectors share: reading a position stored as a little-endian `u64`, and
//! writing a record as a line of text.
//!
//! A file of their own so that `mod.rs` stays the face of the layer (the registry of
//! connectors) and the connectors it names do not import back from it.

use crate::dataflow::error::TaskError;

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
