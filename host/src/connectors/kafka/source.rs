//! The Kafka source: the partitions of some topics, split among the source's subtasks, with
//! an offset per partition as the checkpointed position.
//!
//! - **Assignment.** Partition `p` of topic `t` belongs to subtask `(hash(t) + p) mod
//!   parallelism`: stable whatever other topics or partitions exist, so a partition found by
//!   discovery never moves an existing one (and its offset) to another subtask. Partitions are
//!   assigned to the consumer by hand; the consumer group is never joined.
//! - **Position.** The next offset of every owned partition (and, with `until = "end"`, the
//!   end it stops at), as JSON. A fresh start resolves `start` to concrete offsets before the
//!   first checkpoint can record them, so a restore never re-resolves "latest" to a later end.
//!   A stream's checkpoint restored with `until = "end"` ends at the ends of that start, which
//!   is how a test (or an operator) drains a stream and finishes it.
//! - **Offsets to the group.** When a checkpoint completes, its offsets are committed to the
//!   consumer group (asynchronously), for lag tooling only: a restore reads the checkpoint.
//! - **Discovery.** Every `discovery_interval`, new partitions (and, with a pattern, new
//!   topics) are added, read from their earliest offset.
//! - **Mapping.** A record's key, value and timestamp are the Kafka record's own, or (as
//!   `key`, `value`, `timestamp` say) the value of one of its headers, the last of that name.
//!   A record without such a header, or whose timestamp header is not an integer, fails the
//!   task or is skipped (`on_error`): counted in `records_skipped`, logged, and passed, so
//!   the partition's offset moves past it and no checkpoint replays it. Neither way copies
//!   anything per record.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Headers;
use rdkafka::{Message, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use weir_abi::key_group::KeyGroups;

use super::KafkaSetupError;
use super::error::KafkaFailure;
use super::figures::KafkaSourceMetrics;
use super::report::{STATISTICS_INTERVAL, SourceReport};
use super::{Detached, REQUEST_TIMEOUT, WeirContext, client_config, is_fatal, task_error};
use crate::checkpoint::task_state::RestoredState;
use crate::connectors::connector::{
    ConnectorSetupError, RescaleRule, RestoreCheck, SourceConnector, TaskContext,
};
use crate::connectors::skip_log::SkipLog;
use crate::dataflow::connector_metrics::ConnectorFigures;
use crate::dataflow::error::TaskError;
use crate::dataflow::metrics::TaskMetrics;
use crate::dataflow::processor::{Source, SourceOutput, SourcePoll};
use crate::job::{
    Isolation, KafkaField, KafkaSourceSettings, KafkaStart, KafkaUntil, OnError, PartitionShare,
    ShareBy, TopicSelection,
};

/// How long a poll that found nothing asks the task to wait before the next.
const IDLE_WAIT: Duration = Duration::from_millis(5);
/// How long a subtask that owns no partition waits between polls.
const NO_PARTITIONS_WAIT: Duration = Duration::from_millis(100);

/// Which subtask of `parallelism` owns partition `partition` of `topic`.
pub(crate) fn owner(topic: &str, partition: i32, parallelism: u32) -> u32 {
    // FNV-1a: stable across builds and platforms, unlike std's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in topic.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (hash.wrapping_add(partition as u64) % u64::from(parallelism)) as u32
}

/// Which subtask of a source of `parallelism` reads partition `partition` of `topic` (of
/// `count` partitions) under `share`; `None` when another worker's subtask does, or no reader
/// owns it (a key-group topic with other than its key groups' number of partitions, which the
/// start-up check refuses).
pub(crate) fn reader(
    share: &PartitionShare,
    topic: &str,
    partition: i32,
    count: u32,
    parallelism: u32,
) -> Option<u32> {
    let (first, readers) = share.slice.unwrap_or((0, parallelism));
    let global = match share.by {
        ShareBy::Hash => owner(topic, partition, readers),
        ShareBy::KeyGroups(groups) if groups == count => {
            KeyGroups::new(groups, readers)?.owner(u32::try_from(partition).ok()?)
        }
        ShareBy::KeyGroups(_) => return None,
    };
    global
        .checked_sub(first)
        .filter(|&local| local < parallelism)
}

/// The longest part of a header's value a message quotes.
const QUOTED_VALUE: usize = 64;

/// Why a record cannot be mapped as the source's `key`, `value` and `timestamp` say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unmapped<'a> {
    /// It has no header `header`, which `part` comes from.
    Missing { part: &'static str, header: &'a str },
    /// Its timestamp header `header` holds `value`, not decimal milliseconds.
    NotAnInteger { header: &'a str, value: &'a [u8] },
    /// One of its headers has a name that is not UTF-8, so its headers cannot be read to
    /// find `header`, which `part` comes from.
    UnreadableHeaders { part: &'static str, header: &'a str },
}

