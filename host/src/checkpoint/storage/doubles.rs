//! The storage doubles: [`MemoryStorage`] (checkpoints in memory) and
//! [`FaultyStorage`] (another storage with faults injected on chosen writes and
//! removals), over the same [`FileStore`] rules as the real [`LocalStorage`].
//!
//! Why a module of its own: they exist for tests only. They are built into the
//! host's unit tests and, through the cargo feature `test-hooks`, into the test
//! crates; the release `weir` has none of them.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::*;
use crate::checkpoint::layout::HISTORY_FILE;

/// An in-memory file tree: files by path, and explicit directories.
#[derive(Debug, Default)]
struct Tree {
    files: BTreeMap<PathBuf, Vec<u8>>,
    dirs: BTreeSet<PathBuf>,
}

/// A shared in-memory file tree; clones see the same files.
#[derive(Debug, Clone, Default)]
pub struct MemoryFiles(Arc<Mutex<Tree>>);

fn not_found() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "no such file or directory")
}

impl MemoryFiles {
    fn lock(&self) -> MutexGuard<'_, Tree> {
        // A panic in a test thread must not hide the files from the others.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn check_parent(tree: &Tree, path: &Path) -> Result<(), IoError> {
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() && !tree.dirs.contains(parent) => {
                Err(IoError::new("create", path, not_found()))
            }
            _ => Ok(()),
        }
    }
}

impl Files for MemoryFiles {
    fn read(&self, path: &Path) -> Result<Vec<u8>, IoError> {
        self.lock()
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| IoError::new("read", path, not_found()))
    }

    fn write(&self, path: &Path, bytes: &[u8], overwrite: Overwrite) -> Result<(), IoError> {
        let mut tree = self.lock();
        Self::check_parent(&tree, path)?;
        if overwrite == Overwrite::Refuse && tree.files.contains_key(path) {
            let e = io::Error::new(io::ErrorKind::AlreadyExists, "file exists");
            return Err(IoError::new("create", path, e));
        }
        tree.files.insert(path.to_owned(), bytes.to_vec());
        Ok(())
    }

    fn write_raw(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
        self.write(path, bytes, Overwrite::Replace)
    }

    fn create_dir(&self, dir: &Path) -> Result<(), IoError> {
        let mut tree = self.lock();
        for ancestor in dir.ancestors().filter(|a| !a.as_os_str().is_empty()) {
            tree.dirs.insert(ancestor.to_owned());
        }
        Ok(())
    }

    fn entry(&self, path: &Path) -> Option<Entry> {
        let tree = self.lock();
        if tree.files.contains_key(path) {
            Some(Entry::File)
        } else if tree.dirs.contains(path) {
            Some(Entry::Dir)
        } else {
            None
        }
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<(String, Entry)>, IoError> {
        let tree = self.lock();
        let children = |paths: &mut dyn Iterator<Item = &PathBuf>, kind| {
            paths
                .filter(|p| p.parent() == Some(dir))
                .filter_map(|p| Some((p.file_name()?.to_str()?.to_owned(), kind)))
                .collect::<Vec<_>>()
        };
        let mut out = children(&mut tree.files.keys(), Entry::File);
        out.extend(children(&mut tree.dirs.iter(), Entry::Dir));
        out.sort();
        Ok(out)
    }

    fn file_sizes(&self, dir: &Path) -> Result<Vec<(String, u64)>, IoError> {
        let tree = self.lock();
        let mut out: Vec<(String, u64)> = tree
            .files
            .iter()
            .filter(|(p, _)| p.parent() == Some(dir))
            .filter_map(|(p, bytes)| {
                Some((p.file_name()?.to_str()?.to_owned(), bytes.len() as u64))
            })
            .collect();
        out.sort();
        Ok(out)
    }

    fn remove_file(&self, path: &Path) -> Result<(), IoError> {
        match self.lock().files.remove(path) {
            Some(_) => Ok(()),
            None => Err(IoError::new("remove", path, not_found())),
        }
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        let mut tree = self.lock();
        if !tree.dirs.contains(dir) {
            return Err(IoError::new("remove directory", dir, not_found()));
        }
        tree.files.retain(|p, _| !p.starts_with(dir));
        tree.dirs.retain(|p| !p.starts_with(dir));
        Ok(())
    }

    fn sync_dir(&self, _dir: &Path) -> Result<(), IoError> {
        Ok(())
    }
}

