//! A corrupt newest checkpoint: `--restore latest` names the file and the problem, skips the
//! checkpoint, restores the one before, and the job ends with the output of a run without
//! failures.
//!
//! Restoring an older checkpoint than the newest replays the records between the two, which the
//! exactly-once sink already committed when the newer one completed. So the job is arranged to
//! make the newest checkpoints identical: a word count whose file source follows a file
//! (`follow = true`) processes a first text, whose output is committed, then idles through more
//! checkpoints and is cancelled. The test appends a second text, corrupts the newest
//! checkpoint, and restores with the file no longer followed, so the job reads the rest and
//! finishes. Output equal to the word counts of both texts proves that the older checkpoint's
//! offsets and counts were restored.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use weir::job::JobStatus;
use weir::runtime::{JobRequest, RunOptions};

use crate::support::{
    InProcess, JobFile, Sandbox, assert_committed_output, assert_same_output, checkpoint_dirs,
    checkpointed, committed_lines, complete_checkpoint_ids, complete_checkpoints, run_cli,
    word_counts, word_text, wordcount,
};

/// The wordcount job over `input`, keeping 3 checkpoints, retained on cancel. With
/// `incremental`, its operators are checkpointed as images, every one after the first a delta
/// (a full image every 1000), so every checkpoint but the first builds on all before it.
fn job(sandbox: &Sandbox, input: &Path, follow: bool, incremental: bool) -> JobFile {
    let mut job = wordcount(sandbox, input, follow);
    if incremental {
        job = job.state_capture("image").image_full_every(1000);
    }
    checkpointed(job, sandbox, "100ms", 3).checkpoint("on_cancel", "retain")
}

/// A cancelled job with three retained checkpoints, all taken after its whole input was
/// committed. Returns the input file and the first text.
fn cancelled_after_idle_checkpoints(sandbox: &Sandbox, incremental: bool) -> (PathBuf, String) {
    let input = sandbox.join("words.txt");
    let first = word_text(7, 2_000, 10);
    fs::write(&input, &first).unwrap();
    job(sandbox, &input, true, incremental).write(&sandbox.job_path());
    let running = InProcess::start(&sandbox.job_path(), RunOptions::default());
    let expected = word_counts(&first);
    let out = sandbox.out_dir();
    let mut committed_at = None;
    running.wait_until(
        "the input to be committed and three more checkpoints",
        Duration::from_secs(30),
        |monitor| {
            let completed = monitor.checkpoint_counts().0;
            match committed_at {
                None => {
                    if committed_lines(&out).len() == expected.len() {
                        committed_at = Some(completed);
                    }
                    false
                }
                Some(at) => completed >= at + 3,
            }
        },
    );
    running.request(JobRequest::Cancel);
    let outcome = running.join();
    assert_eq!(outcome.status, JobStatus::Canceled, "{outcome:?}");
    assert_same_output(&committed_lines(&out), &expected, "the first text");
    (input, first)
}

/// The newest complete checkpoint directory and the one before, after checking that three are
/// kept (or more, for incremental images: the chain's links).
fn newest_two(sandbox: &Sandbox, incremental: bool) -> (PathBuf, PathBuf) {
    let ids = complete_checkpoint_ids(&sandbox.checkpoint_dir());
    assert!(
        ids.len() == 3 || (incremental && ids.len() > 3),
        "complete checkpoints after the cancel: {ids:?}"
    );
    let dirs = checkpoint_dirs(&sandbox.checkpoint_dir());
    let path = |id: u64| dirs.iter().find(|c| c.id == id).unwrap().path.clone();
    (path(ids[ids.len() - 1]), path(ids[ids.len() - 2]))
}

/// What a test did to the newest checkpoint.
struct Corruption<'a> {
    /// The newest checkpoint, which a restore must skip.
    newest: &'a Path,
    /// The one before, which a restore must choose.
    previous: &'a Path,
    /// The file that was damaged: the skip message must name it…
    file: &'a Path,
    /// …and the problem, in these words.
    problem: &'a str,
}

