//! Kafka → `count` → Kafka, exactly-once: Weir beside Kafka Streams and the raw limit of the
//! same broker.
//!
//! The exactly-once Kafka sink makes output visible only when a checkpoint completes and its
//! transaction commits, so its throughput and its latency are the questions a user of it asks
//! first, and the system they would compare it with is Kafka Streams. This module answers them
//! on the broker the tests use (Apache Kafka, installed by `scripts/install-apache-kafka.sh`,
//! unless `WEIR_KAFKA_BROKER=noida-db` chooses the emulator), started on free loopback ports for
//! the benchmark alone, and runs the same job, on the same broker and the same input, three
//! ways:
//!
//! - [`run_weir_max`]: the release `weir` binary on a bounded job (`until = "end"`) over `N`
//!   pre-filled records; wall time from spawn to exit, the output checked record for record.
//! - [`run_weir_latency`]: the same job as a stream while [`produce_at_rate`] writes at a fixed
//!   rate, each record's CreateTime its produce time; the Weir timestamp carries it through
//!   `count` to the output's CreateTime, and a read_committed consumer ([`watch_latency`])
//!   takes the time each output record becomes visible.
//! - [`run_streams_max`] and [`run_streams_latency`]: the same two runs of the job as a Kafka
//!   Streams application (`benches/peers/kafka-streams`, built by
//!   `scripts/build-kafka-streams-peer.sh`): `exactly_once_v2`, the commit interval equal to
//!   Weir's checkpoint interval, [`RAW_LOOPS`] stream threads, the count in Kafka Streams'
//!   default store (RocksDB, with a changelog topic). In the max run it closes itself once it
//!   has processed the records that were there when it started.
//! - [`run_raw_max`] and [`run_raw_latency`]: [`RAW_LOOPS`] threads, each a read_committed
//!   consumer of half the partitions and a transactional producer committing once per
//!   interval (offsets in the transaction), counting per key in a `HashMap`.
//!
//! Every run is verified: the read_committed output must hold exactly one record per input
//! record, and every key's last count must be its number of input records. A benchmark that
//! loses or duplicates records would measure nothing. Every run also records what it used
//! ([`Usage`]): the CPU time and peak memory of the `weir` or Java process from spawn to exit,
//! and for the raw loops, which run inside the benchmark, of the benchmark process over the
//! max run (not over the latency run, where the producer and the watcher share the process).

use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde::Serialize;
use weir::checkpoint::metadata::CheckpointMetadata;
use weir::ids::CheckpointKind;

use weir_test_servers::kafka::BrokerProcess;

use crate::error::BenchError;
use crate::summary::Summary;
use crate::usage::{self, Proc, SelfMeter, Usage};

/// How long one client call (create a topic, flush, commit) may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
/// Partitions of the input topics.
pub const INPUT_PARTITIONS: i32 = 4;
/// Partitions of the output topics.
pub const OUTPUT_PARTITIONS: i32 = 4;
/// Parallelism of every vertex of the job, and the number of raw loops: each Kafka sink
/// subtask commits one transaction per checkpoint, so 2 raw loops committing once per
/// interval make the same transactions per second.
pub const RAW_LOOPS: usize = 2;
/// What `weir run` logs when its modules are loaded and the job starts.
const STARTING: &str = " starting; checkpoints in ";

pub(crate) fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BenchError {
    let path = path.to_path_buf();
    move |source| BenchError::Io {
        action,
        path,
        source,
    }
}

pub(crate) fn wrong(what: impl Into<String>) -> BenchError {
    BenchError::Wrong(what.into())
}

/// Milliseconds since the Unix epoch, now.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

// ---------------------------------------------------------------------------------------------
// The broker

/// A broker of the benchmark's own on free loopback ports, its data in a temp
/// folder; dropping it stops it and removes the folder. The process, and the watchdog that
/// stops it should the benchmark die, are `weir-test-servers`'s, shared with the tests.
pub struct Broker {
    /// The broker process (dropped first: it stops before its folder goes).
    process: BrokerProcess,
    dir: tempfile::TempDir,
}

impl Broker {
    /// Installs the broker if needed (`weir_test_servers::kafka::install`) and starts it.
    pub fn start(root: &Path) -> Result<Broker, BenchError> {
        let installed = weir_test_servers::kafka::install(root).map_err(wrong)?;
        let dir = tempfile::Builder::new()
            .prefix("weir-kafka-bench-")
            .tempdir()
            .map_err(io("create a temporary directory", &std::env::temp_dir()))?;
        let process = BrokerProcess::start(&installed, dir.path()).map_err(wrong)?;
        Ok(Broker { process, dir })
    }

    /// Which broker it is (Apache Kafka unless `WEIR_KAFKA_BROKER` chose noida-db).
    pub fn kind(&self) -> weir_test_servers::kafka::Kind {
        self.process.kind()
    }

    /// The broker process's id.
    pub fn pid(&self) -> u32 {
        self.process.pid().unwrap_or(0)
    }

    /// `127.0.0.1:PORT`.
    pub fn bootstrap(&self) -> String {
        self.process.bootstrap()
    }

    /// A client configuration pointing at this broker.
    pub fn config(&self) -> ClientConfig {
        self.process.config()
    }

    /// Where the benchmark's own files go (job files, checkpoints, logs): the broker's temp
    /// folder, removed with it.
    pub fn scratch(&self) -> &Path {
        self.dir.path()
    }

