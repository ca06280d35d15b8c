//! The load-time half of image checkpoints: decide whether an image can capture a module
//! faithfully ([`analyze`]), and rewrite the module so the host can reach its state
//! ([`rewrite`]).
//!
//! # What the rewrite does
//!
//! It adds one export per module-defined memory (`weir:image:memory:N`) and one per
//! module-defined mutable global (`weir:image:global:N`), `N` being the item's index in the
//! module's index space (imports first). Everything else is left as it was: every section but
//! the export section is copied as a raw section, in the original order, so no index moves and
//! custom sections (names, producers, debug info) survive byte for byte. The export section is
//! re-encoded as the original entries, byte for byte, followed by the added ones; a module
//! without one gets one at its place in the section order.
//!
//! # What is refused, and why
//!
//! An image is the memories' bytes and the mutable globals' values. A module whose state does
//! not fit that — tables its code mutates, segments it drops, shared or imported memories,
//! imported or reference-typed mutable globals, GC objects — would be restored wrongly without
//! a word, so [`analyze`] refuses it and names every reason it finds ([`ImageRefusal`]). Such
//! a module can still be checkpointed through its own `weir_snapshot` and `weir_restore`
//! exports.
//!
//! 64-bit memories are accepted: the layout records each memory's address type, and sizes are
//! counted in 64 KiB pages either way (`docs/ABI.md` §1 refuses them for the `memory` export
//! anyway). Memories with a custom page size are refused, so that a page is always 64 KiB.
//!
//! # The layout
//!
//! [`ImageLayout`] is what an image's header needs to say what it holds and which module it
//! belongs to: the hash of the *original* module bytes (xxh3-128), [`REWRITE_VERSION`], and
//! for every captured memory and global its index, export name and type. It is plain data with
//! a stable serde form.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use wasm_encoder::{Encode, ExportKind, RawSection};
use wasmparser::{
    CompositeInnerType, Encoding, KnownCustom, Name, NameSectionReader, Operator, Parser, Payload,
    TypeRef, ValType,
};

/// The version of the rewrite and of the export names it adds. An image records it, and a
/// restore refuses an image made under another version: the exports it would look for may
/// not be there.
pub const REWRITE_VERSION: u32 = 1;

/// The prefix of every export name the rewrite adds. A module that already exports a name
/// starting with it is refused ([`ImageRefusal::ReservedExport`]); no toolchain emits names
/// with colons on its own.
pub const RESERVED_EXPORT_PREFIX: &str = "weir:image:";

/// The size of a page of linear memory, in bytes: 64 KiB. Memories with another page size
/// are refused.
pub const PAGE_SIZE: u64 = 65536;

/// The advice every refusal but the reserved-name one ends with.
const USE_EXPORTS: &str =
    "export weir_snapshot and weir_restore from the module and use checkpoint = \"exports\"";

/// The name under which the rewrite exports the module's memory of index `index`.
pub fn memory_export_name(index: u32) -> String {
    format!("{RESERVED_EXPORT_PREFIX}memory:{index}")
}

/// The name under which the rewrite exports the module's global of index `index`.
pub fn global_export_name(index: u32) -> String {
    format!("{RESERVED_EXPORT_PREFIX}global:{index}")
}

// ---------------------------------------------------------------------------------------------
// The layout

/// The xxh3-128 hash of a module's original bytes (before the rewrite): an image names the
/// module it was taken from, and a restore refuses an image of another module.
///
/// Shown and serialised as 32 lowercase hex digits, the canonical (big-endian) form of
/// xxh3-128.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ModuleHash(pub u128);

impl ModuleHash {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self(xxhash_rust::xxh3::xxh3_128(bytes))
    }

    /// Parses the 32 hex digits [`Display`](fmt::Display) writes.
    pub fn from_hex(hex: &str) -> Option<Self> {
        if hex.len() != 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(hex, 16).ok().map(Self)
    }
}

impl fmt::Display for ModuleHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl Serialize for ModuleHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ModuleHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let hex = String::deserialize(deserializer)?;
        Self::from_hex(&hex).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "module hash `{hex}` is not 32 hex digits (an xxh3-128 hash)"
            ))
        })
    }
}

