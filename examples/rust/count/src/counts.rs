//! [`Counts`]: a count per byte-string key, built for the operator's hot loop in wasm.
//!
//! A `HashMap<Vec<u8>, u64>` spends most of a lookup in wasm on two things the profile of this
//! operator showed (docs/BENCHMARKS.md): following each candidate's key pointer to a separate
//! allocation, and comparing keys with `memcmp`, which in wasm32 is a byte-at-a-time loop.
//! Here a key of up to [`INLINE_BYTES`] bytes is stored inside its table entry as three 64-bit
//! words, so a lookup compares three words and follows no pointer; longer keys live on the
//! heap and are compared eight bytes at a time.
//!
//! Serialised as the SDK's keyed state (`weir_sdk::serialize_keyed`): in a snapshot one keyed
//! item per key, so that a rescale moves each count with its key (docs/ABI.md §16); elsewhere a
//! map from key bytes to count, in table order, which bincode encodes exactly as it encodes a
//! `BTreeMap<Vec<u8>, u64>` with the same entries (the order may differ).

use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault};

use hashbrown::HashTable;
use rustc_hash::FxHasher;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Keys up to this many bytes are stored inline.
pub const INLINE_BYTES: usize = 24;

/// A key: inline words (zero-padded, little-endian) when short, heap bytes otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Inline { len: u8, words: [u64; 3] },
    Heap(Box<[u8]>),
}

impl Key {
    fn new(bytes: &[u8]) -> Key {
        match pack(bytes) {
            Some((len, words)) => Key::Inline { len, words },
            None => Key::Heap(bytes.into()),
        }
    }

    fn bytes(&self) -> KeyBytes<'_> {
        match self {
            Key::Inline { len, words } => KeyBytes::Inline(*len, words),
            Key::Heap(bytes) => KeyBytes::Heap(bytes),
        }
    }
}

/// A borrowed key's bytes, for hashing.
enum KeyBytes<'a> {
    Inline(u8, &'a [u64; 3]),
    Heap(&'a [u8]),
}

/// The inline form of `bytes`, if short enough.
fn pack(bytes: &[u8]) -> Option<(u8, [u64; 3])> {
    if bytes.len() > INLINE_BYTES {
        return None;
    }
    let mut padded = [0u8; INLINE_BYTES];
    padded[..bytes.len()].copy_from_slice(bytes);
    let word = |i: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&padded[i * 8..i * 8 + 8]);
        u64::from_le_bytes(w)
    };
    Some((bytes.len() as u8, [word(0), word(1), word(2)]))
}

/// Whether `a` and `b` hold the same bytes, comparing eight at a time.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut a8, mut b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let words_equal = a8.by_ref().zip(b8.by_ref()).all(|(x, y)| {
        let (x, y): (&[u8; 8], &[u8; 8]) = (x.try_into().unwrap(), y.try_into().unwrap());
        u64::from_ne_bytes(*x) == u64::from_ne_bytes(*y)
    });
    words_equal
        && a8
            .remainder()
            .iter()
            .zip(b8.remainder())
            .all(|(x, y)| x == y)
}

/// The hash of a key: of its inline words when it has them, of its bytes otherwise, so the
/// same key always hashes the same way.
fn hash_of(key: &KeyBytes<'_>) -> u64 {
    let build = BuildHasherDefault::<FxHasher>::default();
    match key {
        KeyBytes::Inline(len, words) => build.hash_one((*len, *words)),
        KeyBytes::Heap(bytes) => build.hash_one(bytes),
    }
}

/// A count per key.
#[derive(Default)]
pub struct Counts {
    table: HashTable<(Key, u64)>,
}

impl fmt::Debug for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counts")
            .field("keys", &self.table.len())
            .finish()
    }
}

impl Counts {
    /// No counts yet, with room for `keys` keys.
    pub fn with_capacity(keys: usize) -> Self {
        Counts {
            table: HashTable::with_capacity(keys),
        }
    }

    /// Adds one to the count of `key` and returns the new count.
    pub fn increment(&mut self, key: &[u8]) -> u64 {
        self.add(key, 1)
    }

    /// Adds `n` to the count of `key` and returns the new count.
    fn add(&mut self, key: &[u8], n: u64) -> u64 {
        let packed = pack(key);
        let probe = match &packed {
            Some((len, words)) => KeyBytes::Inline(*len, words),
            None => KeyBytes::Heap(key),
        };
        let hash = hash_of(&probe);
        let found = self
            .table
            .find_mut(hash, |(stored, _)| match (stored, &packed) {
                (Key::Inline { len, words }, Some((l, w))) => len == l && words == w,
                (Key::Heap(bytes), None) => same_bytes(bytes, key),
                _ => false,
            });
        if let Some((_, count)) = found {
            *count += n;
            return *count;
        }
        self.table
            .insert_unique(hash, (Key::new(key), n), |(k, _)| hash_of(&k.bytes()));
        n
    }

