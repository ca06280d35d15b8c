//! The Kafka source's promises against a real broker: where a fresh start begins (`start`),
//! the offsets of completed checkpoints committed to the consumer group, subtasks with no
//! partition that neither read nor block checkpoints, topics by pattern, partitions found by
//! discovery while the job runs, read from their earliest offset, and keys and timestamps
//! taken from headers, a record without the header skipped or failing the job (`on_error`).
//!
//! The jobs are a Kafka source straight into the exactly-once file sink, whose committed lines
//! (`key<TAB>value`) are what the source emitted — or, to see timestamps, into an exactly-once
//! Kafka sink, which writes each record's timestamp as its CreateTime.

use std::fs;
use std::time::{Duration, Instant, SystemTime};

use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions};
use rdkafka::client::DefaultClientContext;

use weir::runtime::RunOptions;

use crate::kafka::{self, Broker, Isolation, ProduceHeaders};
use crate::support::report;
use crate::support::{
    CLI_TIMEOUT, InProcess, Sandbox, Weir, committed_lines, run_cli, savepoint_named,
};

/// A Kafka source (with `source_keys`) of parallelism `parallelism` into a file sink.
fn job(broker: &Broker, sandbox: &Sandbox, parallelism: u32, source_keys: &str) -> String {
    format!(
        "name = \"ksource\"\n[checkpoint]\ninterval = \"100ms\"\ndirectory = {:?}\n\
         [restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"in\"\ntype = \"kafka\"\nparallelism = {parallelism}\n\
         bootstrap = \"{}\"\n{source_keys}\n\
         [[sink]]\nname = \"out\"\ntype = \"file\"\ninputs = [\"in\"]\npath = {:?}\n",
        sandbox.checkpoint_dir().display().to_string(),
        broker.bootstrap(),
        sandbox.out_dir().display().to_string()
    )
}

/// Produces `values` with key `key`, in order, to partition `partition`.
fn produce(broker: &Broker, topic: &str, partition: i32, key: &str, values: &[&str]) {
    let rows: Vec<kafka::Produce<'_>> = values
        .iter()
        .map(|v| (Some(partition), Some(key.as_bytes()), v.as_bytes()))
        .collect();
    broker.produce(topic, &rows);
}

/// Runs the job to its end and returns its committed lines, sorted.
fn run_to_end(sandbox: &Sandbox, text: &str, args: &[&str]) -> Vec<String> {
    fs::write(sandbox.job_path(), text).unwrap();
    run_cli(&sandbox.job_path(), args, &sandbox.join("weir.log")).assert_code(0, "the job");
    let mut lines = committed_lines(&sandbox.out_dir());
    lines.sort();
    lines
}

fn sorted(lines: &[&str]) -> Vec<String> {
    let mut lines: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    lines.sort();
    lines
}

#[test]
fn a_fresh_start_begins_where_start_says() {
    let Some(broker) = kafka::broker_or_skip("kafka-start") else {
        return;
    };
    let topic = kafka::unique("start");
    broker.create_topic(&topic, 1);
    produce(broker, &topic, 0, "k", &["a", "b"]);
    let between = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 1;
    std::thread::sleep(Duration::from_millis(20));
    produce(broker, &topic, 0, "k", &["c"]);
    let bounded = |start: &str| format!("topics = [\"{topic}\"]\nuntil = \"end\"\nstart = {start}");

    let earliest = Sandbox::new("kafka-start-earliest");
    let lines = run_to_end(
        &earliest,
        &job(broker, &earliest, 1, &bounded("\"earliest\"")),
        &[],
    );
    assert_eq!(lines, sorted(&["k\ta", "k\tb", "k\tc"]));

    let latest = Sandbox::new("kafka-start-latest");
    let lines = run_to_end(
        &latest,
        &job(broker, &latest, 1, &bounded("\"latest\"")),
        &[],
    );
    assert!(lines.is_empty(), "latest read {lines:?}");

    let from_time = Sandbox::new("kafka-start-timestamp");
    let start = format!("{{ timestamp = {between} }}");
    let lines = run_to_end(
        &from_time,
        &job(broker, &from_time, 1, &bounded(&start)),
        &[],
    );
    assert_eq!(lines, sorted(&["k\tc"]));

    // The earliest run committed its offsets to the group (weir.ksource.in); a run with
    // `committed` in that group reads only what came after them.
    produce(broker, &topic, 0, "k", &["d"]);
    let committed = Sandbox::new("kafka-start-committed");
    let lines = run_to_end(
        &committed,
        &job(broker, &committed, 1, &bounded("\"committed\"")),
        &[],
    );
    assert_eq!(lines, sorted(&["k\td"]));
}

