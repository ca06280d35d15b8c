//! The `generator` source: deterministic records for demos, tests and
//! benchmarks. Record `i` depends only on the seed and `i`, so a restored
//! generator (position = how many of its records it emitted) replays exactly.

use std::time::{Duration, Instant};

use super::{Source, SourcePoll, decode_u64_position};
use crate::dataflow::router::Router;
use crate::dataflow::task::TaskError;

/// Settings of a generator source.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratorConfig {
    /// Seed of the record stream.
    pub seed: u64,
    /// Total records over all subtasks; `None` = unbounded.
    pub count: Option<u64>,
    /// Records per second over all subtasks; `None` = as fast as possible.
    pub rate: Option<f64>,
    /// Number of distinct keys (at least 1).
    pub keys: u64,
    /// Bytes per value.
    pub value_size: usize,
}

/// Subtask `s` of `p` emits the records whose global index `i` has `i % p == s`.
/// Record `i`: key `key-<n>` with `n` a hash of (seed, i) modulo `keys`; value
/// `value_size` lowercase letters derived from the same hash; timestamp `i`.
#[derive(Debug)]
pub struct Generator {
    config: GeneratorConfig,
    subtask: u64,
    parallelism: u64,
    /// How many of this subtask's records were emitted (its position).
    emitted: u64,
    /// Pacing: when `emitted` was `paced_from`.
    pace_start: Option<(Instant, u64)>,
    key: Vec<u8>,
    value: Vec<u8>,
}

impl Generator {
    /// Subtask `subtask` of `parallelism` of a generator.
    pub fn new(config: GeneratorConfig, subtask: u32, parallelism: u32) -> Self {
        Generator {
            config,
            subtask: u64::from(subtask),
            parallelism: u64::from(parallelism.max(1)),
            emitted: 0,
            pace_start: None,
            key: Vec::with_capacity(24),
            value: Vec::new(),
        }
    }

    /// The global index of this subtask's `k`-th record.
    fn index(&self, k: u64) -> u64 {
        k * self.parallelism + self.subtask
    }

    fn exhausted(&self) -> bool {
        self.config
            .count
            .is_some_and(|count| self.index(self.emitted) >= count)
    }

    fn fill(&mut self, i: u64) {
        let mut h = splitmix64(self.config.seed ^ splitmix64(i));
        self.key.clear();
        self.key.extend_from_slice(b"key-");
        push_decimal(&mut self.key, h % self.config.keys.max(1));
        self.value.clear();
        while self.value.len() < self.config.value_size {
            h = splitmix64(h);
            let left = self.config.value_size - self.value.len();
            let letters = h.to_le_bytes().map(|b| b'a' + b % 26);
            self.value.extend_from_slice(&letters[..left.min(8)]);
        }
    }
}

/// Appends `n` in decimal to `out`, without the allocation of `n.to_string()` (this runs once
/// per generated record).
fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut start = digits.len();
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[start..]);
}

/// A well-mixed 64-bit hash step (SplitMix64).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Source for Generator {
    fn poll(&mut self, out: &mut Router, max: usize) -> Result<SourcePoll, TaskError> {
        let mut budget = max as u64;
        if let Some(rate) = self.config.rate {
            let per_subtask = rate / self.parallelism as f64;
            let (start, base) = *self
                .pace_start
                .get_or_insert((Instant::now(), self.emitted));
            let allowed = base + (start.elapsed().as_secs_f64() * per_subtask) as u64;
            if allowed <= self.emitted {
                let wait = Duration::from_secs_f64((1.0 / per_subtask).min(0.1));
                return Ok(if self.exhausted() {
                    SourcePoll::Exhausted
                } else {
                    SourcePoll::Idle(wait)
                });
            }
            budget = budget.min(allowed - self.emitted);
        }
        for _ in 0..budget {
            if self.exhausted() {
                return Ok(SourcePoll::Exhausted);
            }
            let i = self.index(self.emitted);
            self.fill(i);
            out.push(&self.key, &self.value, i as i64)?;
            self.emitted += 1;
        }
        Ok(if self.exhausted() {
            SourcePoll::Exhausted
        } else {
            SourcePoll::Emitted
        })
    }

    fn position(&self) -> Vec<u8> {
        self.emitted.to_le_bytes().to_vec()
    }

    fn seek(&mut self, position: &[u8]) -> Result<(), TaskError> {
        self.emitted = decode_u64_position("generator", position)?;
        self.pace_start = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(keys: u64, value_size: usize) -> GeneratorConfig {
        GeneratorConfig {
            seed: 42,
            count: None,
            rate: None,
            keys,
            value_size,
        }
    }

    /// Record `i` as the generator first defined it: the records of a seed must never change,
    /// since a restored job replays them and benchmarks compare runs.
    fn reference(config: &GeneratorConfig, i: u64) -> (Vec<u8>, Vec<u8>) {
        let mut h = splitmix64(config.seed ^ splitmix64(i));
        let key = format!("key-{}", h % config.keys.max(1)).into_bytes();
        let mut value = Vec::new();
        while value.len() < config.value_size {
            h = splitmix64(h);
            for b in h.to_le_bytes() {
                if value.len() < config.value_size {
                    value.push(b'a' + b % 26);
                }
            }
        }
        (key, value)
    }

    #[test]
    fn records_depend_only_on_seed_and_index_as_first_defined() {
        for (keys, value_size) in [(1, 0), (100_000, 16), (7, 3), (u64::MAX, 21)] {
            let config = config(keys, value_size);
            let mut generator = Generator::new(config.clone(), 0, 1);
            for i in [0, 1, 2, 99, 12_345, u64::MAX / 3] {
                generator.fill(i);
                let (key, value) = reference(&config, i);
                assert_eq!(generator.key, key, "key of record {i}");
                assert_eq!(generator.value, value, "value of record {i}");
            }
        }
    }

    #[test]
    fn decimals_match_to_string() {
        for n in [0, 7, 10, 99_999, 100_000, u64::MAX] {
            let mut out = b"key-".to_vec();
            push_decimal(&mut out, n);
            assert_eq!(out, format!("key-{n}").into_bytes());
        }
    }
}
