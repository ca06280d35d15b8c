//! Matching a checkpoint to the job about to run from it, and reading each
//! task's state back.
//!
//! State is matched by vertex name. State for a vertex the job no longer has
//! is an error unless the user allows dropping it; a vertex whose
//! parallelism changed may only be restored if it kept no state (rescaling
//! keyed state comes later); a vertex the checkpoint does not know starts
//! empty.

use std::collections::{BTreeMap, HashMap};

use std::path::PathBuf;

use crate::checkpoint::recovery::{RestorePoint, read_chain};
use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use crate::checkpoint::task_state::{RestoredState, TaskState, TaskStateError};
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::job::Job;

/// Why a checkpoint or savepoint cannot be restored into this job. Each names the checkpoint
/// (its directory name) and what to do.
#[derive(Debug, thiserror::Error)]
pub enum RestoreError {
    /// It holds state for a vertex the job does not have.
    #[error(
        "{checkpoint} holds state for `{vertex}`, which this job does not have; rename the vertex \
         back, or pass --allow-non-restored-state to drop that state"
    )]
    UnknownVertex {
        /// The checkpoint's directory name.
        checkpoint: String,
        /// The vertex.
        vertex: String,
    },
    /// A stateful vertex's parallelism changed.
    #[error(
        "the parallelism of `{vertex}` changed from {old} to {new} since {checkpoint}, and it has \
         state: rescaling state is not supported yet; set its parallelism back to {old}"
    )]
    ParallelismChanged {
        /// The vertex.
        vertex: String,
        /// Its parallelism in the checkpoint.
        old: u32,
        /// Its parallelism in the job.
        new: u32,
        /// The checkpoint's directory name.
        checkpoint: String,
    },
    /// A state file, or one its image chain needs, cannot be read or verified.
    #[error(transparent)]
    Storage(#[from] StorageError),
    /// A task's state file verifies but its envelope does not decode.
    #[error("{checkpoint}: state of {task}: {problem}")]
    TaskState {
        /// The checkpoint's directory name.
        checkpoint: String,
        /// The task.
        task: TaskId,
        /// What is wrong with the envelope.
        problem: TaskStateError,
    },
    /// The state an incremental image builds on does not decode.
    #[error(
        "{checkpoint}: state of {task} at checkpoint {link}, which its image builds on: {problem}"
    )]
    ChainState {
        /// The checkpoint's directory name.
        checkpoint: String,
        /// The task.
        task: TaskId,
        /// The checkpoint of the link.
        link: CheckpointId,
        /// What is wrong with its envelope.
        problem: TaskStateError,
    },
    /// The checkpoint given with `--restore PATH` cannot be used, and another one of the job
    /// verifies.
    #[error(
        "{source}. The newest {kind} of this job that verifies is {}: restore it with --restore {}",
        alternative.display(),
        alternative.display()
    )]
    Unusable {
        /// Why the one asked for cannot be used (boxed: errors stay small to pass around).
        source: Box<StorageError>,
        /// Checkpoint or savepoint.
        kind: CheckpointKind,
        /// The directory of the newest one that verifies.
        alternative: PathBuf,
    },
}

/// The envelope of a state that holds nothing: version and flags only.
const EMPTY_STATE_BYTES: u64 = 2;

