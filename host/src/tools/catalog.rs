//! The checkpoint history on disk, as a person operating a job wants to see
//! it: what `weir checkpoints` lists, inspects and verifies.
//!
//! Why a module of its own: the storage ([`crate::checkpoint::storage`]) and recovery
//! ([`crate::checkpoint::recovery`]) answer the runtime's questions — is this checkpoint
//! complete, which one do I restore, and they stop at the first problem.
//! Someone looking at a job's directory asks other ones: what is in there,
//! how old, how big, per operator; why is this one not restorable; is
//! *every* file of *every* checkpoint sound, naming each bad file. This
//! module answers those with the same rules (the same listing, the same
//! readers, the same choice of the latest restorable checkpoint as
//! `--restore latest`), and returns serializable reports; the CLI only
//! renders them.
//!
//! It reads through the storage trait, so a job's checkpoints on object storage list, inspect
//! and verify as local ones do; what a restore never needs — temporary files, files no
//! metadata references, the bytes stored — comes from the trait's [`files`] listing.
//!
//! [`files`]: CheckpointStorage::files
//!
//! # What a path may be
//!
//! [`CatalogSource::resolve`] accepts a job's checkpoint directory (holding
//! `chk-N/` and `savepoints/sp-N/`), a directory of savepoints (holding
//! `sp-N/`, such as one a user named for savepoints), a job file (`.toml`:
//! its `[checkpoint] directory`), or the `s3://bucket/prefix` URL of a job's
//! checkpoints on object storage. [`inspect`](fn@inspect) takes one checkpoint or
//! savepoint: its directory (or URL) or its `_metadata` file.
//!
//! # How deep each command looks
//!
//! | | metadata | state file present, length | state file read, checksum |
//! |---|---|---|---|
//! | [`list`] | every checkpoint | every checkpoint | the latest restorable one only (as `--restore latest` does) |
//! | [`inspect`](fn@inspect) | the one | the one | the one |
//! | [`verify`](fn@verify) | every checkpoint | every checkpoint | every checkpoint |
//!
//! # Incomplete checkpoints are warnings
//!
//! A directory without `_metadata` is what a running job's in-flight
//! checkpoint looks like, and what a crash leaves (removed at the next
//! start). A restore skips it, so it endangers nothing: [`verify`](fn@verify) reports it
//! as a warning, never a failure, so that verifying a running job's
//! directory does not fail for a checkpoint being written. A corrupt
//! `_metadata`, or a bad state file of a complete checkpoint, cannot come from
//! a crash (the metadata is published last and atomically): it is damage,
//! and a failure. A complete checkpoint removed while it is being verified
//! (a running job pruned it) is a warning too.

use std::cmp::Reverse;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use thiserror::Error;

use crate::checkpoint::format::{FileKind, FormatError, FormatProblem};
use crate::checkpoint::layout::{
    CheckpointLayout, CheckpointLocation, METADATA_FILE, SAVEPOINTS_DIR,
};
use crate::checkpoint::metadata::{CheckpointMetadata, TaskStateMeta};
use crate::checkpoint::restore;
use crate::checkpoint::storage::{
    CheckpointListing, CheckpointStorage, ListingStatus, LocalStorage, ObjectStorage,
    ObjectStoreOptions, ObjectStoreUrl, ObjectStoreUrlError, StorageError,
};
use crate::control::endpoint_file::ENDPOINT_FILE;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::job::{Job, JobError};