#[test]
fn completed_checkpoints_commit_their_offsets_to_the_group() {
    let Some(broker) = kafka::broker_or_skip("kafka-group-offsets") else {
        return;
    };
    let topic = kafka::unique("offsets");
    broker.create_topic(&topic, 3);
    for partition in 0..3 {
        produce(
            broker,
            &topic,
            partition,
            "k",
            &vec!["v"; 10 + partition as usize],
        );
    }
    let sandbox = Sandbox::new("kafka-group-offsets");
    let group = kafka::unique("group");
    let keys = format!("topics = [\"{topic}\"]\nuntil = \"end\"\ngroup = \"{group}\"");
    let lines = run_to_end(&sandbox, &job(broker, &sandbox, 2, &keys), &[]);
    assert_eq!(lines.len(), 33);
    let committed = broker.committed_offsets(&group, &topic);
    assert_eq!(
        committed,
        (0..3).map(|p| (p, 10 + i64::from(p))).collect(),
        "the group's offsets after the final checkpoint"
    );
}

#[test]
fn subtasks_without_a_partition_stay_idle_and_checkpoints_complete() {
    let Some(broker) = kafka::broker_or_skip("kafka-idle-subtasks") else {
        return;
    };
    let topic = kafka::unique("narrow");
    broker.create_topic(&topic, 1);
    produce(broker, &topic, 0, "k", &["a", "b", "c"]);
    let sandbox = Sandbox::new("kafka-idle-subtasks");
    // Three subtasks, one partition: two subtasks own nothing.
    let keys = format!("topics = [\"{topic}\"]\nuntil = \"end\"");
    let lines = run_to_end(&sandbox, &job(broker, &sandbox, 3, &keys), &[]);
    assert_eq!(lines, sorted(&["k\ta", "k\tb", "k\tc"]));

    // As a stream, checkpoints keep completing though two subtasks never read a record.
    let stream = Sandbox::new("kafka-idle-stream");
    fs::write(
        stream.job_path(),
        job(broker, &stream, 3, &format!("topics = [\"{topic}\"]")),
    )
    .unwrap();
    let mut weir = Weir::run(&stream.job_path(), &[], &stream.join("weir.log"));
    let completed = weir.wait_until("three completed checkpoints", CLI_TIMEOUT, |w| {
        w.stderr().contains("checkpoint 3 complete")
    });
    assert!(completed, "{}", weir.stderr());
    drop(weir.kill());
}

