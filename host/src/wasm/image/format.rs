//! The byte format of an image: a wasm instance's linear memories and mutable globals as the
//! host copies them out between two calls, so that an operator without snapshot exports can be
//! checkpointed (issue 8; `docs/CHECKPOINTS.md`, "Image state").
//!
//! # Why this module exists
//!
//! An image is only worth storing if a restore can tell that it is whole, that it belongs to
//! the module it is restored into, and — for incremental images (`super::delta`) — that a
//! chain of deltas rebuilt exactly the memory that was snapshotted. This module owns the
//! in-memory types ([`Image`], [`ImageRef`], [`PageTable`], [`CheckpointImage`]), the full
//! image's encoding and its verifying decoder, and the header both kinds of image share. It
//! knows nothing of wasmtime: the integration fills an [`ImageRef`] from `Memory::data` and
//! `Global::get` and hands it to [`encode_full`], which writes into a buffer the caller
//! reuses, so a snapshot is **one copy** out of the guest (each 64 KiB page is hashed right
//! after it is copied, while it is in cache). A restore from a full image can write the
//! guest's memory straight from the file's bytes ([`decode_full`] borrows them).
//!
//! # Byte layout (format version 1, all integers little-endian)
//!
//! ```text
//! offset  size     field
//! 0       8        magic "WEIRIMAG"
//! 8       4        format version, u32 (this build writes and reads 1)
//! 12      4        kind, u32: 1 = full image, 2 = delta
//! 16      8        header length H, u64: bytes 0 .. H, the header checksum included
//! 24      16       module hash, u128: xxh3-128 of the original module's bytes
//! 40      4        rewrite version, u32: of the load-time rewrite that exported the globals
//! 44      8        checkpoint id of this image, u64
//! 52      8        base: id of the full image the chain starts at (a full image: its own id)
//! 60      4        chain length, u32: 0 for a full image, the parent's + 1 for a delta
//! 64      8        parent checkpoint id, u64 (0 for a full image)
//! 72      8        parent digest, u64: content_digest of the parent (0 for a full image)
//! 80      4        memory count M, u32
//! 84      4        global count G, u32
//! 88      M × 12   memories, ascending index: index u32, byte length u64 (whole 64 KiB pages)
//! …       G × 24   globals, ascending index: index u32, type u32 (wasm's value type code:
//!                  0x7f i32, 0x7e i64, 0x7d f32, 0x7c f64, 0x7b v128), value u128 (the raw
//!                  bits, zero-extended; the bits above the type's width must be zero)
//! …       P × 8    page table: xxh3-64 of every 64 KiB page, memory by memory, page by page
//! …                a delta only — the stored pages, memory by memory: a count u32, then per
//!                  stored page: page number u32, stored length u32 (see `super::delta`)
//! H − 8   8        header checksum: xxh3-64 of bytes 0 .. H − 8
//! H       …        body. Full image: every memory's bytes, in memory order (Σ byte lengths).
//!                  Delta: the stored pages, then an xxh3-64 of the body before it
//! ```
//!
//! # What is verified where
//!
//! Every byte of an image is covered by exactly one check, and the checks are cheap enough to
//! run on every restore:
//!
//! - the header — identity, chain, layout, page table, a delta's page list — by the header
//!   checksum, verified before any field past the header length is trusted;
//! - a full image's memory bytes by the page table: every page is hashed and compared on
//!   decoding, so a flipped bit names its memory and page (one pass, ~4 ms per 100 MB);
//! - a delta's body by its trailing checksum, and the memory it rebuilds by the page table
//!   again (`super::delta::apply`).
//!
//! The state file around the image (`checkpoint::format`, CRC-32) already tells that a file is
//! the one that was written. The image's own checks add what the frame cannot know: that the
//! image is for this module ([`ImageHeader::check_module`]), that a delta is applied to its
//! own parent, and that the memory rebuilt from a chain is, page for page, the memory that was
//! snapshotted — end to end, through the encoder, the storage and the decoder. Decoding never
//! panics, whatever the bytes.

use std::fmt;
use std::sync::OnceLock;

use thiserror::Error;
use weir_abi::wire;
use xxhash_rust::xxh3::{Xxh3Default, xxh3_64};

pub use super::memcopy::{PAGE_SIZE, page_hash};
use super::memcopy::{copy_hashing, hash_pages, to_owned_memory};

use crate::ids::CheckpointId;

/// The first eight bytes of every image.
pub const IMAGE_MAGIC: [u8; 8] = *b"WEIRIMAG";

/// The image format version this build writes, and the only one it reads.
pub const IMAGE_FORMAT_VERSION: u32 = 1;

/// Bytes of the header before the memory entries.
pub const FIXED_HEADER_LEN: usize = 88;

/// Bytes of the header checksum at the end of the header (and of a delta's body checksum).
pub const CHECKSUM_LEN: usize = 8;

const MEMORY_ENTRY_LEN: usize = 12;
const GLOBAL_ENTRY_LEN: usize = 24;
const PAGE_HASH_LEN: usize = 8;
const STORED_COUNT_LEN: usize = 4;
const STORED_ENTRY_LEN: usize = 8;

/// Whether an image holds every page or only the pages changed since its parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ImageKind {
    /// Every memory's bytes: restorable on its own, the start of a chain.
    Full,
    /// The pages changed since the parent image, XOR-ed against it and compressed.
    Delta,
}

impl ImageKind {
    fn code(self) -> u32 {
        match self {
            ImageKind::Full => 1,
            ImageKind::Delta => 2,
        }
    }

    fn from_code(code: u32) -> Option<ImageKind> {
        match code {
            1 => Some(ImageKind::Full),
            2 => Some(ImageKind::Delta),
            _ => None,
        }
    }
}

impl fmt::Display for ImageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ImageKind::Full => "full image",
            ImageKind::Delta => "delta",
        })
    }
}

/// The value type of a mutable global. Reference-typed globals cannot be imaged (the module
/// rewrite refuses them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GlobalType {
    /// `i32`.
    I32,
    /// `i64`.
    I64,
    /// `f32`.
    F32,
    /// `f64`.
    F64,
    /// `v128`.
    V128,
}

impl GlobalType {
    /// The type's code in the wasm binary format, which the image stores.
    pub fn code(self) -> u32 {
        match self {
            GlobalType::I32 => 0x7f,
            GlobalType::I64 => 0x7e,
            GlobalType::F32 => 0x7d,
            GlobalType::F64 => 0x7c,
            GlobalType::V128 => 0x7b,
        }
    }

