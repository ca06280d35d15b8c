//! [`OperatorTest`]: one operator run in isolation over JSON-lines records — the harness behind
//! `weir test` (`docs/TOOLS.md`).
//!
//! # Why
//!
//! The Rust SDK has a native test harness; an author writing C, AssemblyScript or WAT has
//! nothing but the ABI. This runner gives them the same checks without writing a job: input
//! records in, the operator's output out, compared against a file of expected records. It
//! drives the module through the host's own [`OperatorModule`] and [`GuestInstance`], so a
//! module that passes here behaves the same in a job, and every guest failure is the typed
//! [`GuestError`] a job would report.
//!
//! The checkpoint check is the part that is hard to get right by hand: with
//! `checkpoint_every = N`, the runner snapshots after every N input records and after the last,
//! restores the state into a **fresh** instance and continues there — and it also runs the same
//! batches once without checkpoints. A snapshot the guest cannot restore fails the test, naming
//! the restore, when it is taken, rather than a job's recovery, when it is needed. An operator whose snapshot forgets part of its state produces different
//! output, and the first difference is reported.
//!
//! The state is captured the way a job captures it ([`StateCapture`], the operator's
//! `checkpoint` key in docs/JOB.md, `auto` by default): through the guest's own `weir_snapshot`
//! and `weir_restore` (a fresh instance gets `weir_init`, then `weir_restore`), or as an image of
//! its memory and globals (the fresh instance is started for the image, as a job's restore
//! starts it: neither `_initialize` nor `weir_init` runs, the image is written in). The outcome
//! and every failure name the capture used ([`CaptureUsed`]).
//!
//! # Batches
//!
//! Input records become batches the way a job would deliver them: consecutive records of one
//! port, at most `batch_size` per batch, and a batch always ends at a checkpoint (every N
//! records), so both runs see exactly the same batches. [`plan_batches`] is that rule, as a
//! pure function.

use std::fmt;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::num::NonZeroUsize;
use std::ops::Range;
use std::path::{Path, PathBuf};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use weir_abi::key_group::{DEFAULT_MAX_PARALLELISM, KeyGroups};
use weir_abi::time::END_OF_TIME;
use weir_abi::{Batch, BatchBuilder};

use super::json_record::{JsonLinesError, JsonRecord, read_json_lines};
use super::mismatch::{Mismatch, records};
use crate::ids::CheckpointId;
use crate::state::keyed::memory::MemoryBackend;
use crate::state::keyed::section::KeyedState;
use crate::wasm::{
    EngineError, EngineOptions, GuestError, GuestFailure, GuestInstance, GuestOutput,
    InstanceContext, LoadOptions, ModuleError, ModuleProblem, ModuleSource, OperatorModule,
    StateCapture, WasmEngine,
};

/// The environment variable that, in builds with the `test-hooks` feature, makes every
/// restore of a checkpointed run get the run's first snapshot: a restore gone wrong, for the
/// end-to-end tests of how one is reported. Absent from the release `weir`.
#[cfg(feature = "test-hooks")]
pub(crate) const STALE_RESTORE_ENV: &str = "WEIR_TEST_STALE_RESTORE";

/// The default number of records per batch.
pub const DEFAULT_BATCH_SIZE: NonZeroUsize = NonZeroUsize::new(64).expect("64 is not zero");

/// How a test run captured the operator's state at its checkpoints: what
/// [`StateCapture`] resolved to for the module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureUsed {
    /// The guest's own `weir_snapshot` and `weir_restore` exports.
    Exports,
    /// The exports were asked for (`checkpoint = "exports"`), but the module exports no
    /// `weir_snapshot`: every snapshot is empty, and a restore starts from nothing.
    EmptyExports,
    /// An image of the instance's memories and mutable globals, taken by the host.
    Image,
    /// A component's own `snapshot` and `restore` (docs/COMPONENTS.md): with the Python and
    /// JavaScript SDKs, their default state (the operator's attributes, or its properties).
    Component,
}

impl CaptureUsed {
    /// The capture a job uses for `module` as it was loaded.
    pub fn of(module: &OperatorModule) -> Self {
        if module.is_component() {
            CaptureUsed::Component
        } else if module.image_layout().is_some() {
            CaptureUsed::Image
        } else if module.capabilities().snapshot {
            CaptureUsed::Exports
        } else {
            CaptureUsed::EmptyExports
        }
    }

