//! What this build made for the tests: the `weir` binary (built with its test hooks on first
//! use), the workspace it came from, and the guests built from other languages, which a machine
//! without their toolchain may have skipped; and what a test does when something it needs — a
//! guest, a server, a tool — is missing: it fails under `CI=true` and is skipped, loudly,
//! elsewhere ([`skip`]).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The `weir` binary of this build, with the test hooks (kill points) the crash tests arm:
/// built by `cargo test --workspace --all-targets --no-run` once per test process (see
/// [`build_weir`]; a no-op when it is up to date; cargo, not file times, decides). Tests live
/// in package `weir-tests`, so cargo does not build the binary of package `weir` for them (and
/// `CARGO_BIN_EXE_weir` does not exist); it lives next to this test executable's `deps`
/// folder. `WEIR_BIN` overrides the choice (a binary built without `test-hooks` then fails the
/// tests that arm a kill point).
pub(crate) fn weir_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("WEIR_BIN") {
            return PathBuf::from(bin);
        }
        let exe = std::env::current_exe().expect("the path of the test executable");
        // <target>/<profile>/deps/all-<hash>
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("the test executable is in <profile>/deps");
        let bin = profile_dir.join(format!("weir{}", std::env::consts::EXE_SUFFIX));
        build_weir(profile_dir);
        assert!(
            bin.exists(),
            "`cargo test --workspace --all-targets --no-run` did not produce {}",
            bin.display()
        );
        bin
    })
}

/// The workspace's root folder (the parent of `tests/`).
pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

/// Builds the `weir` binary into the target directory and profile of this test run as the
/// suite's own `cargo test --workspace` does, for the tests of package `weir` (`host/tests/`),
/// with `test-hooks` on (this package turns it on for the whole workspace's build): with
/// `cargo test --workspace --all-targets --no-run`, the very build `scripts/test.sh` makes, so
/// that the call is a no-op there (the suite's compiler settings reach it through the
/// environment). (`cargo build -p weir --features test-hooks` resolves the dependencies'
/// features for package `weir` alone, which differ from the workspace's — the test crates'
/// dev-dependencies add some, to `wasmparser` among others — so it compiled wasmtime and the
/// host again: about four minutes of CI's time, in the middle of the tests.) Run alone, e.g.
/// `cargo test -p weir-tests --test all`, the first call builds the workspace's tests once.
fn build_weir(profile_dir: &Path) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).args([
        "test",
        "--workspace",
        "--all-targets",
        "--no-run",
        "--quiet",
    ]);
    match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => {}
        Some("release") => {
            cmd.arg("--release");
        }
        Some(profile) => {
            cmd.args(["--profile", profile]);
        }
    }
    if let Some(target_dir) = profile_dir.parent() {
        cmd.arg("--target-dir").arg(target_dir);
    }
    cmd.env_remove("CARGO_BUILD_TARGET")
        .env_remove("CARGO_TARGET_DIR");
    let status = cmd
        .status()
        .expect("cannot run cargo to build the weir binary");
    assert!(
        status.success(),
        "`cargo test --workspace --all-targets --no-run` failed (see above)"
    );
}

/// Whether this run is CI's (`CI=true`), where a test never skips for want of a toolchain, a
/// server or a tool.
pub(crate) fn in_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// What a test does when something it needs is missing (`what`, for `reason`): fail under
/// `CI=true`, else say loudly that it is skipped — straight to stderr, not with `eprintln!`,
/// which the test harness hides in a passing test.
#[track_caller]
pub(crate) fn skip(what: &str, reason: &str) {
    assert!(!in_ci(), "{what}: {reason}, and CI never skips it");
    let _ = writeln!(
        std::io::stderr().lock(),
        "\n!!!!! SKIPPED: {what}: {reason} !!!!!\n"
    );
}

/// What `install` returns, a run of one of the install scripts (which may fetch `what` from its
/// package registry the first time); says on stderr how long it took when that was over two
/// seconds, so that a test slowed by it shows why.
pub(crate) fn timed_install<T>(
    what: &str,
    install: impl FnOnce() -> Result<T, String>,
) -> Result<T, String> {
    let started = Instant::now();
    let installed = install()?;
    if started.elapsed() > Duration::from_secs(2) {
        let _ = writeln!(
            std::io::stderr(),
            "weir: installed {what} in {:.1?}",
            started.elapsed()
        );
    }
    Ok(installed)
}

/// The path of a guest built from another language, or `None` — said loudly — when the build
/// skipped it (`WEIR_SKIP_FOREIGN_GUESTS=1` and no toolchain). In CI a skipped guest fails.
pub(crate) fn foreign(name: &str, path: Option<&'static str>) -> Option<&'static str> {
    if path.is_none() {
        skip(
            &format!("the tests of the {name} guest"),
            "it was not built (WEIR_SKIP_FOREIGN_GUESTS=1 and its toolchain is missing)",
        );
    }
    path
}
