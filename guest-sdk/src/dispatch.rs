//! From ABI bytes to operator calls and back, with no pointers involved.
//!
//! The wasm exports (through `ffi`) and the native harness both go through these functions, so
//! a harness test exercises the same init decoding, batch decoding and output flushing as a
//! guest running in the host.

use weir_abi::{Batch, InitMessage};

use crate::output::Output;
use crate::{Context, Error, Operator, Result};

/// `weir_init`: decodes the init message and creates the operator.
pub(crate) fn init<T: Operator>(message: &[u8]) -> Result<T> {
    let message = InitMessage::decode(message)
        .map_err(|e| Error::msg(format!("malformed init message: {e}")))?;
    T::init(&Context::from(message))
}

/// `weir_process`: decodes the batch, runs the operator and flushes what it emitted.
pub(crate) fn process<T: Operator>(operator: &mut T, batch: &[u8], out: &mut Output) -> Result<()> {
    let batch =
        Batch::decode(batch).map_err(|e| Error::msg(format!("malformed input batch: {e}")))?;
    finish_call(operator.process(&batch, out), out)
}

/// `weir_finish`: lets the operator emit its last records and flushes them.
pub(crate) fn finish<T: Operator>(operator: &mut T, out: &mut Output) -> Result<()> {
    finish_call(operator.finish(out), out)
}

/// Ends a call that may have emitted records: hands them on if it succeeded, drops them if not.
fn finish_call(result: Result<()>, out: &mut Output) -> Result<()> {
    match result {
        Ok(()) => out.flush(),
        Err(_) => out.discard(),
    }
    result
}
