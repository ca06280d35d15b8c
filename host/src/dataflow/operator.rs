//! A wasm operator as a task's [`Processor`]: the bridge from the dataflow to
//! the wasm layer's [`GuestInstance`], the only way the dataflow reaches a guest.
//! Being that one way, it is where guest calls are counted and timed
//! ([`TaskMetrics::add_guest_call`]), apart from the routing of their output.

use std::sync::Arc;
use std::time::Instant;

use crate::dataflow::metrics::TaskMetrics;
use crate::dataflow::processor::{ChainedState, Processor, TaskError};
use crate::dataflow::router::Router;
use crate::ids::Barrier;
use crate::ids::CheckpointId;
use crate::wasm::{GuestInstance, GuestSnapshot};

/// Runs batches through one guest instance and routes what it emits.
#[derive(Debug)]
pub(crate) struct WasmOperator {
    instance: GuestInstance,
    metrics: Arc<TaskMetrics>,
}

impl WasmOperator {
    /// Wraps an initialised instance; its calls are counted in `metrics`.
    pub(crate) fn new(instance: GuestInstance, metrics: Arc<TaskMetrics>) -> Self {
        WasmOperator { instance, metrics }
    }

    /// Runs one guest call, counting it and its time.
    fn call<R>(&mut self, call: impl FnOnce(&mut GuestInstance) -> R) -> R {
        let started = Instant::now();
        let result = call(&mut self.instance);
        self.metrics.add_guest_call(started.elapsed());
        result
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
        let outputs = self.call(|i| i.process(batch))?;
        Self::route(outputs, out)
    }

    fn finish(&mut self, out: &mut Router) -> Result<(), TaskError> {
        let outputs = self.call(GuestInstance::finish)?;
        Self::route(outputs, out)
    }

    fn snapshot(&mut self, barrier: Barrier) -> Result<Vec<u8>, TaskError> {
        Ok(self.call(|i| i.snapshot(barrier.id))?)
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), TaskError> {
        Ok(self.call(|i| i.restore(state))?)
    }

    fn checkpoint_complete(&mut self, id: CheckpointId) -> Result<(), TaskError> {
        Ok(self.call(|i| i.checkpoint_complete(id))?)
    }

    fn snapshot_incremental(&mut self, barrier: Barrier) -> Result<ChainedState, TaskError> {
        let GuestSnapshot { state, chain } = self.call(|i| i.snapshot_incremental(barrier.id))?;
        Ok(ChainedState { state, chain })
    }

    fn restore_chain(
        &mut self,
        chain: Vec<Vec<u8>>,
        state: Vec<u8>,
        resume: bool,
    ) -> Result<(), TaskError> {
        Ok(self.call(|i| i.restore_chain_owned(chain, state, resume))?)
    }

    fn checkpoint_aborted(&mut self, id: CheckpointId) -> Result<(), TaskError> {
        self.instance.checkpoint_aborted(id);
        Ok(())
    }
}