    /// The type of a wasm binary value type code, if it is one a global of an image can have.
    pub fn from_code(code: u32) -> Option<GlobalType> {
        match code {
            0x7f => Some(GlobalType::I32),
            0x7e => Some(GlobalType::I64),
            0x7d => Some(GlobalType::F32),
            0x7c => Some(GlobalType::F64),
            0x7b => Some(GlobalType::V128),
            _ => None,
        }
    }

    fn bits(self) -> u32 {
        match self {
            GlobalType::I32 | GlobalType::F32 => 32,
            GlobalType::I64 | GlobalType::F64 => 64,
            GlobalType::V128 => 128,
        }
    }
}

impl fmt::Display for GlobalType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GlobalType::I32 => "i32",
            GlobalType::I64 => "i64",
            GlobalType::F32 => "f32",
            GlobalType::F64 => "f64",
            GlobalType::V128 => "v128",
        })
    }
}

/// A global's value as raw bits, so that floats (NaN payloads included) round-trip exactly.
/// wasmtime's `Val::F32`/`Val::F64` already hold bits; an `i32` is stored as `u32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GlobalBits {
    /// An `i32`, as its two's-complement bits.
    I32(u32),
    /// An `i64`, as its two's-complement bits.
    I64(u64),
    /// An `f32`, as `f32::to_bits`.
    F32(u32),
    /// An `f64`, as `f64::to_bits`.
    F64(u64),
    /// A `v128`, as its 128 bits.
    V128(u128),
}

impl GlobalBits {
    /// The value's type.
    pub fn ty(self) -> GlobalType {
        match self {
            GlobalBits::I32(_) => GlobalType::I32,
            GlobalBits::I64(_) => GlobalType::I64,
            GlobalBits::F32(_) => GlobalType::F32,
            GlobalBits::F64(_) => GlobalType::F64,
            GlobalBits::V128(_) => GlobalType::V128,
        }
    }

    /// The bits, zero-extended to 128.
    pub fn raw(self) -> u128 {
        match self {
            GlobalBits::I32(v) | GlobalBits::F32(v) => u128::from(v),
            GlobalBits::I64(v) | GlobalBits::F64(v) => u128::from(v),
            GlobalBits::V128(v) => v,
        }
    }

    /// The value of type `ty` with bits `raw`; `None` if `raw` has bits set above the type's
    /// width (which an encoder never writes).
    pub fn from_raw(ty: GlobalType, raw: u128) -> Option<GlobalBits> {
        if ty.bits() < 128 && raw >> ty.bits() != 0 {
            return None;
        }
        // The shift above proved that the narrowing casts below lose nothing.
        Some(match ty {
            GlobalType::I32 => GlobalBits::I32(raw as u32),
            GlobalType::I64 => GlobalBits::I64(raw as u64),
            GlobalType::F32 => GlobalBits::F32(raw as u32),
            GlobalType::F64 => GlobalBits::F64(raw as u64),
            GlobalType::V128 => GlobalBits::V128(raw),
        })
    }
}

/// The value of one mutable global of the instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GlobalValue {
    /// The global's index in the original module's global index space.
    pub index: u32,
    /// Its value.
    pub value: GlobalBits,
}

/// What an image must have been taken from to be restored into a module: the hash of the
/// module's original bytes and the version of the load-time rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ModuleIdentity {
    /// xxh3-128 of the original module bytes.
    pub module_hash: u128,
    /// The rewrite format version (`REWRITE_VERSION` of the module rewrite).
    pub rewrite_version: u32,
}

impl ModuleIdentity {
    /// Checks that an image taken from `image` can be restored into this module.
    pub fn accepts(&self, image: ModuleIdentity) -> Result<(), ImageError> {
        if image.module_hash != self.module_hash {
            return Err(ImageError::ModuleMismatch {
                image: image.module_hash,
                module: self.module_hash,
            });
        }
        if image.rewrite_version != self.rewrite_version {
            return Err(ImageError::RewriteVersionMismatch {
                image: image.rewrite_version,
                module: self.rewrite_version,
            });
        }
        Ok(())
    }
}

/// One linear memory of an owned image.
#[derive(Clone, PartialEq, Eq)]
pub struct MemoryImage {
    /// The memory's index in the original module's memory index space.
    pub index: u32,
    /// The whole linear memory: a whole number of 64 KiB pages.
    pub bytes: Vec<u8>,
}

/// One linear memory of a borrowed image: a slice of the guest's memory when snapshotting, or
/// of a full image's bytes when restoring.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct MemoryRef<'a> {
    /// The memory's index in the original module's memory index space.
    pub index: u32,
    /// The whole linear memory: a whole number of 64 KiB pages.
    pub bytes: &'a [u8],
}

impl fmt::Debug for MemoryImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_memory(f, "MemoryImage", self.index, &self.bytes)
    }
}

impl fmt::Debug for MemoryRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        debug_memory(f, "MemoryRef", self.index, self.bytes)
    }
}

/// Memories are megabytes: their debug form is their size and hash, not their bytes.
fn debug_memory(f: &mut fmt::Formatter<'_>, name: &str, index: u32, bytes: &[u8]) -> fmt::Result {
    f.debug_struct(name)
        .field("index", &index)
        .field(
            "bytes",
            &format_args!("{} bytes, xxh3 {:#018x}", bytes.len(), xxh3_64(bytes)),
        )
        .finish()
}

/// A wasm instance's whole state, owned: what a chain of images rebuilds on restore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// xxh3-128 of the original module's bytes.
    pub module_hash: u128,
    /// The version of the load-time rewrite that exported the module's globals and memories.
    pub rewrite_version: u32,
    /// Every memory the module defines, in ascending index order.
    pub memories: Vec<MemoryImage>,
    /// Every mutable global the module defines, in ascending index order.
    pub globals: Vec<GlobalValue>,
}

impl Image {
    /// The module this image was taken from.
    pub fn identity(&self) -> ModuleIdentity {
        ModuleIdentity {
            module_hash: self.module_hash,
            rewrite_version: self.rewrite_version,
        }
    }

    /// A borrowed view, to encode this image or compare it.
    pub fn as_image_ref(&self) -> ImageRef<'_> {
        ImageRef {
            module_hash: self.module_hash,
            rewrite_version: self.rewrite_version,
            memories: self
                .memories
                .iter()
                .map(|m| MemoryRef {
                    index: m.index,
                    bytes: &m.bytes,
                })
                .collect(),
            globals: &self.globals,
        }
    }
}

