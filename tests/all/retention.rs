//! Retention of completed checkpoints: only `retained` are kept while a job runs and when it
//! finishes; a cancel keeps them with `on_cancel = "retain"` and removes them with `"delete"`.

use std::time::Duration;

use weir::job::JobStatus;
use weir::runtime::{JobRequest, RunOptions};

use crate::support::{
    GeneratorSpec, InProcess, JobFile, Sandbox, checkpoint_dirs, checkpointed,
    complete_checkpoint_ids, generator_count, incomplete_checkpoints, run_in_process,
};

const RETAINED: u32 = 2;

/// generator → count → file sink, a checkpoint every 50 ms, keeping [`RETAINED`].
/// `count = None`: unbounded, so the job runs until it is cancelled.
fn job(sandbox: &Sandbox, count: Option<u64>, on_cancel: &str) -> JobFile {
    let generator = GeneratorSpec {
        parallelism: 2,
        seed: 3,
        count,
        rate: Some(4_000.0),
        keys: 100,
    };
    checkpointed(
        generator_count(sandbox, &generator),
        sandbox,
        "50ms",
        RETAINED,
    )
    .checkpoint("on_cancel", on_cancel)
}

/// Runs the unbounded job until `checkpoints` completed, checking meanwhile that no more than
/// `retained` (plus the newest, between its metadata write and the pruning of the oldest) are
/// ever complete on disk; then cancels it. Returns the id of the last completed checkpoint.
fn run_then_cancel(sandbox: &Sandbox, on_cancel: &str, checkpoints: u64) -> u64 {
    job(sandbox, None, on_cancel).write(&sandbox.job_path());
    let running = InProcess::start(&sandbox.job_path(), RunOptions::default());
    let dir = sandbox.checkpoint_dir();
    let mut most = 0;
    running.wait_until(
        "checkpoints to complete",
        Duration::from_secs(30),
        |monitor| {
            let complete = complete_checkpoint_ids(&dir);
            most = most.max(complete.len());
            assert!(
                complete.len() <= RETAINED as usize + 1,
                "{} complete checkpoints on disk with retained = {RETAINED}: {complete:?}",
                complete.len()
            );
            monitor.checkpoint_counts().0 >= checkpoints
        },
    );
    assert!(
        most >= RETAINED as usize,
        "never saw {RETAINED} complete checkpoints on disk"
    );
    running.request(JobRequest::Cancel);
    let monitor = running.monitor().clone();
    let outcome = running.join();
    assert_eq!(outcome.status, JobStatus::Canceled, "{outcome:?}");
    monitor
        .last_checkpoint()
        .expect("checkpoints completed")
        .id
        .0
}

#[test]
fn cancel_with_retain_keeps_the_retained_newest_checkpoints() {
    let sandbox = Sandbox::new("retain");
    let last = run_then_cancel(&sandbox, "retain", 8);
    let complete = complete_checkpoint_ids(&sandbox.checkpoint_dir());
    assert_eq!(
        complete.len(),
        RETAINED as usize,
        "complete checkpoints after the cancel: {complete:?}"
    );
    assert_eq!(
        complete.last(),
        Some(&last),
        "the newest completed checkpoint is kept"
    );
    let incomplete = incomplete_checkpoints(&sandbox.checkpoint_dir());
    assert!(
        incomplete.is_empty(),
        "a cancelled job leaves incomplete checkpoints behind: {incomplete:?}"
    );
}

#[test]
fn cancel_with_delete_removes_every_checkpoint() {
    let sandbox = Sandbox::new("delete");
    run_then_cancel(&sandbox, "delete", 5);
    let left = checkpoint_dirs(&sandbox.checkpoint_dir());
    assert!(
        left.is_empty(),
        "checkpoints remain after a cancel with on_cancel = \"delete\": {left:?}"
    );
}

#[test]
fn finished_job_keeps_only_the_retained_checkpoints() {
    let sandbox = Sandbox::new("retain-finish");
    // About a second of records: several checkpoints, the last one when the sources end.
    job(&sandbox, Some(4_000), "retain").write(&sandbox.job_path());
    let outcome = run_in_process(&sandbox.job_path());
    assert_eq!(outcome.status, JobStatus::Finished, "{outcome:?}");
    let all = checkpoint_dirs(&sandbox.checkpoint_dir());
    assert!(
        all.len() as u32 == RETAINED && all.iter().all(|c| c.complete),
        "checkpoints after the job finished: {all:?}"
    );
}
