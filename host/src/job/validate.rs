//! From job file text to a [`Job`]: parse into a [`JobSpec`], then check every
//! rule docs/JOB.md states, naming the line of the offending key.
//!
//! The first problem found is reported. Checks run in file order within each
//! step: settings tables, then vertices (names, kinds, parallelism), then
//! inputs, then the graph as a whole (cycles, outputs nothing reads).
//!
//! Here: the parser's entry, the value helpers every rule uses, the job as a whole and each
//! vertex's kind. The rules of one part each have a file below: the settings tables and
//! parallelism (`settings`), a file source's format (`file`), a generator's values
//! (`generator`), Kafka (`kafka`), watermarks (`watermark`) and the graph (`graph`).

use std::collections::HashMap;
use std::fs;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use toml::Spanned;
use weir_abi::key_group::{DEFAULT_MAX_PARALLELISM, MAX_MAX_PARALLELISM};

use super::control::ControlConfig;
use super::error::{JobError, Location, Problem};
use super::graph::{
    Edge, GeneratorSettings, Job, Operator, Partitioner, SinkKind, SourceKind, StateCapture,
    Vertex, VertexKind,
};
use super::restart::RestartStrategy;
use super::spec::{InputSpec, JobSpec, OperatorSpec, SinkSpec, SourceSpec};
use super::state::StateConfig;
use super::units::{
    DURATION_FORMS, SIZE_FORMS, UnitError, format_duration, format_size, parse_duration, parse_size,
};
use crate::checkpoint::config::CheckpointConfig;
use crate::wasm::GuestLimits;
use crate::wasm::ImagePolicy;

mod file;
mod generator;
mod graph;
mod kafka;
mod rescale;
mod settings;
mod watermark;

/// Keys of a file source.
const FILE_SOURCE_KEYS: &[&str] = &[
    "name",
    "type",
    "parallelism",
    "watermark",
    "path",
    "follow",
    "format",
    "key",
    "value",
    "timestamp",
    "header",
    "on_error",
];
/// Keys of a generator source.
pub(super) const GENERATOR_KEYS: &[&str] = &[
    "name",
    "type",
    "parallelism",
    "watermark",
    "seed",
    "count",
    "rate",
    "keys",
    "value_size",
    "values",
    "min",
    "max",
    "disorder",
];
/// Keys of a file sink.
const FILE_SINK_KEYS: &[&str] = &["name", "type", "parallelism", "inputs", "path"];
/// Keys of a stdout or blackhole sink.
const PLAIN_SINK_KEYS: &[&str] = &["name", "type", "parallelism", "inputs"];

/// What a source's `type` may be, for messages.
const SOURCE_TYPES: &str = "\"file\", \"generator\" or \"kafka\"";
/// What a sink's `type` may be, for messages.
const SINK_TYPES: &str = "\"file\", \"kafka\", \"stdout\" or \"blackhole\"";
/// What a vertex or job name may be made of.
const NAME_RULE: &str = "1 to 64 ASCII letters, digits, '-' or '_'";

/// Generator defaults (docs/JOB.md).
const DEFAULT_GENERATOR_KEYS: u64 = 1_000;
/// Generator default value size in bytes (docs/JOB.md).
const DEFAULT_GENERATOR_VALUE_SIZE: usize = 16;
/// The largest csv column index a file source may name: a line with more columns than this
/// is not a table anyone writes by hand, and the index must fit a TOML integer.
pub const MAX_CSV_COLUMN: u64 = 65_535;

