//! The keys of a Kafka source or sink, written back from its settings: the Kafka part of
//! [`Job::to_spec`](crate::job::Job::to_spec).
//!
//! A file of its own so that a connector's job-file keys are written in one place, as its
//! rules are read in `validate/kafka.rs`; `print.rs` only hands it the source's or sink's
//! spec.

use toml::Spanned;

use super::unspanned;
use crate::job::kafka::{
    KafkaField, KafkaSinkSettings, KafkaSourceSettings, KafkaStart, KafkaUntil, SinkTopic,
    TopicSelection,
};
use crate::job::spec::{SinkSpec, SourceSpec};
use crate::job::units::format_duration;

/// Writes the keys of a Kafka source.
pub(super) fn source_spec(source: &mut SourceSpec, kafka: &KafkaSourceSettings) {
    source.kind = Some(unspanned("kafka".into()));
    source.bootstrap = Some(unspanned(kafka.bootstrap.clone()));
    match &kafka.topics {
        TopicSelection::Names(names) => {
            source.topics = Some(unspanned(names.iter().cloned().map(unspanned).collect()));
        }
        TopicSelection::Pattern(pattern) => {
            source.topic_pattern = Some(unspanned(pattern.clone()));
        }
    }
    source.start = Some(unspanned(match kafka.start {
        KafkaStart::Earliest => toml::Value::String("earliest".into()),
        KafkaStart::Latest => toml::Value::String("latest".into()),
        KafkaStart::Committed => toml::Value::String("committed".into()),
        KafkaStart::Timestamp(ms) => {
            toml::Value::Table(toml::Table::from_iter([("timestamp".into(), ms.into())]))
        }
    }));
    source.until = Some(unspanned(
        match kafka.until {
            KafkaUntil::Never => "never",
            KafkaUntil::End => "end",
        }
        .into(),
    ));
    source.isolation = Some(unspanned(kafka.isolation.as_str().into()));
    source.group = Some(unspanned(kafka.group.clone()));
    source.discovery_interval = Some(unspanned(
        kafka
            .discovery_interval
            .map_or_else(|| "off".to_owned(), format_duration),
    ));
    source.properties = properties_spec(&kafka.properties);
    let field = |field: &KafkaField, part: &str| {
        unspanned(match field {
            KafkaField::Record => toml::Value::String(part.into()),
            KafkaField::Header(name) => toml::Value::Table(toml::Table::from_iter([(
                "header".into(),
                toml::Value::String(name.clone()),
            )])),
        })
    };
    source.key = Some(field(&kafka.key, "key"));
    source.value = Some(field(&kafka.value, "value"));
    source.timestamp = Some(field(&kafka.timestamp, "timestamp"));
    // Refused without a header to apply to, so written only with one.
    if kafka.maps_headers() {
        source.on_error = Some(unspanned(kafka.on_error.as_str().into()));
    }
}

/// The `topic` of a Kafka sink: a name, or the `{ from_key, topics }` table.
fn sink_topic_spec(topic: &SinkTopic) -> toml::Value {
    match topic {
        SinkTopic::Fixed(name) => toml::Value::String(name.clone()),
        SinkTopic::FromKey { separator, topics } => toml::Value::Table(toml::Table::from_iter([
            (
                "from_key".to_owned(),
                toml::Value::String(separator.clone()),
            ),
            (
                "topics".to_owned(),
                toml::Value::Array(topics.iter().cloned().map(toml::Value::String).collect()),
            ),
        ])),
    }
}

/// The `properties` table of a Kafka connector; absent when empty.
fn properties_spec(properties: &[(String, String)]) -> Option<Spanned<toml::Table>> {
    (!properties.is_empty()).then(|| {
        unspanned(
            properties
                .iter()
                .map(|(k, v)| (k.clone(), toml::Value::String(v.clone())))
                .collect(),
        )
    })
}

/// Writes the keys of a Kafka sink (its `type` aside).
pub(super) fn sink_spec(sink: &mut SinkSpec, kafka: &KafkaSinkSettings) {
    sink.bootstrap = Some(unspanned(kafka.bootstrap.clone()));
    sink.topic = Some(unspanned(sink_topic_spec(&kafka.topic)));
    sink.timestamp = Some(unspanned(kafka.timestamp.as_str().into()));
    sink.delivery = Some(unspanned(kafka.delivery.as_str().into()));
    sink.transactional_id_prefix = Some(unspanned(kafka.transactional_id_prefix.clone()));
    sink.marker_topic = Some(unspanned(kafka.marker_topic.clone()));
    sink.properties = properties_spec(&kafka.properties);
}
