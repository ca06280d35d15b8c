//! `window`: a keyed count per event-time window — tumbling, sliding or session.
//!
//! The operator's config chooses the windows, in the grammar of the SDK's
//! [`WindowSpec`](weir_sdk::window::WindowSpec): `tumbling SIZE`, `sliding SIZE SLIDE` or
//! `session GAP`, then optionally `lateness MS` and `late-output NAME`, every time in
//! milliseconds — for example `tumbling 1000`, `sliding 1000 500`, `session 300`, or
//! `tumbling 1000 lateness 200 late-output late`.
//!
//! For every window of every key, once the watermark reaches the window's `end - 1`, it emits
//! one record with
//!
//! - the key of the window's records,
//! - as value, `start,end,count` in decimal ASCII (`start` and `end` may be negative), where
//!   `[start, end)` is the window and `count` the number of its records,
//! - the timestamp `end - 1`.
//!
//! With a lateness, a record that arrives after its window fired but at most that long after
//! (the watermark before `end - 1 + lateness`) is counted, and the updated record goes out at
//! once. A record too late for every window it belongs to goes to the late output unchanged,
//! when there is one, and is dropped otherwise; either way it is counted.
//!
//! The semantics — which windows a record is in, when they fire, sessions merging — are those
//! of `docs/WINDOWS.md`. The whole operator is the SDK's `window` module plus the format of the
//! value: it sets no timer and checkpoints no state of its own.

use weir_sdk::window::{Reduce, Window, Windows};
use weir_sdk::{Batch, Context, Error, FiredTimers, Operator, Output, Result, State};

/// The `window` operator.
pub struct WindowCount {
    /// The windows of every key, each counting its records.
    windows: Windows<Reduce<u64>>,
}

impl WindowCount {
    /// How many records came too late for every window they belong to.
    pub fn late_records(&self) -> u64 {
        self.windows.late_records()
    }
}

/// Counts a record into a window.
fn count(n: &mut u64, _value: &[u8]) {
    *n += 1;
}

/// Merges the counts of two sessions.
fn merge(n: &mut u64, other: u64) {
    *n += other;
}

/// The value of a window's record: `start,end,count`.
fn describe(window: Window, n: &u64) -> Vec<u8> {
    format!("{},{},{n}", window.start, window.end).into_bytes()
}

impl Operator for WindowCount {
    fn init(ctx: &Context) -> Result<Self> {
        let spec = ctx.config_str()?.parse().map_err(|e: Error| {
            Error::msg(format!("the config of operator `{}`: {e}", ctx.operator()))
        })?;
        Ok(WindowCount {
            windows: Windows::new(spec, Reduce::new(count, merge, describe))?,
        })
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        self.windows.process(input, out)
    }

    fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
        self.windows.on_timers(timers, out)
    }
}

/// The state is the windows'.
impl State for WindowCount {
    fn snapshot(&self) -> Result<Vec<u8>> {
        self.windows.snapshot()
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        self.windows.restore(bytes)
    }
}

weir_sdk::export!(WindowCount);

#[cfg(test)]
mod tests {
    use weir_sdk::TimeDomain;
    use weir_sdk::testing::{
        Harness, OwnedRecord, Step, assert_records_eq, assert_rescale_preserves_steps,
        assert_restore_preserves_steps, record,
    };

    use super::*;

    fn harness(config: &str) -> Harness<WindowCount> {
        Harness::new(Context::new("windows").with_config(config)).unwrap()
    }

    #[test]
    fn counts_out_of_order_records_per_key_and_tumbling_window() -> Result<()> {
        let mut h = harness("tumbling 1000");
        let input = [
            record("b", "", 1700),
            record("a", "", 300),
            record("a", "", 2100),
            record("a", "", 999),
            record("b", "", 1000),
            record("a", "", 0),
        ];
        assert!(h.push_on(0, &input)?.is_empty());
        assert_records_eq(&h.advance_watermark(1500)?, &[record("a", "0,1000,3", 999)]);
        assert_records_eq(
            &h.finish()?,
            &[
                record("b", "1000,2000,2", 1999),
                record("a", "2000,3000,1", 2999),
            ],
        );
        Ok(())
    }

    #[test]
    fn sliding_windows_count_a_record_in_each_window_it_falls_in() -> Result<()> {
        let mut h = harness("sliding 1000 500");
        h.push("k", "", 250)?;
        h.push("k", "", 750)?;
        assert_records_eq(
            &h.finish()?,
            &[
                record("k", "-500,500,1", 499),
                record("k", "0,1000,2", 999),
                record("k", "500,1500,1", 1499),
            ],
        );
        Ok(())
    }

    #[test]
    fn a_record_later_than_the_lateness_goes_to_the_late_output() -> Result<()> {
        let mut h = harness("tumbling 1000 lateness 200 late-output late");
        h.push("k", "first", 10)?;
        h.advance_watermark(1199)?;
        assert!(h.push("k", "too late", 20)?.is_empty());
        assert_records_eq(h.side_output("late"), &[record("k", "too late", 20)]);
        assert_eq!(h.operator().late_records(), 1);
        assert!(
            h.finish()?.is_empty(),
            "the window fired at 999 and is gone"
        );
        Ok(())
    }

