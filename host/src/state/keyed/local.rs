//! Local recovery: each task's latest checkpoints of its store kept on the machine's own disk,
//! so that a restore there lays the store out from them instead of reading every shared file
//! back from the checkpoint storage (Flink's local recovery).
//!
//! Why a module of its own: a store's checkpoint is a directory of hard links, made at the
//! barrier anyway. Keeping it after its files are stored costs a rename, and a restore that
//! finds it links those files again instead of downloading them: the restore of a large state
//! goes from reading and writing all of its bytes to verifying them. What is kept where, how
//! long, and how a restore takes a file from there without trusting it blindly is this
//! module's; the checkpoint storage still holds every file, and a restore on another machine,
//! or one whose local copy is gone or damaged, reads them from there.
//!
//! **Where.** Under the copies' root, a folder of the job's that outlives its processes
//! (`weir-local-<job>-<place>` beside the stores' working folders in `[state] directory`, as
//! `job::StateConfig::local_dir` names it): one folder per task (`<vertex>-<subtask>`), holding
//! `chk-<id>` for each checkpoint of its store still kept.
//!
//! **How long.** A task keeps its copy of a checkpoint from the moment its files are stored until
//! a later checkpoint completes, or this one is aborted. A job that ends (finished, cancelled,
//! stopped with a savepoint) removes the whole folder; one that fails or is killed leaves it
//! for the run that restores it.
//!
//! **Trust.** A restore links each file it takes from a copy into a folder of its own process
//! first ([`LocalCopies::stage`]), and the checkpoint layer checks the linked file against the
//! handle the checkpoint's metadata gives it (length and CRC-32), exactly as it checks a file it
//! reads from the storage. A file that does not match is read from the storage instead.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::ids::{CheckpointId, TaskId};

/// The local copies of a job's task stores, and the folder a restore of this process takes
/// files from them into.
#[derive(Debug, Clone)]
pub struct LocalCopies {
    /// The job's folder of copies: one folder per task.
    root: PathBuf,
    /// This process's folder of files taken from the copies for a restore.
    staging: PathBuf,
}

impl LocalCopies {
    /// Copies kept under `root`, taken into `staging` (a folder of this process's own, made
    /// when a file is first taken) for a restore.
    pub fn new(root: PathBuf, staging: PathBuf) -> Self {
        LocalCopies { root, staging }
    }

    /// The folder of `task`'s copies.
    pub fn task_dir(&self, task: &TaskId) -> PathBuf {
        self.root.join(format!("{}-{}", task.vertex, task.subtask))
    }

    /// Where `task` keeps its copy of checkpoint `id` of its store.
    pub fn checkpoint_dir(&self, task: &TaskId, id: CheckpointId) -> PathBuf {
        checkpoint_dir(&self.task_dir(task), id)
    }

    /// File `name` of `task`'s copy of checkpoint `id`, linked into the staging folder under a
    /// name of its own; `None` when the copy has no such file or the link cannot be made.
    /// The link is the restore's: what it verifies is what it uses, whatever later happens to
    /// the copy.
    pub fn stage(&self, task: &TaskId, id: CheckpointId, name: &str) -> Option<StagedFile> {
        let from = self.checkpoint_dir(task, id).join(name);
        if !from.is_file() {
            return None;
        }
        std::fs::create_dir_all(&self.staging).ok()?;
        let to = self
            .staging
            .join(format!("{}-{}-{}.{name}", task.vertex, task.subtask, id.0));
        let _ = std::fs::remove_file(&to);
        std::fs::hard_link(&from, &to).ok()?;
        Some(StagedFile { path: to })
    }

    /// Removes every copy: the job ended, and nothing will restore from its checkpoints here.
    pub fn remove_all(&self) {
        if let Err(e) = std::fs::remove_dir_all(&self.root)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(
                "cannot remove {}, the local copies of the job's state: {e}",
                self.root.display()
            );
        }
    }
}

/// Where a task whose copies are in `task_dir` keeps its copy of checkpoint `id`.
pub(super) fn checkpoint_dir(task_dir: &Path, id: CheckpointId) -> PathBuf {
    task_dir.join(format!("chk-{}", id.0))
}

/// Removes from `task_dir` the copies of every checkpoint older than `id`: `id` completed, so
/// no restore will want them.
pub(super) fn remove_older(task_dir: &Path, id: CheckpointId) {
    let Ok(entries) = std::fs::read_dir(task_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let older = name
            .to_str()
            .and_then(|name| name.strip_prefix("chk-"))
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| n < id.0);
        if older {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A file taken from a local copy for a restore: a link of this process's own, removed when
/// the last restore that uses it is done with it.
#[derive(Debug, PartialEq, Eq)]
pub struct StagedFile {
    path: PathBuf,
}

impl StagedFile {
    /// The linked file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for StagedFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A store's kept file as a restore has it, verified against its handle: its bytes, read from
/// the checkpoint storage, or a local copy. Clones share the bytes or the file: after a rescale
/// several new subtasks restore from one old subtask's files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoredFile {
    /// Read from the checkpoint storage.
    Read(Arc<Vec<u8>>),
    /// Taken from a local copy.
    Local(Arc<StagedFile>),
}

impl RestoredFile {
    /// The file's bytes, read from the storage.
    pub fn read(bytes: Vec<u8>) -> Self {
        RestoredFile::Read(Arc::new(bytes))
    }

    /// Puts the file at `path`: its bytes written, or the local copy linked (copied, where the
    /// two folders are on different file systems).
    pub fn place(&self, path: &Path) -> std::io::Result<()> {
        match self {
            RestoredFile::Read(bytes) => std::fs::write(path, bytes.as_slice()),
            RestoredFile::Local(file) => std::fs::hard_link(file.path(), path)
                .or_else(|_| std::fs::copy(file.path(), path).map(drop)),
        }
    }

    /// Whether the file came from a local copy.
    pub fn is_local(&self) -> bool {
        matches!(self, RestoredFile::Local(_))
    }
}
