//! Tests of the wasm layer: the hand-written `count` guest end to end, and a corpus of
//! misbehaving guests, each of which must yield its own typed failure — no panic, no hang.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use proptest::prelude::*;
use wasmtime::Trap;
use weir_abi::{Batch, BatchBuilder, DecodeError, InitMessage};

use super::imports::{assemblyscript_string, guest_range, message};
use super::*;
use crate::checkpoint::format::HEADER_LEN;
use crate::checkpoint::layout::CheckpointLayout;
use crate::checkpoint::storage::{CheckpointStorage, LocalStorage};
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};

// ---------------------------------------------------------------------------------------------
// Helpers

/// An engine and the limits every module it loads here runs under, so a test states its limits
/// once, as a job's operator does.
struct TestEngine {
    /// The engine.
    engine: WasmEngine,
    /// The limits of every module loaded through this.
    limits: GuestLimits,
}

impl TestEngine {
    /// Loads `source` checkpointed as `capture` says, its instances under this engine's limits.
    fn load(
        &self,
        source: ModuleSource<'_>,
        capture: StateCapture,
    ) -> Result<OperatorModule, ModuleError> {
        let options = LoadOptions {
            capture,
            limits: self.limits,
            ..LoadOptions::default()
        };
        OperatorModule::load(&self.engine, source, options)
    }

    fn module_cache_counts(&self) -> Option<(usize, usize)> {
        self.engine.module_cache_counts()
    }
}

/// The default limits, except a short call timeout so a hung guest fails fast.
fn test_limits() -> GuestLimits {
    GuestLimits {
        call_timeout: Duration::from_secs(5),
        ..GuestLimits::default()
    }
}

/// An engine with the default limits, except a short call timeout so a hung guest fails fast.
fn engine() -> TestEngine {
    engine_with(test_limits())
}

fn engine_with(limits: GuestLimits) -> TestEngine {
    TestEngine {
        engine: WasmEngine::new().unwrap(),
        limits,
    }
}

fn context(subtask: u32) -> InstanceContext {
    InstanceContext {
        operator: "test-op".to_string(),
        subtask,
        parallelism: 2,
    }
}

/// The imports and memory most fixtures share.
const PRELUDE: &str = r#"
  (import "weir" "emit" (func $emit (param i32 i32)))
  (import "weir" "save_state" (func $save_state (param i32 i32)))
  (import "weir" "fail" (func $fail (param i32 i32)))
  (import "weir" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 2)
"#;

/// `weir_abi_version` returning 1.
const VERSION: &str = r#"(func (export "weir_abi_version") (result i32) (i32.const 1))"#;

/// `weir_alloc` handing out one fixed buffer at 4096 (fixtures get small inputs).
const ALLOC: &str = r#"(func (export "weir_alloc") (param i32) (result i32) (i32.const 4096))"#;

/// `weir_process` that does nothing.
const PROCESS_OK: &str =
    r#"(func (export "weir_process") (param i32 i32) (result i32) (i32.const 0))"#;

/// A module made of `parts`.
fn wat(parts: &[&str]) -> String {
    format!("(module\n{}\n)", parts.join("\n"))
}

/// A module that does nothing and also imports `imports`: what a load must refuse, or accept,
/// for its imports alone.
fn importing(imports: &[&str]) -> String {
    let mut parts = imports.to_vec();
    parts.extend([PRELUDE, VERSION, ALLOC, PROCESS_OK]);
    wat(&parts)
}

/// A well-formed guest (prelude, version, alloc) with the functions in `body`.
fn fixture(body: &str) -> String {
    wat(&[PRELUDE, VERSION, ALLOC, body])
}

fn load(engine: &TestEngine, source: &str) -> OperatorModule {
    engine
        .load(
            ModuleSource::bytes("fixture.wat", source.as_bytes()),
            StateCapture::Exports,
        )
        .unwrap()
}

fn load_err(source: &str) -> ModuleError {
    engine()
        .load(
            ModuleSource::bytes("fixture.wat", source.as_bytes()),
            StateCapture::Exports,
        )
        .unwrap_err()
}

fn instance(source: &str) -> GuestInstance {
    load(&engine(), source)
        .instantiate(context(0), b"")
        .unwrap()
}

/// A batch for input port `port` holding `records`.
fn batch(port: u32, records: &[(&str, &str, i64)]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(port);
    for (key, value, ts) in records {
        builder.push(key.as_bytes(), value.as_bytes(), *ts);
    }
    builder.into_bytes()
}

type Row = (Vec<u8>, Vec<u8>, i64);

/// The records of `batches`, checking each is a port-0 batch.
fn rows(batches: &[Vec<u8>]) -> Vec<Row> {
    batches
        .iter()
        .flat_map(|bytes| {
            let batch = Batch::decode(bytes).unwrap();
            assert_eq!(batch.port(), 0);
            batch
                .iter()
                .map(|r| (r.key.to_vec(), r.value.to_vec(), r.timestamp))
                .collect::<Vec<_>>()
        })
        .collect()
}

fn row(key: &str, value: &str, ts: i64) -> Row {
    (key.as_bytes().to_vec(), value.as_bytes().to_vec(), ts)
}

/// The failure of a process call on a fresh instance of `source`.
fn process_failure(source: &str) -> GuestError {
    instance(source)
        .process(&batch(0, &[("k", "v", 1)]))
        .unwrap_err()
}

// ---------------------------------------------------------------------------------------------
// examples/wat/count.wat

fn count_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples/wat/count.wat")
}

fn count_module(engine: &TestEngine) -> OperatorModule {
    engine
        .load(ModuleSource::file(&count_path()), StateCapture::Exports)
        .unwrap()
}

#[test]
fn count_emits_the_running_count_of_each_key_as_decimal_text() {
    let engine = engine();
    let module = count_module(&engine);
    assert_eq!(
        module.capabilities(),
        Capabilities {
            snapshot: true,
            restore: true,
            ..Capabilities::default()
        }
    );
    let mut count = module.instantiate(context(1), b"").unwrap();
    let out = count
        .process(&batch(3, &[("a", "x", 10), ("b", "y", 11), ("a", "z", 12)]))
        .unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(
        rows(&out),
        vec![row("a", "1", 10), row("b", "1", 11), row("a", "2", 12)]
    );

    let many: Vec<(&str, &str, i64)> = (0..12).map(|i| ("", "", i)).collect();
    let out = count.process(&batch(0, &many)).unwrap();
    let values: Vec<Vec<u8>> = rows(&out).into_iter().map(|(_, v, _)| v).collect();
    let expected: Vec<Vec<u8>> = (1..=12).map(|n: u32| n.to_string().into_bytes()).collect();
    assert_eq!(values, expected);

    assert!(
        count.process(&batch(0, &[])).unwrap().is_empty(),
        "an empty input emits nothing"
    );
    assert!(count.finish().unwrap().is_empty());
    count.checkpoint_complete(CheckpointId(1)).unwrap();
}

#[test]
fn count_restored_from_a_snapshot_matches_an_uninterrupted_instance() {
    let engine = engine();
    let module = count_module(&engine);
    let batches = [
        batch(0, &[("apple", "1", 1), ("pear", "2", 2)]),
        batch(0, &[("apple", "3", 3), ("fig", "4", 4), ("apple", "5", 5)]),
        batch(1, &[("pear", "6", 6), ("kiwi", "7", 7)]),
        batch(0, &[("apple", "8", 8), ("kiwi", "9", 9), ("", "10", 10)]),
    ];

    let mut steady = module.instantiate(context(0), b"").unwrap();
    let mut interrupted = module.instantiate(context(0), b"").unwrap();
    let mut expected = Vec::new();
    for b in &batches {
        expected.push(steady.process(b).unwrap());
    }

    let mut got = Vec::new();
    for b in &batches[..2] {
        got.push(interrupted.process(b).unwrap());
    }
    let state = interrupted.snapshot(CheckpointId(7)).unwrap();
    assert_eq!(&state[..4], b"WCNT");
    drop(interrupted);

    let mut restored = module.instantiate(context(0), b"").unwrap();
    restored.restore(&state).unwrap();
    for b in &batches[2..] {
        got.push(restored.process(b).unwrap());
    }
    assert_eq!(got, expected, "byte-identical output batches");
    assert_eq!(
        restored.snapshot(CheckpointId(8)).unwrap(),
        steady.snapshot(CheckpointId(8)).unwrap()
    );
}

#[test]
fn count_restores_an_empty_state_and_refuses_garbage_with_a_message() {
    let engine = engine();
    let module = count_module(&engine);

    let mut fresh = module.instantiate(context(0), b"").unwrap();
    let empty = fresh.snapshot(CheckpointId(1)).unwrap();
    assert_eq!(empty.len(), 16, "a header and no entries");
    let mut restored = module.instantiate(context(0), b"").unwrap();
    restored.restore(&empty).unwrap();
    restored.restore(&[]).unwrap();
    assert_eq!(
        rows(&restored.process(&batch(0, &[("k", "", 1)])).unwrap()),
        vec![row("k", "1", 1)]
    );

    let mut valid = module.instantiate(context(0), b"").unwrap();
    valid.process(&batch(0, &[("key", "", 1)])).unwrap();
    let state = valid.snapshot(CheckpointId(2)).unwrap();

    let cases: Vec<(Vec<u8>, &str)> = vec![
        (b"garbage!garbage!garbage".to_vec(), "bad magic"),
        (b"WCNT".to_vec(), "shorter than its 16-byte header"),
        (state[..state.len() - 1].to_vec(), "length does not match"),
        ([&state[..], b"x"].concat(), "length does not match"),
        (
            {
                let mut wrong = state.clone();
                wrong[4] = 9;
                wrong
            },
            "unsupported count snapshot version",
        ),
        (
            {
                let mut wrong = state.clone();
                wrong[16] = 200; // first entry's key_len runs past the end
                wrong
            },
            "entries are corrupt",
        ),
    ];
    for (garbage, expected) in cases {
        let mut guest = module.instantiate(context(0), b"").unwrap();
        let err = guest.restore(&garbage).unwrap_err();
        assert_eq!(err.call, "weir_restore");
        match &err.failure {
            GuestFailure::Failed { message } => {
                assert!(message.starts_with("count: "), "{message}");
                assert!(
                    message.contains(expected),
                    "{message} should say {expected}"
                );
            }
            other => panic!("expected a fail message, got {other:?}"),
        }
    }
}

