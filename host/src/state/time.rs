//! Time, the first section of host-kept task state: a task's watermark and its inputs' (or,
//! for a source, its splits'), and the timers its guest set (`docs/ABI.md` §15).
//!
//! Live, the parts sit where they are used: the task loop keeps its clock
//! (`dataflow/watermark.rs`), the guest's store keeps [`GuestTime`] (the watermark as the guest
//! reads it, and its timers), which the timer imports change. At a barrier they meet here as a
//! [`TimeState`]: encoded into the task's snapshot, decoded on restore, and split by key group
//! when the task's vertex is rescaled. The timers are the host's and not the guest's, so they
//! are the same whether the guest's state is its own snapshot or an image of its memory.

use weir_abi::key_group::{KeyGroups, key_group};
use weir_abi::time::NO_WATERMARK;
use weir_abi::wire::{Reader, put_len, put_prefixed};
use weir_abi::{TimeDomain, Timers};

use super::{SectionTag, StateError};

/// The time of one guest instance: its task's watermark, as the guest reads it, and the timers
/// the host keeps for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestTime {
    /// What `current_time(0)` returns: [`NO_WATERMARK`] until the first watermark.
    pub watermark: i64,
    /// The timers, indexed by [`TimeDomain::code`].
    pub timers: [Timers; 2],
}

impl Default for GuestTime {
    fn default() -> Self {
        GuestTime {
            watermark: NO_WATERMARK,
            timers: [Timers::new(), Timers::new()],
        }
    }
}

impl GuestTime {
    /// The timers of `domain`.
    pub fn timers(&self, domain: TimeDomain) -> &Timers {
        &self.timers[domain.code() as usize]
    }

    /// The timers of `domain`, to change.
    pub(crate) fn timers_mut(&mut self, domain: TimeDomain) -> &mut Timers {
        &mut self.timers[domain.code() as usize]
    }

    /// What every timer counts against the timer limit, over both domains.
    pub(crate) fn timer_bytes(&self) -> usize {
        self.timers.iter().map(Timers::bytes).sum()
    }

    /// How many timers are set, over both domains.
    pub fn pending(&self) -> usize {
        self.timers.iter().map(Timers::len).sum()
    }
}

/// What a task loop keeps of time itself, apart from any guest: its watermark and its inputs'
/// clocks (a processing task), or the watermark it sent and its splits' (a source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskClock {
    /// The task's watermark; for a source, the highest it sent.
    pub watermark: i64,
    /// A processing task's inputs, in input order.
    pub inputs: Vec<InputTime>,
    /// A source's splits.
    pub splits: Vec<SplitTime>,
}

/// One input's watermark in a [`TimeState`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputTime {
    /// The highest watermark the input sent (`i64::MIN` before the first).
    pub watermark: i64,
    /// The input is idle.
    pub idle: bool,
    /// The input ended.
    pub ended: bool,
}

/// One split of a source in a [`TimeState`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitTime {
    /// How the source names it (`topic/partition` for Kafka).
    pub name: String,
    /// The largest timestamp read from it (`i64::MIN` before the first).
    pub max_timestamp: i64,
    /// It was idle: it had read nothing for the source's `idle_timeout`.
    pub idle: bool,
}

/// A task's part of event time at a checkpoint: the section [`SectionTag::Time`] holds.
///
/// ```text
/// i64      the task's watermark (for a source: the highest it sent)
/// u32 n    then n inputs:   i64 watermark, u8 flags (bit 0 idle, bit 1 ended)
/// u32 m    then m splits:   u32 length + the split's name, i64 its largest timestamp
/// twice, event time then processing time:
///   u32 k  then k timers:   i64 timestamp, u32 length + the key
/// u32 m    then m u8 split flags, one per split in order (bit 0 idle)
/// ```
/// Every number little-endian. The split flags came last, later than the rest: a section
/// without them (written before) restores every split active.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TimeState {
    /// The task's watermark; for a source, the highest it sent.
    pub watermark: i64,
    /// A processing task's inputs, in input order.
    pub inputs: Vec<InputTime>,
    /// A source's splits: their names, largest timestamps and idleness.
    pub splits: Vec<SplitTime>,
    /// The guest's timers, event time then processing time.
    pub timers: [Timers; 2],
}

