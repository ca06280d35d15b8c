//! The host half of the ABI: the functions the host provides under the module `weir`
//! (`docs/ABI.md` §4), plus `env.abort` for AssemblyScript guests, added once to the engine's
//! `Linker`.
//!
//! Each import reads the guest's buffer through a bounds-checked slice of its memory and
//! copies what it keeps; its mutable state is the instance's [`GuestState`]. A misbehaving
//! guest gets an [`Abort`] error, which traps it and is classified by type afterwards.

use wasmtime::{Caller, Extern, Linker, Memory};
use weir_abi::batch::{HEADER_LEN, append_records};
use weir_abi::time::MAX_OUTPUT_NAME_BYTES;
use weir_abi::{
    Batch, IMPORT_MODULE, IMPORTS, TimeDomain, Timers, env, exports, imports, log_level,
};

use super::call::Call;
use super::error::{Abort, GuestFailure};
use super::limits::{MAX_MESSAGE_BYTES, OUTPUT_BATCH_OVERHEAD};
use super::state::{GuestState, SideBatch};

/// Every import the host provides to guests, as `(module, name)`: the `weir` imports and
/// `env.abort` (`docs/ABI.md` §4).
///
/// This is the whole of what a guest can reach outside its own memory: a module importing
/// anything else is refused at load time, and none of these reads a file, the network or
/// randomness; `current_time` reads the wall clock, at millisecond resolution. It is [`weir_abi::IMPORTS`], the table module validation reads; the isolation
/// tests check it against the linker and against `docs/ABI.md`.
pub fn provided_imports() -> impl Iterator<Item = (&'static str, &'static str)> {
    IMPORTS.iter().map(|import| (import.module, import.name))
}

/// The `log` target of guest log lines, so they can be filtered apart from the host's own.
const LOG_TARGET: &str = "weir::guest";

/// Defines the `weir` imports and `env.abort` in `linker`: every one of [`weir_abi::IMPORTS`].
pub(crate) fn add_to_linker(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    linker.func_wrap(IMPORT_MODULE, imports::EMIT, emit)?;
    linker.func_wrap(IMPORT_MODULE, imports::SAVE_STATE, save_state)?;
    linker.func_wrap(IMPORT_MODULE, imports::FAIL, fail)?;
    linker.func_wrap(IMPORT_MODULE, imports::LOG, log)?;
    linker.func_wrap(IMPORT_MODULE, imports::EMIT_TO, emit_to)?;
    for timer in [imports::TIMER_SET, imports::TIMER_DELETE] {
        linker.func_wrap(IMPORT_MODULE, timer, timer_import(timer))?;
    }
    linker.func_wrap(IMPORT_MODULE, imports::CURRENT_TIME, current_time)?;
    linker.func_wrap(IMPORT_MODULE, imports::STATE_GET, state_get)?;
    linker.func_wrap(IMPORT_MODULE, imports::STATE_RESULT, state_result)?;
    linker.func_wrap(IMPORT_MODULE, imports::STATE_WRITE, state_write)?;
    linker.func_wrap(env::MODULE, env::ABORT, abort)?;
    Ok(())
}

/// `emit(ptr, len)`: appends one batch to the main output; allowed during the calls that may emit
/// ([`Call::may_emit`]).
fn emit(mut caller: Caller<'_, GuestState>, ptr: i32, len: i32) -> wasmtime::Result<()> {
    let call = caller.data().call;
    if !call.may_emit() {
        return Err(misuse(imports::EMIT, call.name()));
    }
    let memory = guest_memory(&mut caller)?;
    let (data, state) = memory.data_and_store_mut(&mut caller);
    let bytes = guest_range(data, "`emit` batch", ptr, len)?;
    emit_checked(state, bytes)
}

/// What `emit` does with the guest's batch, for both front doors: refused outside the calls
/// that may emit, checked, counted and appended to the main output.
pub(crate) fn emit_checked(state: &mut GuestState, bytes: &[u8]) -> wasmtime::Result<()> {
    if !state.call.may_emit() {
        return Err(misuse(imports::EMIT, state.call_name()));
    }
    charge_batch(state, bytes)?;
    append_output(&mut state.output, bytes);
    Ok(())
}