/// What `count` should emit: the model the guest is checked against.
fn count_model(counts: &mut HashMap<Vec<u8>, u64>, records: &[Row]) -> Vec<Row> {
    records
        .iter()
        .map(|(key, _, ts)| {
            let n = counts.entry(key.clone()).or_default();
            *n += 1;
            (key.clone(), n.to_string().into_bytes(), *ts)
        })
        .collect()
}

fn arb_batches() -> impl Strategy<Value = Vec<Vec<Row>>> {
    let key = prop::sample::select(vec![&b""[..], b"a", b"b", b"ab", b"ba", b"long key \xff"]);
    let record = (key, prop::collection::vec(any::<u8>(), 0..8), any::<i64>())
        .prop_map(|(k, v, ts)| (k.to_vec(), v, ts));
    prop::collection::vec(prop::collection::vec(record, 0..12), 1..6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn count_matches_its_model_across_any_snapshot_and_restore(
        batches in arb_batches(),
        cut in any::<prop::sample::Index>(),
    ) {
        thread_local! {
            static MODULE: OperatorModule = count_module(&engine());
        }
        let cut = cut.index(batches.len() + 1);
        let mut model = HashMap::new();
        MODULE.with(|module| {
            let mut guest = module.instantiate(context(0), b"").unwrap();
            for (i, records) in batches.iter().enumerate() {
                if i == cut {
                    let state = guest.snapshot(CheckpointId(i as u64 + 1)).unwrap();
                    guest = module.instantiate(context(0), b"").unwrap();
                    guest.restore(&state).unwrap();
                }
                let mut input = BatchBuilder::new(0);
                for (k, v, ts) in records {
                    input.push(k, v, *ts);
                }
                let out = guest.process(input.as_bytes()).unwrap();
                prop_assert_eq!(rows(&out), count_model(&mut model, records));
            }
            Ok(())
        })?;
    }
}

// ---------------------------------------------------------------------------------------------
// Modules refused at load time

#[test]
fn refuses_a_module_missing_a_required_export() {
    let err = load_err(&wat(&[PRELUDE, VERSION, ALLOC]));
    assert!(matches!(
        err.problem,
        ModuleProblem::MissingExport {
            name: "weir_process",
            ..
        }
    ));
    assert_eq!(err.module, "fixture.wat");
    let text = err.to_string();
    assert!(text.starts_with("module `fixture.wat`: missing the required export `weir_process`"));
    assert!(text.contains("a function (i32, i32) -> i32"), "{text}");
}

#[test]
fn refuses_an_export_with_the_wrong_signature() {
    let err = load_err(&fixture(
        r#"(func (export "weir_process") (param i32) (result i32) (i32.const 0))"#,
    ));
    match &err.problem {
        ModuleProblem::WrongSignature {
            name: "weir_process",
            expected,
            found,
        } => {
            assert_eq!(expected, "a function (i32, i32) -> i32");
            assert_eq!(found, "a function (i32) -> i32");
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = load_err(&fixture(&format!(
        "{PROCESS_OK} (global (export \"weir_snapshot\") i32 (i32.const 0))"
    )));
    assert!(matches!(
        &err.problem,
        ModuleProblem::WrongSignature { name: "weir_snapshot", found, .. } if found == "a global"
    ));
}

#[test]
fn refuses_an_unsupported_abi_version_naming_both_versions() {
    let source = wat(&[
        PRELUDE,
        ALLOC,
        PROCESS_OK,
        r#"(func (export "weir_abi_version") (result i32) (i32.const 7))"#,
    ]);
    let err = load_err(&source);
    assert!(matches!(
        err.problem,
        ModuleProblem::UnsupportedAbiVersion { guest: 7, host: 1 }
    ));
    let text = err.to_string();
    assert!(
        text.contains("version 7") && text.contains("version 1"),
        "{text}"
    );
}

#[test]
fn refuses_a_module_without_memory() {
    let source = r#"(module
      (func (export "weir_abi_version") (result i32) (i32.const 1))
      (func (export "weir_alloc") (param i32) (result i32) (i32.const 0))
      (func (export "weir_process") (param i32 i32) (result i32) (i32.const 0)))"#;
    assert!(matches!(load_err(source).problem, ModuleProblem::NoMemory));
}

/// Three WASI imports, as a libc's `printf` brings them in.
const WASI_IMPORTS: &str = r#"
  (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_close" (func (param i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))"#;

/// `binary` with a `producers` custom section naming `field` = `value` (tool-conventions'
/// format: one field of one value, its version empty).
fn with_producers(binary: &[u8], field: &str, value: &str) -> Vec<u8> {
    let mut payload = Vec::new();
    let string = |out: &mut Vec<u8>, s: &str| {
        out.push(u8::try_from(s.len()).unwrap());
        out.extend_from_slice(s.as_bytes());
    };
    string(&mut payload, "producers");
    payload.push(1);
    string(&mut payload, field);
    payload.push(1);
    string(&mut payload, value);
    string(&mut payload, "");
    let mut out = binary.to_vec();
    out.push(0);
    out.push(u8::try_from(payload.len()).unwrap());
    out.extend(payload);
    out
}

#[test]
fn wasi_imports_are_one_problem_with_the_fix_for_the_toolchain_the_module_came_from() {
    let source = importing(&[WASI_IMPORTS]);
    let binary = wat::parse_str(&source).unwrap();
    let load = |bytes: &[u8]| {
        engine()
            .load(ModuleSource::bytes("m.wasm", bytes), StateCapture::Exports)
            .unwrap_err()
    };

    // Unknown toolchain: every import listed, once, and every toolchain's fix.
    let err = load(&binary);
    let ModuleProblem::WasiImports {
        imports, toolchain, ..
    } = &err.problem
    else {
        panic!("{err}");
    };
    assert_eq!(
        imports,
        &[
            "wasi_snapshot_preview1.fd_write",
            "wasi_snapshot_preview1.fd_close",
            "wasi_snapshot_preview1.proc_exit"
        ]
    );
    assert_eq!(*toolchain, Toolchain::Unknown);
    let text = err.to_string();
    for says in [
        "imports WASI",
        "fd_write, fd_close, proc_exit",
        "--target=wasm32 -ffreestanding -nostdlib",
        "-target wasm32-freestanding -fno-entry -rdynamic",
        "--target wasm32-unknown-unknown",
        "docs/ABI.md §12",
    ] {
        assert!(text.contains(says), "{says}: {text}");
    }
    assert!(
        !text.contains("build the module without other imports"),
        "{text}"
    );

    for (field, value, toolchain, says, not) in [
        (
            "processed-by",
            "Debian clang",
            Toolchain::Clang,
            "-nostdlib",
            "rdynamic",
        ),
        (
            "language",
            "C99",
            Toolchain::Clang,
            "-Wl,--no-entry",
            "rdynamic",
        ),
        (
            "language",
            "Zig",
            Toolchain::Zig,
            "wasm32-freestanding -fno-entry -rdynamic",
            "nostdlib",
        ),
        (
            "language",
            "Rust",
            Toolchain::Rust,
            "--target wasm32-unknown-unknown",
            "nostdlib",
        ),
        (
            "processed-by",
            "rustc",
            Toolchain::Rust,
            "wasm32-wasip1",
            "rdynamic",
        ),
    ] {
        let err = load(&with_producers(&binary, field, value));
        assert!(
            matches!(&err.problem, ModuleProblem::WasiImports { toolchain: t, .. } if *t == toolchain),
            "{field} {value}: {err}"
        );
        let text = err.to_string();
        assert!(text.contains(says), "{value}: {says}: {text}");
        assert!(!text.contains(not), "{value}: {not}: {text}");
        assert!(text.contains("producers section"), "{text}");
    }

    // AssemblyScript writes no producers section; its `env.abort` import gives it away.
    let source = importing(&[
        WASI_IMPORTS,
        r#"(import "env" "abort" (func (param i32 i32 i32 i32)))"#,
    ]);
    let err = load_err(&source);
    assert!(
        matches!(
            &err.problem,
            ModuleProblem::WasiImports {
                toolchain: Toolchain::AssemblyScript,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("wasi-shim"), "{err}");

    // A component interface counts as WASI too; other imports keep their own problem.
    let source = importing(&[
        r#"(import "wasi:cli/stdout@0.2.0" "get-stdout" (func (result i32)))"#,
        r#"(import "env" "seed" (func (result f64)))"#,
    ]);
    let err = load_err(&source);
    assert!(
        matches!(&err.problem, ModuleProblem::WasiImports { imports, .. } if imports == &["wasi:cli/stdout@0.2.0.get-stdout"]),
        "{err}"
    );
}

#[test]
fn refuses_imports_the_host_does_not_provide() {
    let source = importing(&[
        r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
    ]);
    let err = load_err(&source);
    assert!(matches!(
        &err.problem,
        ModuleProblem::WasiImports { imports, .. } if imports == &["wasi_snapshot_preview1.fd_write"]
    ));

    let source = importing(&[r#"(import "weir" "clock" (func))"#]);
    assert!(matches!(
        load_err(&source).problem,
        ModuleProblem::UnknownImport { .. }
    ));
}

#[test]
fn the_linker_defines_exactly_the_provided_imports_with_their_signatures() {
    // `provided_imports` is what the isolation argument (and `docs/ABI.md` §4) relies on; the
    // linker is what guests actually get. They must be the same set.
    let engine = engine();
    let state = super::state::GuestState::new("linker".into(), 0, engine.limits, None);
    let mut store = wasmtime::Store::new(engine.engine.engine(), state);
    let items: Vec<_> = engine.engine.linker().iter(&mut store).collect();
    let mut defined = Vec::new();
    for (module, name, item) in items {
        let wasmtime::Extern::Func(func) = item else {
            panic!("`{module}`.`{name}` is not a function");
        };
        let signature = weir_abi::table::import(module, name)
            .map(|import| import.signature)
            .unwrap_or_else(|| panic!("the linker defines `{module}`.`{name}`, not listed"));
        assert!(
            super::signature::matches(&signature, &func.ty(&store)),
            "`{module}`.`{name}` is defined with another signature than {signature}"
        );
        defined.push((module.to_string(), name.to_string()));
    }
    defined.sort();
    let mut listed: Vec<(String, String)> = provided_imports()
        .map(|(m, n)| (m.to_string(), n.to_string()))
        .collect();
    listed.sort();
    assert_eq!(defined, listed);
    assert_eq!(
        listed.len(),
        12,
        "weir.emit/save_state/fail/log, the four of event time, the three of keyed state, and \
         env.abort"
    );
}

#[test]
fn refuses_a_weir_import_with_the_wrong_signature() {
    let source = r#"(module
      (import "weir" "emit" (func (param i32)))
      (memory (export "memory") 1)
      (func (export "weir_abi_version") (result i32) (i32.const 1))
      (func (export "weir_alloc") (param i32) (result i32) (i32.const 0))
      (func (export "weir_process") (param i32 i32) (result i32) (i32.const 0)))"#;
    assert!(matches!(
        &load_err(source).problem,
        ModuleProblem::BadImportSignature { name, .. } if name == "emit"
    ));
}

#[test]
fn refuses_text_that_is_not_a_module_and_files_that_do_not_exist() {
    assert!(matches!(
        load_err("(module (func").problem,
        ModuleProblem::Compile { .. }
    ));
    let err = engine()
        .load(
            ModuleSource::file("/nonexistent/weir/op.wasm"),
            StateCapture::Exports,
        )
        .unwrap_err();
    assert!(matches!(err.problem, ModuleProblem::Io(_)));
    assert_eq!(err.module, "/nonexistent/weir/op.wasm");
}

#[test]
fn refuses_a_module_whose_start_function_never_ends() {
    let engine = engine_with(GuestLimits {
        call_timeout: Duration::from_millis(200),
        ..GuestLimits::default()
    });
    let source = fixture(&format!(
        "{PROCESS_OK} (func $spin (loop $l (br $l))) (start $spin)"
    ));
    let started = Instant::now();
    let err = engine
        .load(
            ModuleSource::bytes("spin.wat", source.as_bytes()),
            StateCapture::Exports,
        )
        .unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(matches!(
        err.problem,
        ModuleProblem::VersionCheck {
            call: "instantiate",
            failure: GuestFailure::Timeout { .. }
        }
    ));
}

#[test]
fn refuses_a_module_whose_initial_memory_exceeds_the_limit() {
    let engine = engine_with(GuestLimits {
        max_memory_bytes: 1 << 20,
        ..GuestLimits::default()
    });
    let source = wat(&[
        r#"(memory (export "memory") 17)"#,
        VERSION,
        ALLOC,
        PROCESS_OK,
    ]);
    let err = engine
        .load(
            ModuleSource::bytes("big.wat", source.as_bytes()),
            StateCapture::Exports,
        )
        .unwrap_err();
    assert!(matches!(
        err.problem,
        ModuleProblem::VersionCheck {
            failure: GuestFailure::MemoryLimit {
                limit: 1_048_576,
                requested: 1_114_112
            },
            ..
        }
    ));
}

#[test]
fn one_engine_loads_modules_under_different_limits_each_enforcing_its_own() {
    // The limits live in each module (and so in each store), not in the engine: a job's
    // operators share one engine, one epoch thread and one pool whatever their limits.
    let source = wat(&[
        r#"(memory (export "memory") 17)"#,
        VERSION,
        ALLOC,
        PROCESS_OK,
    ]);
    let small = GuestLimits {
        max_memory_bytes: 1 << 20,
        ..test_limits()
    };
    for engine in [WasmEngine::new().unwrap(), pooled_engine(4).engine] {
        for capture in [StateCapture::Exports, StateCapture::Image] {
            let load = |limits| {
                let options = LoadOptions {
                    capture,
                    limits,
                    ..LoadOptions::default()
                };
                OperatorModule::load(
                    &engine,
                    ModuleSource::bytes("big.wat", source.as_bytes()),
                    options,
                )
            };
            let err = load(small).unwrap_err();
            assert!(
                matches!(
                    err.problem,
                    ModuleProblem::VersionCheck {
                        failure: GuestFailure::MemoryLimit {
                            limit: 1_048_576,
                            requested: 1_114_112
                        },
                        ..
                    }
                ),
                "{capture:?}: {err}"
            );
            let module = load(test_limits()).unwrap();
            assert_eq!(module.limits(), &test_limits());
            module.instantiate(context(0), b"").unwrap();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Instances that fail

#[test]
fn a_trap_is_reported_by_kind_naming_operator_subtask_and_export() {
    let err = process_failure(&fixture(
        r#"(func (export "weir_process") (param i32 i32) (result i32)
        (unreachable))"#,
    ));
    assert!(matches!(
        err.failure,
        GuestFailure::Trap {
            trap: Trap::UnreachableCodeReached
        }
    ));
    assert!(
        err.backtrace.is_some(),
        "the wasm backtrace comes along as detail"
    );
    assert_eq!(
        err.to_string(),
        "operator `test-op` subtask 0 failed in weir_process: guest trap: wasm `unreachable` \
         instruction executed"
    );

    let err = process_failure(&fixture(
        r#"(func (export "weir_process") (param i32 i32) (result i32)
        (i32.load (i32.const -4)))"#,
    ));
    assert!(matches!(
        err.failure,
        GuestFailure::Trap {
            trap: Trap::MemoryOutOfBounds
        }
    ));
    assert!(
        err.to_string()
            .ends_with("guest trap: out of bounds memory access"),
        "{err}"
    );
}

#[test]
fn an_endless_loop_times_out_quickly() {
    let engine = engine_with(GuestLimits {
        call_timeout: Duration::from_millis(200),
        ..GuestLimits::default()
    });
    let module = load(
        &engine,
        &fixture(
            r#"(func (export "weir_process") (param i32 i32) (result i32)
            (loop $forever (br $forever)) (i32.const 0))"#,
        ),
    );
    let mut guest = module.instantiate(context(0), b"").unwrap();
    let started = Instant::now();
    let err = guest.process(&batch(0, &[])).unwrap_err();
    let elapsed = started.elapsed();
    assert!(
        matches!(err.failure, GuestFailure::Timeout { limit } if limit == Duration::from_millis(200))
    );
    assert!(
        elapsed >= Duration::from_millis(190),
        "stopped too early: {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}

#[test]
fn growing_memory_past_the_limit_fails_the_call() {
    let engine = engine_with(GuestLimits {
        max_memory_bytes: 1 << 20,
        ..GuestLimits::default()
    });
    let module = load(
        &engine,
        &fixture(
            r#"(func (export "weir_process") (param i32 i32) (result i32)
            (drop (memory.grow (i32.const 100))) (i32.const 0))"#,
        ),
    );
    let err = module
        .instantiate(context(0), b"")
        .unwrap()
        .process(&batch(0, &[]))
        .unwrap_err();
    assert!(matches!(
        err.failure,
        GuestFailure::MemoryLimit { limit: 1_048_576, requested } if requested == 102 * 65536
    ));
}

#[test]
fn a_trap_after_a_failed_allocation_says_out_of_memory_and_what_to_do() {
    // An allocator that finds memory.grow refused (here by the module's own maximum of 4
    // pages, under the host's limit) aborts with `unreachable`, as Rust's and C's do: the
    // trap alone would not tell the user that the guest ran out of memory.
    let source = wat(&[
        r#"(memory (export "memory") 2 4)"#,
        VERSION,
        ALLOC,
        r#"(func (export "weir_process") (param i32 i32) (result i32)
          (if (i32.eq (memory.grow (i32.const 8)) (i32.const -1)) (then unreachable))
          (i32.const 0))"#,
    ]);
    let err = process_failure(&source);
    assert_eq!(
        err.failure,
        GuestFailure::OutOfMemory {
            sign: OutOfMemorySign::GrowthFailed,
            memory: 2 * 65536,
            limit: test_limits().max_memory_bytes,
        },
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("failed in weir_process: guest ran out of memory and trapped")
            && text.contains("keep less state"),
        "{text}"
    );
    // A trap with no failed allocation in its call stays a trap.
    let source = wat(&[
        r#"(memory (export "memory") 2 4)"#,
        VERSION,
        ALLOC,
        r#"(func (export "weir_process") (param i32 i32) (result i32) unreachable)"#,
    ]);
    assert!(matches!(
        process_failure(&source).failure,
        GuestFailure::Trap { .. }
    ));
}

#[test]
fn out_of_memory_names_the_limit_as_the_fix_only_near_it() {
    let limit = 100 << 20;
    let near = GuestFailure::OutOfMemory {
        sign: OutOfMemorySign::EngineReported,
        memory: 95 << 20,
        limit,
    }
    .to_string();
    assert!(
        near.contains("raise the operator's `limits.max_memory` in the job file"),
        "{near}"
    );
    let below = GuestFailure::OutOfMemory {
        sign: OutOfMemorySign::EngineReported,
        memory: 83 << 20,
        limit,
    }
    .to_string();
    assert!(
        below.contains("engine's own heap ran out: keep less state")
            && below.contains("does not help"),
        "{below}"
    );
}

#[test]
fn growing_a_table_past_the_limit_fails_the_call() {
    let err = process_failure(&fixture(
        r#"(table 1 funcref)
        (func (export "weir_process") (param i32 i32) (result i32)
          (drop (table.grow (ref.null func) (i32.const 2000000))) (i32.const 0))"#,
    ));
    assert!(matches!(
        err.failure,
        GuestFailure::TableLimit {
            requested: 2_000_001,
            ..
        }
    ));
}

#[test]
fn batches_emitted_one_after_another_are_joined_keeping_every_record_in_order() {
    // Emits its input three times, with an empty batch in between.
    let mut guest = instance(&fixture(
        r#"(func (export "weir_process") (param $p i32) (param $l i32) (result i32)
          (i32.store offset=4 (local.get $p) (i32.const 0))
          (call $emit (local.get $p) (local.get $l))
          (call $emit (i32.const 64) (i32.const 8))
          (call $emit (local.get $p) (local.get $l))
          (call $emit (local.get $p) (local.get $l))
          (i32.const 0))"#,
    ));
    let input = [("a", "x", 1), ("bb", "", 2)];
    let out = guest.process(&batch(3, &input)).unwrap();
    let expected: Vec<(&str, &str, i64)> =
        input.iter().chain(&input).chain(&input).copied().collect();
    assert_eq!(out, vec![batch(0, &expected)], "one batch, six records");

    // Batches that would make a buffer larger than the chunk start a new one: two records of
    // 600 KiB each (zeros past the memory's first pages) come back as two batches.
    let value_len = 600 * 1024;
    let mut guest = instance(&fixture(&format!(
        r#"(func (export "weir_process") (param i32 i32) (result i32)
          (drop (memory.grow (i32.const 20)))
          (i32.store (i32.const 65536) (i32.const 1))
          (i32.store (i32.const 65556) (i32.const {value_len}))
          (call $emit (i32.const 65536) (i32.const {len}))
          (call $emit (i32.const 65536) (i32.const {len}))
          (i32.const 0))"#,
        len = value_len + 24
    )));
    let out = guest.process(&batch(0, &[])).unwrap();
    let big = vec![0u8; value_len];
    let mut one = BatchBuilder::new(0);
    one.push(b"", &big, 0);
    let one = one.into_bytes();
    assert_eq!(out, vec![one.clone(), one]);
}

#[test]
fn tables_are_bounded_in_all_not_each() {
    // Two tables, each within the bound, together past it: refused when the module loads
    // (its throwaway instance for the version check cannot be made).
    let half = MAX_TABLE_ELEMENTS / 2 + 1;
    let err = load_err(&fixture(&format!(
        "(table {half} funcref) (table {half} funcref) {PROCESS_OK}"
    )));
    assert!(
        matches!(
            &err.problem,
            ModuleProblem::VersionCheck {
                call: "instantiate",
                failure: GuestFailure::TableLimit { requested, .. },
            } if *requested == 2 * half
        ),
        "{err}"
    );

    // Growing one table after the other: the second growth is refused.
    let mut guest = instance(&fixture(&format!(
        r#"(table $a 0 funcref) (table $b 0 funcref)
        (func (export "weir_process") (param i32 i32) (result i32)
          (drop (table.grow $a (ref.null func) (i32.const {half})))
          (drop (table.grow $b (ref.null func) (i32.const {half})))
          (i32.const 0))"#
    )));
    let err = guest.process(&batch(0, &[])).unwrap_err();
    assert!(
        matches!(err.failure, GuestFailure::TableLimit { limit, requested }
            if limit == MAX_TABLE_ELEMENTS && requested == 2 * half),
        "{err}"
    );
}

#[test]
fn growing_a_table_past_its_own_maximum_returns_minus_one() {
    // The wasm spec's answer, not a failure; the table can still grow to its maximum.
    let mut guest = instance(&fixture(
        r#"(table $t 1 10 funcref)
        (func (export "weir_process") (param i32 i32) (result i32)
          (if (i32.ne (table.grow $t (ref.null func) (i32.const 20)) (i32.const -1))
            (then (return (i32.const 1))))
          (if (i32.eq (table.grow $t (ref.null func) (i32.const 9)) (i32.const -1))
            (then (return (i32.const 2))))
          (i32.const 0))"#,
    ));
    guest.process(&batch(0, &[])).unwrap();
}

#[test]
fn an_emit_pointer_outside_memory_is_refused() {
    let err = process_failure(&fixture(
        r#"(func (export "weir_process") (param i32 i32) (result i32)
        (call $emit (i32.const -16) (i32.const 100)) (i32.const 0))"#,
    ));
    assert!(matches!(
        err.failure,
        GuestFailure::OutOfBounds {
            ptr: 0xffff_fff0,
            len: 100,
            memory_len: 131_072,
            ..
        }
    ));
    assert!(err.to_string().contains("`emit` batch"), "{err}");
}

#[test]
fn a_malformed_output_batch_is_refused() {
    let err = process_failure(&fixture(
        r#"(func (export "weir_process") (param i32 i32) (result i32)
        (call $emit (i32.const 0) (i32.const 3)) (i32.const 0))"#,
    ));
    assert!(matches!(
        err.failure,
        GuestFailure::MalformedOutput {
            problem: DecodeError::MissingHeader { len: 3 }
        }
    ));
}

#[test]
fn an_output_batch_with_a_nonzero_port_is_refused() {
    let err = process_failure(&fixture(
        r#"(data (i32.const 64) "\00\00\00\00\02\00\00\00")
        (func (export "weir_process") (param i32 i32) (result i32)
          (call $emit (i32.const 64) (i32.const 8)) (i32.const 0))"#,
    ));
    assert!(matches!(err.failure, GuestFailure::OutputPort { port: 2 }));
}

#[test]
fn output_past_the_limit_is_refused_before_it_is_copied() {
    // Room for an empty batch (8 bytes and the overhead), not for one with a record (26).
    let engine = engine_with(GuestLimits {
        max_output_bytes: OUTPUT_BATCH_OVERHEAD + 20,
        ..GuestLimits::default()
    });
    // Re-emits its input: 8 bytes of header, then 16 + 1 + 1 for the record.
    let module = load(
        &engine,
        &fixture(
            r#"(func (export "weir_process") (param $p i32) (param $l i32) (result i32)
            (i32.store offset=4 (local.get $p) (i32.const 0))
            (call $emit (local.get $p) (local.get $l)) (i32.const 0))"#,
        ),
    );
    let mut guest = module.instantiate(context(0), b"").unwrap();
    assert_eq!(guest.process(&batch(5, &[])).unwrap(), vec![batch(0, &[])]);
    let err = guest.process(&batch(0, &[("k", "v", 1)])).unwrap_err();
    assert!(matches!(
        err.failure,
        GuestFailure::OutputTooLarge { limit } if limit == OUTPUT_BATCH_OVERHEAD + 20
    ));
}

/// A guest whose `weir_process` emits the same empty batch (8 bytes) `times` times.
fn emitting_empty_batches(times: u32) -> String {
    fixture(&format!(
        r#"(func (export "weir_process") (param i32 i32) (result i32) (local $n i32)
          (local.set $n (i32.const {times}))
          (block $done (loop $again
            (br_if $done (i32.eqz (local.get $n)))
            (call $emit (i32.const 64) (i32.const 8))
            (local.set $n (i32.sub (local.get $n) (i32.const 1)))
            (br $again)))
          (i32.const 0))"#
    ))
}

