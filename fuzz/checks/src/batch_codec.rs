//! The batch codec and the init message of `weir-abi`: the bytes every guest sends and
//! receives.
//!
//! Properties, for any bytes:
//! - [`Batch::decode`] and [`InitMessage::decode`] return, never panic;
//! - a decode error agrees with the input (its lengths and offsets are the input's);
//! - a decoded batch iterates exactly its announced records, and [`BatchBuilder`] re-encodes
//!   them, with its port, to the very same bytes — the encoding has one form per batch;
//! - a batch one byte shorter does not decode (the encoding is exact: no trailing slack);
//! - a decoded init message re-encodes to the very same bytes and names a subtask below its
//!   parallelism.

use weir_abi::batch::{HEADER_LEN, RECORD_HEADER_LEN};
use weir_abi::{Batch, BatchBuilder, DecodeError, InitMessage};

/// Checks both decoders against `bytes`; panics when a property fails.
pub fn check(bytes: &[u8]) {
    check_batch(bytes);
    check_init_message(bytes);
}

/// The batch properties.
fn check_batch(bytes: &[u8]) {
    let batch = match Batch::decode(bytes) {
        Ok(batch) => batch,
        Err(error) => return check_batch_error(bytes, &error),
    };
    assert_eq!(
        batch.encoded_len(),
        bytes.len(),
        "encoded_len of a decoded batch"
    );
    let records = batch.iter();
    assert_eq!(
        records.len(),
        batch.len(),
        "size hint of the record iterator"
    );

    let mut builder = BatchBuilder::new(batch.port());
    let mut record_bytes = 0;
    for record in records {
        record_bytes += RECORD_HEADER_LEN + record.key.len() + record.value.len();
        builder.push_record(&record);
    }
    assert_eq!(builder.len(), batch.len(), "records yielded by iteration");
    assert_eq!(
        HEADER_LEN + record_bytes,
        bytes.len(),
        "sum of the record sizes"
    );
    assert!(
        builder.as_bytes() == bytes,
        "re-encoding a decoded batch changed its bytes"
    );

    if let Some(shorter) = bytes.len().checked_sub(1) {
        assert!(
            Batch::decode(&bytes[..shorter]).is_err(),
            "a valid batch minus its last byte decoded too"
        );
    }
}

/// A batch decode error must describe `bytes`, not some other input.
fn check_batch_error(bytes: &[u8], error: &DecodeError) {
    assert!(!error.to_string().is_empty(), "empty message for {error:?}");
    match *error {
        DecodeError::MissingHeader { len } => {
            assert_eq!(len, bytes.len(), "{error:?}");
            assert!(len < HEADER_LEN, "{error:?} but the header is there");
        }
        DecodeError::Truncated {
            offset,
            needed,
            len,
            ..
        } => {
            assert_eq!(len, bytes.len(), "{error:?}");
            assert!(offset <= len, "{error:?}: offset past the end");
            assert!(
                offset.checked_add(needed).is_none_or(|end| end > len),
                "{error:?}: the field fits"
            );
        }
        DecodeError::TrailingBytes { extra, .. } => {
            assert!(
                extra > 0 && extra <= bytes.len() - HEADER_LEN,
                "{error:?} in {} bytes",
                bytes.len()
            );
        }
    }
}

/// The init message properties.
fn check_init_message(bytes: &[u8]) {
    match InitMessage::decode(bytes) {
        Ok(message) => {
            assert!(message.subtask < message.parallelism, "{message:?}");
            assert!(
                message.encode() == bytes,
                "re-encoding a decoded init message changed its bytes"
            );
        }
        Err(error) => {
            let text = error.to_string();
            assert!(
                text.starts_with("init message field `") && !error.problem.is_empty(),
                "unexpected init message error {text:?}"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_valid_batch_and_its_truncations() {
        let mut builder = BatchBuilder::new(3);
        builder.push(b"key", b"value", -1);
        builder.push(b"", b"", i64::MAX);
        let bytes = builder.into_bytes();
        for end in 0..=bytes.len() {
            check(&bytes[..end]);
        }
    }

    #[test]
    fn accepts_a_valid_init_message() {
        let message = InitMessage {
            operator: "count",
            subtask: 1,
            parallelism: 2,
            config: b"x=1",
        };
        check(&message.encode());
    }
}
