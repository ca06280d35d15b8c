//! The tools for operator authors: `weir validate` and `weir test` (`docs/TOOLS.md`).
//!
//! # Why these exist
//!
//! Weir promises operators in any language that compiles to WebAssembly, but only Rust has an
//! SDK with a native test harness. An author working in C, AssemblyScript or hand-written WAT
//! has the ABI document and a compiler — and needs two answers without writing a job: *does the
//! host accept my module?* and *does it compute the right output, also across a snapshot and a
//! restore?* This module answers both, with the host's own loading and calling code
//! ([`crate::wasm`]), so a module that passes here behaves the same in a job.
//!
//! - [`validate`](validate_file): loads a module the way the host does and reports every
//!   export, memory and import it has against the ABI, with each problem and its fix
//!   ([`ValidationReport`]).
//! - [`OperatorTest`] / [`TestSpec`]: runs one operator in isolation over records written as
//!   JSON lines ([`JsonRecord`]), optionally snapshotting and restoring into a fresh instance
//!   every N records and checking the output is unchanged, and compares the output with an
//!   expected file ([`Mismatch`]).
//!
//! The `weir` binary only parses arguments, calls these, prints and maps errors to exit codes.

pub mod catalog;
mod json_record;
mod mismatch;
mod operator_test;
pub mod scaffold;
mod validate;

pub use json_record::{JsonLinesError, JsonRecord, LineProblem, read_json_lines};
pub use mismatch::Mismatch;
pub use operator_test::{
    CaptureUsed, ConfigSource, DEFAULT_BATCH_SIZE, OperatorTest, PlannedBatch, TestError,
    TestOptions, TestOutcome, TestSpec, plan_batches,
};
pub use validate::{
    ExportCheck, ExportStatus, ImportCheck, ImportStatus, MemoryReport, ValidateError,
    ValidationReport, validate_bytes, validate_file,
};
