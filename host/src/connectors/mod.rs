//! Sources and sinks: where records enter and leave a job.
//!
//! Each connector owns what makes it restartable: a source its position
//! (checkpointed as bytes, restored with [`Source::seek`]), the exactly-once
//! file sink its two-phase commit (pre-commit at the barrier, commit when the
//! checkpoint completes, recover on restore).
//!
//! A job file names a connector by its kind ([`SourceKind`], [`SinkKind`]); [`source`] and
//! [`sink`] map a kind, with its settings, to its connector ([`connector::SourceConnector`],
//! [`connector::SinkConnector`]), which builds a subtask's source or sink
//! ([`build_source`], [`build_sink`]) and says how its state moves to another parallelism
//! ([`rescale_rule`]). So a new connector is a module here and one arm in [`source`] or
//! [`sink`], and the runtime never names a concrete connector. The contracts the built tasks
//! implement, [`Source`] and [`Processor`], live beside the task loop in
//! [`crate::dataflow::processor`].

pub(crate) mod blackhole;
pub(crate) mod connector;
pub(crate) mod file_sink;
pub(crate) mod file_source;
pub(crate) mod generator;
pub(crate) mod inherited;
pub(crate) mod kafka;
pub(crate) mod record;
pub(crate) mod skip_log;
pub(crate) mod stdout_sink;

use std::sync::Arc;

use std::collections::HashMap;

use connector::{
    ConnectorSetupError, RescaleRule, RestoreCheck, SinkConnector, SourceConnector, TaskContext,
};

use crate::checkpoint::task_state::RestoredState;
use crate::dataflow::error::TaskError;
use crate::dataflow::metrics::TaskMetrics;
use crate::dataflow::processor::{Processor, Source};
use crate::ids::TaskId;
use crate::job::{Job, SinkKind, SourceKind, VertexKind};

/// The connector a job file's source `kind` names, with its settings: the one place a kind of
/// source is registered.
pub(crate) fn source(kind: &SourceKind) -> Box<dyn SourceConnector + '_> {
    match kind {
        SourceKind::File {
            path,
            follow,
            format,
            on_error,
        } => Box::new(file_source::Connector {
            path,
            follow: *follow,
            format,
            on_error: *on_error,
        }),
        SourceKind::Generator(settings) => Box::new(generator::Connector(settings)),
        SourceKind::Kafka(settings) => Box::new(kafka::source::Connector(settings)),
    }
}

/// The connector a job file's sink `kind` names, with its settings: the one place a kind of
/// sink is registered.
pub(crate) fn sink(kind: &SinkKind) -> Box<dyn SinkConnector + '_> {
    match kind {
        SinkKind::File { directory } => Box::new(file_sink::Connector { directory }),
        SinkKind::Kafka(settings) => Box::new(kafka::sink::Connector(settings)),
        SinkKind::Stdout => Box::new(stdout_sink::Connector),
        SinkKind::Blackhole => Box::new(blackhole::Connector),
    }
}

/// The rescale rule of a source or sink vertex's connector; `None` for a connector whose state
/// cannot move to another parallelism, and for an operator (whose states split by key group).
pub(crate) fn rescale_rule(kind: &VertexKind) -> Option<RescaleRule> {
    match kind {
        VertexKind::Source(kind) => source(kind).rescale_rule(),
        VertexKind::Sink(kind) => sink(kind).rescale_rule(),
        VertexKind::Operator(_) => None,
    }
}

/// Checks every connector of `job` once before it starts ([`SourceConnector::preflight`],
/// [`SinkConnector::preflight`]): the first that refuses stops the job.
pub(crate) fn preflight(job: &Job) -> Result<(), ConnectorSetupError> {
    for vertex in &job.vertices {
        match &vertex.kind {
            VertexKind::Source(kind) => source(kind).preflight(&vertex.name)?,
            VertexKind::Sink(kind) => sink(kind).preflight(&vertex.name)?,
            VertexKind::Operator(_) => {}
        }
    }
    Ok(())
}

