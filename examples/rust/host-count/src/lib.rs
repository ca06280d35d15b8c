//! `host-count`: the keyed running count of `examples/rust/count`, its counts kept on the host
//! (`weir_sdk::host_state`, docs/STATE.md) instead of in the operator's memory.
//!
//! Its output is the count's, record for record: the key, the key's updated count as decimal
//! ASCII digits, the timestamp. What differs is where the counts live: in a store beside the
//! task, so they are not capped by the guest's memory, each checkpoint stores only what changed
//! since the last, and a rescale moves them with their keys, with no snapshot code here.
//!
//! Each batch costs two calls to the host: one reads the counts of its distinct keys, one
//! writes them back.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use weir_sdk::host_state::ValueState;
use weir_sdk::{Batch, Context, KeyHasher, Operator, Output, Result};

/// The count of each key, kept on the host under state number 0.
const COUNTS: ValueState<u64> = ValueState::new(0);

/// The `host-count` operator: it keeps nothing in its own memory.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct HostCount;

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

impl Operator for HostCount {
    fn init(_ctx: &Context) -> Result<Self> {
        Ok(HostCount)
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        // The batch's distinct keys, in the order they first appear (Fx: cheap in wasm).
        let mut slot: HashMap<&[u8], usize, KeyHasher> =
            HashMap::with_capacity_and_hasher(input.len(), KeyHasher::default());
        let mut keys: Vec<&[u8]> = Vec::new();
        for record in input {
            slot.entry(record.key).or_insert_with(|| {
                keys.push(record.key);
                keys.len() - 1
            });
        }
        let mut counts: Vec<u64> = COUNTS
            .get_many(out, &keys)?
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect();
        let mut digits = [0u8; 20];
        for record in input {
            let count = &mut counts[slot[record.key]];
            *count += 1;
            out.emit(record.key, decimal(*count, &mut digits), record.timestamp);
        }
        COUNTS.put_many(out, keys.iter().zip(&counts).map(|(k, c)| (*k, Some(c))))
    }
}

weir_sdk::export!(HostCount);

#[cfg(test)]
mod tests {
    use weir_example_count::Count;
    use weir_sdk::testing::{
        Harness, OwnedRecord, assert_records_eq, assert_rescale_preserves_output,
        assert_restore_preserves_output, record,
    };

    use super::*;

    /// 400 records over 37 keys, the empty key among them.
    fn input() -> Vec<OwnedRecord> {
        (0..400)
            .map(|i| match i % 37 {
                0 => record("", "v", i),
                k => record(format!("k{k}"), "v", i),
            })
            .collect()
    }

    #[test]
    fn its_output_is_the_count_examples_record_for_record() -> Result<()> {
        let mut host = Harness::<HostCount>::new(Context::new("host-count"))?;
        let mut count = Harness::<Count>::new(Context::new("count"))?;
        // Batches of 1 to 13 records: a key seen twice in one batch, and across batches.
        let input = input();
        let mut rest = input.as_slice();
        for size in (1..=13).cycle() {
            if rest.is_empty() {
                break;
            }
            let (batch, after) = rest.split_at(size.min(rest.len()));
            assert_records_eq(&host.push_on(0, batch)?, &count.push_on(0, batch)?);
            rest = after;
        }
        Ok(())
    }

    #[test]
    fn a_restore_carries_the_counts_kept_on_the_host() {
        assert_restore_preserves_output::<HostCount>(&Context::new("host-count"), &input(), 7);
    }

    #[test]
    fn a_rescale_moves_the_counts_with_their_keys() {
        let context = Context::new("host-count");
        assert_rescale_preserves_output::<HostCount>(&context, &input(), 2, 3);
        assert_rescale_preserves_output::<HostCount>(&context, &input(), 3, 1);
    }
}
