//! Checkpoint storage: the small trait the coordinator, the tasks and restore
//! talk to, and its implementations.
//!
//! Why a module of its own: object storage is to be able to replace local
//! files later, and the coordinator and runtime tests want a storage that
//! touches no disk and one that fails on demand. So the rest of the host sees
//! only [`CheckpointStorage`]:
//!
//! - [`LocalStorage`]: files on a local file system, the real one;
//! - `MemoryStorage`: the same logic over an in-memory file tree, for tests;
//! - `FaultyStorage`: either of them with faults injected on chosen writes
//!   (an error, or a crash that leaves a half-written `.tmp` behind).
//!
//! The two doubles live in `doubles.rs`, built for the host's unit tests and,
//! with the cargo feature `test-hooks`, for the test crates only.
//!
//! All three share one implementation of the checkpoint rules (framing,
//! paths, commit order, listing, cleanup) over a private file-system
//! interface, so the doubles cannot drift from the real thing: only the
//! bottom layer (read a file, write one durably, list a directory) differs.
//!
//! # Commit order
//!
//! 1. each task: [`write_state`](CheckpointStorage::write_state) — creates
//!    the checkpoint directory if needed, writes `<task>.state` durably, and
//!    returns the [`StateHandle`] its acknowledgement carries;
//! 2. the coordinator, once every task acknowledged:
//!    [`write_metadata`](CheckpointStorage::write_metadata) — writes
//!    `_metadata` durably, never over an existing one. That rename is the
//!    commit point: before it the checkpoint is incomplete, after it complete;
//! 3. pruning: [`discard`](CheckpointStorage::discard) — removes `_metadata`
//!    first (un-publishing the checkpoint), then the rest.
//!
//! `docs/CHECKPOINTS.md` says what a crash at each step leaves behind.

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::checkpoint::format::{
    self, FileKind, FormatError, FormatProblem, HEADER_LEN, IoError, Overwrite, TRAILER_LEN,
};
use crate::checkpoint::history::{CheckpointHistory, HistoryError};
use crate::checkpoint::layout::{CheckpointLayout, CheckpointLocation, LayoutError, METADATA_FILE};
use crate::checkpoint::metadata::{CheckpointMetadata, MetadataError, StateHandle};
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::parallel;

/// Why a storage operation failed, naming the file or directory concerned.
#[derive(Debug, Error)]
pub enum StorageError {
    /// A file-system operation failed.
    #[error(transparent)]
    Io(#[from] IoError),
    /// A state file does not verify (magic, version, length, checksum).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// A metadata file does not verify or is inconsistent.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
    /// A path could not be built (bad vertex name, or a file name that would leave its directory).
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// The checkpoint already has metadata: a completed checkpoint is never
    /// written to again.
    #[error("{kind} {dir} is already complete: refusing to overwrite it")]
    AlreadyCompleted {
        /// Checkpoint or savepoint.
        kind: CheckpointKind,
        /// Its directory.
        dir: PathBuf,
    },
    /// The checkpoint has no metadata: it was never completed (or its
    /// pruning was interrupted).
    #[error("metadata file {path} is missing: the checkpoint is incomplete")]
    MissingMetadata {
        /// Where the metadata should be.
        path: PathBuf,
    },
    /// A state file verifies on its own but is not the file its handle
    /// describes (replaced, or from another attempt).
    #[error(
        "state file {path} does not match its state handle: the metadata records {expected_length} \
         bytes with checksum {expected_crc32:#010x}, the file has {found_length} bytes with \
         checksum {found_crc32:#010x}"
    )]
    HandleMismatch {
        /// The state file.
        path: PathBuf,
        /// Length recorded in the handle.
        expected_length: u64,
        /// Checksum recorded in the handle.
        expected_crc32: u32,
        /// Length of the file.
        found_length: u64,
        /// Checksum stored in the file.
        found_crc32: u32,
    },
    /// A task's state is an image delta whose chain link cannot be used:
    /// the link's checkpoint is gone or corrupt, or does not hold what the
    /// chain says.
    #[error(
        "state file {path} is an image delta that builds on checkpoint {link}, which cannot \
         be used: {problem}"
    )]
    BrokenChain {
        /// The state file of the delta.
        path: PathBuf,
        /// The checkpoint it builds on.
        link: CheckpointId,
        /// What is wrong with the link (naming its file).
        problem: String,
    },
    /// The job's checkpoint history does not verify.
    #[error(
        "{0}: it records the checkpoint ids this job has used, so that none is used twice; if \
         the disk was damaged, move the file away to start anyway (a checkpoint id of a run that \
         crashed may then be used again)"
    )]
    History(#[from] HistoryError),
    /// A path given to [`locate`](CheckpointStorage::locate) does not exist.
    #[error(
        "{path} does not exist: give a checkpoint or savepoint directory or its _metadata file"
    )]
    NoSuchPath {
        /// The path as given.
        path: PathBuf,
    },
    /// A path given to [`locate`](CheckpointStorage::locate) is a file
    /// other than `_metadata`.
    #[error(
        "{path} is not a checkpoint: give a checkpoint or savepoint directory or its _metadata file"
    )]
    NotACheckpoint {
        /// The path as given.
        path: PathBuf,
    },
}

/// What [`CheckpointStorage::list`] found in one checkpoint directory.
#[derive(Debug)]
pub enum ListingStatus {
    /// The metadata is present and verifies: the checkpoint can be restored
    /// (its state files are only verified by [`verify`](crate::checkpoint::recovery::verify)).
    Complete(Box<CheckpointMetadata>),
    /// No metadata: the checkpoint was never completed (crash or abort
    /// during it), or its removal was interrupted. Never restored; removed
    /// by [`cleanup`](CheckpointStorage::cleanup).
    Incomplete,
    /// The metadata is present but does not verify, or cannot be read.
    /// Never restored; kept on disk for inspection.
    Corrupt(StorageError),
}

