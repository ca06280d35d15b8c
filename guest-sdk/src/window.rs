//! Keyed event-time windows — tumbling, sliding and session — with no timer code.
//!
//! # Why this module exists
//!
//! Windows are what most operators want event time for, and writing them on the raw ABI
//! (`docs/ABI.md` §15) is the same few hundred lines every time: assign records to windows,
//! set a timer per window, tell late records from on-time ones, keep fired windows around for
//! the allowed lateness and drop them after, merge sessions and move their timers, checkpoint
//! it all. Each of those steps is easy to get subtly wrong, and the result must not depend on
//! which language wrote the operator. So the SDK does it once, here, and `docs/WINDOWS.md`
//! states the semantics precisely enough for another language's SDK to produce the same
//! records.
//!
//! # The pieces
//!
//! - [`WindowSpec`]: which windows ([`Assigner`]: tumbling, sliding, session), the allowed
//!   lateness, and where records too late for it go.
//! - [`Aggregate`]: what a window computes — an accumulator created, added to, merged (when
//!   sessions merge) and turned into the result's value. [`Reduce`] builds one from three
//!   functions; [`FullWindow`] keeps every value and hands them all to one function.
//! - [`Windows`]: the windows of every key, to which an operator forwards its input and its
//!   fired timers. It checkpoints through the SDK's [`State`], so the operator's own `State`
//!   is two one-line methods.
//!
//! The windows own the operator's event-time timers: every timer key they set starts with the
//! byte `0` or `1`, and [`Windows::on_timers`] ignores other timers (processing-time ones
//! included), which the operator may then use for itself.
//!
//! # Example
//!
//! A count per key and tumbling window of one second, records up to 200 ms late still counted:
//!
//! ```
//! use weir_sdk::window::{Reduce, Window, WindowSpec, Windows};
//! use weir_sdk::{Batch, Context, FiredTimers, Operator, Output, Result, State};
//!
//! pub struct PerSecond {
//!     windows: Windows<Reduce<u64>>,
//! }
//!
//! fn count(n: &mut u64, _value: &[u8]) {
//!     *n += 1;
//! }
//!
//! fn merge(n: &mut u64, other: u64) {
//!     *n += other;
//! }
//!
//! fn result(window: Window, n: &u64) -> Vec<u8> {
//!     format!("{}..{}: {n}", window.start, window.end).into_bytes()
//! }
//!
//! impl Operator for PerSecond {
//!     fn init(_ctx: &Context) -> Result<Self> {
//!         let spec = WindowSpec::tumbling(1000).with_lateness(200);
//!         let windows = Windows::new(spec, Reduce::new(count, merge, result))?;
//!         Ok(PerSecond { windows })
//!     }
//!
//!     fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
//!         self.windows.process(input, out)
//!     }
//!
//!     fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
//!         self.windows.on_timers(timers, out)
//!     }
//! }
//!
//! impl State for PerSecond {
//!     fn snapshot(&self) -> Result<Vec<u8>> {
//!         self.windows.snapshot()
//!     }
//!
//!     fn restore(&mut self, bytes: &[u8]) -> Result<()> {
//!         self.windows.restore(bytes)
//!     }
//! }
//!
//! weir_sdk::export!(PerSecond);
//!
//! # fn main() -> Result<()> {
//! use weir_sdk::testing::{Harness, assert_records_eq, record};
//!
//! let mut harness = Harness::<PerSecond>::new(Context::new("per-second"))?;
//! harness.push("k", "a", 1500)?;
//! harness.push("k", "b", 1200)?;
//! // The window [1000, 2000) fires once the watermark reaches 1999, with timestamp 1999.
//! assert_records_eq(&harness.advance_watermark(1999)?, &[record("k", "1000..2000: 2", 1999)]);
//! // 100 ms late, within the lateness: the window counts it and says so at once.
//! assert_records_eq(&harness.push("k", "c", 1900)?, &[record("k", "1000..2000: 3", 1999)]);
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::fmt;
use std::str::{FromStr, SplitWhitespace};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use weir_abi::rescalable::ItemKind;
use weir_abi::time::MAX_OUTPUT_NAME_BYTES;

use crate::rescalable::{self, deserialize_items, serialize_items};
use crate::{Batch, Error, FiredTimers, Keyed, Output, Record, Result, State, TimeDomain, bail};

