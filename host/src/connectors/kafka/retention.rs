//! Kafka topics that delete records by time, and the records a sink writes that their topic's
//! retention deletes at once.
//!
//! A sink with `timestamp = "record"` (the default) writes each record's timestamp as its
//! CreateTime, and a topic that deletes by time (`cleanup.policy` with `delete`, a finite
//! `retention.ms`, `message.timestamp.type=CreateTime`) drops every record dated before now
//! less its retention at the broker's next pass. The job and its checkpoints cannot tell: the
//! broker took the record, and it is gone minutes later. A timestamp that is a record number
//! (a generator's) or a line number (a file source's default) dates from 1970, so this is the
//! first thing a new job against Kafka meets. The sink reads its topics' configs when it
//! starts and says so, once per subtask, naming the topic, the record's age and the fixes.
//! [`time_limit`] is also what the check of a topic between a worker's stages reads: such a
//! topic must keep its records whatever their time (`check_key_group_topic` in the parent).

use std::cell::Cell;
use std::collections::HashMap;

/// The topics of a sink that delete records by their CreateTime, and whether a record too old
/// for one of them was reported yet.
#[derive(Debug, Default)]
pub(crate) struct Retention {
    /// `retention.ms` of each topic that deletes by CreateTime.
    by_topic: HashMap<String, i64>,
    /// Whether the warning was given: it is given once.
    warned: Cell<bool>,
}

impl Retention {
    /// What the configs of the sink's topics say: each topic's name with its config values by
    /// name. An absent value is the broker's default (delete, a week, CreateTime), but an
    /// absent `retention.ms` leaves the topic unwatched: nothing is claimed that the broker
    /// did not say.
    pub(crate) fn from_configs(
        configs: impl IntoIterator<Item = (String, HashMap<String, String>)>,
    ) -> Retention {
        let by_topic = configs
            .into_iter()
            .filter_map(|(topic, config)| {
                // A topic that stamps records itself judges them by their time of arrival.
                let stamped_by_broker = config
                    .get("message.timestamp.type")
                    .is_some_and(|t| t == "LogAppendTime");
                let retention = time_limit(&config).filter(|_| !stamped_by_broker)?;
                Some((topic, retention))
            })
            .collect();
        Retention {
            by_topic,
            warned: Cell::new(false),
        }
    }

    /// The time before which a record may be too old for one of the topics, at `now` (ms since
    /// the epoch): now less the shortest retention. `None` once the warning was given or when
    /// no topic deletes by time, so that a sink checks nothing per record then.
    pub(crate) fn stale_before(&self, now: i64) -> Option<i64> {
        if self.warned.get() {
            return None;
        }
        let shortest = self.by_topic.values().min()?;
        Some(now.saturating_sub(*shortest))
    }

    /// The warning for a record of `timestamp` (ms since the epoch, above 0) sent to `topic`
    /// at `now`, if that topic deletes it at its next pass and none was given yet.
    pub(crate) fn check(
        &self,
        connector: &str,
        topic: &str,
        timestamp: i64,
        now: i64,
    ) -> Option<String> {
        let retention = *self.by_topic.get(topic)?;
        if self.warned.get() || timestamp <= 0 || timestamp >= now.saturating_sub(retention) {
            return None;
        }
        self.warned.set(true);
        Some(format!(
            "{connector}: a record with timestamp {timestamp} (ms since the epoch, {} \
             ago) went to topic \"{topic}\", whose retention.ms ({retention}, {}) deletes \
             records older than that at the broker's next pass: it is written, and soon gone. \
             A timestamp that is a record or line number (a generator's, a file source's \
             default) is not a time: set `timestamp = \"now\"` on the sink or give the source \
             a timestamp field; for real, old times, raise the topic's retention.ms (said \
             once per sink subtask)",
            roughly(now - timestamp),
            roughly(retention),
        ))
    }
}

