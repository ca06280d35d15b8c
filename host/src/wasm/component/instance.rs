//! [`ComponentBody`]: the calls of a component implementing the world of
//! `abi/wit/operator.wit` — the component half of every guest call.
//!
//! # Why it is apart
//!
//! A [`GuestInstance`](crate::wasm::GuestInstance) is the life of an instance over one of two
//! bodies: a core module's (`wasm::core`) or this one. A component's arguments and results are
//! copied by the canonical ABI, so there are no pointers or allocations here: each call is the
//! world's function, and the guest's `err(message)` fails it like the core ABI's `fail`. Each
//! method reports a failure as a [`CallFailure`], and the instance poisons itself with it.

use wasmtime::Store;
use weir_abi::InitMessage;

use super::super::call::Call;
use super::super::error::CallFailure;
use super::super::error::GuestFailure;
use super::super::imports;
use super::super::limits::GuestLimits;
use super::super::state::GuestState;
use super::{ComponentExports, ComponentPre, store_extension};
use crate::ids::CheckpointId;

/// The world's `guest` interface of a component instance.
type ComponentGuest = super::bindings::exports::weir::operator::guest::Guest;

/// The world's init message.
type InitMessageRecord = super::bindings::weir::operator::types::InitMessage;

/// What an instance of a component calls: the world's exports.
pub(crate) struct ComponentBody {
    /// The component's exports.
    exports: ComponentExports,
    /// The epoch deadline every call gets.
    deadline_ticks: u64,
}

impl ComponentBody {
    /// Instantiates `pre` for `operator`'s `subtask` in a new store under `limits`, with the
    /// denied WASI of [`wasi`](super::wasi).
    pub(crate) fn start(
        pre: &ComponentPre,
        operator: &str,
        subtask: u32,
        limits: GuestLimits,
        deadline_ticks: u64,
    ) -> Result<(Store<GuestState>, Self), CallFailure> {
        let extension = Some(store_extension(operator, subtask));
        let state = GuestState::new(operator.to_string(), subtask, limits, extension);
        let mut store = state.into_store(pre.engine(), deadline_ticks);
        let exports = pre
            .instantiate(&mut store)
            .map_err(|e| store.data().instantiation_failed(&e))?;
        let body = ComponentBody {
            exports,
            deadline_ticks,
        };
        Ok((store, body))
    }

    /// Gives the guest its init message through the world's `init`.
    pub(crate) fn init(
        &self,
        store: &mut Store<GuestState>,
        message: InitMessage<'_>,
    ) -> Result<(), CallFailure> {
        let message = InitMessageRecord {
            operator: message.operator.to_string(),
            subtask: message.subtask,
            parallelism: message.parallelism,
            config: message.config.to_vec(),
        };
        self.call(store, Call::Init, |guest, store| {
            guest.call_init(store, &message)
        })
    }

    /// Runs `process` on `batch`; its output is left in the store.
    pub(crate) fn process(
        &self,
        store: &mut Store<GuestState>,
        batch: &[u8],
    ) -> Result<(), CallFailure> {
        self.call(store, Call::Process, |guest, store| {
            guest.call_process(store, batch)
        })
    }

    /// Runs `finish`; its output is left in the store.
    pub(crate) fn finish(&self, store: &mut Store<GuestState>) -> Result<(), CallFailure> {
        self.call(store, Call::Finish, |guest, store| guest.call_finish(store))
    }

    /// Runs `on-watermark` for `watermark`; its output is left in the store. Always runs (the
    /// world's exports are all required), so always `true`.
    pub(crate) fn on_watermark(
        &self,
        store: &mut Store<GuestState>,
        watermark: i64,
    ) -> Result<bool, CallFailure> {
        self.call(store, Call::OnWatermark, |guest, store| {
            guest.call_on_watermark(store, watermark)
        })?;
        Ok(true)
    }

    /// Runs `on-timers` on a batch of fired timers; its output is left in the store.
    pub(crate) fn on_timers(
        &self,
        store: &mut Store<GuestState>,
        batch: &[u8],
    ) -> Result<(), CallFailure> {
        self.call(store, Call::OnTimers, |guest, store| {
            guest.call_on_timers(store, batch)
        })
    }

    /// Runs `snapshot` for `checkpoint_id` and returns the state, refused past the state limit.
    pub(crate) fn snapshot(
        &self,
        store: &mut Store<GuestState>,
        checkpoint_id: CheckpointId,
    ) -> Result<Vec<u8>, CallFailure> {
        let state = self.call(store, Call::Snapshot, |guest, store| {
            guest.call_snapshot(store, checkpoint_id.0)
        })?;
        let limit = store.data().limits.max_state_bytes;
        if state.len() > limit {
            let failure = GuestFailure::StateTooLarge { limit };
            return Err(CallFailure::new(Call::Snapshot, failure));
        }
        Ok(state)
    }

    /// Runs `restore` on `state`.
    pub(crate) fn restore(
        &self,
        store: &mut Store<GuestState>,
        state: &[u8],
    ) -> Result<(), CallFailure> {
        self.call(store, Call::Restore, |guest, store| {
            guest.call_restore(store, state)
        })
    }

    /// Runs `checkpoint-complete` for `checkpoint_id`.
    pub(crate) fn checkpoint_complete(
        &self,
        store: &mut Store<GuestState>,
        checkpoint_id: CheckpointId,
    ) -> Result<(), CallFailure> {
        self.call(store, Call::CheckpointComplete, |guest, store| {
            guest.call_checkpoint_complete(store, checkpoint_id.0)
        })
    }

    /// Calls a component's export as `call`, under the call deadline: `export` makes the call
    /// on the guest's `guest` interface. The guest's `err(message)` fails the call like the
    /// core ABI's `fail`.
    fn call<R>(
        &self,
        store: &mut Store<GuestState>,
        call: Call,
        export: impl FnOnce(
            &ComponentGuest,
            &mut Store<GuestState>,
        ) -> wasmtime::Result<Result<R, String>>,
    ) -> Result<R, CallFailure> {
        store.data_mut().begin(call);
        store.set_epoch_deadline(self.deadline_ticks);
        let result = export(self.exports.weir_operator_guest(), &mut *store);
        match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(message)) => {
                let message = imports::message(message.as_bytes());
                Err(CallFailure::new(call, GuestFailure::Failed { message }))
            }
            Err(e) => Err(store.data_mut().call_failed(call, &e)),
        }
    }
}
