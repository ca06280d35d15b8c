//! The Kafka sink, in three deliveries.
//!
//! - **exactly-once**: the records between two barriers are kept, as the batches that brought
//!   them, and at the barrier they become the checkpoint's *pending output*, part of the
//!   sink's snapshot. When the checkpoint completes, the pending output of every checkpoint up
//!   to it is sent in one transaction together with a [`Marker`] (this subtask, this run, that
//!   checkpoint), and committed: no transaction is open between checkpoints, so none spans a
//!   checkpoint interval, a restart or a crash. (Sending records into an open transaction as
//!   they arrive, as Flink does, was measured: neither lower latency nor more throughput, and
//!   an open transaction holds back other producers' records from read_committed readers —
//!   docs/CHECKPOINTS.md §12.) A restore first
//!   fences every transactional id the job could have left a transaction open under (its own
//!   by initialising it; subtask 0 those of larger parallelisms, which it records at every
//!   start), reads the markers, and sends again exactly the restored pending output whose
//!   marker is not committed. Why that is exactly-once, and why nothing needs a transaction
//!   resumed after a crash (which librdkafka cannot do): see docs/CHECKPOINTS.md, "The Kafka
//!   sink".
//!
//!   **At another parallelism** each old subtask's state goes to one new subtask, old `i` to
//!   new `i mod p` ([`super::super::inherited`]), which finishes it *under the old subtask's
//!   transactional id*: it initialises `<prefix>-i` (fencing the old holder), and sends what
//!   no committed marker of `<prefix>-i` accounts for in a transaction of that id with a
//!   marker keyed by it. So a marker is only ever written by its own id, as without a rescale,
//!   and the same proof holds (docs/CHECKPOINTS.md, "Rescaling the sink").
//! - **at-least-once**: records are sent as they come (idempotent producer, `acks=all`); the
//!   snapshot waits until the broker has acknowledged every one, so a completed checkpoint
//!   never covers a record the broker lacks.
//! - **none**: records are sent as they come; only the end of the job waits for them.

use std::cell::Cell;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, PurgeConfig};
use weir_abi::Batch;
use weir_abi::key_group::key_group;
use weir_abi::wire::{Reader, Short, put_len, put_prefixed};

use super::error::KafkaFailure;
use super::figures::KafkaSinkMetrics;
use super::marker::{self, Marker};
use super::retention::Retention;
use super::{Detached, REQUEST_TIMEOUT, WeirContext, client_config, task_error};
use crate::connectors::connector::{ConnectorSetupError, RescaleRule, SinkConnector, TaskContext};
use crate::connectors::inherited;
use crate::connectors::inherited::Inherited;
use crate::dataflow::connector_metrics::ConnectorFigures;
use crate::dataflow::error::TaskError;
use crate::dataflow::processor::Processor;
use crate::dataflow::router::Router;
use crate::ids::{Barrier, CheckpointId};
use crate::job::{
    Delivery, KafkaSinkSettings, SinkPartitioning, SinkTimestamp, SinkTopic, Unrouted,
};
use crate::kill_point::{self, KillPoint};
use crate::wasm::wall_clock_millis;

/// The environment variable that, in builds with the `test-hooks` feature, makes a restore
/// ignore the markers and send every restored pending output again: the recovery step
/// disabled, so the crash tests can show they catch the duplicates it prevents. Absent from
/// the release `weir`.
#[cfg(feature = "test-hooks")]
pub(crate) const IGNORE_MARKERS_ENV: &str = "WEIR_TEST_IGNORE_MARKERS";

/// librdkafka's default `message.max.bytes`: the largest request, so the largest record.
const DEFAULT_MESSAGE_MAX_BYTES: usize = 1_000_000;
/// What a record takes in a record batch besides its key and value, at most (batch header,
/// record header, varints): a record is checked against its limit less this.
const RECORD_FRAMING: usize = 100;
/// How long the abort of a transaction a failed commit left open may wait for the broker.
const ABORT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a full local queue is polled before a record is offered again.
const QUEUE_FULL_WAIT: Duration = Duration::from_millis(10);

/// What an exactly-once sink subtask's snapshot holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct SinkState {
    /// The run that buffered the pending output.
    run: u64,
    /// The sink's parallelism in that run.
    parallelism: u32,
    /// The names that run's transactions and markers went under; `None` in a state written
    /// before they were recorded (format `WKS1`), which a restore reads under today's.
    names: Option<TxNames>,
    /// The output of every checkpoint not yet known to be committed, oldest first: the
    /// batches as they arrived.
    pending: Vec<(CheckpointId, Vec<Vec<u8>>)>,
}

/// The names a run of an exactly-once sink committed under: its transactional id prefix and
/// its marker topic. They are part of the snapshot because whether a checkpoint's pending
/// output committed is answered by the markers of the ids it was committed under, and only a
/// producer of those ids can fence a transaction the crash left open: a restore must look
/// where the run that wrote the checkpoint wrote, not where today's job file (a renamed job,
/// whose default prefix is `weir.<job>.<sink>`, or a changed `transactional_id_prefix` or
/// `marker_topic`) would write.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct TxNames {
    /// `transactional_id_prefix`: subtask `i` commits as `<prefix>-<i>`.
    prefix: String,
    /// `marker_topic`.
    marker_topic: String,
}

