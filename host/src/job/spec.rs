//! The job file as written: raw serde structs, one per TOML table.
//!
//! These types only fix the shape of the file: which keys exist and their TOML
//! types. Unknown keys and wrong types are rejected here, by serde, with the
//! position toml reports. Everything else — units, allowed words, which keys
//! belong to which `type`, required keys, the graph — is checked when the spec
//! becomes a [`Job`](super::Job), which is why values a later check may reject
//! are wrapped in [`Spanned`]: the error can then name their line. (Required
//! keys other than `name` are `Option`s for the same reason: the message can
//! then say what the key means and which vertex lacks it.)
//!
//! A `*Spec` is never used to run anything; the validated [`Job`](super::Job) is.
//! docs/JOB.md is the user's description of the same format.

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use toml::Spanned;

/// Declares a table of the job file. A field of an `Option` type is a key that may be left out:
/// `None` when absent, and not written back when `None` (`#[serde(default, skip_serializing_if
/// = "Option::is_none")]`, given here once instead of on each of the ninety keys). Other fields
/// are declared as written.
///
/// Not `#[serde(flatten)]` of the keys vertices share: serde ignores `deny_unknown_fields`
/// beside a flattened field, and the flattened fields would lose their positions (`Spanned`).
macro_rules! job_table {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($fields:tt)* }
    ) => {
        job_table!(@field [$(#[$meta])* pub struct $name] [] $($fields)*);
    };
    (@field $head:tt [$($done:tt)*]
        $(#[$attr:meta])* pub $field:ident: Option<$type:ty>, $($rest:tt)*
    ) => {
        job_table!(@field $head [
            $($done)*
            $(#[$attr])*
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub $field: Option<$type>,
        ] $($rest)*);
    };
    (@field $head:tt [$($done:tt)*]
        $(#[$attr:meta])* pub $field:ident: $type:ty, $($rest:tt)*
    ) => {
        job_table!(@field $head [$($done)* $(#[$attr])* pub $field: $type,] $($rest)*);
    };
    (@field [$($head:tt)*] [$($done:tt)*]) => {
        $($head)* { $($done)* }
    };
}

job_table! {
    /// A whole job file.
    #[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    pub struct JobSpec {
        /// `name`: the job's name (required).
        pub name: Spanned<String>,
        /// `max_parallelism`: the number of key groups, and so the largest parallelism any vertex
        /// can be rescaled to; absent = 128, or what the restored checkpoint was taken with.
        pub max_parallelism: Option<Spanned<u32>>,
        /// `chain`: `false` runs every task on a thread of its own; absent = tasks are chained
        /// where they can be.
        pub chain: Option<bool>,
        /// `[checkpoint]`: checkpoint settings; absent = checkpoints off, defaults for the rest.
        pub checkpoint: Option<CheckpointSpec>,
        /// `[restart]`: the restart strategy; absent = a default that depends on checkpoints.
        pub restart: Option<RestartSpec>,
        /// `[limits]`: guest limits for every operator; absent = the defaults.
        pub limits: Option<LimitsSpec>,
        /// `[control]`: the control endpoint of the running job; absent = on, on loopback.
        pub control: Option<ControlSpec>,
        /// `[state]`: where and within what memory operators keep keyed state on the host;
        /// absent = 512MiB, under the system's temporary directory.
        pub state: Option<StateSpec>,
        /// `[[source]]` tables, in file order.
        #[serde(rename = "source", default, skip_serializing_if = "Vec::is_empty")]
        pub sources: Vec<SourceSpec>,
        /// `[[operator]]` tables, in file order.
        #[serde(rename = "operator", default, skip_serializing_if = "Vec::is_empty")]
        pub operators: Vec<OperatorSpec>,
        /// `[[sink]]` tables, in file order.
        #[serde(rename = "sink", default, skip_serializing_if = "Vec::is_empty")]
        pub sinks: Vec<SinkSpec>,
    }
}

job_table! {
    /// The `[checkpoint]` table; every key is optional.
    #[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    pub struct CheckpointSpec {
        /// `interval`: a duration, or `"off"`.
        pub interval: Option<Spanned<String>>,
        /// `mode`: `"exactly-once"` or `"at-least-once"`.
        pub mode: Option<Spanned<String>>,
        /// `min_pause`: a duration.
        pub min_pause: Option<Spanned<String>>,
        /// `timeout`: a duration.
        pub timeout: Option<Spanned<String>>,
        /// `max_concurrent`: at least 1.
        pub max_concurrent: Option<Spanned<u32>>,
        /// `on_cancel`: `"retain"` or `"delete"`.
        pub on_cancel: Option<Spanned<String>>,
        /// `directory`: relative to the job file's folder.
        pub directory: Option<Spanned<String>>,
        /// `retained`: at least 1.
        pub retained: Option<Spanned<u32>>,
        /// `tolerable_failures`: consecutive checkpoint failures tolerated.
        pub tolerable_failures: Option<Spanned<u32>>,
        /// `storage_endpoint`: the URL of an S3-compatible store.
        pub storage_endpoint: Option<Spanned<String>>,
        /// `storage_retries`: how often a failed object-store request is retried.
        pub storage_retries: Option<Spanned<u32>>,
        /// `storage_retry_timeout`: a duration; no retry starts later than this after the first
        /// attempt.
        pub storage_retry_timeout: Option<Spanned<String>>,
        /// `storage_request_timeout`: a duration; the longest one object-store request may take.
        pub storage_request_timeout: Option<Spanned<String>>,
    }
}

job_table! {
    /// The `[control]` table; every key is optional.
    #[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    pub struct ControlSpec {
        /// `enabled`: whether the running job serves its control endpoint.
        pub enabled: Option<Spanned<bool>>,
        /// `address`: `"host:port"` to listen on.
        pub address: Option<Spanned<String>>,
    }
}

job_table! {
    /// The `[state]` table; every key is optional.
    #[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    pub struct StateSpec {
        /// `memory`: a size; the memory the stores of the job's process share.
        pub memory: Option<Spanned<String>>,
        /// `directory`: relative to the job file's folder; where the stores work.
        pub directory: Option<Spanned<String>>,
    }
}

job_table! {
    /// The `[restart]` table. Which keys apply depends on `strategy`.
    #[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    pub struct RestartSpec {
        /// `strategy`: `"none"`, `"fixed-delay"` or `"exponential-delay"` (required).
        pub strategy: Option<Spanned<String>>,
        /// `attempts`: fixed-delay and exponential-delay.
        pub attempts: Option<Spanned<u32>>,
        /// `delay`: fixed-delay only.
        pub delay: Option<Spanned<String>>,
        /// `initial`: exponential-delay only.
        pub initial: Option<Spanned<String>>,
        /// `max`: exponential-delay only.
        pub max: Option<Spanned<String>>,
        /// `multiplier`: exponential-delay only.
        pub multiplier: Option<Spanned<f64>>,
    }
}

job_table! {
    /// The `[limits]` table, or an operator's `limits`; every key is optional.
    #[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    pub struct LimitsSpec {
        /// `max_memory`: a size.
        pub max_memory: Option<Spanned<String>>,
        /// `call_timeout`: a duration.
        pub call_timeout: Option<Spanned<String>>,
        /// `max_output`: a size.
        pub max_output: Option<Spanned<String>>,
        /// `max_state`: a size.
        pub max_state: Option<Spanned<String>>,
        /// `max_timer_state`: a size.
        pub max_timer_state: Option<Spanned<String>>,
    }
}

job_table! {
    /// A `[[source]]` table. Which keys apply depends on `type`.
    #[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    pub struct SourceSpec {
        /// `name` (required).
        pub name: Spanned<String>,
        /// `type`: `"file"`, `"generator"` or `"kafka"` (required).
        #[serde(rename = "type")]
        pub kind: Option<Spanned<String>>,
        /// `parallelism`: default 1.
        pub parallelism: Option<Spanned<u32>>,
        /// `inputs`: never allowed on a source; kept so the error can say so.
        pub inputs: Option<Spanned<Vec<Spanned<InputSpec>>>>,
        /// `chain`: `false` keeps the vertex's tasks from being chained with their neighbours';
        /// absent = chained where they can be.
        pub chain: Option<bool>,
        /// `watermark` (every type): how the source makes watermarks; absent = none but the
        /// final one at the end of its input.
        pub watermark: Option<Spanned<WatermarkSpec>>,
        /// `path` (file): the file to read.
        pub path: Option<Spanned<String>>,
        /// `follow` (file): keep reading as the file grows.
        pub follow: Option<Spanned<bool>>,
        /// `format` (file): `"lines"`, `"jsonl"` or `"csv"`; absent = lines.
        pub format: Option<Spanned<String>>,
        /// `key` (file, jsonl or csv): a JSON pointer string or a column index; (kafka) `"key"` or
        /// `{ header = "NAME" }`.
        pub key: Option<Spanned<toml::Value>>,
        /// `value` (file, jsonl or csv): a JSON pointer string or a column index; (kafka)
        /// `"value"` or `{ header = "NAME" }`.
        pub value: Option<Spanned<toml::Value>>,
        /// `timestamp` (file, jsonl or csv): a JSON pointer string or a column index; (kafka)
        /// `"timestamp"` or `{ header = "NAME" }`.
        pub timestamp: Option<Spanned<toml::Value>>,
        /// `header` (file, csv): the first line names the columns and is not a record.
        pub header: Option<Spanned<bool>>,
        /// `on_error` (file, jsonl or csv; kafka with a header mapping): `"fail"` or `"skip"`.
        pub on_error: Option<Spanned<String>>,
        /// `seed` (generator).
        pub seed: Option<Spanned<u64>>,
        /// `count` (generator): records in total; absent = unbounded.
        pub count: Option<Spanned<u64>>,
        /// `rate` (generator): records per second; absent = as fast as possible.
        pub rate: Option<Spanned<f64>>,
        /// `keys` (generator): how many distinct keys.
        pub keys: Option<Spanned<u64>>,
        /// `value_size` (generator): bytes per value.
        pub value_size: Option<Spanned<u64>>,
        /// `values` (generator): `"letters"` or `"integers"`.
        pub values: Option<Spanned<String>>,
        /// `min` (generator, integers): the smallest value.
        pub min: Option<Spanned<i64>>,
        /// `max` (generator, integers): the largest value.
        pub max: Option<Spanned<i64>>,
        /// `disorder` (generator): how many milliseconds a record's timestamp may be moved back.
        pub disorder: Option<Spanned<u64>>,
        /// `bootstrap` (kafka): `host:port[,host:port…]` of the brokers.
        pub bootstrap: Option<Spanned<String>>,
        /// `topics` (kafka): the topics to read.
        pub topics: Option<Spanned<Vec<Spanned<String>>>>,
        /// `topic_pattern` (kafka): the topics to read, as a glob (`*`, `?`).
        pub topic_pattern: Option<Spanned<String>>,
        /// `start` (kafka): `"earliest"`, `"latest"`, `"committed"` or `{ timestamp = MS }`.
        pub start: Option<Spanned<toml::Value>>,
        /// `until` (kafka): `"never"` or `"end"`.
        pub until: Option<Spanned<String>>,
        /// `isolation` (kafka): `"read_committed"` or `"read_uncommitted"`.
        pub isolation: Option<Spanned<String>>,
        /// `group` (kafka): the consumer group completed checkpoints commit offsets to.
        pub group: Option<Spanned<String>>,
        /// `discovery_interval` (kafka): a duration, or `"off"`.
        pub discovery_interval: Option<Spanned<String>>,
        /// `properties` (kafka): librdkafka settings passed through.
        pub properties: Option<Spanned<toml::Table>>,
    }
}

job_table! {
    /// An `[[operator]]` table: a WebAssembly module run as a vertex.
    #[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    pub struct OperatorSpec {
        /// `name` (required).
        pub name: Spanned<String>,
        /// `module`: the `.wasm` file, relative to the job file's folder (required).
        pub module: Option<Spanned<String>>,
        /// `parallelism`: default 1.
        pub parallelism: Option<Spanned<u32>>,
        /// `config`: handed to the guest's init as bytes; default empty.
        pub config: Option<String>,
        /// `inputs` (required, non-empty).
        pub inputs: Option<Spanned<Vec<Spanned<InputSpec>>>>,
        /// `chain`: `false` keeps the vertex's tasks from being chained with their neighbours';
        /// absent = chained where they can be.
        pub chain: Option<bool>,
        /// `limits`: overrides of the job's `[limits]`, key by key.
        pub limits: Option<LimitsSpec>,
        /// `checkpoint`: `"exports"`, `"image"` or `"auto"` (the default).
        pub checkpoint: Option<Spanned<String>>,
        /// `image_full_every`: a full image every this many image checkpoints
        /// (default 10; 1 = no deltas).
        pub image_full_every: Option<Spanned<u32>>,
        /// `watermark`: never allowed on an operator (only sources make watermarks); kept so
        /// the error can say so.
        pub watermark: Option<Spanned<toml::Value>>,
    }
}

