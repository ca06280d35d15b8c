//! The WASI a component gets: the interfaces the Python and JavaScript toolchains import before
//! any operator code runs, each linked but given nothing to reach — deny by default.
//!
//! # Why it exists
//!
//! componentize-py bundles CPython, and componentize-js SpiderMonkey; both are built on a C
//! library for WASI 0.2, so every component they make imports files, sockets, clocks,
//! randomness, the environment and standard I/O, whether the operator uses them or not. A host
//! that refused those imports could run no Python or JavaScript at all; one that granted them
//! would let an operator read the machine's files or open connections. So each interface the
//! toolchains need is linked, backed by a context that holds nothing: no preopened directory
//! (no path can be opened), no network use allowed (every socket, connection and name lookup is
//! refused with `access-denied`), no environment variables or arguments, an empty standard
//! input. Standard output and error go to the job's log under the operator's name, a bounded
//! number of lines per second. [`ALLOWED`] lists them with what each gives the guest, and
//! `docs/COMPONENTS.md` is its user-facing copy (a test keeps the two equal); a component that
//! imports any other interface is refused at load, naming it.

use std::any::Any;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};
use wasmtime_wasi::{ResourceTable, WasiCtx, WasiCtxView, WasiView};

use super::super::limits::MAX_MESSAGE_BYTES;
use super::super::state::{GuestState, StoreExtension};

/// One WASI interface a component may import, and what the host gives it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WasiInterface {
    /// The interface's name without its version: `wasi:io/streams`.
    pub name: &'static str,
    /// What a guest gets through it, in one sentence.
    pub gives: &'static str,
}

/// The WASI 0.2 interfaces a component may import (any 0.2.x version), and nothing else.
pub const ALLOWED: &[WasiInterface] = &[
    WasiInterface {
        name: "wasi:io/error",
        gives: "error values of the other interfaces",
    },
    WasiInterface {
        name: "wasi:io/poll",
        gives: "waiting on the streams and clocks below",
    },
    WasiInterface {
        name: "wasi:io/streams",
        gives: "the byte streams of standard input, output and error",
    },
    WasiInterface {
        name: "wasi:cli/environment",
        gives: "no environment variables, no arguments, no working directory",
    },
    WasiInterface {
        name: "wasi:cli/exit",
        gives: "exit, which fails the running call, naming the exit code",
    },
    WasiInterface {
        name: "wasi:cli/stdin",
        gives: "an empty standard input",
    },
    WasiInterface {
        name: "wasi:cli/stdout",
        gives: "standard output, written to the job's log (info) under the operator's name, \
                line by line, at most 100 lines a second",
    },
    WasiInterface {
        name: "wasi:cli/stderr",
        gives: "standard error, written to the job's log (warn) like standard output",
    },
    WasiInterface {
        name: "wasi:cli/terminal-input",
        gives: "nothing: no stream is a terminal",
    },
    WasiInterface {
        name: "wasi:cli/terminal-output",
        gives: "nothing: no stream is a terminal",
    },
    WasiInterface {
        name: "wasi:cli/terminal-stdin",
        gives: "nothing: no stream is a terminal",
    },
    WasiInterface {
        name: "wasi:cli/terminal-stdout",
        gives: "nothing: no stream is a terminal",
    },
    WasiInterface {
        name: "wasi:cli/terminal-stderr",
        gives: "nothing: no stream is a terminal",
    },
    WasiInterface {
        name: "wasi:clocks/wall-clock",
        gives: "the host's clock (the time of day is not replayed: see below)",
    },
    WasiInterface {
        name: "wasi:clocks/monotonic-clock",
        gives: "the host's monotonic clock",
    },
    WasiInterface {
        name: "wasi:filesystem/types",
        gives: "nothing to open: with no preopened directory, every path is refused",
    },
    WasiInterface {
        name: "wasi:filesystem/preopens",
        gives: "nothing: an empty list of directories",
    },
    WasiInterface {
        name: "wasi:random/random",
        gives: "random bytes from the host's secure generator",
    },
    WasiInterface {
        name: "wasi:random/insecure",
        gives: "random bytes from a fast generator seeded by the host",
    },
    WasiInterface {
        name: "wasi:random/insecure-seed",
        gives: "a random seed",
    },
    WasiInterface {
        name: "wasi:sockets/network",
        gives: "the network type, with every use of it refused",
    },
    WasiInterface {
        name: "wasi:sockets/instance-network",
        gives: "a network on which every use is refused (access-denied)",
    },
    WasiInterface {
        name: "wasi:sockets/tcp",
        gives: "nothing: creating, binding and connecting sockets are refused",
    },
    WasiInterface {
        name: "wasi:sockets/tcp-create-socket",
        gives: "nothing: every socket creation is refused",
    },
    WasiInterface {
        name: "wasi:sockets/udp",
        gives: "nothing: creating, binding and connecting sockets are refused",
    },
    WasiInterface {
        name: "wasi:sockets/udp-create-socket",
        gives: "nothing: every socket creation is refused",
    },
    WasiInterface {
        name: "wasi:sockets/ip-name-lookup",
        gives: "nothing: every name lookup is refused",
    },
];

