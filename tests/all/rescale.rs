//! Rescaling a stateful job: a savepoint of a keyed job taken at parallelism 2 restores at 1, 3
//! and 4, its keyed state split and merged by key group (docs/ABI.md §16), and the committed
//! output is the output of a run that never changed; an operator whose state cannot be split
//! is refused by name, with the way out.

use std::path::PathBuf;

use crate::support::{
    CLI_TIMEOUT, CliOutput, Ended, Sandbox, Weir, assert_committed_output, assert_same_output,
    committed_lines, complete_checkpoint_ids, in_progress_files, reference_output, run_cli,
    stop_with_savepoint, weir_command,
};

/// A keyed operator of the examples, with what it needs from the job.
struct Keyed {
    /// The operator's name in the job.
    name: &'static str,
    /// Its module.
    module: &'static str,
    /// Its config, if any.
    config: Option<&'static str>,
    /// Whether its source makes watermarks (event-time operators need them).
    watermarks: bool,
    /// More lines of its table.
    settings: &'static str,
    /// The generator's distinct keys.
    keys: u32,
}

const COUNT: Keyed = Keyed {
    name: "count",
    module: weir_tests::guests::COUNT,
    config: None,
    watermarks: false,
    settings: "",
    keys: 400,
};

/// The count with its counts kept on the host (docs/STATE.md): no guest state at all, its
/// counts split and merged by the host's stores.
const HOST_COUNT: Keyed = Keyed {
    name: "count",
    module: weir_tests::guests::HOST_COUNT,
    config: None,
    watermarks: false,
    settings: "",
    keys: 400,
};

/// Dedup writes a key's first record only: over 400 keys every key has shown up within a
/// fraction of a second, before any stop could come; over 20 000 (about 12 600 of them drawn
/// in 20 000 records) new keys keep coming to the end.
const DEDUP: Keyed = Keyed {
    name: "dedup",
    module: weir_tests::guests::DEDUP,
    config: None,
    watermarks: false,
    settings: "",
    keys: 20_000,
};

/// Tumbling windows over in-order timestamps (record `i` at `i` ms): no record is ever late,
/// so every run fires the same windows with the same counts.
const WINDOW: Keyed = Keyed {
    name: "windows",
    module: weir_tests::guests::WINDOW,
    config: Some("tumbling 500"),
    watermarks: true,
    settings: "",
    keys: 400,
};

/// The job: one generator (so each key's records reach the operator in one order) → key-hash
/// → the operator at `parallelism` → rebalance → an exactly-once file sink of 2 subtasks, with
/// a checkpoint every 100 ms. Two seconds of records over the operator's keys.
fn job(sandbox: &Sandbox, op: &Keyed, parallelism: u32, extra: &str) -> String {
    let watermark = if op.watermarks {
        "watermark = { out_of_orderness = \"0ms\", interval = \"20ms\" }\n"
    } else {
        ""
    };
    let config = op
        .config
        .map(|c| format!("config = \"{c}\"\n"))
        .unwrap_or_default();
    format!(
        "name = \"rescale\"\n{extra}\n\
         [checkpoint]\ninterval = \"100ms\"\nmode = \"exactly-once\"\ndirectory = {:?}\nretained = 2\n\
         [[source]]\nname = \"gen\"\ntype = \"generator\"\nseed = 3\ncount = 20000\nrate = 10000.0\nkeys = {keys}\n{watermark}\
         [[operator]]\nname = \"{}\"\nmodule = {:?}\nparallelism = {parallelism}\n{config}{}\
         inputs = [{{ from = \"gen\", partition = \"key-hash\" }}]\n\
         [[sink]]\nname = \"out\"\ntype = \"file\"\npath = {:?}\nparallelism = 2\n\
         inputs = [{{ from = \"{}\", partition = \"rebalance\" }}]\n",
        sandbox.checkpoint_dir(),
        op.name,
        op.module,
        op.settings,
        sandbox.out_dir(),
        op.name,
        keys = op.keys,
    )
}

/// Runs the job of `sandbox` with `--savepoint-on-stop`, stops it after two checkpoints and
/// returns the savepoint it names.
fn savepoint_mid_run(sandbox: &Sandbox, label: &str) -> PathBuf {
    stop_with_savepoint(sandbox, &sandbox.join(&format!("{label}.log")), 2)
}

/// The committed output of an undisturbed run of the job `text` writes for a sandbox.
fn reference_of(label: &str, text: impl Fn(&Sandbox) -> String) -> Vec<String> {
    let sandbox = Sandbox::new(&format!("rescale-{label}-reference"));
    std::fs::write(sandbox.job_path(), text(&sandbox)).unwrap();
    reference_output(&sandbox, CLI_TIMEOUT)
}

