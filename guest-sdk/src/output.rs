//! Where an operator's records go, and its handle on the host's time.
//!
//! [`Output`] encodes records straight into one reusable batch for the main output and one per
//! side output. When a batch grows past [`FLUSH_AT`] and at the end of every call it is handed
//! on: to the host's `emit` and `emit_to` imports in the wasm build, or to the native harness's
//! emulation of the host. Both builds flush at the same points, so the harness sees the batches
//! the host would.
//!
//! The operator's timers and clocks (`docs/ABI.md` §15) are the host's, so they are reached
//! through the same value: [`Output::set_timer`], [`Output::watermark`] and the rest call the
//! host's imports in wasm and the harness's emulated host natively. A use the ABI forbids (a
//! timer set from `finish`, an empty side output name) fails the call when it returns, with the
//! same message on both builds.

use weir_abi::time::MAX_OUTPUT_NAME_BYTES;
use weir_abi::{BatchBuilder, Record, TimeDomain};

use crate::Error;
use crate::testing::host::EmulatedHost;

/// A batch is handed on once its encoding reaches this many bytes (1 MiB), which bounds the
/// guest memory that output takes while keeping host calls few.
pub(crate) const FLUSH_AT: usize = 1 << 20;

/// The sink for an operator's output records and its way to the host's timers and clocks, given
/// to every [`Operator`](crate::Operator) call that may emit.
#[derive(Debug)]
pub struct Output {
    /// The main output's batch being filled; port 0, as output batches must be.
    batch: BatchBuilder,
    /// The side outputs' batches, in the order of their first use; kept from call to call so
    /// their buffers are reused.
    sides: Vec<SideBatch>,
    /// The call running, for the rules of which may set timers.
    call: Call,
    /// The first forbidden use of the ABI during this call: it fails the call.
    fault: Option<Error>,
    /// Where complete batches and timer calls go.
    sink: Sink,
}

/// The batch being filled for one side output.
#[derive(Debug)]
struct SideBatch {
    /// The side output's name: 1 to 255 bytes of UTF-8.
    name: String,
    /// Its records since the last flush.
    batch: BatchBuilder,
    /// How the batch reaches the host in wasm: `imports::emit_to`, named only where a side batch
    /// is made, in [`Output::emit_to`]. A module whose operator never emits to a side output
    /// then has no path to the import, and the linker leaves it out: such a module still loads
    /// on a host without it.
    #[cfg(target_arch = "wasm32")]
    send: fn(&str, &[u8]),
}

/// The guest exports during which an [`Output`] is handed to the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// `weir_process`.
    Process,
    /// `weir_on_timers`.
    OnTimers,
    /// `weir_on_watermark`.
    OnWatermark,
    /// `weir_finish`.
    Finish,
}

impl Call {
    /// The export's name, for messages.
    fn export(self) -> &'static str {
        match self {
            Call::Process => weir_abi::exports::PROCESS,
            Call::OnTimers => weir_abi::exports::ON_TIMERS,
            Call::OnWatermark => weir_abi::exports::ON_WATERMARK,
            Call::Finish => weir_abi::exports::FINISH,
        }
    }

    /// Whether `timer_set` and `timer_delete` are allowed during the call (ABI §4).
    fn may_use_timers(self) -> bool {
        self != Call::Finish
    }
}

/// Where complete batches and timer calls go.
#[derive(Debug)]
pub(crate) enum Sink {
    /// The wasm build: the host's imports, through `ffi`.
    #[cfg(target_arch = "wasm32")]
    Host,
    /// The native harness (and the SDK's own tests): its emulation of the host.
    Emulated(EmulatedHost),
}

impl Output {
    pub(crate) fn new(sink: Sink) -> Self {
        Output {
            batch: BatchBuilder::new(0),
            sides: Vec::new(),
            call: Call::Process,
            fault: None,
            sink,
        }
    }

