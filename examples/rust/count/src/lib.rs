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
//! State: the count of every key seen, checkpointed through serde (a `BTreeMap`, so equal
//! states give equal snapshots).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use weir_sdk::{Batch, Context, Operator, Output, Result};

/// The `count` operator.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Count {
    /// How many records of each key have been seen.
    counts: BTreeMap<Vec<u8>, u64>,
}

impl Operator for Count {
    fn init(_ctx: &Context) -> Result<Self> {
        Ok(Count::default())
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        // The decimal text of each count, in one buffer reused for the whole batch.
        let mut text = String::new();
        for record in input {
            // Copy the key only the first time it is seen.
            let count = match self.counts.get_mut(record.key) {
                Some(count) => {
                    *count += 1;
                    *count
                }
                None => {
                    self.counts.insert(record.key.to_vec(), 1);
                    1
                }
            };
            text.clear();
            write!(text, "{count}")?;
            out.emit(record.key, text.as_bytes(), record.timestamp);
        }
        Ok(())
    }
}

weir_sdk::export!(Count);

#[cfg(test)]
mod tests {
    use weir_sdk::testing::{
        Harness, OwnedRecord, assert_records_eq, assert_restore_preserves_output, record,
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
}
