//! Reading a checkpoint back: every file it needs read once, verified as it is
//! read, and handed over whole.
//!
//! Why a module of its own: a restore has to trust what it reads, and for a
//! checkpoint the largest part of reading is the state files (an image is a
//! guest's whole memory). So verifying a checkpoint and loading it are one
//! pass here: [`read_checkpoint`] reads the metadata, every task's state file
//! and the states its image chain builds on (docs/CHECKPOINTS.md §10), checks
//! each against its frame and its handle, and returns a [`VerifiedCheckpoint`]
//! that holds the bytes. Nothing is read twice, and nothing a restore uses
//! was not verified. Which checkpoint to read is [`super::recovery`]'s choice
//! (pure); which of its states a job takes is the runtime's.
//!
//! A shared file (a keyed store's table file) that this machine still has in a task's local copy
//! of the checkpoint (`state::keyed::local`) is taken from there instead of read, once it is
//! checked against its handle as a read file is: the restore of a large keyed state then reads
//! the files it has locally instead of downloading and writing them again.
//!
//! Everything here reads through [`CheckpointStorage`], so it runs as well over
//! the in-memory test double.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use crate::checkpoint::format::{self, FileKind};
use crate::checkpoint::layout::{CheckpointLayout, CheckpointLocation};
use crate::checkpoint::metadata::{CheckpointMetadata, StateHandle, TaskStateMeta, format_chain};
use crate::checkpoint::recovery::{LatestSelection, choose_latest};
use crate::checkpoint::shared::SharedFile;
use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use crate::checkpoint::task_state::{RestoredState, TaskState, TaskStateError};
use crate::ids::{CheckpointId, CheckpointKind, TaskId};
use crate::state::keyed::local::{LocalCopies, RestoredFile};

/// A checkpoint or savepoint read whole: its metadata and the state files of every task it
/// holds, each verified (frame, length and checksum against its handle) as it was read.
///
/// Not to be confused with the monitor's record of what a run restored
/// (`runtime::RestoredCheckpoint`): this holds the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedCheckpoint {
    /// Its directory: state handles are relative to it.
    pub location: CheckpointLocation,
    /// Its verified metadata.
    pub metadata: CheckpointMetadata,
    /// The verified states of every task the metadata lists.
    pub states: BTreeMap<TaskId, VerifiedState>,
    /// Whether new incremental images may build on its states: true for one of the job's own
    /// checkpoints, in the directory the job's storage puts it; false for a savepoint, or a
    /// checkpoint restored from elsewhere (either may be moved or deleted, so no checkpoint of
    /// this job may need it).
    pub resumable: bool,
}

/// One task's state files in a [`VerifiedCheckpoint`], verified but not yet decoded.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VerifiedState {
    /// The contents of the task's state file (a [`TaskState`] envelope).
    pub state: Vec<u8>,
    /// The contents of the state files of the same task at the earlier checkpoints its image
    /// builds on, base first; empty for a self-contained state.
    pub chain: Vec<Vec<u8>>,
    /// The shared files the state names, verified: read, or taken from a local copy.
    pub shared: Vec<(SharedFile, RestoredFile)>,
}

/// A state file that verified, whose contents are not a task state envelope this build reads.
/// Each names the checkpoint (its directory name) and the task.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    /// The task's own state at the checkpoint.
    #[error("{checkpoint}: state of {task}: {problem}")]
    Task {
        /// The checkpoint's directory name.
        checkpoint: String,
        /// The task.
        task: TaskId,
        /// What is wrong with the envelope.
        problem: TaskStateError,
    },
    /// A state an incremental image builds on.
    #[error(
        "{checkpoint}: state of {task} at checkpoint {link}, which its image builds on: {problem}"
    )]
    Link {
        /// The checkpoint's directory name.
        checkpoint: String,
        /// The task.
        task: TaskId,
        /// The checkpoint of the link.
        link: CheckpointId,
        /// What is wrong with its envelope.
        problem: TaskStateError,
    },
}

