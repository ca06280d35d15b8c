//! `weir` as a child process: a `weir run` a test watches, signals and kills ([`Weir`]), and a
//! verb run to its end ([`weir_command`]). Every wait is bounded, and a process never outlives
//! its handle.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::{
    CLI_TIMEOUT, JOB_STARTING, LOAD_TIMEOUT, Sandbox, assert_committed_output, committed_lines,
    complete_checkpoint_ids, weir_bin,
};

/// A running `weir` process. Killed (SIGKILL) and reaped on drop if still running, so a failing
/// test never leaves one behind. Its stderr goes to a file, readable while it runs.
pub(crate) struct Weir {
    child: Option<Child>,
    stderr: PathBuf,
    started: Instant,
}

/// How a `weir` process ended.
#[derive(Debug)]
pub(crate) struct Ended {
    /// Its exit status.
    pub(crate) status: ExitStatus,
    /// Everything it wrote to stderr (logs and the summary).
    pub(crate) stderr: String,
}

impl Ended {
    /// The exit code; `None` when a signal ended it.
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Fails unless the process exited with `code`, showing its stderr.
    pub(crate) fn assert_code(&self, code: i32, context: &str) {
        assert_eq!(
            self.code(),
            Some(code),
            "{context}: `weir` ended with {}; its stderr:\n{}",
            self.status,
            self.stderr
        );
    }

    /// Fails unless the process was killed at the kill point `point` (its name, without
    /// `:N`): by SIGKILL, or SIGABRT where the `kill` program could not be run, having said so.
    #[track_caller]
    pub(crate) fn assert_killed_at(&self, point: &str, context: &str) {
        use std::os::unix::process::ExitStatusExt as _;
        assert!(
            matches!(self.status.signal(), Some(9 | 6))
                && self
                    .stderr
                    .contains(&format!("kill point `{point}` reached")),
            "{context}: `weir` should be killed at `{point}`, and ended with {}; its stderr:\n{}",
            self.status,
            self.stderr
        );
    }

    /// Fails unless its stderr contains `text`, showing what it holds.
    #[track_caller]
    pub(crate) fn assert_stderr_contains(&self, text: &str) {
        assert_stream("stderr", &self.stderr, text, true);
    }

    /// Fails if its stderr contains `text`, showing what it holds.
    #[track_caller]
    pub(crate) fn assert_stderr_lacks(&self, text: &str) {
        assert_stream("stderr", &self.stderr, text, false);
    }
}

impl Weir {
    /// Starts `weir run <job> <args…>`, its stderr going to `stderr_file`.
    pub(crate) fn run(job: &Path, args: &[&str], stderr_file: &Path) -> Weir {
        Weir::run_with_env(job, args, &[], stderr_file)
    }

    /// [`Weir::run`] with these environment variables set (a kill point, say).
    pub(crate) fn run_with_env(
        job: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        stderr_file: &Path,
    ) -> Weir {
        let stderr = fs::File::create(stderr_file).expect("a file for the stderr of weir");
        let child = Command::new(weir_bin())
            .arg("run")
            .arg(job)
            .args(args)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", weir_bin().display()));
        Weir {
            child: Some(child),
            stderr: stderr_file.to_path_buf(),
            started: Instant::now(),
        }
    }

    /// `weir run JOB ARGS` with the kill point `point` (`NAME:N`) armed, waited for to its end
    /// (killed there, or ended on its own if it never reaches the point), at most
    /// [`CLI_TIMEOUT`]; its standard error goes to `stderr_file`.
    pub(crate) fn run_to_kill_point(
        job: &Path,
        args: &[&str],
        point: &str,
        stderr_file: &Path,
    ) -> Ended {
        Weir::run_with_env(
            job,
            args,
            &[(weir::kill_point::ENV_VAR, point)],
            stderr_file,
        )
        .wait(CLI_TIMEOUT)
    }

    /// The sandbox's job run to the kill point `point` (`NAME:N`) as
    /// [`Weir::run_to_kill_point`] runs it, its stderr in `killed.log`; fails, showing that
    /// stderr, unless it reached the point and was killed there (SIGKILL, or SIGABRT where the
    /// `kill` program could not be run).
    #[cfg(unix)]
    #[track_caller]
    pub(crate) fn killed_at(sandbox: &Sandbox, point: &str) -> Ended {
        let job = sandbox.job_path();
        let ended = Weir::run_to_kill_point(&job, &[], point, &sandbox.join("killed.log"));
        let name = point.split_once(':').map_or(point, |(name, _)| name);
        ended.assert_killed_at(name, &format!("`weir run {}`", job.display()));
        ended
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// How long ago it was started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// What it has written to stderr so far.
    pub(crate) fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Its exit status, if it has exited.
    pub(crate) fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .expect("running")
            .try_wait()
            .expect("waiting for weir")
    }

