//! The task: one parallel instance of a vertex, running on a thread of its own.
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
//! Guest code is synchronous and CPU-bound, so tasks are OS threads rather
//! than tokio tasks: see docs/ARCHITECTURE.md for why.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select};
use weir_abi::Timers;
use weir_abi::batch::header_record_count;
use weir_abi::time::{END_OF_TIME, NO_WATERMARK};

use super::alignment::{AlignmentEvent, BarrierAligner};
use super::channel::{POLL, StopSignal};
use super::message::Message;
use super::metrics::TaskMetrics;
use super::persist::{DeclineReason, Persister};
use super::processor::{ChainedState, Processor, Source, SourceOutput, SourcePoll, TaskError};
use super::router::Router;
use super::watermark::{InputClock, InputWatermarks, SourceClock, Watermark, WatermarkChange};
use crate::checkpoint::config::CheckpointMode;
use crate::checkpoint::task_state::{InputTime, RestoredState, TaskState, TimeState};
use crate::ids::Barrier;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::job::WatermarkStrategy;
use crate::kill_point::{self, KillPoint};
use crate::wasm::{GuestTime, wall_clock_millis};

/// What the job's driver tells a running task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Control {
    /// Sources only: take a snapshot now and emit this barrier.
    Trigger(Barrier),
    /// Checkpoints up to this id are complete (sinks commit, guests are told).
    Complete(CheckpointId),
    /// This pending checkpoint was aborted: drop its alignment.
    Abort(CheckpointId),
    /// The job is over: exit the loop.
    Shutdown,
}

/// Everything a task thread needs besides what it runs.
pub(crate) struct TaskEnv {
    /// Who the task is.
    pub id: TaskId,
    /// Raised when the job attempt stops.
    pub stop: StopSignal,
    /// Messages from the job's driver.
    pub control: Receiver<Control>,
    /// Where snapshots go, asynchronously.
    pub persister: Persister,
    /// The task's counters.
    pub metrics: Arc<TaskMetrics>,
    /// The task's outputs.
    pub router: Router,
}