/// Why a path cannot be listed, inspected or verified at all (as opposed to
/// a checkpoint found to be bad, which is a finding of the report).
#[derive(Debug, Error)]
pub enum CatalogError {
    /// The path does not exist.
    #[error(
        "{path} does not exist; pass the job's checkpoint directory (job file: [checkpoint] \
         directory) or the job file"
    )]
    NoSuchPath {
        /// The path as given.
        path: PathBuf,
    },
    /// A directory that holds no checkpoint or savepoint directories.
    #[error(
        "{path} is not a checkpoint directory: it holds no chk-N/ or sp-N/ directories; pass the \
         job's checkpoint directory (job file: [checkpoint] directory) or the job file"
    )]
    NotACheckpointDirectory {
        /// The directory.
        path: PathBuf,
    },
    /// A file that is neither a job file nor, where one checkpoint is
    /// expected, a `_metadata` file.
    #[error(
        "{path} is a file, not a checkpoint directory; pass the job's checkpoint directory or \
         its job file (.toml)"
    )]
    NotADirectory {
        /// The file.
        path: PathBuf,
    },
    /// One checkpoint where a directory of checkpoints was expected.
    #[error(
        "{path} is one checkpoint, not a directory of checkpoints; inspect it with `weir \
         checkpoints inspect {path}`, or pass the directory that holds it"
    )]
    OneCheckpoint {
        /// The checkpoint directory.
        path: PathBuf,
    },
    /// A directory of checkpoints where one checkpoint was expected.
    #[error(
        "{path} holds checkpoints, it is not one: pass one of its chk-N/ or sp-N/ directories \
         (list them with `weir checkpoints {path}`)"
    )]
    ManyCheckpoints {
        /// The directory.
        path: PathBuf,
    },
    /// A directory that is no checkpoint: no `_metadata`, no state file,
    /// not named `chk-N` or `sp-N`.
    #[error(
        "{path} is not a checkpoint: it has no _metadata and no state files; pass a chk-N/ or \
         sp-N/ directory or its _metadata file"
    )]
    NotACheckpoint {
        /// The directory.
        path: PathBuf,
    },
    /// The job file cannot be read or is invalid.
    #[error("cannot read the checkpoint directory from job file {path}: {source}")]
    Job {
        /// The job file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: JobError,
    },
    /// A directory cannot be read.
    #[error("cannot read {path}: {source}; check that it exists and that you may read it")]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The storage could not list the checkpoints.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A URL that names no usable object store.
    #[error(transparent)]
    Url(#[from] ObjectStoreUrlError),
}

mod inspect;
mod source;
mod verify;

pub use inspect::{Inspection, inspect};
pub use source::{CatalogSource, SourceKind};
pub use verify::{Verdict, VerifiedCheckpoint, VerifyReport, verify, verify_source};

// ---------------------------------------------------------------------------
// The pieces every report shares.

/// Where a checkpoint stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EntryStatus {
    /// Its metadata verifies and its state files are there, with the
    /// recorded lengths (and, where they were read, checksums).
    Complete,
    /// It has no `_metadata`: being written, or left by a stop or crash
    /// while it was. Never restored.
    Incomplete,
    /// Its metadata or one of its state files does not verify. Never
    /// restored; kept on disk for inspection.
    Corrupt,
    /// It was complete when listed and its metadata is gone now: a running
    /// job pruned it while it was being read. Not damage.
    Removed,
}

impl std::fmt::Display for EntryStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EntryStatus::Complete => "complete",
            EntryStatus::Incomplete => "incomplete",
            EntryStatus::Corrupt => "corrupt",
            EntryStatus::Removed => "removed",
        })
    }
}

/// The state of one operator (vertex) in a checkpoint, over its subtasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OperatorSize {
    /// The vertex name.
    pub vertex: String,
    /// How many subtasks (state files) it has.
    pub subtasks: u32,
    /// Its state, in bytes, summed over its subtasks.
    pub state_bytes: u64,
}

/// Per-operator sizes, in the order the metadata first names each vertex.
fn operator_sizes(meta: &CheckpointMetadata) -> Vec<OperatorSize> {
    let mut sizes: Vec<OperatorSize> = Vec::new();
    for entry in &meta.tasks {
        match sizes.iter_mut().find(|s| s.vertex == entry.task.vertex) {
            Some(size) => {
                size.subtasks += 1;
                size.state_bytes += entry.state_bytes;
            }
            None => sizes.push(OperatorSize {
                vertex: entry.task.vertex.clone(),
                subtasks: 1,
                state_bytes: entry.state_bytes,
            }),
        }
    }
    sizes
}

