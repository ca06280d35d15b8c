//! Keyed state kept on the host (docs/STATE.md, `docs/ABI.md` §17): the word count whose
//! counts live in the task's embedded store (`examples/rust/host-count`) rather than in the
//! operator's memory.
//!
//! The process is killed with SIGKILL right after its third checkpoint completes, and the job
//! restored with `--restore latest` in a new process: its counts come back from the shared
//! files the checkpoints stored (each of the store's table files once, named again by later
//! checkpoints) and the inline files of its state file, and the committed output must be the
//! word counts of the whole input, each exactly once. The random kills of every phase are
//! `chaos::kill_and_restore_wordcount_with_the_count_kept_on_the_host_…`.
//!
//! A rescale from a checkpoint (shared files, not a savepoint's inline copy): killed after a
//! checkpoint at parallelism 2, restored at 3, killed again, restored at 1; each new subtask's
//! store is laid out from the old stores that owned its key groups, clipped to its own.
//!
//! The same runs are made with the count in Python (`examples/python/host-count`) and in
//! JavaScript (`examples/js/host-count`), components of the world `keyed-operator` whose
//! counts are kept in the same stores: a guest in any language restores and rescales with no
//! code of its own.

use std::fs;
use std::path::Path;

use crate::support::{
    JobFile, Sandbox, Weir, assert_same_output, checkpointed, committed_lines, foreign, run_cli,
    word_counts, word_text, wordcount_counting_with, wordcount_of,
};

/// The files of every `shared` directory below `dir`: the shared files of the job's
/// checkpoints.
fn shared_files(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_dir() {
            continue;
        }
        if entry.file_name() == "shared" {
            found.extend(
                fs::read_dir(&path)
                    .unwrap()
                    .flatten()
                    .map(|f| f.file_name().to_string_lossy().into_owned()),
            );
        } else {
            found.extend(shared_files(&path));
        }
    }
    found
}

/// Runs the word count with `count` (a host-count module) on `lines` lines of words, kills the
/// process right after its third checkpoint completes, restores the job in a new process, and
/// checks that the committed output is the word counts of the whole input, each once.
fn killed_after_a_checkpoint_restores_exactly_once(
    name: &str,
    count: &str,
    seed: u64,
    lines: usize,
) {
    let sandbox = Sandbox::new(name);
    let input = sandbox.join("words.txt");
    let text = word_text(seed, lines, 30);
    fs::write(&input, &text).unwrap();
    let job = wordcount_counting_with(&sandbox, &input, false, count);
    let state = sandbox.join("state");
    checkpointed(job, &sandbox, "50ms", 2)
        .checkpoint("min_pause", "0ms")
        .state("directory", state.as_path())
        .write(&sandbox.job_path());

    Weir::killed_at(&sandbox, "before-commit:3");
    // A process killed cannot remove its stores' directory: the next run of the job does. The
    // local copies of its checkpoints are the job's, for that run to restore from.
    let left = dir_names(&state);
    assert!(
        matches!(left.as_slice(), [local, one] if local.starts_with("weir-local-wordcount-")
            && one.starts_with("weir-state-wordcount-")),
        "the killed run left {left:?} in its state directory"
    );
    // The counts' table files went to the shared directory, named by the checkpoint that
    // stored them and the count's subtask.
    let shared = shared_files(&sandbox.checkpoint_dir());
    assert!(
        shared
            .iter()
            .any(|name| name.contains("count") && name.ends_with(".sst")),
        "the checkpoints store the counts' table files as shared files, found {shared:?}"
    );

    let ended = run_cli(
        &sandbox.job_path(),
        &["--restore", "latest"],
        &sandbox.join("restored.log"),
    );
    ended.assert_code(0, "the restored run");
    assert_same_output(
        &committed_lines(&sandbox.out_dir()),
        &word_counts(&text),
        "the word counts of the whole input, once",
    );
    assert!(
        ended
            .stderr
            .contains(&format!("removed {}", state.join(&left[1]).display())),
        "the restored run did not say it removed the killed run's state: {}",
        ended.stderr
    );
    // Every table file came from the killed run's local copies; none was read back.
    let taken = ended
        .stderr
        .lines()
        .find(|line| line.contains("taken from local copies"))
        .unwrap_or_else(|| {
            panic!(
                "the restored run did not say where its keyed state came from: {}",
                ended.stderr
            )
        });
    assert!(
        !taken.contains(" 0 file(s) of 0 bytes taken")
            && taken.ends_with("0 file(s) of 0 bytes read from the checkpoint storage"),
        "the restored run read table files it had locally: {taken}"
    );
    assert_eq!(
        dir_names(&state),
        Vec::<String>::new(),
        "the state directory after the restored run"
    );
}

