//! The Kafka connectors' figures: a source's offsets and lag per partition, an exactly-once
//! sink's transactions and how long they take to commit, and how the displays show them (its
//! task's JSON view, its Prometheus families) through
//! [`ConnectorFigures`].
//!
//! In the connector's folder because they are the connector's: the task loop never reads or
//! writes them, and the control endpoint reads them through the trait, so neither names them.
//!
//! Writing them is cheap where it happens often: a Kafka source stores plain atomics once per
//! poll (never per record) and replaces its list of partitions, under a lock, only when its
//! partitions change. A sink's figures change once per committed transaction, so a mutex
//! keeps them consistent with each other.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;

use crate::dataflow::connector_metrics::{ConnectorFigures, Family, FamilyKind, Sample};

/// What an offset that is not known yet is stored as (offsets are never negative).
const UNKNOWN: i64 = -1;

/// The partitions one Kafka source subtask reads.
#[derive(Debug)]
pub(crate) struct KafkaSourceMetrics {
    /// The current partitions; replaced whole when the set changes, so a reader takes the
    /// lock only to clone the `Arc`, and the source updates the figures without it.
    partitions: Mutex<Arc<[PartitionMetrics]>>,
}

impl Default for KafkaSourceMetrics {
    fn default() -> Self {
        KafkaSourceMetrics {
            partitions: Mutex::new(Arc::from(Vec::new())),
        }
    }
}

impl KafkaSourceMetrics {
    /// The current partitions' live figures (the same ones the source updates).
    pub(crate) fn current(&self) -> Arc<[PartitionMetrics]> {
        Arc::clone(&self.lock())
    }

    /// Replaces the list of partitions (the source's set changed: it started, was restored,
    /// or found new partitions).
    pub(crate) fn replace(&self, partitions: Arc<[PartitionMetrics]>) {
        *self.lock() = partitions;
    }

    /// A reading of every partition, in the source's order (by topic, then number).
    pub(crate) fn partitions(&self) -> Vec<PartitionFigures> {
        self.current().iter().map(PartitionMetrics::read).collect()
    }

    fn lock(&self) -> MutexGuard<'_, Arc<[PartitionMetrics]>> {
        // A panic while holding this lock leaves a list behind: still readable.
        self.partitions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The live figures of one partition a source reads.
#[derive(Debug)]
pub(crate) struct PartitionMetrics {
    topic: String,
    partition: i32,
    next: AtomicI64,
    high_watermark: AtomicI64,
}

impl PartitionMetrics {
    /// Partition `partition` of `topic`, its offsets not known yet.
    pub(crate) fn new(topic: &str, partition: i32) -> Self {
        PartitionMetrics {
            topic: topic.to_owned(),
            partition,
            next: AtomicI64::new(UNKNOWN),
            high_watermark: AtomicI64::new(UNKNOWN),
        }
    }

    /// Its topic.
    pub(crate) fn topic(&self) -> &str {
        &self.topic
    }

    /// Its number.
    pub(crate) fn partition(&self) -> i32 {
        self.partition
    }

    /// The offset the source reads next (a negative one: not known).
    pub(crate) fn set_next(&self, offset: i64) {
        self.next.store(offset.max(UNKNOWN), Ordering::Relaxed);
    }

    /// The offset after the last record the source can read, as the broker last said (a
    /// negative one: not known).
    pub(crate) fn set_high_watermark(&self, offset: i64) {
        self.high_watermark
            .store(offset.max(UNKNOWN), Ordering::Relaxed);
    }

    /// A reading of its figures.
    pub(crate) fn read(&self) -> PartitionFigures {
        let known = |offset: i64| (offset >= 0).then_some(offset);
        PartitionFigures {
            topic: self.topic.clone(),
            partition: self.partition,
            next: known(self.next.load(Ordering::Relaxed)),
            high_watermark: known(self.high_watermark.load(Ordering::Relaxed)),
        }
    }
}

/// One reading of a partition's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PartitionFigures {
    /// Its topic.
    pub(crate) topic: String,
    /// Its number.
    pub(crate) partition: i32,
    /// The offset the source reads next; `None` before it knows where it starts.
    pub(crate) next: Option<i64>,
    /// The offset after the last record the source can read (the high watermark, or under
    /// `read_committed` the last stable offset); `None` until the broker said.
    pub(crate) high_watermark: Option<i64>,
}

impl PartitionFigures {
    /// Records the source has yet to read: the high watermark less the next offset (never
    /// below 0); `None` while either is unknown.
    pub(crate) fn lag(&self) -> Option<i64> {
        Some((self.high_watermark? - self.next?).max(0))
    }
}

