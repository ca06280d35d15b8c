//! Testing operators natively, through the same codec path as the wasm build.
//!
//! [`Harness`] drives one operator instance the way the host does: the [`Context`] is encoded
//! into an init message and decoded again, every input is encoded with `BatchBuilder` and decoded
//! with `Batch::decode`, and output is collected in the batches the guest would hand to `emit`
//! and `emit_to`, then decoded into [`OwnedRecord`]s. Only the pointer code of the wasm build is
//! left out.
//!
//! Event time (`docs/ABI.md` §15) is the host's, so the harness emulates that part of the host
//! too: it keeps the instance's timers in the host's own timer set, moves the watermark and a
//! processing-time clock when the test says, and fires due timers with the host's order,
//! batching and rounds, so an operator that passes here sees the same calls in a job.
//!
//! [`assert_records_eq`] compares outputs with a readable diff, and
//! [`assert_restore_preserves_output`] and [`assert_restore_preserves_steps`] check that
//! checkpointing an operator does not change what it emits.

pub(crate) mod host;

use core::fmt;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use weir_abi::key_group::{DEFAULT_MAX_PARALLELISM, KeyGroups, key_group};
use weir_abi::rescalable;
use weir_abi::time::{END_OF_TIME, NO_WATERMARK};
use weir_abi::{Batch, BatchBuilder, Record, TimeDomain, Timers};

pub(crate) use self::host::EmulatedHost;
use self::host::KeyedEntries;
use crate::output::{Output, Sink};
use crate::{Context, Error, Operator, Result, State, dispatch};

/// A record that owns its bytes, for building test input and comparing output.
///
/// Its `Debug` output shows keys and values as text when they are printable UTF-8, in hex
/// (`0x…`) otherwise.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnedRecord {
    /// The key; empty when the record has none.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Event time in milliseconds.
    pub timestamp: i64,
}

impl OwnedRecord {
    /// A record with copies of `key` and `value`.
    pub fn new(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, timestamp: i64) -> Self {
        OwnedRecord {
            key: key.as_ref().to_vec(),
            value: value.as_ref().to_vec(),
            timestamp,
        }
    }

    /// The record borrowed as the ABI's [`Record`].
    pub fn as_record(&self) -> Record<'_> {
        Record {
            key: &self.key,
            value: &self.value,
            timestamp: self.timestamp,
        }
    }
}

/// Shorthand for [`OwnedRecord::new`]: `record("word", "1", 5)`.
pub fn record(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, timestamp: i64) -> OwnedRecord {
    OwnedRecord::new(key, value, timestamp)
}

impl From<Record<'_>> for OwnedRecord {
    fn from(record: Record<'_>) -> Self {
        OwnedRecord::new(record.key, record.value, record.timestamp)
    }
}

impl fmt::Debug for OwnedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedRecord")
            .field("key", &Bytes(&self.key))
            .field("value", &Bytes(&self.value))
            .field("timestamp", &self.timestamp)
            .finish()
    }
}

/// Bytes shown as a quoted string when printable UTF-8, as hex otherwise.
struct Bytes<'a>(&'a [u8]);

impl fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match core::str::from_utf8(self.0) {
            Ok(text) if !text.chars().any(char::is_control) => write!(f, "{text:?}"),
            _ => {
                f.write_str("0x")?;
                self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
            }
        }
    }
}

/// Most timers the host passes in one `weir_on_timers` call (docs/ABI.md §15).
pub const MAX_TIMERS_PER_CALL: usize = 1024;

/// Most rounds of firing one advance of a time may take before the host fails the guest
/// (docs/ABI.md §15): a guest that always sets a new due timer never lets time move.
pub const MAX_FIRING_ROUNDS: usize = 64;

/// One operator instance, driven natively the way the host drives a guest.
///
/// Besides the operator it keeps what the host keeps for an instance (docs/ABI.md §15): its
/// timers, the task's watermark, a processing-time clock (starting at 0) and what it emitted on
/// side outputs. A test moves time with [`advance_watermark`](Self::advance_watermark) and
/// [`advance_processing_time`](Self::advance_processing_time), which fire due timers exactly as
/// the host does, and [`finish`](Self::finish) ends the input the host's way.
///
/// Every method returns the operator's error if it fails, so a test can return
/// [`weir_sdk::Result`](crate::Result) and use `?`, or check the error. What a failed call
/// emitted is dropped, as the host drops it.
pub struct Harness<T> {
    /// The context the instance was created with; fresh instances get it too.
    context: Context,
    /// The instance under test.
    operator: T,
    /// The instance's output; behind it, the emulated host, which keeps the timers and times.
    output: Output,
    /// Everything emitted on each side output so far, by name.
    side_outputs: BTreeMap<String, Vec<OwnedRecord>>,
}

/// A checkpoint as the host takes it: the operator's snapshot and the host's state for the
/// instance (its timers and the watermark), from [`Harness::checkpoint`].
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The operator's snapshot.
    state: Vec<u8>,
    /// The instance's timers, per domain.
    timers: [Timers; 2],
    /// The task's watermark.
    watermark: i64,
    /// The host-kept keyed state ([`crate::host_state`]).
    keyed: KeyedEntries,
}

impl Checkpoint {
    /// The operator's snapshot, as [`Harness::snapshot`] returns it.
    pub fn state(&self) -> &[u8] {
        &self.state
    }
}

impl<T: Operator + State> Harness<T> {
    /// Creates an instance from `context`, through an encoded init message.
    pub fn new(context: Context) -> Result<Self> {
        let operator = dispatch::init::<T>(&context.encode_init())?;
        Ok(Harness {
            context,
            operator,
            output: Output::new(Sink::Emulated(EmulatedHost::new())),
            side_outputs: BTreeMap::new(),
        })
    }

    /// The context the instance was created with.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The instance under test, to inspect its fields.
    pub fn operator(&self) -> &T {
        &self.operator
    }

    /// Processes a batch of one record on port 0 and returns what the operator emitted.
    pub fn push(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        timestamp: i64,
    ) -> Result<Vec<OwnedRecord>> {
        let mut batch = BatchBuilder::new(0);
        batch.push(key.as_ref(), value.as_ref(), timestamp);
        self.push_batch(batch.as_bytes())
    }