/// One checkpoint or savepoint directory found by [`CheckpointStorage::list`].
#[derive(Debug)]
pub struct CheckpointListing {
    /// Checkpoint or savepoint, from the directory name.
    pub kind: CheckpointKind,
    /// The id, from the directory name.
    pub id: CheckpointId,
    /// The directory.
    pub location: CheckpointLocation,
    /// Whether it is complete.
    pub status: ListingStatus,
}

impl CheckpointListing {
    /// The directory name, e.g. `chk-0000000007`, for messages.
    pub fn name(&self) -> String {
        CheckpointLayout::dir_name(self.kind, self.id)
    }

    /// The metadata, if the checkpoint is complete.
    pub fn metadata(&self) -> Option<&CheckpointMetadata> {
        match &self.status {
            ListingStatus::Complete(meta) => Some(meta),
            _ => None,
        }
    }
}

/// What [`CheckpointStorage::cleanup`] removed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Cleanup {
    /// Incomplete checkpoint and savepoint directories, removed whole.
    pub removed_dirs: Vec<CheckpointLocation>,
    /// Stray `*.tmp` files inside complete or corrupt checkpoints.
    pub removed_temp_files: Vec<PathBuf>,
}

/// Where checkpoints are stored. Object-safe, so the runtime holds an
/// `Arc<dyn CheckpointStorage>` and tests substitute a double.
///
/// Every method is synchronous and may block on I/O: call it from a blocking
/// thread (`spawn_blocking`), never from the tokio reactor.
pub trait CheckpointStorage: Send + Sync + fmt::Debug {
    /// The layout this storage writes to.
    fn layout(&self) -> &CheckpointLayout;

    /// Writes `task`'s snapshot for checkpoint `id` of `kind` durably and
    /// returns the handle its acknowledgement carries. Replaces a state file
    /// left by an earlier attempt of the same checkpoint; refuses
    /// ([`StorageError::AlreadyCompleted`]) if the checkpoint is complete.
    fn write_state(
        &self,
        kind: CheckpointKind,
        id: CheckpointId,
        task: &TaskId,
        state: &[u8],
    ) -> Result<StateHandle, StorageError>;

    /// Reads a task's state back and verifies it: the frame (magic,
    /// version, length, checksum) and that it is the file `handle`
    /// describes (length and checksum).
    fn read_state(
        &self,
        location: &CheckpointLocation,
        handle: &StateHandle,
    ) -> Result<Vec<u8>, StorageError>;

    /// Publishes a checkpoint: validates `meta`, then writes its metadata
    /// durably and atomically, last, under `_metadata`. Refuses
    /// ([`StorageError::AlreadyCompleted`]) if the checkpoint already has
    /// metadata, even if another writer raced to create it.
    fn write_metadata(&self, meta: &CheckpointMetadata)
    -> Result<CheckpointLocation, StorageError>;

    /// Reads and verifies the metadata at `location` (frame, schema,
    /// consistency, and that kind and id match a `chk-`/`sp-` directory
    /// name). [`StorageError::MissingMetadata`] if there is none.
    fn read_metadata(
        &self,
        location: &CheckpointLocation,
    ) -> Result<CheckpointMetadata, StorageError>;

    /// Removes checkpoint `id` of `kind` (aborted, or pruned): its metadata
    /// first, so an interrupted removal leaves an incomplete checkpoint, never
    /// a complete one with files missing. Tolerates partial and missing
    /// directories.
    fn discard(&self, kind: CheckpointKind, id: CheckpointId) -> Result<(), StorageError>;

    /// Every `chk-`/`sp-` directory of the job with its status, ordered by
    /// id. Other entries of the directories are ignored. A job directory
    /// that does not exist yet lists as empty.
    fn list(&self) -> Result<Vec<CheckpointListing>, StorageError>;

    /// The location of a user-given path (`--restore PATH`): a checkpoint or
    /// savepoint directory, or its `_metadata` file. The directory may be
    /// anywhere, not only in this job's layout.
    fn locate(&self, path: &Path) -> Result<CheckpointLocation, StorageError>;

    /// Startup cleanup: removes incomplete checkpoint and savepoint
    /// directories whole, and stray `*.tmp` files from the others. Never
    /// touches a complete checkpoint's published files, nor a corrupt
    /// checkpoint's (kept for inspection). Run it only while no checkpoint
    /// is being written, and after choosing what to restore if the skipped
    /// checkpoints should be reported.
    fn cleanup(&self) -> Result<Cleanup, StorageError>;

    /// The job's checkpoint history ([`crate::checkpoint::history`]); the
    /// empty history if the job never wrote one.
    fn read_history(&self) -> Result<CheckpointHistory, StorageError>;

    /// Replaces the job's checkpoint history durably (tmp, fsync, rename,
    /// fsync of the directory), creating the job directory if needed.
    fn write_history(&self, history: &CheckpointHistory) -> Result<(), StorageError>;
}

// ---------------------------------------------------------------------------
// The bottom layer: a minimal file system, real or in memory.

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Entry {
    File,
    Dir,
}

