use super::*;
use crate::checkpoint::generation::Generation;
use crate::checkpoint::metadata::tests::sample;
use crate::checkpoint::shared::SharedFile;
use std::fs;
use std::sync::Arc;

const CHK: CheckpointKind = CheckpointKind::Checkpoint;
const SP: CheckpointKind = CheckpointKind::Savepoint;

/// Writes every task of `sample(kind, id)` with state `"<vertex>-<subtask>@<id>"`
/// and publishes the metadata.
fn complete(storage: &dyn CheckpointStorage, kind: CheckpointKind, id: u64) -> CheckpointMetadata {
    let meta = with_states(storage, kind, id);
    storage.write_metadata(&meta).unwrap();
    meta
}

/// The metadata of `sample(kind, id)`, every task's state `"<vertex>-<subtask>@<id>"`
/// written; the caller publishes it.
fn with_states(
    storage: &dyn CheckpointStorage,
    kind: CheckpointKind,
    id: u64,
) -> CheckpointMetadata {
    with_states_of(storage, kind, id, |task| {
        format!("{}-{}@{id}", task.vertex, task.subtask).into_bytes()
    })
}

/// The metadata of `sample(kind, id)`, every task's state `state(task)` written through
/// `storage`; the caller publishes it. (The catalog and restore tests write theirs with it too.)
pub(crate) fn with_states_of(
    storage: &dyn CheckpointStorage,
    kind: CheckpointKind,
    id: u64,
    state: impl Fn(&TaskId) -> Vec<u8>,
) -> CheckpointMetadata {
    let mut meta = sample(kind, id);
    for entry in &mut meta.tasks {
        let state = state(&entry.task);
        entry.handle = storage
            .write_state(kind, CheckpointId(id), &entry.task, &state)
            .unwrap();
        entry.state_bytes = state.len() as u64;
    }
    meta
}

/// Starts checkpoint `id` through `storage` without completing it: one task's state written,
/// no metadata. (The catalog tests leave theirs with it too.)
pub(crate) fn incomplete(storage: &dyn CheckpointStorage, id: u64) {
    storage
        .write_state(CHK, CheckpointId(id), &TaskId::new("count", 0), b"x")
        .unwrap();
}

/// The word the tests compare a listing's status by.
pub(crate) fn status_word(status: &ListingStatus) -> &'static str {
    match status {
        ListingStatus::Complete(_) => "complete",
        ListingStatus::Incomplete => "incomplete",
        ListingStatus::Corrupt(_) => "corrupt",
    }
}

fn local() -> (tempfile::TempDir, LocalStorage) {
    let dir = tempfile::tempdir().unwrap();
    let storage = LocalStorage::new(CheckpointLayout::new(dir.path().join("job")));
    (dir, storage)
}

fn statuses(storage: &dyn CheckpointStorage) -> Vec<(String, &'static str)> {
    storage
        .list()
        .unwrap()
        .iter()
        .map(|l| (l.name(), status_word(&l.status)))
        .collect()
}

fn round_trip(storage: &dyn CheckpointStorage) {
    let meta = complete(storage, CHK, 3);
    let location = storage.layout().location(CHK, CheckpointId(3));
    assert_eq!(storage.read_metadata(&location).unwrap(), meta);
    for entry in &meta.tasks {
        let state = storage.read_state(&location, &entry.handle).unwrap();
        assert_eq!(
            state,
            format!("{}-{}@3", entry.task.vertex, entry.task.subtask).as_bytes()
        );
    }
    let listings = storage.list().unwrap();
    assert_eq!(listings.len(), 1);
    assert_eq!(listings[0].metadata(), Some(&meta));
}

#[test]
fn local_storage_round_trips_state_and_metadata() {
    let (_dir, storage) = local();
    round_trip(&storage);
    let chk = storage.layout().checkpoint_dir(CHK, CheckpointId(3));
    let mut names: Vec<_> = fs::read_dir(&chk)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "_metadata",
            "count-0.state",
            "count-1.state",
            "source-0.state"
        ]
    );
}

