//! The `stdout` sink: prints each record as a line (`key<TAB>value`). It keeps
//! no state, so after a restore it may print records again (at-least-once).

use std::io::Write;

use weir_abi::Batch;

use super::write_record_line;
use crate::dataflow::error::TaskError;
use crate::dataflow::processor::Processor;
use crate::dataflow::router::Router;
use crate::ids::Barrier;
use crate::ids::CheckpointId;

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
        std::io::stdout()
            .lock()
            .write_all(&self.line)
            .map_err(|e| TaskError::StdoutSink {
                what: "cannot write",
                source: e,
            })
    }

    fn finish(&mut self, _out: &mut Router) -> Result<(), TaskError> {
        Ok(())
    }

    fn snapshot(&mut self, _barrier: Barrier) -> Result<Vec<u8>, TaskError> {
        std::io::stdout()
            .flush()
            .map_err(|e| TaskError::StdoutSink {
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
