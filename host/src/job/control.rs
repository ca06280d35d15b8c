//! The control settings of a job: the `[control]` table of the job file,
//! validated, which `weir run --control ADDR` and `--no-control` override. The
//! endpoint that serves them is [`crate::control`]; the settings are part of the
//! job, so they live here and the job layer never imports the server.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// Where the control endpoint listens unless told otherwise: loopback, on a
/// port the system picks (several jobs on one machine never collide; each
/// publishes its port in `_control.json`).
pub const DEFAULT_ADDRESS: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// What address forms [`parse_address`] takes, for messages.
pub const ADDRESS_FORMS: &str = "an IP address and a port, \"host:port\" (e.g. \"127.0.0.1:8081\", \
     \"0.0.0.0:0\", \"[::1]:8081\"; port 0 lets the system choose; \"localhost:PORT\" means \
     127.0.0.1)";

/// Validated control settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlConfig {
    /// Whether a running job serves the endpoint at all.
    pub enabled: bool,
    /// Where it listens.
    pub address: SocketAddr,
}

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            enabled: true,
            address: DEFAULT_ADDRESS,
        }
    }
}

/// Reads `host:port` where host is an IP address (IPv6 in brackets) or
/// `localhost`; `None` for anything else. Host names other than `localhost`
/// are refused rather than resolved: which interface a name means can change
/// under a running job.
pub fn parse_address(text: &str) -> Option<SocketAddr> {
    if let Ok(address) = text.parse::<SocketAddr>() {
        return Some(address);
    }
    let port = text.strip_prefix("localhost:")?;
    let port: u16 = port.parse().ok()?;
    Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ip_addresses_and_localhost_only() {
        assert_eq!(parse_address("127.0.0.1:0"), Some(DEFAULT_ADDRESS));
        assert_eq!(
            parse_address("localhost:8081"),
            Some("127.0.0.1:8081".parse().unwrap())
        );
        assert_eq!(parse_address("[::1]:9"), Some("[::1]:9".parse().unwrap()));
        for bad in [
            "",
            "8081",
            "127.0.0.1",
            "example.com:80",
            "localhost",
            "1.2.3.4:99999",
        ] {
            assert_eq!(parse_address(bad), None, "{bad:?}");
        }
    }
}
