//! The project's Kafka test broker, of one of two kinds ([`Kind`]):
//!
//! - **Apache Kafka** itself (the default), the version pinned in `tests/kafka/apache/pom.xml`,
//!   its jars fetched with Maven into `tests/kafka/apache/lib` by
//!   `scripts/install-apache-kafka.sh`, run as one KRaft node (broker and controller in one
//!   JVM, no ZooKeeper) on two free loopback ports, the client port and the controller's;
//! - **noida-db** (`WEIR_KAFKA_BROKER=noida-db`), PyPI's single-broker Kafka 3.8 emulator,
//!   pinned in `tests/kafka/requirements.txt` and installed into `tests/kafka/.venv` by
//!   `scripts/install-kafka-broker.sh`: it starts in well under a second and keeps its data in
//!   memory, saving it now and then and when stopped.
//!
//! [`install`] installs the chosen kind; a [`BrokerProcess`] runs it with its data in a folder
//! of the caller's, and can stop it (SIGTERM), kill it (SIGKILL) and start it again on the same
//! ports and data. Like every server of this crate, it never outlives the process that started
//! it (the crate docs).

use std::fs;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::process::{self, Log, NotReady, Watched};

/// The longest a broker may take to answer a metadata request after it is started: a JVM
/// starting Kafka takes about 5 s on an idle machine and several times that on two cores
/// shared with a build.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a broker asked to stop (SIGTERM: it saves its state first) has before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(20);
/// What messages call it.
const WHAT: &str = "Kafka broker";
/// The environment variable that chooses the kind of broker ([`Kind::from_env`]).
pub const KIND_VARIABLE: &str = "WEIR_KAFKA_BROKER";

/// The line noida-db 0.2.3's executable prints on Debian 12 (built against a newer glibc; it
/// runs): left out of anything shown.
pub const GLIBC_NOISE: &str = "weak version GLIBC_2.39 not found";

/// The JVM's options for a test broker: a small heap and the serial collector (two cores are
/// shared by the whole suite; a test broker holds little), and only the quick JIT compiler,
/// which halves the CPU a start costs. Measured on this project's CI-sized machine: about 5 s
/// to the first answered metadata request and about 300 MB resident.
const JVM_OPTIONS: &[&str] = &[
    "-Xms32m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Xshare:auto",
    "-Djava.awt.headless=true",
];

/// Which broker the tests run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Apache Kafka, pinned in `tests/kafka/apache/pom.xml`.
    Apache,
    /// PyPI's noida-db, pinned in `tests/kafka/requirements.txt`.
    NoidaDb,
}

impl Kind {
    /// The kind `WEIR_KAFKA_BROKER` names: `apache` (also when unset or empty) or `noida-db`;
    /// or why the value is not one of them.
    pub fn from_env() -> Result<Kind, String> {
        match std::env::var(KIND_VARIABLE).as_deref() {
            Err(_) | Ok("" | "apache") => Ok(Kind::Apache),
            Ok("noida-db") => Ok(Kind::NoidaDb),
            Ok(other) => Err(format!(
                "{KIND_VARIABLE}={other:?} names no Kafka test broker: use `apache` (Apache \
                 Kafka, the default) or `noida-db` (the emulator)"
            )),
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Apache => "Apache Kafka",
            Kind::NoidaDb => "noida-db",
        }
    }
}

/// An installed broker ([`install`]): its kind and where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// Which broker.
    pub kind: Kind,
    /// Apache Kafka: the folder of its jars; noida-db: its native executable.
    pub path: PathBuf,
}

/// Installs the broker `WEIR_KAFKA_BROKER` chooses ([`Kind::from_env`]; Apache Kafka unless
/// it says otherwise) if needed, and returns it; or why it could not. See [`install_kind`].
pub fn install(root: &Path) -> Result<Installed, String> {
    install_kind(root, Kind::from_env()?)
}

