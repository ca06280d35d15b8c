//! The Kafka source and sink, on librdkafka (the `rdkafka` crate).
//!
//! Both run on their task's thread with librdkafka's blocking clients (`BaseConsumer`,
//! `BaseProducer`): the task loop already owns a thread, and a source's `poll` or a sink's
//! commit is where waiting belongs. What each promises, and why the sink's protocol is
//! exactly-once without resuming a transaction after a crash (librdkafka cannot), is in
//! docs/CHECKPOINTS.md, "The Kafka source" and "The Kafka sink".
//!
//! - [`source`]: partitions assigned to subtasks by a stable hash, an offset per partition in
//!   the checkpoint, offsets committed to the consumer group when a checkpoint completes.
//! - [`sink`]: exactly-once (the checkpoint's output in the snapshot and in a transaction that
//!   commits, with a marker, when the checkpoint completes), at-least-once, or none.
//! - [`error`]: why a Kafka source or sink task stops ([`error::KafkaFailure`]).
//! - [`figures`]: what the displays show of a source (offsets, lag) and a sink (transactions).
//! - [`marker`]: the marker records the exactly-once sink writes and reads back.
//! - [`report`]: a source's offsets and lag per partition, for the displays.
//! - [`retention`]: the sink's warning about records their topic's retention deletes at once.
//! - [`check_source`], [`check_sink`]: a connector's brokers and topics checked once before
//!   the job starts (its connector's `preflight`), so a wrong address or a missing topic
//!   stops it with exit code 3 instead of failing over forever.
//! - [`check_restored_offsets`]: before a restore, the sources' checkpointed offsets checked
//!   against their topics, so a topic deleted and created again since the checkpoint is named
//!   instead of read at offsets that belong to the old one.

pub(crate) mod error;
pub(crate) mod figures;
pub(crate) mod marker;
pub(crate) mod report;
pub(crate) mod retention;
pub(crate) mod sink;
pub(crate) mod source;

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::client::ClientContext;
use rdkafka::config::RDKafkaLogLevel;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::metadata::Metadata;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::types::RDKafkaErrorCode;

use crate::checkpoint::task_state::RestoredState;
use crate::dataflow::error::TaskError;
use figures::KafkaSourceMetrics;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};

use crate::job::{KafkaSinkSettings, KafkaSourceSettings, ShareBy, SinkPartitioning, SinkTopic};