/// Follows "the record … has": `no header "user" for its key`.
impl fmt::Display for Unmapped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unmapped::Missing { part, header } => write!(f, "no header {header:?} for its {part}"),
            Unmapped::UnreadableHeaders { part, header } => write!(
                f,
                "a header whose name is not UTF-8, so its headers cannot be searched for \
                 {header:?} for its {part}"
            ),
            Unmapped::NotAnInteger { header, value } => {
                let quoted = &value[..value.len().min(QUOTED_VALUE)];
                write!(f, "header {header:?} = \"{}", quoted.escape_ascii())?;
                if value.len() > QUOTED_VALUE {
                    write!(f, "…")?;
                }
                write!(
                    f,
                    "\" for its timestamp, not an integer of milliseconds (decimal digits, \
                     optionally after a '-')"
                )
            }
        }
    }
}

/// The value of `message`'s last header named `name` (as Kafka's `Headers.lastHeader`); a null
/// value is empty. `Ok(None)` when it has no such header, `Err` when a header's name is not
/// UTF-8.
fn last_header<'m, M: Message>(message: &'m M, name: &str) -> Result<Option<&'m [u8]>, ()> {
    let Some(headers) = message.headers() else {
        return Ok(None);
    };
    // rdkafka 0.39 panics on a header name that is not UTF-8 (it unwraps the conversion);
    // caught here, the record is refused by `on_error` like any other it cannot map, instead
    // of failing the task with a panic on every restore. Nothing is left half-changed: the
    // search only reads.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        (0..headers.count()).rev().find_map(|index| {
            headers
                .try_get(index)
                .filter(|header| header.key == name)
                .map(|header| header.value.unwrap_or_default())
        })
    }))
    .map_err(|_| ())
}

/// Decimal ASCII milliseconds, optionally after a `-`; `None` for anything else, or beyond 64
/// bits.
fn parse_millis(text: &[u8]) -> Option<i64> {
    let (negative, digits) = match text {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, text),
    };
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0i64, |value, &byte| {
        let digit = i64::from(byte.checked_sub(b'0').filter(|d| *d <= 9)?);
        let value = value.checked_mul(10)?;
        if negative {
            value.checked_sub(digit)
        } else {
            value.checked_add(digit)
        }
    })
}

/// The key, value and timestamp of `message` as `settings` map them, borrowed from the
/// message.
fn map_record<'a, M: Message>(
    message: &'a M,
    settings: &'a KafkaSourceSettings,
) -> Result<(&'a [u8], &'a [u8], i64), Unmapped<'a>> {
    let part = |field: &'a KafkaField, part: &'static str, own: Option<&'a [u8]>| match field {
        KafkaField::Record => Ok(own.unwrap_or_default()),
        KafkaField::Header(header) => last_header(message, header)
            .map_err(|()| Unmapped::UnreadableHeaders { part, header })?
            .ok_or(Unmapped::Missing { part, header }),
    };
    let key = part(&settings.key, "key", message.key())?;
    let value = part(&settings.value, "value", message.payload())?;
    let timestamp = match &settings.timestamp {
        KafkaField::Record => message.timestamp().to_millis().unwrap_or(0),
        KafkaField::Header(header) => {
            let part = "timestamp";
            let text = last_header(message, header)
                .map_err(|()| Unmapped::UnreadableHeaders { part, header })?
                .ok_or(Unmapped::Missing { part, header })?;
            parse_millis(text).ok_or(Unmapped::NotAnInteger {
                header,
                value: text,
            })?
        }
    };
    Ok((key, value, timestamp))
}

/// The failure of `connector` when `problem` keeps the record at `offset` of `topic` and
/// `partition` from being mapped, under `on_error = "fail"`.
fn unmapped_error(
    connector: &str,
    (topic, partition): &(String, i32),
    offset: i64,
    problem: Unmapped<'_>,
) -> TaskError {
    KafkaFailure::UnmappedRecord {
        connector: connector.to_owned(),
        topic: topic.clone(),
        partition: *partition,
        offset,
        problem: problem.to_string(),
    }
    .into()
}

/// One owned partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct PartitionPosition {
    /// The offset of the next record to emit.
    next: i64,
    /// With `until = "end"`: the offset it stops before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    end: Option<i64>,
}

impl PartitionPosition {
    fn done(&self) -> bool {
        self.end.is_some_and(|end| self.next >= end)
    }
}

/// The checkpointed position: every owned partition's offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Position {
    /// Format version.
    v: u32,
    partitions: Vec<(String, i32, PartitionPosition)>,
}

/// The current version of [`Position`].
const POSITION_VERSION: u32 = 1;

/// Every partition a Kafka source subtask's checkpointed `position` records, with the offset
/// of the next record it reads there; `None` for bytes that are not a Kafka source's position
/// (the restore itself names that problem).
pub(crate) fn checkpointed_offsets(position: &[u8]) -> Option<Vec<(String, i32, i64)>> {
    let position: Position = serde_json::from_slice(position).ok()?;
    (position.v == POSITION_VERSION).then(|| {
        position
            .partitions
            .into_iter()
            .map(|(topic, partition, at)| (topic, partition, at.next))
            .collect()
    })
}

/// The `kafka` source, with its settings.
pub(crate) struct Connector<'a>(pub(crate) &'a KafkaSourceSettings);