/// Upper bounds, in seconds, of the buckets of [`SinkFigures::buckets`]: from 1 ms (a
/// transaction on a local broker) to 30 s (the request timeout).
pub(crate) const COMMIT_BUCKETS: [f64; 13] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0, 30.0,
];

/// The transactions of one exactly-once Kafka sink subtask.
#[derive(Debug, Default)]
pub(crate) struct KafkaSinkMetrics {
    figures: Mutex<SinkFigures>,
}

impl KafkaSinkMetrics {
    /// Counts one committed transaction of `records` records (the marker not counted) whose
    /// commit took `took`, from the sink learning it may commit to the commit's end.
    pub(crate) fn committed(&self, records: u64, took: Duration) {
        let mut figures = self.lock();
        figures.transactions += 1;
        figures.records += records;
        figures.last = took;
        figures.max = figures.max.max(took);
        figures.sum += took;
        let seconds = took.as_secs_f64();
        for (count, bound) in figures.buckets.iter_mut().zip(COMMIT_BUCKETS) {
            if seconds <= bound {
                *count += 1;
            }
        }
    }

    /// Counts a restore that sent a checkpoint's output again: its transaction had not
    /// committed before the job failed. (The transaction itself counts as committed too.)
    pub(crate) fn resent(&self) {
        self.lock().resent += 1;
    }

    /// A reading of the figures.
    pub(crate) fn read(&self) -> SinkFigures {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, SinkFigures> {
        self.figures
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One reading of a sink's figures, all of the current attempt.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SinkFigures {
    /// Transactions committed.
    pub(crate) transactions: u64,
    /// Records committed in them.
    pub(crate) records: u64,
    /// Transactions a restore sent again.
    pub(crate) resent: u64,
    /// How long the last commit took.
    pub(crate) last: Duration,
    /// How long the longest commit took.
    pub(crate) max: Duration,
    /// How long every commit took, added up.
    pub(crate) sum: Duration,
    /// `buckets[i]`: commits that took at most `COMMIT_BUCKETS[i]` seconds (cumulative, as a
    /// Prometheus histogram's buckets are).
    pub(crate) buckets: [u64; COMMIT_BUCKETS.len()],
}

impl SinkFigures {
    /// An estimate of quantile `q` (0 to 1) of the commit durations, interpolated within its
    /// bucket as Prometheus' `histogram_quantile` does and never above the longest; `None`
    /// before the first commit.
    pub(crate) fn quantile(&self, q: f64) -> Option<Duration> {
        if self.transactions == 0 {
            return None;
        }
        let rank = q.clamp(0.0, 1.0) * self.transactions as f64;
        let mut below = 0u64;
        let mut lower = 0.0;
        for (count, upper) in self.buckets.iter().zip(COMMIT_BUCKETS) {
            if *count as f64 >= rank && *count > below {
                let within = (rank - below as f64) / (*count - below) as f64;
                let seconds = lower + (upper - lower) * within;
                return Some(Duration::from_secs_f64(seconds).min(self.max));
            }
            below = *count;
            lower = upper;
        }
        // Beyond the last bucket: the longest is the best estimate there is.
        Some(self.max)
    }
}

/// The `kafka_source` of a task's JSON view: the partitions the subtask reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct KafkaSourceView {
    /// One entry per partition, by topic, then number.
    pub(crate) partitions: Vec<KafkaPartitionView>,
}

/// One partition of a [`KafkaSourceView`]. An offset not known yet is `null`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct KafkaPartitionView {
    /// Its topic.
    pub(crate) topic: String,
    /// Its number.
    pub(crate) partition: i32,
    /// The offset the source reads next (what its next checkpoint records).
    pub(crate) offset: Option<i64>,
    /// The offset after the last record the source can read, as the broker last reported
    /// it: the high watermark, or under `isolation = "read_committed"` the last stable
    /// offset. Refreshed from librdkafka's statistics, about every 500 ms.
    pub(crate) high_watermark: Option<i64>,
    /// `high_watermark - offset`, never below 0: records still to read.
    pub(crate) lag: Option<i64>,
}

impl From<&PartitionFigures> for KafkaPartitionView {
    fn from(p: &PartitionFigures) -> Self {
        KafkaPartitionView {
            topic: p.topic.clone(),
            partition: p.partition,
            offset: p.next,
            high_watermark: p.high_watermark,
            lag: p.lag(),
        }
    }
}

