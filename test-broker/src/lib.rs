//! The project's Kafka test broker as a child process, for the tests (`tests/all/kafka.rs`)
//! and the Kafka benchmark (`benches/src/kafka.rs`), which wrap it with the client calls each
//! makes.
//!
//! The broker is PyPI's `noida-db` (a single-broker Kafka 3.8 emulator), pinned in
//! `tests/kafka/requirements.txt` and installed into `tests/kafka/.venv` by
//! `scripts/install-kafka-broker.sh` ([`install`]). A [`BrokerProcess`] runs it on a free
//! loopback port with its data in a folder of the caller's, and can stop it (SIGTERM: it saves
//! its state), kill it (SIGKILL) and start it again on the same port and data.
//!
//! **No broker outlives the process that started it.** A killed process runs no `Drop`, and a
//! broker in a `static` is never dropped; so every broker has a watchdog, a small `sh` whose
//! standard input is a pipe from the starting process. That process writes to it only to stop
//! the broker on purpose; when the pipe closes without a word, the process is gone (exited,
//! crashed or killed — the kernel closes the pipe in every case), and the watchdog stops the
//! broker and removes its folder. This needs no `libc` (no `prctl` death signal, no process
//! groups): a pipe's end is the one thing the kernel reports about a dead process to a process
//! that is not its parent.

use std::fs::{self, File};
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// The longest a broker may take to answer a metadata request after it is started.
pub const START_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a broker asked to stop (SIGTERM: it saves its state first) has before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The line noida-db 0.2.3's executable prints on Debian 12 (built against a newer glibc; it
/// runs): left out of anything shown.
pub const GLIBC_NOISE: &str = "weak version GLIBC_2.39 not found";

/// Installs the broker if needed (a no-op when the pinned version is there) with
/// `scripts/install-kafka-broker.sh` of the workspace at `root`, and returns its executable;
/// or why it could not. The script's messages go to this process's stderr.
pub fn install(root: &Path) -> Result<PathBuf, String> {
    let script = root.join("scripts/install-kafka-broker.sh");
    let out = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run bash {}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`bash scripts/install-kafka-broker.sh` failed ({}; what it printed is above): it \
             installs PyPI's noida-db into tests/kafka/.venv and needs python3 with venv and \
             access to PyPI",
            out.status
        ));
    }
    let exe = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !exe.is_file() {
        return Err(format!(
            "scripts/install-kafka-broker.sh named {exe:?} as the broker, which is no file"
        ));
    }
    Ok(exe)
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
    running: Option<Running>,
}

/// A broker process and the watchdog that stops it when the starting process is gone.
struct Running {
    broker: Child,
    watchdog: Child,
    /// The watchdog's standard input: a line says what to do, its end says that we are gone.
    to_watchdog: ChildStdin,
}

/// The watchdog: `sh -c WATCHDOG sh PID DIR`. A line `stop` on its input: SIGTERM to the broker
/// (the starting process waits for it, and reaps it); a line `forget`: nothing (the starting
/// process kills it itself). The end of its input without a line: the starting process is gone,
/// so nobody else will stop the broker or remove its folder; the broker now belongs to init,
/// which reaps it, so `kill -0` tells when it has exited.
const WATCHDOG: &str = r#"
pid=$1
dir=$2
if read -r word; then
  if [ "$word" = stop ]; then kill -TERM "$pid" 2>/dev/null; fi
  exit 0
fi
kill -TERM "$pid" 2>/dev/null
i=0
while kill -0 "$pid" 2>/dev/null; do
  i=$((i + 1))
  if [ "$i" -ge 100 ]; then kill -KILL "$pid" 2>/dev/null; break; fi
  sleep 0.1
done
rm -rf "$dir"
"#;

