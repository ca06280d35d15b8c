//! What a completed checkpoint records about itself: the `_metadata` file.
//!
//! Why a module of its own: the metadata is the commit record of a checkpoint
//! (its presence is what makes a checkpoint complete) and the map a restore
//! follows (which task's state is in which file, how long it is, what its
//! checksum is). It is also the one file people read when something went
//! wrong, so its payload is pretty-printed JSON inside the usual frame
//! ([`format`](mod@format)): inspectable with `tail -c +21 _metadata | head -c -4`
//! or `weir checkpoints`, and evolvable — new optional fields can be added
//! with a serde default without a version bump; a change an older build must
//! not misread bumps [`METADATA_VERSION`], which readers check before
//! anything else.
//!
//! Source positions need no field of their own: a source's offset is its
//! state, stored in its state file like any operator's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::checkpoint::format::{self, FRAME_OVERHEAD, FileKind, FormatError, hex_u32, hex_u64};
use crate::checkpoint::generation::Generation;
use crate::checkpoint::layout::CheckpointLayout;
use crate::checkpoint::pending::Acknowledgement;
use crate::checkpoint::shared::{References, SharedFile};
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};

/// The newest version of the metadata JSON schema this build reads, and the
/// one it writes for a record whose states name shared files
/// ([`TaskStateMeta::shared`]).
///
/// Each record is written in the oldest version that can read it
/// ([`CheckpointMetadata::required_version`]): version 1
/// ([`METADATA_VERSION_SELF_CONTAINED`]) when every state is self-contained,
/// which every build reads; version 2 ([`METADATA_VERSION_CHAINS`]) with image
/// chains; version 3 with shared files. A build that predates a feature
/// refuses the record by name rather than misread it: it would restore a
/// delta as if it were whole, or prune files a retained checkpoint needs.
pub const METADATA_VERSION: u32 = 3;

/// The schema version of a record with image chains but no shared files:
/// readable by builds since chains.
pub const METADATA_VERSION_CHAINS: u32 = 2;

/// The schema version of a record whose every state is self-contained (no
/// image chains): readable by every build.
pub const METADATA_VERSION_SELF_CONTAINED: u32 = 1;

/// Where one task's snapshot lives, and how to tell it is intact.
///
/// The asynchronous part of a snapshot returns it once the file is durable;
/// the task's acknowledgement carries it to the coordinator, which records it
/// in the metadata; a restore reads it back and refuses a file that does not
/// match it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StateHandle {
    /// The state file's name, relative to the checkpoint directory, so a
    /// checkpoint directory can be moved or copied as a whole.
    pub file: String,
    /// Length of the whole file in bytes (payload plus the 24-byte frame).
    pub length: u64,
    /// The CRC-32 stored in the file's trailer: it covers every byte before
    /// it, so equal checksums mean this very file, not just a valid one.
    /// Written as an 8-digit hex string, as checksums appear in messages.
    #[serde(with = "hex_u32")]
    pub crc32: u32,
}

/// One task's entry in the metadata: its state and what the snapshot cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskStateMeta {
    /// The task (vertex name and subtask index).
    pub task: TaskId,
    /// Where its state is.
    pub handle: StateHandle,
    /// Size of the state itself (the payload of the state file), in bytes.
    pub state_bytes: u64,
    /// Synchronous part of the snapshot (the guest's snapshot export and the
    /// copy out), in milliseconds: the time processing paused.
    pub sync_duration_ms: u64,
    /// Asynchronous part (write, fsync, checksum), in milliseconds.
    pub async_duration_ms: u64,
    /// Time the task spent aligning barriers (exactly-once mode), in
    /// milliseconds; 0 for a task with one input.
    pub alignment_duration_ms: u64,
    /// The earlier checkpoints whose state files of this task the state
    /// builds on, base first: an incremental image (a delta) needs the full
    /// image and every delta before it (docs/CHECKPOINTS.md §10). Empty, and
    /// not written, for a self-contained state. Restore reads them, pruning
    /// keeps them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain: Vec<CheckpointId>,
    /// The files of the job's shared directory this state also needs, each
    /// written by this checkpoint or an earlier one and kept while any
    /// retained checkpoint names it (docs/CHECKPOINTS.md §13). Empty, and not
    /// written, for a state that is all in its own state file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared: Vec<SharedFile>,
}

