//! `weir validate` and `weir test`, driven through the real `weir` binary: every example guest is
//! valid and survives a snapshot and restore after every record; every misbehaving module is
//! refused with its problem named; `--expect`, base64 and bad input behave as `docs/TOOLS.md`
//! says.

use std::fs::{self};
use std::path::PathBuf;

use weir::tools::{ConfigSource, JsonRecord, TestSpec};
use weir_abi::InitMessage;
use weir_tests::guests::{
    AS_COUNT, AS_COUNT_INCREMENTAL, AS_COUNT_MINIMAL, C_COUNT, COUNT, DEDUP, SPLIT, WAT_COUNT,
    ZIG_COUNT,
};

use crate::support::{CliOutput, Sandbox, weir_command};

/// Runs `weir ARGS` with `stdin` as its standard input, killing it after [`CLI_TIMEOUT`]. Its
/// streams go through files in `sandbox`, so nothing can block on a full pipe.
fn weir(sandbox: &Sandbox, args: &[&str], stdin: &str) -> CliOutput {
    weir_command(sandbox, args, stdin, &[("RUST_LOG", "warn")])
}

/// Writes `text` to `name` in `sandbox` and returns its path as a string.
fn write(sandbox: &Sandbox, name: &str, text: &str) -> String {
    let path: PathBuf = sandbox.join(name);
    fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// Every example operator: name and module path. The C, Zig and AssemblyScript ones (the count
/// on each AssemblyScript runtime) are there when their toolchains were available to `build.rs`.
fn examples() -> Vec<(&'static str, &'static str)> {
    let foreign = [
        ("c-count", C_COUNT),
        ("as-count", AS_COUNT),
        ("zig-count", ZIG_COUNT),
        ("as-count-minimal", AS_COUNT_MINIMAL),
        ("as-count-incremental", AS_COUNT_INCREMENTAL),
    ];
    [
        ("count", COUNT),
        ("split", SPLIT),
        ("dedup", DEDUP),
        ("wat-count", WAT_COUNT),
    ]
    .into_iter()
    .chain(
        foreign
            .into_iter()
            .filter_map(|(name, path)| Some((name, path?))),
    )
    .collect()
}

// ---------------------------------------------------------------------------------------------
// weir validate

#[test]
fn validate_reports_every_example_guest_valid() {
    let sandbox = Sandbox::new("validate-examples");
    for (name, path) in examples() {
        let out = weir(&sandbox, &["validate", path], "");
        out.assert_code(0, name);
        let header = format!("module {path} is a valid Weir operator (ABI 1)");
        assert!(out.stdout.starts_with(&header), "{name}:\n{}", out.stdout);
        out.assert_stdout_contains("ok       weir_process");

        let out = weir(&sandbox, &["validate", "--json", path], "");
        out.assert_code(0, name);
        let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        assert_eq!(json["valid"], true);
        assert_eq!(json["abi_version"], 1);
        assert_eq!(json["problems"].as_array().unwrap().len(), 0);
        assert_eq!(json["capabilities"]["snapshot"], true, "{name}");
        assert!(
            json["exports"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "weir_process" && e["status"] == "ok"),
            "{json}"
        );
    }
}

/// Imports and memory most of the modules below share.
const PRELUDE: &str = r#"(import "weir" "emit" (func (param i32 i32)))
  (memory (export "memory") 1)"#;
const VERSION: &str = r#"(func (export "weir_abi_version") (result i32) (i32.const 1))"#;
const ALLOC: &str = r#"(func (export "weir_alloc") (param i32) (result i32) (i32.const 1024))"#;
const PROCESS: &str =
    r#"(func (export "weir_process") (param i32 i32) (result i32) (i32.const 0))"#;

/// A module made of `parts`.
fn module(parts: &[&str]) -> String {
    format!("(module\n  {}\n)", parts.join("\n  "))
}

/// Modules the host refuses — the load-time cases of the host's own test corpus — each with a
/// text the report must contain.
fn misbehaving_modules() -> Vec<(&'static str, String, Vec<&'static str>)> {
    vec![
        (
            "missing-export",
            module(&[PRELUDE, VERSION, ALLOC]),
            vec![
                "missing the required export `weir_process`",
                "MISSING  weir_process",
            ],
        ),
        (
            "wrong-signature",
            module(&[
                PRELUDE,
                VERSION,
                ALLOC,
                r#"(func (export "weir_process") (param i32) (result i32) (i32.const 0))"#,
            ]),
            vec![
                "export `weir_process` is a function (i32) -> i32, but the ABI requires a \
                 function (i32, i32) -> i32",
            ],
        ),
        (
            "global-export",
            module(&[
                PRELUDE,
                VERSION,
                ALLOC,
                PROCESS,
                r#"(global (export "weir_snapshot") i32 (i32.const 0))"#,
            ]),
            vec!["export `weir_snapshot` is a global"],
        ),
        (
            "abi-version",
            module(&[
                PRELUDE,
                ALLOC,
                PROCESS,
                r#"(func (export "weir_abi_version") (result i32) (i32.const 7))"#,
            ]),
            vec!["written for weir ABI version 7", "implements version 1"],
        ),
        (
            "wasi-import",
            module(&[
                r#"(import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))"#,
                PRELUDE,
                VERSION,
                ALLOC,
                PROCESS,
            ]),
            vec![
                "imports WASI, which the host does not provide",
                "1 import from `wasi_snapshot_preview1`: fd_write;",
                "docs/ABI.md §12, \"Without WASI\"",
                "UNKNOWN  wasi_snapshot_preview1.fd_write",
            ],
        ),
        (
            "unknown-weir-import",
            module(&[
                r#"(import "weir" "clock" (func))"#,
                PRELUDE,
                VERSION,
                ALLOC,
                PROCESS,
            ]),
            vec!["imports `weir`.`clock`, which the host does not provide"],
        ),
        (
            "weir-import-signature",
            module(&[
                r#"(import "weir" "log" (func (param i32)))"#,
                PRELUDE,
                VERSION,
                ALLOC,
                PROCESS,
            ]),
            vec![
                "imports `weir`.`log` as a function (i32), but the host provides it as a function (i32, i32, i32)",
            ],
        ),
        (
            "no-memory",
            module(&[VERSION, ALLOC, PROCESS]),
            vec!["exports no memory named `memory`", "MISSING  memory"],
        ),
        (
            "two-memories",
            module(&[PRELUDE, "(memory 1)", VERSION, ALLOC, PROCESS]),
            vec!["defines 2 memories"],
        ),
        (
            "memory-over-the-limit",
            // 4097 pages: one page more than the default limit of 256 MiB.
            module(&[
                r#"(memory (export "memory") 4097)"#,
                VERSION,
                ALLOC,
                PROCESS,
            ]),
            vec!["past the limit of 268435456 bytes"],
        ),
        (
            "trap-in-version",
            module(&[
                PRELUDE,
                ALLOC,
                PROCESS,
                r#"(func (export "weir_abi_version") (result i32) (unreachable))"#,
            ]),
            vec!["failed while its ABI version was read, in weir_abi_version"],
        ),
        (
            "not-a-module",
            "(module (func".to_string(),
            vec!["not a valid WebAssembly module"],
        ),
    ]
}

#[test]
fn validate_names_the_problem_of_every_misbehaving_module() {
    let sandbox = Sandbox::new("validate-bad");
    for (name, source, expected) in misbehaving_modules() {
        let path = write(&sandbox, &format!("{name}.wat"), &source);
        let out = weir(&sandbox, &["validate", &path], "");
        out.assert_code(1, name);
        let header = format!("module {path} is NOT a valid Weir operator");
        assert!(out.stdout.starts_with(&header), "{name}:\n{}", out.stdout);
        for text in expected {
            assert!(
                out.stdout.contains(text),
                "{name}: the report does not say {text:?}:\n{}",
                out.stdout
            );
        }

        let out = weir(&sandbox, &["validate", "--json", &path], "");
        out.assert_code(1, name);
        let json: serde_json::Value = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("{name}: --json is not JSON ({e}):\n{}", out.stdout));
        assert_eq!(json["valid"], false, "{name}");
        assert!(!json["problems"].as_array().unwrap().is_empty(), "{name}");
    }
}