/// A window of event time: the timestamps from `start` (included) to `end` (excluded), in
/// milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Window {
    /// The first timestamp in the window.
    pub start: i64,
    /// The first timestamp after it.
    pub end: i64,
}

impl Window {
    /// `end - 1`: the last timestamp in the window. The window fires when the watermark
    /// reaches it, and its results carry it as their timestamp.
    pub fn max_timestamp(&self) -> i64 {
        self.end - 1
    }
}

/// Which windows a record belongs to. Every length is in milliseconds and positive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Assigner {
    /// Windows of `size` one after the other, starting at the multiples of `size`: each record
    /// is in exactly one.
    Tumbling {
        /// The windows' length.
        size: i64,
    },
    /// Windows of `size` starting at every multiple of `slide` (`slide <= size`): a record is in
    /// `size / slide` of them (rounded up or down, by where it falls).
    Sliding {
        /// The windows' length.
        size: i64,
        /// The distance between two windows' starts.
        slide: i64,
    },
    /// Per key, a window that stays open while records keep coming at most `gap` apart: each
    /// record opens `[timestamp, timestamp + gap)`, and the windows of a key that overlap or
    /// touch merge into one.
    Session {
        /// The silence that closes a session.
        gap: i64,
    },
}

impl fmt::Display for Assigner {
    /// `tumbling 1000`, `sliding 1000 500`, `session 300`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Assigner::Tumbling { size } => write!(f, "tumbling {size}"),
            Assigner::Sliding { size, slide } => write!(f, "sliding {size} {slide}"),
            Assigner::Session { gap } => write!(f, "session {gap}"),
        }
    }
}

/// What windows to make and what to do with late records: an [`Assigner`], an allowed
/// lateness (0 unless set) and an optional side output for records too late even for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowSpec {
    assigner: Assigner,
    lateness: i64,
    late_output: Option<String>,
}

impl WindowSpec {
    /// Tumbling windows of `size` milliseconds.
    pub fn tumbling(size: i64) -> Self {
        Self::new(Assigner::Tumbling { size })
    }

    /// Windows of `size` milliseconds, one starting every `slide` milliseconds.
    pub fn sliding(size: i64, slide: i64) -> Self {
        Self::new(Assigner::Sliding { size, slide })
    }

    /// Session windows that close after `gap` milliseconds without a record of their key.
    pub fn session(gap: i64) -> Self {
        Self::new(Assigner::Session { gap })
    }

    /// Windows made by `assigner`, no lateness, no late output.
    pub fn new(assigner: Assigner) -> Self {
        WindowSpec {
            assigner,
            lateness: 0,
            late_output: None,
        }
    }

    /// The same windows, kept `lateness` milliseconds after they fire: a record that arrives
    /// in that time still counts, and the window emits its result again.
    pub fn with_lateness(mut self, lateness: i64) -> Self {
        self.lateness = lateness;
        self
    }

    /// The same windows, sending records too late for every window they belong to to the side
    /// output `name` (unchanged), instead of only counting them.
    pub fn with_late_output(mut self, name: impl Into<String>) -> Self {
        self.late_output = Some(name.into());
        self
    }

    /// Which windows a record belongs to.
    pub fn assigner(&self) -> Assigner {
        self.assigner
    }

    /// How long a window is kept after it fires, in milliseconds.
    pub fn lateness(&self) -> i64 {
        self.lateness
    }

    /// The side output of records too late, if any.
    pub fn late_output(&self) -> Option<&str> {
        self.late_output.as_deref()
    }

    /// Fails, saying what is wrong, unless every length is positive, `slide <= size`, the
    /// lateness is not negative and the late output's name is 1 to 255 bytes.
    pub fn check(&self) -> Result<()> {
        match self.assigner {
            Assigner::Tumbling { size } | Assigner::Sliding { size, .. } if size <= 0 => {
                bail!("`{}`: the window size must be positive", self.assigner)
            }
            Assigner::Sliding { size, slide } if slide <= 0 || slide > size => {
                bail!(
                    "`{}`: the slide must be positive and at most the size",
                    self.assigner
                )
            }
            Assigner::Session { gap } if gap <= 0 => {
                bail!("`{}`: the session gap must be positive", self.assigner)
            }
            _ => {}
        }
        if self.lateness < 0 {
            bail!(
                "the allowed lateness {} must not be negative",
                self.lateness
            );
        }
        if let Some(name) = &self.late_output
            && (name.is_empty() || name.len() > MAX_OUTPUT_NAME_BYTES)
        {
            bail!(
                "the late output's name `{name}` must be 1 to {MAX_OUTPUT_NAME_BYTES} bytes long"
            );
        }
        Ok(())
    }
}

