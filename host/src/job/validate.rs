//! From job file text to a [`Job`]: parse into a [`JobSpec`], then check every
//! rule docs/JOB.md states, naming the line of the offending key.
//!
//! The first problem found is reported. Checks run in file order within each
//! step: settings tables, then vertices (names, kinds, parallelism), then
//! inputs, then the graph as a whole (cycles, outputs nothing reads).

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

use toml::Spanned;
use weir_abi::key_group::{DEFAULT_MAX_PARALLELISM, MAX_MAX_PARALLELISM};

use super::control::{ADDRESS_FORMS, ControlConfig, parse_address};
use super::error::{JobError, Location, Problem};
use super::graph::{
    Edge, FileFormat, GeneratorSettings, GeneratorValues, Job, OnError, Operator, Partitioner,
    RecordFields, SinkKind, SourceKind, StateCapture, Vertex, VertexKind,
};
use super::paths::{self, PathUse};
use super::restart::RestartStrategy;
use super::spec::{
    CheckpointSpec, ControlSpec, InputSpec, JobSpec, LimitsSpec, OperatorSpec, RestartSpec,
    SinkSpec, SourceSpec,
};
use super::units::{
    DURATION_FORMS, SIZE_FORMS, UnitError, format_duration, format_size, parse_duration, parse_size,
};
use crate::checkpoint::config::{CheckpointConfig, CheckpointMode, Retention};
use crate::checkpoint::storage::{ObjectStoreScheme, ObjectStoreUrl};
use crate::wasm::GuestLimits;
use crate::wasm::ImagePolicy;