    /// Processes one batch of `records` arriving on input `port` and returns what the operator
    /// emitted.
    pub fn push_on(&mut self, port: u32, records: &[OwnedRecord]) -> Result<Vec<OwnedRecord>> {
        let mut batch = BatchBuilder::new(port);
        for record in records {
            batch.push_record(&record.as_record());
        }
        self.push_batch(batch.as_bytes())
    }

    /// Processes an encoded batch, as the host passes it to `weir_process`, and returns what
    /// the operator emitted. Malformed bytes fail as they would in wasm.
    pub fn push_batch(&mut self, batch: &[u8]) -> Result<Vec<OwnedRecord>> {
        self.call(|operator, out| dispatch::process(operator, batch, out))
    }

    /// Processes an encoded batch and returns the encoded batches the operator emitted on its
    /// main output, as the host receives them from `emit`: no decoding, no check. For
    /// benchmarks that compare an operator compiled natively with its wasm build doing the
    /// same work; tests want [`push_batch`](Self::push_batch).
    pub fn push_batch_encoded(&mut self, batch: &[u8]) -> Result<Vec<Vec<u8>>> {
        let result = dispatch::process(&mut self.operator, batch, &mut self.output);
        let host = self.output.emulated();
        let (emitted, _) = (host.take_emitted(), host.take_emitted_to());
        result.map(|()| emitted)
    }

    /// Runs one [`Step`] and returns what the operator emitted on its main output.
    pub fn step(&mut self, step: &Step) -> Result<Vec<OwnedRecord>> {
        match step {
            Step::Record(record) => self.push_on(0, core::slice::from_ref(record)),
            Step::Watermark(watermark) => self.advance_watermark(*watermark),
            Step::ProcessingTime(time) => self.advance_processing_time(*time),
        }
    }

    /// Advances the task's watermark to `watermark`, as the host does when its inputs'
    /// watermarks move, and returns what the operator emitted.
    ///
    /// The event-time timers at or before `watermark` fire, in rounds: each round hands the
    /// timers due when it starts to [`Operator::on_timers`] in timestamp order, ties by key, at
    /// most [`MAX_TIMERS_PER_CALL`] per call, and timers set while they fire that are due fire
    /// in the next round. More than [`MAX_FIRING_ROUNDS`] rounds fail. While they fire,
    /// [`Output::watermark`] is already `watermark`. Then [`Operator::on_watermark`] runs.
    ///
    /// A watermark equal to the current one is no advance: nothing is called. One before it
    /// fails: watermarks never move back.
    pub fn advance_watermark(&mut self, watermark: i64) -> Result<Vec<OwnedRecord>> {
        let current = self.watermark();
        if watermark < current {
            return Err(Error::msg(format!(
                "the watermark cannot move back, from {current} to {watermark}"
            )));
        }
        if watermark == current {
            return Ok(Vec::new());
        }
        self.output.emulated().set_watermark(watermark);
        let mut emitted = self.fire(TimeDomain::Event, watermark)?;
        emitted
            .extend(self.call(|operator, out| dispatch::on_watermark(operator, watermark, out))?);
        Ok(emitted)
    }

    /// Sets the harness's processing-time clock to `time` (milliseconds; it starts at 0) and
    /// fires the processing-time timers at or before it, in rounds as
    /// [`advance_watermark`](Self::advance_watermark) fires event-time ones (without calling
    /// `on_watermark`); returns what the operator emitted. Moving the clock back fails.
    pub fn advance_processing_time(&mut self, time: i64) -> Result<Vec<OwnedRecord>> {
        let clock = self.processing_time();
        if time < clock {
            return Err(Error::msg(format!(
                "the harness's clock cannot move back, from {clock} to {time}"
            )));
        }
        self.output.emulated().set_clock(time);
        self.fire(TimeDomain::Processing, time)
    }

    /// Ends every input, as the host does, and returns what the operator emitted: the
    /// watermark advances to [`END_OF_TIME`] (`i64::MAX`), firing every event-time timer, then
    /// [`Operator::on_watermark`] runs with it, then [`Operator::finish`]. Processing-time
    /// timers still set are dropped.
    pub fn finish(&mut self) -> Result<Vec<OwnedRecord>> {
        let mut emitted = self.advance_watermark(END_OF_TIME)?;
        self.output
            .emulated()
            .timers_mut(TimeDomain::Processing)
            .clear();
        emitted.extend(self.call(|operator, out| dispatch::finish(operator, out))?);
        Ok(emitted)
    }

