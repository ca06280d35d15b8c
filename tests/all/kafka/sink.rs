//! Where the Kafka sink writes and with which timestamps, against the real broker: a sink with
//! `topic = { from_key = "/", topics = [...] }` sends each record to the topic its key names,
//! with the rest of the key as the Kafka key, exactly-once; a key that names no topic of the list
//! fails the task naming the key, the topics and the fix; every listed topic must exist at the
//! start, and the smallest of their record limits applies; `timestamp = "now"` stamps records
//! with the time of sending while `"record"` keeps the record's own.

use std::fmt::Write as _;
use std::fs;

use crate::kafka::{self, Broker, Isolation, KafkaRecord, now_ms};
use crate::support::{Sandbox, run_cli};

/// Writes `rows` (key, value, timestamp) as the csv file `name` in `sandbox`; returns its path
/// as the job file writes it.
fn csv_input(sandbox: &Sandbox, name: &str, rows: &[(String, String, i64)]) -> String {
    let mut text = String::new();
    for (key, value, timestamp) in rows {
        writeln!(text, "{key},{value},{timestamp}").unwrap();
    }
    let path = sandbox.join(name);
    fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A job: the csv file `input` read once (key, value, timestamp) → sink `out` of
/// `type = "kafka"` with `sink` as its further keys.
fn job(sandbox: &Sandbox, broker: &Broker, input: &str, sink: &str) -> String {
    format!(
        "name = \"kafkasink\"\n\
         [checkpoint]\ninterval = \"100ms\"\ndirectory = {:?}\n\
         [restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"in\"\ntype = \"file\"\nformat = \"csv\"\nkey = 0\nvalue = 1\n\
         timestamp = 2\npath = {input:?}\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"in\"]\nbootstrap = \"{}\"\n\
         {sink}\n",
        sandbox.checkpoint_dir().display().to_string(),
        broker.bootstrap()
    )
}

/// `(key, value)` of every record, sorted, a null key as `None`.
fn keys_and_values(records: &[KafkaRecord]) -> Vec<(Option<String>, String)> {
    let mut pairs: Vec<_> = records
        .iter()
        .map(|r| {
            (
                r.key
                    .as_ref()
                    .map(|k| String::from_utf8_lossy(k).into_owned()),
                String::from_utf8_lossy(&r.value).into_owned(),
            )
        })
        .collect();
    pairs.sort();
    pairs
}

#[test]
fn kafka_sink_routes_each_record_to_the_topic_its_key_names_exactly_once() {
    let Some(broker) = kafka::broker_or_skip("kafka_sink_routes_by_key") else {
        return;
    };
    let sandbox = Sandbox::new("kafka-sink-route");
    let (eu, us) = (kafka::unique("orders-eu"), kafka::unique("orders-us"));
    broker.create_topic(&eu, 2);
    broker.create_topic(&us, 2);
    let now = now_ms();
    // Keys `<topic>/<key>`; the rest may hold the separator again, or be empty (a null key).
    let mut rows = Vec::new();
    let mut expected_eu = Vec::new();
    let mut expected_us = Vec::new();
    for i in 0..60 {
        let (topic, expected) = if i % 3 == 0 {
            (&eu, &mut expected_eu)
        } else {
            (&us, &mut expected_us)
        };
        let rest = match i % 10 {
            0 => String::new(),
            5 => format!("k{}/sub", i % 7),
            _ => format!("k{}", i % 7),
        };
        rows.push((format!("{topic}/{rest}"), format!("v{i}"), now));
        expected.push(((!rest.is_empty()).then_some(rest), format!("v{i}")));
    }
    expected_eu.sort();
    expected_us.sort();
    let input = csv_input(&sandbox, "orders.csv", &rows);
    let sink = format!(
        "topic = {{ from_key = \"/\", topics = [\"{eu}\", \"{us}\"] }}\n\
         delivery = \"exactly-once\"\ntransactional_id_prefix = \"{eu}.tx\""
    );
    fs::write(sandbox.job_path(), job(&sandbox, broker, &input, &sink)).unwrap();
    run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"))
        .assert_code(0, "a job routing by key to two topics");
    for (topic, expected) in [(&eu, &expected_eu), (&us, &expected_us)] {
        let committed = broker.read_all(topic, Isolation::ReadCommitted);
        assert_eq!(&keys_and_values(&committed), expected, "topic {topic}");
        // Everything it wrote is committed: no aborted or duplicate attempts.
        let all = broker.read_all(topic, Isolation::ReadUncommitted);
        assert_eq!(
            &keys_and_values(&all),
            expected,
            "topic {topic}, uncommitted"
        );
    }
}

#[test]
fn kafka_sink_fails_the_task_on_a_key_that_names_no_listed_topic() {
    let Some(broker) = kafka::broker_or_skip("kafka_sink_unknown_topic") else {
        return;
    };
    let (eu, us) = (kafka::unique("orders-eu"), kafka::unique("orders-us"));
    broker.create_topic(&eu, 1);
    broker.create_topic(&us, 1);
    let now = now_ms();
    // Exactly-once sends (and fails) when the checkpoint completes, at-least-once on arrival.
    for (delivery, bad_key, problem) in [
        (
            "exactly-once",
            "orders-xx/k1",
            "the record key \"orders-xx/k1\" names topic \"orders-xx\", which is not in `topics`",
        ),
        (
            "at-least-once",
            "no-separator",
            "the record key \"no-separator\" has no \"/\"",
        ),
    ] {
        let sandbox = Sandbox::new("kafka-sink-unknown-topic");
        let rows = [
            (format!("{eu}/k0"), "v0".to_owned(), now),
            (bad_key.to_owned(), "v1".to_owned(), now),
        ];
        let input = csv_input(&sandbox, "orders.csv", &rows);
        let prefix = kafka::unique("unknown-topic.tx");
        let transactions = if delivery == "exactly-once" {
            format!("\ntransactional_id_prefix = \"{prefix}\"")
        } else {
            String::new()
        };
        let sink = format!(
            "topic = {{ from_key = \"/\", topics = [\"{eu}\", \"{us}\"] }}\n\
             delivery = \"{delivery}\"{transactions}"
        );
        fs::write(sandbox.job_path(), job(&sandbox, broker, &input, &sink)).unwrap();
        let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
        ended.assert_code(1, "a record naming a topic outside the list");
        let expected = format!(
            "kafka sink \"out\": {problem}; the sink takes each record's topic from its key \
             (`topic = {{ from_key = \"/\", topics = [\"{eu}\", \"{us}\"] }}`), so a key must be \
             <topic>/<key> with one of those topics: make the operator emit such keys, or add \
             the topic to `topics` (it must exist when the job starts)"
        );
        assert!(
            ended.stderr.contains(&expected),
            "{delivery}: expected\n{expected}\nin\n{}",
            ended.stderr
        );
    }
}

#[test]
fn kafka_sink_timestamp_now_stamps_the_time_of_sending_and_record_keeps_the_records() {
    let Some(broker) = kafka::broker_or_skip("kafka_sink_timestamps") else {
        return;
    };
    let sandbox = Sandbox::new("kafka-sink-timestamps");
    let (stamped, kept) = (kafka::unique("stamped"), kafka::unique("kept"));
    broker.create_topic(&stamped, 1);
    broker.create_topic(&kept, 1);
    // An hour ago, a millisecond apart: real times (retention keeps them), far from the clock.
    let hour_ago = now_ms() - 3_600_000;
    let rows: Vec<_> = (0..20)
        .map(|i| (format!("k{i}"), format!("v{i}"), hour_ago + i))
        .collect();
    let input = csv_input(&sandbox, "events.csv", &rows);
    // The generator's timestamps are its record numbers (0, 1, 2…): 1970, unless "now".
    let text = format!(
        "{}\
         [[source]]\nname = \"numbers\"\ntype = \"generator\"\ncount = 20\n\
         [[sink]]\nname = \"now\"\ntype = \"kafka\"\ninputs = [\"numbers\"]\nbootstrap = \"{}\"\n\
         topic = \"{stamped}\"\ntimestamp = \"now\"\ntransactional_id_prefix = \"{stamped}.tx\"\n",
        job(
            &sandbox,
            broker,
            &input,
            &format!(
                "topic = \"{kept}\"\ntimestamp = \"record\"\n\
                 transactional_id_prefix = \"{kept}.tx\""
            )
        ),
        broker.bootstrap()
    );
    fs::write(sandbox.job_path(), text).unwrap();
    let before = now_ms();
    run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"))
        .assert_code(0, "a job with both timestamps");
    let after = now_ms();
    let stamped_records = broker.read_all(&stamped, Isolation::ReadCommitted);
    assert_eq!(stamped_records.len(), 20);
    for record in &stamped_records {
        let timestamp = record.timestamp.expect("a timestamp");
        assert!(
            (before..=after).contains(&timestamp),
            "timestamp = \"now\" gave {timestamp}, not within the run [{before}, {after}]"
        );
    }
    let mut kept_stamps: Vec<i64> = broker
        .read_all(&kept, Isolation::ReadCommitted)
        .iter()
        .map(|r| r.timestamp.expect("a timestamp"))
        .collect();
    kept_stamps.sort_unstable();
    let expected: Vec<i64> = (0..20).map(|i| hour_ago + i).collect();
    assert_eq!(
        kept_stamps, expected,
        "timestamp = \"record\" keeps the record's"
    );
}

#[test]
fn kafka_sink_stops_at_start_when_a_listed_topic_is_missing() {
    let Some(broker) = kafka::broker_or_skip("kafka_sink_listed_topic_missing") else {
        return;
    };
    let sandbox = Sandbox::new("kafka-sink-listed-missing");
    let (eu, us) = (kafka::unique("orders-eu"), kafka::unique("orders-us"));
    broker.create_topic(&eu, 1);
    let input = csv_input(
        &sandbox,
        "orders.csv",
        &[(format!("{eu}/k"), "v".into(), 1)],
    );
    let sink = format!(
        "topic = {{ from_key = \"/\", topics = [\"{eu}\", \"{us}\"] }}\ndelivery = \"none\""
    );
    fs::write(sandbox.job_path(), job(&sandbox, broker, &input, &sink)).unwrap();
    let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    ended.assert_code(3, "a sink whose listed topic is missing");
    let expected = format!(
        "kafka sink \"out\": topic \"{us}\" does not exist on {}: create it (for example \
         `kafka-topics.sh --create --topic {us} --bootstrap-server {0}`) or fix the job file's \
         `topic.topics`",
        broker.bootstrap()
    );
    assert!(ended.stderr.contains(&expected), "{}", ended.stderr);
}

#[test]
fn kafka_sink_limits_records_to_the_smallest_max_message_bytes_of_its_topics() {
    let Some(broker) = kafka::broker_or_skip("kafka_sink_smallest_limit") else {
        return;
    };
    let sandbox = Sandbox::new("kafka-sink-smallest-limit");
    let (large, small) = (kafka::unique("large"), kafka::unique("small"));
    broker.create_topic(&large, 1);
    broker.create_topic_with(&small, 1, &[("max.message.bytes", "50000")]);
    // For the topic without a limit of its own: the smallest of the listed topics applies.
    let key = format!("{large}/k");
    let rows = [(key.clone(), "x".repeat(60_000), now_ms())];
    let input = csv_input(&sandbox, "large.csv", &rows);
    let sink = format!(
        "topic = {{ from_key = \"/\", topics = [\"{large}\", \"{small}\"] }}\n\
         transactional_id_prefix = \"{large}.tx\""
    );
    fs::write(sandbox.job_path(), job(&sandbox, broker, &input, &sink)).unwrap();
    let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    ended.assert_code(1, "a record above the smallest limit of the listed topics");
    let expected = format!(
        "kafka sink \"out\": a record of {} bytes (key and value) does not fit in the limit of \
         50000 bytes (less about 100 bytes of framing), topic \"{small}\"'s max.message.bytes on \
         the broker",
        // What is sent: the key without its topic.
        "k".len() + 60_000
    );
    assert!(ended.stderr.contains(&expected), "{}", ended.stderr);
}

#[test]
fn a_record_older_than_its_topics_retention_is_reported_once_naming_the_fixes() {
    let Some(broker) = kafka::broker_or_skip("kafka_sink_old_records") else {
        return;
    };
    // Records dated 1970, as a generator's or a file's line numbers would be.
    let rows: Vec<_> = (1..=20)
        .map(|i| (format!("k{i}"), format!("v{i}"), 1000 + i))
        .collect();
    for (case, topic_configs, timestamp, warned) in [
        ("the broker's default retention", &[][..], "record", true),
        (
            "no retention",
            &[("retention.ms", "-1")][..],
            "record",
            false,
        ),
        ("the time of sending", &[][..], "now", false),
    ] {
        let sandbox = Sandbox::new("kafka-sink-old-records");
        let topic = kafka::unique("old-records");
        broker.create_topic_with(&topic, 1, topic_configs);
        let input = csv_input(&sandbox, "old.csv", &rows);
        let sink = format!(
            "topic = \"{topic}\"\ntimestamp = \"{timestamp}\"\n\
             transactional_id_prefix = \"{topic}.tx\""
        );
        fs::write(sandbox.job_path(), job(&sandbox, broker, &input, &sink)).unwrap();
        let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
        ended.assert_code(0, case);
        let warnings = ended
            .stderr
            .matches("deletes records older than that")
            .count();
        assert_eq!(warnings, usize::from(warned), "{case}:\n{}", ended.stderr);
        if warned {
            // The days ago are left out: the run may end on another day than it began.
            let expected = [
                "kafka sink \"out\": a record with timestamp 1001 (ms since the epoch, ",
                &format!(
                    " days ago) went to topic \"{topic}\", whose retention.ms (604800000, 7 days)"
                ),
                "set `timestamp = \"now\"` on the sink",
            ];
            assert!(
                expected.iter().all(|part| ended.stderr.contains(part)),
                "{case}: expected\n{expected:?}\nin\n{}",
                ended.stderr
            );
        }
    }
}

/// A marker topic that deletes by time loses the marker a restore of an old checkpoint needs
/// to know its output committed: the sink warns at start, naming the topic and the fix; the
/// compacted one it creates itself, and one compacted by hand, draw no warning.
#[test]
fn a_marker_topic_that_deletes_by_time_is_reported_naming_the_fix() {
    let Some(broker) = kafka::broker_or_skip("kafka_sink_marker_retention") else {
        return;
    };
    let rows = [("k1".to_owned(), "v1".to_owned(), kafka::now_ms())];
    for (case, markers, warned) in [
        ("created by the sink", None, false),
        ("created with the broker's defaults", Some(&[][..]), true),
        (
            "created compacted",
            Some(&[("cleanup.policy", "compact")][..]),
            false,
        ),
    ] {
        let sandbox = Sandbox::new("kafka-sink-marker-retention");
        let topic = kafka::unique("marker-retention");
        broker.create_topic(&topic, 1);
        let marker_topic = format!("{topic}.markers");
        if let Some(configs) = markers {
            broker.create_topic_with(&marker_topic, 1, configs);
        }
        let input = csv_input(&sandbox, "in.csv", &rows);
        let sink = format!(
            "topic = \"{topic}\"\ntransactional_id_prefix = \"{topic}.tx\"\n\
             marker_topic = \"{marker_topic}\""
        );
        fs::write(sandbox.job_path(), job(&sandbox, broker, &input, &sink)).unwrap();
        let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
        ended.assert_code(0, case);
        let warning = format!(
            "kafka sink \"out\": the marker topic \"{marker_topic}\" deletes records after \
             604800000 ms"
        );
        assert_eq!(
            ended.stderr.contains(&warning),
            warned,
            "{case}: expected {}\n{warning}\nin\n{}",
            if warned { "" } else { "no" },
            ended.stderr
        );
        if warned {
            assert!(
                ended.stderr.contains(&format!(
                    "--entity-name {marker_topic} --add-config cleanup.policy=compact"
                )),
                "{case}: the fix is named\n{}",
                ended.stderr
            );
        }
    }
}
