//! `kafka-bench`: Kafka → `count` → Kafka exactly-once through the release `weir`, beside the
//! same job as a Kafka Streams application (`benches/peers/kafka-streams`) and a plain
//! librdkafka consume → produce loop with the same transactions per second, on a broker of its
//! own ([`weir_benches::kafka`]).
//!
//! ```text
//! cargo build --release -p weir --bin weir -p weir-benches --bin kafka-bench
//! target/release/kafka-bench --json target/kafka-bench-results.json
//! ```
//!
//! `scripts/bench-kafka.sh` does both. Prints a table of every run and of the medians over
//! `--repeat` runs; with `--json`, also writes every result.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use serde::Serialize;
use weir_benches::BenchError;
use weir_benches::guests::COUNT_WASM;
use weir_benches::kafka::{
    self, Broker, FixedRate, INPUT_PARTITIONS, LatencyResult, MaxResult, RAW_LOOPS, StreamsSetup,
    WeirSetup, Workload,
};
use weir_benches::report::{self, Machine, load_average};
use weir_benches::summary::Summary;
use weir_benches::usage::Usage;

/// Kafka → count → Kafka exactly-once (the release `weir`, and Kafka Streams), and the raw
/// limit of the same broker: max throughput over pre-filled records, and produce → visible
/// latency at a fixed rate.
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
    /// Checkpoint interval of the job, and commit interval of Kafka Streams and the raw loops,
    /// in ms.
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
    /// Skip Kafka Streams.
    #[arg(long)]
    no_streams: bool,
    /// Run every system this many times (max and latency runs each), the order of the systems
    /// rotated from one repetition to the next; the tables show each run and the medians.
    #[arg(long, default_value_t = 1)]
    repeat: usize,
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
    repeat: usize,
    max: Vec<MaxResult>,
    latency: Vec<LatencyResult>,
    medians: Vec<Medians>,
    loads: Vec<RunLoad>,
}

/// `/proc/loadavg` around one run: the machine is shared, and the load says how much.
#[derive(Debug, Serialize)]
struct RunLoad {
    system: &'static str,
    /// `max` or `latency`.
    kind: &'static str,
    run: usize,
    before: String,
    after: String,
}

impl RunLoad {
    /// Runs `measure`, run `run` of `kind` for `system`, between two readings of the load: the
    /// one before is printed first, and both are kept in `loads`.
    fn around<R>(
        loads: &mut Vec<RunLoad>,
        system: System,
        kind: &'static str,
        run: usize,
        measure: impl FnOnce() -> Result<R, BenchError>,
    ) -> Result<R, BenchError> {
        let before = load();
        eprintln!(
            "== load before {} {kind} run {run}: {before}",
            system.name()
        );
        let result = measure()?;
        loads.push(RunLoad {
            system: system.name(),
            kind,
            run,
            before,
            after: load(),
        });
        Ok(result)
    }
}

/// One system's medians over the repetitions.
#[derive(Debug, Serialize)]
struct Medians {
    system: String,
    max_records_per_s: Option<Summary>,
    max_records_per_s_from_ready: Option<Summary>,
    max_cpu_seconds: Option<Summary>,
    max_peak_rss_mib: Option<Summary>,
    latency_p50_ms: Option<Summary>,
    latency_p99_ms: Option<Summary>,
    latency_cpu_seconds: Option<Summary>,
    latency_peak_rss_mib: Option<Summary>,
}

/// A system of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum System {
    Weir,
    Streams,
    Raw,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Weir => "weir",
            System::Streams => "streams",
            System::Raw => "raw",
        }
    }
}

fn main() -> ExitCode {
    weir_benches::exit_code("kafka-bench", run(&Args::parse()))
}

