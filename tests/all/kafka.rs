//! A real Kafka-protocol broker for the tests of the Kafka source and the exactly-once Kafka
//! sink, and the client calls those tests make around it: topics, plain records (with headers,
//! if asked) in, every record out (read_committed or not), a group's committed offsets.
//!
//! The broker is PyPI's `noida-db` (a single-broker Kafka 3.8 emulator), pinned in
//! `tests/kafka/requirements.txt` and installed into `tests/kafka/.venv` by
//! `scripts/install-kafka-broker.sh`, once per test process, the first time a test asks for a
//! broker. It supports what exactly-once needs: transactions, `read_committed` and the last
//! stable offset, `send_offsets_to_transaction`, fencing by `transactional.id`.
//!
//! Tests share one broker ([`Broker::shared`], apart by unique topic names), or start their own
//! when they stop and restart it ([`Broker::start`]). When neither can be had the test is
//! skipped, loudly — or fails, under `CI=true` ([`broker_or_skip`], [`own_broker_or_skip`]).
//!
//! **No broker outlives the test process.** The shared broker lives in a static, which is never
//! dropped, and a killed test process runs no `Drop` at all; so every broker has a watchdog, a
//! small `sh` whose standard input is a pipe from the test process. The test process writes to
//! it only to stop the broker on purpose; when the pipe closes without a word, the test process
//! is gone (it exited, crashed or was killed — the kernel closes the pipe in every case), and
//! the watchdog stops the broker and removes its data directory. A `Ctrl-C` reaches the broker
//! directly, as it is in the test's process group. This needs no `libc` (no `prctl`
//! death signal, no process groups): a pipe's end is the one thing the kernel reports about a
//! dead process to a process that is not its parent.
//!
//! Every wait is bounded: [`START_TIMEOUT`] for a broker to answer, [`CLIENT_TIMEOUT`] for one
//! client call, [`READ_TIMEOUT`] for [`Broker::read_all`]. `WEIR_KAFKA_VERBOSE=1` prints how
//! long each broker took to answer; a broker's output is in `broker.log` in its temp folder.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::ClientContext;
use rdkafka::Offset;
use rdkafka::TopicPartitionList;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};

use crate::support::workspace_root;

/// The longest a broker may take to answer a metadata request after it is started.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest one client call (create a topic, flush, fetch offsets) may take.
pub(crate) const CLIENT_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest [`Broker::read_all`] may take to reach the end of every partition.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a broker asked to stop (SIGTERM: it saves its state first) has before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The line noida-db 0.2.3's executable prints on Debian 12 (built against a newer glibc; it
/// runs): left out of anything shown.
const GLIBC_NOISE: &str = "weak version GLIBC_2.39 not found";

// ---------------------------------------------------------------------------------------------
// Skipping

/// Whether this run is CI's (`CI=true`), where a test never skips for want of a broker.
fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// What a test does when it cannot have a broker: fail under `CI=true`, else say loudly, straight
/// to stderr (the harness hides what `eprintln!` prints in a passing test), that it is skipped.
fn skip(test: &str, reason: &str) {
    assert!(
        !in_ci(),
        "{test}: no Kafka broker, and CI never skips: {reason}"
    );
    let _ = writeln!(
        std::io::stderr().lock(),
        "\n!!!!! SKIPPED: {test}: no Kafka broker: {reason} !!!!!\n"
    );
}

/// The broker shared by this test process's tests, or `None` — after saying so, loudly — when it
/// cannot be installed or started (a failure under `CI=true`):
///
/// ```ignore
/// let Some(broker) = kafka::broker_or_skip("kafka_source_reads_everything") else { return };
/// ```
pub(crate) fn broker_or_skip(test: &str) -> Option<&'static Broker> {
    Broker::shared().map_err(|reason| skip(test, &reason)).ok()
}

/// A broker of the test's own ([`Broker::start`]), or `None` as in [`broker_or_skip`].
pub(crate) fn own_broker_or_skip(test: &str) -> Option<Broker> {
    Broker::start().map_err(|reason| skip(test, &reason)).ok()
}

// ---------------------------------------------------------------------------------------------
// Installing