impl TaskStateMeta {
    /// The entry of `task`, from its acknowledgement: durations in whole
    /// milliseconds, rounded down.
    fn acknowledged(task: &TaskId, ack: &Acknowledgement<StateHandle>) -> Self {
        TaskStateMeta {
            task: task.clone(),
            handle: ack.handle.clone(),
            state_bytes: ack.cost.bytes,
            sync_duration_ms: millis(ack.cost.sync_duration),
            async_duration_ms: millis(ack.cost.async_duration),
            alignment_duration_ms: millis(ack.cost.alignment_duration),
            chain: ack.chain.clone(),
            shared: ack.shared.clone(),
        }
    }
}

/// The record of one completed checkpoint or savepoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// Schema version of this record ([`METADATA_VERSION`] when written by
    /// this build).
    pub format_version: u32,
    /// The job's name, as in the job file.
    pub job_name: String,
    /// Fingerprint of the job graph the checkpoint was taken from, so a
    /// restore can tell whether the graph changed. Written as a 16-digit hex
    /// string: JSON numbers lose precision above 2^53 in many readers.
    #[serde(with = "hex_u64")]
    pub job_fingerprint: u64,
    /// The checkpoint's id.
    pub checkpoint_id: CheckpointId,
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// When the coordinator triggered it, Unix time in milliseconds.
    pub trigger_time_ms: u64,
    /// When the last acknowledgement arrived and the metadata was written,
    /// Unix time in milliseconds.
    pub completion_time_ms: u64,
    /// Trigger to completion, in milliseconds.
    pub duration_ms: u64,
    /// Parallelism of every vertex of the job graph, by vertex name: a
    /// restore refuses a changed parallelism of a stateful vertex.
    pub parallelism: BTreeMap<String, u32>,
    /// The number of key groups of every vertex, by vertex name (docs/ABI.md §16): a restore
    /// keeps an operator's with its state. Absent from checkpoints of builds before key
    /// groups, which routed keys as if each vertex had as many key groups as subtasks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub max_parallelism: BTreeMap<String, u32>,
    /// The generation of the run that wrote it (`checkpoint/generation.rs`); 0, and absent
    /// from the file, for checkpoints of builds before generations.
    #[serde(default, skip_serializing_if = "Generation::is_unknown")]
    pub generation: Generation,
    /// Every task's state, one entry per task of the execution graph.
    pub tasks: Vec<TaskStateMeta>,
}

/// A metadata file that cannot be trusted, naming the file and the problem.
#[derive(Debug, Error)]
pub enum MetadataError {
    /// The frame does not verify (magic, version, length, checksum).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// The payload is not the JSON of a metadata record.
    #[error("metadata file {path}: invalid json: {source}")]
    Json {
        /// The metadata file.
        path: PathBuf,
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
    /// The record was written by a newer build.
    #[error(
        "metadata file {path}: unsupported metadata version {found} (this build reads {supported})"
    )]
    UnsupportedVersion {
        /// The metadata file.
        path: PathBuf,
        /// The version in the file.
        found: u32,
        /// [`METADATA_VERSION`].
        supported: u32,
    },
    /// The record parses but contradicts itself or its directory.
    #[error("metadata file {path}: {problem}")]
    Invalid {
        /// The metadata file.
        path: PathBuf,
        /// What is inconsistent.
        problem: String,
    },
}

/// What a checkpoint records of the job it belongs to, so that a restore can
/// tell whether a checkpoint fits a job ([`Job::identity`](crate::job::Job::identity)
/// makes it from the job graph).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobIdentity {
    /// The job's name, as in the job file.
    pub name: String,
    /// The job graph's fingerprint (see [`CheckpointMetadata::job_fingerprint`]).
    pub fingerprint: u64,
    /// Parallelism of every vertex, by vertex name.
    pub parallelism: BTreeMap<String, u32>,
    /// Key groups of every vertex, by vertex name.
    pub max_parallelism: BTreeMap<String, u32>,
    /// The generation of the run (`checkpoint/generation.rs`).
    pub generation: Generation,
}

