//! How a store's checkpoint is kept in a job's checkpoint, incrementally.
//!
//! A store's checkpoint ([`StoreCheckpoint`]) is a directory of files. Its immutable files are
//! stored once, as *shared files* (`checkpoint/shared.rs`): the first checkpoint that has one
//! uploads it, and later ones name it again. The few small files a store rewrites (RocksDB's
//! manifest, `CURRENT`, its options) travel inside the task's state file. So what a checkpoint
//! writes grows with what changed since the last one, not with the state.
//!
//! Two things live here, both pure, so the rules are read and tested without a store or a
//! storage:
//! - [`StoreSnapshot`]: what the task's state file says of its store (which shared file holds
//!   each kept file, and the inline files), encoded and decoded;
//! - [`Uploads`]: what a task may name again. Only files stored by a *completed* checkpoint, or
//!   by the one being taken, are named: a file uploaded by a checkpoint that is later aborted
//!   may be swept away, so until a checkpoint completes, a later one uploads its new files again
//!   (as Flink's incremental RocksDB checkpoints do).
//!
//! A shared file is named by the id of the checkpoint that wrote it (its *writer*) and the
//! file's own name in the store's checkpoint; the checkpoint layer makes the shared file's
//! name from the two, and its metadata holds its length and checksum.

use std::collections::BTreeMap;
use std::path::Path;

use weir_abi::wire::{Reader, put_len, put_prefixed};

use crate::ids::CheckpointId;

use super::local::RestoredFile;
use super::{StoreCheckpoint, StoreError};

/// A file of a store's checkpoint kept as a shared file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptFile {
    /// Its name in the store's checkpoint directory.
    pub name: String,
    /// The checkpoint that stored it.
    pub writer: CheckpointId,
}

/// What a task's state file says of its store: enough to lay its checkpoint out again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreSnapshot {
    /// The immutable files, each kept as a shared file.
    pub kept: Vec<KeptFile>,
    /// The other files, with their bytes.
    pub inline: Vec<(String, Vec<u8>)>,
}

/// The version byte [`StoreSnapshot::encode`] writes first.
const VERSION: u8 = 1;

impl StoreSnapshot {
    /// The snapshot's bytes, for a section of the task's state file.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![VERSION];
        put_len(&mut out, self.kept.len());
        for file in &self.kept {
            put_prefixed(&mut out, file.name.as_bytes());
            out.extend_from_slice(&file.writer.0.to_le_bytes());
        }
        put_len(&mut out, self.inline.len());
        for (name, bytes) in &self.inline {
            put_prefixed(&mut out, name.as_bytes());
            put_prefixed(&mut out, bytes);
        }
        out
    }

    /// The snapshot `bytes` encode; `None` when they are cut short, hold something else, or
    /// name a file twice or by a name that is not a plain file name.
    pub fn decode(bytes: &[u8]) -> Option<StoreSnapshot> {
        let mut reader = Reader::new(bytes);
        if reader.u8().ok()? != VERSION {
            return None;
        }
        let name = |reader: &mut Reader<'_>| -> Option<String> {
            let name = std::str::from_utf8(reader.prefixed().ok()?).ok()?;
            is_plain_name(name).then(|| name.to_string())
        };
        let mut snapshot = StoreSnapshot::default();
        for _ in 0..reader.u32().ok()? {
            let file = name(&mut reader)?;
            let writer = CheckpointId(reader.u64().ok()?);
            snapshot.kept.push(KeptFile { name: file, writer });
        }
        for _ in 0..reader.u32().ok()? {
            let file = name(&mut reader)?;
            snapshot
                .inline
                .push((file, reader.prefixed().ok()?.to_vec()));
        }
        let mut names: Vec<&str> = snapshot.names().collect();
        names.sort_unstable();
        let unique = names.windows(2).all(|pair| pair[0] != pair[1]);
        (reader.remaining() == 0 && unique).then_some(snapshot)
    }

    /// The names of all its files.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.kept
            .iter()
            .map(|f| f.name.as_str())
            .chain(self.inline.iter().map(|(name, _)| name.as_str()))
    }

    /// Lays the store's checkpoint out in `dir` (created; it must not exist yet): the inline
    /// files from the snapshot, each kept file from `fetch(file)` (read from the checkpoint
    /// storage, or a local copy, linked). A store then opens it
    /// ([`Backend::open_checkpoint`](super::Backend::open_checkpoint)).
    pub fn materialise(
        &self,
        dir: &Path,
        mut fetch: impl FnMut(&KeptFile) -> Result<RestoredFile, StoreError>,
    ) -> Result<(), StoreError> {
        std::fs::create_dir(dir)
            .map_err(|e| StoreError::io("create a directory to restore into", dir, e))?;
        let failed = |path: &Path, e| StoreError::io("write a restored file", path, e);
        for file in &self.kept {
            let path = dir.join(&file.name);
            fetch(file)?.place(&path).map_err(|e| failed(&path, e))?;
        }
        for (name, bytes) in &self.inline {
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(|e| failed(&path, e))?;
        }
        Ok(())
    }
}

