//! `weir new LANG NAME`: a new operator project that builds, tests and runs, in one command.
//!
//! # Why this exists
//!
//! A newcomer's first hour goes to the things around the operator: which toolchain and flags,
//! where the C header comes from, which dependency line reaches the Rust SDK, how to feed the
//! operator keyed records, how to check it before writing a job. A project made here has all
//! of it: a working stateful operator (the keyed running count that every example language
//! implements), its build command, a unit test (the SDK's native harness for Rust; for the
//! others a `weir test --expect` fixture), a job file that runs it, and a README of ten lines
//! that names the toolchain with its install command.
//!
//! The operators are the repository's own examples (`examples/`), embedded in the binary, so
//! what `weir new` writes is what the project's cross-language tests check; only the Rust one
//! is a small crate of its own, since the example depends on the workspace.
//!
//! The Python and JavaScript SDKs live only in a checkout of the Weir repository, and a Rust
//! project builds against a checkout's SDK when it has one: [`choose_sdk`] says which checkout,
//! from `--sdk`, then [`SDK_ENV`], then the checkout this `weir` was built in if it still
//! exists. A copied or installed binary would otherwise write its builder's path into every
//! project, and the project would build against (and install packages into) that tree.

use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The environment variable naming the Weir checkout whose SDK a new project uses, when
/// `weir new --sdk` does not.
pub const SDK_ENV: &str = "WEIR_SDK";

/// A language `weir new` makes projects in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Language {
    /// Rust with the Weir SDK.
    Rust,
    /// C, freestanding, with the ABI header.
    C,
    /// Zig, freestanding, with the ABI bindings; the compiler pinned from PyPI.
    Zig,
    /// AssemblyScript, with the compiler pinned in `package.json`.
    AssemblyScript,
    /// The WebAssembly text format, by hand: nothing to build.
    Wat,
    /// Python, a component built with componentize-py and the SDK of `guest-sdk/python`.
    Python,
    /// JavaScript (or TypeScript), a component built with componentize-js and the SDK of
    /// `guest-sdk/js`.
    JavaScript,
}

impl Language {
    /// Every language, in the order `weir new --list` shows them.
    pub const ALL: [Language; 7] = [
        Language::Rust,
        Language::Python,
        Language::JavaScript,
        Language::C,
        Language::Zig,
        Language::AssemblyScript,
        Language::Wat,
    ];

