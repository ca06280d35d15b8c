//! The framing of every checkpoint file, and the durable write that puts one
//! on disk.
//!
//! Why a module of its own: a checkpoint is only worth something if a restore
//! can tell a good file from a bad one. Every file the storage writes — the
//! state file of a task and the metadata of a checkpoint — is wrapped in the
//! same frame, and every reader verifies all of it before trusting a byte.
//! The byte layout is written down here, next to the code
//! that encodes it, and in `docs/CHECKPOINTS.md`.
//!
//! # Byte layout (all integers little-endian)
//!
//! ```text
//! offset    size  field
//! 0         8     magic: "WEIRSTAT" (state file), "WEIRMETA" (metadata file) or
//!                 "WEIRHIST" (the job's checkpoint history), ASCII
//! 8         4     format version, u32 (this build writes and reads 1)
//! 12        8     payload length N, u64
//! 20        N     payload: the task's state bytes (opaque), or the metadata or history JSON
//! 20 + N    4     CRC-32 (IEEE, as crc32fast computes it) of bytes 0 .. 20 + N
//! ```
//!
//! A file is exactly `N + 24` bytes. Readers check, in this order: the magic
//! (so a metadata file is never read as state, nor a stray file as either),
//! the version, the length (a file shorter than its header says is truncated,
//! a longer one has trailing bytes), then the checksum. Each failure names
//! the file and the problem, e.g.
//! `state file /jobs/wc/chk-0000000007/count-1.state: truncated: expected 1048 bytes, found 512`.
//!
//! # Durable writes
//!
//! [`write_durable`] writes `x.tmp`, fsyncs it, renames it to `x` (or, for
//! metadata, links it without ever replacing an existing `x`), then fsyncs the
//! directory so the new name itself survives a power loss. A crash before the
//! rename leaves only `x.tmp`, which no reader ever opens.

use std::fmt;
use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::checkpoint::layout::CheckpointLayout;
use crate::parallel;

/// The framing version this build writes, and the only one it reads.
pub const FORMAT_VERSION: u32 = 1;

/// Bytes before the payload: magic, version, payload length.
pub const HEADER_LEN: usize = 20;

/// Bytes after the payload: the CRC-32.
pub const TRAILER_LEN: usize = 4;

/// Bytes a frame adds to its payload.
pub const FRAME_OVERHEAD: usize = HEADER_LEN + TRAILER_LEN;

/// Magic of a task's state file.
pub const STATE_MAGIC: [u8; 8] = *b"WEIRSTAT";

/// Magic of a checkpoint's metadata file.
pub const METADATA_MAGIC: [u8; 8] = *b"WEIRMETA";

/// Magic of the job's checkpoint history (`_history`).
pub const HISTORY_MAGIC: [u8; 8] = *b"WEIRHIST";

/// Which kind of checkpoint file a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FileKind {
    /// One task's snapshot: opaque bytes.
    State,
    /// A checkpoint's metadata: JSON.
    Metadata,
    /// The job's checkpoint history: JSON (`checkpoint/history.rs`).
    History,
}

impl FileKind {
    /// The magic this kind of file starts with.
    pub fn magic(self) -> [u8; 8] {
        match self {
            FileKind::State => STATE_MAGIC,
            FileKind::Metadata => METADATA_MAGIC,
            FileKind::History => HISTORY_MAGIC,
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::State => "state file",
            FileKind::Metadata => "metadata file",
            FileKind::History => "checkpoint history",
        })
    }
}