/// The `kafka_sink` of a task's JSON view: the transactions of an exactly-once sink subtask in
/// the current attempt, one per completed checkpoint that had output.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct KafkaSinkView {
    /// Transactions committed.
    pub(crate) transactions_committed: u64,
    /// Records committed in them (markers not counted).
    pub(crate) records_committed: u64,
    /// Transactions a restore sent again because they had not committed before a failure
    /// (counted in `transactions_committed` too).
    pub(crate) transactions_resent: u64,
    /// How long a commit took, from the checkpoint's completion reaching the sink to the
    /// commit's end, in ms (fractional); all zero before the first.
    pub(crate) commit_duration: CommitDurationView,
}

/// The `commit_duration` of a [`KafkaSinkView`], in ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct CommitDurationView {
    /// The last commit.
    pub(crate) last: f64,
    /// The longest commit.
    pub(crate) max: f64,
    /// The average commit.
    pub(crate) avg: f64,
    /// The median, estimated from the buckets of `weir_kafka_sink_commit_seconds`.
    pub p50: f64,
    /// The 99th percentile, estimated likewise.
    pub p99: f64,
}

impl From<&SinkFigures> for KafkaSinkView {
    fn from(f: &SinkFigures) -> Self {
        let ms = |d: Duration| d.as_nanos() as f64 / 1e6;
        let avg = match f.transactions {
            0 => 0.0,
            n => ms(f.sum) / n as f64,
        };
        KafkaSinkView {
            transactions_committed: f.transactions,
            records_committed: f.records,
            transactions_resent: f.resent,
            commit_duration: CommitDurationView {
                last: ms(f.last),
                max: ms(f.max),
                avg,
                p50: f.quantile(0.5).map_or(0.0, ms),
                p99: f.quantile(0.99).map_or(0.0, ms),
            },
        }
    }
}

/// A view as JSON. The views are plain fields with string keys, which always serialize.
fn json(view: impl Serialize) -> serde_json::Value {
    serde_json::to_value(view).expect("a view of plain fields serializes")
}

impl ConnectorFigures for KafkaSourceMetrics {
    fn view(&self) -> (&'static str, serde_json::Value) {
        let view = KafkaSourceView {
            partitions: self.partitions().iter().map(Into::into).collect(),
        };
        ("kafka_source", json(view))
    }

    /// Its partitions' offsets, high watermarks and lag, labelled `topic` and `partition`;
    /// a figure not known yet has no sample.
    fn families(&self) -> Vec<Family> {
        let partitions = self.partitions();
        type Read = fn(&PartitionFigures) -> Option<i64>;
        let families: [(&'static str, &'static str, Read); 3] = [
            (
                "weir_kafka_source_offset",
                "The offset a Kafka source reads next in a partition (absent until it knows).",
                |p| p.next,
            ),
            (
                "weir_kafka_source_high_watermark",
                "The offset after the last record a Kafka source can read in a partition (the last stable offset under read_committed), as librdkafka last heard from the broker (absent until it has).",
                |p| p.high_watermark,
            ),
            (
                "weir_kafka_source_lag_records",
                "Records a Kafka source has yet to read in a partition: high watermark less offset (absent while either is unknown).",
                |p| p.lag(),
            ),
        ];
        families
            .into_iter()
            .map(|(name, help, read)| Family {
                name,
                kind: FamilyKind::Gauge,
                help,
                samples: partitions
                    .iter()
                    .filter_map(|p| {
                        Some(Sample {
                            suffix: "",
                            labels: vec![
                                ("topic", p.topic.clone()),
                                ("partition", p.partition.to_string()),
                            ],
                            value: read(p)? as f64,
                        })
                    })
                    .collect(),
            })
            .collect()
    }
}

impl ConnectorFigures for KafkaSinkMetrics {
    fn view(&self) -> (&'static str, serde_json::Value) {
        ("kafka_sink", json(KafkaSinkView::from(&self.read())))
    }

