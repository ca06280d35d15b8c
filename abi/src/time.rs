//! Time in the stream (`docs/ABI.md` §15): the two time domains, the watermark's bounds, and
//! [`Timers`], the set of timers a task keeps for its guest.
//!
//! The timers are the host's state, not the guest's: the host keeps them, checkpoints them with
//! the task and fires them. The set lives here, beside the names, because the native test
//! harness of the Rust SDK must fire timers exactly as the host does — same uniqueness, same
//! order — and one implementation cannot drift from another.

use std::collections::BTreeSet;

/// The watermark before the first one arrives: every timestamp is after it.
pub const NO_WATERMARK: i64 = i64::MIN;

/// The final watermark, reached when every input has ended: every event-time timer fires.
pub const END_OF_TIME: i64 = i64::MAX;

/// The longest side output name `emit_to` accepts, in bytes.
pub const MAX_OUTPUT_NAME_BYTES: usize = 255;

/// What a timer's bytes count against its instance's timer memory limit besides its key:
/// roughly what the host spends on one entry.
pub const TIMER_OVERHEAD_BYTES: usize = 48;

/// The clock a timer follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TimeDomain {
    /// `0`: the stream's event time, as the watermark tells it. A timer fires once the task's
    /// watermark reaches its timestamp.
    Event,
    /// `1`: the host's wall clock, in milliseconds since the Unix epoch. A timer fires once the
    /// clock reaches its timestamp.
    Processing,
}

impl TimeDomain {
    /// Both domains, in the order of their numbers.
    pub const ALL: [TimeDomain; 2] = [TimeDomain::Event, TimeDomain::Processing];

    /// The number that stands for the domain in the ABI: the `domain` argument of the timer
    /// imports and the port of a fired-timer batch.
    pub const fn code(self) -> u32 {
        match self {
            TimeDomain::Event => 0,
            TimeDomain::Processing => 1,
        }
    }

    /// The domain numbered `code`, if there is one.
    pub const fn from_code(code: u32) -> Option<TimeDomain> {
        match code {
            0 => Some(TimeDomain::Event),
            1 => Some(TimeDomain::Processing),
            _ => None,
        }
    }

    /// `event` or `processing`, for messages.
    pub const fn name(self) -> &'static str {
        match self {
            TimeDomain::Event => "event",
            TimeDomain::Processing => "processing",
        }
    }
}

/// The timers of one domain: unique `(timestamp, key)` pairs, fired in timestamp order, ties by
/// key (bytewise).
///
/// Setting a timer that is already set changes nothing; deleting one that is not set changes
/// nothing. [`bytes`](Self::bytes) is what the set counts against a limit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timers {
    set: BTreeSet<(i64, Vec<u8>)>,
    bytes: usize,
}

impl Timers {
    /// No timers.
    pub fn new() -> Self {
        Self::default()
    }

    /// What setting a timer for `key` adds to [`bytes`](Self::bytes) when it is new.
    pub fn cost(key: &[u8]) -> usize {
        key.len() + TIMER_OVERHEAD_BYTES
    }

    /// Sets the timer `(timestamp, key)`; returns whether it is new.
    pub fn set(&mut self, timestamp: i64, key: &[u8]) -> bool {
        let added = self.set.insert((timestamp, key.to_vec()));
        if added {
            self.bytes += Self::cost(key);
        }
        added
    }

    /// Deletes the timer `(timestamp, key)`; returns whether it was set.
    pub fn delete(&mut self, timestamp: i64, key: &[u8]) -> bool {
        // A borrowed lookup key would need a wrapper type; the allocation is one per delete.
        let removed = self.set.remove(&(timestamp, key.to_vec()));
        if removed {
            self.bytes -= Self::cost(key);
        }
        removed
    }

    /// Whether the timer `(timestamp, key)` is set.
    pub fn contains(&self, timestamp: i64, key: &[u8]) -> bool {
        self.set.contains(&(timestamp, key.to_vec()))
    }

    /// How many timers are due at `time`: those whose timestamp is at most `time`.
    pub fn count_due(&self, time: i64) -> usize {
        self.set.range(..(time, Vec::new())).count()
            + self
                .set
                .range((time, Vec::new())..)
                .take_while(|(t, _)| *t == time)
                .count()
    }

    /// The earliest timestamp of a set timer.
    pub fn next_due(&self) -> Option<i64> {
        self.set.first().map(|(timestamp, _)| *timestamp)
    }

    /// Removes and returns, in firing order, up to `max` timers whose timestamp is at most
    /// `time`.
    pub fn pop_due(&mut self, time: i64, max: usize) -> Vec<(i64, Vec<u8>)> {
        let mut due = Vec::new();
        while due.len() < max {
            match self.set.first() {
                Some((timestamp, _)) if *timestamp <= time => {}
                _ => break,
            }
            if let Some(timer) = self.set.pop_first() {
                self.bytes -= Self::cost(&timer.1);
                due.push(timer);
            }
        }
        due
    }

    /// How many timers are set.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether no timer is set.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// What the set counts against a limit: [`cost`](Self::cost) summed over its timers.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Every timer, in firing order.
    pub fn iter(&self) -> impl Iterator<Item = (i64, &[u8])> {
        self.set
            .iter()
            .map(|(timestamp, key)| (*timestamp, key.as_slice()))
    }

    /// Removes every timer.
    pub fn clear(&mut self) {
        self.set.clear();
        self.bytes = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_are_unique_and_fire_in_timestamp_then_key_order() {
        let mut timers = Timers::new();
        assert!(timers.set(20, b"b"));
        assert!(timers.set(10, b"z"));
        assert!(timers.set(20, b"a"));
        assert!(!timers.set(20, b"a"), "setting it again adds nothing");
        assert_eq!(timers.len(), 3);
        assert_eq!(timers.bytes(), 3 * (1 + TIMER_OVERHEAD_BYTES));
        assert_eq!(timers.next_due(), Some(10));
        assert_eq!(timers.pop_due(9, 10), []);
        assert_eq!(
            timers.pop_due(20, 2),
            [(10, b"z".to_vec()), (20, b"a".to_vec())]
        );
        assert!(!timers.delete(20, b"a"), "already fired");
        assert!(timers.delete(20, b"b"));
        assert!(timers.is_empty());
        assert_eq!(timers.bytes(), 0);
    }

    #[test]
    fn domains_round_trip_through_their_codes() {
        for domain in TimeDomain::ALL {
            assert_eq!(TimeDomain::from_code(domain.code()), Some(domain));
        }
        assert_eq!(TimeDomain::from_code(2), None);
    }
}
