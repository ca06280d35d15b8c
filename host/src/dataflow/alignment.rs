//! Barrier alignment: when a task with several inputs may take its snapshot,
//! and which inputs it must stop reading meanwhile (docs/ARCHITECTURE.md, Checkpoints).
//!
//! # Why
//!
//! A checkpoint is a consistent cut: a task's snapshot must contain the
//! effect of every record that came *before* the barrier on each of its
//! inputs, and of none that came after. With one input that is trivial — the
//! task snapshots when the barrier arrives. With several inputs the barriers
//! arrive at different times. In **exactly-once** mode the task stops reading
//! each input whose barrier has arrived, until every input's has (alignment);
//! the blocked inputs back-pressure upstream, by design. In **at-least-once**
//! mode it keeps reading everything and snapshots when the last barrier
//! arrives, so records after an early barrier may be in the snapshot and be
//! replayed after a restore.
//!
//! [`BarrierAligner`] is that rule and nothing else: a small synchronous
//! struct with no channels, no threads and no clock (time comes in as
//! [`Instant`] arguments), so that the one invariant that makes exactly-once
//! exact — *no task reads past an aligned barrier* — is tested exhaustively,
//! including by a property test over random interleavings. The task loop asks
//! [`BarrierAligner::is_blocked`] before reading an input and hands every
//! barrier to [`BarrierAligner::on_barrier`]; the returned [`AlignmentEvent`]
//! says when to snapshot. (Arroyo's `CheckpointCounter` and Flink's
//! `CheckpointBarrierAligner` / `CheckpointBarrierTracker` play this role there.)
//!
//! # Rules
//!
//! - One alignment at a time, in both modes. The first barrier of a newer
//!   checkpoint starts its alignment.
//! - A barrier of an older checkpoint than the one aligning, or of one already
//!   aligned or aborted, is stale and ignored, as is a second barrier of the
//!   same checkpoint on the same input.
//! - A barrier of a *newer* checkpoint while an older one aligns ends the
//!   older alignment ([`AlignmentEvent::Superseded`]: the task declines the
//!   older checkpoint, whose barrier cannot come any more on that input: the
//!   channels are FIFO) and starts the newer one.
//! - [`BarrierAligner::abort`] (the coordinator cancelled the checkpoint) ends
//!   its alignment cleanly and unblocks the inputs; its barriers arriving
//!   later are ignored.
//! - Every input delivers every barrier, also after its end of input: a
//!   finished task keeps forwarding barriers until the job ends (see
//!   [`Message::EndOfInput`](super::message::Message::EndOfInput)), so the
//!   aligner never has to guess that an input will send no more.
//! - A single-input task aligns at once, with an alignment duration of zero.

use std::time::{Duration, Instant};

use crate::checkpoint::config::CheckpointMode;
use crate::ids::CheckpointId;

/// What a barrier meant for the task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AlignmentEvent {
    /// The barrier changes nothing: go on.
    Ignored {
        /// The barrier's checkpoint.
        id: CheckpointId,
        /// Why.
        reason: IgnoredBarrier,
    },
    /// The first barrier of checkpoint `id` arrived; in exactly-once mode its
    /// input is now blocked.
    Started {
        /// The checkpoint being aligned.
        id: CheckpointId,
        /// How many inputs have yet to deliver the barrier.
        waiting_for: usize,
    },
    /// A further barrier of checkpoint `id` arrived; others are still missing.
    Waiting {
        /// The checkpoint being aligned.
        id: CheckpointId,
        /// How many inputs have yet to deliver the barrier.
        waiting_for: usize,
    },
    /// Every input delivered checkpoint `id`'s barrier: take the snapshot
    /// now, then forward the barrier. Every input is unblocked.
    Aligned {
        /// The checkpoint to snapshot.
        id: CheckpointId,
        /// From the first barrier to the last (zero for a single input).
        alignment: Duration,
    },
    /// A barrier of the newer checkpoint `id` ended the alignment of the
    /// older checkpoint `aborted`: decline `aborted`. The alignment of `id`
    /// has started.
    Superseded {
        /// The older checkpoint whose alignment ended: decline it.
        aborted: CheckpointId,
        /// The newer checkpoint now aligning.
        id: CheckpointId,
        /// How many inputs have yet to deliver the newer barrier.
        waiting_for: usize,
    },
}

