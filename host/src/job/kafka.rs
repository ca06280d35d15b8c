//! The settings of the Kafka source and sink, as validation leaves them (docs/JOB.md, "Kafka
//! source" and "Kafka sink").
//!
//! They are plain data: what a job file said, with every default filled in, so the job graph
//! states exactly what will run. The connectors that act on them live in
//! `connectors::kafka`; the rules that produce them in the job's validation.

use std::time::Duration;

use super::format::OnError;

/// Which topics a Kafka source reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopicSelection {
    /// `topics = ["a", "b"]`: these topics; each must exist when the job starts.
    Names(Vec<String>),
    /// `topic_pattern = "orders-*"`: every topic whose name matches, now and (with
    /// discovery) later; `*` matches any run of characters, `?` any one.
    Pattern(String),
}

impl TopicSelection {
    /// Whether topic `name` is selected.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            TopicSelection::Names(names) => names.iter().any(|n| n == name),
            TopicSelection::Pattern(pattern) => glob_matches(pattern.as_bytes(), name.as_bytes()),
        }
    }
}

/// Whether `text` matches the glob `pattern` (`*` any run, `?` any one byte).
fn glob_matches(pattern: &[u8], text: &[u8]) -> bool {
    // The classic two-pointer match with backtracking to the last `*`: linear in practice,
    // and never recursive, so no pattern can exhaust the stack.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && (pattern[p] == b'?' || pattern[p] == text[t]) {
            p += 1;
            t += 1;
        } else if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// Where a fresh start of a Kafka source begins reading each partition (`start`). A restore
/// begins where the checkpoint says, and a partition discovered while running at its earliest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaStart {
    /// `"earliest"`: the oldest record the broker still has.
    Earliest,
    /// `"latest"`: only records written after the job starts.
    Latest,
    /// `"committed"`: the consumer group's committed offset; the earliest where it has none.
    Committed,
    /// `{ timestamp = MS }`: the first record whose timestamp is at least this many
    /// milliseconds since the Unix epoch; the end where there is none.
    Timestamp(i64),
}

/// Whether a Kafka source ends (`until`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KafkaUntil {
    /// `"never"`: read forever (a stream).
    Never,
    /// `"end"`: stop at the end each partition had when the job first started (kept across
    /// restores), so the job finishes like a batch job.
    End,
}

/// Which records a Kafka consumer sees (`isolation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    /// `"read_committed"`: only records of committed transactions (the default).
    ReadCommitted,
    /// `"read_uncommitted"`: every record, aborted transactions' too.
    ReadUncommitted,
}

impl Isolation {
    /// The value of librdkafka's `isolation.level`.
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "read_committed",
            Isolation::ReadUncommitted => "read_uncommitted",
        }
    }
}

/// Where a Kafka source takes one part of a Weir record from (`key`, `value`, `timestamp`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum KafkaField {
    /// The Kafka record's own part of the same name, the default: `key = "key"` (a null key is
    /// empty), `value = "value"` (a null value is empty), `timestamp = "timestamp"` (the
    /// record's timestamp in milliseconds).
    #[default]
    Record,
    /// `{ header = "NAME" }`: the value of the record's header NAME, the last one where the
    /// header repeats (as Kafka's `Headers.lastHeader`); a null value is empty. A timestamp
    /// header holds decimal ASCII milliseconds (`1700000000000`, `-5`). A record without the
    /// header, or with a timestamp header that is not such an integer, is what `on_error`
    /// applies to.
    Header(String),
}

impl KafkaField {
    /// The header it names, if it names one.
    pub fn header(&self) -> Option<&str> {
        match self {
            KafkaField::Record => None,
            KafkaField::Header(name) => Some(name),
        }
    }
}

/// Which partitions of its topics each subtask of a Kafka source reads. A job file always
/// gets the default; the stages of a job run by many workers (`job/workers.rs`) set it, so
/// that each worker reads its share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PartitionShare {
    /// How a partition maps to its reader.
    pub by: ShareBy,
    /// `Some((first, readers))`: this source's subtasks are readers `first..first +
    /// parallelism` of `readers` over the whole job (one worker's subtasks of a job that
    /// runs as many); `None`: its subtasks are all the readers.
    pub slice: Option<(u32, u32)>,
}

/// How a Kafka source's partitions map to the readers of [`PartitionShare`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ShareBy {
    /// By a stable hash of topic and partition: any topic.
    #[default]
    Hash,
    /// Partition `g` is key group `g` of a topic with this many partitions, written by a sink
    /// that partitions by key group ([`SinkPartitioning::KeyGroups`]): read by the reader that
    /// owns key group `g`, as a `key-hash` edge would route its records.
    KeyGroups(u32),
}

/// How a Kafka sink chooses a record's partition. A job file always gets the default; the
/// exchange between the stages of a job run by many workers (`job/workers.rs`) partitions by
/// key group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SinkPartitioning {
    /// librdkafka's partitioner on the Kafka key (a keyless record goes anywhere).
    #[default]
    ByKafka,
    /// Partition = the key group of the record's Weir key among this many, the topic's
    /// partition count (created so when missing): what a `key-hash` edge routes by.
    KeyGroups(u32),
}