    /// The name on the command line: `rust`, `c`, `zig`, `assemblyscript`, `wat`.
    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::C => "c",
            Language::Zig => "zig",
            Language::AssemblyScript => "assemblyscript",
            Language::Wat => "wat",
            Language::Python => "python",
            Language::JavaScript => "js",
        }
    }

    /// Every language's name, as prose: "rust, python, js, c, zig, assemblyscript or wat". One
    /// list for `weir new --help`, `--list` and the error for an unknown language.
    pub fn names() -> String {
        let names: Vec<&str> = Language::ALL.iter().map(|l| l.name()).collect();
        match names.split_last() {
            Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    /// The language named `name` (case-insensitive; `as` for AssemblyScript).
    pub fn parse(name: &str) -> Option<Language> {
        let name = name.to_ascii_lowercase();
        Language::ALL
            .into_iter()
            .find(|l| l.name() == name)
            .or(match name.as_str() {
                "as" => Some(Language::AssemblyScript),
                "py" => Some(Language::Python),
                "javascript" | "typescript" | "ts" => Some(Language::JavaScript),
                _ => None,
            })
    }

    /// The toolchain a project needs, with the command that installs it.
    pub fn toolchain(self) -> &'static str {
        match self {
            Language::Rust => {
                "Rust with the wasm32 target: `rustup target add wasm32-unknown-unknown`"
            }
            Language::C => "clang and lld: `apt-get install clang lld` (or your system's packages)",
            Language::Zig => {
                "Zig 0.17: `build.sh` installs the pinned `ziglang` from PyPI into .venv (needs \
                 python3 with venv), or set ZIG to a zig command"
            }
            Language::AssemblyScript => {
                "Node.js with npm (https://nodejs.org); `build.sh` runs `npm install` for the \
                 pinned compiler"
            }
            Language::Wat => "none: weir loads `.wat` text as it is",
            Language::Python => {
                "python3 with venv; `build.sh` installs the pinned componentize-py from PyPI \
                 (the Weir checkout's scripts/install-componentize-py.sh)"
            }
            Language::JavaScript => {
                "Node.js 20+ with npm; `build.sh` installs the pinned componentize-js (the Weir \
                 checkout's scripts/install-componentize-js.sh)"
            }
        }
    }

    /// Whether a project in it builds against a checkout's SDK when it has one (Rust, else the
    /// published crate) or always (Python, JavaScript); the others need none.
    pub fn uses_sdk(self) -> bool {
        matches!(
            self,
            Language::Rust | Language::Python | Language::JavaScript
        )
    }

    /// Whether its SDK lives only in the Weir repository, so that a project needs a checkout.
    fn needs_checkout(self) -> bool {
        matches!(self, Language::Python | Language::JavaScript)
    }

    /// The module file the project's build makes, relative to the project.
    fn module(self, name: &str) -> String {
        match self {
            Language::Wat => format!("{name}.wat"),
            _ => format!("{name}.wasm"),
        }
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a project could not be made. Nothing is written when the name or the directory is
/// refused.
#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    /// The operator name cannot be a crate, file and vertex name.
    #[error(
        "`{0}` cannot name an operator: use lowercase letters, digits, `-` and `_`, starting \
         with a letter (e.g. `top-words`)"
    )]
    BadName(String),
    /// The directory exists and is not empty.
    #[error("{} already exists and is not empty: choose another name or remove it", .0.display())]
    Exists(PathBuf),
    /// The language's SDK is in the Weir repository, and no checkout was given, nor is the one
    /// this `weir` was built in still there.
    #[error(
        "`weir new {0}` needs a checkout of the Weir repository (its SDK is guest-sdk/ there), \
         and none was given: pass `--sdk CHECKOUT` or set {SDK_ENV}=CHECKOUT to a checkout (`git clone` \
         the Weir repository); the one this weir was built in is gone"
    )]
    NeedsCheckout(Language),
    /// The checkout given by `--sdk` or [`SDK_ENV`] holds no Weir SDK.
    #[error(
        "{from} names {}, which is not a checkout of the Weir repository (it has no \
         guest-sdk/Cargo.toml): give the directory of a checkout, or its guest-sdk/",
        path.display()
    )]
    NotACheckout {
        /// The path given.
        path: PathBuf,
        /// Where it was given.
        from: SdkSource,
    },
    /// Writing a file failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
}

/// Where the checkout a project uses was named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdkSource {
    /// `weir new --sdk PATH`.
    Flag,
    /// The environment variable [`SDK_ENV`].
    Env,
    /// The checkout this `weir` was built in.
    BuiltIn,
}

impl fmt::Display for SdkSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SdkSource::Flag => f.write_str("--sdk"),
            SdkSource::Env => write!(f, "{SDK_ENV}"),
            SdkSource::BuiltIn => f.write_str("the checkout this weir was built in"),
        }
    }
}

/// The SDK a project uses: the `guest-sdk` directory of a Weir checkout, and where it was named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sdk {
    /// The checkout's `guest-sdk` directory, absolute.
    pub dir: PathBuf,
    /// Where the checkout was named.
    pub source: SdkSource,
}

