//! The rescalable state layout: a guest snapshot the host can split and merge by key group when
//! an operator's parallelism changes (`docs/ABI.md` §16).
//!
//! A snapshot is opaque bytes to the host — unless it starts with [`MAGIC`]. Then it is a
//! sequence of **items**, each tagged with what happens to it when the operator is rescaled:
//!
//! - a **keyed** item belongs to a record key; it goes to the new subtask that owns the key's
//!   [key group](crate::key_group) (Flink's keyed state);
//! - a **list** item is operator state split among the new subtasks: each new subtask gets a
//!   contiguous share of every list (Flink's even-split list state);
//! - a **union** item goes to every new subtask, which gets the union items of all the old
//!   ones (Flink's union list state).
//!
//! Every item carries a state id, the guest's name for the map or list it belongs to; the host
//! keeps it and never reads it. At the same parallelism the bytes go back to the guest as they
//! came.
//!
//! # Byte layout (version 1)
//!
//! ```text
//! offset  size  field
//! 0       8     magic "\xFFRESCALE"
//! 8       1     layout version: 1
//! 9       1     timer-key prefix P: a timer's key group is its key's, bytes P.. of it
//! 10      …     items to the end, each:
//!                 u8      kind: 1 keyed, 2 list, 3 union
//!                 varint  state id
//!                 (keyed) varint key length, the key
//!                 varint  value length, the value
//! ```
//!
//! A varint is an unsigned LEB128 number of at most 5 bytes that fits in 32 bits. One
//! implementation serves the host (which splits) and the Rust SDK (which writes and reads, and
//! whose harness splits with [`rescale`]), so the two cannot drift.

use core::fmt;

use crate::key_group::{KeyGroups, key_group};

/// The first bytes of a rescalable state. `0xFF` first: no bincode value begins with it, so a
/// serde snapshot of the Rust SDK is never mistaken for one.
pub const MAGIC: [u8; 8] = *b"\xffRESCALE";

/// The layout version this crate writes and reads.
pub const VERSION: u8 = 1;

/// The header's length: magic, version, timer-key prefix.
const HEADER: usize = MAGIC.len() + 2;

/// What happens to an item when the operator is rescaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ItemKind {
    /// It goes with its key's key group.
    Keyed = 1,
    /// Its list is split among the new subtasks.
    List = 2,
    /// Every new subtask gets it.
    Union = 3,
}

/// One item of a rescalable state, borrowed from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item<'a> {
    /// What happens to it on a rescale.
    pub kind: ItemKind,
    /// The guest's id of the state it belongs to.
    pub state: u32,
    /// Its key: empty unless the item is keyed (a keyed item may have the empty key too).
    pub key: &'a [u8],
    /// Its value.
    pub value: &'a [u8],
}

/// Where one item of a rescalable state lies in the bytes given to
/// [`RescalableState::decode`]: for a reader that keeps the bytes and takes items later.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ItemSpan {
    /// What happens to it on a rescale.
    pub kind: ItemKind,
    /// The guest's id of the state it belongs to.
    pub state: u32,
    /// Its key's bytes (empty unless keyed).
    pub key: core::ops::Range<usize>,
    /// Its value's bytes.
    pub value: core::ops::Range<usize>,
}

/// Writes a rescalable state.
#[derive(Debug, Clone)]
pub struct Writer {
    out: Vec<u8>,
}

impl Writer {
    /// A state whose timers' key groups are those of their keys from byte `timer_key_prefix`
    /// on; `capacity` bytes reserved.
    pub fn with_capacity(timer_key_prefix: u8, capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity.max(HEADER));
        out.extend_from_slice(&MAGIC);
        out.push(VERSION);
        out.push(timer_key_prefix);
        Writer { out }
    }

    /// Appends a keyed item.
    pub fn keyed(&mut self, state: u32, key: &[u8], value: &[u8]) {
        self.out.push(ItemKind::Keyed as u8);
        push_varint(&mut self.out, state);
        push_bytes(&mut self.out, key);
        push_bytes(&mut self.out, value);
    }

    /// Appends an item of a list split among the new subtasks on a rescale.
    pub fn list(&mut self, state: u32, value: &[u8]) {
        self.unkeyed(ItemKind::List, state, value);
    }

    /// Appends an item every new subtask gets on a rescale.
    pub fn union(&mut self, state: u32, value: &[u8]) {
        self.unkeyed(ItemKind::Union, state, value);
    }

    fn unkeyed(&mut self, kind: ItemKind, state: u32, value: &[u8]) {
        self.out.push(kind as u8);
        push_varint(&mut self.out, state);
        push_bytes(&mut self.out, value);
    }

    /// Appends an item as [`RescalableState::items_raw`] returned it.
    fn raw(&mut self, raw: &[u8]) {
        self.out.extend_from_slice(raw);
    }

    /// Sets the timer-key prefix of the header.
    pub fn set_timer_key_prefix(&mut self, prefix: u8) {
        self.out[HEADER - 1] = prefix;
    }

    /// The state's bytes.
    pub fn finish(self) -> Vec<u8> {
        self.out
    }
}

