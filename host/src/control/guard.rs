//! The checks a request passes before its credentials are looked at: the
//! `Host` it names, the `Origin` it comes from, and, for a request that
//! changes something, a header no cross-site form or simple `fetch` can send.
//!
//! Why it exists: the token keeps out a client that does not have it, but a
//! browser on this machine may hold the dashboard's session cookie, and any
//! page it shows can send requests to `127.0.0.1`. These rules make such
//! requests fail whatever the browser holds:
//!
//! - **DNS rebinding** (a page of `evil.example` whose name is re-pointed to
//!   `127.0.0.1`, so the browser treats the endpoint as that page's own
//!   origin) always names a foreign `Host`: only the address the connection
//!   came in on, or `localhost`, with the port, is let in.
//! - **Cross-site request forgery**: a page's `fetch` or form sends its own
//!   `Origin`, refused unless it is the endpoint's; and without a CORS
//!   preflight (which this server never grants) a page can only send a
//!   `text/plain`, form or multipart body with no custom header, so a
//!   request that changes something must carry `X-Weir-Request` or be
//!   `application/json`.
//!
//! Pure functions of header values, tested without a server.

use std::net::{IpAddr, SocketAddr};

/// The header the CLI and the dashboard send with every request (value `1`);
/// a cross-site page cannot add it without a preflight the server never grants.
pub(crate) const REQUEST_HEADER: &str = "x-weir-request";

/// Why a request was refused before its credentials mattered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// The `Host` is not this endpoint's address nor `localhost`.
    #[error(
        "Host `{given}` is not this endpoint: the Host header must be {expected} (the address \
         the endpoint listens on, or localhost, with its port); other names are refused as a \
         defence against DNS rebinding: connect by that address"
    )]
    Host {
        /// The `Host` header sent (empty when none was).
        given: String,
        /// The forms accepted, for the message.
        expected: String,
    },
    /// The `Origin` is another web page's.
    #[error(
        "Origin `{given}` is not this endpoint's own origin ({expected}): requests sent by \
         other web pages are refused (cross-site request forgery); send no Origin, or this one"
    )]
    Origin {
        /// The `Origin` header sent.
        given: String,
        /// The endpoint's origin, `http://HOST`.
        expected: String,
    },
    /// A state-changing request that a cross-site form could have sent.
    #[error(
        "a {method} request must carry the header `X-Weir-Request: 1` or \
         `Content-Type: application/json`, which a cross-site form cannot send: add the header \
         (the weir CLI and the dashboard send it)"
    )]
    SimpleRequest {
        /// The request's method.
        method: String,
    },
}

impl Refusal {
    /// The HTTP status to answer with: 421 (Misdirected Request) for a
    /// foreign `Host`, 403 otherwise.
    pub(crate) fn status(&self) -> u16 {
        match self {
            Refusal::Host { .. } => 421,
            Refusal::Origin { .. } | Refusal::SimpleRequest { .. } => 403,
        }
    }
}

/// Lets in a `host` header naming `local` (the address the connection came
/// in on) or `localhost`, with `local`'s port (which may be left out when it
/// is 80, as browsers do).
pub(crate) fn check_host(host: Option<&str>, local: SocketAddr) -> Result<(), Refusal> {
    let local_ip = local.ip().to_canonical();
    let refused = || Refusal::Host {
        given: host.unwrap_or_default().to_string(),
        expected: format!(
            "{} or localhost:{}",
            SocketAddr::new(local_ip, local.port()),
            local.port()
        ),
    };
    let (name, port) = host.and_then(split_host).ok_or_else(refused)?;
    let port_ok = match port {
        Some(port) => port == local.port(),
        None => local.port() == 80,
    };
    let name_ok = name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical() == local_ip);
    if port_ok && name_ok {
        Ok(())
    } else {
        Err(refused())
    }
}

/// `name[:port]` or `[v6][:port]` split into the name (without brackets) and
/// the port; `None` when malformed.
fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    let host = host.trim();
    let (name, rest) = match host.strip_prefix('[') {
        Some(inner) => {
            let (name, rest) = inner.split_once(']')?;
            (name, rest)
        }
        None => match host.find(':') {
            Some(at) => (&host[..at], &host[at..]),
            None => (host, ""),
        },
    };
    let port = match rest.strip_prefix(':') {
        Some(port) => Some(port.parse().ok()?),
        None if rest.is_empty() => None,
        None => return None,
    };
    (!name.is_empty()).then_some((name, port))
}

/// Lets in a request with no `origin`, or with the endpoint's own:
/// `http://` and the (already checked) `host` it names.
pub(crate) fn check_origin(origin: Option<&str>, host: &str) -> Result<(), Refusal> {
    let Some(origin) = origin else {
        return Ok(());
    };
    let expected = format!("http://{host}");
    if origin.trim().eq_ignore_ascii_case(&expected) {
        Ok(())
    } else {
        Err(Refusal::Origin {
            given: origin.to_string(),
            expected,
        })
    }
}