    #[test]
    fn without_a_late_output_late_records_are_only_counted() -> Result<()> {
        let mut h = harness("tumbling 1000");
        h.advance_watermark(5000)?;
        assert!(h.push("k", "", 20)?.is_empty());
        assert_eq!(h.operator().late_records(), 1);
        assert!(h.side_output("late").is_empty());
        Ok(())
    }

    #[test]
    fn a_late_record_within_the_lateness_updates_the_result() -> Result<()> {
        let mut h = harness("tumbling 1000 lateness 200 late-output late");
        h.push("k", "", 10)?;
        h.push("k", "", 20)?;
        assert_records_eq(&h.advance_watermark(1100)?, &[record("k", "0,1000,2", 999)]);
        assert_records_eq(&h.push("k", "", 30)?, &[record("k", "0,1000,3", 999)]);
        assert!(h.side_output("late").is_empty());
        assert_eq!(h.operator().late_records(), 0);
        Ok(())
    }

    #[test]
    fn sessions_merge_when_a_record_fills_the_gap() -> Result<()> {
        let mut h = harness("session 300");
        h.push("k", "", 1000)?; // [1000, 1300)
        h.push("k", "", 1500)?; // [1500, 1800)
        h.push("j", "", 1200)?; // its own key, its own session
        assert_eq!(h.pending_timers(TimeDomain::Event).len(), 3);
        h.push("k", "", 1250)?; // [1250, 1550) overlaps both sessions of `k`
        assert_eq!(h.pending_timers(TimeDomain::Event).len(), 2);
        assert_records_eq(
            &h.advance_watermark(1600)?,
            &[record("j", "1200,1500,1", 1499)],
        );
        assert_records_eq(&h.finish()?, &[record("k", "1000,1800,3", 1799)]);
        Ok(())
    }

    #[test]
    fn a_bad_config_names_the_operator_and_the_grammar() {
        for (config, message) in [
            (
                "",
                "the config of operator `windows`: no windows given: write `tumbling SIZE`",
            ),
            (
                "tumbling ten",
                "the config of operator `windows`: `tumbling` needs a size",
            ),
            (
                "sliding 100 200",
                "the slide must be positive and at most the size",
            ),
            ("session 0", "the session gap must be positive"),
        ] {
            let err = Harness::<WindowCount>::new(Context::new("windows").with_config(config))
                .err()
                .unwrap();
            assert!(err.message().contains(message), "{config:?}: {err}");
        }
    }

    /// Records of three keys, out of order, some late, with the watermark 400 ms behind the latest.
    fn steps() -> Vec<Step> {
        let (mut steps, mut watermark) = (Vec::new(), i64::MIN);
        let times = [
            120, 940, 30, 1010, 1480, 700, 2100, 1300, 2600, 1990, 150, 3300, 2950, 3800, 2000,
        ];
        for (i, ts) in times.into_iter().enumerate() {
            let key = ["a", "b", "c"][i % 3];
            steps.push(Step::Record(record(key, "", ts)));
            // A source's watermark: the latest timestamp seen, less 400, never moving back.
            watermark = watermark.max(ts - 400);
            if i % 2 == 1 {
                steps.push(Step::Watermark(watermark));
            }
        }
        steps
    }

    #[test]
    fn rescaling_in_the_middle_keeps_every_keys_windows_and_timers() {
        // Many keys, so that each subtask holds some, and windows open across the rescale.
        let mut steps = Vec::new();
        for i in 0..240i64 {
            let ts = (i * 37) % 3000 + i * 5;
            steps.push(Step::Record(record(format!("k{}", i % 17), "", ts)));
            if i % 10 == 9 {
                steps.push(Step::Watermark(i * 5 + 2000));
            }
        }
        for config in [
            "tumbling 1000 lateness 200 late-output late",
            "sliding 1000 500 late-output late",
            "session 300 lateness 300 late-output late",
        ] {
            let context = Context::new("windows").with_config(config);
            for (from, to) in [(2, 1), (2, 3), (3, 4), (1, 2)] {
                assert_rescale_preserves_steps::<WindowCount>(&context, &steps, from, to);
            }
        }
    }

    #[test]
    fn restoring_in_the_middle_gives_the_output_of_an_uninterrupted_run() -> Result<()> {
        let configs = [
            "tumbling 1000 lateness 200 late-output late",
            "sliding 1000 500 late-output late",
            "session 300 lateness 300 late-output late",
        ];
        let steps = steps();
        for config in configs {
            let context = Context::new("windows").with_config(config);
            for every in [1, 2, 5] {
                assert_restore_preserves_steps::<WindowCount>(&context, &steps, every);
            }

            // Once by hand: a restore halfway, then the rest, against a straight run.
            let run = |restore_at: Option<usize>| -> Result<(Vec<OwnedRecord>, Vec<OwnedRecord>)> {
                let mut h = Harness::<WindowCount>::new(context.clone())?;
                let mut out = Vec::new();
                for (i, step) in steps.iter().enumerate() {
                    if restore_at == Some(i) {
                        h.snapshot_and_restore()?;
                    }
                    out.extend(h.step(step)?);
                }
                out.extend(h.finish()?);
                Ok((out, h.side_output("late").to_vec()))
            };
            let (straight, straight_late) = run(None)?;
            let (restored, restored_late) = run(Some(steps.len() / 2))?;
            assert_records_eq(&restored, &straight);
            assert_records_eq(&restored_late, &straight_late);
            assert!(
                !straight.is_empty() && !straight_late.is_empty(),
                "{config}"
            );
        }
        Ok(())
    }
}
