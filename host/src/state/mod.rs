//! Host-kept task state: what a task keeps on the host between barriers, beside the state of
//! what it runs (a guest's snapshot or memory image, a source's position, a sink's files).
//!
//! Why a layer of its own: such state crosses the others. The guest reaches it through host
//! imports (`wasm/`), the task loop feeds and snapshots it (`dataflow/`), and a checkpoint
//! stores, restores and splits it by key group (`checkpoint/`). Kept here, below all three, each
//! kind of it is one module that every one of them reads, instead of a branch in each.
//!
//! A task's snapshot holds its host-kept state as **sections**, each tagged with its kind
//! ([`SectionTag`]), in the task state envelope (`checkpoint/task_state.rs`). Each kind of
//! section knows how to encode and decode itself and how to split itself by key group for a
//! new parallelism ([`split`]). Today there is one:
//! - [`time`]: the task's watermark and its inputs' or splits', and its guest's timers;
//! - [`keyed`]: the keyed state its guest keeps in an embedded store (`docs/ABI.md` §17),
//!   whose section is a [`keyed::snapshot::StoreSnapshot`] naming the store's files.
//!
//! A new kind is a module here, a tag, a field of [`HostState`] (what a processor keeps,
//! reached through the one `Processor::host_state` hook of the task loop), and an arm in
//! [`snapshot`], [`restore`] and [`split`].

pub mod keyed;
pub mod time;

use weir_abi::key_group::KeyGroups;

use self::keyed::StoreError;
use self::keyed::local::RestoredFile;
use self::keyed::section::{KeyedState, PendingStore};
use self::keyed::snapshot::{KeptFile, KeyedSection, StoreSnapshot};
use self::time::{GuestTime, TaskClock, TimeState};
use crate::ids::CheckpointId;

/// The kind of a section of a task's snapshot; on disk a `u16`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SectionTag {
    /// [`time::TimeState`].
    Time,
    /// [`keyed::snapshot::StoreSnapshot`].
    Keyed,
}

impl SectionTag {
    /// Every tag this build reads.
    pub const ALL: [SectionTag; 2] = [SectionTag::Time, SectionTag::Keyed];

    /// The tag's number on disk.
    pub fn code(self) -> u16 {
        match self {
            SectionTag::Time => 1,
            SectionTag::Keyed => 2,
        }
    }

    /// The tag numbered `code`, if this build knows it.
    pub fn from_code(code: u16) -> Option<SectionTag> {
        Self::ALL.into_iter().find(|tag| tag.code() == code)
    }

    /// The section's name, for messages.
    pub fn name(self) -> &'static str {
        match self {
            SectionTag::Time => "time",
            SectionTag::Keyed => "keyed",
        }
    }
}

impl std::fmt::Display for SectionTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One section of a task's snapshot: its kind and its encoded bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// What kind of host-kept state the bytes hold.
    pub tag: SectionTag,
    /// The section, encoded by its kind's module.
    pub bytes: Vec<u8>,
}

/// Why host-kept state cannot be restored or split. Each message says what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// A section's bytes end early or hold what its kind does not write.
    #[error(
        "its {section} section is cut short or malformed: the state file was written by \
         another build of Weir, or damaged; restore an earlier checkpoint"
    )]
    Malformed {
        /// The section.
        section: SectionTag,
    },
    /// A timer's key is shorter than the prefix the guest declared.
    #[error(
        "subtask {subtask} has a timer whose key is {len} bytes long, shorter than the \
         timer-key prefix of {prefix} bytes its state declares: the guest's timers do not \
         follow its own layout; keep its parallelism"
    )]
    TimerKey {
        /// The old subtask.
        subtask: u32,
        /// The timer key's length.
        len: usize,
        /// The declared prefix.
        prefix: u8,
    },
    /// An input of an old subtask had ended, and the subtask had not finished.
    #[error(
        "an input of subtask {subtask} had ended when the checkpoint was taken, and an ended \
         input sends nothing after a restore: restore this checkpoint at the same parallelism"
    )]
    EndedInput {
        /// The old subtask.
        subtask: u32,
    },
    /// The state holds timers, and the task has no guest to fire them.
    #[error(
        "the state holds {timers} timers, but this task has no guest to fire them: the \
         checkpoint belongs to another job graph; restore it with the job that wrote it"
    )]
    TimersWithoutGuest {
        /// How many timers the state holds.
        timers: usize,
    },
    /// The state holds keyed state, and the task keeps none on the host.
    #[error(
        "the state holds keyed state kept on the host, but this task's operator does not use \
         it (it does not import `state_get`): the checkpoint belongs to another version of the \
         operator; restore it with the operator that wrote it"
    )]
    KeyedWithoutStore,
    /// The keyed state cannot be restored.
    #[error("its keyed state cannot be restored: {0}")]
    Store(String),
}

