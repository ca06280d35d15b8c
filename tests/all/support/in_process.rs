//! Jobs run in the test process through the library ([`JobRunner`]), for the tests that watch
//! a job's live view or send it requests without a `weir` process in between.

use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;
use weir::job::Job;
use weir::runtime::{JobMonitor, JobOutcome, JobRequest, JobRunner, RunOptions};

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
    /// the job ends first.
    pub(crate) fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&JobMonitor) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        while !done(&self.monitor) {
            if let Ok(ended) = self.outcome.try_recv() {
                panic!("the job ended while waiting for {what}: {ended:?}");
            }
            assert!(Instant::now() < deadline, "waited {timeout:?} for {what}");
            std::thread::sleep(Duration::from_millis(5));
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
