//! Back-pressure: an unbounded generator running as fast as it can in front of a slow stage.
//! Channels are bounded, so the source must be slowed to the pace of the slow stage: the
//! `weir` process's memory must stay flat however long it runs, and barriers — which queue
//! behind the records already in the channels — must still get through, so checkpoints keep
//! completing. When they cannot (a stage so slow that the queued records take longer than the
//! checkpoint timeout), checkpoints must expire cleanly, the job must keep running while within
//! `tolerable_failures` and fail with a clear message beyond it.
//!
//! The slow stage is a wasm operator just before a blackhole sink that spins a fixed number of
//! loop iterations per record: a sink's speed is a property of the system it writes to, while
//! what the host must get right depends only on there being a slowest stage.
//!
//! `WEIR_BACKPRESSURE_SECS` sets how long the healthy run lasts (default 15 s; the long run in
//! docs/RELIABILITY.md uses minutes).

use std::fs;
use std::time::{Duration, Instant};

use crate::support::report;
use crate::support::{
    CLI_TIMEOUT, GeneratorSpec, JOB_STARTING, JobFile, Sandbox, Weir, checkpoint_dirs,
    number_from_env,
};

/// Exit code of `weir run` when the job failed beyond its restart strategy.
const EXIT_JOB_FAILED: i32 = 1;
/// Exit code of `weir run` after a cancel by signal.
const EXIT_CANCELED: i32 = 130;
/// A generous bound on the `weir` process's resident memory in these jobs: the engine, two
/// compiled guests and channels of 16 batches of 64 KiB. A leak or an unbounded queue under
/// a source that produces a few million records per second crosses it within seconds.
const RSS_BOUND_KIB: u64 = 128 * 1024;
/// How much the resident memory may grow between the first and the second half of a run.
const RSS_GROWTH_KIB: u64 = 24 * 1024;

/// An identity operator that first spins `spin` loop iterations per record of its batch.
fn slow_operator(spin: u32) -> String {
    format!(
        r#"(module
  (import "weir" "emit" (func $emit (param i32 i32)))
  (memory (export "memory") 2)
  (func (export "weir_abi_version") (result i32) (i32.const 1))
  (func (export "weir_alloc") (param $len i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $len) (i32.const 65536))
      (then (i32.const 0))
      (else (i32.const 65536))))
  (func (export "weir_process") (param $ptr i32) (param $len i32) (result i32)
    (local $left i64)
    ;; records in the batch × iterations per record
    (local.set $left (i64.mul (i64.extend_i32_u (i32.load (local.get $ptr))) (i64.const {spin})))
    (block $done
      (loop $spin
        (br_if $done (i64.eqz (local.get $left)))
        (local.set $left (i64.sub (local.get $left) (i64.const 1)))
        (br $spin)))
    (i32.store offset=4 (local.get $ptr) (i32.const 0))
    (call $emit (local.get $ptr) (local.get $len))
    (i32.const 0)))
"#
    )
}

/// generator (p=1, unbounded, full speed) → forward → `slow` (p=1) → blackhole.
fn slow_job(sandbox: &Sandbox, spin: u32) -> JobFile {
    let module = sandbox.join("slow.wat");
    fs::write(&module, slow_operator(spin)).unwrap();
    let generator = GeneratorSpec {
        parallelism: 1,
        seed: 7,
        count: None,
        rate: None,
        keys: 1000,
    };
    JobFile::new("backpressure")
        .generator("gen", &generator)
        .operator(
            "slow",
            module.to_str().unwrap(),
            1,
            None,
            ("gen", "forward"),
        )
        .blackhole_sink("out", 1, ("slow", "forward"))
        .checkpoint("mode", "exactly-once")
        .checkpoint("directory", sandbox.checkpoint_dir().as_path())
        .checkpoint("retained", 2u32)
        .restart("strategy = \"none\"")
}

/// The resident and peak resident memory of process `pid`, in KiB, while it runs.
fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resident memory samples of a running process, every 100 ms.
#[derive(Debug, Default)]
struct Memory {
    samples: Vec<u64>,
    peak: u64,
}

