//! Which checkpoint to restore, which to prune, and whether one can be
//! trusted: the decisions of recovery, apart from the I/O.
//!
//! Why a module of its own: these choices decide whether a restart loses or
//! duplicates output, so they are small synchronous functions over plain
//! facts (the listings the storage found, the ids completed so far), tested
//! exhaustively without a disk or a runtime. The CLI and the
//! coordinator call them; they never list directories themselves.
//! [`verify`] and [`restore_latest`] do read, but only through
//! [`CheckpointStorage`], so they run as well over the in-memory test double.
//!
//! # What `--restore latest` picks
//!
//! The **newest complete snapshot by id, checkpoint or savepoint**, whose
//! metadata and every state file verify. Checkpoints and savepoints share
//! one id sequence, and sinks commit on the completion of either; restoring
//! a checkpoint older than a newer savepoint would replay records whose
//! output an exactly-once sink already committed, so a newer savepoint wins.
//! (This differs from Flink, whose "latest" looks only at checkpoints.) Only
//! savepoints in the job's layout are seen. The two kinds never share an id
//! in normal operation; if they do (a savepoint copied in by hand), the
//! checkpoint is preferred.
//!
//! Every newer directory passed over is reported with its reason, so the CLI
//! can print `skipping chk-0000000007: state file …/count-1.state: checksum mismatch: …`.
//!
//! # What pruning removes
//!
//! Only checkpoints: the oldest completed ones beyond the `retained` newest,
//! unless a kept checkpoint's image chain needs them (an incremental image is
//! a delta on earlier checkpoints' images: docs/CHECKPOINTS.md §7, §10).
//! Savepoints are never pruned and do not count towards `retained`. At least
//! one completed checkpoint is always kept, whatever `retained` says: it is
//! the only way back after a failure.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::checkpoint::layout::{CheckpointLayout, CheckpointLocation};
use crate::checkpoint::metadata::{CheckpointMetadata, StateHandle, TaskStateMeta, format_chain};
use crate::checkpoint::storage::{
    CheckpointListing, CheckpointStorage, ListingStatus, StorageError,
};
use crate::ids::{CheckpointId, CheckpointKind};

/// Why a checkpoint was passed over.
#[derive(Debug)]
pub enum SkipReason {
    /// It has no metadata: it was never completed.
    Incomplete,
    /// Its metadata or one of its state files does not verify; the error
    /// names the file and the problem.
    Corrupt(StorageError),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Incomplete => f.write_str("incomplete: missing metadata"),
            SkipReason::Corrupt(error) => write!(f, "{error}"),
        }
    }
}

/// A checkpoint newer than the one chosen, passed over, and why.
/// Displays as `skipping chk-0000000007: <reason>`.
#[derive(Debug)]
pub struct Skipped {
    /// Checkpoint or savepoint.
    pub kind: CheckpointKind,
    /// Its id.
    pub id: CheckpointId,
    /// Its directory.
    pub location: CheckpointLocation,
    /// Why it was passed over.
    pub reason: SkipReason,
}

impl fmt::Display for Skipped {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "skipping {}: {}",
            CheckpointLayout::dir_name(self.kind, self.id),
            self.reason
        )
    }
}

/// A verified checkpoint to restore from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestorePoint {
    /// Its directory: state handles are relative to it.
    pub location: CheckpointLocation,
    /// Its verified metadata.
    pub metadata: CheckpointMetadata,
    /// The state files its verification read, for loading it to take instead of reading them
    /// again (a restore reads every state once, not twice).
    pub states: VerifiedStates,
}

/// State files already read and verified, kept for the restore that needs them next.
///
/// Verifying a checkpoint reads every state file it references; loading it reads them again.
/// For a large state (an image is the guest's whole memory) that second read is the largest
/// part of a restore, so verification keeps what it read here and loading takes it. Clones
/// share the files; each is taken once, and a file not kept (or already taken) is read from
/// the storage as usual. A cache, not part of what a restore point is: two are always equal.
#[derive(Debug, Clone, Default)]
pub struct VerifiedStates {
    files: Arc<Mutex<HashMap<PathBuf, Vec<u8>>>>,
}

