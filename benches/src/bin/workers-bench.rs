//! `workers-bench`: the two-stage word count (Kafka → split → key-hash → count → Kafka,
//! exactly-once) as 1, 2 and 3 worker processes of the release `weir`, on a broker of its own
//! ([`weir_benches::workers`]).
//!
//! ```text
//! cargo build --release -p weir --bin weir -p weir-benches --bin workers-bench
//! target/release/workers-bench --lines 200000
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use weir_benches::BenchError;
use weir_benches::guests::{COUNT_WASM, SPLIT_WASM};
use weir_benches::kafka::Broker;
use weir_benches::report::{Machine, load_average};
use weir_benches::workers::{self, WorkersSetup};

/// Throughput of one job as several worker processes.
#[derive(Debug, Parser)]
#[command(name = "workers-bench")]
struct Args {
    /// Input lines.
    #[arg(long, default_value_t = 200_000)]
    lines: u64,
    /// Words per line.
    #[arg(long, default_value_t = 4)]
    words: u64,
    /// Distinct words.
    #[arg(long, default_value_t = 1_000)]
    keys: u64,
    /// Checkpoint interval, ms.
    #[arg(long, default_value_t = 1_000)]
    interval_ms: u64,
    /// The worker counts to run, in order; 0 runs the job as one process without --worker
    /// (its key-hash edge inside the process, no exchange topic).
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,3")]
    workers: Vec<u32>,
}

fn main() -> ExitCode {
    weir_benches::exit_code("workers-bench", run(&Args::parse()))
}

fn run(args: &Args) -> Result<(), BenchError> {
    let mut machine = Machine::now();
    println!("machine: {}", machine.summary());
    let weir = weir_benches::release_weir()?;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let broker = Broker::start(&root)?;
    let setup = WorkersSetup {
        weir,
        split_wasm: PathBuf::from(SPLIT_WASM),
        count_wasm: PathBuf::from(COUNT_WASM),
        cache: broker.scratch().join("module-cache"),
        interval_ms: args.interval_ms,
        lines: args.lines,
        words: args.words,
        keys: args.keys,
    };
    println!(
        "{} lines of {} words ({} records out), {} distinct words, checkpoints every {} ms",
        setup.lines,
        setup.words,
        setup.lines * setup.words,
        setup.keys,
        setup.interval_ms
    );
    println!(
        "| workers | records | seconds | records/s | checkpoints | trigger → complete, ms (median, max) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    for &count in &args.workers {
        let r = workers::run(&setup, &broker, count)?;
        let (n, checkpoints) = match &r.checkpoint_ms {
            Some(s) => (s.n, format!("{:.0}, {:.0}", s.median, s.max)),
            None => (0, "–".to_string()),
        };
        println!(
            "| {} | {} | {:.2} | {:.0} | {n} | {checkpoints} |",
            r.workers, r.records, r.seconds, r.records_per_s
        );
    }
    drop(broker);
    machine.load_after = load_average();
    println!(
        "load after: {}",
        machine.load_after.as_deref().unwrap_or("?")
    );
    Ok(())
}
