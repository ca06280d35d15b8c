//! `count`: a keyed running count.
//!
//! For every input record the operator adds one to the count of the record's key and emits a
//! record with
//!
//! - the same key,
//! - as value, the updated count as decimal ASCII digits (no sign, no leading zeros, no
//!   terminator): the first record of a key gives `1`, the tenth `10`,
//! - the same timestamp.
//!
//! The input value is ignored. **This output format is a cross-language contract**: the `count`
//! operators written in WAT, C and AssemblyScript produce exactly the same records for the same
//! input, and the tests of the project compare them.
//!
//! State: the count of every key seen, checkpointed through serde as a map from key to count.
//!
//! It is written for speed, since it is the workload of the benchmarks: the counts live in a
//! hash table made for wasm ([`counts`]), and the count is formatted without `core::fmt`. A
//! `BTreeMap<Vec<u8>, u64>` compares the key with a dozen others on each lookup, and in wasm
//! every comparison is a byte-at-a-time `memcmp`: it made this operator several times slower
//! (docs/BENCHMARKS.md).

pub mod counts;

use serde::{Deserialize, Serialize};
use weir_sdk::{Batch, Context, Operator, Output, Result};

use crate::counts::Counts;

/// The `count` operator.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Count {
    /// How many records of each key have been seen.
    counts: Counts,
}

/// Writes `n` in decimal at the end of `buf` and returns the digits.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[start..];
        }
    }
}

impl Operator for Count {
    fn init(_ctx: &Context) -> Result<Self> {
        Ok(Count::default())
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        let mut digits = [0u8; 20];
        for record in input {
            let count = self.counts.increment(record.key);
            out.emit(record.key, decimal(count, &mut digits), record.timestamp);
        }
        Ok(())
    }
}

weir_sdk::export!(Count);

#[cfg(test)]
mod tests {
    use weir_sdk::testing::{
        Harness, OwnedRecord, assert_records_eq, assert_rescale_preserves_output,
        assert_restore_preserves_output, record,
    };

    use super::*;

    #[test]
    fn emits_the_updated_count_of_each_key_as_decimal_text() -> Result<()> {
        let mut harness = Harness::<Count>::new(Context::new("count"))?;
        let out = harness.push_on(
            0,
            &[
                record("a", "x", 1),
                record("b", "y", 2),
                record("a", "z", 3),
                record("", "", 4),
            ],
        )?;
        assert_records_eq(
            &out,
            &[
                record("a", "1", 1),
                record("b", "1", 2),
                record("a", "2", 3),
                record("", "1", 4),
            ],
        );
        Ok(())
    }

    #[test]
    fn counts_past_one_digit() -> Result<()> {
        let mut harness = Harness::<Count>::new(Context::new("count"))?;
        let mut last = Vec::new();
        for ts in 0..12 {
            last = harness.push("k", "", ts)?;
        }
        assert_records_eq(&last, &[record("k", "12", 11)]);
        Ok(())
    }

    #[test]
    fn counts_survive_a_restore() -> Result<()> {
        let mut harness = Harness::<Count>::new(Context::new("count"))?;
        harness.push("a", "", 1)?;
        harness.push("a", "", 2)?;
        harness.snapshot_and_restore()?;
        assert_records_eq(&harness.push("a", "", 3)?, &[record("a", "3", 3)]);
        Ok(())
    }

    #[test]
    fn formats_counts_in_decimal() {
        let mut buf = [0u8; 20];
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::MAX] {
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes());
        }
    }

    #[test]
    fn a_snapshot_restores_every_key_whatever_the_order_they_came_in() -> Result<()> {
        let mut harness = Harness::<Count>::new(Context::new("count"))?;
        for ts in 0..300 {
            harness.push(format!("key-{}", ts % 150), "", ts)?;
        }
        harness.snapshot_and_restore()?;
        for i in 0..150 {
            assert_eq!(
                harness.operator().counts.get(format!("key-{i}").as_bytes()),
                2
            );
        }
        assert_eq!(harness.operator().counts.len(), 150);
        Ok(())
    }

    #[test]
    fn restoring_at_any_point_preserves_the_output() {
        let keys = ["a", "b", "a", "c", "a", "b", "\u{0}", "a"];
        let input: Vec<OwnedRecord> = keys
            .iter()
            .zip(0..)
            .map(|(key, ts)| record(key, "v", ts))
            .collect();
        for every in 1..=3 {
            assert_restore_preserves_output::<Count>(&Context::new("count"), &input, every);
        }
    }

    #[test]
    fn rescaling_halfway_carries_every_count_on() {
        // Short keys (inline in the table) and long ones (on the heap).
        let input: Vec<OwnedRecord> = (0..600)
            .map(|i: i64| {
                let key = if i % 5 == 0 {
                    format!("a-long-key-of-more-than-24-bytes-{}", i % 7)
                } else {
                    format!("k{}", (i * 7) % 53)
                };
                record(key, "", i)
            })
            .collect();
        for (from, to) in [(2, 1), (2, 3), (2, 4), (4, 3), (1, 2)] {
            assert_rescale_preserves_output::<Count>(&Context::new("count"), &input, from, to);
        }
    }
}
