//! Where every checkpoint file lives: the one type that builds paths on disk.
//!
//! Why a module of its own: a path built in two places drifts (one side pads
//! ids, the other does not; one escapes vertex names, the other forgets), and a
//! restore that looks for a file where the writer did not put it is a silent
//! data loss. So every path of the checkpoint storage is built here, by
//! [`CheckpointLayout`], and nowhere else.
//!
//! ```text
//! <job dir>/
//!   chk-0000000007/            one directory per checkpoint, id zero-padded to 10 digits
//!     count-0.state            one state file per task: <escaped vertex>-<subtask>.state
//!     count-1.state
//!     _metadata                written last: its presence is what makes the checkpoint complete
//!     _metadata.2829-4.tmp     (only while being written, or after a crash: `<pid>-<n>`, this
//!                              writer's own, as runs may race to create one file)
//!   _history                   the ids ever reserved and completed (checkpoint/history.rs)
//!   _id                        the id of the job's checkpoints, made by the first run
//!   _generations/              one empty file per run that claimed a generation
//!     0000000003               (checkpoint/generation.rs)
//!   shared/                    files the states of several checkpoints may name
//!     0000000007.count-1.000012.sst   <writer's checkpoint id>.<escaped vertex>-<subtask>.<name>
//!   savepoints/                or a directory the user names
//!     sp-0000000012/           same contents as a checkpoint directory
//! ```
//!
//! Ids are zero-padded so that the lexical order of directory names is their
//! numeric order (`ls` shows them oldest first).
//!
//! Vertex names come from the job file and may contain anything. They are
//! escaped so that a name can never leave the checkpoint directory (`../x`),
//! never hide as a dot file, never collide with `_metadata` or a `.tmp` file,
//! and never collide with another vertex's name on a case-insensitive file
//! system: ASCII lowercase letters, digits, `_` and `-` are kept, every other
//! byte of the UTF-8 name (upper case included) becomes `%XX`. The mapping is
//! injective, so two vertices never share a file.

use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::checkpoint::generation::{GENERATIONS_DIR, Generation};
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};

/// Name of the file that publishes a checkpoint. Written last; a directory
/// without it is an incomplete checkpoint.
pub const METADATA_FILE: &str = "_metadata";

/// Name of the job's checkpoint history, in the job directory
/// (`checkpoint/history.rs`).
pub const HISTORY_FILE: &str = "_history";

/// Name of the file, in the job directory, that holds the id of the job's checkpoints
/// ([`CheckpointStorage::storage_id`](crate::checkpoint::storage::CheckpointStorage::storage_id)).
pub const ID_FILE: &str = "_id";

/// Suffix of a file being written: `x.tmp` is renamed to `x` once durable.
/// A `.tmp` file that survives is debris of a crash.
pub const TEMP_SUFFIX: &str = ".tmp";

/// Suffix of a task's state file.
pub const STATE_SUFFIX: &str = ".state";

/// Prefix of a checkpoint directory name (`chk-0000000007`).
pub const CHECKPOINT_PREFIX: &str = "chk-";

/// Prefix of a savepoint directory name (`sp-0000000012`).
pub const SAVEPOINT_PREFIX: &str = "sp-";

/// Name of the directory, inside the job directory, that holds savepoints
/// when the user names no other.
pub const SAVEPOINTS_DIR: &str = "savepoints";

/// The directory, inside the job's checkpoint directory, of the files the
/// states of several checkpoints may name ([`SharedFile`](crate::checkpoint::shared::SharedFile)).
pub const SHARED_DIR: &str = "shared";

/// Width to which ids are zero-padded in directory names.
pub const ID_WIDTH: usize = 10;

/// Longest escaped vertex name accepted in a state file name. With the
/// subtask, the suffix and `.tmp` the file name stays under the 255-byte
/// limit of common file systems.
pub const MAX_ESCAPED_VERTEX_LEN: usize = 200;

/// The longest name a writer may give a shared file
/// ([`CheckpointLayout::shared_file_name`]).
pub const MAX_SHARED_NAME_LEN: usize = 100;