/// A wasm instance's whole state, borrowed: what the integration builds from the live
/// instance (memory slices from `Memory::data`, globals read first with `Global::get`) to
/// encode it without copying it first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef<'a> {
    /// xxh3-128 of the original module's bytes.
    pub module_hash: u128,
    /// The version of the load-time rewrite that exported the module's globals and memories.
    pub rewrite_version: u32,
    /// Every memory the module defines, in ascending index order.
    pub memories: Vec<MemoryRef<'a>>,
    /// Every mutable global the module defines, in ascending index order.
    pub globals: &'a [GlobalValue],
}

impl ImageRef<'_> {
    /// The module this image is taken from.
    pub fn identity(&self) -> ModuleIdentity {
        ModuleIdentity {
            module_hash: self.module_hash,
            rewrite_version: self.rewrite_version,
        }
    }

    /// An owned copy.
    pub fn to_image(&self) -> Image {
        Image {
            module_hash: self.module_hash,
            rewrite_version: self.rewrite_version,
            memories: self
                .memories
                .iter()
                .map(|m| MemoryImage {
                    index: m.index,
                    bytes: to_owned_memory(m.bytes),
                })
                .collect(),
            globals: self.globals.to_vec(),
        }
    }

    /// Checks what the encoders rely on: memories and globals in strictly ascending index
    /// order, every memory a whole number of pages.
    pub fn validate(&self) -> Result<(), ImageError> {
        for pair in self.memories.windows(2) {
            if pair[0].index >= pair[1].index {
                return Err(ImageError::OutOfOrder {
                    what: "memories",
                    previous: pair[0].index,
                    next: pair[1].index,
                });
            }
        }
        for pair in self.globals.windows(2) {
            if pair[0].index >= pair[1].index {
                return Err(ImageError::OutOfOrder {
                    what: "globals",
                    previous: pair[0].index,
                    next: pair[1].index,
                });
            }
        }
        for m in &self.memories {
            if m.bytes.len() % PAGE_SIZE != 0 {
                return Err(ImageError::NotWholePages {
                    memory: m.index,
                    len: m.bytes.len() as u64,
                });
            }
        }
        Ok(())
    }
}

/// The page hashes of one memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPages {
    /// The memory's index.
    pub index: u32,
    /// xxh3-64 of each 64 KiB page, in page order; the memory is `hashes.len()` pages long.
    pub hashes: Vec<u64>,
}

impl MemoryPages {
    /// The memory's length in bytes.
    pub fn byte_len(&self) -> u64 {
        self.hashes.len() as u64 * PAGE_SIZE as u64
    }
}

/// The xxh3-64 of every page of every memory of an image. Every image carries the table of
/// the memory it holds, so the next delta is computed against it without decoding anything,
/// and a restore checks every page it rebuilt against it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PageTable {
    /// One entry per memory, in ascending index order.
    pub memories: Vec<MemoryPages>,
}

impl PageTable {
    /// Hashes every page of `image` (which must [validate](ImageRef::validate)), a large
    /// memory on every core.
    pub fn of(image: &ImageRef<'_>) -> Result<PageTable, ImageError> {
        image.validate()?;
        Ok(PageTable {
            memories: image
                .memories
                .iter()
                .map(|m| {
                    let mut hashes = vec![0; m.bytes.len() / PAGE_SIZE];
                    hash_pages(m.bytes, &mut hashes);
                    MemoryPages {
                        index: m.index,
                        hashes,
                    }
                })
                .collect(),
        })
    }

    /// Pages in all memories.
    pub fn page_count(&self) -> usize {
        self.memories.iter().map(|m| m.hashes.len()).sum()
    }
}

/// Checks that page `page` of memory `memory`, `bytes`, hashes to `recorded`, its page-table
/// entry.
pub(crate) fn check_page(
    memory: u32,
    page: usize,
    bytes: &[u8],
    recorded: u64,
) -> Result<(), ImageError> {
    let computed = page_hash(bytes);
    if computed != recorded {
        return Err(ImageError::PageHashMismatch {
            memory,
            page: page as u64,
            recorded,
            computed,
        });
    }
    Ok(())
}

/// The hash of a page of zeros: what a page a memory grew by holds until it is written.
pub fn zero_page_hash() -> u64 {
    static HASH: OnceLock<u64> = OnceLock::new();
    *HASH.get_or_init(|| page_hash(&[0; PAGE_SIZE]))
}

/// A digest of an image's contents — its page table and its globals — that a delta records
/// of its parent, so a delta applied to another image that happens to carry the same
/// checkpoint id (another task's, another job's) is refused before any page is touched.
pub fn content_digest(pages: &PageTable, globals: &[GlobalValue]) -> u64 {
    let mut h = Xxh3Default::new();
    h.update(&(pages.memories.len() as u64).to_le_bytes());
    for m in &pages.memories {
        h.update(&m.index.to_le_bytes());
        h.update(&(m.hashes.len() as u64).to_le_bytes());
        for hash in &m.hashes {
            h.update(&hash.to_le_bytes());
        }
    }
    h.update(&(globals.len() as u64).to_le_bytes());
    for g in globals {
        h.update(&g.index.to_le_bytes());
        h.update(&g.value.ty().code().to_le_bytes());
        h.update(&g.value.raw().to_le_bytes());
    }
    h.digest()
}

/// A delta's reference to the image it was computed against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ParentLink {
    /// The parent's checkpoint id.
    pub checkpoint: CheckpointId,
    /// [`content_digest`] of the parent.
    pub digest: u64,
}

/// One page a delta stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StoredPage {
    /// The page's number in its memory.
    pub page: u32,
    /// Its length in the body: the LZ4 block of the page XOR-ed against the parent's, or
    /// exactly [`PAGE_SIZE`] when the XOR is stored raw because it did not compress.
    pub stored_len: u32,
}

/// The verified header of an image of either kind: who it belongs to, where it sits in its
/// chain, its layout and its page table. [`read_header`] reads it without touching the body,
/// so a restore can walk a chain back to its full image from headers alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageHeader {
    /// Full image or delta.
    pub kind: ImageKind,
    /// xxh3-128 of the original module's bytes.
    pub module_hash: u128,
    /// The version of the load-time rewrite.
    pub rewrite_version: u32,
    /// The checkpoint this image was taken at.
    pub checkpoint: CheckpointId,
    /// The full image the chain starts at (a full image's own id).
    pub base: CheckpointId,
    /// Deltas between the base and this image, this one included (0 for a full image).
    pub chain_length: u32,
    /// The image a delta applies to; `None` for a full image.
    pub parent: Option<ParentLink>,
    /// Every mutable global's value (a delta stores them whole too).
    pub globals: Vec<GlobalValue>,
    /// The page table of the memory this image holds (or rebuilds), which also gives every
    /// memory's index and length.
    pub pages: PageTable,
    /// A delta's stored pages, one list per memory in ascending page order; empty lists for a
    /// full image.
    pub stored: Vec<Vec<StoredPage>>,
    /// The header's length in bytes, its checksum included: where the body starts.
    pub header_len: usize,
}