/// The few file-system operations the checkpoint rules need. Errors use the
/// `io::ErrorKind` of the failure (`NotFound`, `AlreadyExists`) so callers
/// can tell those apart.
trait Files: Send + Sync + fmt::Debug {
    /// The whole content of a file.
    fn read(&self, path: &Path) -> Result<Vec<u8>, IoError>;
    /// Writes a file durably (tmp, fsync, rename or link, fsync dir).
    fn write(&self, path: &Path, bytes: &[u8], overwrite: Overwrite) -> Result<(), IoError>;
    /// Writes a file with no care for durability (crash simulation only).
    #[cfg(any(test, feature = "test-hooks"))]
    fn write_raw(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError>;
    /// Creates a directory and its parents, durably.
    fn create_dir(&self, dir: &Path) -> Result<(), IoError>;
    /// What `path` is, if anything.
    fn entry(&self, path: &Path) -> Option<Entry>;
    /// The entries of a directory with UTF-8 names, sorted; empty if the
    /// directory does not exist.
    fn list_dir(&self, dir: &Path) -> Result<Vec<(String, Entry)>, IoError>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> Result<(), IoError>;
    /// Removes a directory and everything in it.
    fn remove_dir_all(&self, dir: &Path) -> Result<(), IoError>;
    /// Makes the entries of a directory durable.
    fn sync_dir(&self, dir: &Path) -> Result<(), IoError>;
}

/// The local file system.
#[derive(Debug, Clone, Copy, Default)]
struct DiskFiles;

impl Files for DiskFiles {
    fn read(&self, path: &Path) -> Result<Vec<u8>, IoError> {
        parallel::read_file(path).map_err(|e| IoError::new("read", path, e))
    }

