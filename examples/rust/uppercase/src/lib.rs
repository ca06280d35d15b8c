//! `uppercase`: a stateless filter and map.
//!
//! Records without a value are dropped (the filter); every other record is emitted with the
//! same key and timestamp and its value in ASCII upper case (the map: bytes `a`–`z` become
//! `A`–`Z`, every other byte is kept). It is the stateless workload of the benchmarks
//! (docs/BENCHMARKS.md), and the smallest useful example of an operator without state: its
//! snapshot is zero bytes.

use serde::{Deserialize, Serialize};
use weir_sdk::{Batch, Context, Operator, Output, Result};

/// The `uppercase` operator. Holds no state.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Uppercase {
    /// The upper-cased value being emitted, reused from record to record.
    #[serde(skip)]
    value: Vec<u8>,
}

impl Operator for Uppercase {
    fn init(_ctx: &Context) -> Result<Self> {
        Ok(Uppercase::default())
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        for record in input {
            if record.value.is_empty() {
                continue;
            }
            self.value.clear();
            self.value
                .extend(record.value.iter().map(u8::to_ascii_uppercase));
            out.emit(record.key, &self.value, record.timestamp);
        }
        Ok(())
    }
}

weir_sdk::export!(Uppercase);

#[cfg(test)]
mod tests {
    use weir_sdk::testing::{
        Harness, OwnedRecord, assert_records_eq, assert_restore_preserves_output, record,
    };

    use super::*;

    #[test]
    fn upper_cases_values_and_drops_empty_ones() -> Result<()> {
        let mut harness = Harness::<Uppercase>::new(Context::new("uppercase"))?;
        let out = harness.push_on(
            0,
            &[
                record("k", "hello, World 1!", 1),
                record("k", "", 2),
                record("", "\u{e9}t\u{e9}", 3),
            ],
        )?;
        assert_records_eq(
            &out,
            &[
                record("k", "HELLO, WORLD 1!", 1),
                record("", "\u{e9}T\u{e9}", 3),
            ],
        );
        Ok(())
    }

    #[test]
    fn its_snapshot_is_empty_and_restoring_changes_nothing() -> Result<()> {
        let harness = Harness::<Uppercase>::new(Context::new("uppercase"))?;
        assert!(harness.snapshot()?.is_empty());
        let input: Vec<OwnedRecord> = (0..10).map(|i| record("k", "ab", i)).collect();
        assert_restore_preserves_output::<Uppercase>(&Context::new("uppercase"), &input, 3);
        Ok(())
    }
}
