//! What can be wrong with a job file, and where.
//!
//! Every error but an unreadable file carries a [`Location`] and displays as
//! `file:line:column: message`, the form editors and terminals link to.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A position in the job file, counted from 1.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The job file as messages name it (the path given to `weir`, or a test's name).
    pub file: String,
    /// Line, from 1.
    pub line: usize,
    /// Column in characters, from 1.
    pub column: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// Why a job file could not be turned into a [`Job`](super::Job).
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// The file could not be read.
    #[error("{}: cannot read the job file: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The text is not TOML, or a key is unknown, missing or of the wrong type
    /// (the message comes from the TOML parser).
    #[error("{at}: {message}")]
    Syntax {
        /// Where.
        at: Location,
        /// What the parser said, prefixed with the key when one is known.
        message: String,
    },
    /// The file is well-formed but describes an invalid job.
    #[error("{at}: {problem}")]
    Invalid {
        /// Where: the key or table the problem is about.
        at: Location,
        /// What is wrong (boxed: it is large, and errors travel in `Result`s).
        problem: Box<Problem>,
    },
}

impl JobError {
    /// Where in the job file the error is, unless the file could not be read.
    pub fn location(&self) -> Option<&Location> {
        match self {
            JobError::Read { .. } => None,
            JobError::Syntax { at, .. } | JobError::Invalid { at, .. } => Some(at),
        }
    }

    /// The line of [`location`](Self::location).
    pub fn line(&self) -> Option<usize> {
        self.location().map(|at| at.line)
    }

    /// The validation problem, if this is one.
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            JobError::Invalid { problem, .. } => Some(problem),
            _ => None,
        }
    }
}

