use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;

use super::*;
use crate::checkpoint::pending::SnapshotCost;
use crate::checkpoint::shared::SharedFile;
use crate::checkpoint::stats::{CheckpointStats, CheckpointStatus, TaskStats};

/// What the tests read of the coordinator's state; the shell needs none of it (it acts on the
/// actions alone).
impl<H> Coordinator<H> {
    /// Completed checkpoints not pruned yet, oldest first (savepoints
    /// excluded): the `retained` newest, and those their image chains need.
    fn retained(&self) -> impl Iterator<Item = CheckpointId> + '_ {
        self.completed.keys().copied()
    }

    /// The newest completed checkpoint (savepoints excluded).
    fn latest_completed(&self) -> Option<CheckpointId> {
        self.latest_completed
    }

    /// Checkpoint failures in a row so far.
    fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// Whether a final checkpoint or stop-with-savepoint has completed: the job
    /// is over and nothing more will be triggered.
    fn is_finished(&self) -> bool {
        matches!(self.ending, Ending::Done(_))
    }
}

type Co = Coordinator<String>;
type Actions = Vec<Action<String>>;

const CHK: CheckpointKind = CheckpointKind::Checkpoint;
const SAVE: CheckpointKind = CheckpointKind::Savepoint;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn c(id: u64) -> CheckpointId {
    CheckpointId(id)
}

fn src(i: u32) -> TaskId {
    TaskId::new("src", i)
}

fn sink() -> TaskId {
    TaskId::new("sink", 0)
}

fn all_tasks() -> Vec<TaskId> {
    vec![src(0), src(1), TaskId::new("count", 0), sink()]
}

/// Interval 100 ms, timeout 1 s, no min pause, one at a time, keep 1,
/// tolerate none.
fn config() -> CheckpointConfig {
    let mut config = CheckpointConfig::new(PathBuf::from("unused"));
    config.interval = Some(ms(100));
    config.timeout = ms(1000);
    config
}

/// A coordinator of a job whose storage holds nothing left behind (as if a sweep had just
/// found nothing): the tests of retention and sweeps start from `Co::new` itself.
fn coordinator(config: CheckpointConfig) -> Co {
    let mut co = Coordinator::new(config, all_tasks(), [src(0), src(1)], c(1)).unwrap();
    co.swept(false);
    co
}

/// A coordinator made RUNNING at `t0`.
fn running(config: CheckpointConfig, t0: Instant) -> Co {
    let mut co = coordinator(config);
    assert_eq!(co.set_running(true, t0), []);
    co
}

/// A coordinator made RUNNING at `t0`, with [`config`] changed by `change`.
fn running_with(t0: Instant, change: impl FnOnce(&mut CheckpointConfig)) -> Co {
    let mut config = config();
    change(&mut config);
    running(config, t0)
}

fn ack(id: CheckpointId, task: &TaskId) -> Acknowledgement<String> {
    Acknowledgement {
        handle: format!("chk-{id}/{task}"),
        cost: SnapshotCost {
            sync_duration: ms(2),
            async_duration: ms(5),
            alignment_duration: ms(1),
            bytes: 100,
        },
        chain: Vec::new(),
        shared: Vec::new(),
    }
}

/// `task` acknowledges `id` at `now` and the coordinator hands the acknowledgement back.
#[track_caller]
fn ack_refused(co: &mut Co, id: CheckpointId, task: &TaskId, now: Instant) -> IgnoredAck<String> {
    co.acknowledge(id, task.clone(), ack(id, task), now)
        .unwrap_err()
}

/// `task`'s acknowledgement of `id`, an aborted checkpoint of `kind`, arrives late at `now`: it
/// is handed back with its state to discard.
#[track_caller]
fn assert_late_ack_discarded(
    co: &mut Co,
    id: CheckpointId,
    kind: CheckpointKind,
    task: &TaskId,
    now: Instant,
) {
    let late = ack_refused(co, id, task, now);
    assert_eq!(late.reason, Ignored::Aborted { id, kind });
    assert_eq!(late.state_to_discard(), Some(kind));
}

/// Every task acknowledges `id` at `now`; the actions of all the calls.
fn ack_all(co: &mut Co, id: CheckpointId, now: Instant) -> Actions {
    ack_all_with(co, id, now, |_| {})
}

/// Every task acknowledges `id` at `now`, `count#0` with its acknowledgement changed by
/// `count`; the actions of all the calls.
fn ack_all_with(
    co: &mut Co,
    id: CheckpointId,
    now: Instant,
    count: impl FnOnce(&mut Acknowledgement<String>),
) -> Actions {
    let mut count = Some(count);
    let mut actions = Vec::new();
    for task in all_tasks() {
        let mut ack = ack(id, &task);
        if task == TaskId::new("count", 0)
            && let Some(change) = count.take()
        {
            change(&mut ack);
        }
        actions.extend(co.acknowledge(id, task.clone(), ack, now).unwrap());
    }
    actions
}

/// Every task acknowledges `id` and the metadata is written, at `now`.
fn complete(co: &mut Co, id: CheckpointId, now: Instant) -> Actions {
    let mut actions = ack_all(co, id, now);
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Finalize { id: f, .. } if *f == id)),
        "{actions:?}"
    );
    actions.extend(co.finalized(id, Ok(()), now).unwrap());
    // The shell removes what is pruned.
    carry_out_prune(co, &actions, &[]);
    actions
}

/// Records in `stats` what one call's `actions`, decided at `now`, say about
/// each checkpoint, as the driver records them in the job monitor's: a
/// trigger opens a record, an abort fails it. (Acknowledgements and
/// completions are facts the shell hands in: [`ack_recorded`],
/// [`finalized_recorded`].)
fn record_actions(stats: &mut CheckpointStats, co: &Co, actions: &[Action<String>], now: Instant) {
    for action in actions {
        match action {
            Action::Trigger { id, kind, is_final } => {
                stats.triggered(*id, *kind, *is_final, co.ack_set().len(), now);
            }
            Action::Abort { id, reason, .. } => stats.failed(*id, reason, now),
            _ => {}
        }
    }
}

/// `task` acknowledges `id` at `now`, recorded in `stats` as the driver
/// records an accepted acknowledgement and the actions that follow.
fn ack_recorded(
    co: &mut Co,
    stats: &mut CheckpointStats,
    id: CheckpointId,
    task: TaskId,
    now: Instant,
) -> Actions {
    let ack = ack(id, &task);
    let measured = TaskStats::acknowledged(&ack, now);
    let actions = co.acknowledge(id, task.clone(), ack, now).unwrap();
    stats.acknowledged(id, task, measured);
    record_actions(stats, co, &actions, now);
    actions
}

/// The metadata of `id` was written at `now`, recorded in `stats` as the
/// driver records a completion and the actions that follow.
fn finalized_recorded(
    co: &mut Co,
    stats: &mut CheckpointStats,
    id: CheckpointId,
    now: Instant,
) -> Actions {
    let actions = co.finalized(id, Ok(()), now).unwrap();
    stats.completed(id, now);
    record_actions(stats, co, &actions, now);
    actions
}

fn trigger(id: u64) -> Action<String> {
    Action::Trigger {
        id: c(id),
        kind: CHK,
        is_final: false,
    }
}

fn notify(id: u64) -> Action<String> {
    Action::NotifyComplete {
        id: c(id),
        kind: CHK,
        is_final: false,
    }
}

fn abort(id: u64, reason: AbortReason) -> Action<String> {
    Action::Abort {
        id: c(id),
        kind: CHK,
        is_final: false,
        reason,
    }
}