/// A path that cannot be built, naming what was wrong with its input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LayoutError {
    /// A task's vertex name is empty, so its state file would have no name.
    #[error("task {task}: the vertex name is empty; give the vertex a name in the job file")]
    EmptyVertex {
        /// The offending task.
        task: TaskId,
    },
    /// A vertex name is too long once escaped to be a file name.
    #[error(
        "task {task}: the vertex name is {escaped_len} bytes once escaped for a file name \
         (at most {max}); use a shorter vertex name"
    )]
    VertexNameTooLong {
        /// The offending task.
        task: TaskId,
        /// Length of the escaped name.
        escaped_len: usize,
        /// [`MAX_ESCAPED_VERTEX_LEN`].
        max: usize,
    },
    /// A state backend gave a shared file a name the layout does not take.
    #[error(
        "task {task}: shared file name {name:?} is not allowed: use 1 to {MAX_SHARED_NAME_LEN} \
         ASCII letters, digits, '.', '_' or '-'"
    )]
    BadSharedName {
        /// The task writing it.
        task: TaskId,
        /// The name it gave.
        name: String,
    },
    /// A file name read from metadata is not a plain file name inside the
    /// checkpoint directory (it has a separator, is `.`/`..`, is empty…).
    #[error(
        "state file name {name:?} in {dir} is not a plain file name inside the checkpoint directory"
    )]
    UnsafeFileName {
        /// The checkpoint directory.
        dir: PathBuf,
        /// The name as read.
        name: String,
    },
}

/// Where one checkpoint or savepoint lives: its directory.
///
/// A location is what a restore starts from. It is usually built by
/// [`CheckpointLayout::location`], but a user-given path (`--restore PATH`)
/// may point anywhere, even at a directory renamed by hand, so a location
/// does not claim to know its kind and id: those are read from the metadata
/// (and cross-checked against the directory name when it has the usual form).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CheckpointLocation {
    dir: PathBuf,
}

impl CheckpointLocation {
    /// The checkpoint stored in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        CheckpointLocation { dir: dir.into() }
    }

    /// The checkpoint directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The last component of the directory, e.g. `chk-0000000007`, for
    /// messages.
    pub fn name(&self) -> String {
        match self.dir.file_name() {
            Some(name) => name.to_string_lossy().into_owned(),
            None => self.dir.display().to_string(),
        }
    }

    /// The location of checkpoint `id` next to this one: where a link of an
    /// image chain lives. A delta's chain is always in earlier checkpoints'
    /// directories beside its own (savepoints are never links), so a job's
    /// checkpoint directory restores from wherever it was moved, as a whole.
    pub fn chain_link(&self, id: CheckpointId) -> CheckpointLocation {
        let name = CheckpointLayout::dir_name(CheckpointKind::Checkpoint, id);
        CheckpointLocation::new(match self.dir.parent() {
            Some(parent) => parent.join(name),
            None => PathBuf::from(name),
        })
    }

    /// The path of shared file `name` (read from metadata, so untrusted) of
    /// the checkpoint at this location: in the `shared` directory beside it,
    /// so a job's checkpoint directory restores from wherever it was moved,
    /// as a whole (like [`chain_link`](Self::chain_link)). Refuses a name
    /// that is not a plain file name.
    pub fn shared_file(&self, name: &str) -> Result<PathBuf, LayoutError> {
        let dir = match self.dir.parent() {
            Some(parent) => parent.join(SHARED_DIR),
            None => PathBuf::from(SHARED_DIR),
        };
        if !CheckpointLayout::is_plain_file_name(name) {
            return Err(LayoutError::UnsafeFileName {
                dir,
                name: name.to_owned(),
            });
        }
        Ok(dir.join(name))
    }

    /// Kind and id as spelled by the directory name, when it has the form
    /// `chk-<id>` or `sp-<id>`.
    pub fn parsed_name(&self) -> Option<(CheckpointKind, CheckpointId)> {
        CheckpointLayout::parse_dir_name(self.dir.file_name()?.to_str()?)
    }
}

impl fmt::Display for CheckpointLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.dir.display())
    }
}

/// Builds every path of a job's checkpoint storage from its directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointLayout {
    /// The job's checkpoint directory (`[checkpoint] directory`).
    job_dir: PathBuf,
    /// Where savepoints go when the user named a directory; else
    /// `<job dir>/savepoints`.
    savepoint_dir: Option<PathBuf>,
}

