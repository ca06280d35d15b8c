//! Exactly-once through Kafka under SIGKILL: a keyed count between a Kafka topic (4
//! partitions, read by a source of parallelism 2) and an exactly-once Kafka sink (parallelism
//! 2), killed at every named kill point of the checkpoint protocol and of the sink's commit,
//! and at random moments; then the same with a file on either side (file → kafka, kafka →
//! file). What a read_committed consumer sees (or the file sink committed) must equal what a
//! run without failures writes: "key, running count" once for every count of every key, and,
//! in the Kafka output, the counts of each key in increasing order within its partition.
//!
//! Each round first appends a chunk of input (to the topic, or to the followed file), then runs
//! `weir run --restore latest` with a kill point armed and a kill timer as backstop: the job
//! is a stream that never ends on its own, so every round ends in a crash. A final run restores
//! with the source bounded (`until = "end"`, or a file not followed) and finishes.
//!
//! A last test shows the check has teeth: with the sink's recovery step disabled (the test
//! hook `WEIR_TEST_IGNORE_MARKERS`), a crash after a commit yields duplicates, and the same
//! check reports them.
//!
//! `WEIR_KAFKA_ROUNDS` sets the rounds of the Kafka → Kafka test (default 50; each reversed
//! test gets a quarter), `WEIR_CHAOS_SEED` the seed; both are printed with every failure.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use weir::kill_point::{self, KillPoint};

use crate::kafka::{self, Broker, Isolation};
use crate::support::report;
use crate::support::{
    CLI_TIMEOUT, Rng, Sandbox, Weir, committed_lines, number_from_env, run_cli, seed_from_env,
};

/// The seed when `WEIR_CHAOS_SEED` is not set.
const DEFAULT_SEED: u64 = 0x5eed_4af4_a000_0017;
/// Rounds of the Kafka → Kafka test when `WEIR_KAFKA_ROUNDS` is not set.
const DEFAULT_ROUNDS: u64 = 50;
/// Distinct keys of the input.
const KEYS: u64 = 40;
/// Records appended before each round.
pub(crate) const CHUNK: u64 = 3_000;
/// How long a round armed with a named point runs before the timer kills it.
const NAMED_POINT_TIME: Duration = Duration::from_secs(4);
/// The environment variable of the test hook that disables the sink's marker check.
const IGNORE_MARKERS: &str = "WEIR_TEST_IGNORE_MARKERS";

/// Where the job reads or writes.
#[derive(Debug, Clone)]
pub(crate) enum End {
    /// A Kafka topic on the broker.
    Kafka(String),
    /// A file (a source: followed while the job is a stream) or an output directory (a sink).
    File(PathBuf),
}

/// The job: source `in` (p=2 from Kafka, 1 from a file) → key-hash → `count` (p=2) →
/// forward → sink `out` (p=2). `bounded` makes the source end at what it has.
pub(crate) fn job_text(
    broker: &Broker,
    sandbox: &Sandbox,
    input: &End,
    output: &End,
    bounded: bool,
) -> String {
    job_text_with(broker, sandbox, input, output, bounded, NO_RESTART)
}

/// The `[restart]` table of the crash tests: a crash is the end of a round.
pub(crate) const NO_RESTART: &str = "strategy = \"none\"";

/// [`job_text`] with this `[restart]` table body.
pub(crate) fn job_text_with(
    broker: &Broker,
    sandbox: &Sandbox,
    input: &End,
    output: &End,
    bounded: bool,
    restart: &str,
) -> String {
    let mut text = format!(
        "name = \"kafkacount\"\n\
         [checkpoint]\ninterval = \"100ms\"\nmin_pause = \"0ms\"\nretained = 2\n\
         directory = {:?}\n\
         [restart]\n{restart}\n",
        sandbox.checkpoint_dir().display().to_string()
    );
    match input {
        End::Kafka(topic) => {
            let until = if bounded { "end" } else { "never" };
            write!(
                text,
                "[[source]]\nname = \"in\"\ntype = \"kafka\"\nparallelism = 2\n\
                 bootstrap = \"{}\"\ntopics = [\"{topic}\"]\nuntil = \"{until}\"\n",
                broker.bootstrap()
            )
            .unwrap();
        }
        End::File(path) => {
            write!(
                text,
                "[[source]]\nname = \"in\"\ntype = \"file\"\nformat = \"csv\"\nkey = 0\n\
                 value = 1\ntimestamp = 2\npath = {:?}\nfollow = {}\n",
                path.display().to_string(),
                !bounded
            )
            .unwrap();
        }
    }
    write!(
        text,
        "[[operator]]\nname = \"count\"\nmodule = {:?}\nparallelism = 2\n\
         inputs = [{{ from = \"in\", partition = \"key-hash\" }}]\n",
        weir_tests::guests::COUNT
    )
    .unwrap();
    match output {
        End::Kafka(topic) => write!(
            text,
            "[[sink]]\nname = \"out\"\ntype = \"kafka\"\nparallelism = 2\ninputs = [\"count\"]\n\
             bootstrap = \"{}\"\ntopic = \"{topic}\"\n\
             transactional_id_prefix = \"{topic}.tx\"\n",
            broker.bootstrap()
        )
        .unwrap(),
        End::File(dir) => write!(
            text,
            "[[sink]]\nname = \"out\"\ntype = \"file\"\nparallelism = 2\ninputs = [\"count\"]\n\
             path = {:?}\n",
            dir.display().to_string()
        )
        .unwrap(),
    }
    text
}