fn triggers(actions: &[Action<String>]) -> Vec<u64> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Trigger { id, .. } => Some(id.0),
            _ => None,
        })
        .collect()
}

fn fail_job(actions: &[Action<String>]) -> Option<&TooManyFailures> {
    actions.iter().find_map(|a| match a {
        Action::FailJob { reason } => Some(reason),
        _ => None,
    })
}

fn expired() -> AbortReason {
    AbortReason::Expired { timeout: ms(1000) }
}

// ----- construction ----------------------------------------------------

#[test]
fn refuses_inconsistent_construction() {
    let new = |config, acks: Vec<TaskId>, sources: Vec<TaskId>, first| {
        Co::new(config, acks, sources, CheckpointId(first)).unwrap_err()
    };
    assert_eq!(
        new(config(), vec![], vec![src(0)], 1),
        CoordinatorError::EmptyAckSet
    );
    assert_eq!(
        new(config(), all_tasks(), vec![], 1),
        CoordinatorError::NoSources
    );
    assert_eq!(
        new(config(), vec![sink()], vec![src(0)], 1),
        CoordinatorError::SourceNotInAckSet { task: src(0) }
    );
    assert_eq!(
        new(config(), all_tasks(), vec![src(0)], 0),
        CoordinatorError::ZeroFirstId
    );
    let mut zero = config();
    zero.max_concurrent = 0;
    assert_eq!(
        new(zero, all_tasks(), vec![src(0)], 1),
        CoordinatorError::ZeroMaxConcurrent
    );
    let mut zero = config();
    zero.retained = 0;
    assert_eq!(
        new(zero, all_tasks(), vec![src(0)], 1),
        CoordinatorError::ZeroRetained
    );
}

#[test]
fn restored_coordinator_continues_numbering() {
    let t0 = Instant::now();
    let mut co = Co::new(config(), all_tasks(), [src(0), src(1)], c(42)).unwrap();
    co.set_running(true, t0);
    assert_eq!(co.poll(t0 + ms(100)), [trigger(42)]);
    assert_eq!(co.next_id(), c(43));
}

// ----- scheduling ------------------------------------------------------

#[test]
fn nothing_is_triggered_before_the_job_runs() {
    let t0 = Instant::now();
    let mut co = coordinator(config());
    assert_eq!(co.next_deadline(), None);
    assert_eq!(co.poll(t0 + ms(10_000)), []);
    assert!(!co.is_running());
}

#[test]
fn first_trigger_comes_one_interval_after_running() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    assert_eq!(co.next_deadline(), Some(t0 + ms(100)));
    assert_eq!(co.poll(t0 + ms(99)), []);
    assert_eq!(co.poll(t0 + ms(100)), [trigger(1)]);
}

#[test]
fn periodic_triggers_are_one_interval_apart() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    co.poll(t0 + ms(100));
    complete(&mut co, c(1), t0 + ms(130));
    assert_eq!(co.next_deadline(), Some(t0 + ms(200)));
    assert_eq!(co.poll(t0 + ms(199)), []);
    assert_eq!(co.poll(t0 + ms(200)), [trigger(2)]);
}

#[test]
fn a_late_poll_triggers_once_not_once_per_missed_interval() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.max_concurrent = 5);
    assert_eq!(co.poll(t0 + ms(550)), [trigger(1)]);
    assert_eq!(co.next_deadline(), Some(t0 + ms(650)));
}

#[test]
fn min_pause_is_honoured_after_a_completion() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.min_pause = ms(80));
    co.poll(t0 + ms(100));
    complete(&mut co, c(1), t0 + ms(170));
    // Not at 200 (interval) but at 170 + 80.
    assert_eq!(co.next_deadline(), Some(t0 + ms(250)));
    assert_eq!(co.poll(t0 + ms(200)), []);
    assert_eq!(co.poll(t0 + ms(249)), []);
    assert_eq!(co.poll(t0 + ms(250)), [trigger(2)]);
    // The next one is an interval after this trigger again.
    complete(&mut co, c(2), t0 + ms(260));
    assert_eq!(co.next_deadline(), Some(t0 + ms(350)));
}

#[test]
fn max_concurrent_is_honoured_and_the_blocked_trigger_fires_as_soon_as_a_slot_frees() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.max_concurrent = 2);
    assert_eq!(co.poll(t0 + ms(100)), [trigger(1)]);
    assert_eq!(co.poll(t0 + ms(200)), [trigger(2)]);
    assert_eq!(co.in_flight(), 2);
    // Blocked: only the timeout of checkpoint 1 is scheduled.
    assert_eq!(co.next_deadline(), Some(t0 + ms(1100)));
    assert_eq!(co.poll(t0 + ms(300)), []);
    assert_eq!(co.poll(t0 + ms(450)), []);
    // Checkpoint 1 completes at 470: checkpoint 3 is triggered by that very
    // call, not at the next interval boundary.
    let actions = complete(&mut co, c(1), t0 + ms(470));
    assert_eq!(triggers(&actions), [3]);
    assert_eq!(co.in_flight(), 2);
}

#[test]
fn finalizing_checkpoints_count_toward_max_concurrent() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    co.poll(t0 + ms(100));
    ack_all(&mut co, c(1), t0 + ms(150));
    assert_eq!(co.finalizing().collect::<Vec<_>>(), [c(1)]);
    assert_eq!(
        co.poll(t0 + ms(300)),
        [],
        "the metadata of 1 is still being written"
    );
    let actions = co.finalized(c(1), Ok(()), t0 + ms(320)).unwrap();
    assert_eq!(actions, [notify(1), trigger(2)]);
}

#[test]
fn min_pause_blocked_trigger_fires_as_soon_as_the_pause_ends() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.min_pause = ms(150));
    co.poll(t0 + ms(100));
    complete(&mut co, c(1), t0 + ms(120));
    // Due at max(200, 270) = 270: not 300 (the next interval boundary).
    assert_eq!(co.next_deadline(), Some(t0 + ms(270)));
    assert_eq!(co.poll(t0 + ms(270)), [trigger(2)]);
}

#[test]
fn periodic_checkpoints_are_off_without_an_interval() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.interval = None);
    assert_eq!(co.next_deadline(), None);
    assert_eq!(co.poll(t0 + ms(1_000_000)), []);
}

// ----- job status ------------------------------------------------------

#[test]
fn scheduler_stops_when_the_job_stops_running_and_aborts_pending_without_counting() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    co.poll(t0 + ms(100));
    let actions = co.set_running(false, t0 + ms(150));
    assert_eq!(actions, [abort(1, AbortReason::JobNotRunning)]);
    assert_eq!(co.consecutive_failures(), 0);
    assert!(fail_job(&actions).is_none());
    assert_eq!(co.next_deadline(), None);
    assert_eq!(co.poll(t0 + ms(10_000)), []);
    assert_eq!(
        co.set_running(false, t0 + ms(10_000)),
        [],
        "repeating the status is a no-op"
    );
    // Late acknowledgements of the aborted checkpoint are handed back.
    assert_late_ack_discarded(&mut co, c(1), CHK, &sink(), t0 + ms(200));
}

#[test]
fn scheduler_resumes_one_interval_after_the_job_runs_again() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    co.poll(t0 + ms(100));
    co.set_running(false, t0 + ms(150));
    assert_eq!(co.set_running(true, t0 + ms(5000)), []);
    assert_eq!(co.next_deadline(), Some(t0 + ms(5100)));
    assert_eq!(co.poll(t0 + ms(5100)), [trigger(2)]);
}

