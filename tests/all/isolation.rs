//! Guest isolation, proved with real jobs run by the real `weir` binary. The guarantees are
//! written down in `docs/ABI.md` §13; this module is their evidence.
//!
//! # The corpus: a hostile guest fails by name, and nothing else happens
//!
//! [`corpus`] is one table of hostile operators, written in WAT: a trap, an endless loop, a
//! memory bomb, a table bomb, unbounded recursion, out-of-bounds pointers handed to every
//! import and returned from `weir_alloc`, a malformed output batch, huge output (one enormous
//! batch, or a flood of batches), a snapshot that fails or outgrows its limit, a restore that
//! traps, a restore given bytes it cannot read, and a Rust panic with a message. Each runs in
//! its own job (generator → `bad` → file sink) under the restart strategy fixed-delay, 2
//! attempts, 100 ms apart, and each must:
//!
//! - end the `weir` process with the job-failed exit code, within [`CLI_TIMEOUT`] (no hang);
//! - name the task (`bad#0`), the operator and subtask, the guest export that failed and the
//!   kind of failure, in the summary;
//! - show the restart strategy applied: three failures logged (the first attempt and two
//!   restarts) and `restarts: 2` in the summary;
//! - keep the host's peak resident memory (`VmHWM` of the `weir` process, sampled every 10 ms
//!   while it runs) under the case's bound. Where it matters the bound is chosen so that a host
//!   that let the guest through would exceed it: the memory bomb would touch gigabytes, the
//!   huge batch would be a 192 MiB copy, the floods would accumulate without end.
//!
//! # Isolation: what a guest can reach
//!
//! A guest is a core wasm module. Inside its instance it can compute and touch its own linear
//! memory, tables and globals, and nothing else: wasm code has no instruction that reaches
//! outside the instance. Everything else goes through imports, so the import surface is the
//! whole of a guest's authority, and the argument is about it:
//!
//! - **Imports.** The host provides exactly the `weir` imports of `docs/ABI.md` §4 (`emit`,
//!   `save_state`, `fail`, `log`, `emit_to`, `timer_set`, `timer_delete`, `current_time`) and
//!   `env.abort`: [`the_host_provides_exactly_the_imports_abi_md_lists`]
//!   checks the host's list against the document, and a unit test in `host/src/wasm/tests.rs`
//!   checks the linker against the list. A module importing anything else — WASI, another
//!   `env` function, an imported memory or table — is refused at load time, naming the
//!   import, before any of its code runs
//!   ([`modules_importing_anything_outside_the_abi_are_refused_naming_the_import`]).
//! - **Files and the network.** None of the imports opens, reads or writes a file or a
//!   socket: they copy bytes out of the guest's memory into host buffers (`emit`, `emit_to`,
//!   `save_state`) or into a message (`fail`, `log`, `abort`), or change the instance's own
//!   timers (`timer_set`, `timer_delete`). The only way to files or the
//!   network would be an import, and every such import is refused: WASI's `fd_*`,
//!   `path_open`, `sock_*` are in the refused list.
//! - **The clock and randomness.** One import reads a clock: `current_time(1)`, the host's
//!   wall clock in milliseconds, for processing-time timers (`docs/ABI.md` §15); the
//!   watermark (`current_time(0)`) and the records' timestamps are data. No import returns
//!   random bytes, and WASI's `clock_time_get`, `random_get` and AssemblyScript's `env.seed`
//!   are refused.
//! - **Memory.** Each subtask's instance has its own store and its own linear memory; a
//!   module that imports a memory is refused, and shared memories are refused by
//!   validation. [`guests_cannot_read_each_others_memory_nor_an_earlier_instances`] runs two
//!   operators of two subtasks each: one instance writes a secret over its memory, the
//!   others scan every 8-byte word of theirs for it while it runs, and a restarted instance scans
//!   its fresh memory before writing; none finds it. A control job, where the same scanner
//!   runs in the writer's own instance, finds it — so the scan would see a leak.
//! - **Host memory through pointers.** Every pointer and length a guest passes to an import,
//!   or returns from `weir_alloc`, is checked against its memory before a byte is read or
//!   written; the corpus hands out-of-bounds ranges to each of `emit`, `save_state`, `fail`,
//!   `log` and `abort` and returns one from `weir_alloc`, and each is refused with the range
//!   and the memory size named.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::{self};
use std::path::{Path, PathBuf};
use std::time::Instant;

use weir_tests::guests;

use crate::support::report;
use crate::support::{
    CLI_TIMEOUT, CliOutput, Ended, GeneratorSpec, JobFile, Sandbox, Weir, checkpointed,
    weir_command,
};

/// The exit code of a job that failed beyond its restart strategy (README).
const EXIT_JOB_FAILED: i32 = 1;
/// The exit code of a job that could not start, e.g. a module refused at load time.
const EXIT_CANNOT_START: i32 = 3;
/// The exit code of `weir validate` for a module that is not a valid operator.
const EXIT_INVALID_MODULE: i32 = 1;

/// The restart strategy of every corpus job: two restarts, so every hostile guest fails three
/// times — once per attempt.
const RESTART: &str = "strategy = \"fixed-delay\"\nattempts = 2\ndelay = \"100ms\"";
/// Failures each corpus job must log: the first attempt and both restarts.
const ATTEMPTS: usize = 3;

// ---------------------------------------------------------------------------------------------
// Hostile guests

/// The imports, memory (4 pages, 256 KiB) and version export every corpus guest shares.
const PRELUDE: &str = r#"
  (import "weir" "emit" (func $emit (param i32 i32)))
  (import "weir" "save_state" (func $save_state (param i32 i32)))
  (import "weir" "fail" (func $fail (param i32 i32)))
  (import "weir" "log" (func $log (param i32 i32 i32)))
  (import "env" "abort" (func $abort (param i32 i32 i32 i32)))
  (memory (export "memory") 4)
  (func (export "weir_abi_version") (result i32) (i32.const 1))
"#;

/// `weir_alloc` for guests that do not define their own: the host's buffers (batches of about
/// 64 KiB) go to 64 KiB..192 KiB; the guests keep their own data below 64 KiB or above 256 KiB.
const ALLOC: &str = r#"
  (func (export "weir_alloc") (param $len i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $len) (i32.const 131072))
      (then (i32.const 0))
      (else (i32.const 65536))))
"#;

/// `weir_process` doing nothing, for guests that misbehave elsewhere.
const PROCESS_OK: &str =
    r#"(func (export "weir_process") (param i32 i32) (result i32) (i32.const 0))"#;

/// What the "armed" guests fail with in `weir_process`, once a checkpoint has completed.
const ARMED_MESSAGE: &str = "a checkpoint completed: failing so that the job restarts from it";