impl VerifiedStates {
    /// The verified state at `handle` in `location`: the bytes kept, or else read (and verified)
    /// from `storage`.
    pub fn read<S>(
        &self,
        storage: &S,
        location: &CheckpointLocation,
        handle: &StateHandle,
    ) -> Result<Vec<u8>, StorageError>
    where
        S: CheckpointStorage + ?Sized,
    {
        let kept = self
            .files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&location.dir().join(&handle.file));
        match kept {
            Some(bytes) => Ok(bytes),
            None => storage.read_state(location, handle),
        }
    }

    /// Drops every file kept.
    fn clear(&self) {
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn keep(&self, location: &CheckpointLocation, handle: &StateHandle, bytes: Vec<u8>) {
        self.files
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(location.dir().join(&handle.file), bytes);
    }
}

impl PartialEq for VerifiedStates {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for VerifiedStates {}

/// A state an incremental image builds on, read by [`read_chain`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainState {
    /// The checkpoint it is in.
    pub location: CheckpointLocation,
    /// Its file there.
    pub handle: StateHandle,
    /// Its bytes, verified.
    pub bytes: Vec<u8>,
}

/// The outcome of choosing the latest checkpoint.
#[derive(Debug)]
pub struct LatestSelection {
    /// The newest complete, verified checkpoint or savepoint; `None` if
    /// there is none.
    pub chosen: Option<RestorePoint>,
    /// Every checkpoint newer than the chosen one (all of them if none was
    /// chosen), newest first, with the reason it was passed over.
    pub skipped: Vec<Skipped>,
}

/// Chooses what `--restore latest` restores, from the storage's listings:
/// walks them newest first, skipping incomplete and corrupt ones, and calls
/// `verify` on each complete one until one verifies. Pure but for `verify`.
pub fn choose_latest<F>(mut listings: Vec<CheckpointListing>, mut verify: F) -> LatestSelection
where
    F: FnMut(&CheckpointLocation) -> Result<CheckpointMetadata, StorageError>,
{
    // Newest first; on a tie of ids, the checkpoint before the savepoint.
    let rank = |kind| match kind {
        CheckpointKind::Checkpoint => 1,
        CheckpointKind::Savepoint => 0,
    };
    listings.sort_by_key(|listing| Reverse((listing.id, rank(listing.kind))));
    let mut skipped = Vec::new();
    for listing in listings {
        let CheckpointListing {
            kind,
            id,
            location,
            status,
        } = listing;
        let reason = match status {
            ListingStatus::Incomplete => SkipReason::Incomplete,
            ListingStatus::Corrupt(error) => SkipReason::Corrupt(error),
            ListingStatus::Complete(_) => match verify(&location) {
                Ok(metadata) => {
                    return LatestSelection {
                        chosen: Some(RestorePoint {
                            location,
                            metadata,
                            states: VerifiedStates::default(),
                        }),
                        skipped,
                    };
                }
                Err(error) => SkipReason::Corrupt(error),
            },
        };
        skipped.push(Skipped {
            kind,
            id,
            location,
            reason,
        });
    }
    LatestSelection {
        chosen: None,
        skipped,
    }
}

/// Checks that the checkpoint at `location` can be trusted: its metadata
/// verifies, and so does every state file it references (frame, length and
/// checksum against the state handle), and every state file of the earlier
/// checkpoints its image chains need ([`read_chain`]). Reads every state file
/// once; the first failure is returned, naming the file.
pub fn verify<S>(
    storage: &S,
    location: &CheckpointLocation,
) -> Result<CheckpointMetadata, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    verify_keeping(storage, location, None)
}

