//! One job as 1, 2 and 3 worker processes (`weir run JOB --worker I/N`): throughput of the
//! two-stage word count on this machine.
//!
//! The job: Kafka `in` → `split` → key-hash → `count` → Kafka `out`, every vertex at
//! parallelism 1 per worker, checkpoints on local files every `interval_ms`. With workers it
//! runs as two stages joined by the exchange topic (one partition per key group, 12 of them),
//! each worker its share of both. `lines` lines of `words` words (of `keys` distinct ones) are
//! pre-filled into the input (6 partitions); the clock runs from the spawn of the workers to
//! the moment a read_committed consumer of the output has seen one record per word, which is
//! then checked: every key's last count must add up to the words. Workers run until stopped
//! (the exchange source never ends), so they are stopped after the count.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::Producer;
use serde::Serialize;

use crate::error::BenchError;
use crate::kafka::{
    Broker, Seen, collect_metadata, input_producer, io, output_consumer, send, wrong,
};
use crate::summary::Summary;

/// Partitions of the input topic.
pub const INPUT_PARTITIONS: i32 = 6;
/// Partitions of the output topic.
pub const OUTPUT_PARTITIONS: i32 = 3;
/// Key groups of `count`, so partitions of the exchange topic.
pub const KEY_GROUPS: u32 = 12;

/// What the benchmark runs.
#[derive(Debug, Clone, Serialize)]
pub struct WorkersSetup {
    /// The release `weir` binary.
    #[serde(skip)]
    pub weir: PathBuf,
    /// The `split` guest.
    #[serde(skip)]
    pub split_wasm: PathBuf,
    /// The `count` guest.
    #[serde(skip)]
    pub count_wasm: PathBuf,
    /// Where compiled modules are cached.
    #[serde(skip)]
    pub cache: PathBuf,
    /// Checkpoint interval, ms.
    pub interval_ms: u64,
    /// Input lines.
    pub lines: u64,
    /// Words per line.
    pub words: u64,
    /// Distinct words.
    pub keys: u64,
}

/// One measured run.
#[derive(Debug, Clone, Serialize)]
pub struct WorkersResult {
    /// Worker processes.
    pub workers: u32,
    /// Words (output records), all checked.
    pub records: u64,
    /// Spawn of the workers → the last output record visible, s.
    pub seconds: f64,
    /// Words per second.
    pub records_per_s: f64,
    /// Trigger → complete of every checkpoint of every stage of every worker, ms.
    pub checkpoint_ms: Option<Summary>,
}

