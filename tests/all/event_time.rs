//! Event time end to end (`docs/ABI.md` §15, docs/WINDOWS.md): watermarks from a source's
//! strategy through key-hash edges into the `window` example, timers fired and checkpointed by
//! the host, late records on a side output wired in the job file.
//!
//! - The windows a job commits over seeded out-of-order input are those computed directly from
//!   the input, here, in a few lines — tumbling, sliding and session — undisturbed and with the
//!   `weir` process killed at the named kill points (timers being fired, a snapshot taken while
//!   windows fire) and at random moments, then restored.
//! - A job with a silent input emits its windows when the input goes idle, and emits nothing
//!   when `idle_timeout = "off"`.
//! - A record too late for its window reaches the late output and is counted; one within the
//!   allowed lateness updates its window's result.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use weir::kill_point::KillPoint;
use weir::runtime::RunOptions;
use weir_tests::guests;

use crate::support::report;
use crate::support::{
    CLI_TIMEOUT, InProcess, JobFile, Rng, Sandbox, Weir, assert_same_output, checkpointed,
    committed_lines, reference_output, run_cli,
};

/// Records of the windowed input.
const RECORDS: u64 = 20_000;
/// Distinct keys.
const KEYS: u64 = 40;
/// How far, at most, a record's timestamp is below the in-order one: the input's disorder.
const DISORDER_MS: i64 = 500;

/// The seeded out-of-order input: `(key, timestamp)` in file order. Timestamps step by 4 ms
/// and fall back by up to [`DISORDER_MS`]; all are even, and the session gap below is odd, so
/// no record lands exactly on the end of a session that fired just before it (where a stream
/// and a direct computation may rightly differ: the record is on time, and its session is
/// already closed).
fn input(seed: u64) -> Vec<(String, i64)> {
    let mut rng = Rng::new(seed);
    (0..RECORDS)
        .map(|i| {
            let key = format!("k{:02}", rng.below(KEYS));
            let ts = 4 * i as i64 + 1_000 - 2 * rng.below(DISORDER_MS as u64 / 2 + 1) as i64;
            (key, ts)
        })
        .collect()
}

/// Writes `records` as CSV lines `key,ts`.
fn write_csv(path: &Path, records: &[(String, i64)]) {
    let mut text = String::new();
    for (key, ts) in records {
        text.push_str(&format!("{key},{ts}\n"));
    }
    fs::write(path, text).unwrap();
}

/// The windows of one key's timestamps, as `(start, end, count)`: what docs/WINDOWS.md says,
/// computed from the whole input at once.
fn direct_windows(spec: &str, timestamps: &[i64]) -> Vec<(i64, i64, u64)> {
    let words: Vec<i64> = spec
        .split_whitespace()
        .skip(1)
        .map(|w| w.parse().unwrap())
        .collect();
    let mut counts: BTreeMap<(i64, i64), u64> = BTreeMap::new();
    match spec.split_whitespace().next().unwrap() {
        "tumbling" | "sliding" => {
            let size = words[0];
            let slide = *words.get(1).unwrap_or(&size);
            for &ts in timestamps {
                let mut start = ts.div_euclid(slide) * slide;
                while start + size > ts {
                    *counts.entry((start, start + size)).or_default() += 1;
                    start -= slide;
                }
            }
        }
        "session" => {
            let gap = words[0];
            let mut sorted = timestamps.to_vec();
            sorted.sort_unstable();
            let mut session: Option<(i64, i64, u64)> = None;
            for ts in sorted {
                session = match session {
                    Some((start, end, n)) if ts <= end => Some((start, end.max(ts + gap), n + 1)),
                    Some((start, end, n)) => {
                        counts.insert((start, end), n);
                        Some((ts, ts + gap, 1))
                    }
                    None => Some((ts, ts + gap, 1)),
                };
            }
            if let Some((start, end, n)) = session {
                counts.insert((start, end), n);
            }
        }
        other => panic!("no such window kind {other}"),
    }
    counts.into_iter().map(|((s, e), n)| (s, e, n)).collect()
}

/// The lines the file sink must commit for `records` under `spec`: `key\tstart,end,count`
/// per window, sorted.
fn expected_lines(spec: &str, records: &[(String, i64)]) -> Vec<String> {
    let mut by_key: BTreeMap<&str, Vec<i64>> = BTreeMap::new();
    for (key, ts) in records {
        by_key.entry(key).or_default().push(*ts);
    }
    let mut lines: Vec<String> = by_key
        .iter()
        .flat_map(|(key, ts)| {
            direct_windows(spec, ts)
                .into_iter()
                .map(move |(s, e, n)| format!("{key}\t{s},{e},{n}"))
        })
        .collect();
    lines.sort_unstable();
    lines
}

