//! The job status: where a job is in its life.
//!
//! ```text
//! CREATED → RUNNING → (FAILING → RESTARTING → RUNNING)* → FINISHED / CANCELED / FAILED
//!                  ↘ CANCELLING → CANCELED
//! ```
//!
//! There is no `FINISHING`: when every source has ended, the job stays RUNNING
//! until its sinks have committed their last output, then becomes FINISHED
//! (Flink's `JobStatus` has no such state either).

use std::fmt;

/// The status of a job, named as Flink names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobStatus {
    /// Built and validated, no task started yet.
    Created,
    /// Every task is running; periodic checkpoints are on.
    Running,
    /// A task failed; the others are being stopped.
    Failing,
    /// Every task stopped after a failure; waiting the restart delay and
    /// restoring from the latest completed checkpoint.
    Restarting,
    /// Every source ended and every task finished. Terminal.
    Finished,
    /// A cancel (or a stop) was asked for; tasks are being stopped.
    Cancelling,
    /// Cancelled. Terminal.
    Canceled,
    /// Failed and not restarted (the restart strategy gave up). Terminal.
    Failed,
}

impl JobStatus {
    /// Every status, in the order of a job's life.
    pub const ALL: [JobStatus; 8] = [
        JobStatus::Created,
        JobStatus::Running,
        JobStatus::Failing,
        JobStatus::Restarting,
        JobStatus::Finished,
        JobStatus::Cancelling,
        JobStatus::Canceled,
        JobStatus::Failed,
    ];

    /// Whether the job is over: FINISHED, CANCELED or FAILED.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobStatus::Finished | JobStatus::Canceled | JobStatus::Failed
        )
    }

    /// Whether a job may move from `self` to `next`.
    ///
    /// A failure while restarting goes back to FAILING; cancel is possible
    /// from every status that is not terminal; a cancel that cannot stop the
    /// tasks cleanly ends in FAILED.
    pub fn can_become(self, next: JobStatus) -> bool {
        use JobStatus::*;
        match self {
            Created => matches!(next, Running | Cancelling | Canceled | Failed),
            Running => matches!(next, Failing | Finished | Cancelling),
            Failing => matches!(next, Restarting | Failed | Cancelling),
            Restarting => matches!(next, Running | Failing | Failed | Cancelling),
            Cancelling => matches!(next, Canceled | Failed),
            Finished | Canceled | Failed => false,
        }
    }

    /// The name shown to users: `CREATED`, `RUNNING`, …
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Created => "CREATED",
            JobStatus::Running => "RUNNING",
            JobStatus::Failing => "FAILING",
            JobStatus::Restarting => "RESTARTING",
            JobStatus::Finished => "FINISHED",
            JobStatus::Cancelling => "CANCELLING",
            JobStatus::Canceled => "CANCELED",
            JobStatus::Failed => "FAILED",
        }
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_finished_canceled_and_failed_are_terminal() {
        let terminal: Vec<_> = JobStatus::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [JobStatus::Finished, JobStatus::Canceled, JobStatus::Failed]
        );
    }

    #[test]
    fn displays_flink_names() {
        let names: Vec<_> = JobStatus::ALL.iter().map(ToString::to_string).collect();
        assert_eq!(
            names,
            [
                "CREATED",
                "RUNNING",
                "FAILING",
                "RESTARTING",
                "FINISHED",
                "CANCELLING",
                "CANCELED",
                "FAILED"
            ]
        );
        assert_eq!(format!("{:<9}|", JobStatus::Running), "RUNNING  |");
    }

    #[test]
    fn terminal_statuses_go_nowhere() {
        for from in JobStatus::ALL.into_iter().filter(|s| s.is_terminal()) {
            assert!(
                JobStatus::ALL.iter().all(|&to| !from.can_become(to)),
                "{from}"
            );
        }
    }

    #[test]
    fn failover_loop_and_cancel_are_allowed() {
        use JobStatus::*;
        let life = [
            Created, Running, Failing, Restarting, Running, Cancelling, Canceled,
        ];
        assert!(life.windows(2).all(|w| w[0].can_become(w[1])));
        assert!(Restarting.can_become(Failing));
        assert!(Failing.can_become(Failed));
        assert!(!Running.can_become(Restarting));
        assert!(!Running.can_become(Created));
        assert!(!Failing.can_become(Running));
    }

    #[test]
    fn every_status_that_is_not_terminal_can_be_cancelled() {
        for status in JobStatus::ALL.into_iter().filter(|s| !s.is_terminal()) {
            assert!(
                status.can_become(JobStatus::Cancelling) || status == JobStatus::Cancelling,
                "{status}"
            );
        }
    }
}