impl ImageHeader {
    /// Refuses a header of another kind than `expected`.
    pub(crate) fn expect_kind(&self, expected: ImageKind) -> Result<(), ImageError> {
        if self.kind == expected {
            Ok(())
        } else {
            Err(ImageError::WrongKind {
                expected,
                found: self.kind,
            })
        }
    }

    /// The module the image was taken from.
    pub fn identity(&self) -> ModuleIdentity {
        ModuleIdentity {
            module_hash: self.module_hash,
            rewrite_version: self.rewrite_version,
        }
    }

    /// Checks that this image can be restored into `module`: the error names both module
    /// hashes (or both rewrite versions) and says what to do.
    pub fn check_module(&self, module: &ModuleIdentity) -> Result<(), ImageError> {
        module.accepts(self.identity())
    }

    /// The length of the whole image this header announces.
    pub fn encoded_len(&self) -> u64 {
        let body = match self.kind {
            ImageKind::Full => self.pages.memories.iter().map(MemoryPages::byte_len).sum(),
            ImageKind::Delta => {
                let stored: u64 = self
                    .stored
                    .iter()
                    .flatten()
                    .map(|s| u64::from(s.stored_len))
                    .sum();
                stored + CHECKSUM_LEN as u64
            }
        };
        self.header_len as u64 + body
    }
}

/// A verified full image, borrowing the memory bytes from the encoded image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FullImage<'a> {
    /// The header: identity, globals and page table.
    pub header: ImageHeader,
    /// Every memory, a slice of the encoded image, each page checked against the page table.
    pub memories: Vec<MemoryRef<'a>>,
}

impl FullImage<'_> {
    /// The image, borrowed: what a restore writes into a fresh instance.
    pub fn image_ref(&self) -> ImageRef<'_> {
        ImageRef {
            module_hash: self.header.module_hash,
            rewrite_version: self.header.rewrite_version,
            memories: self.memories.clone(),
            globals: &self.header.globals,
        }
    }

    /// An owned copy, placed at the start of its chain: what deltas are applied to.
    pub fn to_checkpoint_image(&self) -> CheckpointImage {
        CheckpointImage {
            checkpoint: self.header.checkpoint,
            base: self.header.base,
            chain_length: 0,
            image: self.image_ref().to_image(),
            pages: self.header.pages.clone(),
        }
    }
}

/// Decodes a full image like [`decode_full_unchecked`] and turns `bytes` itself into the owned
/// image, placed at the start of its chain: a memory keeps the buffer it was read into (the
/// header is shifted out, no new buffer is allocated and faulted in) — what a restore that
/// keeps the image as the baseline of the next delta starts from. A second memory, which the
/// ABI does not allow, is copied.
pub fn into_checkpoint_image(mut bytes: Vec<u8>) -> Result<CheckpointImage, ImageError> {
    let header = decode_full_unchecked(&bytes)?.header;
    // Where each memory lies in `bytes`: one after the other after the header.
    let mut at = header.header_len;
    let ranges: Vec<(u32, usize, usize)> = header
        .pages
        .memories
        .iter()
        .map(|m| {
            let len = m.hashes.len() * PAGE_SIZE;
            at += len;
            (m.index, at - len, len)
        })
        .collect();
    let mut owned = Vec::with_capacity(ranges.len());
    for &(index, start, len) in ranges.iter().skip(1) {
        owned.push(MemoryImage {
            index,
            bytes: to_owned_memory(&bytes[start..start + len]),
        });
    }
    if let Some(&(index, start, len)) = ranges.first() {
        bytes.truncate(start + len);
        bytes.drain(..start);
        owned.insert(0, MemoryImage { index, bytes });
    }
    Ok(CheckpointImage {
        checkpoint: header.checkpoint,
        base: header.base,
        chain_length: 0,
        image: Image {
            module_hash: header.module_hash,
            rewrite_version: header.rewrite_version,
            memories: owned,
            globals: header.globals,
        },
        pages: header.pages,
    })
}

/// An image as of one checkpoint, with its place in a chain and its page table: what a
/// restore rebuilds (`super::delta::reconstruct`) and what the next delta is computed
/// against (`super::delta::Baseline` keeps one between checkpoints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointImage {
    /// The checkpoint the image was taken at.
    pub checkpoint: CheckpointId,
    /// The full image its chain starts at.
    pub base: CheckpointId,
    /// Deltas between the base and this image (0: this is the full image).
    pub chain_length: u32,
    /// The memories and globals.
    pub image: Image,
    /// The page table of `image`'s memories.
    pub pages: PageTable,
}

impl CheckpointImage {
    /// [`content_digest`] of this image, which a delta against it records.
    pub fn digest(&self) -> u64 {
        content_digest(&self.pages, &self.image.globals)
    }

    /// Checks that this image can be restored into `module`.
    pub fn check_module(&self, module: &ModuleIdentity) -> Result<(), ImageError> {
        module.accepts(self.image.identity())
    }
}

