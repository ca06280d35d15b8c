//! Seeded randomness: a run's choices follow from one printed seed, so any run can be repeated.

use std::io::Write as _;
use std::time::SystemTime;

/// A small seeded random source (SplitMix64): the same seed gives the same choices.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A source seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A number in `lo..hi`.
    pub(crate) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo)
    }
}

/// The seed named by the environment variable `var` (a number, or `random` for one taken from
/// the clock), else `default`. Printed, so that any run can be repeated.
pub(crate) fn seed_from_env(var: &str, default: u64) -> u64 {
    let seed = match std::env::var(var) {
        Ok(v) if v == "random" => SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{var} must be a number or `random`, found {v:?}")),
        Err(_) => default,
    };
    eprintln!("seed {seed} (repeat with {var}={seed})");
    let _ = std::io::stderr().flush();
    seed
}

/// The number in the environment variable `var`, else `default`.
pub(crate) fn number_from_env(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{var} must be a number, found {v:?}")),
        Err(_) => default,
    }
}