/// A well-formed job file describing an invalid job. Vertex names are the
/// names of sources, operators and sinks; a `kind` is `"source"`,
/// `"operator"` or `"sink"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A key has a value outside what it allows.
    #[error("{key}: expected {expected}, found {found}")]
    BadValue {
        /// The key, with its table (`` `checkpoint.interval` ``, `` `parallelism` of operator "count" ``).
        key: String,
        /// The value as written.
        found: String,
        /// What is allowed.
        expected: String,
    },
    /// A required key is absent.
    #[error("{owner} needs `{key}`: {meaning}")]
    MissingKey {
        /// The table lacking it (`file source "lines"`).
        owner: String,
        /// The key.
        key: &'static str,
        /// What the key means, so the user knows what to write.
        meaning: &'static str,
    },
    /// A key that exists, but not for this `type` or `strategy`.
    #[error("`{key}` does not apply to {owner}: its keys are {}", allowed.join(", "))]
    KeyNotAllowed {
        /// The key.
        key: &'static str,
        /// The table it was found in (`restart strategy "exponential-delay"`).
        owner: String,
        /// The keys that apply there.
        allowed: Vec<&'static str>,
    },
    /// A key that exists for this `type`, but not with another key's setting (`key` with
    /// `format = "lines"`, `min` with `values = "letters"`).
    #[error("{key} does not apply with {setting}: {fix}")]
    NeedsSetting {
        /// The key, with its table.
        key: String,
        /// The setting it does not go with, as written (`` `format = "lines"` ``).
        setting: String,
        /// Why, and what to write instead.
        fix: String,
    },
    /// Two vertices share a name.
    #[error(
        "vertex name \"{name}\" is already used on line {first_line}: \
         names must be unique across sources, operators and sinks"
    )]
    DuplicateVertex {
        /// The name.
        name: String,
        /// Where it was first used.
        first_line: usize,
    },
    /// An input names no vertex.
    #[error(
        "{kind} \"{vertex}\" reads from unknown vertex \"{input}\": known vertices are {}",
        quoted(known)
    )]
    UnknownInput {
        /// The reading vertex's kind.
        kind: &'static str,
        /// The reading vertex.
        vertex: String,
        /// The unknown name.
        input: String,
        /// Every source and operator name, in file order.
        known: Vec<String>,
    },
    /// An input names a sink.
    #[error(
        "{kind} \"{vertex}\" reads from sink \"{sink}\": sinks have no output; read from a source or an operator"
    )]
    InputFromSink {
        /// The reading vertex's kind.
        kind: &'static str,
        /// The reading vertex.
        vertex: String,
        /// The sink.
        sink: String,
    },
    /// The same output of the same vertex is listed twice in one `inputs`.
    #[error(
        "{kind} \"{vertex}\" lists input \"{input}\"{} twice: list each input once",
        output.as_ref().map_or_else(String::new, |o| format!(" (side output \"{o}\")"))
    )]
    DuplicateInput {
        /// The reading vertex's kind.
        kind: &'static str,
        /// The reading vertex.
        vertex: String,
        /// The input listed twice.
        input: String,
        /// The side output of `input` listed twice; `None` = its main output.
        output: Option<String>,
    },
    /// An input reads a side output of a source.
    #[error(
        "{kind} \"{vertex}\" reads side output \"{output}\" of source \"{source_name}\": \
         sources have only their main output; remove `output`, or read the side output of an \
         operator"
    )]
    SideOutputOfSource {
        /// The reading vertex's kind.
        kind: &'static str,
        /// The reading vertex.
        vertex: String,
        /// The source.
        source_name: String,
        /// The side output named.
        output: String,
    },
    /// A source has `inputs`.
    #[error(
        "source \"{source_name}\" has `inputs`: sources read from outside the job and take no inputs"
    )]
    SourceWithInputs {
        /// The source.
        source_name: String,
    },
    /// An operator or sink has a `watermark` table.
    #[error(
        "{kind} \"{vertex}\" has `watermark`: only sources make watermarks, and operators \
         and sinks go by those of their inputs; set `watermark` on the source the records \
         come from, or remove it"
    )]
    WatermarkNotOnSource {
        /// `"operator"` or `"sink"`.
        kind: &'static str,
        /// The vertex.
        vertex: String,
    },
    /// An operator or sink has no (or empty) `inputs`.
    #[error(
        "{kind} \"{vertex}\" has no `inputs`: list at least one source or operator, e.g. inputs = [\"lines\"]"
    )]
    NoInputs {
        /// `"operator"` or `"sink"`.
        kind: &'static str,
        /// The vertex.
        vertex: String,
    },
    /// A source or operator whose output nothing reads.
    #[error(
        "{kind} \"{vertex}\" feeds nothing: list it in the `inputs` of an operator or sink, or remove it"
    )]
    UnusedOutput {
        /// `"source"` or `"operator"`.
        kind: &'static str,
        /// The vertex.
        vertex: String,
    },
    /// The operators' inputs form a cycle.
    #[error("the inputs form a cycle {}: a job graph must be acyclic", cycle.join(" -> "))]
    Cycle {
        /// The vertices around the cycle, the first repeated at the end.
        cycle: Vec<String>,
    },
    /// A `forward` edge between vertices of different parallelism.
    #[error(
        "`forward` from \"{from}\" (parallelism {from_parallelism}) to \"{to}\" \
         (parallelism {to_parallelism}) needs equal parallelism: use rebalance or key-hash, \
         or match parallelism"
    )]
    ForwardParallelism {
        /// The upstream vertex.
        from: String,
        /// Its parallelism.
        from_parallelism: u32,
        /// The downstream vertex.
        to: String,
        /// Its parallelism.
        to_parallelism: u32,
    },
    /// A file source with parallelism above 1.
    #[error(
        "file source \"{source_name}\" has parallelism {parallelism}: a file source reads \
         one file in order and must have parallelism 1; add a rebalance or key-hash edge \
         downstream to spread the records"
    )]
    FileSourceParallelism {
        /// The source.
        source_name: String,
        /// The parallelism asked for.
        parallelism: u32,
    },
    /// The job has no `[[source]]`.
    #[error("the job has no source: add a [[source]] table")]
    NoSource,
    /// The job has no `[[sink]]`.
    #[error("the job has no sink: add a [[sink]] table")]
    NoSink,
    /// An operator's module file is not there (see [`Job::check_modules_exist`](super::Job::check_modules_exist)).
    #[error(
        "module of operator \"{operator}\" not found at {}: build the example guests with \
         `bash scripts/build-guests.sh`, or fix `module` (relative to the job file's folder)",
        path.display()
    )]
    ModuleMissing {
        /// The operator.
        operator: String,
        /// The module path, resolved against the job file's folder.
        path: PathBuf,
    },
    /// An operator's module path is there but is not a regular file (a directory, a device…).
    #[error(
        "module of operator \"{operator}\" at {} is not a regular file ({kind}): point \
         `module` at a .wasm or .wat file (relative to the job file's folder)",
        path.display()
    )]
    ModuleNotAFile {
        /// The operator.
        operator: String,
        /// The module path, resolved against the job file's folder.
        path: PathBuf,
        /// What it is instead ("a directory", "a character device").
        kind: &'static str,
    },
    /// A file source without `follow` reads a file that does not exist.
    #[error(
        "file source \"{source_name}\" reads {}, which does not exist: create it before the \
         job starts, fix `path` (relative to the job file's folder), or set `follow = true` to \
         wait for it to appear",
        path.display()
    )]
    SourceMissing {
        /// The source.
        source_name: String,
        /// The path, resolved against the job file's folder.
        path: PathBuf,
    },
    /// A file source's path is a directory, a FIFO or a device, not a file of lines.
    #[error(
        "file source \"{source_name}\" reads {}, which is not a regular file ({kind}): point \
         `path` at a text file. A file source starts again from a byte offset after a failure, \
         which only a regular file can give back; to feed a stream, append to a file and set \
         `follow = true`",
        path.display()
    )]
    SourceNotAFile {
        /// The source.
        source_name: String,
        /// The path, resolved against the job file's folder.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// Two paths of the job overlap where they must not (see `job::paths`).
    #[error("{}", overlap_message(first, first_path, second, second_path, *overlap))]
    PathsOverlap {
        /// The use written first.
        first: PathUse,
        /// Its path, as compared.
        first_path: PathBuf,
        /// The use written second, where the error points.
        second: PathUse,
        /// Its path, as compared.
        second_path: PathBuf,
        /// How the second stands to the first.
        overlap: Overlap,
    },
    /// A number larger than the engine can honour, or than makes sense for its key.
    #[error("{key} = {found} is too large: at most {max} ({reason})")]
    TooLarge {
        /// The key, with its table.
        key: String,
        /// The value as written.
        found: String,
        /// The largest value allowed, as it would be written.
        max: String,
        /// Why that is the bound.
        reason: &'static str,
    },
    /// A duration or size whose value does not fit the 64-bit integer it is counted in.
    #[error("{key} = {found} overflows: at most {max}")]
    Overflow {
        /// The key, with its table.
        key: String,
        /// The value as written.
        found: String,
        /// The largest value allowed, as it would be written.
        max: String,
    },
    /// A librdkafka setting in a Kafka connector's `properties` that cannot be used.
    #[error("{key}: {reason}")]
    KafkaProperty {
        /// The key, with its table (`` `properties` of kafka sink "out": `acks` ``).
        key: String,
        /// Why, and what to do instead.
        reason: String,
    },
    /// An exactly-once Kafka sink in a job whose checkpoints cannot make it exactly-once.
    #[error(
        "kafka sink \"{sink}\" has `delivery = \"exactly-once\"`, but {reason}; or set \
         `delivery = \"at-least-once\"` on the sink"
    )]
    ExactlyOnceSink {
        /// The sink.
        sink: String,
        /// What about the checkpoints is wrong, and the fix.
        reason: &'static str,
    },
    /// The vertices' parallelisms add up to more subtasks than a job may have.
    #[error(
        "the job has {total} subtasks (the sum of every vertex's parallelism): at most {max}, \
         because each subtask is a thread of its own with channels to every subtask it feeds, \
         and an operator's subtask a guest instance of its own; lower some parallelism"
    )]
    TooManySubtasks {
        /// The sum of the parallelisms, up to and including the vertex the error points at.
        total: u64,
        /// The bound.
        max: u32,
    },
    /// A vertex has more subtasks than the job has key groups.
    #[error(
        "{kind} `{vertex}` has parallelism {parallelism}, more than the job's max_parallelism \
         of {max_parallelism}: set `max_parallelism` at the top of the job file to at least \
         {parallelism} (it is the number of key groups, and cannot change once a checkpoint \
         holds keyed state)"
    )]
    AboveMaxParallelism {
        /// `source`, `operator` or `sink`.
        kind: &'static str,
        /// The vertex.
        vertex: String,
        /// Its parallelism.
        parallelism: u32,
        /// The job's max_parallelism.
        max_parallelism: u32,
    },
}

