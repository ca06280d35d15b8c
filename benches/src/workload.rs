//! [`Workload`]: the records the guest-call and state benchmarks feed, made the way the
//! `generator` source makes them, so the micro-benchmarks see the job benchmarks' keys.

use weir_abi::BatchBuilder;
use weir_test_servers::rng::splitmix64;

/// Deterministic records: record `i` has key `key-<n>` with `n` a SplitMix64 hash of
/// (`seed`, `i`) modulo `keys`, a value of `value_size` lowercase letters from the same hash,
/// and timestamp `i` — the scheme of `host/src/connectors/generator.rs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workload {
    /// Seeds the record stream.
    pub seed: u64,
    /// How many distinct keys the records use.
    pub keys: u64,
    /// Bytes in each value.
    pub value_size: usize,
}

impl Workload {
    /// Writes record `i` into `key` and `value` (cleared first).
    pub fn record(&self, i: u64, key: &mut Vec<u8>, value: &mut Vec<u8>) {
        let mut h = splitmix64(self.seed ^ splitmix64(i));
        key.clear();
        push_key(key, h % self.keys.max(1));
        value.clear();
        while value.len() < self.value_size {
            h = splitmix64(h);
            for b in h.to_le_bytes() {
                if value.len() < self.value_size {
                    value.push(b'a' + b % 26);
                }
            }
        }
    }

    /// Records `0..records` encoded as port-0 batches of `batch_size` records (the last one
    /// may be shorter).
    pub fn batches(&self, batch_size: usize, records: u64) -> Vec<Vec<u8>> {
        let (mut key, mut value) = (Vec::new(), Vec::new());
        let mut batches = Vec::new();
        let mut batch = BatchBuilder::new(0);
        for i in 0..records {
            self.record(i, &mut key, &mut value);
            batch.push(&key, &value, i as i64);
            if batch.len() == batch_size {
                batches.push(batch.take_bytes());
            }
        }
        if !batch.is_empty() {
            batches.push(batch.into_bytes());
        }
        batches
    }

    /// Every key `key-0` … `key-<keys − 1>` once, in batches of `batch_size`: fed first, it
    /// brings an operator to the state it has in steady state.
    pub fn every_key(&self, batch_size: usize) -> impl Iterator<Item = Vec<u8>> + '_ {
        distinct_keys(0..self.keys, self.value_size, batch_size)
    }
}

/// Batches of one record per key `key-<n>`, `n` in `range`, with values of `value_size` bytes.
pub fn distinct_keys(
    range: std::ops::Range<u64>,
    value_size: usize,
    batch_size: usize,
) -> impl Iterator<Item = Vec<u8>> {
    let value = vec![b'v'; value_size];
    let mut next = range.start;
    let end = range.end;
    let mut key = Vec::new();
    std::iter::from_fn(move || {
        if next >= end {
            return None;
        }
        let mut batch = BatchBuilder::new(0);
        while next < end && batch.len() < batch_size {
            key.clear();
            push_key(&mut key, next);
            batch.push(&key, &value, next as i64);
            next += 1;
        }
        Some(batch.into_bytes())
    })
}

/// Appends `key-<n>`.
fn push_key(key: &mut Vec<u8>, n: u64) {
    key.extend_from_slice(b"key-");
    key.extend_from_slice(n.to_string().as_bytes());
}
