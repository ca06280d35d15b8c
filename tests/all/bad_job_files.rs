//! Job files that misuse the engine, run through the real `weir` binary: every one is
//! refused before the job starts — at validation, exit code 2 — with one message naming the
//! problem, never an abort (exit 134) or a failure found only after restarts.

use std::fs;
use std::path::Path;
use std::process::Command;

use weir_tests::guests::COUNT;

use crate::support::report;
use crate::support::{CLI_TIMEOUT, Ended, Sandbox, Weir, run_cli, weir_bin};

/// A generator feeding `body` (sinks and operators reading `in`), with checkpoints in the
/// sandbox and no restarts.
fn job_text(sandbox: &Sandbox, source: &str, body: &str) -> String {
    format!(
        "name = \"misuse\"\n\
         [checkpoint]\ninterval = \"1s\"\ndirectory = {:?}\n\
         [restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"in\"\n{source}\n\
         {body}",
        sandbox.checkpoint_dir().display().to_string(),
    )
}

/// Writes `text` as the sandbox's job file and runs `weir run` on it.
fn run(sandbox: &Sandbox, text: &str) -> Ended {
    fs::write(sandbox.job_path(), text).unwrap();
    run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.stderr"))
}

/// A file sink named `name` writing to `path` (as written in the job file).
fn file_sink(name: &str, path: &str) -> String {
    format!("[[sink]]\nname = {name:?}\ntype = \"file\"\npath = {path:?}\ninputs = [\"in\"]\n")
}

const GENERATOR: &str = "type = \"generator\"\ncount = 10";

/// The line `text` names vertex `name` on.
fn line_of(text: &str, name: &str) -> usize {
    let needle = format!("name = {name:?}");
    text.lines().position(|l| l == needle).expect("the vertex") + 1
}

#[test]
fn two_file_sinks_with_equal_or_nested_paths_are_refused_at_validation() {
    let sandbox = Sandbox::new("misuse-sinks");
    let out = sandbox.out_dir();
    let out = out.to_str().unwrap();
    let link = sandbox.join("link");
    fs::create_dir_all(sandbox.join("real")).unwrap();
    std::os::unix::fs::symlink(sandbox.join("real"), &link).unwrap();
    let cases = [
        ("the same path", "out".to_string(), "out".to_string()),
        (
            "the same path, written differently",
            "out".to_string(),
            format!("{out}/../out/."),
        ),
        (
            "one inside the other",
            "out".to_string(),
            "out/nested".to_string(),
        ),
        (
            "the other inside the one",
            "out/a/../b/c".to_string(),
            format!("{out}/b"),
        ),
        (
            "the same directory through a symlink",
            "real/out".to_string(),
            "link/out".to_string(),
        ),
    ];
    for (case, first, second) in &cases {
        let text = job_text(
            &sandbox,
            GENERATOR,
            &(file_sink("first", first) + &file_sink("second", second)),
        );
        let ended = run(&sandbox, &text);
        ended.assert_code(2, case);
        let (first_line, second_line) = (line_of(&text, "first"), line_of(&text, "second"));
        let stderr = &ended.stderr;
        // At the second sink: its `path` (two lines below its name) when the paths differ as
        // written, its name when only the disk shows they meet.
        let at = [second_line + 2, second_line].map(|line| format!("job.toml:{line}:"));
        assert!(
            at.iter().any(|at| stderr.contains(at))
                && stderr.contains(&format!("file sink \"first\" (line {first_line})"))
                && stderr.contains(&format!("file sink \"second\" (line {second_line})")),
            "{case}: {stderr}"
        );
        assert!(
            !sandbox.out_dir().exists(),
            "{case}: nothing may be written"
        );
    }
    // The checkpoint directory is no sink's either.
    let checkpoints = sandbox.checkpoint_dir();
    let text = job_text(
        &sandbox,
        GENERATOR,
        &file_sink("first", checkpoints.to_str().unwrap()),
    );
    let ended = run(&sandbox, &text);
    ended.assert_code(2, "a sink in the checkpoint directory");
    assert!(ended.stderr.contains("checkpoint"), "{}", ended.stderr);
    report::record(&report::Row {
        area: "misuse",
        scenario: "two file sinks with equal or nested paths",
        rounds: cases.len() as u64 + 1,
        faults: "same path, same path via `..`/`.`, nested either way, the same directory \
                 through a symlink, a sink on the checkpoint directory",
        result: "refused at validation (exit 2) naming both sinks",
    });
}

#[test]
fn huge_parallelism_and_value_size_are_refused_not_aborted() {
    let sandbox = Sandbox::new("misuse-numbers");
    let blackhole = "[[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"in\"]\n";
    for (case, source, body, expected) in [
        (
            "parallelism = 1000000000",
            GENERATOR.to_string(),
            "[[sink]]\nname = \"out\"\ntype = \"blackhole\"\nparallelism = 1000000000\ninputs = [\"in\"]\n",
            "at most 256",
        ),
        (
            "value_size = 100000000000",
            format!("{GENERATOR}\nvalue_size = 100000000000"),
            blackhole,
            "`value_size`",
        ),
    ] {
        let ended = run(&sandbox, &job_text(&sandbox, &source, body));
        ended.assert_code(2, case);
        assert!(ended.stderr.contains(expected), "{case}: {}", ended.stderr);
    }
}

