//! The job graph: the validated job file (docs/ARCHITECTURE.md, Vocabulary).
//!
//! A [`Job`] is built only by [`Job::from_file`] or [`Job::from_str`], so every
//! `Job` satisfies the rules docs/JOB.md lists: unique vertex names, known
//! inputs, no cycle, forward edges between equal parallelisms, and so on.
//! Paths in it are already resolved against the job file's folder.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;
use weir_abi::key_group::KeyGroups;

use super::control::ControlConfig;
use super::error::{JobError, Location, Problem};
use super::kafka::{
    KafkaField, KafkaSinkSettings, KafkaSourceSettings, KafkaStart, KafkaUntil, SinkTopic,
    TopicSelection,
};
use super::paths::{self, PathUse};
use super::restart::RestartStrategy;
use super::spec::{
    CheckpointSpec, ControlSpec, InputSpec, JobSpec, LimitsSpec, OperatorSpec, RestartSpec,
    SinkSpec, SourceSpec, WatermarkSpec,
};
use super::units::{format_duration, format_size};
use super::validate;
use super::watermark::WatermarkStrategy;
use crate::checkpoint::config::{CheckpointConfig, CheckpointMode, Retention};
use crate::ids::TaskId;
use crate::wasm::GuestLimits;
use crate::wasm::ImagePolicy;
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

/// How a file source turns one line into a record (`format`; docs/JOB.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FileFormat {
    /// `"lines"`: an empty key, the whole line as value, the time it was read as timestamp.
    #[default]
    Lines,
    /// `"jsonl"`: one JSON document per line; the fields are JSON pointers (RFC 6901).
    Jsonl(RecordFields<String>),
    /// `"csv"`: one comma-separated record per line; the fields are 0-based column indices.
    Csv {
        /// Which columns are the key, the value and the timestamp.
        fields: RecordFields<usize>,
        /// The first line names the columns: it is not a record (`header`).
        header: bool,
    },
}

impl FileFormat {
    /// The word a job file writes for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            FileFormat::Lines => "lines",
            FileFormat::Jsonl(_) => "jsonl",
            FileFormat::Csv { .. } => "csv",
        }
    }
}

/// Where a structured line keeps a record's parts; `F` is a JSON pointer or a column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordFields<F> {
    /// The key's field; `None` = an empty key.
    pub key: Option<F>,
    /// The value's field; `None` = the whole line.
    pub value: Option<F>,
    /// The timestamp's field, an integer of milliseconds; `None` = the line's number.
    pub timestamp: Option<F>,
}

/// What a source does with input it cannot make a record of (`on_error`): a line a file
/// source's format cannot read, a Kafka record without a header its mapping names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnError {
    /// `"fail"`: the task fails, naming where the input is (the file and line; the topic,
    /// partition and offset) and the problem.
    #[default]
    Fail,
    /// `"skip"`: the input is dropped, counted (`records_skipped`) and logged; the source's
    /// position moves past it.
    Skip,
}

