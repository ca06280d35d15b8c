//! What flows on a channel between two tasks: batches of records and, in
//! band with them, checkpoint barriers and watermarks.

use super::watermark::Watermark;
use crate::ids::Barrier;

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