impl SourceConnector for Connector<'_> {
    /// Installs its partitions' figures in its task's metrics.
    fn build(&self, task: TaskContext<'_>) -> Box<dyn Source> {
        let figures = Arc::new(KafkaSourceMetrics::default());
        task.metrics
            .set_connector(Arc::clone(&figures) as Arc<dyn ConnectorFigures>);
        Box::new(
            KafkaSource::new(
                task.vertex,
                self.0.clone(),
                task.subtask,
                task.parallelism,
                task.metrics,
            )
            .reporting_to(figures),
        )
    }

    /// Each partition's offset moves with the partition ([`rescale_positions`]).
    fn rescale_rule(&self) -> Option<RescaleRule> {
        Some(rescale_positions)
    }

    /// Its brokers answer and its topics exist ([`super::check_source`]).
    fn preflight(&self, vertex: &str) -> Result<(), ConnectorSetupError> {
        super::check_source(&format!("kafka source \"{vertex}\""), self.0)
            .map_err(ConnectorSetupError::new)
    }

    /// Refuses a restore whose offsets belong to a topic deleted and created again since the
    /// checkpoint (read at those offsets, the new topic would be skipped into or read as the
    /// old one; [`super::check_restored_offsets`]). A check that cannot reach the brokers
    /// only warns: the sources then fail, and the job restarts, as they would without it.
    fn restore_check(
        &self,
        vertex: &str,
        states: &[&RestoredState],
        checkpoint: &str,
    ) -> Option<RestoreCheck> {
        let offsets = super::restored_offsets(states);
        if offsets.is_empty() {
            return None;
        }
        let connector = format!("kafka source \"{vertex}\"");
        let settings = self.0.clone();
        let checkpoint = checkpoint.to_owned();
        Some(Box::new(move || {
            match super::check_restored_offsets(connector, &settings, offsets, &checkpoint) {
                Ok(()) => Ok(()),
                Err(recreated @ KafkaSetupError::TopicRecreated { .. }) => {
                    Err(ConnectorSetupError::new(recreated))
                }
                Err(other) => {
                    tracing::warn!(
                        "cannot check the Kafka sources' offsets before the restore: {other}"
                    );
                    Ok(())
                }
            }
        }))
    }
}

/// The positions of a Kafka source's subtasks (one per old subtask, in order; empty for one
/// that recorded none) for `parallelism` new ones: every new subtask gets the offsets of every
/// partition, each from the old subtask that owned it, and reads those it owns now
/// ([`owner`]). A partition's offset moves with it, so each record is read once.
pub(crate) fn rescale_positions(old: &[&[u8]], parallelism: u32) -> Result<Vec<Vec<u8>>, String> {
    let old_parallelism = u32::try_from(old.len()).map_err(|_| "too many subtasks")?;
    let mut merged = Position {
        v: POSITION_VERSION,
        partitions: Vec::new(),
    };
    for (subtask, bytes) in (0..).zip(old) {
        if bytes.is_empty() {
            continue;
        }
        let position: Position = serde_json::from_slice(bytes).map_err(|e| {
            format!("the position of subtask {subtask} is not a Kafka source's: {e}")
        })?;
        if position.v != POSITION_VERSION {
            return Err(format!(
                "the position of subtask {subtask} has format {}, this Weir reads \
                 {POSITION_VERSION}",
                position.v
            ));
        }
        merged.partitions.extend(
            position
                .partitions
                .into_iter()
                .filter(|(topic, partition, _)| {
                    owner(topic, *partition, old_parallelism) == subtask
                }),
        );
    }
    let bytes = serde_json::to_vec(&merged).expect("a position always serializes");
    Ok(vec![bytes; parallelism as usize])
}

/// One subtask of a Kafka source.
pub(crate) struct KafkaSource {
    connector: String,
    settings: KafkaSourceSettings,
    subtask: u32,
    parallelism: u32,
    consumer: Option<Detached<BaseConsumer<WeirContext>>>,
    /// Every owned partition, by topic and number.
    partitions: BTreeMap<(String, i32), PartitionPosition>,
    /// Set by a restore: the positions to start from instead of `start`.
    restored: Option<BTreeMap<(String, i32), PartitionPosition>>,
    next_discovery: Option<Instant>,
    /// The partitions' offsets and lag, for the displays.
    report: SourceReport,
    /// Its task's counters: skipped records are counted in `records_skipped`.
    metrics: Arc<TaskMetrics>,
    /// The records skipped under `on_error = "skip"`, told without flooding the log.
    skips: SkipLog,
}

impl KafkaSource {
    /// Subtask `subtask` of `parallelism` of source `name`, counting the records it skips in
    /// `metrics` (its task's). Nothing connects until the first poll (after a restore's
    /// [`seek`](Source::seek), if any).
    pub(crate) fn new(
        name: &str,
        settings: KafkaSourceSettings,
        subtask: u32,
        parallelism: u32,
        metrics: Arc<TaskMetrics>,
    ) -> Self {
        let connector = format!("kafka source \"{name}\"");
        KafkaSource {
            skips: SkipLog::new(connector.clone(), "records"),
            connector,
            metrics,
            settings,
            subtask,
            parallelism,
            consumer: None,
            partitions: BTreeMap::new(),
            restored: None,
            next_discovery: None,
            report: SourceReport::default(),
        }
    }

    /// Reports the partitions' offsets and lag into `metrics` (its task's).
    pub(crate) fn reporting_to(mut self, metrics: std::sync::Arc<KafkaSourceMetrics>) -> Self {
        self.report = SourceReport::new(metrics);
        self
    }

