//! The execution graph and the tasks that run it: channels, partitioners,
//! barrier alignment and the task loop.

pub(crate) mod alignment;
pub(crate) mod channel;
pub(crate) mod connector_metrics;
pub(crate) mod error;
pub(crate) mod message;
pub(crate) mod metrics;
pub(crate) mod operator;
pub(crate) mod persist;
pub(crate) mod processor;
pub(crate) mod router;
pub(crate) mod task;
pub(crate) mod watermark;
