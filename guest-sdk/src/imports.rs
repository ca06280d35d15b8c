//! The host's imports (`docs/ABI.md` §4), each behind a safe function: with `ffi.rs` (the
//! exports), the only `unsafe` code of the SDK.
//!
//! A module of its own so that what calls the host (the [`Output`](crate::Output) of a call,
//! the log, the exports) imports it without importing the exports, which hand that output to
//! the operator. Compiled for wasm32 only.

use weir_abi::TimeDomain;

#[link(wasm_import_module = "weir")]
unsafe extern "C" {
    /// `emit(ptr, len)`: appends one output batch; the host copies it.
    #[link_name = "emit"]
    fn weir_emit(ptr: *const u8, len: usize);
    /// `save_state(ptr, len)`: appends bytes to the snapshot being taken.
    #[link_name = "save_state"]
    fn weir_save_state(ptr: *const u8, len: usize);
    /// `fail(ptr, len)`: fails the call with a UTF-8 message; the host stops the guest.
    #[link_name = "fail"]
    fn weir_fail(ptr: *const u8, len: usize);
    /// `log(level, ptr, len)`: writes a UTF-8 line to the host's log.
    #[link_name = "log"]
    fn weir_log(level: i32, ptr: *const u8, len: usize);
    /// `emit_to(name_ptr, name_len, ptr, len)`: appends one output batch to the side output
    /// named by the UTF-8 text at `name_ptr`; the host copies both.
    #[link_name = "emit_to"]
    fn weir_emit_to(name_ptr: *const u8, name_len: usize, ptr: *const u8, len: usize);
    /// `timer_set(domain, timestamp, key_ptr, key_len)`: sets a timer; the host copies the key.
    #[link_name = "timer_set"]
    fn weir_timer_set(domain: i32, timestamp: i64, key_ptr: *const u8, key_len: usize);
    /// `timer_delete(domain, timestamp, key_ptr, key_len)`: deletes a timer, if set.
    #[link_name = "timer_delete"]
    fn weir_timer_delete(domain: i32, timestamp: i64, key_ptr: *const u8, key_len: usize);
    /// `current_time(domain)`: the watermark (0) or the host's clock (1), in milliseconds.
    #[link_name = "current_time"]
    fn weir_current_time(domain: i32) -> i64;
    /// `state_get(ptr, len)`: reads host-kept keyed state; returns the result's length.
    #[link_name = "state_get"]
    fn weir_state_get(ptr: *const u8, len: usize) -> i32;
    /// `state_result(ptr)`: copies the last `state_get`'s result to `ptr`.
    #[link_name = "state_result"]
    fn weir_state_result(ptr: *mut u8);
    /// `state_write(ptr, len)`: writes host-kept keyed state; the host copies the request.
    #[link_name = "state_write"]
    fn weir_state_write(ptr: *const u8, len: usize);
}

// The `link_name`s above must be literals; keep them equal to the names in `weir-abi`.
const _: () = {
    assert!(same(weir_abi::IMPORT_MODULE, "weir"));
    assert!(same(weir_abi::imports::EMIT, "emit"));
    assert!(same(weir_abi::imports::SAVE_STATE, "save_state"));
    assert!(same(weir_abi::imports::FAIL, "fail"));
    assert!(same(weir_abi::imports::LOG, "log"));
    assert!(same(weir_abi::imports::EMIT_TO, "emit_to"));
    assert!(same(weir_abi::imports::TIMER_SET, "timer_set"));
    assert!(same(weir_abi::imports::TIMER_DELETE, "timer_delete"));
    assert!(same(weir_abi::imports::CURRENT_TIME, "current_time"));
    assert!(same(weir_abi::imports::STATE_GET, "state_get"));
    assert!(same(weir_abi::imports::STATE_RESULT, "state_result"));
    assert!(same(weir_abi::imports::STATE_WRITE, "state_write"));
};

const fn same(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Sends one output batch to the host.
pub(crate) fn emit(batch: &[u8]) {
    // SAFETY: `batch` is a live slice; the host copies it during the call.
    unsafe { weir_emit(batch.as_ptr(), batch.len()) }
}

/// Sends one output batch to the host for the side output `name` (1 to 255 bytes, which
/// `Output` checks).
pub(crate) fn emit_to(name: &str, batch: &[u8]) {
    // SAFETY: `name` and `batch` are live slices; the host copies them during the call.
    unsafe { weir_emit_to(name.as_ptr(), name.len(), batch.as_ptr(), batch.len()) }
}

/// Sets a timer for `key` at `timestamp` in `domain`.
pub(crate) fn timer_set(domain: TimeDomain, timestamp: i64, key: &[u8]) {
    // The domain codes are 0 and 1: the cast keeps them.
    let domain = domain.code() as i32;
    // SAFETY: `key` is a live slice; the host copies it during the call.
    unsafe { weir_timer_set(domain, timestamp, key.as_ptr(), key.len()) }
}

/// Deletes the timer for `key` at `timestamp` in `domain`, if it is set.
pub(crate) fn timer_delete(domain: TimeDomain, timestamp: i64, key: &[u8]) {
    let domain = domain.code() as i32;
    // SAFETY: `key` is a live slice; the host copies it during the call.
    unsafe { weir_timer_delete(domain, timestamp, key.as_ptr(), key.len()) }
}

/// The current time of `domain`: the task's watermark, or the host's clock.
pub(crate) fn current_time(domain: TimeDomain) -> i64 {
    // SAFETY: the import takes a number and reads no memory.
    unsafe { weir_current_time(domain.code() as i32) }
}

/// Writes a line to the host's log.
pub(crate) fn log(level: i32, message: &str) {
    // SAFETY: `message` is a live slice; the host copies it during the call.
    unsafe { weir_log(level, message.as_ptr(), message.len()) }
}

/// Appends `state` to the snapshot being taken.
pub(crate) fn save_state(state: &[u8]) {
    // SAFETY: `state` is a live slice; the host only reads it during the call.
    unsafe { weir_save_state(state.as_ptr(), state.len()) }
}

/// Fails the current call with `message`. The host stops the guest inside the import.
pub(crate) fn fail(message: &str) -> ! {
    // SAFETY: `message` is a live slice; the host copies it during the call.
    unsafe { weir_fail(message.as_ptr(), message.len()) };
    // `fail` does not return (ABI §4); if a host let it, trap rather than run on.
    std::process::abort()
}

/// Reads host-kept keyed state: the result of the read request `request` (`docs/ABI.md` §17).
pub(crate) fn state_get(request: &[u8]) -> Vec<u8> {
    // SAFETY: `request` is a live slice; the host copies it during the call.
    let len = unsafe { weir_state_get(request.as_ptr(), request.len()) };
    // The host fails the call rather than return a negative length.
    let len = len as usize;
    let mut result = Vec::with_capacity(len);
    // SAFETY: `result` has room for `len` bytes, which the host writes in full before the
    // call returns (it fails the call otherwise); only then is the length set.
    unsafe {
        weir_state_result(result.as_mut_ptr());
        result.set_len(len);
    }
    result
}

/// Writes host-kept keyed state: the write request `request` (`docs/ABI.md` §17).
pub(crate) fn state_write(request: &[u8]) {
    // SAFETY: `request` is a live slice; the host copies it during the call.
    unsafe { weir_state_write(request.as_ptr(), request.len()) }
}
