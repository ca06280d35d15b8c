//! The task: one parallel instance of a vertex, running on a thread of its own — or, chained
//! after another task, on that task's thread.
//!
//! A source task reads from its connector and injects barriers when the
//! coordinator triggers a checkpoint. Every other task reads its input
//! channels, aligns barriers ([`BarrierAligner`]), and hands batches to its
//! [`Processor`] (a wasm operator or a sink). On a barrier, the task takes the
//! synchronous part of the snapshot, forwards the barrier, and leaves the
//! asynchronous part (writing the state file) to the [`Persister`], which
//! acknowledges once the bytes are durable — processing never waits for disk.
//!
//! Watermarks flow in band like barriers (`docs/ABI.md` §15): a source's clock
//! ([`SourceClock`]) sends them between polls; every other task combines its inputs'
//! ([`InputWatermarks`]), lets its processor fire the timers an advance makes due, and only
//! then forwards the watermark, after what the firing emitted. Its watermark and timers go into
//! its snapshot's time section beside the processor's state.
//!
//! What a non-source task does with each message is [`ProcessingTask`]'s, whoever feeds it:
//! its own thread reading its channels ([`run_processor`]), or the router of the task it is
//! chained after ([`ChainedTask`]), which hands it every message on the calling thread. A
//! chained task is still a task of its own — its own metrics, its own snapshot acknowledged
//! under its own id — so a checkpoint does not depend on how the job was chained.
//!
//! Guest code is synchronous and CPU-bound, so tasks are OS threads rather
//! than tokio tasks: see docs/ARCHITECTURE.md for why.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select};
use weir_abi::batch::header_record_count;
use weir_abi::time::{END_OF_TIME, NO_WATERMARK};

use super::alignment::{AlignmentEvent, BarrierAligner};
use super::channel::{POLL, StopSignal};
use super::error::TaskError;
use super::message::{Control, Message};
use super::metrics::TaskMetrics;
use super::persist::{
    DeclineReason, Persister, SharedHandles, StoreUpload, TaskSnapshot, prune_handles,
    restored_files,
};
use super::processor::{ChainedState, Processor, Source, SourceOutput, SourcePoll};
use super::router::{ChainedTask, Router};
use super::watermark::{InputClock, InputWatermarks, SourceClock, Watermark, WatermarkChange};
use crate::checkpoint::config::CheckpointMode;
use crate::checkpoint::task_state::{RestoredState, TaskState};
use crate::ids::Barrier;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::job::WatermarkStrategy;
use crate::kill_point::{self, KillPoint};
use crate::state::{self, SharedFiles, time::InputTime, time::TaskClock};
use crate::wasm::wall_clock_millis;

/// Everything a task thread needs besides what it runs: what any task has ([`TaskOutputs`]),
/// and what only a chain's head has, its own thread to stop and the driver's channel to it.
pub(crate) struct TaskEnv {
    /// Raised when the job attempt stops.
    pub stop: StopSignal,
    /// Messages from the job's driver.
    pub control: Receiver<Control>,
    /// Who the task is, and where its snapshots, counters and records go.
    pub out: TaskOutputs,
}

/// A task's identity and outputs, wherever it runs: on a thread of its own (in a
/// [`TaskEnv`]) or chained after another task, where it is all the task has.
pub(crate) struct TaskOutputs {
    /// Who the task is.
    pub id: TaskId,
    /// Where snapshots go, asynchronously.
    pub persister: Persister,
    /// The task's counters.
    pub metrics: Arc<TaskMetrics>,
    /// The task's outputs.
    pub router: Router,
}

