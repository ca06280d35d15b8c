//! `weir run`: runs a job in this process and shows its progress.

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use weir::job::workers::Worker;
use weir::job::{Job, JobStatus};
use weir::runtime::{JobMonitor, JobRequest, JobRunner, RestoreFrom, RunOptions};

use crate::serve::{ControlSettings, on_stop_signal, start_control};
use crate::{EXIT_BAD_INPUT, EXIT_CANCELED, EXIT_CANNOT_START, EXIT_JOB_FAILED};

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The job file (TOML).
    job: PathBuf,
    /// Restore from `latest` (the newest complete checkpoint or savepoint of
    /// the job; a fresh start if there is none, refused if an earlier run left
    /// damaged checkpoints or committed output) or from a checkpoint or
    /// savepoint directory.
    #[arg(long, value_name = "latest|PATH")]
    restore: Option<String>,
    /// Start from the beginning knowingly, even though an earlier run of the job left
    /// checkpoints or committed output (which will then be written again). With
    /// `--restore latest`: restore if there is a checkpoint, else start from the beginning.
    #[arg(long)]
    fresh: bool,
    /// Drop the state of vertices the job no longer has instead of refusing to start.
    #[arg(long)]
    allow_non_restored_state: bool,
    /// On SIGTERM or Ctrl-C, take a savepoint and stop, instead of cancelling.
    #[arg(long)]
    savepoint_on_stop: bool,
    /// Compile every module instead of reusing the compiled modules kept in
    /// $WEIR_CACHE_DIR (default: ~/.cache/weir/modules).
    #[arg(long)]
    no_module_cache: bool,
    /// Serve the control endpoint (status, metrics, dashboard, savepoint/stop/cancel) on this
    /// address instead of the job file's `[control] address` (default 127.0.0.1:0, a free
    /// port), even if the job file turns it off. Every request needs the job's token,
    /// loopback included: $WEIR_CONTROL_TOKEN, or one generated and written to the checkpoint
    /// directory's _control.json (mode 0600); the dashboard opens through a one-time link
    /// printed on a terminal (never logged) or by `weir dashboard DIR`. See docs/CONTROL.md.
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_control_address)]
    control: Option<SocketAddr>,
    /// Serve no control endpoint (`weir status`, `savepoint`, `stop`, `cancel` then cannot
    /// reach the job).
    #[arg(long, conflicts_with = "control")]
    no_control: bool,
    /// Run as worker I of N processes of the job (0/3, 1/3, 2/3): the job is cut at its
    /// key-hash edges into stages joined by Kafka topics, and this process runs its share of
    /// every stage, each checkpointed under <directory>/worker-I-of-N/stage-K. Every source
    /// and sink must be Kafka. See docs/SCALING.md.
    #[arg(long, value_name = "I/N")]
    worker: Option<Worker>,
}

fn parse_control_address(text: &str) -> Result<SocketAddr, String> {
    weir::job::parse_address(text).ok_or_else(|| format!("expected {}", weir::job::ADDRESS_FORMS))
}