#[test]
fn each_emitted_batch_counts_its_overhead_against_the_output_limit() {
    // Without the overhead, 1000 bytes would allow 125 empty batches; with it, 13
    // (13 × 72 = 936).
    let engine = engine_with(GuestLimits {
        max_output_bytes: 1000,
        ..GuestLimits::default()
    });
    let per_batch = 8 + OUTPUT_BATCH_OVERHEAD;
    let fits = (1000 / per_batch) as u32;
    assert_eq!(fits, 13);
    let mut guest = load(&engine, &emitting_empty_batches(fits))
        .instantiate(context(0), b"")
        .unwrap();
    // Joined into one empty batch.
    assert_eq!(guest.process(&batch(0, &[])).unwrap(), vec![batch(0, &[])]);
    // The budget is per call: the next call may emit as much again.
    assert_eq!(guest.process(&batch(0, &[])).unwrap(), vec![batch(0, &[])]);

    let mut guest = load(&engine, &emitting_empty_batches(fits + 1))
        .instantiate(context(0), b"")
        .unwrap();
    let err = guest.process(&batch(0, &[])).unwrap_err();
    assert!(matches!(
        err.failure,
        GuestFailure::OutputTooLarge { limit: 1000 }
    ));
}

#[test]
fn a_snapshot_past_the_state_limit_is_refused() {
    let engine = engine_with(GuestLimits {
        max_state_bytes: 100,
        ..GuestLimits::default()
    });
    let module = load(
        &engine,
        &fixture(&format!(
            r#"{PROCESS_OK}
            (func (export "weir_snapshot") (param i64) (result i32)
              (call $save_state (i32.const 0) (i32.const 60))
              (call $save_state (i32.const 0) (i32.const 60)) (i32.const 0))"#
        )),
    );
    let err = module
        .instantiate(context(0), b"")
        .unwrap()
        .snapshot(CheckpointId(1))
        .unwrap_err();
    assert!(matches!(
        err.failure,
        GuestFailure::StateTooLarge { limit: 100 }
    ));
}

