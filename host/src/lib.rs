//! Weir host.
#![forbid(unsafe_code)]

pub mod checkpoint;
pub mod connectors;
pub mod control;
pub mod dataflow;
pub mod ids;
pub mod job;
pub mod kill_point;
mod parallel;
pub mod runtime;
pub mod tools;
pub mod wasm;
