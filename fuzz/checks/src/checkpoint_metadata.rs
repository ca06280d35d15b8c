//! The checkpoint files a restore reads before trusting anything: the CRC-32 frame of every
//! state and metadata file (`weir::checkpoint::format`) and the metadata record inside its
//! frame (`CheckpointMetadata::decode`).
//!
//! The input is used twice:
//! 1. **as a whole file**, read as a state file and as a metadata file — this reaches the
//!    magic, version, length and checksum checks, and the payload of a file whose frame
//!    verifies (a seed written by the host, or a lucky mutation);
//! 2. **as the payload of an intact metadata frame**, which sends every input past the
//!    checksum to the JSON reader and the record's consistency checks, which random bytes
//!    would almost never reach through (1).
//!
//! Properties, for any bytes:
//! - the readers return, never panic;
//! - every error names the file it was read from;
//! - a frame that verifies is re-framed by `format::encode` to the very same bytes, and its
//!   checksum is the trailer's;
//! - a metadata record that decodes is consistent (`validate`), and what `encode` writes for
//!   it decodes to the same record.

use std::path::Path;

use weir::checkpoint::format::{self, FORMAT_VERSION, FileKind};
use weir::checkpoint::metadata::CheckpointMetadata;

/// The path errors must name; nothing is read from or written to it.
const PATH: &str = "/fuzz/chk-0000000001/_metadata";

/// Checks the frame and the metadata readers against `bytes`; panics when a property fails.
pub fn check(bytes: &[u8]) {
    check_frame(FileKind::State, bytes);
    check_frame(FileKind::Metadata, bytes);
    check_metadata(bytes);
    check_metadata(&format::encode(FileKind::Metadata, bytes));
}

/// The frame properties for one kind of file.
fn check_frame(kind: FileKind, bytes: &[u8]) {
    match format::decode(kind, Path::new(PATH), bytes) {
        Ok(frame) => {
            assert_eq!(frame.version, FORMAT_VERSION);
            assert_eq!(Some(frame.crc32), format::stored_crc32(bytes));
            assert!(
                format::encode(kind, frame.payload) == bytes,
                "re-framing the payload of a verified {kind} changed its bytes"
            );
        }
        Err(error) => assert_names_the_file(&error.to_string()),
    }
}

/// The metadata properties for the bytes of a whole `_metadata` file.
fn check_metadata(bytes: &[u8]) {
    let path = Path::new(PATH);
    match CheckpointMetadata::decode(path, bytes) {
        Ok(meta) => {
            if let Err(problem) = meta.validate() {
                panic!("decode accepted a record that does not validate: {problem}");
            }
            let written = meta.encode();
            match CheckpointMetadata::decode(path, &written) {
                Ok(reread) => assert_eq!(reread, meta, "the record changed through encode"),
                Err(error) => panic!("a decoded record, encoded again, does not decode: {error}"),
            }
        }
        Err(error) => assert_names_the_file(&error.to_string()),
    }
}

/// Errors about a checkpoint file start by naming it.
fn assert_names_the_file(message: &str) {
    assert!(
        message.contains(PATH),
        "error does not name the file: {message:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_framed_json_and_garbage() {
        check(b"");
        check(b"{\"format_version\": 1}");
        check(&format::encode(FileKind::State, b"state"));
        check(&format::encode(FileKind::Metadata, b"[]"));
    }
}