/// `emit_to(name_ptr, name_len, ptr, len)`: appends one batch to the side output named by the
/// guest (`docs/ABI.md` §15); allowed where `emit` is, and counted against the same limit.
fn emit_to(
    mut caller: Caller<'_, GuestState>,
    name_ptr: i32,
    name_len: i32,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<()> {
    let call = caller.data().call;
    if !call.may_emit() {
        return Err(misuse(imports::EMIT_TO, call.name()));
    }
    let memory = guest_memory(&mut caller)?;
    let (data, state) = memory.data_and_store_mut(&mut caller);
    let name = guest_range(data, "`emit_to` output name", name_ptr, name_len)?;
    let bytes = guest_range(data, "`emit_to` batch", ptr, len)?;
    emit_to_checked(state, name, bytes)
}

/// What `emit_to` does with the guest's name and batch, for both front doors: refused outside
/// the calls that may emit, the name checked, the batch checked, counted and appended to the
/// side output.
pub(crate) fn emit_to_checked(
    state: &mut GuestState,
    name: &[u8],
    bytes: &[u8],
) -> wasmtime::Result<()> {
    if !state.call.may_emit() {
        return Err(misuse(imports::EMIT_TO, state.call_name()));
    }
    let name = match std::str::from_utf8(name) {
        Ok(name) if !name.is_empty() && name.len() <= MAX_OUTPUT_NAME_BYTES => name,
        _ => {
            return Err(Abort::error(GuestFailure::OutputName {
                name: message(name),
                len: name.len(),
            }));
        }
    };
    charge_batch(state, bytes)?;
    // Consecutive batches to one output are joined, as the main output's are.
    if let Some(last) = state.side_output.last_mut()
        && &*last.output == name
        && join(&mut last.batch, bytes)
    {
        return Ok(());
    }
    state.side_output.push(SideBatch {
        output: name.into(),
        batch: bytes.to_vec(),
    });
    Ok(())
}

/// Checks an emitted batch (within the output limit with the call's output so far,
/// well-formed, port 0) and counts it against the limit.
fn charge_batch(state: &mut GuestState, bytes: &[u8]) -> wasmtime::Result<()> {
    let limit = state.limits.max_output_bytes;
    let Some(total) = bytes
        .len()
        .checked_add(OUTPUT_BATCH_OVERHEAD)
        .and_then(|charge| state.output_bytes.checked_add(charge))
        .filter(|total| *total <= limit)
    else {
        return Err(Abort::error(GuestFailure::OutputTooLarge { limit }));
    };
    let batch = Batch::decode(bytes)
        .map_err(|problem| Abort::error(GuestFailure::MalformedOutput { problem }))?;
    if batch.port() != 0 {
        return Err(Abort::error(GuestFailure::OutputPort {
            port: batch.port(),
        }));
    }
    state.output_bytes = total;
    Ok(())
}

/// `timer_set(domain, timestamp, key_ptr, key_len)` (`import` = [`imports::TIMER_SET`]): sets a
/// timer (`docs/ABI.md` §15), within the instance's timer limit; allowed during the calls that
/// may set timers ([`Call::may_set_timers`]). `timer_delete(domain, timestamp, key_ptr,
/// key_len)` ([`imports::TIMER_DELETE`]): deletes a timer if it is set; allowed where
/// `timer_set` is. The two take the same arguments and differ only in what [`change_timer`]
/// does with them.
fn timer_import(
    import: &'static str,
) -> impl Fn(Caller<'_, GuestState>, i32, i64, i32, i32) -> wasmtime::Result<()> + Send + Sync + 'static
{
    move |caller, domain, timestamp, key_ptr, key_len| {
        change_timer(caller, import, domain, timestamp, key_ptr, key_len)
    }
}

/// What `timer_set` (`import` = [`imports::TIMER_SET`]) and `timer_delete` do.
fn change_timer(
    mut caller: Caller<'_, GuestState>,
    import: &'static str,
    domain: i32,
    timestamp: i64,
    key_ptr: i32,
    key_len: i32,
) -> wasmtime::Result<()> {
    let call = caller.data().call;
    if !call.may_set_timers() {
        return Err(misuse(import, call.name()));
    }
    let domain = time_domain(import, domain)?;
    let memory = guest_memory(&mut caller)?;
    let (data, state) = memory.data_and_store_mut(&mut caller);
    let key = guest_range(data, "timer key", key_ptr, key_len)?;
    change_timer_checked(state, import, domain, timestamp, key)
}

/// What `timer_set` and `timer_delete` do with the guest's timer, for both front doors: refused
/// outside the calls that may set timers, and a new timer past the instance's timer limit.
pub(crate) fn change_timer_checked(
    state: &mut GuestState,
    import: &'static str,
    domain: TimeDomain,
    timestamp: i64,
    key: &[u8],
) -> wasmtime::Result<()> {
    if !state.call.may_set_timers() {
        return Err(misuse(import, state.call_name()));
    }
    if import == imports::TIMER_DELETE {
        state.host.time.timers_mut(domain).delete(timestamp, key);
        return Ok(());
    }
    let limit = state.limits.max_timer_bytes;
    if state
        .host
        .time
        .timer_bytes()
        .saturating_add(Timers::cost(key))
        > limit
        && !state.host.time.timers(domain).contains(timestamp, key)
    {
        return Err(Abort::error(GuestFailure::TimersTooLarge { limit }));
    }
    state.host.time.timers_mut(domain).set(timestamp, key);
    Ok(())
}

/// `state_get(ptr, len) -> i32`: reads the entries the read request at `ptr` names from the
/// task's keyed state (`docs/ABI.md` §17), keeps the result for `state_result`, and returns its
/// length; allowed where `emit` is.
fn state_get(mut caller: Caller<'_, GuestState>, ptr: i32, len: i32) -> wasmtime::Result<i32> {
    let memory = guest_memory(&mut caller)?;
    let (data, state) = memory.data_and_store_mut(&mut caller);
    let request = guest_range(data, "`state_get` request", ptr, len)?;
    let result = state_get_checked(state, request)?;
    // The result is at most the guest's memory's worth of values (each read is of a value it
    // wrote, within the 16 MiB limit, and a guest allocates the result in its own memory).
    let len = i32::try_from(result.len()).map_err(|_| {
        Abort::error(GuestFailure::StateRequest {
            import: imports::STATE_GET,
            problem: format!(
                "its result would be {} bytes, over 2 GiB: read fewer keys at once",
                result.len()
            ),
        })
    })?;
    state.state_result = Some(result);
    Ok(len)
}

/// What `state_get` does with the guest's request, for both front doors: refused outside the
/// calls that may make output, and read; returns the read result. A core module's import
/// keeps it for `state_result`; a component's call returns it.
pub(crate) fn state_get_checked(
    state: &mut GuestState,
    request: &[u8],
) -> wasmtime::Result<Vec<u8>> {
    let keyed = keyed_state(state, imports::STATE_GET)?;
    let mut result = Vec::new();
    keyed
        .get(request, &mut result)
        .map_err(|e| keyed_failure(imports::STATE_GET, e))?;
    Ok(result)
}

/// `state_result(ptr)`: copies the result of the last `state_get` to `ptr`, once.
fn state_result(mut caller: Caller<'_, GuestState>, ptr: i32) -> wasmtime::Result<()> {
    let Some(result) = caller.data_mut().state_result.take() else {
        return Err(Abort::error(GuestFailure::NoStateResult));
    };
    let memory = guest_memory(&mut caller)?;
    let len = i32::try_from(result.len()).expect("state_get returned the length as an i32");
    let data = memory.data_mut(&mut caller);
    let out = guest_range_mut(data, "`state_result` buffer", ptr, len)?;
    out.copy_from_slice(&result);
    Ok(())
}

/// `state_write(ptr, len)`: applies the write request at `ptr` to the task's keyed state
/// (`docs/ABI.md` §17); allowed where `emit` is.
fn state_write(mut caller: Caller<'_, GuestState>, ptr: i32, len: i32) -> wasmtime::Result<()> {
    let memory = guest_memory(&mut caller)?;
    let (data, state) = memory.data_and_store_mut(&mut caller);
    let request = guest_range(data, "`state_write` request", ptr, len)?;
    state_write_checked(state, request)
}

/// What `state_write` does with the guest's request, for both front doors: refused outside the
/// calls that may make output, and applied whole.
pub(crate) fn state_write_checked(state: &mut GuestState, request: &[u8]) -> wasmtime::Result<()> {
    keyed_state(state, imports::STATE_WRITE)?
        .write(request)
        .map_err(|e| keyed_failure(imports::STATE_WRITE, e))
}

/// The instance's keyed state, for `import` during the running call: refused where output may
/// not be made, and in an instance given no store.
fn keyed_state<'a>(
    state: &'a mut GuestState,
    import: &'static str,
) -> wasmtime::Result<&'a mut crate::state::keyed::section::KeyedState> {
    if !state.call.may_emit() {
        return Err(misuse(import, state.call_name()));
    }
    state
        .host
        .keyed
        .as_mut()
        .ok_or_else(|| Abort::error(GuestFailure::NoKeyedState { import }))
}

