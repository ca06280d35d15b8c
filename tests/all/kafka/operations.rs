//! What an operator sees of a Kafka job while it runs: a kafka → count → kafka stream (`until =
//! "never"`, exactly-once sink) over the test broker, read through its control endpoint. The
//! JSON API, `/metrics` and `weir status` must show every partition of the source with its next
//! offset, the broker's end and a lag that reaches 0 once everything produced is consumed — and
//! again after more is produced while it runs — and the sink's committed transactions with a
//! commit duration.

use std::time::{Duration, Instant};

use serde_json::Value;
use weir::control::client::Method;
use weir::control::{ControlClient, EndpointFile};

use crate::dashboard::{self, Chromium};
use crate::kafka::exactly_once::{End, NO_RESTART, append, chunk, job_text_with, prepare};
use crate::kafka::{self, Broker};
use crate::support::{CLI_TIMEOUT, Sandbox, Weir, weir_command};

/// Partitions of the input topic (the source has parallelism 2: two each, by the owner hash,
/// or however they fall).
const INPUT_PARTITIONS: usize = 4;
/// Records produced before the job starts, and again while it runs.
const RECORDS: u64 = 2_000;

/// Starts `weir run` on the sandbox's job and waits until its endpoint answers RUNNING.
fn start(sandbox: &Sandbox) -> (Weir, ControlClient) {
    let dir = sandbox.checkpoint_dir();
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("run.log"));
    let mut client = None;
    let running = weir.wait_until("the control endpoint", CLI_TIMEOUT, |_| {
        let Ok(file) = EndpointFile::read(&dir) else {
            return false;
        };
        let c = ControlClient::new(&file.address, Some(file.token.clone())).unwrap();
        let ok = c
            .get_json("/api/job")
            .is_ok_and(|job| job["status"] == "RUNNING");
        client = Some(c);
        ok
    });
    assert!(running, "the job ended before it ran:\n{}", weir.stderr());
    (weir, client.unwrap())
}

/// One partition as the JSON API shows it: topic/partition, offset, high watermark, lag.
type PartitionRow = (String, Option<i64>, Option<i64>, Option<i64>);

/// The partitions the JSON API shows for source `in`, every task's together.
fn partitions(job: &Value) -> Vec<PartitionRow> {
    let source = job["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "in")
        .expect("vertex in");
    let mut rows = Vec::new();
    for task in source["tasks"].as_array().unwrap() {
        for p in task["kafka_source"]["partitions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            rows.push((
                format!("{}/{}", p["topic"].as_str().unwrap(), p["partition"]),
                p["offset"].as_i64(),
                p["high_watermark"].as_i64(),
                p["lag"].as_i64(),
            ));
        }
    }
    rows.sort();
    rows
}

/// Whether the source shows every partition consumed up to `records` in all: every offset
/// and end known, their sums `records`, and no lag.
fn consumed(job: &Value, records: u64) -> bool {
    let rows = partitions(job);
    rows.len() == INPUT_PARTITIONS
        && rows
            .iter()
            .all(|(_, o, h, l)| o.is_some() && h.is_some() && *l == Some(0))
        && rows.iter().filter_map(|r| r.1).sum::<i64>() == records as i64
        && rows.iter().filter_map(|r| r.2).sum::<i64>() == records as i64
}

/// The sink `out`'s figures, every task's added up: (transactions, records, longest commit ms).
fn transactions(job: &Value) -> (u64, u64, f64) {
    let sink = job["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "out")
        .expect("vertex out");
    let mut sum = (0, 0, 0.0f64);
    for task in sink["tasks"].as_array().unwrap() {
        let s = &task["kafka_sink"];
        sum.0 += s["transactions_committed"].as_u64().unwrap_or(0);
        sum.1 += s["records_committed"].as_u64().unwrap_or(0);
        sum.2 = sum
            .2
            .max(s["commit_duration"]["max"].as_f64().unwrap_or(0.0));
    }
    sum
}

/// Polls `/api/job` until `done` holds, or fails after [`CLI_TIMEOUT`] with the last answer.
fn wait_for(weir: &mut Weir, client: &ControlClient, what: &str, done: impl Fn(&Value) -> bool) {
    let mut last = Value::Null;
    let reached = weir.wait_until(what, CLI_TIMEOUT, |_| match client.get_json("/api/job") {
        Ok(job) => {
            let ok = done(&job);
            last = job;
            ok
        }
        Err(_) => false,
    });
    assert!(
        reached,
        "{what}: not reached; the last /api/job:\n{last:#}\nthe job's stderr:\n{}",
        weir.stderr()
    );
}

/// The samples of family `family` in a text exposition, as (labels, value).
fn samples<'a>(text: &'a str, family: &str) -> Vec<(&'a str, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            let (metric, labels) = name.split_once('{').unwrap_or((name, ""));
            (metric == family).then(|| (labels, value.parse().unwrap_or(f64::NAN)))
        })
        .collect()
}

#[test]
fn status_metrics_and_the_api_show_partition_lag_and_sink_transactions() {
    let Some(broker) = kafka::broker_or_skip("kafka-operations") else {
        return;
    };
    run(broker);
}

