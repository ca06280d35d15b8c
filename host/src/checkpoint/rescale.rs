//! Splitting and merging one vertex's task states when its parallelism changes.
//!
//! Why a module of its own: a rescale rebuilds every part of a task's state for a new set of
//! subtasks, and each part moves by its own rule — an operator's guest state by the rescalable
//! layout ([`split_guest_states`]: keyed items by key group, lists split, unions to all), a
//! connector's state by the connector's rule (given by the caller), the host-kept sections by
//! the state layer's ([`crate::state::split`]: timers by the key group of their key, the
//! watermark and the inputs' clocks conservatively). It is pure: old states in, new states out, tested without a
//! disk or a guest. What cannot be split — an image of a guest's memory, a state in the guest's
//! own layout, a checkpoint taken while the vertex was finishing — is refused, saying why and
//! what to do.

use weir_abi::key_group::KeyGroups;
use weir_abi::rescalable::{self, Rescaled};

use super::task_state::TaskState;
use crate::state::{self, Section, Split, StateError};
use crate::wasm::image::format::IMAGE_MAGIC;

/// Why an operator's states cannot be rescaled. Each message ends with what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RescaleError {
    /// The operator is checkpointed as an image of its memory.
    #[error(
        "it is checkpointed as an image of its memory (checkpoint = \"image\"), which cannot be \
         split by key: give the operator snapshot exports that write the rescalable layout \
         (docs/ABI.md §16; the Rust SDK's Keyed state does), or keep its parallelism"
    )]
    Image,
    /// The guest's state cannot be split (opaque, malformed, or inconsistent).
    #[error(
        "{0}; an operator rescales when its snapshots are in that layout (the Rust SDK writes \
         it for Keyed, ListState and UnionState fields): otherwise keep its parallelism"
    )]
    Guest(rescalable::RescaleError),
    /// Some subtasks had finished their input at the checkpoint and others had not.
    #[error(
        "it was finishing when the checkpoint was taken ({finished} of {subtasks} subtasks \
         had seen the end of their input): restore this checkpoint at the same parallelism"
    )]
    Finishing {
        /// How many old subtasks had finished.
        finished: usize,
        /// How many there were.
        subtasks: usize,
    },
    /// A connector's state cannot be split: the connector says why.
    #[error("{0}")]
    Connector(String),
    /// The host-kept state (the sections, `state/`) cannot be split: the state layer says why.
    #[error(transparent)]
    State(#[from] StateError),
}

/// The inner states of a vertex's new subtasks, one each in order, and how many leading bytes
/// of a timer's key come before the key that places it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InnerStates {
    /// One per new subtask.
    pub states: Vec<Vec<u8>>,
    /// The timer-key prefix (docs/ABI.md §16); 0 for a connector, which sets no timers.
    pub timer_key_prefix: u8,
}

/// An operator's guest states, one per subtask of `old`, split and merged for `new` by the
/// rescalable layout; an image is refused.
pub fn split_guest_states(
    inners: &[&[u8]],
    old: KeyGroups,
    new: KeyGroups,
) -> Result<InnerStates, RescaleError> {
    if inners.iter().any(|s| s.starts_with(&IMAGE_MAGIC)) {
        return Err(RescaleError::Image);
    }
    let Rescaled {
        states,
        timer_key_prefix,
    } = rescalable::rescale(inners, old, new).map_err(RescaleError::Guest)?;
    Ok(InnerStates {
        states,
        timer_key_prefix,
    })
}