fn push_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    let len = u32::try_from(bytes.len()).expect("an item's key or value is below 4 GiB");
    push_varint(out, len);
    out.extend_from_slice(bytes);
}

fn push_varint(out: &mut Vec<u8>, mut n: u32) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Why bytes that start with [`MAGIC`] are not a rescalable state this build reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// The version byte is not [`VERSION`].
    Version(u8),
    /// The bytes end within the header.
    ShortHeader,
    /// The item at `offset` is malformed: `problem` says how.
    Item {
        /// Where the item starts.
        offset: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::Version(v) => write!(
                f,
                "rescalable state layout version {v} is not supported (this build reads {VERSION})"
            ),
            LayoutError::ShortHeader => write!(f, "rescalable state ends within its header"),
            LayoutError::Item { offset, problem } => {
                write!(f, "rescalable state item at byte {offset}: {problem}")
            }
        }
    }
}

impl std::error::Error for LayoutError {}

/// A rescalable state, verified whole: every item decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RescalableState<'a> {
    timer_key_prefix: u8,
    /// The whole state, header included: items start at [`HEADER`].
    bytes: &'a [u8],
}

impl<'a> RescalableState<'a> {
    /// Reads `bytes`: `Ok(None)` when they do not start with [`MAGIC`] (an opaque state), an
    /// error when they do but do not decode to the end.
    pub fn decode(bytes: &'a [u8]) -> Result<Option<Self>, LayoutError> {
        if !bytes.starts_with(&MAGIC) {
            return Ok(None);
        }
        let header = bytes
            .get(MAGIC.len()..HEADER)
            .ok_or(LayoutError::ShortHeader)?;
        let (version, prefix) = (header[0], header[1]);
        if version != VERSION {
            return Err(LayoutError::Version(version));
        }
        let mut pos = HEADER;
        while pos < bytes.len() {
            let (_, next) = parse_item(bytes, pos).map_err(|problem| LayoutError::Item {
                offset: pos,
                problem,
            })?;
            pos = next;
        }
        Ok(Some(RescalableState {
            timer_key_prefix: prefix,
            bytes,
        }))
    }

    /// How many leading bytes of a timer's key are not part of the key that places it.
    pub fn timer_key_prefix(&self) -> u8 {
        self.timer_key_prefix
    }

    /// Every item, in order.
    pub fn items(&self) -> impl Iterator<Item = Item<'a>> + use<'a> {
        self.items_raw().map(|(item, _)| item)
    }

    /// Where every item lies, in order.
    pub fn spans(&self) -> impl Iterator<Item = ItemSpan> + use<'a> {
        self.parsed().map(|(span, _)| span)
    }

    /// Every item with its encoded bytes, in order.
    fn items_raw(&self) -> impl Iterator<Item = (Item<'a>, &'a [u8])> + use<'a> {
        let bytes = self.bytes;
        self.parsed().map(move |(span, raw)| {
            let item = Item {
                kind: span.kind,
                state: span.state,
                key: &bytes[span.key],
                value: &bytes[span.value],
            };
            (item, &bytes[raw])
        })
    }

    /// Every item's span and the span of its encoding, in order.
    fn parsed(&self) -> impl Iterator<Item = (ItemSpan, core::ops::Range<usize>)> + use<'a> {
        let bytes = self.bytes;
        let mut pos = HEADER;
        core::iter::from_fn(move || {
            if pos >= bytes.len() {
                return None;
            }
            // Verified whole by `decode`.
            let (span, next) = parse_item(bytes, pos).ok()?;
            let raw = pos..next;
            pos = next;
            Some((span, raw))
        })
    }
}