/// A problem (or warning) about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileProblem {
    /// The file (or directory) concerned.
    pub file: PathBuf,
    /// What is wrong, in a sentence that names the file.
    pub message: String,
}

/// A file found in a checkpoint directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DiskFile {
    /// Its name in the directory.
    pub name: String,
    /// Its length in bytes.
    pub bytes: u64,
}

/// The files of the checkpoint at `location` with their sizes, sorted by name.
fn files_in(
    storage: &dyn CheckpointStorage,
    location: &CheckpointLocation,
) -> Result<Vec<DiskFile>, CatalogError> {
    Ok(storage
        .files(location)?
        .into_iter()
        .map(|(name, bytes)| DiskFile { name, bytes })
        .collect())
}

/// Why a checkpoint without `_metadata` is incomplete, from what it holds.
fn incomplete_reason(files: &[DiskFile]) -> String {
    if files
        .iter()
        .any(|f| CheckpointLayout::temp_target(&f.name) == Some(METADATA_FILE))
    {
        "no _metadata, only _metadata.tmp (incomplete: being published, or the job stopped \
         while publishing it)"
            .to_string()
    } else {
        "no _metadata (incomplete: being written, or the job stopped while writing it)".to_string()
    }
}

/// How deeply to check a state file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Depth {
    /// That it exists with the length its handle records.
    Length,
    /// That it reads and verifies: frame, length and checksum against its handle.
    Full,
}

/// One task's state file, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskCheck {
    /// The vertex name.
    pub vertex: String,
    /// The subtask index.
    pub subtask: u32,
    /// The state file's name, relative to the checkpoint directory.
    pub file: String,
    /// Size of the task's state (the state file's payload), in bytes.
    pub state_bytes: u64,
    /// Size of the state file as recorded, in bytes (payload and frame).
    pub file_bytes: u64,
    /// The CRC-32 recorded for the state file, as `0x` and 8 hex digits.
    pub crc32: String,
    /// Synchronous part of the snapshot, in milliseconds.
    pub sync_duration_ms: u64,
    /// Asynchronous part of the snapshot, in milliseconds.
    pub async_duration_ms: u64,
    /// Barrier alignment before the snapshot, in milliseconds.
    pub alignment_duration_ms: u64,
    /// Whether the file verified.
    pub ok: bool,
    /// What is wrong with it, naming the file, when it did not.
    pub problem: Option<String>,
}

/// Checks the state file of `entry` in the checkpoint at `location`, which holds `files`.
fn check_task(
    storage: &dyn CheckpointStorage,
    location: &CheckpointLocation,
    files: &[DiskFile],
    entry: &TaskStateMeta,
    depth: Depth,
) -> TaskCheck {
    let problem = match CheckpointLayout::file_in(location, &entry.handle.file) {
        Err(e) => Some(e.to_string()),
        Ok(path) => match depth {
            Depth::Length => {
                let found = files.iter().find(|f| f.name == entry.handle.file);
                check_length(&path, found.map(|f| f.bytes), entry.handle.length)
            }
            Depth::Full => storage
                .read_state(location, &entry.handle)
                .err()
                .map(|e| describe_state_error(&path, e)),
        },
    };
    TaskCheck {
        vertex: entry.task.vertex.clone(),
        subtask: entry.task.subtask,
        file: entry.handle.file.clone(),
        state_bytes: entry.state_bytes,
        file_bytes: entry.handle.length,
        crc32: format!("{:#010x}", entry.handle.crc32),
        sync_duration_ms: entry.sync_duration_ms,
        async_duration_ms: entry.async_duration_ms,
        alignment_duration_ms: entry.alignment_duration_ms,
        ok: problem.is_none(),
        problem,
    }
}

