//! The trait an operator implements: the plain-Rust face of the guest exports.

use crate::{Batch, Context, FiredTimers, Output, Result};

/// A stream operator: turns batches of input records into output records.
///
/// The host makes one instance per subtask and calls it one call at a time: [`init`](Self::init)
/// once, then [`process`](Self::process) for every batch, interleaved with checkpoints
/// (see [`State`](crate::State)) and their completion notices, fired timers
/// ([`on_timers`](Self::on_timers)) and watermark notices ([`on_watermark`](Self::on_watermark)),
/// and [`finish`](Self::finish) once if every input ends. Returning an error fails the call and,
/// with it, the job's current attempt; the job then restarts from its latest checkpoint.
///
/// Only `init` and `process` must be written: every other method has a body that does nothing,
/// so an operator that keeps no timers never mentions them. Event time, timers and side outputs
/// are in `docs/ABI.md` §15; the [`window`](crate::window) module builds windows on them.
pub trait Operator: Sized + 'static {
    /// Creates the instance. A restored instance is created here first, with the same context,
    /// and then given its state.
    fn init(ctx: &Context) -> Result<Self>;

    /// Handles one batch of input records; `input.port()` says which input it came from
    /// (numbered from 0 in the order the job file lists them). Output goes to `out`, which also
    /// sets timers and tells the watermark.
    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()>;

    /// Timers the operator set with [`Output::set_timer`] fired: all of one domain, in
    /// timestamp order, ties by key. The operator may emit, and set and delete timers. During
    /// an event-time firing [`Output::watermark`] is already the watermark that fires them.
    /// The default ignores them.
    fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
        let _ = (timers, out);
        Ok(())
    }

    /// The task's watermark advanced to `watermark`, after the event-time timers it fired and
    /// before it goes downstream: what the operator emits here precedes it. At the end of the
    /// input it is called with `i64::MAX`, before [`finish`](Self::finish). The default does
    /// nothing.
    fn on_watermark(&mut self, watermark: i64, out: &mut Output) -> Result<()> {
        let _ = (watermark, out);
        Ok(())
    }

    /// Every input has ended: emit whatever is still held back. Not called when the job is
    /// cancelled or fails. The event-time timers have all fired by then; timers cannot be set
    /// here.
    fn finish(&mut self, out: &mut Output) -> Result<()> {
        let _ = out;
        Ok(())
    }

    /// Every checkpoint up to and including `checkpoint_id` is durable. Best-effort: the host
    /// may skip notices, so treat one as covering all earlier checkpoints.
    fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        let _ = checkpoint_id;
        Ok(())
    }
}