    fn write(&self, path: &Path, bytes: &[u8], overwrite: Overwrite) -> Result<(), IoError> {
        format::write_durable(path, bytes, overwrite)
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn write_raw(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
        std::fs::write(path, bytes).map_err(|e| IoError::new("write", path, e))
    }

    fn create_dir(&self, dir: &Path) -> Result<(), IoError> {
        format::create_dir_durable(dir)
    }

    fn entry(&self, path: &Path) -> Option<Entry> {
        let meta = std::fs::metadata(path).ok()?;
        Some(if meta.is_dir() {
            Entry::Dir
        } else {
            Entry::File
        })
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<(String, Entry)>, IoError> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(IoError::new("list directory", dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| IoError::new("list directory", dir, e))?;
            // Names that are not UTF-8 are not ours.
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if let Some(kind) = self.entry(&entry.path()) {
                out.push((name, kind));
            }
        }
        out.sort();
        Ok(out)
    }

    fn remove_file(&self, path: &Path) -> Result<(), IoError> {
        std::fs::remove_file(path).map_err(|e| IoError::new("remove", path, e))
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        std::fs::remove_dir_all(dir).map_err(|e| IoError::new("remove directory", dir, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        format::sync_dir(dir)
    }
}

// ---------------------------------------------------------------------------
// The checkpoint rules, once, over any `Files`.

/// The one implementation of [`CheckpointStorage`], over a file system.
#[derive(Debug, Clone)]
struct FileStore<F> {
    layout: CheckpointLayout,
    files: F,
}

/// Ignores a "not found": removing what is already gone succeeds.
fn tolerate_missing(result: Result<(), IoError>) -> Result<bool, IoError> {
    match result {
        Ok(()) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

impl<F: Files> FileStore<F> {
    fn is_complete(&self, location: &CheckpointLocation) -> bool {
        self.files
            .entry(&CheckpointLayout::metadata_file(location))
            .is_some()
    }

    fn write_state(
        &self,
        kind: CheckpointKind,
        id: CheckpointId,
        task: &TaskId,
        state: &[u8],
    ) -> Result<StateHandle, StorageError> {
        let file = CheckpointLayout::state_file_name(task)?;
        let path = self.layout.state_file(kind, id, task)?;
        let location = self.layout.location(kind, id);
        if self.is_complete(&location) {
            return Err(StorageError::AlreadyCompleted {
                kind,
                dir: location.dir().to_owned(),
            });
        }
        self.files.create_dir(location.dir())?;
        let bytes = format::encode(FileKind::State, state);
        let crc32 = format::stored_crc32(&bytes).expect("an encoded file has a trailer");
        self.files.write(&path, &bytes, Overwrite::Replace)?;
        Ok(StateHandle {
            file,
            length: bytes.len() as u64,
            crc32,
        })
    }

    fn read_state(
        &self,
        location: &CheckpointLocation,
        handle: &StateHandle,
    ) -> Result<Vec<u8>, StorageError> {
        let path = CheckpointLayout::file_in(location, &handle.file)?;
        let mut bytes = self.files.read(&path)?;
        let found_length = bytes.len() as u64;
        if found_length < handle.length {
            // Say how long the file should be by its handle: its header may
            // be gone with the rest.
            return Err(FormatError {
                kind: FileKind::State,
                path,
                problem: FormatProblem::Truncated {
                    expected: handle.length,
                    found: found_length,
                },
            }
            .into());
        }
        let found_crc32 = format::decode(FileKind::State, &path, &bytes)?.crc32;
        if found_length != handle.length || found_crc32 != handle.crc32 {
            return Err(StorageError::HandleMismatch {
                path,
                expected_length: handle.length,
                expected_crc32: handle.crc32,
                found_length,
                found_crc32,
            });
        }
        // The payload, without copying it out of the file's buffer.
        bytes.truncate(bytes.len() - TRAILER_LEN);
        bytes.drain(..HEADER_LEN);
        Ok(bytes)
    }

    fn write_metadata(
        &self,
        meta: &CheckpointMetadata,
    ) -> Result<CheckpointLocation, StorageError> {
        let location = self.layout.location(meta.kind, meta.checkpoint_id);
        let path = CheckpointLayout::metadata_file(&location);
        meta.validate().map_err(|problem| MetadataError::Invalid {
            path: path.clone(),
            problem,
        })?;
        let already = || StorageError::AlreadyCompleted {
            kind: meta.kind,
            dir: location.dir().to_owned(),
        };
        if self.files.entry(&path).is_some() {
            return Err(already());
        }
        self.files.create_dir(location.dir())?;
        match self.files.write(&path, &meta.encode(), Overwrite::Refuse) {
            Ok(()) => Ok(location),
            Err(e) if e.is_already_exists() => Err(already()),
            Err(e) => Err(e.into()),
        }
    }

    fn read_metadata(
        &self,
        location: &CheckpointLocation,
    ) -> Result<CheckpointMetadata, StorageError> {
        let path = CheckpointLayout::metadata_file(location);
        let bytes = match self.files.read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.is_not_found() => return Err(StorageError::MissingMetadata { path }),
            Err(e) => return Err(e.into()),
        };
        let meta = CheckpointMetadata::decode(&path, &bytes)?;
        if let Some((kind, id)) = location.parsed_name()
            && (kind, id) != (meta.kind, meta.checkpoint_id)
        {
            let problem = format!(
                "records {} {} but the directory is {}",
                meta.kind,
                meta.checkpoint_id,
                location.name()
            );
            return Err(MetadataError::Invalid { path, problem }.into());
        }
        Ok(meta)
    }

    fn discard(&self, kind: CheckpointKind, id: CheckpointId) -> Result<(), StorageError> {
        let location = self.layout.location(kind, id);
        let dir = location.dir();
        if tolerate_missing(
            self.files
                .remove_file(&CheckpointLayout::metadata_file(&location)),
        )? {
            // Un-published before anything else goes.
            self.files.sync_dir(dir)?;
        }
        if tolerate_missing(self.files.remove_dir_all(dir))? {
            self.files.sync_dir(&self.layout.root(kind))?;
        }
        Ok(())
    }

    fn list(&self) -> Result<Vec<CheckpointListing>, StorageError> {
        // Keyed by (id, kind as 0 = checkpoint, 1 = savepoint): ordered by id,
        // and one entry even if both roots are the same directory.
        let mut found = BTreeMap::new();
        for root_kind in [CheckpointKind::Checkpoint, CheckpointKind::Savepoint] {
            let root = self.layout.root(root_kind);
            for (name, entry) in self.files.list_dir(&root)? {
                let Some((kind, id)) = CheckpointLayout::parse_dir_name(&name) else {
                    continue;
                };
                // A chk- directory in the savepoint root (or the reverse) is
                // not where this layout puts it: not ours.
                if entry == Entry::Dir && self.layout.root(kind) == root {
                    let rank = u8::from(kind == CheckpointKind::Savepoint);
                    found.insert((id, rank), (kind, self.layout.location(kind, id)));
                }
            }
        }
        let listings = found
            .into_iter()
            .map(|((id, _), (kind, location))| {
                let status = match self.read_metadata(&location) {
                    Ok(meta) => ListingStatus::Complete(Box::new(meta)),
                    Err(StorageError::MissingMetadata { .. }) => ListingStatus::Incomplete,
                    Err(e) => ListingStatus::Corrupt(e),
                };
                CheckpointListing {
                    kind,
                    id,
                    location,
                    status,
                }
            })
            .collect();
        Ok(listings)
    }

    fn locate(&self, path: &Path) -> Result<CheckpointLocation, StorageError> {
        match self.files.entry(path) {
            Some(Entry::Dir) => Ok(CheckpointLocation::new(path)),
            Some(Entry::File) if path.file_name().is_some_and(|n| n == METADATA_FILE) => {
                let dir = path.parent().filter(|p| !p.as_os_str().is_empty());
                Ok(CheckpointLocation::new(dir.unwrap_or(Path::new("."))))
            }
            Some(Entry::File) => Err(StorageError::NotACheckpoint {
                path: path.to_owned(),
            }),
            None => Err(StorageError::NoSuchPath {
                path: path.to_owned(),
            }),
        }
    }

    fn cleanup(&self) -> Result<Cleanup, StorageError> {
        let mut report = Cleanup::default();
        for listing in self.list()? {
            if let ListingStatus::Incomplete = listing.status {
                self.discard(listing.kind, listing.id)?;
                report.removed_dirs.push(listing.location);
                continue;
            }
            let dir = listing.location.dir();
            let mut removed_any = false;
            for (name, entry) in self.files.list_dir(dir)? {
                if entry == Entry::File && CheckpointLayout::is_temp_file_name(&name) {
                    let path = dir.join(&name);
                    if tolerate_missing(self.files.remove_file(&path))? {
                        report.removed_temp_files.push(path);
                        removed_any = true;
                    }
                }
            }
            if removed_any {
                self.files.sync_dir(dir)?;
            }
        }
        Ok(report)
    }

    fn read_history(&self) -> Result<CheckpointHistory, StorageError> {
        let path = self.layout.history_file();
        match self.files.read(&path) {
            Ok(bytes) => Ok(CheckpointHistory::decode(&path, &bytes)?),
            Err(e) if e.is_not_found() => Ok(CheckpointHistory::default()),
            Err(e) => Err(e.into()),
        }
    }

    fn write_history(&self, history: &CheckpointHistory) -> Result<(), StorageError> {
        self.files.create_dir(self.layout.job_dir())?;
        let path = self.layout.history_file();
        Ok(self
            .files
            .write(&path, &history.encode(), Overwrite::Replace)?)
    }
}

/// Implements [`CheckpointStorage`] for a wrapper of a `FileStore` in field 0.
macro_rules! delegate_to_file_store {
    ($ty:ty) => {
        impl CheckpointStorage for $ty {
            fn layout(&self) -> &CheckpointLayout {
                &self.0.layout
            }
            fn write_state(
                &self,
                kind: CheckpointKind,
                id: CheckpointId,
                task: &TaskId,
                state: &[u8],
            ) -> Result<StateHandle, StorageError> {
                self.0.write_state(kind, id, task, state)
            }
            fn read_state(
                &self,
                location: &CheckpointLocation,
                handle: &StateHandle,
            ) -> Result<Vec<u8>, StorageError> {
                self.0.read_state(location, handle)
            }
            fn write_metadata(
                &self,
                meta: &CheckpointMetadata,
            ) -> Result<CheckpointLocation, StorageError> {
                self.0.write_metadata(meta)
            }
            fn read_metadata(
                &self,
                location: &CheckpointLocation,
            ) -> Result<CheckpointMetadata, StorageError> {
                self.0.read_metadata(location)
            }
            fn discard(&self, kind: CheckpointKind, id: CheckpointId) -> Result<(), StorageError> {
                self.0.discard(kind, id)
            }
            fn list(&self) -> Result<Vec<CheckpointListing>, StorageError> {
                self.0.list()
            }
            fn locate(&self, path: &Path) -> Result<CheckpointLocation, StorageError> {
                self.0.locate(path)
            }
            fn cleanup(&self) -> Result<Cleanup, StorageError> {
                self.0.cleanup()
            }
            fn read_history(&self) -> Result<CheckpointHistory, StorageError> {
                self.0.read_history()
            }
            fn write_history(&self, history: &CheckpointHistory) -> Result<(), StorageError> {
                self.0.write_history(history)
            }
        }
    };
}

// ---------------------------------------------------------------------------
// The public implementations.

/// Checkpoints as files on a local file system (the real storage).
#[derive(Debug)]
pub struct LocalStorage(FileStore<DiskFiles>);

impl LocalStorage {
    /// Storage under `layout`. Creates nothing until the first write.
    pub fn new(layout: CheckpointLayout) -> Self {
        LocalStorage(FileStore {
            layout,
            files: DiskFiles,
        })
    }
}

delegate_to_file_store!(LocalStorage);

#[cfg(any(test, feature = "test-hooks"))]
mod doubles;
#[cfg(any(test, feature = "test-hooks"))]
pub use doubles::{Fault, FaultyStorage, MemoryStorage};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::metadata::tests::sample;
    use std::fs;
    use std::sync::Arc;

    const CHK: CheckpointKind = CheckpointKind::Checkpoint;
    const SP: CheckpointKind = CheckpointKind::Savepoint;

    /// Writes every task of `sample(kind, id)` with state `"<vertex>-<subtask>@<id>"`
    /// and publishes the metadata.
    fn complete(
        storage: &dyn CheckpointStorage,
        kind: CheckpointKind,
        id: u64,
    ) -> CheckpointMetadata {
        let mut meta = sample(kind, id);
        for entry in &mut meta.tasks {
            let state = format!("{}-{}@{id}", entry.task.vertex, entry.task.subtask);
            entry.handle = storage
                .write_state(kind, CheckpointId(id), &entry.task, state.as_bytes())
                .unwrap();
            entry.state_bytes = state.len() as u64;
        }
        storage.write_metadata(&meta).unwrap();
        meta
    }

    fn local() -> (tempfile::TempDir, LocalStorage) {
        let dir = tempfile::tempdir().unwrap();
        let storage = LocalStorage::new(CheckpointLayout::new(dir.path().join("job")));
        (dir, storage)
    }

    fn statuses(storage: &dyn CheckpointStorage) -> Vec<(String, &'static str)> {
        storage
            .list()
            .unwrap()
            .iter()
            .map(|l| {
                let status = match l.status {
                    ListingStatus::Complete(_) => "complete",
                    ListingStatus::Incomplete => "incomplete",
                    ListingStatus::Corrupt(_) => "corrupt",
                };
                (l.name(), status)
            })
            .collect()
    }

    fn round_trip(storage: &dyn CheckpointStorage) {
        let meta = complete(storage, CHK, 3);
        let location = storage.layout().location(CHK, CheckpointId(3));
        assert_eq!(storage.read_metadata(&location).unwrap(), meta);
        for entry in &meta.tasks {
            let state = storage.read_state(&location, &entry.handle).unwrap();
            assert_eq!(
                state,
                format!("{}-{}@3", entry.task.vertex, entry.task.subtask).as_bytes()
            );
        }
        let listings = storage.list().unwrap();
        assert_eq!(listings.len(), 1);
        assert_eq!(listings[0].metadata(), Some(&meta));
    }

    #[test]
    fn local_storage_round_trips_state_and_metadata() {
        let (_dir, storage) = local();
        round_trip(&storage);
        let chk = storage.layout().checkpoint_dir(CHK, CheckpointId(3));
        let mut names: Vec<_> = fs::read_dir(&chk)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "_metadata",
                "count-0.state",
                "count-1.state",
                "source-0.state"
            ]
        );
    }

    #[test]
    fn memory_storage_round_trips_state_and_metadata() {
        round_trip(&MemoryStorage::default());
    }

    #[test]
    fn empty_state_round_trips() {
        let storage = MemoryStorage::default();
        let task = TaskId::new("map", 0);
        let handle = storage
            .write_state(CHK, CheckpointId(1), &task, b"")
            .unwrap();
        assert_eq!(handle.length, format::FRAME_OVERHEAD as u64);
        let location = storage.layout().location(CHK, CheckpointId(1));
        assert_eq!(storage.read_state(&location, &handle).unwrap(), b"");
    }

    #[test]
    fn a_completed_checkpoint_is_never_overwritten() {
        let (_dir, storage) = local();
        let meta = complete(&storage, CHK, 4);
        let path =
            CheckpointLayout::metadata_file(&storage.layout().location(CHK, CheckpointId(4)));
        let before = fs::read(&path).unwrap();

        let mut other = meta.clone();
        other.job_name = "intruder".into();
        let err = storage.write_metadata(&other).unwrap_err();
        assert!(
            matches!(err, StorageError::AlreadyCompleted { .. }),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("is already complete: refusing to overwrite it"),
            "{err}"
        );

        let err = storage
            .write_state(CHK, CheckpointId(4), &TaskId::new("count", 0), b"new")
            .unwrap_err();
        assert!(
            matches!(err, StorageError::AlreadyCompleted { .. }),
            "{err}"
        );

        assert_eq!(fs::read(&path).unwrap(), before);
        assert!(!CheckpointLayout::temp_file(&path).exists());
        let location = storage.layout().location(CHK, CheckpointId(4));
        let entry = meta.task(&TaskId::new("count", 0)).unwrap();
        assert_eq!(
            storage.read_state(&location, &entry.handle).unwrap(),
            b"count-0@4"
        );
    }

    #[test]
    fn metadata_that_does_not_validate_is_not_published() {
        let storage = MemoryStorage::default();
        let mut meta = sample(CHK, 2);
        meta.tasks.pop();
        let err = storage.write_metadata(&meta).unwrap_err();
        assert!(
            matches!(err, StorageError::Metadata(MetadataError::Invalid { .. })),
            "{err}"
        );
        assert!(storage.paths().is_empty());
    }

    #[test]
    fn a_truncated_state_file_is_named_with_both_lengths() {
        let (_dir, storage) = local();
        let meta = complete(&storage, CHK, 5);
        let location = storage.layout().location(CHK, CheckpointId(5));
        let entry = meta.task(&TaskId::new("count", 1)).unwrap();
        let path = location.dir().join("count-1.state");
        let bytes = fs::read(&path).unwrap();
        fs::write(&path, &bytes[..10]).unwrap();
        let err = storage.read_state(&location, &entry.handle).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "state file {}: truncated: expected {} bytes, found 10",
                path.display(),
                entry.handle.length
            )
        );
    }

