//! Incremental images: a delta stores only the pages that changed since the previous image,
//! XOR-ed against it and compressed with LZ4, so that checkpointing a large memory of which a
//! little changed costs little storage.
//!
//! # Why this module exists
//!
//! An operator's memory is mostly what it was at the last checkpoint. Even when a change
//! touches many pages (a hash map whose keys are updated all over its table), each page
//! changes in a few words: XOR-ed against the previous image a changed page is nearly all
//! zeros, which LZ4 shrinks to a few hundred bytes. So a task keeps its previous image in
//! memory ([`Baseline`]), hashes every page of the current memory (xxh3-64, a few ms per
//! 100 MB), and stores the pages whose hash changed. A full image every K checkpoints
//! ([`ImagePolicy`]) bounds the chain a restore has to apply.
//!
//! # Byte layout
//!
//! A delta has the header of `super::format` (kind 2). Its parent fields name the image it
//! applies to: checkpoint id and [`content_digest`](super::format::content_digest). It names
//! the full image its chain starts at and its chain length, and its page table is the **new**
//! memory's, so the next delta needs no decoding. After the page table, per memory: the number of stored pages, then per stored
//! page its number and stored length. The body holds the stored pages in that order, then an
//! xxh3-64 of the body:
//!
//! - a stored page is `current XOR parent` for a page within the parent's memory, and the
//!   page itself (XOR zeros) for a page the memory grew by;
//! - it is an LZ4 block (`lz4_flex::block`, no size prefix) that decompresses to exactly one
//!   page, or, when compressing did not make it smaller, the 65 536 XOR-ed bytes themselves
//!   (stored length = [`PAGE_SIZE`]);
//! - a page not stored is the parent's page, or zeros beyond the parent's memory (a memory
//!   that grew and was not written there costs nothing);
//! - globals are stored whole, in the header.
//!
//! # What [`apply`] verifies
//!
//! In order: the header (checksum, consistency), the length, the body checksum; that the
//! image it is applied to is its parent — same checkpoint id, module, chain, and contents
//! (digest); that no memory shrank (wasm memory only grows: a smaller memory is a corrupt
//! delta) and the memories and globals are the parent's; that every page not stored keeps its
//! parent's hash; and that every stored page, once decompressed and XOR-ed, hashes to the
//! page table's entry. So the memory a chain rebuilds is, page for page, the memory that was
//! snapshotted, and a flipped byte anywhere in a delta is named.
//!
//! # What the integration must guarantee
//!
//! - **Memory.** A [`Baseline`] holds a copy of every memory of the instance: the memory
//!   cost of incremental images equals the instance's memory size, per task.
//! - **Time.** [`Baseline::snapshot`] runs in the synchronous part of a checkpoint: it hashes
//!   every page, XORs and compresses the changed ones into the output, and copies them into
//!   the baseline. A full image copies every page once.
//! - **Parents must exist.** A delta is useless without its parent, its parent's parent, and
//!   so on back to the full image. The baseline advances at every snapshot, so when a
//!   checkpoint whose image the task took is aborted, call [`Baseline::reset`] (the next
//!   image is then full), or decline every later checkpoint whose chain includes it. Pruning
//!   must keep every image the chains of retained checkpoints need. After a restore,
//!   [`Baseline::resume`] continues the restored chain.

use lz4_flex::block::{compress_into, decompress_into, get_maximum_output_size};
use xxhash_rust::xxh3::xxh3_64;

use super::format::{
    CHECKSUM_LEN, CheckpointImage, GlobalValue, HeaderFields, ImageError, ImageKind, ImageRef,
    ModuleIdentity, PAGE_SIZE, PageTable, ParentLink, check_len, check_page, encode_full,
    full_encoded_len, into_checkpoint_image, put_u64, read_header, seal_header, zero_page_hash,
};
use crate::ids::CheckpointId;

/// What [`encode_delta`] produced besides the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaOutcome {
    /// The page table of the current memory, which the delta carries.
    pub pages: PageTable,
    /// The page numbers the delta stores, per memory: the pages that changed.
    pub stored: Vec<Vec<u32>>,
}

/// The pages of `new` whose hash differs from `old`'s (a zero page's beyond `old`'s length),
/// per memory. The tables must have the same memories.
fn changed_pages(old: &PageTable, new: &PageTable) -> Vec<Vec<u32>> {
    let zero = zero_page_hash();
    new.memories
        .iter()
        .zip(&old.memories)
        .map(|(new, old)| {
            new.hashes
                .iter()
                .enumerate()
                .filter(|&(page, hash)| *hash != old.hashes.get(page).copied().unwrap_or(zero))
                .map(|(page, _)| page as u32)
                .collect()
        })
        .collect()
}

/// Why an image taken at `checkpoint` with this identity, memories `(index, byte length)` and
/// globals cannot be a delta against `parent`, if it cannot.
fn successor_problem(
    parent: &CheckpointImage,
    identity: ModuleIdentity,
    checkpoint: CheckpointId,
    memories: &[(u32, u64)],
    globals: &[GlobalValue],
) -> Option<ImageError> {
    let parent_identity = parent.image.identity();
    if identity != parent_identity {
        return Some(ImageError::ChainModuleMismatch {
            delta: checkpoint,
            delta_hash: identity.module_hash,
            delta_rewrite: identity.rewrite_version,
            parent_hash: parent_identity.module_hash,
            parent_rewrite: parent_identity.rewrite_version,
        });
    }
    let indices: Vec<u32> = memories.iter().map(|&(index, _)| index).collect();
    let parent_indices: Vec<u32> = parent.image.memories.iter().map(|m| m.index).collect();
    if indices != parent_indices {
        return Some(ImageError::LayoutChanged {
            delta: checkpoint,
            problem: format!("memories {indices:?} instead of the parent's {parent_indices:?}"),
        });
    }
    for (&(index, len), parent_memory) in memories.iter().zip(&parent.image.memories) {
        let parent_len = parent_memory.bytes.len() as u64;
        if len < parent_len {
            return Some(ImageError::MemoryShrunk {
                delta: checkpoint,
                memory: index,
                parent_len,
                len,
            });
        }
    }
    let shape = |globals: &[GlobalValue]| -> Vec<String> {
        globals
            .iter()
            .map(|g| format!("{} ({})", g.index, g.value.ty()))
            .collect()
    };
    let (mine, theirs) = (shape(globals), shape(&parent.image.globals));
    if mine != theirs {
        return Some(ImageError::LayoutChanged {
            delta: checkpoint,
            problem: format!(
                "globals [{}] instead of the parent's [{}]",
                mine.join(", "),
                theirs.join(", ")
            ),
        });
    }
    None
}