/// What an image of one module holds, and where the host finds it in a rewritten instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageLayout {
    /// The [`REWRITE_VERSION`] the module was rewritten under.
    pub rewrite_version: u32,
    /// The hash of the module's original bytes.
    pub module_hash: ModuleHash,
    /// Every memory the module defines, in index order.
    pub memories: Vec<MemoryLayout>,
    /// Every mutable global the module defines, in index order.
    pub globals: Vec<GlobalLayout>,
}

/// One memory an image captures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryLayout {
    /// Its index in the module's memory index space.
    pub index: u32,
    /// The export the rewrite gave it ([`memory_export_name`]).
    pub export: String,
    /// Its declared minimum size, in 64 KiB pages: what a fresh instance starts with.
    pub minimum_pages: u64,
    /// Its declared maximum size, in pages, if it has one.
    pub maximum_pages: Option<u64>,
    /// Whether its addresses are 32 or 64 bits wide.
    pub address_type: AddressType,
}

/// The width of a memory's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressType {
    /// A classic 32-bit memory (at most 4 GiB).
    I32,
    /// A 64-bit memory (the memory64 proposal).
    I64,
}

/// One mutable global an image captures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalLayout {
    /// Its index in the module's global index space.
    pub index: u32,
    /// The export the rewrite gave it ([`global_export_name`]).
    pub export: String,
    /// The type of its value.
    pub value_type: GlobalValueType,
}

/// The type of a captured global: a number or a vector, never a reference (those are
/// refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GlobalValueType {
    /// 32-bit integer.
    I32,
    /// 64-bit integer.
    I64,
    /// 32-bit float (saved as its bits).
    F32,
    /// 64-bit float (saved as its bits).
    F64,
    /// 128-bit SIMD vector.
    V128,
}

impl GlobalValueType {
    /// How many bytes a value of this type takes: 4, 8 or 16.
    pub fn byte_len(self) -> usize {
        match self {
            Self::I32 | Self::F32 => 4,
            Self::I64 | Self::F64 => 8,
            Self::V128 => 16,
        }
    }
}

impl fmt::Display for GlobalValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::I32 => "i32",
            Self::I64 => "i64",
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::V128 => "v128",
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Errors

/// An item of a module, by index and, when the module's name section gives one, by name: how
/// refusals point at the code they are about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleItem {
    /// Its index in its index space (imports first).
    pub index: u32,
    /// Its name in the module's `name` section, if it has one.
    pub name: Option<String>,
}

impl fmt::Display for ModuleItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Some(name) => write!(f, "{} (`{name}`)", self.index),
            None => write!(f, "{}", self.index),
        }
    }
}

/// One reason an image cannot capture a module faithfully. Each message names the item and
/// says what to do instead.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageRefusal {
    /// A memory is shared: other threads could write it while it is copied.
    SharedMemory {
        /// The memory.
        memory: ModuleItem,
    },
    /// A memory is imported: its contents belong to whoever provides it.
    ImportedMemory {
        /// The memory.
        memory: ModuleItem,
        /// The import's module name.
        module: String,
        /// The import's field name.
        name: String,
    },
    /// A memory's pages are not 64 KiB (the custom-page-sizes proposal).
    CustomPageSize {
        /// The memory.
        memory: ModuleItem,
        /// Its page size in bytes.
        page_size: u64,
    },
    /// A table is imported: an image holds no tables, and this one is shared with its
    /// provider.
    ImportedTable {
        /// The table.
        table: ModuleItem,
        /// The import's module name.
        module: String,
        /// The import's field name.
        name: String,
    },
    /// A mutable global is imported: its value lives outside the instance.
    ImportedMutableGlobal {
        /// The global.
        global: ModuleItem,
        /// The import's module name.
        module: String,
        /// The import's field name.
        name: String,
    },
    /// A mutable global holds references, which cannot be written down as bytes.
    MutableReferenceGlobal {
        /// The global.
        global: ModuleItem,
        /// Its type, as wasm text writes it (`funcref`, `externref`, …).
        value_type: String,
    },
    /// A global is shared between threads (the shared-everything-threads proposal).
    SharedGlobal {
        /// The global.
        global: ModuleItem,
    },
    /// A function changes a table (`table.set`, `table.grow`, `table.fill`, `table.copy`,
    /// `table.init`, or an atomic table write): an image holds no tables.
    TableMutation {
        /// The function.
        function: ModuleItem,
        /// The instruction, as wasm text writes it.
        instruction: &'static str,
    },
    /// A function drops a data or element segment (`data.drop`, `elem.drop`): a fresh instance
    /// would have the segment back, and an image does not record the drop.
    SegmentDrop {
        /// The function.
        function: ModuleItem,
        /// The instruction, as wasm text writes it.
        instruction: &'static str,
    },
    /// A type is a GC struct or array, or a continuation: such objects live outside linear
    /// memory and globals.
    GcType {
        /// The type's index.
        type_index: u32,
        /// What kind of type it is: `struct`, `array` or `cont`.
        kind: &'static str,
    },
    /// The module already exports a name the rewrite reserves.
    ReservedExport {
        /// The export's name.
        name: String,
    },
}

