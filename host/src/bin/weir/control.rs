//! `weir status`, `weir savepoint`, `weir stop`, `weir cancel`, `weir dashboard`:
//! the verbs that talk to a running job through its control endpoint
//! (docs/CONTROL.md).
//!
//! A job is found by its checkpoint directory, where it writes
//! `_control.json` while it runs (or by its job file, which names that
//! directory), or by `--address`. Everything else is the library's
//! [`ControlClient`]; this file turns its answers into text and exit codes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;
use weir::checkpoint::storage::ObjectStoreUrl;
use weir::control::auth::TOKEN_ENV;
use weir::control::endpoint_file::EndpointFileError;
use weir::control::{ClientError, ControlClient, EndpointFile};
use weir::job::Job;
use weir_abi::time::END_OF_TIME;

use crate::{EXIT_BAD_INPUT, human};

// The exit codes are listed in the `--help` of `weir status` (main.rs).

/// Exit code: the job refused the action, or the action failed.
const EXIT_REFUSED: u8 = 1;
/// Exit code: no running job was found (no `_control.json`, a stale one, nothing answers).
const EXIT_NOT_FOUND: u8 = 3;
/// Exit code: the endpoint wants a token, or another one.
const EXIT_UNAUTHORIZED: u8 = 4;

/// Which job to talk to.
#[derive(clap::Args)]
pub(crate) struct TargetArgs {
    /// The job's checkpoint directory (it holds _control.json while the job runs), or the job
    /// file (its [checkpoint] directory is used).
    #[arg(value_name = "DIR|JOB_FILE", required_unless_present = "address")]
    target: Option<PathBuf>,
    /// Talk to the endpoint at this address instead: http://HOST:PORT.
    #[arg(long, value_name = "URL", conflicts_with = "target")]
    address: Option<String>,
    /// The job's control token [default: $WEIR_CONTROL_TOKEN, else the one in _control.json,
    /// which only the job's owner can read].
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
}

/// `weir status`.
#[derive(clap::Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    target: TargetArgs,
    /// Print {"job": GET /api/job, "checkpoints": GET /api/checkpoints} as JSON instead.
    #[arg(long)]
    json: bool,
}

/// Why a verb could not do its work, and its exit code.
struct Failure {
    code: u8,
    message: String,
}

impl Failure {
    fn new(code: u8, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
        }
    }
}

/// The endpoint found, and how it was found (for messages).
struct Endpoint {
    client: ControlClient,
    /// `_control.json` when the job was found through it.
    file: Option<(PathBuf, EndpointFile)>,
}

impl Endpoint {
    /// Maps a client error to a failure, telling a stale `_control.json`
    /// apart from a job that answered no.
    fn failure(&self, error: ClientError) -> Failure {
        match error {
            ClientError::Connect { .. } => {
                let message = match &self.file {
                    Some((path, file)) => format!(
                        "{error}\n{} is stale: it was written by process {} for job `{}`, and \
                         nothing answers at its address (the job was killed?); remove it, or \
                         start the job again",
                        path.display(),
                        file.pid,
                        file.job
                    ),
                    None => format!("{error}: is the job running, and is this its address?"),
                };
                Failure::new(EXIT_NOT_FOUND, message)
            }
            ClientError::Unauthorized { message } => Failure::new(
                EXIT_UNAUTHORIZED,
                format!("{message} (pass --token, or set {TOKEN_ENV})"),
            ),
            ClientError::BadAddress { .. } => Failure::new(EXIT_BAD_INPUT, error.to_string()),
            ClientError::Status { .. }
            | ClientError::Protocol { .. }
            | ClientError::Timeout { .. } => Failure::new(EXIT_REFUSED, error.to_string()),
        }
    }
}