/// The committed output of an undisturbed run of `op` at parallelism 2.
fn reference(op: &Keyed) -> Vec<String> {
    reference_of(op.name, |sandbox| job(sandbox, op, 2, ""))
}

/// Writes `text` as the job of `sandbox`, runs it from `savepoint` to its end, and checks that
/// it logged each of `said` and committed `expected` (`what` names the case in failures).
fn finish_from(
    sandbox: &Sandbox,
    savepoint: &std::path::Path,
    text: &str,
    said: &[String],
    expected: &[String],
    what: &str,
) {
    std::fs::write(sandbox.job_path(), text).unwrap();
    let ended = run_cli(
        &sandbox.job_path(),
        &["--restore", savepoint.to_str().unwrap()],
        &sandbox.join("after.log"),
    );
    ended.assert_code(0, what);
    for said in said {
        assert!(
            ended.stderr.contains(said),
            "{what}: no `{said}`:\n{}",
            ended.stderr
        );
    }
    assert_same_output(&committed_lines(&sandbox.out_dir()), expected, what);
}

/// What a restore logs when it split and merged `vertex`'s state from `from` to `to` subtasks.
fn rescaled(vertex: &str, from: u32, to: u32) -> String {
    format!("rescaled the state of `{vertex}` from {from} to {to} subtasks")
}

/// Savepoints `op` at parallelism 2 mid-run and finishes the job from the savepoint at each of
/// `targets`: the output must be the reference's.
fn assert_rescales(op: &Keyed, targets: &[u32]) {
    let expected = reference(op);
    assert!(!expected.is_empty(), "the reference run wrote nothing");
    for &p in targets {
        let sandbox = Sandbox::new(&format!("rescale-{}-{p}", op.name));
        std::fs::write(sandbox.job_path(), job(&sandbox, op, 2, "")).unwrap();
        let savepoint = savepoint_mid_run(&sandbox, "before");
        let committed = committed_lines(&sandbox.out_dir()).len();
        assert!(
            committed < expected.len(),
            "the stop should come before the end: {committed} of {} lines",
            expected.len()
        );
        finish_from(
            &sandbox,
            &savepoint,
            &job(&sandbox, op, p, ""),
            &[rescaled(op.name, 2, p)],
            &expected,
            &format!(
                "{} savepointed at parallelism 2 and restored at {p}",
                op.name
            ),
        );
    }
}

#[test]
fn a_count_savepointed_at_two_restores_at_one_three_and_four_with_the_same_output() {
    assert_rescales(&COUNT, &[1, 3, 4]);
}

#[test]
fn a_count_kept_on_the_host_savepointed_at_two_restores_at_one_three_and_four_alike() {
    assert_rescales(&HOST_COUNT, &[1, 3, 4]);
}

#[test]
fn a_dedup_savepointed_at_two_restores_at_one_three_and_four_with_the_same_output() {
    assert_rescales(&DEDUP, &[1, 3, 4]);
}

#[test]
fn windows_savepointed_at_two_restore_at_one_three_and_four_with_the_same_output() {
    assert_rescales(&WINDOW, &[1, 3, 4]);
}

#[test]
fn a_file_sink_savepointed_at_two_restores_at_one_and_three_committing_each_record_once() {
    let expected = reference(&COUNT);
    for p in [1, 3] {
        let sandbox = Sandbox::new(&format!("rescale-sink-{p}"));
        std::fs::write(sandbox.job_path(), job(&sandbox, &COUNT, 2, "")).unwrap();
        let savepoint = savepoint_mid_run(&sandbox, "before");
        // The operator and the sink both change.
        let text = job(&sandbox, &COUNT, p, "").replace(
            "parallelism = 2\ninputs = [{ from = \"count\"",
            &format!("parallelism = {p}\ninputs = [{{ from = \"count\""),
        );
        assert!(text.contains(&format!("parallelism = {p}\ninputs = [{{ from = \"count\"")));
        finish_from(
            &sandbox,
            &savepoint,
            &text,
            &[rescaled("out", 2, p)],
            &expected,
            &format!("the file sink savepointed at parallelism 2 and restored at {p}"),
        );
        assert_eq!(in_progress_files(&sandbox.out_dir()), Vec::<String>::new());
    }
}

