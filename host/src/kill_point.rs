//! Named kill points: a test hook that kills this process with `SIGKILL` at an exact moment of
//! the checkpoint protocol, so that crash tests can prove recovery from *that* moment instead of
//! sleeping and hoping a random kill lands there.
//!
//! The hook exists only in builds with the cargo feature `test-hooks`, which the test crates
//! enable (the release `weir` has none of it: [`reached`] is an empty inline function there, and
//! the variable below is never read). In such a build it is off unless the environment variable
//! `ENV_VAR` is set, to `POINT` or `POINT:N` (the `N`-th time any thread of the process reaches
//! `POINT`; 1 when omitted):
//!
//! ```text
//! WEIR_TEST_KILL_AT=metadata-write:3 weir run job.toml --restore latest
//! ```
//!
//! When the point is reached the process says so on stderr and sends itself `SIGKILL` through
//! the `kill` program: the host calls no libc function directly, only the standard library. If
//! that cannot be run it aborts, which leaves the files in the same state. Nothing is flushed and no destructor runs: to the files
//! on disk it is a crash at that line. Each point is one cheap check when the hook is off.

use std::fmt;
#[cfg(feature = "test-hooks")]
use std::str::FromStr;
#[cfg(feature = "test-hooks")]
use std::sync::OnceLock;
#[cfg(feature = "test-hooks")]
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that arms a kill point.
#[cfg(feature = "test-hooks")]
pub const ENV_VAR: &str = "WEIR_TEST_KILL_AT";

/// A moment of the job's life at which a test may kill the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillPoint {
    /// An operator or sink task has just processed a batch of records.
    ProcessBatch,
    /// A task with several input channels received the first barrier of a checkpoint and
    /// waits for the others (its alignment has started).
    Alignment,
    /// A task has taken its snapshot and forwarded the barrier; its state is not yet written,
    /// so it has not acknowledged.
    AfterSnapshot,
    /// Half of a state file is written to its temporary file.
    StateWrite,
    /// Half of a checkpoint's metadata file is written to its temporary file.
    MetadataWrite,
    /// A checkpoint's metadata is durable, and no task has yet been told it completed (the
    /// exactly-once sinks have not committed).
    BeforeCommit,
    /// An exactly-once sink is part way through committing a completed checkpoint's output: a
    /// file sink has committed one pending part, and perhaps not the others; a Kafka sink has
    /// sent the output and its marker in a transaction it has not committed.
    SinkCommit,
    /// An exactly-once Kafka sink has committed a completed checkpoint's transaction, and the
    /// job has not moved on: a restore must not send that output again.
    SinkCommitted,
    /// A task has restored its state and not yet processed anything.
    Restore,
    /// An operator is part way through firing timers: one batch of fired timers (a window
    /// firing, say) has been handled and its output routed, and more may follow.
    TimerFiring,
}

impl KillPoint {
    /// Every point, in the order of a checkpoint's life.
    pub const ALL: [KillPoint; 10] = [
        KillPoint::ProcessBatch,
        KillPoint::Alignment,
        KillPoint::AfterSnapshot,
        KillPoint::StateWrite,
        KillPoint::MetadataWrite,
        KillPoint::BeforeCommit,
        KillPoint::SinkCommit,
        KillPoint::SinkCommitted,
        KillPoint::Restore,
        KillPoint::TimerFiring,
    ];

    /// The point's name, as `WEIR_TEST_KILL_AT` takes it.
    pub fn name(self) -> &'static str {
        match self {
            KillPoint::ProcessBatch => "process-batch",
            KillPoint::Alignment => "alignment",
            KillPoint::AfterSnapshot => "after-snapshot",
            KillPoint::StateWrite => "state-write",
            KillPoint::MetadataWrite => "metadata-write",
            KillPoint::BeforeCommit => "before-commit",
            KillPoint::SinkCommit => "sink-commit",
            KillPoint::SinkCommitted => "sink-committed",
            KillPoint::Restore => "restore",
            KillPoint::TimerFiring => "timer-firing",
        }
    }
}

impl fmt::Display for KillPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(feature = "test-hooks")]
/// A value of [`ENV_VAR`] that is not `POINT` or `POINT:N`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{ENV_VAR}={value:?} is not a kill point: expected POINT or POINT:N (N ≥ 1), where POINT is one of {}",
    names()
)]
pub struct BadKillPoint {
    /// The value found.
    pub value: String,
}

