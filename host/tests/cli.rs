//! The `weir` binary's handling of bad input: the error names the file, the
//! line and the fix, and the exit code says "bad job file" (2).
//!
//! (Being an integration test of the `weir` package also makes `cargo test`
//! build the binary that the end-to-end tests in `tests/` run.)

use std::process::Command;

fn weir(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `weir run` of a job file holding `text`, in a folder of its own.
fn run_job(text: &str) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.toml");
    std::fs::write(&job, text).unwrap();
    weir(&["run", job.to_str().unwrap()])
}

#[test]
fn bad_job_file_exits_2_naming_the_line_and_the_allowed_values() {
    let (code, stderr) = run_job("name = \"x\"\n[checkpoint]\ninterval = \"5x\"\n");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("job.toml:3:"), "{stderr}");
    assert!(stderr.contains("\"500ms\""), "{stderr}");
}

#[test]
fn missing_module_exits_2_naming_the_path_and_the_build_command() {
    let (code, stderr) = run_job(
        "name = \"x\"\n[[source]]\nname = \"g\"\ntype = \"generator\"\ncount = 1\n\
         [[operator]]\nname = \"op\"\nmodule = \"nope.wasm\"\ninputs = [\"g\"]\n\
         [[sink]]\nname = \"s\"\ntype = \"blackhole\"\ninputs = [\"op\"]\n",
    );
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("nope.wasm"), "{stderr}");
    assert!(stderr.contains("scripts/build-guests.sh"), "{stderr}");
}

#[test]
fn missing_job_file_exits_2() {
    let (code, stderr) = weir(&["run", "/nonexistent/job.toml"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("/nonexistent/job.toml"), "{stderr}");
}
