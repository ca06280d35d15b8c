//! A real Kafka-protocol broker for the tests of the Kafka source and the exactly-once Kafka
//! sink, and the client calls those tests make around it: topics, plain records (with headers,
//! if asked) in, every record out (read_committed or not), a group's committed offsets. The
//! tests are this folder's other files: the broker itself (`broker.rs`, and `cluster.rs` for
//! three nodes), the source (`source.rs`), the sink (`sink.rs`,
//! `sink_between_checkpoints.rs`), exactly-once through crashes (`exactly_once.rs`), broker
//! faults (`faults.rs`, through a relay that cuts chosen requests: `relay.rs`) and operations on
//! a running job (`operations.rs`).
//!
//! The broker is Apache Kafka itself (one KRaft node, broker and controller in one JVM), the
//! version pinned in `tests/kafka/apache/pom.xml`, its jars fetched with Maven into
//! `tests/kafka/apache/lib` by `scripts/install-apache-kafka.sh`, once per test process, the
//! first time a test asks for a broker. (The tests ran on `noida-db`, a Kafka-protocol emulator,
//! until issue 39; what it did differently is in docs/CHECKPOINTS.md §12. No test runs it now.)
//!
//! Tests share one broker ([`Broker::shared`], apart by unique topic names), or start their own
//! when they stop and restart it ([`Broker::start`]), or the cluster of three Apache Kafka
//! nodes the tests that need replication take turns on ([`shared_cluster_or_skip`]:
//! replication factor 3, `min.insync.replicas` 2). When none can be had the test is
//! skipped, loudly — or fails, under `CI=true` ([`broker_or_skip`], [`own_broker_or_skip`],
//! [`shared_cluster_or_skip`]).
//!
//! **No broker outlives the test process**: the broker process, its watchdog and its start
//! and stop are `weir-test-servers`'s (`test-servers/`), shared with the Kafka benchmark. The
//! shared broker lives in a static, never dropped; its watchdog stops it when the test process
//! is gone.
//!
//! Every wait is bounded: `weir_test_servers::kafka::START_TIMEOUT` for a broker to answer,
//! [`CLIENT_TIMEOUT`] for one client call, [`READ_TIMEOUT`] for [`Broker::read_all`].
//! `WEIR_KAFKA_VERBOSE=1` prints how long each broker took to answer; a broker's output is in
//! `broker.log` in its temp folder.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::ClientConfig;
use rdkafka::ClientContext;
use rdkafka::Offset;
use rdkafka::TopicPartitionList;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, NewTopic, ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{DeliveryResult, Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};

use weir_test_servers::kafka::{BrokerProcess, ClusterProcess, Installed, Kind};

use crate::support::{self, workspace_root};

mod broker;
// The jobs, the checks and the fault plans of the exactly-once tests serve the tests of faults,
// of operations, of the cluster, of the workers and of checkpoints on object storage too.
pub(crate) mod cluster;
pub(crate) mod exactly_once;
mod faults;
mod operations;
mod relay;
mod sink;
mod sink_between_checkpoints;
mod source;

/// The longest one client call (create a topic, flush, fetch offsets) may take.
pub(crate) const CLIENT_TIMEOUT: Duration = Duration::from_secs(20);
/// The longest [`Broker::read_all`] may take to reach the end of every partition.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// Skipping

