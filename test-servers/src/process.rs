//! What every server of this crate shares: installing it with its script, a free loopback
//! port, a log file, and the child process with the watchdog that stops it when the process
//! that started it is gone.
//!
//! **No server outlives the process that started it.** A killed process runs no `Drop`, and a
//! server in a `static` is never dropped; so every server has a watchdog, a small `sh` whose
//! standard input is a pipe from the starting process. That process writes to it only to stop
//! the server on purpose; when the pipe closes without a word, the process is gone (exited,
//! crashed or killed — the kernel closes the pipe in every case), and the watchdog stops the
//! server and removes its folder. This needs no `libc` (no `prctl` death signal, no process
//! groups): a pipe's end is the one thing the kernel reports about a dead process to a process
//! that is not its parent. The pipe is close-on-exec (std makes every pipe so), so no other
//! child of the starting process holds it open.

use std::fs::{self, File};
use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Runs `bash scripts/<script>` of the workspace at `root` (a no-op when the pinned version is
/// installed) and returns the executable (or folder of jars) whose path it prints on stdout;
/// or why it could not,
/// `what` naming the server and `how` what the script does and needs. The script's messages go
/// to this process's stderr.
pub fn install(root: &Path, script: &str, what: &str, how: &str) -> Result<PathBuf, String> {
    let path = root.join("scripts").join(script);
    let out = Command::new("bash")
        .arg(&path)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run bash {}: {e}", path.display()))?;
    if !out.status.success() {
        return Err(format!(
            "`bash scripts/{script}` failed ({}; what it printed is above): {how}",
            out.status
        ));
    }
    let exe = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !exe.exists() {
        return Err(format!(
            "scripts/{script} named {exe:?} as the {what}, which does not exist"
        ));
    }
    Ok(exe)
}

/// A port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| format!("cannot find a free port on 127.0.0.1: {e}"))
}

/// A server's output file, appended to across restarts.
#[derive(Clone)]
pub(crate) struct Log {
    path: PathBuf,
}

impl Log {
    /// The log at `path` (created on the first [`Log::open`]).
    pub(crate) fn new(path: PathBuf) -> Log {
        Log { path }
    }

    /// Standard output and error for a server, both appending to the log, and the log's length
    /// now (what the server prints from here on starts there: [`Log::since`]).
    pub(crate) fn open(&self) -> Result<(Stdio, Stdio, u64), String> {
        let cannot = |e: std::io::Error| format!("cannot open {}: {e}", self.path.display());
        let out = File::options()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(cannot)?;
        let err = out.try_clone().map_err(cannot)?;
        let start = fs::metadata(&self.path).map(|m| m.len()).unwrap_or(0);
        Ok((out.into(), err.into(), start))
    }

    /// What the server printed since byte `start`, without the lines containing `noise`
    /// (`"nothing"` when that is empty).
    pub(crate) fn since(&self, start: u64, noise: Option<&str>) -> String {
        let mut text = String::new();
        if let Ok(mut file) = File::open(&self.path) {
            let _ = file.read_to_string(&mut text);
        }
        let text: Vec<&str> = text
            .get(usize::try_from(start).unwrap_or(0)..)
            .unwrap_or("")
            .lines()
            .filter(|line| noise.is_none_or(|noise| !line.contains(noise)))
            .collect();
        if text.is_empty() {
            "nothing".to_string()
        } else {
            text.join("\n")
        }
    }
}

/// Why [`Watched::wait_ready`] gave up.
pub(crate) enum NotReady {
    /// The server exited (it is reaped, and its watchdog gone).
    Exited(ExitStatus),
    /// It did not become ready in time (it is killed, and its watchdog gone).
    TimedOut,
}

/// A server process and the watchdog that stops it when the starting process is gone.
pub(crate) struct Watched {
    server: Child,
    watchdog: Child,
    /// The watchdog's standard input: a line says what to do, its end says that we are gone.
    to_watchdog: ChildStdin,
}

