//! libFuzzer target: the checks of `weir_fuzz_checks::batch_codec`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| weir_fuzz_checks::batch_codec::check(data));