/// What the failing snapshot logs as an error before it returns its status.
const SNAPSHOT_ERROR: &str = "snapshot: cannot serialise the state";

/// Makes a guest fail in `weir_process` once it has heard that a checkpoint completed, so that
/// the restart restores that checkpoint — the way to reach `weir_restore` in a running job.
fn armed() -> String {
    format!(
        r#"
  (global $armed (mut i32) (i32.const 0))
  (func (export "weir_checkpoint_complete") (param i64) (result i32)
    (global.set $armed (i32.const 1)) (i32.const 0))
  {message}
  (func (export "weir_process") (param i32 i32) (result i32)
    (if (global.get $armed) (then (call $fail (i32.const 512) (i32.const {len}))))
    (i32.const 0))"#,
        message = data(512, ARMED_MESSAGE),
        len = ARMED_MESSAGE.len()
    )
}

/// A data segment putting `text` at `offset`.
fn data(offset: u32, text: &str) -> String {
    let mut escaped = String::new();
    for byte in text.bytes() {
        write!(escaped, "\\{byte:02x}").unwrap();
    }
    format!(r#"(data (i32.const {offset}) "{escaped}")"#)
}

/// A corpus guest: the prelude, [`ALLOC`] unless `body` defines `weir_alloc`, and `body`.
fn hostile(body: &str) -> String {
    let alloc = if body.contains("\"weir_alloc\"") {
        ""
    } else {
        ALLOC
    };
    format!("(module\n{PRELUDE}\n{alloc}\n{body}\n)")
}

/// The operator module of a corpus case.
enum Guest {
    /// WAT text, written into the case's sandbox.
    Wat(String),
    /// A module built by `build.rs`, with its config.
    Built {
        /// The module's path.
        path: &'static str,
        /// Its `config`.
        config: &'static str,
    },
}

/// One hostile behaviour and how its job must end.
struct Case {
    /// What the guest does, for messages and the reliability table.
    name: &'static str,
    /// The fault, in a few words, for the reliability table.
    faults: &'static str,
    /// The guest.
    guest: Guest,
    /// Whether the job takes checkpoints (every 50 ms): needed to reach `weir_snapshot`, and
    /// `weir_restore` after a restart.
    checkpoints: bool,
    /// The job's `[limits]` table, as TOML lines.
    limits: &'static str,
    /// The export the last failure happens in.
    call: &'static str,
    /// How many of the [`ATTEMPTS`] failures happen in `call`: fewer when the first attempt
    /// fails elsewhere to cause a restore.
    failures_in_call: usize,
    /// Texts the failure must contain: the kind of failure, in the host's words.
    failure: Vec<String>,
    /// The most resident memory the `weir` process may reach, in MiB.
    max_rss_mib: u64,
}

impl Case {
    /// A core-module case that fails the same way in `weir_process` on every attempt, without
    /// checkpoints or limits, within [`RSS_MIB`]; a case that differs says how with `..`.
    fn new(name: &'static str, faults: &'static str, guest: Guest, failure: Vec<String>) -> Case {
        Case {
            name,
            faults,
            guest,
            checkpoints: false,
            limits: "",
            call: "weir_process",
            failures_in_call: ATTEMPTS,
            failure,
            max_rss_mib: RSS_MIB,
        }
    }

    /// A component case: as [`Case::new`], failing in the world's `process`, within
    /// [`COMPONENT_RSS_MIB`].
    fn component(
        name: &'static str,
        faults: &'static str,
        guest: Guest,
        failure: Vec<String>,
    ) -> Case {
        Case {
            call: "process",
            max_rss_mib: COMPONENT_RSS_MIB,
            ..Case::new(name, faults, guest, failure)
        }
    }
}

/// The bound on the host's peak RSS for cases that do not aim at memory: the `weir` debug
/// binary itself takes about 30 MiB.
const RSS_MIB: u64 = 256;

/// Every hostile guest of the corpus. WAT numbers: 262144 is the 256 KiB memory; 4294967280 is
/// the pointer -16 read as unsigned.
fn corpus() -> Vec<Case> {
    let oob = |what: &str, at: &str| {
        vec![format!(
            "{what} at {at} lies outside the guest memory of 262144 bytes"
        )]
    };
    vec![
        Case::new(
            "trap (unreachable) in weir_process",
            "`unreachable` on the first batch",
            Guest::Wat(hostile(
                r#"(func (export "weir_process") (param i32 i32) (result i32) (unreachable))"#,
            )),
            vec!["guest trap: wasm `unreachable` instruction executed".into()],
        ),
        Case {
            limits: "call_timeout = \"200ms\"",
            ..Case::new(
                "endless loop in weir_process",
                "`loop br` forever, call_timeout 200ms",
                Guest::Wat(hostile(
                    r#"(func (export "weir_process") (param i32 i32) (result i32)
                      (loop $forever (br $forever)) (i32.const 0))"#,
                )),
                vec!["guest ran longer than the call time limit of 200ms".into()],
            )
        },
        Case {
            limits: "max_memory = \"64MiB\"",
            ..Case::new(
                "memory bomb: memory.grow and fill, 1 MiB at a time",
                "grows and touches memory without end, max_memory 64MiB",
                Guest::Wat(hostile(
                    r#"(func (export "weir_process") (param i32 i32) (result i32) (local $at i32)
                      (loop $more
                        ;; memory.grow returns the old size in pages: the new MiB starts there.
                        (local.set $at (i32.mul (memory.grow (i32.const 16)) (i32.const 65536)))
                        (memory.fill (local.get $at) (i32.const 171) (i32.const 1048576))
                        (br $more))
                      (i32.const 0))"#,
                )),
                vec![
                    "guest memory would grow to 67371008 bytes, past the limit of 67108864 bytes"
                        .into(),
                ],
            )
        },
        Case::new(
            "table bomb: 64 tables grown by a million filled elements each",
            "table.grow with a function reference, table after table",
            Guest::Wat(hostile(&table_bomb(64))),
            vec![
                "guest tables would hold 2097152 elements in all, past the limit of 1048576".into(),
            ],
        ),
        Case::new(
            "unbounded recursion in weir_process",
            "a function calling itself without end",
            Guest::Wat(hostile(
                r#"(func $deeper (param $n i64) (result i64)
                  (i64.add (call $deeper (i64.add (local.get $n) (i64.const 1))) (local.get $n)))
                (func (export "weir_process") (param i32 i32) (result i32)
                  (drop (call $deeper (i64.const 0))) (i32.const 0))"#,
            )),
            vec!["guest stack overflow".into()],
        ),
        Case::new(
            "out-of-bounds pointer to emit",
            "emit(-16, 100)",
            Guest::Wat(hostile(
                r#"(func (export "weir_process") (param i32 i32) (result i32)
                  (call $emit (i32.const -16) (i32.const 100)) (i32.const 0))"#,
            )),
            oob("`emit` batch", "4294967280..4294967280+100"),
        ),
        Case::new(
            "out-of-bounds length to emit",
            "emit(16, -1): the end overflows 32 bits",
            Guest::Wat(hostile(
                r#"(func (export "weir_process") (param i32 i32) (result i32)
                  (call $emit (i32.const 16) (i32.const -1)) (i32.const 0))"#,
            )),
            oob("`emit` batch", "16..16+4294967295"),
        ),
        Case {
            checkpoints: true,
            call: "weir_snapshot",
            ..Case::new(
                "out-of-bounds range to save_state",
                "save_state(262100, 100): straddles the end of memory",
                Guest::Wat(hostile(&format!(
                    r#"{PROCESS_OK}
                    (func (export "weir_snapshot") (param i64) (result i32)
                      (call $save_state (i32.const 262100) (i32.const 100)) (i32.const 0))"#
                ))),
                oob("`save_state` bytes", "262100..262100+100"),
            )
        },
        Case::new(
            "out-of-bounds message to fail",
            "fail(262144, 1): just past the end",
            Guest::Wat(hostile(
                r#"(func (export "weir_process") (param i32 i32) (result i32)
                  (call $fail (i32.const 262144) (i32.const 1)) (i32.const 0))"#,
            )),
            oob("`fail` message", "262144..262144+1"),
        ),
        Case::new(
            "out-of-bounds message to log",
            "log(0, -16, 16)",
            Guest::Wat(hostile(
                r#"(func (export "weir_process") (param i32 i32) (result i32)
                  (call $log (i32.const 0) (i32.const -16) (i32.const 16)) (i32.const 0))"#,
            )),
            oob("`log` message", "4294967280..4294967280+16"),
        ),
        Case::new(
            "out-of-bounds strings to env.abort",
            "abort(-16, 262150, 7, 3)",
            Guest::Wat(hostile(
                r#"(func (export "weir_process") (param i32 i32) (result i32)
                  (call $abort (i32.const -16) (i32.const 262150) (i32.const 7) (i32.const 3))
                  (i32.const 0))"#,
            )),
            vec![
                "guest aborted: <unreadable string at 4294967280: outside the guest memory> \
                 (at <unreadable string at 262150: outside the guest memory>:7:3)"
                    .into(),
            ],
        ),
        Case {
            call: "weir_alloc",
            ..Case::new(
                "weir_alloc returns a pointer outside memory",
                "weir_alloc returns -65536: the host must not write there",
                Guest::Wat(hostile(&format!(
                    r#"(func (export "weir_alloc") (param i32) (result i32) (i32.const -65536))
                    {PROCESS_OK}"#
                ))),
                vec![
                    "`weir_alloc` result at 4294901760..4294901760+".into(),
                    "lies outside the guest memory of 262144 bytes".into(),
                ],
            )
        },
        Case::new(
            "malformed output batch",
            "emits 8 bytes announcing one record",
            Guest::Wat(hostile(
                r#"(data (i32.const 1024) "\01\00\00\00\00\00\00\00")
                (func (export "weir_process") (param i32 i32) (result i32)
                  (call $emit (i32.const 1024) (i32.const 8)) (i32.const 0))"#,
            )),
            vec![
                "guest emitted a malformed batch: record 0 needs 8 bytes at offset 8 but the \
                 batch ends at 8"
                    .into(),
            ],
        ),
        Case {
            limits: "max_output = \"1MiB\"",
            // A copy of the batch alone would take 192 MiB.
            max_rss_mib: 128,
            ..Case::new(
                "huge output: one 192 MiB batch",
                "emit(16 MiB, 192 MiB) of untouched memory, max_output 1MiB",
                Guest::Wat(hostile(
                    r#"(func (export "weir_process") (param i32 i32) (result i32)
                      ;; 224 MiB in all, never touched: resident only if the host copies it.
                      (drop (memory.grow (i32.const 3580)))
                      (call $emit (i32.const 16777216) (i32.const 201326592)) (i32.const 0))"#,
                )),
                vec!["guest emitted more than 1048576 bytes in one call".into()],
            )
        },
        Case::new(
            "huge output: 1 MiB batches emitted without end",
            "emit of one valid 1 MiB batch in an endless loop, max_output 64MiB",
            Guest::Wat(hostile(
                r#"(func (export "weir_process") (param i32 i32) (result i32)
                  (drop (memory.grow (i32.const 28)))
                  ;; At 1 MiB: record count 1, port 0, timestamp 0, key_len 0,
                  ;; value_len 1 MiB - 24 (zeros).
                  (i32.store (i32.const 1048576) (i32.const 1))
                  (i32.store (i32.const 1048596) (i32.const 1048552))
                  (loop $again
                    (call $emit (i32.const 1048576) (i32.const 1048576)) (br $again))
                  (i32.const 0))"#,
            )),
            vec!["guest emitted more than 67108864 bytes in one call".into()],
        ),
        Case {
            // Before each batch counted an overhead and batches were joined, one attempt took
            // the host to 470 MiB; with the overhead only, three attempts to 158 MiB.
            max_rss_mib: 96,
            ..Case::new(
                "huge output: empty batches emitted without end",
                "emit of an 8-byte empty batch in an endless loop, max_output 64MiB",
                Guest::Wat(hostile(
                    r#"(func (export "weir_process") (param i32 i32) (result i32)
                      (loop $again (call $emit (i32.const 1024) (i32.const 8)) (br $again))
                      (i32.const 0))"#,
                )),
                vec!["guest emitted more than 67108864 bytes in one call".into()],
            )
        },
        Case {
            checkpoints: true,
            call: "weir_snapshot",
            ..Case::new(
                "snapshot that fails with a status",
                "weir_snapshot logs an error and returns 3",
                Guest::Wat(hostile(&format!(
                    r#"{PROCESS_OK}
                    {message}
                    (func (export "weir_snapshot") (param i64) (result i32)
                      (call $log (i32.const 0) (i32.const 1024) (i32.const {len})) (i32.const 3))"#,
                    message = data(1024, SNAPSHOT_ERROR),
                    len = SNAPSHOT_ERROR.len(),
                ))),
                vec![format!(
                    "guest returned status 3 (last error it logged: {SNAPSHOT_ERROR})"
                )],
            )
        },
        Case {
            checkpoints: true,
            limits: "max_state = \"256KiB\"",
            call: "weir_snapshot",
            ..Case::new(
                "snapshot past the state limit",
                "saves 2 × 200000 bytes, max_state 256KiB",
                Guest::Wat(hostile(&format!(
                    r#"{PROCESS_OK}
                    (func (export "weir_snapshot") (param i64) (result i32)
                      (call $save_state (i32.const 0) (i32.const 200000))
                      (call $save_state (i32.const 0) (i32.const 200000)) (i32.const 0))"#
                ))),
                vec!["guest saved a snapshot larger than 262144 bytes".into()],
            )
        },
        Case {
            checkpoints: true,
            call: "weir_restore",
            failures_in_call: ATTEMPTS - 1,
            ..Case::new(
                "restore that traps",
                "fails after a completed checkpoint; weir_restore is `unreachable`",
                Guest::Wat(hostile(&format!(
                    r#"{armed}
                    (func (export "weir_snapshot") (param i64) (result i32)
                      (call $save_state (i32.const 0) (i32.const 4)) (i32.const 0))
                    (func (export "weir_restore") (param i32 i32) (result i32) (unreachable))"#,
                    armed = armed()
                ))),
                vec!["guest trap: wasm `unreachable` instruction executed".into()],
            )
        },
        Case {
            checkpoints: true,
            call: "weir_restore",
            failures_in_call: ATTEMPTS - 1,
            ..Case::new(
                "restore given garbage",
                "snapshot saves a bogus length prefix; restore trusts it and copies",
                Guest::Wat(hostile(&format!(
                    r#"{armed}
                    (data (i32.const 1024) "\f0\ff\ff\7f")
                    (func (export "weir_snapshot") (param i64) (result i32)
                      (call $save_state (i32.const 1024) (i32.const 4)) (i32.const 0))
                    ;; Reads a length from the state and copies that many bytes after it.
                    (func (export "weir_restore") (param $ptr i32) (param $len i32) (result i32)
                      (memory.copy (i32.const 2048)
                        (i32.add (local.get $ptr) (i32.const 4)) (i32.load (local.get $ptr)))
                      (i32.const 0))"#,
                    armed = armed()
                ))),
                vec!["guest trap: out of bounds memory access".into()],
            )
        },
        Case::new(
            "Rust panic with a message (weir-sdk)",
            "`panic!` in process, through the SDK's panic hook",
            Guest::Built {
                path: guests::FLAKY,
                config: "fail_at=50",
            },
            vec![
                "guest failed:".into(),
                "flaky: injected failure at timestamp 50".into(),
            ],
        ),
    ]
}

