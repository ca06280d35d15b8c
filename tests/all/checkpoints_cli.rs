//! `weir checkpoints DIR`, `inspect PATH` and `verify DIR`, driven through the real `weir`
//! binary over the checkpoints and the savepoint of a real job: the listing and its JSON agree
//! with the metadata on disk, inspect shows every task verified, verify passes a sound directory
//! and fails, naming the file, once a state file is damaged; bad paths exit 2 with what to pass.

use std::fs::{self};
use std::path::{Path, PathBuf};

use serde_json::Value;
use weir::checkpoint::layout::{CheckpointLayout, CheckpointLocation};
use weir::checkpoint::metadata::CheckpointMetadata;
use weir::checkpoint::storage::{CheckpointStorage as _, LocalStorage};

use crate::support::{
    CliOutput, GeneratorSpec, Sandbox, checkpointed, generator_count, stop_with_savepoint,
    weir_command,
};

/// Runs `weir checkpoints ARGS`, killing it after [`CLI_TIMEOUT`]; its output goes through files
/// in `sandbox`, so nothing blocks on a full pipe.
fn checkpoints(sandbox: &Sandbox, args: &[&str]) -> CliOutput {
    let args: Vec<&str> = std::iter::once("checkpoints")
        .chain(args.iter().copied())
        .collect();
    weir_command(sandbox, &args, "", &[])
}

fn text(path: &Path) -> &str {
    path.to_str().expect("temp paths are UTF-8")
}

/// Runs an unbounded generator → count → file sink job with a checkpoint every 100 ms until two
/// checkpoints completed, then stops it with a savepoint (SIGTERM with `--savepoint-on-stop`).
/// Returns the savepoint's directory.
fn run_job_to_a_savepoint(sandbox: &Sandbox) -> PathBuf {
    let generator = GeneratorSpec {
        parallelism: 2,
        seed: 11,
        count: None,
        rate: Some(5_000.0),
        keys: 200,
    };
    checkpointed(generator_count(sandbox, &generator), sandbox, "100ms", 2)
        .write(&sandbox.job_path());
    stop_with_savepoint(sandbox, &sandbox.join("run.log"), 2)
}

/// The metadata of every complete checkpoint and savepoint on disk, read by the library.
fn metadata_on_disk(sandbox: &Sandbox) -> Vec<(PathBuf, CheckpointMetadata)> {
    let storage = LocalStorage::new(CheckpointLayout::new(sandbox.checkpoint_dir()));
    storage
        .list()
        .unwrap()
        .into_iter()
        .filter_map(|listing| {
            let meta = listing.metadata()?.clone();
            Some((listing.location.dir().to_owned(), meta))
        })
        .collect()
}