    /// Creates `name` with `partitions` partitions.
    pub fn create_topic(&self, name: &str, partitions: i32) -> Result<(), BenchError> {
        let admin: AdminClient<DefaultClientContext> = self
            .config()
            .create()
            .map_err(|e| wrong(format!("admin client: {e}")))?;
        let topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        let options = AdminOptions::new()
            .operation_timeout(Some(CLIENT_TIMEOUT))
            .request_timeout(Some(CLIENT_TIMEOUT));
        let results = block_on(admin.create_topics([&topic], &options))?
            .map_err(|e| wrong(format!("CreateTopics {name}: {e}")))?;
        for result in results {
            if let Err((topic, code)) = result {
                return Err(wrong(format!("cannot create topic {topic}: {code}")));
            }
        }
        Ok(())
    }
}

fn block_on<F: std::future::Future>(future: F) -> Result<F::Output, BenchError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .map_err(io("start a tokio runtime", Path::new(".")))?;
    Ok(runtime.block_on(future))
}

// ---------------------------------------------------------------------------------------------
// Input

/// The input workload: keys `key-<i mod keys>`, `value_size`-byte values.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Workload {
    /// Distinct keys.
    pub keys: u64,
    /// Bytes per value.
    pub value_size: usize,
}

impl Workload {
    fn key(&self, i: u64) -> String {
        format!("key-{}", i % self.keys)
    }
}

/// The load of a fixed-rate run, the same for every system: what is written, how fast and for
/// how long, and how much of the start the latency figures leave out.
#[derive(Debug, Clone, Copy)]
pub struct FixedRate {
    /// The records written.
    pub workload: Workload,
    /// Records per second.
    pub rate: u64,
    /// How long the producer writes, s.
    pub seconds: u64,
    /// Records produced in the first this many seconds are left out of the latency figures.
    pub warmup_s: u64,
}

/// A plain producer (idempotent, librdkafka's default batching) for the input.
pub(crate) fn input_producer(broker: &Broker) -> Result<BaseProducer, BenchError> {
    broker
        .config()
        .set("enable.idempotence", "true")
        .set("queue.buffering.max.messages", "1000000")
        .create()
        .map_err(|e| wrong(format!("producer: {e}")))
}

/// Hands one record to `producer`, polling while its queue is full.
pub(crate) fn send(
    producer: &BaseProducer,
    topic: &str,
    key: &[u8],
    value: &[u8],
    timestamp: Option<i64>,
) -> Result<(), BenchError> {
    let mut record = BaseRecord::<[u8], [u8]>::to(topic).key(key).payload(value);
    if let Some(ts) = timestamp {
        record = record.timestamp(ts);
    }
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                record = back;
                producer.poll(Duration::from_millis(5));
            }
            Err((e, _)) => return Err(wrong(format!("producing to {topic}: {e}"))),
        }
    }
}

/// Writes `records` records to `topic` as fast as the producer takes them, and flushes.
pub fn prefill(
    broker: &Broker,
    topic: &str,
    records: u64,
    workload: Workload,
) -> Result<f64, BenchError> {
    let producer = input_producer(broker)?;
    let value = vec![b'v'; workload.value_size];
    let start = Instant::now();
    for i in 0..records {
        send(&producer, topic, workload.key(i).as_bytes(), &value, None)?;
        if i % 1024 == 0 {
            producer.poll(Duration::ZERO);
        }
    }
    producer
        .flush(Duration::from_secs(120))
        .map_err(|e| wrong(format!("flushing the input: {e}")))?;
    Ok(start.elapsed().as_secs_f64())
}

/// What [`produce_at_rate`] did.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Produced {
    /// Records written.
    pub records: u64,
    /// From the first send to the last, s.
    pub seconds: f64,
    /// `records / seconds`.
    pub records_per_s: f64,
}

/// Writes `rate` records per second to `topic` for `seconds`, each with its CreateTime set to
/// the moment it is handed to the producer (ms), and flushes.
pub fn produce_at_rate(
    broker: &Broker,
    topic: &str,
    rate: u64,
    seconds: u64,
    workload: Workload,
) -> Result<Produced, BenchError> {
    let producer = input_producer(broker)?;
    let value = vec![b'v'; workload.value_size];
    let total = rate * seconds;
    let start = Instant::now();
    let mut sent = 0;
    while sent < total {
        let due = ((start.elapsed().as_secs_f64() * rate as f64) as u64).min(total);
        while sent < due {
            let key = workload.key(sent);
            send(&producer, topic, key.as_bytes(), &value, Some(now_ms()))?;
            sent += 1;
        }
        producer.poll(Duration::ZERO);
        thread::sleep(Duration::from_millis(1));
    }
    let elapsed = start.elapsed().as_secs_f64();
    producer
        .flush(CLIENT_TIMEOUT)
        .map_err(|e| wrong(format!("flushing the input: {e}")))?;
    Ok(Produced {
        records: sent,
        seconds: elapsed,
        records_per_s: sent as f64 / elapsed,
    })
}

// ---------------------------------------------------------------------------------------------
// Output

/// What a read_committed consumer saw of an output topic.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seen {
    pub(crate) records: u64,
    /// Per key, the largest count seen.
    last_counts: HashMap<Vec<u8>, u64>,
    /// Visible time − CreateTime of each record, ms.
    latencies_ms: Vec<i64>,
    /// CreateTime of each record, in the same order (to leave out a warm-up).
    created_ms: Vec<i64>,
}