/// Line `i` of the input.
fn line(setup: &WorkersSetup, i: u64) -> String {
    (0..setup.words)
        .map(|w| format!("w{}", (i * 7 + w * 13) % setup.keys))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Writes the input lines to `topic`.
pub fn prefill_lines(broker: &Broker, topic: &str, setup: &WorkersSetup) -> Result<(), BenchError> {
    let producer = input_producer(broker)?;
    for i in 0..setup.lines {
        send(&producer, topic, b"", line(setup, i).as_bytes(), None)?;
        if i % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer
        .flush(Duration::from_secs(120))
        .map_err(|e| wrong(format!("flushing the input: {e}")))
}

/// The job file.
fn job_text(
    setup: &WorkersSetup,
    broker: &Broker,
    name: &str,
    dir: &Path,
    input: &str,
    output: &str,
) -> String {
    format!(
        "name = \"{name}\"\nmax_parallelism = {KEY_GROUPS}\n\
         [checkpoint]\ninterval = \"{interval}ms\"\nretained = 100000\ndirectory = {checkpoints:?}\n\
         [restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"in\"\ntype = \"kafka\"\nbootstrap = \"{bootstrap}\"\n\
         topics = [\"{input}\"]\nstart = \"earliest\"\n\
         [[operator]]\nname = \"split\"\nmodule = {split:?}\ninputs = [\"in\"]\n\
         [[operator]]\nname = \"count\"\nmodule = {count:?}\n\
         inputs = [{{ from = \"split\", partition = \"key-hash\" }}]\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"count\"]\n\
         bootstrap = \"{bootstrap}\"\ntopic = \"{output}\"\n\
         transactional_id_prefix = \"{output}.tx\"\n",
        interval = setup.interval_ms,
        checkpoints = dir.join("checkpoints").display().to_string(),
        bootstrap = broker.bootstrap(),
        split = setup.split_wasm.display().to_string(),
        count = setup.count_wasm.display().to_string(),
    )
}

/// Worker processes, stopped (SIGTERM, then SIGKILL) when dropped.
struct Workers(Vec<(Child, PathBuf)>);

impl Drop for Workers {
    fn drop(&mut self) {
        for (child, _) in &self.0 {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for (child, _) in &mut self.0 {
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs the job as `workers` processes (0: one process, not as workers) over freshly
/// pre-filled input and measures it.
pub fn run(
    setup: &WorkersSetup,
    broker: &Broker,
    workers: u32,
) -> Result<WorkersResult, BenchError> {
    let (input, output) = (
        format!("words-in-{workers}"),
        format!("words-out-{workers}"),
    );
    broker.create_topic(&input, INPUT_PARTITIONS)?;
    broker.create_topic(&output, OUTPUT_PARTITIONS)?;
    prefill_lines(broker, &input, setup)?;
    let dir = broker.scratch().join(format!("workers-{workers}"));
    fs::create_dir_all(&dir).map_err(io("create", &dir))?;
    let job = dir.join("job.toml");
    // A job name of its own, so its exchange topic is new: a fresh start of a job reads its
    // exchange from the beginning, records of an earlier run included.
    let name = format!("words{workers}");
    let text = job_text(setup, broker, &name, &dir, &input, &output);
    fs::write(&job, text).map_err(io("write", &job))?;
    let expected = setup.lines * setup.words;
    let start = Instant::now();
    let mut running = Workers(Vec::new());
    // 0: one process without --worker, the key-hash edge in the process.
    for index in 0..workers.max(1) {
        let log = dir.join(format!("worker-{index}.log"));
        let err = File::create(&log).map_err(io("create", &log))?;
        let worker = format!("{index}/{workers}");
        let args: &[&str] = if workers == 0 {
            &["--no-control"]
        } else {
            &["--no-control", "--worker", &worker]
        };
        let child = Command::new(&setup.weir)
            .arg("run")
            .arg(&job)
            .args(args)
            .env("WEIR_CACHE_DIR", &setup.cache)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .map_err(io("run", &setup.weir))?;
        running.0.push((child, log));
    }
    let consumer = output_consumer(broker, &output, OUTPUT_PARTITIONS)?;
    let mut seen = Seen::default();
    let deadline = Instant::now() + Duration::from_secs(600);
    while seen.records < expected {
        for (child, log) in &mut running.0 {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(wrong(format!(
                    "a worker ended with {status}: {}",
                    fs::read_to_string(log).unwrap_or_default()
                )));
            }
        }
        if Instant::now() >= deadline {
            return Err(wrong(format!(
                "{workers} workers: {} of {expected} output records after 600 s",
                seen.records
            )));
        }
        match consumer.poll(Duration::from_millis(100)) {
            None | Some(Err(KafkaError::PartitionEOF(_))) => {}
            Some(Err(e)) => return Err(wrong(format!("reading {output}: {e}"))),
            Some(Ok(m)) => seen.add(m.key(), m.payload(), None),
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    // Anything written twice would come now.
    let settle = Instant::now() + Duration::from_secs(2);
    while Instant::now() < settle {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            seen.add(m.key(), m.payload(), None);
        }
    }
    drop(running);
    seen.verify(&format!("{workers} workers"), expected)?;
    let mut durations = Vec::new();
    collect_metadata(&dir.join("checkpoints"), &mut durations);
    Ok(WorkersResult {
        workers,
        records: expected,
        seconds,
        records_per_s: expected as f64 / seconds,
        checkpoint_ms: Summary::of(&durations),
    })
}
