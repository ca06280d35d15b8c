//! The batch encoding: how records cross the wasm boundary (and Weir's channels).
//!
//! Layout, all integers little-endian, no padding (`docs/ABI.md` §Batches):
//!
//! ```text
//! offset  size  field
//! 0       4     record_count: u32
//! 4       4     port: u32           input port of the batch; 0 in output batches
//! 8       ...   record_count records, each:
//!                 8   timestamp: i64  (milliseconds)
//!                 4   key_len: u32
//!                 4   value_len: u32
//!                 key_len bytes of key, then value_len bytes of value
//! ```
//!
//! A batch is exactly that long: trailing bytes are an error.

use core::fmt;

use crate::wire::{Reader, Short};

/// Bytes before the first record.
pub const HEADER_LEN: usize = 8;
/// Fixed bytes of each record before its key and value.
pub const RECORD_HEADER_LEN: usize = 16;

/// The number of bytes one record takes in a batch.
pub fn encoded_record_len(key_len: usize, value_len: usize) -> usize {
    RECORD_HEADER_LEN + key_len + value_len
}

/// One record, borrowing its key and value from the batch it was decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Record<'a> {
    /// The key; empty when the record has none.
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// Event time in milliseconds.
    pub timestamp: i64,
}

/// Why a byte string is not a valid batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer than [`HEADER_LEN`] bytes.
    MissingHeader {
        /// How many bytes there were.
        len: usize,
    },
    /// Record `index` runs past the end of the batch.
    Truncated {
        /// Zero-based index of the record that does not fit.
        index: u32,
        /// Byte offset at which the missing field starts.
        offset: usize,
        /// Bytes that field needed.
        needed: usize,
        /// Total length of the batch.
        len: usize,
    },
    /// Bytes are left over after the last record the header announced.
    TrailingBytes {
        /// The record count from the header.
        records: u32,
        /// How many bytes follow the last record.
        extra: usize,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DecodeError::MissingHeader { len } => write!(
                f,
                "batch is {len} bytes, shorter than its {HEADER_LEN}-byte header (record count, port)"
            ),
            DecodeError::Truncated {
                index,
                offset,
                needed,
                len,
            } => write!(
                f,
                "record {index} needs {needed} bytes at offset {offset} but the batch ends at {len}"
            ),
            DecodeError::TrailingBytes { records, extra } => write!(
                f,
                "{extra} bytes follow the last of the {records} records the header announces"
            ),
        }
    }
}

impl std::error::Error for DecodeError {}

/// A validated, borrowed batch: every record in it is known to be well formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch<'a> {
    records: &'a [u8],
    count: u32,
    port: u32,
}

/// The record count a batch's header announces, without checking the records: for code that
/// only counts batches another layer has already validated. [`Batch::decode`] checks them.
pub fn header_record_count(bytes: &[u8]) -> Result<u32, DecodeError> {
    match bytes.get(..4) {
        Some(&[a, b, c, d]) if bytes.len() >= HEADER_LEN => Ok(u32::from_le_bytes([a, b, c, d])),
        _ => Err(DecodeError::MissingHeader { len: bytes.len() }),
    }
}

/// Rewrites the port in the header of the encoded batch `bytes`, leaving its records as they
/// are: how a batch is passed on to another input port without being encoded again.
pub fn set_port(bytes: &mut [u8], port: u32) -> Result<(), DecodeError> {
    match bytes.get_mut(4..HEADER_LEN) {
        Some(field) => {
            field.copy_from_slice(&port.to_le_bytes());
            Ok(())
        }
        None => Err(DecodeError::MissingHeader { len: bytes.len() }),
    }
}

/// Appends the records of the encoded batch `batch` to the encoded batch `buf` and adds their
/// count to `buf`'s header, keeping `buf`'s port: two batches joined into one without decoding
/// either. Both must have been validated (as [`header_record_count`] assumes). Returns `false`,
/// leaving `buf` unchanged, when either is shorter than a header or the joined record count
/// would not fit its `u32`.
pub fn append_records(buf: &mut Vec<u8>, batch: &[u8]) -> bool {
    let (Ok(held), Ok(added)) = (header_record_count(buf), header_record_count(batch)) else {
        return false;
    };
    let Some(count) = held.checked_add(added) else {
        return false;
    };
    buf[..4].copy_from_slice(&count.to_le_bytes());
    buf.extend_from_slice(&batch[HEADER_LEN..]);
    true
}

