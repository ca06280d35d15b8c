//! [`JobRunner`]: runs a job from start to end — loads its modules once,
//! restores it if asked, runs attempts, and fails over by the restart
//! strategy from the latest completed checkpoint. What each start begins from
//! is `start.rs`'s answer.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc::UnboundedReceiver;

use super::attempt::{Attempt, AttemptResources, start};
use super::driver::{AttemptEnd, Driver};
use super::error::RunError;
use super::history::HistoryRecorder;
use super::lock::JobLocks;
use super::monitor::JobMonitor;
use super::request::{RescaleError, RescaleReply, Rescaled, SavepointError, SavepointTaken};
use super::restore::RestoreError;
use super::{JobOutcome, JobRequest, RunOptions};
use crate::checkpoint::config::Retention;
use crate::checkpoint::coordinator::Coordinator;
use crate::checkpoint::metadata::{JobIdentity, StateHandle};
use crate::checkpoint::recovery::next_checkpoint_id;
use crate::checkpoint::restore::VerifiedCheckpoint;
use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use crate::checkpoint::task_state::RestoredState;
use crate::dataflow::persist::TaskEvent;
use crate::ids::TaskId;
use crate::ids::{CheckpointId, CheckpointKind};
use crate::job::{Job, JobStatus, VertexKind};
use crate::state::keyed::local::LocalCopies;
use crate::state::keyed::section::KeyedStores;
use crate::wasm::{
    EngineOptions, ImagePool, LoadOptions, ModuleError, ModuleProblem, ModuleSource,
    OperatorModule, StateCapture, WasmEngine,
};

/// Runs one job.
pub struct JobRunner {
    pub(super) job: Job,
    pub(super) options: RunOptions,
    modules: HashMap<String, OperatorModule>,
    pub(super) storage: Arc<dyn CheckpointStorage>,
    pub(super) monitor: JobMonitor,
    /// The job's directories, owned by this run until it ends.
    locks: JobLocks,
    /// Where and within what memory its operators keep keyed state on the host, if one does.
    keyed: Option<Arc<KeyedStores>>,
}

impl JobRunner {
    /// Takes the job's directories ([`JobLocks`]: its checkpoint directory and
    /// its file sinks' output directories, refused with [`RunError::Locked`]
    /// while another run holds one), loads and checks every operator's module
    /// (each compiled once, for all its subtasks and every restart) and opens
    /// the checkpoint storage: the object store the job names, or local files in its
    /// checkpoint directory.
    pub fn new(job: Job, options: RunOptions) -> Result<Self, RunError> {
        let locks = JobLocks::acquire(&job, true)?;
        let storage = job.checkpoint.open_storage()?;
        Self::build(job, options, storage, locks)
    }

    /// [`JobRunner::new`] over the given checkpoint storage instead of the
    /// job's directory: another backend, or (in tests) a storage double that
    /// fails on purpose.
    /// Only the file sinks' output directories are locked: the storage is the caller's.
    pub fn with_storage(
        job: Job,
        options: RunOptions,
        storage: Arc<dyn CheckpointStorage>,
    ) -> Result<Self, RunError> {
        let locks = JobLocks::acquire(&job, false)?;
        Self::build(job, options, storage, locks)
    }

    fn build(
        job: Job,
        options: RunOptions,
        storage: Arc<dyn CheckpointStorage>,
        locks: JobLocks,
    ) -> Result<Self, RunError> {
        // One engine for the whole job, made with its first operator: one epoch thread, at most
        // one pool. Each module carries its operator's limits.
        let mut engine: Option<WasmEngine> = None;
        let mut modules = HashMap::new();
        for vertex in &job.vertices {
            let VertexKind::Operator(op) = &vertex.kind else {
                continue;
            };
            let engine = match &engine {
                Some(engine) => engine,
                None => engine.insert(job_engine(&job, &options)?),
            };
            let options = LoadOptions {
                capture: op.state_capture,
                limits: op.limits,
                config_of: (!op.config.is_empty()).then_some(vertex.name.as_str()),
            };
            let module = OperatorModule::load(engine, ModuleSource::file(&op.module), options)
                .map_err(|e| match e.problem {
                    // Its message names the operator and the module itself.
                    problem @ ModuleProblem::ConfigWithoutInit { .. } => {
                        RunError::Setup(problem.to_string())
                    }
                    problem => RunError::Module(ModuleError { problem, ..e }),
                })?;
            if module.image_layout().is_some() {
                tracing::info!(
                    "operator `{}`: checkpoints take an image of its memory and globals (checkpoint = \"{}\")",
                    vertex.name,
                    op.state_capture.as_str()
                );
            }
            modules.insert(vertex.name.clone(), module);
        }
        // One store budget and one directory for the whole process, made only when an operator
        // keeps keyed state on the host.
        let keyed = if modules.values().any(|m| m.capabilities().keyed_state) {
            remove_abandoned_stores(&job);
            let dir = job.state.work_dir(&job.name, std::process::id());
            let stores = KeyedStores::rocksdb(job.state.memory, dir)
                .map_err(|e| RunError::Setup(e.to_string()))?
                .keeping_copies_in(
                    job.state
                        .local_dir(&job.name, &job.checkpoint.storage_root()),
                );
            Some(Arc::new(stores))
        } else {
            None
        };
        // Brokers that do not answer or topics that do not exist stop the job here, named,
        // instead of failing its tasks over and over.
        crate::connectors::preflight(&job)?;
        let counts = engine.as_ref().and_then(WasmEngine::module_cache_counts);
        if let (Some(dir), Some((cached, compiled))) = (&options.module_cache, counts) {
            tracing::info!(
                "modules: {cached} from the cache of compiled modules ({}), {compiled} compiled",
                dir.display()
            );
        }
        Ok(JobRunner {
            job,
            options,
            modules,
            storage,
            monitor: JobMonitor::default(),
            locks,
            keyed,
        })
    }