impl TimeState {
    /// Encodes the time section of a task with `clock` whose guest (if any) keeps `guest`;
    /// the timers are borrowed, as they may be many.
    pub fn encode(clock: &TaskClock, guest: Option<&GuestTime>) -> Vec<u8> {
        let none = [Timers::new(), Timers::new()];
        let timers = guest.map_or(&none, |g| &g.timers);
        encode(clock.watermark, &clock.inputs, &clock.splits, timers)
    }

    /// Encodes this section.
    pub fn to_bytes(&self) -> Vec<u8> {
        encode(self.watermark, &self.inputs, &self.splits, &self.timers)
    }

    /// Decodes a time section, or says where it is cut short or malformed.
    pub fn decode(bytes: &[u8]) -> Result<TimeState, StateError> {
        let malformed = || StateError::Malformed {
            section: SectionTag::Time,
        };
        let mut r = Reader::new(bytes);
        let watermark = r.i64().map_err(|_| malformed())?;
        let mut inputs = Vec::new();
        for _ in 0..r.u32().map_err(|_| malformed())? {
            let watermark = r.i64().map_err(|_| malformed())?;
            let flags = r.u8().map_err(|_| malformed())?;
            inputs.push(InputTime {
                watermark,
                idle: flags & 1 != 0,
                ended: flags & 2 != 0,
            });
        }
        let mut splits = Vec::new();
        for _ in 0..r.u32().map_err(|_| malformed())? {
            let name = r.prefixed().map_err(|_| malformed())?;
            let name = String::from_utf8(name.to_vec()).map_err(|_| malformed())?;
            splits.push(SplitTime {
                name,
                max_timestamp: r.i64().map_err(|_| malformed())?,
                idle: false,
            });
        }
        let mut timers = [Timers::new(), Timers::new()];
        for domain in &mut timers {
            for _ in 0..r.u32().map_err(|_| malformed())? {
                let timestamp = r.i64().map_err(|_| malformed())?;
                domain.set(timestamp, r.prefixed().map_err(|_| malformed())?);
            }
        }
        if r.remaining() > 0 {
            if r.u32().map_err(|_| malformed())? as usize != splits.len() {
                return Err(malformed());
            }
            for split in &mut splits {
                split.idle = r.u8().map_err(|_| malformed())? & 1 != 0;
            }
        }
        if r.remaining() > 0 {
            return Err(malformed());
        }
        Ok(TimeState {
            watermark,
            inputs,
            splits,
            timers,
        })
    }

    /// The task's own clock in this section.
    pub fn clock(&self) -> TaskClock {
        TaskClock {
            watermark: self.watermark,
            inputs: self.inputs.clone(),
            splits: self.splits.clone(),
        }
    }

    /// What the guest takes back of this section: the watermark, as it reads it, and the
    /// timers.
    pub fn into_guest(self) -> GuestTime {
        GuestTime {
            watermark: self.watermark,
            timers: self.timers,
        }
    }

    /// The time sections of a vertex's new subtasks (those of `groups`) from those of its old
    /// ones, in order: each takes the timers of its key groups (a timer's key read after
    /// `timer_key_prefix` bytes, `docs/ABI.md` §16), and the smallest watermark of the old
    /// subtasks (a watermark never moves back, so the smallest is the one every new subtask has
    /// surely reached; timers already fired are gone, so none fires twice). Inputs keep their
    /// clocks when every old subtask had the same inputs, each input taking its smallest
    /// watermark; otherwise the new subtasks start with none. A source's splits are not
    /// carried: which new subtask reads a split is the connector's business, and a split a
    /// subtask was given but never reads would hold its watermark back. Each new subtask learns
    /// its splits again as it reads them, from the watermark it was restored with, which never
    /// moves back.
    pub fn split(
        old: &[TimeState],
        timer_key_prefix: u8,
        groups: KeyGroups,
    ) -> Result<Vec<TimeState>, StateError> {
        let watermark = old.iter().map(|t| t.watermark).min().unwrap_or(i64::MIN);
        let count = old.first().map_or(0, |t| t.inputs.len());
        let inputs: Vec<InputTime> = if old.iter().all(|t| t.inputs.len() == count) {
            (0..count)
                .map(|i| InputTime {
                    watermark: old
                        .iter()
                        .map(|t| t.inputs[i].watermark)
                        .min()
                        .unwrap_or(i64::MIN),
                    idle: old.iter().all(|t| t.inputs[i].idle),
                    ended: old.iter().all(|t| t.inputs[i].ended),
                })
                .collect()
        } else {
            Vec::new()
        };
        let mut new: Vec<TimeState> = (0..groups.parallelism())
            .map(|_| TimeState {
                watermark,
                inputs: inputs.clone(),
                splits: Vec::new(),
                timers: [Timers::new(), Timers::new()],
            })
            .collect();
        let prefix_len = usize::from(timer_key_prefix);
        for (subtask, time) in (0..).zip(old) {
            for (domain, timers) in time.timers.iter().enumerate() {
                for (timestamp, key) in timers.iter() {
                    let placed = key.get(prefix_len..).ok_or(StateError::TimerKey {
                        subtask,
                        len: key.len(),
                        prefix: timer_key_prefix,
                    })?;
                    let owner = groups.owner(key_group(placed, groups.max_parallelism()));
                    new[owner as usize].timers[domain].set(timestamp, key);
                }
            }
        }
        Ok(new)
    }

