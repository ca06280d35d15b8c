//! The `weir` command: a thin shell over the library. It parses arguments,
//! sets up logging and signals, calls the library, shows progress, and maps
//! the result to an exit code.

use std::io::{IsTerminal, Write};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use weir::job::{Job, JobStatus};
use weir::runtime::{JobMonitor, JobRequest, JobRunner, RestoreFrom, RunOptions};
use weir::tools::{ConfigSource, DEFAULT_BATCH_SIZE, TestSpec};

/// Exit code: the job file or the arguments are wrong.
const EXIT_BAD_INPUT: u8 = 2;
/// Exit code: the job could not start (module, restore or storage problem).
const EXIT_CANNOT_START: u8 = 3;
/// Exit code: the job ran and failed beyond its restart strategy.
const EXIT_JOB_FAILED: u8 = 1;
/// Exit code: the job was cancelled by a signal.
const EXIT_CANCELED: u8 = 130;
/// Exit code of `validate` and `test`: the module is invalid or failed its test.
const EXIT_CHECK_FAILED: u8 = 1;

/// Weir: a streaming engine whose operators are WebAssembly modules.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a job described in a job file (see docs/JOB.md).
    Run(RunArgs),
    /// Check a module against the guest ABI and report what it has (see docs/TOOLS.md).
    ///
    /// Exit code 0: valid; 1: invalid; 2: the file cannot be read.
    Validate(ValidateArgs),
    /// Run one operator in isolation over JSON-lines records (see docs/TOOLS.md).
    ///
    /// Exit code 0: passed; 1: the module failed (refused, guest failure, output differs);
    /// 2: bad arguments or files.
    Test(TestArgs),
}

#[derive(clap::Args)]
struct ValidateArgs {
    /// The module: `.wasm`, or `.wat` text.
    module: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
struct TestArgs {
    /// The module: `.wasm`, or `.wat` text.
    module: PathBuf,
    /// The input records, one JSON object per line: {"key": .., "value": .., "timestamp": ..,
    /// "port": ..}; `-` or absent reads stdin.
    #[arg(long, value_name = "FILE")]
    input: Option<PathBuf>,
    /// The operator's config, as text.
    #[arg(long, value_name = "STRING", conflicts_with = "config_file")]
    config: Option<String>,
    /// The operator's config, the bytes of a file.
    #[arg(long, value_name = "FILE")]
    config_file: Option<PathBuf>,
    /// The operator's name in its init message [default: the module file's stem].
    #[arg(long, value_name = "NAME")]
    operator: Option<String>,
    /// How many instances of the operator the init message says run.
    #[arg(long, value_name = "N", default_value_t = 1)]
    parallelism: u32,
    /// Which instance this is, from 0.
    #[arg(long, value_name = "I", default_value_t = 0)]
    subtask: u32,
    /// After every N input records, snapshot, restore into a fresh instance and continue; fail
    /// if the output differs from a run without checkpoints.
    #[arg(long, value_name = "N")]
    checkpoint_every: Option<NonZeroUsize>,
    /// Most records per input batch.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BATCH_SIZE)]
    batch_size: NonZeroUsize,
    /// Compare the output with this file of JSON lines instead of printing it.
    #[arg(long, value_name = "FILE")]
    expect: Option<PathBuf>,
    /// Call `weir_finish` after the last input record, as a job does when its inputs end.
    #[arg(long)]
    finish: bool,
}

#[derive(clap::Args)]
struct RunArgs {
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    let on_terminal = std::io::stderr().is_terminal();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(on_terminal)
        .with_target(false)
        .init();
    match cli.command {
        Command::Run(args) => run(args, on_terminal),
        Command::Validate(args) => validate(args),
        Command::Test(args) => test(args),
    }
}

fn validate(args: ValidateArgs) -> ExitCode {
    let report = match weir::tools::validate_file(&args.module) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("error: cannot write the report as JSON: {e}");
                return ExitCode::from(EXIT_BAD_INPUT);
            }
        }
    } else {
        print!("{report}");
    }
    if report.valid {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_CHECK_FAILED)
    }
}

fn test(args: TestArgs) -> ExitCode {
    let config = match (args.config, args.config_file) {
        (Some(text), _) => ConfigSource::Text(text),
        (None, Some(path)) => ConfigSource::File(path),
        (None, None) => ConfigSource::None,
    };
    let spec = TestSpec {
        input: args.input,
        config,
        operator: args.operator,
        parallelism: args.parallelism,
        subtask: args.subtask,
        batch_size: args.batch_size,
        checkpoint_every: args.checkpoint_every,
        expect: args.expect,
        finish: args.finish,
        ..TestSpec::new(args.module)
    };
    let outcome = match spec.run(std::io::stdin().lock()) {
        Ok(outcome) => outcome,
        Err(e) => {
            eprintln!("error: {e}");
            if let Some(backtrace) = e.guest_backtrace() {
                eprintln!("guest backtrace:\n{backtrace}");
            }
            return ExitCode::from(if e.is_test_failure() {
                EXIT_CHECK_FAILED
            } else {
                EXIT_BAD_INPUT
            });
        }
    };
    match &spec.expect {
        Some(path) => eprintln!("ok: {outcome}; output matches {}", path.display()),
        None => {
            let mut out = std::io::stdout().lock();
            let written = outcome
                .output
                .iter()
                .try_for_each(|record| writeln!(out, "{record}"))
                .and_then(|()| out.flush());
            if let Err(e) = written {
                eprintln!("error: cannot write the output: {e}");
                return ExitCode::from(EXIT_BAD_INPUT);
            }
            eprintln!("ok: {outcome}");
        }
    }
    ExitCode::SUCCESS
}

fn run(args: RunArgs, on_terminal: bool) -> ExitCode {
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
        let request = if args.savepoint_on_stop {
            JobRequest::StopWithSavepoint
        } else {
            JobRequest::Cancel
        };
        let requests = Mutex::new(requests);
        let installed = ctrlc::set_handler(move || {
            // A second signal cancels at once.
            let again = signalled.swap(true, Ordering::SeqCst);
            let request = if again { JobRequest::Cancel } else { request };
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
