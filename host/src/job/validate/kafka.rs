//! The rules of the Kafka source and sink tables (docs/JOB.md): which keys apply, their
//! values, the defaults that name a job's groups and transactional ids, and the librdkafka
//! `properties` passed through — unknown or malformed ones refused by librdkafka's own
//! configuration check, the ones Weir sets itself refused with the key to use instead.
//!
//! Nothing here touches the network: whether the brokers answer and the topics exist is
//! checked when the job starts.

use std::ops::Range;

use rdkafka::ClientConfig;
use toml::Spanned;

use super::{Validator, span_of, vertex_key};
use crate::job::OnError;
use crate::job::error::{JobError, Problem};
use crate::job::kafka::{
    Delivery, Isolation, KafkaField, KafkaSinkSettings, KafkaSourceSettings, KafkaStart,
    KafkaUntil, SinkTimestamp, SinkTopic, TopicSelection,
};
use crate::job::spec::{SinkSpec, SourceSpec};

/// Keys of a Kafka source.
pub(super) const KAFKA_SOURCE_KEYS: &[&str] = &[
    "name",
    "type",
    "parallelism",
    "watermark",
    "bootstrap",
    "topics",
    "topic_pattern",
    "start",
    "until",
    "isolation",
    "group",
    "discovery_interval",
    "properties",
    "key",
    "value",
    "timestamp",
    "on_error",
];
/// Keys of a Kafka sink.
pub(super) const KAFKA_SINK_KEYS: &[&str] = &[
    "name",
    "type",
    "parallelism",
    "inputs",
    "bootstrap",
    "topic",
    "timestamp",
    "delivery",
    "transactional_id_prefix",
    "marker_topic",
    "properties",
];

/// How often a Kafka source looks for new partitions unless told otherwise.
const DEFAULT_DISCOVERY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

/// librdkafka settings Weir chooses itself, and what to write instead.
const OWNED_PROPERTIES: &[(&str, &str)] = &[
    (
        "bootstrap.servers",
        "set the connector's `bootstrap` instead",
    ),
    (
        "metadata.broker.list",
        "set the connector's `bootstrap` instead",
    ),
    ("group.id", "set the source's `group` instead"),
    ("isolation.level", "set the source's `isolation` instead"),
    (
        "enable.auto.commit",
        "a Kafka source commits offsets when a checkpoint completes; the checkpoint, not the \
         group, is where it restarts from",
    ),
    (
        "enable.auto.offset.store",
        "a Kafka source stores the offsets of completed checkpoints itself",
    ),
    (
        "auto.offset.reset",
        "set the source's `start` instead (a restore starts where the checkpoint says)",
    ),
    (
        "enable.partition.eof",
        "the source needs partition end events to know when `until = \"end\"` is reached",
    ),
    (
        "transactional.id",
        "set the sink's `transactional_id_prefix` instead: each subtask needs its own id",
    ),
    (
        "enable.idempotence",
        "the sink's `delivery` decides it (on for exactly-once and at-least-once)",
    ),
];

/// What a topic name may be made of (Kafka's own rule).
const TOPIC_RULE: &str = "1 to 249 ASCII letters, digits, '.', '_' or '-', and not \".\" or \"..\"";

/// The table form of a sink's `topic`, as the messages show it.
const FROM_KEY_EXAMPLE: &str = "{ from_key = \"/\", topics = [\"orders-eu\", \"orders-us\"] }";