    /// Whether any timer is set.
    pub fn has_timers(&self) -> bool {
        self.timers.iter().any(|t| !t.is_empty())
    }

    /// Whether an input had ended.
    pub fn has_ended_input(&self) -> bool {
        self.inputs.iter().any(|i| i.ended)
    }
}

fn encode(
    watermark: i64,
    inputs: &[InputTime],
    splits: &[SplitTime],
    timers: &[Timers; 2],
) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&watermark.to_le_bytes());
    put_len(&mut out, inputs.len());
    for input in inputs {
        out.extend_from_slice(&input.watermark.to_le_bytes());
        out.push(u8::from(input.idle) | (u8::from(input.ended) << 1));
    }
    put_len(&mut out, splits.len());
    for split in splits {
        put_prefixed(&mut out, split.name.as_bytes());
        out.extend_from_slice(&split.max_timestamp.to_le_bytes());
    }
    for domain in timers {
        put_len(&mut out, domain.len());
        for (timestamp, key) in domain.iter() {
            out.extend_from_slice(&timestamp.to_le_bytes());
            put_prefixed(&mut out, key);
        }
    }
    put_len(&mut out, splits.len());
    out.extend(splits.iter().map(|split| u8::from(split.idle)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_section_round_trips_and_refuses_a_cut() {
        let mut timers = [Timers::new(), Timers::new()];
        timers[0].set(999, b"k1");
        timers[0].set(1999, b"");
        timers[1].set(1_700_000_000_000, b"session");
        let clock = TaskClock {
            watermark: 499,
            inputs: vec![
                InputTime {
                    watermark: 500,
                    idle: true,
                    ended: false,
                },
                InputTime {
                    watermark: i64::MIN,
                    idle: false,
                    ended: true,
                },
            ],
            splits: vec![
                SplitTime {
                    name: "events/0".to_string(),
                    max_timestamp: 1_234,
                    idle: false,
                },
                SplitTime {
                    name: "events/1".to_string(),
                    max_timestamp: i64::MIN,
                    idle: true,
                },
            ],
        };
        let guest = GuestTime {
            watermark: 499,
            timers: timers.clone(),
        };
        let section = TimeState::encode(&clock, Some(&guest));
        let decoded = TimeState::decode(&section).unwrap();
        assert_eq!(decoded.clock(), clock);
        assert_eq!(decoded.to_bytes(), section);
        assert_eq!(decoded.clone().into_guest(), guest);
        // Cut anywhere, or with a byte too many, the section is refused rather than misread —
        // but for where the split flags begin: a section written before they existed ends
        // there, and restores every split active.
        let before_flags = section.len() - 4 - clock.splits.len();
        for cut in (0..section.len()).filter(|&cut| cut != before_flags) {
            assert_eq!(
                TimeState::decode(&section[..cut]),
                Err(StateError::Malformed {
                    section: SectionTag::Time
                }),
                "cut at {cut}"
            );
        }
        let older = TimeState::decode(&section[..before_flags]).unwrap();
        assert!(older.splits.iter().all(|split| !split.idle), "{older:?}");
        assert_eq!(older.splits[1].max_timestamp, i64::MIN);
        let mut longer = section.clone();
        longer.push(0);
        assert!(TimeState::decode(&longer).is_err());
        // A task without a guest keeps no timers.
        let alone = TimeState::decode(&TimeState::encode(&clock, None)).unwrap();
        assert!(!alone.has_timers());
    }
}
