//! Image checkpoints in real jobs, for the count of every language and runtime: each runs in a
//! job checkpointed as an image of its memory and globals, is killed by SIGKILL right after a
//! snapshot, and is restarted with `--restore latest`; the committed output must equal that of
//! an uninterrupted run.
//!
//! The guests are the cross-language counts (`tests/all/languages.rs`), each twice: with
//! `checkpoint = "image"` (their snapshot exports unused), and with `weir_snapshot` and
//! `weir_restore` removed from their exports, so that the default `checkpoint = "auto"` must
//! take images of a guest that cannot checkpoint itself; and `examples/c/image_count.c`, which
//! has no snapshot code at all: ordinary C with wasi-libc's malloc and a constructor. Restoring
//! it must bring malloc's heap back without running the constructor again. All counts emit the
//! same records for the same input, so one reference run serves every guest.

use std::ops::Range;
use std::path::{Path, PathBuf};

use wasm_encoder::{Encode as _, RawSection};
use wasmparser::{Parser, Payload};

use weir_tests::guests;

use crate::support::{
    CLI_TIMEOUT, GeneratorSpec, JobFile, Sandbox, Weir, assert_same_output, checkpointed,
    committed_lines, reference_output, run_cli,
};

/// The job: a generator (p=2) → key-hash → `count` (p=2) → forward → exactly-once file sink,
/// checkpoints every 100 ms, `count` checkpointed as `capture` says.
fn job(sandbox: &Sandbox, module: &str, capture: &str, rate: Option<f64>) -> JobFile {
    let generator = GeneratorSpec {
        parallelism: 2,
        seed: 21,
        count: Some(12_000),
        rate,
        // Keys keep arriving new until the end, so the guests allocate after a restore: an image
        // that lost the allocator's state (often in a global) would corrupt their tables.
        keys: 6_000,
    };
    let job = JobFile::new("imagecount")
        .generator("gen", &generator)
        .operator("count", module, 2, None, ("gen", "key-hash"))
        .state_capture(capture)
        .file_sink("out", &sandbox.out_dir(), 2, ("count", "forward"));
    checkpointed(job, sandbox, "100ms", 2).checkpoint("min_pause", "0ms")
}

#[test]
fn every_language_restores_from_images_after_a_kill_with_the_undisturbed_output() {
    let reference = Sandbox::new("image-guests-reference");
    job(&reference, guests::COUNT, "exports", None).write(&reference.job_path());
    let expected = reference_output(&reference, CLI_TIMEOUT);
    assert_eq!(expected.len(), 12_000);

    let mut cases = vec![
        ("rust", Some(guests::COUNT), "image"),
        ("wat", Some(guests::WAT_COUNT), "image"),
        ("c", guests::C_COUNT, "image"),
        ("c-libc, no snapshot code", guests::C_LIBC_COUNT, "auto"),
        ("zig", guests::ZIG_COUNT, "image"),
        ("assemblyscript-stub", guests::AS_COUNT, "image"),
        ("assemblyscript-minimal", guests::AS_COUNT_MINIMAL, "image"),
        (
            "assemblyscript-incremental",
            guests::AS_COUNT_INCREMENTAL,
            "image",
        ),
    ];
    let skipped: Vec<&str> = cases
        .iter()
        .filter(|(_, path, _)| path.is_none())
        .map(|(name, _, _)| *name)
        .collect();
    if !skipped.is_empty() {
        crate::support::skip(
            &format!("the image tests of guests {skipped:?}"),
            "they were not built",
        );
    }
    cases.retain(|(_, path, _)| path.is_some());

    // Every guest that has snapshot exports, again without them.
    let stripped_dir = Sandbox::new("image-guests-stripped");
    let stripped: Vec<(String, PathBuf)> = cases
        .iter()
        .filter(|(_, _, capture)| *capture == "image")
        .map(|(name, path, _)| {
            let file = stripped_dir.join(&format!("{}.wasm", name.replace(' ', "-")));
            without_state_exports(Path::new(path.unwrap()), &file);
            (format!("{name}, snapshot exports removed"), file)
        })
        .collect();
    let cases = cases
        .into_iter()
        .map(|(name, path, capture)| (name.to_string(), PathBuf::from(path.unwrap()), capture))
        .chain(
            stripped
                .into_iter()
                .map(|(name, file)| (name, file, "auto")),
        );

    for (name, module, capture) in cases {
        let module = module.to_str().expect("UTF-8 paths");
        let sandbox = Sandbox::new(&format!("image-guests-{}", name.replace([' ', ','], "")));
        job(&sandbox, module, capture, Some(8_000.0)).write(&sandbox.job_path());
        // Killed after the 14th snapshot of any task (6 tasks: in the third checkpoint, after two
        // complete ones): the job is mid-way.
        let killed = Weir::killed_at(&sandbox, "after-snapshot:14");
        assert!(
            killed
                .stderr
                .contains("operator `count`: checkpoints take an image"),
            "{name}: the operator must be checkpointed as an image\n{}",
            killed.stderr
        );
        let restored = run_cli(
            &sandbox.job_path(),
            &["--restore", "latest"],
            &sandbox.join("restored.log"),
        );
        restored.assert_code(0, &format!("{name}: the restored run"));
        assert!(
            restored.stderr.contains("restoring from"),
            "{name}: the second run must restore a checkpoint\n{}",
            restored.stderr
        );
        let actual = committed_lines(&sandbox.out_dir());
        assert_same_output(&actual, &expected, &format!("{name} restored from images"));
    }
}

/// Writes to `to` the module at `from` (binary or WAT) with `weir_snapshot` and `weir_restore`
/// removed from its exports: every other byte as it was, so the guest's code and state are
/// unchanged.
fn without_state_exports(from: &Path, to: &Path) {
    const EXPORT_SECTION: u8 = 7;
    let source = std::fs::read(from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
    let bytes = wat::parse_bytes(&source).expect("a built guest is wasm or WAT");
    let mut module = wasm_encoder::Module::new();
    let mut removed = 0;
    for payload in Parser::new(0).parse_all(&bytes) {
        let payload = payload.expect("a built guest parses");
        let Some((id, range)) = payload.as_section() else {
            continue;
        };
        let Payload::ExportSection(reader) = &payload else {
            module.section(&RawSection {
                id,
                data: &bytes[range],
            });
            continue;
        };
        // Each export's bytes run from its offset to the next one's (or the section's end).
        let entries: Vec<(usize, String)> = reader
            .clone()
            .into_iter_with_offsets()
            .map(|entry| {
                let (offset, export) = entry.expect("a built guest's exports parse");
                (offset, export.name.to_string())
            })
            .collect();
        let ends = entries
            .iter()
            .skip(1)
            .map(|(offset, _)| *offset)
            .chain([range.end]);
        let kept: Vec<Range<usize>> = entries
            .iter()
            .zip(ends)
            .filter(|((_, name), _)| name != "weir_snapshot" && name != "weir_restore")
            .map(|((start, _), end)| *start..end)
            .collect();
        removed += entries.len() - kept.len();
        let mut data = Vec::new();
        u32::try_from(kept.len()).unwrap().encode(&mut data);
        for entry in kept {
            data.extend_from_slice(&bytes[entry]);
        }
        module.section(&RawSection {
            id: EXPORT_SECTION,
            data: &data,
        });
    }
    assert!(
        removed > 0,
        "{} exports no snapshot or restore",
        from.display()
    );
    std::fs::write(to, module.finish()).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
}