impl fmt::Display for ImageRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SharedMemory { memory } => write!(
                f,
                "memory {memory} is shared: an image cannot copy a memory other threads may \
                 write; {USE_EXPORTS}"
            ),
            Self::ImportedMemory {
                memory,
                module,
                name,
            } => write!(
                f,
                "memory {memory} is imported (`{module}`.`{name}`): an image captures only \
                 memories the module defines; {USE_EXPORTS}"
            ),
            Self::CustomPageSize { memory, page_size } => write!(
                f,
                "memory {memory} has pages of {page_size} bytes: an image is made of 64 KiB \
                 pages; {USE_EXPORTS}"
            ),
            Self::ImportedTable {
                table,
                module,
                name,
            } => write!(
                f,
                "table {table} is imported (`{module}`.`{name}`): an image does not capture \
                 tables; {USE_EXPORTS}"
            ),
            Self::ImportedMutableGlobal {
                global,
                module,
                name,
            } => write!(
                f,
                "global {global} is an imported mutable global (`{module}`.`{name}`): an image \
                 captures only globals the module defines; {USE_EXPORTS}"
            ),
            Self::MutableReferenceGlobal { global, value_type } => write!(
                f,
                "global {global} is a mutable {value_type} global: an image cannot save \
                 references; {USE_EXPORTS}"
            ),
            Self::SharedGlobal { global } => write!(
                f,
                "global {global} is shared: an image cannot copy state other threads may \
                 write; {USE_EXPORTS}"
            ),
            Self::TableMutation {
                function,
                instruction,
            } => write!(
                f,
                "function {function} uses `{instruction}`: an image does not capture tables; \
                 {USE_EXPORTS}"
            ),
            Self::SegmentDrop {
                function,
                instruction,
            } => write!(
                f,
                "function {function} uses `{instruction}`: an image does not record which \
                 segments were dropped; {USE_EXPORTS}"
            ),
            Self::GcType { type_index, kind } => write!(
                f,
                "type {type_index} is a {kind} type: an image captures linear memory and \
                 globals, not GC objects or continuations; {USE_EXPORTS}"
            ),
            Self::ReservedExport { name } => write!(
                f,
                "export `{name}` starts with `{RESERVED_EXPORT_PREFIX}`, which the host \
                 reserves for the exports it adds to modules checkpointed as images \
                 (docs/ABI.md §14); rename the export"
            ),
        }
    }
}

/// Why a module cannot be analysed or rewritten for image checkpoints.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RewriteError {
    /// The bytes are not a well-formed binary wasm module.
    #[error("cannot read the module for an image checkpoint: {message}")]
    Malformed {
        /// What is wrong, from the parser (with the byte offset), or that the bytes are text.
        message: String,
    },
    /// The bytes are a component, not a core module.
    #[error(
        "the module is a WebAssembly component: image checkpoints need a core module \
         (docs/ABI.md §1)"
    )]
    NotAModule,
    /// An image cannot capture the module faithfully; every reason found is listed.
    #[error("an image cannot capture this module faithfully: {}", list(refusals))]
    Refused {
        /// Every reason found, in the order of the module's sections.
        refusals: Vec<ImageRefusal>,
    },
    /// [`rewrite`] was given other bytes than the ones [`analyze`] analysed.
    #[error(
        "the module to rewrite (hash {found}) is not the one analysed (hash {analysed}); \
         analyse the same bytes you rewrite"
    )]
    NotAnalysed {
        /// The hash in the analysis.
        analysed: ModuleHash,
        /// The hash of the bytes given to [`rewrite`].
        found: ModuleHash,
    },
}

