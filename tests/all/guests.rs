//! Every example guest, loaded by the real host: batches in, snapshot, restore
//! into a fresh instance, continue — and the same output as an instance that
//! was never interrupted.

use weir::ids::CheckpointId;
use weir::wasm::{GuestInstance, LoadOptions, ModuleSource, OperatorModule, WasmEngine};
use weir_abi::{Batch, BatchBuilder};
use weir_tests::guests;

use crate::support::guest_instance;

type Rec = (Vec<u8>, Vec<u8>, i64);

fn load(path: &str) -> OperatorModule {
    let engine = WasmEngine::new().unwrap();
    OperatorModule::load(&engine, ModuleSource::file(path), LoadOptions::default())
        .unwrap_or_else(|e| panic!("{e}"))
}

fn batches(input: &[Rec], size: usize) -> Vec<Vec<u8>> {
    input
        .chunks(size)
        .map(|chunk| {
            let mut b = BatchBuilder::new(0);
            for (k, v, ts) in chunk {
                b.push(k, v, *ts);
            }
            b.into_bytes()
        })
        .collect()
}

fn run(instance: &mut GuestInstance, batch: &[u8]) -> Vec<Rec> {
    let mut out = Vec::new();
    for bytes in instance.process(batch).unwrap_or_else(|e| panic!("{e}")) {
        for r in Batch::decode(&bytes).unwrap().iter() {
            out.push((r.key.to_vec(), r.value.to_vec(), r.timestamp));
        }
    }
    out
}

/// Runs `input` straight through one instance, and again with a snapshot and a
/// restore into a fresh instance after every `every` batches; both outputs must match.
fn assert_restore_is_invisible(path: &str, name: &str, input: &[Rec], every: usize) -> Vec<Rec> {
    let module = load(path);
    let all = batches(input, 7);

    let mut straight = guest_instance(&module, name);
    let expected: Vec<Rec> = all.iter().flat_map(|b| run(&mut straight, b)).collect();

    let mut current = guest_instance(&module, name);
    let mut got = Vec::new();
    for (i, b) in all.iter().enumerate() {
        got.extend(run(&mut current, b));
        if (i + 1) % every == 0 {
            let state = current
                .snapshot(CheckpointId(i as u64 + 1))
                .unwrap_or_else(|e| panic!("{e}"));
            current
                .checkpoint_complete(CheckpointId(i as u64 + 1))
                .unwrap();
            current = guest_instance(&module, name);
            current.restore(&state).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    assert_eq!(
        got, expected,
        "{name}: output changed across snapshot/restore"
    );
    expected
}

fn words(n: usize) -> Vec<Rec> {
    let vocabulary = [
        "apple", "Pear", "fig", "apple!", "kiwi", "pear", "plum", "fig",
    ];
    (0..n)
        .map(|i| {
            let line = format!(
                "{} {} {}",
                vocabulary[i % 8],
                vocabulary[(i * 3) % 8],
                vocabulary[(i * 5 + 1) % 8]
            );
            (Vec::new(), line.into_bytes(), i as i64)
        })
        .collect()
}

fn keyed(n: usize) -> Vec<Rec> {
    (0..n)
        .map(|i| {
            (
                format!("k{}", (i * 7) % 13).into_bytes(),
                b"v".to_vec(),
                i as i64,
            )
        })
        .collect()
}

#[test]
fn split_guest_splits_lines_into_words_across_restores() {
    let out = assert_restore_is_invisible(guests::SPLIT, "split", &words(60), 2);
    assert_eq!(out.len(), 180);
    assert_eq!(out[0], (b"apple".to_vec(), b"apple".to_vec(), 0));
}

#[test]
fn count_guest_counts_per_key_across_restores() {
    let out = assert_restore_is_invisible(guests::COUNT, "count", &keyed(100), 3);
    let last_k0 = out.iter().rev().find(|(k, _, _)| k == b"k0").unwrap();
    let expected = keyed(100).iter().filter(|(k, _, _)| k == b"k0").count();
    assert_eq!(last_k0.1, expected.to_string().into_bytes());
}

#[test]
fn dedup_guest_drops_repeated_keys_across_restores() {
    let out = assert_restore_is_invisible(guests::DEDUP, "dedup", &keyed(100), 2);
    assert_eq!(out.len(), 13);
}

#[test]
fn wat_count_guest_counts_per_key_across_restores() {
    assert_restore_is_invisible(guests::WAT_COUNT, "wat-count", &keyed(100), 3);
}

#[test]
fn wat_and_rust_count_give_identical_output() {
    let input = keyed(200);
    let rust = assert_restore_is_invisible(guests::COUNT, "count", &input, 5);
    let wat = assert_restore_is_invisible(guests::WAT_COUNT, "count", &input, 4);
    assert_eq!(rust, wat);
}