/// CSV source keys: key in column 0, timestamp in column 1.
fn csv_keys(watermark: &str) -> String {
    format!("format = \"csv\"\nkey = 0\nvalue = 0\ntimestamp = 1\nwatermark = {watermark}\n")
}

/// File source `events` (with `watermark`) → key-hash → `window` (p=2, config `spec`) →
/// forward → file sink `out` (p=2); checkpoints every 100 ms.
fn window_job(sandbox: &Sandbox, input: &Path, spec: &str, watermark: &str) -> JobFile {
    let job =
        JobFile::new("windows").file_source_with("events", input, false, &csv_keys(watermark));
    windowed(job, sandbox, spec)
}

/// `job`, whose source is `events`, continued: → key-hash → `window` (p=2, config `spec`) →
/// forward → file sink `out` (p=2); checkpoints every 100 ms, 3 retained, no pause.
fn windowed(job: JobFile, sandbox: &Sandbox, spec: &str) -> JobFile {
    let job = job
        .operator(
            "window",
            guests::WINDOW,
            2,
            Some(spec),
            ("events", "key-hash"),
        )
        .file_sink("out", &sandbox.out_dir(), 2, ("window", "forward"));
    checkpointed(job, sandbox, "100ms", 3).checkpoint("min_pause", "0ms")
}

/// The watermark strategy of the windowed input: out-of-orderness above its disorder, so no
/// record is late and the windows do not depend on when watermarks are sent.
const BOUNDED: &str = "{ out_of_orderness = \"600ms\", interval = \"5ms\" }";

/// The three kinds of window, as the example's config gives them.
const SPECS: [&str; 3] = ["tumbling 1000", "sliding 1000 500", "session 301"];

#[test]
fn windows_over_out_of_order_input_are_the_windows_computed_directly() {
    let records = input(0x5eed_0018);
    for spec in SPECS {
        let sandbox = Sandbox::new("windows-direct");
        let csv = sandbox.join("events.csv");
        write_csv(&csv, &records);
        window_job(&sandbox, &csv, spec, BOUNDED)
            .run_in(&sandbox)
            .assert_code(0, spec);
        let expected = expected_lines(spec, &records);
        assert!(expected.len() > 100, "{spec}: {} windows", expected.len());
        assert_same_output(&committed_lines(&sandbox.out_dir()), &expected, spec);
    }
}

/// One killed round: a named point's `N`-th hit, or a kill after some milliseconds.
#[derive(Debug, Clone, Copy)]
enum Kill {
    At(KillPoint, u64),
    After(u64),
}

/// Generator `events` (40 000 records at 20 000 a second, 40 keys, timestamps out of order by
/// up to 500 ms, watermarks bounded above that) → key-hash → `window` (p=2, config `spec`) →
/// forward → file sink `out` (p=2); checkpoints every 100 ms. Slow enough that kills land while
/// windows are open and timers pending.
fn generated_window_job(sandbox: &Sandbox, spec: &str) -> JobFile {
    let job = JobFile::new("windows").vertex(
        "[[source]]\nname = \"events\"\ntype = \"generator\"\nseed = 18\ncount = 40000\n\
         rate = 20000.0\nkeys = 40\ndisorder = 500\n\
         watermark = { out_of_orderness = \"600ms\", interval = \"5ms\" }\n",
    );
    windowed(job, sandbox, spec)
}

#[test]
fn windows_killed_at_timers_in_flight_and_during_checkpoints_commit_the_same_windows() {
    // The generator's keys come every 40 ms on average: a gap of 61 ms makes many sessions.
    kill_rounds(
        "exports",
        &["tumbling 1000", "sliding 1000 500", "session 61"],
        &["timer-firing", "after-snapshot", "restore"],
    );
}

/// The same with the operator checkpointed as an image of its memory: the timers are the
/// host's either way, so they come back the same.
#[test]
fn windows_checkpointed_as_images_and_killed_commit_the_same_windows() {
    kill_rounds("image", &["sliding 1000 500"], &["timer-firing"]);
}

