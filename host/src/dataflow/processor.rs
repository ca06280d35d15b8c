//! The interfaces a task runs: a [`Source`] that emits records with a
//! checkpointable position, a [`Processor`] (a wasm operator or a sink) that
//! takes batches and snapshots, and the [`TaskError`] either reports.
//!
//! They live beside the task loop that calls them ([`super::task`]), so whoever
//! writes a connector or a new kind of operator finds its whole contract here.

use std::io;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::channel::Stopped;
use super::router::{RouteError, Router};
use super::watermark::SourceClock;
use crate::ids::{Barrier, CheckpointId, TaskId};
use crate::state::HostState;
use crate::wasm::GuestError;

/// What one [`Source::poll`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SourcePoll {
    /// Records were emitted (maybe zero); poll again soon.
    Emitted,
    /// Nothing to read right now (rate limit, or a followed file not growing): poll again after this long.
    Idle(Duration),
    /// The source has no more records, ever.
    Exhausted,
}

/// What a source emits into: the task's router, and the clock that derives the source's
/// watermarks from the timestamps it reads, when the source has a watermark strategy.
pub(crate) struct SourceOutput<'a> {
    router: &'a mut Router,
    clock: Option<&'a mut SourceClock>,
}

impl<'a> SourceOutput<'a> {
    /// Output into `router`, timestamps observed by `clock`.
    pub(crate) fn new(router: &'a mut Router, clock: Option<&'a mut SourceClock>) -> Self {
        SourceOutput { router, clock }
    }

    /// Emits one record.
    #[inline]
    pub(crate) fn push(
        &mut self,
        key: &[u8],
        value: &[u8],
        timestamp: i64,
    ) -> Result<(), RouteError> {
        if let Some(clock) = self.clock.as_deref_mut() {
            clock.observe(timestamp);
        }
        self.router.push(key, value, timestamp)
    }

    /// The records emitted from now on come from the split `id` (a Kafka partition), which
    /// has a watermark of its own until its source combines them. A source with one split
    /// never calls it. Naming a split also makes it known before it has records, so that it
    /// holds the watermark back until it reads some or goes idle.
    pub(crate) fn enter_split(&mut self, id: &str) {
        if let Some(clock) = self.clock.as_deref_mut() {
            clock.enter_split(id, Instant::now());
        }
    }

    /// Whether the source's watermarks are tracked: whether [`enter_split`](Self::enter_split)
    /// does anything (a source may skip naming splits otherwise).
    pub(crate) fn tracks_splits(&self) -> bool {
        self.clock.is_some()
    }
}

