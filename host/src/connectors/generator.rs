//! The `generator` source: deterministic records for demos, tests and
//! benchmarks. Record `i` depends only on the seed and `i`, so a restored
//! generator (position = how many of its records it emitted) replays exactly.
//!
//! Its records are dealt in **splits**: split `s` of `stride` holds the records whose index `i`
//! has `i % stride == s`. A subtask starts with one, its own (`s` its index, `stride` its
//! parallelism); a rescale ([`rescale_positions`]) deals the old subtasks' splits, with how far
//! each got, to the new subtasks, split `s` to subtask `s mod parallelism`, so every record is
//! emitted once whatever the parallelism. A subtask with several emits from each in turn, a poll
//! at a time.

use std::time::{Duration, Instant};

use super::connector::{RescaleRule, SourceConnector, TaskContext};
use super::record::decode_u64_position;
use crate::dataflow::error::TaskError;
use crate::dataflow::processor::{Source, SourceOutput, SourcePoll};
use crate::job::{GeneratorSettings, GeneratorValues};

/// Subtask `s` of `p` emits the records whose global index `i` has `i % p == s` (its split;
/// after a rescale, the splits it took over).
/// Record `i`: key `key-<n>` with `n` a hash of (seed, i) modulo `keys`; value
/// `value_size` lowercase letters derived from the same hash, or with `values = "integers"`
/// an integer from `min` to `max` derived from it, in decimal; timestamp `i`, or with
/// `disorder` the [`generator_timestamp`] of `i`.
#[derive(Debug)]
pub(crate) struct Generator {
    config: GeneratorSettings,
    /// This subtask's index and its vertex's parallelism.
    subtask: u64,
    parallelism: u64,
    /// How many splits the records are dealt in.
    stride: u64,
    /// The splits this subtask emits, with how many records of each it emitted (its position).
    splits: Vec<Split>,
    /// The split the next poll emits from.
    current: usize,
    /// Whether the source's clock knows every split (named before any emits, so that none
    /// runs ahead of another's watermark).
    splits_named: bool,
    /// Pacing: when the records emitted over all splits were `paced_from`.
    pace_start: Option<(Instant, u64)>,
    /// The current record's key: `key-` and up to 20 digits, of which `key_len` bytes are used.
    key: [u8; KEY_CAPACITY],
    key_len: usize,
    /// The current record's value, always `value_size` bytes long.
    value: Vec<u8>,
    /// `% keys`, without a division per record.
    key_modulus: Modulus,
    /// For integer values: `min` and `% (max - min + 1)`, or `None` for the whole `i64` range.
    integers: Option<(i64, Option<Modulus>)>,
    /// With `disorder`: `% (disorder + 1)`, how far back a timestamp moves.
    disorder: Option<Modulus>,
    /// The current record's timestamp.
    timestamp: i64,
}

/// One split of a generator: the records `k · stride + offset`, of which `emitted` went out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Split {
    offset: u64,
    emitted: u64,
}

/// The first bytes of a position holding several splits (one split of a subtask's own is its
/// 8-byte count, as before splits).
const SPLITS_MAGIC: [u8; 8] = *b"\xffGENSPLT";

/// The longest key: `key-` and the 20 digits of `u64::MAX`.
const KEY_CAPACITY: usize = KEY_PREFIX.len() + 20;
const KEY_PREFIX: &[u8] = b"key-";