fn memory_lengths(image: &ImageRef<'_>) -> Vec<(u32, u64)> {
    image
        .memories
        .iter()
        .map(|m| (m.index, m.bytes.len() as u64))
        .collect()
}

/// `out = a XOR b`, all three one page long.
fn xor_pages(out: &mut [u8], a: &[u8], b: &[u8]) {
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x ^ y;
    }
}

/// `page ^= other`.
fn xor_in_place(page: &mut [u8], other: &[u8]) {
    for (p, o) in page.iter_mut().zip(other) {
        *p ^= o;
    }
}

/// Appends `xor` (one page) to `out` as an LZ4 block, or raw when that is not smaller;
/// returns the stored length.
fn store_page(xor: &[u8], out: &mut Vec<u8>) -> u32 {
    let start = out.len();
    out.resize(start + get_maximum_output_size(PAGE_SIZE), 0);
    match compress_into(xor, &mut out[start..]) {
        Ok(len) if len < PAGE_SIZE => {
            out.truncate(start + len);
            len as u32
        }
        // Incompressible (or, impossibly, an output too small): store the XOR as it is.
        _ => {
            out.truncate(start);
            out.extend_from_slice(xor);
            PAGE_SIZE as u32
        }
    }
}

/// Encodes `current`, taken at `checkpoint`, as a delta against `parent` into `out` (cleared
/// first). `checkpoint` must come after the parent's, and `current` must have the parent's
/// module, memories (none smaller) and globals.
pub fn encode_delta(
    parent: &CheckpointImage,
    current: &ImageRef<'_>,
    checkpoint: CheckpointId,
    out: &mut Vec<u8>,
) -> Result<DeltaOutcome, ImageError> {
    current.validate()?;
    if checkpoint <= parent.checkpoint {
        return Err(ImageError::NotAfterParent {
            checkpoint,
            parent: parent.checkpoint,
        });
    }
    let lengths = memory_lengths(current);
    if let Some(problem) = successor_problem(
        parent,
        current.identity(),
        checkpoint,
        &lengths,
        current.globals,
    ) {
        return Err(problem);
    }
    let pages = PageTable::of(current)?;
    let stored = changed_pages(&parent.pages, &pages);

    let memories: Vec<(u32, usize)> = pages
        .memories
        .iter()
        .map(|m| (m.index, m.hashes.len()))
        .collect();
    let counts: Vec<usize> = stored.iter().map(Vec::len).collect();
    let fields = HeaderFields {
        kind: ImageKind::Delta,
        identity: current.identity(),
        checkpoint,
        base: parent.base,
        chain_length: parent.chain_length + 1,
        parent: Some(ParentLink {
            checkpoint: parent.checkpoint,
            digest: parent.digest(),
        }),
        memories: &memories,
        globals: current.globals,
        stored_counts: &counts,
    };
    let slots = fields.write(out);
    let mut at = slots.table_at;
    for hash in pages.memories.iter().flat_map(|m| &m.hashes) {
        out[at..at + 8].copy_from_slice(&hash.to_le_bytes());
        at += 8;
    }

    let mut xor = vec![0u8; PAGE_SIZE];
    let mut entry_at = slots.stored_at;
    for ((list, memory), parent_memory) in stored
        .iter()
        .zip(&current.memories)
        .zip(&parent.image.memories)
    {
        entry_at += 4; // the count, already written
        for &page in list {
            let range = page as usize * PAGE_SIZE..(page as usize + 1) * PAGE_SIZE;
            let bytes = &memory.bytes[range.clone()];
            match parent_memory.bytes.get(range) {
                Some(before) => xor_pages(&mut xor, bytes, before),
                None => xor.copy_from_slice(bytes),
            }
            let stored_len = store_page(&xor, out);
            out[entry_at..entry_at + 4].copy_from_slice(&page.to_le_bytes());
            out[entry_at + 4..entry_at + 8].copy_from_slice(&stored_len.to_le_bytes());
            entry_at += 8;
        }
    }
    seal_header(out, slots.header_len);
    let body_checksum = xxh3_64(&out[slots.header_len..]);
    put_u64(out, body_checksum);
    Ok(DeltaOutcome { pages, stored })
}