pub(crate) fn run(args: RunArgs, on_terminal: bool) -> ExitCode {
    #[cfg(feature = "test-hooks")]
    match weir::kill_point::from_env() {
        Ok(None) => {}
        Ok(Some(armed)) => tracing::warn!(
            "test hook armed: this process kills itself at kill point `{}` ({})",
            armed.point,
            weir::kill_point::ENV_VAR
        ),
        Err(e) => {
            eprintln!("error: {e}; unset it to run normally");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    }
    let job = match Job::load(&args.job) {
        Ok(job) => job,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    let options = RunOptions {
        restore: args.restore.map(|r| {
            if r == "latest" {
                RestoreFrom::Latest
            } else {
                RestoreFrom::Path(r.into())
            }
        }),
        allow_non_restored_state: args.allow_non_restored_state,
        fresh: args.fresh,
        module_cache: if args.no_module_cache {
            None
        } else {
            weir::runtime::default_module_cache_dir()
        },
    };
    if let Some(worker) = args.worker {
        if matches!(options.restore, Some(RestoreFrom::Path(_))) {
            eprintln!(
                "error: --restore PATH names one checkpoint, but each stage of a worker restores \
                 from its own: use --restore latest with --worker"
            );
            return ExitCode::from(EXIT_BAD_INPUT);
        }
        let control = (job.control.enabled || args.control.is_some()) && !args.no_control;
        let address = args.control.unwrap_or(job.control.address);
        return crate::run_worker::run(
            job,
            worker,
            options,
            control,
            address,
            args.savepoint_on_stop,
        );
    }
    let name = job.name.clone();
    let checkpoint_dir = job.checkpoint.directory.clone();
    let storage_root = job.checkpoint.storage_root();
    let control = ControlSettings {
        enabled: (job.control.enabled || args.control.is_some()) && !args.no_control,
        address: args.control.unwrap_or(job.control.address),
        job: job.clone(),
    };
    if args.fresh
        && options
            .restore
            .as_ref()
            .is_some_and(|r| r != &RestoreFrom::Latest)
    {
        eprintln!(
            "error: --fresh starts from the beginning and --restore PATH from a checkpoint: \
             give one of them (--fresh goes with --restore latest)"
        );
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let runner = match JobRunner::new(job, options).context("cannot start the job") {
        Ok(runner) => runner,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(EXIT_CANNOT_START);
        }
    };
    let (requests, requests_rx) = tokio::sync::mpsc::unbounded_channel();
    {
        let requests = requests.clone();
        on_stop_signal("the job".into(), args.savepoint_on_stop, move |savepoint| {
            let _ = requests.send(if savepoint {
                JobRequest::StopWithSavepoint
            } else {
                JobRequest::Cancel
            });
        });
    }
    let monitor = runner.monitor();
    let server = match start_control(control, &monitor, &requests, &checkpoint_dir) {
        Ok(server) => server,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(EXIT_CANNOT_START);
        }
    };
    let started = Instant::now();
    tracing::info!(
        "job `{name}` starting; checkpoints in {}",
        storage_root.display()
    );
    let done = Arc::new(AtomicBool::new(false));
    let status_thread = {
        let (monitor, done) = (monitor.clone(), Arc::clone(&done));
        std::thread::spawn(move || show_progress(&monitor, &done, on_terminal))
    };
    let result = runner.run(requests_rx);
    done.store(true, Ordering::SeqCst);
    let _ = status_thread.join();
    // Removes _control.json: the job no longer answers.
    drop(server);
    match result {
        Err(e) => {
            eprintln!("error: cannot run job `{name}`: {e}");
            ExitCode::from(EXIT_CANNOT_START)
        }
        Ok(outcome) => {
            let (completed, failed) = monitor.checkpoint_counts();
            eprintln!("job `{name}` {}", outcome.status);
            eprintln!("  duration:      {:.1} s", started.elapsed().as_secs_f64());
            eprintln!(
                "  records:       {} in, {} out (last attempt)",
                monitor.records_in(),
                monitor.records_out()
            );
            eprintln!("  checkpoints:   {completed} completed, {failed} failed");
            if let Some(last) = monitor.last_checkpoint() {
                eprintln!(
                    "  last:          {} {} ({} ms, {} bytes)",
                    last.kind,
                    last.id,
                    last.duration.as_millis(),
                    last.bytes
                );
            }
            eprintln!("  restarts:      {}", outcome.restarts);
            if let Some(path) = &outcome.savepoint {
                eprintln!(
                    "  savepoint:     {} (restore with --restore {0})",
                    path.display()
                );
            }
            if let Some(failure) = &outcome.failure {
                eprintln!("  failure:       {failure}");
            }
            match outcome.status {
                JobStatus::Finished => ExitCode::SUCCESS,
                JobStatus::Canceled => ExitCode::from(EXIT_CANCELED),
                _ => ExitCode::from(EXIT_JOB_FAILED),
            }
        }
    }
}

/// Shows a live status line on a terminal (every 0.5 s), or a log line every 10 s otherwise.
fn show_progress(monitor: &JobMonitor, done: &AtomicBool, on_terminal: bool) {
    let period = if on_terminal {
        Duration::from_millis(500)
    } else {
        Duration::from_secs(10)
    };
    let mut last = (Instant::now(), 0u64, 0u64);
    let mut waited = Duration::ZERO;
    while !done.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
        waited += Duration::from_millis(100);
        if waited < period {
            continue;
        }
        waited = Duration::ZERO;
        let (records_in, records_out) = (monitor.records_in(), monitor.records_out());
        let secs = last.0.elapsed().as_secs_f64().max(1e-3);
        let rate_in = records_in.saturating_sub(last.1) as f64 / secs;
        let rate_out = records_out.saturating_sub(last.2) as f64 / secs;
        last = (Instant::now(), records_in, records_out);
        let (completed, failed) = monitor.checkpoint_counts();
        let checkpoint = match monitor.last_checkpoint() {
            Some(c) => format!(
                "last {} {} ({} ms, {} B)",
                c.kind,
                c.id,
                c.duration.as_millis(),
                c.bytes
            ),
            None => "none yet".to_string(),
        };
        let line = format!(
            "{} | in {:.0}/s out {:.0}/s | checkpoints {completed} ok {failed} failed, {checkpoint} | restarts {}",
            monitor.status(),
            rate_in,
            rate_out,
            monitor.restarts()
        );
        if on_terminal {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{line}");
            let _ = err.flush();
        } else {
            tracing::info!("{line}");
        }
    }
    if on_terminal {
        eprint!("\r\x1b[2K");
    }
}