impl Generator {
    /// Subtask `subtask` of `parallelism` of a generator.
    pub(crate) fn new(config: GeneratorSettings, subtask: u32, parallelism: u32) -> Self {
        let parallelism = u64::from(parallelism.max(1));
        Generator {
            subtask: u64::from(subtask),
            parallelism,
            stride: parallelism,
            splits: vec![Split {
                offset: u64::from(subtask),
                emitted: 0,
            }],
            current: 0,
            splits_named: false,
            pace_start: None,
            key: [0; KEY_CAPACITY],
            key_len: 0,
            value: Vec::new(),
            key_modulus: Modulus::new(config.keys.max(1)),
            integers: match config.values {
                GeneratorValues::Letters => None,
                GeneratorValues::Integers { min, max } => {
                    // max - min + 1 values; 2^64 of them (the whole range) overflows to 0.
                    let span = (max.wrapping_sub(min) as u64).wrapping_add(1);
                    Some((min, (span != 0).then(|| Modulus::new(span))))
                }
            },
            disorder: (config.disorder != 0)
                .then(|| Modulus::new(config.disorder.saturating_add(1))),
            timestamp: 0,
            config,
        }
    }

    /// The global index of the `k`-th record of split `split`.
    fn index(&self, split: Split, k: u64) -> u64 {
        k * self.stride + split.offset
    }

    /// Whether `split` has emitted all its records.
    fn split_done(&self, split: Split) -> bool {
        self.config
            .count
            .is_some_and(|count| self.index(split, split.emitted) >= count)
    }

    fn exhausted(&self) -> bool {
        self.splits.iter().all(|&s| self.split_done(s))
    }

    /// Records emitted over all splits.
    fn emitted(&self) -> u64 {
        self.splits.iter().map(|s| s.emitted).sum()
    }

    /// Makes record `i` the current one. Writes in place, without a copy or a call per field:
    /// this runs once per generated record, and a benchmark's source must cost little next to
    /// the operator it feeds.
    fn fill(&mut self, i: u64) {
        let mut h = record_hash(self.config.seed, i);
        self.timestamp = match &self.disorder {
            None => i as i64,
            Some(spread) => disordered(i, h, spread),
        };
        self.key[..KEY_PREFIX.len()].copy_from_slice(KEY_PREFIX);
        let digits = write_decimal(
            &mut self.key[KEY_PREFIX.len()..],
            self.key_modulus.remainder(h),
        );
        self.key_len = KEY_PREFIX.len() + digits;
        if let Some((min, span)) = self.integers {
            h = splitmix64(h);
            let offset = span.map_or(h, |span| span.remainder(h));
            let n = min.wrapping_add(offset as i64);
            self.value.resize(20, 0);
            let digits = write_signed_decimal(&mut self.value, n);
            self.value.truncate(digits);
            return;
        }
        self.value.resize(self.config.value_size, 0);
        let mut chunks = self.value.chunks_exact_mut(8);
        for chunk in &mut chunks {
            h = splitmix64(h);
            chunk.copy_from_slice(&letters(h));
        }
        let tail = chunks.into_remainder();
        if !tail.is_empty() {
            h = splitmix64(h);
            for (byte, letter) in tail.iter_mut().zip(letters(h)) {
                *byte = letter;
            }
        }
    }

    /// The current record's key.
    fn key(&self) -> &[u8] {
        &self.key[..self.key_len]
    }
}

/// The hash record `i` of a generator seeded `seed` derives its key, value and timestamp
/// from.
fn record_hash(seed: u64, i: u64) -> u64 {
    splitmix64(seed ^ splitmix64(i))
}

/// Mixed into a record's hash before its disorder is drawn, so that how far back its
/// timestamp moves follows neither its key nor its value.
const DISORDER_STREAM: u64 = u64::from_be_bytes(*b"disorder");

/// The timestamp of record `index` of a generator seeded `seed` with `disorder`
/// (milliseconds; `disorder` in the job file): `index` moved back by `d`, a pseudo-random
/// number from 0 to `disorder` derived from `seed` and `index` alone, and never below 0. So
/// the same seed gives the same timestamps, and a record's timestamp is at most `disorder`
/// behind that of any record before it: a watermark strategy whose `out_of_orderness` is at
/// least `disorder` milliseconds finds no record late. `disorder = 0` gives `index`, in order.
///
/// Crate-visible only, as the connectors are: integration tests (under `tests/`) reach a
/// generator through job files and `weir run`, never its internals.
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "for the event-time runtime of issue 18, which is not merged yet (the \
                  generator itself draws from the record's hash it already has): remove this \
                  once it calls the function"
    )
)]
pub(crate) fn generator_timestamp(seed: u64, index: u64, disorder: u64) -> i64 {
    if disorder == 0 {
        return index as i64;
    }
    let spread = Modulus::new(disorder.saturating_add(1));
    disordered(index, record_hash(seed, index), &spread)
}