/// [`verify`], keeping every state file read in `kept` when given.
fn verify_keeping<S>(
    storage: &S,
    location: &CheckpointLocation,
    kept: Option<&VerifiedStates>,
) -> Result<CheckpointMetadata, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    let metadata = storage.read_metadata(location)?;
    let mut links = BTreeMap::new();
    let nothing_kept = VerifiedStates::default();
    for entry in &metadata.tasks {
        let bytes = storage.read_state(location, &entry.handle)?;
        let chain = read_chain(storage, location, entry, &mut links, &nothing_kept)?;
        if let Some(kept) = kept {
            kept.keep(location, &entry.handle, bytes);
            for link in chain {
                kept.keep(&link.location, &link.handle, link.bytes);
            }
        }
    }
    Ok(metadata)
}

/// `location` verified, with the state files verification read kept for loading it.
fn verified_point<S>(
    storage: &S,
    location: CheckpointLocation,
) -> Result<RestorePoint, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    let states = VerifiedStates::default();
    let metadata = verify_keeping(storage, &location, Some(&states))?;
    Ok(RestorePoint {
        location,
        metadata,
        states,
    })
}

/// Reads and verifies the states `entry`'s chain needs (an incremental
/// image: docs/CHECKPOINTS.md §10), base first: for each link, the metadata
/// of the checkpoint beside `location` (cached in `links`), the task's entry
/// there, whose own chain must be the part of `entry`'s before the link, and
/// its state file (frame and handle), taken from `states` when verification
/// kept it. Empty for a self-contained state. An error names the delta's
/// file, the link and what is wrong with it.
pub fn read_chain<S>(
    storage: &S,
    location: &CheckpointLocation,
    entry: &TaskStateMeta,
    links: &mut BTreeMap<CheckpointId, CheckpointMetadata>,
    states: &VerifiedStates,
) -> Result<Vec<ChainState>, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    let mut chain = Vec::with_capacity(entry.chain.len());
    for (position, &link) in entry.chain.iter().enumerate() {
        let broken = |problem: String| StorageError::BrokenChain {
            path: location.dir().join(&entry.handle.file),
            link,
            problem,
        };
        let link_location = location.chain_link(link);
        let meta = match links.entry(link) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(
                storage
                    .read_metadata(&link_location)
                    .map_err(|e| broken(e.to_string()))?,
            ),
        };
        let Some(link_entry) = meta.task(&entry.task) else {
            return Err(broken(format!(
                "{} holds no state of task {}",
                link_location, entry.task
            )));
        };
        let expected = &entry.chain[..position];
        if link_entry.chain != expected {
            return Err(broken(format!(
                "the state of task {} there builds on {}, not on {}",
                entry.task,
                format_chain(&link_entry.chain),
                format_chain(expected)
            )));
        }
        let bytes = states
            .read(storage, &link_location, &link_entry.handle)
            .map_err(|e| broken(e.to_string()))?;
        chain.push(ChainState {
            location: link_location,
            handle: link_entry.handle.clone(),
            bytes,
        });
    }
    Ok(chain)
}

/// `--restore latest`: lists the storage and chooses with [`choose_latest`],
/// verifying each candidate with [`verify`].
pub fn restore_latest<S>(storage: &S) -> Result<LatestSelection, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    restore_latest_since(storage, CheckpointId(0))
}

/// [`restore_latest`] among the checkpoints and savepoints whose id is at
/// least `since`: a failover chooses among those of its own run, never one an
/// earlier run left behind.
pub fn restore_latest_since<S>(
    storage: &S,
    since: CheckpointId,
) -> Result<LatestSelection, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    let mut listings = storage.list()?;
    listings.retain(|listing| listing.id >= since);
    // The states the chosen checkpoint's verification read are kept for loading it; those of a
    // candidate that fails are dropped with it.
    let states = VerifiedStates::default();
    let mut selection = choose_latest(listings, |location| {
        states.clear();
        verify_keeping(storage, location, Some(&states))
    });
    if let Some(chosen) = &mut selection.chosen {
        chosen.states = states;
    }
    Ok(selection)
}