#[test]
fn memory_storage_round_trips_state_and_metadata() {
    round_trip(&MemoryStorage::default());
}

#[test]
fn empty_state_round_trips() {
    let storage = MemoryStorage::default();
    let task = TaskId::new("map", 0);
    let handle = storage
        .write_state(CHK, CheckpointId(1), &task, b"")
        .unwrap();
    assert_eq!(handle.length, format::FRAME_OVERHEAD as u64);
    let location = storage.layout().location(CHK, CheckpointId(1));
    assert_eq!(storage.read_state(&location, &handle).unwrap(), b"");
}

#[test]
fn a_completed_checkpoint_is_never_overwritten() {
    let (_dir, storage) = local();
    let meta = complete(&storage, CHK, 4);
    let path = CheckpointLayout::metadata_file(&storage.layout().location(CHK, CheckpointId(4)));
    let before = fs::read(&path).unwrap();

    let mut other = meta.clone();
    other.job_name = "intruder".into();
    let err = storage.write_metadata(&other).unwrap_err();
    assert!(
        matches!(err, StorageError::AlreadyCompleted { .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("is already complete: refusing to overwrite it"),
        "{err}"
    );

    let err = storage
        .write_state(CHK, CheckpointId(4), &TaskId::new("count", 0), b"new")
        .unwrap_err();
    assert!(
        matches!(err, StorageError::AlreadyCompleted { .. }),
        "{err}"
    );

    assert_eq!(fs::read(&path).unwrap(), before);
    assert!(!CheckpointLayout::temp_file(&path).exists());
    let location = storage.layout().location(CHK, CheckpointId(4));
    let entry = meta.task(&TaskId::new("count", 0)).unwrap();
    assert_eq!(
        storage.read_state(&location, &entry.handle).unwrap(),
        b"count-0@4"
    );
}

#[test]
fn metadata_that_does_not_validate_is_not_published() {
    let storage = MemoryStorage::default();
    let mut meta = sample(CHK, 2);
    meta.tasks.pop();
    let err = storage.write_metadata(&meta).unwrap_err();
    assert!(
        matches!(err, StorageError::Metadata(MetadataError::Invalid { .. })),
        "{err}"
    );
    assert!(storage.paths().is_empty());
}

#[test]
fn a_truncated_state_file_is_named_with_both_lengths() {
    let (_dir, storage) = local();
    let meta = complete(&storage, CHK, 5);
    let location = storage.layout().location(CHK, CheckpointId(5));
    let entry = meta.task(&TaskId::new("count", 1)).unwrap();
    let path = location.dir().join("count-1.state");
    let bytes = fs::read(&path).unwrap();
    fs::write(&path, &bytes[..10]).unwrap();
    let err = storage.read_state(&location, &entry.handle).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "state file {}: truncated: expected {} bytes, found 10",
            path.display(),
            entry.handle.length
        )
    );
}

#[test]
fn a_valid_state_file_that_is_not_the_recorded_one_is_refused() {
    let storage = MemoryStorage::default();
    let task = TaskId::new("count", 0);
    let handle = storage
        .write_state(CHK, CheckpointId(1), &task, b"first")
        .unwrap();
    storage
        .write_state(CHK, CheckpointId(1), &task, b"other")
        .unwrap();
    let location = storage.layout().location(CHK, CheckpointId(1));
    let err = storage.read_state(&location, &handle).unwrap_err();
    assert!(matches!(err, StorageError::HandleMismatch { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("count-0.state does not match its state handle"),
        "{err}"
    );
}

#[test]
fn a_flipped_byte_in_metadata_is_a_checksum_error_naming_the_file() {
    let (_dir, storage) = local();
    complete(&storage, CHK, 6);
    let location = storage.layout().location(CHK, CheckpointId(6));
    let path = CheckpointLayout::metadata_file(&location);
    let mut bytes = fs::read(&path).unwrap();
    bytes[40] ^= 0x20;
    fs::write(&path, bytes).unwrap();
    let err = storage.read_metadata(&location).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!(
            "metadata file {}: checksum mismatch",
            path.display()
        )),
        "{msg}"
    );
    assert_eq!(
        statuses(&storage),
        [("chk-0000000006".to_string(), "corrupt")]
    );
}

