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
//!    returns the [`StateHandle`] its acknowledgement carries; a state kept in
//!    several files first writes the new ones with
//!    [`write_shared`](CheckpointStorage::write_shared) (create-if-absent, in
//!    the job's `shared/` directory) and names them, with older ones, in its
//!    acknowledgement;
//! 2. the coordinator, once every task acknowledged:
//!    [`write_metadata`](CheckpointStorage::write_metadata) — writes
//!    `_metadata` durably, never over an existing one. That rename is the
//!    commit point: before it the checkpoint is incomplete, after it complete;
//! 3. pruning: [`discard`](CheckpointStorage::discard) — removes `_metadata`
//!    first (un-publishing the checkpoint), then the rest; shared files no
//!    retained checkpoint names go after
//!    ([`remove_shared`](CheckpointStorage::remove_shared)).
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
use crate::checkpoint::generation::{CLAIM_ATTEMPTS, Generation};
use crate::checkpoint::history::{CheckpointHistory, HistoryError};
use crate::checkpoint::layout::{CheckpointLayout, CheckpointLocation, LayoutError, METADATA_FILE};
use crate::checkpoint::metadata::{CheckpointMetadata, MetadataError, StateHandle};
use crate::checkpoint::shared::SharedFile;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};

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
    /// A newer run of the job claimed a generation on this storage: this run
    /// may no longer complete checkpoints or reserve ids (checkpoint/generation.rs).
    #[error(
        "generation {newer} of this job has started on {dir} since this run claimed generation \
         {ours}: another process runs the job on the same checkpoint storage now, so this one \
         stops without completing checkpoints or committing output. If that process is gone, \
         start this job again with --restore latest"
    )]
    Superseded {
        /// The generation this run claimed.
        ours: Generation,
        /// The newer generation found.
        newer: Generation,
        /// The job's checkpoint directory.
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
    /// (its state files are only verified by [`verify`](crate::checkpoint::restore::verify)).
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

    /// Writes `bytes` durably as shared file `name` of `task`, written by
    /// checkpoint `id`, in the job's shared directory
    /// ([`CheckpointLayout::shared_file_name`]), and returns the handle the
    /// task's acknowledgement names it by. Create-if-absent: a file of that
    /// name with exactly these bytes is kept as it is (a retried write, or an
    /// object store's retried request); one with other bytes can only be left
    /// by a write of a checkpoint that never completed (ids of completed
    /// checkpoints are never written again), and is replaced.
    fn write_shared(
        &self,
        id: CheckpointId,
        task: &TaskId,
        name: &str,
        bytes: &[u8],
    ) -> Result<SharedFile, StorageError>;

    /// Reads shared file `file` of the checkpoint at `location` back and
    /// verifies it as [`read_state`](Self::read_state) does: its frame, and
    /// that it is the file the handle describes. It lives in the `shared`
    /// directory beside the checkpoint's.
    fn read_shared(
        &self,
        location: &CheckpointLocation,
        file: &SharedFile,
    ) -> Result<Vec<u8>, StorageError>;

    /// The name of every file in the job's shared directory, temporary files
    /// included; empty if there is none.
    fn list_shared(&self) -> Result<Vec<String>, StorageError>;

    /// Removes the shared files `names` (what retention no longer keeps:
    /// [`shared_files_to_remove`](crate::checkpoint::recovery::shared_files_to_remove)).
    /// A file already gone is no error; the first failure stops it.
    fn remove_shared(&self, names: &[String]) -> Result<(), StorageError>;

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

    /// The job's checkpoint history (`checkpoint/history.rs`); the
    /// empty history if the job never wrote one.
    fn read_history(&self) -> Result<CheckpointHistory, StorageError>;

    /// Whether the checkpoint at `location` has its metadata (a pruning removes it first).
    fn is_complete(&self, location: &CheckpointLocation) -> bool;

    /// Every file in the checkpoint directory at `location`, with its length, by name; empty
    /// if the directory is gone. For the reports of `weir checkpoints` (temporary files,
    /// files no metadata names, bytes stored): a restore never needs them.
    fn files(&self, location: &CheckpointLocation) -> Result<Vec<(String, u64)>, StorageError>;

    /// Replaces the job's checkpoint history durably (tmp, fsync, rename,
    /// fsync of the directory), creating the job directory if needed.
    /// [`StorageError::Superseded`] after a newer run claimed a generation.
    fn write_history(&self, history: &CheckpointHistory) -> Result<(), StorageError>;

    /// Claims the job's next generation on this storage (`checkpoint/generation.rs`):
    /// one more than the highest claimed, created only if absent. From then on this
    /// storage refuses to write metadata or history once a newer generation exists.
    /// Once per run, before the run reads the history; a second call returns the first
    /// claim.
    fn claim_generation(&self) -> Result<Generation, StorageError>;

    /// The generation this storage claimed, if it did.
    fn generation(&self) -> Option<Generation>;

    /// The id of the job's checkpoints: 16 hex digits, drawn at random and written
    /// (create-if-absent) by the first run that asks, read by every later one; a job whose
    /// checkpoint directory is removed gets a new one. What belongs to one history of the
    /// job outside its checkpoints (the topics between a worker's stages) is named by it.
    fn storage_id(&self) -> Result<String, StorageError>;

    /// The generation after the claimed one, if a newer run has claimed it (one `HEAD`);
    /// `None` before a claim, or if the store cannot be asked (the next write asks again).
    fn superseded(&self) -> Option<Generation>;
}