    /// Waits until `done` holds, polling every 10 ms. Returns false if the process exited first
    /// (and `done` still does not hold); panics, showing stderr, after `timeout`.
    pub(crate) fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&Weir) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self) {
                return true;
            }
            if self.try_exit().is_some() {
                return done(self);
            }
            assert!(
                Instant::now() < deadline,
                "waited {timeout:?} for {what}; stderr of weir:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits until its stderr holds `text`; fails, showing that stderr, when the process ends
    /// first, or after [`CLI_TIMEOUT`].
    #[track_caller]
    pub(crate) fn wait_for_log(&mut self, text: &str) {
        let logged = self.wait_until(&format!("{text:?} in the log"), CLI_TIMEOUT, |w| {
            w.stderr().contains(text)
        });
        assert!(
            logged,
            "`weir` ended before it logged {text:?}; its stderr:\n{}",
            self.stderr()
        );
    }

    /// Sends SIGKILL (unless it already exited) and reaps it.
    pub(crate) fn kill(mut self) -> Ended {
        let mut child = self.child.take().expect("running");
        let _ = child.kill();
        let status = child.wait().expect("reaping weir");
        Ended {
            status,
            stderr: self.stderr(),
        }
    }

    /// Sends SIGTERM: a graceful stop (a cancel, or a stop with a savepoint).
    pub(crate) fn terminate(&self) {
        self.signal("TERM");
    }

    /// Sends the signal of this name (`STOP`, `CONT`, …).
    pub(crate) fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .unwrap_or_else(|e| panic!("cannot run `kill -{name}`: {e}"));
        assert!(status.success(), "`kill -{name} {}` failed", self.pid());
    }

    /// Waits for it to end on its own ([`Weir::wait`], [`CLI_TIMEOUT`]) with exit code 0; fails,
    /// for `context`, unless it did and left exactly `expected` committed by the sandbox's file
    /// sink and nothing in progress ([`assert_committed_output`]).
    #[track_caller]
    pub(crate) fn assert_ends_committing(
        self,
        sandbox: &Sandbox,
        expected: &[String],
        context: &str,
    ) {
        self.wait(CLI_TIMEOUT).assert_code(0, context);
        assert_committed_output(&sandbox.out_dir(), expected, context);
    }

    /// Waits for it to exit on its own; after `timeout` kills it and fails, showing stderr.
    ///
    /// `timeout` counts from the job's start ([`JOB_STARTING`]), or from this call if it started
    /// before: loading the modules has [`LOAD_TIMEOUT`] of its own, so that a component
    /// compiled on a busy machine does not eat the time of the job itself.
    pub(crate) fn wait(mut self, timeout: Duration) -> Ended {
        let called = Instant::now();
        let mut deadline = None;
        let mut polls = 0u32;
        loop {
            if let Some(status) = self.try_exit() {
                self.child = None;
                return Ended {
                    status,
                    stderr: self.stderr(),
                };
            }
            let now = Instant::now();
            match deadline {
                Some(deadline) if now >= deadline => break,
                Some(_) => {}
                None if now >= called + LOAD_TIMEOUT + timeout => break,
                // Its stderr read every 100 ms, not at every poll: it may be long.
                None if polls.is_multiple_of(10) && self.stderr().contains(JOB_STARTING) => {
                    deadline = Some(now + timeout);
                }
                None => {}
            }
            polls += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        let ended = self.kill();
        panic!(
            "`weir` did not exit within {timeout:?} of its job's start (or {LOAD_TIMEOUT:?} more \
             before it); killed it; its stderr:\n{}",
            ended.stderr
        );
    }
}

impl Drop for Weir {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What a command (`weir`'s, or another program's) printed, and how it ended.
#[derive(Debug)]
pub(crate) struct CliOutput {
    /// The exit code; `None` when a signal ended it.
    pub(crate) code: Option<i32>,
    /// Its standard output.
    pub(crate) stdout: String,
    /// Its standard error.
    pub(crate) stderr: String,
}

impl CliOutput {
    /// Fails unless the command exited with `code`, showing what it printed.
    #[track_caller]
    pub(crate) fn assert_code(&self, code: i32, context: &str) {
        assert_eq!(
            self.code,
            Some(code),
            "{context}: exit code {:?} instead of {code}\nstdout:\n{}\nstderr:\n{}",
            self.code,
            self.stdout,
            self.stderr
        );
    }

    /// Fails unless its standard error contains `text`, showing what it holds.
    #[track_caller]
    pub(crate) fn assert_stderr_contains(&self, text: &str) {
        assert_stream("stderr", &self.stderr, text, true);
    }

    /// Fails if its standard error contains `text`, showing what it holds.
    #[track_caller]
    pub(crate) fn assert_stderr_lacks(&self, text: &str) {
        assert_stream("stderr", &self.stderr, text, false);
    }

    /// Fails unless its standard output contains `text`, showing what it holds.
    #[track_caller]
    pub(crate) fn assert_stdout_contains(&self, text: &str) {
        assert_stream("stdout", &self.stdout, text, true);
    }

    /// Fails if its standard output contains `text`, showing what it holds.
    #[track_caller]
    pub(crate) fn assert_stdout_lacks(&self, text: &str) {
        assert_stream("stdout", &self.stdout, text, false);
    }

