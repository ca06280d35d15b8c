//! `weir run`: runs a job in this process and shows its progress.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use weir::job::{Job, JobStatus};
use weir::runtime::{JobMonitor, JobRequest, JobRunner, RestoreFrom, RunOptions};

use crate::{EXIT_BAD_INPUT, EXIT_CANCELED, EXIT_CANNOT_START, EXIT_JOB_FAILED};

#[derive(clap::Args)]
pub(crate) struct RunArgs {
    /// The job file (TOML).
    job: PathBuf,
    /// Restore from `latest` (the newest complete checkpoint or savepoint of
    /// the job; a fresh start if there is none) or from a checkpoint or
    /// savepoint directory.
    #[arg(long, value_name = "latest|PATH")]
    restore: Option<String>,
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
}

pub(crate) fn run(args: RunArgs, on_terminal: bool) -> ExitCode {
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
        module_cache: if args.no_module_cache {
            None
        } else {
            weir::runtime::default_module_cache_dir()
        },
    };
    let name = job.name.clone();
    let checkpoint_dir = job.checkpoint.directory.clone();
    let runner = match JobRunner::new(job, options).context("cannot start the job") {
        Ok(runner) => runner,
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::from(EXIT_CANNOT_START);
        }
    };
    let (requests, requests_rx) = tokio::sync::mpsc::unbounded_channel();
    let signalled = Arc::new(AtomicBool::new(false));
    {
        let signalled = Arc::clone(&signalled);
        let savepoint_on_stop = args.savepoint_on_stop;
        let requests = Mutex::new(requests.clone());
        let installed = ctrlc::set_handler(move || {
            // A second signal cancels at once.
            let again = signalled.swap(true, Ordering::SeqCst);
            let request = if savepoint_on_stop && !again {
                JobRequest::StopWithSavepoint
            } else {
                JobRequest::Cancel
            };
            eprintln!("\nweir: stopping the job ({request:?}); signal again to cancel at once");
            if let Ok(tx) = requests.lock() {
                let _ = tx.send(request);
            }
        });
        if let Err(e) = installed {
            tracing::warn!("cannot install the signal handler: {e}");
        }
    }
    let monitor = runner.monitor();
    let started = Instant::now();
    tracing::info!(
        "job `{name}` starting; checkpoints in {}",
        checkpoint_dir.display()
    );
    let done = Arc::new(AtomicBool::new(false));
    let status_thread = {
        let (monitor, done) = (monitor.clone(), Arc::clone(&done));
        std::thread::spawn(move || show_progress(&monitor, &done, on_terminal))
    };
    let result = runner.run(requests_rx);
    done.store(true, Ordering::SeqCst);
    let _ = status_thread.join();
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
