//! End-to-end tests of Weir with real guests.
//!
//! `build.rs` compiles the example operators and the test guests of
//! `tests/guests/` to wasm before these tests build; [`guests`] names the
//! resulting files.

/// Paths of the guests built by `build.rs`.
pub mod guests {
    /// `examples/rust/split`, compiled to wasm.
    pub const SPLIT: &str = env!("WEIR_GUEST_SPLIT");
    /// `examples/rust/count`, compiled to wasm.
    pub const COUNT: &str = env!("WEIR_GUEST_COUNT");
    /// `examples/rust/host-count`, compiled to wasm: the count with its counts kept on the host
    /// (`weir_sdk::host_state`), record for record the same output.
    pub const HOST_COUNT: &str = env!("WEIR_GUEST_HOST_COUNT");
    /// `examples/rust/window`, compiled to wasm: a keyed count per event-time window, the
    /// windows chosen by its config (`tumbling 1000 lateness 200 late-output late`).
    pub const WINDOW: &str = env!("WEIR_GUEST_WINDOW");
    /// `examples/rust/dedup`, compiled to wasm.
    pub const DEDUP: &str = env!("WEIR_GUEST_DEDUP");
    /// `tests/guests/flaky`, compiled to wasm: passes records through, and panics at the
    /// record whose timestamp its config names (`fail_at=<timestamp>`) unless it was restored.
    pub const FLAKY: &str = env!("WEIR_GUEST_FLAKY");
    /// `examples/wat/count.wat`, the hand-written WAT count (loaded as text).
    pub const WAT_COUNT: &str = env!("WEIR_GUEST_WAT_COUNT");
    /// `examples/c/count.c`, compiled by `examples/c/build.sh`; `None` when its toolchain was
    /// missing and `WEIR_SKIP_FOREIGN_GUESTS=1` let the build skip it.
    pub const C_COUNT: Option<&str> = built(env!("WEIR_GUEST_C_COUNT"));
    /// `examples/assemblyscript`, compiled by its `build.sh`; `None` when skipped like
    /// [`C_COUNT`].
    pub const AS_COUNT: Option<&str> = built(env!("WEIR_GUEST_AS_COUNT"));
    /// `examples/zig/count.zig`, compiled by `examples/zig/build.sh` with the pinned Zig;
    /// `None` when skipped like [`C_COUNT`].
    pub const ZIG_COUNT: Option<&str> = built(env!("WEIR_GUEST_ZIG_COUNT"));
    /// `examples/c/image_count.c`: the count with wasi-libc's malloc and a constructor, and no
    /// snapshot code (checkpointed as an image), built by `examples/c/build-libc.sh`; `None`
    /// when skipped.
    pub const C_LIBC_COUNT: Option<&str> = built(env!("WEIR_GUEST_C_LIBC_COUNT"));
    /// The same source on AssemblyScript's `minimal` runtime (a TLSF allocator and a
    /// collector run by the host's calls); `None` when skipped.
    pub const AS_COUNT_MINIMAL: Option<&str> = built(env!("WEIR_GUEST_AS_COUNT_MINIMAL"));
    /// The same source on AssemblyScript's `incremental` runtime (TLSF and an incremental
    /// collector); `None` when skipped.
    pub const AS_COUNT_INCREMENTAL: Option<&str> = built(env!("WEIR_GUEST_AS_COUNT_INCREMENTAL"));
    /// `examples/rust-component`: the count as a component of the world in
    /// `abi/wit/operator.wit`, built for `wasm32-wasip2`; `None` when skipped.
    pub const RUST_COMPONENT_COUNT: Option<&str> = built(env!("WEIR_GUEST_RUST_COMPONENT_COUNT"));
    /// `examples/python/count`: the count in Python, a component built with componentize-py
    /// and the SDK of `guest-sdk/python`; `None` when skipped.
    pub const PY_COUNT: Option<&str> = built(env!("WEIR_GUEST_PY_COUNT"));
    /// `examples/python/host-count`: the Python count with its counts kept on the host, a
    /// component of the world `keyed-operator`; `None` when skipped.
    pub const PY_HOST_COUNT: Option<&str> = built(env!("WEIR_GUEST_PY_HOST_COUNT"));
    /// `tests/guests/python/hostile.py`: misbehaves on its first batch as its config says
    /// (`loop`, `allocate`, `open-file`, `socket`); `None` when skipped.
    pub const PY_HOSTILE: Option<&str> = built(env!("WEIR_GUEST_PY_HOSTILE"));
    /// `examples/js/count`: the count in JavaScript, a component built with componentize-js
    /// and the SDK of `guest-sdk/js`; `None` when skipped.
    pub const JS_COUNT: Option<&str> = built(env!("WEIR_GUEST_JS_COUNT"));
    /// `examples/js/host-count`: the JavaScript count with its counts kept on the host, a
    /// component of the world `keyed-operator`; `None` when skipped.
    pub const JS_HOST_COUNT: Option<&str> = built(env!("WEIR_GUEST_JS_HOST_COUNT"));
    /// `tests/guests/js/hostile.js`: misbehaves on its first batch as its config says
    /// (`loop`, `allocate`, `fetch`); `None` when skipped.
    pub const JS_HOSTILE: Option<&str> = built(env!("WEIR_GUEST_JS_HOSTILE"));

    /// A guest path as `build.rs` set it: empty when the guest was skipped.
    const fn built(path: &'static str) -> Option<&'static str> {
        if path.is_empty() { None } else { Some(path) }
    }
}
