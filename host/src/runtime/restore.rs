//! Matching a checkpoint to the job about to run from it: which of the
//! checkpoint's task states each task takes, and how many key groups each vertex keeps.
//!
//! Why a module of its own: this is the policy for a job that changed since
//! its checkpoint, and it decides whether a restart loses state, so it is a
//! pure function over the checkpoint's metadata, its decoded states and the job,
//! tested without a disk. Reading the checkpoint (and verifying it as it is read)
//! is [`crate::checkpoint::restore`]'s; splitting one operator's states is
//! [`crate::checkpoint::rescale`]'s; the runner hands the states this module
//! chooses to the tasks.
//!
//! State is matched by vertex name. State for a vertex the job no longer has is an
//! error unless the user allows dropping it; a vertex the checkpoint does not know
//! starts empty. An operator that holds state keeps the key groups it was
//! checkpointed with (docs/ABI.md §16): a job file that sets another
//! `max_parallelism` is refused, and its parallelism may change only up to them, its
//! states split and merged by key group. A source or sink whose parallelism changed
//! has its states split by its connector's rescale rule (`connectors::rescale_rule`); one
//! whose connector has none and that kept state is refused.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

use weir_abi::key_group::KeyGroups;

use crate::checkpoint::metadata::CheckpointMetadata;
use crate::checkpoint::rescale::{InnerStates, RescaleError, rescale_states, split_guest_states};
use crate::checkpoint::restore::EnvelopeError;
use crate::checkpoint::shared::SharedFile;
use crate::checkpoint::storage::StorageError;
use crate::checkpoint::task_state::{RestoredState, TaskState};
use crate::connectors;
use crate::ids::CheckpointKind;
use crate::ids::TaskId;
use crate::job::{Job, VertexKind};
use crate::state;
use crate::state::keyed::local::RestoredFile;

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
    /// The parallelism of a source or sink changed, and it has state its type cannot carry to
    /// another parallelism (generators, Kafka sources, file and Kafka sinks can).
    #[error(
        "the parallelism of {kind} `{vertex}` changed from {old} to {new} since {checkpoint}, and \
         it has state that a {kind} of its type cannot carry to another parallelism (generators, \
         Kafka sources, file and Kafka sinks can); set its parallelism back to {old}"
    )]
    ParallelismChanged {
        /// `source` or `sink`.
        kind: &'static str,
        /// The vertex.
        vertex: String,
        /// Its parallelism in the checkpoint.
        old: u32,
        /// Its parallelism in the job.
        new: u32,
        /// The checkpoint's directory name.
        checkpoint: String,
    },
    /// The job file sets a `max_parallelism` other than the one an operator's state has.
    #[error(
        "the job sets max_parallelism = {new}, but the state of `{vertex}` in {checkpoint} is \
         split into {old} key groups, and a key's group would change: set max_parallelism = {old} \
         (or remove it, to keep what the state has)"
    )]
    MaxParallelismChanged {
        /// The operator.
        vertex: String,
        /// The key groups of its state.
        old: u32,
        /// The job's max_parallelism.
        new: u32,
        /// The checkpoint's directory name.
        checkpoint: String,
    },
    /// An operator's new parallelism exceeds the key groups its state is split into.
    #[error(
        "`{vertex}` cannot run at parallelism {new} from {checkpoint}: its state is split into \
         {max} key groups{}, so it can run at parallelism 1 to {max}",
        if *legacy { " (the checkpoint was taken before key groups, with one per subtask)" } else { "" }
    )]
    AboveKeyGroups {
        /// The operator.
        vertex: String,
        /// Its parallelism in the job.
        new: u32,
        /// The key groups of its state.
        max: u32,
        /// The checkpoint predates key groups.
        legacy: bool,
        /// The checkpoint's directory name.
        checkpoint: String,
    },
    /// An operator's states cannot be split for its new parallelism.
    #[error("cannot rescale `{vertex}` from {old} to {new} subtasks with {checkpoint}: {source}")]
    Rescale {
        /// The operator.
        vertex: String,
        /// Its parallelism in the checkpoint.
        old: u32,
        /// Its parallelism in the job.
        new: u32,
        /// The checkpoint's directory name.
        checkpoint: String,
        /// Why.
        source: RescaleError,
    },
    /// A task downstream of a rescaled operator had an input that ended.
    #[error(
        "cannot rescale `{upstream}` with {checkpoint}: an input of {task}, which it feeds, had \
         ended when the checkpoint was taken, and an ended input sends nothing after a restore; \
         restore this checkpoint at the same parallelism"
    )]
    EndedDownstream {
        /// The rescaled operator.
        upstream: String,
        /// The task whose input ended.
        task: TaskId,
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
    /// A task of the run's first attempt could not take up its state from the checkpoint the
    /// run starts from: nothing is retried, and nothing was committed from it.
    #[error(
        "{} cannot be restored into this job: {reason}. The job was stopped before it ran: fix          what this names, or restore another checkpoint or savepoint (`weir checkpoints DIR`          lists them)",
        checkpoint.display()
    )]
    TaskRefused {
        /// The checkpoint's or savepoint's directory.
        checkpoint: PathBuf,
        /// Which task failed, and how.
        reason: String,
    },
}