#[test]
fn fully_acknowledged_checkpoint_still_completes_after_the_job_stopped() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    co.poll(t0 + ms(100));
    ack_all(&mut co, c(1), t0 + ms(120));
    assert_eq!(co.set_running(false, t0 + ms(130)), []);
    let actions = co.finalized(c(1), Ok(()), t0 + ms(140)).unwrap();
    assert_eq!(actions, [notify(1)]);
    assert_eq!(co.latest_completed(), Some(c(1)));
}

// ----- timeout, decline, failures ----------------------------------------

#[test]
fn timeout_aborts_the_pending_checkpoint_and_counts_as_a_failure() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.tolerable_failures = 5);
    let mut stats = CheckpointStats::default();
    let actions = co.poll(t0 + ms(100));
    record_actions(&mut stats, &co, &actions, t0 + ms(100));
    ack_recorded(&mut co, &mut stats, c(1), src(0), t0 + ms(110));
    assert_eq!(co.next_deadline(), Some(t0 + ms(1100)));
    assert_eq!(co.poll(t0 + ms(1099)), []);
    let actions = co.poll(t0 + ms(1100));
    assert_eq!(actions, [abort(1, expired()), trigger(2)]);
    record_actions(&mut stats, &co, &actions, t0 + ms(1100));
    assert_eq!(co.consecutive_failures(), 1);
    let record = stats.get(c(1)).unwrap();
    assert_eq!(
        record.status,
        CheckpointStatus::Failed { reason: expired() }
    );
    assert_eq!(record.acknowledged(), 1);
}

#[test]
fn decline_aborts_the_checkpoint_and_counts_as_a_failure() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.tolerable_failures = 5);
    co.poll(t0 + ms(100));
    let actions = co.decline(c(1), sink(), "disk full", t0 + ms(120)).unwrap();
    let reason = AbortReason::Declined {
        task: sink(),
        reason: "disk full".into(),
    };
    assert_eq!(actions, [abort(1, reason)]);
    assert_eq!(co.consecutive_failures(), 1);
    assert_eq!(co.in_flight(), 0);
    assert_eq!(co.next_deadline(), Some(t0 + ms(200)));
    // A second decline, or one for an unknown checkpoint, is ignored.
    assert_eq!(
        co.decline(c(1), sink(), "again", t0).unwrap_err(),
        Ignored::Aborted {
            id: c(1),
            kind: CHK
        }
    );
    assert_eq!(
        co.decline(c(9), sink(), "?", t0).unwrap_err(),
        Ignored::UnknownCheckpoint { id: c(9) }
    );
}

#[test]
fn decline_from_outside_the_ack_set_or_after_all_acks_is_ignored() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    co.poll(t0 + ms(100));
    let stranger = TaskId::new("stranger", 0);
    assert_eq!(
        co.decline(c(1), stranger.clone(), "?", t0).unwrap_err(),
        Ignored::UnknownTask {
            id: c(1),
            task: stranger
        }
    );
    ack_all(&mut co, c(1), t0 + ms(110));
    assert_eq!(
        co.decline(c(1), sink(), "late", t0).unwrap_err(),
        Ignored::Complete { id: c(1) }
    );
}

#[test]
fn failed_metadata_write_aborts_and_counts_as_a_failure() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.tolerable_failures = 1);
    co.poll(t0 + ms(100));
    ack_all(&mut co, c(1), t0 + ms(110));
    let actions = co.finalized(c(1), Err("no space left on device".into()), t0 + ms(120));
    let reason = AbortReason::FinalizeFailed {
        message: "no space left on device".into(),
    };
    assert_eq!(actions.unwrap(), [abort(1, reason)]);
    assert_eq!(co.consecutive_failures(), 1);
    assert_eq!(co.latest_completed(), None);
}

#[test]
fn job_fails_at_one_more_consecutive_failure_than_tolerated() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.tolerable_failures = 2);
    for (i, id) in [1u64, 2].into_iter().enumerate() {
        let at = t0 + ms(100 * (i as u64 + 1));
        assert_eq!(triggers(&co.poll(at)), [id]);
        let actions = co.decline(c(id), sink(), "no", at).unwrap();
        assert!(fail_job(&actions).is_none(), "failure {id} is tolerated");
    }
    assert_eq!(co.consecutive_failures(), 2);
    co.poll(t0 + ms(300));
    let actions = co.decline(c(3), sink(), "no", t0 + ms(300)).unwrap();
    let reason = fail_job(&actions).expect("the third failure fails the job");
    assert_eq!(reason.consecutive, 3);
    assert_eq!(reason.tolerable, 2);
    assert_eq!(reason.last, c(3));
    assert!(
        reason
            .to_string()
            .contains("checkpoint 3 declined by task sink#0: no"),
        "{reason}"
    );
    // The scheduler stopped with the job; the count starts afresh.
    assert!(!co.is_running());
    assert_eq!(co.consecutive_failures(), 0);
    assert_eq!(co.poll(t0 + ms(10_000)), []);
    co.set_running(true, t0 + ms(20_000));
    assert_eq!(co.poll(t0 + ms(20_100)), [trigger(4)]);
}

#[test]
fn too_many_failures_names_the_count_in_words_that_agree() {
    let reason = |consecutive| TooManyFailures {
        consecutive,
        tolerable: consecutive - 1,
        last: c(4),
        last_reason: AbortReason::FinalizeFailed {
            message: "cannot write x: No space left on device (os error 28)".into(),
        },
    };
    assert_eq!(
        reason(1).to_string(),
        "1 checkpoint failure in a row exceeds the 0 tolerated (the last: checkpoint 4 \
         could not be recorded: cannot write x: No space left on device (os error 28)); \
         raise the tolerable failures of the job's checkpoint settings to tolerate more"
    );
    assert!(
        reason(3)
            .to_string()
            .starts_with("3 checkpoint failures in a row exceed the 2 tolerated"),
        "{}",
        reason(3)
    );
}

#[test]
fn zero_tolerable_failures_fails_the_job_at_the_first_and_aborts_the_rest() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.max_concurrent = 2);
    co.poll(t0 + ms(100));
    co.poll(t0 + ms(200));
    let actions = co.poll(t0 + ms(1100));
    assert_eq!(actions[0], abort(1, expired()));
    assert!(matches!(actions[1], Action::FailJob { .. }));
    assert_eq!(actions[2], abort(2, AbortReason::JobNotRunning));
    assert_eq!(actions.len(), 3);
}

#[test]
fn a_completed_checkpoint_resets_the_failure_count() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.tolerable_failures = 2);
    let outcomes = ["fail", "fail", "ok", "fail", "fail", "ok", "fail", "fail"];
    for (next, outcome) in (1..).zip(outcomes) {
        let now = t0 + ms(100 * next);
        assert_eq!(co.poll(now), [trigger(next)]);
        let actions = match outcome {
            "ok" => complete(&mut co, c(next), now),
            _ => co.decline(c(next), sink(), "no", now).unwrap(),
        };
        assert!(fail_job(&actions).is_none(), "{outcome} at {next}");
    }
    assert_eq!(co.consecutive_failures(), 2);
}