    /// Its transactions, records and resent transactions as counters, and its commit
    /// durations as a histogram over [`COMMIT_BUCKETS`].
    fn families(&self) -> Vec<Family> {
        let figures = self.read();
        let sample = |suffix, labels, value| Sample {
            suffix,
            labels,
            value,
        };
        type Count = fn(&SinkFigures) -> u64;
        let counters: [(&'static str, &'static str, Count); 3] = [
            (
                "weir_kafka_sink_transactions_total",
                "Transactions an exactly-once Kafka sink committed in the current attempt (one per completed checkpoint with output).",
                |f| f.transactions,
            ),
            (
                "weir_kafka_sink_records_committed_total",
                "Records an exactly-once Kafka sink committed in those transactions.",
                |f| f.records,
            ),
            (
                "weir_kafka_sink_transactions_resent_total",
                "Transactions a restore sent again because they had not committed before a failure.",
                |f| f.resent,
            ),
        ];
        let mut families: Vec<Family> = counters
            .into_iter()
            .map(|(name, help, read)| Family {
                name,
                kind: FamilyKind::Counter,
                help,
                samples: vec![sample("", Vec::new(), read(&figures) as f64)],
            })
            .collect();
        // Rust shows a whole bound without a fraction (`1`, `30`), as Prometheus' text does.
        let mut samples: Vec<Sample> = COMMIT_BUCKETS
            .iter()
            .zip(figures.buckets)
            .map(|(bound, count)| sample("_bucket", vec![("le", bound.to_string())], count as f64))
            .collect();
        samples.push(sample(
            "_bucket",
            vec![("le", "+Inf".into())],
            figures.transactions as f64,
        ));
        samples.push(sample("_sum", Vec::new(), figures.sum.as_secs_f64()));
        samples.push(sample("_count", Vec::new(), figures.transactions as f64));
        families.push(Family {
            name: "weir_kafka_sink_commit_seconds",
            kind: FamilyKind::Histogram,
            help: "Time from the beginning of an exactly-once Kafka sink's transaction to its commit, records sent included.",
            samples,
        });
        families
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partitions_lag_is_what_is_left_to_read() {
        let metrics = KafkaSourceMetrics::default();
        assert!(metrics.partitions().is_empty());
        let list: Arc<[PartitionMetrics]> = Arc::from(vec![
            PartitionMetrics::new("a", 0),
            PartitionMetrics::new("a", 1),
        ]);
        metrics.replace(Arc::clone(&list));
        let before = metrics.partitions();
        assert_eq!((before[0].next, before[0].high_watermark), (None, None));
        assert_eq!(before[0].lag(), None);
        list[0].set_next(7);
        assert_eq!(metrics.partitions()[0].lag(), None, "no watermark yet");
        list[0].set_high_watermark(10);
        list[1].set_next(4);
        list[1].set_high_watermark(-1001);
        let after = metrics.partitions();
        assert_eq!(
            after[0],
            PartitionFigures {
                topic: "a".into(),
                partition: 0,
                next: Some(7),
                high_watermark: Some(10),
            }
        );
        assert_eq!(after[0].lag(), Some(3));
        assert_eq!(
            after[1].high_watermark, None,
            "librdkafka's 'invalid' is unknown"
        );
        // A watermark read before the records the source just read: no negative lag.
        list[0].set_next(12);
        assert_eq!(metrics.partitions()[0].lag(), Some(0));
    }

    #[test]
    fn a_sink_counts_its_commits_in_cumulative_buckets() {
        let metrics = KafkaSinkMetrics::default();
        assert_eq!(metrics.read().quantile(0.5), None);
        metrics.committed(10, Duration::from_millis(2));
        metrics.committed(5, Duration::from_millis(20));
        metrics.committed(0, Duration::from_millis(40));
        metrics.resent();
        let figures = metrics.read();
        assert_eq!(
            (figures.transactions, figures.records, figures.resent),
            (3, 15, 1)
        );
        assert_eq!(figures.last, Duration::from_millis(40));
        assert_eq!(figures.max, Duration::from_millis(40));
        assert_eq!(figures.sum, Duration::from_millis(62));
        // 1 ms, 2.5 ms, 5 ms, 10 ms, 25 ms, 50 ms, ...
        assert_eq!(&figures.buckets[..7], &[0, 1, 1, 1, 2, 3, 3]);
        assert_eq!(*figures.buckets.last().unwrap(), 3);
        // The median falls in the 10–25 ms bucket, at its upper end.
        let median = figures.quantile(0.5).unwrap();
        assert!(
            median > Duration::from_millis(10) && median <= Duration::from_millis(25),
            "{median:?}"
        );
        // Never above the longest seen.
        assert_eq!(figures.quantile(1.0), Some(Duration::from_millis(40)));
    }

    #[test]
    fn a_commit_slower_than_every_bucket_is_still_counted() {
        let metrics = KafkaSinkMetrics::default();
        metrics.committed(1, Duration::from_secs(45));
        let figures = metrics.read();
        assert_eq!(figures.buckets, [0; COMMIT_BUCKETS.len()]);
        assert_eq!(figures.quantile(0.5), Some(Duration::from_secs(45)));
    }
}
