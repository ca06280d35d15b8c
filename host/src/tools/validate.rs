//! [`ValidationReport`]: what `weir validate` finds in a module, checked against the guest ABI
//! (`docs/ABI.md`).
//!
//! # Why a report and not just the load error
//!
//! [`WasmEngine::load_bytes`] is the verdict: a module is valid exactly when the host loads it,
//! so the report runs it first and never second-guesses it. But loading stops at the first
//! problem, and an author porting a C or AssemblyScript toolchain to Weir usually has several
//! (a WASI import, a missing export, an unexported memory) — fixing them one build at a time is
//! slow. So the report also inspects the compiled module's import and export types itself and
//! lists every fact it can: each export of the ABI present, missing or of the wrong type, the
//! memory, each import and whether the host provides it (asked of the host's own `Linker`, so
//! the answer cannot drift from what loading accepts), and the ABI version, read from a
//! throwaway instance even when loading refused the module for another reason.

use std::fmt;
use std::path::Path;

use serde::{Serialize, Serializer};
use wasmtime::{
    ExternType, FuncType, ImportType, Linker, Module, Store, StoreLimits, StoreLimitsBuilder,
    UnknownImportError, ValType,
};
use weir_abi::{ABI_VERSION, IMPORT_MODULE, exports, imports};

use crate::wasm::image::rewrite;
use crate::wasm::{
    Capabilities, EngineError, GuestLimits, MAX_TABLE_ELEMENTS, ModuleError, ModuleProblem,
    StateCapture, WasmEngine, file_kind,
};

/// The export C and AssemblyScript toolchains produce for their runtime set-up
/// (`docs/ABI.md` §1); the host calls it once after instantiation.
const INITIALIZE: &str = "_initialize";

/// What `weir validate` found in one module.
///
/// Displays as the readable report; serializes (for `--json`) with the same facts.
#[derive(Debug, Serialize)]
pub struct ValidationReport {
    /// The module's path (or the name it was given).
    pub module: String,
    /// Whether the host loads the module: the verdict, taken from [`WasmEngine::load_bytes`].
    pub valid: bool,
    /// What the module's `weir_abi_version` returns, when it could be read.
    pub abi_version: Option<i32>,
    /// The ABI version this host implements.
    pub host_abi_version: u32,
    /// Everything wrong with the module, each message naming the fix; empty when it is valid.
    /// The problem loading stopped at is always among them.
    #[serde(serialize_with = "problem_messages")]
    pub problems: Vec<ModuleProblem>,
    /// The memory exported as `memory`, when there is one.
    pub memory: Option<MemoryReport>,
    /// Every export of the ABI (`docs/ABI.md` §3) and what the module has under its name; empty
    /// when the module could not be compiled.
    pub exports: Vec<ExportCheck>,
    /// Every import of the module and whether the host provides it (`docs/ABI.md` §4).
    pub imports: Vec<ImportCheck>,
    /// Which optional exports the host found, when the module is valid.
    pub capabilities: Option<Capabilities>,
    /// How a job checkpoints the operator, when the module is valid.
    pub checkpoints: Option<CheckpointsReport>,
}

/// How a job checkpoints an operator (its `checkpoint` key, docs/JOB.md), as far as the module
/// decides it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointsReport {
    /// What the default, `checkpoint = "auto"`, does with this module: `"exports"` (it exports
    /// `weir_snapshot` or `weir_restore`), `"image"`, or `"refused"` (neither works).
    pub auto: &'static str,
    /// Whether `checkpoint = "image"` can capture it.
    pub image_possible: bool,
    /// Why an image cannot capture it, when it cannot.
    pub image_refused: Option<String>,
}

/// The module's exported memory (`docs/ABI.md` §1).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MemoryReport {
    /// Its initial size, in pages.
    pub initial_pages: u64,
    /// Its maximum size, in pages, if it declares one.
    pub maximum_pages: Option<u64>,
    /// The size of one page, in bytes (64 KiB unless the module declares custom pages).
    pub page_size: u64,
    /// Whether it is shared (the ABI refuses shared memories).
    pub shared: bool,
    /// Whether it is a 64-bit memory (the ABI refuses them).
    pub memory64: bool,
    /// How many memories the module defines (the ABI allows one).
    pub defined: u32,
}

/// One export of the ABI and what the module exports under its name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExportCheck {
    /// The export's name.
    pub name: &'static str,
    /// Whether the ABI requires it.
    pub required: bool,
    /// Its type in the ABI: `memory`, or a signature such as `(i32, i32) -> i32`.
    pub expected: String,
    /// Whether the module has it, with that type.
    pub status: ExportStatus,
    /// What the module has under the name, when its type is wrong.
    pub found: Option<String>,
    /// What the host does when an optional export is absent (`docs/ABI.md` §3).
    pub when_absent: Option<&'static str>,
}

