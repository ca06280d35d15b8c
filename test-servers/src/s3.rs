//! The project's S3 test server: PyPI's `moto` in server mode (`moto_server`, with the
//! `server` extra), pinned in `tests/s3/requirements.txt` and installed into `tests/s3/.venv`
//! by `scripts/install-s3-server.sh` ([`install`]). An [`S3Process`] runs it on a free
//! loopback port; it keeps every bucket and object in memory, so a stopped server has lost
//! them all. Like every server of this crate, it never outlives the process that started it
//! (the crate docs).
//!
//! What the checkpoints on S3 rely on, and moto 5.2.5 does: `PUT` with `If-None-Match: *`
//! (object_store's `PutMode::Create`) refused with 412 when the key exists, and of a race of
//! such creates exactly one wins; `PUT` with `If-Match: ETAG`; multipart uploads (parts of at
//! least 5 MiB but the last, as S3). moto does not check request signatures: any credentials
//! do, and a plain unsigned `PUT /bucket` creates a bucket ([`S3Process::create_bucket`]).
//! It answers every request with `Connection: close`, so a client opens a connection per
//! request.
//!
//! A client reaches it with the environment of [`client_env`]: the variables that
//! `object_store`'s `AmazonS3Builder::from_env` reads (and the AWS SDKs and CLI).

use std::fs;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::http;
use crate::process::{self, Log, NotReady, Watched};

/// The longest the server may take to answer `GET /` after it is started (it answers in about
/// a second; Python imports are slow on a loaded machine).
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a server asked to stop (SIGTERM) has before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest one request of [`S3Process::create_bucket`] and of the readiness check may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// What messages call it.
const WHAT: &str = "S3 test server (moto)";

/// The region of every bucket (moto's default, where `PUT /bucket` needs no location).
pub const REGION: &str = "us-east-1";
/// The access key of [`client_env`]: moto accepts any.
pub const ACCESS_KEY_ID: &str = "weir-test";
/// The secret key of [`client_env`]: moto accepts any.
pub const SECRET_ACCESS_KEY: &str = "weir-test-secret";

/// Installs the server if needed (a no-op when the pinned version is there) with
/// `scripts/install-s3-server.sh` of the workspace at `root`, and returns its executable
/// (`moto_server`); or why it could not. The script's messages go to this process's stderr.
pub fn install(root: &Path) -> Result<PathBuf, String> {
    process::install(
        root,
        "install-s3-server.sh",
        "S3 server",
        "it installs PyPI's moto[server] into tests/s3/.venv and needs python3 with venv and \
         access to PyPI",
    )
}

/// The environment a client needs to reach an S3 server (or a proxy in front of one) at
/// `endpoint` (`http://127.0.0.1:PORT`): `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_REGION`, `AWS_ENDPOINT_URL` and `AWS_ALLOW_HTTP=true`. `object_store`'s
/// `AmazonS3Builder::from_env` reads every `AWS_*` variable whose lowercased name is one of its
/// configuration keys; these five are `aws_access_key_id`, `aws_secret_access_key`,
/// `aws_region`, `aws_endpoint_url` (an alias of `aws_endpoint`) and `aws_allow_http`. Paths
/// are bucket-first (`/bucket/key`), object_store's default with an endpoint.
pub fn client_env(endpoint: &str) -> Vec<(String, String)> {
    [
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID),
        ("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
        ("AWS_REGION", REGION),
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ALLOW_HTTP", "true"),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_string(), value.to_string()))
    .collect()
}

/// A moto S3 server on a loopback port, with its output in `moto.log` in a folder of the
/// caller's. Dropping it stops the server (and waits for it).
pub struct S3Process {
    exe: PathBuf,
    /// Its port on 127.0.0.1.
    port: u16,
    /// Holds `moto.log` (its output; a line per request).
    dir: PathBuf,
    /// The server process and its watchdog; `None` once stopped.
    running: Option<Watched>,
}

impl S3Process {
    /// Starts `exe` (see [`install`]) on a free port with its log in `dir`, and waits until it
    /// answers `GET /`; or why it could not. If the starting process dies, the watchdog stops
    /// the server and removes `dir`.
    pub fn start(exe: &Path, dir: &Path) -> Result<S3Process, String> {
        fs::create_dir_all(dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        process::on_free_port(|port| {
            let mut server = S3Process {
                exe: exe.to_path_buf(),
                port,
                dir: dir.to_path_buf(),
                running: None,
            };
            server.launch()?;
            Ok(server)
        })
    }

    /// `http://127.0.0.1:PORT`, for `AWS_ENDPOINT_URL`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address())
    }

    /// `127.0.0.1:PORT`, for a [`FaultProxy`](crate::fault_proxy::FaultProxy) in front of it.
    pub fn address(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.running.as_ref().map(Watched::id)
    }

    /// Whether the server is running (not stopped or killed).
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The environment a client needs to reach this server: [`client_env`] of its endpoint.
    pub fn client_env(&self) -> Vec<(String, String)> {
        client_env(&self.endpoint())
    }

    /// Creates bucket `name` (in [`REGION`]) with an unsigned `PUT /name`, which moto accepts;
    /// a no-op when this server already has it. Or what the server answered instead.
    pub fn create_bucket(&self, name: &str) -> Result<(), String> {
        let (status, body) =
            http::request(self.address(), "PUT", &format!("/{name}"), REQUEST_TIMEOUT)?;
        if status != 200 {
            return Err(format!(
                "the S3 server at {} refused to create bucket {name:?} ({status}): {}",
                self.endpoint(),
                String::from_utf8_lossy(&body)
            ));
        }
        Ok(())
    }

    /// Stops the server (SIGTERM) and waits for it to exit (killing it after 5 s). Everything
    /// it held is gone. Does nothing when it is not running.
    pub fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            running.stop(STOP_TIMEOUT, WHAT);
        }
    }

    /// Kills the server (SIGKILL) and waits for it. Everything it held is gone.
    pub fn kill(&mut self) {
        if let Some(running) = self.running.take() {
            running.kill();
        }
    }

    /// Starts the server process and its watchdog on `self.port`, and waits until it answers.
    fn launch(&mut self) -> Result<(), String> {
        let log = Log::new(self.dir.join("moto.log"));
        let (stdout, stderr, log_start) = log.open()?;
        let mut command = Command::new(&self.exe);
        command
            .args(["-H", "127.0.0.1", "-p"])
            .arg(self.port.to_string())
            // Python buffers its output when it goes to a file: a server that dies at start
            // would take what it said with it.
            .env("PYTHONUNBUFFERED", "1")
            .stdout(stdout)
            .stderr(stderr);
        let address = self.address();
        let ready = Watched::spawn(command, &self.dir, WHAT)?.wait_ready(START_TIMEOUT, || {
            http::request(address, "GET", "/", REQUEST_TIMEOUT).is_ok()
        });
        match ready {
            Ok(running) => {
                self.running = Some(running);
                Ok(())
            }
            Err(NotReady::Exited(status)) => Err(format!(
                "the S3 server ({}) exited at start with {status}; it printed: {}",
                self.exe.display(),
                log.since(log_start, None)
            )),
            Err(NotReady::TimedOut) => Err(format!(
                "the S3 server did not answer GET / on {} within {START_TIMEOUT:?}; it printed: \
                 {}",
                self.endpoint(),
                log.since(log_start, None)
            )),
        }
    }
}

impl Drop for S3Process {
    fn drop(&mut self) {
        self.stop();
    }
}