fn run(args: &Args) -> Result<(), BenchError> {
    let mut machine = Machine::now();
    println!("machine: {}", machine.summary());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let streams = if args.no_streams {
        None
    } else {
        Some(StreamsSetup::build(&root, args.interval_ms)?)
    };
    let broker = Broker::start(&root)?;
    println!(
        "broker: {} on {} (pid {})",
        broker.kind().name(),
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
    let systems: Vec<System> = [
        (System::Weir, args.no_weir),
        (System::Streams, args.no_streams),
        (System::Raw, args.no_raw),
    ]
    .into_iter()
    .filter(|(_, skip)| !skip)
    .map(|(system, _)| system)
    .collect();
    let repeat = args.repeat.max(1);

    let mut loads = Vec::new();
    let mut max = Vec::new();
    let mut prefill_seconds = None;
    if !args.no_max {
        // One input for every system and every repetition.
        let input = "in-max";
        broker.create_topic(input, INPUT_PARTITIONS)?;
        let s = kafka::prefill(&broker, input, args.records, workload)?;
        eprintln!(
            "pre-filled {} records in {s:.1} s ({:.0} records/s)",
            args.records,
            args.records as f64 / s
        );
        prefill_seconds = Some(s);
        for run in 1..=repeat {
            for system in rotated(&systems, run) {
                let r = RunLoad::around(&mut loads, system, "max", run, || match system {
                    System::Weir => kafka::run_weir_max(&setup, &broker, input, args.records, run),
                    System::Streams => kafka::run_streams_max(
                        streams.as_ref().expect("built unless --no-streams"),
                        &broker,
                        input,
                        args.records,
                        run,
                    ),
                    System::Raw => kafka::run_raw_max(&broker, input, args.records, interval, run),
                })?;
                eprintln!(
                    "  {} max run {run}: {:.0} records/s in {:.2} s, {}",
                    r.system,
                    r.records_per_s,
                    r.seconds,
                    used(&r.usage)
                );
                max.push(r);
            }
        }
    }
    let mut latency = Vec::new();
    if !args.no_latency {
        let load = FixedRate {
            workload,
            rate: args.rate,
            seconds: args.seconds,
            warmup_s: args.warmup_s,
        };
        for run in 1..=repeat {
            for system in rotated(&systems, run) {
                let r = RunLoad::around(&mut loads, system, "latency", run, || match system {
                    System::Weir => kafka::run_weir_latency(&setup, &broker, load, run),
                    System::Streams => kafka::run_streams_latency(
                        streams.as_ref().expect("built unless --no-streams"),
                        &broker,
                        load,
                        run,
                    ),
                    System::Raw => kafka::run_raw_latency(&broker, load, interval, run),
                })?;
                eprintln!(
                    "  {} latency run {run}: p50 {} ms, p99 {} ms, {}",
                    r.system,
                    r.p50_ms,
                    r.p99_ms,
                    used(&r.usage)
                );
                latency.push(r);
            }
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
            "| system | run | records/s | wall s | spawn → ready s | records/s from ready | cpu s | peak rss MiB | commits (raw) / checkpoints (weir) | checkpoint ms (median, max) |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &max {
            println!(
                "| {} | {} | {:.0} | {:.2} | {} | {} | {} | {} | {} | {} |",
                r.system,
                r.run,
                r.records_per_s,
                r.seconds,
                opt(r.ready_seconds, 2),
                opt(from_ready(r), 0),
                opt(r.usage.cpu_seconds, 2),
                opt(r.usage.peak_rss_mib(), 0),
                r.commits.map_or("–".into(), |c| c.to_string()),
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
            "| system | run | achieved records/s | records out | p50 ms | p99 ms | p99.9 ms | max ms | min ms | mean ms | cpu s | peak rss MiB | checkpoint ms (median, max) |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in &latency {
            println!(
                "| {} | {} | {:.0} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {} | {} | {} |",
                r.system,
                r.run,
                r.produced.records_per_s,
                r.records_out,
                r.p50_ms,
                r.p99_ms,
                r.p999_ms,
                r.max_ms,
                r.min_ms,
                r.mean_ms,
                opt(r.usage.cpu_seconds, 2),
                opt(r.usage.peak_rss_mib(), 0),
                r.checkpoint_duration_ms
                    .map_or("–".into(), |s| format!("{:.0}, {:.0}", s.median, s.max))
            );
        }
    }
    let medians: Vec<Medians> = systems
        .iter()
        .map(|&system| medians_of(system, &max, &latency))
        .collect();
    println!(
        "\nmedians over {repeat} run(s) (max: records/s, cpu s, peak rss MiB; latency: p50 ms, \
         p99 ms, cpu s, peak rss MiB):\n"
    );
    println!(
        "| system | records/s | records/s from ready | cpu s (max) | peak rss MiB (max) | p50 ms | p99 ms | cpu s (latency) | peak rss MiB (latency) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    let median = |s: &Option<Summary>, digits: usize| opt(s.map(|s| s.median), digits);
    for m in &medians {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            m.system,
            median(&m.max_records_per_s, 0),
            median(&m.max_records_per_s_from_ready, 0),
            median(&m.max_cpu_seconds, 2),
            median(&m.max_peak_rss_mib, 0),
            median(&m.latency_p50_ms, 0),
            median(&m.latency_p99_ms, 0),
            median(&m.latency_cpu_seconds, 2),
            median(&m.latency_peak_rss_mib, 0),
        );
    }
    if let (Some(w), Some(k)) = (
        medians.iter().find(|m| m.system == "weir"),
        medians.iter().find(|m| m.system == "streams"),
    ) {
        let ratio = |a: &Option<Summary>, b: &Option<Summary>| match (a, b) {
            (Some(a), Some(b)) if b.median != 0.0 => format!("{:.2}", a.median / b.median),
            _ => "–".into(),
        };
        println!(
            "\nweir : Kafka Streams (of the medians): records/s {}, records/s from ready {}, cpu s \
             (max) {}, peak rss (max) {}, p50 {}, p99 {}, cpu s (latency) {}, peak rss (latency) {}",
            ratio(&w.max_records_per_s, &k.max_records_per_s),
            ratio(
                &w.max_records_per_s_from_ready,
                &k.max_records_per_s_from_ready
            ),
            ratio(&w.max_cpu_seconds, &k.max_cpu_seconds),
            ratio(&w.max_peak_rss_mib, &k.max_peak_rss_mib),
            ratio(&w.latency_p50_ms, &k.latency_p50_ms),
            ratio(&w.latency_p99_ms, &k.latency_p99_ms),
            ratio(&w.latency_cpu_seconds, &k.latency_cpu_seconds),
            ratio(&w.latency_peak_rss_mib, &k.latency_peak_rss_mib),
        );
    }
    println!("\n/proc/loadavg around each run:\n");
    println!("| system | run | kind | before | after |");
    println!("|---|---:|---|---|---|");
    for l in &loads {
        println!(
            "| {} | {} | {} | {} | {} |",
            l.system, l.run, l.kind, l.before, l.after
        );
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
            repeat,
            max,
            latency,
            medians,
            loads,
        };
        report::write_json(path, &report)?;
    }
    Ok(())
}

/// The systems in the order of repetition `run` (from 1): rotated by one each time, so that
/// none always runs first, on a broker just started, or last.
fn rotated(systems: &[System], run: usize) -> Vec<System> {
    let mut order = systems.to_vec();
    if !order.is_empty() {
        let by = (run - 1) % order.len();
        order.rotate_left(by);
    }
    order
}

/// Records per second over the time after the process was ready (`records / (seconds −
/// ready_seconds)`): throughput without the process's start, which for a JVM joining a
/// consumer group is seconds.
fn from_ready(r: &MaxResult) -> Option<f64> {
    r.ready_seconds
        .map(|ready| r.records as f64 / (r.seconds - ready))
}

/// `/proc/loadavg`, or `?`.
fn load() -> String {
    load_average().unwrap_or_else(|| "?".into())
}

/// What a run's process used, as its progress line ends: `cpu 1.23 s, peak rss 45 MiB`.
fn used(usage: &Usage) -> String {
    format!(
        "cpu {} s, peak rss {} MiB",
        opt(usage.cpu_seconds, 2),
        opt(usage.peak_rss_mib(), 0)
    )
}

/// A figure with `digits` decimals, or `–` when it was not measured.
fn opt(value: Option<f64>, digits: usize) -> String {
    value.map_or("–".into(), |v| format!("{v:.digits$}"))
}

/// `f` over the `results` that are `mine`, summarised.
fn of_system<R>(
    results: &[R],
    mine: impl Fn(&R) -> bool,
    f: fn(&R) -> Option<f64>,
) -> Option<Summary> {
    let values: Vec<f64> = results.iter().filter(|r| mine(r)).filter_map(f).collect();
    Summary::of(&values)
}

/// `system`'s medians over its runs.
fn medians_of(system: System, max: &[MaxResult], latency: &[LatencyResult]) -> Medians {
    let name = system.name();
    let of_max =
        |f: fn(&MaxResult) -> Option<f64>| of_system(max, |r: &MaxResult| r.system == name, f);
    let of_latency = |f: fn(&LatencyResult) -> Option<f64>| {
        of_system(latency, |r: &LatencyResult| r.system == name, f)
    };
    Medians {
        system: name.to_string(),
        max_records_per_s: of_max(|r| Some(r.records_per_s)),
        max_records_per_s_from_ready: of_max(from_ready),
        max_cpu_seconds: of_max(|r| r.usage.cpu_seconds),
        max_peak_rss_mib: of_max(|r| r.usage.peak_rss_mib()),
        latency_p50_ms: of_latency(|r| Some(r.p50_ms)),
        latency_p99_ms: of_latency(|r| Some(r.p99_ms)),
        latency_cpu_seconds: of_latency(|r| r.usage.cpu_seconds),
        latency_peak_rss_mib: of_latency(|r| r.usage.peak_rss_mib()),
    }
}