    /// Tells the operator that checkpoints up to `checkpoint_id` are durable.
    pub fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        self.operator.checkpoint_complete(checkpoint_id)
    }

    /// The task's current watermark: [`NO_WATERMARK`](crate::NO_WATERMARK) until the first
    /// advance.
    pub fn watermark(&self) -> i64 {
        self.output.emulated_ref().current_time(TimeDomain::Event)
    }

    /// The harness's processing-time clock.
    pub fn processing_time(&self) -> i64 {
        self.output
            .emulated_ref()
            .current_time(TimeDomain::Processing)
    }

    /// The timers of `domain` that are set, in firing order.
    pub fn pending_timers(&self, domain: TimeDomain) -> &Timers {
        self.output.emulated_ref().timers(domain)
    }

    /// Every record the operator emitted on the side output `name` so far, in order (empty
    /// when it emitted none). Kept across restores: it is output, not state.
    pub fn side_output(&self, name: &str) -> &[OwnedRecord] {
        self.side_outputs.get(name).map_or(&[], Vec::as_slice)
    }

    /// The operator's state, as the host would store it.
    pub fn snapshot(&self) -> Result<Vec<u8>> {
        self.operator.snapshot()
    }

    /// Replaces the instance by a fresh one, created with the same context and then restored
    /// from `snapshot` — what a job restart does to the guest.
    ///
    /// The host's state for the instance (timers, watermark, clock) is left as it is, as if
    /// `snapshot` had just been taken; [`restore_checkpoint`](Self::restore_checkpoint) puts
    /// back the host's state of an earlier checkpoint too.
    pub fn restore_into_fresh(&mut self, snapshot: &[u8]) -> Result<()> {
        let mut fresh = dispatch::init::<T>(&self.context.encode_init())?;
        fresh.restore(snapshot)?;
        self.operator = fresh;
        Ok(())
    }

    /// Snapshots the instance and replaces it by a fresh one restored from the snapshot; the
    /// host's timers carry over, as the host restores them.
    pub fn snapshot_and_restore(&mut self) -> Result<()> {
        let snapshot = self.snapshot()?;
        self.restore_into_fresh(&snapshot)
    }

    /// Takes a checkpoint the way the host does: the operator's snapshot and the host's state
    /// for the instance, its timers and the watermark.
    pub fn checkpoint(&self) -> Result<Checkpoint> {
        let state = self.snapshot()?;
        let (timers, watermark) = self.output.emulated_ref().checkpoint();
        Ok(Checkpoint {
            state,
            timers,
            watermark,
            keyed: self.output.emulated_ref().keyed().clone(),
        })
    }

    /// Restores `checkpoint` the way a job restart does: a fresh instance restored from its
    /// snapshot, and the host's timers and watermark as they were. The clock is not rewound
    /// (it is a clock), nor the side outputs (they are output).
    pub fn restore_checkpoint(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        self.restore_into_fresh(&checkpoint.state)?;
        let host = self.output.emulated();
        host.restore(checkpoint.timers.clone(), checkpoint.watermark);
        host.set_keyed(checkpoint.keyed.clone());
        Ok(())
    }

    /// Splits and merges the checkpoints of an operator's subtasks (one per subtask, in order,
    /// taken at parallelism `checkpoints.len()`) for `parallelism` subtasks, the way the host
    /// does when a job is restored at another parallelism (docs/ABI.md §16): keyed state by
    /// the key group of its key among `max_parallelism`, list state in shares, union state to
    /// every subtask, timers with their key, and the smallest watermark. Returns one fresh
    /// instance per new subtask, restored, its context `context` with its subtask index.
    ///
    /// Fails, as the host refuses the restore, when a state is not in the rescalable layout
    /// (an operator without [`Keyed`](crate::Keyed), [`ListState`](crate::ListState) or
    /// [`UnionState`](crate::UnionState) fields that keeps state).
    pub fn rescale(
        context: &Context,
        checkpoints: &[Checkpoint],
        parallelism: u32,
        max_parallelism: u32,
    ) -> Result<Vec<Harness<T>>> {
        let old_p = u32::try_from(checkpoints.len()).unwrap_or(u32::MAX);
        let groups = |p| {
            KeyGroups::new(max_parallelism, p).ok_or_else(|| {
                Error::msg(format!(
                    "parallelism {p} is not between 1 and the max_parallelism {max_parallelism}"
                ))
            })
        };
        let (old, new) = (groups(old_p)?, groups(parallelism)?);
        let states: Vec<&[u8]> = checkpoints.iter().map(|c| c.state.as_slice()).collect();
        let rescaled = rescalable::rescale(&states, old, new)
            .map_err(|e| Error::msg(format!("the host would refuse this rescale: {e}")))?;
        let prefix = usize::from(rescaled.timer_key_prefix);
        let watermark = checkpoints
            .iter()
            .map(|c| c.watermark)
            .min()
            .unwrap_or(NO_WATERMARK);
        let mut timers: Vec<[Timers; 2]> = (0..parallelism).map(|_| Default::default()).collect();
        for checkpoint in checkpoints {
            for (domain, set) in checkpoint.timers.iter().enumerate() {
                for (timestamp, key) in set.iter() {
                    let placed = key.get(prefix..).ok_or_else(|| {
                        Error::msg(format!(
                            "a timer key of {} bytes is shorter than the timer-key prefix of \
                             {prefix} bytes the state declares",
                            key.len()
                        ))
                    })?;
                    let owner = new.owner(key_group(placed, max_parallelism)) as usize;
                    timers[owner][domain].set(timestamp, key);
                }
            }
        }
        // Host-kept keyed state goes where its key's group goes, as the host splits its stores.
        let mut keyed: Vec<KeyedEntries> = (0..parallelism).map(|_| KeyedEntries::new()).collect();
        for checkpoint in checkpoints {
            for ((state, key), value) in &checkpoint.keyed {
                let owner = new.owner(key_group(key, max_parallelism)) as usize;
                keyed[owner].insert((*state, key.clone()), value.clone());
            }
        }
        (0..parallelism)
            .zip(rescaled.states)
            .zip(timers)
            .zip(keyed)
            .map(|(((subtask, state), timers), keyed)| {
                let context = context.clone().with_subtask(subtask, parallelism);
                let mut harness = Harness::<T>::new(context)?;
                harness.restore_checkpoint(&Checkpoint {
                    state,
                    timers,
                    watermark,
                    keyed,
                })?;
                Ok(harness)
            })
            .collect()
    }

    /// Fires the timers of `domain` due at `time`, in rounds (see
    /// [`advance_watermark`](Self::advance_watermark)); returns what the operator emitted.
    fn fire(&mut self, domain: TimeDomain, time: i64) -> Result<Vec<OwnedRecord>> {
        let mut emitted = Vec::new();
        let mut rounds = 0;
        loop {
            let due = (self.output.emulated_ref().timers(domain).iter())
                .take_while(|(timestamp, _)| *timestamp <= time)
                .count();
            if due == 0 {
                return Ok(emitted);
            }
            rounds += 1;
            if rounds > MAX_FIRING_ROUNDS {
                return Err(Error::msg(format!(
                    "{} timers were still due at {time} after {MAX_FIRING_ROUNDS} rounds of \
                     firing: the operator keeps setting timers at or before the time they fire \
                     at (docs/ABI.md §15)",
                    domain.name()
                )));
            }
            let mut left = due;
            while left > 0 {
                let fired = (self.output.emulated().timers_mut(domain))
                    .pop_due(time, left.min(MAX_TIMERS_PER_CALL));
                if fired.is_empty() {
                    break; // the operator deleted the rest of the round's timers
                }
                left -= fired.len();
                let mut batch = BatchBuilder::new(domain.code());
                for (timestamp, key) in &fired {
                    batch.push(key, &[], *timestamp);
                }
                emitted.extend(
                    self.call(|operator, out| {
                        dispatch::on_timers(operator, batch.as_bytes(), out)
                    })?,
                );
            }
        }
    }

    /// Runs one call of the operator and returns what it emitted on its main output, keeping
    /// what it emitted on side outputs; checks the batches as the host would. A failed call's
    /// output is dropped.
    fn call(
        &mut self,
        f: impl FnOnce(&mut T, &mut Output) -> Result<()>,
    ) -> Result<Vec<OwnedRecord>> {
        let result = f(&mut self.operator, &mut self.output);
        let host = self.output.emulated();
        let (main, sides) = (host.take_emitted(), host.take_emitted_to());
        result?;
        let mut records = Vec::new();
        for bytes in main {
            decode_output(&bytes, "", &mut records)?;
        }
        for (name, bytes) in sides {
            decode_output(
                &bytes,
                &name,
                self.side_outputs.entry(name.clone()).or_default(),
            )?;
        }
        Ok(records)
    }
}

