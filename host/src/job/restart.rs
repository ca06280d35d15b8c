//! The restart strategy: whether, and after how long, a failed job is
//! restarted from its latest completed checkpoint (the `[restart]` table).
//!
//! Only the arithmetic lives here; counting failures and sleeping is the job
//! runner's business.

use std::time::Duration;

/// What to do when a task of the job fails.
///
/// Restart attempts are numbered from 1: attempt 1 is the restart after the
/// first failure, attempt 2 the one after the second, and so on.
#[derive(Debug, Clone, PartialEq)]
pub enum RestartStrategy {
    /// Never restart: the first failure fails the job. Flink's `none`.
    None,
    /// Restart up to `attempts` times, waiting `delay` before each restart.
    /// Flink's `fixed-delay`.
    FixedDelay {
        /// How many restarts are allowed before the job fails.
        attempts: u32,
        /// Wait before each restart.
        delay: Duration,
    },
    /// Wait `initial` before the first restart, `multiplier` times longer
    /// before each next one, never more than `max`. Flink's `exponential-delay`.
    ExponentialDelay {
        /// Wait before the first restart.
        initial: Duration,
        /// Longest wait.
        max: Duration,
        /// Growth factor between consecutive waits (at least 1).
        multiplier: f64,
        /// How many restarts are allowed before the job fails; `None` = no limit.
        attempts: Option<u32>,
    },
}

impl RestartStrategy {
    /// Fixed-delay `attempts` when the job file leaves it out.
    pub const DEFAULT_ATTEMPTS: u32 = 3;

    /// Fixed-delay `delay` when the job file leaves it out.
    pub const DEFAULT_DELAY: Duration = Duration::from_secs(1);

    /// Exponential-delay `initial` when the job file leaves it out.
    pub const DEFAULT_INITIAL: Duration = Duration::from_secs(1);

    /// Exponential-delay `max` when the job file leaves it out (or `initial`, if longer).
    pub const DEFAULT_MAX: Duration = Duration::from_secs(60);

    /// Exponential-delay `multiplier` when the job file leaves it out.
    pub const DEFAULT_MULTIPLIER: f64 = 2.0;

    /// The strategy used when the job file has no `[restart]` table and checkpoints
    /// are on: fixed-delay, 3 attempts, 1 s apart.
    pub const DEFAULT_FIXED_DELAY: RestartStrategy = RestartStrategy::FixedDelay {
        attempts: Self::DEFAULT_ATTEMPTS,
        delay: Self::DEFAULT_DELAY,
    };

    /// How long to wait before restart number `attempt` (from 1), or `None`
    /// if the strategy gives up and the job fails. `attempt` 0 is read as 1.
    pub fn delay_for(&self, attempt: u32) -> Option<Duration> {
        let attempt = attempt.max(1);
        match *self {
            RestartStrategy::None => None,
            RestartStrategy::FixedDelay { attempts, delay } => {
                (attempt <= attempts).then_some(delay)
            }
            RestartStrategy::ExponentialDelay {
                initial,
                max,
                multiplier,
                attempts,
            } => {
                if attempts.is_some_and(|limit| attempt > limit) {
                    return None;
                }
                // In f64 nanoseconds, capped before converting back, so a
                // huge exponent saturates at `max` instead of overflowing.
                let exponent = i32::try_from(attempt - 1).unwrap_or(i32::MAX);
                let nanos = initial.as_nanos() as f64 * multiplier.powi(exponent);
                let max_nanos = max.as_nanos() as f64;
                if nanos.is_nan() || nanos >= max_nanos {
                    Some(max)
                } else {
                    Some(Duration::from_nanos(nanos.round() as u64))
                }
            }
        }
    }

    /// The strategy's name in the job file: `none`, `fixed-delay` or `exponential-delay`.
    pub fn name(&self) -> &'static str {
        match self {
            RestartStrategy::None => "none",
            RestartStrategy::FixedDelay { .. } => "fixed-delay",
            RestartStrategy::ExponentialDelay { .. } => "exponential-delay",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[test]
    fn none_never_restarts() {
        assert_eq!(RestartStrategy::None.delay_for(1), None);
        assert_eq!(RestartStrategy::None.delay_for(0), None);
    }

    #[test]
    fn fixed_delay_restarts_exactly_attempts_times() {
        let strategy = RestartStrategy::FixedDelay {
            attempts: 3,
            delay: ms(250),
        };
        assert_eq!(strategy.delay_for(1), Some(ms(250)));
        assert_eq!(strategy.delay_for(3), Some(ms(250)));
        assert_eq!(strategy.delay_for(4), None);
        assert_eq!(strategy.delay_for(u32::MAX), None);
    }

    #[test]
    fn fixed_delay_with_zero_attempts_never_restarts() {
        let strategy = RestartStrategy::FixedDelay {
            attempts: 0,
            delay: ms(1),
        };
        assert_eq!(strategy.delay_for(1), None);
    }

    #[test]
    fn exponential_delay_grows_then_saturates_at_max() {
        let strategy = RestartStrategy::ExponentialDelay {
            initial: ms(100),
            max: ms(1_000),
            multiplier: 2.0,
            attempts: None,
        };
        let delays: Vec<_> = (1..=6).map(|n| strategy.delay_for(n).unwrap()).collect();
        assert_eq!(
            delays,
            [ms(100), ms(200), ms(400), ms(800), ms(1_000), ms(1_000)]
        );
        assert_eq!(strategy.delay_for(0), Some(ms(100)));
        assert_eq!(strategy.delay_for(u32::MAX), Some(ms(1_000)));
    }

    #[test]
    fn exponential_delay_gives_up_after_its_attempt_cap() {
        let strategy = RestartStrategy::ExponentialDelay {
            initial: ms(10),
            max: ms(100),
            multiplier: 1.5,
            attempts: Some(2),
        };
        assert_eq!(strategy.delay_for(1), Some(ms(10)));
        assert_eq!(strategy.delay_for(2), Some(ms(15)));
        assert_eq!(strategy.delay_for(3), None);
    }

    #[test]
    fn exponential_delay_with_multiplier_one_is_constant() {
        let strategy = RestartStrategy::ExponentialDelay {
            initial: ms(300),
            max: ms(300),
            multiplier: 1.0,
            attempts: None,
        };
        assert_eq!(strategy.delay_for(50), Some(ms(300)));
    }
}