/// [`generator_timestamp`] from the record's hash `h` and `% (disorder + 1)`.
fn disordered(index: u64, h: u64, spread: &Modulus) -> i64 {
    let back = spread.remainder(splitmix64(h ^ DISORDER_STREAM));
    index.saturating_sub(back) as i64
}

/// `n % d` for a divisor fixed in advance, by multiplications instead of a division (Lemire,
/// Kaser and Kurz, "Faster remainder by direct computation", 2019: exact for every 64-bit `n`
/// and `d` with a 128-bit multiplier). A 64-bit division took 15 % of the generator's time.
#[derive(Debug, Clone, Copy)]
struct Modulus {
    divisor: u64,
    /// `ceil(2^128 / divisor)`, or 0 for a divisor of 1 (every remainder is 0).
    multiplier: u128,
}

impl Modulus {
    /// The remainders of division by `divisor`, which must not be 0.
    fn new(divisor: u64) -> Self {
        assert!(divisor > 0, "remainder of division by zero");
        let multiplier = if divisor == 1 {
            0
        } else {
            u128::MAX / u128::from(divisor) + 1
        };
        Modulus {
            divisor,
            multiplier,
        }
    }

    /// `n % divisor`.
    fn remainder(&self, n: u64) -> u64 {
        // The fraction n / divisor, in 128 fixed-point bits; times the divisor, its integer
        // part is the remainder: the high 64 bits of a 128 × 64-bit product.
        let fraction = self.multiplier.wrapping_mul(u128::from(n));
        let d = u128::from(self.divisor);
        let low = (fraction & u128::from(u64::MAX)) * d;
        let high = (fraction >> 64) * d;
        ((high + (low >> 64)) >> 64) as u64
    }
}

/// Eight lowercase letters from the eight bytes of `h`.
///
/// Byte `i` of the result is `b'a' + b % 26` for byte `i` of `h` (little-endian), computed for
/// all eight at once: each byte gets a 16-bit lane of its own (the even bytes in one word, the
/// odd ones in another), where `b / 26` is `(b · 79) >> 11` — exact for every byte, and
/// `b · 79` < 2^16 stays inside its lane. Byte by byte, the letters were half of the generator's
/// time in the chained stateless job.
fn letters(h: u64) -> [u8; 8] {
    const LANES: u64 = 0x00ff_00ff_00ff_00ff;
    const QUOTIENT: u64 = 0x001f_001f_001f_001f;
    let remainders = |bytes: u64| bytes - ((bytes * 79) >> 11 & QUOTIENT) * 26;
    let even = remainders(h & LANES);
    let odd = remainders((h >> 8) & LANES);
    ((even | odd << 8) + u64::from_le_bytes([b'a'; 8])).to_le_bytes()
}

/// Writes `n` in decimal at the start of `out` and returns how many digits it took, without
/// the allocation of `n.to_string()`. `out` must hold 20 bytes (the digits of `u64::MAX`).
fn write_decimal(out: &mut [u8], mut n: u64) -> usize {
    let len = n.checked_ilog10().map_or(1, |log| log as usize + 1);
    // Two digits per division, from the end: half the dependent divisions of one at a time.
    let mut end = len;
    while end >= 2 {
        let pair = (n % 100) as usize * 2;
        out[end - 2..end].copy_from_slice(&DIGIT_PAIRS[pair..pair + 2]);
        n /= 100;
        end -= 2;
    }
    if end == 1 {
        out[0] = b'0' + n as u8;
    }
    len
}

