//! The driver of one attempt: the imperative shell around the checkpoint
//! [`Coordinator`]. It feeds the coordinator facts (task events, the clock,
//! user requests) and carries out its actions (trigger sources, write
//! metadata, notify tasks, remove files), until the attempt ends. On the way
//! it records what those facts and actions say about each checkpoint in the
//! job monitor's statistics (the coordinator keeps none): a trigger, an
//! accepted acknowledgement, a completion, an abort.
//!
//! # Files of aborted checkpoints
//!
//! An aborted checkpoint's directory is removed when the abort is decided.
//! That can leave a directory behind in two ways: a task's state write still
//! under way recreates it (the write started before the abort), or the
//! removal itself fails (a read-only or failing disk). So the driver also
//! removes it again when that task's late acknowledgement *or decline*
//! arrives (the event is sent after the write returned, so nothing writes
//! there afterwards). What may still be left, and the checkpoints and shared
//! files retention drops, the coordinator decides ([`Action::Prune`], then
//! [`Sweep`]); the driver only lists and removes
//! ([`stray_checkpoints`], [`shared_files_to_remove`]) and reports what it
//! could not. What a crash or the end of the job leaves is removed by the
//! storage's cleanup when the job ends and starts.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use tokio::sync::mpsc::UnboundedReceiver;

use super::attempt::Attempt;
use super::history::HistoryRecorder;
use super::monitor::JobMonitor;
use super::request::{
    JobRequest, RescaleError, RescaleReply, SavepointError, SavepointReply, SavepointTaken,
};
use crate::checkpoint::coordinator::{Action, Coordinator, Ignored, Sweep};
use crate::checkpoint::metadata::{CheckpointMetadata, JobIdentity, StateHandle};
use crate::checkpoint::recovery::{shared_files_to_remove, stray_checkpoints};
use crate::checkpoint::stats::TaskStats;
use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use crate::dataflow::error::TaskError;
use crate::dataflow::message::Control;
use crate::dataflow::persist::TaskEvent;
use crate::ids::Barrier;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::job::{Job, JobStatus};
use crate::kill_point::{self, KillPoint};

/// How an attempt ended.
#[derive(Debug)]
pub(crate) enum AttemptEnd {
    /// Every input was consumed and the final checkpoint completed.
    Finished,
    /// Cancelled on request.
    Canceled,
    /// Stopped after the savepoint at this path completed.
    StoppedWithSavepoint(PathBuf),
    /// Stopped after the savepoint of a rescale completed: the job goes on from it as `next`.
    Rescaled {
        /// The savepoint.
        savepoint: SavepointTaken,
        /// The job at its new parallelisms.
        next: Box<Job>,
        /// Who waits to hear how the rescale went.
        reply: RescaleReply,
    },
    /// A task failed, or too many checkpoints did: fail over.
    Failed(String),
    /// A task could not take up its restored state: refused at the start of a run, a
    /// failure like [`AttemptEnd::Failed`] on a restart.
    RestoreFailed(String),
    /// A newer run of the job claimed a generation on the checkpoint storage
    /// (`checkpoint/generation.rs`): stop, without restarting.
    Superseded(String),
}

/// What the driver works with.
pub(crate) struct Driver<'a> {
    /// What each checkpoint's metadata records of the job (made once per attempt).
    pub identity: &'a JobIdentity,
    /// The job the attempt runs.
    pub job: &'a Job,
    pub storage: Arc<dyn CheckpointStorage>,
    pub coordinator: Coordinator<StateHandle>,
    pub attempt: Attempt,
    pub events: &'a mut UnboundedReceiver<TaskEvent>,
    pub requests: &'a mut UnboundedReceiver<JobRequest>,
    pub monitor: &'a JobMonitor,
    /// Savepoints someone waits for, by id: answered when each completes or
    /// is aborted, and when the attempt ends before that. Start empty.
    pub replies: BTreeMap<CheckpointId, SavepointReply>,
    /// The job's checkpoint history: every id is reserved in it before its
    /// barrier leaves, and every completion recorded.
    pub history: &'a mut HistoryRecorder,
    /// The rescale whose savepoint is under way, if any. Start with `None`.
    pub rescale: Option<PendingRescale>,
}