/// Reads and checks the state of every task of `job` from `point`, with the
/// states of the earlier checkpoints an incremental image builds on.
pub(crate) fn load_states(
    storage: &dyn CheckpointStorage,
    point: &RestorePoint,
    job: &Job,
    allow_non_restored_state: bool,
) -> Result<HashMap<TaskId, RestoredState>, RestoreError> {
    let meta = &point.metadata;
    let name = point.location.name();
    let mut by_vertex: BTreeMap<&str, Vec<_>> = BTreeMap::new();
    for entry in &meta.tasks {
        by_vertex
            .entry(entry.task.vertex.as_str())
            .or_default()
            .push(entry);
    }
    let mut states = HashMap::new();
    let mut links = BTreeMap::new();
    // New images may build on the restored ones only if they are this job's checkpoints: a
    // savepoint, or a checkpoint restored from another directory, is no link of its chains.
    let resumable = meta.kind == CheckpointKind::Checkpoint
        && point.location == storage.layout().location(meta.kind, meta.checkpoint_id);
    for (vertex, entries) in by_vertex {
        let Some(v) = job.vertex(vertex) else {
            if allow_non_restored_state {
                tracing::warn!(
                    "dropping the state of `{vertex}` from {name}: the job has no such vertex"
                );
                continue;
            }
            return Err(RestoreError::UnknownVertex {
                checkpoint: name,
                vertex: vertex.to_string(),
            });
        };
        let stateful = entries.iter().any(|e| e.state_bytes > EMPTY_STATE_BYTES);
        let old = meta
            .parallelism
            .get(vertex)
            .copied()
            .unwrap_or(entries.len() as u32);
        if old != v.parallelism {
            if stateful {
                return Err(RestoreError::ParallelismChanged {
                    vertex: vertex.to_string(),
                    old,
                    new: v.parallelism,
                    checkpoint: name,
                });
            }
            continue;
        }
        for entry in entries {
            let bytes = point.states.read(storage, &point.location, &entry.handle)?;
            let state = TaskState::decode(bytes).map_err(|problem| RestoreError::TaskState {
                checkpoint: name.clone(),
                task: entry.task.clone(),
                problem,
            })?;
            let chain = read_chain(storage, &point.location, entry, &mut links, &point.states)?
                .into_iter()
                .zip(&entry.chain)
                .map(|(link_state, &link)| {
                    TaskState::decode(link_state.bytes)
                        .map(|s| s.inner)
                        .map_err(|problem| RestoreError::ChainState {
                            checkpoint: name.clone(),
                            task: entry.task.clone(),
                            link,
                            problem,
                        })
                })
                .collect::<Result<Vec<_>, _>>()?;
            let restored = RestoredState {
                state,
                chain,
                resumable,
            };
            states.insert(entry.task.clone(), restored);
        }
    }
    Ok(states)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::metadata::{CheckpointMetadata, METADATA_VERSION, TaskStateMeta};
    use crate::checkpoint::storage::MemoryStorage;
    use crate::ids::CheckpointId;

    /// A job with a generator, an operator `op` of the given parallelism and a sink.
    fn job(op_name: &str, parallelism: u32) -> Job {
        let text = format!(
            "name = \"j\"\n\
             [[source]]\nname = \"gen\"\ntype = \"generator\"\ncount = 10\n\
             [[operator]]\nname = \"{op_name}\"\nmodule = \"op.wasm\"\nparallelism = {parallelism}\n\
             inputs = [{{ from = \"gen\", partition = \"rebalance\" }}]\n\
             [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [{{ from = \"{op_name}\", partition = \"rebalance\" }}]\n"
        );
        Job::from_str(&text, "/jobs", "j.toml").unwrap()
    }

    /// Checkpoint 1 of `job`, every task holding `inner` as its state.
    fn checkpoint(storage: &MemoryStorage, job: &Job, inner: &[u8]) -> RestorePoint {
        let id = CheckpointId(1);
        let tasks = job
            .tasks()
            .map(|task| {
                let bytes = TaskState {
                    finished: false,
                    inner: inner.to_vec(),
                }
                .encode();
                let handle = storage
                    .write_state(CheckpointKind::Checkpoint, id, &task, &bytes)
                    .unwrap();
                TaskStateMeta {
                    task,
                    handle,
                    state_bytes: bytes.len() as u64,
                    sync_duration_ms: 0,
                    async_duration_ms: 0,
                    alignment_duration_ms: 0,
                    chain: Vec::new(),
                }
            })
            .collect();
        let metadata = CheckpointMetadata {
            format_version: METADATA_VERSION,
            job_name: job.name.clone(),
            job_fingerprint: job.fingerprint(),
            checkpoint_id: id,
            kind: CheckpointKind::Checkpoint,
            trigger_time_ms: 0,
            completion_time_ms: 0,
            duration_ms: 0,
            parallelism: job
                .vertices
                .iter()
                .map(|v| (v.name.clone(), v.parallelism))
                .collect(),
            tasks,
        };
        let location = storage.write_metadata(&metadata).unwrap();
        RestorePoint {
            location,
            metadata,
            states: Default::default(),
        }
    }

    #[test]
    fn restores_every_task_of_an_unchanged_job() {
        let storage = MemoryStorage::default();
        let job = job("op", 2);
        let point = checkpoint(&storage, &job, b"state");
        let states = load_states(&storage, &point, &job, false).unwrap();
        assert_eq!(states.len(), job.tasks().count());
        assert_eq!(states[&TaskId::new("op", 1)].state.inner, b"state");
        assert!(
            states[&TaskId::new("op", 1)].resumable,
            "new images may build on a checkpoint of the job"
        );
    }

    #[test]
    fn refuses_a_changed_parallelism_of_a_stateful_operator() {
        let storage = MemoryStorage::default();
        let point = checkpoint(&storage, &job("op", 2), b"state");
        let err = load_states(&storage, &point, &job("op", 3), false).unwrap_err();
        assert!(
            matches!(&err, RestoreError::ParallelismChanged { vertex, old: 2, new: 3, .. } if vertex == "op"),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(
            err.contains("parallelism of `op` changed from 2 to 3"),
            "{err}"
        );
        assert!(err.contains("set its parallelism back to 2"), "{err}");
    }

    #[test]
    fn allows_a_changed_parallelism_of_a_stateless_operator() {
        let storage = MemoryStorage::default();
        let point = checkpoint(&storage, &job("op", 2), b"");
        let states = load_states(&storage, &point, &job("op", 3), false).unwrap();
        assert!(!states.keys().any(|t| t.vertex == "op"));
    }

    #[test]
    fn state_of_a_vertex_the_job_lost_needs_allow_non_restored_state() {
        let storage = MemoryStorage::default();
        let point = checkpoint(&storage, &job("old", 1), b"state");
        let err = load_states(&storage, &point, &job("new", 1), false).unwrap_err();
        assert!(
            matches!(&err, RestoreError::UnknownVertex { vertex, .. } if vertex == "old"),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(err.contains("holds state for `old`"), "{err}");
        assert!(err.contains("--allow-non-restored-state"), "{err}");
        let states = load_states(&storage, &point, &job("new", 1), true).unwrap();
        assert!(states.keys().all(|t| t.vertex != "old"));
    }
}
