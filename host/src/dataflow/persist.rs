//! The asynchronous part of a task's snapshot, and the events tasks send to
//! the job's driver.
//!
//! A task hands its state bytes to the [`Persister`] and goes on processing;
//! a blocking-pool thread writes the state file (fsync included) and only then
//! sends the acknowledgement. A write that fails declines the checkpoint.
//!
//! A task that keeps keyed state on the host hands over its store's checkpoint too
//! ([`StoreUpload`]): the same thread stores the store's new files as shared files
//! (`checkpoint/shared.rs`), puts the section that names them into the state, and the
//! acknowledgement names every shared file the state needs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::error::TaskError;
use crate::checkpoint::layout::CheckpointLayout;
use crate::checkpoint::metadata::StateHandle;
use crate::checkpoint::pending::{Acknowledgement, SnapshotCost};
use crate::checkpoint::shared::SharedFile;
use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use crate::checkpoint::task_state::TaskState;
use crate::ids::Barrier;
use crate::ids::CheckpointId;
use crate::ids::TaskId;
use crate::state;
use crate::state::keyed::StoreError;
use crate::state::keyed::local::RestoredFile;
use crate::state::keyed::section::PendingStore;
use crate::state::keyed::snapshot::KeptFile;

/// What tasks tell the job's driver.
///
/// The channel carrying these is unbounded on purpose: a task must never
/// block on the driver, and the number of events is bounded by the number of
/// tasks times the checkpoints in flight (plus one exit per task).
#[derive(Debug)]
pub(crate) enum TaskEvent {
    /// The task's state for `id` is durable.
    Ack {
        /// The checkpoint.
        id: CheckpointId,
        /// The task.
        task: TaskId,
        /// Where the state is, what the snapshot cost, and what it builds on:
        /// the coordinator's own record of it, built here so nothing on the
        /// way copies it field by field.
        ack: Acknowledgement<StateHandle>,
    },
    /// The task cannot take part in checkpoint `id`.
    Decline {
        /// The checkpoint.
        id: CheckpointId,
        /// The task.
        task: TaskId,
        /// Why, for the log and the statistics.
        reason: DeclineReason,
    },
    /// A source has emitted its last record.
    SourceFinished(TaskId),
    /// The task's thread ended: `Ok` after a shutdown, or how it failed.
    Exited {
        /// The task.
        task: TaskId,
        /// How it ended.
        result: Result<(), TaskError>,
    },
}

/// Why a task cannot take part in a checkpoint ([`TaskEvent::Decline`]). The coordinator
/// records it as text (the abort reason in the statistics); the event keeps it typed up to
/// there.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DeclineReason {
    /// A newer barrier arrived while the task was aligning this checkpoint's: the older one is
    /// given up, and the newer one subsumes it.
    #[error("a newer barrier arrived during alignment")]
    Superseded,
    /// The task's state could not be written; the error names the file and the problem.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// The task's keyed state store could not read its checkpoint's files.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The keyed state names a shared file again whose handle the task does not have: a bug.
    #[error(
        "the keyed state names the shared file {0} again, but no handle of it is known; this \
         is a bug in Weir, please report it"
    )]
    UnknownShared(String),
}

/// What a task hands the persister at a barrier: the synchronous part of its snapshot.
pub(crate) struct TaskSnapshot {
    /// Its state, to encode into its state file.
    pub(crate) state: TaskState,
    /// Its keyed state's store checkpoint, to store, if it keeps keyed state on the host.
    pub(crate) store: Option<StoreUpload>,
    /// The earlier checkpoints whose states of this task the state builds on, base first
    /// (an incremental image's); empty for a self-contained state.
    pub(crate) chain: Vec<CheckpointId>,
}

impl TaskSnapshot {
    /// A self-contained state with no keyed state: a source's.
    pub(crate) fn whole(state: TaskState) -> Self {
        TaskSnapshot {
            state,
            store: None,
            chain: Vec::new(),
        }
    }
}

/// The handles of the shared files a task's keyed state has stored, or was restored from, by
/// name: what its later checkpoints name again. Filled by the persister as it stores files.
pub(crate) type SharedHandles = Arc<Mutex<HashMap<String, SharedFile>>>;