/// The broker's executable, installed by `scripts/install-kafka-broker.sh` once per test process
/// (a no-op when the pinned version is there), or why it could not be.
fn executable() -> Result<&'static Path, String> {
    static EXE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    EXE.get_or_init(|| {
        let script = workspace_root().join("scripts/install-kafka-broker.sh");
        let started = Instant::now();
        // Its messages go to our stderr, not through the harness: an install is seen.
        let out = Command::new("bash")
            .arg(&script)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run bash {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "`bash scripts/install-kafka-broker.sh` failed ({}; what it printed is above): \
                 it installs PyPI's noida-db into tests/kafka/.venv and needs python3 with venv \
                 and access to PyPI",
                out.status
            ));
        }
        let exe = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if !exe.is_file() {
            return Err(format!(
                "scripts/install-kafka-broker.sh named {exe:?} as the broker, which is no file"
            ));
        }
        if started.elapsed() > Duration::from_secs(2) {
            let _ = writeln!(
                std::io::stderr(),
                "weir: installed the Kafka test broker in {:.1?}",
                started.elapsed()
            );
        }
        Ok(exe)
    })
    .as_ref()
    .map(PathBuf::as_path)
    .map_err(Clone::clone)
}

// ---------------------------------------------------------------------------------------------
// The broker

/// A running noida-db broker on a loopback port, with its data in a temp folder. Dropping it
/// stops the broker (and waits for it); see the module doc for what happens when the test
/// process dies instead.
pub(crate) struct Broker {
    /// The broker's executable.
    exe: &'static Path,
    /// Its port on 127.0.0.1, the same across [`Broker::restart`].
    port: u16,
    /// Holds `data/` (the broker's `--data-dir`) and `broker.log` (its output).
    dir: tempfile::TempDir,
    /// The broker process and its watchdog; `None` while stopped.
    running: Option<Running>,
}

/// A broker process and the watchdog that stops it when the test process is gone.
struct Running {
    broker: Child,
    watchdog: Child,
    /// The watchdog's standard input: a line says what to do, its end says that we are gone.
    to_watchdog: ChildStdin,
}

/// The watchdog: `sh -c WATCHDOG sh PID DIR`. A line `stop` on its input: SIGTERM to the broker
/// (the test process waits for it, and reaps it); a line `forget`: nothing (the test process
/// kills it itself). The end of its input without a line: the test process is gone, so nobody
/// else will stop the broker or remove its folder; the broker now belongs to init, which reaps
/// it, so `kill -0` tells when it has exited.
const WATCHDOG: &str = r#"
pid=$1
dir=$2
if read -r word; then
  if [ "$word" = stop ]; then kill -TERM "$pid" 2>/dev/null; fi
  exit 0
fi
kill -TERM "$pid" 2>/dev/null
i=0
while kill -0 "$pid" 2>/dev/null; do
  i=$((i + 1))
  if [ "$i" -ge 100 ]; then kill -KILL "$pid" 2>/dev/null; break; fi
  sleep 0.1
done
rm -rf "$dir"
"#;