#[test]
fn validate_lists_several_problems_at_once_and_still_reads_the_version() {
    let sandbox = Sandbox::new("validate-several");
    let source = module(&[
        r#"(import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))"#,
        VERSION,
        r#"(func (export "weir_process") (param i32) (result i32) (i32.const 0))"#,
    ]);
    let path = write(&sandbox, "several.wat", &source);
    let out = weir(&sandbox, &["validate", "--json", &path], "");
    out.assert_code(1, "several problems");
    let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let problems: Vec<&str> = json["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(problems.len(), 4, "{problems:#?}");
    for text in [
        "`wasi_snapshot_preview1`: proc_exit",
        "no memory named `memory`",
        "`weir_alloc`",
        "`weir_process` is a function (i32) -> i32",
    ] {
        assert!(
            problems.iter().any(|p| p.contains(text)),
            "{text}: {problems:#?}"
        );
    }
    assert_eq!(json["abi_version"], 1);
}

#[test]
fn validate_of_a_file_that_cannot_be_read_is_a_usage_error() {
    let sandbox = Sandbox::new("validate-missing");
    let path = sandbox.join("nothing.wasm");
    let out = weir(&sandbox, &["validate", path.to_str().unwrap()], "");
    out.assert_code(2, "missing file");
    out.assert_stderr_contains("cannot read the module");
}

// ---------------------------------------------------------------------------------------------
// weir test

/// Input for every example: lines of text (for `split`) under repeating keys (for `count` and
/// `dedup`), on increasing timestamps.
fn example_input() -> String {
    let words = ["apple", "Pear", "fig", "apple", "kiwi", "fig", "plum"];
    (0..40)
        .map(|i| {
            let key = words[i % words.len()];
            let value = format!("{key} and {}, {}!", words[(i * 3) % 7], words[(i * 5) % 7]);
            format!("{{\"key\": \"{key}\", \"value\": \"{value}\", \"timestamp\": {i}}}\n")
        })
        .collect()
}

#[test]
fn test_with_a_checkpoint_after_every_record_gives_the_same_output_on_every_example() {
    let sandbox = Sandbox::new("test-checkpoints");
    let input = write(&sandbox, "input.jsonl", &example_input());
    for (name, path) in examples() {
        let plain = weir(&sandbox, &["test", path, "--input", &input], "");
        plain.assert_code(0, name);
        assert!(!plain.stdout.is_empty(), "{name}: no output");
        for line in plain.stdout.lines() {
            JsonRecord::parse(line).unwrap_or_else(|e| panic!("{name}: {line}: {e}"));
        }

        // Every example has snapshot exports, so both capture modes apply: its own snapshot
        // (`auto`, the default, and `exports`) and an image of its memory and globals.
        for (capture, restored) in [
            ("auto", "snapshots (weir_snapshot) restored"),
            ("exports", "snapshots (weir_snapshot) restored"),
            ("image", "images restored"),
        ] {
            for extra in [
                &["--checkpoint-every", "1"][..],
                &["--checkpoint-every", "3", "--batch-size", "2"],
            ] {
                let mut args = vec!["test", path, "--input", &input, "--checkpoint", capture];
                args.extend_from_slice(extra);
                let checkpointed = weir(&sandbox, &args, "");
                checkpointed.assert_code(0, &format!("{name} {capture} {extra:?}"));
                assert_eq!(
                    plain.stdout, checkpointed.stdout,
                    "{name} {capture} {extra:?}: the output with checkpoints differs"
                );
                for says in [restored, "output identical to a run without them"] {
                    assert!(
                        checkpointed.stderr.contains(says),
                        "{name} {capture}: {}",
                        checkpointed.stderr
                    );
                }
            }
        }
    }
}

/// The C count with wasi-libc's malloc and no snapshot code: `weir test` takes images of it,
/// as a job does, and says what is wrong when asked to use the exports it lacks.
#[test]
fn test_with_a_checkpoint_after_every_record_passes_the_c_count_without_snapshot_code() {
    let Some(path) = crate::support::foreign("c-libc", weir_tests::guests::C_LIBC_COUNT) else {
        return;
    };
    let sandbox = Sandbox::new("test-c-libc");
    let input = write(&sandbox, "input.jsonl", &example_input());
    let plain = weir(&sandbox, &["test", path, "--input", &input], "");
    plain.assert_code(0, "without checkpoints");
    // `weir test` with a checkpoint after every record, taken as `capture` says.
    let checkpointed = |capture: &str| {
        let args = [
            "test",
            path,
            "--input",
            &input,
            "--checkpoint-every",
            "1",
            "--checkpoint",
            capture,
        ];
        weir(&sandbox, &args, "")
    };
    for capture in ["auto", "image"] {
        let out = checkpointed(capture);
        out.assert_code(0, capture);
        assert_eq!(out.stdout, plain.stdout, "{capture}");
        out.assert_stderr_contains("40 images restored");
    }
    let out = checkpointed("exports");
    out.assert_code(1, "exports");
    out.assert_stderr_contains("exports no weir_snapshot, so every snapshot is empty");
}

/// A running total kept in a global, with no snapshot code at all: a job checkpoints it as an
/// image of its memory and globals (`checkpoint = "auto"`). Each batch emits one record whose
/// value is the digit `'0' + total`.
const TOTAL_WITHOUT_SNAPSHOT: &str = r#"(module
  (import "weir" "emit" (func $emit (param i32 i32)))
  (memory (export "memory") 1)
  (global $seen (mut i32) (i32.const 0))
  (func (export "weir_abi_version") (result i32) (i32.const 1))
  (func (export "weir_alloc") (param i32) (result i32) (i32.const 1024))
  (func (export "weir_process") (param $ptr i32) (param i32) (result i32)
    (global.set $seen (i32.add (global.get $seen) (i32.load (local.get $ptr))))
    (i32.store (i32.const 16) (i32.const 1))
    (i32.store (i32.const 20) (i32.const 0))
    (i64.store (i32.const 24) (i64.const 0))
    (i32.store (i32.const 32) (i32.const 0))
    (i32.store (i32.const 36) (i32.const 1))
    (i32.store8 (i32.const 40) (i32.add (i32.const 48) (global.get $seen)))
    (call $emit (i32.const 16) (i32.const 25))
    (i32.const 0)))"#;

#[test]
fn test_checkpoints_a_module_without_snapshot_code_as_an_image_as_a_job_does() {
    let sandbox = Sandbox::new("test-image");
    let module = write(&sandbox, "total.wat", TOTAL_WITHOUT_SNAPSHOT);
    let input = "{\"value\": \"\"}\n".repeat(5);
    let plain = weir(&sandbox, &["test", &module, "--batch-size", "1"], &input);
    plain.assert_code(0, "without checkpoints");
    assert_eq!(plain.stdout.lines().count(), 5, "{}", plain.stdout);

    // The default is the job file's: `auto`, an image for a module without snapshot exports.
    for extra in [
        &[][..],
        &["--checkpoint", "auto"],
        &["--checkpoint", "image"],
    ] {
        let mut args = vec!["test", &module, "--checkpoint-every", "1"];
        args.extend_from_slice(extra);
        let out = weir(&sandbox, &args, &input);
        out.assert_code(0, &format!("{extra:?}"));
        assert_eq!(out.stdout, plain.stdout, "{extra:?}");
        assert!(
            out.stderr
                .contains("5 images restored into fresh instances"),
            "{extra:?}: {}",
            out.stderr
        );
    }

    // Asked to checkpoint it through exports it does not have, every snapshot is empty, and
    // the message says so, with the fix.
    let out = weir(
        &sandbox,
        &[
            "test",
            &module,
            "--checkpoint-every",
            "2",
            "--checkpoint",
            "exports",
        ],
        &input,
    );
    out.assert_code(1, "--checkpoint exports");
    for says in [
        "checkpointed through its exports (--checkpoint exports)",
        "exports no weir_snapshot, so every snapshot is empty",
        "--checkpoint auto",
        "first difference at record 2",
    ] {
        out.assert_stderr_contains(says);
    }
    out.assert_stderr_lacks("snapshot or restore loses");

    // `weir validate` says the same: its checkpoints line and its exports table agree.
    let out = weir(&sandbox, &["validate", &module], "");
    out.assert_code(0, "validate");
    out.assert_stdout_contains("checkpoints:  as an image of its memory and globals");
    out.assert_stdout_lacks("every snapshot is empty");
    let snapshot_row = out
        .stdout
        .lines()
        .find(|l| l.contains("weir_snapshot "))
        .unwrap();
    assert!(snapshot_row.contains("takes an image"), "{snapshot_row}");

    let out = weir(
        &sandbox,
        &["test", &module, "--checkpoint", "pickled"],
        &input,
    );
    out.assert_code(2, "an unknown capture");
    out.assert_stderr_contains("exports, image, auto");
}

#[test]
fn test_output_of_count_is_the_running_count_per_key() {
    let sandbox = Sandbox::new("test-count");
    let input = "{\"key\": \"a\", \"value\": \"\"}\n{\"key\": \"b\", \"value\": \"\", \"timestamp\": 9}\n{\"key\": \"a\", \"value\": \"\"}\n";
    // The count with its counts kept on the host too: `weir test` gives it a store.
    for path in [COUNT, WAT_COUNT, weir_tests::guests::HOST_COUNT] {
        let out = weir(&sandbox, &["test", path], input);
        out.assert_code(0, path);
        assert_eq!(
            out.stdout,
            "{\"key\":\"a\",\"value\":\"1\",\"timestamp\":0,\"port\":0}\n\
             {\"key\":\"b\",\"value\":\"1\",\"timestamp\":9,\"port\":0}\n\
             {\"key\":\"a\",\"value\":\"2\",\"timestamp\":0,\"port\":0}\n"
        );
    }
}

#[test]
fn test_expect_passes_on_the_same_output_and_fails_with_a_diff_otherwise() {
    let sandbox = Sandbox::new("test-expect");
    let input = write(&sandbox, "input.jsonl", &example_input());
    let out = weir(&sandbox, &["test", COUNT, "--input", &input], "");
    out.assert_code(0, "reference run");
    let expected = write(&sandbox, "expected.jsonl", &out.stdout);

    let pass = weir(
        &sandbox,
        &["test", WAT_COUNT, "--input", &input, "--expect", &expected],
        "",
    );
    pass.assert_code(0, "--expect with the same output");
    assert!(pass.stdout.is_empty(), "{}", pass.stdout);
    pass.assert_stderr_contains("output matches");

    let mut lines: Vec<&str> = out.stdout.lines().collect();
    let wrong = lines[4].replace("\"value\":\"1\"", "\"value\":\"99\"");
    assert_ne!(wrong, lines[4]);
    lines[4] = &wrong;
    let wrong_file = write(&sandbox, "wrong.jsonl", &(lines.join("\n") + "\n"));
    let fail = weir(
        &sandbox,
        &["test", COUNT, "--input", &input, "--expect", &wrong_file],
        "",
    );
    fail.assert_code(1, "--expect with a changed record");
    fail.assert_stderr_contains("first difference at record 5");
    fail.assert_stderr_contains(&format!("expected: {wrong}"));
    fail.assert_stderr_contains(&format!("actual:   {}", out.stdout.lines().nth(4).unwrap()));

    let short_file = write(
        &sandbox,
        "short.jsonl",
        &(out.stdout.lines().take(3).collect::<Vec<_>>().join("\n") + "\n"),
    );
    let fail = weir(
        &sandbox,
        &["test", COUNT, "--input", &input, "--expect", &short_file],
        "",
    );
    fail.assert_code(1, "--expect with fewer records");
    fail.assert_stderr_contains("first difference at record 4");
    fail.assert_stderr_contains("(nothing: it ends after 3 records)");
}

#[test]
fn test_round_trips_bytes_through_base64() {
    let sandbox = Sandbox::new("test-base64");
    // `dedup` emits the first record of each key unchanged.
    let input = [
        r#"{"key":{"base64":"/wA="},"value":{"base64":"gICA"},"timestamp":1,"port":0}"#,
        r#"{"key":"text","value":{"base64":"aMOp"},"timestamp":2,"port":0}"#,
        r#"{"key":{"base64":"/wA="},"value":"dropped","timestamp":3,"port":0}"#,
        r#"{"key":"","value":"","timestamp":-4,"port":0}"#,
    ];
    let out = weir(
        &sandbox,
        &["test", DEDUP, "--checkpoint-every", "1"],
        &(input.join("\n") + "\n"),
    );
    out.assert_code(0, "base64");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(
        lines,
        vec![
            input[0],
            // Valid UTF-8 comes back as text.
            r#"{"key":"text","value":"hé","timestamp":2,"port":0}"#,
            input[3],
        ]
    );
}

#[test]
fn test_names_the_bad_input_line() {
    let sandbox = Sandbox::new("test-bad-input");
    let input = "{\"value\": \"a\"}\n\n{\"value\": {\"base64\": \"not base64!\"}}\n";
    let out = weir(&sandbox, &["test", COUNT], input);
    out.assert_code(2, "bad input");
    out.assert_stderr_contains("stdin line 3: `value` is not valid base64");

    let file = write(
        &sandbox,
        "in.jsonl",
        "{\"value\": \"a\", \"timestamp\": \"now\"}\n",
    );
    let out = weir(&sandbox, &["test", COUNT, "--input", &file], "");
    out.assert_code(2, "bad timestamp");
    out.assert_stderr_contains(&format!("{file} line 1: `timestamp` must be"));
}

/// A guest that emits its init message as the value of one record per batch, to show what
/// `--config`, `--operator`, `--parallelism` and `--subtask` give it.
const INIT_ECHO: &str = r#"(module
  (import "weir" "emit" (func $emit (param i32 i32)))
  (memory (export "memory") 1)
  (global $next (mut i32) (i32.const 4096))
  (global $init_ptr (mut i32) (i32.const 0))
  (global $init_len (mut i32) (i32.const 0))
  (func (export "weir_abi_version") (result i32) (i32.const 1))
  (func (export "weir_alloc") (param $len i32) (result i32) (local $p i32)
    (local.set $p (global.get $next))
    (global.set $next (i32.add (global.get $next) (local.get $len)))
    (local.get $p))
  (func (export "weir_init") (param $ptr i32) (param $len i32) (result i32)
    (global.set $init_ptr (local.get $ptr))
    (global.set $init_len (local.get $len))
    (i32.const 0))
  (func (export "weir_process") (param i32 i32) (result i32)
    (i32.store (i32.const 16) (i32.const 1))
    (i32.store (i32.const 20) (i32.const 0))
    (i64.store (i32.const 24) (i64.const 0))
    (i32.store (i32.const 32) (i32.const 0))
    (i32.store (i32.const 36) (global.get $init_len))
    (memory.copy (i32.const 40) (global.get $init_ptr) (global.get $init_len))
    (call $emit (i32.const 16) (i32.add (i32.const 24) (global.get $init_len)))
    (i32.const 0)))"#;

