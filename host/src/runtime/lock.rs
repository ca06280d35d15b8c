//! A running job owns its directories: [`JobLocks`].
//!
//! Why: two runs of one job at once (a second `weir run` typed while the first
//! still runs, a service manager starting a second copy) share checkpoint ids,
//! overwrite each other's `_control.json`, restore each other's checkpoints
//! and commit each other's part files — and one of them ends FINISHED with
//! wrong output. Two jobs whose file sinks share a directory delete each
//! other's in-progress parts. So a run takes, before it reads or writes
//! anything there, an exclusive OS lock (`flock`, through
//! [`File::try_lock`]) on
//!
//! - its checkpoint directory (`<dir>/_lock`), which holds its savepoints too;
//! - the output directory of each of its file sinks (`<dir>/.weir-lock`, a
//!   dot file, so readers of the committed parts never see it).
//!
//! A second run exits naming the directory and the process holding it. The
//! kernel releases a lock when its process dies, `kill -9` included, so a
//! crash never leaves a stale lock to remove by hand. The lock files stay
//! (removing them would race with the next run taking them); their content —
//! the holder's pid and job — is only for the message.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

use crate::checkpoint::format::create_dir_durable;
use crate::job::{Job, SinkKind, VertexKind};

/// Name of the lock file in a checkpoint directory.
pub const CHECKPOINT_LOCK_FILE: &str = "_lock";

/// Name of the lock file in a file sink's output directory.
pub const SINK_LOCK_FILE: &str = ".weir-lock";

/// A directory a run cannot take.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error(
        "{what} {dir} is in use by another run ({holder}): two runs of one job at once would \
         overwrite each other's checkpoints and output. Stop the other run ({stop}) or wait \
         for it to end; to run a second copy of the job, give it its own [checkpoint] \
         directory and sink paths"
    )]
    InUse {
        /// What the directory is to this job ("checkpoint directory", "output directory of file
        /// sink `out`").
        what: String,
        /// The directory.
        dir: PathBuf,
        /// Who holds it, as its lock file says ("pid 4242, job `wordcount`").
        holder: String,
        /// How to stop the holder.
        stop: String,
    },
    /// The lock file cannot be created or locked.
    #[error("cannot lock the {what} {dir}: {source}")]
    Io {
        /// What the directory is to this job.
        what: String,
        /// The directory.
        dir: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// An exclusive lock on one directory, held until dropped (or the process dies).
#[derive(Debug)]
pub struct DirectoryLock {
    // Held for the lock: closing the file releases it.
    _file: File,
}

impl DirectoryLock {
    /// Locks `dir` (created if missing) through its file `lock_file`, recording this
    /// process and `job` in it. `what` names the directory in messages.
    pub fn acquire(
        dir: &Path,
        lock_file: &str,
        what: &str,
        job: &str,
    ) -> Result<DirectoryLock, LockError> {
        let io = |source| LockError::Io {
            what: what.to_string(),
            dir: dir.to_owned(),
            source,
        };
        // Durably, as every directory of a job: the checkpoint storage finds this one already
        // made and would not sync its parent again.
        create_dir_durable(dir).map_err(|e| io(e.source))?;
        let path = dir.join(lock_file);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                let holder = Holder::parse(&text);
                return Err(LockError::InUse {
                    what: what.to_string(),
                    dir: dir.to_owned(),
                    holder: holder.describe(),
                    stop: holder.how_to_stop(dir, lock_file),
                });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        let record = format!("pid={}\njob={job}\n", std::process::id());
        file.set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| file.write_all(record.as_bytes()))
            .map_err(io)?;
        Ok(DirectoryLock { _file: file })
    }
}

/// What a lock file says of its holder.
#[derive(Debug, Default, PartialEq, Eq)]
struct Holder {
    pid: Option<u32>,
    job: Option<String>,
}

impl Holder {
    fn parse(text: &str) -> Holder {
        let mut holder = Holder::default();
        for line in text.lines() {
            if let Some(pid) = line.strip_prefix("pid=") {
                holder.pid = pid.trim().parse().ok();
            } else if let Some(job) = line.strip_prefix("job=") {
                holder.job = Some(job.to_string());
            }
        }
        holder
    }

    fn describe(&self) -> String {
        match (self.pid, &self.job) {
            (Some(pid), Some(job)) => format!("pid {pid}, job `{job}`"),
            (Some(pid), None) => format!("pid {pid}"),
            _ => "a process that has not recorded itself yet".to_string(),
        }
    }

    fn how_to_stop(&self, dir: &Path, lock_file: &str) -> String {
        let pid = self
            .pid
            .map_or_else(String::new, |pid| format!(" or `kill {pid}`"));
        if lock_file == CHECKPOINT_LOCK_FILE {
            format!("`weir stop {}`{pid}", dir.display())
        } else {
            format!("`weir stop` on its checkpoint directory{pid}")
        }
    }
}

/// Every lock a run of a job holds: see the module docs.
#[derive(Debug)]
pub struct JobLocks {
    // Held for the locks: dropping them releases the directories.
    _locks: Vec<DirectoryLock>,
}

impl JobLocks {
    /// Takes the locks of `job`: its checkpoint directory when `checkpoints` (the job's
    /// checkpoints are in its directory, not in another storage), and the output directory of
    /// each file sink. On failure the locks taken so far are released.
    pub fn acquire(job: &Job, checkpoints: bool) -> Result<JobLocks, LockError> {
        let mut locks = Vec::new();
        if checkpoints {
            locks.push(DirectoryLock::acquire(
                &job.checkpoint.directory,
                CHECKPOINT_LOCK_FILE,
                "checkpoint directory",
                &job.name,
            )?);
        }
        for vertex in &job.vertices {
            if let VertexKind::Sink(SinkKind::File { directory }) = &vertex.kind {
                locks.push(DirectoryLock::acquire(
                    directory,
                    SINK_LOCK_FILE,
                    &format!("output directory of file sink `{}`", vertex.name),
                    &job.name,
                )?);
            }
        }
        Ok(JobLocks { _locks: locks })
    }

    /// No locks (what a run has left once it handed its own on).
    pub(crate) fn none() -> JobLocks {
        JobLocks { _locks: Vec::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_a_directory_is_refused_naming_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let first = DirectoryLock::acquire(
            dir.path(),
            CHECKPOINT_LOCK_FILE,
            "checkpoint directory",
            "wc",
        )
        .unwrap();
        let e = DirectoryLock::acquire(
            dir.path(),
            CHECKPOINT_LOCK_FILE,
            "checkpoint directory",
            "wc",
        )
        .unwrap_err();
        let message = e.to_string();
        let pid = std::process::id();
        assert!(matches!(e, LockError::InUse { .. }), "{message}");
        assert!(
            message.contains(&format!("pid {pid}, job `wc`")),
            "{message}"
        );
        assert!(
            message.contains(&format!("`weir stop {}`", dir.path().display())),
            "{message}"
        );
        drop(first);
        // Released with its holder: the next run takes it.
        DirectoryLock::acquire(
            dir.path(),
            CHECKPOINT_LOCK_FILE,
            "checkpoint directory",
            "wc",
        )
        .unwrap();
    }

    #[test]
    fn the_holder_is_read_from_what_it_recorded() {
        assert_eq!(
            Holder::parse("pid=12\njob=a b\n").describe(),
            "pid 12, job `a b`"
        );
        assert_eq!(
            Holder::parse("").describe(),
            "a process that has not recorded itself yet"
        );
        assert_eq!(Holder::parse("pid=x").pid, None);
    }
}
