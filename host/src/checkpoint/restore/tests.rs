use super::*;
use crate::checkpoint::layout::CheckpointLayout;
use crate::checkpoint::metadata::tests::sample;
use crate::checkpoint::recovery::LatestSelection;
use crate::checkpoint::storage::tests::with_states_of;
use crate::checkpoint::storage::{LocalStorage, MemoryStorage};
use std::fs;

const CHK: CheckpointKind = CheckpointKind::Checkpoint;
const SP: CheckpointKind = CheckpointKind::Savepoint;

fn chosen(selection: &LatestSelection<VerifiedCheckpoint>) -> Option<String> {
    selection.chosen.as_ref().map(|point| point.location.name())
}

fn skipped(selection: &LatestSelection<VerifiedCheckpoint>) -> Vec<String> {
    selection.skipped.iter().map(ToString::to_string).collect()
}

/// Writes every task of `sample(kind, id)` and publishes the metadata.
fn write_checkpoint(storage: &dyn CheckpointStorage, kind: CheckpointKind, id: u64) {
    let meta = with_states_of(storage, kind, id, |task| state_of(task, id));
    storage.write_metadata(&meta).unwrap();
}

/// The state every test checkpoint holds for `task`: `<task>@<id>`.
fn state_of(task: &TaskId, id: u64) -> Vec<u8> {
    format!("{task}@{id}").into_bytes()
}

fn local_with(ids: &[u64]) -> (tempfile::TempDir, LocalStorage) {
    let dir = tempfile::tempdir().unwrap();
    let storage = LocalStorage::new(CheckpointLayout::new(dir.path().join("job")));
    for &id in ids {
        write_checkpoint(&storage, CHK, id);
    }
    (dir, storage)
}

#[test]
fn restores_previous_checkpoint_when_a_state_file_is_truncated() {
    let (_dir, storage) = local_with(&[1, 2]);
    let chk2 = storage.layout().location(CHK, CheckpointId(2));
    let path = chk2.dir().join("count-1.state");
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();

    let selection = restore_latest(&storage, None).unwrap();
    assert_eq!(chosen(&selection).as_deref(), Some("chk-0000000001"));
    assert_eq!(
        skipped(&selection),
        [format!(
            "skipping chk-0000000002: state file {}: truncated: expected {} bytes, found {}",
            path.display(),
            bytes.len(),
            bytes.len() - 5
        )]
    );
    let point = selection.chosen.unwrap();
    let entry = point.metadata.task(&TaskId::new("count", 1)).unwrap();
    assert_eq!(
        storage.read_state(&point.location, &entry.handle).unwrap(),
        b"count#1@1"
    );
}

#[test]
fn restores_previous_checkpoint_when_metadata_has_a_flipped_byte() {
    let (_dir, storage) = local_with(&[1, 2, 3]);
    let path = CheckpointLayout::metadata_file(&storage.layout().location(CHK, CheckpointId(3)));
    let mut bytes = fs::read(&path).unwrap();
    bytes[100] ^= 0x08;
    fs::write(&path, bytes).unwrap();

    let selection = restore_latest(&storage, None).unwrap();
    assert_eq!(chosen(&selection).as_deref(), Some("chk-0000000002"));
    let message = skipped(&selection).join("\n");
    assert!(
        message.starts_with(&format!(
            "skipping chk-0000000003: metadata file {}: checksum mismatch",
            path.display()
        )),
        "{message}"
    );
}

#[test]
fn restores_previous_checkpoint_when_a_state_file_is_missing() {
    let storage = MemoryStorage::default();
    write_checkpoint(&storage, CHK, 1);
    write_checkpoint(&storage, CHK, 2);
    let path = storage
        .layout()
        .state_file(CHK, CheckpointId(2), &TaskId::new("source", 0))
        .unwrap();
    assert!(storage.remove_raw_file(&path));
    let selection = restore_latest(&storage, None).unwrap();
    assert_eq!(chosen(&selection).as_deref(), Some("chk-0000000001"));
    assert!(
        skipped(&selection)[0].contains("source-0.state"),
        "{:?}",
        skipped(&selection)
    );
}

#[test]
fn restores_previous_checkpoint_when_the_newest_is_incomplete() {
    let (_dir, storage) = local_with(&[1]);
    storage
        .write_state(CHK, CheckpointId(2), &TaskId::new("count", 0), b"x")
        .unwrap();
    let selection = restore_latest(&storage, None).unwrap();
    assert_eq!(chosen(&selection).as_deref(), Some("chk-0000000001"));
    assert_eq!(
        skipped(&selection),
        ["skipping chk-0000000002: incomplete: missing metadata"]
    );
}

/// Checkpoint `id` where `count#0`'s state builds on `chain`; each task's state is
/// `<task>@<id>`.
pub(crate) fn write_chained(storage: &dyn CheckpointStorage, id: u64, chain: &[u64]) {
    let mut meta = with_states_of(storage, CHK, id, |task| state_of(task, id));
    meta.format_version = crate::checkpoint::metadata::METADATA_VERSION;
    for entry in &mut meta.tasks {
        if entry.task == TaskId::new("count", 0) {
            entry.chain = chain.iter().copied().map(CheckpointId).collect();
        }
    }
    storage.write_metadata(&meta).unwrap();
}

