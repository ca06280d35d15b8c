//! Checkpoint and restore time against state size, on the `count` guest driven directly.
//!
//! One instance is filled with `keys` distinct keys (`key-0` …), which gives it a state of
//! about 16 bytes per key (a keyed item of the rescalable layout, docs/ABI.md §16: kind, state
//! id, length, `key-<n>`, length, count). Then, each repetition:
//!
//! 1. **snapshot** — [`GuestInstance::snapshot`]: the guest encodes its map, entry by entry, and
//!    hands it to the host, which copies it out: the synchronous part of a checkpoint;
//! 2. **write** — [`CheckpointStorage::write_state`] on [`LocalStorage`] in a temporary
//!    directory: frame + CRC-32, write, fsync, rename, fsync the directory: the asynchronous
//!    part;
//! 3. **read** — [`CheckpointStorage::read_state`]: read back and verify the frame;
//! 4. **restore** — [`GuestInstance::restore`] into an instance made for it
//!    ([`OperatorModule::instantiate_for_restore`](weir::wasm::OperatorModule), timed apart):
//!    copy in, then the guest decodes the map. The previous repetition's restored instance is
//!    dropped first, as a failed attempt's are before a restart. The first repetition is
//!    reported apart ("first restore"): its memory is new to the process, as in a new process
//!    restoring a savepoint; later ones may reuse memory an instance left (see below).
//!
//! The same state is also snapshot and restored natively through `weir_sdk::testing::Harness`
//! (the operator compiled for the host), to tell the cost of wasm from the cost of the work.
//!
//! With [`StateCapture::Image`] the same steps run on the module loaded for image checkpoints:
//! the snapshot is the host copying the guest's memory and globals out (a full image), the
//! restore the image written into the instance made for it — no guest code runs in either. The
//! state is then the guest's whole memory, not its serialised table, and there is no native
//! counterpart. The engine is built as a job's is ([`EngineOptions::image_pool`]): image
//! instances come from a pool whose slots keep their memory resident, so a restore after the
//! first writes into pages the dropped instance left; instances of the exports module are
//! allocated on demand either way.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde::Serialize;
use weir::checkpoint::layout::CheckpointLayout;
use weir::checkpoint::storage::{CheckpointStorage, LocalStorage};
use weir::ids::TaskId;
use weir::ids::{CheckpointId, CheckpointKind};
use weir::wasm::image::format::{ImageKind, decode_full, read_header};
use weir::wasm::{
    EngineOptions, GuestInstance, GuestLimits, ImagePolicy, ImagePool, InstanceContext,
    LoadOptions, ModuleSource, OperatorModule, StateCapture, WasmEngine,
};
use weir_example_count::Count;
use weir_sdk::Context;
use weir_sdk::testing::Harness;

use crate::error::BenchError;
use crate::summary::Summary;
use crate::workload::distinct_keys;

/// Records per batch while filling the state.
const FILL_BATCH: usize = 4096;

/// The limits the state benchmark runs its guests under: the defaults, except memory — 100 MB
/// of count state is ~8 M keys, several hundred MB of guest heap plus the snapshot buffer —
/// and a call timeout long enough for the largest snapshot. Set explicitly, so the benchmark
/// does not change when the defaults do.
pub fn limits() -> GuestLimits {
    GuestLimits {
        // The whole wasm32 address space: 65 536 pages of 64 KiB.
        max_memory_bytes: 4 << 30,
        call_timeout: std::time::Duration::from_secs(300),
        // An image of 100 MB of count state is the guest's whole memory, over 1 GiB.
        max_state_bytes: 4 << 30,
        ..GuestLimits::default()
    }
}

/// Keys that give the count operator about `bytes` bytes of state.
pub fn keys_for(bytes: u64) -> u64 {
    // One keyed item: kind and state id (a byte each), a 1-byte length, `key-<n>` (4 bytes +
    // the digits of n), a 1-byte length and a count of 1. Most keys have as many digits as the
    // largest, so estimate it, then refine.
    let entry = |keys: u64| 2 + 1 + 4 + u64::from(keys.max(1).ilog10() + 1) + 1 + 1;
    let first = bytes / entry(bytes / 16);
    (bytes / entry(first)).max(1)
}

