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

use super::TaskId;
use super::alignment::{AlignmentEvent, BarrierAligner};
use super::channel::{POLL, StopSignal, Stopped};
use super::message::{Barrier, Message};
use super::metrics::TaskMetrics;
use super::persist::Persister;
use super::router::{RouteError, Router};
use super::task_state::{RestoredState, TaskState};
use crate::checkpoint::config::CheckpointMode;
use crate::checkpoint::{CheckpointId, CheckpointKind};
use crate::connectors::{Source, SourcePoll};
use crate::kill_point::{self, KillPoint};
use crate::wasm::GuestError;

/// What the job's driver tells a running task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Control {
    /// Sources only: take a snapshot now and emit this barrier.
    Trigger(Barrier),
    /// Checkpoints up to this id are complete (sinks commit, guests are told).
    Complete(CheckpointId),
    /// This pending checkpoint was aborted: drop its alignment.
    Abort(CheckpointId),
    /// The job is over: exit the loop.
    Shutdown,
}

/// Why a task stopped working.
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// The job is stopping; not a failure.
    #[error("task stopped")]
    Stopped,
    /// The guest failed (trap, timeout, bad output, its own error…).
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// A source or sink failed, typically on I/O.
    #[error("{0}")]
    Connector(String),
    /// A batch on a channel was malformed.
    #[error("malformed batch on input {input}: {problem}")]
    Malformed {
        /// The input port.
        input: usize,
        /// What is wrong with it.
        problem: weir_abi::DecodeError,
    },
    /// A restored state could not be used.
    #[error("cannot restore task state: {0}")]
    Restore(String),
    /// The host code of the task panicked: a bug in Weir, reported like a failure.
    #[error("task thread panicked: {0}")]
    Panic(String),
}

impl From<Stopped> for TaskError {
    fn from(_: Stopped) -> Self {
        TaskError::Stopped
    }
}

impl From<RouteError> for TaskError {
    fn from(e: RouteError) -> Self {
        match e {
            RouteError::Stopped(_) => TaskError::Stopped,
            RouteError::Malformed(problem) => TaskError::Malformed { input: 0, problem },
        }
    }
}

/// What a non-source task runs: a wasm operator or a sink.
pub trait Processor: Send {
    /// Processes one encoded batch (its port is the input it came from).
    fn process(&mut self, batch: &[u8], out: &mut Router) -> Result<(), TaskError>;
    /// Every input has ended: emit whatever is final.
    fn finish(&mut self, out: &mut Router) -> Result<(), TaskError>;
    /// The synchronous part of a snapshot: the state as bytes. Sinks pre-commit here.
    fn snapshot(&mut self, barrier: Barrier) -> Result<Vec<u8>, TaskError>;
    /// Replaces the state with one taken by [`snapshot`](Self::snapshot).
    fn restore(&mut self, state: &[u8]) -> Result<(), TaskError>;
    /// Checkpoints up to `id` are complete. Sinks commit here.
    fn checkpoint_complete(&mut self, id: CheckpointId) -> Result<(), TaskError>;

    /// The synchronous part of a periodic checkpoint's snapshot, which may build on the
    /// states of earlier checkpoints (an incremental image): the state and those
    /// checkpoints, base first. By default [`snapshot`](Self::snapshot), self-contained.
    fn snapshot_incremental(&mut self, barrier: Barrier) -> Result<ChainedState, TaskError> {
        Ok(ChainedState {
            state: self.snapshot(barrier)?,
            chain: Vec::new(),
        })
    }

    /// Replaces the state with the one `chain` (the states of the checkpoints a
    /// [`ChainedState`] named, base first) and `state` make; `resume` says whether later
    /// snapshots may build on it. Takes the states as read, so a large one can be kept without
    /// a copy. By default [`restore`](Self::restore), refusing a chain.
    fn restore_chain(
        &mut self,
        chain: Vec<Vec<u8>>,
        state: Vec<u8>,
        resume: bool,
    ) -> Result<(), TaskError> {
        let _ = resume;
        if !chain.is_empty() {
            return Err(TaskError::Restore(format!(
                "the state builds on {} earlier checkpoints, but this task only takes \
                 self-contained states",
                chain.len()
            )));
        }
        self.restore(&state)
    }

    /// Checkpoint `id` was aborted: a state that builds on it can never be restored. By
    /// default nothing.
    fn checkpoint_aborted(&mut self, id: CheckpointId) -> Result<(), TaskError> {
        let _ = id;
        Ok(())
    }
}

/// A snapshot that may build on the states of earlier checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChainedState {
    /// The state bytes.
    pub state: Vec<u8>,
    /// The earlier checkpoints whose states of this task a restore needs, base first; empty
    /// for a self-contained state.
    pub chain: Vec<CheckpointId>,
}

/// Everything a task thread needs besides what it runs.
pub struct TaskEnv {
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
pub fn run_processor(
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
            .unwrap_or(0);
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
                    AlignmentEvent::Aligned {
                        alignment,
                        superseded,
                        ..
                    } => {
                        if let Some(older) = superseded {
                            env.persister.decline(
                                older,
                                &env.id,
                                "a newer barrier arrived during alignment",
                            );
                        }
                        snapshot(&mut env, processor.as_mut(), barrier, finished, alignment)?
                    }
                    AlignmentEvent::Started { waiting_for, .. } if waiting_for > 0 => {
                        kill_point::reached(KillPoint::Alignment);
                    }
                    AlignmentEvent::Superseded { aborted, .. } => {
                        env.persister.decline(
                            aborted,
                            &env.id,
                            "a newer barrier arrived during alignment",
                        );
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
pub fn run_source(
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
                let state = TaskState {
                    finished,
                    inner: source.position(),
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
            Some(Control::Complete(_) | Control::Abort(_)) => continue,
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
