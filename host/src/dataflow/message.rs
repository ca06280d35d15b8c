//! What flows on a channel between two tasks: batches of records and, in
//! band with them, checkpoint barriers.

use crate::ids::Barrier;

/// One item on a channel, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// An encoded batch (`weir_abi::Batch` layout) whose port field is already
    /// the receiving task's input port for this channel.
    Batch(Vec<u8>),
    /// A checkpoint barrier.
    Barrier(Barrier),
    /// The sender will send no more batches. Barriers may still follow: a
    /// finished task keeps taking part in checkpoints until the job ends.
    EndOfInput,
}