/// How long one request to the brokers (metadata, offsets, a transaction's init or commit)
/// may take before the task fails and the job fails over.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the check before a job starts waits for the brokers to answer.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a job with Kafka connectors cannot start: its brokers or topics are not what the job
/// file says.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KafkaSetupError {
    /// No broker of `bootstrap` answered.
    #[error(
        "{connector}: cannot reach the brokers at {bootstrap} within {}s: {cause}; check that \
         they run and that `bootstrap` (and any TLS or SASL `properties`) are right",
        CONNECT_TIMEOUT.as_secs()
    )]
    Unreachable {
        /// `kafka source "in"`.
        connector: String,
        /// The addresses tried.
        bootstrap: String,
        /// What librdkafka reported.
        cause: String,
    },
    /// A topic the job names does not exist.
    #[error(
        "{connector}: topic \"{topic}\" does not exist on {bootstrap}: create it (for example \
         `kafka-topics.sh --create --topic {topic} --bootstrap-server {bootstrap}`) or fix \
         the job file's {key}"
    )]
    MissingTopic {
        /// `kafka sink "out"`.
        connector: String,
        /// The topic.
        topic: String,
        /// The brokers asked.
        bootstrap: String,
        /// The key that names it (`` `topics` ``).
        key: &'static str,
    },
    /// A source's `topic_pattern` matches no topic and nothing would look again.
    #[error(
        "{connector}: no topic on {bootstrap} matches topic_pattern \"{pattern}\", and \
         `discovery_interval = \"off\"` means none ever will: fix the pattern, create a \
         matching topic, or turn discovery on"
    )]
    NoMatchingTopic {
        /// `kafka source "in"`.
        connector: String,
        /// The pattern.
        pattern: String,
        /// The brokers asked.
        bootstrap: String,
    },
    /// A topic that partitions by key group has another number of partitions than the key
    /// groups: records would reach the wrong reader.
    #[error(
        "{connector}: topic \"{topic}\" has {found} partitions, but it carries the key groups \
         of a key-hash edge, {expected} of them, one per partition: delete it (it holds only \
         records between the job's stages) or give the receiving operator max_parallelism = \
         {found}"
    )]
    PartitionCount {
        /// `kafka sink "out"`.
        connector: String,
        /// The topic.
        topic: String,
        /// Its partitions.
        found: usize,
        /// The key groups.
        expected: u32,
    },
    /// A source's checkpoint read a partition further than the topic now reaches: the topic
    /// was deleted and created again (or lost records) since, and the offsets belong to a log
    /// that is gone.
    #[error(
        "{connector}: {checkpoint} read partition {partition} of topic \"{topic}\" up to offset \
         {offset}, but {evidence}: the topic was deleted and created again since that \
         checkpoint (or its brokers lost records), so its offsets are not offsets of the topic \
         there is now, and restoring at them would skip the new topic's first records or read \
         them as if they were the old ones. Start the job from the beginning with `--fresh`; or, \
         to keep the rest of the job's state, rename the source (and the `inputs` that name \
         it), which then starts as its `start` says, and restore with \
         `--allow-non-restored-state`"
    )]
    TopicRecreated {
        /// `kafka source "in"`.
        connector: String,
        /// The checkpoint's directory name.
        checkpoint: String,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The checkpoint's offset: the next record it reads there.
        offset: i64,
        /// What the topic is now: `the partition ends at offset 12 now`.
        evidence: String,
    },
    /// The brokers answered, but refused or failed a request the check needs.
    #[error("{connector}: {what}: {cause}")]
    Request {
        /// `kafka sink "out"`.
        connector: String,
        /// What the check was doing.
        what: String,
        /// What librdkafka or the broker said.
        cause: String,
    },
}

/// A connector's librdkafka configuration: Weir's settings for the connection, then the job
/// file's `properties` (validation refused every key Weir sets itself).
pub(crate) fn client_config(bootstrap: &str, properties: &[(String, String)]) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", bootstrap)
        .set("client.id", "weir")
        .set_log_level(RDKafkaLogLevel::Warning);
    for (key, value) in properties {
        config.set(key, value);
    }
    config
}

/// The client context of every Kafka connector: librdkafka's log goes to `tracing` (its errors
/// as warnings: librdkafka retries what they report, and a task fails only on what it cannot
/// ride out), and the
/// last error it reported (a broker down, a failed authentication) and the first failed
/// delivery are kept, so a task's failure can name the cause rather than only a timeout. A
/// source's consumer also takes librdkafka's statistics into its partitions' figures.
#[derive(Debug, Default)]
pub(crate) struct WeirContext {
    last_error: Mutex<Option<String>>,
    failed_delivery: Mutex<Option<KafkaError>>,
    /// Where a source's statistics go, and whether it reads committed records only.
    statistics: Option<(Arc<KafkaSourceMetrics>, bool)>,
    /// A helper client's (see [`WeirContext::helper`]): librdkafka's warnings about
    /// properties that do not apply to it are not worth a user's attention.
    helper: bool,
}

impl WeirContext {
    /// The context of a source's consumer: statistics go to `metrics` (see [`report`]).
    pub(crate) fn reporting(metrics: Arc<KafkaSourceMetrics>, read_committed: bool) -> Self {
        WeirContext {
            statistics: Some((metrics, read_committed)),
            ..WeirContext::default()
        }
    }

