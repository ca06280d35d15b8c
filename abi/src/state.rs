//! Host-kept keyed state (`docs/ABI.md` §17): the packed buffers a guest passes to the
//! `state_get`, `state_result` and `state_write` imports, encoded by the guest SDKs and
//! decoded by the host with these functions, so the two sides read one description.
//!
//! Why batched: a host call costs from tens of nanoseconds (a core module) to microseconds (a
//! component in a scripting language), so a guest reads the state of all the keys of a batch in
//! one call and writes it back in another.
//!
//! Every entry names the *state* it belongs to (a number the operator chooses, one per kind of
//! value it keeps: a count, a list of recent values) and the *key* (usually the record's key:
//! the host places the entry by its key group, so a rescale moves it with the key's records).
//! All numbers are little-endian.
//!
//! ```text
//! read request   entries: u16 state ‖ u32 key_len ‖ key
//! read result    per entry, in order: u32 value_len ‖ value, or u32 ABSENT (0xFFFF_FFFF)
//! write request  entries: u8 PUT ‖ u16 state ‖ u32 key_len ‖ key ‖ u32 value_len ‖ value
//!                      or u8 DELETE ‖ u16 state ‖ u32 key_len ‖ key
//! ```
//! The last write of a key in a request wins; a read sees every write made before it.

use crate::wire::{Reader, Short, put_len, put_prefixed};

/// The longest key an entry may have: 64 KiB.
pub const MAX_KEY_BYTES: usize = 64 * 1024;
/// The longest value an entry may have: 16 MiB.
pub const MAX_VALUE_BYTES: usize = 16 * 1024 * 1024;
/// The length a read result gives an entry that has no value.
pub const ABSENT: u32 = u32::MAX;
/// The op byte of a write that sets a value.
pub const PUT: u8 = 1;
/// The op byte of a write that removes a value.
pub const DELETE: u8 = 0;

/// Appends a read of `key` in `state` to a read request.
pub fn put_read(out: &mut Vec<u8>, state: u16, key: &[u8]) {
    out.extend_from_slice(&state.to_le_bytes());
    put_prefixed(out, key);
}

/// Appends a write of `key` in `state` to a write request: `Some(value)` sets it, `None`
/// removes it.
pub fn put_write(out: &mut Vec<u8>, state: u16, key: &[u8], value: Option<&[u8]>) {
    out.push(if value.is_some() { PUT } else { DELETE });
    out.extend_from_slice(&state.to_le_bytes());
    put_prefixed(out, key);
    if let Some(value) = value {
        put_prefixed(out, value);
    }
}

/// Appends one entry's answer to a read result.
pub fn put_result(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(value) => put_prefixed(out, value),
        None => put_len(out, ABSENT as usize),
    }
}

/// Why a request buffer cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestError {
    /// It ends within an entry.
    Short(Short),
    /// A write's op byte is neither [`PUT`] nor [`DELETE`].
    Op {
        /// Where the op byte is.
        offset: usize,
        /// What it holds.
        op: u8,
    },
    /// A key longer than [`MAX_KEY_BYTES`].
    KeyTooLong {
        /// Its length.
        len: usize,
    },
    /// A value longer than [`MAX_VALUE_BYTES`].
    ValueTooLong {
        /// Its length.
        len: usize,
    },
}

impl core::fmt::Display for RequestError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            RequestError::Short(short) => write!(
                f,
                "it ends at byte {} within an entry that needs {} bytes there",
                short.offset, short.needed
            ),
            RequestError::Op { offset, op } => write!(
                f,
                "byte {offset} holds the op {op}, which is neither {PUT} (put) nor {DELETE} \
                 (delete)"
            ),
            RequestError::KeyTooLong { len } => {
                write!(
                    f,
                    "a key is {len} bytes long, over the {MAX_KEY_BYTES}-byte limit"
                )
            }
            RequestError::ValueTooLong { len } => write!(
                f,
                "a value is {len} bytes long, over the {MAX_VALUE_BYTES}-byte limit"
            ),
        }
    }
}

impl From<Short> for RequestError {
    fn from(short: Short) -> Self {
        RequestError::Short(short)
    }
}

/// The entries of a read request, in order: `(state, key)`.
pub fn reads(bytes: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8]), RequestError>> {
    entries(bytes, |r| {
        let state = r.u16()?;
        let key = key(r.prefixed()?)?;
        Ok((state, key))
    })
}

