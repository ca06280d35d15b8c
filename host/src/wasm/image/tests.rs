//! Tests of the image rewrite: each refusal on its own and several together, the layout, and
//! rewritten modules that validate, instantiate in wasmtime, expose the state the original's
//! code writes, and keep every other section byte for byte.

use wasmtime::{Engine, Instance, Linker, Module, Store, Val};

use super::rewrite::*;

// ---------------------------------------------------------------------------------------------
// Helpers

/// The binary of a module written in WAT.
fn wasm(text: &str) -> Vec<u8> {
    wat::parse_str(text).unwrap_or_else(|e| panic!("bad test module: {e}\n{text}"))
}

/// The analysis of a module an image must accept.
fn accepted(text: &str) -> ImageAnalysis {
    analyze(&wasm(text)).unwrap_or_else(|e| panic!("refused: {e}"))
}

/// The reasons an image refuses a module it must refuse, and the error's message.
fn refused(text: &str) -> (Vec<ImageRefusal>, String) {
    match analyze(&wasm(text)) {
        Err(error @ RewriteError::Refused { .. }) => {
            let message = error.to_string();
            let RewriteError::Refused { refusals } = error else {
                unreachable!()
            };
            (refusals, message)
        }
        Err(other) => panic!("failed otherwise than by refusing: {other}"),
        Ok(analysis) => panic!("accepted: {:?}", analysis.layout()),
    }
}

/// The single reason an image refuses a module, checked to carry `words` and the advice.
fn refused_once(text: &str, words: &[&str]) -> ImageRefusal {
    let (refusals, message) = refused(text);
    assert_eq!(refusals.len(), 1, "expected one reason, got: {message}");
    for word in words {
        assert!(message.contains(word), "`{word}` missing from: {message}");
    }
    if !matches!(refusals[0], ImageRefusal::ReservedExport { .. }) {
        assert!(
            message.contains("export weir_snapshot and weir_restore")
                && message.contains("checkpoint = \"exports\""),
            "the advice is missing from: {message}"
        );
    }
    refusals.into_iter().next().unwrap()
}

/// The module analysed and rewritten.
fn rewritten(bytes: &[u8]) -> (ImageAnalysis, Vec<u8>) {
    let analysis = analyze(bytes).unwrap_or_else(|e| panic!("refused: {e}"));
    let out = rewrite(bytes, &analysis).unwrap_or_else(|e| panic!("rewrite failed: {e}"));
    (analysis, out)
}

/// Every section of a module, in order: id and contents.
fn sections(bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    wasmparser::Parser::new(0)
        .parse_all(bytes)
        .filter_map(|payload| payload.unwrap().as_section())
        .map(|(id, range)| (id, bytes[range].to_vec()))
        .collect()
}

/// The name and kind of every export of a module, in order.
fn exports(bytes: &[u8]) -> Vec<(String, wasmparser::ExternalKind, u32)> {
    let mut all = Vec::new();
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let wasmparser::Payload::ExportSection(reader) = payload.unwrap() {
            for export in reader {
                let export = export.unwrap();
                all.push((export.name.to_string(), export.kind, export.index));
            }
        }
    }
    all
}

/// Compiles (and so validates) `bytes` in a default wasmtime engine and instantiates them
/// without imports.
fn instantiate(bytes: &[u8]) -> (Store<()>, Instance) {
    let engine = Engine::default();
    let module = Module::new(&engine, bytes).unwrap_or_else(|e| panic!("invalid module: {e:#}"));
    let mut store = Store::new(&engine, ());
    let instance = Instance::new(&mut store, &module, &[]).unwrap();
    (store, instance)
}

/// Calls the exported function `name`, which takes and returns nothing.
fn call(store: &mut Store<()>, instance: &Instance, name: &str) {
    instance
        .get_typed_func::<(), ()>(&mut *store, name)
        .unwrap_or_else(|e| panic!("no function `{name}`: {e:#}"))
        .call(&mut *store, ())
        .unwrap();
}

/// The value of the global exported as `name`.
fn global(store: &mut Store<()>, instance: &Instance, name: &str) -> Val {
    instance
        .get_global(&mut *store, name)
        .unwrap_or_else(|| panic!("no global exported as `{name}`"))
        .get(&mut *store)
}

// ---------------------------------------------------------------------------------------------
// Accepted modules and their layout