impl OnError {
    /// The word a job file writes for it.
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Fail => "fail",
            OnError::Skip => "skip",
        }
    }
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

    /// This job with the parallelism of each vertex named in `changes` set to its number,
    /// validated as its job file would be (forward edges, `max_parallelism`, the bounds): what a
    /// live rescale runs next.
    pub fn with_parallelism(
        &self,
        changes: &std::collections::BTreeMap<String, u32>,
    ) -> Result<Job, ParallelismError> {
        if changes.is_empty() {
            return Err(ParallelismError::Nothing);
        }
        let mut spec = self.to_spec();
        // Every partitioner written out: the shorthand of the job file would now imply another
        // (a forward edge whose ends no longer match silently becoming a rebalance).
        let inputs = spec
            .operators
            .iter_mut()
            .map(|o| (o.name.get_ref().clone(), &mut o.inputs))
            .chain(
                spec.sinks
                    .iter_mut()
                    .map(|s| (s.name.get_ref().clone(), &mut s.inputs)),
            );
        for (vertex, inputs) in inputs {
            let explicit = self.inputs_of(&vertex).map(|edge| {
                unspanned(InputSpec::Edge {
                    from: unspanned(edge.from.clone()),
                    partition: Some(unspanned(edge.partitioner.name().to_owned())),
                    output: edge.output.clone().map(unspanned),
                })
            });
            *inputs = Some(unspanned(explicit.collect()));
        }
        for (vertex, &parallelism) in changes {
            let slot = spec
                .sources
                .iter_mut()
                .filter(|s| s.name.get_ref() == vertex)
                .map(|s| &mut s.parallelism)
                .chain(
                    spec.operators
                        .iter_mut()
                        .filter(|o| o.name.get_ref() == vertex)
                        .map(|o| &mut o.parallelism),
                )
                .chain(
                    spec.sinks
                        .iter_mut()
                        .filter(|s| s.name.get_ref() == vertex)
                        .map(|s| &mut s.parallelism),
                )
                .next()
                .ok_or_else(|| ParallelismError::UnknownVertex {
                    vertex: vertex.clone(),
                    vertices: self.vertices.iter().map(|v| v.name.clone()).collect(),
                })?;
            *slot = Some(unspanned(parallelism));
        }
        if changes
            .iter()
            .all(|(vertex, &p)| self.vertex(vertex).is_some_and(|v| v.parallelism == p))
        {
            return Err(ParallelismError::Unchanged);
        }
        let text = toml::to_string(&spec).expect("a job spec is always representable in TOML");
        Job::from_str(&text, &self.base_dir, &self.file).map_err(|e| {
            ParallelismError::Invalid(match e {
                JobError::Invalid { problem, .. } => problem.to_string(),
                JobError::Syntax { message, .. } => message,
                JobError::Read { source, .. } => source.to_string(),
            })
        })
    }

    /// Reads and validates the job file at `path`; relative paths in it are
    /// resolved against its folder. Module files are not checked: see
    /// [`Job::load`] and [`Job::check_modules_exist`].
    pub fn from_file(path: impl AsRef<Path>) -> Result<Job, JobError> {
        let path = path.as_ref();
        let text = fs::read_to_string(path).map_err(|source| JobError::Read {
            path: path.to_owned(),
            source,
        })?;
        let base_dir = path.parent().unwrap_or(Path::new(""));
        Job::from_str(&text, base_dir, &path.display().to_string())
    }

    /// [`Job::from_file`], then [`Job::check_files`]: what `weir run` needs.
    pub fn load(path: impl AsRef<Path>) -> Result<Job, JobError> {
        let job = Job::from_file(path)?;
        job.check_files()?;
        Ok(job)
    }

    /// Parses and validates job file text. Relative paths are resolved against
    /// `base_dir`; messages name the file `file_name`. Module files are not checked.
    pub fn from_str(
        text: &str,
        base_dir: impl AsRef<Path>,
        file_name: &str,
    ) -> Result<Job, JobError> {
        validate::parse(text, base_dir.as_ref(), file_name)
    }

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
            paths::canonical(&self.checkpoint.directory),
        )];
        let mut lines = vec![None];
        for vertex in vertices {
            let Some((use_, path)) = PathUse::of(vertex) else {
                continue;
            };
            uses.push((use_, paths::canonical(path)));
            lines.push(Some(vertex.line));
        }
        if let Some((i, j, problem)) = paths::first_conflict(&uses) {
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

    /// The job as a [`JobSpec`] with every setting explicit, paths relative to
    /// [`Job::base_dir`] where possible. Parsing it again gives this job back
    /// (except durations finer than a millisecond, which a job file cannot
    /// write, and `line` fields).
    pub fn to_spec(&self) -> JobSpec {
        let mut spec = JobSpec {
            name: unspanned(self.name.clone()),
            max_parallelism: self.max_parallelism.map(unspanned),
            checkpoint: Some(self.checkpoint_spec()),
            restart: Some(self.restart_spec()),
            limits: Some(limits_spec(&self.limits, None)),
            // Written only when it differs from the default, so job files
            // written back before the table existed keep their text.
            control: (self.control != ControlConfig::default()).then(|| ControlSpec {
                enabled: Some(unspanned(self.control.enabled)),
                address: Some(unspanned(self.control.address.to_string())),
            }),
            // Written only when off, so job files written back before chaining keep their text.
            chain: (!self.chain).then_some(false),
            sources: Vec::new(),
            operators: Vec::new(),
            sinks: Vec::new(),
        };
        for vertex in &self.vertices {
            let name = unspanned(vertex.name.clone());
            let parallelism = Some(unspanned(vertex.parallelism));
            let inputs = self.inputs_spec(vertex);
            let chain = (!vertex.chain).then_some(false);
            match &vertex.kind {
                VertexKind::Source(kind) => {
                    let mut source = SourceSpec {
                        name,
                        kind: None,
                        parallelism,
                        inputs: None,
                        chain,
                        watermark: vertex.watermark.as_ref().map(watermark_spec),
                        path: None,
                        follow: None,
                        format: None,
                        key: None,
                        value: None,
                        timestamp: None,
                        header: None,
                        on_error: None,
                        seed: None,
                        count: None,
                        rate: None,
                        keys: None,
                        value_size: None,
                        values: None,
                        min: None,
                        max: None,
                        disorder: None,
                        bootstrap: None,
                        topics: None,
                        topic_pattern: None,
                        start: None,
                        until: None,
                        isolation: None,
                        group: None,
                        discovery_interval: None,
                        properties: None,
                    };
                    match kind {
                        SourceKind::File {
                            path,
                            follow,
                            format,
                            on_error,
                        } => {
                            source.kind = Some(unspanned("file".into()));
                            source.path = Some(unspanned(self.relative(path)));
                            source.follow = Some(unspanned(*follow));
                            // Written only when not the default, so job files written back
                            // before formats existed keep their text.
                            match format {
                                FileFormat::Lines => {}
                                FileFormat::Jsonl(fields) => {
                                    source.format = Some(unspanned("jsonl".into()));
                                    fields_spec(&mut source, fields, |pointer| {
                                        toml::Value::String(pointer.clone())
                                    });
                                }
                                FileFormat::Csv { fields, header } => {
                                    source.format = Some(unspanned("csv".into()));
                                    source.header = Some(unspanned(*header));
                                    fields_spec(&mut source, fields, |column| {
                                        toml::Value::Integer(*column as i64)
                                    });
                                }
                            }
                            if *format != FileFormat::Lines {
                                source.on_error = Some(unspanned(on_error.as_str().into()));
                            }
                        }
                        SourceKind::Generator(GeneratorSettings {
                            seed,
                            count,
                            rate,
                            keys,
                            value_size,
                            values,
                            disorder,
                        }) => {
                            source.kind = Some(unspanned("generator".into()));
                            // Written only when set, so job files written back before
                            // disorder existed keep their text.
                            source.disorder = (*disorder != 0).then(|| unspanned(*disorder));
                            source.seed = Some(unspanned(*seed));
                            source.count = count.map(unspanned);
                            source.rate = rate.map(unspanned);
                            source.keys = Some(unspanned(*keys));
                            match values {
                                GeneratorValues::Letters => {
                                    source.value_size = Some(unspanned(*value_size as u64));
                                }
                                GeneratorValues::Integers { min, max } => {
                                    source.values = Some(unspanned("integers".into()));
                                    source.min = Some(unspanned(*min));
                                    source.max = Some(unspanned(*max));
                                }
                            }
                        }
                        SourceKind::Kafka(kafka) => kafka_source_spec(&mut source, kafka),
                    }
                    spec.sources.push(source);
                }
                VertexKind::Operator(operator) => spec.operators.push(OperatorSpec {
                    name,
                    module: Some(unspanned(self.relative(&operator.module))),
                    parallelism,
                    config: (!operator.config.is_empty())
                        .then(|| String::from_utf8_lossy(&operator.config).into_owned()),
                    inputs,
                    chain,
                    limits: (operator.limits != self.limits)
                        .then(|| limits_spec(&operator.limits, Some(&self.limits))),
                    checkpoint: (operator.state_capture != StateCapture::default())
                        .then(|| unspanned(operator.state_capture.as_str().to_string())),
                    image_full_every: (operator.image_full_every
                        != ImagePolicy::DEFAULT_FULL_EVERY)
                        .then(|| unspanned(operator.image_full_every)),
                    watermark: None,
                }),
                VertexKind::Sink(kind) => {
                    let mut sink = SinkSpec {
                        name,
                        kind: None,
                        parallelism,
                        inputs,
                        chain,
                        path: None,
                        bootstrap: None,
                        topic: None,
                        timestamp: None,
                        delivery: None,
                        transactional_id_prefix: None,
                        marker_topic: None,
                        properties: None,
                        watermark: None,
                    };
                    let kind = match kind {
                        SinkKind::File { directory } => {
                            sink.path = Some(unspanned(self.relative(directory)));
                            "file"
                        }
                        SinkKind::Kafka(kafka) => {
                            sink.bootstrap = Some(unspanned(kafka.bootstrap.clone()));
                            sink.topic = Some(unspanned(sink_topic_spec(&kafka.topic)));
                            sink.timestamp = Some(unspanned(kafka.timestamp.as_str().into()));
                            sink.delivery = Some(unspanned(kafka.delivery.as_str().into()));
                            sink.transactional_id_prefix =
                                Some(unspanned(kafka.transactional_id_prefix.clone()));
                            sink.marker_topic = Some(unspanned(kafka.marker_topic.clone()));
                            sink.properties = properties_spec(&kafka.properties);
                            "kafka"
                        }
                        SinkKind::Stdout => "stdout",
                        SinkKind::Blackhole => "blackhole",
                    };
                    sink.kind = Some(unspanned(kind.into()));
                    spec.sinks.push(sink);
                }
            }
        }
        spec
    }

    /// [`Job::to_spec`] written as a job file.
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.to_spec()).expect("a job spec is always representable in TOML")
    }

    /// `path` relative to the job folder if it lies under it, else as is.
    fn relative(&self, path: &Path) -> String {
        path.strip_prefix(&self.base_dir)
            .unwrap_or(path)
            .display()
            .to_string()
    }

    fn checkpoint_spec(&self) -> CheckpointSpec {
        let c = &self.checkpoint;
        let duration = |d: Duration| Some(unspanned(format_duration(d)));
        CheckpointSpec {
            interval: Some(unspanned(
                c.interval.map_or_else(|| "off".to_owned(), format_duration),
            )),
            mode: Some(unspanned(
                match c.mode {
                    CheckpointMode::ExactlyOnce => "exactly-once",
                    CheckpointMode::AtLeastOnce => "at-least-once",
                }
                .to_owned(),
            )),
            min_pause: duration(c.min_pause),
            timeout: duration(c.timeout),
            max_concurrent: Some(unspanned(c.max_concurrent)),
            on_cancel: Some(unspanned(
                match c.on_cancel {
                    Retention::RetainOnCancel => "retain",
                    Retention::DeleteOnCancel => "delete",
                }
                .to_owned(),
            )),
            // An object store's job keeps its local directory at the default.
            directory: Some(unspanned(match &c.object_store {
                Some(url) => url.to_string(),
                None => self.relative(&c.directory),
            })),
            retained: Some(unspanned(u32::try_from(c.retained).unwrap_or(u32::MAX))),
            tolerable_failures: Some(unspanned(c.tolerable_failures)),
            // Only an object store's job has them (validation refuses them otherwise).
            storage_endpoint: c
                .object_store
                .as_ref()
                .and_then(|_| c.object_store_options.endpoint.clone())
                .map(unspanned),
            storage_retries: c
                .object_store
                .as_ref()
                .map(|_| unspanned(c.object_store_options.retries)),
            storage_retry_timeout: c
                .object_store
                .as_ref()
                .and_then(|_| duration(c.object_store_options.retry_timeout)),
            storage_request_timeout: c
                .object_store
                .as_ref()
                .and_then(|_| duration(c.object_store_options.request_timeout)),
        }
    }

    fn restart_spec(&self) -> RestartSpec {
        let mut spec = RestartSpec {
            strategy: Some(unspanned(self.restart.name().to_owned())),
            attempts: None,
            delay: None,
            initial: None,
            max: None,
            multiplier: None,
        };
        match self.restart {
            RestartStrategy::None => {}
            RestartStrategy::FixedDelay { attempts, delay } => {
                spec.attempts = Some(unspanned(attempts));
                spec.delay = Some(unspanned(format_duration(delay)));
            }
            RestartStrategy::ExponentialDelay {
                initial,
                max,
                multiplier,
                attempts,
            } => {
                spec.initial = Some(unspanned(format_duration(initial)));
                spec.max = Some(unspanned(format_duration(max)));
                spec.multiplier = Some(unspanned(multiplier));
                spec.attempts = attempts.map(unspanned);
            }
        }
        spec
    }

    fn inputs_spec(&self, vertex: &Vertex) -> Option<Spanned<Vec<Spanned<InputSpec>>>> {
        if matches!(vertex.kind, VertexKind::Source(_)) {
            return None;
        }
        let inputs = self
            .inputs_of(&vertex.name)
            .map(|edge| {
                // The shorthand where it means the same partitioner.
                let upstream = self.vertex(&edge.from).map(|v| v.parallelism);
                let implied = if upstream == Some(vertex.parallelism) {
                    Partitioner::Forward
                } else {
                    Partitioner::Rebalance
                };
                let partition = (edge.partitioner != implied)
                    .then(|| unspanned(edge.partitioner.name().to_owned()));
                unspanned(if partition.is_none() && edge.output.is_none() {
                    InputSpec::Name(edge.from.clone())
                } else {
                    InputSpec::Edge {
                        from: unspanned(edge.from.clone()),
                        partition,
                        output: edge.output.clone().map(unspanned),
                    }
                })
            })
            .collect();
        Some(unspanned(inputs))
    }
}