/// Finds the endpoint `args` names.
fn find(args: &TargetArgs) -> Result<Endpoint, Failure> {
    let env_token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
    let token = args.token.clone().or(env_token);
    if let Some(address) = &args.address {
        let client = ControlClient::new(address, token)
            .map_err(|e| Failure::new(EXIT_BAD_INPUT, e.to_string()))?;
        return Ok(Endpoint { client, file: None });
    }
    let target = args.target.as_ref().ok_or_else(|| {
        Failure::new(
            EXIT_BAD_INPUT,
            "name the job's checkpoint directory, its job file, or --address URL",
        )
    })?;
    let dir = checkpoint_dir(target)?;
    let file = EndpointFile::read(&dir).map_err(|e| match e {
        EndpointFileError::Missing { .. } => Failure::new(EXIT_NOT_FOUND, e.to_string()),
        other => Failure::new(EXIT_NOT_FOUND, other.to_string()),
    })?;
    let path = EndpointFile::path_in(&dir);
    if file.process_gone() {
        return Err(Failure::new(
            EXIT_NOT_FOUND,
            format!(
                "no running job found in {}: {} is stale, process {} that wrote it (job `{}`) is \
                 gone (killed?); remove the file, or start the job again",
                dir.display(),
                path.display(),
                file.pid,
                file.job
            ),
        ));
    }
    let client = ControlClient::new(&file.address, Some(token.unwrap_or(file.token.clone())))
        .map_err(|e| Failure::new(EXIT_NOT_FOUND, format!("{}: {e}", path.display())))?;
    Ok(Endpoint {
        client,
        file: Some((path, file)),
    })
}

/// The checkpoint directory `target` names: a directory as it is, or the
/// `[checkpoint] directory` of a job file.
fn checkpoint_dir(target: &Path) -> Result<PathBuf, Failure> {
    if matches!(
        ObjectStoreUrl::parse(&target.to_string_lossy()),
        Ok(Some(_))
    ) {
        return Err(Failure::new(
            EXIT_BAD_INPUT,
            format!(
                "{} is where the job's checkpoints are, but a running job's control file \
                 (_control.json) stays in its local directory: pass the job file",
                target.display()
            ),
        ));
    }
    if target.is_dir() {
        return Ok(target.to_path_buf());
    }
    if target.is_file() {
        let job = Job::from_file(target).map_err(|e| {
            Failure::new(
                EXIT_BAD_INPUT,
                format!("{e} (a job file is read for its checkpoint directory)"),
            )
        })?;
        return Ok(job.checkpoint.directory);
    }
    Err(Failure::new(
        EXIT_NOT_FOUND,
        format!(
            "no running job found in {}: there is no such directory or job file (a job creates \
             its checkpoint directory when it starts)",
            target.display()
        ),
    ))
}

/// Runs `verb`, printing its failure and mapping it to an exit code.
fn exit(verb: impl FnOnce() -> Result<(), Failure>) -> ExitCode {
    match verb() {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}

/// `weir status`.
pub(crate) fn status(args: StatusArgs) -> ExitCode {
    exit(|| {
        let endpoint = find(&args.target)?;
        let get = |path| {
            endpoint
                .client
                .get_json(path)
                .map_err(|e| endpoint.failure(e))
        };
        let job = get("/api/job")?;
        let checkpoints = get("/api/checkpoints")?;
        if args.json {
            let both = serde_json::json!({ "job": job, "checkpoints": checkpoints });
            println!(
                "{}",
                serde_json::to_string_pretty(&both).expect("JSON values serialize")
            );
        } else {
            print!(
                "{}",
                render_status(endpoint.client.base(), &job, &checkpoints)
            );
        }
        Ok(())
    })
}

/// `weir savepoint` (`stop = false`) and `weir stop`: the savepoint's path on stdout.
pub(crate) fn savepoint(args: TargetArgs, stop: bool) -> ExitCode {
    exit(|| {
        let endpoint = find(&args)?;
        let path = if stop { "/api/stop" } else { "/api/savepoints" };
        let taken = endpoint
            .client
            .post_json(path)
            .map_err(|e| endpoint.failure(e))?;
        let location = taken["path"].as_str().unwrap_or("?");
        let job = endpoint
            .file
            .as_ref()
            .map_or_else(String::new, |(_, f)| format!(" of job `{}`", f.job));
        eprintln!(
            "savepoint {}{job} complete{}; restore with `weir run JOB --restore {location}`",
            taken["id"],
            if stop { ", the job is stopping" } else { "" }
        );
        println!("{location}");
        Ok(())
    })
}

/// `weir rescale`: the target and the changes are positional, so it reads them itself (with
/// `--address` every word is a change; without, the first is the target).
#[derive(clap::Args)]
pub(crate) struct RescaleArgs {
    /// The job's checkpoint directory or job file (as for `weir status`; absent with
    /// --address), then the new parallelism of each vertex to change, as VERTEX=N.
    #[arg(value_name = "DIR|JOB_FILE] [VERTEX=N", required = true, num_args = 1..)]
    words: Vec<String>,
    /// Talk to the endpoint at this address instead: http://HOST:PORT.
    #[arg(long, value_name = "URL")]
    address: Option<String>,
    /// The job's control token [default: $WEIR_CONTROL_TOKEN, else the one in _control.json,
    /// which only the job's owner can read].
    #[arg(long, value_name = "TOKEN")]
    token: Option<String>,
}

impl RescaleArgs {
    /// The job to talk to and the changes, or what is wrong with the words.
    fn split(self) -> Result<(TargetArgs, Vec<(String, u32)>), Failure> {
        let mut words = self.words.into_iter();
        let target = match self.address {
            Some(_) => None,
            None => words.next().map(PathBuf::from),
        };
        let changes = words
            .map(|w| parse_change(&w))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Failure::new(EXIT_BAD_INPUT, e))?;
        if changes.is_empty() {
            return Err(Failure::new(
                EXIT_BAD_INPUT,
                "name at least one vertex and its new parallelism: weir rescale DIR count=3",
            ));
        }
        let target = TargetArgs {
            target,
            address: self.address,
            token: self.token,
        };
        Ok((target, changes))
    }
}