/// The failure of a keyed-state import: the guest's for a malformed request, the store's
/// otherwise.
fn keyed_failure(
    import: &'static str,
    error: crate::state::keyed::section::KeyedError,
) -> wasmtime::Error {
    use crate::state::keyed::section::KeyedError;
    Abort::error(match error {
        KeyedError::Request(problem) => GuestFailure::StateRequest {
            import,
            problem: problem.to_string(),
        },
        KeyedError::Store(e) => GuestFailure::StateStore {
            message: e.to_string(),
        },
    })
}

/// `current_time(domain) -> i64`: the task's watermark (domain 0) or the host's clock in
/// milliseconds since the Unix epoch (domain 1); allowed in every call.
fn current_time(caller: Caller<'_, GuestState>, domain: i32) -> wasmtime::Result<i64> {
    let domain = time_domain(imports::CURRENT_TIME, domain)?;
    Ok(current_time_of(caller.data(), domain))
}

/// The current time of `domain` for the instance of `state`: its task's watermark, or the
/// host's clock.
pub(crate) fn current_time_of(state: &GuestState, domain: TimeDomain) -> i64 {
    match domain {
        TimeDomain::Event => state.host.time.watermark,
        TimeDomain::Processing => wall_clock_millis(),
    }
}

/// The host's clock, in milliseconds since the Unix epoch: what processing time is.
pub(crate) fn wall_clock_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
        })
}