/// One state size, measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateSizeResult {
    /// The size asked for, in bytes.
    pub target_bytes: u64,
    /// Distinct keys in the state.
    pub keys: u64,
    /// The snapshot's actual size, in bytes.
    pub state_bytes: u64,
    /// Filling the state through `weir_process`, seconds (once).
    pub fill_s: f64,
    /// `GuestInstance::snapshot`, ms.
    pub snapshot_ms: Summary,
    /// `LocalStorage::write_state` (frame, CRC, write, fsync, rename), ms.
    pub write_ms: Summary,
    /// Checkpoint total: snapshot + write, ms.
    pub checkpoint_ms: Summary,
    /// Making the instance to restore into (`instantiate_for_restore`; for exports that is
    /// instantiating and `weir_init`), ms (not part of restore).
    pub instantiate_ms: Summary,
    /// `LocalStorage::read_state` (read, verify), ms.
    pub read_ms: Summary,
    /// `GuestInstance::restore` into the instance made for it, ms, every repetition but the
    /// first.
    pub restore_ms: Summary,
    /// The first repetition's restore, ms: into memory new to the process.
    pub first_restore_ms: f64,
    /// Restore total: read + restore, ms.
    pub restore_total_ms: Summary,
    /// The same state snapshot natively (`Harness::snapshot`), ms; `None` for images.
    pub native_snapshot_ms: Option<Summary>,
    /// The same state restored natively into a fresh instance (`Harness::restore_into_fresh`),
    /// ms; `None` for images.
    pub native_restore_ms: Option<Summary>,
    /// How the state was captured: `exports` or `image`.
    pub capture: &'static str,
    /// Incremental images of the same state after a few keys changed; `None` for exports.
    pub deltas: Option<DeltaResult>,
}

/// Incremental images: each repetition updates [`DELTA_TOUCHED_PERCENT`] % of the keys (each
/// time others), then takes a delta against the previous image.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeltaResult {
    /// Keys updated before each delta.
    pub touched_keys: u64,
    /// `GuestInstance::snapshot_incremental` giving a delta: hashing every page, XOR and LZ4
    /// of the changed ones — the synchronous part of an incremental checkpoint, ms.
    pub snapshot_ms: Summary,
    /// The delta's size, bytes (median).
    pub delta_bytes: u64,
    /// Pages whose hash changed, of all pages (median).
    pub changed_pages: u64,
    /// Pages in the image.
    pub pages: u64,
    /// Restoring the full image alone into an instance made for it with incremental images
    /// on, as a job restores a checkpoint: the instance also keeps a copy of the image as the
    /// baseline of its next delta, ms.
    pub full_resumed_ms: Summary,
    /// Restoring the chain (the full image and one delta) the same way, ms.
    pub chain_restore_ms: Summary,
}

/// Percentage of the keys each delta repetition updates.
pub const DELTA_TOUCHED_PERCENT: u64 = 1;