/// The SDK a new project uses: the checkout `flag` names (`--sdk`), else the one the
/// environment variable [`SDK_ENV`] names (`env`, when set and not empty), else `built_in` (the
/// `guest-sdk` of the checkout this `weir` was built in) when it still exists; `None` when
/// there is none. A checkout that is named but holds no SDK is an error, never passed over for
/// the next: the user asked for it. Either a checkout or its `guest-sdk` directory may be named.
pub fn choose_sdk(
    flag: Option<&Path>,
    env: Option<&OsStr>,
    built_in: &Path,
) -> Result<Option<Sdk>, ScaffoldError> {
    let named = match (flag, env) {
        (Some(path), _) => Some((path, SdkSource::Flag)),
        (None, Some(env)) if !env.is_empty() => Some((Path::new(env), SdkSource::Env)),
        _ => None,
    };
    if let Some((path, from)) = named {
        let not_a_checkout = || ScaffoldError::NotACheckout {
            path: path.to_path_buf(),
            from,
        };
        let dir = [path.join("guest-sdk"), path.to_path_buf()]
            .into_iter()
            .find(|dir| is_sdk(dir))
            .ok_or_else(not_a_checkout)?;
        // Absolute but not canonical: the project names the checkout as the user did.
        let dir = std::path::absolute(&dir).map_err(|_| not_a_checkout())?;
        return Ok(Some(Sdk { dir, source: from }));
    }
    Ok(is_sdk(built_in)
        .then(|| built_in.canonicalize().ok())
        .flatten()
        .map(|dir| Sdk {
            dir,
            source: SdkSource::BuiltIn,
        }))
}

/// Whether `dir` is a checkout's `guest-sdk`: the Rust SDK's crate beside the Python and
/// JavaScript SDKs.
fn is_sdk(dir: &Path) -> bool {
    dir.join("Cargo.toml").is_file() && dir.join("python").is_dir() && dir.join("js").is_dir()
}

/// What `weir new` made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Project {
    /// The project's directory.
    pub dir: PathBuf,
    /// The language.
    pub language: Language,
    /// The files written, relative to `dir`.
    pub files: Vec<PathBuf>,
    /// The module file its build makes (or, for WAT, the source), relative to `dir`.
    pub module: String,
}

