//! CPU time and peak memory of a process, this one or a child, from Linux's `/proc`.
//!
//! The benchmarks compare systems that run as processes of their own (the release `weir`, a
//! JVM) with code that runs inside the benchmark; each needs its CPU time and its peak resident
//! memory measured the same way. `/proc/<pid>/stat` gives CPU time (user and system, every
//! thread, the finished ones included) and `/proc/<pid>/status` the peak resident set
//! (`VmHWM`). A child's figures are read before it is reaped: [`wait_measured`] polls
//! `/proc/<pid>/stat` until the child is a zombie (its CPU time is final then, and still
//! readable), and keeps the last `VmHWM` it read while the child was alive (a zombie has no
//! memory left to report). Elsewhere than Linux every figure is `None`.

use std::process::{Child, ExitStatus};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;

/// How often [`wait_measured`] looks at a child: the wait ends at most this late, and the
/// child's peak memory is read at least this often.
const POLL: Duration = Duration::from_millis(5);

/// A process to read the figures of.
#[derive(Debug, Clone, Copy)]
pub enum Proc {
    /// The benchmark process itself.
    This,
    /// Another process (a child of the benchmark).
    Pid(u32),
}

impl Proc {
    fn file(self, name: &str) -> String {
        match self {
            Proc::This => format!("/proc/self/{name}"),
            Proc::Pid(pid) => format!("/proc/{pid}/{name}"),
        }
    }

    /// The fields of `stat` after the command name (which is in parentheses and may hold
    /// spaces): the state is the first, utime and stime the 12th and 13th.
    fn stat(self) -> Option<Vec<String>> {
        let stat = std::fs::read_to_string(self.file("stat")).ok()?;
        Some(
            stat.rsplit_once(')')?
                .1
                .split_whitespace()
                .map(str::to_string)
                .collect(),
        )
    }

    /// CPU time the process has used so far (user and system, every thread, the finished ones
    /// included), seconds; 10 ms resolution (USER_HZ is 100 on Linux).
    pub fn cpu_seconds(self) -> Option<f64> {
        let fields = self.stat()?;
        let ticks = |i: usize| fields.get(i)?.parse::<u64>().ok();
        Some((ticks(11)? + ticks(12)?) as f64 / 100.0)
    }

    /// Whether the process has exited and waits to be reaped (or is gone). Unlike
    /// `Child::try_wait`, this leaves a child unreaped, its figures still readable.
    pub fn exited(self) -> bool {
        self.stat()
            .is_none_or(|fields| fields.first().is_some_and(|state| state == "Z"))
    }

    /// The process's peak resident memory since it started or since [`Proc::reset_peak_rss`],
    /// bytes.
    pub fn peak_rss(self) -> Option<u64> {
        let status = std::fs::read_to_string(self.file("status")).ok()?;
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    }

    /// Resets the process's peak resident memory to what it holds now (where the kernel
    /// allows it; otherwise nothing happens).
    pub fn reset_peak_rss(self) {
        let _ = std::fs::write(self.file("clear_refs"), "5");
    }
}

/// What a process used over a run.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Usage {
    /// CPU time, user and system, every thread, seconds.
    pub cpu_seconds: Option<f64>,
    /// Peak resident memory, bytes.
    pub peak_rss_bytes: Option<u64>,
}

impl Usage {
    /// The peak in MiB, for tables.
    pub fn peak_rss_mib(&self) -> Option<f64> {
        self.peak_rss_bytes.map(|b| b as f64 / (1024.0 * 1024.0))
    }
}

/// Measures this process over a stretch of its life: [`SelfMeter::start`] resets its peak
/// memory and notes its CPU time, [`SelfMeter::finish`] reads both.
pub struct SelfMeter {
    cpu_before: Option<f64>,
}

impl SelfMeter {
    /// Starts measuring.
    pub fn start() -> SelfMeter {
        Proc::This.reset_peak_rss();
        SelfMeter {
            cpu_before: Proc::This.cpu_seconds(),
        }
    }

    /// CPU time since [`SelfMeter::start`] and the peak memory since then.
    pub fn finish(&self) -> Usage {
        Usage {
            cpu_seconds: Proc::This
                .cpu_seconds()
                .zip(self.cpu_before)
                .map(|(after, before)| after - before),
            peak_rss_bytes: Proc::This.peak_rss(),
        }
    }
}

/// Waits for `child` to exit, reading its CPU time and peak memory before it is reaped; gives
/// up after `timeout` (then returns `Ok(None)`, the child still running).
pub fn wait_measured(
    child: &mut Child,
    timeout: Option<Duration>,
) -> std::io::Result<Option<(ExitStatus, Usage)>> {
    let proc = Proc::Pid(child.id());
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut usage = Usage::default();
    loop {
        if proc.exited() {
            usage.cpu_seconds = proc.cpu_seconds().or(usage.cpu_seconds);
            let status = child.wait()?;
            return Ok(Some((status, usage)));
        }
        if let Some(peak) = proc.peak_rss() {
            usage.peak_rss_bytes = Some(peak);
        }
        if let Some(cpu) = proc.cpu_seconds() {
            usage.cpu_seconds = Some(cpu);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(None);
        }
        thread::sleep(POLL);
    }
}
