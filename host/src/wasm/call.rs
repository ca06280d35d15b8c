//! [`Call`]: which guest call the host is running, named once for the imports that check what
//! it allows, the errors that name it, and the bodies that make it.

use weir_abi::{exports, imports};

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
            // Host-kept keyed state is read and written where output is made.
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
