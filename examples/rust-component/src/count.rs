//! The keyed running count, free of the bindings so that `cargo test` runs it natively.
//!
//! For each input record the count of its key goes up by one, and the operator emits a record
//! with the same key, the updated count as decimal ASCII digits (no sign, no leading zeros) and
//! the same timestamp; the value is ignored. These are the records of the project's other
//! `count` operators (`examples/rust/count` and its WAT, C, Zig and `AssemblyScript` twins), byte
//! for byte.
//!
//! The state is the counts, snapshotted in this format (little-endian, no padding):
//!
//! ```text
//! key_count  u32
//! key_count entries, in ascending key order, each:
//!     key_len  u32
//!     key      key_len bytes
//!     count    u64
//! ```
//!
//! The order makes the snapshot of a state always the same bytes.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::BuildHasherDefault;

use crate::batch::{self, BatchWriter};
use crate::reader::Reader;

/// The longest decimal `u64`: 18446744073709551615.
const MAX_DIGITS: usize = 20;
/// A snapshot entry's fixed part: `key_len` and `count`.
const ENTRY_HEADER_LEN: usize = 12;

/// `SipHash` with fixed keys. std's default, `RandomState`, asks the system for a random seed,
/// which in a component is an import of WASI's random interface; the keys of a stream are not
/// chosen by an attacker of this example, so a fixed seed does.
type FixedState = BuildHasherDefault<DefaultHasher>;

/// How many records of each key have been seen.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// The count of every key seen, at least 1.
    counts: HashMap<Vec<u8>, u64, FixedState>,
}

impl Counts {
    /// Counts the records of `input`, a batch, and returns the output batch: one record per
    /// input record, in order; `None` for a batch without records.
    ///
    /// A malformed batch fails before any count changes.
    pub(crate) fn process(&mut self, input: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let records = batch::decode(input)?;
        if records.is_empty() {
            return Ok(None);
        }
        // An output record is its input record less the value, plus at most MAX_DIGITS digits.
        let mut out = BatchWriter::with_capacity(input.len() + records.len() * MAX_DIGITS);
        let mut digits = [0; MAX_DIGITS];
        for record in &records {
            let count = self.increment(record.key);
            out.push(record.key, decimal(count, &mut digits), record.timestamp);
        }
        Ok(Some(out.into_bytes()))
    }

    /// Adds one to the count of `key` and returns the new count.
    fn increment(&mut self, key: &[u8]) -> u64 {
        // Looked up by slice first, so that only a new key is copied.
        if let Some(count) = self.counts.get_mut(key) {
            *count += 1;
            *count
        } else {
            self.counts.insert(key.to_vec(), 1);
            1
        }
    }

    /// The state, in the format of the module doc.
    pub(crate) fn snapshot(&self) -> Vec<u8> {
        let mut entries: Vec<(&Vec<u8>, &u64)> = self.counts.iter().collect();
        entries.sort_unstable();
        let len = 4 + entries
            .iter()
            .map(|(key, _)| ENTRY_HEADER_LEN + key.len())
            .sum::<usize>();
        let mut state = Vec::with_capacity(len);
        let key_count = u32::try_from(entries.len()).expect("fewer than 2^32 keys fit in memory");
        state.extend_from_slice(&key_count.to_le_bytes());
        for (key, count) in entries {
            let key_len = u32::try_from(key.len()).expect("a key came in a batch, in u32");
            state.extend_from_slice(&key_len.to_le_bytes());
            state.extend_from_slice(key);
            state.extend_from_slice(&count.to_le_bytes());
        }
        state
    }