job_table! {
    /// A `[[sink]]` table. Which keys apply depends on `type`.
    #[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
    #[serde(deny_unknown_fields)]
    pub struct SinkSpec {
        /// `name` (required).
        pub name: Spanned<String>,
        /// `type`: `"file"`, `"kafka"`, `"stdout"` or `"blackhole"` (required).
        #[serde(rename = "type")]
        pub kind: Option<Spanned<String>>,
        /// `parallelism`: default 1.
        pub parallelism: Option<Spanned<u32>>,
        /// `inputs` (required, non-empty).
        pub inputs: Option<Spanned<Vec<Spanned<InputSpec>>>>,
        /// `chain`: `false` keeps the vertex's tasks from being chained with their neighbours';
        /// absent = chained where they can be.
        pub chain: Option<bool>,
        /// `path` (file): the output directory.
        pub path: Option<Spanned<String>>,
        /// `bootstrap` (kafka): `host:port[,host:port…]` of the brokers.
        pub bootstrap: Option<Spanned<String>>,
        /// `topic` (kafka): the topic to write, a string; or a table
        /// `{ from_key = "/", topics = [...] }` that takes it from each record's key.
        pub topic: Option<Spanned<toml::Value>>,
        /// `timestamp` (kafka): `"record"` or `"now"`.
        pub timestamp: Option<Spanned<String>>,
        /// `delivery` (kafka): `"exactly-once"`, `"at-least-once"` or `"none"`.
        pub delivery: Option<Spanned<String>>,
        /// `transactional_id_prefix` (kafka, exactly-once).
        pub transactional_id_prefix: Option<Spanned<String>>,
        /// `marker_topic` (kafka, exactly-once).
        pub marker_topic: Option<Spanned<String>>,
        /// `properties` (kafka): librdkafka settings passed through.
        pub properties: Option<Spanned<toml::Table>>,
        /// `watermark`: never allowed on a sink (only sources make watermarks); kept so the
        /// error can say so.
        pub watermark: Option<Spanned<toml::Value>>,
    }
}