impl VerifiedCheckpoint {
    /// The states of `tasks`, decoded for the tasks to restore; the other states are dropped.
    /// A task the checkpoint holds no state of is left out (it starts empty). The decoded
    /// states keep the buffers as read: an image is not copied.
    pub fn into_task_states<'a>(
        mut self,
        tasks: impl IntoIterator<Item = &'a TaskId>,
    ) -> Result<HashMap<TaskId, RestoredState>, EnvelopeError> {
        let checkpoint = self.location.name();
        let mut restored = HashMap::new();
        for task in tasks {
            let (Some(files), Some(entry)) = (self.states.remove(task), self.metadata.task(task))
            else {
                continue;
            };
            let state = TaskState::decode(files.state).map_err(|problem| EnvelopeError::Task {
                checkpoint: checkpoint.clone(),
                task: task.clone(),
                problem,
            })?;
            let chain = files
                .chain
                .into_iter()
                .zip(&entry.chain)
                .map(|(bytes, &link)| {
                    TaskState::decode(bytes)
                        .map(|s| s.inner)
                        .map_err(|problem| EnvelopeError::Link {
                            checkpoint: checkpoint.clone(),
                            task: task.clone(),
                            link,
                            problem,
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let state = RestoredState {
                state,
                chain,
                resumable: self.resumable,
                shared: files.shared,
            };
            restored.insert(task.clone(), state);
        }
        Ok(restored)
    }
}

/// Reads the checkpoint at `location` whole, verifying as it reads: its metadata, every state
/// file it references (frame, length and checksum against the state handle), every shared
/// file its states name, and every state file of the earlier checkpoints its image chains need
/// ([`read_chain`]). Each file is read once; the first failure is returned, naming the file.
/// The shared files are kept as read, for the keyed state that names them to be laid out from;
/// with `local`, one that a task's local copy of this checkpoint has and that matches its
/// handle is taken from there instead ([`LocalCopies::stage`]).
pub fn read_checkpoint<S>(
    storage: &S,
    location: CheckpointLocation,
    local: Option<&LocalCopies>,
) -> Result<VerifiedCheckpoint, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    let metadata = storage.read_metadata(&location)?;
    let mut links = BTreeMap::new();
    let mut states = BTreeMap::new();
    for entry in &metadata.tasks {
        let state = storage.read_state(&location, &entry.handle)?;
        let local_copy = |file: &SharedFile| {
            let local = local?;
            let own = CheckpointLayout::own_shared_name(&file.name, &entry.task)?;
            let staged = local.stage(&entry.task, metadata.checkpoint_id, own)?;
            format::is_payload_of(FileKind::State, staged.path(), file.length, file.crc32)
                .ok()?
                .then(|| RestoredFile::Local(Arc::new(staged)))
        };
        let shared = entry
            .shared
            .iter()
            .map(|file| {
                let restored = match local_copy(file) {
                    Some(local) => local,
                    None => RestoredFile::read(storage.read_shared(&location, file)?),
                };
                Ok((file.clone(), restored))
            })
            .collect::<Result<Vec<_>, StorageError>>()?;
        let chain = read_chain(storage, &location, entry, &mut links)?
            .into_iter()
            .map(|link| link.bytes)
            .collect();
        states.insert(
            entry.task.clone(),
            VerifiedState {
                state,
                chain,
                shared,
            },
        );
    }
    let resumable = metadata.kind == CheckpointKind::Checkpoint
        && location
            == storage
                .layout()
                .location(metadata.kind, metadata.checkpoint_id);
    Ok(VerifiedCheckpoint {
        location,
        metadata,
        states,
        resumable,
    })
}

/// Checks that the checkpoint at `location` can be trusted, as [`read_checkpoint`] does, and
/// keeps only its metadata: for those who judge checkpoints (the catalog, the tests) without
/// restoring one.
pub fn verify<S>(
    storage: &S,
    location: &CheckpointLocation,
) -> Result<CheckpointMetadata, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    read_checkpoint(storage, location.clone(), None).map(|checkpoint| checkpoint.metadata)
}

/// A state an incremental image builds on, read by [`read_chain`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainState {
    /// The checkpoint it is in.
    pub location: CheckpointLocation,
    /// Its file there.
    pub handle: StateHandle,
    /// Its bytes, verified.
    pub bytes: Vec<u8>,
}