/// Input records `from..to`: key `k<i mod KEYS>`, value `v<i>`.
pub(crate) fn chunk(from: u64, to: u64) -> Vec<(String, String)> {
    (from..to)
        .map(|i| (format!("k{}", i % KEYS), format!("v{i}")))
        .collect()
}

/// Appends records to the job's input.
pub(crate) fn append(broker: &Broker, input: &End, records: &[(String, String)]) {
    match input {
        End::Kafka(topic) => {
            let rows: Vec<kafka::Produce<'_>> = records
                .iter()
                .map(|(k, v)| (None, Some(k.as_bytes()), v.as_bytes()))
                .collect();
            broker.produce(topic, &rows);
        }
        End::File(path) => {
            // A real time as the timestamp: the Kafka sink writes it as the records'
            // CreateTime, and the line numbers a csv source would take instead date from 1970,
            // which the broker's time-based retention may delete at any moment.
            let now = kafka::now_ms();
            let mut text = String::new();
            for (k, v) in records {
                writeln!(text, "{k},{v},{now}").unwrap();
            }
            use std::io::Write as _;
            let mut file = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap();
            file.write_all(text.as_bytes()).unwrap();
        }
    }
}

/// What a failure-free keyed count writes for `records`: "key\tn" for every count of every
/// key, sorted.
pub(crate) fn expected_counts(records: u64) -> Vec<String> {
    let mut per_key: BTreeMap<String, u64> = BTreeMap::new();
    for (key, _) in chunk(0, records) {
        *per_key.entry(key).or_default() += 1;
    }
    let mut lines: Vec<String> = per_key
        .iter()
        .flat_map(|(key, &n)| (1..=n).map(move |i| format!("{key}\t{i}")))
        .collect();
    lines.sort();
    lines
}

/// The job's output as sorted "key\tcount" lines; for a Kafka topic, also checks that each
/// key's counts rise within its partition, returning the problem if not.
pub(crate) fn output_lines(broker: &Broker, output: &End) -> Result<Vec<String>, String> {
    match output {
        End::File(dir) => {
            let mut lines = committed_lines(dir);
            lines.sort();
            Ok(lines)
        }
        End::Kafka(topic) => {
            let records = broker.read_all(topic, Isolation::ReadCommitted);
            let mut lines = Vec::with_capacity(records.len());
            // (partition, key) → the last count seen, in offset order.
            let mut last: BTreeMap<(i32, Vec<u8>), u64> = BTreeMap::new();
            let mut by_offset: Vec<&kafka::KafkaRecord> = records.iter().collect();
            by_offset.sort_by_key(|r| (r.partition, r.offset));
            for record in by_offset {
                let key = record.key.clone().unwrap_or_default();
                let count: u64 = std::str::from_utf8(&record.value)
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .ok_or_else(|| format!("a value is not a count: {:?}", record.value))?;
                let previous = last.insert((record.partition, key.clone()), count);
                if previous.is_some_and(|p| count <= p) {
                    return Err(format!(
                        "partition {}: key {} has count {count} after {} (offset {}): the \
                         output of a key is out of order or repeated",
                        record.partition,
                        String::from_utf8_lossy(&key),
                        previous.unwrap_or(0),
                        record.offset
                    ));
                }
                lines.push(format!("{}\t{count}", String::from_utf8_lossy(&key)));
            }
            lines.sort();
            Ok(lines)
        }
    }
}

/// Fails unless `output` holds exactly the counts of the first `records` records of the input
/// ([`expected_counts`]), each once; the failure names what differs after `context` (what the
/// test did, a log to read).
#[track_caller]
pub(crate) fn assert_exact_counts(broker: &Broker, output: &End, records: u64, context: &str) {
    let actual =
        output_lines(broker, output).unwrap_or_else(|problem| panic!("{context}{problem}"));
    if let Some(problem) = difference(&actual, &expected_counts(records)) {
        panic!("{context}{problem}");
    }
}

/// How `actual` differs from `expected` (both sorted), or `None`.
pub(crate) fn difference(actual: &[String], expected: &[String]) -> Option<String> {
    if actual == expected {
        return None;
    }
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for line in expected {
        *counts.entry(line).or_default() -= 1;
    }
    for line in actual {
        *counts.entry(line).or_default() += 1;
    }
    let extra: Vec<&str> = counts
        .iter()
        .filter(|&(_, &n)| n > 0)
        .map(|(&l, _)| l)
        .take(5)
        .collect();
    let missing: Vec<&str> = counts
        .iter()
        .filter(|&(_, &n)| n < 0)
        .map(|(&l, _)| l)
        .take(5)
        .collect();
    Some(format!(
        "{} records, expected {}: duplicates such as {extra:?}, missing such as {missing:?}",
        actual.len(),
        expected.len()
    ))
}