job_table! {
    /// A source's `watermark` table; every key is optional.
    ///
    /// ```toml
    /// watermark = { out_of_orderness = "2s", idle_timeout = "10s", interval = "200ms" }
    /// ```
    ///
    /// The values are read as any TOML value, so that a number where a duration belongs is
    /// refused at validation with the forms a duration takes, rather than as a type mismatch.
    #[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
    #[serde(
        deny_unknown_fields,
        expecting = "a table such as { out_of_orderness = \"2s\", idle_timeout = \"10s\", \
                     interval = \"200ms\" }"
    )]
    pub struct WatermarkSpec {
        /// `out_of_orderness`: a duration; default `"0s"`.
        pub out_of_orderness: Option<Spanned<toml::Value>>,
        /// `idle_timeout`: a duration, or `"off"`; default `"10s"`.
        pub idle_timeout: Option<Spanned<toml::Value>>,
        /// `interval`: a duration above zero; default `"200ms"`.
        pub interval: Option<Spanned<toml::Value>>,
    }
}

/// One element of an `inputs` array: a vertex name, or a table naming the
/// vertex, the partitioner and the side output read.
///
/// ```toml
/// inputs = ["lines", { from = "split", partition = "key-hash" }, { from = "windows", output = "late" }]
/// ```
#[derive(Debug, Clone, PartialEq)]
pub enum InputSpec {
    /// `"split"`: the main output, the partitioner chosen by parallelism.
    Name(String),
    /// `{ from = "split", partition = "key-hash", output = "late" }`.
    Edge {
        /// `from`: the upstream vertex (required).
        from: Spanned<String>,
        /// `partition`: `forward`, `rebalance`, `key-hash` or `broadcast`.
        partition: Option<Spanned<String>>,
        /// `output`: a side output of `from` (an operator); absent = its main output.
        output: Option<Spanned<String>>,
    },
}

