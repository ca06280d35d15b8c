//! A small blocking client of the control endpoint, for the CLI verbs
//! (`weir status|savepoint|stop|cancel`) and the tests.
//!
//! It speaks HTTP/1.1 over one connection per request (the verbs make one or
//! two requests; keeping connections would buy nothing), on a current-thread
//! tokio runtime of its own, and turns answers into typed errors: a refused
//! connection, a missing or wrong token, a refused action, a failed one —
//! each carrying the endpoint's own message, which says what to do.
//!
//! Every request carries `X-Weir-Request: 1`, which the endpoint requires of
//! actions (see `guard.rs`), and names the endpoint's own
//! address as its `Host`.

use std::net::SocketAddr;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
/// The request method of [`ControlClient::request`].
pub use hyper::Method;
use hyper::body::Bytes;
use hyper::{Request, StatusCode};
use hyper_util::rt::TokioIo;

use crate::job::parse_address;

/// How long connecting may take: the endpoint is on this machine or near.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a `GET` may take.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a request to the endpoint did not give an answer the caller can use.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The address is not `http://host:port`.
    #[error("`{address}` is not a control endpoint address: {reason}")]
    BadAddress {
        /// The address as given.
        address: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Nothing answers there (the job ended, or this is another address).
    #[error("cannot connect to the control endpoint at {address}: {source}")]
    Connect {
        /// The endpoint.
        address: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The connection broke, or the answer was not HTTP.
    #[error("the control endpoint at {address} did not answer properly: {reason}")]
    Protocol {
        /// The endpoint.
        address: String,
        /// What went wrong.
        reason: String,
    },
    /// No answer in time.
    #[error("the control endpoint at {address} did not answer within {} s", after.as_secs())]
    Timeout {
        /// The endpoint.
        address: String,
        /// How long the client waited.
        after: Duration,
    },
    /// 401: the token is missing or wrong.
    #[error("{message}")]
    Unauthorized {
        /// The endpoint's explanation.
        message: String,
    },
    /// Another error answer (404, 409, 500, 503…).
    #[error("{message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The endpoint's explanation (its `error` field).
        message: String,
    },
}

impl ClientError {
    /// Whether nothing could be reached at all (connection refused, timed
    /// out connecting): the job is likely gone.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, ClientError::Connect { .. })
    }
}

/// An answer of the endpoint, whatever its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status code.
    pub status: u16,
    /// Its `Content-Type`, if any.
    pub content_type: Option<String>,
    /// Its `Allow` header, if any (405 answers).
    pub allow: Option<String>,
    /// The body as text.
    pub body: String,
}

/// A client of one endpoint.
#[derive(Debug)]
pub struct ControlClient {
    /// `http://host:port`, as given (without a trailing slash).
    base: String,
    address: SocketAddr,
    token: Option<String>,
    runtime: tokio::runtime::Runtime,
}

