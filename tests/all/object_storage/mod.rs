//! The harness of the object-storage tests: a real S3 server, a fault proxy to put in front of
//! it, and the client calls the tests make to look at what a job left in a bucket; and a real
//! Azure Blob Storage emulator for the checkpoints on `az://`. The tests are this folder's other
//! files: `checkpoints.rs` (a job's checkpoints on S3 and Azure), `s3_server.rs` (the server
//! and the proxy themselves).
//!
//! ## S3
//!
//! A real S3 server for the tests of checkpoints on object storage, a fault proxy to put in
//! front of it, and the client calls those tests make to look at what a job left in a bucket.
//!
//! The server is PyPI's `moto` in server mode, pinned in `tests/s3/requirements.txt` and
//! installed into `tests/s3/.venv` by `scripts/install-s3-server.sh`, once per test process,
//! the first time a test asks for it. It does what checkpoints on S3 rely on: conditional puts
//! (`If-None-Match: *`, `If-Match`) of which exactly one of a race of creates wins, and
//! multipart uploads (`s3_server.rs` checks each).
//!
//! Tests share one server ([`S3::shared`]) and keep apart by buckets of their own
//! ([`S3::bucket`]). A job reaches it with the environment of [`S3::env`] (pass it to the
//! `weir` command: `Command::envs`), or through a [`FaultProxy`] of the test's own
//! ([`S3::proxy`], [`S3::env_via`]) that answers chosen requests with an error, delays, cuts
//! off or drops them. When there is no server the test is skipped, loudly — or fails, under
//! `CI=true` ([`s3_or_skip`]).
//!
//! **No server outlives the test process**: the server process, its watchdog and its start and
//! stop are `weir-test-servers`'s (`test-servers/`). The shared server lives in a static, never
//! dropped; its watchdog stops it when the test process is gone.
//!
//! Every wait is bounded: `weir_test_servers::s3::START_TIMEOUT` for the server to answer, and
//! object_store's own timeouts and retries (30 s a request, 10 retries) for the client calls
//! here ([`store_from_env`]). The server's output, a line per request, is in `moto.log` in its
//! temp folder.
//!
//! ## Azure
//!
//! The Azure Blob Storage emulator for the tests of checkpoints on `az://` (docs/CHECKPOINTS.md
//! §8): npm's `azurite`, pinned in `tests/azure/package-lock.json` and installed into
//! `tests/azure/node_modules` by `scripts/install-azure-server.sh`.
//!
//! Each test starts a server of its own on a free loopback port, its blobs in memory, and the
//! server stops when the test's [`Azure`] is dropped (a panic included). A job reaches it through
//! [`Azure::env`]: `AZURE_STORAGE_USE_EMULATOR` (the emulator's well-known account and key) and
//! `AZURITE_BLOB_STORAGE_URL`. Object stores cannot create containers, so
//! `tests/azure/create-container.mjs` makes one with Azure's own client. When the server cannot
//! be installed the test is skipped, loudly — or fails, under `CI=true`.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use weir::checkpoint::metadata::CheckpointMetadata;
use weir_test_servers::fault_proxy::FaultProxy;
use weir_test_servers::s3::{self as server, S3Process};

use crate::support::{skip, timed_install, workspace_root};

mod checkpoints;
mod s3_server;

// ---------------------------------------------------------------------------------------------
// Skipping

