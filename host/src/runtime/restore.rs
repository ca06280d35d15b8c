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
use crate::checkpoint::recovery::RestorePoint;
use crate::checkpoint::storage::CheckpointStorage;
use crate::dataflow::TaskId;
use crate::dataflow::task_state::TaskState;
use crate::job::Job;

/// The envelope of a state that holds nothing: version and flags only.
const EMPTY_STATE_BYTES: u64 = 2;

/// Reads and checks the state of every task of `job` from `point`.
pub(crate) fn load_states(
    storage: &dyn CheckpointStorage,
    point: &RestorePoint,
    job: &Job,
    allow_non_restored_state: bool,
) -> Result<HashMap<TaskId, TaskState>, RunError> {
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
            let bytes = storage
                .read_state(&point.location, &entry.handle)
                .map_err(|e| RunError::Restore(e.to_string()))?;
            let state = TaskState::decode(&bytes)
                .map_err(|e| RunError::Restore(format!("{name}: state of {}: {e}", entry.task)))?;
            states.insert(entry.task.clone(), state);
        }
    }
    Ok(states)
}
