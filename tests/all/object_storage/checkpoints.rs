//! Checkpoints on object storage (`[checkpoint] directory = "s3://bucket/prefix"`,
//! docs/CHECKPOINTS.md §8) against a real S3 server (moto, `mod.rs`), with the guarantees of
//! local files: a job killed with SIGKILL and restarted with `--restore latest` commits exactly
//! the output of an undisturbed run; `weir checkpoints`, `inspect` and `verify` read the
//! bucket; and faults between the job and the store — throttling, an upload cut off mid-way, an
//! answer lost after the write took effect, requests slower than the checkpoint timeout,
//! failures that outlast the retries — are retried, or fail the checkpoint they hit and nothing
//! else.
//!
//! A zombie — the first run of a job frozen while its replacement starts on the same prefix,
//! then thawed — completes no checkpoint and commits no output (with a Kafka sink): the
//! generations of checkpoint/generation.rs.
//!
//! Faults come from a fault proxy between `weir` and the server (`weir_test_servers::
//! fault_proxy`), named in the job file by `storage_endpoint`.

use std::time::Duration;

use weir_test_servers::fault_proxy::{Action, Fault, FaultProxy};

use super::{S3, s3_or_skip};
use crate::kafka;
use crate::kafka::exactly_once::{End, append, assert_exact_counts, chunk, job_text};
use crate::support::{
    CLI_TIMEOUT, GeneratorSpec, JobFile, Sandbox, Weir, assert_committed_output,
    assert_same_output, committed_lines, generator_count, reference_output, weir_command,
};

/// The keyed count of generated records, checkpointed every 100 ms into `directory` (a
/// local path or an `s3://` URL): `records` records of 500 keys at `rate` a second.
fn counting(sandbox: &Sandbox, directory: &str, records: u64, rate: Option<f64>) -> JobFile {
    let generator = GeneratorSpec {
        parallelism: 1,
        seed: 7,
        count: Some(records),
        rate,
        keys: 500,
    };
    generator_count(sandbox, &generator)
        .checkpoint("interval", "100ms")
        .checkpoint("directory", directory)
        .checkpoint("retained", 2u32)
}

/// The committed output of [`counting`] run undisturbed with local checkpoints.
fn reference(records: u64) -> Vec<String> {
    let sandbox = Sandbox::new("s3-reference");
    let dir = sandbox.checkpoint_dir();
    counting(&sandbox, dir.to_str().unwrap(), records, None).write(&sandbox.job_path());
    reference_output(&sandbox, CLI_TIMEOUT)
}

/// `env` as the `(&str, &str)` pairs the runners take.
fn pairs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// The ids of the complete checkpoints under `prefix` of `bucket`: those with a `_metadata`.
fn complete_ids(s3: &S3, bucket: &str, prefix: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = s3
        .list(bucket, prefix)
        .iter()
        .filter_map(|(key, _)| {
            let dir = key.strip_suffix("/_metadata")?;
            dir.rsplit('/').next()?.strip_prefix("chk-")?.parse().ok()
        })
        .collect();
    ids.sort_unstable();
    ids
}

/// Runs the job of `sandbox` to its end with `--restore latest` and `env`: it must restore a
/// checkpoint under `url` and commit `expected`, nothing in progress left.
fn restore_to_the_end(
    sandbox: &Sandbox,
    url: &str,
    env: &[(&str, &str)],
    expected: &[String],
    context: &str,
) {
    let ended = Weir::run_with_env(
        &sandbox.job_path(),
        &["--restore", "latest"],
        env,
        &sandbox.join("final.log"),
    )
    .wait(CLI_TIMEOUT);
    ended.assert_code(0, context);
    ended.assert_stderr_contains(&format!("restoring from {url}/chk-"));
    assert_committed_output(&sandbox.out_dir(), expected, context);
}

/// `weir checkpoints verify URL` finds every checkpoint under `url` sound.
fn verifies(sandbox: &Sandbox, url: &str, env: &[(&str, &str)]) {
    let verified = weir_command(sandbox, &["checkpoints", "verify", url], "", env);
    verified.assert_code(0, "weir checkpoints verify");
    assert!(
        verified.stdout.contains("0 problems"),
        "{}",
        verified.stdout
    );
}