/// Runs a non-source task until shutdown, stop or failure.
pub(crate) fn run_processor(
    mut env: TaskEnv,
    mut processor: Box<dyn Processor>,
    inputs: Vec<Receiver<Message>>,
    mode: CheckpointMode,
    restored: Option<RestoredState>,
) -> Result<(), TaskError> {
    let mut finished = false;
    let mut clocks = InputWatermarks::new(inputs.len());
    if let Some(restored) = restored {
        finished = restored.state.finished;
        let time = restored
            .state
            .time
            .as_deref()
            .map(TimeState::decode)
            .transpose()
            .map_err(|e| TaskError::Restore(e.to_string()))?;
        processor.restore_chain(restored.chain, restored.state.inner, restored.resumable)?;
        if let Some(time) = time {
            let restored_inputs: Vec<InputClock> = time.inputs.iter().map(input_clock).collect();
            clocks = InputWatermarks::restored(inputs.len(), time.watermark, &restored_inputs);
            processor.restore_time(GuestTime {
                watermark: time.watermark,
                timers: time.timers,
            })?;
        }
        env.metrics.watermark.set(clocks.current());
        kill_point::reached(KillPoint::Restore);
    }
    let mut aligner = BarrierAligner::new(inputs.len(), mode);
    // An input that ended before the checkpoint sends nothing more after the restore.
    let mut ended: Vec<bool> = clocks
        .inputs()
        .iter()
        .map(|c| finished || c.ended)
        .collect();
    let mut closed = vec![false; inputs.len()];
    // (select operation index, input) of the inputs offered to the current select; kept
    // across messages so the per-message loop does not allocate.
    let mut slots: Vec<(usize, usize)> = Vec::with_capacity(inputs.len());
    loop {
        if env.stop.is_raised() {
            return Err(TaskError::Stopped);
        }
        if !finished
            && let Some(next) = processor.next_processing_timer()
            && next <= wall_clock_millis()
        {
            processor.fire_processing_timers(wall_clock_millis(), &mut env.router)?;
            env.router.flush()?;
        }
        // Pick the next message among the inputs not blocked by alignment, and the control channel.
        let mut select = Select::new();
        let control_index = select.recv(&env.control);
        slots.clear();
        for (i, rx) in inputs.iter().enumerate() {
            if !closed[i] && !aligner.is_blocked(i) {
                slots.push((select.recv(rx), i));
            }
        }
        let op = match select.select_timeout(POLL) {
            Ok(op) => op,
            Err(_) => continue,
        };
        if op.index() == control_index {
            match op.recv(&env.control) {
                Ok(Control::Shutdown) | Err(_) => return Ok(()),
                Ok(Control::Complete(id)) => processor.checkpoint_complete(id)?,
                Ok(Control::Abort(id)) => {
                    aligner.abort(id);
                    processor.checkpoint_aborted(id)?;
                }
                Ok(Control::Trigger(_)) => {}
            }
            continue;
        }
        let input = slots
            .iter()
            .find(|(s, _)| *s == op.index())
            .map(|&(_, i)| i)
            .expect("every selected operation is the control channel or an input");
        let msg = match op.recv(&inputs[input]) {
            Ok(msg) => msg,
            Err(_) => {
                // The upstream task is gone: the attempt is stopping.
                closed[input] = true;
                continue;
            }
        };
        match msg {
            Message::Batch(bytes) => {
                let started = Instant::now();
                // Batches come from the routers of this job (or from a guest through the wasm
                // layer, which checked them): count them by their header. Whoever reads the
                // records (a guest's SDK, a sink) decodes and checks them.
                let records = header_record_count(&bytes)
                    .map_err(|problem| TaskError::Malformed { input, problem })?;
                env.metrics.add_records_in(u64::from(records));
                if clocks.current() != NO_WATERMARK {
                    count_late(&bytes, clocks.current(), input, &env)?;
                }
                processor.process(&bytes, &mut env.router)?;
                env.router.flush()?;
                kill_point::reached(KillPoint::ProcessBatch);
                env.metrics.add_busy(started.elapsed());
            }
            Message::Barrier(barrier) => {
                match aligner.on_barrier(input, barrier.id, Instant::now()) {
                    AlignmentEvent::Aligned { alignment, .. } => {
                        let time = time_section(&clocks, processor.as_ref());
                        snapshot(
                            &mut env,
                            processor.as_mut(),
                            barrier,
                            finished,
                            time,
                            alignment,
                        )?
                    }
                    AlignmentEvent::Started { waiting_for, .. } if waiting_for > 0 => {
                        kill_point::reached(KillPoint::Alignment);
                    }
                    AlignmentEvent::Superseded { aborted, .. } => {
                        env.persister
                            .decline(aborted, &env.id, DeclineReason::Superseded);
                    }
                    _ => {}
                }
            }
            Message::Watermark(watermark) => {
                if let Some(change) = clocks.on_watermark(input, watermark) {
                    let started = Instant::now();
                    on_watermark_change(&mut env, processor.as_mut(), change)?;
                    env.metrics.add_busy(started.elapsed());
                }
            }
            Message::EndOfInput => {
                ended[input] = true;
                let change = clocks.on_end(input);
                if !finished && ended.iter().all(|&e| e) {
                    // The end of time: every event-time timer fires, then the guest finishes.
                    clocks.advance_to(END_OF_TIME);
                    on_watermark_change(
                        &mut env,
                        processor.as_mut(),
                        WatermarkChange::Advance(END_OF_TIME),
                    )?;
                    processor.finish(&mut env.router)?;
                    env.router.broadcast(Message::EndOfInput)?;
                    finished = true;
                } else if let Some(change) = change {
                    on_watermark_change(&mut env, processor.as_mut(), change)?;
                }
            }
        }
    }
}

/// Acts on a change of the task's watermark: on an advance, the processor fires what it makes
/// due (its output routed first), then the watermark goes downstream; idleness and its end are
/// forwarded as they are. The end of time is not forwarded: end-of-input, which follows, means
/// it.
fn on_watermark_change(
    env: &mut TaskEnv,
    processor: &mut dyn Processor,
    change: WatermarkChange,
) -> Result<(), TaskError> {
    let forward = match change {
        WatermarkChange::Advance(watermark) => {
            processor.advance_watermark(watermark, &mut env.router)?;
            env.metrics.watermark.set(watermark);
            (watermark != END_OF_TIME).then_some(Watermark::At(watermark))
        }
        WatermarkChange::Idle => Some(Watermark::Idle),
        WatermarkChange::Active(watermark) => Some(Watermark::At(watermark)),
    };
    match forward {
        Some(watermark) => env.router.broadcast(Message::Watermark(watermark))?,
        None => env.router.flush()?,
    }
    Ok(())
}

/// Counts the records of `bytes` at or before `watermark`: late.
fn count_late(bytes: &[u8], watermark: i64, input: usize, env: &TaskEnv) -> Result<(), TaskError> {
    let batch = weir_abi::Batch::decode(bytes)
        .map_err(|problem| TaskError::Malformed { input, problem })?;
    let late = batch.iter().filter(|r| r.timestamp <= watermark).count();
    if late > 0 {
        env.metrics.add_records_late(late as u64);
    }
    Ok(())
}