#[test]
fn savepoint_failures_neither_count_nor_reset() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.tolerable_failures = 1);
    co.poll(t0 + ms(100));
    co.decline(c(1), sink(), "no", t0 + ms(100)).unwrap();
    let (id, _) = co.trigger_savepoint(t0 + ms(110)).unwrap();
    let actions = co.decline(id, sink(), "no", t0 + ms(120)).unwrap();
    assert_eq!(
        actions,
        [Action::Abort {
            id,
            kind: SAVE,
            is_final: false,
            reason: AbortReason::Declined {
                task: sink(),
                reason: "no".into()
            }
        }]
    );
    assert_eq!(co.consecutive_failures(), 1);
    // A late acknowledgement names the kind, so the shell finds its state.
    assert_late_ack_discarded(&mut co, id, SAVE, &src(0), t0 + ms(125));
    let (id, _) = co.trigger_savepoint(t0 + ms(130)).unwrap();
    complete(&mut co, id, t0 + ms(140));
    assert_eq!(
        co.consecutive_failures(),
        1,
        "a savepoint does not reset the count"
    );
}

// ----- completion, pruning, subsumption ----------------------------------

#[test]
fn completion_notifies_every_task_and_records_statistics() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    let mut stats = CheckpointStats::default();
    let actions = co.poll(t0 + ms(100));
    record_actions(&mut stats, &co, &actions, t0 + ms(100));
    let mut actions = Vec::new();
    for (i, task) in all_tasks().into_iter().enumerate() {
        let at = t0 + ms(110 + 10 * i as u64);
        actions.extend(ack_recorded(&mut co, &mut stats, c(1), task, at));
    }
    let [
        Action::Finalize {
            id,
            kind,
            is_final,
            triggered_at,
            acks,
        },
    ] = &actions[..]
    else {
        panic!("{actions:?}");
    };
    assert_eq!(
        (*id, *kind, *is_final, *triggered_at),
        (c(1), CHK, false, t0 + ms(100))
    );
    assert_eq!(acks.keys().cloned().collect::<Vec<_>>(), {
        let mut tasks = all_tasks();
        tasks.sort();
        tasks
    });
    assert_eq!(acks[&sink()].handle, "chk-1/sink#0");
    assert_eq!(
        finalized_recorded(&mut co, &mut stats, c(1), t0 + ms(180)),
        [notify(1)]
    );
    let record = stats.latest_completed().unwrap();
    assert_eq!(record.duration(), Some(ms(80)));
    assert_eq!(record.bytes(), 400);
    assert_eq!(record.tasks[&sink()].cost.async_duration, ms(5));
    assert_eq!(stats.counts().completed, 1);
}

#[test]
fn completed_checkpoints_beyond_the_retained_count_are_pruned_but_never_savepoints() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.retained = 2);
    let mut pruned = Vec::new();
    let mut now = t0;
    for round in 0..4 {
        now += ms(100);
        let id = triggers(&co.poll(now))[0];
        pruned.push(pruned_ids(&complete(&mut co, c(id), now)));
        if round == 1 {
            let (sp, _) = co.trigger_savepoint(now).unwrap();
            let actions = complete(&mut co, sp, now);
            assert!(!actions.iter().any(|a| matches!(a, Action::Prune { .. })));
        }
    }
    // Checkpoints 1, 2, (savepoint 3), 4, 5.
    assert_eq!(pruned, [vec![], vec![], vec![1], vec![2]]);
    assert_eq!(co.retained().collect::<Vec<_>>(), [c(4), c(5)]);
}

#[test]
fn checkpoints_handed_over_from_a_restore_are_pruned_by_the_same_rule() {
    let t0 = Instant::now();
    let mut config = config();
    config.retained = 2;
    let mut co = Co::new(config, all_tasks(), [src(0), src(1)], c(8))
        .unwrap()
        .with_retained_checkpoints([c(5), c(6), c(7)].map(|id| (id, References::default())));
    assert_eq!(co.latest_completed(), Some(c(7)));
    co.set_running(true, t0);
    co.poll(t0 + ms(100));
    let actions = complete(&mut co, c(8), t0 + ms(110));
    assert!(
        actions.contains(&Action::Prune {
            completed: c(8),
            ids: vec![c(6), c(5)]
        }),
        "{actions:?}"
    );
    assert_eq!(co.retained().collect::<Vec<_>>(), [c(7), c(8)]);
}

/// Every task acknowledges `id` at `now`, `count#0` with a state that
/// builds on `chain`; then the metadata is written if all went in.
fn complete_chained(co: &mut Co, id: CheckpointId, chain: &[u64], now: Instant) -> Actions {
    let mut actions = ack_all_with(co, id, now, |ack| {
        ack.chain = chain.iter().copied().map(c).collect();
    });
    if actions
        .iter()
        .any(|a| matches!(a, Action::Finalize { id: f, .. } if *f == id))
    {
        actions.extend(co.finalized(id, Ok(()), now).unwrap());
        carry_out_prune(co, &actions, &[]);
    }
    actions
}

/// What a state whose chain is `ids` needs.
fn links(ids: &[u64]) -> References {
    References {
        links: ids.iter().copied().map(c).collect(),
        shared: BTreeSet::new(),
    }
}

/// The ids of every checkpoint `actions` prune, in order.
fn pruned_ids(actions: &[Action<String>]) -> Vec<u64> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Prune { ids, .. } => Some(ids.iter().map(|id| id.0)),
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn pruning_keeps_the_image_chains_of_retained_checkpoints_until_a_full_image() {
    // retained = 1, a full image every 4: 1 full, 2..4 deltas, 5 full, 6 delta.
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    let chains: [&[u64]; 6] = [&[], &[1], &[1, 2], &[1, 2, 3], &[], &[5]];
    let mut pruned_at = Vec::new();
    for (i, chain) in chains.iter().enumerate() {
        let at = t0 + ms(100 * (i as u64 + 1));
        co.poll(at);
        pruned_at.push(pruned_ids(&complete_chained(
            &mut co,
            c(i as u64 + 1),
            chain,
            at,
        )));
    }
    let none: &[u64] = &[];
    assert_eq!(pruned_at, [none, none, none, none, &[4, 3, 2, 1], none]);
    assert_eq!(co.retained().collect::<Vec<_>>(), [c(5), c(6)]);
}

#[test]
fn a_checkpoint_whose_chain_needs_an_aborted_one_is_aborted_without_counting() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.tolerable_failures = 1);
    co.poll(t0 + ms(100));
    complete(&mut co, c(1), t0 + ms(100));
    co.poll(t0 + ms(200));
    let declined = co.decline(c(2), src(0), "disk full", t0 + ms(210)).unwrap();
    assert!(declined.contains(&abort(
        2,
        AbortReason::Declined {
            task: src(0),
            reason: "disk full".into()
        }
    )));
    assert_eq!(co.consecutive_failures(), 1);
    // count#0 took its image of 3 before it heard of the abort of 2.
    co.poll(t0 + ms(300));
    let actions = complete_chained(&mut co, c(3), &[1, 2], t0 + ms(310));
    let reason = AbortReason::BrokenChain {
        task: TaskId::new("count", 0),
        link: c(2),
    };
    assert!(actions.contains(&abort(3, reason.clone())), "{actions:?}");
    assert!(!reason.counts_as_failure());
    assert_eq!(co.consecutive_failures(), 1, "not counted");
    assert!(
        reason.to_string().contains("builds on checkpoint 2"),
        "{reason}"
    );
    assert_eq!(co.retained().collect::<Vec<_>>(), [c(1)]);
    // A chain through the completed checkpoint 1 completes.
    co.poll(t0 + ms(400));
    let actions = complete_chained(&mut co, c(4), &[1], t0 + ms(410));
    assert!(actions.contains(&notify(4)), "{actions:?}");
    assert_eq!(co.retained().collect::<Vec<_>>(), [c(1), c(4)]);
}

