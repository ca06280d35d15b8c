//! Keyed state kept on the host: the store a task keeps its operator's keyed state in, outside
//! the guest's memory, so that state is not capped by a guest's linear memory, is checkpointed
//! by the files that changed rather than whole, and is split by key group without the guest's
//! help (docs/STATE.md).
//!
//! Why a module of its own: every language reaches keyed state the same way (host imports, one
//! batched call), and the task loop, the checkpoint and a rescale all reach the store through
//! one trait, [`KeyedStore`]. Two stores implement it, and one conformance suite (`tests.rs`)
//! holds them, alone and each behind [`cache::Cached`] (a write-back cache of hot keys), to
//! the same contract:
//! - [`memory::MemoryStore`]: a sorted map in the host's memory, checkpointed whole; the test
//!   double, and the reference the other is checked against;
//! - [`rocks::RocksStore`]: an embedded RocksDB instance per task, all of a process's instances
//!   sharing one memory budget ([`rocks::StoreBudget`]: the block cache, with the write
//!   buffers charged to it), its own log off (the checkpoint is the durability point), a
//!   checkpoint being hard links to the immutable table files of the moment.
//!
//! **Keys.** A store key is the record key's key group (2 bytes, big-endian), then the declared
//! state it belongs to (2 bytes), then the key ([`StoreKey`]). With the key group first, the
//! entries of a range of key groups are one range of store keys: a rescale keeps a range and
//! deletes the rest in two range deletions, whatever the states.
//!
//! **Checkpoints.** [`KeyedStore::checkpoint`] writes a directory that a store of the same kind
//! opens again ([`Backend::open_checkpoint`]) and names its files, each marked *immutable* when
//! a file of that name in this store's lineage always holds the same bytes (RocksDB's table
//! files): those are the ones an incremental checkpoint uploads once and names again in later
//! checkpoints (`checkpoint/shared.rs`).

pub mod cache;
pub mod local;
pub mod memory;
pub mod rocks;
pub mod section;
pub mod snapshot;
#[cfg(test)]
mod tests;

use std::ops::Range;
use std::path::{Path, PathBuf};

/// Which of an operator's declared states an entry belongs to: its index in the declaration.
pub type StateId = u16;

/// The layout of a store key: `key group (u16 BE) ‖ state (u16 BE) ‖ key`.
pub struct StoreKey;

impl StoreKey {
    /// The bytes before the key.
    pub const PREFIX: usize = 4;

    /// Appends the store key of `key` in key group `group` and state `state` to `out`.
    ///
    /// Key groups are below `weir_abi::key_group::MAX_MAX_PARALLELISM` (2^15), so a group fits
    /// its two bytes.
    pub fn encode(group: u32, state: StateId, key: &[u8], out: &mut Vec<u8>) {
        debug_assert!(
            group <= u32::from(u16::MAX),
            "key group {group} out of range"
        );
        out.extend_from_slice(&(group as u16).to_be_bytes());
        out.extend_from_slice(&state.to_be_bytes());
        out.extend_from_slice(key);
    }

    /// The store key of `key`, as a new vector.
    pub fn to_vec(group: u32, state: StateId, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(Self::PREFIX + key.len());
        Self::encode(group, state, key, &mut out);
        out
    }

    /// The key group, state and key of a store key; `None` for bytes shorter than the prefix.
    pub fn decode(bytes: &[u8]) -> Option<(u32, StateId, &[u8])> {
        let (prefix, key) = bytes.split_at_checked(Self::PREFIX)?;
        let group = u16::from_be_bytes([prefix[0], prefix[1]]);
        let state = u16::from_be_bytes([prefix[2], prefix[3]]);
        Some((u32::from(group), state, key))
    }

    /// The first store key of key group `group`: the store keys of the groups in `a..b` are
    /// those from `group_start(a)` (inclusive) to `group_start(b)` (exclusive).
    /// Key groups and the ends of their ranges are at most 2^15, so they fit two bytes.
    pub fn group_start(group: u32) -> [u8; 2] {
        debug_assert!(
            group <= u32::from(u16::MAX),
            "key group {group} out of range"
        );
        (group as u16).to_be_bytes()
    }
}

/// Writes to apply to a store together, in order (a later write of a key wins).
///
/// The keys and values are copied into one buffer: a batch of writes costs no allocation per
/// entry, and a `Writes` kept and [cleared](Writes::clear) costs none at all once grown.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Writes {
    bytes: Vec<u8>,
    /// Per write: where its key starts in `bytes`, its length, and its value's length (the
    /// value follows the key), `None` for a deletion.
    entries: Vec<(usize, usize, Option<usize>)>,
}