#[test]
fn a_module_without_mutable_globals_gets_only_its_memory_exported() {
    let bytes = wasm(
        r#"(module
             (memory (export "memory") 2 5)
             (global i32 (i32.const 7))
             (func (export "poke") (i32.store (i32.const 100) (i32.const 42))))"#,
    );
    let (analysis, out) = rewritten(&bytes);
    let layout = analysis.layout();
    assert_eq!(layout.rewrite_version, REWRITE_VERSION);
    assert_eq!(layout.module_hash, ModuleHash::of(&bytes));
    assert_eq!(
        layout.memories,
        vec![MemoryLayout {
            index: 0,
            export: "weir:image:memory:0".into(),
            minimum_pages: 2,
            maximum_pages: Some(5),
            address_type: AddressType::I32,
        }]
    );
    assert!(layout.globals.is_empty());

    let (mut store, instance) = instantiate(&out);
    call(&mut store, &instance, "poke");
    // The added export is the module's memory itself, not a copy.
    let image = instance
        .get_memory(&mut store, "weir:image:memory:0")
        .unwrap();
    assert_eq!(image.data(&store)[100], 42);
    assert_eq!(image.size(&store), 2);
}

/// Immutable and mutable globals of every number type, after an imported function and an
/// imported immutable global (so indices are offset by imports), and a data segment.
const GLOBALS: &str = r#"(module
  (import "env" "note" (func $note (param i32)))
  (import "env" "base" (global $base i32))
  (memory (export "memory") 1)
  (global $answer i32 (i32.const 42))
  (global $counter (mut i32) (i32.const 0))
  (global $big i64 (i64.const 1))
  (global $total (mut i64) (i64.const 0))
  (global $ratio (mut f32) (f32.const 0))
  (global $mean (mut f64) (f64.const 0))
  (global $lanes (mut v128) (v128.const i32x4 0 0 0 0))
  (data (i32.const 16) "image me")
  (func (export "set")
    (call $note (global.get $base))
    (global.set $counter (i32.add (global.get $base) (global.get $answer)))
    (global.set $total (i64.const -5000000000))
    (global.set $ratio (f32.const 1.5))
    (global.set $mean (f64.const -2.25))
    (global.set $lanes (v128.const i32x4 1 2 3 4))
    (i32.store8 (i32.const 16) (i32.const 73)))
  (func (export "counter") (result i32) (global.get $counter)))"#;

/// Instantiates a rewrite of [`GLOBALS`] (or the original) with `base` = 8.
fn instantiate_globals(bytes: &[u8]) -> (Store<()>, Instance) {
    let engine = Engine::default();
    let module = Module::new(&engine, bytes).unwrap_or_else(|e| panic!("invalid module: {e:#}"));
    let mut store = Store::new(&engine, ());
    let mut linker = Linker::new(&engine);
    linker.func_wrap("env", "note", |_: i32| {}).unwrap();
    let base = wasmtime::Global::new(
        &mut store,
        wasmtime::GlobalType::new(wasmtime::ValType::I32, wasmtime::Mutability::Const),
        Val::I32(8),
    )
    .unwrap();
    linker.define(&store, "env", "base", base).unwrap();
    let instance = linker.instantiate(&mut store, &module).unwrap();
    (store, instance)
}

#[test]
fn every_mutable_global_is_exported_by_its_index_and_reads_what_the_code_set() {
    let bytes = wasm(GLOBALS);
    let (analysis, out) = rewritten(&bytes);
    // The imported global is index 0, so the module's own globals start at 1.
    let expected = [
        (2, GlobalValueType::I32),
        (4, GlobalValueType::I64),
        (5, GlobalValueType::F32),
        (6, GlobalValueType::F64),
        (7, GlobalValueType::V128),
    ];
    let found: Vec<_> = analysis
        .layout()
        .globals
        .iter()
        .map(|g| {
            assert_eq!(g.export, format!("weir:image:global:{}", g.index));
            (g.index, g.value_type)
        })
        .collect();
    assert_eq!(found, expected);

    let (mut store, instance) = instantiate_globals(&out);
    call(&mut store, &instance, "set");
    let read =
        |store: &mut Store<()>, index: u32| global(store, &instance, &global_export_name(index));
    assert_eq!(read(&mut store, 2).unwrap_i32(), 50);
    assert_eq!(read(&mut store, 4).unwrap_i64(), -5_000_000_000);
    assert_eq!(read(&mut store, 5).unwrap_f32(), 1.5);
    assert_eq!(read(&mut store, 6).unwrap_f64(), -2.25);
    let lanes = read(&mut store, 7).unwrap_v128().as_u128();
    assert_eq!(lanes, 1 | 2 << 32 | 3 << 64 | 4 << 96);
    let memory = instance
        .get_memory(&mut store, "weir:image:memory:0")
        .unwrap();
    assert_eq!(&memory.data(&store)[16..24], b"Image me");

    // The export is the global itself: what the host writes, the code reads.
    instance
        .get_global(&mut store, &global_export_name(2))
        .unwrap()
        .set(&mut store, Val::I32(-7))
        .unwrap();
    let counter = instance
        .get_typed_func::<(), i32>(&mut store, "counter")
        .unwrap();
    assert_eq!(counter.call(&mut store, ()).unwrap(), -7);
}

