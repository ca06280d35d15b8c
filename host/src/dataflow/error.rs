//! Why a task stops: [`TaskError`], what every task loop, source, processor and sink returns,
//! and [`RouteError`], why a task's router could not pass its output on.
//!
//! In a file of their own because both directions need both: a router delivers to the tasks
//! chained after it and returns their failures, and a task returns its router's.

use std::io;
use std::path::PathBuf;

use weir_abi::DecodeError;

use super::channel::Stopped;
use crate::ids::TaskId;
use crate::wasm::GuestError;

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

/// Why a task could not route its output.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RouteError {
    /// The job is stopping.
    #[error(transparent)]
    Stopped(#[from] Stopped),
    /// A batch handed to the router was malformed (a bug in the host, since
    /// guest output is validated by the wasm layer).
    #[error("malformed batch: {0}")]
    Malformed(#[from] DecodeError),
    /// A task chained after this one failed; the error names it ([`TaskError::Chained`]).
    #[error(transparent)]
    Chained(Box<TaskError>),
}

impl RouteError {
    /// The failure of a chained task's delivery: a stop stays a stop.
    pub(crate) fn from_chained(error: TaskError) -> Self {
        match error {
            TaskError::Stopped => RouteError::Stopped(Stopped),
            error => RouteError::Chained(Box::new(error)),
        }
    }
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
