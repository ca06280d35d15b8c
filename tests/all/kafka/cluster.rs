//! Exactly-once on a real Kafka cluster whose brokers fail: the Kafka → count → Kafka job of
//! `exactly_once.rs` on three Apache Kafka nodes (replication factor 3,
//! `min.insync.replicas` 2), SIGKILLed at random moments and after checkpoints while, in the
//! same round, a broker is killed and started again — the leader of an output partition, or
//! the transaction coordinator — or paused (SIGSTOP) for longer than the sink's transaction
//! timeout. A final run restores and finishes; what a read_committed consumer sees must be what
//! a run without failures writes, and each key's counts in order.
//!
//! The emulator the other tests may run cannot stand here: it is one process, with no
//! replicas, no leader to lose and no coordinator to move. Each round takes seconds more than
//! the single-broker chaos test's (a killed node's JVM starts again while the job runs), so CI
//! runs a few rounds; `WEIR_CLUSTER_ROUNDS` sets them (`scripts/reliability.sh` runs more) and
//! `WEIR_CHAOS_SEED` the seed, both printed with every failure.
//!
//! The job restarts itself (fixed delay, attempts enough for any round): a broker that goes
//! away may fail a task — a commit that cannot reach the coordinator, a produce past its
//! timeout — and that failure, restored from the latest checkpoint, is part of what is tested.

use std::fmt::Write as _;
use std::fs;
use std::time::{Duration, Instant};

use weir::kill_point::KillPoint;

use crate::kafka::exactly_once::{
    CHUNK, End, Kill, append, assert_exact_counts, chunk, crash_round, job_text_with, prepare,
    rooted,
};
use crate::kafka::{self, Broker};
use crate::support::report;
use crate::support::{Rng, Sandbox, Weir, number_from_env, seed_from_env};

/// The seed when `WEIR_CHAOS_SEED` is not set.
const DEFAULT_SEED: u64 = 0x5eed_c105_7e00_0003;
/// Rounds when `WEIR_CLUSTER_ROUNDS` is not set: each fault at least twice.
const DEFAULT_ROUNDS: u64 = 6;
/// The sink's `transaction.timeout.ms`: a paused broker is paused longer than this, so the
/// transaction it coordinates expires (the brokers look every second: see
/// `weir-test-servers`' `server_properties`).
const TRANSACTION_TIMEOUT: Duration = Duration::from_secs(6);
/// How long the cluster takes to fence a node that stopped answering and to elect new leaders
/// for its partitions: `broker.session.timeout.ms` of the test cluster (`weir-test-servers`).
const FAILOVER: Duration = Duration::from_secs(3);
/// How long a round's input takes to arrive: past every fault's end.
const FEED_TIME: Duration = Duration::from_secs(8);
/// The job's restart strategy: failures that broker faults cause are recovered by the job.
pub(crate) const RESTART: &str = "strategy = \"fixed-delay\"\nattempts = 1000\ndelay = \"200ms\"";
/// The longest the final run, which restores and reads to the end, may take.
const FINAL_RUN: Duration = Duration::from_secs(120);

/// What happens to the cluster during a round.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BrokerFault {
    /// The leader of partition `partition` of the output topic is SIGKILLed `after` the round
    /// starts, and started again at once (its JVM starts while the job runs).
    KillLeader { partition: i32, after: Duration },
    /// The transaction coordinator (the leader of `__transaction_state`) is SIGKILLed `after`
    /// the round starts, and started again at once.
    KillCoordinator { after: Duration },
    /// The transaction coordinator is paused (SIGSTOP) `after` the round starts, for longer than
    /// the transaction timeout, then resumed.
    PauseCoordinator { after: Duration },
}

impl BrokerFault {
    /// The fault of round `index`: the three in turn, each at a random moment.
    pub(crate) fn of_round(index: u64, rng: &mut Rng) -> BrokerFault {
        let after = Duration::from_millis(rng.between(200, 1_500));
        match index % 3 {
            0 => BrokerFault::KillLeader {
                partition: rng.below(3) as i32,
                after,
            },
            1 => BrokerFault::KillCoordinator { after },
            _ => BrokerFault::PauseCoordinator { after },
        }
    }

    /// How long the round's job runs before the timer kills it: a random moment past the
    /// fault's end (the failover, or the pause), or, for a kill at a named point, long enough
    /// for the job to reach it once the cluster serves again.
    fn round_time(self, kill: Kill, rng: &mut Rng) -> Duration {
        let fault_end = match self {
            BrokerFault::KillLeader { after, .. } | BrokerFault::KillCoordinator { after } => {
                after + FAILOVER
            }
            BrokerFault::PauseCoordinator { after } => after + pause_time(),
        };
        match kill {
            Kill::Timer => fault_end + Duration::from_millis(rng.between(0, 5_000)),
            Kill::At(..) => fault_end + Duration::from_secs(20),
        }
    }