fn run(broker: &Broker) {
    let sandbox = Sandbox::new("kafka-operations");
    let input = End::Kafka(kafka::unique("ops-words"));
    let output = End::Kafka(kafka::unique("ops-counts"));
    prepare(broker, &input, &output);
    std::fs::write(
        sandbox.job_path(),
        job_text_with(broker, &sandbox, &input, &output, false, NO_RESTART),
    )
    .unwrap();
    append(broker, &input, &chunk(0, RECORDS));

    let (mut weir, client) = start(&sandbox);
    let started = Instant::now();
    wait_for(&mut weir, &client, "the first records consumed", |job| {
        consumed(job, RECORDS)
    });
    wait_for(&mut weir, &client, "a committed transaction", |job| {
        let (transactions, records, longest) = transactions(job);
        transactions > 0 && records > 0 && longest > 0.0
    });
    eprintln!("consumed and committed after {:?}", started.elapsed());

    // More records while it runs: the ends move, and the lag goes back to 0.
    append(broker, &input, &chunk(RECORDS, 2 * RECORDS));
    wait_for(&mut weir, &client, "the second records consumed", |job| {
        consumed(job, 2 * RECORDS)
    });
    // Every record counted is in some committed transaction, eventually.
    wait_for(&mut weir, &client, "every record committed", |job| {
        transactions(job).1 == 2 * RECORDS
    });

    let timeout = Duration::from_secs(10);
    let answer = client
        .request(Method::GET, "/metrics", Some(timeout))
        .unwrap();
    assert_eq!(answer.status, 200);
    let text = answer.body;
    let offsets = samples(&text, "weir_kafka_source_offset");
    assert_eq!(offsets.len(), INPUT_PARTITIONS, "{text}");
    for (labels, _) in &offsets {
        for label in [
            "vertex=\"in\"",
            "subtask=\"",
            "topic=\"ops-words-",
            "partition=\"",
        ] {
            assert!(labels.contains(label), "{label} in {labels}");
        }
    }
    let total: f64 = offsets.iter().map(|(_, v)| v).sum();
    assert_eq!(total, (2 * RECORDS) as f64, "{text}");
    let ends: f64 = samples(&text, "weir_kafka_source_high_watermark")
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert_eq!(ends, (2 * RECORDS) as f64, "{text}");
    let lags = samples(&text, "weir_kafka_source_lag_records");
    assert_eq!(lags.len(), INPUT_PARTITIONS, "{text}");
    assert!(lags.iter().all(|(_, v)| *v == 0.0), "{text}");
    let committed: f64 = samples(&text, "weir_kafka_sink_transactions_total")
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert!(committed > 0.0, "{text}");
    let records: f64 = samples(&text, "weir_kafka_sink_records_committed_total")
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert_eq!(records, (2 * RECORDS) as f64, "{text}");
    let count: f64 = samples(&text, "weir_kafka_sink_commit_seconds_count")
        .iter()
        .map(|(_, v)| v)
        .sum();
    let seconds: f64 = samples(&text, "weir_kafka_sink_commit_seconds_sum")
        .iter()
        .map(|(_, v)| v)
        .sum();
    assert!(count >= committed && seconds > 0.0, "{text}");
    let infinite = samples(&text, "weir_kafka_sink_commit_seconds_bucket");
    assert!(
        infinite
            .iter()
            .any(|(labels, v)| labels.contains("le=\"+Inf\"") && *v > 0.0),
        "{text}"
    );

    let dir = sandbox.checkpoint_dir();
    let status = weir_command(&sandbox, &["status", dir.to_str().unwrap()], "", &[]);
    assert_eq!(status.code, Some(0), "weir status: {}", status.stderr);
    let lines: Vec<&str> = status.stdout.lines().collect();
    assert!(
        lines.contains(&"kafka source in  lag 0 records over 4 partitions"),
        "{}",
        status.stdout
    );
    assert!(
        lines
            .iter()
            .filter(|l| l.starts_with("  ops-words-"))
            .count()
            == INPUT_PARTITIONS,
        "{}",
        status.stdout
    );
    assert!(
        lines.iter().any(|l| l.starts_with("kafka sink out  ")
            && l.contains(&format!(" committed, {} records", 2 * RECORDS))
            && l.contains("commit p50 ")),
        "{}",
        status.stdout
    );
    eprintln!("weir status:\n{}", status.stdout);
    eprintln!(
        "/metrics, Kafka families:\n{}",
        text.lines()
            .filter(|l| l.starts_with("weir_kafka_") && !l.contains("_bucket"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // The dashboard: a table of the source's partitions and one of the sink's subtasks.
    if let Some(browser) = dashboard::browser_or_skip() {
        let login = dashboard::login_link(&mut weir, &sandbox, &dir);
        let dom = Chromium::new(&browser, &sandbox).dump_dom(&login);
        let sources = dashboard::attribute_values(&dom, "data-kafka-source");
        let sinks = dashboard::attribute_values(&dom, "data-kafka-sink");
        let rows = dashboard::attribute_values(&dom, "data-partition");
        assert!(
            sources.contains("in") && sinks.contains("out") && rows.len() == INPUT_PARTITIONS,
            "the dashboard's Kafka card: sources {sources:?}, sinks {sinks:?}, partitions \
             {rows:?}\npage:\n{dom}"
        );
        assert!(
            dom.contains("lag 0 · 4 partitions"),
            "the dashboard shows the source's lag\npage:\n{dom}"
        );
    }

    weir.terminate();
    let ended = weir.wait(CLI_TIMEOUT);
    assert!(
        ended.status.code().is_some(),
        "weir ended by a signal: {}",
        ended.stderr
    );
}