/// What a task's keyed section holds: the store checkpoints its store is made of, each with the
/// subtask whose checkpoint it is. A checkpoint writes one, of the task itself; a rescale gives
/// a new subtask those of every old subtask that owned some of its key groups, and the restore
/// keeps only its own groups of each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyedSection {
    /// The parts, each `(old subtask, its store's snapshot)`.
    pub parts: Vec<(u32, StoreSnapshot)>,
}

impl KeyedSection {
    /// The section of one store's snapshot, of subtask `subtask`.
    pub fn of(subtask: u32, snapshot: StoreSnapshot) -> Self {
        KeyedSection {
            parts: vec![(subtask, snapshot)],
        }
    }

    /// The section's bytes: a version byte, the number of parts, and each part's subtask and
    /// its snapshot's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![VERSION];
        put_len(&mut out, self.parts.len());
        for (subtask, snapshot) in &self.parts {
            out.extend_from_slice(&subtask.to_le_bytes());
            put_prefixed(&mut out, &snapshot.encode());
        }
        out
    }

    /// The section `bytes` encode; `None` when they are cut short or hold something else.
    pub fn decode(bytes: &[u8]) -> Option<KeyedSection> {
        let mut reader = Reader::new(bytes);
        if reader.u8().ok()? != VERSION {
            return None;
        }
        let mut section = KeyedSection::default();
        for _ in 0..reader.u32().ok()? {
            let subtask = reader.u32().ok()?;
            let snapshot = StoreSnapshot::decode(reader.prefixed().ok()?)?;
            section.parts.push((subtask, snapshot));
        }
        (reader.remaining() == 0).then_some(section)
    }
}

/// Whether `name` names a file in a directory and nothing else: not empty, no separator, not
/// `.` or `..`.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// What a checkpoint of a store does with its files: the plan [`Uploads::plan`] makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The files to store as new shared files, written by this checkpoint.
    pub upload: Vec<String>,
    /// The files to carry inline.
    pub inline: Vec<String>,
    /// Every kept file, new and named again, in the order of the checkpoint's files.
    pub kept: Vec<KeptFile>,
}

/// What a task's store has stored as shared files, and so what its next checkpoint may name
/// again instead of storing.
#[derive(Debug, Clone, Default)]
pub struct Uploads {
    /// The kept files of the newest completed checkpoint (or the one restored), by name.
    confirmed: BTreeMap<String, CheckpointId>,
    /// The kept files of each checkpoint planned and not yet completed or aborted.
    pending: BTreeMap<CheckpointId, BTreeMap<String, CheckpointId>>,
}

impl Uploads {
    /// Nothing stored yet: a store that starts empty.
    pub fn new() -> Self {
        Self::default()
    }

    /// What a store opened from `snapshot` may name again: the files it was restored from.
    pub fn restored(snapshot: &StoreSnapshot) -> Self {
        Uploads {
            confirmed: snapshot
                .kept
                .iter()
                .map(|f| (f.name.clone(), f.writer))
                .collect(),
            pending: BTreeMap::new(),
        }
    }