/// A checkpoint written before task snapshots had sections — by the build at `471e321`, whose
/// state files are task state envelopes of version 1 with one time section — restores: its
/// pending timers fire, and the job commits the windows an undisturbed run commits.
/// `tests/fixtures/before-sections/` holds that build's checkpoint directory and output after
/// it ran [`generated_window_job`] (`sliding 1000 500`) and was killed at 1.2 s, with windows
/// open and timers set (checkpoint 3).
#[test]
fn a_checkpoint_written_before_task_state_sections_restores_its_timers() {
    let spec = "sliding 1000 500";
    let reference = Sandbox::new("windows-reference");
    generated_window_job(&reference, spec).write(&reference.job_path());
    Weir::run(&reference.job_path(), &[], &reference.join("weir.log"))
        .wait(CLI_TIMEOUT)
        .assert_code(0, spec);
    let expected = committed_lines(&reference.out_dir());

    let sandbox = Sandbox::new("windows-before-sections");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/before-sections");
    copy_tree(&fixture.join("checkpoints"), &sandbox.checkpoint_dir());
    copy_tree(&fixture.join("out"), &sandbox.out_dir());
    assert!(
        sandbox
            .checkpoint_dir()
            .join("chk-0000000003/window-0.state")
            .is_file(),
        "the fixture holds checkpoint 3"
    );
    generated_window_job(&sandbox, spec).write(&sandbox.job_path());
    let run = Weir::run(
        &sandbox.job_path(),
        &["--restore", "latest"],
        &sandbox.join("weir.log"),
    )
    .wait(CLI_TIMEOUT);
    run.assert_code(0, "the run restoring the earlier build's checkpoint");
    assert!(
        run.stderr.contains("chk-0000000003"),
        "it restored the fixture's checkpoint:\n{}",
        run.stderr
    );
    assert_same_output(
        &committed_lines(&sandbox.out_dir()),
        &expected,
        "restored from a checkpoint written before sections",
    );
}