impl Writes {
    /// No writes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets store key `key` to `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.entries
            .push((self.bytes.len(), key.len(), Some(value.len())));
        self.bytes.extend_from_slice(key);
        self.bytes.extend_from_slice(value);
    }

    /// Deletes store key `key`.
    pub fn delete(&mut self, key: &[u8]) {
        self.entries.push((self.bytes.len(), key.len(), None));
        self.bytes.extend_from_slice(key);
    }

    /// Removes every write, keeping the memory for the next.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.entries.clear();
    }

    /// How many writes there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The writes, in order: a key and its new value, `None` for a deletion.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], Option<&[u8]>)> {
        self.entries.iter().map(|&(start, key_len, value_len)| {
            let value_start = start + key_len;
            (
                &self.bytes[start..value_start],
                value_len.map(|len| &self.bytes[value_start..value_start + len]),
            )
        })
    }
}

/// One file of a store's checkpoint directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointFile {
    /// Its name in the directory.
    pub name: String,
    /// Its length in bytes.
    pub len: u64,
    /// Whether a file of this name, in this store or any store opened from its checkpoints,
    /// always holds these bytes: then a checkpoint that names it again need not store it again.
    pub immutable: bool,
}

/// A store's checkpoint: a directory a store of the same backend opens again, and its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreCheckpoint {
    /// Where the files are.
    pub dir: PathBuf,
    /// Every file of it, sorted by name.
    pub files: Vec<CheckpointFile>,
}

impl StoreCheckpoint {
    /// The files in `dir`, each marked immutable when `immutable(name)` says so, sorted by
    /// name.
    fn list(dir: &Path, immutable: impl Fn(&str) -> bool) -> Result<Self, StoreError> {
        let failed = |e: std::io::Error| StoreError::io("list the checkpoint directory", dir, e);
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(failed)? {
            let entry = entry.map_err(failed)?;
            let meta = entry.metadata().map_err(failed)?;
            if !meta.is_file() {
                continue;
            }
            let name = entry.file_name().into_string().map_err(|name| {
                StoreError::Unexpected(format!(
                    "the checkpoint directory {} holds a file whose name is not UTF-8: {name:?}",
                    dir.display()
                ))
            })?;
            files.push(CheckpointFile {
                immutable: immutable(&name),
                name,
                len: meta.len(),
            });
        }
        files.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(StoreCheckpoint {
            dir: dir.to_path_buf(),
            files,
        })
    }

    /// The bytes of all its files.
    pub fn total_len(&self) -> u64 {
        self.files.iter().map(|f| f.len).sum()
    }
}

/// Why a store could not do what it was asked. Each message says what failed and what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file or directory of the store could not be read or written.
    #[error(
        "the state store could not {action} at {path}: {source}; check that the state \
         directory is writable and its disk has room"
    )]
    Io {
        /// What the store was doing.
        action: &'static str,
        /// Where.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// The embedded store refused an operation.
    #[error(
        "the state store failed to {action}: {message}; if its directory was changed by \
         hand or its disk is failing, restore from a checkpoint"
    )]
    Backend {
        /// What the store was doing.
        action: &'static str,
        /// What the embedded store said.
        message: String,
    },
    /// A checkpoint directory holds what this backend does not write.
    #[error(
        "the state checkpoint at {path} is not one this backend wrote: {why}; restore it with \
         the state backend that wrote it, or restore an earlier checkpoint"
    )]
    NotACheckpoint {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Something the store's own invariants rule out.
    #[error("the state store found {0}: this is a bug in Weir; please report it")]
    Unexpected(String),
}

