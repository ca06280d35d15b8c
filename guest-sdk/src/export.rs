//! [`export!`](crate::export!): turns an operator type into a Weir guest module.
//!
//! The macro is the only glue between a plain Rust operator and the ABI. On wasm32 it expands to
//! the exports of `docs/ABI.md` §3, each a one-line call into the SDK's `ffi` module, and to a
//! thread-local slot holding the instance. Elsewhere it only checks that the type can be
//! exported, so the operator crate builds and tests natively.

use crate::{Operator, State};

/// Exports `$operator` as the guest of this crate, which must be a `cdylib`.
///
/// `$operator` must implement [`Operator`] and [`State`]. Use it once per crate, at the top
/// level: `weir_sdk::export!(MyOperator);`.
///
/// On `wasm32` it generates `weir_abi_version`, `weir_alloc`, `weir_init`, `weir_process`,
/// `weir_finish`, `weir_snapshot`, `weir_restore`, `weir_checkpoint_complete`,
/// `weir_on_timers` and `weir_on_watermark`; the linker exports `memory`. On other targets it
/// generates nothing but a compile-time check.
///
/// The two time exports are always there, whether the operator uses timers or not: the host
/// only calls them (and refuses a module that imports `timer_set` without `weir_on_timers`),
/// and the default [`Operator`] methods behind them do nothing. The time imports, on the
/// contrary, are only in the module when the operator calls them: the linker drops unused ones.
#[macro_export]
macro_rules! export {
    ($operator:ty) => {
        const _: fn() = $crate::assert_exportable::<$operator>;

        #[cfg(target_arch = "wasm32")]
        const _: () = {
            ::std::thread_local! {
                static INSTANCE: ::core::cell::RefCell<::core::option::Option<$operator>> =
                    const { ::core::cell::RefCell::new(::core::option::Option::None) };
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn weir_abi_version() -> i32 {
                $crate::ffi::abi_version()
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn weir_alloc(len: i32) -> i32 {
                $crate::ffi::alloc(len)
            }

            /// # Safety
            /// Called by the host only, with a buffer from `weir_alloc` (ABI §7).
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn weir_init(ptr: i32, len: i32) -> i32 {
                // SAFETY: the host passes a buffer it got from `weir_alloc` and gives it up.
                unsafe { $crate::ffi::init(&INSTANCE, ptr, len) }
            }

            /// # Safety
            /// Called by the host only, with a buffer from `weir_alloc` (ABI §7).
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn weir_process(ptr: i32, len: i32) -> i32 {
                // SAFETY: the host passes a buffer it got from `weir_alloc` and gives it up.
                unsafe { $crate::ffi::process(&INSTANCE, ptr, len) }
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn weir_finish() -> i32 {
                $crate::ffi::finish(&INSTANCE)
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn weir_snapshot(checkpoint_id: i64) -> i32 {
                $crate::ffi::snapshot(&INSTANCE, checkpoint_id)
            }

            /// # Safety
            /// Called by the host only, with a buffer from `weir_alloc`, or 0 and 0 (ABI §7).
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn weir_restore(ptr: i32, len: i32) -> i32 {
                // SAFETY: the host passes a buffer it got from `weir_alloc` and gives it up,
                // or an empty one.
                unsafe { $crate::ffi::restore(&INSTANCE, ptr, len) }
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn weir_checkpoint_complete(checkpoint_id: i64) -> i32 {
                $crate::ffi::checkpoint_complete(&INSTANCE, checkpoint_id)
            }

            /// # Safety
            /// Called by the host only, with a buffer from `weir_alloc` (ABI §7).
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn weir_on_timers(ptr: i32, len: i32) -> i32 {
                // SAFETY: the host passes a buffer it got from `weir_alloc` and gives it up.
                unsafe { $crate::ffi::on_timers(&INSTANCE, ptr, len) }
            }

            #[unsafe(no_mangle)]
            pub extern "C" fn weir_on_watermark(watermark: i64) -> i32 {
                $crate::ffi::on_watermark(&INSTANCE, watermark)
            }
        };
    };
}

/// Compiles only for types [`export!`](crate::export!) accepts; the macro names it so that a
/// missing trait is reported on every target, not only on wasm32.
pub fn assert_exportable<T: Operator + State>() {}
