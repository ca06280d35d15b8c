//! What a Kafka source tells the displays about its partitions (docs/CONTROL.md): the next
//! offset of each, the broker's end of it, and the lag between them, in the task's
//! [`KafkaSourceMetrics`].
//!
//! Kept apart from the source so that reading records stays as it was: the source hands its
//! offsets over once per poll ([`SourceReport::update`], atomic stores, no lock, no
//! allocation unless the set of partitions changed), and the ends come from librdkafka's
//! statistics ([`apply_statistics`]), which its own threads gather from the fetch responses
//! and which reach the task's thread as an event of its poll every [`STATISTICS_INTERVAL`]:
//! no request to the brokers is made for them. (rdkafka offers the cached watermarks only
//! through its unsafe bindings; `fetch_watermarks` asks the broker, which a poll must not
//! wait for.)

use std::sync::Arc;

use serde::Deserialize;

use super::figures::{KafkaSourceMetrics, PartitionMetrics};

/// How often librdkafka reports its statistics, so how fresh a partition's end is, unless the
/// job file's `properties` set `statistics.interval.ms`.
pub(crate) const STATISTICS_INTERVAL: &str = "500";

/// The source's side of its [`KafkaSourceMetrics`]: the list it publishes, kept in the order of
/// the source's partitions.
#[derive(Debug, Default)]
pub(crate) struct SourceReport {
    metrics: Arc<KafkaSourceMetrics>,
    current: Option<Arc<[PartitionMetrics]>>,
}

impl SourceReport {
    /// A report into `metrics`.
    pub(crate) fn new(metrics: Arc<KafkaSourceMetrics>) -> Self {
        SourceReport {
            metrics,
            current: None,
        }
    }

    /// Where the statistics go.
    pub(crate) fn metrics(&self) -> Arc<KafkaSourceMetrics> {
        Arc::clone(&self.metrics)
    }

    /// The source's partitions and their next offsets, in its order. A new set of partitions
    /// replaces the published list (the ends of the partitions kept carry over).
    pub(crate) fn update<'a, I>(&mut self, partitions: I)
    where
        I: ExactSizeIterator<Item = (&'a (String, i32), i64)> + Clone,
    {
        let same = self.current.as_ref().is_some_and(|current| {
            current.len() == partitions.len()
                && current
                    .iter()
                    .zip(partitions.clone())
                    .all(|(m, ((topic, number), _))| m.topic() == topic && m.partition() == *number)
        });
        if !same {
            let old = self.metrics.current();
            let list: Arc<[PartitionMetrics]> = partitions
                .clone()
                .map(|((topic, number), _)| {
                    let fresh = PartitionMetrics::new(topic, *number);
                    if let Some(end) = old
                        .iter()
                        .find(|m| m.topic() == topic && m.partition() == *number)
                        .and_then(|m| m.read().high_watermark)
                    {
                        fresh.set_high_watermark(end);
                    }
                    fresh
                })
                .collect();
            self.metrics.replace(Arc::clone(&list));
            self.current = Some(list);
        }
        if let Some(current) = &self.current {
            for (slot, (_, next)) in current.iter().zip(partitions) {
                slot.set_next(next);
            }
        }
    }
}

/// The part of librdkafka's statistics the source reads (docs: librdkafka's STATISTICS.md).
#[derive(Debug, Deserialize)]
struct Statistics {
    #[serde(default)]
    topics: std::collections::HashMap<String, TopicStatistics>,
}

#[derive(Debug, Deserialize)]
struct TopicStatistics {
    #[serde(default)]
    partitions: std::collections::HashMap<String, PartitionStatistics>,
}

#[derive(Debug, Deserialize)]
struct PartitionStatistics {
    partition: i32,
    hi_offset: i64,
    ls_offset: i64,
}

/// Sets the ends of the partitions in `metrics` from one statistics report: the high
/// watermark, or under `read_committed` the last stable offset (what such a consumer can
/// read up to). A report that does not parse changes nothing.
pub(crate) fn apply_statistics(json: &[u8], metrics: &KafkaSourceMetrics, read_committed: bool) {
    let Ok(statistics) = serde_json::from_slice::<Statistics>(json) else {
        tracing::debug!("librdkafka's statistics do not parse; partition ends not updated");
        return;
    };
    for slot in metrics.current().iter() {
        let Some(topic) = statistics.topics.get(slot.topic()) else {
            continue;
        };
        let Some(partition) = topic
            .partitions
            .values()
            .find(|p| p.partition == slot.partition())
        else {
            continue;
        };
        let end = if read_committed {
            partition.ls_offset
        } else {
            partition.hi_offset
        };
        if end >= 0 {
            slot.set_high_watermark(end);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_report_follows_the_sources_partitions() {
        let metrics = Arc::new(KafkaSourceMetrics::default());
        let mut report = SourceReport::new(Arc::clone(&metrics));
        let mut partitions: BTreeMap<(String, i32), i64> = BTreeMap::new();
        partitions.insert(("in".into(), 0), 3);
        partitions.insert(("in".into(), 1), 8);
        report.update(partitions.iter().map(|(k, n)| (k, *n)));
        let list = metrics.current();
        assert_eq!(metrics.partitions()[1].next, Some(8));

        // Same partitions: the same list, updated in place.
        partitions.insert(("in".into(), 0), 5);
        report.update(partitions.iter().map(|(k, n)| (k, *n)));
        assert!(Arc::ptr_eq(&list, &metrics.current()));
        assert_eq!(metrics.partitions()[0].next, Some(5));

        // A statistics report: read_uncommitted takes the high watermark, read_committed the
        // last stable offset; partitions it does not name keep what they had.
        let stats = br#"{"name": "weir#consumer-1", "topics": {"in": {"topic": "in",
            "partitions": {"0": {"partition": 0, "hi_offset": 9, "ls_offset": 7},
                           "-1": {"partition": -1, "hi_offset": -1001, "ls_offset": -1001}}}}}"#;
        apply_statistics(stats, &metrics, false);
        assert_eq!(metrics.partitions()[0].high_watermark, Some(9));
        assert_eq!(metrics.partitions()[0].lag(), Some(4));
        apply_statistics(stats, &metrics, true);
        assert_eq!(metrics.partitions()[0].high_watermark, Some(7));
        assert_eq!(metrics.partitions()[1].high_watermark, None);
        apply_statistics(b"not json", &metrics, true);
        assert_eq!(metrics.partitions()[0].high_watermark, Some(7));

        // A partition found: a new list, in order, the known end carried over.
        partitions.insert(("in".into(), 2), 0);
        report.update(partitions.iter().map(|(k, n)| (k, *n)));
        let figures = metrics.partitions();
        assert_eq!(figures.len(), 3);
        assert_eq!(figures[0].high_watermark, Some(7));
        assert_eq!((figures[2].partition, figures[2].next), (2, Some(0)));
    }
}
