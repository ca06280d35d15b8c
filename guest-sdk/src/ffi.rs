//! The wasm side of the ABI's exports: buffer ownership, the panic hook. With `imports.rs` (the
//! host's imports), the only `unsafe` code of the SDK.
//!
//! [`export!`](crate::export!) expands to one `#[unsafe(no_mangle)]` function per ABI export, each
//! a one-line call into a function of this module. Those functions turn raw pointers into
//! slices, run the safe code of `dispatch`, and report any error through the `fail` import —
//! never as a bare status — so the host always gets a message.
//!
//! Ownership (`docs/ABI.md` §7): the host asks [`alloc`] for exactly the length of each buffer it
//! passes to `weir_init`, `weir_process`, `weir_on_timers` or `weir_restore`, fills it, and gives
//! it up. The call
//! that receives it frees it on return (`HostBuffer`). An empty buffer arrives as pointer 0,
//! length 0, with no allocation. Buffers passed to imports stay ours; the host copies them.
//!
//! The module is compiled for wasm32 only and is not part of the public API.

use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::Once;
use std::thread::LocalKey;

use crate::output::{Output, Sink};
use crate::{Error, Operator, Result, State, dispatch, imports};

/// Where the export macro keeps the operator instance: one per wasm instance.
pub type Slot<T> = LocalKey<RefCell<Option<T>>>;

thread_local! {
    /// The output of the current call; its batch buffer is reused from call to call.
    static OUTPUT: RefCell<Output> = RefCell::new(Output::new(Sink::Host));
}

/// `weir_abi_version`.
pub fn abi_version() -> i32 {
    weir_abi::ABI_VERSION as i32
}

/// `weir_alloc`: `len` writable bytes for the host, or 0 if they cannot be had.
pub fn alloc(len: i32) -> i32 {
    install_panic_hook();
    let len = len as u32 as usize;
    let Some(layout) = byte_layout(len) else {
        return 0;
    };
    let ptr = if len == 0 {
        // The host never asks for 0 bytes; should it, a dangling non-null pointer is a valid
        // answer, and `HostBuffer` never reads or frees a zero-length buffer.
        NonNull::<u8>::dangling().as_ptr()
    } else {
        // SAFETY: `layout` has a non-zero size, as `alloc` requires.
        unsafe { std::alloc::alloc(layout) }
    };
    // wasm32 addresses are 32 bits: the cast keeps every bit. A null pointer becomes 0, the
    // ABI's "cannot allocate".
    ptr.expose_provenance() as i32
}

/// `weir_init`: creates the operator from the init message at `ptr..ptr + len`.
///
/// # Safety
/// `ptr` and `len` must be what the host passed to the export, under ABI §7: see
/// `HostBuffer::adopt`.
pub unsafe fn init<T: Operator>(slot: &'static Slot<T>, ptr: i32, len: i32) -> i32 {
    install_panic_hook();
    // SAFETY: the caller passes on the host's buffer, per this function's contract.
    let message = unsafe { HostBuffer::adopt(ptr, len) };
    let operator = dispatch::init::<T>(message.bytes());
    status(operator.map(|operator| slot.set(Some(operator))))
}

/// `weir_process`: runs the operator on the batch at `ptr..ptr + len`.
///
/// # Safety
/// `ptr` and `len` must be what the host passed to the export, under ABI §7: see
/// `HostBuffer::adopt`.
pub unsafe fn process<T: Operator>(slot: &'static Slot<T>, ptr: i32, len: i32) -> i32 {
    install_panic_hook();
    // SAFETY: the caller passes on the host's buffer, per this function's contract.
    let batch = unsafe { HostBuffer::adopt(ptr, len) };
    status(with_operator(slot, "weir_process", |operator| {
        OUTPUT.with_borrow_mut(|out| dispatch::process(operator, batch.bytes(), out))
    }))
}

/// `weir_on_timers`: hands the operator the timers that fired, in the batch at `ptr..ptr + len`.
///
/// # Safety
/// `ptr` and `len` must be what the host passed to the export, under ABI §7: see
/// `HostBuffer::adopt`.
pub unsafe fn on_timers<T: Operator>(slot: &'static Slot<T>, ptr: i32, len: i32) -> i32 {
    install_panic_hook();
    // SAFETY: the caller passes on the host's buffer, per this function's contract.
    let batch = unsafe { HostBuffer::adopt(ptr, len) };
    status(with_operator(slot, "weir_on_timers", |operator| {
        OUTPUT.with_borrow_mut(|out| dispatch::on_timers(operator, batch.bytes(), out))
    }))
}