/// The refusals as one line: the reason alone, or numbered reasons.
fn list(refusals: &[ImageRefusal]) -> String {
    match refusals {
        [one] => one.to_string(),
        many => {
            let items: Vec<String> = many
                .iter()
                .enumerate()
                .map(|(i, r)| format!("({}) {r}", i + 1))
                .collect();
            format!("{} reasons: {}", many.len(), items.join("; "))
        }
    }
}

fn malformed(error: wasmparser::BinaryReaderError) -> RewriteError {
    RewriteError::Malformed {
        message: error.to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// Analysis

/// A module an image can capture, with the layout of its images. Only [`analyze`] makes one,
/// so holding one means the module was accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageAnalysis {
    /// The layout of the module's images.
    layout: ImageLayout,
}

impl ImageAnalysis {
    /// The layout of the module's images: what the rewrite exports, and what an image holds.
    pub fn layout(&self) -> &ImageLayout {
        &self.layout
    }

    /// The layout, by value.
    pub fn into_layout(self) -> ImageLayout {
        self.layout
    }
}

/// Decides whether an image can capture the module in `bytes` (binary wasm: turn text into
/// binary first, as wasmtime does with `wat::parse_bytes`) faithfully, and if so, what its
/// images hold.
///
/// Reads every section once and every function body once, and reports every reason for
/// refusing it, not only the first ([`RewriteError::Refused`]). It does not validate the module
/// (wasmtime does that when it compiles it); it fails only on bytes it cannot parse.
pub fn analyze(bytes: &[u8]) -> Result<ImageAnalysis, RewriteError> {
    if !bytes.starts_with(b"\0asm") {
        return Err(RewriteError::Malformed {
            message: "not a binary wasm module (no `\\0asm` header); a module in WAT text must \
                      be turned into binary first"
                .into(),
        });
    }
    let mut scan = Scan::default();
    for payload in Parser::new(0).parse_all(bytes) {
        scan.payload(payload.map_err(malformed)?)?;
    }
    if !scan.refusals.is_empty() {
        let mut refusals = scan.refusals;
        if let Some(names) = scan.names {
            give_names(&mut refusals, names);
        }
        return Err(RewriteError::Refused { refusals });
    }
    Ok(ImageAnalysis {
        layout: ImageLayout {
            rewrite_version: REWRITE_VERSION,
            module_hash: ModuleHash::of(bytes),
            memories: scan.memories,
            globals: scan.globals,
        },
    })
}

/// The index spaces refusals point into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ItemKind {
    Function,
    Memory,
    Table,
    Global,
}

impl ImageRefusal {
    /// The item the refusal is about, and its index space, if it is about one.
    fn item_mut(&mut self) -> Option<(ItemKind, &mut ModuleItem)> {
        match self {
            Self::SharedMemory { memory }
            | Self::ImportedMemory { memory, .. }
            | Self::CustomPageSize { memory, .. } => Some((ItemKind::Memory, memory)),
            Self::ImportedTable { table, .. } => Some((ItemKind::Table, table)),
            Self::ImportedMutableGlobal { global, .. }
            | Self::MutableReferenceGlobal { global, .. }
            | Self::SharedGlobal { global } => Some((ItemKind::Global, global)),
            Self::TableMutation { function, .. } | Self::SegmentDrop { function, .. } => {
                Some((ItemKind::Function, function))
            }
            Self::GcType { .. } | Self::ReservedExport { .. } => None,
        }
    }
}