#[test]
fn a_generator_savepointed_at_one_restores_at_three_and_emits_every_record_once() {
    let expected = reference(&COUNT);
    let sandbox = Sandbox::new("rescale-generator");
    std::fs::write(sandbox.job_path(), job(&sandbox, &COUNT, 2, "")).unwrap();
    let savepoint = savepoint_mid_run(&sandbox, "before");
    let text = job(&sandbox, &COUNT, 3, "").replace(
        "type = \"generator\"\n",
        "type = \"generator\"\nparallelism = 3\n",
    );
    finish_from(
        &sandbox,
        &savepoint,
        &text,
        &[rescaled("gen", 1, 3), rescaled("count", 2, 3)],
        &expected,
        "a generator savepointed at parallelism 1 and restored at 3",
    );
}

/// Savepoints the job of `op` at parallelism 2, then restores its job at `parallelism` with
/// `settings` from that savepoint, expecting a refusal (exit 3, for `context`); how it ended.
fn refused_restore(
    sandbox: &Sandbox,
    op: &Keyed,
    parallelism: u32,
    settings: &str,
    context: &str,
) -> Ended {
    std::fs::write(sandbox.job_path(), job(sandbox, op, 2, "")).unwrap();
    let savepoint = savepoint_mid_run(sandbox, "before");
    std::fs::write(sandbox.job_path(), job(sandbox, op, parallelism, settings)).unwrap();
    let ended = run_cli(
        &sandbox.job_path(),
        &["--restore", savepoint.to_str().unwrap()],
        &sandbox.join("after.log"),
    );
    ended.assert_code(3, context);
    ended
}

/// [`refused_restore`] of the job of `op` (its vertex `count`) at parallelism 3, expecting a
/// refusal that says why (`why`) and the way out, keeping the parallelism.
fn refused_at_three(sandbox: &Sandbox, op: &Keyed, why: &str) {
    let ended = refused_restore(sandbox, op, 3, "", "a rescale that cannot be done");
    ended.assert_stderr_contains("cannot rescale `count` from 2 to 3 subtasks");
    ended.assert_stderr_contains(why);
    ended.assert_stderr_contains("keep its parallelism");
}

#[test]
fn an_operator_checkpointed_as_an_image_is_refused_a_rescale_by_name() {
    let sandbox = Sandbox::new("rescale-image");
    let image = Keyed {
        settings: "checkpoint = \"image\"\n",
        ..COUNT
    };
    refused_at_three(&sandbox, &image, "checkpointed as an image of its memory");
}

#[test]
fn an_operator_whose_state_is_its_own_is_refused_a_rescale_with_the_way_out() {
    let sandbox = Sandbox::new("rescale-opaque");
    let wat = Keyed {
        name: "count",
        module: weir_tests::guests::WAT_COUNT,
        ..COUNT
    };
    refused_at_three(&sandbox, &wat, "not in the rescalable layout");
}

#[test]
fn a_restore_with_another_max_parallelism_is_refused_naming_the_operator() {
    let sandbox = Sandbox::new("rescale-max-parallelism");
    let ended = refused_restore(
        &sandbox,
        &COUNT,
        2,
        "max_parallelism = 64",
        "a restore with other key groups",
    );
    ended.assert_stderr_contains("the state of `count`");
    ended.assert_stderr_contains("set max_parallelism = 128");
}

/// [`job`] with six seconds of records: time for rescales while it runs.
fn long_job(sandbox: &Sandbox, op: &Keyed, parallelism: u32) -> String {
    job(sandbox, op, parallelism, "").replace("count = 20000\n", "count = 60000\n")
}

