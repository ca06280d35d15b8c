use proptest::prelude::*;

use super::*;

/// A small deterministic generator (SplitMix64, the generator source's) for test memories.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next_u64(&mut self) -> u64 {
        crate::connectors::generator::splitmix64_next(&mut self.0)
    }

    pub(crate) fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

pub(crate) const MODULE: ModuleIdentity = ModuleIdentity {
    module_hash: 0x0123_4567_89ab_cdef_fedc_ba98_7654_3210,
    rewrite_version: 1,
};

/// An image of `pages` pages per memory, each page zero, random or sparsely written by
/// `seed`, and some globals of every type.
pub(crate) fn image(seed: u64, pages: &[usize]) -> Image {
    let mut rng = Rng(seed);
    let memories = pages
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let mut bytes = vec![0u8; n * PAGE_SIZE];
            for page in bytes.chunks_exact_mut(PAGE_SIZE) {
                match rng.next_u64() % 3 {
                    0 => {}
                    1 => rng.fill(page),
                    _ => {
                        for _ in 0..16 {
                            let at = (rng.next_u64() as usize) % PAGE_SIZE;
                            page[at] = rng.next_u64() as u8;
                        }
                    }
                }
            }
            MemoryImage {
                index: i as u32 * 2,
                bytes,
            }
        })
        .collect();
    let globals = vec![
        GlobalValue {
            index: 0,
            value: GlobalBits::I32(rng.next_u64() as u32),
        },
        GlobalValue {
            index: 3,
            value: GlobalBits::I64(rng.next_u64()),
        },
        GlobalValue {
            index: 4,
            value: GlobalBits::F32(f32::NAN.to_bits() | 1),
        },
        GlobalValue {
            index: 7,
            value: GlobalBits::F64((-0.0f64).to_bits()),
        },
        GlobalValue {
            index: 9,
            value: GlobalBits::V128(u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())),
        },
    ];
    Image {
        module_hash: MODULE.module_hash,
        rewrite_version: MODULE.rewrite_version,
        memories,
        globals,
    }
}

fn encode(image: &Image, checkpoint: u64) -> Vec<u8> {
    let mut out = Vec::new();
    encode_full(&image.as_image_ref(), CheckpointId(checkpoint), &mut out).unwrap();
    out
}

#[test]
fn an_image_made_owned_in_its_own_buffer_equals_a_copy_of_it() {
    for pages in [&[][..], &[0], &[3], &[2, 5], &[1, 0, 4]] {
        let image = image(7, pages);
        let bytes = encode(&image, 5);
        let copied = decode_full(&bytes).unwrap().to_checkpoint_image();
        let kept = into_checkpoint_image(bytes).unwrap();
        assert_eq!(kept, copied, "memories of {pages:?} pages");
        assert_eq!(kept.image, image);
    }
    let mut damaged = encode(&image(7, &[1]), 5);
    damaged[30] ^= 1;
    assert!(
        into_checkpoint_image(damaged).is_err(),
        "the header is checked"
    );
}