/// Everything that can be wrong with an image, its encoding or a chain of them. The messages
/// name the memory, page, checkpoint or hash concerned; the integration adds the file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ImageError {
    /// The bytes do not start with [`IMAGE_MAGIC`]: another kind of state, or garbage.
    #[error("not an image: expected magic {}, found {}", show_bytes(&IMAGE_MAGIC), show_bytes(found))]
    NotAnImage {
        /// The first bytes (fewer than 8 if there are fewer).
        found: Vec<u8>,
    },
    /// The image was written by a build with another image format.
    #[error(
        "image format version {found} is not supported (this build reads {supported}): restore it with the weir build that wrote it, or start without restoring"
    )]
    UnsupportedVersion {
        /// The version in the image.
        found: u32,
        /// [`IMAGE_FORMAT_VERSION`].
        supported: u32,
    },
    /// The image is shorter than its header says (or than a header can be).
    #[error("truncated image: expected {expected} bytes, found {found}")]
    Truncated {
        /// How long the image should be.
        expected: u64,
        /// How long it is.
        found: u64,
    },
    /// The image is longer than its header says.
    #[error("image has trailing bytes: expected {expected} bytes, found {found}")]
    TrailingBytes {
        /// How long the image should be.
        expected: u64,
        /// How long it is.
        found: u64,
    },
    /// The header length field is smaller than any header: the image is damaged.
    #[error(
        "damaged image header: its length field says {found} bytes, less than the {minimum} of any header"
    )]
    BadHeaderLength {
        /// The header length the image records.
        found: u64,
        /// The length of a header without memories or globals.
        minimum: u64,
    },
    /// The header checksum is not that of the header: the image is damaged.
    #[error("image header checksum mismatch: stored {stored:#018x}, computed {computed:#018x}")]
    HeaderChecksum {
        /// The checksum in the image.
        stored: u64,
        /// The checksum of the bytes read.
        computed: u64,
    },
    /// A delta's body checksum is not that of its body: the delta is damaged.
    #[error("delta body checksum mismatch: stored {stored:#018x}, computed {computed:#018x}")]
    BodyChecksum {
        /// The checksum in the delta.
        stored: u64,
        /// The checksum of the bytes read.
        computed: u64,
    },
    /// The header's checksum holds but its contents are inconsistent: the encoder that wrote
    /// it has a bug, or the image was crafted.
    #[error("invalid image header: {problem}")]
    InvalidHeader {
        /// What is inconsistent.
        problem: String,
    },
    /// A full image was expected and a delta found, or the other way round.
    #[error("expected a {expected}, found a {found}")]
    WrongKind {
        /// The kind the caller needed.
        expected: ImageKind,
        /// The kind of the image.
        found: ImageKind,
    },
    /// A page's bytes do not hash to the page table's entry: the memory is damaged (or, after
    /// applying a delta, the chain rebuilt something else than what was snapshotted).
    #[error(
        "page {page} of memory {memory} does not match the page table: recorded hash {recorded:#018x}, computed {computed:#018x}"
    )]
    PageHashMismatch {
        /// The memory's index.
        memory: u32,
        /// The page's number in the memory.
        page: u64,
        /// The hash in the page table.
        recorded: u64,
        /// The hash of the bytes rebuilt or read.
        computed: u64,
    },
    /// The image belongs to another module than the one it is restored into.
    #[error(
        "image was taken from module hash {image:032x} but this module is {module:032x}: restore it with the module it was taken from, or start without restoring"
    )]
    ModuleMismatch {
        /// The module hash in the image.
        image: u128,
        /// The hash of the module being restored.
        module: u128,
    },
    /// The image was taken through another version of the load-time rewrite.
    #[error(
        "image was taken with module rewrite version {image} but this build rewrites modules with version {module}: restore it with the weir build that took it, or start without restoring"
    )]
    RewriteVersionMismatch {
        /// The rewrite version in the image.
        image: u32,
        /// This build's rewrite version.
        module: u32,
    },
    /// A memory handed to an encoder is not a whole number of 64 KiB pages.
    #[error("memory {memory} is {len} bytes, not a whole number of 64 KiB pages")]
    NotWholePages {
        /// The memory's index.
        memory: u32,
        /// Its length.
        len: u64,
    },
    /// Memories or globals handed to an encoder are not in strictly ascending index order.
    #[error(
        "{what} must be given in strictly ascending index order, found {previous} before {next}"
    )]
    OutOfOrder {
        /// `"memories"` or `"globals"`.
        what: &'static str,
        /// The index before.
        previous: u32,
        /// The index after it.
        next: u32,
    },
    /// A delta was asked for at a checkpoint that does not come after its parent's.
    #[error(
        "a delta of checkpoint {checkpoint} cannot have checkpoint {parent} as its parent: checkpoint ids only grow"
    )]
    NotAfterParent {
        /// The checkpoint the delta was asked for.
        checkpoint: CheckpointId,
        /// The parent's checkpoint.
        parent: CheckpointId,
    },
    /// A delta was applied to another checkpoint's image than its parent.
    #[error(
        "the delta of checkpoint {delta} applies to the image of checkpoint {parent}, not to that of checkpoint {found}: apply a chain in order, from its full image"
    )]
    ParentMismatch {
        /// The delta's checkpoint.
        delta: CheckpointId,
        /// The parent it names.
        parent: CheckpointId,
        /// The checkpoint of the image it was applied to.
        found: CheckpointId,
    },
    /// A delta was applied to an image with its parent's id but other contents.
    #[error(
        "the delta of checkpoint {delta} was computed against other contents than this image of checkpoint {parent} (parent digest recorded {recorded:#018x}, found {found:#018x}): the chain mixes images of different tasks or jobs"
    )]
    ParentContentMismatch {
        /// The delta's checkpoint.
        delta: CheckpointId,
        /// The parent's checkpoint.
        parent: CheckpointId,
        /// The digest the delta records.
        recorded: u64,
        /// The digest of the image it was applied to.
        found: u64,
    },
    /// A delta's chain position does not follow from its parent's.
    #[error(
        "the delta of checkpoint {delta} says its chain starts at checkpoint {base} with {length} images after it, but its parent's chain starts at checkpoint {parent_base} with {parent_length}"
    )]
    ChainMismatch {
        /// The delta's checkpoint.
        delta: CheckpointId,
        /// The base the delta names.
        base: CheckpointId,
        /// The chain length the delta records.
        length: u32,
        /// The parent's base.
        parent_base: CheckpointId,
        /// The parent's chain length.
        parent_length: u32,
    },
    /// A delta and its parent come from different modules (or rewrite versions).
    #[error(
        "the delta of checkpoint {delta} was taken from module hash {delta_hash:032x} (rewrite version {delta_rewrite}) but its parent from {parent_hash:032x} (rewrite version {parent_rewrite})"
    )]
    ChainModuleMismatch {
        /// The delta's checkpoint.
        delta: CheckpointId,
        /// The delta's module hash.
        delta_hash: u128,
        /// The delta's rewrite version.
        delta_rewrite: u32,
        /// The parent's module hash.
        parent_hash: u128,
        /// The parent's rewrite version.
        parent_rewrite: u32,
    },
    /// A delta's memory is smaller than its parent's: wasm memory never shrinks, so the delta
    /// is corrupt.
    #[error(
        "corrupt delta of checkpoint {delta}: memory {memory} shrinks from {parent_len} to {len} bytes, which wasm memory never does"
    )]
    MemoryShrunk {
        /// The delta's checkpoint.
        delta: CheckpointId,
        /// The memory's index.
        memory: u32,
        /// Its length in the parent.
        parent_len: u64,
        /// Its length in the delta.
        len: u64,
    },
    /// A delta's memories or globals are not those of its parent (a module defines the same
    /// memories and mutable globals, of the same types, at every checkpoint).
    #[error("the delta of checkpoint {delta} does not have its parent's layout: {problem}")]
    LayoutChanged {
        /// The delta's checkpoint.
        delta: CheckpointId,
        /// What differs.
        problem: String,
    },
    /// A delta does not store a page, so it must be the parent's, yet its recorded hash
    /// differs from the parent's.
    #[error(
        "corrupt delta of checkpoint {delta}: page {page} of memory {memory} is not stored, yet its recorded hash {recorded:#018x} differs from the parent's {parent:#018x}"
    )]
    UnstoredPageChanged {
        /// The delta's checkpoint.
        delta: CheckpointId,
        /// The memory's index.
        memory: u32,
        /// The page's number.
        page: u64,
        /// The hash the delta records.
        recorded: u64,
        /// The parent's hash of that page (a zero page's beyond the parent's length).
        parent: u64,
    },
    /// A stored page of a delta does not decompress to exactly one page.
    #[error(
        "corrupt delta of checkpoint {delta}: page {page} of memory {memory} does not decompress: {problem}"
    )]
    Decompress {
        /// The delta's checkpoint.
        delta: CheckpointId,
        /// The memory's index.
        memory: u32,
        /// The page's number.
        page: u64,
        /// What LZ4 reported.
        problem: String,
    },
    /// One image of a chain failed to verify; position 0 is the full image, 1 the first delta.
    #[error("{}: {source}", chain_position(*position))]
    InChain {
        /// The image's position in the chain.
        position: usize,
        /// What is wrong with it.
        source: Box<ImageError>,
    },
}