    /// What one restored checkpoint is called in the outcome, in the plural.
    fn restored_plural(self) -> &'static str {
        match self {
            CaptureUsed::Exports => "snapshots (weir_snapshot)",
            CaptureUsed::EmptyExports => "empty snapshots (no weir_snapshot)",
            CaptureUsed::Image => "images",
            CaptureUsed::Component => "snapshots (the component's snapshot)",
        }
    }

    /// What one restored checkpoint is called in the outcome, in the singular.
    fn restored_singular(self) -> &'static str {
        match self {
            CaptureUsed::Exports => "snapshot (weir_snapshot)",
            CaptureUsed::EmptyExports => "empty snapshot (no weir_snapshot)",
            CaptureUsed::Image => "image",
            CaptureUsed::Component => "snapshot (the component's snapshot)",
        }
    }

    /// The checkpoints of a run, in a failure message: "a snapshot and restore", "an image".
    fn checkpoint_phrase(self) -> &'static str {
        match self {
            CaptureUsed::Exports | CaptureUsed::EmptyExports | CaptureUsed::Component => {
                "a snapshot and restore"
            }
            CaptureUsed::Image => "an image of memory and globals restored",
        }
    }

    /// Why the outputs differ with this capture, and the fix.
    fn mismatch_cause(self) -> &'static str {
        match self {
            CaptureUsed::Exports => {
                "the operator is checkpointed through its weir_snapshot and weir_restore \
                 (checkpoint = \"auto\" or \"exports\"), so its snapshot or restore loses or \
                 changes state: make weir_snapshot save everything weir_process reads \
                 (docs/ABI.md §3), or drop both exports and let the host take an image \
                 (--checkpoint image)"
            }
            CaptureUsed::EmptyExports => {
                "the operator is checkpointed through its exports (--checkpoint exports), but it \
                 exports no weir_snapshot, so every snapshot is empty and each restore starts \
                 from nothing: test it as a job checkpoints it by default, with --checkpoint auto \
                 (an image of its memory and globals), or add weir_snapshot and weir_restore \
                 (docs/ABI.md §3)"
            }
            CaptureUsed::Image => {
                "the image restore changed the operator's state: the host took an image of its \
                 memories and mutable globals (--checkpoint image, or auto without snapshot \
                 exports) and the restored instance computes otherwise. The host refuses modules \
                 that keep state an image misses, so this is a fault in Weir's image capture, \
                 not in the operator: please report it with the module; until then checkpoint \
                 it through weir_snapshot and weir_restore (docs/ABI.md §3, --checkpoint exports)"
            }
            CaptureUsed::Component => {
                "the component is checkpointed through its snapshot and restore, and they lose or \
                 change state: the Python SDK pickles the operator's attributes and the \
                 JavaScript SDK writes its own enumerable properties as JSON, leaving out names \
                 that start with `_` — keep the state there, or override snapshot() and \
                 restore() (docs/COMPONENTS.md)"
            }
        }
    }
}

impl fmt::Display for CaptureUsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CaptureUsed::Exports => "through its weir_snapshot and weir_restore",
            CaptureUsed::EmptyExports => "through its exports, which have no weir_snapshot",
            CaptureUsed::Image => "as an image of its memory and globals",
            CaptureUsed::Component => "through the component's snapshot and restore",
        })
    }
}

/// How to run the operator: who it is, what it is given, how input is batched and checkpointed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestOptions {
    /// The operator's name, as the init message gives it and errors name it.
    pub operator: String,
    /// The operator's config, given to `weir_init` (the job file's `config`).
    pub config: Vec<u8>,
    /// How many instances of the operator the init message says run.
    pub parallelism: u32,
    /// Which of them this one is, below `parallelism`.
    pub subtask: u32,
    /// Most records per input batch.
    pub batch_size: NonZeroUsize,
    /// Snapshot and restore into a fresh instance after every this many input records, and
    /// check the output against a run without checkpoints; `None` for no checkpoints.
    pub checkpoint_every: Option<NonZeroUsize>,
    /// Call `weir_finish` after the last input, as a job does when its inputs end.
    pub finish: bool,
}

impl TestOptions {
    /// Options for the operator `operator`: no config, subtask 0 of 1, batches of
    /// [`DEFAULT_BATCH_SIZE`], no checkpoints, no finish.
    pub fn new(operator: impl Into<String>) -> Self {
        TestOptions {
            operator: operator.into(),
            config: Vec::new(),
            parallelism: 1,
            subtask: 0,
            batch_size: DEFAULT_BATCH_SIZE,
            checkpoint_every: None,
            finish: false,
        }
    }
}

/// What a test run produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestOutcome {
    /// The operator's output records, in order (port 0). With checkpoints, the output of the
    /// run with them — equal to the run without them, or the run would have failed.
    pub output: Vec<JsonRecord>,
    /// How many input records were processed.
    pub records_in: usize,
    /// How many batches they were processed in.
    pub batches: usize,
    /// How many times the state was snapshotted and restored into a fresh instance.
    pub checkpoints: usize,
    /// How the state was captured at those checkpoints.
    pub capture: CaptureUsed,
}

