//! The properties Weir's fuzz targets check, in a library that builds on stable Rust.
//!
//! Each module is one fuzz target's body: a function from arbitrary bytes to `()` that
//! **panics when a property fails** and returns quietly otherwise. The parsers under test must
//! never panic themselves, whatever the input, so a panic from inside them is reported the
//! same way: as a crash of the target.
//!
//! | module | code under test | properties |
//! |---|---|---|
//! | [`batch_codec`] | `weir_abi::Batch`, `InitMessage` | decoding never panics; errors agree with the input; whatever decodes re-encodes to the same bytes |
//! | [`checkpoint_metadata`] | `checkpoint::format` (the CRC-32 frame), `CheckpointMetadata::decode` | never panics; errors name the file; whatever verifies re-frames to the same bytes and decodes again to the same record |
//! | [`job_file`] | `Job::from_str` | never panics; errors point inside the text; a valid job written back with `to_toml` parses to the same job |
//! | [`guest_restore`] | `GuestInstance::restore` of the Rust and WAT `count` guests | garbage state is a `GuestError` from the restore, never a host panic or a hang; a fresh instance still works |
//!
//! Two drivers run these functions: the cargo-fuzz crate in `fuzz/` (nightly, libFuzzer; see
//! `fuzz/README.md` and `scripts/fuzz.sh`), and this crate's `tests/replay.rs`, which on
//! stable replays every committed corpus and regression input and a few thousand random and
//! mutated ones, so `cargo test --workspace` keeps the properties checked without nightly.

pub mod batch_codec;
pub mod checkpoint_metadata;
pub mod guest_restore;
pub mod job_file;

/// The names of the fuzz targets, which are also the folder names of their corpora
/// (`fuzz/corpus/<target>/`) and regression inputs (`fuzz/regressions/<target>/`).
pub const TARGETS: [&str; 4] = [
    "batch_codec",
    "checkpoint_metadata",
    "job_file",
    "guest_restore",
];