    fn error(&self, what: impl Into<String>, error: KafkaError) -> TaskError {
        let context = self.consumer.as_ref().map(|c| c.context().as_ref());
        let fallback = WeirContext::default();
        task_error(&self.connector, what, error, context.unwrap_or(&fallback))
    }

    /// Connects, finds the owned partitions and where each starts, and assigns them.
    fn start(&mut self) -> Result<(), TaskError> {
        let mut config = client_config(&self.settings.bootstrap, &self.settings.properties);
        config
            .set("group.id", &self.settings.group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("isolation.level", self.settings.isolation.as_str())
            .set("enable.partition.eof", "true")
            // Where a stored offset is out of range (the broker deleted those records).
            .set("auto.offset.reset", "earliest");
        if config.get("statistics.interval.ms").is_none() {
            config.set("statistics.interval.ms", STATISTICS_INTERVAL);
        }
        let read_committed = self.settings.isolation == Isolation::ReadCommitted;
        let consumer: BaseConsumer<WeirContext> = config
            .create_with_context(WeirContext::reporting(
                self.report.metrics(),
                read_committed,
            ))
            .map_err(|e| self.error("cannot create the consumer", e))?;
        self.consumer = Some(Detached::new(consumer));
        let owned = self.owned_partitions()?;
        let restored = self.restored.take();
        let mut fresh = Vec::new();
        for key in owned {
            match restored.as_ref().and_then(|r| r.get(&key)) {
                // A stream restored as a bounded source: it ends at the ends of this start.
                Some(position)
                    if position.end.is_none() && self.settings.until == KafkaUntil::End =>
                {
                    let end = Some(self.end_offset(&key)?.max(position.next));
                    self.partitions.insert(
                        key,
                        PartitionPosition {
                            next: position.next,
                            end,
                        },
                    );
                }
                Some(position) => {
                    self.partitions.insert(key, *position);
                }
                // A partition created since the checkpoint starts at its earliest; one bounded
                // source reads only the partitions of its first start.
                None if restored.is_some() => {
                    if self.settings.until == KafkaUntil::Never {
                        let next = self.earliest(&key)?;
                        self.partitions
                            .insert(key, PartitionPosition { next, end: None });
                    }
                }
                None => fresh.push(key),
            }
        }
        for key in fresh {
            let next = self.start_offset(&key)?;
            let end = match self.settings.until {
                KafkaUntil::End => Some(self.end_offset(&key)?),
                KafkaUntil::Never => None,
            };
            self.partitions.insert(key, PartitionPosition { next, end });
        }
        self.assign()?;
        self.next_discovery = self.discovery_interval().map(|d| Instant::now() + d);
        tracing::debug!(
            "{} subtask {}: reading {} partitions from {:?}",
            self.connector,
            self.subtask,
            self.partitions.len(),
            self.partitions
        );
        Ok(())
    }

    /// Discovery applies to a stream only: a bounded source reads what existed at its start.
    fn discovery_interval(&self) -> Option<Duration> {
        match self.settings.until {
            KafkaUntil::Never => self.settings.discovery_interval,
            KafkaUntil::End => None,
        }
    }

    fn consumer(&self) -> &BaseConsumer<WeirContext> {
        self.consumer
            .as_ref()
            .expect("the consumer exists once the source started")
    }

    /// Every partition of the selected topics this subtask owns, as the cluster says now.
    fn owned_partitions(&self) -> Result<Vec<(String, i32)>, TaskError> {
        let metadata = self
            .consumer()
            .fetch_metadata(None, REQUEST_TIMEOUT)
            .map_err(|e| self.error("cannot read the cluster's metadata", e))?;
        let mut owned = Vec::new();
        for topic in metadata.topics() {
            if topic.error().is_some() || !self.settings.topics.matches(topic.name()) {
                continue;
            }
            let count = topic.partitions().len() as u32;
            for partition in topic.partitions() {
                if reader(
                    &self.settings.share,
                    topic.name(),
                    partition.id(),
                    count,
                    self.parallelism,
                ) == Some(self.subtask)
                {
                    owned.push((topic.name().to_owned(), partition.id()));
                }
            }
        }
        if let TopicSelection::Names(names) = &self.settings.topics {
            for name in names {
                if !metadata.topics().iter().any(|t| t.name() == name) {
                    tracing::warn!("{}: topic \"{name}\" has disappeared", self.connector);
                }
            }
        }
        owned.sort();
        Ok(owned)
    }

    fn watermarks(&self, (topic, partition): &(String, i32)) -> Result<(i64, i64), TaskError> {
        self.consumer()
            .fetch_watermarks(topic, *partition, REQUEST_TIMEOUT)
            .map_err(|e| self.error(format!("cannot read the offsets of {topic}/{partition}"), e))
    }

    fn earliest(&self, key: &(String, i32)) -> Result<i64, TaskError> {
        Ok(self.watermarks(key)?.0)
    }

    /// The end a bounded source stops at: the high watermark (under read_committed, the
    /// broker answers with the last stable offset).
    fn end_offset(&self, key: &(String, i32)) -> Result<i64, TaskError> {
        Ok(self.watermarks(key)?.1)
    }

    /// Where a fresh start reads `key` from, as a concrete offset.
    fn start_offset(&self, key: &(String, i32)) -> Result<i64, TaskError> {
        let (topic, partition) = key;
        match self.settings.start {
            KafkaStart::Earliest => self.earliest(key),
            KafkaStart::Latest => Ok(self.watermarks(key)?.1),
            KafkaStart::Committed => {
                let mut list = TopicPartitionList::new();
                list.add_partition(topic, *partition);
                let committed = self
                    .consumer()
                    .committed_offsets(list, REQUEST_TIMEOUT)
                    .map_err(|e| {
                        self.error(
                            format!(
                                "cannot read the group's committed offset of {topic}/{partition}"
                            ),
                            e,
                        )
                    })?;
                match committed
                    .find_partition(topic, *partition)
                    .map(|e| e.offset())
                {
                    Some(Offset::Offset(offset)) => Ok(offset),
                    _ => self.earliest(key),
                }
            }
            KafkaStart::Timestamp(ms) => {
                let mut list = TopicPartitionList::new();
                list.add_partition_offset(topic, *partition, Offset::Offset(ms))
                    .map_err(|e| self.error("cannot build an offset request", e))?;
                let found = self
                    .consumer()
                    .offsets_for_times(list, REQUEST_TIMEOUT)
                    .map_err(|e| {
                        self.error(
                            format!(
                                "cannot look up the offset of time {ms} in {topic}/{partition}"
                            ),
                            e,
                        )
                    })?;
                match found.find_partition(topic, *partition).map(|e| e.offset()) {
                    Some(Offset::Offset(offset)) => Ok(offset),
                    // No record that late: from the end.
                    _ => Ok(self.watermarks(key)?.1),
                }
            }
        }
    }

    /// Assigns every owned partition that is not done, at its next offset.
    fn assign(&self) -> Result<(), TaskError> {
        let mut list = TopicPartitionList::new();
        for ((topic, partition), position) in &self.partitions {
            if !position.done() {
                list.add_partition_offset(topic, *partition, Offset::Offset(position.next))
                    .map_err(|e| self.error("cannot build the assignment", e))?;
            }
        }
        self.consumer()
            .assign(&list)
            .map_err(|e| self.error("cannot assign the partitions", e))
    }

    /// Adds partitions created since the last look, from their earliest offset.
    fn discover(&mut self) -> Result<(), TaskError> {
        let owned = self.owned_partitions()?;
        let mut added = false;
        for key in owned {
            if !self.partitions.contains_key(&key) {
                let next = self.earliest(&key)?;
                tracing::info!(
                    "{}: found partition {}/{}, reading it from offset {next}",
                    self.connector,
                    key.0,
                    key.1
                );
                self.partitions
                    .insert(key, PartitionPosition { next, end: None });
                added = true;
            }
        }
        if added {
            self.assign()?;
        }
        Ok(())
    }

    /// After an end-of-partition event: brings the offsets of the partitions numbered
    /// `partition` (the event does not say which topic) up to the consumer's position, which
    /// has passed transaction control records no record shows, and stops reading those that
    /// reached their end (pausing them).
    fn on_partition_end(&mut self, partition: i32) -> Result<(), TaskError> {
        let positions = self
            .consumer()
            .position()
            .map_err(|e| self.error("cannot read the consumer's position", e))?;
        let mut finished = TopicPartitionList::new();
        for ((topic, number), position) in self.partitions.iter_mut() {
            if *number != partition {
                continue;
            }
            if let Some(Offset::Offset(at)) =
                positions.find_partition(topic, *number).map(|e| e.offset())
                && at > position.next
            {
                position.next = at;
            }
            if position.done() {
                finished.add_partition(topic, *number);
            }
        }
        if finished.count() > 0 {
            self.consumer()
                .pause(&finished)
                .map_err(|e| self.error("cannot stop reading a finished partition", e))?;
        }
        Ok(())
    }
}

/// A partition's name as a split of the source's watermark clock: `topic/partition`.
fn split_name((topic, partition): &(String, i32)) -> String {
    format!("{topic}/{partition}")
}

impl KafkaSource {
    /// Tells the watermark clock of every owned partition, so that one with no records yet
    /// holds the watermark back until it reads some or goes idle.
    fn name_splits(&self, out: &mut SourceOutput<'_>) {
        if out.tracks_splits() {
            for key in self.partitions.keys() {
                out.enter_split(&split_name(key));
            }
        }
    }
}

impl Source for KafkaSource {
    fn poll(&mut self, out: &mut SourceOutput<'_>, max: usize) -> Result<SourcePoll, TaskError> {
        if self.consumer.is_none() {
            self.start()?;
            self.name_splits(out);
        }
        if let Some(at) = self.next_discovery
            && Instant::now() >= at
        {
            self.discover()?;
            self.name_splits(out);
            self.next_discovery = self.discovery_interval().map(|d| Instant::now() + d);
        }
        if self.settings.until == KafkaUntil::End && self.partitions.values().all(|p| p.done()) {
            self.skips.flush();
            return Ok(SourcePoll::Exhausted);
        }
        if self.partitions.is_empty() {
            return Ok(SourcePoll::Idle(NO_PARTITIONS_WAIT));
        }
        // Records read, emitted or skipped: `max` bounds both.
        let mut read = 0;
        let mut ended = Vec::new();
        let mut failure = None;
        let mut unmapped = None;
        {
            let consumer = self
                .consumer
                .as_ref()
                .expect("the consumer exists once the source started");
            // The lookup key, its string reused for every record: no allocation per record.
            let mut key = (String::new(), 0);
            // The partition the watermark clock was last told of: it is told only on a change,
            // which librdkafka's runs of records from one partition make rare.
            let mut split = (String::new(), -1);
            while read < max {
                match consumer.poll(Duration::ZERO) {
                    None => break,
                    Some(Ok(message)) => {
                        key.0.clear();
                        key.0.push_str(message.topic());
                        key.1 = message.partition();
                        let Some(position) = self.partitions.get_mut(&key) else {
                            continue;
                        };
                        let offset = message.offset();
                        if position.end.is_some_and(|end| offset >= end) {
                            position.next = position.end.unwrap_or(offset);
                            ended.push(key.1);
                            continue;
                        }
                        read += 1;
                        if out.tracks_splits() && split != key {
                            split.clone_from(&key);
                            out.enter_split(&split_name(&key));
                        }
                        match map_record(&message, &self.settings) {
                            Ok((record_key, value, timestamp)) => {
                                out.push(record_key, value, timestamp)?
                            }
                            Err(problem) => match self.settings.on_error {
                                // The offset stays: the restarted job meets it again.
                                OnError::Fail => {
                                    unmapped = Some(unmapped_error(
                                        &self.connector,
                                        &key,
                                        offset,
                                        problem,
                                    ));
                                    break;
                                }
                                OnError::Skip => {
                                    self.metrics.add_records_skipped(1);
                                    self.skips.skipped(
                                        format_args!(
                                            "record at offset {offset} of {}/{}",
                                            key.0, key.1
                                        ),
                                        format_args!("at offset {offset} of {}/{}", key.0, key.1),
                                        problem,
                                    );
                                }
                            },
                        }
                        position.next = offset + 1;
                        if position.done() {
                            ended.push(key.1);
                        }
                    }
                    Some(Err(KafkaError::PartitionEOF(partition))) => ended.push(partition),
                    Some(Err(error)) if is_fatal(&error) => {
                        failure = Some(error);
                        break;
                    }
                    // A dropped connection, a leader moving: librdkafka retries by itself.
                    Some(Err(error)) => {
                        tracing::warn!("{}: {error} (retrying)", self.connector);
                        break;
                    }
                }
            }
        }
        if let Some(error) = unmapped {
            return Err(error);
        }
        if let Some(error) = failure {
            return Err(self.error("cannot read records", error));
        }
        ended.sort_unstable();
        ended.dedup();
        for partition in ended {
            self.on_partition_end(partition)?;
        }
        self.report
            .update(self.partitions.iter().map(|(key, at)| (key, at.next)));
        Ok(if read > 0 {
            SourcePoll::Emitted
        } else {
            // Nothing new for now: the skips waiting for a summary are told.
            self.skips.flush();
            SourcePoll::Idle(IDLE_WAIT)
        })
    }

