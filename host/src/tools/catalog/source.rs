//! Where `weir checkpoints` reads from: a job's checkpoint directory, a directory of
//! savepoints, a job file, or an object store URL, told apart by what they hold.
//!
//! Why a file of its own: telling what a path is (and opening the storage behind it) is the
//! one question every command of the catalog asks first, and the only one that reads the
//! local file system directly rather than through the storage trait.

use super::*;
/// What kind of path a catalog was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    /// A job file: its checkpoint directory, and the savepoints in it.
    JobFile,
    /// A job's checkpoint directory (`chk-N/`, `savepoints/sp-N/`).
    CheckpointDirectory,
    /// A directory holding savepoints directly (`sp-N/`).
    SavepointDirectory,
}

/// Where the checkpoints of a catalog are looked for: what a user-given path
/// resolved to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CatalogSource {
    /// The path as given.
    pub given: PathBuf,
    /// What it was.
    pub kind: SourceKind,
    /// The job file, when one was given (for the `--restore` hint).
    pub job_file: Option<PathBuf>,
    /// The job's name, when a job file was given.
    pub job_name: Option<String>,
    /// The directory holding `chk-N/` directories.
    pub checkpoint_dir: PathBuf,
    /// The directory holding `sp-N/` directories.
    pub savepoint_dir: PathBuf,
    /// The layout that lists them.
    #[serde(skip)]
    pub layout: CheckpointLayout,
    /// The object store they are in, if not in local directories.
    #[serde(skip)]
    pub object_store: Option<ObjectStoreUrl>,
    /// How its requests are timed and retried (the job file's, or the defaults).
    #[serde(skip)]
    pub object_store_options: ObjectStoreOptions,
}

impl CatalogSource {
    /// Resolves a user-given path: a job's checkpoint directory, a directory
    /// of savepoints, or a job file (`.toml`). A job file's directory need
    /// not exist yet (a job that never checkpointed lists as empty); a
    /// directory given directly must hold checkpoints (or the
    /// `_control.json` of a job running towards its first one), so that a
    /// mistyped path is not silently an empty history.
    pub fn resolve(path: &Path) -> Result<CatalogSource, CatalogError> {
        if let Some(url) = ObjectStoreUrl::parse(&path.to_string_lossy())? {
            let layout = CheckpointLayout::new(url.as_path());
            let mut source =
                Self::with_layout(path, SourceKind::CheckpointDirectory, None, None, layout);
            source.object_store = Some(url);
            // As for a local directory: a mistyped prefix is not an empty history.
            if source.storage()?.list()?.is_empty() {
                return Err(CatalogError::NotACheckpointDirectory {
                    path: path.to_owned(),
                });
            }
            return Ok(source);
        }
        let meta = fs::metadata(path).map_err(|source| not_found_or(path, source))?;
        if meta.is_file() {
            if path.extension().is_some_and(|ext| ext == "toml") {
                return Self::from_job_file(path);
            }
            return Err(CatalogError::NotADirectory {
                path: path.to_owned(),
            });
        }
        let contents = DirContents::read(path)?;
        let layout = if contents.savepoints {
            // Savepoints directly inside: a savepoint directory (perhaps
            // with checkpoints beside them); both kinds are listed from it.
            CheckpointLayout::new(path).with_savepoint_dir(path)
        } else if contents.checkpoints || contents.savepoints_dir || contents.endpoint_file {
            CheckpointLayout::new(path)
        } else if contents.is_checkpoint(path) {
            return Err(CatalogError::OneCheckpoint {
                path: path.to_owned(),
            });
        } else {
            return Err(CatalogError::NotACheckpointDirectory {
                path: path.to_owned(),
            });
        };
        let kind = if contents.savepoints {
            SourceKind::SavepointDirectory
        } else {
            SourceKind::CheckpointDirectory
        };
        Ok(Self::with_layout(path, kind, None, None, layout))
    }