/// The time domain numbered `code`, or the failure of `import` given another number.
fn time_domain(import: &'static str, code: i32) -> wasmtime::Result<TimeDomain> {
    TimeDomain::from_code(code as u32)
        .ok_or_else(|| Abort::error(GuestFailure::TimeDomain { import, code }))
}

/// Output is kept in buffers of about this many bytes: batches emitted one after another are
/// joined into the last buffer while it stays within this size.
pub(crate) const OUTPUT_CHUNK_BYTES: usize = 1 << 20;

/// Appends the checked output batch `bytes` to `output`: joined
/// to the last buffer (its records after the last buffer's, the record count added up) when
/// that stays within [`OUTPUT_CHUNK_BYTES`], else as a buffer of its own.
///
/// Joining changes nothing downstream — the dataflow and the tools read output record by
/// record — but it keeps the host from making one small allocation per `emit`: a guest
/// emitting empty or tiny batches in a loop used to leave the host tens of MiB of small
/// allocations per call, which the allocator kept for the thread's arena after the call
/// failed, so each restart on a new task thread added as much again (measured: 80 MiB peak
/// for one attempt, 158 MiB for three).
fn append_output(output: &mut Vec<Vec<u8>>, bytes: &[u8]) {
    if let Some(last) = output.last_mut()
        && join(last, bytes)
    {
        return;
    }
    output.push(bytes.to_vec());
}