/// Installs the broker of kind `kind` if needed (a no-op when the pinned version is there)
/// with its script in `scripts/` of the workspace at `root`, and returns it; or why it could
/// not. The script's messages go to this process's stderr.
pub fn install_kind(root: &Path, kind: Kind) -> Result<Installed, String> {
    let path = match kind {
        Kind::Apache => process::install(
            root,
            "install-apache-kafka.sh",
            "folder of Apache Kafka's jars",
            "it fetches Apache Kafka's jars with Maven into tests/kafka/apache/lib and needs \
             Java 17 and Maven (installed with apt-get when missing) and access to Maven's \
             central repository",
        )?,
        Kind::NoidaDb => process::install(
            root,
            "install-kafka-broker.sh",
            "broker",
            "it installs PyPI's noida-db into tests/kafka/.venv and needs python3 with venv \
             and access to PyPI",
        )?,
    };
    Ok(Installed { kind, path })
}

/// A broker on loopback ports, with `data/` and `broker.log` (and for Apache Kafka its
/// `server.properties`) in a folder of the caller's. Dropping it stops the broker (and waits
/// for it).
pub struct BrokerProcess {
    installed: Installed,
    /// Its client port on 127.0.0.1, the same across [`BrokerProcess::restart`].
    port: u16,
    /// Apache Kafka: its controller's port on 127.0.0.1 (the KRaft quorum's), kept across
    /// restarts too; the data remembers it. Unused for noida-db.
    controller_port: u16,
    /// Apache Kafka: the port on 127.0.0.1 its metadata tells clients to connect to, when
    /// not its own ([`BrokerProcess::start_advertising`]).
    advertised_port: Option<u16>,
    /// Holds `data/` (the broker's data directory) and `broker.log` (its output).
    dir: PathBuf,
    /// The broker process and its watchdog; `None` while stopped.
    running: Option<Watched>,
}

impl BrokerProcess {
    /// Starts the broker `installed` (see [`install`]) on free ports with its files in `dir`,
    /// and waits until it answers a metadata request; or why it could not. If the starting
    /// process dies, the watchdog removes `dir`.
    pub fn start(installed: &Installed, dir: &Path) -> Result<BrokerProcess, String> {
        BrokerProcess::start_with(installed, dir, None)
    }

    /// [`BrokerProcess::start`], but the broker's metadata tells clients to reach it at
    /// 127.0.0.1:`advertised`, the port of a relay of the caller's in front of its own: a
    /// client then makes every connection after its first to the relay (the broker's address
    /// in the metadata is where a client sends its requests), and the relay can fail the ones
    /// a test picks. Apache Kafka only.
    ///
    /// `forward(port)` is called with the broker's own port before the broker starts (again
    /// for each port tried), so that the relay passes connections on from the first: the
    /// readiness check's metadata request names the relay, and a relay that held that
    /// connection until it knew the port would stall the start by its own timeout.
    pub fn start_advertising(
        installed: &Installed,
        dir: &Path,
        advertised: u16,
        forward: &dyn Fn(u16),
    ) -> Result<BrokerProcess, String> {
        if installed.kind != Kind::Apache {
            return Err(format!(
                "{} cannot advertise another address than its own",
                installed.kind.name()
            ));
        }
        BrokerProcess::start_with(installed, dir, Some((advertised, forward)))
    }

    /// [`BrokerProcess::start`], advertising the port of `advertised` if given, and telling its
    /// relay the broker's port first.
    fn start_with(
        installed: &Installed,
        dir: &Path,
        advertised: Option<(u16, &dyn Fn(u16))>,
    ) -> Result<BrokerProcess, String> {
        let advertised_port = advertised.map(|(port, _)| port);
        process::on_free_port(|port| {
            let controller_port = match installed.kind {
                Kind::Apache => process::free_port()?,
                Kind::NoidaDb => 0,
            };
            if controller_port == port || advertised_port.is_some_and(|a| a == port) {
                return Err(format!("the free ports for the broker were both {port}"));
            }
            // A failed start leaves a half-formatted data directory behind: start afresh.
            let _ = fs::remove_dir_all(dir.join("data"));
            if let Some((_, forward)) = advertised {
                forward(port);
            }
            let mut broker = BrokerProcess {
                installed: installed.clone(),
                port,
                controller_port,
                advertised_port,
                dir: dir.to_path_buf(),
                running: None,
            };
            broker.launch()?;
            Ok(broker)
        })
    }