/// Whether `name` is a legal Kafka topic name.
fn is_topic_name(name: &str) -> bool {
    (1..=249).contains(&name.len())
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Validator<'_> {
    /// A `[[source]]` of `type = "kafka"` of job `job`.
    pub(super) fn kafka_source(
        &self,
        spec: &SourceSpec,
        job: &str,
    ) -> Result<KafkaSourceSettings, JobError> {
        let name = spec.name.get_ref();
        let key = |k: &str| vertex_key(k, "source", name);
        let (owner, bootstrap) = self.bootstrap("source", &spec.name, spec.bootstrap.as_ref())?;
        let topics = match (&spec.topics, &spec.topic_pattern) {
            (Some(_), Some(pattern)) => {
                return Err(self.needs_setting(
                    pattern.span(),
                    key("topic_pattern"),
                    "`topics`",
                    "name the topics, or give a pattern, not both",
                ));
            }
            (Some(topics), None) => {
                if topics.get_ref().is_empty() {
                    return Err(self.bad_value(
                        topics.span(),
                        key("topics"),
                        "[]".into(),
                        "at least one topic name",
                    ));
                }
                let mut names = Vec::new();
                for topic in topics.get_ref() {
                    let topic_name = self.topic(topic, key("topics"))?;
                    if !names.contains(&topic_name) {
                        names.push(topic_name);
                    }
                }
                TopicSelection::Names(names)
            }
            (None, Some(pattern)) => {
                let text = pattern.get_ref();
                let legal = !text.is_empty()
                    && text.bytes().all(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'*' | b'?')
                    });
                if !legal {
                    return Err(self.bad_value(
                        pattern.span(),
                        key("topic_pattern"),
                        format!("{text:?}"),
                        "a glob over topic names: letters, digits, '.', '_', '-', '*' (any \
                         run) and '?' (any one character)",
                    ));
                }
                TopicSelection::Pattern(text.clone())
            }
            (None, None) => {
                return Err(self.error(
                    spec.name.span(),
                    Problem::MissingKey {
                        owner,
                        key: "topics",
                        meaning: "the topics to read, e.g. topics = [\"orders\"] (or \
                                  topic_pattern = \"orders-*\")",
                    },
                ));
            }
        };
        let start = match &spec.start {
            None => KafkaStart::Earliest,
            Some(start) => self.kafka_start(start, key("start"))?,
        };
        let until = match &spec.until {
            None => KafkaUntil::Never,
            Some(until) => self.word(
                until,
                key("until"),
                &[("never", KafkaUntil::Never), ("end", KafkaUntil::End)],
                "\"never\" (a stream) or \"end\" (stop at the end each partition had when the \
                 job first started)",
            )?,
        };
        let isolation = match &spec.isolation {
            None => Isolation::ReadCommitted,
            Some(isolation) => self.word(
                isolation,
                key("isolation"),
                &[
                    ("read_committed", Isolation::ReadCommitted),
                    ("read_uncommitted", Isolation::ReadUncommitted),
                ],
                "\"read_committed\" or \"read_uncommitted\"",
            )?,
        };
        let group = match &spec.group {
            None => format!("weir.{job}.{name}"),
            Some(group) if group.get_ref().trim().is_empty() => {
                return Err(self.bad_value(
                    group.span(),
                    key("group"),
                    format!("{:?}", group.get_ref()),
                    "a consumer group id (leave `group` out for weir.<job>.<source>)",
                ));
            }
            Some(group) => group.get_ref().clone(),
        };
        let discovery_interval = match &spec.discovery_interval {
            None => Some(DEFAULT_DISCOVERY_INTERVAL),
            Some(d) => self.duration_or_off(
                d,
                &key("discovery_interval"),
                "a duration above zero (e.g. \"1m\"), or \"off\"",
            )?,
        };
        let properties = self.kafka_properties(spec.properties.as_ref(), &key("properties"))?;
        let [record_key, value, timestamp] = [
            ("key", &spec.key),
            ("value", &spec.value),
            ("timestamp", &spec.timestamp),
        ]
        .map(|(part, field)| self.kafka_field(field.as_ref(), part, key(part)));
        let mut settings = KafkaSourceSettings {
            bootstrap,
            topics,
            start,
            until,
            isolation,
            group,
            discovery_interval,
            properties,
            key: record_key?,
            value: value?,
            timestamp: timestamp?,
            on_error: OnError::Fail,
            share: crate::job::PartitionShare::default(),
        };
        if let Some(word) = &spec.on_error {
            if !settings.maps_headers() {
                return Err(self.needs_setting(
                    word.span(),
                    key("on_error"),
                    "`key`, `value` and `timestamp` read from the Kafka record \
                     itself",
                    "every Kafka record has a key, a value and a timestamp, so none \
                     can fail; `on_error` applies to a record that lacks a header \
                     the source maps (`key = { header = \"NAME\" }`, or `value`, or \
                     `timestamp`): map one, or remove `on_error`",
                ));
            }
            settings.on_error =
                self.on_error(word, key("on_error"), "a record without a mapped header")?;
        }
        Ok(settings)
    }

    /// A `[[sink]]` of `type = "kafka"` of job `job`.
    pub(super) fn kafka_sink(
        &self,
        spec: &SinkSpec,
        job: &str,
    ) -> Result<KafkaSinkSettings, JobError> {
        let name = spec.name.get_ref();
        let key = |k: &str| vertex_key(k, "sink", name);
        let (owner, bootstrap) = self.bootstrap("sink", &spec.name, spec.bootstrap.as_ref())?;
        let Some(topic) = &spec.topic else {
            return Err(self.error(
                spec.name.span(),
                Problem::MissingKey {
                    owner,
                    key: "topic",
                    meaning: "the topic to write, e.g. topic = \"counts\" (or topic = { \
                              from_key = \"/\", topics = [\"orders-eu\", \"orders-us\"] } to \
                              take it from each record's key)",
                },
            ));
        };
        let topic = self.sink_topic(topic, &owner, &key)?;
        let timestamp = match &spec.timestamp {
            None => SinkTimestamp::Record,
            Some(timestamp) => self.word(
                timestamp,
                key("timestamp"),
                &[
                    ("record", SinkTimestamp::Record),
                    ("now", SinkTimestamp::Now),
                ],
                "\"record\" (the record's timestamp, which must be milliseconds since the \
                 epoch) or \"now\" (the time the record is sent)",
            )?,
        };
        let delivery = match &spec.delivery {
            None => Delivery::ExactlyOnce,
            Some(delivery) => self.word(
                delivery,
                key("delivery"),
                &[
                    ("exactly-once", Delivery::ExactlyOnce),
                    ("at-least-once", Delivery::AtLeastOnce),
                    ("none", Delivery::None),
                ],
                "\"exactly-once\", \"at-least-once\" or \"none\"",
            )?,
        };
        if delivery != Delivery::ExactlyOnce {
            for (k, span) in [
                (
                    "transactional_id_prefix",
                    span_of(&spec.transactional_id_prefix),
                ),
                ("marker_topic", span_of(&spec.marker_topic)),
            ] {
                if let Some(span) = span {
                    return Err(self.needs_setting(
                        span,
                        key(k),
                        format!("`delivery = \"{}\"`", delivery.as_str()),
                        "only an exactly-once sink uses transactions; remove the key",
                    ));
                }
            }
        }
        let transactional_id_prefix = match &spec.transactional_id_prefix {
            None => format!("weir.{job}.{name}"),
            Some(prefix) => {
                let text = prefix.get_ref();
                if text.trim().is_empty() || text.len() > 200 {
                    return Err(self.bad_value(
                        prefix.span(),
                        key("transactional_id_prefix"),
                        format!("{text:?}"),
                        "1 to 200 characters, unique to this job and sink",
                    ));
                }
                text.clone()
            }
        };
        let marker_topic = match &spec.marker_topic {
            None => {
                let default = format!("{transactional_id_prefix}.markers");
                if !is_topic_name(&default) {
                    let span = span_of(&spec.transactional_id_prefix).unwrap_or(spec.name.span());
                    return Err(self.bad_value(
                        span,
                        key("marker_topic"),
                        format!("{default:?} (the default, from the transactional id prefix)"),
                        format!("a topic name ({TOPIC_RULE}): set `marker_topic`"),
                    ));
                }
                default
            }
            Some(marker) => self.topic(marker, key("marker_topic"))?,
        };
        let properties = self.kafka_properties(spec.properties.as_ref(), &key("properties"))?;
        Ok(KafkaSinkSettings {
            bootstrap,
            topic,
            timestamp,
            delivery,
            transactional_id_prefix,
            marker_topic,
            properties,
            partitioning: crate::job::SinkPartitioning::default(),
        })
    }

    /// The required `bootstrap` of the Kafka `kind` (`"source"` or `"sink"`) named `name`,
    /// after how messages name that vertex (`kafka sink "out"`), which both kinds go on to use.
    fn bootstrap(
        &self,
        kind: &'static str,
        name: &Spanned<String>,
        value: Option<&Spanned<String>>,
    ) -> Result<(String, String), JobError> {
        let owner = format!("kafka {kind} \"{}\"", name.get_ref());
        let Some(value) = value else {
            return Err(self.error(
                name.span(),
                Problem::MissingKey {
                    owner,
                    key: "bootstrap",
                    meaning: "the brokers to connect to first, e.g. bootstrap = \
                              \"kafka-1:9092,kafka-2:9092\"",
                },
            ));
        };
        let text = value.get_ref().trim();
        let well_formed = !text.is_empty()
            && text.split(',').all(|address| {
                let address = address.trim();
                address
                    .rsplit_once(':')
                    .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
            });
        if !well_formed {
            return Err(self.bad_value(
                value.span(),
                vertex_key("bootstrap", kind, name.get_ref()),
                format!("{:?}", value.get_ref()),
                "host:port, or several separated by commas (\"kafka-1:9092,kafka-2:9092\")",
            ));
        }
        Ok((owner, text.to_owned()))
    }

    /// A topic name; `key` says where it was written.
    fn topic(&self, value: &Spanned<String>, key: String) -> Result<String, JobError> {
        self.topic_at(value.get_ref(), value.span(), key)
    }

    /// A topic name written at `span`; `key` says where.
    fn topic_at(&self, name: &str, span: Range<usize>, key: String) -> Result<String, JobError> {
        if !is_topic_name(name) {
            return Err(self.bad_value(span, key, format!("{name:?}"), TOPIC_RULE));
        }
        Ok(name.to_owned())
    }

    /// A sink's `topic`: a topic name, or `{ from_key = "/", topics = [...] }`. The table's
    /// values have no positions of their own: every error names the line of `topic`.
    fn sink_topic(
        &self,
        value: &Spanned<toml::Value>,
        owner: &str,
        key: &dyn Fn(&str) -> String,
    ) -> Result<SinkTopic, JobError> {
        let span = value.span();
        let table = match value.get_ref() {
            toml::Value::String(name) => {
                return Ok(SinkTopic::Fixed(self.topic_at(name, span, key("topic"))?));
            }
            toml::Value::Table(table) => table,
            other => {
                return Err(self.bad_value(
                    span,
                    key("topic"),
                    other.to_string(),
                    format!(
                        "a topic name ({TOPIC_RULE}), or {FROM_KEY_EXAMPLE} to take it from \
                             each record's key"
                    ),
                ));
            }
        };
        if let Some(other) = table.keys().find(|k| *k != "from_key" && *k != "topics") {
            return Err(self.bad_value(
                span,
                key("topic"),
                format!("the key `{other}`"),
                format!("a table of `from_key` and `topics` only, e.g. {FROM_KEY_EXAMPLE}"),
            ));
        }
        let owner = format!("`topic` of {owner}");
        let separator = match table.get("from_key") {
            None => {
                return Err(self.error(
                    span,
                    Problem::MissingKey {
                        owner,
                        key: "from_key",
                        meaning: "what separates the topic from the key in each record's key, \
                                  e.g. from_key = \"/\" for keys such as \"orders-eu/k1\"",
                    },
                ));
            }
            Some(toml::Value::String(separator)) if !separator.is_empty() => separator.clone(),
            Some(other) => {
                return Err(self.bad_value(
                    span,
                    key("topic.from_key"),
                    other.to_string(),
                    "a non-empty string that separates the topic from the key in each \
                     record's key (e.g. \"/\")",
                ));
            }
        };
        let listed = match table.get("topics") {
            None => {
                return Err(self.error(
                    span,
                    Problem::MissingKey {
                        owner,
                        key: "topics",
                        meaning: "every topic a record's key may name, e.g. topics = \
                                  [\"orders-eu\", \"orders-us\"]; each must exist when the job \
                                  starts",
                    },
                ));
            }
            Some(toml::Value::Array(listed)) if !listed.is_empty() => listed,
            Some(other) => {
                return Err(self.bad_value(
                    span,
                    key("topic.topics"),
                    other.to_string(),
                    "a non-empty array of the topic names a record's key may name",
                ));
            }
        };
        let mut topics = Vec::new();
        for topic in listed {
            let toml::Value::String(name) = topic else {
                return Err(self.bad_value(
                    span,
                    key("topic.topics"),
                    topic.to_string(),
                    format!("topic names ({TOPIC_RULE})"),
                ));
            };
            let name = self.topic_at(name, span.clone(), key("topic.topics"))?;
            if name.contains(separator.as_str()) {
                return Err(self.bad_value(
                    span,
                    key("topic.topics"),
                    format!("{name:?}"),
                    format!(
                        "topic names without the separator {separator:?}: a record's key is \
                         split at its first {separator:?}, so no key could name this topic \
                         (choose another `from_key`)"
                    ),
                ));
            }
            if !topics.contains(&name) {
                topics.push(name);
            }
        }
        Ok(SinkTopic::FromKey { separator, topics })
    }

    /// `key`, `value` or `timestamp` (`part`): the word naming the Kafka record's own part,
    /// or `{ header = "NAME" }`; absent = the record's own part.
    fn kafka_field(
        &self,
        field: Option<&Spanned<toml::Value>>,
        part: &'static str,
        key: String,
    ) -> Result<KafkaField, JobError> {
        let Some(field) = field else {
            return Ok(KafkaField::Record);
        };
        let header_holds = if part == "timestamp" {
            "header NAME's value, decimal milliseconds such as \"1700000000000\""
        } else {
            "the value of the record's header NAME"
        };
        let expected = format!(
            "\"{part}\" (the Kafka record's {part}, the default) or {{ header = \"NAME\" }} \
             ({header_holds})"
        );
        match field.get_ref() {
            toml::Value::String(word) if word == part => Ok(KafkaField::Record),
            toml::Value::String(word) => {
                Err(self.bad_value(field.span(), key, format!("{word:?}"), expected))
            }
            toml::Value::Table(table) => {
                let mut entries = table.iter();
                match (entries.next(), entries.next()) {
                    (Some((k, toml::Value::String(name))), None) if k == "header" => {
                        if name.is_empty() {
                            return Err(self.bad_value(
                                field.span(),
                                key,
                                "{ header = \"\" }".into(),
                                "a header name of at least one character, such as \
                                 { header = \"trace-id\" }",
                            ));
                        }
                        Ok(KafkaField::Header(name.clone()))
                    }
                    _ => Err(self.bad_value(
                        field.span(),
                        key,
                        field.get_ref().to_string(),
                        expected,
                    )),
                }
            }
            other => Err(self.bad_value(field.span(), key, other.to_string(), expected)),
        }
    }

    /// `start`: a word, or `{ timestamp = MS }` / `{ timestamp = 2026-12-01T00:00:00Z }`.
    fn kafka_start(
        &self,
        start: &Spanned<toml::Value>,
        key: String,
    ) -> Result<KafkaStart, JobError> {
        let expected = "\"earliest\", \"latest\", \"committed\", or { timestamp = MS } with \
                        milliseconds since the Unix epoch or an offset date-time such as \
                        2026-12-01T00:00:00Z";
        let bad = |found: String| self.bad_value(start.span(), key.clone(), found, expected);
        match start.get_ref() {
            toml::Value::String(word) => match word.as_str() {
                "earliest" => Ok(KafkaStart::Earliest),
                "latest" => Ok(KafkaStart::Latest),
                "committed" => Ok(KafkaStart::Committed),
                other => Err(bad(format!("{other:?}"))),
            },
            toml::Value::Table(table) => {
                let mut entries = table.iter();
                match (entries.next(), entries.next()) {
                    (Some((k, toml::Value::Integer(ms))), None) if k == "timestamp" && *ms >= 0 => {
                        Ok(KafkaStart::Timestamp(*ms))
                    }
                    (Some((k, toml::Value::Datetime(datetime))), None) if k == "timestamp" => {
                        datetime_millis(datetime)
                            .map(KafkaStart::Timestamp)
                            .ok_or_else(|| bad(datetime.to_string()))
                    }
                    _ => Err(bad(start.get_ref().to_string())),
                }
            }
            other => Err(bad(other.to_string())),
        }
    }

    /// The `properties` table: strings, numbers and booleans, each accepted by librdkafka and
    /// none that Weir sets itself.
    fn kafka_properties(
        &self,
        table: Option<&Spanned<toml::Table>>,
        key: &str,
    ) -> Result<Vec<(String, String)>, JobError> {
        let Some(table) = table else {
            return Ok(Vec::new());
        };
        let span = table.span();
        let mut properties = Vec::new();
        for (name, value) in table.get_ref() {
            let property_key = format!("{key}: `{name}`");
            let text = match value {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(self.bad_value(
                        span.clone(),
                        property_key,
                        other.to_string(),
                        "a string, number or boolean (librdkafka takes every setting as text)",
                    ));
                }
            };
            if let Some((_, instead)) = OWNED_PROPERTIES.iter().find(|(owned, _)| owned == name) {
                return Err(self.error(
                    span.clone(),
                    Problem::KafkaProperty {
                        key: property_key,
                        reason: format!("Weir sets it itself: {instead}"),
                    },
                ));
            }
            let mut config = ClientConfig::new();
            config.set(name, &text);
            if let Err(error) = config.create_native_config() {
                return Err(self.error(
                    span.clone(),
                    Problem::KafkaProperty {
                        key: property_key,
                        reason: format!(
                            "librdkafka refuses it ({}); see librdkafka's CONFIGURATION.md \
                             for the settings and their values",
                            librdkafka_reason(&error)
                        ),
                    },
                ));
            }
            properties.push((name.clone(), text));
        }
        Ok(properties)
    }
}

