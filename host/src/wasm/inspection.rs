//! [`Inspection`]: every check of a compiled module against the ABI table of `weir-abi`
//! ([`weir_abi::EXPORTS`], [`weir_abi::IMPORTS`]), collecting every problem and fact.
//!
//! # Why one inspection
//!
//! The loader refuses a module at its first problem; `weir validate` lists all of them, with
//! the facts around them (each export present, missing or of the wrong type, the memory, each
//! import). When each did its own checks they disagreed. Now both run this one: the loader
//! ([`OperatorModule::compile`](super::OperatorModule)) fails on the first of its
//! [`problems`](Inspection::problems), in the order it always checked (imports, memory, the
//! number of memories, exports); `weir validate` renders all of them.

use serde::Serialize;
use wasmtime::{ExternType, ImportType, Module};
use weir_abi::{EXPORTS, Export, ExportKind, IMPORT_MODULE, exports, imports};

use super::error::ModuleProblem;
use super::signature::{describe, function, matches};
use super::toolchain::{Toolchain, is_wasi};

/// Which optional exports a module has (`docs/ABI.md` §3, "When an optional export is
/// absent").
///
/// Defined here, where the exports are inspected, so that the inspection imports nothing of the
/// module and instance that use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Capabilities {
    /// `_initialize`: called once after instantiation.
    pub initialize: bool,
    /// `weir_init`: receives the init message, and so may be given a config.
    pub init: bool,
    /// `weir_snapshot`: saves state; without it every snapshot is empty.
    pub snapshot: bool,
    /// `weir_restore`: restores state; without it only an empty state can be restored.
    pub restore: bool,
    /// `weir_checkpoint_complete`: hears of completed checkpoints.
    pub checkpoint_complete: bool,
    /// `weir_finish`: may emit final records when every input has ended.
    pub finish: bool,
    /// `weir_on_timers`: receives fired timers, and so may set them.
    pub on_timers: bool,
    /// `weir_on_watermark`: hears of watermark advances.
    pub on_watermark: bool,
    /// Imports `state_get` or `state_write`: keeps keyed state on the host (`docs/ABI.md` §17),
    /// so each of its tasks gets a store.
    pub keyed_state: bool,
}

impl Capabilities {
    /// A component's: the world's exports are all required, so it has every one but
    /// `_initialize`, a core toolchain's.
    pub const COMPONENT: Capabilities = Capabilities {
        initialize: false,
        init: true,
        snapshot: true,
        restore: true,
        checkpoint_complete: true,
        finish: true,
        on_timers: true,
        on_watermark: true,
        keyed_state: false,
    };
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

/// What checking a compiled module against the ABI found: its facts and every problem among
/// them, in the order the loader reports them.
#[derive(Debug, Default)]
pub(crate) struct Inspection {
    /// The memory exported as `memory`, when it is a memory.
    pub(crate) memory: Option<MemoryReport>,
    /// Every export of [`EXPORTS`], in its order.
    pub(crate) exports: Vec<ExportCheck>,
    /// Every import of the module, in its order.
    pub(crate) imports: Vec<ImportCheck>,
    /// Everything wrong, in the order imports, memory, number of memories, exports; the loader
    /// refuses the module with the first.
    pub(crate) problems: Vec<ModuleProblem>,
}

impl Inspection {
    /// Checks `module`'s imports, memory and exports against the ABI table. `bytes` are what
    /// it was compiled from (binary or text): a module that imports WASI gets one problem for
    /// all those imports, with the fix for the toolchain its producers section names.
    pub(crate) fn of(module: &Module, bytes: &[u8]) -> Inspection {
        let mut found = Inspection::default();
        // Where the WASI problem goes among the others: at its first import.
        let mut wasi: Option<(usize, Vec<String>)> = None;
        for import in module.imports() {
            if is_wasi(import.module()) {
                let at = found.problems.len();
                let (_, names) = wasi.get_or_insert_with(|| (at, Vec::new()));
                names.push(format!("{}.{}", import.module(), import.name()));
                found.imports.push(ImportCheck {
                    module: import.module().to_string(),
                    name: import.name().to_string(),
                    ty: describe(&import.ty()),
                    status: ImportStatus::Unknown,
                    expected: None,
                });
                continue;
            }
            found.import(&import);
        }
        if let Some((at, imports)) = wasi {
            let (toolchain, evidence) =
                Toolchain::detect(bytes, module.imports().map(|i| (i.module(), i.name())));
            found.problems.insert(
                at,
                ModuleProblem::WasiImports {
                    imports,
                    toolchain,
                    evidence,
                },
            );
        }
        for export in &EXPORTS {
            match export.kind {
                ExportKind::Memory => found.memory(module, export),
                ExportKind::Func(_) => found.function(module, export),
            }
        }
        let sets_timers = found
            .imports
            .iter()
            .any(|i| i.module == IMPORT_MODULE && i.name == imports::TIMER_SET);
        let on_timers = found
            .exports
            .iter()
            .any(|e| e.name == exports::ON_TIMERS && e.status == ExportStatus::Ok);
        if sets_timers && !on_timers {
            found.problems.push(ModuleProblem::TimersWithoutHandler);
        }
        found
    }