/// Why a barrier was ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IgnoredBarrier {
    /// Its checkpoint was aligned, aborted or superseded already, or a newer
    /// one is aligning.
    Stale,
    /// This input already delivered this checkpoint's barrier.
    Duplicate,
    /// No such input.
    UnknownInput,
}

/// The alignment in progress.
#[derive(Debug, Clone)]
struct Alignment {
    /// The checkpoint being aligned.
    id: CheckpointId,
    /// When its first barrier arrived.
    started_at: Instant,
    /// Which inputs delivered its barrier.
    arrived: Vec<bool>,
}

/// Barrier alignment for one task with a fixed number of inputs (indexed
/// from 0). See the module docs for the rules.
#[derive(Debug, Clone)]
pub(crate) struct BarrierAligner {
    /// Exactly-once blocks inputs; at-least-once only tracks.
    mode: CheckpointMode,
    /// How many inputs the task has.
    inputs: usize,
    /// The alignment in progress, if any.
    current: Option<Alignment>,
    /// The newest checkpoint that was aligned, superseded or aborted: its
    /// barriers, and older ones, are stale.
    finished_up_to: Option<CheckpointId>,
}

impl BarrierAligner {
    /// An aligner for a task with `inputs` inputs, in `mode`. (With no input
    /// at all every barrier is ignored as [`IgnoredBarrier::UnknownInput`].)
    pub(crate) fn new(inputs: usize, mode: CheckpointMode) -> Self {
        BarrierAligner {
            mode,
            inputs,
            current: None,
            finished_up_to: None,
        }
    }

    /// The checkpoint being aligned, if any. (The task loop needs only
    /// [`is_blocked`](Self::is_blocked); the tests look at the alignment itself.)
    #[cfg(test)]
    pub(crate) fn current(&self) -> Option<CheckpointId> {
        self.current.as_ref().map(|a| a.id)
    }

    /// How many inputs the current alignment still waits for (0 if none).
    pub(crate) fn waiting_for(&self) -> usize {
        self.current.as_ref().map_or(0, |a| self.missing(a))
    }

    /// Whether the task must not read `input` now: in exactly-once mode, its
    /// barrier of the checkpoint being aligned has arrived. Never in
    /// at-least-once mode; false for an unknown input.
    pub(crate) fn is_blocked(&self, input: usize) -> bool {
        self.mode == CheckpointMode::ExactlyOnce
            && self
                .current
                .as_ref()
                .is_some_and(|a| a.arrived.get(input).copied().unwrap_or(false))
    }

    /// The barrier of checkpoint `id` arrived on `input` at `now`.
    pub(crate) fn on_barrier(
        &mut self,
        input: usize,
        id: CheckpointId,
        now: Instant,
    ) -> AlignmentEvent {
        let ignored = |reason| AlignmentEvent::Ignored { id, reason };
        if input >= self.inputs {
            return ignored(IgnoredBarrier::UnknownInput);
        }
        if let Some(current) = &mut self.current
            && current.id == id
        {
            if current.arrived[input] {
                return ignored(IgnoredBarrier::Duplicate);
            }
            current.arrived[input] = true;
            return match self.finish_if_aligned(now) {
                Some(aligned) => aligned,
                None => AlignmentEvent::Waiting {
                    id,
                    waiting_for: self.waiting_for(),
                },
            };
        }
        let older_than_current = self.current.as_ref().is_some_and(|a| id < a.id);
        if older_than_current || self.finished_up_to.is_some_and(|f| id <= f) {
            return ignored(IgnoredBarrier::Stale);
        }
        // The first barrier of a newer checkpoint: it ends any older alignment.
        let superseded = self.current.take().map(|older| {
            self.finish(older.id);
            older.id
        });
        let mut arrived = vec![false; self.inputs];
        arrived[input] = true;
        self.current = Some(Alignment {
            id,
            started_at: now,
            arrived,
        });
        // Only a single-input task aligns on a first barrier, and it never has an
        // older alignment in progress: its alignments end where they start.
        if let Some(aligned) = self.finish_if_aligned(now) {
            debug_assert!(superseded.is_none());
            return aligned;
        }
        let waiting_for = self.waiting_for();
        match superseded {
            Some(aborted) => AlignmentEvent::Superseded {
                aborted,
                id,
                waiting_for,
            },
            None => AlignmentEvent::Started { id, waiting_for },
        }
    }

