//! Batch throughput of the `count` operator through its wasm guest against the same operator
//! compiled natively, at batch sizes 1, 64 and 1024; and what one host→guest call costs.
//!
//! Run with `cargo bench -p weir-benches --bench guest_call` (or `scripts/bench.sh`). Groups:
//!
//! - `count/{wasm,native}/<batch size>`: one iteration is one pre-encoded batch of the
//!   workload — 100 000 distinct keys `key-<n>`, 16-byte values, the generator source's
//!   scheme — processed by an instance that has already seen every key, so the map is at its
//!   steady-state size. `wasm` is `GuestInstance::process` on the example built for wasm32
//!   (copy in, `weir_process`, `emit`, output copied out); `native` is the same operator,
//!   `weir_example_count::Count`, compiled natively and driven through
//!   `Harness::push_batch_encoded` (the SDK's dispatch, output batches handed back encoded, as
//!   the host receives them). Throughput is in records.
//! - `identity/wasm/<batch size>`: the ABI's smallest operator (`docs/ABI.md` §11), which
//!   re-emits its input: a whole ABI round trip with no operator work.
//! - `call/*`: raw wasmtime on an engine configured like the host's (Cranelift, epoch
//!   interruption, the deadline set before each call). `empty`: an exported `(i32, i32) -> i32`
//!   that returns its argument, through `TypedFunc::call` — the floor under every guest call;
//!   `empty-cloned-func`: the same through a clone of the `TypedFunc`, as `GuestInstance`
//!   calls its exports; `import`: an export that calls a host import doing nothing;
//!   `import-get-export-memory`: the same, the import looking the guest's memory up by name,
//!   as every `weir` import does.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput};
use wasmtime::{Caller, Config, Engine, Extern, Linker, Module, Store, Strategy};
use weir::wasm::{InstanceContext, LoadOptions, ModuleSource, OperatorModule, WasmEngine};
use weir_benches::guests::{COUNT_WASM, IDENTITY_WAT};
use weir_benches::workload::Workload;
use weir_example_count::Count;
use weir_sdk::Context;
use weir_sdk::testing::Harness;

/// The batch sizes of the acceptance criterion.
const BATCH_SIZES: [usize; 3] = [1, 64, 1024];
/// Records pre-encoded per batch size; iterations cycle through them.
const RING_RECORDS: u64 = 1 << 17;
/// The benchmark workload: the job benchmark's keys and values.
const WORKLOAD: Workload = Workload {
    seed: 1,
    keys: 100_000,
    value_size: 16,
};

fn count(c: &mut Criterion) {
    let engine = WasmEngine::new().expect("engine");
    let module = OperatorModule::load(
        &engine,
        ModuleSource::file(COUNT_WASM),
        LoadOptions::default(),
    )
    .expect("count guest");
    let mut group = c.benchmark_group("count");
    for size in BATCH_SIZES {
        let batches = WORKLOAD.batches(size, RING_RECORDS);
        group.throughput(Throughput::Elements(size as u64));

        let mut guest = module
            .instantiate(InstanceContext::single("count"), b"")
            .expect("count instance");
        for batch in WORKLOAD.every_key(1024) {
            guest.process(&batch).expect("warm-up batch");
        }
        let mut ring = batches.iter().cycle();
        group.bench_function(BenchmarkId::new("wasm", size), |b| {
            b.iter(|| guest.process(ring.next().unwrap()).expect("wasm batch"))
        });
        drop(guest);

        let mut native = Harness::<Count>::new(Context::new("count")).expect("harness");
        for batch in WORKLOAD.every_key(1024) {
            native.push_batch_encoded(&batch).expect("warm-up batch");
        }
        let mut ring = batches.iter().cycle();
        group.bench_function(BenchmarkId::new("native", size), |b| {
            b.iter(|| {
                native
                    .push_batch_encoded(ring.next().unwrap())
                    .expect("native batch")
            })
        });
    }
    group.finish();
}

