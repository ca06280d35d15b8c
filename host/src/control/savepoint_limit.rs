//! The bound on savepoints requested over the API.
//!
//! Why it exists: a savepoint is a full copy of the job's state, and
//! savepoints are never pruned (they belong to whoever asked for them), so a
//! script in a loop, or anyone holding the token, could fill the disk: 100
//! were once taken in 2.8 s. The endpoint takes at most one at a time, and at
//! most [`API_SAVEPOINTS_PER_WINDOW`] in any [`API_SAVEPOINT_WINDOW`]; more
//! is refused with 429 and the time to retry after. A rescale takes a savepoint
//! too and is counted with them. `POST /api/stop` is not counted: it ends the
//! job, so it happens once.
//!
//! A synchronous struct, the clock passed in: tested without a server.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How many savepoints the API takes in one [`API_SAVEPOINT_WINDOW`].
pub(crate) const API_SAVEPOINTS_PER_WINDOW: usize = 10;

/// The sliding window [`API_SAVEPOINTS_PER_WINDOW`] counts over.
pub(crate) const API_SAVEPOINT_WINDOW: Duration = Duration::from_secs(60);

/// Savepoints started over the API: when, and whether one is under way.
#[derive(Debug, Default)]
pub(crate) struct SavepointLimit {
    /// When each savepoint of the last window started, oldest first.
    started: VecDeque<Instant>,
    /// Whether one has started and not answered yet.
    in_flight: bool,
}

/// Why a savepoint request is refused for now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum LimitRefusal {
    /// Another one is being taken.
    #[error(
        "a savepoint requested over the API is being taken: one is taken at a time; retry in 1 s, \
         after it has answered"
    )]
    InFlight,
    /// The window's quota is used up.
    #[error(
        "at most {API_SAVEPOINTS_PER_WINDOW} savepoints a minute are taken over the API (each \
         stays on disk until you delete it): retry in {} s",
        retry_after.as_secs()
    )]
    TooMany {
        /// When the oldest savepoint of the window leaves it (whole seconds, at least 1).
        retry_after: Duration,
    },
}

impl LimitRefusal {
    /// The seconds a client should wait (the `Retry-After` header).
    pub(crate) fn retry_after_secs(&self) -> u64 {
        match self {
            LimitRefusal::InFlight => 1,
            LimitRefusal::TooMany { retry_after } => retry_after.as_secs(),
        }
    }
}

impl SavepointLimit {
    /// Starts a savepoint at `now`, unless one is under way or the window's
    /// quota is used up. Every `Ok` must be followed by [`finish`](Self::finish).
    pub(crate) fn try_start(&mut self, now: Instant) -> Result<(), LimitRefusal> {
        if self.in_flight {
            return Err(LimitRefusal::InFlight);
        }
        while let Some(&oldest) = self.started.front() {
            if now.saturating_duration_since(oldest) >= API_SAVEPOINT_WINDOW {
                self.started.pop_front();
            } else {
                break;
            }
        }
        if self.started.len() >= API_SAVEPOINTS_PER_WINDOW {
            let oldest = self.started[0];
            let left = API_SAVEPOINT_WINDOW - now.saturating_duration_since(oldest);
            let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
            return Err(LimitRefusal::TooMany {
                retry_after: Duration::from_secs(secs.max(1)),
            });
        }
        self.started.push_back(now);
        self.in_flight = true;
        Ok(())
    }

    /// The savepoint started last has answered (taken, failed or abandoned).
    pub(crate) fn finish(&mut self) {
        self.in_flight = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_at_a_time() {
        let (mut limit, now) = (SavepointLimit::default(), Instant::now());
        limit.try_start(now).unwrap();
        assert_eq!(limit.try_start(now), Err(LimitRefusal::InFlight));
        assert_eq!(LimitRefusal::InFlight.retry_after_secs(), 1);
        limit.finish();
        limit.try_start(now).unwrap();
    }

    #[test]
    fn at_most_the_quota_per_window_then_the_time_until_the_oldest_leaves_it() {
        let (mut limit, t0) = (SavepointLimit::default(), Instant::now());
        for i in 0..API_SAVEPOINTS_PER_WINDOW {
            limit.try_start(t0 + Duration::from_secs(i as u64)).unwrap();
            limit.finish();
        }
        let at = t0 + Duration::from_millis(20_500);
        let refused = limit.try_start(at).unwrap_err();
        assert_eq!(
            refused,
            LimitRefusal::TooMany {
                retry_after: Duration::from_secs(40)
            }
        );
        assert_eq!(refused.retry_after_secs(), 40);
        assert!(refused.to_string().ends_with("retry in 40 s"), "{refused}");
        // Almost a window later: still refused, for at least 1 s.
        let late = t0 + API_SAVEPOINT_WINDOW - Duration::from_millis(1);
        assert_eq!(limit.try_start(late).unwrap_err().retry_after_secs(), 1);
        // Once the oldest has left the window, one more is taken, and not two.
        limit.try_start(t0 + API_SAVEPOINT_WINDOW).unwrap();
        limit.finish();
        assert!(limit.try_start(t0 + API_SAVEPOINT_WINDOW).is_err());
    }
}