#[test]
fn missing_metadata_is_incomplete() {
    let (_dir, storage) = local();
    incomplete(&storage, 2);
    let err = storage
        .read_metadata(&storage.layout().location(CHK, CheckpointId(2)))
        .unwrap_err();
    assert!(matches!(err, StorageError::MissingMetadata { .. }), "{err}");
    assert!(
        err.to_string()
            .ends_with("_metadata is missing: the checkpoint is incomplete"),
        "{err}"
    );
    assert_eq!(
        statuses(&storage),
        [("chk-0000000002".to_string(), "incomplete")]
    );
}

#[test]
fn metadata_in_the_wrong_directory_is_corrupt() {
    let storage = MemoryStorage::default();
    let meta = complete(&storage, CHK, 2);
    let from = CheckpointLayout::metadata_file(&storage.layout().location(CHK, CheckpointId(2)));
    let to = CheckpointLayout::metadata_file(&storage.layout().location(CHK, CheckpointId(9)));
    storage.put_raw_file(&to, meta.encode());
    storage.remove_raw_file(&from);
    let err = storage
        .read_metadata(&storage.layout().location(CHK, CheckpointId(9)))
        .unwrap_err();
    assert!(
        err.to_string()
            .ends_with("records checkpoint 2 but the directory is chk-0000000009"),
        "{err}"
    );
}

#[test]
fn lists_checkpoints_and_savepoints_by_id_ignoring_other_entries() {
    let (dir, storage) = local();
    complete(&storage, CHK, 1);
    complete(&storage, SP, 2);
    complete(&storage, CHK, 3);
    incomplete(&storage, 4);
    let job = dir.path().join("job");
    fs::create_dir(job.join("chk-7")).unwrap();
    fs::write(job.join("chk-0000000008"), b"a file, not a dir").unwrap();
    fs::create_dir(job.join("notes")).unwrap();
    fs::create_dir_all(job.join("savepoints").join("chk-0000000009")).unwrap();
    assert_eq!(
        statuses(&storage),
        [
            ("chk-0000000001".to_string(), "complete"),
            ("sp-0000000002".to_string(), "complete"),
            ("chk-0000000003".to_string(), "complete"),
            ("chk-0000000004".to_string(), "incomplete"),
        ]
    );
}

#[test]
fn a_missing_job_dir_lists_as_empty() {
    let (_dir, storage) = local();
    assert!(storage.list().unwrap().is_empty());
    assert_eq!(storage.cleanup().unwrap(), Cleanup::default());
}

#[test]
fn savepoints_go_to_a_user_given_dir() {
    let dir = tempfile::tempdir().unwrap();
    let layout =
        CheckpointLayout::new(dir.path().join("job")).with_savepoint_dir(dir.path().join("sps"));
    let storage = LocalStorage::new(layout);
    complete(&storage, SP, 5);
    assert!(
        dir.path()
            .join("sps")
            .join("sp-0000000005")
            .join("_metadata")
            .is_file()
    );
    assert_eq!(
        statuses(&storage),
        [("sp-0000000005".to_string(), "complete")]
    );
}

