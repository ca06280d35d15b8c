//! What a power loss leaves: every file Weir publishes is fsynced before its rename and every
//! commit is followed by an fsync of its directory — and every directory Weir creates (the
//! checkpoint directory, each checkpoint's, a file sink's output directory) is followed by an
//! fsync of its parent, or a power loss right after the first checkpoint can lose the
//! directory's own entry and with it everything committed inside.
//!
//! Checked from the outside: `weir run` under `strace -ff`, each thread's `mkdir`s matched with
//! an `fsync` of the parent the same thread opened afterwards. strace comes from Debian's
//! package (`scripts/test.sh` installs it); without it the test fails when `CI` is set and is
//! skipped with a loud message otherwise.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{Sandbox, checkpointed, run_program, weir_bin, wordcount};

/// strace on the `PATH`, or `None` (and a loud message) where a test may skip it.
fn strace_or_skip(test: &str) -> Option<PathBuf> {
    let found = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some(PathBuf::from("strace"));
    }
    crate::support::skip(
        test,
        "strace is missing (`bash scripts/apt-install.sh 'the durability test' strace`)",
    );
    None
}

/// How many directories one thread's trace shows created under `under`, and those of them the
/// same thread did not make durable afterwards (an `openat` of the parent, then an `fsync` of
/// that descriptor).
fn created_directories(trace: &str, under: &Path) -> (usize, Vec<String>) {
    let mut created = 0;
    let mut waiting: Vec<String> = Vec::new();
    let mut open: HashMap<String, String> = HashMap::new();
    for line in trace.lines() {
        let quoted = || line.split('"').nth(1).map(str::to_string);
        let result = line.rsplit("= ").next().unwrap_or("").trim();
        if line.starts_with("mkdir(") || line.starts_with("mkdirat(") {
            if let Some(dir) = quoted().filter(|d| d.starts_with(under.to_str().unwrap()))
                && result == "0"
            {
                created += 1;
                waiting.push(dir);
            }
        } else if line.starts_with("openat(") {
            if let Some(path) = quoted()
                && result.parse::<u32>().is_ok()
            {
                open.insert(result.to_string(), path);
            }
        } else if let Some(fd) = line.strip_prefix("fsync(")
            && result == "0"
        {
            let fd = fd.split(')').next().unwrap_or("");
            if let Some(synced) = open.get(fd) {
                waiting.retain(|dir| {
                    Path::new(dir).parent().and_then(Path::to_str) != Some(synced.as_str())
                });
            }
        }
    }
    (created, waiting)
}

#[test]
fn every_directory_weir_creates_is_made_durable_in_its_parent() {
    let Some(strace) = strace_or_skip("every_directory_weir_creates_is_made_durable") else {
        return;
    };
    let sandbox = Sandbox::new("durable-dirs");
    let input = sandbox.join("input.txt");
    fs::write(&input, "a b c\nb c\nc\n".repeat(200)).unwrap();
    checkpointed(wordcount(&sandbox, &input, false), &sandbox, "50ms", 2)
        .write(&sandbox.job_path());
    let traces = sandbox.join("trace");
    let ran = run_program(
        &sandbox,
        &strace,
        &[
            "-ff",
            "-e",
            "trace=mkdir,mkdirat,openat,fsync",
            "-o",
            traces.to_str().unwrap(),
            weir_bin().to_str().unwrap(),
            "run",
            sandbox.job_path().to_str().unwrap(),
        ],
        "",
        &[],
    );
    assert_eq!(ran.code, Some(0), "weir run under strace:\n{}", ran.stderr);
    let mut created = 0;
    let mut undurable = Vec::new();
    for entry in fs::read_dir(sandbox.path()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.starts_with("trace.") {
            continue;
        }
        let (made, left) = created_directories(&fs::read_to_string(&path).unwrap(), sandbox.path());
        created += made;
        undurable.extend(left);
    }
    // The checkpoint directory, a checkpoint's, the sink's output directory at least.
    assert!(
        created >= 3,
        "the trace shows {created} directories created under {}",
        sandbox.path().display()
    );
    assert!(
        undurable.is_empty(),
        "directories created without an fsync of their parent (a power loss can lose them): \
         {undurable:?}"
    );
}
