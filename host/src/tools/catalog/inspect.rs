//! `weir checkpoints inspect PATH`: one checkpoint or savepoint, every file verified.
//!
//! Why a file of its own: inspecting reads one checkpoint at full depth (the table in the
//! catalog's module docs), from a local directory or an object store, and reports per
//! operator; it shares the per-file checks with the listing and the verification.

use super::source::{DirContents, not_found_or};
use super::*;

/// One checkpoint or savepoint, every file verified: what
/// `weir checkpoints inspect PATH` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Inspection {
    /// Its directory.
    pub path: PathBuf,
    /// The directory's name.
    pub name: String,
    /// Complete only if the metadata and every state file verify.
    pub status: EntryStatus,
    /// Every problem, naming its file: why it cannot be restored.
    pub problems: Vec<FileProblem>,
    /// What is odd but harmless (temporary files, files no metadata references).
    pub warnings: Vec<FileProblem>,
    /// The metadata, when it verifies.
    pub metadata: Option<MetadataSummary>,
    /// Total state of all tasks in bytes, from the metadata.
    pub state_bytes: Option<u64>,
    /// Bytes of all files in the directory, as found on disk.
    pub disk_bytes: u64,
    /// State per operator, from the metadata.
    pub operators: Vec<OperatorSize>,
    /// Every task's state file with its snapshot timings, each verified.
    pub tasks: Vec<TaskCheck>,
    /// The files in the directory, as found.
    pub files: Vec<DiskFile>,
}

impl Inspection {
    /// Whether the checkpoint can be restored: complete, every file verified.
    pub fn ok(&self) -> bool {
        self.status == EntryStatus::Complete && self.problems.is_empty()
    }
}

/// Reads and verifies one checkpoint or savepoint: `path` is its directory
/// or its `_metadata` file. Every state file is read and checked (frame,
/// length and checksum against its handle); every problem is reported, not
/// only the first.
pub fn inspect(path: &Path) -> Result<Inspection, CatalogError> {
    let (storage, location) = match ObjectStoreUrl::parse(&path.to_string_lossy())? {
        Some(url) => object_checkpoint(path, &url)?,
        None => local_checkpoint(path)?,
    };
    let storage = storage.as_ref();
    let dir = location.dir().to_owned();
    let files = files_in(storage, &location)?;
    let mut inspection = Inspection {
        name: location.name(),
        path: dir.clone(),
        status: EntryStatus::Complete,
        problems: Vec::new(),
        warnings: Vec::new(),
        metadata: None,
        state_bytes: None,
        disk_bytes: files.iter().map(|f| f.bytes).sum(),
        operators: Vec::new(),
        tasks: Vec::new(),
        files,
    };
    let metadata_file = CheckpointLayout::metadata_file(&location);
    match storage.read_metadata(&location) {
        Err(StorageError::MissingMetadata { .. }) => {
            inspection.status = EntryStatus::Incomplete;
            inspection.problems.push(FileProblem {
                message: format!(
                    "{}: {}",
                    dir.display(),
                    incomplete_reason(&inspection.files)
                ),
                file: metadata_file,
            });
        }
        Err(e) => {
            inspection.status = EntryStatus::Corrupt;
            inspection.problems.push(FileProblem {
                file: metadata_file,
                message: e.to_string(),
            });
        }
        Ok(meta) => {
            inspection.metadata = Some(MetadataSummary::of(&meta));
            inspection.state_bytes = Some(meta.state_bytes());
            inspection.operators = operator_sizes(&meta);
            for entry in &meta.tasks {
                let check = check_task(storage, &location, &inspection.files, entry, Depth::Full);
                if let Some(problem) = &check.problem {
                    inspection.problems.push(FileProblem {
                        file: dir.join(&check.file),
                        message: problem.clone(),
                    });
                }
                inspection.tasks.push(check);
            }
            if !inspection.problems.is_empty() {
                inspection.status = EntryStatus::Corrupt;
            }
            let (temp, other) = unexpected_files(&inspection.files, &meta);
            let warnings: Vec<FileProblem> = temp
                .iter()
                .map(|f| temp_file_warning(&dir, &f.name))
                .chain(other.iter().map(|f| other_file_warning(&dir, &f.name)))
                .collect();
            inspection.warnings = warnings;
        }
    }
    Ok(inspection)
}

/// The storage and location of the one checkpoint at local `path` (its directory or its
/// `_metadata`), checked to be one.
fn local_checkpoint(
    path: &Path,
) -> Result<(Arc<dyn CheckpointStorage>, CheckpointLocation), CatalogError> {
    let meta = fs::metadata(path).map_err(|source| not_found_or(path, source))?;
    let dir = if meta.is_dir() {
        path.to_owned()
    } else if path.file_name().is_some_and(|n| n == METADATA_FILE) {
        match path.parent().filter(|p| !p.as_os_str().is_empty()) {
            Some(parent) => parent.to_owned(),
            None => PathBuf::from("."),
        }
    } else {
        return Err(CatalogError::NotACheckpoint {
            path: path.to_owned(),
        });
    };
    let contents = DirContents::read(&dir)?;
    if !contents.is_checkpoint(&dir) {
        return Err(
            if contents.checkpoints || contents.savepoints || contents.savepoints_dir {
                CatalogError::ManyCheckpoints { path: dir }
            } else {
                CatalogError::NotACheckpoint { path: dir }
            },
        );
    }
    // Any layout reads a location; the parent's keeps paths readable.
    let layout = CheckpointLayout::new(dir.parent().unwrap_or(Path::new(".")));
    Ok((
        Arc::new(LocalStorage::new(layout)),
        CheckpointLocation::new(&dir),
    ))
}

/// The storage and location of the one checkpoint at `path` in the object store `url` (its
/// prefix, or its `_metadata`), checked to be one: it holds a `_metadata` or state files.
fn object_checkpoint(
    path: &Path,
    url: &ObjectStoreUrl,
) -> Result<(Arc<dyn CheckpointStorage>, CheckpointLocation), CatalogError> {
    let dir = if url.to_string().ends_with(&format!("/{METADATA_FILE}")) {
        url.as_path()
            .parent()
            .map(Path::to_owned)
            .unwrap_or_default()
    } else {
        url.as_path()
    };
    let layout = CheckpointLayout::new(dir.parent().unwrap_or(&dir));
    let requests = ObjectStoreOptions::default();
    let storage = ObjectStorage::open(url, layout, &requests).map_err(StorageError::from)?;
    let location = CheckpointLocation::new(&dir);
    let files = storage.files(&location)?;
    let is_checkpoint = files.iter().any(|(name, _)| {
        name == METADATA_FILE || name.ends_with(crate::checkpoint::layout::STATE_SUFFIX)
    });
    if !is_checkpoint {
        let within = ObjectStorage::open(url, CheckpointLayout::new(&dir), &requests)
            .map_err(StorageError::from)?;
        return Err(if !within.list()?.is_empty() {
            CatalogError::ManyCheckpoints { path: dir }
        } else {
            CatalogError::NotACheckpoint {
                path: path.to_owned(),
            }
        });
    }
    Ok((Arc::new(storage), location))
}