/// A source of records with a checkpointable position.
pub(crate) trait Source: Send {
    /// Emits up to `max` records into `out`.
    fn poll(&mut self, out: &mut SourceOutput<'_>, max: usize) -> Result<SourcePoll, TaskError>;
    /// The current position: everything before it has been emitted.
    fn position(&self) -> Vec<u8>;
    /// Moves to a position returned by [`position`](Self::position).
    fn seek(&mut self, position: &[u8]) -> Result<(), TaskError>;
    /// A checkpoint completed; `position` is what [`position`](Self::position) returned for
    /// it. A source that reports progress elsewhere (a Kafka consumer group) does it here.
    /// By default nothing.
    fn checkpoint_complete(&mut self, position: &[u8]) -> Result<(), TaskError> {
        let _ = position;
        Ok(())
    }
}

/// Why a task stopped working.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TaskError {
    /// The job is stopping; not a failure.
    #[error("task stopped")]
    Stopped,
    /// The guest failed (trap, timeout, bad output, its own error…).
    #[error(transparent)]
    Guest(#[from] GuestError),
    /// The file source could not open, seek in or read its file: check that the file
    /// exists and is readable.
    #[error("file source {}: {what}: {source}", path.display())]
    FileSource {
        /// The file it reads.
        path: PathBuf,
        /// What it was doing, such as `cannot read`.
        what: &'static str,
        /// The I/O error.
        source: io::Error,
    },
    /// A line of the file source's file is not what its `format` reads, and its `on_error`
    /// is `fail`.
    #[error(
        "file source {}: line {line} is not a {format} record: {problem} (fix the line, or set \
         `on_error = \"skip\"` on the source to drop such lines)",
        path.display()
    )]
    MalformedLine {
        /// The file it reads.
        path: PathBuf,
        /// The line's number, from 1.
        line: u64,
        /// The source's `format`.
        format: &'static str,
        /// What is wrong with the line.
        problem: String,
    },
    /// The file sink could not write, sync, commit or clean up a part file or its output
    /// directory: check the disk and the directory's permissions.
    #[error("file sink {}: {what}: {source}", path.display())]
    FileSink {
        /// The part file or the output directory concerned.
        path: PathBuf,
        /// What it was doing, such as `cannot fsync`.
        what: &'static str,
        /// The I/O error.
        source: io::Error,
    },
    /// The stdout sink could not write or flush the process's standard output (a closed
    /// pipe, typically).
    #[error("stdout sink: {what}: {source}")]
    StdoutSink {
        /// What it was doing, such as `cannot write`.
        what: &'static str,
        /// The I/O error.
        source: io::Error,
    },
    /// A Kafka connector's request failed: the broker refused it, or did not answer in time.
    #[error("{connector}: {what}: {source}")]
    Kafka {
        /// `kafka source "in"`.
        connector: String,
        /// What it was doing, and what librdkafka last reported on its own.
        what: String,
        /// librdkafka's error.
        source: Box<rdkafka::error::KafkaError>,
    },
    /// A record read by a Kafka source lacks a header its `key`, `value` or `timestamp` names,
    /// or its timestamp header is not an integer, and its `on_error` is `fail`.
    #[error(
        "{connector}: the record at offset {offset} of {topic}/{partition} has {problem} (fix \
         the producer, or set `on_error = \"skip\"` on the source to drop such records)"
    )]
    KafkaUnmappedRecord {
        /// `kafka source "in"`.
        connector: String,
        /// The record's topic.
        topic: String,
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
        /// What is wrong, naming the header and the part it maps (`no header "user" for its
        /// key`).
        problem: String,
    },
    /// A record is larger than a Kafka sink may send.
    #[error(
        "{connector}: a record of {size} bytes (key and value) does not fit in the limit of \
         {limit} bytes (less about 100 bytes of framing), {limit_source}: make the operator emit \
         smaller records, or raise the limit"
    )]
    KafkaRecordTooLarge {
        /// `kafka sink "out"`.
        connector: String,
        /// The record's key and value, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
        /// Where the limit comes from.
        limit_source: String,
    },
    /// A record's key names no topic a Kafka sink with `topic = { from_key … }` may write to:
    /// it lacks the separator, or the text before it is none of the sink's `topics`.
    #[error(
        "{connector}: the record key {key} {problem}; the sink takes each record's topic from \
         its key (`topic = {{ from_key = {separator:?}, topics = [{topics}] }}`), so a key must \
         be <topic>{separator}<key> with one of those topics: make the operator emit such keys, \
         or add the topic to `topics` (it must exist when the job starts)"
    )]
    KafkaRecordTopic {
        /// `kafka sink "out"`.
        connector: String,
        /// The record's key, quoted (lossy UTF-8, its first 100 characters).
        key: String,
        /// What is wrong with it: `has no "/"`, `names topic "x", which is not in `topics``.
        problem: String,
        /// The sink's `from_key`.
        separator: String,
        /// The sink's `topics`, quoted and separated by commas.
        topics: String,
    },
    /// A batch on a channel was malformed.
    #[error("malformed batch on input {input}: {problem}")]
    Malformed {
        /// The input port.
        input: usize,
        /// What is wrong with it.
        problem: weir_abi::DecodeError,
    },
    /// A restored state could not be used.
    #[error("cannot restore task state: {0}")]
    Restore(String),
    /// The task could not take up its restored state (an operator's module that cannot read
    /// it, a sink whose pending output is not where the checkpoint left it): the checkpoint
    /// cannot be restored into the job as it is. The start of a run refuses it; a restart
    /// counts it as a failure like any other. Shown as the failure it wraps, which names the
    /// operator and subtask (the start's refusal says what it means).
    #[error(transparent)]
    Restoring(Box<TaskError>),
    /// The host code of the task panicked: a bug in Weir, reported like a failure.
    #[error("task thread panicked: {0}")]
    Panic(String),
    /// A task chained after the one reporting failed with `error`: the thread running the
    /// chain reports it as `task`'s failure.
    #[error("task {task}: {error}")]
    Chained {
        /// The task that failed.
        task: TaskId,
        /// How.
        error: Box<TaskError>,
    },
}

