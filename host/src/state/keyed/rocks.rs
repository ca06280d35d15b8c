//! The keyed store for jobs: an embedded RocksDB instance per task.
//!
//! Why RocksDB: it is what Flink (its RocksDB and ForSt backends) and Kafka Streams keep keyed
//! state in, and it has everything an incremental, rescalable, larger-than-memory store needs
//! without our writing it: a checkpoint that hard-links the immutable table files of the
//! moment, batched point reads, range deletions, and one block cache that many instances share.
//! docs/STATE.md compares it with the pure-Rust stores and says what its build costs.
//!
//! How it is set up, and why:
//! - **One memory budget per process** ([`StoreBudget`]): every instance's block cache is the
//!   budget's one LRU cache, and its write buffers (memtables) are charged to that cache, so
//!   the tasks of a process together stay within the budget whatever their number, as Flink's
//!   managed memory does per slot. Index and filter blocks live in the cache too.
//! - **No write-ahead log.** The checkpoint is the durability point: what was written after the
//!   last completed checkpoint is replayed from the sources after a failure, so a log would be
//!   written for nothing. A checkpoint therefore flushes the memtables first.
//! - **One column family**: the key layout ([`super::StoreKey`]) puts the key group first, so
//!   a rescale's range deletions cover every state at once.
//! - **Bloom filters** on the table files: most reads are point reads of keys a batch names,
//!   many of them new.

use std::ops::Range;
use std::path::{Path, PathBuf};

use rocksdb::checkpoint::Checkpoint;
use rocksdb::{
    BlockBasedIndexType, BlockBasedOptions, Cache, ColumnFamilyDescriptor, DB, DBCompressionType,
    DEFAULT_COLUMN_FAMILY_NAME, LogLevel, Options, ReadOptions, WriteBatch, WriteBufferManager,
    WriteOptions,
};

use super::{Backend, KeyedStore, StoreCheckpoint, StoreError, StoreKey, Writes, prepare_dir};

/// The memory all of a process's stores share: a block cache, with their write buffers
/// charged to it.
#[derive(Clone)]
pub struct StoreBudget {
    bytes: usize,
    cache: Cache,
    write_buffers: WriteBufferManager,
}

impl StoreBudget {
    /// The share of the budget the write buffers may take before the largest is flushed: half,
    /// as Flink gives them by default, so reads keep a cache of their own.
    const WRITE_BUFFER_SHARE: f64 = 0.5;

    /// A budget of `bytes` for every store opened with it.
    pub fn new(bytes: usize) -> Self {
        let cache = Cache::new_lru_cache(bytes);
        let write_buffers = WriteBufferManager::new_write_buffer_manager_with_cache(
            (bytes as f64 * Self::WRITE_BUFFER_SHARE) as usize,
            false,
            cache.clone(),
        );
        StoreBudget {
            bytes,
            cache,
            write_buffers,
        }
    }

    /// The budget, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The options of a store opened within this budget.
    fn options(&self) -> Options {
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&self.cache);
        table.set_cache_index_and_filter_blocks(true);
        table.set_pin_l0_filter_and_index_blocks_in_cache(true);
        table.set_bloom_filter(10.0, false);
        // Index and filter in partitions of a few KiB, a small top level pinned: a table file
        // of millions of keys has a filter of megabytes, larger than a shard of the cache, which
        // was then read from its file again at every lookup (profiled: a keyed count over 10
        // million keys ran 12 times slower than over 1 million, copying filter blocks).
        table.set_index_type(BlockBasedIndexType::TwoLevelIndexSearch);
        table.set_partition_filters(true);
        table.set_metadata_block_size(4096);
        table.set_pin_top_level_index_and_filter(true);
        let mut options = Options::default();
        options.create_if_missing(true);
        options.set_block_based_table_factory(&table);
        options.set_write_buffer_manager(&self.write_buffers);
        // A memtable no larger than a quarter of the write buffers' share, so that a task's
        // store flushes before it alone holds the share (RocksDB's default is 64 MiB).
        let memtable = ((self.bytes as f64 * Self::WRITE_BUFFER_SHARE) as usize / 4).max(1 << 20);
        options.set_write_buffer_size(memtable);
        options.set_compression_type(DBCompressionType::Lz4);
        // RocksDB's own log of what it does: warnings only, one file, not in the checkpoint.
        options.set_log_level(LogLevel::Warn);
        options.set_keep_log_file_num(1);
        options
    }
}