/// Lets in a `GET` or `HEAD`, or another method that carries the
/// [`REQUEST_HEADER`] (`has_request_header`) or a JSON `content_type`.
pub(crate) fn check_state_changing(
    method: &str,
    content_type: Option<&str>,
    has_request_header: bool,
) -> Result<(), Refusal> {
    if method == "GET" || method == "HEAD" || has_request_header {
        return Ok(());
    }
    let essence = content_type
        .and_then(|c| c.split(';').next())
        .map(str::trim)
        .unwrap_or_default();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(Refusal::SimpleRequest {
            method: method.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_host_is_the_connection_address_or_localhost_with_the_port() {
        let v4 = local("127.0.0.1:4040");
        for good in [
            "127.0.0.1:4040",
            "localhost:4040",
            "LocalHost:4040",
            " 127.0.0.1:4040 ",
        ] {
            assert_eq!(check_host(Some(good), v4), Ok(()), "{good}");
        }
        for bad in [
            "evil.example.com",
            "evil.example.com:4040",
            "127.0.0.1",
            "127.0.0.1:4041",
            "127.0.0.2:4040",
            "localhost",
            "localhost.evil.example.com:4040",
            "[::1]:4040",
            "127.0.0.1:4040:4040",
            "",
            ":4040",
        ] {
            let refused = check_host(Some(bad), v4).unwrap_err();
            assert_eq!(refused.status(), 421, "{bad}");
            assert!(
                refused
                    .to_string()
                    .contains("127.0.0.1:4040 or localhost:4040"),
                "{refused}"
            );
        }
        assert!(check_host(None, v4).is_err());
        let v6 = local("[::1]:9");
        assert_eq!(check_host(Some("[::1]:9"), v6), Ok(()));
        assert_eq!(check_host(Some("[0:0:0:0:0:0:0:1]:9"), v6), Ok(()));
        assert_eq!(check_host(Some("localhost:9"), v6), Ok(()));
        assert!(check_host(Some("127.0.0.1:9"), v6).is_err());
        assert!(check_host(Some("[::1]"), v6).is_err());
        // A dual-stack socket sees IPv4 clients as ::ffff:a.b.c.d.
        let mapped = local("[::ffff:192.168.1.4]:8081");
        assert_eq!(check_host(Some("192.168.1.4:8081"), mapped), Ok(()));
        // Port 80 may go unnamed, as browsers leave it out.
        assert_eq!(check_host(Some("10.0.0.2"), local("10.0.0.2:80")), Ok(()));
        assert_eq!(
            check_host(Some("10.0.0.2:80"), local("10.0.0.2:80")),
            Ok(())
        );
    }

    #[test]
    fn an_origin_is_absent_or_the_endpoints_own() {
        assert_eq!(check_origin(None, "127.0.0.1:1"), Ok(()));
        assert_eq!(
            check_origin(Some("http://127.0.0.1:1"), "127.0.0.1:1"),
            Ok(())
        );
        assert_eq!(
            check_origin(Some("http://localhost:1"), "localhost:1"),
            Ok(())
        );
        for bad in [
            "http://evil.example.com",
            "null",
            "https://127.0.0.1:1",
            "http://127.0.0.1:2",
            "http://localhost:1",
        ] {
            let refused = check_origin(Some(bad), "127.0.0.1:1").unwrap_err();
            assert_eq!(refused.status(), 403);
            assert!(
                refused.to_string().contains("http://127.0.0.1:1"),
                "{refused}"
            );
        }
    }

    #[test]
    fn a_state_changing_request_needs_the_header_or_json() {
        assert_eq!(check_state_changing("GET", None, false), Ok(()));
        assert_eq!(
            check_state_changing("HEAD", Some("text/plain"), false),
            Ok(())
        );
        assert_eq!(check_state_changing("POST", None, true), Ok(()));
        assert_eq!(
            check_state_changing("POST", Some("text/plain"), true),
            Ok(())
        );
        for json in ["application/json", "Application/JSON; charset=utf-8"] {
            assert_eq!(
                check_state_changing("POST", Some(json), false),
                Ok(()),
                "{json}"
            );
        }
        for simple in [
            None,
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            Some("text/plain; application/json"),
        ] {
            let refused = check_state_changing("POST", simple, false).unwrap_err();
            assert_eq!(refused.status(), 403);
            assert!(
                refused.to_string().contains("X-Weir-Request: 1"),
                "{refused}"
            );
        }
        assert!(check_state_changing("DELETE", None, false).is_err());
    }
}
