//! The typed errors of the wasm layer: a module refused at load time ([`ModuleError`]), a
//! guest call that failed ([`GuestError`]), and an engine that could not start
//! ([`EngineError`]).
//!
//! Failures are classified by type, never by their text: host imports and the memory limiter
//! return an [`Abort`] carrying the [`GuestFailure`], and wasmtime's traps are read with
//! `downcast_ref::<wasmtime::Trap>()` (see [`classify`]).

use std::fmt;
use std::time::Duration;

use weir_abi::DecodeError;
use weir_abi::time::{MAX_OUTPUT_NAME_BYTES, TIMER_OVERHEAD_BYTES};

use super::call::Call;
use super::toolchain::{Toolchain, ToolchainEvidence};

/// A guest call failed. The instance that returned it is poisoned: every later call on it
/// returns [`GuestFailure::Poisoned`].
///
/// Displays as ``operator `count` subtask 1 failed in weir_process: guest trap: out of bounds
/// memory access``.
#[derive(Debug, Clone, thiserror::Error)]
#[error("operator `{operator}` subtask {subtask} failed in {call}: {failure}")]
pub struct GuestError {
    /// The operator's name in the job.
    pub operator: String,
    /// Which instance of the operator failed, from 0.
    pub subtask: u32,
    /// The guest export that was running (or being prepared) when the failure happened, such as
    /// `weir_process` or `weir_alloc`; `instantiate` while the module was being instantiated.
    pub call: &'static str,
    /// What went wrong.
    pub failure: GuestFailure,
    /// The guest's wasm backtrace at the failure, when wasmtime captured one: extra detail for
    /// logs, not part of the message.
    pub backtrace: Option<String>,
}

