//! The ABI is language-neutral: the keyed running `count` written in Rust (SDK), WAT, C,
//! AssemblyScript and Zig — each from `docs/ABI.md` alone — and, as components of the world in
//! `abi/wit/operator.wit`, in Python, JavaScript and Rust for WASI 0.2, emits byte-identical
//! batches for the same input, whatever the batch sizes, and across snapshot → restore into a
//! fresh instance at random points, through the guest's snapshot exports and (core modules)
//! as an image. The foreign guests are built from source by `build.rs`; when their toolchains
//! were missing and `WEIR_SKIP_FOREIGN_GUESTS=1` let the build go on, the tests say loudly what
//! they skip (never in CI).
//!
//! Inputs are random but seeded: a failure names its seed, and rerunning reproduces it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use weir::ids::CheckpointId;
use weir::wasm::{
    GuestFailure, GuestInstance, LoadOptions, ModuleSource, OperatorModule, StateCapture,
    WasmEngine,
};
use weir_abi::BatchBuilder;
use weir_tests::guests;

use crate::support::{Rng, foreign, guest_instance};

/// One input record: key, value, timestamp.
type Rec = (Vec<u8>, Vec<u8>, i64);

/// The batches one `weir_process` call emitted, as raw bytes.
type Emitted = Vec<Vec<u8>>;

/// The seeds every randomised test runs with.
const SEEDS: [u64; 3] = [1, 0x5eed, 0xdead_beef];

/// A count guest under test: its name for messages, and its module.
struct Guest {
    name: &'static str,
    module: OperatorModule,
}

/// The engine every guest here is loaded with: one, with a module cache under the target
/// directory, so that the Python and JavaScript components (seconds to compile each) are
/// compiled once, not once per test.
fn engine() -> &'static WasmEngine {
    static ENGINE: OnceLock<WasmEngine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("module-cache");
        WasmEngine::with_module_cache(&cache).unwrap()
    })
}

impl Guest {
    fn load(name: &'static str, path: &str, capture: StateCapture) -> Guest {
        let options = LoadOptions {
            capture,
            ..LoadOptions::default()
        };
        let module = OperatorModule::load(engine(), ModuleSource::file(path), options)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        Guest { name, module }
    }

    fn instance(&self) -> GuestInstance {
        guest_instance(&self.module, self.name)
    }
}

/// Every count guest that was built: Rust and WAT always, C, AssemblyScript and Zig unless
/// skipped.
fn count_guests() -> Vec<Guest> {
    count_guests_capturing(StateCapture::Exports)
}

/// The count components that were built: Python, JavaScript and Rust for WASI 0.2, unless
/// skipped. Checkpointed through their exports, as every component is.
fn component_count_guests() -> Vec<Guest> {
    let built = [(
        "Rust component",
        "rust-component-count",
        guests::RUST_COMPONENT_COUNT,
    )];
    built
        .into_iter()
        .filter_map(|(language, name, path)| {
            foreign(language, path).map(|path| Guest::load(name, path, StateCapture::Exports))
        })
        .collect()
}

/// Every count guest, core modules and components.
fn every_count_guest() -> Vec<Guest> {
    let mut all = count_guests();
    all.extend(component_count_guests());
    all
}

/// [`count_guests`], checkpointed as `capture` says.
fn count_guests_capturing(capture: StateCapture) -> Vec<Guest> {
    let mut all = vec![
        Guest::load("rust-count", guests::COUNT, capture),
        Guest::load("wat-count", guests::WAT_COUNT, capture),
    ];
    if let Some(path) = foreign("C", guests::C_COUNT) {
        all.push(Guest::load("c-count", path, capture));
    }
    if let Some(path) = foreign("AssemblyScript", guests::AS_COUNT) {
        all.push(Guest::load("as-count", path, capture));
    }
    if let Some(path) = foreign("Zig", guests::ZIG_COUNT) {
        all.push(Guest::load("zig-count", path, capture));
    }
    all
}