/// Whether a module has an export of the ABI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportStatus {
    /// Present with the ABI's type.
    Ok,
    /// Not exported.
    Missing,
    /// Exported with another type (or, for `memory`, a memory of an unsupported kind).
    WrongType,
}

/// One import of the module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportCheck {
    /// The module it is imported from, such as `weir`.
    pub module: String,
    /// Its name, such as `emit`.
    pub name: String,
    /// Its type as the module imports it, such as `a function (i32, i32)`.
    #[serde(rename = "type")]
    pub ty: String,
    /// Whether the host provides it.
    pub status: ImportStatus,
    /// The type the host provides it with, when the module imports it with another.
    pub expected: Option<String>,
}

/// Whether the host provides an import.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ImportStatus {
    /// The host provides it with this type.
    Provided,
    /// The host provides nothing under this name.
    Unknown,
    /// The host provides it with another type.
    WrongType,
}

/// `weir validate` could not look at the module at all.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ValidateError {
    /// The module file could not be read.
    #[error("cannot read the module `{path}`: {error}")]
    Read {
        /// The path given.
        path: String,
        /// The I/O error.
        #[source]
        error: std::io::Error,
    },
    /// The path is a directory, a device or another thing that is not a regular file.
    #[error(
        "cannot read the module `{path}`: not a regular file ({kind}); give a .wasm or .wat file"
    )]
    NotAFile {
        /// The path given.
        path: String,
        /// What it is instead.
        kind: &'static str,
    },
    /// The wasm engine could not be set up.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// Reads the module at `path` (binary `.wasm` or `.wat` text) and validates it with an engine
/// under the default [`GuestLimits`], as a job without `limits` settings would load it.
pub fn validate_file(path: impl AsRef<Path>) -> Result<ValidationReport, ValidateError> {
    let path = path.as_ref();
    let name = path.display().to_string();
    let read_error = |error| ValidateError::Read {
        path: name.clone(),
        error,
    };
    // As the host reads a module file: a directory or a device is refused unread.
    let meta = std::fs::metadata(path).map_err(read_error)?;
    if !meta.is_file() {
        return Err(ValidateError::NotAFile {
            path: name,
            kind: file_kind(&meta.file_type()),
        });
    }
    let bytes = std::fs::read(path).map_err(read_error)?;
    let engine = WasmEngine::new(GuestLimits::default())?;
    Ok(validate_bytes(&engine, &name, &bytes))
}

/// Validates the module in `bytes` (binary or WAT text) with `engine`: loads it the way the
/// host does, then inspects it. `name` identifies it in the report.
pub fn validate_bytes(engine: &WasmEngine, name: &str, bytes: &[u8]) -> ValidationReport {
    let loaded = engine.load_bytes(name, bytes);
    // The compiled module to inspect: the loaded one, or compiled again when loading refused it
    // after compiling.
    let module = match &loaded {
        Ok(operator) => Some(operator.pre().module().clone()),
        Err(ModuleError {
            problem:
                ModuleProblem::Compile { .. }
                | ModuleProblem::Io(_)
                | ModuleProblem::NotAFile { .. }
                | ModuleProblem::Empty
                | ModuleProblem::NotWasm { .. },
            ..
        }) => None,
        Err(_) => Module::new(engine.engine(), bytes).ok(),
    };
    let inspection = module
        .as_ref()
        .map(|module| Inspection::of(engine, module))
        .unwrap_or_default();

    let checkpoints = loaded
        .as_ref()
        .ok()
        .map(|operator| checkpoints_report(engine, name, bytes, operator.capabilities()));
    let (valid, abi_version, capabilities, problems) = match loaded {
        Ok(operator) => (
            true,
            Some(ABI_VERSION as i32),
            Some(operator.capabilities()),
            Vec::new(),
        ),
        Err(error) => {
            let version = match &error.problem {
                ModuleProblem::UnsupportedAbiVersion { guest, .. } => Some(*guest),
                ModuleProblem::VersionCheck { .. } => None,
                _ => module
                    .as_ref()
                    .filter(|_| inspection.version_export_ok())
                    .and_then(|module| read_abi_version(engine, module)),
            };
            let mut problems = inspection.problems;
            if !problems.iter().any(|p| same_problem(p, &error.problem)) {
                problems.push(error.problem);
            }
            (false, version, None, problems)
        }
    };
    ValidationReport {
        module: name.to_string(),
        valid,
        abi_version,
        host_abi_version: ABI_VERSION,
        problems,
        memory: inspection.memory,
        exports: inspection.exports,
        imports: inspection.imports,
        capabilities,
        checkpoints,
    }
}

