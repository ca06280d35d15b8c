//! What the end-to-end tests share: the `weir` binary, a temp folder per run, job files with
//! absolute paths, child processes that never outlive a test, in-process runs that never hang
//! it, committed sink output, checkpoint directories, and a seeded random source.
//!
//! Every wait is bounded ([`CLI_TIMEOUT`], [`JOB_TIMEOUT`]); a child `weir` is killed when its
//! [`Weir`] handle drops, so a failing assertion never leaves a process behind.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::mpsc::UnboundedSender;
use weir::job::Job;
use weir::runtime::{JobMonitor, JobOutcome, JobRequest, JobRunner, RunOptions};

/// The longest one `weir` process may run in a test (or wait for a condition) before it is
/// killed and the test fails.
pub(crate) const CLI_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest an in-process job may run; see [`CLI_TIMEOUT`].
pub(crate) const JOB_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest `weir run` may take to load its modules before the job starts, on top of the
/// timeout of [`Weir::wait`]. Compiling a component is the job's first run's alone (the module
/// cache serves the next ones) and its cost is the machine's: a 12 MB JavaScript component
/// compiled in 36 s on two busy cores, more than half of [`CLI_TIMEOUT`].
pub(crate) const LOAD_TIMEOUT: Duration = Duration::from_secs(240);
/// What `weir run` logs when its modules are loaded and the job starts.
pub(crate) const JOB_STARTING: &str = " starting; checkpoints in ";

// ---------------------------------------------------------------------------------------------
// The `weir` binary

/// The `weir` binary of this build, with the test hooks (kill points) the crash tests arm:
/// `cargo build -p weir --bin weir --features test-hooks` once per test process (a no-op when
/// it is up to date; cargo, not file times, decides). Tests live in package `weir-tests`, so
/// cargo does not build the binary of package `weir` for them (and `CARGO_BIN_EXE_weir` does
/// not exist); it lives next to this test executable's `deps` folder. `WEIR_BIN` overrides the
/// choice (a binary built without `test-hooks` then fails the tests that arm a kill point).
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
            "`cargo build -p weir --bin weir` did not produce {}",
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

/// `cargo build -p weir --bin weir --features test-hooks` into the target directory and profile
/// of this test run.
fn build_weir(profile_dir: &Path) {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root()).args([
        "build",
        "-p",
        "weir",
        "--bin",
        "weir",
        "--features",
        "test-hooks",
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
        "`cargo build -p weir --bin weir` failed (see above)"
    );
}

// ---------------------------------------------------------------------------------------------
// A temp folder per run

/// A fresh temp folder holding one run's job file, input, output and checkpoints.
/// Deleted on drop, unless `WEIR_KEEP_TEMP` is set (then its path is printed).
pub(crate) struct Sandbox {
    dir: Option<tempfile::TempDir>,
}

impl Sandbox {
    /// A new empty folder, named after `label` for whoever looks at a kept one.
    pub(crate) fn new(label: &str) -> Sandbox {
        let dir = tempfile::Builder::new()
            .prefix(&format!("weir-{label}-"))
            .tempdir()
            .expect("a temp dir");
        Sandbox { dir: Some(dir) }
    }

    /// The folder.
    pub(crate) fn path(&self) -> &Path {
        self.dir.as_ref().expect("present until drop").path()
    }