/// The most subtasks one vertex may have (`parallelism`). A rebalance or key-hash edge joins
/// every upstream subtask to every downstream one: 256 × 256 is 65,536 channels, each with a
/// batch buffer of `BATCH_BYTES` (the router's batch size) on the sending side.
pub const MAX_PARALLELISM: u32 = 256;
/// The most subtasks of a job, summed over its vertices: each subtask is an OS thread, and an
/// operator's subtask also a guest instance with up to `max_memory` of memory.
pub const MAX_SUBTASKS: u32 = 1024;
/// The largest generator `value_size`, in bytes (1 MiB): a record larger than a batch
/// (the router's `BATCH_BYTES`, 64 KiB) travels as a batch of its
/// own, and a channel holds 16 batches, so one channel then holds at most 16 MiB.
pub const MAX_VALUE_SIZE: usize = 1 << 20;
/// The largest generator `count`: record `i` has timestamp `i`, an `i64`.
pub const MAX_GENERATOR_COUNT: u64 = i64::MAX as u64;
/// The largest generator `disorder`, in milliseconds (one hour): how far back a record's
/// timestamp may be moved. Disorder is for testing late and out-of-order records; windows
/// and watermark lags beyond an hour are not what such a test needs.
pub const MAX_GENERATOR_DISORDER: u64 = 3_600_000;
/// The largest generator `rate`, in records per second: far beyond what a source produces
/// (leave `rate` out for no limit); the pacing arithmetic stays exact below it.
pub const MAX_GENERATOR_RATE: f64 = 1e9;
/// The longest duration any key takes (365 days, `"8760h"`): a checkpoint interval, pause,
/// timeout or restart delay longer than a year is never reached by a running job, and
/// points at a typo (use `interval = "off"` to turn checkpoints off).
pub const MAX_DURATION: Duration = Duration::from_secs(365 * 24 * 3600);
/// The largest `max_memory`, `max_output`, `max_state` and `max_timer_state` (4 GiB): a
/// guest's 32-bit memory holds at most 4 GiB, so it can neither use more nor emit or save more
/// in one call; its timers, host memory, get the same bound.
pub const MAX_GUEST_BYTES: u64 = 4 << 30;
/// The key groups of a job whose file does not set `max_parallelism` and whose widest vertex
/// has `widest` subtasks: [`DEFAULT_MAX_PARALLELISM`], or for a wider job the power of two at
/// or above one and a half times its width (Flink's rule), so that it can grow by half.
pub(super) fn default_max_parallelism(widest: u32) -> u32 {
    if widest <= DEFAULT_MAX_PARALLELISM {
        return DEFAULT_MAX_PARALLELISM;
    }
    (widest + widest / 2)
        .next_power_of_two()
        .min(MAX_MAX_PARALLELISM)
}

/// Parses and validates job file text (see [`Job::from_str`]).
pub(super) fn parse(text: &str, base_dir: &Path, file: &str) -> Result<Job, JobError> {
    let positions = Positions::new(text, file);
    let spec: JobSpec = toml::from_str(text).map_err(|error| positions.syntax_error(&error))?;
    Validator {
        positions,
        base_dir,
    }
    .job(&spec)
}

impl Job {
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
        parse(text, base_dir.as_ref(), file_name)
    }
}

/// Turns byte offsets of the text into lines and columns.
struct Positions<'a> {
    text: &'a str,
    file: &'a str,
    /// Byte offset of the start of each line.
    line_starts: Vec<usize>,
}

impl<'a> Positions<'a> {
    fn new(text: &'a str, file: &'a str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Positions {
            text,
            file,
            line_starts,
        }
    }

    fn location(&self, offset: usize) -> Location {
        let offset = offset.min(self.text.len());
        let index = self.line_starts.partition_point(|&start| start <= offset) - 1;
        let start = self.line_starts[index];
        let column = self
            .text
            .get(start..offset)
            .map_or(offset - start, |s| s.chars().count())
            + 1;
        Location {
            file: self.file.to_owned(),
            line: index + 1,
            column,
        }
    }

    /// A TOML parser error, with the key it concerns when the text shows one.
    fn syntax_error(&self, error: &toml::de::Error) -> JobError {
        let span = error.span().unwrap_or(0..0);
        let offset = span.start;
        let message = error.message().trim_end();
        let key = self.key_at(span).or_else(|| self.key_before(offset));
        let message = match key {
            Some(key) if !message.contains(&format!("`{key}`")) => format!("`{key}`: {message}"),
            _ => message.to_owned(),
        };
        JobError::Syntax {
            at: self.location(offset),
            message,
        }
    }

    /// The text of `span` if it is a key, i.e. followed by `=` (as for "duplicate key").
    fn key_at(&self, span: Range<usize>) -> Option<&'a str> {
        let key = self.text.get(span.clone())?.trim_matches('"');
        let after = self.text.get(span.end..)?.trim_start_matches([' ', '\t']);
        let is_key = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            && after.starts_with('=');
        is_key.then_some(key)
    }

    /// The key of `key = <value at offset>` on the line of `offset`, if any.
    fn key_before(&self, offset: usize) -> Option<&'a str> {
        let offset = offset.min(self.text.len());
        let start = self.line_starts[self.line_starts.partition_point(|&s| s <= offset) - 1];
        let before = self
            .text
            .get(start..offset)?
            .trim_end()
            .strip_suffix('=')?
            .trim_end();
        // Just past the last character that cannot be part of a key, which may be several
        // bytes wide: slicing one byte past its start panicked (found by fuzzing).
        let key_start = before
            .char_indices()
            .rev()
            .find(|&(_, c)| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '"'))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let key = before[key_start..].trim_matches('"');
        (!key.is_empty()).then_some(key)
    }
}