/// Parses the item at `pos`; returns where it lies and where the next one starts.
fn parse_item(bytes: &[u8], pos: usize) -> Result<(ItemSpan, usize), &'static str> {
    let mut at = pos;
    let kind = match bytes[at] {
        1 => ItemKind::Keyed,
        2 => ItemKind::List,
        3 => ItemKind::Union,
        _ => return Err("unknown item kind"),
    };
    at += 1;
    let state = varint(bytes, &mut at)?;
    let key = if kind == ItemKind::Keyed {
        span(bytes, &mut at)?
    } else {
        at..at
    };
    let value = span(bytes, &mut at)?;
    Ok((
        ItemSpan {
            kind,
            state,
            key,
            value,
        },
        at,
    ))
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u32, &'static str> {
    let mut n: u64 = 0;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*at).ok_or("cut short within a length")?;
        *at += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return u32::try_from(n).map_err(|_| "a length past 32 bits");
        }
    }
    Err("a length longer than 5 bytes")
}

fn span(bytes: &[u8], at: &mut usize) -> Result<core::ops::Range<usize>, &'static str> {
    let len = varint(bytes, at)? as usize;
    let end = at
        .checked_add(len)
        .filter(|&end| end <= bytes.len())
        .ok_or("cut short within a key or value")?;
    let out = *at..end;
    *at = end;
    Ok(out)
}

/// Why states cannot be rescaled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RescaleError {
    /// The state of old subtask `subtask` is not empty and not in the rescalable layout: the
    /// guest keeps state the host cannot split.
    Opaque {
        /// The old subtask.
        subtask: u32,
    },
    /// The state of old subtask `subtask` starts like a rescalable state but does not decode.
    Layout {
        /// The old subtask.
        subtask: u32,
        /// What is wrong.
        problem: LayoutError,
    },
    /// Two old subtasks declare different timer-key prefixes.
    TimerKeyPrefixes {
        /// The prefix of the first old subtask with a state.
        first: u8,
        /// The old subtask that differs.
        subtask: u32,
        /// Its prefix.
        other: u8,
    },
    /// The old and the new key groups differ in number: a key's group would change.
    MaxParallelism {
        /// The old `max_parallelism`.
        old: u32,
        /// The new one.
        new: u32,
    },
    /// There is not one state per old subtask.
    Count {
        /// How many states were given.
        states: usize,
        /// The old parallelism.
        parallelism: u32,
    },
}

impl fmt::Display for RescaleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RescaleError::Opaque { subtask } => write!(
                f,
                "the state of subtask {subtask} is not in the rescalable layout of docs/ABI.md \
                 §16: only the operator's own code can read it"
            ),
            RescaleError::Layout { subtask, problem } => {
                write!(f, "the state of subtask {subtask}: {problem}")
            }
            RescaleError::TimerKeyPrefixes {
                first,
                subtask,
                other,
            } => write!(
                f,
                "subtask {subtask} declares a timer-key prefix of {other} bytes where another \
                 declares {first}"
            ),
            RescaleError::MaxParallelism { old, new } => write!(
                f,
                "the number of key groups changed from {old} to {new}: every key would move"
            ),
            RescaleError::Count {
                states,
                parallelism,
            } => write!(f, "{states} states for {parallelism} subtasks"),
        }
    }
}

impl std::error::Error for RescaleError {}

/// States split and merged for a new parallelism by [`rescale`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescaled {
    /// One state per new subtask, in subtask order; all empty when every old one was.
    pub states: Vec<Vec<u8>>,
    /// The timer-key prefix the old states declared (0 when all were empty).
    pub timer_key_prefix: u8,
}