#[test]
fn test_gives_the_operator_its_config_name_and_subtask() {
    let sandbox = Sandbox::new("test-init");
    let module = write(&sandbox, "echo.wat", INIT_ECHO);
    let init_of = |out: &CliOutput| {
        let record = JsonRecord::parse(out.stdout.lines().next().unwrap()).unwrap();
        let message = InitMessage::decode(&record.value).unwrap();
        (
            message.operator.to_string(),
            message.subtask,
            message.parallelism,
            message.config.to_vec(),
        )
    };

    let out = weir(&sandbox, &["test", &module], "{\"value\": \"\"}\n");
    out.assert_code(0, "defaults");
    assert_eq!(init_of(&out), ("echo".to_string(), 0, 1, Vec::new()));

    let args = [
        "test",
        &module,
        "--config",
        "limit=3",
        "--operator",
        "op",
        "--parallelism",
        "4",
        "--subtask",
        "3",
    ];
    let out = weir(&sandbox, &args, "{\"value\": \"\"}\n");
    out.assert_code(0, "options");
    assert_eq!(init_of(&out), ("op".to_string(), 3, 4, b"limit=3".to_vec()));

    let config = write(&sandbox, "config.bin", "from a file");
    let out = weir(
        &sandbox,
        &["test", &module, "--config-file", &config],
        "{\"value\": \"\"}\n",
    );
    out.assert_code(0, "config file");
    assert_eq!(init_of(&out).3, b"from a file".to_vec());

    let out = weir(
        &sandbox,
        &["test", &module, "--parallelism", "2", "--subtask", "2"],
        "",
    );
    out.assert_code(2, "subtask out of range");
    out.assert_stderr_contains("subtask 2 is not below the parallelism 2");
}