/// Makes a project for an operator `name` in `language`, in the new directory `dir`.
///
/// `sdk` is the `guest-sdk` directory of the Weir checkout the project uses ([`choose_sdk`]): a
/// Rust project then depends on it by path, otherwise on the published crate; a Python or
/// JavaScript project needs one.
pub fn scaffold(
    language: Language,
    name: &str,
    dir: &Path,
    sdk: Option<&Path>,
) -> Result<Project, ScaffoldError> {
    check_name(name)?;
    if fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(ScaffoldError::Exists(dir.to_path_buf()));
    }
    // The repository a checkout's SDK is in.
    let repository = sdk.and_then(Path::parent);
    if language.needs_checkout() && repository.is_none() {
        return Err(ScaffoldError::NeedsCheckout(language));
    }
    let module = language.module(name);
    let mut files: Vec<(String, String)> = match language {
        Language::Rust => rust_files(name, sdk),
        Language::C => vec![
            ("weir.h".into(), C_HEADER.into()),
            (format!("{name}.c"), C_COUNT.into()),
            (
                "build.sh".into(),
                script(&format!(
                    "clang --target=wasm32 -O2 -std=c11 -ffreestanding -nostdlib -mbulk-memory \
                     -Wl,--no-entry -o {module} {name}.c"
                )),
            ),
        ],
        Language::Zig => vec![
            ("weir.zig".into(), ZIG_BINDINGS.into()),
            (format!("{name}.zig"), ZIG_COUNT.into()),
            ("requirements.txt".into(), ZIG_REQUIREMENTS.into()),
            (
                "build.sh".into(),
                script(&format!(
                    "if [ -z \"${{ZIG:-}}\" ]; then\n  \
                     [ -x .venv/bin/python ] || {{ python3 -m venv .venv && .venv/bin/pip install --quiet -r requirements.txt; }}\n  \
                     ZIG=\".venv/bin/python -m ziglang\"\n\
                     fi\n\
                     $ZIG build-exe {name}.zig -target wasm32-freestanding -fno-entry -rdynamic -O ReleaseSmall \
                     --cache-dir .zig-cache --global-cache-dir .zig-cache/global -femit-bin={module}"
                )),
            ),
        ],
        Language::AssemblyScript => vec![
            ("assembly/index.ts".into(), AS_COUNT.into()),
            (
                "package.json".into(),
                AS_PACKAGE.replace(
                    "weir-example-count-assemblyscript",
                    &format!("{name}-assemblyscript"),
                ),
            ),
            (
                "build.sh".into(),
                script(&format!(
                    "[ -d node_modules ] || npm install --no-audit --no-fund\n\
                     node_modules/.bin/asc assembly/index.ts --outFile {module} --runtime stub \
                     --optimizeLevel 3 --shrinkLevel 0 --noColors"
                )),
            ),
        ],
        Language::Wat => vec![(module.clone(), WAT_COUNT.into())],
        Language::Python | Language::JavaScript => component_files(
            language,
            name,
            &module,
            repository.unwrap_or(Path::new(".")),
        ),
    };
    files.push(("job.toml".into(), job_file(name, &module)));
    files.push(("input.jsonl".into(), INPUT.into()));
    files.push(("expected.jsonl".into(), EXPECTED.into()));
    files.push(("README.md".into(), readme(language, name, &module)));
    files.push((
        ".gitignore".into(),
        "/out/\n/checkpoints/\n/target/\n/node_modules/\n/.venv/\n/.zig-cache/\n*.wasm\n".into(),
    ));

    let mut written = Vec::new();
    for (path, text) in files {
        let full = dir.join(&path);
        let write = |full: &Path| -> io::Result<()> {
            if let Some(parent) = full.parent() {
                fs::create_dir_all(parent)?;
            }
            fs::write(full, text)?;
            if path.ends_with(".sh") {
                make_executable(full)?;
            }
            Ok(())
        };
        write(&full).map_err(|source| ScaffoldError::Write {
            path: full.clone(),
            source,
        })?;
        written.push(PathBuf::from(path));
    }
    Ok(Project {
        dir: dir.to_path_buf(),
        language,
        files: written,
        module,
    })
}

/// A name works as a crate, a file and a vertex of a job: `[a-z][a-z0-9_-]*`, at most 64.
fn check_name(name: &str) -> Result<(), ScaffoldError> {
    let mut chars = name.chars();
    let ok = name.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ScaffoldError::BadName(name.to_string()))
    }
}

#[cfg(unix)]
fn make_executable(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> io::Result<()> {
    Ok(())
}

/// A build script running `commands` in the project's directory.
fn script(commands: &str) -> String {
    format!(
        "#!/usr/bin/env bash\n# Builds the operator module.\nset -euo pipefail\ncd \"$(dirname \"$0\")\"\n{commands}\n"
    )
}

/// The files of a Python or JavaScript project: the count example, a harness test, and a build
/// script calling the SDK's, all naming the SDK in `repository` by its path.
fn component_files(
    language: Language,
    name: &str,
    module: &str,
    repository: &Path,
) -> Vec<(String, String)> {
    let repository = repository.display().to_string();
    let file = name.replace('-', "_");
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{file}}", &file)
            .replace("{{repository}}", &repository)
    };
    match language {
        Language::Python => vec![
            (
                format!("{file}.py"),
                PY_COUNT.replace(
                    "bash guest-sdk/python/build.sh count.wasm examples/python/count/count.py",
                    "bash build.sh",
                ),
            ),
            (format!("test_{file}.py"), fill(PY_TEST)),
            (
                "build.sh".into(),
                script(&format!(
                    "bash {repository:?}/guest-sdk/python/build.sh {module} {file}.py"
                )),
            ),
        ],
        _ => vec![
            (
                format!("{file}.js"),
                JS_COUNT
                    .replace(
                        "'../../../guest-sdk/js/index.js'",
                        &format!("{:?}", format!("{repository}/guest-sdk/js/index.js")),
                    )
                    .replace(
                        "bash guest-sdk/js/build.sh count.wasm examples/js/count/count.js",
                        "bash build.sh",
                    ),
            ),
            (format!("{file}.test.js"), fill(JS_TEST)),
            (
                "build.sh".into(),
                script(&format!(
                    "bash {repository:?}/guest-sdk/js/build.sh {module} {file}.js"
                )),
            ),
        ],
    }
}