impl fmt::Display for TestOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in {} batch{}, {} out",
            records(self.records_in),
            self.batches,
            if self.batches == 1 { "" } else { "es" },
            records(self.output.len())
        )?;
        if self.checkpoints > 0 {
            write!(
                f,
                "; {} {} restored into fresh instances, output identical to a run without them",
                self.checkpoints,
                if self.checkpoints == 1 {
                    self.capture.restored_singular()
                } else {
                    self.capture.restored_plural()
                }
            )?;
        }
        Ok(())
    }
}

/// A test could not run, or the operator failed it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestError {
    /// The wasm engine could not be set up.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The host refused the module.
    #[error(transparent)]
    Module(Box<ModuleError>),
    /// A file the test needs could not be read.
    #[error("cannot read the {what} `{path}`: {error}")]
    Read {
        /// What the file is for, e.g. `config file`.
        what: &'static str,
        /// Its path.
        path: String,
        /// The I/O error.
        #[source]
        error: std::io::Error,
    },
    /// The input or the expected output is not valid JSON lines.
    #[error(transparent)]
    Records(#[from] JsonLinesError),
    /// The subtask is not below the parallelism.
    #[error("subtask {subtask} is not below the parallelism {parallelism}; subtasks count from 0")]
    Subtask {
        /// The subtask asked for.
        subtask: u32,
        /// The parallelism asked for.
        parallelism: u32,
    },
    /// A guest call failed.
    #[error("{error}{}", in_run(*.checkpoint_every, *.capture))]
    Guest {
        /// The failure, naming operator, subtask and call.
        error: Box<GuestError>,
        /// The checkpoint interval of the run that failed; `None` for the run without
        /// checkpoints.
        checkpoint_every: Option<usize>,
        /// How that run captured the state.
        capture: CaptureUsed,
    },
    /// The output with checkpoints differs from the output without them: with the guest's
    /// exports, its snapshot or restore loses or changes state; with an image, the image
    /// restore did.
    #[error(
        "the output with {} every {} differs from the output without them: {}\n{mismatch}",
        .capture.checkpoint_phrase(),
        records(*.every),
        .capture.mismatch_cause()
    )]
    CheckpointMismatch {
        /// The checkpoint interval, in input records.
        every: usize,
        /// How the state was captured.
        capture: CaptureUsed,
        /// The first difference.
        mismatch: Box<Mismatch>,
    },
    /// The output differs from the expected output.
    #[error("the output differs from `{path}`\n{mismatch}")]
    ExpectMismatch {
        /// The file of expected records.
        path: String,
        /// The first difference.
        mismatch: Box<Mismatch>,
    },
}

impl From<ModuleError> for TestError {
    fn from(error: ModuleError) -> Self {
        TestError::Module(Box::new(error))
    }
}

impl TestError {
    /// Whether the module failed the test (the `weir test` exit code 1), as opposed to the
    /// test not being able to run at all (bad arguments or files: exit code 2).
    pub fn is_test_failure(&self) -> bool {
        match self {
            TestError::Module(e) => !matches!(e.problem, ModuleProblem::Io(_)),
            TestError::Guest { .. }
            | TestError::CheckpointMismatch { .. }
            | TestError::ExpectMismatch { .. } => true,
            TestError::Engine(_)
            | TestError::Read { .. }
            | TestError::Records(_)
            | TestError::Subtask { .. } => false,
        }
    }

    /// The guest's wasm backtrace, when a guest call failed and wasmtime captured one.
    pub fn guest_backtrace(&self) -> Option<&str> {
        match self {
            TestError::Guest { error, .. } => error.backtrace.as_deref(),
            _ => None,
        }
    }
}

/// Names the run a guest failure happened in, when it was the one with checkpoints.
fn in_run(checkpoint_every: Option<usize>, capture: CaptureUsed) -> String {
    match checkpoint_every {
        None => String::new(),
        Some(n) => format!(
            " (in the run with a checkpoint every {}, the state captured {capture})",
            records(n)
        ),
    }
}

/// One operator's module, loaded, with the options to run it under.
#[derive(Debug)]
pub struct OperatorTest {
    /// The loaded module.
    module: OperatorModule,
    /// How to run it.
    options: TestOptions,
}