/// `ms` milliseconds in the largest unit that leaves at least two of it: "20416 days",
/// "3 hours", "5 minutes", "900 ms".
fn roughly(ms: i64) -> String {
    const MINUTE: i64 = 60_000;
    const HOUR: i64 = 60 * MINUTE;
    const DAY: i64 = 24 * HOUR;
    match ms {
        ms if ms >= 2 * DAY => format!("{} days", ms / DAY),
        ms if ms >= 2 * HOUR => format!("{} hours", ms / HOUR),
        ms if ms >= 2 * MINUTE => format!("{} minutes", ms / MINUTE),
        ms => format!("{ms} ms"),
    }
}

/// How long a topic with the config values `config` keeps a record by its timestamp, in ms:
/// its `retention.ms` when it deletes by time (`cleanup.policy` with `delete`, the default) and
/// that is not -1. `None` for a topic that keeps records whatever their time, or whose
/// `retention.ms` the broker did not report.
pub(crate) fn time_limit(config: &HashMap<String, String>) -> Option<i64> {
    let deletes = config
        .get("cleanup.policy")
        .is_none_or(|policy| policy.contains("delete"));
    let retention = config.get("retention.ms")?.parse::<i64>().ok()?;
    (deletes && retention >= 0).then_some(retention)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WEEK: i64 = 604_800_000;
    const NOW: i64 = 1_764_000_000_000;

    fn retention(topics: &[(&str, &[(&str, &str)])]) -> Retention {
        Retention::from_configs(topics.iter().map(|&(topic, configs)| {
            let configs = configs
                .iter()
                .map(|&(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            (topic.to_owned(), configs)
        }))
    }

    #[test]
    fn a_record_older_than_its_topics_retention_is_reported_once() {
        let week = WEEK.to_string();
        let r = retention(&[("t", &[("retention.ms", &week)])]);
        let before = r.stale_before(NOW).unwrap();
        assert_eq!(before, NOW - WEEK);
        // A day younger than the retention: kept.
        assert_eq!(r.check("sink", "t", NOW - WEEK + 86_400_000, NOW), None);
        let warning = r.check("sink", "t", 1000, NOW).unwrap();
        assert!(warning.contains("timestamp 1000"), "{warning}");
        assert!(warning.contains("20416 days ago"), "{warning}");
        assert!(
            warning.contains("retention.ms (604800000, 7 days)"),
            "{warning}"
        );
        assert_eq!(r.check("sink", "t", 1000, NOW), None, "said once");
        assert_eq!(
            r.stale_before(NOW),
            None,
            "nothing to check per record after"
        );
    }

    #[test]
    fn topics_that_keep_old_records_are_not_watched() {
        let week = WEEK.to_string();
        for configs in [
            &[("retention.ms", "-1")][..],
            &[("retention.ms", &week), ("cleanup.policy", "compact")],
            &[
                ("retention.ms", &week),
                ("message.timestamp.type", "LogAppendTime"),
            ],
        ] {
            let r = retention(&[("t", configs)]);
            assert_eq!(r.stale_before(NOW), None, "{configs:?}");
            assert_eq!(r.check("sink", "t", 1000, NOW), None, "{configs:?}");
        }
        let r = retention(&[(
            "t",
            &[
                ("retention.ms", &week),
                ("cleanup.policy", "compact,delete"),
            ],
        )]);
        assert_eq!(r.stale_before(NOW), Some(NOW - WEEK));
    }

    #[test]
    fn each_record_is_judged_by_its_own_topics_retention() {
        let (day, week) = (86_400_000_i64.to_string(), WEEK.to_string());
        let r = retention(&[
            ("short", &[("retention.ms", &day)]),
            ("long", &[("retention.ms", &week)]),
            ("forever", &[("retention.ms", "-1")]),
        ]);
        // Checked from the shortest retention on.
        assert_eq!(r.stale_before(NOW), Some(NOW - 86_400_000));
        let two_days_ago = NOW - 2 * 86_400_000;
        assert_eq!(r.check("sink", "long", two_days_ago, NOW), None);
        assert_eq!(r.check("sink", "forever", 1000, NOW), None);
        let warning = r.check("sink", "short", two_days_ago, NOW).unwrap();
        assert!(
            warning.contains(
                "2 days ago) went to topic \"short\", whose retention.ms (86400000, 24 hours)"
            ),
            "{warning}"
        );
    }
}
