//! Storage faults: what a job does when the storage of its checkpoints fails under it — a disk
//! that fills up, a directory it may not write, a file system remounted read-only, a metadata
//! write that fails — and what a restore does with damaged files of completed checkpoints.
//!
//! What is proved (docs/CHECKPOINTS.md §9, "Storage faults"):
//!
//! - a checkpoint whose files cannot be written is declined (a state file) or not recorded (the
//!   metadata), with a message naming the file and the operating system's error, and counts
//!   against `tolerable_failures`: within it the job keeps running and finishes with the output
//!   of a run without faults; beyond it the job fails, naming the cause;
//! - what an aborted checkpoint wrote does not stay: its directory goes while the job runs (at
//!   the abort, again when a late write reports, and in a sweep at the next completion), and
//!   the cleanup at the end of the job removes anything left — checked by sampling the
//!   directory during the run (never more than a few incomplete directories, however many
//!   checkpoints fail) and after it (none, and no `.tmp` file);
//! - every complete checkpoint left behind restores (`weir run --restore PATH`) to the output
//!   of a run without faults;
//! - any bit flipped, any cut, a missing or swapped file in a complete checkpoint is refused
//!   naming the file, and `--restore latest` falls back to the older intact checkpoint.
//!
//! Real faults where the machine allows them; injected ones ([`FaultyStorage`], same messages)
//! where it does not (or when `WEIR_STORAGE_FAULTS_INJECT` is set), announced on stderr past
//! the test harness's capture — never a silent pass:
//!
//! - **disk full**: a tmpfs mounted on the checkpoint directory, sized from the state of a
//!   reference run so that the job's own growing state fills it part way through (needs Linux
//!   and the right to mount);
//! - **read-only**: a tmpfs remounted `ro` while the job runs, then `rw` again;
//! - **permission denied**: the checkpoint directory's mode set to 555 under a `weir` child
//!   process that is not root — run as user `nobody` when the tests run as root, whom modes do
//!   not stop;
//! - **metadata write fails**: always injected, since no real fault picks exactly the commit
//!   point.
//!
//! The jobs: a generator with many keys → `count` (its state grows with every new key) → the
//! exactly-once file sink, rate-limited so that the faults happen while it runs, with
//! `[restart] strategy = "none"` so that a failure cannot hide behind a restart.

use std::fs;
use std::io::{self, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use weir::checkpoint::layout::CheckpointLayout;
use weir::checkpoint::restore::{restore_from_path, restore_latest};
use weir::checkpoint::storage::{CheckpointStorage, Fault, FaultyStorage, LocalStorage};
use weir::job::JobStatus;
use weir::runtime::JobMonitor;

use crate::support::report;
use crate::support::{
    CLI_TIMEOUT, GeneratorSpec, InProcess, JobFile, Rng, Sandbox, assert_committed_output,
    assert_same_output, checkpoint_dirs, committed_lines, generator_count, incomplete_checkpoints,
    run_cli, run_in_process, seed_from_env, weir_bin,
};

/// Records the generator emits in every job of this module.
const RECORDS: u64 = 60_000;
/// Distinct keys: about 86% of them appear by the end, so `count`'s state grows all the way.
const KEYS: u64 = 30_000;
/// Records per second of the fault runs: 3 s at least, whatever the machine.
const RATE: f64 = 20_000.0;
/// Failed checkpoints a scenario waits for before it repairs the storage.
const FAILURES: u64 = 3;
/// The most incomplete checkpoint directories allowed on disk at any moment of a run: the one
/// in flight and a few aborted ones whose late writes have not reported yet.
const MOST_INCOMPLETE: usize = 4;
/// Page size of tmpfs accounting.
const PAGE: u64 = 4096;

// ---------------------------------------------------------------------------------------------
// The job and its reference output

fn generator(rate: Option<f64>) -> GeneratorSpec {
    GeneratorSpec {
        parallelism: 2,
        seed: 11,
        count: Some(RECORDS),
        rate,
        keys: KEYS,
    }
}

/// generator → count → file sink with checkpoints every 100 ms into `checkpoints`, keeping one,
/// tolerating `tolerable` failures in a row, never restarting.
fn job(sandbox: &Sandbox, rate: Option<f64>, checkpoints: &Path, tolerable: u32) -> JobFile {
    generator_count(sandbox, &generator(rate))
        .checkpoint("interval", "100ms")
        .checkpoint("mode", "exactly-once")
        .checkpoint("directory", checkpoints)
        .checkpoint("retained", 1u32)
        .checkpoint("tolerable_failures", tolerable)
        .restart("strategy = \"none\"")
}

/// The job of `sandbox` at [`RATE`] records a second, tolerating `tolerable` checkpoint
/// failures in a row, started in this process on `storage`; and the watch on the incomplete
/// checkpoints in its checkpoint directory.
fn start_on(
    sandbox: &Sandbox,
    tolerable: u32,
    storage: Arc<dyn CheckpointStorage>,
) -> (InProcess, Strays) {
    let checkpoints = sandbox.checkpoint_dir();
    job(sandbox, Some(RATE), &checkpoints, tolerable).write(&sandbox.job_path());
    let running = InProcess::start_with_storage(&sandbox.job_path(), storage);
    (running, Strays::new(&checkpoints))
}

/// What a run without faults produces.
struct Reference {
    /// The committed output.
    lines: Vec<String>,
    /// The disk space its final checkpoint takes on tmpfs: every file rounded up to pages.
    footprint: u64,
}

/// The reference run, once for the whole module: as fast as it goes, on the ordinary disk.
fn reference() -> &'static Reference {
    static REFERENCE: OnceLock<Reference> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let sandbox = Sandbox::new("storage-reference");
        job(&sandbox, None, &sandbox.checkpoint_dir(), 0).write(&sandbox.job_path());
        let outcome = run_in_process(&sandbox.job_path());
        assert_eq!(outcome.status, JobStatus::Finished, "{outcome:?}");
        let lines = committed_lines(&sandbox.out_dir());
        assert_eq!(lines.len() as u64, RECORDS, "one output line per record");
        let dirs = checkpoint_dirs(&sandbox.checkpoint_dir());
        let last = dirs
            .last()
            .expect("the reference run completed a checkpoint");
        let footprint = fs::read_dir(&last.path)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len().div_ceil(PAGE) * PAGE)
            .sum();
        Reference { lines, footprint }
    })
}

