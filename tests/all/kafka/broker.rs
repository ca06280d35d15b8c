//! The Kafka test broker (`mod.rs`) does what the Kafka connectors' tests rely on: records in
//! and out of every partition, transactions that stay invisible to read_committed until they
//! commit, a read that starts after a producer's abort marker still seeing its later commits,
//! fencing by `transactional.id`, offsets committed with a transaction, a broker that can be
//! stopped and started again, and a cluster that keeps acknowledged writes through a node's
//! death. Each test skips, loudly, when there is no broker (and fails under `CI=true`).

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::TopicPartitionList;
use rdkafka::consumer::Consumer;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};

use crate::kafka::{
    self, CLIENT_TIMEOUT, Deliveries, Isolation, KafkaRecord, broker_or_skip, own_broker_or_skip,
};

/// Sends `value` to `topic` [`partition`] (no key) and waits for its delivery: the record is on
/// the broker, inside the producer's open transaction.
fn send_flushed(producer: &BaseProducer<Deliveries>, topic: &str, partition: i32, value: &[u8]) {
    producer
        .send(
            BaseRecord::<(), [u8]>::to(topic)
                .partition(partition)
                .payload(value),
        )
        .unwrap_or_else(|(e, _)| panic!("cannot send to {topic}: {e}"));
    producer
        .flush(CLIENT_TIMEOUT)
        .unwrap_or_else(|e| panic!("flush: {e}"));
    let failed = producer.context().take_failures();
    assert!(failed.is_empty(), "not delivered: {failed:?}");
}

/// The values of `records`, in their order.
fn values(records: &[KafkaRecord]) -> Vec<&[u8]> {
    records.iter().map(|r| r.value.as_slice()).collect()
}

#[test]
fn kafka_broker_round_trips_records_through_four_partitions() {
    let Some(broker) = broker_or_skip("kafka_broker_round_trips_records_through_four_partitions")
    else {
        return;
    };
    let topic = kafka::unique("round-trip");
    broker.create_topic(&topic, 4);
    assert_eq!(broker.partitions(&topic), 4);
    let mut records = Vec::new();
    for i in 0..20u8 {
        records.push((Some(i32::from(i % 4)), Some(vec![b'k', i]), vec![b'v', i]));
    }
    let produce: Vec<kafka::Produce<'_>> = records
        .iter()
        .map(|(p, k, v)| (*p, k.as_deref(), v.as_slice()))
        .collect();
    broker.produce(&topic, &produce);
    // Without a partition or a key: wherever the partitioner puts it.
    broker.produce(&topic, &[(None, None, b"anywhere")]);

    let read = broker.read_all(&topic, Isolation::ReadUncommitted);
    assert_eq!(read.len(), 21, "{read:?}");
    assert_eq!(read, broker.read_all(&topic, Isolation::ReadCommitted));
    for partition in 0..4 {
        let mine: Vec<&KafkaRecord> = read
            .iter()
            .filter(|r| r.partition == partition && r.key.is_some())
            .collect();
        assert_eq!(mine.len(), 5, "partition {partition}: {read:?}");
        for (n, record) in mine.iter().enumerate() {
            let i = u8::try_from(partition).unwrap() + 4 * u8::try_from(n).unwrap();
            assert_eq!(record.offset, i64::try_from(n).unwrap());
            assert_eq!(record.key.as_deref(), Some(&[b'k', i][..]));
            assert_eq!(record.value, [b'v', i]);
            assert!(record.timestamp.is_some_and(|t| t > 0), "{record:?}");
        }
    }
    let anywhere: Vec<&KafkaRecord> = read.iter().filter(|r| r.key.is_none()).collect();
    assert_eq!(
        values(&read).iter().filter(|v| **v == b"anywhere").count(),
        1
    );
    assert_eq!(anywhere.len(), 1);
}

#[test]
fn kafka_broker_hides_an_aborted_transaction_from_read_committed() {
    let Some(broker) =
        broker_or_skip("kafka_broker_hides_an_aborted_transaction_from_read_committed")
    else {
        return;
    };
    let topic = kafka::unique("aborted");
    broker.create_topic(&topic, 1);
    broker.produce(&topic, &[(Some(0), None, b"before")]);
    let producer = broker.transactional_producer(&kafka::unique("aborted-tx"));
    producer.begin_transaction().unwrap();
    send_flushed(&producer, &topic, 0, b"aborted-1");
    send_flushed(&producer, &topic, 0, b"aborted-2");
    // Flushed: the records are in the log, under an open transaction, when it aborts.
    producer.abort_transaction(CLIENT_TIMEOUT).unwrap();
    broker.produce(&topic, &[(Some(0), None, b"after")]);

    let committed = broker.read_all(&topic, Isolation::ReadCommitted);
    assert_eq!(
        values(&committed),
        [&b"before"[..], b"after"],
        "{committed:?}"
    );
    let uncommitted = broker.read_all(&topic, Isolation::ReadUncommitted);
    assert_eq!(
        values(&uncommitted),
        [&b"before"[..], b"aborted-1", b"aborted-2", b"after"],
        "{uncommitted:?}"
    );
    // Offsets 1, 2: the aborted records; 3: the abort marker; 4: `after`.
    assert_eq!(committed[1].offset, 4);

    // An aborted transaction last in the partition: its marker is the last offset, which no
    // reader receives; read_all still ends.
    producer.begin_transaction().unwrap();
    send_flushed(&producer, &topic, 0, b"aborted-3");
    producer.abort_transaction(CLIENT_TIMEOUT).unwrap();
    assert_eq!(broker.read_all(&topic, Isolation::ReadCommitted), committed);
}