#[test]
fn discard_removes_metadata_first_and_tolerates_partial_dirs() {
    let (_dir, storage) = local();
    complete(&storage, CHK, 1);
    incomplete(&storage, 2);
    storage.discard(CHK, CheckpointId(1)).unwrap();
    storage.discard(CHK, CheckpointId(2)).unwrap();
    storage.discard(CHK, CheckpointId(3)).unwrap();
    assert!(storage.list().unwrap().is_empty());
    assert!(
        !storage
            .layout()
            .checkpoint_dir(CHK, CheckpointId(1))
            .exists()
    );
}

#[test]
fn cleanup_removes_stray_temp_files_and_incomplete_dirs_only() {
    let (_dir, storage) = local();
    let meta = complete(&storage, CHK, 1);
    complete(&storage, SP, 2);
    incomplete(&storage, 3);
    let chk1 = storage.layout().location(CHK, CheckpointId(1));
    let chk3 = storage.layout().location(CHK, CheckpointId(3));
    let stray = chk1.dir().join("count-0.state.tmp");
    fs::write(&stray, b"half").unwrap();
    fs::write(chk1.dir().join("_metadata.tmp"), b"half").unwrap();
    fs::write(chk3.dir().join("_metadata.tmp"), b"half").unwrap();
    let sp4 = storage.layout().checkpoint_dir(SP, CheckpointId(4));
    fs::create_dir_all(&sp4).unwrap();

    let report = storage.cleanup().unwrap();
    assert_eq!(report.removed_dirs, [chk3, CheckpointLocation::new(&sp4)]);
    assert_eq!(
        report.removed_temp_files,
        [chk1.dir().join("_metadata.tmp"), stray]
    );
    assert_eq!(
        statuses(&storage),
        [
            ("chk-0000000001".to_string(), "complete"),
            ("sp-0000000002".to_string(), "complete")
        ]
    );
    for entry in &meta.tasks {
        storage.read_state(&chk1, &entry.handle).unwrap();
    }
    assert_eq!(storage.cleanup().unwrap(), Cleanup::default());
}

#[test]
fn cleanup_keeps_corrupt_checkpoints_for_inspection() {
    let (_dir, storage) = local();
    complete(&storage, CHK, 1);
    let location = storage.layout().location(CHK, CheckpointId(1));
    fs::write(CheckpointLayout::metadata_file(&location), b"garbage").unwrap();
    let report = storage.cleanup().unwrap();
    assert!(report.removed_dirs.is_empty());
    assert_eq!(
        statuses(&storage),
        [("chk-0000000001".to_string(), "corrupt")]
    );
}

#[test]
fn locates_a_dir_or_its_metadata_file() {
    let (dir, storage) = local();
    complete(&storage, SP, 3);
    let sp = storage.layout().location(SP, CheckpointId(3));
    assert_eq!(storage.locate(sp.dir()).unwrap(), sp);
    assert_eq!(
        storage
            .locate(&CheckpointLayout::metadata_file(&sp))
            .unwrap(),
        sp
    );
    let err = storage.locate(&dir.path().join("nope")).unwrap_err();
    assert!(matches!(err, StorageError::NoSuchPath { .. }), "{err}");
    let err = storage.locate(&sp.dir().join("count-0.state")).unwrap_err();
    assert!(matches!(err, StorageError::NotACheckpoint { .. }), "{err}");

    // A savepoint copied elsewhere under another name still restores.
    let copy = dir.path().join("my-backup");
    fs::create_dir(&copy).unwrap();
    for entry in fs::read_dir(sp.dir()).unwrap() {
        let entry = entry.unwrap();
        fs::copy(entry.path(), copy.join(entry.file_name())).unwrap();
    }
    let location = storage.locate(&copy).unwrap();
    let meta = storage.read_metadata(&location).unwrap();
    assert_eq!(meta.checkpoint_id, CheckpointId(3));
    for entry in &meta.tasks {
        storage.read_state(&location, &entry.handle).unwrap();
    }
}