/// The kill of one round: a named point's `N`-th hit, or only the timer.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kill {
    /// At the `N`-th time the point is reached.
    At(KillPoint, u64),
    /// Only by the timer.
    Timer,
}

/// The points a job with `output` reaches (`alignment`: `count` has two upstream channels,
/// from a Kafka source's two subtasks only; `count` sets no timers).
fn points(input: &End, output: &End) -> Vec<KillPoint> {
    KillPoint::ALL
        .into_iter()
        .filter(|&p| p != KillPoint::TimerFiring)
        .filter(|&p| p != KillPoint::SinkCommitted || matches!(output, End::Kafka(_)))
        .filter(|&p| p != KillPoint::Alignment || matches!(input, End::Kafka(_)))
        .collect()
}

/// How many times a point is reached in a round's first half second or so.
fn nth_range(point: KillPoint) -> (u64, u64) {
    match point {
        KillPoint::ProcessBatch => (1, 30),
        KillPoint::Alignment => (1, 6),
        KillPoint::AfterSnapshot | KillPoint::StateWrite => (1, 20),
        KillPoint::MetadataWrite | KillPoint::BeforeCommit => (1, 3),
        KillPoint::SinkCommit | KillPoint::SinkCommitted => (1, 2),
        // Five or six tasks restore.
        KillPoint::Restore => (1, 5),
        KillPoint::TimerFiring => (1, 1),
    }
}

/// `rounds` kills: every point in turn, then timers, shuffled; never `restore` first.
fn plan(rng: &mut Rng, points: &[KillPoint], rounds: u64) -> Vec<Kill> {
    let mut plan: Vec<Kill> = (0..rounds)
        .map(
            |i| match points.get((i % (points.len() as u64 + 1)) as usize) {
                Some(&point) => {
                    let (lo, hi) = nth_range(point);
                    Kill::At(point, rng.between(lo, hi + 1))
                }
                None => Kill::Timer,
            },
        )
        .collect();
    for i in (1..plan.len()).rev() {
        plan.swap(i, rng.below(i as u64 + 1) as usize);
    }
    if let Some(first) = plan
        .iter()
        .position(|k| !matches!(k, Kill::At(KillPoint::Restore, _)))
    {
        plan.swap(0, first);
    }
    plan
}

