//! The `weir` command: a thin shell over the library. It parses arguments,
//! sets up logging and signals, calls the library, shows progress, and maps
//! the result to an exit code.

mod checkpoints;
mod control;
mod human;
mod new;
mod run;
mod run_worker;
mod serve;

use std::io::{IsTerminal, Write};
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use weir::tools::{ConfigSource, DEFAULT_BATCH_SIZE, TestSpec};
use weir::wasm::StateCapture;

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
    Run(run::RunArgs),
    /// Check a module against the guest ABI and report what it has (see docs/TOOLS.md).
    ///
    /// Exit code 0: valid; 1: invalid; 2: the file cannot be read.
    Validate(ValidateArgs),
    /// Run one operator in isolation over JSON-lines records (see docs/TOOLS.md).
    ///
    /// Exit code 0: passed; 1: the module failed (refused, guest failure, output differs);
    /// 2: bad arguments or files.
    Test(TestArgs),
    /// List a job's checkpoints and savepoints, inspect one, or verify every file (see
    /// docs/TOOLS.md).
    ///
    /// `weir checkpoints DIR`, `weir checkpoints inspect PATH`, `weir checkpoints verify DIR`.
    Checkpoints(checkpoints::CheckpointsArgs),
    /// Show a running job's status: vertices with records, rates and back-pressure, their
    /// watermarks when they have any, checkpoint counts, the latest completed, savepoint and
    /// failed checkpoint (see docs/CONTROL.md).
    ///
    /// The job is found by its checkpoint directory (`_control.json`), its job file, or
    /// --address. Exit code 0: done; 1: the job refused or the action failed (not running,
    /// savepoint failed); 2: bad arguments (no target, unreadable job file); 3: no running job
    /// found (no _control.json, a stale one, nothing answers); 4: the endpoint needs a token,
    /// or another one.
    Status(control::StatusArgs),
    /// Take a savepoint of a running job and print its path; the job goes on.
    ///
    /// Waits until the savepoint is complete. Exit codes as for `weir status`.
    Savepoint(control::TargetArgs),
    /// Stop a running job with a savepoint and print its path; the job then finishes.
    ///
    /// Waits until the savepoint is complete. Exit codes as for `weir status`.
    Stop(control::TargetArgs),
    /// Change the parallelism of a running job's vertices: a savepoint, then the job goes on in
    /// the same process at the new parallelism from it, its keyed state split and merged by key
    /// group (see docs/OPERATIONS.md, "Rescaling a job").
    ///
    /// `weir rescale DIR count=3 split=2`. Waits until the job runs again. A rescale the job
    /// cannot do leaves it running, at its old parallelism, and says why. Exit codes as for
    /// `weir status`.
    Rescale(control::RescaleArgs),
    /// Cancel a running job; its completed checkpoints are kept or deleted per `on_cancel`.
    ///
    /// Exit codes as for `weir status`.
    Cancel(control::TargetArgs),
    /// Print a one-time link that opens a running job's dashboard in a browser.
    ///
    /// The link (http://127.0.0.1:PORT/login?once=CODE) works once, for 5 minutes: the browser
    /// then keeps a session cookie, and its address holds no secret. Exit codes as for
    /// `weir status`.
    Dashboard(control::TargetArgs),
    /// Make a new operator project: a keyed count that builds, tests and runs, with a job file
    /// and a README (`weir new --list` shows the languages).
    ///
    /// Exit code 0: made; 2: bad language or name, or the directory is not empty.
    New(new::NewArgs),
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
    /// How the checkpoints capture the state, as the operator's `checkpoint` key in a job file
    /// (docs/JOB.md): the guest's weir_snapshot/weir_restore, an image of its memory and
    /// globals, or auto (the exports when it has them, an image otherwise).
    #[arg(long, value_name = "CAPTURE", value_enum, default_value_t = CaptureArg::Auto)]
    checkpoint: CaptureArg,
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

/// `--checkpoint`: the job file's spellings of [`StateCapture`].
#[derive(Clone, Copy, ValueEnum)]
enum CaptureArg {
    /// The guest's own weir_snapshot and weir_restore exports.
    Exports,
    /// An image of the instance's memory and globals, taken by the host.
    Image,
    /// The exports when the module has either of them, an image otherwise.
    Auto,
}

impl From<CaptureArg> for StateCapture {
    fn from(arg: CaptureArg) -> Self {
        match arg {
            CaptureArg::Exports => StateCapture::Exports,
            CaptureArg::Image => StateCapture::Image,
            CaptureArg::Auto => StateCapture::Auto,
        }
    }
}

fn main() -> ExitCode {
    quiet_on_broken_pipe();
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
        Command::Run(args) => run::run(args, on_terminal),
        Command::Validate(args) => validate(args),
        Command::Test(args) => test(args),
        Command::Checkpoints(args) => checkpoints::run(args),
        Command::Status(args) => control::status(args),
        Command::Savepoint(args) => control::savepoint(args, false),
        Command::Stop(args) => control::savepoint(args, true),
        Command::Rescale(args) => control::rescale(args),
        Command::Cancel(args) => control::cancel(args),
        Command::Dashboard(args) => control::dashboard(args),
        Command::New(args) => new::run(args),
    }
}

/// Exit code when a reader closed the pipe of standard output, as for a program ended by SIGPIPE.
const EXIT_BROKEN_PIPE: i32 = 141;

/// A reader that stops reading early (`weir validate m.wasm | head`) closes standard output, and
/// printing then panics. That is not a failure of `weir`: it ends quietly instead, as a program
/// ended by SIGPIPE does.
fn quiet_on_broken_pipe() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        default(info)
    }));
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
        capture: args.checkpoint.into(),
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
