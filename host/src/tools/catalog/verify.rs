//! `weir checkpoints verify DIR`: every file of every checkpoint read and checked, each bad
//! file named.
//!
//! Why a file of its own: verification looks at every checkpoint at full depth and judges
//! each (a verdict: sound, incomplete, removed meanwhile, failed), where the listing reads
//! only what telling them apart needs.

use super::*;

/// The verdict on one checkpoint of a [`VerifyReport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The metadata and every state file verify.
    Ok,
    /// Some file does not verify: see the problems.
    Failed,
    /// No `_metadata`: never restored, not a failure (see the module docs).
    Incomplete,
    /// It was complete when listed and removed while being verified: a
    /// running job pruned it. Not a failure.
    Removed,
}

/// One checkpoint or savepoint, verified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifiedCheckpoint {
    /// The id.
    pub id: CheckpointId,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// The directory name.
    pub name: String,
    /// Its directory.
    pub path: PathBuf,
    /// The verdict.
    pub verdict: Verdict,
    /// Every problem, naming its file.
    pub problems: Vec<FileProblem>,
    /// What is odd but harmless.
    pub warnings: Vec<FileProblem>,
    /// Files read and verified (the metadata and the state files).
    pub files_checked: usize,
    /// Bytes of the files that verified.
    pub bytes_checked: u64,
}

/// Every file of every checkpoint verified: what `weir checkpoints verify
/// DIR` shows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// Where the checkpoints were looked for.
    pub source: CatalogSource,
    /// Every checkpoint and savepoint, newest first.
    pub checkpoints: Vec<VerifiedCheckpoint>,
    /// Problems over all checkpoints.
    pub problems: usize,
    /// Warnings over all checkpoints.
    pub warnings: usize,
    /// Files read and verified over all checkpoints.
    pub files_checked: usize,
    /// Bytes of the files that verified, over all checkpoints.
    pub bytes_checked: u64,
}

impl VerifyReport {
    /// Whether nothing is wrong: no problem in any file of any complete
    /// checkpoint (incomplete ones and warnings do not count).
    pub fn ok(&self) -> bool {
        self.problems == 0
    }
}

/// Verifies every file of every checkpoint and savepoint at `path` (see
/// [`CatalogSource::resolve`]): the metadata, and every state file it
/// references (frame, length, checksum against its handle). Reports every
/// problem, each naming its file.
pub fn verify(path: &Path) -> Result<VerifyReport, CatalogError> {
    verify_source(CatalogSource::resolve(path)?)
}

/// [`verify`](fn@verify) over an already resolved source.
pub fn verify_source(source: CatalogSource) -> Result<VerifyReport, CatalogError> {
    let storage = source.storage()?;
    let storage = storage.as_ref();
    let mut listings = storage.list()?;
    listings.sort_by_key(|l| newest_first(l.kind, l.id));
    let mut checkpoints = Vec::with_capacity(listings.len());
    for listing in listings {
        checkpoints.push(verify_one(storage, listing)?);
    }
    Ok(VerifyReport {
        problems: checkpoints.iter().map(|c| c.problems.len()).sum(),
        warnings: checkpoints.iter().map(|c| c.warnings.len()).sum(),
        files_checked: checkpoints.iter().map(|c| c.files_checked).sum(),
        bytes_checked: checkpoints.iter().map(|c| c.bytes_checked).sum(),
        source,
        checkpoints,
    })
}

pub(super) fn verify_one(
    storage: &dyn CheckpointStorage,
    listing: CheckpointListing,
) -> Result<VerifiedCheckpoint, CatalogError> {
    let dir = listing.location.dir().to_owned();
    let files = files_in(storage, &listing.location)?;
    let metadata_file = CheckpointLayout::metadata_file(&listing.location);
    let mut checked = VerifiedCheckpoint {
        id: listing.id,
        kind: listing.kind,
        name: listing.name(),
        path: dir.clone(),
        verdict: Verdict::Ok,
        problems: Vec::new(),
        warnings: Vec::new(),
        files_checked: 0,
        bytes_checked: 0,
    };
    let meta = match listing.status {
        ListingStatus::Incomplete => {
            checked.verdict = Verdict::Incomplete;
            checked.warnings.push(FileProblem {
                message: format!("{}: {}", dir.display(), incomplete_reason(&files)),
                file: metadata_file,
            });
            return Ok(checked);
        }
        ListingStatus::Corrupt(e) => {
            checked.verdict = Verdict::Failed;
            checked.files_checked = 1;
            checked.problems.push(FileProblem {
                file: metadata_file,
                message: e.to_string(),
            });
            return Ok(checked);
        }
        ListingStatus::Complete(meta) => meta,
    };
    checked.files_checked = 1;
    checked.bytes_checked = files
        .iter()
        .find(|f| f.name == METADATA_FILE)
        .map_or(0, |f| f.bytes);
    let mut links = std::collections::BTreeMap::new();
    for entry in &meta.tasks {
        let task = check_task(storage, &listing.location, &files, entry, Depth::Full);
        checked.files_checked += 1;
        match task.problem {
            Some(message) => checked.problems.push(FileProblem {
                file: dir.join(&task.file),
                message,
            }),
            None => checked.bytes_checked += task.file_bytes,
        }
        // An image delta: the states it builds on, in earlier checkpoints.
        if let Err(e) = restore::read_chain(storage, &listing.location, entry, &mut links) {
            checked.problems.push(FileProblem {
                file: dir.join(&entry.handle.file),
                message: e.to_string(),
            });
        }
        // The files of the job's shared directory the state names.
        for file in &entry.shared {
            checked.files_checked += 1;
            match storage.read_shared(&listing.location, file) {
                Ok(_) => checked.bytes_checked += file.length,
                Err(e) => checked.problems.push(FileProblem {
                    file: listing
                        .location
                        .shared_file(&file.name)
                        .unwrap_or_else(|_| dir.clone()),
                    message: e.to_string(),
                }),
            }
        }
    }
    if !checked.problems.is_empty() {
        if !removed_meanwhile(storage, &listing.location) {
            checked.verdict = Verdict::Failed;
        } else {
            // Un-published since it was listed: pruning removes the
            // metadata first. Its files going is expected, not damage.
            checked.verdict = Verdict::Removed;
            checked.problems.clear();
            checked.warnings.push(FileProblem {
                message: format!(
                    "{} was removed while being verified (pruned by the running job)",
                    dir.display()
                ),
                file: dir.clone(),
            });
            return Ok(checked);
        }
    }
    let (temp, other) = unexpected_files(&files, &meta);
    checked
        .warnings
        .extend(temp.iter().map(|f| temp_file_warning(&dir, &f.name)));
    checked
        .warnings
        .extend(other.iter().map(|f| other_file_warning(&dir, &f.name)));
    Ok(checked)
}