    /// The plan of checkpoint `id` of a store whose checkpoint is `checkpoint`: an immutable
    /// file a completed checkpoint stored is named again, another is uploaded by `id`, and the
    /// rest go inline.
    pub fn plan(&mut self, id: CheckpointId, checkpoint: &StoreCheckpoint) -> Plan {
        let mut plan = Plan {
            upload: Vec::new(),
            inline: Vec::new(),
            kept: Vec::new(),
        };
        let mut kept = BTreeMap::new();
        for file in &checkpoint.files {
            if !file.immutable {
                plan.inline.push(file.name.clone());
                continue;
            }
            let writer = match self.confirmed.get(&file.name) {
                Some(&writer) => writer,
                None => {
                    plan.upload.push(file.name.clone());
                    id
                }
            };
            kept.insert(file.name.clone(), writer);
            plan.kept.push(KeptFile {
                name: file.name.clone(),
                writer,
            });
        }
        self.pending.insert(id, kept);
        plan
    }

    /// Checkpoint `id` completed: its files are what later checkpoints name again. The
    /// checkpoints planned before it are subsumed.
    pub fn completed(&mut self, id: CheckpointId) {
        if let Some(kept) = self.pending.remove(&id) {
            self.confirmed = kept;
            self.pending.retain(|&pending, _| pending > id);
        }
    }

    /// Checkpoint `id` was aborted: what it uploaded may be swept, so nothing names it again.
    pub fn aborted(&mut self, id: CheckpointId) {
        self.pending.remove(&id);
    }