    /// Which broker this is.
    pub fn kind(&self) -> Kind {
        self.installed.kind
    }

    /// `"127.0.0.1:PORT"`, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The broker's client port.
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

    /// Stops the broker as an operator would (SIGTERM: Apache Kafka shuts down in order,
    /// noida-db saves its state to its data directory) and waits for it to exit (killing it
    /// after 20 s). The ports stay this broker's for [`BrokerProcess::restart`]. Does nothing
    /// when it is not running.
    pub fn stop(&mut self) {
        if let Some(running) = self.running.take() {
            running.stop(STOP_TIMEOUT, WHAT);
        }
    }

    /// Kills the broker (SIGKILL, a crash) and waits for it. Apache Kafka keeps what it wrote
    /// to its log files (the page cache survives a process); noida-db keeps only what it
    /// saved of its own accord before.
    pub fn kill(&mut self) {
        if let Some(running) = self.running.take() {
            running.kill();
        }
    }

    /// Starts the broker again on the same ports and data directory (stopping it first if it
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
        metadata(&self.bootstrap(), timeout)
    }

    /// Starts the broker process and its watchdog on `self.port`, and waits until it answers.
    /// `WEIR_KAFKA_VERBOSE=1` prints how long that took.
    fn launch(&mut self) -> Result<(), String> {
        let data = self.dir.join("data");
        fs::create_dir_all(&data).map_err(|e| format!("cannot make {}: {e}", data.display()))?;
        let log = self.log();
        let started = Instant::now();
        let command = match self.installed.kind {
            Kind::Apache => {
                let node = Node {
                    id: 1,
                    port: self.port,
                    controller_port: self.controller_port,
                    advertised_port: self.advertised_port.unwrap_or(self.port),
                };
                let lib = &self.installed.path;
                let config = write_config(&self.dir, &node, &[node])?;
                if let Some(format) =
                    start_format(lib, &self.dir, &config, &cluster_id(&node), &log)?
                {
                    format.finish(&log, node.id)?;
                }
                kafka_command(lib, &config)
            }
            Kind::NoidaDb => {
                let mut command = Command::new(&self.installed.path);
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
                    .arg(&data);
                command
            }
        };
        let running = spawn(command, &self.dir, &log)?.answering(&self.installed, self.port)?;
        self.running = Some(running);
        if std::env::var_os("WEIR_KAFKA_VERBOSE").is_some() {
            let _ = writeln!(
                std::io::stderr(),
                "weir: {} on {} answered after {:.1?}",
                self.installed.kind.name(),
                self.bootstrap(),
                started.elapsed()
            );
        }
        Ok(())
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

/// A KRaft cluster of Apache Kafka nodes on loopback ports, each node a broker and a voter of
/// the controller quorum in one JVM, for the tests that need replication: topics replicated
/// to every node (at most 3), `min.insync.replicas` one fewer (2 of 3), so a cluster of three
/// keeps taking acknowledged writes with one node down. Node `i` keeps its files in
/// `node-<i>/` of a folder of the caller's. Each node can be stopped, killed and restarted on
/// its ports and data; dropping the cluster stops every node.
pub struct ClusterProcess {
    installed: Installed,
    nodes: Vec<ClusterNode>,
}

/// One node of a [`ClusterProcess`].
struct ClusterNode {
    node: Node,
    /// Its folder: `server.properties`, `data/`, `broker.log`.
    dir: PathBuf,
    /// The node's process and its watchdog; `None` while stopped.
    running: Option<Watched>,
    /// Whether the process is paused ([`ClusterProcess::pause`]).
    paused: bool,
}

impl ClusterProcess {
    /// Starts a cluster of `size` nodes (1 to 9) of Apache Kafka `installed` on free ports,
    /// with their files in `dir`, and waits until every node answers a metadata request naming
    /// all of them; or why it could not (noida-db has no clusters).
    pub fn start(installed: &Installed, dir: &Path, size: u32) -> Result<ClusterProcess, String> {
        if installed.kind != Kind::Apache {
            return Err(format!(
                "a Kafka cluster needs Apache Kafka; {} runs one broker only",
                installed.kind.name()
            ));
        }
        if !(1..=9).contains(&size) {
            return Err(format!("a test cluster has 1 to 9 nodes, not {size}"));
        }
        let mut ports = Vec::new();
        while ports.len() < 2 * size as usize {
            let port = process::free_port()?;
            if !ports.contains(&port) {
                ports.push(port);
            }
        }
        let nodes: Vec<Node> = (0..size)
            .map(|i| Node {
                id: i + 1,
                port: ports[2 * i as usize],
                controller_port: ports[2 * i as usize + 1],
                advertised_port: ports[2 * i as usize],
            })
            .collect();
        let id = cluster_id(&nodes[0]);
        let lib = &installed.path;
        let mut cluster = ClusterProcess {
            installed: installed.clone(),
            nodes: Vec::new(),
        };
        // Format every node at once (a JVM each), then start every node before waiting for
        // any: a node answers only once a majority of the quorum runs.
        let mut formats = Vec::new();
        for node in &nodes {
            let dir = dir.join(format!("node-{}", node.id));
            fs::create_dir_all(dir.join("data"))
                .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
            let config = write_config(&dir, node, &nodes)?;
            let log = Log::new(dir.join("broker.log"));
            formats.push((start_format(lib, &dir, &config, &id, &log)?, log, node.id));
            cluster.nodes.push(ClusterNode {
                node: *node,
                dir,
                running: None,
                paused: false,
            });
        }
        for (format, log, id) in formats {
            if let Some(format) = format {
                format.finish(&log, id)?;
            }
        }
        let mut starting = Vec::new();
        for member in &cluster.nodes {
            let log = Log::new(member.dir.join("broker.log"));
            let config = member.dir.join("server.properties");
            starting.push(spawn(kafka_command(lib, &config), &member.dir, &log)?);
        }
        let mut failed = None;
        for (member, starting) in cluster.nodes.iter_mut().zip(starting) {
            match starting.answering(installed, member.node.port) {
                Ok(running) => member.running = Some(running),
                Err(e) => failed = failed.or(Some(format!("node {}: {e}", member.node.id))),
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        cluster.wait_for_all()?;
        Ok(cluster)
    }

    /// `"127.0.0.1:PORT,…"`, every node's client port, for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        let addresses: Vec<String> = self
            .nodes
            .iter()
            .map(|member| format!("127.0.0.1:{}", member.node.port))
            .collect();
        addresses.join(",")
    }

    /// A client configuration pointing at every node.
    pub fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", self.bootstrap());
        config
    }

    /// The number of nodes.
    pub fn size(&self) -> usize {
        self.nodes.len()
    }

    /// Node `i`'s (0-based) client port.
    pub fn port(&self, i: usize) -> u16 {
        self.nodes[i].node.port
    }

    /// The index of the node whose `node.id` (the broker id metadata names) is `id`.
    pub fn index_of(&self, id: i32) -> Option<usize> {
        self.nodes
            .iter()
            .position(|member| i64::from(member.node.id) == i64::from(id))
    }

    /// Whether node `i` runs.
    pub fn is_running(&self, i: usize) -> bool {
        self.nodes[i].running.is_some()
    }

    /// Stops node `i` as an operator would (SIGTERM: a controlled shutdown, which moves its
    /// partitions' leadership to the others) and waits for it (killing it after 20 s). A
    /// paused node is resumed first: it could not act on the SIGTERM.
    pub fn stop(&mut self, i: usize) {
        let _ = self.resume(i);
        if let Some(running) = self.nodes[i].running.take() {
            running.stop(STOP_TIMEOUT, WHAT);
        }
    }

    /// Kills node `i` (SIGKILL, a crash) and waits for it.
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].paused = false;
        if let Some(running) = self.nodes[i].running.take() {
            running.kill();
        }
    }

    /// Pauses node `i` (SIGSTOP), as a long garbage collection or a frozen machine would: it
    /// neither answers nor leaves the cluster until the controller stops hearing from it
    /// (`broker.session.timeout.ms`) and fences it. Does nothing to a node that is not running.
    pub fn pause(&mut self, i: usize) -> Result<(), String> {
        let member = &mut self.nodes[i];
        if let Some(running) = &member.running {
            running.signal("STOP", WHAT)?;
            member.paused = true;
        }
        Ok(())
    }

    /// Resumes node `i` after [`ClusterProcess::pause`] (SIGCONT); does nothing to a node that
    /// is not paused.
    pub fn resume(&mut self, i: usize) -> Result<(), String> {
        let member = &mut self.nodes[i];
        if let (true, Some(running)) = (member.paused, &member.running) {
            running.signal("CONT", WHAT)?;
        }
        member.paused = false;
        Ok(())
    }

    /// Starts node `i` again on its ports and data (stopping it first if it runs), and waits
    /// until it answers; or why it did not.
    pub fn restart(&mut self, i: usize) -> Result<(), String> {
        self.stop(i);
        let member = &mut self.nodes[i];
        let log = Log::new(member.dir.join("broker.log"));
        let config = member.dir.join("server.properties");
        let running = spawn(
            kafka_command(&self.installed.path, &config),
            &member.dir,
            &log,
        )?
        .answering(&self.installed, member.node.port)?;
        member.running = Some(running);
        Ok(())
    }

    /// Waits until a metadata request names every node; or which are missing after
    /// [`START_TIMEOUT`].
    fn wait_for_all(&self) -> Result<(), String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let consumer: BaseConsumer = self
            .config()
            .set("group.id", "weir-test-servers-metadata")
            .create()
            .map_err(|e| format!("cannot create a Kafka client: {e}"))?;
        loop {
            let seen = consumer
                .fetch_metadata(None, Duration::from_secs(2))
                .map(|m| m.brokers().len())
                .unwrap_or(0);
            if seen == self.nodes.len() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "the Kafka cluster on {} named {seen} of its {} brokers after {START_TIMEOUT:?}",
                    self.bootstrap(),
                    self.nodes.len()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for ClusterProcess {
    fn drop(&mut self) {
        // A paused node could not act on its SIGTERM.
        for i in 0..self.nodes.len() {
            let _ = self.resume(i);
        }
        // SIGTERM to all first: a node waits for the quorum as it shuts down.
        let running: Vec<Watched> = self
            .nodes
            .iter_mut()
            .filter_map(|member| member.running.take())
            .collect();
        let mut handles = Vec::new();
        for watched in running {
            handles.push(std::thread::spawn(move || watched.stop(STOP_TIMEOUT, WHAT)));
        }
        for handle in handles {
            let _ = handle.join();
        }
    }
}

/// Whether the broker at `bootstrap` answers a metadata request naming at least one broker
/// within `timeout`, or what went wrong.
fn metadata(bootstrap: &str, timeout: Duration) -> Result<(), String> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "weir-test-servers-metadata")
        .create()
        .map_err(|e| format!("cannot create a Kafka client: {e}"))?;
    let metadata = consumer
        .fetch_metadata(None, timeout)
        .map_err(|e| format!("metadata request to {bootstrap}: {e}"))?;
    if metadata.brokers().is_empty() {
        return Err(format!("{bootstrap} answered with no brokers"));
    }
    Ok(())
}

