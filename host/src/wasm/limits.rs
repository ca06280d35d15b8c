//! The bounds the host puts on every guest (`docs/ABI.md` §9).
//!
//! [`GuestLimits`] is both what the job file's `[limits]` table and each operator's `limits`
//! override validate into and what the wasm layer enforces: one type, so a setting reaches
//! every guest without a conversion that could drift from it. The job layer imports it from
//! here, since the wasm layer sits below the job.

use std::time::Duration;

/// Longest `fail` or `log` message the host keeps, in bytes; longer ones are cut.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024;

/// Most elements the tables of one guest instance may hold together.
///
/// Not a job setting: each element costs the host a pointer, and a guest that
/// needs more than a million indirect-call targets is broken, not big. The bound is on the sum
/// over all of an instance's tables, not on each: a module may define up to 100 tables, and a
/// per-table bound would let it hold 100 times as much host memory.
pub const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// What each batch passed to `emit` counts against [`GuestLimits::max_output_bytes`] on top of
/// its own length, in bytes.
///
/// Every `emit` costs the host a call, a check and a decode, whatever the batch holds; an
/// empty batch carries 8 bytes. Without this charge a guest emitting empty batches in a loop
/// made about 8 million `emit` calls within the 64 MiB default (5 s, and 470 MiB of host
/// memory before output was joined into shared buffers, measured); with it, one call makes at
/// most `max_output / 72` of them, and a flood of empty batches is stopped like a flood of
/// full ones.
pub const OUTPUT_BATCH_OVERHEAD: usize = 64;

/// The limits of one operator's guests, each enforced per instance or per call.
///
/// The job file's `[limits]` table sets them for every operator, and an operator's own
/// `limits` overrides them key by key (docs/JOB.md); each [`OperatorModule`](super::OperatorModule)
/// carries its operator's. A guest that exceeds one fails with a [`GuestFailure`](super::GuestFailure)
/// naming the limit; the host itself is never at risk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestLimits {
    /// Largest linear memory of one instance, in bytes (job setting `limits.max_memory`, at
    /// least [`MIN_MEMORY_BYTES`](Self::MIN_MEMORY_BYTES)).
    /// Growing past it traps the guest with
    /// [`GuestFailure::MemoryLimit`](super::GuestFailure::MemoryLimit).
    pub max_memory_bytes: usize,
    /// Longest running time of one call into the guest (`limits.call_timeout`). Enforced by
    /// epoch interruption, so a guest overrunning it is stopped within about one epoch tick.
    pub call_timeout: Duration,
    /// Most output one `weir_process` or `weir_finish` call may emit, in bytes, summed over
    /// its batches, each counting [`OUTPUT_BATCH_OVERHEAD`] more than its length
    /// (`limits.max_output`).
    pub max_output_bytes: usize,
    /// Largest snapshot one `weir_snapshot` call may save, in bytes (`limits.max_state`).
    pub max_state_bytes: usize,
    /// Most timer memory one instance may hold, in bytes, each timer counting
    /// [`Timers::cost`](weir_abi::Timers::cost) (`limits.max_timer_state`; `docs/ABI.md` §15).
    pub max_timer_bytes: usize,
}

impl GuestLimits {
    /// One wasm page: the least `max_memory` that lets a guest have memory at all.
    pub const MIN_MEMORY_BYTES: usize = 64 << 10;
}

impl Default for GuestLimits {
    /// The defaults of `docs/ABI.md` §9: 256 MiB memory, 10 s per call, 64 MiB of output per
    /// call, 1 GiB of state, 256 MiB of timers.
    fn default() -> Self {
        Self {
            max_memory_bytes: 256 << 20,
            call_timeout: Duration::from_secs(10),
            max_output_bytes: 64 << 20,
            max_state_bytes: 1 << 30,
            max_timer_bytes: 256 << 20,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wasm::image::memcopy::PAGE_SIZE;

    #[test]
    fn the_least_memory_a_job_may_set_is_one_wasm_page() {
        assert_eq!(GuestLimits::MIN_MEMORY_BYTES, PAGE_SIZE);
    }
}