/// What went wrong in a guest call (`docs/ABI.md` §8).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuestFailure {
    /// The guest called the `fail` import.
    Failed {
        /// Its message, lossily decoded and cut at [`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES).
        message: String,
    },
    /// The guest called AssemblyScript's `env.abort` import (a `throw` or a failed `assert`).
    ///
    /// The texts are boxed `str`s to keep every `GuestFailure`, and the errors that carry one,
    /// small.
    Aborted {
        /// Its message; `None` when the guest passed none. Decoded from UTF-16 and cut at
        /// [`MAX_MESSAGE_BYTES`](super::MAX_MESSAGE_BYTES), or a placeholder when unreadable.
        message: Option<Box<str>>,
        /// The source file it names, read like `message`.
        file: Option<Box<str>>,
        /// The line in `file`, from 1; 0 when unknown.
        line: u32,
        /// The column in the line, from 1; 0 when unknown.
        column: u32,
    },
    /// The export returned a non-zero status.
    Status {
        /// The status it returned.
        code: i32,
        /// The last message the guest logged at level `error` during the call, if any.
        last_message: Option<String>,
    },
    /// The guest trapped (other than by stack overflow or timeout, which have their own
    /// variants).
    Trap {
        /// The kind of trap, as wasmtime reports it.
        trap: wasmtime::Trap,
    },
    /// The guest exhausted its wasm stack, typically through unbounded recursion.
    StackOverflow,
    /// The call ran longer than [`GuestLimits::call_timeout`](super::GuestLimits::call_timeout).
    Timeout {
        /// The limit it exceeded.
        limit: Duration,
    },
    /// The guest tried to grow its memory (or start with one) past
    /// [`GuestLimits::max_memory_bytes`](super::GuestLimits::max_memory_bytes).
    MemoryLimit {
        /// The limit, in bytes.
        limit: usize,
        /// The size it asked for, in bytes.
        requested: usize,
    },
    /// The guest ran out of memory and trapped: a growth of its memory failed, or its engine
    /// said so, during the call that trapped. Its trap alone (most often `unreachable`, from
    /// an allocator's abort) would not say it.
    OutOfMemory {
        /// How the host knows.
        sign: OutOfMemorySign,
        /// Its memories' bytes together when it trapped.
        memory: usize,
        /// [`GuestLimits::max_memory_bytes`](super::GuestLimits::max_memory_bytes).
        limit: usize,
    },
    /// The guest tried to grow its tables (or start with them) past
    /// [`MAX_TABLE_ELEMENTS`](super::MAX_TABLE_ELEMENTS) elements in all.
    TableLimit {
        /// The limit, in elements.
        limit: usize,
        /// The elements all its tables would hold together.
        requested: usize,
    },
    /// A pointer and length from the guest (an import argument or `weir_alloc`'s result) do not
    /// lie inside its memory.
    OutOfBounds {
        /// What the range was for, e.g. "`emit` batch".
        what: &'static str,
        /// The pointer, as the guest gave it.
        ptr: u32,
        /// The length, as the guest gave it.
        len: u32,
        /// The size of the guest's memory at that moment, in bytes.
        memory_len: usize,
    },
    /// `weir_alloc` returned 0 (or the buffer cannot be described with a 32-bit length).
    AllocFailed {
        /// The length the host asked for.
        len: usize,
    },
    /// The guest emitted bytes that are not a valid batch.
    MalformedOutput {
        /// What is wrong with them.
        problem: DecodeError,
    },
    /// The guest emitted a batch whose port is not 0.
    OutputPort {
        /// The port it set.
        port: u32,
    },
    /// One call emitted more than [`GuestLimits::max_output_bytes`](super::GuestLimits::max_output_bytes).
    OutputTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// One snapshot exceeded [`GuestLimits::max_state_bytes`](super::GuestLimits::max_state_bytes).
    StateTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The guest called an import during a call that does not allow it (`emit` outside
    /// `weir_process`/`weir_finish`, `save_state` outside `weir_snapshot`).
    ImportMisuse {
        /// The import it called.
        import: &'static str,
        /// The export that was running.
        call: &'static str,
    },
    /// The guest named a side output with an empty, too long or non-UTF-8 name (`emit_to`).
    OutputName {
        /// The name, as text (invalid UTF-8 replaced).
        name: String,
        /// Its length, in bytes.
        len: usize,
    },
    /// The guest's timers outgrew [`GuestLimits::max_timer_bytes`](super::GuestLimits::max_timer_bytes).
    TimersTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The guest passed a malformed request to a keyed-state import (`docs/ABI.md` §17).
    StateRequest {
        /// The import it called.
        import: &'static str,
        /// What is wrong with the request.
        problem: String,
    },
    /// The guest called `state_result` with no `state_get` result waiting.
    NoStateResult,
    /// The guest called a keyed-state import in an instance given no store: one a tool runs
    /// outside a job without host-kept state.
    NoKeyedState {
        /// The import it called.
        import: &'static str,
    },
    /// The store of the task's keyed state failed under a guest's request: the host's
    /// failure (a disk full or failing), reported with the call that met it.
    StateStore {
        /// What the store said.
        message: String,
    },
    /// The guest passed a time domain other than 0 and 1 to a timer or clock import.
    TimeDomain {
        /// The import it called.
        import: &'static str,
        /// The number it passed.
        code: i32,
    },
    /// An advance of the watermark kept finding due timers, round after round of
    /// `weir_on_timers` (`docs/ABI.md` §15).
    TimerRounds {
        /// The watermark it was advancing to.
        watermark: i64,
        /// How many rounds ran.
        rounds: usize,
    },
    /// Taking or writing back an image of the instance failed: the image is corrupt, comes
    /// from another module, or does not fit the instance's limits.
    Image {
        /// What went wrong, naming the memory, global or hash concerned.
        message: String,
    },
    /// A non-empty state was to be restored into a module that exports no `weir_restore`.
    NoRestoreExport {
        /// Length of the state, in bytes.
        state_len: usize,
    },
    /// The job gives the operator a non-empty config, but the module exports no `weir_init`
    /// to receive it.
    UnusedConfig {
        /// Length of the config, in bytes.
        config_len: usize,
    },
    /// The guest's `weir_abi_version` returned a version this host does not implement.
    AbiVersion {
        /// What the guest returned.
        guest: i32,
        /// The version this host implements.
        host: u32,
    },
    /// The instance failed earlier and is never called again (`docs/ABI.md` §8).
    Poisoned {
        /// The call in which it failed.
        failed_call: &'static str,
    },
    /// A component called WASI's `exit` (Python's `sys.exit`, for one).
    Exited {
        /// The exit code it gave.
        code: i32,
    },
    /// Instantiation failed for a reason that is none of the above.
    Instantiation {
        /// wasmtime's message.
        message: String,
    },
    /// wasmtime reported an error that is neither a trap nor one of the host's own failures.
    Runtime {
        /// wasmtime's message.
        message: String,
    },
}