    /// The context of a client Weir makes besides a connector's own consumer or producer (to
    /// check the brokers, read markers, fence, describe a topic), from the connector's
    /// `properties`. A sink's properties are a producer's, so a helper consumer made from them
    /// would warn about every producer setting (`linger.ms`, `transaction.timeout.ms`) that
    /// it ignores; the connector's own client has warned about any that really do not apply.
    pub(crate) fn helper() -> Self {
        WeirContext {
            helper: true,
            ..WeirContext::default()
        }
    }

    /// What librdkafka last reported as an error, if anything.
    pub(crate) fn last_error(&self) -> Option<String> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }

    /// The first record the broker did not take since the last call, if any.
    pub(crate) fn take_failed_delivery(&self) -> Option<KafkaError> {
        self.failed_delivery.lock().ok().and_then(|mut e| e.take())
    }
}

impl ClientContext for WeirContext {
    fn log(&self, level: RDKafkaLogLevel, fac: &str, log_message: &str) {
        if self.helper && fac == "CONFWARN" {
            tracing::debug!("librdkafka {fac} (a helper client): {log_message}");
            return;
        }
        match level {
            RDKafkaLogLevel::Emerg
            | RDKafkaLogLevel::Alert
            | RDKafkaLogLevel::Critical
            | RDKafkaLogLevel::Error
            | RDKafkaLogLevel::Warning => tracing::warn!("librdkafka {fac}: {log_message}"),
            _ => tracing::debug!("librdkafka {fac}: {log_message}"),
        }
    }

    fn stats_raw(&self, statistics: &[u8]) {
        if let Some((metrics, read_committed)) = &self.statistics {
            report::apply_statistics(statistics, metrics, *read_committed);
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        // The end of a partition is news for the source (it also arrives as an event), not a
        // problem.
        if matches!(error, KafkaError::PartitionEOF(_))
            || error.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::PartitionEOF)
        {
            return;
        }
        // Kept to name the cause when the task fails; librdkafka's log has said it already.
        tracing::debug!("librdkafka: {error}: {reason}");
        if let Ok(mut last) = self.last_error.lock() {
            *last = Some(format!("{error}: {reason}"));
        }
    }
}

impl ConsumerContext for WeirContext {}

impl ProducerContext for WeirContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, _)) = result
            && let Ok(mut first) = self.failed_delivery.lock()
            && first.is_none()
        {
            *first = Some(error.clone());
        }
    }
}

/// A librdkafka client that is closed on a thread of its own when dropped.
///
/// Closing a consumer waits for its last offset commits and leaves the group, and closing a
/// producer waits for its queue: while the brokers are down that takes as long as librdkafka's
/// timeouts, tens of seconds. A task that fails because the brokers are down would then report
/// its failure only after the close, and the job would fail over that much later; so every
/// connector holds its clients in a `Detached`, and a failing task exits at once.
pub(crate) struct Detached<T: Send + 'static>(Option<T>);

impl<T: Send + 'static> Detached<T> {
    /// Wraps `client`.
    pub(crate) fn new(client: T) -> Self {
        Detached(Some(client))
    }

    /// Closes the client in the background like a drop, after `last` ran on it there (an
    /// exactly-once sink aborts its open transaction so): nothing waits for either.
    pub(crate) fn close_after(mut self, last: impl FnOnce(&T) + Send + 'static) {
        if let Some(client) = self.0.take() {
            close_in_background(client, last);
        }
    }
}

/// Runs `last` on `client` and drops it, on a thread of its own.
fn close_in_background<T: Send + 'static>(client: T, last: impl FnOnce(&T) + Send + 'static) {
    let closing = std::thread::Builder::new()
        .name("weir-kafka-close".into())
        .spawn(move || {
            last(&client);
            drop(client);
        });
    if let Err(e) = closing {
        // No thread to spare: the client went with the closure, closed here without `last`,
        // late rather than never.
        tracing::debug!("cannot close a Kafka client in the background: {e}");
    }
}