/// A vertex being validated, before the graph is known to be sound.
struct Draft<'s> {
    vertex: Vertex,
    name_span: Range<usize>,
    inputs: Option<&'s Spanned<Vec<Spanned<InputSpec>>>>,
}

/// An edge being validated, by vertex index.
struct DraftEdge {
    from: usize,
    to: usize,
    port: u32,
    partitioner: Partitioner,
    /// The side output read; `None` = the main output.
    output: Option<String>,
    /// Where the input is written.
    span: Range<usize>,
}

/// Checks a [`JobSpec`] against its text.
struct Validator<'a> {
    positions: Positions<'a>,
    base_dir: &'a Path,
}

/// The span of an optional spanned value.
fn span_of<T>(value: &Option<Spanned<T>>) -> Option<Range<usize>> {
    value.as_ref().map(Spanned::span)
}

/// The key of `keys` present (with a span) that comes first in the file, with its span.
fn first_present<'k>(
    keys: impl IntoIterator<Item = (&'k str, Option<Range<usize>>)>,
) -> Option<(&'k str, Range<usize>)> {
    keys.into_iter()
        .filter_map(|(k, span)| span.map(|span| (k, span)))
        .min_by_key(|(_, span)| span.start)
}

/// Whether `name` is a valid job or vertex name.
fn is_valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `` `key` of operator "count" ``.
fn vertex_key(key: &str, kind: &str, name: &str) -> String {
    format!("`{key}` of {kind} \"{name}\"")
}

/// `key` written as 0 where it must be at least 1.
fn zero(key: String) -> Problem {
    Problem::BadValue {
        key,
        found: "0".into(),
        expected: "at least 1".into(),
    }
}

/// Refuses a job of more than [`MAX_SUBTASKS`] subtasks, given its vertices' parallelisms,
/// with the index of the vertex that passes the bound.
fn check_subtasks(parallelisms: &[u32]) -> Result<(), (usize, Box<Problem>)> {
    let mut total = 0u64;
    for (index, &parallelism) in parallelisms.iter().enumerate() {
        total += u64::from(parallelism);
        if total > u64::from(MAX_SUBTASKS) {
            let problem = Problem::TooManySubtasks {
                total: parallelisms.iter().map(|&p| u64::from(p)).sum(),
                max: MAX_SUBTASKS,
            };
            return Err((index, Box::new(problem)));
        }
    }
    Ok(())
}

/// Refuses file source `name` at a parallelism above 1: one file has one reader.
fn check_file_source_parallelism(name: &str, parallelism: u32) -> Result<(), Box<Problem>> {
    if parallelism > 1 {
        return Err(Box::new(Problem::FileSourceParallelism {
            source_name: name.to_owned(),
            parallelism,
        }));
    }
    Ok(())
}