/// How the host knows a guest that trapped had run out of memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfMemorySign {
    /// A growth of its memory failed during the call: past the maximum its module declares,
    /// or for want of host memory.
    GrowthFailed,
    /// Its engine wrote "out of memory" to standard error during the call (a JavaScript
    /// component's SpiderMonkey does when its heap cannot grow).
    EngineReported,
}

/// Whether a guest with `memory` bytes was at or near its `limit` (within a tenth of it), so
/// that raising the limit is the fix, rather than keeping less state.
fn near_limit(memory: usize, limit: usize) -> bool {
    memory >= limit - limit / 10
}

impl fmt::Display for GuestFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use weir_abi::exports;
        match self {
            GuestFailure::Failed { message } => write!(f, "guest failed: {message}"),
            GuestFailure::Aborted {
                message,
                file,
                line,
                column,
            } => write!(
                f,
                "guest aborted: {} (at {}:{line}:{column})",
                message.as_deref().unwrap_or("no message"),
                file.as_deref().unwrap_or("unknown file")
            ),
            GuestFailure::Status {
                code,
                last_message: None,
            } => {
                write!(f, "guest returned status {code}")
            }
            GuestFailure::Status {
                code,
                last_message: Some(m),
            } => {
                write!(
                    f,
                    "guest returned status {code} (last error it logged: {m})"
                )
            }
            GuestFailure::Trap { trap } => {
                // wasmtime's text starts with "wasm trap: "; say "guest trap: " instead.
                let text = trap.to_string();
                let kind = text.strip_prefix("wasm trap: ").unwrap_or(&text);
                write!(f, "guest trap: {kind}")
            }
            GuestFailure::StackOverflow => write!(
                f,
                "guest stack overflow: the wasm stack is exhausted (look for unbounded recursion)"
            ),
            GuestFailure::Timeout { limit } => write!(
                f,
                "guest ran longer than the call time limit of {limit:?} (look for an endless \
                 loop, or raise `limits.call_timeout`)"
            ),
            GuestFailure::MemoryLimit { limit, requested } => write!(
                f,
                "guest memory would grow to {requested} bytes, past the limit of {limit} bytes \
                 (raise `limits.max_memory` if the operator really needs it)"
            ),
            GuestFailure::OutOfMemory {
                sign,
                memory,
                limit,
            } => {
                let said = match sign {
                    OutOfMemorySign::GrowthFailed => "its memory could not grow",
                    OutOfMemorySign::EngineReported => "its engine reported \"out of memory\"",
                };
                write!(
                    f,
                    "guest ran out of memory and trapped ({said}), with {memory} bytes of memory \
                     in use of the limit of {limit} bytes: "
                )?;
                match sign {
                    _ if near_limit(*memory, *limit) => write!(
                        f,
                        "raise the operator's `limits.max_memory` in the job file (docs/JOB.md), \
                         or keep less state in the operator"
                    ),
                    OutOfMemorySign::GrowthFailed => write!(
                        f,
                        "the limit was not reached, so the module's own maximum memory was: \
                         build it with a larger maximum, or keep less state in the operator"
                    ),
                    OutOfMemorySign::EngineReported => write!(
                        f,
                        "the limit was not reached, so the engine's own heap ran out: keep less \
                         state in the operator, or spread it over more subtasks (a JavaScript \
                         operator holds about 100 000 keys, docs/COMPONENTS.md); raising \
                         `limits.max_memory` in the job file does not help"
                    ),
                }
            }
            GuestFailure::TableLimit { limit, requested } => write!(
                f,
                "guest tables would hold {requested} elements in all, past the limit of {limit}"
            ),
            GuestFailure::OutOfBounds {
                what,
                ptr,
                len,
                memory_len,
            } => write!(
                f,
                "{what} at {ptr}..{ptr}+{len} lies outside the guest memory of {memory_len} bytes"
            ),
            GuestFailure::AllocFailed { len } => write!(
                f,
                "{} could not provide a buffer of {len} bytes (it returned 0)",
                exports::ALLOC
            ),
            GuestFailure::MalformedOutput { problem } => {
                write!(f, "guest emitted a malformed batch: {problem}")
            }
            GuestFailure::OutputPort { port } => write!(
                f,
                "guest emitted a batch with port {port}; output batches must set port 0"
            ),
            GuestFailure::OutputTooLarge { limit } => write!(
                f,
                "guest emitted more than {limit} bytes in one call (emit less per call, or \
                 raise `limits.max_output`)"
            ),
            GuestFailure::StateTooLarge { limit } => write!(
                f,
                "guest saved a snapshot larger than {limit} bytes (keep less state, or raise \
                 `limits.max_state`)"
            ),
            GuestFailure::ImportMisuse { import, call } => write!(
                f,
                "guest called `{import}` during {call}; it is allowed only during {}",
                Call::allowing(import)
            ),
            GuestFailure::OutputName { name, len } => write!(
                f,
                "guest emitted on a side output named {name:?} ({len} bytes); a side output \
                 name is UTF-8 text of 1 to {MAX_OUTPUT_NAME_BYTES} bytes"
            ),
            GuestFailure::TimersTooLarge { limit } => write!(
                f,
                "guest set more timers than fit in {limit} bytes (each counts its key plus \
                 {TIMER_OVERHEAD_BYTES} bytes): delete timers it no longer needs, or raise \
                 `limits.max_timer_state`"
            ),
            GuestFailure::StateRequest { import, problem } => write!(
                f,
                "guest passed a malformed request to `{import}`: {problem} (the layout is in \
                 docs/ABI.md §17)"
            ),
            GuestFailure::NoStateResult => write!(
                f,
                "guest called `{}` with no result waiting: call `{}` first, then copy its \
                 result once",
                weir_abi::imports::STATE_RESULT,
                weir_abi::imports::STATE_GET
            ),
            GuestFailure::NoKeyedState { import } => write!(
                f,
                "guest called `{import}`, but it runs without a keyed state store (a tool \
                 running it outside a job); run it in a job, or with `weir test`"
            ),
            GuestFailure::StateStore { message } => write!(f, "{message}"),
            GuestFailure::TimeDomain { import, code } => write!(
                f,
                "guest called `{import}` with time domain {code}; the domains are 0 (event \
                 time) and 1 (processing time)"
            ),
            GuestFailure::TimerRounds { watermark, rounds } => write!(
                f,
                "the watermark could not advance to {watermark}: after {rounds} rounds of \
                 {} the guest still had due timers, setting new ones at or before the \
                 watermark as fast as they fire (set a timer after the time it fires at)",
                exports::ON_TIMERS
            ),
            GuestFailure::Image { message } => write!(f, "image checkpoint: {message}"),
            GuestFailure::NoRestoreExport { state_len } => write!(
                f,
                "cannot restore a state of {state_len} bytes: the module exports no {} (was it \
                 changed since the snapshot was taken?)",
                exports::RESTORE
            ),
            GuestFailure::UnusedConfig { config_len } => write!(
                f,
                "the job gives the operator a config of {config_len} bytes but the module \
                 exports no {} to receive it; remove the config or export {}",
                exports::INIT,
                exports::INIT
            ),
            GuestFailure::AbiVersion { guest, host } => write!(
                f,
                "guest was written for weir ABI version {guest}, but this host implements \
                 version {host}; rebuild it against version {host}"
            ),
            GuestFailure::Poisoned { failed_call } => write!(
                f,
                "the instance already failed in {failed_call} and is never called again"
            ),
            GuestFailure::Exited { code } => write!(
                f,
                "guest called exit({code}) (in Python, sys.exit or an uncaught SystemExit): an \
                 operator fails a call by returning an error, and never exits"
            ),
            GuestFailure::Instantiation { message } => {
                write!(f, "cannot instantiate the module: {message}")
            }
            GuestFailure::Runtime { message } => write!(f, "wasmtime error: {message}"),
        }
    }
}