/// A broker process just spawned, not yet answering.
struct Starting {
    watched: Watched,
    log: Log,
    /// Where its output starts in `log`.
    log_start: u64,
}

/// Spawns `command` (its output to `log`) with its watchdog, which removes `dir` should this
/// process die.
fn spawn(mut command: Command, dir: &Path, log: &Log) -> Result<Starting, String> {
    let (stdout, stderr, log_start) = log.open()?;
    command.stdout(stdout).stderr(stderr);
    Ok(Starting {
        watched: Watched::spawn(command, dir, WHAT)?,
        log: log.clone(),
        log_start,
    })
}

impl Starting {
    /// Waits until the broker answers a metadata request on `port`; or why it did not, with
    /// what it printed (it is killed then).
    fn answering(self, installed: &Installed, port: u16) -> Result<Watched, String> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let bootstrap = address.to_string();
        let ready = self.watched.wait_ready(START_TIMEOUT, || {
            // Ask only once the port is open: a client that finds no broker backs off.
            TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok()
                && metadata(&bootstrap, Duration::from_secs(2)).is_ok()
        });
        let name = installed.kind.name();
        let printed = || self.log.since(self.log_start, Some(GLIBC_NOISE));
        match ready {
            Ok(running) => Ok(running),
            Err(NotReady::Exited(status)) => Err(format!(
                "the broker ({name}, {}) exited at start with {status}; it printed: {}",
                installed.path.display(),
                printed()
            )),
            Err(NotReady::TimedOut) => Err(format!(
                "the broker ({name}) did not answer a metadata request on {bootstrap} within \
                 {START_TIMEOUT:?}; it printed: {}",
                printed()
            )),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Apache Kafka

/// One Apache Kafka node (broker and KRaft controller in one JVM) on loopback ports.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// Its `node.id`.
    id: u32,
    /// Its client (broker) port.
    port: u16,
    /// Its controller port, for the KRaft quorum.
    controller_port: u16,
    /// The client port its metadata names: its own, or a relay's in front of it.
    advertised_port: u16,
}

/// The `java` to run: `$JAVA_HOME/bin/java` when `JAVA_HOME` is set, else the one on `PATH`.
/// Public for the benchmarks' Kafka Streams peer, which runs on the broker's Java.
pub fn java() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) if !home.is_empty() => Path::new(&home).join("bin").join("java"),
        _ => PathBuf::from("java"),
    }
}