/// Whether the state file at `path`, of length `found` (`None`: absent), has length
/// `expected`, in the words the format reader would use.
fn check_length(path: &Path, found: Option<u64>, expected: u64) -> Option<String> {
    let Some(found) = found else {
        return Some(missing_state_file(path));
    };
    let problem = if found < expected {
        FormatProblem::Truncated { expected, found }
    } else if found > expected {
        FormatProblem::TrailingBytes { expected, found }
    } else {
        return None;
    };
    Some(
        FormatError {
            kind: FileKind::State,
            path: path.to_owned(),
            problem,
        }
        .to_string(),
    )
}

fn missing_state_file(path: &Path) -> String {
    format!(
        "state file {} is missing: the metadata references it",
        path.display()
    )
}

/// A state file's read error as a sentence naming the file: the storage's
/// own message, except for a missing file, said plainly.
fn describe_state_error(path: &Path, error: StorageError) -> String {
    match error {
        StorageError::Io(e) if e.is_not_found() => missing_state_file(path),
        other => other.to_string(),
    }
}

/// The files of a checkpoint directory that are neither its metadata nor
/// the state files it references: temporary files (debris of a crash or of a
/// write in progress) and anything else.
fn unexpected_files<'a>(
    files: &'a [DiskFile],
    meta: &CheckpointMetadata,
) -> (Vec<&'a DiskFile>, Vec<&'a DiskFile>) {
    let mut temp = Vec::new();
    let mut other = Vec::new();
    for file in files {
        if CheckpointLayout::is_temp_file_name(&file.name) {
            temp.push(file);
        } else if file.name != METADATA_FILE
            && !meta.tasks.iter().any(|t| t.handle.file == file.name)
        {
            other.push(file);
        }
    }
    (temp, other)
}

fn temp_file_warning(dir: &Path, name: &str) -> FileProblem {
    let file = dir.join(name);
    FileProblem {
        message: format!(
            "leftover temporary file {}: debris of an interrupted write, never read; the job \
             removes it at its next start",
            file.display()
        ),
        file,
    }
}

fn other_file_warning(dir: &Path, name: &str) -> FileProblem {
    let file = dir.join(name);
    FileProblem {
        message: format!(
            "{} is not referenced by the metadata: Weir never reads it",
            file.display()
        ),
        file,
    }
}

/// The time a checkpoint records, and its identity, from its metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MetadataSummary {
    /// The job's name.
    pub job_name: String,
    /// Fingerprint of the job graph, as `0x` and 16 hex digits.
    pub job_fingerprint: String,
    /// The checkpoint's id.
    pub checkpoint_id: CheckpointId,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// When it was triggered, Unix time in milliseconds.
    pub trigger_time_ms: u64,
    /// When it completed, Unix time in milliseconds.
    pub completion_time_ms: u64,
    /// Trigger to completion, in milliseconds.
    pub duration_ms: u64,
    /// Parallelism of every vertex, by name.
    pub parallelism: std::collections::BTreeMap<String, u32>,
    /// Schema version of the metadata record.
    pub format_version: u32,
}

impl MetadataSummary {
    fn of(meta: &CheckpointMetadata) -> MetadataSummary {
        MetadataSummary {
            job_name: meta.job_name.clone(),
            job_fingerprint: format!("{:#018x}", meta.job_fingerprint),
            checkpoint_id: meta.checkpoint_id,
            kind: meta.kind,
            trigger_time_ms: meta.trigger_time_ms,
            completion_time_ms: meta.completion_time_ms,
            duration_ms: meta.duration_ms,
            parallelism: meta.parallelism.clone(),
            format_version: meta.format_version,
        }
    }
}

/// Newest first; on a tie of ids the checkpoint first — the order in which
/// [`choose_latest`](crate::checkpoint::recovery::choose_latest) considers them.
fn newest_first(kind: CheckpointKind, id: CheckpointId) -> Reverse<(CheckpointId, u8)> {
    Reverse((id, u8::from(kind == CheckpointKind::Checkpoint)))
}

