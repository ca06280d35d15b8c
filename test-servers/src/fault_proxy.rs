//! A fault-injecting HTTP/1.1 proxy, to put between a client under test and a test server
//! (the S3 server, [`crate::s3`]): it forwards every request unchanged, except those a rule
//! given at run time picks, which it answers with an error status, delays, cuts off mid-body,
//! drops, or forwards without relaying the answer. It records every request, so a test can assert what the client sent and what it
//! was answered ([`FaultProxy::requests`]).
//!
//! ```ignore
//! let proxy = FaultProxy::start(s3.address())?;
//! proxy.add(Fault::new(Action::Status(503)).method("PUT").times(2));
//! // ... point the client at proxy.endpoint(): its next two PUTs are answered 503 SlowDown ...
//! ```
//!
//! **What it does.** It listens on a free port of 127.0.0.1, a thread per client connection,
//! and keeps client connections alive across requests (unless the client sends
//! `Connection: close`). For each request it reads the head and the whole body
//! (`Content-Length` or `Transfer-Encoding: chunked`), answers `Expect: 100-continue` itself,
//! then takes the first rule that matches and has hits left (one hit used):
//!
//! - no rule: the request goes to the upstream on a new connection (`Connection: close`), its
//!   head unchanged but for the hop-by-hop headers (`Connection`, `Keep-Alive`, `Expect`,
//!   `Transfer-Encoding`) and its body re-framed with `Content-Length`; the upstream's answer,
//!   read whole, goes back with the same status, headers and body (re-framed the same way). The
//!   `Host` header is passed on as the client sent it (the proxy's address): a signing
//!   client's signature stays valid, and moto does not check it anyway;
//! - [`Action::Status`]: answered with that status and a small S3-style XML error
//!   (`<Error><Code>SlowDown</Code>…` for 503) without reaching the upstream;
//! - [`Action::Delay`]: held that long (with its body read), then forwarded as above;
//! - [`Action::CutBody`]: half its body read (half of a chunked body's first chunk), then the
//!   connection closed without an answer — an upload that failed mid-way, before the upstream
//!   saw anything;
//! - [`Action::Drop`]: the connection closed as soon as the head is read;
//! - [`Action::LoseAnswer`]: forwarded as above, then the connection closed without relaying
//!   the upstream's answer — a request that took effect, whose answer was lost.
//!
//! If the upstream cannot be reached or breaks off, the client is answered 502 with the
//! reason, and the request recorded with it ([`Seen::error`]).
//!
//! **What it does not do.** No TLS, no `CONNECT`, no HTTP/2, no pipelining (a request is read
//! only after the previous answer is written), no streaming: bodies are held in memory, so the
//! client sees the first byte of an answer only when the upstream has sent the last. An answer
//! is relayed whole or not at all ([`Action::LoseAnswer`]): one cut mid-way is not simulated,
//! nor a slow upstream (a delay is the proxy's, before forwarding). Requests are recorded when
//! they are answered (or closed), before the client sees the answer. The proxy runs in the
//! test's own process: dropping it stops it, closing every client connection; it needs no
//! watchdog.

use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter, Write as _};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::http::{self, Framing, Head};

/// How long a client connection may stay idle, between or inside requests, before the proxy
/// closes it (longer than reqwest's 90 s pool idle timeout: the client closes first).
const CLIENT_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest a connection to the upstream, and each read and write on it, may take.
const UPSTREAM_TIMEOUT: Duration = Duration::from_secs(60);
/// Headers of one connection, which the proxy sets itself on each side.
const HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "expect",
    "transfer-encoding",
    "te",
];

/// What a rule does to the requests it matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Answer this status with a small S3-style XML error body (`SlowDown` for 503,
    /// `InternalError` for 500, ...) without forwarding the request.
    Status(u16),
    /// Wait this long (the request read whole), then forward the request.
    Delay(Duration),
    /// Read half the request's body, then close the connection without answering: an upload
    /// that failed mid-way. The upstream sees nothing.
    CutBody,
    /// Close the connection as soon as the request's head is read, without answering.
    Drop,
    /// Forward the request (read whole) and read the upstream's answer, then close the
    /// connection without relaying it: a request that took effect, whose answer was lost on
    /// the way back.
    LoseAnswer,
}

