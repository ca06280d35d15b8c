//! [`GuestState`]: the host's side of one guest instance, kept in its `Store` and reached by
//! the host imports through `Caller`.

use std::any::Any;
use std::fmt;

use wasmtime::{Engine, ResourceLimiter, Store};

use super::call::Call;
use super::error::{Abort, CallFailure, GuestFailure, OutOfMemorySign, classify};
use super::limits::{GuestLimits, MAX_TABLE_ELEMENTS};
use crate::state::HostState;

/// One batch emitted on a side output (`emit_to`, `docs/ABI.md` §15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideBatch {
    /// The side output's name, as the guest gave it.
    pub output: Box<str>,
    /// A well-formed batch with port 0; consecutive batches to one output may be joined.
    pub batch: Vec<u8>,
}

/// Host-side data of one instance, owned by its `Store`.
#[derive(Debug)]
pub(crate) struct GuestState {
    /// The operator's name, for log lines.
    pub(crate) operator: String,
    /// The instance's subtask index, for log lines.
    pub(crate) subtask: u32,
    /// The running export.
    pub(crate) call: Call,
    /// Output of the running `weir_process`/`weir_finish`: its emitted batches, in order,
    /// consecutive ones joined into buffers of up to
    /// [`OUTPUT_CHUNK_BYTES`](super::imports::OUTPUT_CHUNK_BYTES).
    pub(crate) output: Vec<Vec<u8>>,
    /// What `output` counts against `limits.max_output_bytes`: its bytes, plus
    /// [`OUTPUT_BATCH_OVERHEAD`](super::limits::OUTPUT_BATCH_OVERHEAD) per batch.
    pub(crate) output_bytes: usize,
    /// Side-output batches of the running call, in order; they count against
    /// `limits.max_output_bytes` with `output`.
    pub(crate) side_output: Vec<SideBatch>,
    /// Bytes saved by the running `weir_snapshot`.
    pub(crate) snapshot: Vec<u8>,
    /// The result of the last `state_get`, until `state_result` copies it out.
    pub(crate) state_result: Option<Vec<u8>>,
    /// What the host keeps for the guest (its watermark and timers): kept across calls,
    /// unlike everything above, and checkpointed with the task (`state::HostState`).
    pub(crate) host: HostState,
    /// The last message logged at level error during the running call, reported with a
    /// non-zero status.
    pub(crate) last_error_log: Option<String>,
    /// Limits on output and state.
    pub(crate) limits: GuestLimits,
    /// Refuses memory and table growth past the limits; registered with `Store::limiter`.
    pub(crate) limiter: GuestLimiter,
    /// The guest's exported memory, kept once the instance exists so that imports need not
    /// look it up by name on every call (`None` while `start` runs during instantiation, and
    /// for a component, whose imports receive their arguments copied).
    pub(crate) memory: Option<wasmtime::Memory>,
    /// What the kind of guest keeps in the store besides: for a component, its WASI context,
    /// which gives it nothing to reach (`component::wasi`); `None` for a core module, which has
    /// no WASI.
    pub(crate) extension: Option<Box<dyn StoreExtension>>,
}

/// What a store holds for one kind of guest beyond the host's state: a component's WASI
/// context. Opaque here, so that the core code names no component type: it asks only what every
/// call needs of it, and the component code downcasts it (through `Any`) to reach the rest.
pub(crate) trait StoreExtension: Any + Send + fmt::Debug {
    /// A call starts: forget any out-of-memory report of an earlier call, so that only one
    /// made during the call that traps names its failure.
    fn forget_out_of_memory_report(&self);

    /// Whether the guest reported, since the call started, that it ran out of memory.
    fn take_out_of_memory_report(&self) -> bool;
}

impl GuestState {
    /// State for a new instance of `operator`, about to be instantiated: a core module's, or
    /// with an `extension` (its WASI) a component's, which may hold several core instances and
    /// memories (their sizes summed against the memory limit).
    pub(crate) fn new(
        operator: String,
        subtask: u32,
        limits: GuestLimits,
        extension: Option<Box<dyn StoreExtension>>,
    ) -> Self {
        let component = extension.is_some();
        Self {
            operator,
            subtask,
            call: Call::Instantiate,
            output: Vec::new(),
            output_bytes: 0,
            side_output: Vec::new(),
            snapshot: Vec::new(),
            state_result: None,
            host: HostState::default(),
            last_error_log: None,
            limits,
            limiter: GuestLimiter {
                max_memory_bytes: limits.max_memory_bytes,
                memory_bytes: 0,
                table_elements: 0,
                component,
                last_growth: 0,
                growth_failed: false,
            },
            memory: None,
            extension,
        }
    }

    /// A store for a new instance holding `self`: its limiter registered, and the deadline of
    /// the instantiation (`deadline_ticks`) set.
    pub(crate) fn into_store(self, engine: &Engine, deadline_ticks: u64) -> Store<GuestState> {
        let mut store = Store::new(engine, self);
        store.limiter(|state| &mut state.limiter);
        store.set_epoch_deadline(deadline_ticks);
        store
    }

    /// Classifies the failure `error` of `call`. A trap after the guest ran out of memory is
    /// reported as [`GuestFailure::OutOfMemory`], which names the fix.
    pub(crate) fn call_failed(&mut self, call: Call, error: &wasmtime::Error) -> CallFailure {
        let (mut failure, backtrace) = classify(error, self.limits.call_timeout, false);
        if let GuestFailure::Trap { .. } = failure
            && let Some(out_of_memory) = self.out_of_memory()
        {
            failure = out_of_memory;
        }
        CallFailure {
            call,
            failure,
            backtrace,
        }
    }