#[test]
fn a_pattern_reads_every_matching_topic_and_discovery_finds_new_partitions() {
    let Some(broker) = kafka::broker_or_skip("kafka-discovery") else {
        return;
    };
    let prefix = kafka::unique("disc");
    let (first, second, other) = (
        format!("{prefix}-a"),
        format!("{prefix}-b"),
        format!("{prefix}x-c"),
    );
    broker.create_topic(&first, 1);
    broker.create_topic(&second, 1);
    broker.create_topic(&other, 1);
    produce(broker, &first, 0, "a", &["1"]);
    produce(broker, &second, 0, "b", &["1"]);
    produce(broker, &other, 0, "c", &["not matched"]);

    let sandbox = Sandbox::new("kafka-discovery");
    let keys = format!("topic_pattern = \"{prefix}-*\"\ndiscovery_interval = \"200ms\"");
    fs::write(sandbox.job_path(), job(broker, &sandbox, 2, &keys)).unwrap();
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    let read_both = |w: &Weir| {
        let _ = w;
        committed_lines(&sandbox.out_dir()).len() >= 2
    };
    assert!(
        weir.wait_until("the first records", CLI_TIMEOUT, read_both),
        "{}",
        weir.stderr()
    );
    // A partition added to a topic, and a new matching topic: both read from their start.
    let admin: AdminClient<DefaultClientContext> = broker.config().create().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let added = runtime
        .block_on(admin.create_partitions([&NewPartitions::new(&first, 2)], &AdminOptions::new()))
        .unwrap();
    assert!(added.iter().all(Result::is_ok), "{added:?}");
    produce(broker, &first, 1, "a", &["2", "3"]);
    let third = format!("{prefix}-z");
    broker.create_topic(&third, 1);
    produce(broker, &third, 0, "z", &["1"]);
    let deadline = Instant::now() + CLI_TIMEOUT;
    loop {
        let mut lines = committed_lines(&sandbox.out_dir());
        lines.sort();
        if lines == sorted(&["a\t1", "a\t2", "a\t3", "b\t1", "z\t1"]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "discovery did not bring the new partition and topic: {lines:?}\n{}",
            weir.stderr()
        );
        assert!(weir.try_exit().is_none(), "{}", weir.stderr());
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(weir.kill());
}

/// The records of the header tests, all to partition 0: the user is header `user`, a record
/// without it is offset 1 (no headers at all) and offset 3 (another header).
fn produce_users(broker: &Broker, topic: &str) {
    let records: [(&str, ProduceHeaders<'_>); 5] = [
        ("a", &[("user", Some(b"ann"))]),
        ("b", &[]),
        ("c", &[("user", Some(b"bob"))]),
        ("d", &[("trace", Some(b"t-1"))]),
        ("e", &[("user", Some(b"cy"))]),
    ];
    let records: Vec<_> = records
        .iter()
        .map(|&(value, headers)| ((Some(0), None, value.as_bytes()), headers))
        .collect();
    broker.produce_with_headers(topic, &records);
}

#[test]
fn headers_give_records_their_key_and_timestamp() {
    let Some(broker) = kafka::broker_or_skip("kafka-headers") else {
        return;
    };
    let (input, output) = (kafka::unique("headers-in"), kafka::unique("headers-out"));
    broker.create_topic(&input, 1);
    broker.create_topic(&output, 1);
    // A repeated header counts by its last value, a null one is empty (no key, to the sink).
    // Real times, an hour ago: the sink writes them as the records' CreateTime, and the
    // broker's retention deletes records dated 1970 at its next pass, before the read below.
    let hour_ago = kafka::now_ms() - 3_600_000;
    let [t1, t2, t3] = [1000, 2000, 3000].map(|ms| (hour_ago + ms).to_string());
    broker.produce_with_headers(
        &input,
        &[
            (
                (Some(0), Some(b"k0"), b"a"),
                &[("user", Some(b"ann")), ("sent-at", Some(t1.as_bytes()))],
            ),
            (
                (Some(0), None, b"b"),
                &[
                    ("user", Some(b"x")),
                    ("sent-at", Some(t2.as_bytes())),
                    ("user", Some(b"bob")),
                ],
            ),
            (
                (Some(0), Some(b"k2"), b"c"),
                &[("sent-at", Some(t3.as_bytes())), ("user", None)],
            ),
        ],
    );
    let sandbox = Sandbox::new("kafka-headers");
    let text = format!(
        "name = \"kheaders\"\n[checkpoint]\ninterval = \"100ms\"\ndirectory = {:?}\n\
         [restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"in\"\ntype = \"kafka\"\nbootstrap = \"{bootstrap}\"\n\
         topics = [\"{input}\"]\nuntil = \"end\"\n\
         key = {{ header = \"user\" }}\ntimestamp = {{ header = \"sent-at\" }}\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"in\"]\n\
         bootstrap = \"{bootstrap}\"\ntopic = \"{output}\"\n\
         transactional_id_prefix = \"{output}.tx\"\n",
        sandbox.checkpoint_dir().display().to_string(),
        bootstrap = broker.bootstrap(),
    );
    fs::write(sandbox.job_path(), text).unwrap();
    run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log")).assert_code(0, "the job");
    let records: Vec<_> = broker
        .read_all(&output, Isolation::ReadCommitted)
        .into_iter()
        .map(|r| (r.key, r.value, r.timestamp))
        .collect();
    assert_eq!(
        records,
        [
            (Some(b"ann".to_vec()), b"a".to_vec(), Some(hour_ago + 1000)),
            (Some(b"bob".to_vec()), b"b".to_vec(), Some(hour_ago + 2000)),
            (None, b"c".to_vec(), Some(hour_ago + 3000)),
        ]
    );
}

#[test]
fn a_record_without_the_mapped_header_is_skipped_or_fails_the_job() {
    let Some(broker) = kafka::broker_or_skip("kafka-headers-missing") else {
        return;
    };
    let topic = kafka::unique("headers-missing");
    broker.create_topic(&topic, 1);
    produce_users(broker, &topic);
    let keys = |on_error: &str| {
        format!(
            "topics = [\"{topic}\"]\nuntil = \"end\"\nkey = {{ header = \"user\" }}\n\
             on_error = \"{on_error}\""
        )
    };

    // Skipped: the job finishes with the other records, and says which it dropped.
    let skip = Sandbox::new("kafka-headers-skip");
    fs::write(skip.job_path(), job(broker, &skip, 1, &keys("skip"))).unwrap();
    let ended = run_cli(&skip.job_path(), &[], &skip.join("weir.log"));
    ended.assert_code(0, "the job skipping records");
    let mut lines = committed_lines(&skip.out_dir());
    lines.sort();
    assert_eq!(lines, sorted(&["ann\ta", "bob\tc", "cy\te"]));
    for offset in [1, 3] {
        let logged = format!(
            "kafka source \"in\": skipped record at offset {offset} of {topic}/0: no header \
             \"user\" for its key"
        );
        assert!(
            ended.stderr.contains(&logged),
            "no {logged:?} in\n{}",
            ended.stderr
        );
    }
    // The task counts them in records_skipped.
    let counted = Sandbox::new("kafka-headers-skip-counted");
    fs::write(counted.job_path(), job(broker, &counted, 1, &keys("skip"))).unwrap();
    let running = InProcess::start(&counted.job_path(), RunOptions::default());
    let monitor = running.monitor().clone();
    running.join();
    let skipped: u64 = monitor
        .tasks()
        .iter()
        .map(|(_, _, metrics)| metrics.records_skipped())
        .sum();
    assert_eq!(skipped, 2);

    // Failing: the job fails naming the record and the header, and what to do.
    let fail = Sandbox::new("kafka-headers-fail");
    fs::write(fail.job_path(), job(broker, &fail, 1, &keys("fail"))).unwrap();
    let ended = run_cli(&fail.job_path(), &[], &fail.join("weir.log"));
    ended.assert_code(1, "the job failing on a record");
    let failure = format!(
        "kafka source \"in\": the record at offset 1 of {topic}/0 has no header \"user\" for \
         its key (fix the producer, or set `on_error = \"skip\"` on the source to drop such \
         records)"
    );
    assert!(
        ended.stderr.contains(&failure),
        "no {failure:?} in\n{}",
        ended.stderr
    );
}

/// A savepoint of a Kafka source at parallelism 2, taken while it reads, restored at 3 and at
/// 1: every partition goes on from its offset with the subtask that owns it now, so each record
/// is committed exactly once.
#[test]
fn a_rescaled_source_reads_every_partition_on_from_its_offset() {
    let Some(broker) = kafka::broker_or_skip("kafka-rescale") else {
        return;
    };
    for to in [3, 1] {
        let topic = kafka::unique("rescale");
        broker.create_topic(&topic, 6);
        let produce_half = |half: usize| {
            for partition in 0..6 {
                let values: Vec<String> = (half * 500..(half + 1) * 500)
                    .map(|i| format!("{partition}-{i}"))
                    .collect();
                let values: Vec<&str> = values.iter().map(String::as_str).collect();
                produce(broker, &topic, partition, "k", &values);
            }
        };
        produce_half(0);
        let sandbox = Sandbox::new(&format!("kafka-rescale-{to}"));
        let stream = format!("topics = [\"{topic}\"]");
        fs::write(sandbox.job_path(), job(broker, &sandbox, 2, &stream)).unwrap();
        let mut weir = Weir::run(
            &sandbox.job_path(),
            &["--savepoint-on-stop"],
            &sandbox.join("before.log"),
        );
        let out = sandbox.out_dir();
        let reading = weir.wait_until("some records committed", CLI_TIMEOUT, |_| {
            !committed_lines(&out).is_empty()
        });
        assert!(reading, "nothing committed:\n{}", weir.stderr());
        weir.terminate();
        let stopped = weir.wait(CLI_TIMEOUT);
        stopped.assert_code(0, "a stop with a savepoint");
        let savepoint = savepoint_named(&stopped.stderr);
        let savepoint = savepoint.to_str().unwrap();
        produce_half(1);
        let bounded = format!("topics = [\"{topic}\"]\nuntil = \"end\"");
        fs::write(sandbox.job_path(), job(broker, &sandbox, to, &bounded)).unwrap();
        let ended = run_cli(
            &sandbox.job_path(),
            &["--restore", savepoint],
            &sandbox.join("after.log"),
        );
        ended.assert_code(0, &format!("the source restored at parallelism {to}"));
        let said = format!("rescaled the state of `in` from 2 to {to} subtasks");
        assert!(
            ended.stderr.contains(&said),
            "no `{said}`:\n{}",
            ended.stderr
        );
        let mut lines = committed_lines(&out);
        lines.sort();
        let mut expected: Vec<String> = (0..6)
            .flat_map(|p| (0..1000).map(move |i| format!("k\t{p}-{i}")))
            .collect();
        expected.sort();
        assert_eq!(
            lines.len(),
            expected.len(),
            "records committed at parallelism {to}"
        );
        assert_eq!(lines, expected, "at parallelism {to}");
    }
}

/// A topic deleted and created again since the checkpoint a restore reads: the checkpoint's
/// offsets belong to the old topic. Recreated with fewer partitions, or with fewer records
/// than the checkpoint had read, the restore is refused before anything reads, naming the
/// source, the checkpoint, the topic and partition and the ways out; `--fresh` then starts the
/// job over. (Before, the first restore read the new topic from the old offset, skipping its
/// first records, and the second waited forever for an end the new partition never reaches.)
#[test]
fn a_restore_onto_a_topic_created_again_is_refused() {
    let Some(broker) = kafka::broker_or_skip("kafka-recreated") else {
        return;
    };
    for (partitions_after, records_after, evidence) in [
        (1, 100, "the topic has 1 partition(s) now"),
        (2, 10, "the partition ends at offset 10 now"),
    ] {
        let topic = kafka::unique("recreated");
        broker.create_topic(&topic, 2);
        let old: Vec<String> = (0..50).map(|i| format!("old{i}")).collect();
        let old: Vec<&str> = old.iter().map(String::as_str).collect();
        for partition in 0..2 {
            produce(broker, &topic, partition, "k", &old);
        }
        let sandbox = Sandbox::new(&format!("kafka-recreated-{partitions_after}"));
        let stream = format!("topics = [\"{topic}\"]");
        fs::write(sandbox.job_path(), job(broker, &sandbox, 1, &stream)).unwrap();
        let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("first.log"));
        let out = sandbox.out_dir();
        let read = weir.wait_until("every record committed", CLI_TIMEOUT, |_| {
            committed_lines(&out).len() == 100
        });
        assert!(read, "not every record committed:\n{}", weir.stderr());
        drop(weir.kill());

        broker.delete_topic(&topic);
        broker.create_topic(&topic, partitions_after);
        let new: Vec<String> = (0..records_after).map(|i| format!("new{i}")).collect();
        let new: Vec<&str> = new.iter().map(String::as_str).collect();
        produce(broker, &topic, 0, "k", &new);

        let bounded = format!("topics = [\"{topic}\"]\nuntil = \"end\"");
        fs::write(sandbox.job_path(), job(broker, &sandbox, 1, &bounded)).unwrap();
        let refused = run_cli(
            &sandbox.job_path(),
            &["--restore", "latest"],
            &sandbox.join("restore.log"),
        );
        assert_eq!(
            refused.code(),
            Some(3),
            "the restore onto the topic created again was not refused as a job that cannot \
             start:\n{}",
            refused.stderr
        );
        for said in [
            "kafka source \"in\": chk-".to_owned(),
            format!("of topic \"{topic}\" up to offset 50, but {evidence}"),
            "deleted and created again".to_owned(),
            "`--fresh`".to_owned(),
            "`--allow-non-restored-state`".to_owned(),
        ] {
            assert!(
                refused.stderr.contains(&said),
                "the refusal does not say {said:?}:\n{}",
                refused.stderr
            );
        }

        let fresh = run_cli(
            &sandbox.job_path(),
            &["--fresh"],
            &sandbox.join("fresh.log"),
        );
        fresh.assert_code(0, "the fresh start");
        let lines = committed_lines(&out);
        assert_eq!(
            lines.iter().filter(|l| l.contains("\tnew")).count(),
            records_after,
            "the fresh start reads the new topic whole"
        );
    }
    report::record(&report::Row {
        area: "kafka",
        scenario: "restore of a Kafka source's checkpoint after its topic was deleted and \
                   created again",
        rounds: 2,
        faults: "topic deleted and created again between the run and `--restore latest`: \
                 with fewer partitions; with fewer records than the checkpoint had read",
        result: "restore refused (exit 3) naming the source, the checkpoint, the topic, the \
                 partition and offset, `--fresh` and `--allow-non-restored-state`; `--fresh` \
                 accepted and reads the new topic whole",
    });
}