/// What a job restores from a checkpoint, as [`match_states`] decided.
#[derive(Debug, Clone, Default)]
pub(crate) struct StateMatch {
    /// The state of every task that takes one.
    pub(crate) states: HashMap<TaskId, RestoredState>,
    /// The vertices whose state is dropped because the job no longer has them (allowed with
    /// `--allow-non-restored-state`), for the log.
    pub(crate) dropped: Vec<String>,
    /// The operators whose state was split or merged: name, old and new parallelism, for the
    /// log.
    pub(crate) rescaled: Vec<(String, u32, u32)>,
    /// Every vertex whose parallelism is not the checkpoint's, with or without state: name, old
    /// and new parallelism.
    pub(crate) changed: Vec<(String, u32, u32)>,
    /// The key groups of the operators whose state keeps them, by name: the job runs with these.
    pub(crate) key_groups: BTreeMap<String, u32>,
}

/// Decides what `job` restores from the checkpoint `metadata` (in the directory named
/// `checkpoint`) whose tasks' decoded states are `states`:
///
/// - a vertex the job lost is [`RestoreError::UnknownVertex`] unless
///   `allow_non_restored_state`, then it is dropped;
/// - an operator that holds state (a guest state or timers) keeps its key groups
///   ([`RestoreError::MaxParallelismChanged`], [`RestoreError::AboveKeyGroups`]); at a new
///   parallelism its states are split and merged ([`rescale_states`]), at the same one each
///   task takes its own;
/// - a source or sink at the same parallelism takes its states; at another, it must hold none
///   ([`RestoreError::ParallelismChanged`]);
/// - a vertex that holds nothing and changed parallelism starts empty.
pub(crate) fn match_states(
    metadata: &CheckpointMetadata,
    checkpoint: &str,
    job: &Job,
    allow_non_restored_state: bool,
    mut states: HashMap<TaskId, RestoredState>,
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
        let old = metadata
            .parallelism
            .get(vertex)
            .copied()
            .unwrap_or(entries.len() as u32);
        if old != v.parallelism {
            matched
                .changed
                .push((vertex.to_string(), old, v.parallelism));
        }
        let own: Vec<(TaskId, RestoredState)> = entries
            .iter()
            .filter_map(|e| states.remove(&e.task).map(|s| (e.task.clone(), s)))
            .collect();
        let holds = own.iter().any(|(_, s)| holds_state(&s.state));
        let rescale_error = |source| RestoreError::Rescale {
            vertex: vertex.to_string(),
            old,
            new: v.parallelism,
            checkpoint: checkpoint.to_string(),
            source,
        };
        if !matches!(v.kind, VertexKind::Operator(_)) {
            if old == v.parallelism {
                matched.states.extend(own);
                continue;
            }
            if !holds {
                continue;
            }
            // A connector whose state can move says how. A file source runs at parallelism 1,
            // and the stdout and blackhole sinks keep no state: one that has some anyway (a
            // checkpoint not of this job) is refused.
            let Some(split) = connectors::rescale_rule(&v.kind) else {
                return Err(RestoreError::ParallelismChanged {
                    kind: v.kind_name(),
                    vertex: vertex.to_string(),
                    old,
                    new: v.parallelism,
                    checkpoint: checkpoint.to_string(),
                });
            };
            let new_states = rescale_states(&by_subtask(own, old), v.key_groups(), |inners| {
                let states = split(inners, v.parallelism).map_err(RescaleError::Connector)?;
                Ok(InnerStates {
                    states,
                    timer_key_prefix: 0,
                })
            })
            .map_err(rescale_error)?;
            matched.insert_rescaled(vertex, old, v.parallelism, new_states);
            continue;
        }
        if !holds {
            if old == v.parallelism {
                matched.states.extend(own);
            }
            continue;
        }
        let recorded = metadata.max_parallelism.get(vertex).copied();
        let key_groups = recorded.unwrap_or(old);
        if let Some(set) = job.max_parallelism.filter(|&set| set != key_groups) {
            return Err(RestoreError::MaxParallelismChanged {
                vertex: vertex.to_string(),
                old: key_groups,
                new: set,
                checkpoint: checkpoint.to_string(),
            });
        }
        matched.key_groups.insert(vertex.to_string(), key_groups);
        if old == v.parallelism {
            matched.states.extend(own);
            continue;
        }
        let new_groups = KeyGroups::new(key_groups, v.parallelism).ok_or_else(|| {
            RestoreError::AboveKeyGroups {
                vertex: vertex.to_string(),
                new: v.parallelism,
                max: key_groups,
                legacy: recorded.is_none(),
                checkpoint: checkpoint.to_string(),
            }
        })?;
        // A checkpoint's own metadata keeps each vertex within its key groups (validated when
        // read); one from before key groups has as many as subtasks.
        let old_groups = KeyGroups::new(key_groups, old).ok_or_else(|| {
            rescale_error(RescaleError::Guest(
                weir_abi::rescalable::RescaleError::MaxParallelism {
                    old: key_groups,
                    new: old,
                },
            ))
        })?;
        // The shared files of each old subtask (its keyed state's), for the new subtasks
        // whose key groups it owned some of: their restore takes its store's part.
        let mut shared_of: Vec<Vec<(SharedFile, RestoredFile)>> = vec![Vec::new(); old as usize];
        for (task, state) in &own {
            if let Some(slot) = shared_of.get_mut(task.subtask as usize) {
                slot.clone_from(&state.shared);
            }
        }
        let new_states = rescale_states(&by_subtask(own, old), new_groups, |inners| {
            split_guest_states(inners, old_groups, new_groups)
        })
        .map_err(rescale_error)?;
        let shared = (0..v.parallelism).map(|j| {
            let wanted = new_groups.range(j);
            (0..old)
                .filter(|&i| {
                    let had = old_groups.range(i);
                    had.start < wanted.end && wanted.start < had.end
                })
                .flat_map(|i| shared_of[i as usize].iter().cloned())
                .collect()
        });
        matched.insert_rescaled_with(vertex, old, v.parallelism, new_states, shared);
    }
    check_downstream(&matched, job, checkpoint)?;
    Ok(matched)
}