/// Runs the stream job once with `kill`, ending it by the timer if the point is not reached
/// in time; returns whether the point was reached and the log.
pub(crate) fn crash_round(
    job: &Path,
    log: &Path,
    kill: Kill,
    timer: Duration,
    env: &[(&str, &str)],
) -> bool {
    let armed = match kill {
        Kill::At(point, nth) => Some(format!("{point}:{nth}")),
        Kill::Timer => None,
    };
    let mut vars: Vec<(&str, &str)> = env.to_vec();
    if let Some(armed) = &armed {
        vars.push((kill_point::ENV_VAR, armed));
    }
    let mut weir = Weir::run_with_env(job, &["--restore", "latest"], &vars, log);
    let started = Instant::now();
    while started.elapsed() < timer {
        if weir.try_exit().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let ended = weir.kill();
    let reached = matches!(ended.status.signal(), Some(9 | 6))
        && armed.as_ref().is_some_and(|armed| {
            let point = armed.split(':').next().unwrap_or_default();
            ended
                .stderr
                .contains(&format!("kill point `{point}` reached"))
        });
    let by_timer = ended.status.signal() == Some(9) && !reached;
    assert!(
        reached || by_timer,
        "a round ({kill:?}) ended with {} before any kill; stderr:\n{}",
        ended.status,
        ended.stderr
    );
    reached
}

/// The chaos test of one shape: `rounds` crashed rounds, then a bounded final run; returns
/// the problem with the output, if any.
/// `seed` is `WEIR_CHAOS_SEED`'s (printed with a failure); each shape draws from it xor `salt`.
fn chaos(
    label: &str,
    input: &End,
    output: &End,
    rounds: u64,
    seed: u64,
    salt: u64,
) -> Option<String> {
    let broker = kafka::broker_or_skip(label)?;
    let sandbox = Sandbox::new(label);
    let input = rooted(&sandbox, input);
    let output = rooted(&sandbox, output);
    prepare(broker, &input, &output);
    let stream = sandbox.join("stream.toml");
    let bounded = sandbox.join("bounded.toml");
    fs::write(&stream, job_text(broker, &sandbox, &input, &output, false)).unwrap();
    fs::write(&bounded, job_text(broker, &sandbox, &input, &output, true)).unwrap();

    let mut rng = Rng::new(seed ^ salt);
    let points = points(&input, &output);
    let kills = plan(&mut rng, &points, rounds);
    let mut reached: BTreeMap<String, u64> = points.iter().map(|p| (p.to_string(), 0)).collect();
    let mut history = format!(
        "{label}: seed {seed}, {rounds} rounds (repeat with WEIR_CHAOS_SEED={seed} \
         WEIR_KAFKA_ROUNDS=...)"
    );
    let mut records = 0;
    for (index, &kill) in kills.iter().enumerate() {
        append(broker, &input, &chunk(records, records + CHUNK));
        records += CHUNK;
        // A named point gets time to be reached; a timer kill lands anywhere in a round.
        let timer = match kill {
            Kill::At(..) => NAMED_POINT_TIME,
            Kill::Timer => Duration::from_millis(rng.between(200, 1_500)),
        };
        let log = sandbox.join(&format!("round-{index:03}.log"));
        let landed = crash_round(&stream, &log, kill, timer, &[]);
        if let (true, Kill::At(point, _)) = (landed, kill) {
            *reached.get_mut(&point.to_string()).unwrap() += 1;
        }
        let _ = write!(
            history,
            "\n  round {index}: {kill:?} after at most {timer:?}: {}",
            if landed {
                "killed there"
            } else {
                "killed by the timer"
            }
        );
        eprintln!("{label}: round {index}: {kill:?}: landed {landed}");
    }
    let ended = run_cli(
        &bounded,
        &["--restore", "latest"],
        &sandbox.join("final.log"),
    );
    if ended.code() != Some(0) {
        return Some(format!(
            "the final run ended with {}\n{history}\nits stderr:\n{}",
            ended.status, ended.stderr
        ));
    }
    let missed: Vec<&String> = reached
        .iter()
        .filter(|&(_, &n)| n == 0)
        .map(|(p, _)| p)
        .collect();
    assert!(
        missed.is_empty(),
        "no round died at {missed:?}: those points were not tested\n{history}"
    );
    let actual = match output_lines(broker, &output) {
        Ok(lines) => lines,
        // The rounds first, the verdict last: a long log is read from its end.
        Err(problem) => return Some(format!("{history}\n{problem}")),
    };
    if let Some(d) = difference(&actual, &expected_counts(records)) {
        return Some(format!("{history}\n{d}"));
    }
    let (sink, result) = match &output {
        End::Kafka(_) => (
            "exactly-once Kafka sink",
            "read_committed output identical to an undisturbed run, in order per key",
        ),
        End::File(_) => (
            "exactly-once file sink",
            "committed output identical to an undisturbed run",
        ),
    };
    let shape = format!(
        "{label}: count p=2, {sink}",
        label = label.replace("-to-", " → ")
    );
    let timers = kills.len() as u64 - reached.values().sum::<u64>();
    for (point, n) in reached
        .iter()
        .map(|(p, n)| (format!("kill point `{p}`"), *n))
        .chain([("a random moment".to_owned(), timers)])
    {
        report::record(&report::Row {
            area: "kafka",
            scenario: &format!("SIGKILL at {point} ({shape})"),
            rounds: n,
            faults: &format!("{n} kills out of {rounds} rounds"),
            result,
        });
    }
    None
}

/// `end` with a fresh topic name or a path in the sandbox.
pub(crate) fn rooted(sandbox: &Sandbox, end: &End) -> End {
    match end {
        End::Kafka(name) => End::Kafka(kafka::unique(name)),
        End::File(name) => End::File(sandbox.join(&name.display().to_string())),
    }
}

/// A Kafka input topic (`words…`) and output topic (`counts…`) of new names, created by
/// [`prepare`]: the ends of most Kafka → count → Kafka jobs here.
pub(crate) fn kafka_topics(broker: &Broker) -> (End, End) {
    let input = End::Kafka(kafka::unique("words"));
    let output = End::Kafka(kafka::unique("counts"));
    prepare(broker, &input, &output);
    (input, output)
}

/// Creates the topics (4 input partitions, 3 output) and the input file.
pub(crate) fn prepare(broker: &Broker, input: &End, output: &End) {
    match input {
        End::Kafka(topic) => broker.create_topic(topic, 4),
        End::File(path) => fs::write(path, "").unwrap(),
    }
    if let End::Kafka(topic) = output {
        broker.create_topic(topic, 3);
    }
}

fn rounds() -> u64 {
    number_from_env("WEIR_KAFKA_ROUNDS", DEFAULT_ROUNDS).max(1)
}

#[test]
fn kafka_to_kafka_survives_kills_at_every_point_exactly_once() {
    let seed = seed_from_env("WEIR_CHAOS_SEED", DEFAULT_SEED);
    let input = End::Kafka("words".into());
    let output = End::Kafka("counts".into());
    if let Some(problem) = chaos("kafka-to-kafka", &input, &output, rounds(), seed, 0) {
        panic!("{problem}");
    }
}

#[test]
fn file_to_kafka_survives_kills_exactly_once() {
    let seed = seed_from_env("WEIR_CHAOS_SEED", DEFAULT_SEED);
    let input = End::File("input.csv".into());
    let output = End::Kafka("counts".into());
    let rounds = rounds().div_ceil(4).max(10);
    if let Some(problem) = chaos("file-to-kafka", &input, &output, rounds, seed, 1) {
        panic!("{problem}");
    }
}

#[test]
fn kafka_to_file_survives_kills_exactly_once() {
    let seed = seed_from_env("WEIR_CHAOS_SEED", DEFAULT_SEED);
    let input = End::Kafka("words".into());
    let output = End::File("out".into());
    let rounds = rounds().div_ceil(4).max(10);
    if let Some(problem) = chaos("kafka-to-file", &input, &output, rounds, seed, 2) {
        panic!("{problem}");
    }
}

/// A crash right after the sink committed a checkpoint's transaction, then a restore of that
/// checkpoint: with the marker check, nothing is sent twice; with it disabled, the restored
/// output is sent again, and the same check that passes the chaos tests reports duplicates.
#[test]
fn the_check_catches_the_duplicates_the_marker_check_prevents() {
    let Some(broker) = kafka::broker_or_skip("marker-check") else {
        return;
    };
    for disabled in [false, true] {
        let sandbox = Sandbox::new(if disabled {
            "markers-off"
        } else {
            "markers-on"
        });
        let (input, output) = kafka_topics(broker);
        let stream = sandbox.join("stream.toml");
        let bounded = sandbox.join("bounded.toml");
        fs::write(&stream, job_text(broker, &sandbox, &input, &output, false)).unwrap();
        fs::write(&bounded, job_text(broker, &sandbox, &input, &output, true)).unwrap();
        append(broker, &input, &chunk(0, CHUNK));
        let env: &[(&str, &str)] = if disabled {
            &[(IGNORE_MARKERS, "1")]
        } else {
            &[]
        };
        let kill = Kill::At(KillPoint::SinkCommitted, 1);
        assert!(
            crash_round(&stream, &sandbox.join("crash.log"), kill, CLI_TIMEOUT, env),
            "the sink never committed"
        );
        Weir::run_with_env(
            &bounded,
            &["--restore", "latest"],
            env,
            &sandbox.join("final.log"),
        )
        .wait(CLI_TIMEOUT)
        .assert_code(0, "the final run");
        let actual = output_lines(broker, &output);
        let problem = actual
            .as_ref()
            .err()
            .cloned()
            .or_else(|| difference(actual.as_ref().unwrap(), &expected_counts(CHUNK)));
        if disabled {
            let problem = problem.expect(
                "with the marker check disabled the restore sent the committed output again, \
                 yet the check saw nothing wrong",
            );
            assert!(
                problem.contains("duplicates") || problem.contains("repeated"),
                "{problem}"
            );
        } else {
            assert_eq!(problem, None, "with the marker check");
        }
    }
}

/// The shipped `examples/jobs/kafka-wordcount.toml`, pointed at the test broker (and drained
/// with `until = "end"`), counts every word of its input exactly once.
#[test]
fn the_shipped_kafka_wordcount_example_runs() {
    let Some(broker) = kafka::broker_or_skip("kafka-wordcount-example") else {
        return;
    };
    let sandbox = Sandbox::new("kafka-wordcount-example");
    let example = crate::support::workspace_root().join("examples/jobs/kafka-wordcount.toml");
    let text = fs::read_to_string(&example).unwrap();
    let lines_topic = kafka::unique("lines");
    let counts_topic = kafka::unique("word-counts");
    broker.create_topic(&lines_topic, 4);
    broker.create_topic(&counts_topic, 4);
    let text = text
        .replace("localhost:9092", &broker.bootstrap())
        .replace(
            "topics = [\"lines\"]",
            &format!("topics = [\"{lines_topic}\"]\nuntil = \"end\""),
        )
        .replace("\"word-counts\"", &format!("\"{counts_topic}\""))
        .replace(
            "\"checkpoints/kafka-wordcount\"",
            &format!("{:?}", sandbox.checkpoint_dir().display().to_string()),
        )
        .replace(
            "\"../../target/wasm32-unknown-unknown/release/weir_example_split.wasm\"",
            &format!("{:?}", weir_tests::guests::SPLIT),
        )
        .replace(
            "\"../../target/wasm32-unknown-unknown/release/weir_example_count.wasm\"",
            &format!("{:?}", weir_tests::guests::COUNT),
        );
    fs::write(sandbox.job_path(), text).unwrap();
    let input = ["the weir holds", "the river", "holds the water"];
    let rows: Vec<kafka::Produce<'_>> = input.iter().map(|l| (None, None, l.as_bytes())).collect();
    broker.produce(&lines_topic, &rows);
    run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log")).assert_code(0, "the example");
    let actual = output_lines(broker, &End::Kafka(counts_topic)).unwrap_or_else(|p| panic!("{p}"));
    let mut expected: Vec<String> = [
        "the\t1", "the\t2", "the\t3", "weir\t1", "holds\t1", "holds\t2", "river\t1", "water\t1",
    ]
    .map(String::from)
    .to_vec();
    expected.sort();
    assert_eq!(actual, expected);
}

/// The subtask of `parallelism` that owns partition `partition` of `topic`: the assignment
/// docs/JOB.md states, `(fnv1a(topic) + partition) mod parallelism`.
fn owner(topic: &str, partition: u64, parallelism: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in topic.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash.wrapping_add(partition) % parallelism
}

/// A run at parallelism 3 dies inside subtask 2's first transaction; a fresh start of the job
/// at parallelism 2 (no checkpoint to restore) fences transactional id `<prefix>-2`, which it
/// never uses itself, so the dead transaction does not hold back read_committed consumers of the
/// output forever.
#[test]
fn a_start_at_a_smaller_parallelism_fences_the_ids_of_the_larger_one() {
    let Some(broker) = kafka::broker_or_skip("fence-larger-parallelism") else {
        return;
    };
    // One input partition, owned by subtask 2 of 3: only sink subtask 2 receives records.
    let input = std::iter::repeat_with(|| kafka::unique("narrow"))
        .find(|t| owner(t, 0, 3) == 2)
        .unwrap();
    broker.create_topic(&input, 1);
    let output = kafka::unique("fenced");
    broker.create_topic(&output, 2);
    let values: Vec<String> = (0..100).map(|i| format!("v{i}")).collect();
    let rows: Vec<kafka::Produce<'_>> = values.iter().map(|v| (None, None, v.as_bytes())).collect();
    broker.produce(&input, &rows);
    let job = |sandbox: &Sandbox, parallelism: u32, until: &str| {
        format!(
            "name = \"fencing\"\n[checkpoint]\ninterval = \"100ms\"\ndirectory = {:?}\n\
             [restart]\nstrategy = \"none\"\n\
             [[source]]\nname = \"in\"\ntype = \"kafka\"\nparallelism = {parallelism}\n\
             bootstrap = \"{bs}\"\ntopics = [\"{input}\"]\nuntil = \"{until}\"\n\
             [[sink]]\nname = \"out\"\ntype = \"kafka\"\nparallelism = {parallelism}\n\
             inputs = [\"in\"]\nbootstrap = \"{bs}\"\ntopic = \"{output}\"\n\
             transactional_id_prefix = \"{output}.tx\"\n",
            sandbox.checkpoint_dir().display().to_string(),
            bs = broker.bootstrap()
        )
    };
    let wide = Sandbox::new("fence-wide");
    fs::write(wide.job_path(), job(&wide, 3, "never")).unwrap();
    let kill = Kill::At(KillPoint::SinkCommit, 1);
    assert!(
        crash_round(
            &wide.job_path(),
            &wide.join("weir.log"),
            kill,
            CLI_TIMEOUT,
            &[]
        ),
        "sink subtask 2 never committed"
    );
    let narrow = Sandbox::new("fence-narrow");
    fs::write(narrow.job_path(), job(&narrow, 2, "end")).unwrap();
    let ended = run_cli(&narrow.job_path(), &[], &narrow.join("weir.log"));
    ended.assert_code(0, "the run at parallelism 2");
    assert!(
        ended
            .stderr
            .contains(&format!("fenced transactional id \"{output}.tx-2\"")),
        "{}",
        ended.stderr
    );
    let seen = broker.read_all(&output, Isolation::ReadCommitted);
    assert_eq!(
        seen.len(),
        values.len(),
        "a read_committed consumer sees the new run's output, past the dead transaction"
    );
}

/// `delivery = "at-least-once"` through crashes: every record of an undisturbed run is there
/// (some maybe twice), nothing else is, and no marker topic is made.
#[test]
fn an_at_least_once_kafka_sink_loses_nothing_through_crashes() {
    let Some(broker) = kafka::broker_or_skip("at-least-once") else {
        return;
    };
    let sandbox = Sandbox::new("kafka-at-least-once");
    let (input, output) = kafka_topics(broker);
    let End::Kafka(output_topic) = &output else {
        unreachable!()
    };
    let at_least_once = |text: String| {
        text.replace(
            &format!("transactional_id_prefix = \"{output_topic}.tx\"\n"),
            "delivery = \"at-least-once\"\n",
        )
    };
    let stream = sandbox.join("stream.toml");
    let bounded = sandbox.join("bounded.toml");
    fs::write(
        &stream,
        at_least_once(job_text(broker, &sandbox, &input, &output, false)),
    )
    .unwrap();
    fs::write(
        &bounded,
        at_least_once(job_text(broker, &sandbox, &input, &output, true)),
    )
    .unwrap();
    let mut records = 0;
    for (round, timer) in [700, 1_100, 400].into_iter().enumerate() {
        append(broker, &input, &chunk(records, records + CHUNK));
        records += CHUNK;
        let log = sandbox.join(&format!("round-{round}.log"));
        crash_round(
            &stream,
            &log,
            Kill::Timer,
            Duration::from_millis(timer),
            &[],
        );
    }
    run_cli(
        &bounded,
        &["--restore", "latest"],
        &sandbox.join("final.log"),
    )
    .assert_code(0, "the final run");
    let records_seen = broker.read_all(output_topic, Isolation::ReadCommitted);
    let mut seen: Vec<String> = records_seen
        .iter()
        .map(|r| {
            format!(
                "{}\t{}",
                String::from_utf8_lossy(r.key.as_deref().unwrap_or_default()),
                String::from_utf8_lossy(&r.value)
            )
        })
        .collect();
    seen.sort();
    let expected = expected_counts(records);
    let mut distinct = seen.clone();
    distinct.dedup();
    assert_eq!(
        distinct,
        expected,
        "at-least-once must hold every record of the undisturbed run and nothing else ({} \
         records seen, {} expected)",
        seen.len(),
        expected.len()
    );
    let markers = "weir.kafkacount.out.markers".to_owned();
    let consumer = broker.consumer("weir-tests-markers", Isolation::ReadUncommitted);
    use rdkafka::consumer::Consumer as _;
    let metadata = consumer
        .fetch_metadata(Some(&markers), kafka::CLIENT_TIMEOUT)
        .unwrap();
    assert!(
        metadata
            .topics()
            .iter()
            .all(|t| t.name() != markers || t.error().is_some()),
        "an at-least-once sink made a marker topic"
    );
}

/// The exactly-once Kafka sink at other parallelisms, through crashes (the count before it
/// rescales with it, so each key's counts reach it through a forward edge, in order). A run
/// with both at parallelism 3 dies after a checkpoint completed and before any sink subtask committed its
/// output (`before-commit`). A restore at 1, where subtask 0 finishes old subtasks 1 and 2
/// under their transactional ids, dies right after its second commit. A second restore of the
/// same checkpoint at 1 must send only what no committed marker accounts for — never old
/// subtask 1's output again — then runs on until a kill; so does a run at 2; a final run at 4
/// drains the input. A
/// read_committed reader sees every count once (and is not held back by a transaction of an
/// id no run uses any more).
#[test]
fn a_kafka_sink_rescales_exactly_once_through_crashes() {
    let Some(broker) = kafka::broker_or_skip("kafka-sink-rescale") else {
        return;
    };
    let sandbox = Sandbox::new("kafka-sink-rescale");
    let (input, output) = kafka_topics(broker);
    let End::Kafka(output_topic) = &output else {
        unreachable!()
    };
    // The job with the count and the sink at `parallelism` (so each key's counts stay in
    // order, through a forward edge), checkpointing every `interval`.
    let job = |parallelism: u32, interval: &str, bounded: bool| {
        let text = job_text(broker, &sandbox, &input, &output, bounded);
        let count_and_sink = "parallelism = 2\ninputs";
        assert_eq!(text.matches(count_and_sink).count(), 2, "{text}");
        assert!(text.contains("interval = \"100ms\""));
        let text = text
            .replace(
                count_and_sink,
                &format!("parallelism = {parallelism}\ninputs"),
            )
            .replace("interval = \"100ms\"", &format!("interval = {interval:?}"));
        let path = sandbox.join(&format!("p{parallelism}.toml"));
        fs::write(&path, text).unwrap();
        path
    };
    let resent = |log: &Path, subtask: u32| {
        fs::read_to_string(log).unwrap().contains(&format!(
            "again as transactional id \"{output_topic}.tx-{subtask}\""
        ))
    };

    // At 3: the first checkpoint comes after the whole chunk reached the sink, and completes.
    append(broker, &input, &chunk(0, CHUNK));
    let log = sandbox.join("p3.log");
    let kill = Kill::At(KillPoint::BeforeCommit, 1);
    assert!(
        crash_round(&job(3, "2s", false), &log, kill, CLI_TIMEOUT, &[]),
        "the first checkpoint never completed"
    );

    // At 1: subtask 0 sends its own output and old subtask 1's, and dies.
    let log = sandbox.join("p1.log");
    let kill = Kill::At(KillPoint::SinkCommitted, 2);
    assert!(
        crash_round(&job(1, "100ms", false), &log, kill, CLI_TIMEOUT, &[]),
        "the restore at parallelism 1 never committed twice"
    );
    let text = fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("which a rescale handed to this one") && resent(&log, 1),
        "subtask 0 did not send old subtask 1's output under its id:\n{text}"
    );

    // At 1 again, from the same checkpoint: old subtask 1's output committed, so subtask 0
    // does not send it again; it runs on until a kill.
    append(broker, &input, &chunk(CHUNK, 2 * CHUNK));
    let log = sandbox.join("p1-again.log");
    let kill = Kill::At(KillPoint::SinkCommit, 4);
    crash_round(&job(1, "100ms", false), &log, kill, NAMED_POINT_TIME, &[]);
    assert!(
        !resent(&log, 1),
        "old subtask 1's output was sent again after its marker committed:\n{}",
        fs::read_to_string(&log).unwrap()
    );

    // At 2, from wherever that got, until a kill; then at 4, bounded.
    append(broker, &input, &chunk(2 * CHUNK, 3 * CHUNK));
    let log = sandbox.join("p2.log");
    let kill = Kill::At(KillPoint::SinkCommit, 4);
    crash_round(&job(2, "100ms", false), &log, kill, NAMED_POINT_TIME, &[]);
    append(broker, &input, &chunk(3 * CHUNK, 4 * CHUNK));
    run_cli(
        &job(4, "100ms", true),
        &["--restore", "latest"],
        &sandbox.join("p4.log"),
    )
    .assert_code(0, "the final run at parallelism 4");
    assert_exact_counts(broker, &output, 4 * CHUNK, "");
}