// ---------------------------------------------------------------------------
// `weir checkpoints DIR`

/// One checkpoint or savepoint of a [`Catalog`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogEntry {
    /// The id (from the directory name).
    pub id: CheckpointId,
    /// Checkpoint or savepoint (from the directory name).
    pub kind: CheckpointKind,
    /// The directory name, e.g. `chk-0000000007`.
    pub name: String,
    /// Where it stands.
    pub status: EntryStatus,
    /// Why it is incomplete or corrupt, naming the file; `None` when complete.
    pub reason: Option<String>,
    /// Its directory.
    pub path: PathBuf,
    /// The job's name, from the metadata.
    pub job_name: Option<String>,
    /// When it was triggered, Unix ms, from the metadata.
    pub trigger_time_ms: Option<u64>,
    /// When it completed, Unix ms, from the metadata.
    pub completion_time_ms: Option<u64>,
    /// Trigger to completion in ms, from the metadata.
    pub duration_ms: Option<u64>,
    /// Total state of all tasks in bytes, from the metadata.
    pub state_bytes: Option<u64>,
    /// Bytes of all files in its directory, as found on disk.
    pub disk_bytes: u64,
    /// State per operator, from the metadata.
    pub operators: Vec<OperatorSize>,
    /// Temporary files in the directory (debris of an interrupted write).
    pub temp_files: Vec<String>,
    /// Whether every state file was read and its checksum verified (done
    /// for the latest restorable one; the others were checked for presence
    /// and length only).
    pub verified: bool,
    /// The earlier checkpoints its tasks' image deltas build on, from the
    /// metadata (docs/CHECKPOINTS.md §10); empty when every state is
    /// self-contained.
    pub chain_links: Vec<CheckpointId>,
    /// The newer complete checkpoints listed here whose image chains need
    /// this one, ascending: while they are kept, so is it, even beyond
    /// `retained`.
    pub needed_by: Vec<CheckpointId>,
}

impl CatalogEntry {
    fn mark_removed(&mut self) {
        self.status = EntryStatus::Removed;
        self.reason = Some(format!(
            "{} was removed while being listed (pruned by the running job)",
            self.path.display()
        ));
    }
}

/// Whether the checkpoint at `location`, read as complete a moment ago, has
/// lost its metadata since: pruning removes the metadata first, so a running
/// job discarding it explains any of its files going missing.
fn removed_meanwhile(storage: &dyn CheckpointStorage, location: &CheckpointLocation) -> bool {
    !storage.is_complete(location)
}

/// The checkpoint `--restore latest` would restore.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LatestRestorable {
    /// Its id.
    pub id: CheckpointId,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// Its directory: what to give `--restore`.
    pub path: PathBuf,
}

/// Every checkpoint and savepoint of a job, newest first: what
/// `weir checkpoints DIR` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Catalog {
    /// Where they were looked for.
    pub source: CatalogSource,
    /// Every `chk-N`/`sp-N` directory, newest first (on a tie of ids, the
    /// checkpoint first).
    pub entries: Vec<CatalogEntry>,
    /// The newest complete one whose every file verifies: what `weir run
    /// --restore latest` picks. `None` if there is none.
    pub latest_restorable: Option<LatestRestorable>,
}

/// Lists the checkpoints and savepoints at `path` (see
/// [`CatalogSource::resolve`]), newest first, each with its status, times
/// and sizes, and finds the latest restorable one.
pub fn list(path: &Path) -> Result<Catalog, CatalogError> {
    list_source(CatalogSource::resolve(path)?)
}