    /// The checkpoints of the job described by the job file at `path`.
    ///
    /// A job file names one directory, `[checkpoint] directory`; its
    /// savepoints are in `savepoints/` inside it (job files have no setting
    /// for a separate savepoint directory).
    pub fn from_job_file(path: &Path) -> Result<CatalogSource, CatalogError> {
        let job = Job::from_file(path).map_err(|source| CatalogError::Job {
            path: path.to_owned(),
            source,
        })?;
        let layout = job.checkpoint.layout();
        let mut source = Self::with_layout(
            path,
            SourceKind::JobFile,
            Some(path.to_owned()),
            Some(job.name),
            layout,
        );
        source.object_store = job.checkpoint.object_store;
        source.object_store_options = job.checkpoint.object_store_options;
        Ok(source)
    }

    fn with_layout(
        given: &Path,
        kind: SourceKind,
        job_file: Option<PathBuf>,
        job_name: Option<String>,
        layout: CheckpointLayout,
    ) -> CatalogSource {
        CatalogSource {
            given: given.to_owned(),
            kind,
            job_file,
            job_name,
            checkpoint_dir: layout.job_dir().to_owned(),
            savepoint_dir: layout.savepoint_root(),
            layout,
            object_store: None,
            object_store_options: ObjectStoreOptions::default(),
        }
    }

    /// The storage over this source's layout.
    pub(super) fn storage(&self) -> Result<Arc<dyn CheckpointStorage>, CatalogError> {
        Ok(match &self.object_store {
            Some(url) => Arc::new(
                ObjectStorage::open(url, self.layout.clone(), &self.object_store_options)
                    .map_err(StorageError::from)?,
            ),
            None => Arc::new(LocalStorage::new(self.layout.clone())),
        })
    }
}

/// What a directory holds, as far as telling what it is goes.
#[derive(Debug, Default)]
pub(super) struct DirContents {
    /// Some `chk-N/` directory.
    pub(super) checkpoints: bool,
    /// Some `sp-N/` directory.
    pub(super) savepoints: bool,
    /// A `savepoints/` directory.
    pub(super) savepoints_dir: bool,
    /// The `_control.json` of a running job (written before its first
    /// checkpoint completes).
    pub(super) endpoint_file: bool,
    /// A `_metadata` or `_metadata.tmp` file.
    pub(super) metadata: bool,
    /// Some `*.state` or `*.state.tmp` file.
    pub(super) state_files: bool,
}

impl DirContents {
    pub(super) fn read(dir: &Path) -> Result<DirContents, CatalogError> {
        let io_error = |source| CatalogError::Io {
            path: dir.to_owned(),
            source,
        };
        let mut contents = DirContents::default();
        // A temporary file counts as what it was to become.
        let target = |name: &str| {
            CheckpointLayout::temp_target(name)
                .unwrap_or(name)
                .to_owned()
        };
        for entry in fs::read_dir(dir).map_err(io_error)? {
            let entry = entry.map_err(io_error)?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let is_dir = entry.path().is_dir();
            match CheckpointLayout::parse_dir_name(&name) {
                Some((CheckpointKind::Checkpoint, _)) if is_dir => contents.checkpoints = true,
                Some((CheckpointKind::Savepoint, _)) if is_dir => contents.savepoints = true,
                _ if is_dir && name == SAVEPOINTS_DIR => contents.savepoints_dir = true,
                _ if !is_dir && name == ENDPOINT_FILE => contents.endpoint_file = true,
                _ if !is_dir && target(&name) == METADATA_FILE => {
                    contents.metadata = true;
                }
                _ if !is_dir && target(&name).ends_with(".state") => {
                    contents.state_files = true;
                }
                _ => {}
            }
        }
        Ok(contents)
    }

    /// Whether `dir`, holding this, is (or was meant to be) one checkpoint.
    pub(super) fn is_checkpoint(&self, dir: &Path) -> bool {
        self.metadata
            || self.state_files
            || dir
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| CheckpointLayout::parse_dir_name(n).is_some())
    }
}

pub(super) fn not_found_or(path: &Path, source: io::Error) -> CatalogError {
    if source.kind() == io::ErrorKind::NotFound {
        CatalogError::NoSuchPath {
            path: path.to_owned(),
        }
    } else {
        CatalogError::Io {
            path: path.to_owned(),
            source,
        }
    }
}