impl Validator<'_> {
    fn error(&self, span: Range<usize>, problem: Problem) -> JobError {
        JobError::Invalid {
            at: self.positions.location(span.start),
            problem: Box::new(problem),
        }
    }

    fn line(&self, span: &Range<usize>) -> usize {
        self.positions.location(span.start).line
    }

    fn bad_value(
        &self,
        span: Range<usize>,
        key: String,
        found: String,
        expected: impl Into<String>,
    ) -> JobError {
        self.error(
            span,
            Problem::BadValue {
                key,
                found,
                expected: expected.into(),
            },
        )
    }

    /// `key` needs `setting` (another key's value) and does not have it: `fix` says what to do.
    fn needs_setting(
        &self,
        span: Range<usize>,
        key: String,
        setting: impl Into<String>,
        fix: impl Into<String>,
    ) -> JobError {
        self.error(
            span,
            Problem::NeedsSetting {
                key,
                setting: setting.into(),
                fix: fix.into(),
            },
        )
    }

    /// The value `choices` pairs with the word `value` holds, or a bad value at `key` that
    /// names `expected` (the words, each with what it means).
    fn word<T: Copy>(
        &self,
        value: &Spanned<String>,
        key: String,
        choices: &[(&str, T)],
        expected: impl Into<String>,
    ) -> Result<T, JobError> {
        let text = value.get_ref();
        match choices.iter().find(|(word, _)| word == text) {
            Some(&(_, chosen)) => Ok(chosen),
            None => Err(self.bad_value(value.span(), key, format!("{text:?}"), expected)),
        }
    }

    /// Refuses the first present key that is not in `allowed`.
    fn only(
        &self,
        present: &[(&'static str, Option<Range<usize>>)],
        allowed: &[&'static str],
        owner: &str,
    ) -> Result<(), JobError> {
        for (key, span) in present {
            if let Some(span) = span
                && !allowed.contains(key)
            {
                return Err(self.error(
                    span.clone(),
                    Problem::KeyNotAllowed {
                        key,
                        owner: owner.to_owned(),
                        allowed: allowed.to_vec(),
                    },
                ));
            }
        }
        Ok(())
    }

    fn duration(&self, value: &Spanned<String>, key: &str) -> Result<Duration, JobError> {
        self.bounded_duration(value, key, DURATION_FORMS)
    }

    /// A duration of at most [`MAX_DURATION`]; `forms` says what may be written, for a
    /// malformed one.
    fn bounded_duration(
        &self,
        value: &Spanned<String>,
        key: &str,
        forms: &str,
    ) -> Result<Duration, JobError> {
        let found = || format!("{:?}", value.get_ref());
        let max = format_duration(MAX_DURATION);
        let duration = parse_duration(value.get_ref()).map_err(|e| match e {
            UnitError::Malformed => {
                self.bad_value(value.span(), key.to_owned(), found(), forms.to_owned())
            }
            UnitError::Overflow => self.error(
                value.span(),
                Problem::Overflow {
                    key: key.to_owned(),
                    found: found(),
                    max: max.clone(),
                },
            ),
        })?;
        if duration > MAX_DURATION {
            return Err(self.error(
                value.span(),
                Problem::TooLarge {
                    key: key.to_owned(),
                    found: found(),
                    max,
                    reason: "365 days: a running job never reaches a longer one",
                },
            ));
        }
        Ok(duration)
    }

    fn positive_duration(&self, value: &Spanned<String>, key: &str) -> Result<Duration, JobError> {
        let duration = self.duration(value, key)?;
        self.above_zero(
            value,
            duration,
            key.to_owned(),
            "a duration above zero, e.g. \"10s\"",
        )
    }

    /// A duration above zero, or `"off"` (`None`); a zero duration is a bad value at `key`
    /// naming `expected`.
    fn duration_or_off(
        &self,
        value: &Spanned<String>,
        key: &str,
        expected: &str,
    ) -> Result<Option<Duration>, JobError> {
        if value.get_ref() == "off" {
            return Ok(None);
        }
        let duration =
            self.bounded_duration(value, key, &format!("\"off\" or {DURATION_FORMS}"))?;
        self.above_zero(value, duration, key.to_owned(), expected)
            .map(Some)
    }

    /// `duration`, read from `text`, unless it is zero: then a bad value at `key` naming
    /// `expected`.
    fn above_zero(
        &self,
        text: &Spanned<String>,
        duration: Duration,
        key: String,
        expected: &str,
    ) -> Result<Duration, JobError> {
        if duration.is_zero() {
            return Err(self.bad_value(
                text.span(),
                key,
                format!("{:?}", text.get_ref()),
                expected,
            ));
        }
        Ok(duration)
    }

    /// A size of a guest's: at least `min` bytes, at most [`MAX_GUEST_BYTES`].
    fn size(&self, value: &Spanned<String>, key: &str, min: u64) -> Result<usize, JobError> {
        let reason = "a guest's 32-bit memory holds at most 4GiB";
        self.size_within(value, key, min, (MAX_GUEST_BYTES, reason))
    }

    /// A size of at least `min` bytes and at most `max`, whose `.1` says why.
    fn size_within(
        &self,
        value: &Spanned<String>,
        key: &str,
        min: u64,
        (limit, reason): (u64, &'static str),
    ) -> Result<usize, JobError> {
        let found = || format!("{:?}", value.get_ref());
        let max = || format_size(limit);
        let bytes = parse_size(value.get_ref()).map_err(|e| match e {
            UnitError::Malformed => {
                self.bad_value(value.span(), key.to_owned(), found(), SIZE_FORMS)
            }
            UnitError::Overflow => self.error(
                value.span(),
                Problem::Overflow {
                    key: key.to_owned(),
                    found: found(),
                    max: max(),
                },
            ),
        })?;
        if bytes > limit {
            return Err(self.error(
                value.span(),
                Problem::TooLarge {
                    key: key.to_owned(),
                    found: found(),
                    max: max(),
                    reason,
                },
            ));
        }
        if bytes < min {
            return Err(self.bad_value(
                value.span(),
                key.to_owned(),
                found(),
                format!("a size of at least {}", format_size(min)),
            ));
        }
        usize::try_from(bytes).map_err(|_| {
            self.bad_value(
                value.span(),
                key.to_owned(),
                found(),
                "a size this machine can address",
            )
        })
    }

    fn at_least_one<T: Copy + Into<u64>>(
        &self,
        value: &Spanned<T>,
        key: String,
    ) -> Result<T, JobError> {
        let number = *value.get_ref();
        if number.into() == 0 {
            return Err(self.error(value.span(), zero(key)));
        }
        Ok(number)
    }

    fn path(&self, value: &Spanned<String>, key: String) -> Result<std::path::PathBuf, JobError> {
        if value.get_ref().is_empty() {
            return Err(self.bad_value(
                value.span(),
                key,
                "\"\"".into(),
                "a path, relative to the job file's folder",
            ));
        }
        Ok(self.base_dir.join(value.get_ref()))
    }

    fn job(&self, spec: &JobSpec) -> Result<Job, JobError> {
        let name = spec.name.get_ref();
        if !is_valid_name(name) {
            return Err(self.bad_value(
                spec.name.span(),
                "`name`".into(),
                format!("{name:?}"),
                NAME_RULE,
            ));
        }
        let default_checkpoint =
            CheckpointConfig::new(self.base_dir.join("checkpoints").join(name));
        let checkpoint = match &spec.checkpoint {
            Some(table) => self.checkpoint(table, default_checkpoint)?,
            None => default_checkpoint,
        };
        let restart = match &spec.restart {
            Some(table) => self.restart(table, spec.name.span())?,
            None if checkpoint.interval.is_some() => RestartStrategy::DEFAULT_FIXED_DELAY,
            None => RestartStrategy::None,
        };
        let limits = match &spec.limits {
            Some(table) => self.limits(table, GuestLimits::default(), &|key| {
                format!("`limits.{key}`")
            })?,
            None => GuestLimits::default(),
        };
        let control = match &spec.control {
            Some(table) => self.control(table)?,
            None => ControlConfig::default(),
        };
        let state = match &spec.state {
            Some(table) => self.state(table)?,
            None => StateConfig::default(),
        };

        let mut drafts = Vec::new();
        let mut lines_by_name: HashMap<&str, usize> = HashMap::new();
        let names = spec
            .sources
            .iter()
            .map(|s| &s.name)
            .chain(spec.operators.iter().map(|o| &o.name))
            .chain(spec.sinks.iter().map(|s| &s.name));
        for name in names {
            let line = self.line(&name.span());
            if let Some(&first_line) = lines_by_name.get(name.get_ref().as_str()) {
                let problem = Problem::DuplicateVertex {
                    name: name.get_ref().clone(),
                    first_line,
                };
                return Err(self.error(name.span(), problem));
            }
            lines_by_name.insert(name.get_ref(), line);
        }
        for source in &spec.sources {
            drafts.push(self.source(source, name)?);
        }
        for operator in &spec.operators {
            drafts.push(self.operator(operator, &limits)?);
        }
        for sink in &spec.sinks {
            drafts.push(self.sink(sink, name)?);
        }
        let max_parallelism = self.max_parallelism(spec, &mut drafts)?;
        let parallelisms: Vec<u32> = drafts.iter().map(|d| d.vertex.parallelism).collect();
        if let Err((index, problem)) = check_subtasks(&parallelisms) {
            return Err(self.error(drafts[index].name_span.clone(), *problem));
        }
        self.check_paths(spec, &drafts, &checkpoint)?;
        self.check_exactly_once_sinks(spec, &drafts, &checkpoint)?;
        if spec.sources.is_empty() {
            return Err(self.error(spec.name.span(), Problem::NoSource));
        }
        if spec.sinks.is_empty() {
            return Err(self.error(spec.name.span(), Problem::NoSink));
        }

        let edges = self.edges(&drafts)?;
        let order = self.topological_order(&drafts, &edges)?;
        for (index, draft) in drafts.iter().enumerate() {
            let feeds_something = edges.iter().any(|e| e.from == index);
            if !feeds_something && !matches!(draft.vertex.kind, VertexKind::Sink(_)) {
                let problem = Problem::UnusedOutput {
                    kind: draft.vertex.kind_name(),
                    vertex: draft.vertex.name.clone(),
                };
                return Err(self.error(draft.name_span.clone(), problem));
            }
        }

        let mut position = vec![0; drafts.len()];
        for (pos, &index) in order.iter().enumerate() {
            position[index] = pos;
        }
        let mut edges = edges;
        edges.sort_by_key(|e| (position[e.to], e.port));
        let edges = edges
            .iter()
            .map(|e| Edge {
                from: drafts[e.from].vertex.name.clone(),
                to: drafts[e.to].vertex.name.clone(),
                port: e.port,
                partitioner: e.partitioner,
                output: e.output.clone(),
            })
            .collect();
        let mut drafts: Vec<Option<Draft>> = drafts.into_iter().map(Some).collect();
        let vertices = order
            .iter()
            .filter_map(|&i| drafts[i].take())
            .map(|d| d.vertex)
            .collect();

        Ok(Job {
            name: name.clone(),
            max_parallelism,
            file: self.positions.file.to_owned(),
            base_dir: self.base_dir.to_owned(),
            vertices,
            edges,
            checkpoint,
            restart,
            limits,
            control,
            state,
            chain: spec.chain.unwrap_or(true),
        })
    }

    fn check_vertex_name(&self, name: &Spanned<String>, kind: &str) -> Result<(), JobError> {
        if is_valid_name(name.get_ref()) {
            return Ok(());
        }
        Err(self.bad_value(
            name.span(),
            format!("`name` of a {kind}"),
            format!("{:?}", name.get_ref()),
            NAME_RULE,
        ))
    }

    /// The required `type` of `kind` `name`; `types` says what it may be.
    fn vertex_type<'s>(
        &self,
        value: &'s Option<Spanned<String>>,
        kind: &str,
        name: &Spanned<String>,
        types: &'static str,
    ) -> Result<&'s Spanned<String>, JobError> {
        value.as_ref().ok_or_else(|| {
            let problem = Problem::MissingKey {
                owner: format!("{kind} \"{}\"", name.get_ref()),
                key: "type",
                meaning: types,
            };
            self.error(name.span(), problem)
        })
    }

    fn source<'s>(&self, spec: &'s SourceSpec, job: &str) -> Result<Draft<'s>, JobError> {
        self.check_vertex_name(&spec.name, "source")?;
        let name = spec.name.get_ref();
        if let Some(inputs) = &spec.inputs {
            return Err(self.error(
                inputs.span(),
                Problem::SourceWithInputs {
                    source_name: name.clone(),
                },
            ));
        }
        let kind = self.vertex_type(&spec.kind, "source", &spec.name, SOURCE_TYPES)?;
        let parallelism = self.parallelism(&spec.parallelism, "source", name)?;
        let present = [
            ("path", span_of(&spec.path)),
            ("follow", span_of(&spec.follow)),
            ("format", span_of(&spec.format)),
            ("key", span_of(&spec.key)),
            ("value", span_of(&spec.value)),
            ("timestamp", span_of(&spec.timestamp)),
            ("header", span_of(&spec.header)),
            ("on_error", span_of(&spec.on_error)),
            ("seed", span_of(&spec.seed)),
            ("count", span_of(&spec.count)),
            ("rate", span_of(&spec.rate)),
            ("keys", span_of(&spec.keys)),
            ("value_size", span_of(&spec.value_size)),
            ("values", span_of(&spec.values)),
            ("min", span_of(&spec.min)),
            ("max", span_of(&spec.max)),
            ("disorder", span_of(&spec.disorder)),
            ("bootstrap", span_of(&spec.bootstrap)),
            ("topics", span_of(&spec.topics)),
            ("topic_pattern", span_of(&spec.topic_pattern)),
            ("start", span_of(&spec.start)),
            ("until", span_of(&spec.until)),
            ("isolation", span_of(&spec.isolation)),
            ("group", span_of(&spec.group)),
            ("discovery_interval", span_of(&spec.discovery_interval)),
            ("properties", span_of(&spec.properties)),
        ];
        let owner = |kind: &str| format!("{kind} source \"{name}\"");
        let kind = match kind.get_ref().as_str() {
            "file" => {
                self.only(&present, FILE_SOURCE_KEYS, &owner("file"))?;
                let Some(path) = &spec.path else {
                    let meaning = "the file to read, relative to the job file's folder";
                    let problem = Problem::MissingKey {
                        owner: owner("file"),
                        key: "path",
                        meaning,
                    };
                    return Err(self.error(spec.name.span(), problem));
                };
                if let Err(problem) = check_file_source_parallelism(name, parallelism) {
                    let span = span_of(&spec.parallelism).unwrap_or(spec.name.span());
                    return Err(self.error(span, *problem));
                }
                let (format, on_error) = self.file_format(spec, name)?;
                SourceKind::File {
                    path: self.path(path, vertex_key("path", "source", name))?,
                    follow: spec.follow.as_ref().is_some_and(|f| *f.get_ref()),
                    format,
                    on_error,
                }
            }
            "generator" => {
                self.only(&present, GENERATOR_KEYS, &owner("generator"))?;
                let rate = match &spec.rate {
                    Some(rate) => {
                        let value = *rate.get_ref();
                        if !(value.is_finite() && value > 0.0) {
                            return Err(self.bad_value(
                                rate.span(),
                                vertex_key("rate", "source", name),
                                value.to_string(),
                                "records per second above 0 (leave `rate` out for no limit)",
                            ));
                        }
                        if value > MAX_GENERATOR_RATE {
                            return Err(self.error(
                                rate.span(),
                                Problem::TooLarge {
                                    key: vertex_key("rate", "source", name),
                                    found: value.to_string(),
                                    max: "1e9".into(),
                                    reason: "far beyond what a source produces; leave `rate` \
                                             out for no limit",
                                },
                            ));
                        }
                        Some(value)
                    }
                    None => None,
                };
                let keys = match &spec.keys {
                    Some(keys) => self.at_least_one(keys, vertex_key("keys", "source", name))?,
                    None => DEFAULT_GENERATOR_KEYS,
                };
                let value_size = match &spec.value_size {
                    Some(size) if *size.get_ref() > MAX_VALUE_SIZE as u64 => {
                        return Err(self.error(
                            size.span(),
                            Problem::TooLarge {
                                key: vertex_key("value_size", "source", name),
                                found: size.get_ref().to_string(),
                                max: format!("{MAX_VALUE_SIZE} (1MiB)"),
                                reason: "a record larger than a 64KiB batch travels as a batch \
                                         of its own, and a channel holds 16 batches",
                            },
                        ));
                    }
                    Some(size) => *size.get_ref() as usize,
                    None => DEFAULT_GENERATOR_VALUE_SIZE,
                };
                if let Some(count) = &spec.count
                    && *count.get_ref() > MAX_GENERATOR_COUNT
                {
                    return Err(self.error(
                        count.span(),
                        Problem::TooLarge {
                            key: vertex_key("count", "source", name),
                            found: count.get_ref().to_string(),
                            max: MAX_GENERATOR_COUNT.to_string(),
                            reason: "record i has timestamp i, a signed 64-bit integer; \
                                     leave `count` out for no end",
                        },
                    ));
                }
                let disorder = match &spec.disorder {
                    Some(disorder) if *disorder.get_ref() > MAX_GENERATOR_DISORDER => {
                        return Err(self.error(
                            disorder.span(),
                            Problem::TooLarge {
                                key: vertex_key("disorder", "source", name),
                                found: disorder.get_ref().to_string(),
                                max: MAX_GENERATOR_DISORDER.to_string(),
                                reason: "one hour, in milliseconds of timestamp; a test of late \
                                         and out-of-order records needs no more",
                            },
                        ));
                    }
                    Some(disorder) => *disorder.get_ref(),
                    None => 0,
                };
                let values = self.generator_values(spec, name)?;
                SourceKind::Generator(GeneratorSettings {
                    seed: spec.seed.as_ref().map_or(0, |s| *s.get_ref()),
                    count: spec.count.as_ref().map(|c| *c.get_ref()),
                    rate,
                    keys,
                    value_size,
                    values,
                    disorder,
                })
            }
            "kafka" => {
                self.only(&present, kafka::KAFKA_SOURCE_KEYS, &owner("kafka"))?;
                SourceKind::Kafka(self.kafka_source(spec, job)?)
            }
            other => {
                return Err(self.bad_value(
                    kind.span(),
                    vertex_key("type", "source", name),
                    format!("{other:?}"),
                    SOURCE_TYPES,
                ));
            }
        };
        let watermark = match &spec.watermark {
            Some(table) => Some(self.watermark(table.get_ref(), name)?),
            None => None,
        };
        Ok(Draft {
            vertex: Vertex {
                name: name.clone(),
                parallelism,
                // Set for the whole job once every vertex is read.
                max_parallelism: DEFAULT_MAX_PARALLELISM,
                kind: VertexKind::Source(kind),
                watermark,
                chain: spec.chain.unwrap_or(true),
                line: self.line(&spec.name.span()),
            },
            name_span: spec.name.span(),
            inputs: None,
        })
    }

    fn operator<'s>(
        &self,
        spec: &'s OperatorSpec,
        job_limits: &GuestLimits,
    ) -> Result<Draft<'s>, JobError> {
        self.check_vertex_name(&spec.name, "operator")?;
        let name = spec.name.get_ref();
        self.no_watermark(spec.watermark.as_ref(), "operator", name)?;
        let Some(module) = &spec.module else {
            let meaning = "the operator's .wasm file, relative to the job file's folder";
            let problem = Problem::MissingKey {
                owner: format!("operator \"{name}\""),
                key: "module",
                meaning,
            };
            return Err(self.error(spec.name.span(), problem));
        };
        let parallelism = self.parallelism(&spec.parallelism, "operator", name)?;
        let limits = match &spec.limits {
            Some(table) => self.limits(table, *job_limits, &|key| {
                vertex_key(&format!("limits.{key}"), "operator", name)
            })?,
            None => *job_limits,
        };
        let state_capture = match &spec.checkpoint {
            None => StateCapture::default(),
            Some(value) => value.get_ref().parse().map_err(|()| {
                self.bad_value(
                    value.span(),
                    vertex_key("checkpoint", "operator", name),
                    format!("{:?}", value.get_ref()),
                    "\"exports\" (the guest's weir_snapshot/weir_restore), \"image\" (a copy of \
                     its memory and globals) or \"auto\" (exports if it has them, else an image)",
                )
            })?,
        };
        let image_full_every = match &spec.image_full_every {
            None => ImagePolicy::DEFAULT_FULL_EVERY,
            Some(value) if *value.get_ref() == 0 => {
                return Err(self.bad_value(
                    value.span(),
                    vertex_key("image_full_every", "operator", name),
                    "0".into(),
                    "at least 1: a full image every this many image checkpoints, deltas \
                     between them (1 = every image full)",
                ));
            }
            Some(value) => *value.get_ref(),
        };
        let operator = Operator {
            module: self.path(module, vertex_key("module", "operator", name))?,
            module_line: self.line(&module.span()),
            config: spec
                .config
                .clone()
                .map(String::into_bytes)
                .unwrap_or_default(),
            limits,
            state_capture,
            image_full_every,
        };
        Ok(Draft {
            vertex: Vertex {
                name: name.clone(),
                parallelism,
                // Set for the whole job once every vertex is read.
                max_parallelism: DEFAULT_MAX_PARALLELISM,
                kind: VertexKind::Operator(operator),
                watermark: None,
                chain: spec.chain.unwrap_or(true),
                line: self.line(&spec.name.span()),
            },
            name_span: spec.name.span(),
            inputs: spec.inputs.as_ref(),
        })
    }

    fn sink<'s>(&self, spec: &'s SinkSpec, job: &str) -> Result<Draft<'s>, JobError> {
        self.check_vertex_name(&spec.name, "sink")?;
        let name = spec.name.get_ref();
        self.no_watermark(spec.watermark.as_ref(), "sink", name)?;
        let kind = self.vertex_type(&spec.kind, "sink", &spec.name, SINK_TYPES)?;
        let parallelism = self.parallelism(&spec.parallelism, "sink", name)?;
        let present = [
            ("path", span_of(&spec.path)),
            ("bootstrap", span_of(&spec.bootstrap)),
            ("topic", span_of(&spec.topic)),
            ("timestamp", span_of(&spec.timestamp)),
            ("delivery", span_of(&spec.delivery)),
            (
                "transactional_id_prefix",
                span_of(&spec.transactional_id_prefix),
            ),
            ("marker_topic", span_of(&spec.marker_topic)),
            ("properties", span_of(&spec.properties)),
        ];
        let owner = |kind: &str| format!("{kind} sink \"{name}\"");
        let kind = match kind.get_ref().as_str() {
            "file" => {
                self.only(&present, FILE_SINK_KEYS, &owner("file"))?;
                let Some(path) = &spec.path else {
                    let meaning = "the output directory, relative to the job file's folder";
                    let problem = Problem::MissingKey {
                        owner: owner("file"),
                        key: "path",
                        meaning,
                    };
                    return Err(self.error(spec.name.span(), problem));
                };
                SinkKind::File {
                    directory: self.path(path, vertex_key("path", "sink", name))?,
                }
            }
            "kafka" => {
                self.only(&present, kafka::KAFKA_SINK_KEYS, &owner("kafka"))?;
                SinkKind::Kafka(self.kafka_sink(spec, job)?)
            }
            "stdout" => {
                self.only(&present, PLAIN_SINK_KEYS, &owner("stdout"))?;
                SinkKind::Stdout
            }
            "blackhole" => {
                self.only(&present, PLAIN_SINK_KEYS, &owner("blackhole"))?;
                SinkKind::Blackhole
            }
            other => {
                return Err(self.bad_value(
                    kind.span(),
                    vertex_key("type", "sink", name),
                    format!("{other:?}"),
                    SINK_TYPES,
                ));
            }
        };
        Ok(Draft {
            vertex: Vertex {
                name: name.clone(),
                parallelism,
                // Set for the whole job once every vertex is read.
                max_parallelism: DEFAULT_MAX_PARALLELISM,
                kind: VertexKind::Sink(kind),
                watermark: None,
                chain: spec.chain.unwrap_or(true),
                line: self.line(&spec.name.span()),
            },
            name_span: spec.name.span(),
            inputs: spec.inputs.as_ref(),
        })
    }
}