impl fmt::Display for WindowSpec {
    /// `tumbling 1000 lateness 200 late-output late`, leaving out what is not set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.assigner)?;
        if self.lateness != 0 {
            write!(f, " lateness {}", self.lateness)?;
        }
        if let Some(name) = &self.late_output {
            write!(f, " late-output {name}")?;
        }
        Ok(())
    }
}

/// How [`WindowSpec`] is written, for messages.
const SPEC_GRAMMAR: &str = "`tumbling SIZE`, `sliding SIZE SLIDE` or `session GAP`, then \
                            optionally `lateness MS` and `late-output NAME` (times in \
                            milliseconds), e.g. `tumbling 1000 lateness 200 late-output late`";

impl FromStr for WindowSpec {
    type Err = Error;

    /// Reads what [`Display`](fmt::Display) writes: `tumbling SIZE`, `sliding SIZE SLIDE` or
    /// `session GAP`, then `lateness MS` and `late-output NAME` in either order, each at most
    /// once; words are separated by white space. The spec must [`check`](WindowSpec::check).
    fn from_str(text: &str) -> Result<Self> {
        let mut words = text.split_whitespace();
        let assigner = match words.next() {
            Some("tumbling") => Assigner::Tumbling {
                size: number(&mut words, "tumbling", "size")?,
            },
            Some("sliding") => Assigner::Sliding {
                size: number(&mut words, "sliding", "size")?,
                slide: number(&mut words, "sliding", "slide")?,
            },
            Some("session") => Assigner::Session {
                gap: number(&mut words, "session", "gap")?,
            },
            Some(other) => bail!("unknown windows `{other}`: write {SPEC_GRAMMAR}"),
            None => bail!("no windows given: write {SPEC_GRAMMAR}"),
        };
        let mut spec = WindowSpec::new(assigner);
        let (mut lateness, mut late_output) = (None, None);
        while let Some(word) = words.next() {
            match word {
                "lateness" if lateness.is_none() => {
                    lateness = Some(number(&mut words, "lateness", "time")?);
                }
                "late-output" if late_output.is_none() => match words.next() {
                    Some(name) => late_output = Some(name.to_owned()),
                    None => {
                        bail!("`late-output` needs the side output's name: write {SPEC_GRAMMAR}")
                    }
                },
                "lateness" | "late-output" => bail!("`{word}` is given twice"),
                other => bail!("unexpected `{other}`: write {SPEC_GRAMMAR}"),
            }
        }
        spec.lateness = lateness.unwrap_or(0);
        spec.late_output = late_output;
        spec.check()?;
        Ok(spec)
    }
}

/// The next word, read as the number `what` that follows `after`.
fn number(words: &mut SplitWhitespace<'_>, after: &str, what: &str) -> Result<i64> {
    match words.next() {
        Some(word) => word.parse().map_err(|e| {
            Error::msg(format!(
                "`{after}` needs a {what} in milliseconds, not `{word}`: {e}"
            ))
        }),
        None => bail!("`{after}` needs a {what} in milliseconds: write {SPEC_GRAMMAR}"),
    }
}

/// What a window computes, through an accumulator: created empty, added to once per record,
/// merged when session windows merge, and turned into the value of the window's result.
///
/// The accumulator is checkpointed with the window, so it must be serde. Implement this trait
/// when the result depends on the operator's config (the methods take `&self`) or adding can
/// fail; otherwise [`Reduce`] and [`FullWindow`] save writing it.
pub trait Aggregate {
    /// The accumulator a window keeps.
    type Acc: Serialize + DeserializeOwned;

    /// The accumulator of a window that has no record yet.
    fn create(&self) -> Self::Acc;

