//! The exactly-once `file` sink: a two-phase commit over part files.
//!
//! Each subtask appends lines to an in-progress part file
//! (`.part-<subtask>-<seq>.inprogress` in the output directory). At a barrier
//! it **pre-commits**: flushes and fsyncs the part, closes it, and records it
//! in its snapshot as pending for that checkpoint. When the checkpoint
//! completes it **commits**: renames each pending part to its final name
//! (`part-<subtask>-<seq>`), which is atomic. On restore it commits the parts
//! the restored checkpoint had pre-committed (idempotently: a part already
//! renamed is left alone) and deletes every other in-progress part of the
//! subtask — their records are replayed by the sources.
//!
//! So the final files hold exactly the records of completed checkpoints: a
//! reader that ignores dot-files sees exactly-once output.
//!
//! **At another parallelism** ([`super::inherited`]) each old subtask's state goes to one new
//! subtask, old `i` to new `i mod p`, which commits that subtask's pre-committed parts and
//! deletes its other in-progress parts, under the old subtask's names, before its own; subtask
//! 0 also deletes the in-progress parts of subtasks beyond both parallelisms (a run at another
//! parallelism after the checkpoint left them). Renames are idempotent, so a crash anywhere in
//! there is repaired by the next restore of the same checkpoint.

use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use weir_abi::Batch;

use super::connector::{RescaleRule, SinkConnector, TaskContext};
use super::inherited::{self, Inherited};
use super::record::write_record_line;
use crate::checkpoint::format::create_dir_durable;
use crate::dataflow::error::{ConnectorFailure, TaskError};
use crate::dataflow::processor::Processor;
use crate::dataflow::router::Router;
use crate::ids::Barrier;
use crate::ids::CheckpointId;
use crate::kill_point::{self, KillPoint};

/// A part pre-committed at a checkpoint and not yet committed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PendingPart {
    checkpoint: CheckpointId,
    seq: u64,
}

/// One subtask of the exactly-once file sink.
#[derive(Debug)]
pub(crate) struct FileSink {
    dir: PathBuf,
    subtask: u32,
    /// How many subtasks the sink has.
    parallelism: u32,
    /// The part being written: its sequence number and writer.
    current: Option<(u64, BufWriter<File>)>,
    /// Sequence number of the next part.
    next_seq: u64,
    pending: Vec<PendingPart>,
    /// Whether leftovers of an earlier run were dealt with (by `restore`, or
    /// by a fresh start on the first call).
    recovered: bool,
    line: Vec<u8>,
}

impl FileSink {
    /// Subtask `subtask` of `parallelism` writing into `dir` (created if missing).
    ///
    /// Nothing on disk is touched until the first call: then either
    /// [`restore`](Processor::restore) recovers the parts of the restored
    /// checkpoint, or, on a fresh start, leftover in-progress parts are
    /// deleted. Numbering continues after the highest part of this subtask
    /// already in the directory, so a new run never overwrites committed output.
    pub(crate) fn new(dir: PathBuf, subtask: u32, parallelism: u32) -> Result<Self, TaskError> {
        // Durably: a power loss right after the first commit must not lose the directory's
        // own entry, and with it every part committed in it.
        create_dir_durable(&dir)
            .map_err(|e| io_error(&e.path, "cannot create the output directory", e.source))?;
        Ok(FileSink {
            dir,
            subtask,
            parallelism,
            current: None,
            next_seq: 0,
            pending: Vec::new(),
            recovered: false,
            line: Vec::new(),
        })
    }

    /// On a fresh start: drops in-progress leftovers and picks the next part number.
    fn ensure_recovered(&mut self) -> Result<(), TaskError> {
        if !self.recovered {
            self.discard_in_progress(self.subtask)?;
            self.next_seq = self.highest_existing_seq()?.map_or(0, |s| s + 1);
            self.recovered = true;
        }
        Ok(())
    }

    fn in_progress_path(&self, seq: u64) -> PathBuf {
        self.in_progress_path_of(self.subtask, seq)
    }

    /// Subtask `subtask`'s committed part `seq`.
    fn final_path_of(&self, subtask: u32, seq: u64) -> PathBuf {
        self.dir.join(format!("part-{subtask:04}-{seq:010}"))
    }

    /// Subtask `subtask`'s in-progress part `seq`.
    fn in_progress_path_of(&self, subtask: u32, seq: u64) -> PathBuf {
        self.dir
            .join(format!(".part-{subtask:04}-{seq:010}.inprogress"))
    }