/// Measures checkpoint and restore of about `target_bytes` of count state, `runs` times.
pub fn measure(
    module: &Path,
    target_bytes: u64,
    runs: usize,
    capture: StateCapture,
) -> Result<StateSizeResult, BenchError> {
    // As a job builds it: a pool for the image instances (the filled one, the one restored,
    // its predecessor, and the load-time check's).
    let limits = limits();
    let engine = WasmEngine::with_options(&EngineOptions {
        image_pool: Some(ImagePool {
            instances: 4,
            max_memory_bytes: limits.max_memory_bytes,
        }),
        ..EngineOptions::default()
    })?;
    let options = LoadOptions {
        capture,
        limits,
        ..LoadOptions::default()
    };
    let module = OperatorModule::load(&engine, ModuleSource::file(module), options)?;
    let image = module.image_layout().is_some();
    let keys = keys_for(target_bytes);

    let mut guest = module.instantiate(InstanceContext::single("count"), b"")?;
    let start = Instant::now();
    for batch in distinct_keys(0..keys, 0, FILL_BATCH) {
        guest.process(&batch)?;
    }
    let fill_s = start.elapsed().as_secs_f64();

    let dir = tempfile::tempdir().map_err(|source| BenchError::Io {
        action: "create a temporary directory",
        path: std::env::temp_dir(),
        source,
    })?;
    let storage = LocalStorage::new(CheckpointLayout::new(dir.path()));
    let task = TaskId::new("count", 0);
    let mut phases: [Vec<f64>; 5] = Default::default();
    let [snapshot_ms, write_ms, instantiate_ms, read_ms, restore_ms] = &mut phases;
    let mut state_bytes = 0;
    let mut restored: Option<GuestInstance> = None;
    // One repetition more than asked: the first restore is reported apart.
    for run in 0..=runs {
        let id = CheckpointId(run as u64 + 1);
        let (state, ms) = timed(|| guest.snapshot(id))?;
        snapshot_ms.push(ms);
        state_bytes = state.len() as u64;
        let (handle, ms) =
            timed(|| storage.write_state(CheckpointKind::Checkpoint, id, &task, &state))?;
        write_ms.push(ms);

        // The previous restored instance ends first, as a failed attempt's do.
        drop(restored.take());
        let (mut fresh, ms) =
            timed(|| module.instantiate_for_restore(InstanceContext::single("count"), b""))?;
        instantiate_ms.push(ms);
        let location = storage.layout().location(CheckpointKind::Checkpoint, id);
        let (bytes, ms) = timed(|| storage.read_state(&location, &handle))?;
        read_ms.push(ms);
        let ((), ms) = timed(|| fresh.restore(&bytes))?;
        restore_ms.push(ms);
        if run == 0 {
            if image {
                check_image_round_trip(&mut fresh, &state)?;
            } else {
                check_round_trip(&mut fresh, &state)?;
            }
        }
        storage.discard(CheckpointKind::Checkpoint, id)?;
        restored = Some(fresh);
    }
    drop(restored);
    let deltas = if image {
        Some(measure_deltas(&module, &mut guest, keys, runs)?)
    } else {
        None
    };
    let first_restore_ms = phases[4][0];
    for phase in &mut phases {
        phase.remove(0);
    }
    let [snapshot_ms, write_ms, instantiate_ms, read_ms, restore_ms] = &phases;
    drop(guest);

    let (native_snapshot_ms, native_restore_ms) = if image {
        (None, None)
    } else {
        let (snapshot, restore) = native(keys, runs)?;
        (Some(snapshot), Some(restore))
    };
    let sum = |a: &[f64], b: &[f64]| -> Vec<f64> { a.iter().zip(b).map(|(x, y)| x + y).collect() };
    let summary = |samples: &[f64]| Summary::of(samples).expect("at least one run");
    Ok(StateSizeResult {
        target_bytes,
        keys,
        state_bytes,
        fill_s,
        snapshot_ms: summary(snapshot_ms),
        write_ms: summary(write_ms),
        checkpoint_ms: summary(&sum(snapshot_ms, write_ms)),
        instantiate_ms: summary(instantiate_ms),
        read_ms: summary(read_ms),
        restore_ms: summary(restore_ms),
        first_restore_ms,
        restore_total_ms: summary(&sum(read_ms, restore_ms)),
        native_snapshot_ms: native_snapshot_ms.as_deref().map(summary),
        native_restore_ms: native_restore_ms.as_deref().map(summary),
        capture: if image { "image" } else { "exports" },
        deltas,
    })
}

/// `runs` times: takes a full image of `guest`, updates [`DELTA_TOUCHED_PERCENT`] % of its
/// `keys` keys (others each time), takes a delta, and restores the full image alone, then the
/// chain of the two, each into an instance made for it with incremental images on.
fn measure_deltas(
    module: &OperatorModule,
    guest: &mut GuestInstance,
    keys: u64,
    runs: usize,
) -> Result<DeltaResult, BenchError> {
    let policy = ImagePolicy {
        full_every: u32::MAX,
        // Measure every delta, however large.
        max_delta_percent: 100,
    };
    let touched = (keys * DELTA_TOUCHED_PERCENT / 100).max(1);
    let (mut snapshot_ms, mut full_resumed_ms, mut chain_restore_ms) =
        (Vec::new(), Vec::new(), Vec::new());
    let (mut sizes, mut changed) = (Vec::new(), Vec::new());
    let mut pages = 0;
    let mut restored: Option<GuestInstance> = None;
    for run in 0..runs as u64 {
        // A new policy forgets the previous image: the next one is full.
        guest.set_image_policy(policy);
        let full = guest.snapshot_incremental(CheckpointId(2 * run + 1_000_000))?;
        let start = (run * touched) % keys;
        for batch in distinct_keys(start..(start + touched).min(keys), 0, FILL_BATCH) {
            guest.process(&batch)?;
        }
        let (delta, ms) = timed(|| guest.snapshot_incremental(CheckpointId(2 * run + 1_000_001)))?;
        let header = read_header(&delta.state)
            .map_err(|e| BenchError::Wrong(format!("a delta does not decode: {e}")))?;
        if !full.chain.is_empty() || header.kind != ImageKind::Delta {
            return Err(BenchError::Wrong(
                "an incremental image after a full one was not a delta".to_string(),
            ));
        }
        snapshot_ms.push(ms);
        sizes.push(delta.state.len() as u64);
        pages = header.pages.page_count() as u64;
        changed.push(header.stored.iter().map(Vec::len).sum::<usize>() as u64);

        // As a job restores a checkpoint: the states handed over as read (copied here, untimed),
        // incremental images on, so that the next one may be a delta.
        for (chain, state, times) in [
            (Vec::new(), &full.state, &mut full_resumed_ms),
            (
                vec![full.state.clone()],
                &delta.state,
                &mut chain_restore_ms,
            ),
        ] {
            drop(restored.take());
            let mut fresh =
                module.instantiate_for_restore(InstanceContext::single("count"), b"")?;
            fresh.set_image_policy(policy);
            let state = state.clone();
            let ((), ms) = timed(|| fresh.restore_chain_owned(chain, state, true))?;
            times.push(ms);
            restored = Some(fresh);
        }
    }
    let median = |mut v: Vec<u64>| {
        v.sort_unstable();
        v[v.len() / 2]
    };
    Ok(DeltaResult {
        touched_keys: touched,
        snapshot_ms: Summary::of(&snapshot_ms).expect("at least one run"),
        delta_bytes: median(sizes),
        changed_pages: median(changed),
        pages,
        full_resumed_ms: Summary::of(&full_resumed_ms).expect("at least one run"),
        chain_restore_ms: Summary::of(&chain_restore_ms).expect("at least one run"),
    })
}

