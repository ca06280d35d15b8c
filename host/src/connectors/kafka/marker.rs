//! The markers of the exactly-once Kafka sink: one record per committed transaction, in the
//! same transaction as the output it commits, naming the sink subtask (its transactional id,
//! the record's key), the run that buffered the output and the checkpoint it completes.
//!
//! A restore reads them back to learn whether the transaction of the checkpoint it restores
//! committed before the crash (docs/CHECKPOINTS.md, "The Kafka sink"). The marker topic is
//! compacted: only the newest marker of each key matters, so it stays as small as the number
//! of sink subtasks that ever ran.

use std::collections::HashMap;
use std::time::Instant;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::{Detached, KafkaSetupError, REQUEST_TIMEOUT, WeirContext, client_config, is_fatal};
use crate::job::KafkaSinkSettings;

/// What one committed transaction of an exactly-once sink subtask says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Marker {
    /// The run that buffered the output: a random number drawn when the sink subtask starts
    /// (or carried over from the state a restore re-sends).
    pub run: u64,
    /// The checkpoint whose completion the transaction commits.
    pub checkpoint: u64,
    /// How many transactional ids that run may use (`<prefix>-0` up): the sink's parallelism,
    /// or the old one of a rescaled state it restored if larger. A later start fences those
    /// at or above its own number. (Named for what it was before rescaling: the JSON stays.)
    pub parallelism: u32,
    /// Records the transaction holds besides this marker.
    pub records: u64,
}

impl Marker {
    /// The marker as the record's value (JSON, readable with any Kafka tool).
    pub(crate) fn to_bytes(self) -> Vec<u8> {
        serde_json::to_vec(&self).expect("a marker always serializes")
    }

    /// A record value written by [`Marker::to_bytes`]; `None` for anything else.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Option<Marker> {
        serde_json::from_slice(bytes).ok()
    }
}

/// Creates the marker topic of `settings`: one partition, compacted, the cluster's default
/// replication.
pub(super) fn create_topic(
    connector: &str,
    settings: &KafkaSinkSettings,
) -> Result<(), KafkaSetupError> {
    let what = format!(
        "cannot create the marker topic \"{}\" (one partition, cleanup.policy=compact); \
         create it so, or name an existing one with `marker_topic`",
        settings.marker_topic
    );
    super::create_topic(
        connector,
        settings,
        &settings.marker_topic,
        1,
        &[("cleanup.policy", "compact")],
        what,
    )
}

/// Warns when the existing marker topic of `settings` deletes records by time (created by
/// hand with the broker's defaults, say). A restore learns whether the checkpoint's transaction
/// committed from its transactional id's newest marker; one deleted by time reads as "not
/// committed", and the checkpoint's output is sent again: a job stopped for longer than the
/// retention and then restored from its last checkpoint would write its last output twice.
/// Compaction keeps the newest marker of each id forever. A warning, not a refusal: the topic
/// may be the operator's to configure, and a job restored within the retention is safe.
pub(super) fn warn_if_markers_expire(connector: &str, settings: &KafkaSinkSettings) {
    let topic = &settings.marker_topic;
    let Some(configs) = super::topic_configs(
        &settings.bootstrap,
        &settings.properties,
        std::slice::from_ref(topic),
    ) else {
        return;
    };
    let Some(retention) = configs
        .iter()
        .find_map(|(_, values)| super::retention::time_limit(values))
    else {
        return;
    };
    tracing::warn!(
        "{connector}: the marker topic \"{topic}\" deletes records after {retention} ms \
         (cleanup.policy with delete, retention.ms): a restore of a checkpoint older than that \
         finds no marker of its transaction, takes its output for uncommitted, and sends it \
         again. Weir creates marker topics compacted; make this one so, for example \
         `kafka-configs.sh --bootstrap-server {} --alter --entity-type topics --entity-name \
         {topic} --add-config cleanup.policy=compact`",
        settings.bootstrap
    );
}

