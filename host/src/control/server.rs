//! The HTTP/1.1 server of the control endpoint: routing, token checks, and
//! the actions, on a thread and a tokio runtime of its own.
//!
//! Why its own thread: the job's driver runs on a one-worker runtime whose
//! latency decides how fast checkpoints complete; a client that sends its
//! request slowly, or a dashboard polling every second, must never take that
//! worker. Here the server only reads the [`JobMonitor`] (short locks) and
//! sends [`JobRequest`]s on the job's channel; the answers to savepoint
//! requests come back on a oneshot channel, awaited on this runtime.
//!
//! A [`ControlServer`] is a handle: [`ControlServer::shutdown`] (or dropping
//! it) stops the server, waits for its thread and removes the
//! `_control.json` it wrote.

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde::Serialize;
use tokio::sync::{mpsc::UnboundedSender, oneshot};

use super::api::{self, CancelView, ErrorView, SavepointView};
use super::auth::{self, Token, TokenError};
use super::config::requires_token;
use super::endpoint_file::{EndpointFile, EndpointFileError};
use super::metrics;
use super::sampler::{SAMPLE_PERIOD, Sampler};
use crate::checkpoint::CheckpointId;
use crate::checkpoint::layout::CheckpointLayout;
use crate::job::{Job, JobStatus};
use crate::runtime::{JobMonitor, JobRequest, SavepointError};

/// How much longer than the checkpoint timeout a savepoint request waits
/// for its answer: the time to write the metadata and hear back.
pub const SAVEPOINT_MARGIN: Duration = Duration::from_secs(30);

/// How long a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The dashboard's files, embedded: no build step, nothing to install.
const INDEX_HTML: &str = include_str!("dashboard/index.html");
const APP_JS: &str = include_str!("dashboard/app.js");
const STYLE_CSS: &str = include_str!("dashboard/style.css");

/// What the server serves and acts on: a job and its channels.
#[derive(Debug, Clone)]
pub struct ControlTarget {
    /// The job (its graph and checkpoint settings).
    pub job: Job,
    /// Its live view.
    pub monitor: JobMonitor,
    /// Its request channel (the sender of what `JobRunner::run` receives).
    pub requests: UnboundedSender<JobRequest>,
    /// Where its checkpoints are on disk, for the paths the API shows.
    pub layout: CheckpointLayout,
}

impl ControlTarget {
    /// The target of a job run by [`JobRunner`](crate::runtime::JobRunner)
    /// with local checkpoint storage in the job's checkpoint directory. The
    /// paths the API shows are made absolute (against this process's working
    /// directory), so they mean the same to a client started elsewhere.
    pub fn new(mut job: Job, monitor: JobMonitor, requests: UnboundedSender<JobRequest>) -> Self {
        job.checkpoint.directory = absolute(&job.checkpoint.directory);
        let layout = CheckpointLayout::new(job.checkpoint.directory.clone());
        ControlTarget {
            job,
            monitor,
            requests,
            layout,
        }
    }
}

/// Why the control endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The address is taken, not local, or not allowed.
    #[error(
        "cannot listen on {address} for the control endpoint: {source}; choose another address \
         (`weir run --control ADDR` or `[control] address`), or turn it off with --no-control"
    )]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// An address off loopback without a token (a bug of the caller).
    #[error("the control endpoint on {address} is reachable from other machines and needs a token")]
    TokenRequired {
        /// The address asked for.
        address: SocketAddr,
    },
    /// No token could be had.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The thread or its runtime could not start.
    #[error("cannot start the control endpoint: {0}")]
    Start(std::io::Error),
    /// `_control.json` could not be written.
    #[error(transparent)]
    EndpointFile(#[from] EndpointFileError),
}

/// The running server: a handle that stops it.
#[derive(Debug)]
pub struct ControlServer {
    address: SocketAddr,
    url: String,
    token: Option<Token>,
    /// The directory whose `_control.json` this server wrote.
    endpoint_dir: Option<PathBuf>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Starts serving `target` on `address`. Off loopback the token is
    /// `WEIR_CONTROL_TOKEN`, or a generated one; on loopback there is none.
    pub fn start(
        address: SocketAddr,
        target: ControlTarget,
    ) -> Result<ControlServer, ControlError> {
        let token = if requires_token(address) {
            Some(Token::from_env_or_generate()?)
        } else {
            None
        };
        Self::start_with_token(address, token, target)
    }

