//! The host's timer service of an instance (`docs/ABI.md` §15): advancing the watermark and
//! processing time fires the due timers through `weir_on_timers`, in rounds of batches.
//!
//! # Why it is apart
//!
//! Firing is a policy of the host, not a guest call: how many timers one call receives, how
//! many rounds one advance may run before it fails the guest, and the order of timers, rounds
//! and the watermark's own call. It sits here so that [`GuestInstance`] stays the guest's life
//! and calls; each firing is one guest call made through it.

use weir_abi::{BatchBuilder, TimeDomain};

use super::super::call::Call;
use super::super::error::{GuestError, GuestFailure};
use super::{GuestInstance, GuestOutput};

/// Most timers one `weir_on_timers` call receives (`docs/ABI.md` §15).
pub const MAX_TIMERS_PER_CALL: usize = 1024;

/// Most rounds of firing one advance of time runs before it fails the guest: a round fires the
/// timers due when it starts, and the next round those the guest set meanwhile at or before the
/// time (`docs/ABI.md` §15).
pub const MAX_TIMER_ROUNDS: usize = 64;

impl GuestInstance {
    /// Advances the watermark to `watermark` (nothing when it is not later than the current
    /// one): fires every event-time timer at or before it through `weir_on_timers`, in rounds,
    /// then tells the guest through `weir_on_watermark` (`docs/ABI.md` §15). Each call's
    /// output goes to `route` as soon as the call returns, so a large firing is never held at
    /// once.
    pub fn advance_watermark<E: From<GuestError>>(
        &mut self,
        watermark: i64,
        mut route: impl FnMut(GuestOutput) -> Result<(), E>,
    ) -> Result<(), E> {
        if watermark <= self.time().watermark {
            return Ok(());
        }
        self.check_ready(Call::OnWatermark)?;
        self.store.data_mut().host.time.watermark = watermark;
        self.fire_due(TimeDomain::Event, watermark, &mut route)?;
        match self.body.on_watermark(&mut self.store, watermark) {
            Ok(true) => route(self.take_output()),
            Ok(false) => Ok(()),
            Err(failure) => Err(self.fail(failure).into()),
        }
    }

    /// Fires every processing-time timer at or before `now` (milliseconds since the Unix
    /// epoch), as [`advance_watermark`](Self::advance_watermark) fires event-time timers.
    pub fn fire_processing_timers<E: From<GuestError>>(
        &mut self,
        now: i64,
        mut route: impl FnMut(GuestOutput) -> Result<(), E>,
    ) -> Result<(), E> {
        self.fire_due(TimeDomain::Processing, now, &mut route)
    }

    /// The time the next processing-time timer fires at, if one is set.
    pub fn next_processing_timer(&self) -> Option<i64> {
        self.time().timers(TimeDomain::Processing).next_due()
    }

    /// Fires the timers of `domain` due at `time` in rounds of batches of at most
    /// [`MAX_TIMERS_PER_CALL`], routing each call's output; fails after [`MAX_TIMER_ROUNDS`]
    /// rounds that each left new due timers behind.
    fn fire_due<E: From<GuestError>>(
        &mut self,
        domain: TimeDomain,
        time: i64,
        route: &mut impl FnMut(GuestOutput) -> Result<(), E>,
    ) -> Result<(), E> {
        for round in 0..=MAX_TIMER_ROUNDS {
            let mut left = self.time().timers(domain).count_due(time);
            if left == 0 {
                return Ok(());
            }
            if round == MAX_TIMER_ROUNDS {
                let failure = GuestFailure::TimerRounds {
                    watermark: time,
                    rounds: round,
                };
                return Err(self.poison(Call::OnTimers, failure, None).into());
            }
            while left > 0 {
                let due = self
                    .store
                    .data_mut()
                    .host
                    .time
                    .timers_mut(domain)
                    .pop_due(time, left.min(MAX_TIMERS_PER_CALL));
                if due.is_empty() {
                    break;
                }
                left -= due.len();
                let mut batch = BatchBuilder::new(domain.code());
                for (timestamp, key) in &due {
                    batch.push(key, b"", *timestamp);
                }
                let output = self.on_timers(&batch.into_bytes())?;
                route(output)?;
            }
        }
        Ok(())
    }

    /// Runs `weir_on_timers` on a batch of fired timers and returns what it emitted.
    fn on_timers(&mut self, batch: &[u8]) -> Result<GuestOutput, GuestError> {
        self.check_ready(Call::OnTimers)?;
        if let Err(failure) = self.body.on_timers(&mut self.store, batch) {
            return Err(self.fail(failure));
        }
        Ok(self.take_output())
    }
}
