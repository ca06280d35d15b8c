//! The job: the job file, parsed and validated into a job graph.
//!
//! A job file (TOML, described for users in docs/JOB.md) goes through two
//! steps, as ripgrep's raw and validated arguments do:
//!
//! 1. [`spec`]: serde reads the text into [`JobSpec`] — the file's shape, with
//!    unknown keys and wrong types refused and positions kept.
//! 2. validation turns the spec into a [`Job`], the job graph: vertices with
//!    kind-specific settings (and a source's [`WatermarkStrategy`]), [`Edge`]s with a
//!    [`Partitioner`] and an input port, a [`CheckpointConfig`](crate::checkpoint::config::CheckpointConfig), a
//!    [`RestartStrategy`] and [`GuestLimits`](crate::wasm::GuestLimits); paths resolved against the job
//!    file's folder. Every error is a [`JobError`] that displays as
//!    `file:line:column: message`.
//!
//! Validation reads nothing from disk. What the disk says is a separate step,
//! [`Job::check_files`] (or [`Job::load`], which does both), so a job file can
//! be checked before its guests are built: operator modules and the files of
//! file sources exist and are regular files, and the job's paths do not meet
//! through symlinks.
//!
//! Also here: the [`JobStatus`] of a running job and the restart
//! arithmetic of [`RestartStrategy::delay_for`].

mod control;
mod error;
mod fingerprint;
mod format;
mod graph;
mod kafka;
mod paths;
mod print;
mod restart;
pub mod spec;
mod state;
mod status;
mod units;
mod validate;
mod watermark;
pub mod workers;

#[cfg(test)]
mod tests;

pub use control::{ADDRESS_FORMS, ControlConfig, DEFAULT_ADDRESS, parse_address};
pub use error::{JobError, Location, Overlap, PathUse, Problem};
pub use format::{FileFormat, OnError, RecordFields};
pub use graph::{
    Edge, GeneratorSettings, GeneratorValues, Job, Operator, ParallelismError, Partitioner,
    SinkKind, SourceKind, StateCapture, Vertex, VertexKind,
};
pub use kafka::{
    Delivery, Isolation, KafkaField, KafkaSinkSettings, KafkaSourceSettings, KafkaStart,
    KafkaUntil, PartitionShare, ShareBy, SinkPartitioning, SinkTimestamp, SinkTopic,
    TopicSelection, Unrouted,
};
pub use restart::RestartStrategy;
pub use spec::JobSpec;
pub use state::{DEFAULT_STATE_MEMORY, MIN_STATE_MEMORY, StateConfig};
pub use status::JobStatus;
pub use units::{
    DURATION_FORMS, SIZE_FORMS, UnitError, format_duration, format_size, parse_duration, parse_size,
};
pub use validate::{
    MAX_CSV_COLUMN, MAX_DURATION, MAX_GENERATOR_COUNT, MAX_GENERATOR_DISORDER, MAX_GENERATOR_RATE,
    MAX_GUEST_BYTES, MAX_PARALLELISM, MAX_SUBTASKS, MAX_VALUE_SIZE,
};
pub use watermark::{DEFAULT_IDLE_TIMEOUT, DEFAULT_WATERMARK_INTERVAL, WatermarkStrategy};
