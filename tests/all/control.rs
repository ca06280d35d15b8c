//! The control endpoint of a running `weir run`, end to end: every endpoint over HTTP, every CLI
//! verb (`weir status|savepoint|stop|cancel`), savepoints restored with `--restore` to
//! exactly-once output, cancel retention, `/metrics` counters that grow, the token off loopback,
//! and `_control.json` appearing while the job runs and gone when it ends; and what the endpoint
//! refuses (no token, a foreign `Host` or `Origin`, a simple POST, a savepoint flood), recorded
//! as `misuse` rows of the reliability table.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use weir::control::client::Method;
use weir::control::{ControlClient, EndpointFile};

use crate::support::report;
use crate::support::{
    CLI_TIMEOUT, CliOutput, GeneratorSpec, JobFile, RawAnswer, Sandbox, Weir, checkpointed,
    committed_lines, complete_checkpoint_ids, generator_count, raw_exchange, run_cli, weir_bin,
    weir_command,
};

/// Runs `weir <args…>` (a verb) to its end, at most [`CLI_TIMEOUT`], with `env` set.
fn verb(sandbox: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> CliOutput {
    weir_command(sandbox, args, "", env)
}

/// The keyed count of generated records with a file sink; `count = None` runs until stopped.
fn job(sandbox: &Sandbox, count: Option<u64>, rate: f64, interval: &str) -> JobFile {
    let generator = GeneratorSpec {
        parallelism: 2,
        seed: 7,
        count,
        rate: Some(rate),
        keys: 200,
    };
    checkpointed(generator_count(sandbox, &generator), sandbox, interval, 2)
}

/// Starts `weir run` and waits until its `_control.json` is there and the job is RUNNING.
fn start(sandbox: &Sandbox, args: &[&str], env: &[(&str, &str)]) -> (Weir, EndpointFile) {
    let dir = sandbox.checkpoint_dir();
    let mut weir = Weir::run_with_env(&sandbox.job_path(), args, env, &sandbox.join("run.log"));
    let mut found = None;
    let running = weir.wait_until("the control endpoint", CLI_TIMEOUT, |_| {
        found = EndpointFile::read(&dir).ok();
        found.as_ref().is_some_and(|file| {
            let client = ControlClient::new(&file.address, Some(file.token.clone())).unwrap();
            client
                .get_json("/api/job")
                .is_ok_and(|job| job["status"] == "RUNNING")
        })
    });
    assert!(running, "the job ended before it ran:\n{}", weir.stderr());
    (weir, found.unwrap())
}

fn client(file: &EndpointFile) -> ControlClient {
    ControlClient::new(&file.address, Some(file.token.clone())).unwrap()
}

/// Waits until the job's endpoint counts `n` completed checkpoints; fails, showing the log, when
/// the job ends first.
fn wait_for_completed(weir: &mut Weir, client: &ControlClient, n: u64) {
    let reached = weir.wait_until("completed checkpoints", CLI_TIMEOUT, |_| {
        client
            .get_json("/api/checkpoints")
            .is_ok_and(|checkpoints| checkpoints["counts"]["completed"].as_u64() >= Some(n))
    });
    assert!(
        reached,
        "the job ended before {n} checkpoints completed:\n{}",
        weir.stderr()
    );
}

/// The value of the sample `name{labels}` in a text exposition, checking every line's form.
fn metric(text: &str, sample: &str) -> f64 {
    let mut found = None;
    for line in text.lines() {
        if line.starts_with('#') {
            assert!(
                line.starts_with("# HELP ") || line.starts_with("# TYPE "),
                "{line}"
            );
            continue;
        }
        let (name, value) = line.rsplit_once(' ').unwrap_or_else(|| panic!("{line}"));
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().unwrap_or_else(|_| panic!("not a number: {line}")),
        };
        if name == sample {
            found = Some(value);
        }
    }
    found.unwrap_or_else(|| panic!("no sample {sample} in:\n{text}"))
}

/// Checks the committed lines ("key\tcount") of a keyed count of `records` records: every key's
/// counts are 1, 2, … n, each once: nothing lost, nothing counted twice.
fn assert_exactly_once(lines: &[String], records: u64, context: &str) {
    let mut counts: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for line in lines {
        let (key, count) = line
            .split_once('\t')
            .unwrap_or_else(|| panic!("{context}: not a count line: {line:?}"));
        counts.entry(key).or_default().push(
            count
                .parse()
                .unwrap_or_else(|_| panic!("{context}: {line:?}")),
        );
    }
    for (key, mut seen) in counts {
        seen.sort_unstable();
        let expected: Vec<u64> = (1..=seen.len() as u64).collect();
        assert_eq!(seen, expected, "{context}: the counts of {key}");
    }
    assert_eq!(
        lines.len() as u64,
        records,
        "{context}: one line per record"
    );
}