impl<'a> Batch<'a> {
    /// Checks `bytes` against the layout and returns a view of it.
    ///
    /// The whole batch is validated here, once, so iterating it later cannot fail.
    pub fn decode(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        let Some((&[c0, c1, c2, c3, p0, p1, p2, p3], records)) =
            bytes.split_first_chunk::<HEADER_LEN>()
        else {
            return Err(DecodeError::MissingHeader { len: bytes.len() });
        };
        let count = u32::from_le_bytes([c0, c1, c2, c3]);
        let port = u32::from_le_bytes([p0, p1, p2, p3]);
        // The fast walk only tells whether the batch is good; a bad one is walked again to say
        // exactly where it goes wrong.
        let mut rest = records;
        for _ in 0..count {
            match split_record(rest) {
                Some((_, after)) => rest = after,
                None => return Err(locate_error(bytes, count)),
            }
        }
        if !rest.is_empty() {
            return Err(DecodeError::TrailingBytes {
                records: count,
                extra: rest.len(),
            });
        }
        Ok(Batch {
            records,
            count,
            port,
        })
    }

    /// The input port the batch arrived on (always 0 for output batches).
    pub fn port(&self) -> u32 {
        self.port
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Total encoded size in bytes, header included.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.records.len()
    }

    /// The records, in order.
    pub fn iter(&self) -> Records<'a> {
        Records {
            rest: self.records,
            left: self.count,
        }
    }
}

impl<'a> IntoIterator for Batch<'a> {
    type Item = Record<'a>;
    type IntoIter = Records<'a>;

    fn into_iter(self) -> Records<'a> {
        self.iter()
    }
}

impl<'a> IntoIterator for &Batch<'a> {
    type Item = Record<'a>;
    type IntoIter = Records<'a>;

    fn into_iter(self) -> Records<'a> {
        self.iter()
    }
}

/// Iterator over the records of a [`Batch`].
#[derive(Clone)]
pub struct Records<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    #[inline]
    fn next(&mut self) -> Option<Record<'a>> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        // The batch was validated when it was decoded, so this succeeds; an `Option` keeps the
        // iterator panic-free regardless.
        let (record, rest) = split_record(self.rest)?;
        self.rest = rest;
        Some(record)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

/// Splits the first record off `bytes`: the record and what follows it, or `None` when
/// `bytes` is too short for it. One length check per field, no per-byte work: this runs once
/// per record in every guest and every task.
#[inline]
fn split_record(bytes: &[u8]) -> Option<(Record<'_>, &[u8])> {
    let (
        &[
            t0,
            t1,
            t2,
            t3,
            t4,
            t5,
            t6,
            t7,
            k0,
            k1,
            k2,
            k3,
            v0,
            v1,
            v2,
            v3,
        ],
        rest,
    ) = bytes.split_first_chunk::<RECORD_HEADER_LEN>()?;
    let key_len = u32::from_le_bytes([k0, k1, k2, k3]) as usize;
    let value_len = u32::from_le_bytes([v0, v1, v2, v3]) as usize;
    let (key, rest) = rest.split_at_checked(key_len)?;
    let (value, rest) = rest.split_at_checked(value_len)?;
    let timestamp = i64::from_le_bytes([t0, t1, t2, t3, t4, t5, t6, t7]);
    Some((
        Record {
            key,
            value,
            timestamp,
        },
        rest,
    ))
}

/// The precise error of a batch [`Batch::decode`] found bad: which record, which field, at
/// what offset. Walks the batch field by field, so it is only called for bad batches.
#[cold]
fn locate_error(bytes: &[u8], count: u32) -> DecodeError {
    let mut r = Reader::new(bytes);
    let truncated = |index, s: Short| DecodeError::Truncated {
        index,
        offset: s.offset,
        needed: s.needed,
        len: bytes.len(),
    };
    // The header was read by the caller.
    let _ = r.take(HEADER_LEN);
    for index in 0..count {
        let fields = (|| {
            r.take(8)?;
            let key_len = r.u32()? as usize;
            let value_len = r.u32()? as usize;
            r.take(key_len)?;
            r.take(value_len)?;
            Ok::<(), Short>(())
        })();
        if let Err(short) = fields {
            return truncated(index, short);
        }
    }
    DecodeError::TrailingBytes {
        records: count,
        extra: r.remaining(),
    }
}

