//! Job files written by the tests, every path absolute, and the jobs most tests run (the word
//! count, a keyed count of generated records, the two-input count) with the input text of the
//! word count and the output it must commit.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use super::{Ended, Rng, Sandbox, run_cli};

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
    state: Vec<(String, String)>,
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
            state: Vec::new(),
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

    /// Sets a key of `[state]`.
    pub(crate) fn state(mut self, key: &str, value: impl TomlValue) -> JobFile {
        self.state.retain(|(k, _)| k != key);
        self.state.push((key.to_string(), value.toml()));
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
        let inputs: Vec<String> = inputs.iter().map(input_toml).collect();
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
    pub(crate) fn state_capture(self, capture: &str) -> JobFile {
        self.on_every_operator(&format!("checkpoint = {}", capture.toml()))
    }

    /// Sets `image_full_every` on every operator added so far: a full image every `n` image
    /// checkpoints, deltas between them (docs/JOB.md).
    pub(crate) fn image_full_every(self, n: u32) -> JobFile {
        self.on_every_operator(&format!("image_full_every = {n}"))
    }

    /// Adds the TOML line `line` to every operator added so far.
    fn on_every_operator(mut self, line: &str) -> JobFile {
        for vertex in &mut self.vertices {
            if vertex.starts_with("[[operator]]") {
                writeln!(vertex, "{line}").unwrap();
            }
        }
        self
    }

    /// An exactly-once `file` sink writing into `dir`.
    pub(crate) fn file_sink(
        self,
        name: &str,
        dir: &Path,
        parallelism: u32,
        input: Input<'_>,
    ) -> JobFile {
        let kind = format!("type = \"file\"\npath = {}", dir.toml());
        self.sink(name, &kind, parallelism, input)
    }

    /// A `blackhole` sink: counts records and drops them.
    pub(crate) fn blackhole_sink(self, name: &str, parallelism: u32, input: Input<'_>) -> JobFile {
        self.sink(name, "type = \"blackhole\"", parallelism, input)
    }

    /// A sink whose type and its keys are the TOML lines `kind`.
    fn sink(mut self, name: &str, kind: &str, parallelism: u32, input: Input<'_>) -> JobFile {
        self.vertices.push(format!(
            "[[sink]]\nname = {}\n{kind}\nparallelism = {parallelism}\ninputs = [{}]\n",
            name.toml(),
            input_toml(&input)
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
        if !self.state.is_empty() {
            text.push_str("\n[state]\n");
            for (key, value) in &self.state {
                writeln!(text, "{key} = {value}").unwrap();
            }
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

    /// Writes the job file as the job of `sandbox` and runs it to its end ([`run_cli`]), its
    /// stderr in `weir.log`.
    pub(crate) fn run_in(&self, sandbox: &Sandbox) -> Ended {
        self.write(&sandbox.job_path());
        run_cli(&sandbox.job_path(), &[], &sandbox.join("weir.log"))
    }
}

/// An input of a vertex as TOML: `{ from = "FROM", partition = "PARTITION" }`.
fn input_toml((from, partition): &Input<'_>) -> String {
    format!(
        "{{ from = {}, partition = {} }}",
        from.toml(),
        partition.toml()
    )
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
pub(crate) fn wordcount_of(
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

/// The counts the word-count job must commit for `text`: [`running_counts`] of its words.
pub(crate) fn word_counts(text: &str) -> Vec<String> {
    running_counts(
        text.split_whitespace()
            .map(|word| {
                word.trim_matches(|c: char| c.is_ascii_punctuation())
                    .to_lowercase()
            })
            .filter(|word| !word.is_empty()),
    )
}

/// What the keyed count operator commits for `keys`: for each key `k` seen `n` times, the lines
/// `k\t1` … `k\tn` (it emits each updated count), sorted.
pub(crate) fn running_counts(keys: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut totals = BTreeMap::<String, u64>::new();
    for key in keys {
        *totals.entry(key).or_default() += 1;
    }
    let mut lines: Vec<String> = totals
        .iter()
        .flat_map(|(k, n)| (1..=*n).map(move |i| format!("{k}\t{i}")))
        .collect();
    lines.sort_unstable();
    lines
}
