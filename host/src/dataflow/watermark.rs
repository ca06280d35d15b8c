//! Watermarks in the dataflow (`docs/ABI.md` §15, docs/ARCHITECTURE.md): what a source
//! derives from the timestamps it reads ([`SourceClock`]) and how a task combines the
//! watermarks of its inputs into its own ([`InputWatermarks`]).
//!
//! # Why these are two small structs
//!
//! The rules are few but easy to get subtly wrong, and a wrong watermark does not fail: it
//! fires windows early (records become late that were not) or never (a job that emits nothing).
//! So each rule lives in a synchronous struct with no channels, threads or clock of its own —
//! time comes in as arguments — tested on its own; the task loops only feed them and forward
//! what they return. (Flink's `StatusWatermarkValve` and its `WatermarkGenerator`s play these
//! roles there.)
//!
//! # Rules
//!
//! - A watermark `W` promises no more records with a timestamp at or before `W`.
//! - A source tracks each of its **splits** (a Kafka partition, the file, the generator
//!   subtask): the largest timestamp read from it and whether it read anything lately. Its
//!   watermark is the minimum over the splits that are not idle of `max − out_of_orderness − 1`;
//!   a split that read nothing for `idle_timeout` is idle and left out until it reads again;
//!   when every split is idle the source says so ([`Watermark::Idle`]) instead of holding
//!   everyone back. Whether a split is idle is part of the source's checkpoint: a restored
//!   source does not wait `idle_timeout` again for a split that was idle before.
//! - A task's watermark is the minimum over its inputs that are neither idle nor ended, and
//!   never moves back. When every such input is idle the task is idle downstream too; when an
//!   input becomes active again the task announces its watermark again.
//! - When every input (or split) is idle, none will move before it is active again, so the
//!   highest watermark among them holds: the task (source) advances to it, then says it is
//!   idle. Otherwise the order in which they fell silent would decide the watermark — one that
//!   went idle while another, silent one had no watermark yet would never count, and the
//!   windows it closed would never fire. (Flink's `StatusWatermarkValve` flushes the same way.)
//! - A source or task never sends a watermark lower than one it sent.

use std::time::{Duration, Instant};

use weir_abi::time::NO_WATERMARK;

use crate::job::WatermarkStrategy;
use crate::state::time::SplitTime;

/// A watermark as it flows on a channel, in band with the records and barriers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Watermark {
    /// No record at or before this timestamp will follow on this channel.
    At(i64),
    /// The sender is idle: leave this channel out of the minimum until it sends `At` again.
    Idle,
}

/// What a task must do after its inputs' watermarks changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WatermarkChange {
    /// Its watermark advanced to this: fire its timers, then forward `At`.
    Advance(i64),
    /// Every input still running is idle: forward `Idle`.
    Idle,
    /// Every input still running is idle, and the highest of their watermarks is past the
    /// task's: advance to it as [`Advance`](Self::Advance) does, then forward `Idle`.
    AdvanceIdle(i64),
    /// It was idle and an input is active again: forward `At` with its (unchanged) watermark.
    Active(i64),
}

/// One input's watermark, as a task keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct InputClock {
    /// The highest watermark the input sent; [`NO_WATERMARK`] before the first.
    pub watermark: i64,
    /// The input said it is idle and has not sent a watermark since.
    pub idle: bool,
    /// The input ended: it is out of the minimum for good.
    pub ended: bool,
}

impl Default for InputClock {
    fn default() -> Self {
        InputClock {
            watermark: NO_WATERMARK,
            idle: false,
            ended: false,
        }
    }
}

/// What a task or a source last told downstream: its watermark and whether it said it is
/// idle. Both follow one rule from the minimum over what is not idle (see
/// [`update`](Self::update)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Announced {
    /// The highest watermark announced; [`NO_WATERMARK`] before the first.
    watermark: i64,
    /// Whether the last announcement was idleness.
    idle: bool,
}

impl Announced {
    /// Nothing announced yet.
    const NONE: Announced = Announced {
        watermark: NO_WATERMARK,
        idle: false,
    };