/// `--restore PATH`: the checkpoint or savepoint at `path` (its directory or
/// its `_metadata` file), verified.
pub fn restore_from_path<S>(storage: &S, path: &Path) -> Result<RestorePoint, StorageError>
where
    S: CheckpointStorage + ?Sized,
{
    let location = storage.locate(path)?;
    verified_point(storage, location)
}

/// Which completed checkpoints to delete so that the `retained` newest
/// remain (at least one), with everything their image chains need.
///
/// `completed` maps every completed checkpoint still on disk (savepoints are
/// never pruned and are not in it) to the checkpoints its tasks' chains need
/// ([`CheckpointMetadata::chain_links`]). A checkpoint is kept when it is
/// among the `retained` newest, or when a kept checkpoint needs it — the
/// closure: a checkpoint kept as a chain link keeps its own links, so every
/// complete checkpoint left on disk can still be restored on its own. The
/// result is sorted **newest first**: a delta is removed before the images it
/// builds on, so a crash part-way through pruning never leaves a complete
/// checkpoint whose chain is gone.
pub fn checkpoints_to_prune(
    completed: &BTreeMap<CheckpointId, BTreeSet<CheckpointId>>,
    retained: usize,
) -> Vec<CheckpointId> {
    let keep = kept_checkpoints(completed, retained);
    completed
        .keys()
        .rev()
        .filter(|id| !keep.contains(id))
        .copied()
        .collect()
}

/// The checkpoints of `completed` that pruning keeps: the `retained` newest
/// (at least one) and, transitively, every checkpoint their chains need
/// (see [`checkpoints_to_prune`]). A link that is not in `completed` (gone
/// already) is ignored.
pub fn kept_checkpoints(
    completed: &BTreeMap<CheckpointId, BTreeSet<CheckpointId>>,
    retained: usize,
) -> BTreeSet<CheckpointId> {
    let mut keep: BTreeSet<CheckpointId> = completed
        .keys()
        .rev()
        .take(retained.max(1))
        .copied()
        .collect();
    let mut todo: Vec<CheckpointId> = keep.iter().copied().collect();
    while let Some(id) = todo.pop() {
        for &link in completed.get(&id).into_iter().flatten() {
            if completed.contains_key(&link) && keep.insert(link) {
                todo.push(link);
            }
        }
    }
    keep
}

/// The incomplete checkpoint and savepoint directories a running job can
/// remove once checkpoint `completed` has completed: those older than it
/// that are not `in_flight` (pending or being finalized). They were aborted
/// (declined, expired, their metadata write failed, subsumed), and either
/// their removal failed (a read-only or failing disk) or a task still
/// writing when the abort came recreated them. Removing them at every
/// completion keeps a long run with many failed checkpoints from piling up
/// directories. Complete and corrupt ones are never returned.
pub fn stray_checkpoints(
    listings: &[CheckpointListing],
    completed: CheckpointId,
    in_flight: &BTreeSet<CheckpointId>,
) -> Vec<(CheckpointKind, CheckpointId)> {
    listings
        .iter()
        .filter(|l| matches!(l.status, ListingStatus::Incomplete))
        .filter(|l| l.id < completed && !in_flight.contains(&l.id))
        .map(|l| (l.kind, l.id))
        .collect()
}