    /// Emits one record on the main output.
    //
    // Inlined into the operator, with the batch push: a call of more than four wasm
    // parameters (this one has six) passes the rest on the stack in wasmtime's x86-64 code,
    // and its 32-bit stores there are read back as 64-bit loads, which stall on
    // store-to-load forwarding — a fifth of the `uppercase` guest's time went there
    // (docs/BENCHMARKS.md, "Guest output without stalls").
    #[inline(always)]
    pub fn emit(&mut self, key: &[u8], value: &[u8], timestamp: i64) {
        self.batch.push(key, value, timestamp);
        if self.batch.encoded_len() >= FLUSH_AT {
            self.flush_main();
        }
    }

    /// Emits a copy of `record` on the main output, for example one taken from the input.
    pub fn emit_record(&mut self, record: &Record<'_>) {
        self.emit(record.key, record.value, record.timestamp);
    }

    /// Emits one record on the side output named `output` (`docs/ABI.md` §15), which the job
    /// wires to a downstream vertex like any edge; records on an output nothing reads are
    /// dropped by the host.
    ///
    /// The name must be 1 to 255 bytes long; another fails the call when it returns.
    pub fn emit_to(&mut self, output: &str, key: &[u8], value: &[u8], timestamp: i64) {
        if output.is_empty() || output.len() > MAX_OUTPUT_NAME_BYTES {
            self.fail(format!(
                "emit_to: the side output name `{output}` is {} bytes long; names are 1 to \
                 {MAX_OUTPUT_NAME_BYTES} bytes",
                output.len()
            ));
            return;
        }
        let index = match self.sides.iter().position(|side| side.name == output) {
            Some(index) => index,
            None => {
                self.sides.push(SideBatch {
                    name: output.to_owned(),
                    batch: BatchBuilder::new(0),
                    #[cfg(target_arch = "wasm32")]
                    send: crate::imports::emit_to,
                });
                self.sides.len() - 1
            }
        };
        let side = &mut self.sides[index];
        side.batch.push(key, value, timestamp);
        if side.batch.encoded_len() >= FLUSH_AT {
            Self::flush_side(&mut self.sink, side);
        }
    }