#[test]
fn durations_too_large_are_refused_saying_so() {
    let sandbox = Sandbox::new("misuse-durations");
    let blackhole = "[[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"in\"]\n";
    for (interval, expected) in [
        ("9999999999999h", "overflows"),
        ("18446744073709551615ms", "at most"),
    ] {
        let text = job_text(&sandbox, GENERATOR, blackhole)
            .replace("interval = \"1s\"", &format!("interval = {interval:?}"));
        let ended = run(&sandbox, &text);
        ended.assert_code(2, interval);
        assert!(
            ended.stderr.contains(expected) && !ended.stderr.contains("expected an integer"),
            "{interval}: {}",
            ended.stderr
        );
    }
}

#[test]
fn a_missing_file_source_is_refused_at_validation() {
    let sandbox = Sandbox::new("misuse-source");
    let missing = sandbox.join("missing.txt");
    let source = format!(
        "type = \"file\"\npath = {:?}",
        missing.display().to_string()
    );
    let text = job_text(
        &sandbox,
        &source,
        "[[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"in\"]\n",
    );
    let ended = run(&sandbox, &text);
    ended.assert_code(2, "a missing file source");
    assert!(
        ended.stderr.contains("source \"in\"")
            && ended.stderr.contains(&missing.display().to_string())
            && ended.stderr.contains("follow"),
        "{}",
        ended.stderr
    );
    assert!(
        !ended.stderr.contains("starting"),
        "found before the job starts: {}",
        ended.stderr
    );
}

/// `weir run` of a job whose operator's module is `module`, and `weir validate module`.
fn run_and_validate(sandbox: &Sandbox, module: &Path) -> (Ended, std::process::Output) {
    let text = job_text(
        sandbox,
        GENERATOR,
        &format!(
            "[[operator]]\nname = \"op\"\nmodule = {:?}\ninputs = [\"in\"]\n\
             [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"op\"]\n",
            module.display().to_string()
        ),
    );
    let ended = run(sandbox, &text);
    let validated = Command::new(weir_bin())
        .arg("validate")
        .arg(module)
        .output()
        .unwrap();
    (ended, validated)
}

#[test]
fn modules_that_are_not_modules_are_named_for_what_they_are() {
    let sandbox = Sandbox::new("misuse-modules");
    let dir = sandbox.join("dir.wasm");
    fs::create_dir(&dir).unwrap();
    let random = sandbox.join("random.wasm");
    let bytes: Vec<u8> = (0u32..4096)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    fs::write(&random, bytes).unwrap();
    let empty = sandbox.join("empty.wasm");
    fs::write(&empty, b"").unwrap();
    // The directory first: the old code read /dev/zero until memory ran out.
    for (module, run_code, expected) in [
        (dir.as_path(), 2, "not a regular file"),
        (Path::new("/dev/zero"), 2, "not a regular file"),
        (random.as_path(), 3, "\\0asm"),
        (empty.as_path(), 3, "the file is empty"),
    ] {
        let (ended, validated) = run_and_validate(&sandbox, module);
        let case = module.display().to_string();
        ended.assert_code(run_code, &case);
        assert!(
            ended.stderr.contains(expected) && !ended.stderr.contains("not found"),
            "weir run, {case}: {}",
            ended.stderr
        );
        let said = String::from_utf8_lossy(&validated.stdout).to_string()
            + &String::from_utf8_lossy(&validated.stderr);
        assert_ne!(validated.status.code(), Some(0), "{case}");
        assert!(said.contains(expected), "weir validate, {case}: {said}");
    }
    // A real module still runs.
    let (ended, validated) = run_and_validate(&sandbox, Path::new(COUNT));
    ended.assert_code(0, "the count guest");
    assert_eq!(validated.status.code(), Some(0));
}

/// Makes a FIFO at `path` with `mkfifo` (coreutils).
fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// A file source on a FIFO: it cannot be read again from a checkpoint's offset, and opening one
/// with no writer blocked the source for good — no signal, `weir cancel` nor `weir stop` ended
/// the job. Refused at validation, naming what it is and the way to feed a stream; and a
/// followed path that becomes a FIFO after the start fails its task instead of hanging it.
#[test]
fn a_file_source_on_a_fifo_is_refused_and_never_hangs_the_job() {
    let sandbox = Sandbox::new("misuse-fifo");
    let fifo = sandbox.join("lines.fifo");
    mkfifo(&fifo);
    let source = |follow: bool| {
        format!(
            "type = \"file\"\npath = {:?}\nfollow = {follow}",
            fifo.display().to_string()
        )
    };
    let ended = run(
        &sandbox,
        &job_text(
            &sandbox,
            &source(false),
            "[[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"in\"]\n",
        ),
    );
    ended.assert_code(2, "a file source on a FIFO");
    for said in ["a FIFO", "not a regular file", "follow = true"] {
        assert!(
            ended.stderr.contains(said),
            "no {said:?} in:\n{}",
            ended.stderr
        );
    }
    // Followed, the path may appear later: here as a FIFO, after the job started.
    fs::remove_file(&fifo).unwrap();
    let text = job_text(
        &sandbox,
        &source(true),
        "[[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"in\"]\n",
    );
    fs::write(sandbox.job_path(), text).unwrap();
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("follow.log"));
    weir.wait_for_log("starting");
    mkfifo(&fifo);
    let ended = weir.wait(CLI_TIMEOUT);
    ended.assert_code(1, "a followed path that became a FIFO");
    assert!(
        ended.stderr.contains("it is a FIFO, not a regular file"),
        "{}",
        ended.stderr
    );
    report::record(&report::Row {
        area: "misuse",
        scenario: "file source on a FIFO",
        rounds: 2,
        faults: "`path` a FIFO with no writer; a followed path made a FIFO after the start",
        result: "refused at validation (exit 2) naming the FIFO and `follow`; the followed one \
                 fails its task (exit 1) instead of blocking the job for good",
    });
}
