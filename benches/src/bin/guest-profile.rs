//! `guest-profile`: runs the count or uppercase guest on bare wasmtime with a perf map, for
//! `perf record`.
//!
//! ```text
//! perf record -e cpu-clock -g -- target/release/guest-profile 10 1024 count
//! perf report --no-children --sort sym
//! ```
//!
//! Arguments: seconds to run (default 10), records per batch (default 1024), the guest (`count`,
//! the default, or `uppercase`). The workload is the guest-call benchmark's: 100 000 keys,
//! 16-byte values, state warmed with every key.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use weir_benches::guests::{COUNT_WASM, UPPERCASE_WASM};
use weir_benches::raw_guest::RawGuest;
use weir_benches::workload::Workload;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let batch_size: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1024);
    let (name, wasm) = match args.next().as_deref() {
        None | Some("count") => ("count", COUNT_WASM),
        Some("uppercase") => ("uppercase", UPPERCASE_WASM),
        Some(other) => {
            eprintln!("guest-profile: unknown guest {other:?}: expected count or uppercase");
            return ExitCode::FAILURE;
        }
    };
    match run(Duration::from_secs(seconds), batch_size, name, wasm) {
        Ok(records) => {
            println!("{records} records through the {name} guest in {seconds} s");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("guest-profile: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(time: Duration, batch_size: usize, name: &str, wasm: &str) -> wasmtime::Result<u64> {
    let workload = Workload {
        seed: 1,
        keys: 100_000,
        value_size: 16,
    };
    let mut guest = RawGuest::load(Path::new(wasm), name)?;
    for batch in workload.every_key(1024) {
        guest.process(&batch)?;
    }
    let batches = workload.batches(batch_size, 1 << 17);
    let start = Instant::now();
    let mut records = 0;
    while start.elapsed() < time {
        for batch in &batches {
            guest.process(batch)?;
        }
        records += 1 << 17;
    }
    Ok(records)
}