impl TxNames {
    /// The transactional id of subtask `subtask`, and the key of its markers.
    fn id(&self, subtask: u32) -> String {
        format!("{}-{subtask}", self.prefix)
    }
}

/// The first bytes of an encoded [`SinkState`] without [`TxNames`], as written before they
/// were recorded: still read.
const STATE_MAGIC_V1: &[u8; 4] = b"WKS1";
/// The first bytes of an encoded [`SinkState`].
const STATE_MAGIC: &[u8; 4] = b"WKS2";

impl SinkState {
    #[cfg(test)]
    fn encode(&self) -> Vec<u8> {
        let names = self
            .names
            .as_ref()
            .expect("a state is written with its names");
        encode_state(self.run, self.parallelism, names, &self.pending)
    }

    fn decode(bytes: &[u8]) -> Result<SinkState, String> {
        let short = |e: Short| {
            format!(
                "it ends early ({} bytes wanted at byte {}, {} there)",
                e.needed,
                e.offset,
                bytes.len().saturating_sub(e.offset)
            )
        };
        let text = |reader: &mut Reader<'_>, what: &str| {
            let bytes = reader.prefixed().map_err(short)?;
            String::from_utf8(bytes.to_vec()).map_err(|_| format!("{what} is not UTF-8"))
        };
        let mut reader = Reader::new(bytes);
        let magic = reader.take(4).map_err(short)?;
        let with_names = if magic == STATE_MAGIC {
            true
        } else if magic == STATE_MAGIC_V1 {
            false
        } else {
            return Err("it does not start with the Kafka sink's format mark".into());
        };
        let run = reader.u64().map_err(short)?;
        let parallelism = reader.u32().map_err(short)?;
        let names = if with_names {
            Some(TxNames {
                prefix: text(&mut reader, "the transactional id prefix")?,
                marker_topic: text(&mut reader, "the marker topic")?,
            })
        } else {
            None
        };
        let count = reader.u32().map_err(short)?;
        let mut pending = Vec::new();
        for _ in 0..count {
            let id = CheckpointId(reader.u64().map_err(short)?);
            let batches = reader.u32().map_err(short)?;
            let mut list = Vec::new();
            for _ in 0..batches {
                let batch = reader.prefixed().map_err(short)?;
                Batch::decode(batch).map_err(|e| format!("a pending batch is malformed: {e}"))?;
                list.push(batch.to_vec());
            }
            pending.push((id, list));
        }
        if reader.remaining() > 0 {
            return Err(format!(
                "{} bytes follow the pending output",
                reader.remaining()
            ));
        }
        Ok(SinkState {
            run,
            parallelism,
            names,
            pending,
        })
    }
}

/// Encodes a [`SinkState`] from its parts, so a snapshot needs no copy of the pending output
/// besides the encoding itself.
fn encode_state(
    run: u64,
    parallelism: u32,
    names: &TxNames,
    pending: &[(CheckpointId, Vec<Vec<u8>>)],
) -> Vec<u8> {
    let size: usize = pending
        .iter()
        .flat_map(|(_, batches)| batches.iter().map(|b| b.len() + 4))
        .sum();
    let names_size = 8 + names.prefix.len() + names.marker_topic.len();
    let mut out = Vec::with_capacity(20 + names_size + size + 12 * pending.len());
    out.extend_from_slice(STATE_MAGIC);
    out.extend_from_slice(&run.to_le_bytes());
    out.extend_from_slice(&parallelism.to_le_bytes());
    for text in [&names.prefix, &names.marker_topic] {
        put_prefixed(&mut out, text.as_bytes());
    }
    put_len(&mut out, pending.len());
    for (id, batches) in pending {
        out.extend_from_slice(&id.0.to_le_bytes());
        put_len(&mut out, batches.len());
        for batch in batches {
            put_prefixed(&mut out, batch);
        }
    }
    out
}

/// A number no other run of any job draws: the run's identity in its markers.
fn new_run_id(subtask: u32) -> u64 {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u32(subtask);
    hasher.write_u32(std::process::id());
    if let Ok(now) = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
}

/// A producer initialised with subtask `subtask`'s transactional id under `names` — this
/// subtask's, or an old one's a rescale or a restore under other names handed it — and whether
/// a transaction of it is begun and not committed.
#[derive(Clone, Copy)]
struct IdProducer<'a> {
    producer: &'a BaseProducer<WeirContext>,
    open: &'a Cell<bool>,
    subtask: u32,
    /// The prefix of its id, and the marker topic its markers go to.
    names: &'a TxNames,
}

/// The `kafka` sink, with its settings.
pub(crate) struct Connector<'a>(pub(crate) &'a KafkaSinkSettings);

impl SinkConnector for Connector<'_> {
    /// An exactly-once sink installs its transactions' figures in its task's metrics; the
    /// others have no transactions to show.
    fn build(&self, task: TaskContext<'_>) -> Result<Box<dyn Processor>, TaskError> {
        let sink = KafkaSink::new(task.vertex, self.0.clone(), task.subtask, task.parallelism);
        Ok(if self.0.delivery == Delivery::ExactlyOnce {
            let figures = Arc::new(KafkaSinkMetrics::default());
            task.metrics
                .set_connector(Arc::clone(&figures) as Arc<dyn ConnectorFigures>);
            Box::new(sink.reporting_to(figures))
        } else {
            Box::new(sink)
        })
    }

    /// Each old subtask's pending output goes to one new subtask ([`inherited`]).
    fn rescale_rule(&self) -> Option<RescaleRule> {
        Some(inherited::rescale_rule)
    }

    /// Its brokers answer, every topic its records may name exists, and an exactly-once
    /// sink's marker topic exists (created, compacted, when missing; [`super::check_sink`]).
    fn preflight(&self, vertex: &str) -> Result<(), ConnectorSetupError> {
        super::check_sink(&format!("kafka sink \"{vertex}\""), self.0)
            .map_err(ConnectorSetupError::new)
    }
}