impl OperatorTest {
    /// Loads the module at `path` (`.wasm` or `.wat`) under the default
    /// [`GuestLimits`](crate::wasm::GuestLimits), with its state captured as `capture` says, as
    /// a job would load it: a module an image cannot capture is refused under
    /// [`StateCapture::Image`] (and under [`StateCapture::Auto`] without snapshot exports).
    pub fn load(
        path: impl AsRef<Path>,
        capture: StateCapture,
        options: TestOptions,
    ) -> Result<Self, TestError> {
        // The CLI's module cache, as `weir run` uses it: a component compiles for seconds.
        let engine = WasmEngine::for_job(&EngineOptions {
            module_cache: crate::runtime::default_module_cache_dir(),
            ..EngineOptions::default()
        })?;
        let load = LoadOptions {
            capture,
            ..LoadOptions::default()
        };
        let module = OperatorModule::load(&engine, ModuleSource::file(&path), load)?;
        Self::new(module, options)
    }

    /// A test of an already loaded module, checkpointed as it was loaded to be
    /// ([`CaptureUsed::of`]).
    pub fn new(module: OperatorModule, options: TestOptions) -> Result<Self, TestError> {
        if options.subtask >= options.parallelism {
            return Err(TestError::Subtask {
                subtask: options.subtask,
                parallelism: options.parallelism,
            });
        }
        Ok(OperatorTest { module, options })
    }

    /// Runs the operator over `input` and returns its output; with
    /// [`TestOptions::checkpoint_every`], runs it twice and fails when the outputs differ.
    pub fn run(&self, input: &[JsonRecord]) -> Result<TestOutcome, TestError> {
        // A test hook (builds with `test-hooks` only): every restore gets the first snapshot,
        // a restore gone wrong, so the end-to-end tests see how `weir test` reports one.
        #[cfg(feature = "test-hooks")]
        if std::env::var_os(STALE_RESTORE_ENV).is_some() {
            let mut first = None;
            return self.run_carrying(input, &mut |state| first.get_or_insert(state).clone());
        }
        self.run_carrying(input, &mut std::convert::identity)
    }

    /// [`run`](Self::run), with each snapshot passed through `carry` on its way to the
    /// restore: the identity, except in tests that simulate a restore gone wrong.
    fn run_carrying(
        &self,
        input: &[JsonRecord],
        carry: &mut dyn FnMut(Vec<u8>) -> Vec<u8>,
    ) -> Result<TestOutcome, TestError> {
        let every = self.options.checkpoint_every.map(NonZeroUsize::get);
        let plan = plan_batches(input, self.options.batch_size.get(), every);
        let capture = CaptureUsed::of(&self.module);
        let straight = self
            .run_once(input, &plan, None)
            .map_err(|error| TestError::Guest {
                error,
                checkpoint_every: None,
                capture,
            })?;
        let Some(every) = every else {
            return Ok(TestOutcome {
                output: straight,
                records_in: input.len(),
                batches: plan.len(),
                checkpoints: 0,
                capture,
            });
        };
        let checkpointed =
            self.run_once(input, &plan, Some(carry))
                .map_err(|error| TestError::Guest {
                    error,
                    checkpoint_every: Some(every),
                    capture,
                })?;
        if let Some(mismatch) = Mismatch::find(
            "without checkpoints",
            &straight,
            "with checkpoints",
            &checkpointed,
        ) {
            return Err(TestError::CheckpointMismatch {
                every,
                capture,
                mismatch: Box::new(mismatch),
            });
        }
        Ok(TestOutcome {
            output: checkpointed,
            records_in: input.len(),
            batches: plan.len(),
            checkpoints: plan.iter().filter(|b| b.checkpoint_after).count(),
            capture,
        })
    }

    /// One run over the planned batches; with `checkpoints`, a snapshot after each batch that
    /// ends at a checkpoint, passed through it, and a restore into a fresh instance started as
    /// a job's restore starts it ([`OperatorModule::instantiate_for_restore`]: for an image,
    /// without `_initialize` or `weir_init`).
    fn run_once(
        &self,
        input: &[JsonRecord],
        plan: &[PlannedBatch],
        mut checkpoints: Option<&mut dyn FnMut(Vec<u8>) -> Vec<u8>>,
    ) -> Result<Vec<JsonRecord>, Box<GuestError>> {
        let mut output = Vec::new();
        let mut instance = self.instantiate()?;
        let mut checkpoint_id = CheckpointId(0);
        for planned in plan {
            let mut batch = BatchBuilder::new(planned.port);
            for record in &input[planned.records.clone()] {
                batch.push(&record.key, &record.value, record.timestamp);
            }
            collect(&mut output, instance.process(batch.as_bytes())?);
            if let Some(carry) = checkpoints.as_mut()
                && planned.checkpoint_after
            {
                checkpoint_id = checkpoint_id.next();
                let state = instance.snapshot(checkpoint_id)?;
                instance.checkpoint_complete(checkpoint_id)?;
                let state = carry(state);
                let mut fresh = self
                    .module
                    .instantiate_for_restore(self.context(), &self.options.config)?;
                fresh.restore(&state)?;
                // The watermark, timers and keyed state are the host's: they move to the fresh
                // instance as they are, as a job's checkpoint carries them.
                *fresh.host_state() = std::mem::take(instance.host_state());
                instance = fresh;
            }
        }
        if self.options.finish {
            // As at a job's end of input: the end of time fires every event-time timer first.
            instance.advance_watermark(END_OF_TIME, |fired: GuestOutput| {
                collect(&mut output, fired.main);
                Ok::<(), Box<GuestError>>(())
            })?;
            collect(&mut output, instance.finish()?);
        }
        Ok(output)
    }