/// Drops from `handles` (those of `task`'s keyed state) the handles no later checkpoint can
/// name, once checkpoint `completed` completed: a later checkpoint names a file of the newest
/// completed checkpoint or of one still in flight (`live`, the keyed state's
/// [`live_files`](crate::state::keyed::section::KeyedState::live_files)), or a file it uploads
/// itself (written by a checkpoint after `completed`). Without it the map grew by every file a
/// task ever uploaded.
pub(crate) fn prune_handles(
    handles: &SharedHandles,
    task: &TaskId,
    live: &[KeptFile],
    completed: CheckpointId,
) {
    let live: std::collections::HashSet<String> = live
        .iter()
        .filter_map(|kept| CheckpointLayout::shared_file_name(kept.writer, task, &kept.name).ok())
        .collect();
    handles
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|name, _| {
            live.contains(name)
                || CheckpointLayout::shared_file_writer(name).is_some_and(|w| w > completed)
        });
}

/// The keyed state's part of a task's snapshot, still to be stored: its store's checkpoint,
/// and the handles of what earlier checkpoints stored.
pub(crate) struct StoreUpload {
    /// The store's checkpoint and its plan.
    pub(crate) pending: PendingStore,
    /// The task's handles.
    pub(crate) handles: SharedHandles,
}

/// The shared files of a restored state (`shared`, verified), as the restore of its
/// keyed state fetches them: each by the subtask of `vertex` whose store it belongs to (an old
/// subtask's, after a rescale) and its name there. Their handles go into `handles`, for later
/// checkpoints to name them again.
pub(crate) fn restored_files<'a>(
    vertex: &'a str,
    shared: Vec<(SharedFile, RestoredFile)>,
    handles: &SharedHandles,
) -> impl FnMut(u32, &KeptFile) -> Result<RestoredFile, StoreError> + 'a {
    let mut files = HashMap::new();
    let mut known = handles.lock().unwrap_or_else(PoisonError::into_inner);
    for (handle, bytes) in shared {
        files.insert(handle.name.clone(), bytes);
        known.insert(handle.name.clone(), handle);
    }
    move |subtask, kept| {
        let writer = TaskId::new(vertex, subtask);
        let name = CheckpointLayout::shared_file_name(kept.writer, &writer, &kept.name)
            .map_err(|e| StoreError::Unexpected(e.to_string()))?;
        files.remove(&name).ok_or_else(|| {
            StoreError::Unexpected(format!(
                "a keyed state that names the shared file {name}, which its checkpoint's \
                 metadata does not list"
            ))
        })
    }
}

/// Stores the files of `upload` that are new for checkpoint `barrier` of `task`, adds the
/// keyed section to `state`, and returns the handles of every shared file the state names.
/// (What it stored is in them: the handles whose writer is this checkpoint.)
fn store_keyed(
    storage: &dyn CheckpointStorage,
    barrier: Barrier,
    task: &TaskId,
    state: &mut TaskState,
    upload: StoreUpload,
) -> Result<Vec<SharedFile>, DeclineReason> {
    let StoreUpload { pending, handles } = upload;
    let lock = || handles.lock().unwrap_or_else(PoisonError::into_inner);
    let snapshot = pending.finish(|name, bytes| -> Result<(), DeclineReason> {
        let handle = storage.write_shared(barrier.id, task, name, &bytes)?;
        lock().insert(handle.name.clone(), handle);
        Ok(())
    })?;
    let known = lock();
    let shared = snapshot
        .kept
        .iter()
        .map(|kept| {
            let name = CheckpointLayout::shared_file_name(kept.writer, task, &kept.name)
                .map_err(StorageError::from)?;
            known
                .get(&name)
                .cloned()
                .ok_or(DeclineReason::UnknownShared(name))
        })
        .collect::<Result<Vec<_>, _>>()?;
    state
        .sections
        .push(state::keyed_section(task.subtask, snapshot));
    Ok(shared)
}

/// Writes snapshots off the task's thread and reports to the driver.
#[derive(Clone)]
pub(crate) struct Persister {
    storage: Arc<dyn CheckpointStorage>,
    runtime: tokio::runtime::Handle,
    events: UnboundedSender<TaskEvent>,
}

