//! The end-to-end test binary: one binary, one module per area, so the guests
//! and the host are built once for all of them.
//!
//! An area with a harness of its own is a folder: its `mod.rs` is the harness (a server, the
//! client calls around it) and each other file holds tests (`kafka/`, `object_storage/`). What
//! every area shares is `support/`. A file without a `#[test]` is a `support/` file or a
//! `mod.rs`. docs/ARCHITECTURE.md ("Where things are tested") maps each file to what it tests.

mod guests;
mod image_rewrite;
#[cfg(unix)]
mod kafka;
mod languages;
mod readme;
mod support;

#[cfg(unix)]
mod backpressure;
#[cfg(unix)]
mod bad_job_files;
#[cfg(unix)]
mod chaining;
#[cfg(unix)]
mod chaos;
#[cfg(unix)]
mod checkpoints_cli;
#[cfg(unix)]
mod control;
#[cfg(unix)]
mod corrupt;
#[cfg(unix)]
mod dashboard;
#[cfg(unix)]
mod deployment;
#[cfg(unix)]
mod durability;
#[cfg(unix)]
mod event_time;
mod failover;
#[cfg(unix)]
mod host_state;
#[cfg(unix)]
mod image_guests;
mod incremental_images;
#[cfg(unix)]
mod isolation;
#[cfg(unix)]
mod keyed_file;
#[cfg(unix)]
mod kill_points;
#[cfg(unix)]
mod misuse;
#[cfg(unix)]
mod new_project;
#[cfg(unix)]
mod object_storage;
#[cfg(unix)]
mod rescale;
mod retention;
#[cfg(unix)]
mod savepoint;
#[cfg(unix)]
mod storage_faults;
mod tools;
#[cfg(unix)]
mod workers;