    #[test]
    fn a_valid_state_file_that_is_not_the_recorded_one_is_refused() {
        let storage = MemoryStorage::default();
        let task = TaskId::new("count", 0);
        let handle = storage
            .write_state(CHK, CheckpointId(1), &task, b"first")
            .unwrap();
        storage
            .write_state(CHK, CheckpointId(1), &task, b"other")
            .unwrap();
        let location = storage.layout().location(CHK, CheckpointId(1));
        let err = storage.read_state(&location, &handle).unwrap_err();
        assert!(matches!(err, StorageError::HandleMismatch { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("count-0.state does not match its state handle"),
            "{err}"
        );
    }

    #[test]
    fn a_flipped_byte_in_metadata_is_a_checksum_error_naming_the_file() {
        let (_dir, storage) = local();
        complete(&storage, CHK, 6);
        let location = storage.layout().location(CHK, CheckpointId(6));
        let path = CheckpointLayout::metadata_file(&location);
        let mut bytes = fs::read(&path).unwrap();
        bytes[40] ^= 0x20;
        fs::write(&path, bytes).unwrap();
        let err = storage.read_metadata(&location).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!(
                "metadata file {}: checksum mismatch",
                path.display()
            )),
            "{msg}"
        );
        assert_eq!(
            statuses(&storage),
            [("chk-0000000006".to_string(), "corrupt")]
        );
    }

