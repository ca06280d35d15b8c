//! What the README promises a newcomer: its first operator is the crate
//! `examples/rust/min-length`, shown verbatim, and it builds into a valid module; its first
//! command, `scripts/demo.sh`, crashes and restores a job with exactly-once output.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Sandbox, weir_bin, weir_command};

/// The README's first operator, built for wasm by `build.rs`.
const MIN_LENGTH: &str = env!("WEIR_GUEST_MIN_LENGTH");

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

/// Each file of the crate appears in the README as a whole fenced block, byte for byte: an
/// edit to either side without the other fails here.
#[test]
fn the_readme_shows_the_min_length_crate_verbatim() {
    let root = workspace_root();
    let readme = fs::read_to_string(root.join("README.md")).unwrap();
    for (file, lang) in [
        ("Cargo.toml", "toml"),
        ("src/lib.rs", "rust"),
        ("tests/min_length.rs", "rust"),
    ] {
        let path = root.join("examples/rust/min-length").join(file);
        let text = fs::read_to_string(&path).unwrap();
        let block = format!("\n```{lang}\n{text}```\n");
        assert!(
            readme.contains(&block),
            "README.md does not show {} verbatim as a ```{lang} block: copy the file into the \
             README (or the README's block into the file) so the two are the same",
            path.display()
        );
    }
}

#[test]
fn the_readme_operator_is_a_valid_module() {
    let sandbox = Sandbox::new("readme-validate");
    let out = weir_command(&sandbox, &["validate", MIN_LENGTH], "", &[]);
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.contains("is a valid Weir operator"),
        "{}",
        out.stdout
    );
}

/// The demo itself, on this build's `weir` and guests (no release build): its run takes a few
/// seconds, and it exits 0 only when the output after a SIGKILL and a restore is exact.
#[cfg(unix)]
#[test]
fn the_demo_survives_its_sigkill_with_exact_output() {
    use std::os::unix::process::CommandExt as _;

    const SPLIT: &str = env!("WEIR_GUEST_SPLIT");
    const COUNT: &str = env!("WEIR_GUEST_COUNT");
    let sandbox = Sandbox::new("demo");
    let (out, err) = (sandbox.join("demo.stdout"), sandbox.join("demo.stderr"));
    let mut child = Command::new("bash")
        .arg(workspace_root().join("scripts/demo.sh"))
        .env("WEIR_DEMO_BIN", weir_bin())
        .env("WEIR_DEMO_SPLIT", SPLIT)
        .env("WEIR_DEMO_COUNT", COUNT)
        .env("TMPDIR", sandbox.path())
        .env_remove("WEIR_CONTROL_TOKEN")
        // Its own process group, so a timeout ends the script and the jobs it started.
        .process_group(0)
        .stdout(fs::File::create(&out).unwrap())
        .stderr(fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", child.id())])
                .status();
            let _ = child.wait();
            panic!(
                "scripts/demo.sh ran longer than 90 s:\n{}",
                fs::read_to_string(&out).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (
        fs::read_to_string(&out).unwrap(),
        fs::read_to_string(&err).unwrap(),
    );
    assert!(
        status.success(),
        "demo failed ({status}):\n{stdout}\n{stderr}"
    );
    for step in [
        "kill -9",
        "--restore latest",
        "dashboard: http://",
        "OK: exactly-once",
    ] {
        assert!(
            stdout.contains(step),
            "no `{step}` in the transcript:\n{stdout}"
        );
    }
}