/// Runs a non-source task until shutdown, stop or failure: reads its input channels and the
/// driver's control channel, and hands every message to its [`ProcessingTask`].
pub(crate) fn run_processor(
    env: TaskEnv,
    processor: Box<dyn Processor>,
    inputs: Vec<Receiver<Message>>,
    mode: CheckpointMode,
    restored: Option<RestoredState>,
) -> Result<(), TaskError> {
    let TaskEnv { stop, control, out } = env;
    let mut task = ProcessingTask::new(out, processor, inputs.len(), mode, restored)?;
    let mut closed = vec![false; inputs.len()];
    // (select operation index, input) of the inputs offered to the current select; kept
    // across messages so the per-message loop does not allocate.
    let mut slots: Vec<(usize, usize)> = Vec::with_capacity(inputs.len());
    loop {
        if stop.is_raised() {
            return Err(TaskError::Stopped);
        }
        task.fire_processing_timers(wall_clock_millis())?;
        // Pick the next message among the inputs not blocked by alignment, and the control channel.
        let mut select = Select::new();
        let control_index = select.recv(&control);
        slots.clear();
        for (i, rx) in inputs.iter().enumerate() {
            if !closed[i] && !task.aligner.is_blocked(i) {
                slots.push((select.recv(rx), i));
            }
        }
        let op = match select.select_timeout(POLL) {
            Ok(op) => op,
            Err(_) => continue,
        };
        if op.index() == control_index {
            match op.recv(&control) {
                Ok(Control::Shutdown) | Err(_) => return Ok(()),
                Ok(control) => task.on_control(&control)?,
            }
            continue;
        }
        let input = slots
            .iter()
            .find(|(s, _)| *s == op.index())
            .map(|&(_, i)| i)
            .expect("every selected operation is the control channel or an input");
        match op.recv(&inputs[input]) {
            Ok(msg) => task.on_message(input, msg)?,
            // The upstream task is gone: the attempt is stopping.
            Err(_) => closed[input] = true,
        }
    }
}

/// A non-source task between two messages: its processor, its inputs' watermarks and
/// barrier alignment, whether it finished, and its outputs.
pub(crate) struct ProcessingTask {
    out: TaskOutputs,
    processor: Box<dyn Processor>,
    clocks: InputWatermarks,
    aligner: BarrierAligner,
    /// Per input: whether it ended.
    ended: Vec<bool>,
    /// Whether every input ended and the processor finished.
    finished: bool,
    /// The shared files its keyed state has stored or was restored from, if it keeps some.
    shared: SharedHandles,
}

impl ProcessingTask {
    /// A task of `inputs` inputs running `processor`, restored from `restored` if given.
    pub(crate) fn new(
        out: TaskOutputs,
        mut processor: Box<dyn Processor>,
        inputs: usize,
        mode: CheckpointMode,
        restored: Option<RestoredState>,
    ) -> Result<Self, TaskError> {
        let mut finished = false;
        let mut clocks = InputWatermarks::new(inputs);
        let shared = SharedHandles::default();
        if let Some(restored) = restored {
            finished = restored.state.finished;
            let restore = || {
                processor.restore_chain(
                    restored.chain,
                    restored.state.inner,
                    restored.resumable,
                )?;
                // After the processor's own state: an image restore starts a fresh instance.
                let host = processor.host_state();
                let mut fetch = restored_files(&out.id.vertex, restored.shared, &shared);
                let files = SharedFiles {
                    fetch: &mut fetch,
                    resumable: restored.resumable,
                };
                let clock = state::restore(&restored.state.sections, host, Some(files))
                    .map_err(|e| TaskError::Restore(e.to_string()))?;
                if let Some(clock) = clock {
                    let restored_inputs: Vec<InputClock> =
                        clock.inputs.iter().map(input_clock).collect();
                    clocks = InputWatermarks::restored(inputs, clock.watermark, &restored_inputs);
                }
                if let Some(host) = processor.host_state() {
                    out.metrics.set_pending_timers(host.time.pending());
                }
                Ok(())
            };
            restore().map_err(TaskError::while_restoring)?;
            out.metrics.watermark.set(clocks.current());
            kill_point::reached(KillPoint::Restore);
        }
        // An input that ended before the checkpoint sends nothing more after the restore.
        let ended = clocks
            .inputs()
            .iter()
            .map(|c| finished || c.ended)
            .collect();
        Ok(ProcessingTask {
            out,
            processor,
            clocks,
            aligner: BarrierAligner::new(inputs, mode),
            ended,
            finished,
            shared,
        })
    }

