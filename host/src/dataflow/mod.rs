//! The execution graph and the tasks that run it: channels, partitioners,
//! barrier alignment and the task loop.

pub mod alignment;
pub mod channel;
pub mod message;
pub mod metrics;
pub mod operator;
pub mod persist;
pub mod processor;
pub mod router;
pub mod task;