/// `"00"`, `"01"`, … `"99"`, back to back.
const DIGIT_PAIRS: [u8; 200] = {
    let mut pairs = [0u8; 200];
    let mut i = 0;
    while i < 100 {
        pairs[2 * i] = b'0' + (i / 10) as u8;
        pairs[2 * i + 1] = b'0' + (i % 10) as u8;
        i += 1;
    }
    pairs
};

/// Writes `n` in decimal, with a `-` if negative, at the start of `out` (which must hold 20
/// bytes, as `i64::MIN` takes) and returns how many bytes it took.
fn write_signed_decimal(out: &mut [u8], n: i64) -> usize {
    if n < 0 {
        out[0] = b'-';
        1 + write_decimal(&mut out[1..], n.unsigned_abs())
    } else {
        write_decimal(out, n as u64)
    }
}

/// A well-mixed 64-bit hash step (SplitMix64): the bits SplitMix64 yields after the counter
/// `x`.
fn splitmix64(mut x: u64) -> u64 {
    splitmix64_next(&mut x)
}

/// One step of SplitMix64 over the counter `state`: advances it and returns well-mixed bits.
/// The host's tests draw their random contents from it too (`wasm::image::format::tests`,
/// `state::keyed::tests`).
pub(crate) fn splitmix64_next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Source for Generator {
    fn poll(&mut self, out: &mut SourceOutput<'_>, max: usize) -> Result<SourcePoll, TaskError> {
        if self.splits.is_empty() {
            // A subtask a rescale gave no split: a bounded generator is done, a stream has
            // nothing for it.
            return Ok(match self.config.count {
                Some(_) => SourcePoll::Exhausted,
                None => SourcePoll::Idle(Duration::from_millis(100)),
            });
        }
        let mut budget = max as u64;
        if let Some(rate) = self.config.rate {
            let per_subtask = rate * self.splits.len() as f64 / self.stride as f64;
            let emitted = self.emitted();
            let (start, base) = *self.pace_start.get_or_insert((Instant::now(), emitted));
            let allowed = base + (start.elapsed().as_secs_f64() * per_subtask) as u64;
            if allowed <= emitted {
                let wait = Duration::from_secs_f64((1.0 / per_subtask).min(0.1));
                return Ok(if self.exhausted() {
                    SourcePoll::Exhausted
                } else {
                    SourcePoll::Idle(wait)
                });
            }
            budget = budget.min(allowed - emitted);
        }
        // This poll's split: the next one not done, in turn.
        let Some(current) = (0..self.splits.len())
            .map(|n| (self.current + n) % self.splits.len())
            .find(|&n| !self.split_done(self.splits[n]))
        else {
            return Ok(SourcePoll::Exhausted);
        };
        self.current = (current + 1) % self.splits.len();
        let mut split = self.splits[current];
        if self.splits.len() > 1 && out.tracks_splits() {
            if !self.splits_named {
                for other in &self.splits {
                    out.enter_split(&other.offset.to_string());
                }
                self.splits_named = true;
            }
            out.enter_split(&split.offset.to_string());
        }
        for _ in 0..budget {
            if self.split_done(split) {
                break;
            }
            let i = self.index(split, split.emitted);
            self.fill(i);
            out.push(self.key(), &self.value, self.timestamp)?;
            split.emitted += 1;
        }
        self.splits[current] = split;
        Ok(if self.exhausted() {
            SourcePoll::Exhausted
        } else {
            SourcePoll::Emitted
        })
    }

    fn position(&self) -> Vec<u8> {
        match self.splits.as_slice() {
            [own] if own.offset == self.subtask && self.stride == self.parallelism => {
                own.emitted.to_le_bytes().to_vec()
            }
            splits => encode_splits(self.stride, splits),
        }
    }

    fn seek(&mut self, position: &[u8]) -> Result<(), TaskError> {
        if position.starts_with(&SPLITS_MAGIC) {
            let (stride, splits) = decode_splits(position).map_err(|problem| {
                TaskError::Restore(format!("generator position is malformed: {problem}"))
            })?;
            self.stride = stride;
            self.splits = splits;
        } else {
            self.stride = self.parallelism;
            self.splits = vec![Split {
                offset: self.subtask,
                emitted: decode_u64_position("generator", position)?,
            }];
        }
        self.current = 0;
        self.splits_named = false;
        self.pace_start = None;
        Ok(())
    }
}