/// `n` records over a vocabulary of awkward keys — empty, a zero byte, non-UTF-8 bytes, a long
/// key, many short ones — some far more frequent than others (so counts reach several digits),
/// with random values (ignored by count) and timestamps (negative and extreme ones included).
fn random_input(rng: &mut Rng, n: usize) -> Vec<Rec> {
    let mut keys: Vec<Vec<u8>> = vec![
        Vec::new(),
        vec![0],
        vec![0xff, 0x00, 0x80],
        vec![b'k'; 1000],
    ];
    keys.extend((0..40).map(|i| format!("key-{i}").into_bytes()));
    let random_len = 1 + rng.index(8);
    keys.push(rng.bytes(random_len));
    (0..n)
        .map(|_| {
            // Squaring a uniform index favours the first keys.
            let pick = rng.index(keys.len());
            let key = keys[pick * pick / keys.len()].clone();
            let value_len = rng.index(24);
            let value = rng.bytes(value_len);
            let timestamp = match rng.index(50) {
                0 => i64::MIN,
                1 => i64::MAX,
                _ => rng.next_u64() as i64 >> rng.index(64),
            };
            (key, value, timestamp)
        })
        .collect()
}

/// `input` cut into batches of `size` records (port 0), with an empty batch now and then.
fn batches(rng: &mut Rng, input: &[Rec], size: usize) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for chunk in input.chunks(size) {
        if rng.index(10) == 0 {
            all.push(BatchBuilder::new(0).into_bytes());
        }
        let mut batch = BatchBuilder::new(0);
        for (key, value, timestamp) in chunk {
            batch.push(key, value, *timestamp);
        }
        all.push(batch.into_bytes());
    }
    all
}

/// What `count` must emit for `batches`, computed in plain Rust: per non-empty batch one output
/// batch of (key, updated count as decimal text, timestamp).
fn expected(batches: &[Vec<u8>]) -> Vec<Emitted> {
    let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
    batches
        .iter()
        .map(|bytes| {
            let batch = weir_abi::Batch::decode(bytes).unwrap();
            if batch.is_empty() {
                return Vec::new();
            }
            let mut out = BatchBuilder::new(0);
            for record in batch.iter() {
                let count = counts.entry(record.key.to_vec()).or_default();
                *count += 1;
                out.push(record.key, count.to_string().as_bytes(), record.timestamp);
            }
            vec![out.into_bytes()]
        })
        .collect()
}