    /// Checkpoint `id` was aborted: if it is aligning, the alignment ends and
    /// every input is unblocked; its barriers arriving later are ignored. An
    /// older checkpoint still aligning is left alone (it may yet complete).
    pub(crate) fn abort(&mut self, id: CheckpointId) {
        if self.current.as_ref().is_some_and(|a| a.id == id) {
            self.current = None;
        }
        self.finish(id);
    }

    /// How many inputs alignment `a` still waits for.
    fn missing(&self, a: &Alignment) -> usize {
        a.arrived.iter().filter(|&&arrived| !arrived).count()
    }

    /// Ends the current alignment if every input delivered its barrier.
    fn finish_if_aligned(&mut self, now: Instant) -> Option<AlignmentEvent> {
        let current = self.current.as_ref()?;
        if self.missing(current) > 0 {
            return None;
        }
        let (id, started_at) = (current.id, current.started_at);
        self.current = None;
        self.finish(id);
        Some(AlignmentEvent::Aligned {
            id,
            alignment: now.saturating_duration_since(started_at),
        })
    }

    /// Marks `id` (and so every older checkpoint) as done with.
    fn finish(&mut self, id: CheckpointId) {
        self.finished_up_to = self.finished_up_to.max(Some(id));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use proptest::prelude::*;

    use super::*;

    const EO: CheckpointMode = CheckpointMode::ExactlyOnce;
    const ALO: CheckpointMode = CheckpointMode::AtLeastOnce;

    fn c(id: u64) -> CheckpointId {
        CheckpointId(id)
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn single_input_aligns_at_once() {
        let t0 = Instant::now();
        let mut a = BarrierAligner::new(1, EO);
        assert_eq!(
            a.on_barrier(0, c(1), t0),
            AlignmentEvent::Aligned {
                id: c(1),
                alignment: Duration::ZERO,
            }
        );
        assert!(!a.is_blocked(0));
        assert_eq!(a.current(), None);
    }

    #[test]
    fn exactly_once_blocks_inputs_whose_barrier_arrived_until_all_arrived() {
        let t0 = Instant::now();
        let mut a = BarrierAligner::new(3, EO);
        assert_eq!(
            a.on_barrier(1, c(1), t0),
            AlignmentEvent::Started {
                id: c(1),
                waiting_for: 2
            }
        );
        assert!(a.is_blocked(1));
        assert!(!a.is_blocked(0) && !a.is_blocked(2));
        assert_eq!(
            a.on_barrier(0, c(1), t0 + ms(5)),
            AlignmentEvent::Waiting {
                id: c(1),
                waiting_for: 1
            }
        );
        assert!(a.is_blocked(0) && a.is_blocked(1) && !a.is_blocked(2));
        assert_eq!(
            a.on_barrier(2, c(1), t0 + ms(12)),
            AlignmentEvent::Aligned {
                id: c(1),
                alignment: ms(12),
            }
        );
        assert!((0..3).all(|i| !a.is_blocked(i)));
    }

    #[test]
    fn at_least_once_never_blocks_and_aligns_on_the_last_barrier() {
        let t0 = Instant::now();
        let mut a = BarrierAligner::new(2, ALO);
        assert_eq!(
            a.on_barrier(0, c(1), t0),
            AlignmentEvent::Started {
                id: c(1),
                waiting_for: 1
            }
        );
        assert!(!a.is_blocked(0) && !a.is_blocked(1));
        assert_eq!(
            a.on_barrier(1, c(1), t0 + ms(7)),
            AlignmentEvent::Aligned {
                id: c(1),
                alignment: ms(7),
            }
        );
    }

    #[test]
    fn stale_duplicate_and_unknown_input_barriers_are_ignored() {
        let t0 = Instant::now();
        let mut a = BarrierAligner::new(2, ALO);
        a.on_barrier(0, c(2), t0);
        let ignored = |id, reason| AlignmentEvent::Ignored { id: c(id), reason };
        assert_eq!(
            a.on_barrier(0, c(2), t0),
            ignored(2, IgnoredBarrier::Duplicate)
        );
        assert_eq!(a.on_barrier(1, c(1), t0), ignored(1, IgnoredBarrier::Stale));
        assert_eq!(
            a.on_barrier(5, c(2), t0),
            ignored(2, IgnoredBarrier::UnknownInput)
        );
        assert!(matches!(
            a.on_barrier(1, c(2), t0),
            AlignmentEvent::Aligned { .. }
        ));
        assert_eq!(a.on_barrier(1, c(2), t0), ignored(2, IgnoredBarrier::Stale));
        assert!(!a.is_blocked(7));
    }

    #[test]
    fn abort_ends_the_alignment_unblocks_and_ignores_its_later_barriers() {
        let t0 = Instant::now();
        let mut a = BarrierAligner::new(2, EO);
        a.on_barrier(0, c(1), t0);
        assert!(a.is_blocked(0));
        a.abort(c(1));
        assert!(!a.is_blocked(0) && !a.is_blocked(1));
        assert_eq!(a.current(), None);
        assert_eq!(
            a.on_barrier(1, c(1), t0),
            AlignmentEvent::Ignored {
                id: c(1),
                reason: IgnoredBarrier::Stale
            }
        );
        // The next checkpoint aligns normally.
        assert_eq!(
            a.on_barrier(1, c(2), t0),
            AlignmentEvent::Started {
                id: c(2),
                waiting_for: 1
            }
        );
        assert!(
            matches!(a.on_barrier(0, c(2), t0), AlignmentEvent::Aligned { id, .. } if id == c(2))
        );
    }

    #[test]
    fn abort_before_any_barrier_makes_its_barriers_stale() {
        let t0 = Instant::now();
        let mut a = BarrierAligner::new(2, EO);
        a.abort(c(4));
        assert_eq!(
            a.on_barrier(0, c(4), t0),
            AlignmentEvent::Ignored {
                id: c(4),
                reason: IgnoredBarrier::Stale
            }
        );
        assert!(!a.is_blocked(0));
    }

    #[test]
    fn abort_of_another_checkpoint_leaves_the_alignment_alone() {
        let t0 = Instant::now();
        let mut a = BarrierAligner::new(2, EO);
        a.on_barrier(0, c(3), t0);
        a.abort(c(2));
        assert!(a.is_blocked(0));
        a.abort(c(5));
        assert!(
            a.is_blocked(0),
            "an aborted newer checkpoint does not end an older alignment"
        );
        assert!(
            matches!(a.on_barrier(1, c(3), t0), AlignmentEvent::Aligned { id, .. } if id == c(3))
        );
        assert!(matches!(
            a.on_barrier(0, c(5), t0),
            AlignmentEvent::Ignored {
                reason: IgnoredBarrier::Stale,
                ..
            }
        ));
    }

    #[test]
    fn newer_barrier_supersedes_the_older_alignment_and_unblocks_its_inputs() {
        let t0 = Instant::now();
        let mut a = BarrierAligner::new(3, EO);
        a.on_barrier(0, c(1), t0);
        a.on_barrier(1, c(1), t0);
        assert_eq!(
            a.on_barrier(2, c(2), t0 + ms(3)),
            AlignmentEvent::Superseded {
                aborted: c(1),
                id: c(2),
                waiting_for: 2
            }
        );
        assert!(!a.is_blocked(0) && !a.is_blocked(1));
        assert!(a.is_blocked(2));
        assert!(matches!(
            a.on_barrier(0, c(1), t0),
            AlignmentEvent::Ignored {
                reason: IgnoredBarrier::Stale,
                ..
            }
        ));
        a.on_barrier(0, c(2), t0 + ms(4));
        assert_eq!(
            a.on_barrier(1, c(2), t0 + ms(9)),
            AlignmentEvent::Aligned {
                id: c(2),
                alignment: ms(6),
            }
        );
    }

    #[test]
    fn at_least_once_supersedes_an_alignment_when_a_fast_input_delivers_the_next_barrier() {
        // At-least-once reads on past a barrier, so one input can bring barrier 2 before the
        // other brought barrier 1: checkpoint 1 is declined, checkpoint 2 aligns.
        let t0 = Instant::now();
        let mut a = BarrierAligner::new(2, ALO);
        a.on_barrier(0, c(1), t0);
        assert_eq!(
            a.on_barrier(0, c(2), t0 + ms(2)),
            AlignmentEvent::Superseded {
                aborted: c(1),
                id: c(2),
                waiting_for: 1
            }
        );
        assert_eq!(
            a.on_barrier(1, c(1), t0 + ms(3)),
            AlignmentEvent::Ignored {
                id: c(1),
                reason: IgnoredBarrier::Stale
            }
        );
        assert_eq!(
            a.on_barrier(1, c(2), t0 + ms(5)),
            AlignmentEvent::Aligned {
                id: c(2),
                alignment: ms(3),
            }
        );
    }

    #[test]
    fn an_input_blocked_in_exactly_once_cannot_bring_a_newer_barrier() {
        // The reason exactly-once never supersedes: the input that delivered barrier 1 is not
        // read again until the others delivered it, so its barrier 2 waits in the channel.
        let t0 = Instant::now();
        let mut a = BarrierAligner::new(2, EO);
        a.on_barrier(0, c(1), t0);
        assert!(a.is_blocked(0));
        assert!(!a.is_blocked(1));
        assert!(matches!(
            a.on_barrier(1, c(1), t0),
            AlignmentEvent::Aligned { id, .. } if id == c(1)
        ));
        assert!(!a.is_blocked(0), "alignment over, the input is read again");
    }

    // ----- simulation: a task loop over two (or more) inputs ---------------

    /// One item on an input channel.
    #[derive(Debug, Clone, Copy)]
    enum Item {
        /// A record that follows `epoch` barriers on its input.
        Record { epoch: u64 },
        /// The barrier of checkpoint `id`.
        Barrier(u64),
    }

    /// An input channel: `segments[k]` records of epoch `k`, with barrier
    /// `k + 1` between segment `k` and segment `k + 1`; then the input ends. A
    /// segment may be empty, so an input whose records ended early still
    /// delivers the later barriers, as a finished upstream task does.
    fn channel(segments: &[usize]) -> Vec<Item> {
        let mut items = Vec::new();
        for (epoch, &records) in segments.iter().enumerate() {
            if epoch > 0 {
                items.push(Item::Barrier(epoch as u64));
            }
            items.extend((0..records).map(|_| Item::Record {
                epoch: epoch as u64,
            }));
        }
        items
    }

    /// What a simulated run observed.
    #[derive(Debug, Default)]
    struct Run {
        /// Records processed after their input's barrier `e` but before barrier
        /// `e` arrived on every other input (and with `e` not aborted).
        crossed: usize,
        /// Snapshots that did not contain exactly the records before their barrier.
        inconsistent: usize,
        /// Checkpoints aligned, in order.
        aligned: Vec<u64>,
        /// Checkpoints superseded.
        superseded: Vec<u64>,
        /// Checkpoints aborted while aligning.
        aborted: Vec<u64>,
        /// Whether any input was ever blocked.
        ever_blocked: bool,
        /// Whether an input was still blocked right after an abort.
        blocked_after_abort: bool,
        /// Whether the loop stopped with items left (a deadlock).
        stalled: bool,
    }

    /// A task loop that reads only unblocked inputs. `choices[step]` picks
    /// which readable input to read at each step (and, with `aborts`, whether
    /// the coordinator aborts the current alignment first).
    fn simulate(
        mode: CheckpointMode,
        inputs: &[Vec<Item>],
        choices: &[usize],
        aborts: &[bool],
    ) -> Run {
        let t0 = Instant::now();
        let n = inputs.len();
        let mut aligner = BarrierAligner::new(n, mode);
        let mut queues: Vec<VecDeque<Item>> = inputs
            .iter()
            .map(|items| items.iter().copied().collect())
            .collect();
        // Per input: records processed, and the newest barrier read.
        let mut processed: Vec<Vec<u64>> = vec![Vec::new(); n];
        let mut barriers_read = vec![0u64; n];
        let mut cancelled: Vec<u64> = Vec::new();
        let mut run = Run::default();
        let on_aligned = |id: u64, processed: &[Vec<u64>], run: &mut Run| {
            run.aligned.push(id);
            // The snapshot must hold every record before barrier `id` on every
            // input and none after it.
            for (input, done) in processed.iter().enumerate() {
                let expected = inputs[input]
                    .iter()
                    .filter(|item| matches!(item, Item::Record { epoch } if *epoch < id))
                    .count();
                if done.len() != expected || done.iter().any(|&e| e >= id) {
                    run.inconsistent += 1;
                }
            }
        };
        for step in 0.. {
            let now = t0 + ms(step as u64);
            if aborts.get(step).copied().unwrap_or(false)
                && let Some(id) = aligner.current()
            {
                aligner.abort(id);
                cancelled.push(id.0);
                run.aborted.push(id.0);
                run.blocked_after_abort |= (0..n).any(|i| aligner.is_blocked(i));
            }
            run.ever_blocked |= (0..n).any(|i| aligner.is_blocked(i));
            let readable: Vec<usize> = (0..n)
                .filter(|&i| !queues[i].is_empty() && !aligner.is_blocked(i))
                .collect();
            if readable.is_empty() {
                run.stalled = queues.iter().any(|q| !q.is_empty());
                break;
            }
            let input = readable[choices.get(step).copied().unwrap_or(step) % readable.len()];
            match queues[input].pop_front() {
                Some(Item::Record { epoch }) => {
                    let others_passed = (0..n).all(|j| barriers_read[j] >= epoch);
                    if !others_passed && !cancelled.contains(&epoch) {
                        run.crossed += 1;
                    }
                    processed[input].push(epoch);
                }
                Some(Item::Barrier(id)) => {
                    barriers_read[input] = id;
                    match aligner.on_barrier(input, CheckpointId(id), now) {
                        AlignmentEvent::Aligned { id, .. } => {
                            on_aligned(id.0, &processed, &mut run);
                        }
                        AlignmentEvent::Superseded { aborted, .. } => {
                            run.superseded.push(aborted.0);
                            cancelled.push(aborted.0);
                        }
                        _ => {}
                    }
                }
                None => unreachable!("only inputs with items left are read"),
            }
        }
        run
    }

    #[test]
    fn exactly_once_never_processes_a_record_past_a_barrier_before_alignment() {
        // Input 0 is fast, input 1 slow: a naive reader would cross barrier 1.
        let inputs = [channel(&[1, 5, 5]), channel(&[5, 1, 1])];
        for choices in [vec![0; 40], vec![1; 40], (0..40).collect::<Vec<_>>()] {
            let run = simulate(EO, &inputs, &choices, &[]);
            assert_eq!(run.crossed, 0, "{run:?}");
            assert_eq!(run.inconsistent, 0, "{run:?}");
            assert_eq!(run.aligned, [1, 2]);
            assert!(!run.stalled);
            assert!(run.ever_blocked);
        }
    }

    #[test]
    fn at_least_once_crosses_barriers_where_exactly_once_would_block() {
        // The same inputs, reading input 0 first: at-least-once processes
        // records after barrier 1 before input 1 delivers it — and so the
        // snapshot contains them. This shows the simulation's check bites.
        let inputs = [channel(&[1, 5, 5]), channel(&[5, 1, 1])];
        let run = simulate(ALO, &inputs, &[0; 40], &[]);
        assert!(!run.ever_blocked);
        assert!(run.crossed > 0);
        assert!(run.inconsistent > 0);
        assert!(!run.stalled);
    }

    /// 2 or 3 inputs carrying the same up to 4 barriers (every input delivers
    /// every barrier), with up to 3 records per segment; an input whose later
    /// segments are empty is one whose records ended early.
    fn inputs_strategy() -> impl Strategy<Value = Vec<Vec<Item>>> {
        (2usize..=3, 1usize..=5).prop_flat_map(|(n, segments)| {
            prop::collection::vec(prop::collection::vec(0usize..4, segments), n)
                .prop_map(|segments| segments.iter().map(|s| channel(s)).collect())
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn exactly_once_alignment_holds_for_every_interleaving(
            inputs in inputs_strategy(),
            choices in prop::collection::vec(any::<usize>(), 0..80),
        ) {
            let run = simulate(EO, &inputs, &choices, &[]);
            prop_assert_eq!(run.crossed, 0, "{:?}", run);
            prop_assert_eq!(run.inconsistent, 0, "{:?}", run);
            prop_assert!(!run.stalled, "deadlock: {:?}", run);
            prop_assert!(run.superseded.is_empty(), "{:?}", run);
            // Every checkpoint some input carries is aligned, in order.
            let max = inputs.iter().map(|items| {
                items.iter().filter(|i| matches!(i, Item::Barrier(_))).count() as u64
            }).max().unwrap_or(0);
            prop_assert_eq!(run.aligned, (1..=max).collect::<Vec<_>>());
        }

        #[test]
        fn exactly_once_snapshots_stay_consistent_when_alignments_are_aborted(
            inputs in inputs_strategy(),
            choices in prop::collection::vec(any::<usize>(), 0..80),
            aborts in prop::collection::vec(prop::bool::weighted(0.15), 0..80),
        ) {
            let run = simulate(EO, &inputs, &choices, &aborts);
            prop_assert_eq!(run.crossed, 0, "{:?}", run);
            prop_assert_eq!(run.inconsistent, 0, "{:?}", run);
            prop_assert!(!run.stalled, "deadlock: {:?}", run);
            prop_assert!(!run.blocked_after_abort, "{:?}", run);
            for id in &run.aborted {
                prop_assert!(!run.aligned.contains(id), "aborted {} was aligned: {:?}", id, run);
            }
        }

        #[test]
        fn at_least_once_never_blocks_and_snapshots_every_checkpoint_once(
            inputs in inputs_strategy(),
            choices in prop::collection::vec(any::<usize>(), 0..80),
        ) {
            let run = simulate(ALO, &inputs, &choices, &[]);
            prop_assert!(!run.ever_blocked);
            prop_assert!(!run.stalled);
            // Each checkpoint is either snapshotted or superseded, exactly once.
            let max = inputs.iter().map(|items| {
                items.iter().filter(|i| matches!(i, Item::Barrier(_))).count() as u64
            }).max().unwrap_or(0);
            let mut ended: Vec<u64> = run.aligned.iter().chain(&run.superseded).copied().collect();
            ended.sort_unstable();
            prop_assert_eq!(ended, (1..=max).collect::<Vec<_>>());
        }
    }
}
