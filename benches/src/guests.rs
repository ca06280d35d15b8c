//! The guest modules the benchmarks load.

/// The `count` example built for wasm32 in release by this crate's build script.
pub const COUNT_WASM: &str = env!("WEIR_GUEST_COUNT");

/// The `host-count` example (the count with its counts kept on the host), built like
/// [`COUNT_WASM`].
pub const HOST_COUNT_WASM: &str = env!("WEIR_GUEST_HOST_COUNT");

/// The `uppercase` example (a stateless filter and map), built like [`COUNT_WASM`].
pub const UPPERCASE_WASM: &str = env!("WEIR_GUEST_UPPERCASE");

/// The `split` example (lines into words, keyed by word), built like [`COUNT_WASM`].
pub const SPLIT_WASM: &str = env!("WEIR_GUEST_SPLIT");

/// The `window` example (a keyed count per event-time window), built like [`COUNT_WASM`].
pub const WINDOW_WASM: &str = env!("WEIR_GUEST_WINDOW");

/// The smallest operator of `docs/ABI.md` §11: a stateless identity that re-emits its input
/// batch with the port cleared. It does no work of its own, so a batch through it costs what
/// the ABI round trip costs: `weir_alloc`, the copy in, `weir_process`, `emit` (which checks
/// and copies the batch out). Its single 64 KiB input buffer holds a 1024-record batch of the
/// benchmark workload.
pub const IDENTITY_WAT: &str = r#"
(module
  (import "weir" "emit" (func $emit (param i32 i32)))
  (memory (export "memory") 2)
  (func (export "weir_abi_version") (result i32) (i32.const 1))
  (func (export "weir_alloc") (param $len i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $len) (i32.const 65536))
      (then (i32.const 0))
      (else (i32.const 65536))))
  (func (export "weir_process") (param $ptr i32) (param $len i32) (result i32)
    (i32.store offset=4 (local.get $ptr) (i32.const 0))
    (call $emit (local.get $ptr) (local.get $len))
    (i32.const 0)))
"#;