fn rust_files(name: &str, sdk: Option<&Path>) -> Vec<(String, String)> {
    let sdk_dependency = match sdk {
        Some(path) => format!("weir-sdk = {{ path = {:?} }}", path.display().to_string()),
        None => "weir-sdk = \"0.1\"".to_string(),
    };
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{sdk_dependency}}", &sdk_dependency)
    };
    let crate_file = name.replace('-', "_");
    vec![
        ("Cargo.toml".into(), fill(RUST_CARGO)),
        ("src/lib.rs".into(), fill(RUST_LIB)),
        (
            "build.sh".into(),
            script(&format!(
                "cargo build --release --target wasm32-unknown-unknown\n\
                 cp \"${{CARGO_TARGET_DIR:-target}}\"/wasm32-unknown-unknown/release/{crate_file}.wasm {name}.wasm"
            )),
        ),
    ]
}

/// The job: 200 generated records over 5 keys, by key to the operator, into `out/`.
fn job_file(name: &str, module: &str) -> String {
    format!(
        "# Runs {name}: `weir run job.toml`; the output is in out/.\n\
         name = \"{name}\"\n\n\
         [checkpoint]\ninterval = \"100ms\"\ndirectory = \"checkpoints\"\n\n\
         [[source]]\nname = \"records\"\ntype = \"generator\"\ncount = 200\nkeys = 5\nrate = 2000\n\n\
         [[operator]]\nname = \"{name}\"\nmodule = \"{module}\"\n\
         inputs = [{{ from = \"records\", partition = \"key-hash\" }}]\n\n\
         [[sink]]\nname = \"out\"\ntype = \"file\"\npath = \"out\"\n\
         inputs = [{{ from = \"{name}\", partition = \"forward\" }}]\n"
    )
}

fn readme(language: Language, name: &str, module: &str) -> String {
    let file = name.replace('-', "_");
    let python_unit = format!("python3 -m unittest test_{file}");
    let js_unit = format!("node --test {file}.test.js");
    let (build, unit) = match language {
        Language::Rust => ("bash build.sh", "cargo test"),
        Language::Wat => ("nothing to build", "the weir test line below"),
        Language::Python => ("bash build.sh", python_unit.as_str()),
        Language::JavaScript => ("bash build.sh", js_unit.as_str()),
        _ => ("bash build.sh", "the weir test line below"),
    };
    format!(
        "# {name}\n\n\
         A keyed running count in {language}, a Weir operator: for each record, the key and how many \
         records of that key came so far.\n\n\
         - Toolchain: {toolchain}.\n\
         - Build: `{build}` → `{module}`. Unit test: `{unit}`.\n\
         - Check it: `weir validate {module}`.\n\
         - Test it: `weir test {module} --input input.jsonl --expect expected.jsonl --checkpoint-every 1`.\n\
         - Run it: `weir run job.toml` (output in `out/`, checkpoints in `checkpoints/`).\n\
         - The contract it follows is {contract} of the Weir repository; the job file is docs/JOB.md.\n",
        contract = if language.needs_checkout() {
            "docs/COMPONENTS.md"
        } else {
            "docs/ABI.md"
        },
        toolchain = language.toolchain(),
    )
}