/// Reads and verifies the states `entry`'s chain needs (an incremental
/// image: docs/CHECKPOINTS.md §10), base first: for each link, the metadata
/// of the checkpoint beside `location` (cached in `links`), the task's entry
/// there, whose own chain must be the part of `entry`'s before the link, and
/// its state file (frame and handle). Empty for a self-contained state. An
/// error names the delta's file, the link and what is wrong with it.
pub fn read_chain<S>(
    storage: &S,
    location: &CheckpointLocation,
    entry: &TaskStateMeta,
    links: &mut BTreeMap<CheckpointId, CheckpointMetadata>,
) -> Result<Vec<ChainState>, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    let mut chain = Vec::with_capacity(entry.chain.len());
    for (position, &link) in entry.chain.iter().enumerate() {
        let broken = |problem: String| StorageError::BrokenChain {
            path: location.dir().join(&entry.handle.file),
            link,
            problem,
        };
        let link_location = location.chain_link(link);
        let meta = match links.entry(link) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(
                storage
                    .read_metadata(&link_location)
                    .map_err(|e| broken(e.to_string()))?,
            ),
        };
        let Some(link_entry) = meta.task(&entry.task) else {
            return Err(broken(format!(
                "{} holds no state of task {}",
                link_location, entry.task
            )));
        };
        let expected = &entry.chain[..position];
        if link_entry.chain != expected {
            return Err(broken(format!(
                "the state of task {} there builds on {}, not on {}",
                entry.task,
                format_chain(&link_entry.chain),
                format_chain(expected)
            )));
        }
        let bytes = storage
            .read_state(&link_location, &link_entry.handle)
            .map_err(|e| broken(e.to_string()))?;
        chain.push(ChainState {
            location: link_location,
            handle: link_entry.handle.clone(),
            bytes,
        });
    }
    Ok(chain)
}

/// `--restore latest`: lists the storage and chooses with [`choose_latest`],
/// reading each candidate with [`read_checkpoint`] (taking what it can from `local`) until one
/// verifies.
pub fn restore_latest<S>(
    storage: &S,
    local: Option<&LocalCopies>,
) -> Result<LatestSelection<VerifiedCheckpoint>, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    restore_latest_since(storage, CheckpointId(0), local)
}

/// [`restore_latest`] among the checkpoints and savepoints whose id is at
/// least `since`: a failover chooses among those of its own run, never one an
/// earlier run left behind. A candidate that fails to verify is dropped with
/// what was read of it.
pub fn restore_latest_since<S>(
    storage: &S,
    since: CheckpointId,
    local: Option<&LocalCopies>,
) -> Result<LatestSelection<VerifiedCheckpoint>, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    let mut listings = storage.list()?;
    listings.retain(|listing| listing.id >= since);
    Ok(choose_latest(listings, |location| {
        read_checkpoint(storage, location.clone(), local)
    }))
}

/// `--restore PATH`: the checkpoint or savepoint at `path` (its directory or
/// its `_metadata` file), read whole and verified, taking what it can from `local`.
pub fn restore_from_path<S>(
    storage: &S,
    path: &Path,
    local: Option<&LocalCopies>,
) -> Result<VerifiedCheckpoint, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    let location = storage.locate(path)?;
    read_checkpoint(storage, location, local)
}

#[cfg(test)]
pub(crate) mod tests;
