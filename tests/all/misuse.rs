//! Operator mistakes that used to lose or duplicate committed output with exit code 0: a second
//! `weir run` of a running job, two jobs writing one sink directory, `--restore latest` that
//! silently replayed from the beginning, and checkpoint ids reused after a crash. Each test
//! checks the refusal (exit 3, naming what is wrong and the way on) and that the committed
//! output stays exact.

use std::fs;
use std::path::Path;

use weir::kill_point::KillPoint;

use crate::support::report;
use crate::support::{
    CLI_TIMEOUT, GeneratorSpec, JobFile, Sandbox, Weir, checkpoint_dirs, checkpointed,
    committed_lines, complete_checkpoint_ids, generator_count, incomplete_checkpoints,
    reference_output, run_cli,
};

/// `weir run`'s exit code when the job cannot start.
const EXIT_CANNOT_START: i32 = 3;

/// A keyed count of `count` generated records, checkpointed every 100 ms.
fn counting_job(sandbox: &Sandbox, count: u64, rate: Option<f64>, retained: u32) -> JobFile {
    let spec = GeneratorSpec {
        parallelism: 2,
        seed: 0x00c0_ffee,
        count: Some(count),
        rate,
        keys: 500,
    };
    checkpointed(generator_count(sandbox, &spec), sandbox, "100ms", retained)
        .checkpoint("min_pause", "0ms")
}

/// The committed output of an undisturbed run of [`counting_job`] with `count` records.
fn reference(count: u64) -> Vec<String> {
    let sandbox = Sandbox::new("misuse-reference");
    counting_job(&sandbox, count, None, 1).write(&sandbox.job_path());
    reference_output(&sandbox, CLI_TIMEOUT)
}

/// The [`reference`] output of `records` records, then [`counting_job`] of them at 8000 a
/// second, keeping `retained` checkpoints, started in a sandbox `label` (its log `first.log`)
/// and run until it completed a checkpoint: it is running for real.
fn start_running(label: &str, records: u64, retained: u32) -> (Vec<String>, Sandbox, Weir) {
    let expected = reference(records);
    let sandbox = Sandbox::new(label);
    counting_job(&sandbox, records, Some(8_000.0), retained).write(&sandbox.job_path());
    let checkpoints = sandbox.checkpoint_dir();
    let mut run = Weir::run(&sandbox.job_path(), &[], &sandbox.join("first.log"));
    let running = run.wait_until("a completed checkpoint", CLI_TIMEOUT, |_| {
        !complete_checkpoint_ids(&checkpoints).is_empty()
    });
    assert!(
        running,
        "the job ended before its first checkpoint:\n{}",
        run.stderr()
    );
    (expected, sandbox, run)
}

#[test]
fn a_second_run_of_a_running_job_is_refused_and_the_first_stays_exact() {
    let (expected, sandbox, first) = start_running("two-runs", 30_000, 2);
    let pid = first.pid();
    let mut refused = 0;
    for (i, args) in [&[][..], &["--restore", "latest"][..]].iter().enumerate() {
        let second = run_cli(
            &sandbox.job_path(),
            args,
            &sandbox.join(&format!("second-{i}.log")),
        );
        second.assert_code(EXIT_CANNOT_START, "a second run of a running job");
        for needle in [
            format!(
                "checkpoint directory {} is in use by another run",
                sandbox.checkpoint_dir().display()
            ),
            format!("pid {pid}, job `gencount`"),
            "weir stop".to_string(),
        ] {
            second.assert_stderr_contains(&needle);
        }
        refused += 1;
    }
    first.assert_ends_committing(
        &sandbox,
        &expected,
        "the first run, while a second one was started",
    );
    report::record(&report::Row {
        area: "misuse",
        scenario: "a second `weir run` of a running job (plain and with --restore latest)",
        rounds: refused,
        faults: "second process started on the same job while the first runs",
        result: "refused (exit 3) naming the directory and the pid holding it; the first \
                 run's committed output identical to an undisturbed run",
    });
}