    /// Acts on what the driver said (all but `Shutdown`, which ends the caller's loop), then
    /// passes it on to the tasks chained after this one.
    fn on_control(&mut self, control: &Control) -> Result<(), TaskError> {
        match *control {
            Control::Complete(id) => {
                if let Some(keyed) = self.keyed() {
                    keyed.completed(id);
                    let live = keyed.live_files();
                    prune_handles(&self.shared, &self.out.id, &live, id);
                }
                self.processor.checkpoint_complete(id)?;
            }
            Control::Abort(id) => {
                self.aligner.abort(id);
                if let Some(keyed) = self.keyed() {
                    keyed.aborted(id);
                }
                self.processor.checkpoint_aborted(id)?;
            }
            Control::Trigger(_) | Control::Shutdown => return Ok(()),
        }
        self.out.router.control_chained(control)
    }

    /// The keyed state its processor keeps on the host, if it keeps some.
    fn keyed(&mut self) -> Option<&mut state::keyed::section::KeyedState> {
        self.processor.host_state().and_then(|h| h.keyed.as_mut())
    }

    /// When the next processing-time timer of this task or of one chained after it is due.
    fn next_processing_timer(&self) -> Option<i64> {
        let own = if self.finished {
            None
        } else {
            self.processor.next_processing_timer()
        };
        own.into_iter()
            .chain(self.out.router.next_chained_timer())
            .min()
    }

    /// Fires the processing-time timers due at `now`: this task's (unless it finished), then
    /// those of the tasks chained after it.
    fn fire_processing_timers(&mut self, now: i64) -> Result<(), TaskError> {
        if !self.finished
            && let Some(next) = self.processor.next_processing_timer()
            && next <= now
        {
            self.processor
                .fire_processing_timers(now, &mut self.out.router)?;
            self.out.router.flush()?;
        }
        self.out.router.fire_chained_timers(now)
    }

    /// Takes one message that came on `input`.
    fn on_message(&mut self, input: usize, msg: Message) -> Result<(), TaskError> {
        match msg {
            Message::Batch(bytes) => {
                let started = self.start_busy();
                // Batches come from the routers of this job (or from a guest through the wasm
                // layer, which checked them): count them by their header. Whoever reads the
                // records (a guest's SDK, a sink) decodes and checks them.
                let records = header_record_count(&bytes)
                    .map_err(|problem| TaskError::Malformed { input, problem })?;
                self.out.metrics.add_records_in(u64::from(records));
                if self.clocks.current() != NO_WATERMARK {
                    count_late(&bytes, self.clocks.current(), input, &self.out.metrics)?;
                }
                self.processor.process(&bytes, &mut self.out.router)?;
                self.out.router.flush()?;
                kill_point::reached(KillPoint::ProcessBatch);
                self.end_busy(started);
            }
            Message::Barrier(barrier) => {
                match self.aligner.on_barrier(input, barrier.id, Instant::now()) {
                    AlignmentEvent::Aligned { alignment, .. } => {
                        self.snapshot(barrier, alignment)?
                    }
                    AlignmentEvent::Started { waiting_for, .. } if waiting_for > 0 => {
                        kill_point::reached(KillPoint::Alignment);
                    }
                    AlignmentEvent::Superseded { aborted, .. } => {
                        self.out.persister.decline(
                            aborted,
                            &self.out.id,
                            DeclineReason::Superseded,
                        );
                    }
                    _ => {}
                }
            }
            Message::Watermark(watermark) => {
                if let Some(change) = self.clocks.on_watermark(input, watermark) {
                    let started = self.start_busy();
                    self.on_watermark_change(change)?;
                    self.end_busy(started);
                }
            }
            Message::EndOfInput => {
                self.ended[input] = true;
                let change = self.clocks.on_end(input);
                if !self.finished && self.ended.iter().all(|&e| e) {
                    // The end of time: every event-time timer fires, then the guest finishes.
                    self.clocks.advance_to(END_OF_TIME);
                    self.on_watermark_change(WatermarkChange::Advance(END_OF_TIME))?;
                    self.processor.finish(&mut self.out.router)?;
                    self.out.router.broadcast(Message::EndOfInput)?;
                    self.finished = true;
                } else if let Some(change) = change {
                    self.on_watermark_change(change)?;
                }
            }
        }
        Ok(())
    }