    /// Every part in the directory, of every subtask.
    fn list_parts(&self) -> Result<Vec<PartName>, TaskError> {
        let entries = fs::read_dir(&self.dir).map_err(|e| io_error(&self.dir, "cannot list", e))?;
        let mut parts = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&self.dir, "cannot list", e))?;
            if let Some(p) = entry.file_name().to_str().and_then(PartName::parse) {
                parts.push(p);
            }
        }
        Ok(parts)
    }

    fn highest_existing_seq(&self) -> Result<Option<u64>, TaskError> {
        Ok(self
            .list_parts()?
            .into_iter()
            .filter(|p| p.subtask == self.subtask)
            .map(|p| p.seq)
            .max())
    }

    /// Deletes the in-progress parts of the subtasks `which` selects.
    fn discard_in_progress_where(&self, which: impl Fn(u32) -> bool) -> Result<(), TaskError> {
        for part in self.list_parts()? {
            if part.in_progress && which(part.subtask) {
                let path = self.in_progress_path_of(part.subtask, part.seq);
                fs::remove_file(&path).map_err(|e| io_error(&path, "cannot delete", e))?;
            }
        }
        Ok(())
    }

    /// Deletes subtask `subtask`'s in-progress parts.
    fn discard_in_progress(&self, subtask: u32) -> Result<(), TaskError> {
        self.discard_in_progress_where(|s| s == subtask)
    }

    /// Renames a pre-committed part to its final name; a part already renamed is fine.
    fn commit(&self, seq: u64) -> Result<(), TaskError> {
        self.commit_of(self.subtask, seq)
    }

    /// Renames subtask `subtask`'s pre-committed part `seq` to its final name.
    fn commit_of(&self, subtask: u32, seq: u64) -> Result<(), TaskError> {
        let from = self.in_progress_path_of(subtask, seq);
        let to = self.final_path_of(subtask, seq);
        match fs::rename(&from, &to) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && to.exists() => Ok(()),
            Err(e) => Err(io_error(
                &from,
                "cannot commit (rename to its final name)",
                e,
            )),
        }
    }

    /// Refuses a restore whose pre-committed parts are in the directory neither in progress
    /// nor committed: the checkpoint was taken with the sink writing elsewhere (its `path`
    /// changed, or the files are on another machine), and committing it would fail — or
    /// worse, go on without the output it owes. Names every missing part and the fixes.
    fn check_parts_present(
        &self,
        states: &[(u32, (u64, Vec<PendingPart>))],
    ) -> Result<(), TaskError> {
        let missing: Vec<String> = states
            .iter()
            .flat_map(|(subtask, (_, pending))| pending.iter().map(move |p| (*subtask, p)))
            .filter(|(subtask, p)| {
                !self.in_progress_path_of(*subtask, p.seq).exists()
                    && !self.final_path_of(*subtask, p.seq).exists()
            })
            .map(|(subtask, p)| {
                format!(
                    "{} (checkpoint {})",
                    self.in_progress_path_of(subtask, p.seq)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default(),
                    p.checkpoint
                )
            })
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(TaskError::Restore(format!(
            "the file sink's output directory {} lacks the parts the checkpoint left to commit: \
             {}. The checkpoint was taken with the sink writing to another directory (its `path` \
             changed, or its files are on another machine): point `path` back at that directory \
             or copy its part files here, or start the job afresh",
            self.dir.display(),
            missing.join(", ")
        )))
    }

    fn sync_dir(&self) -> Result<(), TaskError> {
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io_error(&self.dir, "cannot fsync the output directory", e))
    }

    fn encode_state(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12 + 16 * self.pending.len());
        out.extend_from_slice(&self.next_seq.to_le_bytes());
        out.extend_from_slice(&(self.pending.len() as u32).to_le_bytes());
        for p in &self.pending {
            out.extend_from_slice(&p.checkpoint.0.to_le_bytes());
            out.extend_from_slice(&p.seq.to_le_bytes());
        }
        out
    }

    fn decode_state(bytes: &[u8]) -> Result<(u64, Vec<PendingPart>), TaskError> {
        let bad = || TaskError::Restore("file sink state is malformed".to_string());
        let u64_at = |at: usize| -> Result<u64, TaskError> {
            let b = bytes.get(at..at + 8).ok_or_else(bad)?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| bad())?))
        };
        let next_seq = u64_at(0)?;
        let n = u32::from_le_bytes(
            bytes
                .get(8..12)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        ) as usize;
        if bytes.len() != 12 + 16 * n {
            return Err(bad());
        }
        let pending = (0..n)
            .map(|i| {
                Ok(PendingPart {
                    checkpoint: CheckpointId(u64_at(12 + 16 * i)?),
                    seq: u64_at(20 + 16 * i)?,
                })
            })
            .collect::<Result<_, TaskError>>()?;
        Ok((next_seq, pending))
    }
}

