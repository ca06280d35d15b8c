//! The interfaces a task runs: a [`Source`] that emits records with a
//! checkpointable position, a [`Processor`] (a wasm operator or a sink) that
//! takes batches and snapshots, and the [`TaskError`] either reports.
//!
//! They live beside the task loop that calls them ([`super::task`]), so whoever
//! writes a connector or a new kind of operator finds its whole contract here.

use std::time::{Duration, Instant};

use super::error::{RouteError, TaskError};
use super::router::Router;
use super::watermark::SourceClock;
use crate::ids::{Barrier, CheckpointId};
use crate::state::HostState;

/// What one [`Source::poll`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SourcePoll {
    /// Records were emitted (maybe zero); poll again soon.
    Emitted,
    /// Nothing to read right now (rate limit, or a followed file not growing): poll again after this long.
    Idle(Duration),
    /// The source has no more records, ever.
    Exhausted,
}

/// What a source emits into: the task's router, and the clock that derives the source's
/// watermarks from the timestamps it reads, when the source has a watermark strategy.
pub(crate) struct SourceOutput<'a> {
    router: &'a mut Router,
    clock: Option<&'a mut SourceClock>,
}

impl<'a> SourceOutput<'a> {
    /// Output into `router`, timestamps observed by `clock`.
    pub(crate) fn new(router: &'a mut Router, clock: Option<&'a mut SourceClock>) -> Self {
        SourceOutput { router, clock }
    }

    /// Emits one record.
    ///
    /// Always inlined into the source's loop, with the router's push beneath it: see
    /// [`Router::push`].
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        key: &[u8],
        value: &[u8],
        timestamp: i64,
    ) -> Result<(), RouteError> {
        if let Some(clock) = self.clock.as_deref_mut() {
            clock.observe(timestamp);
        }
        self.router.push(key, value, timestamp)
    }

    /// The records emitted from now on come from the split `id` (a Kafka partition), which
    /// has a watermark of its own until its source combines them. A source with one split
    /// never calls it. Naming a split also makes it known before it has records, so that it
    /// holds the watermark back until it reads some or goes idle.
    pub(crate) fn enter_split(&mut self, id: &str) {
        if let Some(clock) = self.clock.as_deref_mut() {
            clock.enter_split(id, Instant::now());
        }
    }

    /// Whether the source's watermarks are tracked: whether [`enter_split`](Self::enter_split)
    /// does anything (a source may skip naming splits otherwise).
    pub(crate) fn tracks_splits(&self) -> bool {
        self.clock.is_some()
    }
}

/// A source of records with a checkpointable position.
pub(crate) trait Source: Send {
    /// Emits up to `max` records into `out`.
    fn poll(&mut self, out: &mut SourceOutput<'_>, max: usize) -> Result<SourcePoll, TaskError>;
    /// The current position: everything before it has been emitted.
    fn position(&self) -> Vec<u8>;
    /// Moves to a position returned by [`position`](Self::position).
    fn seek(&mut self, position: &[u8]) -> Result<(), TaskError>;
    /// A checkpoint completed; `position` is what [`position`](Self::position) returned for
    /// it. A source that reports progress elsewhere (a Kafka consumer group) does it here.
    /// By default nothing.
    fn checkpoint_complete(&mut self, position: &[u8]) -> Result<(), TaskError> {
        let _ = position;
        Ok(())
    }
}

/// What a non-source task runs: a wasm operator or a sink.
pub(crate) trait Processor: Send {
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

    /// The task's watermark advanced to `watermark`: fire the event-time timers it makes due
    /// and tell the guest, routing what it emits (`docs/ABI.md` §15). By default nothing: a
    /// sink has no timers.
    fn advance_watermark(&mut self, watermark: i64, out: &mut Router) -> Result<(), TaskError> {
        let _ = (watermark, out);
        Ok(())
    }

    /// Fires the processing-time timers due at `now` (milliseconds since the Unix epoch). By
    /// default nothing.
    fn fire_processing_timers(&mut self, now: i64, out: &mut Router) -> Result<(), TaskError> {
        let _ = (now, out);
        Ok(())
    }

    /// When the next processing-time timer fires, if one is set.
    fn next_processing_timer(&self) -> Option<i64> {
        None
    }

    /// What the processor keeps on the host for its guest (`state::HostState`: the guest's
    /// watermark and timers), which the task snapshots beside the processor's own state and
    /// restores after it; `None` for a processor without a guest (a sink), which keeps none.
    fn host_state(&mut self) -> Option<&mut HostState> {
        None
    }
}

/// A snapshot that may build on the states of earlier checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ChainedState {
    /// The state bytes.
    pub state: Vec<u8>,
    /// The earlier checkpoints whose states of this task a restore needs, base first; empty
    /// for a self-contained state.
    pub chain: Vec<CheckpointId>,
}
