//! Guest limits as the job file sets them: the `[limits]` table and each
//! operator's `limits` override (docs/ABI.md §9 says how the host enforces them).

use std::time::Duration;

use crate::wasm::GuestLimits;

/// The bounds on one operator's guests, as plain values.
///
/// The job file's `[limits]` table sets them for every operator; an
/// operator's own `limits` overrides them key by key. The wasm layer enforces
/// them per instance or per call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest linear memory of one instance, in bytes (`max_memory`, at least one
    /// 64 KiB wasm page).
    pub max_memory_bytes: usize,
    /// Longest running time of one call into the guest (`call_timeout`).
    pub call_timeout: Duration,
    /// Most output one call may emit, in bytes (`max_output`).
    pub max_output_bytes: usize,
    /// Largest snapshot one call may save, in bytes (`max_state`).
    pub max_state_bytes: usize,
}

impl Limits {
    /// One wasm page: the least `max_memory` that lets a guest have memory at all.
    pub const MIN_MEMORY_BYTES: usize = 64 << 10;
}

impl From<Limits> for GuestLimits {
    /// The same bounds, for the wasm layer that enforces them: the two types mirror each
    /// other field by field, so the job file's settings reach every guest unchanged.
    fn from(limits: Limits) -> Self {
        let Limits {
            max_memory_bytes,
            call_timeout,
            max_output_bytes,
            max_state_bytes,
        } = limits;
        GuestLimits {
            max_memory_bytes,
            call_timeout,
            max_output_bytes,
            max_state_bytes,
        }
    }
}

impl Default for Limits {
    /// 256 MiB memory, 10 s per call, 64 MiB output per call, 1 GiB state.
    fn default() -> Self {
        Limits {
            max_memory_bytes: 256 << 20,
            call_timeout: Duration::from_secs(10),
            max_output_bytes: 64 << 20,
            max_state_bytes: 1 << 30,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_defaults_are_the_wasm_layers_defaults() {
        assert_eq!(GuestLimits::from(Limits::default()), GuestLimits::default());
    }
}
