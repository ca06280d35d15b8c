//! The Weir host: runs a dataflow job whose operators are WebAssembly modules,
//! with Flink-style exactly-once checkpoints.
//!
//! The `weir` binary (`src/bin/weir/`) is a thin shell over this library: it
//! parses arguments, calls in here, prints, and maps errors to exit codes.
//!
//! # Layout
//!
//! The modules stack bottom-up; each imports only those below it (tests and
//! the two helpers beside them aside). `dataflow` and `connectors` are
//! crate-private: they are how a job runs, not something to call.
//!
//! | layer | what it is |
//! |---|---|
//! | [`ids`] | the shared vocabulary: [`TaskId`](ids::TaskId), [`CheckpointId`](ids::CheckpointId), [`CheckpointKind`](ids::CheckpointKind), [`Barrier`](ids::Barrier) |
//! | [`state`] | host-kept task state: the sections a task keeps on the host beside what it runs (today its watermark and its guest's timers), each able to encode, restore and split itself by key group |
//! | [`wasm`] | the only code that knows the ABI: one engine per job, modules checked once, guest instances with bounded calls, and [`wasm::image`] (checkpointing a guest's memory without its help) |
//! | [`checkpoint`] | the pure coordinator (`checkpoint/coordinator.rs`), the on-disk format, layout and storage, and the choice of what to restore |
//! | [`job`] | the job file, parsed and validated into a [`Job`](job::Job) graph; [`job::workers`] cuts it into the stages each worker of a job run as many processes runs |
//! | `dataflow` | the task loop, its interfaces (`Source`, `Processor` in `dataflow/processor.rs`), channels, the router and barrier alignment |
//! | `connectors` | the sources and sinks: each a `SourceConnector` or `SinkConnector` that builds its tasks and owns its errors, figures, rescale rule and checks; `connectors::source`/`sink` map a job file's kind to one |
//! | [`runtime`] | [`JobRunner`](runtime::JobRunner): attempts, the driver around the coordinator, restore, fail-over, and the [`JobMonitor`](runtime::JobMonitor) every display reads; [`WorkerRunner`](runtime::WorkerRunner): a worker's stages side by side |
//! | [`control`] | the job's HTTP endpoint (JSON views, metrics, dashboard, actions) and its client |
//! | [`tools`] | what the CLI offers besides running: `weir validate`, `weir test`, `weir checkpoints` |
//!
//! Beside them: [`kill_point`] (named crash points, armed only in builds with
//! the `test-hooks` feature), `parallel` (splitting a large memory pass over
//! the cores) and `process` (whether another process is gone).
//!
//! # The path of a batch
//!
//! A source task polls its `Source` into its router, which keeps one batch per downstream channel in the ABI's encoding
//! (`weir_abi::batch`) and sends it over a bounded channel when full or after
//! each poll. The receiving task hands it to its `Processor`: a wasm operator copies it
//! into the guest and calls `weir_process`; what the guest emits goes through
//! the task's own router; a sink writes it out. Full channels push back up to
//! the sources.
//!
//! # The path of a barrier
//!
//! The driver (`runtime/driver.rs`) feeds the coordinator facts and carries out
//! its actions. On `Trigger` the sources record their position and emit a
//! [`Barrier`](ids::Barrier) in band; each task aligns its inputs'
//! barriers (`dataflow/alignment.rs`), takes the synchronous part of its
//! snapshot, forwards the barrier, and the persister writes the state file off
//! the task thread and acknowledges. When every task has acknowledged, the
//! driver writes the checkpoint's metadata (now it is complete) and tells the
//! tasks; sinks commit what they pre-committed at the barrier. On restart,
//! `runtime` restores every task from the latest completed checkpoint.
//!
//! # Where to start reading
//!
//! `runtime/runner.rs` ([`JobRunner::run`](runtime::JobRunner::run)) for the
//! life of a job; `dataflow/task.rs` for one task's loop;
//! `checkpoint/coordinator.rs` for the protocol, as a pure state machine; and
//! `wasm/instance.rs` for a call into a guest. docs/ARCHITECTURE.md tells the
//! same story with the reasons.
#![forbid(unsafe_code)]

pub mod checkpoint;
pub(crate) mod connectors;
pub mod control;
pub(crate) mod dataflow;
pub mod ids;
pub mod job;
pub mod kill_point;
mod parallel;
mod process;
pub mod runtime;
pub mod state;
pub mod tools;
pub mod wasm;
