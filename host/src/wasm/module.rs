//! [`OperatorModule`]: an operator's module, compiled once per job and checked against the ABI
//! before any of its code runs.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::Component;
use wasmtime::{InstancePre, Module};

use super::component::{self, ComponentPre};
use super::engine::{WasmEngine, file_kind};
use super::error::{GuestError, GuestFailure, ModuleError, ModuleProblem};
use super::image::StateCapture;
use super::image::capture::{PrepareError, prepare};
use super::image::rewrite::ImageLayout;
use super::inspection::{Capabilities, Inspection};
use super::instance::{GuestInstance, InstanceContext};
use super::limits::GuestLimits;
use super::state::GuestState;

/// Where [`OperatorModule::load`] reads a module from.
#[derive(Debug, Clone, Copy)]
pub enum ModuleSource<'a> {
    /// The file at this path (binary `.wasm` or `.wat` text); errors name the path.
    File(&'a Path),
    /// These bytes (binary or WAT text); `name` identifies them in errors.
    Bytes {
        /// What errors call the module.
        name: &'a str,
        /// The module.
        bytes: &'a [u8],
    },
}

impl<'a> ModuleSource<'a> {
    /// The module in the file at `path`.
    pub fn file(path: &'a (impl AsRef<Path> + ?Sized)) -> Self {
        ModuleSource::File(path.as_ref())
    }

    /// The module in `bytes`, called `name` in errors.
    pub fn bytes(name: &'a str, bytes: &'a [u8]) -> Self {
        ModuleSource::Bytes { name, bytes }
    }

    /// What errors call the module: the file's path, or the name given with the bytes.
    pub fn name(&self) -> String {
        match self {
            ModuleSource::File(path) => path.display().to_string(),
            ModuleSource::Bytes { name, .. } => name.to_string(),
        }
    }
}

/// How [`OperatorModule::load`] loads a module. The default is what a module loaded on its own
/// gets: checkpointed through its exports ([`StateCapture::Exports`], not the job file's
/// `auto`), the default [`GuestLimits`], and no operator's config to receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadOptions<'a> {
    /// How its instances are checkpointed: a module checkpointed as an image is rewritten to
    /// export its memories and mutable globals, or refused, naming why an image cannot
    /// capture it.
    pub capture: StateCapture,
    /// The bounds its instances run under: each module carries its own, so the operators of
    /// one job share an engine whatever their limits.
    pub limits: GuestLimits,
    /// The job's operator the module is loaded for, when that operator has a config: the
    /// module is then refused with [`ModuleProblem::ConfigWithoutInit`] when it exports no
    /// `weir_init` to receive it.
    pub config_of: Option<&'a str>,
}

impl Default for LoadOptions<'_> {
    fn default() -> Self {
        LoadOptions {
            capture: StateCapture::Exports,
            limits: GuestLimits::default(),
            config_of: None,
        }
    }
}

/// An operator's module — a core module or a component — compiled, checked against the ABI
/// (or the world), and pre-linked with the host's imports, ready to be instantiated once per
/// subtask.
///
/// Cloning is cheap (the compiled code is shared); a clone keeps the engine's epoch ticker
/// running, as does every instance.
#[derive(Clone)]
pub struct OperatorModule {
    /// The file path or name it was loaded from, for messages.
    name: Arc<str>,
    /// The pre-linked template every instance is made from.
    template: Template,
    /// Which optional exports it has.
    capabilities: Capabilities,
    /// How its instances are checkpointed as images, when they are; `None` when checkpoints
    /// go through the guest's exports.
    image: Option<Arc<ImageLayout>>,
    /// The bounds every instance runs under: in its store, and for each call.
    limits: GuestLimits,
    /// The engine it was compiled for, held so that its clone keeps the epoch ticker alive
    /// (instances reach the engine through their template).
    _engine: WasmEngine,
}

impl fmt::Debug for OperatorModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OperatorModule")
            .field("name", &self.name)
            .field("capabilities", &self.capabilities)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// What an operator's instances are made from: a core module or a component, pre-linked.
#[derive(Clone)]
pub(crate) enum Template {
    /// A core module speaking the ABI of `docs/ABI.md`.
    Core(InstancePre<GuestState>),
    /// A component implementing the world of `abi/wit/operator.wit`.
    Component(ComponentPre),
}

