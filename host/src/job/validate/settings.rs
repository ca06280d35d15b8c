//! The job's settings tables — `[control]`, `[checkpoint]` (with its object store's options),
//! `[restart]`, `[limits]` (also an operator's own `limits`) — and the parallelism of vertices
//! and of the job (`parallelism`, `max_parallelism`): the keys that say how the job runs, apart
//! from what its vertices are and how they connect.

use std::ops::Range;

use toml::Spanned;
use weir_abi::key_group::MAX_MAX_PARALLELISM;

use super::{
    Draft, MAX_PARALLELISM, Validator, default_max_parallelism, span_of, vertex_key, zero,
};
use crate::checkpoint::config::{CheckpointConfig, CheckpointMode, Retention};
use crate::checkpoint::storage::{ObjectStoreScheme, ObjectStoreUrl};
use crate::job::control::{ADDRESS_FORMS, ControlConfig, parse_address};
use crate::job::error::{JobError, Problem};
use crate::job::graph::Vertex;
use crate::job::restart::RestartStrategy;
use crate::job::spec::{CheckpointSpec, ControlSpec, JobSpec, LimitsSpec, RestartSpec, StateSpec};
use crate::job::units::format_duration;
use crate::job::{MIN_STATE_MEMORY, StateConfig};
use crate::wasm::GuestLimits;

/// Keys of the `none` restart strategy.
const NONE_RESTART_KEYS: &[&str] = &["strategy"];
/// Keys of the `fixed-delay` restart strategy.
const FIXED_DELAY_KEYS: &[&str] = &["strategy", "attempts", "delay"];
/// Keys of the `exponential-delay` restart strategy.
const EXPONENTIAL_DELAY_KEYS: &[&str] = &["strategy", "initial", "max", "multiplier", "attempts"];

/// The bounds on the `parallelism` of `kind` `name`: at least 1, at most [`MAX_PARALLELISM`].
pub(super) fn check_parallelism(
    parallelism: u32,
    kind: &str,
    name: &str,
) -> Result<(), Box<Problem>> {
    let key = vertex_key("parallelism", kind, name);
    if parallelism > MAX_PARALLELISM {
        return Err(Box::new(Problem::TooLarge {
            key,
            found: parallelism.to_string(),
            max: MAX_PARALLELISM.to_string(),
            reason: "a rebalance or key-hash edge joins every subtask upstream to every subtask \
                     downstream: 256 x 256 is 65536 channels",
        }));
    }
    if parallelism == 0 {
        return Err(Box::new(zero(key)));
    }
    Ok(())
}

/// Gives every vertex the job's key groups: `written` (its `max_parallelism`), or without it
/// [`default_max_parallelism`] of the widest vertex. Refuses a vertex with more subtasks than
/// key groups, by its index in `vertices`.
pub(super) fn set_max_parallelism(
    written: Option<u32>,
    vertices: &mut [&mut Vertex],
) -> Result<(), (usize, Box<Problem>)> {
    let widest = vertices.iter().map(|v| v.parallelism).max().unwrap_or(1);
    let max = written.unwrap_or_else(|| default_max_parallelism(widest));
    for (index, vertex) in vertices.iter_mut().enumerate() {
        if vertex.parallelism > max {
            let problem = Problem::AboveMaxParallelism {
                kind: vertex.kind_name(),
                vertex: vertex.name.clone(),
                parallelism: vertex.parallelism,
                max_parallelism: max,
            };
            return Err((index, Box::new(problem)));
        }
        vertex.max_parallelism = max;
    }
    Ok(())
}

impl Validator<'_> {
    /// The `[control]` table.
    pub(super) fn control(&self, spec: &ControlSpec) -> Result<ControlConfig, JobError> {
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

    /// The `[state]` table: the stores' memory (16MiB to 1TiB) and their folder.
    pub(super) fn state(&self, spec: &StateSpec) -> Result<StateConfig, JobError> {
        let mut config = StateConfig::default();
        if let Some(memory) = &spec.memory {
            let most = (1 << 40, "the stores' memory is at most 1TiB");
            config.memory = self.size_within(memory, "`state.memory`", MIN_STATE_MEMORY, most)?;
        }
        if let Some(directory) = &spec.directory {
            // The stores work on a local disk; their checkpoints go where the checkpoint's do.
            if let Ok(Some(_)) = ObjectStoreUrl::parse(directory.get_ref()) {
                return Err(self.bad_value(
                    directory.span(),
                    "`state.directory`".into(),
                    format!("{:?}", directory.get_ref()),
                    "a local directory, relative to the job file's folder: the stores work on \
                     a local disk, and their checkpoints go to `checkpoint.directory`, which \
                     may be an object store",
                ));
            }
            config.directory = Some(self.path(directory, "`state.directory`".into())?);
        }
        Ok(config)
    }

    pub(super) fn checkpoint(
        &self,
        spec: &CheckpointSpec,
        mut config: CheckpointConfig,
    ) -> Result<CheckpointConfig, JobError> {
        if let Some(interval) = &spec.interval {
            config.interval = self.duration_or_off(
                interval,
                "`checkpoint.interval`",
                "a duration above zero (e.g. \"1s\"), or \"off\"",
            )?;
        }
        if let Some(mode) = &spec.mode {
            config.mode = self.word(
                mode,
                "`checkpoint.mode`".into(),
                &[
                    ("exactly-once", CheckpointMode::ExactlyOnce),
                    ("at-least-once", CheckpointMode::AtLeastOnce),
                ],
                "\"exactly-once\" or \"at-least-once\"",
            )?;
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
            config.on_cancel = self.word(
                on_cancel,
                "`checkpoint.on_cancel`".into(),
                &[
                    ("retain", Retention::RetainOnCancel),
                    ("delete", Retention::DeleteOnCancel),
                ],
                "\"retain\" or \"delete\"",
            )?;
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
    pub(super) fn object_store_options(
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
            return Err(self.needs_setting(
                span.clone(),
                format!("`checkpoint.{key}`"),
                "checkpoints in a local directory",
                "it times the requests to an object store (`directory = \
                 \"s3://bucket/prefix\"`); remove it",
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
    pub(super) fn restart(
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
    pub(super) fn limits(
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
    pub(super) fn max_parallelism(
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
        let mut vertices: Vec<&mut Vertex> = drafts.iter_mut().map(|d| &mut d.vertex).collect();
        if let Err((index, problem)) = set_max_parallelism(written, &mut vertices) {
            return Err(self.error(drafts[index].name_span.clone(), *problem));
        }
        Ok(written)
    }

    pub(super) fn parallelism(
        &self,
        value: &Option<Spanned<u32>>,
        kind: &str,
        name: &str,
    ) -> Result<u32, JobError> {
        let Some(value) = value else {
            return Ok(1);
        };
        check_parallelism(*value.get_ref(), kind, name)
            .map_err(|problem| self.error(value.span(), *problem))?;
        Ok(*value.get_ref())
    }
}
