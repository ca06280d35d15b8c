//! How an operator's state becomes a snapshot and back.
//!
//! The host treats state as opaque bytes. By default they are the operator struct itself,
//! encoded with serde and bincode (standard configuration): deriving `Serialize` and
//! `Deserialize` is all it takes to checkpoint. Per-key state kept in [`Keyed`](crate::Keyed)
//! fields (and operator lists in [`ListState`](crate::ListState) and
//! [`UnionState`](crate::UnionState)) is written so that the host can split and merge it when
//! the operator's parallelism changes (`crate::rescalable`). An operator that wants another
//! encoding, or is not serde at all, implements [`State`] by hand.

use core::sync::atomic::{AtomicUsize, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Result, rescalable};

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

/// The operator's bincode — in the rescalable layout when it holds [`Keyed`](crate::Keyed),
/// [`ListState`](crate::ListState) or [`UnionState`](crate::UnionState) fields
/// (`crate::rescalable`).
impl<T: Serialize + DeserializeOwned> State for T {
    fn snapshot(&self) -> Result<Vec<u8>> {
        let bytes = rescalable::snapshot(self, LAST_SNAPSHOT_LEN.load(Ordering::Relaxed), 0)?;
        LAST_SNAPSHOT_LEN.store(bytes.len(), Ordering::Relaxed);
        Ok(bytes)
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        *self = rescalable::restore(bytes)?;
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