impl<T: Send + 'static> std::ops::Deref for Detached<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.0
            .as_ref()
            .expect("a detached client is only taken when dropped")
    }
}

impl<T: Send + 'static> Drop for Detached<T> {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            close_in_background(client, |_| {});
        }
    }
}

/// A task failure of a Kafka connector: `what` it was doing, librdkafka's error, and the last
/// error librdkafka reported on its own (which often says why: the broker is down).
pub(crate) fn task_error(
    connector: &str,
    what: impl Into<String>,
    error: KafkaError,
    context: &WeirContext,
) -> TaskError {
    let mut what = what.into();
    if let Some(last) = context.last_error() {
        what = format!("{what} (librdkafka last reported: {last})");
    }
    error::KafkaFailure::Request {
        connector: connector.to_owned(),
        what,
        source: Box::new(error),
    }
    .into()
}

/// Whether a consumer error ends the task (and the job fails over by its restart strategy):
/// librdkafka's fatal errors, and every broker of the cluster being down, which librdkafka
/// would otherwise wait out silently for as long as it lasts. Any other error a poll returns —
/// a dropped connection, a partition whose leader is moving — librdkafka retries by itself:
/// the reader polls on.
pub(crate) fn is_fatal(error: &KafkaError) -> bool {
    matches!(error, KafkaError::MessageConsumptionFatal(_))
        || error.rdkafka_error_code() == Some(rdkafka::types::RDKafkaErrorCode::AllBrokersDown)
}

/// Runs a future of rdkafka's admin API to completion on this thread. librdkafka's own
/// threads do the work; the future only waits for their answer, so no reactor is needed.
pub(crate) fn block_on<F: Future>(future: F) -> Result<F::Output, std::io::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()?;
    Ok(runtime.block_on(future))
}

/// The config values of `topics` as the brokers of `bootstrap` report them, each topic's by
/// name; `None` when the brokers cannot be asked or do not answer (the callers then go on
/// without: what they read is advice, not a condition to start).
pub(crate) fn topic_configs(
    bootstrap: &str,
    properties: &[(String, String)],
    topics: &[String],
) -> Option<Vec<(String, HashMap<String, String>)>> {
    use rdkafka::admin::{OwnedResourceSpecifier, ResourceSpecifier};
    let admin: AdminClient<WeirContext> = client_config(bootstrap, properties)
        .create_with_context(WeirContext::helper())
        .ok()?;
    let options = AdminOptions::new().request_timeout(Some(REQUEST_TIMEOUT));
    let specifiers: Vec<ResourceSpecifier<'_>> = topics
        .iter()
        .map(|topic| ResourceSpecifier::Topic(topic))
        .collect();
    let results = block_on(admin.describe_configs(&specifiers, &options))
        .ok()?
        .ok()?;
    let configs = results
        .into_iter()
        .flatten()
        .filter_map(|resource| {
            let OwnedResourceSpecifier::Topic(topic) = resource.specifier else {
                return None;
            };
            let values = resource
                .entries
                .into_iter()
                .filter_map(|entry| Some((entry.name, entry.value?)))
                .collect();
            Some((topic, values))
        })
        .collect();
    Some(configs)
}

/// Every partition's offset in the restored states of one Kafka source's subtasks (after a
/// rescale each subtask holds every partition's, the same); a finished subtask's are not
/// read again.
pub(crate) fn restored_offsets(states: &[&RestoredState]) -> BTreeMap<(String, i32), i64> {
    let mut offsets = BTreeMap::new();
    for restored in states {
        if restored.state.finished {
            continue;
        }
        for (topic, partition, next) in
            source::checkpointed_offsets(&restored.state.inner).unwrap_or_default()
        {
            offsets.insert((topic, partition), next);
        }
    }
    offsets
}