#[test]
fn every_endpoint_answers_for_a_running_job_and_cancel_retains_checkpoints() {
    let sandbox = Sandbox::new("control-endpoints");
    job(&sandbox, None, 4_000.0, "100ms")
        .checkpoint("on_cancel", "retain")
        .write(&sandbox.job_path());
    let (mut weir, file) = start(&sandbox, &[], &[]);
    assert_eq!(file.pid, weir.pid());
    assert_eq!(file.job, "gencount");
    assert_eq!(file.token.len(), 32, "a token on loopback too");
    assert!(
        weir.stderr().contains(&format!(
            "control endpoint at {}/ (dashboard, /api, /metrics)",
            file.address
        )),
        "{}",
        weir.stderr()
    );
    let client = client(&file);
    wait_for_completed(&mut weir, &client, 2);

    let job = client.get_json("/api/job").unwrap();
    assert_eq!(job["name"], "gencount");
    assert_eq!(job["status"], "RUNNING");
    assert_eq!(job["pid"], weir.pid());
    let vertices: Vec<(&str, &str, u64)> = job["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap(),
                v["kind"].as_str().unwrap(),
                v["parallelism"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        vertices,
        [
            ("gen", "source", 2),
            ("count", "operator", 2),
            ("out", "sink", 2)
        ]
    );
    assert_eq!(job["vertices"][1]["tasks"].as_array().unwrap().len(), 2);
    assert!(
        job["vertices"][0]["records_out"].as_u64().unwrap() > 0,
        "{job}"
    );
    assert_eq!(
        job["edges"],
        serde_json::json!([
            {"from": "gen", "to": "count", "partitioning": "key-hash"},
            {"from": "count", "to": "out", "partitioning": "forward"}
        ])
    );
    let directory = job["checkpoint_directory"].as_str().unwrap().to_string();
    assert_eq!(Path::new(&directory), sandbox.checkpoint_dir());

    let config = client.get_json("/api/checkpoints/config").unwrap();
    assert_eq!(config["interval"], 100);
    assert_eq!(config["mode"], "exactly-once");
    assert_eq!(config["on_cancel"], "retain");
    assert_eq!(config["retained"], 2);
    assert_eq!(config["directory"], directory.as_str());

    let checkpoints = client.get_json("/api/checkpoints").unwrap();
    let latest = &checkpoints["latest"]["completed"];
    let id = latest["id"].as_u64().unwrap();
    assert_eq!(latest["status"], "COMPLETED");
    assert_eq!(
        latest["external_path"],
        format!("{directory}/chk-{id:010}").as_str()
    );
    assert!(checkpoints["history"][0]["id"].as_u64() >= Some(id));
    let details = client.get_json(&format!("/api/checkpoints/{id}")).unwrap();
    assert_eq!(details["id"], id);
    let tasks = details["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 6, "every task acknowledged: {details}");
    for task in tasks {
        for field in [
            "sync_duration",
            "async_duration",
            "alignment_duration",
            "state_size",
        ] {
            assert!(task[field].is_u64(), "{field} of {task}");
        }
    }
    let missing = client.get_json("/api/checkpoints/999999").unwrap_err();
    assert!(
        missing
            .to_string()
            .starts_with("checkpoint 999999 is not in the history"),
        "{missing}"
    );

    let timeout = Some(Duration::from_secs(10));
    for (path, content_type) in [
        ("/", "text/html; charset=utf-8"),
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
    ] {
        let answer = client
            .request(Method::GET, path, timeout)
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(answer.status, 200, "{path}");
        assert_eq!(answer.content_type.as_deref(), Some(content_type), "{path}");
        assert!(!answer.body.is_empty(), "{path}");
    }

    let scrape = || {
        let answer = client.request(Method::GET, "/metrics", timeout).unwrap();
        assert_eq!(answer.status, 200);
        assert_eq!(
            answer.content_type.as_deref(),
            Some("text/plain; version=0.0.4; charset=utf-8")
        );
        answer.body
    };
    let first = scrape();
    let records = "weir_task_records_out_total{vertex=\"gen\",subtask=\"0\"}";
    let guest_calls = "weir_task_guest_calls_total{vertex=\"count\",subtask=\"1\"}";
    let completed = "weir_checkpoints_completed_total";
    assert_eq!(metric(&first, "weir_job_status{status=\"RUNNING\"}"), 1.0);
    assert!(metric(&first, guest_calls) > 0.0, "{first}");
    assert!(metric(&first, completed) >= 2.0);
    assert!(metric(&first, "weir_checkpoint_duration_seconds_count") >= 2.0);
    let before = (metric(&first, records), metric(&first, completed));
    let grown = weir.wait_until("the counters to grow", CLI_TIMEOUT, |_| {
        let next = scrape();
        metric(&next, records) > before.0 && metric(&next, completed) > before.1
    });
    assert!(grown, "{}", weir.stderr());

    let status = verb(
        &sandbox,
        &["status", sandbox.checkpoint_dir().to_str().unwrap()],
        &[],
    );
    status.assert_code(0, "weir status DIR");
    for expected in [
        "job          gencount (pid ",
        "status       RUNNING for ",
        "latest completed  checkpoint ",
    ] {
        assert!(
            status.stdout.contains(expected),
            "{expected:?} in:\n{}",
            status.stdout
        );
    }
    assert!(
        status
            .stdout
            .lines()
            .any(|l| l.starts_with("count   operator")),
        "{}",
        status.stdout
    );
    let status = verb(
        &sandbox,
        &["status", sandbox.job_path().to_str().unwrap(), "--json"],
        &[],
    );
    status.assert_code(0, "weir status JOB_FILE --json");
    let both: Value = serde_json::from_str(&status.stdout).unwrap();
    assert_eq!(both["job"]["name"], "gencount");
    assert!(both["checkpoints"]["counts"]["completed"].as_u64() >= Some(2));
    let status = verb(
        &sandbox,
        &["status", "--address", &file.address, "--token", &file.token],
        &[],
    );
    status.assert_code(0, "weir status --address --token");

    let cancel = verb(
        &sandbox,
        &["cancel", sandbox.checkpoint_dir().to_str().unwrap()],
        &[],
    );
    cancel.assert_code(0, "weir cancel");
    cancel.assert_stderr_contains("job `gencount` is cancelling");
    let ended = weir.wait(CLI_TIMEOUT);
    ended.assert_code(130, "a job cancelled through its endpoint");
    assert!(
        !EndpointFile::path_in(&sandbox.checkpoint_dir()).exists(),
        "_control.json is removed when the job ends"
    );
    assert!(
        !complete_checkpoint_ids(&sandbox.checkpoint_dir()).is_empty(),
        "on_cancel = \"retain\" keeps the completed checkpoints"
    );
    let gone = verb(
        &sandbox,
        &["status", sandbox.checkpoint_dir().to_str().unwrap()],
        &[],
    );
    gone.assert_code(3, "weir status after the job ended");
}

#[test]
fn a_running_jobs_watermarks_show_in_the_api_the_metrics_and_weir_status() {
    let sandbox = Sandbox::new("control-event-time");
    // With a watermark table the generator's subtasks emit watermarks while they run; its
    // timestamps are its record indices, so no wall-clock time.
    let text = job(&sandbox, None, 4_000.0, "200ms").to_toml().replacen(
        "type = \"generator\"\n",
        "type = \"generator\"\nwatermark = { interval = \"50ms\" }\n",
        1,
    );
    assert!(text.contains("watermark = "), "{text}");
    fs::write(sandbox.job_path(), text).unwrap();
    let (mut weir, file) = start(&sandbox, &[], &[]);
    let client = client(&file);
    let mut job = Value::Null;
    let reached = weir.wait_until("a watermark at every vertex", CLI_TIMEOUT, |_| {
        job = client.get_json("/api/job").unwrap_or(Value::Null);
        job["vertices"].as_array().is_some_and(|vertices| {
            vertices.iter().all(|v| {
                v["tasks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|t| t["watermark"].as_i64() > Some(0))
            })
        })
    });
    assert!(reached, "no watermark everywhere: {job}\n{}", weir.stderr());

    let now = job["now"].as_i64().unwrap();
    for v in job["vertices"].as_array().unwrap() {
        let slowest = v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["watermark"].as_i64().unwrap())
            .min();
        assert_eq!(
            v["watermark"].as_i64(),
            slowest,
            "its slowest subtask's: {v}"
        );
        assert_eq!(v["watermark_lag"].as_i64(), slowest.map(|w| now - w), "{v}");
        for field in ["records_late", "records_unwired", "pending_timers"] {
            assert!(v[field].is_u64(), "{field} of {v}");
            assert!(v["tasks"][0][field].is_u64(), "{field} of {v}");
        }
    }

    let metrics = client
        .request(Method::GET, "/metrics", Some(Duration::from_secs(10)))
        .unwrap()
        .body;
    for subtask in ["0", "1"] {
        for vertex in ["gen", "count", "out"] {
            let labels = format!("{{vertex=\"{vertex}\",subtask=\"{subtask}\"}}");
            let watermark = metric(
                &metrics,
                &format!("weir_task_watermark_milliseconds{labels}"),
            );
            assert!(watermark > 0.0 && watermark.is_finite(), "{metrics}");
            metric(
                &metrics,
                &format!("weir_task_watermark_lag_milliseconds{labels}"),
            );
            metric(&metrics, &format!("weir_task_records_late_total{labels}"));
            metric(
                &metrics,
                &format!("weir_task_records_unwired_total{labels}"),
            );
            metric(&metrics, &format!("weir_task_pending_timers{labels}"));
        }
    }

    let status = verb(
        &sandbox,
        &["status", sandbox.checkpoint_dir().to_str().unwrap()],
        &[],
    );
    status.assert_code(0, "weir status of a job with watermarks");
    let table = status.stdout_table("vertex  watermark");
    for (row, vertex) in table[1..].iter().zip(["gen ", "count ", "out "]) {
        // The generator's watermarks are no wall-clock times: a number, no lag.
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert!(
            row.starts_with(vertex) && cells[1].parse::<i64>().is_ok() && cells[2] == "-",
            "{row:?} in:\n{}",
            status.stdout
        );
    }

    weir.terminate();
    weir.wait(CLI_TIMEOUT);
}

#[test]
fn cancel_with_on_cancel_delete_removes_completed_checkpoints() {
    let sandbox = Sandbox::new("control-cancel-delete");
    job(&sandbox, None, 4_000.0, "100ms")
        .checkpoint("on_cancel", "delete")
        .write(&sandbox.job_path());
    let (mut weir, file) = start(&sandbox, &[], &[]);
    wait_for_completed(&mut weir, &client(&file), 1);
    assert!(!complete_checkpoint_ids(&sandbox.checkpoint_dir()).is_empty());
    let cancel = verb(
        &sandbox,
        &["cancel", sandbox.job_path().to_str().unwrap()],
        &[],
    );
    cancel.assert_code(0, "weir cancel JOB_FILE");
    weir.wait(CLI_TIMEOUT).assert_code(130, "the cancelled job");
    assert_eq!(
        complete_checkpoint_ids(&sandbox.checkpoint_dir()),
        Vec::<u64>::new(),
        "on_cancel = \"delete\" removes the completed checkpoints"
    );
    assert!(!EndpointFile::path_in(&sandbox.checkpoint_dir()).exists());
}

#[test]
fn a_savepoint_taken_with_weir_savepoint_restores_to_exactly_once_output() {
    const RECORDS: u64 = 30_000;
    let sandbox = Sandbox::new("control-savepoint");
    // No periodic checkpoint: nothing commits between the savepoint and the cancel, so the
    // restored run's output is the whole output, each record once.
    job(&sandbox, Some(RECORDS), 10_000.0, "off").write(&sandbox.job_path());
    let (mut weir, file) = start(&sandbox, &[], &[]);
    let dir = sandbox.checkpoint_dir();
    let taken = verb(&sandbox, &["savepoint", dir.to_str().unwrap()], &[]);
    taken.assert_code(0, "weir savepoint");
    let savepoint = PathBuf::from(taken.stdout.trim());
    assert!(
        savepoint.join("_metadata").is_file(),
        "{} is not a complete savepoint",
        savepoint.display()
    );
    assert!(savepoint.starts_with(&dir), "{}", savepoint.display());
    taken.assert_stderr_contains("restore with `weir run JOB --restore");
    let checkpoints = client(&file).get_json("/api/checkpoints").unwrap();
    assert_eq!(
        checkpoints["latest"]["savepoint"]["external_path"],
        savepoint.to_str().unwrap()
    );
    assert!(
        weir.try_exit().is_none(),
        "the job goes on after a savepoint:\n{}",
        weir.stderr()
    );
    verb(&sandbox, &["cancel", dir.to_str().unwrap()], &[]).assert_code(0, "weir cancel");
    weir.wait(CLI_TIMEOUT).assert_code(130, "the cancelled job");

    restores_exactly_once(
        &sandbox,
        &savepoint,
        RECORDS,
        "a savepoint taken with `weir savepoint`, then restored",
    );
}

/// Runs the job of `sandbox` from `savepoint` to its end; fails, for `context`, unless it
/// restored that savepoint and the committed output holds each of its `records` records once.
#[track_caller]
fn restores_exactly_once(sandbox: &Sandbox, savepoint: &Path, records: u64, context: &str) {
    let restore = savepoint.to_str().unwrap();
    let ended = run_cli(
        &sandbox.job_path(),
        &["--restore", restore],
        &sandbox.join("restore.log"),
    );
    ended.assert_code(0, context);
    ended.assert_stderr_contains(&format!("restoring from {restore}"));
    assert_exactly_once(&committed_lines(&sandbox.out_dir()), records, context);
}

#[test]
fn weir_stop_leaves_a_restorable_savepoint_and_the_job_exits_zero() {
    const RECORDS: u64 = 30_000;
    let sandbox = Sandbox::new("control-stop");
    job(&sandbox, Some(RECORDS), 10_000.0, "100ms").write(&sandbox.job_path());
    let (mut weir, file) = start(&sandbox, &[], &[]);
    wait_for_completed(&mut weir, &client(&file), 1);
    let stop = verb(
        &sandbox,
        &["stop", sandbox.checkpoint_dir().to_str().unwrap()],
        &[],
    );
    stop.assert_code(0, "weir stop");
    let savepoint = PathBuf::from(stop.stdout.trim());
    assert!(
        savepoint.join("_metadata").is_file(),
        "{}",
        savepoint.display()
    );
    let ended = weir.wait(CLI_TIMEOUT);
    ended.assert_code(0, "a job stopped with a savepoint");
    assert!(
        ended.stderr.lines().any(|l| l.trim_start()
            == format!(
                "savepoint:     {} (restore with --restore {0})",
                savepoint.display()
            )),
        "the summary names the savepoint:\n{}",
        ended.stderr
    );
    assert!(!EndpointFile::path_in(&sandbox.checkpoint_dir()).exists());
    let committed = committed_lines(&sandbox.out_dir()).len() as u64;
    assert!(
        0 < committed && committed < RECORDS,
        "the stop should come mid-job: {committed} of {RECORDS} lines committed"
    );

    restores_exactly_once(
        &sandbox,
        &savepoint,
        RECORDS,
        "a stop with `weir stop`, then a restore",
    );
}

#[test]
fn off_loopback_requests_need_the_token_the_job_writes_to_control_json() {
    let sandbox = Sandbox::new("control-token");
    job(&sandbox, None, 2_000.0, "200ms").write(&sandbox.job_path());
    let (weir, file) = start(&sandbox, &["--control", "0.0.0.0:0"], &[]);
    let token = file.token.clone();
    assert_eq!(token.len(), 32, "{token}");
    assert!(token.chars().all(|c| c.is_ascii_hexdigit()), "{token}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(EndpointFile::path_in(&sandbox.checkpoint_dir()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "only the owner may read the token");
    }
    assert!(
        !weir.stderr().contains(&token),
        "the token is not logged:\n{}",
        weir.stderr()
    );

    let timeout = Some(Duration::from_secs(10));
    let anonymous = ControlClient::new(&file.address, None).unwrap();
    for path in ["/api/job", "/api/checkpoints", "/metrics"] {
        let answer = anonymous.request(Method::GET, path, timeout).unwrap();
        assert_eq!(answer.status, 401, "{path} without the token");
        let error: Value = serde_json::from_str(&answer.body).unwrap();
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .starts_with("this endpoint requires the job's token"),
            "{}",
            answer.body
        );
    }
    let answer = anonymous
        .request(Method::GET, &format!("/api/job?token={token}"), timeout)
        .unwrap();
    assert_eq!(answer.status, 401, "the token in the URL is not taken");
    let wrong = ControlClient::new(&file.address, Some("0".repeat(32))).unwrap();
    assert!(
        wrong
            .get_json("/api/job")
            .unwrap_err()
            .to_string()
            .starts_with("wrong token")
    );
    assert_eq!(
        client(&file).get_json("/api/job").unwrap()["status"],
        "RUNNING"
    );

    let dir = sandbox.checkpoint_dir();
    let status = verb(&sandbox, &["status", dir.to_str().unwrap()], &[]);
    status.assert_code(0, "weir status reads the token from _control.json");
    let status = verb(&sandbox, &["status", "--address", &file.address], &[]);
    status.assert_code(4, "weir status --address without a token");
    status.assert_stderr_contains("requires the job's token");
    let status = verb(
        &sandbox,
        &["status", "--address", &file.address],
        &[("WEIR_CONTROL_TOKEN", &token)],
    );
    status.assert_code(0, "weir status --address with WEIR_CONTROL_TOKEN");

    verb(&sandbox, &["cancel", dir.to_str().unwrap()], &[]).assert_code(0, "weir cancel");
    weir.wait(CLI_TIMEOUT).assert_code(130, "the cancelled job");
    assert!(!EndpointFile::path_in(&dir).exists());
}

#[test]
fn verbs_say_when_no_job_runs_or_its_control_json_is_stale() {
    let sandbox = Sandbox::new("control-absent");
    let dir = sandbox.checkpoint_dir();
    fs::create_dir_all(&dir).unwrap();
    let dir_arg = dir.to_str().unwrap();

    let absent = verb(&sandbox, &["status", dir_arg], &[]);
    absent.assert_code(3, "no _control.json");
    absent.assert_stderr_contains(&format!(
        "no running job found in {dir_arg}: is it running? it writes {dir_arg}/_control.json \
             while it runs"
    ));

    // A file left by a process that is gone (killed with SIGKILL, say).
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    // Port 1 (tcpmux) has no listener here, and no job is ever given it: connections are refused.
    let closed_port = 1;
    let stale = EndpointFile {
        address: format!("http://127.0.0.1:{closed_port}"),
        pid: dead_pid,
        job: "gone".into(),
        started: 0,
        token: "0".repeat(32),
    };
    stale.write(&dir).unwrap();
    for name in ["status", "savepoint", "stop", "cancel"] {
        let answer = verb(&sandbox, &[name, dir_arg], &[]);
        answer.assert_code(3, name);
        assert!(
            answer.stderr.contains("_control.json is stale")
                && answer.stderr.contains(&format!("process {dead_pid}")),
            "{name}: {}",
            answer.stderr
        );
    }
    // A live process (this test's) that serves nothing there.
    EndpointFile {
        pid: std::process::id(),
        ..stale.clone()
    }
    .write(&dir)
    .unwrap();
    let refused = verb(&sandbox, &["status", dir_arg], &[]);
    refused.assert_code(3, "nothing answers");
    refused.assert_stderr_contains("cannot connect to the control endpoint");
    refused.assert_stderr_contains("is stale");
    let refused = verb(&sandbox, &["savepoint", "--address", &stale.address], &[]);
    refused.assert_code(3, "savepoint --address of nothing");

    let nowhere = verb(
        &sandbox,
        &["status", sandbox.join("nowhere").to_str().unwrap()],
        &[],
    );
    nowhere.assert_code(3, "no such directory");
    let bad = verb(&sandbox, &["status", "--address", "example.com:80"], &[]);
    bad.assert_code(2, "not an address");
    verb(&sandbox, &["status"], &[]).assert_code(2, "no target");
}

#[test]
fn no_control_serves_nothing_and_writes_no_control_json() {
    let sandbox = Sandbox::new("control-off");
    job(&sandbox, Some(2_000), 20_000.0, "100ms").write(&sandbox.job_path());
    let ended = run_cli(
        &sandbox.job_path(),
        &["--no-control"],
        &sandbox.join("run.log"),
    );
    ended.assert_code(0, "a job without a control endpoint");
    ended.assert_stderr_contains("control endpoint off");
    ended.assert_stderr_lacks("control endpoint at");
    assert!(!EndpointFile::path_in(&sandbox.checkpoint_dir()).exists());
}

// ---------------------------------------------------------------------------------------------
// Misuse: what the endpoint refuses (docs/CONTROL.md, "Threat model")

/// The token in the job's `_control.json`, read as JSON (whatever the file's Rust type).
fn token_in(dir: &Path) -> Option<String> {
    let text = fs::read_to_string(EndpointFile::path_in(dir)).unwrap();
    let json: Value = serde_json::from_str(&text).unwrap();
    json["token"].as_str().map(str::to_string)
}

/// Adds to `broken` unless `answer` is `status` with an error mentioning `says`.
fn expect(broken: &mut Vec<String>, what: &str, answer: &RawAnswer, status: u16, says: &str) {
    let error = answer.error();
    if answer.status != status || !error.contains(says) {
        broken.push(format!(
            "{what}: expected {status} saying {says:?}, got {}: {error}",
            answer.status
        ));
    }
}

#[test]
fn the_endpoint_refuses_a_missing_token_a_foreign_host_or_origin_and_simple_posts() {
    let sandbox = Sandbox::new("control-misuse");
    job(&sandbox, None, 2_000.0, "200ms").write(&sandbox.job_path());
    let dir = sandbox.checkpoint_dir();
    let (weir, file) = start(&sandbox, &[], &[]);
    let address = file.address.clone();
    let host = address.trim_start_matches("http://").to_string();
    let port = host.rsplit_once(':').unwrap().1.to_string();
    let token = token_in(&dir);
    let bearer = format!("Bearer {}", token.clone().unwrap_or_default());
    // A request with `Host: host`, the token as a bearer, then `more`.
    let with_token = |method: &str, path: &str, host: &str, more: &[(&str, &str)], body: &str| {
        let mut headers = vec![("Host", host), ("Authorization", bearer.as_str())];
        headers.extend_from_slice(more);
        raw_exchange(&address, method, path, &headers, body)
    };
    // Each rule checked, every broken one listed (not just the first).
    let mut broken: Vec<String> = Vec::new();

    // The token file: on loopback too, readable by the job's owner only.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(EndpointFile::path_in(&dir))
            .unwrap()
            .permissions()
            .mode();
        if token.is_none() || mode & 0o777 != 0o600 {
            broken.push(format!(
                "_control.json on loopback: expected a token, mode 0600; token {}, mode {:o}",
                if token.is_some() { "present" } else { "absent" },
                mode & 0o777
            ));
        }
    }

    // No token, on loopback: 401, on every API path, /metrics and the actions.
    let no_token = [
        ("GET", "/api/job"),
        ("GET", "/api/checkpoints"),
        ("GET", "/metrics"),
        ("POST", "/api/savepoints"),
        ("POST", "/api/cancel"),
    ];
    for (method, path) in no_token {
        let answer = raw_exchange(
            &address,
            method,
            path,
            &[("Host", &host), ("X-Weir-Request", "1")],
            "",
        );
        expect(
            &mut broken,
            &format!("{method} {path} without a token"),
            &answer,
            401,
            "requires the job's token",
        );
    }
    // A URL token is not taken: it leaks into browser history and Referer headers.
    let answer = raw_exchange(
        &address,
        "GET",
        &format!("/api/job?token={}", token.clone().unwrap_or_default()),
        &[("Host", &host)],
        "",
    );
    expect(
        &mut broken,
        "the token in the URL",
        &answer,
        401,
        "requires the job's token",
    );

    // DNS rebinding: a Host other than the bound address or localhost, even with the token.
    for wrong in [
        "evil.example.com".to_string(),
        format!("evil.example.com:{port}"),
        "127.0.0.1:1".to_string(),
    ] {
        let answer = with_token("GET", "/api/job", &wrong, &[], "");
        expect(&mut broken, &format!("Host: {wrong}"), &answer, 421, "Host");
    }
    let answer = raw_exchange(&address, "GET", "/", &[("Host", "evil.example.com")], "");
    expect(
        &mut broken,
        "the dashboard under Host: evil.example.com",
        &answer,
        421,
        "Host",
    );
    for good in [host.clone(), format!("localhost:{port}")] {
        let answer = with_token("GET", "/api/job", &good, &[], "");
        if answer.status != 200 {
            broken.push(format!("Host: {good} with the token: {}", answer.body));
        }
    }

    // CSRF: a foreign Origin, even with the token and the custom header.
    let origin = [
        ("Origin", "http://evil.example.com"),
        ("X-Weir-Request", "1"),
    ];
    let answer = with_token("POST", "/api/cancel", &host, &origin, "");
    expect(
        &mut broken,
        "POST /api/cancel from Origin: http://evil.example.com",
        &answer,
        403,
        "Origin",
    );
    // A form or a `text/plain` fetch (no preflight): refused without the custom header.
    for content_type in ["text/plain", "application/x-www-form-urlencoded"] {
        let content = [("Content-Type", content_type)];
        let answer = with_token("POST", "/api/cancel", &host, &content, "x");
        expect(
            &mut broken,
            &format!("POST /api/cancel as {content_type}"),
            &answer,
            403,
            "X-Weir-Request",
        );
    }
    let job = client(&file).get_json("/api/job").unwrap();
    if job["status"] != "RUNNING" {
        broken.push(format!(
            "the job is {} after the refused cancels",
            job["status"]
        ));
    }

    // What the CLI verbs and the dashboard send still works.
    let status = verb(&sandbox, &["status", dir.to_str().unwrap()], &[]);
    if status.code != Some(0) {
        broken.push(format!("weir status with _control.json: {}", status.stderr));
    }
    let json = [
        ("Origin", address.as_str()),
        ("Content-Type", "application/json"),
    ];
    let answer = with_token("POST", "/api/savepoints", &host, &json, "");
    if answer.status != 200 {
        broken.push(format!("a same-origin JSON savepoint: {}", answer.body));
    }
    assert!(
        broken.is_empty(),
        "the endpoint let in what it must refuse:\n{}",
        broken.join("\n")
    );
    assert!(
        !weir.stderr().contains(token.as_deref().unwrap()),
        "the token is not logged"
    );

    verb(&sandbox, &["cancel", dir.to_str().unwrap()], &[]).assert_code(0, "weir cancel");
    weir.wait(CLI_TIMEOUT).assert_code(130, "the cancelled job");
    for (scenario, rounds, faults, result) in [
        (
            "request without the token on loopback",
            no_token.len() + 1,
            "GET /api/job, /api/checkpoints, /metrics, POST /api/savepoints, /api/cancel with \
             no Authorization; ?token= in the URL",
            "401 with a JSON error naming the token in _control.json (mode 0600)",
        ),
        (
            "wrong Host (DNS rebinding)",
            4,
            "Host: evil.example.com, evil.example.com:PORT, 127.0.0.1:1 (API with the token), \
             evil.example.com (dashboard)",
            "421 with a JSON error naming the Host rule; 127.0.0.1:PORT and localhost:PORT let in",
        ),
        (
            "foreign Origin (CSRF)",
            1,
            "POST /api/cancel with the token and Origin: http://evil.example.com",
            "403 naming the Origin rule; the job still RUNNING",
        ),
        (
            "simple-content-type POST (CSRF)",
            2,
            "POST /api/cancel with the token as text/plain and as a form, no X-Weir-Request",
            "403 naming X-Weir-Request / application/json; the job still RUNNING",
        ),
    ] {
        report::record(&report::Row {
            area: "misuse",
            scenario,
            rounds: rounds as u64,
            faults,
            result,
        });
    }
}

