//! Keyed state kept on the host (`docs/ABI.md` §17, docs/STATE.md): values the operator keeps
//! per key outside its own memory, in a store beside the task, so that they are not capped by
//! the guest's memory, are checkpointed by what changed, and move with their keys when the
//! operator's parallelism changes, with no snapshot code.
//!
//! A [`ValueState<T>`] is one such value per key, serialized with bincode. Each is named by a
//! number the operator chooses (one per kind of value it keeps). Reads and writes are batched:
//! [`ValueState::get_many`] reads the values of many keys in one call to the host, and
//! [`ValueState::put_many`] writes many in one, so a batch of records costs two host calls,
//! however many keys it has:
//!
//! ```ignore
//! const COUNTS: ValueState<u64> = ValueState::new(0);
//!
//! fn process(&mut self, batch: &Batch<'_>, out: &mut Output) -> Result<()> {
//!     let keys: Vec<&[u8]> = batch.records().map(|r| r.map(|r| r.key)).collect::<Result<_, _>>()?;
//!     let mut counts = COUNTS.get_many(out, &keys)?;
//!     // ... add up, emit, then:
//!     COUNTS.put_many(out, keys.iter().zip(&counts).map(|(k, c)| (*k, c.as_ref())))?;
//! }
//! ```
//!
//! A read sees every write made before it. In the native harness the emulated host keeps the
//! values, checkpoints and restores them, and splits them by key group in
//! [`Harness::rescale`](crate::testing::Harness::rescale), as the host does.

use std::marker::PhantomData;

use serde::Serialize;
use serde::de::DeserializeOwned;
use weir_abi::state as wire;

use crate::{Error, Output, Result};

/// One value of type `T` per key, kept on the host under the state number given to
/// [`ValueState::new`].
pub struct ValueState<T> {
    state: u16,
    value: PhantomData<fn() -> T>,
}

impl<T> Clone for ValueState<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for ValueState<T> {}

impl<T> std::fmt::Debug for ValueState<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueState")
            .field("state", &self.state)
            .finish()
    }
}

impl<T: Serialize + DeserializeOwned> ValueState<T> {
    /// The values kept under state number `state`; another `ValueState` of the same operator
    /// must use another number.
    pub const fn new(state: u16) -> Self {
        ValueState {
            state,
            value: PhantomData,
        }
    }

    /// The value of each of `keys`, in order (`None` where a key has none), read in one call
    /// to the host.
    pub fn get_many<K: AsRef<[u8]>>(&self, out: &mut Output, keys: &[K]) -> Result<Vec<Option<T>>> {
        let mut request = Vec::with_capacity(keys.len() * 16);
        for key in keys {
            wire::put_read(&mut request, self.state, key.as_ref());
        }
        let result = out.state_get(&request);
        let mut values = Vec::with_capacity(keys.len());
        for answer in wire::results(&result) {
            let answer = answer.map_err(|_| Error::msg("the host's state result ends early"))?;
            values.push(answer.map(decode).transpose()?);
        }
        // An emulated host that refused the request answered nothing; the call fails with
        // its reason when it returns.
        values.resize_with(keys.len(), || None);
        Ok(values)
    }

    /// The value of `key`.
    pub fn get(&self, out: &mut Output, key: &[u8]) -> Result<Option<T>> {
        Ok(self.get_many(out, &[key])?.pop().flatten())
    }

    /// Sets or (with `None`) removes the value of each key, in one call to the host; the last
    /// write of a key wins.
    pub fn put_many<'a>(
        &self,
        out: &mut Output,
        entries: impl IntoIterator<Item = (&'a [u8], Option<&'a T>)>,
    ) -> Result<()>
    where
        T: 'a,
    {
        let mut request = Vec::new();
        let mut value = Vec::new();
        for (key, new) in entries {
            match new {
                Some(new) => {
                    value.clear();
                    encode(new, &mut value)?;
                    wire::put_write(&mut request, self.state, key, Some(&value));
                }
                None => wire::put_write(&mut request, self.state, key, None),
            }
        }
        if !request.is_empty() {
            out.state_write(&request);
        }
        Ok(())
    }

    /// Sets the value of `key`.
    pub fn put(&self, out: &mut Output, key: &[u8], value: &T) -> Result<()> {
        self.put_many(out, [(key, Some(value))])
    }

    /// Removes the value of `key`.
    pub fn delete(&self, out: &mut Output, key: &[u8]) -> Result<()> {
        self.put_many(out, [(key, None)])
    }
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    bincode::serde::decode_from_slice(bytes, bincode::config::standard())
        .map(|(value, _)| value)
        .map_err(|e| {
            Error::msg(format!(
                "a value kept on the host does not decode as this state's type ({e}): was the \
                 state number used for another type?"
            ))
        })
}

fn encode<T: Serialize>(value: &T, out: &mut Vec<u8>) -> Result<()> {
    let bytes = bincode::serde::encode_to_vec(value, bincode::config::standard())
        .map_err(|e| Error::msg(format!("a value to keep on the host does not encode: {e}")))?;
    out.extend_from_slice(&bytes);
    Ok(())
}