#[test]
fn an_injected_failure_writes_nothing() {
    let memory = MemoryStorage::default();
    let storage = FaultyStorage::memory(&memory);
    storage.inject(2, Fault::Fail(io::ErrorKind::Other));
    let task = TaskId::new("count", 0);
    storage
        .write_state(CHK, CheckpointId(1), &task, b"a")
        .unwrap();
    let err = storage
        .write_state(CHK, CheckpointId(1), &TaskId::new("count", 1), b"b")
        .unwrap_err();
    assert!(
        err.to_string().contains("injected fault on write 2"),
        "{err}"
    );
    assert_eq!(storage.writes(), 2);
    assert_eq!(
        memory.paths(),
        [PathBuf::from("/memory/job/chk-0000000001/count-0.state")]
    );
}

#[test]
fn injected_disk_errors_read_as_the_operating_system_reports_them() {
    let memory = MemoryStorage::default();
    let storage = FaultyStorage::memory(&memory);
    let task = TaskId::new("count", 0);
    let cases = [
        (
            io::ErrorKind::StorageFull,
            "cannot write /memory/job/chk-0000000001/count-0.state.tmp: \
             No space left on device (os error 28)",
        ),
        (
            io::ErrorKind::PermissionDenied,
            "cannot create /memory/job/chk-0000000001/count-0.state.tmp: \
             Permission denied (os error 13)",
        ),
        (
            io::ErrorKind::ReadOnlyFilesystem,
            "cannot create /memory/job/chk-0000000001/count-0.state.tmp: \
             Read-only file system (os error 30)",
        ),
    ];
    for (write, (kind, message)) in cases.into_iter().enumerate() {
        storage.inject(write + 1, Fault::Fail(kind));
        let err = storage
            .write_state(CHK, CheckpointId(1), &task, b"abc")
            .unwrap_err();
        assert_eq!(err.to_string(), message);
        let StorageError::Io(e) = err else {
            panic!("not an I/O error: {err:?}")
        };
        assert_eq!(e.source.kind(), kind);
    }
    assert!(memory.paths().is_empty(), "{:?}", memory.paths());
}

#[test]
fn broken_writes_fail_until_healed() {
    let memory = MemoryStorage::default();
    let storage = FaultyStorage::memory(&memory);
    storage.break_writes(io::ErrorKind::StorageFull);
    for id in 1..=3 {
        let err = storage
            .write_state(CHK, CheckpointId(id), &TaskId::new("count", 0), b"x")
            .unwrap_err();
        assert!(
            err.to_string()
                .ends_with("No space left on device (os error 28)"),
            "{err}"
        );
    }
    assert!(memory.paths().is_empty());
    storage.heal();
    complete(&storage, CHK, 4);
    assert_eq!(storage.writes(), 3 + 4);
    assert_eq!(
        statuses(&memory)
            .into_iter()
            .filter(|(_, status)| *status == "complete")
            .collect::<Vec<_>>(),
        [("chk-0000000004".to_string(), "complete")]
    );
}

#[test]
fn an_injected_metadata_failure_leaves_the_checkpoint_incomplete() {
    let memory = MemoryStorage::default();
    let storage = FaultyStorage::memory(&memory);
    complete(&storage, CHK, 1);
    storage.inject_metadata(2, Fault::Fail(io::ErrorKind::StorageFull));
    let mut meta = sample(CHK, 2);
    for entry in &mut meta.tasks {
        entry.handle = storage
            .write_state(CHK, CheckpointId(2), &entry.task, b"abcdef")
            .unwrap();
        entry.state_bytes = 6;
    }
    let err = storage.write_metadata(&meta).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot write /memory/job/chk-0000000002/_metadata.tmp: \
         No space left on device (os error 28)"
    );
    assert_eq!(storage.metadata_writes(), 2);
    assert_eq!(
        statuses(&memory),
        [
            ("chk-0000000001".to_string(), "complete"),
            ("chk-0000000002".to_string(), "incomplete")
        ]
    );
    // The third metadata write is not planned to fail.
    storage.write_metadata(&meta).unwrap();
    assert_eq!(statuses(&memory)[1].1, "complete");
}