/// One `VERTEX=N` of `weir rescale`.
fn parse_change(text: &str) -> Result<(String, u32), String> {
    let (vertex, number) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not VERTEX=N, as in count=3"))?;
    let number = number
        .parse::<u32>()
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| format!("`{number}` is not a parallelism: a whole number from 1"))?;
    if vertex.is_empty() {
        return Err(format!("`{text}` names no vertex: VERTEX=N, as in count=3"));
    }
    Ok((vertex.to_string(), number))
}

/// `weir rescale`.
pub(crate) fn rescale(args: RescaleArgs) -> ExitCode {
    exit(|| {
        let (target, changes) = args.split()?;
        let endpoint = find(&target)?;
        let query: Vec<String> = changes
            .iter()
            .map(|(vertex, n)| format!("{vertex}={n}"))
            .collect();
        let done = endpoint
            .client
            .post_json(&format!("/api/rescale?{}", query.join("&")))
            .map_err(|e| endpoint.failure(e))?;
        let changes: Vec<String> = done["changes"]
            .as_array()
            .map(|changes| {
                changes
                    .iter()
                    .map(|c| format!("{} {} → {}", text(&c["vertex"]), c["from"], c["to"]))
                    .collect()
            })
            .unwrap_or_default();
        eprintln!(
            "rescaled {} from savepoint {}; the job runs on",
            changes.join(", "),
            done["savepoint"]["id"]
        );
        println!("{}", text(&done["savepoint"]["path"]));
        Ok(())
    })
}

/// `weir cancel`.
pub(crate) fn cancel(args: TargetArgs) -> ExitCode {
    exit(|| {
        let endpoint = find(&args)?;
        endpoint
            .client
            .post_json("/api/cancel")
            .map_err(|e| endpoint.failure(e))?;
        let job = endpoint.file.as_ref().map_or_else(
            || "the job".to_string(),
            |(_, f)| format!("job `{}`", f.job),
        );
        eprintln!(
            "{job} is cancelling; its completed checkpoints are kept or deleted as its \
             [checkpoint] on_cancel says"
        );
        Ok(())
    })
}

/// `weir dashboard`: a new one-time link into the job's dashboard on stdout.
pub(crate) fn dashboard(args: TargetArgs) -> ExitCode {
    exit(|| {
        let endpoint = find(&args)?;
        let link = endpoint
            .client
            .post_json("/api/dashboard-login")
            .map_err(|e| endpoint.failure(e))?;
        let url = link["url"].as_str().ok_or_else(|| {
            Failure::new(
                EXIT_REFUSED,
                format!("the endpoint answered no link: {link}"),
            )
        })?;
        eprintln!(
            "open this link in a browser on this machine within {} s; it works once, then the \
             browser keeps a session cookie",
            link["expires_in"]
        );
        println!("{url}");
        Ok(())
    })
}