    /// The start of a span of work: now, and how long the chained tasks had taken so far.
    fn start_busy(&self) -> (Instant, Duration) {
        (Instant::now(), self.out.router.chained_time())
    }

    /// Counts the span of work begun at `started` as busy, less what the tasks chained after
    /// this one took of it (they count it as theirs).
    fn end_busy(&self, (started, chained): (Instant, Duration)) {
        let chained = self.out.router.chained_time() - chained;
        self.out
            .metrics
            .add_busy(started.elapsed().saturating_sub(chained));
    }

    /// Acts on a change of the task's watermark: on an advance, the processor fires what it
    /// makes due (its output routed first), then the watermark goes downstream; idleness and its
    /// end are forwarded as they are. The end of time is not forwarded: end-of-input, which
    /// follows, means it.
    fn on_watermark_change(&mut self, change: WatermarkChange) -> Result<(), TaskError> {
        let forward = match change {
            WatermarkChange::Advance(watermark) => {
                self.processor
                    .advance_watermark(watermark, &mut self.out.router)?;
                self.out.metrics.watermark.set(watermark);
                (watermark != END_OF_TIME).then_some(Watermark::At(watermark))
            }
            WatermarkChange::AdvanceIdle(watermark) => {
                self.on_watermark_change(WatermarkChange::Advance(watermark))?;
                Some(Watermark::Idle)
            }
            WatermarkChange::Idle => Some(Watermark::Idle),
            WatermarkChange::Active(watermark) => Some(Watermark::At(watermark)),
        };
        match forward {
            Some(watermark) => self.out.router.broadcast(Message::Watermark(watermark))?,
            None => self.out.router.flush()?,
        }
        Ok(())
    }

    /// The snapshot at an aligned barrier: the synchronous part here, the write handed off.
    fn snapshot(&mut self, barrier: Barrier, alignment: Duration) -> Result<(), TaskError> {
        let started = Instant::now();
        let sections = state::snapshot(
            Some(&task_clock(&self.clocks)),
            self.processor.host_state().as_deref(),
        );
        // A savepoint's keyed state names no shared file: it stands alone.
        let savepoint = barrier.kind == CheckpointKind::Savepoint;
        let store = state::snapshot_store(self.processor.host_state(), barrier.id, savepoint)?.map(
            |pending| StoreUpload {
                pending,
                handles: Arc::clone(&self.shared),
            },
        );
        // Savepoints are self-contained: they may be moved, and nothing may build on them.
        let ChainedState {
            state: inner,
            chain,
        } = match barrier.kind {
            CheckpointKind::Checkpoint => self.processor.snapshot_incremental(barrier)?,
            CheckpointKind::Savepoint => ChainedState {
                state: self.processor.snapshot(barrier)?,
                chain: Vec::new(),
            },
        };
        let state = TaskState {
            finished: self.finished,
            sections,
            inner,
        };
        let sync = started.elapsed();
        self.out.router.broadcast(Message::Barrier(barrier))?;
        kill_point::reached(KillPoint::AfterSnapshot);
        let snapshot = TaskSnapshot {
            state,
            store,
            chain,
        };
        self.out
            .persister
            .persist(barrier, self.out.id.clone(), snapshot, sync, alignment);
        Ok(())
    }
}

