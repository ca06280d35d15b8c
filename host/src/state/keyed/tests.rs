//! One conformance suite for every keyed store: each test runs against the memory store and the
//! RocksDB store, and the random test checks both against a plain sorted map.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use tempfile::TempDir;

// The random tests' source, seeded so a failure repeats: the generator source's SplitMix64.
use crate::connectors::generator::splitmix64_next as next;

use super::cache::{CacheBudget, Cached, CachedBackend};
use super::local::{LocalCopies, RestoredFile};
use super::memory::{MemoryBackend, MemoryStore};
use super::rocks::{RocksBackend, StoreBudget};
use super::{Backend, KeyedStore, StoreCheckpoint, StoreError, StoreKey, Writes, copy_groups};

/// The backends under test, by name: a small budget for RocksDB so tests spill early, and each
/// store behind a write-back cache of a few keys too, so that tests evict from it.
fn backends() -> Vec<(&'static str, Box<dyn Backend>)> {
    let rocksdb = || RocksBackend::new(StoreBudget::new(8 << 20));
    vec![
        ("memory", Box::new(MemoryBackend)),
        ("rocksdb", Box::new(rocksdb())),
        (
            "cached memory",
            Box::new(CachedBackend {
                inner: MemoryBackend,
                // About seven small entries.
                budget: CacheBudget::new(7 * 100),
            }),
        ),
        (
            "cached rocksdb",
            Box::new(CachedBackend {
                inner: rocksdb(),
                budget: CacheBudget::new(64 * 100),
            }),
        ),
    ]
}

/// Runs `test` once per backend, each in a fresh directory.
fn for_each_backend(test: impl Fn(&str, &dyn Backend, &TempDir)) {
    for (name, backend) in backends() {
        let dir = TempDir::new().unwrap();
        test(name, backend.as_ref(), &dir);
    }
}

fn key(group: u32, state: u16, key: &str) -> Vec<u8> {
    StoreKey::to_vec(group, state, key.as_bytes())
}

fn put(store: &mut dyn KeyedStore, entries: &[(&[u8], &[u8])]) {
    let mut writes = Writes::new();
    for (k, v) in entries {
        writes.put(k, v);
    }
    store.write(&writes).unwrap();
}

/// Every entry of `store`, in order.
fn all(store: &mut dyn KeyedStore) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    store
        .scan(&[][..]..&[0xff][..], &mut |k, v| {
            out.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
    out
}

#[test]
fn store_keys_order_by_key_group_then_state_then_key() {
    let a = key(1, 9, "zz");
    let b = key(2, 0, "a");
    let c = key(2, 1, "");
    let d = key(2, 1, "a");
    assert!(a < b && b < c && c < d);
    assert_eq!(StoreKey::decode(&d), Some((2, 1, &b"a"[..])));
    assert_eq!(StoreKey::decode(&[0, 1, 2]), None);
    // A range of groups is the range between their starts.
    assert!(StoreKey::group_start(2).as_slice() <= b.as_slice());
    assert!(d.as_slice() < StoreKey::group_start(3).as_slice());
}

#[test]
fn reads_see_writes_and_deletions_and_the_last_write_of_a_key_wins() {
    for_each_backend(|name, backend, dir| {
        let mut store = backend.create(&dir.path().join("work")).unwrap();
        let (a, b, c) = (key(0, 0, "a"), key(0, 0, "b"), key(5, 1, "c"));
        put(store.as_mut(), &[(&a, b"1"), (&b, b"2")]);
        let mut writes = Writes::new();
        writes.put(&c, b"3");
        writes.delete(&a);
        writes.put(&b, b"first");
        writes.put(&b, b"second");
        store.write(&writes).unwrap();
        let got = store
            .get_many(&[a.as_slice(), b.as_slice(), c.as_slice()])
            .unwrap();
        assert_eq!(
            got,
            vec![None, Some(b"second".to_vec()), Some(b"3".to_vec())],
            "{name}"
        );
        assert_eq!(store.get(&c).unwrap(), Some(b"3".to_vec()), "{name}");
        assert_eq!(store.get(&key(9, 9, "none")).unwrap(), None, "{name}");
        assert!(store.get_many(&[]).unwrap().is_empty(), "{name}");
    });
}

#[test]
fn a_scan_visits_its_range_in_key_order_and_stops_when_asked() {
    for_each_backend(|name, backend, dir| {
        let mut store = backend.create(&dir.path().join("work")).unwrap();
        let keys: Vec<Vec<u8>> = (0..20u32)
            .map(|i| key(i % 5, 0, &format!("k{i:02}")))
            .collect();
        let entries: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (k.as_slice(), &b"v"[..])).collect();
        put(store.as_mut(), &entries);
        let (from, to) = (StoreKey::group_start(1), StoreKey::group_start(3));
        let mut seen = Vec::new();
        store
            .scan(&from[..]..&to[..], &mut |k, _| {
                seen.push(k.to_vec());
                true
            })
            .unwrap();
        let mut expected: Vec<Vec<u8>> = keys
            .iter()
            .filter(|k| matches!(StoreKey::decode(k), Some((1 | 2, _, _))))
            .cloned()
            .collect();
        expected.sort();
        assert_eq!(seen, expected, "{name}");
        let mut first_two = Vec::new();
        store
            .scan(&from[..]..&to[..], &mut |k, _| {
                first_two.push(k.to_vec());
                first_two.len() < 2
            })
            .unwrap();
        assert_eq!(first_two, expected[..2], "{name}");
        let mut none = 0;
        store
            .scan(&to[..]..&from[..], &mut |_, _| {
                none += 1;
                true
            })
            .unwrap();
        assert_eq!(none, 0, "{name}: an empty range");
    });
}