/// The status table of `weir status`.
fn render_status(address: &str, job: &Value, checkpoints: &Value) -> String {
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(format!(
        "job          {} (pid {}, {address})",
        text(&job["name"]),
        job["pid"]
    ));
    line(format!(
        "status       {} for {}, {} restart{}",
        text(&job["status"]),
        human::duration_ms(job["duration"].as_u64().unwrap_or(0)),
        job["restarts"],
        if job["restarts"] == 1 { "" } else { "s" }
    ));
    line(format!(
        "directory    {}",
        text(&job["checkpoint_directory"])
    ));
    line(String::new());

    let mut rows = vec![
        [
            "vertex",
            "kind",
            "tasks",
            "records in",
            "records out",
            "in/s",
            "out/s",
            "busy",
            "back-pressured",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for v in job["vertices"].as_array().into_iter().flatten() {
        rows.push(vec![
            text(&v["name"]),
            text(&v["kind"]),
            v["parallelism"].to_string(),
            v["records_in"].to_string(),
            v["records_out"].to_string(),
            rate(v["rate_in"].as_f64()),
            rate(v["rate_out"].as_f64()),
            percent(v["busy_ratio"].as_f64()),
            percent(v["backpressured_ratio"].as_f64()),
        ]);
    }
    for row in human::table(&rows, 2) {
        line(row);
    }
    line(String::new());
    let event_time = event_time_lines(job);
    if !event_time.is_empty() {
        for text in event_time {
            line(text);
        }
        line(String::new());
    }
    let kafka = kafka_lines(job);
    if !kafka.is_empty() {
        for text in kafka {
            line(text);
        }
        line(String::new());
    }

    let counts = &checkpoints["counts"];
    line(format!(
        "checkpoints  {} completed, {} failed, {} in progress ({} triggered)",
        counts["completed"], counts["failed"], counts["in_progress"], counts["total"]
    ));
    let now = job["now"].as_u64().unwrap_or_else(now_ms);
    let latest = &checkpoints["latest"];
    for (label, entry) in [
        ("completed", &latest["completed"]),
        ("savepoint", &latest["savepoint"]),
        ("failed", &latest["failed"]),
    ] {
        line(format!("latest {label:<9}  {}", describe(entry, now)));
    }
    let restored = &latest["restored"];
    if !restored.is_null() {
        line(format!(
            "restored from {} {} ({})",
            if restored["is_savepoint"] == true {
                "savepoint"
            } else {
                "checkpoint"
            },
            restored["id"],
            text(&restored["path"])
        ));
        if let Some(changes) = restored["rescaled"].as_array() {
            let changes: Vec<String> = changes
                .iter()
                .map(|c| format!("{} {} → {}", text(&c["vertex"]), c["from"], c["to"]))
                .collect();
            line(format!("rescaled     {}", changes.join(", ")));
        }
    }
    out
}

/// The event-time table: per vertex its watermark (`-` before its first, `end of input` at the
/// end of time) and its lag, with a column for each of late records, unwired records and
/// pending timers that is not 0 everywhere. The lag is shown only beside a watermark that
/// [looks like a wall-clock time](human::looks_like_wall_clock): behind any other it is only
/// the size of the clock. No lines when no vertex has a watermark or any of those counts.
fn event_time_lines(job: &Value) -> Vec<String> {
    let vertices: Vec<&Value> = job["vertices"].as_array().into_iter().flatten().collect();
    let count = |v: &Value, key: &str| v[key].as_u64().unwrap_or(0);
    let columns: Vec<(&str, &str)> = [
        ("late", "records_late"),
        ("unwired", "records_unwired"),
        ("timers", "pending_timers"),
    ]
    .into_iter()
    .filter(|(_, key)| vertices.iter().any(|v| count(v, key) > 0))
    .collect();
    if columns.is_empty() && vertices.iter().all(|v| v["watermark"].is_null()) {
        return Vec::new();
    }
    let mut header = vec!["vertex".to_string(), "watermark".into(), "lag".into()];
    header.extend(columns.iter().map(|(label, _)| label.to_string()));
    let mut rows = vec![header];
    for v in vertices {
        let watermark = v["watermark"].as_i64();
        let mut row = vec![
            text(&v["name"]),
            match watermark {
                None => "-".into(),
                Some(END_OF_TIME) => "end of input".into(),
                Some(w) => human::timestamp_ms(w),
            },
            match (watermark, v["watermark_lag"].as_i64()) {
                (Some(w), Some(lag)) if human::looks_like_wall_clock(w) => signed_duration(lag),
                _ => "-".into(),
            },
        ];
        row.extend(columns.iter().map(|(_, key)| count(v, key).to_string()));
        rows.push(row);
    }
    human::table(&rows, 2)
}

/// A duration in ms that may be negative (a watermark ahead of the clock): `-1.2 s`.
fn signed_duration(ms: i64) -> String {
    let magnitude = human::duration_ms(ms.unsigned_abs());
    if ms < 0 {
        format!("-{magnitude}")
    } else {
        magnitude
    }
}

/// At most this many partitions of a Kafka source are listed, those with the most lag first.
const KAFKA_PARTITION_ROWS: usize = 8;

/// A few lines per Kafka vertex: a source's lag and its partitions' offsets, an exactly-once
/// sink's transactions and commit durations.
fn kafka_lines(job: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for v in job["vertices"].as_array().into_iter().flatten() {
        let tasks = v["tasks"].as_array().map_or(&[][..], Vec::as_slice);
        let mut partitions: Vec<(&Value, &Value)> = tasks
            .iter()
            .flat_map(|t| {
                t["kafka_source"]["partitions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(move |p| (t, p))
            })
            .collect();
        if tasks.iter().any(|t| t.get("kafka_source").is_some()) {
            let lag: i64 = partitions
                .iter()
                .filter_map(|(_, p)| p["lag"].as_i64())
                .sum();
            let unknown = partitions
                .iter()
                .filter(|(_, p)| p["lag"].is_null())
                .count();
            lines.push(format!(
                "kafka source {}  lag {lag} record{} over {} partition{}{}",
                text(&v["name"]),
                if lag == 1 { "" } else { "s" },
                partitions.len(),
                if partitions.len() == 1 { "" } else { "s" },
                if unknown > 0 {
                    format!(" ({unknown} not known yet)")
                } else {
                    String::new()
                }
            ));
            partitions.sort_by_key(|(_, p)| std::cmp::Reverse(p["lag"].as_i64().unwrap_or(0)));
            let mut rows = vec![
                [
                    "  topic",
                    "partition",
                    "subtask",
                    "offset",
                    "high watermark",
                    "lag",
                ]
                .map(String::from)
                .to_vec(),
            ];
            let known =
                |value: &Value| value.as_i64().map_or_else(|| "-".into(), |n| n.to_string());
            for (task, p) in partitions.iter().take(KAFKA_PARTITION_ROWS) {
                rows.push(vec![
                    format!("  {}", text(&p["topic"])),
                    p["partition"].to_string(),
                    task["subtask"].to_string(),
                    known(&p["offset"]),
                    known(&p["high_watermark"]),
                    known(&p["lag"]),
                ]);
            }
            lines.extend(human::table(&rows, 1));
            if partitions.len() > KAFKA_PARTITION_ROWS {
                lines.push(format!(
                    "  ... and {} more partitions",
                    partitions.len() - KAFKA_PARTITION_ROWS
                ));
            }
        }
        let sinks: Vec<&Value> = tasks.iter().filter_map(|t| t.get("kafka_sink")).collect();
        if !sinks.is_empty() {
            let sum = |key: &str| -> u64 { sinks.iter().filter_map(|s| s[key].as_u64()).sum() };
            let longest = |key: &str| -> f64 {
                sinks
                    .iter()
                    .filter_map(|s| s["commit_duration"][key].as_f64())
                    .fold(0.0, f64::max)
            };
            let transactions = sum("transactions_committed");
            let resent = sum("transactions_resent");
            lines.push(format!(
                "kafka sink {}  {transactions} transaction{} committed, {} records{}, commit p50 {}, max {}",
                text(&v["name"]),
                if transactions == 1 { "" } else { "s" },
                sum("records_committed"),
                if resent > 0 {
                    format!(", {resent} sent again after a restore")
                } else {
                    String::new()
                },
                human::duration_ms_fine(longest("p50")),
                human::duration_ms_fine(longest("max")),
            ));
        }
    }
    lines
}

/// One `latest` entry on a line: id, age, duration, size, and the path or the failure.
fn describe(entry: &Value, now: u64) -> String {
    if entry.is_null() {
        return "none".to_string();
    }
    let kind = if entry["is_savepoint"] == true {
        "savepoint"
    } else {
        "checkpoint"
    };
    let at = entry["trigger_timestamp"].as_u64().unwrap_or(now);
    let mut text_out = format!(
        "{kind} {}, {} ago, took {}, {}",
        entry["id"],
        human::duration_ms(now.saturating_sub(at)),
        human::duration_ms(entry["end_to_end_duration"].as_u64().unwrap_or(0)),
        human::bytes(entry["state_size"].as_u64().unwrap_or(0)),
    );
    if let Some(path) = entry["external_path"].as_str() {
        text_out.push_str(&format!(", {path}"));
    }
    if let Some(reason) = entry["failure_message"].as_str() {
        text_out.push_str(&format!(": {reason}"));
    }
    text_out
}

fn text(value: &Value) -> String {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn rate(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |r| format!("{r:.0}"))
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |r| format!("{:.0}%", r * 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails unless every one of `lines` is a whole line of `text`, naming the first missing.
    #[track_caller]
    fn assert_lines(text: &str, lines: &[impl AsRef<str>]) {
        for line in lines {
            let line = line.as_ref();
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in:\n{text}"
            );
        }
    }

    #[test]
    fn rescale_reads_vertex_equals_parallelism_and_says_what_is_wrong() {
        assert_eq!(parse_change("count=3"), Ok(("count".to_string(), 3)));
        for (bad, says) in [
            ("count", "is not VERTEX=N"),
            ("count=0", "is not a parallelism"),
            ("count=x", "is not a parallelism"),
            ("=3", "names no vertex"),
        ] {
            let err = parse_change(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    /// The `/api/job` answer for the job `name` (pid 7, checkpoints in `/data/NAME`), running
    /// for a second without restarts, with `vertices`, answered at `now`.
    fn running_job(name: &str, now: u64, vertices: serde_json::Value) -> serde_json::Value {
        serde_json::json!({
            "name": name, "pid": 7, "status": "RUNNING", "duration": 1000, "restarts": 0,
            "now": now, "checkpoint_directory": format!("/data/{name}"), "vertices": vertices
        })
    }

    #[test]
    fn the_status_shows_kafka_partitions_and_transactions() {
        let job = running_job(
            "k",
            100_000,
            serde_json::json!([
                {"name": "in", "kind": "source", "parallelism": 2, "records_in": 0,
                 "records_out": 10, "tasks": [
                    {"subtask": 0, "kafka_source": {"partitions": [
                        {"topic": "words", "partition": 0, "offset": 5, "high_watermark": 5,
                         "lag": 0}]}},
                    {"subtask": 1, "kafka_source": {"partitions": [
                        {"topic": "words", "partition": 1, "offset": 3, "high_watermark": 10,
                         "lag": 7},
                        {"topic": "words", "partition": 2, "offset": 0, "high_watermark": null,
                         "lag": null}]}}]},
                {"name": "count", "kind": "operator", "parallelism": 1, "tasks": [{"subtask": 0}]},
                {"name": "out", "kind": "sink", "parallelism": 1, "tasks": [
                    {"subtask": 0, "kafka_sink": {"transactions_committed": 3,
                     "records_committed": 12, "transactions_resent": 0,
                     "commit_duration": {"last": 2.0, "max": 14.2, "avg": 6.0, "p50": 4.1,
                                         "p99": 14.2}}}]}
            ]),
        );
        let text = render_status("http://127.0.0.1:9", &job, &serde_json::json!({}));
        assert_lines(
            &text,
            &[
                "kafka source in  lag 7 records over 3 partitions (1 not known yet)",
                "  topic  partition  subtask  offset  high watermark  lag",
                "  words          1        1       3              10    7",
                "  words          0        0       5               5    0",
                "  words          2        1       0               -    -",
                "kafka sink out  3 transactions committed, 12 records, commit p50 4.1 ms, max 14 ms",
            ],
        );
        assert!(!text.contains("kafka source count") && !text.contains("kafka sink count"));
    }

    #[test]
    fn the_status_shows_each_vertexs_watermark_lag_and_event_time_counts() {
        let job = running_job(
            "win",
            1_764_469_923_291,
            serde_json::json!([
                {"name": "clicks", "kind": "source", "parallelism": 2,
                 "watermark": 1_764_469_922_091u64, "watermark_lag": 1_200,
                 "records_late": 0, "records_unwired": 0, "pending_timers": 0},
                {"name": "windows", "kind": "operator", "parallelism": 2,
                 "watermark": 1_764_469_921_000u64, "watermark_lag": 2_291,
                 "records_late": 12, "records_unwired": 0, "pending_timers": 340},
                {"name": "counter", "kind": "operator", "parallelism": 1,
                 "watermark": 48_211, "watermark_lag": 1_764_469_875_080u64,
                 "records_late": 0, "records_unwired": 0, "pending_timers": 0},
                {"name": "done", "kind": "operator", "parallelism": 1,
                 "watermark": i64::MAX, "watermark_lag": null,
                 "records_late": 0, "records_unwired": 0, "pending_timers": 0},
                {"name": "out", "kind": "sink", "parallelism": 1, "watermark": null,
                 "watermark_lag": null, "records_late": 0, "records_unwired": 0,
                 "pending_timers": 0}
            ]),
        );
        let text = render_status("http://127.0.0.1:9", &job, &serde_json::json!({}));
        // Columns of counts only when one is not zero (here late and timers, not unwired);
        // the time only when the watermark reads as one, the lag likewise.
        assert_lines(
            &text,
            &[
                "vertex   watermark                                   lag  late  timers",
                "clicks   1764469922091 (2025-11-30T02:32:02.091Z)  1.2 s     0       0",
                "windows  1764469921000 (2025-11-30T02:32:01.000Z)  2.3 s    12     340",
                "counter  48211                                         -     0       0",
                "done     end of input                                  -     0       0",
                "out      -                                             -     0       0",
            ],
        );
    }

    #[test]
    fn the_status_has_no_event_time_table_without_watermarks() {
        let job = running_job(
            "wc",
            100_000,
            serde_json::json!([{"name": "lines", "kind": "source", "parallelism": 1,
                                "watermark": null, "watermark_lag": null, "records_late": 0,
                                "records_unwired": 0, "pending_timers": 0}]),
        );
        let text = render_status("http://127.0.0.1:9", &job, &serde_json::json!({}));
        assert!(!text.contains("watermark"), "{text}");
    }

    #[test]
    fn the_status_table_shows_the_job_vertices_and_latest_checkpoints() {
        let mut job = running_job(
            "wc",
            100_000,
            serde_json::json!([
                {"name": "lines", "kind": "source", "parallelism": 1, "records_in": 10,
                 "records_out": 10, "rate_in": 5.0, "rate_out": 5.0, "busy_ratio": 0.25,
                 "backpressured_ratio": 0.0},
                {"name": "count", "kind": "operator", "parallelism": 2, "records_in": 10,
                 "records_out": 10, "rate_in": 5.0, "rate_out": 5.0, "busy_ratio": 0.5,
                 "backpressured_ratio": 0.125}
            ]),
        );
        job["duration"] = 12_300.into();
        job["restarts"] = 1.into();
        let checkpoints = serde_json::json!({
            "counts": {"total": 4, "completed": 3, "failed": 1, "in_progress": 0},
            "latest": {
                "completed": {"id": 3, "is_savepoint": false, "trigger_timestamp": 98_000,
                              "end_to_end_duration": 35, "state_size": 2048,
                              "external_path": "/data/wc/chk-0000000003"},
                "savepoint": null,
                "failed": {"id": 2, "is_savepoint": false, "trigger_timestamp": 90_000,
                           "end_to_end_duration": 1000, "state_size": 0,
                           "failure_message": "expired"},
                "restored": {"id": 1, "is_savepoint": true, "path": "/sp", "restore_timestamp": 1,
                             "rescaled": [{"vertex": "count", "from": 1, "to": 2}]}
            }
        });
        let text = render_status("http://127.0.0.1:9", &job, &checkpoints);
        assert_lines(
            &text,
            &[
                "job          wc (pid 7, http://127.0.0.1:9)",
                "status       RUNNING for 12.3 s, 1 restart",
                "vertex  kind      tasks  records in  records out  in/s  out/s  busy  back-pressured",
                "count   operator      2          10           10     5      5   50%             12%",
                "checkpoints  3 completed, 1 failed, 0 in progress (4 triggered)",
                "latest completed  checkpoint 3, 2.0 s ago, took 35 ms, 2.0 KiB, /data/wc/chk-0000000003",
                "latest savepoint  none",
                "latest failed     checkpoint 2, 10.0 s ago, took 1.0 s, 0 B: expired",
                "restored from savepoint 1 (/sp)",
                "rescaled     count 1 → 2",
            ],
        );
    }
}
