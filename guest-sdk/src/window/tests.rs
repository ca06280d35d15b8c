//! The window semantics of docs/WINDOWS.md, through the harness and its emulated host.

use serde::{Deserialize, Serialize};

use super::*;
use crate::testing::{
    Harness, OwnedRecord, Step, assert_records_eq, assert_restore_preserves_steps, record,
};
use crate::{Context, Operator};

/// A count per key and window, as `start,end,count`; its config is a [`WindowSpec`].
struct Counted {
    windows: Windows<Reduce<u64>>,
}

fn count(n: &mut u64, _value: &[u8]) {
    *n += 1;
}

fn merge_counts(n: &mut u64, other: u64) {
    *n += other;
}

fn describe(window: Window, n: &u64) -> Vec<u8> {
    format!("{},{},{n}", window.start, window.end).into_bytes()
}

impl Operator for Counted {
    fn init(ctx: &Context) -> Result<Self> {
        let spec = ctx.config_str()?.parse()?;
        let windows = Windows::new(spec, Reduce::new(count, merge_counts, describe))?;
        Ok(Counted { windows })
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        self.windows.process(input, out)
    }

    fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
        self.windows.on_timers(timers, out)
    }
}

impl State for Counted {
    fn snapshot(&self) -> Result<Vec<u8>> {
        self.windows.snapshot()
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        self.windows.restore(bytes)
    }
}

/// Every value of a session, joined with `+`.
struct Joined {
    windows: Windows<FullWindow>,
}

fn join(window: Window, values: &[Vec<u8>]) -> Vec<u8> {
    let mut text = format!("{},{}:", window.start, window.end).into_bytes();
    text.extend_from_slice(&values.join(&b'+'));
    text
}

impl Operator for Joined {
    fn init(ctx: &Context) -> Result<Self> {
        let windows = Windows::new(ctx.config_str()?.parse()?, FullWindow::new(join))?;
        Ok(Joined { windows })
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        self.windows.process(input, out)
    }

    fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
        self.windows.on_timers(timers, out)
    }
}

impl State for Joined {
    fn snapshot(&self) -> Result<Vec<u8>> {
        self.windows.snapshot()
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        self.windows.restore(bytes)
    }
}

/// The mean of decimal values, through the accumulator trait; a value that is no number fails.
struct Mean;

#[derive(Default, Serialize, Deserialize)]
struct Sum {
    total: i64,
    n: i64,
}

impl Aggregate for Mean {
    type Acc = Sum;

    fn create(&self) -> Sum {
        Sum::default()
    }

    fn add(&self, acc: &mut Sum, record: &Record<'_>) -> Result<()> {
        acc.total += core::str::from_utf8(record.value)?.parse::<i64>()?;
        acc.n += 1;
        Ok(())
    }

    fn merge(&self, acc: &mut Sum, other: Sum) {
        acc.total += other.total;
        acc.n += other.n;
    }

    fn result(&self, _window: Window, acc: &Sum) -> Result<Vec<u8>> {
        Ok(format!("{}", acc.total / acc.n).into_bytes())
    }
}

struct Averaged {
    windows: Windows<Mean>,
}

impl Operator for Averaged {
    fn init(ctx: &Context) -> Result<Self> {
        let windows = Windows::new(ctx.config_str()?.parse()?, Mean)?;
        Ok(Averaged { windows })
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        self.windows.process(input, out)
    }

    fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
        self.windows.on_timers(timers, out)
    }
}