#[test]
fn layout_matches_the_documented_offsets() {
    let image = image(1, &[1]);
    let bytes = encode(&image, 42);
    assert_eq!(&bytes[..8], b"WEIRIMAG");
    assert_eq!(bytes[8..12], 1u32.to_le_bytes());
    assert_eq!(bytes[12..16], 1u32.to_le_bytes(), "kind full");
    let header_len = FIXED_HEADER_LEN + 12 + 5 * 24 + 8 + 8;
    assert_eq!(bytes[16..24], (header_len as u64).to_le_bytes());
    assert_eq!(bytes[24..40], MODULE.module_hash.to_le_bytes());
    assert_eq!(bytes[40..44], 1u32.to_le_bytes());
    assert_eq!(bytes[44..52], 42u64.to_le_bytes(), "checkpoint");
    assert_eq!(bytes[52..60], 42u64.to_le_bytes(), "base");
    assert_eq!(bytes[60..64], [0; 4], "chain length");
    assert_eq!(bytes[64..80], [0; 16], "parent and digest");
    assert_eq!(bytes[80..84], 1u32.to_le_bytes(), "memories");
    assert_eq!(bytes[84..88], 5u32.to_le_bytes(), "globals");
    assert_eq!(bytes[88..92], 0u32.to_le_bytes(), "memory index");
    assert_eq!(bytes[92..100], (PAGE_SIZE as u64).to_le_bytes());
    assert_eq!(bytes[100..104], 0u32.to_le_bytes(), "global index");
    assert_eq!(bytes[104..108], 0x7fu32.to_le_bytes(), "i32");
    let table = 100 + 5 * 24;
    let page = &image.memories[0].bytes[..];
    assert_eq!(bytes[table..table + 8], page_hash(page).to_le_bytes());
    let sum = xxh3_64(&bytes[..header_len - 8]);
    assert_eq!(bytes[header_len - 8..header_len], sum.to_le_bytes());
    assert_eq!(&bytes[header_len..], page);
    assert_eq!(bytes.len(), full_encoded_len(&image.as_image_ref()));
}

#[test]
fn module_mismatch_names_both_hashes_and_what_to_do() {
    let bytes = encode(&image(2, &[1]), 1);
    let header = read_header(&bytes).unwrap();
    let other = ModuleIdentity {
        module_hash: 0xdead_beef,
        rewrite_version: 1,
    };
    let message = header.check_module(&other).unwrap_err().to_string();
    assert_eq!(
        message,
        "image was taken from module hash 0123456789abcdeffedcba9876543210 but this module is 000000000000000000000000deadbeef: restore it with the module it was taken from, or start without restoring"
    );
    let newer = ModuleIdentity {
        rewrite_version: 2,
        ..MODULE
    };
    let err = header.check_module(&newer).unwrap_err();
    assert_eq!(
        err,
        ImageError::RewriteVersionMismatch {
            image: 1,
            module: 2
        }
    );
    header.check_module(&MODULE).unwrap();
}

#[test]
fn encoder_refuses_partial_pages_and_unordered_indices() {
    let mut image = image(3, &[1, 1]);
    image.memories[1].bytes.push(0);
    let mut out = Vec::new();
    let err = encode_full(&image.as_image_ref(), CheckpointId(1), &mut out).unwrap_err();
    assert_eq!(
        err.to_string(),
        "memory 2 is 65537 bytes, not a whole number of 64 KiB pages"
    );
    image.memories[1].bytes.pop();
    image.memories.swap(0, 1);
    let err = encode_full(&image.as_image_ref(), CheckpointId(1), &mut out).unwrap_err();
    assert_eq!(
        err,
        ImageError::OutOfOrder {
            what: "memories",
            previous: 2,
            next: 0
        }
    );
}

#[test]
fn a_delta_is_not_decoded_as_a_full_image_nor_garbage_as_an_image() {
    let mut bytes = encode(&image(4, &[1]), 1);
    let err = decode_full(b"WEIRSTAT\x01\0\0\0").unwrap_err();
    assert_eq!(
        err.to_string(),
        "not an image: expected magic \"WEIRIMAG\", found \"WEIRSTAT\""
    );
    assert!(matches!(
        decode_full(&bytes[..40]).unwrap_err(),
        ImageError::Truncated { .. }
    ));
    bytes[12] = 2;
    // Re-seal so that only the kind differs.
    let header_len = read_header_len(&bytes);
    seal_header(&mut bytes, header_len);
    assert!(matches!(
        decode_full(&bytes).unwrap_err(),
        ImageError::InvalidHeader { .. }
    ));
}

fn read_header_len(bytes: &[u8]) -> usize {
    u64::from_le_bytes(bytes[16..24].try_into().unwrap()) as usize
}

