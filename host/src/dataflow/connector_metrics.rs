//! Figures a connector keeps about its own work, beside its task's counters
//! ([`TaskMetrics::connector`](super::metrics::TaskMetrics::connector)): a Kafka source's
//! offsets and lag per partition, a Kafka sink's transactions and how long they take to
//! commit.
//!
//! The task loop never reads or writes them. A connector installs its figures when it is
//! built and updates them where it does the work; the control endpoint reads them. The
//! figures themselves are the connector's (`connectors/kafka/figures.rs`); what lives on this
//! floor, below both, is [`ConnectorFigures`], the trait both name: a connector's part of its
//! task's JSON view and its Prometheus families, so that the endpoint shows any connector's
//! figures without naming one, and a new connector's figures are a change in its own folder.

use std::fmt;

/// The figures one connector keeps of itself, as the displays read them.
pub trait ConnectorFigures: Send + Sync + fmt::Debug {
    /// Its entry in its task's JSON view (`GET /api/job`): the key (`kafka_source`) and the
    /// value read now.
    fn view(&self) -> (&'static str, serde_json::Value);

    /// Its Prometheus families with this task's samples, read now. A family is declared
    /// whenever a task has it, even without samples (a partition whose offsets are not known
    /// yet); the endpoint merges the families of every task by name and labels each sample
    /// with the task's `vertex` and `subtask` before the family's own labels.
    fn families(&self) -> Vec<Family>;
}

/// One Prometheus family of a connector's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// Its name (`weir_kafka_source_offset`).
    pub name: &'static str,
    /// Its type.
    pub kind: FamilyKind,
    /// Its `# HELP` text.
    pub help: &'static str,
    /// Its samples, in order.
    pub samples: Vec<Sample>,
}

/// The type of a [`Family`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FamilyKind {
    /// Only grows.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Cumulative buckets (`_bucket`, with an `le` label), a `_sum` and a `_count`.
    Histogram,
}

/// One sample of a [`Family`].
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// What follows the family's name in the sample's (`_bucket`, `_sum`, `_count` for a
    /// histogram; empty otherwise).
    pub suffix: &'static str,
    /// Its labels after the task's `vertex` and `subtask`.
    pub labels: Vec<(&'static str, String)>,
    /// Its value.
    pub value: f64,
}
