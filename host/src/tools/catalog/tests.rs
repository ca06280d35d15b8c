use super::verify::verify_one;
use super::*;
use crate::checkpoint::restore::tests::write_chained;
use crate::checkpoint::storage::tests::{incomplete, with_states_of};
use crate::ids::TaskId;

const CHK: CheckpointKind = CheckpointKind::Checkpoint;
const SP: CheckpointKind = CheckpointKind::Savepoint;

/// Writes every task of `sample(kind, id)` through the storage, with
/// state of `bytes` bytes per task, and publishes the metadata.
fn write_checkpoint(
    storage: &dyn CheckpointStorage,
    kind: CheckpointKind,
    id: u64,
    bytes: usize,
) -> CheckpointMetadata {
    let meta = with_states_of(storage, kind, id, |_| vec![b'a' + (id % 26) as u8; bytes]);
    storage.write_metadata(&meta).unwrap();
    meta
}

/// A job directory `job` in a temp dir with its storage.
fn job_dir() -> (tempfile::TempDir, LocalStorage) {
    let dir = tempfile::tempdir().unwrap();
    let storage = LocalStorage::new(CheckpointLayout::new(dir.path().join("job")));
    (dir, storage)
}

fn state_path(storage: &LocalStorage, kind: CheckpointKind, id: u64, task: &str) -> PathBuf {
    let (vertex, subtask) = task.split_once('-').unwrap();
    storage
        .layout()
        .state_file(
            kind,
            CheckpointId(id),
            &TaskId::new(vertex, subtask.parse().unwrap()),
        )
        .unwrap()
}

fn flip_byte(path: &Path, at: usize) {
    let mut bytes = fs::read(path).unwrap();
    bytes[at] ^= 0x40;
    fs::write(path, bytes).unwrap();
}

fn truncate(path: &Path, by: usize) {
    let bytes = fs::read(path).unwrap();
    fs::write(path, &bytes[..bytes.len() - by]).unwrap();
}

fn statuses(catalog: &Catalog) -> Vec<(String, EntryStatus)> {
    catalog
        .entries
        .iter()
        .map(|e| (e.name.clone(), e.status))
        .collect()
}

#[test]
fn lists_every_checkpoint_newest_first_with_times_and_sizes() {
    let (dir, storage) = job_dir();
    write_checkpoint(&storage, CHK, 1, 10);
    let sp = write_checkpoint(&storage, SP, 2, 100);
    write_checkpoint(&storage, CHK, 3, 1000);
    let catalog = list(&dir.path().join("job")).unwrap();
    assert_eq!(catalog.source.kind, SourceKind::CheckpointDirectory);
    assert_eq!(
        statuses(&catalog),
        [
            ("chk-0000000003".to_string(), EntryStatus::Complete),
            ("sp-0000000002".to_string(), EntryStatus::Complete),
            ("chk-0000000001".to_string(), EntryStatus::Complete),
        ]
    );
    let savepoint = &catalog.entries[1];
    assert_eq!(savepoint.kind, SP);
    assert_eq!(savepoint.trigger_time_ms, Some(sp.trigger_time_ms));
    assert_eq!(savepoint.completion_time_ms, Some(sp.completion_time_ms));
    assert_eq!(savepoint.duration_ms, Some(50));
    assert_eq!(savepoint.job_name.as_deref(), Some("wordcount"));
    assert_eq!(savepoint.state_bytes, Some(300));
    // Three state files of 100 + 24 bytes and the metadata.
    let metadata_len = fs::metadata(savepoint.path.join(METADATA_FILE))
        .unwrap()
        .len();
    assert_eq!(savepoint.disk_bytes, 3 * 124 + metadata_len);
    assert_eq!(
        savepoint.operators,
        [
            OperatorSize {
                vertex: "source".into(),
                subtasks: 1,
                state_bytes: 100
            },
            OperatorSize {
                vertex: "count".into(),
                subtasks: 2,
                state_bytes: 200
            },
        ]
    );
    assert_eq!(
        savepoint.path,
        dir.path().join("job/savepoints/sp-0000000002")
    );
    let latest = catalog.latest_restorable.unwrap();
    assert_eq!((latest.kind, latest.id), (CHK, CheckpointId(3)));
    assert!(catalog.entries[0].verified);
    assert!(!catalog.entries[1].verified);
}