/// A rule: which requests it matches, what it does to them, and how many more times.
/// Every condition given must hold; none given matches every request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The request's method (`"PUT"`), compared ignoring case.
    pub method: Option<String>,
    /// A part of the request's path, before any `?` (`"/_metadata"`), as the client sent it
    /// (percent-encoded).
    pub path_contains: Option<String>,
    /// A part of the request's query, after the `?` (`"uploadId="`, `"uploads"`).
    pub query_contains: Option<String>,
    /// What it does.
    pub action: Action,
    /// How many more requests it applies to; it is removed at 0. [`Fault::FOREVER`] never
    /// runs out.
    pub times: u32,
}

impl Fault {
    /// The [`Fault::times`] of a rule that never runs out.
    pub const FOREVER: u32 = u32::MAX;

    /// A rule doing `action` to the next request, whatever it is (narrowed by the methods
    /// below).
    pub fn new(action: Action) -> Fault {
        Fault {
            method: None,
            path_contains: None,
            query_contains: None,
            action,
            times: 1,
        }
    }

    /// Only requests with this method.
    pub fn method(mut self, method: &str) -> Fault {
        self.method = Some(method.to_string());
        self
    }

    /// Only requests whose path contains `part`.
    pub fn path_contains(mut self, part: &str) -> Fault {
        self.path_contains = Some(part.to_string());
        self
    }

    /// Only requests whose query contains `part`.
    pub fn query_contains(mut self, part: &str) -> Fault {
        self.query_contains = Some(part.to_string());
        self
    }

    /// For the next `times` matching requests ([`Fault::FOREVER`]: all).
    pub fn times(mut self, times: u32) -> Fault {
        self.times = times;
        self
    }

    /// Whether this rule applies to a request.
    fn matches(&self, method: &str, path: &str, query: &str) -> bool {
        self.times > 0
            && self
                .method
                .as_ref()
                .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self
                .path_contains
                .as_ref()
                .is_none_or(|part| path.contains(part.as_str()))
            && self
                .query_contains
                .as_ref()
                .is_none_or(|part| query.contains(part.as_str()))
    }
}

/// A request the proxy received, and what became of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Its method.
    pub method: String,
    /// Its path with its query, as the client sent it (`/bucket/key?partNumber=1&uploadId=…`).
    pub target: String,
    /// The action of the rule that matched it; `None` when it was forwarded as it came.
    pub fault: Option<Action>,
    /// The status the client was answered (the upstream's, or the rule's); `None` when the
    /// connection was closed without an answer.
    pub status: Option<u16>,
    /// The status the upstream answered; `None` when the request did not reach it. The same
    /// as [`Seen::status`] but for [`Action::LoseAnswer`] (the upstream answered, the client
    /// got nothing) and an upstream that broke off (the client got 502).
    pub upstream_status: Option<u16>,
    /// How many bytes of its body the proxy read from the client.
    pub body_bytes: u64,
    /// What went wrong on the way, if anything: the client broke off inside the request, or
    /// the upstream could not be reached or broke off (the client answered 502).
    pub error: Option<String>,
    /// The client connection it came on, numbered from 0 in the order the proxy accepted them:
    /// requests with the same number came on one kept-alive connection.
    pub connection: u64,
}

impl Seen {
    /// Its path, without the query.
    pub fn path(&self) -> &str {
        self.target.split_once('?').map_or(&self.target, |(p, _)| p)
    }

    /// Its query (after the `?`; empty when none).
    pub fn query(&self) -> &str {
        self.target.split_once('?').map_or("", |(_, q)| q)
    }
}

/// A running proxy; dropping it stops it (its listener and every client connection closed).
pub struct FaultProxy {
    /// Where clients connect.
    address: SocketAddr,
    /// What the connection threads share.
    shared: Arc<Shared>,
    /// The thread accepting connections, ended on drop.
    acceptor: Option<JoinHandle<()>>,
}