#[test]
fn checkpoints_on_s3_restore_after_kills_to_exactly_the_undisturbed_output() {
    let Some(s3) = s3_or_skip("checkpoints_on_s3_restore_after_kills") else {
        return;
    };
    const RECORDS: u64 = 400_000;
    let expected = reference(RECORDS);
    let bucket = s3.bucket("kills");
    let url = format!("s3://{bucket}/jobs/gencount");
    let sandbox = Sandbox::new("s3-kills");
    // About four seconds of records, so that kills land in a running job.
    counting(&sandbox, &url, RECORDS, Some(100_000.0)).write(&sandbox.job_path());
    let env = s3.env();
    let env = pairs(&env);
    let mut kills = 0;
    for round in 0..3 {
        let before = complete_ids(s3, &bucket, "jobs/gencount").last().copied();
        let log = sandbox.join(&format!("round-{round}.log"));
        let mut weir =
            Weir::run_with_env(&sandbox.job_path(), &["--restore", "latest"], &env, &log);
        let checkpointed = weir.wait_until("a checkpoint on S3", CLI_TIMEOUT, |_| {
            complete_ids(s3, &bucket, "jobs/gencount").last().copied() > before
        });
        let ended = weir.kill();
        if checkpointed && ended.code().is_none() {
            kills += 1;
        }
    }
    assert!(
        kills >= 2,
        "only {kills} of 3 kills landed after a checkpoint"
    );
    restore_to_the_end(
        &sandbox,
        &url,
        &env,
        &expected,
        "after 3 kills with checkpoints on S3",
    );

    // The CLI reads the bucket as it reads a directory, by the job file or by the URL.
    let job = sandbox.job_path();
    let listed = weir_command(&sandbox, &["checkpoints", job.to_str().unwrap()], "", &env);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    assert!(
        listed.stdout.contains(&format!("checkpoints in {url}"))
            && listed.stdout.contains("latest restorable: checkpoint"),
        "{}",
        listed.stdout
    );
    verifies(&sandbox, &url, &env);
    let latest = complete_ids(s3, &bucket, "jobs/gencount");
    let one = format!("{url}/chk-{:010}", latest.last().unwrap());
    let inspected = weir_command(&sandbox, &["checkpoints", "inspect", &one], "", &env);
    assert_eq!(inspected.code, Some(0), "{}", inspected.stderr);
    assert!(
        inspected.stdout.contains("complete, every file verified"),
        "{}",
        inspected.stdout
    );
    // What a mistyped prefix gets: an error, not an empty history.
    let wrong = format!("s3://{bucket}/jobs/nothing-here");
    let missing = weir_command(&sandbox, &["checkpoints", &wrong], "", &env);
    assert_eq!(missing.code, Some(2), "{}", missing.stderr);
    assert!(
        missing.stderr.contains("is not a checkpoint directory"),
        "{}",
        missing.stderr
    );
}

/// A job whose checkpoints reach the bucket through `proxy`, retrying each request at most
/// `retries` times: the keyed count of [`counting`], tolerating `tolerable` failed checkpoints.
fn through(
    sandbox: &Sandbox,
    proxy: &FaultProxy,
    bucket: &str,
    retries: u32,
    tolerable: u32,
    records: u64,
) -> JobFile {
    counting(
        sandbox,
        &format!("s3://{bucket}/job"),
        records,
        Some(100_000.0),
    )
    .checkpoint("storage_endpoint", proxy.endpoint().as_str())
    .checkpoint("storage_retries", retries)
    .checkpoint("storage_request_timeout", "2s")
    .checkpoint("timeout", "1s")
    .checkpoint("tolerable_failures", tolerable)
}

/// The environment giving a job the key of `s3`, without its endpoint (a job of [`through`]
/// names the proxy in its job file).
fn key_of(s3: &S3) -> Vec<(String, String)> {
    s3.env()
        .into_iter()
        .filter(|(k, _)| k != "AWS_ENDPOINT_URL")
        .collect()
}

/// Runs the job of `sandbox` to its end with the key of `s3` (the endpoint is the job file's),
/// and checks its output is `expected`; returns its stderr.
fn run_to_the_end(s3: &S3, sandbox: &Sandbox, expected: &[String], context: &str) -> String {
    let env = key_of(s3);
    let ended = Weir::run_with_env(
        &sandbox.job_path(),
        &[],
        &pairs(&env),
        &sandbox.join("weir.log"),
    )
    .wait(CLI_TIMEOUT);
    ended.assert_code(0, context);
    assert_same_output(&committed_lines(&sandbox.out_dir()), expected, context);
    ended.stderr
}