/// Joins the checked batch `bytes` to the buffer `last` when that stays within
/// [`OUTPUT_CHUNK_BYTES`]; returns whether it did.
fn join(last: &mut Vec<u8>, bytes: &[u8]) -> bool {
    last.len() + (bytes.len() - HEADER_LEN) <= OUTPUT_CHUNK_BYTES && append_records(last, bytes)
}

/// `save_state(ptr, len)`: appends bytes to the snapshot; allowed during `weir_snapshot`.
fn save_state(mut caller: Caller<'_, GuestState>, ptr: i32, len: i32) -> wasmtime::Result<()> {
    let state = caller.data();
    if state.call != Call::Snapshot {
        return Err(misuse(imports::SAVE_STATE, state.call.name()));
    }
    let limit = state.limits.max_state_bytes;
    let memory = guest_memory(&mut caller)?;
    let (data, state) = memory.data_and_store_mut(&mut caller);
    let bytes = guest_range(data, "`save_state` bytes", ptr, len)?;
    if state
        .snapshot
        .len()
        .checked_add(bytes.len())
        .is_none_or(|total| total > limit)
    {
        return Err(Abort::error(GuestFailure::StateTooLarge { limit }));
    }
    state.snapshot.extend_from_slice(bytes);
    Ok(())
}

/// `fail(ptr, len)`: fails the running call with the guest's message; never returns to it.
fn fail(mut caller: Caller<'_, GuestState>, ptr: i32, len: i32) -> wasmtime::Result<()> {
    let memory = guest_memory(&mut caller)?;
    let message = message(guest_range(
        memory.data(&caller),
        "`fail` message",
        ptr,
        len,
    )?);
    Err(Abort::error(GuestFailure::Failed { message }))
}

/// `log(level, ptr, len)`: writes the guest's message as a `tracing` event tagged with the
/// operator and subtask.
fn log(mut caller: Caller<'_, GuestState>, level: i32, ptr: i32, len: i32) -> wasmtime::Result<()> {
    let memory = guest_memory(&mut caller)?;
    let (data, state) = memory.data_and_store_mut(&mut caller);
    let text = message(guest_range(data, "`log` message", ptr, len)?);
    log_line(state, level, text);
    Ok(())
}

/// Writes a guest's log line at `level` (one of [`log_level`]; others are info), tagged with the
/// operator, subtask and call; an error line is kept to report with a failed status.
pub(crate) fn log_line(state: &mut GuestState, level: i32, text: String) {
    let (operator, subtask, call) = (state.operator.as_str(), state.subtask, state.call_name());
    match level {
        log_level::ERROR => {
            tracing::error!(target: LOG_TARGET, operator, subtask, call, "{text}");
            state.last_error_log = Some(text);
        }
        log_level::WARN => tracing::warn!(target: LOG_TARGET, operator, subtask, call, "{text}"),
        log_level::DEBUG => tracing::debug!(target: LOG_TARGET, operator, subtask, call, "{text}"),
        log_level::TRACE => tracing::trace!(target: LOG_TARGET, operator, subtask, call, "{text}"),
        _ => tracing::info!(target: LOG_TARGET, operator, subtask, call, "{text}"),
    }
}

/// `env.abort(message, file, line, column)`: AssemblyScript's failure (a `throw` or a failed
/// `assert`); fails the running call with its message and source location, never returns.
///
/// `message` and `file` point to AssemblyScript strings (or are 0 when absent); see
/// [`assemblyscript_string`].
fn abort(
    mut caller: Caller<'_, GuestState>,
    message: i32,
    file: i32,
    line: i32,
    column: i32,
) -> wasmtime::Result<()> {
    let memory = guest_memory(&mut caller)?;
    let data = memory.data(&caller);
    Err(Abort::error(GuestFailure::Aborted {
        message: assemblyscript_string(data, message),
        file: assemblyscript_string(data, file),
        line: line as u32,
        column: column as u32,
    }))
}

