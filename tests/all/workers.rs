//! A job run by many workers (`weir run JOB --worker I/N`, `weir::job::workers`), against
//! the Kafka broker of `kafka/mod.rs` and the S3 server of `object_storage/mod.rs`: the sink
//! that joins two stages, and three worker processes of a word count killed at random moments
//! and restarted with their index, whose read_committed output must be a failure-free run's.
//!
//! A worker is killed at any moment, a transaction of an exchange topic or of the sink open or
//! not: a reader that tails a topic whose writer died mid-transaction sees the replacement's
//! commits (Kafka returns a fetch only the aborted transactions that overlap it;
//! `kafka::broker::kafka_broker_shows_a_producers_committed_records_…`). The emulator the tests
//! once ran hid them, and this test used to kill only between transactions there.
//!
//! `WEIR_WORKER_ROUNDS` sets the kills (default 6), `WEIR_CHAOS_SEED` the seed; both are
//! printed with every failure. `WEIR_WORKER_LOG` is the workers' `RUST_LOG` (e.g.
//! `info,weir::connectors::kafka=debug`; their logs are kept with `WEIR_KEEP_TEMP=1`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use weir::checkpoint::metadata::CheckpointMetadata;
use weir::job::{Job, SinkKind, SinkPartitioning, VertexKind};
use weir::runtime::{JobRunner, RunOptions};
use weir_abi::key_group::key_group;

use crate::kafka::cluster::BrokerFault;
use crate::kafka::exactly_once::{End, difference, output_lines};
use crate::kafka::{self, Isolation};
use crate::support::report;
use crate::support::{CLI_TIMEOUT, Rng, Sandbox, Weir, number_from_env, seed_from_env};

#[test]
fn an_exchange_sink_creates_its_topic_and_puts_each_key_in_its_key_groups_partition() {
    let Some(broker) = kafka::broker_or_skip("an_exchange_sink_puts_each_key") else {
        return;
    };
    let sandbox = Sandbox::new("exchange-sink");
    let topic = kafka::unique("exchange");
    let text = format!(
        "name = \"exchange\"\n[checkpoint]\ninterval = \"100ms\"\ndirectory = {:?}\n\
         [restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"gen\"\ntype = \"generator\"\nparallelism = 2\ncount = 3000\n\
         keys = 50\nseed = 3\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\nparallelism = 2\ninputs = [\"gen\"]\n\
         bootstrap = \"{}\"\ntopic = \"{topic}\"\ntimestamp = \"record\"\n",
        sandbox.checkpoint_dir().display().to_string(),
        broker.bootstrap()
    );
    let mut job = Job::from_str(&text, sandbox.path(), "exchange.toml").unwrap();
    // What a worker's plan sets on the sink of a cut key-hash edge (and `timestamp = "record"`,
    // above); the topic does not exist.
    for vertex in &mut job.vertices {
        if let VertexKind::Sink(SinkKind::Kafka(settings)) = &mut vertex.kind {
            settings.partitioning = SinkPartitioning::KeyGroups(8);
        }
    }
    let runner = JobRunner::new(job, RunOptions::default()).unwrap();
    let (_requests, requests_rx) = tokio::sync::mpsc::unbounded_channel();
    let outcome = runner.run(requests_rx).unwrap();
    assert_eq!(
        outcome.status,
        weir::job::JobStatus::Finished,
        "{outcome:?}"
    );
    assert_eq!(broker.partitions(&topic), 8);
    // The records keep their own times, as between stages (here the generator's, from 1970):
    // time-based retention would delete them before the next stage reads them.
    assert_eq!(
        broker.topic_config(&topic, "retention.ms").as_deref(),
        Some("-1"),
        "an exchange topic keeps its records however old their timestamps"
    );
    let records = broker.read_all(&topic, Isolation::ReadCommitted);
    assert_eq!(records.len(), 3000);
    let mut per_partition: BTreeMap<i32, usize> = BTreeMap::new();
    for record in &records {
        let key = record.key.as_deref().unwrap_or_default();
        assert_eq!(
            record.partition,
            key_group(key, 8) as i32,
            "key {:?}",
            String::from_utf8_lossy(key)
        );
        *per_partition.entry(record.partition).or_default() += 1;
    }
    // Fifty keys spread over the eight key groups.
    assert!(per_partition.len() >= 6, "{per_partition:?}");
}

