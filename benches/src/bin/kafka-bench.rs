//! `kafka-bench`: Kafka → `count` → Kafka exactly-once through the release `weir`, beside a
//! plain librdkafka consume → produce loop with the same transactions per second, on a broker
//! of its own ([`weir_benches::kafka`]).
//!
//! ```text
//! cargo build --release -p weir --bin weir -p weir-benches --bin kafka-bench
//! target/release/kafka-bench --json target/kafka-bench-results.json
//! ```
//!
//! `scripts/bench-kafka.sh` does both. Prints a table; with `--json`, also writes every result.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use serde::Serialize;
use weir_benches::BenchError;
use weir_benches::guests::COUNT_WASM;
use weir_benches::kafka::{
    self, Broker, INPUT_PARTITIONS, LatencyResult, MaxResult, RAW_LOOPS, WeirSetup, Workload,
};
use weir_benches::report::{Machine, load_average};

/// Kafka → count → Kafka exactly-once (the release `weir`), and the raw limit of the same
/// broker: max throughput over pre-filled records, and produce → visible latency at a fixed
/// rate.
#[derive(Debug, Parser)]
#[command(name = "kafka-bench")]
struct Args {
    /// Records pre-filled for the max-throughput runs.
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Distinct keys.
    #[arg(long, default_value_t = 1_000)]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 16)]
    value_size: usize,
    /// Records per second written during the latency runs.
    #[arg(long, default_value_t = 5_000)]
    rate: u64,
    /// Seconds the latency runs write for.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Records produced in the first this many seconds are left out of the latency figures.
    #[arg(long, default_value_t = 2)]
    warmup_s: u64,
    /// Checkpoint interval of the job, and commit interval of the raw loops, in ms.
    #[arg(long, default_value_t = 1_000)]
    interval_ms: u64,
    /// Skip the max-throughput runs.
    #[arg(long)]
    no_max: bool,
    /// Skip the latency runs.
    #[arg(long)]
    no_latency: bool,
    /// Skip the raw loops.
    #[arg(long)]
    no_raw: bool,
    /// Skip Weir.
    #[arg(long)]
    no_weir: bool,
    /// Run the job with `chain = false` (a thread per task) instead of chaining the count's
    /// subtasks with their sink subtasks.
    #[arg(long)]
    no_chaining: bool,
    /// Write every result to this JSON file.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// Everything one run measured.
#[derive(Debug, Serialize)]
struct KafkaReport {
    machine: Machine,
    workload: Workload,
    input_partitions: i32,
    parallelism: usize,
    chaining: bool,
    raw_loops: usize,
    interval_ms: u64,
    prefill_records: u64,
    prefill_seconds: Option<f64>,
    rate: u64,
    seconds: u64,
    max: Vec<MaxResult>,
    latency: Vec<LatencyResult>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kafka-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), BenchError> {
    let mut machine = Machine::now();
    println!("machine: {}", machine.summary());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let broker = Broker::start(&root)?;
    println!(
        "broker: noida-db on {} (pid {})",
        broker.bootstrap(),
        broker.pid()
    );
    let workload = Workload {
        keys: args.keys,
        value_size: args.value_size,
    };
    let interval = Duration::from_millis(args.interval_ms);
    let setup = WeirSetup {
        weir: weir_benches::release_weir()?,
        count_wasm: PathBuf::from(COUNT_WASM),
        interval_ms: args.interval_ms,
        cache: broker.scratch().join("module-cache"),
        chain: !args.no_chaining,
    };

    let mut max = Vec::new();
    let mut prefill_seconds = None;
    if !args.no_max {
        let input = "in-max";
        broker.create_topic(input, INPUT_PARTITIONS)?;
        let s = kafka::prefill(&broker, input, args.records, workload)?;
        eprintln!(
            "pre-filled {} records in {s:.1} s ({:.0} records/s)",
            args.records,
            args.records as f64 / s
        );
        prefill_seconds = Some(s);
        if !args.no_weir {
            let r = kafka::run_weir_max(&setup, &broker, input, args.records)?;
            eprintln!(
                "  weir max: {:.0} records/s in {:.2} s",
                r.records_per_s, r.seconds
            );
            max.push(r);
        }
        if !args.no_raw {
            let r = kafka::run_raw_max(&broker, input, args.records, interval)?;
            eprintln!(
                "  raw max: {:.0} records/s in {:.2} s",
                r.records_per_s, r.seconds
            );
            max.push(r);
        }
    }
    let mut latency = Vec::new();
    if !args.no_latency {
        if !args.no_weir {
            let r = kafka::run_weir_latency(
                &setup,
                &broker,
                workload,
                args.rate,
                args.seconds,
                args.warmup_s,
            )?;
            eprintln!("  weir latency: p50 {} ms, p99 {} ms", r.p50_ms, r.p99_ms);
            latency.push(r);
        }
        if !args.no_raw {
            let r = kafka::run_raw_latency(
                &broker,
                workload,
                args.rate,
                args.seconds,
                args.warmup_s,
                interval,
            )?;
            eprintln!("  raw latency: p50 {} ms, p99 {} ms", r.p50_ms, r.p99_ms);
            latency.push(r);
        }
    }
    drop(broker);
    machine.load_after = load_average();

    println!(
        "\n## Kafka → count → Kafka, exactly-once: {} keys, {}-byte values, {INPUT_PARTITIONS} \
         input partitions, parallelism {RAW_LOOPS}, commits every {} ms\n",
        args.keys, args.value_size, args.interval_ms
    );
    if !max.is_empty() {
        println!("max throughput over {} pre-filled records:\n", args.records);
        println!(
            "| system | records/s | wall s | commits (raw) / checkpoints (weir) | checkpoint ms (median, max) |"
        );
        println!("|---|---:|---:|---:|---:|");
        for r in &max {
            println!(
                "| {} | {:.0} | {:.2} | {} | {} |",
                r.system,
                r.records_per_s,
                r.seconds,
                r.commits,
                r.checkpoint_duration_ms
                    .map_or("–".into(), |s| format!("{:.0}, {:.0}", s.median, s.max))
            );
        }
    }
    if !latency.is_empty() {
        println!(
            "\nproduce → visible to read_committed, at {} records/s for {} s (first {} s left out):\n",
            args.rate, args.seconds, args.warmup_s
        );
        println!(
            "| system | achieved records/s | records out | p50 ms | p99 ms | p99.9 ms | max ms | min ms | mean ms | checkpoint ms (median, max) |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &latency {
            println!(
                "| {} | {:.0} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} |",
                r.system,
                r.produced.records_per_s,
                r.records_out,
                r.p50_ms,
                r.p99_ms,
                r.p999_ms,
                r.max_ms,
                r.min_ms,
                r.mean_ms,
                r.checkpoint_duration_ms
                    .map_or("–".into(), |s| format!("{:.0}, {:.0}", s.median, s.max))
            );
        }
    }
    println!(
        "\nload after: {}",
        machine.load_after.as_deref().unwrap_or("?")
    );
    if let Some(path) = &args.json {
        let report = KafkaReport {
            machine,
            workload,
            input_partitions: INPUT_PARTITIONS,
            parallelism: RAW_LOOPS,
            chaining: !args.no_chaining,
            raw_loops: RAW_LOOPS,
            interval_ms: args.interval_ms,
            prefill_records: args.records,
            prefill_seconds,
            rate: args.rate,
            seconds: args.seconds,
            max,
            latency,
        };
        let json = serde_json::to_vec_pretty(&report).expect("results serialize to JSON");
        std::fs::write(path, json).map_err(|source| BenchError::Io {
            action: "write",
            path: path.clone(),
            source,
        })?;
        println!("results written to {}", path.display());
    }
    Ok(())
}
