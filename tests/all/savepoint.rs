//! Stop with a savepoint: `weir run --savepoint-on-stop` stopped by SIGTERM takes a savepoint,
//! commits, exits 0 and names the savepoint; `--restore <savepoint>` then finishes the job with
//! the output of a run that was never stopped.

use crate::support::{
    CLI_TIMEOUT, Ended, GeneratorSpec, JobFile, Sandbox, assert_committed_output, checkpointed,
    committed_lines, generator_count, reference_output, run_cli, stop_with_savepoint,
};

/// The generator of these tests: 2 subtasks, 300 keys, 10 000 records a second, `count` in
/// all, so that a stop after a few checkpoints comes well before the end.
fn generator(count: u64) -> GeneratorSpec {
    GeneratorSpec {
        parallelism: 2,
        seed: 5,
        count: Some(count),
        rate: Some(10_000.0),
        keys: 300,
    }
}

#[test]
fn sigterm_with_savepoint_on_stop_takes_a_savepoint_that_restores_to_the_undisturbed_output() {
    // Three seconds of records: the stop comes well before the end.
    let generator = generator(30_000);
    let reference = Sandbox::new("savepoint-reference");
    checkpointed(
        generator_count(&reference, &generator),
        &reference,
        "100ms",
        1,
    )
    .write(&reference.job_path());
    let expected = reference_output(&reference, CLI_TIMEOUT);

    let sandbox = Sandbox::new("savepoint");
    let job = sandbox.job_path();
    checkpointed(generator_count(&sandbox, &generator), &sandbox, "100ms", 1).write(&job);
    let checkpoints = sandbox.checkpoint_dir();
    let savepoint = stop_with_savepoint(&sandbox, &sandbox.join("stop.log"), 2);
    assert!(
        savepoint.join("_metadata").is_file(),
        "{} is not a complete savepoint",
        savepoint.display()
    );
    assert!(
        savepoint.starts_with(&checkpoints),
        "savepoints go under the job's checkpoint directory: {}",
        savepoint.display()
    );
    let committed = committed_lines(&sandbox.out_dir()).len();
    assert!(
        0 < committed && committed < expected.len(),
        "the stop should come mid-job, with the output so far committed: {committed} of {} lines",
        expected.len()
    );

    let restore = savepoint.to_str().unwrap();
    let ended = run_cli(&job, &["--restore", restore], &sandbox.join("restore.log"));
    ended.assert_code(0, "the run restored from the savepoint");
    ended.assert_stderr_contains(&format!("restoring from {restore}"));
    assert_committed_output(
        &sandbox.out_dir(),
        &expected,
        "after a stop with a savepoint and a restore",
    );
    assert!(
        savepoint.join("_metadata").is_file(),
        "a savepoint is never pruned"
    );
}

#[test]
fn a_second_stop_while_the_stop_savepoint_is_in_flight_does_not_cancel_the_job() {
    use std::time::Duration;
    use weir::job::JobStatus;
    use weir::runtime::{JobRequest, RunOptions};

    use crate::support::InProcess;

    // Ten seconds of records: the stops come well before the end.
    let generator = generator(100_000);
    let sandbox = Sandbox::new("savepoint-twice");
    checkpointed(generator_count(&sandbox, &generator), &sandbox, "100ms", 1)
        .write(&sandbox.job_path());
    let running = InProcess::start(&sandbox.job_path(), RunOptions::default());
    running.wait_until("a checkpoint", Duration::from_secs(30), |monitor| {
        monitor.checkpoint_counts().0 >= 1
    });
    // The second as a user who presses Ctrl-C twice, or a worker whose other stage stopped,
    // sends it: before the first one's savepoint is complete.
    running.request(JobRequest::StopWithSavepoint);
    running.request(JobRequest::StopWithSavepoint);
    let outcome = running.join();
    assert_eq!(outcome.status, JobStatus::Finished, "{outcome:?}");
    let savepoint = outcome.savepoint.expect("the stop's savepoint");
    assert!(
        savepoint.join("_metadata").is_file(),
        "{}",
        savepoint.display()
    );
}

/// A savepoint the job as it now is cannot take up — its file sink's parts are not in the
/// sink's (new) directory; its `count` is another module that cannot read the state — is
/// refused when the run starts (exit 3, naming the savepoint, what failed and the way out),
/// never retried by the restart strategy nor run on without the output it owes.
#[test]
fn a_savepoint_the_job_cannot_take_up_is_refused_at_the_start_naming_why() {
    let generator = generator(30_000);
    let sandbox = Sandbox::new("savepoint-refused");
    checkpointed(generator_count(&sandbox, &generator), &sandbox, "100ms", 1)
        .restart("strategy = \"fixed-delay\"\nattempts = 3\ndelay = \"10ms\"")
        .write(&sandbox.job_path());
    let savepoint = stop_with_savepoint(&sandbox, &sandbox.join("stop.log"), 2);
    let restore = ["--restore", savepoint.to_str().unwrap()];
    let job = |count: &str, out: &std::path::Path| {
        let job = JobFile::new("gencount")
            .generator("gen", &generator)
            .operator("count", count, 2, None, ("gen", "key-hash"))
            .file_sink("out", out, 2, ("count", "forward"));
        checkpointed(job, &sandbox, "100ms", 1)
            .restart("strategy = \"fixed-delay\"\nattempts = 3\ndelay = \"10ms\"")
    };
    let refused = |ended: &Ended, context: &str, said: &[&str]| {
        ended.assert_code(3, context);
        for said in said.iter().chain(&[
            "cannot be restored into this job",
            savepoint.to_str().unwrap(),
        ]) {
            assert!(
                ended.stderr.contains(said),
                "{context}: no {said:?} in\n{}",
                ended.stderr
            );
        }
        assert!(
            !ended.stderr.contains("restarting"),
            "{context}: retried\n{}",
            ended.stderr
        );
    };

    // The sink's path changed since the savepoint: the parts it left to commit are elsewhere.
    let moved = sandbox.join("moved");
    job(weir_tests::guests::COUNT, &moved).write(&sandbox.job_path());
    let ended = run_cli(&sandbox.job_path(), &restore, &sandbox.join("moved.log"));
    refused(
        &ended,
        "a sink whose directory moved",
        &["lacks the parts", "point `path` back"],
    );
    assert!(
        committed_lines(&moved).is_empty(),
        "output committed from a refused restore"
    );

    // Another module under the name `count`, which cannot read count's state.
    job(weir_tests::guests::WAT_COUNT, &sandbox.out_dir()).write(&sandbox.job_path());
    let ended = run_cli(&sandbox.job_path(), &restore, &sandbox.join("module.log"));
    refused(
        &ended,
        "another module under the operator's name",
        &["weir_restore"],
    );
}
