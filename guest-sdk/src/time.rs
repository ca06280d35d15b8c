//! Fired timers, as an operator receives them.
//!
//! The host keeps an instance's timers and, when they are due, hands them to `weir_on_timers`
//! as a batch (`docs/ABI.md` §15): one record per timer, its key the timer's key, its timestamp
//! the timer's, the batch's port the time domain. [`FiredTimers`] is that batch, decoded once
//! and read as timers, so an operator never sees the record encoding nor the port trick.

use weir_abi::{Batch, Records, TimeDomain};

use crate::{Error, Result};

/// One timer that fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FiredTimer<'a> {
    /// The clock the timer followed.
    pub domain: TimeDomain,
    /// The time it was set for, in milliseconds.
    pub timestamp: i64,
    /// The key it was set for.
    pub key: &'a [u8],
}

/// The timers that fired in one call of [`Operator::on_timers`](crate::Operator::on_timers), all
/// of one domain, in firing order: by timestamp, ties by key (bytewise).
#[derive(Debug, Clone, Copy)]
pub struct FiredTimers<'a> {
    domain: TimeDomain,
    batch: Batch<'a>,
}

impl<'a> FiredTimers<'a> {
    /// The timers of `batch`, a decoded fired-timer batch whose port names the domain.
    pub(crate) fn from_batch(batch: Batch<'a>) -> Result<Self> {
        match TimeDomain::from_code(batch.port()) {
            Some(domain) => Ok(FiredTimers { domain, batch }),
            None => Err(Error::msg(format!(
                "fired timers arrived with port {}, which is no time domain (0 event, 1 \
                 processing)",
                batch.port()
            ))),
        }
    }

    /// The domain of every timer here.
    pub fn domain(&self) -> TimeDomain {
        self.domain
    }

    /// How many timers fired.
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// Whether none did (the host never sends an empty batch, but the type allows it).
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// The timers, in firing order.
    pub fn iter(&self) -> FiredTimersIter<'a> {
        FiredTimersIter {
            domain: self.domain,
            records: self.batch.iter(),
        }
    }
}

impl<'a> IntoIterator for &FiredTimers<'a> {
    type Item = FiredTimer<'a>;
    type IntoIter = FiredTimersIter<'a>;

    fn into_iter(self) -> FiredTimersIter<'a> {
        self.iter()
    }
}

/// Iterator over [`FiredTimers`].
#[derive(Clone)]
pub struct FiredTimersIter<'a> {
    domain: TimeDomain,
    records: Records<'a>,
}

impl<'a> Iterator for FiredTimersIter<'a> {
    type Item = FiredTimer<'a>;

    fn next(&mut self) -> Option<FiredTimer<'a>> {
        let record = self.records.next()?;
        Some(FiredTimer {
            domain: self.domain,
            timestamp: record.timestamp,
            key: record.key,
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.records.size_hint()
    }
}

impl ExactSizeIterator for FiredTimersIter<'_> {}

#[cfg(test)]
mod tests {
    use weir_abi::BatchBuilder;

    use super::*;

    #[test]
    fn reads_a_fired_timer_batch_as_timers_of_its_port_domain() {
        let mut batch = BatchBuilder::new(TimeDomain::Processing.code());
        batch.push(b"a", b"", 5);
        batch.push(b"b", b"", 7);
        let timers = FiredTimers::from_batch(Batch::decode(batch.as_bytes()).unwrap()).unwrap();
        assert_eq!(timers.domain(), TimeDomain::Processing);
        assert_eq!(timers.len(), 2);
        let fired: Vec<_> = timers
            .iter()
            .map(|t| (t.domain, t.timestamp, t.key))
            .collect();
        assert_eq!(
            fired,
            [
                (TimeDomain::Processing, 5, &b"a"[..]),
                (TimeDomain::Processing, 7, &b"b"[..])
            ]
        );
    }

    #[test]
    fn refuses_a_port_that_is_no_domain() {
        let batch = BatchBuilder::new(2);
        let err = FiredTimers::from_batch(Batch::decode(batch.as_bytes()).unwrap()).unwrap_err();
        assert!(
            err.message().contains("port 2, which is no time domain"),
            "{err}"
        );
    }
}