/// `weir status DIR --json` of the job running in `sandbox`.
fn status(sandbox: &Sandbox) -> serde_json::Value {
    let dir = sandbox.checkpoint_dir();
    let out = weir_command(
        sandbox,
        &["status", dir.to_str().unwrap(), "--json"],
        "",
        &[],
    );
    assert_eq!(out.code, Some(0), "weir status: {}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// The parallelism `weir status` shows for `vertex`.
fn parallelism_shown(status: &serde_json::Value, vertex: &str) -> u64 {
    status["job"]["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == vertex)
        .and_then(|v| v["parallelism"].as_u64())
        .unwrap()
}

/// Waits until the job of `sandbox` has completed a checkpoint with an id above `id` (the
/// directory keeps only the newest: counting them says nothing).
fn wait_for_checkpoint_after(weir: &mut Weir, sandbox: &Sandbox, id: u64) {
    let dir = sandbox.checkpoint_dir();
    let reached = weir.wait_until("a checkpoint", CLI_TIMEOUT, |_| {
        complete_checkpoint_ids(&dir)
            .last()
            .is_some_and(|&newest| newest > id)
    });
    assert!(
        reached,
        "the job ended before a checkpoint after {id}:\n{}",
        weir.stderr()
    );
}

/// The output of an undisturbed run of [`long_job`] of `op` at parallelism 2, then that job
/// started in a sandbox of its own (`rescale-{label}`) and run until a checkpoint completed.
fn start_long_job(label: &str, op: &Keyed) -> (Vec<String>, Sandbox, Weir) {
    let expected = reference_of(label, |sandbox| long_job(sandbox, op, 2));
    let sandbox = Sandbox::new(&format!("rescale-{label}"));
    std::fs::write(sandbox.job_path(), long_job(&sandbox, op, 2)).unwrap();
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    wait_for_checkpoint_after(&mut weir, &sandbox, 0);
    (expected, sandbox, weir)
}

/// `weir rescale DIR CHANGE` of the job running in `sandbox`.
fn rescale(sandbox: &Sandbox, change: &str) -> CliOutput {
    let dir = sandbox.checkpoint_dir();
    weir_command(
        sandbox,
        &["rescale", dir.to_str().unwrap(), change],
        "",
        &[],
    )
}

#[test]
fn weir_rescale_changes_a_running_keyed_job_in_place_and_the_output_stays_the_same() {
    let (expected, sandbox, mut weir) = start_long_job("live", &COUNT);
    for (to, from) in [(3, 2), (1, 3)] {
        let change = format!("count={to}");
        let out = rescale(&sandbox, &change);
        assert_eq!(out.code, Some(0), "weir rescale {change}: {}", out.stderr);
        assert!(
            out.stderr
                .contains(&format!("rescaled count {from} → {to} from savepoint")),
            "{}",
            out.stderr
        );
        let savepoint = PathBuf::from(out.stdout.trim());
        assert!(
            savepoint.join("_metadata").is_file(),
            "{}",
            savepoint.display()
        );
        // The status shows the new parallelism and what the restore did.
        let shown = status(&sandbox);
        assert_eq!(parallelism_shown(&shown, "count"), to, "{shown}");
        let rescaled = &shown["checkpoints"]["latest"]["restored"]["rescaled"][0];
        assert_eq!(rescaled["vertex"], "count", "{shown}");
        assert_eq!(
            (rescaled["from"].as_u64(), rescaled["to"].as_u64()),
            (Some(from), Some(to))
        );
        // Checkpoints after the rescale complete at the new parallelism.
        let id = savepoint
            .file_name()
            .and_then(|n| n.to_str()?.strip_prefix("sp-")?.parse().ok())
            .unwrap_or_else(|| panic!("not a savepoint directory: {}", savepoint.display()));
        wait_for_checkpoint_after(&mut weir, &sandbox, id);
    }
    let ended = weir.wait(CLI_TIMEOUT);
    ended.assert_code(0, "the job rescaled twice while it ran");
    for (from, to) in [(2, 3), (3, 1)] {
        let said = rescaled("count", from, to);
        assert!(
            ended.stderr.contains(&said),
            "no `{said}`:\n{}",
            ended.stderr
        );
    }
    assert_committed_output(
        &sandbox.out_dir(),
        &expected,
        "a count rescaled from 2 to 3 to 1 subtasks while it ran",
    );
}

#[test]
fn weir_rescale_refuses_what_cannot_be_done_and_the_job_runs_on_as_it_was() {
    let wat = Keyed {
        module: weir_tests::guests::WAT_COUNT,
        ..COUNT
    };
    let (expected, sandbox, weir) = start_long_job("live-refused", &wat);
    for (change, says) in [
        // Refused before anything happens.
        (
            "nope=2",
            "the job has no vertex `nope`; its vertices are gen, count, out",
        ),
        ("count=2", "nothing to rescale"),
        ("count=300", "at most 256"),
        // Refused at the restore: the job goes on from the savepoint at its old parallelism.
        ("count=200", "can run at parallelism 1 to 128"),
        ("count=3", "not in the rescalable layout"),
    ] {
        let out = rescale(&sandbox, change);
        assert_eq!(out.code, Some(1), "weir rescale {change}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{change}: {}", out.stderr);
        assert_eq!(parallelism_shown(&status(&sandbox), "count"), 2);
    }
    let bad = rescale(&sandbox, "count=x");
    assert_eq!(bad.code, Some(2), "{}", bad.stderr);
    assert!(bad.stderr.contains("not a parallelism"), "{}", bad.stderr);
    weir.assert_ends_committing(&sandbox, &expected, "a job whose rescales were refused");
}