/// How `checkpoint = "auto"` and `"image"` treat a module the host loads.
fn checkpoints_report(
    engine: &WasmEngine,
    name: &str,
    bytes: &[u8],
    capabilities: Capabilities,
) -> CheckpointsReport {
    let image_refused = match engine.load_bytes_capturing(name, bytes, StateCapture::Image) {
        Ok(_) => None,
        // The reasons alone: the report says itself which setting they concern.
        Err(error) => Some(match wat::parse_bytes(bytes) {
            Ok(binary) => match rewrite::analyze(&binary) {
                Err(refusal) => refusal.to_string(),
                Ok(_) => error.problem.to_string(),
            },
            Err(_) => error.problem.to_string(),
        }),
    };
    let auto = if capabilities.snapshot || capabilities.restore {
        "exports"
    } else if image_refused.is_none() {
        "image"
    } else {
        "refused"
    };
    CheckpointsReport {
        auto,
        image_possible: image_refused.is_none(),
        image_refused,
    }
}

impl fmt::Display for ValidationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.valid {
            writeln!(
                f,
                "module {} is a valid Weir operator (ABI {})",
                self.module, self.host_abi_version
            )?;
        } else {
            let count = self.problems.len();
            writeln!(
                f,
                "module {} is NOT a valid Weir operator: {count} problem{}",
                self.module,
                if count == 1 { "" } else { "s" }
            )?;
            writeln!(f)?;
            for (i, problem) in self.problems.iter().enumerate() {
                writeln!(f, "  {}. {problem}", i + 1)?;
            }
        }
        if self.exports.is_empty() {
            return Ok(());
        }

        writeln!(f)?;
        match self.abi_version {
            Some(v) => writeln!(
                f,
                "ABI version:  {v} (this host implements {})",
                self.host_abi_version
            )?,
            None => writeln!(
                f,
                "ABI version:  unknown (weir_abi_version could not be called; this host \
                 implements {})",
                self.host_abi_version
            )?,
        }
        match &self.memory {
            Some(m) => {
                let maximum = match m.maximum_pages {
                    Some(max) => format!("at most {max} pages"),
                    None => "no maximum".to_string(),
                };
                let kind = match (m.shared, m.memory64) {
                    (false, false) => "",
                    (true, false) => ", shared",
                    (false, true) => ", 64-bit",
                    (true, true) => ", shared, 64-bit",
                };
                writeln!(
                    f,
                    "memory:       exported as `memory`: {} page{} of {} KiB initially, \
                     {maximum}{kind}",
                    m.initial_pages,
                    if m.initial_pages == 1 { "" } else { "s" },
                    m.page_size / 1024
                )?;
            }
            None => writeln!(f, "memory:       none exported as `memory`")?,
        }

        // One table for exports and imports: status, name, type, note.
        let import_name = |i: &ImportCheck| format!("{}.{}", i.module, i.name);
        let import_type = |i: &ImportCheck| {
            i.ty.strip_prefix("a function ")
                .unwrap_or(&i.ty)
                .to_string()
        };
        let name_width = (self.exports.iter().map(|e| e.name.len()))
            .chain(self.imports.iter().map(|i| import_name(i).len()))
            .max()
            .unwrap_or(0);
        let type_width = (self.exports.iter().map(|e| e.expected.len()))
            .chain(self.imports.iter().map(|i| import_type(i).len()))
            .max()
            .unwrap_or(0);
        let row = |f: &mut fmt::Formatter<'_>, status: &str, name: &str, ty: &str, note: &str| {
            let line = format!("  {status:<8} {name:<name_width$}  {ty:<type_width$}  {note}");
            writeln!(f, "{}", line.trim_end())
        };

        if let Some(c) = &self.checkpoints {
            let image = match &c.image_refused {
                None => "an image is possible too".to_string(),
                Some(why) => format!("checkpoint = \"image\" is not: {why}"),
            };
            match c.auto {
                "exports" => writeln!(
                    f,
                    "checkpoints:  through its own weir_snapshot/weir_restore (checkpoint = \
                     \"auto\", the default); {image}"
                )?,
                "image" => writeln!(
                    f,
                    "checkpoints:  as an image of its memory and globals (it exports no \
                     snapshot; checkpoint = \"auto\", the default)"
                )?,
                _ => writeln!(
                    f,
                    "checkpoints:  REFUSED by a job with checkpoint = \"auto\" (the default): it \
                     exports no snapshot, and {}",
                    c.image_refused.as_deref().unwrap_or_default()
                )?,
            }
        }

        writeln!(f, "exports:")?;
        for export in &self.exports {
            let status = match (export.status, export.required) {
                (ExportStatus::Ok, _) => "ok",
                (ExportStatus::Missing, true) => "MISSING",
                (ExportStatus::Missing, false) => "absent",
                (ExportStatus::WrongType, _) => "WRONG",
            };
            let note = match (&export.found, export.when_absent) {
                (Some(found), _) => format!("found {found}"),
                (None, Some(absent)) if export.status == ExportStatus::Missing => {
                    format!("optional: {absent}")
                }
                _ if export.required => "required".to_string(),
                _ => "optional".to_string(),
            };
            row(f, status, export.name, &export.expected, &note)?;
        }

        writeln!(f, "imports:")?;
        if self.imports.is_empty() {
            writeln!(f, "  (none)")?;
        }
        for import in &self.imports {
            let (status, note) = match (import.status, &import.expected) {
                (ImportStatus::Provided, _) => ("ok", "provided by the host".to_string()),
                (ImportStatus::Unknown, _) => ("UNKNOWN", "not provided by the host".to_string()),
                (ImportStatus::WrongType, Some(expected)) => {
                    ("WRONG", format!("the host provides {expected}"))
                }
                (ImportStatus::WrongType, None) => {
                    ("WRONG", "the host provides another type".to_string())
                }
            };
            row(f, status, &import_name(import), &import_type(import), &note)?;
        }

        if let Some(c) = &self.capabilities {
            let names: Vec<&str> = [
                (c.init, exports::INIT),
                (c.snapshot, exports::SNAPSHOT),
                (c.restore, exports::RESTORE),
                (c.checkpoint_complete, exports::CHECKPOINT_COMPLETE),
                (c.finish, exports::FINISH),
                (c.initialize, INITIALIZE),
            ]
            .into_iter()
            .filter_map(|(present, name)| present.then_some(name))
            .collect();
            let stateful = if c.snapshot && c.restore {
                "stateful: keeps its state across checkpoints"
            } else if c.snapshot || c.restore {
                "only half of snapshot/restore: its state cannot survive a restore"
            } else {
                match self.checkpoints.as_ref().map(|c| c.auto) {
                    Some("image") => "no snapshot exports: its state is checkpointed as an image",
                    _ => "no snapshot exports: stateless unless checkpointed as an image",
                }
            };
            let names = if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            };
            writeln!(f, "capabilities: {names} ({stateful})")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// Inspecting a compiled module