/// Decodes one output batch into `records`, checking it as the host would; `name` is the side
/// output's, or empty for the main output.
fn decode_output(bytes: &[u8], name: &str, records: &mut Vec<OwnedRecord>) -> Result<()> {
    let output = if name.is_empty() {
        String::new()
    } else {
        format!(" on side output `{name}`")
    };
    let batch = Batch::decode(bytes).map_err(|e| {
        Error::msg(format!(
            "the operator emitted a malformed batch{output}: {e}"
        ))
    })?;
    if batch.port() != 0 {
        return Err(Error::msg(format!(
            "the operator emitted a batch{output} whose port is not 0"
        )));
    }
    records.extend(batch.iter().map(OwnedRecord::from));
    Ok(())
}

/// One thing that happens to an operator in a scripted run: what
/// [`assert_restore_preserves_steps`] replays, and [`Harness::step`] runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// A batch of this one record arrives on port 0.
    Record(OwnedRecord),
    /// The watermark advances to this ([`Harness::advance_watermark`]).
    Watermark(i64),
    /// The processing-time clock moves to this ([`Harness::advance_processing_time`]).
    ProcessingTime(i64),
}

/// Asserts that two record lists are equal; otherwise panics showing the first index at which
/// they differ, the two records there, and both lists.
#[track_caller]
pub fn assert_records_eq(actual: &[OwnedRecord], expected: &[OwnedRecord]) {
    if let Some(diff) = diff(("actual", actual), ("expected", expected)) {
        panic!("{diff}");
    }
}

/// Asserts that snapshotting an operator and restoring it into a fresh instance does not change
/// its output.
///
/// Runs `input` through a new instance one record per batch, then calls `finish`. Runs it again
/// through another instance, this time replacing the instance by a fresh one restored from its
/// snapshot after every `every`-th record. Panics with a diff if the two outputs differ (main
/// or side), or if the operator fails. `checkpoint_complete` is not called in either run.
#[track_caller]
pub fn assert_restore_preserves_output<T: Operator + State>(
    context: &Context,
    input: &[OwnedRecord],
    every: usize,
) {
    let steps: Vec<Step> = input.iter().cloned().map(Step::Record).collect();
    assert_restore_preserves(context, &steps, every, "record(s)", run::<T>);
}

/// Like [`assert_restore_preserves_output`], for a run of [`Step`]s: records, watermarks and
/// clock moves. The instance is restored after every `every`-th step; the host's timers carry
/// over each restore, as the host restores them.
#[track_caller]
pub fn assert_restore_preserves_steps<T: Operator + State>(
    context: &Context,
    steps: &[Step],
    every: usize,
) {
    assert_restore_preserves(context, steps, every, "step(s)", run::<T>);
}

/// Asserts that rescaling an operator does not change its output for any key.
///
/// Runs `input` through one instance, one record per batch, then calls `finish`. Runs it again
/// through `from` instances, each record sent to the one its key routes to (key groups among
/// [`DEFAULT_MAX_PARALLELISM`]), checkpoints them all halfway, [rescales](Harness::rescale)
/// the checkpoints to `to` instances and runs the rest there. Panics with a diff if a key's
/// records differ between the two runs (main or side outputs; records of different keys may
/// interleave differently), or if the operator fails or its state cannot be rescaled.
#[track_caller]
pub fn assert_rescale_preserves_output<T: Operator + State>(
    context: &Context,
    input: &[OwnedRecord],
    from: u32,
    to: u32,
) {
    let steps: Vec<Step> = input.iter().cloned().map(Step::Record).collect();
    assert_rescale_preserves_steps::<T>(context, &steps, from, to);
}

/// Like [`assert_rescale_preserves_output`], for a run of [`Step`]s: each record goes to the
/// instance its key routes to, and watermarks and clock moves to every instance, as every
/// subtask of an operator sees them. The rescale happens after half the steps.
#[track_caller]
pub fn assert_rescale_preserves_steps<T: Operator + State>(
    context: &Context,
    steps: &[Step],
    from: u32,
    to: u32,
) {
    let straight = run::<T>(context, steps, None)
        .unwrap_or_else(|e| panic!("the run without a rescale failed: {e}"));
    let rescaled = run_rescaled::<T>(context, steps, from, to)
        .unwrap_or_else(|e| panic!("the run rescaled from {from} to {to} instances failed: {e}"));
    let names: BTreeSet<&String> = straight.1.keys().chain(rescaled.1.keys()).collect();
    let side = |sides: &BTreeMap<String, Vec<OwnedRecord>>, name: &String| {
        sides.get(name).cloned().unwrap_or_default()
    };
    let outputs = [(
        "main output".to_string(),
        straight.0.clone(),
        rescaled.0.clone(),
    )]
    .into_iter()
    .chain(names.into_iter().map(|name| {
        let what = format!("side output `{name}`");
        (what, side(&straight.1, name), side(&rescaled.1, name))
    }));
    for (what, straight, rescaled) in outputs {
        let (straight, rescaled) = (by_key(&straight), by_key(&rescaled));
        let none = Vec::new();
        for key in straight
            .keys()
            .chain(rescaled.keys())
            .collect::<BTreeSet<_>>()
        {
            let s = straight.get(key).unwrap_or(&none);
            let r = rescaled.get(key).unwrap_or(&none);
            if let Some(diff) = diff(("rescaled", r), ("not rescaled", s)) {
                panic!(
                    "the {what} of key {:?} changes when the operator is rescaled from {from} \
                     to {to} instances halfway\n{diff}",
                    String::from_utf8_lossy(key)
                );
            }
        }
    }
}