impl CheckpointLayout {
    /// The layout of a job whose checkpoint directory is `job_dir`.
    /// Savepoints go to `<job_dir>/savepoints` unless
    /// [`with_savepoint_dir`](Self::with_savepoint_dir) says otherwise.
    pub fn new(job_dir: impl Into<PathBuf>) -> Self {
        CheckpointLayout {
            job_dir: job_dir.into(),
            savepoint_dir: None,
        }
    }

    /// Put savepoints in `dir` (a user-given savepoint directory) instead of
    /// `<job dir>/savepoints`. The directory should belong to this job alone:
    /// ids are per job, and `sp-<id>` of two jobs would collide.
    pub fn with_savepoint_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.savepoint_dir = Some(dir.into());
        self
    }

    /// The job's checkpoint directory.
    pub fn job_dir(&self) -> &Path {
        &self.job_dir
    }

    /// The job's checkpoint history file: `<job dir>/_history`.
    pub fn history_file(&self) -> PathBuf {
        self.job_dir.join(HISTORY_FILE)
    }

    /// The file with the id of the job's checkpoints: `<job dir>/_id`.
    pub fn id_file(&self) -> PathBuf {
        self.job_dir.join(ID_FILE)
    }

    /// The directory of the job's generations (`checkpoint/generation.rs`):
    /// `<job dir>/_generations`.
    pub fn generations_dir(&self) -> PathBuf {
        self.job_dir.join(GENERATIONS_DIR)
    }

    /// The file that claims generation `generation`: `<job dir>/_generations/0000000003`.
    pub fn generation_file(&self, generation: Generation) -> PathBuf {
        self.generations_dir().join(generation.file_name())
    }

    /// The directory of the files the states of several checkpoints may
    /// name: `<job dir>/shared`.
    pub fn shared_dir(&self) -> PathBuf {
        self.job_dir.join(SHARED_DIR)
    }

    /// The name in the shared directory of file `name` of `task`, written by
    /// checkpoint `id`: `0000000007.count-1.000012.sst`. The writer's id comes
    /// first, so retention can tell, without metadata, which checkpoint wrote a
    /// file no retained checkpoint names
    /// ([`shared_files_to_remove`](crate::checkpoint::recovery::shared_files_to_remove)).
    /// `name` is the writer's own (a store's file name): ASCII letters,
    /// digits, `.`, `_` and `-`, at most [`MAX_SHARED_NAME_LEN`] bytes.
    pub fn shared_file_name(
        id: CheckpointId,
        task: &TaskId,
        name: &str,
    ) -> Result<String, LayoutError> {
        let valid = !name.is_empty()
            && name.len() <= MAX_SHARED_NAME_LEN
            && name != "."
            && name != ".."
            && !Self::is_temp_file_name(name)
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
        if !valid {
            return Err(LayoutError::BadSharedName {
                task: task.clone(),
                name: name.to_owned(),
            });
        }
        let state_file = Self::state_file_name(task)?;
        let stem = state_file
            .strip_suffix(STATE_SUFFIX)
            .expect("a state file name ends with its suffix");
        Ok(format!("{:0width$}.{stem}.{name}", id.0, width = ID_WIDTH))
    }

    /// The checkpoint that wrote shared file `name`, read from the name
    /// [`shared_file_name`](Self::shared_file_name) gave it (or from its
    /// temporary file's); `None` for a name it does not write.
    pub fn shared_file_writer(name: &str) -> Option<CheckpointId> {
        let (digits, rest) = name.split_once('.')?;
        if digits.len() != ID_WIDTH
            || rest.is_empty()
            || !digits.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(CheckpointId(digits.parse().ok()?))
    }

    /// The name `task` gave shared file `name` (a store's file name), read from the name
    /// [`shared_file_name`](Self::shared_file_name) gave it; `None` when `name` is not one of
    /// `task`'s.
    pub fn own_shared_name<'a>(name: &'a str, task: &TaskId) -> Option<&'a str> {
        Self::shared_file_writer(name)?;
        let state_file = Self::state_file_name(task).ok()?;
        let stem = state_file.strip_suffix(STATE_SUFFIX)?;
        let own = name[ID_WIDTH + 1..].strip_prefix(stem)?.strip_prefix('.')?;
        (!own.is_empty()).then_some(own)
    }

    /// The directory holding savepoints.
    pub fn savepoint_root(&self) -> PathBuf {
        match &self.savepoint_dir {
            Some(dir) => dir.clone(),
            None => self.job_dir.join(SAVEPOINTS_DIR),
        }
    }

    /// The directory that holds directories of `kind`.
    pub fn root(&self, kind: CheckpointKind) -> PathBuf {
        match kind {
            CheckpointKind::Checkpoint => self.job_dir.clone(),
            CheckpointKind::Savepoint => self.savepoint_root(),
        }
    }

    /// The directory name of a checkpoint: `chk-0000000007` or `sp-0000000007`.
    pub fn dir_name(kind: CheckpointKind, id: CheckpointId) -> String {
        let prefix = match kind {
            CheckpointKind::Checkpoint => CHECKPOINT_PREFIX,
            CheckpointKind::Savepoint => SAVEPOINT_PREFIX,
        };
        format!("{prefix}{:0width$}", id.0, width = ID_WIDTH)
    }

    /// Reads a directory name written by [`dir_name`](Self::dir_name) back.
    /// Only the canonical spelling is accepted (`chk-7` and
    /// `chk-00000000007` are not checkpoint directories), so one id has one
    /// directory.
    pub fn parse_dir_name(name: &str) -> Option<(CheckpointKind, CheckpointId)> {
        let (kind, digits) = if let Some(rest) = name.strip_prefix(CHECKPOINT_PREFIX) {
            (CheckpointKind::Checkpoint, rest)
        } else if let Some(rest) = name.strip_prefix(SAVEPOINT_PREFIX) {
            (CheckpointKind::Savepoint, rest)
        } else {
            return None;
        };
        if digits.len() < ID_WIDTH || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let id = CheckpointId(digits.parse().ok()?);
        (Self::dir_name(kind, id) == name).then_some((kind, id))
    }

    /// The directory of checkpoint `id` of `kind`.
    pub fn checkpoint_dir(&self, kind: CheckpointKind, id: CheckpointId) -> PathBuf {
        self.root(kind).join(Self::dir_name(kind, id))
    }

    /// The location of checkpoint `id` of `kind` in this job's storage.
    pub fn location(&self, kind: CheckpointKind, id: CheckpointId) -> CheckpointLocation {
        CheckpointLocation::new(self.checkpoint_dir(kind, id))
    }

    /// The metadata file of the checkpoint at `location`.
    pub fn metadata_file(location: &CheckpointLocation) -> PathBuf {
        location.dir.join(METADATA_FILE)
    }

    /// The state file name of `task`: `<escaped vertex>-<subtask>.state`.
    pub fn state_file_name(task: &TaskId) -> Result<String, LayoutError> {
        if task.vertex.is_empty() {
            return Err(LayoutError::EmptyVertex { task: task.clone() });
        }
        let escaped = escape_vertex(&task.vertex);
        if escaped.len() > MAX_ESCAPED_VERTEX_LEN {
            return Err(LayoutError::VertexNameTooLong {
                task: task.clone(),
                escaped_len: escaped.len(),
                max: MAX_ESCAPED_VERTEX_LEN,
            });
        }
        Ok(format!("{escaped}-{}{STATE_SUFFIX}", task.subtask))
    }

    /// Reads a state file name back into the task it belongs to; `None` if
    /// `name` is not one [`state_file_name`](Self::state_file_name) writes.
    pub fn parse_state_file_name(name: &str) -> Option<TaskId> {
        let stem = name.strip_suffix(STATE_SUFFIX)?;
        let (escaped, subtask) = stem.rsplit_once('-')?;
        let subtask: u32 = subtask.parse().ok()?;
        let task = TaskId::new(unescape_vertex(escaped)?, subtask);
        (Self::state_file_name(&task).ok()? == name).then_some(task)
    }

    /// The state file of `task` in checkpoint `id` of `kind`.
    pub fn state_file(
        &self,
        kind: CheckpointKind,
        id: CheckpointId,
        task: &TaskId,
    ) -> Result<PathBuf, LayoutError> {
        Ok(self
            .checkpoint_dir(kind, id)
            .join(Self::state_file_name(task)?))
    }

    /// The path of file `name` (read from metadata, so untrusted) inside the
    /// checkpoint at `location`. Refuses any name that is not a plain file
    /// name, so corrupt or hostile metadata cannot make a restore read
    /// outside the checkpoint directory.
    pub fn file_in(location: &CheckpointLocation, name: &str) -> Result<PathBuf, LayoutError> {
        if !Self::is_plain_file_name(name) {
            return Err(LayoutError::UnsafeFileName {
                dir: location.dir.clone(),
                name: name.to_owned(),
            });
        }
        Ok(location.dir.join(name))
    }

    /// The temporary file `path` is first written to: `<path>.tmp`, in the
    /// same directory, so the final rename never crosses file systems.
    pub fn temp_file(path: &Path) -> PathBuf {
        let mut name = path.as_os_str().to_owned();
        name.push(TEMP_SUFFIX);
        PathBuf::from(name)
    }

    /// The temporary file of one writer of `path` among several that may race to create it
    /// (two runs claiming a generation, workers making the job's id): `x.<pid>-<n>.tmp`, `n`
    /// counting this process's writes. With one `x.tmp` for all, a loser could overwrite the
    /// winner's temporary file just before the winner published it.
    pub fn writer_temp_file(path: &Path) -> PathBuf {
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".{}-{n}{TEMP_SUFFIX}", std::process::id()));
        PathBuf::from(name)
    }

    /// The name a temporary file `name` becomes: `x` for `x.tmp` and for `x.<pid>-<n>.tmp`
    /// ([`writer_temp_file`](Self::writer_temp_file)); `None` if it is no temporary file.
    pub fn temp_target(name: &str) -> Option<&str> {
        let stem = name.strip_suffix(TEMP_SUFFIX)?;
        let writer = stem.rsplit_once('.').filter(|(_, marker)| {
            marker.split_once('-').is_some_and(|(pid, n)| {
                !pid.is_empty()
                    && !n.is_empty()
                    && pid.bytes().chain(n.bytes()).all(|b| b.is_ascii_digit())
            })
        });
        Some(writer.map_or(stem, |(target, _)| target))
    }

    /// Whether a file name is that of a temporary file.
    pub fn is_temp_file_name(name: &str) -> bool {
        name.ends_with(TEMP_SUFFIX)
    }

    /// Whether `name` (read from metadata) may name a state file: a file
    /// directly inside the checkpoint directory — not empty, not `.`/`..`, no
    /// separator of any platform, no NUL, not the metadata file, not a
    /// temporary file.
    pub fn is_plain_file_name(name: &str) -> bool {
        !name.is_empty()
            && name != "."
            && name != ".."
            && name != METADATA_FILE
            && !Self::is_temp_file_name(name)
            && !name.contains(['/', '\\', '\0', ':'])
    }
}