/// A value type of the ABI's function signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    I32,
    I64,
}

impl Ty {
    fn name(self) -> &'static str {
        match self {
            Ty::I32 => "i32",
            Ty::I64 => "i64",
        }
    }

    fn matches(self, ty: &ValType) -> bool {
        match self {
            Ty::I32 => matches!(ty, ValType::I32),
            Ty::I64 => matches!(ty, ValType::I64),
        }
    }
}

/// A function signature of the ABI.
#[derive(Debug, Clone, Copy)]
struct Sig {
    params: &'static [Ty],
    results: &'static [Ty],
}

impl Sig {
    /// `() -> ()`: `_initialize`.
    const UNIT: Sig = Sig {
        params: &[],
        results: &[],
    };
    /// `() -> i32`.
    const STATUS: Sig = Sig {
        params: &[],
        results: &[Ty::I32],
    };
    /// `(i32) -> i32`: `weir_alloc`.
    const ALLOC: Sig = Sig {
        params: &[Ty::I32],
        results: &[Ty::I32],
    };
    /// `(i32, i32) -> i32`: exports taking a buffer.
    const BUFFER: Sig = Sig {
        params: &[Ty::I32, Ty::I32],
        results: &[Ty::I32],
    };
    /// `(i64) -> i32`: exports taking a checkpoint id.
    const CHECKPOINT: Sig = Sig {
        params: &[Ty::I64],
        results: &[Ty::I32],
    };
    /// `(i32, i32)`: imports taking a guest buffer.
    const PTR_LEN: Sig = Sig {
        params: &[Ty::I32, Ty::I32],
        results: &[],
    };
    /// `(i32, i32, i32)`: `log`.
    const LOG: Sig = Sig {
        params: &[Ty::I32, Ty::I32, Ty::I32],
        results: &[],
    };
    /// `(i32, i32, i32, i32)`: AssemblyScript's `env.abort`.
    const ABORT: Sig = Sig {
        params: &[Ty::I32, Ty::I32, Ty::I32, Ty::I32],
        results: &[],
    };

    fn matches(&self, ty: &FuncType) -> bool {
        ty.params().len() == self.params.len()
            && ty.results().len() == self.results.len()
            && ty
                .params()
                .zip(self.params)
                .all(|(t, want)| want.matches(&t))
            && ty
                .results()
                .zip(self.results)
                .all(|(t, want)| want.matches(&t))
    }

    /// `(i32, i32) -> i32`.
    fn text(&self) -> String {
        render(
            self.params.iter().map(|t| t.name().to_string()),
            self.results.iter().map(|t| t.name().to_string()),
        )
    }
}

/// What the ABI exports under a name.
#[derive(Debug, Clone, Copy)]
enum Expected {
    Memory,
    Func(Sig),
}

