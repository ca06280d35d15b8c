//! Weir's benchmarks, and the code they share.
//!
//! Two front doors, both kept out of `cargo test`:
//!
//! - `cargo bench -p weir-benches --bench guest_call` (criterion): batches of the `count`
//!   operator through its wasm guest ([`weir::wasm::GuestInstance::process`]) against the same
//!   operator compiled natively, at batch sizes 1, 64 and 1024; plus the cost of one
//!   host→guest call, alone and as a whole ABI round trip ([`guests::IDENTITY_WAT`]).
//! - `cargo run --release -p weir-benches --bin runtime-bench`: whole jobs through the real
//!   engine ([`pipeline`]), checkpoint/restore time against state size ([`state_size`]),
//!   start-up and restore latency ([`startup`]), and a restore at another parallelism
//!   ([`rescale`]).
//!
//! - `kafka-bench` (`scripts/bench-kafka.sh`): Kafka → `count` → Kafka exactly-once through
//!   the release `weir`, against the same job as a Kafka Streams application and a plain
//!   librdkafka loop on the same broker ([`kafka`]).
//!
//! - `workers-bench`: one job as 1, 2 and 3 worker processes of the release `weir`
//!   ([`workers`]).
//!
//! - `guest-profile`: the count guest on bare wasmtime with a perf map ([`raw_guest`]), so
//!   `perf` can name the functions inside the guest.
//!
//! `scripts/bench.sh` runs both and writes `target/bench-results.json` ([`report`]);
//! `docs/BENCHMARKS.md` holds the results and their analysis.
//!
//! Performance is shown here, by measurement, and never asserted by a timed test.

pub mod error;
pub mod guests;
pub mod kafka;
pub mod object_storage;
pub mod pipeline;
pub mod raw_guest;
pub mod report;
pub mod rescale;
pub mod startup;
pub mod state_size;
pub mod summary;
pub mod usage;
pub mod workers;
pub mod workload;

pub use error::BenchError;

/// The release `weir` beside the running benchmark binary, which the benchmarks that run whole
/// jobs as processes start; an error saying how to build it when it is missing.
pub fn release_weir() -> Result<std::path::PathBuf, BenchError> {
    weir_beside_exe("build it with `cargo build --release -p weir --bin weir`")
}

/// The `weir` binary in the folder of the running benchmark binary; when it is missing, an
/// error naming it and ending in `how_to_build`, which says how this benchmark's users get it.
pub(crate) fn weir_beside_exe(how_to_build: &str) -> Result<std::path::PathBuf, BenchError> {
    let exe = std::env::current_exe().map_err(|source| BenchError::Io {
        action: "find the benchmark's own path",
        path: std::path::PathBuf::from("."),
        source,
    })?;
    let bin = exe.with_file_name(format!("weir{}", std::env::consts::EXE_SUFFIX));
    if !bin.is_file() {
        return Err(BenchError::Wrong(format!(
            "{} is missing: {how_to_build}",
            bin.display()
        )));
    }
    Ok(bin)
}

/// The exit of a benchmark binary whose work is `outcome`: success, or the error on standard
/// error after the binary's `name` (`kafka-bench: …`) and a failing exit code.
pub fn exit_code(name: &str, outcome: Result<(), BenchError>) -> std::process::ExitCode {
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
