//! A task's keyed state as a section of its snapshot: the store its guest reads and writes
//! through the `state_*` imports (`docs/ABI.md` §17), what its checkpoints have stored, and the
//! two halves of a checkpoint of it.
//!
//! Why a type of its own: the imports (`wasm/`), the task loop and its persister (`dataflow/`)
//! and the restore (`runtime/`) each do one thing with a task's store, and this is the one place
//! that knows how those things fit: where the store works on disk, how a guest's request
//! becomes store keys, which files a checkpoint uploads.
//!
//! **A checkpoint** has a synchronous half, at the barrier ([`KeyedState::snapshot`]: the
//! cache's writes applied and the store's own checkpoint taken, hard links on the task's disk)
//! and an asynchronous half, off the task's thread ([`PendingStore::finish`]: the new immutable
//! files uploaded as shared files, the rest read to go inline, the directory kept as a local
//! copy or removed). The task's state file then holds the [`StoreSnapshot`].
//!
//! **Local copies** ([`super::local`]): a task given a folder for them keeps each store
//! checkpoint there once its files are stored, until a later checkpoint completes, so that a
//! restore on this machine links the files instead of reading them back.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use weir_abi::key_group::{KeyGroups, key_group};
use weir_abi::state::{self as wire, RequestError};

use super::local::{self, LocalCopies, RestoredFile};
use super::snapshot::{KeptFile, KeyedSection, Plan, StoreSnapshot, Uploads};
use super::{Backend, KeyedStore, PendingCheckpoint, StoreError, StoreKey, Writes, copy_groups};
use crate::ids::{CheckpointId, TaskId};