fn chain_position(position: usize) -> String {
    match position {
        0 => "full image of the chain".to_owned(),
        n => format!("delta {n} of the chain"),
    }
}

/// Bytes shown as an ASCII string when they are printable, else as hex.
fn show_bytes(bytes: &[u8]) -> String {
    if bytes.iter().all(|b| b.is_ascii_graphic() || *b == b' ') {
        format!("{:?}", String::from_utf8_lossy(bytes))
    } else {
        let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("0x{}", hex.join(""))
    }
}

fn invalid(problem: impl Into<String>) -> ImageError {
    ImageError::InvalidHeader {
        problem: problem.into(),
    }
}

/// The fields of a header, as an encoder knows them before it writes the body.
pub(crate) struct HeaderFields<'a> {
    pub(crate) kind: ImageKind,
    pub(crate) identity: ModuleIdentity,
    pub(crate) checkpoint: CheckpointId,
    pub(crate) base: CheckpointId,
    pub(crate) chain_length: u32,
    pub(crate) parent: Option<ParentLink>,
    /// `(index, pages)` of every memory.
    pub(crate) memories: &'a [(u32, usize)],
    pub(crate) globals: &'a [GlobalValue],
    /// A delta's number of stored pages per memory.
    pub(crate) stored_counts: &'a [usize],
}

/// Where an encoder patches what it learns while writing the body.
pub(crate) struct HeaderSlots {
    /// Offset of the first page hash.
    pub(crate) table_at: usize,
    /// Offset of the first stored-page list (a delta's).
    pub(crate) stored_at: usize,
    /// The header length: where the body starts.
    pub(crate) header_len: usize,
}

impl HeaderFields<'_> {
    fn header_len(&self) -> usize {
        let pages: usize = self.memories.iter().map(|(_, pages)| pages).sum();
        let stored = match self.kind {
            ImageKind::Full => 0,
            ImageKind::Delta => {
                self.memories.len() * STORED_COUNT_LEN
                    + self.stored_counts.iter().sum::<usize>() * STORED_ENTRY_LEN
            }
        };
        FIXED_HEADER_LEN
            + self.memories.len() * MEMORY_ENTRY_LEN
            + self.globals.len() * GLOBAL_ENTRY_LEN
            + pages * PAGE_HASH_LEN
            + stored
            + CHECKSUM_LEN
    }

    /// Clears `out` and writes the header with a zeroed page table, zeroed stored-page
    /// entries (their counts filled in) and a zeroed checksum.
    pub(crate) fn write(&self, out: &mut Vec<u8>) -> HeaderSlots {
        let header_len = self.header_len();
        out.clear();
        out.extend_from_slice(&IMAGE_MAGIC);
        put_u32(out, IMAGE_FORMAT_VERSION);
        put_u32(out, self.kind.code());
        put_u64(out, header_len as u64);
        out.extend_from_slice(&self.identity.module_hash.to_le_bytes());
        put_u32(out, self.identity.rewrite_version);
        put_u64(out, self.checkpoint.0);
        put_u64(out, self.base.0);
        put_u32(out, self.chain_length);
        put_u64(out, self.parent.map_or(0, |p| p.checkpoint.0));
        put_u64(out, self.parent.map_or(0, |p| p.digest));
        put_u32(out, self.memories.len() as u32);
        put_u32(out, self.globals.len() as u32);
        debug_assert_eq!(out.len(), FIXED_HEADER_LEN);
        for &(index, pages) in self.memories {
            put_u32(out, index);
            put_u64(out, pages as u64 * PAGE_SIZE as u64);
        }
        for g in self.globals {
            put_u32(out, g.index);
            put_u32(out, g.value.ty().code());
            out.extend_from_slice(&g.value.raw().to_le_bytes());
        }
        let table_at = out.len();
        let pages: usize = self.memories.iter().map(|(_, pages)| pages).sum();
        out.resize(table_at + pages * PAGE_HASH_LEN, 0);
        let stored_at = out.len();
        if self.kind == ImageKind::Delta {
            for &count in self.stored_counts {
                put_u32(out, count as u32);
                out.resize(out.len() + count * STORED_ENTRY_LEN, 0);
            }
        }
        out.resize(out.len() + CHECKSUM_LEN, 0);
        debug_assert_eq!(out.len(), header_len);
        HeaderSlots {
            table_at,
            stored_at,
            header_len,
        }
    }
}

/// Writes the header checksum over `out[..header_len - 8]`.
pub(crate) fn seal_header(out: &mut [u8], header_len: usize) {
    let at = header_len - CHECKSUM_LEN;
    let checksum = xxh3_64(&out[..at]);
    out[at..header_len].copy_from_slice(&checksum.to_le_bytes());
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// The length of the full image of `image`: header plus every memory byte.
pub fn full_encoded_len(image: &ImageRef<'_>) -> usize {
    let memories = memory_pages(image);
    let fields = full_header(image, &memories, CheckpointId(0));
    fields.header_len() + image.memories.iter().map(|m| m.bytes.len()).sum::<usize>()
}

/// `(index, pages)` of every memory of `image`, as a header lists them.
fn memory_pages(image: &ImageRef<'_>) -> Vec<(u32, usize)> {
    image
        .memories
        .iter()
        .map(|m| (m.index, m.bytes.len() / PAGE_SIZE))
        .collect()
}

/// The header fields of `image` as a full image taken at `checkpoint` (the start of its chain).
fn full_header<'a>(
    image: &'a ImageRef<'_>,
    memories: &'a [(u32, usize)],
    checkpoint: CheckpointId,
) -> HeaderFields<'a> {
    HeaderFields {
        kind: ImageKind::Full,
        identity: image.identity(),
        checkpoint,
        base: checkpoint,
        chain_length: 0,
        parent: None,
        memories,
        globals: image.globals,
        stored_counts: &[],
    }
}