impl std::fmt::Debug for StoreBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreBudget")
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

/// A task's keyed store in an embedded RocksDB instance.
pub struct RocksStore {
    db: DB,
    no_log: WriteOptions,
    dir: PathBuf,
}

impl RocksStore {
    /// Opens (creating it if needed) the instance in `dir` within `budget`.
    fn open(budget: &StoreBudget, dir: &Path) -> Result<Self, StoreError> {
        let options = budget.options();
        // The default column family named, with the same options, so that it has a handle:
        // the batched read takes one.
        let default = ColumnFamilyDescriptor::new(DEFAULT_COLUMN_FAMILY_NAME, options.clone());
        let db =
            DB::open_cf_descriptors(&options, dir, [default]).map_err(|e| backend("open", e))?;
        let mut no_log = WriteOptions::default();
        no_log.disable_wal(true);
        Ok(RocksStore {
            db,
            no_log,
            dir: dir.to_path_buf(),
        })
    }

    /// Whether the store holds any key in `range`.
    fn holds_any(&mut self, range: Range<&[u8]>) -> Result<bool, StoreError> {
        let mut any = false;
        self.scan(range, &mut |_, _| {
            any = true;
            false
        })?;
        Ok(any)
    }

    /// Where the instance works.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Compacts the whole store and waits for it: a settled store, whose next checkpoints
    /// differ only by what is written after (for measurements, and tests of what a checkpoint
    /// stores). A job never needs it: the store compacts in the background.
    pub fn compact(&mut self) {
        self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
    }

    /// Whether a file of a checkpoint keeps its bytes under its name: RocksDB's table and blob
    /// files are written once, numbered from a counter the checkpoint's manifest carries on, and
    /// never changed. The manifest, `CURRENT` and the options file are rewritten.
    fn is_immutable(name: &str) -> bool {
        name.ends_with(".sst") || name.ends_with(".blob")
    }

    /// Writes `writes` as one batch, without the log.
    fn apply(&self, batch: WriteBatch) -> Result<(), StoreError> {
        self.db
            .write_opt(batch, &self.no_log)
            .map_err(|e| backend("write", e))
    }
}

/// A store error from RocksDB's.
fn backend(action: &'static str, e: rocksdb::Error) -> StoreError {
    StoreError::Backend {
        action,
        message: e.into_string(),
    }
}

