//! The bottom layer of checkpoint storage: a minimal file system, real (local files) or not (an
//! object store, memory). The checkpoint rules are written once over it (`FileStore`); each
//! storage is those rules over one of these.
//!
//! The items are public so that the storages' type aliases can name them, in a module nothing
//! outside `storage` can reach: no one else implements or calls a file system here.

use std::fmt;
use std::io;
use std::path::Path;

use crate::checkpoint::format::{self, IoError, Overwrite};
use crate::parallel;

/// What a path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Entry {
    File,
    Dir,
}

/// The few file-system operations the checkpoint rules need. Errors use the
/// `io::ErrorKind` of the failure (`NotFound`, `AlreadyExists`) so callers
/// can tell those apart.
pub trait Files: Send + Sync + fmt::Debug {
    /// The whole content of a file.
    fn read(&self, path: &Path) -> Result<Vec<u8>, IoError>;
    /// Writes a file durably (tmp, fsync, rename or link, fsync dir).
    fn write(&self, path: &Path, bytes: &[u8], overwrite: Overwrite) -> Result<(), IoError>;
    /// Writes a file with no care for durability (crash simulation only).
    #[cfg(any(test, feature = "test-hooks"))]
    fn write_raw(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError>;
    /// Creates a directory and its parents, durably.
    fn create_dir(&self, dir: &Path) -> Result<(), IoError>;
    /// What `path` is, if anything.
    fn entry(&self, path: &Path) -> Option<Entry>;
    /// Whether `path` is a file: [`Files::entry`], in one request where a directory costs
    /// another (an object store's).
    fn is_file(&self, path: &Path) -> bool {
        self.entry(path) == Some(Entry::File)
    }
    /// The entries of a directory with UTF-8 names, sorted; empty if the
    /// directory does not exist.
    fn list_dir(&self, dir: &Path) -> Result<Vec<(String, Entry)>, IoError>;
    /// The files directly in a directory with UTF-8 names and their lengths, sorted by name;
    /// empty if the directory does not exist.
    fn file_sizes(&self, dir: &Path) -> Result<Vec<(String, u64)>, IoError>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> Result<(), IoError>;
    /// Removes a directory and everything in it.
    fn remove_dir_all(&self, dir: &Path) -> Result<(), IoError>;
    /// Makes the entries of a directory durable.
    fn sync_dir(&self, dir: &Path) -> Result<(), IoError>;
}

/// The local file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiskFiles;

impl Files for DiskFiles {
    fn read(&self, path: &Path) -> Result<Vec<u8>, IoError> {
        parallel::read_file(path).map_err(|e| IoError::new("read", path, e))
    }

    fn write(&self, path: &Path, bytes: &[u8], overwrite: Overwrite) -> Result<(), IoError> {
        format::write_durable(path, bytes, overwrite)
    }

    #[cfg(any(test, feature = "test-hooks"))]
    fn write_raw(&self, path: &Path, bytes: &[u8]) -> Result<(), IoError> {
        std::fs::write(path, bytes).map_err(|e| IoError::new("write", path, e))
    }

    fn create_dir(&self, dir: &Path) -> Result<(), IoError> {
        format::create_dir_durable(dir)
    }

    fn entry(&self, path: &Path) -> Option<Entry> {
        let meta = std::fs::metadata(path).ok()?;
        Some(if meta.is_dir() {
            Entry::Dir
        } else {
            Entry::File
        })
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<(String, Entry)>, IoError> {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(IoError::new("list directory", dir, e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| IoError::new("list directory", dir, e))?;
            // Names that are not UTF-8 are not ours.
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            if let Some(kind) = self.entry(&entry.path()) {
                out.push((name, kind));
            }
        }
        out.sort();
        Ok(out)
    }

    fn file_sizes(&self, dir: &Path) -> Result<Vec<(String, u64)>, IoError> {
        let mut out = Vec::new();
        for (name, entry) in self.list_dir(dir)? {
            if entry != Entry::File {
                continue;
            }
            let path = dir.join(&name);
            match std::fs::metadata(&path) {
                Ok(meta) => out.push((name, meta.len())),
                // Removed since it was listed (a running job pruned it).
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(IoError::new("read the size of", path, e)),
            }
        }
        Ok(out)
    }

    fn remove_file(&self, path: &Path) -> Result<(), IoError> {
        std::fs::remove_file(path).map_err(|e| IoError::new("remove", path, e))
    }

    fn remove_dir_all(&self, dir: &Path) -> Result<(), IoError> {
        std::fs::remove_dir_all(dir).map_err(|e| IoError::new("remove directory", dir, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<(), IoError> {
        format::sync_dir(dir)
    }
}