/// Runs `steps` through `from` instances, rescales them to `to` halfway, finishes them all;
/// returns everything emitted, in no particular order across instances.
fn run_rescaled<T: Operator + State>(
    context: &Context,
    steps: &[Step],
    from: u32,
    to: u32,
) -> Result<RunOutput> {
    let groups = |p| {
        KeyGroups::new(DEFAULT_MAX_PARALLELISM, p).ok_or_else(|| {
            Error::msg(format!(
                "parallelism {p} is not between 1 and {DEFAULT_MAX_PARALLELISM}"
            ))
        })
    };
    let (before, after) = steps.split_at(steps.len() / 2);
    let mut output = Vec::new();
    let mut sides = BTreeMap::<String, Vec<OwnedRecord>>::new();
    let mut harnesses = (0..from)
        .map(|i| Harness::<T>::new(context.clone().with_subtask(i, from)))
        .collect::<Result<Vec<_>>>()?;
    for (part, parallelism) in [(before, from), (after, to)] {
        if parallelism != harnesses.len() as u32 {
            let checkpoints = harnesses
                .iter()
                .map(Harness::checkpoint)
                .collect::<Result<Vec<_>>>()?;
            for harness in &mut harnesses {
                take_sides(harness, &mut sides);
            }
            harnesses =
                Harness::rescale(context, &checkpoints, parallelism, DEFAULT_MAX_PARALLELISM)?;
        }
        let groups = groups(parallelism)?;
        for step in part {
            match step {
                Step::Record(record) => {
                    let harness = &mut harnesses[groups.subtask(&record.key) as usize];
                    output.extend(harness.step(step)?);
                }
                _ => {
                    for harness in &mut harnesses {
                        output.extend(harness.step(step)?);
                    }
                }
            }
        }
    }
    for harness in &mut harnesses {
        output.extend(harness.finish()?);
        take_sides(harness, &mut sides);
    }
    Ok((output, sides))
}

/// Moves what `harness` emitted on side outputs into `sides`.
fn take_sides<T>(harness: &mut Harness<T>, sides: &mut BTreeMap<String, Vec<OwnedRecord>>) {
    for (name, records) in std::mem::take(&mut harness.side_outputs) {
        sides.entry(name).or_default().extend(records);
    }
}

/// `records` by key, each key's in order.
fn by_key(records: &[OwnedRecord]) -> BTreeMap<Vec<u8>, Vec<OwnedRecord>> {
    let mut keys: BTreeMap<Vec<u8>, Vec<OwnedRecord>> = BTreeMap::new();
    for record in records {
        keys.entry(record.key.clone())
            .or_default()
            .push(record.clone());
    }
    keys
}

/// What a run emitted: on the main output, and on each side output.
type RunOutput = (Vec<OwnedRecord>, BTreeMap<String, Vec<OwnedRecord>>);

#[track_caller]
fn assert_restore_preserves(
    context: &Context,
    steps: &[Step],
    every: usize,
    unit: &str,
    run: fn(&Context, &[Step], Option<usize>) -> Result<RunOutput>,
) {
    assert!(
        every > 0,
        "restore after every 0 {unit}: `every` must be at least 1"
    );
    let (straight, straight_sides) = match run(context, steps, None) {
        Ok(output) => output,
        Err(e) => panic!("the run without restores failed: {e}"),
    };
    let (restored, restored_sides) = match run(context, steps, Some(every)) {
        Ok(output) => output,
        Err(e) => panic!("the run restoring after every {every} {unit} failed: {e}"),
    };
    if let Some(diff) = diff(("with restores", &restored), ("without", &straight)) {
        panic!(
            "output changes when the operator is restored into a fresh instance after every \
             {every} {unit}\n{diff}"
        );
    }
    let names: BTreeSet<&String> = straight_sides.keys().chain(restored_sides.keys()).collect();
    for name in names {
        let side = |sides: &BTreeMap<String, Vec<OwnedRecord>>| {
            sides.get(name).cloned().unwrap_or_default()
        };
        let (restored, straight) = (side(&restored_sides), side(&straight_sides));
        if let Some(diff) = diff(("with restores", &restored), ("without", &straight)) {
            panic!(
                "side output `{name}` changes when the operator is restored into a fresh \
                 instance after every {every} {unit}\n{diff}"
            );
        }
    }
}

/// Runs `steps` through a new instance, restoring it after every `every` steps when asked to,
/// then finishes; returns everything emitted.
fn run<T: Operator + State>(
    context: &Context,
    steps: &[Step],
    restore_every: Option<usize>,
) -> Result<RunOutput> {
    let mut harness = Harness::<T>::new(context.clone())?;
    let mut output = Vec::new();
    for (index, step) in steps.iter().enumerate() {
        output.extend(harness.step(step)?);
        if restore_every.is_some_and(|every| (index + 1) % every == 0) {
            harness.snapshot_and_restore()?;
        }
    }
    output.extend(harness.finish()?);
    Ok((output, harness.side_outputs))
}

/// Most records of each side a diff lists.
const DIFF_LISTED: usize = 50;

