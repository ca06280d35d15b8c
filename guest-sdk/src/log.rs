//! Log lines from an operator.
//!
//! In wasm each line goes to the host's `log` import, which tags it with the operator and
//! subtask; natively (in tests) it is written to stderr. Format the message first:
//! `weir_sdk::log::info(&format!("loaded {n} rules"))`.

use weir_abi::log_level;

/// Something went wrong.
pub fn error(message: &str) {
    write(log_level::ERROR, message);
}

/// Something looks wrong.
pub fn warn(message: &str) {
    write(log_level::WARN, message);
}

/// Normal progress worth telling whoever runs the job.
pub fn info(message: &str) {
    write(log_level::INFO, message);
}

/// Detail for the operator's author.
pub fn debug(message: &str) {
    write(log_level::DEBUG, message);
}

/// Very fine detail.
pub fn trace(message: &str) {
    write(log_level::TRACE, message);
}

#[cfg(target_arch = "wasm32")]
fn write(level: i32, message: &str) {
    crate::imports::log(level, message);
}

#[cfg(not(target_arch = "wasm32"))]
fn write(level: i32, message: &str) {
    let level = match level {
        log_level::ERROR => "error",
        log_level::WARN => "warn",
        log_level::DEBUG => "debug",
        log_level::TRACE => "trace",
        _ => "info",
    };
    eprintln!("[{level}] {message}");
}