// ---------------------------------------------------------------------------------------------
// Announcing a fallback

/// Set (to anything) to take the injected path even where the real fault can be produced: to
/// check the fallback itself.
const FORCE_INJECTED: &str = "WEIR_STORAGE_FAULTS_INJECT";

/// `Err` naming [`FORCE_INJECTED`] when it is set.
fn check_not_forced() -> Result<(), String> {
    match std::env::var_os(FORCE_INJECTED) {
        Some(_) => Err(format!("{FORCE_INJECTED} is set")),
        None => Ok(()),
    }
}

/// Says, past the test harness's capture, that a real fault could not be produced and an
/// injected one stands in for it.
fn announce_fallback(test: &str, real: &str, why: &str, instead: &str) {
    let _ = writeln!(
        io::stderr(),
        "\n!!! storage_faults::{test}: cannot produce a real {real} on this machine ({why});\n\
         !!! FALLING BACK to {instead}. The real fault path is NOT exercised here.\n"
    );
}

// ---------------------------------------------------------------------------------------------
// A tmpfs mount that never outlives its test

/// A tmpfs mounted on a directory; unmounted on drop, also when the test fails.
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` bytes on `dir` (created if missing), or says why it cannot.
    fn mount(dir: &Path, size: u64) -> Result<Tmpfs, String> {
        check_not_forced()?;
        if !cfg!(target_os = "linux") {
            return Err("tmpfs mounts are only tried on Linux".into());
        }
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        mount(
            &["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"],
            dir,
        )?;
        Ok(Tmpfs {
            dir: dir.to_path_buf(),
        })
    }

    /// `mount -o remount,<options>`: e.g. `size=64m`, `ro`, `rw`.
    fn remount(&self, options: &str) -> Result<(), String> {
        mount(&["-o", &format!("remount,{options}")], &self.dir)
    }

    /// Remounts read-only, retrying while a file is open for writing (`EBUSY`).
    fn remount_read_only(&self) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Err(e) = self.remount("ro") {
            assert!(
                Instant::now() < deadline,
                "cannot remount {} read-only: {e}",
                self.dir.display()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// Runs `mount <args> <dir>`, returning its complaint on failure.
fn mount(args: &[&str], dir: &Path) -> Result<(), String> {
    let out = Command::new("mount")
        .args(args)
        .arg(dir)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run `mount`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`mount {} {}` failed: {}",
            args.join(" "),
            dir.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // A job of a failed test may still hold files open: retry, then detach lazily.
        for _ in 0..50 {
            let done = Command::new("umount")
                .arg(&self.dir)
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if done {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

// ---------------------------------------------------------------------------------------------
// What is on disk

/// Samples a checkpoint directory while a job runs: the most incomplete checkpoint
/// directories seen at once.
struct Strays {
    dir: PathBuf,
    most: usize,
}

impl Strays {
    fn new(dir: &Path) -> Strays {
        Strays {
            dir: dir.to_path_buf(),
            most: 0,
        }
    }

    fn sample(&mut self) {
        self.most = self.most.max(incomplete_checkpoints(&self.dir).len());
    }

    /// Fails if failed checkpoints piled up during the run, or if anything of them is left
    /// now that the job has ended.
    fn assert_none_left(&self) {
        assert!(
            self.most <= MOST_INCOMPLETE,
            "{} incomplete checkpoint directories at once during the run in {}: failed \
             checkpoints pile up",
            self.most,
            self.dir.display()
        );
        let incomplete = incomplete_checkpoints(&self.dir);
        assert!(
            incomplete.is_empty(),
            "incomplete checkpoints left after the job ended: {incomplete:?}"
        );
        let temp = temp_files(&self.dir);
        assert!(
            temp.is_empty(),
            "temporary files left after the job ended: {temp:?}"
        );
    }
}

/// Every `*.tmp` file under `dir`.
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return found;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(temp_files(&path));
        } else if path.extension().is_some_and(|e| e == "tmp") {
            found.push(path);
        }
    }
    found
}

/// What a job that met a storage fault and finished must leave behind: nothing of its failed
/// checkpoints ([`Strays::assert_none_left`]), the reference output (`what` names the job in the
/// message), and a checkpoint that restores ([`assert_left_checkpoint_restores`], whose count it
/// returns).
fn assert_recovered(
    sandbox: &Sandbox,
    reference: &Reference,
    strays: &Strays,
    checkpoints: &Path,
    what: &str,
) -> u64 {
    strays.assert_none_left();
    assert_same_output(&committed_lines(&sandbox.out_dir()), &reference.lines, what);
    assert_left_checkpoint_restores(sandbox, checkpoints)
}

/// The one complete checkpoint in `checkpoints` (one is retained), which must restore: `weir
/// run --restore PATH` with the job's checkpoints now going to an ordinary directory ends the
/// job with the reference output and no in-progress part left.
fn assert_left_checkpoint_restores(sandbox: &Sandbox, checkpoints: &Path) -> u64 {
    let complete: Vec<_> = checkpoint_dirs(checkpoints)
        .into_iter()
        .filter(|c| c.complete)
        .collect();
    assert_eq!(
        complete.len(),
        1,
        "complete checkpoints left (one is retained): {complete:?}"
    );
    let restored = sandbox.join("restored");
    let job_path = sandbox.join("restore.toml");
    job(sandbox, None, &restored, 0).write(&job_path);
    let path = complete[0].path.to_str().unwrap();
    let ended = run_cli(
        &job_path,
        &["--restore", path],
        &sandbox.join("restore.log"),
    );
    ended.assert_code(0, &format!("restoring {path}"));
    ended.assert_stderr_contains(&format!("restoring from {path}"));
    assert_committed_output(
        &sandbox.out_dir(),
        &reference().lines,
        &format!("after restoring {path}"),
    );
    complete[0].id
}