/// Runs `batches` through `guest`, one instance; with `restore_one_in = Some(k)`, after each
/// call with probability 1/k (drawn from `rng`) snapshots it, tells it the checkpoint is
/// complete, and continues in a fresh instance restored from that snapshot.
fn run(
    guest: &Guest,
    batches: &[Vec<u8>],
    rng: &mut Rng,
    restore_one_in: Option<usize>,
) -> Vec<Emitted> {
    let mut instance = guest.instance();
    let mut checkpoint = 0;
    let mut out = Vec::new();
    for batch in batches {
        out.push(instance.process(batch).unwrap_or_else(|e| panic!("{e}")));
        if restore_one_in.is_some_and(|k| rng.index(k) == 0) {
            checkpoint += 1;
            let state = instance
                .snapshot(CheckpointId(checkpoint))
                .unwrap_or_else(|e| panic!("{e}"));
            instance
                .checkpoint_complete(CheckpointId(checkpoint))
                .unwrap();
            instance = guest.instance();
            instance.restore(&state).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    out
}

/// Asserts `got` equals `want` byte for byte, naming the first call and record that differ.
fn assert_same_output(got: &[Emitted], want: &[Emitted], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: number of calls");
    for (call, (g, w)) in got.iter().zip(want).enumerate() {
        if g == w {
            continue;
        }
        let records = |batches: &Emitted| -> Vec<String> {
            batches
                .iter()
                .flat_map(|b| {
                    let batch = weir_abi::Batch::decode(b).unwrap();
                    batch
                        .iter()
                        .map(|r| {
                            format!(
                                "({}, {}, {})",
                                String::from_utf8_lossy(r.key).escape_debug(),
                                String::from_utf8_lossy(r.value).escape_debug(),
                                r.timestamp
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect()
        };
        let (g_records, w_records) = (records(g), records(w));
        let first = g_records
            .iter()
            .zip(&w_records)
            .position(|(a, b)| a != b)
            .unwrap_or(g_records.len().min(w_records.len()));
        panic!(
            "{what}: call {call} emitted {} batches, {} records; expected {} batches, {} \
             records; record {first} is {:?}, expected {:?}",
            g.len(),
            g_records.len(),
            w.len(),
            w_records.len(),
            g_records.get(first),
            w_records.get(first)
        );
    }
}

#[test]
fn count_in_every_language_emits_byte_identical_batches() {
    let guests = every_count_guest();
    for seed in SEEDS {
        let mut rng = Rng::new(seed);
        let input = random_input(&mut rng, 1500);
        for size in [1, 2, 7, 64, 500, 1500] {
            let batches = batches(&mut rng, &input, size);
            let want = expected(&batches);
            for guest in &guests {
                let got = run(guest, &batches, &mut rng, None);
                let what = format!("{} (seed {seed:#x}, batches of {size})", guest.name);
                assert_same_output(&got, &want, &what);
            }
        }
    }
}

#[test]
fn count_in_every_language_is_unchanged_by_restores_at_random_points() {
    assert_unchanged_by_restores(
        &every_count_guest(),
        &[(1, 7), (5, 2), (40, 1), (300, 2)],
        "",
    );
}

/// The same, with every guest checkpointed as an image of its memory and globals instead of
/// through its snapshot exports: Rust's allocator, C's heap, AssemblyScript's runtime (whose
/// allocator state and top-level variables live in globals) and Zig's `wasm_allocator` (its
/// free lists in globals) all come back exactly.
#[test]
fn count_in_every_language_is_unchanged_by_image_restores_at_random_points() {
    let mut guests = count_guests_capturing(StateCapture::Image);
    // AssemblyScript's runtimes with a real allocator and collector keep their state (the
    // allocator's root, the collector's lists) in globals and memory too.
    let runtimes = [
        ("as-count-minimal", guests::AS_COUNT_MINIMAL),
        ("as-count-incremental", guests::AS_COUNT_INCREMENTAL),
    ];
    for (name, path) in runtimes {
        if let Some(path) = foreign(name, path) {
            guests.push(Guest::load(name, path, StateCapture::Image));
        }
    }
    for guest in &guests {
        assert!(guest.module.image_layout().is_some(), "{}", guest.name);
    }
    assert_unchanged_by_restores(&guests, &[(1, 7), (40, 1), (300, 2)], " as an image");
}

/// For every seed and every (batch size, k) of `cases`, each guest snapshot and restored into a
/// fresh instance after one call in k, at random points, emits what an uninterrupted run
/// does. `how` follows the guest's name in messages.
fn assert_unchanged_by_restores(guests: &[Guest], cases: &[(usize, usize)], how: &str) {
    for seed in SEEDS {
        let mut rng = Rng::new(seed);
        let input = random_input(&mut rng, 1200);
        for &(size, restore_one_in) in cases {
            let batches = batches(&mut rng, &input, size);
            let want = expected(&batches);
            for guest in guests {
                // Each guest restores at its own random points, drawn from the seed.
                let mut points = Rng::new(seed ^ size as u64);
                let got = run(guest, &batches, &mut points, Some(restore_one_in));
                let what = format!(
                    "{}{how} (seed {seed:#x}, batches of {size}, restore after 1 call in \
                     {restore_one_in})",
                    guest.name
                );
                assert_same_output(&got, &want, &what);
            }
        }
    }
}

/// WAT, C, AssemblyScript and Zig share one snapshot format (`examples/wat/count.wat`): after
/// the same input their snapshots are equal, and each restores the others'.
#[test]
fn wat_c_assemblyscript_and_zig_count_restore_each_others_snapshots() {
    let guests: Vec<Guest> = count_guests()
        .into_iter()
        .filter(|g| g.name != "rust-count")
        .collect();
    let mut rng = Rng::new(SEEDS[1]);
    let input = random_input(&mut rng, 800);
    let batches = batches(&mut rng, &input, 50);
    let (first, rest) = batches.split_at(batches.len() / 2);
    let want = expected(&batches);

    let snapshots: Vec<Vec<u8>> = guests
        .iter()
        .map(|guest| {
            let mut instance = guest.instance();
            for batch in first {
                instance.process(batch).unwrap();
            }
            instance.snapshot(CheckpointId(1)).unwrap()
        })
        .collect();
    for (guest, snapshot) in guests.iter().zip(&snapshots) {
        assert!(
            snapshot == &snapshots[0],
            "{}'s snapshot differs from WAT's",
            guest.name
        );
    }
    for (from, snapshot) in guests.iter().zip(&snapshots) {
        for into in &guests {
            let mut instance = into.instance();
            instance.restore(snapshot).unwrap_or_else(|e| panic!("{e}"));
            let got: Vec<Emitted> = rest.iter().map(|b| instance.process(b).unwrap()).collect();
            let what = format!("{} restored from {}'s snapshot", into.name, from.name);
            assert_same_output(&got, &want[first.len()..], &what);
        }
    }
}

/// Restores a fresh instance of `guest` from a snapshot that is not one; fails unless its call
/// `call` failed and the instance is poisoned. Returns how the call failed.
fn restore_garbage(guest: &Guest, call: &str) -> GuestFailure {
    let mut instance = guest.instance();
    let err = instance
        .restore(b"this is no snapshot of any count")
        .unwrap_err();
    assert_eq!(err.call, call, "{}", guest.name);
    assert!(instance.is_poisoned(), "{}", guest.name);
    err.failure
}

/// A snapshot that is not one fails `weir_restore` with the guest's own message (through `fail`,
/// or `env.abort` for AssemblyScript), not with a trap.
#[test]
fn every_count_refuses_a_garbage_snapshot_with_a_message() {
    for guest in count_guests() {
        let failure = restore_garbage(&guest, "weir_restore");
        let message = match &failure {
            GuestFailure::Failed { message } => message.as_str(),
            GuestFailure::Aborted {
                message: Some(message),
                ..
            } => &**message,
            other => panic!("{}: expected a message, got {other:?}", guest.name),
        };
        // The SDK decodes its state with serde; the others share the WAT snapshot format.
        let expected = if guest.name == "rust-count" {
            "snapshot does not decode"
        } else {
            "count: not a count snapshot (bad magic)"
        };
        assert!(message.starts_with(expected), "{}: {message}", guest.name);
    }
}

/// A component refuses a snapshot that is not one with its own message: `err` from the world's
/// `restore` (a Python exception's type and text, a JavaScript error's), never a trap.
#[test]
fn every_component_count_refuses_a_garbage_snapshot_with_a_message() {
    for guest in component_count_guests() {
        let failure = restore_garbage(&guest, "restore");
        let GuestFailure::Failed { message } = &failure else {
            panic!(
                "{}: expected the guest's message, got {failure:?}",
                guest.name
            );
        };
        assert!(
            !message.trim().is_empty(),
            "{}: an empty message",
            guest.name
        );
    }
}

/// An AssemblyScript `throw` reaches the host through `env.abort` and fails the call with the
/// message, the source file and the line.
#[test]
fn assemblyscript_abort_is_a_guest_failure_naming_message_file_and_line() {
    let Some(path) = foreign("AssemblyScript", guests::AS_COUNT) else {
        return;
    };
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/assemblyscript/assembly/index.ts");
    let text = std::fs::read_to_string(&source).unwrap();
    let message = "count: not a count snapshot (bad magic)";
    let line = text
        .lines()
        .position(|l| l.contains(&format!("throw new Error(\"{message}\")")))
        .expect("index.ts throws on a bad magic") as u32
        + 1;

    let guest = Guest::load("as-count", path, StateCapture::Exports);
    let mut instance = guest.instance();
    let err = instance
        .restore(b"NOPE and sixteen bytes or more")
        .unwrap_err();
    assert_eq!(err.call, "weir_restore");
    match &err.failure {
        GuestFailure::Aborted {
            message: Some(m),
            file: Some(f),
            line: l,
            column,
        } => {
            assert_eq!(&**m, message);
            assert_eq!(&**f, "assembly/index.ts");
            assert_eq!(*l, line);
            assert!(*column > 0);
        }
        other => panic!("expected an abort, got {other:?}"),
    }
    let shown = err.to_string();
    assert!(
        shown.contains(&format!("{message} (at assembly/index.ts:{line}:")),
        "{shown}"
    );
}
