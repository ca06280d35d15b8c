//! The batch layout of docs/ABI.md §5, which batches keep inside the component world too: a
//! header (`record_count` u32, `port` u32), then per record `timestamp` i64, `key_len` u32,
//! `value_len` u32, the key and the value; little-endian, no padding.
//!
//! Written here rather than taken from the project's crates so that this folder builds on its
//! own, with `wit-bindgen` as its only dependency.

use crate::reader::Reader;

/// The header's size: `record_count` and `port`.
const HEADER_LEN: usize = 8;
/// A record's fixed part: `timestamp`, `key_len` and `value_len`.
const RECORD_HEADER_LEN: usize = 16;

/// One record of a decoded batch, borrowing its key and value from the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record<'a> {
    /// Milliseconds; the operator passes it through.
    pub(crate) timestamp: i64,
    /// Arbitrary bytes, possibly empty.
    pub(crate) key: &'a [u8],
    /// Arbitrary bytes, possibly empty.
    pub(crate) value: &'a [u8],
}

/// Decodes a whole batch into its records, in order. The port is read and dropped: the
/// operator treats every input alike.
///
/// Fails, naming the problem, if the batch is shorter than its header or its records say, or
/// has bytes left over after the last record.
pub(crate) fn decode(batch: &[u8]) -> Result<Vec<Record<'_>>, String> {
    let mut reader = Reader::new(batch, "batch");
    let count = reader.u32("record_count")?;
    reader.u32("port")?;
    let count = reader.check_count(count, "record_count", RECORD_HEADER_LEN)?;
    let mut records = Vec::with_capacity(count);
    for _ in 0..count {
        let timestamp = reader.i64("timestamp")?;
        let key_len = reader.len("key_len")?;
        let value_len = reader.len("value_len")?;
        let key = reader.bytes(key_len, "key")?;
        let value = reader.bytes(value_len, "value")?;
        records.push(Record {
            timestamp,
            key,
            value,
        });
    }
    reader.finish()?;
    Ok(records)
}

/// Builds an output batch (port 0) record by record.
pub(crate) struct BatchWriter {
    /// The batch so far, its `record_count` kept up to date.
    bytes: Vec<u8>,
    /// How many records it holds.
    count: u32,
}

impl BatchWriter {
    /// An empty batch with room for `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let mut bytes = Vec::with_capacity(capacity.max(HEADER_LEN));
        bytes.extend_from_slice(&[0; HEADER_LEN]);
        BatchWriter { bytes, count: 0 }
    }

    /// Appends a record.
    ///
    /// # Panics
    ///
    /// If the key or value is 4 GiB or longer, or the batch reaches `u32::MAX` records: neither
    /// fits the layout, and neither fits a 32-bit guest's memory next to its input.
    pub(crate) fn push(&mut self, key: &[u8], value: &[u8], timestamp: i64) {
        let key_len = u32::try_from(key.len()).expect("a key fits in u32");
        let value_len = u32::try_from(value.len()).expect("a value fits in u32");
        self.bytes.extend_from_slice(&timestamp.to_le_bytes());
        self.bytes.extend_from_slice(&key_len.to_le_bytes());
        self.bytes.extend_from_slice(&value_len.to_le_bytes());
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
        self.count = self.count.checked_add(1).expect("record_count fits in u32");
        self.bytes[..4].copy_from_slice(&self.count.to_le_bytes());
    }

    /// The encoded batch.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of docs/ABI.md §5: key "a", value "xy", timestamp 5, port 1.
    const ABI_EXAMPLE: [u8; 27] = [
        1, 0, 0, 0, 1, 0, 0, 0, // count 1, port 1
        5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, // timestamp 5, key_len 1, value_len 2
        b'a', b'x', b'y',
    ];

    #[test]
    fn decodes_the_example_of_the_abi() {
        let records = decode(&ABI_EXAMPLE).unwrap();
        assert_eq!(
            records,
            [Record {
                timestamp: 5,
                key: b"a",
                value: b"xy"
            }]
        );
    }

    #[test]
    fn encodes_the_example_of_the_abi_but_on_port_0() {
        let mut writer = BatchWriter::with_capacity(0);
        writer.push(b"a", b"xy", 5);
        let mut expected = ABI_EXAMPLE;
        expected[4] = 0;
        assert_eq!(writer.into_bytes(), expected);
    }

    #[test]
    fn round_trips_records_in_order() {
        let mut writer = BatchWriter::with_capacity(64);
        writer.push(b"", b"", i64::MIN);
        writer.push(&[0, 255, 10], b"v", -1);
        writer.push(b"k", &[7; 300], i64::MAX);
        let bytes = writer.into_bytes();
        let records = decode(&bytes).unwrap();
        let seen: Vec<(i64, &[u8], &[u8])> = records
            .iter()
            .map(|r| (r.timestamp, r.key, r.value))
            .collect();
        assert_eq!(
            seen,
            [
                (i64::MIN, &b""[..], &b""[..]),
                (-1, &[0, 255, 10][..], &b"v"[..]),
                (i64::MAX, &b"k"[..], &[7; 300][..]),
            ]
        );
    }

    #[test]
    fn an_empty_batch_has_no_records() {
        let bytes = BatchWriter::with_capacity(0).into_bytes();
        assert_eq!(bytes, [0; 8]);
        assert!(decode(&bytes).unwrap().is_empty());
        assert!(decode(&[0, 0, 0, 0, 3, 0, 0, 0]).unwrap().is_empty());
    }

    #[test]
    fn refuses_every_truncation() {
        for len in 0..ABI_EXAMPLE.len() {
            let error = decode(&ABI_EXAMPLE[..len]).unwrap_err();
            assert!(error.starts_with("malformed batch:"), "{len}: {error}");
        }
    }

    #[test]
    fn refuses_bytes_left_over() {
        let mut bytes = ABI_EXAMPLE.to_vec();
        bytes.push(0);
        assert_eq!(
            decode(&bytes).unwrap_err(),
            "malformed batch: 1 bytes left over at its end"
        );
        assert_eq!(
            decode(&[0, 0, 0, 0, 0, 0, 0, 0, 9]).unwrap_err(),
            "malformed batch: 1 bytes left over at its end"
        );
    }

    #[test]
    fn refuses_a_record_count_the_bytes_cannot_hold() {
        let mut bytes = ABI_EXAMPLE;
        bytes[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            decode(&bytes).unwrap_err(),
            "malformed batch: record_count 4294967295 but only 19 bytes follow"
        );
    }

    #[test]
    fn refuses_a_key_longer_than_the_batch() {
        let mut bytes = ABI_EXAMPLE;
        bytes[16] = 200;
        assert_eq!(
            decode(&bytes).unwrap_err(),
            "malformed batch: truncated key (200 bytes needed, 3 left)"
        );
    }
}