#[cfg(feature = "test-hooks")]
fn names() -> String {
    KillPoint::ALL
        .iter()
        .map(|p| p.name())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(feature = "test-hooks")]
impl FromStr for KillPoint {
    type Err = BadKillPoint;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KillPoint::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| BadKillPoint { value: s.into() })
    }
}

#[cfg(feature = "test-hooks")]
/// An armed kill point: die the `nth` time `point` is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Armed {
    /// The point.
    pub point: KillPoint,
    /// Which time it is reached (1-based).
    pub nth: u64,
}

#[cfg(feature = "test-hooks")]
impl FromStr for Armed {
    type Err = BadKillPoint;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadKillPoint { value: s.into() };
        let (point, nth) = match s.split_once(':') {
            Some((point, n)) => (point, n.parse::<u64>().map_err(|_| bad())?),
            None => (s, 1),
        };
        if nth == 0 {
            return Err(bad());
        }
        Ok(Armed {
            point: point.parse().map_err(|_| bad())?,
            nth,
        })
    }
}

#[cfg(feature = "test-hooks")]
/// The armed point from the environment, parsed once.
fn armed() -> &'static Result<Option<Armed>, BadKillPoint> {
    static ARMED: OnceLock<Result<Option<Armed>, BadKillPoint>> = OnceLock::new();
    ARMED.get_or_init(|| match std::env::var(ENV_VAR) {
        Ok(value) => value.parse().map(Some),
        Err(_) => Ok(None),
    })
}

#[cfg(feature = "test-hooks")]
/// Checks [`ENV_VAR`]: the CLI calls this first, so that a misspelt kill point fails the run
/// instead of silently never firing. Returns the armed point, if any.
pub fn from_env() -> Result<Option<Armed>, BadKillPoint> {
    armed().clone()
}

/// Marks that this thread reached `point`: kills the process if the point is armed and this
/// is the time it was armed for.
#[cfg(feature = "test-hooks")]
pub fn reached(point: KillPoint) {
    static TIMES: AtomicU64 = AtomicU64::new(0);
    let Ok(Some(armed)) = armed() else {
        return;
    };
    if armed.point != point {
        return;
    }
    if TIMES.fetch_add(1, Ordering::SeqCst) + 1 == armed.nth {
        kill_self(*armed);
    }
}

/// Marks that this thread reached `point`: nothing, in a build without test hooks.
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn reached(_point: KillPoint) {}

#[cfg(feature = "test-hooks")]
fn kill_self(armed: Armed) -> ! {
    eprintln!(
        "weir: kill point `{}` reached for the {} time ({ENV_VAR}): sending SIGKILL to this process",
        armed.point,
        ordinal(armed.nth)
    );
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &std::process::id().to_string()])
        .status();
    // `kill` could not be run: abort instead (no destructor, no flush either).
    std::process::abort()
}

#[cfg(feature = "test-hooks")]
fn ordinal(n: u64) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(all(test, feature = "test-hooks"))]
mod tests {
    use super::*;

    #[test]
    fn parses_a_point_with_and_without_a_count() {
        assert_eq!(
            "state-write".parse::<Armed>(),
            Ok(Armed {
                point: KillPoint::StateWrite,
                nth: 1
            })
        );
        assert_eq!(
            "sink-commit:12".parse::<Armed>(),
            Ok(Armed {
                point: KillPoint::SinkCommit,
                nth: 12
            })
        );
        for point in KillPoint::ALL {
            assert_eq!(point.name().parse::<KillPoint>(), Ok(point));
        }
    }

    #[test]
    fn refuses_unknown_points_and_bad_counts_listing_the_names() {
        for bad in [
            "",
            "statewrite",
            "state-write:",
            "state-write:0",
            "restore:x",
            ":3",
        ] {
            let err = bad.parse::<Armed>().unwrap_err();
            assert_eq!(err.value, bad);
            let text = err.to_string();
            assert!(text.contains("metadata-write, before-commit"), "{text}");
        }
    }

    #[test]
    fn ordinals_read_as_english() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            got,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }
}