/// The instance restored from an image must hold that image: its own image has the same
/// memories and globals.
fn check_image_round_trip(fresh: &mut GuestInstance, state: &[u8]) -> Result<(), BenchError> {
    let again = fresh.snapshot(CheckpointId(u64::MAX >> 1))?;
    let wrong = |e| BenchError::Wrong(format!("an image does not decode: {e}"));
    let (before, after) = (
        decode_full(state).map_err(wrong)?,
        decode_full(&again).map_err(wrong)?,
    );
    if before.memories != after.memories || before.header.globals != after.header.globals {
        return Err(BenchError::Wrong(
            "an instance restored from an image holds other memory or globals".to_string(),
        ));
    }
    Ok(())
}

/// The restored instance must hold exactly the state it was restored from. The count writes
/// its table in table order, so equal states may give different bytes: compare the counts.
fn check_round_trip(fresh: &mut GuestInstance, state: &[u8]) -> Result<(), BenchError> {
    let again = fresh.snapshot(CheckpointId(u64::MAX >> 1))?;
    let (before, after) = (counts_in(state)?, counts_in(&again)?);
    if before != after {
        return Err(BenchError::Wrong(format!(
            "a restored instance holds {} keys, not the {} it was restored from",
            after.len(),
            before.len()
        )));
    }
    Ok(())
}

/// The counts in a snapshot of the count operator: keyed items of the rescalable layout
/// (docs/ABI.md §16), each the bincode of a count.
fn counts_in(snapshot: &[u8]) -> Result<BTreeMap<Vec<u8>, u64>, BenchError> {
    let wrong =
        |what: String| BenchError::Wrong(format!("a count snapshot does not decode: {what}"));
    let layout = weir_abi::rescalable::RescalableState::decode(snapshot)
        .map_err(|e| wrong(e.to_string()))?
        .ok_or_else(|| wrong("it is not in the rescalable layout".into()))?;
    layout
        .items()
        .filter(|item| item.kind == weir_abi::rescalable::ItemKind::Keyed)
        .map(|item| {
            let (count, _) =
                bincode::serde::decode_from_slice(item.value, bincode::config::standard())
                    .map_err(|e| wrong(e.to_string()))?;
            Ok((item.key.to_vec(), count))
        })
        .collect()
}

/// Snapshot and restore times, ms, of the native operator holding `keys` keys.
fn native(keys: u64, runs: usize) -> Result<(Vec<f64>, Vec<f64>), BenchError> {
    let native = |e: weir_sdk::Error| BenchError::Native(e.to_string());
    let mut harness = Harness::<Count>::new(Context::new("count")).map_err(native)?;
    for batch in distinct_keys(0..keys, 0, FILL_BATCH) {
        harness.push_batch(&batch).map_err(native)?;
    }
    let (mut snapshot_ms, mut restore_ms) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (state, ms) = timed(|| harness.snapshot()).map_err(native)?;
        snapshot_ms.push(ms);
        let ((), ms) = timed(|| harness.restore_into_fresh(&state)).map_err(native)?;
        restore_ms.push(ms);
    }
    Ok((snapshot_ms, restore_ms))
}

/// Runs `f` and returns its result with its running time in milliseconds.
fn timed<T, E>(f: impl FnOnce() -> Result<T, E>) -> Result<(T, f64), E> {
    let start = Instant::now();
    let value = f()?;
    Ok((value, start.elapsed().as_secs_f64() * 1e3))
}