impl KeyedStore for RocksStore {
    fn read_many(
        &mut self,
        keys: &[&[u8]],
        found: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<(), StoreError> {
        // The batched read, its values pinned in the block cache or memtable rather than
        // copied out.
        let default = self
            .db
            .cf_handle(DEFAULT_COLUMN_FAMILY_NAME)
            .ok_or_else(|| {
                StoreError::Unexpected(
                    "a RocksDB instance without its default column family".into(),
                )
            })?;
        let values = self.db.batched_multi_get_cf(default, keys, false);
        for (i, value) in values.into_iter().enumerate() {
            let value = value.map_err(|e| backend("read", e))?;
            found(i, value.as_deref());
        }
        Ok(())
    }

    fn write(&mut self, writes: &Writes) -> Result<(), StoreError> {
        let mut batch = WriteBatch::default();
        for (key, value) in writes.iter() {
            match value {
                Some(value) => batch.put(key, value),
                None => batch.delete(key),
            }
        }
        self.apply(batch)
    }

    fn scan(
        &mut self,
        range: Range<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        // An empty range needs no test of its own: the first key at or after its start is at
        // or past its end, the upper bound.
        let mut read = ReadOptions::default();
        read.set_iterate_upper_bound(range.end);
        // A scan (a rescale's copy, a dump) reads every block once: keep the cache for the keys
        // the job reads again.
        read.fill_cache(false);
        let mut entries = self.db.raw_iterator_opt(read);
        entries.seek(range.start);
        while let (Some(key), Some(value)) = (entries.key(), entries.value()) {
            if !visit(key, value) {
                return Ok(());
            }
            entries.next();
        }
        entries.status().map_err(|e| backend("scan", e))
    }

    fn retain_groups(&mut self, groups: Range<u32>) -> Result<(), StoreError> {
        let start = StoreKey::group_start(groups.start);
        let end = StoreKey::group_start(groups.end);
        // Every store key starts with a key group below 2^15, so below 0xff.
        let past_all: &[u8] = &[0xff];
        let (below, above) = (&[][..]..&start[..], &end[..]..past_all);
        // A restore without a rescale finds nothing outside its groups: nothing to delete, and
        // no compaction, which would rewrite the whole store (the flushed tombstones span the
        // whole key space: 7.5 s of a 10-million-key restore). Two seeks tell.
        if !self.holds_any(below.clone())? && !self.holds_any(above.clone())? {
            return Ok(());
        }
        let mut batch = WriteBatch::default();
        batch.delete_range(below.start, below.end);
        batch.delete_range(above.start, above.end);
        self.apply(batch)?;
        // Range deletions hide the entries; compacting the two ranges drops their bytes, so a
        // rescaled task's first checkpoint does not carry the other tasks' state along.
        self.db.compact_range(None::<&[u8]>, Some(&start[..]));
        self.db.compact_range(Some(&end[..]), None::<&[u8]>);
        Ok(())
    }

    fn checkpoint(&mut self, dir: &Path) -> Result<StoreCheckpoint, StoreError> {
        // Without a log, what is only in the memtables is in no file. RocksDB's checkpoint
        // flushes them itself when asked to at any log size (the crate asks so); flushing here
        // says so and does not depend on it.
        self.db.flush().map_err(|e| backend("flush", e))?;
        Checkpoint::new(&self.db)
            .and_then(|checkpoint| checkpoint.create_checkpoint(dir))
            .map_err(|e| backend("create a checkpoint", e))?;
        StoreCheckpoint::list(dir, Self::is_immutable)
    }
}

/// The backend of [`RocksStore`]s, all within one [`StoreBudget`].
#[derive(Debug, Clone)]
pub struct RocksBackend {
    budget: StoreBudget,
}

impl RocksBackend {
    /// Stores within `budget`.
    pub fn new(budget: StoreBudget) -> Self {
        RocksBackend { budget }
    }

    /// A store in `dir`, concretely (for tests and tools that look at the instance).
    pub fn create_store(&self, dir: &Path) -> Result<RocksStore, StoreError> {
        prepare_dir(dir)?;
        RocksStore::open(&self.budget, dir)
    }
}

impl Backend for RocksBackend {
    fn create(&self, dir: &Path) -> Result<Box<dyn KeyedStore>, StoreError> {
        Ok(Box::new(self.create_store(dir)?))
    }

    fn open_checkpoint(
        &self,
        checkpoint: &Path,
        dir: &Path,
    ) -> Result<Box<dyn KeyedStore>, StoreError> {
        prepare_dir(dir)?;
        let files = StoreCheckpoint::list(checkpoint, RocksStore::is_immutable)?;
        if !files.files.iter().any(|f| f.name == "CURRENT") {
            return Err(StoreError::NotACheckpoint {
                path: checkpoint.to_path_buf(),
                why: "it has no CURRENT file".into(),
            });
        }
        for file in &files.files {
            let from = checkpoint.join(&file.name);
            let to = dir.join(&file.name);
            // The immutable files are linked (the instance only ever deletes them); the rest
            // are copied, since the instance may rewrite them in place.
            let linked = file.immutable && std::fs::hard_link(&from, &to).is_ok();
            if !linked {
                std::fs::copy(&from, &to)
                    .map_err(|e| StoreError::io("copy a checkpoint's file", &from, e))?;
            }
        }
        Ok(Box::new(RocksStore::open(&self.budget, dir)?))
    }
}