const RUST_CARGO: &str = include_str!("../../templates/rust/Cargo.toml.in");
const RUST_LIB: &str = include_str!("../../templates/rust/src/lib.rs.in");
const C_HEADER: &str = include_str!("../../../examples/c/weir.h");
const C_COUNT: &str = include_str!("../../../examples/c/count.c");
const ZIG_BINDINGS: &str = include_str!("../../../examples/zig/weir.zig");
const ZIG_COUNT: &str = include_str!("../../../examples/zig/count.zig");
const ZIG_REQUIREMENTS: &str = include_str!("../../../examples/zig/requirements.txt");
const AS_COUNT: &str = include_str!("../../../examples/assemblyscript/assembly/index.ts");
const AS_PACKAGE: &str = include_str!("../../../examples/assemblyscript/package.json");
const WAT_COUNT: &str = include_str!("../../../examples/wat/count.wat");
const PY_COUNT: &str = include_str!("../../../examples/python/count/count.py");
const JS_COUNT: &str = include_str!("../../../examples/js/count/count.js");
const PY_TEST: &str = include_str!("../../templates/python/test_count.py.in");
const JS_TEST: &str = include_str!("../../templates/js/count.test.js.in");

/// The `weir test` fixture: records of three keys, in the order they arrive.
const INPUT: &str = "{\"key\":\"a\",\"value\":\"x\",\"timestamp\":1}\n\
{\"key\":\"b\",\"value\":\"x\",\"timestamp\":2}\n\
{\"key\":\"a\",\"value\":\"y\",\"timestamp\":3}\n\
{\"key\":\"c\",\"value\":\"x\",\"timestamp\":4}\n\
{\"key\":\"a\",\"value\":\"z\",\"timestamp\":5}\n\
{\"key\":\"b\",\"value\":\"y\",\"timestamp\":6}\n";

