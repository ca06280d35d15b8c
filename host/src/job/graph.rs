//! The job graph: the validated job file (docs/ARCHITECTURE.md, Vocabulary).
//!
//! A [`Job`] is built only by [`Job::from_file`] or [`Job::from_str`] (job/validate.rs), or
//! from another by [`Job::with_parallelism`], which checks the parser's rules for the values it
//! changes; so every `Job` satisfies the rules docs/JOB.md lists: unique vertex names, known
//! inputs, no cycle, forward edges between equal parallelisms, and so on. Paths in it are
//! already resolved against the job file's folder.
//!
//! This module holds the types and the queries on them; writing a job back as a job file is
//! [`print`](super::print), what the disk says about its paths is [`paths`](super::paths).

use std::path::PathBuf;

use weir_abi::key_group::KeyGroups;

use super::control::ControlConfig;
use super::format::{FileFormat, OnError};
use super::kafka::{KafkaSinkSettings, KafkaSourceSettings};
use super::restart::RestartStrategy;
use super::state::StateConfig;
use super::watermark::WatermarkStrategy;
use crate::checkpoint::config::CheckpointConfig;
use crate::ids::TaskId;
use crate::wasm::GuestLimits;
pub use crate::wasm::image::StateCapture;

/// A validated job: its vertices, the edges between them and its settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The job's name (`name`): ASCII letters, digits, `-` and `_`.
    pub name: String,
    /// How messages name the job file (the path it was read from, or the name
    /// given to [`Job::from_str`]).
    pub file: String,
    /// The job file's folder: relative paths in the file are relative to it.
    pub base_dir: PathBuf,
    /// `max_parallelism` as the job file sets it; `None` when it does not (then each vertex
    /// has the default, or the count its restored state was taken with).
    pub max_parallelism: Option<u32>,
    /// Every source, operator and sink, in topological order: a vertex comes
    /// after all its inputs (ties keep file order, sources first).
    pub vertices: Vec<Vertex>,
    /// Every edge, ordered by the receiving vertex (as in `vertices`), then port.
    pub edges: Vec<Edge>,
    /// The `[checkpoint]` table; `directory` is resolved.
    pub checkpoint: CheckpointConfig,
    /// The `[restart]` table.
    pub restart: RestartStrategy,
    /// The `[limits]` table: what operators without their own `limits` get.
    pub limits: GuestLimits,
    /// The `[control]` table: whether and where the running job serves its
    /// control endpoint.
    pub control: ControlConfig,
    /// The `[state]` table: where and within what memory its operators keep keyed state on
    /// the host; `directory` is resolved.
    pub state: StateConfig,
    /// Whether tasks may run chained at all (`chain` at the top of the file; default true):
    /// `false` gives every task a thread of its own.
    pub chain: bool,
}

/// One source, operator or sink.
#[derive(Debug, Clone, PartialEq)]
pub struct Vertex {
    /// Its name, unique in the job; tasks and checkpoint state are named after it.
    pub name: String,
    /// How many parallel tasks (subtasks) run it; at least 1.
    pub parallelism: u32,
    /// How many key groups its keys fall into (docs/JOB.md, `max_parallelism`): a `key-hash`
    /// edge into it routes by them, and its keyed state is split by them when its parallelism
    /// changes. At least `parallelism`.
    pub max_parallelism: u32,
    /// What it is, with the settings of its kind.
    pub kind: VertexKind,
    /// How it makes watermarks: `Some` only for a source with a `watermark` table. A
    /// source without one emits no watermark but the final one at the end of its input;
    /// operators and sinks go by the watermarks of their inputs.
    pub watermark: Option<WatermarkStrategy>,
    /// Whether its tasks may run chained with their neighbours' on one thread (`chain`;
    /// default true). Chaining changes how a job runs, never what it computes nor its
    /// checkpoints.
    pub chain: bool,
    /// The line of its `name` key, for messages about the vertex after loading.
    pub line: usize,
}

/// The three kinds of vertex.
#[derive(Debug, Clone, PartialEq)]
pub enum VertexKind {
    /// Reads records from outside the job; has no inputs.
    Source(SourceKind),
    /// A WebAssembly module; has inputs and outputs.
    Operator(Operator),
    /// Writes records out of the job; has no outputs.
    Sink(SinkKind),
}