#[test]
fn an_injected_removal_failure_leaves_the_checkpoint_as_it_was() {
    let memory = MemoryStorage::default();
    let storage = FaultyStorage::memory(&memory);
    complete(&storage, CHK, 1);
    storage.inject_removal(1, io::ErrorKind::ReadOnlyFilesystem);
    let err = storage.discard(CHK, CheckpointId(1)).unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot remove /memory/job/chk-0000000001/_metadata: Read-only file system (os error 30)"
    );
    assert_eq!(
        statuses(&memory),
        [("chk-0000000001".to_string(), "complete")]
    );
    storage.discard(CHK, CheckpointId(1)).unwrap();
    assert!(memory.paths().is_empty());
}

#[test]
fn a_crash_while_publishing_leaves_an_incomplete_checkpoint_that_cleanup_removes() {
    let dir = tempfile::tempdir().unwrap();
    let layout = CheckpointLayout::new(dir.path().join("job"));
    let storage = FaultyStorage::local(layout.clone());
    complete(&storage, CHK, 1);
    // Checkpoint 2: three state files, then the metadata write crashes.
    storage.inject(storage.writes() + 4, Fault::CrashBeforeRename);
    let mut meta = sample(CHK, 2);
    for entry in &mut meta.tasks {
        entry.handle = storage
            .write_state(CHK, CheckpointId(2), &entry.task, b"abcdef")
            .unwrap();
    }
    assert!(storage.write_metadata(&meta).is_err());
    let chk2 = layout.location(CHK, CheckpointId(2));
    assert!(CheckpointLayout::temp_file(&CheckpointLayout::metadata_file(&chk2)).is_file());

    // "Restart": a fresh storage over the same directory.
    let restarted = LocalStorage::new(layout);
    assert_eq!(
        statuses(&restarted),
        [
            ("chk-0000000001".to_string(), "complete"),
            ("chk-0000000002".to_string(), "incomplete")
        ]
    );
    let report = restarted.cleanup().unwrap();
    assert_eq!(report.removed_dirs, [chk2]);
    assert_eq!(
        statuses(&restarted),
        [("chk-0000000001".to_string(), "complete")]
    );
}

#[test]
fn a_crash_while_writing_state_leaves_only_a_temp_file() {
    let memory = MemoryStorage::default();
    let storage = FaultyStorage::memory(&memory);
    storage.inject(1, Fault::CrashBeforeRename);
    assert!(
        storage
            .write_state(CHK, CheckpointId(1), &TaskId::new("count", 0), b"abcdef")
            .is_err()
    );
    assert_eq!(
        memory.paths(),
        [PathBuf::from(
            "/memory/job/chk-0000000001/count-0.state.tmp"
        )]
    );
    assert_eq!(
        statuses(&memory),
        [("chk-0000000001".to_string(), "incomplete")]
    );
    memory.cleanup().unwrap();
    assert!(memory.paths().is_empty());
}

#[test]
fn storage_is_object_safe_and_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<LocalStorage>();
    assert_send_sync::<MemoryStorage>();
    assert_send_sync::<FaultyStorage>();
    let storage: Arc<dyn CheckpointStorage> = Arc::new(MemoryStorage::default());
    assert!(storage.list().unwrap().is_empty());
}

#[test]
fn each_run_claims_the_next_generation_once() {
    let (_dir, storage) = local();
    assert_eq!(storage.generation(), None);
    assert_eq!(storage.superseded(), None);
    assert_eq!(storage.claim_generation().unwrap(), Generation(1));
    // Failovers inside the run keep it.
    assert_eq!(storage.claim_generation().unwrap(), Generation(1));
    let next = LocalStorage::new(storage.layout().clone());
    assert_eq!(next.claim_generation().unwrap(), Generation(2));
    assert_eq!(storage.superseded(), Some(Generation(2)));
    assert_eq!(next.superseded(), None);
    assert!(storage.layout().generation_file(Generation(2)).is_file());
}