/// The S3 server shared by this test process's tests, or `None` — after saying so, loudly,
/// straight to stderr (the harness hides what `eprintln!` prints in a passing test) — when it
/// cannot be installed or started; under `CI=true` that is a failure:
///
/// ```ignore
/// let Some(s3) = s3::s3_or_skip("checkpoints_on_s3_restore") else { return };
/// ```
pub(crate) fn s3_or_skip(test: &str) -> Option<&'static S3> {
    match S3::shared() {
        Ok(s3) => Some(s3),
        Err(reason) => {
            skip(test, &format!("no S3 server: {reason}"));
            None
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The server

/// The server's executable, installed by `scripts/install-s3-server.sh` once per test process
/// (a no-op when the pinned version is there), or why it could not be.
fn executable() -> Result<&'static Path, String> {
    static EXE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    EXE.get_or_init(|| timed_install("the S3 test server", || server::install(&workspace_root())))
        .as_ref()
        .map(PathBuf::as_path)
        .map_err(Clone::clone)
}

/// A running moto server on a loopback port, with its log in a temp folder. Dropping it stops
/// the server (and waits for it), then removes the folder.
pub(crate) struct S3 {
    /// The server process (dropped first: it stops before its folder goes).
    process: S3Process,
    /// Holds `moto.log`.
    _dir: tempfile::TempDir,
}

impl S3 {
    /// The server all tests of this process share, started by the first test that asks; or why
    /// there is none (the same reason for every test). Tests keep apart by buckets of their own.
    pub(crate) fn shared() -> Result<&'static S3, String> {
        static SHARED: OnceLock<Result<S3, String>> = OnceLock::new();
        SHARED.get_or_init(S3::start).as_ref().map_err(Clone::clone)
    }

    /// A server of its own on a free port (installing it first if needed), answering; or why it
    /// could not be started.
    fn start() -> Result<S3, String> {
        let exe = executable()?;
        let dir = tempfile::Builder::new()
            .prefix("weir-s3-")
            .tempdir()
            .map_err(|e| format!("cannot make a temp dir for the S3 server: {e}"))?;
        let process = S3Process::start(exe, dir.path())?;
        Ok(S3 { process, _dir: dir })
    }

    /// `http://127.0.0.1:PORT`.
    pub(crate) fn endpoint(&self) -> String {
        self.process.endpoint()
    }

    /// The environment a client needs to reach the server directly: `AWS_ACCESS_KEY_ID`,
    /// `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP=true` (what
    /// object_store's `AmazonS3Builder::from_env` and the host read).
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        self.process.client_env()
    }

    /// The same environment, with `proxy` (one in front of this server) as the endpoint.
    pub(crate) fn env_via(&self, proxy: &FaultProxy) -> Vec<(String, String)> {
        server::client_env(&proxy.endpoint())
    }

    /// A fault proxy of the caller's in front of this server, with no rules yet (every request
    /// forwarded). Dropping it stops it.
    pub(crate) fn proxy(&self) -> FaultProxy {
        FaultProxy::start(self.process.address())
            .unwrap_or_else(|e| panic!("cannot start a fault proxy in front of moto: {e}"))
    }

    /// Creates a bucket no other test has, named after `prefix` (lowercased, what S3 does not
    /// allow in a name made `-`), and returns its name.
    pub(crate) fn bucket(&self, prefix: &str) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let prefix: String = prefix
            .chars()
            .map(|c| match c.to_ascii_lowercase() {
                c @ ('a'..='z' | '0'..='9') => c,
                _ => '-',
            })
            .take(40)
            .collect();
        let name = format!(
            "{}-{}-{}",
            prefix.trim_matches('-'),
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.process
            .create_bucket(&name)
            .unwrap_or_else(|e| panic!("{e}"));
        name
    }

    /// A client of `bucket` straight to the server.
    pub(crate) fn store(&self, bucket: &str) -> AmazonS3 {
        store_from_env(&self.env(), bucket)
    }

    /// A client of `bucket` through `proxy`.
    pub(crate) fn store_via(&self, proxy: &FaultProxy, bucket: &str) -> AmazonS3 {
        store_from_env(&self.env_via(proxy), bucket)
    }

    /// Writes `bytes` to `key` of `bucket`, straight to the server.
    pub(crate) fn put(&self, bucket: &str, key: &str, bytes: &[u8]) {
        let store = self.store(bucket);
        block_on(store.put(&ObjectPath::from(key), PutPayload::from(bytes.to_vec())))
            .unwrap_or_else(|e| panic!("cannot put s3://{bucket}/{key}: {e}"));
    }

    /// What `key` of `bucket` holds, or `None` when there is no such object.
    pub(crate) fn get(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let store = self.store(bucket);
        let location = ObjectPath::from(key);
        block_on(async {
            match store.get(&location).await {
                Ok(got) => Some(got.bytes().await.map(|b| b.to_vec())),
                Err(object_store::Error::NotFound { .. }) => None,
                Err(e) => Some(Err(e)),
            }
        })
        .map(|got| got.unwrap_or_else(|e| panic!("cannot get s3://{bucket}/{key}: {e}")))
    }

    /// The checkpoint metadata at `key` of `bucket` (a `…/_metadata` object), decoded; `None`
    /// when there is none (pruned since it was listed, say).
    pub(crate) fn metadata(&self, bucket: &str, key: &str) -> Option<CheckpointMetadata> {
        let bytes = self.get(bucket, key)?;
        let meta = CheckpointMetadata::decode(std::path::Path::new(key), &bytes)
            .unwrap_or_else(|e| panic!("s3://{bucket}/{key}: {e}"));
        Some(meta)
    }

    /// Every key of `bucket` under `prefix` (`""`: all), with its size, sorted.
    pub(crate) fn list(&self, bucket: &str, prefix: &str) -> Vec<(String, u64)> {
        let store = self.store(bucket);
        let mut found = Vec::new();
        // Folder by folder, with the delimiter: `list` is a stream, and the test crate has no
        // stream combinators (no `futures`).
        let mut folders = vec![(!prefix.is_empty()).then(|| ObjectPath::from(prefix))];
        while let Some(folder) = folders.pop() {
            let listed = block_on(store.list_with_delimiter(folder.as_ref()))
                .unwrap_or_else(|e| panic!("cannot list s3://{bucket}/{prefix}: {e}"));
            found.extend(
                listed
                    .objects
                    .into_iter()
                    .map(|o| (o.location.to_string(), o.size)),
            );
            folders.extend(listed.common_prefixes.into_iter().map(Some));
        }
        found.sort();
        found
    }
}