/// The names of what `dir` holds, sorted.
fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// The word count at `parallelism` with `count` (a host-count module), reaching the sink by
/// `rebalance` (so the sink's parallelism stays 2 whatever the count's).
fn wordcount_at(sandbox: &Sandbox, input: &Path, count: &str, parallelism: u32) -> JobFile {
    let job = wordcount_of(sandbox, input, false, (count, parallelism), "rebalance");
    checkpointed(job, sandbox, "50ms", 2).checkpoint("min_pause", "0ms")
}

/// Runs the word count with `count` (a host-count module) on `lines` lines of words at
/// parallelism 2, killed after a checkpoint; restored at 3, killed again; restored at 1 and run
/// to its end. The committed output must be the word counts of the whole input, each once.
fn rescales_from_checkpoints_two_to_three_to_one(name: &str, count: &str, seed: u64, lines: usize) {
    let sandbox = Sandbox::new(name);
    let input = sandbox.join("words.txt");
    let text = word_text(seed, lines, 30);
    fs::write(&input, &text).unwrap();
    for (parallelism, restore, kill) in [
        (2, None, "before-commit:3"),
        (3, Some("latest"), "before-commit:2"),
    ] {
        wordcount_at(&sandbox, &input, count, parallelism).write(&sandbox.job_path());
        let args: Vec<&str> = restore.map(|r| vec!["--restore", r]).unwrap_or_default();
        let log = sandbox.join(&format!("at-{parallelism}.log"));
        let ended = Weir::run_to_kill_point(&sandbox.job_path(), &args, kill, &log);
        ended.assert_killed_at(
            "before-commit",
            &format!("the run at parallelism {parallelism}"),
        );
        if restore.is_some() {
            assert!(
                ended
                    .stderr
                    .contains("rescaled the state of `count` from 2 to 3 subtasks"),
                "{}",
                ended.stderr
            );
        }
    }
    wordcount_at(&sandbox, &input, count, 1).write(&sandbox.job_path());
    let ended = run_cli(
        &sandbox.job_path(),
        &["--restore", "latest"],
        &sandbox.join("at-1.log"),
    );
    ended.assert_code(0, "the run restored at parallelism 1");
    assert!(
        ended
            .stderr
            .contains("rescaled the state of `count` from 3 to 1 subtasks"),
        "{}",
        ended.stderr
    );
    assert_same_output(
        &committed_lines(&sandbox.out_dir()),
        &word_counts(&text),
        "the word counts of the whole input, once, across parallelism 2, 3 and 1",
    );
}

#[test]
fn a_count_kept_on_the_host_killed_after_a_checkpoint_restores_exactly_once() {
    killed_after_a_checkpoint_restores_exactly_once(
        "host-state-restore",
        weir_tests::guests::HOST_COUNT,
        20_261_207,
        12_000,
    );
}

#[test]
fn a_count_kept_on_the_host_rescales_from_checkpoints_two_to_three_to_one() {
    rescales_from_checkpoints_two_to_three_to_one(
        "host-state-rescale",
        weir_tests::guests::HOST_COUNT,
        20_261_208,
        16_000,
    );
}

#[test]
fn a_python_count_kept_on_the_host_killed_after_a_checkpoint_restores_exactly_once() {
    let Some(count) = foreign("Python host-count", weir_tests::guests::PY_HOST_COUNT) else {
        return;
    };
    killed_after_a_checkpoint_restores_exactly_once(
        "host-state-restore-python",
        count,
        20_261_209,
        12_000,
    );
}

#[test]
fn a_python_count_kept_on_the_host_rescales_from_checkpoints_two_to_three_to_one() {
    let Some(count) = foreign("Python host-count", weir_tests::guests::PY_HOST_COUNT) else {
        return;
    };
    rescales_from_checkpoints_two_to_three_to_one(
        "host-state-rescale-python",
        count,
        20_261_210,
        16_000,
    );
}

#[test]
fn a_javascript_count_kept_on_the_host_killed_after_a_checkpoint_restores_exactly_once() {
    let Some(count) = foreign("JavaScript host-count", weir_tests::guests::JS_HOST_COUNT) else {
        return;
    };
    killed_after_a_checkpoint_restores_exactly_once(
        "host-state-restore-javascript",
        count,
        20_261_211,
        12_000,
    );
}

#[test]
fn a_javascript_count_kept_on_the_host_rescales_from_checkpoints_two_to_three_to_one() {
    let Some(count) = foreign("JavaScript host-count", weir_tests::guests::JS_HOST_COUNT) else {
        return;
    };
    rescales_from_checkpoints_two_to_three_to_one(
        "host-state-rescale-javascript",
        count,
        20_261_212,
        16_000,
    );
}