/// A `[[source]]` of `type = "kafka"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSourceSettings {
    /// `bootstrap`: `host:port[,host:port…]` of one or more brokers.
    pub bootstrap: String,
    /// `topics` or `topic_pattern`.
    pub topics: TopicSelection,
    /// `start`: where a fresh start begins.
    pub start: KafkaStart,
    /// `until`: whether the source ends.
    pub until: KafkaUntil,
    /// `isolation`: read_committed by default.
    pub isolation: Isolation,
    /// `group`: the consumer group the offsets of completed checkpoints are committed to
    /// (for lag tooling; the checkpoint is the truth). Default `weir.<job>.<source>`.
    pub group: String,
    /// `discovery_interval`: how often to look for new partitions and (with a pattern) new
    /// topics; `None` = never (`"off"`).
    pub discovery_interval: Option<Duration>,
    /// `properties`: librdkafka settings passed through (TLS, SASL, tuning), in file order.
    pub properties: Vec<(String, String)>,
    /// `key`: where each record's key comes from.
    pub key: KafkaField,
    /// `value`: where each record's value comes from.
    pub value: KafkaField,
    /// `timestamp`: where each record's timestamp comes from.
    pub timestamp: KafkaField,
    /// `on_error`: what a record that lacks a mapped header (or whose timestamp header is not
    /// an integer) does; only set with a header among `key`, `value` and `timestamp`.
    pub on_error: OnError,
    /// Which partitions each subtask reads: the default but in a worker's stage.
    pub share: PartitionShare,
}

impl KafkaSourceSettings {
    /// Whether any part of the record comes from a header (and `on_error` can apply).
    pub fn maps_headers(&self) -> bool {
        [&self.key, &self.value, &self.timestamp]
            .iter()
            .any(|field| field.header().is_some())
    }
}

/// What a Kafka sink promises (`delivery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// `"exactly-once"`: a read_committed consumer sees each record of the job's output once,
    /// through every crash and restore (docs/CHECKPOINTS.md, "The Kafka sink").
    ExactlyOnce,
    /// `"at-least-once"`: every record is acknowledged by the broker before the checkpoint
    /// that covers it completes; a restore may write some again.
    AtLeastOnce,
    /// `"none"`: records are sent as they come; a crash may lose those in flight.
    None,
}

impl Delivery {
    /// The word a job file writes for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::ExactlyOnce => "exactly-once",
            Delivery::AtLeastOnce => "at-least-once",
            Delivery::None => "none",
        }
    }
}

/// Where a Kafka sink writes each record (`topic`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkTopic {
    /// `topic = "counts"`: every record to this topic, with its key as the Kafka key.
    Fixed(String),
    /// `topic = { from_key = "/", topics = ["orders-eu", "orders-us"] }`: each record's key is
    /// `<topic><separator><key>`. The text before the first separator names the topic, which
    /// must be one of `topics`; the rest is the Kafka key (none when empty).
    FromKey {
        /// `from_key`: what splits the topic from the key; not empty, and in no topic of
        /// `topics` (a key is split at its first occurrence, so such a topic could never be
        /// named).
        separator: String,
        /// `topics`: every topic a record may name, without repeats and not empty; each must
        /// exist when the job starts.
        topics: Vec<String>,
    },
}

/// Why a record's key names no topic of [`SinkTopic::FromKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unrouted {
    /// The key holds no separator.
    NoSeparator,
    /// The text before the separator, the key's first this many bytes, is none of the sink's
    /// topics.
    UnknownTopic(usize),
}

impl SinkTopic {
    /// Every topic the sink may write to.
    pub fn topics(&self) -> &[String] {
        match self {
            SinkTopic::Fixed(topic) => std::slice::from_ref(topic),
            SinkTopic::FromKey { topics, .. } => topics,
        }
    }

    /// The topic and the Kafka key of a record whose key is `key`, or why it has none.
    /// Allocates nothing: the topic is the sink's own name, the Kafka key a part of `key`.
    pub fn route<'s, 'k>(&'s self, key: &'k [u8]) -> Result<(&'s str, &'k [u8]), Unrouted> {
        match self {
            SinkTopic::Fixed(topic) => Ok((topic, key)),
            SinkTopic::FromKey { separator, topics } => {
                let separator = separator.as_bytes();
                let at = find(key, separator).ok_or(Unrouted::NoSeparator)?;
                let named = &key[..at];
                // A handful of topics: a scan beats hashing the name.
                let topic = topics
                    .iter()
                    .find(|topic| topic.as_bytes() == named)
                    .ok_or(Unrouted::UnknownTopic(at))?;
                Ok((topic, &key[at + separator.len()..]))
            }
        }
    }
}

/// Where `needle` first occurs in `haystack`; `None` for an empty needle.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    match needle {
        [] => None,
        [byte] => haystack.iter().position(|b| b == byte),
        _ => haystack
            .windows(needle.len())
            .position(|window| window == needle),
    }
}