#[test]
fn the_rewritten_module_behaves_like_the_original() {
    let bytes = wasm(GLOBALS);
    let (_, out) = rewritten(&bytes);
    let run = |bytes: &[u8]| {
        let (mut store, instance) = instantiate_globals(bytes);
        call(&mut store, &instance, "set");
        let counter = instance
            .get_typed_func::<(), i32>(&mut store, "counter")
            .unwrap()
            .call(&mut store, ())
            .unwrap();
        let memory = instance.get_memory(&mut store, "memory").unwrap();
        (counter, memory.data(&store).to_vec())
    };
    assert_eq!(run(&bytes), run(&out));
}

#[test]
fn every_section_but_the_exports_is_kept_byte_for_byte_and_in_order() {
    let bytes = wasm(
        r#"(module
             (@custom "weir-test-early" (before first) "\00\01\02 early")
             (type $unary (func (param i32) (result i32)))
             (memory (export "memory") 1)
             (table 2 funcref)
             (global $depth (mut i32) (i32.const 3))
             (export "depth" (global $depth))
             (elem (i32.const 0) $double $double)
             (func $double (type $unary) (i32.mul (local.get 0) (i32.const 2)))
             (func (export "call") (param i32) (result i32)
               (call_indirect (type $unary) (local.get 0) (i32.const 1)))
             (data (i32.const 0) "abc")
             (@custom "weir-test-late" "late \ff bytes"))"#,
    );
    let (_, out) = rewritten(&bytes);
    let before = sections(&bytes);
    let after = sections(&out);
    let without_exports = |all: &[(u8, Vec<u8>)]| -> Vec<(u8, Vec<u8>)> {
        all.iter().filter(|(id, _)| *id != 7).cloned().collect()
    };
    assert_eq!(without_exports(&before), without_exports(&after));
    // Names and both custom sections are among them.
    let custom_names: Vec<String> = wasmparser::Parser::new(0)
        .parse_all(&out)
        .filter_map(|p| match p.unwrap() {
            wasmparser::Payload::CustomSection(c) => Some(c.name().to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        custom_names,
        ["weir-test-early", "weir-test-late", "name"],
        "custom sections in output"
    );
    // The export section is in the same place, with the original entries first, unchanged.
    let ids = |all: &[(u8, Vec<u8>)]| all.iter().map(|(id, _)| *id).collect::<Vec<_>>();
    assert_eq!(ids(&before), ids(&after));
    let original = exports(&bytes);
    let now = exports(&out);
    assert_eq!(now[..original.len()], original[..]);
    let added: Vec<String> = now[original.len()..].iter().map(|e| e.0.clone()).collect();
    assert_eq!(added, ["weir:image:memory:0", "weir:image:global:0"]);

    let (mut store, instance) = instantiate(&out);
    let call = instance
        .get_typed_func::<i32, i32>(&mut store, "call")
        .unwrap();
    assert_eq!(call.call(&mut store, 21).unwrap(), 42);
    // The global is exported twice now, under its own name and the reserved one.
    assert_eq!(global(&mut store, &instance, "depth").unwrap_i32(), 3);
    assert_eq!(
        global(&mut store, &instance, "weir:image:global:0").unwrap_i32(),
        3
    );
}

#[test]
fn a_module_without_exports_gets_an_export_section_where_the_order_puts_it() {
    // A start section follows exports: the new section goes right before it.
    let with_start = wasm(
        r#"(module
             (memory 1)
             (global $ready (mut i32) (i32.const 0))
             (func $start (global.set $ready (i32.const 1)))
             (start $start)
             (data (i32.const 8) "x"))"#,
    );
    let (_, out) = rewritten(&with_start);
    let ids: Vec<u8> = sections(&out).iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [1, 3, 5, 6, 7, 8, 10, 11, 0], "sections of {ids:?}");
    let (mut store, instance) = instantiate(&out);
    assert_eq!(
        global(&mut store, &instance, "weir:image:global:0").unwrap_i32(),
        1
    );
    assert!(
        instance
            .get_memory(&mut store, "weir:image:memory:0")
            .is_some()
    );

    // Nothing after the globals but a custom section: the new section goes before it.
    let globals_last = wasm(
        r#"(module
             (global (mut i64) (i64.const 9))
             (@custom "trailer" "t"))"#,
    );
    let (_, out) = rewritten(&globals_last);
    let ids: Vec<u8> = sections(&out).iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, [6, 7, 0]);
    let (mut store, instance) = instantiate(&out);
    assert_eq!(
        global(&mut store, &instance, "weir:image:global:0").unwrap_i64(),
        9
    );

    // An empty module gains an empty export section and stays valid.
    let (analysis, out) = rewritten(&wasm("(module)"));
    assert!(analysis.layout().memories.is_empty() && analysis.layout().globals.is_empty());
    instantiate(&out);
}