    /// The minimum over the inputs (or splits) that are not idle is now `min`, `None` when all
    /// are: what to announce. An advance when it is later than the watermark; idleness once;
    /// after idleness, the unchanged watermark again (when there is one).
    fn update(&mut self, min: Option<i64>) -> Option<WatermarkChange> {
        let Some(min) = min else {
            if self.idle {
                return None;
            }
            self.idle = true;
            return Some(WatermarkChange::Idle);
        };
        let was_idle = std::mem::replace(&mut self.idle, false);
        if min > self.watermark {
            self.watermark = min;
            return Some(WatermarkChange::Advance(min));
        }
        (was_idle && self.watermark != NO_WATERMARK)
            .then_some(WatermarkChange::Active(self.watermark))
    }
}

/// The watermarks of a task's inputs and the task's own watermark (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct InputWatermarks {
    inputs: Vec<InputClock>,
    /// The task's watermark, and whether it last told downstream it is idle.
    announced: Announced,
}

impl InputWatermarks {
    /// The clocks of `inputs` inputs, none heard from yet.
    pub(crate) fn new(inputs: usize) -> Self {
        InputWatermarks {
            inputs: vec![InputClock::default(); inputs],
            announced: Announced::NONE,
        }
    }

    /// The clocks a checkpoint kept: the task's watermark and its inputs' (their number must
    /// be the task's; otherwise only the task's watermark is kept).
    pub(crate) fn restored(inputs: usize, current: i64, clocks: &[InputClock]) -> Self {
        let mut restored = InputWatermarks::new(inputs);
        if clocks.len() == inputs {
            restored.inputs = clocks.to_vec();
        }
        restored.announced.watermark = current;
        restored
    }

    /// The task's watermark: [`NO_WATERMARK`] before the first.
    pub(crate) fn current(&self) -> i64 {
        self.announced.watermark
    }

    /// Every input's clock, in input order.
    pub(crate) fn inputs(&self) -> &[InputClock] {
        &self.inputs
    }

    /// `watermark` arrived on `input`.
    pub(crate) fn on_watermark(
        &mut self,
        input: usize,
        watermark: Watermark,
    ) -> Option<WatermarkChange> {
        let clock = self.inputs.get_mut(input)?;
        match watermark {
            Watermark::At(w) => {
                clock.idle = false;
                clock.watermark = clock.watermark.max(w);
            }
            Watermark::Idle => clock.idle = true,
        }
        self.recompute()
    }

    /// `input` ended. When every input has, the task advances to the end of time itself: this
    /// returns nothing then.
    pub(crate) fn on_end(&mut self, input: usize) -> Option<WatermarkChange> {
        self.inputs.get_mut(input)?.ended = true;
        self.recompute()
    }

    /// Marks the task's watermark as `watermark` (the end of time, at end of input).
    pub(crate) fn advance_to(&mut self, watermark: i64) {
        self.announced.watermark = self.announced.watermark.max(watermark);
    }

    fn recompute(&mut self) -> Option<WatermarkChange> {
        let mut running = self.inputs.iter().filter(|c| !c.ended).peekable();
        running.peek()?;
        let (mut min, mut max) = (None::<i64>, NO_WATERMARK);
        for clock in running {
            max = max.max(clock.watermark);
            if !clock.idle {
                min = Some(min.map_or(clock.watermark, |m| m.min(clock.watermark)));
            }
        }
        if min.is_none() && max > self.announced.watermark {
            // Every input idle: the highest of them holds (see the module docs).
            self.announced = Announced {
                watermark: max,
                idle: true,
            };
            return Some(WatermarkChange::AdvanceIdle(max));
        }
        self.announced.update(min)
    }
}

/// One split of a source, as its clock tracks it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Split {
    /// How the source names it (`"0"` for a single split, `topic/partition` for Kafka).
    id: Box<str>,
    /// The largest timestamp read from it; [`NO_WATERMARK`] before the first record.
    max_timestamp: i64,
    /// A record was read from it since the last [`SourceClock::tick`].
    read_since_tick: bool,
    /// When a tick last saw it read something (or when it was added).
    last_active: Instant,
    /// A tick found it idle: it read nothing for `idle_timeout`, and nothing since.
    idle: bool,
}

