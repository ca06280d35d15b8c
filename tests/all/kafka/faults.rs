//! What a job with Kafka connectors does when Kafka is not what it expects: brokers that do not
//! answer at start (exit 3, naming the address), a topic that does not exist (exit 3, naming
//! it), the connection lost while the sink creates its marker topic at start (tried again),
//! the broker going away mid-run (the job fails over by its restart strategy, naming the
//! cause, and its output is exact once the broker is back), a record larger than the broker
//! takes (the task fails naming the record's size and the limit).

use std::fs;
use std::net::{Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use crate::kafka::exactly_once::{
    CHUNK, End, append, assert_exact_counts, chunk, job_text, job_text_with, kafka_topics,
};
use crate::kafka::relay::{CREATE_TOPICS, Relay};
use crate::kafka::{self, Isolation};
use crate::support::{CLI_TIMEOUT, Sandbox, Weir, run_cli};

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn brokers_that_do_not_answer_stop_the_job_at_start_naming_the_address() {
    let Some(broker) = kafka::broker_or_skip("unreachable") else {
        return;
    };
    let sandbox = Sandbox::new("kafka-unreachable");
    let input = End::Kafka(kafka::unique("words"));
    let output = End::Kafka(kafka::unique("counts"));
    let address = format!("127.0.0.1:{}", closed_port());
    let text = job_text(broker, &sandbox, &input, &output, true).replacen(
        &broker.bootstrap(),
        &address,
        1,
    );
    fs::write(sandbox.job_path(), text).unwrap();
    let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    ended.assert_code(3, "a job whose brokers do not answer");
    assert!(
        ended.stderr.contains(&format!(
            "kafka source \"in\": cannot reach the brokers at {address}"
        )),
        "{}",
        ended.stderr
    );
}

#[test]
fn a_missing_topic_stops_the_job_at_start_naming_it() {
    let Some(broker) = kafka::broker_or_skip("missing-topic") else {
        return;
    };
    for missing_side in ["source", "sink"] {
        let sandbox = Sandbox::new("kafka-missing-topic");
        let input = End::Kafka(kafka::unique("words"));
        let output = End::Kafka(kafka::unique("counts"));
        // Only the other side's topic exists.
        let (End::Kafka(input_topic), End::Kafka(output_topic)) = (&input, &output) else {
            unreachable!()
        };
        let (missing, key) = if missing_side == "source" {
            broker.create_topic(output_topic, 1);
            (input_topic, "`topics`")
        } else {
            broker.create_topic(input_topic, 1);
            (output_topic, "`topic`")
        };
        fs::write(
            sandbox.job_path(),
            job_text(broker, &sandbox, &input, &output, true),
        )
        .unwrap();
        let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
        ended.assert_code(3, "a job whose topic is missing");
        let name = if missing_side == "source" {
            "in"
        } else {
            "out"
        };
        assert!(
            ended.stderr.contains(&format!(
                "kafka {missing_side} \"{name}\": topic \"{missing}\" does not exist on {}",
                broker.bootstrap()
            )) && ended.stderr.contains(key),
            "{}",
            ended.stderr
        );
    }
}

/// The exactly-once sink creates its marker topic before the job starts; a broker killed, or a
/// controller moving, while that request is in flight fails it with the connection, for a
/// while only. The job tries again and runs to its exact output, instead of stopping with exit
/// code 3 (the workers' broker chaos test saw a worker starting during a broker's kill exit so:
/// "cannot create the marker topic … BrokerTransportFailure").
#[test]
fn a_connection_lost_while_the_marker_topic_is_created_is_tried_again() {
    let relay = Relay::start();
    let Some(broker) = kafka::own_broker_behind_or_skip("marker-topic-retried", &relay) else {
        return;
    };
    let sandbox = Sandbox::new("kafka-marker-topic-retried");
    let (input, output) = kafka_topics(&broker);
    append(&broker, &input, &chunk(0, CHUNK));
    // Every connection of the job through the relay, its first too.
    let text = job_text(&broker, &sandbox, &input, &output, true)
        .replace(&broker.bootstrap(), &relay.address());
    fs::write(sandbox.job_path(), text).unwrap();
    // The job's first two tries at creating the marker topic lose their connection.
    relay.cut(CREATE_TOPICS, 2);
    let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    ended.assert_code(
        0,
        "a job whose marker topic's creation lost its connection twice",
    );
    assert_eq!(
        relay.cut_count(),
        2,
        "the job did not try to create its marker topic twice through the relay; its \
         stderr:\n{}",
        ended.stderr
    );
    let context = format!("its stderr:\n{}\n", ended.stderr);
    assert_exact_counts(&broker, &output, CHUNK, &context);
}

/// Waits until the output topic shows at least one committed record.
fn wait_for_output(broker: &kafka::Broker, output: &End, weir: &mut Weir) {
    let End::Kafka(topic) = output else {
        unreachable!()
    };
    let deadline = Instant::now() + CLI_TIMEOUT;
    while broker.read_all(topic, Isolation::ReadCommitted).is_empty() {
        assert!(
            weir.try_exit().is_none(),
            "the job ended before committing; stderr:\n{}",
            weir.stderr()
        );
        assert!(Instant::now() < deadline, "no output: {}", weir.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_broker_going_away_fails_the_job_over_and_it_comes_back_exact() {
    let Some(mut broker) = kafka::own_broker_or_skip("broker-gone") else {
        return;
    };
    let sandbox = Sandbox::new("kafka-broker-gone");
    let (input, output) = kafka_topics(&broker);
    let restart = "strategy = \"fixed-delay\"\nattempts = 100\ndelay = \"500ms\"";
    let stream = sandbox.join("stream.toml");
    let bounded = sandbox.join("bounded.toml");
    fs::write(
        &stream,
        job_text_with(&broker, &sandbox, &input, &output, false, restart),
    )
    .unwrap();
    fs::write(&bounded, job_text(&broker, &sandbox, &input, &output, true)).unwrap();

    append(&broker, &input, &chunk(0, CHUNK));
    // Debug logs: should this fail, they show what each connector was doing.
    let mut weir = Weir::run_with_env(
        &stream,
        &["--restore", "latest"],
        &[("RUST_LOG", "info,weir=debug")],
        &sandbox.join("stream.log"),
    );
    wait_for_output(&broker, &output, &mut weir);
    broker.stop();
    // Until the job notices and fails over.
    let noticed = weir.wait_until("a failover", CLI_TIMEOUT, |w| {
        w.stderr().contains("restarting")
    });
    assert!(
        noticed,
        "the job ended instead of failing over:\n{}",
        weir.stderr()
    );
    std::thread::sleep(Duration::from_secs(2));
    broker.restart();
    append(&broker, &input, &chunk(CHUNK, 2 * CHUNK));
    std::thread::sleep(Duration::from_secs(3));
    let stream_log = weir.kill().stderr;
    assert!(
        stream_log.contains("kafka source \"in\"") || stream_log.contains("kafka sink \"out\""),
        "the failure does not name the connector:\n{stream_log}"
    );
    run_cli(
        &bounded,
        &["--restore", "latest"],
        &sandbox.join("final.log"),
    )
    .assert_code(0, "the final run");
    let context = format!("the stream's log:\n{stream_log}\n");
    assert_exact_counts(&broker, &output, 2 * CHUNK, &context);
}

#[test]
fn a_record_larger_than_the_broker_takes_fails_the_task_naming_its_size_and_the_limit() {
    let Some(broker) = kafka::broker_or_skip("record-too-large") else {
        return;
    };
    // The producer's limit (librdkafka's default 1 000 000 bytes), then a topic's smaller one.
    for (topic_limit, value_size, limit, source) in [
        (
            None,
            1_048_576,
            1_000_000,
            "librdkafka's default message.max.bytes",
        ),
        (
            Some("50000"),
            60_000,
            50_000,
            "max.message.bytes on the broker",
        ),
    ] {
        let sandbox = Sandbox::new("kafka-too-large");
        let topic = kafka::unique("large");
        match topic_limit {
            Some(bytes) => broker.create_topic_with(&topic, 1, &[("max.message.bytes", bytes)]),
            None => broker.create_topic(&topic, 1),
        }
        let text = format!(
            "name = \"large\"\n[checkpoint]\ninterval = \"100ms\"\ndirectory = {:?}\n\
             [restart]\nstrategy = \"none\"\n\
             [[source]]\nname = \"in\"\ntype = \"generator\"\ncount = 3\nvalue_size = {value_size}\n\
             [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"in\"]\nbootstrap = \"{}\"\n\
             topic = \"{topic}\"\n",
            sandbox.checkpoint_dir().display().to_string(),
            broker.bootstrap()
        );
        fs::write(sandbox.job_path(), text).unwrap();
        let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
        ended.assert_code(1, "a job with a record too large for Kafka");
        // The generator's keys are `key-<n>`: a few bytes more than the value.
        let message = ended
            .stderr
            .split("kafka sink \"out\": a record of ")
            .nth(1)
            .unwrap_or_else(|| panic!("no message about the record:\n{}", ended.stderr));
        let size: usize = message
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no size in {message}"));
        assert!((value_size..value_size + 10).contains(&size), "{message}");
        assert!(
            message.contains(&format!(
                "bytes (key and value) does not fit in the limit of {limit} bytes"
            )) && message.contains(source),
            "{}",
            ended.stderr
        );
    }
}