/// `weir_on_watermark`: tells the operator the watermark advanced to `watermark`.
pub fn on_watermark<T: Operator>(slot: &'static Slot<T>, watermark: i64) -> i32 {
    install_panic_hook();
    status(with_operator(slot, "weir_on_watermark", |operator| {
        OUTPUT.with_borrow_mut(|out| dispatch::on_watermark(operator, watermark, out))
    }))
}

/// `weir_finish`: lets the operator emit its last records.
pub fn finish<T: Operator>(slot: &'static Slot<T>) -> i32 {
    install_panic_hook();
    status(with_operator(slot, "weir_finish", |operator| {
        OUTPUT.with_borrow_mut(|out| dispatch::finish(operator, out))
    }))
}

/// `weir_snapshot`: hands the operator's state to the host through `save_state`.
pub fn snapshot<T: Operator + State>(slot: &'static Slot<T>, _checkpoint_id: i64) -> i32 {
    install_panic_hook();
    status(with_operator(slot, "weir_snapshot", |operator| {
        let state = operator.snapshot()?;
        imports::save_state(&state);
        Ok(())
    }))
}

/// `weir_restore`: replaces the operator's state with the snapshot at `ptr..ptr + len`.
///
/// # Safety
/// `ptr` and `len` must be what the host passed to the export, under ABI §7: see
/// `HostBuffer::adopt`.
pub unsafe fn restore<T: Operator + State>(slot: &'static Slot<T>, ptr: i32, len: i32) -> i32 {
    install_panic_hook();
    // SAFETY: the caller passes on the host's buffer, per this function's contract.
    let snapshot = unsafe { HostBuffer::adopt(ptr, len) };
    status(with_operator(slot, "weir_restore", |operator| {
        operator.restore(snapshot.bytes())
    }))
}

/// `weir_checkpoint_complete`: tells the operator its checkpoints up to `checkpoint_id` are
/// durable.
pub fn checkpoint_complete<T: Operator>(slot: &'static Slot<T>, checkpoint_id: i64) -> i32 {
    install_panic_hook();
    // Checkpoint ids are positive (ABI §3), so the cast keeps the value.
    let checkpoint_id = checkpoint_id as u64;
    status(with_operator(
        slot,
        "weir_checkpoint_complete",
        |operator| operator.checkpoint_complete(checkpoint_id),
    ))
}

/// The status an export returns: 0, or — on error — no return at all, through `fail`.
fn status(result: Result<()>) -> i32 {
    match result {
        Ok(()) => 0,
        Err(error) => imports::fail(error.message()),
    }
}

/// Runs `f` on the operator, which `weir_init` must have created.
fn with_operator<T>(
    slot: &'static Slot<T>,
    export: &str,
    f: impl FnOnce(&mut T) -> Result<()>,
) -> Result<()> {
    slot.with_borrow_mut(|operator| match operator {
        Some(operator) => f(operator),
        None => Err(Error::msg(format!("{export} called before weir_init"))),
    })
}

/// Makes panics fail the call with their message and location. Runs its body once.
fn install_panic_hook() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let message = info.payload_as_str().unwrap_or("Box<dyn Any>");
            // `Location` displays as `file:line:column`.
            let text = match info.location() {
                Some(at) => format!("panicked at {at}: {message}"),
                None => format!("panicked: {message}"),
            };
            imports::fail(&text)
        }))
    });
}

/// The layout [`alloc`] uses for `len` bytes, and [`HostBuffer`] frees with.
fn byte_layout(len: usize) -> Option<Layout> {
    Layout::from_size_align(len, 1).ok()
}

/// A buffer the host filled and handed over; freed when dropped.
struct HostBuffer {
    /// Start of the buffer; meaningless when `len` is 0.
    ptr: *mut u8,
    /// Length in bytes, as passed to `weir_alloc`.
    len: usize,
}

impl HostBuffer {
    /// Takes ownership of the host's buffer at `ptr..ptr + len`.
    ///
    /// # Safety
    /// Either `len` is 0 (the pointer is then ignored), or `ptr` was returned by [`alloc`] for
    /// exactly `len` bytes, the host has written all of them, has not freed or passed the
    /// buffer before, and will not touch it again (ABI §7). Only the host calls the exports
    /// that pass these values on.
    unsafe fn adopt(ptr: i32, len: i32) -> Self {
        let len = len as u32 as usize;
        HostBuffer {
            ptr: std::ptr::with_exposed_provenance_mut(ptr as u32 as usize),
            len,
        }
    }

    fn bytes(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: by `adopt`'s contract, `ptr` points to `len` initialised bytes that are ours
        // alone until `drop`, which cannot run while this borrow of `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        if let Some(layout) = byte_layout(self.len) {
            // SAFETY: by `adopt`'s contract, `ptr` came from `alloc` with this very layout and
            // is freed only here, once.
            unsafe { std::alloc::dealloc(self.ptr, layout) }
        }
    }
}