/// [`list`] over an already resolved source.
pub fn list_source(source: CatalogSource) -> Result<Catalog, CatalogError> {
    let storage = source.storage()?;
    let storage = storage.as_ref();
    let mut listings = storage.list()?;
    listings.sort_by_key(|l| newest_first(l.kind, l.id));
    let mut entries = Vec::with_capacity(listings.len());
    for listing in listings {
        entries.push(catalog_entry(storage, listing)?);
    }
    let needs: Vec<(CheckpointId, Vec<CheckpointId>)> = entries
        .iter()
        .filter(|e| e.kind == CheckpointKind::Checkpoint)
        .map(|e| (e.id, e.chain_links.clone()))
        .collect();
    for entry in entries
        .iter_mut()
        .filter(|e| e.kind == CheckpointKind::Checkpoint)
    {
        entry.needed_by = needs
            .iter()
            .filter(|(_, links)| links.contains(&entry.id))
            .map(|(id, _)| *id)
            .rev()
            .collect();
    }
    // The latest restorable: walk newest first, fully verify each complete
    // one until one passes — the rule of `recovery::choose_latest`.
    let mut latest_restorable = None;
    for entry in entries
        .iter_mut()
        .filter(|e| e.status == EntryStatus::Complete)
    {
        let location = CheckpointLocation::new(&entry.path);
        match restore::verify(storage, &location) {
            Ok(_) => {
                entry.verified = true;
                latest_restorable = Some(LatestRestorable {
                    id: entry.id,
                    kind: entry.kind,
                    path: entry.path.clone(),
                });
                break;
            }
            Err(_) if removed_meanwhile(storage, &location) => entry.mark_removed(),
            Err(e) => {
                entry.status = EntryStatus::Corrupt;
                entry.reason = Some(e.to_string());
            }
        }
    }
    Ok(Catalog {
        source,
        entries,
        latest_restorable,
    })
}

fn catalog_entry(
    storage: &dyn CheckpointStorage,
    listing: CheckpointListing,
) -> Result<CatalogEntry, CatalogError> {
    let files = files_in(storage, &listing.location)?;
    let mut entry = CatalogEntry {
        id: listing.id,
        kind: listing.kind,
        name: listing.name(),
        status: EntryStatus::Complete,
        reason: None,
        path: listing.location.dir().to_owned(),
        job_name: None,
        trigger_time_ms: None,
        completion_time_ms: None,
        duration_ms: None,
        state_bytes: None,
        disk_bytes: files.iter().map(|f| f.bytes).sum(),
        operators: Vec::new(),
        temp_files: files
            .iter()
            .filter(|f| CheckpointLayout::is_temp_file_name(&f.name))
            .map(|f| f.name.clone())
            .collect(),
        verified: false,
        chain_links: Vec::new(),
        needed_by: Vec::new(),
    };
    match listing.status {
        ListingStatus::Incomplete => {
            entry.status = EntryStatus::Incomplete;
            entry.reason = Some(incomplete_reason(&files));
        }
        ListingStatus::Corrupt(e) => {
            entry.status = EntryStatus::Corrupt;
            entry.reason = Some(e.to_string());
        }
        ListingStatus::Complete(meta) => {
            entry.job_name = Some(meta.job_name.clone());
            entry.trigger_time_ms = Some(meta.trigger_time_ms);
            entry.completion_time_ms = Some(meta.completion_time_ms);
            entry.duration_ms = Some(meta.duration_ms);
            entry.state_bytes = Some(meta.state_bytes());
            entry.operators = operator_sizes(&meta);
            entry.chain_links = meta.chain_links().into_iter().collect();
            let problems: Vec<String> = meta
                .tasks
                .iter()
                .filter_map(|t| {
                    check_task(storage, &listing.location, &files, t, Depth::Length).problem
                })
                .collect();
            if !problems.is_empty() && removed_meanwhile(storage, &listing.location) {
                entry.mark_removed();
            } else if let Some(first) = problems.first() {
                entry.status = EntryStatus::Corrupt;
                entry.reason = Some(match problems.len() {
                    1 => first.clone(),
                    n => format!("{first} (and {} more problems)", n - 1),
                });
            }
        }
    }
    Ok(entry)
}

#[cfg(test)]
mod tests;