impl Memory {
    fn sample(&mut self, pid: u32) {
        if let Some((rss, hwm)) = memory_kib(pid) {
            self.samples.push(rss);
            self.peak = self.peak.max(hwm);
        }
    }

    /// Watches `weir` for `duration` (or until it exits).
    fn watch(&mut self, weir: &mut Weir, duration: Duration) {
        let until = Instant::now() + duration;
        while Instant::now() < until && weir.try_exit().is_none() {
            self.sample(weir.pid());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Fails if the peak crossed [`RSS_BOUND_KIB`] or the second half of the samples grew
    /// past the first half by more than [`RSS_GROWTH_KIB`].
    fn assert_bounded(&self, context: &str) {
        assert!(
            self.samples.len() >= 10,
            "{context}: too few memory samples ({})",
            self.samples.len()
        );
        let half = self.samples.len() / 2;
        let first = self.samples[..half].iter().max().unwrap();
        let second = self.samples[half..].iter().max().unwrap();
        assert!(
            self.peak <= RSS_BOUND_KIB,
            "{context}: peak RSS {} MiB is above the bound of {} MiB",
            self.peak / 1024,
            RSS_BOUND_KIB / 1024
        );
        assert!(
            *second <= first + RSS_GROWTH_KIB,
            "{context}: RSS grew from {} MiB (first half) to {} MiB (second half)",
            first / 1024,
            second / 1024
        );
    }

    fn describe(&self) -> String {
        let half = self.samples.len() / 2;
        format!(
            "peak RSS {} MiB; max {} MiB in the first half, {} MiB in the second",
            self.peak / 1024,
            self.samples[..half].iter().max().unwrap_or(&0) / 1024,
            self.samples[half..].iter().max().unwrap_or(&0) / 1024
        )
    }
}

/// The durations in ms of the checkpoints `weir` logged as complete.
fn completed_durations(stderr: &str) -> Vec<u64> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.split("checkpoint ").nth(1)?;
            let (_, after) = rest.split_once(" complete: ")?;
            after.split(" ms").next()?.parse().ok()
        })
        .collect()
}

/// The number of checkpoints `weir` logged as failed by expiry.
fn expired(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.contains(" failed: expired after "))
        .count()
}

