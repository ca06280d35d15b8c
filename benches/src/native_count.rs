//! [`NativeCount`]: the `count` operator's loop without the SDK's native harness around it.
//!
//! The honest native baseline for the guest-call benchmark. The real operator
//! (`weir_example_count::Count`) can only be driven natively through
//! `weir_sdk::testing::Harness` — the SDK gives no public way to make an `Output` — and the
//! harness decodes every output batch into owned records (two allocations per record), work
//! the host never does. This is the same loop as `Count::process` — decode the batch, look the
//! key up in a `BTreeMap<Vec<u8>, u64>`, format the count, encode the output record — with the
//! output batch reused and copied out once per call, as the wasm build's `Output` and the host's
//! `emit` do. The benchmark runs both, so the harness's extra cost is visible too.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use weir_abi::{Batch, BatchBuilder, DecodeError};

/// A keyed running count, natively.
#[derive(Debug)]
pub struct NativeCount {
    /// How many records of each key have been seen.
    counts: BTreeMap<Vec<u8>, u64>,
    /// The output batch, reused from call to call.
    out: BatchBuilder,
    /// The decimal text of a count, reused.
    text: String,
}

impl Default for NativeCount {
    fn default() -> Self {
        NativeCount {
            counts: BTreeMap::new(),
            out: BatchBuilder::new(0),
            text: String::new(),
        }
    }
}

impl NativeCount {
    /// Processes one encoded batch and returns the output batches (one, or none for an empty
    /// input), copied out as the host's `emit` copies them.
    pub fn process(&mut self, batch: &[u8]) -> Result<Vec<Vec<u8>>, DecodeError> {
        let batch = Batch::decode(batch)?;
        for record in &batch {
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
            self.text.clear();
            // Writing to a String cannot fail.
            let _ = write!(self.text, "{count}");
            self.out
                .push(record.key, self.text.as_bytes(), record.timestamp);
        }
        if self.out.is_empty() {
            return Ok(Vec::new());
        }
        let output = vec![self.out.as_bytes().to_vec()];
        self.out.clear();
        Ok(output)
    }

    /// How many distinct keys it has counted.
    pub fn keys(&self) -> usize {
        self.counts.len()
    }
}