    #[test]
    fn missing_metadata_is_incomplete() {
        let (_dir, storage) = local();
        storage
            .write_state(CHK, CheckpointId(2), &TaskId::new("count", 0), b"x")
            .unwrap();
        let err = storage
            .read_metadata(&storage.layout().location(CHK, CheckpointId(2)))
            .unwrap_err();
        assert!(matches!(err, StorageError::MissingMetadata { .. }), "{err}");
        assert!(
            err.to_string()
                .ends_with("_metadata is missing: the checkpoint is incomplete"),
            "{err}"
        );
        assert_eq!(
            statuses(&storage),
            [("chk-0000000002".to_string(), "incomplete")]
        );
    }

    #[test]
    fn metadata_in_the_wrong_directory_is_corrupt() {
        let storage = MemoryStorage::default();
        let meta = complete(&storage, CHK, 2);
        let from =
            CheckpointLayout::metadata_file(&storage.layout().location(CHK, CheckpointId(2)));
        let to = CheckpointLayout::metadata_file(&storage.layout().location(CHK, CheckpointId(9)));
        storage.put_raw_file(&to, meta.encode());
        storage.remove_raw_file(&from);
        let err = storage
            .read_metadata(&storage.layout().location(CHK, CheckpointId(9)))
            .unwrap_err();
        assert!(
            err.to_string()
                .ends_with("records checkpoint 2 but the directory is chk-0000000009"),
            "{err}"
        );
    }

    #[test]
    fn lists_checkpoints_and_savepoints_by_id_ignoring_other_entries() {
        let (dir, storage) = local();
        complete(&storage, CHK, 1);
        complete(&storage, SP, 2);
        complete(&storage, CHK, 3);
        storage
            .write_state(CHK, CheckpointId(4), &TaskId::new("count", 0), b"x")
            .unwrap();
        let job = dir.path().join("job");
        fs::create_dir(job.join("chk-7")).unwrap();
        fs::write(job.join("chk-0000000008"), b"a file, not a dir").unwrap();
        fs::create_dir(job.join("notes")).unwrap();
        fs::create_dir_all(job.join("savepoints").join("chk-0000000009")).unwrap();
        assert_eq!(
            statuses(&storage),
            [
                ("chk-0000000001".to_string(), "complete"),
                ("sp-0000000002".to_string(), "complete"),
                ("chk-0000000003".to_string(), "complete"),
                ("chk-0000000004".to_string(), "incomplete"),
            ]
        );
    }

    #[test]
    fn a_missing_job_dir_lists_as_empty() {
        let (_dir, storage) = local();
        assert!(storage.list().unwrap().is_empty());
        assert_eq!(storage.cleanup().unwrap(), Cleanup::default());
    }

    #[test]
    fn savepoints_go_to_a_user_given_dir() {
        let dir = tempfile::tempdir().unwrap();
        let layout = CheckpointLayout::new(dir.path().join("job"))
            .with_savepoint_dir(dir.path().join("sps"));
        let storage = LocalStorage::new(layout);
        complete(&storage, SP, 5);
        assert!(
            dir.path()
                .join("sps")
                .join("sp-0000000005")
                .join("_metadata")
                .is_file()
        );
        assert_eq!(
            statuses(&storage),
            [("sp-0000000005".to_string(), "complete")]
        );
    }

