//! Gives the restore check the Rust `count` guest, as the compile-time variable
//! `WEIR_GUEST_COUNT` (the path of its `.wasm`, embedded by `include_bytes!`).
//!
//! By default the guest is built from source for wasm32 by `weir-guest-build`, as the test
//! crate builds its guests, so `cargo test` needs no manual step. When
//! `WEIR_FUZZ_GUEST_COUNT` names a module that is already built, that one is used instead:
//! `scripts/fuzz.sh` sets it, because the fuzz build runs on nightly, which need not have the
//! wasm32 target, while `scripts/build-guests.sh` builds the guest with the stable toolchain.

use std::env;
use std::path::Path;

use weir_guest_build::Guest;

/// The variable that may name a prebuilt `count` module.
const PREBUILT: &str = "WEIR_FUZZ_GUEST_COUNT";

fn main() {
    println!("cargo:rerun-if-env-changed={PREBUILT}");
    match env::var_os(PREBUILT) {
        Some(path) => {
            let path = Path::new(&path);
            assert!(
                path.is_file(),
                "{PREBUILT}={} is not a file: build the guest with \
                 `bash scripts/build-guests.sh`, or unset {PREBUILT} to build it here",
                path.display()
            );
            println!("cargo:rerun-if-changed={}", path.display());
            println!("cargo:rustc-env=WEIR_GUEST_COUNT={}", path.display());
        }
        None => {
            weir_guest_build::build(
                &[Guest {
                    package: "weir-example-count",
                    env: "WEIR_GUEST_COUNT",
                }],
                &[],
            );
        }
    }
}
