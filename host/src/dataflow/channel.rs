//! Bounded channels between tasks, and the stop signal that lets a task
//! blocked on a full or empty channel notice that the job is stopping.
//!
//! Channels are bounded ([`CHANNEL_CAPACITY`] messages of at most about
//! [`BATCH_BYTES`](super::router::BATCH_BYTES) each), so a slow consumer
//! back-pressures its producers all the way to the sources, and memory stays
//! bounded. A blocked send wakes every [`POLL`] to check the [`StopSignal`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, SendTimeoutError, Sender};

use super::message::Message;

/// Messages a channel holds before its sender blocks.
pub(crate) const CHANNEL_CAPACITY: usize = 16;

/// How often a blocked task checks whether it should stop.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// Creates a bounded channel for [`Message`]s.
pub(crate) fn channel() -> (Sender<Message>, Receiver<Message>) {
    crossbeam_channel::bounded(CHANNEL_CAPACITY)
}

/// Shared flag telling every task of one job attempt to stop as soon as it can.
#[derive(Debug, Clone, Default)]
pub(crate) struct StopSignal(Arc<AtomicBool>);

impl StopSignal {
    /// A signal that is not raised.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Asks every holder to stop.
    pub(crate) fn raise(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether [`raise`](Self::raise) was called.
    pub(crate) fn is_raised(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// The task must stop: the job is stopping, or the other end of a channel is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("task stopped")]
pub(crate) struct Stopped;

/// Sends `msg`, waiting while the channel is full, until it is taken or the
/// job stops. Time spent waiting is added to `backpressured_nanos`.
pub(crate) fn send(
    sender: &Sender<Message>,
    msg: Message,
    stop: &StopSignal,
    backpressured_nanos: &AtomicU64,
) -> Result<(), Stopped> {
    let msg = match sender.try_send(msg) {
        Ok(()) => return Ok(()),
        Err(crossbeam_channel::TrySendError::Full(msg)) => msg,
        Err(crossbeam_channel::TrySendError::Disconnected(_)) => return Err(Stopped),
    };
    let started = Instant::now();
    let mut msg = msg;
    let result = loop {
        if stop.is_raised() {
            break Err(Stopped);
        }
        match sender.send_timeout(msg, POLL) {
            Ok(()) => break Ok(()),
            Err(SendTimeoutError::Timeout(back)) => msg = back,
            Err(SendTimeoutError::Disconnected(_)) => break Err(Stopped),
        }
    };
    backpressured_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    result
}