#[test]
fn lists_inspects_and_verifies_the_checkpoints_of_a_real_job() {
    let sandbox = Sandbox::new("checkpoints-cli");
    let savepoint = run_job_to_a_savepoint(&sandbox);
    let dir = sandbox.checkpoint_dir();
    let on_disk = metadata_on_disk(&sandbox);
    assert!(
        on_disk.len() >= 2,
        "a retained checkpoint and the savepoint: {on_disk:?}"
    );
    let newest = on_disk.iter().map(|(_, m)| m.checkpoint_id).max().unwrap();

    // The table: every complete one, the savepoint newest, and how to restore it.
    let listed = checkpoints(&sandbox, &[text(&dir)]);
    listed.assert_code(0, "weir checkpoints DIR");
    let table = listed.stdout_table("ID ");
    for column in [
        "KIND",
        "STATUS",
        "TRIGGERED (UTC)",
        "DURATION",
        "SIZE",
        "OPERATORS",
    ] {
        assert!(table[0].contains(column), "{}", table[0]);
    }
    let first_row = table[1];
    assert!(
        first_row.starts_with(&format!("{newest} "))
            && first_row.contains("savepoint")
            && first_row.contains("complete"),
        "the savepoint is the newest row:\n{}",
        listed.stdout
    );
    for vertex in ["gen ", "count ", "out "] {
        assert!(first_row.contains(vertex), "operators: {first_row}");
    }
    listed.assert_stdout_contains(&format!(
        "latest restorable: savepoint {newest} (every file verified)\n  {}\n",
        savepoint.display()
    ));
    listed.assert_stdout_contains(&format!("--restore {}", savepoint.display()));
    // Given the job file, the hint names it.
    let by_job = checkpoints(&sandbox, &[text(&sandbox.job_path())]);
    by_job.assert_code(0, "weir checkpoints JOB.toml");
    by_job.assert_stdout_contains(&format!(
        "restore with: weir run {} --restore {}",
        sandbox.job_path().display(),
        savepoint.display()
    ));

    // The JSON agrees with the metadata on disk: ids, kinds, paths, times and sizes.
    let json = checkpoints(&sandbox, &[text(&dir), "--json"]).stdout_json();
    let entries = json["entries"].as_array().expect("entries");
    let complete: Vec<&Value> = entries
        .iter()
        .filter(|e| e["status"] == "complete")
        .collect();
    assert_eq!(complete.len(), on_disk.len(), "{json:#}");
    for (path, meta) in &on_disk {
        let entry = complete
            .iter()
            .find(|e| e["path"] == text(path))
            .unwrap_or_else(|| panic!("{} is not listed: {json:#}", path.display()));
        assert_eq!(entry["id"], meta.checkpoint_id.0);
        assert_eq!(entry["kind"], meta.kind.to_string());
        assert_eq!(entry["trigger_time_ms"], meta.trigger_time_ms);
        assert_eq!(entry["duration_ms"], meta.duration_ms);
        assert_eq!(entry["state_bytes"], meta.state_bytes());
        let operators = entry["operators"].as_array().unwrap();
        let names: Vec<&str> = operators
            .iter()
            .map(|o| o["vertex"].as_str().unwrap())
            .collect();
        assert_eq!(names.len(), meta.parallelism.len(), "{operators:?}");
        for op in operators {
            let vertex = op["vertex"].as_str().unwrap();
            let expected: u64 = meta
                .tasks
                .iter()
                .filter(|t| t.task.vertex == vertex)
                .map(|t| t.state_bytes)
                .sum();
            assert_eq!(op["state_bytes"], expected, "{vertex}");
            assert_eq!(op["subtasks"], meta.parallelism[vertex], "{vertex}");
        }
    }
    let ids: Vec<u64> = entries.iter().map(|e| e["id"].as_u64().unwrap()).collect();
    assert!(ids.is_sorted_by(|a, b| a >= b), "newest first: {ids:?}");
    assert_eq!(json["latest_restorable"]["path"], text(&savepoint));
    assert_eq!(json["latest_restorable"]["kind"], "savepoint");

    // Inspect the savepoint: every task, verified, with its timings.
    let inspected = checkpoints(&sandbox, &["inspect", text(&savepoint)]);
    inspected.assert_code(0, "weir checkpoints inspect");
    assert!(
        inspected.stdout.starts_with(&format!(
            "{}: complete, every file verified\n",
            savepoint.display()
        )),
        "{}",
        inspected.stdout
    );
    let (_, meta) = on_disk.iter().find(|(p, _)| p == &savepoint).unwrap();
    for task in &meta.tasks {
        let row = inspected
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("{} ", task.task)))
            .unwrap_or_else(|| panic!("no row for {}:\n{}", task.task, inspected.stdout));
        assert!(
            row.contains(&task.handle.file) && row.trim_end().ends_with("ok"),
            "{row}"
        );
    }
    let metadata_file = CheckpointLayout::metadata_file(&CheckpointLocation::new(&savepoint));
    let json = checkpoints(&sandbox, &["inspect", text(&metadata_file), "--json"]);
    json.assert_code(0, "weir checkpoints inspect _metadata --json");
    let json = json.stdout_json();
    assert_eq!(json["status"], "complete");
    assert_eq!(json["metadata"]["checkpoint_id"], meta.checkpoint_id.0);
    let tasks = json["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), meta.tasks.len());
    for (task, recorded) in tasks.iter().zip(&meta.tasks) {
        assert_eq!(task["file"], recorded.handle.file.as_str());
        assert_eq!(task["state_bytes"], recorded.state_bytes);
        assert_eq!(task["crc32"], format!("{:#010x}", recorded.handle.crc32));
        assert_eq!(task["sync_duration_ms"], recorded.sync_duration_ms);
        assert_eq!(task["ok"], true);
    }

    // Verify: all good, then a damaged state file fails it, named.
    let verified = checkpoints(&sandbox, &["verify", text(&dir)]);
    verified.assert_code(0, "weir checkpoints verify on a sound directory");
    assert!(
        verified.stdout.lines().last().unwrap().starts_with("ok: "),
        "{}",
        verified.stdout
    );
    let damaged = savepoint.join(&meta.tasks.last().unwrap().handle.file);
    let mut bytes = fs::read(&damaged).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    fs::write(&damaged, bytes).unwrap();
    let failed = checkpoints(&sandbox, &["verify", text(&dir)]);
    failed.assert_code(1, "weir checkpoints verify with a flipped byte");
    // Which check catches the flip (the checksum, or the frame's length or version fields of
    // a small file) depends on where the middle byte falls; the problem must name the file.
    failed.assert_stdout_contains(&format!("  problem: state file {}: ", damaged.display()));
    let json = checkpoints(&sandbox, &["verify", text(&dir), "--json"]);
    json.assert_code(1, "weir checkpoints verify --json with a flipped byte");
    let json = json.stdout_json();
    assert_eq!(json["problems"], 1);
    checkpoints(&sandbox, &["inspect", text(&savepoint)])
        .assert_code(1, "weir checkpoints inspect of the damaged savepoint");
    // The listing now points at the newest checkpoint instead.
    let listed = checkpoints(&sandbox, &[text(&dir), "--json"]).stdout_json();
    assert_eq!(listed["entries"][0]["status"], "corrupt");
    assert_eq!(listed["latest_restorable"]["kind"], "checkpoint");
}

#[test]
fn paths_that_are_not_checkpoints_exit_2_saying_what_to_pass() {
    let sandbox = Sandbox::new("checkpoints-cli-bad");
    let empty = sandbox.join("empty");
    fs::create_dir(&empty).unwrap();
    let out = checkpoints(&sandbox, &[text(&empty)]);
    out.assert_code(2, "an empty directory");
    out.assert_stderr_contains(&format!(
        "{} is not a checkpoint directory: it holds no chk-N/ or sp-N/ directories; pass the \
             job's checkpoint directory (job file: [checkpoint] directory)",
        empty.display()
    ));
    let missing = sandbox.join("missing");
    for args in [
        vec!["verify", text(&missing)],
        vec!["inspect", text(&missing)],
        vec!["inspect", text(&empty)],
        vec![],
        vec!["verify"],
    ] {
        let out = checkpoints(&sandbox, &args);
        out.assert_code(2, &format!("weir checkpoints {}", args.join(" ")));
        assert!(!out.stderr.is_empty(), "no message for {args:?}");
    }
}