/// The bound on the host's peak RSS for the component cases: an interpreter's instance holds
/// tens of MiB (CPython's heap, SpiderMonkey's), each attempt's own, on top of the host.
const COMPONENT_RSS_MIB: u64 = 512;

/// The hostile components of [`hostile_components_fail_by_name_under_the_restart_strategy_with_bounded_host_memory`],
/// for each language whose guest was built.
fn component_corpus() -> Vec<Case> {
    let mut cases = Vec::new();
    if let Some(path) = crate::support::foreign("hostile Python", guests::PY_HOSTILE) {
        let python = |config| Guest::Built { path, config };
        cases.extend([
            Case {
                limits: "call_timeout = \"500ms\"",
                ..Case::component(
                    "Python: endless loop in process",
                    "`while True: pass`, call_timeout 500ms",
                    python("loop"),
                    vec!["guest ran longer than the call time limit of 500ms".into()],
                )
            },
            Case {
                limits: "max_memory = \"160MiB\"",
                ..Case::component(
                    "Python: unbounded allocation in process",
                    "appends 1 MiB to a list forever, max_memory 160MiB",
                    python("allocate"),
                    vec!["past the limit of 167772160 bytes".into()],
                )
            },
            Case::component(
                "Python: open(\"/etc/passwd\") in process",
                "reads a file of the host",
                python("open-file"),
                vec!["FileNotFoundError".into(), "/etc/passwd".into()],
            ),
            Case::component(
                "Python: a TCP socket to 127.0.0.1:9 in process",
                "opens a socket and connects it",
                python("socket"),
                vec!["Error".into()],
            ),
        ]);
    }
    if let Some(path) = crate::support::foreign("hostile JavaScript", guests::JS_HOSTILE) {
        let javascript = |config| Guest::Built { path, config };
        cases.extend([
            Case {
                limits: "call_timeout = \"500ms\"",
                ..Case::component(
                    "JavaScript: endless loop in process",
                    "`for (;;) spins++`, call_timeout 500ms",
                    javascript("loop"),
                    vec!["guest ran longer than the call time limit of 500ms".into()],
                )
            },
            Case {
                limits: "max_memory = \"48MiB\"",
                ..Case::component(
                    "JavaScript: unbounded allocation in process",
                    "keeps every object it makes, max_memory 48MiB",
                    javascript("allocate"),
                    vec!["past the limit of 50331648 bytes".into()],
                )
            },
            Case::component(
                "JavaScript: fetch(\"http://127.0.0.1:9/\") in process",
                "reaches for the network",
                javascript("fetch"),
                vec!["guest trap".into()],
            ),
        ]);
    }
    cases
}