/// A module was refused at load time: nothing of it ran, or only its ABI version check did.
#[derive(Debug, thiserror::Error)]
#[error("module `{module}`: {problem}")]
pub struct ModuleError {
    /// The file path, or the name given with the bytes ([`ModuleSource`](super::ModuleSource)).
    pub module: String,
    /// What is wrong with it.
    pub problem: ModuleProblem,
}

/// What is wrong with a module (`docs/ABI.md` §1, §3, §4, §10).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModuleProblem {
    /// The file could not be read.
    #[error("cannot read the file: {0}")]
    Io(#[source] std::io::Error),
    /// The path is a directory, a device or another thing that is not a regular file.
    #[error("not a regular file ({kind}): give the path of a .wasm or .wat file")]
    NotAFile {
        /// What it is ("a directory", "a character device").
        kind: &'static str,
    },
    /// The file holds no bytes.
    #[error(
        "the file is empty: a module is a .wasm binary (starting with the bytes \\0asm) or WAT \
         text; rebuild it, or check the path"
    )]
    Empty,
    /// Neither a binary module nor text to be read as WAT.
    #[error(
        "not a WebAssembly module: a binary module starts with the magic bytes \\0asm, this \
         file starts with {start}; WAT text is read only from a `.wat` file or from text that \
         starts with `(`"
    )]
    NotWasm {
        /// The first bytes, in hex.
        start: String,
    },
    /// wasmtime could not parse, validate or compile it.
    #[error("not a valid WebAssembly module: {message}")]
    Compile {
        /// wasmtime's message.
        message: String,
    },
    /// A required export is missing.
    #[error(
        "missing the required export `{name}` with signature {expected}; export it (see \
         docs/ABI.md §3)"
    )]
    MissingExport {
        /// The export's name.
        name: &'static str,
        /// The signature it must have.
        expected: String,
    },
    /// An export of the ABI has the wrong type.
    #[error("export `{name}` is {found}, but the ABI requires {expected} (see docs/ABI.md §3)")]
    WrongSignature {
        /// The export's name.
        name: &'static str,
        /// The signature the ABI gives it.
        expected: String,
        /// What the module exports under that name.
        found: String,
    },
    /// The module exports no memory named `memory`.
    #[error("exports no memory named `memory`; export its linear memory as `memory`")]
    NoMemory,
    /// The exported memory is not a plain 32-bit, unshared memory.
    #[error("its exported memory is {found}; the ABI needs a plain (unshared, 32-bit) memory")]
    UnsupportedMemory {
        /// What kind of memory it is: "shared" or "64-bit".
        found: &'static str,
    },
    /// The module defines more than one memory; the ABI has exactly one.
    #[error("defines {count} memories; the ABI allows exactly one, exported as `memory`")]
    MultipleMemories {
        /// How many memories it defines.
        count: u32,
    },
    /// The module imports something the host does not provide.
    #[error(
        "imports `{module}`.`{name}`, which the host does not provide; the host provides only \
         {} (no WASI): build the module without other imports",
        provided_list()
    )]
    UnknownImport {
        /// The import's module name.
        module: String,
        /// The import's field name.
        name: String,
    },
    /// The module imports WASI (`wasi_snapshot_preview1`, or a `wasi:` interface), which the
    /// host does not provide: one problem for all those imports, with the fix for the
    /// toolchain the module came from.
    #[error(
        "imports WASI, which the host does not provide (an operator talks to the host only \
         through the `weir` imports of docs/ABI.md §4): {}; the module was built by \
         {toolchain}{}: {}",
        wasi_list(imports),
        evidence_note(*evidence),
        toolchain.without_wasi()
    )]
    WasiImports {
        /// Every WASI import, as `module.name`, in the module's order.
        imports: Vec<String>,
        /// The toolchain the module came from.
        toolchain: Toolchain,
        /// How the toolchain was told.
        evidence: ToolchainEvidence,
    },
    /// The module imports `timer_set` but exports no `weir_on_timers`: its timers could never
    /// reach it.
    #[error(
        "imports `weir`.`timer_set` but exports no `weir_on_timers`, so the timers it sets could \
         never reach it: export weir_on_timers (docs/ABI.md §15), or drop the import"
    )]
    TimersWithoutHandler,
    /// An import the host provides has the wrong type.
    #[error("imports `{module}`.`{name}` as {found}, but the host provides it as {expected}")]
    BadImportSignature {
        /// The import's module name: `weir`, or `env` for `abort`.
        module: String,
        /// The import's name.
        name: String,
        /// The host's signature for it.
        expected: String,
        /// The type the module imports it with.
        found: String,
    },
    /// `weir_abi_version` returned a version this host does not implement.
    #[error(
        "was written for weir ABI version {guest}, but this host implements version {host}; \
         rebuild it against version {host}"
    )]
    UnsupportedAbiVersion {
        /// What the guest returned.
        guest: i32,
        /// The version this host implements.
        host: u32,
    },
    /// The guest failed while its ABI version was being read (in its start function,
    /// `_initialize` or `weir_abi_version`).
    #[error("failed while its ABI version was read, in {call}: {failure}")]
    VersionCheck {
        /// The export (or `instantiate`) that failed.
        call: &'static str,
        /// How it failed.
        failure: GuestFailure,
    },
    /// A component that exports no `weir:operator/guest` interface: not an operator.
    #[error(
        "is a WebAssembly component but not a Weir operator: it exports no \
         `weir:operator/guest@{}` interface (it exports {}); build it against the world in \
         abi/wit/operator.wit (docs/COMPONENTS.md)",
        weir_abi::WORLD_VERSION,
        component_exports(exports)
    )]
    NotAnOperatorComponent {
        /// What the component exports instead.
        exports: Vec<String>,
    },
    /// A component imports an interface outside the world and the WASI the host allows.
    #[error(
        "imports `{import}`, which the host refuses: a component may import only the world's \
         `weir:operator/host` (and `weir:operator/keyed-state`) and the WASI 0.2 interfaces docs/COMPONENTS.md lists (no files, \
         network or environment); build it without that import (for componentize-js, pass \
         disableFeatures: ['http', 'fetch-event'])"
    )]
    RefusedComponentImport {
        /// The import's full name, with its version.
        import: String,
    },
    /// A component built against another version of the world.
    #[error(
        "was built against version {guest} of the Weir world (`{interface}`), but this host \
         implements version {host} and runs components of that version or an earlier one of \
         its major version: rebuild it against abi/wit/operator.wit of this version"
    )]
    WorldVersion {
        /// The interface as the component names it.
        interface: String,
        /// The version the component was built against (empty when it names none).
        guest: String,
        /// The version this host implements.
        host: String,
    },
    /// The job asks for image checkpoints of the module (`checkpoint = "image"`, or `"auto"`
    /// without snapshot exports), and an image cannot capture its state.
    #[error("cannot be checkpointed: {message}")]
    ImageRefused {
        /// Why, naming every reason and the fix.
        message: String,
    },
    /// wasmtime could not link the module although it passed validation.
    #[error("cannot be linked: {message}")]
    Link {
        /// wasmtime's message.
        message: String,
    },
    /// The job gives the operator a config, but its module exports no `weir_init` to receive
    /// it ([`LoadOptions::config_of`](super::LoadOptions::config_of)). Displays as the whole
    /// message, naming the operator and the module's path.
    #[error(
        "operator `{operator}` has a config, but its module {} exports no weir_init to receive \
         it: remove the config or export weir_init (docs/ABI.md §3)",
        path.display()
    )]
    ConfigWithoutInit {
        /// The operator's name in the job.
        operator: String,
        /// The module's path, as the job file gives it.
        path: std::path::PathBuf,
    },
}