mod kafka;
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
const GENERATOR_KEYS: &[&str] = &[
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
/// Keys of the `none` restart strategy.
const NONE_RESTART_KEYS: &[&str] = &["strategy"];
/// Keys of the `fixed-delay` restart strategy.
const FIXED_DELAY_KEYS: &[&str] = &["strategy", "attempts", "delay"];
/// Keys of the `exponential-delay` restart strategy.
const EXPONENTIAL_DELAY_KEYS: &[&str] = &["strategy", "initial", "max", "multiplier", "attempts"];

/// What a vertex or job name may be made of.
const NAME_RULE: &str = "1 to 64 ASCII letters, digits, '-' or '_'";
/// The partitioners, for messages.
const PARTITIONERS: &str = "\"forward\", \"rebalance\", \"key-hash\" or \"broadcast\"";

/// Generator defaults (docs/JOB.md).
const DEFAULT_GENERATOR_KEYS: u64 = 1_000;
/// Generator default value size in bytes (docs/JOB.md).
const DEFAULT_GENERATOR_VALUE_SIZE: usize = 16;
/// Generator default `min` of `values = "integers"` (docs/JOB.md).
const DEFAULT_GENERATOR_MIN: i64 = 0;
/// Generator default `max` of `values = "integers"` (docs/JOB.md).
const DEFAULT_GENERATOR_MAX: i64 = 99;
/// The longest side output name, in bytes of UTF-8: what a guest may pass to `emit_to`
/// (docs/ABI.md §15).
const MAX_SIDE_OUTPUT_NAME: usize = 255;
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
        if duration.is_zero() {
            return Err(self.bad_value(
                value.span(),
                key.to_owned(),
                format!("{:?}", value.get_ref()),
                "a duration above zero, e.g. \"10s\"",
            ));
        }
        Ok(duration)
    }

    fn size(&self, value: &Spanned<String>, key: &str, min: u64) -> Result<usize, JobError> {
        let found = || format!("{:?}", value.get_ref());
        let max = || format_size(MAX_GUEST_BYTES);
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
        if bytes > MAX_GUEST_BYTES {
            return Err(self.error(
                value.span(),
                Problem::TooLarge {
                    key: key.to_owned(),
                    found: found(),
                    max: max(),
                    reason: "a guest's 32-bit memory holds at most 4GiB",
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
            return Err(self.bad_value(value.span(), key, "0".into(), "at least 1"));
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
        let mut total = 0u64;
        for draft in &drafts {
            total += u64::from(draft.vertex.parallelism);
            if total > u64::from(MAX_SUBTASKS) {
                let problem = Problem::TooManySubtasks {
                    total: drafts.iter().map(|d| u64::from(d.vertex.parallelism)).sum(),
                    max: MAX_SUBTASKS,
                };
                return Err(self.error(draft.name_span.clone(), problem));
            }
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
            chain: spec.chain.unwrap_or(true),
        })
    }

    /// Refuses an exactly-once Kafka sink in a job whose checkpoints could not make its output
    /// exactly-once: it commits when a checkpoint completes, so with checkpoints off it would
    /// never commit, and with at-least-once checkpoints the job itself may process a record
    /// twice after a restore.
    fn check_exactly_once_sinks(
        &self,
        spec: &JobSpec,
        drafts: &[Draft<'_>],
        checkpoint: &CheckpointConfig,
    ) -> Result<(), JobError> {
        let reason = if checkpoint.interval.is_none() {
            "it commits its output when a checkpoint completes, and checkpoints are off: set \
             `checkpoint.interval` (e.g. \"1s\")"
        } else if checkpoint.mode == CheckpointMode::AtLeastOnce {
            "`checkpoint.mode = \"at-least-once\"` lets the job process a record twice after a \
             restore, so its output cannot be exactly-once: set the mode to \"exactly-once\""
        } else {
            return Ok(());
        };
        for draft in drafts {
            if let VertexKind::Sink(SinkKind::Kafka(kafka)) = &draft.vertex.kind
                && kafka.delivery == crate::job::kafka::Delivery::ExactlyOnce
            {
                let span = spec
                    .sinks
                    .iter()
                    .find(|s| s.name.get_ref() == &draft.vertex.name)
                    .and_then(|s| span_of(&s.delivery))
                    .unwrap_or(draft.name_span.clone());
                return Err(self.error(
                    span,
                    Problem::ExactlyOnceSink {
                        sink: draft.vertex.name.clone(),
                        reason,
                    },
                ));
            }
        }
        Ok(())
    }

    /// Refuses file sinks whose directories are equal or nested, a file sink on, in or around
    /// the checkpoint directory, and a file source reading inside a file sink's directory,
    /// comparing paths lexically (see [`paths`]).
    fn check_paths(
        &self,
        spec: &JobSpec,
        drafts: &[Draft<'_>],
        checkpoint: &CheckpointConfig,
    ) -> Result<(), JobError> {
        let checkpoint_span = spec.checkpoint.as_ref().and_then(|c| span_of(&c.directory));
        let mut uses = vec![(
            PathUse::CheckpointDirectory,
            paths::lexical(&checkpoint.directory),
        )];
        let mut spans = vec![checkpoint_span];
        let path_spans = spec
            .sources
            .iter()
            .map(|s| span_of(&s.path))
            .chain(spec.operators.iter().map(|_| None))
            .chain(spec.sinks.iter().map(|s| span_of(&s.path)));
        for (draft, span) in drafts.iter().zip(path_spans) {
            let vertex = &draft.vertex;
            let Some((use_, path)) = PathUse::of(vertex) else {
                continue;
            };
            uses.push((use_, paths::lexical(path)));
            spans.push(span);
        }
        let Some((i, j, problem)) = paths::first_conflict(&uses) else {
            return Ok(());
        };
        let span = spans[j]
            .clone()
            .or_else(|| spans[i].clone())
            .unwrap_or(spec.name.span());
        Err(self.error(span, problem))
    }

    /// The `[control]` table.
    fn control(&self, spec: &ControlSpec) -> Result<ControlConfig, JobError> {
        let mut config = ControlConfig::default();
        if let Some(enabled) = &spec.enabled {
            config.enabled = *enabled.get_ref();
        }
        if let Some(address) = &spec.address {
            config.address = parse_address(address.get_ref()).ok_or_else(|| {
                self.bad_value(
                    address.span(),
                    "`control.address`".into(),
                    format!("{:?}", address.get_ref()),
                    ADDRESS_FORMS,
                )
            })?;
        }
        Ok(config)
    }

    fn checkpoint(
        &self,
        spec: &CheckpointSpec,
        mut config: CheckpointConfig,
    ) -> Result<CheckpointConfig, JobError> {
        if let Some(interval) = &spec.interval {
            config.interval = if interval.get_ref() == "off" {
                None
            } else {
                let key = "`checkpoint.interval`";
                let found = || format!("{:?}", interval.get_ref());
                let duration =
                    self.bounded_duration(interval, key, &format!("\"off\" or {DURATION_FORMS}"))?;
                if duration.is_zero() {
                    return Err(self.bad_value(
                        interval.span(),
                        key.into(),
                        found(),
                        "a duration above zero (e.g. \"1s\"), or \"off\"",
                    ));
                }
                Some(duration)
            };
        }
        if let Some(mode) = &spec.mode {
            config.mode = match mode.get_ref().as_str() {
                "exactly-once" => CheckpointMode::ExactlyOnce,
                "at-least-once" => CheckpointMode::AtLeastOnce,
                other => {
                    return Err(self.bad_value(
                        mode.span(),
                        "`checkpoint.mode`".into(),
                        format!("{other:?}"),
                        "\"exactly-once\" or \"at-least-once\"",
                    ));
                }
            };
        }
        if let Some(min_pause) = &spec.min_pause {
            config.min_pause = self.duration(min_pause, "`checkpoint.min_pause`")?;
        }
        if let Some(timeout) = &spec.timeout {
            config.timeout = self.positive_duration(timeout, "`checkpoint.timeout`")?;
        }
        if let Some(max_concurrent) = &spec.max_concurrent {
            config.max_concurrent =
                self.at_least_one(max_concurrent, "`checkpoint.max_concurrent`".into())?;
        }
        if let Some(on_cancel) = &spec.on_cancel {
            config.on_cancel = match on_cancel.get_ref().as_str() {
                "retain" => Retention::RetainOnCancel,
                "delete" => Retention::DeleteOnCancel,
                other => {
                    return Err(self.bad_value(
                        on_cancel.span(),
                        "`checkpoint.on_cancel`".into(),
                        format!("{other:?}"),
                        "\"retain\" or \"delete\"",
                    ));
                }
            };
        }
        if let Some(directory) = &spec.directory {
            match ObjectStoreUrl::parse(directory.get_ref()) {
                // The lock and the control file stay in the default local directory.
                Ok(Some(url)) => config.object_store = Some(url),
                Ok(None) => {
                    config.directory = self.path(directory, "`checkpoint.directory`".into())?;
                }
                Err(problem) => {
                    return Err(self.bad_value(
                        directory.span(),
                        "`checkpoint.directory`".into(),
                        format!("{:?}", directory.get_ref()),
                        format!(
                            "a local directory, relative to the job file's folder, or an \
                             s3://BUCKET/PREFIX, gs://BUCKET/PREFIX or az://CONTAINER/PREFIX URL \
                             ({problem})"
                        ),
                    ));
                }
            }
        }
        if let Some(retained) = &spec.retained {
            config.retained = self.at_least_one(retained, "`checkpoint.retained`".into())? as usize;
        }
        if let Some(tolerable) = &spec.tolerable_failures {
            config.tolerable_failures = *tolerable.get_ref();
        }
        self.object_store_options(spec, &mut config)?;
        Ok(config)
    }

    /// The `storage_*` keys of `[checkpoint]`, which apply to object storage only.
    fn object_store_options(
        &self,
        spec: &CheckpointSpec,
        config: &mut CheckpointConfig,
    ) -> Result<(), JobError> {
        let present = [
            ("storage_endpoint", span_of(&spec.storage_endpoint)),
            ("storage_retries", span_of(&spec.storage_retries)),
            (
                "storage_retry_timeout",
                span_of(&spec.storage_retry_timeout),
            ),
            (
                "storage_request_timeout",
                span_of(&spec.storage_request_timeout),
            ),
        ];
        if config.object_store.is_none()
            && let Some((key, Some(span))) = present.iter().find(|(_, span)| span.is_some())
        {
            return Err(self.error(
                span.clone(),
                Problem::NeedsSetting {
                    key: format!("`checkpoint.{key}`"),
                    setting: "checkpoints in a local directory".into(),
                    fix: "it times the requests to an object store (`directory = \
                          \"s3://bucket/prefix\"`); remove it"
                        .into(),
                },
            ));
        }
        let requests = &mut config.object_store_options;
        if let Some(endpoint) = &spec.storage_endpoint {
            let url = endpoint.get_ref();
            if config.object_store.as_ref().map(|u| u.scheme()) == Some(ObjectStoreScheme::Gcs) {
                return Err(self.bad_value(
                    endpoint.span(),
                    "`checkpoint.storage_endpoint`".into(),
                    format!("{url:?}"),
                    "no endpoint with gs://: Google Cloud Storage has one (remove the key), an \
                     S3-compatible or Azure store takes one",
                ));
            }
            let host = url
                .strip_prefix("http://")
                .or_else(|| url.strip_prefix("https://"))
                .filter(|host| !host.is_empty());
            if host.is_none() {
                return Err(self.bad_value(
                    endpoint.span(),
                    "`checkpoint.storage_endpoint`".into(),
                    format!("{url:?}"),
                    "the http:// or https:// URL of an S3-compatible store \
                     (\"http://127.0.0.1:9000\")",
                ));
            }
            requests.endpoint = Some(url.trim_end_matches('/').to_owned());
        }
        if let Some(retries) = &spec.storage_retries {
            requests.retries = *retries.get_ref();
        }
        if let Some(timeout) = &spec.storage_retry_timeout {
            requests.retry_timeout =
                self.positive_duration(timeout, "`checkpoint.storage_retry_timeout`")?;
        }
        if let Some(timeout) = &spec.storage_request_timeout {
            requests.request_timeout =
                self.positive_duration(timeout, "`checkpoint.storage_request_timeout`")?;
        }
        Ok(())
    }

    /// The `[restart]` table; `job_name_span` locates a missing `strategy`.
    fn restart(
        &self,
        spec: &RestartSpec,
        job_name_span: Range<usize>,
    ) -> Result<RestartStrategy, JobError> {
        let Some(strategy) = &spec.strategy else {
            let span = [
                span_of(&spec.attempts),
                span_of(&spec.delay),
                span_of(&spec.initial),
                span_of(&spec.max),
                span_of(&spec.multiplier),
            ]
            .into_iter()
            .flatten()
            .min_by_key(|s| s.start)
            .unwrap_or(job_name_span);
            let meaning = "\"none\", \"fixed-delay\" or \"exponential-delay\"";
            return Err(self.error(
                span,
                Problem::MissingKey {
                    owner: "[restart]".into(),
                    key: "strategy",
                    meaning,
                },
            ));
        };
        let present = [
            ("attempts", span_of(&spec.attempts)),
            ("delay", span_of(&spec.delay)),
            ("initial", span_of(&spec.initial)),
            ("max", span_of(&spec.max)),
            ("multiplier", span_of(&spec.multiplier)),
        ];
        let owner = &format!("restart strategy {:?}", strategy.get_ref());
        match strategy.get_ref().as_str() {
            "none" => {
                self.only(&present, NONE_RESTART_KEYS, owner)?;
                Ok(RestartStrategy::None)
            }
            "fixed-delay" => {
                self.only(&present, FIXED_DELAY_KEYS, owner)?;
                let attempts = spec
                    .attempts
                    .as_ref()
                    .map_or(RestartStrategy::DEFAULT_ATTEMPTS, |a| *a.get_ref());
                let delay = match &spec.delay {
                    Some(delay) => self.duration(delay, "`restart.delay`")?,
                    None => RestartStrategy::DEFAULT_DELAY,
                };
                Ok(RestartStrategy::FixedDelay { attempts, delay })
            }
            "exponential-delay" => {
                self.only(&present, EXPONENTIAL_DELAY_KEYS, owner)?;
                let initial = match &spec.initial {
                    Some(initial) => self.positive_duration(initial, "`restart.initial`")?,
                    None => RestartStrategy::DEFAULT_INITIAL,
                };
                let max = match &spec.max {
                    Some(max) => {
                        let duration = self.duration(max, "`restart.max`")?;
                        if duration < initial {
                            let expected = format!(
                                "a duration of at least `restart.initial` ({})",
                                format_duration(initial)
                            );
                            return Err(self.bad_value(
                                max.span(),
                                "`restart.max`".into(),
                                format!("{:?}", max.get_ref()),
                                expected,
                            ));
                        }
                        duration
                    }
                    None => RestartStrategy::DEFAULT_MAX.max(initial),
                };
                let multiplier = match &spec.multiplier {
                    Some(multiplier) => {
                        let value = *multiplier.get_ref();
                        if !(value.is_finite() && value >= 1.0) {
                            return Err(self.bad_value(
                                multiplier.span(),
                                "`restart.multiplier`".into(),
                                value.to_string(),
                                "a number of at least 1.0",
                            ));
                        }
                        value
                    }
                    None => RestartStrategy::DEFAULT_MULTIPLIER,
                };
                let attempts = spec.attempts.as_ref().map(|a| *a.get_ref());
                Ok(RestartStrategy::ExponentialDelay {
                    initial,
                    max,
                    multiplier,
                    attempts,
                })
            }
            other => Err(self.bad_value(
                strategy.span(),
                "`restart.strategy`".into(),
                format!("{other:?}"),
                "\"none\", \"fixed-delay\" or \"exponential-delay\"",
            )),
        }
    }

    /// A limits table applied over `limits`; `key` names a key for messages.
    fn limits(
        &self,
        spec: &LimitsSpec,
        mut limits: GuestLimits,
        key: &dyn Fn(&str) -> String,
    ) -> Result<GuestLimits, JobError> {
        if let Some(value) = &spec.max_memory {
            limits.max_memory_bytes = self.size(
                value,
                &key("max_memory"),
                GuestLimits::MIN_MEMORY_BYTES as u64,
            )?;
        }
        if let Some(value) = &spec.call_timeout {
            limits.call_timeout = self.positive_duration(value, &key("call_timeout"))?;
        }
        if let Some(value) = &spec.max_output {
            limits.max_output_bytes = self.size(value, &key("max_output"), 1)?;
        }
        if let Some(value) = &spec.max_state {
            limits.max_state_bytes = self.size(value, &key("max_state"), 1)?;
        }
        if let Some(value) = &spec.max_timer_state {
            limits.max_timer_bytes = self.size(value, &key("max_timer_state"), 1)?;
        }
        Ok(limits)
    }

    /// The job's `max_parallelism`, as written, after giving every vertex its value (when
    /// absent, [`default_max_parallelism`]) and checking that none has a larger parallelism.
    fn max_parallelism(
        &self,
        spec: &JobSpec,
        drafts: &mut [Draft<'_>],
    ) -> Result<Option<u32>, JobError> {
        let written = match &spec.max_parallelism {
            Some(value) => {
                if *value.get_ref() > MAX_MAX_PARALLELISM {
                    return Err(self.error(
                        value.span(),
                        Problem::TooLarge {
                            key: "`max_parallelism`".into(),
                            found: value.get_ref().to_string(),
                            max: MAX_MAX_PARALLELISM.to_string(),
                            reason: "every key-hash edge keeps a routing table of one entry per \
                                     key group",
                        },
                    ));
                }
                Some(self.at_least_one(value, "`max_parallelism`".into())?)
            }
            None => None,
        };
        let widest = drafts
            .iter()
            .map(|d| d.vertex.parallelism)
            .max()
            .unwrap_or(1);
        let max = written.unwrap_or_else(|| default_max_parallelism(widest));
        for draft in drafts {
            if draft.vertex.parallelism > max {
                let problem = Problem::AboveMaxParallelism {
                    kind: draft.vertex.kind_name(),
                    vertex: draft.vertex.name.clone(),
                    parallelism: draft.vertex.parallelism,
                    max_parallelism: max,
                };
                return Err(self.error(draft.name_span.clone(), problem));
            }
            draft.vertex.max_parallelism = max;
        }
        Ok(written)
    }

    fn parallelism(
        &self,
        value: &Option<Spanned<u32>>,
        kind: &str,
        name: &str,
    ) -> Result<u32, JobError> {
        let Some(value) = value else {
            return Ok(1);
        };
        let key = vertex_key("parallelism", kind, name);
        if *value.get_ref() > MAX_PARALLELISM {
            return Err(self.error(
                value.span(),
                Problem::TooLarge {
                    key,
                    found: value.get_ref().to_string(),
                    max: MAX_PARALLELISM.to_string(),
                    reason: "a rebalance or key-hash edge joins every subtask upstream to \
                             every subtask downstream: 256 x 256 is 65536 channels",
                },
            ));
        }
        self.at_least_one(value, key)
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
        let Some(kind) = &spec.kind else {
            let problem = Problem::MissingKey {
                owner: format!("source \"{name}\""),
                key: "type",
                meaning: "\"file\", \"generator\" or \"kafka\"",
            };
            return Err(self.error(spec.name.span(), problem));
        };
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
                if parallelism > 1 {
                    let span = span_of(&spec.parallelism).unwrap_or(spec.name.span());
                    return Err(self.error(
                        span,
                        Problem::FileSourceParallelism {
                            source_name: name.clone(),
                            parallelism,
                        },
                    ));
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
                    "\"file\", \"generator\" or \"kafka\"",
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

    /// A file source's `format` with its `key`, `value`, `timestamp` and `header`, and its
    /// `on_error`.
    fn file_format(
        &self,
        spec: &SourceSpec,
        name: &str,
    ) -> Result<(FileFormat, OnError), JobError> {
        let key = |k: &str| vertex_key(k, "source", name);
        let word = spec
            .format
            .as_ref()
            .map_or("lines", |f| f.get_ref().as_str());
        let fields = [
            ("key", &spec.key),
            ("value", &spec.value),
            ("timestamp", &spec.timestamp),
        ];
        let format = match word {
            "lines" => {
                let with_fields = fields
                    .iter()
                    .filter_map(|(k, f)| f.as_ref().map(|f| (*k, f.span())));
                let with_others = [
                    ("header", span_of(&spec.header)),
                    ("on_error", span_of(&spec.on_error)),
                ];
                let present = with_fields.chain(
                    with_others
                        .into_iter()
                        .filter_map(|(k, span)| span.map(|span| (k, span))),
                );
                if let Some((k, span)) = present.min_by_key(|(_, span)| span.start) {
                    let fix = match k {
                        "header" => format!(
                            "a header row is a csv thing; set `format = \"csv\"` or remove \
                             `{k}`"
                        ),
                        "on_error" => format!(
                            "every line is a record as it is, so no line is malformed; set \
                             `format = \"jsonl\"` or `format = \"csv\"` to read fields, or \
                             remove `{k}`"
                        ),
                        _ => format!(
                            "a line is read whole, as the value, with an empty key; set \
                             `format = \"jsonl\"` or `format = \"csv\"` to read fields, or \
                             remove `{k}`"
                        ),
                    };
                    return Err(self.error(
                        span,
                        Problem::NeedsSetting {
                            key: key(k),
                            setting: "`format = \"lines\"`".into(),
                            fix,
                        },
                    ));
                }
                FileFormat::Lines
            }
            "jsonl" => {
                if let Some(header) = &spec.header {
                    return Err(self.error(
                        header.span(),
                        Problem::NeedsSetting {
                            key: key("header"),
                            setting: "`format = \"jsonl\"`".into(),
                            fix: "a header row is a csv thing: every jsonl line is a record; \
                                  remove `header`"
                                .into(),
                        },
                    ));
                }
                let [k, v, t] = fields.map(|(k, f)| {
                    f.as_ref()
                        .map(|f| self.json_pointer(f, key(k), k))
                        .transpose()
                });
                FileFormat::Jsonl(RecordFields {
                    key: k?,
                    value: v?,
                    timestamp: t?,
                })
            }
            "csv" => {
                let [k, v, t] = fields.map(|(k, f)| {
                    f.as_ref()
                        .map(|f| self.csv_column(f, key(k), k))
                        .transpose()
                });
                FileFormat::Csv {
                    fields: RecordFields {
                        key: k?,
                        value: v?,
                        timestamp: t?,
                    },
                    header: spec.header.as_ref().is_some_and(|h| *h.get_ref()),
                }
            }
            other => {
                let format = spec.format.as_ref().expect("a word other than the default");
                return Err(self.bad_value(
                    format.span(),
                    key("format"),
                    format!("{other:?}"),
                    "\"lines\" (a record per line, as it is), \"jsonl\" (a JSON document per \
                     line) or \"csv\" (comma-separated values)",
                ));
            }
        };
        let on_error = match &spec.on_error {
            None => OnError::Fail,
            Some(word) => self.on_error(word, key("on_error"), "a malformed line")?,
        };
        Ok((format, on_error))
    }

    /// A source's `on_error` word; `what` is what it applies to (`a malformed line`).
    fn on_error(
        &self,
        word: &Spanned<String>,
        key: String,
        what: &str,
    ) -> Result<OnError, JobError> {
        match word.get_ref().as_str() {
            "fail" => Ok(OnError::Fail),
            "skip" => Ok(OnError::Skip),
            other => Err(self.bad_value(
                word.span(),
                key,
                format!("{other:?}"),
                format!(
                    "\"fail\" ({what} fails the task) or \"skip\" (it is dropped, counted \
                     and logged)"
                ),
            )),
        }
    }

    /// A jsonl field: a JSON pointer (RFC 6901) to a member of each line's document.
    fn json_pointer(
        &self,
        field: &Spanned<toml::Value>,
        key: String,
        name: &str,
    ) -> Result<String, JobError> {
        let expected = format!(
            "a JSON pointer starting with \"/\", such as \"/user/id\" (RFC 6901: `~` is \
             written `~0`, a `/` inside a member's name `~1`){}",
            if name == "value" {
                "; leave `value` out for the whole line"
            } else {
                ""
            }
        );
        let toml::Value::String(pointer) = field.get_ref() else {
            return Err(self.bad_value(field.span(), key, field.get_ref().to_string(), expected));
        };
        let escapes_ok = pointer
            .match_indices('~')
            .all(|(i, _)| matches!(pointer.as_bytes().get(i + 1), Some(b'0' | b'1')));
        if !pointer.starts_with('/') || !escapes_ok {
            return Err(self.bad_value(field.span(), key, format!("{pointer:?}"), expected));
        }
        Ok(pointer.clone())
    }

    /// A csv field: a 0-based column index.
    fn csv_column(
        &self,
        field: &Spanned<toml::Value>,
        key: String,
        name: &str,
    ) -> Result<usize, JobError> {
        let expected = format!(
            "a column index from 0 to {MAX_CSV_COLUMN}, counted from 0, such as `{name} = 0`: \
             columns are numbered, not named (`header = true` skips a header row)"
        );
        match field.get_ref() {
            toml::Value::Integer(column) if (0..=MAX_CSV_COLUMN as i64).contains(column) => {
                Ok(*column as usize)
            }
            other => Err(self.bad_value(field.span(), key, other.to_string(), expected)),
        }
    }

    /// A generator's `values`, with `min` and `max` for integers.
    fn generator_values(&self, spec: &SourceSpec, name: &str) -> Result<GeneratorValues, JobError> {
        let key = |k: &str| vertex_key(k, "source", name);
        let word = spec
            .values
            .as_ref()
            .map_or("letters", |v| v.get_ref().as_str());
        match word {
            "letters" => {
                let bound = [("min", span_of(&spec.min)), ("max", span_of(&spec.max))]
                    .into_iter()
                    .filter_map(|(k, span)| span.map(|span| (k, span)))
                    .min_by_key(|(_, span)| span.start);
                if let Some((k, span)) = bound {
                    return Err(self.error(
                        span,
                        Problem::NeedsSetting {
                            key: key(k),
                            setting: "`values = \"letters\"`".into(),
                            fix: format!(
                                "letters have no range; set `values = \"integers\"` for \
                                 integers from `min` to `max`, or remove `{k}`"
                            ),
                        },
                    ));
                }
                Ok(GeneratorValues::Letters)
            }
            "integers" => {
                if let Some(size) = &spec.value_size {
                    return Err(self.error(
                        size.span(),
                        Problem::NeedsSetting {
                            key: key("value_size"),
                            setting: "`values = \"integers\"`".into(),
                            fix: "an integer takes as many bytes as its decimal digits; remove \
                                  `value_size`, or set `values = \"letters\"`"
                                .into(),
                        },
                    ));
                }
                let min = spec
                    .min
                    .as_ref()
                    .map_or(DEFAULT_GENERATOR_MIN, |m| *m.get_ref());
                let max = spec
                    .max
                    .as_ref()
                    .map_or(DEFAULT_GENERATOR_MAX, |m| *m.get_ref());
                if min > max {
                    let (span, k, found, expected) = if let Some(m) = &spec.max {
                        let expected = format!(
                            "an integer at least `min` ({min}): the range is `min` to `max`, \
                             both included"
                        );
                        (m.span(), "max", max, expected)
                    } else {
                        // The defaults are in order, so `min` was written.
                        let span = span_of(&spec.min).unwrap_or(spec.name.span());
                        let expected = format!(
                            "an integer at most `max` ({max}, its default): set `max` too, or \
                             lower `min`"
                        );
                        (span, "min", min, expected)
                    };
                    return Err(self.bad_value(span, key(k), found.to_string(), expected));
                }
                Ok(GeneratorValues::Integers { min, max })
            }
            other => {
                let values = spec.values.as_ref().expect("a word other than the default");
                Err(self.bad_value(
                    values.span(),
                    key("values"),
                    format!("{other:?}"),
                    "\"letters\" (`value_size` lowercase letters) or \"integers\" (from `min` \
                     to `max`, in decimal)",
                ))
            }
        }
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
        let Some(kind) = &spec.kind else {
            let problem = Problem::MissingKey {
                owner: format!("sink \"{name}\""),
                key: "type",
                meaning: "\"file\", \"kafka\", \"stdout\" or \"blackhole\"",
            };
            return Err(self.error(spec.name.span(), problem));
        };
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
                    "\"file\", \"kafka\", \"stdout\" or \"blackhole\"",
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

    /// The edges of every operator and sink, by the order of their `inputs`.
    fn edges(&self, drafts: &[Draft<'_>]) -> Result<Vec<DraftEdge>, JobError> {
        let index: HashMap<&str, usize> = drafts
            .iter()
            .enumerate()
            .map(|(i, d)| (d.vertex.name.as_str(), i))
            .collect();
        let known = || {
            drafts
                .iter()
                .filter(|d| !matches!(d.vertex.kind, VertexKind::Sink(_)))
                .map(|d| d.vertex.name.clone())
                .collect::<Vec<_>>()
        };
        let mut edges = Vec::new();
        for (to, draft) in drafts.iter().enumerate() {
            let vertex = &draft.vertex;
            if matches!(vertex.kind, VertexKind::Source(_)) {
                continue;
            }
            let kind = vertex.kind_name();
            let inputs = match draft.inputs {
                Some(inputs) if !inputs.get_ref().is_empty() => inputs.get_ref(),
                Some(inputs) => {
                    return Err(self.error(
                        inputs.span(),
                        Problem::NoInputs {
                            kind,
                            vertex: vertex.name.clone(),
                        },
                    ));
                }
                None => {
                    return Err(self.error(
                        draft.name_span.clone(),
                        Problem::NoInputs {
                            kind,
                            vertex: vertex.name.clone(),
                        },
                    ));
                }
            };
            let first_edge = edges.len();
            for (port, input) in inputs.iter().enumerate() {
                let (from_name, span, partition, output) = match input.get_ref() {
                    InputSpec::Name(from) => (from.as_str(), input.span(), None, None),
                    InputSpec::Edge {
                        from,
                        partition,
                        output,
                    } => (
                        from.get_ref().as_str(),
                        from.span(),
                        partition.as_ref(),
                        output.as_ref(),
                    ),
                };
                let Some(&from) = index.get(from_name) else {
                    let problem = Problem::UnknownInput {
                        kind,
                        vertex: vertex.name.clone(),
                        input: from_name.to_owned(),
                        known: known(),
                    };
                    return Err(self.error(span, problem));
                };
                let upstream = &drafts[from].vertex;
                if matches!(upstream.kind, VertexKind::Sink(_)) {
                    let problem = Problem::InputFromSink {
                        kind,
                        vertex: vertex.name.clone(),
                        sink: from_name.to_owned(),
                    };
                    return Err(self.error(span, problem));
                }
                let output = match output {
                    Some(output) => Some(self.side_output(output, upstream, kind, vertex)?),
                    None => None,
                };
                if edges[first_edge..]
                    .iter()
                    .any(|e: &DraftEdge| e.from == from && e.output == output)
                {
                    let problem = Problem::DuplicateInput {
                        kind,
                        vertex: vertex.name.clone(),
                        input: from_name.to_owned(),
                        output,
                    };
                    return Err(self.error(span, problem));
                }
                let same_parallelism = upstream.parallelism == vertex.parallelism;
                let partitioner = match partition {
                    None if same_parallelism => Partitioner::Forward,
                    None => Partitioner::Rebalance,
                    Some(partition) => {
                        let Some(partitioner) = Partitioner::from_name(partition.get_ref()) else {
                            let key = format!(
                                "`partition` of input \"{from_name}\" of {kind} \"{}\"",
                                vertex.name
                            );
                            return Err(self.bad_value(
                                partition.span(),
                                key,
                                format!("{:?}", partition.get_ref()),
                                PARTITIONERS,
                            ));
                        };
                        if partitioner == Partitioner::Forward && !same_parallelism {
                            let problem = Problem::ForwardParallelism {
                                from: from_name.to_owned(),
                                from_parallelism: upstream.parallelism,
                                to: vertex.name.clone(),
                                to_parallelism: vertex.parallelism,
                            };
                            return Err(self.error(partition.span(), problem));
                        }
                        partitioner
                    }
                };
                let port = u32::try_from(port).expect("fewer than 2^32 inputs");
                edges.push(DraftEdge {
                    from,
                    to,
                    port,
                    partitioner,
                    output,
                    span,
                });
            }
        }
        Ok(edges)
    }

    /// The `output` of an input of `vertex` (a `kind`) from `upstream`: a side output of an
    /// operator, named as its guest names it (docs/ABI.md §15).
    fn side_output(
        &self,
        output: &Spanned<String>,
        upstream: &Vertex,
        kind: &'static str,
        vertex: &Vertex,
    ) -> Result<String, JobError> {
        let name = output.get_ref();
        if matches!(upstream.kind, VertexKind::Source(_)) {
            let problem = Problem::SideOutputOfSource {
                kind,
                vertex: vertex.name.clone(),
                source_name: upstream.name.clone(),
                output: name.clone(),
            };
            return Err(self.error(output.span(), problem));
        }
        if !(1..=MAX_SIDE_OUTPUT_NAME).contains(&name.len()) {
            let found = if name.is_empty() {
                "\"\"".to_owned()
            } else {
                format!("{name:?} ({} bytes)", name.len())
            };
            let key = format!(
                "`output` of input \"{}\" of {kind} \"{}\"",
                upstream.name, vertex.name
            );
            return Err(self.bad_value(
                output.span(),
                key,
                found,
                format!(
                    "the name of a side output of \"{}\", 1 to {MAX_SIDE_OUTPUT_NAME} bytes of \
                     UTF-8, as its guest passes it to `emit_to` (docs/ABI.md §15)",
                    upstream.name
                ),
            ));
        }
        Ok(name.clone())
    }

    /// The vertices in topological order (Kahn's algorithm, ties in file
    /// order), or the first cycle found.
    fn topological_order(
        &self,
        drafts: &[Draft<'_>],
        edges: &[DraftEdge],
    ) -> Result<Vec<usize>, JobError> {
        let mut in_degree = vec![0usize; drafts.len()];
        for edge in edges {
            in_degree[edge.to] += 1;
        }
        let mut placed = vec![false; drafts.len()];
        let mut order = Vec::with_capacity(drafts.len());
        while let Some(next) = (0..drafts.len()).find(|&i| !placed[i] && in_degree[i] == 0) {
            placed[next] = true;
            order.push(next);
            for edge in edges.iter().filter(|e| e.from == next) {
                in_degree[edge.to] -= 1;
            }
        }
        if order.len() == drafts.len() {
            return Ok(order);
        }
        // Every vertex left has an input from another vertex left: walking
        // inputs backwards from the first one must come round to a vertex
        // already seen, which closes a cycle.
        let start = (0..drafts.len())
            .find(|&i| !placed[i])
            .expect("a vertex is left");
        let mut walk = vec![start];
        let cycle_start = loop {
            let current = *walk.last().expect("the walk is never empty");
            let previous = edges
                .iter()
                .find(|e| e.to == current && !placed[e.from])
                .expect("a vertex left has an input left")
                .from;
            if let Some(at) = walk.iter().position(|&v| v == previous) {
                break at;
            }
            walk.push(previous);
        };
        // `walk[cycle_start..]` follows edges backwards; turn it to flow order
        // and begin at the vertex written first in the file.
        let mut cycle: Vec<usize> = walk[cycle_start..].iter().rev().copied().collect();
        let first = cycle
            .iter()
            .enumerate()
            .min_by_key(|(_, v)| **v)
            .map(|(i, _)| i)
            .unwrap_or(0);
        cycle.rotate_left(first);
        let closing = edges
            .iter()
            .find(|e| e.to == cycle[0] && e.from == *cycle.last().expect("a cycle is never empty"))
            .expect("consecutive vertices of the cycle are joined by an edge");
        let mut names: Vec<String> = cycle
            .iter()
            .map(|&v| drafts[v].vertex.name.clone())
            .collect();
        names.push(names[0].clone());
        Err(self.error(closing.span.clone(), Problem::Cycle { cycle: names }))
    }
}