#[test]
fn says_why_a_checkpoint_is_incomplete_or_corrupt() {
    let (dir, storage) = job_dir();
    for id in 1..=4 {
        write_checkpoint(&storage, CHK, id, 10);
    }
    // 5: a state file, no metadata; 6: a metadata being published.
    incomplete(&storage, 5);
    incomplete(&storage, 6);
    let chk6 = storage.layout().checkpoint_dir(CHK, CheckpointId(6));
    fs::write(chk6.join("_metadata.tmp"), b"half").unwrap();
    // 4: metadata with a flipped byte; 3: a truncated state file;
    // 2: a missing state file.
    let meta4 = storage
        .layout()
        .checkpoint_dir(CHK, CheckpointId(4))
        .join(METADATA_FILE);
    flip_byte(&meta4, 60);
    let truncated = state_path(&storage, CHK, 3, "count-1");
    truncate(&truncated, 3);
    let missing = state_path(&storage, CHK, 2, "source-0");
    fs::remove_file(&missing).unwrap();

    let catalog = list(&dir.path().join("job")).unwrap();
    let reasons: Vec<(EntryStatus, String)> = catalog
        .entries
        .iter()
        .map(|e| (e.status, e.reason.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        reasons[0],
        (
            EntryStatus::Incomplete,
            "no _metadata, only _metadata.tmp (incomplete: being published, or the job \
             stopped while publishing it)"
                .to_string()
        )
    );
    assert_eq!(
        reasons[1],
        (
            EntryStatus::Incomplete,
            "no _metadata (incomplete: being written, or the job stopped while writing it)"
                .to_string()
        )
    );
    assert_eq!(reasons[2].0, EntryStatus::Corrupt);
    assert!(
        reasons[2].1.starts_with(&format!(
            "metadata file {}: checksum mismatch",
            meta4.display()
        )),
        "{}",
        reasons[2].1
    );
    assert_eq!(
        reasons[3],
        (
            EntryStatus::Corrupt,
            format!(
                "state file {}: truncated: expected 34 bytes, found 31",
                truncated.display()
            )
        )
    );
    assert_eq!(
        reasons[4],
        (
            EntryStatus::Corrupt,
            format!(
                "state file {} is missing: the metadata references it",
                missing.display()
            )
        )
    );
    assert_eq!(reasons[5], (EntryStatus::Complete, String::new()));
    assert_eq!(catalog.entries[1].temp_files, Vec::<String>::new());
    assert_eq!(catalog.entries[0].temp_files, ["_metadata.tmp"]);
    let latest = catalog.latest_restorable.unwrap();
    assert_eq!(latest.id, CheckpointId(1));
}

#[test]
fn the_latest_restorable_is_what_restore_latest_picks_even_past_a_flipped_byte() {
    let (dir, storage) = job_dir();
    write_checkpoint(&storage, CHK, 1, 10);
    write_checkpoint(&storage, SP, 2, 10);
    write_checkpoint(&storage, CHK, 3, 10);
    // A flipped payload byte keeps the length: only a full read sees it.
    let flipped = state_path(&storage, CHK, 3, "count-0");
    flip_byte(&flipped, 25);

    let catalog = list(&dir.path().join("job")).unwrap();
    let latest = catalog.latest_restorable.clone().unwrap();
    let chosen = restore::restore_latest(&storage, None)
        .unwrap()
        .chosen
        .unwrap();
    assert_eq!(latest.path, chosen.location.dir());
    assert_eq!((latest.kind, latest.id), (SP, CheckpointId(2)));
    let newest = &catalog.entries[0];
    assert_eq!(newest.status, EntryStatus::Corrupt);
    assert!(
        newest.reason.as_deref().unwrap().starts_with(&format!(
            "state file {}: checksum mismatch",
            flipped.display()
        )),
        "{:?}",
        newest.reason
    );
}

#[test]
fn resolves_a_job_file_a_checkpoint_directory_and_a_savepoint_directory() {
    let dir = tempfile::tempdir().unwrap();
    // A job file whose checkpoints are in `state/` beside it.
    let job_file = dir.path().join("job.toml");
    fs::write(
        &job_file,
        "name = \"t\"\n[checkpoint]\ndirectory = \"state\"\n[[source]]\nname = \"in\"\n\
         type = \"generator\"\n[[sink]]\nname = \"out\"\ntype = \"blackhole\"\n\
         inputs = [\"in\"]\n",
    )
    .unwrap();
    let source = CatalogSource::resolve(&job_file).unwrap();
    assert_eq!(source.kind, SourceKind::JobFile);
    assert_eq!(source.checkpoint_dir, dir.path().join("state"));
    assert_eq!(source.savepoint_dir, dir.path().join("state/savepoints"));
    assert_eq!(source.job_name.as_deref(), Some("t"));
    // Nothing written yet: an empty history, not an error.
    assert!(list(&job_file).unwrap().entries.is_empty());

    let storage = LocalStorage::new(CheckpointLayout::new(dir.path().join("state")));
    write_checkpoint(&storage, CHK, 1, 4);
    write_checkpoint(&storage, SP, 2, 4);
    assert_eq!(list(&job_file).unwrap().entries.len(), 2);
    let by_dir = list(&dir.path().join("state")).unwrap();
    assert_eq!(by_dir.entries.len(), 2);

    // A savepoint directory a user named: sp-N directly inside.
    let sps = dir.path().join("sps");
    let storage =
        LocalStorage::new(CheckpointLayout::new(dir.path().join("other")).with_savepoint_dir(&sps));
    write_checkpoint(&storage, SP, 7, 4);
    let catalog = list(&sps).unwrap();
    assert_eq!(catalog.source.kind, SourceKind::SavepointDirectory);
    assert_eq!(
        statuses(&catalog),
        [("sp-0000000007".to_string(), EntryStatus::Complete)]
    );
    assert_eq!(
        catalog.latest_restorable.unwrap().path,
        sps.join("sp-0000000007")
    );
    // The job's `savepoints/` folder alone is a savepoint directory too.
    let catalog = list(&dir.path().join("state/savepoints")).unwrap();
    assert_eq!(
        statuses(&catalog),
        [("sp-0000000002".to_string(), EntryStatus::Complete)]
    );
}

#[test]
fn refuses_paths_that_hold_no_checkpoints_saying_what_to_pass() {
    let (dir, storage) = job_dir();
    write_checkpoint(&storage, CHK, 1, 4);
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    let err = list(&empty).unwrap_err();
    assert!(matches!(err, CatalogError::NotACheckpointDirectory { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "{} is not a checkpoint directory: it holds no chk-N/ or sp-N/ directories; pass \
             the job's checkpoint directory (job file: [checkpoint] directory) or the job file",
            empty.display()
        )
    );
    // A running job's directory before its first checkpoint: empty, not refused.
    fs::write(empty.join(ENDPOINT_FILE), b"{}").unwrap();
    assert!(list(&empty).unwrap().entries.is_empty());
    let err = list(&dir.path().join("nope")).unwrap_err();
    assert!(matches!(err, CatalogError::NoSuchPath { .. }), "{err}");
    let chk1 = storage.layout().checkpoint_dir(CHK, CheckpointId(1));
    let err = list(&chk1).unwrap_err();
    assert!(matches!(err, CatalogError::OneCheckpoint { .. }), "{err}");
    assert!(
        err.to_string().contains("weir checkpoints inspect"),
        "{err}"
    );
    let err = list(&chk1.join(METADATA_FILE)).unwrap_err();
    assert!(matches!(err, CatalogError::NotADirectory { .. }), "{err}");
    let bad_job = dir.path().join("bad.toml");
    fs::write(&bad_job, "name = 3").unwrap();
    let err = list(&bad_job).unwrap_err();
    assert!(matches!(err, CatalogError::Job { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("cannot read the checkpoint directory from job file")
    );
}

#[test]
fn inspects_a_checkpoint_task_by_task() {
    let (_dir, storage) = job_dir();
    let meta = write_checkpoint(&storage, SP, 4, 50);
    let location = storage.layout().location(SP, CheckpointId(4));
    for path in [
        location.dir().to_owned(),
        CheckpointLayout::metadata_file(&location),
    ] {
        let inspection = inspect(&path).unwrap();
        assert!(inspection.ok(), "{inspection:?}");
        assert_eq!(inspection.path, location.dir());
        assert_eq!(inspection.name, "sp-0000000004");
        let summary = inspection.metadata.as_ref().unwrap();
        assert_eq!(summary.kind, SP);
        assert_eq!(summary.checkpoint_id, CheckpointId(4));
        assert_eq!(summary.job_fingerprint, "0xfeedbeef00000001");
        assert_eq!(inspection.state_bytes, Some(150));
        assert_eq!(inspection.tasks.len(), 3);
        for (task, recorded) in inspection.tasks.iter().zip(&meta.tasks) {
            assert_eq!(task.vertex, recorded.task.vertex);
            assert_eq!(task.subtask, recorded.task.subtask);
            assert_eq!(task.file, recorded.handle.file);
            assert_eq!(task.state_bytes, 50);
            assert_eq!(task.file_bytes, 74);
            assert_eq!(task.crc32, format!("{:#010x}", recorded.handle.crc32));
            assert_eq!(
                (
                    task.sync_duration_ms,
                    task.async_duration_ms,
                    task.alignment_duration_ms
                ),
                (1, 2, 0)
            );
            assert!(task.ok && task.problem.is_none());
        }
        assert!(inspection.warnings.is_empty());
        assert_eq!(inspection.files.len(), 4);
    }
}

#[test]
fn inspect_names_every_bad_file_not_only_the_first() {
    let (_dir, storage) = job_dir();
    write_checkpoint(&storage, CHK, 1, 50);
    let flipped = state_path(&storage, CHK, 1, "count-0");
    flip_byte(&flipped, 30);
    let truncated = state_path(&storage, CHK, 1, "count-1");
    truncate(&truncated, 1);
    let dir = storage.layout().checkpoint_dir(CHK, CheckpointId(1));
    fs::write(dir.join("count-1.state.tmp"), b"half").unwrap();
    fs::write(dir.join("notes.txt"), b"mine").unwrap();

    let inspection = inspect(&dir).unwrap();
    assert!(!inspection.ok());
    assert_eq!(inspection.status, EntryStatus::Corrupt);
    let bad: Vec<(&str, bool)> = inspection
        .tasks
        .iter()
        .map(|t| (t.file.as_str(), t.ok))
        .collect();
    assert_eq!(
        bad,
        [
            ("source-0.state", true),
            ("count-0.state", false),
            ("count-1.state", false)
        ]
    );
    let files: Vec<&Path> = inspection
        .problems
        .iter()
        .map(|p| p.file.as_path())
        .collect();
    assert_eq!(files, [flipped.as_path(), truncated.as_path()]);
    assert!(
        inspection.problems[0].message.starts_with(&format!(
            "state file {}: checksum mismatch",
            flipped.display()
        )),
        "{:?}",
        inspection.problems
    );
    assert_eq!(
        inspection.problems[1].message,
        format!(
            "state file {}: truncated: expected 74 bytes, found 73",
            truncated.display()
        )
    );
    let warnings: Vec<&str> = inspection
        .warnings
        .iter()
        .map(|w| w.message.as_str())
        .collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].starts_with("leftover temporary file"),
        "{warnings:?}"
    );
    assert!(warnings[1].ends_with("is not referenced by the metadata: Weir never reads it"));
}

#[test]
fn inspect_reports_missing_and_corrupt_metadata_and_refuses_non_checkpoints() {
    let (dir, storage) = job_dir();
    incomplete(&storage, 1);
    let chk1 = storage.layout().checkpoint_dir(CHK, CheckpointId(1));
    let inspection = inspect(&chk1).unwrap();
    assert_eq!(inspection.status, EntryStatus::Incomplete);
    assert!(inspection.problems[0].message.ends_with(
        "no _metadata (incomplete: being written, or the job stopped while writing it)"
    ));
    assert_eq!(inspection.files[0].name, "count-0.state");

    write_checkpoint(&storage, CHK, 2, 5);
    let chk2 = storage.layout().checkpoint_dir(CHK, CheckpointId(2));
    fs::write(chk2.join(METADATA_FILE), b"WEIRMETA").unwrap();
    let inspection = inspect(&chk2).unwrap();
    assert_eq!(inspection.status, EntryStatus::Corrupt);
    assert!(inspection.metadata.is_none());
    assert!(
        inspection.problems[0]
            .message
            .contains("_metadata: truncated"),
        "{:?}",
        inspection.problems
    );

    let err = inspect(&dir.path().join("job")).unwrap_err();
    assert!(matches!(err, CatalogError::ManyCheckpoints { .. }), "{err}");
    let err = inspect(dir.path()).unwrap_err();
    assert!(matches!(err, CatalogError::NotACheckpoint { .. }), "{err}");
    let err = inspect(&chk2.join("count-0.state")).unwrap_err();
    assert!(matches!(err, CatalogError::NotACheckpoint { .. }), "{err}");
    let err = inspect(&dir.path().join("nope")).unwrap_err();
    assert!(matches!(err, CatalogError::NoSuchPath { .. }), "{err}");
}

#[test]
fn verify_passes_sound_checkpoints_and_warns_of_incomplete_ones_and_temp_files() {
    let (dir, storage) = job_dir();
    write_checkpoint(&storage, CHK, 1, 20);
    write_checkpoint(&storage, SP, 2, 20);
    incomplete(&storage, 3);
    let chk1 = storage.layout().checkpoint_dir(CHK, CheckpointId(1));
    fs::write(chk1.join("_metadata.tmp"), b"leftover").unwrap();

    let report = verify(&dir.path().join("job")).unwrap();
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.problems, 0);
    let verdicts: Vec<(String, Verdict)> = report
        .checkpoints
        .iter()
        .map(|c| (c.name.clone(), c.verdict))
        .collect();
    assert_eq!(
        verdicts,
        [
            ("chk-0000000003".to_string(), Verdict::Incomplete),
            ("sp-0000000002".to_string(), Verdict::Ok),
            ("chk-0000000001".to_string(), Verdict::Ok),
        ]
    );
    assert_eq!(report.warnings, 2);
    assert_eq!(
        report.checkpoints[2].warnings[0].file,
        chk1.join("_metadata.tmp")
    );
    // Two complete checkpoints: a metadata file and three state files each.
    assert_eq!(report.files_checked, 8);
    assert!(report.bytes_checked > 6 * 44);
}

#[test]
fn a_checkpoint_pruned_while_being_read_is_removed_not_corrupt() {
    let (_dir, storage) = job_dir();
    write_checkpoint(&storage, CHK, 1, 20);
    write_checkpoint(&storage, CHK, 2, 20);
    // Listed as complete, then discarded the way a running job prunes.
    let stale = || {
        storage
            .list()
            .unwrap()
            .into_iter()
            .find(|l| l.id == CheckpointId(1))
            .unwrap()
    };
    let (for_list, for_verify) = (stale(), stale());
    storage.discard(CHK, CheckpointId(1)).unwrap();

    let entry = catalog_entry(&storage, for_list).unwrap();
    assert_eq!(entry.status, EntryStatus::Removed);
    assert!(
        entry
            .reason
            .unwrap()
            .ends_with("was removed while being listed (pruned by the running job)")
    );
    let checked = verify_one(&storage, for_verify).unwrap();
    assert_eq!(checked.verdict, Verdict::Removed);
    assert!(checked.problems.is_empty(), "{:?}", checked.problems);
    assert_eq!(checked.warnings.len(), 1);

    // Damage is still damage while the metadata stays.
    let listing = storage.list().unwrap().pop().unwrap();
    fs::remove_file(state_path(&storage, CHK, 2, "count-0")).unwrap();
    assert_eq!(
        verify_one(&storage, listing).unwrap().verdict,
        Verdict::Failed
    );
}

#[test]
fn verify_names_each_bad_file_of_each_checkpoint() {
    let (dir, storage) = job_dir();
    for id in 1..=4 {
        write_checkpoint(&storage, CHK, id, 20);
    }
    let flipped = state_path(&storage, CHK, 1, "source-0");
    flip_byte(&flipped, 22);
    let truncated = state_path(&storage, CHK, 2, "count-0");
    truncate(&truncated, 10);
    let missing = state_path(&storage, CHK, 3, "count-1");
    fs::remove_file(&missing).unwrap();
    let metadata = storage
        .layout()
        .checkpoint_dir(CHK, CheckpointId(4))
        .join(METADATA_FILE);
    truncate(&metadata, 1);

    let report = verify(&dir.path().join("job")).unwrap();
    assert!(!report.ok());
    assert_eq!(report.problems, 4);
    let found: Vec<(Verdict, PathBuf)> = report
        .checkpoints
        .iter()
        .map(|c| (c.verdict, c.problems[0].file.clone()))
        .collect();
    assert_eq!(
        found,
        [
            (Verdict::Failed, metadata.clone()),
            (Verdict::Failed, missing.clone()),
            (Verdict::Failed, truncated.clone()),
            (Verdict::Failed, flipped.clone()),
        ]
    );
    let messages: Vec<&str> = report
        .checkpoints
        .iter()
        .map(|c| c.problems[0].message.as_str())
        .collect();
    assert!(messages[0].contains("_metadata: truncated"), "{messages:?}");
    assert!(messages[1].ends_with("is missing: the metadata references it"));
    assert!(messages[2].ends_with("truncated: expected 44 bytes, found 34"));
    assert!(messages[3].contains("checksum mismatch"));
    for (message, file) in messages
        .iter()
        .zip([&metadata, &missing, &truncated, &flipped])
    {
        assert!(message.contains(&file.display().to_string()), "{message}");
    }
}

#[test]
fn lists_what_chains_need_and_verify_names_a_delta_whose_base_is_gone() {
    let (dir, storage) = job_dir();
    write_chained(&storage, 1, &[]);
    write_chained(&storage, 2, &[1]);
    write_chained(&storage, 3, &[1, 2]);
    let catalog = list(&dir.path().join("job")).unwrap();
    let by_id = |id: u64| catalog.entries.iter().find(|e| e.id.0 == id).unwrap();
    assert_eq!(by_id(1).needed_by, [CheckpointId(2), CheckpointId(3)]);
    assert_eq!(by_id(2).needed_by, [CheckpointId(3)]);
    assert!(by_id(3).needed_by.is_empty());
    assert_eq!(by_id(3).chain_links, [CheckpointId(1), CheckpointId(2)]);
    assert!(verify(&dir.path().join("job")).unwrap().ok());

    storage.discard(CHK, CheckpointId(1)).unwrap();
    let report = verify(&dir.path().join("job")).unwrap();
    assert!(!report.ok());
    let delta = state_path(&storage, CHK, 3, "count-0");
    let problem = report
        .checkpoints
        .iter()
        .find(|c| c.id.0 == 3)
        .unwrap()
        .problems
        .first()
        .unwrap()
        .clone();
    assert_eq!(problem.file, delta);
    assert!(
        problem.message.contains("builds on checkpoint 1")
            && problem.message.contains("chk-0000000001"),
        "names the delta and its base: {}",
        problem.message
    );
    assert_eq!(report.problems, 2, "checkpoints 2 and 3 both need 1");
}

#[test]
fn verify_checks_the_shared_files_a_checkpoint_names_and_names_a_bad_one() {
    let (dir, storage) = job_dir();
    let task = TaskId::new("count", 0);
    let mut meta = with_states_of(&storage, CHK, 1, |_| b"b".to_vec());
    let table = storage
        .write_shared(CheckpointId(1), &task, "000007.sst", &[7; 100])
        .unwrap();
    let index = meta.tasks.iter().position(|e| e.task == task).unwrap();
    meta.tasks[index].shared = vec![table.clone()];
    meta.format_version = CheckpointMetadata::required_version(&meta.tasks);
    storage.write_metadata(&meta).unwrap();
    let report = verify(&dir.path().join("job")).unwrap();
    assert!(report.ok(), "{report:?}");
    let checked = &report.checkpoints[0];
    assert_eq!(checked.files_checked, 1 + meta.tasks.len() + 1);

    let path = dir.path().join("job/shared").join(&table.name);
    flip_byte(&path, 30);
    let report = verify(&dir.path().join("job")).unwrap();
    assert!(!report.ok());
    let problem = &report.checkpoints[0].problems[0];
    assert_eq!(problem.file, path);
    assert!(
        problem.message.contains("checksum mismatch"),
        "{}",
        problem.message
    );
}
