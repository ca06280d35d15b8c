//! `weir new`, done as a newcomer would for every language: make the project, build it with
//! its own script, run its unit test, `weir validate`, `weir test --checkpoint-every 1
//! --expect`, and `weir run` of its job, the output checked.
//!
//! The toolchains are the suite's: the C, Zig, AssemblyScript, Python and JavaScript projects
//! are skipped (loudly)
//! when the build skipped those examples for a missing toolchain, which it never does in CI. The
//! Zig project is built with the suite's pinned Zig (`ZIG`), not a second download.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use weir_tests::guests;

use crate::support::{Sandbox, committed_lines, weir_command, workspace_root};

/// Runs `script` (a project's `build.sh`) or `cargo test` in `dir`, failing with its output.
fn sh(dir: &Path, program: &str, args: &[&str], cargo_target: &Path) {
    let zig = workspace_root().join("examples/zig/.venv/bin/python");
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        // A new project builds as its user's would, not as this workspace's suite builds
        // (scripts/test.sh compiles the workspace with clippy-driver, every warning denied).
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .env("CARGO_TARGET_DIR", cargo_target)
        .env("ZIG", format!("{} -m ziglang", zig.display()))
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "`{program} {}` in {} failed:\n{}{}",
        args.join(" "),
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The languages whose toolchain this build has.
fn languages() -> Vec<&'static str> {
    let mut languages = vec!["rust", "wat"];
    for (language, built) in [
        ("c", guests::C_COUNT.is_some()),
        ("zig", guests::ZIG_COUNT.is_some()),
        ("assemblyscript", guests::AS_COUNT.is_some()),
        ("python", guests::PY_COUNT.is_some()),
        ("js", guests::JS_COUNT.is_some()),
    ] {
        if built {
            languages.push(language);
        } else {
            eprintln!("SKIPPED: weir new {language}: its toolchain is missing (never in CI)");
        }
    }
    languages
}

#[test]
fn every_language_of_weir_new_builds_tests_and_runs_its_project() {
    let sandbox = Sandbox::new("new-project");
    let listed = weir_command(&sandbox, &["new", "--list"], "", &[]);
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    // Shared by the Rust project's build and test, and kept between runs of the suite:
    // <target>/new-projects, beside this test executable's <target>/<profile>/deps.
    let exe = std::env::current_exe().unwrap();
    let cargo_target = exe
        .ancestors()
        .nth(3)
        .expect("the test executable is in <target>/<profile>/deps")
        .join("new-projects");
    let cargo_target = cargo_target.as_path();
    for language in languages() {
        assert!(listed.stdout.contains(language), "{}", listed.stdout);
        let name = format!("tally-{language}");
        let dir = sandbox.join(&name);
        let made = weir_command(
            &sandbox,
            &["new", language, &name, "--dir", dir.to_str().unwrap()],
            "",
            &[],
        );
        assert_eq!(made.code, Some(0), "weir new {language}: {}", made.stderr);

        if dir.join("build.sh").exists() {
            sh(&dir, "bash", &["build.sh"], cargo_target);
        }
        let file = name.replace('-', "_");
        match language {
            "rust" => {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                sh(&dir, &cargo, &["test", "--quiet"], cargo_target);
            }
            "python" => {
                let test = format!("test_{file}");
                sh(
                    &dir,
                    "python3",
                    &["-m", "unittest", "-q", &test],
                    cargo_target,
                );
            }
            "js" => sh(
                &dir,
                "node",
                &["--test", &format!("{file}.test.js")],
                cargo_target,
            ),
            _ => {}
        }
        let module = if language == "wat" {
            format!("{name}.wat")
        } else {
            format!("{name}.wasm")
        };
        let module = dir.join(module);
        let module = module.to_str().unwrap();

        let validated = weir_command(&sandbox, &["validate", module], "", &[]);
        assert_eq!(validated.code, Some(0), "{language}: {}", validated.stdout);
        let input = dir.join("input.jsonl");
        let expected = dir.join("expected.jsonl");
        let tested = weir_command(
            &sandbox,
            &[
                "test",
                module,
                "--input",
                input.to_str().unwrap(),
                "--expect",
                expected.to_str().unwrap(),
                "--checkpoint-every",
                "1",
            ],
            "",
            &[],
        );
        assert_eq!(tested.code, Some(0), "{language}: {}", tested.stderr);

        let job = dir.join("job.toml");
        let ran = weir_command(&sandbox, &["run", job.to_str().unwrap()], "", &[]);
        assert_eq!(ran.code, Some(0), "{language}: {}", ran.stderr);
        // The job counts 200 generated records over 5 keys: the last count of each key is
        // how many records it had, and they add up to 200.
        let mut last: BTreeMap<String, u64> = BTreeMap::new();
        for line in committed_lines(&dir.join("out")) {
            let (key, count) = line.split_once('\t').expect("key<TAB>count");
            let count: u64 = count.parse().expect("a decimal count");
            let entry = last.entry(key.to_string()).or_default();
            *entry = (*entry).max(count);
        }
        assert_eq!(last.len(), 5, "{language}: {last:?}");
        assert_eq!(last.values().sum::<u64>(), 200, "{language}: {last:?}");
    }
}