#[test]
fn chains_handed_over_from_a_restore_keep_their_links() {
    let t0 = Instant::now();
    let mut co = Co::new(config(), all_tasks(), [src(0), src(1)], c(8))
        .unwrap()
        .with_retained_checkpoints([
            (c(5), References::default()),
            (c(6), links(&[5])),
            (c(7), links(&[5, 6])),
        ]);
    co.set_running(true, t0);
    co.poll(t0 + ms(100));
    let actions = complete_chained(&mut co, c(8), &[5, 6, 7], t0 + ms(110));
    assert_eq!(pruned_ids(&actions), Vec::<u64>::new());
    co.poll(t0 + ms(200));
    let actions = complete_chained(&mut co, c(9), &[], t0 + ms(210));
    assert_eq!(pruned_ids(&actions), [8, 7, 6, 5]);
}

/// Carries out the prune among `actions` as a shell whose storage could not
/// remove `stuck` (and every older checkpoint after it); the sweep the
/// coordinator then asks for, if any, reported as done.
fn carry_out_prune(co: &mut Co, actions: &[Action<String>], stuck: &[u64]) -> Option<Sweep> {
    let (completed, ids) = actions.iter().find_map(|a| match a {
        Action::Prune { completed, ids } => Some((*completed, ids.clone())),
        _ => None,
    })?;
    let not_removed = match ids.iter().position(|id| stuck.contains(&id.0)) {
        Some(first) => ids[first..].iter().copied().collect(),
        None => BTreeSet::new(),
    };
    let sweep = co.pruned(completed, &not_removed);
    if sweep.is_some() {
        co.swept(false);
    }
    sweep
}

/// A shared file of `count#0` written by checkpoint `writer`.
fn shared_file(writer: u64, local: &str) -> SharedFile {
    let name = crate::checkpoint::layout::CheckpointLayout::shared_file_name(
        c(writer),
        &TaskId::new("count", 0),
        local,
    )
    .unwrap();
    SharedFile {
        name,
        length: 30,
        crc32: 7,
    }
}

/// Every task acknowledges `id` at `now`, `count#0` naming the shared `files`;
/// then the metadata is written.
fn complete_sharing(co: &mut Co, id: CheckpointId, files: &[SharedFile], now: Instant) -> Actions {
    let mut actions = ack_all_with(co, id, now, |ack| ack.shared = files.to_vec());
    actions.extend(co.finalized(id, Ok(()), now).unwrap());
    actions
}

#[test]
fn the_first_completion_of_a_run_sweeps_and_later_ones_only_after_an_abort() {
    let t0 = Instant::now();
    let mut config = config();
    config.tolerable_failures = 5;
    let mut co = Co::new(config, all_tasks(), [src(0), src(1)], c(1)).unwrap();
    co.set_running(true, t0);
    co.poll(t0 + ms(100));
    let actions = complete_sharing(&mut co, c(1), &[], t0 + ms(110));
    assert_eq!(pruned_ids(&actions), Vec::<u64>::new());
    let sweep =
        carry_out_prune(&mut co, &actions, &[]).expect("the run before may have left files");
    assert_eq!(sweep.completed, c(1));
    // Nothing may be left behind: the prune of 1 comes without a sweep.
    co.poll(t0 + ms(200));
    let actions = complete_sharing(&mut co, c(2), &[], t0 + ms(210));
    assert_eq!(pruned_ids(&actions), [1]);
    assert_eq!(carry_out_prune(&mut co, &actions, &[]), None);
    // An abort may leave files behind: the next completion sweeps.
    co.poll(t0 + ms(300));
    co.decline(c(3), src(0), "disk full", t0 + ms(310)).unwrap();
    co.poll(t0 + ms(400));
    let actions = complete_sharing(&mut co, c(4), &[], t0 + ms(410));
    let sweep = carry_out_prune(&mut co, &actions, &[]).expect("an abort may leave files");
    assert_eq!(sweep.completed, c(4));
    // A sweep that failed is done again at the next completion.
    co.swept(true);
    co.poll(t0 + ms(500));
    let actions = complete_sharing(&mut co, c(5), &[], t0 + ms(510));
    assert!(carry_out_prune(&mut co, &actions, &[]).is_some());
    co.poll(t0 + ms(600));
    let actions = complete_sharing(&mut co, c(6), &[], t0 + ms(610));
    assert_eq!(carry_out_prune(&mut co, &actions, &[]), None);
}

#[test]
fn a_late_acknowledgement_of_an_aborted_checkpoint_is_swept_at_the_next_completion() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.tolerable_failures = 5);
    co.poll(t0 + ms(100));
    co.acknowledge(c(1), src(1), ack(c(1), &src(1)), t0 + ms(105))
        .unwrap();
    co.decline(c(1), src(0), "disk full", t0 + ms(110)).unwrap();
    co.poll(t0 + ms(200));
    let actions = complete_sharing(&mut co, c(2), &[], t0 + ms(210));
    assert!(carry_out_prune(&mut co, &actions, &[]).is_some());
    // count#0 wrote its state of 1 after that sweep.
    let late = co.acknowledge(
        c(1),
        TaskId::new("count", 0),
        ack(c(1), &src(0)),
        t0 + ms(220),
    );
    assert!(matches!(late.unwrap_err().reason, Ignored::Aborted { .. }));
    co.poll(t0 + ms(300));
    let actions = complete_sharing(&mut co, c(3), &[], t0 + ms(310));
    assert!(carry_out_prune(&mut co, &actions, &[]).is_some());
}

#[test]
fn a_pruned_checkpoint_that_could_not_be_removed_is_retried_and_its_shared_files_kept() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    let (a, b) = (shared_file(1, "a.sst"), shared_file(2, "b.sst"));
    co.poll(t0 + ms(100));
    let actions = complete_sharing(&mut co, c(1), std::slice::from_ref(&a), t0 + ms(110));
    assert_eq!(carry_out_prune(&mut co, &actions, &[]), None);
    // 2 no longer names a: pruning 1 leaves a to nobody, but 1 cannot be removed.
    co.poll(t0 + ms(200));
    let actions = complete_sharing(&mut co, c(2), std::slice::from_ref(&b), t0 + ms(210));
    assert_eq!(pruned_ids(&actions), [1]);
    let sweep = carry_out_prune(&mut co, &actions, &[1]).expect("1 named shared files");
    assert_eq!(
        sweep.needed_shared,
        [a.name.clone(), b.name.clone()].into(),
        "1 is still on disk: its files stay"
    );
    // The next completion tries 1 again; once it is gone, a goes too.
    co.poll(t0 + ms(300));
    let actions = complete_sharing(&mut co, c(3), std::slice::from_ref(&b), t0 + ms(310));
    assert_eq!(pruned_ids(&actions), [2, 1]);
    let sweep = carry_out_prune(&mut co, &actions, &[]).expect("1 named shared files");
    assert_eq!(sweep.needed_shared, [b.name.clone()].into());
    co.poll(t0 + ms(400));
    let actions = complete_sharing(&mut co, c(4), std::slice::from_ref(&b), t0 + ms(410));
    assert_eq!(pruned_ids(&actions), [3]);
    let sweep = carry_out_prune(&mut co, &actions, &[]).expect("3 named shared files");
    assert_eq!(
        sweep.needed_shared,
        [b.name.clone()].into(),
        "b is still named by 4"
    );
}