#[test]
fn runs_racing_for_a_generation_each_get_their_own() {
    let (_dir, first) = local();
    let layout = first.layout().clone();
    let claims: Vec<Generation> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..8)
            .map(|_| {
                let layout = layout.clone();
                scope.spawn(move || LocalStorage::new(layout).claim_generation().unwrap())
            })
            .collect();
        runs.into_iter().map(|run| run.join().unwrap()).collect()
    });
    let mut sorted = claims.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        (1..=8).map(Generation).collect::<Vec<_>>(),
        "{claims:?}"
    );
}

#[test]
fn a_superseded_run_completes_no_checkpoint_and_reserves_no_id() {
    let memory = MemoryStorage::default();
    assert_eq!(memory.claim_generation().unwrap(), Generation(1));
    complete(&memory, CHK, 1);
    let newer = memory.sharing();
    assert_eq!(newer.claim_generation().unwrap(), Generation(2));
    let mut meta = sample(CHK, 2);
    for entry in &mut meta.tasks {
        entry.handle = memory
            .write_state(CHK, CheckpointId(2), &entry.task, b"zombie")
            .unwrap();
        entry.state_bytes = 6;
    }
    let refused = memory.write_metadata(&meta).unwrap_err();
    assert!(
        matches!(refused, StorageError::Superseded { .. }),
        "{refused}"
    );
    let message = refused.to_string();
    for needle in [
        "generation 2",
        "claimed generation 1",
        "/memory/job",
        "--restore latest",
    ] {
        assert!(message.contains(needle), "{needle} not in {message}");
    }
    assert_eq!(
        statuses(&newer),
        [
            ("chk-0000000001".to_string(), "complete"),
            ("chk-0000000002".to_string(), "incomplete")
        ]
    );
    let history = CheckpointHistory::default().with_reserved(CheckpointId(3));
    assert!(matches!(
        memory.write_history(&history),
        Err(StorageError::Superseded { .. })
    ));
    assert_eq!(newer.read_history().unwrap(), CheckpointHistory::default());
    // The newer run writes as before.
    complete(&newer, CHK, 3);
    newer.write_history(&history).unwrap();
}

#[test]
fn a_storage_that_claimed_nothing_is_not_fenced() {
    // The tools (weir checkpoints) read and write without claiming.
    let memory = MemoryStorage::default();
    memory.sharing().claim_generation().unwrap();
    complete(&memory, CHK, 1);
    memory
        .write_history(&CheckpointHistory::default().with_reserved(CheckpointId(1)))
        .unwrap();
}

#[test]
fn the_job_id_is_made_once_and_read_by_every_later_run() {
    let (dir, storage) = local();
    let id = storage.storage_id().unwrap();
    assert_eq!(id.len(), 16, "{id}");
    assert_eq!(storage.storage_id().unwrap(), id);
    let other = LocalStorage::new(storage.layout().clone());
    assert_eq!(other.storage_id().unwrap(), id);
    // A job whose checkpoints are removed starts a new history.
    fs::remove_dir_all(dir.path().join("job")).unwrap();
    assert_ne!(storage.storage_id().unwrap(), id);
    // Racing workers agree.
    let memory = MemoryStorage::default();
    let ids: Vec<String> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..4)
            .map(|_| {
                let view = memory.sharing();
                scope.spawn(move || view.storage_id().unwrap())
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    });
    assert!(ids.iter().all(|id| id == &ids[0]), "{ids:?}");
    // A damaged id is an error naming the file, not a new history.
    fs::create_dir_all(dir.path().join("job")).unwrap();
    fs::write(dir.path().join("job/_id"), "not an id").unwrap();
    let error = storage.storage_id().unwrap_err().to_string();
    assert!(
        error.contains("_id") && error.contains("16 hexadecimal"),
        "{error}"
    );
}