/// A source's `watermark` table, every key explicit.
fn watermark_spec(strategy: &WatermarkStrategy) -> Spanned<WatermarkSpec> {
    let duration = |d: Duration| Some(unspanned(toml::Value::String(format_duration(d))));
    unspanned(WatermarkSpec {
        out_of_orderness: duration(strategy.out_of_orderness),
        idle_timeout: Some(unspanned(toml::Value::String(
            strategy
                .idle_timeout
                .map_or_else(|| "off".to_owned(), format_duration),
        ))),
        interval: duration(strategy.interval),
    })
}

/// Writes the `key`, `value` and `timestamp` of a structured file format.
fn fields_spec<F>(
    source: &mut SourceSpec,
    fields: &RecordFields<F>,
    write: impl Fn(&F) -> toml::Value,
) {
    source.key = fields.key.as_ref().map(|f| unspanned(write(f)));
    source.value = fields.value.as_ref().map(|f| unspanned(write(f)));
    source.timestamp = fields.timestamp.as_ref().map(|f| unspanned(write(f)));
}

/// Writes the keys of a Kafka source.
fn kafka_source_spec(source: &mut SourceSpec, kafka: &KafkaSourceSettings) {
    source.kind = Some(unspanned("kafka".into()));
    source.bootstrap = Some(unspanned(kafka.bootstrap.clone()));
    match &kafka.topics {
        TopicSelection::Names(names) => {
            source.topics = Some(unspanned(names.iter().cloned().map(unspanned).collect()));
        }
        TopicSelection::Pattern(pattern) => {
            source.topic_pattern = Some(unspanned(pattern.clone()));
        }
    }
    source.start = Some(unspanned(match kafka.start {
        KafkaStart::Earliest => toml::Value::String("earliest".into()),
        KafkaStart::Latest => toml::Value::String("latest".into()),
        KafkaStart::Committed => toml::Value::String("committed".into()),
        KafkaStart::Timestamp(ms) => {
            toml::Value::Table(toml::Table::from_iter([("timestamp".into(), ms.into())]))
        }
    }));
    source.until = Some(unspanned(
        match kafka.until {
            KafkaUntil::Never => "never",
            KafkaUntil::End => "end",
        }
        .into(),
    ));
    source.isolation = Some(unspanned(kafka.isolation.as_str().into()));
    source.group = Some(unspanned(kafka.group.clone()));
    source.discovery_interval = Some(unspanned(
        kafka
            .discovery_interval
            .map_or_else(|| "off".to_owned(), format_duration),
    ));
    source.properties = properties_spec(&kafka.properties);
    let field = |field: &KafkaField, part: &str| {
        unspanned(match field {
            KafkaField::Record => toml::Value::String(part.into()),
            KafkaField::Header(name) => toml::Value::Table(toml::Table::from_iter([(
                "header".into(),
                toml::Value::String(name.clone()),
            )])),
        })
    };
    source.key = Some(field(&kafka.key, "key"));
    source.value = Some(field(&kafka.value, "value"));
    source.timestamp = Some(field(&kafka.timestamp, "timestamp"));
    // Refused without a header to apply to, so written only with one.
    if kafka.maps_headers() {
        source.on_error = Some(unspanned(kafka.on_error.as_str().into()));
    }
}