/// The keys of an input table.
const INPUT_KEYS: &[&str] = &["from", "partition", "output"];

impl<'de> Deserialize<'de> for InputSpec {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(InputVisitor)
    }
}

/// Accepts a string or a `{ from, partition, output }` table, refusing other keys.
struct InputVisitor;

impl<'de> Visitor<'de> for InputVisitor {
    type Value = InputSpec;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a vertex name or a table { from = \"<vertex>\", partition = \"<partitioner>\", \
             output = \"<side output>\" }",
        )
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<InputSpec, E> {
        Ok(InputSpec::Name(name.to_owned()))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<InputSpec, A::Error> {
        let mut from = None;
        let mut partition = None;
        let mut output = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "from" if from.is_some() => return Err(de::Error::duplicate_field("from")),
                "from" => from = Some(map.next_value()?),
                "partition" if partition.is_some() => {
                    return Err(de::Error::duplicate_field("partition"));
                }
                "partition" => partition = Some(map.next_value()?),
                "output" if output.is_some() => return Err(de::Error::duplicate_field("output")),
                "output" => output = Some(map.next_value()?),
                other => return Err(de::Error::unknown_field(other, INPUT_KEYS)),
            }
        }
        let from = from.ok_or_else(|| de::Error::missing_field("from"))?;
        Ok(InputSpec::Edge {
            from,
            partition,
            output,
        })
    }
}

impl Serialize for InputSpec {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            InputSpec::Name(name) => serializer.serialize_str(name),
            InputSpec::Edge {
                from,
                partition,
                output,
            } => {
                let len = 1 + usize::from(output.is_some()) + usize::from(partition.is_some());
                let mut map = serializer.serialize_map(Some(len))?;
                map.serialize_entry("from", from.get_ref())?;
                if let Some(output) = output {
                    map.serialize_entry("output", output.get_ref())?;
                }
                if let Some(partition) = partition {
                    map.serialize_entry("partition", partition.get_ref())?;
                }
                map.end()
            }
        }
    }
}