#[test]
fn transient_store_faults_are_retried_and_change_nothing() {
    let Some(s3) = s3_or_skip("transient_store_faults") else {
        return;
    };
    let expected = reference(200_000);
    let proxy = s3.proxy();
    let bucket = s3.bucket("transient");
    let sandbox = Sandbox::new("s3-transient");
    through(&sandbox, &proxy, &bucket, 10, 0, 200_000).write(&sandbox.job_path());
    // Throttling on state writes, an upload cut off half-way, a metadata write whose answer is
    // lost after it took effect (the retry finds the object it made), a dropped list.
    proxy.add(
        Fault::new(Action::Status(503))
            .method("PUT")
            .path_contains(".state")
            .times(3),
    );
    proxy.add(
        Fault::new(Action::CutBody)
            .method("PUT")
            .path_contains(".state")
            .times(1),
    );
    proxy.add(
        Fault::new(Action::LoseAnswer)
            .method("PUT")
            .path_contains("/_metadata")
            .times(1),
    );
    proxy.add(
        Fault::new(Action::Drop)
            .method("GET")
            .query_contains("list-type")
            .times(1),
    );
    let stderr = run_to_the_end(s3, &sandbox, &expected, "a run through transient faults");
    assert!(
        proxy.remaining().is_empty(),
        "faults not met: {:?}",
        proxy.remaining()
    );
    let failed: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("checkpoint ") && l.contains(" failed: "))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    let seen = proxy.requests();
    assert!(
        seen.iter()
            .filter(|r| r.path().ends_with("/_metadata"))
            .count()
            >= 2,
        "the lost metadata write was not retried"
    );
}

#[test]
fn failures_that_outlast_the_retries_fail_only_the_checkpoint_they_hit() {
    let Some(s3) = s3_or_skip("store_failures_outlast_retries") else {
        return;
    };
    // Five seconds of input (at 100 000 records/s): the job's final checkpoint, which would
    // subsume checkpoint 5 before it expires, comes well after checkpoint 5's second is up,
    // even on a machine so busy that the first checkpoints take a second each.
    let expected = reference(500_000);
    let proxy = s3.proxy();
    let bucket = s3.bucket("lasting");
    let sandbox = Sandbox::new("s3-lasting");
    through(&sandbox, &proxy, &bucket, 1, 10, 500_000).write(&sandbox.job_path());
    // Every write of checkpoint 3 fails, twice as often as it is retried; checkpoint 5's state
    // writes are slower than the checkpoint timeout.
    proxy.add(
        Fault::new(Action::Status(500))
            .method("PUT")
            .path_contains("/chk-0000000003/")
            .times(Fault::FOREVER),
    );
    proxy.add(
        Fault::new(Action::Delay(Duration::from_millis(1500)))
            .method("PUT")
            .path_contains("/chk-0000000005/")
            .times(Fault::FOREVER),
    );
    let stderr = run_to_the_end(s3, &sandbox, &expected, "a run through lasting faults");
    assert!(stderr.contains("checkpoint 3"), "{stderr}");
    assert!(
        stderr.contains(&format!("s3://{bucket}/job/chk-0000000003/")),
        "the failure names the object:\n{stderr}"
    );
    assert!(stderr.contains("checkpoint 4 complete"), "{stderr}");
    assert!(
        stderr.contains("checkpoint 5 failed: expired after 1s"),
        "the slow writes outlast the checkpoint timeout:\n{stderr}"
    );
    let keys = s3.list(&bucket, "job");
    assert!(
        !keys
            .iter()
            .any(|(k, _)| k.starts_with("job/chk-0000000003/")),
        "the failed checkpoint left objects behind: {keys:?}"
    );
}