/// Why a guest's request to its keyed state failed.
#[derive(Debug, thiserror::Error)]
pub enum KeyedError {
    /// The request is malformed: the guest's failure.
    #[error("its request is malformed: {0}")]
    Request(RequestError),
    /// The store failed: the host's, and the task restarts from its last checkpoint.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A task's keyed state: its store, in a directory of its own.
pub struct KeyedState {
    backend: Arc<dyn Backend + Send + Sync>,
    store: Box<dyn KeyedStore>,
    /// The task's directory: its live store in `store-<n>`, its checkpoints being stored in
    /// `checkpoint-<id>`, a restore being laid out in `restore-<n>`.
    dir: PathBuf,
    /// The `n` of the live store's directory: a restore opens a new one beside it.
    generation: u32,
    /// Where the task keeps local copies of its store's checkpoints ([`super::local`]), if it
    /// does.
    local: Option<PathBuf>,
    /// Which subtask of its operator the task is.
    subtask: u32,
    /// How many key groups the operator's keys fall into.
    max_parallelism: u32,
    /// The key groups the task owns.
    groups: Range<u32>,
    /// What its checkpoints stored; shared with the checkpoints being stored, which plan their
    /// uploads by it off the task's thread.
    uploads: Arc<Mutex<Uploads>>,
    /// Reused between requests, so that a request allocates nothing once these have grown.
    scratch: Scratch,
}

/// The buffers [`KeyedState`] turns a guest's request into store calls with.
#[derive(Debug, Default)]
struct Scratch {
    /// A read's store keys, one after another.
    keys: Vec<u8>,
    /// Where each of them ends in `keys`.
    ends: Vec<usize>,
    /// The values the store found, one after another, in the order it found them.
    values: Vec<u8>,
    /// Per key of a read: where its value is in `values`, `None` when it has none.
    spans: Vec<Option<Range<usize>>>,
    /// One store key.
    key: Vec<u8>,
    /// A write request's writes.
    writes: Writes,
}

impl std::fmt::Debug for KeyedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedState")
            .field("dir", &self.dir)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl KeyedState {
    /// An empty state working in `dir` (created; whatever it held is removed), with stores of
    /// `backend`, for subtask `subtask` of an operator whose keys fall into `groups`.
    pub fn create(
        backend: Arc<dyn Backend + Send + Sync>,
        dir: PathBuf,
        subtask: u32,
        groups: KeyGroups,
    ) -> Result<Self, StoreError> {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| StoreError::io("clear the task's state directory", &dir, e))?;
        }
        let store = backend.create(&dir.join("store-0"))?;
        Ok(KeyedState {
            backend,
            store,
            dir,
            generation: 0,
            local: None,
            subtask,
            max_parallelism: groups.max_parallelism(),
            groups: groups.range(subtask),
            uploads: Arc::default(),
            scratch: Scratch::default(),
        })
    }

    /// The state, keeping a local copy of each of its store's checkpoints in `dir` once its
    /// files are stored ([`super::local`]).
    pub fn keeping_copies_in(mut self, dir: PathBuf) -> Self {
        self.local = Some(dir);
        self
    }

    /// Answers the read request `request` (`weir_abi::state`), appending the result to `out`.
    pub fn get(&mut self, request: &[u8], out: &mut Vec<u8>) -> Result<(), KeyedError> {
        let Scratch {
            keys,
            ends,
            values,
            spans,
            ..
        } = &mut self.scratch;
        keys.clear();
        ends.clear();
        for entry in wire::reads(request) {
            let (state, key) = entry.map_err(KeyedError::Request)?;
            StoreKey::encode(key_group(key, self.max_parallelism), state, key, keys);
            ends.push(keys.len());
        }
        let mut start = 0;
        let store_keys: Vec<&[u8]> = ends
            .iter()
            .map(|&end| {
                let key = &keys[start..end];
                start = end;
                key
            })
            .collect();
        // The store answers in its own order; the result is in the request's.
        values.clear();
        spans.clear();
        spans.resize(store_keys.len(), None);
        self.store.read_many(&store_keys, &mut |i, value| {
            if let Some(value) = value {
                spans[i] = Some(values.len()..values.len() + value.len());
                values.extend_from_slice(value);
            }
        })?;
        for span in spans.iter() {
            wire::put_result(out, span.clone().map(|span| &values[span]));
        }
        Ok(())
    }

    /// Applies the write request `request` (`weir_abi::state`), all of it or, when it is
    /// malformed, none.
    pub fn write(&mut self, request: &[u8]) -> Result<(), KeyedError> {
        let Scratch { key, writes, .. } = &mut self.scratch;
        writes.clear();
        for entry in wire::writes(request) {
            let entry = entry.map_err(KeyedError::Request)?;
            key.clear();
            let group = key_group(entry.key, self.max_parallelism);
            StoreKey::encode(group, entry.state, entry.key, key);
            match entry.value {
                Some(value) => writes.put(key, value),
                None => writes.delete(key),
            }
        }
        if !writes.is_empty() {
            self.store.write(writes)?;
        }
        Ok(())
    }

    /// The synchronous half of checkpoint `id`: the store's checkpoint begun now, at the
    /// barrier ([`KeyedStore::begin_checkpoint`]); [`PendingStore::finish`] takes it and
    /// stores its files. A `self_contained` one (a savepoint) names no shared file: every file
    /// goes inline, and nothing later builds on it.
    pub fn snapshot(
        &mut self,
        id: CheckpointId,
        self_contained: bool,
    ) -> Result<PendingStore, StoreError> {
        let dir = self.dir.join(format!("checkpoint-{}", id.0));
        if dir.exists() {
            // Left by an attempt at the same id that failed before its upload finished.
            std::fs::remove_dir_all(&dir)
                .map_err(|e| StoreError::io("remove an unfinished checkpoint", &dir, e))?;
        }
        // A savepoint's files are all inline, and no restore takes one from a local copy.
        let keep = match &self.local {
            Some(local) if !self_contained => Some(local::checkpoint_dir(local, id)),
            _ => None,
        };
        Ok(PendingStore {
            checkpoint: self.store.begin_checkpoint(&dir)?,
            dir,
            id,
            uploads: (!self_contained).then(|| Arc::clone(&self.uploads)),
            keep,
        })
    }

    /// Checkpoint `id` completed: later checkpoints name its files instead of storing them,
    /// and the local copies of older ones go.
    pub fn completed(&mut self, id: CheckpointId) {
        lock(&self.uploads).completed(id);
        if let Some(local) = &self.local {
            local::remove_older(local, id);
        }
    }

    /// The stored files a checkpoint of the state may still name ([`Uploads::live`]).
    pub fn live_files(&self) -> Vec<KeptFile> {
        lock(&self.uploads).live()
    }

    /// Checkpoint `id` was aborted: its files may be swept, so nothing names them, and its
    /// local copy goes.
    pub fn aborted(&mut self, id: CheckpointId) {
        lock(&self.uploads).aborted(id);
        if let Some(local) = &self.local {
            let _ = std::fs::remove_dir_all(local::checkpoint_dir(local, id));
        }
    }

    /// Replaces the state with the one `section` describes, the kept files of each part from
    /// `fetch(part's subtask, file)`. When the section is this subtask's own checkpoint and
    /// `resumable` (it belongs to this job's own checkpoints), later checkpoints name its kept
    /// files again; otherwise they store everything anew.
    ///
    /// A section split by a rescale has a part of each old subtask that owned some of this
    /// one's key groups: the first is opened and clipped to this subtask's groups (two range
    /// deletions, made on every restore), and the entries of its groups in the others are
    /// copied in.
    pub fn restore(
        &mut self,
        section: &KeyedSection,
        resumable: bool,
        mut fetch: impl FnMut(u32, &KeptFile) -> Result<RestoredFile, StoreError>,
    ) -> Result<(), StoreError> {
        let generation = self.generation + 1;
        let mut store = None;
        for (i, (source, snapshot)) in section.parts.iter().enumerate() {
            let laid_out = self.dir.join(format!("restore-{generation}-{i}"));
            if laid_out.exists() {
                std::fs::remove_dir_all(&laid_out).map_err(|e| {
                    StoreError::io("clear a directory to restore into", &laid_out, e)
                })?;
            }
            snapshot.materialise(&laid_out, |kept| fetch(*source, kept))?;
            let work = match store {
                None => self.dir.join(format!("store-{generation}")),
                Some(_) => self.dir.join(format!("merge-{generation}-{i}")),
            };
            let mut opened = self.backend.open_checkpoint(&laid_out, &work)?;
            let _ = std::fs::remove_dir_all(&laid_out);
            match store.as_mut() {
                None => {
                    // A subtask of the same index may own other groups after a rescale: the
                    // clip is always made (two range deletions).
                    opened.retain_groups(self.groups.clone())?;
                    store = Some(opened);
                }
                Some(into) => {
                    copy_groups(&mut *opened, &mut **into, self.groups.clone(), 64 * 1024)?;
                    drop(opened);
                    let _ = std::fs::remove_dir_all(&work);
                }
            }
        }
        let store = match store {
            Some(store) => store,
            // No part: the empty state (a section of a rescale whose old subtasks owned none
            // of these groups cannot be written, but an empty state is what it would mean).
            None => self
                .backend
                .create(&self.dir.join(format!("store-{generation}")))?,
        };
        let old = std::mem::replace(&mut self.store, store);
        drop(old);
        let _ = std::fs::remove_dir_all(self.dir.join(format!("store-{}", self.generation)));
        self.generation = generation;
        *lock(&self.uploads) = match section.parts.as_slice() {
            [(source, snapshot)] if resumable && *source == self.subtask => {
                Uploads::restored(snapshot)
            }
            _ => Uploads::new(),
        };
        Ok(())
    }
}