impl ExactSizeIterator for Records<'_> {}

/// Encodes records into a batch, growing one reusable buffer.
///
/// The header is kept current after every push, so [`as_bytes`](Self::as_bytes)
/// is a valid batch at any moment.
#[derive(Clone)]
pub struct BatchBuilder {
    /// The batch is `buf[..len]`. Past it, `buf` holds initialised bytes that the next records
    /// overwrite: a push writes its record into a slice of known length, where its fields are
    /// fixed-size stores and its key and value short copies ([`copy_bytes`]), rather than
    /// growing the vector once per field.
    buf: Vec<u8>,
    len: usize,
    count: u32,
}

/// Bytes the room past a batch grows by at least, initialised in one go just before the
/// records that fill them are written, while they are in cache.
const ROOM_STEP: usize = 4096;

impl BatchBuilder {
    /// An empty batch for `port` (use 0 for output batches).
    pub fn new(port: u32) -> Self {
        Self::with_capacity(port, 0)
    }

    /// An empty batch for `port` with room for `bytes` bytes of records.
    pub fn with_capacity(port: u32, bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(HEADER_LEN + bytes);
        buf.extend_from_slice(&0u32.to_le_bytes());
        buf.extend_from_slice(&port.to_le_bytes());
        Self {
            buf,
            len: HEADER_LEN,
            count: 0,
        }
    }

    /// Appends one record.
    ///
    /// # Panics
    /// If the key or value is longer than `u32::MAX` bytes, or the batch
    /// already holds `u32::MAX` records.
    //
    // Always inlined: called, it would take six wasm parameters, and the guest SDK's
    // `Output::emit` says why that costs in wasm; in the host it is the generator's and the
    // router's per-record step.
    #[inline(always)]
    pub fn push(&mut self, key: &[u8], value: &[u8], timestamp: i64) {
        let key_len = u32::try_from(key.len()).expect("record key longer than u32::MAX bytes");
        let value_len =
            u32::try_from(value.len()).expect("record value longer than u32::MAX bytes");
        self.count = self
            .count
            .checked_add(1)
            .expect("batch holds u32::MAX records");
        let start = self.len;
        let end = start + encoded_record_len(key.len(), value.len());
        if end > self.buf.len() {
            self.make_room(end);
        }
        let (header, data) = self.buf[start..end].split_at_mut(RECORD_HEADER_LEN);
        header[..8].copy_from_slice(&timestamp.to_le_bytes());
        header[8..12].copy_from_slice(&key_len.to_le_bytes());
        header[12..].copy_from_slice(&value_len.to_le_bytes());
        let (key_out, value_out) = data.split_at_mut(key.len());
        copy_bytes(key_out, key);
        copy_bytes(value_out, value);
        self.len = end;
        self.buf[..4].copy_from_slice(&self.count.to_le_bytes());
    }

    /// Initialises room up to at least `end` bytes (and [`ROOM_STEP`] past the batch).
    #[cold]
    fn make_room(&mut self, end: usize) {
        self.buf.resize(end.max(self.len + ROOM_STEP), 0);
    }

    /// Appends a record taken from another batch.
    pub fn push_record(&mut self, record: &Record<'_>) {
        self.push(record.key, record.value, record.timestamp);
    }

    /// Number of records pushed so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no record has been pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Encoded size in bytes, header included.
    pub fn encoded_len(&self) -> usize {
        self.len
    }

    /// The port written in the header.
    pub fn port(&self) -> u32 {
        u32::from_le_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]])
    }

    /// The encoded batch.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Removes every record, keeping the port and the buffer's capacity.
    pub fn clear(&mut self) {
        self.len = HEADER_LEN;
        self.count = 0;
        self.buf[..4].copy_from_slice(&0u32.to_le_bytes());
    }

    /// The encoded batch, by value.
    pub fn into_bytes(mut self) -> Vec<u8> {
        self.buf.truncate(self.len);
        self.buf
    }

    /// Takes the encoded batch out, leaving an empty batch for the same port.
    pub fn take_bytes(&mut self) -> Vec<u8> {
        let port = self.port();
        std::mem::replace(self, BatchBuilder::new(port)).into_bytes()
    }
}