/// What the sources of `job` check before their tasks take up `states` from checkpoint
/// `checkpoint` ([`SourceConnector::restore_check`]), to run off the async threads.
pub(crate) fn restore_checks(
    job: &Job,
    states: &HashMap<TaskId, RestoredState>,
    checkpoint: &str,
) -> Vec<RestoreCheck> {
    job.vertices
        .iter()
        .filter_map(|vertex| {
            let VertexKind::Source(kind) = &vertex.kind else {
                return None;
            };
            let own: Vec<&RestoredState> = states
                .iter()
                .filter(|(task, _)| task.vertex == vertex.name)
                .map(|(_, state)| state)
                .collect();
            if own.is_empty() {
                return None;
            }
            source(kind).restore_check(&vertex.name, &own, checkpoint)
        })
        .collect()
}

/// The source a job file's `kind` names, for `subtask` of `parallelism` of vertex `name`;
/// `metrics` are its task's (a file source counts the lines it skips there; a Kafka source the
/// records it skips, and it reports its partitions' offsets and lag there).
pub(crate) fn build_source(
    name: &str,
    kind: &SourceKind,
    subtask: u32,
    parallelism: u32,
    metrics: Arc<TaskMetrics>,
) -> Box<dyn Source> {
    source(kind).build(TaskContext {
        vertex: name,
        subtask,
        parallelism,
        metrics,
    })
}

/// The sink a job file's `kind` names, for `subtask` of `parallelism` of vertex `name`;
/// `metrics` are its task's (an exactly-once Kafka sink counts its transactions there). A
/// file sink creates its directory here and fails if it cannot.
pub(crate) fn build_sink(
    name: &str,
    kind: &SinkKind,
    subtask: u32,
    parallelism: u32,
    metrics: Arc<TaskMetrics>,
) -> Result<Box<dyn Processor>, TaskError> {
    sink(kind).build(TaskContext {
        vertex: name,
        subtask,
        parallelism,
        metrics,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The job file's vertices of every kind of source and sink, by the name of each kind.
    fn every_kind() -> Job {
        Job::from_str(
            "name = \"j\"\n[checkpoint]\ninterval = \"1s\"\n\
             [[source]]\nname = \"file\"\ntype = \"file\"\npath = \"in.txt\"\n\
             [[source]]\nname = \"generator\"\ntype = \"generator\"\n\
             [[source]]\nname = \"kafka\"\ntype = \"kafka\"\nbootstrap = \"k:9092\"\n\
             topics = [\"t\"]\n\
             [[sink]]\nname = \"file-sink\"\ntype = \"file\"\npath = \"out\"\n\
             inputs = [\"file\"]\n\
             [[sink]]\nname = \"kafka-sink\"\ntype = \"kafka\"\nbootstrap = \"k:9092\"\n\
             topic = \"t\"\ninputs = [\"generator\"]\n\
             [[sink]]\nname = \"stdout\"\ntype = \"stdout\"\ninputs = [\"kafka\"]\n\
             [[sink]]\nname = \"blackhole\"\ntype = \"blackhole\"\ninputs = [\"kafka\"]\n",
            "/jobs",
            "j.toml",
        )
        .unwrap()
    }

    #[test]
    fn a_connector_whose_state_can_move_has_a_rescale_rule_and_the_others_none() {
        let job = every_kind();
        let with_rule: Vec<&str> = job
            .vertices
            .iter()
            .filter(|v| rescale_rule(&v.kind).is_some())
            .map(|v| v.name.as_str())
            .collect();
        // A file source runs at parallelism 1; stdout and blackhole keep no state.
        assert_eq!(with_rule, ["generator", "kafka", "file-sink", "kafka-sink"]);
        // The sinks hand each old subtask's state to one new one.
        let sink = job.vertices.iter().find(|v| v.name == "file-sink").unwrap();
        let split = rescale_rule(&sink.kind).unwrap();
        let states = split(&[b"a".as_slice(), b"b", b"c"], 2).unwrap();
        assert_eq!(states.len(), 2);
    }

    #[test]
    fn connectors_that_talk_to_nothing_check_nothing_before_a_start() {
        let job = Job::from_str(
            "name = \"j\"\n[[source]]\nname = \"in\"\ntype = \"generator\"\n\
             [[sink]]\nname = \"out\"\ntype = \"stdout\"\ninputs = [\"in\"]\n",
            "/jobs",
            "j.toml",
        )
        .unwrap();
        preflight(&job).unwrap();
        assert!(restore_checks(&job, &HashMap::new(), "chk-1").is_empty());
    }
}
