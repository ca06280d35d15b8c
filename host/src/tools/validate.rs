//! [`ValidationReport`]: what `weir validate` finds in a module, checked against the guest ABI
//! (`docs/ABI.md`).
//!
//! # Why a report and not just the load error
//!
//! [`OperatorModule::load`] is the verdict: a module is valid exactly when the host loads it,
//! so the report runs it first and never second-guesses it. But loading stops at the first
//! problem, and an author porting a C or AssemblyScript toolchain to Weir usually has several
//! (a WASI import, a missing export, an unexported memory) — fixing them one build at a time is
//! slow. So the report also lists every problem and fact of the inspection the loader itself
//! runs (`wasm::Inspection`, over the ABI table of `weir-abi`, so the two cannot disagree):
//! each export of the ABI present, missing or of the wrong type, the memory, each import and
//! whether the host provides it, and the ABI version, read from a throwaway instance even when
//! loading refused the module for another reason. This module only renders them.

use std::fmt;
use std::path::Path;

use serde::{Serialize, Serializer};
use wasmtime::{Linker, Module, Store, StoreLimits, StoreLimitsBuilder};
use weir_abi::{ABI_VERSION, exports};

use crate::wasm::component;
use crate::wasm::image::rewrite;
use crate::wasm::{
    Capabilities, EngineError, EngineOptions, GuestLimits, Inspection, LoadOptions,
    MAX_TABLE_ELEMENTS, ModuleError, ModuleProblem, ModuleSource, OperatorModule, StateCapture,
    WasmEngine, deadline_ticks, file_kind,
};
pub use crate::wasm::{ExportCheck, ExportStatus, ImportCheck, ImportStatus, MemoryReport};

/// What `weir validate` found in one module.
///
/// Displays as the readable report; serializes (for `--json`) with the same facts.
#[derive(Debug, Serialize)]
pub struct ValidationReport {
    /// The module's path (or the name it was given).
    pub module: String,
    /// Whether the host loads the module: the verdict, taken from [`OperatorModule::load`].
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
    /// For a component, the world this host implements for components
    /// (`weir:operator@1.1.0`, `docs/COMPONENTS.md`); `None` for a core module. A component's
    /// report has no export, import or memory table: its problems name the refused import or
    /// the world version it was built against.
    pub component_world: Option<String>,
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
    // The CLI's module cache, as `weir run` uses it: a component compiles for seconds.
    let engine = WasmEngine::for_job(&EngineOptions {
        module_cache: crate::runtime::default_module_cache_dir(),
        ..EngineOptions::default()
    })?;
    Ok(validate_bytes(&engine, &name, &bytes))
}

