//! Seeded randomness: a run's choices follow from one printed seed, so any run can be repeated.

use std::io::Write as _;
use std::time::SystemTime;

/// The small seeded random source every test shares (SplitMix64): the same seed gives the
/// same choices.
pub(crate) use weir_test_servers::rng::Rng;

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
