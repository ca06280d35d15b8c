//! What flows on a channel between two tasks: batches of records and, in
//! band with them, checkpoint barriers.

use crate::checkpoint::{CheckpointId, CheckpointKind};

/// A checkpoint barrier: everything sent before it on a channel belongs to the
/// checkpoint, everything after it does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Barrier {
    /// The checkpoint the barrier belongs to.
    pub id: CheckpointId,
    /// Periodic checkpoint or savepoint: decides where the state is stored.
    pub kind: CheckpointKind,
}

/// One item on a channel, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// An encoded batch (`weir_abi::Batch` layout) whose port field is already
    /// the receiving task's input port for this channel.
    Batch(Vec<u8>),
    /// A checkpoint barrier.
    Barrier(Barrier),
    /// The sender will send no more batches. Barriers may still follow: a
    /// finished task keeps taking part in checkpoints until the job ends.
    EndOfInput,
}
