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
//!   a split that read nothing for `idle_timeout` is idle and left out; when every split is
//!   idle the source says so ([`Watermark::Idle`]) instead of holding everyone back.
//! - A task's watermark is the minimum over its inputs that are neither idle nor ended, and
//!   never moves back. When every such input is idle the task is idle downstream too; when an
//!   input becomes active again the task announces its watermark again.
//! - A source or task never sends a watermark lower than one it sent.

use std::time::{Duration, Instant};

use weir_abi::time::NO_WATERMARK;

use crate::job::WatermarkStrategy;

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
        let min = running.filter(|c| !c.idle).map(|c| c.watermark).min();
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
            }
            let idle = self
                .strategy
                .idle_timeout
                .is_some_and(|timeout| now.saturating_duration_since(split.last_active) >= timeout);
            if !idle {
                let w = split.watermark(self.bound);
                min = Some(min.map_or(w, |m| m.min(w)));
            }
        }
        // Every split idle: what the splits that read something promise goes out first (a split
        // that never read anything no longer holds it back), idleness at the next tick.
        let min = min.or_else(|| {
            self.splits
                .iter()
                .filter(|s| s.max_timestamp != NO_WATERMARK)
                .map(|s| s.watermark(self.bound))
                .min()
                .filter(|&w| w > self.announced.watermark)
        });
        self.announced.update(min).map(|change| match change {
            WatermarkChange::Advance(w) | WatermarkChange::Active(w) => Watermark::At(w),
            WatermarkChange::Idle => Watermark::Idle,
        })
    }

    /// What a checkpoint keeps: the highest watermark sent, and each split's largest timestamp.
    pub(crate) fn state(&self) -> (i64, Vec<(String, i64)>) {
        let splits = self
            .splits
            .iter()
            .map(|s| (s.id.to_string(), s.max_timestamp))
            .collect();
        (self.announced.watermark, splits)
    }

    /// Takes back what [`state`](Self::state) returned; the splits are active from `now`.
    pub(crate) fn restore(&mut self, sent: i64, splits: &[(String, i64)], now: Instant) {
        self.announced.watermark = sent;
        if !splits.is_empty() {
            self.splits = splits
                .iter()
                .map(|(id, max)| Split {
                    id: id.as_str().into(),
                    max_timestamp: *max,
                    read_since_tick: false,
                    last_active: now,
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
        c.restore(99, &[("0".to_string(), 100)], t0);
        c.observe(50);
        assert_eq!(c.tick(t0 + ms(100)), None);
        c.observe(150);
        assert_eq!(c.tick(t0 + ms(200)), Some(Watermark::At(149)));
    }
}
