//! Matching a checkpoint to the job about to run from it: which of the
//! checkpoint's task states the job takes.
//!
//! Why a module of its own: this is the policy for a job that changed since
//! its checkpoint, and it decides whether a restart loses state, so it is a
//! pure function over the checkpoint's metadata and the job, tested without a
//! disk. Reading the checkpoint (and verifying it as it is read) is
//! [`crate::checkpoint::restore`]'s; the runner hands the states this module
//! chooses to the tasks.
//!
//! State is matched by vertex name. State for a vertex the job no longer has
//! is an error unless the user allows dropping it; a vertex whose
//! parallelism changed may only be restored if it kept no state (rescaling
//! keyed state comes later); a vertex the checkpoint does not know starts
//! empty.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::checkpoint::metadata::CheckpointMetadata;
use crate::checkpoint::restore::EnvelopeError;
use crate::checkpoint::storage::StorageError;
use crate::ids::CheckpointKind;
use crate::ids::TaskId;
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
    /// A task's state file, or one its image builds on, verifies but does not decode.
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
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

/// Which of a checkpoint's task states a job takes, as [`match_states`] decided.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct StateMatch {
    /// The tasks whose state is restored, in the checkpoint's order by vertex name.
    pub(crate) tasks: Vec<TaskId>,
    /// The vertices whose state is dropped because the job no longer has them (allowed with
    /// `--allow-non-restored-state`), for the log.
    pub(crate) dropped: Vec<String>,
}

/// The envelope of a state that holds nothing: version and flags only.
const EMPTY_STATE_BYTES: u64 = 2;

/// Decides which task states of the checkpoint `metadata` (in the directory named
/// `checkpoint`) `job` takes: every task of a vertex the job still has at the same
/// parallelism; none of a stateless vertex whose parallelism changed; a stateful one is
/// [`RestoreError::ParallelismChanged`]. A vertex the job lost is
/// [`RestoreError::UnknownVertex`] unless `allow_non_restored_state`, then it is dropped.
pub(crate) fn match_states(
    metadata: &CheckpointMetadata,
    checkpoint: &str,
    job: &Job,
    allow_non_restored_state: bool,
) -> Result<StateMatch, RestoreError> {
    let mut by_vertex: BTreeMap<&str, Vec<_>> = BTreeMap::new();
    for entry in &metadata.tasks {
        by_vertex
            .entry(entry.task.vertex.as_str())
            .or_default()
            .push(entry);
    }
    let mut matched = StateMatch::default();
    for (vertex, entries) in by_vertex {
        let Some(v) = job.vertex(vertex) else {
            if allow_non_restored_state {
                matched.dropped.push(vertex.to_string());
                continue;
            }
            return Err(RestoreError::UnknownVertex {
                checkpoint: checkpoint.to_string(),
                vertex: vertex.to_string(),
            });
        };
        let stateful = entries.iter().any(|e| e.state_bytes > EMPTY_STATE_BYTES);
        let old = metadata
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
                    checkpoint: checkpoint.to_string(),
                });
            }
            continue;
        }
        matched
            .tasks
            .extend(entries.into_iter().map(|entry| entry.task.clone()));
    }
    Ok(matched)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::metadata::{METADATA_VERSION, StateHandle, TaskStateMeta};
    use crate::checkpoint::task_state::TaskState;
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

    /// The metadata of checkpoint 1 of `job`, every task holding `inner` as its state.
    fn checkpoint(job: &Job, inner: &[u8]) -> CheckpointMetadata {
        let state_bytes = TaskState {
            finished: false,
            time: None,
            inner: inner.to_vec(),
        }
        .encode()
        .len() as u64;
        let tasks = job
            .tasks()
            .map(|task| TaskStateMeta {
                handle: StateHandle {
                    file: format!("{}-{}.state", task.vertex, task.subtask),
                    length: state_bytes + 24,
                    crc32: 0,
                },
                task,
                state_bytes,
                sync_duration_ms: 0,
                async_duration_ms: 0,
                alignment_duration_ms: 0,
                chain: Vec::new(),
            })
            .collect();
        CheckpointMetadata {
            format_version: METADATA_VERSION,
            job_name: job.name.clone(),
            job_fingerprint: job.fingerprint(),
            checkpoint_id: CheckpointId(1),
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
        }
    }

    const CHK1: &str = "chk-0000000001";

    #[test]
    fn restores_every_task_of_an_unchanged_job() {
        let job = job("op", 2);
        let meta = checkpoint(&job, b"state");
        let matched = match_states(&meta, CHK1, &job, false).unwrap();
        assert_eq!(matched.tasks.len(), job.tasks().count());
        assert!(matched.tasks.contains(&TaskId::new("op", 1)));
        assert!(matched.dropped.is_empty());
    }

    #[test]
    fn refuses_a_changed_parallelism_of_a_stateful_operator() {
        let meta = checkpoint(&job("op", 2), b"state");
        let err = match_states(&meta, CHK1, &job("op", 3), false).unwrap_err();
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
        let meta = checkpoint(&job("op", 2), b"");
        let matched = match_states(&meta, CHK1, &job("op", 3), false).unwrap();
        assert!(!matched.tasks.iter().any(|t| t.vertex == "op"));
    }

    #[test]
    fn state_of_a_vertex_the_job_lost_needs_allow_non_restored_state() {
        let meta = checkpoint(&job("old", 1), b"state");
        let err = match_states(&meta, CHK1, &job("new", 1), false).unwrap_err();
        assert!(
            matches!(&err, RestoreError::UnknownVertex { vertex, .. } if vertex == "old"),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(err.contains("holds state for `old`"), "{err}");
        assert!(err.contains("--allow-non-restored-state"), "{err}");
        let matched = match_states(&meta, CHK1, &job("new", 1), true).unwrap();
        assert!(matched.tasks.iter().all(|t| t.vertex != "old"));
        assert_eq!(matched.dropped, ["old"]);
    }
}
