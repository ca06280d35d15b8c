//! What a job left on disk: the committed output of its file sink, its in-progress files, and
//! its checkpoint directories, read the way a restore reads them.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

/// Every line of every committed part file in `dir` (all subtasks; in-progress parts, whose
/// names start with a dot, are not output), sorted: the committed output as a multiset.
pub(crate) fn committed_lines(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return lines;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name.starts_with('.') {
            continue;
        }
        let text = fs::read_to_string(entry.path()).unwrap();
        lines.extend(text.lines().map(str::to_string));
    }
    lines.sort_unstable();
    lines
}

/// The names of the in-progress (dot) files in the sink's directory.
pub(crate) fn in_progress_files(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.') && n.ends_with(".inprogress"))
        .collect();
    names.sort();
    names
}

/// Asserts that the file sink's committed output in `dir` is `expected` (see
/// [`assert_same_output`]) and that no in-progress part is left beside it: what a job that
/// ended cleanly after a failure, a restore or a stop must leave.
#[track_caller]
pub(crate) fn assert_committed_output(dir: &Path, expected: &[String], context: &str) {
    assert_same_output(&committed_lines(dir), expected, context);
    assert_eq!(
        in_progress_files(dir),
        Vec::<String>::new(),
        "{context}: in-progress parts remain"
    );
}

/// Asserts that two sorted multisets of lines are equal; otherwise fails with how many lines
/// are missing and how many extra, and a few of each.
pub(crate) fn assert_same_output(actual: &[String], expected: &[String], context: &str) {
    if actual == expected {
        return;
    }
    let (mut missing, mut extra) = (Vec::new(), Vec::new());
    let (mut a, mut e) = (0, 0);
    while a < actual.len() || e < expected.len() {
        match (actual.get(a), expected.get(e)) {
            (Some(x), Some(y)) if x == y => {
                a += 1;
                e += 1;
            }
            (Some(x), Some(y)) if x < y => {
                extra.push(x);
                a += 1;
            }
            (Some(x), None) => {
                extra.push(x);
                a += 1;
            }
            (_, Some(y)) => {
                missing.push(y);
                e += 1;
            }
            (None, None) => unreachable!(),
        }
    }
    panic!(
        "{context}: the committed output differs from the failure-free reference: {} lines, \
         expected {}; {} missing (lost), e.g. {:?}; {} extra (duplicated), e.g. {:?}",
        actual.len(),
        expected.len(),
        missing.len(),
        &missing[..missing.len().min(5)],
        extra.len(),
        &extra[..extra.len().min(5)],
    );
}

/// A `chk-<id>` directory found in a checkpoint directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckpointDir {
    /// Its id.
    pub(crate) id: u64,
    /// Its path.
    pub(crate) path: PathBuf,
    /// Whether its `_metadata` exists (the checkpoint completed).
    pub(crate) complete: bool,
}

/// The `chk-` directories of `dir`, oldest first.
pub(crate) fn checkpoint_dirs(dir: &Path) -> Vec<CheckpointDir> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<CheckpointDir> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            let id = path
                .file_name()?
                .to_str()?
                .strip_prefix("chk-")?
                .parse()
                .ok()?;
            Some(CheckpointDir {
                id,
                complete: path.join("_metadata").is_file(),
                path,
            })
        })
        .collect();
    found.sort_by_key(|c| c.id);
    found
}

/// The ids of the complete checkpoints in `dir`, oldest first.
pub(crate) fn complete_checkpoint_ids(dir: &Path) -> Vec<u64> {
    checkpoint_dirs(dir)
        .into_iter()
        .filter(|c| c.complete)
        .map(|c| c.id)
        .collect()
}

/// The checkpoint directories of `dir` without `_metadata` (failed, or never finished), oldest
/// first.
pub(crate) fn incomplete_checkpoints(dir: &Path) -> Vec<CheckpointDir> {
    let mut dirs = checkpoint_dirs(dir);
    dirs.retain(|c| !c.complete);
    dirs
}

/// Fails unless every complete checkpoint (one with `_metadata`) under `dir` verifies: its
/// metadata reads and every state file it names has the recorded length and checksum. A crash
/// may leave incomplete checkpoints behind, never a complete one that cannot be restored.
pub(crate) fn assert_complete_checkpoints_verify(dir: &Path, context: &str) {
    use weir::checkpoint::layout::CheckpointLayout;
    use weir::checkpoint::restore::verify;
    use weir::checkpoint::storage::{CheckpointStorage as _, LocalStorage};
    let storage = LocalStorage::new(CheckpointLayout::new(dir));
    for checkpoint in checkpoint_dirs(dir).into_iter().filter(|c| c.complete) {
        let verified = storage
            .locate(&checkpoint.path)
            .and_then(|location| verify(&storage, &location));
        if let Err(e) = verified {
            panic!(
                "{context}: complete checkpoint {} cannot be restored: {e}",
                checkpoint.path.display()
            );
        }
    }
}

/// The complete checkpoints (not savepoints) in `dir` with their metadata, by id.
pub(crate) fn complete_checkpoints(
    dir: &Path,
) -> BTreeMap<u64, weir::checkpoint::metadata::CheckpointMetadata> {
    use weir::checkpoint::layout::CheckpointLayout;
    use weir::checkpoint::storage::{CheckpointStorage as _, LocalStorage};
    use weir::ids::CheckpointKind;
    let storage = LocalStorage::new(CheckpointLayout::new(dir));
    storage
        .list()
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l.kind == CheckpointKind::Checkpoint)
        .filter_map(|l| Some((l.id.0, l.metadata()?.clone())))
        .collect()
}
