//! `component-bench`: what a count operator costs as a component (Python, JavaScript, Rust for
//! WASI 0.2) beside the core-module Rust count — compiling, starting, processing, and its
//! checkpoint — measured in one process per module, so that the peak RSS of compiling is that
//! module's alone.
//!
//! ```text
//! component-bench NAME MODULE.wasm [--records N] [--keys 10000,1000000]
//! component-bench rust-count -          (the core-module Rust count this crate builds)
//! ```
//!
//! It prints one JSON object: the module's size; compile time into an empty module cache and
//! the process's peak RSS right after; the cached load (median of 3 engines on that cache);
//! instantiation (median of 20); records/s through `process` alone (batches of 1024 records,
//! 100 000 keys, 16-byte values, state warmed with every key, as the guest-call benchmark);
//! and for each key count, snapshot and restore-into-a-fresh-instance times (median of 3) and
//! the state's size. `scripts/bench-components.sh` builds the components and runs it for each.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use weir::ids::CheckpointId;
use weir::wasm::{InstanceContext, LoadOptions, ModuleSource, OperatorModule, WasmEngine};
use weir_benches::workload::{Workload, distinct_keys};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(name), Some(module)) = (args.first(), args.get(1)) else {
        eprintln!("usage: component-bench NAME MODULE.wasm|- [--records N] [--keys K1,K2]");
        return ExitCode::from(2);
    };
    let mut records = 1_000_000u64;
    let mut key_counts = vec![10_000u64, 1_000_000];
    let mut rest = args[2..].iter();
    while let Some(flag) = rest.next() {
        let value = rest.next().map(String::as_str).unwrap_or("");
        match flag.as_str() {
            "--records" => records = value.parse().unwrap_or(records),
            "--keys" => {
                key_counts = value.split(',').filter_map(|k| k.parse().ok()).collect();
            }
            other => {
                eprintln!("component-bench: unknown flag {other}");
                return ExitCode::from(2);
            }
        }
    }
    let module = if module == "-" {
        weir_benches::guests::COUNT_WASM
    } else {
        module.as_str()
    };
    match measure(name, Path::new(module), records, &key_counts) {
        Ok(json) => {
            println!("{json}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("component-bench: {name}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Every measurement of one module, as a JSON object.
fn measure(
    name: &str,
    path: &Path,
    records: u64,
    key_counts: &[u64],
) -> Result<serde_json::Value, String> {
    let size = std::fs::metadata(path).map_err(|e| e.to_string())?.len();
    let cache = tempfile::tempdir().map_err(|e| e.to_string())?;
    let load = |engine: &WasmEngine| {
        OperatorModule::load(engine, ModuleSource::file(path), LoadOptions::default())
            .map_err(|e| e.to_string())
    };

    let engine = WasmEngine::with_module_cache(cache.path()).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let module = load(&engine)?;
    let compile = started.elapsed();
    let compile_peak_rss = peak_rss_bytes();
    // The cache writes asynchronously: give it a moment before reading it back.
    std::thread::sleep(Duration::from_millis(500));
    let cached = median(3, || {
        let engine = WasmEngine::with_module_cache(cache.path()).map_err(|e| e.to_string())?;
        let started = Instant::now();
        load(&engine)?;
        Ok(started.elapsed())
    })?;
    let instantiate = median(20, || {
        let started = Instant::now();
        module
            .instantiate(InstanceContext::single(name), b"")
            .map_err(|e| e.to_string())?;
        Ok(started.elapsed())
    })?;
    let throughput = records_per_second(&module, name, records)?;
    // A state too large for the guest (a JavaScript engine has a heap limit of its own) is a
    // result too: the failure is recorded with the key count.
    let states: Vec<serde_json::Value> = key_counts
        .iter()
        .map(|&keys| {
            state_costs(&module, name, keys)
                .unwrap_or_else(|error| serde_json::json!({ "keys": keys, "error": error }))
        })
        .collect();
    Ok(serde_json::json!({
        "name": name,
        "module_bytes": size,
        "compile_s": compile.as_secs_f64(),
        "compile_peak_rss_bytes": compile_peak_rss,
        "cached_load_s": cached.as_secs_f64(),
        "instantiate_s": instantiate.as_secs_f64(),
        "records_per_s": throughput,
        "state": states,
        "peak_rss_bytes": peak_rss_bytes(),
    }))
}

/// Records per second through `process` of one warmed instance.
fn records_per_second(module: &OperatorModule, name: &str, records: u64) -> Result<f64, String> {
    let workload = Workload {
        seed: 1,
        keys: 100_000,
        value_size: 16,
    };
    let mut instance = module
        .instantiate(InstanceContext::single(name), b"")
        .map_err(|e| e.to_string())?;
    for batch in workload.every_key(1024) {
        instance.process(&batch).map_err(|e| e.to_string())?;
    }
    let batches = workload.batches(1024, records);
    let started = Instant::now();
    for batch in &batches {
        instance.process(batch).map_err(|e| e.to_string())?;
    }
    Ok(records as f64 / started.elapsed().as_secs_f64())
}

/// Snapshot and restore times, and the state's size, with `keys` keys counted.
fn state_costs(
    module: &OperatorModule,
    name: &str,
    keys: u64,
) -> Result<serde_json::Value, String> {
    let mut instance = module
        .instantiate(InstanceContext::single(name), b"")
        .map_err(|e| e.to_string())?;
    for batch in distinct_keys(0..keys, 16, 1024) {
        instance.process(&batch).map_err(|e| e.to_string())?;
    }
    let mut state = Vec::new();
    let snapshot = median(3, || {
        let started = Instant::now();
        state = instance
            .snapshot(CheckpointId(1))
            .map_err(|e| e.to_string())?;
        Ok(started.elapsed())
    })?;
    let restore = median(3, || {
        let mut fresh = module
            .instantiate(InstanceContext::single(name), b"")
            .map_err(|e| e.to_string())?;
        let started = Instant::now();
        fresh.restore(&state).map_err(|e| e.to_string())?;
        Ok(started.elapsed())
    })?;
    Ok(serde_json::json!({
        "keys": keys,
        "state_bytes": state.len(),
        "snapshot_s": snapshot.as_secs_f64(),
        "restore_s": restore.as_secs_f64(),
    }))
}

/// The median of `runs` timings.
fn median(
    runs: usize,
    mut time: impl FnMut() -> Result<Duration, String>,
) -> Result<Duration, String> {
    let mut all = (0..runs).map(|_| time()).collect::<Result<Vec<_>, _>>()?;
    all.sort();
    Ok(all[all.len() / 2])
}

/// The process's peak resident set (`VmHWM`), in bytes; 0 where `/proc` does not tell.
fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().strip_suffix("kB"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}
