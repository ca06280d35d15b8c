//! Crash tests at named kill points: the `weir` process is killed with SIGKILL at an exact step
//! of the checkpoint protocol — while records flow, during alignment, between snapshot and
//! acknowledgement, half-way through a state file or the metadata file, between a checkpoint's
//! completion and the sinks' commit, half-way through a sink's commit, and while restoring — and
//! restarted with `--restore latest`; the committed output must equal a run without failures.
//!
//! The kill comes from the host's test hook (`WEIR_TEST_KILL_AT=POINT:N`, see
//! `weir::kill_point`): the process kills itself the `N`-th time any of its threads reaches
//! `POINT`, so the test knows where every kill landed instead of hoping a timer hit it.
//!
//! The job has what the protocol finds hard: two sources of parallelism 2 feeding one operator
//! of parallelism 3 through two key-hash inputs (so every `count` subtask aligns four
//! channels), and the exactly-once file sink (parallelism 3). Its output, "key, running count"
//! per record, is the same multiset whatever the interleaving of the inputs, so the committed
//! lines must match the reference exactly.
//!
//! `WEIR_KILL_POINT_ROUNDS` sets the rounds per point (default 4; 8 points), `WEIR_CHAOS_SEED`
//! the seed; both are printed with every failure.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::os::unix::process::ExitStatusExt as _;

use weir::kill_point::{self, KillPoint};

use crate::support::report;
use crate::support::{
    CLI_TIMEOUT, Rng, Sandbox, Weir, assert_complete_checkpoints_verify, assert_same_output,
    committed_lines, complete_checkpoints, in_progress_files, number_from_env, reference_output,
    seed_from_env, two_input_count,
};

/// The seed when `WEIR_CHAOS_SEED` is not set.
const DEFAULT_SEED: u64 = 0x5eed_c4a0_5000_0002;
/// Rounds per kill point when `WEIR_KILL_POINT_ROUNDS` is not set.
const DEFAULT_ROUNDS_PER_POINT: u64 = 4;
/// Records per second of each source in the killed rounds: slow enough that most rounds end
/// by their kill, not by the end of the input.
const RATE: f64 = 12_000.0;
/// With image checkpoints: a full image every this many checkpoints, deltas between them.
const IMAGE_FULL_EVERY: u32 = 4;

/// One killed round.
#[derive(Debug)]
struct Round {
    index: usize,
    point: KillPoint,
    nth: u64,
    /// Whether the process died at the point (rather than finishing first).
    landed: bool,
}

impl fmt::Display for Round {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "round {}: {}={}:{}: {}",
            self.index,
            kill_point::ENV_VAR,
            self.point,
            self.nth,
            if self.landed {
                "killed there"
            } else {
                "the job ended first"
            }
        )
    }
}

/// For each point, the `N`s drawn from: how many times the point is reached in a round's
/// first second or so (tasks: 4 source subtasks, 3 `count`, 3 sinks; a checkpoint every
/// 100 ms).
fn nth_range(point: KillPoint) -> (u64, u64) {
    match point {
        KillPoint::ProcessBatch => (1, 300),
        KillPoint::Alignment => (1, 12),
        KillPoint::AfterSnapshot => (1, 30),
        KillPoint::StateWrite => (1, 30),
        KillPoint::MetadataWrite => (1, 4),
        KillPoint::BeforeCommit => (1, 4),
        KillPoint::SinkCommit => (1, 9),
        // Ten tasks restore; the first round has nothing to restore.
        KillPoint::Restore => (1, 11),
        // Only a Kafka sink has it (`kafka::exactly_once` kills there), and only an operator
        // with timers the other (`event_time` kills there).
        KillPoint::SinkCommitted | KillPoint::TimerFiring => (1, 1),
    }
}

/// The points the job of this file reaches: all but the Kafka sink's and the timers'.
fn file_job_points() -> impl Iterator<Item = KillPoint> {
    KillPoint::ALL
        .into_iter()
        .filter(|&p| p != KillPoint::SinkCommitted && p != KillPoint::TimerFiring)
}