    /// A new instance: instantiated and given its init message, and, when its module keeps
    /// keyed state on the host, a store of its own in memory (`weir test` checkpoints by
    /// moving the host's state to a fresh instance, so nothing of it is written to disk).
    fn instantiate(&self) -> Result<GuestInstance, Box<GuestError>> {
        let mut instance = self
            .module
            .instantiate(self.context(), &self.options.config)?;
        if self.module.capabilities().keyed_state {
            let failed = |message: String| {
                Box::new(GuestError {
                    operator: self.options.operator.clone(),
                    subtask: self.options.subtask,
                    call: "instantiate",
                    failure: GuestFailure::StateStore { message },
                    backtrace: None,
                })
            };
            let parallelism = self.options.parallelism;
            let groups = KeyGroups::new(DEFAULT_MAX_PARALLELISM.max(parallelism), parallelism)
                .ok_or_else(|| failed(format!("no key groups for parallelism {parallelism}")))?;
            static INSTANCES: AtomicU64 = AtomicU64::new(0);
            let dir = std::env::temp_dir().join(format!(
                "weir-test-state-{}-{}",
                std::process::id(),
                INSTANCES.fetch_add(1, Ordering::Relaxed)
            ));
            let backend = Arc::new(MemoryBackend);
            let keyed = KeyedState::create(backend, dir, self.options.subtask, groups)
                .map_err(|e| failed(e.to_string()))?;
            instance.host_state().keyed = Some(keyed);
        }
        Ok(instance)
    }

    /// Who the instances are, as their init message says.
    fn context(&self) -> InstanceContext {
        InstanceContext {
            operator: self.options.operator.clone(),
            subtask: self.options.subtask,
            parallelism: self.options.parallelism,
        }
    }
}

/// Appends the records of the output `batches` to `output`.
fn collect(output: &mut Vec<JsonRecord>, batches: Vec<Vec<u8>>) {
    for bytes in batches {
        // The host checked every emitted batch before accepting it (`GuestInstance::process`).
        let batch = Batch::decode(&bytes).expect("the host checked every emitted batch");
        output.extend(batch.iter().map(|r| JsonRecord {
            key: r.key.to_vec(),
            value: r.value.to_vec(),
            timestamp: r.timestamp,
            port: 0,
        }));
    }
}

/// One input batch of a test run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedBatch {
    /// The input port of its records.
    pub port: u32,
    /// Which input records it holds.
    pub records: Range<usize>,
    /// Whether a checkpoint follows it (its last record is a multiple of the interval).
    pub checkpoint_after: bool,
}

/// Groups `input` into batches: consecutive records of the same port, at most `batch_size`
/// each, ending wherever the number of records so far is a multiple of `checkpoint_every`
/// (where a checkpoint follows). With checkpoints, one also follows the last batch: the state
/// at the end is the largest of the run, the likeliest to be one the guest cannot restore
/// (a JavaScript engine that runs out of memory restoring it), and a job would snapshot it.
pub fn plan_batches(
    input: &[JsonRecord],
    batch_size: usize,
    checkpoint_every: Option<usize>,
) -> Vec<PlannedBatch> {
    let batch_size = batch_size.max(1);
    let mut plan: Vec<PlannedBatch> = Vec::new();
    let mut start = 0;
    for (i, record) in input.iter().enumerate() {
        let end = i + 1;
        let next_port = input.get(end).map(|r| r.port);
        let checkpoint =
            checkpoint_every.is_some_and(|n| n > 0 && (end % n == 0 || end == input.len()));
        if checkpoint || end - start == batch_size || next_port != Some(record.port) {
            plan.push(PlannedBatch {
                port: record.port,
                records: start..end,
                checkpoint_after: checkpoint,
            });
            start = end;
        }
    }
    plan
}