/// A run killed right after the sink committed a checkpoint's output (`sink-committed`), or
/// while it was committing it (`sink-commit`), then restored with the job renamed (the default
/// transactional id prefix, `weir.<job>.<sink>`, and the marker topic after it change with the
/// name) or with `transactional_id_prefix` changed. The restore must look for the markers, and
/// fence, under the ids the checkpoint's output was written under: a read_committed reader
/// then sees every count once — no output of the committed checkpoint sent again under the new
/// ids, and no transaction the dead run left open under the old ones holding the reader back.
#[test]
fn a_restore_with_other_transactional_ids_sends_nothing_twice() {
    let Some(broker) = kafka::broker_or_skip("kafka-sink-other-ids") else {
        return;
    };
    for change in ["renamed job", "changed prefix"] {
        for kill in [KillPoint::SinkCommitted, KillPoint::SinkCommit] {
            let label = format!("{change}, killed at {kill}");
            let sandbox = Sandbox::new(&format!("kafka-sink-other-ids-{}", kafka::unique("")));
            let (input, output) = kafka_topics(broker);
            let End::Kafka(output_topic) = &output else {
                unreachable!()
            };
            let explicit = format!("transactional_id_prefix = \"{output_topic}.tx\"\n");
            // The job as first run, and as restored: its name and prefix, and the prefix the
            // first run commits under.
            let first_name = kafka::unique("first");
            let (first, restored, old_prefix) = if change == "renamed job" {
                let named = |name: &str, text: String| {
                    text.replace(&explicit, "")
                        .replace("name = \"kafkacount\"", &format!("name = \"{name}\""))
                };
                let second_name = kafka::unique("second");
                (
                    named(
                        &first_name,
                        job_text(broker, &sandbox, &input, &output, false),
                    ),
                    named(
                        &second_name,
                        job_text(broker, &sandbox, &input, &output, true),
                    ),
                    format!("weir.{first_name}.out"),
                )
            } else {
                let prefixed = |prefix: &str, text: String| {
                    text.replace(
                        &explicit,
                        &format!("transactional_id_prefix = \"{prefix}\"\n"),
                    )
                };
                (
                    prefixed(
                        &format!("{output_topic}.tx"),
                        job_text(broker, &sandbox, &input, &output, false),
                    ),
                    prefixed(
                        &format!("{output_topic}.other"),
                        job_text(broker, &sandbox, &input, &output, true),
                    ),
                    format!("{output_topic}.tx"),
                )
            };
            let stream = sandbox.join("first.toml");
            let bounded = sandbox.join("restored.toml");
            fs::write(&stream, first).unwrap();
            fs::write(&bounded, restored).unwrap();
            append(broker, &input, &chunk(0, CHUNK));
            assert!(
                crash_round(
                    &stream,
                    &sandbox.join("crash.log"),
                    Kill::At(kill, 1),
                    CLI_TIMEOUT,
                    &[]
                ),
                "{label}: the sink never reached {kill}"
            );
            let ended = run_cli(
                &bounded,
                &["--restore", "latest"],
                &sandbox.join("restored.log"),
            );
            ended.assert_code(0, &format!("{label}: the restored run"));
            let context = format!(
                "{label}, the restored run's stderr:\n{}\n{label}: ",
                ended.stderr
            );
            assert_exact_counts(broker, &output, CHUNK, &context);
            if kill == KillPoint::SinkCommit {
                assert!(
                    ended
                        .stderr
                        .contains(&format!("again as transactional id \"{old_prefix}-")),
                    "{label}: the output whose commit the kill cut short was not sent again \
                     under the id it was written under:\n{}",
                    ended.stderr
                );
            }
        }
    }
    report::record(&report::Row {
        area: "kafka",
        scenario: "restore of an exactly-once Kafka sink's checkpoint under other \
                   transactional ids (job renamed; `transactional_id_prefix` changed)",
        rounds: 4,
        faults: "SIGKILL at kill point `sink-committed` and at `sink-commit`, then \
                 `--restore latest` with the new name or prefix (and so a new marker topic)",
        result: "read_committed output identical to an undisturbed run: committed output \
                 found under the checkpoint's ids and not sent again, the transaction the \
                 kill left open fenced and re-sent under its own id",
    });
}
