//! A wasm operator as a task's [`Processor`]: the bridge from the dataflow to
//! the wasm layer's [`GuestInstance`], the only way the dataflow reaches a guest.
//! Being that one way, it is where guest calls are counted and timed
//! ([`TaskMetrics::add_guest_call`]), apart from the routing of their output.

use std::sync::Arc;
use std::time::Instant;

use crate::dataflow::error::TaskError;
use crate::dataflow::metrics::TaskMetrics;
use crate::dataflow::processor::{ChainedState, Processor};
use crate::dataflow::router::Router;
use crate::ids::Barrier;
use crate::ids::CheckpointId;
use crate::kill_point::{self, KillPoint};
use crate::state::HostState;
use crate::wasm::{GuestInstance, GuestOutput, GuestSnapshot};

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

    /// Routes one call's main output and then its side outputs. (Records keep their order
    /// within each output; the outputs are independent streams.)
    fn route(output: GuestOutput, out: &mut Router) -> Result<(), TaskError> {
        for batch in output.main {
            out.push_batch(batch)?;
        }
        for side in output.side {
            out.push_side_batch(&side.output, &side.batch)?;
        }
        Ok(())
    }

    /// What the last `process` or `finish` call emitted.
    fn output(&mut self, main: Vec<Vec<u8>>) -> GuestOutput {
        GuestOutput {
            main,
            side: self.instance.take_side_output(),
        }
    }

    /// Publishes the count of pending timers.
    fn report_timers(&self) {
        self.metrics
            .set_pending_timers(self.instance.time().pending());
    }

    /// Routes the output of one timer or watermark call, counting the call's time.
    fn route_fired(
        metrics: &TaskMetrics,
        started: &mut Instant,
        output: GuestOutput,
        out: &mut Router,
    ) -> Result<(), TaskError> {
        metrics.add_guest_call(started.elapsed());
        Self::route(output, out)?;
        kill_point::reached(KillPoint::TimerFiring);
        *started = Instant::now();
        Ok(())
    }
}

impl Processor for WasmOperator {
    fn process(&mut self, batch: &[u8], out: &mut Router) -> Result<(), TaskError> {
        let main = self.call(|i| i.process(batch))?;
        let output = self.output(main);
        if self.instance.capabilities().on_timers {
            self.report_timers();
        }
        Self::route(output, out)
    }

    fn finish(&mut self, out: &mut Router) -> Result<(), TaskError> {
        let main = self.call(GuestInstance::finish)?;
        let output = self.output(main);
        Self::route(output, out)
    }

    fn advance_watermark(&mut self, watermark: i64, out: &mut Router) -> Result<(), TaskError> {
        let metrics = &self.metrics;
        let mut started = Instant::now();
        self.instance.advance_watermark(watermark, |output| {
            Self::route_fired(metrics, &mut started, output, out)
        })?;
        self.report_timers();
        Ok(())
    }

    fn fire_processing_timers(&mut self, now: i64, out: &mut Router) -> Result<(), TaskError> {
        let metrics = &self.metrics;
        let mut started = Instant::now();
        self.instance.fire_processing_timers(now, |output| {
            Self::route_fired(metrics, &mut started, output, out)
        })?;
        self.report_timers();
        Ok(())
    }

    fn next_processing_timer(&self) -> Option<i64> {
        self.instance.next_processing_timer()
    }

    fn host_state(&mut self) -> Option<&mut HostState> {
        Some(self.instance.host_state())
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
