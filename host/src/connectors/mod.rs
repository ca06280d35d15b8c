//! Sources and sinks: where records enter and leave a job.
//!
//! Each connector owns what makes it restartable: a source its position
//! (checkpointed as bytes, restored with [`Source::seek`]), the exactly-once
//! file sink its two-phase commit (pre-commit at the barrier, commit when the
//! checkpoint completes, recover on restore).
//!
//! A job file names a connector by its kind ([`SourceKind`], [`SinkKind`]);
//! [`build_source`] and [`build_sink`] turn that into the running connector, so
//! a new connector is a new module here and one arm in each, and the task
//! runtime never names a concrete connector. The contracts they implement,
//! [`Source`] and [`Processor`], live beside the task loop in
//! [`crate::dataflow::processor`].

pub(crate) mod blackhole;
pub(crate) mod file_sink;
pub(crate) mod file_source;
pub(crate) mod generator;
pub(crate) mod inherited;
pub(crate) mod kafka;
pub(crate) mod skip_log;
pub(crate) mod stdout_sink;

use blackhole::Blackhole;
use file_sink::FileSink;
use file_source::FileSource;
use generator::Generator;
use stdout_sink::StdoutSink;

use std::sync::Arc;

use crate::dataflow::connector_metrics::{ConnectorMetrics, KafkaSinkMetrics, KafkaSourceMetrics};
use crate::dataflow::error::TaskError;
use crate::dataflow::metrics::TaskMetrics;
use crate::dataflow::processor::{Processor, Source};
use crate::job::{SinkKind, SourceKind};

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
    match kind {
        SourceKind::File {
            path,
            follow,
            format,
            on_error,
        } => Box::new(FileSource::new(
            path.clone(),
            *follow,
            format.clone(),
            *on_error,
            metrics,
        )),
        SourceKind::Generator(settings) => {
            Box::new(Generator::new(settings.clone(), subtask, parallelism))
        }
        SourceKind::Kafka(settings) => {
            let figures = Arc::new(KafkaSourceMetrics::default());
            metrics.set_connector(ConnectorMetrics::KafkaSource(Arc::clone(&figures)));
            Box::new(
                kafka::source::KafkaSource::new(
                    name,
                    settings.clone(),
                    subtask,
                    parallelism,
                    metrics,
                )
                .reporting_to(figures),
            )
        }
    }
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
    Ok(match kind {
        SinkKind::File { directory } => {
            Box::new(FileSink::new(directory.clone(), subtask, parallelism)?)
        }
        SinkKind::Kafka(settings) => {
            let sink = kafka::sink::KafkaSink::new(name, settings.clone(), subtask, parallelism);
            // Only an exactly-once sink has transactions to show.
            if settings.delivery == crate::job::Delivery::ExactlyOnce {
                let figures = Arc::new(KafkaSinkMetrics::default());
                metrics.set_connector(ConnectorMetrics::KafkaSink(Arc::clone(&figures)));
                Box::new(sink.reporting_to(figures))
            } else {
                Box::new(sink)
            }
        }
        SinkKind::Stdout => Box::new(StdoutSink::default()),
        SinkKind::Blackhole => Box::new(Blackhole),
    })
}

/// Reads a little-endian `u64` position, naming the source when it is malformed.
pub(crate) fn decode_u64_position(what: &str, bytes: &[u8]) -> Result<u64, TaskError> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| {
        TaskError::Restore(format!(
            "{what} position must be 8 bytes, found {}",
            bytes.len()
        ))
    })?;
    Ok(u64::from_le_bytes(arr))
}

/// The line a sink writes for a record: `key<TAB>value`, or just `value` when the key is empty.
pub(crate) fn write_record_line(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    if !key.is_empty() {
        out.extend_from_slice(key);
        out.push(b'\t');
    }
    out.extend_from_slice(value);
    out.push(b'\n');
}