#[test]
fn test_reports_guest_failures_and_state_lost_across_a_restore() {
    let sandbox = Sandbox::new("test-failures");
    let trap = write(
        &sandbox,
        "trap.wat",
        &module(&[
            PRELUDE,
            VERSION,
            ALLOC,
            r#"(func (export "weir_process") (param i32 i32) (result i32) (unreachable))"#,
        ]),
    );
    let out = weir(&sandbox, &["test", &trap], "{\"value\": \"v\"}\n");
    out.assert_code(1, "trap");
    out.assert_stderr_contains("operator `trap` subtask 0 failed in weir_process: guest trap");

    // The running total of TOTAL_WITHOUT_SNAPSHOT with snapshot exports that save nothing: a
    // checkpoint loses it.
    let forgetful = write(
        &sandbox,
        "forgetful.wat",
        &TOTAL_WITHOUT_SNAPSHOT.replace(
            r#"  (func (export "weir_process")"#,
            r#"  (func (export "weir_snapshot") (param i64) (result i32) (i32.const 0))
  (func (export "weir_restore") (param i32 i32) (result i32) (i32.const 0))
  (func (export "weir_process")"#,
        ),
    );
    let input = "{\"value\": \"\"}\n".repeat(4);
    let out = weir(&sandbox, &["test", &forgetful, "--batch-size", "1"], &input);
    out.assert_code(0, "forgetful without checkpoints");
    let out = weir(
        &sandbox,
        &["test", &forgetful, "--checkpoint-every", "2"],
        &input,
    );
    out.assert_code(1, "forgetful with checkpoints");
    out.assert_stderr_contains("differs from the output without them");
    // Batches of two records, each emitting the running total: 2, 4 — or 2, 2 when the total
    // is lost in the restore after the first batch.
    out.assert_stderr_contains("first difference at record 2");
    out.assert_stderr_contains(r#"without checkpoints: {"key":"","value":"4""#);
    out.assert_stderr_contains(r#"with checkpoints:    {"key":"","value":"2""#);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    out.assert_stderr_contains("checkpointed through its weir_snapshot and weir_restore");

    // An image holds the total its snapshot forgets.
    let out = weir(
        &sandbox,
        &[
            "test",
            &forgetful,
            "--checkpoint-every",
            "2",
            "--checkpoint",
            "image",
        ],
        &input,
    );
    out.assert_code(0, "forgetful checkpointed as an image");
    out.assert_stderr_contains("2 images restored");

    let out = weir(
        &sandbox,
        &["test", &sandbox.join("absent.wasm").display().to_string()],
        "",
    );
    out.assert_code(2, "missing module");
}

/// A real guest whose image restore goes wrong — no module the host accepts can do that to
/// itself, so the test hook `WEIR_TEST_STALE_RESTORE` (builds with `test-hooks` only) hands every
/// restore the first image — fails `weir test` with a message naming the image restore and the
/// way around it, not the operator's snapshot code.
#[test]
fn test_names_a_broken_image_restore_of_a_real_guest() {
    let sandbox = Sandbox::new("test-stale-image");
    let input = "{\"key\":\"a\",\"value\":\"x\"}\n".repeat(4);
    let args = [
        "test",
        WAT_COUNT,
        "--checkpoint",
        "image",
        "--checkpoint-every",
        "1",
    ];
    let healthy = weir(&sandbox, &args, &input);
    healthy.assert_code(0, "the image restore as it is");
    let out = weir_command(
        &sandbox,
        &args,
        &input,
        &[("RUST_LOG", "warn"), ("WEIR_TEST_STALE_RESTORE", "1")],
    );
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    for says in [
        "the image restore changed the operator's state",
        "--checkpoint exports",
        "first difference at record 3",
    ] {
        out.assert_stderr_contains(says);
    }
    out.assert_stderr_lacks("snapshot or restore loses");
}

/// A guest whose `weir_restore` needs more memory than its module allows: its snapshot is
/// taken, and the restore finds `memory.grow` refused and traps, as an allocator's abort does —
/// a checkpoint a job could never come back from.
const RESTORE_OUT_OF_MEMORY: &str = r#"(module
  (import "weir" "save_state" (func $save_state (param i32 i32)))
  (memory (export "memory") 2 4)
  (func (export "weir_abi_version") (result i32) (i32.const 1))
  (func (export "weir_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weir_process") (param i32 i32) (result i32) (i32.const 0))
  (func (export "weir_snapshot") (param i64) (result i32)
    (call $save_state (i32.const 0) (i32.const 8)) (i32.const 0))
  (func (export "weir_restore") (param i32 i32) (result i32)
    (if (i32.eq (memory.grow (i32.const 8)) (i32.const -1)) (then unreachable))
    (i32.const 0)))"#;

/// `weir test --checkpoint-every N` restores the snapshot of the end of the input even when N
/// is longer than the input, so a snapshot that cannot be restored is found where it is taken;
/// and a restore that traps after its allocation failed says "out of memory", not only the trap.
#[test]
fn test_restores_the_end_state_and_names_a_restore_that_ran_out_of_memory() {
    let sandbox = Sandbox::new("tools-restore-out-of-memory");
    let module = write(&sandbox, "grow.wat", RESTORE_OUT_OF_MEMORY);
    let input = "{\"key\":\"a\",\"value\":\"x\"}\n".repeat(3);
    let out = weir(
        &sandbox,
        &["test", &module, "--checkpoint-every", "1000"],
        &input,
    );
    out.assert_code(1, "the end state cannot be restored");
    out.assert_stderr_contains(
        "failed in weir_restore: guest ran out of memory and trapped (its memory could not grow)",
    );
    out.assert_stderr_contains("keep less state");
}

/// The JavaScript engine inside a component gives up at about a million live objects, well
/// under the memory limit, writes "out of memory" and traps with `unreachable`: the failure says
/// it ran out of memory, and that raising the limit would not help (a JavaScript operator's
/// state past that bound is a checkpoint that snapshots and never restores, docs/COMPONENTS.md).
/// Run in-process, through the library `weir test` calls: compiling the 12 MB component can take
/// longer than the CLI's time limit on a loaded machine.
#[test]
fn test_names_a_javascript_engine_out_of_memory() {
    let Some(module) =
        crate::support::foreign("hostile JavaScript", weir_tests::guests::JS_HOSTILE)
    else {
        return;
    };
    let spec = TestSpec {
        config: ConfigSource::Text("allocate".into()),
        ..TestSpec::new(module)
    };
    let error = spec
        .run("{\"key\":\"k\",\"value\":\"v\"}\n".as_bytes())
        .expect_err("the engine runs out of memory")
        .to_string();
    assert!(
        error.contains(
            "failed in process: guest ran out of memory and trapped (its engine reported \"out \
             of memory\")"
        ) && error.contains("the engine's own heap ran out: keep less state"),
        "{error}"
    );
    crate::support::report::record(&crate::support::report::Row {
        area: "misuse",
        scenario: "a JavaScript operator past its engine's heap (a million live objects)",
        rounds: 1,
        faults: "`weir test` of a component keeping every object it makes, under the default \
                 256 MiB limit",
        result: "fails naming `process`, \"guest ran out of memory\" and \"keep less \
                 state\", not only the `unreachable` trap",
    });
}