    /// A live view of the job, for status displays.
    pub fn monitor(&self) -> JobMonitor {
        self.monitor.clone()
    }

    /// The job it runs.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The checkpoint storage of the job.
    pub fn storage(&self) -> Arc<dyn CheckpointStorage> {
        Arc::clone(&self.storage)
    }

    /// Runs the job until it finishes, is cancelled or stopped, or fails
    /// beyond its restart strategy. `requests` carries cancel and savepoint
    /// requests from outside.
    pub fn run(
        mut self,
        mut requests: UnboundedReceiver<JobRequest>,
    ) -> Result<JobOutcome, RunError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("weir-driver")
            .enable_time()
            .build()
            .map_err(|e| RunError::Setup(format!("cannot start the async runtime: {e}")))?;
        let handle = runtime.handle().clone();
        let storage = Arc::clone(&self.storage);
        let locks = self.take_locks();
        let local = self.local_copies();
        let result = runtime.block_on(self.run_async(handle, &mut requests));
        // Dropping the runtime waits for its blocking tasks, the state writes
        // still under way among them: after that nothing writes checkpoint
        // files any more, and what aborted checkpoints left can go.
        drop(runtime);
        if let Ok(outcome) = &result {
            cleanup_after_run(storage.as_ref());
            // Nothing restores from the checkpoints of a job that ended; a failed one may be
            // restored by the next run, here.
            if matches!(outcome.status, JobStatus::Finished | JobStatus::Canceled)
                && let Some(local) = &local
            {
                local.remove_all();
            }
        }
        // Only now may another run take the directories.
        drop(locks);
        result
    }

    /// The local copies of the tasks' store checkpoints, which a restore takes what files it
    /// can from, if an operator keeps keyed state on the host.
    pub(super) fn local_copies(&self) -> Option<LocalCopies> {
        self.keyed
            .as_deref()
            .and_then(KeyedStores::local_copies)
            .cloned()
    }

    /// The locks, moved out so they outlive the run's last file operation.
    fn take_locks(&mut self) -> JobLocks {
        std::mem::replace(&mut self.locks, JobLocks::none())
    }

    async fn run_async(
        self,
        handle: tokio::runtime::Handle,
        requests: &mut UnboundedReceiver<JobRequest>,
    ) -> Result<JobOutcome, RunError> {
        self.monitor.set_started(std::time::SystemTime::now());
        // Claimed before anything of the checkpoints is read: a run that claimed earlier
        // completes no checkpoint numbered at or above what this one reads next
        // (checkpoint/generation.rs).
        let storage = Arc::clone(&self.storage);
        let generation = blocking(move || storage.claim_generation()).await?;
        tracing::info!(
            "claimed generation {generation} of the job on {}",
            self.job.checkpoint.storage_root().display()
        );
        let storage = Arc::clone(&self.storage);
        let history = blocking(move || storage.read_history()).await?;
        // Choose what to restore before cleaning up, so skipped checkpoints are reported.
        let initial = self.choose_start(&history).await?;
        // Every id on disk (incomplete ones too, which cleanup is about to remove) and the one
        // restored count as used before anything is removed: ids never repeat.
        let listings = {
            let storage = Arc::clone(&self.storage);
            blocking(move || storage.list()).await?
        };
        let used = listings
            .iter()
            .map(|l| l.id)
            .chain(initial.as_ref().map(|p| p.metadata.checkpoint_id))
            .max();
        let history = match used {
            Some(id) if !history.covers(id) => {
                let updated = history.with_reserved(id);
                let storage = Arc::clone(&self.storage);
                blocking(move || storage.write_history(&updated)).await?;
                updated
            }
            _ => history,
        };
        let storage = Arc::clone(&self.storage);
        let cleanup = blocking(move || storage.cleanup()).await?;
        for dir in &cleanup.removed_dirs {
            tracing::info!("removed incomplete checkpoint {}", dir.dir().display());
        }
        let mut recorder = HistoryRecorder::new(Arc::clone(&self.storage), history);
        let result = self
            .run_attempts(handle, requests, &mut recorder, initial)
            .await;
        recorder.settle().await;
        result
    }

    /// Runs attempts from `initial` until the job ends; fails over by the restart strategy, and
    /// goes on at new parallelisms after a rescale.
    async fn run_attempts(
        &self,
        handle: tokio::runtime::Handle,
        requests: &mut UnboundedReceiver<JobRequest>,
        history: &mut HistoryRecorder,
        initial: Option<VerifiedCheckpoint>,
    ) -> Result<JobOutcome, RunError> {
        // The job at its current parallelisms: a rescale changes it.
        let mut current = self.job.clone();
        // This run's checkpoints are numbered from here on: after every id ever reserved.
        let run_first_id = history.history().next_id();
        // A failover with no checkpoint of its own reads the one the run started from again.
        let initial_dir = initial.as_ref().map(|p| p.location.dir().to_path_buf());
        let mut point = initial;
        let mut restarts = 0u32;
        // Attempts started: the first one takes up the checkpoint the run starts from.
        let mut attempts = 0u32;
        let mut next_id = run_first_id;
        // A rescale under way: the job before it, and who waits to hear how it went.
        let mut rescaling: Option<(Job, SavepointTaken, RescaleReply)> = None;
        let (events_tx, mut events_rx) = tokio::sync::mpsc::unbounded_channel();
        // Why the last attempt failed, until the restart strategy has answered.
        let mut failure: Option<String> = None;
        loop {
            if let Some(reason) = failure.take() {
                tracing::error!("job failed: {reason}");
                self.monitor.attempt_failed();
                self.monitor.set_status(JobStatus::Failing);
                let Some(delay) = current.restart.delay_for(restarts + 1) else {
                    self.monitor.set_status(JobStatus::Failed);
                    return Ok(outcome(JobStatus::Failed, None, Some(reason), restarts));
                };
                restarts += 1;
                self.monitor.restarted();
                self.monitor.set_status(JobStatus::Restarting);
                tracing::warn!(
                    "restarting (restart {restarts}, {} strategy) in {} ms",
                    current.restart.name(),
                    delay.as_millis()
                );
                if wait_to_restart(delay, requests).await == Waited::Canceled {
                    self.monitor.set_status(JobStatus::Canceled);
                    return Ok(outcome(JobStatus::Canceled, None, Some(reason), restarts));
                }
                // What stops a restart (the checkpoint storage down past its retries, a broker
                // away) is one more failure under the strategy, not the end of the job: only
                // the first start is refused outright.
                match self
                    .resolve_failover(run_first_id, initial_dir.as_deref())
                    .await
                {
                    Ok(resolved) => point = resolved,
                    Err(e) => {
                        failure = Some(format!("cannot restart: {e}"));
                        continue;
                    }
                }
            }
            let restored_id = point.as_ref().map(|p| p.metadata.checkpoint_id);
            let (attempt_job, states) = match point.take() {
                Some(p) => match self.restore(p, &current).await {
                    Ok(restored) => restored,
                    Err(RunError::Restore(refused)) if rescaling.is_some() => {
                        // The new parallelisms cannot take the savepoint: the old ones can.
                        let (previous, savepoint, reply) = rescaling.take().expect("checked above");
                        tracing::warn!(
                            "cannot rescale: {refused}; going on at the old parallelism"
                        );
                        reply.send(Err(RescaleError::Restore {
                            savepoint: savepoint.path.clone(),
                            reason: refused.to_string(),
                        }));
                        current = previous;
                        point = Some(self.read_checkpoint(&savepoint.path).await?);
                        continue;
                    }
                    Err(e) if restarts > 0 => {
                        failure = Some(format!("cannot restart: {e}"));
                        continue;
                    }
                    Err(e) => return Err(e),
                },
                None => (current.clone(), HashMap::new()),
            };
            let job = &attempt_job;
            let prepared = self
                .prepare_attempt(
                    job,
                    states,
                    restored_id,
                    next_id,
                    history,
                    &handle,
                    &events_tx,
                )
                .await;
            let ReadyAttempt {
                identity,
                coordinator,
                attempt,
            } = match prepared {
                Ok(Prepared::Ready(ready)) => *ready,
                Ok(Prepared::Superseded(reason)) => {
                    return Ok(self.superseded(reason, restarts));
                }
                Err(e) if restarts > 0 => {
                    failure = Some(format!("cannot restart: {e}"));
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.monitor.set_tasks(attempt.metrics.clone());
            self.monitor.set_status(JobStatus::Running);
            if let Some((_, savepoint, reply)) = rescaling.take() {
                // What the restore changed, as the monitor shows it.
                let changes = self
                    .monitor
                    .restored()
                    .map(|r| r.rescaled)
                    .unwrap_or_default();
                reply.send(Ok(Rescaled { savepoint, changes }));
            }
            let driver = Driver {
                identity: &identity,
                job,
                storage: Arc::clone(&self.storage),
                coordinator,
                attempt,
                events: &mut events_rx,
                requests,
                monitor: &self.monitor,
                replies: BTreeMap::new(),
                history,
                rescale: None,
            };
            attempts += 1;
            let first_attempt = attempts == 1;
            let (end, after) = driver.run().await;
            next_id = after;
            match end {
                AttemptEnd::Finished => {
                    self.monitor.set_status(JobStatus::Finished);
                    return Ok(outcome(JobStatus::Finished, None, None, restarts));
                }
                AttemptEnd::StoppedWithSavepoint(path) => {
                    self.monitor.set_status(JobStatus::Finished);
                    return Ok(outcome(JobStatus::Finished, Some(path), None, restarts));
                }
                AttemptEnd::Rescaled {
                    savepoint,
                    next,
                    reply,
                } => {
                    // Not a failure, and not a restart: the job goes on from the savepoint.
                    self.monitor.set_status(JobStatus::Restarting);
                    tracing::info!(
                        "savepoint {} taken: going on at the new parallelism from it",
                        savepoint.id
                    );
                    point = Some(self.read_checkpoint(&savepoint.path).await?);
                    rescaling = Some((std::mem::replace(&mut current, *next), savepoint, reply));
                }
                AttemptEnd::Canceled => {
                    self.monitor.set_status(JobStatus::Canceled);
                    if job.checkpoint.on_cancel == Retention::DeleteOnCancel {
                        self.delete_checkpoints().await?;
                    }
                    return Ok(outcome(JobStatus::Canceled, None, None, restarts));
                }
                AttemptEnd::Superseded(reason) => {
                    return Ok(self.superseded(reason, restarts));
                }
                AttemptEnd::Failed(reason) => failure = Some(reason),
                // The checkpoint the run was asked to start from cannot be taken up (a module
                // that cannot read its operator's state, a sink's output gone from its
                // directory): retrying cannot help, so the start is refused — exit 3.
                AttemptEnd::RestoreFailed(reason) if first_attempt => {
                    if let Some(checkpoint) = initial_dir.clone() {
                        return Err(RunError::Restore(RestoreError::TaskRefused {
                            checkpoint,
                            reason,
                        }));
                    }
                    failure = Some(reason);
                }
                AttemptEnd::RestoreFailed(reason) => failure = Some(reason),
            }
        }
    }

    /// Everything an attempt of `job` needs before its tasks run: the job's identity, a
    /// coordinator numbering checkpoints after every id in storage, and the started tasks —
    /// or that a newer run of the job took over meanwhile.
    #[allow(clippy::too_many_arguments)]
    async fn prepare_attempt(
        &self,
        job: &Job,
        states: HashMap<TaskId, RestoredState>,
        restored_id: Option<CheckpointId>,
        next_id: CheckpointId,
        history: &mut HistoryRecorder,
        handle: &tokio::runtime::Handle,
        events: &tokio::sync::mpsc::UnboundedSender<TaskEvent>,
    ) -> Result<Prepared, RunError> {
        let mut identity = job.identity();
        identity.generation = self.storage.generation().unwrap_or_default();
        // A newer run took over while this one waited to restart: starting the sinks
        // would fence its transactions.
        let storage = Arc::clone(&self.storage);
        if let Some(newer) = blocking(move || Ok::<_, StorageError>(storage.superseded())).await? {
            let reason = StorageError::Superseded {
                ours: identity.generation,
                newer,
                dir: self.storage.layout().job_dir().to_owned(),
            }
            .to_string();
            return Ok(Prepared::Superseded(reason));
        }
        let listings = {
            let storage = Arc::clone(&self.storage);
            blocking(move || storage.list()).await?
        };
        let first_id = next_checkpoint_id(&listings, restored_id).max(next_id);
        history.reserve_ahead(first_id);
        let retained = listings.iter().filter_map(|l| {
            let meta = l.metadata()?;
            (meta.kind == CheckpointKind::Checkpoint).then(|| (l.id, meta.references()))
        });
        let tasks: Vec<TaskId> = job.tasks().collect();
        let sources: Vec<TaskId> = job.source_tasks().collect();
        let coordinator = Coordinator::new(job.checkpoint.clone(), tasks, sources, first_id)
            .map_err(|e| RunError::Setup(e.to_string()))?
            .with_retained_checkpoints(retained);
        let resources = AttemptResources {
            job,
            modules: &self.modules,
            keyed: self.keyed.as_ref(),
            storage: Arc::clone(&self.storage),
            runtime: handle.clone(),
            events: events.clone(),
        };
        let attempt = start(&resources, states)?;
        Ok(Prepared::Ready(Box::new(ReadyAttempt {
            identity,
            coordinator,
            attempt,
        })))
    }

    /// The end of a run that a newer run of the job superseded: failed, never restarted.
    fn superseded(&self, reason: String, restarts: u32) -> JobOutcome {
        tracing::error!("job stops: {reason}");
        self.monitor.set_status(JobStatus::Failed);
        outcome(JobStatus::Failed, None, Some(reason), restarts)
    }
}

/// Removes the stores' working folders that earlier runs of `job` left when they were killed
/// (a process killed with SIGKILL removes nothing): each named by a process that is gone. Their
/// state is in the job's checkpoints, not there. A failure is only logged: the run goes on.
fn remove_abandoned_stores(job: &Job) {
    for (pid, dir) in job.state.runs(&job.name) {
        if pid == std::process::id() || !crate::process::gone(pid) {
            continue;
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => tracing::info!(
                "removed {}: the state stores of an earlier run of the job (process {pid}), \
                 which ended without removing them",
                dir.display()
            ),
            Err(e) => tracing::warn!(
                "cannot remove {}, left by an earlier run of the job (process {pid}): {e}",
                dir.display()
            ),
        }
    }
}

/// What [`JobRunner::prepare_attempt`] found.
enum Prepared {
    /// The attempt is started.
    Ready(Box<ReadyAttempt>),
    /// A newer run of the job took over: why this one stops.
    Superseded(String),
}

/// A started attempt: its driver's parts.
struct ReadyAttempt {
    identity: JobIdentity,
    coordinator: Coordinator<StateHandle>,
    attempt: Attempt,
}

/// How the wait before a restart ended.
#[derive(Debug, PartialEq, Eq)]
enum Waited {
    /// The delay passed: restart.
    Elapsed,
    /// A cancel (or a stop, which needs a running job for its savepoint) came first.
    Canceled,
}

/// Why a savepoint or a rescale is refused while the job waits to restart.
const RESTARTING: &str = "the job is restarting after a failure: ask again once it is running";

/// Waits `delay` before a restart, answering requests meanwhile: a cancel or
/// a plain stop ends the wait (and the job); a savepoint is refused, since
/// there is no running job to take it of.
async fn wait_to_restart(delay: Duration, requests: &mut UnboundedReceiver<JobRequest>) -> Waited {
    let sleep = tokio::time::sleep(delay);
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            () = &mut sleep => return Waited::Elapsed,
            request = requests.recv() => match request {
                Some(JobRequest::Cancel | JobRequest::StopWithSavepoint) => return Waited::Canceled,
                Some(JobRequest::Savepoint { reply, .. }) => reply.send(Err(SavepointError::Refused(
                    RESTARTING.into(),
                ))),
                Some(JobRequest::Rescale { reply, .. }) => {
                    reply.send(Err(RescaleError::Refused(RESTARTING.into())));
                }
                None => {
                    // Nobody can send requests any more: only the delay is left.
                    (&mut sleep).await;
                    return Waited::Elapsed;
                }
            },
        }
    }
}