#[test]
fn a_64_bit_memory_is_captured_and_says_so() {
    let bytes = wasm(
        r#"(module
             (memory i64 3)
             (func (export "poke") (i64.store (i64.const 65536) (i64.const -1))))"#,
    );
    let (analysis, out) = rewritten(&bytes);
    let memory = &analysis.layout().memories[0];
    assert_eq!(memory.address_type, AddressType::I64);
    assert_eq!((memory.minimum_pages, memory.maximum_pages), (3, None));
    let (mut store, instance) = instantiate(&out);
    call(&mut store, &instance, "poke");
    let image = instance
        .get_memory(&mut store, "weir:image:memory:0")
        .unwrap();
    assert_eq!(image.data(&store)[65536..65544], [0xff; 8]);
}

#[test]
fn a_second_memory_is_captured_by_its_index() {
    let bytes = wasm(
        r#"(module
             (memory $a 1)
             (memory $b 2 2)
             (func (export "poke") (i32.store8 $b (i32.const 70000) (i32.const 9))))"#,
    );
    let (analysis, out) = rewritten(&bytes);
    let indices: Vec<(u32, u64)> = analysis
        .layout()
        .memories
        .iter()
        .map(|m| (m.index, m.minimum_pages))
        .collect();
    assert_eq!(indices, [(0, 1), (1, 2)]);
    let (mut store, instance) = instantiate(&out);
    call(&mut store, &instance, "poke");
    let second = instance
        .get_memory(&mut store, "weir:image:memory:1")
        .unwrap();
    assert_eq!(second.data(&store)[70000], 9);
}

#[test]
fn the_layout_has_a_stable_serialised_form() {
    let analysis = accepted(
        r#"(module
             (memory 1 4)
             (global (mut f64) (f64.const 0)))"#,
    );
    let layout = analysis.layout();
    let json = serde_json::to_string(layout).unwrap();
    assert_eq!(
        json,
        format!(
            "{{\"rewrite_version\":1,\"module_hash\":\"{}\",\"memories\":[{{\"index\":0,\
             \"export\":\"weir:image:memory:0\",\"minimum_pages\":1,\"maximum_pages\":4,\
             \"address_type\":\"i32\"}}],\"globals\":[{{\"index\":0,\
             \"export\":\"weir:image:global:0\",\"value_type\":\"f64\"}}]}}",
            layout.module_hash
        )
    );
    let back: ImageLayout = serde_json::from_str(&json).unwrap();
    assert_eq!(&back, layout);
    let bad = json.replace(&layout.module_hash.to_string(), "not-a-hash");
    let error = serde_json::from_str::<ImageLayout>(&bad).unwrap_err();
    assert!(error.to_string().contains("not 32 hex digits"), "{error}");
}

#[test]
fn the_module_hash_is_xxh3_128_of_the_original_bytes() {
    // The reference value of XXH3-128 for empty input, in its canonical (big-endian) form.
    assert_eq!(
        ModuleHash::of(b"").to_string(),
        "99aa06d3014798d86001c324468d497f"
    );
    let hash = ModuleHash::of(b"some module");
    assert_eq!(ModuleHash::from_hex(&hash.to_string()), Some(hash));
    assert_ne!(hash, ModuleHash::of(b"some modulE"));
    assert_eq!(ModuleHash::from_hex("99aa"), None);
    assert_eq!(ModuleHash::from_hex(&"g".repeat(32)), None);
    assert_eq!(GlobalValueType::V128.byte_len(), 16);
}

