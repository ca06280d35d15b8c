//! The `blackhole` sink: drops every record (the task counts them), for benchmarks.

use super::connector::{SinkConnector, TaskContext};
use crate::dataflow::error::TaskError;
use crate::dataflow::processor::Processor;
use crate::dataflow::router::Router;
use crate::ids::Barrier;
use crate::ids::CheckpointId;

/// The `blackhole` sink. It keeps no state, so it has no rescale rule.
pub(crate) struct Connector;

impl SinkConnector for Connector {
    fn build(&self, _task: TaskContext<'_>) -> Result<Box<dyn Processor>, TaskError> {
        Ok(Box::new(Blackhole))
    }
}

/// Discards records.
#[derive(Debug, Default)]
pub(crate) struct Blackhole;

impl Processor for Blackhole {
    fn process(&mut self, _batch: &[u8], _out: &mut Router) -> Result<(), TaskError> {
        Ok(())
    }

    fn finish(&mut self, _out: &mut Router) -> Result<(), TaskError> {
        Ok(())
    }

    fn snapshot(&mut self, _barrier: Barrier) -> Result<Vec<u8>, TaskError> {
        Ok(Vec::new())
    }

    fn restore(&mut self, _state: &[u8]) -> Result<(), TaskError> {
        Ok(())
    }

    fn checkpoint_complete(&mut self, _id: CheckpointId) -> Result<(), TaskError> {
        Ok(())
    }
}