/// Records read by the sources and taken in by the sinks, from the summary `weir` prints at
/// its end (`records: 123 in, 120 out (last attempt)`).
fn records_in_out(stderr: &str) -> Option<(u64, u64)> {
    let line = stderr
        .lines()
        .find(|l| l.trim_start().starts_with("records:"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    Some((words.get(1)?.parse().ok()?, words.get(3)?.parse().ok()?))
}

#[test]
fn a_slow_stage_bounds_memory_and_checkpoints_still_complete() {
    let secs = number_from_env("WEIR_BACKPRESSURE_SECS", 15).max(4);
    let sandbox = Sandbox::new("backpressure-healthy");
    // Tens of thousands of records per second (about 30k measured on the debug build); the
    // in-flight check below shows the generator was held back to that pace.
    slow_job(&sandbox, 20_000)
        .checkpoint("interval", "500ms")
        .checkpoint("timeout", "20s")
        .write(&sandbox.job_path());
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    weir.wait_for_log(JOB_STARTING);
    let mut memory = Memory::default();
    memory.watch(&mut weir, Duration::from_secs(secs));
    assert!(
        weir.try_exit().is_none(),
        "the job ended on its own:\n{}",
        weir.stderr()
    );
    weir.terminate();
    let ended = weir.wait(CLI_TIMEOUT);
    ended.assert_code(EXIT_CANCELED, "a cancel by SIGTERM");

    let durations = completed_durations(&ended.stderr);
    let context = format!(
        "slow stage for {secs} s: {} checkpoints completed ({durations:?} ms), {}",
        durations.len(),
        memory.describe()
    );
    memory.assert_bounded(&context);
    // One every 500 ms plus its duration; starved barriers would give none or a few.
    assert!(
        durations.len() as u64 >= secs / 2,
        "{context}: barriers were starved behind the records"
    );
    assert_eq!(expired(&ended.stderr), 0, "{context}: a checkpoint expired");
    let (read, written) = records_in_out(&ended.stderr).expect("the summary has a records line");
    assert!(written > 0, "{context}: no record reached the sink");
    // The source was held back to the stage's pace: what it read and the sink has not taken
    // in fits in the bounded channels between them (2 edges × 16 batches of 64 KiB, under
    // 2000 records each) and the stage's batch in hand, not in memory growing with time.
    let in_flight = read - written;
    assert!(
        in_flight <= 100_000,
        "{context}: {in_flight} records read and not yet written ({read} read, {written} \
         written): the source was not held back"
    );
    let max = durations.iter().max().unwrap();
    report::record(&report::Row {
        area: "back-pressure",
        scenario: &format!(
            "full-speed generator → wasm stage spinning 20k iterations/record → blackhole, {secs} s"
        ),
        rounds: durations.len() as u64,
        faults: "the slow stage holds the source back; a checkpoint every 500 ms",
        result: &format!(
            "{} records/s through the stage, {in_flight} in flight at the end; {} checkpoints \
             completed (max {max} ms), none expired; {}",
            written / secs,
            durations.len(),
            memory.describe()
        ),
    });
}

#[test]
fn checkpoints_that_cannot_finish_expire_and_fail_the_job_beyond_the_tolerable_count() {
    let sandbox = Sandbox::new("backpressure-expiring");
    // 50× slower (a millisecond or more per record): the records queued ahead of a barrier
    // take seconds, so every checkpoint outlives its 400 ms timeout. Queued in channels: a
    // chain has none, and its barrier waits for one poll's records only (it may come in time).
    slow_job(&sandbox, 1_000_000)
        .unchained()
        .checkpoint("interval", "200ms")
        .checkpoint("timeout", "400ms")
        .checkpoint("tolerable_failures", 3u32)
        .write(&sandbox.job_path());
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    weir.wait_for_log(JOB_STARTING);
    let mut memory = Memory::default();
    memory.watch(&mut weir, CLI_TIMEOUT);
    let ended = weir.wait(CLI_TIMEOUT);
    ended.assert_code(EXIT_JOB_FAILED, "checkpoints beyond the tolerable failures");
    let stderr = &ended.stderr;
    assert_eq!(
        expired(stderr),
        4,
        "three tolerated expiries, then the fourth fails the job:\n{stderr}"
    );
    assert!(
        stderr.contains("4 checkpoint failures in a row exceed the 3 tolerated"),
        "the failure names the count and the limit:\n{stderr}"
    );
    assert!(
        stderr.contains("expired after 400ms before every task acknowledged"),
        "the failure says why the checkpoints failed:\n{stderr}"
    );
    assert!(
        completed_durations(stderr).is_empty(),
        "no checkpoint could complete:\n{stderr}"
    );
    // Aborted checkpoints leave no directories behind once the job has ended.
    let left: Vec<String> = checkpoint_dirs(&sandbox.checkpoint_dir())
        .iter()
        .map(|c| c.path.display().to_string())
        .collect();
    let context = format!("expiring checkpoints: {}", memory.describe());
    assert!(
        left.is_empty(),
        "{context}: directories of expired checkpoints remain: {left:?}"
    );
    if memory.samples.len() >= 10 {
        memory.assert_bounded(&context);
    }
    report::record(&report::Row {
        area: "back-pressure",
        scenario: "wasm stage spinning 1M iterations/record behind a full-speed generator; timeout 400 ms",
        rounds: 4,
        faults: "every checkpoint outlives its timeout; tolerable_failures = 3",
        result: &format!(
            "3 expiries tolerated while the job ran, the 4th failed it with a message naming \
             count, limit and cause; no checkpoint directory left; {}",
            memory.describe()
        ),
    });
}
