//! Just enough HTTP/1.1, by hand on `std::net`, for the S3 server's readiness check and bucket
//! creation ([`request`]) and for the fault proxy (reading a message's head and body, with
//! `Content-Length`, `Transfer-Encoding: chunked` or, for a response, the connection's end).
//!
//! This crate talks only to test servers on loopback and to the test's own client, so it needs
//! no HTTP library: messages are small, and a body is read whole into memory.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// The longest message head (start line and headers) read; a longer one is refused.
const MAX_HEAD: u64 = 64 * 1024;

/// A message's start line (request line or status line) and headers, in their order.
pub(crate) struct Head {
    /// `PUT /bucket/key?x=1 HTTP/1.1` or `HTTP/1.1 200 OK`, without the line end.
    pub(crate) start: String,
    /// Names as sent (compare them ignoring case), values trimmed.
    pub(crate) headers: Vec<(String, String)>,
}

/// How a message's body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body.
    None,
    /// `Content-Length` bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Everything until the connection's end (a response only).
    UntilClose,
}

impl Head {
    /// The first value of header `name`.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether a header `name` lists `token` (`Connection: close`, `Transfer-Encoding: chunked`).
    pub(crate) fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// A request's body framing, or why it cannot be read.
    pub(crate) fn request_framing(&self) -> Result<Framing, String> {
        if self.has_token("transfer-encoding", "chunked") {
            return Ok(Framing::Chunked);
        }
        match self.header("content-length") {
            None => Ok(Framing::None),
            Some(n) => n
                .parse()
                .map(Framing::Length)
                .map_err(|_| format!("a Content-Length that is no number: {n:?}")),
        }
    }

    /// A response's body framing, for a request with `method` and a response with `status`.
    pub(crate) fn response_framing(&self, method: &str, status: u16) -> Framing {
        if method.eq_ignore_ascii_case("HEAD") || status < 200 || status == 204 || status == 304 {
            return Framing::None;
        }
        if self.has_token("transfer-encoding", "chunked") {
            return Framing::Chunked;
        }
        match self.header("content-length").map(str::parse) {
            Some(Ok(n)) => Framing::Length(n),
            _ => Framing::UntilClose,
        }
    }

    /// A status line's code.
    pub(crate) fn status(&self) -> Result<u16, String> {
        self.start
            .split_whitespace()
            .nth(1)
            .and_then(|code| code.parse().ok())
            .ok_or_else(|| format!("not an HTTP status line: {:?}", self.start))
    }

    /// Writes `start` (in place of this head's start line), the headers but those named in
    /// `skip`, then `extra`, and the empty line.
    pub(crate) fn write_to(
        &self,
        out: &mut impl Write,
        start: &str,
        skip: &[&str],
        extra: &[(&str, String)],
    ) -> io::Result<()> {
        write!(out, "{start}\r\n")?;
        for (name, value) in &self.headers {
            if !skip.iter().any(|s| s.eq_ignore_ascii_case(name)) {
                write!(out, "{name}: {value}\r\n")?;
            }
        }
        for (name, value) in extra {
            write!(out, "{name}: {value}\r\n")?;
        }
        out.write_all(b"\r\n")
    }
}

/// Reads a message head; `None` when the connection ends before its first byte.
pub(crate) fn read_head(reader: &mut impl BufRead) -> io::Result<Option<Head>> {
    let mut limited = reader.take(MAX_HEAD);
    let mut lines = Vec::new();
    loop {
        let mut line = Vec::new();
        if limited.read_until(b'\n', &mut line)? == 0 {
            if lines.is_empty() {
                return Ok(None);
            }
            return Err(invalid("the connection ended inside a message head"));
        }
        if !line.ends_with(b"\n") {
            return Err(invalid("a message head longer than 64 KiB"));
        }
        let line = String::from_utf8(line)
            .map_err(|_| invalid("a message head that is not UTF-8"))?
            .trim_end_matches(['\r', '\n'])
            .to_string();
        if line.is_empty() {
            // Blank lines before a start line are tolerated (RFC 9112 §2.2).
            if lines.is_empty() {
                continue;
            }
            break;
        }
        lines.push(line);
    }
    let start = lines.remove(0);
    let mut headers = Vec::with_capacity(lines.len());
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| invalid("a header line without a colon"))?;
        headers.push((name.trim().to_string(), value.trim().to_string()));
    }
    Ok(Some(Head { start, headers }))
}