/// Builders are equal when their batches are: the room past them does not count.
impl PartialEq for BatchBuilder {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for BatchBuilder {}

impl fmt::Debug for BatchBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchBuilder")
            .field("port", &self.port())
            .field("records", &self.count)
            .field("bytes", &self.len)
            .finish()
    }
}

/// Copies `src` into `dst`, which has its length.
///
/// Up to 32 bytes, as two fixed-size copies that may overlap (the first and the last 4, 8 or
/// 16 bytes). In wasm a copy of a length not known at compile time is a `memory.copy`, which
/// wasmtime runs as a call out of the guest into the host's `memmove`: for a key or a short
/// value the call costs more than the copy. Fixed-size copies are plain loads and stores.
#[inline(always)]
fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    fn fixed<const N: usize>(dst: &mut [u8], src: &[u8], at: usize) {
        let bytes: [u8; N] = src[at..at + N].try_into().expect("N bytes");
        dst[at..at + N].copy_from_slice(&bytes);
    }
    let n = src.len();
    match n {
        0 => {}
        1..=3 => {
            dst[0] = src[0];
            dst[n / 2] = src[n / 2];
            dst[n - 1] = src[n - 1];
        }
        4..=7 => {
            fixed::<4>(dst, src, 0);
            fixed::<4>(dst, src, n - 4);
        }
        8..=16 => {
            fixed::<8>(dst, src, 0);
            fixed::<8>(dst, src, n - 8);
        }
        17..=32 => {
            fixed::<16>(dst, src, 0);
            fixed::<16>(dst, src, n - 16);
        }
        _ => dst.copy_from_slice(src),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_port_rewrites_only_the_port_and_refuses_a_short_batch() {
        let mut a = BatchBuilder::new(3);
        a.push(b"k", b"v", 7);
        let mut bytes = a.into_bytes();
        set_port(&mut bytes, 9).unwrap();
        let batch = Batch::decode(&bytes).unwrap();
        assert_eq!((batch.port(), batch.len()), (9, 1));
        assert!(set_port(&mut [0u8; 7], 1).is_err());
    }

    #[test]
    fn append_records_joins_two_batches_under_the_first_port() {
        let mut a = BatchBuilder::new(1);
        a.push(b"a", b"1", 1);
        let mut b = BatchBuilder::new(2);
        b.push(b"b", b"2", 2);
        b.push(b"c", b"3", 3);
        let mut joined = a.into_bytes();
        assert!(append_records(&mut joined, b.as_bytes()));
        let batch = Batch::decode(&joined).unwrap();
        assert_eq!(batch.port(), 1);
        let keys: Vec<&[u8]> = batch.iter().map(|r| r.key).collect();
        assert_eq!(keys, [b"a", b"b", b"c"]);

        let mut full = BatchBuilder::new(0).into_bytes();
        full[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let before = full.clone();
        assert!(!append_records(&mut full, b.as_bytes()));
        assert_eq!(full, before);
        assert!(!append_records(&mut joined, &[0u8; 3]));
    }

    #[test]
    fn the_header_count_is_read_without_the_records() {
        let mut b = BatchBuilder::new(5);
        b.push(b"k", b"v", 1);
        b.push(b"k", b"v", 2);
        assert_eq!(header_record_count(b.as_bytes()), Ok(2));
        assert_eq!(header_record_count(&b.as_bytes()[..8]), Ok(2));
        assert_eq!(
            header_record_count(&[1, 0, 0, 0, 0, 0, 0]),
            Err(DecodeError::MissingHeader { len: 7 })
        );
    }
    use proptest::prelude::*;

    fn arb_records() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>, i64)>> {
        prop::collection::vec(
            (
                prop::collection::vec(any::<u8>(), 0..24),
                prop::collection::vec(any::<u8>(), 0..64),
                any::<i64>(),
            ),
            0..40,
        )
    }

    proptest! {
        #[test]
        fn round_trips_arbitrary_batches(port in any::<u32>(), records in arb_records()) {
            let mut builder = BatchBuilder::new(port);
            for (k, v, ts) in &records {
                builder.push(k, v, *ts);
            }
            let batch = Batch::decode(builder.as_bytes()).unwrap();
            prop_assert_eq!(batch.port(), port);
            prop_assert_eq!(batch.len(), records.len());
            prop_assert_eq!(batch.encoded_len(), builder.encoded_len());
            let decoded: Vec<_> = batch
                .iter()
                .map(|r| (r.key.to_vec(), r.value.to_vec(), r.timestamp))
                .collect();
            prop_assert_eq!(decoded, records);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            if let Ok(batch) = Batch::decode(&bytes) {
                prop_assert_eq!(batch.iter().count(), batch.len());
                prop_assert_eq!(batch.encoded_len(), bytes.len());
            }
        }

        #[test]
        fn every_truncation_of_a_valid_batch_is_rejected(records in arb_records(), cut in any::<prop::sample::Index>()) {
            let mut builder = BatchBuilder::new(0);
            for (k, v, ts) in &records {
                builder.push(k, v, *ts);
            }
            let bytes = builder.as_bytes();
            let cut = cut.index(bytes.len());
            prop_assert!(Batch::decode(&bytes[..cut]).is_err());
        }
    }

    #[test]
    fn names_the_record_that_runs_past_the_end() {
        let mut b = BatchBuilder::new(0);
        b.push(b"a", b"bb", 1);
        b.push(b"key", b"value", 2);
        let bytes = b.as_bytes();
        let err = Batch::decode(&bytes[..bytes.len() - 1]).unwrap_err();
        assert_eq!(
            err,
            DecodeError::Truncated {
                index: 1,
                offset: 46,
                needed: 5,
                len: bytes.len() - 1
            }
        );
        assert_eq!(
            err.to_string(),
            "record 1 needs 5 bytes at offset 46 but the batch ends at 50"
        );
    }

    #[test]
    fn rejects_trailing_bytes_and_short_headers() {
        let mut bytes = BatchBuilder::new(3).into_bytes();
        bytes.push(0);
        assert_eq!(
            Batch::decode(&bytes).unwrap_err(),
            DecodeError::TrailingBytes {
                records: 0,
                extra: 1
            }
        );
        assert_eq!(
            Batch::decode(&[1, 2]).unwrap_err(),
            DecodeError::MissingHeader { len: 2 }
        );
    }

    #[test]
    fn huge_announced_count_fails_without_allocating() {
        let mut bytes = u32::MAX.to_le_bytes().to_vec();
        bytes.extend_from_slice(&0u32.to_le_bytes());
        assert!(matches!(
            Batch::decode(&bytes),
            Err(DecodeError::Truncated { index: 0, .. })
        ));
    }

    #[test]
    fn keys_and_values_of_every_short_length_are_copied_whole_and_old_bytes_never_show() {
        // Each length takes its own path in `copy_bytes`; the reused builder's room still holds
        // the longer records written before `clear`.
        let bytes = |len: usize, salt: u8| -> Vec<u8> {
            (0..len)
                .map(|i| (i as u8).wrapping_mul(31) ^ salt)
                .collect()
        };
        let mut reused = BatchBuilder::new(2);
        for _ in 0..=40 {
            reused.push(&bytes(64, 0xff), &bytes(64, 0xee), 0);
        }
        reused.clear();
        let mut fresh = BatchBuilder::new(2);
        for len in 0..=40 {
            let (key, value) = (bytes(len, 1), bytes(40 - len, 2));
            reused.push(&key, &value, len as i64);
            fresh.push(&key, &value, len as i64);
        }
        assert_eq!(reused, fresh);
        assert_eq!(reused.encoded_len(), reused.as_bytes().len());
        let batch = Batch::decode(reused.as_bytes()).unwrap();
        for (len, record) in batch.iter().enumerate() {
            assert_eq!(record.key, bytes(len, 1), "key of {len} bytes");
            assert_eq!(
                record.value,
                bytes(40 - len, 2),
                "value of {} bytes",
                40 - len
            );
            assert_eq!(record.timestamp, len as i64);
        }
        assert_eq!(reused.clone().into_bytes(), reused.as_bytes());
    }

    #[test]
    fn builder_clear_keeps_port() {
        let mut b = BatchBuilder::new(7);
        b.push(b"k", b"v", 0);
        b.clear();
        assert_eq!(b.len(), 0);
        let batch = Batch::decode(b.as_bytes()).unwrap();
        assert_eq!((batch.port(), batch.len()), (7, 0));
        let taken = {
            b.push(b"x", b"", -5);
            b.take_bytes()
        };
        assert_eq!(Batch::decode(&taken).unwrap().len(), 1);
        assert_eq!(b.port(), 7);
        assert!(b.is_empty());
    }
}