/// The AssemblyScript string at `ptr`, or `None` for a null pointer.
///
/// An AssemblyScript string is UTF-16LE code units at `ptr`, preceded by its object header,
/// whose last field (the `u32` at `ptr - 4`) is the length in bytes. Read defensively: a
/// header or text outside `memory` gives a placeholder naming the pointer, the text is cut at
/// [`MAX_MESSAGE_BYTES`], an odd last byte is dropped and unpaired surrogates are replaced.
pub(crate) fn assemblyscript_string(memory: &[u8], ptr: i32) -> Option<Box<str>> {
    let ptr = ptr as u32 as usize;
    if ptr == 0 {
        return None;
    }
    let unreadable = || format!("<unreadable string at {ptr}: outside the guest memory>").into();
    let Some(header) = ptr.checked_sub(4).and_then(|start| memory.get(start..ptr)) else {
        return Some(unreadable());
    };
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let kept = len.min(MAX_MESSAGE_BYTES) & !1;
    let Some(bytes) = ptr.checked_add(kept).and_then(|end| memory.get(ptr..end)) else {
        return Some(unreadable());
    };
    let units = bytes
        .chunks_exact(2)
        .map(|pair| u16::from_le_bytes([pair[0], pair[1]]));
    let mut text: String = char::decode_utf16(units)
        .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
        .collect();
    if kept < (len & !1) {
        text.push_str(&format!(" … [cut at {kept} of {len} bytes]"));
    }
    Some(text.into())
}

/// The failure of calling `import` during `call`.
fn misuse(import: &'static str, call: &'static str) -> wasmtime::Error {
    Abort::error(GuestFailure::ImportMisuse { import, call })
}

/// The guest's exported memory (checked at load time, so always there in practice).
fn guest_memory(caller: &mut Caller<'_, GuestState>) -> wasmtime::Result<Memory> {
    if let Some(memory) = caller.data().memory {
        return Ok(memory);
    }
    match caller.get_export(exports::MEMORY) {
        Some(Extern::Memory(memory)) => Ok(memory),
        _ => Err(Abort::error(GuestFailure::Runtime {
            message: format!(
                "the guest has no exported memory named `{}`",
                exports::MEMORY
            ),
        })),
    }
}

/// The bytes at `ptr..ptr+len` of `memory`, or an [`Abort`] naming `what` when the range does
/// not fit. Pointers and lengths are read as unsigned 32-bit numbers (`docs/ABI.md`, Words).
pub(crate) fn guest_range<'a>(
    memory: &'a [u8],
    what: &'static str,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<&'a [u8]> {
    let range = checked_range(memory.len(), what, ptr, len)?;
    Ok(&memory[range])
}

/// [`guest_range`], writable.
fn guest_range_mut<'a>(
    memory: &'a mut [u8],
    what: &'static str,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<&'a mut [u8]> {
    let range = checked_range(memory.len(), what, ptr, len)?;
    Ok(&mut memory[range])
}

/// The range `ptr..ptr+len` of a memory of `memory_len` bytes, or an [`Abort`] naming `what`
/// when it does not fit.
fn checked_range(
    memory_len: usize,
    what: &'static str,
    ptr: i32,
    len: i32,
) -> wasmtime::Result<std::ops::Range<usize>> {
    let (ptr, len) = (ptr as u32, len as u32);
    let start = ptr as usize;
    start
        .checked_add(len as usize)
        .filter(|&end| end <= memory_len)
        .map(|end| start..end)
        .ok_or_else(|| {
            Abort::error(GuestFailure::OutOfBounds {
                what,
                ptr,
                len,
                memory_len,
            })
        })
}

/// A guest message as text: cut at [`MAX_MESSAGE_BYTES`], invalid UTF-8 replaced.
pub(crate) fn message(bytes: &[u8]) -> String {
    if bytes.len() <= MAX_MESSAGE_BYTES {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut text = String::from_utf8_lossy(&bytes[..MAX_MESSAGE_BYTES]).into_owned();
    text.push_str(&format!(
        " … [cut at {MAX_MESSAGE_BYTES} of {} bytes]",
        bytes.len()
    ));
    text
}