/// Encodes `image`, taken at `checkpoint`, as a full image into `out` (cleared first; reuse it
/// between snapshots to keep its allocation). Every page is hashed right after it is copied;
/// the returned page table is the one the image carries, for the next delta.
pub fn encode_full(
    image: &ImageRef<'_>,
    checkpoint: CheckpointId,
    out: &mut Vec<u8>,
) -> Result<PageTable, ImageError> {
    image.validate()?;
    let memories = memory_pages(image);
    let fields = full_header(image, &memories, checkpoint);
    let total = full_encoded_len(image);
    let slots = fields.write(out);
    if out.capacity() < total {
        // A new buffer, allocated zeroed: for an image of any size the allocator maps fresh
        // pages without writing them, so they are faulted in by the threads copying into them.
        let mut buffer = vec![0; total];
        buffer[..slots.header_len].copy_from_slice(out);
        *out = buffer;
    } else {
        out.resize(total, 0);
    }
    let mut table = PageTable::default();
    let mut at = slots.header_len;
    for m in &image.memories {
        let mut hashes = vec![0; m.bytes.len() / PAGE_SIZE];
        copy_hashing(m.bytes, &mut out[at..at + m.bytes.len()], &mut hashes);
        at += m.bytes.len();
        table.memories.push(MemoryPages {
            index: m.index,
            hashes,
        });
    }
    let mut at = slots.table_at;
    for hash in table.memories.iter().flat_map(|m| &m.hashes) {
        out[at..at + PAGE_HASH_LEN].copy_from_slice(&hash.to_le_bytes());
        at += PAGE_HASH_LEN;
    }
    seal_header(out, slots.header_len);
    Ok(table)
}

/// `weir_abi`'s reader over a header, its short reads named by the field being read.
struct Reader<'a>(wire::Reader<'a>);

impl<'a> Reader<'a> {
    /// A reader of `bytes` from `offset`, which the caller has checked they hold.
    fn from(bytes: &'a [u8], offset: usize) -> Self {
        let mut reader = wire::Reader::new(bytes);
        reader
            .take(offset)
            .expect("the caller checked the fixed header's length");
        Reader(reader)
    }

    fn short(what: &str) -> impl Fn(wire::Short) -> ImageError + '_ {
        move |_| invalid(format!("the header ends inside {what}"))
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ImageError> {
        self.0.take(n).map_err(Self::short(what))
    }

    fn u32(&mut self, what: &str) -> Result<u32, ImageError> {
        self.0.u32().map_err(Self::short(what))
    }

    fn u64(&mut self, what: &str) -> Result<u64, ImageError> {
        self.0.u64().map_err(Self::short(what))
    }

    fn u128(&mut self, what: &str) -> Result<u128, ImageError> {
        let bytes = self.take(16, what)?;
        Ok(u128::from_le_bytes(bytes.try_into().expect("16 bytes")))
    }

    /// How many bytes of the header are left to read.
    fn remaining(&self) -> usize {
        self.0.remaining()
    }
}