/// Fails unless every reason names a file in `checkpoints` and says `error`.
fn assert_reasons_name_file_and_error(reasons: &[String], checkpoints: &Path, error: &str) {
    assert!(!reasons.is_empty(), "no checkpoint failure reported");
    let dir = format!("{}/chk-", checkpoints.display());
    for reason in reasons {
        assert!(
            reason.contains(&dir) && reason.contains(error),
            "a checkpoint failure should name a file in {dir}… and say {error:?}: {reason}"
        );
    }
}

fn reasons(monitor: &JobMonitor) -> Vec<String> {
    monitor
        .recent_failures()
        .into_iter()
        .map(|f| f.reason)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Disk full

/// The tmpfs size at which the job's own state fills the disk part way through: the retained
/// checkpoint and the one being written both fit while their state is below 60% of the final
/// one (about 37% of the records, given how keys accumulate).
fn filling_size() -> u64 {
    (reference().footprint * 6 / 5).div_ceil(PAGE) * PAGE
}

/// How the scenario's storage fails.
enum DiskFull {
    /// A real tmpfs, which the job's state fills.
    Real(Tmpfs),
    /// Injected: every write fails with ENOSPC once the job has completed two checkpoints.
    Injected(Arc<FaultyStorage>),
}

impl DiskFull {
    fn set_up(sandbox: &Sandbox, test: &str) -> (DiskFull, Arc<dyn CheckpointStorage>) {
        let dir = sandbox.checkpoint_dir();
        let layout = CheckpointLayout::new(&dir);
        match Tmpfs::mount(&dir, filling_size()) {
            Ok(tmpfs) => (
                DiskFull::Real(tmpfs),
                Arc::new(LocalStorage::new(layout)) as Arc<dyn CheckpointStorage>,
            ),
            Err(why) => {
                announce_fallback(
                    test,
                    "full disk (a small tmpfs)",
                    &why,
                    "ENOSPC injected on every checkpoint write (FaultyStorage)",
                );
                let faulty = Arc::new(FaultyStorage::local(layout));
                (DiskFull::Injected(Arc::clone(&faulty)), faulty)
            }
        }
    }

    /// Waits for the disk to fill (real) or fills it (injected) after two completions.
    fn fill(&self, running: &InProcess) {
        if let DiskFull::Injected(faulty) = self {
            running.wait_until("two checkpoints to complete", CLI_TIMEOUT, |m| {
                m.checkpoint_counts().0 >= 2
            });
            faulty.break_writes(io::ErrorKind::StorageFull);
        }
    }

    fn free(&self) {
        match self {
            DiskFull::Real(tmpfs) => tmpfs.remount("size=64m").unwrap(),
            DiskFull::Injected(faulty) => faulty.heal(),
        }
    }

    fn faults(&self) -> &'static str {
        match self {
            DiskFull::Real(_) => "ENOSPC: the job's growing state fills a small tmpfs",
            DiskFull::Injected(_) => "ENOSPC injected on every write (FaultyStorage; no tmpfs)",
        }
    }
}