/// One export of the ABI (`docs/ABI.md` §3).
struct AbiExport {
    name: &'static str,
    expected: Expected,
    required: bool,
    /// For an optional export: what the host does without it.
    when_absent: Option<&'static str>,
}

/// Every export of the ABI, in the order of `docs/ABI.md` §3.
const ABI_EXPORTS: [AbiExport; 10] = [
    AbiExport {
        name: exports::MEMORY,
        expected: Expected::Memory,
        required: true,
        when_absent: None,
    },
    AbiExport {
        name: exports::ABI_VERSION,
        expected: Expected::Func(Sig::STATUS),
        required: true,
        when_absent: None,
    },
    AbiExport {
        name: exports::ALLOC,
        expected: Expected::Func(Sig::ALLOC),
        required: true,
        when_absent: None,
    },
    AbiExport {
        name: exports::PROCESS,
        expected: Expected::Func(Sig::BUFFER),
        required: true,
        when_absent: None,
    },
    AbiExport {
        name: exports::INIT,
        expected: Expected::Func(Sig::BUFFER),
        required: false,
        when_absent: Some("the host skips it, and refuses a non-empty config"),
    },
    AbiExport {
        name: exports::SNAPSHOT,
        expected: Expected::Func(Sig::CHECKPOINT),
        required: false,
        when_absent: Some("every snapshot is empty"),
    },
    AbiExport {
        name: exports::RESTORE,
        expected: Expected::Func(Sig::BUFFER),
        required: false,
        when_absent: Some("only an empty state can be restored"),
    },
    AbiExport {
        name: exports::CHECKPOINT_COMPLETE,
        expected: Expected::Func(Sig::CHECKPOINT),
        required: false,
        when_absent: Some("the host skips the notice"),
    },
    AbiExport {
        name: exports::FINISH,
        expected: Expected::Func(Sig::STATUS),
        required: false,
        when_absent: Some("the host skips it"),
    },
    AbiExport {
        name: INITIALIZE,
        expected: Expected::Func(Sig::UNIT),
        required: false,
        when_absent: Some("nothing runs after instantiation"),
    },
];

/// The signatures of the host's imports (`docs/ABI.md` §4, and AssemblyScript's `env.abort`),
/// to name the expected type when a module imports one with another. Whether an import is
/// provided at all is asked of the host's linker, not of this table.
const HOST_IMPORTS: [(&str, &str, Sig); 5] = [
    (IMPORT_MODULE, imports::EMIT, Sig::PTR_LEN),
    (IMPORT_MODULE, imports::SAVE_STATE, Sig::PTR_LEN),
    (IMPORT_MODULE, imports::FAIL, Sig::PTR_LEN),
    (IMPORT_MODULE, imports::LOG, Sig::LOG),
    ("env", "abort", Sig::ABORT),
];

/// What inspecting a compiled module found: its facts and every problem among them, in the
/// order the host checks them (imports, memory, exports).
#[derive(Default)]
struct Inspection {
    memory: Option<MemoryReport>,
    exports: Vec<ExportCheck>,
    imports: Vec<ImportCheck>,
    problems: Vec<ModuleProblem>,
}

impl Inspection {
    fn of(engine: &WasmEngine, module: &Module) -> Inspection {
        let mut found = Inspection::default();
        for import in module.imports() {
            found.import(engine, &import);
        }

        let defined = module.resources_required().num_memories;
        if let Some(ExternType::Memory(memory)) = module.get_export(exports::MEMORY) {
            found.memory = Some(MemoryReport {
                initial_pages: memory.minimum(),
                maximum_pages: memory.maximum(),
                page_size: memory.page_size(),
                shared: memory.is_shared(),
                memory64: memory.is_64(),
                defined,
            });
        }
        if defined > 1 {
            found
                .problems
                .push(ModuleProblem::MultipleMemories { count: defined });
        }

        for export in &ABI_EXPORTS {
            found.export(module, export);
        }
        found
    }

    /// Checks one import against the host's linker.
    fn import(&mut self, engine: &WasmEngine, import: &ImportType<'_>) {
        let ty = import.ty();
        let (module, name) = (import.module().to_string(), import.name().to_string());
        let status = match &ty {
            ExternType::Func(func) => host_provides(engine, &module, &name, func),
            // The host provides only functions.
            _ => ImportStatus::Unknown,
        };
        let expected = (status == ImportStatus::WrongType)
            .then(|| {
                HOST_IMPORTS
                    .iter()
                    .find(|(m, n, _)| *m == module && *n == name)
                    .map(|(_, _, sig)| format!("a function {}", sig.text()))
            })
            .flatten();
        match status {
            ImportStatus::Provided => {}
            ImportStatus::Unknown => self.problems.push(ModuleProblem::UnknownImport {
                module: module.clone(),
                name: name.clone(),
            }),
            ImportStatus::WrongType => self.problems.push(ModuleProblem::BadImportSignature {
                module: module.clone(),
                name: name.clone(),
                expected: expected
                    .clone()
                    .unwrap_or_else(|| "another type".to_string()),
                found: describe(&ty),
            }),
        }
        self.imports.push(ImportCheck {
            module,
            name,
            ty: describe(&ty),
            status,
            expected,
        });
    }

