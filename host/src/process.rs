//! What the host can tell of other processes on its machine: whether one is gone. Files a
//! process leaves for as long as it runs (the control endpoint's file, the stores' working
//! directory of host-kept state) name its id, and the next process removes them when that
//! process is gone, since a process killed with SIGKILL cannot.

use std::path::Path;

/// Whether the process `pid` is gone (Linux: no `/proc/PID`). `false` where that cannot be
/// told (no `/proc`): what it left is then kept.
pub(crate) fn gone(pid: u32) -> bool {
    let proc = Path::new("/proc");
    proc.join("self").exists() && !proc.join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    #[test]
    fn this_process_is_not_gone_and_one_past_the_largest_id_is() {
        assert!(!super::gone(std::process::id()));
        // Process ids stop well below this on Linux (pid_max is at most 2^22).
        if std::path::Path::new("/proc/self").exists() {
            assert!(super::gone(u32::MAX - 1));
        }
    }
}