#[test]
fn two_jobs_writing_one_sink_directory_are_refused() {
    const RECORDS: u64 = 20_000;
    let (expected, sandbox, first) = start_running("shared-sink", RECORDS, 1);
    // Another job: its own checkpoint directory, the same sink directory.
    let other_dir = sandbox.join("other-checkpoints");
    let other_job = sandbox.join("other.toml");
    counting_job(&sandbox, RECORDS, None, 1)
        .checkpoint("directory", other_dir.as_path())
        .write(&other_job);
    let other = run_cli(&other_job, &[], &sandbox.join("other.log"));
    other.assert_code(
        EXIT_CANNOT_START,
        "a job writing a running job's sink directory",
    );
    let needle = format!(
        "output directory of file sink `out` {} is in use by another run",
        sandbox.out_dir().display()
    );
    other.assert_stderr_contains(&needle);
    first.assert_ends_committing(
        &sandbox,
        &expected,
        "the job whose sink directory another job tried to write",
    );
    report::record(&report::Row {
        area: "misuse",
        scenario: "two jobs (own checkpoint directories) writing one file sink directory",
        rounds: 1,
        faults: "second job started while the first writes the directory",
        result: "refused (exit 3) naming the sink and its directory; the first job's committed \
                 output identical to an undisturbed run",
    });
}

/// Flips a byte in the middle of every file of every complete checkpoint in `dir`.
fn damage_every_checkpoint(dir: &Path) -> usize {
    let mut damaged = 0;
    for checkpoint in checkpoint_dirs(dir) {
        for entry in fs::read_dir(&checkpoint.path).unwrap() {
            let path = entry.unwrap().path();
            let mut bytes = fs::read(&path).unwrap();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0x5a;
            fs::write(&path, bytes).unwrap();
        }
        damaged += 1;
    }
    damaged
}

#[test]
fn restore_latest_refuses_to_replay_committed_output_from_the_beginning() {
    const RECORDS: u64 = 6_000;
    let sandbox = Sandbox::new("fresh-refusal");
    counting_job(&sandbox, RECORDS, None, 3).write(&sandbox.job_path());
    let job = sandbox.job_path();
    run_cli(&job, &[], &sandbox.join("first.log")).assert_code(0, "the first run");
    let committed = committed_lines(&sandbox.out_dir());
    assert!(!committed.is_empty());
    let mut refusals = 0;

    // Every checkpoint damaged: nothing verifies.
    assert!(damage_every_checkpoint(&sandbox.checkpoint_dir()) > 0);
    let damaged = run_cli(&job, &["--restore", "latest"], &sandbox.join("damaged.log"));
    damaged.assert_code(
        EXIT_CANNOT_START,
        "--restore latest with every checkpoint damaged",
    );
    for needle in [
        "damaged checkpoint",
        "--fresh",
        "weir checkpoints",
        "--restore PATH",
    ] {
        damaged.assert_stderr_contains(needle);
    }
    assert_eq!(
        committed_lines(&sandbox.out_dir()),
        committed,
        "output unchanged"
    );
    refusals += 1;

    // The checkpoint directory removed: the sink's committed parts still show the earlier run.
    fs::remove_dir_all(sandbox.checkpoint_dir()).unwrap();
    let removed = run_cli(&job, &["--restore", "latest"], &sandbox.join("removed.log"));
    removed.assert_code(
        EXIT_CANNOT_START,
        "--restore latest with the checkpoints removed",
    );
    // The refusal names the committed output.
    removed.assert_stderr_contains("file sink `out` holds");
    removed.assert_stderr_contains("committed part file");
    assert_eq!(
        committed_lines(&sandbox.out_dir()),
        committed,
        "output unchanged"
    );
    refusals += 1;

    // Told to: the replay is accepted, and the output repeats.
    run_cli(
        &job,
        &["--restore", "latest", "--fresh"],
        &sandbox.join("fresh.log"),
    )
    .assert_code(0, "--restore latest --fresh");
    assert_eq!(
        committed_lines(&sandbox.out_dir()).len(),
        2 * committed.len()
    );
    // A plain run starts from the beginning too, but says what it repeats.
    let plain = run_cli(&job, &[], &sandbox.join("plain.log"));
    plain.assert_code(0, "a plain run");
    assert!(
        plain
            .stderr
            .contains("starting from the beginning, but an earlier run of this job left"),
        "{}",
        plain.stderr
    );
    report::record(&report::Row {
        area: "misuse",
        scenario: "`--restore latest` with every checkpoint damaged, then with the checkpoint \
                   directory removed while committed output exists",
        rounds: refusals,
        faults: "every checkpoint file corrupted; the checkpoint directory deleted",
        result: "refused (exit 3) naming the evidence, `--restore PATH` and `--fresh`; committed \
                 output untouched; `--fresh` accepted",
    });
}