/// A fault to inject on a chosen write (see [`FaultyStorage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The write fails with an I/O error of this kind; nothing is written.
    /// The kinds a disk really produces carry the operating system's own
    /// message, at the step where the system reports them, so the decline a
    /// test sees reads as the real one would:
    ///
    /// - [`StorageFull`](io::ErrorKind::StorageFull): `cannot write <file>.tmp:
    ///   No space left on device (os error 28)`;
    /// - [`PermissionDenied`](io::ErrorKind::PermissionDenied) and
    ///   [`ReadOnlyFilesystem`](io::ErrorKind::ReadOnlyFilesystem): `cannot
    ///   create <file>.tmp: Permission denied (os error 13)` / `Read-only file
    ///   system (os error 30)`.
    ///
    /// Any other kind gives `injected fault on write <n>`.
    Fail(io::ErrorKind),
    /// The process "dies" during the write: the first half of the bytes is
    /// left in the `.tmp` file, the final name is not created, and the
    /// write returns an I/O error (the caller is expected to stop, as a
    /// dead process would).
    CrashBeforeRename,
}

impl Fault {
    /// The error a failing write of `path` (write number `write`) reports.
    fn error(kind: io::ErrorKind, path: &Path, write: usize) -> IoError {
        let tmp = CheckpointLayout::temp_file(path);
        match os_error(kind) {
            // Space runs out when the bytes are written; access is refused
            // when the file is created.
            Some(e) if kind == io::ErrorKind::StorageFull => IoError::new("write", tmp, e),
            Some(e) => IoError::new("create", tmp, e),
            None => IoError::new(
                "write",
                path,
                io::Error::new(kind, format!("injected fault on write {write}")),
            ),
        }
    }
}

/// The operating system's error for the kinds a disk produces, so its
/// message is the one a real failure shows.
fn os_error(kind: io::ErrorKind) -> Option<io::Error> {
    // POSIX numbers, the same on Linux and the BSDs (macOS included).
    let errno = match kind {
        io::ErrorKind::StorageFull => 28,        // ENOSPC
        io::ErrorKind::PermissionDenied => 13,   // EACCES
        io::ErrorKind::ReadOnlyFilesystem => 30, // EROFS
        _ => return None,
    };
    if cfg!(unix) {
        Some(io::Error::from_raw_os_error(errno))
    } else {
        Some(io::Error::new(kind, kind.to_string()))
    }
}

/// Writes counted so far and the faults planned.
#[derive(Debug, Default)]
struct FaultPlan {
    /// Writes attempted so far (state and metadata).
    writes: usize,
    /// Metadata writes attempted so far.
    metadata_writes: usize,
    /// Faults by 1-based write number.
    planned: BTreeMap<usize, Fault>,
    /// Faults by 1-based metadata write number.
    planned_metadata: BTreeMap<usize, Fault>,
    /// Every write fails with this until healed.
    broken: Option<io::ErrorKind>,
    /// Removals (of a file or a directory tree) attempted so far.
    removals: usize,
    /// Errors by 1-based removal number.
    planned_removals: BTreeMap<usize, io::ErrorKind>,
}

impl FaultPlan {
    /// Counts a write of `path` and takes the fault planned for it, if any.
    fn next(&mut self, path: &Path) -> (usize, Option<Fault>) {
        if path.file_name().is_some_and(|n| n == HISTORY_FILE) {
            // Not numbered, so the writes a test plans faults for are the checkpoint's own
            // whatever the history does; a broken disk breaks it too.
            return (0, self.broken.map(Fault::Fail));
        }
        self.writes += 1;
        let write = self.writes;
        let mut fault = self.planned.remove(&write);
        if path.file_name().is_some_and(|n| n == METADATA_FILE) {
            self.metadata_writes += 1;
            let nth = self.metadata_writes;
            fault = fault.or(self.planned_metadata.remove(&nth));
        }
        (write, fault.or(self.broken.map(Fault::Fail)))
    }