/// A position of several splits: the magic, the stride (u64), the number of splits (u32), then
/// each split's offset and records emitted (u64 each); little-endian.
fn encode_splits(stride: u64, splits: &[Split]) -> Vec<u8> {
    let mut out = SPLITS_MAGIC.to_vec();
    out.extend_from_slice(&stride.to_le_bytes());
    out.extend_from_slice(&(splits.len() as u32).to_le_bytes());
    for split in splits {
        out.extend_from_slice(&split.offset.to_le_bytes());
        out.extend_from_slice(&split.emitted.to_le_bytes());
    }
    out
}

/// Reads what [`encode_splits`] wrote.
fn decode_splits(bytes: &[u8]) -> Result<(u64, Vec<Split>), &'static str> {
    let body = bytes.strip_prefix(&SPLITS_MAGIC).ok_or("no split header")?;
    let u64_at = |at: usize| -> Result<u64, &'static str> {
        let b = body.get(at..at + 8).ok_or("cut short")?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| "cut short")?))
    };
    let stride = u64_at(0)?;
    let n = body
        .get(8..12)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
        .ok_or("cut short")?;
    if body.len() != 12 + 16 * n {
        return Err("its length does not match its number of splits");
    }
    let splits = (0..n)
        .map(|k| {
            Ok(Split {
                offset: u64_at(12 + 16 * k)?,
                emitted: u64_at(20 + 16 * k)?,
            })
        })
        .collect::<Result<Vec<_>, &'static str>>()?;
    if stride == 0 || splits.iter().any(|s| s.offset >= stride) {
        return Err("a split outside its stride");
    }
    Ok((stride, splits))
}

/// The `generator` source, with its settings.
pub(crate) struct Connector<'a>(pub(crate) &'a GeneratorSettings);

impl SourceConnector for Connector<'_> {
    fn build(&self, task: TaskContext<'_>) -> Box<dyn Source> {
        Box::new(Generator::new(
            self.0.clone(),
            task.subtask,
            task.parallelism,
        ))
    }

    /// Every split moves, with how far it got ([`rescale_positions`]).
    fn rescale_rule(&self) -> Option<RescaleRule> {
        Some(rescale_positions)
    }
}