impl Broker {
    /// The broker all tests of this process share, started by the first test that asks; or why
    /// there is none (the same reason for every test). Never stopped by a test: one that must
    /// stop its broker uses [`Broker::start`]. Tests keep apart by unique topic, group and
    /// transactional ids.
    pub(crate) fn shared() -> Result<&'static Broker, String> {
        static SHARED: OnceLock<Result<Broker, String>> = OnceLock::new();
        SHARED
            .get_or_init(Broker::start)
            .as_ref()
            .map_err(Clone::clone)
    }

    /// A broker of its own on a free port (installing it first if needed), answering metadata
    /// requests; or why it could not be started.
    pub(crate) fn start() -> Result<Broker, String> {
        let exe = executable()?;
        let dir = tempfile::Builder::new()
            .prefix("weir-kafka-")
            .tempdir()
            .map_err(|e| format!("cannot make a temp dir for the broker: {e}"))?;
        let mut broker = Broker {
            exe,
            port: 0,
            dir,
            running: None,
        };
        let mut last = String::new();
        // A free port may be taken between our look and the broker's bind: try another.
        for _ in 0..3 {
            broker.port = free_port()?;
            match broker.launch() {
                Ok(()) => return Ok(broker),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// `"127.0.0.1:PORT"`, for `bootstrap.servers`.
    pub(crate) fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The broker's port.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Whether the broker is running (not [`Broker::stop`]ped or [`Broker::kill`]ed).
    pub(crate) fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// Stops the broker as an operator would (SIGTERM; it saves its state to its data
    /// directory) and waits for it to exit (killing it after 10 s). The port stays this
    /// broker's for [`Broker::restart`]. Does nothing when it is not running.
    pub(crate) fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            running.stop();
        }
    }

    /// Kills the broker (SIGKILL, a crash) and waits for it. It keeps only what it saved of its
    /// own accord before (it saves every few seconds and on [`Broker::stop`]).
    pub(crate) fn kill(&mut self) {
        if let Some(running) = self.running.take() {
            running.kill();
        }
    }

    /// Starts the broker again on the same port and data directory (stopping it first if it
    /// runs), and waits until it answers; panics if it does not. After [`Broker::stop`] it has
    /// the topics, records and committed offsets it had.
    pub(crate) fn restart(&mut self) {
        self.stop();
        // The old broker's port may linger for a moment: try a few times.
        let mut last = String::new();
        for _ in 0..3 {
            match self.launch() {
                Ok(()) => return,
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        panic!(
            "the Kafka broker did not restart on port {}: {last}",
            self.port
        );
    }

    /// Whether the broker answers a metadata request within `timeout`, or what went wrong.
    pub(crate) fn metadata(&self, timeout: Duration) -> Result<(), String> {
        let consumer: BaseConsumer = self
            .config()
            .set("group.id", "weir-tests-metadata")
            .create()
            .map_err(|e| format!("cannot create a Kafka client: {e}"))?;
        let metadata = consumer
            .fetch_metadata(None, timeout)
            .map_err(|e| format!("metadata request to {}: {e}", self.bootstrap()))?;
        if metadata.brokers().is_empty() {
            return Err(format!("{} answered with no brokers", self.bootstrap()));
        }
        Ok(())
    }

    /// Starts the broker process and its watchdog on `self.port`, and waits until it answers.
    fn launch(&mut self) -> Result<(), String> {
        let data = self.dir.path().join("data");
        fs::create_dir_all(&data).map_err(|e| format!("cannot make {}: {e}", data.display()))?;
        let log_path = self.log_path();
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let log_start = fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
        let mut broker = Command::new(self.exe)
            .args([
                "start",
                "--only",
                "kafka",
                "--host",
                "127.0.0.1",
                "--kafka-port",
            ])
            .arg(self.port.to_string())
            .arg("--data-dir")
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))?;
        let mut watchdog = match Command::new("sh")
            .args(["-c", WATCHDOG, "sh"])
            .arg(broker.id().to_string())
            .arg(self.dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(watchdog) => watchdog,
            Err(e) => {
                let _ = broker.kill();
                let _ = broker.wait();
                return Err(format!("cannot run sh (the broker's watchdog): {e}"));
            }
        };
        let to_watchdog = watchdog.stdin.take().expect("piped");
        let mut running = Running {
            broker,
            watchdog,
            to_watchdog,
        };
        let started = Instant::now();
        let deadline = started + START_TIMEOUT;
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Ok(Some(status)) = running.broker.try_wait() {
                // It is reaped: the watchdog must not signal its pid again.
                running.forget_watchdog();
                return Err(format!(
                    "the broker ({}) exited at start with {status}; it printed: {}",
                    self.exe.display(),
                    self.log_since(log_start)
                ));
            }
            // Ask only once the port is open: a client that finds no broker backs off.
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok()
                && self.metadata(Duration::from_secs(2)).is_ok()
            {
                self.running = Some(running);
                if std::env::var_os("WEIR_KAFKA_VERBOSE").is_some() {
                    let _ = writeln!(
                        std::io::stderr(),
                        "weir: Kafka broker on {} answered after {:.0?}",
                        self.bootstrap(),
                        started.elapsed()
                    );
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                running.kill();
                return Err(format!(
                    "the broker did not answer a metadata request on {} within {START_TIMEOUT:?}; \
                     it printed: {}",
                    self.bootstrap(),
                    self.log_since(log_start)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Where the broker's output goes.
    fn log_path(&self) -> PathBuf {
        self.dir.path().join("broker.log")
    }

    /// What the broker printed since byte `start` of its log, without the glibc warning.
    fn log_since(&self, start: u64) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(self.log_path()) {
            let _ = file.read_to_string(&mut text);
        }
        let text: Vec<&str> = text
            .get(usize::try_from(start).unwrap_or(0)..)
            .unwrap_or("")
            .lines()
            .filter(|line| !line.contains(GLIBC_NOISE))
            .collect();
        if text.is_empty() {
            "nothing".to_string()
        } else {
            text.join("\n")
        }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Running {
    /// SIGTERM through the watchdog, then a bounded wait for the broker; SIGKILL if it lingers.
    fn stop(mut self) {
        // The watchdog signals the broker while it is still our unreaped child: its pid cannot
        // have been reused.
        let _ = writeln!(self.to_watchdog, "stop");
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match self.broker.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "weir: the Kafka broker ignored SIGTERM for {STOP_TIMEOUT:?}: killing it"
                    );
                    let _ = self.broker.kill();
                    let _ = self.broker.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = self.watchdog.wait();
    }

    /// SIGKILL, after telling the watchdog to let go of the pid.
    fn kill(mut self) {
        self.forget_watchdog();
        let _ = self.broker.kill();
        let _ = self.broker.wait();
    }

    /// Tells the watchdog to exit without signalling, and waits for it.
    fn forget_watchdog(&mut self) {
        let _ = writeln!(self.to_watchdog, "forget");
        let _ = self.watchdog.wait();
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))
}

// ---------------------------------------------------------------------------------------------
// Clients

/// Which records a reader sees (`isolation.level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// Records of committed transactions and records outside transactions, up to the last
    /// stable offset.
    ReadCommitted,
    /// Every record, up to the high watermark, aborted and open transactions' too.
    ReadUncommitted,
}

impl Isolation {
    /// The value of `isolation.level`.
    fn level(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

/// One record as a consumer received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KafkaRecord {
    /// Its partition.
    pub(crate) partition: i32,
    /// Its offset in the partition.
    pub(crate) offset: i64,
    /// Its key, if it has one.
    pub(crate) key: Option<Vec<u8>>,
    /// Its value (empty for a null value).
    pub(crate) value: Vec<u8>,
    /// Its timestamp in milliseconds since the epoch, if it has one.
    pub(crate) timestamp: Option<i64>,
}

/// A record for [`Broker::produce`]: `(partition, key, value)`; no partition = the default
/// partitioner's choice.
pub(crate) type Produce<'a> = (Option<i32>, Option<&'a [u8]>, &'a [u8]);

/// The headers of a record for [`Broker::produce_with_headers`]: `(name, value)` in order (a
/// name may repeat); a `None` value is a null one.
pub(crate) type ProduceHeaders<'a> = &'a [(&'a str, Option<&'a [u8]>)];

/// A producer context that remembers every failed delivery, so that a flush can fail the test.
#[derive(Default)]
pub(crate) struct Deliveries {
    failed: Mutex<Vec<String>>,
}

impl Deliveries {
    /// The failed deliveries so far, emptied.
    pub(crate) fn take_failures(&self) -> Vec<String> {
        std::mem::take(&mut *self.failed.lock().unwrap())
    }
}

impl ClientContext for Deliveries {}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, message)) = result {
            self.failed.lock().unwrap().push(format!(
                "{} [{}]: {error}",
                message.topic(),
                message.partition()
            ));
        }
    }
}