/// Waits until the read_committed output `end` holds `count` records, then a second more for
/// anything written twice; fails naming `what` if `weir` ends first.
fn wait_for_output(weir: &mut Weir, broker: &kafka::Broker, end: &End, count: usize, what: &str) {
    let done = weir.wait_until(what, CLI_TIMEOUT, |_| {
        output_lines(broker, end).map_or(0, |l| l.len()) >= count
    });
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        done && weir.try_exit().is_none(),
        "{what}: weir ended by itself: {}",
        weir.stderr()
    );
}

/// Words of line `i` of the input: three of 37.
fn line(i: u64) -> String {
    format!("w{} w{} w{}", i % 37, (i * 7 + 3) % 37, (i * 13 + 5) % 37)
}

/// What a failure-free run writes for lines `0..lines`: "word\tn" for every count of every
/// word, sorted.
fn expected_words(lines: u64) -> Vec<String> {
    let mut per_word: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..lines {
        for word in line(i).split(' ') {
            *per_word.entry(word.to_owned()).or_default() += 1;
        }
    }
    let mut out: Vec<String> = per_word
        .iter()
        .flat_map(|(word, &n)| (1..=n).map(move |k| format!("{word}\t{k}")))
        .collect();
    out.sort();
    out
}

/// For a failure: the words whose counts fell short and their key groups, and where each
/// partition of the job's topics between workers ends, read_committed and not, beside the
/// offset its reader committed last.
fn stalled_where(
    broker: &kafka::Broker,
    input: &str,
    lines: &[String],
    expected: &[String],
) -> String {
    let highest = |lines: &[String]| {
        let mut per_word: BTreeMap<String, u64> = BTreeMap::new();
        for line in lines {
            if let Some((word, n)) = line.split_once('\t') {
                let n: u64 = n.parse().unwrap_or(0);
                let at = per_word.entry(word.to_owned()).or_default();
                *at = (*at).max(n);
            }
        }
        per_word
    };
    let reached = highest(lines);
    let mut out =
        String::from("\n--- words short of their count (word: reached/expected, key group of 12):");
    for (word, want) in highest(expected) {
        let got = reached.get(&word).copied().unwrap_or(0);
        if got != want {
            let group = key_group(word.as_bytes(), 12);
            out.push_str(&format!(" {word}: {got}/{want} kg{group};"));
        }
    }
    let topics = std::iter::once((input.to_owned(), "weir.wordcount.in".to_owned())).chain(
        broker
            .topics("weir.wordcount.")
            .into_iter()
            .map(|topic| (topic.clone(), topic)),
    );
    for (topic, group) in topics {
        let committed = broker.committed_offsets(&group, &topic);
        out.push_str(&format!(
            "\n--- {topic} (partition: committed by its reader, stable end, end):"
        ));
        for (_, partition, stable, end) in broker.ends(std::slice::from_ref(&topic)) {
            let read = committed.get(&partition).copied().unwrap_or(-1);
            out.push_str(&format!(" {partition}: {read}, {stable}, {end};"));
        }
    }
    out
}

/// Writes [`wordcount`] as `sandbox`'s job file, with its checkpoints in the sandbox.
fn write_wordcount(broker: &kafka::Broker, sandbox: &Sandbox, input: &str, output: &str) {
    let url = sandbox.checkpoint_dir().display().to_string();
    std::fs::write(sandbox.job_path(), wordcount(broker, &url, input, output)).unwrap();
}

/// The topic between the stages of a worker whose log is `stderr` (its `through topic "…"`).
fn exchange_topic(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.split("through topic \"").nth(1)?.split('"').next())
        .unwrap_or_else(|| panic!("no exchange topic in the log: {stderr}"))
        .to_owned()
}

/// Kafka `input` → `split` → key-hash → `count` → Kafka `output`, checkpoints on `url`; the
/// sink's transactional ids are the output's, so tests running at once never fence each other.
fn wordcount(broker: &kafka::Broker, url: &str, input: &str, output: &str) -> String {
    wordcount_with(broker, url, input, output, "strategy = \"none\"")
}