/// One subtask of a Kafka sink.
pub(crate) struct KafkaSink {
    connector: String,
    settings: KafkaSinkSettings,
    /// The settings' transactional id prefix and marker topic: the names this run commits
    /// under, recorded in its snapshots (exactly-once).
    names: TxNames,
    subtask: u32,
    parallelism: u32,
    /// How many transactional ids this run may use, `<prefix>-0` up to it (exactly-once): the
    /// parallelism, or the old one of a rescaled state it restores if that is larger. Its
    /// markers record it, so a later start knows which ids to fence.
    ids: u32,
    producer: Option<Detached<BaseProducer<WeirContext>>>,
    /// The largest key and value a record may have together.
    record_limit: usize,
    /// Where `record_limit` comes from, for the message that names it.
    limit_source: String,
    /// The topics that delete records older than their retention, for the warning about a
    /// record written too old to stay (`timestamp = "record"`).
    retention: Retention,
    /// This run's identity (exactly-once).
    run: u64,
    /// Records since the last barrier, as their batches (exactly-once).
    current: Vec<Vec<u8>>,
    /// Output of checkpoints not yet committed, oldest first (exactly-once).
    pending: Vec<(CheckpointId, Vec<Vec<u8>>)>,
    /// Whether a transaction is begun and not committed (exactly-once): only while a commit
    /// runs, so after one that failed.
    in_transaction: Cell<bool>,
    /// Transactions committed and how long they took, for the displays (exactly-once).
    report: Arc<KafkaSinkMetrics>,
}

impl KafkaSink {
    /// Subtask `subtask` of `parallelism` of sink `name`. Nothing connects until the first
    /// call (a restore, or the first batch or barrier).
    pub(crate) fn new(
        name: &str,
        settings: KafkaSinkSettings,
        subtask: u32,
        parallelism: u32,
    ) -> Self {
        let (record_limit, limit_source) = match settings
            .properties
            .iter()
            .find(|(k, _)| k == "message.max.bytes")
            .and_then(|(_, v)| v.parse::<usize>().ok())
        {
            Some(bytes) => (bytes, "the sink's `message.max.bytes` property".to_owned()),
            None => (
                DEFAULT_MESSAGE_MAX_BYTES,
                "librdkafka's default message.max.bytes (raise it in the sink's `properties`, \
                 and the topic's max.message.bytes with it)"
                    .to_owned(),
            ),
        };
        KafkaSink {
            connector: format!("kafka sink \"{name}\""),
            names: TxNames {
                prefix: settings.transactional_id_prefix.clone(),
                marker_topic: settings.marker_topic.clone(),
            },
            settings,
            subtask,
            parallelism,
            ids: parallelism,
            producer: None,
            record_limit,
            limit_source,
            retention: Retention::default(),
            run: new_run_id(subtask),
            current: Vec::new(),
            pending: Vec::new(),
            in_transaction: Cell::new(false),
            report: Arc::default(),
        }
    }

    /// Counts the transactions it commits, and how long each took, in `metrics` (its task's).
    pub(crate) fn reporting_to(mut self, metrics: Arc<KafkaSinkMetrics>) -> Self {
        self.report = metrics;
        self
    }

    /// This subtask's transactional id, and the key of its markers.
    fn transactional_id(&self, subtask: u32) -> String {
        self.names.id(subtask)
    }

    fn error(&self, what: impl Into<String>, error: KafkaError) -> TaskError {
        let fallback = WeirContext::default();
        let context = self.producer.as_ref().map(|p| p.context().as_ref());
        task_error(&self.connector, what, error, context.unwrap_or(&fallback))
    }

    /// Creates the producer on first use. An exactly-once one is initialised with this
    /// subtask's transactional id, which fences an earlier holder of the id and ends that one's
    /// open transaction.
    fn start(&mut self) -> Result<(), TaskError> {
        if self.producer.is_some() {
            return Ok(());
        }
        self.read_topic_configs();
        if self.settings.delivery == Delivery::ExactlyOnce {
            let id = self.transactional_id(self.subtask);
            self.producer = Some(self.transactional_producer(&id, WeirContext::default())?);
            return Ok(());
        }
        let mut config = client_config(&self.settings.bootstrap, &self.settings.properties);
        if self.settings.delivery == Delivery::AtLeastOnce {
            config.set("enable.idempotence", "true");
        }
        let producer: BaseProducer<WeirContext> = config
            .create_with_context(WeirContext::default())
            .map_err(|e| self.error("cannot create the producer", e))?;
        self.producer = Some(Detached::new(producer));
        Ok(())
    }