/// Applies the encoded `delta` to `parent`, its parent image, and returns the new image,
/// verifying everything the module docs list. `parent` is updated in place (no copy of its
/// memory), so it is consumed: on an error the restore has failed anyway.
pub fn apply(parent: CheckpointImage, delta: &[u8]) -> Result<CheckpointImage, ImageError> {
    let header = read_header(delta)?;
    header.expect_kind(ImageKind::Delta)?;
    check_len(&header, delta)?;
    let body_end = delta.len() - CHECKSUM_LEN;
    let stored_checksum = u64::from_le_bytes(delta[body_end..].try_into().expect("8 bytes"));
    let computed = xxh3_64(&delta[header.header_len..body_end]);
    if stored_checksum != computed {
        return Err(ImageError::BodyChecksum {
            stored: stored_checksum,
            computed,
        });
    }

    let Some(link) = header.parent else {
        return Err(ImageError::InvalidHeader {
            problem: "a delta without a parent".to_owned(),
        });
    };
    if link.checkpoint != parent.checkpoint {
        return Err(ImageError::ParentMismatch {
            delta: header.checkpoint,
            parent: link.checkpoint,
            found: parent.checkpoint,
        });
    }
    let identity = header.identity();
    let parent_identity = parent.image.identity();
    if identity != parent_identity {
        return Err(ImageError::ChainModuleMismatch {
            delta: header.checkpoint,
            delta_hash: identity.module_hash,
            delta_rewrite: identity.rewrite_version,
            parent_hash: parent_identity.module_hash,
            parent_rewrite: parent_identity.rewrite_version,
        });
    }
    if header.base != parent.base || header.chain_length != parent.chain_length + 1 {
        return Err(ImageError::ChainMismatch {
            delta: header.checkpoint,
            base: header.base,
            length: header.chain_length,
            parent_base: parent.base,
            parent_length: parent.chain_length,
        });
    }
    let digest = parent.digest();
    if link.digest != digest {
        return Err(ImageError::ParentContentMismatch {
            delta: header.checkpoint,
            parent: parent.checkpoint,
            recorded: link.digest,
            found: digest,
        });
    }
    let lengths: Vec<(u32, u64)> = header
        .pages
        .memories
        .iter()
        .map(|m| (m.index, m.byte_len()))
        .collect();
    if let Some(problem) = successor_problem(
        &parent,
        identity,
        header.checkpoint,
        &lengths,
        &header.globals,
    ) {
        return Err(problem);
    }

    let CheckpointImage {
        image: mut rebuilt,
        pages: parent_pages,
        ..
    } = parent;
    let zero = zero_page_hash();
    let mut scratch = vec![0u8; PAGE_SIZE];
    let mut body_at = header.header_len;
    for (((table, stored), memory), parent_table) in header
        .pages
        .memories
        .iter()
        .zip(&header.stored)
        .zip(&mut rebuilt.memories)
        .zip(&parent_pages.memories)
    {
        // The length was checked against the header, whose page table bounds it.
        memory.bytes.resize(table.hashes.len() * PAGE_SIZE, 0);
        let mut stored = stored.iter().peekable();
        for (page, &recorded) in table.hashes.iter().enumerate() {
            let Some(entry) = stored.next_if(|s| s.page as usize == page) else {
                let parent_hash = parent_table.hashes.get(page).copied().unwrap_or(zero);
                if recorded != parent_hash {
                    return Err(ImageError::UnstoredPageChanged {
                        delta: header.checkpoint,
                        memory: table.index,
                        page: page as u64,
                        recorded,
                        parent: parent_hash,
                    });
                }
                continue;
            };
            let data = &delta[body_at..body_at + entry.stored_len as usize];
            body_at += entry.stored_len as usize;
            if data.len() == PAGE_SIZE {
                scratch.copy_from_slice(data);
            } else {
                let decompress_error = |problem: String| ImageError::Decompress {
                    delta: header.checkpoint,
                    memory: table.index,
                    page: page as u64,
                    problem,
                };
                match decompress_into(data, &mut scratch) {
                    Ok(PAGE_SIZE) => {}
                    Ok(len) => {
                        return Err(decompress_error(format!(
                            "{len} bytes instead of a page of {PAGE_SIZE}"
                        )));
                    }
                    Err(e) => return Err(decompress_error(e.to_string())),
                }
            }
            let bytes = &mut memory.bytes[page * PAGE_SIZE..(page + 1) * PAGE_SIZE];
            xor_in_place(bytes, &scratch);
            check_page(table.index, page, bytes, recorded)?;
        }
    }
    rebuilt.globals = header.globals;
    Ok(CheckpointImage {
        checkpoint: header.checkpoint,
        base: header.base,
        chain_length: header.chain_length,
        image: rebuilt,
        pages: header.pages,
    })
}

/// Rebuilds the image at the end of a chain: the full image `full` (its header verified, its
/// pages taken as they are: the storage's CRC covered them when they were read), then each
/// delta in order, every one verified (see [`apply`]). The image is rebuilt in `full`'s own
/// buffer ([`into_checkpoint_image`]). An error names the image's position in the chain (0 for
/// the full image). The module is not checked: call [`CheckpointImage::check_module`] (or check
/// the newest header first).
pub fn reconstruct<'a>(
    full: Vec<u8>,
    deltas: impl IntoIterator<Item = &'a [u8]>,
) -> Result<CheckpointImage, ImageError> {
    let in_chain = |position: usize| {
        move |source: ImageError| ImageError::InChain {
            position,
            source: Box::new(source),
        }
    };
    let mut image = into_checkpoint_image(full).map_err(in_chain(0))?;
    for (i, delta) in deltas.into_iter().enumerate() {
        image = apply(image, delta).map_err(in_chain(i + 1))?;
    }
    Ok(image)
}

/// When a task writes a full image instead of a delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImagePolicy {
    /// A full image every this many images: a chain is a full image and at most
    /// `full_every - 1` deltas, so a restore applies at most that many. 0 and 1 mean every
    /// image is full.
    pub full_every: u32,
    /// A delta larger than this percentage of the full image is replaced by the full image:
    /// it would cost nearly as much to store and more to restore.
    pub max_delta_percent: u32,
}

impl ImagePolicy {
    /// The default chain bound: a full image every 10 checkpoints.
    pub const DEFAULT_FULL_EVERY: u32 = 10;
    /// The default size bound: a delta may be at most half a full image.
    pub const DEFAULT_MAX_DELTA_PERCENT: u32 = 50;

    /// Whether the image after one at `parent_chain_length` may be a delta.
    pub fn allows_delta_after(&self, parent_chain_length: u32) -> bool {
        parent_chain_length.saturating_add(1) < self.full_every
    }

    /// Whether a delta of `delta_len` bytes is too large against a full image of `full_len`.
    pub fn delta_too_large(&self, delta_len: usize, full_len: usize) -> bool {
        delta_len as u128 * 100 > full_len as u128 * u128::from(self.max_delta_percent)
    }
}