#[test]
fn retaining_key_groups_deletes_every_state_of_the_others() {
    for_each_backend(|name, backend, dir| {
        let mut store = backend.create(&dir.path().join("work")).unwrap();
        let keys: Vec<Vec<u8>> = (0..40u32)
            .map(|i| key(i % 8, (i % 3) as u16, &i.to_string()))
            .collect();
        let entries: Vec<(&[u8], &[u8])> = keys.iter().map(|k| (k.as_slice(), &b"v"[..])).collect();
        put(store.as_mut(), &entries);
        store.retain_groups(2..5).unwrap();
        let left = all(store.as_mut());
        let mut expected: Vec<Vec<u8>> = keys
            .iter()
            .filter(|k| matches!(StoreKey::decode(k), Some((2..5, _, _))))
            .cloned()
            .collect();
        expected.sort();
        assert_eq!(
            left.into_iter().map(|(k, _)| k).collect::<Vec<_>>(),
            expected,
            "{name}"
        );
    });
}

#[test]
fn a_checkpoint_opens_as_the_store_was_and_does_not_change_after() {
    for_each_backend(|name, backend, dir| {
        let mut store = backend.create(&dir.path().join("work")).unwrap();
        let (a, b) = (key(3, 0, "a"), key(4, 0, "b"));
        put(store.as_mut(), &[(&a, b"1"), (&b, b"2")]);
        let checkpoint = store.checkpoint(&dir.path().join("c1")).unwrap();
        assert!(!checkpoint.files.is_empty(), "{name}");
        assert_eq!(
            checkpoint.total_len(),
            checkpoint.files.iter().map(|f| f.len).sum::<u64>()
        );
        // The store goes on; the checkpoint stays.
        put(store.as_mut(), &[(&a, b"changed")]);
        let mut writes = Writes::new();
        writes.delete(&b);
        store.write(&writes).unwrap();
        let expected = vec![(a.clone(), b"1".to_vec()), (b.clone(), b"2".to_vec())];
        let mut first = backend
            .open_checkpoint(&checkpoint.dir, &dir.path().join("r1"))
            .unwrap();
        assert_eq!(all(first.as_mut()), expected, "{name}");
        // A store opened from a checkpoint is a store of its own: its writes reach neither the
        // checkpoint nor the store it came from.
        put(first.as_mut(), &[(&b, b"restored-and-changed")]);
        first.checkpoint(&dir.path().join("c2")).unwrap();
        let mut second = backend
            .open_checkpoint(&checkpoint.dir, &dir.path().join("r2"))
            .unwrap();
        assert_eq!(all(second.as_mut()), expected, "{name}");
        assert_eq!(store.get(&b).unwrap(), None, "{name}");
        assert_eq!(store.get(&a).unwrap(), Some(b"changed".to_vec()), "{name}");
    });
}