    fn position(&self) -> Vec<u8> {
        let partitions = match (&self.consumer, &self.restored) {
            // Restored and not yet started: the restored position still holds, for the
            // partitions this subtask owns (after a rescale it was given every subtask's; a
            // worker's share is never rescaled, so all it was given is its own).
            (None, Some(restored)) => restored
                .iter()
                .filter(|((topic, partition), _)| {
                    self.settings.share != PartitionShare::default()
                        || owner(topic, *partition, self.parallelism) == self.subtask
                })
                .map(|(key, at)| (key.clone(), *at))
                .collect(),
            _ => self.partitions.clone(),
        };
        let position = Position {
            v: POSITION_VERSION,
            partitions: partitions
                .into_iter()
                .map(|((topic, partition), at)| (topic, partition, at))
                .collect(),
        };
        serde_json::to_vec(&position).expect("a position always serializes")
    }

    fn seek(&mut self, position: &[u8]) -> Result<(), TaskError> {
        let position: Position = serde_json::from_slice(position).map_err(|e| {
            TaskError::Restore(format!(
                "{}: the checkpointed position is not a Kafka source's: {e}",
                self.connector
            ))
        })?;
        if position.v != POSITION_VERSION {
            return Err(TaskError::Restore(format!(
                "{}: the checkpointed position has format {}, this Weir reads {POSITION_VERSION}",
                self.connector, position.v
            )));
        }
        let restored = position
            .partitions
            .into_iter()
            .map(|(topic, partition, at)| ((topic, partition), at))
            .collect();
        self.restored = Some(restored);
        self.skips.reset();
        if self.consumer.is_some() {
            // Seeking a running source: start over from the restored offsets.
            self.consumer = None;
            self.partitions.clear();
        }
        Ok(())
    }