    /// Adds a record of the window's key to its accumulator. An error fails the call.
    fn add(&self, acc: &mut Self::Acc, record: &Record<'_>) -> Result<()>;

    /// Adds `other`, the accumulator of a session window merging into this one, to `acc`.
    /// Merged sessions are merged in the order of their start, so `acc` holds the earlier
    /// records; the record that merged them is added after.
    fn merge(&self, acc: &mut Self::Acc, other: Self::Acc);

    /// The value of the window's result record. An error fails the call.
    fn result(&self, window: Window, acc: &Self::Acc) -> Result<Vec<u8>>;
}

/// An [`Aggregate`] made of three plain functions: `add` folds each value into an accumulator
/// that starts as `A::default()`, `merge` folds one accumulator into another (for session
/// windows), `result` makes the output value.
///
/// Functions, not closures that capture: the operator's struct names the type
/// (`Windows<Reduce<u64>>`). An aggregate that needs the config implements [`Aggregate`].
pub struct Reduce<A> {
    add: fn(&mut A, &[u8]),
    merge: fn(&mut A, A),
    result: fn(Window, &A) -> Vec<u8>,
}

impl<A> Reduce<A> {
    /// The aggregate of these three functions.
    pub fn new(
        add: fn(&mut A, &[u8]),
        merge: fn(&mut A, A),
        result: fn(Window, &A) -> Vec<u8>,
    ) -> Self {
        Reduce { add, merge, result }
    }
}

impl<A: Default + Serialize + DeserializeOwned> Aggregate for Reduce<A> {
    type Acc = A;

    fn create(&self) -> A {
        A::default()
    }

    fn add(&self, acc: &mut A, record: &Record<'_>) -> Result<()> {
        (self.add)(acc, record.value);
        Ok(())
    }

    fn merge(&self, acc: &mut A, other: A) {
        (self.merge)(acc, other)
    }

    fn result(&self, window: Window, acc: &A) -> Result<Vec<u8>> {
        Ok((self.result)(window, acc))
    }
}

/// An [`Aggregate`] that keeps every value of the window, in the order they were added (after a
/// session merge, the earlier session's first), and hands them all to one function when the
/// window fires. Simple, and as costly as it sounds: the state holds every value.
pub struct FullWindow {
    result: fn(Window, &[Vec<u8>]) -> Vec<u8>,
}

impl FullWindow {
    /// The aggregate that gives each window's values to `result`.
    pub fn new(result: fn(Window, &[Vec<u8>]) -> Vec<u8>) -> Self {
        FullWindow { result }
    }
}

impl Aggregate for FullWindow {
    type Acc = Vec<Vec<u8>>;

    fn create(&self) -> Vec<Vec<u8>> {
        Vec::new()
    }

    fn add(&self, acc: &mut Vec<Vec<u8>>, record: &Record<'_>) -> Result<()> {
        acc.push(record.value.to_vec());
        Ok(())
    }

    fn merge(&self, acc: &mut Vec<Vec<u8>>, mut other: Vec<Vec<u8>>) {
        acc.append(&mut other);
    }