    /// Checks one export of the ABI.
    fn export(&mut self, module: &Module, abi: &AbiExport) {
        let found = module.get_export(abi.name);
        let (expected, status) = match abi.expected {
            Expected::Memory => {
                let status = match &found {
                    None => ExportStatus::Missing,
                    Some(ExternType::Memory(memory)) if memory.is_shared() => {
                        self.problems
                            .push(ModuleProblem::UnsupportedMemory { found: "shared" });
                        ExportStatus::WrongType
                    }
                    Some(ExternType::Memory(memory)) if memory.is_64() => {
                        self.problems
                            .push(ModuleProblem::UnsupportedMemory { found: "64-bit" });
                        ExportStatus::WrongType
                    }
                    Some(ExternType::Memory(_)) => ExportStatus::Ok,
                    Some(_) => ExportStatus::WrongType,
                };
                if status != ExportStatus::Ok && self.memory.is_none() {
                    self.problems.push(ModuleProblem::NoMemory);
                }
                ("memory".to_string(), status)
            }
            Expected::Func(sig) => {
                let status = match &found {
                    None if abi.required => {
                        self.problems.push(ModuleProblem::MissingExport {
                            name: abi.name,
                            expected: format!("a function {}", sig.text()),
                        });
                        ExportStatus::Missing
                    }
                    None => ExportStatus::Missing,
                    Some(ExternType::Func(func)) if sig.matches(func) => ExportStatus::Ok,
                    Some(other) => {
                        self.problems.push(ModuleProblem::WrongSignature {
                            name: abi.name,
                            expected: format!("a function {}", sig.text()),
                            found: describe(other),
                        });
                        ExportStatus::WrongType
                    }
                };
                (sig.text(), status)
            }
        };
        let found = match (&found, status) {
            (Some(ty), ExportStatus::WrongType) => Some(match ty {
                ExternType::Memory(m) if m.is_shared() => "a shared memory".to_string(),
                ExternType::Memory(m) if m.is_64() => "a 64-bit memory".to_string(),
                other => describe(other),
            }),
            _ => None,
        };
        self.exports.push(ExportCheck {
            name: abi.name,
            required: abi.required,
            expected,
            status,
            found,
            when_absent: abi.when_absent,
        });
    }

    /// Whether `weir_abi_version` is exported with its ABI signature, so it can be called.
    fn version_export_ok(&self) -> bool {
        self.exports
            .iter()
            .any(|e| e.name == exports::ABI_VERSION && e.status == ExportStatus::Ok)
    }
}

/// Whether the host's linker provides the function import `module`.`name` with type `func`.
///
/// Asks the linker itself — by linking a module made of just that import — so the answer is
/// whatever the host really defines, including imports added after this code was written.
fn host_provides(engine: &WasmEngine, module: &str, name: &str, func: &FuncType) -> ImportStatus {
    let params: String = func.params().map(|t| format!(" {t}")).collect();
    let results: String = func.results().map(|t| format!(" {t}")).collect();
    let wat = format!(
        "(module (import \"{}\" \"{}\" (func (param{params}) (result{results}))))",
        wat_string(module),
        wat_string(name)
    );
    let Ok(probe) = Module::new(engine.engine(), wat) else {
        // A type the text format cannot spell here; the host's imports are all plain numbers.
        return ImportStatus::Unknown;
    };
    match engine.linker().instantiate_pre(&probe) {
        Ok(_) => ImportStatus::Provided,
        Err(e) if e.downcast_ref::<UnknownImportError>().is_some() => ImportStatus::Unknown,
        Err(_) => ImportStatus::WrongType,
    }
}

/// `text` escaped for a WAT string literal: printable ASCII as is, every other byte as `\hh`.
fn wat_string(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'"' | b'\\' => format!("\\{b:02x}"),
            0x20..=0x7e => char::from(b).to_string(),
            _ => format!("\\{b:02x}"),
        })
        .collect()
}