    /// Which optional exports are present with their ABI type.
    pub(crate) fn capabilities(&self) -> Capabilities {
        let has = |name: &str| {
            self.exports
                .iter()
                .any(|e| e.name == name && e.status == ExportStatus::Ok)
        };
        Capabilities {
            initialize: has(exports::INITIALIZE),
            init: has(exports::INIT),
            snapshot: has(exports::SNAPSHOT),
            restore: has(exports::RESTORE),
            checkpoint_complete: has(exports::CHECKPOINT_COMPLETE),
            finish: has(exports::FINISH),
            on_timers: has(exports::ON_TIMERS),
            on_watermark: has(exports::ON_WATERMARK),
            keyed_state: self.imports.iter().any(|i| {
                i.module == IMPORT_MODULE
                    && [imports::STATE_GET, imports::STATE_WRITE].contains(&i.name.as_str())
            }),
        }
    }

    /// Whether `weir_abi_version` is exported with its ABI signature, so it can be called.
    pub(crate) fn version_export_ok(&self) -> bool {
        self.exports
            .iter()
            .any(|e| e.name == exports::ABI_VERSION && e.status == ExportStatus::Ok)
    }

    /// Checks one import against [`weir_abi::IMPORTS`].
    fn import(&mut self, import: &ImportType<'_>) {
        let ty = import.ty();
        let (module, name) = (import.module().to_string(), import.name().to_string());
        let (status, expected) = match weir_abi::table::import(&module, &name) {
            None => {
                self.problems.push(ModuleProblem::UnknownImport {
                    module: module.clone(),
                    name: name.clone(),
                });
                (ImportStatus::Unknown, None)
            }
            Some(host) if ty.func().is_some_and(|f| matches(&host.signature, f)) => {
                (ImportStatus::Provided, None)
            }
            Some(host) => {
                let expected = function(&host.signature);
                self.problems.push(ModuleProblem::BadImportSignature {
                    module: module.clone(),
                    name: name.clone(),
                    expected: expected.clone(),
                    found: describe(&ty),
                });
                (ImportStatus::WrongType, Some(expected))
            }
        };
        self.imports.push(ImportCheck {
            module,
            name,
            ty: describe(&ty),
            status,
            expected,
        });
    }

    /// Checks the memory: exported as `memory`, plain, and the only one.
    fn memory(&mut self, module: &Module, abi: &Export) {
        let found = module.get_export(abi.name);
        let defined = module.resources_required().num_memories;
        let status = match &found {
            Some(ExternType::Memory(memory)) => {
                self.memory = Some(MemoryReport {
                    initial_pages: memory.minimum(),
                    maximum_pages: memory.maximum(),
                    page_size: memory.page_size(),
                    shared: memory.is_shared(),
                    memory64: memory.is_64(),
                    defined,
                });
                if memory.is_shared() {
                    self.problems
                        .push(ModuleProblem::UnsupportedMemory { found: "shared" });
                    ExportStatus::WrongType
                } else if memory.is_64() {
                    self.problems
                        .push(ModuleProblem::UnsupportedMemory { found: "64-bit" });
                    ExportStatus::WrongType
                } else {
                    ExportStatus::Ok
                }
            }
            other => {
                self.problems.push(ModuleProblem::NoMemory);
                if other.is_some() {
                    ExportStatus::WrongType
                } else {
                    ExportStatus::Missing
                }
            }
        };
        if defined > 1 {
            self.problems
                .push(ModuleProblem::MultipleMemories { count: defined });
        }
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
            expected: "memory".to_string(),
            status,
            found,
            when_absent: abi.when_absent,
        });
    }

    /// Checks one function export of the ABI.
    fn function(&mut self, module: &Module, abi: &Export) {
        let ExportKind::Func(signature) = abi.kind else {
            return;
        };
        let found = module.get_export(abi.name);
        let (status, found) = match &found {
            None if abi.required => {
                self.problems.push(ModuleProblem::MissingExport {
                    name: abi.name,
                    expected: function(&signature),
                });
                (ExportStatus::Missing, None)
            }
            None => (ExportStatus::Missing, None),
            Some(ty) if ty.func().is_some_and(|f| matches(&signature, f)) => {
                (ExportStatus::Ok, None)
            }
            Some(ty) => {
                self.problems.push(ModuleProblem::WrongSignature {
                    name: abi.name,
                    expected: function(&signature),
                    found: describe(ty),
                });
                (ExportStatus::WrongType, Some(describe(ty)))
            }
        };
        self.exports.push(ExportCheck {
            name: abi.name,
            required: abi.required,
            expected: signature.to_string(),
            status,
            found,
            when_absent: abi.when_absent,
        });
    }
}