impl CheckpointMetadata {
    /// The record of checkpoint `id` of the job `job`, completed (every task's
    /// acknowledgement in, as `acks`) at wall-clock time `completed_at`,
    /// `duration` after it was triggered: what is written to `_metadata`
    /// once the coordinator decides the checkpoint is complete.
    ///
    /// Pure, so the caller reads the clocks. Times are whole milliseconds,
    /// rounded down; the trigger time is the completion time minus the
    /// duration (the trigger is only known as an [`Instant`](std::time::Instant)).
    /// The schema version is the oldest that can read the record
    /// ([`required_version`](Self::required_version)).
    pub fn complete(
        job: &JobIdentity,
        id: CheckpointId,
        kind: CheckpointKind,
        completed_at: SystemTime,
        duration: Duration,
        acks: &BTreeMap<TaskId, Acknowledgement<StateHandle>>,
    ) -> CheckpointMetadata {
        let completion_time_ms = unix_ms(completed_at);
        let duration_ms = millis(duration);
        let tasks: Vec<TaskStateMeta> = acks
            .iter()
            .map(|(task, ack)| TaskStateMeta::acknowledged(task, ack))
            .collect();
        CheckpointMetadata {
            format_version: Self::required_version(&tasks),
            job_name: job.name.clone(),
            job_fingerprint: job.fingerprint,
            checkpoint_id: id,
            kind,
            trigger_time_ms: completion_time_ms.saturating_sub(duration_ms),
            completion_time_ms,
            duration_ms,
            parallelism: job.parallelism.clone(),
            max_parallelism: job.max_parallelism.clone(),
            generation: job.generation,
            tasks,
        }
    }

    /// The framed bytes of this record, as written to `_metadata`.
    pub fn encode(&self) -> Vec<u8> {
        let json = serde_json::to_vec_pretty(self).expect("metadata always serializes to json");
        format::encode(FileKind::Metadata, &json)
    }

    /// Reads a record from the bytes of the metadata file at `path`: verifies
    /// the frame, the schema version, then the record's own consistency
    /// ([`validate`](Self::validate)). Never panics, whatever the bytes.
    pub fn decode(path: &Path, bytes: &[u8]) -> Result<Self, MetadataError> {
        let frame = format::decode(FileKind::Metadata, path, bytes)?;
        let json_error = |source| MetadataError::Json {
            path: path.to_owned(),
            source,
        };
        // The version first, so a newer record is refused by name rather
        // than by whatever field it renamed.
        #[derive(Deserialize)]
        struct Version {
            format_version: u32,
        }
        let version: Version = serde_json::from_slice(frame.payload).map_err(json_error)?;
        if version.format_version > METADATA_VERSION || version.format_version == 0 {
            return Err(MetadataError::UnsupportedVersion {
                path: path.to_owned(),
                found: version.format_version,
                supported: METADATA_VERSION,
            });
        }
        let meta: CheckpointMetadata = serde_json::from_slice(frame.payload).map_err(json_error)?;
        meta.validate().map_err(|problem| MetadataError::Invalid {
            path: path.to_owned(),
            problem,
        })?;
        Ok(meta)
    }

    /// Checks that the record is consistent: one entry per task of the
    /// execution graph that `parallelism` describes, no task twice, every
    /// state file a plain name. Returns the first problem found, in words.
    pub fn validate(&self) -> Result<(), String> {
        let mut seen = BTreeSet::new();
        for entry in &self.tasks {
            let task = &entry.task;
            let Some(&parallelism) = self.parallelism.get(&task.vertex) else {
                return Err(format!(
                    "task {task} belongs to no vertex of the recorded parallelism"
                ));
            };
            if task.subtask >= parallelism {
                return Err(format!(
                    "task {task} is beyond the parallelism {parallelism} of vertex {:?}",
                    task.vertex
                ));
            }
            if !seen.insert(task) {
                return Err(format!("task {task} is recorded twice"));
            }
            if !CheckpointLayout::is_plain_file_name(&entry.handle.file) {
                return Err(format!(
                    "task {task}: state file name {:?} is not a plain file name",
                    entry.handle.file
                ));
            }
            if let Some(problem) = self.chain_problem(&entry.chain) {
                return Err(format!("task {task}: {problem}"));
            }
            if let Some(problem) = self.shared_problem(&entry.shared) {
                return Err(format!("task {task}: {problem}"));
            }
            if entry.state_bytes.checked_add(FRAME_OVERHEAD as u64) != Some(entry.handle.length) {
                return Err(format!(
                    "task {task}: {} bytes of state cannot make a state file of {} bytes",
                    entry.state_bytes, entry.handle.length
                ));
            }
        }
        let expected: u64 = self.parallelism.values().map(|&p| u64::from(p)).sum();
        if seen.len() as u64 != expected {
            return Err(format!(
                "{} tasks recorded but the parallelism of the vertices adds up to {expected}",
                seen.len()
            ));
        }
        Ok(())
    }

