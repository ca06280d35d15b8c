//! The control endpoint of a running job: status, checkpoint statistics,
//! Prometheus metrics, a dashboard page, and the actions savepoint, stop and
//! cancel, over HTTP/1.1 (docs/CONTROL.md is the reference).
//!
//! Why it exists: people who run a stream processor watch it — is the last
//! checkpoint recent, how long did it take, is a task back-pressured — and
//! act on it without killing the process. A job serves this itself, from the
//! [`JobMonitor`](crate::runtime::JobMonitor) the driver and the tasks keep
//! up to date and the request channel of
//! [`JobRunner::run`](crate::runtime::JobRunner::run), so nothing here
//! touches the running job except through those two.
//!
//! ```text
//! weir status / savepoint / stop / cancel ─┐            ┌─ browser (dashboard/)
//!   (client.rs, found by endpoint_file.rs) │            │  Prometheus (/metrics)
//!                                          ▼            ▼
//!                 server.rs: hyper on a thread and runtime of its own
//!                   guard.rs (Host, Origin, CSRF) · auth.rs (token, cookie)
//!                   login.rs (one-time dashboard links) · savepoint_limit.rs
//!                   api.rs (JSON views) · metrics.rs · sampler.rs (rates)
//!                        │ reads                       │ sends
//!                        ▼                             ▼
//!                   JobMonitor                  JobRequest channel ─► driver
//! ```
//!
//! The server runs on its own thread with a small tokio runtime, so a slow
//! client or a burst of scrapes never delays the driver, and the driver's
//! runtime is free to stop while the endpoint still answers.
//!
//! Every request needs the job's token (or the dashboard's session cookie),
//! loopback included: any local user, and any web page in a local browser,
//! can reach the port. docs/CONTROL.md has the threat model.

pub mod api;
pub mod auth;
pub mod client;
pub mod endpoint_file;
pub(crate) mod guard;
pub(crate) mod login;
pub mod metrics;
pub(crate) mod sampler;
pub(crate) mod savepoint_limit;
pub mod server;

pub use auth::Token;
pub use client::{ClientError, ControlClient};
pub use endpoint_file::{ENDPOINT_FILE, EndpointFile};
pub use server::{ControlError, ControlServer, ControlTarget};