    /// The counts an earlier [`snapshot`](Counts::snapshot) returned; empty bytes are no
    /// counts (nothing was snapshotted).
    ///
    /// Fails, naming the problem, on truncated bytes, bytes left over, or a key that appears
    /// twice.
    pub(crate) fn restore(state: &[u8]) -> Result<Counts, String> {
        if state.is_empty() {
            return Ok(Counts::default());
        }
        let mut reader = Reader::new(state, "state");
        let key_count = reader.u32("key_count")?;
        let key_count = reader.check_count(key_count, "key_count", ENTRY_HEADER_LEN)?;
        let mut counts = HashMap::with_capacity_and_hasher(key_count, FixedState::default());
        for _ in 0..key_count {
            let key_len = reader.len("key_len")?;
            let key = reader.bytes(key_len, "key")?;
            let count = reader.u64("count")?;
            if counts.insert(key.to_vec(), count).is_some() {
                return Err(reader.error(format_args!(
                    "the key \"{}\" appears twice",
                    key.escape_ascii()
                )));
            }
        }
        reader.finish()?;
        Ok(Counts { counts })
    }
}

/// Writes `n` in decimal at the end of `buf` and returns the digits.
fn decimal(mut n: u64, buf: &mut [u8; MAX_DIGITS]) -> &[u8] {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::Record;

    /// A batch of `(key, value, timestamp)` records, on `port`.
    fn batch_of(port: u32, records: &[(&[u8], &[u8], i64)]) -> Vec<u8> {
        let mut writer = BatchWriter::with_capacity(0);
        for &(key, value, timestamp) in records {
            writer.push(key, value, timestamp);
        }
        let mut bytes = writer.into_bytes();
        bytes[4..8].copy_from_slice(&port.to_le_bytes());
        bytes
    }

    /// The `(key, value, timestamp)` records of an output batch, after checking its port is 0.
    fn records_of(batch: &[u8]) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
        assert_eq!(batch[4..8], [0; 4], "output batches are on port 0");
        batch::decode(batch)
            .unwrap()
            .iter()
            .map(
                |&Record {
                     timestamp,
                     key,
                     value,
                 }| (key.to_vec(), value.to_vec(), timestamp),
            )
            .collect()
    }

    /// Owned `(key, value, timestamp)` records, for comparing with [`records_of`].
    fn owned(records: &[(&[u8], &[u8], i64)]) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
        records
            .iter()
            .map(|&(key, value, timestamp)| (key.to_vec(), value.to_vec(), timestamp))
            .collect()
    }

    #[test]
    fn emits_the_updated_count_of_each_key_as_decimal_text() {
        let mut counts = Counts::default();
        let input = batch_of(
            3,
            &[
                (b"a", b"x", 1),
                (b"b", b"y", 2),
                (b"a", b"z", 3),
                (b"", b"", 4),
                (&[0, 255], b"", -5),
            ],
        );
        let out = counts.process(&input).unwrap().unwrap();
        assert_eq!(
            records_of(&out),
            owned(&[
                (b"a", b"1", 1),
                (b"b", b"1", 2),
                (b"a", b"2", 3),
                (b"", b"1", 4),
                (&[0, 255], b"1", -5),
            ])
        );
    }

    #[test]
    fn writes_exactly_the_bytes_of_the_other_count_operators() {
        // Key "a" with value "xy" at timestamp 5, seen for the first time: key "a", value "1".
        let input = batch_of(1, &[(b"a", b"xy", 5)]);
        let out = Counts::default().process(&input).unwrap().unwrap();
        assert_eq!(
            out,
            [
                1, 0, 0, 0, 0, 0, 0, 0, // count 1, port 0
                5, 0, 0, 0, 0, 0, 0, 0, // timestamp 5
                1, 0, 0, 0, 1, 0, 0, 0, // key_len 1, value_len 1
                b'a', b'1',
            ]
        );
    }

    #[test]
    fn counts_across_batches_past_one_digit() {
        let mut counts = Counts::default();
        let mut last = None;
        for timestamp in 0..12 {
            last = counts
                .process(&batch_of(0, &[(b"k", b"", timestamp)]))
                .unwrap();
        }
        assert_eq!(records_of(&last.unwrap()), owned(&[(b"k", b"12", 11)]));
    }

    #[test]
    fn emits_nothing_for_an_empty_batch() {
        let mut counts = Counts::default();
        assert_eq!(counts.process(&batch_of(0, &[])), Ok(None));
        assert_eq!(counts, Counts::default());
    }

    #[test]
    fn a_malformed_batch_fails_and_counts_nothing() {
        let mut counts = Counts::default();
        let mut input = batch_of(0, &[(b"a", b"", 1), (b"b", b"", 2)]);
        input.pop();
        let error = counts.process(&input).unwrap_err();
        assert_eq!(
            error,
            "malformed batch: truncated key (1 bytes needed, 0 left)"
        );
        assert_eq!(counts, Counts::default());
    }

    #[test]
    fn formats_counts_in_decimal() {
        let mut buf = [0; MAX_DIGITS];
        for n in [0, 1, 9, 10, 99, 100, 12_345, u64::MAX] {
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes());
        }
    }

    #[test]
    fn snapshots_in_the_documented_format() {
        let mut counts = Counts::default();
        counts
            .process(&batch_of(
                0,
                &[(b"bb", b"", 0), (b"a", b"", 0), (b"bb", b"", 0)],
            ))
            .unwrap();
        assert_eq!(
            counts.snapshot(),
            [
                2, 0, 0, 0, // two keys, in ascending order
                1, 0, 0, 0, b'a', 1, 0, 0, 0, 0, 0, 0, 0, // "a": 1
                2, 0, 0, 0, b'b', b'b', 2, 0, 0, 0, 0, 0, 0, 0, // "bb": 2
            ]
        );
        assert_eq!(Counts::default().snapshot(), [0, 0, 0, 0]);
    }

    #[test]
    fn snapshots_keys_in_ascending_order_whatever_order_they_came_in() {
        let mut counts = Counts::default();
        for i in (0..200).rev() {
            let key = format!("{i:03}");
            counts
                .process(&batch_of(0, &[(key.as_bytes(), b"", i)]))
                .unwrap();
        }
        let state = counts.snapshot();
        let mut reader = Reader::new(&state, "state");
        assert_eq!(reader.u32("key_count"), Ok(200));
        for i in 0..200 {
            let key_len = reader.len("key_len").unwrap();
            assert_eq!(
                reader.bytes(key_len, "key").unwrap(),
                format!("{i:03}").as_bytes()
            );
            assert_eq!(reader.u64("count"), Ok(1));
        }
        assert_eq!(reader.finish(), Ok(()));
    }

    #[test]
    fn counts_survive_a_snapshot_and_restore() {
        let mut counts = Counts::default();
        for timestamp in 0..300 {
            let key = format!("key-{}", timestamp % 150);
            counts
                .process(&batch_of(0, &[(key.as_bytes(), b"", timestamp)]))
                .unwrap();
        }
        counts
            .process(&batch_of(0, &[(&[0, 1, 2], b"", 0)]))
            .unwrap();
        let mut restored = Counts::restore(&counts.snapshot()).unwrap();
        assert_eq!(restored, counts);
        let out = restored
            .process(&batch_of(0, &[(b"key-7", b"", 9)]))
            .unwrap();
        assert_eq!(records_of(&out.unwrap()), owned(&[(b"key-7", b"3", 9)]));
    }

    #[test]
    fn restoring_nothing_gives_no_counts() {
        assert_eq!(Counts::restore(&[]), Ok(Counts::default()));
        assert_eq!(Counts::restore(&[0, 0, 0, 0]), Ok(Counts::default()));
    }

    #[test]
    fn refuses_a_malformed_state() {
        let mut counts = Counts::default();
        counts.process(&batch_of(0, &[(b"a", b"", 0)])).unwrap();
        let state = counts.snapshot();
        for len in 1..state.len() {
            let error = Counts::restore(&state[..len]).unwrap_err();
            assert!(error.starts_with("malformed state:"), "{len}: {error}");
        }
        let mut longer = state.clone();
        longer.push(0);
        assert_eq!(
            Counts::restore(&longer),
            Err("malformed state: 1 bytes left over at its end".to_owned())
        );
        let mut twice = state.clone();
        twice[0] = 2;
        twice.extend_from_slice(&state[4..]);
        assert_eq!(
            Counts::restore(&twice),
            Err("malformed state: the key \"a\" appears twice".to_owned())
        );
    }
}