/// A read_committed fetch that starts after a producer's abort marker sees the producer's
/// later committed records: Kafka returns a fetch only the aborted transactions that overlap
/// it. The workers' stages rely on it (a reader tails a topic whose writer was killed with a
/// transaction open, and its replacement keeps the producer id); the emulator the tests once
/// ran hid those records (docs/CHECKPOINTS.md §12).
#[test]
fn kafka_broker_shows_a_producers_committed_records_to_reads_that_start_after_its_abort() {
    let Some(broker) = broker_or_skip("kafka_broker_shows_records_after_an_abort") else {
        return;
    };
    let topic = kafka::unique("aborted");
    broker.create_topic(&topic, 1);
    let producer = broker.transactional_producer(&kafka::unique("aborting"));
    producer.begin_transaction().unwrap();
    send_flushed(&producer, &topic, 0, b"aborted");
    producer.abort_transaction(CLIENT_TIMEOUT).unwrap();
    // The next record's offset: after the aborted one and the abort marker.
    let after_abort = broker.ends(std::slice::from_ref(&topic))[0].3;
    producer.begin_transaction().unwrap();
    send_flushed(&producer, &topic, 0, b"committed");
    producer.commit_transaction(CLIENT_TIMEOUT).unwrap();
    let read_from = |offset: i64| -> Vec<Vec<u8>> {
        use rdkafka::message::Message;
        let consumer = broker.consumer(&kafka::unique("reader"), Isolation::ReadCommitted);
        let mut assignment = TopicPartitionList::new();
        assignment
            .add_partition_offset(&topic, 0, rdkafka::Offset::Offset(offset))
            .unwrap();
        consumer.assign(&assignment).unwrap();
        let mut values = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while std::time::Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => values.push(message.payload().unwrap_or_default().to_vec()),
                Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => break,
                _ => {}
            }
        }
        values
    };
    assert_eq!(read_from(0), [b"committed"], "a read from the start");
    assert_eq!(
        read_from(after_abort),
        [b"committed"],
        "the broker hid a producer's committed records from a read that starts after the \
         producer's abort marker"
    );
}

#[test]
fn kafka_broker_shows_a_committed_transaction() {
    let Some(broker) = broker_or_skip("kafka_broker_shows_a_committed_transaction") else {
        return;
    };
    let topic = kafka::unique("committed");
    broker.create_topic(&topic, 2);
    let producer = broker.transactional_producer(&kafka::unique("committed-tx"));
    producer.begin_transaction().unwrap();
    send_flushed(&producer, &topic, 0, b"one");
    send_flushed(&producer, &topic, 1, b"two");
    // Open: read_committed stops at the last stable offset, before the transaction.
    assert!(broker.read_all(&topic, Isolation::ReadCommitted).is_empty());
    assert_eq!(broker.read_all(&topic, Isolation::ReadUncommitted).len(), 2);
    producer.commit_transaction(CLIENT_TIMEOUT).unwrap();

    let committed = broker.read_all(&topic, Isolation::ReadCommitted);
    assert_eq!(values(&committed), [&b"one"[..], b"two"], "{committed:?}");
    assert_eq!(
        committed.iter().map(|r| r.partition).collect::<Vec<_>>(),
        [0, 1]
    );
}