/// One entry of a write request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Write<'a> {
    /// The state.
    pub state: u16,
    /// The key.
    pub key: &'a [u8],
    /// The new value, or `None` to remove it.
    pub value: Option<&'a [u8]>,
}

/// The entries of a write request, in order.
pub fn writes(bytes: &[u8]) -> impl Iterator<Item = Result<Write<'_>, RequestError>> {
    entries(bytes, |r| {
        let offset = r.position();
        let op = r.u8()?;
        let state = r.u16()?;
        let key = key(r.prefixed()?)?;
        let value = match op {
            PUT => {
                let value = r.prefixed()?;
                if value.len() > MAX_VALUE_BYTES {
                    return Err(RequestError::ValueTooLong { len: value.len() });
                }
                Some(value)
            }
            DELETE => None,
            op => return Err(RequestError::Op { offset, op }),
        };
        Ok(Write { state, key, value })
    })
}

/// The answers of a read result, in the order of its request: `None` where an entry has no
/// value.
pub fn results(bytes: &[u8]) -> impl Iterator<Item = Result<Option<&[u8]>, Short>> {
    entries(bytes, |r| {
        let len = r.u32()?;
        if len == ABSENT {
            return Ok(None);
        }
        r.take(len as usize).map(Some)
    })
}

/// The entries of `bytes`, each read by `entry`, until the bytes end; an entry that cannot be
/// read is the last.
fn entries<'a, T: 'a, E: 'a>(
    bytes: &'a [u8],
    mut entry: impl FnMut(&mut Reader<'a>) -> Result<T, E> + 'a,
) -> impl Iterator<Item = Result<T, E>> + 'a {
    let mut r = Reader::new(bytes);
    core::iter::from_fn(move || {
        if r.remaining() == 0 {
            return None;
        }
        let read = entry(&mut r);
        if read.is_err() {
            r = Reader::new(&[]);
        }
        Some(read)
    })
}

fn key(key: &[u8]) -> Result<&[u8], RequestError> {
    if key.len() > MAX_KEY_BYTES {
        return Err(RequestError::KeyTooLong { len: key.len() });
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_results_read_back_what_was_written() {
        let mut read = Vec::new();
        put_read(&mut read, 1, b"alice");
        put_read(&mut read, 2, b"");
        let entries: Vec<_> = reads(&read).collect::<Result<_, _>>().unwrap();
        assert_eq!(entries, vec![(1, &b"alice"[..]), (2, &b""[..])]);

        let mut write = Vec::new();
        put_write(&mut write, 1, b"alice", Some(b"7"));
        put_write(&mut write, 1, b"bob", None);
        let entries: Vec<_> = writes(&write).collect::<Result<_, _>>().unwrap();
        assert_eq!(
            entries,
            vec![
                Write {
                    state: 1,
                    key: b"alice",
                    value: Some(b"7")
                },
                Write {
                    state: 1,
                    key: b"bob",
                    value: None
                },
            ]
        );

        let mut result = Vec::new();
        put_result(&mut result, Some(b"7"));
        put_result(&mut result, None);
        put_result(&mut result, Some(b""));
        let answers: Vec<_> = results(&result).collect::<Result<_, _>>().unwrap();
        assert_eq!(answers, vec![Some(&b"7"[..]), None, Some(&b""[..])]);
    }

    #[test]
    fn a_cut_or_a_bad_op_ends_the_request_with_an_error() {
        let mut read = Vec::new();
        put_read(&mut read, 1, b"alice");
        let cut = &read[..read.len() - 1];
        let entries: Vec<_> = reads(cut).collect();
        assert_eq!(entries.len(), 1);
        assert!(matches!(entries[0], Err(RequestError::Short(_))));

        let mut write = Vec::new();
        put_write(&mut write, 1, b"k", None);
        write[0] = 9;
        let entries: Vec<_> = writes(&write).collect();
        assert_eq!(entries, vec![Err(RequestError::Op { offset: 0, op: 9 })]);
    }

    #[test]
    fn a_key_over_the_limit_is_refused() {
        let mut read = Vec::new();
        put_read(&mut read, 0, &vec![0; MAX_KEY_BYTES + 1]);
        let entries: Vec<_> = reads(&read).collect();
        assert_eq!(
            entries,
            vec![Err(RequestError::KeyTooLong {
                len: MAX_KEY_BYTES + 1
            })]
        );
    }
}
