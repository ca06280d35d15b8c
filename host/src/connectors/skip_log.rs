//! The log of the input a source skips under `on_error = "skip"` (a file source's malformed
//! lines, a Kafka source's records without a mapped header): every skip is counted in the
//! task's `records_skipped` by the source; here they are told without flooding the log.

use std::fmt::{Display, Write as _};
use std::time::{Duration, Instant};

/// Skipped inputs logged one by one, per attempt; after them, summaries.
pub(crate) const LOGGED_SKIPS: u64 = 10;
/// At most one summary of skipped inputs this often.
pub(crate) const SKIP_SUMMARY_EVERY: Duration = Duration::from_secs(10);

/// Logs skipped inputs: the first [`LOGGED_SKIPS`] one by one, then a summary at most every
/// [`SKIP_SUMMARY_EVERY`] and when the source [`flush`](SkipLog::flush)es (at its end).
///
/// Lines read `<source>: skipped <item>: <problem>`, then `<source>: 10 <items> skipped;
/// further ones are summarised…`, then `<source>: skipped <n> more <items>, the last <last>:
/// <problem>`. The last skip waiting for a summary is kept in a buffer reused from skip to
/// skip.
#[derive(Debug)]
pub(crate) struct SkipLog {
    /// Who skips: `file source`, `kafka source "in"`.
    source: String,
    /// What it skips, in the plural and with where from: `malformed lines of /in/a.jsonl`.
    items: String,
    /// Skipped inputs logged one by one.
    logged: u64,
    /// Skipped inputs since the last summary.
    pending: u64,
    /// The last of them and its problem (`line 37: not JSON`), when `pending > 0`.
    last: String,
    last_summary: Option<Instant>,
}

impl SkipLog {
    /// A log for `source` (`file source`) skipping `items` (`malformed lines of /in/a.jsonl`).
    pub(crate) fn new(source: impl Into<String>, items: impl Into<String>) -> Self {
        SkipLog {
            source: source.into(),
            items: items.into(),
            logged: 0,
            pending: 0,
            last: String::new(),
            last_summary: None,
        }
    }

    /// Forgets what was logged, for a source that starts over (a restore): its first skips
    /// are logged one by one again.
    pub(crate) fn reset(&mut self) {
        self.logged = 0;
        self.pending = 0;
        self.last.clear();
        self.last_summary = None;
    }

    /// One input skipped: `item` says which and where when it is logged alone (`malformed
    /// line 37 of /in/a.jsonl`), `last` when a summary names it as the last (`line 37`).
    pub(crate) fn skipped(
        &mut self,
        item: impl Display,
        last: impl Display,
        problem: impl Display,
    ) {
        if self.logged < LOGGED_SKIPS {
            self.logged += 1;
            tracing::warn!("{}: skipped {item}: {problem}", self.source);
            if self.logged == LOGGED_SKIPS {
                tracing::warn!(
                    "{}: {LOGGED_SKIPS} {} skipped; further ones are summarised at most every \
                     {}s (the count is the metric records_skipped)",
                    self.source,
                    self.items,
                    SKIP_SUMMARY_EVERY.as_secs()
                );
                self.last_summary = Some(Instant::now());
            }
            return;
        }
        self.pending += 1;
        self.last.clear();
        // Writing to a String cannot fail.
        let _ = write!(self.last, "{last}: {problem}");
        if self
            .last_summary
            .is_none_or(|at| at.elapsed() >= SKIP_SUMMARY_EVERY)
        {
            self.flush();
        }
    }

    /// Logs the summary of skipped inputs not yet logged, if any.
    pub(crate) fn flush(&mut self) {
        if self.pending > 0 {
            tracing::warn!(
                "{}: skipped {} more {}, the last {}",
                self.source,
                self.pending,
                self.items,
                self.last
            );
            self.pending = 0;
            self.last.clear();
            self.last_summary = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_skips_are_logged_ten_by_ten_then_summarised() {
        let mut log = SkipLog::new("file source", "malformed lines of /in/bad.jsonl");
        for line in 1..=1000 {
            log.skipped(
                format_args!("malformed line {line} of /in/bad.jsonl"),
                format_args!("line {line}"),
                "not JSON",
            );
        }
        // Ten one by one; the other 990 wait for a summary (the last one was just now).
        assert_eq!(log.logged, LOGGED_SKIPS);
        assert_eq!(log.pending, 990);
        assert_eq!(log.last, "line 1000: not JSON");
        // At the end of the input, or once the summary interval passed, they are summarised.
        log.flush();
        assert_eq!((log.pending, log.last.as_str()), (0, ""));
        log.last_summary = Some(Instant::now() - SKIP_SUMMARY_EVERY);
        log.skipped("malformed line 1001", "line 1001", "not JSON");
        assert_eq!(
            (log.pending, log.last.as_str()),
            (0, ""),
            "summarised at once"
        );
        log.skipped("malformed line 1002", "line 1002", "not JSON");
        assert_eq!(log.pending, 1, "not again within the interval");
    }
}