    /// Counts a removal and takes the error planned for it, if any.
    fn next_removal(&mut self) -> Option<io::ErrorKind> {
        self.removals += 1;
        self.planned_removals.remove(&self.removals)
    }
}

/// Another file system with faults injected on chosen writes.
#[derive(Debug)]
pub struct FaultyFiles {
    inner: Box<dyn Files>,
    plan: Mutex<FaultPlan>,
}

impl Files for FaultyFiles {
    fn read(&self, path: &Path) -> Result<Vec<u8>, IoError> {
        self.inner.read(path)
    }

    fn write(&self, path: &Path, bytes: &[u8], overwrite: Overwrite) -> Result<(), IoError> {
        let (write, fault) = self
            .plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next(path);
        match fault {
            None => self.inner.write(path, bytes, overwrite),
            Some(Fault::Fail(kind)) => Err(Fault::error(kind, path, write)),
            Some(Fault::CrashBeforeRename) => {
                let tmp = CheckpointLayout::temp_file(path);
                self.inner.write_raw(&tmp, &bytes[..bytes.len() / 2])?;
                let e = io::Error::other(format!("injected fault on write {write}"));
                Err(IoError::new("write", path, e))
            }
        }
    }

    fn write_raw(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
        self.inner.write_raw(path, bytes)
    }

    fn create_dir(&self, dir: &Path) -> Result<(), IoError> {
        self.inner.create_dir(dir)
    }

    fn entry(&self, path: &Path) -> Option<Entry> {
        self.inner.entry(path)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<(String, Entry)>, IoError> {
        self.inner.list_dir(dir)
    }

    fn file_sizes(&self, dir: &Path) -> Result<Vec<(String, u64)>, IoError> {
        self.inner.file_sizes(dir)
    }

    fn remove_file(&self, path: &Path) -> Result<(), IoError> {
        match self.planned_removal() {
            Some(kind) => Err(IoError::new("remove", path, removal_error(kind))),
            None => self.inner.remove_file(path),
        }
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        match self.planned_removal() {
            Some(kind) => Err(IoError::new("remove directory", dir, removal_error(kind))),
            None => self.inner.remove_dir_all(dir),
        }
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        self.inner.sync_dir(dir)
    }
}

impl FaultyFiles {
    fn planned_removal(&self) -> Option<io::ErrorKind> {
        self.plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .next_removal()
    }
}

/// The error of a failing removal: the operating system's for the kinds a
/// disk produces (see [`Fault::Fail`]).
fn removal_error(kind: io::ErrorKind) -> io::Error {
    os_error(kind).unwrap_or_else(|| io::Error::new(kind, "injected fault on a removal"))
}

/// Checkpoints in memory, for coordinator and runtime tests: the same rules
/// as [`LocalStorage`] over an in-memory file tree. Clones share the files,
/// so a test can "restart" by building a new storage from a clone.
pub type MemoryStorage = FileStore<MemoryFiles>;

impl Default for MemoryStorage {
    /// An empty storage whose (virtual) job directory is `/memory/job`.
    fn default() -> Self {
        MemoryStorage::new(CheckpointLayout::new("/memory/job"))
    }
}

impl MemoryStorage {
    /// An empty storage under `layout`; the paths are only names, nothing
    /// touches the disk.
    pub fn new(layout: CheckpointLayout) -> Self {
        FileStore::over(layout, MemoryFiles::default())
    }

    /// Another process's view of the same files: shares them, but has claimed no
    /// generation (a clone keeps this one's claim).
    pub fn sharing(&self) -> Self {
        FileStore::over(self.layout.clone(), self.files.clone())
    }

    /// Every file stored, sorted by path.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.lock().files.keys().cloned().collect()
    }

