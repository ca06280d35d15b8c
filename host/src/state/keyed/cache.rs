//! A write-back cache of hot keys in front of a keyed store.
//!
//! Why: a keyed count reads and writes the same few keys over and over. Each of those through
//! the embedded store is a lookup in its memtable and block cache plus a write batch entry;
//! through this cache it is a hash map lookup, and a key written many times between two
//! checkpoints reaches the store once. Flink's RocksDB backend pays the store on every access;
//! Kafka Streams puts the same kind of cache in front of its RocksDB stores.
//!
//! **Memory.** The caches of a process share one budget in bytes ([`CacheBudget`], a part of
//! `[state] memory`), each cache allowed an equal share of it. A cache's bytes are its keys,
//! the capacity of its values and a fixed cost per entry ([`ENTRY_OVERHEAD`]). Writes stay in the
//! cache (dirty) until [`Cached::flush`], which a checkpoint, a scan and a rescale's retention
//! call first, or until the cache is over its share: then every dirty key is written in one
//! batch and the least recently used keys are dropped, down to half the share. A key read and found absent
//! is cached too, as absent, so a stream of new keys costs one store read each.
//!
//! **Cost.** On the hot path a key costs one hash (foldhash) and one probe per read and per
//! write; a value read is borrowed, not copied, and a value written into a cached key reuses
//! the key's buffer. Nothing is allocated but for a key seen for the first time.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use hashbrown::HashMap;
use smallvec::SmallVec;

use super::{Backend, KeyedStore, PendingCheckpoint, StoreCheckpoint, StoreError, Writes};

/// What a cached entry costs besides the bytes of a key or value too long to be kept in its
/// slot: the map's slot (room for a short key and a short value, the flags, the clock) and its
/// control byte, at the map's usual load. An estimate, measured against the process's resident
/// memory (docs/STATE.md).
pub const ENTRY_OVERHEAD: usize = 128;

/// A store key, kept in the map's slot when it is this short or shorter: a key group, a state
/// and a key of up to 20 bytes (a word, a number, a UUID's bytes).
type Key = SmallVec<[u8; 24]>;

/// A value, kept in the entry when it is this short or shorter (a count, a sum, a timestamp).
type Value = SmallVec<[u8; 16]>;

/// The memory the hot-key caches of one process share.
#[derive(Debug)]
pub struct CacheBudget {
    bytes: usize,
    /// How many caches hold a share now.
    caches: AtomicUsize,
}

impl CacheBudget {
    /// A budget of `bytes` for all the caches together.
    pub fn new(bytes: usize) -> Arc<Self> {
        Arc::new(CacheBudget {
            bytes,
            caches: AtomicUsize::new(0),
        })
    }

    /// The budget's bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// What one cache may hold: an equal share of the budget.
    fn share(&self) -> usize {
        self.bytes / self.caches.load(Ordering::Relaxed).max(1)
    }
}

/// One cached key.
#[derive(Debug)]
struct Entry {
    /// Its value; `None` when it is absent (never written, or deleted).
    value: Option<Value>,
    /// Whether the store has yet to see `value`.
    dirty: bool,
    /// When it was last read or written, by the cache's own clock.
    used: u64,
}

impl Entry {
    /// What the entry of `key` costs.
    fn cost(&self, key: &Key) -> usize {
        let spilled = |capacity: usize, spilled: bool| if spilled { capacity } else { 0 };
        let value = self
            .value
            .as_ref()
            .map_or(0, |value| spilled(value.capacity(), value.spilled()));
        spilled(key.capacity(), key.spilled()) + value + ENTRY_OVERHEAD
    }
}

/// A keyed store behind a write-back cache of its hot keys.
pub struct Cached {
    /// The store, shared with the checkpoints begun and not yet taken ([`Deferred`]).
    store: Arc<Mutex<Box<dyn KeyedStore>>>,
    entries: HashMap<Key, Entry>,
    budget: Arc<CacheBudget>,
    /// What the entries cost ([`Entry::cost`]).
    bytes: usize,
    clock: u64,
    /// The checkpoints begun and perhaps not yet taken, oldest first: the store is written
    /// again only once they are.
    deferred: Vec<Arc<Mutex<Deferred>>>,
    /// Reused between calls: the indexes of the keys a read did not find cached.
    missing: Vec<usize>,
    /// Reused between flushes.
    writes: Writes,
}

/// A checkpoint of a [`Cached`] store begun at a barrier: the dirty entries of that moment, to
/// be written to the store before the store's own checkpoint is taken. Whichever thread comes
/// first does it: the one that finishes the checkpoint (the persister's), or the task's when it
/// must write to the store before that (the store would then hold writes made after the
/// barrier). The other waits on the lock and finds it done.
enum Deferred {
    /// Not yet written.
    Waiting {
        /// The entries dirty at the barrier.
        writes: Writes,
        /// Where the checkpoint goes.
        dir: PathBuf,
    },
    /// Written, by the task's thread; its result is for [`PendingCheckpoint::take`].
    Taken(Result<StoreCheckpoint, StoreError>),
    /// Handed to [`PendingCheckpoint::take`].
    Handed,
}