mod files;
use files::{DiskFiles, Entry, Files};

// ---------------------------------------------------------------------------
// The checkpoint rules, once, over any `Files`.

/// The one implementation of [`CheckpointStorage`], over a file system: [`LocalStorage`] is
/// it over local files, [`ObjectStorage`] over an object store, and the test doubles over
/// memory. The rules are written once; what differs is only the file system below.
#[derive(Debug, Clone)]
pub struct FileStore<F> {
    layout: CheckpointLayout,
    files: F,
    /// The generation this run claimed: fences metadata and history writes.
    claimed: std::sync::OnceLock<Generation>,
}

/// A number no other process draws (std's per-process random hash keys, the pid and the time).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
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
    /// Reads the state file at `path` and verifies it: its frame, and that it
    /// is the file a handle of `length` bytes and checksum `crc32` describes.
    /// Returns the payload.
    fn read_verified(
        &self,
        path: PathBuf,
        length: u64,
        crc32: u32,
    ) -> Result<Vec<u8>, StorageError> {
        let mut bytes = self.files.read(&path)?;
        let found_length = bytes.len() as u64;
        if found_length < length {
            // Say how long the file should be by its handle: its header may
            // be gone with the rest.
            return Err(FormatError {
                kind: FileKind::State,
                path,
                problem: FormatProblem::Truncated {
                    expected: length,
                    found: found_length,
                },
            }
            .into());
        }
        let found_crc32 = format::decode(FileKind::State, &path, &bytes)?.crc32;
        if found_length != length || found_crc32 != crc32 {
            return Err(StorageError::HandleMismatch {
                path,
                expected_length: length,
                expected_crc32: crc32,
                found_length,
                found_crc32,
            });
        }
        // The payload, without copying it out of the file's buffer.
        bytes.truncate(bytes.len() - TRAILER_LEN);
        bytes.drain(..HEADER_LEN);
        Ok(bytes)
    }

    /// The rules over `files`, under `layout`, with no generation claimed yet.
    fn over(layout: CheckpointLayout, files: F) -> Self {
        FileStore {
            layout,
            files,
            claimed: std::sync::OnceLock::new(),
        }
    }

    /// [`StorageError::Superseded`] if a newer run claimed a generation.
    fn fence(&self) -> Result<(), StorageError> {
        match (self.claimed.get(), self.superseded()) {
            (Some(&ours), Some(newer)) => Err(StorageError::Superseded {
                ours,
                newer,
                dir: self.layout.job_dir().to_owned(),
            }),
            _ => Ok(()),
        }
    }
}

impl<F: Files> CheckpointStorage for FileStore<F> {
    fn layout(&self) -> &CheckpointLayout {
        &self.layout
    }

    fn generation(&self) -> Option<Generation> {
        self.claimed.get().copied()
    }