#[test]
fn every_flipped_header_byte_is_detected() {
    let bytes = encode(&image(5, &[1, 0, 2]), 9);
    let header_len = read_header_len(&bytes);
    for at in 0..header_len {
        for bit in [0x01, 0x80] {
            let mut damaged = bytes.clone();
            damaged[at] ^= bit;
            assert!(
                decode_full(&damaged).is_err(),
                "flip at byte {at} not detected"
            );
        }
    }
}

#[test]
fn a_flipped_memory_byte_names_its_memory_and_page() {
    let image = image(6, &[1, 3]);
    let mut bytes = encode(&image, 9);
    let header_len = read_header_len(&bytes);
    bytes[header_len + PAGE_SIZE + 2 * PAGE_SIZE + 17] ^= 4;
    let err = decode_full(&bytes).unwrap_err();
    assert!(
        matches!(
            err,
            ImageError::PageHashMismatch {
                memory: 2,
                page: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("page 2 of memory 2 does not match")
    );
}

#[test]
fn zero_page_hash_is_the_hash_of_zeros() {
    assert_eq!(zero_page_hash(), xxh3_64(&vec![0u8; PAGE_SIZE]));
}

#[test]
fn global_bits_above_the_width_are_refused() {
    assert_eq!(GlobalBits::from_raw(GlobalType::I32, 1 << 32), None);
    assert_eq!(
        GlobalBits::from_raw(GlobalType::F64, u128::from(u64::MAX)),
        Some(GlobalBits::F64(u64::MAX))
    );
    assert_eq!(
        GlobalBits::from_raw(GlobalType::V128, u128::MAX),
        Some(GlobalBits::V128(u128::MAX))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn full_images_round_trip(
        seed in any::<u64>(),
        pages in prop::collection::vec(0usize..4, 0..4),
        checkpoint in 1u64..u64::MAX,
    ) {
        let image = image(seed, &pages);
        let mut out = vec![0xaa; 3]; // a reused buffer: cleared first
        let table = encode_full(&image.as_image_ref(), CheckpointId(checkpoint), &mut out).unwrap();
        prop_assert_eq!(&table, &PageTable::of(&image.as_image_ref()).unwrap());
        let full = decode_full(&out).unwrap();
        prop_assert_eq!(full.header.kind, ImageKind::Full);
        prop_assert_eq!(full.header.checkpoint, CheckpointId(checkpoint));
        prop_assert_eq!(&full.header.pages, &table);
        prop_assert_eq!(full.image_ref().to_image(), image.clone());
        let owned = full.to_checkpoint_image();
        prop_assert_eq!(owned.chain_length, 0);
        prop_assert_eq!(owned.base, CheckpointId(checkpoint));
        prop_assert_eq!(owned.image, image);
    }

    #[test]
    fn any_flipped_byte_of_a_full_image_is_detected(
        seed in any::<u64>(),
        pages in prop::collection::vec(0usize..3, 1..3),
        in_header in any::<bool>(),
        offset in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let bytes = encode(&image(seed, &pages), 5);
        let header_len = read_header_len(&bytes);
        let at = if in_header { offset.index(header_len) } else { offset.index(bytes.len()) };
        let mut damaged = bytes.clone();
        damaged[at] ^= 1 << bit;
        prop_assert!(decode_full(&damaged).is_err(), "flip at {} of {} not detected", at, bytes.len());
    }

    #[test]
    fn cut_or_extended_full_images_are_refused(
        seed in any::<u64>(),
        cut in any::<prop::sample::Index>(),
    ) {
        let bytes = encode(&image(seed, &[1]), 5);
        let at = cut.index(bytes.len());
        prop_assert!(decode_full(&bytes[..at]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        prop_assert!(
            matches!(decode_full(&longer).unwrap_err(), ImageError::TrailingBytes { .. }),
            "an extra byte must be named as trailing"
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512), magic in any::<bool>()) {
        let mut bytes = bytes;
        if magic && bytes.len() >= 12 {
            bytes[..8].copy_from_slice(&IMAGE_MAGIC);
            bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
        }
        let _ = decode_full(&bytes);
        let _ = read_header(&bytes);
    }
}
