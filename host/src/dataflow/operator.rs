//! A wasm operator as a task's [`Processor`]: the bridge from the dataflow to
//! the wasm layer's [`GuestInstance`], the only way the dataflow reaches a guest.

use crate::checkpoint::CheckpointId;
use crate::dataflow::message::Barrier;
use crate::dataflow::router::Router;
use crate::dataflow::task::{Processor, TaskError};
use crate::wasm::GuestInstance;

/// Runs batches through one guest instance and routes what it emits.
#[derive(Debug)]
pub struct WasmOperator {
    instance: GuestInstance,
}

impl WasmOperator {
    /// Wraps an initialised instance.
    pub fn new(instance: GuestInstance) -> Self {
        WasmOperator { instance }
    }

    fn route(outputs: Vec<Vec<u8>>, out: &mut Router) -> Result<(), TaskError> {
        for batch in outputs {
            out.push_batch(batch)?;
        }
        Ok(())
    }
}

impl Processor for WasmOperator {
    fn process(&mut self, batch: &[u8], out: &mut Router) -> Result<(), TaskError> {
        let outputs = self.instance.process(batch)?;
        Self::route(outputs, out)
    }

    fn finish(&mut self, out: &mut Router) -> Result<(), TaskError> {
        let outputs = self.instance.finish()?;
        Self::route(outputs, out)
    }

    fn snapshot(&mut self, barrier: Barrier) -> Result<Vec<u8>, TaskError> {
        Ok(self.instance.snapshot(barrier.id.0)?)
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), TaskError> {
        Ok(self.instance.restore(state)?)
    }

    fn checkpoint_complete(&mut self, id: CheckpointId) -> Result<(), TaskError> {
        Ok(self.instance.checkpoint_complete(id.0)?)
    }
}
