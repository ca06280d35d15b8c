//! `_control.json`: how the CLI finds a running job's control endpoint.
//!
//! A job's endpoint listens on a port the system picks, so `weir status DIR`
//! needs to learn it: while the job runs, its checkpoint directory holds
//! `_control.json` with the address, the process id, the job's name, when it
//! started and the token every request needs, so the file is readable by
//! its owner only (mode 0600, set when it is created: never readable by
//! others, not even for a moment). It is written atomically (a temporary file
//! renamed over it) once the server listens, and removed when the job ends.
//! A job killed with SIGKILL leaves it behind: a reader tells such a stale
//! file by its process id being gone, or by the connection being refused.
//!
//! The checkpoint storage never mistakes it for a checkpoint: it only looks
//! at directories named `chk-…` and `sp-…` (see
//! [`CheckpointLayout::parse_dir_name`](crate::checkpoint::layout::CheckpointLayout::parse_dir_name)),
//! and its cleanup only removes files inside those.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name, inside the job's checkpoint directory.
pub const ENDPOINT_FILE: &str = "_control.json";

/// What `_control.json` says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointFile {
    /// Where to connect: `http://127.0.0.1:PORT` (an endpoint listening on
    /// every interface is written with the loopback address, which reaches it
    /// from this machine).
    pub address: String,
    /// The process serving it.
    pub pid: u32,
    /// The job's name.
    pub job: String,
    /// When the endpoint started, in ms since the Unix epoch.
    pub started: u64,
    /// The token requests must carry (`Authorization: Bearer TOKEN`).
    pub token: String,
}

/// Why `_control.json` could not be written, read or removed.
#[derive(Debug, thiserror::Error)]
pub enum EndpointFileError {
    /// There is none: no job with a control endpoint runs on this directory.
    #[error(
        "no running job found in {}: is it running? it writes {} while it runs (unless its \
         control endpoint is disabled)",
        dir.display(),
        dir.join(ENDPOINT_FILE).display()
    )]
    Missing {
        /// The directory looked in.
        dir: PathBuf,
    },
    /// The file is the job owner's: it holds the token.
    #[error(
        "cannot read {}: permission denied. It holds the job's control token, so only the user \
         who started the job (and root) may read it: run this as that user",
        path.display()
    )]
    NotOwner {
        /// The file.
        path: PathBuf,
    },
    /// The file system refused.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// `write`, `read`, `remove`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The file is not what a job writes.
    #[error(
        "{} is not a control endpoint file ({source}): remove it if no job runs there",
        path.display()
    )]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What the JSON parser said.
        source: serde_json::Error,
    },
}

impl EndpointFile {
    /// Where the file of the job whose checkpoint directory is `dir` is.
    pub fn path_in(dir: &Path) -> PathBuf {
        dir.join(ENDPOINT_FILE)
    }