/// Splits and merges `states`, one per subtask of `old` in subtask order, into one per subtask
/// of `new`: keyed items by the key group of their key, list items in contiguous shares of each
/// list (in old-subtask order), union items to every new subtask. An empty state holds nothing;
/// any other state must be in the rescalable layout.
pub fn rescale(states: &[&[u8]], old: KeyGroups, new: KeyGroups) -> Result<Rescaled, RescaleError> {
    if old.max_parallelism() != new.max_parallelism() {
        return Err(RescaleError::MaxParallelism {
            old: old.max_parallelism(),
            new: new.max_parallelism(),
        });
    }
    if states.len() != old.parallelism() as usize {
        return Err(RescaleError::Count {
            states: states.len(),
            parallelism: old.parallelism(),
        });
    }
    let mut decoded = Vec::with_capacity(states.len());
    let mut prefix: Option<u8> = None;
    for (subtask, bytes) in (0..).zip(states) {
        if bytes.is_empty() {
            continue;
        }
        let state = RescalableState::decode(bytes)
            .map_err(|problem| RescaleError::Layout { subtask, problem })?
            .ok_or(RescaleError::Opaque { subtask })?;
        match prefix {
            None => prefix = Some(state.timer_key_prefix()),
            Some(first) if first != state.timer_key_prefix() => {
                return Err(RescaleError::TimerKeyPrefixes {
                    first,
                    subtask,
                    other: state.timer_key_prefix(),
                });
            }
            Some(_) => {}
        }
        decoded.push(state);
    }
    let Some(prefix) = prefix else {
        return Ok(Rescaled {
            states: vec![Vec::new(); new.parallelism() as usize],
            timer_key_prefix: 0,
        });
    };
    let total: usize = states.iter().map(|s| s.len()).sum();
    let share = total / new.parallelism() as usize + HEADER;
    let mut out: Vec<Writer> = (0..new.parallelism())
        .map(|_| Writer::with_capacity(prefix, share))
        .collect();
    // Lists are split per list: gather each one's items first.
    let mut lists: std::collections::BTreeMap<u32, Vec<&[u8]>> = Default::default();
    for state in &decoded {
        for (item, raw) in state.items_raw() {
            match item.kind {
                ItemKind::Keyed => {
                    let group = key_group(item.key, new.max_parallelism());
                    out[new.owner(group) as usize].raw(raw);
                }
                ItemKind::Union => out.iter_mut().for_each(|w| w.raw(raw)),
                ItemKind::List => lists.entry(item.state).or_default().push(raw),
            }
        }
    }
    let p = out.len();
    for items in lists.values() {
        let n = items.len();
        for (j, writer) in out.iter_mut().enumerate() {
            for raw in &items[j * n / p..(j + 1) * n / p] {
                writer.raw(raw);
            }
        }
    }
    Ok(Rescaled {
        states: out.into_iter().map(Writer::finish).collect(),
        timer_key_prefix: prefix,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn groups(max: u32, p: u32) -> KeyGroups {
        KeyGroups::new(max, p).unwrap()
    }

    #[test]
    fn items_round_trip_in_order() {
        let mut w = Writer::with_capacity(1, 0);
        w.union(0, b"config");
        w.keyed(1, b"k", b"v");
        w.keyed(1, b"", &[7; 300]);
        w.list(2, b"item");
        let bytes = w.finish();
        let state = RescalableState::decode(&bytes).unwrap().unwrap();
        assert_eq!(state.timer_key_prefix(), 1);
        let items: Vec<_> = state.items().collect();
        assert_eq!(items.len(), 4);
        assert_eq!(
            items[0],
            Item {
                kind: ItemKind::Union,
                state: 0,
                key: b"",
                value: b"config"
            }
        );
        assert_eq!(items[2].value.len(), 300);
        assert_eq!((items[3].kind, items[3].state), (ItemKind::List, 2));
    }

    #[test]
    fn opaque_bytes_are_not_a_rescalable_state() {
        assert_eq!(RescalableState::decode(b"").unwrap(), None);
        assert_eq!(RescalableState::decode(b"\x03abc").unwrap(), None);
    }

    #[test]
    fn a_cut_or_unknown_state_is_refused_not_misread() {
        let mut w = Writer::with_capacity(0, 0);
        w.keyed(3, b"key", b"value");
        let bytes = w.finish();
        // Cut anywhere but right after the header (an empty state, which is valid).
        for cut in (MAGIC.len()..bytes.len()).filter(|&cut| cut != HEADER) {
            assert!(RescalableState::decode(&bytes[..cut]).is_err(), "cut {cut}");
        }
        let mut other = bytes.clone();
        other[MAGIC.len()] = 9;
        assert_eq!(
            RescalableState::decode(&other).unwrap_err(),
            LayoutError::Version(9)
        );
        let mut kind = bytes;
        kind[HEADER] = 7;
        assert!(
            RescalableState::decode(&kind)
                .unwrap_err()
                .to_string()
                .contains("unknown item kind")
        );
    }

    #[test]
    fn rescale_refuses_opaque_states_and_other_key_group_counts() {
        let good = Writer::with_capacity(0, 0).finish();
        let err = rescale(&[&good, b"\x01"], groups(8, 2), groups(8, 3)).unwrap_err();
        assert_eq!(err, RescaleError::Opaque { subtask: 1 });
        let err = rescale(&[&good], groups(8, 1), groups(16, 2)).unwrap_err();
        assert_eq!(err, RescaleError::MaxParallelism { old: 8, new: 16 });
    }

    #[test]
    fn empty_states_rescale_to_empty_states() {
        let r = rescale(&[b"", b""], groups(8, 2), groups(8, 3)).unwrap();
        assert_eq!(r.states, vec![Vec::<u8>::new(); 3]);
    }

    #[test]
    fn lists_are_split_and_unions_given_to_all() {
        let mut a = Writer::with_capacity(2, 0);
        a.union(0, b"u");
        a.list(5, b"a1");
        a.list(5, b"a2");
        let mut b = Writer::with_capacity(2, 0);
        b.union(0, b"u");
        b.list(5, b"b1");
        let (a, b) = (a.finish(), b.finish());
        let r = rescale(&[&a, &b], groups(8, 2), groups(8, 3)).unwrap();
        assert_eq!(r.timer_key_prefix, 2);
        let lists: Vec<Vec<&[u8]>> = r
            .states
            .iter()
            .map(|s| {
                let s = RescalableState::decode(s).unwrap().unwrap();
                assert_eq!(s.items().filter(|i| i.kind == ItemKind::Union).count(), 2);
                s.items()
                    .filter(|i| i.kind == ItemKind::List)
                    .map(|i| i.value)
                    .collect()
            })
            .collect();
        assert_eq!(
            lists,
            vec![vec![&b"a1"[..]], vec![&b"a2"[..]], vec![&b"b1"[..]]]
        );
    }

    #[test]
    fn prefixes_must_agree() {
        let a = Writer::with_capacity(0, 0).finish();
        let b = Writer::with_capacity(1, 0).finish();
        assert_eq!(
            rescale(&[&a, &b], groups(8, 2), groups(8, 1)).unwrap_err(),
            RescaleError::TimerKeyPrefixes {
                first: 0,
                subtask: 1,
                other: 1
            }
        );
    }

    /// The keyed items of `states`, by key, with the subtask that holds each.
    fn keyed(states: &[Vec<u8>]) -> BTreeMap<Vec<u8>, (usize, Vec<u8>)> {
        let mut all = BTreeMap::new();
        for (subtask, bytes) in states.iter().enumerate() {
            if bytes.is_empty() {
                continue;
            }
            for item in RescalableState::decode(bytes).unwrap().unwrap().items() {
                let previous = all.insert(item.key.to_vec(), (subtask, item.value.to_vec()));
                assert!(previous.is_none(), "key {:?} twice", item.key);
            }
        }
        all
    }

    proptest! {
        /// Random keys placed at one parallelism and rescaled to another: none is lost or
        /// duplicated, each lands on the subtask that routing sends it to, and rescaling back
        /// gives the keys of every original subtask back.
        #[test]
        fn keys_are_neither_lost_nor_duplicated(
            keys in proptest::collection::btree_set(proptest::collection::vec(any::<u8>(), 0..12), 0..200),
            max in 1u32..64,
            from in 1u32..64,
            to in 1u32..64,
        ) {
            let (from, to) = (from.min(max), to.min(max));
            let (old, new) = (groups(max, from), groups(max, to));
            let mut writers: Vec<Writer> = (0..from).map(|_| Writer::with_capacity(0, 0)).collect();
            for key in &keys {
                writers[old.subtask(key) as usize].keyed(1, key, &key.len().to_le_bytes());
            }
            let states: Vec<Vec<u8>> = writers.into_iter().map(Writer::finish).collect();
            let refs: Vec<&[u8]> = states.iter().map(Vec::as_slice).collect();
            let r = rescale(&refs, old, new).unwrap();
            let placed = keyed(&r.states);
            prop_assert_eq!(placed.len(), keys.len());
            for (key, (subtask, value)) in &placed {
                prop_assert!(keys.contains(key));
                prop_assert_eq!(*subtask as u32, new.subtask(key));
                prop_assert_eq!(value, &key.len().to_le_bytes().to_vec());
            }
            let refs: Vec<&[u8]> = r.states.iter().map(Vec::as_slice).collect();
            let back = rescale(&refs, new, old).unwrap();
            prop_assert_eq!(keyed(&back.states), keyed(&states));
        }
    }
}