impl Deferred {
    /// Writes `writes` to `store` and takes its checkpoint into `dir`.
    fn take(
        store: &Mutex<Box<dyn KeyedStore>>,
        writes: &Writes,
        dir: &Path,
    ) -> Result<StoreCheckpoint, StoreError> {
        let mut store = lock(store);
        if !writes.is_empty() {
            store.write(writes)?;
        }
        store.checkpoint(dir)
    }
}

/// `mutex`, locked whatever a panicking thread left in it: the store's state is what its last
/// call left, and a failed call fails the task, which restores from a checkpoint.
fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Cached {
    /// `store` behind a cache that holds a share of `budget`.
    pub fn new(store: Box<dyn KeyedStore>, budget: Arc<CacheBudget>) -> Self {
        budget.caches.fetch_add(1, Ordering::Relaxed);
        Cached {
            store: Arc::new(Mutex::new(store)),
            entries: HashMap::new(),
            budget,
            bytes: 0,
            clock: 0,
            deferred: Vec::new(),
            missing: Vec::new(),
            writes: Writes::new(),
        }
    }

    /// Takes every checkpoint begun and not yet taken, oldest first: the store may then be
    /// written.
    fn settle(&mut self) -> Result<(), StoreError> {
        for deferred in self.deferred.drain(..) {
            // A checkpoint dropped untaken (its barrier failed the task's snapshot) still
            // holds entries the cache no longer marks dirty: they are written, but no
            // checkpoint is left in a directory nothing would remove.
            let dropped = Arc::strong_count(&deferred) == 1;
            let mut deferred = lock(&deferred);
            if let Deferred::Waiting { writes, dir } = &*deferred {
                if dropped {
                    lock(&self.store).write(writes)?;
                    *deferred = Deferred::Handed;
                    continue;
                }
                let taken = Deferred::take(&self.store, writes, dir);
                // The error goes to the checkpoint too, which reports it with its own id.
                let failed = taken.as_ref().err().map(|e| StoreError::Backend {
                    action: "take a checkpoint begun at an earlier barrier",
                    message: e.to_string(),
                });
                *deferred = Deferred::Taken(taken);
                if let Some(e) = failed {
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The dirty entries, into `writes`; they are clean after.
    fn take_dirty(&mut self, writes: &mut Writes) {
        writes.clear();
        for (key, entry) in &mut self.entries {
            if entry.dirty {
                match &entry.value {
                    Some(value) => writes.put(key, value),
                    None => writes.delete(key),
                }
                entry.dirty = false;
            }
        }
    }

    /// Writes every dirty key to the store, in one batch; they stay cached, clean.
    pub fn flush(&mut self) -> Result<(), StoreError> {
        self.settle()?;
        let mut writes = std::mem::take(&mut self.writes);
        self.take_dirty(&mut writes);
        let written = if writes.is_empty() {
            Ok(())
        } else {
            lock(&self.store).write(&writes)
        };
        self.writes = writes;
        written
    }

    /// What the cache's entries cost, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Makes room when the cache holds more than its share of the budget: writes the dirty
    /// keys and keeps the most recently used keys that fit in half the share.
    fn make_room(&mut self) -> Result<(), StoreError> {
        let share = self.budget.share();
        if self.bytes <= share {
            return Ok(());
        }
        self.flush()?;
        // Newest first: the keys kept are a prefix of these whose cost fits half the share.
        let mut ages: Vec<(u64, usize)> = self
            .entries
            .iter()
            .map(|(key, entry)| (entry.used, entry.cost(key)))
            .collect();
        ages.sort_unstable_by_key(|&(used, _)| std::cmp::Reverse(used));
        let mut kept_bytes = 0;
        let mut oldest_kept = u64::MAX;
        for (used, cost) in ages {
            if kept_bytes + cost > share / 2 {
                break;
            }
            kept_bytes += cost;
            oldest_kept = used;
        }
        self.entries.retain(|_, entry| entry.used >= oldest_kept);
        self.bytes = kept_bytes;
        Ok(())
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

impl Drop for Cached {
    fn drop(&mut self) {
        self.budget.caches.fetch_sub(1, Ordering::Relaxed);
    }
}

impl KeyedStore for Cached {
    /// Answers what the cache holds from it, then reads the rest from the store in one batch,
    /// caching them.
    fn read_many(
        &mut self,
        keys: &[&[u8]],
        found: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<(), StoreError> {
        let mut missing = std::mem::take(&mut self.missing);
        missing.clear();
        for (i, key) in keys.iter().enumerate() {
            let used = self.tick();
            match self.entries.get_mut(*key) {
                Some(entry) => {
                    entry.used = used;
                    found(i, entry.value.as_deref());
                }
                None => missing.push(i),
            }
        }
        if !missing.is_empty() {
            let wanted: Vec<&[u8]> = missing.iter().map(|&i| keys[i]).collect();
            let (entries, bytes, clock) = (&mut self.entries, &mut self.bytes, &mut self.clock);
            // Reads need not wait for a checkpoint begun: they change nothing, and every key
            // the checkpoint writes is cached until it is written.
            lock(&self.store).read_many(&wanted, &mut |j, value| {
                let i = missing[j];
                found(i, value);
                *clock += 1;
                let key = Key::from_slice(keys[i]);
                let entry = Entry {
                    value: value.map(Value::from_slice),
                    dirty: false,
                    used: *clock,
                };
                *bytes += entry.cost(&key);
                // A key named twice in one read is found missing twice: the second replaces
                // the first, whose cost is taken back.
                match entries.entry(key) {
                    hashbrown::hash_map::Entry::Occupied(mut cached) => {
                        *bytes -= cached.get().cost(cached.key());
                        *cached.get_mut() = entry;
                    }
                    hashbrown::hash_map::Entry::Vacant(vacant) => {
                        vacant.insert(entry);
                    }
                }
            })?;
            self.missing = missing;
            self.make_room()?;
        } else {
            self.missing = missing;
        }
        Ok(())
    }

    fn write(&mut self, writes: &Writes) -> Result<(), StoreError> {
        for (key, value) in writes.iter() {
            let used = self.tick();
            match self.entries.get_key_value_mut(key) {
                Some((key, entry)) => {
                    let before = entry.cost(key);
                    match (value, &mut entry.value) {
                        (Some(value), Some(buffer)) => {
                            buffer.clear();
                            buffer.extend_from_slice(value);
                        }
                        (value, slot) => *slot = value.map(Value::from_slice),
                    }
                    entry.dirty = true;
                    entry.used = used;
                    self.bytes = self.bytes - before + entry.cost(key);
                }
                None => {
                    let key = Key::from_slice(key);
                    let entry = Entry {
                        value: value.map(Value::from_slice),
                        dirty: true,
                        used,
                    };
                    self.bytes += entry.cost(&key);
                    self.entries.insert(key, entry);
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
        lock(&self.store).scan(range, visit)
    }

    fn retain_groups(&mut self, groups: Range<u32>) -> Result<(), StoreError> {
        self.flush()?;
        self.entries.clear();
        self.bytes = 0;
        lock(&self.store).retain_groups(groups)
    }

    fn checkpoint(&mut self, dir: &Path) -> Result<StoreCheckpoint, StoreError> {
        self.flush()?;
        lock(&self.store).checkpoint(dir)
    }

    /// Copies the dirty entries aside (they are clean in the cache after); the store's writes
    /// of them and its checkpoint are left to the pending checkpoint, or to this cache's next
    /// write to the store if that comes first.
    fn begin_checkpoint(&mut self, dir: &Path) -> Result<PendingCheckpoint, StoreError> {
        self.settle()?;
        let mut writes = Writes::new();
        self.take_dirty(&mut writes);
        let deferred = Arc::new(Mutex::new(Deferred::Waiting {
            writes,
            dir: dir.to_path_buf(),
        }));
        self.deferred.push(Arc::clone(&deferred));
        let store = Arc::clone(&self.store);
        Ok(PendingCheckpoint::new(move || {
            let mut deferred = lock(&deferred);
            match std::mem::replace(&mut *deferred, Deferred::Handed) {
                Deferred::Waiting { writes, dir } => Deferred::take(&store, &writes, &dir),
                Deferred::Taken(taken) => taken,
                Deferred::Handed => Err(StoreError::Unexpected(
                    "a checkpoint of a store taken twice".into(),
                )),
            }
        }))
    }
}

/// Stores of another backend, each behind a cache holding a share of `budget`.
pub struct CachedBackend<B> {
    /// The backend of the stores behind the caches.
    pub inner: B,
    /// The memory the caches share.
    pub budget: Arc<CacheBudget>,
}

impl<B: Backend> Backend for CachedBackend<B> {
    fn create(&self, dir: &Path) -> Result<Box<dyn KeyedStore>, StoreError> {
        Ok(Box::new(Cached::new(
            self.inner.create(dir)?,
            Arc::clone(&self.budget),
        )))
    }

    fn open_checkpoint(
        &self,
        checkpoint: &Path,
        dir: &Path,
    ) -> Result<Box<dyn KeyedStore>, StoreError> {
        Ok(Box::new(Cached::new(
            self.inner.open_checkpoint(checkpoint, dir)?,
            Arc::clone(&self.budget),
        )))
    }
}