/// Checks, before a restore, that the topics the Kafka source `connector` (with `settings`)
/// reads are still the logs the checkpoint `checkpoint` read: `offsets` are its partitions'
/// offsets in the checkpoint ([`restored_offsets`]).
///
/// A topic deleted and created again under the same name starts over at offset 0, and the
/// checkpoint's offsets, which a restore seeks to, then mean nothing. Kafka knows a topic by
/// its id since KIP-516, but the `rdkafka` crate (0.39) reads no topic id — librdkafka has it
/// only in its DescribeTopics admin call, which the crate leaves to unsafe bindings — so the
/// check goes by what no topic that is still the same can show: a partition the checkpoint
/// read that the topic no longer has (partitions are never removed), or a partition that now
/// ends before the checkpoint's offset (records are never removed from a log's end; the
/// high watermark is asked for read_uncommitted, so an open transaction cannot make it look
/// shorter). A topic recreated and written past the old offsets before the restore shows
/// neither and goes unnoticed (docs/OPERATIONS.md says so).
pub(crate) fn check_restored_offsets(
    connector: String,
    settings: &KafkaSourceSettings,
    offsets: BTreeMap<(String, i32), i64>,
    checkpoint: &str,
) -> Result<(), KafkaSetupError> {
    if offsets.is_empty() {
        return Ok(());
    }
    let metadata = reachable_metadata(&connector, &settings.bootstrap, &settings.properties)?;
    let mut config = client_config(&settings.bootstrap, &settings.properties);
    config.set("isolation.level", "read_uncommitted");
    let request = |what: String, e: KafkaError| KafkaSetupError::Request {
        connector: connector.clone(),
        what,
        cause: e.to_string(),
    };
    let consumer: BaseConsumer<WeirContext> = config
        .create_with_context(WeirContext::helper())
        .map_err(|e| {
            request(
                "cannot create a client with the source's settings".into(),
                e,
            )
        })?;
    let consumer = Detached::new(consumer);
    for ((topic, partition), offset) in offsets {
        // A topic gone altogether is the source's own business (it warns, and preflight
        // refuses a named topic that is missing).
        let Some(listed) = metadata
            .topics()
            .iter()
            .find(|t| t.name() == topic && t.error().is_none())
        else {
            continue;
        };
        let partitions = listed.partitions().len();
        let end = if usize::try_from(partition).is_ok_and(|p| p < partitions) && offset > 0 {
            let (_, high) = consumer
                .fetch_watermarks(&topic, partition, REQUEST_TIMEOUT)
                .map_err(|e| {
                    request(format!("cannot read the offsets of {topic}/{partition}"), e)
                })?;
            Some(high)
        } else {
            None
        };
        if let Some(evidence) = recreation_evidence(partition, offset, partitions, end) {
            return Err(KafkaSetupError::TopicRecreated {
                connector,
                checkpoint: checkpoint.to_owned(),
                topic,
                partition,
                offset,
                evidence,
            });
        }
    }
    Ok(())
}

/// What shows that partition `partition` of a topic, which a checkpoint read up to `offset`, is
/// not the log the checkpoint read — the topic has `partitions` partitions now, and the
/// partition ends at `end` (its high watermark; `None` when not asked) — or `None` when
/// nothing does.
fn recreation_evidence(
    partition: i32,
    offset: i64,
    partitions: usize,
    end: Option<i64>,
) -> Option<String> {
    if usize::try_from(partition).is_ok_and(|p| p >= partitions) {
        return Some(format!("the topic has {partitions} partition(s) now"));
    }
    match end {
        Some(end) if end < offset => Some(format!("the partition ends at offset {end} now")),
        _ => None,
    }
}

