//! The project's Kafka test broker: PyPI's `noida-db` (a single-broker Kafka 3.8 emulator),
//! pinned in `tests/kafka/requirements.txt` and installed into `tests/kafka/.venv` by
//! `scripts/install-kafka-broker.sh` ([`install`]). A [`BrokerProcess`] runs it on a free
//! loopback port with its data in a folder of the caller's, and can stop it (SIGTERM: it saves
//! its state), kill it (SIGKILL) and start it again on the same port and data. Like every
//! server of this crate, it never outlives the process that started it (the crate docs).

use std::fs;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::process::{self, Log, NotReady, Watched};

/// The longest a broker may take to answer a metadata request after it is started.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a broker asked to stop (SIGTERM: it saves its state first) has before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// What messages call it.
const WHAT: &str = "Kafka broker";

/// The line noida-db 0.2.3's executable prints on Debian 12 (built against a newer glibc; it
/// runs): left out of anything shown.
pub const GLIBC_NOISE: &str = "weak version GLIBC_2.39 not found";

/// Installs the broker if needed (a no-op when the pinned version is there) with
/// `scripts/install-kafka-broker.sh` of the workspace at `root`, and returns its executable;
/// or why it could not. The script's messages go to this process's stderr.
pub fn install(root: &Path) -> Result<PathBuf, String> {
    process::install(
        root,
        "install-kafka-broker.sh",
        "broker",
        "it installs PyPI's noida-db into tests/kafka/.venv and needs python3 with venv and \
         access to PyPI",
    )
}

/// A noida-db broker on a loopback port, with `data/` and `broker.log` in a folder of the
/// caller's. Dropping it stops the broker (and waits for it).
pub struct BrokerProcess {
    exe: PathBuf,
    /// Its port on 127.0.0.1, the same across [`BrokerProcess::restart`].
    port: u16,
    /// Holds `data/` (the broker's `--data-dir`) and `broker.log` (its output).
    dir: PathBuf,
    /// The broker process and its watchdog; `None` while stopped.
    running: Option<Watched>,
}

impl BrokerProcess {
    /// Starts `exe` (see [`install`]) on a free port with its files in `dir`, and waits until
    /// it answers a metadata request; or why it could not. If the starting process dies, the
    /// watchdog removes `dir`.
    pub fn start(exe: &Path, dir: &Path) -> Result<BrokerProcess, String> {
        process::on_free_port(|port| {
            let mut broker = BrokerProcess {
                exe: exe.to_path_buf(),
                port,
                dir: dir.to_path_buf(),
                running: None,
            };
            broker.launch()?;
            Ok(broker)
        })
    }

    /// `"127.0.0.1:PORT"`, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The broker's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The broker process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.running.as_ref().map(Watched::id)
    }

    /// Whether the broker is running (not stopped or killed).
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// A client configuration pointing at this broker.
    pub fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", self.bootstrap());
        config
    }

    /// Stops the broker as an operator would (SIGTERM; it saves its state to its data
    /// directory) and waits for it to exit (killing it after 10 s). The port stays this
    /// broker's for [`BrokerProcess::restart`]. Does nothing when it is not running.
    pub fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            running.stop(STOP_TIMEOUT, WHAT);
        }
    }

    /// Kills the broker (SIGKILL, a crash) and waits for it. It keeps only what it saved of its
    /// own accord before.
    pub fn kill(&mut self) {
        if let Some(running) = self.running.take() {
            running.kill();
        }
    }

    /// Starts the broker again on the same port and data directory (stopping it first if it
    /// runs), and waits until it answers; or why it did not.
    pub fn restart(&mut self) -> Result<(), String> {
        self.stop();
        // The old broker's port may linger for a moment: try a few times.
        let mut last = String::new();
        for _ in 0..3 {
            match self.launch() {
                Ok(()) => return Ok(()),
                Err(e) => last = e,
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Err(format!(
            "the Kafka broker did not restart on port {}: {last}",
            self.port
        ))
    }

    /// Whether the broker answers a metadata request within `timeout`, or what went wrong.
    pub fn metadata(&self, timeout: Duration) -> Result<(), String> {
        let consumer: BaseConsumer = self
            .config()
            .set("group.id", "weir-test-servers-metadata")
            .create()
            .map_err(|e| format!("cannot create a Kafka client: {e}"))?;
        let metadata = consumer
            .fetch_metadata(None, timeout)
            .map_err(|e| format!("metadata request to {}: {e}", self.bootstrap()))?;
        if metadata.brokers().is_empty() {
            return Err(format!("{} answered with no brokers", self.bootstrap()));
        }
        Ok(())
    }

    /// Starts the broker process and its watchdog on `self.port`, and waits until it answers.
    /// `WEIR_KAFKA_VERBOSE=1` prints how long that took.
    fn launch(&mut self) -> Result<(), String> {
        let data = self.dir.join("data");
        fs::create_dir_all(&data).map_err(|e| format!("cannot make {}: {e}", data.display()))?;
        let log = self.log();
        let (stdout, stderr, log_start) = log.open()?;
        let mut command = Command::new(&self.exe);
        command
            .args([
                "start",
                "--only",
                "kafka",
                "--host",
                "127.0.0.1",
                "--kafka-port",
            ])
            .arg(self.port.to_string())
            .arg("--data-dir")
            .arg(&data)
            .stdout(stdout)
            .stderr(stderr);
        let started = Instant::now();
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        let ready = Watched::spawn(command, &self.dir, WHAT)?.wait_ready(START_TIMEOUT, || {
            // Ask only once the port is open: a client that finds no broker backs off.
            TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok()
                && self.metadata(Duration::from_secs(2)).is_ok()
        });
        match ready {
            Ok(running) => {
                self.running = Some(running);
                if std::env::var_os("WEIR_KAFKA_VERBOSE").is_some() {
                    let _ = writeln!(
                        std::io::stderr(),
                        "weir: Kafka broker on {} answered after {:.0?}",
                        self.bootstrap(),
                        started.elapsed()
                    );
                }
                Ok(())
            }
            Err(NotReady::Exited(status)) => Err(format!(
                "the broker ({}) exited at start with {status}; it printed: {}",
                self.exe.display(),
                log.since(log_start, Some(GLIBC_NOISE))
            )),
            Err(NotReady::TimedOut) => Err(format!(
                "the broker did not answer a metadata request on {} within {START_TIMEOUT:?}; \
                 it printed: {}",
                self.bootstrap(),
                log.since(log_start, Some(GLIBC_NOISE))
            )),
        }
    }

    /// Where the broker's output goes.
    fn log(&self) -> Log {
        Log::new(self.dir.join("broker.log"))
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}
