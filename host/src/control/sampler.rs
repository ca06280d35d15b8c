//! Rates and ratios over the last few seconds, from the tasks' counters.
//!
//! Task counters only grow (records, nanoseconds busy or back-pressured), so
//! a rate needs an earlier reading: the server samples every task's counters
//! once a second ([`SAMPLE_PERIOD`]) and keeps the samples of the last
//! [`WINDOW`]. A rate is the growth from the oldest kept sample to now,
//! divided by the time between. A restart replaces the tasks and their
//! counters start from zero again, so a sample is only compared with the
//! counters it was read from (the same `Arc`); a task newer than every sample
//! has rates of zero until the next one.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::dataflow::metrics::TaskMetrics;
use crate::ids::TaskId;

/// How often the server samples the counters.
pub(crate) const SAMPLE_PERIOD: Duration = Duration::from_secs(1);

/// How far back rates look: samples older than this are dropped.
pub(crate) const WINDOW: Duration = Duration::from_secs(5);

/// One reading of a task's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Records taken in.
    pub records_in: u64,
    /// Records sent out.
    pub records_out: u64,
    /// Nanoseconds busy (including back-pressure met while routing output).
    pub busy_nanos: u64,
    /// Nanoseconds blocked on full output channels.
    pub backpressured_nanos: u64,
}

impl Counters {
    /// Reads `metrics` now.
    pub fn read(metrics: &TaskMetrics) -> Counters {
        Counters {
            records_in: metrics.records_in(),
            records_out: metrics.records_out(),
            busy_nanos: metrics.busy_nanos(),
            backpressured_nanos: metrics.backpressured_nanos(),
        }
    }
}

/// A task's rates over the window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Rates {
    /// Records taken in per second.
    pub rate_in: f64,
    /// Records sent out per second.
    pub rate_out: f64,
    /// Share of the time spent working, back-pressure excluded (0 to 1).
    pub busy_ratio: f64,
    /// Share of the time blocked on full output channels (0 to 1).
    pub backpressured_ratio: f64,
}

impl Rates {
    /// The rates between two readings `elapsed` apart; zero when no time
    /// passed or the counters went back (they were reset).
    pub fn between(old: Counters, new: Counters, elapsed: Duration) -> Rates {
        let seconds = elapsed.as_secs_f64();
        if seconds <= 0.0 {
            return Rates::default();
        }
        let per_second = |old: u64, new: u64| new.saturating_sub(old) as f64 / seconds;
        let nanos = elapsed.as_nanos() as f64;
        let backpressured = new
            .backpressured_nanos
            .saturating_sub(old.backpressured_nanos);
        let busy = new
            .busy_nanos
            .saturating_sub(old.busy_nanos)
            .saturating_sub(backpressured);
        Rates {
            rate_in: per_second(old.records_in, new.records_in),
            rate_out: per_second(old.records_out, new.records_out),
            busy_ratio: (busy as f64 / nanos).clamp(0.0, 1.0),
            backpressured_ratio: (backpressured as f64 / nanos).clamp(0.0, 1.0),
        }
    }

    /// The sum of several tasks' rates, with the ratios averaged: the
    /// figures of a vertex from those of its subtasks.
    pub fn combine(all: &[Rates]) -> Rates {
        let mut sum = Rates::default();
        for r in all {
            sum.rate_in += r.rate_in;
            sum.rate_out += r.rate_out;
            sum.busy_ratio += r.busy_ratio;
            sum.backpressured_ratio += r.backpressured_ratio;
        }
        if !all.is_empty() {
            sum.busy_ratio /= all.len() as f64;
            sum.backpressured_ratio /= all.len() as f64;
        }
        sum
    }
}

#[derive(Debug)]
struct Sample {
    at: Instant,
    tasks: Vec<(TaskId, Arc<TaskMetrics>, Counters)>,
}

/// The samples of the last [`WINDOW`].
#[derive(Debug, Default)]
pub struct Sampler {
    samples: VecDeque<Sample>,
}

