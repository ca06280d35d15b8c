//! The HTTP/1.1 server of the control endpoint: routing, the checks every
//! request passes (its `Host` and `Origin` and, for an action, its headers,
//! in `guard.rs`; then its token or session cookie, in
//! [`auth`]), the dashboard's one-time login, and the actions,
//! on a thread and a tokio runtime of its own.
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
//! `_control.json` it wrote. The actions it routes to are in `server/actions.rs`, the
//! answers every route sends (and their headers) in `server/answer.rs`.

use std::collections::BTreeMap;
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

use super::api::{
    self, CancelView, ErrorView, LoginLinkView, ParallelismChange, RescaleView, SavepointView,
};
use super::auth::{self, Token, TokenError};
use super::endpoint_file::{EndpointFile, EndpointFileError};
use super::guard::{self, Refusal};
use super::login::{LOGIN_CODE_TTL, LoginCodes};
use super::metrics;
use super::sampler::{SAMPLE_PERIOD, Sampler};
use super::savepoint_limit::{LimitRefusal, SavepointLimit};
use crate::checkpoint::layout::CheckpointLayout;
use crate::ids::CheckpointId;
use crate::job::{Job, JobStatus};
use crate::runtime::{JobMonitor, JobRequest, RescaleError, SavepointError};

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
        let layout = job.checkpoint.layout();
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
    token: Token,
    /// The one-time dashboard login codes, shared with the server.
    login: Arc<Mutex<LoginCodes>>,
    /// The directory whose `_control.json` this server wrote.
    endpoint_dir: Option<PathBuf>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ControlServer {
    /// Starts serving `target` on `address`, requiring the token
    /// `WEIR_CONTROL_TOKEN`, or a generated one, on every request.
    pub fn start(
        address: SocketAddr,
        target: ControlTarget,
    ) -> Result<ControlServer, ControlError> {
        Self::start_with_token(address, Token::from_env_or_generate()?, target)
    }

    /// Starts serving `target` on `address`, requiring `token`.
    pub fn start_with_token(
        address: SocketAddr,
        token: Token,
        target: ControlTarget,
    ) -> Result<ControlServer, ControlError> {
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
        let login = Arc::new(Mutex::new(LoginCodes::default()));
        let state = Arc::new(State {
            target,
            token: token.clone(),
            session: Token::generate()?,
            cookie_name: auth::session_cookie_name(bound.port()),
            login: Arc::clone(&login),
            savepoints: Mutex::new(SavepointLimit::default()),
            sampler: Mutex::new(Sampler::default()),
        });
        let thread = std::thread::Builder::new()
            .name("weir-control".into())
            .spawn(move || runtime.block_on(serve(listener, state, stopped)))
            .map_err(ControlError::Start)?;
        let url = format!("http://{}", connectable(bound));
        tracing::info!(
            "control endpoint at {url}/ (dashboard, /api, /metrics); requests need \
             `Authorization: Bearer TOKEN`, the token in the job's _control.json{}",
            if std::env::var_os(auth::TOKEN_ENV).is_some() {
                format!(" (from {})", auth::TOKEN_ENV)
            } else {
                String::new()
            }
        );
        Ok(ControlServer {
            address: bound,
            url,
            token,
            login,
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

    /// The token requests need.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// A new one-time link that logs a browser into the dashboard:
    /// `http://127.0.0.1:PORT/login?once=CODE`, usable once, for
    /// the login code lifetime (see `login.rs`).
    pub fn login_url(&self) -> Result<String, ControlError> {
        Ok(issue_login_url(&self.login, &self.url)?)
    }

    /// Writes `_control.json` into `dir` (the job's checkpoint directory), so
    /// `weir status DIR` finds this server; removed again at shutdown.
    pub fn write_endpoint_file(&mut self, dir: &Path, job: &str) -> Result<PathBuf, ControlError> {
        let file = EndpointFile {
            address: self.url.clone(),
            pid: std::process::id(),
            job: job.to_string(),
            started: api::epoch_ms(SystemTime::now()),
            token: self.token.as_str().to_string(),
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

/// Locks `mutex`, even if a holder panicked (its data stays consistent: every
/// critical section here is a few assignments).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What every request handler shares.
struct State {
    target: ControlTarget,
    /// What `Authorization: Bearer` must carry.
    token: Token,
    /// What the session cookie of a logged-in browser carries.
    session: Token,
    /// That cookie's name (`weir_session_PORT`).
    cookie_name: String,
    /// The one-time login codes issued.
    login: Arc<Mutex<LoginCodes>>,
    /// The bound on savepoints requested over the API.
    savepoints: Mutex<SavepointLimit>,
    sampler: Mutex<Sampler>,
}

impl State {
    fn sampler(&self) -> std::sync::MutexGuard<'_, Sampler> {
        lock(&self.sampler)
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
                    // The address the client reached: what its Host header must name.
                    let Ok(local) = stream.local_addr() else { continue };
                    tokio::spawn(async move {
                        let service = service_fn(move |request| {
                            let state = Arc::clone(&state);
                            async move { Ok::<_, Infallible>(handle(&state, local, request).await) }
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

/// Checks and routes one request that came in on the local address `local`.
async fn handle(state: &State, local: SocketAddr, request: Request<Incoming>) -> Answer {
    let path = request.uri().path().to_string();
    let method = request.method().clone();
    let headers = request.headers();
    let header = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let host = header(header::HOST).unwrap_or_default().trim().to_string();
    let checked = guard::check_host(header(header::HOST), local)
        .and_then(|()| guard::check_origin(header(header::ORIGIN), &host))
        .and_then(|()| {
            guard::check_state_changing(
                method.as_str(),
                header(header::CONTENT_TYPE),
                headers.contains_key(guard::REQUEST_HEADER),
            )
        });
    if let Err(refused) = checked {
        return refusal(&refused);
    }
    let dashboard = match path.as_str() {
        "/" | "/index.html" => Some((INDEX_HTML, "text/html; charset=utf-8")),
        "/app.js" => Some((APP_JS, "text/javascript; charset=utf-8")),
        "/style.css" => Some((STYLE_CSS, "text/css; charset=utf-8")),
        _ => None,
    };
    // The dashboard's files hold nothing secret; the page then calls the API with its
    // session cookie.
    if let Some((body, content_type)) = dashboard {
        return match method {
            Method::GET => text(StatusCode::OK, content_type, body.to_string()),
            _ => wrong_method(&path, "GET"),
        };
    }
    if path == "/login" {
        return match method {
            Method::GET => login(state, request.uri().query()),
            _ => wrong_method(&path, "GET"),
        };
    }
    let cookies: Vec<&str> = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    if let Err(failure) = auth::check(
        &state.token,
        &state.session,
        &state.cookie_name,
        header(header::AUTHORIZATION),
        &cookies,
    ) {
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
        ("/api/savepoints", Method::POST) => savepoint(state, false).await,
        ("/api/stop", Method::POST) => savepoint(state, true).await,
        ("/api/rescale", Method::POST) => rescale(state, request.uri().query()).await,
        ("/api/dashboard-login", Method::POST) => {
            match issue_login_url(&state.login, &format!("http://{host}")) {
                Ok(url) => json(
                    StatusCode::OK,
                    &LoginLinkView {
                        url,
                        expires_in: LOGIN_CODE_TTL.as_secs(),
                    },
                ),
                Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            }
        }
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
        (
            "/api/savepoints"
            | "/api/stop"
            | "/api/rescale"
            | "/api/cancel"
            | "/api/dashboard-login",
            _,
        ) => wrong_method(&path, "POST"),
        _ => error(
            StatusCode::NOT_FOUND,
            format!(
                "no such endpoint: {path}; there are /api/job, /api/checkpoints, \
                 /api/checkpoints/config, /api/checkpoints/ID, /api/savepoints, /api/stop, \
                 /api/rescale, /api/cancel, /api/dashboard-login, /metrics and the dashboard at / \
                 (docs/CONTROL.md)"
            ),
        ),
    }
}

mod actions;
mod answer;

use actions::{cancel, issue_login_url, login, rescale, savepoint};
use answer::{Answer, error, json, refusal, text, too_many, wrong_method};

/// The raw HTTP/1.1 exchange of the end-to-end tests, which this module's tests send too: one
/// parser of raw answers for both.
#[cfg(test)]
#[path = "../../../tests/all/support/http.rs"]
mod raw_http;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::checkpoint::storage::{CheckpointStorage, MemoryStorage};
    use crate::control::client::{ClientError, ControlClient};
    use crate::runtime::{JobOutcome, JobRunner, RunError, RunOptions, wait_for};

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

    /// The job of [`job`] run, served on `address` with [`TEST_TOKEN`].
    fn start(address: &str) -> Running {
        let token = Token::new(TEST_TOKEN, "a test").unwrap();
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

    /// The token of the servers [`start_guarded`] starts.
    const TEST_TOKEN: &str = "t0k3n";

    /// A job served on loopback with [`TEST_TOKEN`], once it runs (so that a test can tell a
    /// refused cancel by the job still running).
    fn start_guarded() -> Running {
        let running = start("127.0.0.1:0");
        wait_for("the job running", || {
            running.monitor.status() == JobStatus::Running
        });
        running
    }

    /// A client of `running` with its token.
    fn client(running: &Running) -> ControlClient {
        ControlClient::new(running.server.url(), Some(TEST_TOKEN.into())).unwrap()
    }

    /// A job served on a loopback port, once it completed a checkpoint, and a client of it.
    fn past_a_checkpoint() -> (Running, ControlClient) {
        let running = start("127.0.0.1:0");
        let client = client(&running);
        running.wait_for_a_checkpoint();
        (running, client)
    }

    /// One request written by hand, as `curl` or a hostile page sends it: exactly `headers`
    /// (a `Host` included or not), no body, `Connection: close`.
    fn raw(
        server: &ControlServer,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
    ) -> super::raw_http::RawAnswer {
        super::raw_http::raw_exchange(server.url(), method, path, headers, "")
    }

    impl Running {
        /// How the job ended, waiting at most 20 s for it to.
        fn outcome(&self) -> JobOutcome {
            self.outcome
                .recv_timeout(Duration::from_secs(20))
                .unwrap()
                .unwrap()
        }

        /// Returns once the job has completed a checkpoint.
        fn wait_for_a_checkpoint(&self) {
            wait_for("a completed checkpoint", || {
                self.monitor.checkpoint_counts().0 >= 1
            });
        }

        /// A request by hand to the server as a client with the token sends it: `Host: host`,
        /// then `Authorization: Bearer` [`TEST_TOKEN`], then `more`.
        fn with_token(
            &self,
            host: &str,
            method: &str,
            path: &str,
            more: &[(&str, &str)],
        ) -> super::raw_http::RawAnswer {
            let bearer = format!("Bearer {TEST_TOKEN}");
            let mut headers = vec![("Host", host), ("Authorization", bearer.as_str())];
            headers.extend_from_slice(more);
            raw(&self.server, method, path, &headers)
        }
    }

    /// `Host: 127.0.0.1:PORT` of `server`.
    fn own_host(server: &ControlServer) -> String {
        server.url().trim_start_matches("http://").to_string()
    }

    #[test]
    fn serves_the_api_and_takes_a_savepoint_then_cancels() {
        let running = start("127.0.0.1:0");
        assert!(running.server.url().starts_with("http://127.0.0.1:"));
        let client = client(&running);
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
        let outcome = running.outcome();
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
        let (running, client) = past_a_checkpoint();
        let taken = client.post_json("/api/stop").unwrap();
        let outcome = running.outcome();
        assert_eq!(outcome.status, JobStatus::Finished);
        assert_eq!(
            outcome.savepoint.unwrap().display().to_string(),
            taken["path"].as_str().unwrap()
        );
    }

    #[test]
    fn rescale_goes_on_at_the_new_parallelism_and_refuses_what_it_cannot_do() {
        let (running, client) = past_a_checkpoint();
        // The blackhole holds no state: it takes any parallelism.
        let done = client.post_json("/api/rescale?out=3").unwrap();
        assert_eq!(
            done["changes"],
            serde_json::json!([{"vertex": "out", "from": 1, "to": 3}])
        );
        let id = done["savepoint"]["id"].as_u64().unwrap();
        assert_eq!(
            done["savepoint"]["path"],
            format!("/memory/job/savepoints/sp-{id:010}")
        );
        let job = client.get_json("/api/job").unwrap();
        assert_eq!(job["status"], "RUNNING");
        assert_eq!(job["vertices"][1]["parallelism"], 3);
        assert_eq!(job["vertices"][1]["tasks"].as_array().unwrap().len(), 3);
        let restored = &client.get_json("/api/checkpoints").unwrap()["latest"]["restored"];
        assert_eq!(restored["id"], id);
        assert_eq!(restored["rescaled"][0]["to"], 3, "{restored}");
        // Refused, each with why; the job runs on at the parallelism it has.
        let refused = |query: &str| match client.post_json(&format!("/api/rescale{query}")) {
            Err(ClientError::Status { status, message }) => (status, message),
            other => panic!("{query}: {other:?}"),
        };
        let (status, message) = refused("");
        assert_eq!(status, 400);
        assert!(message.contains("no vertex named"), "{message}");
        let (status, message) = refused("?out=x");
        assert_eq!(status, 400);
        assert!(message.contains("`x` is not a parallelism"), "{message}");
        let (status, message) = refused("?nope=2");
        assert_eq!(status, 409);
        assert!(
            message.contains("the job has no vertex `nope`"),
            "{message}"
        );
        // The generator hands its records on: each subtask goes on with the splits it took.
        let done = client.post_json("/api/rescale?gen=3").unwrap();
        assert_eq!(
            done["changes"],
            serde_json::json!([{"vertex": "gen", "from": 2, "to": 3}])
        );
        let job = client.get_json("/api/job").unwrap();
        assert_eq!(job["vertices"][0]["parallelism"], 3);
        assert_eq!(job["vertices"][1]["parallelism"], 3);
        client.post_json("/api/cancel").unwrap();
        let outcome = running.outcome();
        assert_eq!(outcome.status, JobStatus::Canceled);
    }

    #[test]
    fn answers_wrong_methods_paths_and_ids_with_json_errors() {
        let running = start("127.0.0.1:0");
        let client = client(&running);
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
        let running = start("0.0.0.0:0");
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
            .request(
                Method::GET,
                &format!("/api/job?token={TEST_TOKEN}"),
                timeout,
            )
            .unwrap();
        assert_eq!(answer.status, 401, "a token in the URL is not taken");
        // The dashboard's files need none: the page then logs in with a one-time link.
        let answer = anonymous.request(Method::GET, "/", timeout).unwrap();
        assert_eq!(answer.status, 200);
        let wrong = ControlClient::new(running.server.url(), Some("nope".into())).unwrap();
        assert!(matches!(
            wrong.get_json("/api/job").unwrap_err(),
            ClientError::Unauthorized { message } if message.starts_with("wrong token")
        ));
        let client = client(&running);
        assert_eq!(client.get_json("/api/job").unwrap()["name"], "ctl");
        client.post_json("/api/cancel").unwrap();
    }

    #[test]
    fn the_one_time_link_sets_a_session_cookie_once_and_the_cookie_lets_the_page_in() {
        let running = start_guarded();
        let host = own_host(&running.server);
        let url = running.server.login_url().unwrap();
        let path = url.strip_prefix(running.server.url()).unwrap().to_string();
        assert!(path.starts_with("/login?once="), "{url}");
        let code = &path["/login?once=".len()..];
        assert_ne!(code, TEST_TOKEN);
        let logged_in = raw(&running.server, "GET", &path, &[("Host", &host)]);
        assert_eq!(logged_in.status, 303, "{}", logged_in.body);
        assert_eq!(logged_in.header("Location"), Some("/"));
        assert_eq!(logged_in.header("Referrer-Policy"), Some("no-referrer"));
        let cookie = logged_in.header("Set-Cookie").unwrap().to_string();
        let name = format!("weir_session_{}=", running.server.address().port());
        assert!(cookie.starts_with(&name), "{cookie}");
        for attribute in ["; HttpOnly", "; SameSite=Strict", "; Path=/"] {
            assert!(cookie.contains(attribute), "{attribute} in {cookie}");
        }
        let pair = cookie.split(';').next().unwrap().to_string();
        let secret = &pair[name.len()..];
        assert!(secret != TEST_TOKEN && secret != code, "{cookie}");

        // Used once: never again.
        let again = raw(&running.server, "GET", &path, &[("Host", &host)]);
        assert_eq!(again.status, 403);
        assert!(
            again.error().contains("used already or has expired"),
            "{}",
            again.error()
        );
        assert!(again.header("Set-Cookie").is_none());
        let none = raw(&running.server, "GET", "/login", &[("Host", &host)]);
        assert_eq!(none.status, 403);

        // The cookie lets the page in; a forged one does not.
        let forged = format!("{name}{}", "0".repeat(32));
        for (cookie, status) in [(&pair, 200), (&forged, 401)] {
            let headers = [("Host", host.as_str()), ("Cookie", cookie.as_str())];
            let answer = raw(&running.server, "GET", "/api/job", &headers);
            assert_eq!(answer.status, status, "{cookie}: {}", answer.body);
        }

        // A client with the token gets a fresh link, under the Host it named.
        let port = running.server.address().port();
        let localhost = format!("localhost:{port}");
        let fresh = running.with_token(
            &localhost,
            "POST",
            "/api/dashboard-login",
            &[("X-Weir-Request", "1")],
        );
        assert_eq!(fresh.status, 200, "{}", fresh.body);
        let fresh: serde_json::Value = serde_json::from_str(&fresh.body).unwrap();
        let link = fresh["url"].as_str().unwrap();
        let base = format!("http://{localhost}");
        assert!(link.starts_with(&format!("{base}/login?once=")), "{link}");
        assert_eq!(fresh["expires_in"], LOGIN_CODE_TTL.as_secs());
        let answer = raw(
            &running.server,
            "GET",
            &link[base.len()..],
            &[("Host", &localhost)],
        );
        assert_eq!(answer.status, 303, "{}", answer.body);
        // An action with the cookie and the page's header.
        let cancel = raw(
            &running.server,
            "POST",
            "/api/cancel",
            &[("Host", &host), ("Cookie", &pair), ("X-Weir-Request", "1")],
        );
        assert_eq!(cancel.status, 202, "{}", cancel.body);
    }

    #[test]
    fn refuses_to_start_on_a_taken_port() {
        let (requests, _rx) = tokio::sync::mpsc::unbounded_channel();
        let target = ControlTarget::new(job(), JobMonitor::default(), requests);
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
    fn every_request_needs_the_token_even_on_loopback() {
        let running = start_guarded();
        let host = own_host(&running.server);
        for (method, path) in [
            ("GET", "/api/job"),
            ("GET", "/metrics"),
            ("POST", "/api/savepoints"),
            ("POST", "/api/cancel"),
        ] {
            let answer = raw(
                &running.server,
                method,
                path,
                &[("Host", &host), ("X-Weir-Request", "1")],
            );
            assert_eq!(answer.status, 401, "{method} {path}: {}", answer.body);
            assert!(
                answer
                    .error()
                    .starts_with("this endpoint requires the job's token"),
                "{}",
                answer.error()
            );
            assert_eq!(
                answer.header("WWW-Authenticate"),
                Some("Bearer realm=\"weir\"")
            );
        }
        let wrong = raw(
            &running.server,
            "GET",
            "/api/job",
            &[("Host", &host), ("Authorization", "Bearer t0k3n-not")],
        );
        assert_eq!(wrong.status, 401, "{}", wrong.body);
        let query = raw(
            &running.server,
            "GET",
            &format!("/api/job?token={TEST_TOKEN}"),
            &[("Host", &host)],
        );
        assert_eq!(query.status, 401, "a token in the URL is not taken");
        let answer = running.with_token(&host, "GET", "/api/job", &[]);
        assert_eq!(answer.status, 200, "{}", answer.body);
        assert_eq!(running.monitor.status(), JobStatus::Running);
    }

    #[test]
    fn only_the_bound_address_or_localhost_is_a_host() {
        let running = start_guarded();
        let host = own_host(&running.server);
        let port = running.server.address().port();
        let bearer = format!("Bearer {TEST_TOKEN}");
        for good in [
            host.clone(),
            format!("localhost:{port}"),
            format!("LOCALHOST:{port}"),
        ] {
            let answer = running.with_token(&good, "GET", "/api/job", &[]);
            assert_eq!(answer.status, 200, "Host: {good}: {}", answer.body);
        }
        for bad in [
            "evil.example.com".to_string(),
            format!("evil.example.com:{port}"),
            format!("127.0.0.2:{port}"),
            "127.0.0.1".to_string(),
            format!("127.0.0.1:{}", port.wrapping_add(1)),
            format!("localhost.evil.example.com:{port}"),
        ] {
            for path in ["/api/job", "/", "/metrics"] {
                let answer = running.with_token(&bad, "GET", path, &[]);
                assert_eq!(answer.status, 421, "Host: {bad} {path}: {}", answer.body);
                assert!(answer.error().contains("Host"), "{}", answer.error());
            }
        }
        let none = raw(
            &running.server,
            "GET",
            "/api/job",
            &[("Authorization", &bearer)],
        );
        assert_eq!(none.status, 421, "no Host at all: {}", none.body);
    }

    #[test]
    fn a_foreign_origin_is_refused_and_the_own_one_let_in() {
        let running = start_guarded();
        let host = own_host(&running.server);
        for foreign in ["http://evil.example.com", "null", "http://localhost:1"] {
            let answer = running.with_token(
                &host,
                "POST",
                "/api/cancel",
                &[("Origin", foreign), ("X-Weir-Request", "1")],
            );
            assert_eq!(answer.status, 403, "Origin: {foreign}: {}", answer.body);
            assert!(answer.error().contains("Origin"), "{}", answer.error());
        }
        assert_eq!(running.monitor.status(), JobStatus::Running);
        running.wait_for_a_checkpoint();
        let own = format!("http://{host}");
        let answer = running.with_token(
            &host,
            "POST",
            "/api/savepoints",
            &[("Origin", &own), ("Content-Type", "application/json")],
        );
        assert_eq!(answer.status, 200, "{}", answer.body);
    }

    #[test]
    fn a_state_changing_request_needs_json_or_the_custom_header() {
        let running = start_guarded();
        let host = own_host(&running.server);
        for content_type in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
        ] {
            let content_type: Vec<_> = content_type
                .map(|c| ("Content-Type", c))
                .into_iter()
                .collect();
            let answer = running.with_token(&host, "POST", "/api/cancel", &content_type);
            assert_eq!(answer.status, 403, "{content_type:?}: {}", answer.body);
            assert!(
                answer.error().contains("X-Weir-Request: 1"),
                "{}",
                answer.error()
            );
        }
        assert_eq!(running.monitor.status(), JobStatus::Running);
        let answer = running.with_token(&host, "POST", "/api/cancel", &[("X-Weir-Request", "1")]);
        assert_eq!(answer.status, 202, "{}", answer.body);
    }

    #[test]
    fn every_answer_says_no_store_and_no_referrer() {
        let running = start_guarded();
        let host = own_host(&running.server);
        for path in ["/", "/app.js", "/api/job", "/metrics", "/nothing"] {
            let answer = running.with_token(&host, "GET", path, &[]);
            assert_eq!(
                answer.header("Referrer-Policy"),
                Some("no-referrer"),
                "{path}"
            );
            assert_eq!(answer.header("Cache-Control"), Some("no-store"), "{path}");
        }
        let refused = raw(
            &running.server,
            "GET",
            "/api/job",
            &[("Host", "evil.example.com")],
        );
        assert_eq!(refused.header("Referrer-Policy"), Some("no-referrer"));
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
        assert_eq!(file.job, "ctl");
        assert_eq!(file.token, server.token().as_str());
        server.shutdown();
        assert!(!path.exists());
    }
}