/// Gives the refused items the names the module's `name` section has for them. A name
/// section that cannot be read is ignored, as wasmtime ignores it: names only make messages
/// clearer.
fn give_names(refusals: &mut [ImageRefusal], names: NameSectionReader<'_>) {
    let mut wanted: HashMap<(ItemKind, u32), Vec<usize>> = HashMap::new();
    for (i, refusal) in refusals.iter_mut().enumerate() {
        if let Some((kind, item)) = refusal.item_mut() {
            wanted.entry((kind, item.index)).or_default().push(i);
        }
    }
    for subsection in names {
        let Ok(subsection) = subsection else { return };
        let (kind, map) = match subsection {
            Name::Function(map) => (ItemKind::Function, map),
            Name::Memory(map) => (ItemKind::Memory, map),
            Name::Table(map) => (ItemKind::Table, map),
            Name::Global(map) => (ItemKind::Global, map),
            _ => continue,
        };
        for naming in map {
            let Ok(naming) = naming else { break };
            for &i in wanted.get(&(kind, naming.index)).into_iter().flatten() {
                if let Some((_, item)) = refusals[i].item_mut() {
                    item.name = Some(naming.name.to_string());
                }
            }
        }
    }
}

/// An item with no name yet.
fn item(index: u32) -> ModuleItem {
    ModuleItem { index, name: None }
}

/// What [`analyze`] has learnt so far, section by section.
#[derive(Default)]
struct Scan<'a> {
    /// Imported functions, then defined ones as their bodies are read: the next function's
    /// index.
    function_count: u32,
    /// Memories so far (imported, then defined): the next memory's index.
    memory_count: u32,
    /// Tables so far: the next table's index.
    table_count: u32,
    /// Globals so far: the next global's index.
    global_count: u32,
    /// Types so far: the next type's index.
    type_count: u32,
    /// The memories an image captures.
    memories: Vec<MemoryLayout>,
    /// The globals an image captures.
    globals: Vec<GlobalLayout>,
    /// Every refusal found, in order; items are named at the end.
    refusals: Vec<ImageRefusal>,
    /// The `name` custom section, if there is one (it usually comes last).
    names: Option<NameSectionReader<'a>>,
}

