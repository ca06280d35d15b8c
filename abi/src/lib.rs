//! The contract between the Weir host and a guest operator, as Rust code.
//!
//! `docs/ABI.md` is the normative text; this crate is its single Rust
//! implementation. The host (`weir`) and the Rust guest SDK (`weir-sdk`) both
//! depend on it, so the export names, the version number and the byte layout
//! of batches and init messages cannot drift apart between the two sides.
//!
//! The crate has no dependencies and no `unsafe`: it compiles for the host and
//! for `wasm32-unknown-unknown` alike.

#![forbid(unsafe_code)]

pub mod batch;
pub mod init;
pub mod key_group;
pub mod rescalable;
pub mod state;
pub mod table;
pub mod time;
pub mod wire;

pub use batch::{Batch, BatchBuilder, DecodeError, Record, Records};
pub use init::InitMessage;
pub use table::{EXPORTS, Export, ExportKind, IMPORTS, Import, Signature, ValType};
pub use time::{TimeDomain, Timers};

/// The ABI version this crate implements. A guest returns it from
/// [`exports::ABI_VERSION`]; the host refuses a guest that returns another.
pub const ABI_VERSION: u32 = 1;

/// The version of the component world `weir:operator` (`abi/wit/operator.wit`) this crate's
/// host implements: the component front door's counterpart of [`ABI_VERSION`]. A component
/// built against this version or an earlier one of the same major version (1.0.0: the world
/// without `keyed-state`) is run; one whose world interfaces carry any other version is
/// refused. Kept here, beside the core ABI's version, so that the host's errors can name it
/// without depending on its component code.
pub const WORLD_VERSION: &str = "1.1.0";

/// The module name under which the host provides every import.
pub const IMPORT_MODULE: &str = "weir";

/// Names of the functions (and the memory) a guest exports.
///
/// Required: [`MEMORY`](exports::MEMORY), [`ABI_VERSION`](exports::ABI_VERSION),
/// [`ALLOC`](exports::ALLOC), [`PROCESS`](exports::PROCESS). Everything else is
/// optional; `docs/ABI.md` says what the host does when one is absent. [`EXPORTS`] gives each
/// its type and whether it is required.
pub mod exports {
    /// `memory`: the guest's linear memory, through which every buffer passes.
    pub const MEMORY: &str = "memory";
    /// `() -> i32`: the ABI version the guest was written against.
    pub const ABI_VERSION: &str = "weir_abi_version";
    /// `(len: i32) -> i32`: allocate `len` bytes for the host to write into; 0 on failure.
    pub const ALLOC: &str = "weir_alloc";
    /// `(ptr: i32, len: i32) -> i32`: take the init message; 0 on success.
    pub const INIT: &str = "weir_init";
    /// `(ptr: i32, len: i32) -> i32`: process one encoded batch; 0 on success.
    pub const PROCESS: &str = "weir_process";
    /// `() -> i32`: every input has ended; emit final records; 0 on success.
    pub const FINISH: &str = "weir_finish";
    /// `(checkpoint_id: i64) -> i32`: write the state through `save_state`; 0 on success.
    pub const SNAPSHOT: &str = "weir_snapshot";
    /// `(ptr: i32, len: i32) -> i32`: replace the state with a snapshot's bytes; 0 on success.
    pub const RESTORE: &str = "weir_restore";
    /// `(checkpoint_id: i64) -> i32`: checkpoints up to this id are complete; 0 on success.
    pub const CHECKPOINT_COMPLETE: &str = "weir_checkpoint_complete";
    /// `(ptr: i32, len: i32) -> i32`: timers that fired, as a batch whose port is their time
    /// domain ([`time`](crate::time)); 0 on success.
    pub const ON_TIMERS: &str = "weir_on_timers";
    /// `(watermark: i64) -> i32`: the task's watermark advanced to this; 0 on success.
    pub const ON_WATERMARK: &str = "weir_on_watermark";
    /// `()`: the runtime set-up C and AssemblyScript toolchains export; the host calls it once
    /// after instantiation, before anything else.
    pub const INITIALIZE: &str = "_initialize";
}

/// Names of the functions the host provides under [`IMPORT_MODULE`].
pub mod imports {
    /// `(ptr: i32, len: i32)`: append one encoded batch of output records.
    pub const EMIT: &str = "emit";
    /// `(ptr: i32, len: i32)`: append bytes to the snapshot being taken.
    pub const SAVE_STATE: &str = "save_state";
    /// `(ptr: i32, len: i32)`: fail the current call with a UTF-8 message; never returns.
    pub const FAIL: &str = "fail";
    /// `(level: i32, ptr: i32, len: i32)`: write a UTF-8 log line.
    pub const LOG: &str = "log";
    /// `(name_ptr: i32, name_len: i32, ptr: i32, len: i32)`: append one encoded batch to the
    /// side output named by the UTF-8 text at `name_ptr`.
    pub const EMIT_TO: &str = "emit_to";
    /// `(domain: i32, timestamp: i64, key_ptr: i32, key_len: i32)`: set a timer for a key.
    pub const TIMER_SET: &str = "timer_set";
    /// `(domain: i32, timestamp: i64, key_ptr: i32, key_len: i32)`: delete a timer of a key.
    pub const TIMER_DELETE: &str = "timer_delete";
    /// `(domain: i32) -> i64`: the current time of a domain: the task's watermark, or the
    /// host's clock.
    pub const CURRENT_TIME: &str = "current_time";
    /// `state_get(ptr, len) -> i32`: reads host-kept keyed state (§17).
    pub const STATE_GET: &str = "state_get";
    /// `state_result(ptr)`: copies out what the last `state_get` read (§17).
    pub const STATE_RESULT: &str = "state_result";
    /// `state_write(ptr, len)`: writes host-kept keyed state (§17).
    pub const STATE_WRITE: &str = "state_write";
}

/// The one import the host provides outside [`IMPORT_MODULE`]: AssemblyScript's `env.abort`.
pub mod env {
    /// The module AssemblyScript's compiler imports its runtime functions from.
    pub const MODULE: &str = "env";
    /// `(message: i32, file: i32, line: i32, column: i32)`: how AssemblyScript fails (`throw`,
    /// `assert`); never returns.
    pub const ABORT: &str = "abort";
}

/// Log levels understood by the `log` import.
pub mod log_level {
    /// Something went wrong.
    pub const ERROR: i32 = 0;
    /// Something looks wrong.
    pub const WARN: i32 = 1;
    /// Normal progress worth telling an operator of the job.
    pub const INFO: i32 = 2;
    /// Detail for the guest's author.
    pub const DEBUG: i32 = 3;
    /// Very fine detail.
    pub const TRACE: i32 = 4;
}
