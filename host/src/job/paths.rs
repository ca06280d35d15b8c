//! Paths of one job that must not overlap: a file sink's directory, another's, the checkpoint
//! directory, and the file a file source reads.
//!
//! Two file sinks in one directory commit part files of the same names, one rename replacing
//! the other's output; a sink inside the checkpoint directory (or around it) has its files
//! touched by checkpoint cleanup and the other way round; a file source reading a sink's
//! directory reads the job's own output, which the sink replaces as it commits.
//!
//! Validation compares the paths lexically (made absolute, `.` and `..` resolved), so the
//! check needs no disk; [`Job::check_files`] compares them again with symlinks resolved, where
//! the directories exist. It is here, with the other checks of what the disk says (an
//! operator's module and a file source's file exist and are regular files), because those are
//! all a job's paths meeting the disk, a step apart from validating the text.

use std::fs;
use std::path::{Component, Path, PathBuf};

use super::error::{JobError, Location, Overlap, PathUse, Problem};
use super::graph::{Job, SinkKind, SourceKind, Vertex, VertexKind};

impl PathUse {
    /// What `vertex`'s path is for, and the path: a file sink's directory or a file source's
    /// file; `None` for vertices without a path.
    pub fn of(vertex: &Vertex) -> Option<(PathUse, &Path)> {
        let (name, line) = (vertex.name.clone(), vertex.line);
        match &vertex.kind {
            VertexKind::Sink(SinkKind::File { directory }) => {
                Some((PathUse::FileSink { name, line }, directory))
            }
            VertexKind::Source(SourceKind::File { path, .. }) => {
                Some((PathUse::FileSource { name, line }, path))
            }
            _ => None,
        }
    }
}

/// `path` made absolute (against the current directory, without touching the disk) with `.`
/// and `..` resolved lexically.
pub(crate) fn lexical(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut out = PathBuf::new();
    for component in absolute.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// [`lexical`], then with symlinks resolved: the longest part of the path that exists is
/// canonicalized and the rest appended.
pub(crate) fn canonical(path: &Path) -> PathBuf {
    let lexical = lexical(path);
    let mut existing = lexical.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return lexical,
        }
    }
}

/// How `second` stands to `first`, if they overlap.
fn overlap(first: &Path, second: &Path) -> Option<Overlap> {
    if first == second {
        Some(Overlap::Same)
    } else if second.starts_with(first) {
        Some(Overlap::Inside)
    } else if first.starts_with(second) {
        Some(Overlap::Around)
    } else {
        None
    }
}

/// Whether two uses of paths may not overlap as they do.
fn conflicts(first: &PathUse, second: &PathUse, how: Overlap) -> bool {
    use PathUse::{CheckpointDirectory, FileSink, FileSource};
    match (first, second) {
        (FileSink { .. } | CheckpointDirectory, FileSink { .. } | CheckpointDirectory) => true,
        // A source may read a file next to a sink's directory, not in it.
        (FileSink { .. }, FileSource { .. }) => how != Overlap::Around,
        (FileSource { .. }, FileSink { .. }) => how != Overlap::Inside,
        _ => false,
    }
}

/// The first pair of `paths` (already made comparable) that overlap where they must not, in
/// order: the indices of the first and the second, and the problem to report.
pub(crate) fn first_conflict(paths: &[(PathUse, PathBuf)]) -> Option<(usize, usize, Problem)> {
    for (j, (second, second_path)) in paths.iter().enumerate() {
        for (i, (first, first_path)) in paths[..j].iter().enumerate() {
            if let Some(how) = overlap(first_path, second_path)
                && conflicts(first, second, how)
            {
                let problem = Problem::PathsOverlap {
                    first: first.clone(),
                    first_path: first_path.clone(),
                    second: second.clone(),
                    second_path: second_path.clone(),
                    overlap: how,
                };
                return Some((i, j, problem));
            }
        }
    }
    None
}

impl Job {
    /// Checks that every operator's module file exists and is a regular file, naming the
    /// first one that is not (at its `module` line). A separate step so a job file can
    /// be validated — in tests, or by `weir check` — before the guests are built.
    pub fn check_modules_exist(&self) -> Result<(), JobError> {
        for vertex in &self.vertices {
            let Some(operator) = vertex.operator() else {
                continue;
            };
            let problem = match fs::metadata(&operator.module) {
                Ok(meta) if meta.is_file() => continue,
                Ok(meta) => Problem::ModuleNotAFile {
                    operator: vertex.name.clone(),
                    path: operator.module.clone(),
                    kind: crate::wasm::file_kind(&meta.file_type()),
                },
                Err(_) => Problem::ModuleMissing {
                    operator: vertex.name.clone(),
                    path: operator.module.clone(),
                },
            };
            return Err(self.error_at(operator.module_line, problem));
        }
        Ok(())
    }

    /// What validation cannot see without the disk: [`Job::check_modules_exist`]; every file
    /// source without `follow` reads a file that exists, and no file source reads a directory,
    /// a FIFO or a device; and no two file sinks, nor a file sink and the checkpoint directory, nor a
    /// file source and a file sink's directory, meet once symlinks are resolved.
    pub fn check_files(&self) -> Result<(), JobError> {
        self.check_modules_exist()?;
        for vertex in &self.vertices {
            let VertexKind::Source(SourceKind::File { path, follow, .. }) = &vertex.kind else {
                continue;
            };
            let problem = match fs::metadata(path) {
                // Not a FIFO: it cannot be read again from a checkpoint's offset (and opening
                // one with no writer blocks the task for good).
                Ok(meta) if meta.is_file() => continue,
                Ok(meta) => Problem::SourceNotAFile {
                    source_name: vertex.name.clone(),
                    path: path.clone(),
                    kind: crate::wasm::file_kind(&meta.file_type()),
                },
                Err(_) if *follow => continue,
                Err(_) => Problem::SourceMissing {
                    source_name: vertex.name.clone(),
                    path: path.clone(),
                },
            };
            return Err(self.error_at(vertex.line, problem));
        }
        let mut vertices: Vec<&Vertex> = self.vertices.iter().collect();
        vertices.sort_by_key(|v| v.line);
        let mut uses = vec![(
            PathUse::CheckpointDirectory,
            canonical(&self.checkpoint.directory),
        )];
        let mut lines = vec![None];
        for vertex in vertices {
            let Some((use_, path)) = PathUse::of(vertex) else {
                continue;
            };
            uses.push((use_, canonical(path)));
            lines.push(Some(vertex.line));
        }
        if let Some((i, j, problem)) = first_conflict(&uses) {
            let line = lines[j].or(lines[i]).unwrap_or(1);
            return Err(self.error_at(line, problem));
        }
        Ok(())
    }

    /// A validation error at the start of `line` of the job file.
    fn error_at(&self, line: usize, problem: Problem) -> JobError {
        JobError::Invalid {
            at: Location {
                file: self.file.clone(),
                line,
                column: 1,
            },
            problem: Box::new(problem),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_resolves_dots_without_the_disk() {
        assert_eq!(lexical(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(lexical(Path::new("/a/b/")), PathBuf::from("/a/b"));
        assert_eq!(lexical(Path::new("/../a")), PathBuf::from("/a"));
    }

    #[test]
    fn nesting_is_by_whole_components() {
        assert_eq!(
            overlap(Path::new("/o"), Path::new("/o/p")),
            Some(Overlap::Inside)
        );
        assert_eq!(
            overlap(Path::new("/o/p"), Path::new("/o")),
            Some(Overlap::Around)
        );
        assert_eq!(overlap(Path::new("/o"), Path::new("/output")), None);
    }
}