/// A part file's name, as [`FileSink`] writes it: `part-<subtask>-<seq>` once committed,
/// `.part-<subtask>-<seq>.inprogress` before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PartName {
    subtask: u32,
    seq: u64,
    in_progress: bool,
}

impl PartName {
    /// Reads a name back; `None` for anything the sink did not write.
    fn parse(name: &str) -> Option<PartName> {
        let (rest, in_progress) = match name.strip_prefix('.') {
            Some(hidden) => (hidden.strip_suffix(".inprogress")?, true),
            None => (name, false),
        };
        let (subtask, seq) = rest.strip_prefix("part-")?.split_once('-')?;
        let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
        if !digits(subtask) || !digits(seq) {
            return None;
        }
        Some(PartName {
            subtask: subtask.parse().ok()?,
            seq: seq.parse().ok()?,
            in_progress,
        })
    }
}

/// How many committed part files (`part-<subtask>-<seq>`, of any subtask) `dir` holds: the
/// output a run that starts from the beginning would write again. A missing directory holds none.
pub(crate) fn committed_parts(dir: &Path) -> std::io::Result<usize> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut count = 0;
    for entry in entries {
        let committed = entry?
            .file_name()
            .to_str()
            .and_then(PartName::parse)
            .is_some_and(|part| !part.in_progress);
        count += usize::from(committed);
    }
    Ok(count)
}

/// The `file` sink, with its output directory.
pub(crate) struct Connector<'a> {
    /// Where the part files go.
    pub(crate) directory: &'a Path,
}

impl SinkConnector for Connector<'_> {
    /// Creates the directory, and fails if it cannot.
    fn build(&self, task: TaskContext<'_>) -> Result<Box<dyn Processor>, TaskError> {
        Ok(Box::new(FileSink::new(
            self.directory.to_path_buf(),
            task.subtask,
            task.parallelism,
        )?))
    }

    /// Each old subtask's parts go to one new subtask ([`inherited`]).
    fn rescale_rule(&self) -> Option<RescaleRule> {
        Some(inherited::rescale_rule)
    }
}

/// The file sink could not write, sync, commit or clean up a part file or its output
/// directory: check the disk and the directory's permissions.
#[derive(Debug, thiserror::Error)]
#[error("file sink {}: {what}: {source}", path.display())]
pub(crate) struct FileSinkError {
    /// The part file or the output directory concerned.
    path: PathBuf,
    /// What it was doing, such as `cannot fsync`.
    what: &'static str,
    /// The I/O error.
    source: std::io::Error,
}

impl ConnectorFailure for FileSinkError {
    fn connector(&self) -> &'static str {
        "file"
    }
}

fn io_error(path: &Path, what: &'static str, e: std::io::Error) -> TaskError {
    FileSinkError {
        path: path.to_path_buf(),
        what,
        source: e,
    }
    .into()
}

