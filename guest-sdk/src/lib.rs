//! Write Weir stream operators in plain Rust, compile them to WebAssembly, test them natively.
//!
//! An operator is a struct that implements [`Operator`] (how it starts and how it turns input
//! batches into output records) and [`State`] (how it is checkpointed — free for any serde
//! type). One line, [`export!`], turns it into a guest module that speaks the Weir ABI
//! (`docs/ABI.md`). The same crate, built natively, is tested with [`testing::Harness`], which
//! feeds the operator through the very decode/encode path the wasm build uses.
//!
//! # Your first operator
//!
//! A crate of type `["cdylib", "rlib"]` depending on `weir-sdk` and `serde`:
//!
//! ```
//! use std::io::Write as _;
//!
//! use serde::{Deserialize, Serialize};
//! use weir_sdk::{Batch, Context, Operator, Output, Result};
//!
//! /// Numbers the records it sees: the n-th value `v` becomes `"n v"`.
//! #[derive(Serialize, Deserialize)]
//! pub struct Numbered {
//!     next: u64,
//! }
//!
//! impl Operator for Numbered {
//!     fn init(_ctx: &Context) -> Result<Self> {
//!         Ok(Numbered { next: 1 })
//!     }
//!
//!     fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
//!         let mut line = Vec::new(); // reused for every record of the batch
//!         for record in input {
//!             line.clear();
//!             write!(line, "{} ", self.next)?;
//!             line.extend_from_slice(record.value);
//!             out.emit(record.key, &line, record.timestamp);
//!             self.next += 1;
//!         }
//!         Ok(())
//!     }
//! }
//!
//! // `Numbered` derives serde, so it checkpoints with no more code.
//! weir_sdk::export!(Numbered);
//!
//! // The crate's tests, run natively with `cargo test`:
//! # fn main() -> weir_sdk::Result<()> {
//! use weir_sdk::testing::{Harness, assert_records_eq, assert_restore_preserves_output, record};
//!
//! let ctx = Context::new("numbered");
//! let mut harness = Harness::<Numbered>::new(ctx.clone())?;
//! assert_records_eq(&harness.push("k", "a", 10)?, &[record("k", "1 a", 10)]);
//! harness.snapshot_and_restore()?;
//! assert_records_eq(&harness.push("k", "b", 11)?, &[record("k", "2 b", 11)]);
//!
//! let input = [record("x", "p", 1), record("y", "q", 2), record("x", "r", 3)];
//! assert_restore_preserves_output::<Numbered>(&ctx, &input, 1);
//! # Ok(())
//! # }
//! ```
//!
//! Build it with `cargo build --release --target wasm32-unknown-unknown`.
//!
//! # How the crate is laid out
//!
//! - [`Operator`], [`Context`], [`Output`], [`State`], [`Error`]: what an operator author uses.
//! - [`FiredTimers`], [`TimeDomain`]: event time and timers (`docs/ABI.md` §15), reached
//!   through [`Output`] and [`Operator::on_timers`].
//! - [`window`]: keyed tumbling, sliding and session windows on event time, with no timer code
//!   (`docs/WINDOWS.md`).
//! - `dispatch` (private): decoding the init message and batches, running the operator and
//!   flushing its output — safe code shared by the wasm exports and the native harness.
//! - `ffi` (private, wasm only): the host imports, buffer ownership and the panic hook; the only
//!   `unsafe` code of the SDK.
//! - [`export!`]: generates the ABI exports, each a one-line call into `ffi`.
//! - [`testing`]: the native harness, its emulation of the host's timers and watermark, and its
//!   assertions.
//! - [`log`]: log lines, to the host's log in wasm and to stderr natively.

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod context;
mod dispatch;
mod error;
mod export;
#[cfg(target_arch = "wasm32")]
#[doc(hidden)]
#[allow(unsafe_code)]
pub mod ffi;
pub mod host_state;
#[cfg(target_arch = "wasm32")]
#[allow(unsafe_code)]
mod imports;
pub mod log;
mod operator;
mod output;
mod rescalable;
mod state;
pub mod testing;
mod time;
pub mod window;

pub use context::Context;
pub use error::{Error, Result};
#[doc(hidden)]
pub use export::assert_exportable;
pub use operator::Operator;
pub use output::Output;
pub use rescalable::{KeyHasher, Keyed, ListState, UnionState, deserialize_keyed, serialize_keyed};
pub use state::State;
pub use time::{FiredTimer, FiredTimers, FiredTimersIter};
pub use weir_abi::time::{END_OF_TIME, NO_WATERMARK};
pub use weir_abi::{Batch, Record, TimeDomain};

// The README's Rust example is the crate examples/rust/min-length, copied verbatim; the test
// `readme` of tests/all checks that the copy is exact, so it cannot rot.
