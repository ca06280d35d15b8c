//! libFuzzer target: the checks of `weir_fuzz_checks::checkpoint_metadata`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_fuzz_checks::checkpoint_metadata::check(data));