/// [`wordcount`] with this `[restart]` table body; the sink is its last table.
fn wordcount_with(
    broker: &kafka::Broker,
    url: &str,
    input: &str,
    output: &str,
    restart: &str,
) -> String {
    format!(
        "name = \"wordcount\"\nmax_parallelism = 12\n\
         [checkpoint]\ninterval = \"200ms\"\nmin_pause = \"0ms\"\nretained = 2\n\
         directory = \"{url}\"\n\
         [restart]\n{restart}\n\
         [[source]]\nname = \"in\"\ntype = \"kafka\"\nbootstrap = \"{bootstrap}\"\n\
         topics = [\"{input}\"]\n\
         [[operator]]\nname = \"split\"\nmodule = {split:?}\ninputs = [\"in\"]\n\
         [[operator]]\nname = \"count\"\nmodule = {count:?}\n\
         inputs = [{{ from = \"split\", partition = \"key-hash\" }}]\n\
         [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"count\"]\n\
         bootstrap = \"{bootstrap}\"\ntopic = \"{output}\"\n\
         transactional_id_prefix = \"{output}.tx\"\n",
        bootstrap = broker.bootstrap(),
        split = weir_tests::guests::SPLIT,
        count = weir_tests::guests::COUNT,
    )
}

#[test]
fn three_workers_killed_at_random_write_what_one_process_writes() {
    let Some(s3) = crate::object_storage::s3_or_skip("three_workers_killed_at_random") else {
        return;
    };
    let Some(broker) = kafka::broker_or_skip("three_workers_killed_at_random") else {
        return;
    };
    three_workers_killed_at_random(s3, broker, false);
}

/// The same on a three-node Apache Kafka cluster (`kafka/cluster.rs`), a broker killed and
/// started again or paused past the transaction timeout in every round, beside the kill of a
/// worker.
#[test]
fn three_workers_killed_at_random_on_a_cluster_whose_brokers_fail_write_what_one_process_writes() {
    let Some(s3) = crate::object_storage::s3_or_skip("three_workers_on_a_cluster") else {
        return;
    };
    let Some(cluster) = kafka::shared_cluster_or_skip("three_workers_on_a_cluster") else {
        return;
    };
    three_workers_killed_at_random(s3, &cluster, true);
}

