//! Why a Kafka source or sink task stops: [`KafkaFailure`], the Kafka connector's own errors.
//!
//! A file of its own so that the connector's failures, and librdkafka's error type inside
//! them, stay in the connector's folder: the task loop carries one as a
//! [`TaskError::Connector`](crate::dataflow::error::TaskError::Connector) without naming Kafka.

use crate::dataflow::error::ConnectorFailure;

/// Why a Kafka connector's task stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KafkaFailure {
    /// A Kafka connector's request failed: the broker refused it, or did not answer in time.
    #[error("{connector}: {what}: {source}")]
    Request {
        /// `kafka source "in"`.
        connector: String,
        /// What it was doing, and what librdkafka last reported on its own.
        what: String,
        /// librdkafka's error.
        source: Box<rdkafka::error::KafkaError>,
    },
    /// A record read by a Kafka source lacks a header its `key`, `value` or `timestamp` names,
    /// or its timestamp header is not an integer, and its `on_error` is `fail`.
    #[error(
        "{connector}: the record at offset {offset} of {topic}/{partition} has {problem} (fix \
         the producer, or set `on_error = \"skip\"` on the source to drop such records)"
    )]
    UnmappedRecord {
        /// `kafka source "in"`.
        connector: String,
        /// The record's topic.
        topic: String,
        /// Its partition.
        partition: i32,
        /// Its offset.
        offset: i64,
        /// What is wrong, naming the header and the part it maps (`no header "user" for its
        /// key`).
        problem: String,
    },
    /// A record is larger than a Kafka sink may send.
    #[error(
        "{connector}: a record of {size} bytes (key and value) does not fit in the limit of \
         {limit} bytes (less about 100 bytes of framing), {limit_source}: make the operator emit \
         smaller records, or raise the limit"
    )]
    RecordTooLarge {
        /// `kafka sink "out"`.
        connector: String,
        /// The record's key and value, in bytes.
        size: usize,
        /// The limit, in bytes.
        limit: usize,
        /// Where the limit comes from.
        limit_source: String,
    },
    /// A record's key names no topic a Kafka sink with `topic = { from_key … }` may write to:
    /// it lacks the separator, or the text before it is none of the sink's `topics`.
    #[error(
        "{connector}: the record key {key} {problem}; the sink takes each record's topic from \
         its key (`topic = {{ from_key = {separator:?}, topics = [{topics}] }}`), so a key must \
         be <topic>{separator}<key> with one of those topics: make the operator emit such keys, \
         or add the topic to `topics` (it must exist when the job starts)"
    )]
    RecordTopic {
        /// `kafka sink "out"`.
        connector: String,
        /// The record's key, quoted (lossy UTF-8, its first 100 characters).
        key: String,
        /// What is wrong with it: `has no "/"`, `names topic "x", which is not in `topics``.
        problem: String,
        /// The sink's `from_key`.
        separator: String,
        /// The sink's `topics`, quoted and separated by commas.
        topics: String,
    },
}

impl ConnectorFailure for KafkaFailure {
    fn connector(&self) -> &'static str {
        "kafka"
    }

    /// A request the brokers refused or did not answer is the cluster's failure, not the
    /// restored state's: a restore that meets one does not refuse the checkpoint.
    fn is_external(&self) -> bool {
        matches!(self, KafkaFailure::Request { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataflow::error::TaskError;

    #[test]
    fn a_broker_that_does_not_answer_during_a_restore_is_no_refusal_of_the_checkpoint() {
        let request = TaskError::from(KafkaFailure::Request {
            connector: "kafka sink \"out\"".into(),
            what: "cannot read the markers".into(),
            source: Box::new(rdkafka::error::KafkaError::MessageConsumption(
                rdkafka::types::RDKafkaErrorCode::BrokerTransportFailure,
            )),
        });
        assert!(
            request.to_string().starts_with(
                "kafka sink \"out\": cannot read the markers: Message consumption error"
            )
        );
        assert!(!request.while_restoring().is_restoring());
        // A record it cannot write is no broker's fault.
        let too_large = TaskError::from(KafkaFailure::RecordTooLarge {
            connector: "kafka sink \"out\"".into(),
            size: 2_000_000,
            limit: 1_000_000,
            limit_source: "the sink's `message.max.bytes`".into(),
        });
        assert!(too_large.while_restoring().is_restoring());
    }
}