/// The state the proxy's threads share.
struct Shared {
    /// Where requests are forwarded.
    upstream: SocketAddr,
    /// The rules, in the order they were added; a rule is removed when it runs out.
    rules: Mutex<Vec<Fault>>,
    /// Every request, in the order they were answered.
    seen: Mutex<Vec<Seen>>,
    /// Set on drop: the acceptor stops taking connections.
    stopping: AtomicBool,
    /// The open client connections (clones), shut down on drop, by a number of their own.
    open: Mutex<HashMap<u64, TcpStream>>,
    /// The next connection's number.
    next: AtomicU64,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` on a free port of 127.0.0.1, with no rules; or why it
    /// could not.
    pub fn start(upstream: SocketAddr) -> Result<FaultProxy, String> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| format!("cannot listen on 127.0.0.1 for the fault proxy: {e}"))?;
        let address = listener
            .local_addr()
            .map_err(|e| format!("the fault proxy's listener has no address: {e}"))?;
        let shared = Arc::new(Shared {
            upstream,
            rules: Mutex::new(Vec::new()),
            seen: Mutex::new(Vec::new()),
            stopping: AtomicBool::new(false),
            open: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
        });
        let acceptor = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name(format!("fault-proxy-{}", address.port()))
                .spawn(move || accept(&listener, &shared))
                .map_err(|e| format!("cannot start the fault proxy's thread: {e}"))?
        };
        Ok(FaultProxy {
            address,
            shared,
            acceptor: Some(acceptor),
        })
    }

    /// `http://127.0.0.1:PORT`, for a client's endpoint (`AWS_ENDPOINT_URL`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Where it forwards requests.
    pub fn upstream(&self) -> SocketAddr {
        self.shared.upstream
    }

    /// Adds a rule after those already there.
    pub fn add(&self, fault: Fault) {
        lock(&self.shared.rules).push(fault);
    }

    /// Removes every rule left: from now on, every request is forwarded.
    pub fn clear(&self) {
        lock(&self.shared.rules).clear();
    }

    /// The rules not yet used up, with their hits left.
    pub fn remaining(&self) -> Vec<Fault> {
        lock(&self.shared.rules).clone()
    }

    /// Every request so far, in the order they were answered or closed.
    pub fn requests(&self) -> Vec<Seen> {
        lock(&self.shared.seen).clone()
    }

    /// Forgets the requests so far ([`FaultProxy::requests`] starts again empty).
    pub fn clear_requests(&self) {
        lock(&self.shared.seen).clear();
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the acceptor, which then sees `stopping`.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_secs(1));
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        for (_, stream) in lock(&self.shared.open).drain() {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// A lock that a panicking connection thread did not spoil (what it guards stays whole).
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes connections until the proxy is dropped, a thread each.
fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(stream) = stream else { continue };
        let id = shared.next.fetch_add(1, Ordering::SeqCst);
        if let Ok(clone) = stream.try_clone() {
            lock(&shared.open).insert(id, clone);
        }
        let mine = Arc::clone(shared);
        let spawned = thread::Builder::new()
            .name(format!("fault-proxy-conn-{id}"))
            .spawn(move || {
                serve(&mine, stream, id);
                lock(&mine.open).remove(&id);
            });
        if spawned.is_err() {
            // No thread, no service: the connection closes with the closure that held it, and
            // with its clone here.
            lock(&shared.open).remove(&id);
        }
    }
}