#[test]
fn checkpoint_ids_never_repeat_after_a_crash_between_trigger_and_completion() {
    let sandbox = Sandbox::new("id-reuse");
    // Slow enough to be killed mid-run; every checkpoint retained, so every id can be seen.
    counting_job(&sandbox, 12_000, Some(6_000.0), 1_000).write(&sandbox.job_path());
    let job = sandbox.job_path();
    Weir::killed_at(&sandbox, &format!("{}:3", KillPoint::MetadataWrite));
    let incomplete: Vec<u64> = incomplete_checkpoints(&sandbox.checkpoint_dir())
        .into_iter()
        .map(|c| c.id)
        .collect();
    assert!(
        !incomplete.is_empty(),
        "the kill during a metadata write should leave an incomplete checkpoint"
    );
    run_cli(
        &job,
        &["--restore", "latest"],
        &sandbox.join("restored.log"),
    )
    .assert_code(0, "the restored run");
    let complete_after = complete_checkpoint_ids(&sandbox.checkpoint_dir());
    let reused: Vec<&u64> = complete_after
        .iter()
        .filter(|id| incomplete.contains(id))
        .collect();
    assert!(
        reused.is_empty(),
        "checkpoint ids {reused:?} were used again after the crash (incomplete then: \
         {incomplete:?}, complete after the restore: {complete_after:?})"
    );
    report::record(&report::Row {
        area: "misuse",
        scenario: "checkpoint ids after a SIGKILL between a checkpoint's trigger and its completion",
        rounds: 1,
        faults: "SIGKILL half-way through the 3rd metadata write, restart with --restore latest",
        result: "no id used twice: the restored run's checkpoints are numbered after every id \
                 ever reserved",
    });
}

#[test]
fn a_config_for_a_module_without_weir_init_is_refused_with_one_prefix() {
    let sandbox = Sandbox::new("config-without-init");
    let spec = GeneratorSpec {
        parallelism: 1,
        seed: 1,
        count: Some(10),
        rate: None,
        keys: 3,
    };
    let ended = JobFile::new("noinit")
        .generator("gen", &spec)
        .operator(
            "count",
            weir_tests::guests::WAT_COUNT,
            1,
            Some("threshold = 3"),
            ("gen", "forward"),
        )
        .file_sink("out", &sandbox.out_dir(), 1, ("count", "forward"))
        .run_in(&sandbox);
    ended.assert_code(EXIT_CANNOT_START, "a config for a module without weir_init");
    let error = ended
        .stderr
        .lines()
        .find(|l| l.starts_with("error: "))
        .unwrap_or_else(|| panic!("no error line:\n{}", ended.stderr));
    assert!(
        error.contains("operator `count` has a config, but its module"),
        "{error}"
    );
    assert_eq!(
        error.matches("cannot start the job").count(),
        1,
        "one prefix per message: {error}"
    );
}

#[test]
fn a_damaged_restore_path_names_the_newest_checkpoint_that_verifies() {
    let sandbox = Sandbox::new("restore-path-alternative");
    counting_job(&sandbox, 20_000, Some(40_000.0), 3).write(&sandbox.job_path());
    let job = sandbox.job_path();
    run_cli(&job, &[], &sandbox.join("first.log")).assert_code(0, "the first run");
    let checkpoints = checkpoint_dirs(&sandbox.checkpoint_dir());
    assert!(
        checkpoints.len() >= 2,
        "want two checkpoints: {checkpoints:?}"
    );
    let (older, newest) = (
        &checkpoints[checkpoints.len() - 2],
        &checkpoints[checkpoints.len() - 1],
    );
    let metadata = newest.path.join("_metadata");
    let mut bytes = fs::read(&metadata).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    fs::write(&metadata, bytes).unwrap();
    for asked in [newest.path.clone(), metadata.clone()] {
        let ended = run_cli(
            &job,
            &["--restore", asked.to_str().unwrap()],
            &sandbox.join("restore.log"),
        );
        ended.assert_code(EXIT_CANNOT_START, "--restore of a damaged checkpoint");
        let expected = format!(
            "The newest checkpoint of this job that verifies is {0}: restore it with --restore {0}",
            older.path.display()
        );
        ended.assert_stderr_contains("checksum mismatch");
        ended.assert_stderr_contains(&expected);
    }
    // Asking for the one that verifies restores it.
    run_cli(
        &job,
        &["--restore", older.path.to_str().unwrap()],
        &sandbox.join("older.log"),
    )
    .assert_code(0, "--restore of the checkpoint named as the alternative");
}

/// A reader that stops reading (`weir validate m.wasm | head`) closes the pipe before `weir`
/// prints: `weir` ends quietly as a program ended by SIGPIPE does (141), with no panic.
#[test]
fn a_reader_that_closes_the_pipe_early_does_not_make_weir_panic() {
    let module = weir_tests::guests::WAT_COUNT;
    let mut child = std::process::Command::new(crate::support::weir_bin())
        .args(["validate", module])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
