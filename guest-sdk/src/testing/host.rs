//! The host, as the native harness emulates it: what a guest's imports reach.
//!
//! In wasm, [`Output`](crate::Output) calls the host's `emit`, `emit_to`, `timer_set`,
//! `timer_delete` and `current_time`; natively it calls this instead. It keeps what the host
//! keeps for an instance — its emitted batches until the harness takes them, its timers, the
//! task's watermark and a clock — with the host's rules: the timers are a
//! [`weir_abi::Timers`] per domain, the very set the host keeps, so uniqueness and firing order
//! cannot differ, and their memory is bounded the host's default way. The harness
//! ([`Harness`](super::Harness)) moves the watermark and the clock and fires the timers.

use std::collections::BTreeMap;

use weir_abi::state as wire;
use weir_abi::time::{NO_WATERMARK, TIMER_OVERHEAD_BYTES};
use weir_abi::{TimeDomain, Timers};

/// The host's default `limits.max_timer_state` (docs/JOB.md): 256 MiB of timers per instance,
/// each counting its key's length plus [`TIMER_OVERHEAD_BYTES`].
pub(crate) const MAX_TIMER_STATE: usize = 256 << 20;

/// What the host keeps for one instance.
#[derive(Debug, Clone)]
pub(crate) struct EmulatedHost {
    /// Main output batches, in the order they were emitted, until the harness takes them.
    emitted: Vec<Vec<u8>>,
    /// Side output batches with their output's name, in the order they were emitted.
    emitted_to: Vec<(String, Vec<u8>)>,
    /// The timers of each domain, indexed by the domain's code.
    timers: [Timers; 2],
    /// The task's watermark.
    watermark: i64,
    /// The processing-time clock, in milliseconds.
    clock: i64,
    /// The most bytes the timers may take: [`MAX_TIMER_STATE`] (tests lower it).
    max_timer_state: usize,
    /// Host-kept keyed state (`docs/ABI.md` §17), by state and key.
    keyed: KeyedEntries,
}

/// Host-kept keyed state as the harness keeps it: each value by its state and key.
pub(crate) type KeyedEntries = BTreeMap<(u16, Vec<u8>), Vec<u8>>;

impl EmulatedHost {
    /// An instance's host before its first call: no output, no timers, no watermark yet, the
    /// clock at 0.
    pub(crate) fn new() -> Self {
        EmulatedHost {
            emitted: Vec::new(),
            emitted_to: Vec::new(),
            timers: [Timers::new(), Timers::new()],
            watermark: NO_WATERMARK,
            clock: 0,
            max_timer_state: MAX_TIMER_STATE,
            keyed: KeyedEntries::new(),
        }
    }

    /// `state_get` and `state_result`: the result of a read request, or the host's refusal.
    pub(crate) fn state_get(&mut self, request: &[u8]) -> Result<Vec<u8>, String> {
        let mut result = Vec::new();
        for entry in wire::reads(request) {
            let (state, key) = entry.map_err(|e| format!("state_get: {e}"))?;
            wire::put_result(
                &mut result,
                self.keyed.get(&(state, key.to_vec())).map(Vec::as_slice),
            );
        }
        Ok(result)
    }

