//! From ABI bytes to operator calls and back, with no pointers involved.
//!
//! The wasm exports (through `ffi`) and the native harness both go through these functions, so
//! a harness test exercises the same init decoding, batch decoding and output flushing as a
//! guest running in the host.

use weir_abi::{Batch, InitMessage};

use crate::output::{Call, Output};
use crate::{Context, Error, FiredTimers, Operator, Result};

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
    out.begin(Call::Process);
    finish_call(operator.process(&batch, out), out)
}

/// `weir_on_timers`: decodes the fired timers, runs the operator and flushes what it emitted.
pub(crate) fn on_timers<T: Operator>(
    operator: &mut T,
    batch: &[u8],
    out: &mut Output,
) -> Result<()> {
    let batch = Batch::decode(batch)
        .map_err(|e| Error::msg(format!("malformed fired-timer batch: {e}")))?;
    let timers = FiredTimers::from_batch(batch)?;
    out.begin(Call::OnTimers);
    finish_call(operator.on_timers(&timers, out), out)
}

/// `weir_on_watermark`: tells the operator and flushes what it emitted.
pub(crate) fn on_watermark<T: Operator>(
    operator: &mut T,
    watermark: i64,
    out: &mut Output,
) -> Result<()> {
    out.begin(Call::OnWatermark);
    finish_call(operator.on_watermark(watermark, out), out)
}

/// `weir_finish`: lets the operator emit its last records and flushes them.
pub(crate) fn finish<T: Operator>(operator: &mut T, out: &mut Output) -> Result<()> {
    out.begin(Call::Finish);
    finish_call(operator.finish(out), out)
}

/// Ends a call that may have emitted records: hands them on if it succeeded, drops them if not.
/// A forbidden use of the ABI during the call (see [`Output`]) fails it, whatever it returned.
fn finish_call(result: Result<()>, out: &mut Output) -> Result<()> {
    let result = match out.take_fault() {
        Some(fault) => Err(fault),
        None => result,
    };
    match result {
        Ok(()) => out.flush(),
        Err(_) => out.discard(),
    }
    result
}