impl Default for ImagePolicy {
    fn default() -> Self {
        ImagePolicy {
            full_every: Self::DEFAULT_FULL_EVERY,
            max_delta_percent: Self::DEFAULT_MAX_DELTA_PERCENT,
        }
    }
}

/// Why [`Baseline::snapshot`] wrote a full image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FullReason {
    /// There was no previous image: the first snapshot, or the first after a reset.
    NoBaseline,
    /// The chain reached [`ImagePolicy::full_every`].
    ChainLimit,
    /// The memories or globals are not the previous image's (a different module).
    LayoutChanged,
    /// The delta was larger than [`ImagePolicy::max_delta_percent`] of the full image.
    DeltaTooLarge,
}

/// What one [`Baseline::snapshot`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Snapshot {
    /// Full image or delta.
    pub kind: ImageKind,
    /// Why a full image, if it is one.
    pub full_reason: Option<FullReason>,
    /// The checkpoint the image was taken at.
    pub checkpoint: CheckpointId,
    /// A delta's parent: the image a restore needs before this one.
    pub parent: Option<CheckpointId>,
    /// The full image the chain starts at.
    pub base: CheckpointId,
    /// Deltas between the base and this image.
    pub chain_length: u32,
    /// Bytes written.
    pub len: usize,
    /// Pages in all memories.
    pub pages: usize,
    /// Pages that changed since the previous image (all of them without one).
    pub changed_pages: usize,
}

/// What a task keeps between two image checkpoints: the previous image (a copy of every
/// memory, plus its page table), so that the next image can be a delta against it.
#[derive(Debug, Clone)]
pub struct Baseline {
    policy: ImagePolicy,
    previous: Option<CheckpointImage>,
}

impl Baseline {
    /// A baseline without a previous image: the first snapshot is full.
    pub fn new(policy: ImagePolicy) -> Self {
        Baseline {
            policy,
            previous: None,
        }
    }

    /// A baseline that continues the chain of the image the task was just restored from, so
    /// the first snapshot after a restore can be a delta too. The image must be the one
    /// written into the instance.
    pub fn resume(policy: ImagePolicy, restored: CheckpointImage) -> Self {
        Baseline {
            policy,
            previous: Some(restored),
        }
    }

    /// The policy.
    pub fn policy(&self) -> ImagePolicy {
        self.policy
    }

    /// The previous image, if there is one.
    pub fn previous(&self) -> Option<&CheckpointImage> {
        self.previous.as_ref()
    }

    /// Bytes of memory the baseline holds: the instance's memory size after a snapshot.
    pub fn retained_bytes(&self) -> usize {
        self.previous
            .as_ref()
            .map_or(0, |p| p.image.memories.iter().map(|m| m.bytes.len()).sum())
    }

    /// Forgets the previous image, so that the next snapshot is full: call it when the
    /// checkpoint of the last snapshot was aborted (its image will not exist to apply a delta
    /// to).
    pub fn reset(&mut self) {
        self.previous = None;
    }

    /// Encodes `current`, taken at `checkpoint`, into `out` (cleared first) as a delta when
    /// the policy allows one and it is small enough, else as a full image; then makes
    /// `current` the previous image, copying only the pages that changed. On an error the
    /// baseline is reset.
    pub fn snapshot(
        &mut self,
        current: &ImageRef<'_>,
        checkpoint: CheckpointId,
        out: &mut Vec<u8>,
    ) -> Result<Snapshot, ImageError> {
        let Some(mut parent) = self.previous.take() else {
            return self.full(current, checkpoint, out, None, FullReason::NoBaseline);
        };
        let lengths = memory_lengths(current);
        if successor_problem(
            &parent,
            current.identity(),
            checkpoint,
            &lengths,
            current.globals,
        )
        .is_some()
        {
            return self.full(current, checkpoint, out, None, FullReason::LayoutChanged);
        }
        if !self.policy.allows_delta_after(parent.chain_length) {
            return self.full(
                current,
                checkpoint,
                out,
                Some(parent),
                FullReason::ChainLimit,
            );
        }
        let outcome = encode_delta(&parent, current, checkpoint, out)?;
        if self
            .policy
            .delta_too_large(out.len(), full_encoded_len(current))
        {
            return self.full(
                current,
                checkpoint,
                out,
                Some(parent),
                FullReason::DeltaTooLarge,
            );
        }
        let snapshot = Snapshot {
            kind: ImageKind::Delta,
            full_reason: None,
            checkpoint,
            parent: Some(parent.checkpoint),
            base: parent.base,
            chain_length: parent.chain_length + 1,
            len: out.len(),
            pages: outcome.pages.page_count(),
            changed_pages: outcome.stored.iter().map(Vec::len).sum(),
        };
        advance(&mut parent, current, &outcome.stored, outcome.pages);
        parent.checkpoint = checkpoint;
        parent.chain_length += 1;
        self.previous = Some(parent);
        Ok(snapshot)
    }

    /// Writes a full image and makes it the previous image, reusing `previous`'s memory (only
    /// the changed pages are copied) when there is one of the same layout.
    fn full(
        &mut self,
        current: &ImageRef<'_>,
        checkpoint: CheckpointId,
        out: &mut Vec<u8>,
        previous: Option<CheckpointImage>,
        reason: FullReason,
    ) -> Result<Snapshot, ImageError> {
        let pages = encode_full(current, checkpoint, out)?;
        let pages_total = pages.page_count();
        let (mut next, changed_pages) = match previous {
            Some(mut p) => {
                let changed = changed_pages(&p.pages, &pages);
                let count = changed.iter().map(Vec::len).sum();
                advance(&mut p, current, &changed, pages);
                (p, count)
            }
            None => {
                let image = CheckpointImage {
                    checkpoint,
                    base: checkpoint,
                    chain_length: 0,
                    image: current.to_image(),
                    pages,
                };
                (image, pages_total)
            }
        };
        next.checkpoint = checkpoint;
        next.base = checkpoint;
        next.chain_length = 0;
        self.previous = Some(next);
        Ok(Snapshot {
            kind: ImageKind::Full,
            full_reason: Some(reason),
            checkpoint,
            parent: None,
            base: checkpoint,
            chain_length: 0,
            len: out.len(),
            pages: pages_total,
            changed_pages,
        })
    }
}