// ---------------------------------------------------------------------------------------------
// `weir test` as a whole: files in, outcome out

/// Where the operator's config comes from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ConfigSource {
    /// No config (empty).
    #[default]
    None,
    /// The given text.
    Text(String),
    /// The bytes of a file.
    File(PathBuf),
}

/// A `weir test` run as given on the command line: paths and raw settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestSpec {
    /// The module (`.wasm` or `.wat`).
    pub module: PathBuf,
    /// The file of input records; `None` (or `-`) reads them from the given stdin.
    pub input: Option<PathBuf>,
    /// The operator's config.
    pub config: ConfigSource,
    /// The operator's name; `None` for the module file's stem.
    pub operator: Option<String>,
    /// How many instances of the operator the init message says run.
    pub parallelism: u32,
    /// Which of them this one is.
    pub subtask: u32,
    /// Most records per input batch.
    pub batch_size: NonZeroUsize,
    /// See [`TestOptions::checkpoint_every`].
    pub checkpoint_every: Option<NonZeroUsize>,
    /// How the checkpoints capture the state: the job file's `checkpoint` key (docs/JOB.md),
    /// [`StateCapture::Auto`] by default as there.
    pub capture: StateCapture,
    /// A file of expected output records to compare the output with.
    pub expect: Option<PathBuf>,
    /// Call `weir_finish` after the last input.
    pub finish: bool,
}

impl TestSpec {
    /// A spec for `module` with every setting at its default: input from stdin, no config,
    /// subtask 0 of 1, batches of [`DEFAULT_BATCH_SIZE`], no checkpoints (captured as a job's
    /// default, [`StateCapture::Auto`], when asked for), no expectation.
    pub fn new(module: impl Into<PathBuf>) -> Self {
        TestSpec {
            module: module.into(),
            input: None,
            config: ConfigSource::None,
            operator: None,
            parallelism: 1,
            subtask: 0,
            batch_size: DEFAULT_BATCH_SIZE,
            checkpoint_every: None,
            capture: StateCapture::Auto,
            expect: None,
            finish: false,
        }
    }

    /// Reads the config, input and expected output, runs the operator, and compares its output
    /// with the expected one. `stdin` is read when the spec has no input file.
    pub fn run(&self, stdin: impl BufRead) -> Result<TestOutcome, TestError> {
        let config = match &self.config {
            ConfigSource::None => Vec::new(),
            ConfigSource::Text(text) => text.as_bytes().to_vec(),
            ConfigSource::File(path) => std::fs::read(path).map_err(|error| TestError::Read {
                what: "config file",
                path: path.display().to_string(),
                error,
            })?,
        };
        let operator = self.operator.clone().unwrap_or_else(|| {
            self.module
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "operator".to_string())
        });
        let options = TestOptions {
            operator,
            config,
            parallelism: self.parallelism,
            subtask: self.subtask,
            batch_size: self.batch_size,
            checkpoint_every: self.checkpoint_every,
            finish: self.finish,
        };
        let input = match self.input.as_deref().filter(|p| *p != Path::new("-")) {
            None => read_json_lines(stdin, "stdin")?,
            Some(path) => read_records_file(path, "input")?,
        };
        let expected = match &self.expect {
            Some(path) => Some((path, read_records_file(path, "expected output")?)),
            None => None,
        };

        let outcome = OperatorTest::load(&self.module, self.capture, options)?.run(&input)?;
        if let Some((path, expected)) = expected
            && let Some(mismatch) = Mismatch::find("expected", &expected, "actual", &outcome.output)
        {
            return Err(TestError::ExpectMismatch {
                path: path.display().to_string(),
                mismatch: Box::new(mismatch),
            });
        }
        Ok(outcome)
    }
}