impl State for Averaged {
    fn snapshot(&self) -> Result<Vec<u8>> {
        self.windows.snapshot()
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<()> {
        self.windows.restore(bytes)
    }
}

fn harness<T: Operator + State>(config: &str) -> Harness<T> {
    Harness::new(Context::new("windows").with_config(config)).unwrap()
}

fn counted(config: &str) -> Harness<Counted> {
    harness(config)
}

#[test]
fn tumbling_windows_fire_at_end_minus_one_with_every_record_however_out_of_order() -> Result<()> {
    let mut h = counted("tumbling 1000");
    for (key, ts) in [
        ("a", 1500),
        ("b", 999),
        ("a", 1000),
        ("a", 200),
        ("a", 1999),
        ("b", 0),
    ] {
        assert!(
            h.push(key, "", ts)?.is_empty(),
            "nothing before the watermark"
        );
    }
    assert!(h.advance_watermark(998)?.is_empty());
    // Ties at one timestamp come out in key order.
    assert_records_eq(
        &h.advance_watermark(999)?,
        &[record("a", "0,1000,1", 999), record("b", "0,1000,2", 999)],
    );
    assert_records_eq(
        &h.advance_watermark(5000)?,
        &[record("a", "1000,2000,3", 1999)],
    );
    assert_eq!(
        h.operator().windows.open_windows(),
        0,
        "fired windows are dropped"
    );
    assert!(h.pending_timers(TimeDomain::Event).is_empty());
    assert!(h.finish()?.is_empty());
    Ok(())
}

#[test]
fn negative_timestamps_align_by_floor_division() -> Result<()> {
    let mut h = counted("tumbling 1000");
    h.push("k", "", -1)?;
    h.push("k", "", -1000)?;
    h.push("k", "", -1001)?;
    assert_records_eq(
        &h.finish()?,
        &[
            record("k", "-2000,-1000,1", -1001),
            record("k", "-1000,0,2", -1),
        ],
    );
    Ok(())
}

#[test]
fn sliding_windows_take_each_record_into_every_window_containing_it() -> Result<()> {
    let mut h = counted("sliding 1000 500");
    h.push("k", "", 700)?; // in [0, 1000) and [500, 1500)
    h.push("k", "", 1200)?; // in [500, 1500) and [1000, 2000)
    assert_records_eq(
        &h.finish()?,
        &[
            record("k", "0,1000,1", 999),
            record("k", "500,1500,2", 1499),
            record("k", "1000,2000,1", 1999),
        ],
    );
    Ok(())
}

#[test]
fn a_record_late_for_some_sliding_windows_still_counts_in_the_others() -> Result<()> {
    let mut h = counted("sliding 1000 500");
    h.advance_watermark(1100)?;
    // 700 is in [0, 1000), fired at 999, and [500, 1500), still open.
    assert!(h.push("k", "", 700)?.is_empty());
    assert_eq!(h.operator().windows.late_records(), 0);
    assert_records_eq(
        &h.advance_watermark(1499)?,
        &[record("k", "500,1500,1", 1499)],
    );
    Ok(())
}

#[test]
fn lateness_keeps_fired_windows_for_updates_then_drops_them() -> Result<()> {
    let mut h = counted("tumbling 1000 lateness 200 late-output late");
    h.push("k", "", 100)?;
    assert_records_eq(&h.advance_watermark(999)?, &[record("k", "0,1000,1", 999)]);
    // Late, but within the lateness: counted, and the updated result goes out at once.
    assert_records_eq(&h.push("k", "", 500)?, &[record("k", "0,1000,2", 999)]);
    assert_records_eq(&h.push("k", "", 0)?, &[record("k", "0,1000,3", 999)]);
    assert_eq!(h.operator().windows.open_windows(), 1);
    // The lateness of [0, 1000) is over at 999 + 200: its state is dropped, and a record for
    // it is too late.
    assert!(h.advance_watermark(1199)?.is_empty());
    assert_eq!(h.operator().windows.open_windows(), 0);
    assert!(h.push("k", "late one", 999)?.is_empty());
    assert_records_eq(h.side_output("late"), &[record("k", "late one", 999)]);
    assert_eq!(h.operator().windows.late_records(), 1);
    // A window that never had a record can be opened late, within the lateness.
    h.advance_watermark(1999)?;
    assert_records_eq(&h.push("j", "", 1998)?, &[record("j", "1000,2000,1", 1999)]);
    assert_eq!(h.operator().windows.open_windows(), 1);
    assert!(h.advance_watermark(2199)?.is_empty());
    assert_eq!(h.operator().windows.open_windows(), 0);
    assert!(h.pending_timers(TimeDomain::Event).is_empty());
    Ok(())
}

#[test]
fn without_a_late_output_records_too_late_are_dropped_and_counted() -> Result<()> {
    let mut h = counted("tumbling 1000");
    h.advance_watermark(999)?;
    // Without lateness a window is gone once it fires: 999 is too late, 1000 is not.
    assert!(h.push("k", "", 999)?.is_empty());
    assert!(h.push("k", "", 1000)?.is_empty());
    assert_eq!(h.operator().windows.late_records(), 1);
    assert!(h.side_output("late").is_empty());
    assert_records_eq(&h.finish()?, &[record("k", "1000,2000,1", 1999)]);
    Ok(())
}

#[test]
fn sessions_merge_when_a_record_bridges_them_leaving_one_timer() -> Result<()> {
    let mut h = counted("session 100");
    h.push("k", "", 0)?; // [0, 100)
    h.push("k", "", 250)?; // [250, 350)
    h.push("j", "", 120)?; // another key: never merges with `k`
    assert_eq!(h.pending_timers(TimeDomain::Event).len(), 3);
    h.push("k", "", 160)?; // [160, 260) overlaps [250, 350) only
    h.push("k", "", 100)?; // [100, 200) touches [0, 100) and overlaps [160, 350)
    assert_eq!(h.operator().windows.open_windows(), 2);
    let timers: Vec<(i64, Vec<u8>)> = (h.pending_timers(TimeDomain::Event).iter())
        .map(|(ts, key)| (ts, key.to_vec()))
        .collect();
    assert_eq!(timers, [(219, b"\0j".to_vec()), (349, b"\0k".to_vec())]);
    assert_records_eq(
        &h.finish()?,
        &[record("j", "120,220,1", 219), record("k", "0,350,4", 349)],
    );
    Ok(())
}

#[test]
fn touching_sessions_merge_and_full_window_values_keep_their_order() -> Result<()> {
    let mut h = harness::<Joined>("session 10");
    h.push("k", "c", 20)?; // [20, 30)
    h.push("k", "a", 0)?; // [0, 10)
    h.push("k", "b", 10)?; // [10, 20): touches both
    h.push("k", "d", 45)?; // [45, 55): 15 after the last session ends
    assert_records_eq(
        &h.finish()?,
        &[record("k", "0,30:a+c+b", 29), record("k", "45,55:d", 54)],
    );
    Ok(())
}

#[test]
fn a_late_record_within_lateness_merges_into_a_fired_session() -> Result<()> {
    let mut h = counted("session 100 lateness 500 late-output late");
    h.push("k", "", 1000)?; // [1000, 1100)
    assert_records_eq(
        &h.advance_watermark(1099)?,
        &[record("k", "1000,1100,1", 1099)],
    );
    // [950, 1050) overlaps the fired session: the merged one is late too, so it goes out now.
    assert_records_eq(&h.push("k", "", 950)?, &[record("k", "950,1100,2", 1099)]);
    // [1080, 1180) makes it end after the watermark: it fires again when its end comes.
    assert!(h.push("k", "", 1080)?.is_empty());
    assert_records_eq(
        &h.advance_watermark(1300)?,
        &[record("k", "950,1180,3", 1179)],
    );
    let timers: Vec<i64> = h
        .pending_timers(TimeDomain::Event)
        .iter()
        .map(|(ts, _)| ts)
        .collect();
    assert_eq!(timers, [1679], "only the merged session's clean-up is left");
    // Alone, [0, 100) is far too late.
    assert!(h.push("k", "", 0)?.is_empty());
    assert_records_eq(h.side_output("late"), &[record("k", "", 0)]);
    h.advance_watermark(1679)?;
    assert_eq!(h.operator().windows.open_windows(), 0);
    Ok(())
}

#[test]
fn the_accumulator_trait_adds_merges_and_may_fail() -> Result<()> {
    let mut h = harness::<Averaged>("session 10");
    h.push("k", "4", 0)?;
    h.push("k", "8", 20)?;
    h.push("k", "9", 10)?; // merges the two: (4 + 8 + 9) / 3
    assert_records_eq(&h.advance_watermark(100)?, &[record("k", "7", 29)]);
    let err = h.push("k", "x", 200).unwrap_err();
    assert_eq!(err.message(), "invalid digit found in string");
    Ok(())
}

#[test]
fn restoring_anywhere_gives_the_output_of_an_uninterrupted_run() {
    let records = [
        ("a", 10),
        ("b", 420),
        ("a", 990),
        ("a", 30),
        ("b", 1010),
        ("a", 1600),
        ("b", 300),
        ("a", 1200),
        ("c", 2500),
        ("a", 1720),
        ("a", 100),
    ];
    let mut steps = Vec::new();
    for (i, (key, ts)) in records.iter().enumerate() {
        steps.push(Step::Record(record(key, "", *ts)));
        if i % 3 == 2 {
            steps.push(Step::Watermark(*ts - 200));
        }
    }
    let configs = [
        "tumbling 500",
        "sliding 1000 300 lateness 300 late-output late",
        "session 250 lateness 400 late-output late",
        "session 100",
    ];
    for config in configs {
        let context = Context::new("windows").with_config(config);
        for every in 1..=4 {
            assert_restore_preserves_steps::<Counted>(&context, &steps, every);
        }
    }
    // The run does exercise lateness and late output.
    let mut h = counted(configs[2]);
    for step in &steps {
        h.step(step).unwrap();
    }
    h.finish().unwrap();
    let late = h.side_output("late").len();
    assert!(late > 0, "no record was too late");
    assert_eq!(h.operator().windows.late_records(), late as u64);
}

#[test]
fn window_state_survives_a_restore_and_other_windows_refuse_it() -> Result<()> {
    let mut h = counted("tumbling 1000 lateness 100");
    h.push("k", "", 5)?;
    h.push("k", "", 2000)?;
    h.advance_watermark(999)?;
    h.push("z", "", 10_000)?;
    h.push("z", "", -500)?; // [-1000, 0) was over at -1 + 100: too late, counted
    h.snapshot_and_restore()?;
    assert_eq!(h.operator().windows.open_windows(), 3);
    assert_eq!(h.operator().windows.late_records(), 1);
    assert_records_eq(&h.push("k", "", 6)?, &[record("k", "0,1000,2", 999)]);

    let snapshot = h.snapshot()?;
    for other in [
        "tumbling 2000 lateness 100",
        "tumbling 1000",
        "session 1000 lateness 100",
    ] {
        let mut fresh = counted(other);
        let err = fresh.restore_into_fresh(&snapshot).unwrap_err();
        assert!(
            err.message().starts_with(
                "the snapshot holds windows `tumbling 1000 lateness 100`, but these are"
            ),
            "{err}"
        );
    }
    // The late output is routing, not state: it may change.
    counted("tumbling 1000 lateness 100 late-output l").restore_into_fresh(&snapshot)?;
    Ok(())
}

#[test]
fn timestamps_at_the_ends_of_time_do_not_overflow() -> Result<()> {
    let mut h = counted("sliding 1000 400");
    h.push("k", "", i64::MAX)?;
    h.push("k", "", i64::MIN)?;
    let out = h.finish()?;
    let values: Vec<String> = out
        .iter()
        .map(|r| String::from_utf8(r.value.clone()).unwrap())
        .collect();
    let min = i64::MIN;
    let max = i64::MAX;
    // The windows that would start before i64::MIN start there; the two windows that would
    // end after i64::MAX end there, and so are one (the earlier-starting one).
    let first = (i128::from(min) - 1000).div_euclid(400) * 400 + 400;
    assert_eq!(
        values,
        [
            format!("{min},{},1", first + 1000),
            format!("{min},{},1", first + 1400),
            format!("{min},{},1", first + 1800),
            format!(
                "{},{max},1",
                (i128::from(max) - 1000).div_euclid(400) * 400 + 400
            ),
        ]
    );
    Ok(())
}

#[test]
fn specs_read_back_what_they_display_and_say_what_is_wrong() {
    for text in [
        "tumbling 1000",
        "sliding 1000 500 lateness 20",
        "session 300 late-output late",
        "tumbling 5 lateness 1 late-output x",
    ] {
        let spec: WindowSpec = text.parse().unwrap();
        assert_eq!(spec.to_string(), text);
    }
    let spec: WindowSpec = "  session 7\tlate-output out lateness 3 ".parse().unwrap();
    assert_eq!(spec.assigner(), Assigner::Session { gap: 7 });
    assert_eq!((spec.lateness(), spec.late_output()), (3, Some("out")));
    let errors = [
        ("", "no windows given"),
        ("hopping 5", "unknown windows `hopping`"),
        ("tumbling", "`tumbling` needs a size in milliseconds: write"),
        (
            "tumbling 1s",
            "`tumbling` needs a size in milliseconds, not `1s`",
        ),
        ("sliding 10", "`sliding` needs a slide"),
        (
            "sliding 10 20",
            "`sliding 10 20`: the slide must be positive and at most the size",
        ),
        (
            "tumbling 0",
            "`tumbling 0`: the window size must be positive",
        ),
        (
            "session -5",
            "`session -5`: the session gap must be positive",
        ),
        (
            "tumbling 5 lateness -1",
            "the allowed lateness -1 must not be negative",
        ),
        (
            "tumbling 5 lateness 1 lateness 2",
            "`lateness` is given twice",
        ),
        (
            "tumbling 5 late-output",
            "`late-output` needs the side output's name",
        ),
        ("tumbling 5 every 2", "unexpected `every`"),
    ];
    for (text, message) in errors {
        let err = text.parse::<WindowSpec>().unwrap_err();
        assert!(err.message().starts_with(message), "{text:?}: {err}");
    }
    let long = WindowSpec::tumbling(1).with_late_output("n".repeat(256));
    assert!(
        long.check()
            .unwrap_err()
            .message()
            .contains("1 to 255 bytes")
    );
}

#[test]
fn window_timers_ignore_timers_the_windows_did_not_set() -> Result<()> {
    /// Counted, plus a timer of its own on every record.
    struct Mixed(Counted);

    impl Operator for Mixed {
        fn init(ctx: &Context) -> Result<Self> {
            Ok(Mixed(Counted::init(ctx)?))
        }

        fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
            for record in input {
                out.set_timer(TimeDomain::Event, record.timestamp, b"mine");
                out.set_timer(TimeDomain::Processing, 5, b"\0k");
            }
            self.0.process(input, out)
        }

        fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
            self.0.on_timers(timers, out)
        }
    }

    impl State for Mixed {
        fn snapshot(&self) -> Result<Vec<u8>> {
            self.0.snapshot()
        }

        fn restore(&mut self, bytes: &[u8]) -> Result<()> {
            self.0.restore(bytes)
        }
    }

    let mut h = harness::<Mixed>("tumbling 10");
    h.push("k", "", 9)?;
    assert!(h.advance_processing_time(5)?.is_empty());
    let out: Vec<OwnedRecord> = h.advance_watermark(100)?;
    assert_records_eq(&out, &[record("k", "0,10,1", 9)]);
    Ok(())
}