/// The rounds' plan: every point `per_point` times, in a seeded random order, never starting
/// with `restore` (nothing to restore yet).
fn plan(rng: &mut Rng, per_point: u64) -> Vec<(KillPoint, u64)> {
    let mut rounds: Vec<(KillPoint, u64)> = Vec::new();
    for point in file_job_points() {
        for _ in 0..per_point {
            let (lo, hi) = nth_range(point);
            rounds.push((point, rng.between(lo, hi + 1)));
        }
    }
    for i in (1..rounds.len()).rev() {
        rounds.swap(i, rng.below(i as u64 + 1) as usize);
    }
    if rounds[0].0 == KillPoint::Restore
        && let Some(other) = rounds.iter().position(|r| r.0 != KillPoint::Restore)
    {
        rounds.swap(0, other);
    }
    rounds
}

#[test]
fn kill_at_every_named_point_commits_exactly_the_undisturbed_output() {
    kill_at_every_named_point("exports", DEFAULT_ROUNDS_PER_POINT);
}

/// The same with `count` checkpointed as an image of its memory and globals
/// (`checkpoint = "image"`), incremental with a full image every 4 checkpoints (every 100 ms),
/// so that kills land mid-chain and restores rebuild chains; against a reference run through
/// its snapshot exports: half the rounds per point by default, the other test covering the
/// protocol itself. The checkpoints' metadata must show that deltas were written.
#[test]
fn kill_at_every_named_point_with_image_checkpoints_commits_exactly_the_undisturbed_output() {
    kill_at_every_named_point("image", DEFAULT_ROUNDS_PER_POINT / 2);
}