/// Removes what aborted checkpoints left (incomplete directories, stray
/// `.tmp` files) once the job has ended, so a job that ends does not leave
/// them until its next start. A failure (a read-only disk) is only logged:
/// the job's outcome stands, and the next start cleans up again.
fn cleanup_after_run(storage: &dyn CheckpointStorage) {
    match storage.cleanup() {
        Ok(cleanup) => {
            for dir in &cleanup.removed_dirs {
                tracing::info!("removed incomplete checkpoint {}", dir.dir().display());
            }
            for file in &cleanup.removed_temp_files {
                tracing::info!("removed temporary file {}", file.display());
            }
        }
        Err(e) => tracing::warn!("cannot clean up the checkpoint directory: {e}"),
    }
}

fn outcome(
    status: JobStatus,
    savepoint: Option<std::path::PathBuf>,
    failure: Option<String>,
    restarts: u32,
) -> JobOutcome {
    JobOutcome {
        status,
        savepoint,
        failure,
        restarts,
    }
}

/// The engine every operator of `job` is loaded through: with the run's cache of compiled
/// modules (without it if it cannot be used, see [`WasmEngine::for_job`]) and [`image_pool`].
fn job_engine(job: &Job, options: &RunOptions) -> Result<WasmEngine, RunError> {
    WasmEngine::for_job(&EngineOptions {
        module_cache: options.module_cache.clone(),
        image_pool: image_pool(job),
    })
    .map_err(|e| RunError::Setup(e.to_string()))
}