impl Processor for FileSink {
    fn process(&mut self, batch: &[u8], _out: &mut Router) -> Result<(), TaskError> {
        let batch =
            Batch::decode(batch).map_err(|problem| TaskError::Malformed { input: 0, problem })?;
        self.ensure_recovered()?;
        self.line.clear();
        for r in batch.iter() {
            write_record_line(&mut self.line, r.key, r.value);
        }
        if self.current.is_none() {
            let seq = self.next_seq;
            self.next_seq += 1;
            let path = self.in_progress_path(seq);
            let file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| io_error(&path, "cannot create part file", e))?;
            self.current = Some((seq, BufWriter::with_capacity(256 * 1024, file)));
        }
        let (seq, writer) = self.current.as_mut().expect("opened above");
        let seq = *seq;
        writer
            .write_all(&self.line)
            .map_err(|e| io_error(&self.in_progress_path(seq), "cannot write", e))
    }

    fn finish(&mut self, _out: &mut Router) -> Result<(), TaskError> {
        Ok(())
    }

    fn snapshot(&mut self, barrier: Barrier) -> Result<Vec<u8>, TaskError> {
        self.ensure_recovered()?;
        if let Some((seq, writer)) = self.current.take() {
            let path = self.in_progress_path(seq);
            let file = writer
                .into_inner()
                .map_err(|e| io_error(&path, "cannot flush", e.into_error()))?;
            file.sync_all()
                .map_err(|e| io_error(&path, "cannot fsync", e))?;
            self.pending.push(PendingPart {
                checkpoint: barrier.id,
                seq,
            });
        }
        Ok(self.encode_state())
    }

    fn restore(&mut self, state: &[u8]) -> Result<(), TaskError> {
        // What each old subtask's state is, whose parts this subtask recovers, and how many
        // subtasks the checkpoint had.
        let (states, old_parallelism) = match Inherited::decode(state, "file sink")? {
            Some(inherited) => (inherited.states, inherited.parallelism),
            None => (vec![(self.subtask, state.to_vec())], self.parallelism),
        };
        self.current = None;
        let decoded = states
            .iter()
            .map(|(subtask, state)| Ok((*subtask, Self::decode_state(state)?)))
            .collect::<Result<Vec<_>, TaskError>>()?;
        self.check_parts_present(&decoded)?;
        let mut next_seq = 0;
        for (subtask, (next, pending)) in &decoded {
            let subtask = *subtask;
            for p in pending {
                self.commit_of(subtask, p.seq)?;
            }
            self.discard_in_progress(subtask)?;
            if subtask == self.subtask {
                next_seq = *next;
            }
        }
        self.discard_in_progress(self.subtask)?;
        if self.subtask == 0 {
            let beyond = old_parallelism.max(self.parallelism);
            self.discard_in_progress_where(|s| s >= beyond)?;
        }
        self.sync_dir()?;
        self.pending.clear();
        self.recovered = true;
        // Never reuse a number: parts after the checkpoint were deleted, but
        // committed parts of later checkpoints (if any) must not be overwritten.
        self.next_seq = next_seq.max(self.highest_existing_seq()?.map_or(0, |s| s + 1));
        Ok(())
    }

    fn checkpoint_complete(&mut self, id: CheckpointId) -> Result<(), TaskError> {
        let (ready, later): (Vec<PendingPart>, Vec<PendingPart>) =
            self.pending.iter().partition(|p| p.checkpoint <= id);
        if ready.is_empty() {
            return Ok(());
        }
        for p in &ready {
            self.commit(p.seq)?;
            kill_point::reached(KillPoint::SinkCommit);
        }
        self.sync_dir()?;
        self.pending = later;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connectors::inherited::rescale_states;
    use crate::dataflow::channel::StopSignal;
    use crate::ids::CheckpointKind;
    use weir_abi::BatchBuilder;

    #[test]
    fn its_failures_name_the_sink_its_part_and_what_it_was_doing() {
        let error = io_error(
            Path::new("/out/part-0-0.inprogress"),
            "cannot fsync",
            std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied"),
        );
        assert_eq!(
            error.to_string(),
            "file sink /out/part-0-0.inprogress: cannot fsync: permission denied"
        );
        assert_eq!(
            crate::dataflow::error::io_source_kind(&error),
            Some(std::io::ErrorKind::PermissionDenied)
        );
    }

    fn batch(lines: &[&str]) -> Vec<u8> {
        let mut b = BatchBuilder::new(0);
        for l in lines {
            b.push(b"", l.as_bytes(), 0);
        }
        b.into_bytes()
    }

    fn barrier(id: u64) -> Barrier {
        Barrier {
            id: CheckpointId(id),
            kind: CheckpointKind::Checkpoint,
        }
    }

    fn committed(dir: &Path) -> String {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with('.'))
            .collect();
        names.sort();
        names
            .iter()
            .map(|n| fs::read_to_string(dir.join(n)).unwrap())
            .collect()
    }

    #[test]
    fn part_names_read_back_as_written_and_nothing_else_does() {
        let dir = tempfile::tempdir().unwrap();
        let sink = FileSink::new(dir.path().join("out"), 3, 4).unwrap();
        let committed = sink.final_path_of(3, 12);
        let in_progress = sink.in_progress_path(12);
        let name = |p: &Path| p.file_name().unwrap().to_str().unwrap().to_string();
        assert_eq!(
            PartName::parse(&name(&committed)),
            Some(PartName {
                subtask: 3,
                seq: 12,
                in_progress: false
            })
        );
        assert_eq!(
            PartName::parse(&name(&in_progress)),
            Some(PartName {
                subtask: 3,
                seq: 12,
                in_progress: true
            })
        );
        for other in [
            "part-",
            "part-0003",
            "part-0003-",
            "part-+003-12",
            ".part-0003-12",
            ".weir-lock",
            "x",
        ] {
            assert_eq!(PartName::parse(other), None, "{other}");
        }
    }

    #[test]
    fn commits_only_completed_checkpoints_and_recovers_pre_committed_parts() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let mut router = Router::new(Vec::new(), StopSignal::new(), Default::default());
        let mut sink = FileSink::new(out.clone(), 0, 1).unwrap();
        sink.process(&batch(&["a", "b"]), &mut router).unwrap();
        let state1 = sink.snapshot(barrier(1)).unwrap();
        sink.process(&batch(&["c"]), &mut router).unwrap();
        assert_eq!(committed(&out), "");
        sink.checkpoint_complete(CheckpointId(1)).unwrap();
        assert_eq!(committed(&out), "a\nb\n");
        let state2 = sink.snapshot(barrier(2)).unwrap();
        sink.process(&batch(&["lost"]), &mut router).unwrap();
        drop(sink); // crash: checkpoint 2 completed, but the notice never arrived

        let mut sink = FileSink::new(out.clone(), 0, 1).unwrap();
        sink.restore(&state2).unwrap();
        assert_eq!(committed(&out), "a\nb\nc\n");
        // Restoring an older state again is idempotent.
        let mut again = FileSink::new(out.clone(), 0, 1).unwrap();
        again.restore(&state1).unwrap();
        assert_eq!(committed(&out), "a\nb\nc\n");
        assert!(fs::read_dir(&out).unwrap().all(|e| {
            !e.unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".inprogress")
        }));
    }

    /// The names of the in-progress parts in `dir`, sorted.
    fn in_progress(dir: &Path) -> Vec<String> {
        let mut names: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".inprogress"))
            .collect();
        names.sort();
        names
    }

    #[test]
    fn at_another_parallelism_every_old_subtasks_parts_are_committed_or_deleted_once() {
        for new_parallelism in [1, 2, 3] {
            let dir = tempfile::tempdir().unwrap();
            let out = dir.path().join("out");
            let mut router = Router::new(Vec::new(), StopSignal::new(), Default::default());
            // Two subtasks pre-commit a part each at checkpoint 1, write more, and crash before
            // the completion notice.
            let mut states = Vec::new();
            for subtask in 0..2u32 {
                let mut sink = FileSink::new(out.clone(), subtask, 2).unwrap();
                sink.process(&batch(&[&format!("kept-{subtask}")]), &mut router)
                    .unwrap();
                states.push(sink.snapshot(barrier(1)).unwrap());
                sink.process(&batch(&["lost"]), &mut router).unwrap();
                sink.snapshot(barrier(2)).unwrap();
            }
            // A run at parallelism 5 after the checkpoint left a part of subtask 4.
            fs::write(out.join(".part-0004-0000000000.inprogress"), "lost\n").unwrap();
            assert_eq!(in_progress(&out).len(), 5);

            let old: Vec<&[u8]> = states.iter().map(Vec::as_slice).collect();
            let rescaled = rescale_states(&old, new_parallelism);
            assert_eq!(rescaled.len(), new_parallelism as usize);
            for (subtask, state) in (0..).zip(&rescaled) {
                let mut sink = FileSink::new(out.clone(), subtask, new_parallelism).unwrap();
                sink.restore(state).unwrap();
                // Restoring the same checkpoint again (a crash during the first) changes nothing.
                let mut again = FileSink::new(out.clone(), subtask, new_parallelism).unwrap();
                again.restore(state).unwrap();
            }
            assert_eq!(committed(&out), "kept-0\nkept-1\n", "p = {new_parallelism}");
            assert_eq!(
                in_progress(&out),
                Vec::<String>::new(),
                "p = {new_parallelism}"
            );
            // The new subtasks write on after the old parts, never over them.
            for subtask in 0..new_parallelism {
                let mut sink = FileSink::new(out.clone(), subtask, new_parallelism).unwrap();
                sink.restore(&rescaled[subtask as usize]).unwrap();
                sink.process(&batch(&["new"]), &mut router).unwrap();
                sink.snapshot(barrier(3)).unwrap();
                sink.checkpoint_complete(CheckpointId(3)).unwrap();
            }
            let text = committed(&out);
            assert_eq!(text.matches("kept-").count(), 2, "{text}");
            assert_eq!(
                text.matches("new").count(),
                new_parallelism as usize,
                "{text}"
            );
        }
    }
}