/// What librdkafka said about a refused setting, without rdkafka's wrapping.
fn librdkafka_reason(error: &rdkafka::error::KafkaError) -> String {
    match error {
        rdkafka::error::KafkaError::ClientConfig(_, description, _, _) => description.clone(),
        other => other.to_string(),
    }
}

/// Milliseconds since the Unix epoch of a TOML offset date-time; `None` for a local one (no
/// offset: which instant it means is unknown) or one before 1970.
fn datetime_millis(datetime: &toml::value::Datetime) -> Option<i64> {
    let date = datetime.date?;
    let time = datetime.time?;
    let offset_minutes = match datetime.offset? {
        toml::value::Offset::Z => 0,
        toml::value::Offset::Custom { minutes } => i64::from(minutes),
    };
    let days = days_from_civil(
        i64::from(date.year),
        i64::from(date.month),
        i64::from(date.day),
    );
    let seconds = days * 86_400
        + i64::from(time.hour) * 3600
        + i64::from(time.minute) * 60
        + i64::from(time.second.unwrap_or(0))
        - offset_minutes * 60;
    let millis = seconds * 1000 + i64::from(time.nanosecond.unwrap_or(0) / 1_000_000);
    (millis >= 0).then_some(millis)
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{Job, SinkKind, SourceKind, VertexKind};

    /// kafka → kafka, checkpoints on; `source` and `sink` are extra lines of each table.
    fn kafka_job(source: &str, sink: &str) -> String {
        format!(
            "name = \"j\"\n[checkpoint]\ninterval = \"1s\"\n\
             [[source]]\nname = \"in\"\ntype = \"kafka\"\n{source}\n\
             [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"in\"]\n{sink}\n"
        )
    }

    const SOURCE: &str = "bootstrap = \"k:9092\"\ntopics = [\"words\"]";
    const SINK: &str = "bootstrap = \"k:9092\"\ntopic = \"counts\"";

    fn parse(text: &str) -> Result<Job, JobError> {
        Job::from_str(text, "/jobs", "test.toml")
    }

    /// The message of the error `text` makes.
    #[track_caller]
    fn refused(text: &str) -> String {
        match parse(text) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("expected {text} to be refused"),
        }
    }

    #[test]
    fn a_kafka_job_takes_the_documented_defaults_and_writes_back_the_same() {
        let job = parse(&kafka_job(SOURCE, SINK)).unwrap();
        let VertexKind::Source(SourceKind::Kafka(source)) = &job.vertex("in").unwrap().kind else {
            panic!("not a kafka source");
        };
        assert_eq!(source.topics, TopicSelection::Names(vec!["words".into()]));
        assert_eq!(source.start, KafkaStart::Earliest);
        assert_eq!(source.until, KafkaUntil::Never);
        assert_eq!(source.isolation, Isolation::ReadCommitted);
        assert_eq!(source.group, "weir.j.in");
        assert_eq!(source.discovery_interval, Some(DEFAULT_DISCOVERY_INTERVAL));
        let VertexKind::Sink(SinkKind::Kafka(sink)) = &job.vertex("out").unwrap().kind else {
            panic!("not a kafka sink");
        };
        assert_eq!(sink.delivery, Delivery::ExactlyOnce);
        assert_eq!(sink.transactional_id_prefix, "weir.j.out");
        assert_eq!(sink.marker_topic, "weir.j.out.markers");
        let kinds = |job: &Job| {
            job.vertices
                .iter()
                .map(|v| v.kind.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds(&parse(&job.to_toml()).unwrap()), kinds(&job));
    }

    #[test]
    fn every_kafka_key_is_read() {
        let source = "bootstrap = \"a:1, b:2\"\ntopic_pattern = \"orders-*\"\n\
                      start = { timestamp = 2026-12-01T00:00:00Z }\nuntil = \"end\"\n\
                      isolation = \"read_uncommitted\"\ngroup = \"g\"\n\
                      discovery_interval = \"off\"\n\
                      properties = { \"fetch.max.bytes\" = 1048576, \"client.rack\" = \"r1\" }";
        let sink = "bootstrap = \"k:9092\"\ntopic = \"counts\"\n\
                    transactional_id_prefix = \"p\"\nmarker_topic = \"m\"\n\
                    properties = { \"linger.ms\" = 20 }";
        let job = parse(&kafka_job(source, sink)).unwrap();
        let VertexKind::Source(SourceKind::Kafka(s)) = &job.vertex("in").unwrap().kind else {
            panic!("not a kafka source");
        };
        assert_eq!(s.bootstrap, "a:1, b:2");
        assert_eq!(s.topics, TopicSelection::Pattern("orders-*".into()));
        assert_eq!(s.start, KafkaStart::Timestamp(20_788 * 86_400_000));
        assert_eq!(s.until, KafkaUntil::End);
        assert_eq!(s.isolation, Isolation::ReadUncommitted);
        assert_eq!(s.group, "g");
        assert_eq!(s.discovery_interval, None);
        assert_eq!(
            s.properties,
            vec![
                ("client.rack".to_owned(), "r1".to_owned()),
                ("fetch.max.bytes".to_owned(), "1048576".to_owned())
            ]
        );
        let VertexKind::Sink(SinkKind::Kafka(k)) = &job.vertex("out").unwrap().kind else {
            panic!("not a kafka sink");
        };
        assert_eq!(
            (k.transactional_id_prefix.as_str(), k.marker_topic.as_str()),
            ("p", "m")
        );
        let kinds = |job: &Job| {
            job.vertices
                .iter()
                .map(|v| v.kind.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds(&parse(&job.to_toml()).unwrap()), kinds(&job));
        let at_least_once = kafka_job(SOURCE, &format!("{SINK}\ndelivery = \"at-least-once\""));
        let job = parse(&at_least_once.replace("interval = \"1s\"", "interval = \"off\"")).unwrap();
        let VertexKind::Sink(SinkKind::Kafka(k)) = &job.vertex("out").unwrap().kind else {
            panic!("not a kafka sink");
        };
        assert_eq!(k.delivery, Delivery::AtLeastOnce);
    }

    #[test]
    fn bad_kafka_settings_are_refused_with_the_line_and_the_fix() {
        let cases: &[(String, &str)] = &[
            (kafka_job("topics = [\"w\"]", SINK), "needs `bootstrap`"),
            (
                kafka_job("bootstrap = \"k\"\ntopics = [\"w\"]", SINK),
                "host:port, or several separated by commas",
            ),
            (
                kafka_job("bootstrap = \"k:1\"", SINK),
                "needs `topics`: the topics to read",
            ),
            (
                kafka_job(&format!("{SOURCE}\ntopic_pattern = \"w*\""), SINK),
                "name the topics, or give a pattern, not both",
            ),
            (
                kafka_job("bootstrap = \"k:1\"\ntopics = [\"a b\"]", SINK),
                "1 to 249 ASCII letters",
            ),
            (
                kafka_job(&format!("{SOURCE}\nstart = \"beginning\""), SINK),
                "\"earliest\", \"latest\", \"committed\", or { timestamp = MS }",
            ),
            (
                kafka_job(&format!("{SOURCE}\nuntil = \"forever\""), SINK),
                "`until` of source \"in\": expected \"never\"",
            ),
            (
                kafka_job(&format!("{SOURCE}\npath = \"x\""), SINK),
                "`path` does not apply to kafka source \"in\"",
            ),
            (
                kafka_job(
                    &format!("{SOURCE}\nproperties = {{ \"no.such\" = 1 }}"),
                    SINK,
                ),
                "`no.such`: librdkafka refuses it (No such configuration property: \"no.such\")",
            ),
            (
                kafka_job(
                    &format!("{SOURCE}\nproperties = {{ \"group.id\" = \"g\" }}"),
                    SINK,
                ),
                "`group.id`: Weir sets it itself: set the source's `group` instead",
            ),
            (
                kafka_job(
                    SOURCE,
                    &format!("{SINK}\nproperties = {{ \"acks\" = [1] }}"),
                ),
                "a string, number or boolean",
            ),
            (
                kafka_job(SOURCE, "bootstrap = \"k:1\""),
                "needs `topic`: the topic to write",
            ),
            (
                kafka_job(SOURCE, &format!("{SINK}\ndelivery = \"twice\"")),
                "\"exactly-once\", \"at-least-once\" or \"none\"",
            ),
            (
                kafka_job(
                    SOURCE,
                    &format!("{SINK}\ndelivery = \"none\"\nmarker_topic = \"m\""),
                ),
                "only an exactly-once sink uses transactions",
            ),
            (
                kafka_job(SOURCE, SINK).replace("interval = \"1s\"", "interval = \"off\""),
                "kafka sink \"out\" has `delivery = \"exactly-once\"`, but it commits its output \
                 when a checkpoint completes, and checkpoints are off",
            ),
            (
                kafka_job(SOURCE, SINK).replace(
                    "interval = \"1s\"",
                    "interval = \"1s\"\nmode = \"at-least-once\"",
                ),
                "lets the job process a record twice after a restore",
            ),
        ];
        for (text, expected) in cases {
            let message = refused(text);
            assert!(
                message.contains(expected),
                "for\n{text}\nexpected a message with {expected:?}, got {message:?}"
            );
            assert!(message.starts_with("test.toml:"), "no line in {message:?}");
        }
    }

    /// The kafka source of `text`.
    #[track_caller]
    fn kafka_source(text: &str) -> KafkaSourceSettings {
        let job = parse(text).unwrap();
        let VertexKind::Source(SourceKind::Kafka(source)) = &job.vertex("in").unwrap().kind else {
            panic!("not a kafka source");
        };
        // What the graph writes back reads as the same settings.
        let again = parse(&job.to_toml()).unwrap();
        assert_eq!(
            again.vertex("in").unwrap().kind,
            job.vertex("in").unwrap().kind
        );
        source.clone()
    }

    #[test]
    fn kafka_parts_default_to_the_records_own_and_may_come_from_headers() {
        let defaults = kafka_source(&kafka_job(SOURCE, SINK));
        assert_eq!(
            (&defaults.key, &defaults.value, &defaults.timestamp),
            (
                &KafkaField::Record,
                &KafkaField::Record,
                &KafkaField::Record
            )
        );
        assert_eq!(defaults.on_error, OnError::Fail);
        assert!(!defaults.maps_headers());
        let spelled_out = kafka_source(&kafka_job(
            &format!("{SOURCE}\nkey = \"key\"\nvalue = \"value\"\ntimestamp = \"timestamp\""),
            SINK,
        ));
        assert_eq!(spelled_out, defaults);
        let mapped = kafka_source(&kafka_job(
            &format!(
                "{SOURCE}\nkey = {{ header = \"user\" }}\ntimestamp = {{ header = \"sent-at\" }}\n\
                 on_error = \"skip\""
            ),
            SINK,
        ));
        assert_eq!(mapped.key, KafkaField::Header("user".into()));
        assert_eq!(mapped.value, KafkaField::Record);
        assert_eq!(mapped.timestamp, KafkaField::Header("sent-at".into()));
        assert_eq!(mapped.on_error, OnError::Skip);
        let by_value = kafka_source(&kafka_job(
            &format!("{SOURCE}\nvalue = {{ header = \"body\" }}\non_error = \"fail\""),
            SINK,
        ));
        assert_eq!(
            (&by_value.value, by_value.on_error),
            (&KafkaField::Header("body".into()), OnError::Fail)
        );
    }

    #[test]
    fn bad_kafka_parts_are_refused_with_the_line_and_the_accepted_forms() {
        let cases: &[(&str, &str)] = &[
            (
                "key = \"value\"",
                "test.toml:9:7: `key` of source \"in\": expected \"key\" (the Kafka record's \
                 key, the default) or { header = \"NAME\" } (the value of the record's header \
                 NAME), found \"value\"",
            ),
            (
                "value = 3",
                "test.toml:9:9: `value` of source \"in\": expected \"value\" (the Kafka \
                 record's value, the default) or { header = \"NAME\" } (the value of the \
                 record's header NAME), found 3",
            ),
            (
                "timestamp = { column = 2 }",
                "test.toml:9:13: `timestamp` of source \"in\": expected \"timestamp\" (the \
                 Kafka record's timestamp, the default) or { header = \"NAME\" } (header \
                 NAME's value, decimal milliseconds such as \"1700000000000\"), found \
                 { column = 2 }",
            ),
            (
                "key = { header = \"a\", also = \"b\" }",
                "test.toml:9:7: `key` of source \"in\": expected \"key\" (the Kafka record's \
                 key, the default) or { header = \"NAME\" } (the value of the record's header \
                 NAME), found { also = \"b\", header = \"a\" }",
            ),
            (
                "key = { header = 1 }",
                "test.toml:9:7: `key` of source \"in\": expected \"key\" (the Kafka record's \
                 key, the default) or { header = \"NAME\" } (the value of the record's header \
                 NAME), found { header = 1 }",
            ),
            (
                "key = { header = \"\" }",
                "test.toml:9:7: `key` of source \"in\": expected a header name of at least one \
                 character, such as { header = \"trace-id\" }, found { header = \"\" }",
            ),
            (
                "on_error = \"skip\"",
                "test.toml:9:12: `on_error` of source \"in\" does not apply with `key`, \
                 `value` and `timestamp` read from the Kafka record itself: every Kafka record \
                 has a key, a value and a timestamp, so none can fail; `on_error` applies to a \
                 record that lacks a header the source maps (`key = { header = \"NAME\" }`, \
                 or `value`, or `timestamp`): map one, or remove `on_error`",
            ),
            (
                "key = { header = \"u\" }\non_error = \"ignore\"",
                "test.toml:10:12: `on_error` of source \"in\": expected \"fail\" (a record \
                 without a mapped header fails the task) or \"skip\" (it is dropped, counted \
                 and logged), found \"ignore\"",
            ),
        ];
        for (lines, expected) in cases {
            let message = refused(&kafka_job(&format!("{SOURCE}\n{lines}"), SINK));
            assert_eq!(&message, expected, "for {lines:?}");
        }
    }

    /// The settings of the job's kafka sink `out`.
    fn sink_of(job: &Job) -> &KafkaSinkSettings {
        let VertexKind::Sink(SinkKind::Kafka(sink)) = &job.vertex("out").unwrap().kind else {
            panic!("not a kafka sink");
        };
        sink
    }

    /// `job` written back and read again has the same vertices.
    #[track_caller]
    fn assert_written_back_the_same(job: &Job) {
        let written = job.to_toml();
        let reread = parse(&written).unwrap_or_else(|e| panic!("{e}\n{written}"));
        assert_eq!(sink_of(&reread), sink_of(job), "{written}");
        assert_eq!(reread.to_toml(), written, "writing is deterministic");
    }

    #[test]
    fn a_sink_takes_its_topic_by_name_or_from_the_key_and_writes_back_the_same() {
        let job = parse(&kafka_job(SOURCE, SINK)).unwrap();
        assert_eq!(sink_of(&job).topic, SinkTopic::Fixed("counts".into()));
        assert_written_back_the_same(&job);
        let from_key = "bootstrap = \"k:9092\"\n\
                        topic = { from_key = \"::\", topics = [\"eu\", \"us\", \"eu\"] }";
        let job = parse(&kafka_job(SOURCE, from_key)).unwrap();
        assert_eq!(
            sink_of(&job).topic,
            SinkTopic::FromKey {
                separator: "::".into(),
                topics: vec!["eu".into(), "us".into()],
            }
        );
        assert!(
            job.to_toml().contains("from_key = \"::\""),
            "{}",
            job.to_toml()
        );
        assert_written_back_the_same(&job);
        // The table as a table of its own, not inline.
        let sub_table = kafka_job(SOURCE, "bootstrap = \"k:9092\"")
            + "[sink.topic]\nfrom_key = \"/\"\ntopics = [\"eu\"]\n";
        let job = parse(&sub_table).unwrap();
        assert_eq!(
            sink_of(&job).topic,
            SinkTopic::FromKey {
                separator: "/".into(),
                topics: vec!["eu".into()],
            }
        );
        assert_written_back_the_same(&job);
    }

    #[test]
    fn a_sink_timestamp_is_the_records_by_default_or_now() {
        let job = parse(&kafka_job(SOURCE, SINK)).unwrap();
        assert_eq!(sink_of(&job).timestamp, SinkTimestamp::Record);
        assert!(job.to_toml().contains("timestamp = \"record\""));
        for (word, timestamp) in [
            ("record", SinkTimestamp::Record),
            ("now", SinkTimestamp::Now),
        ] {
            let text = kafka_job(SOURCE, &format!("{SINK}\ntimestamp = \"{word}\""));
            let job = parse(&text).unwrap();
            assert_eq!(sink_of(&job).timestamp, timestamp);
            assert_written_back_the_same(&job);
        }
    }

    #[test]
    fn a_bad_sink_topic_is_refused_with_its_line_and_the_fix() {
        let bootstrap = "bootstrap = \"k:9092\"";
        // Line 14 is the sink's second line, after `bootstrap`; `topic = ` is 8 characters.
        let topic = |value: &str| kafka_job(SOURCE, &format!("{bootstrap}\ntopic = {value}"));
        let cases: &[(String, &str)] = &[
            (
                topic("3"),
                "test.toml:14:9: `topic` of sink \"out\": expected a topic name (1 to 249 ASCII \
                 letters, digits, '.', '_' or '-', and not \".\" or \"..\"), or { from_key = \
                 \"/\", topics = [\"orders-eu\", \"orders-us\"] } to take it from each \
                 record's key, found 3",
            ),
            (
                topic("\"a b\""),
                "test.toml:14:9: `topic` of sink \"out\": expected 1 to 249 ASCII letters, \
                 digits, '.', '_' or '-', and not \".\" or \"..\", found \"a b\"",
            ),
            (
                topic("{ from = \"/\", topics = [\"eu\"] }"),
                "test.toml:14:9: `topic` of sink \"out\": expected a table of `from_key` and \
                 `topics` only, e.g. { from_key = \"/\", topics = [\"orders-eu\", \
                 \"orders-us\"] }, found the key `from`",
            ),
            (
                topic("{ topics = [\"eu\"] }"),
                "test.toml:14:9: `topic` of kafka sink \"out\" needs `from_key`: what separates \
                 the topic from the key in each record's key, e.g. from_key = \"/\" for keys \
                 such as \"orders-eu/k1\"",
            ),
            (
                topic("{ from_key = \"\", topics = [\"eu\"] }"),
                "test.toml:14:9: `topic.from_key` of sink \"out\": expected a non-empty string \
                 that separates the topic from the key in each record's key (e.g. \"/\"), \
                 found \"\"",
            ),
            (
                topic("{ from_key = \"/\" }"),
                "test.toml:14:9: `topic` of kafka sink \"out\" needs `topics`: every topic a \
                 record's key may name, e.g. topics = [\"orders-eu\", \"orders-us\"]; each \
                 must exist when the job starts",
            ),
            (
                topic("{ from_key = \"/\", topics = [] }"),
                "test.toml:14:9: `topic.topics` of sink \"out\": expected a non-empty array of \
                 the topic names a record's key may name, found []",
            ),
            (
                topic("{ from_key = \"/\", topics = [\"eu\", 1] }"),
                "test.toml:14:9: `topic.topics` of sink \"out\": expected topic names (1 to 249 \
                 ASCII letters, digits, '.', '_' or '-', and not \".\" or \"..\"), found 1",
            ),
            (
                topic("{ from_key = \"/\", topics = [\"e u\"] }"),
                "test.toml:14:9: `topic.topics` of sink \"out\": expected 1 to 249 ASCII \
                 letters, digits, '.', '_' or '-', and not \".\" or \"..\", found \"e u\"",
            ),
            (
                topic("{ from_key = \".\", topics = [\"orders.eu\"] }"),
                "test.toml:14:9: `topic.topics` of sink \"out\": expected topic names without \
                 the separator \".\": a record's key is split at its first \".\", so no key \
                 could name this topic (choose another `from_key`), found \"orders.eu\"",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(&refused(text), expected, "for\n{text}");
        }
    }

    #[test]
    fn a_bad_sink_timestamp_is_refused_with_its_line_and_the_words() {
        let cases: &[(String, &str)] = &[
            (
                kafka_job(SOURCE, &format!("{SINK}\ntimestamp = \"create\"")),
                "test.toml:15:13: `timestamp` of sink \"out\": expected \"record\" (the \
                 record's timestamp, which must be milliseconds since the epoch) or \"now\" \
                 (the time the record is sent), found \"create\"",
            ),
            (
                "name = \"j\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
                 [[sink]]\nname = \"out\"\ntype = \"file\"\npath = \"o\"\n\
                 inputs = [\"in\"]\ntimestamp = \"now\"\n"
                    .to_owned(),
                "test.toml:10:13: `timestamp` does not apply to file sink \"out\": its keys are \
                 name, type, parallelism, inputs, path",
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(&refused(text), expected, "for\n{text}");
        }
    }

    #[test]
    fn dates_count_days_from_the_epoch() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2026, 12, 1), 20_788);
        let datetime: toml::value::Datetime = "2026-12-01T00:00:00.250+01:00".parse().unwrap();
        assert_eq!(
            datetime_millis(&datetime),
            Some(20_788 * 86_400_000 - 3_600_000 + 250)
        );
        let local: toml::value::Datetime = "2026-12-01T00:00:00".parse().unwrap();
        assert_eq!(datetime_millis(&local), None);
    }

    #[test]
    fn topic_names_follow_kafkas_rule() {
        assert!(is_topic_name("orders.eu-1_x"));
        assert!(!is_topic_name(""));
        assert!(!is_topic_name("."));
        assert!(!is_topic_name(".."));
        assert!(!is_topic_name("a b"));
        assert!(!is_topic_name(&"a".repeat(250)));
    }
}