#[test]
fn a_verified_checkpoint_holds_every_state_it_read() {
    let storage = MemoryStorage::default();
    write_chained(&storage, 1, &[]);
    write_chained(&storage, 2, &[1]);
    write_chained(&storage, 3, &[]);
    let chk2 = storage.layout().location(CHK, CheckpointId(2));
    let task = TaskId::new("count", 0);
    for point in [
        restore_latest(&storage, None).unwrap().chosen.unwrap(),
        restore_from_path(&storage, chk2.dir(), None).unwrap(),
    ] {
        let id = point.metadata.checkpoint_id;
        // The files are gone from the storage; the checkpoint still has what it verified.
        for gone in [id, CheckpointId(1)] {
            let path = storage.layout().state_file(CHK, gone, &task).unwrap();
            storage.remove_raw_file(&path);
        }
        let state = &point.states[&task];
        assert_eq!(state.state, format!("count#0@{id}").as_bytes());
        let links: Vec<&[u8]> = state.chain.iter().map(Vec::as_slice).collect();
        let expected: &[&[u8]] = if id == CheckpointId(2) {
            &[b"count#0@1"]
        } else {
            &[]
        };
        assert_eq!(links, expected, "checkpoint {id}");
        assert_eq!(point.states.len(), point.metadata.tasks.len());
        assert!(point.resumable, "checkpoint {id} is one of the job's");
    }
}