/// What is wrong with a file that does not verify.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FormatProblem {
    /// The file does not start with the magic of its kind: it is another
    /// kind of file, or garbage.
    #[error(
        "bad magic: expected {}, found {}",
        show_bytes(expected),
        show_bytes(found)
    )]
    BadMagic {
        /// The magic of the expected kind.
        expected: Vec<u8>,
        /// The first bytes of the file (fewer than 8 if it is shorter).
        found: Vec<u8>,
    },
    /// The file was written by a build with another framing version.
    #[error("unsupported version {found} (this build reads {supported})")]
    UnsupportedVersion {
        /// The version in the file.
        found: u32,
        /// [`FORMAT_VERSION`].
        supported: u32,
    },
    /// The file is shorter than its header (or its state handle) says.
    #[error("truncated: expected {expected} bytes, found {found}")]
    Truncated {
        /// How long the file should be.
        expected: u64,
        /// How long it is.
        found: u64,
    },
    /// The file is longer than its header says.
    #[error("trailing bytes: expected {expected} bytes, found {found}")]
    TrailingBytes {
        /// How long the file should be.
        expected: u64,
        /// How long it is.
        found: u64,
    },
    /// The stored checksum is not that of the bytes before it.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    ChecksumMismatch {
        /// The CRC-32 in the trailer.
        stored: u32,
        /// The CRC-32 of the bytes read.
        computed: u32,
    },
}

/// A file that does not verify: which file, of which kind, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{kind} {path}: {problem}")]
pub struct FormatError {
    /// The kind of file that was expected.
    pub kind: FileKind,
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub problem: FormatProblem,
}

/// A file-system operation that failed, naming the operation and the path.
#[derive(Debug, Error)]
#[error("cannot {action} {path}: {source}")]
pub struct IoError {
    /// What was being done, as a verb phrase ("write", "rename … to").
    pub action: &'static str,
    /// The path it was done to.
    pub path: PathBuf,
    /// The operating system's error.
    #[source]
    pub source: io::Error,
}

impl IoError {
    /// An error doing `action` to `path`.
    pub fn new(action: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        IoError {
            action,
            path: path.into(),
            source,
        }
    }

    /// Whether the path did not exist.
    pub fn is_not_found(&self) -> bool {
        self.source.kind() == io::ErrorKind::NotFound
    }

    /// Whether the target already existed (a no-replace write refused).
    pub fn is_already_exists(&self) -> bool {
        self.source.kind() == io::ErrorKind::AlreadyExists
    }
}

/// A verified frame, borrowing the file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The framing version of the file.
    pub version: u32,
    /// The payload.
    pub payload: &'a [u8],
    /// The CRC-32 stored in the trailer (and verified).
    pub crc32: u32,
}