/// The time section of a processing task's snapshot: its watermark, its inputs' and its
/// guest's timers.
fn time_section(clocks: &InputWatermarks, processor: &dyn Processor) -> Vec<u8> {
    let inputs: Vec<InputTime> = clocks
        .inputs()
        .iter()
        .map(|c| InputTime {
            watermark: c.watermark,
            idle: c.idle,
            ended: c.ended,
        })
        .collect();
    let none = [Timers::new(), Timers::new()];
    let timers = processor.time().map_or(&none, |t| &t.timers);
    TimeState::encode(clocks.current(), &inputs, &[], timers)
}

/// An input's clock as a checkpoint kept it.
fn input_clock(input: &InputTime) -> InputClock {
    InputClock {
        watermark: input.watermark,
        idle: input.idle,
        ended: input.ended,
    }
}

/// Snapshot of a non-source task: the synchronous part here, the write handed off.
fn snapshot(
    env: &mut TaskEnv,
    processor: &mut dyn Processor,
    barrier: Barrier,
    finished: bool,
    time: Vec<u8>,
    alignment: Duration,
) -> Result<(), TaskError> {
    let started = Instant::now();
    // Savepoints are self-contained: they may be moved, and nothing may build on them.
    let ChainedState {
        state: inner,
        chain,
    } = match barrier.kind {
        CheckpointKind::Checkpoint => processor.snapshot_incremental(barrier)?,
        CheckpointKind::Savepoint => ChainedState {
            state: processor.snapshot(barrier)?,
            chain: Vec::new(),
        },
    };
    let state = TaskState {
        finished,
        time: Some(time),
        inner,
    };
    env.router.broadcast(Message::Barrier(barrier))?;
    kill_point::reached(KillPoint::AfterSnapshot);
    env.persister.persist(
        barrier,
        env.id.clone(),
        state,
        chain,
        started.elapsed(),
        alignment,
    );
    Ok(())
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
        source.seek(&state.inner)?;
        finished = state.finished;
        if let (Some(clock), Some(time)) = (clock.as_mut(), state.time.as_deref()) {
            let time = TimeState::decode(time).map_err(|e| TaskError::Restore(e.to_string()))?;
            clock.restore(time.watermark, &time.splits, Instant::now());
            env.metrics.watermark.set(time.watermark);
        }
        kill_point::reached(KillPoint::Restore);
        if finished {
            // Downstream tasks restored from the same checkpoint have seen the end already.
            env.persister.source_finished(&env.id);
        }
    }
    let mut idle = Duration::ZERO;
    // The positions of checkpoints not yet complete, for the source's `checkpoint_complete`.
    let mut positions: std::collections::BTreeMap<CheckpointId, Vec<u8>> = Default::default();
    loop {
        if env.stop.is_raised() {
            return Err(TaskError::Stopped);
        }
        let wait = match (&clock, finished) {
            (_, true) => POLL,
            (Some(clock), false) => idle.min(clock.until_tick(Instant::now())),
            (None, false) => idle,
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
                let time = clock.as_ref().map(|clock| {
                    let (sent, splits) = clock.state();
                    TimeState::encode(sent, &[], &splits, &[Timers::new(), Timers::new()])
                });
                let state = TaskState {
                    finished,
                    time,
                    inner: position,
                };
                env.router.broadcast(Message::Barrier(barrier))?;
                kill_point::reached(KillPoint::AfterSnapshot);
                env.persister.persist(
                    barrier,
                    env.id.clone(),
                    state,
                    Vec::new(),
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
                continue;
            }
            Some(Control::Abort(id)) => {
                positions.remove(&id);
                continue;
            }
            None => {}
        }
        if finished {
            continue;
        }
        let started = Instant::now();
        let before = env.metrics.records_out();
        let poll = {
            let mut out = SourceOutput::new(&mut env.router, clock.as_mut());
            source.poll(&mut out, SOURCE_POLL_RECORDS)?
        };
        // After the flush, `records_out` counts everything the poll routed.
        env.router.flush()?;
        env.metrics
            .add_records_in(env.metrics.records_out() - before);
        if poll != SourcePoll::Exhausted
            && let Some(watermark) = clock.as_mut().and_then(|c| c.tick(Instant::now()))
        {
            env.router.broadcast(Message::Watermark(watermark))?;
            if let Watermark::At(w) = watermark {
                env.metrics.watermark.set(w);
            }
        }
        env.metrics.add_busy(started.elapsed());
        idle = match poll {
            SourcePoll::Emitted => Duration::ZERO,
            SourcePoll::Idle(wait) => wait,
            SourcePoll::Exhausted => {
                env.router.broadcast(Message::EndOfInput)?;
                env.persister.source_finished(&env.id);
                env.metrics.watermark.set(END_OF_TIME);
                finished = true;
                Duration::ZERO
            }
        };
    }
}