/// Whether a byte of a vertex name is kept as is in a file name.
fn is_kept(byte: u8) -> bool {
    byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_' || byte == b'-'
}

/// Escapes a vertex name for a file name: kept bytes stay, every other byte
/// of the UTF-8 encoding becomes `%XX` (upper-case hex).
fn escape_vertex(vertex: &str) -> String {
    let mut out = String::with_capacity(vertex.len());
    for byte in vertex.bytes() {
        if is_kept(byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Inverse of [`escape_vertex`]; `None` for anything it does not produce.
fn unescape_vertex(escaped: &str) -> Option<String> {
    let bytes = escaped.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = escaped.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else if is_kept(bytes[i]) {
            out.push(bytes[i]);
            i += 1;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn layout() -> CheckpointLayout {
        CheckpointLayout::new("/jobs/wc")
    }

    #[test]
    fn a_writers_temporary_file_is_its_own_and_names_what_it_becomes() {
        let path = Path::new("/jobs/wc/chk-0000000007/_metadata");
        let (a, b) = (
            CheckpointLayout::writer_temp_file(path),
            CheckpointLayout::writer_temp_file(path),
        );
        assert_ne!(a, b);
        for temp in [&a, &b] {
            let name = temp.file_name().unwrap().to_str().unwrap();
            assert!(CheckpointLayout::is_temp_file_name(name), "{name}");
            assert_eq!(
                CheckpointLayout::temp_target(name),
                Some("_metadata"),
                "{name}"
            );
        }
        assert_eq!(
            CheckpointLayout::temp_target("count-1.state.tmp"),
            Some("count-1.state")
        );
        assert_eq!(CheckpointLayout::temp_target("a.b-c.tmp"), Some("a.b-c"));
        assert_eq!(CheckpointLayout::temp_target("_metadata"), None);
    }

    #[test]
    fn checkpoint_and_savepoint_dirs_are_zero_padded() {
        let l = layout();
        assert_eq!(
            l.checkpoint_dir(CheckpointKind::Checkpoint, CheckpointId(7)),
            Path::new("/jobs/wc/chk-0000000007")
        );
        assert_eq!(
            l.checkpoint_dir(CheckpointKind::Savepoint, CheckpointId(12)),
            Path::new("/jobs/wc/savepoints/sp-0000000012")
        );
        let l = l.with_savepoint_dir("/backups/wc");
        assert_eq!(
            l.checkpoint_dir(CheckpointKind::Savepoint, CheckpointId(12)),
            Path::new("/backups/wc/sp-0000000012")
        );
    }

    #[test]
    fn lexical_order_of_dir_names_is_numeric_order() {
        let mut names: Vec<String> = [3u64, 10, 200, 9_999_999_999, 1]
            .iter()
            .map(|&id| CheckpointLayout::dir_name(CheckpointKind::Checkpoint, CheckpointId(id)))
            .collect();
        names.sort();
        let ids: Vec<u64> = names
            .iter()
            .map(|n| CheckpointLayout::parse_dir_name(n).unwrap().1.0)
            .collect();
        assert_eq!(ids, [1, 3, 10, 200, 9_999_999_999]);
    }

    #[test]
    fn parses_dir_names_back_and_rejects_other_spellings() {
        assert_eq!(
            CheckpointLayout::parse_dir_name("chk-0000000007"),
            Some((CheckpointKind::Checkpoint, CheckpointId(7)))
        );
        assert_eq!(
            CheckpointLayout::parse_dir_name("sp-0000000012"),
            Some((CheckpointKind::Savepoint, CheckpointId(12)))
        );
        assert_eq!(
            CheckpointLayout::parse_dir_name("chk-12345678901"),
            Some((CheckpointKind::Checkpoint, CheckpointId(12_345_678_901)))
        );
        for bad in [
            "chk-7",
            "chk-00000000007",
            "chk-000000000x",
            "chk-+000000007",
            "savepoints",
            "sp-",
            "chk-0000000007.tmp",
            "CHK-0000000007",
            "chk-99999999999999999999999",
        ] {
            assert_eq!(CheckpointLayout::parse_dir_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn state_file_names_keep_plain_names_readable() {
        let name = CheckpointLayout::state_file_name(&TaskId::new("count", 1)).unwrap();
        assert_eq!(name, "count-1.state");
        let name = CheckpointLayout::state_file_name(&TaskId::new("key-hash_2", 0)).unwrap();
        assert_eq!(name, "key-hash_2-0.state");
    }

    #[test]
    fn odd_vertex_names_cannot_escape_the_checkpoint_dir() {
        let l = layout();
        let dir = l.checkpoint_dir(CheckpointKind::Checkpoint, CheckpointId(1));
        for vertex in [
            "..",
            ".",
            "../../etc/passwd",
            "/abs",
            "a/b",
            "a\\b",
            "C:x",
            "_metadata",
            "x.tmp",
            ".hidden",
            "nul\0byte",
            "ünïcödé",
            "Count",
            "%41",
        ] {
            let task = TaskId::new(vertex, 3);
            let path = l
                .state_file(CheckpointKind::Checkpoint, CheckpointId(1), &task)
                .unwrap();
            assert_eq!(path.parent(), Some(dir.as_path()), "{vertex:?} -> {path:?}");
            let name = path.file_name().unwrap().to_str().unwrap();
            assert!(
                CheckpointLayout::is_plain_file_name(name),
                "{vertex:?} -> {name:?}"
            );
            assert!(!name.starts_with('.'), "{vertex:?} -> {name:?}");
            assert_eq!(CheckpointLayout::parse_state_file_name(name), Some(task));
        }
    }

    #[test]
    fn upper_case_is_escaped_so_case_insensitive_file_systems_do_not_merge_vertices() {
        let upper = CheckpointLayout::state_file_name(&TaskId::new("Count", 0)).unwrap();
        let lower = CheckpointLayout::state_file_name(&TaskId::new("count", 0)).unwrap();
        assert_ne!(upper.to_lowercase(), lower.to_lowercase());
    }

    #[test]
    fn empty_and_overlong_vertex_names_are_refused() {
        assert!(matches!(
            CheckpointLayout::state_file_name(&TaskId::new("", 0)),
            Err(LayoutError::EmptyVertex { .. })
        ));
        let err = CheckpointLayout::state_file_name(&TaskId::new("/".repeat(100), 0)).unwrap_err();
        assert!(matches!(
            err,
            LayoutError::VertexNameTooLong {
                escaped_len: 300,
                ..
            }
        ));
        assert!(err.to_string().contains("use a shorter vertex name"));
    }

    #[test]
    fn file_in_refuses_names_that_leave_the_directory() {
        let loc = CheckpointLocation::new("/jobs/wc/chk-0000000001");
        assert_eq!(
            CheckpointLayout::file_in(&loc, "count-0.state").unwrap(),
            Path::new("/jobs/wc/chk-0000000001/count-0.state")
        );
        for bad in [
            "",
            ".",
            "..",
            "../x.state",
            "/etc/passwd",
            "a\\b",
            "_metadata",
            "x.tmp",
        ] {
            assert!(CheckpointLayout::file_in(&loc, bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn temp_file_is_beside_its_target() {
        let tmp = CheckpointLayout::temp_file(Path::new("/jobs/wc/chk-0000000001/_metadata"));
        assert_eq!(tmp, Path::new("/jobs/wc/chk-0000000001/_metadata.tmp"));
        assert!(CheckpointLayout::is_temp_file_name("_metadata.tmp"));
    }

    #[test]
    fn location_knows_its_name() {
        let loc = layout().location(CheckpointKind::Savepoint, CheckpointId(4));
        assert_eq!(loc.name(), "sp-0000000004");
        assert_eq!(
            loc.parsed_name(),
            Some((CheckpointKind::Savepoint, CheckpointId(4)))
        );
        assert_eq!(CheckpointLocation::new("/backups/mine").parsed_name(), None);
    }

    proptest! {
        #[test]
        fn any_vertex_name_maps_to_one_plain_file_name(vertex in "\\PC{1,80}", subtask: u32) {
            let task = TaskId::new(vertex, subtask);
            let name = match CheckpointLayout::state_file_name(&task) {
                Ok(name) => name,
                Err(LayoutError::VertexNameTooLong { escaped_len, .. }) => {
                    prop_assert!(escaped_len > MAX_ESCAPED_VERTEX_LEN);
                    return Ok(());
                }
                Err(e) => return Err(TestCaseError::fail(e.to_string())),
            };
            prop_assert!(name.len() + TEMP_SUFFIX.len() <= 255);
            prop_assert!(CheckpointLayout::is_plain_file_name(&name));
            prop_assert!(!name.starts_with('.'));
            prop_assert_eq!(CheckpointLayout::parse_state_file_name(&name), Some(task));
        }

        #[test]
        fn dir_names_round_trip(id: u64, savepoint: bool) {
            let kind = if savepoint { CheckpointKind::Savepoint } else { CheckpointKind::Checkpoint };
            let name = CheckpointLayout::dir_name(kind, CheckpointId(id));
            prop_assert_eq!(CheckpointLayout::parse_dir_name(&name), Some((kind, CheckpointId(id))));
        }
    }

    #[test]
    fn a_shared_files_name_gives_back_its_tasks_own_name_for_it_and_no_other_tasks() {
        let count = TaskId::new("count", 1);
        let name =
            CheckpointLayout::shared_file_name(CheckpointId(7), &count, "000012.sst").unwrap();
        assert_eq!(
            CheckpointLayout::own_shared_name(&name, &count),
            Some("000012.sst")
        );
        for other in [
            TaskId::new("count", 11),
            TaskId::new("count", 0),
            TaskId::new("c", 1),
        ] {
            assert_eq!(
                CheckpointLayout::own_shared_name(&name, &other),
                None,
                "{other}"
            );
        }
        for garbage in [
            "",
            "7.count-1.x",
            "0000000007.count-1.",
            "0000000007.count-1",
        ] {
            assert_eq!(
                CheckpointLayout::own_shared_name(garbage, &count),
                None,
                "{garbage:?}"
            );
        }
    }
}