#[test]
fn disk_full_declines_checkpoints_until_space_is_freed_and_the_job_finishes() {
    let reference = reference();
    let sandbox = Sandbox::new("disk-full");
    let checkpoints = sandbox.checkpoint_dir();
    let (disk, storage) = DiskFull::set_up(&sandbox, "disk_full_declines_checkpoints");
    let (running, mut strays) = start_on(&sandbox, 1_000, storage);

    disk.fill(&running);
    running.wait_until("checkpoints to fail for want of space", CLI_TIMEOUT, |m| {
        strays.sample();
        m.checkpoint_counts().1 >= FAILURES
    });
    let completed_before = running.monitor().checkpoint_counts().0;
    assert!(completed_before >= 1, "no checkpoint completed before");
    // Many more failures, to see that their directories do not pile up.
    running.wait_until("more checkpoints to fail", CLI_TIMEOUT, |m| {
        strays.sample();
        m.checkpoint_counts().1 >= 2 * FAILURES
    });
    disk.free();
    let monitor = running.monitor().clone();
    let outcome = running.join_sampling(|| strays.sample());

    assert_eq!(outcome.status, JobStatus::Finished, "{outcome:?}");
    let (completed, failed) = monitor.checkpoint_counts();
    let reasons = reasons(&monitor);
    assert_reasons_name_file_and_error(&reasons, &checkpoints, "No space left on device");
    assert!(
        completed > completed_before,
        "no checkpoint completed after the space was freed"
    );
    let restored = assert_recovered(
        &sandbox,
        reference,
        &strays,
        &checkpoints,
        "the job that ran out of space",
    );

    report::record(&report::Row {
        area: "storage",
        scenario: "checkpoint directory fills up while the job runs, then space is freed",
        rounds: completed + failed,
        faults: disk.faults(),
        result: &format!(
            "{failed} checkpoints failed with `No space left on device` naming the file, the job \
             finished within tolerable_failures and {completed} completed; at most {} incomplete \
             directories at once, none left; chk-{restored} restores to the reference output",
            strays.most
        ),
    });
}

#[test]
fn disk_full_beyond_the_tolerable_failures_fails_the_job_naming_the_file() {
    let sandbox = Sandbox::new("disk-full-fails");
    let checkpoints = sandbox.checkpoint_dir();
    let (disk, storage) = DiskFull::set_up(&sandbox, "disk_full_beyond_the_tolerable_failures");
    let (running, mut strays) = start_on(&sandbox, 2, storage);
    disk.fill(&running);
    let monitor = running.monitor().clone();
    let outcome = running.join_sampling(|| strays.sample());

    assert_eq!(outcome.status, JobStatus::Failed, "{outcome:?}");
    let failure = outcome.failure.unwrap_or_default();
    assert!(
        failure.starts_with("3 checkpoint failures in a row exceed the 2 tolerated"),
        "{failure}"
    );
    assert_reasons_name_file_and_error(
        std::slice::from_ref(&failure),
        &checkpoints,
        "No space left on device (os error 28)",
    );
    let (completed, failed) = monitor.checkpoint_counts();
    assert_eq!(failed, 3, "{:#?}", monitor.recent_failures());
    strays.assert_none_left();
    // The checkpoint that completed before the disk filled is intact: the job goes on from it.
    let restored = assert_left_checkpoint_restores(&sandbox, &checkpoints);

    report::record(&report::Row {
        area: "storage",
        scenario: "checkpoint directory fills up and stays full",
        rounds: completed + failed,
        faults: disk.faults(),
        result: &format!(
            "the job failed at the 3rd failure in a row (tolerable_failures = 2) naming the file \
             and `No space left on device`; no incomplete directory left; chk-{restored}, \
             completed before, restores to the reference output"
        ),
    });
}

// ---------------------------------------------------------------------------------------------
// Read-only file system