#[test]
fn a_savepoint_flood_over_the_api_is_refused_with_429_after_the_bound_and_so_are_rescales() {
    const ATTEMPTS: usize = 30;
    let sandbox = Sandbox::new("control-flood");
    job(&sandbox, None, 2_000.0, "1s").write(&sandbox.job_path());
    let dir = sandbox.checkpoint_dir();
    let (weir, file) = start(&sandbox, &[], &[]);
    let host = file.address.trim_start_matches("http://").to_string();
    let bearer = format!("Bearer {}", token_in(&dir).unwrap_or_default());
    let headers = [
        ("Host", host.as_str()),
        ("Authorization", bearer.as_str()),
        ("X-Weir-Request", "1"),
    ];
    let started = Instant::now();
    let mut taken = 0;
    let mut refused = None;
    for _ in 0..ATTEMPTS {
        let answer = raw_exchange(&file.address, "POST", "/api/savepoints", &headers, "");
        match answer.status {
            200 => taken += 1,
            429 => {
                refused = Some(answer);
                break;
            }
            other => panic!("savepoint {}: {other} {}", taken + 1, answer.body),
        }
    }
    let elapsed = started.elapsed();
    let refused = refused.unwrap_or_else(|| {
        panic!("{ATTEMPTS} savepoints in a row in {elapsed:?} were all taken: no bound")
    });
    assert_eq!(taken, 10, "savepoints taken before the first 429");
    let error = refused.error();
    assert!(error.contains("retry in"), "{error}");
    let retry_after: u64 = refused
        .header("Retry-After")
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a 429 without Retry-After:\n{}", refused.head));
    assert!(
        (1..=60).contains(&retry_after),
        "Retry-After: {retry_after}"
    );
    // A rescale takes a savepoint too: it falls under the same bound.
    let rescale = raw_exchange(
        &file.address,
        "POST",
        "/api/rescale?count=3&out=3",
        &headers,
        "",
    );
    assert_eq!(
        rescale.status, 429,
        "a rescale past the savepoint bound: {}",
        rescale.body
    );
    let kept = fs::read_dir(dir.join("savepoints"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("sp-")
        })
        .count();
    assert_eq!(kept, taken, "savepoint directories on disk");
    // The refusal holds up nothing else: the job runs and stops with a savepoint.
    let stop = verb(&sandbox, &["stop", dir.to_str().unwrap()], &[]);
    stop.assert_code(0, "weir stop right after the flood");
    weir.wait(CLI_TIMEOUT).assert_code(0, "the stopped job");
    report::record(&report::Row {
        area: "misuse",
        scenario: "savepoint flood over the API",
        rounds: (taken + 1) as u64,
        faults: "POST /api/savepoints back to back with the token, then POST /api/rescale",
        result: &format!(
            "{taken} taken in {:.1} s, then 429 with Retry-After: {retry_after} and a message \
             saying when to retry, for a rescale too; `weir stop` still works",
            elapsed.as_secs_f64()
        ),
    });
}