/// Reads a whole body framed by `framing` (decoding chunks).
pub(crate) fn read_body(reader: &mut impl BufRead, framing: Framing) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    match framing {
        Framing::None => {}
        Framing::Length(n) => {
            (&mut *reader).take(n).read_to_end(&mut body)?;
            if u64::try_from(body.len()).unwrap_or(u64::MAX) != n {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the connection ended after {} of {n} body bytes",
                        body.len()
                    ),
                ));
            }
        }
        Framing::Chunked => loop {
            let size = read_chunk_size(reader)?;
            if size == 0 {
                // Trailers, up to the empty line.
                while read_line(reader)?.is_some_and(|line| !line.is_empty()) {}
                break;
            }
            let before = body.len();
            (&mut *reader).take(size).read_to_end(&mut body)?;
            if u64::try_from(body.len() - before).unwrap_or(u64::MAX) != size {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the connection ended inside a chunk",
                ));
            }
            read_line(reader)?;
        },
        Framing::UntilClose => {
            reader.read_to_end(&mut body)?;
        }
    }
    Ok(body)
}

/// Reads about half of a body framed by `framing` (of a chunked body, half its first chunk)
/// and returns how many bytes it read.
pub(crate) fn read_half_body(reader: &mut impl BufRead, framing: Framing) -> io::Result<u64> {
    let half = match framing {
        Framing::None => 0,
        Framing::Length(n) => n / 2,
        Framing::Chunked => read_chunk_size(reader)? / 2,
        Framing::UntilClose => 0,
    };
    io::copy(&mut (&mut *reader).take(half), &mut io::sink())
}

/// A chunk's size line (extensions after `;` ignored).
fn read_chunk_size(reader: &mut impl BufRead) -> io::Result<u64> {
    let line = read_line(reader)?.ok_or_else(|| invalid("the connection ended before a chunk"))?;
    let size = line.split(';').next().unwrap_or("").trim();
    u64::from_str_radix(size, 16).map_err(|_| invalid("a chunk size that is no hex number"))
}

/// One line without its end; `None` at the connection's end.
fn read_line(reader: &mut impl BufRead) -> io::Result<Option<String>> {
    let mut line = Vec::new();
    if (&mut *reader).take(MAX_HEAD).read_until(b'\n', &mut line)? == 0 {
        return Ok(None);
    }
    let line = String::from_utf8(line).map_err(|_| invalid("a line that is not UTF-8"))?;
    Ok(Some(line.trim_end_matches(['\r', '\n']).to_string()))
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// Sends `method path` with no body to `address` on a connection of its own, every step bounded
/// by `timeout`, and returns the status and the body of the answer; or what went wrong.
pub(crate) fn request(
    address: SocketAddr,
    method: &str,
    path: &str,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), String> {
    let failed = |e: io::Error| format!("{method} http://{address}{path}: {e}");
    let mut stream = TcpStream::connect_timeout(&address, timeout).map_err(failed)?;
    stream.set_read_timeout(Some(timeout)).map_err(failed)?;
    stream.set_write_timeout(Some(timeout)).map_err(failed)?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: 0\r\n\
         Connection: close\r\n\r\n"
    )
    .map_err(failed)?;
    let mut reader = BufReader::new(stream);
    let head = read_head(&mut reader)
        .map_err(failed)?
        .ok_or_else(|| format!("{method} http://{address}{path}: no answer"))?;
    let status = head.status()?;
    let body = read_body(&mut reader, head.response_framing(method, status)).map_err(failed)?;
    Ok((status, body))
}
