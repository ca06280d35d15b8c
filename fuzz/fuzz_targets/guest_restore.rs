//! libFuzzer target: the checks of `weir_fuzz_checks::guest_restore`. The guests are compiled
//! once per fuzzing process, on the first input; each input gets fresh instances.
#![no_main]

use std::sync::LazyLock;

use weir_fuzz_checks::guest_restore::RestoreTarget;

static TARGET: LazyLock<RestoreTarget> = LazyLock::new(RestoreTarget::new);

libfuzzer_sys::fuzz_target!(|data: &[u8]| TARGET.check(data));