/// Makes `image` (the previous image) equal to `current`: grows its memories, copies the
/// `changed` pages, takes the globals and the page table. Ids are the caller's.
fn advance(
    image: &mut CheckpointImage,
    current: &ImageRef<'_>,
    changed: &[Vec<u32>],
    pages: PageTable,
) {
    for ((memory, now), list) in image
        .image
        .memories
        .iter_mut()
        .zip(&current.memories)
        .zip(changed)
    {
        memory.bytes.resize(now.bytes.len(), 0);
        for &page in list {
            let range = page as usize * PAGE_SIZE..(page as usize + 1) * PAGE_SIZE;
            memory.bytes[range.clone()].copy_from_slice(&now.bytes[range]);
        }
    }
    image.image.globals = current.globals.to_vec();
    image.pages = pages;
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::wasm::image::format::tests::{MODULE, Rng, image};
    use crate::wasm::image::format::{GlobalBits, GlobalType, Image, MemoryImage, decode_full};

    fn full_of(image: &Image, id: u64) -> (Vec<u8>, CheckpointImage) {
        let mut out = Vec::new();
        encode_full(&image.as_image_ref(), CheckpointId(id), &mut out).unwrap();
        let parent = decode_full(&out).unwrap().to_checkpoint_image();
        (out, parent)
    }

    fn delta_of(parent: &CheckpointImage, current: &Image, id: u64) -> (Vec<u8>, DeltaOutcome) {
        let mut out = Vec::new();
        let outcome =
            encode_delta(parent, &current.as_image_ref(), CheckpointId(id), &mut out).unwrap();
        (out, outcome)
    }

    fn header_len(bytes: &[u8]) -> usize {
        u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize
    }

    /// Recomputes both checksums of a delta edited by a test, so that only the edit is wrong.
    fn reseal(bytes: &mut [u8]) {
        let header_len = header_len(bytes);
        seal_header(bytes, header_len);
        let end = bytes.len() - CHECKSUM_LEN;
        let sum = xxh3_64(&bytes[header_len..end]);
        bytes[end..].copy_from_slice(&sum.to_le_bytes());
    }

    /// Offset of the page table in an image of `memories` memories and `globals` globals.
    fn table_at(memories: usize, globals: usize) -> usize {
        88 + memories * 12 + globals * 24
    }

    /// One change to an instance between two checkpoints.
    #[derive(Debug, Clone)]
    enum Change {
        /// A byte written (memory and offset taken modulo what exists).
        Write { memory: usize, at: usize, value: u8 },
        /// A memory grown by some pages of zeros.
        Grow { memory: usize, pages: usize },
        /// A global set to new bits (truncated to its type).
        Global { which: usize, bits: u128 },
    }

    fn change() -> impl Strategy<Value = Change> {
        prop_oneof![
            8 => (any::<usize>(), any::<usize>(), any::<u8>())
                .prop_map(|(memory, at, value)| Change::Write { memory, at, value }),
            1 => (any::<usize>(), 1usize..3).prop_map(|(memory, pages)| Change::Grow { memory, pages }),
            1 => (any::<usize>(), any::<u128>()).prop_map(|(which, bits)| Change::Global { which, bits }),
        ]
    }

    fn mutate(image: &mut Image, changes: &[Change]) {
        for change in changes {
            match *change {
                Change::Write { memory, at, value } => {
                    let count = image.memories.len();
                    if count == 0 {
                        continue;
                    }
                    let bytes = &mut image.memories[memory % count].bytes;
                    if !bytes.is_empty() {
                        let len = bytes.len();
                        bytes[at % len] = value;
                    }
                }
                Change::Grow { memory, pages } => {
                    let count = image.memories.len();
                    if count > 0 {
                        let bytes = &mut image.memories[memory % count].bytes;
                        bytes.resize(bytes.len() + pages * PAGE_SIZE, 0);
                    }
                }
                Change::Global { which, bits } => {
                    let count = image.globals.len();
                    let global = &mut image.globals[which % count];
                    let ty = global.value.ty();
                    let mask = match ty {
                        GlobalType::I32 | GlobalType::F32 => u128::from(u32::MAX),
                        GlobalType::I64 | GlobalType::F64 => u128::from(u64::MAX),
                        GlobalType::V128 => u128::MAX,
                    };
                    global.value = GlobalBits::from_raw(ty, bits & mask).unwrap();
                }
            }
        }
    }

    /// The pages of `current` that differ from `parent` (zeros beyond its length), per memory.
    fn really_changed(parent: &Image, current: &Image) -> Vec<Vec<u32>> {
        let zeros = [0u8; PAGE_SIZE];
        current
            .memories
            .iter()
            .zip(&parent.memories)
            .map(|(now, before)| {
                now.bytes
                    .chunks_exact(PAGE_SIZE)
                    .enumerate()
                    .filter(|(page, bytes)| {
                        let at = page * PAGE_SIZE;
                        *bytes != before.bytes.get(at..at + PAGE_SIZE).unwrap_or(&zeros)
                    })
                    .map(|(page, _)| page as u32)
                    .collect()
            })
            .collect()
    }

    fn no_size_limit(full_every: u32) -> ImagePolicy {
        ImagePolicy {
            full_every,
            max_delta_percent: u32::MAX,
        }
    }

    #[test]
    fn a_delta_of_a_grown_memory_stores_only_the_pages_written() {
        let parent_image = image(1, &[1]);
        let (_, parent) = full_of(&parent_image, 1);
        let mut current = parent_image.clone();
        current.memories[0].bytes.resize(5 * PAGE_SIZE, 0);
        current.memories[0].bytes[3 * PAGE_SIZE + 100] = 7;
        let (delta, outcome) = delta_of(&parent, &current, 2);
        assert_eq!(outcome.stored, vec![vec![3]]);
        let header = read_header(&delta).unwrap();
        assert_eq!(header.pages.memories[0].hashes.len(), 5);
        assert_eq!(header.chain_length, 1);
        assert_eq!(header.base, CheckpointId(1));
        assert_eq!(header.parent.unwrap().checkpoint, CheckpointId(1));
        let rebuilt = apply(parent, &delta).unwrap();
        assert_eq!(rebuilt.image, current);
        assert_eq!(rebuilt.checkpoint, CheckpointId(2));
        assert_eq!(
            rebuilt.pages,
            PageTable::of(&current.as_image_ref()).unwrap()
        );
    }

    #[test]
    fn every_flipped_byte_of_a_delta_is_detected() {
        let parent_image = image(2, &[2, 1]);
        let (_, parent) = full_of(&parent_image, 4);
        let mut current = parent_image.clone();
        mutate(
            &mut current,
            &[
                Change::Write {
                    memory: 0,
                    at: 70_000,
                    value: 0x5a,
                },
                Change::Grow {
                    memory: 1,
                    pages: 1,
                },
                Change::Write {
                    memory: 1,
                    at: PAGE_SIZE + 9,
                    value: 1,
                },
                Change::Global { which: 1, bits: 77 },
            ],
        );
        let (delta, _) = delta_of(&parent, &current, 6);
        apply(parent.clone(), &delta).unwrap();
        for at in 0..delta.len() {
            for bit in [0x01, 0x10, 0x80] {
                let mut damaged = delta.clone();
                damaged[at] ^= bit;
                assert!(
                    apply(parent.clone(), &damaged).is_err(),
                    "flip {bit:#x} at byte {at} of {} not detected",
                    delta.len()
                );
            }
        }
    }

    #[test]
    fn a_delta_applied_to_another_image_than_its_parent_is_refused() {
        let first = image(3, &[2]);
        let (full, one) = full_of(&first, 1);
        let mut second = first.clone();
        mutate(
            &mut second,
            &[Change::Write {
                memory: 0,
                at: 5,
                value: 9,
            }],
        );
        let (d2, _) = delta_of(&one, &second, 2);
        let two = apply(one.clone(), &d2).unwrap();
        let mut third = second.clone();
        mutate(
            &mut third,
            &[Change::Write {
                memory: 0,
                at: 70_000,
                value: 9,
            }],
        );
        let (d3, _) = delta_of(&two, &third, 3);

        let err = apply(one.clone(), &d3).unwrap_err();
        assert_eq!(
            err,
            ImageError::ParentMismatch {
                delta: CheckpointId(3),
                parent: CheckpointId(2),
                found: CheckpointId(1)
            }
        );
        assert_eq!(
            err.to_string(),
            "the delta of checkpoint 3 applies to the image of checkpoint 2, not to that of checkpoint 1: apply a chain in order, from its full image"
        );
        // Out of order in a chain: the position is named.
        let err = reconstruct(full.clone(), [&d3[..], &d2[..]]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("delta 1 of the chain: the delta of checkpoint 3"),
            "{err}"
        );
        // Same id, other contents (another task's image of checkpoint 2).
        let mut other = two.clone();
        other.image.memories[0].bytes[0] ^= 1;
        other.pages = PageTable::of(&other.image.as_image_ref()).unwrap();
        assert!(matches!(
            apply(other, &d3).unwrap_err(),
            ImageError::ParentContentMismatch { .. }
        ));
        // Another module's image.
        let mut foreign = two.clone();
        foreign.image.module_hash ^= 1;
        assert!(matches!(
            apply(foreign, &d3).unwrap_err(),
            ImageError::ChainModuleMismatch { .. }
        ));
        // The right chain.
        let rebuilt = reconstruct(full.clone(), [&d2[..], &d3[..]]).unwrap();
        assert_eq!(rebuilt.image, third);
        assert_eq!(rebuilt.chain_length, 2);
        // A delta where the full image should be, and the other way round.
        assert!(matches!(
            reconstruct(d2.clone(), []).unwrap_err(),
            ImageError::InChain { position: 0, .. }
        ));
        assert!(matches!(
            apply(one, &full).unwrap_err(),
            ImageError::WrongKind { .. }
        ));
    }

    #[test]
    fn a_shrinking_memory_is_refused_when_encoding_and_when_applying() {
        let parent_image = image(4, &[3]);
        let (_, parent) = full_of(&parent_image, 1);
        let mut smaller = parent_image.clone();
        smaller.memories[0].bytes.truncate(2 * PAGE_SIZE);
        let mut out = Vec::new();
        let err =
            encode_delta(&parent, &smaller.as_image_ref(), CheckpointId(2), &mut out).unwrap_err();
        assert!(matches!(err, ImageError::MemoryShrunk { .. }), "{err}");

        // A delta that says so (as a buggy or hostile writer would), checksums intact.
        let fields = HeaderFields {
            kind: ImageKind::Delta,
            identity: MODULE,
            checkpoint: CheckpointId(2),
            base: CheckpointId(1),
            chain_length: 1,
            parent: Some(ParentLink {
                checkpoint: CheckpointId(1),
                digest: parent.digest(),
            }),
            memories: &[(0, 2)],
            globals: &parent.image.globals,
            stored_counts: &[0],
        };
        let slots = fields.write(&mut out);
        let at = slots.table_at;
        for (i, hash) in parent.pages.memories[0].hashes[..2].iter().enumerate() {
            out[at + 8 * i..at + 8 * i + 8].copy_from_slice(&hash.to_le_bytes());
        }
        out.extend_from_slice(&[0; CHECKSUM_LEN]);
        reseal(&mut out);
        let err = apply(parent, &out).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "corrupt delta of checkpoint 2: memory 0 shrinks from {} to {} bytes, which wasm memory never does",
                3 * PAGE_SIZE,
                2 * PAGE_SIZE
            )
        );
    }

    #[test]
    fn resealed_deltas_with_wrong_pages_are_refused_naming_the_page() {
        let parent_image = image(5, &[3]);
        let (_, parent) = full_of(&parent_image, 1);
        let mut current = parent_image.clone();
        mutate(
            &mut current,
            &[Change::Write {
                memory: 0,
                at: PAGE_SIZE + 1,
                value: 0xee,
            }],
        );
        let (delta, outcome) = delta_of(&parent, &current, 2);
        assert_eq!(outcome.stored, vec![vec![1]]);
        let table = table_at(1, parent_image.globals.len());

        // The recorded hash of page 2, which is not stored, changed.
        let mut damaged = delta.clone();
        damaged[table + 2 * 8] ^= 1;
        reseal(&mut damaged);
        assert!(matches!(
            apply(parent.clone(), &damaged).unwrap_err(),
            ImageError::UnstoredPageChanged {
                memory: 0,
                page: 2,
                ..
            }
        ));

        // The recorded hash of page 1, which is stored.
        let mut damaged = delta.clone();
        damaged[table + 8] ^= 1;
        reseal(&mut damaged);
        assert!(matches!(
            apply(parent.clone(), &damaged).unwrap_err(),
            ImageError::PageHashMismatch {
                memory: 0,
                page: 1,
                ..
            }
        ));

        // The stored page's bytes: garbage for LZ4, or another page.
        let body = header_len(&delta);
        for at in body..delta.len() - CHECKSUM_LEN {
            let mut damaged = delta.clone();
            damaged[at] ^= 0x40;
            reseal(&mut damaged);
            let err = apply(parent.clone(), &damaged).unwrap_err();
            assert!(
                matches!(
                    err,
                    ImageError::Decompress { page: 1, .. }
                        | ImageError::PageHashMismatch { page: 1, .. }
                ),
                "byte {at}: {err}"
            );
        }
    }

    #[test]
    fn one_percent_of_words_changed_makes_a_small_delta() {
        const MEMORY: usize = 16 << 20;
        let mut rng = Rng(7);
        let mut bytes = vec![0u8; MEMORY];
        rng.fill(&mut bytes);
        let before = Image {
            module_hash: MODULE.module_hash,
            rewrite_version: MODULE.rewrite_version,
            memories: vec![MemoryImage { index: 0, bytes }],
            globals: vec![],
        };
        let mut baseline = Baseline::new(ImagePolicy::default());
        let mut full = Vec::new();
        let first = baseline
            .snapshot(&before.as_image_ref(), CheckpointId(1), &mut full)
            .unwrap();
        assert_eq!(first.kind, ImageKind::Full);

        let mut after = before.clone();
        let words = MEMORY / 8;
        for _ in 0..words / 100 {
            let word = (rng.next_u64() as usize) % words;
            let value = rng.next_u64().to_le_bytes();
            after.memories[0].bytes[word * 8..word * 8 + 8].copy_from_slice(&value);
        }
        let mut delta = Vec::new();
        let second = baseline
            .snapshot(&after.as_image_ref(), CheckpointId(2), &mut delta)
            .unwrap();
        eprintln!(
            "16 MiB memory, 1 % of its 8-byte words rewritten: {} of {} pages changed, full image {} bytes, delta {} bytes ({:.2} %)",
            second.changed_pages,
            second.pages,
            full.len(),
            delta.len(),
            delta.len() as f64 * 100.0 / full.len() as f64
        );
        assert_eq!(second.kind, ImageKind::Delta);
        assert_eq!(
            second.changed_pages, second.pages,
            "every page has changed words"
        );
        assert!(
            delta.len() * 20 < full.len(),
            "a delta of {} bytes is not well below the full image's {}",
            delta.len(),
            full.len()
        );
        let rebuilt = reconstruct(full.clone(), [&delta[..]]).unwrap();
        assert_eq!(rebuilt.image, after);
        assert_eq!(baseline.previous().unwrap().image, after);
        assert_eq!(baseline.retained_bytes(), MEMORY);
    }

    #[test]
    fn the_policy_bounds_chains_and_delta_sizes() {
        let policy = ImagePolicy::default();
        assert!(policy.allows_delta_after(0));
        assert!(policy.allows_delta_after(8));
        assert!(!policy.allows_delta_after(9), "10 images per chain at most");
        for every in [0, 1] {
            let always_full = ImagePolicy {
                full_every: every,
                ..policy
            };
            assert!(!always_full.allows_delta_after(0));
        }
        assert!(!policy.delta_too_large(50, 100));
        assert!(policy.delta_too_large(51, 100));
        // No overflow at the extremes.
        assert!(policy.delta_too_large(usize::MAX, usize::MAX));
        let never = ImagePolicy {
            max_delta_percent: 100,
            ..policy
        };
        assert!(!never.delta_too_large(usize::MAX, usize::MAX));
    }

    #[test]
    fn baseline_falls_back_to_full_images_and_says_why() {
        let mut current = image(8, &[4]);
        let mut baseline = Baseline::new(ImagePolicy::default());
        let mut out = Vec::new();
        let s = baseline
            .snapshot(&current.as_image_ref(), CheckpointId(1), &mut out)
            .unwrap();
        assert_eq!(s.full_reason, Some(FullReason::NoBaseline));

        // Every page rewritten with noise: the delta would be as big as the image.
        let mut rng = Rng(9);
        rng.fill(&mut current.memories[0].bytes);
        let s = baseline
            .snapshot(&current.as_image_ref(), CheckpointId(2), &mut out)
            .unwrap();
        assert_eq!(s.full_reason, Some(FullReason::DeltaTooLarge));
        assert_eq!(s.changed_pages, 4);
        assert_eq!(decode_full(&out).unwrap().image_ref().to_image(), current);

        // A small change after it is a delta against that full image.
        current.memories[0].bytes[3] ^= 1;
        let s = baseline
            .snapshot(&current.as_image_ref(), CheckpointId(3), &mut out)
            .unwrap();
        assert_eq!(
            (s.kind, s.parent, s.base, s.chain_length, s.changed_pages),
            (
                ImageKind::Delta,
                Some(CheckpointId(2)),
                CheckpointId(2),
                1,
                1
            )
        );

        // The checkpoint of that delta was aborted: the next image must not need it.
        baseline.reset();
        let s = baseline
            .snapshot(&current.as_image_ref(), CheckpointId(4), &mut out)
            .unwrap();
        assert_eq!(s.full_reason, Some(FullReason::NoBaseline));

        // Another layout (one global more) cannot be a delta.
        let mut globals = current.globals.clone();
        globals.push(GlobalValue {
            index: 20,
            value: GlobalBits::I32(1),
        });
        let other = ImageRef {
            globals: &globals,
            ..current.as_image_ref()
        };
        let s = baseline
            .snapshot(&other, CheckpointId(5), &mut out)
            .unwrap();
        assert_eq!(s.full_reason, Some(FullReason::LayoutChanged));

        // An id that does not grow is a caller's bug, and resets the baseline.
        let err = baseline
            .snapshot(&other, CheckpointId(5), &mut out)
            .unwrap_err();
        assert!(matches!(err, ImageError::NotAfterParent { .. }), "{err}");
        assert!(baseline.previous().is_none());
    }

    #[test]
    fn a_restored_chain_continues_after_resume() {
        let mut current = image(10, &[2]);
        let mut baseline = Baseline::new(no_size_limit(4));
        let mut files = Vec::new();
        for id in 1..=3u64 {
            current.memories[0].bytes[id as usize] ^= 1;
            let mut out = Vec::new();
            baseline
                .snapshot(&current.as_image_ref(), CheckpointId(id), &mut out)
                .unwrap();
            files.push(out);
        }
        let restored = reconstruct(files[0].clone(), files[1..].iter().map(Vec::as_slice)).unwrap();
        assert_eq!(restored.chain_length, 2);
        let mut resumed = Baseline::resume(no_size_limit(4), restored.clone());
        current.memories[0].bytes[PAGE_SIZE] ^= 1;
        let mut out = Vec::new();
        let s = resumed
            .snapshot(&current.as_image_ref(), CheckpointId(7), &mut out)
            .unwrap();
        assert_eq!(
            (s.kind, s.parent, s.chain_length),
            (ImageKind::Delta, Some(CheckpointId(3)), 3)
        );
        assert_eq!(apply(restored, &out).unwrap().image, current);
        // The chain is full: the next one starts a new chain.
        let s = resumed
            .snapshot(&current.as_image_ref(), CheckpointId(8), &mut out)
            .unwrap();
        assert_eq!(s.full_reason, Some(FullReason::ChainLimit));
        assert_eq!(s.changed_pages, 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn deltas_rebuild_the_current_image(
            seed in any::<u64>(),
            pages in prop::collection::vec(0usize..3, 0..3),
            changes in prop::collection::vec(change(), 0..24),
        ) {
            let before = image(seed, &pages);
            let (_, parent) = full_of(&before, 10);
            let mut current = before.clone();
            mutate(&mut current, &changes);
            let (delta, outcome) = delta_of(&parent, &current, 11);
            prop_assert_eq!(&outcome.stored, &really_changed(&before, &current));
            let rebuilt = apply(parent, &delta).unwrap();
            prop_assert_eq!(&rebuilt.image, &current);
            prop_assert_eq!(&rebuilt.pages, &PageTable::of(&current.as_image_ref()).unwrap());
            prop_assert_eq!(rebuilt.checkpoint, CheckpointId(11));
            prop_assert_eq!(rebuilt.base, CheckpointId(10));
        }

        #[test]
        fn chains_rebuild_every_image_and_restart_every_k(
            seed in any::<u64>(),
            pages in prop::collection::vec(1usize..3, 1..3),
            k in 1u32..5,
            steps in prop::collection::vec(prop::collection::vec(change(), 0..8), 1..10),
        ) {
            let mut current = image(seed, &pages);
            let mut baseline = Baseline::new(no_size_limit(k));
            let mut chain: Vec<Vec<u8>> = Vec::new();
            for (step, changes) in steps.iter().enumerate() {
                mutate(&mut current, changes);
                let id = CheckpointId(step as u64 * 3 + 1);
                let mut out = Vec::new();
                let s = baseline.snapshot(&current.as_image_ref(), id, &mut out).unwrap();
                let expected_length = step as u32 % k;
                prop_assert_eq!(s.chain_length, expected_length);
                prop_assert_eq!(s.kind == ImageKind::Full, expected_length == 0);
                prop_assert_eq!(s.len, out.len());
                if s.kind == ImageKind::Full {
                    chain.clear();
                }
                chain.push(out);
                let rebuilt = reconstruct(chain[0].clone(), chain[1..].iter().map(Vec::as_slice)).unwrap();
                prop_assert_eq!(&rebuilt.image, &current);
                prop_assert_eq!(rebuilt.checkpoint, id);
                prop_assert_eq!(baseline.previous(), Some(&rebuilt));
            }
        }

        #[test]
        fn any_flipped_byte_of_a_delta_is_detected(
            seed in any::<u64>(),
            pages in prop::collection::vec(1usize..3, 1..3),
            changes in prop::collection::vec(change(), 1..16),
            offset in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let before = image(seed, &pages);
            let (_, parent) = full_of(&before, 1);
            let mut current = before.clone();
            mutate(&mut current, &changes);
            let (delta, _) = delta_of(&parent, &current, 2);
            let at = offset.index(delta.len());
            let mut damaged = delta.clone();
            damaged[at] ^= 1 << bit;
            prop_assert!(apply(parent, &damaged).is_err(), "flip at {} of {} not detected", at, delta.len());
        }
    }
}