/// The message of [`Problem::PathsOverlap`].
fn overlap_message(
    first: &PathUse,
    first_path: &std::path::Path,
    second: &PathUse,
    second_path: &std::path::Path,
    overlap: Overlap,
) -> String {
    let why = match (first, second) {
        (PathUse::FileSource { .. }, _) | (_, PathUse::FileSource { .. }) => {
            "the source would read the job's own output, which the sink replaces and removes as \
             it commits; read a file outside every file sink's directory"
        }
        (PathUse::CheckpointDirectory, _) | (_, PathUse::CheckpointDirectory) => {
            "checkpoint cleanup and the sink's commits would touch each other's files; move the \
             sink's `path` or `checkpoint.directory` apart"
        }
        _ => {
            "both would commit part files of the same names there, one replacing the other's \
             output; give each file sink a directory of its own, neither inside the other"
        }
    };
    format!(
        "{second} uses {}, {} {first} ({}): {why}",
        second_path.display(),
        overlap.words(),
        first_path.display()
    )
}

/// `"a", "b"`, or `none` for an empty list.
fn quoted(names: &[String]) -> String {
    if names.is_empty() {
        return "none".to_owned();
    }
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a path of the job is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathUse {
    /// The output directory of a file sink.
    FileSink {
        /// The sink.
        name: String,
        /// The line of its `name`.
        line: usize,
    },
    /// The checkpoint directory (`checkpoint.directory`, or the default).
    CheckpointDirectory,
    /// The file a file source reads.
    FileSource {
        /// The source.
        name: String,
        /// The line of its `name`.
        line: usize,
    },
}

impl fmt::Display for PathUse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathUse::FileSink { name, line } => write!(f, "file sink \"{name}\" (line {line})"),
            PathUse::CheckpointDirectory => f.write_str("the checkpoint directory"),
            PathUse::FileSource { name, line } => {
                write!(f, "file source \"{name}\" (line {line})")
            }
        }
    }
}

/// How the second of two paths stands to the first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// The same path.
    Same,
    /// The second is inside the first.
    Inside,
    /// The first is inside the second.
    Around,
}

impl Overlap {
    /// How a message says it: "`<second>` is {this} `<first>`".
    pub fn words(self) -> &'static str {
        match self {
            Overlap::Same => "the same path as",
            Overlap::Inside => "inside",
            Overlap::Around => "around (with inside it)",
        }
    }
}