/// The `topic` of a Kafka sink: a name, or the `{ from_key, topics }` table.
fn sink_topic_spec(topic: &SinkTopic) -> toml::Value {
    match topic {
        SinkTopic::Fixed(name) => toml::Value::String(name.clone()),
        SinkTopic::FromKey { separator, topics } => toml::Value::Table(toml::Table::from_iter([
            (
                "from_key".to_owned(),
                toml::Value::String(separator.clone()),
            ),
            (
                "topics".to_owned(),
                toml::Value::Array(topics.iter().cloned().map(toml::Value::String).collect()),
            ),
        ])),
    }
}

/// The `properties` table of a Kafka connector; absent when empty.
fn properties_spec(properties: &[(String, String)]) -> Option<Spanned<toml::Table>> {
    (!properties.is_empty()).then(|| {
        unspanned(
            properties
                .iter()
                .map(|(k, v)| (k.clone(), toml::Value::String(v.clone())))
                .collect(),
        )
    })
}

/// A value with no position, for specs built in memory.
fn unspanned<T>(value: T) -> Spanned<T> {
    Spanned::new(0..0, value)
}

/// `limits` as a table; with `base`, only the keys that differ from it.
fn limits_spec(limits: &GuestLimits, base: Option<&GuestLimits>) -> LimitsSpec {
    let show = |differs: bool| base.is_none() || differs;
    let base = base.unwrap_or(limits);
    let size = |bytes: usize| unspanned(format_size(bytes as u64));
    LimitsSpec {
        max_memory: show(base.max_memory_bytes != limits.max_memory_bytes)
            .then(|| size(limits.max_memory_bytes)),
        call_timeout: show(base.call_timeout != limits.call_timeout)
            .then(|| unspanned(format_duration(limits.call_timeout))),
        max_output: show(base.max_output_bytes != limits.max_output_bytes)
            .then(|| size(limits.max_output_bytes)),
        max_state: show(base.max_state_bytes != limits.max_state_bytes)
            .then(|| size(limits.max_state_bytes)),
        max_timer_state: show(base.max_timer_bytes != limits.max_timer_bytes)
            .then(|| size(limits.max_timer_bytes)),
    }
}
