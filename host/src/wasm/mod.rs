//! The wasm layer: everything the host knows about running operators as WebAssembly.
//!
//! # Why this layer exists
//!
//! An operator is untrusted code in a core WebAssembly module that speaks the guest ABI of
//! `docs/ABI.md`. This module is the host half of that contract, and the only place that
//! knows it: export names, `weir_alloc`, pointers into guest memory, status codes, traps. It
//! turns the ABI into a few owned Rust types with typed errors, bounds every call (memory,
//! time, output, state) and checks every pointer and batch that comes back, so that a
//! misbehaving guest becomes a [`GuestError`] and never a panic, a hang or a host crash.
//!
//! The rest of the host — dataflow tasks, checkpoints — must talk only to these types
//! ([`WasmEngine`], [`OperatorModule`], [`GuestInstance`]), never to raw exports. A second
//! front door, for WebAssembly components of the WIT world `abi/wit/operator.wit` (Python,
//! JavaScript, Rust for WASI 0.2), sits behind the same types: [`component`] holds what differs
//! (the world's version, the deny-by-default WASI, the host side of the world's imports), and
//! the limits, failures and checkpoints are the same.
//!
//! # Object lifetimes
//!
//! | object | how many | what it holds |
//! |---|---|---|
//! | [`WasmEngine`] | one per job | the wasmtime `Engine` (Cranelift, epoch interruption), the `Linker` with the `weir` imports, the epoch ticker thread, the pool of image-checkpointed instances if any |
//! | [`OperatorModule`] | one per operator of the job | the compiled `Module`, checked against the ABI, pre-linked as an `InstancePre`; the operator's [`GuestLimits`] |
//! | [`GuestInstance`] | one per subtask | its own `Store` (whose data is the host-side state of the instance), memory and exports |
//!
//! Expensive things are built once: compiling a module and linking it happen at load time;
//! instantiating from the `InstancePre` is cheap, so restarting a job from a checkpoint only
//! makes new instances. Modules hold a clone of their engine and instances their module, so
//! the epoch ticker runs until the last of them is dropped, and then its thread is joined.
//!
//! # Bounds
//!
//! Every call into the guest gets an epoch deadline derived from its module's
//! [`GuestLimits::call_timeout`] (the ticker advances the epoch every [`EPOCH_TICK`]); memory
//! and table growth go through a `ResourceLimiter` in the store; `emit` and `save_state` are
//! checked against the output and state limits before anything is copied. Failures are
//! classified by type — the host's own errors by downcast, traps as `wasmtime::Trap` — and a
//! failed instance is poisoned.
//!
//! Calls are synchronous and CPU-bound: run them on a thread that may block (a dedicated
//! thread or `spawn_blocking`), never on the async reactor.

mod call;
pub mod component;
mod core;
mod engine;
mod error;
pub mod image;
mod imports;
mod inspection;
mod instance;
mod limits;
mod module;
mod signature;
mod state;
mod toolchain;

#[cfg(test)]
mod state_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod time_tests;

pub(crate) use engine::deadline_ticks;
pub use engine::{EPOCH_TICK, EngineOptions, ImagePool, WasmEngine, file_kind};
pub use error::{
    EngineError, GuestError, GuestFailure, ModuleError, ModuleProblem, OutOfMemorySign,
};
pub use image::StateCapture;
pub use image::delta::ImagePolicy;
pub use image::state::GuestSnapshot;
pub use imports::provided_imports;
pub(crate) use imports::wall_clock_millis;
pub(crate) use inspection::Inspection;
pub use inspection::{
    Capabilities, ExportCheck, ExportStatus, ImportCheck, ImportStatus, MemoryReport,
};
pub use instance::{
    GuestInstance, GuestOutput, InstanceContext, MAX_TIMER_ROUNDS, MAX_TIMERS_PER_CALL,
};
pub use limits::{GuestLimits, MAX_MESSAGE_BYTES, MAX_TABLE_ELEMENTS, OUTPUT_BATCH_OVERHEAD};
pub use module::{LoadOptions, ModuleSource, OperatorModule};
pub use state::SideBatch;
pub use toolchain::{Toolchain, ToolchainEvidence};