/// Reads `weir_abi_version` from a throwaway instance whose imports all trap, under the
/// engine's time and memory limits (`_initialize` runs first, as in the host). `None` when the
/// module cannot be instantiated that way or the call fails.
fn read_abi_version(engine: &WasmEngine, module: &Module) -> Option<i32> {
    let limits = StoreLimitsBuilder::new()
        .memory_size(engine.limits().max_memory_bytes)
        .table_elements(MAX_TABLE_ELEMENTS)
        .instances(1)
        .build();
    let mut store: Store<StoreLimits> = Store::new(engine.engine(), limits);
    store.limiter(|limits| limits);
    let mut linker = Linker::new(engine.engine());
    linker.define_unknown_imports_as_traps(module).ok()?;
    store.set_epoch_deadline(engine.deadline_ticks());
    let instance = linker.instantiate(&mut store, module).ok()?;
    if let Ok(initialize) = instance.get_typed_func::<(), ()>(&mut store, INITIALIZE) {
        store.set_epoch_deadline(engine.deadline_ticks());
        initialize.call(&mut store, ()).ok()?;
    }
    let version = instance
        .get_typed_func::<(), i32>(&mut store, exports::ABI_VERSION)
        .ok()?;
    store.set_epoch_deadline(engine.deadline_ticks());
    version.call(&mut store, ()).ok()
}

/// Whether two problems are the same finding (so the load error is not listed twice).
fn same_problem(a: &ModuleProblem, b: &ModuleProblem) -> bool {
    use ModuleProblem as P;
    match (a, b) {
        (P::MissingExport { name: x, .. }, P::MissingExport { name: y, .. }) => x == y,
        (P::WrongSignature { name: x, .. }, P::WrongSignature { name: y, .. }) => x == y,
        (P::NoMemory, P::NoMemory) => true,
        (P::UnsupportedMemory { found: x }, P::UnsupportedMemory { found: y }) => x == y,
        (P::MultipleMemories { .. }, P::MultipleMemories { .. }) => true,
        (
            P::UnknownImport {
                module: m1,
                name: n1,
            },
            P::UnknownImport {
                module: m2,
                name: n2,
            },
        ) => m1 == m2 && n1 == n2,
        (
            P::BadImportSignature {
                module: m1,
                name: n1,
                ..
            },
            P::BadImportSignature {
                module: m2,
                name: n2,
                ..
            },
        ) => m1 == m2 && n1 == n2,
        _ => false,
    }
}

/// Renders a function type as `(i32, i32) -> i32`, `(i32, i32)` or `()`.
fn render(params: impl Iterator<Item = String>, results: impl Iterator<Item = String>) -> String {
    let params: Vec<String> = params.collect();
    let results: Vec<String> = results.collect();
    let mut text = format!("({})", params.join(", "));
    match results.as_slice() {
        [] => {}
        [one] => text.push_str(&format!(" -> {one}")),
        many => text.push_str(&format!(" -> ({})", many.join(", "))),
    }
    text
}

/// Describes what a module has under some name, in the words of the host's load errors:
/// `a function (i32) -> i32`, `a global`, ….
fn describe(ty: &ExternType) -> String {
    match ty {
        ExternType::Func(func) => format!(
            "a function {}",
            render(
                func.params().map(|t| t.to_string()),
                func.results().map(|t| t.to_string())
            )
        ),
        ExternType::Global(_) => "a global".to_string(),
        ExternType::Table(_) => "a table".to_string(),
        ExternType::Memory(_) => "a memory".to_string(),
        ExternType::Tag(_) => "a tag".to_string(),
    }
}