/// What a test does when it cannot have a broker: fail under `CI=true`, else say so, loudly.
fn skip(test: &str, reason: &str) {
    support::skip(test, &format!("no Kafka broker: {reason}"));
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

/// A broker of the test's own behind `relay` ([`Broker::start_behind`]), or `None` as in
/// [`broker_or_skip`].
pub(crate) fn own_broker_behind_or_skip(test: &str, relay: &relay::Relay) -> Option<Broker> {
    Broker::start_behind(relay)
        .map_err(|reason| skip(test, &reason))
        .ok()
}

/// The cluster of three Apache Kafka nodes the tests that kill and pause nodes share, one test
/// at a time (three JVMs start in 10 to 40 s: once per test process, not once per test); or
/// `None` as in [`broker_or_skip`]. The test has it for as long as it holds the turn; it is
/// handed over with every node running and none paused, whatever the test before did or
/// however it ended.
pub(crate) fn shared_cluster_or_skip(test: &str) -> Option<ClusterTurn> {
    static CLUSTER: OnceLock<Result<Broker, String>> = OnceLock::new();
    static TURN: Mutex<()> = Mutex::new(());
    let cluster = CLUSTER
        .get_or_init(|| Broker::cluster(3))
        .as_ref()
        .map_err(|reason| skip(test, reason))
        .ok()?;
    // A test that failed in its turn poisons the lock; the cluster itself is healed below.
    let turn = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    cluster.heal();
    Some(ClusterTurn {
        cluster,
        _turn: turn,
    })
}

/// A test's turn on the shared cluster ([`shared_cluster_or_skip`]): the cluster, for as long
/// as the turn is held.
pub(crate) struct ClusterTurn {
    cluster: &'static Broker,
    _turn: MutexGuard<'static, ()>,
}

impl std::ops::Deref for ClusterTurn {
    type Target = Broker;

    fn deref(&self) -> &Broker {
        self.cluster
    }
}

// ---------------------------------------------------------------------------------------------
// The broker

/// Apache Kafka, installed once per test process by its script (a no-op when the pinned
/// version is there); or why it could not be.
fn installed() -> Result<&'static Installed, String> {
    static INSTALLED: OnceLock<Result<Installed, String>> = OnceLock::new();
    INSTALLED
        .get_or_init(|| {
            let started = Instant::now();
            let installed =
                weir_test_servers::kafka::install_kind(&workspace_root(), Kind::Apache)?;
            if started.elapsed() > Duration::from_secs(2) {
                let _ = writeln!(
                    std::io::stderr(),
                    "weir: installed the Kafka test broker ({}) in {:.1?}",
                    installed.kind.name(),
                    started.elapsed()
                );
            }
            Ok(installed)
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A running broker on loopback ports, with its data in a temp folder. Dropping it
/// stops the broker (and waits for it), then removes the folder.
pub(crate) struct Broker {
    /// The broker process or processes (dropped first: they stop before their folder goes).
    process: Nodes,
    /// Holds each node's `data/`, `broker.log` and config.
    _dir: tempfile::TempDir,
}

/// One broker, or a cluster of Apache Kafka nodes. A cluster's nodes are killed, paused and
/// started again through a lock, so that a test may do it from a thread of its own while
/// others produce and read.
enum Nodes {
    One(BrokerProcess),
    Cluster {
        /// The nodes.
        nodes: Mutex<ClusterProcess>,
        /// Their addresses, which never change (a node starts again on its ports): read
        /// without the lock, which a node's start holds for seconds.
        bootstrap: String,
        /// How many there are.
        size: usize,
    },
}

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

    /// A broker of its own on free ports (installing it first if needed), answering metadata
    /// requests; or why it could not be started.
    pub(crate) fn start() -> Result<Broker, String> {
        let installed = installed()?;
        let dir = temp_dir()?;
        let process = Nodes::One(BrokerProcess::start(installed, dir.path())?);
        Ok(Broker { process, _dir: dir })
    }

    /// A broker of its own, as [`Broker::start`], whose metadata names `relay` as its address:
    /// its clients' connections after their first go through the relay, which then relays to
    /// it. Apache Kafka only.
    pub(crate) fn start_behind(relay: &relay::Relay) -> Result<Broker, String> {
        let installed = installed()?;
        let dir = temp_dir()?;
        let forward = |port| relay.forward_to(port);
        let process =
            BrokerProcess::start_advertising(installed, dir.path(), relay.port(), &forward)?;
        let process = Nodes::One(process);
        Ok(Broker { process, _dir: dir })
    }

    /// A cluster of `size` Apache Kafka nodes of its own, every node answering and named in
    /// the metadata; or why it could not be started. Topics are replicated to every node (at
    /// most 3) and need one fewer in sync (`min.insync.replicas`).
    pub(crate) fn cluster(size: u32) -> Result<Broker, String> {
        let installed = installed()?;
        let dir = temp_dir()?;
        let nodes = ClusterProcess::start(installed, dir.path(), size)?;
        let process = Nodes::Cluster {
            bootstrap: nodes.bootstrap(),
            size: nodes.size(),
            nodes: Mutex::new(nodes),
        };
        Ok(Broker { process, _dir: dir })
    }

    /// `"127.0.0.1:PORT"` (a cluster: every node's, comma-separated), for
    /// `bootstrap.servers`.
    pub(crate) fn bootstrap(&self) -> String {
        match &self.process {
            Nodes::One(one) => one.bootstrap(),
            Nodes::Cluster { bootstrap, .. } => bootstrap.clone(),
        }
    }

    /// The single broker; panics on a cluster (its nodes are addressed one by one:
    /// [`Broker::kill_node`], [`Broker::restart_node`]).
    fn one(&self) -> &BrokerProcess {
        match &self.process {
            Nodes::One(one) => one,
            Nodes::Cluster { .. } => {
                panic!("a cluster's nodes are stopped and started one by one")
            }
        }
    }

    /// [`Broker::one`], mutable.
    fn one_mut(&mut self) -> &mut BrokerProcess {
        match &mut self.process {
            Nodes::One(one) => one,
            Nodes::Cluster { .. } => {
                panic!("a cluster's nodes are stopped and started one by one")
            }
        }
    }

    /// The cluster's nodes, locked; panics on a single broker.
    fn nodes_locked(&self) -> MutexGuard<'_, ClusterProcess> {
        match &self.process {
            Nodes::Cluster { nodes, .. } => nodes.lock().unwrap_or_else(PoisonError::into_inner),
            Nodes::One(_) => panic!("a single broker has no nodes to address"),
        }
    }

    /// The number of nodes: 1, or a cluster's size.
    pub(crate) fn nodes(&self) -> usize {
        match &self.process {
            Nodes::One(_) => 1,
            Nodes::Cluster { size, .. } => *size,
        }
    }

    /// The broker's port.
    pub(crate) fn port(&self) -> u16 {
        self.one().port()
    }

    /// Whether the broker is running (not [`Broker::stop`]ped or [`Broker::kill`]ed).
    pub(crate) fn is_running(&self) -> bool {
        self.one().is_running()
    }

    /// Stops the broker as an operator would (SIGTERM; it shuts down in order) and waits for
    /// it to exit (killing it after 20 s). The port stays this broker's for [`Broker::restart`]. Does nothing when it is not
    /// running.
    pub(crate) fn stop(&mut self) {
        self.one_mut().stop();
    }

    /// Kills the broker (SIGKILL, a crash) and waits for it. Kafka keeps what it wrote to its
    /// log files (the page cache outlives the process).
    pub(crate) fn kill(&mut self) {
        self.one_mut().kill();
    }

    /// Starts the broker again on the same port and data directory (stopping it first if it
    /// runs), and waits until it answers; panics if it does not. After [`Broker::stop`] it has
    /// the topics, records and committed offsets it had.
    pub(crate) fn restart(&mut self) {
        if let Err(e) = self.one_mut().restart() {
            panic!("{e}");
        }
    }

    /// Kills node `i` (0-based) of a cluster (SIGKILL) and waits for it.
    pub(crate) fn kill_node(&self, i: usize) {
        self.nodes_locked().kill(i);
    }

    /// Starts node `i` of a cluster again on its ports and data, and waits until it answers;
    /// panics if it does not.
    pub(crate) fn restart_node(&self, i: usize) {
        if let Err(e) = self.nodes_locked().restart(i) {
            panic!("{e}");
        }
    }

    /// Every node of a cluster running and none paused: resumes the paused ones and starts the
    /// stopped ones again (panicking if one does not answer).
    pub(crate) fn heal(&self) {
        for i in 0..self.nodes() {
            self.resume_node(i);
            if !self.nodes_locked().is_running(i) {
                self.restart_node(i);
            }
        }
    }

    /// Pauses node `i` of a cluster (SIGSTOP); panics if it cannot.
    pub(crate) fn pause_node(&self, i: usize) {
        if let Err(e) = self.nodes_locked().pause(i) {
            panic!("{e}");
        }
    }

    /// Resumes node `i` of a cluster paused by [`Broker::pause_node`] (SIGCONT).
    pub(crate) fn resume_node(&self, i: usize) {
        if let Err(e) = self.nodes_locked().resume(i) {
            panic!("{e}");
        }
    }

    /// The index of the cluster node that leads `partition` of `topic` now, or `None` when no
    /// node does (an election under way) or the metadata cannot be had. Internal topics count:
    /// the leader of `__transaction_state`'s partition is the transaction coordinator.
    pub(crate) fn leader_node(&self, topic: &str, partition: i32) -> Option<usize> {
        let consumer: BaseConsumer = self.config().create().ok()?;
        let metadata = consumer.fetch_metadata(Some(topic), CLIENT_TIMEOUT).ok()?;
        let leader = metadata
            .topics()
            .first()?
            .partitions()
            .iter()
            .find(|p| p.id() == partition)?
            .leader();
        self.nodes_locked().index_of(leader)
    }

    /// Whether the broker answers a metadata request within `timeout`, or what went wrong.
    pub(crate) fn metadata(&self, timeout: Duration) -> Result<(), String> {
        self.one().metadata(timeout)
    }
}

/// A temp folder for a broker's or a cluster's files.
fn temp_dir() -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix("weir-kafka-")
        .tempdir()
        .map_err(|e| format!("cannot make a temp dir for the broker: {e}"))
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

/// Milliseconds since the epoch, now. A record a test writes to a topic with a timestamp of its
/// own needs a real time like this one: the broker's time-based retention (`retention.ms`, a
/// week by default) deletes records dated 1970 at its next pass, which may come between the
/// write and the read.
pub(crate) fn now_ms() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(since.as_millis()).unwrap()
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

    /// Creates `name` with `partitions` partitions (replicated to every node, at most 3),
    /// waiting for the result; panics if it fails (an existing topic too).
    pub(crate) fn create_topic(&self, name: &str, partitions: i32) {
        self.create_topic_with(name, partitions, &[]);
    }

    /// An admin client of the broker.
    fn admin(&self) -> AdminClient<DefaultClientContext> {
        self.config()
            .create()
            .unwrap_or_else(|e| panic!("cannot create a Kafka admin client: {e}"))
    }

    /// [`Broker::create_topic`] with topic configs, e.g. `[("cleanup.policy", "compact")]`.
    pub(crate) fn create_topic_with(&self, name: &str, partitions: i32, configs: &[(&str, &str)]) {
        let admin = self.admin();
        let replicas = i32::try_from(self.nodes().min(3)).expect("at most 3");
        let mut topic = NewTopic::new(name, partitions, TopicReplication::Fixed(replicas));
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

    /// Deletes `topic`, waiting for the result; panics if it fails.
    pub(crate) fn delete_topic(&self, topic: &str) {
        let admin = self.admin();
        let options = AdminOptions::new()
            .operation_timeout(Some(CLIENT_TIMEOUT))
            .request_timeout(Some(CLIENT_TIMEOUT));
        let results = block_on(admin.delete_topics(&[topic], &options))
            .unwrap_or_else(|e| panic!("DeleteTopics {topic} on {}: {e}", self.bootstrap()));
        for result in results {
            if let Err((topic, code)) = result {
                panic!("cannot delete the topic {topic}: {code}");
            }
        }
    }

    /// Sets the topic config `name` of `topic` to `value` (AlterConfigs: the topic's other
    /// configs go back to the broker's defaults).
    pub(crate) fn set_topic_config(&self, topic: &str, name: &str, value: &str) {
        let admin = self.admin();
        let options = AdminOptions::new().request_timeout(Some(CLIENT_TIMEOUT));
        let change = AlterConfig::new(ResourceSpecifier::Topic(topic)).set(name, value);
        let results = block_on(admin.alter_configs([&change], &options))
            .unwrap_or_else(|e| panic!("AlterConfigs {topic} on {}: {e}", self.bootstrap()));
        for result in results {
            if let Err((_, code)) = result {
                panic!("cannot set {name} = {value} on {topic}: {code}");
            }
        }
    }

    /// The value of the topic config `name` of `topic` (`None` when the broker reports none).
    pub(crate) fn topic_config(&self, topic: &str, name: &str) -> Option<String> {
        let admin = self.admin();
        let options = AdminOptions::new().request_timeout(Some(CLIENT_TIMEOUT));
        let results =
            block_on(admin.describe_configs([&ResourceSpecifier::Topic(topic)], &options))
                .unwrap_or_else(|e| panic!("DescribeConfigs {topic} on {}: {e}", self.bootstrap()));
        let resource = results
            .into_iter()
            .next()
            .expect("one result per resource")
            .unwrap_or_else(|e| panic!("the configs of {topic}: {e}"));
        resource.get(name).and_then(|entry| entry.value.clone())
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

    /// The topics whose names start with `prefix`, sorted.
    pub(crate) fn topics(&self, prefix: &str) -> Vec<String> {
        let consumer = self.consumer("weir-tests-metadata", Isolation::ReadUncommitted);
        let metadata = consumer
            .fetch_metadata(None, CLIENT_TIMEOUT)
            .unwrap_or_else(|e| panic!("metadata of the cluster: {e}"));
        let mut names: Vec<String> = metadata
            .topics()
            .iter()
            .map(|t| t.name().to_owned())
            .filter(|name| name.starts_with(prefix))
            .collect();
        names.sort();
        names
    }

    /// Where each partition of `topics` ends: `(topic, partition, last stable offset, high
    /// watermark)`, by topic, then partition. The two offsets differ while a transaction is
    /// open in the partition, and read_committed readers wait at the first. Panics on a topic
    /// the broker does not know.
    pub(crate) fn ends(&self, topics: &[String]) -> Vec<(String, i32, i64, i64)> {
        let committed = self.consumer("weir-tests-metadata", Isolation::ReadCommitted);
        let uncommitted = self.consumer("weir-tests-metadata", Isolation::ReadUncommitted);
        let metadata = uncommitted
            .fetch_metadata(None, CLIENT_TIMEOUT)
            .unwrap_or_else(|e| panic!("metadata of the cluster: {e}"));
        let mut ends = Vec::new();
        for topic in topics {
            let partitions = metadata
                .topics()
                .iter()
                .find(|t| t.name() == topic)
                .unwrap_or_else(|| panic!("the broker did not describe the topic {topic}"))
                .partitions()
                .len();
            for partition in 0..i32::try_from(partitions).expect("a partition count fits i32") {
                let end = |consumer: &BaseConsumer| {
                    consumer
                        .fetch_watermarks(topic, partition, CLIENT_TIMEOUT)
                        .unwrap_or_else(|e| panic!("watermarks of {topic} [{partition}]: {e}"))
                        .1
                };
                ends.push((topic.clone(), partition, end(&committed), end(&uncommitted)));
            }
        }
        ends
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
