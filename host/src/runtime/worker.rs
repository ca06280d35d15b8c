//! [`WorkerRunner`]: one worker of a job that runs as many processes (`weir run JOB --worker
//! I/N`): its stages, each a [`JobRunner`] of its own, run side by side.
//!
//! Why a module of its own: the stages of a worker are independent jobs — each checkpoints,
//! fails over and restores on its own ([`crate::job::workers`]) — but the process is one
//! thing to its operator: a stop or cancel reaches every stage, and a stage that fails
//! beyond its restart strategy stops the others, so the process exits and is restarted as a
//! whole (a Kubernetes pod) instead of limping on with half its stages; a stage stopped or
//! cancelled through its own control endpoint stops or cancels the others too.

use std::sync::mpsc;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::{JobMonitor, JobOutcome, JobRequest, JobRunner, RunError, RunOptions};
use crate::job::workers::{Worker, WorkersError, plan};
use crate::job::{Job, JobStatus, SinkKind, SinkPartitioning, VertexKind};

/// Why a worker could not start: its job cannot run as workers, or one of its stages cannot
/// start (named).
#[derive(Debug, thiserror::Error)]
pub enum WorkerStartError {
    /// The job cannot be cut into stages.
    #[error(transparent)]
    Plan(#[from] WorkersError),
    /// A stage cannot start.
    #[error("stage {stage} of worker {worker}: {source}")]
    Stage {
        /// This worker.
        worker: Worker,
        /// The stage, from 0.
        stage: usize,
        /// Why (boxed: errors stay small to pass around).
        source: Box<RunError>,
    },
}

/// The stages of one worker, ready to run.
pub struct WorkerRunner {
    worker: Worker,
    stages: Vec<Stage>,
}

/// A stage ready to run, with the channel its requests come through.
struct Stage {
    runner: JobRunner,
    requests: UnboundedSender<JobRequest>,
    receiver: UnboundedReceiver<JobRequest>,
}

/// What can be asked of a running worker: of each of its stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerRequest {
    /// Cancel every stage.
    Cancel,
    /// Stop every stage with a savepoint of its own.
    StopWithSavepoint,
}

impl From<WorkerRequest> for JobRequest {
    fn from(request: WorkerRequest) -> JobRequest {
        match request {
            WorkerRequest::Cancel => JobRequest::Cancel,
            WorkerRequest::StopWithSavepoint => JobRequest::StopWithSavepoint,
        }
    }
}

/// How one stage of a worker ended.
#[derive(Debug)]
pub struct StageOutcome {
    /// The stage, from 0.
    pub stage: usize,
    /// How its run ended, or why it could not run.
    pub result: Result<JobOutcome, RunError>,
}

impl WorkerRunner {
    /// Worker `worker` of `job`: plans its stages and prepares each (modules, storage, the
    /// Kafka checks that create the topics between stages), in the order records flow, so a
    /// stage's exchange topic exists before the stage that reads it starts.
    pub fn new(job: Job, worker: Worker, options: RunOptions) -> Result<Self, WorkerStartError> {
        if worker.count > 1 && job.checkpoint.object_store.is_none() {
            tracing::warn!(
                "the workers of job `{}` share its id and their checkpoints through the local \
                 directory {}: fine for workers on this machine; on several machines, give \
                 [checkpoint] directory an s3:// URL, or each machine's workers would exchange \
                 records through topics of their own",
                job.name,
                job.checkpoint.directory.display()
            );
        }
        let history = job
            .checkpoint
            .open_storage()
            .and_then(|storage| storage.storage_id())
            .map_err(|e| WorkerStartError::Stage {
                worker,
                stage: 0,
                source: Box::new(RunError::Storage(e)),
            })?;
        let planned = plan(&job, worker, &history)?;
        for stage in &planned {
            for vertex in &stage.vertices {
                if let VertexKind::Sink(SinkKind::Kafka(settings)) = &vertex.kind
                    && matches!(settings.partitioning, SinkPartitioning::KeyGroups(_))
                {
                    tracing::info!(
                        "worker {worker}: the stages exchange records through topic \"{}\"",
                        settings.topic.topics().join(", ")
                    );
                }
            }
        }
        let stages = planned
            .into_iter()
            .enumerate()
            .map(|(stage, job)| {
                let runner = JobRunner::new(job, options.clone()).map_err(|source| {
                    WorkerStartError::Stage {
                        worker,
                        stage,
                        source: Box::new(source),
                    }
                })?;
                let (requests, receiver) = unbounded_channel();
                Ok(Stage {
                    runner,
                    requests,
                    receiver,
                })
            })
            .collect::<Result<Vec<_>, WorkerStartError>>()?;
        Ok(WorkerRunner { worker, stages })
    }