    /// The stored files a checkpoint may still name: those of the newest completed one, which
    /// the next plans name again, and those of the checkpoints planned and still in flight.
    pub fn live(&self) -> Vec<KeptFile> {
        let planned = self.pending.values().flatten();
        self.confirmed
            .iter()
            .chain(planned)
            .map(|(name, &writer)| KeptFile {
                name: name.clone(),
                writer,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::keyed::CheckpointFile;

    fn checkpoint(files: &[(&str, bool)]) -> StoreCheckpoint {
        StoreCheckpoint {
            dir: "unused".into(),
            files: files
                .iter()
                .map(|&(name, immutable)| CheckpointFile {
                    name: name.into(),
                    len: 1,
                    immutable,
                })
                .collect(),
        }
    }

    fn names(files: &[String]) -> Vec<&str> {
        files.iter().map(String::as_str).collect()
    }

    #[test]
    fn a_snapshot_round_trips_and_refuses_what_it_does_not_write() {
        let snapshot = StoreSnapshot {
            kept: vec![
                KeptFile {
                    name: "000007.sst".into(),
                    writer: CheckpointId(3),
                },
                KeptFile {
                    name: "000009.sst".into(),
                    writer: CheckpointId(4),
                },
            ],
            inline: vec![("CURRENT".into(), b"MANIFEST-000010\n".to_vec())],
        };
        let bytes = snapshot.encode();
        assert_eq!(StoreSnapshot::decode(&bytes), Some(snapshot.clone()));
        assert_eq!(
            StoreSnapshot::decode(&StoreSnapshot::default().encode()),
            Some(StoreSnapshot::default())
        );
        for cut in 0..bytes.len() {
            assert_eq!(StoreSnapshot::decode(&bytes[..cut]), None, "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(StoreSnapshot::decode(&longer), None);
        let mut other_version = bytes;
        other_version[0] = 2;
        assert_eq!(StoreSnapshot::decode(&other_version), None);
        for bad in ["", "..", "../x", "a/b"] {
            let named = StoreSnapshot {
                kept: vec![],
                inline: vec![(bad.into(), vec![])],
            };
            assert_eq!(StoreSnapshot::decode(&named.encode()), None, "{bad:?}");
        }
        let twice = StoreSnapshot {
            kept: vec![KeptFile {
                name: "CURRENT".into(),
                writer: CheckpointId(1),
            }],
            inline: vec![("CURRENT".into(), vec![])],
        };
        assert_eq!(StoreSnapshot::decode(&twice.encode()), None);
    }

    #[test]
    fn a_checkpoint_uploads_only_what_no_completed_checkpoint_stored() {
        let mut uploads = Uploads::new();
        let first = uploads.plan(
            CheckpointId(1),
            &checkpoint(&[("1.sst", true), ("2.sst", true), ("MANIFEST", false)]),
        );
        assert_eq!(names(&first.upload), ["1.sst", "2.sst"]);
        assert_eq!(names(&first.inline), ["MANIFEST"]);
        uploads.completed(CheckpointId(1));
        // 1.sst was compacted away into 3.sst; 2.sst stays.
        let second = uploads.plan(
            CheckpointId(2),
            &checkpoint(&[("2.sst", true), ("3.sst", true), ("MANIFEST", false)]),
        );
        assert_eq!(names(&second.upload), ["3.sst"]);
        assert_eq!(
            second.kept,
            vec![
                KeptFile {
                    name: "2.sst".into(),
                    writer: CheckpointId(1)
                },
                KeptFile {
                    name: "3.sst".into(),
                    writer: CheckpointId(2)
                },
            ]
        );
    }

    #[test]
    fn files_of_a_checkpoint_not_yet_completed_or_aborted_are_uploaded_again() {
        let mut uploads = Uploads::new();
        let files = checkpoint(&[("1.sst", true)]);
        assert_eq!(
            names(&uploads.plan(CheckpointId(1), &files).upload),
            ["1.sst"]
        );
        // Checkpoint 1 is still in flight: 2 cannot count on its files.
        assert_eq!(
            names(&uploads.plan(CheckpointId(2), &files).upload),
            ["1.sst"]
        );
        uploads.aborted(CheckpointId(1));
        uploads.completed(CheckpointId(1));
        assert_eq!(
            names(&uploads.plan(CheckpointId(3), &files).upload),
            ["1.sst"]
        );
        // 2 completes: its copy is the one named from now on.
        uploads.completed(CheckpointId(2));
        let fourth = uploads.plan(CheckpointId(4), &files);
        assert!(fourth.upload.is_empty());
        assert_eq!(fourth.kept[0].writer, CheckpointId(2));
        // 4 completes before 3: 3 is subsumed, and its late completion changes nothing.
        uploads.completed(CheckpointId(4));
        uploads.completed(CheckpointId(3));
        assert_eq!(
            uploads.plan(CheckpointId(5), &files).kept[0].writer,
            CheckpointId(2)
        );
    }

    #[test]
    fn a_restored_store_names_again_the_files_it_was_restored_from() {
        let snapshot = StoreSnapshot {
            kept: vec![KeptFile {
                name: "5.sst".into(),
                writer: CheckpointId(8),
            }],
            inline: vec![],
        };
        let mut uploads = Uploads::restored(&snapshot);
        let plan = uploads.plan(
            CheckpointId(12),
            &checkpoint(&[("5.sst", true), ("6.sst", true)]),
        );
        assert_eq!(names(&plan.upload), ["6.sst"]);
        assert_eq!(plan.kept[0].writer, CheckpointId(8));
    }

    #[test]
    fn the_live_files_are_the_newest_completed_checkpoints_and_those_in_flight() {
        let mut uploads = Uploads::new();
        uploads.plan(
            CheckpointId(1),
            &checkpoint(&[("1.sst", true), ("m", false)]),
        );
        uploads.completed(CheckpointId(1));
        // 2 is in flight and names 1.sst again beside a file of its own; 1.sst then goes.
        uploads.plan(
            CheckpointId(2),
            &checkpoint(&[("1.sst", true), ("2.sst", true)]),
        );
        uploads.plan(CheckpointId(3), &checkpoint(&[("3.sst", true)]));
        let live = |uploads: &Uploads| {
            let mut live: Vec<(String, u64)> = uploads
                .live()
                .into_iter()
                .map(|f| (f.name, f.writer.0))
                .collect();
            live.sort();
            live.dedup();
            live
        };
        let named = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
            pairs.iter().map(|&(n, w)| (n.to_string(), w)).collect()
        };
        assert_eq!(
            live(&uploads),
            named(&[("1.sst", 1), ("2.sst", 2), ("3.sst", 3)])
        );
        uploads.completed(CheckpointId(3));
        assert_eq!(live(&uploads), named(&[("3.sst", 3)]));
    }
}