    /// Starts serving `target` on `address`, requiring `token` when given
    /// (it must be given off loopback).
    pub fn start_with_token(
        address: SocketAddr,
        token: Option<Token>,
        target: ControlTarget,
    ) -> Result<ControlServer, ControlError> {
        if token.is_none() && requires_token(address) {
            return Err(ControlError::TokenRequired { address });
        }
        let bind = |source| ControlError::Bind { address, source };
        let listener = StdListener::bind(address).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let bound = listener.local_addr().map_err(bind)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(ControlError::Start)?;
        let (stop, stopped) = oneshot::channel();
        let state = Arc::new(State {
            target,
            token: token.clone(),
            sampler: Mutex::new(Sampler::default()),
        });
        let thread = std::thread::Builder::new()
            .name("weir-control".into())
            .spawn(move || runtime.block_on(serve(listener, state, stopped)))
            .map_err(ControlError::Start)?;
        let url = format!("http://{}", connectable(bound));
        tracing::info!("control endpoint at {url}/ (dashboard, /api, /metrics)");
        if token.is_some() {
            tracing::info!(
                "the control endpoint listens on {bound} and requires a token: \
                 `Authorization: Bearer TOKEN` or ?token=TOKEN (see _control.json, or {})",
                auth::TOKEN_ENV
            );
        }
        Ok(ControlServer {
            address: bound,
            url,
            token,
            endpoint_dir: None,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The address it listens on (with the port the system chose).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Where a client on this machine connects: `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The token requests need, if any.
    pub fn token(&self) -> Option<&Token> {
        self.token.as_ref()
    }

    /// Writes `_control.json` into `dir` (the job's checkpoint directory), so
    /// `weir status DIR` finds this server; removed again at shutdown.
    pub fn write_endpoint_file(&mut self, dir: &Path, job: &str) -> Result<PathBuf, ControlError> {
        let file = EndpointFile {
            address: self.url.clone(),
            pid: std::process::id(),
            job: job.to_string(),
            started: api::epoch_ms(SystemTime::now()),
            token: self.token.as_ref().map(|t| t.as_str().to_string()),
        };
        let path = file.write(dir)?;
        self.endpoint_dir = Some(dir.to_path_buf());
        Ok(path)
    }

    /// Stops the server, waits for its thread and removes `_control.json`.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        if let Some(dir) = self.endpoint_dir.take()
            && let Err(e) = EndpointFile::remove_own(&dir)
        {
            tracing::warn!("{e}");
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// `path` made absolute against the working directory (as it is, if that
/// cannot be read).
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// An address a local client can connect to: the unspecified address
/// (listening on every interface) becomes loopback.
fn connectable(address: SocketAddr) -> SocketAddr {
    let ip = match address.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, address.port())
}

/// What every request handler shares.
struct State {
    target: ControlTarget,
    token: Option<Token>,
    sampler: Mutex<Sampler>,
}

impl State {
    fn sampler(&self) -> std::sync::MutexGuard<'_, Sampler> {
        self.sampler
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Accepts connections until `stopped` fires; samples the task counters once
/// a period meanwhile.
async fn serve(listener: StdListener, state: Arc<State>, mut stopped: oneshot::Receiver<()>) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(e) => {
            tracing::error!("the control endpoint cannot listen: {e}");
            return;
        }
    };
    let mut ticks = tokio::time::interval(SAMPLE_PERIOD);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            _ = ticks.tick() => {
                let tasks = state.target.monitor.tasks();
                state
                    .sampler()
                    .sample(Instant::now(), tasks.iter().map(|(id, _, m)| (id, m)));
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let state = Arc::clone(&state);
                    tokio::spawn(async move {
                        let service = service_fn(move |request| {
                            let state = Arc::clone(&state);
                            async move { Ok::<_, Infallible>(handle(&state, request).await) }
                        });
                        let _ = http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(HEADER_TIMEOUT)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                Err(e) => {
                    // Out of file descriptors, say: wait a little rather than spin.
                    tracing::warn!("the control endpoint cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
}

type Answer = Response<Full<Bytes>>;

/// Routes one request.
async fn handle(state: &State, request: Request<Incoming>) -> Answer {
    let path = request.uri().path().to_string();
    let method = request.method().clone();
    let dashboard = match path.as_str() {
        "/" | "/index.html" => Some((INDEX_HTML, "text/html; charset=utf-8")),
        "/app.js" => Some((APP_JS, "text/javascript; charset=utf-8")),
        "/style.css" => Some((STYLE_CSS, "text/css; charset=utf-8")),
        _ => None,
    };
    // The dashboard's files hold nothing secret; the page then calls the API with the token.
    if let Some((body, content_type)) = dashboard {
        return match method {
            Method::GET => text(StatusCode::OK, content_type, body.to_string()),
            _ => wrong_method(&path, "GET"),
        };
    }
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if let Err(failure) = auth::check(state.token.as_ref(), authorization, request.uri().query()) {
        let mut answer = error(StatusCode::UNAUTHORIZED, failure.to_string());
        answer.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"weir\""),
        );
        return answer;
    }
    let target = &state.target;
    let (now, wall_now) = (Instant::now(), SystemTime::now());
    match (path.as_str(), method) {
        ("/api/job", Method::GET) => {
            let view = api::job_view(
                &target.job,
                &target.monitor,
                &state.sampler(),
                now,
                wall_now,
            );
            json(StatusCode::OK, &view)
        }
        ("/api/checkpoints", Method::GET) => json(
            StatusCode::OK,
            &api::checkpoints_view(&target.monitor, &target.layout, now, wall_now),
        ),
        ("/api/checkpoints/config", Method::GET) => json(
            StatusCode::OK,
            &api::config_view(&target.job.checkpoint, &target.layout),
        ),
        (p, Method::GET) if p.starts_with("/api/checkpoints/") => {
            let text = &p["/api/checkpoints/".len()..];
            let Ok(id) = text.parse::<u64>() else {
                return error(
                    StatusCode::BAD_REQUEST,
                    format!("`{text}` is not a checkpoint id: use a number from /api/checkpoints"),
                );
            };
            match api::details_view(
                &target.monitor,
                &target.layout,
                CheckpointId(id),
                now,
                wall_now,
            ) {
                Some(view) => json(StatusCode::OK, &view),
                None => error(
                    StatusCode::NOT_FOUND,
                    format!(
                        "checkpoint {id} is not in the history of this job: see /api/checkpoints \
                         for the ids it keeps (the most recent ones)"
                    ),
                ),
            }
        }
        ("/api/savepoints", Method::POST) => savepoint(target, false).await,
        ("/api/stop", Method::POST) => savepoint(target, true).await,
        ("/api/cancel", Method::POST) => cancel(target),
        ("/metrics", Method::GET) => text(
            StatusCode::OK,
            metrics::CONTENT_TYPE,
            metrics::render(&target.job, &target.monitor, wall_now),
        ),
        ("/api/job" | "/api/checkpoints" | "/api/checkpoints/config" | "/metrics", _) => {
            wrong_method(&path, "GET")
        }
        (p, _) if p.starts_with("/api/checkpoints/") => wrong_method(&path, "GET"),
        ("/api/savepoints" | "/api/stop" | "/api/cancel", _) => wrong_method(&path, "POST"),
        _ => error(
            StatusCode::NOT_FOUND,
            format!(
                "no such endpoint: {path}; there are /api/job, /api/checkpoints, \
                 /api/checkpoints/config, /api/checkpoints/ID, /api/savepoints, /api/stop, \
                 /api/cancel, /metrics and the dashboard at / (docs/CONTROL.md)"
            ),
        ),
    }
}

/// `POST /api/savepoints` (`stop = false`) and `POST /api/stop`.
async fn savepoint(target: &ControlTarget, stop: bool) -> Answer {
    let status = target.monitor.status();
    if status != JobStatus::Running {
        return error(
            StatusCode::CONFLICT,
            format!("the job is {status}, not RUNNING: savepoints are taken of a running job"),
        );
    }
    let (request, answer) = JobRequest::savepoint(stop);
    if target.requests.send(request).is_err() {
        return error(
            StatusCode::CONFLICT,
            "the job has ended: there is nothing to take a savepoint of".into(),
        );
    }
    let bound = target.job.checkpoint.timeout + SAVEPOINT_MARGIN;
    match tokio::time::timeout(bound, answer).await {
        Ok(Ok(Ok(taken))) => json(
            StatusCode::OK,
            &SavepointView::new(taken.id, &absolute(&taken.path)),
        ),
        Ok(Ok(Err(refused @ SavepointError::Refused(_)))) => {
            error(StatusCode::CONFLICT, refused.to_string())
        }
        Ok(Ok(Err(failed @ SavepointError::Failed { .. }))) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("{failed}; the job goes on: try again, or see /api/checkpoints"),
        ),
        Ok(Err(_)) => error(
            StatusCode::CONFLICT,
            "the job ended before it took the savepoint".into(),
        ),
        Err(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "no answer within {} s (the checkpoint timeout and a margin): the savepoint may \
                 still complete; see /api/checkpoints",
                bound.as_secs()
            ),
        ),
    }
}

/// `POST /api/cancel`.
fn cancel(target: &ControlTarget) -> Answer {
    let status = target.monitor.status();
    if status.is_terminal() {
        return error(
            StatusCode::CONFLICT,
            format!("the job has already ended: it is {status}"),
        );
    }
    if target.requests.send(JobRequest::Cancel).is_err() {
        return error(StatusCode::CONFLICT, "the job has already ended".into());
    }
    json(
        StatusCode::ACCEPTED,
        &CancelView {
            status: "CANCELING",
        },
    )
}

fn wrong_method(path: &str, allowed: &'static str) -> Answer {
    let mut answer = error(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{path} takes {allowed} only"),
    );
    answer
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allowed));
    answer
}

fn error(status: StatusCode, message: String) -> Answer {
    json(status, &ErrorView { error: message })
}

fn json(status: StatusCode, body: &impl Serialize) -> Answer {
    let body = serde_json::to_string(body).unwrap_or_else(|e| {
        serde_json::json!({ "error": format!("cannot write the answer as JSON: {e}") }).to_string()
    });
    text(status, "application/json", body)
}

fn text(status: StatusCode, content_type: &'static str, body: String) -> Answer {
    let mut answer = Response::new(Full::new(Bytes::from(body)));
    *answer.status_mut() = status;
    let headers = answer.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    answer
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::checkpoint::storage::{CheckpointStorage, MemoryStorage};
    use crate::control::client::{ClientError, ControlClient};
    use crate::runtime::{JobOutcome, JobRunner, RunError, RunOptions};

    /// generator → blackhole (no guest: it runs in a unit test), a checkpoint
    /// every 20 ms, unbounded: it runs until cancelled or stopped.
    fn job() -> Job {
        Job::from_str(
            "name = \"ctl\"\n\
             [checkpoint]\ninterval = \"20ms\"\ndirectory = \"/memory/job\"\n\
             [restart]\nstrategy = \"none\"\n\
             [[source]]\nname = \"gen\"\ntype = \"generator\"\nparallelism = 2\nrate = 20000.0\n\
             [[sink]]\nname = \"out\"\ntype = \"blackhole\"\n\
             inputs = [{ from = \"gen\", partition = \"rebalance\" }]\n",
            "/jobs",
            "ctl.toml",
        )
        .unwrap()
    }

    struct Running {
        server: ControlServer,
        outcome: std::sync::mpsc::Receiver<Result<JobOutcome, RunError>>,
        monitor: JobMonitor,
    }

    fn start(address: &str, token: Option<Token>) -> Running {
        let memory = MemoryStorage::default();
        let storage: Arc<dyn CheckpointStorage> = Arc::new(memory);
        let layout = storage.layout().clone();
        let job = job();
        let runner = JobRunner::with_storage(job.clone(), RunOptions::default(), storage).unwrap();
        let monitor = runner.monitor();
        let (requests, requests_rx) = tokio::sync::mpsc::unbounded_channel();
        let target = ControlTarget {
            job,
            monitor: monitor.clone(),
            requests,
            layout,
        };
        let server =
            ControlServer::start_with_token(address.parse().unwrap(), token, target).unwrap();
        let (tx, outcome) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(runner.run(requests_rx));
        });
        Running {
            server,
            outcome,
            monitor,
        }
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "waited 20 s for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn serves_the_api_and_takes_a_savepoint_then_cancels() {
        let running = start("127.0.0.1:0", None);
        assert!(running.server.url().starts_with("http://127.0.0.1:"));
        let client = ControlClient::new(running.server.url(), None).unwrap();
        wait_for("two completed checkpoints", || {
            running.monitor.checkpoint_counts().0 >= 2
        });

        let job = client.get_json("/api/job").unwrap();
        assert_eq!(job["name"], "ctl");
        assert_eq!(job["status"], "RUNNING");
        assert_eq!(job["vertices"][0]["name"], "gen");
        assert_eq!(job["vertices"][0]["tasks"].as_array().unwrap().len(), 2);
        assert_eq!(job["edges"][0]["partitioning"], "rebalance");

        let checkpoints = client.get_json("/api/checkpoints").unwrap();
        assert!(checkpoints["counts"]["completed"].as_u64().unwrap() >= 2);
        let latest = checkpoints["latest"]["completed"]["id"].as_u64().unwrap();
        assert_eq!(
            checkpoints["latest"]["completed"]["external_path"],
            format!("/memory/job/chk-{latest:010}")
        );
        let details = client
            .get_json(&format!("/api/checkpoints/{latest}"))
            .unwrap();
        assert_eq!(details["id"], latest);
        assert_eq!(details["tasks"].as_array().unwrap().len(), 3, "{details}");

        let config = client.get_json("/api/checkpoints/config").unwrap();
        assert_eq!(config["interval"], 20);

        let taken = client.post_json("/api/savepoints").unwrap();
        let id = taken["id"].as_u64().unwrap();
        assert_eq!(taken["path"], format!("/memory/job/savepoints/sp-{id:010}"));
        let checkpoints = client.get_json("/api/checkpoints").unwrap();
        assert_eq!(checkpoints["latest"]["savepoint"]["id"], id);

        let metrics = client
            .request(Method::GET, "/metrics", Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(metrics.status, 200);
        assert_eq!(metrics.content_type.as_deref(), Some(metrics::CONTENT_TYPE));
        assert!(
            metrics
                .body
                .contains("weir_task_records_out_total{vertex=\"gen\",subtask=\"1\"}"),
            "{}",
            metrics.body
        );

        let cancel = client.post_json("/api/cancel").unwrap();
        assert_eq!(cancel["status"], "CANCELING");
        let outcome = running
            .outcome
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
            .unwrap();
        assert_eq!(outcome.status, JobStatus::Canceled);
        // The server outlives the job: it answers, and refuses what needs a running job.
        let job = client.get_json("/api/job").unwrap();
        assert_eq!(job["status"], "CANCELED");
        let refused = client.post_json("/api/savepoints").unwrap_err();
        assert!(
            matches!(&refused, ClientError::Status { status: 409, message }
                if message.starts_with("the job is CANCELED, not RUNNING")),
            "{refused}"
        );
        let refused = client.post_json("/api/cancel").unwrap_err();
        assert!(
            matches!(&refused, ClientError::Status { status: 409, .. }),
            "{refused}"
        );
        running.server.shutdown();
        assert!(client.get_json("/api/job").unwrap_err().is_unreachable());
    }

    #[test]
    fn stop_answers_with_the_savepoint_and_the_job_finishes() {
        let running = start("127.0.0.1:0", None);
        let client = ControlClient::new(running.server.url(), None).unwrap();
        wait_for("a completed checkpoint", || {
            running.monitor.checkpoint_counts().0 >= 1
        });
        let taken = client.post_json("/api/stop").unwrap();
        let outcome = running
            .outcome
            .recv_timeout(Duration::from_secs(20))
            .unwrap()
            .unwrap();
        assert_eq!(outcome.status, JobStatus::Finished);
        assert_eq!(
            outcome.savepoint.unwrap().display().to_string(),
            taken["path"].as_str().unwrap()
        );
    }

    #[test]
    fn answers_wrong_methods_paths_and_ids_with_json_errors() {
        let running = start("127.0.0.1:0", None);
        let client = ControlClient::new(running.server.url(), None).unwrap();
        let timeout = Some(Duration::from_secs(5));
        let answer = client.request(Method::POST, "/api/job", timeout).unwrap();
        assert_eq!(answer.status, 405);
        assert_eq!(answer.allow.as_deref(), Some("GET"));
        let answer = client.request(Method::GET, "/api/cancel", timeout).unwrap();
        assert_eq!(
            (answer.status, answer.allow.as_deref()),
            (405, Some("POST"))
        );
        let answer = client.request(Method::GET, "/nothing", timeout).unwrap();
        assert_eq!(answer.status, 404);
        assert!(
            answer.body.contains("no such endpoint: /nothing"),
            "{}",
            answer.body
        );
        let answer = client
            .request(Method::GET, "/api/checkpoints/abc", timeout)
            .unwrap();
        assert_eq!(answer.status, 400);
        let error = client.get_json("/api/checkpoints/987654").unwrap_err();
        assert!(
            matches!(&error, ClientError::Status { status: 404, message }
                if message.starts_with("checkpoint 987654 is not in the history")),
            "{error}"
        );
        for (path, content_type) in [
            ("/", "text/html; charset=utf-8"),
            ("/app.js", "text/javascript; charset=utf-8"),
            ("/style.css", "text/css; charset=utf-8"),
        ] {
            let answer = client.request(Method::GET, path, timeout).unwrap();
            assert_eq!(answer.status, 200, "{path}");
            assert_eq!(answer.content_type.as_deref(), Some(content_type), "{path}");
        }
        let _ = client.post_json("/api/cancel");
    }

    #[test]
    fn off_loopback_every_api_request_needs_the_token() {
        let token = Token::new("t0k3n", "a test").unwrap();
        let running = start("0.0.0.0:0", Some(token));
        // Written with the loopback address, which reaches an endpoint on every interface.
        assert!(running.server.url().starts_with("http://127.0.0.1:"));
        let anonymous = ControlClient::new(running.server.url(), None).unwrap();
        let error = anonymous.get_json("/api/job").unwrap_err();
        assert!(
            matches!(&error, ClientError::Unauthorized { message }
                if message.starts_with("this endpoint requires the job's token")),
            "{error}"
        );
        let timeout = Some(Duration::from_secs(5));
        let answer = anonymous.request(Method::GET, "/metrics", timeout).unwrap();
        assert_eq!(answer.status, 401);
        let answer = anonymous
            .request(Method::GET, "/api/job?token=t0k3n", timeout)
            .unwrap();
        assert_eq!(answer.status, 200);
        // The dashboard's files need none: the page passes the token on.
        let answer = anonymous.request(Method::GET, "/", timeout).unwrap();
        assert_eq!(answer.status, 200);
        let wrong = ControlClient::new(running.server.url(), Some("nope".into())).unwrap();
        assert!(matches!(
            wrong.get_json("/api/job").unwrap_err(),
            ClientError::Unauthorized { message } if message.starts_with("wrong token")
        ));
        let client = ControlClient::new(running.server.url(), Some("t0k3n".into())).unwrap();
        assert_eq!(client.get_json("/api/job").unwrap()["name"], "ctl");
        client.post_json("/api/cancel").unwrap();
    }

    #[test]
    fn refuses_to_start_off_loopback_without_a_token_or_on_a_taken_port() {
        let (requests, _rx) = tokio::sync::mpsc::unbounded_channel();
        let target = ControlTarget::new(job(), JobMonitor::default(), requests);
        let error =
            ControlServer::start_with_token("0.0.0.0:0".parse().unwrap(), None, target.clone())
                .unwrap_err();
        assert!(
            matches!(error, ControlError::TokenRequired { .. }),
            "{error}"
        );
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let error = ControlServer::start(taken.local_addr().unwrap(), target).unwrap_err();
        assert!(
            error.to_string().starts_with(&format!(
                "cannot listen on {} for the control endpoint",
                taken.local_addr().unwrap()
            )),
            "{error}"
        );
    }

    #[test]
    fn shutdown_removes_the_endpoint_file() {
        let dir = tempfile::tempdir().unwrap();
        let (requests, _rx) = tokio::sync::mpsc::unbounded_channel();
        let target = ControlTarget::new(job(), JobMonitor::default(), requests);
        let mut server = ControlServer::start("127.0.0.1:0".parse().unwrap(), target).unwrap();
        let path = server.write_endpoint_file(dir.path(), "ctl").unwrap();
        let file = EndpointFile::read(dir.path()).unwrap();
        assert_eq!(file.address, server.url());
        assert_eq!((file.job.as_str(), file.token), ("ctl", None));
        server.shutdown();
        assert!(!path.exists());
    }
}