    /// Sets a timer for `key` at `timestamp` in `domain`. Setting a timer that is set changes
    /// nothing: a timer is the triple (domain, timestamp, key).
    ///
    /// An event-time timer fires once the watermark reaches `timestamp`, a processing-time one
    /// once the host's clock does; they reach [`Operator::on_timers`]. The host keeps timers
    /// and checkpoints them: the operator's own state need not hold them. Allowed in
    /// [`Operator::process`], [`Operator::on_timers`] and [`Operator::on_watermark`]; from
    /// [`Operator::finish`] it fails the call.
    ///
    /// [`Operator::process`]: crate::Operator::process
    /// [`Operator::on_timers`]: crate::Operator::on_timers
    /// [`Operator::on_watermark`]: crate::Operator::on_watermark
    /// [`Operator::finish`]: crate::Operator::finish
    pub fn set_timer(&mut self, domain: TimeDomain, timestamp: i64, key: &[u8]) {
        if !self.may_use_timers(weir_abi::imports::TIMER_SET) {
            return;
        }
        match &mut self.sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Host => crate::imports::timer_set(domain, timestamp, key),
            Sink::Emulated(host) => {
                if let Err(error) = host.timer_set(domain, timestamp, key) {
                    self.fail(error);
                }
            }
        }
    }

    /// Deletes the timer for `key` at `timestamp` in `domain`, if it is set. Allowed where
    /// [`set_timer`](Self::set_timer) is.
    pub fn delete_timer(&mut self, domain: TimeDomain, timestamp: i64, key: &[u8]) {
        if !self.may_use_timers(weir_abi::imports::TIMER_DELETE) {
            return;
        }
        match &mut self.sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Host => crate::imports::timer_delete(domain, timestamp, key),
            Sink::Emulated(host) => host.timer_delete(domain, timestamp, key),
        }
    }

    /// The task's current watermark: no record at or before it is still to come, except late
    /// ones. [`NO_WATERMARK`](crate::NO_WATERMARK) (`i64::MIN`) before the first; while
    /// event-time timers fire, already the watermark that fires them.
    pub fn watermark(&self) -> i64 {
        self.current_time(TimeDomain::Event)
    }

    /// The host's clock, in milliseconds since the Unix epoch (in the harness, the clock it is
    /// given).
    pub fn processing_time(&self) -> i64 {
        self.current_time(TimeDomain::Processing)
    }

    fn current_time(&self, domain: TimeDomain) -> i64 {
        match &self.sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Host => crate::imports::current_time(domain),
            Sink::Emulated(host) => host.current_time(domain),
        }
    }

    /// The result of the read request `request` for host-kept keyed state
    /// ([`crate::host_state`]); empty, with the fault recorded, when the emulated host refuses
    /// it (the wasm host fails the call itself).
    pub(crate) fn state_get(&mut self, request: &[u8]) -> Vec<u8> {
        match &mut self.sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Host => crate::imports::state_get(request),
            Sink::Emulated(host) => match host.state_get(request) {
                Ok(result) => result,
                Err(error) => {
                    self.fail(error);
                    Vec::new()
                }
            },
        }
    }

    /// Applies the write request `request` to host-kept keyed state ([`crate::host_state`]).
    pub(crate) fn state_write(&mut self, request: &[u8]) {
        match &mut self.sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Host => crate::imports::state_write(request),
            Sink::Emulated(host) => {
                if let Err(error) = host.state_write(request) {
                    self.fail(error);
                }
            }
        }
    }

    /// Whether the running call may use the timer import `import`; records the fault if not.
    fn may_use_timers(&mut self, import: &str) -> bool {
        if self.call.may_use_timers() {
            return true;
        }
        self.fail(format!(
            "{import} is not allowed during {} (docs/ABI.md §4)",
            self.call.export()
        ));
        false
    }

    /// Records a forbidden use: the call fails when it returns. The first one is reported.
    fn fail(&mut self, message: String) {
        self.fault.get_or_insert(Error::msg(message));
    }

    /// Starts a call: what follows is emitted during `call`.
    pub(crate) fn begin(&mut self, call: Call) {
        self.call = call;
        self.fault = None;
    }

    /// The forbidden use the call made, if any, which fails it.
    pub(crate) fn take_fault(&mut self) -> Option<Error> {
        self.fault.take()
    }

    /// Hands on the records emitted since the last flush, if any: the main output's, then
    /// each side output's.
    pub(crate) fn flush(&mut self) {
        self.flush_main();
        for side in &mut self.sides {
            Self::flush_side(&mut self.sink, side);
        }
    }

    fn flush_main(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        match &mut self.sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Host => {
                crate::imports::emit(self.batch.as_bytes());
                self.batch.clear();
            }
            Sink::Emulated(host) => host.emit(self.batch.take_bytes()),
        }
    }

    fn flush_side(sink: &mut Sink, side: &mut SideBatch) {
        if side.batch.is_empty() {
            return;
        }
        match sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Host => {
                (side.send)(&side.name, side.batch.as_bytes());
                side.batch.clear();
            }
            Sink::Emulated(host) => host.emit_to(&side.name, side.batch.take_bytes()),
        }
    }

    /// Drops the records emitted since the last flush (the call that emitted them failed).
    pub(crate) fn discard(&mut self) {
        self.batch.clear();
        for side in &mut self.sides {
            side.batch.clear();
        }
    }

    /// The emulated host behind this output.
    ///
    /// # Panics
    /// In the wasm build, for the output that goes to the real host (the harness never has
    /// one).
    pub(crate) fn emulated(&mut self) -> &mut EmulatedHost {
        match &mut self.sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Host => unreachable!("only the harness asks for its emulated host"),
            Sink::Emulated(host) => host,
        }
    }

    /// The emulated host behind this output, to read it; panics as
    /// [`emulated`](Self::emulated) does.
    pub(crate) fn emulated_ref(&self) -> &EmulatedHost {
        match &self.sink {
            #[cfg(target_arch = "wasm32")]
            Sink::Host => unreachable!("only the harness asks for its emulated host"),
            Sink::Emulated(host) => host,
        }
    }
}