/// A guest with `tables` empty tables whose `weir_process` grows each by a million elements,
/// filled with a function reference (so that every element is written).
fn table_bomb(tables: usize) -> String {
    let mut body = String::from("(elem declare func $nothing)\n(func $nothing)\n");
    for t in 0..tables {
        writeln!(body, "(table $t{t} 0 funcref)").unwrap();
    }
    body.push_str(r#"(func (export "weir_process") (param i32 i32) (result i32)"#);
    for t in 0..tables {
        write!(
            body,
            "\n  (drop (table.grow $t{t} (ref.func $nothing) (i32.const 1048576)))"
        )
        .unwrap();
    }
    body.push_str("\n  (i32.const 0))");
    body
}

// ---------------------------------------------------------------------------------------------
// Running a job and watching its memory

/// How a corpus job ended.
struct Run {
    /// The process's exit and stderr.
    ended: Ended,
    /// The highest `VmHWM` seen while it ran, in KiB; `None` if it was never sampled.
    peak_rss_kib: Option<u64>,
}

/// The `VmHWM` (peak resident set) of process `pid`, in KiB, while it runs.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// Runs `weir run <job>` to its end (at most [`CLI_TIMEOUT`]), sampling its peak RSS every
/// 10 ms. The restart delays (100 ms) leave several samples between attempts, so the peak
/// of every attempt but the last is always seen; the last is the same guest failing the same
/// way.
fn run_watched(job: &Path, log: &Path) -> Run {
    let mut weir = Weir::run(job, &[], log);
    let mut peak: Option<u64> = None;
    weir.wait_until("the job to end", CLI_TIMEOUT, |w| {
        if let Some(kib) = peak_rss_kib(w.pid()) {
            peak = Some(peak.map_or(kib, |p| p.max(kib)));
        }
        false
    });
    Run {
        ended: weir.wait(CLI_TIMEOUT),
        peak_rss_kib: peak,
    }
}

/// The job of a corpus case: generator (20000 records at 2000/s, so that checkpoints complete
/// while it runs, and a guest that does not fail ends its job within 10 s) → `bad` → file
/// sink.
fn corpus_job(sandbox: &Sandbox, case: &Case) -> PathBuf {
    let (module, config) = match &case.guest {
        Guest::Wat(text) => {
            let path = sandbox.join("bad.wat");
            fs::write(&path, text).unwrap();
            (path.to_str().unwrap().to_string(), None)
        }
        Guest::Built { path, config } => (path.to_string(), Some(*config)),
    };
    let generator = GeneratorSpec {
        parallelism: 1,
        seed: 5,
        count: Some(20_000),
        rate: Some(2000.0),
        keys: 10,
    };
    let mut job = JobFile::new("isolation")
        .generator("gen", &generator)
        .operator("bad", &module, 1, config, ("gen", "forward"))
        // The corpus is about the guest's own calls, its snapshot exports among them; an image
        // would refuse the table bomb at load time instead of failing it when it runs.
        .state_capture("exports")
        .file_sink("out", &sandbox.out_dir(), 1, ("bad", "forward"))
        .restart(RESTART);
    if case.checkpoints {
        job = checkpointed(job, sandbox, "50ms", 1);
    }
    let mut text = job.to_toml();
    if !case.limits.is_empty() {
        write!(text, "\n[limits]\n{}\n", case.limits).unwrap();
    }
    let path = sandbox.job_path();
    fs::write(&path, text).unwrap();
    path
}

/// Checks how a corpus job ended; returns the failure it named, or what is wrong.
fn check(case: &Case, run: &Run) -> Result<String, String> {
    let stderr = &run.ended.stderr;
    if run.ended.code() != Some(EXIT_JOB_FAILED) {
        return Err(format!(
            "ended with {} instead of the job-failed code {EXIT_JOB_FAILED}",
            run.ended.status
        ));
    }
    let summary = stderr
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("failure:"))
        .map(str::trim)
        .ok_or("no `failure:` line in the summary")?;
    let named = format!(
        "task bad#0 failed: operator `bad` subtask 0 failed in {}: ",
        case.call
    );
    if !summary.starts_with(&named) {
        return Err(format!(
            "the failure does not start with {named:?}: {summary}"
        ));
    }
    if let Some(missing) = case.failure.iter().find(|n| !summary.contains(n.as_str())) {
        return Err(format!("the failure does not say {missing:?}: {summary}"));
    }
    // The strategy: one failure per attempt, each logged, and two restarts in the summary.
    let failures: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("job failed: task bad#0 failed"))
        .collect();
    let in_call = failures.iter().filter(|l| l.contains(&named)).count();
    if failures.len() != ATTEMPTS || in_call != case.failures_in_call {
        return Err(format!(
            "{} failures logged, {in_call} of them in {}; expected {ATTEMPTS} and {}",
            failures.len(),
            case.call,
            case.failures_in_call
        ));
    }
    if case.failures_in_call < ATTEMPTS && !failures[0].contains(ARMED_MESSAGE) {
        return Err(format!(
            "the first attempt should fail after a completed checkpoint: {}",
            failures[0]
        ));
    }
    let restarts = stderr
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("restarts:"))
        .map(str::trim);
    if restarts != Some("2") {
        return Err(format!("the summary says restarts: {restarts:?}, not 2"));
    }
    for n in 1..=2 {
        let line = format!("restarting (restart {n}, fixed-delay strategy)");
        if !stderr.contains(&line) {
            return Err(format!("no {line:?} in the log"));
        }
    }
    match run.peak_rss_kib {
        None => Err("the peak RSS was never sampled".into()),
        Some(kib) if kib > case.max_rss_mib * 1024 => Err(format!(
            "the host's peak RSS was {} MiB, above the bound of {} MiB",
            kib / 1024,
            case.max_rss_mib
        )),
        Some(_) => Ok(summary
            .trim_start_matches("task bad#0 failed: ")
            .to_string()),
    }
}

