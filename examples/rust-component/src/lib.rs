//! `count` as a WebAssembly **component**: the keyed running count of `examples/rust/count`,
//! implementing the WIT world `weir:operator/operator@1.1.0` (`abi/wit/operator.wit`) instead
//! of the core-module ABI.
//!
//! It exists to prove that world from a third toolchain, after Python and JavaScript: plain
//! Rust for `wasm32-wasip2`, whose `cdylib`s are components, with `wit-bindgen` generating the
//! bindings from the WIT file and nothing of the project's own crates (no `weir-sdk`). Its
//! output is the same, byte for byte, as that of every other `count` example.
//!
//! The logic lives in plain modules ([`batch`], [`count`]) that know nothing of the bindings,
//! so `cargo test` runs it natively; this file only moves bytes between the world's functions
//! and those modules.
//!
//! The only `unsafe` code is the glue `wit-bindgen` generates, allowed in [`bindings`] alone.

#![deny(unsafe_code)]

mod batch;
mod count;
mod reader;

use std::cell::RefCell;

use crate::bindings::exports::weir::operator::guest::{Guest, InitMessage};
use crate::bindings::weir::operator::host;
use crate::count::Counts;

/// The bindings of the world, generated from the WIT file at build time, and the exports that
/// call [`Component`].
mod bindings {
    #![allow(unsafe_code)]

    use super::Component;

    wit_bindgen::generate!({
        world: "operator",
        path: "../../abi/wit",
    });

    export!(Component);
}

thread_local! {
    /// The operator's state. A component instance runs one call at a time on one thread, so
    /// a thread-local is its one instance of the operator.
    static COUNTS: RefCell<Counts> = RefCell::new(Counts::default());
}

/// The exports of the world.
struct Component;

impl Guest for Component {
    /// Needs no configuration: any `config` is accepted and ignored.
    fn init(_message: InitMessage) -> Result<(), String> {
        Ok(())
    }

    /// Emits one output batch for a batch with records, none for an empty one.
    fn process(batch: Vec<u8>) -> Result<(), String> {
        if let Some(out) = COUNTS.with_borrow_mut(|counts| counts.process(&batch))? {
            host::emit(&out);
        }
        Ok(())
    }

    fn snapshot(_checkpoint_id: u64) -> Result<Vec<u8>, String> {
        Ok(COUNTS.with_borrow(Counts::snapshot))
    }

    fn restore(state: Vec<u8>) -> Result<(), String> {
        let restored = Counts::restore(&state)?;
        COUNTS.set(restored);
        Ok(())
    }

    /// The snapshot is whole and returned, so there is nothing to clean up.
    fn checkpoint_complete(_checkpoint_id: u64) -> Result<(), String> {
        Ok(())
    }

    /// The operator sets no timers, so none fire.
    fn on_timers(_timers: Vec<u8>) -> Result<(), String> {
        Ok(())
    }

    /// Counts do not wait for time.
    fn on_watermark(_watermark: i64) -> Result<(), String> {
        Ok(())
    }

    /// Every record was answered as it came: nothing is left to emit.
    fn finish() -> Result<(), String> {
        Ok(())
    }
}