/// The watchdog: `sh -c WATCHDOG sh PID DIR`. A line `stop` on its input: SIGTERM to the server
/// (the starting process waits for it, and reaps it); a line `forget`: nothing (the starting
/// process kills it itself). The end of its input without a line: the starting process is gone,
/// so nobody else will stop the server or remove its folder; the server now belongs to init,
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

impl Watched {
    /// Spawns `command` (its output already directed) and its watchdog, which removes `dir`
    /// should the starting process die; `what` names the server in messages.
    pub(crate) fn spawn(mut command: Command, dir: &Path, what: &str) -> Result<Watched, String> {
        let mut server = command
            .stdin(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot run the {what} ({command:?}): {e}"))?;
        let mut watchdog = match Command::new("sh")
            .args(["-c", WATCHDOG, "sh"])
            .arg(server.id().to_string())
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(watchdog) => watchdog,
            Err(e) => {
                let _ = server.kill();
                let _ = server.wait();
                return Err(format!("cannot run sh (the {what}'s watchdog): {e}"));
            }
        };
        let to_watchdog = watchdog.stdin.take().expect("piped");
        Ok(Watched {
            server,
            watchdog,
            to_watchdog,
        })
    }

    /// The server process's id.
    pub(crate) fn id(&self) -> u32 {
        self.server.id()
    }

    /// Polls `ready` every 50 ms until it says yes (the server, returned), the server exits, or
    /// `timeout` passes (the server killed).
    pub(crate) fn wait_ready(
        mut self,
        timeout: Duration,
        mut ready: impl FnMut() -> bool,
    ) -> Result<Watched, NotReady> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(Some(status)) = self.server.try_wait() {
                // It is reaped: the watchdog must not signal its pid again.
                self.forget_watchdog();
                return Err(NotReady::Exited(status));
            }
            if ready() {
                return Ok(self);
            }
            if Instant::now() >= deadline {
                self.kill();
                return Err(NotReady::TimedOut);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM through the watchdog, then a wait of at most `timeout` for the server; SIGKILL
    /// if it lingers (said on stderr, `what` naming the server).
    pub(crate) fn stop(mut self, timeout: Duration, what: &str) {
        // The watchdog signals the server while it is still our unreaped child: its pid cannot
        // have been reused.
        let _ = writeln!(self.to_watchdog, "stop");
        let deadline = Instant::now() + timeout;
        loop {
            match self.server.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() >= deadline => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "weir: the {what} ignored SIGTERM for {timeout:?}: killing it"
                    );
                    let _ = self.server.kill();
                    let _ = self.server.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            }
        }
        let _ = self.watchdog.wait();
    }

    /// Sends the signal `name` (`STOP`, `CONT`, …) to the server, which is still our unreaped
    /// child: its pid cannot have been reused. `what` names the server in the error.
    pub(crate) fn signal(&self, name: &str, what: &str) -> Result<(), String> {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.server.id().to_string())
            .status()
            .map_err(|e| format!("cannot run `kill -{name}` on the {what}: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("`kill -{name}` on the {what} failed ({status})"))
        }
    }

    /// SIGKILL, after telling the watchdog to let go of the pid.
    pub(crate) fn kill(mut self) {
        self.forget_watchdog();
        let _ = self.server.kill();
        let _ = self.server.wait();
    }

    /// Tells the watchdog to exit without signalling, and waits for it.
    fn forget_watchdog(&mut self) {
        let _ = writeln!(self.to_watchdog, "forget");
        let _ = self.watchdog.wait();
    }
}

/// Runs `launch` on a free port, trying another port when it fails (a free port may be taken
/// between our look and the server's bind), three times at most; the last error if all fail.
pub(crate) fn on_free_port<T>(
    mut launch: impl FnMut(u16) -> Result<T, String>,
) -> Result<T, String> {
    let mut last = String::new();
    for _ in 0..3 {
        match launch(free_port()?) {
            Ok(launched) => return Ok(launched),
            Err(e) => last = e,
        }
    }
    Err(last)
}