    /// What is wrong with a task's `chain`, if anything: its checkpoints must
    /// be earlier than this one and in ascending order, and a savepoint has
    /// none (it must restore alone).
    fn chain_problem(&self, chain: &[CheckpointId]) -> Option<String> {
        if chain.is_empty() {
            return None;
        }
        if self.kind == CheckpointKind::Savepoint {
            return Some(
                "a savepoint's state builds on earlier checkpoints, but a savepoint must be \
                 self-contained"
                    .to_string(),
            );
        }
        if chain.windows(2).any(|w| w[0] >= w[1]) {
            return Some(format!(
                "its chain {} is not in ascending order",
                format_chain(chain)
            ));
        }
        if chain.last().is_some_and(|&last| last >= self.checkpoint_id) {
            return Some(format!(
                "its chain {} does not end before checkpoint {}",
                format_chain(chain),
                self.checkpoint_id
            ));
        }
        None
    }

    /// What is wrong with a task's `shared` files, if anything: each must be
    /// a name [`CheckpointLayout::shared_file_name`] writes, by this
    /// checkpoint or an earlier one, named once; and a savepoint has none (it
    /// must restore alone, and outlive the job's checkpoints).
    fn shared_problem(&self, shared: &[SharedFile]) -> Option<String> {
        if shared.is_empty() {
            return None;
        }
        if self.kind == CheckpointKind::Savepoint {
            return Some(
                "a savepoint's state names shared files, but a savepoint must be \
                 self-contained"
                    .to_string(),
            );
        }
        let mut seen = BTreeSet::new();
        for file in shared {
            let writer = CheckpointLayout::shared_file_writer(&file.name)
                .filter(|_| CheckpointLayout::is_plain_file_name(&file.name));
            let Some(writer) = writer else {
                return Some(format!(
                    "shared file name {:?} is not one this build writes",
                    file.name
                ));
            };
            if writer > self.checkpoint_id {
                return Some(format!(
                    "shared file {} is written by checkpoint {writer}, after checkpoint {}",
                    file.name, self.checkpoint_id
                ));
            }
            if !seen.insert(&file.name) {
                return Some(format!("shared file {} is named twice", file.name));
            }
        }
        None
    }

    /// The schema version this record needs: the oldest that reads what its
    /// states use (see [`METADATA_VERSION`]).
    pub fn required_version(tasks: &[TaskStateMeta]) -> u32 {
        if tasks.iter().any(|t| !t.shared.is_empty()) {
            METADATA_VERSION
        } else if tasks.iter().any(|t| !t.chain.is_empty()) {
            METADATA_VERSION_CHAINS
        } else {
            METADATA_VERSION_SELF_CONTAINED
        }
    }

    /// Every checkpoint some task's chain needs, ascending: what must stay
    /// on disk as long as this checkpoint does.
    pub fn chain_links(&self) -> BTreeSet<CheckpointId> {
        self.references().links
    }

    /// What this checkpoint needs on disk besides its directory: the
    /// checkpoints its chains build on and the shared files its states name.
    pub fn references(&self) -> References {
        References::of(
            self.tasks
                .iter()
                .map(|t| (t.chain.as_slice(), t.shared.as_slice())),
        )
    }

    /// The entry of `task`, if it is recorded.
    pub fn task(&self, task: &TaskId) -> Option<&TaskStateMeta> {
        self.tasks.iter().find(|entry| &entry.task == task)
    }

    /// Total size of all tasks' state, in bytes (what `weir checkpoints`
    /// shows as the checkpoint's size).
    pub fn state_bytes(&self) -> u64 {
        self.tasks.iter().map(|entry| entry.state_bytes).sum()
    }

    /// The bytes of the shared files its states name (keyed state kept on the host):
    /// `(written by this checkpoint, all of them)`. The first is what an incremental
    /// checkpoint stored beside its state files; the second what a full one would have.
    pub fn shared_bytes(&self) -> (u64, u64) {
        let files: BTreeMap<&str, u64> = self
            .tasks
            .iter()
            .flat_map(|t| &t.shared)
            .map(|file| (file.name.as_str(), file.length))
            .collect();
        files.iter().fold((0, 0), |(new, all), (name, length)| {
            let written_here =
                CheckpointLayout::shared_file_writer(name) == Some(self.checkpoint_id);
            let new = if written_here { new + length } else { new };
            (new, all + length)
        })
    }
}

/// A duration in whole milliseconds, rounded down, as the record keeps them.
fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

/// Unix time in whole milliseconds; 0 for a clock set before 1970.
fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, millis)
}