/// The store down past its retries while the job restarts: the restart's first steps (listing
/// the checkpoints, reading the one to restore) fail, and that is one more failure under the
/// restart strategy, retried until the store is back — not the end of the job (it ended with
/// exit 3, "could not start", before).
#[test]
fn an_outage_of_the_store_during_a_restart_is_retried_under_the_restart_strategy() {
    let Some(s3) = s3_or_skip("store_outage_during_restart") else {
        return;
    };
    let expected = reference(500_000);
    let proxy = s3.proxy();
    let bucket = s3.bucket("outage");
    let sandbox = Sandbox::new("s3-outage");
    through(&sandbox, &proxy, &bucket, 1, 0, 500_000)
        .restart("strategy = \"fixed-delay\"\nattempts = 1000\ndelay = \"100ms\"")
        .write(&sandbox.job_path());
    let env = key_of(s3);
    let mut weir = Weir::run_with_env(
        &sandbox.job_path(),
        &[],
        &pairs(&env),
        &sandbox.join("weir.log"),
    );
    weir.wait_for_log("checkpoint 2 complete");
    // Every request fails: the next checkpoint fails the job, and its restart meets the outage.
    proxy.add(Fault::new(Action::Status(500)).times(Fault::FOREVER));
    weir.wait_for_log("cannot restart: ");
    std::thread::sleep(Duration::from_secs(2));
    proxy.clear();
    weir.assert_ends_committing(
        &sandbox,
        &expected,
        "a run through a store outage during its restart",
    );
}

#[test]
fn a_restore_names_a_savepoint_by_its_url() {
    let Some(s3) = s3_or_skip("restore_savepoint_by_url") else {
        return;
    };
    let bucket = s3.bucket("savepoint");
    let url = format!("s3://{bucket}/job");
    let sandbox = Sandbox::new("s3-savepoint");
    counting(&sandbox, &url, 2_000_000, Some(200_000.0)).write(&sandbox.job_path());
    let mut env = s3.env();
    // Everything logged, the object store client's requests included.
    env.push(("RUST_LOG".into(), "debug".into()));
    let env = pairs(&env);
    let log = sandbox.join("first.log");
    let mut weir = Weir::run_with_env(&sandbox.job_path(), &["--savepoint-on-stop"], &env, &log);
    assert!(weir.wait_until("a checkpoint", CLI_TIMEOUT, |_| {
        !complete_ids(s3, &bucket, "job").is_empty()
    }));
    // `weir status` finds the running job by its job file and says where its checkpoints are.
    let job = sandbox.job_path();
    let status = weir_command(&sandbox, &["status", job.to_str().unwrap()], "", &env);
    assert_eq!(status.code, Some(0), "{}", status.stderr);
    assert!(
        status.stdout.contains(&format!("directory    {url}")),
        "{}",
        status.stdout
    );
    weir.terminate();
    let ended = weir.wait(CLI_TIMEOUT);
    ended.assert_code(0, "a stop with a savepoint");
    let savepoint = crate::support::savepoint_named(&ended.stderr);
    let savepoint = savepoint.to_str().unwrap();
    assert!(
        savepoint.starts_with(&format!("{url}/savepoints/sp-")),
        "{savepoint}"
    );
    let again = Weir::run_with_env(
        &sandbox.job_path(),
        &["--restore", savepoint],
        &env,
        &sandbox.join("again.log"),
    );
    let restored = again.wait(CLI_TIMEOUT);
    restored.assert_code(0, "the run from the savepoint's URL");
    restored.assert_stderr_contains(&format!("restoring from {savepoint}"));
    let lines = committed_lines(&sandbox.out_dir());
    assert_eq!(lines.len(), 2_000_000, "every record counted once");
    // The key's secret is never in what weir prints.
    let secret = weir_test_servers::s3::SECRET_ACCESS_KEY;
    for output in [&ended.stderr, &restored.stderr] {
        assert!(
            !output.contains(secret),
            "the secret key was logged:\n{output}"
        );
    }
}

/// The storage of a job's checkpoints in `bucket` (prefix `job`), reached through `endpoint`,
/// retrying each request `retries` times: as a job opens it, in this process.
fn storage(endpoint: &str, bucket: &str, retries: u32) -> weir::checkpoint::storage::ObjectStorage {
    use weir::checkpoint::layout::CheckpointLayout;
    use weir::checkpoint::storage::{
        ObjectStorage, ObjectStoreOptions, ObjectStoreUrl, StaticCredentials,
    };
    use weir_test_servers::s3::{ACCESS_KEY_ID, SECRET_ACCESS_KEY};
    let url = ObjectStoreUrl::parse(&format!("s3://{bucket}/job"))
        .unwrap()
        .unwrap();
    let options = ObjectStoreOptions {
        endpoint: Some(endpoint.to_owned()),
        credentials: Some(StaticCredentials {
            key_id: ACCESS_KEY_ID.into(),
            secret: SECRET_ACCESS_KEY.into(),
        }),
        retries,
        ..ObjectStoreOptions::default()
    };
    ObjectStorage::open(&url, CheckpointLayout::new(url.as_path()), &options).unwrap()
}

