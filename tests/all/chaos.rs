//! Crash tests: a real `weir` process, killed with SIGKILL at seeded random moments and
//! restarted with `--restore latest`, must commit exactly the output of a run without failures —
//! no record lost, none duplicated.
//!
//! Each job first runs once to its end, undisturbed: its committed output is the reference.
//! Then, in a fresh folder, rounds of `weir run JOB --restore latest` are each killed, either a
//! random delay after the job started or a short random delay after a checkpoint of that round
//! completed (so that kills land between a checkpoint's metadata write and the sinks' commit, or
//! while the next one is being written); a last round runs to the end. Rounds that come after the
//! job finished restore its final checkpoint, which must change nothing.
//!
//! A rescaling variant changes the parallelism of the keyed count at random before every round,
//! so that restores split and merge its state by key group (docs/ABI.md §16) between kills.
//!
//! `WEIR_CHAOS_ROUNDS` sets the number of killed rounds per job (default 10),
//! `WEIR_CHAOS_SEED` the seed (a number, or `random`); both are printed with every failure.

use std::collections::BTreeSet;
use std::fmt;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::report;
use crate::support::{
    CLI_TIMEOUT, JOB_STARTING, JobFile, Rng, Sandbox, Weir, assert_complete_checkpoints_verify,
    assert_same_output, checkpointed, committed_lines, complete_checkpoint_ids, in_progress_files,
    number_from_env, reference_output, seed_from_env, two_input_count, word_counts, word_text,
    wordcount, wordcount_at, wordcount_counting_with,
};

/// The seed when `WEIR_CHAOS_SEED` is not set.
const DEFAULT_SEED: u64 = 0x5eed_c4a0_5000_0001;
/// Killed rounds per job when `WEIR_CHAOS_ROUNDS` is not set.
const DEFAULT_ROUNDS: u64 = 10;

/// When a round's process is killed.
#[derive(Debug, Clone, Copy)]
enum KillAt {
    /// This long after the job started (modules loaded).
    AfterStart(Duration),
    /// This long after the `n`-th checkpoint completed in this round.
    AfterCheckpoint(u32, Duration),
}

impl fmt::Display for KillAt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KillAt::AfterStart(d) => write!(f, "kill {} ms after start", d.as_millis()),
            KillAt::AfterCheckpoint(n, d) => write!(
                f,
                "kill {} ms after checkpoint #{n} of the round",
                d.as_millis()
            ),
        }
    }
}

/// What happened in one round.
#[derive(Debug)]
struct Round {
    index: u64,
    kill_at: KillAt,
    /// The parallelism the round ran the job at, when the test varies it.
    parallelism: Option<u32>,
    /// When the kill was sent, after the process started (`None`: it exited first).
    killed_after: Option<Duration>,
    /// Checkpoints completed during the round.
    checkpoints: usize,
}

impl fmt::Display for Round {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "round {}: ", self.index)?;
        if let Some(p) = self.parallelism {
            write!(f, "at parallelism {p}, ")?;
        }
        write!(f, "{}: ", self.kill_at)?;
        match self.killed_after {
            Some(t) => write!(f, "killed {} ms after spawn", t.as_millis())?,
            None => write!(f, "exited 0 before the kill")?,
        }
        write!(
            f,
            ", {} checkpoint(s) completed in the round",
            self.checkpoints
        )
    }
}

/// Killed rounds per job: `WEIR_CHAOS_ROUNDS`, else [`DEFAULT_ROUNDS`]. The jobs grow with it,
/// so that more rounds mean more kills in a running job, not more restores of a finished one.
fn chaos_rounds() -> u64 {
    number_from_env("WEIR_CHAOS_ROUNDS", DEFAULT_ROUNDS).max(1)
}

/// The rounds so far, for failure messages: how to repeat the same kill plan, and what each
/// round did.
fn history(seed: u64, rounds: &[Round]) -> String {
    let mut text = format!(
        "seed {seed}, {} rounds (repeat with WEIR_CHAOS_SEED={seed} WEIR_CHAOS_ROUNDS={})",
        chaos_rounds(),
        chaos_rounds()
    );
    for r in rounds {
        text.push_str("\n  ");
        text.push_str(&r.to_string());
    }
    text
}

