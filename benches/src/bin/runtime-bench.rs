//! `runtime-bench`: whole jobs through the engine, and checkpoint/restore against state size.
//!
//! ```text
//! cargo run --release -p weir-benches --bin runtime-bench -- --json target/bench-results.json
//! ```
//!
//! Prints a table per benchmark; with `--json`, also writes every result (and, with
//! `--criterion`, the guest-call results criterion saved) to one JSON file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use weir::wasm::StateCapture;
use weir_benches::BenchError;
use weir_benches::guests::COUNT_WASM;
use weir_benches::pipeline::{self, BenchOperator, PipelineCase, PipelineResult};
use weir_benches::report::{self, Machine, Report};
use weir_benches::state_size::{self, StateSizeResult};
use weir_benches::summary::Summary;
use weir_benches::{object_storage, rescale, startup};

/// Weir's runtime benchmarks: generator → count (key-hash) or uppercase (forward) →
/// blackhole through the real engine, and checkpoint/restore time against state size.
#[derive(Debug, Parser)]
#[command(name = "runtime-bench")]
struct Args {
    /// Records the generator emits per job run.
    #[arg(long, default_value_t = 5_000_000)]
    records: u64,
    /// Distinct keys.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Bytes per value.
    #[arg(long, default_value_t = 16)]
    value_size: usize,
    /// Measured runs per case (after one warm-up run); the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// The shortest measured run of the job benchmark, in seconds: the warm-up run's rate sets
    /// how many records the measured runs generate (never fewer than `--records`; half again
    /// what the warm-up rate needs), so that each takes about this long or more, with a steady state and, at 1 s intervals, a score of
    /// checkpoints. 0 runs `--records` as given.
    #[arg(long, default_value_t = 20.0)]
    min_seconds: f64,
    /// The operators to run between generator and blackhole, comma-separated: `count` (keyed
    /// running count), `host-count` (the same, its counts kept on the host), `uppercase`
    /// (stateless filter and map), `window` and `window-wide`
    /// (a tumbling count per event-time window of 1000 or 1 000 000 records), and the count as
    /// a component: `py-count`, `js-count`, `rust-component-count` (their modules from
    /// `$WEIR_BENCH_PY_COUNT` and the like; `scripts/bench-components.sh` sets them).
    #[arg(long, value_delimiter = ',', default_value = "count,uppercase")]
    operators: Vec<BenchOperator>,
    /// Parallelisms to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    parallelism: Vec<u32>,
    /// Checkpoint intervals in ms, comma-separated; 0 = checkpointing off.
    #[arg(long, value_delimiter = ',', default_value = "0,1000,100")]
    intervals_ms: Vec<u64>,
    /// Operator chaining, comma-separated: `on` (the default of jobs: generator, operator and
    /// blackhole on one thread where their edges allow), `off` (`chain = false`: a thread per
    /// task), or both to compare.
    #[arg(long, value_delimiter = ',', default_value = "on")]
    chaining: Vec<Chaining>,
    /// Count state sizes for the checkpoint/restore benchmark, in bytes, comma-separated
    /// (13 bytes a key: 13 MB is a map of 1 M keys). Each is measured through the guest's
    /// snapshot exports and as an image.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1000000,13000000,100000000"
    )]
    state_bytes: Vec<u64>,
    /// Skip the job benchmark.
    #[arg(long)]
    no_pipeline: bool,
    /// Skip the state-size benchmark.
    #[arg(long)]
    no_state: bool,
    /// Skip the start-up and restore-latency benchmark.
    #[arg(long)]
    no_startup: bool,
    /// State of the savepoint the restore-latency benchmark restores, in bytes.
    #[arg(long, default_value_t = 4_000_000)]
    restore_state_bytes: u64,
    /// Key counts of the rescale benchmark (a savepoint of `count` at parallelism 2 restored
    /// at 2 and at 3), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "100000,1000000")]
    rescale_keys: Vec<u64>,
    /// Skip the rescale benchmark.
    #[arg(long)]
    no_rescale: bool,
    /// State sizes of the object-storage benchmark (one task's state written to and read from
    /// an S3 server, moto on loopback, against local files), in bytes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000000,100000000")]
    object_storage_bytes: Vec<u64>,
    /// Skip the object-storage benchmark.
    #[arg(long)]
    no_object_storage: bool,
    /// Write every result to this JSON file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Criterion's output directory, whose guest-call results go into the JSON file.
    #[arg(long)]
    criterion: Option<PathBuf>,
    /// The criterion baselines to read from it (one per repetition of the suite).
    #[arg(long, value_delimiter = ',', default_value = "new")]
    baselines: Vec<String>,
}

/// `--chaining`: whether the job's tasks may be chained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Chaining {
    /// Chained where the job's edges allow: the default of every job.
    On,
    /// `chain = false`: a thread per task.
    Off,
}

fn main() -> ExitCode {
    weir_benches::exit_code("runtime-bench", run(&Args::parse()))
}