/// Frames `payload` as a file of `kind`: header, payload, checksum.
pub fn encode(kind: FileKind, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + FRAME_OVERHEAD);
    out.extend_from_slice(&header(kind, payload.len()));
    out.extend_from_slice(payload);
    let crc = parallel::crc32(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The header of a file of `kind` whose payload is `len` bytes long.
fn header(kind: FileKind, len: usize) -> [u8; HEADER_LEN] {
    let mut header = [0; HEADER_LEN];
    header[..8].copy_from_slice(&kind.magic());
    header[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    header[12..].copy_from_slice(&(len as u64).to_le_bytes());
    header
}

/// Whether the file at `path` is the payload of a file of `kind` whose handle gives its
/// `length` (frame included) and `crc32`: what a local copy of a file that the storage holds
/// framed must be to stand in for it.
pub fn is_payload_of(kind: FileKind, path: &Path, length: u64, crc32: u32) -> io::Result<bool> {
    let payload = parallel::read_file(path)?;
    if payload.len() as u64 + FRAME_OVERHEAD as u64 != length {
        return Ok(false);
    }
    let mut whole = crc32fast::Hasher::new();
    whole.update(&header(kind, payload.len()));
    whole.combine(&crc32fast::Hasher::new_with_initial_len(
        parallel::crc32(&payload),
        payload.len() as u64,
    ));
    Ok(whole.finalize() == crc32)
}

/// The checksum stored in the trailer of an encoded file, as recorded in a
/// state handle. `None` if `bytes` is too short to have one.
pub fn stored_crc32(bytes: &[u8]) -> Option<u32> {
    let start = bytes.len().checked_sub(TRAILER_LEN)?;
    Some(u32::from_le_bytes(bytes[start..].try_into().ok()?))
}

/// Verifies `bytes`, read from `path`, as a file of `kind` and returns its
/// payload. Never panics, whatever the bytes.
pub fn decode<'a>(kind: FileKind, path: &Path, bytes: &'a [u8]) -> Result<Frame<'a>, FormatError> {
    let fail = |problem| FormatError {
        kind,
        path: path.to_owned(),
        problem,
    };
    let found_len = bytes.len() as u64;
    let magic = kind.magic();
    let head = &bytes[..bytes.len().min(magic.len())];
    if head != &magic[..head.len()] {
        return Err(fail(FormatProblem::BadMagic {
            expected: magic.to_vec(),
            found: head.to_vec(),
        }));
    }
    if bytes.len() < HEADER_LEN {
        return Err(fail(FormatProblem::Truncated {
            expected: FRAME_OVERHEAD as u64,
            found: found_len,
        }));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    if version != FORMAT_VERSION {
        return Err(fail(FormatProblem::UnsupportedVersion {
            found: version,
            supported: FORMAT_VERSION,
        }));
    }
    let payload_len = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let expected = payload_len.saturating_add(FRAME_OVERHEAD as u64);
    if found_len < expected {
        return Err(fail(FormatProblem::Truncated {
            expected,
            found: found_len,
        }));
    }
    if found_len > expected {
        return Err(fail(FormatProblem::TrailingBytes {
            expected,
            found: found_len,
        }));
    }
    // The length fits: found_len == expected, and found_len is a usize.
    let body_end = bytes.len() - TRAILER_LEN;
    let stored = u32::from_le_bytes(bytes[body_end..].try_into().expect("4 bytes"));
    let computed = parallel::crc32(&bytes[..body_end]);
    if stored != computed {
        return Err(fail(FormatProblem::ChecksumMismatch { stored, computed }));
    }
    Ok(Frame {
        version,
        payload: &bytes[HEADER_LEN..body_end],
        crc32: stored,
    })
}

/// What [`write_durable`] does when the target file already exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overwrite {
    /// Replace it atomically (state files: a retried snapshot of the same
    /// task in a not-yet-complete checkpoint).
    Replace,
    /// Fail with [`io::ErrorKind::AlreadyExists`] and leave it untouched
    /// (metadata: a completed checkpoint is never overwritten).
    Refuse,
}

