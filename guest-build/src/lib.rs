//! Builds Weir guests from source for `wasm32-unknown-unknown`, from a build script.
//!
//! The test crate and the benchmark crate both need real guests, compiled from the example
//! crates of this workspace, and must not depend on a manual step or a committed `.wasm`
//! (the way wasmtime builds its test programs, `crates/test-programs/artifacts/build.rs`).
//! Their build scripts call [`build`]: it runs a nested `cargo build --release` for the
//! wasm target into a target directory of its own under `OUT_DIR` (the outer cargo holds the
//! lock on the normal one) and hands each guest's path to the crate being built as a
//! compile-time environment variable, read with `env!`.
//!
//! Used as a `[build-dependencies]` entry; everything here runs inside a build script and
//! reports through `cargo:` lines on standard output.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The target guests are built for.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// One guest crate to build, and how the crate being built learns where its module is.
#[derive(Debug, Clone, Copy)]
pub struct Guest {
    /// The cargo package of the guest, e.g. `weir-example-count`.
    pub package: &'static str,
    /// The environment variable that carries the `.wasm` path to `env!`, e.g.
    /// `WEIR_GUEST_COUNT`.
    pub env: &'static str,
}

/// The workspace root: this crate sits one level below it.
fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the guest-build crate lives in the workspace root")
        .to_path_buf()
}

/// What every guest build depends on, relative to the workspace root.
const WATCHED: [&str; 5] = [
    "abi",
    "guest-sdk",
    "examples/rust",
    "Cargo.toml",
    "Cargo.lock",
];

/// Builds `guests` in release for [`TARGET`] and sets each one's [`Guest::env`] variable to
/// the path of its module; returns the paths, in order.
///
/// Asks cargo to rerun the build script when the ABI, the SDK, the Rust examples, the
/// workspace manifest or lock file change, or anything under `also_watch` (paths relative to
/// the workspace root, e.g. `tests/guests` for guests kept elsewhere). Panics — failing the
/// build with a message — when the target is missing (naming the command that adds it) or the
/// guests do not build.
pub fn build(guests: &[Guest], also_watch: &[&str]) -> Vec<PathBuf> {
    let root = workspace_root();
    for watched in WATCHED.iter().chain(also_watch) {
        println!("cargo:rerun-if-changed={}", root.join(watched).display());
    }
    check_target();

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR is set for build scripts"));
    let target_dir = out_dir.join("guests");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&root)
        .args(["build", "--release", "--target", TARGET, "--target-dir"])
        .arg(&target_dir);
    for guest in guests {
        cmd.args(["-p", guest.package]);
    }
    clear_outer_build_env(&mut cmd);
    let status = cmd
        .status()
        .expect("failed to run cargo to build the wasm guests");
    assert!(
        status.success(),
        "building the guests for {TARGET} failed (see above)"
    );

    let modules = target_dir.join(TARGET).join("release");
    guests
        .iter()
        .map(|guest| {
            let wasm = modules.join(format!("{}.wasm", guest.package.replace('-', "_")));
            assert!(
                wasm.exists(),
                "guest build did not produce {}",
                wasm.display()
            );
            println!("cargo:rustc-env={}={}", guest.env, wasm.display());
            wasm
        })
        .collect()
}

/// Fails the build with the one command that fixes it when [`TARGET`] is not installed.
fn check_target() {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let sysroot = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let installed = sysroot
        .as_deref()
        // Cannot tell: let cargo report it.
        .is_none_or(|s| s.join("lib/rustlib").join(TARGET).join("lib").is_dir());
    if !installed {
        panic!(
            "the Rust target {TARGET} is not installed, and this crate needs it to build its \
             wasm guests: run `rustup target add {TARGET}` (scripts/test.sh does this for you)"
        );
    }
}

/// Removes from `cmd` what the outer build set for the host, which must not leak into a nested
/// build of guests (flags for the host's target, the outer target directory).
pub fn clear_outer_build_env(cmd: &mut Command) {
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        cmd.env_remove(var);
    }
}
