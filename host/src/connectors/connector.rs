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

use std::fmt;
use std::sync::Arc;

use crate::checkpoint::task_state::RestoredState;
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

/// A check of a restore that talks to what a connector reads (a broker), run off the async
/// threads; see [`SourceConnector::restore_check`].
pub(crate) type RestoreCheck = Box<dyn FnOnce() -> Result<(), ConnectorSetupError> + Send>;

/// One kind of source, with its settings from the job file.
pub(crate) trait SourceConnector {
    /// The source of one subtask.
    fn build(&self, task: TaskContext<'_>) -> Box<dyn Source>;

    /// Checks, once before the job starts, that what the source of vertex `vertex` reads is
    /// there (its brokers answer, its topics exist), so that a job that cannot run stops,
    /// named, instead of failing over forever. Nothing to check by default.
    fn preflight(&self, _vertex: &str) -> Result<(), ConnectorSetupError> {
        Ok(())
    }

    /// What to check before vertex `vertex`'s subtasks take up `states` (their restored states)
    /// from checkpoint `checkpoint`, if anything: a connector reads what it needs of the states
    /// here, and the check it returns talks to the outside world (so the runner runs it on a
    /// blocking thread). An error refuses the restore. Nothing to check by default.
    fn restore_check(
        &self,
        _vertex: &str,
        _states: &[&RestoredState],
        _checkpoint: &str,
    ) -> Option<RestoreCheck> {
        None
    }

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

    /// Checks, once before the job starts, that what the sink of vertex `vertex` writes to is
    /// there (as [`SourceConnector::preflight`]). Nothing to check by default.
    fn preflight(&self, _vertex: &str) -> Result<(), ConnectorSetupError> {
        Ok(())
    }

    /// How its states move to another parallelism; `None` (the default): they cannot, and a
    /// restore at another parallelism that finds one is refused.
    fn rescale_rule(&self) -> Option<RescaleRule> {
        None
    }
}

/// Why a connector's check refuses to start a job, or to restore a checkpoint into it (a Kafka
/// connector's brokers that do not answer, a topic that does not exist or was created again):
/// the connector's own error, shown as it is.
pub struct ConnectorSetupError(Box<dyn std::error::Error + Send + Sync>);

impl ConnectorSetupError {
    /// A connector's `error`.
    pub(crate) fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        ConnectorSetupError(Box::new(error))
    }
}

impl fmt::Debug for ConnectorSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for ConnectorSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for ConnectorSetupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