    fn result(&self, window: Window, acc: &Vec<Vec<u8>>) -> Result<Vec<u8>> {
        Ok((self.result)(window, acc))
    }
}

/// The first byte of the key of a timer that fires a window.
const FIRE: u8 = 0;
/// The first byte of the key of a timer that drops fired windows once their lateness is over.
const CLEAN_UP: u8 = 1;

/// The keyed windows of one operator instance: forward the input to
/// [`process`](Self::process) (or single records to [`add`](Self::add)) and fired timers to
/// [`on_timers`](Self::on_timers); results and late records come out of the [`Output`].
///
/// A result is a record with the window's key, the timestamp `end - 1` and the value the
/// [`Aggregate`] returns. Its state (the open windows and the late-record count) is
/// checkpointed through [`State`]; the timers are the host's and need no checkpointing.
pub struct Windows<A: Aggregate> {
    spec: WindowSpec,
    aggregate: A,
    state: WindowState<A::Acc>,
}

/// What [`Windows`] checkpoints: its windows, its count of late records, and the assigner and
/// lateness they were made with, which a restore checks.
#[derive(Serialize, Deserialize)]
#[serde(bound(serialize = "Acc: Serialize", deserialize = "Acc: DeserializeOwned"))]
struct WindowState<Acc> {
    assigner: Assigner,
    lateness: i64,
    /// For each key, its windows by end. A key's windows have distinct ends: aligned windows of
    /// one size with the same end are the same window, and a key's sessions never overlap.
    /// Hashed, not ordered: nothing depends on the order of keys (the host orders the firings),
    /// and comparing byte keys down a B-tree was most of a windowed job's time in wasm. Keyed:
    /// a rescale moves each key's windows with the key.
    keys: Keyed<BTreeMap<i64, Slot<Acc>>>,
    /// Records too late for every window they belong to.
    late_records: LateCount,
}

/// How many bytes a window timer's key has before the record key: its kind.
const TIMER_KEY_PREFIX: u8 = 1;

/// The count of late records: a number in a plain snapshot; in a rescalable one an item of a
/// list, so that the counts of subtasks a rescale merges add up and none is counted twice.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct LateCount(u64);

impl Serialize for LateCount {
    fn serialize<S: Serializer>(&self, serializer: S) -> core::result::Result<S::Ok, S::Error> {
        if rescalable::snapshotting() {
            serialize_items(serializer, ItemKind::List, &[self.0])
        } else {
            serializer.serialize_u64(self.0)
        }
    }
}

impl<'de> Deserialize<'de> for LateCount {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> core::result::Result<Self, D::Error> {
        if rescalable::restoring() {
            let counts: Vec<u64> = deserialize_items(deserializer, ItemKind::List)?;
            Ok(LateCount(counts.iter().sum()))
        } else {
            u64::deserialize(deserializer).map(LateCount)
        }
    }
}

/// One window of one key.
#[derive(Serialize, Deserialize)]
struct Slot<Acc> {
    /// Where the window starts (it ends at its key in the map).
    start: i64,
    /// Whether it fired: then it is only kept for late records, until its lateness is over.
    fired: bool,
    /// The aggregate so far.
    acc: Acc,
}

impl<A: Aggregate> Windows<A> {
    /// The windows of `spec`, computing `aggregate`; fails if the spec does not
    /// [`check`](WindowSpec::check).
    pub fn new(spec: WindowSpec, aggregate: A) -> Result<Self> {
        spec.check()?;
        let state = WindowState {
            assigner: spec.assigner,
            lateness: spec.lateness,
            keys: Keyed::default(),
            late_records: LateCount::default(),
        };
        Ok(Windows {
            spec,
            aggregate,
            state,
        })
    }

    /// The spec the windows were made with.
    pub fn spec(&self) -> &WindowSpec {
        &self.spec
    }

    /// How many records came too late for every window they belong to: sent to the late
    /// output when there is one, dropped otherwise. Checkpointed.
    pub fn late_records(&self) -> u64 {
        self.state.late_records.0
    }

    /// How many windows are kept, over all keys: open ones, and fired ones still within their
    /// lateness.
    pub fn open_windows(&self) -> usize {
        self.state.keys.values().map(BTreeMap::len).sum()
    }

    /// Adds every record of `input` to its windows (the port is not looked at).
    pub fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        // The watermark cannot move during a call: read it once.
        let watermark = out.watermark();
        for record in input {
            self.add_at(&record, watermark, out)?;
        }
        Ok(())
    }

    /// Adds `record` to every window of its key that contains its timestamp, or, when it is
    /// too late for all of them, counts it and sends it to the late output.
    pub fn add(&mut self, record: &Record<'_>, out: &mut Output) -> Result<()> {
        let watermark = out.watermark();
        self.add_at(record, watermark, out)
    }