/// What a processor keeps on the host for the guest it runs, beside the guest's own state.
/// The guest's store owns it (the host imports change it); the task loop reaches it through
/// the processor's one `host_state` hook to snapshot and restore it.
#[derive(Debug, Default)]
pub struct HostState {
    /// The watermark as the guest reads it, and its timers.
    pub time: GuestTime,
    /// The guest's keyed state, when its operator keeps some on the host.
    pub keyed: Option<KeyedState>,
}

/// The sections of a task's snapshot taken whole: its clock, if it keeps one (every
/// processing task does; a source with a watermark strategy), with the timers of `host`, the
/// state its processor keeps on the host (none for a source or a sink). The keyed state's
/// section is made off the task's thread ([`snapshot_store`]).
pub fn snapshot(clock: Option<&TaskClock>, host: Option<&HostState>) -> Vec<Section> {
    let mut sections = Vec::new();
    if let Some(clock) = clock {
        sections.push(Section {
            tag: SectionTag::Time,
            bytes: TimeState::encode(clock, host.map(|h| &h.time)),
        });
    }
    sections
}

/// The synchronous half of checkpoint `id` of `host`'s keyed state, if it keeps some
/// (`self_contained` for a savepoint): the store's files, which [`PendingStore::finish`] then
/// stores off the task's thread and makes the [`SectionTag::Keyed`] section of.
pub fn snapshot_store(
    host: Option<&mut HostState>,
    id: CheckpointId,
    self_contained: bool,
) -> Result<Option<PendingStore>, StoreError> {
    host.and_then(|h| h.keyed.as_mut())
        .map(|keyed| keyed.snapshot(id, self_contained))
        .transpose()
}

/// The section of kind [`SectionTag::Keyed`] of subtask `subtask` whose store's checkpoint
/// `snapshot` describes.
pub fn keyed_section(subtask: u32, snapshot: StoreSnapshot) -> Section {
    Section {
        tag: SectionTag::Keyed,
        bytes: KeyedSection::of(subtask, snapshot).encode(),
    }
}

/// A kept file of the given (old) subtask's store, verified: its bytes or a local copy.
pub type FetchShared<'a> = &'a mut dyn FnMut(u32, &KeptFile) -> Result<RestoredFile, StoreError>;

/// How a restore reaches the files a keyed section keeps as shared files, and whether later
/// checkpoints may name them again.
pub struct SharedFiles<'a> {
    /// Each kept file.
    pub fetch: FetchShared<'a>,
    /// Whether the files belong to this job's own checkpoints.
    pub resumable: bool,
}

/// Restores what `sections` hold: `host` takes its part (for a task whose processor keeps
/// host state), and the task's clock is returned, if a section holds one. A state written
/// before host-kept state existed has no sections, and restores with no watermark and no
/// timers.
pub fn restore(
    sections: &[Section],
    mut host: Option<&mut HostState>,
    mut shared: Option<SharedFiles<'_>>,
) -> Result<Option<TaskClock>, StateError> {
    let mut clock = None;
    for section in sections {
        match section.tag {
            SectionTag::Time => {
                let time = TimeState::decode(&section.bytes)?;
                clock = Some(time.clock());
                match host.as_deref_mut() {
                    Some(host) => host.time = time.into_guest(),
                    None if time.has_timers() => {
                        return Err(StateError::TimersWithoutGuest {
                            timers: time.timers.iter().map(weir_abi::Timers::len).sum(),
                        });
                    }
                    None => {}
                }
            }
            SectionTag::Keyed => {
                let keyed_section =
                    KeyedSection::decode(&section.bytes).ok_or(StateError::Malformed {
                        section: section.tag,
                    })?;
                let (Some(keyed), Some(shared)) = (
                    host.as_deref_mut().and_then(|h| h.keyed.as_mut()),
                    shared.as_mut(),
                ) else {
                    return Err(StateError::KeyedWithoutStore);
                };
                keyed
                    .restore(&keyed_section, shared.resumable, &mut *shared.fetch)
                    .map_err(|e| StateError::Store(e.to_string()))?;
            }
        }
    }
    Ok(clock)
}