fn run(args: &Args) -> Result<(), BenchError> {
    let runs = args.runs.max(1);
    let mut machine = Machine::now();
    println!("machine: {}", machine.summary());

    let mut pipelines = Vec::new();
    if !args.no_pipeline {
        println!(
            "\n## generator → operator → blackhole: {} records or more (runs of {} s at least), \
             {} keys, {}-byte values, median of {runs} runs (after a warm-up run)\n",
            args.records, args.min_seconds, args.keys, args.value_size
        );
        println!(
            "| operator | parallelism | checkpoints | records/s (median) | min – max | checkpoints done | \
             checkpoint duration ms (median, max) | sync ms (median, max) | async ms (median, max) | \
             bytes per checkpoint (median) | peak RSS (median) | cores used (median) | \
             records/s first ¼ → last ¼ (median) | records per run |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        let cases = args.operators.iter().flat_map(|&operator| {
            args.parallelism.iter().flat_map(move |&parallelism| {
                args.intervals_ms.iter().flat_map(move |&interval| {
                    args.chaining.iter().map(move |&chaining| PipelineCase {
                        operator,
                        parallelism,
                        interval_ms: (interval > 0).then_some(interval),
                        records: args.records,
                        keys: args.keys,
                        value_size: args.value_size,
                        chain: chaining == Chaining::On,
                    })
                })
            })
        });
        for case in cases {
            let min_seconds = (args.min_seconds > 0.0).then_some(args.min_seconds);
            let result = pipeline::measure(&case, runs, true, min_seconds, |run| {
                let quarters = run.quarters_records_per_s.map_or(String::new(), |(a, b)| {
                    format!(" (first quarter {:.0}/s, last {:.0}/s)", a, b)
                });
                eprintln!(
                    "  {}: {:.0} records/s in {:.2} s{quarters}, {} checkpoints",
                    case.label(),
                    run.records_per_s,
                    run.seconds,
                    run.checkpoints_completed
                );
            })?;
            println!("{}", pipeline_row(&result));
            pipelines.push(result);
        }
    }

    let mut states = Vec::new();
    if !args.no_state {
        println!(
            "\n## count state: checkpoint (snapshot + durable write) and restore (read + \
             restore), ms, median of {runs} (min – max)\n"
        );
        println!(
            "| capture | state | keys | snapshot | write | checkpoint | read | restore | \
             first restore | restore total | instantiate | native snapshot | native restore |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for &bytes in &args.state_bytes {
            for capture in [StateCapture::Exports, StateCapture::Image] {
                let result = state_size::measure(Path::new(COUNT_WASM), bytes, runs, capture)?;
                println!("{}", state_row(&result));
                states.push(result);
            }
        }
        println!(
            "\n## count state as incremental images: a delta after updating {} % of the keys, \
             ms, median of {runs} (min – max)\n",
            state_size::DELTA_TOUCHED_PERCENT
        );
        println!(
            "| keys | image | keys updated | delta snapshot | delta | changed pages | \
             restore full, incremental on | restore full + delta |"
        );
        println!("|---|---|---|---|---|---|---|---|");
        for state in &states {
            if let Some(delta) = &state.deltas {
                println!(
                    "| {} | {} | {} | {} | {} | {} of {} | {} | {} |",
                    state.keys,
                    bytes(state.state_bytes),
                    delta.touched_keys,
                    ms(&delta.snapshot_ms),
                    bytes(delta.delta_bytes),
                    delta.changed_pages,
                    delta.pages,
                    ms(&delta.full_resumed_ms),
                    ms(&delta.chain_restore_ms),
                );
            }
        }
    }

    let mut startup = None;
    if !args.no_startup {
        println!("\n## start-up and restore latency, ms, median of {runs} (min – max)\n");
        let result = startup::measure(args.restore_state_bytes, runs)?;
        let ms = |s: &Summary| format!("{:.1} ({:.1} – {:.1})", s.median, s.min, s.max);
        println!("| what | ms |\n|---|---|");
        println!(
            "| `weir run` of a trivial job, module compiled | {} |",
            ms(&result.cold_start_ms)
        );
        println!(
            "| `weir run` of a trivial job, module from the cache | {} |",
            ms(&result.warm_start_ms)
        );
        println!(
            "| `weir run` spawn → job starting (log line), module from the cache | {} |",
            ms(&result.warm_to_running_ms)
        );
        println!(
            "| new runner restoring a {} savepoint → first record at the sink | {} |",
            bytes(result.restore_state_bytes),
            ms(&result.restore_to_first_record_ms)
        );
        println!(
            "| the same keys checkpointed as an image: a {} savepoint → first record | {} |",
            bytes(result.image_restore_state_bytes),
            ms(&result.image_restore_to_first_record_ms)
        );
        startup = Some(result);
    }

    let mut rescales = Vec::new();
    if !args.no_rescale {
        println!(
            "\n## restore of a count savepoint taken at parallelism 2: at 2, and rescaled to 3, \
             → first record at the sink, ms, median of {runs} (min – max)\n"
        );
        println!("| keys | savepoint | at parallelism 2 | rescaled to 3 |\n|---|---|---|---|");
        for &keys in &args.rescale_keys {
            let result = rescale::measure(keys, runs)?;
            let ms = |s: &Summary| format!("{:.1} ({:.1} – {:.1})", s.median, s.min, s.max);
            println!(
                "| {} | {} | {} | {} |",
                result.keys,
                bytes(result.state_bytes),
                ms(&result.same_parallelism_ms),
                ms(&result.rescaled_ms)
            );
            rescales.push(result);
        }
    }

    let mut object_stores = Vec::new();
    if !args.no_object_storage {
        println!(
            "\n## one task's state written and read: local files against S3 (moto on \
             loopback), ms, median of {runs} (min – max)\n"
        );
        println!(
            "| state | local write | S3 write | local read | S3 read |\n|---|---|---|---|---|"
        );
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        for result in object_storage::measure(&root, &args.object_storage_bytes, runs)? {
            let ms = |s: &Summary| format!("{:.1} ({:.1} – {:.1})", s.median, s.min, s.max);
            println!(
                "| {}{} | {} | {} | {} | {} |",
                bytes(result.bytes),
                if result.multipart { ", multipart" } else { "" },
                ms(&result.local_write_ms),
                ms(&result.s3_write_ms),
                ms(&result.local_read_ms),
                ms(&result.s3_read_ms)
            );
            object_stores.push(result);
        }
    }

    machine.load_after = report::load_average();
    println!(
        "\nload after: {}",
        machine.load_after.as_deref().unwrap_or("?")
    );
    if let Some(path) = &args.json {
        let guest_call = match &args.criterion {
            Some(dir) if dir.is_dir() => report::read_criterion(dir, &args.baselines)?,
            _ => Vec::new(),
        };
        let report = Report {
            machine,
            guest_call,
            pipeline: pipelines,
            state_size: states,
            startup,
            rescale: rescales,
            object_storage: object_stores,
        };
        report::write_json(path, &report)?;
    }
    Ok(())
}