/// A processing task chained after another takes its one input's messages by a call from the
/// upstream task's router; its failures name it.
impl ChainedTask for ProcessingTask {
    fn id(&self) -> &TaskId {
        &self.out.id
    }

    fn deliver(&mut self, msg: Message) -> Result<(), TaskError> {
        self.on_message(0, msg)
            .map_err(|e| e.of_chained(&self.out.id))
    }

    fn control(&mut self, control: &Control) -> Result<(), TaskError> {
        self.on_control(control)
            .map_err(|e| e.of_chained(&self.out.id))
    }

    fn next_processing_timer(&self) -> Option<i64> {
        ProcessingTask::next_processing_timer(self)
    }

    fn fire_processing_timers(&mut self, now: i64) -> Result<(), TaskError> {
        ProcessingTask::fire_processing_timers(self, now).map_err(|e| e.of_chained(&self.out.id))
    }
}

/// Counts the records of `bytes` at or before `watermark`: late.
fn count_late(
    bytes: &[u8],
    watermark: i64,
    input: usize,
    metrics: &TaskMetrics,
) -> Result<(), TaskError> {
    let batch = weir_abi::Batch::decode(bytes)
        .map_err(|problem| TaskError::Malformed { input, problem })?;
    let late = batch.iter().filter(|r| r.timestamp <= watermark).count();
    if late > 0 {
        metrics.add_records_late(late as u64);
    }
    Ok(())
}

/// A processing task's own clock, as its snapshot keeps it: its watermark and its inputs'.
fn task_clock(clocks: &InputWatermarks) -> TaskClock {
    TaskClock {
        watermark: clocks.current(),
        inputs: clocks
            .inputs()
            .iter()
            .map(|c| InputTime {
                watermark: c.watermark,
                idle: c.idle,
                ended: c.ended,
            })
            .collect(),
        splits: Vec::new(),
    }
}

/// An input's clock as a checkpoint kept it.
fn input_clock(input: &InputTime) -> InputClock {
    InputClock {
        watermark: input.watermark,
        idle: input.idle,
        ended: input.ended,
    }
}

/// Records a source emits per poll before it looks at its control channel again.
const SOURCE_POLL_RECORDS: usize = 1024;