/// A chain as messages show it: `[3, 4, 5]`.
pub fn format_chain(chain: &[CheckpointId]) -> String {
    let ids: Vec<String> = chain.iter().map(ToString::to_string).collect();
    format!("[{}]", ids.join(", "))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::checkpoint::pending::SnapshotCost;
    use proptest::prelude::*;

    /// A consistent metadata record of checkpoint `id` with `count` at
    /// parallelism 2 and a `source` at parallelism 1.
    pub(crate) fn sample(kind: CheckpointKind, id: u64) -> CheckpointMetadata {
        let task = |vertex: &str, subtask| TaskStateMeta {
            task: TaskId::new(vertex, subtask),
            handle: StateHandle {
                file: CheckpointLayout::state_file_name(&TaskId::new(vertex, subtask)).unwrap(),
                length: 30,
                crc32: 0x1234_5678,
            },
            state_bytes: 6,
            sync_duration_ms: 1,
            async_duration_ms: 2,
            alignment_duration_ms: 0,
            chain: Vec::new(),
            shared: Vec::new(),
        };
        CheckpointMetadata {
            format_version: METADATA_VERSION_SELF_CONTAINED,
            job_name: "wordcount".into(),
            job_fingerprint: 0xfeed_beef_0000_0001,
            checkpoint_id: CheckpointId(id),
            kind,
            trigger_time_ms: 1_700_000_000_000 + id * 1000,
            completion_time_ms: 1_700_000_000_050 + id * 1000,
            duration_ms: 50,
            parallelism: [("source".to_string(), 1), ("count".to_string(), 2)].into(),
            max_parallelism: [("source".to_string(), 128), ("count".to_string(), 128)].into(),
            generation: Generation(3),
            tasks: vec![task("source", 0), task("count", 0), task("count", 1)],
        }
    }

    /// A job with a source `gen`, an operator `op` of parallelism 2 and a sink `out`.
    fn job() -> JobIdentity {
        let text = "name = \"wc\"\n\
             [[source]]\nname = \"gen\"\ntype = \"generator\"\ncount = 10\n\
             [[operator]]\nname = \"op\"\nmodule = \"op.wasm\"\nparallelism = 2\n\
             inputs = [{ from = \"gen\", partition = \"rebalance\" }]\n\
             [[sink]]\nname = \"out\"\ntype = \"blackhole\"\n\
             inputs = [{ from = \"op\", partition = \"rebalance\" }]\n";
        crate::job::Job::from_str(text, "/jobs", "j.toml")
            .unwrap()
            .identity()
    }

    /// An acknowledgement of `bytes` bytes of state for `task`, its
    /// timings in microseconds (sync, async, alignment), with `chain`.
    fn ack(
        task: &TaskId,
        bytes: u64,
        micros: [u64; 3],
        chain: Vec<CheckpointId>,
    ) -> Acknowledgement<StateHandle> {
        Acknowledgement {
            handle: StateHandle {
                file: CheckpointLayout::state_file_name(task).unwrap(),
                length: bytes + FRAME_OVERHEAD as u64,
                crc32: 0xabcd_0000 + task.subtask,
            },
            cost: SnapshotCost {
                sync_duration: Duration::from_micros(micros[0]),
                async_duration: Duration::from_micros(micros[1]),
                alignment_duration: Duration::from_micros(micros[2]),
                bytes,
            },
            chain,
            shared: Vec::new(),
        }
    }

    #[test]
    fn a_completed_checkpoint_records_every_acknowledgement_in_milliseconds() {
        let job = job();
        let (gen0, op0, op1, out0) = (
            TaskId::new("gen", 0),
            TaskId::new("op", 0),
            TaskId::new("op", 1),
            TaskId::new("out", 0),
        );
        let acks: BTreeMap<_, _> = [
            (gen0.clone(), ack(&gen0, 8, [1_999, 3_000, 0], Vec::new())),
            (
                op0.clone(),
                ack(&op0, 100, [2_000, 40_500, 7_250], Vec::new()),
            ),
            (op1.clone(), ack(&op1, 0, [999, 0, 1_000], Vec::new())),
            (out0.clone(), ack(&out0, 4, [0, 0, 0], Vec::new())),
        ]
        .into();
        let completed_at = UNIX_EPOCH + Duration::from_millis(1_700_000_000_250);
        let duration = Duration::from_micros(120_900);
        let meta = CheckpointMetadata::complete(
            &job,
            CheckpointId(7),
            CheckpointKind::Checkpoint,
            completed_at,
            duration,
            &acks,
        );

        assert_eq!(meta.format_version, METADATA_VERSION_SELF_CONTAINED);
        assert_eq!(meta.job_name, "wc");
        assert_eq!(meta.job_fingerprint, job.fingerprint);
        assert_eq!(meta.checkpoint_id, CheckpointId(7));
        assert_eq!(meta.kind, CheckpointKind::Checkpoint);
        assert_eq!(meta.completion_time_ms, 1_700_000_000_250);
        assert_eq!(meta.duration_ms, 120, "rounded down");
        assert_eq!(meta.trigger_time_ms, 1_700_000_000_130);
        assert_eq!(
            meta.parallelism,
            [("gen".into(), 1), ("op".into(), 2), ("out".into(), 1)].into()
        );
        assert_eq!(meta.state_bytes(), 112);
        assert_eq!(meta.tasks.len(), 4);
        let op = meta.task(&op0).unwrap();
        assert_eq!(op.handle, acks[&op0].handle);
        assert_eq!(op.state_bytes, 100);
        assert_eq!(
            (
                op.sync_duration_ms,
                op.async_duration_ms,
                op.alignment_duration_ms
            ),
            (2, 40, 7)
        );
        let gen_entry = meta.task(&gen0).unwrap();
        assert_eq!(
            (gen_entry.sync_duration_ms, gen_entry.async_duration_ms),
            (1, 3)
        );
        assert!(meta.tasks.iter().all(|t| t.chain.is_empty()));
        meta.validate().unwrap();
        assert_eq!(
            CheckpointMetadata::decode(p(), &meta.encode()).unwrap(),
            meta
        );
    }

    #[test]
    fn a_completed_checkpoint_with_a_chain_records_it_and_needs_version_2() {
        let job = job();
        let acks: BTreeMap<_, _> = job
            .parallelism
            .iter()
            .flat_map(|(vertex, &parallelism)| {
                (0..parallelism).map(move |i| TaskId::new(vertex, i))
            })
            .map(|task| {
                let chain = if task.vertex == "op" {
                    vec![CheckpointId(3), CheckpointId(5)]
                } else {
                    Vec::new()
                };
                let ack = ack(&task, 10, [0, 0, 0], chain);
                (task, ack)
            })
            .collect();
        let meta = CheckpointMetadata::complete(
            &job,
            CheckpointId(6),
            CheckpointKind::Checkpoint,
            UNIX_EPOCH + Duration::from_millis(50),
            Duration::from_millis(80),
            &acks,
        );
        assert_eq!(meta.format_version, METADATA_VERSION_CHAINS);
        assert_eq!(
            meta.trigger_time_ms, 0,
            "a clock before the trigger saturates"
        );
        assert_eq!(
            meta.task(&TaskId::new("op", 1)).unwrap().chain,
            vec![CheckpointId(3), CheckpointId(5)]
        );
        assert!(meta.task(&TaskId::new("gen", 0)).unwrap().chain.is_empty());
        assert_eq!(
            meta.chain_links(),
            [CheckpointId(3), CheckpointId(5)].into()
        );
        meta.validate().unwrap();
    }

    fn p() -> &'static Path {
        Path::new("/jobs/wc/chk-0000000003/_metadata")
    }

    #[test]
    fn round_trips_through_the_framed_file() {
        let meta = sample(CheckpointKind::Checkpoint, 3);
        assert_eq!(
            CheckpointMetadata::decode(p(), &meta.encode()).unwrap(),
            meta
        );
    }

    #[test]
    fn json_is_readable_and_names_its_fields() {
        let meta = sample(CheckpointKind::Savepoint, 3);
        let bytes = meta.encode();
        let json = std::str::from_utf8(&bytes[format::HEADER_LEN..bytes.len() - 4]).unwrap();
        for needle in [
            "\"format_version\": 1",
            "\"job_fingerprint\": \"0xfeedbeef00000001\"",
            "\"checkpoint_id\": 3",
            "\"kind\": \"savepoint\"",
            "\"vertex\": \"count\"",
            "\"file\": \"count-1.state\"",
            "\"alignment_duration_ms\": 0",
            "\"crc32\": \"0x12345678\"",
            "\"generation\": 3",
        ] {
            assert!(json.contains(needle), "{needle} not in {json}");
        }
    }

    #[test]
    fn a_flipped_byte_is_a_checksum_error_naming_the_file() {
        let mut bytes = sample(CheckpointKind::Checkpoint, 3).encode();
        let i = bytes.len() / 2;
        bytes[i] ^= 0x01;
        let err = CheckpointMetadata::decode(p(), &bytes).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("metadata file /jobs/wc/chk-0000000003/_metadata: checksum mismatch"),
            "{msg}"
        );
    }

    #[test]
    fn a_newer_schema_is_refused_by_version() {
        let mut meta = sample(CheckpointKind::Checkpoint, 3);
        meta.format_version = 9;
        let err = CheckpointMetadata::decode(p(), &meta.encode()).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("unsupported metadata version 9 (this build reads 3)"),
            "{err}"
        );
    }

    #[test]
    fn chains_round_trip_and_need_version_2_while_records_without_stay_version_1() {
        let plain = sample(CheckpointKind::Checkpoint, 7);
        assert_eq!(CheckpointMetadata::required_version(&plain.tasks), 1);
        let bytes = plain.encode();
        let json = std::str::from_utf8(&bytes[format::HEADER_LEN..bytes.len() - 4]).unwrap();
        assert!(!json.contains("chain"), "{json}");

        let mut chained = sample(CheckpointKind::Checkpoint, 7);
        chained.tasks[1].chain = vec![CheckpointId(4), CheckpointId(6)];
        chained.tasks[2].chain = vec![CheckpointId(5)];
        chained.format_version = CheckpointMetadata::required_version(&chained.tasks);
        assert_eq!(chained.format_version, 2);
        let decoded = CheckpointMetadata::decode(p(), &chained.encode()).unwrap();
        assert_eq!(decoded, chained);
        assert_eq!(
            decoded.chain_links().into_iter().collect::<Vec<_>>(),
            [CheckpointId(4), CheckpointId(5), CheckpointId(6)]
        );
        assert!(plain.chain_links().is_empty());
    }

    /// Shared file `local` of `task`, written by checkpoint `writer`.
    fn shared(writer: u64, task: &TaskId, local: &str) -> SharedFile {
        SharedFile {
            name: CheckpointLayout::shared_file_name(CheckpointId(writer), task, local).unwrap(),
            length: 1024,
            crc32: 0xdead_beef,
        }
    }

    #[test]
    fn shared_files_round_trip_and_need_version_3() {
        let mut meta = sample(CheckpointKind::Checkpoint, 7);
        let task = meta.tasks[1].task.clone();
        meta.tasks[1].shared = vec![
            shared(5, &task, "000012.sst"),
            shared(7, &task, "000020.sst"),
        ];
        meta.format_version = CheckpointMetadata::required_version(&meta.tasks);
        assert_eq!(meta.format_version, 3);
        let bytes = meta.encode();
        let json = std::str::from_utf8(&bytes[format::HEADER_LEN..bytes.len() - 4]).unwrap();
        assert!(json.contains("\"0000000005.count-0.000012.sst\""), "{json}");
        assert!(json.contains("\"0xdeadbeef\""), "{json}");
        let decoded = CheckpointMetadata::decode(p(), &bytes).unwrap();
        assert_eq!(decoded, meta);
        assert_eq!(
            decoded.references().shared,
            [
                "0000000005.count-0.000012.sst".to_string(),
                "0000000007.count-0.000020.sst".to_string()
            ]
            .into()
        );
        // Of the two files' 2 KiB, checkpoint 7 wrote one; a checkpoint without shared files
        // names none.
        assert_eq!(meta.shared_bytes(), (1024, 2048));
        assert_eq!(sample(CheckpointKind::Checkpoint, 7).shared_bytes(), (0, 0));
        // With a chain as well, still version 3.
        meta.tasks[2].chain = vec![CheckpointId(6)];
        assert_eq!(CheckpointMetadata::required_version(&meta.tasks), 3);
        // A build before shared files refuses the record by name; this one reads both older.
        let plain = sample(CheckpointKind::Checkpoint, 7);
        assert!(
            !std::str::from_utf8(&plain.encode())
                .unwrap_or("")
                .contains("shared")
        );
    }

    #[test]
    fn shared_files_are_written_by_earlier_checkpoints_named_once_and_never_a_savepoints() {
        let task = TaskId::new("count", 0);
        let other = "0000000003.count-0".to_string();
        for (kind, files, needle) in [
            (
                CheckpointKind::Savepoint,
                vec![shared(3, &task, "a.sst")],
                "a savepoint must be self-contained",
            ),
            (
                CheckpointKind::Checkpoint,
                vec![shared(8, &task, "a.sst")],
                "is written by checkpoint 8, after checkpoint 7",
            ),
            (
                CheckpointKind::Checkpoint,
                vec![shared(3, &task, "a.sst"), shared(3, &task, "a.sst")],
                "is named twice",
            ),
            (
                CheckpointKind::Checkpoint,
                vec![SharedFile {
                    name: "../escape".into(),
                    length: 30,
                    crc32: 0,
                }],
                "is not one this build writes",
            ),
            (
                CheckpointKind::Checkpoint,
                vec![SharedFile {
                    name: "0000000003.x/../../escape".into(),
                    length: 30,
                    crc32: 0,
                }],
                "is not one this build writes",
            ),
            (
                CheckpointKind::Checkpoint,
                vec![SharedFile {
                    name: other,
                    length: 30,
                    crc32: 0,
                }],
                "",
            ),
        ] {
            let mut meta = sample(kind, 7);
            meta.tasks[0].shared = files;
            meta.format_version = CheckpointMetadata::required_version(&meta.tasks);
            match meta.validate() {
                Ok(()) => assert!(needle.is_empty(), "{kind:?} should be refused: {needle}"),
                Err(problem) => {
                    assert!(!needle.is_empty() && problem.contains(needle), "{problem}")
                }
            }
        }
    }

    #[test]
    fn a_chain_must_be_ascending_earlier_and_never_a_savepoints() {
        for (kind, chain, needle) in [
            (
                CheckpointKind::Checkpoint,
                vec![4, 3],
                "is not in ascending order",
            ),
            (
                CheckpointKind::Checkpoint,
                vec![2, 2],
                "is not in ascending order",
            ),
            (
                CheckpointKind::Checkpoint,
                vec![2, 3],
                "does not end before checkpoint 3",
            ),
            (
                CheckpointKind::Savepoint,
                vec![1],
                "a savepoint must be self-contained",
            ),
        ] {
            let mut meta = sample(kind, 3);
            meta.format_version = METADATA_VERSION;
            meta.tasks[1].chain = chain.into_iter().map(CheckpointId).collect();
            let err = CheckpointMetadata::decode(p(), &meta.encode()).unwrap_err();
            assert!(matches!(err, MetadataError::Invalid { .. }), "{err}");
            assert!(err.to_string().contains("task count#0"), "{err}");
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn framed_non_json_is_named() {
        let bytes = format::encode(FileKind::Metadata, b"not json");
        let err = CheckpointMetadata::decode(p(), &bytes).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("metadata file /jobs/wc/chk-0000000003/_metadata: invalid json")
        );
    }

    #[test]
    fn inconsistent_records_are_refused() {
        let mut missing = sample(CheckpointKind::Checkpoint, 3);
        missing.tasks.pop();
        let mut twice = sample(CheckpointKind::Checkpoint, 3);
        twice.tasks[2] = twice.tasks[1].clone();
        let mut beyond = sample(CheckpointKind::Checkpoint, 3);
        beyond.tasks[2].task.subtask = 5;
        let mut escape = sample(CheckpointKind::Checkpoint, 3);
        escape.tasks[0].handle.file = "../../secret".into();
        let mut stranger = sample(CheckpointKind::Checkpoint, 3);
        stranger.tasks[0].task.vertex = "ghost".into();
        let mut sizes = sample(CheckpointKind::Checkpoint, 3);
        sizes.tasks[1].handle.length = 31;
        for (meta, needle) in [
            (
                missing,
                "2 tasks recorded but the parallelism of the vertices adds up to 3",
            ),
            (twice, "recorded twice"),
            (beyond, "beyond the parallelism 2"),
            (escape, "not a plain file name"),
            (stranger, "belongs to no vertex"),
            (
                sizes,
                "6 bytes of state cannot make a state file of 31 bytes",
            ),
        ] {
            let err = CheckpointMetadata::decode(p(), &meta.encode()).unwrap_err();
            assert!(matches!(err, MetadataError::Invalid { .. }), "{err}");
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn sums_state_bytes_and_finds_tasks() {
        let meta = sample(CheckpointKind::Checkpoint, 3);
        assert_eq!(meta.state_bytes(), 18);
        assert!(meta.task(&TaskId::new("count", 1)).is_some());
        assert!(meta.task(&TaskId::new("count", 2)).is_none());
    }

    proptest! {
        #[test]
        fn reading_arbitrary_bytes_as_metadata_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = CheckpointMetadata::decode(p(), &bytes);
        }

        #[test]
        fn reading_arbitrary_framed_json_never_panics(json in "\\PC{0,200}") {
            let _ = CheckpointMetadata::decode(p(), &format::encode(FileKind::Metadata, json.as_bytes()));
        }
    }
}