    /// Does it to `cluster`, from the start of the round; returns what it did, for the history.
    pub(crate) fn inject(self, cluster: &Broker, output: &str) -> String {
        let started = Instant::now();
        let (after, target) = match self {
            BrokerFault::KillLeader { partition, after } => (after, (output, partition)),
            BrokerFault::KillCoordinator { after } | BrokerFault::PauseCoordinator { after } => {
                (after, ("__transaction_state", 0))
            }
        };
        std::thread::sleep(after.saturating_sub(started.elapsed()));
        // No leader now (an election still under way after the last round): a node at random.
        let node = cluster
            .leader_node(target.0, target.1)
            .unwrap_or(after.subsec_millis() as usize % cluster.nodes());
        match self {
            BrokerFault::PauseCoordinator { .. } => {
                cluster.pause_node(node);
                std::thread::sleep(pause_time());
                cluster.resume_node(node);
                format!("paused node {node} for {:?}", pause_time())
            }
            _ => {
                cluster.kill_node(node);
                let down = Instant::now();
                cluster.restart_node(node);
                format!(
                    "killed node {node}; it answered again after {:.1?}",
                    down.elapsed()
                )
            }
        }
    }
}

/// Appends `records` to the job's `input` in slices over [`FEED_TIME`], so that the job has
/// input, and checkpoints have output to commit, before, during and after the round's fault
/// (the producer retries through it, as an idempotent producer does).
fn feed(cluster: &Broker, input: &End, records: &[(String, String)]) {
    const SLICES: usize = 20;
    let started = Instant::now();
    for (i, slice) in records.chunks(records.len().div_ceil(SLICES)).enumerate() {
        append(cluster, input, slice);
        let next = FEED_TIME * (i as u32 + 1) / SLICES as u32;
        std::thread::sleep(next.saturating_sub(started.elapsed()));
    }
}

/// The Kafka sink's `properties` line of the jobs on the cluster: a transaction timeout that a
/// paused broker outlasts.
pub(crate) fn sink_properties() -> String {
    format!(
        "properties = {{ \"transaction.timeout.ms\" = \"{}\" }}\n",
        TRANSACTION_TIMEOUT.as_millis()
    )
}

/// How long a paused broker stays paused: past the transaction timeout and the broker's look
/// for expired transactions, so a transaction it coordinates is aborted.
fn pause_time() -> Duration {
    TRANSACTION_TIMEOUT + Duration::from_secs(2)
}

/// How the job is killed in a round: at a random moment (the timer alone), or after a
/// checkpoint — after a sink subtask committed its transaction, or after a task's snapshot — at
/// the n-th time: late enough (while input arrives, the two sink subtasks commit up to 20 times
/// a second when the cluster serves, and tasks snapshot about 60 times) to fall during or after
/// the broker's fault more often than not.
fn weir_kill(index: u64, rng: &mut Rng) -> Kill {
    match index % 4 {
        0 | 2 => Kill::Timer,
        1 => Kill::At(KillPoint::SinkCommitted, rng.between(5, 40)),
        _ => Kill::At(KillPoint::AfterSnapshot, rng.between(30, 200)),
    }
}