/// Copies the files under `from` into `to`, keeping their relative paths.
fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Runs each of `specs` undisturbed, then killed in eight rounds — at each named point, then at
/// random moments — and restored with the operator checkpointed as `capture`, and compares the
/// committed windows; each of the `required` points must have been hit.
fn kill_rounds(capture: &str, specs: &[&str], required: &[&str]) {
    let mut rng = Rng::new(0x5eed_001a);
    let points = [
        KillPoint::TimerFiring,
        KillPoint::AfterSnapshot,
        KillPoint::StateWrite,
        KillPoint::ProcessBatch,
        KillPoint::Restore,
    ];
    let mut landed: BTreeMap<String, u64> = BTreeMap::new();
    for (round_set, spec) in specs.iter().enumerate() {
        // The reference: the same records undisturbed. (No record is late — the bound is above
        // the disorder — so its windows are those of the records, whatever the timing; the test
        // above checks that against a direct computation.)
        let reference = Sandbox::new("windows-reference");
        generated_window_job(&reference, spec)
            .run_in(&reference)
            .assert_code(0, spec);
        let expected = committed_lines(&reference.out_dir());
        assert!(expected.len() > 100, "{spec}: {} windows", expected.len());

        let sandbox = Sandbox::new("windows-killed");
        generated_window_job(&sandbox, spec)
            .state_capture(capture)
            .write(&sandbox.job_path());
        let mut history = Vec::new();
        for round in 0..8 {
            // Every point once per window kind (restore last, once there is something to
            // restore), then random moments.
            let kill = match points.get(round) {
                Some(&KillPoint::Restore) => Kill::At(KillPoint::Restore, 1 + rng.below(4)),
                Some(&point) => Kill::At(point, 1 + rng.below(12)),
                None => Kill::After(100 + rng.below(500)),
            };
            let log = sandbox.join(&format!("round-{round_set}-{round}.log"));
            let args = ["--restore", "latest"];
            let ended = match kill {
                Kill::At(point, nth) => Weir::run_to_kill_point(
                    &sandbox.job_path(),
                    &args,
                    &format!("{point}:{nth}"),
                    &log,
                ),
                Kill::After(ms) => {
                    let mut weir = Weir::run(&sandbox.job_path(), &args, &log);
                    let deadline = Instant::now() + Duration::from_millis(ms);
                    while Instant::now() < deadline && weir.try_exit().is_none() {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    weir.kill()
                }
            };
            let killed = matches!(ended.status.signal(), Some(9 | 6));
            if !killed && ended.code() != Some(0) {
                panic!(
                    "{spec}, round {round} ({kill:?}): weir ended with {}\n{}",
                    ended.status, ended.stderr
                );
            }
            if let Kill::At(point, _) = kill
                && killed
                && ended
                    .stderr
                    .contains(&format!("kill point `{point}` reached"))
            {
                *landed.entry(point.to_string()).or_default() += 1;
            }
            history.push(format!("{kill:?}: {}", ended.status));
        }
        run_cli(
            &sandbox.job_path(),
            &["--restore", "latest"],
            &sandbox.join("final.log"),
        )
        .assert_code(0, &format!("{spec}: the final run after {history:?}"));
        assert_same_output(
            &committed_lines(&sandbox.out_dir()),
            &expected,
            &format!("{spec}, checkpoint = {capture:?}, after {history:?}"),
        );
    }
    for &point in required {
        assert!(
            landed.get(point).copied().unwrap_or(0) > 0,
            "no kill landed at `{point}`: {landed:?}"
        );
    }
    eprintln!("event time kills landed ({capture}): {landed:?}");
}

/// `sources` joined by key into one `window` operator (one subtask, tumbling one-second
/// windows), whose windows go to a file sink.
fn second_windows_over(sources: JobFile, sandbox: &Sandbox, [a, b]: [&str; 2]) -> JobFile {
    sources
        .operator_with_inputs(
            "window",
            guests::WINDOW,
            1,
            Some("tumbling 1000"),
            &[(a, "key-hash"), (b, "key-hash")],
        )
        .file_sink("out", &sandbox.out_dir(), 1, ("window", "forward"))
}

/// The records of `idle_job`'s `active` input: timestamps 0, 2, … 9998 over seven keys.
fn idle_records() -> Vec<(String, i64)> {
    (0..5_000).map(|i| (format!("k{}", i % 7), i * 2)).collect()
}

/// Two followed file sources into one `window` operator: `active` holds [`idle_records`],
/// `silent` none; each with its `idle_timeout` as given.
fn idle_job(sandbox: &Sandbox, active_idle: &str, silent_idle: &str) -> JobFile {
    let active = sandbox.join("active.csv");
    let silent = sandbox.join("silent.csv");
    write_csv(&active, &idle_records());
    fs::write(&silent, "").unwrap();
    let watermark = |idle_timeout: &str| {
        format!(
            "{{ out_of_orderness = \"0ms\", idle_timeout = {idle_timeout:?}, interval = \"20ms\" }}"
        )
    };
    let sources = JobFile::new("idle")
        .file_source_with("active", &active, true, &csv_keys(&watermark(active_idle)))
        .file_source_with("silent", &silent, true, &csv_keys(&watermark(silent_idle)));
    let job = second_windows_over(sources, sandbox, ["active", "silent"]);
    checkpointed(job, sandbox, "100ms", 2)
}

#[test]
fn an_idle_input_lets_windows_fire_and_without_idle_timeout_holds_them_back() {
    // With a timeout: `silent` goes idle, the watermark follows `active` alone, and its
    // windows before its last second commit.
    let sandbox = Sandbox::new("idle-on");
    idle_job(&sandbox, "300ms", "300ms").write(&sandbox.job_path());
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    // Timestamps 0..10 000: windows [0,1000) … [8000,9000) fire at watermark 9998.
    let fired = weir.wait_until(
        "windows with an idle timeout",
        Duration::from_secs(30),
        |_| committed_lines(&sandbox.out_dir()).len() >= 7 * 9,
    );
    assert!(fired, "weir ended:\n{}", weir.stderr());
    weir.kill();
    let lines = committed_lines(&sandbox.out_dir());
    assert!(lines.contains(&"k0\t0,1000,72".to_string()), "{lines:?}");

    // Without: `silent` holds the job's watermark at its start, and nothing fires however
    // long the job runs and checkpoints.
    let sandbox = Sandbox::new("idle-off");
    idle_job(&sandbox, "off", "off").write(&sandbox.job_path());
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    let ran = weir.wait_until("ten checkpoints", Duration::from_secs(30), |weir| {
        weir.stderr().contains("checkpoint 10 complete")
    });
    assert!(ran, "weir ended:\n{}", weir.stderr());
    std::thread::sleep(Duration::from_millis(1_000));
    weir.kill();
    assert_eq!(
        committed_lines(&sandbox.out_dir()),
        Vec::<String>::new(),
        "with idle_timeout = \"off\" a silent input holds every window back"
    );
}

/// Issue 38: `active` reads its file and goes idle after 300 ms; `silent`, which never reads a
/// record, only after 2 s. When `active` goes idle, `silent` (no watermark yet) still holds the
/// window back; when `silent` goes idle too, no input is active — and the window must be where
/// `active` brought it, as it is when the two go idle the other way round, not stay where it
/// started.
#[test]
fn windows_fire_when_the_input_with_records_goes_idle_before_the_silent_one() {
    let sandbox = Sandbox::new("idle-order");
    idle_job(&sandbox, "300ms", "2s").write(&sandbox.job_path());
    // The watermark ends at 9997 (the largest timestamp, 9998, less 0 ms less 1): every window
    // fires but the last, [9000, 10000).
    let expected: Vec<String> = expected_lines("tumbling 1000", &idle_records())
        .into_iter()
        .filter(|line| !line.contains("\t9000,"))
        .collect();
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    let fired = weir.wait_until(
        "the windows, once both inputs are idle",
        Duration::from_secs(30),
        |_| committed_lines(&sandbox.out_dir()).len() >= expected.len(),
    );
    let stderr = weir.stderr();
    weir.kill();
    assert!(
        fired,
        "no window fired after both inputs went idle: {:?}\n{stderr}",
        committed_lines(&sandbox.out_dir())
    );
    assert_eq!(committed_lines(&sandbox.out_dir()), expected);
}

#[test]
fn late_records_reach_the_late_output_counted_and_allowed_lateness_updates_results() {
    let sandbox = Sandbox::new("late");
    let csv = sandbox.join("events.csv");
    // Filler of key `z` at one timestamp: long enough (many polls of the source, each
    // followed by a watermark once 1 ms passed) that the watermark it makes reaches the window
    // before the next record is read.
    let filler = |ts: i64| std::iter::repeat_n(("z".to_string(), ts), 100_000);
    let mut records: Vec<(String, i64)> = Vec::new();
    records.extend((0..1_000).map(|ts| ("a".to_string(), ts)));
    records.extend((1_000..2_000).map(|ts| ("b".to_string(), ts)));
    records.extend(filler(2_100)); // watermark 2099: a's and b's windows fire
    records.push(("b".to_string(), 1_500)); // within lateness 200 of b's window: an update
    records.push(("a".to_string(), 500)); // past a's lateness: late
    records.extend(filler(5_000));
    write_csv(&csv, &records);
    let late_dir = sandbox.join("late");
    let watermark = "{ out_of_orderness = \"0ms\", interval = \"1ms\" }";
    let job = JobFile::new("late")
        .file_source_with("events", &csv, false, &csv_keys(watermark))
        .operator(
            "window",
            guests::WINDOW,
            2,
            Some("tumbling 1000 lateness 200 late-output late"),
            ("events", "key-hash"),
        )
        .file_sink("out", &sandbox.out_dir(), 1, ("window", "rebalance"))
        .vertex(&format!(
            "[[sink]]\nname = \"late\"\ntype = \"file\"\npath = {:?}\ninputs = [{{ from = \"window\", output = \"late\" }}]\n",
            late_dir.to_str().unwrap()
        ));
    checkpointed(job, &sandbox, "1s", 2).write(&sandbox.job_path());
    let job = InProcess::start(&sandbox.job_path(), RunOptions::default());
    let monitor = job.monitor().clone();
    let outcome = job.join();
    assert!(outcome.failure.is_none(), "{outcome:?}");
    assert_eq!(
        committed_lines(&sandbox.out_dir()),
        [
            "a\t0,1000,1000",
            "b\t1000,2000,1000",
            "b\t1000,2000,1001",
            "z\t2000,3000,100000",
            "z\t5000,6000,100000",
        ]
    );
    assert_eq!(
        committed_lines(&late_dir),
        ["a\ta"],
        "the late record, unchanged"
    );
    let late: u64 = monitor
        .tasks()
        .iter()
        .filter(|(id, _, _)| id.vertex == "window")
        .map(|(_, _, m)| m.records_late())
        .sum();
    assert_eq!(
        late, 2,
        "b@1500 and a@500 arrived at or before the watermark"
    );
}

/// A short file and a rate-limited generator into one `window` operator: the file ends at
/// once, the generator after about two seconds; checkpoints every 100 ms.
fn two_lengths_job(sandbox: &Sandbox) -> JobFile {
    let short = sandbox.join("short.csv");
    let records: Vec<(String, i64)> = (0..10).map(|i| ("short".to_string(), i)).collect();
    write_csv(&short, &records);
    let sources = JobFile::new("lengths")
        .file_source_with("short", &short, false, &csv_keys(BOUNDED))
        .vertex(
            "[[source]]\nname = \"long\"\ntype = \"generator\"\nseed = 5\ncount = 40000\n\
             rate = 20000.0\nkeys = 50\ndisorder = 300\n\
             watermark = { out_of_orderness = \"300ms\", interval = \"5ms\" }\n",
        );
    let job = second_windows_over(sources, sandbox, ["short", "long"]);
    checkpointed(job, sandbox, "100ms", 3).checkpoint("min_pause", "0ms")
}

#[test]
fn a_task_restored_after_one_input_ended_still_reaches_the_end_of_time() {
    let reference = Sandbox::new("lengths-reference");
    two_lengths_job(&reference).write(&reference.job_path());
    let expected = reference_output(&reference, CLI_TIMEOUT);
    assert!(
        expected.iter().any(|l| l.starts_with("short\t0,1000,10")),
        "{expected:?}"
    );

    // Killed once checkpoints taken after `short` ended exist (four tasks snapshot per
    // checkpoint), then restored: `short` sends nothing more, and the window operator must
    // still know it ended, or it never reaches the end of time and its last windows never fire.
    let killed = Sandbox::new("lengths-killed");
    two_lengths_job(&killed).write(&killed.job_path());
    Weir::killed_at(&killed, "after-snapshot:12");
    run_cli(
        &killed.job_path(),
        &["--restore", "latest"],
        &killed.join("final.log"),
    )
    .assert_code(0, "the restored run");
    assert_same_output(
        &committed_lines(&killed.out_dir()),
        &expected,
        "after the restore",
    );
}

/// The shipped `examples/jobs/windows.toml` runs: windows on time, updated and late records
/// both present in its input, and each reaches its output.
#[test]
fn the_shipped_windows_example_runs() {
    let sandbox = Sandbox::new("windows-example");
    let example = crate::support::workspace_root().join("examples/jobs/windows.toml");
    let late_dir = sandbox.join("late");
    let text = fs::read_to_string(&example)
        .unwrap()
        .replace(
            "\"checkpoints/windows\"",
            &format!("{:?}", sandbox.checkpoint_dir().display().to_string()),
        )
        .replace(
            "\"out/windows\"",
            &format!("{:?}", sandbox.out_dir().display().to_string()),
        )
        .replace(
            "\"out/windows-late\"",
            &format!("{:?}", late_dir.display().to_string()),
        )
        .replace(
            "\"../../target/wasm32-unknown-unknown/release/weir_example_window.wasm\"",
            &format!("{:?}", guests::WINDOW),
        );
    fs::write(sandbox.job_path(), text).unwrap();
    run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log")).assert_code(0, "the example");
    let windows = committed_lines(&sandbox.out_dir());
    // 20 seconds of event time, 20 keys: about 400 windows, and updates on top.
    assert!(windows.len() >= 390, "{} windows", windows.len());
    let mut last: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for line in &windows {
        let (key, value) = line.split_once('\t').unwrap();
        let (bounds, count) = value.rsplit_once(',').unwrap();
        let count: u64 = count.parse().unwrap();
        let seen = last.entry((key, bounds)).or_default();
        *seen = (*seen).max(count);
    }
    assert!(
        last.len() < windows.len(),
        "some windows were updated by late records"
    );
    let late = committed_lines(&late_dir);
    assert!(
        !late.is_empty(),
        "some records were too late even for the lateness"
    );
    let counted: u64 = last.values().sum();
    assert_eq!(
        counted + late.len() as u64,
        20_000,
        "every record is in its window's last count or on the late output"
    );
}

/// The test broker and a new topic of two partitions on it, for `test`; `None` (the test
/// skipped) without a broker.
fn two_partition_topic(test: &str) -> Option<(&'static crate::kafka::Broker, String)> {
    let broker = crate::kafka::broker_or_skip(test)?;
    let topic = crate::kafka::unique("events");
    broker.create_topic(&topic, 2);
    Some((broker, topic))
}

/// Writes `(key, timestamp)` records to partition 0 of `topic`, each valued its key, the
/// timestamp in header `ts`, which the Kafka jobs of this file read; partition 1 stays idle.
fn produce_stamped(broker: &crate::kafka::Broker, topic: &str, records: &[(&str, i64)]) {
    let stamps: Vec<String> = records.iter().map(|(_, ts)| ts.to_string()).collect();
    /// One record's headers: its timestamp.
    type Stamp<'a> = [(&'a str, Option<&'a [u8]>); 1];
    let headers: Vec<Stamp<'_>> = stamps
        .iter()
        .map(|ts| [("ts", Some(ts.as_bytes()))])
        .collect();
    let rows: Vec<(crate::kafka::Produce<'_>, crate::kafka::ProduceHeaders<'_>)> = records
        .iter()
        .zip(&headers)
        .map(|((key, _), header)| {
            (
                (Some(0), Some(key.as_bytes()), key.as_bytes()),
                header.as_slice(),
            )
        })
        .collect();
    broker.produce_with_headers(topic, &rows);
}

/// One idle Kafka partition, Flink's classic trap: a topic of two partitions, every record in
/// partition 0, timestamps from a header, read by one source subtask that owns both. With an
/// idle timeout the silent partition goes idle and the windows fire; with `"off"` it holds the
/// watermark at its start and nothing fires.
#[test]
fn an_idle_kafka_partition_lets_windows_fire_and_without_idle_timeout_holds_them_back() {
    let Some((broker, topic)) = two_partition_topic("event-time-idle-partition") else {
        return;
    };
    let keys: Vec<String> = (0..3_000).map(|i| format!("k{}", i % 5)).collect();
    let records: Vec<(&str, i64)> = keys
        .iter()
        .zip((0..).step_by(2))
        .map(|(key, ts)| (key.as_str(), ts))
        .collect();
    produce_stamped(broker, &topic, &records);
    for (idle_timeout, fires) in [("300ms", true), ("off", false)] {
        let sandbox = Sandbox::new("idle-partition");
        let text = format!(
            "name = \"kidle\"\n[checkpoint]\ninterval = \"100ms\"\ndirectory = {:?}\n\
             [[source]]\nname = \"in\"\ntype = \"kafka\"\nbootstrap = \"{}\"\n\
             topics = [\"{topic}\"]\ngroup = \"{}\"\ntimestamp = {{ header = \"ts\" }}\n\
             watermark = {{ out_of_orderness = \"0ms\", idle_timeout = \"{idle_timeout}\", interval = \"20ms\" }}\n\
             [[operator]]\nname = \"window\"\nmodule = {:?}\nconfig = \"tumbling 1000\"\n\
             inputs = [{{ from = \"in\", partition = \"key-hash\" }}]\n\
             [[sink]]\nname = \"out\"\ntype = \"file\"\npath = {:?}\n\
             inputs = [{{ from = \"window\", partition = \"forward\" }}]\n",
            sandbox.checkpoint_dir().display().to_string(),
            broker.bootstrap(),
            crate::kafka::unique("group"),
            guests::WINDOW,
            sandbox.out_dir().display().to_string(),
        );
        fs::write(sandbox.job_path(), text).unwrap();
        let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
        // Timestamps 0..6000, five keys: windows up to [4000,5000) fire at watermark 5997.
        let what = format!("idle_timeout = {idle_timeout}: windows, or 15 checkpoints");
        let ran = weir.wait_until(&what, Duration::from_secs(60), |weir| {
            if fires {
                committed_lines(&sandbox.out_dir()).len() >= 5 * 5
            } else {
                weir.stderr().contains("checkpoint 15 complete")
            }
        });
        assert!(ran, "{what}: weir ended:\n{}", weir.stderr());
        weir.kill();
        let lines = committed_lines(&sandbox.out_dir());
        if fires {
            assert!(lines.contains(&"k0\t0,1000,100".to_string()), "{lines:?}");
        } else {
            assert_eq!(
                lines,
                Vec::<String>::new(),
                "the idle partition held every window"
            );
        }
    }
}

/// Issue 38: a restored source keeps the partitions that were idle at the checkpoint idle. A
/// topic of two partitions, partition 1 never written, one source subtask; `window` (tumbling
/// 1000, lateness 200, a late output) has fired `a`'s window [0, 1000) when `weir` is killed.
/// Written while it is down: filler at 2100 (its watermark, 2099, is past 1199, where `a`'s
/// window expires), then `a` at 500, then one record at 5000. By docs/WINDOWS.md §4 `a`@500 is
/// too late and goes to the late output; a restored source that counted partition 1 active
/// again held its watermark at 999 for `idle_timeout` and counted the record into the window.
#[test]
fn a_restored_source_keeps_its_idle_partition_idle_and_a_late_record_stays_late() {
    let Some((broker, topic)) = two_partition_topic("event-time-idle-partition-restored") else {
        return;
    };
    let mut first: Vec<(&str, i64)> = (0..1_000).map(|ts| ("a", ts)).collect();
    first.push(("z", 1_000)); // watermark 999: `a`'s window fires on time
    produce_stamped(broker, &topic, &first);

    let sandbox = Sandbox::new("idle-partition-restored");
    let late_dir = sandbox.join("late");
    let text = format!(
        "name = \"kidle-restored\"\n[checkpoint]\ninterval = \"100ms\"\nmode = \"exactly-once\"\n\
         directory = {:?}\n\
         [[source]]\nname = \"in\"\ntype = \"kafka\"\nbootstrap = \"{}\"\n\
         topics = [\"{topic}\"]\ngroup = \"{}\"\ntimestamp = {{ header = \"ts\" }}\n\
         watermark = {{ out_of_orderness = \"0ms\", idle_timeout = \"5s\", interval = \"1ms\" }}\n\
         [[operator]]\nname = \"window\"\nmodule = {:?}\n\
         config = \"tumbling 1000 lateness 200 late-output late\"\n\
         inputs = [{{ from = \"in\", partition = \"key-hash\" }}]\n\
         [[sink]]\nname = \"out\"\ntype = \"file\"\npath = {:?}\n\
         inputs = [{{ from = \"window\", partition = \"forward\" }}]\n\
         [[sink]]\nname = \"late\"\ntype = \"file\"\npath = {:?}\n\
         inputs = [{{ from = \"window\", output = \"late\" }}]\n",
        sandbox.checkpoint_dir().display().to_string(),
        broker.bootstrap(),
        crate::kafka::unique("group"),
        guests::WINDOW,
        sandbox.out_dir().display().to_string(),
        late_dir.display().to_string(),
    );
    fs::write(sandbox.job_path(), text).unwrap();
    let on_time = "a\t0,1000,1000".to_string();
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("first.log"));
    // Committed output means a completed checkpoint after the window fired, which needed
    // partition 1 idle: the checkpoint the restore takes has it idle.
    let fired = weir.wait_until("a's window", Duration::from_secs(60), |_| {
        committed_lines(&sandbox.out_dir()).contains(&on_time)
    });
    assert!(fired, "weir ended:\n{}", weir.stderr());
    weir.kill();

    let mut second: Vec<(&str, i64)> = std::iter::repeat_n(("z", 2_100), 30_000).collect();
    second.push(("a", 500)); // too late: `a`'s window expired at 1199
    second.push(("z", 5_000)); // watermark 4999: the window [2000, 3000) fires
    produce_stamped(broker, &topic, &second);
    let mut weir = Weir::run(
        &sandbox.job_path(),
        &["--restore", "latest"],
        &sandbox.join("restored.log"),
    );
    let last = "z\t2000,3000,30000".to_string();
    let done = weir.wait_until("the window [2000, 3000)", Duration::from_secs(60), |_| {
        committed_lines(&sandbox.out_dir()).contains(&last)
    });
    assert!(done, "weir ended:\n{}", weir.stderr());
    // The two sinks commit the same checkpoint each on its own thread: give `late` the moment
    // it may lag behind `out` (its record came first, so it is in that checkpoint or earlier).
    let deadline = Instant::now() + Duration::from_secs(5);
    while committed_lines(&late_dir).is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    weir.kill();
    assert_eq!(
        committed_lines(&sandbox.out_dir()),
        [on_time.as_str(), "z\t1000,2000,1", last.as_str()],
        "`a`'s window has its on-time count only"
    );
    assert_eq!(committed_lines(&late_dir), ["a\ta"], "the late record");
    report::record(&report::Row {
        area: "chaos",
        scenario: "event time, one of two Kafka partitions idle: SIGKILL after a window fired, \
                   restart with --restore latest",
        rounds: 1,
        faults: "1 kill; the records after it written while the job was down",
        result: "windows and late output as docs/WINDOWS.md gives them: the too-late record on \
                 the late output, its window's on-time count kept",
    });
}