    #[test]
    fn discard_removes_metadata_first_and_tolerates_partial_dirs() {
        let (_dir, storage) = local();
        complete(&storage, CHK, 1);
        storage
            .write_state(CHK, CheckpointId(2), &TaskId::new("count", 0), b"x")
            .unwrap();
        storage.discard(CHK, CheckpointId(1)).unwrap();
        storage.discard(CHK, CheckpointId(2)).unwrap();
        storage.discard(CHK, CheckpointId(3)).unwrap();
        assert!(storage.list().unwrap().is_empty());
        assert!(
            !storage
                .layout()
                .checkpoint_dir(CHK, CheckpointId(1))
                .exists()
        );
    }

    #[test]
    fn cleanup_removes_stray_temp_files_and_incomplete_dirs_only() {
        let (_dir, storage) = local();
        let meta = complete(&storage, CHK, 1);
        complete(&storage, SP, 2);
        storage
            .write_state(CHK, CheckpointId(3), &TaskId::new("count", 0), b"x")
            .unwrap();
        let chk1 = storage.layout().location(CHK, CheckpointId(1));
        let chk3 = storage.layout().location(CHK, CheckpointId(3));
        let stray = chk1.dir().join("count-0.state.tmp");
        fs::write(&stray, b"half").unwrap();
        fs::write(chk1.dir().join("_metadata.tmp"), b"half").unwrap();
        fs::write(chk3.dir().join("_metadata.tmp"), b"half").unwrap();
        let sp4 = storage.layout().checkpoint_dir(SP, CheckpointId(4));
        fs::create_dir_all(&sp4).unwrap();

        let report = storage.cleanup().unwrap();
        assert_eq!(report.removed_dirs, [chk3, CheckpointLocation::new(&sp4)]);
        assert_eq!(
            report.removed_temp_files,
            [chk1.dir().join("_metadata.tmp"), stray]
        );
        assert_eq!(
            statuses(&storage),
            [
                ("chk-0000000001".to_string(), "complete"),
                ("sp-0000000002".to_string(), "complete")
            ]
        );
        for entry in &meta.tasks {
            storage.read_state(&chk1, &entry.handle).unwrap();
        }
        assert_eq!(storage.cleanup().unwrap(), Cleanup::default());
    }

    #[test]
    fn cleanup_keeps_corrupt_checkpoints_for_inspection() {
        let (_dir, storage) = local();
        complete(&storage, CHK, 1);
        let location = storage.layout().location(CHK, CheckpointId(1));
        fs::write(CheckpointLayout::metadata_file(&location), b"garbage").unwrap();
        let report = storage.cleanup().unwrap();
        assert!(report.removed_dirs.is_empty());
        assert_eq!(
            statuses(&storage),
            [("chk-0000000001".to_string(), "corrupt")]
        );
    }

    #[test]
    fn locates_a_dir_or_its_metadata_file() {
        let (dir, storage) = local();
        complete(&storage, SP, 3);
        let sp = storage.layout().location(SP, CheckpointId(3));
        assert_eq!(storage.locate(sp.dir()).unwrap(), sp);
        assert_eq!(
            storage
                .locate(&CheckpointLayout::metadata_file(&sp))
                .unwrap(),
            sp
        );
        let err = storage.locate(&dir.path().join("nope")).unwrap_err();
        assert!(matches!(err, StorageError::NoSuchPath { .. }), "{err}");
        let err = storage.locate(&sp.dir().join("count-0.state")).unwrap_err();
        assert!(matches!(err, StorageError::NotACheckpoint { .. }), "{err}");

        // A savepoint copied elsewhere under another name still restores.
        let copy = dir.path().join("my-backup");
        fs::create_dir(&copy).unwrap();
        for entry in fs::read_dir(sp.dir()).unwrap() {
            let entry = entry.unwrap();
            fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
        }
        let location = storage.locate(&copy).unwrap();
        let meta = storage.read_metadata(&location).unwrap();
        assert_eq!(meta.checkpoint_id, CheckpointId(3));
        for entry in &meta.tasks {
            storage.read_state(&location, &entry.handle).unwrap();
        }
    }

    #[test]
    fn an_injected_failure_writes_nothing() {
        let memory = MemoryStorage::default();
        let storage = FaultyStorage::memory(&memory);
        storage.inject(2, Fault::Fail(io::ErrorKind::Other));
        let task = TaskId::new("count", 0);
        storage
            .write_state(CHK, CheckpointId(1), &task, b"a")
            .unwrap();
        let err = storage
            .write_state(CHK, CheckpointId(1), &TaskId::new("count", 1), b"b")
            .unwrap_err();
        assert!(
            err.to_string().contains("injected fault on write 2"),
            "{err}"
        );
        assert_eq!(storage.writes(), 2);
        assert_eq!(
            memory.paths(),
            [PathBuf::from("/memory/job/chk-0000000001/count-0.state")]
        );
    }

    #[test]
    fn injected_disk_errors_read_as_the_operating_system_reports_them() {
        let memory = MemoryStorage::default();
        let storage = FaultyStorage::memory(&memory);
        let task = TaskId::new("count", 0);
        let cases = [
            (
                io::ErrorKind::StorageFull,
                "cannot write /memory/job/chk-0000000001/count-0.state.tmp: \
                 No space left on device (os error 28)",
            ),
            (
                io::ErrorKind::PermissionDenied,
                "cannot create /memory/job/chk-0000000001/count-0.state.tmp: \
                 Permission denied (os error 13)",
            ),
            (
                io::ErrorKind::ReadOnlyFilesystem,
                "cannot create /memory/job/chk-0000000001/count-0.state.tmp: \
                 Read-only file system (os error 30)",
            ),
        ];
        for (write, (kind, message)) in cases.into_iter().enumerate() {
            storage.inject(write + 1, Fault::Fail(kind));
            let err = storage
                .write_state(CHK, CheckpointId(1), &task, b"abc")
                .unwrap_err();
            assert_eq!(err.to_string(), message);
            let StorageError::Io(e) = err else {
                panic!("not an I/O error: {err:?}")
            };
            assert_eq!(e.source.kind(), kind);
        }
        assert!(memory.paths().is_empty(), "{:?}", memory.paths());
    }