#[test]
fn kafka_to_kafka_on_a_cluster_survives_kills_of_weir_and_of_brokers_exactly_once() {
    let Some(turn) = kafka::shared_cluster_or_skip("kafka_to_kafka_on_a_cluster") else {
        return;
    };
    let cluster: &Broker = &turn;
    let seed = seed_from_env("WEIR_CHAOS_SEED", DEFAULT_SEED);
    let rounds = number_from_env("WEIR_CLUSTER_ROUNDS", DEFAULT_ROUNDS).max(1);
    let mut rng = Rng::new(seed);
    let sandbox = Sandbox::new("kafka-cluster");
    let input = rooted(&sandbox, &End::Kafka("words".into()));
    let output = rooted(&sandbox, &End::Kafka("counts".into()));
    let End::Kafka(output_topic) = &output else {
        unreachable!("a topic")
    };
    prepare(cluster, &input, &output);
    let job = |bounded: bool| {
        // The sink is the job file's last table.
        job_text_with(cluster, &sandbox, &input, &output, bounded, RESTART) + &sink_properties()
    };
    let stream = sandbox.join("stream.toml");
    let bounded = sandbox.join("bounded.toml");
    fs::write(&stream, job(false)).unwrap();
    fs::write(&bounded, job(true)).unwrap();

    let mut history = format!(
        "kafka-to-kafka on a 3-node cluster: seed {seed}, {rounds} rounds (repeat with \
         WEIR_CHAOS_SEED={seed} WEIR_CLUSTER_ROUNDS={rounds})"
    );
    let mut records = 0;
    let mut faults = [0u64; 3];
    let (mut armed, mut landed_at_points) = (0u64, 0u64);
    for index in 0..rounds {
        records += CHUNK;
        let fault = BrokerFault::of_round(index, &mut rng);
        let kill = weir_kill(index, &mut rng);
        let timer = fault.round_time(kill, &mut rng);
        let log = sandbox.join(&format!("round-{index:03}.log"));
        let input_records = chunk(records - CHUNK, records);
        let (landed, did) = std::thread::scope(|scope| {
            let feeding = scope.spawn(|| feed(cluster, &input, &input_records));
            let injected = scope.spawn(|| fault.inject(cluster, output_topic));
            let landed = crash_round(&stream, &log, kill, timer, &[]);
            feeding.join().expect("the feeding thread");
            (landed, injected.join().expect("the fault's thread"))
        });
        faults[(index % 3) as usize] += 1;
        if let Kill::At(..) = kill {
            armed += 1;
            landed_at_points += u64::from(landed);
        }
        let _ = write!(
            history,
            "\n  round {index}: {fault:?}: {did}; weir {kill:?} within {timer:?}: {}",
            if landed {
                "killed there"
            } else {
                "killed by the timer"
            }
        );
        eprintln!("kafka-cluster: round {index}: {fault:?}: {did}; {kill:?}: landed {landed}");
    }
    assert!(
        armed == 0 || landed_at_points > 0,
        "{history}\nno kill after a checkpoint landed in {armed} rounds: those were not tested"
    );
    let ended = Weir::run(
        &bounded,
        &["--restore", "latest"],
        &sandbox.join("final.log"),
    )
    .wait(FINAL_RUN);
    assert!(
        ended.code() == Some(0),
        "{history}\nthe final run ended with {}; its stderr:\n{}",
        ended.status,
        ended.stderr
    );
    assert_exact_counts(cluster, &output, records, &format!("{history}\n"));
    for (fault, n) in [
        (
            "the leader of an output partition SIGKILLed and restarted",
            faults[0],
        ),
        (
            "the transaction coordinator SIGKILLed and restarted",
            faults[1],
        ),
        (
            "the transaction coordinator paused (SIGSTOP) past the transaction timeout",
            faults[2],
        ),
    ] {
        report::record(&report::Row {
            area: "kafka-cluster",
            scenario: &format!(
                "{fault}, weir SIGKILLed at random or after checkpoints (count p=2, 3 Apache \
                 Kafka nodes, replication 3, min.insync.replicas 2)"
            ),
            rounds: n,
            faults: &format!("{n} broker faults and {n} kills of weir"),
            result: "read_committed output identical to an undisturbed run, in order per key",
        });
    }
}

/// A restore while a broker is down: the sink reads its commit markers to learn which of the
/// checkpoint's transactions committed, and the node that leads the marker topic is dead until
/// the cluster fences it and elects another leader. The read waits for the cluster, as the
/// source's reads do, and if the cluster takes longer than a request may, the attempt fails
/// and the restart strategy tries again: a broker away is no reason to refuse the checkpoint
/// as one the job cannot take up (which stops the run at once, exit 3). Nothing is sent twice.
#[test]
fn a_restore_while_the_marker_topics_leader_is_down_waits_for_the_cluster_and_sends_nothing_twice()
{
    let Some(turn) = kafka::shared_cluster_or_skip("a_restore_while_a_leader_is_down") else {
        return;
    };
    let cluster: &Broker = &turn;
    let sandbox = Sandbox::new("kafka-cluster-restore");
    let input = rooted(&sandbox, &End::Kafka("words".into()));
    let output = rooted(&sandbox, &End::Kafka("counts".into()));
    let End::Kafka(output_topic) = &output else {
        unreachable!("a topic")
    };
    prepare(cluster, &input, &output);
    let stream = sandbox.join("stream.toml");
    let bounded = sandbox.join("bounded.toml");
    // With restarts, as a user runs it: reads that fail until the cluster has elected new
    // leaders may fail the attempt, and the next one goes on.
    let job = |bounded| job_text_with(cluster, &sandbox, &input, &output, bounded, RESTART);
    fs::write(&stream, job(false)).unwrap();
    fs::write(&bounded, job(true)).unwrap();
    append(cluster, &input, &chunk(0, CHUNK));
    assert!(
        crash_round(
            &stream,
            &sandbox.join("crash.log"),
            Kill::At(KillPoint::SinkCommitted, 1),
            Duration::from_secs(30),
            &[],
        ),
        "the sink never committed"
    );
    let markers = format!("{output_topic}.tx.markers");
    let leader = cluster
        .leader_node(&markers, 0)
        .unwrap_or_else(|| panic!("no node leads {markers}"));
    cluster.kill_node(leader);
    let ended = Weir::run(
        &bounded,
        &["--restore", "latest"],
        &sandbox.join("restore.log"),
    )
    .wait(FINAL_RUN);
    cluster.restart_node(leader);
    assert!(
        ended.code() == Some(0),
        "the restore with node {leader} (the marker topic's leader) down ended with {}; its \
         stderr:\n{}",
        ended.status,
        ended.stderr
    );
    let context = format!("after a restore with node {leader} down: ");
    assert_exact_counts(cluster, &output, CHUNK, &context);
}