impl Split {
    /// What the split promises, `bound` below its largest timestamp: [`NO_WATERMARK`] before
    /// its first record (the subtraction saturates there).
    fn watermark(&self, bound: i64) -> i64 {
        self.max_timestamp.saturating_sub(bound)
    }
}

/// A source task's watermark generator: tracks its splits and says, every `interval`, what
/// watermark to send (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct SourceClock {
    strategy: WatermarkStrategy,
    /// `out_of_orderness` in milliseconds, plus the 1 of the watermark's definition.
    bound: i64,
    splits: Vec<Split>,
    /// The split records are read from now.
    current: usize,
    /// The highest watermark sent, and whether the last thing sent was `Idle`.
    announced: Announced,
    /// When the next tick may send something.
    next_tick: Instant,
}

impl SourceClock {
    /// A clock following `strategy`, with one split named `"0"`, started at `now`.
    pub(crate) fn new(strategy: WatermarkStrategy, now: Instant) -> Self {
        let interval = strategy.interval;
        let bound = i64::try_from(strategy.out_of_orderness.as_millis())
            .unwrap_or(i64::MAX)
            .saturating_add(1);
        SourceClock {
            strategy,
            bound,
            splits: vec![Split {
                id: "0".into(),
                max_timestamp: NO_WATERMARK,
                read_since_tick: false,
                last_active: now,
                idle: false,
            }],
            current: 0,
            announced: Announced::NONE,
            next_tick: now + interval,
        }
    }

    /// Records read from now on come from the split `id`; a split not seen before is added
    /// (active from `now`). The first split named replaces the default one.
    pub(crate) fn enter_split(&mut self, id: &str, now: Instant) {
        if *self.splits[self.current].id == *id {
            return;
        }
        self.current = match self.splits.iter().position(|s| *s.id == *id) {
            Some(i) => i,
            None => {
                let split = Split {
                    id: id.into(),
                    max_timestamp: NO_WATERMARK,
                    read_since_tick: false,
                    last_active: now,
                    idle: false,
                };
                if self.is_default() {
                    self.splits[0] = split;
                    0
                } else {
                    self.splits.push(split);
                    self.splits.len() - 1
                }
            }
        };
    }

    /// Whether the only split is the default one, never read from.
    fn is_default(&self) -> bool {
        matches!(self.splits.as_slice(), [s] if &*s.id == "0" && s.max_timestamp == NO_WATERMARK)
    }

    /// A record with `timestamp` was read from the current split.
    #[inline]
    pub(crate) fn observe(&mut self, timestamp: i64) {
        let split = &mut self.splits[self.current];
        split.read_since_tick = true;
        if timestamp > split.max_timestamp {
            split.max_timestamp = timestamp;
        }
    }

    /// How long from `now` until the next tick may send something.
    pub(crate) fn until_tick(&self, now: Instant) -> Duration {
        self.next_tick.saturating_duration_since(now)
    }

    /// At `now`: the watermark to send, if the interval has passed and there is news.
    pub(crate) fn tick(&mut self, now: Instant) -> Option<Watermark> {
        if now < self.next_tick {
            return None;
        }
        self.next_tick = now + self.strategy.interval;
        let mut min: Option<i64> = None;
        for split in &mut self.splits {
            if std::mem::take(&mut split.read_since_tick) {
                split.last_active = now;
                split.idle = false;
            } else if let Some(timeout) = self.strategy.idle_timeout
                && now.saturating_duration_since(split.last_active) >= timeout
            {
                split.idle = true;
            }
            if !split.idle {
                let w = split.watermark(self.bound);
                min = Some(min.map_or(w, |m| m.min(w)));
            }
        }
        // Every split idle: the highest of their watermarks goes out first (see the module
        // docs; a split that never read anything no longer holds it back), idleness at the next
        // tick.
        let min = min.or_else(|| {
            self.splits
                .iter()
                .map(|s| s.watermark(self.bound))
                .max()
                .filter(|&w| w > self.announced.watermark)
        });
        self.announced.update(min).map(|change| match change {
            // (`update` never returns `AdvanceIdle`: the idle splits' highest watermark went into
            // `min` above, and idleness follows at the next tick.)
            WatermarkChange::Advance(w)
            | WatermarkChange::Active(w)
            | WatermarkChange::AdvanceIdle(w) => Watermark::At(w),
            WatermarkChange::Idle => Watermark::Idle,
        })
    }

