//! Builds the guests for `wasm32-unknown-unknown` before the tests
//! compile, so `cargo test` needs no manual step and no `.wasm` is committed.
//!
//! Besides the examples, the test guests of `tests/guests/` (written for one
//! test each, e.g. `flaky` for failover) are built the same way. The C,
//! AssemblyScript and Zig examples are built by their own scripts, which install
//! their toolchains when missing (see [`build_foreign_guests`]).
//!
//! The guests are built by a nested `cargo build` into a target directory of
//! their own under `OUT_DIR` (the outer cargo holds the lock on the normal
//! one). Each guest's path reaches the tests as a `WEIR_GUEST_<NAME>`
//! environment variable at compile time.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

use weir_guest_build::Guest;

/// The crates built as guests, and the variable each one's path reaches the tests in.
const GUESTS: &[Guest] = &[
    Guest {
        package: "weir-example-split",
        env: "WEIR_GUEST_SPLIT",
    },
    Guest {
        package: "weir-example-count",
        env: "WEIR_GUEST_COUNT",
    },
    // The count with its counts kept on the host (docs/STATE.md).
    Guest {
        package: "weir-example-host-count",
        env: "WEIR_GUEST_HOST_COUNT",
    },
    Guest {
        package: "weir-example-window",
        env: "WEIR_GUEST_WINDOW",
    },
    Guest {
        package: "weir-example-dedup",
        env: "WEIR_GUEST_DEDUP",
    },
    // The README's first operator (`tests/all/readme.rs` validates it).
    Guest {
        package: "min-length",
        env: "WEIR_GUEST_MIN_LENGTH",
    },
    Guest {
        package: "weir-test-flaky",
        env: "WEIR_GUEST_FLAKY",
    },
];

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap());
    let root = manifest_dir.parent().unwrap().to_path_buf();
    weir_guest_build::build(GUESTS, &["tests/guests"]);

    let wat = root.join("examples/wat/count.wat");
    println!("cargo:rustc-env=WEIR_GUEST_WAT_COUNT={}", wat.display());
    println!("cargo:rerun-if-changed={}", wat.display());

    build_foreign_guests(&root);
}

/// A guest written in another language than Rust, built by its own script.
struct ForeignGuest {
    /// What it is, for messages.
    name: &'static str,
    /// Its build script (relative to the workspace root), called as `bash SCRIPT OUT.wasm
    /// ARGS…`; it installs its toolchain when missing.
    script: &'static str,
    /// Arguments after the output path.
    args: &'static [&'static str],
    /// What it builds from, for `rerun-if-changed`.
    sources: &'static [&'static str],
    /// The SDK and toolchain files it is built with besides, shared by the guests of its
    /// language; also for `rerun-if-changed`.
    toolchain: &'static [&'static str],
    /// The environment variable that carries the module's path (empty when skipped).
    env: &'static str,
    /// What to install by hand when the script cannot.
    needs: &'static str,
}

