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
        let n = h % self.config.keys.max(1);
        self.key.extend_from_slice(n.to_string().as_bytes());
        self.value.clear();
        while self.value.len() < self.config.value_size {
            h = splitmix64(h);
            for b in h.to_le_bytes() {
                if self.value.len() < self.config.value_size {
                    self.value.push(b'a' + b % 26);
                }
            }
        }
    }
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