impl<'a> Scan<'a> {
    /// Learns what one section (or function body) says.
    fn payload(&mut self, payload: Payload<'a>) -> Result<(), RewriteError> {
        match payload {
            Payload::Version { encoding, .. } if encoding != Encoding::Module => {
                return Err(RewriteError::NotAModule);
            }
            Payload::TypeSection(reader) => {
                for group in reader {
                    for sub in group.map_err(malformed)?.into_types() {
                        let kind = match sub.composite_type.inner {
                            CompositeInnerType::Func(_) => None,
                            CompositeInnerType::Struct(_) => Some("struct"),
                            CompositeInnerType::Array(_) => Some("array"),
                            CompositeInnerType::Cont(_) => Some("cont"),
                        };
                        if let Some(kind) = kind {
                            self.refusals.push(ImageRefusal::GcType {
                                type_index: self.type_count,
                                kind,
                            });
                        }
                        self.type_count += 1;
                    }
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    let import = import.map_err(malformed)?;
                    let module = import.module.to_string();
                    let name = import.name.to_string();
                    match import.ty {
                        TypeRef::Func(_) | TypeRef::FuncExact(_) => self.function_count += 1,
                        TypeRef::Tag(_) => {}
                        TypeRef::Memory(_) => {
                            self.refusals.push(ImageRefusal::ImportedMemory {
                                memory: item(self.memory_count),
                                module,
                                name,
                            });
                            self.memory_count += 1;
                        }
                        TypeRef::Table(_) => {
                            self.refusals.push(ImageRefusal::ImportedTable {
                                table: item(self.table_count),
                                module,
                                name,
                            });
                            self.table_count += 1;
                        }
                        TypeRef::Global(global) => {
                            if global.mutable {
                                self.refusals.push(ImageRefusal::ImportedMutableGlobal {
                                    global: item(self.global_count),
                                    module,
                                    name,
                                });
                            }
                            self.global_count += 1;
                        }
                    }
                }
            }
            Payload::TableSection(reader) => self.table_count += reader.count(),
            Payload::MemorySection(reader) => {
                for memory in reader {
                    let memory = memory.map_err(malformed)?;
                    let index = self.memory_count;
                    self.memory_count += 1;
                    let page_size = memory
                        .page_size_log2
                        .map_or(PAGE_SIZE, |log2| 1u64.checked_shl(log2).unwrap_or(0));
                    if memory.shared {
                        self.refusals.push(ImageRefusal::SharedMemory {
                            memory: item(index),
                        });
                    } else if page_size != PAGE_SIZE {
                        self.refusals.push(ImageRefusal::CustomPageSize {
                            memory: item(index),
                            page_size,
                        });
                    } else {
                        self.memories.push(MemoryLayout {
                            index,
                            export: memory_export_name(index),
                            minimum_pages: memory.initial,
                            maximum_pages: memory.maximum,
                            address_type: if memory.memory64 {
                                AddressType::I64
                            } else {
                                AddressType::I32
                            },
                        });
                    }
                }
            }
            Payload::GlobalSection(reader) => {
                for global in reader {
                    let ty = global.map_err(malformed)?.ty;
                    let index = self.global_count;
                    self.global_count += 1;
                    if ty.shared {
                        self.refusals.push(ImageRefusal::SharedGlobal {
                            global: item(index),
                        });
                        continue;
                    }
                    if !ty.mutable {
                        continue;
                    }
                    let value_type = match ty.content_type {
                        ValType::I32 => GlobalValueType::I32,
                        ValType::I64 => GlobalValueType::I64,
                        ValType::F32 => GlobalValueType::F32,
                        ValType::F64 => GlobalValueType::F64,
                        ValType::V128 => GlobalValueType::V128,
                        ValType::Ref(reference) => {
                            self.refusals.push(ImageRefusal::MutableReferenceGlobal {
                                global: item(index),
                                value_type: reference.to_string(),
                            });
                            continue;
                        }
                    };
                    self.globals.push(GlobalLayout {
                        index,
                        export: global_export_name(index),
                        value_type,
                    });
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export.map_err(malformed)?;
                    if export.name.starts_with(RESERVED_EXPORT_PREFIX) {
                        self.refusals.push(ImageRefusal::ReservedExport {
                            name: export.name.to_string(),
                        });
                    }
                }
            }
            Payload::CodeSectionEntry(body) => {
                let function = self.function_count;
                self.function_count += 1;
                // Each instruction is reported once per function, where it first appears.
                let mut seen: Vec<&'static str> = Vec::new();
                let mut operators = body.get_operators_reader().map_err(malformed)?;
                while !operators.eof() {
                    let operator = operators.read().map_err(malformed)?;
                    let Some(refusal) = refused_instruction(&operator, function) else {
                        continue;
                    };
                    let instruction = match &refusal {
                        ImageRefusal::TableMutation { instruction, .. }
                        | ImageRefusal::SegmentDrop { instruction, .. } => *instruction,
                        _ => unreachable!("refused_instruction makes only these two"),
                    };
                    if !seen.contains(&instruction) {
                        seen.push(instruction);
                        self.refusals.push(refusal);
                    }
                }
            }
            Payload::CustomSection(section) => {
                if let KnownCustom::Name(names) = section.as_known() {
                    self.names = Some(names);
                }
            }
            Payload::UnknownSection { id, range, .. } => {
                return Err(RewriteError::Malformed {
                    message: format!(
                        "unknown section id {id} at offset {} (not a section of a core module)",
                        range.start
                    ),
                });
            }
            _ => {}
        }
        Ok(())
    }
}

/// The refusal an instruction of `function` earns, if any: the instructions that change a
/// table or drop a segment.
fn refused_instruction(operator: &Operator<'_>, function: u32) -> Option<ImageRefusal> {
    let table = |instruction| ImageRefusal::TableMutation {
        function: item(function),
        instruction,
    };
    let segment = |instruction| ImageRefusal::SegmentDrop {
        function: item(function),
        instruction,
    };
    Some(match operator {
        Operator::TableSet { .. } => table("table.set"),
        Operator::TableGrow { .. } => table("table.grow"),
        Operator::TableFill { .. } => table("table.fill"),
        Operator::TableCopy { .. } => table("table.copy"),
        Operator::TableInit { .. } => table("table.init"),
        Operator::TableAtomicSet { .. } => table("table.atomic.set"),
        Operator::TableAtomicRmwXchg { .. } => table("table.atomic.rmw.xchg"),
        Operator::TableAtomicRmwCmpxchg { .. } => table("table.atomic.rmw.cmpxchg"),
        Operator::DataDrop { .. } => segment("data.drop"),
        Operator::ElemDrop { .. } => segment("elem.drop"),
        _ => return None,
    })
}