/// The first section of kind `tag` in `sections`.
pub fn find(sections: &[Section], tag: SectionTag) -> Option<&[u8]> {
    sections
        .iter()
        .find(|s| s.tag == tag)
        .map(|s| s.bytes.as_slice())
}

/// The time section of `sections`, decoded, if there is one.
pub fn time_of(sections: &[Section]) -> Result<Option<TimeState>, StateError> {
    find(sections, SectionTag::Time)
        .map(TimeState::decode)
        .transpose()
}

/// How a vertex's host-kept state moves to a new parallelism: the key groups of its new
/// subtasks, how many leading bytes of a timer's key come before the key that places it
/// (`docs/ABI.md` §16; 0 for a task without a guest), and whether the old subtasks had
/// finished.
#[derive(Debug, Clone, Copy)]
pub struct Split {
    /// The new subtasks' key groups.
    pub groups: KeyGroups,
    /// The guest's timer-key prefix.
    pub timer_key_prefix: u8,
    /// Whether every old subtask had finished (its inputs ended, its last output written):
    /// then ended inputs are what is expected. Otherwise an ended input is refused, since the
    /// new subtasks' inputs would never end again.
    pub finished: bool,
}

/// The sections of a vertex's new subtasks from those of its old ones (one list per old
/// subtask, in order), each kind split by its own rule. A kind that some old subtask holds
/// and another does not is split as if the other held its empty form (for time: no watermark,
/// no timers).
pub fn split(old: &[&[Section]], how: Split) -> Result<Vec<Vec<Section>>, StateError> {
    let mut new: Vec<Vec<Section>> = vec![Vec::new(); how.groups.parallelism() as usize];
    for tag in SectionTag::ALL {
        if old.iter().all(|sections| find(sections, tag).is_none()) {
            continue;
        }
        match tag {
            SectionTag::Time => {
                let times = old
                    .iter()
                    .map(|sections| {
                        Ok(time_of(sections)?.unwrap_or(TimeState {
                            watermark: i64::MIN,
                            ..TimeState::default()
                        }))
                    })
                    .collect::<Result<Vec<_>, StateError>>()?;
                if !how.finished
                    && let Some((subtask, _)) = (0..).zip(&times).find(|(_, t)| t.has_ended_input())
                {
                    return Err(StateError::EndedInput { subtask });
                }
                let split = TimeState::split(&times, how.timer_key_prefix, how.groups)?;
                for (sections, time) in new.iter_mut().zip(split) {
                    sections.push(Section {
                        tag,
                        bytes: time.to_bytes(),
                    });
                }
            }
            SectionTag::Keyed => {
                // Each new subtask takes the parts of every old subtask that owned some of its
                // key groups; its restore keeps only its own groups of each.
                let max = how.groups.max_parallelism();
                let old_groups = u32::try_from(old.len())
                    .ok()
                    .and_then(|p| KeyGroups::new(max, p))
                    .ok_or(StateError::Malformed { section: tag })?;
                let olds = old
                    .iter()
                    .map(|sections| match find(sections, tag) {
                        Some(bytes) => KeyedSection::decode(bytes)
                            .ok_or(StateError::Malformed { section: tag }),
                        None => Ok(KeyedSection::default()),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                for (j, sections) in (0..).zip(new.iter_mut()) {
                    let wanted = how.groups.range(j);
                    let mut parts = KeyedSection::default();
                    for (i, old) in (0..).zip(&olds) {
                        let had = old_groups.range(i);
                        if had.start < wanted.end && wanted.start < had.end {
                            parts.parts.extend(old.parts.iter().cloned());
                        }
                    }
                    sections.push(Section {
                        tag,
                        bytes: parts.encode(),
                    });
                }
            }
        }
    }
    Ok(new)
}
