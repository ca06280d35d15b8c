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
//! Guest code is synchronous and CPU-bound, so tasks are OS threads rather
//! than tokio tasks: see docs/ARCHITECTURE.md for why.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Select};
use weir_abi::batch::header_record_count;

use super::alignment::{AlignmentEvent, BarrierAligner};
use super::channel::{POLL, StopSignal};
use super::message::Message;
use super::metrics::TaskMetrics;
use super::persist::{DeclineReason, Persister};
use super::processor::{ChainedState, Processor, Source, SourcePoll, TaskError};
use super::router::Router;
use crate::checkpoint::config::CheckpointMode;
use crate::checkpoint::task_state::{RestoredState, TaskState};
use crate::ids::Barrier;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::kill_point::{self, KillPoint};

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
    if let Some(restored) = restored {
        finished = restored.state.finished;
        processor.restore_chain(restored.chain, restored.state.inner, restored.resumable)?;
        kill_point::reached(KillPoint::Restore);
    }
    let mut aligner = BarrierAligner::new(inputs.len(), mode);
    let mut ended = vec![finished; inputs.len()];
    let mut closed = vec![false; inputs.len()];
    // (select operation index, input) of the inputs offered to the current select; kept
    // across messages so the per-message loop does not allocate.
    let mut slots: Vec<(usize, usize)> = Vec::with_capacity(inputs.len());
    loop {
        if env.stop.is_raised() {
            return Err(TaskError::Stopped);
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
                processor.process(&bytes, &mut env.router)?;
                env.router.flush()?;
                kill_point::reached(KillPoint::ProcessBatch);
                env.metrics.add_busy(started.elapsed());
            }
            Message::Barrier(barrier) => {
                match aligner.on_barrier(input, barrier.id, Instant::now()) {
                    AlignmentEvent::Aligned { alignment, .. } => {
                        snapshot(&mut env, processor.as_mut(), barrier, finished, alignment)?
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
            Message::EndOfInput => {
                ended[input] = true;
                if !finished && ended.iter().all(|&e| e) {
                    processor.finish(&mut env.router)?;
                    env.router.broadcast(Message::EndOfInput)?;
                    finished = true;
                }
            }
        }
    }
}

/// Snapshot of a non-source task: the synchronous part here, the write handed off.
fn snapshot(
    env: &mut TaskEnv,
    processor: &mut dyn Processor,
    barrier: Barrier,
    finished: bool,
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
    let state = TaskState { finished, inner };
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
/// the state to the persister. Once exhausted it sends end-of-input, tells the
/// driver, and keeps answering triggers (the final checkpoint) until shutdown.
pub(crate) fn run_source(
    mut env: TaskEnv,
    mut source: Box<dyn Source>,
    restored: Option<RestoredState>,
) -> Result<(), TaskError> {
    let mut finished = false;
    if let Some(RestoredState { state, .. }) = restored {
        source.seek(&state.inner)?;
        finished = state.finished;
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
        let wait = if finished { POLL } else { idle };
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
                let state = TaskState {
                    finished,
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
        let poll = source.poll(&mut env.router, SOURCE_POLL_RECORDS)?;
        // After the flush, `records_out` counts everything the poll routed.
        env.router.flush()?;
        env.metrics
            .add_records_in(env.metrics.records_out() - before);
        env.metrics.add_busy(started.elapsed());
        idle = match poll {
            SourcePoll::Emitted => Duration::ZERO,
            SourcePoll::Idle(wait) => wait,
            SourcePoll::Exhausted => {
                env.router.broadcast(Message::EndOfInput)?;
                env.persister.source_finished(&env.id);
                finished = true;
                Duration::ZERO
            }
        };
    }
}