// ---------------------------------------------------------------------------------------------
// The corpus

#[test]
fn hostile_guests_fail_by_name_under_the_restart_strategy_with_bounded_host_memory() {
    run_corpus(&corpus());
}

/// The hostile operators written in Python and JavaScript — a component each, its behaviour
/// chosen by its config — loop forever, allocate without bound, and reach for a file or the
/// network: each fails by name within its limits under the restart strategy, the host's memory
/// bounded, as the WAT corpus does.
#[test]
fn hostile_components_fail_by_name_under_the_restart_strategy_with_bounded_host_memory() {
    let cases = component_corpus();
    // Compiled once into the module cache the jobs load from, so that no job spends its time,
    // or the host's memory bound, compiling an interpreter.
    for case in &cases {
        if let Guest::Built { path, .. } = case.guest {
            let sandbox = Sandbox::new("isolation-warm");
            let out = weir(&sandbox, &["validate", path]);
            out.assert_code(0, path);
        }
    }
    run_corpus(&cases);
}

/// Runs every case of a corpus in its own job and checks how each ended, reporting them all.
fn run_corpus(cases: &[Case]) {
    let mut problems = Vec::new();
    let mut table = String::new();
    for case in cases {
        let sandbox = Sandbox::new("isolation");
        let job = corpus_job(&sandbox, case);
        let started = Instant::now();
        let run = run_watched(&job, &sandbox.join("weir.log"));
        let took = started.elapsed();
        let peak_mib = run.peak_rss_kib.map_or(0, |kib| kib.div_ceil(1024));
        match check(case, &run) {
            Ok(failure) => {
                writeln!(
                    table,
                    "  {:<55} peak RSS {peak_mib:>3} MiB (bound {}), {:.1} s: {failure}",
                    case.name,
                    case.max_rss_mib,
                    took.as_secs_f64()
                )
                .unwrap();
                report::record(&report::Row {
                    area: "isolation",
                    scenario: case.name,
                    rounds: ATTEMPTS as u64,
                    faults: case.faults,
                    result: &format!(
                        "job failed after 2 restarts naming `bad#0`: {failure}; host peak RSS \
                         {peak_mib} MiB (bound {} MiB)",
                        case.max_rss_mib
                    ),
                });
            }
            Err(problem) => problems.push(format!(
                "{}: {problem}\nstderr of weir:\n{}",
                case.name, run.ended.stderr
            )),
        }
    }
    eprintln!("hostile guests:\n{table}");
    assert!(
        problems.is_empty(),
        "{} of {} hostile guests did not fail as they should:\n\n{}",
        problems.len(),
        cases.len(),
        problems.join("\n\n")
    );
}