/// The WASI major version every allowed interface is at: a component built for `0.2.0` links
/// with the host's `0.2.x`.
pub const WASI_VERSION: &str = "0.2";

/// Whether a component may import the interface `name` (versionless) at `version`.
pub(crate) fn allowed(name: &str, version: &str) -> bool {
    let minor = version
        .strip_prefix(WASI_VERSION)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'));
    minor && ALLOWED.iter().any(|interface| interface.name == name)
}

/// Most lines one instance writes to the log per second through standard output and error;
/// the rest are counted and the count logged once lines flow again.
pub const MAX_LOG_LINES_PER_SECOND: u32 = 100;

/// The WASI state of one component instance: its context, holding nothing to reach, and the
/// table of the resources (streams, descriptors) the guest holds handles to.
pub(crate) struct ComponentWasi {
    ctx: WasiCtx,
    table: ResourceTable,
    /// The standard error the context writes to, kept to read its out-of-memory report.
    stderr: GuestLog,
}

impl std::fmt::Debug for ComponentWasi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentWasi").finish_non_exhaustive()
    }
}

impl ComponentWasi {
    /// The context of an instance of `operator`'s `subtask`: nothing to reach, standard output
    /// and error to the log under those names.
    pub(crate) fn denied(operator: &str, subtask: u32) -> Self {
        let stderr = GuestLog::new(operator, subtask, Stream::Stderr);
        let ctx = WasiCtx::builder()
            .stdout(GuestLog::new(operator, subtask, Stream::Stdout))
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .socket_addr_check(|_, _| Box::pin(async { false }))
            .build();
        Self {
            ctx,
            table: ResourceTable::new(),
            stderr,
        }
    }
}

impl StoreExtension for ComponentWasi {
    /// Forgets an out-of-memory report, at the start of a call: only one made during the call
    /// that traps names its failure.
    fn forget_out_of_memory_report(&self) {
        self.stderr.lock().reported_out_of_memory = false;
    }

    /// Whether the guest wrote [`OUT_OF_MEMORY`] to its standard error since the last
    /// [`forget_out_of_memory_report`](Self::forget_out_of_memory_report), in a line or in the
    /// line it has not ended (an engine may trap before it ends the line).
    fn take_out_of_memory_report(&self) -> bool {
        let mut log = self.stderr.lock();
        std::mem::take(&mut log.reported_out_of_memory) || contains_out_of_memory(&log.partial)
    }
}

/// What the engine inside a JavaScript component (componentize-js's SpiderMonkey) writes to
/// standard error when an allocation fails, just before it traps with `unreachable`. The host
/// reads it only to name the failure of a call that trapped (the trap has already failed the
/// call), so that the user reads "out of memory" and its fix rather than the trap alone.
pub(crate) const OUT_OF_MEMORY: &str = "out of memory";

/// Whether `line` holds [`OUT_OF_MEMORY`], in any case.
fn contains_out_of_memory(line: &[u8]) -> bool {
    line.windows(OUT_OF_MEMORY.len())
        .any(|window| window.eq_ignore_ascii_case(OUT_OF_MEMORY.as_bytes()))
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        // Only components reach WASI, and their instances get their context when they start;
        // a state without one (which no linker path makes) gets the same empty context.
        let is_wasi =
            |extension: &dyn StoreExtension| (extension as &dyn Any).is::<ComponentWasi>();
        if !self.extension.as_deref().is_some_and(is_wasi) {
            self.extension = Some(Box::new(ComponentWasi::denied(
                &self.operator,
                self.subtask,
            )));
        }
        match self
            .extension
            .as_deref_mut()
            .and_then(|extension| (extension as &mut dyn Any).downcast_mut::<ComponentWasi>())
        {
            Some(wasi) => WasiCtxView {
                ctx: &mut wasi.ctx,
                table: &mut wasi.table,
            },
            None => unreachable!("the extension was made a `ComponentWasi` just above"),
        }
    }
}

/// Which standard stream a [`GuestLog`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// Standard output or error of one instance: cut into lines, each written to the log as the
/// guest's own `log` import writes (target `weir::guest`, with operator and subtask), at most
/// [`MAX_LOG_LINES_PER_SECOND`].
#[derive(Clone)]
struct GuestLog {
    inner: Arc<Mutex<LineLog>>,
}

impl GuestLog {
    fn new(operator: &str, subtask: u32, stream: Stream) -> Self {
        Self {
            inner: Arc::new(Mutex::new(LineLog {
                operator: operator.into(),
                subtask,
                stream,
                partial: Vec::new(),
                window_start: Instant::now(),
                lines_in_window: 0,
                dropped: 0,
                reported_out_of_memory: false,
            })),
        }
    }