/// A client of `bucket` configured by `env` (pairs such as [`S3::env`]) as
/// `AmazonS3Builder::from_env` configures one from the process's environment: each `AWS_*`
/// name lowercased is a configuration key. So the names `env` holds are checked to be ones
/// object_store reads, without changing this process's environment. Retries are object_store's
/// defaults (10, backing off from 100 ms).
pub(crate) fn store_from_env(env: &[(String, String)], bucket: &str) -> AmazonS3 {
    let mut builder = AmazonS3Builder::new().with_bucket_name(bucket);
    for (name, value) in env {
        let key: AmazonS3ConfigKey = name
            .to_ascii_lowercase()
            .parse()
            .unwrap_or_else(|e| panic!("object_store reads no {name} from the environment: {e}"));
        builder = builder.with_config(key, value);
    }
    builder
        .build()
        .unwrap_or_else(|e| panic!("cannot make an S3 client of {bucket} from {env:?}: {e}"))
}

/// Runs `future` (object_store's calls) on the tests' tokio runtime. One runtime for all: a
/// client's pooled connections belong to the runtime that opened them.
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("s3-tests")
                .enable_all()
                .build()
                .expect("a tokio runtime")
        })
        .block_on(future)
}

// ---------------------------------------------------------------------------------------------
// Azure

/// How long the server may take to answer after it is started.
const AZURE_START_TIMEOUT: Duration = Duration::from_secs(30);

/// A running azurite blob server; dropping it stops the server.
pub(crate) struct Azure {
    child: Child,
    port: u16,
    /// Holds the server's log.
    dir: tempfile::TempDir,
}

impl Drop for Azure {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An Azure server of the test's own, or `None` after saying why, loudly (a failure under
/// `CI=true`).
pub(crate) fn azure_or_skip(test: &str) -> Option<Azure> {
    match Azure::start() {
        Ok(azure) => Some(azure),
        Err(reason) => {
            skip(test, &format!("no Azure server: {reason}"));
            None
        }
    }
}

impl Azure {
    /// Installs the server if needed and starts it, answering.
    fn start() -> Result<Azure, String> {
        let script = workspace_root().join("scripts/install-azure-server.sh");
        let installed = Command::new("bash")
            .arg(&script)
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !installed.status.success() {
            return Err(format!("{} failed", script.display()));
        }
        let exe = PathBuf::from(String::from_utf8_lossy(&installed.stdout).trim());
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("no free port: {e}"))?
            .port();
        let dir = tempfile::Builder::new()
            .prefix("weir-azure-")
            .tempdir()
            .map_err(|e| format!("cannot make a temp dir for the Azure server: {e}"))?;
        let log = std::fs::File::create(dir.path().join("azurite.log"))
            .map_err(|e| format!("cannot create the server's log: {e}"))?;
        let child = Command::new(&exe)
            .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            // Blobs in memory; the client's API version is newer than this emulator knows.
            .args(["--inMemoryPersistence", "--skipApiVersionCheck", "--silent"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let mut azure = Azure { child, port, dir };
        let deadline = Instant::now() + AZURE_START_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = azure.child.try_wait() {
                return Err(format!("azurite exited with {status}: {}", azure.log()));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "azurite did not answer within {AZURE_START_TIMEOUT:?}"
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(azure)
    }

    /// What the server logged.
    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("azurite.log")).unwrap_or_default()
    }

    /// `http://127.0.0.1:PORT`.
    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The environment that points a job's `az://` storage at this server.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        vec![
            ("AZURE_STORAGE_USE_EMULATOR".into(), "true".into()),
            ("AZURITE_BLOB_STORAGE_URL".into(), self.endpoint()),
        ]
    }

    /// Whether the server refuses a create-if-absent of a blob that exists, in container
    /// `name` (which must exist): what keeps a completed checkpoint from being overwritten.
    pub(crate) fn refuses_a_second_create(&self, name: &str) -> bool {
        let script = workspace_root().join("tests/azure/check-create-once.mjs");
        let account = format!("{}/devstoreaccount1", self.endpoint());
        Command::new("node")
            .arg(&script)
            .args([&account, name])
            .status()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()))
            .success()
    }

    /// Creates container `name`.
    pub(crate) fn container(&self, name: &str) {
        let script = workspace_root().join("tests/azure/create-container.mjs");
        let account = format!("{}/devstoreaccount1", self.endpoint());
        let made = Command::new("node")
            .arg(&script)
            .args([&account, name])
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            made.status.success(),
            "cannot create container {name}: {}{}",
            String::from_utf8_lossy(&made.stderr),
            self.log()
        );
    }
}
