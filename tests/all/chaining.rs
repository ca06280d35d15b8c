//! Operator chaining (docs/ARCHITECTURE.md, Operator chaining): tasks joined by a pointwise
//! edge run on one thread. A chained job commits what the same job unchained commits, its
//! savepoints restore into the unchained job and back, a chained task's failure is reported as
//! its own, and `weir status` shows every vertex of a chain with its own figures.

use crate::support::{
    CLI_TIMEOUT, Sandbox, Weir, assert_same_output, committed_lines, run_cli, stop_with_savepoint,
    weir_command,
};

/// An operator of the examples, as the job runs it.
struct Op {
    name: &'static str,
    module: &'static str,
    config: &'static str,
}

const COUNT: Op = Op {
    name: "count",
    module: weir_tests::guests::COUNT,
    config: "",
};

/// Tumbling windows: event-time timers, fired by the watermarks that pass through the chain,
/// and at the end of the input.
const WINDOW: Op = Op {
    name: "windows",
    module: weir_tests::guests::WINDOW,
    config: "tumbling 500",
};

/// gen (p=2) → forward → `op` (p=2) → forward → an exactly-once file sink (p=2), a checkpoint
/// every 100 ms: two chains of three tasks when chaining is on. Two seconds of records over 400
/// keys, with watermarks; `top` goes at the top of the file.
fn job(sandbox: &Sandbox, op: &Op, top: &str) -> String {
    format!(
        "name = \"chaining\"\n{top}\n\
         [checkpoint]\ninterval = \"100ms\"\nmode = \"exactly-once\"\ndirectory = {:?}\nretained = 2\n\
         [[source]]\nname = \"gen\"\ntype = \"generator\"\nparallelism = 2\nseed = 5\ncount = 20000\n\
         rate = 10000.0\nkeys = 400\n\
         watermark = {{ out_of_orderness = \"0ms\", interval = \"20ms\" }}\n\
         [[operator]]\nname = \"{}\"\nmodule = {:?}\nparallelism = 2\nconfig = {:?}\n\
         inputs = [{{ from = \"gen\", partition = \"forward\" }}]\n\
         [[sink]]\nname = \"out\"\ntype = \"file\"\npath = {:?}\nparallelism = 2\n\
         inputs = [{{ from = \"{}\", partition = \"forward\" }}]\n",
        sandbox.checkpoint_dir(),
        op.name,
        op.module,
        op.config,
        sandbox.out_dir(),
        op.name,
    )
}

/// What the run log says of the chains of [`job`].
fn chained_line(op: &Op) -> String {
    format!("chained: gen → {} → out (2 threads)", op.name)
}

/// Runs `text` in a new sandbox to its end; returns the committed output and the log.
fn run(label: &str, text: impl Fn(&Sandbox) -> String) -> (Vec<String>, String) {
    let sandbox = Sandbox::new(&format!("chaining-{label}"));
    std::fs::write(sandbox.job_path(), text(&sandbox)).unwrap();
    let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    ended.assert_code(0, label);
    (committed_lines(&sandbox.out_dir()), ended.stderr)
}

fn assert_chained_commits_what_unchained_commits(op: &Op) {
    let (expected, unchained_log) = run(&format!("{}-apart", op.name), |s| {
        job(s, op, "chain = false")
    });
    assert!(!expected.is_empty(), "the unchained run wrote nothing");
    assert!(
        !unchained_log.contains("chained:"),
        "`chain = false` chains nothing:\n{unchained_log}"
    );
    let (chained, log) = run(&format!("{}-chained", op.name), |s| job(s, op, ""));
    assert!(
        log.contains(&chained_line(op)),
        "no `{}` in the log:\n{log}",
        chained_line(op)
    );
    assert_same_output(&chained, &expected, "chained against unchained");
}

#[test]
fn a_chained_count_commits_what_the_unchained_job_commits() {
    assert_chained_commits_what_unchained_commits(&COUNT);
}

#[test]
fn chained_windows_fire_on_the_watermarks_through_the_chain_as_unchained_ones_do() {
    assert_chained_commits_what_unchained_commits(&WINDOW);
}

#[test]
fn a_chained_savepoint_restores_unchained_and_an_unchained_one_restores_chained() {
    let (expected, _) = run("reference", |s| job(s, &WINDOW, "chain = false"));
    for (before, after, what) in [
        ("", "chain = false", "chained, then restored unchained"),
        ("chain = false", "", "unchained, then restored chained"),
    ] {
        let sandbox = Sandbox::new(&format!("chaining-restore-{}", before.is_empty()));
        std::fs::write(sandbox.job_path(), job(&sandbox, &WINDOW, before)).unwrap();
        let savepoint = stop_with_savepoint(&sandbox, &sandbox.join("before.log"), 2);
        let committed = committed_lines(&sandbox.out_dir()).len();
        assert!(
            committed < expected.len(),
            "{what}: the stop should come before the end: {committed} of {} lines",
            expected.len()
        );
        std::fs::write(sandbox.job_path(), job(&sandbox, &WINDOW, after)).unwrap();
        let ended = run_cli(
            &sandbox.job_path(),
            &["--restore", savepoint.to_str().unwrap()],
            &sandbox.join("after.log"),
        );
        ended.assert_code(0, what);
        assert_same_output(&committed_lines(&sandbox.out_dir()), &expected, what);
    }
}