/// The newest marker of every key that starts with `prefix` — committed ones only with
/// `committed_only`, every one written otherwise — read from the beginning of marker topic
/// `topic` (the sink's, or the one a checkpoint's output was committed under) to its end, on
/// the brokers of `settings`.
///
/// "Its end" is the high watermark as a read_uncommitted client sees it when the read starts,
/// so a transaction still open there (a zombie not yet fenced, another subtask re-sending)
/// makes the read wait until it is resolved instead of stopping short of a committed marker
/// behind it: a read_committed consumer alone would report the end at the first open
/// transaction and could miss this subtask's own newest marker.
pub(crate) fn read_markers(
    settings: &KafkaSinkSettings,
    topic: &str,
    prefix: &str,
    committed_only: bool,
) -> Result<HashMap<String, Marker>, KafkaError> {
    let mut uncommitted = client_config(&settings.bootstrap, &settings.properties);
    uncommitted.set("isolation.level", "read_uncommitted");
    let probe: BaseConsumer<WeirContext> = uncommitted.create_with_context(WeirContext::helper())?;
    let probe = Detached::new(probe);
    let metadata = probe.fetch_metadata(Some(topic), REQUEST_TIMEOUT)?;
    let partitions: Vec<i32> = metadata
        .topics()
        .iter()
        .filter(|t| t.name() == topic)
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    let mut ends = HashMap::new();
    for &partition in &partitions {
        let (_, high) = probe.fetch_watermarks(topic, partition, REQUEST_TIMEOUT)?;
        ends.insert(partition, high);
    }
    drop(probe);

    let mut committed = client_config(&settings.bootstrap, &settings.properties);
    let isolation = if committed_only {
        "read_committed"
    } else {
        "read_uncommitted"
    };
    committed
        .set("group.id", format!("{prefix}.marker-reader"))
        .set("enable.auto.commit", "false")
        .set("isolation.level", isolation)
        .set("enable.partition.eof", "true");
    let consumer: BaseConsumer<WeirContext> =
        committed.create_with_context(WeirContext::helper())?;
    let consumer = Detached::new(consumer);
    let mut assignment = TopicPartitionList::new();
    for &partition in &partitions {
        if ends[&partition] > 0 {
            assignment.add_partition_offset(topic, partition, Offset::Beginning)?;
        }
    }
    let mut latest = HashMap::new();
    if assignment.count() == 0 {
        return Ok(latest);
    }
    consumer.assign(&assignment)?;
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    let mut remaining: Vec<i32> = assignment
        .elements()
        .iter()
        .map(|e| e.partition())
        .collect();
    // What went wrong last while librdkafka retried (a partition's leader gone until another
    // is elected): the error if the reads never get through.
    let mut retried = None;
    while !remaining.is_empty() {
        if Instant::now() > deadline {
            return Err(retried.unwrap_or(KafkaError::MessageConsumption(
                rdkafka::types::RDKafkaErrorCode::OperationTimedOut,
            )));
        }
        match consumer.poll(std::time::Duration::from_millis(100)) {
            Some(Ok(message)) => {
                if let (Some(key), Some(value)) = (message.key(), message.payload())
                    && let Ok(key) = std::str::from_utf8(key)
                    && key.starts_with(prefix)
                    && let Some(marker) = Marker::from_bytes(value)
                {
                    latest.insert(key.to_owned(), marker);
                }
            }
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(error)) if is_fatal(&error) => return Err(error),
            Some(Err(error)) => {
                tracing::debug!("reading the markers in \"{topic}\": {error} (retrying)");
                retried = Some(error);
            }
        }
        // The position passes transaction control records too, so it reaches the end.
        let positions = consumer.position()?;
        remaining.retain(|partition| {
            let position = positions
                .find_partition(topic, *partition)
                .and_then(|e| e.offset().to_raw())
                .unwrap_or(-1);
            position < ends[partition]
        });
    }
    Ok(latest)
}