/// The id the coordinator should use next: after every id present in the
/// storage (complete, incomplete or corrupt, so no directory is ever reused)
/// and after the restored one (which may come from elsewhere).
pub fn next_checkpoint_id(
    listings: &[CheckpointListing],
    restored: Option<CheckpointId>,
) -> CheckpointId {
    listings
        .iter()
        .map(|listing| listing.id)
        .chain(restored)
        .max()
        .map_or(CheckpointId(1), CheckpointId::next)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::checkpoint::format::{FileKind, FormatError, FormatProblem};
    use crate::checkpoint::metadata::tests::sample;
    use crate::checkpoint::storage::{LocalStorage, MemoryStorage};
    use crate::ids::TaskId;
    use std::fs;
    use std::path::PathBuf;

    const CHK: CheckpointKind = CheckpointKind::Checkpoint;
    const SP: CheckpointKind = CheckpointKind::Savepoint;

    fn listing(kind: CheckpointKind, id: u64, status: ListingStatus) -> CheckpointListing {
        let layout = CheckpointLayout::new("/jobs/wc");
        CheckpointListing {
            kind,
            id: CheckpointId(id),
            location: layout.location(kind, CheckpointId(id)),
            status,
        }
    }

    fn complete(kind: CheckpointKind, id: u64) -> CheckpointListing {
        listing(
            kind,
            id,
            ListingStatus::Complete(Box::new(sample(kind, id))),
        )
    }

    fn corrupt_error(file: &str) -> StorageError {
        StorageError::Format(FormatError {
            kind: FileKind::State,
            path: PathBuf::from(file),
            problem: FormatProblem::ChecksumMismatch {
                stored: 1,
                computed: 2,
            },
        })
    }

    /// A verifier that accepts everything but the given locations.
    fn verifier(
        bad: &[&str],
    ) -> impl FnMut(&CheckpointLocation) -> Result<CheckpointMetadata, StorageError> {
        let bad: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
        move |location| {
            let (kind, id) = location.parsed_name().unwrap();
            if bad.contains(&location.name()) {
                Err(corrupt_error(&format!("{}/count-1.state", location.name())))
            } else {
                Ok(sample(kind, id.0))
            }
        }
    }

    fn chosen(selection: &LatestSelection) -> Option<String> {
        selection.chosen.as_ref().map(|point| point.location.name())
    }

    fn skipped(selection: &LatestSelection) -> Vec<String> {
        selection.skipped.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn strays_are_older_incomplete_directories_not_in_flight() {
        let listings = vec![
            listing(CHK, 1, ListingStatus::Incomplete),
            complete(CHK, 2),
            listing(SP, 3, ListingStatus::Incomplete),
            listing(CHK, 4, ListingStatus::Corrupt(corrupt_error("x"))),
            listing(CHK, 5, ListingStatus::Incomplete),
            listing(CHK, 6, ListingStatus::Incomplete),
            complete(CHK, 7),
            listing(CHK, 8, ListingStatus::Incomplete),
        ];
        let in_flight = BTreeSet::from([CheckpointId(5)]);
        assert_eq!(
            stray_checkpoints(&listings, CheckpointId(7), &in_flight),
            [
                (CHK, CheckpointId(1)),
                (SP, CheckpointId(3)),
                (CHK, CheckpointId(6))
            ]
        );
        assert!(stray_checkpoints(&listings, CheckpointId(1), &BTreeSet::new()).is_empty());
    }

    #[test]
    fn chooses_the_newest_complete_checkpoint() {
        let listings = vec![complete(CHK, 1), complete(CHK, 3), complete(CHK, 2)];
        let selection = choose_latest(listings, verifier(&[]));
        assert_eq!(chosen(&selection).as_deref(), Some("chk-0000000003"));
        assert!(selection.skipped.is_empty());
        assert_eq!(selection.chosen.unwrap().metadata, sample(CHK, 3));
    }

    #[test]
    fn skips_newer_incomplete_and_corrupt_checkpoints_with_the_reason() {
        let listings = vec![
            complete(CHK, 5),
            listing(
                CHK,
                6,
                ListingStatus::Corrupt(corrupt_error("chk-0000000006/_metadata")),
            ),
            complete(CHK, 7),
            listing(CHK, 8, ListingStatus::Incomplete),
            complete(CHK, 4),
            listing(CHK, 2, ListingStatus::Incomplete),
        ];
        let selection = choose_latest(listings, verifier(&["chk-0000000007"]));
        assert_eq!(chosen(&selection).as_deref(), Some("chk-0000000005"));
        assert_eq!(
            skipped(&selection),
            [
                "skipping chk-0000000008: incomplete: missing metadata",
                "skipping chk-0000000007: state file chk-0000000007/count-1.state: \
                 checksum mismatch: stored 0x00000001, computed 0x00000002",
                "skipping chk-0000000006: state file chk-0000000006/_metadata: \
                 checksum mismatch: stored 0x00000001, computed 0x00000002",
            ]
        );
    }

    #[test]
    fn a_newer_savepoint_wins_an_older_one_does_not() {
        let selection = choose_latest(vec![complete(CHK, 3), complete(SP, 4)], verifier(&[]));
        assert_eq!(chosen(&selection).as_deref(), Some("sp-0000000004"));
        let selection = choose_latest(vec![complete(SP, 2), complete(CHK, 3)], verifier(&[]));
        assert_eq!(chosen(&selection).as_deref(), Some("chk-0000000003"));
    }

    #[test]
    fn on_a_tie_of_ids_the_checkpoint_wins() {
        let selection = choose_latest(vec![complete(SP, 3), complete(CHK, 3)], verifier(&[]));
        assert_eq!(chosen(&selection).as_deref(), Some("chk-0000000003"));
    }

    #[test]
    fn nothing_complete_chooses_nothing_and_reports_everything() {
        let selection = choose_latest(vec![], verifier(&[]));
        assert!(selection.chosen.is_none() && selection.skipped.is_empty());
        let listings = vec![listing(CHK, 1, ListingStatus::Incomplete), complete(CHK, 2)];
        let selection = choose_latest(listings, verifier(&["chk-0000000002"]));
        assert!(selection.chosen.is_none());
        assert_eq!(selection.skipped.len(), 2);
        assert_eq!(selection.skipped[0].id, CheckpointId(2));
    }

    #[test]
    fn verifies_only_until_one_passes() {
        let mut calls = Vec::new();
        let listings = vec![complete(CHK, 1), complete(CHK, 2), complete(CHK, 3)];
        let selection = choose_latest(listings, |location| {
            calls.push(location.name());
            verifier(&["chk-0000000003"])(location)
        });
        assert_eq!(chosen(&selection).as_deref(), Some("chk-0000000002"));
        assert_eq!(calls, ["chk-0000000003", "chk-0000000002"]);
    }

    /// Completed checkpoints `ids`, each needing the links given for it.
    fn completed(
        ids: &[u64],
        links: &[(u64, &[u64])],
    ) -> BTreeMap<CheckpointId, BTreeSet<CheckpointId>> {
        let mut map: BTreeMap<_, BTreeSet<_>> = ids
            .iter()
            .map(|&id| (CheckpointId(id), BTreeSet::new()))
            .collect();
        for &(id, needs) in links {
            map.insert(
                CheckpointId(id),
                needs.iter().copied().map(CheckpointId).collect(),
            );
        }
        map
    }

    fn ids(v: impl IntoIterator<Item = CheckpointId>) -> Vec<u64> {
        v.into_iter().map(|id| id.0).collect()
    }

    #[test]
    fn pruning_keeps_exactly_retained_checkpoints_without_chains() {
        let completed = completed(&[1, 3, 4, 5, 7], &[]);
        assert_eq!(ids(checkpoints_to_prune(&completed, 2)), [4, 3, 1]);
        assert_eq!(ids(checkpoints_to_prune(&completed, 1)), [5, 4, 3, 1]);
        assert_eq!(ids(checkpoints_to_prune(&completed, 5)), Vec::<u64>::new());
        assert_eq!(ids(checkpoints_to_prune(&completed, 50)), Vec::<u64>::new());
        // Never the last one, even if asked to keep none.
        assert_eq!(ids(checkpoints_to_prune(&completed, 0)), [5, 4, 3, 1]);
        assert!(checkpoints_to_prune(&BTreeMap::new(), 1).is_empty());
        for retained in 1..8 {
            let pruned = checkpoints_to_prune(&completed, retained);
            let kept = 5 - pruned.len();
            assert_eq!(kept, retained.min(5), "retained {retained}");
        }
    }

    #[test]
    fn pruning_keeps_the_chain_links_of_retained_checkpoints_until_a_full_image() {
        // A full image every 4: 1 full, 2..4 deltas, 5 full, 6 delta.
        let chains: &[(u64, &[u64])] = &[(2, &[1]), (3, &[1, 2]), (4, &[1, 2, 3]), (6, &[5])];
        let mut on_disk = completed(&[], &[]);
        let mut pruned_at = Vec::new();
        for id in 1..=6u64 {
            let links = chains
                .iter()
                .find(|(c, _)| *c == id)
                .map_or(&[][..], |(_, l)| l);
            on_disk.insert(
                CheckpointId(id),
                links.iter().copied().map(CheckpointId).collect(),
            );
            let pruned = checkpoints_to_prune(&on_disk, 1);
            for id in &pruned {
                on_disk.remove(id);
            }
            pruned_at.push(ids(pruned));
        }
        let none = Vec::<u64>::new();
        assert_eq!(
            pruned_at,
            [
                none.clone(),
                none.clone(),
                none.clone(),
                none.clone(),
                vec![4, 3, 2, 1],
                none
            ]
        );
        assert_eq!(ids(on_disk.keys().copied()), [5, 6]);
    }

    #[test]
    fn a_checkpoint_kept_as_a_link_keeps_its_own_links() {
        // Task a: full at 4, delta at 5. Task b: full at 1, deltas 2..4, full at 5.
        // Retaining 5 keeps 4 (a's base); 4 keeps b's chain 1..3 so that it stays restorable.
        let on_disk = completed(&[1], &[(2, &[1]), (3, &[1, 2]), (4, &[1, 2, 3]), (5, &[4])]);
        assert_eq!(ids(kept_checkpoints(&on_disk, 1)), [1, 2, 3, 4, 5]);
        // A link already gone is ignored.
        let on_disk = completed(&[], &[(4, &[1, 2, 3]), (5, &[4])]);
        assert_eq!(ids(kept_checkpoints(&on_disk, 1)), [4, 5]);
        assert!(checkpoints_to_prune(&on_disk, 1).is_empty());
    }

    #[test]
    fn next_id_follows_every_listed_and_the_restored_id() {
        assert_eq!(next_checkpoint_id(&[], None), CheckpointId(1));
        assert_eq!(
            next_checkpoint_id(&[], Some(CheckpointId(41))),
            CheckpointId(42)
        );
        let listings = vec![
            complete(CHK, 3),
            listing(CHK, 9, ListingStatus::Corrupt(corrupt_error("x"))),
            listing(SP, 7, ListingStatus::Incomplete),
        ];
        assert_eq!(
            next_checkpoint_id(&listings, Some(CheckpointId(3))),
            CheckpointId(10)
        );
    }

    // --- over real storage ---

    /// Writes every task of `sample(kind, id)` and publishes the metadata.
    fn write_checkpoint(storage: &dyn CheckpointStorage, kind: CheckpointKind, id: u64) {
        let mut meta = sample(kind, id);
        for entry in &mut meta.tasks {
            let state = format!("{}@{id}", entry.task);
            entry.handle = storage
                .write_state(kind, CheckpointId(id), &entry.task, state.as_bytes())
                .unwrap();
            entry.state_bytes = state.len() as u64;
        }
        storage.write_metadata(&meta).unwrap();
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

        let selection = restore_latest(&storage).unwrap();
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
        let path =
            CheckpointLayout::metadata_file(&storage.layout().location(CHK, CheckpointId(3)));
        let mut bytes = fs::read(&path).unwrap();
        bytes[100] ^= 0x08;
        fs::write(&path, bytes).unwrap();

        let selection = restore_latest(&storage).unwrap();
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
        let selection = restore_latest(&storage).unwrap();
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
        let selection = restore_latest(&storage).unwrap();
        assert_eq!(chosen(&selection).as_deref(), Some("chk-0000000001"));
        assert_eq!(
            skipped(&selection),
            ["skipping chk-0000000002: incomplete: missing metadata"]
        );
    }

    /// Checkpoint `id` where `count#0`'s state builds on `chain`; each task's state is
    /// `<task>@<id>`.
    pub(crate) fn write_chained(storage: &dyn CheckpointStorage, id: u64, chain: &[u64]) {
        let mut meta = sample(CHK, id);
        meta.format_version = crate::checkpoint::metadata::METADATA_VERSION;
        for entry in &mut meta.tasks {
            let state = format!("{}@{id}", entry.task);
            entry.handle = storage
                .write_state(CHK, CheckpointId(id), &entry.task, state.as_bytes())
                .unwrap();
            entry.state_bytes = state.len() as u64;
            if entry.task == TaskId::new("count", 0) {
                entry.chain = chain.iter().copied().map(CheckpointId).collect();
            }
        }
        storage.write_metadata(&meta).unwrap();
    }

    #[test]
    fn a_restore_point_hands_over_the_states_its_verification_read_once() {
        let storage = MemoryStorage::default();
        write_chained(&storage, 1, &[]);
        write_chained(&storage, 2, &[1]);
        write_chained(&storage, 3, &[]);
        let chk2 = storage.layout().location(CHK, CheckpointId(2));
        let task = TaskId::new("count", 0);
        for point in [
            restore_latest(&storage).unwrap().chosen.unwrap(),
            restore_from_path(&storage, chk2.dir()).unwrap(),
        ] {
            let entry = point.metadata.task(&task).unwrap().clone();
            let id = point.metadata.checkpoint_id;
            // The files are gone from the storage; the point still has what it verified.
            for gone in [id, CheckpointId(1)] {
                let path = storage.layout().state_file(CHK, gone, &task).unwrap();
                storage.remove_raw_file(&path);
            }
            let kept = point.states.read(&storage, &point.location, &entry.handle);
            assert_eq!(kept.unwrap(), format!("count#0@{id}").as_bytes());
            let chain = read_chain(
                &storage,
                &point.location,
                &entry,
                &mut BTreeMap::new(),
                &point.states,
            )
            .unwrap();
            let links: Vec<&[u8]> = chain.iter().map(|link| link.bytes.as_slice()).collect();
            let expected: &[&[u8]] = if id == CheckpointId(2) {
                &[b"count#0@1"]
            } else {
                &[]
            };
            assert_eq!(links, expected, "checkpoint {id}");
            // Each file is handed over once: a second read goes to the storage.
            let again = point.states.read(&storage, &point.location, &entry.handle);
            assert!(again.is_err(), "checkpoint {id}: read twice");
        }
    }

    #[test]
    fn verifying_a_delta_reads_its_chain_and_a_broken_link_falls_back_naming_both_files() {
        let (_dir, storage) = local_with(&[]);
        write_chained(&storage, 1, &[]);
        write_chained(&storage, 2, &[1]);
        write_chained(&storage, 3, &[1, 2]);
        let chk3 = storage.layout().location(CHK, CheckpointId(3));
        let point = restore_from_path(&storage, chk3.dir()).unwrap();
        let entry = point.metadata.task(&TaskId::new("count", 0)).unwrap();
        let nothing_kept = VerifiedStates::default();
        let states = read_chain(
            &storage,
            &point.location,
            entry,
            &mut BTreeMap::new(),
            &nothing_kept,
        )
        .unwrap();
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
        let selection = restore_latest(&storage).unwrap();
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
        let point = restore_from_path(&storage, &CheckpointLayout::metadata_file(&sp)).unwrap();
        assert_eq!(point.location, sp);
        assert_eq!(point.metadata.kind, SP);

        fs::write(sp.dir().join("count-0.state"), b"WEIRSTAT").unwrap();
        let err = restore_from_path(&storage, sp.dir()).unwrap_err();
        assert!(
            err.to_string().contains("count-0.state: truncated"),
            "{err}"
        );
    }
}