/// The pool of image-checkpointed instances of the job's engine: room for twice the subtasks
/// of the operators that may be checkpointed as images (an attempt's instances can outlive it
/// while the next attempt starts), plus the one each such module's load-time check starts; each
/// slot as large as the largest `max_memory` among them (every instance is still held to its
/// own operator's limit by its store). `None` (no pool) when no operator may be.
fn image_pool(job: &Job) -> Option<ImagePool> {
    let (subtasks, modules, max_memory_bytes) = job
        .vertices
        .iter()
        .filter_map(|vertex| match &vertex.kind {
            VertexKind::Operator(op) if op.state_capture != StateCapture::Exports => {
                Some((vertex.parallelism, op.limits.max_memory_bytes))
            }
            _ => None,
        })
        .fold(
            (0u32, 0u32, 0usize),
            |(subtasks, modules, memory), (parallelism, max_memory)| {
                (
                    subtasks.saturating_add(parallelism),
                    modules + 1,
                    memory.max(max_memory),
                )
            },
        );
    if subtasks == 0 {
        return None;
    }
    Some(ImagePool {
        instances: subtasks.saturating_mul(2).saturating_add(modules),
        max_memory_bytes,
    })
}

/// Runs blocking storage work off the async reactor.
pub(super) async fn blocking<T, E>(
    f: impl FnOnce() -> Result<T, E> + Send + 'static,
) -> Result<T, RunError>
where
    T: Send + 'static,
    E: Into<RunError> + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| RunError::Setup(format!("storage worker panicked: {e}")))?
        .map_err(Into::into)
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::checkpoint::generation::Generation;
    use crate::checkpoint::storage::tests::status_word;
    use crate::checkpoint::storage::{FaultyStorage, MemoryStorage};

    /// generator → blackhole: no guest, so it runs in a unit test. A checkpoint every
    /// 10 ms; `count` records at 20 000 a second.
    fn job(count: u64, tolerable_failures: u32) -> Job {
        let text = format!(
            "name = \"j\"\n\
             [checkpoint]\ninterval = \"10ms\"\ntolerable_failures = {tolerable_failures}\n\
             [restart]\nstrategy = \"none\"\n\
             [[source]]\nname = \"gen\"\ntype = \"generator\"\ncount = {count}\nrate = 20000.0\n\
             [[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"gen\"]\n"
        );
        Job::from_str(&text, "/jobs", "j.toml").unwrap()
    }

    /// generator → `a` → `b` → `c` → `d` → blackhole, all the WAT `count` guest, each with its
    /// own limits (`c` and `d` the defaults); `a` and `d` checkpointed as images, `b` and `c`
    /// through their exports.
    fn four_operator_job() -> Job {
        let module = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/wat/count.wat");
        let operator = |name: &str, input: &str, parallelism: u32, capture: &str, limits: &str| {
            format!(
                "[[operator]]\nname = \"{name}\"\nmodule = \"{module}\"\n\
                 parallelism = {parallelism}\ncheckpoint = \"{capture}\"\n\
                 inputs = [\"{input}\"]\nlimits = {{ {limits} }}\n"
            )
        };
        let text = [
            "name = \"four\"\n[restart]\nstrategy = \"none\"\n".to_string(),
            "[[source]]\nname = \"gen\"\ntype = \"generator\"\ncount = 10\n".to_string(),
            operator(
                "a",
                "gen",
                2,
                "image",
                "max_memory = \"64MiB\", call_timeout = \"2s\"",
            ),
            operator("b", "a", 1, "exports", "max_output = \"1MiB\""),
            operator("c", "b", 1, "exports", ""),
            operator("d", "c", 1, "image", ""),
            "[[sink]]\nname = \"out\"\ntype = \"blackhole\"\ninputs = [\"d\"]\n".to_string(),
        ]
        .concat();
        Job::from_str(&text, "/jobs", "four.toml").unwrap()
    }

    #[test]
    fn operators_with_different_limits_share_one_engine_each_keeping_its_limits() {
        let job = four_operator_job();
        let runner = JobRunner::with_storage(
            job.clone(),
            RunOptions::default(),
            Arc::new(MemoryStorage::default()),
        )
        .unwrap();
        for vertex in &job.vertices {
            if let VertexKind::Operator(op) = &vertex.kind {
                let module = &runner.modules[&vertex.name];
                assert_eq!(module.limits(), &op.limits, "{}", vertex.name);
            }
        }
        let module = |name: &str| &runner.modules[name];
        assert_ne!(module("a").limits(), module("d").limits());
        assert_ne!(module("b").limits(), module("c").limits());
        // Modules under different limits compiled by one wasmtime engine (on demand) or by
        // one pool's: a job has one `WasmEngine`, so one epoch thread.
        let engine = |name: &str| module(name).core_module().unwrap().engine().clone();
        assert!(wasmtime::Engine::same(&engine("b"), &engine("c")));
        assert!(wasmtime::Engine::same(&engine("a"), &engine("d")));
        assert!(!wasmtime::Engine::same(&engine("a"), &engine("b")));
    }

    #[test]
    fn the_image_pool_holds_every_imaged_subtask_twice_and_the_largest_memory() {
        // Per set of limits these were pools of 2 * 2 + 1 and 1 * 2 + 1 instances: one pool
        // for the job holds as many, with slots as large as the largest imaged operator's limit.
        assert_eq!(
            image_pool(&four_operator_job()),
            Some(ImagePool {
                instances: 8,
                max_memory_bytes: 256 << 20
            })
        );
        assert_eq!(image_pool(&job(1, 0)), None);
    }

    /// Runs `job` with the default options on `storage`, on a thread; returns its monitor,
    /// the outcome's receiver (see [`ended`]) and the sender of its requests.
    fn spawn(
        job: Job,
        storage: Arc<dyn CheckpointStorage>,
    ) -> (
        JobMonitor,
        std::sync::mpsc::Receiver<Result<JobOutcome, RunError>>,
        tokio::sync::mpsc::UnboundedSender<JobRequest>,
    ) {
        let runner = JobRunner::with_storage(job, RunOptions::default(), storage).unwrap();
        let monitor = runner.monitor();
        let (requests, requests_rx) = tokio::sync::mpsc::unbounded_channel();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(runner.run(requests_rx));
        });
        (monitor, rx, requests)
    }

    /// The outcome of a run [`spawn`] started, which must end within 20 s.
    fn ended(outcome: &std::sync::mpsc::Receiver<Result<JobOutcome, RunError>>) -> JobOutcome {
        outcome
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
            .unwrap()
    }

    /// Returns once `done` holds, polling it; fails naming `what` after 20 s. (The control
    /// server's tests wait with it too.)
    pub(crate) fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "waited 20 s for {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn statuses(storage: &MemoryStorage) -> Vec<(u64, &'static str)> {
        storage
            .list()
            .unwrap()
            .iter()
            .map(|l| (l.id.0, status_word(&l.status)))
            .collect()
    }

    #[test]
    fn checkpoint_statistics_span_every_attempt() {
        let memory = MemoryStorage::default();
        let faulty = Arc::new(FaultyStorage::memory(&memory));
        let text = job(1_000_000, 0).to_toml().replace(
            "strategy = \"none\"",
            "strategy = \"fixed-delay\"\nattempts = 1\ndelay = \"50ms\"",
        );
        let job = Job::from_str(&text, "/jobs", "j.toml").unwrap();
        let (monitor, outcome, requests) = spawn(job, Arc::clone(&faulty) as _);
        wait_for("two checkpoints", || monitor.checkpoint_counts().0 >= 2);
        let first_attempt = monitor.with_checkpoint_stats(|s| s.history().next().unwrap().id);
        faulty.break_writes(io::ErrorKind::StorageFull);
        wait_for("a restart", || monitor.restarts() == 1);
        faulty.heal();
        let before = monitor.checkpoint_counts().0;
        wait_for("checkpoints after the restart", || {
            monitor.checkpoint_counts().0 >= before + 2
        });
        requests.send(JobRequest::Cancel).unwrap();
        let outcome = ended(&outcome);
        assert_eq!(outcome.status, JobStatus::Canceled, "{outcome:?}");
        assert_eq!(monitor.failures(), 1);
        let (completed, failed) = monitor.checkpoint_counts();
        let counts = monitor.with_checkpoint_stats(|s| s.counts());
        assert_eq!(counts.completed, completed);
        // The failures the monitor counts, and the aborts when the attempts ended.
        assert!(counts.failed >= failed, "{counts:?} vs {failed}");
        assert_eq!(counts.in_progress, 0, "{counts:?}");
        assert_eq!(counts.total, counts.completed + counts.failed, "{counts:?}");
        // The history still holds the first attempt's checkpoints.
        assert!(
            monitor.with_checkpoint_stats(|s| s.get(first_attempt).is_some()),
            "checkpoint {first_attempt} of the first attempt was forgotten"
        );
        assert_eq!(monitor.checkpoint_durations().count, completed);
        let restored = monitor
            .restored()
            .expect("the restart restored a checkpoint");
        assert!(restored.id >= first_attempt, "{restored:?}");
    }

    #[test]
    fn while_restarting_savepoints_are_refused_and_a_cancel_ends_the_wait() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let (requests, mut requests_rx) = tokio::sync::mpsc::unbounded_channel();
        let (request, answer) = JobRequest::savepoint(false);
        requests.send(request).unwrap();
        requests.send(JobRequest::Cancel).unwrap();
        let waited = runtime.block_on(wait_to_restart(Duration::from_secs(60), &mut requests_rx));
        assert_eq!(waited, Waited::Canceled);
        let refused = answer.blocking_recv().unwrap().unwrap_err();
        assert!(
            refused
                .to_string()
                .starts_with("savepoint refused: the job is restarting"),
            "{refused}"
        );
        drop(requests);
        let waited = runtime.block_on(wait_to_restart(Duration::from_millis(5), &mut requests_rx));
        assert_eq!(waited, Waited::Elapsed, "a closed channel leaves the delay");
    }

    #[test]
    fn a_full_disk_declines_checkpoints_and_leaves_no_directories_behind() {
        let memory = MemoryStorage::default();
        let faulty = Arc::new(FaultyStorage::memory(&memory));
        let (monitor, outcome, requests) = spawn(job(1_000_000, 1_000), Arc::clone(&faulty) as _);
        wait_for("a checkpoint to complete", || {
            monitor.checkpoint_counts().0 >= 1
        });
        faulty.break_writes(io::ErrorKind::StorageFull);
        wait_for("twenty checkpoints to fail", || {
            monitor.checkpoint_counts().1 >= 20
        });
        // While the job runs, only the checkpoint in flight and the last few aborted ones
        // (a late write not yet reported) have a directory: twenty failures do not pile up
        // twenty directories.
        let incomplete = statuses(&memory)
            .into_iter()
            .filter(|(_, status)| *status == "incomplete")
            .count();
        assert!(incomplete <= 4, "{:?}", statuses(&memory));
        faulty.heal();
        let completed = monitor.checkpoint_counts().0;
        wait_for("a checkpoint to complete after the disk was freed", || {
            monitor.checkpoint_counts().0 > completed
        });
        requests.send(JobRequest::Cancel).unwrap();
        let outcome = ended(&outcome);
        assert_eq!(outcome.status, JobStatus::Canceled, "{outcome:?}");

        let failures = monitor.recent_failures();
        assert!(failures.len() >= 20, "{failures:?}");
        for failure in &failures {
            // A state write fails (a decline), or the metadata write does.
            let (declined, unrecorded) = (
                failure.reason.starts_with("declined by task "),
                failure.reason.starts_with("could not be recorded: "),
            );
            assert!(
                (declined || unrecorded)
                    && failure
                        .reason
                        .contains(".tmp: No space left on device (os error 28)"),
                "{failure:?}"
            );
        }
        // Only the retained complete checkpoint is left: every failed one was removed.
        let left = statuses(&memory);
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0].1, "complete", "{left:?}");
        assert!(
            memory
                .paths()
                .iter()
                .all(|p| !p.to_string_lossy().ends_with(".tmp")),
            "{:?}",
            memory.paths()
        );
    }

    #[test]
    fn a_prune_that_failed_is_retried_at_the_next_completion() {
        let memory = MemoryStorage::default();
        let faulty = Arc::new(FaultyStorage::memory(&memory));
        // The first removal is the pruning of checkpoint 1 when checkpoint 2 completes: the
        // file system is read-only for that moment.
        faulty.inject_removal(1, io::ErrorKind::ReadOnlyFilesystem);
        let (monitor, outcome, _requests) = spawn(job(4_000, 0), Arc::clone(&faulty) as _);
        let outcome = ended(&outcome);
        assert_eq!(outcome.status, JobStatus::Finished, "{outcome:?}");
        assert!(monitor.checkpoint_counts().0 >= 3, "{monitor:?}");
        // One checkpoint is retained, not two: checkpoint 1 went at a later completion.
        let left = statuses(&memory);
        assert_eq!(left.len(), 1, "{left:?}");
        assert_eq!(left[0].1, "complete", "{left:?}");
    }

    #[test]
    fn a_run_superseded_by_a_newer_one_stops_without_completing_another_checkpoint() {
        let memory = MemoryStorage::default();
        let (monitor, outcome, _requests) = spawn(job(1_000_000, 0), Arc::new(memory.clone()));
        wait_for("two checkpoints", || monitor.checkpoint_counts().0 >= 2);
        // Another process starts the job on the same storage.
        let newer = memory.sharing();
        assert_eq!(newer.claim_generation().unwrap(), Generation(2));
        let completed_at_claim = monitor.checkpoint_counts().0;
        let outcome = ended(&outcome);
        assert_eq!(outcome.status, JobStatus::Failed, "{outcome:?}");
        assert_eq!(outcome.restarts, 0, "{outcome:?}");
        let failure = outcome.failure.unwrap();
        assert!(
            failure.contains("generation 2 of this job has started"),
            "{failure}"
        );
        // One whose fence was checked just before the claim may still complete.
        let completed = monitor.checkpoint_counts().0;
        assert!(
            completed <= completed_at_claim + 1,
            "{completed} > {completed_at_claim} + 1"
        );
        for listing in newer.list().unwrap() {
            if let Some(meta) = listing.metadata() {
                assert_eq!(meta.generation, Generation(1), "{listing:?}");
            }
        }
    }

    #[test]
    fn failures_beyond_the_tolerable_count_fail_the_job_naming_the_storage_error() {
        let memory = MemoryStorage::default();
        let faulty = Arc::new(FaultyStorage::memory(&memory));
        // The disk turns read-only once the run has claimed its generation (a run that cannot
        // claim one does not start).
        faulty.claim_generation().unwrap();
        faulty.break_writes(io::ErrorKind::ReadOnlyFilesystem);
        let (monitor, outcome, _requests) = spawn(job(1_000_000, 2), Arc::clone(&faulty) as _);
        let outcome = ended(&outcome);
        assert_eq!(outcome.status, JobStatus::Failed, "{outcome:?}");
        let failure = outcome.failure.unwrap();
        assert!(
            failure.starts_with("3 checkpoint failures in a row exceed the 2 tolerated")
                && failure.contains("Read-only file system (os error 30)"),
            "{failure}"
        );
        assert_eq!(monitor.checkpoint_counts(), (0, 3));
        assert_eq!(statuses(&memory), []);
    }

    #[test]
    fn a_failed_metadata_write_is_removed_and_the_next_checkpoint_completes() {
        let memory = MemoryStorage::default();
        let faulty = Arc::new(FaultyStorage::memory(&memory));
        faulty.inject_metadata(
            2,
            crate::checkpoint::storage::Fault::Fail(io::ErrorKind::StorageFull),
        );
        let (monitor, outcome, _requests) = spawn(job(4_000, 1), Arc::clone(&faulty) as _);
        let outcome = ended(&outcome);
        // One failure is tolerated: the next checkpoint completes and resets the count.
        assert_eq!(outcome.status, JobStatus::Finished, "{outcome:?}");
        let failures = monitor.recent_failures();
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert_eq!(failures[0].id.0, 2);
        assert_eq!(
            failures[0].reason,
            "could not be recorded: cannot write /memory/job/chk-0000000002/_metadata.tmp: \
             No space left on device (os error 28)"
        );
        let left = statuses(&memory);
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(left[0].0 > 2 && left[0].1 == "complete", "{left:?}");
    }
}