    #[test]
    fn broken_writes_fail_until_healed() {
        let memory = MemoryStorage::default();
        let storage = FaultyStorage::memory(&memory);
        storage.break_writes(io::ErrorKind::StorageFull);
        for id in 1..=3 {
            let err = storage
                .write_state(CHK, CheckpointId(id), &TaskId::new("count", 0), b"x")
                .unwrap_err();
            assert!(
                err.to_string()
                    .ends_with("No space left on device (os error 28)"),
                "{err}"
            );
        }
        assert!(memory.paths().is_empty());
        storage.heal();
        complete(&storage, CHK, 4);
        assert_eq!(storage.writes(), 3 + 4);
        assert_eq!(
            statuses(&memory)
                .into_iter()
                .filter(|(_, status)| *status == "complete")
                .collect::<Vec<_>>(),
            [("chk-0000000004".to_string(), "complete")]
        );
    }

    #[test]
    fn an_injected_metadata_failure_leaves_the_checkpoint_incomplete() {
        let memory = MemoryStorage::default();
        let storage = FaultyStorage::memory(&memory);
        complete(&storage, CHK, 1);
        storage.inject_metadata(2, Fault::Fail(io::ErrorKind::StorageFull));
        let mut meta = sample(CHK, 2);
        for entry in &mut meta.tasks {
            entry.handle = storage
                .write_state(CHK, CheckpointId(2), &entry.task, b"abcdef")
                .unwrap();
            entry.state_bytes = 6;
        }
        let err = storage.write_metadata(&meta).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot write /memory/job/chk-0000000002/_metadata.tmp: \
             No space left on device (os error 28)"
        );
        assert_eq!(storage.metadata_writes(), 2);
        assert_eq!(
            statuses(&memory),
            [
                ("chk-0000000001".to_string(), "complete"),
                ("chk-0000000002".to_string(), "incomplete")
            ]
        );
        // The third metadata write is not planned to fail.
        storage.write_metadata(&meta).unwrap();
        assert_eq!(statuses(&memory)[1].1, "complete");
    }

    #[test]
    fn an_injected_removal_failure_leaves_the_checkpoint_as_it_was() {
        let memory = MemoryStorage::default();
        let storage = FaultyStorage::memory(&memory);
        complete(&storage, CHK, 1);
        storage.inject_removal(1, io::ErrorKind::ReadOnlyFilesystem);
        let err = storage.discard(CHK, CheckpointId(1)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot remove /memory/job/chk-0000000001/_metadata: Read-only file system (os error 30)"
        );
        assert_eq!(
            statuses(&memory),
            [("chk-0000000001".to_string(), "complete")]
        );
        storage.discard(CHK, CheckpointId(1)).unwrap();
        assert!(memory.paths().is_empty());
    }

    #[test]
    fn a_crash_while_publishing_leaves_an_incomplete_checkpoint_that_cleanup_removes() {
        let dir = tempfile::tempdir().unwrap();
        let layout = CheckpointLayout::new(dir.path().join("job"));
        let storage = FaultyStorage::local(layout.clone());
        complete(&storage, CHK, 1);
        // Checkpoint 2: three state files, then the metadata write crashes.
        storage.inject(storage.writes() + 4, Fault::CrashBeforeRename);
        let mut meta = sample(CHK, 2);
        for entry in &mut meta.tasks {
            entry.handle = storage
                .write_state(CHK, CheckpointId(2), &entry.task, b"abcdef")
                .unwrap();
        }
        assert!(storage.write_metadata(&meta).is_err());
        let chk2 = layout.location(CHK, CheckpointId(2));
        assert!(CheckpointLayout::temp_file(&CheckpointLayout::metadata_file(&chk2)).is_file());

        // "Restart": a fresh storage over the same directory.
        let restarted = LocalStorage::new(layout);
        assert_eq!(
            statuses(&restarted),
            [
                ("chk-0000000001".to_string(), "complete"),
                ("chk-0000000002".to_string(), "incomplete")
            ]
        );
        let report = restarted.cleanup().unwrap();
        assert_eq!(report.removed_dirs, [chk2]);
        assert_eq!(
            statuses(&restarted),
            [("chk-0000000001".to_string(), "complete")]
        );
    }

    #[test]
    fn a_crash_while_writing_state_leaves_only_a_temp_file() {
        let memory = MemoryStorage::default();
        let storage = FaultyStorage::memory(&memory);
        storage.inject(1, Fault::CrashBeforeRename);
        assert!(
            storage
                .write_state(CHK, CheckpointId(1), &TaskId::new("count", 0), b"abcdef")
                .is_err()
        );
        assert_eq!(
            memory.paths(),
            [PathBuf::from(
                "/memory/job/chk-0000000001/count-0.state.tmp"
            )]
        );
        assert_eq!(
            statuses(&memory),
            [("chk-0000000001".to_string(), "incomplete")]
        );
        memory.cleanup().unwrap();
        assert!(memory.paths().is_empty());
    }

    #[test]
    fn storage_is_object_safe_and_shareable() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<LocalStorage>();
        assert_send_sync::<MemoryStorage>();
        assert_send_sync::<FaultyStorage>();
        let storage: Arc<dyn CheckpointStorage> = Arc::new(MemoryStorage::default());
        assert!(storage.list().unwrap().is_empty());
    }
}
