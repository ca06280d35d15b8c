//! The trait an operator implements: the plain-Rust face of the guest exports.

use crate::{Batch, Context, Output, Result};

/// A stream operator: turns batches of input records into output records.
///
/// The host makes one instance per subtask and calls it one call at a time: [`init`](Self::init)
/// once, then [`process`](Self::process) for every batch, interleaved with checkpoints
/// (see [`State`](crate::State)) and their completion notices, and [`finish`](Self::finish) once
/// if every input ends. Returning an error fails the call and, with it, the job's current
/// attempt; the job then restarts from its latest checkpoint.
pub trait Operator: Sized + 'static {
    /// Creates the instance. A restored instance is created here first, with the same context,
    /// and then given its state.
    fn init(ctx: &Context) -> Result<Self>;

    /// Handles one batch of input records; `input.port()` says which input it came from
    /// (numbered from 0 in the order the job file lists them). Output goes to `out`.
    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()>;

    /// Every input has ended: emit whatever is still held back. Not called when the job is
    /// cancelled or fails.
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