    /// Classifies the failure `error` of an instantiation.
    pub(crate) fn instantiation_failed(&self, error: &wasmtime::Error) -> CallFailure {
        let (failure, backtrace) = classify(error, self.limits.call_timeout, true);
        CallFailure {
            call: Call::Instantiate,
            failure,
            backtrace,
        }
    }

    /// The running call's name as the guest knows it: the core export's, or the world
    /// function's for a component.
    pub(crate) fn call_name(&self) -> &'static str {
        self.call.name_for(self.extension.is_some())
    }

    /// Marks `call` as running and forgets what the previous call left behind.
    pub(crate) fn begin(&mut self, call: Call) {
        self.call = call;
        self.output.clear();
        self.output_bytes = 0;
        self.side_output.clear();
        self.snapshot.clear();
        self.last_error_log = None;
        self.limiter.growth_failed = false;
        if let Some(extension) = &self.extension {
            extension.forget_out_of_memory_report();
        }
    }

    /// Why the running call is known to have run out of memory, if it is: a growth of its
    /// memory that failed, or its engine's own report on standard error. Read when the call
    /// traps, since a guest whose allocation fails most often ends in a trap that says nothing
    /// of it (`unreachable`, from its allocator's or engine's abort), and a user who reads
    /// only that cannot know the fix.
    pub(crate) fn out_of_memory(&mut self) -> Option<GuestFailure> {
        let sign = if self.limiter.growth_failed {
            OutOfMemorySign::GrowthFailed
        } else if self
            .extension
            .as_ref()
            .is_some_and(|extension| extension.take_out_of_memory_report())
        {
            OutOfMemorySign::EngineReported
        } else {
            return None;
        };
        Some(GuestFailure::OutOfMemory {
            sign,
            memory: self.limiter.memory_bytes,
            limit: self.limiter.max_memory_bytes,
        })
    }
}

/// Most core instances, and most memories, one component may hold: componentize-py's hold
/// about ten of each (CPython, its C library, the WASI adapter, their shims).
pub(crate) const COMPONENT_INSTANCES: usize = 64;

/// The memory and table limiter of one instance.
///
/// Growth past a limit is refused with an [`Abort`] error rather than `Ok(false)`: the guest
/// traps at once with [`GuestFailure::MemoryLimit`] (or `TableLimit`) instead of seeing
/// `memory.grow` return -1 and failing later in a less obvious way.
#[derive(Debug)]
pub(crate) struct GuestLimiter {
    /// Largest linear memory, in bytes: of the one memory of a core module, of all the
    /// memories of a component together.
    max_memory_bytes: usize,
    /// The memories' bytes together, as far as growth was allowed (counted like
    /// `table_elements`).
    memory_bytes: usize,
    /// Whether the instance is a component's: up to [`COMPONENT_INSTANCES`] core instances
    /// and as many memories, rather than one of each.
    component: bool,
    /// Elements of all the instance's tables together, as far as growth was allowed; checked
    /// against [`MAX_TABLE_ELEMENTS`]. May count a growth that wasmtime then failed for want of
    /// host memory, which only makes the bound stricter.
    table_elements: usize,
    /// Whether a memory growth this limiter allowed failed anyway during the running call
    /// (past the maximum the module declares, or for want of host memory): a sign that the
    /// call's trap, if it traps, is an allocation that failed.
    growth_failed: bool,
    /// The bytes of the last growth allowed, taken back off `memory_bytes` if it then fails.
    last_growth: usize,
}

impl ResourceLimiter for GuestLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // The sum over every memory of the instance, with this one at its new size.
        let total = self
            .memory_bytes
            .saturating_sub(current)
            .saturating_add(desired);
        if total > self.max_memory_bytes {
            return Err(Abort::error(GuestFailure::MemoryLimit {
                limit: self.max_memory_bytes,
                requested: total,
            }));
        }
        self.last_growth = total - self.memory_bytes.min(total);
        self.memory_bytes = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if maximum.is_some_and(|maximum| desired > maximum) {
            // Past the table's own declared maximum: `table.grow` returns -1, as the wasm spec
            // says, and nothing is counted.
            return Ok(false);
        }
        // The sum over every table of the instance, with this one at its new size.
        let total = self
            .table_elements
            .saturating_sub(current)
            .saturating_add(desired);
        if total > MAX_TABLE_ELEMENTS {
            return Err(Abort::error(GuestFailure::TableLimit {
                limit: MAX_TABLE_ELEMENTS,
                requested: total,
            }));
        }
        self.table_elements = total;
        Ok(true)
    }

    fn memory_grow_failed(&mut self, _error: wasmtime::Error) -> wasmtime::Result<()> {
        // The guest sees `memory.grow` return -1 and, most often, traps soon after.
        self.growth_failed = true;
        self.memory_bytes = self
            .memory_bytes
            .saturating_sub(std::mem::take(&mut self.last_growth));
        Ok(())
    }

    fn instances(&self) -> usize {
        if self.component {
            COMPONENT_INSTANCES
        } else {
            1
        }
    }

    fn memories(&self) -> usize {
        if self.component {
            COMPONENT_INSTANCES
        } else {
            1
        }
    }
}
