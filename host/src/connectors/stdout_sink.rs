//! The `stdout` sink: prints each record as a line (`key<TAB>value`). It keeps
//! no state, so after a restore it may print records again (at-least-once).

use std::io::Write;

use weir_abi::Batch;

use super::connector::{SinkConnector, TaskContext};
use super::record::write_record_line;
use crate::dataflow::error::{ConnectorFailure, TaskError};
use crate::dataflow::processor::Processor;
use crate::dataflow::router::Router;
use crate::ids::Barrier;
use crate::ids::CheckpointId;

/// The `stdout` sink. It keeps no state, so it has no rescale rule.
pub(crate) struct Connector;

impl SinkConnector for Connector {
    fn build(&self, _task: TaskContext<'_>) -> Result<Box<dyn Processor>, TaskError> {
        Ok(Box::new(StdoutSink::default()))
    }
}

/// The stdout sink could not write or flush the process's standard output (a closed pipe,
/// typically).
#[derive(Debug, thiserror::Error)]
#[error("stdout sink: {what}: {source}")]
pub(crate) struct StdoutSinkError {
    /// What it was doing, such as `cannot write`.
    what: &'static str,
    /// The I/O error.
    source: std::io::Error,
}

impl ConnectorFailure for StdoutSinkError {
    fn connector(&self) -> &'static str {
        "stdout"
    }
}

/// Prints records to standard output.
#[derive(Debug, Default)]
pub(crate) struct StdoutSink {
    line: Vec<u8>,
}

impl Processor for StdoutSink {
    fn process(&mut self, batch: &[u8], _out: &mut Router) -> Result<(), TaskError> {
        let batch =
            Batch::decode(batch).map_err(|problem| TaskError::Malformed { input: 0, problem })?;
        self.line.clear();
        for r in batch.iter() {
            write_record_line(&mut self.line, r.key, r.value);
        }
        std::io::stdout().lock().write_all(&self.line).map_err(|e| {
            StdoutSinkError {
                what: "cannot write",
                source: e,
            }
            .into()
        })
    }

    fn finish(&mut self, _out: &mut Router) -> Result<(), TaskError> {
        Ok(())
    }

    fn snapshot(&mut self, _barrier: Barrier) -> Result<Vec<u8>, TaskError> {
        std::io::stdout().flush().map_err(|e| StdoutSinkError {
            what: "cannot flush",
            source: e,
        })?;
        Ok(Vec::new())
    }

    fn restore(&mut self, _state: &[u8]) -> Result<(), TaskError> {
        Ok(())
    }

    fn checkpoint_complete(&mut self, _id: CheckpointId) -> Result<(), TaskError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn its_failures_say_what_it_was_doing() {
        let error = TaskError::from(StdoutSinkError {
            what: "cannot write",
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied"),
        });
        assert_eq!(
            error.to_string(),
            "stdout sink: cannot write: permission denied"
        );
    }
}
