//! Key groups: how a record's key finds its subtask, in a way that survives a change of
//! parallelism (`docs/ABI.md` §16).
//!
//! A key belongs to one of `max_parallelism` **key groups** — its [`key_hash`] modulo
//! `max_parallelism` — and the key groups are dealt to the subtasks of an operator in
//! contiguous ranges (Flink's assignment): subtask `i` of `p` owns the groups
//! `ceil(i·m/p) .. ceil((i+1)·m/p)`. Keyed state is written and moved per key, and a key's group
//! never changes while `max_parallelism` does not, so a job can restart at another parallelism
//! (at most `max_parallelism`) and hand each new subtask exactly the keys it will be sent.
//!
//! The host routes `key-hash` edges with [`KeyGroups::subtask`] and splits state with
//! [`key_group`] and [`KeyGroups::range`]; the Rust SDK's harness uses the same functions to
//! test a split and a merge natively.

use core::ops::Range;

/// The job's `max_parallelism` when the job file does not set one: the number of key groups,
/// and so the largest parallelism a keyed operator can ever be rescaled to.
pub const DEFAULT_MAX_PARALLELISM: u32 = 128;

/// The largest `max_parallelism` a job may set (Flink's bound, 2^15): key groups are cheap,
/// but each costs a slot in every `key-hash` edge's routing table.
pub const MAX_MAX_PARALLELISM: u32 = 1 << 15;

/// A key's 64-bit hash: FNV-1a, stable across builds, platforms and languages (the empty key
/// hashes to the offset basis, `0xcbf29ce484222325`).
pub fn key_hash(key: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The key group of `key` among `max_parallelism` groups.
///
/// # Panics
/// If `max_parallelism` is 0.
pub fn key_group(key: &[u8], max_parallelism: u32) -> u32 {
    (key_hash(key) % u64::from(max_parallelism)) as u32
}

/// The key groups of one operator: how many there are and how they are dealt to its subtasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyGroups {
    max_parallelism: u32,
    parallelism: u32,
}

impl KeyGroups {
    /// `max_parallelism` groups over `parallelism` subtasks; `None` unless
    /// `1 <= parallelism <= max_parallelism`.
    pub fn new(max_parallelism: u32, parallelism: u32) -> Option<Self> {
        (parallelism >= 1 && parallelism <= max_parallelism).then_some(KeyGroups {
            max_parallelism,
            parallelism,
        })
    }

    /// How many key groups there are.
    pub fn max_parallelism(&self) -> u32 {
        self.max_parallelism
    }

    /// How many subtasks share them.
    pub fn parallelism(&self) -> u32 {
        self.parallelism
    }

    /// The subtask that owns key group `group` (below [`max_parallelism`](Self::max_parallelism)).
    pub fn owner(&self, group: u32) -> u32 {
        (u64::from(group) * u64::from(self.parallelism) / u64::from(self.max_parallelism)) as u32
    }

    /// The subtask that `key` is sent to.
    pub fn subtask(&self, key: &[u8]) -> u32 {
        self.owner(key_group(key, self.max_parallelism))
    }

    /// The key groups subtask `subtask` owns: a contiguous range, never empty, the ranges of
    /// all subtasks covering `0..max_parallelism` in order.
    pub fn range(&self, subtask: u32) -> Range<u32> {
        let (m, p) = (u64::from(self.max_parallelism), u64::from(self.parallelism));
        let start = |i: u64| (i * m).div_ceil(p) as u32;
        start(u64::from(subtask))..start(u64::from(subtask) + 1)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_hash_is_fnv1a() {
        assert_eq!(key_hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(key_hash(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn ranges_are_contiguous_cover_every_group_and_match_the_owner() {
        for max in [1, 2, 3, 7, 128, 1000] {
            for p in 1..=max.min(40) {
                let groups = KeyGroups::new(max, p).unwrap();
                let mut next = 0;
                for subtask in 0..p {
                    let range = groups.range(subtask);
                    assert_eq!(range.start, next, "max {max} p {p} subtask {subtask}");
                    assert!(!range.is_empty(), "max {max} p {p} subtask {subtask}");
                    for group in range.clone() {
                        assert_eq!(groups.owner(group), subtask);
                    }
                    next = range.end;
                }
                assert_eq!(next, max);
            }
        }
    }

    #[test]
    fn a_parallelism_outside_one_to_max_has_no_key_groups() {
        assert!(KeyGroups::new(128, 0).is_none());
        assert!(KeyGroups::new(128, 129).is_none());
        assert!(KeyGroups::new(128, 128).is_some());
    }

    #[test]
    fn max_parallelism_equal_to_parallelism_routes_by_hash_modulo_parallelism() {
        // The routing of builds before key groups: a checkpoint they wrote restores with
        // `max_parallelism` set to the parallelism it was taken at.
        let groups = KeyGroups::new(3, 3).unwrap();
        for key in [&b""[..], b"a", b"the", b"river", b"\xff\x00"] {
            assert_eq!(u64::from(groups.subtask(key)), key_hash(key) % 3);
        }
    }

    proptest! {
        #[test]
        fn a_key_stays_in_its_group_at_every_parallelism(
            key in proptest::collection::vec(any::<u8>(), 0..20),
            max in 1u32..300,
            p in 1u32..300,
        ) {
            let p = p.min(max);
            let groups = KeyGroups::new(max, p).unwrap();
            let group = key_group(&key, max);
            prop_assert!(groups.range(groups.subtask(&key)).contains(&group));
        }
    }
}