impl Sampler {
    /// Records the counters of `tasks` at `now`, and forgets samples older
    /// than the window.
    pub fn sample<'a>(
        &mut self,
        now: Instant,
        tasks: impl IntoIterator<Item = (&'a TaskId, &'a Arc<TaskMetrics>)>,
    ) {
        let tasks = tasks
            .into_iter()
            .map(|(id, metrics)| (id.clone(), Arc::clone(metrics), Counters::read(metrics)))
            .collect();
        self.samples.push_back(Sample { at: now, tasks });
        while self
            .samples
            .front()
            .is_some_and(|s| now.saturating_duration_since(s.at) > WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// The rates of task `id`, whose counters are `metrics`, from the oldest
    /// sample of those same counters to `now`.
    pub fn rates(&self, now: Instant, id: &TaskId, metrics: &Arc<TaskMetrics>) -> Rates {
        let oldest = self.samples.iter().find_map(|sample| {
            sample
                .tasks
                .iter()
                .find(|(task, m, _)| task == id && Arc::ptr_eq(m, metrics))
                .map(|(_, _, counters)| (sample.at, *counters))
        });
        match oldest {
            Some((at, old)) => Rates::between(
                old,
                Counters::read(metrics),
                now.saturating_duration_since(at),
            ),
            None => Rates::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use super::*;

    fn counters(records_in: u64, records_out: u64, busy_ms: u64, bp_ms: u64) -> Counters {
        Counters {
            records_in,
            records_out,
            busy_nanos: busy_ms * 1_000_000,
            backpressured_nanos: bp_ms * 1_000_000,
        }
    }

    #[test]
    fn rates_are_growth_over_time_and_busy_excludes_back_pressure() {
        let r = Rates::between(
            counters(100, 50, 100, 0),
            counters(1100, 2050, 900, 300),
            Duration::from_secs(2),
        );
        assert_eq!(r.rate_in, 500.0);
        assert_eq!(r.rate_out, 1000.0);
        assert!((r.busy_ratio - 0.25).abs() < 1e-9, "{r:?}");
        assert!((r.backpressured_ratio - 0.15).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn counters_that_went_back_or_no_elapsed_time_give_zero() {
        let r = Rates::between(
            counters(10, 10, 10, 10),
            counters(0, 0, 0, 0),
            Duration::from_secs(1),
        );
        assert_eq!(r, Rates::default());
        let r = Rates::between(counters(0, 0, 0, 0), counters(9, 9, 9, 9), Duration::ZERO);
        assert_eq!(r, Rates::default());
        let r = Rates::between(
            counters(0, 0, 0, 0),
            counters(0, 0, 5000, 0),
            Duration::from_secs(1),
        );
        assert_eq!(r.busy_ratio, 1.0, "clamped");
    }

    #[test]
    fn vertex_rates_sum_records_and_average_ratios() {
        let a = Rates {
            rate_in: 1.0,
            rate_out: 2.0,
            busy_ratio: 0.5,
            backpressured_ratio: 0.0,
        };
        let b = Rates {
            rate_in: 3.0,
            rate_out: 4.0,
            busy_ratio: 0.1,
            backpressured_ratio: 0.4,
        };
        let c = Rates::combine(&[a, b]);
        assert_eq!((c.rate_in, c.rate_out), (4.0, 6.0));
        assert!((c.busy_ratio - 0.3).abs() < 1e-9 && (c.backpressured_ratio - 0.2).abs() < 1e-9);
        assert_eq!(Rates::combine(&[]), Rates::default());
    }

    #[test]
    fn compares_with_the_oldest_sample_of_the_same_counters() {
        let id = TaskId::new("gen", 0);
        let metrics = Arc::new(TaskMetrics::default());
        let t0 = Instant::now();
        let mut sampler = Sampler::default();
        sampler.sample(t0, [(&id, &metrics)]);
        metrics.add_records_out(100);
        sampler.sample(t0 + Duration::from_secs(1), [(&id, &metrics)]);
        metrics.add_records_out(100);
        let r = sampler.rates(t0 + Duration::from_secs(2), &id, &metrics);
        assert_eq!(
            r.rate_out, 100.0,
            "200 records over 2 s, from the oldest sample"
        );

        // Samples older than the window are forgotten.
        sampler.sample(t0 + Duration::from_secs(7), [(&id, &metrics)]);
        metrics.add_records_out(50);
        let r = sampler.rates(t0 + Duration::from_secs(8), &id, &metrics);
        assert_eq!(
            r.rate_out, 50.0,
            "from the sample at 7 s: the others are too old"
        );

        // A restart's new counters are not compared with the old ones.
        let restarted = Arc::new(TaskMetrics::default());
        restarted.records_out.store(5, Ordering::Relaxed);
        let r = sampler.rates(t0 + Duration::from_secs(8), &id, &restarted);
        assert_eq!(r, Rates::default());
    }
}