/// The `count` operators in C, AssemblyScript and Zig (`tests/all/languages.rs`).
const FOREIGN_GUESTS: &[ForeignGuest] = &[
    ForeignGuest {
        name: "C count (examples/c)",
        script: "examples/c/build.sh",
        args: &[],
        sources: &[
            "examples/c/count.c",
            "examples/c/weir.h",
            "examples/c/build.sh",
            "scripts/install-c-toolchain.sh",
            "scripts/apt-install.sh",
        ],
        toolchain: &[],
        env: "WEIR_GUEST_C_COUNT",
        needs: "clang and wasm-ld: `apt-get install -y clang lld` (Debian/Ubuntu)",
    },
    // The count written with the C library (malloc, a constructor) and no snapshot code:
    // checkpointed as an image (`tests/all/image_guests.rs`).
    ForeignGuest {
        name: "C count with the C library (examples/c/image_count.c)",
        script: "examples/c/build-libc.sh",
        args: &[],
        sources: &[
            "examples/c/image_count.c",
            "examples/c/weir.h",
            "examples/c/build-libc.sh",
            "scripts/install-c-toolchain.sh",
            "scripts/apt-install.sh",
            "scripts/install-wasi-libc.sh",
        ],
        toolchain: &[],
        env: "WEIR_GUEST_C_LIBC_COUNT",
        needs: "clang, wasm-ld, wasi-libc and clang's wasm32 builtins: `apt-get install -y clang \
                lld wasi-libc libclang-rt-14-dev-wasm32` (Debian)",
    },
    ForeignGuest {
        name: "Zig count (examples/zig)",
        script: "examples/zig/build.sh",
        args: &[],
        sources: &[
            "examples/zig/count.zig",
            "examples/zig/weir.zig",
            "examples/zig/build.sh",
            "examples/zig/requirements.txt",
            "scripts/install-zig.sh",
            "scripts/apt-install.sh",
        ],
        toolchain: &[],
        env: "WEIR_GUEST_ZIG_COUNT",
        needs: "Python 3 with venv (`apt-get install -y python3-venv`), then `bash \
                scripts/install-zig.sh` (PyPI's ziglang, pinned in examples/zig/requirements.txt)",
    },
    ForeignGuest {
        name: "AssemblyScript count (examples/assemblyscript)",
        script: "examples/assemblyscript/build.sh",
        args: &[],
        sources: ASSEMBLYSCRIPT_COUNT,
        toolchain: &[],
        env: "WEIR_GUEST_AS_COUNT",
        needs: ASSEMBLYSCRIPT_NEEDS,
    },
    // The same AssemblyScript count on the runtimes with a real allocator and garbage
    // collector, whose state lives in globals and memory: image checkpoints must carry both.
    ForeignGuest {
        name: "AssemblyScript count, minimal runtime",
        script: "examples/assemblyscript/build.sh",
        args: &["minimal"],
        sources: ASSEMBLYSCRIPT_COUNT,
        toolchain: &[],
        env: "WEIR_GUEST_AS_COUNT_MINIMAL",
        needs: ASSEMBLYSCRIPT_NEEDS,
    },
    ForeignGuest {
        name: "AssemblyScript count, incremental runtime",
        script: "examples/assemblyscript/build.sh",
        args: &["incremental"],
        sources: ASSEMBLYSCRIPT_COUNT,
        toolchain: &[],
        env: "WEIR_GUEST_AS_COUNT_INCREMENTAL",
        needs: ASSEMBLYSCRIPT_NEEDS,
    },
    // The count as a component of the world (docs/COMPONENTS.md), from Rust for WASI 0.2.
    ForeignGuest {
        name: "Rust count component (examples/rust-component)",
        script: "examples/rust-component/build.sh",
        args: &[],
        sources: &[
            "examples/rust-component/src",
            "examples/rust-component/Cargo.toml",
            "examples/rust-component/Cargo.lock",
            "examples/rust-component/build.sh",
            "abi/wit/operator.wit",
        ],
        toolchain: &[],
        env: "WEIR_GUEST_RUST_COMPONENT_COUNT",
        needs: "the Rust target wasm32-wasip2: `rustup target add wasm32-wasip2`",
    },
    // The count in Python: a component built with componentize-py and the SDK.
    ForeignGuest {
        name: "Python count (examples/python/count)",
        script: "guest-sdk/python/build.sh",
        args: &["examples/python/count/count.py"],
        sources: &["examples/python/count/count.py"],
        toolchain: PYTHON_SDK,
        env: "WEIR_GUEST_PY_COUNT",
        needs: PYTHON_NEEDS,
    },
    // The Python count with its counts kept on the host (docs/STATE.md), a component of the
    // world keyed-operator.
    ForeignGuest {
        name: "Python host-count (examples/python/host-count)",
        script: "guest-sdk/python/build.sh",
        args: &["examples/python/host-count/host_count.py"],
        sources: &["examples/python/host-count/host_count.py"],
        toolchain: PYTHON_SDK,
        env: "WEIR_GUEST_PY_HOST_COUNT",
        needs: PYTHON_NEEDS,
    },
    // The hostile Python operator of the isolation tests (tests/guests/python/hostile.py).
    ForeignGuest {
        name: "hostile Python operator (tests/guests/python)",
        script: "guest-sdk/python/build.sh",
        args: &["tests/guests/python/hostile.py"],
        sources: &["tests/guests/python/hostile.py"],
        toolchain: PYTHON_SDK,
        env: "WEIR_GUEST_PY_HOSTILE",
        needs: PYTHON_NEEDS,
    },
    // The count in JavaScript: a component built with componentize-js and the SDK.
    ForeignGuest {
        name: "JavaScript count (examples/js/count)",
        script: "guest-sdk/js/build.sh",
        args: &["examples/js/count/count.js"],
        sources: &["examples/js/count/count.js"],
        toolchain: JS_SDK,
        env: "WEIR_GUEST_JS_COUNT",
        needs: JS_NEEDS,
    },
    // The JavaScript count with its counts kept on the host (docs/STATE.md), a component of
    // the world keyed-operator.
    ForeignGuest {
        name: "JavaScript host-count (examples/js/host-count)",
        script: "guest-sdk/js/build.sh",
        args: &["examples/js/host-count/host-count.js"],
        sources: &["examples/js/host-count/host-count.js"],
        toolchain: JS_SDK,
        env: "WEIR_GUEST_JS_HOST_COUNT",
        needs: JS_NEEDS,
    },
    // The hostile JavaScript operator of the isolation tests (tests/guests/js/hostile.js).
    ForeignGuest {
        name: "hostile JavaScript operator (tests/guests/js)",
        script: "guest-sdk/js/build.sh",
        args: &["tests/guests/js/hostile.js"],
        sources: &["tests/guests/js/hostile.js"],
        toolchain: JS_SDK,
        env: "WEIR_GUEST_JS_HOSTILE",
        needs: JS_NEEDS,
    },
];