/// Describes how `left` and `right` differ, or `None` if they are equal.
fn diff(
    (left_name, left): (&str, &[OwnedRecord]),
    (right_name, right): (&str, &[OwnedRecord]),
) -> Option<String> {
    let index = (0..left.len().max(right.len())).find(|&i| left.get(i) != right.get(i))?;
    let width = left_name.len().max(right_name.len()) + 1;
    let mut text = format!(
        "records differ at index {index} ({left_name}: {} records, {right_name}: {})\n",
        left.len(),
        right.len()
    );
    for (name, records) in [(left_name, left), (right_name, right)] {
        let at = match records.get(index) {
            Some(record) => format!("{record:?}"),
            None => "(no record)".to_owned(),
        };
        let _ = writeln!(text, "  {:width$} {at}", format!("{name}:"));
    }
    for (name, records) in [(left_name, left), (right_name, right)] {
        let _ = writeln!(text, "{name}:");
        for (i, record) in records.iter().enumerate().take(DIFF_LISTED) {
            let marker = if i == index { '>' } else { ' ' };
            let _ = writeln!(text, " {marker}{i:4}: {record:?}");
        }
        if records.len() > DIFF_LISTED {
            let _ = writeln!(text, "   … {} more", records.len() - DIFF_LISTED);
        }
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::{Batch, FiredTimers, bail};

    /// Emits each value with a running total of value lengths; fails on the value "boom".
    #[derive(Serialize, Deserialize)]
    struct Total {
        bytes: u64,
        port_seen: Option<u32>,
    }

    impl Operator for Total {
        fn init(ctx: &Context) -> Result<Self> {
            if ctx.config_str()? == "refuse" {
                bail!("operator `{}` refuses to start", ctx.operator());
            }
            Ok(Total {
                bytes: 0,
                port_seen: None,
            })
        }

        fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
            self.port_seen = Some(input.port());
            for record in input {
                out.emit(record.key, b"partial", record.timestamp);
                if record.value == b"boom" {
                    bail!("boom at {}", record.timestamp);
                }
                self.bytes += record.value.len() as u64;
                out.emit(
                    record.key,
                    self.bytes.to_string().as_bytes(),
                    record.timestamp,
                );
            }
            Ok(())
        }

        fn finish(&mut self, out: &mut Output) -> Result<()> {
            out.emit(b"total", self.bytes.to_string().as_bytes(), i64::MAX);
            Ok(())
        }
    }

    /// Forgets its state on restore: what `assert_restore_preserves_output` must catch.
    #[derive(Default)]
    struct Forgetful {
        seen: u64,
    }

    impl Operator for Forgetful {
        fn init(_ctx: &Context) -> Result<Self> {
            Ok(Forgetful::default())
        }

        fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
            for record in input {
                self.seen += 1;
                out.emit(
                    record.key,
                    self.seen.to_string().as_bytes(),
                    record.timestamp,
                );
            }
            Ok(())
        }
    }

    impl State for Forgetful {
        fn snapshot(&self) -> Result<Vec<u8>> {
            Ok(Vec::new())
        }

        fn restore(&mut self, _bytes: &[u8]) -> Result<()> {
            Ok(())
        }
    }

    fn harness() -> Harness<Total> {
        Harness::new(Context::new("total")).unwrap()
    }

    #[test]
    fn returns_what_each_call_emits() -> Result<()> {
        let mut h = harness();
        let out = h.push("a", "xyz", 1)?;
        assert_records_eq(&out, &[record("a", "partial", 1), record("a", "3", 1)]);
        let out = h.push_on(2, &[record("b", "", 2), record("c", "12", 3)])?;
        assert_eq!(out.len(), 4);
        assert_eq!(h.operator().port_seen, Some(2));
        assert_records_eq(&h.finish()?, &[record("total", "5", i64::MAX)]);
        Ok(())
    }

    #[test]
    fn drops_the_output_of_a_failed_call() {
        let mut h = harness();
        let err = h
            .push_on(0, &[record("a", "x", 1), record("a", "boom", 2)])
            .unwrap_err();
        assert_eq!(err.message(), "boom at 2");
        assert_records_eq(
            &h.push("a", "y", 3).unwrap(),
            &[record("a", "partial", 3), record("a", "2", 3)],
        );
    }

    #[test]
    fn init_errors_and_bad_contexts_surface_from_new() {
        let refused = Harness::<Total>::new(Context::new("t").with_config("refuse"));
        assert_eq!(
            refused.err().unwrap().message(),
            "operator `t` refuses to start"
        );
        let bad = Harness::<Total>::new(Context::new("t").with_subtask(3, 3));
        assert!(
            bad.err()
                .unwrap()
                .message()
                .starts_with("malformed init message")
        );
    }

    #[test]
    fn malformed_batches_fail_as_in_wasm() {
        let err = harness().push_batch(&[1, 0, 0, 0, 0, 0, 0, 0]).unwrap_err();
        assert!(
            err.message()
                .starts_with("malformed input batch: record 0 needs"),
            "{err}"
        );
    }

    #[test]
    fn restore_into_fresh_keeps_the_state() -> Result<()> {
        let mut h = harness();
        h.push("a", "abcd", 1)?;
        let snapshot = h.snapshot()?;
        h.push("a", "ef", 2)?;
        h.restore_into_fresh(&snapshot)?;
        assert_eq!(h.operator().bytes, 4);
        h.snapshot_and_restore()?;
        assert_eq!(h.operator().port_seen, Some(0));
        Ok(())
    }

    #[test]
    fn output_past_the_flush_threshold_comes_back_whole_and_in_order() -> Result<()> {
        let mut h = harness();
        let value = vec![b'v'; 200 * 1024];
        let input: Vec<_> = (0..12).map(|ts| record("k", &value, ts)).collect();
        let out = h.push_on(0, &input)?;
        assert_eq!(out.len(), 24);
        assert!(out.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
        Ok(())
    }

    #[test]
    fn restore_equivalence_holds_for_serde_state() {
        let input: Vec<_> = (0..7)
            .map(|i| record("k", "ab".repeat(i), i as i64))
            .collect();
        for every in 1..=3 {
            assert_restore_preserves_output::<Total>(&Context::new("total"), &input, every);
        }
    }

    #[test]
    #[should_panic(
        expected = "output changes when the operator is restored into a fresh \
                               instance after every 2 record(s)\nrecords differ at index 2"
    )]
    fn restore_equivalence_catches_lost_state() {
        let input: Vec<_> = (0..4).map(|i| record("k", "v", i)).collect();
        assert_restore_preserves_output::<Forgetful>(&Context::new("forgetful"), &input, 2);
    }

    /// Drives the time imports from its input: a record's value is a command (`set E 10`, `set
    /// P 5`, `del E 10`, `side NAME`, `fail`) applied to the record's key. Fired timers come
    /// out as records `fired DOMAIN at WATERMARK`, and the keys `forever` and `chain:N` set a
    /// due timer again when they fire (forever, or N more times).
    #[derive(Serialize, Deserialize)]
    struct Timed {
        timer_calls: Vec<usize>,
    }

    impl Operator for Timed {
        fn init(_ctx: &Context) -> Result<Self> {
            Ok(Timed {
                timer_calls: Vec::new(),
            })
        }

        fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
            for record in input {
                let command = core::str::from_utf8(record.value)?;
                let words: Vec<&str> = command.split(' ').collect();
                let domain = |code: &str| match code {
                    "E" => TimeDomain::Event,
                    _ => TimeDomain::Processing,
                };
                match words[..] {
                    ["set", code, ts] => out.set_timer(domain(code), ts.parse()?, record.key),
                    ["del", code, ts] => out.delete_timer(domain(code), ts.parse()?, record.key),
                    ["side", name] => out.emit_to(name, record.key, b"s", record.timestamp),
                    ["fail"] => bail!("asked to fail"),
                    _ => bail!("unknown command `{command}`"),
                }
            }
            Ok(())
        }

        fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
            self.timer_calls.push(timers.len());
            for timer in timers {
                let text = format!("fired {} at {}", timer.domain.name(), out.watermark());
                out.emit(timer.key, text.as_bytes(), timer.timestamp);
                let key = core::str::from_utf8(timer.key)?;
                if key == "forever" {
                    out.set_timer(timer.domain, timer.timestamp, timer.key);
                } else if let Some(n) = key.strip_prefix("chain:") {
                    let n: u32 = n.parse()?;
                    if n > 0 {
                        let next = format!("chain:{}", n - 1);
                        out.set_timer(timer.domain, timer.timestamp, next.as_bytes());
                    }
                }
            }
            Ok(())
        }

        fn on_watermark(&mut self, watermark: i64, out: &mut Output) -> Result<()> {
            out.emit(b"watermark", watermark.to_string().as_bytes(), watermark);
            Ok(())
        }

        fn finish(&mut self, out: &mut Output) -> Result<()> {
            out.emit(b"finish", b"", 0);
            out.set_timer(TimeDomain::Event, 1, b"too late");
            Ok(())
        }
    }

    fn timed() -> Harness<Timed> {
        Harness::new(Context::new("timed")).unwrap()
    }

    fn fired(key: &str, domain: &str, ts: i64, watermark: i64) -> OwnedRecord {
        record(key, format!("fired {domain} at {watermark}"), ts)
    }

    #[test]
    fn timers_fire_once_in_order_with_the_new_watermark_then_on_watermark_runs() -> Result<()> {
        let mut h = timed();
        assert_eq!(h.watermark(), i64::MIN);
        for (key, command) in [
            ("b", "set E 20"),
            ("z", "set E 10"),
            ("a", "set E 20"),
            ("a", "set E 20"),
            ("c", "set E 30"),
            ("c", "set P 15"),
        ] {
            h.push(key, command, 0)?;
        }
        assert_eq!(h.pending_timers(TimeDomain::Event).len(), 4);
        assert_records_eq(
            &h.advance_watermark(20)?,
            &[
                fired("z", "event", 10, 20),
                fired("a", "event", 20, 20),
                fired("b", "event", 20, 20),
                record("watermark", "20", 20),
            ],
        );
        assert_eq!(h.operator().timer_calls, [3]);
        assert!(h.advance_watermark(20)?.is_empty(), "no advance, no call");
        let pending: Vec<_> = h.pending_timers(TimeDomain::Event).iter().collect();
        assert_eq!(pending, [(30, &b"c"[..])]);
        let err = h.advance_watermark(19).unwrap_err();
        assert_eq!(
            err.message(),
            "the watermark cannot move back, from 20 to 19"
        );
        Ok(())
    }

    #[test]
    fn deleted_timers_never_fire_and_timers_behind_the_watermark_wait_for_an_advance() -> Result<()>
    {
        let mut h = timed();
        h.push("a", "set E 10", 0)?;
        h.push("a", "del E 10", 0)?;
        h.push("a", "del E 99", 0)?;
        assert!(h.pending_timers(TimeDomain::Event).is_empty());
        h.advance_watermark(50)?;
        h.push("b", "set E 40", 0)?;
        assert_records_eq(
            &h.advance_watermark(51)?,
            &[fired("b", "event", 40, 51), record("watermark", "51", 51)],
        );
        Ok(())
    }

    #[test]
    fn a_firing_hands_at_most_1024_timers_to_one_call() -> Result<()> {
        let mut h = timed();
        let input: Vec<_> = (0..2 * MAX_TIMERS_PER_CALL + 1)
            .map(|i| record(format!("{i:05}"), format!("set E {}", i % 7), 0))
            .collect();
        h.push_on(0, &input)?;
        let out = h.advance_watermark(10)?;
        assert_eq!(out.len(), 2 * MAX_TIMERS_PER_CALL + 2);
        assert_eq!(h.operator().timer_calls, [1024, 1024, 1]);
        let order: Vec<_> = out[..out.len() - 1]
            .iter()
            .map(|r| (r.timestamp, r.key.clone()))
            .collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "timestamp, then key order"
        );
        Ok(())
    }

    #[test]
    fn timers_set_while_firing_fire_in_the_next_round_for_64_rounds_at_most() -> Result<()> {
        let mut h = timed();
        h.push("chain:63", "set E 5", 0)?;
        let out = h.advance_watermark(5)?;
        assert_eq!(
            out.len(),
            MAX_FIRING_ROUNDS + 1,
            "64 firings and the watermark"
        );
        assert_eq!(out[63], fired("chain:0", "event", 5, 5));

        let mut h = timed();
        h.push("chain:64", "set E 5", 0)?;
        let err = h.advance_watermark(5).unwrap_err();
        assert_eq!(
            err.message(),
            "event timers were still due at 5 after 64 rounds of firing: the operator keeps \
             setting timers at or before the time they fire at (docs/ABI.md §15)"
        );
        let mut h = timed();
        h.push("forever", "set P 5", 0)?;
        let err = h.advance_processing_time(9).unwrap_err();
        assert!(
            err.message()
                .starts_with("processing timers were still due at 9")
        );
        Ok(())
    }

    #[test]
    fn processing_timers_follow_the_clock_and_are_dropped_when_the_input_ends() -> Result<()> {
        let mut h = timed();
        assert_eq!(h.processing_time(), 0);
        h.push("a", "set P 100", 0)?;
        h.push("b", "set P 300", 0)?;
        h.push("c", "set P 0", 0)?;
        assert_records_eq(
            &h.advance_processing_time(0)?,
            &[fired("c", "processing", 0, i64::MIN)],
        );
        assert_records_eq(
            &h.advance_processing_time(150)?,
            &[fired("a", "processing", 100, i64::MIN)],
        );
        assert_eq!(h.processing_time(), 150);
        assert!(h.advance_processing_time(149).is_err());
        assert_eq!(h.pending_timers(TimeDomain::Processing).len(), 1);
        h.push("e", "set E 7", 0)?;
        let err = h.finish().unwrap_err();
        assert_eq!(
            err.message(),
            "timer_set is not allowed during weir_finish (docs/ABI.md §4)"
        );
        assert!(h.pending_timers(TimeDomain::Processing).is_empty());
        assert_eq!(h.watermark(), i64::MAX);
        Ok(())
    }

    #[test]
    fn finish_fires_every_timer_then_tells_the_last_watermark_then_finishes() -> Result<()> {
        let mut h = Harness::<Polite>::new(Context::new("polite"))?;
        h.push("late", "set E 9000000", 0)?;
        h.push("soon", "set E -4", 0)?;
        assert_records_eq(
            &h.finish()?,
            &[
                fired("soon", "event", -4, i64::MAX),
                fired("late", "event", 9_000_000, i64::MAX),
                record("watermark", i64::MAX.to_string(), i64::MAX),
                record("finish", "", 0),
            ],
        );
        Ok(())
    }

    #[test]
    fn timers_are_the_hosts_kept_across_restores_and_rewound_with_checkpoints() -> Result<()> {
        let mut h = timed();
        h.push("a", "set E 10", 0)?;
        let checkpoint = h.checkpoint()?;
        h.push("b", "set E 20", 0)?;
        h.snapshot_and_restore()?;
        assert_eq!(h.operator().timer_calls, Vec::<usize>::new());
        assert_eq!(h.pending_timers(TimeDomain::Event).len(), 2);
        h.advance_watermark(15)?;
        assert_eq!(h.operator().timer_calls, [1]);

        h.restore_checkpoint(&checkpoint)?;
        assert_eq!(h.watermark(), i64::MIN);
        assert!(h.operator().timer_calls.is_empty());
        let pending: Vec<_> = h.pending_timers(TimeDomain::Event).iter().collect();
        assert_eq!(pending, [(10, &b"a"[..])]);
        assert_eq!(checkpoint.state(), &h.snapshot()?[..]);
        Ok(())
    }

    #[test]
    fn side_outputs_keep_their_records_and_a_failed_call_emits_nothing() -> Result<()> {
        let mut h = timed();
        h.push("a", "side late", 1)?;
        h.push_on(
            0,
            &[record("b", "side other", 2), record("c", "side late", 3)],
        )?;
        let err = h
            .push_on(0, &[record("d", "side late", 4), record("e", "fail", 5)])
            .unwrap_err();
        assert_eq!(err.message(), "asked to fail");
        h.snapshot_and_restore()?;
        assert_records_eq(
            h.side_output("late"),
            &[record("a", "s", 1), record("c", "s", 3)],
        );
        assert_records_eq(h.side_output("other"), &[record("b", "s", 2)]);
        assert!(h.side_output("none").is_empty());
        let err = h.push("x", "side ", 0).unwrap_err();
        assert!(
            err.message()
                .starts_with("emit_to: the side output name `` is 0 bytes")
        );
        Ok(())
    }

    #[test]
    fn restore_equivalence_covers_side_outputs_and_time() {
        /// Sends each record to a side output named by how many it has seen, which a restore
        /// forgets.
        #[derive(Default)]
        struct Forgets {
            seen: u64,
        }

        impl Operator for Forgets {
            fn init(_ctx: &Context) -> Result<Self> {
                Ok(Forgets::default())
            }
            fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
                for record in input {
                    self.seen += 1;
                    let name = if self.seen > 2 { "many" } else { "few" };
                    out.emit_to(name, record.key, record.value, record.timestamp);
                }
                Ok(())
            }
        }

        impl State for Forgets {
            fn snapshot(&self) -> Result<Vec<u8>> {
                Ok(Vec::new())
            }
            fn restore(&mut self, _bytes: &[u8]) -> Result<()> {
                Ok(())
            }
        }

        let steps: Vec<Step> = (0..4)
            .flat_map(|i| [Step::Record(record("k", "v", i)), Step::Watermark(i)])
            .collect();
        let caught = std::panic::catch_unwind(|| {
            assert_restore_preserves_steps::<Forgets>(&Context::new("f"), &steps, 3)
        });
        let message = *caught.unwrap_err().downcast::<String>().unwrap();
        assert!(
            message.starts_with(
                "side output `few` changes when the operator is restored into a fresh instance \
                 after every 3 step(s)"
            ),
            "{message}"
        );
        let steps: Vec<Step> = [("a", "set E 5"), ("b", "set P 3")]
            .into_iter()
            .map(|(key, command)| Step::Record(record(key, command, 0)))
            .chain([Step::ProcessingTime(4), Step::Watermark(6)])
            .collect();
        for every in 1..=2 {
            assert_restore_preserves_steps::<Polite>(&Context::new("t"), &steps, every);
        }
    }

    /// `Timed` with a `finish` that obeys the rules (it emits one record, `finish`).
    #[derive(Serialize, Deserialize)]
    struct Polite(Timed);

    impl Operator for Polite {
        fn init(ctx: &Context) -> Result<Self> {
            Ok(Polite(Timed::init(ctx)?))
        }
        fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
            self.0.process(input, out)
        }
        fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
            self.0.on_timers(timers, out)
        }
        fn on_watermark(&mut self, watermark: i64, out: &mut Output) -> Result<()> {
            self.0.on_watermark(watermark, out)
        }
        fn finish(&mut self, out: &mut Output) -> Result<()> {
            out.emit(b"finish", b"", 0);
            Ok(())
        }
    }

    #[test]
    fn debug_shows_text_or_hex() {
        assert_eq!(
            format!("{:?}", record("word", [0xff, 0x00], -1)),
            r#"OwnedRecord { key: "word", value: 0xff00, timestamp: -1 }"#
        );
        assert_eq!(
            format!("{:?}", record("", "a\nb", 0)),
            r#"OwnedRecord { key: "", value: 0x610a62, timestamp: 0 }"#
        );
    }

    #[test]
    fn diff_names_the_first_difference_and_lists_both_sides() {
        let left = [record("a", "1", 1), record("b", "1", 2)];
        let right = [
            record("a", "1", 1),
            record("b", "2", 2),
            record("c", "1", 3),
        ];
        let text = diff(("actual", &left), ("expected", &right)).unwrap();
        assert!(
            text.starts_with(
                "records differ at index 1 (actual: 2 records, expected: 3)\n  \
             actual:   OwnedRecord { key: \"b\", value: \"1\", timestamp: 2 }\n  \
             expected: OwnedRecord { key: \"b\", value: \"2\", timestamp: 2 }\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(" >   1: OwnedRecord { key: \"b\", value: \"2\""),
            "{text}"
        );
        assert_eq!(diff(("a", &left), ("b", &left)), None);
        let text = diff(("actual", &left[..1]), ("expected", &left)).unwrap();
        assert!(text.contains("actual:   (no record)"), "{text}");
    }
}