    /// Fires the windows whose event-time timers fired and drops those whose lateness is over.
    /// Timers the windows did not set are ignored.
    pub fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
        if timers.domain() != TimeDomain::Event {
            return Ok(());
        }
        for timer in timers {
            match timer.key.split_first() {
                Some((&FIRE, key)) => self.fire(key, timer.timestamp, out)?,
                Some((&CLEAN_UP, key)) => self.clean_up(key, timer.timestamp),
                _ => {}
            }
        }
        Ok(())
    }

    fn add_at(&mut self, record: &Record<'_>, watermark: i64, out: &mut Output) -> Result<()> {
        let kept = match self.spec.assigner {
            Assigner::Tumbling { size } => self.add_aligned(record, size, size, watermark, out)?,
            Assigner::Sliding { size, slide } => {
                self.add_aligned(record, size, slide, watermark, out)?
            }
            Assigner::Session { gap } => self.add_to_session(record, gap, watermark, out)?,
        };
        if !kept {
            self.state.late_records.0 += 1;
            if let Some(name) = &self.spec.late_output {
                out.emit_to(name, record.key, record.value, record.timestamp);
            }
        }
        Ok(())
    }

    /// Whether a window's state is gone, or would be, at `watermark`: its lateness is over.
    fn is_dropped(&self, window: Window, watermark: i64) -> bool {
        watermark >= window.max_timestamp().saturating_add(self.spec.lateness)
    }

    /// Adds `record` to its tumbling or sliding windows; returns whether any was still kept.
    fn add_aligned(
        &mut self,
        record: &Record<'_>,
        size: i64,
        slide: i64,
        watermark: i64,
        out: &mut Output,
    ) -> Result<bool> {
        let windows: Vec<Window> = aligned_windows(record.timestamp, size, slide)
            .filter(|window| !self.is_dropped(*window, watermark))
            .collect();
        if windows.is_empty() {
            return Ok(false);
        }
        let lateness = self.spec.lateness;
        // Look the key up borrowed first: a copy of it only for a key not seen yet.
        if !self.state.keys.contains_key(record.key) {
            self.state.keys.insert(record.key.to_vec(), BTreeMap::new());
        }
        let slots = self
            .state
            .keys
            .get_mut(record.key)
            .expect("inserted above if missing");
        for window in windows {
            let (slot, new) = match slots.entry(window.end) {
                Entry::Occupied(slot) => (slot.into_mut(), false),
                Entry::Vacant(slot) => {
                    let acc = self.aggregate.create();
                    let slot = slot.insert(Slot {
                        start: window.start,
                        fired: false,
                        acc,
                    });
                    (slot, true)
                }
            };
            self.aggregate.add(&mut slot.acc, record)?;
            let last = window.max_timestamp();
            if watermark >= last {
                // Late, within the lateness: the updated result goes out at once.
                let value = self.aggregate.result(window, &slot.acc)?;
                out.emit(record.key, &value, last);
                if !slot.fired {
                    slot.fired = true;
                    set(out, CLEAN_UP, last.saturating_add(lateness), record.key);
                }
            } else if new {
                set(out, FIRE, last, record.key);
            }
        }
        Ok(true)
    }

    /// Adds `record` to its key's sessions, merging those its window overlaps or touches;
    /// returns whether it was kept.
    fn add_to_session(
        &mut self,
        record: &Record<'_>,
        gap: i64,
        watermark: i64,
        out: &mut Output,
    ) -> Result<bool> {
        let mut window = Window {
            start: record.timestamp,
            end: record.timestamp.saturating_add(gap),
        };
        // A key's sessions are disjoint, so ordered by end they are ordered by start too.
        let merging: Vec<i64> = match self.state.keys.get(record.key) {
            Some(slots) => (slots.range(window.start..))
                .take_while(|(_, slot)| slot.start <= window.end)
                .map(|(end, _)| *end)
                .collect(),
            None => Vec::new(),
        };
        // A kept session is within its lateness, and merging only makes it end later: only a
        // record that merges with none can be too late.
        if merging.is_empty() && self.is_dropped(window, watermark) {
            return Ok(false);
        }
        let lateness = self.spec.lateness;
        let slots = self.state.keys.entry(record.key.to_vec()).or_default();
        let mut merged: Option<A::Acc> = None;
        for end in merging {
            let Some(slot) = slots.remove(&end) else {
                continue;
            };
            window.start = window.start.min(slot.start);
            window.end = window.end.max(end);
            // The merged window has one timer of its own, set below.
            let last = end - 1;
            if slot.fired {
                delete(out, CLEAN_UP, last.saturating_add(lateness), record.key);
            } else {
                delete(out, FIRE, last, record.key);
            }
            match &mut merged {
                None => merged = Some(slot.acc),
                Some(acc) => self.aggregate.merge(acc, slot.acc),
            }
        }
        let mut acc = merged.unwrap_or_else(|| self.aggregate.create());
        self.aggregate.add(&mut acc, record)?;
        let last = window.max_timestamp();
        let fired = watermark >= last;
        if fired {
            // Late, within the lateness (which is then positive): the result goes out at once.
            let value = self.aggregate.result(window, &acc)?;
            out.emit(record.key, &value, last);
            set(out, CLEAN_UP, last.saturating_add(lateness), record.key);
        } else {
            set(out, FIRE, last, record.key);
        }
        slots.insert(
            window.end,
            Slot {
                start: window.start,
                fired,
                acc,
            },
        );
        Ok(true)
    }

    /// The fire timer of `key` at `last` fired: the window ending at `last + 1` emits its
    /// result and is dropped, or kept for its lateness.
    fn fire(&mut self, key: &[u8], last: i64, out: &mut Output) -> Result<()> {
        let lateness = self.spec.lateness;
        let Some(end) = last.checked_add(1) else {
            return Ok(());
        };
        let Some(slots) = self.state.keys.get_mut(key) else {
            return Ok(());
        };
        let Some(slot) = slots.get_mut(&end) else {
            return Ok(());
        };
        if slot.fired {
            return Ok(());
        }
        let window = Window {
            start: slot.start,
            end,
        };
        let value = self.aggregate.result(window, &slot.acc)?;
        out.emit(key, &value, last);
        if lateness == 0 {
            slots.remove(&end);
            if slots.is_empty() {
                self.state.keys.remove(key);
            }
        } else {
            slot.fired = true;
            set(out, CLEAN_UP, last.saturating_add(lateness), key);
        }
        Ok(())
    }

    /// The clean-up timer of `key` at `time` fired: its fired windows whose lateness is over by
    /// then are dropped.
    fn clean_up(&mut self, key: &[u8], time: i64) {
        let lateness = self.spec.lateness;
        let Some(slots) = self.state.keys.get_mut(key) else {
            return;
        };
        slots.retain(|end, slot| !(slot.fired && (end - 1).saturating_add(lateness) <= time));
        if slots.is_empty() {
            self.state.keys.remove(key);
        }
    }
}