/// Serializes problems as their messages.
fn problem_messages<S: Serializer>(problems: &[ModuleProblem], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(problems.iter().map(|p| p.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"(module
      (import "weir" "emit" (func (param i32 i32)))
      (memory (export "memory") 2 4)
      (func (export "weir_abi_version") (result i32) (i32.const 1))
      (func (export "weir_alloc") (param i32) (result i32) (i32.const 4096))
      (func (export "weir_process") (param i32 i32) (result i32) (i32.const 0))
      (func (export "weir_snapshot") (param i64) (result i32) (i32.const 0))
      (func (export "weir_restore") (param i32 i32) (result i32) (i32.const 0)))"#;

    fn report(source: &str) -> ValidationReport {
        let engine = WasmEngine::new(GuestLimits::default()).unwrap();
        validate_bytes(&engine, "m.wat", source.as_bytes())
    }

    fn export<'a>(report: &'a ValidationReport, name: &str) -> &'a ExportCheck {
        report.exports.iter().find(|e| e.name == name).unwrap()
    }

    #[test]
    fn a_valid_module_reports_its_exports_memory_imports_and_capabilities() {
        let r = report(GOOD);
        assert!(r.valid, "{r}");
        assert!(r.problems.is_empty());
        assert_eq!(r.abi_version, Some(1));
        assert_eq!(export(&r, "weir_process").status, ExportStatus::Ok);
        assert_eq!(export(&r, "weir_process").expected, "(i32, i32) -> i32");
        assert_eq!(export(&r, "weir_finish").status, ExportStatus::Missing);
        let memory = r.memory.clone().unwrap();
        assert_eq!(
            (memory.initial_pages, memory.maximum_pages, memory.defined),
            (2, Some(4), 1)
        );
        assert_eq!(r.imports.len(), 1);
        assert_eq!(r.imports[0].status, ImportStatus::Provided);
        let caps = r.capabilities.unwrap();
        assert!(caps.snapshot && caps.restore && !caps.init);
        let text = r.to_string();
        assert!(
            text.starts_with("module m.wat is a valid Weir operator (ABI 1)"),
            "{text}"
        );
    }

    #[test]
    fn lists_every_problem_not_only_the_first_and_still_reads_the_version() {
        let source = r#"(module
          (import "env" "abort" (func (param i32 i32 i32 i32)))
          (import "weir" "emit" (func (param i32)))
          (func (export "weir_abi_version") (result i32) (i32.const 1))
          (func (export "weir_alloc") (param i64) (result i32) (i32.const 0)))"#;
        let r = report(source);
        assert!(!r.valid);
        assert_eq!(r.abi_version, Some(1));
        let weir_emit = r.imports.iter().find(|i| i.name == "emit").unwrap();
        assert_eq!(weir_emit.status, ImportStatus::WrongType);
        assert_eq!(weir_emit.expected.as_deref(), Some("a function (i32, i32)"));
        assert!(r.problems.iter().any(|p| matches!(
            p,
            ModuleProblem::BadImportSignature { name, .. } if name == "emit"
        )));
        assert!(
            r.problems
                .iter()
                .any(|p| matches!(p, ModuleProblem::NoMemory))
        );
        assert!(r.problems.iter().any(|p| matches!(
            p,
            ModuleProblem::WrongSignature {
                name: "weir_alloc",
                ..
            }
        )));
        assert!(r.problems.iter().any(|p| matches!(
            p,
            ModuleProblem::MissingExport {
                name: "weir_process",
                ..
            }
        )));
        // Each problem once, although loading stopped at one of them too.
        let messages: Vec<String> = r.problems.iter().map(|p| p.to_string()).collect();
        let mut unique = messages.clone();
        unique.dedup();
        assert_eq!(messages, unique);
    }

    #[test]
    fn text_that_is_not_a_module_is_one_compile_problem() {
        let r = report("(module (func");
        assert!(!r.valid);
        assert!(r.exports.is_empty());
        assert!(matches!(r.problems[..], [ModuleProblem::Compile { .. }]));
        let json = serde_json::to_value(&r).unwrap();
        assert!(
            json["problems"][0]
                .as_str()
                .unwrap()
                .contains("not a valid WebAssembly")
        );
    }

    #[test]
    fn an_unsupported_version_is_reported_with_the_guest_version() {
        let r = report(&GOOD.replace("(i32.const 1))", "(i32.const 9))"));
        assert!(!r.valid);
        assert_eq!(r.abi_version, Some(9));
        assert!(matches!(
            r.problems[..],
            [ModuleProblem::UnsupportedAbiVersion { guest: 9, host: 1 }]
        ));
    }

    #[test]
    fn wat_strings_escape_quotes_backslashes_and_non_ascii() {
        assert_eq!(wat_string("a\"b\\c"), "a\\22b\\5cc");
        assert_eq!(wat_string("é"), "\\c3\\a9");
    }

    #[test]
    fn the_report_says_how_a_job_checkpoints_the_operator() {
        let stateful = report(GOOD);
        let c = stateful.checkpoints.as_ref().unwrap();
        assert_eq!((c.auto, c.image_possible), ("exports", true));

        let without_snapshots = GOOD
            .replace(
                "(func (export \"weir_snapshot\") (param i64) (result i32) (i32.const 0))",
                "",
            )
            .replace(
                "(func (export \"weir_restore\") (param i32 i32) (result i32) (i32.const 0))",
                "",
            );
        let stateless = report(&without_snapshots);
        let c = stateless.checkpoints.as_ref().unwrap();
        assert_eq!((c.auto, c.image_possible), ("image", true), "{stateless}");
        assert!(stateless.to_string().contains("as an image of its memory"));

        let table_writer = report(&without_snapshots.replace(
            "(func (export \"weir_process\") (param i32 i32) (result i32) (i32.const 0))",
            "(table 1 funcref) (func $f) (elem declare func $f)\n\
             (func (export \"weir_process\") (param i32 i32) (result i32)\n\
               (table.set (i32.const 0) (ref.func $f)) (i32.const 0))",
        ));
        assert!(table_writer.valid, "{table_writer}");
        let c = table_writer.checkpoints.as_ref().unwrap();
        assert_eq!((c.auto, c.image_possible), ("refused", false));
        let text = table_writer.to_string();
        assert!(
            text.contains("REFUSED by a job with checkpoint = \"auto\"")
                && text.contains("table.set"),
            "{text}"
        );
    }
}