    /// A path inside the folder.
    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.path().join(name)
    }

    /// Where the job's file sink writes.
    pub(crate) fn out_dir(&self) -> PathBuf {
        self.join("out")
    }

    /// The job's checkpoint directory.
    pub(crate) fn checkpoint_dir(&self) -> PathBuf {
        self.join("checkpoints")
    }

    /// Where the job file goes.
    pub(crate) fn job_path(&self) -> PathBuf {
        self.join("job.toml")
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if std::env::var_os("WEIR_KEEP_TEMP").is_some()
            && let Some(dir) = self.dir.take()
        {
            eprintln!("kept {}", dir.keep().display());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Job files

/// A value written into a job file.
pub(crate) trait TomlValue {
    /// The TOML text of the value.
    fn toml(&self) -> String;
}

impl TomlValue for &str {
    fn toml(&self) -> String {
        let mut out = String::from("\"");
        for c in self.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => write!(out, "\\u{:04X}", c as u32).unwrap(),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
}

impl TomlValue for &Path {
    fn toml(&self) -> String {
        self.to_str().expect("temp paths are UTF-8").toml()
    }
}

macro_rules! toml_display {
    ($($t:ty),*) => {$(
        impl TomlValue for $t {
            fn toml(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
toml_display!(u32, u64, i64, bool);

impl TomlValue for f64 {
    fn toml(&self) -> String {
        format!("{self:?}")
    }
}

/// How a vertex reads another: `(from, partitioner)`.
pub(crate) type Input<'a> = (&'a str, &'a str);

/// The settings of a `generator` source.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GeneratorSpec {
    /// Subtasks.
    pub(crate) parallelism: u32,
    /// Seed of the records.
    pub(crate) seed: u64,
    /// Records in all; `None` = unbounded.
    pub(crate) count: Option<u64>,
    /// Records per second in all; `None` = as fast as possible.
    pub(crate) rate: Option<f64>,
    /// Distinct keys.
    pub(crate) keys: u64,
}

/// A job file being written, every path absolute.
#[derive(Debug, Clone)]
pub(crate) struct JobFile {
    name: String,
    checkpoint: Vec<(String, String)>,
    restart: Option<String>,
    vertices: Vec<String>,
    /// The job's `chain`: whether tasks may be chained.
    chain: bool,
}

impl JobFile {
    /// A job named `name` with no vertices and no settings.
    pub(crate) fn new(name: &str) -> JobFile {
        JobFile {
            name: name.to_string(),
            checkpoint: Vec::new(),
            restart: None,
            vertices: Vec::new(),
            chain: true,
        }
    }

    /// `chain = false`: every task on a thread of its own, with channels between them.
    pub(crate) fn unchained(mut self) -> JobFile {
        self.chain = false;
        self
    }

    /// Sets a key of `[checkpoint]`.
    pub(crate) fn checkpoint(mut self, key: &str, value: impl TomlValue) -> JobFile {
        self.checkpoint.retain(|(k, _)| k != key);
        self.checkpoint.push((key.to_string(), value.toml()));
        self
    }

    /// The `[restart]` table, as TOML lines (`strategy = "none"`).
    pub(crate) fn restart(mut self, body: &str) -> JobFile {
        self.restart = Some(body.to_string());
        self
    }

    /// A `file` source reading `path`.
    pub(crate) fn file_source(mut self, name: &str, path: &Path, follow: bool) -> JobFile {
        self.vertices.push(format!(
            "[[source]]\nname = {}\ntype = \"file\"\npath = {}\nfollow = {follow}\n",
            name.toml(),
            path.toml()
        ));
        self
    }

    /// A `file` source reading `path`, with more keys (`keys`, TOML lines such as
    /// `format = "jsonl"`).
    pub(crate) fn file_source_with(
        self,
        name: &str,
        path: &Path,
        follow: bool,
        keys: &str,
    ) -> JobFile {
        let mut job = self.file_source(name, path, follow);
        let vertex = job.vertices.last_mut().expect("just pushed");
        vertex.push_str(keys);
        if !keys.ends_with('\n') {
            vertex.push('\n');
        }
        job
    }

    /// A `generator` source.
    pub(crate) fn generator(mut self, name: &str, g: &GeneratorSpec) -> JobFile {
        let mut text = format!(
            "[[source]]\nname = {}\ntype = \"generator\"\nparallelism = {}\nseed = {}\nkeys = {}\n",
            name.toml(),
            g.parallelism,
            g.seed,
            g.keys
        );
        if let Some(count) = g.count {
            writeln!(text, "count = {count}").unwrap();
        }
        if let Some(rate) = g.rate {
            writeln!(text, "rate = {}", rate.toml()).unwrap();
        }
        self.vertices.push(text);
        self
    }

    /// An operator running the guest at `module`.
    pub(crate) fn operator(
        self,
        name: &str,
        module: &str,
        parallelism: u32,
        config: Option<&str>,
        input: Input<'_>,
    ) -> JobFile {
        self.operator_with_inputs(name, module, parallelism, config, &[input])
    }

    /// An operator reading several inputs (ports 0, 1, … in this order).
    pub(crate) fn operator_with_inputs(
        mut self,
        name: &str,
        module: &str,
        parallelism: u32,
        config: Option<&str>,
        inputs: &[Input<'_>],
    ) -> JobFile {
        let inputs: Vec<String> = inputs
            .iter()
            .map(|(from, partition)| {
                format!(
                    "{{ from = {}, partition = {} }}",
                    from.toml(),
                    partition.toml()
                )
            })
            .collect();
        let mut text = format!(
            "[[operator]]\nname = {}\nmodule = {}\nparallelism = {parallelism}\ninputs = [{}]\n",
            name.toml(),
            module.toml(),
            inputs.join(", ")
        );
        if let Some(config) = config {
            writeln!(text, "config = {}", config.toml()).unwrap();
        }
        self.vertices.push(text);
        self
    }

    /// Sets how every operator added so far is checkpointed: `checkpoint = "exports"`,
    /// `"image"` or `"auto"` (docs/JOB.md).
    pub(crate) fn state_capture(mut self, capture: &str) -> JobFile {
        for vertex in &mut self.vertices {
            if vertex.starts_with("[[operator]]") {
                writeln!(vertex, "checkpoint = {}", capture.toml()).unwrap();
            }
        }
        self
    }

    /// Sets `image_full_every` on every operator added so far: a full image every `n` image
    /// checkpoints, deltas between them (docs/JOB.md).
    pub(crate) fn image_full_every(mut self, n: u32) -> JobFile {
        for vertex in &mut self.vertices {
            if vertex.starts_with("[[operator]]") {
                writeln!(vertex, "image_full_every = {n}").unwrap();
            }
        }
        self
    }

    /// An exactly-once `file` sink writing into `dir`.
    pub(crate) fn file_sink(
        mut self,
        name: &str,
        dir: &Path,
        parallelism: u32,
        (from, partition): Input<'_>,
    ) -> JobFile {
        self.vertices.push(format!(
            "[[sink]]\nname = {}\ntype = \"file\"\npath = {}\nparallelism = {parallelism}\ninputs = [{{ from = {}, partition = {} }}]\n",
            name.toml(),
            dir.toml(),
            from.toml(),
            partition.toml()
        ));
        self
    }

    /// A `blackhole` sink: counts records and drops them.
    pub(crate) fn blackhole_sink(
        mut self,
        name: &str,
        parallelism: u32,
        (from, partition): Input<'_>,
    ) -> JobFile {
        self.vertices.push(format!(
            "[[sink]]\nname = {}\ntype = \"blackhole\"\nparallelism = {parallelism}\ninputs = [{{ from = {}, partition = {} }}]\n",
            name.toml(),
            from.toml(),
            partition.toml()
        ));
        self
    }

    /// A vertex written out in full: its TOML table, for what the other builders do not say
    /// (an input reading a side output, a source's watermark).
    pub(crate) fn vertex(mut self, toml: &str) -> JobFile {
        self.vertices.push(toml.to_string());
        self
    }

    /// The job file's text.
    pub(crate) fn to_toml(&self) -> String {
        let mut text = format!("name = {}\n", self.name.as_str().toml());
        if !self.chain {
            text.push_str("chain = false\n");
        }
        text.push_str("\n[checkpoint]\n");
        for (key, value) in &self.checkpoint {
            writeln!(text, "{key} = {value}").unwrap();
        }
        if let Some(restart) = &self.restart {
            write!(text, "\n[restart]\n{restart}\n").unwrap();
        }
        for vertex in &self.vertices {
            write!(text, "\n{vertex}").unwrap();
        }
        text
    }

    /// Writes the job file to `path`.
    pub(crate) fn write(&self, path: &Path) {
        fs::write(path, self.to_toml())
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
    }
}

/// The checkpoint settings most tests use: every `interval`, exactly-once, into the sandbox's
/// checkpoint directory, keeping `retained`.
pub(crate) fn checkpointed(
    job: JobFile,
    sandbox: &Sandbox,
    interval: &str,
    retained: u32,
) -> JobFile {
    job.checkpoint("interval", interval)
        .checkpoint("mode", "exactly-once")
        .checkpoint("directory", sandbox.checkpoint_dir().as_path())
        .checkpoint("retained", retained)
}

/// Word count: file source `lines` → `split` (p=1) → key-hash → `count` (p=2) → forward →
/// exactly-once file sink `out` (p=2) in the sandbox's output directory.
pub(crate) fn wordcount(sandbox: &Sandbox, input: &Path, follow: bool) -> JobFile {
    wordcount_counting_with(sandbox, input, follow, weir_tests::guests::COUNT)
}

/// [`wordcount`] with its `count` operator's module at `count` (a count in another language).
pub(crate) fn wordcount_counting_with(
    sandbox: &Sandbox,
    input: &Path,
    follow: bool,
    count: &str,
) -> JobFile {
    wordcount_of(sandbox, input, follow, (count, 2), "forward")
}

/// [`wordcount`] with `count` of `parallelism` subtasks, reaching the sink (parallelism 2) by
/// `rebalance`: a job whose count can be rescaled.
pub(crate) fn wordcount_at(sandbox: &Sandbox, input: &Path, parallelism: u32) -> JobFile {
    wordcount_of(
        sandbox,
        input,
        false,
        (weir_tests::guests::COUNT, parallelism),
        "rebalance",
    )
}

/// The word count with `count` (its module and parallelism) reaching the sink by `to_sink`.
fn wordcount_of(
    sandbox: &Sandbox,
    input: &Path,
    follow: bool,
    (count, parallelism): (&str, u32),
    to_sink: &str,
) -> JobFile {
    JobFile::new("wordcount")
        .file_source("lines", input, follow)
        .operator(
            "split",
            weir_tests::guests::SPLIT,
            1,
            None,
            ("lines", "forward"),
        )
        .operator("count", count, parallelism, None, ("split", "key-hash"))
        .file_sink("out", &sandbox.out_dir(), 2, ("count", to_sink))
}

/// Keyed count of generated records: generator `gen` → key-hash → `count` (p=2) → forward →
/// exactly-once file sink `out` (p=2).
pub(crate) fn generator_count(sandbox: &Sandbox, generator: &GeneratorSpec) -> JobFile {
    JobFile::new("gencount")
        .generator("gen", generator)
        .operator(
            "count",
            weir_tests::guests::COUNT,
            2,
            None,
            ("gen", "key-hash"),
        )
        .file_sink("out", &sandbox.out_dir(), 2, ("count", "forward"))
}

/// The two-input job of the crash tests: generators `left` and `right` (p=2 each, 2000 keys)
/// → key-hash → `count` (p=3, two inputs) → forward → exactly-once file sink `out` (p=3);
/// checkpoints every 100 ms with no pause, 2 retained. Its committed lines ("key, running
/// count") are the same multiset whatever the interleaving of the inputs.
pub(crate) fn two_input_count(
    sandbox: &Sandbox,
    records_per_source: u64,
    rate: Option<f64>,
) -> JobFile {
    let source = |seed| GeneratorSpec {
        parallelism: 2,
        seed,
        count: Some(records_per_source),
        rate,
        keys: 2_000,
    };
    let inputs: [Input<'_>; 2] = [("left", "key-hash"), ("right", "key-hash")];
    let job = JobFile::new("twoinput")
        .generator("left", &source(11))
        .generator("right", &source(12))
        .operator_with_inputs("count", weir_tests::guests::COUNT, 3, None, &inputs)
        .file_sink("out", &sandbox.out_dir(), 3, ("count", "forward"));
    checkpointed(job, sandbox, "100ms", 2).checkpoint("min_pause", "0ms")
}

/// A text of `lines` lines of words drawn from a fixed vocabulary (some capitalised or with
/// punctuation, which `split` strips), `words_per_line` words each on average. Same seed, same
/// text.
pub(crate) fn word_text(seed: u64, lines: usize, words_per_line: u64) -> String {
    const VOCABULARY: &[&str] = &[
        "river", "Weir", "stream", "flow,", "water", "barrier", "check", "point.", "state", "sink",
        "source", "count", "split!", "word", "exactly", "once", "crash", "restore", "kill",
        "commit", "part", "file", "offset", "key", "hash", "task", "guest", "wasm", "module",
        "job",
    ];
    let mut rng = Rng::new(seed);
    let mut text = String::new();
    for _ in 0..lines {
        let n = 1 + rng.below(2 * words_per_line - 1);
        for i in 0..n {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(VOCABULARY[rng.below(VOCABULARY.len() as u64) as usize]);
        }
        text.push('\n');
    }
    text
}

/// The counts the word-count job must commit for `text`: for each word `w` seen `n` times, the
/// lines `w\t1` … `w\tn` (the count operator emits each updated count), sorted.
pub(crate) fn word_counts(text: &str) -> Vec<String> {
    let mut totals = BTreeMap::<String, u64>::new();
    for word in text.split_whitespace() {
        let word = word
            .trim_matches(|c: char| c.is_ascii_punctuation())
            .to_lowercase();
        if !word.is_empty() {
            *totals.entry(word).or_default() += 1;
        }
    }
    let mut lines: Vec<String> = totals
        .iter()
        .flat_map(|(w, n)| (1..=*n).map(move |i| format!("{w}\t{i}")))
        .collect();
    lines.sort_unstable();
    lines
}

// ---------------------------------------------------------------------------------------------
// Output and checkpoints on disk

/// Every line of every committed part file in `dir` (all subtasks; in-progress parts, whose
/// names start with a dot, are not output), sorted: the committed output as a multiset.
pub(crate) fn committed_lines(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return lines;
    };
    for entry in entries {
        let entry = entry.unwrap();
        let name = entry.file_name().into_string().unwrap();
        if name.starts_with('.') {
            continue;
        }
        let text = fs::read_to_string(entry.path()).unwrap();
        lines.extend(text.lines().map(str::to_string));
    }
    lines.sort_unstable();
    lines
}

/// The names of the in-progress (dot) files in the sink's directory.
pub(crate) fn in_progress_files(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with('.') && n.ends_with(".inprogress"))
        .collect();
    names.sort();
    names
}

/// Asserts that two sorted multisets of lines are equal; otherwise fails with how many lines
/// are missing and how many extra, and a few of each.
pub(crate) fn assert_same_output(actual: &[String], expected: &[String], context: &str) {
    if actual == expected {
        return;
    }
    let (mut missing, mut extra) = (Vec::new(), Vec::new());
    let (mut a, mut e) = (0, 0);
    while a < actual.len() || e < expected.len() {
        match (actual.get(a), expected.get(e)) {
            (Some(x), Some(y)) if x == y => {
                a += 1;
                e += 1;
            }
            (Some(x), Some(y)) if x < y => {
                extra.push(x);
                a += 1;
            }
            (Some(x), None) => {
                extra.push(x);
                a += 1;
            }
            (_, Some(y)) => {
                missing.push(y);
                e += 1;
            }
            (None, None) => unreachable!(),
        }
    }
    panic!(
        "{context}: the committed output differs from the failure-free reference: {} lines, \
         expected {}; {} missing (lost), e.g. {:?}; {} extra (duplicated), e.g. {:?}",
        actual.len(),
        expected.len(),
        missing.len(),
        &missing[..missing.len().min(5)],
        extra.len(),
        &extra[..extra.len().min(5)],
    );
}

/// A `chk-<id>` directory found in a checkpoint directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckpointDir {
    /// Its id.
    pub(crate) id: u64,
    /// Its path.
    pub(crate) path: PathBuf,
    /// Whether its `_metadata` exists (the checkpoint completed).
    pub(crate) complete: bool,
}

/// The `chk-` directories of `dir`, oldest first.
pub(crate) fn checkpoint_dirs(dir: &Path) -> Vec<CheckpointDir> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<CheckpointDir> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            let id = path
                .file_name()?
                .to_str()?
                .strip_prefix("chk-")?
                .parse()
                .ok()?;
            Some(CheckpointDir {
                id,
                complete: path.join("_metadata").is_file(),
                path,
            })
        })
        .collect();
    found.sort_by_key(|c| c.id);
    found
}

/// The ids of the complete checkpoints in `dir`, oldest first.
pub(crate) fn complete_checkpoint_ids(dir: &Path) -> Vec<u64> {
    checkpoint_dirs(dir)
        .into_iter()
        .filter(|c| c.complete)
        .map(|c| c.id)
        .collect()
}

/// Fails unless every complete checkpoint (one with `_metadata`) under `dir` verifies: its
/// metadata reads and every state file it names has the recorded length and checksum. A crash
/// may leave incomplete checkpoints behind, never a complete one that cannot be restored.
pub(crate) fn assert_complete_checkpoints_verify(dir: &Path, context: &str) {
    use weir::checkpoint::layout::CheckpointLayout;
    use weir::checkpoint::restore::verify;
    use weir::checkpoint::storage::{CheckpointStorage as _, LocalStorage};
    let storage = LocalStorage::new(CheckpointLayout::new(dir));
    for checkpoint in checkpoint_dirs(dir).into_iter().filter(|c| c.complete) {
        let verified = storage
            .locate(&checkpoint.path)
            .and_then(|location| verify(&storage, &location));
        if let Err(e) = verified {
            panic!(
                "{context}: complete checkpoint {} cannot be restored: {e}",
                checkpoint.path.display()
            );
        }
    }
}

/// The complete checkpoints (not savepoints) in `dir` with their metadata, by id.
pub(crate) fn complete_checkpoints(
    dir: &Path,
) -> BTreeMap<u64, weir::checkpoint::metadata::CheckpointMetadata> {
    use weir::checkpoint::layout::CheckpointLayout;
    use weir::checkpoint::storage::{CheckpointStorage as _, LocalStorage};
    use weir::ids::CheckpointKind;
    let storage = LocalStorage::new(CheckpointLayout::new(dir));
    storage
        .list()
        .unwrap_or_default()
        .into_iter()
        .filter(|l| l.kind == CheckpointKind::Checkpoint)
        .filter_map(|l| Some((l.id.0, l.metadata()?.clone())))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// `weir` as a child process

/// A running `weir` process. Killed (SIGKILL) and reaped on drop if still running, so a failing
/// test never leaves one behind. Its stderr goes to a file, readable while it runs.
pub(crate) struct Weir {
    child: Option<Child>,
    stderr: PathBuf,
    started: Instant,
}

/// How a `weir` process ended.
#[derive(Debug)]
pub(crate) struct Ended {
    /// Its exit status.
    pub(crate) status: ExitStatus,
    /// Everything it wrote to stderr (logs and the summary).
    pub(crate) stderr: String,
}

impl Ended {
    /// The exit code; `None` when a signal ended it.
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.code()
    }

    /// Fails unless the process exited with `code`, showing its stderr.
    pub(crate) fn assert_code(&self, code: i32, context: &str) {
        assert_eq!(
            self.code(),
            Some(code),
            "{context}: `weir` ended with {}; its stderr:\n{}",
            self.status,
            self.stderr
        );
    }
}

impl Weir {
    /// Starts `weir run <job> <args…>`, its stderr going to `stderr_file`.
    pub(crate) fn run(job: &Path, args: &[&str], stderr_file: &Path) -> Weir {
        Weir::run_with_env(job, args, &[], stderr_file)
    }

    /// [`Weir::run`] with these environment variables set (a kill point, say).
    pub(crate) fn run_with_env(
        job: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        stderr_file: &Path,
    ) -> Weir {
        let stderr = fs::File::create(stderr_file).expect("a file for the stderr of weir");
        let child = Command::new(weir_bin())
            .arg("run")
            .arg(job)
            .args(args)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", weir_bin().display()));
        Weir {
            child: Some(child),
            stderr: stderr_file.to_path_buf(),
            started: Instant::now(),
        }
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// How long ago it was started.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// What it has written to stderr so far.
    pub(crate) fn stderr(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Its exit status, if it has exited.
    pub(crate) fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .expect("running")
            .try_wait()
            .expect("waiting for weir")
    }

    /// Waits until `done` holds, polling every 10 ms. Returns false if the process exited first
    /// (and `done` still does not hold); panics, showing stderr, after `timeout`.
    pub(crate) fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&Weir) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if done(self) {
                return true;
            }
            if self.try_exit().is_some() {
                return done(self);
            }
            assert!(
                Instant::now() < deadline,
                "waited {timeout:?} for {what}; stderr of weir:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends SIGKILL (unless it already exited) and reaps it.
    pub(crate) fn kill(mut self) -> Ended {
        let mut child = self.child.take().expect("running");
        let _ = child.kill();
        let status = child.wait().expect("reaping weir");
        Ended {
            status,
            stderr: self.stderr(),
        }
    }

    /// Sends SIGTERM: a graceful stop (a cancel, or a stop with a savepoint).
    pub(crate) fn terminate(&self) {
        self.signal("TERM");
    }

    /// Sends the signal of this name (`STOP`, `CONT`, …).
    pub(crate) fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .args([&format!("-{name}"), &self.pid().to_string()])
            .status()
            .unwrap_or_else(|e| panic!("cannot run `kill -{name}`: {e}"));
        assert!(status.success(), "`kill -{name} {}` failed", self.pid());
    }

    /// Waits for it to exit on its own; after `timeout` kills it and fails, showing stderr.
    ///
    /// `timeout` counts from the job's start ([`JOB_STARTING`]), or from this call if it started
    /// before: loading the modules has [`LOAD_TIMEOUT`] of its own, so that a component
    /// compiled on a busy machine does not eat the time of the job itself.
    pub(crate) fn wait(mut self, timeout: Duration) -> Ended {
        let called = Instant::now();
        let mut deadline = None;
        let mut polls = 0u32;
        loop {
            if let Some(status) = self.try_exit() {
                self.child = None;
                return Ended {
                    status,
                    stderr: self.stderr(),
                };
            }
            let now = Instant::now();
            match deadline {
                Some(deadline) if now >= deadline => break,
                Some(_) => {}
                None if now >= called + LOAD_TIMEOUT + timeout => break,
                // Its stderr read every 100 ms, not at every poll: it may be long.
                None if polls.is_multiple_of(10) && self.stderr().contains(JOB_STARTING) => {
                    deadline = Some(now + timeout);
                }
                None => {}
            }
            polls += 1;
            std::thread::sleep(Duration::from_millis(10));
        }
        let ended = self.kill();
        panic!(
            "`weir` did not exit within {timeout:?} of its job's start (or {LOAD_TIMEOUT:?} more \
             before it); killed it; its stderr:\n{}",
            ended.stderr
        );
    }
}

impl Drop for Weir {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What a command (`weir`'s, or another program's) printed, and how it ended.
#[derive(Debug)]
pub(crate) struct CliOutput {
    /// The exit code; `None` when a signal ended it.
    pub(crate) code: Option<i32>,
    /// Its standard output.
    pub(crate) stdout: String,
    /// Its standard error.
    pub(crate) stderr: String,
}

/// Runs `weir ARGS` to its end with `stdin` as its standard input and `env` set (and no
/// `WEIR_CONTROL_TOKEN` from the test's own environment), killing it and failing after
/// [`CLI_TIMEOUT`]. Its streams go through files in `sandbox`, so nothing blocks on a full pipe.
/// The one way the tests run a `weir` verb to its end; [`Weir`] is for a `weir run` they watch.
pub(crate) fn weir_command(
    sandbox: &Sandbox,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> CliOutput {
    run_program(sandbox, weir_bin(), args, stdin, env)
}

/// Runs `program ARGS` as [`weir_command`] runs `weir`.
pub(crate) fn run_program(
    sandbox: &Sandbox,
    program: &Path,
    args: &[&str],
    stdin: &str,
    env: &[(&str, &str)],
) -> CliOutput {
    let (input, out, err) = (
        sandbox.join("cmd.stdin"),
        sandbox.join("cmd.stdout"),
        sandbox.join("cmd.stderr"),
    );
    fs::write(&input, stdin).unwrap();
    let mut child = Command::new(program)
        .args(args)
        .env_remove("WEIR_CONTROL_TOKEN")
        .envs(env.iter().copied())
        .stdin(Stdio::from(fs::File::open(&input).unwrap()))
        .stdout(Stdio::from(fs::File::create(&out).unwrap()))
        .stderr(Stdio::from(fs::File::create(&err).unwrap()))
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > CLI_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`{} {}` ran longer than {CLI_TIMEOUT:?}",
                program.display(),
                args.join(" ")
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    CliOutput {
        code: status.code(),
        stdout: fs::read_to_string(&out).unwrap(),
        stderr: fs::read_to_string(&err).unwrap(),
    }
}

/// The savepoint a `weir run` summary names (`savepoint:     PATH (restore with …)`).
#[track_caller]
pub(crate) fn savepoint_named(stderr: &str) -> PathBuf {
    let line = stderr
        .lines()
        .find_map(|l| l.trim_start().strip_prefix("savepoint:"))
        .unwrap_or_else(|| panic!("the summary names no savepoint:\n{stderr}"));
    PathBuf::from(
        line.split_whitespace()
            .next()
            .expect("a path after `savepoint:`"),
    )
}

/// Runs the job of `sandbox` with `--savepoint-on-stop` (its stderr in `log`) until checkpoint
/// `checkpoints` (or a later one) completed, stops it with SIGTERM and returns the savepoint it
/// took. By id, not by the checkpoints on disk, which retention prunes.
pub(crate) fn stop_with_savepoint(sandbox: &Sandbox, log: &Path, checkpoints: u64) -> PathBuf {
    let mut weir = Weir::run(&sandbox.job_path(), &["--savepoint-on-stop"], log);
    let dir = sandbox.checkpoint_dir();
    let running = weir.wait_until("checkpoints", CLI_TIMEOUT, |_| {
        complete_checkpoint_ids(&dir)
            .last()
            .is_some_and(|&id| id >= checkpoints)
    });
    assert!(
        running,
        "the job ended before {checkpoints} checkpoints:\n{}",
        weir.stderr()
    );
    weir.terminate();
    let ended = weir.wait(CLI_TIMEOUT);
    ended.assert_code(0, "a stop with a savepoint");
    savepoint_named(&ended.stderr)
}

/// Runs `weir run <job> <args…>` to its end (at most [`CLI_TIMEOUT`]), stderr in `stderr_file`.
pub(crate) fn run_cli(job: &Path, args: &[&str], stderr_file: &Path) -> Ended {
    Weir::run(job, args, stderr_file).wait(CLI_TIMEOUT)
}

// ---------------------------------------------------------------------------------------------
// In-process runs through the library

/// A job running in this process on a thread of its own, through [`JobRunner`].
pub(crate) struct InProcess {
    requests: UnboundedSender<JobRequest>,
    monitor: JobMonitor,
    outcome: mpsc::Receiver<Result<JobOutcome, String>>,
}

impl InProcess {
    /// Loads the job file at `job` and starts it.
    pub(crate) fn start(job: &Path, options: RunOptions) -> InProcess {
        let job = Job::load(job).unwrap_or_else(|e| panic!("{e}"));
        let runner =
            JobRunner::new(job, options).unwrap_or_else(|e| panic!("cannot start the job: {e}"));
        let monitor = runner.monitor();
        let (requests, requests_rx) = tokio::sync::mpsc::unbounded_channel();
        let (outcome_tx, outcome) = mpsc::channel();
        std::thread::Builder::new()
            .name("test-job".into())
            .spawn(move || {
                let _ = outcome_tx.send(runner.run(requests_rx).map_err(|e| e.to_string()));
            })
            .unwrap();
        InProcess {
            requests,
            monitor,
            outcome,
        }
    }

    /// The job's live view.
    pub(crate) fn monitor(&self) -> &JobMonitor {
        &self.monitor
    }

    /// Asks the job to do something (cancel, savepoint).
    pub(crate) fn request(&self, request: JobRequest) {
        self.requests.send(request).expect("the job is running");
    }

    /// Waits until `done` holds of the monitor, polling every 5 ms; fails after `timeout` or if
    /// the job ends first.
    pub(crate) fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        mut done: impl FnMut(&JobMonitor) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        while !done(&self.monitor) {
            if let Ok(ended) = self.outcome.try_recv() {
                panic!("the job ended while waiting for {what}: {ended:?}");
            }
            assert!(Instant::now() < deadline, "waited {timeout:?} for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits for the job's outcome, at most [`JOB_TIMEOUT`] (then cancels it and fails).
    pub(crate) fn join(self) -> JobOutcome {
        match self.outcome.recv_timeout(JOB_TIMEOUT) {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => panic!("the job could not run: {e}"),
            Err(_) => {
                let _ = self.requests.send(JobRequest::Cancel);
                panic!("the job did not end within {JOB_TIMEOUT:?}; asked it to cancel")
            }
        }
    }
}

impl Drop for InProcess {
    fn drop(&mut self) {
        // A test that fails midway leaves no job running behind it.
        let _ = self.requests.send(JobRequest::Cancel);
    }
}

/// Runs the job file at `job` in this process to its end.
pub(crate) fn run_in_process(job: &Path) -> JobOutcome {
    InProcess::start(job, RunOptions::default()).join()
}

// ---------------------------------------------------------------------------------------------
// Seeds

/// A small seeded random source (SplitMix64): the same seed gives the same choices.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A source seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A number in `lo..hi`.
    pub(crate) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo)
    }
}

/// The seed named by the environment variable `var` (a number, or `random` for one taken from
/// the clock), else `default`. Printed, so that any run can be repeated.
pub(crate) fn seed_from_env(var: &str, default: u64) -> u64 {
    let seed = match std::env::var(var) {
        Ok(v) if v == "random" => SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{var} must be a number or `random`, found {v:?}")),
        Err(_) => default,
    };
    eprintln!("seed {seed} (repeat with {var}={seed})");
    let _ = std::io::stderr().flush();
    seed
}

/// The number in the environment variable `var`, else `default`.
pub(crate) fn number_from_env(var: &str, default: u64) -> u64 {
    match std::env::var(var) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{var} must be a number, found {v:?}")),
        Err(_) => default,
    }
}

/// The path of a guest built from another language, or `None` — said loudly — when the build
/// skipped it (`WEIR_SKIP_FOREIGN_GUESTS=1` and no toolchain). In CI a skipped guest fails.
pub(crate) fn foreign(name: &str, path: Option<&'static str>) -> Option<&'static str> {
    if path.is_none() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the {name} guest was not built, and CI never skips it: install its toolchain"
        );
        // Straight to the stream, not `eprintln!`: the test harness hides what that prints.
        let _ = writeln!(
            std::io::stderr(),
            "\n!!!!! SKIPPED: the {name} guest was not built (WEIR_SKIP_FOREIGN_GUESTS=1 \
             and its toolchain is missing); the tests of it are skipped !!!!!\n"
        );
    }
    path
}
