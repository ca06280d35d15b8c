//! What flows on a channel between two tasks — batches of records and, in band with them,
//! checkpoint barriers and watermarks — and what the job's driver tells a running task.

use super::watermark::Watermark;
use crate::ids::{Barrier, CheckpointId};

/// One item on a channel, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// An encoded batch (`weir_abi::Batch` layout) whose port field is already
    /// the receiving task's input port for this channel.
    Batch(Vec<u8>),
    /// A checkpoint barrier.
    Barrier(Barrier),
    /// The sender's watermark (`docs/ABI.md` §15).
    Watermark(Watermark),
    /// The sender will send no more batches nor watermarks: to the receiver, the channel's
    /// watermark is the end of time. Barriers may still follow: a finished task keeps taking
    /// part in checkpoints until the job ends.
    EndOfInput,
}

/// What the job's driver tells a running task, on the task's control channel. A task that
/// heads a chain passes on to the tasks chained after it what concerns them too
/// ([`Complete`](Control::Complete), [`Abort`](Control::Abort)).
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