    fn write(&self, bytes: &[u8]) {
        self.lock().write(bytes);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, LineLog> {
        // A poisoned lock only means a log line was lost to a panic elsewhere.
        match self.inner.lock() {
            Ok(log) => log,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// The line buffer and rate limit behind a [`GuestLog`].
struct LineLog {
    operator: Box<str>,
    subtask: u32,
    stream: Stream,
    /// The unfinished last line, up to [`MAX_MESSAGE_BYTES`].
    partial: Vec<u8>,
    /// When the current one-second window began.
    window_start: Instant,
    /// Lines logged in the current window.
    lines_in_window: u32,
    /// Lines dropped since the last one logged.
    dropped: u64,
    /// Whether a line of standard error said [`OUT_OF_MEMORY`] (counted even when the line is
    /// not logged), until [`ComponentWasi::take_out_of_memory_report`] reads it.
    reported_out_of_memory: bool,
}

impl LineLog {
    fn write(&mut self, mut bytes: &[u8]) {
        while let Some(end) = bytes.iter().position(|&b| b == b'\n') {
            self.push(&bytes[..end]);
            let line = std::mem::take(&mut self.partial);
            self.emit(&line);
            bytes = &bytes[end + 1..];
        }
        self.push(bytes);
        if self.partial.len() >= MAX_MESSAGE_BYTES {
            let line = std::mem::take(&mut self.partial);
            self.emit(&line);
        }
    }

    /// Appends to the unfinished line, within [`MAX_MESSAGE_BYTES`].
    fn push(&mut self, bytes: &[u8]) {
        let room = MAX_MESSAGE_BYTES.saturating_sub(self.partial.len());
        self.partial
            .extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// Logs one line, or counts it when the window's lines are spent.
    fn emit(&mut self, line: &[u8]) {
        if self.stream == Stream::Stderr && contains_out_of_memory(line) {
            self.reported_out_of_memory = true;
        }
        if self.window_start.elapsed().as_secs() >= 1 {
            self.window_start = Instant::now();
            self.lines_in_window = 0;
        }
        if self.lines_in_window >= MAX_LOG_LINES_PER_SECOND {
            if self.dropped == 0 {
                // Said at once, so that a flood that ends within the second is not silent.
                tracing::warn!(
                    target: "weir::guest", operator = &*self.operator, subtask = self.subtask,
                    "the guest writes more than {MAX_LOG_LINES_PER_SECOND} lines a second: \
                     the rest of this second's are not logged"
                );
            }
            self.dropped += 1;
            return;
        }
        self.lines_in_window += 1;
        let text = String::from_utf8_lossy(line);
        let (operator, subtask) = (&*self.operator, self.subtask);
        let dropped = std::mem::take(&mut self.dropped);
        if dropped > 0 {
            tracing::warn!(
                target: "weir::guest", operator, subtask,
                "{dropped} lines of the guest's output were not logged: it wrote more than \
                 {MAX_LOG_LINES_PER_SECOND} a second"
            );
        }
        match self.stream {
            Stream::Stdout => tracing::info!(target: "weir::guest", operator, subtask, "{text}"),
            Stream::Stderr => tracing::warn!(target: "weir::guest", operator, subtask, "{text}"),
        }
    }
}

impl IsTerminal for GuestLog {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for GuestLog {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

/// What one write may carry: the guest writes in pieces of this size at most.
const WRITE_PERMIT: usize = 64 * 1024;

impl OutputStream for GuestLog {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        GuestLog::write(self, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(WRITE_PERMIT)
    }
}

impl Pollable for GuestLog {
    fn ready<'a, 'b>(&'a mut self) -> Pin<Box<dyn Future<Output = ()> + Send + 'b>>
    where
        'a: 'b,
    {
        // Always ready: writes go to the log at once.
        Box::pin(async {})
    }
}

impl tokio::io::AsyncWrite for GuestLog {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        GuestLog::write(&self, buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_wasi_0_2_version_of_an_allowed_interface_is_allowed_and_nothing_else() {
        assert!(allowed("wasi:io/streams", "0.2.0"));
        assert!(allowed("wasi:io/streams", "0.2.9"));
        assert!(!allowed("wasi:io/streams", "0.3.0"));
        assert!(!allowed("wasi:io/streams", "0.20.0"));
        assert!(!allowed("wasi:http/types", "0.2.0"));
        assert!(!allowed("wasi:cli/run", "0.2.0"));
    }

    #[test]
    fn lines_past_the_rate_are_counted_not_logged() {
        let log = GuestLog::new("op", 0, Stream::Stdout);
        let many = "x\n".repeat(MAX_LOG_LINES_PER_SECOND as usize + 5);
        log.write(many.as_bytes());
        let inner = log.inner.lock().unwrap();
        assert_eq!(inner.lines_in_window, MAX_LOG_LINES_PER_SECOND);
        assert_eq!(inner.dropped, 5);
    }

    #[test]
    fn a_line_is_cut_at_the_message_limit_and_kept_until_its_end() {
        let log = GuestLog::new("op", 0, Stream::Stderr);
        log.write(b"no newline yet");
        assert_eq!(log.inner.lock().unwrap().partial, b"no newline yet");
        log.write(b"\n");
        assert!(log.inner.lock().unwrap().partial.is_empty());
        log.write(&vec![b'y'; MAX_MESSAGE_BYTES * 2]);
        let inner = log.inner.lock().unwrap();
        assert!(inner.partial.is_empty());
        assert_eq!(inner.lines_in_window, 2);
    }
}
