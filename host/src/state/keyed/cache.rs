//! A write-back cache of hot keys in front of a keyed store.
//!
//! Why: a keyed count reads and writes the same few keys over and over. Each of those through
//! the embedded store is a lookup in its memtable and block cache plus a write batch entry;
//! through this cache it is a hash map lookup, and a key written many times between two
//! checkpoints reaches the store once. Flink's RocksDB backend pays the store on every access;
//! Kafka Streams puts the same kind of cache in front of its RocksDB stores.
//!
//! The cache holds at most `capacity` keys. Writes stay in it (dirty) until [`Cached::flush`],
//! which a checkpoint, a scan and a rescale's retention call first, or until it is full: then
//! every dirty key is written in one batch and the least recently used half is dropped. A key
//! read and found absent is cached too, as absent, so a stream of new keys costs one store read
//! each.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use super::{Backend, KeyedStore, StoreCheckpoint, StoreError, Writes};

/// One cached key.
#[derive(Debug)]
struct Entry {
    /// Its value; `None` when it is absent (never written, or deleted).
    value: Option<Vec<u8>>,
    /// Whether the store has yet to see `value`.
    dirty: bool,
    /// When it was last read or written, by the cache's own clock.
    used: u64,
}

/// A keyed store behind a write-back cache of its hot keys.
pub struct Cached {
    store: Box<dyn KeyedStore>,
    entries: HashMap<Vec<u8>, Entry>,
    capacity: usize,
    clock: u64,
}

impl Cached {
    /// `store` behind a cache of at most `capacity` keys (at least one).
    pub fn new(store: Box<dyn KeyedStore>, capacity: usize) -> Self {
        Cached {
            store,
            entries: HashMap::new(),
            capacity: capacity.max(1),
            clock: 0,
        }
    }

    /// Writes every dirty key to the store, in one batch; they stay cached, clean.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        let mut writes = Writes::new();
        for (key, entry) in &self.entries {
            if entry.dirty {
                match &entry.value {
                    Some(value) => writes.put(key.clone(), value.clone()),
                    None => writes.delete(key.clone()),
                }
            }
        }
        if writes.is_empty() {
            return Ok(());
        }
        self.store.write(&writes)?;
        for entry in self.entries.values_mut() {
            entry.dirty = false;
        }
        Ok(())
    }

    /// Makes room when the cache holds more than its capacity: writes the dirty keys and keeps
    /// the most recently used half.
    fn make_room(&mut self) -> Result<(), StoreError> {
        if self.entries.len() <= self.capacity {
            return Ok(());
        }
        self.flush()?;
        let mut ages: Vec<u64> = self.entries.values().map(|e| e.used).collect();
        let keep = self.capacity / 2;
        let cut = ages.len() - keep;
        let (_, &mut newest_dropped, _) = ages.select_nth_unstable(cut.saturating_sub(1));
        if keep == 0 {
            self.entries.clear();
        } else {
            self.entries.retain(|_, entry| entry.used > newest_dropped);
        }
        Ok(())
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

impl KeyedStore for Cached {
    /// Reads what the cache holds from it and the rest from the store, caching it.
    fn get_many(&mut self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut out: Vec<Option<Vec<u8>>> = Vec::with_capacity(keys.len());
        let mut missing = Vec::new();
        for (i, key) in keys.iter().enumerate() {
            let used = self.tick();
            match self.entries.get_mut(*key) {
                Some(entry) => {
                    entry.used = used;
                    out.push(entry.value.clone());
                }
                None => {
                    out.push(None);
                    missing.push(i);
                }
            }
        }
        if !missing.is_empty() {
            let wanted: Vec<&[u8]> = missing.iter().map(|&i| keys[i]).collect();
            let values = self.store.get_many(&wanted)?;
            for (i, value) in missing.into_iter().zip(values) {
                let used = self.tick();
                self.entries.insert(
                    keys[i].to_vec(),
                    Entry {
                        value: value.clone(),
                        dirty: false,
                        used,
                    },
                );
                out[i] = value;
            }
            self.make_room()?;
        }
        Ok(out)
    }

    fn write(&mut self, writes: &Writes) -> Result<(), StoreError> {
        for (key, value) in writes.iter() {
            let used = self.tick();
            let entry = Entry {
                value: value.map(<[u8]>::to_vec),
                dirty: true,
                used,
            };
            match self.entries.get_mut(key) {
                Some(old) => *old = entry,
                None => {
                    self.entries.insert(key.to_vec(), entry);
                }
            }
        }
        self.make_room()
    }

    fn scan(
        &mut self,
        range: Range<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        self.flush()?;
        self.store.scan(range, visit)
    }

    fn retain_groups(&mut self, groups: Range<u32>) -> Result<(), StoreError> {
        self.flush()?;
        self.entries.clear();
        self.store.retain_groups(groups)
    }

    fn checkpoint(&mut self, dir: &Path) -> Result<StoreCheckpoint, StoreError> {
        self.flush()?;
        self.store.checkpoint(dir)
    }
}

/// Stores of another backend, each behind a cache of `capacity` keys.
pub struct CachedBackend<B> {
    /// The backend of the stores behind the caches.
    pub inner: B,
    /// Each cache's capacity, in keys.
    pub capacity: usize,
}

impl<B: Backend> Backend for CachedBackend<B> {
    fn create(&self, dir: &Path) -> Result<Box<dyn KeyedStore>, StoreError> {
        Ok(Box::new(Cached::new(
            self.inner.create(dir)?,
            self.capacity,
        )))
    }

    fn open_checkpoint(
        &self,
        checkpoint: &Path,
        dir: &Path,
    ) -> Result<Box<dyn KeyedStore>, StoreError> {
        Ok(Box::new(Cached::new(
            self.inner.open_checkpoint(checkpoint, dir)?,
            self.capacity,
        )))
    }
}