impl Seen {
    pub(crate) fn add(&mut self, key: Option<&[u8]>, value: Option<&[u8]>, created: Option<i64>) {
        self.records += 1;
        let count = value
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        let entry = self
            .last_counts
            .entry(key.unwrap_or_default().to_vec())
            .or_default();
        *entry = (*entry).max(count);
        if let Some(created) = created {
            self.latencies_ms.push(now_ms() - created);
            self.created_ms.push(created);
        }
    }

    /// Checks that the output is exactly one record per input record and that every key's
    /// last count adds up to the input.
    pub(crate) fn verify(&self, what: &str, input: u64) -> Result<(), BenchError> {
        let counted: u64 = self.last_counts.values().sum();
        if self.records != input || counted != input {
            return Err(wrong(format!(
                "{what}: {input} records in, but the read_committed output holds {} records \
                 whose last counts per key add up to {counted}",
                self.records
            )));
        }
        Ok(())
    }
}

/// A read_committed consumer of every partition of `topic`, from the beginning.
pub(crate) fn output_consumer(
    broker: &Broker,
    topic: &str,
    partitions: i32,
) -> Result<BaseConsumer, BenchError> {
    let consumer: BaseConsumer = broker
        .config()
        .set("group.id", "weir-bench-reader")
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("isolation.level", "read_committed")
        // The instrument, not the system measured: answer a fetch as soon as a record is
        // there rather than after librdkafka's default 500 ms wait.
        .set("fetch.wait.max.ms", "10")
        .create()
        .map_err(|e| wrong(format!("consumer: {e}")))?;
    let mut list = TopicPartitionList::new();
    for p in 0..partitions {
        list.add_partition_offset(topic, p, Offset::Beginning)
            .map_err(|e| wrong(format!("assignment: {e}")))?;
    }
    consumer
        .assign(&list)
        .map_err(|e| wrong(format!("assign {topic}: {e}")))?;
    Ok(consumer)
}

/// Reads every committed record of `topic` up to the ends it has now.
fn read_output(broker: &Broker, topic: &str) -> Result<Seen, BenchError> {
    let consumer = output_consumer(broker, topic, OUTPUT_PARTITIONS)?;
    let mut ends = HashMap::new();
    for p in 0..OUTPUT_PARTITIONS {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, CLIENT_TIMEOUT)
            .map_err(|e| wrong(format!("watermarks of {topic}/{p}: {e}")))?;
        if high > low {
            ends.insert(p, high);
        }
    }
    let mut seen = Seen::default();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ends.is_empty() {
        if Instant::now() >= deadline {
            return Err(wrong(format!(
                "reading {topic}: partitions {:?} did not reach their ends",
                ends.keys()
            )));
        }
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                ends.remove(&p);
            }
            Some(Err(e)) => return Err(wrong(format!("reading {topic}: {e}"))),
            Some(Ok(m)) => {
                seen.add(m.key(), m.payload(), None);
                if ends
                    .get(&m.partition())
                    .is_some_and(|&end| m.offset() >= end - 1)
                {
                    ends.remove(&m.partition());
                }
            }
        }
    }
    Ok(seen)
}

