//! What the end-to-end tests share: the `weir` binary, a temp folder per run, job files with
//! absolute paths, child processes that never outlive a test, in-process runs that never hang
//! it, committed sink output, checkpoint directories, a seeded random source, and the rows of
//! the reliability table.
//!
//! | File            | What it holds                                                           |
//! |-----------------|-------------------------------------------------------------------------|
//! | `binary.rs`     | the `weir` binary of this build, the workspace root, foreign guests,    |
//! |                 | and [`skip`]: what a test does when something it needs is missing       |
//! | `sandbox.rs`    | [`Sandbox`]: a temp folder per run                                      |
//! | `job_file.rs`   | [`JobFile`] and the jobs most tests run, their input text and output    |
//! | `output.rs`     | committed output, in-progress files, checkpoint directories on disk     |
//! | `cli.rs`        | [`Weir`]: `weir` as a child process; [`weir_command`] for a verb        |
//! | `in_process.rs` | [`InProcess`]: a job run through the library; a guest instance          |
//! | `rng.rs`        | [`Rng`] and the seeds and numbers read from the environment             |
//! | `http.rs`       | [`raw_exchange`]: a raw HTTP/1.1 request to the control server          |
//! | `report.rs`     | rows of docs/RELIABILITY.md, written by the fault tests                 |
//!
//! Every item is re-exported here, so a test names `crate::support::Weir`, whatever file holds
//! it (the report keeps its module: `report::record(&report::Row { … })` reads as what it is).
//!
//! Every wait is bounded ([`CLI_TIMEOUT`], [`JOB_TIMEOUT`]); a child `weir` is killed when its
//! [`Weir`] handle drops, so a failing assertion never leaves a process behind.

use std::time::Duration;

mod binary;
mod cli;
mod http;
mod in_process;
mod job_file;
mod output;
pub(crate) mod report;
mod rng;
mod sandbox;

pub(crate) use binary::*;
pub(crate) use cli::*;
pub(crate) use http::*;
pub(crate) use in_process::*;
pub(crate) use job_file::*;
pub(crate) use output::*;
pub(crate) use rng::*;
pub(crate) use sandbox::*;

/// The longest one `weir` process may run in a test (or wait for a condition) before it is
/// killed and the test fails.
pub(crate) const CLI_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest an in-process job may run; see [`CLI_TIMEOUT`].
pub(crate) const JOB_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest `weir run` may take to load its modules before the job starts, on top of the
/// timeout of [`Weir::wait`]. Compiling a component is the job's first run's alone (the module
/// cache serves the next ones) and its cost is the machine's: a 12 MB JavaScript component
/// compiled in 36 s on two busy cores, more than half of [`CLI_TIMEOUT`].
pub(crate) const LOAD_TIMEOUT: Duration = Duration::from_secs(240);
/// What `weir run` logs when its modules are loaded and the job starts.
pub(crate) const JOB_STARTING: &str = " starting; checkpoints in ";
