//! Replays the fuzz targets' inputs on stable Rust, so `cargo test --workspace` checks the
//! same properties as `scripts/fuzz.sh` without nightly or libFuzzer:
//!
//! - every committed input: the seed corpora `fuzz/corpus/<target>/` and the crash inputs
//!   fixed since, `fuzz/regressions/<target>/`;
//! - a few thousand generated inputs per target (fewer for the restore target, whose inputs
//!   each instantiate guests): random bytes, and committed inputs mutated the way libFuzzer
//!   mutates them (bytes flipped, inserted, deleted, cut; dictionary tokens inserted).

use std::fs;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestRunner};
use weir_fuzz_checks::guest_restore::RestoreTarget;
use weir_fuzz_checks::{TARGETS, batch_codec, checkpoint_metadata, job_file};

/// The `fuzz/` folder.
fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every committed input of `target`, with its path: corpus first, then regressions.
fn committed_inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut inputs = Vec::new();
    for kind in ["corpus", "regressions"] {
        let dir = fuzz_dir().join(kind).join(target);
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
        paths.sort();
        for path in paths {
            let bytes = fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            inputs.push((path, bytes));
        }
    }
    inputs
}

/// The tokens of a libFuzzer dictionary (`fuzz/dicts/<target>.dict`), if there is one.
fn dictionary(target: &str) -> Vec<Vec<u8>> {
    let path = fuzz_dir().join("dicts").join(format!("{target}.dict"));
    let Ok(text) = fs::read_to_string(&path) else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|line| {
            let quoted = line.trim().strip_prefix('"')?.strip_suffix('"')?;
            Some(unescape(quoted))
        })
        .collect()
}

/// Undoes a dictionary entry's escapes: `\\`, `\"` and `\xNN`.
fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'x') => {
                let hex: Vec<u8> = bytes.by_ref().take(2).collect();
                let hex = std::str::from_utf8(&hex).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
            }
            Some(other) => out.push(other),
            None => out.push(b'\\'),
        }
    }
    out
}

/// Runs `check` on every committed input of `target`, naming the input that fails.
fn replay(target: &str, check: impl Fn(&[u8])) {
    let inputs = committed_inputs(target);
    assert!(
        !inputs.is_empty(),
        "no committed inputs for {target} in {}",
        fuzz_dir().join("corpus").join(target).display()
    );
    for (path, bytes) in inputs {
        if let Err(panic) = panic::catch_unwind(AssertUnwindSafe(|| check(&bytes))) {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("(no message)");
            panic!("{target}: {} fails: {message}", path.display());
        }
    }
}

/// One libFuzzer-like edit of an input.
#[derive(Debug, Clone)]
enum Edit {
    /// XOR the byte at a position with a non-zero mask.
    Flip(Index, u8),
    /// Insert a byte.
    Insert(Index, u8),
    /// Remove a byte.
    Remove(Index),
    /// Keep only a prefix.
    Cut(Index),
    /// Insert a dictionary token.
    Token(Index, Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<Index>(), 1..=u8::MAX).prop_map(|(i, m)| Edit::Flip(i, m)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<Index>().prop_map(Edit::Remove),
        any::<Index>().prop_map(Edit::Cut),
        (any::<Index>(), any::<Index>()).prop_map(|(i, t)| Edit::Token(i, t)),
    ]
}

/// `seed` with `edits` applied in order.
fn mutate(seed: &[u8], edits: &[Edit], tokens: &[Vec<u8>]) -> Vec<u8> {
    let mut bytes = seed.to_vec();
    for edit in edits {
        let at = |i: &Index, len: usize| i.index(len + 1);
        match edit {
            Edit::Flip(i, mask) if !bytes.is_empty() => {
                let i = i.index(bytes.len());
                bytes[i] ^= mask;
            }
            Edit::Insert(i, b) => bytes.insert(at(i, bytes.len()), *b),
            Edit::Remove(i) if !bytes.is_empty() => {
                bytes.remove(i.index(bytes.len()));
            }
            Edit::Cut(i) => bytes.truncate(at(i, bytes.len())),
            Edit::Token(i, t) if !tokens.is_empty() => {
                let token = &tokens[t.index(tokens.len())];
                let i = at(i, bytes.len());
                bytes.splice(i..i, token.iter().copied());
            }
            _ => {}
        }
    }
    bytes
}

/// Runs `check` on `cases` generated inputs of `target`: half random bytes, half committed
/// inputs with one to eight edits. Seeded by proptest (set `PROPTEST_RNG_SEED` to vary it);
/// a failure is shrunk and reported with its input.
fn generated(target: &str, cases: u32, check: impl Fn(&[u8])) {
    let seeds: Vec<Vec<u8>> = committed_inputs(target)
        .into_iter()
        .map(|(_, b)| b)
        .collect();
    let tokens = dictionary(target);
    let strategy = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        (any::<Index>(), prop::collection::vec(edit(), 1..8),).prop_map(move |(seed, edits)| {
            mutate(&seeds[seed.index(seeds.len())], &edits, &tokens)
        }),
    ];
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    TestRunner::new(config)
        .run(&strategy, |bytes| {
            check(&bytes);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{target}: {e}"));
}

/// The restore target, compiled once for the two tests that use it.
static RESTORE: LazyLock<RestoreTarget> = LazyLock::new(RestoreTarget::new);

#[test]
fn every_target_has_a_seed_corpus() {
    for target in TARGETS {
        assert!(
            !committed_inputs(target).is_empty(),
            "fuzz/corpus/{target} is empty"
        );
    }
}

#[test]
fn batch_codec_holds_for_committed_inputs() {
    replay("batch_codec", batch_codec::check);
}

#[test]
fn batch_codec_holds_for_generated_inputs() {
    generated("batch_codec", 4000, batch_codec::check);
}

#[test]
fn checkpoint_metadata_holds_for_committed_inputs() {
    replay("checkpoint_metadata", checkpoint_metadata::check);
}

#[test]
fn checkpoint_metadata_holds_for_generated_inputs() {
    generated("checkpoint_metadata", 3000, checkpoint_metadata::check);
}

#[test]
fn job_file_holds_for_committed_inputs() {
    replay("job_file", job_file::check);
}

#[test]
fn job_file_holds_for_generated_inputs() {
    generated("job_file", 3000, job_file::check);
}

#[test]
fn guest_restore_holds_for_committed_inputs() {
    replay("guest_restore", |bytes| RESTORE.check(bytes));
}

#[test]
fn guest_restore_holds_for_generated_inputs() {
    generated("guest_restore", 300, |bytes| RESTORE.check(bytes));
}
