//! The third-party servers the tests (`tests/all/kafka.rs`) and the benchmarks
//! (`benches/src/kafka.rs`) run, as child processes. Each user wraps a server with the client
//! calls it makes; this crate only installs, starts, watches and stops them, so that is done one
//! way for all.
//!
//! - [`kafka`]: a Kafka broker (PyPI's `noida-db`), [`kafka::BrokerProcess`].
//!
//! Every server is installed from its package registry into a git-ignored folder of the
//! workspace by a script of its own (`scripts/install-kafka-broker.sh`; the version pinned in
//! `tests/<server>/requirements.txt`), which does nothing when the pinned version is there, and
//! started on a free loopback port with its files in a folder of the caller's.
//!
//! **No server outlives the process that started it**, even one killed with SIGKILL or kept in
//! a `static` (never dropped): each has a watchdog, a small `sh` reading a pipe from the
//! starting process, which stops the server and removes its folder when the pipe closes
//! without a word. The process, watchdog and port machinery is in one private module
//! (`process.rs`).

pub mod kafka;
mod process;