    /// Writes it into `dir` (creating `dir` if needed) atomically: readers
    /// see the old file or the whole new one. Only the owner can read it.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, EndpointFileError> {
        let path = Self::path_in(dir);
        let temp = dir.join(format!("{ENDPOINT_FILE}.{}.tmp", std::process::id()));
        let io = |action, path: &Path| {
            let path = path.to_path_buf();
            move |source| EndpointFileError::Io {
                action,
                path,
                source,
            }
        };
        std::fs::create_dir_all(dir).map_err(io("create", dir))?;
        let json = serde_json::to_vec_pretty(self).expect("an endpoint file serializes");
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        // A temporary file left by a crashed writer of the same pid may have
        // other permissions: start from none.
        let _ = std::fs::remove_file(&temp);
        let written = options
            .open(&temp)
            .and_then(|mut file| file.write_all(&json).and_then(|()| file.sync_all()));
        if let Err(e) = written.and_then(|()| std::fs::rename(&temp, &path)) {
            let _ = std::fs::remove_file(&temp);
            return Err(io("write", &path)(e));
        }
        Ok(path)
    }

    /// Reads the file in `dir`; [`EndpointFileError::Missing`] if there is none.
    pub fn read(dir: &Path) -> Result<EndpointFile, EndpointFileError> {
        let path = Self::path_in(dir);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(EndpointFileError::Missing {
                    dir: dir.to_path_buf(),
                });
            }
            Err(source) if source.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(EndpointFileError::NotOwner { path });
            }
            Err(source) => {
                return Err(EndpointFileError::Io {
                    action: "read",
                    path,
                    source,
                });
            }
        };
        serde_json::from_slice(&bytes)
            .map_err(|source| EndpointFileError::Malformed { path, source })
    }

    /// Removes the file in `dir` if it is still this process's (another job
    /// started on the same directory since may have replaced it). A file
    /// already gone is no error.
    pub fn remove_own(dir: &Path) -> Result<(), EndpointFileError> {
        match Self::read(dir) {
            Ok(file) if file.pid == std::process::id() => {}
            Ok(_) | Err(EndpointFileError::Missing { .. }) => return Ok(()),
            // Unreadable or not ours to judge: leave it.
            Err(_) => return Ok(()),
        }
        let path = Self::path_in(dir);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(EndpointFileError::Io {
                action: "remove",
                path,
                source,
            }),
        }
    }

    /// Whether the process that wrote the file is gone (Linux: no
    /// `/proc/PID`). `false` where that cannot be told: the connection then
    /// tells.
    pub fn process_gone(&self) -> bool {
        crate::process::gone(self.pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::layout::CheckpointLayout;
    use crate::checkpoint::storage::{CheckpointStorage, LocalStorage};

    fn file(token: &str) -> EndpointFile {
        EndpointFile {
            address: "http://127.0.0.1:4040".into(),
            pid: std::process::id(),
            job: "wordcount".into(),
            started: 1_700_000_000_000,
            token: token.to_string(),
        }
    }

    #[test]
    fn writes_reads_and_removes_its_own_file() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().join("checkpoints").join("wordcount");
        let path = file("t").write(&jobs).unwrap();
        assert_eq!(path, jobs.join("_control.json"));
        assert_eq!(EndpointFile::read(&jobs).unwrap(), file("t"));
        // Only the file is left: no temporary file.
        assert_eq!(std::fs::read_dir(&jobs).unwrap().count(), 1);
        EndpointFile::remove_own(&jobs).unwrap();
        assert!(!path.exists());
        EndpointFile::remove_own(&jobs).unwrap();
        let missing = EndpointFile::read(&jobs).unwrap_err();
        assert!(
            missing.to_string().starts_with(&format!(
                "no running job found in {}: is it running? it writes {}",
                jobs.display(),
                path.display()
            )),
            "{missing}"
        );
    }

    #[test]
    fn leaves_the_file_of_another_process() {
        let dir = tempfile::tempdir().unwrap();
        let other = EndpointFile {
            pid: std::process::id() + 1,
            ..file("t")
        };
        other.write(dir.path()).unwrap();
        EndpointFile::remove_own(dir.path()).unwrap();
        assert_eq!(EndpointFile::read(dir.path()).unwrap(), other);
    }

    #[cfg(unix)]
    #[test]
    fn the_file_is_readable_by_its_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = file("abc").write(dir.path()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(EndpointFile::read(dir.path()).unwrap().token, "abc");
        // Replaced by a new job: still owner-only.
        file("def").write(dir.path()).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    #[test]
    fn a_malformed_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ENDPOINT_FILE), "{").unwrap();
        let error = EndpointFile::read(dir.path()).unwrap_err().to_string();
        assert!(error.contains("is not a control endpoint file"), "{error}");
    }

    #[test]
    fn a_dead_process_is_told_apart() {
        assert!(!file("t").process_gone());
        // Process ids stop well below this on Linux (pid_max is at most 2^22).
        let dead = EndpointFile {
            pid: u32::MAX - 1,
            ..file("t")
        };
        if Path::new("/proc/self").exists() {
            assert!(dead.process_gone());
        }
    }

    #[test]
    fn checkpoint_storage_lists_and_cleans_around_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = file("t").write(dir.path()).unwrap();
        let storage = LocalStorage::new(CheckpointLayout::new(dir.path()));
        assert!(storage.list().unwrap().is_empty());
        let cleanup = storage.cleanup().unwrap();
        assert!(cleanup.removed_dirs.is_empty() && cleanup.removed_temp_files.is_empty());
        assert!(path.is_file());
    }
}