/// A module that took longer than this to compile is reported, with the time, so that a slow
/// start (a Python or JavaScript component compiles for seconds) is explained.
const SLOW_COMPILE: Duration = Duration::from_millis(500);

/// The first bytes of every binary module.
const WASM_MAGIC: &[u8] = b"\0asm";

/// Refuses bytes that are neither a binary module (the `\0asm` magic) nor WAT text: text is
/// WAT when `name` ends in `.wat` or it starts, after whitespace and comments, with `(`.
/// Without this, any bytes were handed to the WAT parser, whose complaint (invalid UTF-8, an
/// expected module field) named the wrong problem.
fn check_is_module(name: &str, bytes: &[u8]) -> Result<(), ModuleProblem> {
    if bytes.is_empty() {
        return Err(ModuleProblem::Empty);
    }
    if bytes.starts_with(WASM_MAGIC)
        || name.to_ascii_lowercase().ends_with(".wat")
        || looks_like_wat(bytes)
    {
        return Ok(());
    }
    let start = bytes
        .iter()
        .take(4)
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(" ");
    Err(ModuleProblem::NotWasm { start })
}

/// Whether `bytes`, after whitespace, `;;` line comments and `(; ;)` block comments, start with
/// `(` (a block comment's opening `(;` does not count).
fn looks_like_wat(mut bytes: &[u8]) -> bool {
    loop {
        bytes = bytes.trim_ascii_start();
        if let Some(rest) = bytes.strip_prefix(b";;") {
            let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            bytes = &rest[end..];
        } else if let Some(rest) = bytes.strip_prefix(b"(;") {
            // Block comments nest.
            let mut depth = 1usize;
            let mut i = 0;
            while depth > 0 && i < rest.len() {
                if rest[i..].starts_with(b"(;") {
                    depth += 1;
                    i += 2;
                } else if rest[i..].starts_with(b";)") {
                    depth -= 1;
                    i += 2;
                } else {
                    i += 1;
                }
            }
            bytes = &rest[i..];
        } else {
            return bytes.first() == Some(&b'(');
        }
    }
}

impl OperatorModule {
    /// Reads (from a file), compiles and checks the module `source` on `engine`, as `options`
    /// say: the one way a module is loaded, by a job, `weir validate`, `weir test` or a test.
    /// Errors name the file's path, or the name given with the bytes.
    pub fn load(
        engine: &WasmEngine,
        source: ModuleSource<'_>,
        options: LoadOptions<'_>,
    ) -> Result<Self, ModuleError> {
        let (
            LoadOptions {
                capture, limits, ..
            },
            name,
        ) = (options, source.name());
        let module = match source {
            ModuleSource::File(path) => {
                let bytes = read_module_file(path).map_err(|problem| ModuleError {
                    module: name.clone(),
                    problem,
                })?;
                Self::compile(engine, &name, &bytes, capture, limits)?
            }
            ModuleSource::Bytes { name, bytes } => {
                Self::compile(engine, name, bytes, capture, limits)?
            }
        };
        if let Some(operator) = options.config_of
            && !module.capabilities().init
        {
            let path = match source {
                ModuleSource::File(path) => path.to_path_buf(),
                ModuleSource::Bytes { name, .. } => name.into(),
            };
            return Err(ModuleError {
                module: name,
                problem: ModuleProblem::ConfigWithoutInit {
                    operator: operator.to_string(),
                    path,
                },
            });
        }
        Ok(module)
    }

