//! The end-to-end test binary: one binary, one module per area, so the guests
//! and the host are built once for all of them.

mod guests;
mod image_rewrite;
#[cfg(unix)]
mod kafka;
#[cfg(unix)]
mod kafka_broker;
#[cfg(unix)]
mod kafka_cluster;
#[cfg(unix)]
mod kafka_exactly_once;
#[cfg(unix)]
mod kafka_faults;
#[cfg(unix)]
mod kafka_operations;
#[cfg(unix)]
mod kafka_sink;
#[cfg(unix)]
mod kafka_sink_between_checkpoints;
#[cfg(unix)]
mod kafka_source;
mod languages;
mod readme;
mod report;
mod support;

#[cfg(unix)]
mod azure;
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
mod s3;
#[cfg(unix)]
mod s3_server;
#[cfg(unix)]
mod savepoint;
#[cfg(unix)]
mod storage_faults;
mod tools;
#[cfg(unix)]
mod workers;
