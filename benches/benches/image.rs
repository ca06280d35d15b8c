//! What image checkpoints cost the host, without wasm: hashing pages, encoding and decoding a
//! full image, encoding a delta and applying it (`weir::wasm::image`, issue 8).
//!
//! Run with `cargo bench -p weir-benches --bench image`. Groups, each at memory sizes of 1, 10
//! and 100 MB (whole 64 KiB pages; throughput is in bytes of memory):
//!
//! - `image/hash`: the page table of a memory (xxh3-64 of every page) — the part of every
//!   incremental snapshot that reads the whole memory.
//! - `image/encode-full`: `encode_full` into a reused buffer — the synchronous part of a full
//!   image snapshot: one copy out of memory, each page hashed in cache.
//! - `image/decode-full`: `decode_full`, every page verified — a restore from a full image,
//!   before the bytes are written into the instance.
//! - `image/encode-delta`: `encode_delta` against the previous image when 1 % of the pages
//!   changed, each in 16 scattered 8-byte words (a hash map whose entries were updated).
//! - `image/apply`: `apply` of that delta to the previous image (the clone of the previous
//!   image each iteration consumes is made outside the measurement).
//!
//! The memory holds pseudo-random bytes, as a well-filled heap does: nothing of a full image
//! compresses, and a changed page is all zeros but for its changed words once XOR-ed.

use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion, Throughput};
use weir::ids::CheckpointId;
use weir::wasm::image::delta::{apply, encode_delta};
use weir::wasm::image::format::{
    CheckpointImage, GlobalBits, GlobalValue, Image, MemoryImage, PAGE_SIZE, PageTable,
    decode_full, encode_full,
};
use weir_test_servers::rng::Rng;

/// Memory sizes, in MB (rounded down to whole pages).
const SIZES_MB: [usize; 3] = [1, 10, 100];

/// A memory of `mb` MB of pseudo-random bytes, with a few globals.
fn image(mb: usize, rng: &mut Rng) -> Image {
    let pages = mb * 1_000_000 / PAGE_SIZE;
    let mut bytes = vec![0u8; pages * PAGE_SIZE];
    for word in bytes.chunks_exact_mut(8) {
        word.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    Image {
        module_hash: 0x5eed,
        rewrite_version: 1,
        memories: vec![MemoryImage { index: 0, bytes }],
        globals: vec![
            GlobalValue {
                index: 0,
                value: GlobalBits::I32(1 << 20),
            },
            GlobalValue {
                index: 1,
                value: GlobalBits::I64(42),
            },
        ],
    }
}

/// `image` with 1 % of its pages (at least one) changed in 16 words each.
fn one_percent_dirty(image: &Image, rng: &mut Rng) -> Image {
    let mut next = image.clone();
    let memory = &mut next.memories[0].bytes;
    let pages = memory.len() / PAGE_SIZE;
    for _ in 0..(pages / 100).max(1) {
        let page = (rng.next_u64() as usize) % pages;
        for _ in 0..16 {
            let word = (rng.next_u64() as usize) % (PAGE_SIZE / 8);
            let at = page * PAGE_SIZE + word * 8;
            memory[at..at + 8].copy_from_slice(&rng.next_u64().to_le_bytes());
        }
    }
    next
}

fn images(c: &mut Criterion) {
    let mut rng = Rng::new(1);
    for mb in SIZES_MB {
        let previous = image(mb, &mut rng);
        let current = one_percent_dirty(&previous, &mut rng);
        let bytes = previous.memories[0].bytes.len() as u64;

        let mut full = Vec::new();
        encode_full(&previous.as_image_ref(), CheckpointId(1), &mut full).expect("full image");
        let parent: CheckpointImage = decode_full(&full).expect("decodes").to_checkpoint_image();
        let mut delta = Vec::new();
        encode_delta(
            &parent,
            &current.as_image_ref(),
            CheckpointId(2),
            &mut delta,
        )
        .expect("delta");

        let mut group = c.benchmark_group("image");
        group.throughput(Throughput::Bytes(bytes));
        if mb >= 10 {
            group.sample_size(10);
        }
        let id = |name: &str| BenchmarkId::new(name, format!("{mb}MB"));

        group.bench_function(id("hash"), |b| {
            b.iter(|| PageTable::of(&current.as_image_ref()).expect("whole pages"))
        });
        let mut out = Vec::new();
        group.bench_function(id("encode-full"), |b| {
            b.iter(|| {
                encode_full(&current.as_image_ref(), CheckpointId(3), &mut out).expect("encodes")
            })
        });
        group.bench_function(id("decode-full"), |b| {
            b.iter(|| decode_full(&full).expect("decodes").memories.len())
        });
        group.bench_function(id("encode-delta"), |b| {
            b.iter(|| {
                encode_delta(&parent, &current.as_image_ref(), CheckpointId(2), &mut out)
                    .expect("encodes")
            })
        });
        group.bench_function(id("apply"), |b| {
            b.iter_batched(
                || parent.clone(),
                |parent| apply(parent, &delta).expect("applies"),
                BatchSize::LargeInput,
            )
        });
        group.finish();
        eprintln!(
            "image {mb} MB: full image {} bytes, delta with 1 % of pages changed {} bytes",
            full.len(),
            delta.len()
        );
    }
}

fn main() {
    // `criterion_group!` would generate an undocumented public function; this is the same.
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    images(&mut criterion);
    criterion.final_summary();
}