    /// A producer of transactional id `id`, initialised: every earlier holder of the id is
    /// fenced and its open transaction ended.
    fn transactional_producer(
        &self,
        id: &str,
        context: WeirContext,
    ) -> Result<Detached<BaseProducer<WeirContext>>, TaskError> {
        let mut config = client_config(&self.settings.bootstrap, &self.settings.properties);
        config.set("transactional.id", id);
        let producer: BaseProducer<WeirContext> = config
            .create_with_context(context)
            .map_err(|e| self.error(format!("cannot create a producer for \"{id}\""), e))?;
        let producer = Detached::new(producer);
        producer.init_transactions(REQUEST_TIMEOUT).map_err(|e| {
            let mut what = format!("cannot initialise transactional id \"{id}\"");
            if e.rdkafka_error_code() == Some(RDKafkaErrorCode::InvalidTransactionTimeout) {
                let timeout = self
                    .settings
                    .properties
                    .iter()
                    .find(|(key, _)| key == "transaction.timeout.ms")
                    .map_or("librdkafka's default", |(_, value)| value.as_str());
                what = format!(
                    "{what}: the brokers refuse its transaction.timeout.ms ({timeout}) as \
                     longer than their transaction.max.timeout.ms; lower the sink's \
                     `transaction.timeout.ms` (a transaction only has to outlast the commit \
                     of one checkpoint's output), or raise that setting on the brokers"
                );
            }
            task_error(&self.connector, what, e, producer.context())
        })?;
        Ok(producer)
    }

    /// The key of the record that says which parallelism the sink last started with.
    fn parallelism_key(&self) -> String {
        format!("{}-parallelism", self.settings.transactional_id_prefix)
    }

    /// Subtask 0 of an exactly-once sink, once per start: fences every transactional id this
    /// run does not use (at or above [`KafkaSink::ids`]) that an earlier run may have used —
    /// below the largest number of ids any marker (committed or not) records — then records
    /// this run's number of ids in the marker topic. Subtask 0 does it before it acknowledges
    /// its first barrier, so before any subtask of this run can open a transaction of its own:
    /// a later start learns of every id this run may leave open. (The ids of old subtasks a
    /// rescale hands over are below `ids`: their heirs fence them, and nothing else may, or
    /// it would abort the heir's transaction.) The markers are read uncommitted here, so an
    /// open transaction of an id about to be fenced cannot hold the read up, and a zombie's
    /// own uncommitted marker counts too.
    fn fence_larger_parallelisms(&self) -> Result<(), TaskError> {
        if self.subtask != 0 {
            return Ok(());
        }
        let prefix = format!("{}-", self.settings.transactional_id_prefix);
        let markers =
            marker::read_markers(&self.settings, &self.settings.marker_topic, &prefix, false)
                .map_err(|e| {
                    self.error(
                        format!(
                            "cannot read the markers in \"{}\"",
                            self.settings.marker_topic
                        ),
                        e,
                    )
                })?;
        let until = markers.values().map(|m| m.parallelism).max().unwrap_or(0);
        for other in self.ids..until {
            self.transactional_producer(&self.transactional_id(other), WeirContext::helper())?;
            tracing::info!(
                "{}: fenced transactional id \"{}\"",
                self.connector,
                self.transactional_id(other)
            );
        }
        let record = Marker {
            run: self.run,
            checkpoint: 0,
            parallelism: self.ids,
            records: 0,
        };
        let producer = self.producer.as_ref().expect("started before fencing");
        producer
            .begin_transaction()
            .map_err(|e| self.error("cannot begin a transaction", e))?;
        self.send(
            producer,
            &self.settings.marker_topic,
            self.parallelism_key().as_bytes(),
            &record.to_bytes(),
            0,
            None,
        )?;
        producer
            .commit_transaction(REQUEST_TIMEOUT)
            .map_err(|e| self.error("cannot record the sink's parallelism", e))
    }

    /// Reads the configs of the topics the sink may write to, once, for two things. The
    /// record limit is lowered to their smallest `max.message.bytes` when the broker says it is
    /// smaller: a record does not know its topic before it is sent (exactly-once checks sizes
    /// as records arrive). And their time-based retention is kept for the warning about
    /// records too old to stay ([`Retention`]). A broker that does not say leaves both as
    /// they were.
    fn read_topic_configs(&mut self) {
        let Some(configs) = super::topic_configs(
            &self.settings.bootstrap,
            &self.settings.properties,
            self.settings.topic.topics(),
        ) else {
            return;
        };
        let smallest = configs
            .iter()
            .filter_map(|(topic, values)| {
                let limit = values.get("max.message.bytes")?.parse::<usize>().ok()?;
                Some((limit, topic))
            })
            .min();
        if let Some((limit, topic)) = smallest
            && limit < self.record_limit
        {
            self.record_limit = limit;
            self.limit_source = format!("topic \"{topic}\"'s max.message.bytes on the broker");
        }
        self.retention = Retention::from_configs(configs);
    }

    /// Refuses a record that cannot fit in a request to the broker.
    fn check_size(&self, key: &[u8], value: &[u8]) -> Result<(), TaskError> {
        let size = key.len() + value.len();
        if size + RECORD_FRAMING > self.record_limit {
            return Err(KafkaFailure::RecordTooLarge {
                connector: self.connector.clone(),
                size,
                limit: self.record_limit,
                limit_source: self.limit_source.clone(),
            }
            .into());
        }
        Ok(())
    }