impl BrokerProcess {
    /// Starts `exe` (see [`install`]) on a free port with its files in `dir`, and waits until
    /// it answers a metadata request; or why it could not. If the starting process dies, the
    /// watchdog removes `dir`.
    pub fn start(exe: &Path, dir: &Path) -> Result<BrokerProcess, String> {
        let mut broker = BrokerProcess {
            exe: exe.to_path_buf(),
            port: 0,
            dir: dir.to_path_buf(),
            running: None,
        };
        let mut last = String::new();
        // A free port may be taken between our look and the broker's bind: try another.
        for _ in 0..3 {
            broker.port = free_port()?;
            match broker.launch() {
                Ok(()) => return Ok(broker),
                Err(e) => last = e,
            }
        }
        Err(last)
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
        self.running.as_ref().map(|r| r.broker.id())
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
            running.stop();
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
            .set("group.id", "weir-test-broker-metadata")
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
        let log_path = self.log_path();
        let log = File::options()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let log_err = log
            .try_clone()
            .map_err(|e| format!("cannot open {}: {e}", log_path.display()))?;
        let log_start = fs::metadata(&log_path).map(|m| m.len()).unwrap_or(0);
        let mut broker = Command::new(&self.exe)
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
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))?;
        let mut watchdog = match Command::new("sh")
            .args(["-c", WATCHDOG, "sh"])
            .arg(broker.id().to_string())
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(watchdog) => watchdog,
            Err(e) => {
                let _ = broker.kill();
                let _ = broker.wait();
                return Err(format!("cannot run sh (the broker's watchdog): {e}"));
            }
        };
        let to_watchdog = watchdog.stdin.take().expect("piped");
        let mut running = Running {
            broker,
            watchdog,
            to_watchdog,
        };
        let started = Instant::now();
        let deadline = started + START_TIMEOUT;
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        loop {
            if let Ok(Some(status)) = running.broker.try_wait() {
                // It is reaped: the watchdog must not signal its pid again.
                running.forget_watchdog();
                return Err(format!(
                    "the broker ({}) exited at start with {status}; it printed: {}",
                    self.exe.display(),
                    self.log_since(log_start)
                ));
            }
            // Ask only once the port is open: a client that finds no broker backs off.
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok()
                && self.metadata(Duration::from_secs(2)).is_ok()
            {
                self.running = Some(running);
                if std::env::var_os("WEIR_KAFKA_VERBOSE").is_some() {
                    let _ = writeln!(
                        std::io::stderr(),
                        "weir: Kafka broker on {} answered after {:.0?}",
                        self.bootstrap(),
                        started.elapsed()
                    );
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                running.kill();
                return Err(format!(
                    "the broker did not answer a metadata request on {} within {START_TIMEOUT:?}; \
                     it printed: {}",
                    self.bootstrap(),
                    self.log_since(log_start)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Where the broker's output goes.
    fn log_path(&self) -> PathBuf {
        self.dir.join("broker.log")
    }

    /// What the broker printed since byte `start` of its log, without the glibc warning.
    fn log_since(&self, start: u64) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(self.log_path()) {
            let _ = file.read_to_string(&mut text);
        }
        let text: Vec<&str> = text
            .get(usize::try_from(start).unwrap_or(0)..)
            .unwrap_or("")
            .lines()
            .filter(|line| !line.contains(GLIBC_NOISE))
            .collect();
        if text.is_empty() {
            "nothing".to_string()
        } else {
            text.join("\n")
        }
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Running {
    /// SIGTERM through the watchdog, then a bounded wait for the broker; SIGKILL if it lingers.
    fn stop(mut self) {
        // The watchdog signals the broker while it is still our unreaped child: its pid cannot
        // have been reused.
        let _ = writeln!(self.to_watchdog, "stop");
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match self.broker.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "weir: the Kafka broker ignored SIGTERM for {STOP_TIMEOUT:?}: killing it"
                    );
                    let _ = self.broker.kill();
                    let _ = self.broker.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = self.watchdog.wait();
    }

    /// SIGKILL, after telling the watchdog to let go of the pid.
    fn kill(mut self) {
        self.forget_watchdog();
        let _ = self.broker.kill();
        let _ = self.broker.wait();
    }

    /// Tells the watchdog to exit without signalling, and waits for it.
    fn forget_watchdog(&mut self) {
        let _ = writeln!(self.to_watchdog, "forget");
        let _ = self.watchdog.wait();
    }
}

/// A port on 127.0.0.1 that was free a moment ago.
fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))
}