impl TaskError {
    /// Whether the task failed taking up its restored state ([`TaskError::Restoring`]), itself
    /// or as a task chained after another.
    pub(crate) fn is_restoring(&self) -> bool {
        match self {
            TaskError::Restoring(_) => true,
            TaskError::Chained { error, .. } => error.is_restoring(),
            _ => false,
        }
    }

    /// This error, raised while the task took up its restored state, as that failure
    /// ([`TaskError::Restoring`]) — unless it is a stop, or a failure of what the task talks to
    /// rather than of the state (a Kafka broker that did not answer in time): the checkpoint
    /// is not at fault, and the restart strategy may get past it.
    pub(crate) fn while_restoring(self) -> TaskError {
        match self {
            TaskError::Stopped | TaskError::Kafka { .. } => self,
            error => TaskError::Restoring(Box::new(error)),
        }
    }

    /// This error as the failure of `task`, a task chained after another; an error that
    /// already names a task chained further down keeps that name, and a stop stays a stop.
    pub(crate) fn of_chained(self, task: &TaskId) -> TaskError {
        match self {
            TaskError::Stopped | TaskError::Chained { .. } => self,
            error => TaskError::Chained {
                task: task.clone(),
                error: Box::new(error),
            },
        }
    }
}

impl From<Stopped> for TaskError {
    fn from(_: Stopped) -> Self {
        TaskError::Stopped
    }
}

impl From<RouteError> for TaskError {
    fn from(e: RouteError) -> Self {
        match e {
            RouteError::Stopped(_) => TaskError::Stopped,
            RouteError::Malformed(problem) => TaskError::Malformed { input: 0, problem },
            RouteError::Chained(error) => *error,
        }
    }
}

/// What a non-source task runs: a wasm operator or a sink.
pub(crate) trait Processor: Send {
    /// Processes one encoded batch (its port is the input it came from).
    fn process(&mut self, batch: &[u8], out: &mut Router) -> Result<(), TaskError>;
    /// Every input has ended: emit whatever is final.
    fn finish(&mut self, out: &mut Router) -> Result<(), TaskError>;
    /// The synchronous part of a snapshot: the state as bytes. Sinks pre-commit here.
    fn snapshot(&mut self, barrier: Barrier) -> Result<Vec<u8>, TaskError>;
    /// Replaces the state with one taken by [`snapshot`](Self::snapshot).
    fn restore(&mut self, state: &[u8]) -> Result<(), TaskError>;
    /// Checkpoints up to `id` are complete. Sinks commit here.
    fn checkpoint_complete(&mut self, id: CheckpointId) -> Result<(), TaskError>;

    /// The synchronous part of a periodic checkpoint's snapshot, which may build on the
    /// states of earlier checkpoints (an incremental image): the state and those
    /// checkpoints, base first. By default [`snapshot`](Self::snapshot), self-contained.
    fn snapshot_incremental(&mut self, barrier: Barrier) -> Result<ChainedState, TaskError> {
        Ok(ChainedState {
            state: self.snapshot(barrier)?,
            chain: Vec::new(),
        })
    }

