//! A [`Job`] written back as a job file: [`Job::to_spec`] and [`Job::to_toml`], every setting
//! explicit, so that parsing the text again gives the same job (the fuzz target `job_file`
//! checks that round trip; tests write jobs out to edit them).
//!
//! Apart from the graph because writing a job out needs the job file's shape ([`spec`]) and
//! its words for every setting, which the graph's own queries do not.
//!
//! The keys of a Kafka source or sink are written by [`kafka`], beside the rules that read
//! them in `validate/kafka.rs`.
//!
//! [`spec`]: super::spec

mod kafka;

use std::path::Path;
use std::time::Duration;

use toml::Spanned;

use super::control::ControlConfig;
use super::format::{FileFormat, RecordFields};
use super::graph::{
    GeneratorSettings, GeneratorValues, Job, Partitioner, SinkKind, SourceKind, StateCapture,
    Vertex, VertexKind,
};
use super::restart::RestartStrategy;
use super::spec::{
    CheckpointSpec, ControlSpec, InputSpec, JobSpec, LimitsSpec, OperatorSpec, RestartSpec,
    SinkSpec, SourceSpec, StateSpec, WatermarkSpec,
};
use super::state::StateConfig;
use super::units::{format_duration, format_size};
use super::watermark::WatermarkStrategy;
use crate::checkpoint::config::{CheckpointMode, Retention};
use crate::wasm::GuestLimits;
use crate::wasm::ImagePolicy;

impl Job {
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
            // Written only when it differs from the default, as `control`.
            state: (self.state != StateConfig::default()).then(|| StateSpec {
                memory: Some(unspanned(format_size(self.state.memory as u64))),
                directory: self
                    .state
                    .directory
                    .as_ref()
                    .map(|dir| unspanned(self.relative(dir))),
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
                        SourceKind::Kafka(settings) => kafka::source_spec(&mut source, settings),
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
                        SinkKind::Kafka(settings) => {
                            kafka::sink_spec(&mut sink, settings);
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