/// `java` with [`JVM_OPTIONS`], the logging configuration beside `lib`
/// (`tests/kafka/apache/log4j2.properties`) and the classpath `lib/*`, ready for a main class.
fn java_command(lib: &Path) -> Command {
    let mut command = Command::new(java());
    command.args(JVM_OPTIONS);
    if let Some(log4j) = lib.parent().map(|dir| dir.join("log4j2.properties"))
        && log4j.is_file()
    {
        command.arg(format!("-Dlog4j2.configurationFile={}", log4j.display()));
    }
    command.arg("-cp").arg(lib.join("*"));
    command
}

/// Writes `dir/server.properties` for `node` of the cluster `voters` (all its nodes), its log
/// in `dir/data`, and returns its path.
fn write_config(dir: &Path, node: &Node, voters: &[Node]) -> Result<PathBuf, String> {
    let config = dir.join("server.properties");
    fs::write(&config, server_properties(node, voters, &dir.join("data")))
        .map_err(|e| format!("cannot write {}: {e}", config.display()))?;
    Ok(config)
}

/// A `kafka.tools.StorageTool format` running.
struct Formatting {
    child: Child,
    /// Where its output starts in the log.
    log_start: u64,
}

/// Starts formatting `dir/data` with the cluster id `id` (`kafka.tools.StorageTool format`,
/// a JVM of its own: about 2 s), its output to `log`; `None` when it is formatted already.
/// Every node of a cluster is formatted with the same id.
fn start_format(
    lib: &Path,
    dir: &Path,
    config: &Path,
    id: &str,
    log: &Log,
) -> Result<Option<Formatting>, String> {
    if dir.join("data").join("meta.properties").is_file() {
        return Ok(None);
    }
    let (stdout, stderr, log_start) = log.open()?;
    let child = java_command(lib)
        .args([
            "kafka.tools.StorageTool",
            "format",
            "--ignore-formatted",
            "-t",
            id,
            "-c",
        ])
        .arg(config)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("cannot run {} (Java 17 or newer): {e}", java().display()))?;
    Ok(Some(Formatting { child, log_start }))
}