/// Kills the two-input job at every named point, each `per_point` rounds unless
/// `WEIR_KILL_POINT_ROUNDS` says otherwise, with its operator checkpointed as `capture` says;
/// then checks the committed output against an undisturbed run.
fn kill_at_every_named_point(capture: &str, per_point: u64) {
    let per_point = number_from_env("WEIR_KILL_POINT_ROUNDS", per_point).max(1);
    let seed = seed_from_env("WEIR_CHAOS_SEED", DEFAULT_SEED);
    let mut rng = Rng::new(seed);
    let rounds = plan(&mut rng, per_point);
    // Enough input for every round to make some progress and the job still to be running:
    // about 0.15 s of input per round, plus 2 s.
    let records = (RATE * (0.15 * rounds.len() as f64 + 2.0)) as u64;

    // The reference runs at full speed: the generator's records do not depend on its rate.
    let reference = Sandbox::new("kill-points-reference");
    two_input_count(&reference, records, None).write(&reference.job_path());
    // The job grows with the rounds: so does the time its whole runs may take.
    let whole_run = CLI_TIMEOUT * per_point.div_ceil(DEFAULT_ROUNDS_PER_POINT).max(1) as u32;
    let expected = reference_output(&reference, whole_run);
    assert_eq!(
        expected.len() as u64,
        2 * records,
        "the reference run commits one line per record"
    );

    let chaos = Sandbox::new("kill-points-chaos");
    let job = chaos.job_path();
    let mut chaos_job = two_input_count(&chaos, records, Some(RATE)).state_capture(capture);
    if capture == "image" {
        chaos_job = chaos_job.image_full_every(IMAGE_FULL_EVERY);
    }
    chaos_job.write(&job);
    // Deltas seen in complete checkpoints' metadata: (checkpoint, task) with a chain.
    let mut deltas_seen = BTreeSet::new();
    let mut done: Vec<Round> = Vec::new();
    let history = |done: &[Round]| {
        let mut text = format!(
            "checkpoint = {capture:?}, seed {seed}, {per_point} rounds per point (repeat with \
             WEIR_CHAOS_SEED={seed} WEIR_KILL_POINT_ROUNDS={per_point})"
        );
        for r in done {
            text.push_str("\n  ");
            text.push_str(&r.to_string());
        }
        text
    };
    for (index, &(point, nth)) in rounds.iter().enumerate() {
        let armed = format!("{point}:{nth}");
        let log = chaos.join(&format!("round-{index:03}.log"));
        let ended = Weir::run_to_kill_point(&job, &["--restore", "latest"], &armed, &log);
        let said = format!("kill point `{point}` reached");
        // SIGKILL, or SIGABRT where the `kill` program could not be run.
        let killed = matches!(ended.status.signal(), Some(9 | 6));
        let landed = killed && ended.stderr.contains(&said);
        if !landed && ended.code() != Some(0) {
            panic!(
                "round {index} ({}={armed}): `weir` ended with {} without reaching the point\n{}\n\
                 stderr of the round:\n{}",
                kill_point::ENV_VAR,
                ended.status,
                history(&done),
                ended.stderr
            );
        }
        let round = Round {
            index,
            point,
            nth,
            landed,
        };
        eprintln!("kill points: {round}");
        done.push(round);
        assert_complete_checkpoints_verify(&chaos.checkpoint_dir(), &history(&done));
        for (id, meta) in complete_checkpoints(&chaos.checkpoint_dir()) {
            for task in meta.tasks.iter().filter(|t| !t.chain.is_empty()) {
                assert!(
                    task.chain.len() < IMAGE_FULL_EVERY as usize,
                    "checkpoint {id}: the chain of {} is longer than the policy allows: {:?}",
                    task.task,
                    task.chain
                );
                deltas_seen.insert((id, task.task.to_string()));
            }
        }
    }
    if capture == "image" {
        assert!(
            !deltas_seen.is_empty(),
            "no complete checkpoint held an image delta: incremental images were not tested\n{}",
            history(&done)
        );
        eprintln!("kill points: {} image deltas seen", deltas_seen.len());
    } else {
        assert!(
            deltas_seen.is_empty(),
            "exports make no deltas: {deltas_seen:?}"
        );
    }

    let ended = Weir::run(&job, &["--restore", "latest"], &chaos.join("final.log")).wait(whole_run);
    if ended.code() != Some(0) {
        panic!(
            "the final run ended with {}\n{}\nits stderr:\n{}",
            ended.status,
            history(&done),
            ended.stderr
        );
    }
    let actual = committed_lines(&chaos.out_dir());
    let context = format!("after {} rounds; {}", done.len(), history(&done));
    assert_same_output(&actual, &expected, &context);
    let leftovers = in_progress_files(&chaos.out_dir());
    assert!(
        leftovers.is_empty(),
        "{context}\nin-progress files remain after the final run: {leftovers:?}"
    );

    // Every point must have been hit, or the test proved nothing about it.
    let mut landed: BTreeMap<&str, u64> = file_job_points().map(|p| (p.name(), 0)).collect();
    for r in done.iter().filter(|r| r.landed) {
        *landed.get_mut(r.point.name()).unwrap() += 1;
    }
    let missed: Vec<&str> = landed
        .iter()
        .filter(|&(_, &n)| n == 0)
        .map(|(&p, _)| p)
        .collect();
    assert!(
        missed.is_empty(),
        "{context}\nno kill landed at {missed:?}: make the job longer or the N smaller"
    );
    let total: u64 = landed.values().sum();
    for (point, n) in &landed {
        report::record(&report::Row {
            area: "chaos",
            scenario: &format!(
                "SIGKILL at kill point `{point}` (two-input job, key-hash, p=2/3, file sink{})",
                if capture == "image" {
                    ", image checkpoints"
                } else {
                    ""
                }
            ),
            rounds: *n,
            faults: &format!("{n} kills at `{point}` out of {per_point} planned"),
            result: "committed output identical to the undisturbed run",
        });
    }
    eprintln!(
        "kill points: {total} of {} kills landed at their point: {landed:?}",
        done.len()
    );
}