#[test]
fn read_only_checkpoint_directory_declines_checkpoints_until_it_is_writable_again() {
    let reference = reference();
    let sandbox = Sandbox::new("read-only");
    let checkpoints = sandbox.checkpoint_dir();
    let layout = CheckpointLayout::new(&checkpoints);
    let (tmpfs, faulty, storage): (_, _, Arc<dyn CheckpointStorage>) =
        match Tmpfs::mount(&checkpoints, 64 << 20) {
            Ok(tmpfs) => (Some(tmpfs), None, Arc::new(LocalStorage::new(layout))),
            Err(why) => {
                announce_fallback(
                    "read_only_checkpoint_directory",
                    "read-only file system (a tmpfs remounted ro)",
                    &why,
                    "EROFS injected on every checkpoint write (FaultyStorage)",
                );
                let faulty = Arc::new(FaultyStorage::local(layout));
                (None, Some(Arc::clone(&faulty)), faulty)
            }
        };
    let (running, mut strays) = start_on(&sandbox, 1_000, storage);
    running.wait_until("two checkpoints to complete", CLI_TIMEOUT, |m| {
        m.checkpoint_counts().0 >= 2
    });
    match (&tmpfs, &faulty) {
        (Some(tmpfs), _) => tmpfs.remount_read_only(),
        (_, Some(faulty)) => faulty.break_writes(io::ErrorKind::ReadOnlyFilesystem),
        _ => unreachable!(),
    }
    let completed_before = running.monitor().checkpoint_counts().0;
    running.wait_until(
        "checkpoints to fail on the read-only directory",
        CLI_TIMEOUT,
        |m| {
            strays.sample();
            m.checkpoint_counts().1 >= FAILURES
        },
    );
    match (&tmpfs, &faulty) {
        (Some(tmpfs), _) => tmpfs.remount("rw").unwrap(),
        (_, Some(faulty)) => faulty.heal(),
        _ => unreachable!(),
    }
    let monitor = running.monitor().clone();
    let outcome = running.join_sampling(|| strays.sample());

    assert_eq!(outcome.status, JobStatus::Finished, "{outcome:?}");
    let (completed, failed) = monitor.checkpoint_counts();
    assert_reasons_name_file_and_error(
        &reasons(&monitor),
        &checkpoints,
        "Read-only file system (os error 30)",
    );
    assert!(
        completed > completed_before,
        "no checkpoint completed after the directory became writable"
    );
    let restored = assert_recovered(
        &sandbox,
        reference,
        &strays,
        &checkpoints,
        "the job whose checkpoint directory was read-only for a while",
    );

    report::record(&report::Row {
        area: "storage",
        scenario: "checkpoint file system remounted read-only while the job runs, then rw",
        rounds: completed + failed,
        faults: if tmpfs.is_some() {
            "EROFS: `mount -o remount,ro` of a tmpfs"
        } else {
            "EROFS injected on every write (FaultyStorage; no tmpfs)"
        },
        result: &format!(
            "{failed} checkpoints failed with `Read-only file system` naming the file, the job \
             finished within tolerable_failures; none left behind; chk-{restored} restores to \
             the reference output"
        ),
    });
}

// ---------------------------------------------------------------------------------------------
// Permission denied

/// The user id a `weir` child runs as so that a directory's mode stops it: `nobody` when these
/// tests run as root (whom modes do not stop), this user otherwise. `Err` when neither works.
fn unprivileged_uid(sandbox: &Sandbox) -> Result<Option<u32>, String> {
    use std::os::unix::fs::MetadataExt as _;
    check_not_forced()?;
    let probe = sandbox.join("whoami");
    fs::write(&probe, b"").unwrap();
    if fs::metadata(&probe).unwrap().uid() != 0 {
        return Ok(None);
    }
    // Root: can `nobody` run weir on this job? (The binary, the guests and the sandbox must be
    // reachable by other users.)
    const NOBODY: u32 = 65534;
    std::os::unix::fs::chown(sandbox.path(), Some(NOBODY), Some(NOBODY))
        .map_err(|e| format!("cannot give the sandbox to nobody: {e}"))?;
    let status = Command::new(weir_bin())
        .args(["validate", weir_tests::guests::COUNT])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .uid_gid(NOBODY)
        .status()
        .map_err(|e| format!("cannot run weir as nobody: {e}"))?;
    if status.success() {
        Ok(Some(NOBODY))
    } else {
        Err(format!(
            "`weir validate` as nobody (uid {NOBODY}) ended with {status}: the binary or the \
             guests are not readable by other users"
        ))
    }
}

/// Sets the user and group of a child, when asked.
trait UidGid {
    fn uid_gid(&mut self, id: u32) -> &mut Self;
}

impl UidGid for Command {
    fn uid_gid(&mut self, id: u32) -> &mut Self {
        use std::os::unix::process::CommandExt as _;
        self.gid(id).uid(id)
    }
}

/// A `weir run` child, killed and reaped on drop.
struct WeirChild {
    child: Option<Child>,
    stderr: PathBuf,
}