#[test]
fn shared_files_named_by_acknowledgements_in_flight_are_needed() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.max_concurrent = 2);
    let (a, b) = (shared_file(1, "a.sst"), shared_file(2, "b.sst"));
    co.poll(t0 + ms(100));
    let actions = complete_sharing(&mut co, c(1), std::slice::from_ref(&a), t0 + ms(110));
    carry_out_prune(&mut co, &actions, &[]);
    co.poll(t0 + ms(200));
    co.poll(t0 + ms(300));
    assert_eq!(
        co.pending().map(|p| p.id()).collect::<Vec<_>>(),
        [c(2), c(3)]
    );
    // count#0 acknowledges 3, naming a again and its new b, before 2 completes.
    let count = TaskId::new("count", 0);
    let mut ack3 = ack(c(3), &count);
    ack3.shared = vec![a.clone(), b.clone()];
    co.acknowledge(c(3), count, ack3, t0 + ms(305)).unwrap();
    // 2 names neither (say its count#0 state was all in its file): pruning 1 drops a from
    // retention, but 3 in flight still names it.
    let actions = complete_sharing(&mut co, c(2), &[], t0 + ms(310));
    assert_eq!(pruned_ids(&actions), [1]);
    let sweep = carry_out_prune(&mut co, &actions, &[]).expect("1 named shared files");
    assert_eq!(sweep.in_flight, [c(3)].into());
    assert_eq!(sweep.needed_shared, [a.name.clone(), b.name.clone()].into());
}

#[test]
fn completing_a_checkpoint_subsumes_older_pending_checkpoints_without_counting() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.max_concurrent = 3);
    co.poll(t0 + ms(100));
    let (savepoint, _) = co.trigger_savepoint(t0 + ms(150)).unwrap();
    co.poll(t0 + ms(200));
    assert_eq!(co.in_flight(), 3);
    let actions = complete(&mut co, c(3), t0 + ms(250));
    assert!(
        actions.contains(&abort(1, AbortReason::Subsumed { by: c(3) })),
        "{actions:?}"
    );
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Abort { id, .. } if *id == savepoint)),
        "savepoints are never subsumed"
    );
    assert_eq!(co.consecutive_failures(), 0);
    assert_eq!(
        co.pending().map(|p| p.id()).collect::<Vec<_>>(),
        [savepoint]
    );
    // A late acknowledgement of the subsumed checkpoint is handed back.
    assert_late_ack_discarded(&mut co, c(1), CHK, &src(0), t0 + ms(260));
}

#[test]
fn an_older_checkpoint_finalized_after_a_newer_one_is_retained_but_not_notified() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| {
        config.max_concurrent = 2;
        config.retained = 3;
    });
    co.poll(t0 + ms(100));
    co.poll(t0 + ms(200));
    ack_all(&mut co, c(1), t0 + ms(210)); // 1 is finalizing: not subsumed
    let actions = complete(&mut co, c(2), t0 + ms(220));
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Abort { .. })),
        "{actions:?}"
    );
    assert!(actions.contains(&notify(2)));
    let actions = co.finalized(c(1), Ok(()), t0 + ms(230)).unwrap();
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::NotifyComplete { .. }))
    );
    assert_eq!(co.retained().collect::<Vec<_>>(), [c(1), c(2)]);
    assert_eq!(co.latest_completed(), Some(c(2)));
}

#[test]
fn a_failure_older_than_the_latest_completed_checkpoint_does_not_count() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.max_concurrent = 2);
    co.poll(t0 + ms(100));
    co.poll(t0 + ms(200));
    ack_all(&mut co, c(1), t0 + ms(210));
    complete(&mut co, c(2), t0 + ms(220));
    let actions = co.finalized(c(1), Err("io".into()), t0 + ms(230)).unwrap();
    assert!(fail_job(&actions).is_none(), "{actions:?}");
    assert_eq!(co.consecutive_failures(), 0);
}

// ----- ignored messages --------------------------------------------------

#[test]
fn unknown_duplicate_and_foreign_acknowledgements_are_ignored() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    co.poll(t0 + ms(100));
    let unknown = ack_refused(&mut co, c(7), &sink(), t0);
    assert_eq!(unknown.reason, Ignored::UnknownCheckpoint { id: c(7) });
    assert_eq!(unknown.state_to_discard(), None);
    assert_eq!(
        unknown.ack.handle, "chk-7/sink#0",
        "the acknowledgement is handed back"
    );

    // While the checkpoint waits for the others, once every task has acknowledged, and after
    // completion: every acknowledging task's second acknowledgement is a duplicate, and a
    // stranger's is told apart from one.
    co.acknowledge(c(1), sink(), ack(c(1), &sink()), t0)
        .unwrap();
    let rest: Vec<TaskId> = all_tasks().into_iter().filter(|t| *t != sink()).collect();
    let stranger = TaskId::new("stranger", 3);
    for stage in ["one acknowledged", "all acknowledged", "completed"] {
        let acknowledged = match stage {
            "one acknowledged" => vec![sink()],
            "all acknowledged" => {
                for task in &rest {
                    co.acknowledge(c(1), task.clone(), ack(c(1), task), t0)
                        .unwrap();
                }
                all_tasks()
            }
            _ => {
                co.finalized(c(1), Ok(()), t0 + ms(150)).unwrap();
                all_tasks()
            }
        };
        for task in acknowledged {
            let dup = ack_refused(&mut co, c(1), &task, t0);
            assert_eq!(dup.reason, Ignored::Duplicate { id: c(1), task }, "{stage}");
            assert_eq!(
                dup.state_to_discard(),
                None,
                "a duplicate may point at the accepted state"
            );
        }
        let foreign = ack_refused(&mut co, c(1), &stranger, t0);
        let task = stranger.clone();
        assert_eq!(
            foreign.reason,
            Ignored::UnknownTask { id: c(1), task },
            "{stage}"
        );
    }
}

#[test]
fn unexpected_finalize_reports_are_ignored() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    assert_eq!(
        co.finalized(c(1), Ok(()), t0).unwrap_err(),
        Ignored::UnknownCheckpoint { id: c(1) }
    );
    co.poll(t0 + ms(100));
    assert_eq!(
        co.finalized(c(1), Ok(()), t0).unwrap_err(),
        Ignored::AwaitingAcknowledgements { id: c(1) }
    );
    complete(&mut co, c(1), t0 + ms(110));
    assert_eq!(
        co.finalized(c(1), Ok(()), t0).unwrap_err(),
        Ignored::Complete { id: c(1) }
    );
    assert!(!Ignored::Complete { id: c(1) }.to_string().is_empty());
}

#[test]
fn ignored_messages_change_nothing() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    co.poll(t0 + ms(100));
    let deadline = co.next_deadline();
    // Ignored messages carry a `now` past every deadline: still nothing happens.
    let late = t0 + ms(60_000);
    let _ = co.acknowledge(c(9), sink(), ack(c(9), &sink()), late);
    let _ = co.decline(c(9), sink(), "x", late);
    let _ = co.finalized(c(9), Ok(()), late);
    let _ = co.source_finished(sink(), late);
    assert_eq!(co.next_deadline(), deadline);
    assert_eq!(co.in_flight(), 1);
}

// ----- final checkpoint ----------------------------------------------------