// ---------------------------------------------------------------------------------------------
// The import surface

/// Runs `weir ARGS` to its end, at most [`CLI_TIMEOUT`] (then kills it and fails); its output
/// goes through files in `sandbox`, so nothing blocks on a full pipe.
fn weir(sandbox: &Sandbox, args: &[&str]) -> CliOutput {
    weir_command(sandbox, args, "", &[("RUST_LOG", "warn")])
}

/// Imports a guest might try, by what they would reach: `(reach, module, name, import type)`.
const FORBIDDEN_IMPORTS: &[(&str, &str, &str, &str)] = &[
    (
        "files",
        "wasi_snapshot_preview1",
        "fd_write",
        "(func (param i32 i32 i32 i32) (result i32))",
    ),
    (
        "files",
        "wasi_snapshot_preview1",
        "path_open",
        "(func (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32))",
    ),
    (
        "files",
        "wasi_unstable",
        "fd_read",
        "(func (param i32 i32 i32 i32) (result i32))",
    ),
    (
        "the network",
        "wasi_snapshot_preview1",
        "sock_open",
        "(func (param i32 i32 i32) (result i32))",
    ),
    (
        "the network",
        "wasi_snapshot_preview1",
        "sock_accept",
        "(func (param i32 i32 i32) (result i32))",
    ),
    (
        "the clock",
        "wasi_snapshot_preview1",
        "clock_time_get",
        "(func (param i32 i64 i32) (result i32))",
    ),
    ("the clock", "weir", "now", "(func (result i64))"),
    ("the clock", "env", "Date.now", "(func (result f64))"),
    (
        "randomness",
        "wasi_snapshot_preview1",
        "random_get",
        "(func (param i32 i32) (result i32))",
    ),
    ("randomness", "env", "seed", "(func (result f64))"),
    (
        "the process",
        "wasi_snapshot_preview1",
        "proc_exit",
        "(func (param i32))",
    ),
    (
        "host or another guest's memory",
        "env",
        "memory",
        "(memory 1)",
    ),
    ("a host table", "env", "table", "(table 1 funcref)"),
    ("a host global", "env", "counter", "(global i32)"),
    (
        "another env function",
        "env",
        "trace",
        "(func (param i32 i32 f64 f64 f64 f64 f64))",
    ),
    (
        "a provided function under another module",
        "env",
        "emit",
        "(func (param i32 i32))",
    ),
    (
        "a provided function under another module",
        "weir",
        "abort",
        "(func (param i32 i32 i32 i32))",
    ),
];