/// A checkpoint begun at a barrier holds the store as it was then, whoever finishes it: another
/// thread while the store goes on, or the store itself when it must write first (a cache that
/// evicts). One dropped unfinished loses no write.
#[test]
fn a_checkpoint_begun_at_a_barrier_holds_the_store_as_it_was_then() {
    for_each_backend(|name, backend, dir| {
        let mut store = backend.create(&dir.path().join("work")).unwrap();
        let mut model = BTreeMap::new();
        // Writes keys 0..n, each its own value tagged `tag`, in batches of 20 (a cache of a
        // few keys evicts, writing to the store, several times within it).
        let mut write = |store: &mut dyn KeyedStore, n: u32, tag: &str| {
            for batch in (0..n).collect::<Vec<_>>().chunks(20) {
                let mut writes = Writes::new();
                for &i in batch {
                    let (k, v) = (key(i % 4, 0, &format!("k{i}")), format!("{tag}{i}"));
                    writes.put(&k, v.as_bytes());
                    model.insert(k, v.into_bytes());
                }
                store.write(&writes).unwrap();
            }
            model.clone().into_iter().collect::<Vec<_>>()
        };
        let opened = |from: &StoreCheckpoint, into: &str| {
            let mut opened = backend
                .open_checkpoint(&from.dir, &dir.path().join(into))
                .unwrap();
            all(opened.as_mut())
        };
        // Finished on another thread while the store goes on.
        let at_barrier = write(store.as_mut(), 50, "a");
        let pending = store.begin_checkpoint(&dir.path().join("c1")).unwrap();
        let finishing = std::thread::spawn(move || pending.take());
        write(store.as_mut(), 100, "b");
        let checkpoint = finishing.join().unwrap().unwrap();
        assert_eq!(
            opened(&checkpoint, "r1"),
            at_barrier,
            "{name}: on another thread"
        );
        // Finished after the store went on.
        let at_barrier = write(store.as_mut(), 30, "c");
        let pending = store.begin_checkpoint(&dir.path().join("c2")).unwrap();
        write(store.as_mut(), 200, "d");
        let checkpoint = pending.take().unwrap();
        assert_eq!(
            opened(&checkpoint, "r2"),
            at_barrier,
            "{name}: finished after"
        );
        // Dropped unfinished.
        let pending = store.begin_checkpoint(&dir.path().join("c3")).unwrap();
        drop(pending);
        let now = write(store.as_mut(), 10, "e");
        assert_eq!(
            all(store.as_mut()),
            now,
            "{name}: after a dropped checkpoint"
        );
    });
}

#[test]
fn a_store_opens_only_a_checkpoint_and_only_into_an_empty_directory() {
    for_each_backend(|name, backend, dir| {
        let not_one = dir.path().join("not-a-checkpoint");
        std::fs::create_dir(&not_one).unwrap();
        std::fs::write(not_one.join("entries"), b"something else").unwrap();
        std::fs::write(not_one.join("README"), b"hello").unwrap();
        let opened = backend.open_checkpoint(&not_one, &dir.path().join("work"));
        assert!(
            matches!(opened, Err(StoreError::NotACheckpoint { .. })),
            "{name}: {:?}",
            opened.err()
        );
        let busy = dir.path().join("busy");
        std::fs::create_dir(&busy).unwrap();
        std::fs::write(busy.join("file"), b"x").unwrap();
        let created = backend.create(&busy);
        assert!(
            matches!(created, Err(StoreError::Unexpected(_))),
            "{name}: {:?}",
            created.err()
        );
    });
}

#[test]
fn copying_key_groups_merges_the_parts_of_old_stores_a_new_subtask_owns() {
    for_each_backend(|name, backend, dir| {
        let mut left = backend.create(&dir.path().join("left")).unwrap();
        let mut right = backend.create(&dir.path().join("right")).unwrap();
        for g in 0..4 {
            put(left.as_mut(), &[(&key(g, 0, "l"), b"L")]);
        }
        for g in 4..8 {
            put(right.as_mut(), &[(&key(g, 0, "r"), b"R")]);
        }
        // The new subtask owns groups 2..6: half of each.
        let mut new = backend.create(&dir.path().join("new")).unwrap();
        let copied = copy_groups(left.as_mut(), new.as_mut(), 2..6, 1).unwrap()
            + copy_groups(right.as_mut(), new.as_mut(), 2..6, 1000).unwrap();
        assert_eq!(copied, 4, "{name}");
        let groups: Vec<u32> = all(new.as_mut())
            .iter()
            .map(|(k, _)| StoreKey::decode(k).unwrap().0)
            .collect();
        assert_eq!(groups, vec![2, 3, 4, 5], "{name}");
    });
}