impl Formatting {
    /// Waits for the format of node `id` to end; or why it failed, with what it printed.
    fn finish(mut self, log: &Log, id: u32) -> Result<(), String> {
        let status = self
            .child
            .wait()
            .map_err(|e| format!("waiting for the format of Kafka node {id}: {e}"))?;
        if status.success() {
            return Ok(());
        }
        Err(format!(
            "formatting the data directory of Apache Kafka node {id} failed ({status}); it \
             printed: {}",
            log.since(self.log_start, None)
        ))
    }
}

/// The command that runs the Kafka node configured by `config`.
fn kafka_command(lib: &Path, config: &Path) -> Command {
    let mut command = java_command(lib);
    command.arg("kafka.Kafka").arg(config);
    command
}

/// The `server.properties` of `node` in the cluster `voters`, its log in `data`: settings for
/// tests. Every internal topic (consumer offsets, transaction state, share-group state) gets
/// one partition, replicated to every node (at most 3) and acknowledged by one fewer; a
/// consumer group's first rebalance does not wait; a transaction past its timeout is aborted
/// within a second (not ten), so tests of a stalled producer need not wait; a node that stops
/// answering is fenced, and its partitions led by others, after 3 s (not 9: every round of a
/// test that kills nodes waits for it); the broker's threads are few.
fn server_properties(node: &Node, voters: &[Node], data: &Path) -> String {
    let replicas = voters.len().min(3);
    let min_isr = if replicas > 1 { replicas - 1 } else { 1 };
    let quorum: Vec<String> = voters
        .iter()
        .map(|voter| format!("{}@127.0.0.1:{}", voter.id, voter.controller_port))
        .collect();
    format!(
        "# Written by weir-test-servers (test-servers/src/kafka.rs) at each start.\n\
         process.roles=broker,controller\n\
         node.id={id}\n\
         controller.quorum.voters={quorum}\n\
         listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller}\n\
         advertised.listeners=PLAINTEXT://127.0.0.1:{advertised}\n\
         controller.listener.names=CONTROLLER\n\
         inter.broker.listener.name=PLAINTEXT\n\
         listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
         log.dirs={data}\n\
         num.partitions=1\n\
         default.replication.factor={replicas}\n\
         min.insync.replicas={min_isr}\n\
         offsets.topic.num.partitions=1\n\
         offsets.topic.replication.factor={replicas}\n\
         transaction.state.log.num.partitions=1\n\
         transaction.state.log.replication.factor={replicas}\n\
         transaction.state.log.min.isr={min_isr}\n\
         share.coordinator.state.topic.num.partitions=1\n\
         share.coordinator.state.topic.replication.factor={replicas}\n\
         share.coordinator.state.topic.min.isr={min_isr}\n\
         group.initial.rebalance.delay.ms=0\n\
         transaction.abort.timed.out.transaction.cleanup.interval.ms=1000\n\
         broker.session.timeout.ms=3000\n\
         broker.heartbeat.interval.ms=500\n\
         num.network.threads=2\n\
         num.io.threads=2\n\
         background.threads=2\n\
         num.recovery.threads.per.data.dir=1\n\
         log.cleaner.threads=1\n",
        id = node.id,
        quorum = quorum.join(","),
        port = node.port,
        advertised = node.advertised_port,
        controller = node.controller_port,
        data = data.display(),
    )
}