/// Runs the job `make_job` builds, undisturbed for the reference (which `check_reference` may
/// inspect) and then under repeated SIGKILL, and compares. `start_delays` bounds, in ms, the
/// kills timed from the job's start. `parallelisms` are the parallelisms `make_job` is given:
/// the first for the reference; with more than one, each round draws one at random.
fn kill_and_restore(
    label: &str,
    rounds: u64,
    salt: u64,
    start_delays: (u64, u64),
    parallelisms: &[u32],
    make_job: impl Fn(&Sandbox, u32) -> JobFile,
    check_reference: impl FnOnce(&[String]),
) {
    let seed = seed_from_env("WEIR_CHAOS_SEED", DEFAULT_SEED);
    let mut rng = Rng::new(seed ^ salt);

    let reference = Sandbox::new(&format!("{label}-reference"));
    make_job(&reference, parallelisms[0]).write(&reference.job_path());
    // The jobs grow with the rounds: so does the time their whole runs may take.
    let whole_run = CLI_TIMEOUT * rounds.div_ceil(DEFAULT_ROUNDS).max(1) as u32;
    let expected = reference_output(&reference, whole_run);
    assert!(
        !expected.is_empty(),
        "the reference run committed no output"
    );
    check_reference(&expected);

    let chaos = Sandbox::new(&format!("{label}-chaos"));
    let job = chaos.job_path();
    make_job(&chaos, parallelisms[0]).write(&job);
    let checkpoints = chaos.checkpoint_dir();
    let mut done: Vec<Round> = Vec::new();
    for index in 0..rounds {
        let parallelism = (parallelisms.len() > 1).then(|| {
            let p = parallelisms[rng.below(parallelisms.len() as u64) as usize];
            make_job(&chaos, p).write(&job);
            p
        });
        let kill_at = if rng.below(2) == 0 {
            KillAt::AfterStart(Duration::from_millis(
                rng.between(start_delays.0, start_delays.1),
            ))
        } else {
            KillAt::AfterCheckpoint(
                1 + rng.below(2) as u32,
                Duration::from_millis(rng.below(120)),
            )
        };
        let before: BTreeSet<u64> = complete_checkpoint_ids(&checkpoints).into_iter().collect();
        let mut seen = BTreeSet::new();
        let count_new = |seen: &mut BTreeSet<u64>| {
            seen.extend(
                complete_checkpoint_ids(&checkpoints)
                    .into_iter()
                    .filter(|id| !before.contains(id)),
            );
            seen.len()
        };
        let log = chaos.join(&format!("round-{index:03}.log"));
        let mut weir = Weir::run(&job, &["--restore", "latest"], &log);
        let fail = |what: &str, stderr: &str, done: &[Round]| -> ! {
            panic!(
                "{label}, round {index} ({kill_at}): {what}\n{}\nstderr of the round:\n{stderr}",
                history(seed, done)
            )
        };
        if !weir.wait_until("the job to start", CLI_TIMEOUT, |w| {
            w.stderr().contains(JOB_STARTING)
        }) {
            fail(
                "`weir` exited before the job started",
                &weir.stderr(),
                &done,
            );
        }
        let (wait_from, delay) = match kill_at {
            KillAt::AfterStart(delay) => (Some(Instant::now()), delay),
            KillAt::AfterCheckpoint(n, delay) => {
                let reached = weir.wait_until("a checkpoint to complete", CLI_TIMEOUT, |_| {
                    count_new(&mut seen) >= n as usize
                });
                (reached.then(Instant::now), delay)
            }
        };
        if let Some(from) = wait_from {
            while from.elapsed() < delay && weir.try_exit().is_none() {
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        let killed_at = weir.elapsed();
        let ended = weir.kill();
        // Judge by how it ended: it may have exited on its own just before the signal.
        let killed = ended.status.signal() == Some(9);
        if !killed && ended.code() != Some(0) {
            // It ran to its end before the kill: that must be a success.
            fail(
                &format!("`weir` exited on its own with {}", ended.status),
                &ended.stderr,
                &done,
            );
        }
        let round = Round {
            index,
            kill_at,
            parallelism,
            killed_after: killed.then_some(killed_at),
            checkpoints: count_new(&mut seen),
        };
        eprintln!("{label}: {round}");
        done.push(round);
        assert_complete_checkpoints_verify(&checkpoints, &history(seed, &done));
    }

    if parallelisms.len() > 1 {
        let p = parallelisms[rng.below(parallelisms.len() as u64) as usize];
        eprintln!("{label}: the final run at parallelism {p}");
        make_job(&chaos, p).write(&job);
    }
    let ended = Weir::run(&job, &["--restore", "latest"], &chaos.join("final.log")).wait(whole_run);
    if ended.code() != Some(0) {
        panic!(
            "{label}: the final run ended with {}\n{}\nits stderr:\n{}",
            ended.status,
            history(seed, &done),
            ended.stderr
        );
    }
    let actual = committed_lines(&chaos.out_dir());
    let context = format!("{label} after {rounds} kills; {}", history(seed, &done));
    assert_same_output(&actual, &expected, &context);
    let leftovers = in_progress_files(&chaos.out_dir());
    assert!(
        leftovers.is_empty(),
        "{context}\nin-progress files remain after the final run: {leftovers:?}"
    );

    if parallelisms.len() > 1 {
        // And, varying the parallelism, only if restores did split and merge state.
        let logs = std::fs::read_dir(chaos.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"));
        let rescales: usize = logs
            .map(|log| {
                let text = std::fs::read_to_string(log).unwrap_or_default();
                text.matches("rescaled the state of").count()
            })
            .sum();
        eprintln!("{label}: {rescales} restore(s) rescaled state");
        assert!(
            rescales >= 2,
            "{context}\nonly {rescales} restore(s) rescaled state"
        );
    }

    // The test means something only if kills landed while the job ran, many after checkpoints.
    let killed = done.iter().filter(|r| r.killed_after.is_some()).count();
    let after_checkpoint = done
        .iter()
        .filter(|r| r.killed_after.is_some() && r.checkpoints > 0)
        .count();
    eprintln!(
        "{label}: {killed} of {rounds} kills landed in a running job, {after_checkpoint} after a \
         checkpoint of their round"
    );
    assert!(
        killed as u64 >= rounds.div_ceil(2) && after_checkpoint >= 2.min(rounds as usize),
        "{context}\nonly {killed} kill(s) landed in a running job, {after_checkpoint} after a \
         checkpoint: make the job longer"
    );
    report::record(&report::Row {
        area: "chaos",
        scenario: &format!("{label}: SIGKILL at random moments, restart with --restore latest"),
        rounds,
        faults: &format!(
            "{killed} kills in a running job ({after_checkpoint} shortly after a checkpoint)"
        ),
        result: "committed output identical to the undisturbed run; no in-progress files left",
    });
}

/// [`kill_and_restore`] of a word count over `lines_per_round` lines a round of 30 words on
/// average, drawn from `seed`, checkpointed every 100 ms: `make_job` builds it over the input
/// file at a parallelism. The reference itself must hold the counts computed here.
fn kill_and_restore_wordcount(
    label: &str,
    seed: u64,
    lines_per_round: usize,
    salt: u64,
    parallelisms: &[u32],
    make_job: impl Fn(&Sandbox, &Path, u32) -> JobFile,
) {
    let input_dir = Sandbox::new(&format!("{label}-input"));
    let input = input_dir.join("words.txt");
    let rounds = chaos_rounds();
    let text = word_text(seed, lines_per_round * rounds as usize, 30);
    std::fs::write(&input, &text).unwrap();
    kill_and_restore(
        label,
        rounds,
        salt,
        (20, 800),
        parallelisms,
        |sandbox, parallelism| {
            checkpointed(make_job(sandbox, &input, parallelism), sandbox, "100ms", 1)
        },
        |reference| assert_same_output(reference, &word_counts(&text), "the reference word count"),
    );
}

#[test]
fn kill_and_restore_wordcount_commits_exactly_the_undisturbed_output() {
    // 80k lines of 30 words on average for 10 rounds: a few seconds of work for the debug
    // build, so that most kills land in a running job, in every phase of it.
    kill_and_restore_wordcount(
        "wordcount",
        20_260_101,
        8_000,
        1,
        &[2],
        |sandbox, input, _| wordcount(sandbox, input, false),
    );
}

/// The word count with its keyed count (parallelism 2) a component — Python, JavaScript, Rust
/// for WASI 0.2 — whose state is the SDK's default checkpoint (a pickle of the operator's
/// attributes, their JSON) or the component's own format. `lines_per_round` lines of 30 words
/// on average make the job a few seconds long for the debug build, so that most kills land in
/// a running job; a slower language gets fewer.
fn kill_and_restore_wordcount_counting_with(
    label: &str,
    language: &str,
    count: Option<&'static str>,
    lines_per_round: usize,
) {
    let Some(count) = crate::support::foreign(language, count) else {
        return;
    };
    kill_and_restore_wordcount(
        label,
        20_261_203,
        lines_per_round,
        3,
        &[2],
        |sandbox, input, _| wordcount_counting_with(sandbox, input, false, count),
    );
}

#[test]
fn kill_and_restore_wordcount_with_the_rust_component_count_commits_the_undisturbed_output() {
    kill_and_restore_wordcount_counting_with(
        "wordcount-rust-component",
        "Rust component",
        weir_tests::guests::RUST_COMPONENT_COUNT,
        8_000,
    );
}

#[test]
fn kill_and_restore_wordcount_with_the_python_count_commits_the_undisturbed_output() {
    kill_and_restore_wordcount_counting_with(
        "wordcount-python",
        "Python",
        weir_tests::guests::PY_COUNT,
        6_000,
    );
}

#[test]
fn kill_and_restore_wordcount_with_the_javascript_count_commits_the_undisturbed_output() {
    kill_and_restore_wordcount_counting_with(
        "wordcount-javascript",
        "JavaScript",
        weir_tests::guests::JS_COUNT,
        3_000,
    );
}

#[test]
fn kill_and_restore_two_input_count_commits_exactly_the_undisturbed_output() {
    let rounds = chaos_rounds();
    // 6 s of records for 10 rounds, from each of the two sources.
    let records = 6_000 * rounds;
    kill_and_restore(
        "two-input",
        rounds,
        2,
        (50, 1500),
        &[3],
        |sandbox, _| two_input_count(sandbox, records, Some(10_000.0)),
        |reference| {
            assert_eq!(
                reference.len() as u64,
                2 * records,
                "the reference commits one line per record"
            )
        },
    );
}

/// The word count of [`kill_and_restore_wordcount_commits_exactly_the_undisturbed_output`] with
/// its keyed count at a parallelism drawn from 1 to 4 before every round (its output goes to the
/// sink by `rebalance`, so the sink keeps 2 subtasks): each restore at another parallelism
/// splits or merges the counts by key group, and the committed output is still the undisturbed
/// run's.
#[test]
fn kill_and_restore_wordcount_at_changing_parallelisms_commits_exactly_the_undisturbed_output() {
    kill_and_restore_wordcount(
        "wordcount-rescaled",
        20_261_204,
        8_000,
        4,
        &[2, 1, 3, 4],
        wordcount_at,
    );
}

#[test]
fn kill_and_restore_wordcount_with_the_count_kept_on_the_host_commits_the_undisturbed_output() {
    kill_and_restore_wordcount_counting_with(
        "wordcount-host-state",
        "Rust, counts kept on the host",
        Some(weir_tests::guests::HOST_COUNT),
        8_000,
    );
}