/// Three workers of the word count, one killed at a random moment in each round and started
/// again; with `broker_faults`, a fault of `broker`'s nodes in each round too
/// ([`BrokerFault`]). The read_committed output must be a failure-free run's, and the same
/// job as one process must write the same.
fn three_workers_killed_at_random(
    s3: &crate::object_storage::S3,
    broker: &kafka::Broker,
    broker_faults: bool,
) {
    const WORKERS: u32 = 3;
    const CHUNK: u64 = 400;
    let seed = seed_from_env("WEIR_CHAOS_SEED", 0x3_0000_0021);
    let rounds = number_from_env("WEIR_WORKER_ROUNDS", 6);
    let mut rng = Rng::new(seed);
    let mut context = format!("WEIR_CHAOS_SEED={seed:#x} WEIR_WORKER_ROUNDS={rounds}");
    let input = kafka::unique("words-in");
    let output = kafka::unique("words-out");
    broker.create_topic(&input, 6);
    broker.create_topic(&output, 3);
    let bucket = s3.bucket("workers");
    let sandbox = Sandbox::new("workers");
    // On a cluster whose brokers fail, a worker's job may fail (a commit that cannot reach the
    // coordinator): it restarts itself, with a transaction timeout a paused broker outlasts.
    let job = if broker_faults {
        wordcount_with(
            broker,
            &format!("s3://{bucket}/jobs/wordcount"),
            &input,
            &output,
            crate::kafka::cluster::RESTART,
        ) + &crate::kafka::cluster::sink_properties()
    } else {
        wordcount(
            broker,
            &format!("s3://{bucket}/jobs/wordcount"),
            &input,
            &output,
        )
    };
    std::fs::write(sandbox.job_path(), job).unwrap();
    let mut env = s3.env();
    if let Ok(filter) = std::env::var("WEIR_WORKER_LOG") {
        env.push(("RUST_LOG".to_owned(), filter));
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut starts = 0;
    let mut start = |index: u32| {
        starts += 1;
        Weir::run_with_env(
            &sandbox.job_path(),
            &[
                "--worker",
                &format!("{index}/{WORKERS}"),
                "--restore",
                "latest",
            ],
            &env,
            &sandbox.join(&format!("worker-{index}-{starts}.log")),
        )
    };
    let mut workers: Vec<Weir> = (0..WORKERS).map(&mut start).collect();
    let mut appended = 0;
    let mut kills = Vec::new();
    for index in 0..rounds {
        let lines: Vec<String> = (appended..appended + CHUNK).map(line).collect();
        let rows: Vec<kafka::Produce<'_>> =
            lines.iter().map(|l| (None, None, l.as_bytes())).collect();
        broker.produce(&input, &rows);
        appended += CHUNK;
        // The broker's fault runs beside the round, from its start; the round ends when it has.
        let fault = broker_faults.then(|| BrokerFault::of_round(index, &mut rng));
        let faulted = std::thread::scope(|scope| {
            let output = output.as_str();
            let injected = fault.map(|fault| scope.spawn(move || fault.inject(broker, output)));
            std::thread::sleep(Duration::from_millis(rng.between(200, 1500)));
            let victim = rng.below(u64::from(WORKERS)) as usize;
            for (index, worker) in workers.iter_mut().enumerate() {
                if let Some(status) = worker.try_exit() {
                    panic!(
                        "{context}: worker {index} exited by itself ({status}); its stderr:\n{}",
                        worker.stderr()
                    );
                }
            }
            // Killed before its replacement starts: the lock of its directories is free then.
            workers.remove(victim).kill();
            workers.insert(victim, start(victim as u32));
            kills.push(victim);
            injected.map(|thread| thread.join().expect("the fault's thread"))
        });
        if let (Some(fault), Some(did)) = (fault, faulted) {
            context.push_str(&format!("\n  round {index}: {fault:?}: {did}"));
        }
    }
    let expected = expected_words(appended);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut lines = Vec::new();
    while Instant::now() < deadline {
        lines = output_lines(broker, &End::Kafka(output.clone()))
            .unwrap_or_else(|problem| panic!("{context}: {problem}"));
        if lines.len() >= expected.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // Anything written twice would come now.
    std::thread::sleep(Duration::from_secs(2));
    let lines = if lines.len() >= expected.len() {
        output_lines(broker, &End::Kafka(output.clone())).unwrap()
    } else {
        lines
    };
    for (index, worker) in workers.iter_mut().enumerate() {
        assert!(
            worker.try_exit().is_none(),
            "{context}: worker {index} exited by itself; its stderr:\n{}",
            worker.stderr()
        );
        worker.terminate();
    }
    // What each worker said last, for a failure to show (warnings and errors, then the end).
    let mut said = String::new();
    for (index, worker) in workers.into_iter().enumerate() {
        let ended = worker.wait(CLI_TIMEOUT);
        assert!(
            ended.stderr.contains("stage 1: CANCELED"),
            "{context}: worker {index}: {}",
            ended.stderr
        );
        let lines: Vec<&str> = ended.stderr.lines().collect();
        let notable: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .collect();
        let tail = &lines[lines.len().saturating_sub(8)..];
        said.push_str(&format!(
            "\n--- worker {index} (last run): {} warnings and errors, the last 10:\n{}\n--- its end:\n{}",
            notable.len(),
            notable[notable.len().saturating_sub(10)..].join("\n"),
            tail.join("\n")
        ));
    }
    if let Some(problem) = difference(&lines, &expected) {
        let state = stalled_where(broker, &input, &lines, &expected);
        panic!(
            "{context}: after kills of workers {kills:?}, the read_committed output is not a \
             failure-free run's: {problem}{said}{state}"
        );
    }
    // The same job as one process, undisturbed, over the same input: the same output.
    let single = kafka::unique("words-single");
    broker.create_topic(&single, 3);
    let alone = Sandbox::new("workers-single");
    std::fs::write(
        alone.job_path(),
        wordcount(
            broker,
            &format!("s3://{bucket}/jobs/single"),
            &input,
            &single,
        ),
    )
    .unwrap();
    let mut process = Weir::run_with_env(&alone.job_path(), &[], &env, &alone.join("weir.log"));
    let end = End::Kafka(single.clone());
    wait_for_output(
        &mut process,
        broker,
        &end,
        expected.len(),
        "the single process's output",
    );
    process.terminate();
    process.wait(CLI_TIMEOUT);
    assert_eq!(
        output_lines(broker, &end).unwrap(),
        lines,
        "{context}: the workers' output is not the single process's"
    );
    if broker_faults {
        report::record(&report::Row {
            area: "kafka-cluster",
            scenario: "three workers of a word count (stages joined by Kafka topics), one \
                       SIGKILLed and restarted per round, beside a broker killed and restarted \
                       or paused past the transaction timeout (3 Apache Kafka nodes)",
            rounds,
            faults: &format!("{rounds} broker faults and {rounds} kills of a worker"),
            result: "read_committed output identical to a failure-free run and to one process's",
        });
    }
}

#[test]
fn a_worker_warns_when_the_topic_between_its_stages_deletes_records_by_time() {
    let Some(broker) = kafka::broker_or_skip("a_worker_warns_when_an_exchange_expires") else {
        return;
    };
    const LINES: u64 = 50;
    let (input, output) = (kafka::unique("expiring-in"), kafka::unique("expiring-out"));
    broker.create_topic(&input, 2);
    broker.create_topic(&output, 2);
    let lines: Vec<String> = (0..LINES).map(line).collect();
    let rows: Vec<kafka::Produce<'_>> = lines.iter().map(|l| (None, None, l.as_bytes())).collect();
    broker.produce(&input, &rows);
    let sandbox = Sandbox::new("expiring");
    write_wordcount(broker, &sandbox, &input, &output);
    let end = End::Kafka(output.clone());
    let warning = "between the job's stages deletes records after";
    // The first run creates the topic, keeping records whatever their time: no warning.
    let mut first = Weir::run(
        &sandbox.job_path(),
        &["--worker", "0/1"],
        &sandbox.join("first.log"),
    );
    let words = expected_words(LINES).len();
    wait_for_output(&mut first, broker, &end, words, "the first run's output");
    let stderr = first.stderr();
    first.terminate();
    first.wait(CLI_TIMEOUT);
    assert!(!stderr.contains(warning), "{stderr}");
    let topic = exchange_topic(&stderr);
    // Given a week's retention by hand, the topic is named with what it loses and the fix.
    broker.set_topic_config(&topic, "retention.ms", "604800000");
    let mut second = Weir::run(
        &sandbox.job_path(),
        &["--worker", "0/1", "--restore", "latest"],
        &sandbox.join("second.log"),
    );
    second.wait_until(
        "the warning about the exchange's retention",
        CLI_TIMEOUT,
        |w| w.stderr().contains(warning),
    );
    let stderr = second.stderr();
    second.terminate();
    second.wait(CLI_TIMEOUT);
    let expected = format!(
        "the topic \"{topic}\" {warning} 604800000 ms (retention.ms): a record older than \
         that when it is written, or one that waits longer for a stopped stage, is lost"
    );
    assert!(
        stderr.contains(&expected) && stderr.contains("--add-config retention.ms=-1"),
        "expected\n{expected}\nin\n{stderr}"
    );
}

#[test]
fn a_job_started_afresh_reads_nothing_its_earlier_history_left_between_its_stages() {
    let Some(broker) = kafka::broker_or_skip("a_job_started_afresh_reads_nothing") else {
        return;
    };
    const LINES: u64 = 300;
    let input = kafka::unique("afresh-in");
    broker.create_topic(&input, 2);
    let lines: Vec<String> = (0..LINES).map(line).collect();
    let rows: Vec<kafka::Produce<'_>> = lines.iter().map(|l| (None, None, l.as_bytes())).collect();
    broker.produce(&input, &rows);
    let sandbox = Sandbox::new("afresh");
    let checkpoints = sandbox.checkpoint_dir();
    let expected = expected_words(LINES);
    let mut topics = Vec::new();
    for history in 0..2 {
        let output = kafka::unique("afresh-out");
        broker.create_topic(&output, 2);
        let text = wordcount(broker, &checkpoints.display().to_string(), &input, &output);
        std::fs::write(sandbox.job_path(), text).unwrap();
        let mut worker = Weir::run(
            &sandbox.job_path(),
            &["--worker", "0/1", "--restore", "latest"],
            &sandbox.join(&format!("history-{history}.log")),
        );
        let end = End::Kafka(output.clone());
        wait_for_output(
            &mut worker,
            broker,
            &end,
            expected.len(),
            &format!("history {history}: the whole output"),
        );
        let stderr = worker.stderr();
        worker.terminate();
        worker.wait(CLI_TIMEOUT);
        topics.push(exchange_topic(&stderr));
        let lines = output_lines(broker, &end).unwrap();
        if let Some(problem) = difference(&lines, &expected) {
            panic!("history {history}: {problem}");
        }
        // Started afresh: the job's checkpoints are removed.
        std::fs::remove_dir_all(&checkpoints).unwrap();
    }
    assert_ne!(topics[0], topics[1]);
}

#[test]
fn a_worker_stopped_with_savepoints_goes_on_from_them_exactly() {
    let Some(broker) = kafka::broker_or_skip("a_worker_stopped_with_savepoints") else {
        return;
    };
    const LINES: u64 = 300;
    let input = kafka::unique("stop-in");
    let output = kafka::unique("stop-out");
    broker.create_topic(&input, 2);
    broker.create_topic(&output, 2);
    let sandbox = Sandbox::new("worker-stop");
    write_wordcount(broker, &sandbox, &input, &output);
    let end = End::Kafka(output.clone());
    for round in 0..2u64 {
        let lines: Vec<String> = (round * LINES..(round + 1) * LINES).map(line).collect();
        let rows: Vec<kafka::Produce<'_>> =
            lines.iter().map(|l| (None, None, l.as_bytes())).collect();
        broker.produce(&input, &rows);
        let expected = expected_words((round + 1) * LINES);
        let mut worker = Weir::run(
            &sandbox.job_path(),
            &[
                "--worker",
                "0/1",
                "--restore",
                "latest",
                "--savepoint-on-stop",
            ],
            &sandbox.join(&format!("round-{round}.log")),
        );
        wait_for_output(
            &mut worker,
            broker,
            &end,
            expected.len(),
            &format!("round {round}: the output so far"),
        );
        // SIGTERM: every stage takes a savepoint and stops.
        worker.terminate();
        let ended = worker.wait(CLI_TIMEOUT);
        ended.assert_code(0, &format!("round {round}, stopped with savepoints"));
        for stage in 0..2 {
            assert!(
                ended
                    .stderr
                    .contains(&format!("worker 0/1, stage {stage}: FINISHED")),
                "{}",
                ended.stderr
            );
        }
        if round == 1 {
            assert!(
                ended.stderr.contains("restoring from") && ended.stderr.contains("/sp-"),
                "the second run did not restore the savepoints: {}",
                ended.stderr
            );
        }
        let lines = output_lines(broker, &end).unwrap();
        if let Some(problem) = difference(&lines, &expected) {
            panic!("round {round}: {problem}");
        }
    }
}

/// The complete checkpoints under `prefix` of `bucket`, each with the generation of the run
/// that completed it.
fn generations(s3: &crate::object_storage::S3, bucket: &str, prefix: &str) -> Vec<(String, u64)> {
    s3.list(bucket, prefix)
        .into_iter()
        .filter(|(key, _)| key.ends_with("/_metadata"))
        .filter_map(|(key, _)| {
            let bytes = s3.get(bucket, &key)?;
            let meta = CheckpointMetadata::decode(std::path::Path::new(&key), &bytes)
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            Some((key, meta.generation.0))
        })
        .collect()
}

#[test]
fn a_zombie_worker_completes_no_checkpoint_and_commits_no_output() {
    let Some(s3) = crate::object_storage::s3_or_skip("a_zombie_worker") else {
        return;
    };
    let Some(broker) = kafka::broker_or_skip("a_zombie_worker") else {
        return;
    };
    const CHUNK: u64 = 300;
    let input = kafka::unique("zombie-words-in");
    let output = kafka::unique("zombie-words-out");
    broker.create_topic(&input, 4);
    broker.create_topic(&output, 2);
    let bucket = s3.bucket("zombie-worker");
    let url = format!("s3://{bucket}/jobs/wordcount");
    let text = wordcount(broker, &url, &input, &output);
    // The workers on one machine, and worker 1's replacement on another: a directory of its
    // own (its lock and control files), the same bucket prefix.
    let (here, there) = (
        Sandbox::new("zombie-workers"),
        Sandbox::new("zombie-replacement"),
    );
    for sandbox in [&here, &there] {
        std::fs::write(sandbox.job_path(), &text).unwrap();
    }
    let env = s3.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let append = |from: u64| {
        let lines: Vec<String> = (from..from + CHUNK).map(line).collect();
        let rows: Vec<kafka::Produce<'_>> =
            lines.iter().map(|l| (None, None, l.as_bytes())).collect();
        broker.produce(&input, &rows);
    };
    let worker = |sandbox: &Sandbox, index: u32, log: &str| {
        Weir::run_with_env(
            &sandbox.job_path(),
            &["--worker", &format!("{index}/2"), "--restore", "latest"],
            &env,
            &sandbox.join(log),
        )
    };
    append(0);
    let mut first = worker(&here, 0, "worker-0.log");
    let mut zombie = worker(&here, 1, "worker-1.log");
    let prefix = "jobs/wordcount/worker-1-of-2";
    zombie.wait_until(
        "a checkpoint of each stage of worker 1",
        CLI_TIMEOUT,
        |_| {
            let done = generations(s3, &bucket, prefix);
            ["/stage-0/", "/stage-1/"]
                .iter()
                .all(|stage| done.iter().any(|(key, _)| key.contains(stage)))
        },
    );
    // Frozen, as a VM paused or a node cut off: its replacement starts meanwhile.
    zombie.signal("STOP");
    let mut replacement = worker(&there, 1, "worker-1.log");
    replacement.wait_until("a checkpoint of the replacement", CLI_TIMEOUT, |_| {
        generations(s3, &bucket, prefix)
            .iter()
            .any(|(_, g)| *g == 2)
    });
    append(CHUNK);
    // What the frozen worker completed, a request it sent before it froze included: from now
    // on, thawed, it may complete nothing.
    let before: Vec<(String, u64)> = generations(s3, &bucket, prefix);
    zombie.signal("CONT");
    let ended = zombie.wait(CLI_TIMEOUT);
    assert_ne!(ended.status.code(), Some(0), "{}", ended.stderr);
    assert!(
        ended.stderr.contains("of this job has started on s3://"),
        "{}",
        ended.stderr
    );
    // Thawed, the frozen worker completed at most, per stage, the checkpoint whose metadata
    // write it had checked against the generations before it froze
    // (checkpoint/generation.rs), numbered below every checkpoint of its replacement.
    let now = generations(s3, &bucket, prefix);
    for stage in ["/stage-0/", "/stage-1/"] {
        let id = |key: &str| -> u64 {
            let dir = key.trim_end_matches("/_metadata");
            dir.rsplit("chk-").next().unwrap().parse().unwrap()
        };
        let of_stage = |generation: u64| -> Vec<u64> {
            now.iter()
                .filter(|(key, g)| key.contains(stage) && *g == generation)
                .map(|(key, _)| id(key))
                .collect()
        };
        let late: Vec<u64> = now
            .iter()
            .filter(|c| c.0.contains(stage) && c.1 == 1 && !before.contains(c))
            .map(|(key, _)| id(key))
            .collect();
        let replacements = of_stage(2);
        assert!(
            late.len() <= 1 && late.iter().all(|l| replacements.iter().all(|r| l < r)),
            "{stage}: the zombie completed {late:?} after it was thawed; its replacement \
             {replacements:?}"
        );
    }
    // Its output: none of it is committed twice or lost.
    let expected = expected_words(2 * CHUNK);
    let end = End::Kafka(output.clone());
    wait_for_output(&mut first, broker, &end, expected.len(), "the whole output");
    for worker in [&mut first, &mut replacement] {
        assert!(worker.try_exit().is_none(), "{}", worker.stderr());
        worker.terminate();
    }
    first.wait(CLI_TIMEOUT);
    replacement.wait(CLI_TIMEOUT);
    let lines = output_lines(broker, &end).unwrap();
    if let Some(problem) = difference(&lines, &expected) {
        panic!("read_committed output after a zombie worker: {problem}");
    }
}