#[test]
fn final_checkpoint_is_triggered_when_every_source_finished_even_without_periodic_checkpoints() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.interval = None);
    assert_eq!(co.source_finished(src(0), t0 + ms(10)).unwrap(), []);
    assert_eq!(
        co.source_finished(src(0), t0 + ms(11)).unwrap(),
        [],
        "repeats are harmless"
    );
    assert_eq!(
        co.source_finished(sink(), t0 + ms(12)).unwrap_err(),
        Ignored::UnknownSource { task: sink() }
    );
    let actions = co.source_finished(src(1), t0 + ms(20)).unwrap();
    assert_eq!(
        actions,
        [Action::Trigger {
            id: c(1),
            kind: CHK,
            is_final: true
        }]
    );
    let actions = complete(&mut co, c(1), t0 + ms(30));
    assert!(matches!(
        actions[0],
        Action::Finalize { is_final: true, .. }
    ));
    assert_eq!(
        actions.last(),
        Some(&Action::NotifyComplete {
            id: c(1),
            kind: CHK,
            is_final: true
        })
    );
    assert!(co.is_finished());
    assert_eq!(co.next_deadline(), None);
    assert_eq!(co.poll(t0 + ms(100_000)), []);
    assert_eq!(
        co.trigger_savepoint(t0 + ms(100_000)).unwrap_err(),
        SavepointRefused::Finished { id: c(1) }
    );
}

#[test]
fn final_checkpoint_ignores_interval_min_pause_and_max_concurrent_and_stops_periodic_ones() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| {
        config.min_pause = ms(500);
        config.max_concurrent = 1;
    });
    co.poll(t0 + ms(100));
    complete(&mut co, c(1), t0 + ms(110));
    co.poll(t0 + ms(610));
    assert_eq!(co.in_flight(), 1, "checkpoint 2 is pending");
    co.source_finished(src(0), t0 + ms(620)).unwrap();
    let actions = co.source_finished(src(1), t0 + ms(630)).unwrap();
    assert_eq!(
        actions,
        [Action::Trigger {
            id: c(3),
            kind: CHK,
            is_final: true
        }]
    );
    // Checkpoint 2 may still complete; no more periodic checkpoints.
    complete(&mut co, c(2), t0 + ms(640));
    assert_eq!(co.poll(t0 + ms(1000)), []);
    assert_eq!(
        co.next_deadline(),
        Some(t0 + ms(1630)),
        "only the final's timeout"
    );
}

fn abort_final(id: u64, reason: AbortReason) -> Action<String> {
    Action::Abort {
        id: c(id),
        kind: CHK,
        is_final: true,
        reason,
    }
}

#[test]
fn failed_final_checkpoint_is_retried_at_once() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.tolerable_failures = 3);
    co.source_finished(src(0), t0).unwrap();
    co.source_finished(src(1), t0).unwrap();
    let actions = co.decline(c(1), sink(), "busy", t0 + ms(10)).unwrap();
    let reason = AbortReason::Declined {
        task: sink(),
        reason: "busy".into(),
    };
    assert_eq!(
        actions,
        [
            abort_final(1, reason),
            Action::Trigger {
                id: c(2),
                kind: CHK,
                is_final: true
            }
        ]
    );
    let actions = co.poll(t0 + ms(1010));
    assert_eq!(
        actions,
        [
            abort_final(2, expired()),
            Action::Trigger {
                id: c(3),
                kind: CHK,
                is_final: true
            }
        ]
    );
    assert_eq!(co.consecutive_failures(), 2);
}

#[test]
fn sources_that_finished_before_a_restart_must_finish_again() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    co.source_finished(src(0), t0).unwrap();
    co.set_running(false, t0 + ms(10));
    co.set_running(true, t0 + ms(20));
    assert_eq!(co.source_finished(src(1), t0 + ms(30)).unwrap(), []);
    assert_eq!(
        co.poll(t0 + ms(120)),
        [trigger(1)],
        "periodic checkpoints go on"
    );
}

#[test]
fn sources_finishing_before_the_job_runs_trigger_the_final_checkpoint_when_it_does() {
    let t0 = Instant::now();
    let mut co = coordinator(config());
    co.source_finished(src(0), t0).unwrap();
    assert_eq!(co.source_finished(src(1), t0).unwrap(), []);
    assert_eq!(
        co.set_running(true, t0 + ms(5)),
        [Action::Trigger {
            id: c(1),
            kind: CHK,
            is_final: true
        }]
    );
}

// ----- savepoints ------------------------------------------------------------

#[test]
fn savepoint_while_periodic_checkpoints_are_off() {
    let t0 = Instant::now();
    let mut config = config();
    config.interval = None;
    let mut co = coordinator(config);
    assert_eq!(
        co.trigger_savepoint(t0).unwrap_err(),
        SavepointRefused::NotRunning
    );
    co.set_running(true, t0);
    let mut stats = CheckpointStats::default();
    let (id, actions) = co.trigger_savepoint(t0 + ms(5)).unwrap();
    record_actions(&mut stats, &co, &actions, t0 + ms(5));
    assert_eq!(id, c(1));
    assert_eq!(
        actions,
        [Action::Trigger {
            id,
            kind: SAVE,
            is_final: false
        }]
    );
    let now = t0 + ms(50);
    let mut actions = Vec::new();
    for task in all_tasks() {
        actions.extend(ack_recorded(&mut co, &mut stats, id, task, now));
    }
    actions.extend(finalized_recorded(&mut co, &mut stats, id, now));
    // Not notified (no side effects committed for an intermediate
    // savepoint), not retained, never pruned.
    assert!(
        matches!(actions[..], [Action::Finalize { kind: SAVE, .. }]),
        "{actions:?}"
    );
    assert_eq!(co.retained().count(), 0);
    assert_eq!(co.latest_completed(), None);
    assert_eq!(stats.latest_savepoint().unwrap().id, id);
    assert_eq!(co.next_deadline(), None);
}

#[test]
fn savepoint_ignores_max_concurrent_and_min_pause_but_blocks_periodic_checkpoints() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| config.min_pause = ms(1000));
    co.poll(t0 + ms(100));
    let (sp, _) = co.trigger_savepoint(t0 + ms(110)).unwrap();
    assert_eq!(sp, c(2));
    assert_eq!(co.in_flight(), 2);
    complete(&mut co, c(1), t0 + ms(120));
    let (sp2, _) = co.trigger_savepoint(t0 + ms(130)).unwrap();
    assert_eq!(sp2, c(3), "min pause does not apply to savepoints");
    complete(&mut co, sp, t0 + ms(140));
    complete(&mut co, sp2, t0 + ms(150));
    // The savepoint's completion counts for min pause: 150 + 1000.
    assert_eq!(co.next_deadline(), Some(t0 + ms(1150)));
}

#[test]
fn stop_with_savepoint_is_notified_as_final_and_pauses_periodic_checkpoints() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    let (id, actions) = co.stop_with_savepoint(t0 + ms(50)).unwrap();
    assert_eq!(
        actions,
        [Action::Trigger {
            id,
            kind: SAVE,
            is_final: true
        }]
    );
    assert_eq!(
        co.trigger_savepoint(t0 + ms(60)).unwrap_err(),
        SavepointRefused::Finishing { id }
    );
    assert_eq!(
        co.poll(t0 + ms(500)),
        [],
        "no periodic checkpoint while stopping"
    );
    let actions = complete(&mut co, id, t0 + ms(600));
    assert_eq!(
        actions.last(),
        Some(&Action::NotifyComplete {
            id,
            kind: SAVE,
            is_final: true
        })
    );
    assert!(co.is_finished());
}

