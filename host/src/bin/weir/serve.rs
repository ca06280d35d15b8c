//! What a running job and a running worker both serve: the control endpoint, and the signal
//! handler that stops them. Shared by `weir run` (run.rs) and a worker's run (run_worker.rs),
//! which starts one process of a job cut into stages.

use std::io::IsTerminal as _;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};

use weir::control::{ControlServer, ControlTarget};
use weir::job::Job;
use weir::runtime::{JobMonitor, JobRequest};

/// On SIGTERM or Ctrl-C, calls `stop(true)` to stop with a savepoint when `savepoint_on_stop`,
/// else `stop(false)` to cancel; a second signal always cancels. `what` names what stops in the
/// message.
pub(crate) fn on_stop_signal(
    what: String,
    savepoint_on_stop: bool,
    stop: impl Fn(bool) + Send + 'static,
) {
    let signalled = AtomicBool::new(false);
    let installed = ctrlc::set_handler(move || {
        let again = signalled.swap(true, Ordering::SeqCst);
        let savepoint = savepoint_on_stop && !again;
        let how = if savepoint {
            "StopWithSavepoint"
        } else {
            "Cancel"
        };
        eprintln!("\nweir: stopping {what} ({how}); signal again to cancel at once");
        stop(savepoint);
    });
    if let Err(e) = installed {
        tracing::warn!("cannot install the signal handler: {e}");
    }
}

/// Whether and where to serve the control endpoint, and for which job.
pub(crate) struct ControlSettings {
    pub(crate) enabled: bool,
    pub(crate) address: SocketAddr,
    pub(crate) job: Job,
}

/// Starts the control endpoint and publishes it in `_control.json`, unless it is off; prints
/// the dashboard's one-time link when stderr is a terminal.
pub(crate) fn start_control(
    settings: ControlSettings,
    monitor: &JobMonitor,
    requests: &tokio::sync::mpsc::UnboundedSender<JobRequest>,
    checkpoint_dir: &std::path::Path,
) -> anyhow::Result<Option<ControlServer>> {
    if !settings.enabled {
        tracing::info!(
            "control endpoint off: `weir status` and the other verbs cannot reach this job"
        );
        return Ok(None);
    }
    let name = settings.job.name.clone();
    let target = ControlTarget::new(settings.job, monitor.clone(), requests.clone());
    let mut server = ControlServer::start(settings.address, target)?;
    if let Err(e) = server.write_endpoint_file(checkpoint_dir, &name) {
        // The endpoint still works through its address; only finding it by directory does not.
        tracing::warn!(
            "{e}; `weir status` needs --address {} for this job",
            server.url()
        );
    }
    // The one-time link opens the job to whoever holds it, so it goes to the terminal only:
    // a log is often a file others can read (one of mode 0644 let another user cancel a job).
    if std::io::stderr().is_terminal() {
        match server.login_url() {
            Ok(url) => eprintln!(
                "dashboard: {url} (a one-time link, valid 5 min; `weir dashboard {}` prints \
                 another)",
                checkpoint_dir.display()
            ),
            Err(e) => tracing::warn!("{e}"),
        }
    } else {
        tracing::info!(
            "dashboard at {}: `weir dashboard {}` prints a one-time link to open it (links are \
             not logged: whoever can read the log could use one)",
            server.url(),
            checkpoint_dir.display()
        );
    }
    Ok(Some(server))
}