impl Drop for KeyedState {
    /// The state lives as long as its task: its directory goes with it. (Its checkpoints are
    /// in the job's checkpoint storage.)
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `mutex`, locked whatever a panicking thread left in it (the uploads' bookkeeping is
/// changed by whole calls).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The asynchronous half of a checkpoint of a task's store: its checkpoint, begun at the
/// barrier, and where the plan of its files comes from.
#[derive(Debug)]
pub struct PendingStore {
    checkpoint: PendingCheckpoint,
    /// Where the store's checkpoint is written.
    dir: PathBuf,
    id: CheckpointId,
    /// What the task's checkpoints stored; `None` for a self-contained checkpoint, which
    /// stores every file inline.
    uploads: Option<Arc<Mutex<Uploads>>>,
    /// Where the checkpoint's directory is kept once stored, as a local copy; `None`: it is
    /// removed.
    keep: Option<PathBuf>,
}

impl PendingStore {
    /// Takes the store's checkpoint and stores it: each new immutable file through
    /// `upload(name, bytes)`, the rest read to go inline; returns what the task's state file
    /// says of the store. The checkpoint's directory is then kept as a local copy, if the task
    /// keeps them, or removed (and removed whenever the checkpoint fails to be stored).
    pub fn finish<E: From<StoreError>>(
        self,
        mut upload: impl FnMut(&str, Vec<u8>) -> Result<(), E>,
    ) -> Result<StoreSnapshot, E> {
        let dir = self.dir;
        let result = (|| {
            let checkpoint = self.checkpoint.take()?;
            let plan = match &self.uploads {
                Some(uploads) => lock(uploads).plan(self.id, &checkpoint),
                None => Plan {
                    upload: Vec::new(),
                    inline: checkpoint.files.iter().map(|f| f.name.clone()).collect(),
                    kept: Vec::new(),
                },
            };
            let read = |name: &str| {
                let path = dir.join(name);
                std::fs::read(&path)
                    .map_err(|e| StoreError::io("read a checkpoint's file", &path, e))
            };
            for name in &plan.upload {
                upload(name, read(name)?)?;
            }
            let inline = plan
                .inline
                .iter()
                .map(|name| Ok((name.clone(), read(name)?)))
                .collect::<Result<Vec<_>, StoreError>>()?;
            Ok(StoreSnapshot {
                kept: plan.kept,
                inline,
            })
        })();
        match (&result, &self.keep) {
            (Ok(_), Some(keep)) => keep_copy(&dir, keep),
            _ => {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        result
    }
}

/// Moves the stored checkpoint in `dir` to `keep`, a local copy; a copy that cannot be kept is
/// removed (a restore then reads the files from the checkpoint storage).
fn keep_copy(dir: &Path, keep: &Path) {
    let kept = (|| {
        if keep.exists() {
            // Left by an earlier attempt at a checkpoint of the same id.
            std::fs::remove_dir_all(keep)?;
        }
        if let Some(parent) = keep.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::rename(dir, keep)
    })();
    if let Err(e) = kept {
        tracing::warn!(
            "cannot keep a local copy of a state checkpoint in {}: {e}; a restore will read \
             its files from the checkpoint storage",
            keep.display()
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// The keyed state of one process's tasks: one backend within one memory budget, and one
/// directory the tasks' stores work in, removed when the process is done with it.
pub struct KeyedStores {
    backend: Arc<dyn Backend + Send + Sync>,
    dir: PathBuf,
    /// Where the tasks keep local copies of their checkpoints, if they do.
    local: Option<LocalCopies>,
}

impl std::fmt::Debug for KeyedStores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedStores")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl KeyedStores {
    /// The part of a `[state] memory` of `memory` bytes that the hot-key caches in front of
    /// the stores share ([`super::cache`]): a quarter. RocksDB's block cache and write buffers
    /// have the rest. A keyed count's working set of 100 000 keys takes about 10 MB of cache
    /// (docs/STATE.md); the default budget gives the caches 128 MiB.
    pub fn cache_bytes(memory: usize) -> usize {
        memory / 4
    }

    /// RocksDB stores within `memory` bytes, each behind a cache of hot keys, working in `dir`
    /// (created; what it held is removed).
    pub fn rocksdb(memory: usize, dir: PathBuf) -> Result<Self, StoreError> {
        let caches = Self::cache_bytes(memory);
        let backend = super::cache::CachedBackend {
            inner: super::rocks::RocksBackend::new(super::rocks::StoreBudget::new(memory - caches)),
            budget: super::cache::CacheBudget::new(caches),
        };
        Self::with_backend(Arc::new(backend), dir)
    }

    /// Stores of `backend`, working in `dir` (created; what it held is removed).
    pub fn with_backend(
        backend: Arc<dyn Backend + Send + Sync>,
        dir: PathBuf,
    ) -> Result<Self, StoreError> {
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| StoreError::io("clear the state directory", &dir, e))?;
        }
        std::fs::create_dir_all(&dir)
            .map_err(|e| StoreError::io("create the state directory", &dir, e))?;
        Ok(KeyedStores {
            backend,
            dir,
            local: None,
        })
    }

    /// The stores, their tasks keeping local copies of their checkpoints under `root`
    /// ([`super::local`]), which a restore of this process takes files from through a folder
    /// of its own working directory.
    pub fn keeping_copies_in(mut self, root: PathBuf) -> Self {
        self.local = Some(LocalCopies::new(root, self.dir.join("staged")));
        self
    }

    /// The local copies of the tasks' checkpoints, if they keep them.
    pub fn local_copies(&self) -> Option<&LocalCopies> {
        self.local.as_ref()
    }

    /// An empty keyed state for subtask `subtask` of `vertex`, whose keys fall into `groups`.
    pub fn create(
        &self,
        vertex: &str,
        subtask: u32,
        groups: KeyGroups,
    ) -> Result<KeyedState, StoreError> {
        let state = KeyedState::create(
            Arc::clone(&self.backend),
            self.dir.join(format!("{vertex}-{subtask}")),
            subtask,
            groups,
        )?;
        Ok(match &self.local {
            Some(local) => state.keeping_copies_in(local.task_dir(&TaskId::new(vertex, subtask))),
            None => state,
        })
    }
}

impl Drop for KeyedStores {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