/// Checkpoints the windows of every key and the late-record count. A restore fails when the
/// snapshot was taken with another assigner or lateness: its windows and the host's timers for
/// them would not fit the new ones. The late output may change.
impl<A: Aggregate> State for Windows<A> {
    fn snapshot(&self) -> Result<Vec<u8>> {
        rescalable::snapshot(&self.state, 0, TIMER_KEY_PREFIX)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        let restored: WindowState<A::Acc> = rescalable::restore(bytes)?;
        if (restored.assigner, restored.lateness) != (self.spec.assigner, self.spec.lateness) {
            return Err(Error::msg(format!(
                "the snapshot holds windows `{} lateness {}`, but these are `{} lateness {}`: \
                 windows and their timers do not carry over to other windows",
                restored.assigner, restored.lateness, self.spec.assigner, self.spec.lateness
            )));
        }
        self.state = restored;
        Ok(())
    }
}

/// The windows of `size` starting at multiples of `slide` that contain `timestamp`, earliest
/// first. Computed in `i128`, so no timestamp overflows; a window that would end after
/// `i64::MAX` ends there (and one that would start before `i64::MIN` starts there), and windows
/// that so end alike are one.
fn aligned_windows(timestamp: i64, size: i64, slide: i64) -> impl Iterator<Item = Window> {
    let (timestamp, size, slide) = (i128::from(timestamp), i128::from(size), i128::from(slide));
    // The first start after `timestamp - size`: floor division, so negative times align too.
    let first = ((timestamp - size).div_euclid(slide) + 1) * slide;
    let clamp = |t: i128| t.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    let mut previous_end = None;
    (0..)
        .map(move |i| first + i * slide)
        .take_while(move |start| *start <= timestamp)
        .map(move |start| Window {
            start: clamp(start),
            end: clamp(start + size),
        })
        .filter(move |window| previous_end.replace(window.end) != Some(window.end))
}

/// The key of a window timer: its kind, then the record key.
fn timer_key(kind: u8, key: &[u8]) -> Vec<u8> {
    let mut timer = Vec::with_capacity(1 + key.len());
    timer.push(kind);
    timer.extend_from_slice(key);
    timer
}

/// Sets the event-time timer of kind `kind` for `key` at `time`.
fn set(out: &mut Output, kind: u8, time: i64, key: &[u8]) {
    out.set_timer(TimeDomain::Event, time, &timer_key(kind, key));
}

/// Deletes the event-time timer of kind `kind` for `key` at `time`.
fn delete(out: &mut Output, kind: u8, time: i64, key: &[u8]) {
    out.delete_timer(TimeDomain::Event, time, &timer_key(kind, key));
}

#[cfg(test)]
mod tests;
