//! Matching a checkpoint to the job about to run from it, and reading each
//! task's state back.
//!
//! State is matched by vertex name. State for a vertex the job no longer has
//! is an error unless the user allows dropping it; a vertex whose
//! parallelism changed may only be restored if it kept no state (rescaling
//! keyed state comes later); a vertex the checkpoint does not know starts
//! empty.

use std::collections::{BTreeMap, HashMap};

use super::runner::RunError;
use crate::checkpoint::CheckpointKind;
use crate::checkpoint::recovery::{RestorePoint, read_chain};
use crate::checkpoint::storage::CheckpointStorage;
use crate::dataflow::TaskId;
use crate::dataflow::task_state::{RestoredState, TaskState};
use crate::job::Job;

/// The envelope of a state that holds nothing: version and flags only.
const EMPTY_STATE_BYTES: u64 = 2;

/// Reads and checks the state of every task of `job` from `point`, with the
/// states of the earlier checkpoints an incremental image builds on.
pub(crate) fn load_states(
    storage: &dyn CheckpointStorage,
    point: &RestorePoint,
    job: &Job,
    allow_non_restored_state: bool,
) -> Result<HashMap<TaskId, RestoredState>, RunError> {
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
            return Err(RunError::Restore(format!(
                "{name} holds state for `{vertex}`, which this job does not have; rename the vertex \
                 back, or pass --allow-non-restored-state to drop that state"
            )));
        };
        let stateful = entries.iter().any(|e| e.state_bytes > EMPTY_STATE_BYTES);
        let old = meta
            .parallelism
            .get(vertex)
            .copied()
            .unwrap_or(entries.len() as u32);
        if old != v.parallelism {
            if stateful {
                return Err(RunError::Restore(format!(
                    "the parallelism of `{vertex}` changed from {old} to {} since {name}, and it has \
                     state: rescaling state is not supported yet; set its parallelism back to {old}",
                    v.parallelism
                )));
            }
            continue;
        }
        for entry in entries {
            let bytes = point
                .states
                .read(storage, &point.location, &entry.handle)
                .map_err(|e| RunError::Restore(e.to_string()))?;
            let state = TaskState::decode(bytes)
                .map_err(|e| RunError::Restore(format!("{name}: state of {}: {e}", entry.task)))?;
            let chain =
                read_chain(storage, &point.location, entry, &mut links, &point.states)
                    .map_err(|e| RunError::Restore(e.to_string()))?
                    .into_iter()
                    .zip(&entry.chain)
                    .map(|(link_state, link)| {
                        TaskState::decode(link_state.bytes).map(|s| s.inner).map_err(|e| {
                        RunError::Restore(format!(
                            "{name}: state of {} at checkpoint {link}, which its image builds \
                             on: {e}",
                            entry.task
                        ))
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
    use crate::checkpoint::CheckpointId;
    use crate::checkpoint::metadata::{CheckpointMetadata, METADATA_VERSION, TaskStateMeta};
    use crate::checkpoint::storage::MemoryStorage;

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
        let err = load_states(&storage, &point, &job("op", 3), false)
            .unwrap_err()
            .to_string();
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
        let err = load_states(&storage, &point, &job("new", 1), false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("holds state for `old`"), "{err}");
        assert!(err.contains("--allow-non-restored-state"), "{err}");
        let states = load_states(&storage, &point, &job("new", 1), true).unwrap();
        assert!(states.keys().all(|t| t.vertex != "old"));
    }
}
