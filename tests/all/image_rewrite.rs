//! Image checkpoints, load-time half (`weir::wasm::image::rewrite`), on real compiled guests:
//! the Rust example operators and the C, AssemblyScript and Zig count keep their state in
//! memory and mutable globals only (the Rust, C and Zig stack pointer, AssemblyScript's
//! allocator), so an image must accept them; their rewrite must load in the host like the
//! original and compute exactly what the original computes.

use weir::ids::CheckpointId;
use weir::wasm::image::rewrite::{
    AddressType, GlobalValueType, ImageRefusal, RewriteError, analyze, rewrite,
};
use weir::wasm::{LoadOptions, ModuleSource, OperatorModule, WasmEngine};
use weir_abi::{Batch, BatchBuilder};
use weir_tests::guests;

use crate::support::guest_instance;

/// Every compiled guest that runs without a config: the Rust examples always, C,
/// AssemblyScript and Zig unless the build skipped them (said loudly; never in CI).
fn compiled_guests() -> Vec<(&'static str, &'static str)> {
    let mut all = vec![
        ("rust-count", guests::COUNT),
        ("rust-split", guests::SPLIT),
        ("rust-dedup", guests::DEDUP),
    ];
    let foreign = [
        ("c-count", guests::C_COUNT),
        ("as-count", guests::AS_COUNT),
        ("zig-count", guests::ZIG_COUNT),
    ];
    for (name, path) in foreign {
        match path {
            Some(path) => all.push((name, path)),
            None => crate::support::skip(
                &format!("the image rewrite of the {name} guest"),
                "it was not built (WEIR_SKIP_FOREIGN_GUESTS=1)",
            ),
        }
    }
    all
}

/// Batches of keyed records whose values are lines of words, so that every guest has work.
fn input() -> Vec<Vec<u8>> {
    let words = ["apple", "pear", "fig", "kiwi", "plum"];
    (0..12)
        .map(|b| {
            let mut batch = BatchBuilder::new(0);
            for i in 0..9 {
                let n = b * 9 + i;
                let key = format!("k{}", (n * 7) % 11);
                let line = format!("{} {}", words[n % 5], words[(n * 3) % 5]);
                batch.push(key.as_bytes(), line.as_bytes(), n as i64);
            }
            batch.into_bytes()
        })
        .collect()
}

/// What an instance emits for the input, batch by batch, and the snapshot it takes every
/// fourth batch (when it has a snapshot export).
fn run(module: &OperatorModule, name: &str) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let mut guest = guest_instance(module, name);
    let mut emitted = Vec::new();
    let mut snapshots = Vec::new();
    for (i, batch) in input().iter().enumerate() {
        for out in guest
            .process(batch)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
        {
            Batch::decode(&out).unwrap_or_else(|e| panic!("{name} emitted garbage: {e}"));
            emitted.push(out);
        }
        if i % 4 == 3 && module.capabilities().snapshot {
            snapshots.push(guest.snapshot(CheckpointId(i as u64)).unwrap());
        }
    }
    (emitted, snapshots)
}

#[test]
fn compiled_guests_are_accepted_and_their_rewrite_computes_what_they_compute() {
    let engine = WasmEngine::new().unwrap();
    for (name, path) in compiled_guests() {
        let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let analysis = analyze(&bytes).unwrap_or_else(|e| panic!("{name} refused: {e}"));
        let layout = analysis.layout();
        assert_eq!(layout.memories.len(), 1, "{name}: {layout:?}");
        assert_eq!(layout.memories[0].address_type, AddressType::I32);
        assert!(
            layout
                .globals
                .iter()
                .any(|g| g.value_type == GlobalValueType::I32),
            "{name} has no mutable i32 global (a stack pointer or allocator state): {layout:?}"
        );

        let rewritten = rewrite(&bytes, &analysis).unwrap_or_else(|e| panic!("{name}: {e}"));
        // The added exports are there: the rewritten module now exports exactly the layout's
        // reserved names, which is why it cannot be analysed again.
        let reserved: Vec<String> = match analyze(&rewritten) {
            Err(RewriteError::Refused { refusals }) => refusals
                .into_iter()
                .map(|refusal| match refusal {
                    ImageRefusal::ReservedExport { name } => name,
                    other => panic!("{name}: the rewrite introduced a problem: {other}"),
                })
                .collect(),
            other => panic!("{name}: the rewritten module was not refused again: {other:?}"),
        };
        let expected: Vec<String> = layout
            .memories
            .iter()
            .map(|m| m.export.clone())
            .chain(layout.globals.iter().map(|g| g.export.clone()))
            .collect();
        assert_eq!(reserved, expected, "{name}");

        // The host loads, checks and runs the rewrite like the original.
        let load = |bytes: &[u8]| {
            OperatorModule::load(
                &engine,
                ModuleSource::bytes(name, bytes),
                LoadOptions::default(),
            )
        };
        let original = load(&bytes).unwrap_or_else(|e| panic!("{e}"));
        let prepared =
            load(&rewritten).unwrap_or_else(|e| panic!("the rewrite of {name} does not load: {e}"));
        assert_eq!(original.capabilities(), prepared.capabilities(), "{name}");
        let (emitted, snapshots) = run(&original, name);
        assert!(!emitted.is_empty(), "{name} emitted nothing");
        assert_eq!(
            run(&prepared, name),
            (emitted, snapshots),
            "{name}: the rewrite computes something else"
        );
    }
}
