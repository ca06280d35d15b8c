//! A real Azure Blob Storage emulator for the tests of checkpoints on `az://` (docs/CHECKPOINTS.md
//! §8): npm's `azurite`, pinned in `tests/azure/package-lock.json` and installed into
//! `tests/azure/node_modules` by `scripts/install-azure-server.sh`.
//!
//! Each test starts a server of its own on a free loopback port, its blobs in memory, and the
//! server stops when the test's [`Azure`] is dropped (a panic included). A job reaches it through
//! [`Azure::env`]: `AZURE_STORAGE_USE_EMULATOR` (the emulator's well-known account and key) and
//! `AZURITE_BLOB_STORAGE_URL`. Object stores cannot create containers, so
//! `tests/azure/create-container.mjs` makes one with Azure's own client. When the server cannot
//! be installed the test is skipped, loudly — or fails, under `CI=true`.

use std::io::Write as _;
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::workspace_root;

/// How long the server may take to answer after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(30);

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
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{test}: no Azure server, and CI never skips: {reason}"
            );
            let _ = writeln!(
                std::io::stderr().lock(),
                "\n!!!!! SKIPPED: {test}: no Azure server: {reason} !!!!!\n"
            );
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
        let deadline = Instant::now() + START_TIMEOUT;
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Ok(Some(status)) = azure.child.try_wait() {
                return Err(format!("azurite exited with {status}: {}", azure.log()));
            }
            if Instant::now() >= deadline {
                return Err(format!("azurite did not answer within {START_TIMEOUT:?}"));
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