/// The cluster's metadata, or [`KafkaSetupError::Unreachable`].
fn reachable_metadata(
    connector: &str,
    bootstrap: &str,
    properties: &[(String, String)],
) -> Result<Metadata, KafkaSetupError> {
    let consumer: BaseConsumer<WeirContext> = client_config(bootstrap, properties)
        .create_with_context(WeirContext::helper())
        .map_err(|e| KafkaSetupError::Request {
            connector: connector.to_owned(),
            what: "cannot create a client with the connector's settings".into(),
            cause: e.to_string(),
        })?;
    let consumer = Detached::new(consumer);
    consumer
        .fetch_metadata(None, CONNECT_TIMEOUT)
        .map_err(|e| KafkaSetupError::Unreachable {
            connector: connector.to_owned(),
            bootstrap: bootstrap.to_owned(),
            cause: consumer
                .context()
                .last_error()
                .unwrap_or_else(|| e.to_string()),
        })
}

/// Whether `metadata` lists `topic` without an error.
fn topic_exists(metadata: &Metadata, topic: &str) -> bool {
    metadata
        .topics()
        .iter()
        .any(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
}

pub(crate) fn check_source(
    connector: &str,
    settings: &KafkaSourceSettings,
) -> Result<(), KafkaSetupError> {
    let metadata = reachable_metadata(connector, &settings.bootstrap, &settings.properties)?;
    match &settings.topics {
        crate::job::TopicSelection::Names(names) => {
            for topic in names {
                if !topic_exists(&metadata, topic) {
                    return Err(KafkaSetupError::MissingTopic {
                        connector: connector.to_owned(),
                        topic: topic.clone(),
                        bootstrap: settings.bootstrap.clone(),
                        key: "`topics`",
                    });
                }
                if let ShareBy::KeyGroups(groups) = settings.share.by {
                    let found = metadata
                        .topics()
                        .iter()
                        .find(|t| t.name() == topic)
                        .map_or(0, |t| t.partitions().len());
                    if found != groups as usize {
                        return Err(KafkaSetupError::PartitionCount {
                            connector: connector.to_owned(),
                            topic: topic.clone(),
                            found,
                            expected: groups,
                        });
                    }
                }
            }
        }
        pattern @ crate::job::TopicSelection::Pattern(text) => {
            let any = metadata.topics().iter().any(|t| pattern.matches(t.name()));
            if !any && settings.discovery_interval.is_none() {
                return Err(KafkaSetupError::NoMatchingTopic {
                    connector: connector.to_owned(),
                    pattern: text.clone(),
                    bootstrap: settings.bootstrap.clone(),
                });
            }
            if !any {
                tracing::warn!(
                    "{connector}: no topic matches topic_pattern \"{text}\" yet; it reads \
                     nothing until discovery finds one"
                );
            }
        }
    }
    Ok(())
}

pub(crate) fn check_sink(
    connector: &str,
    settings: &KafkaSinkSettings,
) -> Result<(), KafkaSetupError> {
    let metadata = reachable_metadata(connector, &settings.bootstrap, &settings.properties)?;
    let key = match settings.topic {
        SinkTopic::Fixed(_) => "`topic`",
        SinkTopic::FromKey { .. } => "`topic.topics`",
    };
    if let SinkPartitioning::KeyGroups(groups) = settings.partitioning {
        for topic in settings.topic.topics() {
            check_key_group_topic(connector, settings, &metadata, topic, groups)?;
        }
        return check_markers(connector, settings, &metadata);
    }
    // Every topic a record may name: one missing would fail the task at its first record.
    if let Some(missing) = settings
        .topic
        .topics()
        .iter()
        .find(|topic| !topic_exists(&metadata, topic))
    {
        return Err(KafkaSetupError::MissingTopic {
            connector: connector.to_owned(),
            topic: missing.clone(),
            bootstrap: settings.bootstrap.clone(),
            key,
        });
    }
    check_markers(connector, settings, &metadata)
}

/// Creates an exactly-once sink's marker topic when missing; warns when an existing one
/// deletes its records by time.
fn check_markers(
    connector: &str,
    settings: &KafkaSinkSettings,
    metadata: &Metadata,
) -> Result<(), KafkaSetupError> {
    if settings.delivery != crate::job::Delivery::ExactlyOnce {
        return Ok(());
    }
    if topic_exists(metadata, &settings.marker_topic) {
        marker::warn_if_markers_expire(connector, settings);
    } else {
        marker::create_topic(connector, settings)?;
    }
    Ok(())
}

/// A topic between a worker's stages (`job/workers.rs`): created with one partition per key
/// group when missing, refused with another count.
///
/// It is created without time-based retention (`retention.ms=-1`): its records keep their own
/// timestamps, and a job reading a topic from the beginning carries times as old as that
/// topic's, which a week's default retention would delete before the next stage reads them
/// (Kafka Streams creates its repartition topics so too). An existing one that deletes by time
/// is warned about ([`warn_if_records_expire`]).
fn check_key_group_topic(
    connector: &str,
    settings: &KafkaSinkSettings,
    metadata: &Metadata,
    topic: &str,
    groups: u32,
) -> Result<(), KafkaSetupError> {
    if let Some(found) = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none() && !t.partitions().is_empty())
    {
        let found = found.partitions().len();
        if found != groups as usize {
            return Err(KafkaSetupError::PartitionCount {
                connector: connector.to_owned(),
                topic: topic.to_owned(),
                found,
                expected: groups,
            });
        }
        warn_if_records_expire(connector, settings, topic);
        return Ok(());
    }
    let what = format!(
        "cannot create the topic \"{topic}\" between the job's stages ({groups} partitions, \
         one per key group, retention.ms=-1); create it so"
    );
    create_topic(
        connector,
        settings,
        topic,
        groups,
        &[("retention.ms", "-1")],
        what,
    )?;
    // The stage that reads it checks that it exists as soon as this returns: wait until the
    // cluster's metadata shows it.
    let deadline = std::time::Instant::now() + CONNECT_TIMEOUT;
    while std::time::Instant::now() < deadline {
        let metadata = reachable_metadata(connector, &settings.bootstrap, &settings.properties)?;
        if topic_exists(&metadata, topic) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Warns when `topic`, an existing topic between a worker's stages, deletes records by time
/// (one created by hand, or by an earlier Weir): see [`check_key_group_topic`] for what it
/// loses. A warning, not a refusal: its operator may have chosen the retention knowingly.
fn warn_if_records_expire(connector: &str, settings: &KafkaSinkSettings, topic: &str) {
    let Some(configs) = topic_configs(
        &settings.bootstrap,
        &settings.properties,
        &[topic.to_owned()],
    ) else {
        return;
    };
    let Some(retention) = configs
        .iter()
        .find_map(|(_, values)| retention::time_limit(values))
    else {
        return;
    };
    tracing::warn!(
        "{connector}: the topic \"{topic}\" between the job's stages deletes records after \
         {retention} ms (retention.ms): a record older than that when it is written, or one \
         that waits longer for a stopped stage, is lost. Weir creates these topics with \
         retention.ms=-1; set it so, for example `kafka-configs.sh --bootstrap-server {} \
         --alter --entity-type topics --entity-name {topic} --add-config retention.ms=-1`",
        settings.bootstrap
    );
}

/// Creates `topic` with `partitions` and the topic `configs` through the connection of
/// `settings`, the cluster's default replication; one that another subtask, worker or run
/// created first is fine. `what` says what failed, and how to do it by hand.
fn create_topic(
    connector: &str,
    settings: &KafkaSinkSettings,
    topic: &str,
    partitions: u32,
    configs: &[(&str, &str)],
    what: String,
) -> Result<(), KafkaSetupError> {
    let failed = |cause: String| KafkaSetupError::Request {
        connector: connector.to_owned(),
        what: what.clone(),
        cause,
    };
    let admin: AdminClient<WeirContext> = client_config(&settings.bootstrap, &settings.properties)
        .create_with_context(WeirContext::helper())
        .map_err(|e| failed(e.to_string()))?;
    // -1: the broker's default.replication.factor.
    let mut new = NewTopic::new(topic, partitions as i32, TopicReplication::Fixed(-1));
    for (key, value) in configs {
        new = new.set(key, value);
    }
    // A broker killed or a controller moving fails the request for a while only (the workers'
    // broker chaos test saw a worker that started during a broker's kill exit with code 3
    // here, "BrokerTransportFailure"): tried again until REQUEST_TIMEOUT has passed, each try
    // waiting at most what is left of it. librdkafka does not retry an admin request itself.
    // A lost connection fails the whole request (`KafkaError::AdminOp`, whose code
    // `KafkaError::rdkafka_error_code` does not give); a broker's refusal comes per topic.
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut tries = 0u32;
    loop {
        tries += 1;
        let left = deadline.saturating_duration_since(Instant::now());
        let options = AdminOptions::new()
            .operation_timeout(Some(left))
            .request_timeout(Some(left));
        let (code, cause) = match block_on(admin.create_topics([&new], &options))
            .map_err(|e| failed(e.to_string()))?
        {
            Ok(results) => match results.into_iter().find_map(Result::err) {
                None => {
                    tracing::info!("{connector}: created the topic \"{topic}\"");
                    return Ok(());
                }
                Some((_, RDKafkaErrorCode::TopicAlreadyExists)) => return Ok(()),
                Some((_, code)) => (code, code.to_string()),
            },
            Err(e @ KafkaError::AdminOp(code)) => (code, e.to_string()),
            Err(e) => return Err(failed(e.to_string())),
        };
        if !is_transient(code) {
            return Err(failed(cause));
        }
        if deadline.saturating_duration_since(Instant::now()) <= RETRY_PAUSE {
            return Err(failed(format!(
                "{cause} (tried {tries} times in {}s)",
                REQUEST_TIMEOUT.as_secs()
            )));
        }
        if tries == 1 {
            tracing::warn!(
                "{connector}: creating the topic \"{topic}\" failed ({cause}); trying again \
                 for up to {}s",
                REQUEST_TIMEOUT.as_secs()
            );
        } else {
            tracing::debug!("{connector}: creating the topic \"{topic}\" failed again ({cause})");
        }
        std::thread::sleep(RETRY_PAUSE);
    }
}

/// How long [`create_topic`] waits before it tries again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Whether a CreateTopics request that failed with `code` may succeed when tried again: its
/// connection was lost (the broker it went to killed, or the network between failed), the
/// broker it went to is not the controller (any more), the broker gave up waiting for the
/// creation (which goes on), or the controller's quota on topic changes asks to wait. Not the
/// errors of a produce or a fetch (`NotEnoughReplicas`, `LeaderNotAvailable`), which do not
/// answer a CreateTopics request; nor `InvalidReplicationFactor`: a broker down stays
/// registered, fenced, and still counts towards the cluster's default replication.
fn is_transient(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::BrokerTransportFailure
            | RDKafkaErrorCode::NotController
            | RDKafkaErrorCode::RequestTimedOut
            | RDKafkaErrorCode::ThrottlingQuotaExceeded
    )
}

#[cfg(test)]
mod tests {
    use super::recreation_evidence;

    #[test]
    fn a_topic_recreated_shows_by_a_shorter_partition_or_fewer_partitions() {
        // The same topic, grown or not since the checkpoint.
        assert_eq!(recreation_evidence(1, 500, 4, Some(500)), None);
        assert_eq!(recreation_evidence(1, 500, 4, Some(9_000)), None);
        // Nothing read yet: no offset is too far.
        assert_eq!(recreation_evidence(0, 0, 4, None), None);
        // Recreated, and written less than the checkpoint had read.
        assert_eq!(
            recreation_evidence(1, 500, 4, Some(20)).as_deref(),
            Some("the partition ends at offset 20 now")
        );
        // Recreated with fewer partitions: partitions are never removed from a topic.
        assert_eq!(
            recreation_evidence(3, 500, 2, None).as_deref(),
            Some("the topic has 2 partition(s) now")
        );
    }
}