// ---------------------------------------------------------------------------------------------
// Refusals, one at a time

#[test]
fn a_shared_memory_is_refused() {
    let refusal = refused_once("(module (memory 1 1 shared))", &["memory 0 is shared"]);
    assert!(matches!(refusal, ImageRefusal::SharedMemory { memory } if memory.index == 0));
}

#[test]
fn an_imported_memory_is_refused_naming_the_import() {
    let refusal = refused_once(
        r#"(module (import "env" "memory" (memory 1)) (memory 1))"#,
        &["memory 0 is imported (`env`.`memory`)"],
    );
    assert!(matches!(refusal, ImageRefusal::ImportedMemory { .. }));
}

#[test]
fn an_imported_table_is_refused_naming_the_import() {
    let refusal = refused_once(
        r#"(module (import "env" "table" (table 1 funcref)))"#,
        &[
            "table 0 is imported (`env`.`table`)",
            "does not capture tables",
        ],
    );
    assert!(matches!(refusal, ImageRefusal::ImportedTable { .. }));
}

#[test]
fn an_imported_mutable_global_is_refused_but_an_immutable_one_is_not() {
    let refusal = refused_once(
        r#"(module
             (import "env" "fixed" (global i32))
             (import "env" "moving" (global (mut i64))))"#,
        &["global 1 is an imported mutable global (`env`.`moving`)"],
    );
    assert!(
        matches!(refusal, ImageRefusal::ImportedMutableGlobal { global, .. } if global.index == 1)
    );
}

#[test]
fn mutable_reference_globals_are_refused_but_immutable_ones_are_not() {
    let refusal = refused_once(
        r#"(module
             (func $f)
             (global funcref (ref.func $f))
             (global $callback (mut funcref) (ref.null func)))"#,
        &["global 1 (`callback`) is a mutable funcref global"],
    );
    assert!(matches!(
        refusal,
        ImageRefusal::MutableReferenceGlobal { .. }
    ));
    refused_once(
        "(module (global (mut externref) (ref.null extern)))",
        &[
            "global 0 is a mutable externref global",
            "cannot save references",
        ],
    );
}

#[test]
fn every_table_mutation_is_refused() {
    for (instruction, code) in [
        ("table.set", "(table.set $t (i32.const 0) (ref.null func))"),
        (
            "table.grow",
            "(drop (table.grow $t (ref.null func) (i32.const 1)))",
        ),
        (
            "table.fill",
            "(table.fill $t (i32.const 0) (ref.null func) (i32.const 1))",
        ),
        (
            "table.copy",
            "(table.copy $t $t (i32.const 0) (i32.const 1) (i32.const 1))",
        ),
        (
            "table.init",
            "(table.init $t $passive (i32.const 0) (i32.const 0) (i32.const 1))",
        ),
    ] {
        let text = format!(
            r#"(module
                 (table $t 2 funcref)
                 (elem $passive func $mutate)
                 (func $mutate {code}))"#
        );
        let refusal = refused_once(
            &text,
            &[
                &format!("function 0 (`mutate`) uses `{instruction}`"),
                "an image does not capture tables",
            ],
        );
        assert!(
            matches!(&refusal, ImageRefusal::TableMutation { instruction: i, .. } if *i == instruction),
            "{refusal:?}"
        );
    }
}

#[test]
fn reading_and_calling_through_tables_is_allowed() {
    accepted(
        r#"(module
             (type $t (func))
             (table $t 1 funcref)
             (elem (i32.const 0) $f)
             (func $f)
             (func (drop (table.get $t (i32.const 0))) (drop (table.size $t))
               (call_indirect (type $t) (i32.const 0))))"#,
    );
}

#[test]
fn dropping_a_segment_is_refused() {
    refused_once(
        r#"(module
             (memory 1)
             (data $d "bytes")
             (func $forget (data.drop $d)))"#,
        &[
            "function 0 (`forget`) uses `data.drop`",
            "segments were dropped",
        ],
    );
    refused_once(
        r#"(module
             (elem $e func $forget)
             (func $forget (elem.drop $e)))"#,
        &["function 0 (`forget`) uses `elem.drop`"],
    );
    // memory.init alone reads the segment and leaves it in place: that is allowed.
    accepted(
        r#"(module
             (memory 1)
             (data $d "bytes")
             (func (memory.init $d (i32.const 0) (i32.const 0) (i32.const 5))))"#,
    );
}

