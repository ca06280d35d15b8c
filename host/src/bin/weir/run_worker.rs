//! `weir run JOB --worker I/N`: this process's share of a job that runs as many.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Mutex;

use weir::job::workers::Worker;
use weir::job::{Job, JobStatus};
use weir::runtime::{RunOptions, WorkerRequest, WorkerRunner};

use crate::serve::{ControlSettings, on_stop_signal, start_control};
use crate::{EXIT_BAD_INPUT, EXIT_CANCELED, EXIT_CANNOT_START, EXIT_JOB_FAILED};

/// Runs worker `worker` of `job` to its end: every stage, each with its own control endpoint
/// (when `control`) published in the stage's directory: stage K on `address`'s port + K.
pub(crate) fn run(
    job: Job,
    worker: Worker,
    options: RunOptions,
    control: bool,
    address: SocketAddr,
    savepoint_on_stop: bool,
) -> ExitCode {
    let name = job.name.clone();
    let runner = match WorkerRunner::new(job, worker, options) {
        Ok(runner) => runner,
        Err(weir::runtime::WorkerStartError::Plan(e)) => {
            eprintln!("error: job `{name}` cannot run as workers: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
        Err(e) => {
            eprintln!("error: cannot start worker {worker} of job `{name}`: {e}");
            return ExitCode::from(EXIT_CANNOT_START);
        }
    };
    let (requests, requests_rx) = std::sync::mpsc::channel();
    let requests = Mutex::new(requests);
    on_stop_signal(
        format!("worker {worker}"),
        savepoint_on_stop,
        move |savepoint| {
            if let Ok(tx) = requests.lock() {
                let _ = tx.send(if savepoint {
                    WorkerRequest::StopWithSavepoint
                } else {
                    WorkerRequest::Cancel
                });
            }
        },
    );
    let mut servers = Vec::new();
    for (stage, (job, monitor, stage_requests)) in runner.stages().into_iter().enumerate() {
        tracing::info!(
            "worker {worker}, stage {stage}: {} (checkpoints in {})",
            job.vertices
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(" → "),
            job.checkpoint.storage_root().display()
        );
        // Stage K on the port after the stage before it (a free one each for port 0): the
        // same ports in every worker, for probes and scrapes.
        let port = match address.port() {
            0 => 0,
            port => port.saturating_add(stage as u16),
        };
        let settings = ControlSettings {
            enabled: control,
            address: SocketAddr::new(address.ip(), port),
            job: job.clone(),
        };
        match start_control(
            settings,
            &monitor,
            &stage_requests,
            &job.checkpoint.directory,
        ) {
            Ok(server) => servers.push(server),
            Err(e) => {
                eprintln!("error: {e:#}");
                return ExitCode::from(EXIT_CANNOT_START);
            }
        }
    }
    let outcomes = runner.run(requests_rx);
    drop(servers);
    let mut code = ExitCode::SUCCESS;
    for outcome in &outcomes {
        match &outcome.result {
            Err(e) => {
                eprintln!("worker {worker}, stage {}: cannot run: {e}", outcome.stage);
                code = ExitCode::from(EXIT_CANNOT_START);
            }
            Ok(result) => {
                eprintln!(
                    "worker {worker}, stage {}: {}{}",
                    outcome.stage,
                    result.status,
                    result
                        .failure
                        .as_ref()
                        .map(|f| format!(": {f}"))
                        .unwrap_or_default()
                );
                match result.status {
                    JobStatus::Finished => {}
                    JobStatus::Canceled if code == ExitCode::SUCCESS => {
                        code = ExitCode::from(EXIT_CANCELED);
                    }
                    JobStatus::Canceled => {}
                    _ => code = ExitCode::from(EXIT_JOB_FAILED),
                }
            }
        }
    }
    code
}
