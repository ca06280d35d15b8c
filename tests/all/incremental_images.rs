//! Incremental image checkpoints in running jobs (docs/CHECKPOINTS.md §7, §10): pruning keeps
//! the checkpoints a retained delta's chain needs and removes them once a full image makes
//! them useless; savepoints are full images that no checkpoint builds on.

use std::collections::BTreeMap;
use std::time::Duration;

use weir::checkpoint::recovery::files_to_keep;
use weir::checkpoint::shared::References;
use weir::ids::{CheckpointId, CheckpointKind};
use weir::job::JobStatus;
use weir::runtime::{JobRequest, RunOptions};

use crate::support::{
    GeneratorSpec, InProcess, JobFile, Sandbox, assert_complete_checkpoints_verify, checkpointed,
    complete_checkpoints, generator_count,
};

/// A full image every this many checkpoints.
const FULL_EVERY: u32 = 4;

/// generator → `count` (p=2) checkpointed as incremental images, a full one every
/// [`FULL_EVERY`] → file sink; a checkpoint every 50 ms, `retained` kept, kept on cancel.
/// Unbounded: it runs until it is cancelled.
fn job(sandbox: &Sandbox, retained: u32) -> JobFile {
    let generator = GeneratorSpec {
        parallelism: 2,
        seed: 5,
        count: None,
        rate: Some(4_000.0),
        keys: 500,
    };
    let job = generator_count(sandbox, &generator)
        .state_capture("image")
        .image_full_every(FULL_EVERY);
    checkpointed(job, sandbox, "50ms", retained).checkpoint("on_cancel", "retain")
}

/// [`job`], keeping `retained` checkpoints, started in this process in a sandbox `label`.
fn start(label: &str, retained: u32) -> (Sandbox, InProcess) {
    let sandbox = Sandbox::new(label);
    job(&sandbox, retained).write(&sandbox.job_path());
    let running = InProcess::start(&sandbox.job_path(), RunOptions::default());
    (sandbox, running)
}

/// What each checkpoint needs kept (its chains' links), by id.
fn links(
    on_disk: &BTreeMap<u64, weir::checkpoint::metadata::CheckpointMetadata>,
) -> BTreeMap<CheckpointId, References> {
    on_disk
        .iter()
        .map(|(&id, meta)| (CheckpointId(id), meta.references()))
        .collect()
}

#[test]
fn pruning_keeps_the_chain_of_the_retained_checkpoint_until_a_full_image_then_removes_it() {
    let (sandbox, running) = start("incremental-pruning", 1);
    let dir = sandbox.checkpoint_dir();
    // Seen: the newest checkpoint a delta with its whole chain on disk; after that, a newer
    // full image alone on disk (its predecessors pruned).
    let mut chain_kept = None;
    let mut pruned_after_full = false;
    running.wait_until(
        "a delta's chain kept, then pruned after a full image",
        Duration::from_secs(60),
        |_| {
            let on_disk = complete_checkpoints(&dir);
            let Some((&newest, meta)) = on_disk.iter().next_back() else {
                return false;
            };
            let needed = meta.chain_links();
            if !needed.is_empty() {
                let missing: Vec<_> = needed
                    .iter()
                    .filter(|id| !on_disk.contains_key(&id.0))
                    .collect();
                // A prune racing with the listing can remove links after they were listed
                // missing; then it removed the newest too, which the next listing shows.
                let gone = !complete_checkpoints(&dir).contains_key(&newest);
                assert!(
                    missing.is_empty() || gone,
                    "checkpoint {newest} needs {missing:?}, which were pruned: {:?}",
                    on_disk.keys().collect::<Vec<_>>()
                );
                if missing.is_empty() && needed.len() as u32 == FULL_EVERY - 1 {
                    chain_kept.get_or_insert(newest);
                }
            } else if chain_kept.is_some_and(|kept| newest > kept) && on_disk.len() == 1 {
                pruned_after_full = true;
            }
            chain_kept.is_some() && pruned_after_full
        },
    );
    running.request(JobRequest::Cancel);
    let outcome = running.join();
    assert_eq!(outcome.status, JobStatus::Canceled, "{outcome:?}");

    // What is left is exactly the newest checkpoint and what its chains need.
    let on_disk = complete_checkpoints(&dir);
    let kept: Vec<u64> = files_to_keep(&links(&on_disk), 1)
        .checkpoints
        .into_iter()
        .map(|id| id.0)
        .collect();
    assert_eq!(on_disk.keys().copied().collect::<Vec<_>>(), kept);
    assert_complete_checkpoints_verify(&dir, "after the cancel");
}

#[test]
fn a_savepoint_is_a_full_image_and_no_checkpoint_builds_on_it() {
    let (sandbox, running) = start("incremental-savepoint", 10);
    let dir = sandbox.checkpoint_dir();
    running.wait_until("three checkpoints", Duration::from_secs(30), |monitor| {
        monitor.checkpoint_counts().0 >= 3
    });
    let (savepoint, _outcome) = JobRequest::savepoint(false);
    running.request(savepoint);
    let savepoints = dir.join("savepoints");
    let mut after = None;
    running.wait_until(
        "the savepoint and three checkpoints after it",
        Duration::from_secs(30),
        |monitor| {
            let done = std::fs::read_dir(&savepoints)
                .map(|entries| {
                    entries
                        .flatten()
                        .any(|e| e.path().join("_metadata").exists())
                })
                .unwrap_or(false);
            if done && after.is_none() {
                after = Some(monitor.checkpoint_counts().0);
            }
            after.is_some_and(|at| monitor.checkpoint_counts().0 >= at + 3)
        },
    );
    running.request(JobRequest::Cancel);
    let outcome = running.join();
    assert_eq!(outcome.status, JobStatus::Canceled, "{outcome:?}");

    use weir::checkpoint::layout::CheckpointLayout;
    use weir::checkpoint::storage::{CheckpointStorage as _, LocalStorage};
    let storage = LocalStorage::new(CheckpointLayout::new(&dir));
    let listed = storage.list().unwrap();
    let savepoint = listed
        .iter()
        .find(|l| l.kind == CheckpointKind::Savepoint)
        .and_then(|l| l.metadata())
        .expect("a complete savepoint");
    assert!(
        savepoint.tasks.iter().all(|t| t.chain.is_empty()),
        "a savepoint is self-contained: {:?}",
        savepoint.tasks
    );
    assert_eq!(savepoint.format_version, 1, "readable by every build");
    let on_disk = complete_checkpoints(&dir);
    assert!(
        on_disk.values().any(|m| !m.chain_links().is_empty()),
        "the checkpoints around it are deltas"
    );
    for (id, meta) in &on_disk {
        assert!(
            !meta.chain_links().contains(&savepoint.checkpoint_id),
            "checkpoint {id} builds on the savepoint"
        );
    }
    assert_complete_checkpoints_verify(&dir, "after the cancel");
}