/// A rescale whose savepoint is under way.
#[derive(Debug)]
pub(crate) struct PendingRescale {
    /// The savepoint's id.
    id: CheckpointId,
    /// The job at its new parallelisms.
    next: Job,
    /// Who waits to hear how it went.
    reply: RescaleReply,
}

/// The driver's verdict after one step.
enum Step {
    Continue,
    End(AttemptEnd),
    /// A task stopped without a failure of its own before the job ended:
    /// typically a neighbour failed and closed its channels. The attempt ends,
    /// and the neighbour's failure, reported during shutdown, names the cause.
    Lost(String),
}

impl Driver<'_> {
    /// Runs the attempt to its end, then stops every task.
    pub(crate) async fn run(mut self) -> (AttemptEnd, CheckpointId) {
        let now = Instant::now();
        let actions = self.coordinator.set_running(true, now);
        let mut end = match self.carry_out(actions, now).await {
            Step::End(end) => Some(end),
            Step::Continue | Step::Lost(_) => None,
        };
        // Tasks whose exit the loop consumed: shutdown must not wait for them again.
        let mut exited = HashSet::new();
        let mut lost = false;
        while end.is_none() {
            let deadline = self.coordinator.next_deadline();
            let step = tokio::select! {
                event = self.events.recv() => match event {
                    Some(event) => {
                        if let TaskEvent::Exited { task, .. } = &event {
                            exited.insert(task.clone());
                        }
                        self.on_event(event).await
                    }
                    None => Step::End(AttemptEnd::Failed("every task channel closed".into())),
                },
                request = self.requests.recv(), if !self.requests.is_closed() => match request {
                    Some(request) => self.on_request(request).await,
                    None => Step::Continue,
                },
                () = sleep_until(deadline) => {
                    let now = Instant::now();
                    let actions = self.coordinator.poll(now);
                    self.carry_out(actions, now).await
                }
            };
            match step {
                Step::Continue => {}
                Step::End(e) => end = Some(e),
                Step::Lost(reason) => {
                    lost = true;
                    end = Some(AttemptEnd::Failed(reason));
                }
            }
        }
        let end = end.expect("loop ends with an end");
        let ended = match &end {
            AttemptEnd::Finished => "finished".to_string(),
            AttemptEnd::Canceled => "was cancelled".to_string(),
            AttemptEnd::StoppedWithSavepoint(_) | AttemptEnd::Rescaled { .. } => {
                "stopped".to_string()
            }
            AttemptEnd::Failed(reason) | AttemptEnd::RestoreFailed(reason) => {
                format!("failed ({reason})")
            }
            AttemptEnd::Superseded(_) => "was superseded by a newer run".to_string(),
        };
        let graceful = matches!(
            end,
            AttemptEnd::Finished
                | AttemptEnd::StoppedWithSavepoint(_)
                | AttemptEnd::Rescaled { .. }
        );
        let stopped_at = Instant::now();
        let aborted = self.coordinator.set_running(false, stopped_at);
        let next_id = self.coordinator.next_id();
        let shutdown_failure = self.shutdown(graceful, &exited).await;
        // Checkpoints still pending when the attempt ended: remove their files.
        let _ = self.carry_out(aborted, stopped_at).await;
        for (id, reply) in std::mem::take(&mut self.replies) {
            reply.send(Err(SavepointError::Failed {
                id,
                reason: format!("the job {ended} before the savepoint completed"),
            }));
        }
        if let Some(PendingRescale { id, reply, .. }) = self.rescale.take() {
            reply.send(Err(RescaleError::Savepoint(SavepointError::Failed {
                id,
                reason: format!("the job {ended} before the savepoint completed"),
            })));
        }
        let end = match (end, shutdown_failure) {
            (AttemptEnd::Finished, Some(failure)) => AttemptEnd::Failed(failure),
            (AttemptEnd::Failed(_), Some(failure)) if lost => AttemptEnd::Failed(failure),
            (end, _) => end,
        };
        (end, next_id)
    }

    async fn on_event(&mut self, event: TaskEvent) -> Step {
        let now = Instant::now();
        match event {
            TaskEvent::Ack { id, task, ack } => {
                // Taken before the coordinator owns the acknowledgement; a
                // copy of five numbers, once per task and checkpoint.
                let measured = TaskStats::acknowledged(&ack, now);
                match self.coordinator.acknowledge(id, task.clone(), ack, now) {
                    Ok(actions) => {
                        self.monitor
                            .record_checkpoint(|stats| stats.acknowledged(id, task, measured));
                        self.carry_out(actions, now).await
                    }
                    Err(ignored) => {
                        tracing::debug!(
                            "ignoring the acknowledgement of {task} for checkpoint {id}: {:?}",
                            ignored.reason
                        );
                        if let Some(kind) = ignored.state_to_discard() {
                            // The abort removed the checkpoint's files before this one was written.
                            let _ = self.discard(kind, id).await;
                        }
                        Step::Continue
                    }
                }
            }
            TaskEvent::Decline { id, task, reason } => {
                match self
                    .coordinator
                    .decline(id, task.clone(), reason.to_string(), now)
                {
                    Ok(actions) => self.carry_out(actions, now).await,
                    Err(ignored) => {
                        tracing::debug!(
                            "ignoring the decline of {task} for checkpoint {id}: {ignored:?}"
                        );
                        if let Ignored::Aborted { kind, .. } = ignored {
                            // A write that failed after the abort may have recreated the
                            // checkpoint's directory (and left part of a file in it).
                            let _ = self.discard(kind, id).await;
                        }
                        Step::Continue
                    }
                }
            }
            TaskEvent::SourceFinished(task) => match self.coordinator.source_finished(task, now) {
                Ok(actions) => self.carry_out(actions, now).await,
                Err(ignored) => {
                    tracing::debug!("ignoring a source's end: {ignored:?}");
                    Step::Continue
                }
            },
            TaskEvent::Exited { task, result } => match result {
                Ok(()) | Err(TaskError::Stopped) => {
                    Step::Lost(format!("task {task} exited before the job ended"))
                }
                Err(error) if error.is_restoring() => Step::End(AttemptEnd::RestoreFailed(
                    format!("task {task} failed: {error}"),
                )),
                Err(error) => Step::End(AttemptEnd::Failed(format!("task {task} failed: {error}"))),
            },
        }
    }

    async fn on_request(&mut self, request: JobRequest) -> Step {
        let now = Instant::now();
        let (stop, reply) = match request {
            JobRequest::Cancel => {
                self.monitor.set_status(JobStatus::Cancelling);
                return Step::End(AttemptEnd::Canceled);
            }
            JobRequest::StopWithSavepoint => (true, None),
            JobRequest::Savepoint { stop, reply } => (stop, Some(reply)),
            JobRequest::Rescale { parallelism, reply } => {
                return self.on_rescale(&parallelism, reply, now).await;
            }
        };
        let result = if stop {
            self.coordinator.stop_with_savepoint(now)
        } else {
            self.coordinator.trigger_savepoint(now)
        };
        match result {
            Ok((id, actions)) => {
                tracing::info!("savepoint {id} triggered");
                if let Some(reply) = reply {
                    self.replies.insert(id, reply);
                }
                self.carry_out(actions, now).await
            }
            Err(refused) => {
                tracing::warn!("savepoint refused: {refused}");
                match reply {
                    // Whoever asked hears why, and decides what to do next.
                    Some(reply) => {
                        reply.send(Err(SavepointError::Refused(refused.to_string())));
                        Step::Continue
                    }
                    // A stop asked again while the job already ends (its stop's savepoint or
                    // its final checkpoint in flight or done): that ending is the stop.
                    None if stop && refused.job_is_ending() => Step::Continue,
                    // The user wants the job to stop; without a savepoint, it is a cancel.
                    None if stop => Step::End(AttemptEnd::Canceled),
                    None => Step::Continue,
                }
            }
        }
    }

    /// A rescale request: refused at once when the job cannot run at those parallelisms or a
    /// savepoint cannot be taken now; otherwise the savepoint that stops the attempt.
    async fn on_rescale(
        &mut self,
        parallelism: &BTreeMap<String, u32>,
        reply: RescaleReply,
        now: Instant,
    ) -> Step {
        let next = match self.job.with_parallelism(parallelism) {
            Ok(next) => next,
            Err(refused) => {
                tracing::warn!("rescale refused: {refused}");
                reply.send(Err(RescaleError::Refused(refused.to_string())));
                return Step::Continue;
            }
        };
        if self.rescale.is_some() {
            reply.send(Err(RescaleError::Refused(
                "another rescale is under way".into(),
            )));
            return Step::Continue;
        }
        match self.coordinator.stop_with_savepoint(now) {
            Ok((id, actions)) => {
                tracing::info!("savepoint {id} triggered, to rescale the job");
                self.rescale = Some(PendingRescale { id, next, reply });
                self.carry_out(actions, now).await
            }
            Err(refused) => {
                tracing::warn!("rescale refused: {refused}");
                reply.send(Err(RescaleError::Refused(refused.to_string())));
                Step::Continue
            }
        }
    }

    /// Carries out the actions the coordinator decided at `decided_at`, and
    /// those that follow from them, and records in the job's statistics what
    /// they say about each checkpoint: triggered, completed, aborted, at the
    /// instant the coordinator decided it.
    async fn carry_out(&mut self, actions: Vec<Action<StateHandle>>, decided_at: Instant) -> Step {
        let mut queue: std::collections::VecDeque<_> =
            actions.into_iter().map(|a| (decided_at, a)).collect();
        let mut end = None;
        while let Some((at, action)) = queue.pop_front() {
            match action {
                Action::Trigger { id, kind, is_final } => {
                    tracing::debug!(
                        "triggering {kind} {id}{}",
                        if is_final { " (final)" } else { "" }
                    );
                    let num_tasks = self.coordinator.ack_set().len();
                    self.monitor.record_checkpoint(|stats| {
                        stats.triggered(id, kind, is_final, num_tasks, at);
                    });
                    // Durable before anything can use the id; the next one is reserved meanwhile.
                    if let Err(superseded) = self.history.reserve(id).await {
                        end = Some(AttemptEnd::Superseded(superseded));
                        break;
                    }
                    let sources: Vec<TaskId> =
                        self.coordinator.trigger_set().iter().cloned().collect();
                    self.attempt
                        .send_to(&sources, &Control::Trigger(Barrier { id, kind }));
                    self.history.reserve_ahead(id.next());
                }
                Action::Finalize {
                    id,
                    kind,
                    triggered_at,
                    acks,
                    ..
                } => {
                    let meta = CheckpointMetadata::complete(
                        self.identity,
                        id,
                        kind,
                        SystemTime::now(),
                        triggered_at.elapsed(),
                        &acks,
                    );
                    let storage = Arc::clone(&self.storage);
                    let reserved = self.history.covers(id);
                    let written = tokio::task::spawn_blocking(move || {
                        if !reserved {
                            let history = storage.layout().history_file();
                            return Err((
                                format!(
                                    "its id could not be recorded as reserved in the checkpoint \
                                     history {}",
                                    history.display()
                                ),
                                false,
                            ));
                        }
                        storage.write_metadata(&meta).map(|_| meta).map_err(|e| {
                            let superseded = matches!(e, StorageError::Superseded { .. });
                            (e.to_string(), superseded)
                        })
                    })
                    .await
                    .map_err(|e| (format!("metadata writer panicked: {e}"), false))
                    .and_then(|r| r);
                    if let Err((reason, true)) = &written {
                        // Not this checkpoint's failure: the run must stop.
                        end = Some(AttemptEnd::Superseded(reason.clone()));
                    }
                    let completed = written.is_ok();
                    let result = match written {
                        Ok(meta) => {
                            self.history.completed(id);
                            let (new, all) = meta.shared_bytes();
                            let shared = if all > 0 {
                                format!("; shared files: {new} bytes new of {all}")
                            } else {
                                String::new()
                            };
                            tracing::info!(
                                "{kind} {id} complete: {} ms, {} bytes{shared}",
                                meta.duration_ms,
                                meta.state_bytes()
                            );
                            Ok(())
                        }
                        Err((e, _)) => Err(e),
                    };
                    let finalized_at = Instant::now();
                    match self.coordinator.finalized(id, result, finalized_at) {
                        Ok(more) => {
                            if completed {
                                self.monitor
                                    .record_checkpoint(|stats| stats.completed(id, finalized_at));
                            }
                            queue.extend(more.into_iter().map(|a| (finalized_at, a)));
                        }
                        Err(ignored) => tracing::debug!("finalize of {id} ignored: {ignored:?}"),
                    }
                    if completed && let Some(reply) = self.replies.remove(&id) {
                        reply.send(Ok(SavepointTaken {
                            id,
                            path: self.storage.layout().checkpoint_dir(kind, id),
                        }));
                    }
                }
                Action::NotifyComplete { id, kind, is_final } => {
                    kill_point::reached(KillPoint::BeforeCommit);
                    self.attempt.broadcast(&Control::Complete(id));
                    if is_final {
                        // Carry out what follows (pruning) before ending.
                        let path = self.storage.layout().checkpoint_dir(kind, id);
                        end = Some(match (kind, self.rescale.take()) {
                            (CheckpointKind::Savepoint, Some(rescale)) if rescale.id == id => {
                                AttemptEnd::Rescaled {
                                    savepoint: SavepointTaken { id, path },
                                    next: Box::new(rescale.next),
                                    reply: rescale.reply,
                                }
                            }
                            (CheckpointKind::Savepoint, rescale) => {
                                self.rescale = rescale;
                                AttemptEnd::StoppedWithSavepoint(path)
                            }
                            (CheckpointKind::Checkpoint, rescale) => {
                                self.rescale = rescale;
                                AttemptEnd::Finished
                            }
                        });
                    }
                }
                Action::Abort {
                    id, kind, reason, ..
                } => {
                    if reason.counts_as_failure() {
                        tracing::warn!("{kind} {id} failed: {reason}");
                    } else {
                        tracing::debug!("{kind} {id} aborted: {reason}");
                    }
                    self.monitor
                        .record_checkpoint(|stats| stats.failed(id, &reason, at));
                    if let Some(reply) = self.replies.remove(&id) {
                        reply.send(Err(SavepointError::Failed {
                            id,
                            reason: reason.to_string(),
                        }));
                    }
                    if self.rescale.as_ref().is_some_and(|r| r.id == id)
                        && let Some(rescale) = self.rescale.take()
                    {
                        rescale
                            .reply
                            .send(Err(RescaleError::Savepoint(SavepointError::Failed {
                                id,
                                reason: reason.to_string(),
                            })));
                    }
                    self.attempt.broadcast(&Control::Abort(id));
                    // Tasks may still be writing its files: see the module docs.
                    let _ = self.discard(kind, id).await;
                }
                Action::Prune { completed, ids } => self.prune(completed, ids).await,
                Action::FailJob { reason } => {
                    // A run that was superseded stops for that, not for its failures.
                    if !matches!(end, Some(AttemptEnd::Superseded(_))) {
                        end = Some(AttemptEnd::Failed(reason.to_string()));
                    }
                }
            }
        }
        end.map_or(Step::Continue, Step::End)
    }

    /// Removes checkpoint `id`'s files; `false` (and a warning) if it could not.
    async fn discard(&mut self, kind: CheckpointKind, id: CheckpointId) -> bool {
        let storage = Arc::clone(&self.storage);
        let result = tokio::task::spawn_blocking(move || storage.discard(kind, id)).await;
        let error = match result {
            Ok(Ok(())) => return true,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        tracing::warn!("cannot remove {kind} {id}: {error}");
        false
    }

    /// Carries out an [`Action::Prune`]: removes the checkpoints `ids`, newest
    /// first, stopping at the first that cannot be removed; then the sweep the
    /// coordinator asks for, if any (see the module docs).
    async fn prune(&mut self, completed: CheckpointId, ids: Vec<CheckpointId>) {
        let storage = Arc::clone(&self.storage);
        let all: BTreeSet<CheckpointId> = ids.iter().copied().collect();
        let removal = tokio::task::spawn_blocking(move || {
            for (n, &id) in ids.iter().enumerate() {
                if let Err(e) = storage.discard(CheckpointKind::Checkpoint, id) {
                    tracing::warn!("cannot remove checkpoint {id}: {e}");
                    return ids[n..].iter().copied().collect();
                }
            }
            BTreeSet::new()
        })
        .await;
        // A removal that panicked may have removed any of them: try them all again.
        let not_removed = removal.unwrap_or_else(|e| {
            tracing::warn!("checkpoint removal panicked: {e}");
            all
        });
        let Some(sweep) = self.coordinator.pruned(completed, &not_removed) else {
            return;
        };
        let storage = Arc::clone(&self.storage);
        let failures = tokio::task::spawn_blocking(move || sweep_storage(&*storage, &sweep))
            .await
            .unwrap_or_else(|e| vec![format!("checkpoint cleanup panicked: {e}")]);
        for failure in &failures {
            tracing::warn!("{failure}");
        }
        self.coordinator.swept(!failures.is_empty());
    }

    /// Stops every task and waits for their threads. A graceful shutdown lets
    /// tasks take their last completion notice first; otherwise they are told
    /// to stop at once; tasks in `exited` already ended. Returns the first
    /// failure reported meanwhile.
    async fn shutdown(&mut self, graceful: bool, exited: &HashSet<TaskId>) -> Option<String> {
        if !graceful {
            self.attempt.stop.raise();
        }
        self.attempt.broadcast(&Control::Shutdown);
        // A task that already exited (a failure ends the attempt that way) sends no second
        // exit event: waiting for one would hang the job for good.
        let mut running: HashSet<TaskId> = self
            .attempt
            .tasks
            .iter()
            .filter(|id| !exited.contains(*id))
            .cloned()
            .collect();
        let mut failure = None;
        while !running.is_empty() {
            match self.events.recv().await {
                Some(TaskEvent::Exited { task, result }) => {
                    running.remove(&task);
                    if let Err(e) = result
                        && !matches!(e, TaskError::Stopped)
                        && failure.is_none()
                    {
                        failure = Some(format!("task {task} failed: {e}"));
                    }
                }
                Some(_) => {}
                None => break,
            }
        }
        let threads = std::mem::take(&mut self.attempt.threads);
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
        failure
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Carries out `sweep` on `storage`: removes the incomplete directories of
/// aborted checkpoints and the shared files no checkpoint needs. Returns what
/// could not be listed or removed, in words.
fn sweep_storage(storage: &dyn CheckpointStorage, sweep: &Sweep) -> Vec<String> {
    let mut failures = Vec::new();
    match storage.list() {
        Ok(listings) => {
            for (kind, id) in stray_checkpoints(&listings, sweep.completed, &sweep.in_flight) {
                match storage.discard(kind, id) {
                    Ok(()) => tracing::info!("removed the files of aborted {kind} {id}"),
                    Err(e) => failures.push(format!("cannot remove {kind} {id}: {e}")),
                }
            }
        }
        Err(e) => failures.push(format!("cannot list the checkpoints: {e}")),
    }
    match storage.list_shared() {
        Ok(found) => {
            let unneeded = shared_files_to_remove(
                &found,
                &sweep.needed_shared,
                sweep.completed,
                &sweep.in_flight,
            );
            if !unneeded.is_empty() {
                match storage.remove_shared(&unneeded) {
                    Ok(()) => tracing::debug!("removed {} shared files", unneeded.len()),
                    Err(e) => failures.push(format!("cannot remove shared files: {e}")),
                }
            }
        }
        Err(e) => failures.push(format!("cannot list the shared files: {e}")),
    }
    failures
}