/// Reads the JSON-lines file at `path`; `what` names it in errors.
fn read_records_file(path: &Path, what: &'static str) -> Result<Vec<JsonRecord>, TestError> {
    let file = File::open(path).map_err(|error| TestError::Read {
        what,
        path: path.display().to_string(),
        error,
    })?;
    Ok(read_json_lines(
        BufReader::new(file),
        &path.display().to_string(),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The module in `bytes`, called `name`, checkpointed as `capture` says.
    fn load_capturing(
        engine: &WasmEngine,
        name: &str,
        bytes: &[u8],
        capture: StateCapture,
    ) -> OperatorModule {
        let options = LoadOptions {
            capture,
            ..LoadOptions::default()
        };
        OperatorModule::load(engine, ModuleSource::bytes(name, bytes), options).unwrap()
    }

    /// Records on the given ports.
    fn on_ports(ports: &[u32]) -> Vec<JsonRecord> {
        ports
            .iter()
            .map(|&port| JsonRecord {
                port,
                ..JsonRecord::default()
            })
            .collect()
    }

    fn shape(plan: &[PlannedBatch]) -> Vec<(u32, Range<usize>, bool)> {
        plan.iter()
            .map(|b| (b.port, b.records.clone(), b.checkpoint_after))
            .collect()
    }

    #[test]
    fn batches_split_at_the_batch_size_and_at_port_changes() {
        let input = on_ports(&[0, 0, 0, 1, 1, 0]);
        assert_eq!(
            shape(&plan_batches(&input, 2, None)),
            vec![
                (0, 0..2, false),
                (0, 2..3, false),
                (1, 3..5, false),
                (0, 5..6, false)
            ]
        );
        assert!(plan_batches(&[], 2, Some(1)).is_empty());
    }

    #[test]
    fn batches_end_at_every_checkpoint_and_the_last_is_checkpointed_too() {
        let input = on_ports(&[0; 7]);
        assert_eq!(
            shape(&plan_batches(&input, 64, Some(3))),
            vec![(0, 0..3, true), (0, 3..6, true), (0, 6..7, true)]
        );
        // An interval longer than the input still checkpoints its end.
        assert_eq!(
            shape(&plan_batches(&input, 64, Some(100))),
            vec![(0, 0..7, true)]
        );
        assert_eq!(
            shape(&plan_batches(&input[..2], 64, Some(1))),
            vec![(0, 0..1, true), (0, 1..2, true)]
        );
    }

    /// A keyed count that forgets to snapshot one thing: the number of records it has seen in
    /// total, which it emits as the value.
    const LEAKY_COUNTER: &str = r#"(module
      (import "weir" "emit" (func $emit (param i32 i32)))
      (import "weir" "save_state" (func $save_state (param i32 i32)))
      (memory (export "memory") 1)
      (global $seen (mut i64) (i64.const 0))
      (func (export "weir_abi_version") (result i32) (i32.const 1))
      (func (export "weir_alloc") (param i32) (result i32) (i32.const 1024))
      (func (export "weir_snapshot") (param i64) (result i32) (i32.const 0))
      (func (export "weir_restore") (param i32 i32) (result i32) (i32.const 0))
      ;; emits one record per batch: empty key, 8-byte value = records seen so far
      (func (export "weir_process") (param $ptr i32) (param $len i32) (result i32)
        (global.set $seen (i64.add (global.get $seen)
          (i64.extend_i32_u (i32.load (local.get $ptr)))))
        (i32.store (i32.const 16) (i32.const 1))
        (i32.store (i32.const 20) (i32.const 0))
        (i64.store (i32.const 24) (i64.const 0))
        (i32.store (i32.const 32) (i32.const 0))
        (i32.store (i32.const 36) (i32.const 8))
        (i64.store (i32.const 40) (global.get $seen))
        (call $emit (i32.const 16) (i32.const 32))
        (i32.const 0)))"#;

    fn leaky(options: TestOptions) -> OperatorTest {
        let engine = WasmEngine::new().unwrap();
        let leaky = ModuleSource::bytes("leaky.wat", LEAKY_COUNTER.as_bytes());
        let module = OperatorModule::load(&engine, leaky, LoadOptions::default()).unwrap();
        OperatorTest::new(module, options).unwrap()
    }

    #[test]
    fn a_snapshot_that_forgets_state_fails_the_checkpoint_check() {
        let input = on_ports(&[0, 0, 0]);
        let plain = leaky(TestOptions::new("leaky")).run(&input).unwrap();
        assert_eq!(plain.output.len(), 1);
        assert_eq!(plain.checkpoints, 0);

        let options = TestOptions {
            checkpoint_every: NonZeroUsize::new(1),
            ..TestOptions::new("leaky")
        };
        let err = leaky(options).run(&input).unwrap_err();
        let TestError::CheckpointMismatch {
            every,
            capture,
            mismatch,
        } = &err
        else {
            panic!("unexpected {err:?}");
        };
        assert_eq!(
            (*every, *capture, mismatch.index),
            (1, CaptureUsed::Exports, 1)
        );
        assert!(err.is_test_failure());
        for says in [
            "first difference at record 2",
            "with a snapshot and restore every 1 record",
            "checkpointed through its weir_snapshot and weir_restore",
        ] {
            assert!(err.to_string().contains(says), "{says}: {err}");
        }
    }

    /// The leaky counter loaded with its state captured as `capture` says.
    fn leaky_capturing(capture: StateCapture, options: TestOptions) -> OperatorTest {
        let engine = WasmEngine::new().unwrap();
        let module = load_capturing(&engine, "leaky.wat", LEAKY_COUNTER.as_bytes(), capture);
        OperatorTest::new(module, options).unwrap()
    }

    /// The leaky counter without its snapshot exports: a module with no snapshot code.
    fn without_snapshot_exports() -> String {
        LEAKY_COUNTER
            .lines()
            .filter(|line| !line.contains("weir_snapshot") && !line.contains("weir_restore"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn every_record(operator: &str) -> TestOptions {
        TestOptions {
            checkpoint_every: NonZeroUsize::new(1),
            ..TestOptions::new(operator)
        }
    }

    #[test]
    fn an_image_holds_the_state_a_snapshot_forgets() {
        let input = on_ports(&[0, 0, 0]);
        let plain = leaky(TestOptions {
            batch_size: NonZeroUsize::MIN,
            ..TestOptions::new("leaky")
        })
        .run(&input)
        .unwrap();
        let imaged = leaky_capturing(StateCapture::Image, every_record("leaky"))
            .run(&input)
            .unwrap();
        assert_eq!(imaged.output, plain.output);
        assert_eq!(
            (imaged.checkpoints, imaged.capture),
            (3, CaptureUsed::Image)
        );
        assert!(imaged.to_string().contains("3 images restored"), "{imaged}");
    }

    #[test]
    fn a_module_without_snapshot_code_is_checkpointed_as_an_image_by_default() {
        let engine = WasmEngine::new().unwrap();
        let bytes = without_snapshot_exports();
        let input = on_ports(&[0, 0, 0]);

        let module = load_capturing(&engine, "total.wat", bytes.as_bytes(), StateCapture::Auto);
        let test = OperatorTest::new(module, every_record("total")).unwrap();
        let outcome = test.run(&input).unwrap();
        assert_eq!(outcome.capture, CaptureUsed::Image);

        // Asked for through exports it lacks, every snapshot is empty, and the error says so.
        let module = load_capturing(
            &engine,
            "total.wat",
            bytes.as_bytes(),
            StateCapture::Exports,
        );
        let test = OperatorTest::new(module, every_record("total")).unwrap();
        let err = test.run(&input).unwrap_err();
        assert!(
            matches!(
                err,
                TestError::CheckpointMismatch {
                    capture: CaptureUsed::EmptyExports,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains("exports no weir_snapshot"), "{text}");
        assert!(!text.contains("snapshot or restore loses"), "{text}");
    }

    #[test]
    fn an_image_restore_that_changes_state_fails_naming_the_image_and_the_fix() {
        // A restore gone wrong, simulated: every restore gets the first image, so the state
        // goes back to the one after the first record. No module the host accepts can do this
        // to itself; the check must catch it all the same.
        let input = on_ports(&[0, 0, 0]);
        let test = leaky_capturing(StateCapture::Image, every_record("leaky"));
        let mut first = None;
        let err = test
            .run_carrying(&input, &mut |state| first.get_or_insert(state).clone())
            .unwrap_err();
        assert!(
            matches!(
                err,
                TestError::CheckpointMismatch {
                    capture: CaptureUsed::Image,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        for says in [
            "with an image of memory and globals restored every 1 record",
            "the image restore changed the operator's state",
            "--checkpoint exports",
            "first difference at record 3",
        ] {
            assert!(text.contains(says), "{says}: {text}");
        }
        assert!(!text.contains("snapshot or restore loses"), "{text}");
    }

    #[test]
    fn a_subtask_outside_the_parallelism_is_a_usage_error() {
        let engine = WasmEngine::new().unwrap();
        let leaky = ModuleSource::bytes("leaky.wat", LEAKY_COUNTER.as_bytes());
        let module = OperatorModule::load(&engine, leaky, LoadOptions::default()).unwrap();
        let options = TestOptions {
            parallelism: 2,
            subtask: 2,
            ..TestOptions::new("leaky")
        };
        let err = OperatorTest::new(module, options).unwrap_err();
        assert!(matches!(err, TestError::Subtask { .. }));
        assert!(!err.is_test_failure());
    }

    #[test]
    fn a_config_the_module_cannot_receive_fails_naming_the_call() {
        let options = TestOptions {
            config: b"x=1".to_vec(),
            ..TestOptions::new("leaky")
        };
        let err = leaky(options).run(&on_ports(&[0])).unwrap_err();
        let TestError::Guest { error, .. } = &err else {
            panic!("unexpected {err:?}");
        };
        assert_eq!(
            (error.operator.as_str(), error.call),
            ("leaky", "weir_init")
        );
        assert!(err.is_test_failure());
    }
}