impl StateMatch {
    /// Takes `states`, one per new subtask of `vertex`, split from `old` subtasks for `new`.
    fn insert_rescaled(&mut self, vertex: &str, old: u32, new: u32, states: Vec<TaskState>) {
        let none = std::iter::repeat_with(Vec::new);
        self.insert_rescaled_with(vertex, old, new, states, none);
    }

    /// [`insert_rescaled`](Self::insert_rescaled), each new subtask with the shared files its
    /// keyed state's parts name.
    fn insert_rescaled_with(
        &mut self,
        vertex: &str,
        old: u32,
        new: u32,
        states: Vec<TaskState>,
        shared: impl Iterator<Item = Vec<(SharedFile, RestoredFile)>>,
    ) {
        for ((subtask, state), shared) in (0..).zip(states).zip(shared) {
            let restored = RestoredState {
                shared,
                ..RestoredState::alone(state)
            };
            self.states.insert(TaskId::new(vertex, subtask), restored);
        }
        self.rescaled.push((vertex.to_string(), old, new));
    }
}

/// The states of `own`, one per subtask of `parallelism` in order; a task the checkpoint holds
/// nothing of has the empty state.
fn by_subtask(own: Vec<(TaskId, RestoredState)>, parallelism: u32) -> Vec<TaskState> {
    let mut states = vec![TaskState::default(); parallelism as usize];
    for (task, state) in own {
        if let Some(slot) = states.get_mut(task.subtask as usize) {
            *slot = state.state;
        }
    }
    states
}

/// Whether a task state holds anything a restore must carry: a guest's state, a source's
/// position, a sink's pre-committed output, keyed state kept on the host, or a timer (a
/// watermark alone is not worth refusing a new parallelism for, nor keeping key groups).
fn holds_state(state: &TaskState) -> bool {
    if !state.inner.is_empty() || state::find(&state.sections, state::SectionTag::Keyed).is_some() {
        return true;
    }
    state::time_of(&state.sections)
        .ok()
        .flatten()
        .is_some_and(|time| time.has_timers())
}