/// Watches `topic` from the beginning with a read_committed consumer until `expected` records
/// were seen, or `stop` is set and then `grace` passes; each record's latency is the moment
/// the consumer received it minus its CreateTime.
fn watch_latency(
    broker: &Broker,
    topic: &str,
    expected: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    grace: Duration,
) -> Result<Seen, BenchError> {
    let consumer = output_consumer(broker, topic, OUTPUT_PARTITIONS)?;
    let mut seen = Seen::default();
    let mut stop_at: Option<Instant> = None;
    loop {
        match consumer.poll(Duration::from_millis(2)) {
            None | Some(Err(KafkaError::PartitionEOF(_))) => {}
            Some(Err(e)) => return Err(wrong(format!("watching {topic}: {e}"))),
            Some(Ok(m)) => seen.add(m.key(), m.payload(), m.timestamp().to_millis()),
        }
        if stop.load(Ordering::SeqCst) {
            if seen.records >= expected.load(Ordering::SeqCst) {
                return Ok(seen);
            }
            let at = *stop_at.get_or_insert_with(|| Instant::now() + grace);
            if Instant::now() >= at {
                return Ok(seen);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Results

/// A max-throughput run over pre-filled records.
#[derive(Debug, Clone, Serialize)]
pub struct MaxResult {
    /// `weir`, `streams` or `raw`.
    pub system: String,
    /// Which repetition, from 1.
    pub run: usize,
    /// Records in and out.
    pub records: u64,
    /// Wall time, s: `weir` and `streams` from spawn to exit; `raw` from creating the clients
    /// to the last commit.
    pub seconds: f64,
    /// `records / seconds`.
    pub records_per_s: f64,
    /// Transactions committed (raw) or checkpoints completed (weir); not counted for
    /// `streams`.
    pub commits: Option<u64>,
    /// Checkpoint trigger → complete, ms, over the run's checkpoints (weir only).
    pub checkpoint_duration_ms: Option<Summary>,
    /// Spawn → ready, s (included in `seconds`): `weir` to its log line saying the job starts
    /// (modules loaded, tasks about to run), `streams` to the application reaching RUNNING
    /// (JVM started, consumer group joined, tasks assigned). Read every 10 ms.
    pub ready_seconds: Option<f64>,
    /// `weir` and `streams`: what their process used from spawn to exit; `raw`: what the
    /// benchmark process used from creating the loops' clients to their last commit (peak
    /// memory reset at the start, so it includes the benchmark's own baseline).
    pub usage: Usage,
}

/// A fixed-rate run.
#[derive(Debug, Clone, Serialize)]
pub struct LatencyResult {
    /// `weir`, `streams` or `raw`.
    pub system: String,
    /// Which repetition, from 1.
    pub run: usize,
    /// What the producer did.
    pub produced: Produced,
    /// Output records a read_committed consumer saw (one per input record).
    pub records_out: u64,
    /// Records produced in the first `warmup_s` left out of the latency figures.
    pub warmup_s: u64,
    /// Produce → visible, ms, p50.
    pub p50_ms: f64,
    /// p99.
    pub p99_ms: f64,
    /// p99.9.
    pub p999_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// Smallest.
    pub min_ms: f64,
    /// Mean.
    pub mean_ms: f64,
    /// Records the latency figures are over.
    pub samples: usize,
    /// Checkpoint trigger → complete, ms (weir only).
    pub checkpoint_duration_ms: Option<Summary>,
    /// `weir` and `streams`: what their process used from spawn to exit (the 2 s before the
    /// producer starts and the stop included). `raw`: not measured, both `None`: its loops
    /// share the benchmark process with the producer and the latency watcher, whose CPU and
    /// memory could not be told apart from theirs.
    pub usage: Usage,
}

/// The `q` quantile (0–1) of sorted samples, by nearest rank.
fn quantile(sorted: &[i64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64
}

fn latency_result(
    system: &str,
    run: usize,
    produced: Produced,
    seen: &Seen,
    warmup_s: u64,
    start_ms: i64,
    checkpoint_duration_ms: Option<Summary>,
) -> LatencyResult {
    let cutoff = start_ms + warmup_s as i64 * 1000;
    let mut samples: Vec<i64> = seen
        .latencies_ms
        .iter()
        .zip(&seen.created_ms)
        .filter(|&(_, &created)| created >= cutoff)
        .map(|(&l, _)| l)
        .collect();
    samples.sort_unstable();
    let mean = samples.iter().sum::<i64>() as f64 / samples.len().max(1) as f64;
    LatencyResult {
        system: system.to_string(),
        run,
        produced,
        records_out: seen.records,
        warmup_s,
        p50_ms: quantile(&samples, 0.50),
        p99_ms: quantile(&samples, 0.99),
        p999_ms: quantile(&samples, 0.999),
        max_ms: samples.last().map_or(f64::NAN, |&m| m as f64),
        min_ms: samples.first().map_or(f64::NAN, |&m| m as f64),
        mean_ms: mean,
        samples: samples.len(),
        checkpoint_duration_ms,
        usage: Usage::default(),
    }
}

// ---------------------------------------------------------------------------------------------
// Weir

/// How the benchmark runs `weir`.
#[derive(Debug, Clone)]
pub struct WeirSetup {
    /// The release `weir` binary.
    pub weir: PathBuf,
    /// The `count` guest.
    pub count_wasm: PathBuf,
    /// Checkpoint interval, ms.
    pub interval_ms: u64,
    /// Where compiled modules are cached (shared by the runs, so only the first compiles).
    pub cache: PathBuf,
    /// Whether the job's tasks may be chained: each count subtask then runs its sink subtask
    /// on its thread; false writes `chain = false`, a thread per task.
    pub chain: bool,
}

/// The job file: kafka (p=2) → key-hash → count (p=2) → kafka exactly-once (p=2).
fn job_text(
    setup: &WeirSetup,
    broker: &Broker,
    name: &str,
    dir: &Path,
    input: &str,
    output: &str,
    until: &str,
) -> String {
    let p = RAW_LOOPS;
    format!(
        "name = \"{name}\"\nchain = {chain}\n\
         [checkpoint]\ninterval = \"{interval}ms\"\nretained = 100000\ndirectory = {checkpoints:?}\n\
         [restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"in\"\ntype = \"kafka\"\nparallelism = {p}\n\
         bootstrap = \"{bootstrap}\"\ntopics = [\"{input}\"]\nstart = \"earliest\"\n\
         until = \"{until}\"\n\
         [[operator]]\nname = \"count\"\nmodule = {module:?}\nparallelism = {p}\n\
         inputs = [{{ from = \"in\", partition = \"key-hash\" }}]\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\nparallelism = {p}\ninputs = [\"count\"]\n\
         bootstrap = \"{bootstrap}\"\ntopic = \"{output}\"\ndelivery = \"exactly-once\"\n\
         transactional_id_prefix = \"{output}.tx\"\n",
        interval = setup.interval_ms,
        chain = setup.chain,
        checkpoints = dir.join("checkpoints").display().to_string(),
        bootstrap = broker.bootstrap(),
        module = setup.count_wasm.display().to_string(),
    )
}

/// A child process of the benchmark (`weir run`, the Kafka Streams JVM), its standard output
/// and error in a log, and the CPU time and peak memory it used, read before it is reaped
/// ([`usage::wait_measured`]).
struct Measured {
    child: Child,
    /// When it was spawned.
    spawned: Instant,
    /// What it is, for messages.
    what: &'static str,
    log: PathBuf,
    /// What it used, once it has ended.
    usage: Usage,
}

impl Measured {
    /// Runs `command` with its output going to `log`.
    fn spawn(
        what: &'static str,
        mut command: Command,
        log: PathBuf,
    ) -> Result<Measured, BenchError> {
        let out = File::create(&log).map_err(io("create", &log))?;
        let err = out.try_clone().map_err(io("open", &log))?;
        let spawned = Instant::now();
        let child = command
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|source| BenchError::Io {
                action: "run",
                path: PathBuf::from(command.get_program()),
                source,
            })?;
        Ok(Measured {
            child,
            spawned,
            what,
            log,
            usage: Usage::default(),
        })
    }

    fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for `line` in its log, the line it writes when it is ready for input, and
    /// returns the seconds from spawn to then (to 10 ms).
    fn wait_for(&mut self, line: &str) -> Result<f64, BenchError> {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if self.log_text().contains(line) {
                return Ok(self.spawned.elapsed().as_secs_f64());
            }
            // Not `try_wait`, which would reap it before its figures are read.
            if Proc::Pid(self.child.id()).exited() {
                let status = self.child.wait().map_err(io("wait for", &self.log))?;
                return Err(wrong(format!(
                    "{} ended with {status} before starting: {}",
                    self.what,
                    tail(&self.log_text())
                )));
            }
            if Instant::now() >= deadline {
                return Err(wrong(format!(
                    "{} did not start within 120 s: {}",
                    self.what,
                    tail(&self.log_text())
                )));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for it to exit on its own; fails unless it exits 0.
    fn wait(&mut self) -> Result<(), BenchError> {
        let (status, usage) = usage::wait_measured(&mut self.child, None)
            .map_err(io("wait for", &self.log))?
            .expect("a wait without a timeout ends with the process");
        self.usage = usage;
        if !status.success() {
            return Err(wrong(format!(
                "{} ended with {status}: {}",
                self.what,
                tail(&self.log_text())
            )));
        }
        Ok(())
    }

    /// SIGTERM (`weir run` cancels the job; the Kafka Streams peer closes, committing), then
    /// SIGKILL after 20 s.
    fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        match usage::wait_measured(&mut self.child, Some(Duration::from_secs(20))) {
            Ok(Some((_, usage))) => self.usage = usage,
            Ok(None) | Err(_) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

impl Drop for Measured {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

/// A running `weir run`.
struct WeirProcess {
    process: Measured,
    dir: PathBuf,
}

impl WeirProcess {
    fn spawn(
        setup: &WeirSetup,
        broker: &Broker,
        name: &str,
        input: &str,
        output: &str,
        until: &str,
    ) -> Result<WeirProcess, BenchError> {
        let dir = broker.scratch().join(name);
        fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        let job = dir.join("job.toml");
        fs::write(
            &job,
            job_text(setup, broker, name, &dir, input, output, until),
        )
        .map_err(io("write", &job))?;
        let mut command = Command::new(&setup.weir);
        command
            .arg("run")
            .arg(&job)
            .arg("--no-control")
            .env("WEIR_CACHE_DIR", &setup.cache)
            .env("RUST_LOG", "info");
        let process = Measured::spawn("weir", command, dir.join("weir.log"))?;
        Ok(WeirProcess { process, dir })
    }

    /// Trigger → complete of every checkpoint the job completed, ms.
    fn checkpoint_durations(&self) -> Vec<f64> {
        let mut found = Vec::new();
        collect_metadata(&self.dir.join("checkpoints"), &mut found);
        found
    }
}

/// The last lines of a log.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Every checkpoint's (not savepoint's) `duration_ms` under `dir`.
pub(crate) fn collect_metadata(dir: &Path, found: &mut Vec<f64>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_metadata(&path, found);
        } else if path.file_name().is_some_and(|n| n == "_metadata")
            && let Ok(bytes) = fs::read(&path)
            && let Ok(meta) = CheckpointMetadata::decode(&path, &bytes)
            && meta.kind == CheckpointKind::Checkpoint
        {
            found.push(meta.duration_ms as f64);
        }
    }
}

/// Weir over `records` pre-filled records of `input`, bounded: spawn → exit.
pub fn run_weir_max(
    setup: &WeirSetup,
    broker: &Broker,
    input: &str,
    records: u64,
    run: usize,
) -> Result<MaxResult, BenchError> {
    let this = ProcessRun::new(broker, "weir", "max", run, "weir", STARTING);
    let output = this.output()?;
    let start = Instant::now();
    let mut weir = WeirProcess::spawn(setup, broker, &this.name, input, &output, "end")?;
    let mut result = this.max(&mut weir.process, start, &output, records)?;
    let durations = weir.checkpoint_durations();
    result.commits = Some(durations.len() as u64);
    result.checkpoint_duration_ms = Summary::of(&durations);
    Ok(result)
}

/// Weir as a stream while the input is written at the `load`'s rate.
pub fn run_weir_latency(
    setup: &WeirSetup,
    broker: &Broker,
    load: FixedRate,
    run: usize,
) -> Result<LatencyResult, BenchError> {
    let this = ProcessRun::new(broker, "weir", "latency", run, "weir", STARTING);
    let (input, output) = this.topics()?;
    let mut weir = WeirProcess::spawn(setup, broker, &this.name, &input, &output, "never")?;
    let mut result = this.latency(&mut weir.process, &input, &output, load)?;
    result.checkpoint_duration_ms = Summary::of(&weir.checkpoint_durations());
    Ok(result)
}

/// One run of a system that runs as a process (`weir`, the Kafka Streams peer): what its
/// max-throughput and fixed-rate runs do alike around the process they spawn.
struct ProcessRun<'a> {
    broker: &'a Broker,
    /// `weir` or `streams`, as the results name it.
    system: &'static str,
    /// Which repetition, from 1.
    run: usize,
    /// `{system}-{max|latency}-{run}`: its folder, topics and Kafka Streams application id.
    name: String,
    /// What messages call it: `weir`, `Kafka Streams`.
    what: &'static str,
    /// The line the process logs once it is ready for input.
    ready: &'static str,
}

impl<'a> ProcessRun<'a> {
    fn new(
        broker: &'a Broker,
        system: &'static str,
        kind: &str,
        run: usize,
        what: &'static str,
        ready: &'static str,
    ) -> ProcessRun<'a> {
        ProcessRun {
            broker,
            system,
            run,
            name: format!("{system}-{kind}-{run}"),
            what,
            ready,
        }
    }

    /// Its output topic, `out-{name}`, created.
    fn output(&self) -> Result<String, BenchError> {
        let output = format!("out-{}", self.name);
        self.broker.create_topic(&output, OUTPUT_PARTITIONS)?;
        Ok(output)
    }

    /// Its input topic, `in-{name}`, and its output topic, both created.
    fn topics(&self) -> Result<(String, String), BenchError> {
        let input = format!("in-{}", self.name);
        self.broker.create_topic(&input, INPUT_PARTITIONS)?;
        Ok((input, self.output()?))
    }

    /// A max-throughput run of `process`, spawned at `start` over `records` pre-filled
    /// records: the time to its ready line and to its exit, the output checked. Commits and
    /// checkpoint durations are left for the caller, which knows whether it has them.
    fn max(
        &self,
        process: &mut Measured,
        start: Instant,
        output: &str,
        records: u64,
    ) -> Result<MaxResult, BenchError> {
        let ready_seconds = process.wait_for(self.ready)?;
        process.wait()?;
        let seconds = start.elapsed().as_secs_f64();
        let what = format!("{}, max throughput", self.what);
        read_output(self.broker, output)?.verify(&what, records)?;
        Ok(MaxResult {
            system: self.system.into(),
            run: self.run,
            records,
            seconds,
            records_per_s: records as f64 / seconds,
            commits: None,
            checkpoint_duration_ms: None,
            ready_seconds: Some(ready_seconds),
            usage: process.usage,
        })
    }

    /// A fixed-rate run of `process`, which reads `input` and writes `output`. Checkpoint
    /// durations are left for the caller.
    fn latency(
        &self,
        process: &mut Measured,
        input: &str,
        output: &str,
        load: FixedRate,
    ) -> Result<LatencyResult, BenchError> {
        process.wait_for(self.ready)?;
        // Let the source connect and assign its partitions before the clock starts.
        thread::sleep(Duration::from_secs(2));
        let (produced, seen, start_ms) = measure_latency(self.broker, input, output, load)?;
        process.stop();
        seen.verify(&format!("{}, fixed rate", self.what), produced.records)?;
        let mut result = latency_result(
            self.system,
            self.run,
            produced,
            &seen,
            load.warmup_s,
            start_ms,
            None,
        );
        result.usage = process.usage;
        Ok(result)
    }
}

/// Runs the producer at the `load`'s rate and the latency watcher side by side.
fn measure_latency(
    broker: &Broker,
    input: &str,
    output: &str,
    load: FixedRate,
) -> Result<(Produced, Seen, i64), BenchError> {
    let FixedRate {
        workload,
        rate,
        seconds,
        ..
    } = load;
    let expected = Arc::new(AtomicU64::new(u64::MAX));
    let stop = Arc::new(AtomicBool::new(false));
    thread::scope(|scope| {
        let watcher = {
            let (expected, stop) = (Arc::clone(&expected), Arc::clone(&stop));
            scope.spawn(move || {
                watch_latency(broker, output, expected, stop, Duration::from_secs(30))
            })
        };
        let start_ms = now_ms();
        let produced = produce_at_rate(broker, input, rate, seconds, workload);
        if let Ok(p) = &produced {
            expected.store(p.records, Ordering::SeqCst);
        }
        stop.store(true, Ordering::SeqCst);
        let seen = watcher.join().expect("the watcher does not panic")?;
        Ok((produced?, seen, start_ms))
    })
}

// ---------------------------------------------------------------------------------------------
// Kafka Streams

/// The line the Kafka Streams peer prints once the application is RUNNING.
const STREAMS_RUNNING: &str = "StreamsCount running";
/// What messages call the Kafka Streams peer's runs.
const STREAMS: &str = "Kafka Streams";

/// How the benchmark runs the Kafka Streams peer (`benches/peers/kafka-streams`).
#[derive(Debug, Clone)]
pub struct StreamsSetup {
    /// The `java` to run: `$JAVA_HOME/bin/java`, else the one on `PATH`, as for the broker.
    pub java: PathBuf,
    /// The peer's folder: its `log4j2.properties`, and `target/` with its jar and `lib/`.
    pub peer: PathBuf,
    /// Its commit interval, ms: Weir's checkpoint interval.
    pub interval_ms: u64,
}

impl StreamsSetup {
    /// Builds the peer if needed (`scripts/build-kafka-streams-peer.sh`, a no-op when built)
    /// and returns how to run it.
    pub fn build(root: &Path, interval_ms: u64) -> Result<StreamsSetup, BenchError> {
        let script = root.join("scripts").join("build-kafka-streams-peer.sh");
        let out = Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(io("run", &script))?;
        if !out.status.success() {
            return Err(wrong(format!(
                "`bash scripts/build-kafka-streams-peer.sh` failed ({}; what it printed is \
                 above); or leave Kafka Streams out with --no-streams",
                out.status
            )));
        }
        let peer = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        Ok(StreamsSetup {
            java: weir_test_servers::kafka::java(),
            peer,
            interval_ms,
        })
    }

    /// `java … StreamsCount` for a run named `name` (its application id), its state under
    /// `dir`.
    fn command(
        &self,
        broker: &Broker,
        name: &str,
        dir: &Path,
        input: &str,
        output: &str,
        until_end: bool,
    ) -> Command {
        let target = self.peer.join("target");
        let mut command = Command::new(&self.java);
        // The JVM's own defaults otherwise (heap, collector): the peer runs as a user would
        // start it.
        command
            .arg(format!(
                "-Dlog4j2.configurationFile={}",
                self.peer.join("log4j2.properties").display()
            ))
            .arg("-cp")
            .arg(format!(
                "{}:{}",
                target.join("kafka-streams-peer.jar").display(),
                target.join("lib").join("*").display()
            ))
            .arg("dev.weir.bench.StreamsCount")
            .args(["--bootstrap", &broker.bootstrap()])
            .args([
                "--input",
                input,
                "--output",
                output,
                "--application-id",
                name,
            ])
            .args(["--commit-interval-ms", &self.interval_ms.to_string()])
            .args(["--threads", &RAW_LOOPS.to_string()])
            .arg("--state-dir")
            .arg(dir.join("state"));
        if until_end {
            command.arg("--until-end");
        }
        command
    }

    fn spawn(
        &self,
        broker: &Broker,
        name: &str,
        input: &str,
        output: &str,
        until_end: bool,
    ) -> Result<Measured, BenchError> {
        let dir = broker.scratch().join(name);
        fs::create_dir_all(&dir).map_err(io("create", &dir))?;
        let command = self.command(broker, name, &dir, input, output, until_end);
        Measured::spawn("the Kafka Streams peer", command, dir.join("streams.log"))
    }
}

/// Kafka Streams over `records` pre-filled records of `input`: spawn → exit, the peer closing
/// itself once it has processed every record that was there when it started (a clean close
/// commits the last transaction).
pub fn run_streams_max(
    setup: &StreamsSetup,
    broker: &Broker,
    input: &str,
    records: u64,
    run: usize,
) -> Result<MaxResult, BenchError> {
    let this = ProcessRun::new(broker, "streams", "max", run, STREAMS, STREAMS_RUNNING);
    let output = this.output()?;
    let start = Instant::now();
    let mut streams = setup.spawn(broker, &this.name, input, &output, true)?;
    this.max(&mut streams, start, &output, records)
}

/// Kafka Streams while the input is written at the `load`'s rate.
pub fn run_streams_latency(
    setup: &StreamsSetup,
    broker: &Broker,
    load: FixedRate,
    run: usize,
) -> Result<LatencyResult, BenchError> {
    let this = ProcessRun::new(broker, "streams", "latency", run, STREAMS, STREAMS_RUNNING);
    let (input, output) = this.topics()?;
    let mut streams = setup.spawn(broker, &this.name, &input, &output, false)?;
    this.latency(&mut streams, &input, &output, load)
}

// ---------------------------------------------------------------------------------------------
// The raw limit

/// How a raw loop ends.
#[derive(Clone)]
enum RawEnd {
    /// After this many records of its partitions (max throughput).
    Records(u64),
    /// When this is set (fixed rate).
    Flag(Arc<AtomicBool>),
}

/// One raw loop: a read_committed consumer of `partitions`, a transactional producer,
/// consume → count → produce, a commit (with the consumed offsets) every `interval`. Returns
/// the transactions committed.
fn raw_loop(
    broker: &Broker,
    input: &str,
    output: &str,
    partitions: &[i32],
    transactional_id: &str,
    interval: Duration,
    end: RawEnd,
) -> Result<u64, BenchError> {
    let fail =
        |what: &str, e: KafkaError| wrong(format!("raw loop {transactional_id}: {what}: {e}"));
    // The settings Weir's source gives its consumer.
    let consumer: BaseConsumer = broker
        .config()
        .set("group.id", format!("{transactional_id}.group"))
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("isolation.level", "read_committed")
        .set("auto.offset.reset", "earliest")
        .create()
        .map_err(|e| fail("consumer", e))?;
    let mut list = TopicPartitionList::new();
    for &p in partitions {
        list.add_partition_offset(input, p, Offset::Beginning)
            .map_err(|e| fail("assignment", e))?;
    }
    consumer.assign(&list).map_err(|e| fail("assign", e))?;
    let producer: BaseProducer = broker
        .config()
        .set("transactional.id", transactional_id)
        .create()
        .map_err(|e| fail("producer", e))?;
    producer
        .init_transactions(CLIENT_TIMEOUT)
        .map_err(|e| fail("init_transactions", e))?;
    let group = consumer
        .group_metadata()
        .ok_or_else(|| wrong("the consumer has no group metadata"))?;
    let mut counts: HashMap<Vec<u8>, u64> = HashMap::new();
    let mut next: HashMap<i32, i64> = HashMap::new();
    let mut consumed = 0u64;
    let mut commits = 0u64;
    let mut in_txn = 0u64;
    let mut digits = String::new();
    producer.begin_transaction().map_err(|e| fail("begin", e))?;
    let mut last_commit = Instant::now();
    loop {
        let finished = match &end {
            RawEnd::Records(n) => consumed >= *n,
            RawEnd::Flag(flag) => flag.load(Ordering::SeqCst),
        };
        if finished || last_commit.elapsed() >= interval {
            if in_txn > 0 {
                let mut offsets = TopicPartitionList::new();
                for (&p, &o) in &next {
                    offsets
                        .add_partition_offset(input, p, Offset::Offset(o))
                        .map_err(|e| fail("offsets", e))?;
                }
                producer
                    .send_offsets_to_transaction(&offsets, &group, CLIENT_TIMEOUT)
                    .map_err(|e| fail("send_offsets_to_transaction", e))?;
                producer
                    .commit_transaction(CLIENT_TIMEOUT)
                    .map_err(|e| fail("commit", e))?;
                commits += 1;
                in_txn = 0;
                if finished {
                    return Ok(commits);
                }
                producer.begin_transaction().map_err(|e| fail("begin", e))?;
            } else if finished {
                producer
                    .abort_transaction(CLIENT_TIMEOUT)
                    .map_err(|e| fail("abort", e))?;
                return Ok(commits);
            }
            last_commit = Instant::now();
        }
        match consumer.poll(Duration::from_millis(1)) {
            None => {}
            Some(Err(e)) => return Err(fail("consume", e)),
            Some(Ok(m)) => {
                let key = m.key().unwrap_or_default();
                let count = counts.entry(key.to_vec()).or_default();
                *count += 1;
                digits.clear();
                use std::fmt::Write as _;
                let _ = write!(digits, "{count}");
                let mut record = BaseRecord::<[u8], [u8]>::to(output)
                    .key(key)
                    .payload(digits.as_bytes());
                if let Some(ts) = m.timestamp().to_millis() {
                    record = record.timestamp(ts);
                }
                loop {
                    match producer.send(record) {
                        Ok(()) => break,
                        Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                            record = back;
                            producer.poll(Duration::from_millis(5));
                        }
                        Err((e, _)) => return Err(fail("produce", e)),
                    }
                }
                next.insert(m.partition(), m.offset() + 1);
                consumed += 1;
                in_txn += 1;
                producer.poll(Duration::ZERO);
            }
        }
    }
}

/// The partitions raw loop `i` of [`RAW_LOOPS`] reads.
fn raw_partitions(i: usize) -> Vec<i32> {
    (0..INPUT_PARTITIONS)
        .filter(|p| *p as usize % RAW_LOOPS == i)
        .collect()
}

/// The raw loops over the pre-filled `input` until each has read its partitions' records.
pub fn run_raw_max(
    broker: &Broker,
    input: &str,
    records: u64,
    interval: Duration,
    run: usize,
) -> Result<MaxResult, BenchError> {
    let output = &format!("out-raw-max-{run}");
    broker.create_topic(output, OUTPUT_PARTITIONS)?;
    // Each loop's share: the records of its partitions (the input has no transactions, so
    // offsets are dense).
    let probe: BaseConsumer = broker
        .config()
        .create()
        .map_err(|e| wrong(format!("consumer: {e}")))?;
    let mut shares = Vec::new();
    for i in 0..RAW_LOOPS {
        let mut share = 0;
        for p in raw_partitions(i) {
            let (low, high) = probe
                .fetch_watermarks(input, p, CLIENT_TIMEOUT)
                .map_err(|e| wrong(format!("watermarks: {e}")))?;
            share += (high - low) as u64;
        }
        shares.push(share);
    }
    let meter = SelfMeter::start();
    let start = Instant::now();
    let commits = thread::scope(|scope| {
        let handles: Vec<_> = shares
            .iter()
            .enumerate()
            .map(|(i, &share)| {
                scope.spawn(move || {
                    raw_loop(
                        broker,
                        input,
                        output,
                        &raw_partitions(i),
                        &format!("raw-max-{run}-{i}"),
                        interval,
                        RawEnd::Records(share),
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a raw loop does not panic"))
            .sum::<Result<u64, BenchError>>()
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let usage = meter.finish();
    read_output(broker, output)?.verify("raw loop, max throughput", records)?;
    Ok(MaxResult {
        system: "raw".into(),
        run,
        records,
        seconds,
        records_per_s: records as f64 / seconds,
        commits: Some(commits),
        checkpoint_duration_ms: None,
        ready_seconds: None,
        usage,
    })
}

/// The raw loops while the input is written at the `load`'s rate.
pub fn run_raw_latency(
    broker: &Broker,
    load: FixedRate,
    interval: Duration,
    run: usize,
) -> Result<LatencyResult, BenchError> {
    let (input, output) = (
        &format!("in-raw-latency-{run}"),
        &format!("out-raw-latency-{run}"),
    );
    broker.create_topic(input, INPUT_PARTITIONS)?;
    broker.create_topic(output, OUTPUT_PARTITIONS)?;
    let done = Arc::new(AtomicBool::new(false));
    let (produced, seen, start_ms) = thread::scope(|scope| {
        let handles: Vec<_> = (0..RAW_LOOPS)
            .map(|i| {
                let done = Arc::clone(&done);
                scope.spawn(move || {
                    raw_loop(
                        broker,
                        input,
                        output,
                        &raw_partitions(i),
                        &format!("raw-latency-{run}-{i}"),
                        interval,
                        RawEnd::Flag(done),
                    )
                })
            })
            .collect();
        thread::sleep(Duration::from_secs(2));
        let measured = measure_latency(broker, input, output, load);
        done.store(true, Ordering::SeqCst);
        let loops = handles
            .into_iter()
            .map(|h| h.join().expect("a raw loop does not panic"))
            .sum::<Result<u64, BenchError>>();
        loops.and(measured)
    })?;
    seen.verify("raw loop, fixed rate", produced.records)?;
    Ok(latency_result(
        "raw",
        run,
        produced,
        &seen,
        load.warmup_s,
        start_ms,
        None,
    ))
}