#[test]
fn a_chained_operator_that_fails_is_named_not_the_source_it_is_chained_after() {
    let sandbox = Sandbox::new("chaining-failure");
    let text = format!(
        "name = \"chaining-failure\"\n\
         [restart]\nstrategy = \"none\"\n\
         [[source]]\nname = \"gen\"\ntype = \"generator\"\ncount = 20000\nkeys = 10\n\
         [[operator]]\nname = \"flaky\"\nmodule = {:?}\nconfig = \"fail_at=8000\"\n\
         inputs = [{{ from = \"gen\", partition = \"forward\" }}]\n\
         [[sink]]\nname = \"out\"\ntype = \"blackhole\"\n\
         inputs = [{{ from = \"flaky\", partition = \"forward\" }}]\n",
        weir_tests::guests::FLAKY,
    );
    std::fs::write(sandbox.job_path(), text).unwrap();
    let ended = run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    ended.assert_code(1, "a job whose chained operator fails");
    assert!(
        ended
            .stderr
            .contains("chained: gen → flaky → out (1 thread)"),
        "the three tasks are chained:\n{}",
        ended.stderr
    );
    let summary = ended
        .stderr
        .lines()
        .find(|l| l.trim_start().starts_with("failure:"))
        .unwrap_or_else(|| panic!("no `failure:` line:\n{}", ended.stderr));
    assert!(
        summary.contains("task flaky#0 failed") && summary.contains("injected failure"),
        "the failure is flaky's, not the thread's head (gen): {summary}"
    );
}

/// The `records_in` `weir status` shows for each vertex of the job running in `sandbox`.
fn records_in_shown(sandbox: &Sandbox) -> Vec<(String, u64)> {
    let dir = sandbox.checkpoint_dir();
    let out = weir_command(
        sandbox,
        &["status", dir.to_str().unwrap(), "--json"],
        "",
        &[],
    );
    if out.code != Some(0) {
        return Vec::new();
    }
    let status: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    status["job"]["vertices"]
        .as_array()
        .map(|vertices| {
            vertices
                .iter()
                .map(|v| {
                    let tasks = v["tasks"].as_array().map_or(0, Vec::len);
                    assert_eq!(tasks, 2, "every subtask is shown: {v}");
                    (
                        v["name"].as_str().unwrap().to_string(),
                        v["records_in"].as_u64().unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn weir_status_shows_each_vertex_of_a_chain_with_its_own_figures() {
    let sandbox = Sandbox::new("chaining-status");
    // Six seconds of records: time to look while it runs.
    let text = job(&sandbox, &COUNT, "").replace("count = 20000\n", "count = 60000\n");
    std::fs::write(sandbox.job_path(), text).unwrap();
    let mut weir = Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"));
    let mut shown = Vec::new();
    let seen = weir.wait_until("every vertex counting records", CLI_TIMEOUT, |_| {
        shown = records_in_shown(&sandbox);
        shown.len() == 3 && shown.iter().all(|(_, records)| *records > 0)
    });
    assert!(seen, "the job ended first: {shown:?}\n{}", weir.stderr());
    let names: Vec<&str> = shown.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["gen", "count", "out"]);
    weir.terminate();
    weir.wait(CLI_TIMEOUT);
}

#[test]
fn a_processing_time_timer_of_an_operator_chained_after_a_source_fires() {
    // The source's loop is the chain's: it must fire the chained operator's timer while it
    // reads, as the operator's own loop would unchained.
    for top in ["", "chain = false"] {
        let (lines, log) = run(&format!("timer-{}", top.is_empty()), |sandbox| {
            format!(
                "name = \"chaining-timer\"\n{top}\n\
                 [checkpoint]\ninterval = \"100ms\"\ndirectory = {:?}\n\
                 [[source]]\nname = \"gen\"\ntype = \"generator\"\ncount = 2000\nrate = 1000.0\n\
                 keys = 10\n\
                 [[operator]]\nname = \"echo\"\nmodule = {:?}\nconfig = \"echo_after=300\"\n\
                 inputs = [{{ from = \"gen\", partition = \"forward\" }}]\n\
                 [[sink]]\nname = \"out\"\ntype = \"file\"\npath = {:?}\n\
                 inputs = [{{ from = \"echo\", partition = \"forward\" }}]\n",
                sandbox.checkpoint_dir(),
                weir_tests::guests::FLAKY,
                sandbox.out_dir(),
            )
        });
        assert_eq!(
            log.contains("chained: gen → echo → out (1 thread)"),
            top.is_empty(),
            "{log}"
        );
        let echoes = lines.iter().filter(|l| l.contains("fired")).count();
        assert_eq!(
            (lines.len(), echoes),
            (2001, 1),
            "every record and one echo ({top:?})"
        );
    }
}