#[test]
fn the_states_taken_are_decoded_with_their_chain_and_the_rest_dropped() {
    let storage = MemoryStorage::default();
    let envelope = |inner: &str| {
        TaskState {
            finished: false,
            sections: Vec::new(),
            inner: inner.as_bytes().to_vec(),
        }
        .encode()
    };
    let task = TaskId::new("count", 0);
    let mut point = VerifiedCheckpoint {
        location: storage.layout().location(CHK, CheckpointId(2)),
        metadata: sample(CHK, 2),
        states: BTreeMap::new(),
        resumable: true,
    };
    for entry in &mut point.metadata.tasks {
        let chain = if entry.task == task {
            entry.chain = vec![CheckpointId(1)];
            vec![envelope("base")]
        } else {
            Vec::new()
        };
        point.states.insert(
            entry.task.clone(),
            VerifiedState {
                state: envelope(&format!("{}@2", entry.task)),
                chain,
                shared: Vec::new(),
            },
        );
    }
    let restored = point.clone().into_task_states([&task]).unwrap();
    assert_eq!(restored.len(), 1, "only the task asked for");
    let state = &restored[&task];
    assert_eq!(state.state.inner, b"count#0@2");
    assert_eq!(state.chain, [b"base".to_vec()]);
    assert!(state.resumable);
    let unknown = TaskId::new("gone", 0);
    assert!(
        point
            .clone()
            .into_task_states([&unknown])
            .unwrap()
            .is_empty()
    );

    point.states.get_mut(&task).unwrap().chain[0] = vec![7, 0];
    let err = point.clone().into_task_states([&task]).unwrap_err();
    assert!(
        matches!(
            &err,
            EnvelopeError::Link {
                link: CheckpointId(1),
                problem: TaskStateError::UnsupportedVersion { version: 7 },
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "chk-0000000002: state of count#0 at checkpoint 1, which its image builds on: \
         task state envelope version 7 is not supported (this build reads 1 and 2)"
    );
    point.states.get_mut(&task).unwrap().state = Vec::new();
    let err = point.into_task_states([&task]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "chk-0000000002: state of count#0: task state is empty"
    );
}

#[test]
fn verifying_a_delta_reads_its_chain_and_a_broken_link_falls_back_naming_both_files() {
    let (_dir, storage) = local_with(&[]);
    write_chained(&storage, 1, &[]);
    write_chained(&storage, 2, &[1]);
    write_chained(&storage, 3, &[1, 2]);
    let chk3 = storage.layout().location(CHK, CheckpointId(3));
    let point = restore_from_path(&storage, chk3.dir(), None).unwrap();
    let entry = point.metadata.task(&TaskId::new("count", 0)).unwrap();
    let states = read_chain(&storage, &point.location, entry, &mut BTreeMap::new()).unwrap();
    let bytes: Vec<&[u8]> = states.iter().map(|s| s.bytes.as_slice()).collect();
    assert_eq!(bytes, [b"count#0@1".as_slice(), b"count#0@2".as_slice()]);

    // Damage the link's file: 3 no longer verifies, 2 (which needs only 1) does.
    let link = storage
        .layout()
        .location(CHK, CheckpointId(1))
        .dir()
        .join("count-0.state");
    let mut bytes = fs::read(&link).unwrap();
    bytes[22] ^= 0x01;
    fs::write(&link, &bytes).unwrap();
    let selection = restore_latest(&storage, None).unwrap();
    assert_eq!(chosen(&selection), None, "1 is damaged, 2 and 3 need it");
    let message = skipped(&selection).join("\n");
    let delta = chk3.dir().join("count-0.state");
    assert!(
        message.contains(&format!(
            "state file {} is an image delta that builds on checkpoint 1, which cannot be used: state file {}: checksum mismatch",
            delta.display(),
            link.display()
        )),
        "{message}"
    );

    // A link gone altogether is named too.
    let (_dir, storage) = local_with(&[]);
    write_chained(&storage, 1, &[]);
    write_chained(&storage, 2, &[1]);
    storage.discard(CHK, CheckpointId(1)).unwrap();
    let err = verify(&storage, &storage.layout().location(CHK, CheckpointId(2))).unwrap_err();
    assert!(
        matches!(
            err,
            StorageError::BrokenChain {
                link: CheckpointId(1),
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("chk-0000000001/_metadata"),
        "{err}"
    );
}

#[test]
fn a_link_whose_own_chain_differs_is_refused() {
    let storage = MemoryStorage::default();
    write_chained(&storage, 1, &[]);
    write_chained(&storage, 2, &[]);
    write_chained(&storage, 3, &[1, 2]);
    let err = verify(&storage, &storage.layout().location(CHK, CheckpointId(3))).unwrap_err();
    assert!(
        err.to_string()
            .contains("the state of task count#0 there builds on [], not on [1]"),
        "{err}"
    );
}

#[test]
fn restores_a_given_path_only_if_it_verifies() {
    let (_dir, storage) = local_with(&[1]);
    write_checkpoint(&storage, SP, 2);
    let sp = storage.layout().location(SP, CheckpointId(2));
    let point = restore_from_path(&storage, &CheckpointLayout::metadata_file(&sp), None).unwrap();
    assert_eq!(point.location, sp);
    assert_eq!(point.metadata.kind, SP);

    fs::write(sp.dir().join("count-0.state"), b"WEIRSTAT").unwrap();
    let err = restore_from_path(&storage, sp.dir(), None).unwrap_err();
    assert!(
        err.to_string().contains("count-0.state: truncated"),
        "{err}"
    );
}

/// A shared file that a task's local copy of the checkpoint holds is taken from there once it
/// matches its handle; one whose copy does not match, or that has none, is read from the
/// storage. What was taken is a link of the restore's own, gone when the restore is done.
#[test]
fn a_shared_file_is_taken_from_a_local_copy_that_matches_its_handle() {
    use crate::checkpoint::metadata::CheckpointMetadata;

    let (dir, storage) = local_with(&[]);
    let task = TaskId::new("count", 1);
    let write = |name, bytes: &[u8]| {
        storage
            .write_shared(CheckpointId(3), &task, name, bytes)
            .unwrap()
    };
    let (a, b, c) = (
        write("000012.sst", b"table a"),
        write("000013.sst", b"table b"),
        write("000014.sst", b"table c"),
    );
    let mut meta = with_states_of(&storage, CHK, 3, |t| state_of(t, 3));
    assert_eq!(meta.tasks[2].task, task);
    meta.tasks[2].shared = vec![a.clone(), b.clone(), c.clone()];
    meta.format_version = CheckpointMetadata::required_version(&meta.tasks);
    storage.write_metadata(&meta).unwrap();
    let local = LocalCopies::new(dir.path().join("local"), dir.path().join("staged"));
    let copy = local.checkpoint_dir(&task, CheckpointId(3));
    fs::create_dir_all(&copy).unwrap();
    fs::write(copy.join("000012.sst"), b"table a").unwrap();
    // The same length, other bytes: not the file the handle names.
    fs::write(copy.join("000013.sst"), b"table B").unwrap();
    // `a` is no longer in the storage: only its local copy can give it.
    fs::remove_file(storage.layout().shared_dir().join(&a.name)).unwrap();

    let location = storage.layout().location(CHK, CheckpointId(3));
    let point = read_checkpoint(&storage, location.clone(), Some(&local)).unwrap();
    let shared = &point.states[&task].shared;
    let names: Vec<&SharedFile> = shared.iter().map(|(handle, _)| handle).collect();
    assert_eq!(names, [&a, &b, &c]);
    assert!(shared[0].1.is_local(), "{:?}", shared[0].1);
    assert_eq!(shared[1].1, RestoredFile::read(b"table b".to_vec()));
    assert_eq!(shared[2].1, RestoredFile::read(b"table c".to_vec()));
    let placed = dir.path().join("placed");
    shared[0].1.place(&placed).unwrap();
    assert_eq!(fs::read(&placed).unwrap(), b"table a");
    drop(point);
    let staged = fs::read_dir(dir.path().join("staged")).map_or(0, Iterator::count);
    assert_eq!(staged, 0, "the restore's links go with it");

    // Without the local copy the checkpoint does not verify: `a` is gone.
    let err = read_checkpoint(&storage, location, None).unwrap_err();
    assert!(err.to_string().contains(&a.name), "{err}");
}