/// Which timestamp a Kafka sink gives the records it writes (`timestamp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkTimestamp {
    /// `"record"`: the record's own timestamp as the Kafka record's CreateTime (when above 0;
    /// otherwise the producer's time of sending). It must be milliseconds since the epoch.
    Record,
    /// `"now"`: no timestamp, so the producer stamps the time of sending — for records whose
    /// timestamps are not epoch milliseconds (a generator's record numbers, a file source's
    /// line numbers), which the broker's time-based retention would delete.
    Now,
}

impl SinkTimestamp {
    /// The word a job file writes for it.
    pub fn as_str(self) -> &'static str {
        match self {
            SinkTimestamp::Record => "record",
            SinkTimestamp::Now => "now",
        }
    }
}

/// A `[[sink]]` of `type = "kafka"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaSinkSettings {
    /// `bootstrap`: `host:port[,host:port…]` of one or more brokers.
    pub bootstrap: String,
    /// `topic`: where the records go, one topic or one named by each record's key; every
    /// topic must exist when the job starts.
    pub topic: SinkTopic,
    /// `timestamp`: the record's (the default) or the time of sending.
    pub timestamp: SinkTimestamp,
    /// `delivery`: exactly-once by default.
    pub delivery: Delivery,
    /// `transactional_id_prefix`: subtask `i` uses transactional id `<prefix>-<i>`. Default
    /// `weir.<job>.<sink>`; two jobs must never share one.
    pub transactional_id_prefix: String,
    /// `marker_topic`: where exactly-once commits record which checkpoint they completed.
    /// Default `<transactional_id_prefix>.markers`; created (compacted, one partition) when
    /// missing.
    pub marker_topic: String,
    /// `properties`: librdkafka settings passed through (TLS, SASL, tuning), in file order.
    pub properties: Vec<(String, String)>,
    /// How a record's partition is chosen: the default but between a worker's stages.
    pub partitioning: SinkPartitioning,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_runs_and_single_characters() {
        let p = |s: &str| TopicSelection::Pattern(s.to_owned());
        assert!(p("orders-*").matches("orders-eu"));
        assert!(p("orders-*").matches("orders-"));
        assert!(!p("orders-*").matches("order-eu"));
        assert!(p("*-eu").matches("orders-eu"));
        assert!(p("a?c").matches("abc"));
        assert!(!p("a?c").matches("ac"));
        assert!(p("*").matches("anything"));
        assert!(p("a*b*c").matches("a-b-b-c"));
        assert!(!p("a*b*c").matches("a-b-b-d"));
        assert!(p("exact").matches("exact"));
        assert!(!p("exact").matches("exactly"));
        let names = TopicSelection::Names(vec!["a".into(), "b".into()]);
        assert!(names.matches("b") && !names.matches("c"));
    }

    #[test]
    fn a_fixed_topic_takes_every_key_as_it_is() {
        let fixed = SinkTopic::Fixed("counts".into());
        assert_eq!(fixed.route(b"a/b"), Ok(("counts", &b"a/b"[..])));
        assert_eq!(fixed.route(b""), Ok(("counts", &b""[..])));
        assert_eq!(fixed.topics(), ["counts".to_owned()]);
    }

    #[test]
    fn a_topic_from_the_key_splits_at_the_first_separator() {
        let from_key = |separator: &str| SinkTopic::FromKey {
            separator: separator.into(),
            topics: vec!["orders-eu".into(), "orders-us".into()],
        };
        let slash = from_key("/");
        assert_eq!(slash.route(b"orders-eu/k1"), Ok(("orders-eu", &b"k1"[..])));
        assert_eq!(
            slash.route(b"orders-us/a/b"),
            Ok(("orders-us", &b"a/b"[..]))
        );
        assert_eq!(slash.route(b"orders-us/"), Ok(("orders-us", &b""[..])));
        assert_eq!(slash.route(b"orders-eu"), Err(Unrouted::NoSeparator));
        assert_eq!(slash.route(b""), Err(Unrouted::NoSeparator));
        assert_eq!(slash.route(b"orders-xx/k"), Err(Unrouted::UnknownTopic(9)));
        assert_eq!(slash.route(b"/k"), Err(Unrouted::UnknownTopic(0)));
        assert_eq!(
            slash.route(b"k/orders-eu/x"),
            Err(Unrouted::UnknownTopic(1))
        );
        let arrow = from_key("=>");
        assert_eq!(
            arrow.route(b"orders-eu=>k=>v"),
            Ok(("orders-eu", &b"k=>v"[..]))
        );
        assert_eq!(arrow.route(b"orders-eu="), Err(Unrouted::NoSeparator));
        assert_eq!(arrow.route(b"orders-eu=k"), Err(Unrouted::NoSeparator));
        assert_eq!(
            from_key("").route(b"orders-eu/k"),
            Err(Unrouted::NoSeparator)
        );
        assert_eq!(slash.topics().len(), 2);
    }
}