#[cfg(test)]
mod tests {
    use weir_abi::Batch;

    use super::*;

    fn output() -> Output {
        Output::new(Sink::Emulated(EmulatedHost::new()))
    }

    #[test]
    fn flushes_a_batch_once_it_passes_the_threshold() {
        let mut out = output();
        let value = vec![b'v'; 300 * 1024];
        for ts in 0..4 {
            out.emit(b"k", &value, ts);
        }
        let kept = out.emulated().take_emitted();
        assert_eq!(kept.len(), 1, "the 4th record takes the batch past 1 MiB");
        assert_eq!(Batch::decode(&kept[0]).unwrap().len(), 4);

        out.emit(b"k", b"small", 4);
        assert!(out.emulated().take_emitted().is_empty());
        out.flush();
        let kept = out.emulated().take_emitted();
        let batch = Batch::decode(&kept[0]).unwrap();
        assert_eq!((batch.port(), batch.len()), (0, 1));
    }

    #[test]
    fn flushing_nothing_hands_on_nothing() {
        let mut out = output();
        out.flush();
        assert!(out.emulated().take_emitted().is_empty());
        out.emit(b"k", b"v", 0);
        out.emit_to("late", b"k", b"v", 0);
        out.discard();
        out.flush();
        assert!(out.emulated().take_emitted().is_empty());
        assert!(out.emulated().take_emitted_to().is_empty());
    }

    #[test]
    fn side_outputs_get_a_batch_each_and_flush_at_the_threshold_too() {
        let mut out = output();
        out.emit_to("a", b"k", b"1", 1);
        out.emit_to("b", b"k", b"2", 2);
        out.emit_to("a", b"k", b"3", 3);
        let value = vec![b'v'; FLUSH_AT];
        out.emit_to("c", b"k", &value, 4);
        let early = out.emulated().take_emitted_to();
        assert_eq!(early.len(), 1, "only `c` passed the threshold");
        assert_eq!(early[0].0, "c");
        out.flush();
        let sides = out.emulated().take_emitted_to();
        let counts: Vec<_> = sides
            .iter()
            .map(|(name, bytes)| (name.as_str(), Batch::decode(bytes).unwrap().len()))
            .collect();
        assert_eq!(counts, [("a", 2), ("b", 1)]);
        assert!(out.emulated().take_emitted().is_empty());
    }

    #[test]
    fn a_bad_side_output_name_or_a_timer_from_finish_is_a_fault_of_the_call() {
        let mut out = output();
        out.begin(Call::Process);
        out.emit_to("", b"k", b"v", 0);
        out.emit_to(&"n".repeat(256), b"k", b"v", 0);
        let fault = out.take_fault().unwrap();
        assert!(
            fault.message().contains("name `` is 0 bytes long"),
            "{fault}"
        );
        out.emit_to(&"n".repeat(255), b"k", b"v", 0);
        assert!(out.take_fault().is_none());

        out.begin(Call::Finish);
        out.set_timer(TimeDomain::Event, 5, b"k");
        let fault = out.take_fault().unwrap();
        assert_eq!(
            fault.message(),
            "timer_set is not allowed during weir_finish (docs/ABI.md §4)"
        );
        assert!(out.emulated().timers(TimeDomain::Event).is_empty());
        out.begin(Call::OnWatermark);
        out.set_timer(TimeDomain::Event, 5, b"k");
        assert!(out.take_fault().is_none());
        assert_eq!(out.emulated().timers(TimeDomain::Event).len(), 1);
    }
}