#[test]
fn gc_types_are_refused() {
    let refusal = refused_once(
        "(module (type (func)) (type $point (struct (field (mut i32)))))",
        &["type 1 is a struct type"],
    );
    assert_eq!(
        refusal,
        ImageRefusal::GcType {
            type_index: 1,
            kind: "struct"
        }
    );
}

#[test]
fn a_memory_with_a_custom_page_size_is_refused() {
    refused_once(
        "(module (memory 1 (pagesize 1)))",
        &["memory 0 has pages of 1 bytes"],
    );
}

#[test]
fn an_export_with_a_reserved_name_is_refused() {
    let refusal = refused_once(
        r#"(module (global (export "weir:image:global:0") (mut i32) (i32.const 0)))"#,
        &[
            "export `weir:image:global:0` starts with `weir:image:`",
            "rename the export",
        ],
    );
    assert!(matches!(refusal, ImageRefusal::ReservedExport { .. }));
    // A rewritten module cannot be rewritten again, then.
    let (_, once) = rewritten(&wasm("(module (memory 1))"));
    match analyze(&once) {
        Err(RewriteError::Refused { refusals }) => assert_eq!(
            refusals,
            [ImageRefusal::ReservedExport {
                name: "weir:image:memory:0".into()
            }]
        ),
        other => panic!("a rewritten module was not refused: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Several refusals, and other failures

#[test]
fn every_reason_is_reported_not_only_the_first() {
    let (refusals, message) = refused(
        r#"(module
             (import "env" "clock" (global (mut i64)))
             (memory 1 1 shared)
             (table $t 1 funcref)
             (elem $e func $grow)
             (global $handler (mut externref) (ref.null extern))
             (export "weir:image:memory:0" (memory 0))
             (func $grow
               (drop (table.grow $t (ref.null func) (i32.const 1)))
               (drop (table.grow $t (ref.null func) (i32.const 1)))
               (table.set $t (i32.const 0) (ref.null func)))
             (func $also_grows
               (drop (table.grow $t (ref.null func) (i32.const 1)))
               (elem.drop $e)))"#,
    );
    let described: Vec<String> = refusals.iter().map(ToString::to_string).collect();
    let starts = [
        "global 0 is an imported mutable global (`env`.`clock`)",
        "memory 0 is shared",
        "global 1 (`handler`) is a mutable externref global",
        "export `weir:image:memory:0` starts with",
        "function 0 (`grow`) uses `table.grow`",
        "function 0 (`grow`) uses `table.set`",
        "function 1 (`also_grows`) uses `table.grow`",
        "function 1 (`also_grows`) uses `elem.drop`",
    ];
    assert_eq!(described.len(), starts.len(), "{described:#?}");
    for (found, start) in described.iter().zip(starts) {
        assert!(
            found.starts_with(start),
            "`{found}` should start with `{start}`"
        );
    }
    assert!(
        message.starts_with(
            "an image cannot capture this module faithfully: 8 reasons: (1) global 0 is"
        ),
        "{message}"
    );
    assert!(message.contains("; (8) function 1 (`also_grows`) uses `elem.drop`"));
}

#[test]
fn text_components_and_garbage_are_not_analysed() {
    match analyze(b"(module)") {
        Err(RewriteError::Malformed { message }) => {
            assert!(message.contains("must be turned into binary"), "{message}")
        }
        other => panic!("text was analysed: {other:?}"),
    }
    assert!(matches!(
        analyze(&wasm("(component)")),
        Err(RewriteError::NotAModule)
    ));
    let mut truncated = wasm(GLOBALS);
    truncated.truncate(truncated.len() - 7);
    match analyze(&truncated) {
        Err(RewriteError::Malformed { message }) => assert!(!message.is_empty()),
        other => panic!("a truncated module was analysed: {other:?}"),
    }
}

#[test]
fn rewrite_refuses_bytes_other_than_the_analysed_ones() {
    let analysis = accepted("(module (memory 1))");
    let other = wasm("(module (memory 2))");
    match rewrite(&other, &analysis) {
        Err(error @ RewriteError::NotAnalysed { .. }) => {
            let message = error.to_string();
            assert!(
                message.contains(&ModuleHash::of(&other).to_string())
                    && message.contains(&analysis.layout().module_hash.to_string()),
                "{message}"
            );
        }
        other => panic!("rewrote other bytes: {other:?}"),
    }
}
