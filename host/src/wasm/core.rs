//! [`CoreBody`]: the calls of a core module speaking the ABI of `docs/ABI.md` — its exports,
//! looked up once, and the buffers it allocates for its inputs.
//!
//! # Why it is apart
//!
//! A [`GuestInstance`](super::GuestInstance) is the life of an instance (readiness, poisoning,
//! capture) over one of two bodies: this one, or a component's (`component::instance`). Each
//! body makes the guest calls its kind speaks and reports a failure as a [`CallFailure`]; the
//! instance poisons itself with it. So the pointers, `weir_alloc` and status codes of the core
//! ABI stay here, and the instance never asks which kind it runs.

use wasmtime::{Instance, InstancePre, Memory, Store, TypedFunc, WasmParams, WasmResults};
use weir_abi::{ABI_VERSION, InitMessage, exports};

use super::call::Call;
use super::error::CallFailure;
use super::error::GuestFailure;
use super::limits::GuestLimits;
use super::state::GuestState;
use crate::ids::CheckpointId;

/// The guest's exports, looked up once per instance.
struct Funcs {
    abi_version: TypedFunc<(), i32>,
    alloc: TypedFunc<i32, i32>,
    process: TypedFunc<(i32, i32), i32>,
    initialize: Option<TypedFunc<(), ()>>,
    init: Option<TypedFunc<(i32, i32), i32>>,
    snapshot: Option<TypedFunc<i64, i32>>,
    restore: Option<TypedFunc<(i32, i32), i32>>,
    checkpoint_complete: Option<TypedFunc<i64, i32>>,
    finish: Option<TypedFunc<(), i32>>,
    on_timers: Option<TypedFunc<(i32, i32), i32>>,
    on_watermark: Option<TypedFunc<i64, i32>>,
}

/// What an instance of a core module calls: its memory and exports.
pub(crate) struct CoreBody {
    /// The core instance, for the image capture's exports.
    instance: Instance,
    /// The guest's exported memory.
    memory: Memory,
    /// The guest's exports.
    funcs: Funcs,
    /// The epoch deadline every call gets.
    deadline_ticks: u64,
}

/// A checkpoint id as the guest receives it: an `i64` holding the id's bits (ids are positive
/// and far below 2^63, so the value is unchanged).
fn checkpoint_id_param(checkpoint_id: CheckpointId) -> i64 {
    checkpoint_id.0 as i64
}

impl CoreBody {
    /// Instantiates `pre` for `operator`'s `subtask` in a new store under `limits`, and looks up
    /// its memory and exports. Runs neither `_initialize` nor any export.
    pub(crate) fn start(
        pre: &InstancePre<GuestState>,
        operator: &str,
        subtask: u32,
        limits: GuestLimits,
        deadline_ticks: u64,
    ) -> Result<(Store<GuestState>, Self), CallFailure> {
        let state = GuestState::new(operator.to_string(), subtask, limits, None);
        let mut store = state.into_store(pre.module().engine(), deadline_ticks);
        let instance = pre
            .instantiate(&mut store)
            .map_err(|e| store.data().instantiation_failed(&e))?;
        let (memory, funcs) = lookup(&instance, &mut store).map_err(|e| {
            let failure = GuestFailure::Instantiation {
                message: format!("{e:#}"),
            };
            CallFailure::new(Call::Instantiate, failure)
        })?;
        store.data_mut().memory = Some(memory);
        let body = CoreBody {
            instance,
            memory,
            funcs,
            deadline_ticks,
        };
        Ok((store, body))
    }

    /// The core instance.
    pub(crate) fn instance(&self) -> &Instance {
        &self.instance
    }

    /// Runs `_initialize`, if exported.
    pub(crate) fn initialize(&self, store: &mut Store<GuestState>) -> Result<(), CallFailure> {
        match self.funcs.initialize.clone() {
            Some(initialize) => self.run(store, Call::Initialize, &initialize, ()),
            None => Ok(()),
        }
    }

    /// Checks that `weir_abi_version` returns the host's [`ABI_VERSION`].
    pub(crate) fn check_version(&self, store: &mut Store<GuestState>) -> Result<(), CallFailure> {
        let version = self.run_export(store, Call::AbiVersion, |f| &f.abi_version, ())?;
        if u32::try_from(version) != Ok(ABI_VERSION) {
            let failure = GuestFailure::AbiVersion {
                guest: version,
                host: ABI_VERSION,
            };
            return Err(CallFailure::new(Call::AbiVersion, failure));
        }
        Ok(())
    }