/// What the count makes of [`INPUT`].
const EXPECTED: &str = "{\"key\":\"a\",\"value\":\"1\",\"timestamp\":1}\n\
{\"key\":\"b\",\"value\":\"1\",\"timestamp\":2}\n\
{\"key\":\"a\",\"value\":\"2\",\"timestamp\":3}\n\
{\"key\":\"c\",\"value\":\"1\",\"timestamp\":4}\n\
{\"key\":\"a\",\"value\":\"3\",\"timestamp\":5}\n\
{\"key\":\"b\",\"value\":\"2\",\"timestamp\":6}\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_languages_are_checked() {
        for bad in ["", "Top", "1st", "top words", "a/b", &"x".repeat(65)] {
            assert!(
                matches!(check_name(bad), Err(ScaffoldError::BadName(_))),
                "{bad:?}"
            );
        }
        for good in ["top", "top-words", "top_3"] {
            assert!(check_name(good).is_ok(), "{good}");
        }
        assert_eq!(Language::parse("Rust"), Some(Language::Rust));
        assert_eq!(Language::parse("as"), Some(Language::AssemblyScript));
        assert_eq!(Language::parse("cobol"), None);
    }

    #[test]
    fn a_project_has_its_module_job_fixture_and_readme_and_refuses_a_used_directory() {
        let dir = tempfile::tempdir().unwrap();
        let project = dir.path().join("tally");
        let made = scaffold(Language::C, "tally", &project, None).unwrap();
        assert_eq!(made.module, "tally.wasm");
        for file in [
            "weir.h",
            "tally.c",
            "build.sh",
            "job.toml",
            "input.jsonl",
            "README.md",
        ] {
            assert!(project.join(file).is_file(), "{file}");
        }
        let job = crate::job::Job::from_str(
            &fs::read_to_string(project.join("job.toml")).unwrap(),
            &project,
            "job.toml",
        );
        assert!(job.is_ok(), "{job:?}");
        assert!(matches!(
            scaffold(Language::Wat, "tally", &project, None),
            Err(ScaffoldError::Exists(_))
        ));
    }

    /// A directory laid out as a checkout's `guest-sdk`.
    fn fake_checkout(root: &Path) -> PathBuf {
        let sdk = root.join("guest-sdk");
        fs::create_dir_all(sdk.join("js")).unwrap();
        fs::create_dir_all(sdk.join("python")).unwrap();
        fs::write(sdk.join("Cargo.toml"), "").unwrap();
        sdk
    }

    #[test]
    fn the_sdk_is_the_flag_s_then_the_variable_s_then_the_built_in_one_if_it_exists() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, built) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("built"),
        );
        let (sdk_a, sdk_b, sdk_built) =
            (fake_checkout(&a), fake_checkout(&b), fake_checkout(&built));
        let chosen = |flag: Option<&Path>, env: Option<&Path>, built_in: &Path| {
            choose_sdk(flag, env.map(Path::as_os_str), built_in)
                .unwrap()
                .map(|sdk| (sdk.dir, sdk.source))
        };
        assert_eq!(
            chosen(Some(&a), Some(&b), &sdk_built),
            Some((sdk_a.clone(), SdkSource::Flag))
        );
        // The guest-sdk directory itself names the same checkout.
        assert_eq!(
            chosen(Some(&sdk_a), None, &sdk_built),
            Some((sdk_a, SdkSource::Flag))
        );
        assert_eq!(
            chosen(None, Some(&b), &sdk_built),
            Some((sdk_b, SdkSource::Env))
        );
        assert_eq!(
            chosen(None, Some(Path::new("")), &sdk_built),
            Some((sdk_built.canonicalize().unwrap(), SdkSource::BuiltIn))
        );
        // A copied binary: the checkout it was built in is gone, and none is named.
        let gone = dir.path().join("gone/guest-sdk");
        assert_eq!(chosen(None, None, &gone), None);
        let refused = scaffold(Language::JavaScript, "t", &dir.path().join("t"), None)
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("--sdk") && refused.contains(SDK_ENV),
            "{refused}"
        );
        // A named directory that is no checkout is refused, naming where it was named, never
        // passed over for the next choice.
        for (flag, env, named) in [
            (Some(dir.path()), None, "--sdk"),
            (None, Some(dir.path()), SDK_ENV),
        ] {
            let error = choose_sdk(flag, env.map(Path::as_os_str), &sdk_built).unwrap_err();
            assert!(
                matches!(error, ScaffoldError::NotACheckout { .. }),
                "{error}"
            );
            let text = error.to_string();
            assert!(
                text.starts_with(&format!("{named} names {}", dir.path().display())),
                "{text}"
            );
        }
    }

    #[test]
    fn a_javascript_project_names_the_chosen_checkout_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let sdk = fake_checkout(&dir.path().join("elsewhere"));
        let project = dir.path().join("t");
        let made = scaffold(Language::JavaScript, "t", &project, Some(&sdk)).unwrap();
        let repository = dir.path().join("elsewhere").display().to_string();
        let mut naming = 0;
        for file in &made.files {
            let text = fs::read_to_string(project.join(file)).unwrap();
            if text.contains(&repository) {
                naming += 1;
            }
            assert!(
                !text.contains(env!("CARGO_MANIFEST_DIR")),
                "{}",
                file.display()
            );
        }
        assert_eq!(naming, 3, "t.js, t.test.js and build.sh name the checkout");
    }

    #[test]
    fn a_rust_project_depends_on_the_sdk_by_path_from_a_checkout_else_on_the_crate() {
        let dir = tempfile::tempdir().unwrap();
        let from_checkout = dir.path().join("a");
        scaffold(
            Language::Rust,
            "a",
            &from_checkout,
            Some(Path::new("/src/weir/guest-sdk")),
        )
        .unwrap();
        let cargo = fs::read_to_string(from_checkout.join("Cargo.toml")).unwrap();
        assert!(
            cargo.contains("weir-sdk = { path = \"/src/weir/guest-sdk\" }"),
            "{cargo}"
        );
        let outside = dir.path().join("b");
        scaffold(Language::Rust, "b", &outside, None).unwrap();
        let cargo = fs::read_to_string(outside.join("Cargo.toml")).unwrap();
        assert!(cargo.contains("\nweir-sdk = \"0.1\"\n"), "{cargo}");
        assert!(!cargo.contains("{{"), "{cargo}");
    }
}