/// The states of a vertex's subtasks (one per old subtask, in order; a task the checkpoint holds
/// nothing of is the default, empty state), split and merged for the subtasks of `new_groups`:
/// the inner states by `split_inner` (for an operator, [`split_guest_states`]; for a connector,
/// its own rule), the rest here.
pub fn rescale_states(
    old: &[TaskState],
    new_groups: KeyGroups,
    split_inner: impl FnOnce(&[&[u8]]) -> Result<InnerStates, RescaleError>,
) -> Result<Vec<TaskState>, RescaleError> {
    let finished = old.iter().filter(|s| s.finished).count();
    if finished != 0 && finished != old.len() {
        return Err(RescaleError::Finishing {
            finished,
            subtasks: old.len(),
        });
    }
    let inners: Vec<&[u8]> = old.iter().map(|s| s.inner.as_slice()).collect();
    let InnerStates {
        states,
        timer_key_prefix,
    } = split_inner(&inners)?;
    let sections: Vec<&[Section]> = old.iter().map(|s| s.sections.as_slice()).collect();
    let new_sections = state::split(
        &sections,
        Split {
            groups: new_groups,
            timer_key_prefix,
            finished: finished != 0,
        },
    )?;
    Ok(states
        .into_iter()
        .zip(new_sections)
        .map(|(inner, sections)| TaskState {
            finished: finished != 0,
            sections,
            inner,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use weir_abi::rescalable::Writer;

    use weir_abi::Timers;

    use super::*;
    use crate::state::time::{GuestTime, InputTime, TaskClock};

    fn groups(p: u32) -> KeyGroups {
        KeyGroups::new(16, p).unwrap()
    }

    /// An operator's states rescaled from `old` to `new` key groups.
    fn guest(
        states: &[TaskState],
        old: KeyGroups,
        new: KeyGroups,
    ) -> Result<Vec<TaskState>, RescaleError> {
        rescale_states(states, new, |inners| split_guest_states(inners, old, new))
    }

    /// The state of one old subtask of `groups`: every key it owns of `keys` keyed, a union
    /// item, and an event-time timer per key, its key behind a one-byte prefix.
    fn state(keys: &[&str], groups: KeyGroups, subtask: u32, watermark: i64) -> TaskState {
        let mut writer = Writer::with_capacity(1, 0);
        writer.union(0, b"config");
        let mut timers = [Timers::new(), Timers::new()];
        for key in keys
            .iter()
            .filter(|k| groups.subtask(k.as_bytes()) == subtask)
        {
            writer.keyed(1, key.as_bytes(), b"v");
            timers[0].set(100, &[&[7u8][..], key.as_bytes()].concat());
        }
        let input = InputTime {
            watermark,
            idle: false,
            ended: false,
        };
        let clock = TaskClock {
            watermark,
            inputs: vec![input],
            splits: Vec::new(),
        };
        TaskState {
            finished: false,
            sections: state::snapshot(Some(&clock), Some(&host(watermark, timers))),
            inner: writer.finish(),
        }
    }

    fn host(watermark: i64, timers: [Timers; 2]) -> crate::state::HostState {
        crate::state::HostState {
            time: GuestTime { watermark, timers },
            keyed: None,
        }
    }

    const KEYS: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

    #[test]
    fn keys_and_their_timers_move_together_and_the_smallest_watermark_is_kept() {
        let old: Vec<TaskState> = (0..2)
            .map(|s| state(&KEYS, groups(2), s, 50 + i64::from(s)))
            .collect();
        let new = guest(&old, groups(2), groups(3)).unwrap();
        assert_eq!(new.len(), 3);
        let mut seen = Vec::new();
        for (subtask, state) in (0..).zip(&new) {
            let inner = rescalable::RescalableState::decode(&state.inner)
                .unwrap()
                .unwrap();
            let keys: Vec<&[u8]> = inner
                .items()
                .filter(|i| i.kind == rescalable::ItemKind::Keyed)
                .map(|i| i.key)
                .collect();
            let time = state::time_of(&state.sections).unwrap().unwrap();
            assert_eq!(time.watermark, 50);
            assert_eq!(time.inputs[0].watermark, 50);
            let timer_keys: Vec<&[u8]> = time.timers[0].iter().map(|(_, k)| &k[1..]).collect();
            let mut sorted = keys.clone();
            sorted.sort();
            assert_eq!(timer_keys, sorted, "subtask {subtask}");
            for key in keys {
                assert_eq!(groups(3).subtask(key), subtask);
                seen.push(key.to_vec());
            }
        }
        seen.sort();
        assert_eq!(seen, KEYS.map(|k| k.as_bytes().to_vec()));
    }

    #[test]
    fn an_input_ended_before_the_task_finished_is_refused_and_a_finished_task_splits() {
        let ended = |mut state: TaskState| {
            let mut time = state::time_of(&state.sections).unwrap().unwrap();
            time.inputs[0].ended = true;
            state.sections = vec![Section {
                tag: state::SectionTag::Time,
                bytes: time.to_bytes(),
            }];
            state
        };
        let old = vec![
            state(&KEYS, groups(2), 0, 50),
            ended(state(&KEYS, groups(2), 1, 50)),
        ];
        let err = guest(&old, groups(2), groups(3)).unwrap_err();
        assert_eq!(
            err,
            RescaleError::State(StateError::EndedInput { subtask: 1 })
        );
        assert!(
            err.to_string()
                .contains("restore this checkpoint at the same parallelism"),
            "{err}"
        );
        let finished: Vec<TaskState> = old
            .into_iter()
            .map(|s| TaskState {
                finished: true,
                ..ended(s)
            })
            .collect();
        assert_eq!(guest(&finished, groups(2), groups(3)).unwrap().len(), 3);
    }

    #[test]
    fn an_image_or_an_opaque_state_is_refused_saying_what_to_do() {
        let image = TaskState {
            inner: [&IMAGE_MAGIC[..], b"..."].concat(),
            ..TaskState::default()
        };
        let err = guest(&[image.clone(), image], groups(2), groups(1)).unwrap_err();
        assert_eq!(err, RescaleError::Image);
        assert!(err.to_string().contains("keep its parallelism"), "{err}");
        let opaque = TaskState {
            inner: b"bincode".to_vec(),
            ..TaskState::default()
        };
        let err = guest(&[TaskState::default(), opaque], groups(2), groups(3))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("subtask 1 is not in the rescalable layout"),
            "{err}"
        );
    }

    #[test]
    fn a_checkpoint_taken_while_finishing_is_refused() {
        let done = TaskState {
            finished: true,
            ..TaskState::default()
        };
        let err = guest(&[done, TaskState::default()], groups(2), groups(3)).unwrap_err();
        assert_eq!(
            err,
            RescaleError::Finishing {
                finished: 1,
                subtasks: 2
            }
        );
    }

    #[test]
    fn empty_states_rescale_to_empty_states() {
        let new = guest(&[TaskState::default()], groups(1), groups(4)).unwrap();
        assert_eq!(new, vec![TaskState::default(); 4]);
    }

    #[test]
    fn a_timer_key_shorter_than_the_prefix_is_refused() {
        let mut old = state(&[], groups(1), 0, 0);
        let mut timers = [Timers::new(), Timers::new()];
        timers[1].set(5, b"");
        let clock = TaskClock {
            watermark: 0,
            inputs: Vec::new(),
            splits: Vec::new(),
        };
        old.sections = state::snapshot(Some(&clock), Some(&host(0, timers)));
        let err = guest(&[old], groups(1), groups(2)).unwrap_err();
        assert_eq!(
            err,
            RescaleError::State(StateError::TimerKey {
                subtask: 0,
                len: 0,
                prefix: 1
            })
        );
    }
}

#[cfg(test)]
mod source_tests {
    use super::*;
    use crate::state::time::{SplitTime, TaskClock};

    #[test]
    fn a_sources_splits_start_again_from_the_smallest_watermark() {
        let state = |splits: &[(&str, i64)], watermark| TaskState {
            finished: false,
            sections: state::snapshot(
                Some(&TaskClock {
                    watermark,
                    inputs: Vec::new(),
                    splits: splits
                        .iter()
                        .map(|(n, t)| SplitTime {
                            name: n.to_string(),
                            max_timestamp: *t,
                            idle: false,
                        })
                        .collect(),
                }),
                None,
            ),
            inner: b"position".to_vec(),
        };
        let old = [
            state(&[("t/0", 10), ("t/1", 7)], 5),
            state(&[("t/1", 9)], 3),
        ];
        let new = rescale_states(&old, KeyGroups::new(8, 3).unwrap(), |inners| {
            Ok(InnerStates {
                states: vec![inners.concat(); 3],
                timer_key_prefix: 0,
            })
        })
        .unwrap();
        for state in &new {
            let time = state::time_of(&state.sections).unwrap().unwrap();
            assert_eq!(time.watermark, 3);
            assert_eq!(time.splits, []);
            assert_eq!(state.inner, b"positionposition");
        }
    }
}