/// Appends a second text, restores with `--restore latest` and the file no longer followed, and
/// checks that the job skipped the corrupt checkpoint with a message naming the file and the
/// problem, restored the previous one, and committed the word counts of both texts.
fn restore_skips(
    sandbox: &Sandbox,
    input: &Path,
    first: &str,
    corruption: &Corruption<'_>,
    incremental: bool,
) {
    let second = word_text(8, 1_000, 10);
    fs::OpenOptions::new()
        .append(true)
        .open(input)
        .unwrap()
        .write_all(second.as_bytes())
        .unwrap();
    job(sandbox, input, false, incremental).write(&sandbox.job_path());

    let ended = run_cli(
        &sandbox.job_path(),
        &["--restore", "latest"],
        &sandbox.join("restore.log"),
    );
    ended.assert_code(0, "the restore from the previous checkpoint");
    let newest = corruption.newest.file_name().unwrap().to_str().unwrap();
    let skipped = ended
        .stderr
        .lines()
        .find(|l| l.contains(&format!("skipping {newest}")))
        .unwrap_or_else(|| panic!("no message skipping {newest}:\n{}", ended.stderr));
    let file = corruption.file.to_str().unwrap();
    assert!(
        skipped.contains(file) && skipped.contains(corruption.problem),
        "the message should name {file} and say {:?}: {skipped}",
        corruption.problem
    );
    ended.assert_stderr_contains(&format!("restoring from {}", corruption.previous.display()));
    let both = format!("{first}{second}");
    assert_committed_output(
        &sandbox.out_dir(),
        &word_counts(&both),
        "after restoring the previous checkpoint",
    );
}

/// A job cancelled after idle checkpoints (with incremental images or not) in a sandbox
/// `label`, its newest checkpoint then damaged by `corrupt`, which is given that checkpoint's
/// directory and returns the file it damaged and the problem a restore must name: then
/// [`restore_skips`].
fn restores_past_a_corrupt_newest(
    label: &str,
    incremental: bool,
    corrupt: impl FnOnce(&Sandbox, &Path) -> (PathBuf, &'static str),
) {
    let sandbox = Sandbox::new(label);
    let (input, first) = cancelled_after_idle_checkpoints(&sandbox, incremental);
    let (newest, previous) = newest_two(&sandbox, incremental);
    let (file, problem) = corrupt(&sandbox, &newest);
    let corruption = Corruption {
        newest: &newest,
        previous: &previous,
        file: &file,
        problem,
    };
    restore_skips(&sandbox, &input, &first, &corruption, incremental);
}

/// Flips a byte in the middle of `file`: inside the payload, so only the checksum can tell.
fn flip_middle_byte(file: &Path) {
    let mut bytes = fs::read(file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    fs::write(file, bytes).unwrap();
}

#[test]
fn restores_previous_checkpoint_when_newest_state_file_truncated() {
    restores_past_a_corrupt_newest("corrupt-state", false, |_, newest| {
        // `count` holds the state that matters: cut one of its subtasks' files in half.
        let state = newest.join("count-1.state");
        let len = fs::metadata(&state).unwrap().len();
        fs::OpenOptions::new()
            .write(true)
            .open(&state)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
        (state, "truncated")
    });
}

#[test]
fn restores_previous_checkpoint_when_newest_metadata_has_a_flipped_byte() {
    restores_past_a_corrupt_newest("corrupt-metadata", false, |_, newest| {
        let metadata = newest.join("_metadata");
        flip_middle_byte(&metadata);
        (metadata, "checksum mismatch")
    });
}

#[test]
fn restores_previous_checkpoint_when_the_newest_image_delta_has_a_flipped_byte() {
    restores_past_a_corrupt_newest("corrupt-delta", true, |sandbox, newest| {
        let on_disk = complete_checkpoints(&sandbox.checkpoint_dir());
        let meta = on_disk.values().next_back().unwrap();
        let count = meta
            .tasks
            .iter()
            .find(|t| t.task.vertex == "count" && t.task.subtask == 1)
            .unwrap();
        assert!(
            !count.chain.is_empty(),
            "the newest state of count#1 is a delta: {count:?}"
        );
        let state = newest.join("count-1.state");
        flip_middle_byte(&state);
        (state, "checksum mismatch")
    });
}