    /// The count of `key` (0 if never seen).
    pub fn get(&self, key: &[u8]) -> u64 {
        let wanted = Key::new(key);
        let hash = hash_of(&wanted.bytes());
        self.table
            .find(hash, |(k, _)| *k == wanted)
            .map_or(0, |(_, c)| *c)
    }

    /// How many keys have a count.
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no key has a count.
    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }
}

/// Keyed state of the SDK (`weir_sdk::serialize_keyed`): in a snapshot, one keyed item per
/// key, which a rescale moves with the key; elsewhere a map from key bytes to count.
impl Serialize for Counts {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let entries = self
            .table
            .iter()
            .map(|(key, count)| (KeyView::of(key), count));
        weir_sdk::serialize_keyed(serializer, self.table.len(), entries)
    }
}

/// A key's bytes, without allocating: copied out of its words when inline.
enum KeyView<'a> {
    Inline([u8; INLINE_BYTES], u8),
    Heap(&'a [u8]),
}

impl<'a> KeyView<'a> {
    fn of(key: &'a Key) -> Self {
        match key {
            Key::Inline { len, words } => {
                let mut bytes = [0u8; INLINE_BYTES];
                for (chunk, word) in bytes.chunks_exact_mut(8).zip(words) {
                    chunk.copy_from_slice(&word.to_le_bytes());
                }
                KeyView::Inline(bytes, *len)
            }
            Key::Heap(bytes) => KeyView::Heap(bytes),
        }
    }
}

impl AsRef<[u8]> for KeyView<'_> {
    fn as_ref(&self) -> &[u8] {
        match self {
            KeyView::Inline(bytes, len) => &bytes[..usize::from(*len)],
            KeyView::Heap(bytes) => bytes,
        }
    }
}

impl<'de> Deserialize<'de> for Counts {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        weir_sdk::deserialize_keyed(
            deserializer,
            Counts::with_capacity,
            |counts: &mut Counts, key: &[u8], count: u64| {
                counts.add(key, count);
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn counts_short_long_and_empty_keys_apart() {
        let mut counts = Counts::default();
        let long = vec![7u8; 100];
        let keys: [&[u8]; 7] = [b"", b"\0", b"a", b"a\0", &[b'x'; 24], &[b'x'; 25], &long];
        for (i, key) in keys.iter().enumerate() {
            for n in 1..=i as u64 + 1 {
                assert_eq!(counts.increment(key), n);
            }
        }
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(counts.get(key), i as u64 + 1, "{key:?}");
        }
        assert_eq!(counts.get(b"b"), 0);
        assert_eq!(counts.len(), keys.len());
    }

    #[test]
    fn compares_bytes_eight_at_a_time_and_the_rest_one_by_one() {
        let a: Vec<u8> = (0..37).collect();
        let mut b = a.clone();
        assert!(same_bytes(&a, &b));
        for i in 0..a.len() {
            b[i] ^= 1;
            assert!(!same_bytes(&a, &b), "difference at {i}");
            b[i] ^= 1;
        }
        assert!(!same_bytes(&a, &a[..36]));
    }

    #[test]
    fn serialises_as_a_map_and_restores_every_count() {
        let mut counts = Counts::default();
        let mut model = BTreeMap::new();
        for i in 0..1000u64 {
            let key = format!("key-{}", i % 97).repeat(1 + (i % 5) as usize);
            counts.increment(key.as_bytes());
            *model.entry(key.into_bytes()).or_insert(0u64) += 1;
        }
        let config = bincode::config::standard();
        let bytes = bincode::serde::encode_to_vec(&counts, config).unwrap();
        // The same bytes as the map would give, up to the order of the entries.
        let (as_map, _): (BTreeMap<Vec<u8>, u64>, usize) =
            bincode::serde::decode_from_slice(&bytes, config).unwrap();
        assert_eq!(as_map, model);
        let model_bytes = bincode::serde::encode_to_vec(&model, config).unwrap();
        let (restored, _): (Counts, usize) =
            bincode::serde::decode_from_slice(&model_bytes, config).unwrap();
        for (key, count) in &model {
            assert_eq!(restored.get(key), *count);
        }
        assert_eq!(restored.len(), model.len());
    }
}