/// A directory laid out as a Weir checkout's `guest-sdk` (nothing is built from it here).
fn fake_checkout(root: &Path) {
    let sdk = root.join("guest-sdk");
    std::fs::create_dir_all(sdk.join("js")).unwrap();
    std::fs::create_dir_all(sdk.join("python")).unwrap();
    std::fs::write(sdk.join("Cargo.toml"), "").unwrap();
}

/// Every file of the project in `dir`, with its text.
fn project_texts(dir: &Path) -> Vec<(String, String)> {
    let mut texts = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let text = std::fs::read_to_string(&path).unwrap();
            texts.push((path.display().to_string(), text));
        }
    }
    texts
}

#[test]
fn weir_new_builds_against_the_checkout_named_by_sdk_or_weir_sdk_and_lists_every_language() {
    let sandbox = Sandbox::new("new-project-sdk");
    let here = workspace_root().display().to_string();
    let elsewhere = sandbox.join("elsewhere");
    fake_checkout(&elsewhere);
    let elsewhere_text = elsewhere.display().to_string();
    for (how, flag, env) in [
        ("--sdk", true, None),
        ("WEIR_SDK", false, Some(elsewhere_text.as_str())),
    ] {
        let dir = sandbox.join(&format!("tally-{}", flag as u8));
        let mut args = vec!["new", "js", "tally", "--dir", dir.to_str().unwrap()];
        if flag {
            args.extend(["--sdk", elsewhere_text.as_str()]);
        }
        let env: Vec<(&str, &str)> = env.map(|v| ("WEIR_SDK", v)).into_iter().collect();
        let made = weir_command(&sandbox, &args, "", &env);
        assert_eq!(made.code, Some(0), "{how}: {}", made.stderr);
        let naming: Vec<String> = project_texts(&dir)
            .into_iter()
            .filter(|(file, text)| {
                assert!(
                    !text.contains(&here),
                    "{how}: {file} names the checkout weir was built in:\n{text}"
                );
                text.contains(&elsewhere_text)
            })
            .map(|(file, _)| file)
            .collect();
        assert_eq!(naming.len(), 3, "{how}: {naming:?}");
    }

    // A named path that is no checkout is refused, naming how it was named.
    let nowhere = sandbox.join("nowhere");
    let refused = weir_command(
        &sandbox,
        &["new", "python", "tally", "--sdk", nowhere.to_str().unwrap()],
        "",
        &[],
    );
    assert_eq!(refused.code, Some(2), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--sdk names") && refused.stderr.contains("not a checkout"),
        "{}",
        refused.stderr
    );
    assert!(!sandbox.join("tally").exists());

    // The help names every language --list shows.
    let help = weir_command(&sandbox, &["new", "--help"], "", &[]);
    let listed = weir_command(&sandbox, &["new", "--list"], "", &[]);
    for line in listed.stdout.lines() {
        let language = line.split_whitespace().next().unwrap();
        assert!(
            help.stdout.contains(language),
            "{language}:\n{}",
            help.stdout
        );
    }
    assert!(help.stdout.contains("--sdk"), "{}", help.stdout);
}