/// Runs a source task until shutdown, stop or failure.
///
/// Between polls it checks its control channel: a trigger makes it record its
/// position, emit the barrier after everything it emitted so far, and hand
/// the state to the persister. With a watermark strategy, its clock sends a watermark after a
/// poll once its interval has passed. Once exhausted it sends end-of-input (which means the end
/// of time downstream), tells the driver, and keeps answering triggers (the final checkpoint)
/// until shutdown.
pub(crate) fn run_source(
    mut env: TaskEnv,
    mut source: Box<dyn Source>,
    watermark: Option<WatermarkStrategy>,
    restored: Option<RestoredState>,
) -> Result<(), TaskError> {
    let mut finished = false;
    let mut clock = watermark.map(|strategy| SourceClock::new(strategy, Instant::now()));
    if let Some(RestoredState { state, .. }) = restored {
        source
            .seek(&state.inner)
            .map_err(TaskError::while_restoring)?;
        finished = state.finished;
        let restored_clock = state::restore(&state.sections, None, None)
            .map_err(|e| TaskError::Restore(e.to_string()))?;
        if let (Some(clock), Some(restored)) = (clock.as_mut(), restored_clock) {
            clock.restore(restored.watermark, &restored.splits, Instant::now());
            env.out.metrics.watermark.set(restored.watermark);
        }
        kill_point::reached(KillPoint::Restore);
        if finished {
            // Downstream tasks restored from the same checkpoint have seen the end already.
            env.out.persister.source_finished(&env.out.id);
        }
    }
    let mut idle = Duration::ZERO;
    // The positions of checkpoints not yet complete, for the source's `checkpoint_complete`.
    let mut positions: std::collections::BTreeMap<CheckpointId, Vec<u8>> = Default::default();
    loop {
        if env.stop.is_raised() {
            return Err(TaskError::Stopped);
        }
        // Tasks chained after the source have their processing-time timers fired here (each
        // fires only those that are due).
        let now = wall_clock_millis();
        env.out.router.fire_chained_timers(now)?;
        let wait = match (&clock, finished) {
            (_, true) => POLL,
            (Some(clock), false) => idle.min(clock.until_tick(Instant::now())),
            (None, false) => idle,
        };
        let wait = match env.out.router.next_chained_timer() {
            Some(next) => wait.min(Duration::from_millis(next.saturating_sub(now).max(0) as u64)),
            None => wait,
        };
        let control = if wait.is_zero() {
            env.control.try_recv().ok()
        } else {
            match env.control.recv_timeout(wait) {
                Ok(c) => Some(c),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => None,
                Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return Ok(()),
            }
        };
        match control {
            Some(Control::Shutdown) => return Ok(()),
            Some(Control::Trigger(barrier)) => {
                let started = Instant::now();
                let position = source.position();
                positions.insert(barrier.id, position.clone());
                let clock = clock.as_ref().map(|clock| {
                    let (watermark, splits) = clock.state();
                    TaskClock {
                        watermark,
                        inputs: Vec::new(),
                        splits,
                    }
                });
                let state = TaskState {
                    finished,
                    sections: state::snapshot(clock.as_ref(), None),
                    inner: position,
                };
                env.out.router.broadcast(Message::Barrier(barrier))?;
                kill_point::reached(KillPoint::AfterSnapshot);
                env.out.persister.persist(
                    barrier,
                    env.out.id.clone(),
                    TaskSnapshot::whole(state),
                    started.elapsed(),
                    Duration::ZERO,
                );
                continue;
            }
            Some(Control::Complete(id)) => {
                // Complete up to `id`: the newest of those positions is the one to report.
                let later = positions.split_off(&id.next());
                let completed = std::mem::replace(&mut positions, later);
                if let Some((_, position)) = completed.into_iter().next_back() {
                    source.checkpoint_complete(&position)?;
                }
                env.out.router.control_chained(&Control::Complete(id))?;
                continue;
            }
            Some(Control::Abort(id)) => {
                positions.remove(&id);
                env.out.router.control_chained(&Control::Abort(id))?;
                continue;
            }
            None => {}
        }
        if finished {
            continue;
        }
        let started = Instant::now();
        let chained_before = env.out.router.chained_time();
        let before = env.out.metrics.records_out();
        let poll = {
            let mut out = SourceOutput::new(&mut env.out.router, clock.as_mut());
            source.poll(&mut out, SOURCE_POLL_RECORDS)?
        };
        // After the flush, `records_out` counts everything the poll routed.
        env.out.router.flush()?;
        env.out
            .metrics
            .add_records_in(env.out.metrics.records_out() - before);
        if poll != SourcePoll::Exhausted
            && let Some(watermark) = clock.as_mut().and_then(|c| c.tick(Instant::now()))
        {
            env.out.router.broadcast(Message::Watermark(watermark))?;
            if let Watermark::At(w) = watermark {
                env.out.metrics.watermark.set(w);
            }
        }
        // The tasks chained after the source count their share as theirs.
        let chained = env.out.router.chained_time() - chained_before;
        env.out
            .metrics
            .add_busy(started.elapsed().saturating_sub(chained));
        idle = match poll {
            SourcePoll::Emitted => Duration::ZERO,
            SourcePoll::Idle(wait) => wait,
            SourcePoll::Exhausted => {
                env.out.router.broadcast(Message::EndOfInput)?;
                env.out.persister.source_finished(&env.out.id);
                env.out.metrics.watermark.set(END_OF_TIME);
                finished = true;
                Duration::ZERO
            }
        };
    }
}