#[test]
fn failed_stop_with_savepoint_lets_the_job_go_on() {
    let t0 = Instant::now();
    let mut co = running(config(), t0);
    let (id, _) = co.stop_with_savepoint(t0 + ms(50)).unwrap();
    let actions = co.decline(id, sink(), "no", t0 + ms(60)).unwrap();
    assert!(matches!(
        actions[..],
        [Action::Abort {
            kind: SAVE,
            is_final: true,
            ..
        }]
    ));
    assert!(!co.is_finished());
    assert_eq!(co.consecutive_failures(), 0);
    assert_eq!(co.poll(t0 + ms(100)), [trigger(2)]);
}

// ----- next_deadline ---------------------------------------------------------

#[test]
fn next_deadline_is_the_earliest_of_timeout_and_next_trigger() {
    let t0 = Instant::now();
    let mut co = running_with(t0, |config| {
        config.max_concurrent = 3;
        config.timeout = ms(150);
        config.tolerable_failures = 10;
    });
    assert_eq!(co.next_deadline(), Some(t0 + ms(100)));
    co.poll(t0 + ms(100));
    // Next trigger at 200, timeout of 1 at 250.
    assert_eq!(co.next_deadline(), Some(t0 + ms(200)));
    co.poll(t0 + ms(200));
    // Timeout of 1 at 250, next trigger at 300.
    assert_eq!(co.next_deadline(), Some(t0 + ms(250)));
    let actions = co.poll(t0 + ms(250));
    assert_eq!(
        actions,
        [abort(1, AbortReason::Expired { timeout: ms(150) })]
    );
    assert_eq!(co.next_deadline(), Some(t0 + ms(300)));
    co.set_running(false, t0 + ms(260));
    assert_eq!(co.next_deadline(), None);
}

/// One step of a random run.
#[derive(Debug, Clone)]
enum Step {
    Wait(u64),
    Poll,
    AckAll(usize),
    AckOne(usize, usize),
    Decline(usize),
    Finalize(usize, bool),
    Running(bool),
    Savepoint,
    SourceFinished(u32),
}

fn step_strategy() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (1u64..300).prop_map(Step::Wait),
        3 => Just(Step::Poll),
        3 => any::<usize>().prop_map(Step::AckAll),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::AckOne(a, b)),
        1 => any::<usize>().prop_map(Step::Decline),
        3 => (any::<usize>(), prop::bool::weighted(0.9)).prop_map(|(a, b)| Step::Finalize(a, b)),
        1 => any::<bool>().prop_map(Step::Running),
        1 => Just(Step::Savepoint),
        1 => (0u32..2).prop_map(Step::SourceFinished),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever happens, after every call nothing is overdue (so sleeping
    /// until `next_deadline` misses nothing), periodic triggers respect
    /// interval, min pause and max concurrent, ids only grow, pruning
    /// keeps `retained` checkpoints, and the statistics the shell records
    /// from the actions (a trigger opens a checkpoint, an abort or a written
    /// metadata closes it) count as many in progress as are in flight.
    #[test]
    fn random_runs_keep_the_scheduling_invariants(
        steps in prop::collection::vec(step_strategy(), 1..120),
        min_pause in 0u64..150,
        max_concurrent in 1u32..3,
    ) {
        let t0 = Instant::now();
        let mut config = config();
        config.min_pause = ms(min_pause);
        config.max_concurrent = max_concurrent;
        config.timeout = ms(400);
        config.tolerable_failures = 2;
        config.retained = 2;
        let interval = ms(100);
        let mut co = coordinator(config);
        let mut now = t0;
        let mut last_id = 0u64;
        let mut last_periodic: Option<Instant> = None;
        let mut running_since: Option<Instant> = None;
        let mut last_completion: Option<Instant> = None;
        let mut stats = CheckpointStats::default();
        for step in steps {
            // The checkpoint whose metadata this step wrote, if it did.
            let mut completed = None;
            let pick = |co: &Co, i: usize| {
                let ids: Vec<CheckpointId> = co.pending().map(|p| p.id()).collect();
                (!ids.is_empty()).then(|| ids[i % ids.len()])
            };
            let was_running = co.is_running();
            // `None`: no call, or the call was ignored (it changes nothing).
            let outcome: Option<Actions> = match step {
                Step::Wait(n) => {
                    now += ms(n);
                    None
                }
                Step::Poll => Some(co.poll(now)),
                Step::AckAll(i) => pick(&co, i).map(|id| {
                    let awaiting: Vec<TaskId> = co
                        .pending()
                        .find(|p| p.id() == id)
                        .unwrap()
                        .awaiting()
                        .cloned()
                        .collect();
                    let mut actions = Vec::new();
                    for task in awaiting {
                        let ack = ack(id, &task);
                        // An earlier acknowledgement's call may have
                        // expired the checkpoint: then the rest are late.
                        match co.acknowledge(id, task, ack, now) {
                            Ok(more) => actions.extend(more),
                            Err(late) => {
                                assert!(matches!(late.reason, Ignored::Aborted { id: late_id, .. } if late_id == id));
                                break;
                            }
                        }
                    }
                    actions
                }),
                Step::AckOne(i, t) => pick(&co, i).and_then(|id| {
                    let task = all_tasks()[t % 4].clone();
                    co.acknowledge(id, task.clone(), ack(id, &task), now).ok()
                }),
                Step::Decline(i) => {
                    pick(&co, i).map(|id| co.decline(id, sink(), "no", now).unwrap())
                }
                Step::Finalize(i, ok) => {
                    let ids: Vec<CheckpointId> = co.finalizing().collect();
                    (!ids.is_empty()).then(|| {
                        let id = ids[i % ids.len()];
                        let result = if ok { Ok(()) } else { Err("io".to_owned()) };
                        if ok {
                            completed = Some(id);
                        }
                        co.finalized(id, result, now).unwrap()
                    })
                }
                Step::Running(on) => Some(co.set_running(on, now)),
                Step::Savepoint => co.trigger_savepoint(now).map(|(_, a)| a).ok(),
                Step::SourceFinished(i) => Some(co.source_finished(src(i), now).unwrap()),
            };
            let called = outcome.is_some();
            let actions = outcome.unwrap_or_default();
            if !was_running && co.is_running() {
                running_since = Some(now);
                last_periodic = None;
            }
            if let Some(id) = completed {
                stats.completed(id, now);
                last_completion = Some(now);
            }
            record_actions(&mut stats, &co, &actions, now);
            for action in &actions {
                if let Action::Trigger { id, kind, is_final } = action {
                    prop_assert!(id.0 > last_id, "ids grow: {:?}", actions);
                    last_id = id.0;
                    if *kind == CHK && !*is_final {
                        // Triggers come last in a call: before this one,
                        // fewer than max_concurrent were in flight.
                        prop_assert!(co.in_flight() <= max_concurrent as usize, "{:?}", actions);
                        let base = last_periodic.or(running_since).unwrap();
                        prop_assert!(now >= base + interval);
                        if let Some(done) = last_completion {
                            prop_assert!(now >= done + ms(min_pause));
                        }
                        last_periodic = Some(now);
                    }
                }
            }
            prop_assert!(co.retained().count() <= 2);
            if called {
                prop_assert!(
                    co.next_deadline().is_none_or(|d| d > now),
                    "overdue after a call: {:?} <= {:?}",
                    co.next_deadline(),
                    now
                );
            }
            let counts = stats.counts();
            prop_assert_eq!(counts.in_progress as usize, co.in_flight());
        }
    }
}