    fn checkpoint_complete(&mut self, position: &[u8]) -> Result<(), TaskError> {
        let Some(consumer) = &self.consumer else {
            return Ok(());
        };
        let Ok(position) = serde_json::from_slice::<Position>(position) else {
            return Ok(());
        };
        let mut list = TopicPartitionList::new();
        for (topic, partition, at) in &position.partitions {
            if list
                .add_partition_offset(topic, *partition, Offset::Offset(at.next))
                .is_err()
            {
                return Ok(());
            }
        }
        if list.count() > 0
            && let Err(error) = consumer.commit(&list, CommitMode::Async)
        {
            // For lag tooling only: the checkpoint holds the truth, so a failed commit is
            // worth a warning, not a failover.
            tracing::warn!(
                "{}: cannot commit offsets to group \"{}\": {error}",
                self.connector,
                self.settings.group
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rdkafka::message::{Header, OwnedHeaders, OwnedMessage, Timestamp};

    /// A consumed record of key `k`, value `v`, timestamp 7 and these headers (`None` = a null
    /// value).
    fn message(headers: &[(&str, Option<&str>)]) -> OwnedMessage {
        let owned = headers
            .iter()
            .fold(OwnedHeaders::new(), |all, (key, value)| {
                all.insert(Header {
                    key,
                    value: value.map(str::as_bytes),
                })
            });
        OwnedMessage::new(
            Some(b"v".to_vec()),
            Some(b"k".to_vec()),
            "t".into(),
            Timestamp::CreateTime(7),
            0,
            3,
            (!headers.is_empty()).then_some(owned),
        )
    }

    fn settings(key: KafkaField, value: KafkaField, timestamp: KafkaField) -> KafkaSourceSettings {
        KafkaSourceSettings {
            bootstrap: "k:1".into(),
            topics: TopicSelection::Names(vec!["t".into()]),
            start: KafkaStart::Earliest,
            until: KafkaUntil::End,
            isolation: Isolation::ReadCommitted,
            group: "g".into(),
            discovery_interval: None,
            properties: Vec::new(),
            key,
            value,
            timestamp,
            on_error: OnError::Fail,
            share: Default::default(),
        }
    }

    fn header(name: &str) -> KafkaField {
        KafkaField::Header(name.into())
    }

    #[test]
    fn parts_come_from_the_record_or_from_the_last_header_of_the_name() {
        use KafkaField::Record;
        let m = message(&[("u", Some("ann")), ("at", Some("-42")), ("u", Some("bob"))]);
        let own = settings(Record, Record, Record);
        assert!(!own.maps_headers());
        assert_eq!(map_record(&m, &own), Ok((&b"k"[..], &b"v"[..], 7)));
        let mapped = settings(header("u"), Record, header("at"));
        assert!(mapped.maps_headers());
        assert_eq!(map_record(&m, &mapped), Ok((&b"bob"[..], &b"v"[..], -42)));
        // A null header value is empty; the value can come from a header too.
        let m = message(&[("u", None), ("big", Some("9223372036854775807"))]);
        let mapped = settings(Record, header("u"), header("big"));
        assert_eq!(map_record(&m, &mapped), Ok((&b"k"[..], &b""[..], i64::MAX)));
    }

    #[test]
    fn a_missing_header_or_a_timestamp_that_is_no_integer_says_which() {
        use KafkaField::Record;
        let problem = |headers: &[(&str, Option<&str>)], settings: &KafkaSourceSettings| {
            map_record(&message(headers), settings)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let by_user = settings(header("user"), Record, Record);
        assert_eq!(problem(&[], &by_user), "no header \"user\" for its key");
        assert_eq!(
            problem(&[("User", Some("x"))], &by_user),
            "no header \"user\" for its key",
            "names are compared exactly"
        );
        let by_at = settings(Record, Record, header("at"));
        assert_eq!(
            problem(&[("at", Some("soon"))], &by_at),
            "header \"at\" = \"soon\" for its timestamp, not an integer of milliseconds \
             (decimal digits, optionally after a '-')"
        );
        let long = "9".repeat(70);
        assert!(problem(&[("at", Some(&long))], &by_at).contains(&format!("\"{}…\"", &long[..64])));
        assert_eq!(
            problem(&[("at", None)], &by_at),
            "header \"at\" = \"\" for its timestamp, not an integer of milliseconds \
             (decimal digits, optionally after a '-')"
        );
    }

    #[test]
    fn the_failure_shown_in_job_md_is_the_one_the_source_gives() {
        let by_customer = settings(header("customer"), KafkaField::Record, KafkaField::Record);
        let m = message(&[("trace", Some("t-1"))]);
        let problem = map_record(&m, &by_customer).unwrap_err();
        let shown = unmapped_error(
            "kafka source \"orders\"",
            &("orders".into(), 3),
            1742,
            problem,
        );
        let shown = shown.to_string();
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/JOB.md"))
            .unwrap();
        assert!(doc.contains(&shown), "docs/JOB.md should show:\n{shown}");
    }

    #[test]
    fn milliseconds_are_decimal_digits_after_an_optional_minus() {
        assert_eq!(parse_millis(b"0"), Some(0));
        assert_eq!(parse_millis(b"1700000000000"), Some(1_700_000_000_000));
        assert_eq!(parse_millis(b"-5"), Some(-5));
        assert_eq!(parse_millis(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+5",
            b" 5",
            b"5 ",
            b"1.5",
            b"1e3",
            b"--5",
            b"9223372036854775808",
            b"\xff",
        ] {
            assert_eq!(parse_millis(bad), None, "{}", bad.escape_ascii());
        }
    }

    #[test]
    fn partitions_spread_over_subtasks_and_never_move() {
        // Four partitions of one topic over two subtasks: two each.
        let counts = (0..4).fold([0; 2], |mut counts, p| {
            counts[owner("words", p, 2) as usize] += 1;
            counts
        });
        assert_eq!(counts, [2, 2]);
        // The owner depends only on the topic, the partition and the parallelism.
        assert_eq!(owner("words", 3, 5), owner("words", 3, 5));
        assert!((0..64).all(|p| owner("t", p, 3) < 3));
    }

    #[test]
    fn workers_share_partitions_as_one_source_of_all_their_subtasks_would() {
        // Three workers, two subtasks each: every partition has exactly one reader, the one a
        // single source at parallelism 6 would give it.
        for by in [ShareBy::Hash, ShareBy::KeyGroups(24)] {
            for partition in 0..24 {
                let whole = PartitionShare { by, slice: None };
                let global = reader(&whole, "t", partition, 24, 6).unwrap();
                let readers: Vec<(u32, u32)> = (0..3)
                    .filter_map(|worker| {
                        let share = PartitionShare {
                            by,
                            slice: Some((worker * 2, 6)),
                        };
                        reader(&share, "t", partition, 24, 2).map(|local| (worker, local))
                    })
                    .collect();
                assert_eq!(readers, [(global / 2, global % 2)], "{by:?} {partition}");
            }
        }
        // A key-group topic: partition g to the owner of key group g, contiguous ranges.
        let share = PartitionShare {
            by: ShareBy::KeyGroups(8),
            slice: Some((2, 4)),
        };
        let read: Vec<Option<u32>> = (0..8).map(|p| reader(&share, "x", p, 8, 2)).collect();
        assert_eq!(
            read,
            [None, None, None, None, Some(0), Some(0), Some(1), Some(1)]
        );
        // A topic with another partition count than its key groups: nobody reads it.
        assert_eq!(reader(&share, "x", 5, 9, 2), None);
    }

    #[test]
    fn a_position_round_trips_and_a_bounded_partition_knows_it_is_done() {
        let position = Position {
            v: POSITION_VERSION,
            partitions: vec![
                (
                    "a".into(),
                    0,
                    PartitionPosition {
                        next: 5,
                        end: Some(5),
                    },
                ),
                ("a".into(), 1, PartitionPosition { next: 2, end: None }),
            ],
        };
        let bytes = serde_json::to_vec(&position).unwrap();
        assert_eq!(
            serde_json::from_slice::<Position>(&bytes).unwrap(),
            position
        );
        assert!(position.partitions[0].2.done());
        assert!(!position.partitions[1].2.done());
    }

    /// A position of `partitions` of topic `t`, each at offset `10 × partition`.
    fn position_of(partitions: &[i32]) -> Vec<u8> {
        serde_json::to_vec(&Position {
            v: POSITION_VERSION,
            partitions: partitions
                .iter()
                .map(|&p| {
                    let at = PartitionPosition {
                        next: 10 * i64::from(p),
                        end: None,
                    };
                    ("t".to_string(), p, at)
                })
                .collect(),
        })
        .unwrap()
    }

    #[test]
    fn a_rescale_gives_every_new_subtask_each_partition_from_its_old_owner() {
        // Eight partitions over two subtasks; subtask 1 also lists partitions it does not own
        // (a position written before the source started), at stale offsets.
        let owned_by = |s: u32| -> Vec<i32> { (0..8).filter(|&p| owner("t", p, 2) == s).collect() };
        let zero = position_of(&owned_by(0));
        let mut stale = Position {
            v: POSITION_VERSION,
            partitions: Vec::new(),
        };
        for p in 0..8 {
            let at = PartitionPosition {
                next: if owner("t", p, 2) == 1 {
                    10 * i64::from(p)
                } else {
                    -1
                },
                end: None,
            };
            stale.partitions.push(("t".into(), p, at));
        }
        let one = serde_json::to_vec(&stale).unwrap();
        let new = rescale_positions(&[&zero[..], &one[..]], 3).unwrap();
        assert_eq!(new.len(), 3);
        for bytes in &new {
            let mut position: Position = serde_json::from_slice(bytes).unwrap();
            position.partitions.sort_by_key(|(_, p, _)| *p);
            assert_eq!(
                position,
                serde_json::from_slice(&position_of(&(0..8).collect::<Vec<_>>())).unwrap()
            );
        }
        let err = rescale_positions(&[b"{}"], 2).unwrap_err();
        assert!(err.contains("subtask 0 is not a Kafka source's"), "{err}");
    }

    #[test]
    fn a_restored_source_that_has_not_started_reports_only_its_own_partitions() {
        let all = position_of(&(0..8).collect::<Vec<_>>());
        let fields = settings(KafkaField::Record, KafkaField::Record, KafkaField::Record);
        let mut source = KafkaSource::new("in", fields, 1, 2, Arc::default());
        source.seek(&all).unwrap();
        let reported: Position = serde_json::from_slice(&source.position()).unwrap();
        assert!(!reported.partitions.is_empty());
        assert!(
            reported
                .partitions
                .iter()
                .all(|(t, p, _)| owner(t, *p, 2) == 1),
            "{reported:?}"
        );
    }
}