/// Another local user — `nobody`, when the tests run as root — reaches the port but cannot read
/// the token in `_control.json`, and its requests without the token are refused: the job goes on.
#[test]
fn another_local_user_can_neither_read_the_token_nor_act_without_it() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    use std::os::unix::process::CommandExt as _;
    const NOBODY: u32 = 65534;
    let sandbox = Sandbox::new("control-other-user");
    let probe = sandbox.join("whoami");
    fs::write(&probe, b"").unwrap();
    if fs::metadata(&probe).unwrap().uid() != 0 {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root: this test needs a second user"
        );
        eprintln!("SKIPPED: not root, so there is no second user to run weir as");
        return;
    }
    job(&sandbox, None, 2_000.0, "200ms").write(&sandbox.job_path());
    // Other users may enter the sandbox (the job's files are theirs to see; the token is not).
    fs::set_permissions(sandbox.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let dir = sandbox.checkpoint_dir();
    let (weir, file) = start(&sandbox, &[], &[]);
    let as_nobody = |args: &[&str]| {
        Command::new(weir_bin())
            .args(args)
            .env_remove("WEIR_CONTROL_TOKEN")
            .stdin(Stdio::null())
            .uid(NOBODY)
            .gid(NOBODY)
            .output()
            .expect("cannot run weir as nobody")
    };
    let dir_arg = dir.to_str().unwrap();
    let status = as_nobody(&["status", dir_arg]);
    let status_err = String::from_utf8_lossy(&status.stderr);
    assert!(
        !status.status.success(),
        "nobody read the job's status: {status_err}"
    );
    assert!(
        status_err.contains("_control.json")
            && status_err.contains("only the user who started the job"),
        "nobody should be told it cannot read _control.json: {status_err}"
    );
    let mut refused = 1;
    for verb_name in ["cancel", "savepoint", "status"] {
        let out = as_nobody(&[verb_name, "--address", &file.address]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(4),
            "`weir {verb_name}` as nobody: {err}"
        );
        assert!(err.contains("token"), "`weir {verb_name}` as nobody: {err}");
        refused += 1;
    }
    let job = client(&file).get_json("/api/job").unwrap();
    assert_eq!(job["status"], "RUNNING", "the job after nobody's attempts");
    verb(&sandbox, &["cancel", dir_arg], &[]).assert_code(0, "weir cancel by the owner");
    weir.wait(CLI_TIMEOUT).assert_code(130, "the cancelled job");
    report::record(&report::Row {
        area: "misuse",
        scenario: "another local user (nobody) against root's running job",
        rounds: refused,
        faults: "`weir status DIR`, then `weir cancel/savepoint/status --address URL` without \
                 the token, as uid 65534",
        result: "_control.json (0600) unreadable, named; every request refused (401, exit 4); \
                 the job still RUNNING",
    });
}