/// The engine could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// wasmtime refused the configuration or the host functions.
    #[error("cannot set up the wasmtime engine: {message}")]
    Wasmtime {
        /// wasmtime's message.
        message: String,
    },
    /// The epoch ticker thread could not be started.
    #[error("cannot start the epoch ticker thread: {0}")]
    Ticker(#[source] std::io::Error),
    /// The directory of compiled modules cannot be used.
    #[error(
        "cannot use {} as the cache of compiled modules: {message}; make it writable, choose \
         another with WEIR_CACHE_DIR, or run without it (--no-module-cache)",
        dir.display()
    )]
    ModuleCache {
        /// The directory.
        dir: std::path::PathBuf,
        /// wasmtime's message.
        message: String,
    },
}

/// The error a host import or the resource limiter returns to stop the guest with a
/// [`GuestFailure`]; wasmtime turns it into a trap and hands it back from the call, where
/// [`classify`] finds it by downcast.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Abort(pub(crate) GuestFailure);

impl Abort {
    /// Wraps `failure` as a wasmtime error, ready to be returned from a host function.
    pub(crate) fn error(failure: GuestFailure) -> wasmtime::Error {
        wasmtime::Error::new(Abort(failure))
    }
}

/// Turns an error returned by a wasmtime call into a [`GuestFailure`], by type, plus the
/// guest's backtrace text when wasmtime attached one.
///
/// `call_timeout` is the limit reported when the call was interrupted by its epoch deadline;
/// `instantiating` says whether unknown errors came from instantiation.
pub(crate) fn classify(
    error: &wasmtime::Error,
    call_timeout: Duration,
    instantiating: bool,
) -> (GuestFailure, Option<String>) {
    let backtrace = error
        .downcast_ref::<wasmtime::WasmBacktrace>()
        .map(|trace| trace.to_string())
        .filter(|text| !text.trim().is_empty());
    let failure = if let Some(Abort(failure)) = error.downcast_ref::<Abort>() {
        failure.clone()
    } else if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
        match trap {
            wasmtime::Trap::StackOverflow => GuestFailure::StackOverflow,
            wasmtime::Trap::Interrupt => GuestFailure::Timeout {
                limit: call_timeout,
            },
            other => GuestFailure::Trap { trap: *other },
        }
    } else if let Some(exit) = error.downcast_ref::<wasmtime_wasi::I32Exit>() {
        GuestFailure::Exited { code: exit.0 }
    } else if instantiating && error.is::<wasmtime::PoolConcurrencyLimitError>() {
        GuestFailure::Instantiation {
            message: format!(
                "{error:#}: more instances of image-checkpointed operators are alive at once \
                 than their instance pool has room for, which Weir sizes from the job (a bug: \
                 please report it; checkpoint = \"exports\" keeps an operator out of the pool)"
            ),
        }
    } else if instantiating {
        GuestFailure::Instantiation {
            message: format!("{error:#}"),
        }
    } else {
        GuestFailure::Runtime {
            message: format!("{error:#}"),
        }
    };
    (failure, backtrace)
}