#[test]
fn a_state_larger_than_one_put_goes_up_in_parts_and_a_failed_upload_leaves_nothing() {
    use weir::checkpoint::storage::{CheckpointStorage as _, MULTIPART_THRESHOLD};
    use weir::ids::{CheckpointId, CheckpointKind, TaskId};
    let Some(s3) = s3_or_skip("multipart_state") else {
        return;
    };
    let proxy = s3.proxy();
    let bucket = s3.bucket("multipart");
    let storage = storage(&proxy.endpoint(), &bucket, 1);
    let task = TaskId::new("count", 0);
    let state: Vec<u8> = (0..MULTIPART_THRESHOLD + 3_000_000)
        .map(|i| (i % 251) as u8)
        .collect();
    let kind = CheckpointKind::Checkpoint;
    let handle = storage
        .write_state(kind, CheckpointId(1), &task, &state)
        .unwrap();
    let parts = proxy
        .requests()
        .iter()
        .filter(|r| r.method == "PUT" && r.query().contains("partNumber="))
        .count();
    assert_eq!(parts, 5, "a 67 MB state in 16 MiB parts");
    // One request asks whether the checkpoint is complete: no listing.
    let asked: Vec<String> = proxy
        .requests()
        .iter()
        .filter(|r| r.method != "PUT" && !r.query().contains("upload"))
        .map(|r| format!("{} {}", r.method, r.target))
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let location = storage.layout().location(kind, CheckpointId(1));
    assert!(storage.read_state(&location, &handle).unwrap() == state);

    // Every part of the next upload fails, twice as often as it is retried: the write fails
    // naming the object, and the upload is aborted, so no part is left in the bucket.
    proxy.add(
        Fault::new(Action::Status(500))
            .method("PUT")
            .query_contains("partNumber=")
            .times(Fault::FOREVER),
    );
    let error = storage
        .write_state(kind, CheckpointId(2), &task, &state)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!("s3://{bucket}/job/chk-0000000002/count-0.state")),
        "{error}"
    );
    proxy.clear();
    assert!(
        proxy
            .requests()
            .iter()
            .any(|r| r.method == "DELETE" && r.query().contains("uploadId=")),
        "the failed upload was not aborted"
    );
    assert!(
        !s3.list(&bucket, "job")
            .iter()
            .any(|(key, _)| key.contains("chk-0000000002")),
        "a failed upload left an object"
    );
}

/// The complete checkpoints under `prefix` of `bucket`: id and the generation of the run that
/// completed it, read from its `_metadata`.
fn complete_generations(s3: &S3, bucket: &str, prefix: &str) -> Vec<(u64, u64)> {
    complete_ids(s3, bucket, prefix)
        .into_iter()
        .filter_map(|id| {
            let key = format!("{prefix}/chk-{id:010}/_metadata");
            let meta = s3.metadata(bucket, &key)?;
            Some((id, meta.generation.0))
        })
        .collect()
}

