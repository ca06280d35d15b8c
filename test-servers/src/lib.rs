//! The third-party servers the tests (`tests/all/kafka/mod.rs`, `tests/all/object_storage/mod.rs`)
//! and the benchmarks (`benches/src/kafka.rs`) run, as child processes, and a fault-injecting proxy
//! to put in front of them. Each user wraps a server with the client calls it makes; this crate
//! only installs, starts, watches and stops them, so that is done one way for all.
//!
//! - [`kafka`]: a Kafka broker (PyPI's `noida-db`), [`kafka::BrokerProcess`];
//! - [`s3`]: an S3 server (PyPI's `moto`), [`s3::S3Process`];
//! - [`fault_proxy`]: an HTTP/1.1 proxy that answers chosen requests with an error, delays
//!   them, cuts them off or drops them, [`fault_proxy::FaultProxy`] (a thread in the caller's
//!   process, not a server of its own);
//! - [`rng`]: SplitMix64, the seeded generator the tests and benchmarks share (the Kafka
//!   broker's cluster ids use it too).
//!
//! Every server is installed from its package registry into a git-ignored folder of the
//! workspace by a script of its own (`scripts/install-kafka-broker.sh`,
//! `scripts/install-s3-server.sh`; the version pinned in `tests/<server>/requirements.txt`),
//! which does nothing when the pinned version is there, and started on a free loopback port
//! with its files in a folder of the caller's.
//!
//! **No server outlives the process that started it**, even one killed with SIGKILL or kept in
//! a `static` (never dropped): each has a watchdog, a small `sh` reading a pipe from the
//! starting process, which stops the server and removes its folder when the pipe closes
//! without a word. The process, watchdog and port machinery is in one private module
//! (`process.rs`), the HTTP/1.1 the S3 server's checks and the proxy speak in another
//! (`http.rs`).

pub mod fault_proxy;
mod http;
pub mod kafka;
mod process;
pub mod rng;
pub mod s3;

/// Runs an install script of the workspace the way the servers' installs run theirs, for a
/// tool that is no server (the Kubernetes schema validator of `tests/all/deployment.rs`).
pub use process::install as install_with_script;