/// Validates the module in `bytes` (binary or WAT text) with `engine`: loads it the way the
/// host does, then inspects it. `name` identifies it in the report.
pub fn validate_bytes(engine: &WasmEngine, name: &str, bytes: &[u8]) -> ValidationReport {
    if component::is_component(bytes) {
        return validate_component(engine, name, bytes);
    }
    let loaded = OperatorModule::load(
        engine,
        ModuleSource::bytes(name, bytes),
        LoadOptions::default(),
    );
    // The compiled module to inspect: the loaded one, or compiled again when loading refused it
    // after compiling.
    let module = match &loaded {
        Ok(operator) => operator.core_module().cloned(),
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
        .map(|module| Inspection::of(module, bytes))
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
    let mut exports = inspection.exports;
    if checkpoints.as_ref().is_some_and(|c| c.auto == "image") {
        say_absent_snapshots_mean_an_image(&mut exports);
    }
    ValidationReport {
        module: name.to_string(),
        valid,
        abi_version,
        host_abi_version: ABI_VERSION,
        problems,
        memory: inspection.memory,
        exports,
        imports: inspection.imports,
        capabilities,
        checkpoints,
        component_world: None,
    }
}

/// [`validate_bytes`] for a component: loaded the way the host loads it, once (a Python
/// component takes seconds to compile); checkpointed through its exports, never as an image.
fn validate_component(engine: &WasmEngine, name: &str, bytes: &[u8]) -> ValidationReport {
    let loaded = OperatorModule::load(
        engine,
        ModuleSource::bytes(name, bytes),
        LoadOptions::default(),
    );
    let valid = loaded.is_ok();
    let capabilities = loaded.as_ref().ok().map(OperatorModule::capabilities);
    ValidationReport {
        module: name.to_string(),
        valid,
        abi_version: None,
        host_abi_version: ABI_VERSION,
        problems: loaded
            .err()
            .map(|error| error.problem)
            .into_iter()
            .collect(),
        memory: None,
        exports: Vec::new(),
        imports: Vec::new(),
        capabilities,
        checkpoints: valid.then(|| CheckpointsReport {
            auto: "exports",
            image_possible: false,
            image_refused: Some(
                "it is a component: components are checkpointed through their own snapshot and \
                 restore"
                    .to_string(),
            ),
        }),
        component_world: Some(format!(
            "{}@{}",
            component::WORLD_PACKAGE,
            component::WORLD_VERSION
        )),
    }
}

/// For a module a job checkpoints as an image (`checkpoint = "auto"` without snapshot
/// exports), says so where the exports table would otherwise say what a missing
/// `weir_snapshot` or `weir_restore` means under `checkpoint = "exports"` (an empty state), so
/// that the table and the `checkpoints:` line agree.
fn say_absent_snapshots_mean_an_image(table: &mut [ExportCheck]) {
    for export in table {
        if export.status != ExportStatus::Missing {
            continue;
        }
        if export.name == exports::SNAPSHOT {
            export.when_absent = Some(
                "a job takes an image of its memory and globals instead (checkpoint = \"auto\")",
            );
        } else if export.name == exports::RESTORE {
            export.when_absent = Some("a job writes the image back instead");
        }
    }
}

/// How `checkpoint = "auto"` and `"image"` treat a module the host loads.
fn checkpoints_report(
    engine: &WasmEngine,
    name: &str,
    bytes: &[u8],
    capabilities: Capabilities,
) -> CheckpointsReport {
    let image = LoadOptions {
        capture: StateCapture::Image,
        ..LoadOptions::default()
    };
    let image_refused = match OperatorModule::load(engine, ModuleSource::bytes(name, bytes), image)
    {
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
        if let (true, Some(world)) = (self.valid, &self.component_world) {
            writeln!(
                f,
                "module {} is a valid Weir operator (a component of the world {world})",
                self.module
            )?;
        } else if self.valid {
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
                (c.initialize, exports::INITIALIZE),
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

/// Reads `weir_abi_version` from a throwaway instance whose imports all trap, under the
/// default time and memory limits (`_initialize` runs first, as in the host). `None` when the
/// module cannot be instantiated that way or the call fails.
fn read_abi_version(engine: &WasmEngine, module: &Module) -> Option<i32> {
    let guest_limits = GuestLimits::default();
    let deadline = deadline_ticks(guest_limits.call_timeout);
    let limits = StoreLimitsBuilder::new()
        .memory_size(guest_limits.max_memory_bytes)
        .table_elements(MAX_TABLE_ELEMENTS)
        .instances(1)
        .build();
    let mut store: Store<StoreLimits> = Store::new(engine.engine(), limits);
    store.limiter(|limits| limits);
    let mut linker = Linker::new(engine.engine());
    linker.define_unknown_imports_as_traps(module).ok()?;
    store.set_epoch_deadline(deadline);
    let instance = linker.instantiate(&mut store, module).ok()?;
    if let Ok(initialize) = instance.get_typed_func::<(), ()>(&mut store, exports::INITIALIZE) {
        store.set_epoch_deadline(deadline);
        initialize.call(&mut store, ()).ok()?;
    }
    let version = instance
        .get_typed_func::<(), i32>(&mut store, exports::ABI_VERSION)
        .ok()?;
    store.set_epoch_deadline(deadline);
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
        (P::WasiImports { .. }, P::WasiImports { .. }) => true,
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
        let engine = WasmEngine::new().unwrap();
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
    fn wasi_imports_are_one_problem_and_other_unknown_imports_one_each() {
        let source = GOOD.replace(
            "(module",
            r#"(module
              (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
              (import "env" "seed" (func (result f64)))
              (import "wasi_snapshot_preview1" "proc_exit" (func (param i32)))
              (import "weir" "clock" (func))"#,
        );
        let r = report(&source);
        assert!(!r.valid);
        let messages: Vec<String> = r.problems.iter().map(|p| p.to_string()).collect();
        assert_eq!(messages.len(), 3, "{messages:#?}");
        assert!(
            messages[0].contains("2 imports from `wasi_snapshot_preview1`: fd_write, proc_exit"),
            "{messages:#?}"
        );
        assert!(messages[1].contains("`env`.`seed`"), "{messages:#?}");
        assert!(messages[2].contains("`weir`.`clock`"), "{messages:#?}");
        // The imports table still has a row for each.
        assert_eq!(r.imports.len(), 5);
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
        // The exports table says the same as the checkpoints line: no "every snapshot is empty"
        // for a module whose state a job captures as an image.
        let text = stateless.to_string();
        assert!(!text.contains("every snapshot is empty"), "{text}");
        assert!(!text.contains("only an empty state"), "{text}");
        for name in [exports::SNAPSHOT, exports::RESTORE] {
            let note = export(&stateless, name).when_absent.unwrap_or_default();
            assert!(note.contains("image"), "{name}: {note}");
            let row = text.lines().find(|l| l.contains(name)).unwrap();
            assert!(row.contains("image"), "{row}");
        }
        let json = serde_json::to_value(&stateless).unwrap();
        assert!(
            !json.to_string().contains("every snapshot is empty"),
            "{json}"
        );

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