    /// Replaces the state with the one `chain` (the states of the checkpoints a
    /// [`ChainedState`] named, base first) and `state` make; `resume` says whether later
    /// snapshots may build on it. Takes the states as read, so a large one can be kept without
    /// a copy. By default [`restore`](Self::restore), refusing a chain.
    fn restore_chain(
        &mut self,
        chain: Vec<Vec<u8>>,
        state: Vec<u8>,
        resume: bool,
    ) -> Result<(), TaskError> {
        let _ = resume;
        if !chain.is_empty() {
            return Err(TaskError::Restore(format!(
                "the state builds on {} earlier checkpoints, but this task only takes \
                 self-contained states",
                chain.len()
            )));
        }
        self.restore(&state)
    }

    /// Checkpoint `id` was aborted: a state that builds on it can never be restored. By
    /// default nothing.
    fn checkpoint_aborted(&mut self, id: CheckpointId) -> Result<(), TaskError> {
        let _ = id;
        Ok(())
    }

    /// The task's watermark advanced to `watermark`: fire the event-time timers it makes due
    /// and tell the guest, routing what it emits (`docs/ABI.md` §15). By default nothing: a
    /// sink has no timers.
    fn advance_watermark(&mut self, watermark: i64, out: &mut Router) -> Result<(), TaskError> {
        let _ = (watermark, out);
        Ok(())
    }

    /// Fires the processing-time timers due at `now` (milliseconds since the Unix epoch). By
    /// default nothing.
    fn fire_processing_timers(&mut self, now: i64, out: &mut Router) -> Result<(), TaskError> {
        let _ = (now, out);
        Ok(())
    }

    /// When the next processing-time timer fires, if one is set.
    fn next_processing_timer(&self) -> Option<i64> {
        None
    }

    /// What the processor keeps on the host for its guest (`state::HostState`: the guest's
    /// watermark and timers), which the task snapshots beside the processor's own state and
    /// restores after it; `None` for a processor without a guest (a sink), which keeps none.
    fn host_state(&mut self) -> Option<&mut HostState> {
        None
    }
}

/// A snapshot that may build on the states of earlier checkpoints.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct ChainedState {
    /// The state bytes.
    pub state: Vec<u8>,
    /// The earlier checkpoints whose states of this task a restore needs, base first; empty
    /// for a self-contained state.
    pub chain: Vec<CheckpointId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broker_that_does_not_answer_during_a_restore_is_no_refusal_of_the_checkpoint() {
        let kafka = TaskError::Kafka {
            connector: "kafka sink \"out\"".into(),
            what: "cannot read the markers".into(),
            source: Box::new(rdkafka::error::KafkaError::MessageConsumption(
                rdkafka::types::RDKafkaErrorCode::BrokerTransportFailure,
            )),
        };
        assert!(!kafka.while_restoring().is_restoring());
        assert!(!TaskError::Stopped.while_restoring().is_restoring());
        let state = TaskError::Restore("not a state of this operator".into()).while_restoring();
        assert!(state.is_restoring());
        // Shown as what it wraps.
        assert_eq!(
            state.to_string(),
            "cannot restore task state: not a state of this operator"
        );
    }

    #[test]
    fn connector_failures_name_the_connector_its_path_and_what_it_was_doing() {
        let io = || io::Error::new(io::ErrorKind::PermissionDenied, "permission denied");
        let source = TaskError::FileSource {
            path: PathBuf::from("/in/lines.txt"),
            what: "cannot open",
            source: io(),
        };
        assert_eq!(
            source.to_string(),
            "file source /in/lines.txt: cannot open: permission denied"
        );
        let sink = TaskError::FileSink {
            path: PathBuf::from("/out/part-0-0.inprogress"),
            what: "cannot fsync",
            source: io(),
        };
        assert_eq!(
            sink.to_string(),
            "file sink /out/part-0-0.inprogress: cannot fsync: permission denied"
        );
        let stdout = TaskError::StdoutSink {
            what: "cannot write",
            source: io(),
        };
        assert_eq!(
            stdout.to_string(),
            "stdout sink: cannot write: permission denied"
        );
        // The I/O error stays reachable as the source, for whoever needs its kind.
        let cause = std::error::Error::source(&sink).and_then(|e| e.downcast_ref::<io::Error>());
        assert_eq!(
            cause.map(io::Error::kind),
            Some(io::ErrorKind::PermissionDenied)
        );
    }
}