/// A component's exports, for [`ModuleProblem::NotAnOperatorComponent`]: "nothing" or a list.
fn component_exports(exports: &[String]) -> String {
    if exports.is_empty() {
        return "nothing".to_string();
    }
    let names: Vec<String> = exports.iter().map(|name| format!("`{name}`")).collect();
    names.join(", ")
}

/// The WASI imports of a [`ModuleProblem::WasiImports`], grouped by module:
/// "`wasi_snapshot_preview1`: fd_write, fd_close".
fn wasi_list(imports: &[String]) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for import in imports {
        // A `wasi:` interface name has dots in its version; the field name follows the last.
        let (module, name) = import.rsplit_once('.').unwrap_or(("", import));
        match groups.iter_mut().find(|(m, _)| *m == module) {
            Some((_, names)) => names.push(name),
            None => groups.push((module, vec![name])),
        }
    }
    let count = imports.len();
    let groups: Vec<String> = groups
        .iter()
        .map(|(module, names)| format!("`{module}`: {}", names.join(", ")))
        .collect();
    format!(
        "{count} import{} from {}",
        if count == 1 { "" } else { "s" },
        groups.join("; ")
    )
}

/// How the toolchain of a [`ModuleProblem::WasiImports`] was told, for its message.
fn evidence_note(evidence: ToolchainEvidence) -> &'static str {
    match evidence {
        ToolchainEvidence::ProducersSection => " (its producers section says so)",
        ToolchainEvidence::Imports => " (its `env.abort` import says so)",
        ToolchainEvidence::None => " (neither its producers section nor its imports say which)",
    }
}

/// The imports the host provides, for [`ModuleProblem::UnknownImport`]: the `weir` ones, then
/// `env.abort` for AssemblyScript, from [`weir_abi::IMPORTS`].
fn provided_list() -> String {
    let weir: Vec<String> = weir_abi::IMPORTS
        .iter()
        .filter(|i| i.module == weir_abi::IMPORT_MODULE)
        .map(|i| format!("`{}`.`{}`", i.module, i.name))
        .collect();
    let (last, rest) = weir.split_last().expect("the ABI has `weir` imports");
    format!(
        "{} and {last}, plus `{}`.`{}` for AssemblyScript",
        rest.join(", "),
        weir_abi::env::MODULE,
        weir_abi::env::ABORT
    )
}

/// A guest call that failed, as the code that made it reports it: which call failed (not
/// always the one asked for: `weir_alloc` fails for `weir_process`) and how. The instance turns
/// it into its [`GuestError`] and poisons itself.
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