// ---------------------------------------------------------------------------------------------
// Rewrite

/// The id of the export section.
const EXPORT_SECTION: u8 = 7;

/// Where a section of `id` must come in a module, relative to the others (the binary format's
/// order: the tag section sits between memory and global, data count before code); `None` for
/// custom sections, which may come anywhere.
fn section_rank(id: u8) -> Option<u8> {
    Some(match id {
        1..=5 => id,
        13 => 6,
        6 => 7,
        7 => 8,
        8 => 9,
        9 => 10,
        12 => 11,
        10 => 12,
        11 => 13,
        _ => return None,
    })
}

/// The module in `bytes` with an export added for every memory and mutable global that
/// `analysis` lists ([`memory_export_name`], [`global_export_name`]).
///
/// Every section but the export section is copied byte for byte, in its place; the export
/// section keeps the original entries byte for byte and appends the new ones, and a module
/// without one gets one where the section order puts it. Fails if `bytes` are not the bytes
/// `analysis` was made from.
pub fn rewrite(bytes: &[u8], analysis: &ImageAnalysis) -> Result<Vec<u8>, RewriteError> {
    let layout = analysis.layout();
    let found = ModuleHash::of(bytes);
    if found != layout.module_hash {
        return Err(RewriteError::NotAnalysed {
            analysed: layout.module_hash,
            found,
        });
    }

    // Every section, and the original export section's entry count and entry bytes.
    let mut sections: Vec<(u8, Range<usize>)> = Vec::new();
    let mut original_exports: Option<(u32, Range<usize>)> = None;
    for payload in Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(malformed)?;
        if let Payload::ExportSection(reader) = &payload {
            let section = reader.range();
            let entries_start = match reader.clone().into_iter_with_offsets().next() {
                Some(first) => first.map_err(malformed)?.0,
                None => section.end,
            };
            original_exports = Some((reader.count(), entries_start..section.end));
        }
        if let Some(section) = payload.as_section() {
            sections.push(section);
        }
    }

    let added = layout.memories.len() + layout.globals.len();
    let has_export_section = original_exports.is_some();
    let (original_count, original_entries) = original_exports.unwrap_or((0, 0..0));
    let count = u32::try_from(added)
        .ok()
        .and_then(|added| original_count.checked_add(added))
        .ok_or_else(|| RewriteError::Malformed {
            message: "the module has too many exports to add the image exports".into(),
        })?;
    let mut exports = Vec::new();
    count.encode(&mut exports);
    exports.extend_from_slice(&bytes[original_entries]);
    let added_exports = layout
        .memories
        .iter()
        .map(|m| (m.export.as_str(), ExportKind::Memory, m.index))
        .chain(
            layout
                .globals
                .iter()
                .map(|g| (g.export.as_str(), ExportKind::Global, g.index)),
        );
    for (name, kind, index) in added_exports {
        name.encode(&mut exports);
        kind.encode(&mut exports);
        index.encode(&mut exports);
    }
    let export_section = RawSection {
        id: EXPORT_SECTION,
        data: &exports,
    };

    // Without an export section, the new one goes before the first section that must follow
    // it, or after the last non-custom section.
    let insert_at = if has_export_section {
        None
    } else {
        let export_rank = section_rank(EXPORT_SECTION);
        let after = |(id, _): &(u8, Range<usize>)| section_rank(*id) > export_rank;
        Some(sections.iter().position(after).unwrap_or_else(|| {
            sections
                .iter()
                .rposition(|(id, _)| section_rank(*id).is_some())
                .map_or(0, |last| last + 1)
        }))
    };

    let mut module = wasm_encoder::Module::new();
    for (i, (id, range)) in sections.iter().enumerate() {
        if insert_at == Some(i) {
            module.section(&export_section);
        }
        if *id == EXPORT_SECTION {
            module.section(&export_section);
        } else {
            module.section(&RawSection {
                id: *id,
                data: &bytes[range.clone()],
            });
        }
    }
    if insert_at == Some(sections.len()) {
        module.section(&export_section);
    }
    Ok(module.finish())
}