/// `name` made unique to this test process and call (`name-PID-N`): tests sharing a broker keep
/// apart by topic, group and transactional ids, and a restarted broker keeps its topics.
pub(crate) fn unique(name: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{name}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Blocks on one of rdkafka's admin futures (they are driven by rdkafka's own thread; any
/// executor can wait for them).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a tokio runtime")
        .block_on(future)
}

impl Broker {
    /// A client configuration with `bootstrap.servers` set to this broker, for clients of the
    /// test's own.
    pub(crate) fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", self.bootstrap());
        config
    }

    /// Creates `name` with `partitions` partitions (replication 1: one broker), waiting for the
    /// result; panics if it fails (an existing topic too).
    pub(crate) fn create_topic(&self, name: &str, partitions: i32) {
        self.create_topic_with(name, partitions, &[]);
    }

    /// [`Broker::create_topic`] with topic configs, e.g. `[("cleanup.policy", "compact")]`.
    pub(crate) fn create_topic_with(&self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        let admin: AdminClient<DefaultClientContext> = self
            .config()
            .create()
            .unwrap_or_else(|e| panic!("cannot create a Kafka admin client: {e}"));
        let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(1));
        for (key, value) in configs {
            topic = topic.set(key, value);
        }
        let options = AdminOptions::new()
            .operation_timeout(Some(CLIENT_TIMEOUT))
            .request_timeout(Some(CLIENT_TIMEOUT));
        let results = block_on(admin.create_topics([&topic], &options))
            .unwrap_or_else(|e| panic!("CreateTopics {name} on {}: {e}", self.bootstrap()));
        for result in results {
            if let Err((topic, code)) = result {
                panic!("cannot create the topic {topic}: {code}");
            }
        }
    }

    /// The number of partitions of `topic`; panics if the broker does not know it.
    pub(crate) fn partitions(&self, topic: &str) -> i32 {
        let consumer = self.consumer("weir-tests-metadata", Isolation::ReadUncommitted);
        let metadata = consumer
            .fetch_metadata(Some(topic), CLIENT_TIMEOUT)
            .unwrap_or_else(|e| panic!("metadata of {topic}: {e}"));
        let found = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic)
            .unwrap_or_else(|| panic!("the broker did not describe the topic {topic}"));
        if let Some(error) = found.error() {
            panic!("metadata of {topic}: {error:?}");
        }
        i32::try_from(found.partitions().len()).expect("a partition count fits i32")
    }

    /// Produces `records` in order with a plain idempotent producer and flushes it; panics if
    /// any is not delivered.
    pub(crate) fn produce(&self, topic: &str, records: &[Produce<'_>]) {
        let records: Vec<_> = records.iter().map(|&record| (record, &[][..])).collect();
        self.produce_with_headers(topic, &records);
    }

    /// [`Broker::produce`], each record with its headers.
    pub(crate) fn produce_with_headers(
        &self,
        topic: &str,
        records: &[(Produce<'_>, ProduceHeaders<'_>)],
    ) {
        let producer: BaseProducer<Deliveries> = self
            .config()
            .set("enable.idempotence", "true")
            .create_with_context(Deliveries::default())
            .unwrap_or_else(|e| panic!("cannot create a Kafka producer: {e}"));
        for &((partition, key, value), headers) in records {
            let mut record = BaseRecord::<[u8], [u8]>::to(topic).payload(value);
            if let Some(partition) = partition {
                record = record.partition(partition);
            }
            if let Some(key) = key {
                record = record.key(key);
            }
            if !headers.is_empty() {
                let owned = headers
                    .iter()
                    .fold(OwnedHeaders::new(), |all, &(key, value)| {
                        all.insert(Header { key, value })
                    });
                record = record.headers(owned);
            }
            let deadline = Instant::now() + CLIENT_TIMEOUT;
            while let Err((error, unsent)) = producer.send(record) {
                let full = matches!(
                    error,
                    KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull)
                );
                assert!(
                    full && Instant::now() < deadline,
                    "cannot produce to {topic}: {error}"
                );
                producer.poll(Duration::from_millis(50));
                record = unsent;
            }
            producer.poll(Duration::ZERO);
        }
        producer
            .flush(CLIENT_TIMEOUT)
            .unwrap_or_else(|e| panic!("flushing the records to {topic}: {e}"));
        let failed = producer.context().take_failures();
        assert!(failed.is_empty(), "records not delivered: {failed:?}");
    }

    /// A transactional producer with `transactional.id` `id`, its transactions initialised
    /// (which fences an earlier producer with the same id and aborts its open transaction).
    /// Its context collects failed deliveries ([`Deliveries::take_failures`]).
    pub(crate) fn transactional_producer(&self, id: &str) -> BaseProducer<Deliveries> {
        let producer: BaseProducer<Deliveries> = self
            .config()
            .set("transactional.id", id)
            .create_with_context(Deliveries::default())
            .unwrap_or_else(|e| panic!("cannot create a transactional producer: {e}"));
        producer
            .init_transactions(CLIENT_TIMEOUT)
            .unwrap_or_else(|e| panic!("init_transactions for {id}: {e}"));
        producer
    }

    /// A consumer in group `group` that commits nothing by itself, reading at `isolation`.
    pub(crate) fn consumer(&self, group: &str, isolation: Isolation) -> BaseConsumer {
        self.config()
            .set("group.id", group)
            .set("enable.auto.commit", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "true")
            .set("isolation.level", isolation.level())
            .create()
            .unwrap_or_else(|e| panic!("cannot create a Kafka consumer: {e}"))
    }

    /// Every record of every partition of `topic`, from the beginning to the end as of the call
    /// (by partition, then offset), as a reader at `isolation` sees them; panics after
    /// [`READ_TIMEOUT`].
    ///
    /// The end of a partition is taken first: its high watermark, which the broker answers at
    /// the reader's isolation level, so under read_committed it is the last stable offset (the
    /// first offset of the oldest open transaction). A partition is read when a record at the
    /// end's last offset arrives, or when the consumer reports the partition's end (EOF). The
    /// first cannot be all: under read_committed the last offsets below the end may be
    /// transaction markers (control records) or aborted records, which are never delivered, and
    /// the consumer's position need not reach the watermark either; the consumer skips them
    /// itself and reports EOF when it has fetched up to the end. Records past the end taken
    /// (produced meanwhile) are left out.
    pub(crate) fn read_all(&self, topic: &str, isolation: Isolation) -> Vec<KafkaRecord> {
        let consumer = self.consumer("weir-tests-read-all", isolation);
        let mut ends = BTreeMap::new();
        let mut assignment = TopicPartitionList::new();
        for partition in 0..self.partitions(topic) {
            let (low, high) = consumer
                .fetch_watermarks(topic, partition, CLIENT_TIMEOUT)
                .unwrap_or_else(|e| panic!("watermarks of {topic} [{partition}]: {e}"));
            if high > low {
                ends.insert(partition, high);
                assignment
                    .add_partition_offset(topic, partition, Offset::Beginning)
                    .expect("a valid partition");
            }
        }
        let mut records = Vec::new();
        if ends.is_empty() {
            return records;
        }
        consumer
            .assign(&assignment)
            .unwrap_or_else(|e| panic!("assigning {topic}: {e}"));
        let mut pending: BTreeSet<i32> = ends.keys().copied().collect();
        let deadline = Instant::now() + READ_TIMEOUT;
        while !pending.is_empty() {
            assert!(
                Instant::now() < deadline,
                "read_all({topic}, {isolation:?}): partitions {pending:?} did not reach their ends \
                 {ends:?} within {READ_TIMEOUT:?}; read so far: {} records",
                records.len()
            );
            match consumer.poll(Duration::from_millis(100)) {
                None => {}
                Some(Err(KafkaError::PartitionEOF(partition))) => {
                    pending.remove(&partition);
                }
                Some(Err(e)) => panic!("reading {topic}: {e}"),
                Some(Ok(message)) => {
                    let partition = message.partition();
                    let end = ends.get(&partition).copied().unwrap_or(0);
                    if message.offset() >= end - 1 {
                        pending.remove(&partition);
                    }
                    if message.offset() < end {
                        records.push(KafkaRecord {
                            partition,
                            offset: message.offset(),
                            key: message.key().map(<[u8]>::to_vec),
                            value: message.payload().map(<[u8]>::to_vec).unwrap_or_default(),
                            timestamp: message.timestamp().to_millis(),
                        });
                    }
                }
            }
        }
        records.sort_by_key(|r| (r.partition, r.offset));
        records
    }

    /// The offsets `group` has committed for the partitions of `topic` (partitions without a
    /// committed offset are left out).
    pub(crate) fn committed_offsets(&self, group: &str, topic: &str) -> BTreeMap<i32, i64> {
        let consumer = self.consumer(group, Isolation::ReadCommitted);
        let mut partitions = TopicPartitionList::new();
        for partition in 0..self.partitions(topic) {
            partitions.add_partition(topic, partition);
        }
        let committed = consumer
            .committed_offsets(partitions, CLIENT_TIMEOUT)
            .unwrap_or_else(|e| panic!("committed offsets of {group} on {topic}: {e}"));
        committed
            .elements_for_topic(topic)
            .iter()
            .filter_map(|element| match element.offset() {
                Offset::Offset(offset) => Some((element.partition(), offset)),
                _ => None,
            })
            .collect()
    }
}
