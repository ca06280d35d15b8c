//! What a connector is to the runtime: [`SourceConnector`] and [`SinkConnector`], the traits
//! each kind of source and sink implements, and the [`TaskContext`] a task builds one with.
//!
//! Why a module of its own: before it, the runtime matched on the job file's kinds in each
//! place it needed something of a connector (building its task, splitting its state on a
//! rescale), so a connector's rules sat in the runtime's files. Now a connector answers for
//! itself through these traits, [`super::source`] and [`super::sink`] (in `mod.rs`) are the one
//! place that maps a job file's kind to its connector, and the runtime asks the trait.
//!
//! A connector's table (its job-file keys) and their validation stay in `job/`, which sits
//! below this layer: the job file is parsed and checked (`weir validate`) without building
//! anything, and `job/` cannot name a type of this floor. The kind enums
//! ([`SourceKind`](crate::job::SourceKind), [`SinkKind`](crate::job::SinkKind)) carry each
//! connector's validated settings up to here.

use std::sync::Arc;

use crate::dataflow::error::TaskError;
use crate::dataflow::metrics::TaskMetrics;
use crate::dataflow::processor::{Processor, Source};

/// The subtask a connector is built for.
pub(crate) struct TaskContext<'a> {
    /// Its vertex's name, as the job file gives it.
    pub(crate) vertex: &'a str,
    /// Its index, from 0.
    pub(crate) subtask: u32,
    /// How many subtasks the vertex runs.
    pub(crate) parallelism: u32,
    /// Its task's counters, where a connector counts what it skips and installs its own
    /// figures ([`TaskMetrics::set_connector`]).
    pub(crate) metrics: Arc<TaskMetrics>,
}

/// How a connector's states, one per old subtask, become the states of the new subtasks (as
/// many as the `u32`), or why they cannot: a connector's rescale rule.
pub(crate) type RescaleRule = fn(&[&[u8]], u32) -> Result<Vec<Vec<u8>>, String>;

/// One kind of source, with its settings from the job file.
pub(crate) trait SourceConnector {
    /// The source of one subtask.
    fn build(&self, task: TaskContext<'_>) -> Box<dyn Source>;

    /// How its positions move to another parallelism; `None` (the default): they cannot, and
    /// a restore at another parallelism that finds one is refused.
    fn rescale_rule(&self) -> Option<RescaleRule> {
        None
    }
}

/// One kind of sink, with its settings from the job file.
pub(crate) trait SinkConnector {
    /// The sink of one subtask; it may fail (a file sink that cannot create its directory).
    fn build(&self, task: TaskContext<'_>) -> Result<Box<dyn Processor>, TaskError>;

    /// How its states move to another parallelism; `None` (the default): they cannot, and a
    /// restore at another parallelism that finds one is refused.
    fn rescale_rule(&self) -> Option<RescaleRule> {
        None
    }
}