#[test]
fn a_restore_that_traps_fails_in_weir_restore() {
    let mut guest = instance(&fixture(&format!(
        r#"{PROCESS_OK}
        (func (export "weir_restore") (param i32 i32) (result i32) (unreachable))"#
    )));
    let err = guest.restore(b"state").unwrap_err();
    assert_eq!(err.call, "weir_restore");
    assert!(matches!(
        err.failure,
        GuestFailure::Trap {
            trap: Trap::UnreachableCodeReached
        }
    ));
}

#[test]
fn fail_carries_the_guest_message() {
    let err = process_failure(&fixture(
        r#"(data (i32.const 64) "boom: it broke \e2\9c\97")
        (func (export "weir_process") (param i32 i32) (result i32)
          (call $fail (i32.const 64) (i32.const 18)) (i32.const 0))"#,
    ));
    assert!(
        matches!(&err.failure, GuestFailure::Failed { message } if message == "boom: it broke ✗")
    );
    assert!(
        err.to_string().ends_with("guest failed: boom: it broke ✗"),
        "{err}"
    );

    // A message longer than the cap is cut; invalid UTF-8 is replaced.
    let err = process_failure(&fixture(
        r#"(func (export "weir_process") (param i32 i32) (result i32)
        (call $fail (i32.const 0) (i32.const 100000)) (i32.const 0))"#,
    ));
    match &err.failure {
        GuestFailure::Failed { message } => {
            assert!(message.starts_with("\0\0\0"));
            assert!(
                message.ends_with(" … [cut at 65536 of 100000 bytes]"),
                "{}",
                &message[65530..]
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

/// A guest importing AssemblyScript's `env.abort`, whose `weir_process` calls it with
/// `(message, file, line, column)` as given in `args` (WAT instructions). Holds two strings laid
/// out as AssemblyScript does (byte length at `ptr - 4`, UTF-16LE text): "boom ✗" at 64 and
/// "assembly/index.ts" at 128.
fn aborting_guest(args: &str) -> String {
    wat(&[
        r#"(import "env" "abort" (func $abort (param i32 i32 i32 i32)))"#,
        PRELUDE,
        VERSION,
        ALLOC,
        r#"(data (i32.const 60) "\0c\00\00\00b\00o\00o\00m\00 \00\17\27")
        (data (i32.const 124) "\22\00\00\00a\00s\00s\00e\00m\00b\00l\00y\00/\00i\00n\00d\00e\00x\00.\00t\00s\00")"#,
        &format!(
            r#"(func (export "weir_process") (param i32 i32) (result i32)
              (call $abort {args}) (i32.const 0))"#
        ),
    ])
}

#[test]
fn assemblyscript_abort_fails_the_call_with_its_message_file_and_line() {
    let err = process_failure(&aborting_guest(
        "(i32.const 64) (i32.const 128) (i32.const 12) (i32.const 5)",
    ));
    assert_eq!(err.call, "weir_process");
    assert_eq!(
        err.failure,
        GuestFailure::Aborted {
            message: Some("boom ✗".into()),
            file: Some("assembly/index.ts".into()),
            line: 12,
            column: 5,
        }
    );
    assert!(
        err.to_string()
            .ends_with("failed in weir_process: guest aborted: boom ✗ (at assembly/index.ts:12:5)"),
        "{err}"
    );

    // Null strings are absent; a string whose header or text lies outside the memory is
    // named, not read.
    let err = process_failure(&aborting_guest(
        "(i32.const 0) (i32.const -8) (i32.const 0) (i32.const 0)",
    ));
    match &err.failure {
        GuestFailure::Aborted {
            message: None,
            file: Some(file),
            line: 0,
            column: 0,
        } => assert!(
            file.starts_with("<unreadable string at 4294967288"),
            "{file}"
        ),
        other => panic!("unexpected {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("guest aborted: no message (at <unreadable"),
        "{err}"
    );
}

#[test]
fn assemblyscript_strings_are_read_within_bounds_and_cut() {
    // Length 6 at 0..4, then "hi" and an unpaired surrogate.
    let memory = [6, 0, 0, 0, b'h', 0, b'i', 0, 0x00, 0xd8];
    assert_eq!(
        assemblyscript_string(&memory, 4).as_deref(),
        Some("hi\u{fffd}")
    );
    assert_eq!(assemblyscript_string(&memory, 0), None);
    // No room for the header before the pointer, or text running past the end.
    assert!(
        assemblyscript_string(&memory, 2)
            .unwrap()
            .starts_with("<unreadable")
    );
    let mut long = vec![0xff, 0xff, 0xff, 0x7f];
    long.extend(std::iter::repeat_n(0, 16));
    assert!(
        assemblyscript_string(&long, 4)
            .unwrap()
            .starts_with("<unreadable")
    );
    // An odd length drops the last byte; a long string is cut at the message limit.
    let memory = [3, 0, 0, 0, b'o', 0, b'k'];
    assert_eq!(assemblyscript_string(&memory, 4).as_deref(), Some("o"));
    let mut huge = 200_000u32.to_le_bytes().to_vec();
    huge.extend(std::iter::repeat_n([b'x', 0], 100_000).flatten());
    let text = assemblyscript_string(&huge, 4).unwrap();
    assert!(text.starts_with("xxx"));
    assert!(
        text.ends_with(" … [cut at 65536 of 200000 bytes]"),
        "{}",
        &text[32760..]
    );
}

#[test]
fn only_abort_is_provided_from_env_and_with_its_own_signature() {
    let source = importing(&[r#"(import "env" "seed" (func (result f64)))"#]);
    let err = load_err(&source);
    assert!(
        matches!(&err.problem, ModuleProblem::UnknownImport { module, name } if module == "env" && name == "seed")
    );
    assert!(
        err.to_string()
            .contains("plus `env`.`abort` for AssemblyScript"),
        "{err}"
    );

    let source = importing(&[r#"(import "env" "abort" (func (param i32 i32)))"#]);
    let err = load_err(&source);
    assert!(
        matches!(&err.problem, ModuleProblem::BadImportSignature { module, name, .. } if module == "env" && name == "abort")
    );
    assert!(
        err.to_string()
            .contains("imports `env`.`abort` as a function (i32, i32), but the host provides it as a function (i32, i32, i32, i32)"),
        "{err}"
    );
    // `abort` is not provided under `weir`.
    let source = importing(&[r#"(import "weir" "abort" (func (param i32 i32 i32 i32)))"#]);
    assert!(matches!(
        load_err(&source).problem,
        ModuleProblem::UnknownImport { .. }
    ));
}

#[test]
fn a_nonzero_status_fails_the_call_with_the_last_error_logged() {
    let err = process_failure(&fixture(
        r#"(func (export "weir_process") (param i32 i32) (result i32)
        (i32.const 3))"#,
    ));
    assert!(matches!(
        err.failure,
        GuestFailure::Status {
            code: 3,
            last_message: None
        }
    ));
    assert!(
        err.to_string().ends_with("guest returned status 3"),
        "{err}"
    );

    let err = process_failure(&fixture(
        r#"(data (i32.const 64) "disk on fire")
        (func (export "weir_process") (param i32 i32) (result i32)
          (call $log (i32.const 2) (i32.const 64) (i32.const 4))
          (call $log (i32.const 0) (i32.const 64) (i32.const 12))
          (i32.const -1))"#,
    ));
    assert!(matches!(
        &err.failure,
        GuestFailure::Status { code: -1, last_message: Some(m) } if m == "disk on fire"
    ));
}

#[test]
fn emit_and_save_state_outside_their_calls_are_refused() {
    let mut guest = instance(&fixture(&format!(
        r#"{PROCESS_OK}
        (func (export "weir_snapshot") (param i64) (result i32)
          (call $emit (i32.const 0) (i32.const 8)) (i32.const 0))"#
    )));
    let err = guest.snapshot(CheckpointId(1)).unwrap_err();
    assert!(matches!(
        err.failure,
        GuestFailure::ImportMisuse {
            import: "emit",
            call: "weir_snapshot"
        }
    ));
    assert!(
        err.to_string().contains(
            "allowed only during weir_process, weir_on_timers, weir_on_watermark and \
                 weir_finish"
        ),
        "{err}"
    );

    let err = process_failure(&fixture(
        r#"(func (export "weir_process") (param i32 i32) (result i32)
        (call $save_state (i32.const 0) (i32.const 1)) (i32.const 0))"#,
    ));
    assert!(matches!(
        err.failure,
        GuestFailure::ImportMisuse {
            import: "save_state",
            call: "weir_process"
        }
    ));
}

#[test]
fn alloc_returning_zero_fails() {
    let err = process_failure(&wat(&[
        PRELUDE,
        VERSION,
        PROCESS_OK,
        r#"(func (export "weir_alloc") (param i32) (result i32) (i32.const 0))"#,
    ]));
    assert_eq!(err.call, "weir_alloc");
    assert!(matches!(err.failure, GuestFailure::AllocFailed { len: 26 }));
}

#[test]
fn alloc_returning_a_range_outside_memory_fails() {
    for ptr in ["131070", "-8"] {
        let err = process_failure(&wat(&[
            PRELUDE,
            VERSION,
            PROCESS_OK,
            &format!(r#"(func (export "weir_alloc") (param i32) (result i32) (i32.const {ptr}))"#),
        ]));
        assert_eq!(err.call, "weir_alloc");
        assert!(matches!(
            err.failure,
            GuestFailure::OutOfBounds {
                what: "`weir_alloc` result",
                len: 26,
                memory_len: 131_072,
                ..
            }
        ));
    }
}

#[test]
fn a_config_without_weir_init_is_refused() {
    let module = load(&engine(), &fixture(PROCESS_OK));
    assert!(!module.capabilities().init);
    module.instantiate(context(0), b"").unwrap();
    let err = module.instantiate(context(0), b"window = 5").unwrap_err();
    assert_eq!(err.call, "weir_init");
    assert!(matches!(
        err.failure,
        GuestFailure::UnusedConfig { config_len: 10 }
    ));
}

#[test]
fn weir_init_receives_the_init_message() {
    // weir_init copies its message to 8192 and records its length; weir_snapshot saves it.
    let module = load(
        &engine(),
        &fixture(&format!(
            r#"{PROCESS_OK}
            (global $len (mut i32) (i32.const 0))
            (func (export "weir_init") (param $p i32) (param $l i32) (result i32)
              (memory.copy (i32.const 8192) (local.get $p) (local.get $l))
              (global.set $len (local.get $l)) (i32.const 0))
            (func (export "weir_snapshot") (param i64) (result i32)
              (call $save_state (i32.const 8192) (global.get $len)) (i32.const 0))"#
        )),
    );
    let mut guest = module.instantiate(context(1), b"k=v").unwrap();
    let expected = InitMessage {
        operator: "test-op",
        subtask: 1,
        parallelism: 2,
        config: b"k=v",
    }
    .encode();
    assert_eq!(guest.snapshot(CheckpointId(1)).unwrap(), expected);
    assert_eq!(guest.context(), &context(1));
}

#[test]
fn infinite_recursion_is_a_stack_overflow() {
    let err = process_failure(&fixture(
        r#"(func $down (param i32) (result i32)
            (call $down (i32.add (local.get 0) (i32.const 1))))
        (func (export "weir_process") (param i32 i32) (result i32)
          (call $down (i32.const 0)))"#,
    ));
    assert!(matches!(err.failure, GuestFailure::StackOverflow));
}

#[test]
fn a_failed_instance_refuses_every_further_call() {
    let mut guest = instance(&fixture(
        r#"(func (export "weir_process") (param i32 i32) (result i32)
        (unreachable))
        (func (export "weir_snapshot") (param i64) (result i32) (i32.const 0))"#,
    ));
    assert!(!guest.is_poisoned());
    guest.process(&batch(0, &[])).unwrap_err();
    assert!(guest.is_poisoned());
    let err = guest.process(&batch(0, &[])).unwrap_err();
    assert!(matches!(
        err.failure,
        GuestFailure::Poisoned {
            failed_call: "weir_process"
        }
    ));
    assert!(
        err.to_string().contains("already failed in weir_process"),
        "{err}"
    );
    let err = guest.snapshot(CheckpointId(1)).unwrap_err();
    assert_eq!(err.call, "weir_snapshot");
    assert!(matches!(err.failure, GuestFailure::Poisoned { .. }));
    assert!(guest.finish().is_err() && guest.restore(&[]).is_err());
    assert!(guest.checkpoint_complete(CheckpointId(1)).is_err());
}

#[test]
fn missing_optional_exports_have_their_documented_defaults() {
    let mut guest = instance(&fixture(PROCESS_OK));
    assert_eq!(guest.capabilities(), Capabilities::default());
    assert_eq!(guest.snapshot(CheckpointId(1)).unwrap(), Vec::<u8>::new());
    guest.restore(&[]).unwrap();
    guest.checkpoint_complete(CheckpointId(1)).unwrap();
    assert!(guest.finish().unwrap().is_empty());
    let err = guest.restore(b"old state").unwrap_err();
    assert!(matches!(
        err.failure,
        GuestFailure::NoRestoreExport { state_len: 9 }
    ));
}

#[test]
fn finish_may_emit_and_initialize_runs_first() {
    // _initialize sets the global weir_abi_version returns: version 1 only after it ran.
    let mut guest = instance(&wat(&[
        PRELUDE,
        ALLOC,
        PROCESS_OK,
        r#"(global $v (mut i32) (i32.const 0))
        (func (export "_initialize") (global.set $v (i32.const 1)))
        (func (export "weir_abi_version") (result i32) (global.get $v))
        (func (export "weir_finish") (result i32)
          (call $emit (i32.const 0) (i32.const 8)) (i32.const 0))"#,
    ]));
    assert!(guest.capabilities().initialize && guest.capabilities().finish);
    assert_eq!(guest.finish().unwrap(), vec![batch(0, &[])]);
}

#[test]
fn a_subtask_outside_the_parallelism_is_refused() {
    let module = load(&engine(), &fixture(PROCESS_OK));
    let context = InstanceContext {
        operator: "op".into(),
        subtask: 2,
        parallelism: 2,
    };
    let err = module.instantiate(context, b"").unwrap_err();
    assert!(matches!(err.failure, GuestFailure::Instantiation { .. }));
}

#[test]
fn guest_ranges_are_checked_without_overflow() {
    let memory = [0u8; 16];
    assert_eq!(guest_range(&memory, "x", 4, 8).unwrap(), &memory[4..12]);
    assert_eq!(guest_range(&memory, "x", 16, 0).unwrap(), &[] as &[u8]);
    for (ptr, len) in [(8, 9), (17, 0), (-1, 1), (1, -1), (-1, -1)] {
        let err = guest_range(&memory, "x", ptr, len).unwrap_err();
        assert!(matches!(
            err.downcast_ref::<super::error::Abort>(),
            Some(super::error::Abort(GuestFailure::OutOfBounds {
                memory_len: 16,
                ..
            }))
        ));
    }
    assert_eq!(message(b"ok \xff"), "ok \u{fffd}");
}

#[test]
fn the_public_types_can_move_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<WasmEngine>();
    assert_send_sync::<OperatorModule>();
    assert_send::<GuestInstance>();
    assert_send_sync::<GuestError>();
    assert_send_sync::<ModuleError>();

    let engine = engine();
    let module = count_module(&engine);
    drop(engine);
    // The module keeps the epoch ticker alive: a guest started on another thread still works.
    let out = std::thread::spawn(move || {
        let mut guest = module.instantiate(context(0), b"").unwrap();
        guest.process(&batch(0, &[("k", "v", 1)])).unwrap()
    })
    .join()
    .unwrap();
    assert_eq!(rows(&out), vec![row("k", "1", 1)]);
}

#[test]
fn a_module_compiled_once_is_loaded_from_the_cache_by_the_next_engine() {
    let dir = tempfile::tempdir().unwrap();
    let source = std::fs::read(count_path()).unwrap();
    let first = WasmEngine::with_module_cache(dir.path()).unwrap();
    let count = ModuleSource::bytes("count.wat", &source);
    OperatorModule::load(&first, count, LoadOptions::default()).unwrap();
    assert_eq!(first.module_cache_counts(), Some((0, 1)));
    let second = WasmEngine::with_module_cache(dir.path()).unwrap();
    let module = OperatorModule::load(&second, count, LoadOptions::default()).unwrap();
    assert_eq!(second.module_cache_counts(), Some((1, 0)));
    // The cached module works.
    let mut guest = module.instantiate(context(0), b"").unwrap();
    let out = guest.process(&batch(0, &[("k", "", 1)])).unwrap();
    assert_eq!(rows(&out), [row("k", "1", 1)]);
    assert_eq!(engine().module_cache_counts(), None);
}

#[test]
fn an_unusable_cache_directory_is_refused_naming_it_and_the_ways_out() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-directory");
    std::fs::write(&file, b"").unwrap();
    let err = WasmEngine::with_module_cache(&file.join("modules"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not-a-directory"), "{err}");
    assert!(
        err.contains("WEIR_CACHE_DIR") && err.contains("--no-module-cache"),
        "{err}"
    );
}

#[test]
fn a_job_engine_without_a_usable_cache_compiles_every_module_instead() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-directory");
    std::fs::write(&file, b"").unwrap();
    let options = EngineOptions {
        module_cache: Some(file.join("modules")),
        ..EngineOptions::default()
    };
    assert!(WasmEngine::with_options(&options).is_err());
    let engine = WasmEngine::for_job(&options).unwrap();
    assert_eq!(engine.module_cache_counts(), None);
    OperatorModule::load(
        &engine,
        ModuleSource::file(&count_path()),
        LoadOptions::default(),
    )
    .unwrap();
}

#[test]
fn an_operator_with_a_config_needs_a_module_exporting_weir_init() {
    let dir = tempfile::tempdir().unwrap();
    let without = dir.path().join("without.wat");
    std::fs::write(&without, fixture(PROCESS_OK)).unwrap();
    let with = dir.path().join("with.wat");
    let init = r#"(func (export "weir_init") (param i32 i32) (result i32) (i32.const 0))"#;
    std::fs::write(&with, fixture(&format!("{PROCESS_OK} {init}"))).unwrap();
    let engine = WasmEngine::new().unwrap();
    let load = |path: &std::path::Path, has_config: bool| {
        let options = LoadOptions {
            limits: test_limits(),
            config_of: has_config.then_some("op"),
            ..LoadOptions::default()
        };
        OperatorModule::load(&engine, ModuleSource::file(path), options)
    };
    let err = load(&without, true).unwrap_err();
    assert!(matches!(
        &err.problem,
        ModuleProblem::ConfigWithoutInit { operator, path } if operator == "op" && path == &without
    ));
    assert_eq!(
        err.problem.to_string(),
        format!(
            "operator `op` has a config, but its module {} exports no weir_init to receive it: \
             remove the config or export weir_init (docs/ABI.md §3)",
            without.display()
        )
    );
    assert_eq!(load(&without, false).unwrap().limits(), &test_limits());
    assert!(load(&with, true).unwrap().capabilities().init);
}

// ---------------------------------------------------------------------------------------------
// Image checkpoints

/// A guest with no snapshot exports whose state is in a mutable global (batches seen) and in
/// memory (records seen, which `_initialize` sets to `INITIAL`); every batch grows its memory
/// by a page and emits one record whose value is the two counters, 4 bytes each.
fn image_guest(initial: u32) -> String {
    format!(
        r#"(module
  (import "weir" "emit" (func $emit (param i32 i32)))
  (memory (export "memory") 1)
  (global $batches (mut i32) (i32.const 0))
  (func (export "weir_abi_version") (result i32) (i32.const 1))
  (func (export "weir_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "_initialize") (i32.store (i32.const 0) (i32.const {initial})))
  (func (export "weir_process") (param $ptr i32) (param $len i32) (result i32)
    (global.set $batches (i32.add (global.get $batches) (i32.const 1)))
    (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.load (local.get $ptr))))
    (drop (memory.grow (i32.const 1)))
    (i32.store (i32.const 1024) (i32.const 1))
    (i32.store (i32.const 1028) (i32.const 0))
    (i64.store (i32.const 1032) (i64.const 0))
    (i32.store (i32.const 1040) (i32.const 0))
    (i32.store (i32.const 1044) (i32.const 8))
    (i32.store (i32.const 1048) (global.get $batches))
    (i32.store (i32.const 1052) (i32.load (i32.const 0)))
    (call $emit (i32.const 1024) (i32.const 32))
    (i32.const 0)))"#
    )
}

/// The two counters `image_guest` emits for one batch of `records` records.
fn image_counters(instance: &mut GuestInstance, records: usize) -> (u32, u32) {
    let input: Vec<(&str, &str, i64)> = (0..records).map(|_| ("k", "v", 1)).collect();
    let output = rows(&instance.process(&batch(0, &input)).unwrap());
    let [(_, value, _)] = output.as_slice() else {
        panic!("expected one record, got {output:?}");
    };
    let word = |i: usize| u32::from_le_bytes(value[i..i + 4].try_into().unwrap());
    (word(0), word(4))
}

fn load_capturing(engine: &TestEngine, source: &str, capture: StateCapture) -> OperatorModule {
    engine
        .load(ModuleSource::bytes("image.wat", source.as_bytes()), capture)
        .unwrap()
}

#[test]
fn an_image_restores_memory_and_globals_without_running_initialize_again() {
    let engine = engine();
    let module = load_capturing(&engine, &image_guest(1000), StateCapture::Auto);
    let layout = module
        .image_layout()
        .expect("no snapshot exports: an image");
    assert_eq!((layout.memories.len(), layout.globals.len()), (1, 1));

    let mut original = module.instantiate(context(0), b"").unwrap();
    assert_eq!(image_counters(&mut original, 3), (1, 1003));
    assert_eq!(image_counters(&mut original, 2), (2, 1005));
    let image = original.snapshot(CheckpointId(7)).unwrap();
    assert!(
        image.len() > 3 * 65536,
        "three pages of memory: {}",
        image.len()
    );

    let mut restored = module.instantiate(context(0), b"").unwrap();
    restored.restore(&image).unwrap();
    // 1006, not 1001: the restored memory was not initialised again.
    assert_eq!(image_counters(&mut restored, 1), (3, 1006));
    assert_eq!(
        image_counters(&mut original, 1),
        (3, 1006),
        "as if never interrupted"
    );

    let mut fresh = module.instantiate(context(0), b"").unwrap();
    fresh.restore(&[]).unwrap();
    assert_eq!(
        image_counters(&mut fresh, 1),
        (1, 1001),
        "an empty state is a fresh start"
    );
}

/// An engine with a pool of `instances` image instances.
fn pooled_engine(instances: u32) -> TestEngine {
    let limits = test_limits();
    let options = EngineOptions {
        image_pool: Some(ImagePool {
            instances,
            max_memory_bytes: limits.max_memory_bytes,
        }),
        ..EngineOptions::default()
    };
    TestEngine {
        engine: WasmEngine::with_options(&options).unwrap(),
        limits,
    }
}

#[test]
fn an_instance_made_for_restore_takes_the_image_in_place_or_initialises_without_one() {
    for engine in [engine(), pooled_engine(4)] {
        let module = load_capturing(&engine, &image_guest(1000), StateCapture::Image);
        let mut original = module.instantiate(context(0), b"").unwrap();
        assert_eq!(image_counters(&mut original, 3), (1, 1003));
        let image = original.snapshot(CheckpointId(1)).unwrap();

        let mut restored = module.instantiate_for_restore(context(0), b"").unwrap();
        restored.restore(&image).unwrap();
        assert_eq!(
            image_counters(&mut restored, 1),
            (2, 1004),
            "not initialised again"
        );

        // No image after all: the instance is initialised as `instantiate` would have.
        let mut empty = module.instantiate_for_restore(context(0), b"").unwrap();
        empty.restore(&[]).unwrap();
        assert_eq!(image_counters(&mut empty, 1), (1, 1001), "a fresh start");
        let mut unused = module.instantiate_for_restore(context(0), b"").unwrap();
        assert_eq!(
            image_counters(&mut unused, 1),
            (1, 1001),
            "a call before any restore initialises it first"
        );

        // A module checkpointed through its exports gets an ordinary instance.
        let count = std::fs::read(count_path()).unwrap();
        let exports = engine
            .load(
                ModuleSource::bytes("count.wat", &count),
                StateCapture::Exports,
            )
            .unwrap();
        let mut instance = exports.instantiate_for_restore(context(0), b"").unwrap();
        instance.restore(&[]).unwrap();
    }
}

#[test]
fn a_pool_reuses_its_slots_and_a_full_pool_fails_the_instance_by_name() {
    // Room for the load-time check's instance and two more.
    let engine = pooled_engine(2);
    let module = load_capturing(&engine, &image_guest(1000), StateCapture::Image);
    let mut original = module.instantiate(context(0), b"").unwrap();
    assert_eq!(image_counters(&mut original, 5), (1, 1005));
    let image = original.snapshot(CheckpointId(1)).unwrap();
    for round in 0..5 {
        // Each restored instance ends before the next starts: they share the second slot.
        let mut restored = module.instantiate_for_restore(context(1), b"").unwrap();
        restored.restore(&image).unwrap();
        assert_eq!(image_counters(&mut restored, 1), (2, 1006), "round {round}");
    }
    let _second = module.instantiate(context(1), b"").unwrap();
    let err = module.instantiate(context(1), b"").unwrap_err();
    assert!(
        matches!(err.failure, GuestFailure::Instantiation { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("than their instance pool has room for"),
        "says which pool is full: {err}"
    );
    assert_eq!((err.operator.as_str(), err.subtask), ("test-op", 1));
}

#[test]
fn a_module_that_does_not_fit_the_pool_is_allocated_on_demand() {
    // Five tables: more than a pool slot has room for.
    let tables = fixture(
        r#"(table 1 funcref) (table 1 funcref) (table 1 funcref) (table 1 funcref)
           (table 1 funcref)
           (func (export "weir_process") (param i32 i32) (result i32) (i32.const 0))"#,
    );
    let engine = pooled_engine(4);
    let module = engine
        .load(
            ModuleSource::bytes("tables.wat", tables.as_bytes()),
            StateCapture::Image,
        )
        .unwrap();
    let mut instance = module.instantiate(context(0), b"").unwrap();
    let image = instance.snapshot(CheckpointId(1)).unwrap();
    let mut restored = module.instantiate_for_restore(context(0), b"").unwrap();
    restored.restore(&image).unwrap();
    instance.process(&batch(0, &[("k", "v", 1)])).unwrap();
}

#[test]
fn exports_mode_takes_no_image_and_auto_prefers_the_guests_exports() {
    let engine = engine();
    let exports = load_capturing(&engine, &image_guest(0), StateCapture::Exports);
    assert!(exports.image_layout().is_none());
    let mut instance = exports.instantiate(context(0), b"").unwrap();
    image_counters(&mut instance, 1);
    assert!(
        instance.snapshot(CheckpointId(1)).unwrap().is_empty(),
        "no weir_snapshot: empty"
    );

    let count = std::fs::read(count_path()).unwrap();
    let auto = engine
        .load(ModuleSource::bytes("count.wat", &count), StateCapture::Auto)
        .unwrap();
    assert!(auto.image_layout().is_none(), "count exports weir_snapshot");
    let image = engine
        .load(
            ModuleSource::bytes("count.wat", &count),
            StateCapture::Image,
        )
        .unwrap();
    assert!(
        image.image_layout().is_some(),
        "image mode overrides the exports"
    );
}

#[test]
fn an_image_of_another_module_or_a_damaged_one_is_refused_by_name() {
    let engine = engine();
    let module = load_capturing(&engine, &image_guest(1000), StateCapture::Image);
    let mut original = module.instantiate(context(0), b"").unwrap();
    image_counters(&mut original, 1);
    let image = original.snapshot(CheckpointId(1)).unwrap();

    let other = load_capturing(&engine, &image_guest(2000), StateCapture::Image);
    let mut target = other.instantiate(context(0), b"").unwrap();
    let err = target.restore(&image).unwrap_err();
    assert!(matches!(err.failure, GuestFailure::Image { .. }), "{err}");
    let (theirs, ours) = (
        module.image_layout().unwrap().module_hash.0,
        other.image_layout().unwrap().module_hash.0,
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!("{theirs:032x}")) && message.contains(&format!("{ours:032x}")),
        "names both hashes: {message}"
    );

    // The header (identity, globals, page table) is checked by its own checksum at restore.
    for at in [0, 40] {
        let mut damaged = image.clone();
        damaged[at] ^= 0x10;
        for mut target in [
            module.instantiate(context(0), b"").unwrap(),
            module.instantiate_for_restore(context(0), b"").unwrap(),
        ] {
            let err = target.restore(&damaged).unwrap_err();
            assert!(
                matches!(err.failure, GuestFailure::Image { .. }),
                "byte {at}: {err}"
            );
            assert!(target.is_poisoned());
        }
    }

    // A full image's pages are not hashed again at restore: the storage's CRC over every byte
    // it reads refuses a damaged page before it gets there.
    let dir = tempfile::tempdir().unwrap();
    let storage = LocalStorage::new(CheckpointLayout::new(dir.path()));
    let task = TaskId::new("op", 0);
    let id = CheckpointId(1);
    let handle = storage
        .write_state(CheckpointKind::Checkpoint, id, &task, &image)
        .unwrap();
    let location = storage.layout().location(CheckpointKind::Checkpoint, id);
    let file = CheckpointLayout::file_in(&location, &handle.file).unwrap();
    let stored = std::fs::read(&file).unwrap();
    for at in [image.len() / 2, image.len() - 1] {
        let mut damaged = stored.clone();
        damaged[HEADER_LEN + at] ^= 0x10;
        std::fs::write(&file, &damaged).unwrap();
        let err = storage.read_state(&location, &handle).unwrap_err();
        assert!(err.to_string().contains("checksum"), "byte {at}: {err}");
    }
}

#[test]
fn a_module_an_image_cannot_capture_is_refused_naming_the_reason() {
    let table_writer = fixture(
        r#"(table 1 funcref)
           (func $f)
           (func (export "weir_process") (param i32 i32) (result i32)
             (table.set (i32.const 0) (ref.func $f))
             (i32.const 0))
           (elem declare func $f)"#,
    );
    for capture in [StateCapture::Image, StateCapture::Auto] {
        let err = engine()
            .load(
                ModuleSource::bytes("tables.wat", table_writer.as_bytes()),
                capture,
            )
            .unwrap_err();
        assert!(
            matches!(err.problem, ModuleProblem::ImageRefused { .. }),
            "{err}"
        );
        let message = err.to_string();
        assert!(
            message.contains("table.set") && message.contains("checkpoint = \"exports\""),
            "{message}"
        );
    }
    engine()
        .load(
            ModuleSource::bytes("tables.wat", table_writer.as_bytes()),
            StateCapture::Exports,
        )
        .expect("exports mode does not look at tables");
}

#[test]
fn switching_between_exports_and_image_names_the_setting_to_restore_with() {
    let engine = engine();
    let count = std::fs::read(count_path()).unwrap();
    let as_exports = engine
        .load(
            ModuleSource::bytes("count.wat", &count),
            StateCapture::Exports,
        )
        .unwrap();
    let as_image = engine
        .load(
            ModuleSource::bytes("count.wat", &count),
            StateCapture::Image,
        )
        .unwrap();
    let input = batch(0, &[("k", "v", 1)]);

    let mut imaged = as_image.instantiate(context(0), b"").unwrap();
    imaged.process(&input).unwrap();
    let image = imaged.snapshot(CheckpointId(1)).unwrap();
    let mut target = as_exports.instantiate(context(0), b"").unwrap();
    let message = target.restore(&image).unwrap_err().to_string();
    assert!(message.contains("checkpoint = \"image\""), "{message}");

    let mut exported = as_exports.instantiate(context(0), b"").unwrap();
    exported.process(&input).unwrap();
    let snapshot = exported.snapshot(CheckpointId(1)).unwrap();
    let mut target = as_image.instantiate(context(0), b"").unwrap();
    let message = target.restore(&snapshot).unwrap_err().to_string();
    assert!(message.contains("checkpoint = \"exports\""), "{message}");
}

// Incremental images

/// The kind of an image: full or delta.
fn image_kind(state: &[u8]) -> image::format::ImageKind {
    image::format::read_header(state).unwrap().kind
}

fn ids(ids: &[u64]) -> Vec<crate::ids::CheckpointId> {
    ids.iter().copied().map(crate::ids::CheckpointId).collect()
}

/// An imaged instance of `image_guest` whose images are full every `full_every`.
fn incremental_instance(module: &OperatorModule, full_every: u32) -> GuestInstance {
    let mut instance = module.instantiate(context(0), b"").unwrap();
    instance.set_image_policy(ImagePolicy {
        full_every,
        ..ImagePolicy::default()
    });
    instance
}

#[test]
fn states_restored_as_read_resume_incremental_images_from_a_full_image_or_a_chain() {
    use image::format::ImageKind::{Delta, Full};
    let engine = pooled_engine(4);
    let module = load_capturing(&engine, &image_guest(1000), StateCapture::Image);
    let mut original = incremental_instance(&module, 4);
    let mut taken = Vec::new();
    for id in 1..=3 {
        image_counters(&mut original, id as usize);
        taken.push(
            original
                .snapshot_incremental(CheckpointId(id))
                .unwrap()
                .state,
        );
    }

    // The full image alone, in an instance made for it: resumed, the next image is a delta
    // on checkpoint 1.
    let mut restored = module.instantiate_for_restore(context(0), b"").unwrap();
    restored.set_image_policy(ImagePolicy {
        full_every: 4,
        ..ImagePolicy::default()
    });
    restored
        .restore_chain_owned(Vec::new(), taken[0].clone(), true)
        .unwrap();
    assert_eq!(image_counters(&mut restored, 2), (2, 1003));
    let next = restored.snapshot_incremental(CheckpointId(2)).unwrap();
    assert_eq!((image_kind(&next.state), next.chain), (Delta, ids(&[1])));
    assert_eq!(next.state, taken[1], "the same delta as the original took");

    // The chain of checkpoint 3, as read.
    let mut restored = incremental_instance(&module, 4);
    restored
        .restore_chain_owned(taken[..2].to_vec(), taken[2].clone(), true)
        .unwrap();
    assert_eq!(image_counters(&mut restored, 4), (4, 1010));
    let next = restored.snapshot_incremental(CheckpointId(4)).unwrap();
    assert_eq!(
        (image_kind(&next.state), next.chain),
        (Delta, ids(&[1, 2, 3]))
    );
    assert_eq!(image_kind(&taken[0]), Full);
}

#[test]
fn incremental_images_are_deltas_between_full_ones_and_restore_from_their_chain() {
    use image::format::ImageKind::{Delta, Full};
    let engine = engine();
    let module = load_capturing(&engine, &image_guest(1000), StateCapture::Image);
    let mut original = incremental_instance(&module, 4);
    assert!(original.is_incremental());
    let mut taken = Vec::new();
    for id in 1..=5 {
        image_counters(&mut original, id as usize);
        taken.push(original.snapshot_incremental(CheckpointId(id)).unwrap());
    }
    let kinds: Vec<_> = taken.iter().map(|s| image_kind(&s.state)).collect();
    assert_eq!(kinds, [Full, Delta, Delta, Delta, Full]);
    let chains: Vec<_> = taken.iter().map(|s| s.chain.clone()).collect();
    assert_eq!(
        chains,
        [ids(&[]), ids(&[1]), ids(&[1, 2]), ids(&[1, 2, 3]), ids(&[])]
    );
    assert!(
        taken[1].state.len() * 4 < taken[0].state.len(),
        "a delta of a few changed words is small: {} vs {}",
        taken[1].state.len(),
        taken[0].state.len()
    );

    // Restore checkpoint 3 from its chain, resuming it: the next image is a delta on it.
    let mut restored = incremental_instance(&module, 4);
    let chain = [taken[0].state.as_slice(), taken[1].state.as_slice()];
    restored
        .restore_chain(&chain, &taken[2].state, true)
        .unwrap();
    // Checkpoint 3 saw 3 batches and 1000 + 1 + 2 + 3 records.
    assert_eq!(image_counters(&mut restored, 4), (4, 1010));
    let next = restored.snapshot_incremental(CheckpointId(6)).unwrap();
    assert_eq!(image_kind(&next.state), Delta);
    assert_eq!(next.chain, ids(&[1, 2, 3]));

    // That delta restores with its chain to the same state.
    let mut again = incremental_instance(&module, 4);
    let chain = [
        taken[0].state.as_slice(),
        taken[1].state.as_slice(),
        taken[2].state.as_slice(),
    ];
    again.restore_chain(&chain, &next.state, false).unwrap();
    assert_eq!(image_counters(&mut again, 1), (5, 1011));
    assert_eq!(image_counters(&mut restored, 1), (5, 1011));
    // Not resumed: the next image is full.
    assert_eq!(
        image_kind(&again.snapshot_incremental(CheckpointId(7)).unwrap().state),
        Full
    );
}

#[test]
fn an_aborted_checkpoint_in_the_chain_makes_the_next_image_full() {
    use image::format::ImageKind::{Delta, Full};
    let engine = engine();
    let module = load_capturing(&engine, &image_guest(0), StateCapture::Image);
    let mut instance = incremental_instance(&module, 10);
    let kind_at = |instance: &mut GuestInstance, id| {
        image_counters(instance, 1);
        let taken = instance.snapshot_incremental(id).unwrap();
        (image_kind(&taken.state), taken.chain)
    };
    assert_eq!(kind_at(&mut instance, CheckpointId(1)), (Full, ids(&[])));
    assert_eq!(kind_at(&mut instance, CheckpointId(2)), (Delta, ids(&[1])));
    instance.checkpoint_aborted(CheckpointId(7));
    assert_eq!(
        kind_at(&mut instance, CheckpointId(3)),
        (Delta, ids(&[1, 2])),
        "an abort outside the chain changes nothing"
    );
    instance.checkpoint_aborted(CheckpointId(2));
    assert_eq!(kind_at(&mut instance, CheckpointId(4)), (Full, ids(&[])));
    assert_eq!(kind_at(&mut instance, CheckpointId(5)), (Delta, ids(&[4])));
    instance.checkpoint_aborted(CheckpointId(5));
    assert_eq!(
        kind_at(&mut instance, CheckpointId(6)),
        (Full, ids(&[])),
        "the previous image itself"
    );
}

#[test]
fn a_savepoints_image_is_full_and_the_chain_goes_on_past_it() {
    use image::format::ImageKind::{Delta, Full};
    let engine = engine();
    let module = load_capturing(&engine, &image_guest(0), StateCapture::Image);
    let mut instance = incremental_instance(&module, 10);
    image_counters(&mut instance, 1);
    instance.snapshot_incremental(CheckpointId(1)).unwrap();
    image_counters(&mut instance, 1);
    let savepoint = instance.snapshot(CheckpointId(2)).unwrap();
    assert_eq!(image_kind(&savepoint), Full);
    image_counters(&mut instance, 1);
    let next = instance.snapshot_incremental(CheckpointId(3)).unwrap();
    assert_eq!(image_kind(&next.state), Delta);
    assert_eq!(next.chain, ids(&[1]), "the savepoint is no link");

    // Restored from a savepoint (not resumed), the next image is full.
    let mut restored = incremental_instance(&module, 10);
    restored.restore_chain(&[], &savepoint, false).unwrap();
    let after = restored.snapshot_incremental(CheckpointId(4)).unwrap();
    assert_eq!((image_kind(&after.state), after.chain), (Full, ids(&[])));
}

#[test]
fn full_every_one_turns_incremental_images_off() {
    let engine = engine();
    let module = load_capturing(&engine, &image_guest(0), StateCapture::Image);
    let mut instance = incremental_instance(&module, 1);
    assert!(!instance.is_incremental());
    for id in 1..=3 {
        image_counters(&mut instance, 1);
        let taken = instance.snapshot_incremental(CheckpointId(id)).unwrap();
        assert_eq!(image_kind(&taken.state), image::format::ImageKind::Full);
        assert!(taken.chain.is_empty());
    }
    let exports = load_capturing(&engine, &image_guest(0), StateCapture::Exports);
    assert!(!incremental_instance(&exports, 10).is_incremental());
}

#[test]
fn a_damaged_or_missing_link_fails_the_restore_naming_the_chain() {
    let engine = engine();
    let module = load_capturing(&engine, &image_guest(0), StateCapture::Image);
    let mut instance = incremental_instance(&module, 10);
    let mut taken = Vec::new();
    for id in 1..=3 {
        image_counters(&mut instance, 1);
        taken.push(
            instance
                .snapshot_incremental(CheckpointId(id))
                .unwrap()
                .state,
        );
    }
    let mut damaged = taken[1].clone();
    let at = damaged.len() - 20;
    damaged[at] ^= 0x01;
    let mut target = incremental_instance(&module, 10);
    let err = target
        .restore_chain(&[&taken[0], &damaged], &taken[2], true)
        .unwrap_err();
    assert!(matches!(err.failure, GuestFailure::Image { .. }), "{err}");
    assert!(err.to_string().contains("delta 1 of the chain"), "{err}");
    assert!(target.is_poisoned());

    let mut target = incremental_instance(&module, 10);
    let err = target
        .restore_chain(&[&taken[0]], &taken[2], true)
        .unwrap_err();
    assert!(err.to_string().contains("delta 1 of the chain"), "{err}");

    let exports = load_capturing(&engine, &image_guest(0), StateCapture::Exports);
    let mut target = exports.instantiate(context(0), b"").unwrap();
    let err = target
        .restore_chain(&[&taken[0]], &taken[1], true)
        .unwrap_err();
    assert!(
        err.to_string().contains("not checkpointed as an image"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Files and bytes that are not modules: the message names what they are

#[test]
fn random_bytes_are_not_a_module_because_the_magic_is_missing() {
    let bytes: Vec<u8> = (0u32..256)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let message = engine()
        .load(
            ModuleSource::bytes("junk.wasm", &bytes),
            StateCapture::Exports,
        )
        .unwrap_err()
        .to_string();
    assert!(message.contains("\\0asm"), "{message}");
    assert!(!message.contains("utf-8"), "{message}");
}

#[test]
fn an_empty_module_says_the_file_is_empty() {
    let message = engine()
        .load(
            ModuleSource::bytes("empty.wasm", b""),
            StateCapture::Exports,
        )
        .unwrap_err()
        .to_string();
    assert!(message.contains("the file is empty"), "{message}");
}

#[test]
fn text_is_read_as_wat_when_it_looks_like_wat_or_is_named_wat() {
    let message = engine()
        .load(
            ModuleSource::bytes("notes.txt", b"hello, this is not a module"),
            StateCapture::Exports,
        )
        .unwrap_err()
        .to_string();
    assert!(message.contains("\\0asm"), "{message}");
    // Comments and whitespace before the `(`, or a .wat name, make it WAT text.
    for (name, text) in [
        ("a.wasm", "  ;; a comment\n (; block ;) (module (func"),
        ("a.wat", "module"),
    ] {
        let message = engine()
            .load(
                ModuleSource::bytes(name, text.as_bytes()),
                StateCapture::Exports,
            )
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("not a valid WebAssembly"),
            "{name}: {message}"
        );
    }
}

#[test]
fn a_directory_or_a_device_as_module_file_is_not_a_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    for path in [dir.path().to_path_buf(), PathBuf::from("/dev/zero")] {
        let message = engine()
            .load(ModuleSource::file(&path), StateCapture::Exports)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("not a regular file"),
            "{}: {message}",
            path.display()
        );
    }
}