    /// Gives the guest its init message through `weir_init`, or refuses a non-empty `config`
    /// when the module has no `weir_init` (`docs/ABI.md` §3).
    pub(crate) fn init(
        &self,
        store: &mut Store<GuestState>,
        message: InitMessage<'_>,
    ) -> Result<(), CallFailure> {
        let Some(init) = self.funcs.init.clone() else {
            if message.config.is_empty() {
                return Ok(());
            }
            let failure = GuestFailure::UnusedConfig {
                config_len: message.config.len(),
            };
            return Err(CallFailure::new(Call::Init, failure));
        };
        let total = message.operator.len().saturating_add(message.config.len());
        if u32::try_from(total).is_err() {
            let failure = GuestFailure::AllocFailed { len: total };
            return Err(CallFailure::new(Call::Alloc, failure));
        }
        let (ptr, len) = self.write_buffer(store, &message.encode())?;
        let status = self.run(store, Call::Init, &init, (ptr, len))?;
        check_status(store, Call::Init, status)
    }

    /// Runs `weir_process` on `batch`; its output is left in the store.
    pub(crate) fn process(
        &self,
        store: &mut Store<GuestState>,
        batch: &[u8],
    ) -> Result<(), CallFailure> {
        let (ptr, len) = self.write_buffer(store, batch)?;
        let status = self.run_export(store, Call::Process, |f| &f.process, (ptr, len))?;
        check_status(store, Call::Process, status)
    }

    /// Runs `weir_finish`, if exported; its output is left in the store.
    pub(crate) fn finish(&self, store: &mut Store<GuestState>) -> Result<(), CallFailure> {
        let Some(finish) = self.funcs.finish.clone() else {
            return Ok(());
        };
        let status = self.run(store, Call::Finish, &finish, ())?;
        check_status(store, Call::Finish, status)
    }

    /// Runs `weir_on_watermark` for `watermark`, if exported; whether it ran (its output is
    /// left in the store).
    pub(crate) fn on_watermark(
        &self,
        store: &mut Store<GuestState>,
        watermark: i64,
    ) -> Result<bool, CallFailure> {
        let Some(on_watermark) = self.funcs.on_watermark.clone() else {
            return Ok(false);
        };
        let status = self.run(store, Call::OnWatermark, &on_watermark, watermark)?;
        check_status(store, Call::OnWatermark, status)?;
        Ok(true)
    }

    /// Runs `weir_on_timers` on a batch of fired timers; its output is left in the store.
    pub(crate) fn on_timers(
        &self,
        store: &mut Store<GuestState>,
        batch: &[u8],
    ) -> Result<(), CallFailure> {
        let Some(on_timers) = self.funcs.on_timers.clone() else {
            // Load time refuses a module that sets timers without this export; timers restored
            // into one that lost it since have nowhere to go.
            let failure = GuestFailure::Runtime {
                message: format!(
                    "timers fired but the module exports no {}: was it changed since the \
                     checkpoint was taken?",
                    exports::ON_TIMERS
                ),
            };
            return Err(CallFailure::new(Call::OnTimers, failure));
        };
        let (ptr, len) = self.write_buffer(store, batch)?;
        let status = self.run(store, Call::OnTimers, &on_timers, (ptr, len))?;
        check_status(store, Call::OnTimers, status)
    }

    /// Runs `weir_snapshot` for `checkpoint_id` and returns the state it saved; an empty state
    /// when the module has no `weir_snapshot`.
    pub(crate) fn snapshot(
        &self,
        store: &mut Store<GuestState>,
        checkpoint_id: CheckpointId,
    ) -> Result<Vec<u8>, CallFailure> {
        let Some(snapshot) = self.funcs.snapshot.clone() else {
            return Ok(Vec::new());
        };
        let status = self.run(
            store,
            Call::Snapshot,
            &snapshot,
            checkpoint_id_param(checkpoint_id),
        )?;
        check_status(store, Call::Snapshot, status)?;
        Ok(std::mem::take(&mut store.data_mut().snapshot))
    }

    /// Runs `weir_restore` on `state`; an empty state is skipped when the module has no
    /// `weir_restore`, and a non-empty one then fails with [`GuestFailure::NoRestoreExport`].
    pub(crate) fn restore(
        &self,
        store: &mut Store<GuestState>,
        state: &[u8],
    ) -> Result<(), CallFailure> {
        let Some(restore) = self.funcs.restore.clone() else {
            if state.is_empty() {
                return Ok(());
            }
            let failure = GuestFailure::NoRestoreExport {
                state_len: state.len(),
            };
            return Err(CallFailure::new(Call::Restore, failure));
        };
        let (ptr, len) = self.write_buffer(store, state)?;
        let status = self.run(store, Call::Restore, &restore, (ptr, len))?;
        check_status(store, Call::Restore, status)
    }

    /// Runs `weir_checkpoint_complete` for `checkpoint_id`, if exported.
    pub(crate) fn checkpoint_complete(
        &self,
        store: &mut Store<GuestState>,
        checkpoint_id: CheckpointId,
    ) -> Result<(), CallFailure> {
        let Some(complete) = self.funcs.checkpoint_complete.clone() else {
            return Ok(());
        };
        let status = self.run(
            store,
            Call::CheckpointComplete,
            &complete,
            checkpoint_id_param(checkpoint_id),
        )?;
        check_status(store, Call::CheckpointComplete, status)
    }