/// Checkpoint `id` of `sample`, its `count#1` naming `shared` besides its state file.
fn complete_sharing(storage: &dyn CheckpointStorage, id: u64, shared: Vec<SharedFile>) {
    let mut meta = with_states(storage, CHK, id);
    meta.tasks[1].shared = shared;
    meta.format_version = CheckpointMetadata::required_version(&meta.tasks);
    storage.write_metadata(&meta).unwrap();
}

#[test]
fn shared_files_are_written_once_beside_the_checkpoints_and_read_back_verified() {
    let (dir, storage) = local();
    let task = TaskId::new("count", 1);
    let a = storage
        .write_shared(CheckpointId(3), &task, "000012.sst", b"table a")
        .unwrap();
    assert_eq!(a.name, "0000000003.count-1.000012.sst");
    let path = dir.path().join("job/shared").join(&a.name);
    assert_eq!(fs::read(&path).unwrap().len() as u64, a.length);
    // Written again with the same bytes (a retried write): kept as it is.
    let modified = fs::metadata(&path).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        storage
            .write_shared(CheckpointId(3), &task, "000012.sst", b"table a")
            .unwrap(),
        a
    );
    assert_eq!(fs::metadata(&path).unwrap().modified().unwrap(), modified);
    complete_sharing(&storage, 3, vec![a.clone()]);
    // Checkpoint 4 names it again; a restore of either reads it from beside its directory.
    let b = storage
        .write_shared(CheckpointId(4), &task, "000020.sst", b"table b")
        .unwrap();
    complete_sharing(&storage, 4, vec![a.clone(), b.clone()]);
    let location = storage.layout().location(CHK, CheckpointId(4));
    assert_eq!(storage.read_shared(&location, &a).unwrap(), b"table a");
    assert_eq!(storage.read_shared(&location, &b).unwrap(), b"table b");
    let mut listed = storage.list_shared().unwrap();
    listed.sort();
    assert_eq!(listed, [a.name.clone(), b.name.clone()]);
    crate::checkpoint::restore::verify(&storage, &location).unwrap();

    // A file replaced under the same name is not the one the checkpoint names.
    let other = storage
        .write_shared(CheckpointId(3), &task, "000012.sst", b"table A")
        .unwrap();
    assert_ne!(
        other.crc32, a.crc32,
        "other bytes replace a file never completed"
    );
    let error = crate::checkpoint::restore::verify(&storage, &location).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("does not match its state handle"),
        "{error}"
    );
    // A missing one names the file.
    storage
        .remove_shared(std::slice::from_ref(&b.name))
        .unwrap();
    storage
        .remove_shared(std::slice::from_ref(&b.name))
        .unwrap();
    let error = storage.read_shared(&location, &b).unwrap_err();
    assert!(error.to_string().contains(&b.name), "{error}");
    assert_eq!(
        storage.list_shared().unwrap(),
        std::slice::from_ref(&a.name)
    );
}

#[test]
fn a_shared_file_name_that_could_leave_the_directory_or_hide_is_refused() {
    let storage = MemoryStorage::default();
    let task = TaskId::new("count", 0);
    for name in [
        "",
        ".",
        "..",
        "a/b",
        "a\\b",
        "x.tmp",
        "ü.sst",
        &"n".repeat(101),
    ] {
        let error = storage
            .write_shared(CheckpointId(1), &task, name, b"x")
            .unwrap_err();
        assert!(
            error.to_string().contains("is not allowed"),
            "{name:?}: {error}"
        );
    }
    let error = storage
        .remove_shared(&["../chk-0000000001".to_string()])
        .unwrap_err();
    assert!(
        error.to_string().contains("not a plain file name"),
        "{error}"
    );
    assert!(
        storage.list_shared().unwrap().is_empty(),
        "no shared directory yet"
    );
}