    /// `state_write`: applies a write request whole, or refuses it and changes nothing.
    pub(crate) fn state_write(&mut self, request: &[u8]) -> Result<(), String> {
        let writes = wire::writes(request)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| format!("state_write: {e}"))?;
        for write in writes {
            let key = (write.state, write.key.to_vec());
            match write.value {
                Some(value) => self.keyed.insert(key, value.to_vec()),
                None => self.keyed.remove(&key),
            };
        }
        Ok(())
    }

    /// The host-kept keyed state, as a checkpoint keeps it.
    pub(crate) fn keyed(&self) -> &KeyedEntries {
        &self.keyed
    }

    /// Replaces the host-kept keyed state, as a restore does.
    pub(crate) fn set_keyed(&mut self, keyed: KeyedEntries) {
        self.keyed = keyed;
    }

    /// `emit`: keeps one main output batch.
    pub(crate) fn emit(&mut self, batch: Vec<u8>) {
        self.emitted.push(batch);
    }

    /// `emit_to`: keeps one batch of the side output `name`.
    pub(crate) fn emit_to(&mut self, name: &str, batch: Vec<u8>) {
        self.emitted_to.push((name.to_owned(), batch));
    }

    /// The main output batches emitted since the last time they were taken.
    pub(crate) fn take_emitted(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.emitted)
    }

    /// The side output batches emitted since the last time they were taken.
    pub(crate) fn take_emitted_to(&mut self) -> Vec<(String, Vec<u8>)> {
        std::mem::take(&mut self.emitted_to)
    }

    /// `timer_set`. Fails, as the host does, when the instance's timers would take more than
    /// [`MAX_TIMER_STATE`] bytes.
    pub(crate) fn timer_set(
        &mut self,
        domain: TimeDomain,
        timestamp: i64,
        key: &[u8],
    ) -> Result<(), String> {
        let index = domain.code() as usize;
        if self.timers[index].set(timestamp, key) {
            let total: usize = self.timers.iter().map(Timers::bytes).sum();
            if total > self.max_timer_state {
                self.timers[index].delete(timestamp, key);
                return Err(format!(
                    "timer_set: the instance's timers would take {total} bytes, past the limit \
                     of {} (limits.max_timer_state; each timer counts its key and \
                     {TIMER_OVERHEAD_BYTES} bytes)",
                    self.max_timer_state
                ));
            }
        }
        Ok(())
    }

    /// `timer_delete`.
    pub(crate) fn timer_delete(&mut self, domain: TimeDomain, timestamp: i64, key: &[u8]) {
        self.timers[domain.code() as usize].delete(timestamp, key);
    }

    /// `current_time`: the watermark for event time, the clock for processing time.
    pub(crate) fn current_time(&self, domain: TimeDomain) -> i64 {
        match domain {
            TimeDomain::Event => self.watermark,
            TimeDomain::Processing => self.clock,
        }
    }

    /// The timers of `domain`.
    pub(crate) fn timers(&self, domain: TimeDomain) -> &Timers {
        &self.timers[domain.code() as usize]
    }

    /// The timers of `domain`, to fire them.
    pub(crate) fn timers_mut(&mut self, domain: TimeDomain) -> &mut Timers {
        &mut self.timers[domain.code() as usize]
    }

    /// Moves the watermark (the harness checks it does not move back).
    pub(crate) fn set_watermark(&mut self, watermark: i64) {
        self.watermark = watermark;
    }

    /// Moves the processing-time clock.
    pub(crate) fn set_clock(&mut self, clock: i64) {
        self.clock = clock;
    }

    /// The state a checkpoint of the task holds for the instance: its timers and the
    /// watermark.
    pub(crate) fn checkpoint(&self) -> ([Timers; 2], i64) {
        (self.timers.clone(), self.watermark)
    }

    /// Puts back what [`checkpoint`](Self::checkpoint) returned.
    pub(crate) fn restore(&mut self, timers: [Timers; 2], watermark: i64) {
        self.timers = timers;
        self.watermark = watermark;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_past_the_memory_limit_fail_and_are_not_kept() {
        let mut host = EmulatedHost::new();
        assert_eq!(host.max_timer_state, 256 * 1024 * 1024);
        host.max_timer_state = 2 * (TIMER_OVERHEAD_BYTES + 10) + 5;
        let key = [7u8; 10];
        host.timer_set(TimeDomain::Event, 1, &key).unwrap();
        host.timer_set(TimeDomain::Event, 1, &key).unwrap();
        host.timer_set(TimeDomain::Event, 2, &key).unwrap();
        let err = host.timer_set(TimeDomain::Processing, 1, &key).unwrap_err();
        assert!(
            err.contains("would take 174 bytes, past the limit of 121"),
            "{err}"
        );
        assert_eq!(host.timers(TimeDomain::Event).len(), 2);
        assert!(host.timers(TimeDomain::Processing).is_empty());
    }
}