/// Refuses a rescale whose operator feeds a task that had an ended input: that task's inputs
/// change in number, so it restores without their clocks, and the ended one would never end
/// again.
fn check_downstream(matched: &StateMatch, job: &Job, checkpoint: &str) -> Result<(), RestoreError> {
    for (upstream, _, _) in &matched.rescaled {
        for edge in job.edges.iter().filter(|e| e.from == *upstream) {
            for (task, restored) in matched.states.iter().filter(|(t, _)| t.vertex == edge.to) {
                let ended = !restored.state.finished
                    && state::time_of(&restored.state.sections)
                        .ok()
                        .flatten()
                        .is_some_and(|t| t.has_ended_input());
                if ended {
                    return Err(RestoreError::EndedDownstream {
                        upstream: upstream.clone(),
                        task: task.clone(),
                        checkpoint: checkpoint.to_string(),
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use weir_abi::rescalable::{ItemKind, RescalableState, Writer};

    use super::*;
    use crate::checkpoint::metadata::{METADATA_VERSION, StateHandle, TaskStateMeta};
    use crate::connectors::inherited;
    use crate::ids::CheckpointId;

    /// A job with a generator of parallelism `source`, an operator `op_name` of parallelism
    /// `parallelism` reading it by key, and a sink; `extra` goes at the top of the file.
    fn job_with(op_name: &str, parallelism: u32, source: u32, extra: &str) -> Job {
        let text = format!(
            "name = \"j\"\n{extra}\n\
             [[source]]\nname = \"gen\"\ntype = \"generator\"\ncount = 10\nparallelism = {source}\n\
             [[operator]]\nname = \"{op_name}\"\nmodule = \"op.wasm\"\nparallelism = {parallelism}\n\
             inputs = [{{ from = \"gen\", partition = \"key-hash\" }}]\n\
             [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [{{ from = \"{op_name}\", partition = \"rebalance\" }}]\n"
        );
        Job::from_str(&text, "/jobs", "j.toml").unwrap()
    }

    fn job(op_name: &str, parallelism: u32) -> Job {
        job_with(op_name, parallelism, 1, "")
    }

    /// Checkpoint 1 of `job`: its metadata, and every task's state as `state` makes it.
    fn checkpoint(
        job: &Job,
        state: impl Fn(&TaskId) -> TaskState,
    ) -> (CheckpointMetadata, HashMap<TaskId, RestoredState>) {
        let states: HashMap<TaskId, RestoredState> = job
            .tasks()
            .map(|task| {
                let s = state(&task);
                (task, RestoredState::alone(s))
            })
            .collect();
        let tasks = job
            .tasks()
            .map(|task| {
                let state_bytes = states[&task].state.encode().len() as u64;
                TaskStateMeta {
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
                    shared: Vec::new(),
                }
            })
            .collect();
        let identity = job.identity();
        let meta = CheckpointMetadata {
            format_version: METADATA_VERSION,
            job_name: job.name.clone(),
            job_fingerprint: job.fingerprint(),
            checkpoint_id: CheckpointId(1),
            kind: CheckpointKind::Checkpoint,
            trigger_time_ms: 0,
            completion_time_ms: 0,
            duration_ms: 0,
            parallelism: identity.parallelism,
            max_parallelism: identity.max_parallelism,
            generation: identity.generation,
            tasks,
        };
        (meta, states)
    }

    /// Every task holds `inner` as its state.
    fn with_inner(inner: &[u8]) -> impl Fn(&TaskId) -> TaskState {
        move |_| TaskState {
            finished: false,
            sections: Vec::new(),
            inner: inner.to_vec(),
        }
    }

    /// Each subtask of `op` holds the keys of `keys` that `job` routes to it, in the
    /// rescalable layout; the other tasks hold `position`.
    fn keyed<'a>(job: &'a Job, keys: &'a [&'a str]) -> impl Fn(&TaskId) -> TaskState + 'a {
        move |task| {
            let inner = if task.vertex == "op" {
                let groups = job.vertex("op").unwrap().key_groups();
                let mut w = Writer::with_capacity(0, 0);
                w.union(0, b"");
                for key in keys
                    .iter()
                    .filter(|k| groups.subtask(k.as_bytes()) == task.subtask)
                {
                    w.keyed(1, key.as_bytes(), b"1");
                }
                w.finish()
            } else {
                b"position".to_vec()
            };
            TaskState {
                finished: false,
                sections: Vec::new(),
                inner,
            }
        }
    }

    const CHK1: &str = "chk-0000000001";

    #[test]
    fn restores_every_task_of_an_unchanged_job() {
        let job = job("op", 2);
        let (meta, states) = checkpoint(&job, with_inner(b"state"));
        let matched = match_states(&meta, CHK1, &job, false, states).unwrap();
        assert_eq!(matched.states.len(), job.tasks().count());
        assert!(matched.states.contains_key(&TaskId::new("op", 1)));
        assert!(matched.dropped.is_empty() && matched.rescaled.is_empty());
        assert_eq!(matched.key_groups, [("op".to_string(), 128)].into());
    }

    #[test]
    fn splits_and_merges_a_rescalable_operator_state_by_key_group() {
        let keys: Vec<String> = (0..50).map(|i| format!("key-{i}")).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let before = job("op", 2);
        let (meta, states) = checkpoint(&before, keyed(&before, &keys));
        for p in [1, 3, 4] {
            let after = job("op", p);
            let matched = match_states(&meta, CHK1, &after, false, states.clone()).unwrap();
            assert_eq!(matched.rescaled, [("op".to_string(), 2, p)]);
            assert_eq!(matched.changed, matched.rescaled);
            let groups = after.vertex("op").unwrap().key_groups();
            let mut seen = 0;
            for subtask in 0..p {
                let state = &matched.states[&TaskId::new("op", subtask)].state;
                let inner = RescalableState::decode(&state.inner).unwrap().unwrap();
                for item in inner.items().filter(|i| i.kind == ItemKind::Keyed) {
                    assert_eq!(groups.subtask(item.key), subtask);
                    seen += 1;
                }
            }
            assert_eq!(seen, keys.len(), "p = {p}");
            // The source and the sink kept their parallelism and take their states.
            assert_eq!(
                matched.states[&TaskId::new("gen", 0)].state.inner,
                b"position"
            );
        }
    }

    #[test]
    fn refuses_a_new_parallelism_of_an_operator_whose_state_cannot_be_split() {
        let (meta, states) = checkpoint(&job("op", 2), with_inner(b"bincode"));
        let err = match_states(&meta, CHK1, &job("op", 3), false, states).unwrap_err();
        assert!(
            matches!(&err, RestoreError::Rescale { vertex, old: 2, new: 3, .. } if vertex == "op"),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(
            err.contains("cannot rescale `op` from 2 to 3 subtasks"),
            "{err}"
        );
        assert!(err.contains("keep its parallelism"), "{err}");
    }

    /// A job whose sink `out` of `sink` (a job file's sink table, without name and inputs)
    /// runs at parallelism `p`.
    fn with_sink(sink: &str, p: u32) -> Job {
        let text = format!(
            "name = \"j\"\n[checkpoint]\ninterval = \"1s\"\n\
             [[source]]\nname = \"gen\"\ntype = \"generator\"\n\
             [[sink]]\nname = \"out\"\n{sink}\nparallelism = {p}\n\
             inputs = [{{ from = \"gen\", partition = \"rebalance\" }}]\n"
        );
        Job::from_str(&text, "/jobs", "j.toml").unwrap()
    }

    #[test]
    fn a_kafka_sink_hands_each_old_subtask_to_one_new_one() {
        let kafka = "type = \"kafka\"\nbootstrap = \"k:9092\"\ntopic = \"t\"";
        let (meta, states) = checkpoint(&with_sink(kafka, 3), with_inner(b"pending output"));
        let matched = match_states(&meta, CHK1, &with_sink(kafka, 2), false, states).unwrap();
        assert_eq!(matched.rescaled, [("out".to_string(), 3, 2)]);
        let inherited = |subtask| {
            let state = &matched.states[&TaskId::new("out", subtask)].state.inner;
            inherited::Inherited::decode(state, "sink")
                .unwrap()
                .unwrap()
        };
        let subtasks = |i: inherited::Inherited| -> Vec<u32> {
            i.states.into_iter().map(|(s, _)| s).collect()
        };
        assert_eq!(subtasks(inherited(0)), [0, 2]);
        assert_eq!(subtasks(inherited(1)), [1]);
    }

    #[test]
    fn refuses_a_changed_parallelism_of_a_sink_whose_state_cannot_move() {
        let stdout = "type = \"stdout\"";
        let (meta, states) = checkpoint(&with_sink(stdout, 1), with_inner(b"not a stdout state"));
        let err = match_states(&meta, CHK1, &with_sink(stdout, 2), false, states)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("the parallelism of sink `out` changed from 1 to 2"),
            "{err}"
        );
        assert!(err.contains("set its parallelism back to 1"), "{err}");
    }

    #[test]
    fn a_generator_hands_its_records_on_at_another_parallelism() {
        let (meta, states) = checkpoint(&job_with("op", 2, 1, ""), |task| TaskState {
            inner: if task.vertex == "gen" {
                7u64.to_le_bytes().to_vec()
            } else {
                Vec::new()
            },
            ..TaskState::default()
        });
        let matched = match_states(&meta, CHK1, &job_with("op", 2, 2, ""), false, states).unwrap();
        assert_eq!(matched.rescaled, [("gen".to_string(), 1, 2)]);
        // Split 0 of 1 (all of them) went to subtask 0; subtask 1 has none.
        assert!(matched.states[&TaskId::new("gen", 0)].state.inner.len() > 8);
    }

    #[test]
    fn allows_a_changed_parallelism_of_a_stateless_operator() {
        let (meta, states) = checkpoint(&job("op", 2), with_inner(b""));
        let matched = match_states(&meta, CHK1, &job("op", 3), false, states).unwrap();
        assert!(!matched.states.keys().any(|t| t.vertex == "op"));
        assert!(matched.key_groups.is_empty());
    }

    #[test]
    fn an_operator_keeps_the_key_groups_of_its_state() {
        let keys = ["a", "b", "c"];
        let before = job_with("op", 2, 1, "max_parallelism = 8");
        let (meta, states) = checkpoint(&before, keyed(&before, &keys));
        // Not set in the job file: the state's key groups are kept.
        let matched = match_states(&meta, CHK1, &job("op", 3), false, states.clone()).unwrap();
        assert_eq!(matched.key_groups["op"], 8);
        assert_eq!(
            job("op", 3)
                .with_key_groups(&matched.key_groups)
                .vertex("op")
                .unwrap()
                .max_parallelism,
            8
        );
        // Set to another number: refused, naming both.
        let other = job_with("op", 2, 1, "max_parallelism = 16");
        let err = match_states(&meta, CHK1, &other, false, states.clone()).unwrap_err();
        assert!(
            matches!(
                &err,
                RestoreError::MaxParallelismChanged {
                    old: 8,
                    new: 16,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("set max_parallelism = 8"), "{err}");
        // Beyond the key groups: refused, saying how far it can go.
        let err = match_states(&meta, CHK1, &job("op", 9), false, states)
            .unwrap_err()
            .to_string();
        assert!(err.contains("can run at parallelism 1 to 8"), "{err}");
    }

    #[test]
    fn a_checkpoint_from_before_key_groups_has_one_per_subtask() {
        let keys = ["a", "b", "c", "d"];
        let before = job_with("op", 2, 1, "max_parallelism = 2");
        let (mut meta, states) = checkpoint(&before, keyed(&before, &keys));
        meta.max_parallelism.clear();
        let matched = match_states(&meta, CHK1, &job("op", 1), false, states.clone()).unwrap();
        assert_eq!(matched.key_groups["op"], 2);
        let err = match_states(&meta, CHK1, &job("op", 3), false, states)
            .unwrap_err()
            .to_string();
        assert!(err.contains("taken before key groups"), "{err}");
    }

    #[test]
    fn state_of_a_vertex_the_job_lost_needs_allow_non_restored_state() {
        let (meta, states) = checkpoint(&job("old", 1), with_inner(b"state"));
        let err = match_states(&meta, CHK1, &job("new", 1), false, states.clone()).unwrap_err();
        assert!(
            matches!(&err, RestoreError::UnknownVertex { vertex, .. } if vertex == "old"),
            "{err:?}"
        );
        let err = err.to_string();
        assert!(err.contains("holds state for `old`"), "{err}");
        assert!(err.contains("--allow-non-restored-state"), "{err}");
        let matched = match_states(&meta, CHK1, &job("new", 1), true, states).unwrap();
        assert!(matched.states.keys().all(|t| t.vertex != "old"));
        assert_eq!(matched.dropped, ["old"]);
    }
}