    /// This worker.
    pub fn worker(&self) -> Worker {
        self.worker
    }

    /// Each stage's job, monitor and requests (for its control endpoint), in stage order.
    pub fn stages(&self) -> Vec<(&Job, JobMonitor, UnboundedSender<JobRequest>)> {
        self.stages
            .iter()
            .map(|s| (s.runner.job(), s.runner.monitor(), s.requests.clone()))
            .collect()
    }

    /// Runs every stage until all have ended. Each request of `requests` goes to every stage;
    /// a stage that fails beyond its restart strategy, or is cancelled or stopped with a
    /// savepoint through its own endpoint, has the others cancelled or stopped the same way. A
    /// stage that finishes its input leaves the others running.
    pub fn run(self, requests: mpsc::Receiver<WorkerRequest>) -> Vec<StageOutcome> {
        let (ended_tx, ended_rx) = mpsc::channel::<StageOutcome>();
        let mut senders: Vec<UnboundedSender<JobRequest>> = Vec::new();
        let mut threads = Vec::new();
        for (stage, parts) in self.stages.into_iter().enumerate() {
            senders.push(parts.requests);
            let ended = ended_tx.clone();
            let (runner, receiver) = (parts.runner, parts.receiver);
            threads.push(std::thread::spawn(move || {
                // What the stage logs says which stage it is: both write to one stderr.
                let _stage = tracing::info_span!("stage", n = stage).entered();
                let result = runner.run(receiver);
                let _ = ended.send(StageOutcome { stage, result });
            }));
        }
        drop(ended_tx);
        let count = threads.len();
        let mut outcomes = Vec::with_capacity(count);
        let mut ending = false;
        while outcomes.len() < count {
            // Requests from outside are forwarded between waits for the stages.
            while let Ok(request) = requests.try_recv() {
                for tx in &senders {
                    let _ = tx.send(request.into());
                }
            }
            match ended_rx.recv_timeout(std::time::Duration::from_millis(50)) {
                Ok(outcome) => {
                    // A stage that ended other than by finishing its input takes the
                    // others with it, the same way: the worker is one process to its operator.
                    let follow = match &outcome.result {
                        Ok(o) if o.status == JobStatus::Finished && o.savepoint.is_some() => {
                            Some(("stopped with a savepoint", WorkerRequest::StopWithSavepoint))
                        }
                        Ok(o) if o.status == JobStatus::Finished => None,
                        Ok(o) if o.status == JobStatus::Canceled => {
                            Some(("was cancelled", WorkerRequest::Cancel))
                        }
                        Ok(_) | Err(_) => Some(("failed", WorkerRequest::Cancel)),
                    };
                    if let Some((how, request)) = follow
                        && !ending
                    {
                        ending = true;
                        tracing::warn!(
                            "stage {} of worker {} {how}: the other stages follow",
                            outcome.stage,
                            self.worker
                        );
                        for tx in &senders {
                            let _ = tx.send(request.into());
                        }
                    }
                    outcomes.push(outcome);
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        for thread in threads {
            let _ = thread.join();
        }
        outcomes.sort_by_key(|o| o.stage);
        outcomes
    }
}