impl Persister {
    /// A persister writing to `storage` on `runtime`'s blocking pool.
    pub(crate) fn new(
        storage: Arc<dyn CheckpointStorage>,
        runtime: tokio::runtime::Handle,
        events: UnboundedSender<TaskEvent>,
    ) -> Self {
        Persister {
            storage,
            runtime,
            events,
        }
    }

    /// Writes `snapshot` of `task` at `barrier` in the background; acknowledges
    /// when it is durable, declines if it cannot be written. The
    /// acknowledgement carries its chain to the metadata. The state is encoded
    /// in the background too: for an image that is a copy of the guest's whole
    /// memory, which must not stall the task. So is the keyed state's store
    /// stored, if the task keeps one.
    pub(crate) fn persist(
        &self,
        barrier: Barrier,
        task: TaskId,
        snapshot: TaskSnapshot,
        sync: Duration,
        alignment: Duration,
    ) {
        let TaskSnapshot {
            mut state,
            store,
            chain,
        } = snapshot;
        let storage = Arc::clone(&self.storage);
        let events = self.events.clone();
        self.runtime.spawn_blocking(move || {
            let started = Instant::now();
            let written = (|| {
                let shared = match store {
                    Some(upload) => store_keyed(&*storage, barrier, &task, &mut state, upload)?,
                    None => Vec::new(),
                };
                let state = state.encode();
                let handle = storage.write_state(barrier.kind, barrier.id, &task, &state)?;
                Ok::<_, DeclineReason>((handle, state.len() as u64, shared))
            })();
            let event = match written {
                Ok((handle, bytes, shared)) => TaskEvent::Ack {
                    id: barrier.id,
                    task,
                    ack: Acknowledgement {
                        handle,
                        cost: SnapshotCost {
                            sync_duration: sync,
                            async_duration: started.elapsed(),
                            alignment_duration: alignment,
                            bytes,
                        },
                        chain,
                        shared,
                    },
                },
                Err(reason) => TaskEvent::Decline {
                    id: barrier.id,
                    task,
                    reason,
                },
            };
            // The driver is gone only when the attempt is over; nothing to tell then.
            let _ = events.send(event);
        });
    }

    /// Declines checkpoint `id` for `task`.
    pub(crate) fn decline(&self, id: CheckpointId, task: &TaskId, reason: DeclineReason) {
        let _ = self.events.send(TaskEvent::Decline {
            id,
            task: task.clone(),
            reason,
        });
    }

    /// Tells the driver a source has emitted its last record.
    pub(crate) fn source_finished(&self, task: &TaskId) {
        let _ = self.events.send(TaskEvent::SourceFinished(task.clone()));
    }

    /// Tells the driver a task's thread ended.
    pub(crate) fn exited(&self, task: TaskId, result: Result<(), TaskError>) {
        let _ = self.events.send(TaskEvent::Exited { task, result });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Once a checkpoint completes, a task keeps the handles of the files a later checkpoint
    /// may name (the live ones, and any a checkpoint after it uploaded) and drops the rest.
    #[test]
    fn handles_no_later_checkpoint_can_name_are_dropped() {
        let task = TaskId::new("count", 1);
        let kept = |writer, name: &str| KeptFile {
            name: name.to_string(),
            writer: CheckpointId(writer),
        };
        let shared = |writer, name: &str| {
            CheckpointLayout::shared_file_name(CheckpointId(writer), &task, name).unwrap()
        };
        let handles = SharedHandles::default();
        for (writer, name) in [(1, "a.sst"), (2, "b.sst"), (3, "c.sst"), (5, "d.sst")] {
            let name = shared(writer, name);
            let handle = SharedFile {
                name: name.clone(),
                length: 30,
                crc32: 7,
            };
            handles.lock().unwrap().insert(name, handle);
        }
        // Checkpoint 4 completed naming b and c; 5, in flight, uploaded d; a was compacted away.
        prune_handles(
            &handles,
            &task,
            &[kept(2, "b.sst"), kept(3, "c.sst")],
            CheckpointId(4),
        );
        let mut left: Vec<String> = handles.lock().unwrap().keys().cloned().collect();
        left.sort();
        assert_eq!(
            left,
            [shared(2, "b.sst"), shared(3, "c.sst"), shared(5, "d.sst")]
        );
    }
}