impl WeirChild {
    fn run(job: &Path, uid: Option<u32>, stderr: &Path) -> WeirChild {
        let file = fs::File::create(stderr).unwrap();
        let mut cmd = Command::new(weir_bin());
        cmd.arg("run")
            .arg(job)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file);
        if let Some(uid) = uid {
            cmd.uid_gid(uid);
        }
        let child = cmd.spawn().unwrap();
        WeirChild {
            child: Some(child),
            stderr: stderr.to_path_buf(),
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits until `done` holds of the log; fails if the process exits first or after
    /// [`CLI_TIMEOUT`].
    fn wait_until(&mut self, what: &str, mut done: impl FnMut(&str) -> bool) {
        let deadline = Instant::now() + CLI_TIMEOUT;
        loop {
            let log = self.log();
            if done(&log) {
                return;
            }
            let child = self.child.as_mut().unwrap();
            if let Some(status) = child.try_wait().unwrap() {
                panic!("weir ended ({status}) while waiting for {what}:\n{log}");
            }
            assert!(
                Instant::now() < deadline,
                "waited {CLI_TIMEOUT:?} for {what}:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the exit, sampling `strays`; returns the exit code and the log.
    fn wait(mut self, strays: &mut Strays) -> (Option<i32>, String) {
        let deadline = Instant::now() + CLI_TIMEOUT;
        let mut child = self.child.take().unwrap();
        loop {
            strays.sample();
            if let Some(status) = child.try_wait().unwrap() {
                return (status.code(), self.log());
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("weir did not end within {CLI_TIMEOUT:?}:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for WeirChild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The reasons of the failed checkpoints in a `weir` log (`… checkpoint 7 failed: <reason>`).
fn logged_failures(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| {
            let (before, reason) = line.split_once(" failed: ")?;
            let id = before.rsplit_once("checkpoint ")?.1;
            id.chars()
                .all(|c| c.is_ascii_digit())
                .then(|| reason.to_string())
        })
        .collect()
}

/// Completed checkpoints in a `weir` log (`… checkpoint 7 complete: …`).
fn logged_completions(log: &str) -> usize {
    log.lines()
        .filter(|l| l.contains("checkpoint ") && l.contains(" complete: "))
        .count()
}

#[test]
fn permission_denied_declines_checkpoints_until_access_is_restored() {
    let reference = reference();
    let sandbox = Sandbox::new("permission");
    let checkpoints = sandbox.checkpoint_dir();
    job(&sandbox, Some(RATE), &checkpoints, 1_000).write(&sandbox.job_path());
    let uid = match unprivileged_uid(&sandbox) {
        Ok(uid) => uid,
        Err(why) => {
            announce_fallback(
                "permission_denied_declines_checkpoints",
                "permission denied (mode 555 under a process that is not root)",
                &why,
                "EACCES injected on every checkpoint write (FaultyStorage)",
            );
            return permission_denied_injected(&sandbox, reference);
        }
    };
    let mut strays = Strays::new(&checkpoints);
    let mut weir = WeirChild::run(&sandbox.job_path(), uid, &sandbox.join("weir.log"));
    weir.wait_until("two checkpoints to complete", |log| {
        logged_completions(log) >= 2
    });
    let completed_before = logged_completions(&weir.log());
    fs::set_permissions(&checkpoints, fs::Permissions::from_mode(0o555)).unwrap();
    weir.wait_until("checkpoints to be refused", |log| {
        strays.sample();
        logged_failures(log).len() as u64 >= FAILURES
    });
    fs::set_permissions(&checkpoints, fs::Permissions::from_mode(0o755)).unwrap();
    let (code, log) = weir.wait(&mut strays);

    assert_eq!(code, Some(0), "weir should finish:\n{log}");
    let failures = logged_failures(&log);
    assert_reasons_name_file_and_error(&failures, &checkpoints, "Permission denied (os error 13)");
    let completed = logged_completions(&log);
    assert!(
        completed > completed_before,
        "no checkpoint completed after access was restored:\n{log}"
    );
    let restored = assert_recovered(
        &sandbox,
        reference,
        &strays,
        &checkpoints,
        "the job whose checkpoint directory was not writable for a while",
    );

    report::record(&report::Row {
        area: "storage",
        scenario: "checkpoint directory made unwritable (mode 555) while the job runs, then 755",
        rounds: (completed + failures.len()) as u64,
        faults: "EACCES: chmod 555 under a weir process that is not root",
        result: &format!(
            "{} checkpoints failed with `Permission denied` naming the directory, the job \
             finished within tolerable_failures with the reference output; none left behind; \
             chk-{restored} restores to the reference output",
            failures.len()
        ),
    });
}

/// The permission scenario with EACCES injected, in this process.
fn permission_denied_injected(sandbox: &Sandbox, reference: &Reference) {
    let checkpoints = sandbox.checkpoint_dir();
    let faulty = Arc::new(FaultyStorage::local(CheckpointLayout::new(&checkpoints)));
    let running = InProcess::start_with_storage(&sandbox.job_path(), Arc::clone(&faulty) as _);
    let mut strays = Strays::new(&checkpoints);
    running.wait_until("two checkpoints to complete", CLI_TIMEOUT, |m| {
        m.checkpoint_counts().0 >= 2
    });
    faulty.break_writes(io::ErrorKind::PermissionDenied);
    running.wait_until("checkpoints to be refused", CLI_TIMEOUT, |m| {
        strays.sample();
        m.checkpoint_counts().1 >= FAILURES
    });
    faulty.heal();
    let monitor = running.monitor().clone();
    let outcome = running.join_sampling(|| strays.sample());
    assert_eq!(outcome.status, JobStatus::Finished, "{outcome:?}");
    assert_reasons_name_file_and_error(
        &reasons(&monitor),
        &checkpoints,
        "Permission denied (os error 13)",
    );
    let restored = assert_recovered(
        sandbox,
        reference,
        &strays,
        &checkpoints,
        "the job whose checkpoint writes were refused for a while",
    );
    let (completed, failed) = monitor.checkpoint_counts();
    report::record(&report::Row {
        area: "storage",
        scenario: "checkpoint writes refused (permission denied) while the job runs, then allowed",
        rounds: completed + failed,
        faults: "EACCES injected on every write (FaultyStorage; could not run weir unprivileged)",
        result: &format!(
            "{failed} checkpoints failed with `Permission denied` naming the file, the job \
             finished with the reference output; none left behind; chk-{restored} restores"
        ),
    });
}

// ---------------------------------------------------------------------------------------------
// The metadata write fails

#[test]
fn failed_metadata_writes_leave_no_checkpoint_and_the_next_one_completes() {
    let reference = reference();
    let sandbox = Sandbox::new("metadata-fails");
    let checkpoints = sandbox.checkpoint_dir();
    let faulty = Arc::new(FaultyStorage::local(CheckpointLayout::new(&checkpoints)));
    // The 2nd metadata write finds the disk full; the 3rd "crashes" after half of the
    // temporary file, which stays behind until the abort removes the directory.
    faulty.inject_metadata(2, Fault::Fail(io::ErrorKind::StorageFull));
    faulty.inject_metadata(3, Fault::CrashBeforeRename);
    let (running, mut strays) = start_on(&sandbox, 2, Arc::clone(&faulty) as _);
    running.wait_until("two metadata writes to fail", CLI_TIMEOUT, |m| {
        strays.sample();
        m.checkpoint_counts().1 >= 2
    });
    let failures = running.monitor().recent_failures();
    let failed_ids: Vec<u64> = failures.iter().map(|f| f.id.0).collect();
    // Removed while the job runs, not only when it ends.
    running.wait_until(
        "the failed checkpoints' directories to be removed",
        CLI_TIMEOUT,
        |_| {
            checkpoint_dirs(&checkpoints)
                .iter()
                .all(|c| !failed_ids.contains(&c.id))
        },
    );
    let monitor = running.monitor().clone();
    let outcome = running.join_sampling(|| strays.sample());

    assert_eq!(outcome.status, JobStatus::Finished, "{outcome:?}");
    assert_eq!(monitor.checkpoint_counts().1, 2, "{failures:#?}");
    // The metadata's temporary file is its writer's own: `_metadata.<pid>-<n>.tmp`.
    let (written, error) = failures[0]
        .reason
        .split_once(".tmp: ")
        .unwrap_or_else(|| panic!("{}", failures[0].reason));
    assert_eq!(error, "No space left on device (os error 28)");
    let (file, temp) = written
        .rsplit_once('/')
        .unwrap_or_else(|| panic!("{written}"));
    assert_eq!(
        CheckpointLayout::temp_target(&format!("{temp}.tmp")),
        Some("_metadata"),
        "{temp}"
    );
    let expected = [
        format!(
            "could not be recorded: cannot write {}/chk-{:010}",
            checkpoints.display(),
            failed_ids[0]
        ),
        format!(
            "could not be recorded: cannot write {}/chk-{:010}/_metadata: injected fault",
            checkpoints.display(),
            failed_ids[1]
        ),
    ];
    assert_eq!(file, expected[0]);
    assert!(
        failures[1].reason.starts_with(&expected[1]),
        "{}",
        failures[1].reason
    );
    let last = monitor
        .last_checkpoint()
        .expect("checkpoints completed")
        .id
        .0;
    assert!(last > failed_ids[1], "nothing completed after the failures");
    let restored = assert_recovered(
        &sandbox,
        reference,
        &strays,
        &checkpoints,
        "the job whose metadata writes failed twice",
    );

    report::record(&report::Row {
        area: "storage",
        scenario: "the metadata write (the commit point) fails",
        rounds: 2,
        faults: "ENOSPC on one metadata write, a crash mid-write on the next (FaultyStorage)",
        result: &format!(
            "both checkpoints not recorded (`could not be recorded: cannot write …/_metadata…`), \
             their directories removed while the job ran; the next checkpoint completed, the job \
             finished with the reference output; chk-{restored} restores"
        ),
    });
}

// ---------------------------------------------------------------------------------------------
// Damaged files of complete checkpoints

/// Payload offsets flipped per file, beyond every header and trailer byte.
const RANDOM_FLIPS: usize = 64;
/// Random truncation lengths per file, beyond the fixed ones.
const RANDOM_CUTS: usize = 8;

/// Two complete checkpoints of a small finished job: (older, newer) directories.
fn two_complete_checkpoints(sandbox: &Sandbox) -> (PathBuf, PathBuf) {
    let generator = GeneratorSpec {
        parallelism: 2,
        seed: 5,
        count: Some(6_000),
        rate: Some(10_000.0),
        keys: 50,
    };
    generator_count(sandbox, &generator)
        .checkpoint("interval", "50ms")
        .checkpoint("directory", sandbox.checkpoint_dir().as_path())
        .checkpoint("retained", 2u32)
        .write(&sandbox.job_path());
    let outcome = run_in_process(&sandbox.job_path());
    assert_eq!(outcome.status, JobStatus::Finished, "{outcome:?}");
    let dirs = checkpoint_dirs(&sandbox.checkpoint_dir());
    assert!(
        dirs.len() == 2 && dirs.iter().all(|c| c.complete),
        "two complete checkpoints expected: {dirs:?}"
    );
    (dirs[0].path.clone(), dirs[1].path.clone())
}

/// What a restore must say about the damaged `file` of `newest`, and where it must fall back.
struct Damage<'a> {
    storage: &'a LocalStorage,
    newest: &'a Path,
    older: &'a Path,
}

impl Damage<'_> {
    /// With `file` holding `bytes`: `--restore PATH` of the newest is refused naming the file,
    /// and `--restore latest` skips it naming the file and chooses the older one.
    fn assert_refused(&self, file: &Path, bytes: &[u8], what: &str) {
        fs::write(file, bytes).unwrap();
        let name = file.to_str().unwrap();
        let err = restore_from_path(self.storage, self.newest, None)
            .expect_err(&format!("{what} of {name} went unnoticed"));
        assert!(
            err.to_string().contains(name),
            "{what}: the error should name {name}: {err}"
        );
        let selection = restore_latest(self.storage, None).unwrap();
        let chosen = selection.chosen.as_ref().map(|p| p.location.dir());
        assert_eq!(chosen, Some(self.older), "{what} of {name}");
        let skipped = selection.skipped[0].to_string();
        assert!(
            skipped.contains(name),
            "{what}: the skip should name {name}: {skipped}"
        );
    }
}

#[test]
fn any_damage_to_a_complete_checkpoint_is_refused_naming_the_file_and_latest_falls_back() {
    let sandbox = Sandbox::new("damaged");
    let (older, newest) = two_complete_checkpoints(&sandbox);
    let storage = LocalStorage::new(CheckpointLayout::new(sandbox.checkpoint_dir()));
    let damage = Damage {
        storage: &storage,
        newest: &newest,
        older: &older,
    };
    let mut rng = Rng::new(seed_from_env("WEIR_STORAGE_FAULTS_SEED", 0x5eed));
    let mut files: Vec<PathBuf> = fs::read_dir(&newest)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 7, "metadata and six state files: {files:?}");

    let (mut flips, mut cuts) = (0u64, 0u64);
    for file in &files {
        let good = fs::read(file).unwrap();
        let len = good.len();
        // Every byte of the header and the trailer, and random payload bytes.
        let mut offsets: Vec<usize> = (0..20.min(len)).chain(len.saturating_sub(4)..len).collect();
        offsets.extend((0..RANDOM_FLIPS).map(|_| rng.below(len as u64) as usize));
        for offset in offsets {
            let mut bytes = good.clone();
            bytes[offset] ^= 1 << rng.below(8);
            damage.assert_refused(file, &bytes, &format!("a bit flipped at byte {offset}"));
            flips += 1;
        }
        // Partial files: cut anywhere, and one byte too many.
        let mut lengths = vec![0, 1, 19, 20, 23, len / 2, len - 1];
        lengths.extend((0..RANDOM_CUTS).map(|_| rng.below(len as u64) as usize));
        for cut in lengths {
            damage.assert_refused(file, &good[..cut], &format!("a cut to {cut} bytes"));
            cuts += 1;
        }
        let mut longer = good.clone();
        longer.push(0);
        damage.assert_refused(file, &longer, "a byte appended");
        fs::write(file, &good).unwrap();
    }

    // A state file replaced by a valid state file that is not the one the metadata records:
    // the same task's file of the older checkpoint, or (when the job had ended before the
    // older checkpoint, so no task's state changed between the two) another task's; or missing.
    let is_state = |f: &PathBuf| f.extension().is_some_and(|e| e == "state");
    let mut older_states: Vec<PathBuf> = fs::read_dir(&older)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(is_state)
        .collect();
    older_states.sort();
    let (state, good, other) = files
        .iter()
        .filter(|f| is_state(f))
        .flat_map(|f| {
            let same_task = older.join(f.file_name().unwrap());
            let candidates = std::iter::once(same_task.clone()).chain(
                older_states
                    .iter()
                    .filter(move |o| **o != same_task)
                    .cloned(),
            );
            candidates.map(move |o| (f.clone(), fs::read(f).unwrap(), fs::read(o).unwrap()))
        })
        .find(|(_, good, other)| good != other)
        .expect("the tasks' state files are not all equal");
    damage.assert_refused(&state, &other, "the older checkpoint's file");
    fs::remove_file(&state).unwrap();
    let err = restore_from_path(&storage, &newest, None).unwrap_err();
    assert!(err.to_string().contains(state.to_str().unwrap()), "{err}");
    assert_eq!(
        restore_latest(&storage, None)
            .unwrap()
            .chosen
            .unwrap()
            .location
            .dir(),
        older
    );

    // And through the CLI: `--restore PATH` of a damaged checkpoint does not start (exit 3),
    // naming the file and the problem.
    let mut bytes = good.clone();
    bytes[good.len() / 2] ^= 0x10;
    fs::write(&state, &bytes).unwrap();
    let ended = run_cli(
        &sandbox.job_path(),
        &["--restore", newest.to_str().unwrap()],
        &sandbox.join("restore.log"),
    );
    ended.assert_code(3, "restoring a damaged checkpoint");
    ended.assert_stderr_contains(&format!(
        "state file {}: checksum mismatch",
        state.display()
    ));

    report::record(&report::Row {
        area: "storage",
        scenario: "damaged files of a complete checkpoint (metadata and every state file)",
        rounds: flips + cuts,
        faults: "seeded bit flips (every header and trailer byte, random payload bytes), \
                 truncations, an appended byte, a missing file, a swapped file",
        result: &format!(
            "all {flips} bit flips and {cuts} cuts detected, each naming the file: \
             `--restore PATH` refused (exit 3 through the CLI), `--restore latest` fell back to \
             the older intact checkpoint"
        ),
    });
}