#[test]
fn random_writes_checkpoints_and_restores_agree_with_a_sorted_map() {
    let seed0 = std::env::var("WEIR_STORE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_u64);
    for_each_backend(|name, backend, dir| {
        let mut seed = seed0;
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut store = backend.create(&dir.path().join("work-0")).unwrap();
        for round in 0..12 {
            let mut writes = Writes::new();
            for _ in 0..(next(&mut seed) % 400) {
                let k = key(
                    (next(&mut seed) % 16) as u32,
                    (next(&mut seed) % 3) as u16,
                    &format!("{}", next(&mut seed) % 300),
                );
                if next(&mut seed).is_multiple_of(4) {
                    writes.delete(&k);
                    model.remove(&k);
                } else {
                    let v = next(&mut seed).to_le_bytes().to_vec();
                    writes.put(&k, &v);
                    model.insert(k, v);
                }
            }
            store.write(&writes).unwrap();
            let probe: Vec<Vec<u8>> = (0..50)
                .map(|_| {
                    key(
                        (next(&mut seed) % 16) as u32,
                        (next(&mut seed) % 3) as u16,
                        &format!("{}", next(&mut seed) % 300),
                    )
                })
                .collect();
            let refs: Vec<&[u8]> = probe.iter().map(Vec::as_slice).collect();
            let expected: Vec<Option<Vec<u8>>> =
                probe.iter().map(|k| model.get(k).cloned()).collect();
            assert_eq!(
                store.get_many(&refs).unwrap(),
                expected,
                "{name} round {round} (seed {seed0})"
            );
            // Now and then, continue from a checkpoint, as a restore does.
            if next(&mut seed).is_multiple_of(3) {
                let checkpoint = store
                    .checkpoint(&dir.path().join(format!("checkpoint-{round}")))
                    .unwrap();
                store = backend
                    .open_checkpoint(&checkpoint.dir, &dir.path().join(format!("work-{round}")))
                    .unwrap();
            }
            let model_entries: Vec<(Vec<u8>, Vec<u8>)> =
                model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(
                all(store.as_mut()),
                model_entries,
                "{name} round {round} (seed {seed0})"
            );
        }
    });
}

/// The embedded store's checkpoints are incremental: a checkpoint after a small change names
/// again the immutable files of the one before, so only the new ones need storing.
#[test]
fn rocksdb_checkpoints_after_a_small_change_share_most_bytes_with_the_one_before() {
    let dir = TempDir::new().unwrap();
    let backend = RocksBackend::new(StoreBudget::new(8 << 20));
    let mut store = backend.create_store(&dir.path().join("work")).unwrap();
    let mut seed = 7;
    let mut value = || -> Vec<u8> {
        (0..13)
            .flat_map(|_| next(&mut seed).to_le_bytes())
            .collect()
    };
    for chunk in 0..10u32 {
        let mut writes = Writes::new();
        for i in 0..10_000u32 {
            let n = chunk * 10_000 + i;
            writes.put(&StoreKey::to_vec(n % 128, 0, &n.to_be_bytes()), &value());
        }
        store.write(&writes).unwrap();
    }
    // Settled first: a background compaction between the two checkpoints would rewrite files
    // for reasons of its own (real, and what makes checkpoint sizes spiky; not this test's).
    store.compact();
    let first = store.checkpoint(&dir.path().join("c1")).unwrap();
    // 1 % of the keys change.
    let mut writes = Writes::new();
    for n in (0..100_000u32).step_by(100) {
        writes.put(&StoreKey::to_vec(n % 128, 0, &n.to_be_bytes()), &value());
    }
    store.write(&writes).unwrap();
    let second = store.checkpoint(&dir.path().join("c2")).unwrap();
    let before: std::collections::HashSet<&str> = first
        .files
        .iter()
        .filter(|f| f.immutable)
        .map(|f| f.name.as_str())
        .collect();
    let new_bytes: u64 = second
        .files
        .iter()
        .filter(|f| !(f.immutable && before.contains(f.name.as_str())))
        .map(|f| f.len)
        .sum();
    assert!(
        !before.is_empty() && new_bytes * 10 <= second.total_len(),
        "the second checkpoint's new files hold {new_bytes} of its {} bytes: {:?} then {:?}",
        second.total_len(),
        first.files,
        second.files
    );
}

/// Hot-key caches keep within their equal shares of one budget, however much their stores
/// hold, and spill what does not fit to the store without losing a write.
#[test]
fn caches_stay_within_their_shares_of_one_budget_and_lose_nothing() {
    let budget = CacheBudget::new(64 * 1024);
    let cache = || Cached::new(Box::new(MemoryStore::default()), Arc::clone(&budget));
    let value = [7u8; 40];
    let store_key = |n: u32| StoreKey::to_vec(n % 128, 0, &n.to_be_bytes());
    // Writes `keys` in batches of 100, checking the cache's bytes after each; returns the most
    // it held.
    let write = |cache: &mut Cached, keys: Range<u32>, share: usize| {
        let mut most = 0;
        for chunk in keys.collect::<Vec<_>>().chunks(100) {
            let mut writes = Writes::new();
            for &n in chunk {
                writes.put(&store_key(n), &value);
            }
            cache.write(&writes).unwrap();
            assert!(
                cache.bytes() <= share,
                "a cache holds {} bytes, over its share of {share}",
                cache.bytes()
            );
            most = most.max(cache.bytes());
        }
        most
    };
    // Every key, read back in one request: those not cached come from the store.
    let read_all = |cache: &mut Cached, keys: Range<u32>| {
        let keys: Vec<Vec<u8>> = keys.map(store_key).collect();
        let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        cache.get_many(&keys).unwrap()
    };
    // 1 000 entries of about 170 bytes, more than fits: the first cache has the budget alone.
    let mut one = cache();
    let most = write(&mut one, 0..1_000, 64 * 1024);
    assert!(
        most > 32 * 1024,
        "the only cache used at most {most} bytes of 64 KiB"
    );
    // With a second cache, each has half.
    let mut two = cache();
    write(&mut two, 0..1_000, 32 * 1024);
    write(&mut one, 1_000..2_000, 32 * 1024);
    for (cache, written) in [(&mut one, 2_000), (&mut two, 1_000)] {
        let values = read_all(cache, 0..2_000);
        assert!(
            cache.bytes() <= 32 * 1024,
            "{} bytes after a read",
            cache.bytes()
        );
        for (n, found) in values.into_iter().enumerate() {
            let expected = (n < written).then_some(&value[..]);
            assert_eq!(found.as_deref(), expected, "key {n}");
        }
    }
    drop(two);
    write(&mut one, 2_000..3_000, 64 * 1024);
}

/// State several times the budget stays readable: what does not fit the cache is in files.
#[test]
fn rocksdb_holds_state_many_times_its_memory_budget() {
    let dir = TempDir::new().unwrap();
    let budget = StoreBudget::new(4 << 20);
    let backend = RocksBackend::new(budget.clone());
    let mut store = backend.create_store(&dir.path().join("work")).unwrap();
    let mut seed = 1;
    // 40 MB of values that do not compress, ten times the budget.
    for chunk in 0..40u32 {
        let mut writes = Writes::new();
        for i in 0..1000u32 {
            let n = chunk * 1000 + i;
            let mut v: Vec<u8> = (0..125)
                .flat_map(|_| next(&mut seed).to_le_bytes())
                .collect();
            v[..4].copy_from_slice(&n.to_le_bytes());
            writes.put(&StoreKey::to_vec(n % 128, 0, &n.to_be_bytes()), &v);
        }
        store.write(&writes).unwrap();
    }
    for n in (0..40_000u32).step_by(997) {
        let v = store
            .get(&StoreKey::to_vec(n % 128, 0, &n.to_be_bytes()))
            .unwrap()
            .unwrap_or_else(|| panic!("key {n} is lost"));
        assert_eq!(v[..4], n.to_le_bytes());
    }
    let on_disk: u64 = std::fs::read_dir(store.dir())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(
        on_disk > budget.bytes() as u64,
        "only {on_disk} bytes on disk: the state did not leave memory"
    );
}

/// A store's checkpoint kept as the job's checkpoint keeps it: immutable files stored once as
/// shared files (here a map standing in for the storage), the rest inline in the snapshot; a
/// store laid out from the snapshot alone holds what the store held.
#[test]
fn a_store_restores_from_its_snapshot_and_the_shared_files_it_names() {
    use std::collections::HashMap;

    use super::snapshot::{StoreSnapshot, Uploads};
    use crate::ids::CheckpointId;

    for_each_backend(|name, backend, dir| {
        let mut shared: HashMap<(CheckpointId, String), Vec<u8>> = HashMap::new();
        let mut uploads = Uploads::new();
        let mut store = backend.create(&dir.path().join("work")).unwrap();
        let mut model = BTreeMap::new();
        let mut seed = 11;
        let mut snapshot = StoreSnapshot::default();
        for id in 1..=4u64 {
            let mut writes = Writes::new();
            for _ in 0..2000 {
                let k = key(
                    (next(&mut seed) % 32) as u32,
                    0,
                    &(next(&mut seed) % 5000).to_string(),
                );
                let v = next(&mut seed).to_le_bytes().to_vec();
                model.insert(k.clone(), v.clone());
                writes.put(&k, &v);
            }
            store.write(&writes).unwrap();
            let id = CheckpointId(id);
            let checkpoint = store
                .checkpoint(&dir.path().join(format!("local-{}", id.0)))
                .unwrap();
            let plan = uploads.plan(id, &checkpoint);
            for file in &plan.upload {
                let bytes = std::fs::read(checkpoint.dir.join(file)).unwrap();
                assert!(shared.insert((id, file.clone()), bytes).is_none());
            }
            snapshot = StoreSnapshot {
                kept: plan.kept,
                inline: plan
                    .inline
                    .iter()
                    .map(|f| (f.clone(), std::fs::read(checkpoint.dir.join(f)).unwrap()))
                    .collect(),
            };
            snapshot = StoreSnapshot::decode(&snapshot.encode()).unwrap();
            uploads.completed(id);
        }
        // The checkpoint directories are gone (another machine): only the snapshot and the
        // shared files are left.
        for id in 1..=4 {
            std::fs::remove_dir_all(dir.path().join(format!("local-{id}"))).unwrap();
        }
        let laid_out = dir.path().join("restore");
        snapshot
            .materialise(&laid_out, |file| {
                Ok(RestoredFile::read(
                    shared[&(file.writer, file.name.clone())].clone(),
                ))
            })
            .unwrap();
        let mut restored = backend
            .open_checkpoint(&laid_out, &dir.path().join("work-restored"))
            .unwrap();
        let expected: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
        assert_eq!(all(restored.as_mut()), expected, "{name}");
    });
}

/// Keyed states checkpointed at parallelism 2, their sections split for 3 subtasks and those
/// checkpointed and split for 1: each key comes back in the subtask that owns its group, with
/// its value, and in no other. How host-kept state rescales, through its checkpoints' files.
#[test]
fn keyed_states_split_and_merge_by_key_group_through_their_checkpoints() {
    use std::collections::HashMap;
    use std::sync::Arc;

    use weir_abi::key_group::{KeyGroups, key_group};
    use weir_abi::state as wire;

    use super::section::KeyedState;
    use super::snapshot::KeyedSection;
    use crate::ids::CheckpointId;
    use crate::state::{Section, SectionTag, Split, split};

    let backends: Vec<(&str, Arc<dyn Backend + Send + Sync>)> = vec![
        ("memory", Arc::new(MemoryBackend)),
        (
            "cached rocksdb",
            Arc::new(CachedBackend {
                inner: RocksBackend::new(StoreBudget::new(8 << 20)),
                budget: CacheBudget::new(16 * 100),
            }),
        ),
    ];
    let max = 16;
    let keys: Vec<String> = (0..300).map(|i| format!("key-{i}")).collect();
    let value = |key: &str| format!("{key}!").into_bytes();
    let read = |state: &mut KeyedState, key: &str| {
        let mut request = Vec::new();
        wire::put_read(&mut request, 3, key.as_bytes());
        let mut result = Vec::new();
        state.get(&request, &mut result).unwrap();
        wire::results(&result)
            .next()
            .unwrap()
            .unwrap()
            .map(<[u8]>::to_vec)
    };
    for (name, backend) in backends {
        let dir = TempDir::new().unwrap();
        // What the checkpoints stored as shared files, by subtask, writer and name.
        let mut stored: HashMap<(u32, u64, String), Vec<u8>> = HashMap::new();
        let checkpoint = |stored: &mut HashMap<_, _>, state: &mut KeyedState, subtask, id| {
            let pending = state.snapshot(CheckpointId(id), false).unwrap();
            let snapshot = pending
                .finish(|file, bytes| {
                    stored.insert((subtask, id, file.to_string()), bytes);
                    Ok::<_, StoreError>(())
                })
                .unwrap();
            vec![Section {
                tag: SectionTag::Keyed,
                bytes: KeyedSection::of(subtask, snapshot).encode(),
            }]
        };
        let groups = |p| KeyGroups::new(max, p).unwrap();
        let mut sections = Vec::new();
        for subtask in 0..2 {
            let mut state = KeyedState::create(
                Arc::clone(&backend),
                dir.path().join(format!("a{subtask}")),
                subtask,
                groups(2),
            )
            .unwrap();
            let mut request = Vec::new();
            for key in keys
                .iter()
                .filter(|k| groups(2).owner(key_group(k.as_bytes(), max)) == subtask)
            {
                wire::put_write(&mut request, 3, key.as_bytes(), Some(&value(key)));
            }
            state.write(&request).unwrap();
            sections.push(checkpoint(&mut stored, &mut state, subtask, 1));
        }
        for (parallelism, id) in [(3, 2), (1, 3)] {
            let old: Vec<&[Section]> = sections.iter().map(Vec::as_slice).collect();
            let how = Split {
                groups: groups(parallelism),
                timer_key_prefix: 0,
                finished: false,
            };
            let new = split(&old, how).unwrap();
            let mut next = Vec::new();
            for (subtask, sections) in (0..).zip(new) {
                let dir = dir.path().join(format!("p{parallelism}-{subtask}"));
                let mut state =
                    KeyedState::create(Arc::clone(&backend), dir, subtask, groups(parallelism))
                        .unwrap();
                let section = KeyedSection::decode(&sections[0].bytes).unwrap();
                state
                    .restore(&section, true, |source, kept| {
                        Ok(RestoredFile::read(
                            stored[&(source, kept.writer.0, kept.name.clone())].clone(),
                        ))
                    })
                    .unwrap();
                for key in &keys {
                    let owns = groups(parallelism).owner(key_group(key.as_bytes(), max)) == subtask;
                    assert_eq!(
                        read(&mut state, key),
                        owns.then(|| value(key)),
                        "{name}: {key} at subtask {subtask} of {parallelism}"
                    );
                }
                next.push(checkpoint(&mut stored, &mut state, subtask, id));
            }
            sections = next;
        }
    }
}

/// A task given a folder for local copies keeps each checkpoint of its store there once stored
/// (not a savepoint's), drops the older ones when a checkpoint completes and an aborted one at
/// once, and a store restores from a copy's files alone. Flink's local recovery.
#[test]
fn a_task_keeps_local_copies_of_its_checkpoints_until_a_later_one_completes() {
    use std::collections::HashMap;

    use weir_abi::key_group::KeyGroups;
    use weir_abi::state as wire;

    use super::section::KeyedState;
    use super::snapshot::{KeyedSection, StoreSnapshot};
    use crate::ids::{CheckpointId, TaskId};

    let backends: Vec<(&str, Arc<dyn Backend + Send + Sync>)> = vec![
        ("memory", Arc::new(MemoryBackend)),
        (
            "rocksdb",
            Arc::new(RocksBackend::new(StoreBudget::new(8 << 20))),
        ),
    ];
    let task = TaskId::new("count", 0);
    let groups = KeyGroups::new(16, 1).unwrap();
    let write = |state: &mut KeyedState, key: &str, value: &str| {
        let mut request = Vec::new();
        wire::put_write(&mut request, 0, key.as_bytes(), Some(value.as_bytes()));
        state.write(&request).unwrap();
    };
    for (name, backend) in backends {
        let dir = TempDir::new().unwrap();
        let local = LocalCopies::new(dir.path().join("local"), dir.path().join("staged"));
        let mut state = KeyedState::create(Arc::clone(&backend), dir.path().join("a"), 0, groups)
            .unwrap()
            .keeping_copies_in(local.task_dir(&task));
        let mut uploaded: HashMap<String, Vec<u8>> = HashMap::new();
        let checkpoint = |uploaded: &mut HashMap<String, Vec<u8>>,
                          state: &mut KeyedState,
                          id: u64,
                          savepoint: bool|
         -> StoreSnapshot {
            let pending = state.snapshot(CheckpointId(id), savepoint).unwrap();
            pending
                .finish(|file, bytes| {
                    uploaded.insert(file.to_string(), bytes);
                    Ok::<_, StoreError>(())
                })
                .unwrap()
        };
        let copy = |id| local.checkpoint_dir(&task, CheckpointId(id));
        write(&mut state, "a", "1");
        let first = checkpoint(&mut uploaded, &mut state, 1, false);
        write(&mut state, "b", "2");
        let second = checkpoint(&mut uploaded, &mut state, 2, false);
        checkpoint(&mut uploaded, &mut state, 3, true);
        assert!(copy(1).is_dir() && copy(2).is_dir(), "{name}");
        assert!(!copy(3).exists(), "{name}: a savepoint keeps no local copy");
        // Each kept file of the copy is the file the checkpoint stored.
        for (id, snapshot) in [(1, &first), (2, &second)] {
            for kept in &snapshot.kept {
                let local = std::fs::read(copy(id).join(&kept.name)).unwrap();
                assert_eq!(local, uploaded[&kept.name], "{name}: {}", kept.name);
            }
        }
        state.completed(CheckpointId(2));
        assert!(!copy(1).exists() && copy(2).is_dir(), "{name}");
        checkpoint(&mut uploaded, &mut state, 4, false);
        state.aborted(CheckpointId(4));
        assert!(!copy(4).exists() && copy(2).is_dir(), "{name}");

        // The task's working folder is gone (the process was killed): checkpoint 2 restores
        // from its local copy alone.
        drop(state);
        let mut restored =
            KeyedState::create(Arc::clone(&backend), dir.path().join("b"), 0, groups).unwrap();
        restored
            .restore(&KeyedSection::of(0, second), true, |_, kept| {
                let staged = local.stage(&task, CheckpointId(2), &kept.name).unwrap();
                Ok(RestoredFile::Local(Arc::new(staged)))
            })
            .unwrap();
        let mut request = Vec::new();
        wire::put_read(&mut request, 0, b"a");
        wire::put_read(&mut request, 0, b"b");
        let mut result = Vec::new();
        restored.get(&request, &mut result).unwrap();
        let values: Vec<Option<&[u8]>> = wire::results(&result).map(Result::unwrap).collect();
        assert_eq!(values, [Some(&b"1"[..]), Some(&b"2"[..])], "{name}");
        // What the restore staged is gone with it; the copy stays for the next restore.
        let staged = std::fs::read_dir(dir.path().join("staged")).map_or(0, Iterator::count);
        assert_eq!(staged, 0, "{name}");
        assert!(copy(2).is_dir(), "{name}");
    }
}

/// A restore at the same parallelism keeps the checkpoint's table files as they are: the first
/// checkpoint after it stores none of them again. (Clipping the store to its key groups used to
/// compact it whole, rewriting every file: seconds at 10 million keys, and a full upload after.)
#[test]
fn a_restore_without_a_rescale_keeps_the_files_its_checkpoint_stored() {
    use std::collections::HashMap;

    use weir_abi::key_group::KeyGroups;
    use weir_abi::state as wire;

    use super::section::KeyedState;
    use super::snapshot::KeyedSection;
    use crate::ids::CheckpointId;

    let backend: Arc<dyn Backend + Send + Sync> =
        Arc::new(RocksBackend::new(StoreBudget::new(8 << 20)));
    let groups = KeyGroups::new(16, 1).unwrap();
    let dir = TempDir::new().unwrap();
    let mut state =
        KeyedState::create(Arc::clone(&backend), dir.path().join("a"), 0, groups).unwrap();
    let mut request = Vec::new();
    for i in 0..5000u32 {
        wire::put_write(&mut request, 0, format!("key-{i}").as_bytes(), Some(b"1"));
    }
    state.write(&request).unwrap();
    let mut stored: HashMap<String, Vec<u8>> = HashMap::new();
    let first = state
        .snapshot(CheckpointId(1), false)
        .unwrap()
        .finish(|name, bytes| {
            stored.insert(name.to_string(), bytes);
            Ok::<_, StoreError>(())
        })
        .unwrap();
    assert!(
        !stored.is_empty(),
        "the first checkpoint stores the table files"
    );
    state.completed(CheckpointId(1));
    drop(state);

    let mut restored =
        KeyedState::create(Arc::clone(&backend), dir.path().join("b"), 0, groups).unwrap();
    restored
        .restore(&KeyedSection::of(0, first), true, |_, kept| {
            Ok(RestoredFile::read(stored[&kept.name].clone()))
        })
        .unwrap();
    let mut again = Vec::new();
    restored
        .snapshot(CheckpointId(2), false)
        .unwrap()
        .finish(|name, _| {
            again.push(name.to_string());
            Ok::<_, StoreError>(())
        })
        .unwrap();
    assert_eq!(
        again,
        Vec::<String>::new(),
        "files stored again after the restore"
    );
}