impl ControlClient {
    /// A client of the endpoint at `base` (`http://host:port`, host an IP
    /// address or `localhost`), sending `token` when given.
    pub fn new(base: &str, token: Option<String>) -> Result<ControlClient, ClientError> {
        let bad = |reason: &str| ClientError::BadAddress {
            address: base.to_string(),
            reason: reason.to_string(),
        };
        let rest = base.strip_prefix("http://").ok_or_else(|| {
            bad("it must start with http:// (the endpoint serves plain HTTP; put a TLS proxy in front for more)")
        })?;
        let host_port = rest.trim_end_matches('/');
        let address = parse_address(host_port).ok_or_else(|| {
            bad("expected http://HOST:PORT with an IP address or localhost as HOST")
        })?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|e| ClientError::Protocol {
                address: base.to_string(),
                reason: format!("cannot start an async runtime: {e}"),
            })?;
        Ok(ControlClient {
            base: format!("http://{host_port}"),
            address,
            token,
            runtime,
        })
    }

    /// The endpoint's address, `http://host:port`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends `method path` and returns the answer whatever its status;
    /// `timeout` bounds the whole exchange (`None`: the server bounds it).
    pub fn request(
        &self,
        method: Method,
        path: &str,
        timeout: Option<Duration>,
    ) -> Result<Answer, ClientError> {
        let exchange = self.exchange(method, path);
        self.runtime.block_on(async {
            match timeout {
                Some(after) => tokio::time::timeout(after, exchange).await.map_err(|_| {
                    ClientError::Timeout {
                        address: self.base.clone(),
                        after,
                    }
                })?,
                None => exchange.await,
            }
        })
    }

    /// `GET path`, its JSON answer; an error answer becomes a [`ClientError`].
    pub fn get_json(&self, path: &str) -> Result<serde_json::Value, ClientError> {
        let answer = self.request(Method::GET, path, Some(READ_TIMEOUT))?;
        self.json(answer)
    }

    /// `POST path`, its JSON answer; an error answer becomes a
    /// [`ClientError`]. No client-side time limit: the endpoint bounds how
    /// long it waits for a savepoint (the checkpoint timeout and a margin).
    pub fn post_json(&self, path: &str) -> Result<serde_json::Value, ClientError> {
        let answer = self.request(Method::POST, path, None)?;
        self.json(answer)
    }

    /// The JSON of a 2xx answer, or the error it carries.
    fn json(&self, answer: Answer) -> Result<serde_json::Value, ClientError> {
        let parsed: Option<serde_json::Value> = serde_json::from_str(&answer.body).ok();
        if (200..300).contains(&answer.status) {
            return parsed.ok_or_else(|| ClientError::Protocol {
                address: self.base.clone(),
                reason: format!("the answer is not JSON: {:.200}", answer.body),
            });
        }
        let message = parsed
            .as_ref()
            .and_then(|v| v["error"].as_str())
            .map(str::to_string)
            .unwrap_or_else(|| format!("HTTP {}: {:.200}", answer.status, answer.body));
        Err(if answer.status == StatusCode::UNAUTHORIZED.as_u16() {
            ClientError::Unauthorized { message }
        } else {
            ClientError::Status {
                status: answer.status,
                message,
            }
        })
    }

    async fn exchange(&self, method: Method, path: &str) -> Result<Answer, ClientError> {
        let protocol = |reason: String| ClientError::Protocol {
            address: self.base.clone(),
            reason,
        };
        let connect = tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::TcpStream::connect(self.address),
        )
        .await
        .unwrap_or_else(|_| {
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()),
            ))
        });
        let stream = connect.map_err(|source| ClientError::Connect {
            address: self.base.clone(),
            source,
        })?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| protocol(e.to_string()))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        let host = self.base.trim_start_matches("http://");
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, host);
        request = request.header(super::guard::REQUEST_HEADER, "1");
        if let Some(token) = &self.token {
            request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Empty::<Bytes>::new())
            .map_err(|e| protocol(format!("cannot build the request: {e}")))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| protocol(e.to_string()))?;
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v: &hyper::header::HeaderValue| v.to_str().ok())
                .map(str::to_string)
        };
        let content_type = header(hyper::header::CONTENT_TYPE);
        let allow = header(hyper::header::ALLOW);
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| protocol(e.to_string()))?
            .to_bytes();
        Ok(Answer {
            status,
            content_type,
            allow,
            body: String::from_utf8_lossy(&body).into_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_http_addresses_with_an_ip_or_localhost() {
        let client = ControlClient::new("http://127.0.0.1:8081/", None).unwrap();
        assert_eq!(client.base(), "http://127.0.0.1:8081");
        assert!(ControlClient::new("http://localhost:9", None).is_ok());
        for bad in [
            "127.0.0.1:80",
            "https://127.0.0.1:80",
            "http://example.com:80",
            "http://1.2.3.4",
        ] {
            let error = ControlClient::new(bad, None).unwrap_err();
            assert!(
                matches!(error, ClientError::BadAddress { .. }),
                "{bad}: {error}"
            );
        }
    }

    #[test]
    fn a_closed_port_is_unreachable() {
        // Port 1 (tcpmux) has no listener here, and the system never hands it out for port 0:
        // unlike a port just freed, no other test's server can take it meanwhile.
        let port = 1;
        let client = ControlClient::new(&format!("http://127.0.0.1:{port}"), None).unwrap();
        let error = client.get_json("/api/job").unwrap_err();
        assert!(error.is_unreachable(), "{error}");
        assert!(
            error.to_string().starts_with(&format!(
                "cannot connect to the control endpoint at http://127.0.0.1:{port}"
            )),
            "{error}"
        );
    }
}