/// A source and its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceKind {
    /// The lines of a file, one record each; the position is the byte offset.
    File {
        /// The file, resolved against the job file's folder.
        path: PathBuf,
        /// Keep reading as the file grows instead of ending at its end.
        follow: bool,
        /// How a line becomes a record (`format`, with `key`, `value`, `timestamp`).
        format: FileFormat,
        /// What a line the format cannot read does (`on_error`).
        on_error: OnError,
    },
    /// Deterministic synthetic records, for demos, tests and benchmarks.
    Generator(GeneratorSettings),
    /// The partitions of Kafka topics; the position is an offset per partition.
    Kafka(KafkaSourceSettings),
}

/// The settings of a `generator` source.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratorSettings {
    /// Seeds the record generator: the same seed gives the same records.
    pub seed: u64,
    /// Records to generate over all subtasks; `None` = never end.
    pub count: Option<u64>,
    /// Records per second over all subtasks; `None` = as fast as possible.
    pub rate: Option<f64>,
    /// How many distinct keys (at least 1).
    pub keys: u64,
    /// Bytes in each record's value, for [`GeneratorValues::Letters`].
    pub value_size: usize,
    /// What the values are (`values`, with `min` and `max`).
    pub values: GeneratorValues,
    /// How far out of order the timestamps are, in milliseconds (`disorder`): record `i`
    /// has timestamp `i − d`, `d` from 0 to `disorder` derived from the seed and `i`, and
    /// never below 0. 0 = timestamp `i`, in order. At most
    /// [`MAX_GENERATOR_DISORDER`](super::MAX_GENERATOR_DISORDER).
    pub disorder: u64,
}

/// What a generator's values are made of (`values`; docs/JOB.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GeneratorValues {
    /// `"letters"`: `value_size` lowercase letters.
    #[default]
    Letters,
    /// `"integers"`: an integer from `min` to `max`, both included, in decimal digits.
    Integers {
        /// The smallest value.
        min: i64,
        /// The largest value, at least `min`.
        max: i64,
    },
}

/// A WebAssembly operator and its settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Operator {
    /// The module file, resolved against the job file's folder. Not checked to
    /// exist until [`Job::check_modules_exist`].
    pub module: PathBuf,
    /// The line of the `module` key.
    pub module_line: usize,
    /// Handed to the guest's `weir_init` (docs/ABI.md §6); empty if absent.
    pub config: Vec<u8>,
    /// The job's `[limits]` with this operator's `limits` applied.
    pub limits: GuestLimits,
    /// How checkpoints capture its state (`checkpoint`).
    pub state_capture: StateCapture,
    /// A full image every this many image checkpoints, deltas between them
    /// (`image_full_every`; 1 = every image full). Only for image state.
    pub image_full_every: u32,
}

/// A sink and its settings.
#[derive(Debug, Clone, PartialEq)]
pub enum SinkKind {
    /// Exactly-once part files in a directory (two-phase commit with the checkpoints).
    File {
        /// The output directory, resolved against the job file's folder.
        directory: PathBuf,
    },
    /// A Kafka topic, exactly-once through transactions by default.
    Kafka(KafkaSinkSettings),
    /// One line per record on standard output; at-least-once.
    Stdout,
    /// Counts records and drops them, for benchmarks.
    Blackhole,
}

/// How records of one vertex reach the subtasks of the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Partitioner {
    /// Subtask *i* sends to subtask *i*; both sides have the same parallelism.
    Forward,
    /// Round robin over the downstream subtasks.
    Rebalance,
    /// By a hash of the record's key: equal keys reach the same subtask.
    KeyHash,
    /// Every record to every downstream subtask.
    Broadcast,
}

impl Partitioner {
    /// The name in the job file: `forward`, `rebalance`, `key-hash` or `broadcast`.
    pub fn name(self) -> &'static str {
        match self {
            Partitioner::Forward => "forward",
            Partitioner::Rebalance => "rebalance",
            Partitioner::KeyHash => "key-hash",
            Partitioner::Broadcast => "broadcast",
        }
    }

    /// The partitioner named `name` in a job file.
    pub fn from_name(name: &str) -> Option<Partitioner> {
        [
            Partitioner::Forward,
            Partitioner::Rebalance,
            Partitioner::KeyHash,
            Partitioner::Broadcast,
        ]
        .into_iter()
        .find(|p| p.name() == name)
    }
}