    /// Hands one record to `producer`, to `partition` or where librdkafka's partitioner puts
    /// it, waiting while its local queue is full.
    fn send(
        &self,
        producer: &BaseProducer<WeirContext>,
        topic: &str,
        key: &[u8],
        value: &[u8],
        timestamp: i64,
        partition: Option<i32>,
    ) -> Result<(), TaskError> {
        self.check_size(key, value)?;
        let mut record = BaseRecord::<[u8], [u8]>::to(topic).payload(value);
        if let Some(partition) = partition {
            record = record.partition(partition);
        }
        if !key.is_empty() {
            record = record.key(key);
        }
        if timestamp > 0 {
            record = record.timestamp(timestamp);
        }
        loop {
            match producer.send(record) {
                Ok(()) => return Ok(()),
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(QUEUE_FULL_WAIT);
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge), _)) => {
                    return Err(KafkaFailure::RecordTooLarge {
                        connector: self.connector.clone(),
                        size: key.len() + value.len(),
                        limit: self.record_limit,
                        limit_source: self.limit_source.clone(),
                    }
                    .into());
                }
                Err((error, _)) => {
                    return Err(task_error(
                        &self.connector,
                        format!("cannot send a record to \"{topic}\""),
                        error,
                        producer.context(),
                    ));
                }
            }
        }
    }

    /// Sends every record of an encoded batch to `producer`, each to its topic (the sink's, or
    /// the one its key names) with its timestamp or none (`timestamp = "now"`).
    fn send_batch(
        &self,
        producer: &BaseProducer<WeirContext>,
        bytes: &[u8],
    ) -> Result<u64, TaskError> {
        let batch =
            Batch::decode(bytes).map_err(|problem| TaskError::Malformed { input: 0, problem })?;
        let keep_timestamps = self.settings.timestamp == SinkTimestamp::Record;
        let now = wall_clock_millis();
        // Until the warning is given, a record older than this may be too old for its topic.
        let stale_before = keep_timestamps
            .then(|| self.retention.stale_before(now))
            .flatten();
        for record in batch.iter() {
            let (topic, key) = self
                .settings
                .topic
                .route(record.key)
                .map_err(|why| self.unrouted(record.key, why))?;
            // 0 sends no timestamp: the producer stamps the time of sending.
            let timestamp = if keep_timestamps { record.timestamp } else { 0 };
            if let Some(before) = stale_before
                && timestamp > 0
                && timestamp < before
                && let Some(warning) = self.retention.check(&self.connector, topic, timestamp, now)
            {
                tracing::warn!("{warning}");
            }
            let partition = match self.settings.partitioning {
                SinkPartitioning::ByKafka => None,
                // The partition a key-hash edge's receiver reads this key's group from.
                SinkPartitioning::KeyGroups(groups) => Some(key_group(record.key, groups) as i32),
            };
            self.send(producer, topic, key, record.value, timestamp, partition)?;
        }
        Ok(batch.len() as u64)
    }

    /// Fails on a record of `batch` that sending would fail on (its key names no topic of the
    /// sink, or it is too large), for a batch kept to be sent when its checkpoint completes:
    /// once a checkpoint holds it, every restore would meet it again, whatever the operator
    /// emits by then.
    fn check_sendable(&self, batch: &[u8]) -> Result<(), TaskError> {
        // No record can be larger than its batch: only a batch that does not fit the limit as
        // a whole, or whose records pick their topics, is walked record by record.
        let routed = matches!(self.settings.topic, SinkTopic::FromKey { .. });
        if !routed && batch.len() + RECORD_FRAMING <= self.record_limit {
            return Ok(());
        }
        let decoded =
            Batch::decode(batch).map_err(|problem| TaskError::Malformed { input: 0, problem })?;
        for record in decoded.iter() {
            let (_, key) = self
                .settings
                .topic
                .route(record.key)
                .map_err(|why| self.unrouted(record.key, why))?;
            self.check_size(key, record.value)?;
        }
        Ok(())
    }

    /// The failure of a record whose key names no topic of the sink (`topic = { from_key … }`).
    fn unrouted(&self, key: &[u8], why: Unrouted) -> TaskError {
        const SHOWN: usize = 100;
        // A fixed topic takes every record: only a topic from the key gets here.
        let (separator, topics) = match &self.settings.topic {
            SinkTopic::FromKey { separator, topics } => (separator.as_str(), topics.as_slice()),
            SinkTopic::Fixed(topic) => ("", std::slice::from_ref(topic)),
        };
        // Lossy UTF-8 of at most 4 bytes per character shown: enough for SHOWN of them.
        let text = String::from_utf8_lossy(&key[..key.len().min(4 * SHOWN)]);
        let shown: String = text.chars().take(SHOWN).collect();
        let truncated = key.len() > 4 * SHOWN || text.chars().nth(SHOWN).is_some();
        let key_text = if truncated {
            format!(
                "{shown:?} (its first {SHOWN} characters, of {} bytes)",
                key.len()
            )
        } else {
            format!("{shown:?}")
        };
        let problem = match why {
            Unrouted::NoSeparator => format!("has no {separator:?}"),
            Unrouted::UnknownTopic(named) => {
                let named = String::from_utf8_lossy(&key[..named.min(key.len())]);
                let named: String = named.chars().take(SHOWN).collect();
                format!("names topic {named:?}, which is not in `topics`")
            }
        };
        KafkaFailure::RecordTopic {
            connector: self.connector.clone(),
            key: key_text,
            problem,
            separator: separator.to_owned(),
            topics: topics
                .iter()
                .map(|t| format!("{t:?}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
        .into()
    }

    /// Fails with the first record the broker refused since the last check.
    fn check_deliveries(&self) -> Result<(), TaskError> {
        let producer = self.producer.as_ref().expect("started");
        match producer.context().take_failed_delivery() {
            None => Ok(()),
            Some(error) => Err(self.error("the broker did not take a record", error)),
        }
    }

    /// Waits until the broker acknowledged every record sent.
    fn flush(&self) -> Result<(), TaskError> {
        let Some(producer) = &self.producer else {
            return Ok(());
        };
        producer
            .flush(REQUEST_TIMEOUT)
            .map_err(|e| self.error("cannot flush the records sent", e))?;
        self.check_deliveries()
    }

    /// Sends `batches` (the output of checkpoints up to `checkpoint`, buffered by run `run` of
    /// the subtask whose id `to` holds) and the marker that says so in one transaction of that
    /// id, and commits it. The commit counts as taking from `since` (when the sink learnt it
    /// may commit) to its end.
    fn commit(
        &self,
        to: IdProducer<'_>,
        run: u64,
        checkpoint: CheckpointId,
        batches: &[&Vec<u8>],
        since: Instant,
    ) -> Result<(), TaskError> {
        let IdProducer {
            producer,
            open,
            subtask,
            names,
        } = to;
        let failed = |what: String, e| task_error(&self.connector, what, e, producer.context());
        producer
            .begin_transaction()
            .map_err(|e| failed("cannot begin a transaction".into(), e))?;
        open.set(true);
        let mut records = 0;
        for batch in batches {
            records += self.send_batch(producer, batch)?;
        }
        let marker = Marker {
            run,
            checkpoint: checkpoint.0,
            parallelism: self.ids,
            records,
        };
        let id = names.id(subtask);
        self.send(
            producer,
            &names.marker_topic,
            id.as_bytes(),
            &marker.to_bytes(),
            0,
            None,
        )?;
        kill_point::reached(KillPoint::SinkCommit);
        producer.commit_transaction(REQUEST_TIMEOUT).map_err(|e| {
            failed(
                format!(
                    "cannot commit the transaction of checkpoint {}",
                    checkpoint.0
                ),
                e,
            )
        })?;
        open.set(false);
        kill_point::reached(KillPoint::SinkCommitted);
        self.report.committed(records, since.elapsed());
        tracing::debug!(
            "{}: committed {records} records of checkpoint {} (run {run:x})",
            self.connector,
            checkpoint.0
        );
        Ok(())
    }

    /// After a restore of the old subtasks' `states` (its own, or those a rescale from
    /// `old_parallelism` subtasks hands it): fences, reads the markers, and sends again the
    /// pending output no committed marker accounts for, each old subtask's under its own
    /// transactional id — under the names its state records, which are this run's unless the
    /// job was renamed, or its `transactional_id_prefix` or `marker_topic` changed, since.
    fn recover(
        &mut self,
        states: Vec<(u32, SinkState)>,
        old_parallelism: u32,
    ) -> Result<(), TaskError> {
        self.ids = self.parallelism.max(old_parallelism);
        // Every id whose markers are read is fenced first, so no transaction of it can commit
        // after the read: this subtask's by starting, any other by a producer of its own.
        self.start()?;
        let mut own = None;
        let mut others = Vec::new();
        for (subtask, state) in states {
            // A state from before the names were recorded was written under today's.
            let names = state.names.clone().unwrap_or_else(|| self.names.clone());
            if names != self.names {
                tracing::info!(
                    "{}: the checkpoint's output of subtask {subtask} was written as \
                     transactional id \"{}\" with markers in \"{}\", not as this run's \
                     \"{}\" in \"{}\": finishing it under those, then going on under this \
                     run's",
                    self.connector,
                    names.id(subtask),
                    names.marker_topic,
                    self.transactional_id(subtask),
                    self.names.marker_topic
                );
            }
            if subtask == self.subtask && names.prefix == self.names.prefix {
                own = Some((state, names));
            } else {
                let producer =
                    self.transactional_producer(&names.id(subtask), WeirContext::helper())?;
                others.push((subtask, state, names, producer));
            }
        }
        self.fence_larger_parallelisms()?;
        // The markers of every (marker topic, prefix) the states were written under, read once.
        let mut markers: HashMap<TxNames, HashMap<String, Marker>> = HashMap::new();
        let names_used = own
            .iter()
            .map(|(_, names)| names)
            .chain(others.iter().map(|(_, _, names, _)| names));
        for names in names_used {
            if markers.contains_key(names) {
                continue;
            }
            let prefix = format!("{}-", names.prefix);
            let read = marker::read_markers(&self.settings, &names.marker_topic, &prefix, true)
                .map_err(|e| {
                    self.error(
                        format!(
                            "cannot read the markers in \"{}\" to learn what committed",
                            names.marker_topic
                        ),
                        e,
                    )
                })?;
            markers.insert(names.clone(), read);
        }
        if let Some((state, names)) = own {
            let producer = self.producer.as_ref().expect("started");
            let own = IdProducer {
                producer,
                open: &self.in_transaction,
                subtask: self.subtask,
                names: &names,
            };
            self.send_unaccounted(own, &state, &markers[&names])?;
        }
        for (subtask, state, names, producer) in others {
            let open = Cell::new(false);
            let to = IdProducer {
                producer: &producer,
                open: &open,
                subtask,
                names: &names,
            };
            let sent = self.send_unaccounted(to, &state, &markers[&names]);
            if open.get() {
                abort_in_background(self.connector.clone(), producer);
            }
            sent?;
        }
        Ok(())
    }

    /// Sends again, in one transaction of the id `to` holds, the pending output of that
    /// subtask's `state` that the id's newest committed marker (of `markers`, those of its
    /// marker topic) does not account for.
    fn send_unaccounted(
        &self,
        to: IdProducer<'_>,
        state: &SinkState,
        markers: &HashMap<String, Marker>,
    ) -> Result<(), TaskError> {
        let subtask = to.subtask;
        let id = to.names.id(subtask);
        let newest = markers.get(&id);
        // A marker proves the output of its own run up to its checkpoint committed; nothing
        // else proves anything, so everything else is sent again.
        let committed_through = newest.filter(|m| m.run == state.run).map(|m| m.checkpoint);
        tracing::debug!(
            "{}: restored the pending output of checkpoints {:?} of run {:x}; the newest \
             committed marker of \"{id}\" is {newest:?}",
            self.connector,
            state.pending.iter().map(|(id, _)| id.0).collect::<Vec<_>>(),
            state.run,
        );
        #[cfg(feature = "test-hooks")]
        let committed_through =
            committed_through.filter(|_| std::env::var_os(IGNORE_MARKERS_ENV).is_none());
        let unsent: Vec<&(CheckpointId, Vec<Vec<u8>>)> = state
            .pending
            .iter()
            .filter(|(id, _)| committed_through.is_none_or(|through| id.0 > through))
            .collect();
        let Some(last) = unsent.last().map(|(id, _)| *id) else {
            return Ok(());
        };
        let handed = if subtask == self.subtask {
            String::new()
        } else {
            format!(" (old subtask {subtask}'s, which a rescale handed to this one)")
        };
        tracing::info!(
            "{}: sending the output of checkpoint {} again as transactional id \"{id}\"\
             {handed}: its transaction did not commit before the restore",
            self.connector,
            last.0,
        );
        self.report.resent();
        let batches: Vec<&Vec<u8>> = unsent.iter().flat_map(|(_, b)| b.iter()).collect();
        self.commit(to, state.run, last, &batches, Instant::now())
    }

    /// An old subtask's state as the restore handed it; empty if it had none (nothing
    /// pending).
    fn decode_state(&self, bytes: &[u8]) -> Result<SinkState, TaskError> {
        if bytes.is_empty() {
            return Ok(SinkState::default());
        }
        SinkState::decode(bytes).map_err(|problem| {
            TaskError::Restore(format!(
                "{}: the checkpointed state is not an exactly-once Kafka sink's: {problem}",
                self.connector
            ))
        })
    }

    /// A start without a restore: the producer, and (subtask 0) the fencing of larger
    /// parallelisms.
    fn start_fresh(&mut self) -> Result<(), TaskError> {
        if self.producer.is_some() {
            return Ok(());
        }
        self.start()?;
        if self.settings.delivery == Delivery::ExactlyOnce {
            self.fence_larger_parallelisms()?;
        }
        Ok(())
    }
}

impl Processor for KafkaSink {
    fn process(&mut self, batch: &[u8], _out: &mut Router) -> Result<(), TaskError> {
        self.start_fresh()?;
        match self.settings.delivery {
            Delivery::ExactlyOnce => {
                self.check_sendable(batch)?;
                self.current.push(batch.to_vec());
            }
            Delivery::AtLeastOnce | Delivery::None => {
                let producer = self.producer.as_ref().expect("started");
                self.send_batch(producer, batch)?;
                producer.poll(Duration::ZERO);
                self.check_deliveries()?;
            }
        }
        Ok(())
    }

    fn finish(&mut self, _out: &mut Router) -> Result<(), TaskError> {
        // An exactly-once sink's last records wait for the final checkpoint.
        match self.settings.delivery {
            Delivery::ExactlyOnce => Ok(()),
            Delivery::AtLeastOnce | Delivery::None => self.flush(),
        }
    }

    fn snapshot(&mut self, barrier: Barrier) -> Result<Vec<u8>, TaskError> {
        match self.settings.delivery {
            Delivery::ExactlyOnce => {
                // Subtask 0 fences before its first acknowledgement (see
                // `fence_larger_parallelisms`), even if no record reached it yet.
                self.start_fresh()?;
                let batches = std::mem::take(&mut self.current);
                if !batches.is_empty() {
                    self.pending.push((barrier.id, batches));
                }
                Ok(encode_state(
                    self.run,
                    self.parallelism,
                    &self.names,
                    &self.pending,
                ))
            }
            Delivery::AtLeastOnce => {
                self.flush()?;
                Ok(Vec::new())
            }
            Delivery::None => Ok(Vec::new()),
        }
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), TaskError> {
        if self.settings.delivery != Delivery::ExactlyOnce {
            return Ok(());
        }
        let (states, old_parallelism) = match Inherited::decode(state, &self.connector)? {
            Some(inherited) => (inherited.states, inherited.parallelism),
            // A state of a sink that was not exactly-once then: nothing is pending.
            None if state.is_empty() => return self.start_fresh(),
            None => (vec![(self.subtask, state.to_vec())], self.parallelism),
        };
        let states = states
            .into_iter()
            .map(|(subtask, bytes)| Ok((subtask, self.decode_state(&bytes)?)))
            .collect::<Result<Vec<_>, TaskError>>()?;
        let old_parallelism = states
            .iter()
            .map(|(_, state)| state.parallelism)
            .fold(old_parallelism, u32::max);
        self.recover(states, old_parallelism)
    }

    fn checkpoint_complete(&mut self, id: CheckpointId) -> Result<(), TaskError> {
        if self.settings.delivery != Delivery::ExactlyOnce {
            return Ok(());
        }
        let ready = self.pending.partition_point(|(pending, _)| *pending <= id);
        if ready == 0 {
            return Ok(());
        }
        let since = Instant::now();
        self.start_fresh()?;
        let batches: Vec<&Vec<u8>> = self.pending[..ready]
            .iter()
            .flat_map(|(_, batches)| batches.iter())
            .collect();
        let producer = self.producer.as_ref().expect("started");
        let own = IdProducer {
            producer,
            open: &self.in_transaction,
            subtask: self.subtask,
            names: &self.names,
        };
        self.commit(own, self.run, self.pending[ready - 1].0, &batches, since)?;
        self.pending.drain(..ready);
        Ok(())
    }
}

impl Drop for KafkaSink {
    fn drop(&mut self) {
        // A transaction is open only while a commit runs, so one is left open here only by a
        // commit that failed. Left open it would hold back every read_committed consumer of the
        // topic until the broker's timeout ends it, unless a restore fences it, and when the
        // job stops for good none comes: so it is aborted. In the background, like the close
        // itself: the brokers may be what failed, and the task must still end at once.
        if !self.in_transaction.get() {
            return;
        }
        let Some(producer) = self.producer.take() else {
            return;
        };
        abort_in_background(self.connector.clone(), producer);
    }
}

/// Aborts `producer`'s open transaction and closes it, in the background: the brokers may be
/// what failed, and the task must still end at once. Left open, the transaction would hold
/// back every read_committed consumer of its topics until a restore fences it or the broker
/// times it out.
fn abort_in_background(connector: String, producer: Detached<BaseProducer<WeirContext>>) {
    let abort = move |producer: &BaseProducer<WeirContext>| {
        // librdkafka aborts only once the delivery reports of every record sent are served,
        // which a BaseProducer does in its polls: drop the records still queued or in flight,
        // serve the reports, then abort.
        producer.purge(PurgeConfig::default().queue().inflight());
        let aborted = producer
            .flush(ABORT_TIMEOUT)
            .and_then(|()| producer.abort_transaction(ABORT_TIMEOUT));
        match aborted {
            Ok(()) => tracing::debug!("{connector}: aborted the open transaction"),
            Err(e) => tracing::warn!(
                "{connector}: cannot abort the open transaction ({e}): read_committed \
                 consumers of the topic wait for the broker to time it out"
            ),
        }
    };
    producer.close_after(abort);
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_abi::BatchBuilder;

    fn batch(values: &[&str]) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0);
        for (i, v) in values.iter().enumerate() {
            builder.push(b"k", v.as_bytes(), i as i64);
        }
        builder.into_bytes()
    }

    #[test]
    fn a_state_round_trips_and_a_damaged_one_is_refused() {
        let state = SinkState {
            run: 42,
            parallelism: 2,
            names: Some(TxNames {
                prefix: "weir.job.out".into(),
                marker_topic: "weir.job.out.markers".into(),
            }),
            pending: vec![
                (CheckpointId(3), vec![batch(&["a", "b"]), batch(&["c"])]),
                (CheckpointId(4), vec![batch(&["d"])]),
            ],
        };
        let bytes = state.encode();
        assert_eq!(SinkState::decode(&bytes).unwrap(), state);
        assert!(SinkState::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut extra = bytes.clone();
        extra.push(0);
        assert!(SinkState::decode(&extra).is_err());
        assert!(SinkState::decode(b"nope").is_err());
    }

    /// A state written before the names were recorded (`WKS1`: run, parallelism, pending)
    /// still restores, with no names: the restore uses today's, as it did then.
    #[test]
    fn a_state_of_the_format_without_names_still_reads() {
        let pending = vec![(CheckpointId(7), vec![batch(&["a"])])];
        let mut bytes = b"WKS1".to_vec();
        bytes.extend_from_slice(&9u64.to_le_bytes());
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&7u64.to_le_bytes());
        bytes.extend_from_slice(&1u32.to_le_bytes());
        bytes.extend_from_slice(&(pending[0].1[0].len() as u32).to_le_bytes());
        bytes.extend_from_slice(&pending[0].1[0]);
        let state = SinkState::decode(&bytes).unwrap();
        assert_eq!(
            state,
            SinkState {
                run: 9,
                parallelism: 3,
                names: None,
                pending,
            }
        );
    }

    #[test]
    fn runs_draw_different_ids() {
        assert_ne!(new_run_id(0), new_run_id(0));
    }
}
