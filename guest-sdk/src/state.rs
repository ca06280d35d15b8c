//! How an operator's state becomes a snapshot and back.
//!
//! The host treats state as opaque bytes. By default they are the operator struct itself,
//! encoded with serde and bincode (standard configuration): deriving `Serialize` and
//! `Deserialize` is all it takes to checkpoint. An operator that wants another encoding, or is
//! not serde at all, implements [`State`] by hand.

use core::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Result};

/// Saving and restoring an operator's state.
///
/// Implemented for every `Serialize + DeserializeOwned` type. A type that is not serde can
/// implement it by hand, for example a stateless operator:
///
/// ```
/// struct Passthrough;
///
/// impl weir_sdk::State for Passthrough {
///     fn snapshot(&self) -> weir_sdk::Result<Vec<u8>> {
///         Ok(Vec::new())
///     }
///     fn restore(&mut self, _bytes: &[u8]) -> weir_sdk::Result<()> {
///         Ok(())
///     }
/// }
/// ```
pub trait State {
    /// The state, as bytes the host stores with a checkpoint.
    fn snapshot(&self) -> Result<Vec<u8>>;

    /// Replaces the state with one returned by [`snapshot`](Self::snapshot), possibly by an
    /// earlier instance. Called right after `init`, before any record.
    fn restore(&mut self, bytes: &[u8]) -> Result<()>;
}

/// The length of the last snapshot this instance took: the next one starts with that much
/// room, so a large state is not copied again and again as its buffer doubles. (A guest is
/// one instance, single-threaded; natively, tests share the hint, which is only a hint.)
static LAST_SNAPSHOT_LEN: AtomicUsize = AtomicUsize::new(0);

/// A bincode writer into a `Vec` made with a capacity.
struct Buffer(Vec<u8>);

impl bincode::enc::write::Writer for Buffer {
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) -> core::result::Result<(), bincode::error::EncodeError> {
        self.0.extend_from_slice(bytes);
        Ok(())
    }
}

impl<T: Serialize + DeserializeOwned> State for T {
    fn snapshot(&self) -> Result<Vec<u8>> {
        let mut buffer = Buffer(Vec::with_capacity(
            LAST_SNAPSHOT_LEN.load(Ordering::Relaxed),
        ));
        bincode::serde::encode_into_writer(self, &mut buffer, bincode::config::standard())
            .map_err(|e| Error::msg(format!("cannot encode the operator's state: {e}")))?;
        LAST_SNAPSHOT_LEN.store(buffer.0.len(), Ordering::Relaxed);
        Ok(buffer.0)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        const HINT: &str = "was the snapshot taken by another version of the operator?";
        let (state, read) =
            bincode::serde::decode_from_slice(bytes, bincode::config::standard())
                .map_err(|e| Error::msg(format!("snapshot does not decode ({HINT}): {e}")))?;
        if read != bytes.len() {
            let extra = bytes.len() - read;
            return Err(Error::msg(format!(
                "{extra} bytes follow the operator's state in the snapshot ({HINT})"
            )));
        }
        *self = state;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Counts {
        by_key: BTreeMap<Vec<u8>, u64>,
    }

    #[test]
    fn serde_types_round_trip() {
        let mut state = Counts::default();
        state.by_key.insert(b"a".to_vec(), 3);
        let bytes = state.snapshot().unwrap();
        let mut fresh = Counts::default();
        fresh.restore(&bytes).unwrap();
        assert_eq!(fresh, state);
    }

    #[test]
    fn restore_rejects_trailing_and_missing_bytes() {
        let mut bytes = Counts::default().snapshot().unwrap();
        bytes.push(0);
        let err = Counts::default().restore(&bytes).unwrap_err();
        assert!(
            err.message()
                .starts_with("1 bytes follow the operator's state"),
            "{err}"
        );

        let err = Counts::default().restore(&[]).unwrap_err();
        assert!(
            err.message().starts_with("snapshot does not decode"),
            "{err}"
        );
    }

    #[test]
    fn unit_structs_snapshot_to_nothing() {
        #[derive(Serialize, Deserialize)]
        struct Stateless;
        assert!(Stateless.snapshot().unwrap().is_empty());
        Stateless.restore(&[]).unwrap();
    }
}
