//! Jobs run in the test process through the library ([`JobRunner`]), for the tests that watch
//! a job's live view or send it requests without a `weir` process in between; and guest
//! instances made by the host's wasm layer, for the tests that call a guest directly.

use std::path::Path;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use weir::checkpoint::storage::CheckpointStorage;
use weir::job::Job;
use weir::runtime::{JobMonitor, JobOutcome, JobRequest, JobRunner, RunOptions};
use weir::wasm::{GuestInstance, InstanceContext, OperatorModule};

use super::JOB_TIMEOUT;

/// A job running in this process on a thread of its own, through [`JobRunner`].
pub(crate) struct InProcess {
    requests: UnboundedSender<JobRequest>,
    monitor: JobMonitor,
    outcome: mpsc::Receiver<Result<JobOutcome, String>>,
}

impl InProcess {
    /// Loads the job file at `job` and starts it.
    pub(crate) fn start(job: &Path, options: RunOptions) -> InProcess {
        let job = Job::load(job).unwrap_or_else(|e| panic!("{e}"));
        let runner =
            JobRunner::new(job, options).unwrap_or_else(|e| panic!("cannot start the job: {e}"));
        InProcess::spawn(runner)
    }

    /// Loads the job file at `job` and starts it with its checkpoints in `storage` (a fault
    /// injected into them, say).
    pub(crate) fn start_with_storage(job: &Path, storage: Arc<dyn CheckpointStorage>) -> InProcess {
        let job = Job::load(job).unwrap_or_else(|e| panic!("{e}"));
        let runner = JobRunner::with_storage(job, RunOptions::default(), storage)
            .unwrap_or_else(|e| panic!("cannot start the job: {e}"));
        InProcess::spawn(runner)
    }

    /// Runs `runner` on a thread of its own.
    fn spawn(runner: JobRunner) -> InProcess {
        let monitor = runner.monitor();
        let (requests, requests_rx) = tokio::sync::mpsc::unbounded_channel();
        let (outcome_tx, outcome) = mpsc::channel();
        std::thread::Builder::new()
            .name("test-job".into())
            .spawn(move || {
                let _ = outcome_tx.send(runner.run(requests_rx).map_err(|e| e.to_string()));
            })
            .unwrap();
        InProcess {
            requests,
            monitor,
            outcome,
        }
    }

    /// The job's live view.
    pub(crate) fn monitor(&self) -> &JobMonitor {
        &self.monitor
    }

    /// Asks the job to do something (cancel, savepoint).
    pub(crate) fn request(&self, request: JobRequest) {
        self.requests.send(request).expect("the job is running");
    }

    /// Waits until `done` holds of the monitor, polling every 5 ms; fails after `timeout` or if
    /// the job ends first (naming its recent checkpoint failures).
    pub(crate) fn wait_until(
        &self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&JobMonitor) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        while !done(&self.monitor) {
            if let Ok(ended) = self.outcome.try_recv() {
                panic!(
                    "the job ended while waiting for {what}: {ended:?}; its checkpoint failures: \
                     {:#?}",
                    self.monitor.recent_failures()
                );
            }
            assert!(Instant::now() < deadline, "waited {timeout:?} for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the job's outcome, at most [`JOB_TIMEOUT`] (then cancels it and fails), calling
    /// `sample` every 5 ms meanwhile (to watch the checkpoint directory, say).
    pub(crate) fn join_sampling(self, mut sample: impl FnMut()) -> JobOutcome {
        let deadline = Instant::now() + JOB_TIMEOUT;
        loop {
            sample();
            match self.outcome.recv_timeout(Duration::from_millis(5)) {
                Ok(Ok(outcome)) => return outcome,
                Ok(Err(e)) => panic!("the job could not run: {e}"),
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
                Err(_) => {
                    let _ = self.requests.send(JobRequest::Cancel);
                    panic!("the job did not end within {JOB_TIMEOUT:?}; asked it to cancel")
                }
            }
        }
    }

    /// Waits for the job's outcome, at most [`JOB_TIMEOUT`] (then cancels it and fails).
    pub(crate) fn join(self) -> JobOutcome {
        match self.outcome.recv_timeout(JOB_TIMEOUT) {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => panic!("the job could not run: {e}"),
            Err(_) => {
                let _ = self.requests.send(JobRequest::Cancel);
                panic!("the job did not end within {JOB_TIMEOUT:?}; asked it to cancel")
            }
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        // A test that fails midway leaves no job running behind it.
        let _ = self.requests.send(JobRequest::Cancel);
    }
}

/// Runs the job file at `job` in this process to its end.
pub(crate) fn run_in_process(job: &Path) -> JobOutcome {
    InProcess::start(job, RunOptions::default()).join()
}

/// A fresh instance of `module` as subtask 0 of 1 of operator `name`, with an empty config.
#[track_caller]
pub(crate) fn guest_instance(module: &OperatorModule, name: &str) -> GuestInstance {
    module
        .instantiate(InstanceContext::single(name), b"")
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}