/// A valid operator, except that it also imports `module`.`name` as `ty`.
fn importing(module: &str, name: &str, ty: &str) -> String {
    format!(
        r#"(module
  (import "{module}" "{name}" {ty})
  (memory (export "memory") 1)
  (func (export "weir_abi_version") (result i32) (i32.const 1))
  (func (export "weir_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "weir_process") (param i32 i32) (result i32) (i32.const 0)))"#
    )
}

#[test]
fn modules_importing_anything_outside_the_abi_are_refused_naming_the_import() {
    let sandbox = Sandbox::new("isolation-imports");
    let mut problems = Vec::new();
    for (reach, module, name, ty) in FORBIDDEN_IMPORTS {
        let path = sandbox.join("forbidden.wat");
        fs::write(&path, importing(module, name, ty)).unwrap();
        let out = weir(&sandbox, &["validate", path.to_str().unwrap()]);
        // WASI imports are one problem that lists them; any other import is its own.
        let named = if module.starts_with("wasi") {
            format!(
                "imports WASI, which the host does not provide (an operator talks to the host \
                 only through the `weir` imports of docs/ABI.md §4): 1 import from \
                 `{module}`: {name};"
            )
        } else {
            format!("imports `{module}`.`{name}`, which the host does not provide")
        };
        if out.code != Some(EXIT_INVALID_MODULE) || !out.stdout.contains(&named) {
            problems.push(format!(
                "{module}.{name} ({reach}): `weir validate` exited {:?}, stdout:\n{}",
                out.code, out.stdout
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));

    // A job is refused the same way before any guest code runs: the clock, as an example.
    let path = sandbox.join("clock.wat");
    fs::write(
        &path,
        importing(
            "wasi_snapshot_preview1",
            "clock_time_get",
            "(func (param i32 i64 i32) (result i32))",
        ),
    )
    .unwrap();
    let generator = GeneratorSpec {
        parallelism: 1,
        seed: 1,
        count: Some(10),
        rate: None,
        keys: 1,
    };
    JobFile::new("clock")
        .generator("gen", &generator)
        .operator("clock", path.to_str().unwrap(), 1, None, ("gen", "forward"))
        .file_sink("out", &sandbox.out_dir(), 1, ("clock", "forward"))
        .restart(RESTART)
        .write(&sandbox.job_path());
    let out = weir(&sandbox, &["run", sandbox.job_path().to_str().unwrap()]);
    assert_eq!(
        out.code,
        Some(EXIT_CANNOT_START),
        "a job with a module importing the clock must not start; stderr:\n{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("imports WASI, which the host does not provide")
            && out
                .stderr
                .contains("`wasi_snapshot_preview1`: clock_time_get"),
        "{}",
        out.stderr
    );
    report::record(&report::Row {
        area: "isolation",
        scenario: "modules importing files, network, clock, randomness, memory, other functions",
        rounds: FORBIDDEN_IMPORTS.len() as u64 + 1,
        faults: "one forbidden import per module (WASI fd/path/sock/clock/random/proc_exit, \
                 env memory/table/global/seed/trace, provided names under other modules)",
        result: "each refused at load by `weir validate` naming the import; a job with \
                 `clock_time_get` does not start (exit 3) and names it",
    });
}

/// The imports `docs/ABI.md` §4 documents, as `(module, name)`: the first column of the tables
/// of that section; a bare name is in module `weir`, `env.abort` names its module.
fn documented_imports() -> BTreeSet<(String, String)> {
    let abi = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ABI.md"))
        .expect("docs/ABI.md");
    let section = abi
        .split("\n## 4. Imports")
        .nth(1)
        .and_then(|rest| rest.split("\n## 5.").next())
        .expect("docs/ABI.md has a section `## 4. Imports`");
    section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|cell| cell.split_once('`'))
        .map(|(import, _)| match import.split_once('.') {
            Some((module, name)) => (module.to_string(), name.to_string()),
            None => ("weir".to_string(), import.to_string()),
        })
        .collect()
}

#[test]
fn the_host_provides_exactly_the_imports_abi_md_lists() {
    let provided: BTreeSet<(String, String)> = weir::wasm::provided_imports()
        .map(|(module, name)| (module.to_string(), name.to_string()))
        .collect();
    let documented = documented_imports();
    assert_eq!(
        provided, documented,
        "the host's imports (left) and docs/ABI.md §4 (right) differ"
    );
    // None of them is a clock, randomness, a file or a socket: the names say what they do, and
    // docs/ABI.md §4 says the rest; this pins the set those words are about.
    let names: Vec<&str> = provided.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "abort",
            "current_time",
            "emit",
            "emit_to",
            "fail",
            "log",
            "save_state",
            "state_get",
            "state_result",
            "state_write",
            "timer_delete",
            "timer_set"
        ]
    );
}

/// A component's standard output reaches the job's log line by line, tagged with the operator
/// and subtask, and a flood is cut at the rate docs/COMPONENTS.md gives, saying so: the Python
/// guest prints 150 lines in one call.
#[test]
fn a_components_prints_reach_the_log_under_its_name_cut_at_the_rate() {
    let Some(path) = crate::support::foreign("hostile Python", guests::PY_HOSTILE) else {
        return;
    };
    let sandbox = Sandbox::new("isolation-print");
    let input = sandbox.join("input.jsonl");
    fs::write(&input, "{\"key\":\"k\",\"value\":\"v\",\"timestamp\":1}\n").unwrap();
    let out = weir_command(
        &sandbox,
        &[
            "test",
            path,
            "--config",
            "print",
            "--operator",
            "noisy",
            "--input",
            input.to_str().unwrap(),
        ],
        "",
        &[("RUST_LOG", "info")],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let logged: Vec<&str> = out
        .stderr
        .lines()
        .filter(|line| line.contains("of the flood"))
        .collect();
    let limit = weir::wasm::component::MAX_LOG_LINES_PER_SECOND as usize;
    assert_eq!(logged.len(), limit, "{}", out.stderr);
    assert!(
        logged[0].contains("line 0 of the flood")
            && logged[0].contains("operator=\"noisy\"")
            && logged[0].contains("subtask=0"),
        "{}",
        logged[0]
    );
    assert!(
        out.stderr
            .contains(&format!("more than {limit} lines a second")),
        "{}",
        out.stderr
    );
}

/// The WASI interfaces `docs/COMPONENTS.md` says a component may import, with what each gives:
/// the rows of its table after the comment naming `ALLOWED`.
fn documented_wasi() -> Vec<(String, String)> {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/COMPONENTS.md"))
            .expect("docs/COMPONENTS.md");
    let table = doc
        .split("`weir::wasm::component::ALLOWED`")
        .nth(1)
        .expect("docs/COMPONENTS.md names the host's ALLOWED table");
    table
        .lines()
        .skip_while(|line| !line.starts_with('|'))
        .take_while(|line| line.starts_with('|'))
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|row| row.split_once("` | "))
        .map(|(name, gives)| (name.to_string(), gives.trim_end_matches(" |").to_string()))
        .collect()
}

/// A component's authority is the world's `host` interface and the WASI the host links with
/// nothing to reach; the list the host checks imports against and the one the document gives
/// users are the same, word for word, and neither grants a file, a socket or the environment.
#[test]
fn the_wasi_a_component_may_import_is_exactly_what_components_md_lists() {
    let allowed: Vec<(String, String)> = weir::wasm::component::ALLOWED
        .iter()
        .map(|interface| (interface.name.to_string(), interface.gives.to_string()))
        .collect();
    assert_eq!(
        allowed,
        documented_wasi(),
        "the host's ALLOWED (left) and docs/COMPONENTS.md (right) differ"
    );
    for (name, gives) in &allowed {
        if name.starts_with("wasi:filesystem") || name.starts_with("wasi:sockets") {
            assert!(
                gives.contains("nothing") || gives.contains("refused"),
                "{name} must give nothing: {gives}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Memory

/// The secret the probes write and look for: 8 bytes that no record, batch or data segment
/// contains. It lives in the module's code (an `i64.const`), never in a data segment, so an
/// instance's memory holds it only if that instance wrote it.
const SECRET: &str = "0x5ec2e7c0ffeed00d";

/// The probe guest: passes its input through, and writes or scans its memory by the first
/// byte of its config.
///
/// - `w`rite: on init, grows its memory to 4 MiB and writes the secret over every 8 bytes of
///   it from 4 KiB on (the first 4 KiB hold its messages); logs "wrote the secret over its
///   memory".
/// - `s`can: on the 1st, 2nd, 4th, 8th… batch, scans every 8 bytes of its whole memory (grown
///   to 4 MiB too) and fails with "secret found in its memory" if the secret is there; logs
///   "scanned its whole memory: no secret" otherwise.
/// - `b`y subtask: subtask 0 writes, the others scan.
/// - `x`: writes, then scans — its own memory: the control that the scan finds the secret.
/// - `f`resh: on init scans (its memory must be fresh), then writes, then traps on the first
///   batch; a restart makes a new instance, which must scan clean again.
fn probe() -> String {
    format!(
        r#"(module
  (import "weir" "emit" (func $emit (param i32 i32)))
  (import "weir" "fail" (func $fail (param i32 i32)))
  (import "weir" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 4)
  {wrote_data}
  {clean_data}
  {found_data}
  (global $role (mut i32) (i32.const 0))
  (global $calls (mut i32) (i32.const 0))
  (func (export "weir_abi_version") (result i32) (i32.const 1))
  (func (export "weir_alloc") (param $len i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $len) (i32.const 131072))
      (then (i32.const 0))
      (else (i32.const 65536))))
  ;; Grows the memory to 4 MiB (64 pages).
  (func $grow
    (if (i32.lt_u (memory.size) (i32.const 64))
      (then (drop (memory.grow (i32.sub (i32.const 64) (memory.size)))))))
  (func $write (local $at i32)
    (call $grow)
    (local.set $at (i32.const 4096))
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $at) (i32.mul (memory.size) (i32.const 65536))))
      (i64.store (local.get $at) (i64.const {SECRET}))
      (local.set $at (i32.add (local.get $at) (i32.const 8)))
      (br $next)))
    (call $log (i32.const 2) (i32.const 1024) (i32.const {wrote_len})))
  (func $scan (local $at i32)
    (call $grow)
    (block $done (loop $next
      (br_if $done (i32.ge_u (local.get $at) (i32.mul (memory.size) (i32.const 65536))))
      (if (i64.eq (i64.load (local.get $at)) (i64.const {SECRET}))
        (then (call $fail (i32.const 1280) (i32.const {found_len}))))
      (local.set $at (i32.add (local.get $at) (i32.const 8)))
      (br $next)))
    (call $log (i32.const 2) (i32.const 1152) (i32.const {clean_len})))
  ;; Init message: subtask at 0, name_len at 8, the name at 12, config_len, then the config.
  (func (export "weir_init") (param $ptr i32) (param $len i32) (result i32)
    (global.set $role (i32.load8_u
      (i32.add (i32.add (local.get $ptr) (i32.const 16)) (i32.load offset=8 (local.get $ptr)))))
    (if (i32.eq (global.get $role) (i32.const 98)) ;; b: subtask 0 writes, the others scan
      (then (global.set $role
        (select (i32.const 119) (i32.const 115) (i32.eqz (i32.load (local.get $ptr)))))))
    (if (i32.eq (global.get $role) (i32.const 119)) (then (call $write)))          ;; w
    (if (i32.eq (global.get $role) (i32.const 102)) (then (call $scan) (call $write))) ;; f
    (i32.const 0))
  (func (export "weir_process") (param $ptr i32) (param $len i32) (result i32)
    (global.set $calls (i32.add (global.get $calls) (i32.const 1)))
    (if (i32.eq (global.get $role) (i32.const 102)) (then (unreachable)))          ;; f
    (if (i32.eq (global.get $role) (i32.const 120)) (then (call $write) (call $scan))) ;; x
    ;; s: scans on calls 1, 2, 4, 8, ...
    (if (i32.and (i32.eq (global.get $role) (i32.const 115))
          (i32.eqz (i32.and (global.get $calls) (i32.sub (global.get $calls) (i32.const 1)))))
      (then (call $scan)))
    ;; Passes the batch on, as an output batch (port 0).
    (i32.store offset=4 (local.get $ptr) (i32.const 0))
    (call $emit (local.get $ptr) (local.get $len))
    (i32.const 0)))"#,
        wrote_data = data(1024, PROBE_WROTE),
        clean_data = data(1152, PROBE_CLEAN),
        found_data = data(1280, PROBE_FOUND),
        wrote_len = PROBE_WROTE.len(),
        clean_len = PROBE_CLEAN.len(),
        found_len = PROBE_FOUND.len(),
    )
}

