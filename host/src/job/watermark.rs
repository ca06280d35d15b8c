//! A source's watermark strategy: the `watermark` table of a `[[source]]` (docs/JOB.md,
//! "Watermarks"; what a guest sees of watermarks is docs/ABI.md §15).
//!
//! Only the settings live here; the runtime makes the watermarks. Timestamps are
//! milliseconds. A source's **split** is the unit it reads in order: a Kafka partition, a
//! file, a generator subtask. Over each split the source tracks the largest timestamp seen,
//! `max`; the watermark it emits is `max − out_of_orderness − 1` (in milliseconds), the
//! minimum over its active splits, every [`WatermarkStrategy::interval`]. A split that
//! produced nothing for [`WatermarkStrategy::idle_timeout`] is idle and left out of that
//! minimum until it produces again. A source without a strategy emits no watermark but the
//! final one at the end of its input.

use std::time::Duration;

/// How long a split may produce nothing before it is idle and no longer holds the watermark
/// back, unless `idle_timeout` says otherwise: 10 s.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a source with a watermark strategy emits a watermark, unless `interval` says
/// otherwise: 200 ms (Flink's `pipeline.auto-watermark-interval`).
pub const DEFAULT_WATERMARK_INTERVAL: Duration = Duration::from_millis(200);

/// How a source makes watermarks: the validated `watermark` table of a `[[source]]`.
///
/// [`Default`] is the empty table, `watermark = {}`: no out-of-orderness, idle after
/// [`DEFAULT_IDLE_TIMEOUT`], a watermark every [`DEFAULT_WATERMARK_INTERVAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatermarkStrategy {
    /// `out_of_orderness`: how far behind the largest timestamp seen on its split a record
    /// may arrive and still be on time. The watermark is that largest timestamp minus this,
    /// minus 1 ms. At most [`MAX_DURATION`](super::MAX_DURATION); default zero.
    pub out_of_orderness: Duration,
    /// `idle_timeout`: a split that produced nothing for this long is idle, and left out of
    /// the source's watermark until it produces again, so an idle Kafka partition never
    /// stalls the job. `None` (`"off"`) keeps an idle split holding the watermark back
    /// (Flink's default). Above zero, at most [`MAX_DURATION`](super::MAX_DURATION); default
    /// [`DEFAULT_IDLE_TIMEOUT`].
    pub idle_timeout: Option<Duration>,
    /// `interval`: how often the source emits its watermark. Above zero, at most
    /// [`MAX_DURATION`](super::MAX_DURATION); default [`DEFAULT_WATERMARK_INTERVAL`].
    pub interval: Duration,
}

impl Default for WatermarkStrategy {
    fn default() -> Self {
        WatermarkStrategy {
            out_of_orderness: Duration::ZERO,
            idle_timeout: Some(DEFAULT_IDLE_TIMEOUT),
            interval: DEFAULT_WATERMARK_INTERVAL,
        }
    }
}