/// A cluster id for `kafka.tools.StorageTool format -t`: 16 bytes in unpadded URL-safe
/// base64 (22 characters), as Kafka's own `Uuid`s. Derived from the time, this process and
/// the ports of the cluster's first node, so clusters of one test process differ; the first character is
/// never `-` (it would read as an option).
fn cluster_id(first: &Node) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let ports = (u64::from(first.port) << 16) | u64::from(first.controller_port);
    let mut state = nanos ^ (u64::from(std::process::id()) << 32) ^ ports;
    let mut bytes = [0u8; 16];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&crate::rng::splitmix64_next(&mut state).to_le_bytes());
    }
    // The top bit clear: the first character is one of A-Z, a-f.
    bytes[0] &= 0x7f;
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits = 0u32;
    let mut held = 0u32;
    let mut id = String::with_capacity(22);
    for byte in bytes {
        bits = (bits << 8) | u32::from(byte);
        held += 8;
        while held >= 6 {
            held -= 6;
            id.push(char::from(ALPHABET[((bits >> held) & 63) as usize]));
        }
    }
    if held > 0 {
        id.push(char::from(ALPHABET[((bits << (6 - held)) & 63) as usize]));
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_id_is_22_characters_of_url_safe_base64_not_starting_with_a_dash() {
        let node = Node {
            id: 1,
            port: 9092,
            controller_port: 9093,
            advertised_port: 9092,
        };
        for _ in 0..100 {
            let id = cluster_id(&node);
            assert_eq!(id.len(), 22, "{id}");
            assert!(!id.starts_with('-'), "{id}");
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
                "{id}"
            );
        }
    }
}
