//! Which toolchain built a module, as far as the module says: for the fix of a refusal that
//! depends on it (a module that imports WASI, [`ModuleProblem::WasiImports`]).
//!
//! # Why
//!
//! A module that imports WASI was built for a WASI target, or calls a library function that
//! needs one (`printf`, `println!`, `std.debug.print`, `console.log`). The way out is a compiler
//! flag or a library change, and it is different in every language; naming all of them to
//! every user buries the one that applies. Most toolchains record themselves in the module's
//! `producers` custom section (tool-conventions' `ProducersSection.md`: `language` and
//! `processed-by` fields); AssemblyScript writes none, but imports `env.abort`.
//!
//! [`ModuleProblem::WasiImports`]: super::ModuleProblem::WasiImports

use std::fmt;

use serde::Serialize;
use wasmparser::{KnownCustom, Parser, Payload};

/// The toolchain a module was built with, as its producers section or its imports tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Toolchain {
    /// clang (C or C++), usually with wasi-libc.
    Clang,
    /// Zig.
    Zig,
    /// Rust (rustc).
    Rust,
    /// AssemblyScript (asc).
    AssemblyScript,
    /// Nothing in the module says.
    Unknown,
}

/// How a [`Toolchain`] was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolchainEvidence {
    /// The module's `producers` custom section names it.
    ProducersSection,
    /// Its imports give it away (AssemblyScript's `env.abort`).
    Imports,
    /// Nothing: the toolchain is [`Toolchain::Unknown`].
    None,
}

impl Toolchain {
    /// Tells the toolchain of the module in `bytes` (a binary; WAT text has no producers
    /// section) whose imports are `imports` (module, name): its producers section first (the
    /// `language` field before `processed-by`, since rustc and zig may list clang as a
    /// processor too), then AssemblyScript's `env.abort` import.
    pub(crate) fn detect<'a>(
        bytes: &[u8],
        imports: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (Toolchain, ToolchainEvidence) {
        let (languages, processors) = producers(bytes);
        let named = languages
            .iter()
            .find_map(|l| from_language(l))
            .or_else(|| processors.iter().find_map(|p| from_processor(p)));
        if let Some(toolchain) = named {
            return (toolchain, ToolchainEvidence::ProducersSection);
        }
        if imports
            .into_iter()
            .any(|(module, name)| module == "env" && name == "abort")
        {
            return (Toolchain::AssemblyScript, ToolchainEvidence::Imports);
        }
        (Toolchain::Unknown, ToolchainEvidence::None)
    }

    /// How to build a module of this toolchain without WASI, pointing at docs/ABI.md.
    pub fn without_wasi(self) -> &'static str {
        match self {
            Toolchain::Clang => {
                "build it with `clang --target=wasm32 -ffreestanding -nostdlib -Wl,--no-entry` \
                 (exports named by `__attribute__((export_name(...)))`, or add \
                 `-Wl,--export-dynamic`) instead of a wasm32-wasi target, and drop the libc \
                 calls that need WASI (printf, puts, fopen, time, exit, ...): without libc such \
                 a call is a link error, not an import (docs/ABI.md §12, \"C, with clang and no \
                 libc\" and \"Without WASI\")"
            }
            Toolchain::Zig => {
                "build it with `zig build-exe -target wasm32-freestanding -fno-entry -rdynamic` \
                 instead of a wasm32-wasi target, and drop what needs WASI (std.debug.print, \
                 std.io, std.fs, std.time, std.process): on wasm32-freestanding it does not \
                 compile (docs/ABI.md §12, \"Without WASI\")"
            }
            Toolchain::Rust => {
                "build it with `cargo build --target wasm32-unknown-unknown` instead of \
                 wasm32-wasip1 (or wasm32-wasi), with weir-sdk; println!, std::fs, std::env \
                 and std::time need WASI, so log through weir_sdk::log instead \
                 (docs/ABI.md §12, \"Rust, with the SDK\" and \"Without WASI\")"
            }
            Toolchain::AssemblyScript => {
                "build it without WASI bindings: drop `@assemblyscript/wasi-shim` (the \
                 `extends` of its asconfig.json) and the `console` and `process` calls, \
                 which AssemblyScript implements with WASI; `env.abort` is provided \
                 (docs/ABI.md §12, \"AssemblyScript\" and \"Without WASI\")"
            }
            Toolchain::Unknown => {
                "build it for a target without WASI: clang `--target=wasm32 -ffreestanding \
                 -nostdlib -Wl,--no-entry`, Zig `-target wasm32-freestanding -fno-entry \
                 -rdynamic`, Rust `--target wasm32-unknown-unknown`, AssemblyScript without \
                 `@assemblyscript/wasi-shim` and without `console` or `process` \
                 (docs/ABI.md §12, \"Without WASI\")"
            }
        }
    }
}

impl fmt::Display for Toolchain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Toolchain::Clang => "clang",
            Toolchain::Zig => "Zig",
            Toolchain::Rust => "Rust",
            Toolchain::AssemblyScript => "AssemblyScript",
            Toolchain::Unknown => "an unknown toolchain",
        })
    }
}

/// Whether an import from `module` is WASI: preview 1 (and its predecessor), or a `wasi:`
/// interface of the component model.
pub(crate) fn is_wasi(module: &str) -> bool {
    module == "wasi_snapshot_preview1" || module == "wasi_unstable" || module.starts_with("wasi:")
}

/// The values of the `language` and `processed-by` fields of the producers section of the
/// binary `bytes`; empty for text, a binary without the section or one that does not parse.
fn producers(bytes: &[u8]) -> (Vec<String>, Vec<String>) {
    let (mut languages, mut processors) = (Vec::new(), Vec::new());
    if !bytes.starts_with(b"\0asm") {
        return (languages, processors);
    }
    for payload in Parser::new(0).parse_all(bytes) {
        let Ok(Payload::CustomSection(section)) = payload else {
            // Code and other sections are skipped whole; a parse error ends the search.
            if payload.is_err() {
                break;
            }
            continue;
        };
        let KnownCustom::Producers(reader) = section.as_known() else {
            continue;
        };
        for field in reader.into_iter().flatten() {
            let into = match field.name {
                "language" => &mut languages,
                "processed-by" => &mut processors,
                _ => continue,
            };
            for value in field.values.into_iter().flatten() {
                into.push(value.name.to_string());
            }
        }
    }
    (languages, processors)
}

/// The toolchain of a `language` value: `Rust`, `Zig`, `C99`, `C11`, `C_plus_plus_17`, ...
fn from_language(language: &str) -> Option<Toolchain> {
    let lower = language.to_ascii_lowercase();
    if lower == "rust" {
        Some(Toolchain::Rust)
    } else if lower == "zig" {
        Some(Toolchain::Zig)
    } else if lower.starts_with('c') && lower.len() <= 20 && !lower.contains("sharp") {
        Some(Toolchain::Clang)
    } else if lower.contains("assemblyscript") {
        Some(Toolchain::AssemblyScript)
    } else {
        None
    }
}

/// The toolchain of a `processed-by` value: `rustc`, `Debian clang`, `Zig`, ...
fn from_processor(processor: &str) -> Option<Toolchain> {
    let lower = processor.to_ascii_lowercase();
    if lower.contains("rustc") {
        Some(Toolchain::Rust)
    } else if lower.contains("zig") {
        Some(Toolchain::Zig)
    } else if lower.contains("assemblyscript") || lower == "asc" {
        Some(Toolchain::AssemblyScript)
    } else if lower.contains("clang") {
        Some(Toolchain::Clang)
    } else {
        None
    }
}