    /// Compiles `bytes` (binary or text) and checks it: imports, exports, memory, then the ABI
    /// version, read from a throwaway instance under `limits`, which every instance gets.
    /// Under `capture`, a module checkpointed as an image is first analysed and rewritten (see
    /// [`image`](super::image)).
    fn compile(
        engine: &WasmEngine,
        name: &str,
        bytes: &[u8],
        capture: StateCapture,
        limits: GuestLimits,
    ) -> Result<Self, ModuleError> {
        let refuse = |problem| ModuleError {
            module: name.to_string(),
            problem,
        };
        check_is_module(name, bytes).map_err(refuse)?;
        let started = Instant::now();
        let hits_before = engine.module_cache_counts().map(|(hits, _)| hits);
        let operator = if component::is_component(bytes) {
            Self::compile_component(engine, name, bytes, capture, limits).map_err(refuse)?
        } else {
            Self::compile_core(engine, name, bytes, capture, limits).map_err(refuse)?
        };
        let took = started.elapsed();
        if took >= SLOW_COMPILE {
            let size = bytes.len() as f64 / 1e6;
            let seconds = took.as_secs_f64();
            let hits_after = engine.module_cache_counts().map(|(hits, _)| hits);
            match (hits_before, hits_after) {
                (Some(before), Some(after)) if after > before => {
                    tracing::info!(
                        "loaded {name} ({size:.1} MB) from the module cache in {seconds:.1} s"
                    )
                }
                (Some(_), _) => tracing::info!(
                    "compiled {name} ({size:.1} MB) in {seconds:.1} s; later runs load it from \
                     the module cache"
                ),
                (None, _) => tracing::info!(
                    "compiled {name} ({size:.1} MB) in {seconds:.1} s (no module cache: every \
                     run compiles it)"
                ),
            }
        }
        operator.check_abi_version().map_err(refuse)?;
        Ok(operator)
    }

    /// Compiles and checks a core module (see [`compile`](Self::compile)).
    fn compile_core(
        engine: &WasmEngine,
        name: &str,
        bytes: &[u8],
        capture: StateCapture,
        limits: GuestLimits,
    ) -> Result<Self, ModuleProblem> {
        let prepared = prepare(bytes, capture).map_err(|e| match e {
            PrepareError::Parse(message) => ModuleProblem::Compile { message },
            PrepareError::Refused(message) => ModuleProblem::ImageRefused { message },
        })?;
        // An imaged module goes to the engine's pool when it has one and the module fits it.
        let pooled = prepared
            .image
            .as_ref()
            .and_then(|_| engine.image_pool(&limits));
        let compiled = pooled.and_then(|(pool, linker)| {
            Module::new(pool, &prepared.bytes)
                .inspect_err(|e| {
                    tracing::warn!(
                        "module {name} does not fit the pool of image-checkpointed instances \
                         ({e:#}); its instances are allocated on demand, and restoring an image \
                         takes longer"
                    );
                })
                .ok()
                .map(|module| (module, linker))
        });
        let (module, linker) = match compiled {
            Some(compiled) => compiled,
            None => {
                let module = Module::new(engine.engine(), &prepared.bytes).map_err(|e| {
                    ModuleProblem::Compile {
                        message: format!("{e:#}"),
                    }
                })?;
                (module, engine.linker())
            }
        };
        let capabilities = validate(&module, &prepared.bytes)?;
        let pre = linker
            .instantiate_pre(&module)
            .map_err(|e| ModuleProblem::Link {
                message: format!("{e:#}"),
            })?;
        Ok(Self {
            name: name.into(),
            template: Template::Core(pre),
            capabilities,
            image: prepared.image,
            limits,
            _engine: engine.clone(),
        })
    }

    /// Compiles and checks a component against the world (see [`component::check`]). A
    /// component is always checkpointed through the world's `snapshot` and `restore`: an image
    /// of its memories is refused, and `auto` means its exports.
    fn compile_component(
        engine: &WasmEngine,
        name: &str,
        bytes: &[u8],
        capture: StateCapture,
        limits: GuestLimits,
    ) -> Result<Self, ModuleProblem> {
        if capture == StateCapture::Image {
            return Err(ModuleProblem::ImageRefused {
                message: "it is a component, which is checkpointed through its own `snapshot` \
                          and `restore` (docs/COMPONENTS.md): image checkpoints capture core \
                          modules only; set checkpoint = \"exports\" (or \"auto\")"
                    .to_string(),
            });
        }
        let compiled =
            Component::new(engine.engine(), bytes).map_err(|e| ModuleProblem::Compile {
                message: format!("{e:#}"),
            })?;
        let capabilities = component::check(&compiled, engine.engine())?;
        let link = |e: wasmtime::Error| ModuleProblem::Link {
            message: format!("{e:#}"),
        };
        let pre = engine
            .component_linker()
            .instantiate_pre(&compiled)
            .map_err(link)?;
        let pre = ComponentPre::new(pre).map_err(link)?;
        Ok(Self {
            name: name.into(),
            template: Template::Component(pre),
            capabilities,
            image: None,
            limits,
            _engine: engine.clone(),
        })
    }