/// Serves one client connection, request after request, until either side closes it.
fn serve(shared: &Shared, client: TcpStream, connection: u64) {
    let _ = client.set_read_timeout(Some(CLIENT_IDLE_TIMEOUT));
    let _ = client.set_write_timeout(Some(CLIENT_IDLE_TIMEOUT));
    let _ = client.set_nodelay(true);
    let Ok(reader) = client.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(reader);
    let mut writer = client;
    loop {
        let head = match http::read_head(&mut reader) {
            Ok(Some(head)) => head,
            Ok(None) | Err(_) => return,
        };
        match serve_one(shared, connection, &head, &mut reader, &mut writer) {
            Ok(true) => {}
            Ok(false) | Err(_) => {
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

/// Serves one request whose head is read: applies the first matching rule or forwards it, and
/// records it. Whether the connection stays open for another.
fn serve_one(
    shared: &Shared,
    connection: u64,
    head: &Head,
    reader: &mut BufReader<TcpStream>,
    writer: &mut TcpStream,
) -> io::Result<bool> {
    let mut parts = head.start.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        write_error(
            writer,
            "GET",
            400,
            "the request line is not METHOD TARGET VERSION",
            false,
        )?;
        return Ok(false);
    };
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let keep_alive = if version.eq_ignore_ascii_case("HTTP/1.0") {
        head.has_token("connection", "keep-alive")
    } else {
        !head.has_token("connection", "close")
    };
    let mut seen = Seen {
        method: method.to_string(),
        target: target.to_string(),
        fault: None,
        status: None,
        upstream_status: None,
        body_bytes: 0,
        error: None,
        connection,
    };
    let fault = take_fault(shared, method, path, query);
    seen.fault.clone_from(&fault);
    let framing = match head.request_framing() {
        Ok(framing) => framing,
        Err(e) => {
            seen.status = Some(400);
            seen.error = Some(e.clone());
            record(shared, seen);
            write_error(writer, method, 400, &e, false)?;
            return Ok(false);
        }
    };
    if fault == Some(Action::Drop) {
        record(shared, seen);
        return Ok(false);
    }
    if head.has_token("expect", "100-continue") {
        writer.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
    }
    if fault == Some(Action::CutBody) {
        seen.body_bytes = http::read_half_body(reader, framing).unwrap_or(0);
        record(shared, seen);
        return Ok(false);
    }
    let body = match http::read_body(reader, framing) {
        Ok(body) => body,
        Err(e) => {
            seen.error = Some(format!("the client broke off inside the request: {e}"));
            record(shared, seen);
            return Ok(false);
        }
    };
    seen.body_bytes = u64::try_from(body.len()).unwrap_or(u64::MAX);
    match fault {
        Some(Action::Status(status)) => {
            seen.status = Some(status);
            record(shared, seen);
            write_error(
                writer,
                method,
                status,
                "injected by the fault proxy",
                keep_alive,
            )?;
            return Ok(keep_alive);
        }
        Some(Action::Delay(delay)) => thread::sleep(delay),
        Some(Action::CutBody | Action::Drop | Action::LoseAnswer) | None => {}
    }
    match forward(shared.upstream, head, method, framing, &body) {
        Ok((_, status, _, _)) if fault == Some(Action::LoseAnswer) => {
            seen.upstream_status = Some(status);
            record(shared, seen);
            return Ok(false);
        }
        Ok((response, status, response_framing, response_body)) => {
            seen.status = Some(status);
            seen.upstream_status = Some(status);
            record(shared, seen);
            let reason = response.start.splitn(3, ' ').nth(2).unwrap_or("");
            let mut extra = vec![("Connection", connection_header(keep_alive))];
            let mut skip = HOP_BY_HOP.to_vec();
            if response_framing != Framing::None {
                // Re-framed with the length of the body read (a HEAD's Content-Length, the
                // object's, is passed on as it came).
                skip.push("content-length");
                extra.push(("Content-Length", response_body.len().to_string()));
            }
            let mut out = BufWriter::new(&mut *writer);
            response.write_to(
                &mut out,
                &format!("HTTP/1.1 {status} {reason}"),
                &skip,
                &extra,
            )?;
            out.write_all(&response_body)?;
            out.flush()?;
        }
        Err(e) => {
            seen.status = Some(502);
            seen.error = Some(e.clone());
            record(shared, seen);
            write_error(writer, method, 502, &e, keep_alive)?;
        }
    }
    Ok(keep_alive)
}

/// The first rule that matches, one of its hits used (removed when none are left).
fn take_fault(shared: &Shared, method: &str, path: &str, query: &str) -> Option<Action> {
    let mut rules = lock(&shared.rules);
    let index = rules
        .iter()
        .position(|rule| rule.matches(method, path, query))?;
    let rule = &mut rules[index];
    let action = rule.action.clone();
    if rule.times != Fault::FOREVER {
        rule.times -= 1;
        if rule.times == 0 {
            rules.remove(index);
        }
    }
    Some(action)
}

fn record(shared: &Shared, seen: Seen) {
    lock(&shared.seen).push(seen);
}

fn connection_header(keep_alive: bool) -> String {
    if keep_alive { "keep-alive" } else { "close" }.to_string()
}

/// Sends the request to `upstream` on a new connection and reads the whole answer (past any
/// 1xx): its head, status, framing and body.
fn forward(
    upstream: SocketAddr,
    head: &Head,
    method: &str,
    framing: Framing,
    body: &[u8],
) -> Result<(Head, u16, Framing, Vec<u8>), String> {
    let failed = |e: io::Error| format!("the upstream {upstream}: {e}");
    let stream = TcpStream::connect_timeout(&upstream, UPSTREAM_TIMEOUT).map_err(failed)?;
    stream
        .set_read_timeout(Some(UPSTREAM_TIMEOUT))
        .map_err(failed)?;
    stream
        .set_write_timeout(Some(UPSTREAM_TIMEOUT))
        .map_err(failed)?;
    let mut skip = HOP_BY_HOP.to_vec();
    skip.push("content-length");
    let mut extra = vec![("Connection", "close".to_string())];
    if framing != Framing::None || !body.is_empty() {
        extra.push(("Content-Length", body.len().to_string()));
    }
    let mut out = BufWriter::new(&stream);
    head.write_to(&mut out, &head.start, &skip, &extra)
        .and_then(|()| out.write_all(body))
        .and_then(|()| out.flush())
        .map_err(failed)?;
    drop(out);
    let mut reader = BufReader::new(&stream);
    loop {
        let response = http::read_head(&mut reader)
            .map_err(failed)?
            .ok_or_else(|| format!("the upstream {upstream} closed the connection unanswered"))?;
        let status = response.status()?;
        if status < 200 {
            // An interim answer (100 Continue): the final one follows.
            continue;
        }
        let framing = response.response_framing(method, status);
        let body = http::read_body(&mut reader, framing).map_err(failed)?;
        return Ok((response, status, framing, body));
    }
}

/// Answers `status` with an S3-style XML error whose message is `message` (no body to a HEAD).
fn write_error(
    writer: &mut TcpStream,
    method: &str,
    status: u16,
    message: &str,
    keep_alive: bool,
) -> io::Result<()> {
    let (reason, code) = match status {
        400 => ("Bad Request", "BadRequest"),
        403 => ("Forbidden", "AccessDenied"),
        404 => ("Not Found", "NoSuchKey"),
        408 => ("Request Timeout", "RequestTimeout"),
        409 => ("Conflict", "OperationAborted"),
        412 => ("Precondition Failed", "PreconditionFailed"),
        429 => ("Too Many Requests", "SlowDown"),
        500 => ("Internal Server Error", "InternalError"),
        502 => ("Bad Gateway", "BadGateway"),
        503 => ("Service Unavailable", "SlowDown"),
        504 => ("Gateway Timeout", "GatewayTimeout"),
        _ => ("Injected Fault", "InjectedFault"),
    };
    let message = message
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code>\
         <Message>{message}</Message><RequestId>weir-fault-proxy</RequestId></Error>"
    );
    let body = if method.eq_ignore_ascii_case("HEAD") {
        ""
    } else {
        body.as_str()
    };
    let mut out = BufWriter::new(writer);
    write!(
        out,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/xml\r\nContent-Length: {}\r\n\
         Connection: {}\r\n\r\n{body}",
        body.len(),
        connection_header(keep_alive)
    )?;
    out.flush()
}

#[cfg(test)]
mod tests {
    //! The proxy against an upstream of the test's own: what the S3 tests
    //! (`tests/all/object_storage/s3_server.rs`) cannot show with object_store, which sends no
    //! chunked body, no HEAD that it checks byte for byte, and no second request on a connection it
    //! chose.

    use std::io::{BufReader, Read as _, Write as _};
    use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
    use std::thread;

    use super::{Action, Fault, FaultProxy};
    use crate::http::{self, Framing};

    /// An upstream that answers each request, one per connection, with
    /// `METHOD TARGET BODY` (no length, ended by the connection's end, when the path has
    /// `until-close`), and a HEAD with `Content-Length: 42` and nothing.
    fn echo_upstream() -> SocketAddr {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let address = listener.local_addr().unwrap();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let mut stream = stream.unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let head = http::read_head(&mut reader).unwrap().unwrap();
                let body = http::read_body(&mut reader, head.request_framing().unwrap()).unwrap();
                let mut parts = head.start.split(' ');
                let (method, target) = (parts.next().unwrap(), parts.next().unwrap());
                let mut echo = format!("{method} {target} ").into_bytes();
                echo.extend_from_slice(&body);
                let answer = if method == "HEAD" {
                    "HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n".to_string()
                } else if target.contains("until-close") {
                    "HTTP/1.0 200 OK\r\n\r\n".to_string()
                } else {
                    format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", echo.len())
                };
                stream.write_all(answer.as_bytes()).unwrap();
                if method != "HEAD" {
                    stream.write_all(&echo).unwrap();
                }
            }
        });
        address
    }

    /// Sends `request` on `stream` and reads one answer: its status, headers and body.
    fn exchange(
        stream: &mut BufReader<TcpStream>,
        method: &str,
        request: &[u8],
    ) -> (u16, http::Head, Vec<u8>) {
        stream.get_mut().write_all(request).unwrap();
        let head = http::read_head(stream).unwrap().expect("an answer");
        let status = head.status().unwrap();
        let framing = head.response_framing(method, status);
        assert_ne!(framing, Framing::UntilClose, "the proxy sent no length");
        let body = http::read_body(stream, framing).unwrap();
        (status, head, body)
    }

    fn connect(proxy: &FaultProxy) -> BufReader<TcpStream> {
        BufReader::new(TcpStream::connect(proxy.address()).unwrap())
    }

    #[test]
    fn forwards_a_chunked_body_and_keeps_the_client_connection_alive() {
        let proxy = FaultProxy::start(echo_upstream()).unwrap();
        let mut client = connect(&proxy);
        let (status, _, body) = exchange(
            &mut client,
            "PUT",
            b"PUT /b/k?x=1 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: t\r\n\r\n",
        );
        assert_eq!(
            (status, body.as_slice()),
            (200, &b"PUT /b/k?x=1 hello world"[..])
        );
        // The same connection: an upstream answer without a length comes re-framed.
        let (status, head, body) = exchange(
            &mut client,
            "GET",
            b"GET /until-close HTTP/1.1\r\nHost: h\r\n\r\n",
        );
        assert_eq!((status, body.as_slice()), (200, &b"GET /until-close "[..]));
        assert_eq!(head.header("connection"), Some("keep-alive"));
        // A HEAD's length is the object's, passed on, with no body.
        let (status, head, body) = exchange(
            &mut client,
            "HEAD",
            b"HEAD /b/k HTTP/1.1\r\nHost: h\r\n\r\n",
        );
        assert_eq!((status, head.header("content-length")), (200, Some("42")));
        assert!(body.is_empty());

        let seen = proxy.requests();
        assert_eq!(seen.len(), 3);
        assert!(seen.iter().all(|s| s.connection == seen[0].connection));
        assert_eq!((seen[0].path(), seen[0].query()), ("/b/k", "x=1"));
        assert_eq!(seen[0].body_bytes, 11);
    }

    #[test]
    fn status_rule_answers_without_the_upstream_until_it_runs_out() {
        let proxy = FaultProxy::start(echo_upstream()).unwrap();
        proxy.add(
            Fault::new(Action::Status(503))
                .query_contains("uploads")
                .times(2),
        );
        let mut client = connect(&proxy);
        let request = b"POST /b/k?uploads HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
        for _ in 0..2 {
            let (status, _, body) = exchange(&mut client, "POST", request);
            assert_eq!(status, 503);
            let body = String::from_utf8(body).unwrap();
            assert!(body.contains("<Code>SlowDown</Code>"), "{body}");
        }
        assert!(proxy.remaining().is_empty());
        let (status, _, body) = exchange(&mut client, "POST", request);
        assert_eq!(
            (status, body.as_slice()),
            (200, &b"POST /b/k?uploads abc"[..])
        );
        let statuses: Vec<_> = proxy.requests().iter().map(|s| s.upstream_status).collect();
        assert_eq!(statuses, [None, None, Some(200)]);
    }

    #[test]
    fn drop_and_cut_body_close_the_connection_unanswered() {
        let proxy = FaultProxy::start(echo_upstream()).unwrap();
        for action in [Action::Drop, Action::CutBody] {
            proxy.add(Fault::new(action).method("put"));
            let mut client = connect(&proxy);
            client
                .get_mut()
                .write_all(b"PUT /k HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789")
                .unwrap();
            let mut rest = Vec::new();
            // The end of the connection, or a reset: no answer either way.
            let _ = client.read_to_end(&mut rest);
            assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
        }
        let seen = proxy.requests();
        assert_eq!(
            seen.iter().map(|s| s.body_bytes).collect::<Vec<_>>(),
            [0, 5]
        );
        assert!(seen.iter().all(|s| s.status.is_none()));
    }

    #[test]
    fn answers_502_when_the_upstream_is_gone() {
        let gone = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .unwrap()
            .local_addr()
            .unwrap();
        let proxy = FaultProxy::start(gone).unwrap();
        let mut client = connect(&proxy);
        let (status, _, _) = exchange(&mut client, "GET", b"GET / HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(status, 502);
        let seen = proxy.requests();
        assert!(
            seen[0]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("upstream")),
            "{seen:?}"
        );
        assert_eq!(seen[0].upstream_status, None);
    }
}