    /// Calls `func` as `call`, under the call deadline. For optional exports, which the caller
    /// clones out of the exports (they run rarely).
    fn run<P: WasmParams, R: WasmResults>(
        &self,
        store: &mut Store<GuestState>,
        call: Call,
        func: &TypedFunc<P, R>,
        params: P,
    ) -> Result<R, CallFailure> {
        store.data_mut().begin(call);
        store.set_epoch_deadline(self.deadline_ticks);
        func.call(&mut *store, params)
            .map_err(|e| store.data_mut().call_failed(call, &e))
    }

    /// [`run`](Self::run) for a required export, borrowed from the exports rather than cloned:
    /// cloning a `TypedFunc` costs more than the call itself (measured 64 ns,
    /// docs/BENCHMARKS.md), and `weir_alloc` and `weir_process` run for every batch.
    fn run_export<P: WasmParams, R: WasmResults>(
        &self,
        store: &mut Store<GuestState>,
        call: Call,
        pick: fn(&Funcs) -> &TypedFunc<P, R>,
        params: P,
    ) -> Result<R, CallFailure> {
        store.data_mut().begin(call);
        store.set_epoch_deadline(self.deadline_ticks);
        pick(&self.funcs)
            .call(&mut *store, params)
            .map_err(|e| store.data_mut().call_failed(call, &e))
    }

    /// Copies `bytes` into a buffer the guest allocates with `weir_alloc` (`docs/ABI.md` §7)
    /// and returns the pointer and length to pass; `(0, 0)` for no bytes.
    fn write_buffer(
        &self,
        store: &mut Store<GuestState>,
        bytes: &[u8],
    ) -> Result<(i32, i32), CallFailure> {
        if bytes.is_empty() {
            return Ok((0, 0));
        }
        let alloc_failed = || {
            let failure = GuestFailure::AllocFailed { len: bytes.len() };
            CallFailure::new(Call::Alloc, failure)
        };
        let Ok(len) = u32::try_from(bytes.len()) else {
            return Err(alloc_failed());
        };
        // Pointers and lengths cross the boundary as i32 holding u32 bits (`docs/ABI.md`).
        let ptr = self.run_export(store, Call::Alloc, |f| &f.alloc, len as i32)? as u32;
        if ptr == 0 {
            return Err(alloc_failed());
        }
        let memory_len = self.memory.data_size(&*store);
        let out_of_bounds = GuestFailure::OutOfBounds {
            what: "`weir_alloc` result",
            ptr,
            len,
            memory_len,
        };
        let fits = (ptr as usize)
            .checked_add(bytes.len())
            .is_some_and(|end| end <= memory_len);
        if !fits || self.memory.write(&mut *store, ptr as usize, bytes).is_err() {
            return Err(CallFailure::new(Call::Alloc, out_of_bounds));
        }
        Ok((ptr as i32, len as i32))
    }
}

/// Fails `call` when the guest returned a non-zero status.
fn check_status(store: &mut Store<GuestState>, call: Call, status: i32) -> Result<(), CallFailure> {
    if status == 0 {
        return Ok(());
    }
    let last_message = store.data_mut().last_error_log.take();
    let failure = GuestFailure::Status {
        code: status,
        last_message,
    };
    Err(CallFailure::new(call, failure))
}

/// Looks up the guest's memory and exports (their presence and types were checked at load).
fn lookup(instance: &Instance, store: &mut Store<GuestState>) -> wasmtime::Result<(Memory, Funcs)> {
    let memory = instance
        .get_memory(&mut *store, exports::MEMORY)
        .ok_or_else(|| wasmtime::format_err!("no exported memory named `{}`", exports::MEMORY))?;
    let funcs = Funcs {
        abi_version: instance.get_typed_func(&mut *store, exports::ABI_VERSION)?,
        alloc: instance.get_typed_func(&mut *store, exports::ALLOC)?,
        process: instance.get_typed_func(&mut *store, exports::PROCESS)?,
        initialize: optional(instance, store, exports::INITIALIZE)?,
        init: optional(instance, store, exports::INIT)?,
        snapshot: optional(instance, store, exports::SNAPSHOT)?,
        restore: optional(instance, store, exports::RESTORE)?,
        checkpoint_complete: optional(instance, store, exports::CHECKPOINT_COMPLETE)?,
        finish: optional(instance, store, exports::FINISH)?,
        on_timers: optional(instance, store, exports::ON_TIMERS)?,
        on_watermark: optional(instance, store, exports::ON_WATERMARK)?,
    };
    Ok((memory, funcs))
}

/// The optional export `name`, typed, or `None` when the module does not export it.
fn optional<P: WasmParams, R: WasmResults>(
    instance: &Instance,
    store: &mut Store<GuestState>,
    name: &str,
) -> wasmtime::Result<Option<TypedFunc<P, R>>> {
    match instance.get_func(&mut *store, name) {
        None => Ok(None),
        Some(func) => func.typed(&*store).map(Some),
    }
}