    /// What a checkpoint keeps: the highest watermark sent, and each split's largest timestamp
    /// and whether it is idle.
    pub(crate) fn state(&self) -> (i64, Vec<SplitTime>) {
        let splits = self
            .splits
            .iter()
            .map(|s| SplitTime {
                name: s.id.to_string(),
                max_timestamp: s.max_timestamp,
                idle: s.idle,
            })
            .collect();
        (self.announced.watermark, splits)
    }

    /// Takes back what [`state`](Self::state) returned. A split that was idle stays idle until
    /// it reads again (unless this strategy has no idle timeout); the others are active from
    /// `now`. Waiting `idle_timeout` again for an idle split would hold the watermark where the
    /// checkpoint left it while the other splits replay, and a record that was late before the
    /// restart would be counted after it (issue 38).
    pub(crate) fn restore(&mut self, sent: i64, splits: &[SplitTime], now: Instant) {
        self.announced.watermark = sent;
        if !splits.is_empty() {
            let idle_timeout = self.strategy.idle_timeout.is_some();
            self.splits = splits
                .iter()
                .map(|split| Split {
                    id: split.name.as_str().into(),
                    max_timestamp: split.max_timestamp,
                    read_since_tick: false,
                    last_active: now,
                    idle: split.idle && idle_timeout,
                })
                .collect();
            self.current = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strategy(ooo_ms: u64, idle_ms: Option<u64>, interval_ms: u64) -> WatermarkStrategy {
        WatermarkStrategy {
            out_of_orderness: Duration::from_millis(ooo_ms),
            idle_timeout: idle_ms.map(Duration::from_millis),
            interval: Duration::from_millis(interval_ms),
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_task_takes_the_minimum_of_its_inputs_and_never_moves_back() {
        let mut w = InputWatermarks::new(2);
        assert_eq!(
            w.on_watermark(0, Watermark::At(10)),
            None,
            "input 1 holds it"
        );
        assert_eq!(
            w.on_watermark(1, Watermark::At(5)),
            Some(WatermarkChange::Advance(5))
        );
        assert_eq!(
            w.on_watermark(1, Watermark::At(20)),
            Some(WatermarkChange::Advance(10))
        );
        assert_eq!(
            w.on_watermark(1, Watermark::At(3)),
            None,
            "an input never moves back"
        );
        assert_eq!(w.current(), 10);
    }

    #[test]
    fn idle_inputs_are_left_out_and_a_wholly_idle_task_says_so_once() {
        let mut w = InputWatermarks::new(2);
        w.on_watermark(0, Watermark::At(10));
        assert_eq!(
            w.on_watermark(1, Watermark::Idle),
            Some(WatermarkChange::Advance(10)),
            "the idle input no longer holds the other back"
        );
        assert_eq!(
            w.on_watermark(0, Watermark::Idle),
            Some(WatermarkChange::Idle)
        );
        assert_eq!(w.on_watermark(1, Watermark::Idle), None);
        assert_eq!(
            w.on_watermark(1, Watermark::At(4)),
            Some(WatermarkChange::Active(10)),
            "active again, below the task's watermark: it is announced again, unchanged"
        );
    }

    #[test]
    fn ended_inputs_are_left_out_and_the_last_end_is_the_tasks_to_handle() {
        let mut w = InputWatermarks::new(2);
        w.on_watermark(0, Watermark::At(7));
        assert_eq!(w.on_end(1), Some(WatermarkChange::Advance(7)));
        assert_eq!(w.on_end(0), None);
        w.advance_to(i64::MAX);
        assert_eq!(w.current(), i64::MAX);
    }

    #[test]
    fn a_restored_task_keeps_its_watermark_and_its_inputs() {
        let clocks = [
            InputClock {
                watermark: 30,
                idle: false,
                ended: false,
            },
            InputClock {
                watermark: 50,
                idle: false,
                ended: true,
            },
        ];
        let mut w = InputWatermarks::restored(2, 30, &clocks);
        assert_eq!(w.on_watermark(0, Watermark::At(20)), None);
        assert_eq!(
            w.on_watermark(0, Watermark::At(40)),
            Some(WatermarkChange::Advance(40)),
            "the ended input stays out"
        );
    }

    #[test]
    fn a_source_sends_max_minus_bound_minus_one_every_interval() {
        let t0 = Instant::now();
        let mut c = SourceClock::new(strategy(100, None, 200), t0);
        c.observe(1_000);
        c.observe(900);
        assert_eq!(c.tick(t0 + ms(100)), None, "before the interval");
        assert_eq!(c.tick(t0 + ms(200)), Some(Watermark::At(899)));
        assert_eq!(c.tick(t0 + ms(400)), None, "nothing new");
        c.observe(2_000);
        assert_eq!(c.tick(t0 + ms(600)), Some(Watermark::At(1_899)));
    }

    #[test]
    fn a_source_takes_the_minimum_of_its_active_splits_and_goes_idle_without_them() {
        let t0 = Instant::now();
        let mut c = SourceClock::new(strategy(0, Some(1_000), 100), t0);
        c.enter_split("t/0", t0);
        c.observe(500);
        c.enter_split("t/1", t0);
        c.observe(50);
        assert_eq!(c.tick(t0 + ms(100)), Some(Watermark::At(49)));
        // Partition 1 falls silent; partition 0 goes on.
        for step in 2..=12 {
            c.enter_split("t/0", t0);
            c.observe(500 + step);
            c.tick(t0 + ms(100 * step as u64));
        }
        c.enter_split("t/0", t0);
        c.observe(600);
        assert_eq!(
            c.tick(t0 + ms(1_300)),
            Some(Watermark::At(599)),
            "the idle partition no longer holds the watermark"
        );
        assert_eq!(c.tick(t0 + ms(2_400)), Some(Watermark::Idle));
        assert_eq!(c.tick(t0 + ms(2_500)), None, "idle is said once");
        c.observe(700);
        assert_eq!(c.tick(t0 + ms(2_600)), Some(Watermark::At(699)));
    }

    #[test]
    fn when_every_split_goes_idle_at_once_the_ones_that_read_something_are_sent_first() {
        let t0 = Instant::now();
        let mut c = SourceClock::new(strategy(0, Some(300), 100), t0);
        c.enter_split("t/0", t0);
        c.enter_split("t/1", t0);
        c.enter_split("t/0", t0);
        c.observe(5_000);
        assert_eq!(
            c.tick(t0 + ms(100)),
            None,
            "t/1, silent, holds the watermark back"
        );
        // The next tick finds both idle (ticks come only between polls, which a slow source
        // may space out).
        assert_eq!(c.tick(t0 + ms(1_000)), Some(Watermark::At(4_999)));
        assert_eq!(c.tick(t0 + ms(1_100)), Some(Watermark::Idle));
        assert_eq!(c.tick(t0 + ms(1_200)), None);
    }

    #[test]
    fn without_an_idle_timeout_a_silent_split_holds_the_source_back() {
        let t0 = Instant::now();
        let mut c = SourceClock::new(strategy(0, None, 100), t0);
        c.enter_split("a", t0);
        c.observe(10);
        c.enter_split("b", t0);
        assert_eq!(c.tick(t0 + ms(100)), None, "b has read nothing");
        c.enter_split("a", t0);
        c.observe(1_000);
        assert_eq!(c.tick(t0 + ms(60_000)), None, "still nothing from b");
    }

    #[test]
    fn a_restored_source_never_sends_below_what_it_sent() {
        let t0 = Instant::now();
        let mut c = SourceClock::new(strategy(0, None, 100), t0);
        let split = SplitTime {
            name: "0".to_string(),
            max_timestamp: 100,
            idle: false,
        };
        c.restore(99, &[split], t0);
        c.observe(50);
        assert_eq!(c.tick(t0 + ms(100)), None);
        c.observe(150);
        assert_eq!(c.tick(t0 + ms(200)), Some(Watermark::At(149)));
    }

    #[test]
    fn when_every_input_is_idle_the_task_is_at_the_highest_they_sent_whatever_their_order() {
        // Input 0 sends 5000 and falls silent; input 1 never sent anything. When input 0 goes
        // idle first, input 1 (no watermark yet) still holds the minimum, and when input 1
        // goes idle next nothing is left to take the minimum of: the task must not stay below
        // what input 0 promised (issue 38: the window operator never fired).
        for order in [[1, 0], [0, 1]] {
            let mut w = InputWatermarks::new(2);
            assert_eq!(w.on_watermark(0, Watermark::At(5_000)), None);
            let changes: Vec<_> = order
                .iter()
                .filter_map(|&input| w.on_watermark(input, Watermark::Idle))
                .collect();
            assert_eq!(w.current(), 5_000, "idle in order {order:?}: {changes:?}");
            assert!(
                matches!(
                    changes.last(),
                    Some(WatermarkChange::Idle | WatermarkChange::AdvanceIdle(5_000))
                ),
                "and then idle downstream: {changes:?}"
            );
        }
    }

    #[test]
    fn when_every_split_is_idle_the_source_is_at_the_highest_they_promise_whatever_their_order() {
        // Split "lo" read up to 100, "hi" up to 5000. Whichever falls silent first, once both
        // are idle the source has sent 4999 before it says it is idle.
        for hi_first in [false, true] {
            let t0 = Instant::now();
            let mut c = SourceClock::new(strategy(0, Some(300), 100), t0);
            c.enter_split("lo", t0);
            c.observe(100);
            c.enter_split("hi", t0);
            c.observe(5_000);
            let mut sent = Vec::new();
            sent.extend(c.tick(t0 + ms(100)));
            // The split that stays active a little longer reads again (at no later a
            // timestamp) for three more ticks.
            let (busy, ts) = if hi_first { ("lo", 100) } else { ("hi", 5_000) };
            for step in 2..=4 {
                c.enter_split(busy, t0);
                c.observe(ts);
                sent.extend(c.tick(t0 + ms(100 * step)));
            }
            for step in 5..=12 {
                sent.extend(c.tick(t0 + ms(100 * step)));
            }
            assert_eq!(
                sent.last(),
                Some(&Watermark::Idle),
                "hi first: {hi_first}: {sent:?}"
            );
            assert!(
                sent.contains(&Watermark::At(4_999)),
                "hi first: {hi_first}: {sent:?}"
            );
        }
    }

    #[test]
    fn a_split_idle_at_the_checkpoint_is_idle_after_the_restore() {
        // Partition 1 is idle when the checkpoint is taken; after the restore, partition 0
        // reads on and the watermark follows it at once, as it would have without the restart
        // (issue 38: the restored source held the watermark for `idle_timeout`).
        let t0 = Instant::now();
        let mut c = SourceClock::new(strategy(0, Some(1_000), 100), t0);
        c.enter_split("t/0", t0);
        c.enter_split("t/1", t0);
        for step in 1..=12 {
            c.enter_split("t/0", t0);
            c.observe(500);
            c.tick(t0 + ms(100 * step));
        }
        let (sent, splits) = c.state();
        assert_eq!(sent, 499, "t/1 went idle before the checkpoint");
        let t1 = t0 + ms(5_000);
        let mut restored = SourceClock::new(strategy(0, Some(1_000), 100), t1);
        restored.restore(sent, &splits, t1);
        restored.enter_split("t/0", t1);
        restored.observe(2_000);
        assert_eq!(
            restored.tick(t1 + ms(100)),
            Some(Watermark::At(1_999)),
            "the idle partition holds the restored source back"
        );
    }
}
