//! One HTTP/1.1 exchange with `weir`'s control server written by hand, the way `curl` or a
//! hostile page sends it: exactly the headers a test gives (a `Host` included, or none), so that
//! what the server refuses — no token, a foreign `Host` or `Origin`, a simple POST — can be
//! sent at all, which no HTTP client allows.
//!
//! The control server's own unit tests (`host/src/control/server.rs`) include this file by path,
//! as the end-to-end tests do through `support`: one parser of raw answers for both. So it names
//! nothing but `std` and `serde_json`, which both crates have.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

/// The longest the server may take to answer one raw request before the test fails.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// An answer to [`raw_exchange`]: the status, the head (status line and headers) and the body.
pub(crate) struct RawAnswer {
    /// The status code.
    pub(crate) status: u16,
    /// The status line and the headers, as sent.
    pub(crate) head: String,
    /// The body, read to the connection's end.
    pub(crate) body: String,
}

impl RawAnswer {
    /// The value of header `name` (case-insensitive), if sent.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim()
                .eq_ignore_ascii_case(name)
                .then_some(value.trim())
        })
    }

    /// The `error` of a JSON error answer, or the whole body when it is not one.
    pub(crate) fn error(&self) -> String {
        serde_json::from_str::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| format!("(not a JSON error) {}", self.body))
    }
}

/// Sends `method path` to the server at `url` (`http://HOST:PORT`) with exactly `headers`, then
/// `body` (its `Content-Length` added) and `Connection: close`, and reads the answer to its end.
/// Fails the test if the server cannot be reached or does not answer within a minute.
pub(crate) fn raw_exchange(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> RawAnswer {
    let host_port = url.strip_prefix("http://").expect("http://HOST:PORT");
    let mut stream = TcpStream::connect(host_port)
        .unwrap_or_else(|e| panic!("cannot connect to {host_port}: {e}"));
    stream.set_read_timeout(Some(ANSWER_TIMEOUT)).unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\n");
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    RawAnswer {
        status,
        head: head.to_string(),
        body: body.to_string(),
    }
}