impl StoreError {
    fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        StoreError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One task's keyed state: the entries of the store keys ([`StoreKey`]) of its key groups.
pub trait KeyedStore: Send {
    /// Calls `found(i, value)` with the value of `keys[i]`, once for each `i`, in no particular
    /// order (a store answers what it holds in memory before what it reads). The value is
    /// borrowed: a caller that keeps it copies it, and one that does not pays no copy.
    fn read_many(
        &mut self,
        keys: &[&[u8]],
        found: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<(), StoreError>;

    /// Applies `writes`, all or none.
    fn write(&mut self, writes: &Writes) -> Result<(), StoreError>;

    /// Calls `visit` with each entry whose store key is in `range`, in key order, until it
    /// returns `false`.
    fn scan(
        &mut self,
        range: Range<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError>;

    /// Deletes every entry outside key groups `groups`: what a task keeps of a store opened
    /// from the checkpoint of a subtask that owned other groups too.
    fn retain_groups(&mut self, groups: Range<u32>) -> Result<(), StoreError>;

    /// Writes a checkpoint of the store as it is now into `dir`, which must not exist yet.
    /// The store goes on changing; the checkpoint does not.
    fn checkpoint(&mut self, dir: &Path) -> Result<StoreCheckpoint, StoreError>;

    /// Begins a checkpoint of the store as it is now into `dir`, as [`KeyedStore::checkpoint`],
    /// leaving what it can of the work to [`PendingCheckpoint::take`], which may run on another
    /// thread while this store goes on. A store that cannot split the work does it all here.
    fn begin_checkpoint(&mut self, dir: &Path) -> Result<PendingCheckpoint, StoreError> {
        let checkpoint = self.checkpoint(dir)?;
        Ok(PendingCheckpoint::taken(checkpoint))
    }

    /// The value of each of `keys`, in order, copied ([`KeyedStore::read_many`] borrows them).
    fn get_many(&mut self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        let mut values = vec![None; keys.len()];
        self.read_many(keys, &mut |i, value| values[i] = value.map(<[u8]>::to_vec))?;
        Ok(values)
    }

    /// The value of `key`.
    fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Ok(self.get_many(&[key])?.pop().flatten())
    }
}

/// A checkpoint of a store begun at a barrier ([`KeyedStore::begin_checkpoint`]) and not yet
/// written: the rest of its work, to run where it does not hold up the task.
#[must_use = "a pending checkpoint is taken by `take`"]
pub struct PendingCheckpoint {
    take: Box<dyn FnOnce() -> Result<StoreCheckpoint, StoreError> + Send>,
}

impl PendingCheckpoint {
    /// A checkpoint whose work is `take`.
    pub fn new(
        take: impl FnOnce() -> Result<StoreCheckpoint, StoreError> + Send + 'static,
    ) -> Self {
        PendingCheckpoint {
            take: Box::new(take),
        }
    }

    /// A checkpoint already written.
    pub fn taken(checkpoint: StoreCheckpoint) -> Self {
        Self::new(move || Ok(checkpoint))
    }

    /// Does the rest of the work: the checkpoint, written.
    pub fn take(self) -> Result<StoreCheckpoint, StoreError> {
        (self.take)()
    }
}

impl std::fmt::Debug for PendingCheckpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingCheckpoint").finish_non_exhaustive()
    }
}

/// A kind of store: how a task's store is created, and opened from a checkpoint.
pub trait Backend {
    /// A new, empty store working in `dir` (created if missing; it must be empty).
    fn create(&self, dir: &Path) -> Result<Box<dyn KeyedStore>, StoreError>;

    /// A store working in `dir` (as for [`Backend::create`]) that starts as the checkpoint in
    /// `checkpoint` holds it. The checkpoint's directory is left as it is.
    fn open_checkpoint(
        &self,
        checkpoint: &Path,
        dir: &Path,
    ) -> Result<Box<dyn KeyedStore>, StoreError>;
}

/// Copies the entries of key groups `groups` from `from` into `into`, `batch` writes at a
/// time: how a subtask's store takes in the part of another old subtask's store it now owns
/// when a vertex is rescaled.
pub fn copy_groups(
    from: &mut dyn KeyedStore,
    into: &mut dyn KeyedStore,
    groups: Range<u32>,
    batch: usize,
) -> Result<u64, StoreError> {
    let start = StoreKey::group_start(groups.start);
    let end = StoreKey::group_start(groups.end);
    let mut writes = Writes::new();
    let mut copied = 0u64;
    let mut failed = None;
    from.scan(start.as_slice()..end.as_slice(), &mut |key, value| {
        writes.put(key, value);
        copied += 1;
        if writes.len() >= batch {
            if let Err(e) = into.write(&writes) {
                failed = Some(e);
                return false;
            }
            writes.clear();
        }
        true
    })?;
    if let Some(e) = failed {
        return Err(e);
    }
    if !writes.is_empty() {
        into.write(&writes)?;
    }
    Ok(copied)
}

/// Makes `dir` an empty directory for a store to work in, or says why it cannot.
fn prepare_dir(dir: &Path) -> Result<(), StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| StoreError::io("create its directory", dir, e))?;
    let mut entries =
        std::fs::read_dir(dir).map_err(|e| StoreError::io("read its directory", dir, e))?;
    if entries.next().is_some() {
        return Err(StoreError::Unexpected(format!(
            "a store's working directory {} that is not empty",
            dir.display()
        )));
    }
    Ok(())
}