    /// The lines of its standard output from the first that starts with `header` (a table's
    /// header row) on; fails, showing that output, when no line does.
    #[track_caller]
    pub(crate) fn stdout_table(&self, header: &str) -> Vec<&str> {
        let lines: Vec<&str> = self.stdout.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with(header))
            .unwrap_or_else(|| panic!("no table headed {header:?} in:\n{}", self.stdout));
        lines[at..].to_vec()
    }

    /// Its standard output read as JSON; fails, showing it, when it is not JSON.
    #[track_caller]
    pub(crate) fn stdout_json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}):\n{}", self.stdout))
    }
}

/// Fails unless `stream`, what a command printed on its standard output or error (`name`),
/// contains `text` when it should and lacks it when it should not.
#[track_caller]
fn assert_stream(name: &str, stream: &str, text: &str, should: bool) {
    let says = if should { "lacks" } else { "contains" };
    assert_eq!(
        stream.contains(text),
        should,
        "{name} {says} {text:?}:\n{stream}"
    );
}

/// Runs `weir ARGS` to its end with `stdin` as its standard input and `env` set (and no
/// `WEIR_CONTROL_TOKEN` from the test's own environment), killing it and failing after
/// [`CLI_TIMEOUT`]. Its streams go through files in `sandbox`, so nothing blocks on a full pipe.
/// The one way the tests run a `weir` verb to its end; [`Weir`] is for a `weir run` they watch.
pub(crate) fn weir_command(
    sandbox: &Sandbox,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> CliOutput {
    run_program(sandbox, weir_bin(), args, stdin, env)
}

/// Runs `program ARGS` as [`weir_command`] runs `weir`.
pub(crate) fn run_program(
    sandbox: &Sandbox,
    program: &Path,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> CliOutput {
    let (input, out, err) = (
        sandbox.join("cmd.stdin"),
        sandbox.join("cmd.stdout"),
        sandbox.join("cmd.stderr"),
    );
    fs::write(&input, stdin).unwrap();
    let mut child = Command::new(program)
        .args(args)
        .env_remove("WEIR_CONTROL_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::from(fs::File::open(&input).unwrap()))
        .stdout(Stdio::from(fs::File::create(&out).unwrap()))
        .stderr(Stdio::from(fs::File::create(&err).unwrap()))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > CLI_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`{} {}` ran longer than {CLI_TIMEOUT:?}",
                program.display(),
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    CliOutput {
        code: status.code(),
        stdout: fs::read_to_string(&out).unwrap(),
        stderr: fs::read_to_string(&err).unwrap(),
    }
}

/// The savepoint a `weir run` summary names (`savepoint:     PATH (restore with …)`).
#[track_caller]
pub(crate) fn savepoint_named(stderr: &str) -> PathBuf {
    let line = stderr
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("savepoint:"))
        .unwrap_or_else(|| panic!("the summary names no savepoint:\n{stderr}"));
    PathBuf::from(
        line.split_whitespace()
            .next()
            .expect("a path after `savepoint:`"),
    )
}

/// Runs the job of `sandbox` with `--savepoint-on-stop` (its stderr in `log`) until checkpoint
/// `checkpoints` (or a later one) completed, stops it with SIGTERM and returns the savepoint it
/// took. By id, not by the checkpoints on disk, which retention prunes.
pub(crate) fn stop_with_savepoint(sandbox: &Sandbox, log: &Path, checkpoints: u64) -> PathBuf {
    let mut weir = Weir::run(&sandbox.job_path(), &["--savepoint-on-stop"], log);
    let dir = sandbox.checkpoint_dir();
    let running = weir.wait_until("checkpoints", CLI_TIMEOUT, |_| {
        complete_checkpoint_ids(&dir)
            .last()
            .is_some_and(|&id| id >= checkpoints)
    });
    assert!(
        running,
        "the job ended before {checkpoints} checkpoints:\n{}",
        weir.stderr()
    );
    weir.terminate();
    let ended = weir.wait(CLI_TIMEOUT);
    ended.assert_code(0, "a stop with a savepoint");
    savepoint_named(&ended.stderr)
}

/// Runs `weir run <job> <args…>` to its end (at most [`CLI_TIMEOUT`]), stderr in `stderr_file`.
pub(crate) fn run_cli(job: &Path, args: &[&str], stderr_file: &Path) -> Ended {
    Weir::run(job, args, stderr_file).wait(CLI_TIMEOUT)
}

/// The committed output of the sandbox's job (written beforehand) run undisturbed to its end,
/// at most `timeout` from the job's start, its stderr in `weir.log`: the reference a run with
/// failures must commit.
#[track_caller]
pub(crate) fn reference_output(sandbox: &Sandbox, timeout: Duration) -> Vec<String> {
    Weir::run(&sandbox.job_path(), &[], &sandbox.join("weir.log"))
        .wait(timeout)
        .assert_code(0, "the reference run");
    committed_lines(&sandbox.out_dir())
}