/// Writes `bytes` to `path` durably: `path.tmp` (`path.<pid>-<n>.tmp` for
/// [`Overwrite::Refuse`], whose writers may race) → write → fsync → rename (or
/// link, for [`Overwrite::Refuse`]) → fsync the directory. When this returns
/// `Ok`, the file is on disk under its final name with exactly these bytes;
/// when it returns `Err`, the final name was not created or changed (a
/// leftover `path.tmp` is removed when possible, and is ignored by readers
/// otherwise).
pub fn write_durable(path: &Path, bytes: &[u8], overwrite: Overwrite) -> Result<(), IoError> {
    // A file only one writer may create can have several racing: each its own temporary file.
    let tmp = match overwrite {
        Overwrite::Replace => CheckpointLayout::temp_file(path),
        Overwrite::Refuse => CheckpointLayout::writer_temp_file(path),
    };
    let result = write_then_publish(&tmp, path, bytes, overwrite);
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn write_then_publish(
    tmp: &Path,
    path: &Path,
    bytes: &[u8],
    overwrite: Overwrite,
) -> Result<(), IoError> {
    let mut file = File::create(tmp).map_err(|e| IoError::new("create", tmp, e))?;
    write_bytes(&mut file, tmp, path, bytes)?;
    file.sync_all().map_err(|e| IoError::new("fsync", tmp, e))?;
    drop(file);
    match overwrite {
        Overwrite::Replace => {
            fs::rename(tmp, path)
                .map_err(|e| IoError::new("rename a temporary file to", path, e))?;
        }
        Overwrite::Refuse => publish_without_replacing(tmp, path)?,
    }
    sync_parent(path)
}

/// Writes `bytes` into the open `tmp` (to become `path`).
#[cfg(not(feature = "test-hooks"))]
fn write_bytes(file: &mut File, tmp: &Path, _path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    file.write_all(bytes)
        .map_err(|e| IoError::new("write", tmp, e))
}

/// Writes `bytes` into the open `tmp` (to become `path`) in two halves, so that a crash test
/// can kill the process between them: at `metadata-write` for a checkpoint's metadata, at
/// `state-write` for a state file.
#[cfg(feature = "test-hooks")]
fn write_bytes(file: &mut File, tmp: &Path, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
    use crate::checkpoint::layout;
    use crate::kill_point::{self, KillPoint};
    let (head, tail) = bytes.split_at(bytes.len() / 2);
    file.write_all(head)
        .map_err(|e| IoError::new("write", tmp, e))?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name == layout::METADATA_FILE {
        kill_point::reached(KillPoint::MetadataWrite);
    } else if name.ends_with(layout::STATE_SUFFIX) {
        kill_point::reached(KillPoint::StateWrite);
    }
    file.write_all(tail)
        .map_err(|e| IoError::new("write", tmp, e))
}

/// Gives `tmp` the name `path` unless `path` exists. A hard link is atomic
/// and fails if the target exists, so even two racing writers cannot both
/// publish. On file systems without hard links, falls back to check-then-
/// rename (a race there needs two processes writing one job directory, which
/// is not supported anyway).
fn publish_without_replacing(tmp: &Path, path: &Path) -> Result<(), IoError> {
    match fs::hard_link(tmp, path) {
        Ok(()) => {
            fs::remove_file(tmp).map_err(|e| IoError::new("remove", tmp, e))?;
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(IoError::new("create", path, e)),
        Err(_) => {
            if path.exists() {
                let e = io::Error::new(io::ErrorKind::AlreadyExists, "file exists");
                return Err(IoError::new("create", path, e));
            }
            fs::rename(tmp, path).map_err(|e| IoError::new("rename a temporary file to", path, e))
        }
    }
}

/// Creates `dir` and any missing parent, and makes the new entries durable
/// (fsyncs each parent whose content changed).
pub fn create_dir_durable(dir: &Path) -> Result<(), IoError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_dir_durable(parent)?;
    }
    match fs::create_dir(dir) {
        Ok(()) => sync_parent(dir),
        // Another task of the same checkpoint created it first.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(IoError::new("create directory", dir, e)),
    }
}

/// Fsyncs the directory holding `path`, so that a created, renamed or
/// removed name in it survives a power loss.
pub fn sync_parent(path: &Path) -> Result<(), IoError> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => sync_dir(parent),
        None => sync_dir(Path::new(".")),
    }
}

/// Fsyncs a directory. On platforms where a directory cannot be opened as a
/// file (Windows), this is a no-op: there, renames are durable once the
/// file system journal commits them.
pub fn sync_dir(dir: &Path) -> Result<(), IoError> {
    #[cfg(unix)]
    {
        let handle = File::open(dir).map_err(|e| IoError::new("open directory", dir, e))?;
        handle
            .sync_all()
            .map_err(|e| IoError::new("fsync directory", dir, e))?;
    }
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Shows bytes as ASCII where printable, `\xNN` elsewhere, for messages.
fn show_bytes(bytes: &[u8]) -> String {
    format!("\"{}\"", bytes.escape_ascii())
}

/// Serde for a `u64` as a `0x`-prefixed, 16-digit hex string, as the
/// metadata writes fingerprints (JSON numbers lose precision above 2^53).
pub(crate) mod hex_u64 {
    use serde::{Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(value: &u64, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format!("{value:#018x}"))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
        super::parse_hex(deserializer)
    }
}

/// Serde for a `u32` as a `0x`-prefixed, 8-digit hex string, as checksums
/// are shown in error messages.
pub(crate) mod hex_u32 {
    use serde::{Deserializer, Serializer, de::Error};

    pub(crate) fn serialize<S: Serializer>(value: &u32, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format!("{value:#010x}"))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
        let value = super::parse_hex(deserializer)?;
        u32::try_from(value)
            .map_err(|_| D::Error::custom(format!("{value:#x} does not fit in 32 bits")))
    }
}