/// A connection from one vertex to an input port of another.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The upstream vertex (a source or an operator).
    pub from: String,
    /// The downstream vertex (an operator or a sink).
    pub to: String,
    /// The input port of `to`: this input's index in its `inputs`, from 0. The
    /// guest sees it on every batch.
    pub port: u32,
    /// How records are spread over `to`'s subtasks.
    pub partitioner: Partitioner,
    /// The side output of `from` this edge reads (the name its guest gives `emit_to`,
    /// docs/ABI.md §15); `None` = its main output. Always `None` from a source.
    pub output: Option<String>,
}

/// Why a job cannot run with the parallelisms asked for ([`Job::with_parallelism`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParallelismError {
    /// No vertex was named.
    #[error("no parallelism given: name a vertex and its new parallelism, as in count=3")]
    Nothing,
    /// A name is not a vertex of the job.
    #[error("the job has no vertex `{vertex}`; its vertices are {}", vertices.join(", "))]
    UnknownVertex {
        /// The name given.
        vertex: String,
        /// The job's vertices.
        vertices: Vec<String>,
    },
    /// Every vertex named already runs at the parallelism given.
    #[error("every vertex named already runs at that parallelism: nothing to rescale")]
    Unchanged,
    /// The job with those parallelisms would not be a valid job file.
    #[error("the job would be invalid with that parallelism: {0}")]
    Invalid(String),
}

impl Vertex {
    /// `"source"`, `"operator"` or `"sink"`.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            VertexKind::Source(_) => "source",
            VertexKind::Operator(_) => "operator",
            VertexKind::Sink(_) => "sink",
        }
    }

    /// The operator settings, if this is an operator.
    pub fn operator(&self) -> Option<&Operator> {
        match &self.kind {
            VertexKind::Operator(operator) => Some(operator),
            _ => None,
        }
    }

    /// One task per subtask, in subtask order.
    pub fn tasks(&self) -> impl Iterator<Item = TaskId> + '_ {
        (0..self.parallelism).map(|subtask| TaskId::new(self.name.clone(), subtask))
    }

    /// Its key groups and how they are dealt to its subtasks.
    pub fn key_groups(&self) -> KeyGroups {
        KeyGroups::new(self.max_parallelism, self.parallelism)
            .expect("a validated vertex's parallelism is at most its max_parallelism")
    }
}

impl Job {
    /// This job with the vertices named in `key_groups` given those key groups: what a restore
    /// keeps of the operators whose state was split into them (`runtime::restore`).
    pub(crate) fn with_key_groups(
        &self,
        key_groups: &std::collections::BTreeMap<String, u32>,
    ) -> Job {
        let mut job = self.clone();
        for vertex in &mut job.vertices {
            if let Some(&groups) = key_groups.get(&vertex.name) {
                vertex.max_parallelism = groups;
            }
        }
        job
    }

    /// The vertex named `name`.
    pub fn vertex(&self, name: &str) -> Option<&Vertex> {
        self.vertices.iter().find(|v| v.name == name)
    }

    /// The sources, in topological (and so file) order.
    pub fn sources(&self) -> impl Iterator<Item = &Vertex> {
        self.vertices
            .iter()
            .filter(|v| matches!(v.kind, VertexKind::Source(_)))
    }

    /// The operators, in topological order.
    pub fn operators(&self) -> impl Iterator<Item = &Vertex> {
        self.vertices
            .iter()
            .filter(|v| matches!(v.kind, VertexKind::Operator(_)))
    }

    /// The sinks, in topological order.
    pub fn sinks(&self) -> impl Iterator<Item = &Vertex> {
        self.vertices
            .iter()
            .filter(|v| matches!(v.kind, VertexKind::Sink(_)))
    }

    /// The edges into `vertex`, by port.
    pub fn inputs_of<'a>(&'a self, vertex: &'a str) -> impl Iterator<Item = &'a Edge> {
        self.edges.iter().filter(move |e| e.to == vertex)
    }

    /// The edges out of `vertex`, in [`Job::edges`] order.
    pub fn outputs_of<'a>(&'a self, vertex: &'a str) -> impl Iterator<Item = &'a Edge> {
        self.edges.iter().filter(move |e| e.from == vertex)
    }

    /// Every task of the job: who must acknowledge a checkpoint.
    pub fn tasks(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.vertices.iter().flat_map(Vertex::tasks)
    }

    /// The tasks of the sources: who receives a checkpoint's trigger.
    pub fn source_tasks(&self) -> impl Iterator<Item = TaskId> + '_ {
        self.sources().flat_map(Vertex::tasks)
    }
}
