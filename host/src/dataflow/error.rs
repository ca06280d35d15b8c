//! Why a task stops: [`TaskError`], what every task loop, source, processor and sink returns,
//! and [`RouteError`], why a task's router could not pass its output on.
//!
//! In a file of their own because both directions need both: a router delivers to the tasks
//! chained after it and returns their failures, and a task returns its router's.
//!
//! A connector's own failures are not variants here: each connector declares its errors beside
//! its code and implements [`ConnectorFailure`] for them, and a task carries one as
//! [`TaskError::Connector`]. So the task loop names no concrete connector (nor its client
//! library's error types), and a new connector adds its errors without touching this file.

use std::fmt;

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
    /// A connector failed in its own way (a file it cannot read, a broker that refused a
    /// request, a record it cannot write): its typed error, shown as it is.
    #[error(transparent)]
    Connector(ConnectorError),
    /// The task's keyed state store failed (its disk full or failing); the message says what
    /// it was doing and where.
    #[error(transparent)]
    Store(#[from] crate::state::keyed::StoreError),
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
            TaskError::Stopped => self,
            TaskError::Connector(ref failure) if failure.0.is_external() => self,
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

/// A connector's own error, as a task carries it: what a connector implements for each of its
/// error types, so that [`TaskError`] can hold any of them behind one variant.
pub(crate) trait ConnectorFailure: std::error::Error + Send + Sync + 'static {
    /// The connector that failed, by the `type` a job file names it with (`file`, `kafka`,
    /// `stdout`).
    fn connector(&self) -> &'static str;

    /// Whether this is a failure of what the connector talks to (a broker that did not answer
    /// in time) rather than of the state it was restoring: raised while a task takes up its
    /// restored state, such a failure does not refuse the checkpoint
    /// ([`TaskError::while_restoring`]), and the restart strategy may get past it. `false`
    /// unless a connector says otherwise.
    fn is_external(&self) -> bool {
        false
    }
}

/// One connector's failure behind [`TaskError::Connector`]: shown as the connector's error
/// (its message, and its cause as the source); its debug form names the connector first.
pub(crate) struct ConnectorError(Box<dyn ConnectorFailure>);

impl fmt::Debug for ConnectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectorError")
            .field("connector", &self.0.connector())
            .field("failure", &self.0)
            .finish()
    }
}

impl fmt::Display for ConnectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for ConnectorError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl<E: ConnectorFailure> From<E> for TaskError {
    fn from(failure: E) -> Self {
        TaskError::Connector(ConnectorError(Box::new(failure)))
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

/// The kind of the I/O error `error` keeps as its source, if it keeps one: what a caller that
/// needs the kind finds. The tests of every error that wraps an I/O error check it with this.
#[cfg(test)]
pub(crate) fn io_source_kind(error: &dyn std::error::Error) -> Option<std::io::ErrorKind> {
    error
        .source()
        .and_then(|e| e.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connector's failure as a test writes one.
    #[derive(Debug, thiserror::Error)]
    #[error("test connector: {what}")]
    struct Failure {
        what: &'static str,
        external: bool,
        #[source]
        source: std::io::Error,
    }

    impl ConnectorFailure for Failure {
        fn connector(&self) -> &'static str {
            "test"
        }

        fn is_external(&self) -> bool {
            self.external
        }
    }

    fn failure(what: &'static str, external: bool) -> TaskError {
        Failure {
            what,
            external,
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied"),
        }
        .into()
    }

    #[test]
    fn a_connector_failure_of_what_it_talks_to_during_a_restore_is_no_refusal_of_the_checkpoint() {
        assert!(!failure("no answer", true).while_restoring().is_restoring());
        assert!(!TaskError::Stopped.while_restoring().is_restoring());
        assert!(failure("bad state", false).while_restoring().is_restoring());
        let state = TaskError::Restore("not a state of this operator".into()).while_restoring();
        assert!(state.is_restoring());
        // Shown as what it wraps.
        assert_eq!(
            state.to_string(),
            "cannot restore task state: not a state of this operator"
        );
    }

    #[test]
    fn a_connector_failure_is_shown_as_the_connectors_own_error_with_its_cause() {
        let error = failure("cannot read", false);
        assert_eq!(error.to_string(), "test connector: cannot read");
        assert!(
            format!("{error:?}").starts_with("Connector(ConnectorError { connector: \"test\", "),
            "{error:?}"
        );
        // The cause stays reachable as the source, for whoever needs its kind.
        assert_eq!(
            crate::dataflow::error::io_source_kind(&error),
            Some(std::io::ErrorKind::PermissionDenied)
        );
    }
}