fn identity(c: &mut Criterion) {
    let engine = WasmEngine::new().expect("engine");
    let identity = ModuleSource::bytes("identity.wat", IDENTITY_WAT.as_bytes());
    let module =
        OperatorModule::load(&engine, identity, LoadOptions::default()).expect("identity guest");
    let mut guest = module
        .instantiate(InstanceContext::single("identity"), b"")
        .expect("identity instance");
    let mut group = c.benchmark_group("identity");
    for size in BATCH_SIZES {
        let batches = WORKLOAD.batches(size, RING_RECORDS);
        group.throughput(Throughput::Elements(size as u64));
        let mut ring = batches.iter().cycle();
        group.bench_function(BenchmarkId::new("wasm", size), |b| {
            b.iter(|| guest.process(ring.next().unwrap()).expect("identity batch"))
        });
    }
    group.finish();
}

/// The floor under every guest call, and what two patterns of the host's wasm layer add to it
/// (evidence for docs/BENCHMARKS.md, "Where the time goes").
fn empty_call(c: &mut Criterion) {
    let mut config = Config::new();
    config
        .strategy(Strategy::Cranelift)
        .epoch_interruption(true)
        .max_wasm_stack(512 * 1024);
    let engine = Engine::new(&config).expect("engine");
    let module = Module::new(
        &engine,
        r#"(module
             (import "weir" "nothing" (func $nothing (param i32 i32)))
             (import "weir" "find_memory" (func $find_memory (param i32 i32)))
             (memory (export "memory") 1)
             (func (export "f") (param i32 i32) (result i32) local.get 0)
             (func (export "call_nothing") (param i32 i32) (result i32)
               (call $nothing (local.get 0) (local.get 1)) (i32.const 0))
             (func (export "call_find_memory") (param i32 i32) (result i32)
               (call $find_memory (local.get 0) (local.get 1)) (i32.const 0)))"#,
    )
    .expect("module");
    let mut linker = Linker::new(&engine);
    linker
        .func_wrap("weir", "nothing", |_: Caller<'_, ()>, _: i32, _: i32| {})
        .expect("import");
    // What every `weir` import does today to reach the guest's memory.
    linker
        .func_wrap(
            "weir",
            "find_memory",
            |mut caller: Caller<'_, ()>, _: i32, _: i32| {
                if let Some(Extern::Memory(memory)) = caller.get_export("memory") {
                    std::hint::black_box(memory.data_size(&caller));
                }
            },
        )
        .expect("import");
    let mut store = Store::new(&engine, ());
    let instance = linker.instantiate(&mut store, &module).expect("instance");
    let typed = |store: &mut Store<()>, name: &str| {
        instance
            .get_typed_func::<(i32, i32), i32>(store, name)
            .expect("export")
    };
    let f = typed(&mut store, "f");
    let call_nothing = typed(&mut store, "call_nothing");
    let call_find_memory = typed(&mut store, "call_find_memory");

    let mut group = c.benchmark_group("call");
    for (name, func) in [
        ("empty", &f),
        ("import", &call_nothing),
        ("import-get-export-memory", &call_find_memory),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                store.set_epoch_deadline(1_000);
                func.call(&mut store, (7, 0)).expect("call")
            })
        });
    }
    // `GuestInstance` clones the export's `TypedFunc` before each call (to call it with
    // `&mut self.store`); the clone and its drop are most of the cost of a small batch.
    group.bench_function("empty-cloned-func", |b| {
        b.iter(|| {
            store.set_epoch_deadline(1_000);
            f.clone().call(&mut store, (7, 0)).expect("call")
        })
    });
    group.finish();
}

fn main() {
    // `criterion_group!` would generate an undocumented public function; this is the same.
    let mut criterion = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    count(&mut criterion);
    identity(&mut criterion);
    empty_call(&mut criterion);
    criterion.final_summary();
}