    /// The raw (framed) bytes of a file, if it exists.
    pub fn raw_file(&self, path: &Path) -> Option<Vec<u8>> {
        self.files.lock().files.get(path).cloned()
    }

    /// Replaces the raw bytes of a file (creating its directory), bypassing
    /// every check: for tests that corrupt or forge files.
    pub fn put_raw_file(&self, path: &Path, bytes: Vec<u8>) {
        if let Some(parent) = path.parent() {
            let _ = self.files.create_dir(parent);
        }
        self.files.lock().files.insert(path.to_owned(), bytes);
    }

    /// Removes a file, if it exists: for tests that lose files.
    pub fn remove_raw_file(&self, path: &Path) -> bool {
        self.files.lock().files.remove(path).is_some()
    }
}

/// [`LocalStorage`] or [`MemoryStorage`] with faults injected on chosen
/// writes, for tests of what the coordinator and restore do when storage
/// fails or the process dies mid-write.
///
/// Writes (state files and metadata alike) are numbered from 1 in the order
/// they happen; [`inject`](Self::inject) plans a [`Fault`] for one of them,
/// [`inject_metadata`](Self::inject_metadata) for the n-th metadata write
/// (the commit point), and [`break_writes`](Self::break_writes) makes every
/// write fail until [`heal`](Self::heal) — a disk that fills up or turns
/// read-only while a job runs. The storage-fault tests use it where the real
/// fault cannot be produced (no right to mount a small tmpfs, or running as
/// root, whom permissions do not stop).
pub type FaultyStorage = FileStore<FaultyFiles>;

impl FaultyStorage {
    /// Local files under `layout`, with faults.
    pub fn local(layout: CheckpointLayout) -> Self {
        Self::faulty(layout, Box::new(DiskFiles))
    }

    /// The files of `memory` (shared: `memory` sees what this one wrote),
    /// with faults.
    pub fn memory(memory: &MemoryStorage) -> Self {
        Self::faulty(memory.layout.clone(), Box::new(memory.files.clone()))
    }

    fn faulty(layout: CheckpointLayout, inner: Box<dyn Files>) -> Self {
        let files = FaultyFiles {
            inner,
            plan: Mutex::new(FaultPlan::default()),
        };
        FileStore::over(layout, files)
    }

    /// Makes write number `write` (1-based, counted since this storage was
    /// built) fail with `fault`.
    pub fn inject(&self, write: usize, fault: Fault) {
        self.plan().planned.insert(write, fault);
    }

    /// Makes the `nth` write of a checkpoint's metadata (1-based, counted
    /// since this storage was built) fail with `fault`: the commit point
    /// fails after every state file was written.
    pub fn inject_metadata(&self, nth: usize, fault: Fault) {
        self.plan().planned_metadata.insert(nth, fault);
    }

    /// Makes every write from now on fail with an error of `kind` (see
    /// [`Fault::Fail`]), as a full disk or a read-only file system does,
    /// until [`heal`](Self::heal). Reads and removals still work.
    pub fn break_writes(&self, kind: io::ErrorKind) {
        self.plan().broken = Some(kind);
    }

    /// Ends [`break_writes`](Self::break_writes): writes work again.
    pub fn heal(&self) {
        self.plan().broken = None;
    }

    /// Makes removal number `nth` (1-based, counted since this storage was
    /// built; each file or directory tree a [`discard`](CheckpointStorage::discard)
    /// or cleanup removes counts one) fail with an error of `kind`, as on a
    /// file system that turned read-only: the removal does nothing.
    pub fn inject_removal(&self, nth: usize, kind: io::ErrorKind) {
        self.plan().planned_removals.insert(nth, kind);
    }

    /// How many metadata writes were attempted so far.
    pub fn metadata_writes(&self) -> usize {
        self.plan().metadata_writes
    }

    /// How many writes were attempted so far.
    pub fn writes(&self) -> usize {
        self.plan().writes
    }

    fn plan(&self) -> MutexGuard<'_, FaultPlan> {
        self.files
            .plan
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