#[test]
fn a_zombie_run_completes_no_checkpoint_and_commits_no_output() {
    let Some(s3) = s3_or_skip("a_zombie_run_completes_no_checkpoint") else {
        return;
    };
    let Some(broker) = kafka::broker_or_skip("a_zombie_run_completes_no_checkpoint") else {
        return;
    };
    const CHUNK: u64 = 4_000;
    let input = End::Kafka(kafka::unique("zombie-in"));
    let output = End::Kafka(kafka::unique("zombie-out"));
    for (end, partitions) in [(&input, 4), (&output, 2)] {
        if let End::Kafka(topic) = end {
            broker.create_topic(topic, partitions);
        }
    }
    let bucket = s3.bucket("zombie");
    let url = format!("s3://{bucket}/jobs/kafkacount");
    // The same job in two directories, as on two machines: each its own lock and control
    // file, one bucket prefix for both.
    let job = |sandbox: &Sandbox, bounded: bool| {
        let text = job_text(broker, sandbox, &input, &output, bounded);
        let local = format!("{:?}", sandbox.checkpoint_dir().display().to_string());
        let text = text.replace(&local, &format!("{url:?}"));
        // A request the freeze cut off may fail once thawed (the server gave up on it): a
        // failure tolerated, so what ends the zombie is its replacement's generation, not the
        // timing of the freeze.
        let text = text.replace("retained = 2\n", "retained = 2\ntolerable_failures = 5\n");
        assert!(
            text.contains(&url) && text.contains("tolerable_failures"),
            "{text}"
        );
        std::fs::write(sandbox.job_path(), text).unwrap();
        sandbox.job_path()
    };
    let env = s3.env();
    let env = pairs(&env);
    append(broker, &input, &chunk(0, CHUNK));

    let old = Sandbox::new("zombie-old");
    let mut zombie = Weir::run_with_env(
        &job(&old, false),
        &["--restore", "latest"],
        &env,
        &old.join("weir.log"),
    );
    zombie.wait_until("two checkpoints of the first run", CLI_TIMEOUT, |_| {
        complete_ids(s3, &bucket, "jobs/kafkacount").len() >= 2
    });
    // Frozen, as a VM paused or a node cut off: its replacement starts meanwhile.
    zombie.signal("STOP");

    let new = Sandbox::new("zombie-new");
    let mut replacement = Weir::run_with_env(
        &job(&new, false),
        &["--restore", "latest"],
        &env,
        &new.join("weir.log"),
    );
    replacement.wait_until("a checkpoint of the replacement", CLI_TIMEOUT, |w| {
        w.stderr().contains("claimed generation 2")
            && complete_generations(s3, &bucket, "jobs/kafkacount")
                .iter()
                .any(|&(_, g)| g == 2)
    });
    append(broker, &input, &chunk(CHUNK, 2 * CHUNK));
    // What the first run completed, a request it sent before it froze included: from now on,
    // thawed, it may complete nothing.
    let before_takeover: Vec<_> = complete_generations(s3, &bucket, "jobs/kafkacount")
        .into_iter()
        .filter(|&(_, g)| g == 1)
        .collect();
    zombie.signal("CONT");
    let ended = zombie.wait(CLI_TIMEOUT);
    assert_ne!(ended.status.code(), Some(0), "{}", ended.stderr);
    assert!(
        ended
            .stderr
            .contains("generation 2 of this job has started on s3://"),
        "{}",
        ended.stderr
    );
    assert!(!ended.stderr.contains("restarting"), "{}", ended.stderr);
    // Thawed, the first run completed at most the checkpoint whose metadata write it had
    // checked against the generations before it froze (checkpoint/generation.rs), numbered
    // below every checkpoint of its replacement.
    let now = complete_generations(s3, &bucket, "jobs/kafkacount");
    let first_run: Vec<_> = now.iter().copied().filter(|&(_, g)| g == 1).collect();
    let late: Vec<u64> = first_run
        .iter()
        .filter(|c| !before_takeover.contains(c))
        .map(|&(id, _)| id)
        .collect();
    let replacements: Vec<u64> = now
        .iter()
        .filter(|&&(_, g)| g == 2)
        .map(|&(id, _)| id)
        .collect();
    assert!(
        late.len() <= 1 && late.iter().all(|id| replacements.iter().all(|r| id < r)),
        "the zombie completed {late:?} after it was thawed; its replacement {replacements:?}"
    );

    // The replacement goes on; a last run reads the input to its end.
    replacement.wait_until("a checkpoint after the zombie stopped", CLI_TIMEOUT, |_| {
        complete_ids(s3, &bucket, "jobs/kafkacount").last() > first_run.last().map(|(id, _)| id)
    });
    replacement.kill();
    let last = Sandbox::new("zombie-last");
    Weir::run_with_env(
        &job(&last, true),
        &["--restore", "latest"],
        &env,
        &last.join("weir.log"),
    )
    .wait(CLI_TIMEOUT)
    .assert_code(0, "the last run");
    assert_exact_counts(
        broker,
        &output,
        2 * CHUNK,
        "read_committed output after a zombie: ",
    );
}

