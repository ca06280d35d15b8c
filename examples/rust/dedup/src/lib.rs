//! `dedup`: lets through the first record of every key.
//!
//! A record whose key the operator has seen before is dropped; the first record of each key is
//! emitted unchanged (key, value and timestamp). Records with an empty key count as one key.
//!
//! State: the set of keys seen so far, checkpointed through serde as the SDK's keyed state, so
//! that a rescale moves each key with it. It grows with the number of distinct keys and is
//! never pruned.

use serde::{Deserialize, Serialize};
use weir_sdk::{Batch, Context, Keyed, Operator, Output, Result};

/// The `dedup` operator.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Dedup {
    /// Every key emitted so far.
    seen: Keyed<()>,
}

impl Operator for Dedup {
    fn init(_ctx: &Context) -> Result<Self> {
        Ok(Dedup::default())
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        for record in input {
            if !self.seen.contains_key(record.key) {
                self.seen.insert(record.key.to_vec(), ());
                out.emit_record(&record);
            }
        }
        Ok(())
    }
}

weir_sdk::export!(Dedup);

#[cfg(test)]
mod tests {
    use weir_sdk::testing::{
        Harness, OwnedRecord, assert_records_eq, assert_rescale_preserves_output,
        assert_restore_preserves_output, record,
    };

    use super::*;

    #[test]
    fn emits_only_the_first_record_of_each_key_unchanged() -> Result<()> {
        let mut harness = Harness::<Dedup>::new(Context::new("dedup"))?;
        let out = harness.push_on(
            0,
            &[
                record("a", "first", 1),
                record("b", "first", 2),
                record("a", "second", 3),
                record("", "empty key", 4),
                record("", "empty again", 5),
            ],
        )?;
        assert_records_eq(
            &out,
            &[
                record("a", "first", 1),
                record("b", "first", 2),
                record("", "empty key", 4),
            ],
        );
        assert!(harness.push("b", "later batch", 6)?.is_empty());
        Ok(())
    }

    #[test]
    fn remembers_keys_across_a_restore() -> Result<()> {
        let mut harness = Harness::<Dedup>::new(Context::new("dedup"))?;
        harness.push("a", "1", 1)?;
        harness.snapshot_and_restore()?;
        assert!(harness.push("a", "2", 2)?.is_empty());
        assert_records_eq(&harness.push("b", "3", 3)?, &[record("b", "3", 3)]);
        Ok(())
    }

    #[test]
    fn restoring_at_any_point_preserves_the_output() {
        let keys = ["a", "b", "a", "c", "b", "d", "a", "e"];
        let input: Vec<OwnedRecord> = keys
            .iter()
            .zip(0..)
            .map(|(key, ts)| record(key, format!("v{ts}"), ts))
            .collect();
        for every in 1..=3 {
            assert_restore_preserves_output::<Dedup>(&Context::new("dedup"), &input, every);
        }
    }

    #[test]
    fn rescaling_halfway_lets_through_the_first_record_of_each_key_once() {
        let input: Vec<OwnedRecord> = (0..300)
            .map(|i: i64| record(format!("k{}", (i * 13) % 41), format!("v{i}"), i))
            .collect();
        for (from, to) in [(2, 1), (2, 3), (2, 4), (3, 2)] {
            assert_rescale_preserves_output::<Dedup>(&Context::new("dedup"), &input, from, to);
        }
    }
}