/// Reads and verifies the header of an image of either kind: magic, version, header length,
/// header checksum, then the consistency of every field. The body is not read (its length is
/// not checked either: [`decode_full`] and `super::delta::apply` do that).
pub fn read_header(bytes: &[u8]) -> Result<ImageHeader, ImageError> {
    let found = bytes.len() as u64;
    let head = &bytes[..bytes.len().min(IMAGE_MAGIC.len())];
    if head != IMAGE_MAGIC {
        return Err(ImageError::NotAnImage {
            found: head.to_vec(),
        });
    }
    if bytes.len() < FIXED_HEADER_LEN + CHECKSUM_LEN {
        return Err(ImageError::Truncated {
            expected: (FIXED_HEADER_LEN + CHECKSUM_LEN) as u64,
            found,
        });
    }
    let mut r = Reader::from(bytes, 8);
    let version = r.u32("the version")?;
    if version != IMAGE_FORMAT_VERSION {
        return Err(ImageError::UnsupportedVersion {
            found: version,
            supported: IMAGE_FORMAT_VERSION,
        });
    }
    let kind_code = r.u32("the kind")?;
    let header_len = r.u64("the header length")?;
    if header_len > found {
        return Err(ImageError::Truncated {
            expected: header_len,
            found,
        });
    }
    let minimum = (FIXED_HEADER_LEN + CHECKSUM_LEN) as u64;
    if header_len < minimum {
        return Err(ImageError::BadHeaderLength {
            found: header_len,
            minimum,
        });
    }
    let header_len = header_len as usize;
    let sum_at = header_len - CHECKSUM_LEN;
    let stored = u64::from_le_bytes(bytes[sum_at..header_len].try_into().expect("8 bytes"));
    let computed = xxh3_64(&bytes[..sum_at]);
    if stored != computed {
        return Err(ImageError::HeaderChecksum { stored, computed });
    }

    // From here on the header is what an encoder wrote; inconsistencies are invalid headers.
    let header = &bytes[..sum_at];
    let mut r = Reader::from(header, 24);
    let kind = ImageKind::from_code(kind_code)
        .ok_or_else(|| invalid(format!("unknown image kind {kind_code}")))?;
    let module_hash = r.u128("the module hash")?;
    let rewrite_version = r.u32("the rewrite version")?;
    let checkpoint = CheckpointId(r.u64("the checkpoint id")?);
    let base = CheckpointId(r.u64("the base id")?);
    let chain_length = r.u32("the chain length")?;
    let parent_id = r.u64("the parent id")?;
    let parent_digest = r.u64("the parent digest")?;
    let memory_count = r.u32("the memory count")? as usize;
    let global_count = r.u32("the global count")? as usize;

    let parent = match kind {
        ImageKind::Full => {
            if base != checkpoint || chain_length != 0 || parent_id != 0 || parent_digest != 0 {
                return Err(invalid(format!(
                    "a full image of checkpoint {checkpoint} names base {base}, chain length {chain_length}, parent {parent_id}"
                )));
            }
            None
        }
        ImageKind::Delta => {
            if chain_length == 0 || !(base.0 <= parent_id && parent_id < checkpoint.0) {
                return Err(invalid(format!(
                    "a delta of checkpoint {checkpoint} names base {base}, parent {parent_id} and chain length {chain_length}"
                )));
            }
            Some(ParentLink {
                checkpoint: CheckpointId(parent_id),
                digest: parent_digest,
            })
        }
    };

    let mut memories = Vec::with_capacity(memory_count.min(header.len() / MEMORY_ENTRY_LEN));
    for _ in 0..memory_count {
        let index = r.u32("a memory entry")?;
        let len = r.u64("a memory entry")?;
        if len % PAGE_SIZE as u64 != 0 {
            return Err(invalid(format!(
                "memory {index} is {len} bytes, not a whole number of 64 KiB pages"
            )));
        }
        if let Some(&(previous, _)) = memories.last()
            && previous >= index
        {
            return Err(invalid(format!(
                "memories out of order: {previous} before {index}"
            )));
        }
        memories.push((index, len / PAGE_SIZE as u64));
    }
    let mut globals = Vec::with_capacity(global_count.min(header.len() / GLOBAL_ENTRY_LEN));
    for _ in 0..global_count {
        let index = r.u32("a global entry")?;
        let code = r.u32("a global entry")?;
        let raw = r.u128("a global entry")?;
        let ty = GlobalType::from_code(code)
            .ok_or_else(|| invalid(format!("global {index} has unknown type code {code:#x}")))?;
        let value = GlobalBits::from_raw(ty, raw).ok_or_else(|| {
            invalid(format!(
                "global {index} of type {ty} has bits set above its width"
            ))
        })?;
        if let Some(previous) = globals.last().map(|g: &GlobalValue| g.index)
            && previous >= index
        {
            return Err(invalid(format!(
                "globals out of order: {previous} before {index}"
            )));
        }
        globals.push(GlobalValue { index, value });
    }
    let mut pages = PageTable::default();
    for &(index, count) in &memories {
        // The header's own length bounds the table, so a huge memory length cannot make
        // this allocate more than the image holds.
        let remaining = r.remaining() / PAGE_HASH_LEN;
        if count > remaining as u64 {
            return Err(invalid(format!(
                "memory {index} has {count} pages but the header holds {remaining} more page hashes"
            )));
        }
        let table = r.take(count as usize * PAGE_HASH_LEN, "the page table")?;
        pages.memories.push(MemoryPages {
            index,
            hashes: table
                .chunks_exact(PAGE_HASH_LEN)
                .map(|h| u64::from_le_bytes(h.try_into().expect("8 bytes")))
                .collect(),
        });
    }
    let mut stored = vec![Vec::new(); memories.len()];
    if kind == ImageKind::Delta {
        for (list, m) in stored.iter_mut().zip(&pages.memories) {
            let count = r.u32("a stored-page count")? as usize;
            let remaining = r.remaining() / STORED_ENTRY_LEN;
            if count > remaining {
                return Err(invalid(format!(
                    "memory {} stores {count} pages but the header holds {remaining} more entries",
                    m.index
                )));
            }
            list.reserve(count);
            for _ in 0..count {
                let page = r.u32("a stored-page entry")?;
                let stored_len = r.u32("a stored-page entry")?;
                if u64::from(page) >= m.hashes.len() as u64 {
                    return Err(invalid(format!(
                        "stored page {page} of memory {} is beyond its {} pages",
                        m.index,
                        m.hashes.len()
                    )));
                }
                if stored_len == 0 || stored_len as usize > PAGE_SIZE {
                    return Err(invalid(format!(
                        "stored page {page} of memory {} is {stored_len} bytes long",
                        m.index
                    )));
                }
                if let Some(previous) = list.last().map(|s: &StoredPage| s.page)
                    && previous >= page
                {
                    return Err(invalid(format!(
                        "stored pages of memory {} out of order: {previous} before {page}",
                        m.index
                    )));
                }
                list.push(StoredPage { page, stored_len });
            }
        }
    }
    if r.remaining() != 0 {
        return Err(invalid(format!(
            "{} bytes after the last field of the header",
            r.remaining()
        )));
    }
    Ok(ImageHeader {
        kind,
        module_hash,
        rewrite_version,
        checkpoint,
        base,
        chain_length,
        parent,
        globals,
        pages,
        stored,
        header_len,
    })
}

/// Checks that `bytes` is exactly as long as `header` says.
pub(crate) fn check_len(header: &ImageHeader, bytes: &[u8]) -> Result<(), ImageError> {
    let expected = header.encoded_len();
    let found = bytes.len() as u64;
    if found < expected {
        return Err(ImageError::Truncated { expected, found });
    }
    if found > expected {
        return Err(ImageError::TrailingBytes { expected, found });
    }
    Ok(())
}

/// Decodes and verifies a full image: the header (see [`read_header`]), the length, and
/// every page against the page table. The memories borrow `bytes`, so a restore can write them
/// into the instance without another copy. The module is not checked: call
/// [`ImageHeader::check_module`].
pub fn decode_full(bytes: &[u8]) -> Result<FullImage<'_>, ImageError> {
    let image = decode_full_unchecked(bytes)?;
    for (memory, m) in image.memories.iter().zip(&image.header.pages.memories) {
        let pages = memory.bytes.chunks_exact(PAGE_SIZE).zip(&m.hashes);
        for (page, (bytes, &recorded)) in pages.enumerate() {
            check_page(m.index, page, bytes, recorded)?;
        }
    }
    Ok(image)
}

/// [`decode_full`] without checking the pages against the page table: the header is verified
/// (its checksum, the length), the page bytes are taken as they are. For a restore from bytes
/// whose integrity is already established — the storage checks a CRC-32 over every state it
/// reads — where hashing every page again would double the restore's time (docs/CHECKPOINTS.md
/// §10). A delta chain is always checked page by page ([`reconstruct`](super::delta::reconstruct)):
/// there the page table is what tells a rebuilt page is right.
pub fn decode_full_unchecked(bytes: &[u8]) -> Result<FullImage<'_>, ImageError> {
    let header = read_header(bytes)?;
    header.expect_kind(ImageKind::Full)?;
    check_len(&header, bytes)?;
    let mut at = header.header_len;
    let mut memories = Vec::with_capacity(header.pages.memories.len());
    for m in &header.pages.memories {
        let len = m.hashes.len() * PAGE_SIZE;
        memories.push(MemoryRef {
            index: m.index,
            bytes: &bytes[at..at + len],
        });
        at += len;
    }
    Ok(FullImage { header, memories })
}

#[cfg(test)]
pub(crate) mod tests;