/// Reads a `0x`-prefixed hex string.
fn parse_hex<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    use serde::{Deserialize, de::Error};
    let text = String::deserialize(deserializer)?;
    let digits = text.strip_prefix("0x").ok_or_else(|| {
        D::Error::custom(format!("expected a 0x-prefixed hex string, found {text:?}"))
    })?;
    u64::from_str_radix(digits, 16)
        .map_err(|e| D::Error::custom(format!("bad hex number {text:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p() -> &'static Path {
        Path::new("/jobs/wc/chk-0000000007/count-1.state")
    }

    #[test]
    fn round_trips_a_payload() {
        let bytes = encode(FileKind::State, b"hello");
        assert_eq!(bytes.len(), 5 + FRAME_OVERHEAD);
        assert_eq!(&bytes[..8], b"WEIRSTAT");
        let frame = decode(FileKind::State, p(), &bytes).unwrap();
        assert_eq!(frame.payload, b"hello");
        assert_eq!(frame.version, FORMAT_VERSION);
        assert_eq!(Some(frame.crc32), stored_crc32(&bytes));
    }

    #[test]
    fn empty_payload_is_a_valid_file() {
        let bytes = encode(FileKind::Metadata, b"");
        assert_eq!(
            decode(FileKind::Metadata, p(), &bytes).unwrap().payload,
            b""
        );
    }

    #[test]
    fn metadata_is_never_read_as_state() {
        let bytes = encode(FileKind::Metadata, b"{}");
        let err = decode(FileKind::State, p(), &bytes).unwrap_err();
        assert!(matches!(err.problem, FormatProblem::BadMagic { .. }));
        assert_eq!(
            err.to_string(),
            "state file /jobs/wc/chk-0000000007/count-1.state: \
             bad magic: expected \"WEIRSTAT\", found \"WEIRMETA\""
        );
    }

    #[test]
    fn names_an_unsupported_version() {
        let mut bytes = encode(FileKind::State, b"x");
        bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
        let err = decode(FileKind::State, p(), &bytes).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("unsupported version 7 (this build reads 1)"),
            "{err}"
        );
    }

    #[test]
    fn names_a_truncated_file_with_both_lengths() {
        let bytes = encode(FileKind::State, &[1; 100]);
        let err = decode(FileKind::State, p(), &bytes[..60]).unwrap_err();
        assert_eq!(
            err.problem,
            FormatProblem::Truncated {
                expected: 124,
                found: 60
            }
        );
        assert!(
            err.to_string()
                .ends_with("truncated: expected 124 bytes, found 60"),
            "{err}"
        );
        let err = decode(FileKind::State, p(), &bytes[..10]).unwrap_err();
        assert_eq!(
            err.problem,
            FormatProblem::Truncated {
                expected: 24,
                found: 10
            }
        );
    }

    #[test]
    fn names_trailing_bytes() {
        let mut bytes = encode(FileKind::State, b"abc");
        bytes.push(0);
        let err = decode(FileKind::State, p(), &bytes).unwrap_err();
        assert_eq!(
            err.problem,
            FormatProblem::TrailingBytes {
                expected: 27,
                found: 28
            }
        );
    }

    #[test]
    fn names_a_checksum_mismatch_and_the_file() {
        let mut bytes = encode(FileKind::Metadata, b"{\"a\":1}");
        bytes[HEADER_LEN + 2] ^= 0x40;
        let err = decode(FileKind::Metadata, p(), &bytes).unwrap_err();
        assert!(matches!(
            err.problem,
            FormatProblem::ChecksumMismatch { .. }
        ));
        let msg = err.to_string();
        assert!(
            msg.starts_with(
                "metadata file /jobs/wc/chk-0000000007/count-1.state: checksum mismatch: stored 0x"
            ),
            "{msg}"
        );
    }

    #[test]
    fn durable_write_replaces_or_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a").join("b").join("f");
        create_dir_durable(path.parent().unwrap()).unwrap();
        write_durable(&path, b"one", Overwrite::Replace).unwrap();
        write_durable(&path, b"two", Overwrite::Replace).unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let err = write_durable(&path, b"three", Overwrite::Refuse).unwrap_err();
        assert!(err.is_already_exists(), "{err}");
        assert_eq!(fs::read(&path).unwrap(), b"two");
        let fresh = path.with_file_name("g");
        write_durable(&fresh, b"four", Overwrite::Refuse).unwrap();
        assert_eq!(fs::read(&fresh).unwrap(), b"four");
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn of_writers_racing_to_create_a_file_the_one_told_it_won_wrote_it() {
        // Two runs create one file (a generation, the job's id) each with its own bytes: the
        // one whose write succeeded must find its bytes there, the others AlreadyExists.
        for round in 0..50 {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("_id");
            let won: Vec<Option<Vec<u8>>> = std::thread::scope(|scope| {
                let writers: Vec<_> = (0..4u8)
                    .map(|w| {
                        let path = path.clone();
                        scope.spawn(move || {
                            let bytes = vec![w; 64 * 1024];
                            match write_durable(&path, &bytes, Overwrite::Refuse) {
                                Ok(()) => Some(bytes),
                                Err(e) if e.is_already_exists() => None,
                                Err(e) => panic!("{e}"),
                            }
                        })
                    })
                    .collect();
                writers.into_iter().map(|w| w.join().unwrap()).collect()
            });
            let winners: Vec<&Vec<u8>> = won.iter().flatten().collect();
            assert_eq!(winners.len(), 1, "round {round}");
            assert!(fs::read(&path).unwrap() == *winners[0], "round {round}");
        }
    }

    #[test]
    fn durable_write_into_a_missing_dir_names_the_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing").join("f");
        let err = write_durable(&path, b"x", Overwrite::Replace).unwrap_err();
        assert!(err.is_not_found());
        assert!(err.to_string().starts_with("cannot create "), "{err}");
        assert!(err.to_string().contains("f.tmp"), "{err}");
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(FileKind::State, p(), &bytes);
            let _ = decode(FileKind::Metadata, p(), &bytes);
        }

        #[test]
        fn decoding_a_valid_header_with_arbitrary_rest_never_panics(
            len: u64,
            rest in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut bytes = STATE_MAGIC.to_vec();
            bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend_from_slice(&rest);
            let _ = decode(FileKind::State, p(), &bytes);
        }

        #[test]
        fn any_flipped_byte_is_detected(
            payload in proptest::collection::vec(any::<u8>(), 0..128),
            at: prop::sample::Index,
            flip in 1u8..,
        ) {
            let mut bytes = encode(FileKind::State, &payload);
            let i = at.index(bytes.len());
            bytes[i] ^= flip;
            prop_assert!(decode(FileKind::State, p(), &bytes).is_err());
        }

        #[test]
        fn any_truncation_is_detected(payload in proptest::collection::vec(any::<u8>(), 0..128), cut: prop::sample::Index) {
            let bytes = encode(FileKind::State, &payload);
            let keep = cut.index(bytes.len());
            prop_assert!(decode(FileKind::State, p(), &bytes[..keep]).is_err());
        }
    }
}