#[test]
fn a_checkpoint_costs_two_requests_a_task_and_a_dozen_more() {
    let Some(s3) = s3_or_skip("a_checkpoint_costs_a_bounded_number_of_requests") else {
        return;
    };
    let expected = reference(200_000);
    let proxy = s3.proxy();
    let bucket = s3.bucket("requests");
    let sandbox = Sandbox::new("s3-requests");
    through(&sandbox, &proxy, &bucket, 10, 0, 200_000).write(&sandbox.job_path());
    let stderr = run_to_the_end(s3, &sandbox, &expected, "a run counting requests");
    let completed = stderr
        .lines()
        .filter(|l| l.contains("checkpoint ") && l.contains(" complete: "))
        .count();
    assert!(completed >= 5, "{stderr}");
    // By method and object: `PUT _metadata`, `HEAD 0000000002` (a generation), `POST` (a
    // batch delete) or `GET` of the bucket (a list).
    let mut kinds: std::collections::BTreeMap<String, usize> = Default::default();
    for request in proxy.requests() {
        let path = request.path();
        let object = path
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or_default();
        let object = if object == bucket { "" } else { object };
        *kinds
            .entry(format!("{} {object}", request.method))
            .or_default() += 1;
    }
    let total: usize = kinds.values().sum();
    let of = |method: &str| -> usize {
        kinds
            .iter()
            .filter(|(k, _)| k.starts_with(method))
            .map(|(_, n)| n)
            .sum()
    };
    let report = format!(
        "{total} requests for {completed} checkpoints ({:.1} each): {kinds:?}",
        total as f64 / completed as f64
    );
    eprintln!("{report}");
    // 5 tasks (generator, count ×2, file sink ×2). Per checkpoint (docs/SCALING.md): each task
    // HEADs `_metadata` (is the checkpoint complete?) and PUTs its state; the metadata write
    // HEADs `_metadata` and the next generation, then PUTs; the history's reservation and
    // completion each HEAD the next generation and PUT; pruning the checkpoint that falls out
    // of `retained` lists its prefix and deletes in batches (metadata first). Start-up and the
    // end add a few dozen at most.
    const TASKS: usize = 5;
    let bound = |per: usize| per * completed + 40;
    assert!(of("PUT") <= bound(TASKS + 3), "{report}");
    assert!(of("HEAD") <= bound(TASKS + 4), "{report}");
    assert!(
        kinds.get("GET ").copied().unwrap_or(0) <= bound(2),
        "lists: {report}"
    );
    assert!(of("POST") + of("DELETE") <= bound(2), "deletes: {report}");
    assert!(
        of("GET") - kinds.get("GET ").copied().unwrap_or(0) <= 40,
        "a checkpoint reads nothing back: {report}"
    );
    assert!(total <= bound(2 * TASKS + 11), "{report}");
}

#[test]
fn checkpoints_on_azure_blob_storage_restore_after_kills_to_exactly_the_undisturbed_output() {
    let Some(azure) = super::azure_or_skip("checkpoints_on_azure_blob_storage") else {
        return;
    };
    const RECORDS: u64 = 300_000;
    let expected = reference(RECORDS);
    azure.container("ckpt");
    assert!(
        azure.refuses_a_second_create("ckpt"),
        "the emulator does not refuse a second create-if-absent"
    );
    let url = "az://ckpt/jobs/gencount";
    let sandbox = Sandbox::new("azure-kills");
    counting(&sandbox, url, RECORDS, Some(100_000.0)).write(&sandbox.job_path());
    let env = azure.env();
    let env = pairs(&env);
    let mut restored = 0;
    for round in 0..2 {
        let log = sandbox.join(&format!("round-{round}.log"));
        let mut weir =
            Weir::run_with_env(&sandbox.job_path(), &["--restore", "latest"], &env, &log);
        weir.wait_until("two checkpoints on Azure", CLI_TIMEOUT, |w| {
            w.stderr().matches(" complete: ").count() >= 2
        });
        let ended = weir.kill();
        restored += usize::from(ended.stderr.contains(&format!("restoring from {url}/chk-")));
        assert!(
            ended.stderr.contains(&format!(
                "claimed generation {} of the job on {url}",
                round + 1
            )),
            "{}",
            ended.stderr
        );
    }
    assert_eq!(
        restored, 1,
        "the second run restored the first's checkpoint"
    );
    restore_to_the_end(
        &sandbox,
        url,
        &env,
        &expected,
        "after 2 kills with checkpoints on Azure",
    );
    verifies(&sandbox, url, &env);
}