    fn claim_generation(&self) -> Result<Generation, StorageError> {
        if let Some(&claimed) = self.claimed.get() {
            return Ok(claimed);
        }
        let dir = self.layout.generations_dir();
        self.files.create_dir(&dir)?;
        let mut lost = Vec::new();
        for _ in 0..CLAIM_ATTEMPTS {
            let highest = self
                .files
                .list_dir(&dir)?
                .into_iter()
                .filter(|(_, entry)| *entry == Entry::File)
                .filter_map(|(name, _)| Generation::parse_file_name(&name))
                .max()
                .unwrap_or_default();
            let next = highest.next();
            let path = self.layout.generation_file(next);
            match self.files.write(&path, b"", Overwrite::Refuse) {
                Ok(()) => return Ok(*self.claimed.get_or_init(|| next)),
                // Another run took it first: list again and take the one after.
                Err(e) if e.is_already_exists() => lost.push(next),
                Err(e) => return Err(e.into()),
            }
        }
        Err(StorageError::Io(IoError::new(
            "claim a generation in",
            &dir,
            io::Error::other(format!(
                "{CLAIM_ATTEMPTS} claims in a row lost to other runs (generations {}): are \
                 many processes starting this job at once?",
                lost.iter()
                    .map(|g| g.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        )))
    }

    fn storage_id(&self) -> Result<String, StorageError> {
        let path = self.layout.id_file();
        let read = |bytes: Vec<u8>| {
            String::from_utf8(bytes)
                .ok()
                .map(|text| text.trim().to_owned())
                .filter(|id| id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit()))
                .ok_or_else(|| {
                    StorageError::Io(IoError::new(
                        "read the job id in",
                        &path,
                        io::Error::other(
                            "it is not 16 hexadecimal digits: restore the file, or remove it \
                             together with the job's checkpoints to start the job afresh",
                        ),
                    ))
                })
        };
        match self.files.read(&path) {
            Ok(bytes) => return read(bytes),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
        let id = format!("{:016x}", random_u64());
        self.files.create_dir(self.layout.job_dir())?;
        match self.files.write(&path, id.as_bytes(), Overwrite::Refuse) {
            Ok(()) => Ok(id),
            // Another worker made it first: its id is the job's.
            Err(e) if e.is_already_exists() => read(self.files.read(&path)?),
            Err(e) => Err(e.into()),
        }
    }

    fn superseded(&self) -> Option<Generation> {
        let newer = self.claimed.get()?.next();
        self.files
            .is_file(&self.layout.generation_file(newer))
            .then_some(newer)
    }

    fn is_complete(&self, location: &CheckpointLocation) -> bool {
        self.files
            .is_file(&CheckpointLayout::metadata_file(location))
    }

    fn files(&self, location: &CheckpointLocation) -> Result<Vec<(String, u64)>, StorageError> {
        Ok(self.files.file_sizes(location.dir())?)
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
        self.read_verified(path, handle.length, handle.crc32)
    }

    fn write_shared(
        &self,
        id: CheckpointId,
        task: &TaskId,
        name: &str,
        bytes: &[u8],
    ) -> Result<SharedFile, StorageError> {
        let name = CheckpointLayout::shared_file_name(id, task, name)?;
        let dir = self.layout.shared_dir();
        let path = dir.join(&name);
        self.files.create_dir(&dir)?;
        let framed = format::encode(FileKind::State, bytes);
        let crc32 = format::stored_crc32(&framed).expect("an encoded file has a trailer");
        match self.files.write(&path, &framed, Overwrite::Refuse) {
            Ok(()) => {}
            Err(e) if e.is_already_exists() => {
                if self.files.read(&path).ok().as_ref() != Some(&framed) {
                    self.files.write(&path, &framed, Overwrite::Replace)?;
                }
            }
            Err(e) => return Err(e.into()),
        }
        Ok(SharedFile {
            name,
            length: framed.len() as u64,
            crc32,
        })
    }

    fn read_shared(
        &self,
        location: &CheckpointLocation,
        file: &SharedFile,
    ) -> Result<Vec<u8>, StorageError> {
        let path = location.shared_file(&file.name)?;
        self.read_verified(path, file.length, file.crc32)
    }

    fn list_shared(&self) -> Result<Vec<String>, StorageError> {
        Ok(self
            .files
            .list_dir(&self.layout.shared_dir())?
            .into_iter()
            .filter(|(_, entry)| *entry == Entry::File)
            .map(|(name, _)| name)
            .collect())
    }

    fn remove_shared(&self, names: &[String]) -> Result<(), StorageError> {
        let dir = self.layout.shared_dir();
        let mut removed_any = false;
        for name in names {
            // Names come from `list_shared`, temporary files among them; still, never a path.
            if Path::new(name).file_name() != Some(std::ffi::OsStr::new(name)) {
                return Err(LayoutError::UnsafeFileName {
                    dir,
                    name: name.clone(),
                }
                .into());
            }
            let path = dir.join(name);
            removed_any |= tolerate_missing(self.files.remove_file(&path))?;
        }
        if removed_any {
            self.files.sync_dir(&dir)?;
        }
        Ok(())
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
        if self.files.is_file(&path) {
            return Err(already());
        }
        self.fence()?;
        self.files.create_dir(location.dir())?;
        let bytes = meta.encode();
        match self.files.write(&path, &bytes, Overwrite::Refuse) {
            Ok(()) => Ok(location),
            // An object store retries a request whose answer was lost, and the retry finds the
            // object the first attempt created: if it holds exactly these bytes, this write
            // is what made it.
            Err(e) if e.is_already_exists() && self.files.read(&path).ok() == Some(bytes) => {
                Ok(location)
            }
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
        self.fence()?;
        self.files.create_dir(self.layout.job_dir())?;
        let path = self.layout.history_file();
        Ok(self
            .files
            .write(&path, &history.encode(), Overwrite::Replace)?)
    }
}

// ---------------------------------------------------------------------------
// The public implementations.

/// Checkpoints as files on a local file system (the real storage).
pub type LocalStorage = FileStore<DiskFiles>;

impl LocalStorage {
    /// Storage under `layout`. Creates nothing until the first write.
    pub fn new(layout: CheckpointLayout) -> Self {
        FileStore::over(layout, DiskFiles)
    }
}

mod object;
pub use object::{
    MULTIPART_THRESHOLD, ObjectStorage, ObjectStoreOptions, ObjectStoreUrl,
    Scheme as ObjectStoreScheme, StaticCredentials, UrlError as ObjectStoreUrlError,
};

#[cfg(any(test, feature = "test-hooks"))]
mod doubles;
#[cfg(any(test, feature = "test-hooks"))]
pub use doubles::{Fault, FaultyStorage, MemoryStorage};

#[cfg(test)]
pub(crate) mod tests;