#[test]
fn kafka_broker_fences_the_first_of_two_producers_with_one_transactional_id() {
    let Some(broker) =
        broker_or_skip("kafka_broker_fences_the_first_of_two_producers_with_one_transactional_id")
    else {
        return;
    };
    let topic = kafka::unique("fenced");
    broker.create_topic(&topic, 1);
    let id = kafka::unique("fenced-tx");
    let first = broker.transactional_producer(&id);
    first.begin_transaction().unwrap();
    send_flushed(&first, &topic, 0, b"zombie");

    // The second producer's init_transactions aborts the first's open transaction.
    let second = broker.transactional_producer(&id);
    let commit = first.commit_transaction(CLIENT_TIMEOUT);
    assert!(commit.is_err(), "the fenced producer committed");
    second.begin_transaction().unwrap();
    send_flushed(&second, &topic, 0, b"successor");
    second.commit_transaction(CLIENT_TIMEOUT).unwrap();

    let committed = broker.read_all(&topic, Isolation::ReadCommitted);
    assert_eq!(values(&committed), [&b"successor"[..]], "{committed:?}");
    let uncommitted = broker.read_all(&topic, Isolation::ReadUncommitted);
    assert_eq!(
        values(&uncommitted),
        [&b"zombie"[..], b"successor"],
        "{uncommitted:?}"
    );
}

#[test]
fn kafka_broker_commits_offsets_sent_to_a_transaction() {
    let Some(broker) = broker_or_skip("kafka_broker_commits_offsets_sent_to_a_transaction") else {
        return;
    };
    let topic = kafka::unique("tx-offsets");
    broker.create_topic(&topic, 2);
    let group = kafka::unique("tx-offsets-group");
    let consumer = broker.consumer(&group, Isolation::ReadCommitted);
    let metadata = consumer
        .group_metadata()
        .expect("a consumer with a group.id has group metadata");
    let producer = broker.transactional_producer(&kafka::unique("tx-offsets-tx"));
    let offsets = |partition: i32, offset: i64| {
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&topic, partition, rdkafka::Offset::Offset(offset))
            .unwrap();
        list
    };

    producer.begin_transaction().unwrap();
    producer
        .send_offsets_to_transaction(&offsets(0, 7), &metadata, CLIENT_TIMEOUT)
        .unwrap();
    producer.commit_transaction(CLIENT_TIMEOUT).unwrap();
    assert_eq!(
        broker.committed_offsets(&group, &topic),
        BTreeMap::from([(0, 7)])
    );

    producer.begin_transaction().unwrap();
    producer
        .send_offsets_to_transaction(&offsets(1, 99), &metadata, CLIENT_TIMEOUT)
        .unwrap();
    producer.abort_transaction(CLIENT_TIMEOUT).unwrap();
    assert_eq!(
        broker.committed_offsets(&group, &topic),
        BTreeMap::from([(0, 7)]),
        "an aborted transaction's offsets were committed"
    );
}

#[test]
fn kafka_broker_stops_and_restarts_on_its_port() {
    let Some(mut broker) = own_broker_or_skip("kafka_broker_stops_and_restarts_on_its_port") else {
        return;
    };
    let topic = kafka::unique("restart");
    broker.create_topic(&topic, 1);
    broker.produce(&topic, &[(Some(0), None, b"kept")]);
    let port = broker.port();

    broker.stop();
    assert!(!broker.is_running());
    let refused = broker.metadata(Duration::from_secs(2));
    assert!(refused.is_err(), "a stopped broker answered: {refused:?}");

    broker.restart();
    assert_eq!(broker.port(), port);
    broker.metadata(CLIENT_TIMEOUT).unwrap();
    // A stopped broker saved its state: the topic and its record are back.
    assert_eq!(
        values(&broker.read_all(&topic, Isolation::ReadCommitted)),
        [&b"kept"[..]]
    );

    // A crash: gone at once, and back on the same port.
    broker.kill();
    assert!(broker.metadata(Duration::from_secs(2)).is_err());
    broker.restart();
    broker.metadata(CLIENT_TIMEOUT).unwrap();
    broker.produce(&topic, &[(Some(0), None, b"after the crash")]);
}

/// The three-node cluster (`kafka::shared_cluster_or_skip`): a topic replicated three times
/// keeps taking acknowledged writes (`acks=all`, two in sync) with a node killed, loses none of
/// them, and the node comes back on its ports and data.
#[test]
fn kafka_cluster_keeps_acknowledged_writes_with_a_node_killed() {
    let Some(cluster) = kafka::shared_cluster_or_skip("kafka_cluster_keeps_acknowledged_writes")
    else {
        return;
    };
    assert_eq!(cluster.nodes(), 3);
    let topic = kafka::unique("replicated");
    cluster.create_topic(&topic, 3);
    cluster.produce(&topic, &[(Some(0), None, b"a"), (Some(1), None, b"b")]);
    cluster.kill_node(1);
    // Leadership moves off the dead node; the idempotent producer retries until it has.
    cluster.produce(&topic, &[(Some(0), None, b"c"), (Some(2), None, b"d")]);
    cluster.restart_node(1);
    cluster.produce(&topic, &[(Some(1), None, b"e")]);
    let records = cluster.read_all(&topic, Isolation::ReadCommitted);
    let mut got = values(&records);
    got.sort();
    assert_eq!(got, [&b"a"[..], b"b", b"c", b"d", b"e"]);
}