/// What a probe logs when it has written the secret.
const PROBE_WROTE: &str = "wrote the secret over its memory";
/// What a probe logs when a scan found nothing.
const PROBE_CLEAN: &str = "scanned its whole memory: no secret";
/// What a probe fails with when a scan found the secret.
const PROBE_FOUND: &str = "secret found in its memory";

#[test]
fn guests_cannot_read_each_others_memory_nor_an_earlier_instances() {
    let sandbox = Sandbox::new("isolation-memory");
    let probe_path = sandbox.join("probe.wat");
    fs::write(&probe_path, probe()).unwrap();
    let probe_path = probe_path.to_str().unwrap();
    let generator = GeneratorSpec {
        parallelism: 1,
        seed: 3,
        count: Some(4000),
        rate: Some(4000.0),
        keys: 16,
    };

    // The control: the scanner, run in the instance that wrote the secret, finds it.
    let control = Sandbox::new("isolation-memory-control");
    let ended = JobFile::new("control")
        .generator("gen", &generator)
        .operator("self", probe_path, 1, Some("x"), ("gen", "forward"))
        .file_sink("out", &control.out_dir(), 1, ("self", "forward"))
        .restart("strategy = \"none\"")
        .run_in(&control);
    ended.assert_code(EXIT_JOB_FAILED, "the control job");
    assert!(
        ended.stderr.contains(&format!(
            "operator `self` subtask 0 failed in weir_process: guest failed: {PROBE_FOUND}"
        )),
        "the scan must find the secret in the memory that holds it:\n{}",
        ended.stderr
    );

    // Two operators of two subtasks: `spy#0` writes the secret over its memory, `spy#1`,
    // `peer#0` and `peer#1` scan theirs, again and again while the job runs.
    let ended = JobFile::new("memory")
        .generator("gen", &generator)
        .operator("spy", probe_path, 2, Some("b"), ("gen", "rebalance"))
        .operator("peer", probe_path, 2, Some("s"), ("spy", "rebalance"))
        .file_sink("out", &sandbox.out_dir(), 1, ("peer", "rebalance"))
        .restart("strategy = \"none\"")
        .run_in(&sandbox);
    ended.assert_code(0, "no scanner may find the secret");
    let lines: Vec<&str> = ended.stderr.lines().collect();
    let wrote = lines
        .iter()
        .position(|l| l.contains(PROBE_WROTE) && l.contains("spy"))
        .unwrap_or_else(|| panic!("spy#0 did not write the secret:\n{}", ended.stderr));
    for (operator, subtask) in [("spy", 1), ("peer", 0), ("peer", 1)] {
        let scans_after = lines[wrote..]
            .iter()
            .filter(|l| {
                l.contains(PROBE_CLEAN)
                    && l.contains(&format!("operator=\"{operator}\""))
                    && l.contains(&format!("subtask={subtask}"))
            })
            .count();
        assert!(
            scans_after > 0,
            "{operator}#{subtask} never scanned after spy#0 wrote:\n{}",
            ended.stderr
        );
    }

    // A restarted instance starts from fresh memory: `fresh` scans on init, writes the
    // secret, then traps; each of the two restarts scans clean again before failing the same
    // way.
    let fresh = Sandbox::new("isolation-memory-fresh");
    let ended = JobFile::new("fresh")
        .generator("gen", &generator)
        .operator("fresh", probe_path, 1, Some("f"), ("gen", "forward"))
        .file_sink("out", &fresh.out_dir(), 1, ("fresh", "forward"))
        .restart(RESTART)
        .run_in(&fresh);
    ended.assert_code(EXIT_JOB_FAILED, "the fresh-memory job");
    let traps = ended
        .stderr
        .lines()
        .filter(|l| {
            l.contains("job failed: task fresh#0 failed")
                && l.contains("weir_process: guest trap: wasm `unreachable`")
        })
        .count();
    let clean = ended.stderr.matches(PROBE_CLEAN).count();
    assert_eq!(
        (traps, clean),
        (ATTEMPTS, ATTEMPTS),
        "every attempt must scan clean, then trap:\n{}",
        ended.stderr
    );
    report::record(&report::Row {
        area: "isolation",
        scenario: "guest memory: other subtasks, other operators, restarted instances",
        rounds: 3,
        faults: "one instance writes an 8-byte secret over its 4 MiB memory; three others scan \
                 every 8 bytes of theirs; a restarted instance scans before writing",
        result: "no scan finds the secret; the same scan in the writer's instance does",
    });
}