/// The positions of a generator's subtasks (one per old subtask, in order) for `parallelism` new
/// ones: every old split goes, with how far it got, to new subtask `offset mod parallelism`.
pub(crate) fn rescale_positions(old: &[&[u8]], parallelism: u32) -> Result<Vec<Vec<u8>>, String> {
    let old_parallelism = old.len() as u64;
    let mut stride = None;
    let mut all = Vec::new();
    for (subtask, bytes) in (0u64..).zip(old) {
        let (s, splits) = if bytes.starts_with(&SPLITS_MAGIC) {
            decode_splits(bytes)
                .map_err(|problem| format!("the position of subtask {subtask}: {problem}"))?
        } else {
            let emitted = if bytes.is_empty() {
                0
            } else {
                decode_u64_position("generator", bytes).map_err(|e| e.to_string())?
            };
            (
                old_parallelism,
                vec![Split {
                    offset: subtask,
                    emitted,
                }],
            )
        };
        if *stride.get_or_insert(s) != s {
            return Err(format!(
                "subtask {subtask} deals the records in {s} splits, another in {}",
                stride.unwrap_or(s)
            ));
        }
        all.extend(splits);
    }
    let stride = stride.unwrap_or(old_parallelism);
    let p = u64::from(parallelism.max(1));
    Ok((0..p)
        .map(|j| {
            let mine: Vec<Split> = all.iter().copied().filter(|s| s.offset % p == j).collect();
            encode_splits(stride, &mine)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(keys: u64, value_size: usize) -> GeneratorSettings {
        GeneratorSettings {
            seed: 42,
            count: None,
            rate: None,
            keys,
            value_size,
            values: GeneratorValues::Letters,
            disorder: 0,
        }
    }

    #[test]
    fn letters_are_each_byte_modulo_26_for_every_byte_in_every_place() {
        let bytewise = |h: u64| h.to_le_bytes().map(|b| b'a' + b % 26);
        for b in 0..=255u64 {
            for place in 0..8 {
                // The byte among neighbours of every size, so lanes cannot leak into each other.
                for fill in [0, u64::MAX, 0x1962_d10f_77aa_0135] {
                    let h = (fill & !(0xff << (8 * place))) | b << (8 * place);
                    assert_eq!(letters(h), bytewise(h), "h = {h:#018x}");
                }
            }
        }
    }

    /// Record `i` as the generator first defined it: the records of a seed must never change,
    /// since a restored job replays them and benchmarks compare runs.
    fn reference(config: &GeneratorSettings, i: u64) -> (Vec<u8>, Vec<u8>) {
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
                assert_eq!(generator.key(), key, "key of record {i}");
                assert_eq!(generator.value, value, "value of record {i}");
            }
        }
    }

    #[test]
    fn the_modulus_matches_the_remainder_operator_at_the_edges() {
        let divisors = [
            1,
            2,
            3,
            7,
            10,
            26,
            100_000,
            1 << 32,
            (1 << 63) + 1,
            u64::MAX - 1,
            u64::MAX,
        ];
        for d in divisors {
            let m = Modulus::new(d);
            for n in [
                0,
                1,
                d - 1,
                d,
                d.wrapping_add(1),
                u64::MAX / 2,
                u64::MAX - 1,
                u64::MAX,
            ] {
                assert_eq!(m.remainder(n), n % d, "{n} % {d}");
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn the_modulus_matches_the_remainder_operator(n: u64, d in 1u64..) {
            proptest::prop_assert_eq!(Modulus::new(d).remainder(n), n % d);
        }
    }

    #[test]
    fn integer_values_stay_in_their_range_and_cover_it() {
        for (min, max) in [(1, 6), (-3, 3), (0, 0), (i64::MAX - 1, i64::MAX)] {
            let mut config = config(10, 16);
            config.values = GeneratorValues::Integers { min, max };
            let mut generator = Generator::new(config, 0, 1);
            let mut seen = std::collections::BTreeSet::new();
            for i in 0..2_000 {
                generator.fill(i);
                let text = std::str::from_utf8(&generator.value).unwrap();
                let n: i64 = text.parse().unwrap_or_else(|e| panic!("{text:?}: {e}"));
                assert!((min..=max).contains(&n), "{n} outside {min}..={max}");
                seen.insert(n);
            }
            let span = (max - min + 1) as usize;
            assert_eq!(seen.len(), span, "{min}..={max} not covered: {seen:?}");
        }
    }

    #[test]
    fn integer_values_over_the_whole_range_are_written_in_decimal() {
        let mut config = config(10, 16);
        config.values = GeneratorValues::Integers {
            min: i64::MIN,
            max: i64::MAX,
        };
        let mut generator = Generator::new(config, 0, 1);
        let mut negative = false;
        for i in 0..64 {
            generator.fill(i);
            let text = std::str::from_utf8(&generator.value).unwrap();
            let n: i64 = text.parse().unwrap();
            assert_eq!(n.to_string(), text);
            negative |= n < 0;
        }
        assert!(negative, "half of the range is negative");
        let mut out = [0u8; 20];
        let len = write_signed_decimal(&mut out, i64::MIN);
        assert_eq!(&out[..len], i64::MIN.to_string().as_bytes());
    }

    #[test]
    fn decimals_match_to_string() {
        for n in [
            0,
            7,
            9,
            10,
            99_999,
            100_000,
            10u64.pow(19) - 1,
            10u64.pow(19),
            u64::MAX,
        ] {
            let mut out = [0u8; 20];
            let len = write_decimal(&mut out, n);
            assert_eq!(&out[..len], n.to_string().as_bytes());
        }
    }

    #[test]
    fn without_disorder_record_i_has_timestamp_i() {
        let mut generator = Generator::new(config(10, 4), 0, 1);
        for i in [0, 1, 2, 99, 12_345, i64::MAX as u64] {
            assert_eq!(generator_timestamp(42, i, 0), i as i64);
            generator.fill(i);
            assert_eq!(generator.timestamp, i as i64);
        }
    }

    #[test]
    fn disorder_moves_a_timestamp_back_by_at_most_disorder_and_never_below_zero() {
        for disorder in [1, 7, 100, 3_600_000] {
            for seed in [0, 42] {
                for i in (0..5_000).chain([3_599_999, 3_600_000, i64::MAX as u64]) {
                    let t = generator_timestamp(seed, i, disorder);
                    let floor = i.saturating_sub(disorder) as i64;
                    assert!(
                        (floor..=i as i64).contains(&t) && t >= 0,
                        "record {i}, disorder {disorder}: {t}"
                    );
                }
            }
        }
    }

    #[test]
    fn disordered_timestamps_depend_only_on_seed_and_index() {
        let timestamps = |seed: u64| {
            let mut c = config(10, 4);
            c.seed = seed;
            c.disorder = 100;
            let mut generator = Generator::new(c, 0, 1);
            (0..1_000)
                .map(|i| {
                    generator.fill(i);
                    assert_eq!(generator.timestamp, generator_timestamp(seed, i, 100));
                    generator.timestamp
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            timestamps(42),
            timestamps(42),
            "a replay gives the same timestamps"
        );
        assert_ne!(
            timestamps(42),
            timestamps(43),
            "another seed, other timestamps"
        );
        // Keys and values are those of the generator without disorder.
        let mut c = config(10, 4);
        c.disorder = 100;
        let mut disordered = Generator::new(c.clone(), 0, 1);
        for i in 0..1_000 {
            disordered.fill(i);
            let (key, value) = reference(&c, i);
            assert_eq!(
                (disordered.key(), &disordered.value[..]),
                (&key[..], &value[..])
            );
        }
    }

    #[test]
    fn disorder_puts_records_out_of_order_over_its_whole_range() {
        let disorder = 100;
        let t: Vec<i64> = (0..10_000)
            .map(|i| generator_timestamp(42, i, disorder))
            .collect();
        let inversions = t.windows(2).filter(|w| w[1] < w[0]).count();
        assert!(
            inversions > 1_000,
            "only {inversions} of 9999 pairs out of order"
        );
        let backs: std::collections::BTreeSet<i64> = t
            .iter()
            .enumerate()
            .skip(100)
            .map(|(i, &t)| i as i64 - t)
            .collect();
        assert_eq!(
            backs,
            (0..=disorder as i64).collect(),
            "every distance from 0 to the disorder occurs"
        );
    }

    #[test]
    fn out_of_orderness_of_the_disorder_makes_no_record_late() {
        // Per subtask, the watermark is the largest timestamp seen - out_of_orderness - 1: a
        // record is late when its timestamp is at or before it.
        let disorder = 50;
        for parallelism in 1..=3u64 {
            for subtask in 0..parallelism {
                let mut max = i64::MIN;
                for k in 0..2_000 {
                    let t = generator_timestamp(7, k * parallelism + subtask, disorder);
                    assert!(
                        max == i64::MIN || t > max - disorder as i64 - 1,
                        "record {k} of subtask {subtask}/{parallelism} is late: {t}, max {max}"
                    );
                    max = max.max(t);
                }
            }
        }
    }

    /// The timestamps (record indices) `source` emits in `polls` polls of `max` records (all it
    /// has when `polls` is `None`).
    fn emit(source: &mut Generator, max: usize, polls: Option<usize>) -> Vec<i64> {
        use crate::dataflow::channel::StopSignal;
        use crate::dataflow::message::Message;
        use crate::dataflow::router::{OutputEdge, Router};
        use crate::job::Partitioner;
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut router = Router::new(
            vec![OutputEdge::new(Partitioner::Forward, 0, vec![tx.into()])],
            StopSignal::new(),
            std::sync::Arc::default(),
        );
        for _ in 0..polls.unwrap_or(usize::MAX) {
            let polled = source.poll(&mut SourceOutput::new(&mut router, None), max);
            if matches!(polled.unwrap(), SourcePoll::Exhausted) {
                break;
            }
        }
        router.flush().unwrap();
        let mut timestamps = Vec::new();
        while let Ok(Message::Batch(bytes)) = rx.try_recv() {
            let batch = weir_abi::Batch::decode(&bytes).unwrap();
            timestamps.extend(batch.iter().map(|r| r.timestamp));
        }
        timestamps
    }

    #[test]
    fn a_rescaled_generator_emits_every_record_once() {
        for (from, to) in [(2u32, 3u32), (3, 1), (2, 5), (4, 2)] {
            let mut config = config(10, 4);
            config.count = Some(1_000);
            let mut seen = Vec::new();
            // Each old subtask emits a different share before the checkpoint.
            let positions: Vec<Vec<u8>> = (0..from)
                .map(|s| {
                    let mut g = Generator::new(config.clone(), s, from);
                    seen.extend(emit(&mut g, 7 + s as usize * 13, Some(3)));
                    g.position()
                })
                .collect();
            // The plain position of a subtask's own split, as before splits.
            assert!(positions.iter().all(|p| p.len() == 8));
            let old: Vec<&[u8]> = positions.iter().map(Vec::as_slice).collect();
            let new = rescale_positions(&old, to).unwrap();
            assert_eq!(new.len(), to as usize);
            let mut again = Vec::new();
            for (s, position) in (0..to).zip(&new) {
                let mut g = Generator::new(config.clone(), s, to);
                g.seek(position).unwrap();
                // A position survives another checkpoint and restore.
                let mut copy = Generator::new(config.clone(), s, to);
                copy.seek(&g.position()).unwrap();
                assert_eq!(copy.splits, g.splits);
                seen.extend(emit(&mut g, 50, None));
                again.push(g.position());
            }
            seen.sort_unstable();
            assert_eq!(seen, (0..1_000).collect::<Vec<i64>>(), "{from} → {to}");
            // And back to the first parallelism: nothing is left to emit.
            let old: Vec<&[u8]> = again.iter().map(Vec::as_slice).collect();
            for (s, position) in (0..from).zip(rescale_positions(&old, from).unwrap()) {
                let mut g = Generator::new(config.clone(), s, from);
                g.seek(&position).unwrap();
                assert_eq!(emit(&mut g, 50, None), Vec::<i64>::new());
            }
        }
    }

    #[test]
    fn a_malformed_split_position_is_refused() {
        let good = encode_splits(
            3,
            &[Split {
                offset: 1,
                emitted: 4,
            }],
        );
        assert_eq!(decode_splits(&good).unwrap().1.len(), 1);
        for cut in SPLITS_MAGIC.len()..good.len() {
            assert!(decode_splits(&good[..cut]).is_err(), "cut at {cut}");
        }
        let outside = encode_splits(
            1,
            &[Split {
                offset: 1,
                emitted: 0,
            }],
        );
        assert!(decode_splits(&outside).is_err());
        let mut g = Generator::new(config(10, 4), 0, 1);
        assert!(
            g.seek(&good[..20])
                .unwrap_err()
                .to_string()
                .contains("malformed")
        );
    }
}
