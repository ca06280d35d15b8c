//! Failover inside one process: a guest that panics in a running job fails the job over by its
//! restart strategy, from the latest completed checkpoint, and the committed output is still
//! exactly that of a run without the failure. Without restarts the job fails, and says where and
//! why.
//!
//! The failing guest is `tests/guests/flaky`: a pass-through operator that panics at the record
//! with the timestamp its config names, unless it was restored from a checkpoint.

use weir::job::JobStatus;
use weir_tests::guests;

use crate::support::{
    GeneratorSpec, JobFile, Sandbox, assert_committed_output, checkpointed, committed_lines,
    run_cli, run_in_process,
};

/// Records the generator emits; its timestamps are 0..RECORDS.
const RECORDS: u64 = 20_000;
/// The timestamp at which `flaky` panics: 40% into the stream.
const FAIL_AT: i64 = 8_000;
/// What `flaky` panics with.
const PANIC_MESSAGE: &str = "flaky: injected failure at timestamp 8000";

/// generator (p=1) → `flaky` → key-hash → `count` (p=2) → exactly-once file sink (p=2),
/// checkpointed every 100 ms. `rate` paces the generator (records/s) so that checkpoints
/// complete before the failure.
fn flaky_job(sandbox: &Sandbox, fail_at: Option<i64>, rate: Option<f64>, restart: &str) -> JobFile {
    let generator = GeneratorSpec {
        parallelism: 1,
        seed: 11,
        count: Some(RECORDS),
        rate,
        keys: 500,
    };
    let config = fail_at.map(|t| format!("fail_at={t}"));
    let job = JobFile::new("failover")
        .generator("gen", &generator)
        .operator(
            "flaky",
            guests::FLAKY,
            1,
            config.as_deref(),
            ("gen", "forward"),
        )
        .operator("count", guests::COUNT, 2, None, ("flaky", "key-hash"))
        .file_sink("out", &sandbox.out_dir(), 2, ("count", "forward"))
        .restart(restart);
    checkpointed(job, sandbox, "100ms", 1)
}

#[test]
fn guest_panic_fails_over_from_the_latest_checkpoint_and_commits_exactly_once() {
    let rate = Some(10_000.0);
    let reference = Sandbox::new("failover-reference");
    flaky_job(&reference, None, rate, "strategy = \"none\"").write(&reference.job_path());
    let outcome = run_in_process(&reference.job_path());
    assert_eq!(
        (outcome.status, outcome.restarts),
        (JobStatus::Finished, 0),
        "the reference run: {outcome:?}"
    );
    let expected = committed_lines(&reference.out_dir());
    assert_eq!(
        expected.len() as u64,
        RECORDS,
        "the reference run commits one count per record"
    );

    let sandbox = Sandbox::new("failover");
    let restart = "strategy = \"fixed-delay\"\nattempts = 2\ndelay = \"100ms\"";
    flaky_job(&sandbox, Some(FAIL_AT), rate, restart).write(&sandbox.job_path());
    let outcome = run_in_process(&sandbox.job_path());
    assert_eq!(
        (outcome.status, outcome.restarts),
        (JobStatus::Finished, 1),
        "one failure, one restart, then to the end (two restarts mean the restart found no \
         completed checkpoint, so `flaky` was not restored and failed again): {outcome:?}"
    );
    assert_committed_output(&sandbox.out_dir(), &expected, "after a failover");
}

#[test]
fn guest_panic_without_restarts_fails_the_job_naming_operator_subtask_and_message() {
    let sandbox = Sandbox::new("failover-none");
    // As fast as it goes: the failure comes before or after checkpoints, it must not matter.
    flaky_job(&sandbox, Some(FAIL_AT), None, "strategy = \"none\"").write(&sandbox.job_path());
    let outcome = run_in_process(&sandbox.job_path());
    assert_eq!(
        (outcome.status, outcome.restarts),
        (JobStatus::Failed, 0),
        "{outcome:?}"
    );
    let failure = outcome.failure.expect("a failed job says why");
    for needle in ["flaky", "subtask 0", PANIC_MESSAGE] {
        assert!(
            failure.contains(needle),
            "the failure should name {needle:?}: {failure}"
        );
    }

    // The command line says the same, with the exit code of a failed job.
    let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    ended.assert_code(1, "a job that failed beyond its restart strategy");
    let summary = ended
        .stderr
        .lines()
        .find(|l| l.trim_start().starts_with("failure:"))
        .unwrap_or_else(|| panic!("no `failure:` line in the summary:\n{}", ended.stderr));
    for needle in ["flaky", "subtask 0", PANIC_MESSAGE] {
        assert!(
            summary.contains(needle),
            "the summary should name {needle:?}: {summary}"
        );
    }
}
