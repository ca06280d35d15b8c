//! [`GuestState`]: the host's side of one guest instance, kept in its `Store` and reached by
//! the host imports through `Caller`.

use std::any::Any;
use std::fmt;

use wasmtime::{Engine, ResourceLimiter, Store};
use weir_abi::time::NO_WATERMARK;
use weir_abi::{TimeDomain, Timers, exports, imports};

use super::error::{Abort, GuestFailure, OutOfMemorySign, classify};
use super::limits::{GuestLimits, MAX_TABLE_ELEMENTS};

/// What the host is running in the guest right now; decides which imports are allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    /// Instantiation, including the module's `start` function.
    Instantiate,
    /// `_initialize`.
    Initialize,
    /// `weir_abi_version`.
    AbiVersion,
    /// `weir_alloc`.
    Alloc,
    /// `weir_init`.
    Init,
    /// `weir_process`: `emit` allowed.
    Process,
    /// `weir_finish`: `emit` allowed.
    Finish,
    /// `weir_snapshot`: `save_state` allowed.
    Snapshot,
    /// `weir_restore`.
    Restore,
    /// `weir_checkpoint_complete`.
    CheckpointComplete,
    /// `weir_on_timers`: `emit`, `emit_to` and the timer imports allowed.
    OnTimers,
    /// `weir_on_watermark`: `emit`, `emit_to` and the timer imports allowed.
    OnWatermark,
}

impl Call {
    /// The export's name, as reported in [`GuestError::call`](super::GuestError::call).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Call::Instantiate => "instantiate",
            Call::Initialize => exports::INITIALIZE,
            Call::AbiVersion => exports::ABI_VERSION,
            Call::Alloc => exports::ALLOC,
            Call::Init => exports::INIT,
            Call::Process => exports::PROCESS,
            Call::Finish => exports::FINISH,
            Call::Snapshot => exports::SNAPSHOT,
            Call::Restore => exports::RESTORE,
            Call::CheckpointComplete => exports::CHECKPOINT_COMPLETE,
            Call::OnTimers => exports::ON_TIMERS,
            Call::OnWatermark => exports::ON_WATERMARK,
        }
    }

    /// The function's name in the component world (`abi/wit/operator.wit`), as reported for a
    /// component's call.
    pub(crate) fn component_name(self) -> &'static str {
        match self {
            Call::Instantiate => "instantiate",
            Call::Initialize => "initialize",
            Call::AbiVersion => "version check",
            Call::Alloc => "alloc",
            Call::Init => "init",
            Call::Process => "process",
            Call::Finish => "finish",
            Call::Snapshot => "snapshot",
            Call::Restore => "restore",
            Call::CheckpointComplete => "checkpoint-complete",
            Call::OnTimers => "on-timers",
            Call::OnWatermark => "on-watermark",
        }
    }

    /// The name the guest knows the call by: the world function's for a component, the core
    /// export's otherwise.
    pub(crate) fn name_for(self, component: bool) -> &'static str {
        if component {
            self.component_name()
        } else {
            self.name()
        }
    }

    /// The calls during which `emit` and `emit_to` are allowed (`docs/ABI.md` §4).
    pub(crate) const EMITTING: [Call; 4] = [
        Call::Process,
        Call::OnTimers,
        Call::OnWatermark,
        Call::Finish,
    ];

    /// The calls during which `timer_set` and `timer_delete` are allowed (`docs/ABI.md` §4).
    pub(crate) const SETTING_TIMERS: [Call; 3] = [Call::Process, Call::OnTimers, Call::OnWatermark];

    /// Whether `emit` and `emit_to` may be called during this call.
    pub(crate) fn may_emit(self) -> bool {
        Self::EMITTING.contains(&self)
    }

    /// Whether `timer_set` and `timer_delete` may be called during this call.
    pub(crate) fn may_set_timers(self) -> bool {
        Self::SETTING_TIMERS.contains(&self)
    }

    /// The calls during which `import` is allowed, for messages: `weir_process, weir_on_timers
    /// and weir_finish`.
    pub(crate) fn allowing(import: &str) -> String {
        let calls: &[Call] = match import {
            imports::SAVE_STATE => &[Call::Snapshot],
            imports::TIMER_SET | imports::TIMER_DELETE => &Self::SETTING_TIMERS,
            _ => &Self::EMITTING,
        };
        let names: Vec<&str> = calls.iter().map(|c| c.name()).collect();
        match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        }
    }
}

/// A guest call that failed, as the code that made it reports it: which call failed (not
/// always the one asked for: `weir_alloc` fails for `weir_process`) and how. The instance turns
/// it into its [`GuestError`](super::GuestError) and poisons itself.
#[derive(Debug)]
pub(crate) struct CallFailure {
    /// The call that failed.
    pub(crate) call: Call,
    /// How it failed.
    pub(crate) failure: GuestFailure,
    /// The guest's backtrace, when it trapped with one.
    pub(crate) backtrace: Option<String>,
}

impl CallFailure {
    /// `call` failed with `failure`, without a backtrace.
    pub(crate) fn new(call: Call, failure: GuestFailure) -> Self {
        CallFailure {
            call,
            failure,
            backtrace: None,
        }
    }
}

/// One batch emitted on a side output (`emit_to`, `docs/ABI.md` §15).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideBatch {
    /// The side output's name, as the guest gave it.
    pub output: Box<str>,
    /// A well-formed batch with port 0; consecutive batches to one output may be joined.
    pub batch: Vec<u8>,
}

/// The time of one instance: its task's watermark, as the guest reads it, and the timers the
/// host keeps for it (`docs/ABI.md` §15). Host state, not the guest's: checkpointed with the
/// task in either capture mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestTime {
    /// What `current_time(0)` returns: [`NO_WATERMARK`] until the first watermark.
    pub watermark: i64,
    /// The timers, indexed by [`TimeDomain::code`].
    pub timers: [Timers; 2],
}

impl Default for GuestTime {
    fn default() -> Self {
        GuestTime {
            watermark: NO_WATERMARK,
            timers: [Timers::new(), Timers::new()],
        }
    }
}

impl GuestTime {
    /// The timers of `domain`.
    pub fn timers(&self, domain: TimeDomain) -> &Timers {
        &self.timers[domain.code() as usize]
    }

    /// The timers of `domain`, to change.
    pub(crate) fn timers_mut(&mut self, domain: TimeDomain) -> &mut Timers {
        &mut self.timers[domain.code() as usize]
    }

    /// What every timer counts against the timer limit, over both domains.
    pub(crate) fn timer_bytes(&self) -> usize {
        self.timers.iter().map(Timers::bytes).sum()
    }

    /// How many timers are set, over both domains.
    pub fn pending(&self) -> usize {
        self.timers.iter().map(Timers::len).sum()
    }
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
    /// The watermark and the timers: kept across calls, unlike everything above.
    pub(crate) time: GuestTime,
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
            time: GuestTime::default(),
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