/// The AssemblyScript count and its build, which its three runtimes share.
const ASSEMBLYSCRIPT_COUNT: &[&str] = &[
    "examples/assemblyscript/assembly",
    "examples/assemblyscript/package.json",
    "examples/assemblyscript/package-lock.json",
    "examples/assemblyscript/build.sh",
    "scripts/install-assemblyscript.sh",
];

/// What the AssemblyScript count needs when its script cannot install it.
const ASSEMBLYSCRIPT_NEEDS: &str = "Node.js 20+ with npm (`apt-get install -y nodejs npm`), then \
                                    `npm ci` in examples/assemblyscript";

/// What the JavaScript guests need when their script cannot install it.
const JS_NEEDS: &str = "Node.js 20+ with npm (`apt-get install -y nodejs npm`), then `bash \
                        scripts/install-componentize-js.sh` (componentize-js, pinned in \
                        guest-sdk/js/package-lock.json)";

/// What every Python guest is built with: the SDK, its build script and the pinned
/// componentize-py, and the world.
const PYTHON_SDK: &[&str] = &[
    "guest-sdk/python/weir",
    "guest-sdk/python/build.sh",
    "guest-sdk/python/requirements-build.txt",
    "scripts/install-componentize-py.sh",
    "scripts/apt-install.sh",
    "abi/wit/operator.wit",
];

/// What every JavaScript guest is built with: the SDK, its build script and its pinned npm
/// packages, and the world.
const JS_SDK: &[&str] = &[
    "guest-sdk/js/src",
    "guest-sdk/js/index.js",
    "guest-sdk/js/build.mjs",
    "guest-sdk/js/build.sh",
    "guest-sdk/js/package.json",
    "guest-sdk/js/package-lock.json",
    "scripts/install-componentize-js.sh",
    "scripts/apt-install.sh",
    "abi/wit/operator.wit",
];

/// What the Python guests need when their script cannot install it.
const PYTHON_NEEDS: &str = "Python 3 with venv (`apt-get install -y python3-venv`), then `bash \
                            scripts/install-componentize-py.sh` (PyPI's componentize-py, pinned \
                            in guest-sdk/python/requirements-build.txt)";

/// Builds the [`FOREIGN_GUESTS`] with their scripts. A guest that does not build fails the
/// build, naming what to install — unless `WEIR_SKIP_FOREIGN_GUESTS=1` is set outside CI
/// (`CI=true` never skips): then its variable is left empty, and its tests say loudly that they
/// are skipped.
fn build_foreign_guests(root: &Path) {
    println!("cargo:rerun-if-env-changed=WEIR_SKIP_FOREIGN_GUESTS");
    println!("cargo:rerun-if-env-changed=CI");
    let in_ci = env::var("CI").is_ok_and(|v| v == "true");
    let may_skip = !in_ci && env::var("WEIR_SKIP_FOREIGN_GUESTS").is_ok_and(|v| v == "1");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").unwrap()).join("foreign-guests");
    for guest in FOREIGN_GUESTS {
        for source in guest.sources.iter().chain(guest.toolchain) {
            println!("cargo:rerun-if-changed={}", root.join(source).display());
        }
        let wasm = out_dir.join(format!("{}.wasm", guest.env.to_lowercase()));
        // The scripts' output goes to stderr: stdout is cargo's channel.
        let mut command = Command::new("bash");
        command
            .arg(root.join(guest.script))
            .arg(&wasm)
            .args(guest.args)
            .current_dir(root)
            .stdout(std::io::stderr());
        weir_guest_build::clear_outer_build_env(&mut command);
        let status = command.status();
        let built = status.as_ref().is_ok_and(|s| s.success()) && wasm.exists();
        if built {
            println!("cargo:rustc-env={}={}", guest.env, wasm.display());
        } else if may_skip {
            println!(
                "cargo:warning=SKIPPING the {} guest and its tests (WEIR_SKIP_FOREIGN_GUESTS=1): \
                 {} failed; to build it install {}",
                guest.name, guest.script, guest.needs
            );
            println!("cargo:rustc-env={}=", guest.env);
        } else {
            panic!(
                "cannot build the {} guest: `bash {}` failed ({}). Install {}. To run the \
                 other tests without it, set WEIR_SKIP_FOREIGN_GUESTS=1 (never honoured in CI).",
                guest.name,
                guest.script,
                match &status {
                    Ok(s) => s.to_string(),
                    Err(e) => format!("cannot run bash: {e}"),
                },
                guest.needs
            );
        }
    }
}