fn pipeline_row(r: &PipelineResult) -> String {
    let interval = match r.case.interval_ms {
        None => "off".to_string(),
        Some(ms) => format!("every {ms} ms"),
    };
    let done = r
        .checkpoints_completed
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let med_max = |s: &Option<Summary>| match s {
        Some(s) => format!("{:.0}, {:.0}", s.median, s.max),
        None => "–".to_string(),
    };
    let unchained = if r.case.chain { "" } else { " (unchained)" };
    format!(
        "| {}{unchained} | {} | {interval} | {:.2} M | {:.2} – {:.2} M | {done} | {} | {} | {} | {} | {} | {} | {} | {} |",
        r.case.operator.name(),
        r.case.parallelism,
        r.records_per_s.median / 1e6,
        r.records_per_s.min / 1e6,
        r.records_per_s.max / 1e6,
        med_max(&r.checkpoint_duration_ms),
        med_max(&r.checkpoint_sync_ms),
        med_max(&r.checkpoint_async_ms),
        r.checkpoint_bytes
            .map_or("–".to_string(), |s| bytes(s.median as u64)),
        r.peak_rss_bytes
            .map_or("–".to_string(), |s| bytes(s.median as u64)),
        r.cores_used
            .map_or("–".to_string(), |s| format!("{:.2}", s.median)),
        match (
            &r.first_quarter_records_per_s,
            &r.last_quarter_records_per_s
        ) {
            (Some(a), Some(b)) => format!("{:.2} → {:.2} M", a.median / 1e6, b.median / 1e6),
            _ => "–".to_string(),
        },
        r.case.records,
    )
}

/// A summary in ms: median (min – max).
fn ms(s: &Summary) -> String {
    format!("{:.1} ({:.1} – {:.1})", s.median, s.min, s.max)
}

fn state_row(r: &StateSizeResult) -> String {
    let native = |s: &Option<Summary>| s.as_ref().map_or("–".to_string(), ms);
    format!(
        "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} |",
        r.capture,
        bytes(r.state_bytes),
        r.keys,
        ms(&r.snapshot_ms),
        ms(&r.write_ms),
        ms(&r.checkpoint_ms),
        ms(&r.read_ms),
        ms(&r.restore_ms),
        r.first_restore_ms,
        ms(&r.restore_total_ms),
        ms(&r.instantiate_ms),
        native(&r.native_snapshot_ms),
        native(&r.native_restore_ms),
    )
}

/// Bytes in decimal units, as state sizes are stated.
fn bytes(n: u64) -> String {
    match n {
        n if n >= 1_000_000 => format!("{:.1} MB", n as f64 / 1e6),
        n if n >= 1_000 => format!("{:.1} kB", n as f64 / 1e3),
        n => format!("{n} B"),
    }
}