    /// Instantiates the module in a fresh store, runs `_initialize` if exported, checks
    /// `weir_abi_version`, then gives the guest its init message through `weir_init`
    /// (`docs/ABI.md` §2).
    ///
    /// Each instance has its own store and memory. A non-empty `config` needs a `weir_init`
    /// export to receive it.
    pub fn instantiate(
        &self,
        context: InstanceContext,
        config: &[u8],
    ) -> Result<GuestInstance, GuestError> {
        let mut instance = GuestInstance::start(self, context, true)?;
        instance.init(config)?;
        Ok(instance)
    }

    /// An instance that is about to be restored from `state` saved by an earlier instance:
    /// for a module checkpointed as an image, an instance that runs neither `_initialize` nor
    /// `weir_init` (the image holds what they did) and that the image is written into, instead
    /// of another instance being started for it — with an instance pool, into the slot whose
    /// memory the previous instance left resident. Otherwise [`instantiate`](Self::instantiate).
    ///
    /// Restore it with [`GuestInstance::restore`] or [`GuestInstance::restore_chain`] before
    /// any other call; restoring an empty state initialises it then, with `config`.
    pub fn instantiate_for_restore(
        &self,
        context: InstanceContext,
        config: &[u8],
    ) -> Result<GuestInstance, GuestError> {
        if self.image.is_none() {
            return self.instantiate(context, config);
        }
        let mut instance = GuestInstance::start(self, context, false)?;
        instance.await_image(config.to_vec());
        Ok(instance)
    }

    /// The bounds its instances run under.
    pub fn limits(&self) -> &GuestLimits {
        &self.limits
    }

    /// The file path or name the module was loaded from.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which optional exports the module has.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    /// What an image of its instances holds, when they are checkpointed as images (`None`:
    /// through the guest's `weir_snapshot` and `weir_restore`).
    pub fn image_layout(&self) -> Option<&ImageLayout> {
        self.image.as_deref()
    }

    /// The image layout, shared, for instances.
    pub(crate) fn image(&self) -> Option<&Arc<ImageLayout>> {
        self.image.as_ref()
    }

    /// The pre-linked instance template.
    pub(crate) fn template(&self) -> &Template {
        &self.template
    }

    /// The compiled core module; `None` for a component.
    pub fn core_module(&self) -> Option<&Module> {
        match &self.template {
            Template::Core(pre) => Some(pre.module()),
            Template::Component(_) => None,
        }
    }

    /// Whether the module is a component (`abi/wit/operator.wit`) rather than a core module.
    pub fn is_component(&self) -> bool {
        matches!(self.template, Template::Component(_))
    }

    /// Reads the ABI version from a throwaway instance (`docs/ABI.md` §10), so an
    /// incompatible guest is refused at load time rather than when the job starts.
    fn check_abi_version(&self) -> Result<(), ModuleProblem> {
        let context = InstanceContext::single(self.name.to_string());
        match GuestInstance::start(self, context, true) {
            Ok(_) => Ok(()),
            Err(GuestError {
                failure: GuestFailure::AbiVersion { guest, host },
                ..
            }) => Err(ModuleProblem::UnsupportedAbiVersion { guest, host }),
            Err(GuestError { call, failure, .. }) => {
                Err(ModuleProblem::VersionCheck { call, failure })
            }
        }
    }
}

/// The bytes of the module file at `path`, refused without reading when it is not a regular
/// file: a directory cannot be read, and a device such as `/dev/zero` would be read forever.
pub(crate) fn read_module_file(path: &Path) -> Result<Vec<u8>, ModuleProblem> {
    let meta = std::fs::metadata(path).map_err(ModuleProblem::Io)?;
    if !meta.is_file() {
        return Err(ModuleProblem::NotAFile {
            kind: file_kind(&meta.file_type()),
        });
    }
    std::fs::read(path).map_err(ModuleProblem::Io)
}

/// Checks the module's imports, memory and exports against the ABI table (see
/// [`Inspection`]); returns its optional exports, or the first problem.
fn validate(module: &Module, bytes: &[u8]) -> Result<Capabilities, ModuleProblem> {
    let inspection = Inspection::of(module, bytes);
    let capabilities = inspection.capabilities();
    match inspection.problems.into_iter().next() {
        Some(problem) => Err(problem),
        None => Ok(capabilities),
    }
}
