//! Which checkpoint to restore, which to prune, which id comes next: the
//! decisions of recovery, apart from the I/O.
//!
//! Why a module of its own: these choices decide whether a restart loses or
//! duplicates output, so they are small synchronous functions over plain
//! facts (the listings the storage found, the ids completed so far), tested
//! exhaustively without a disk or a runtime. The CLI and the
//! coordinator call them; they never list directories themselves. Reading
//! the checkpoint chosen, and verifying it as it is read, is
//! [`super::restore`]'s.
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
//! Only checkpoints and the files they share: the oldest completed checkpoints
//! beyond the `retained` newest, unless a kept checkpoint's image chain needs
//! them (an incremental image is a delta on earlier checkpoints' images:
//! docs/CHECKPOINTS.md §7, §10), and the shared files no kept checkpoint names
//! (§13). Savepoints are never pruned and do not count towards `retained`. At
//! least one completed checkpoint is always kept, whatever `retained` says: it
//! is the only way back after a failure.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::checkpoint::layout::{CheckpointLayout, CheckpointLocation};
use crate::checkpoint::shared::References;
use crate::checkpoint::storage::{CheckpointListing, ListingStatus, StorageError};
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

/// The outcome of choosing the latest checkpoint: `T` is what verifying the chosen one
/// gave (for a restore, the checkpoint read whole: [`super::restore::VerifiedCheckpoint`]).
#[derive(Debug)]
pub struct LatestSelection<T> {
    /// The newest complete checkpoint or savepoint that verified; `None` if
    /// there is none.
    pub chosen: Option<T>,
    /// Every checkpoint newer than the chosen one (all of them if none was
    /// chosen), newest first, with the reason it was passed over.
    pub skipped: Vec<Skipped>,
}

/// Chooses what `--restore latest` restores, from the storage's listings:
/// walks them newest first, skipping incomplete and corrupt ones, and calls
/// `verify` on each complete one until one verifies; what it returns is the
/// choice. Pure but for `verify`, which [`super::restore`] makes the read.
pub fn choose_latest<T, F>(
    mut listings: Vec<CheckpointListing>,
    mut verify: F,
) -> LatestSelection<T>
where
    F: FnMut(&CheckpointLocation) -> Result<T, StorageError>,
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
                Ok(verified) => {
                    return LatestSelection {
                        chosen: Some(verified),
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

/// What retention keeps on disk ([`files_to_keep`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kept {
    /// The completed checkpoints kept.
    pub checkpoints: BTreeSet<CheckpointId>,
    /// The shared files they name.
    pub shared: BTreeSet<String>,
}

/// What of the job's checkpoint storage retention keeps: the `retained`
/// newest completed checkpoints (at least one), every checkpoint their image
/// chains need, and every shared file those name.
///
/// `completed` maps every completed checkpoint still on disk (savepoints are
/// never pruned and are not in it) to what it needs
/// ([`CheckpointMetadata::references`](crate::checkpoint::metadata::CheckpointMetadata::references)).
/// A checkpoint is kept when it is among the `retained` newest, or when a kept
/// checkpoint's chain needs it — the closure: a checkpoint kept as a chain link
/// keeps its own links and files, so every complete checkpoint left on disk can
/// still be restored on its own. A link that is not in `completed` (gone
/// already) is ignored. This one rule serves the coordinator, which prunes
/// what is not kept ([`checkpoints_to_prune`], [`shared_files_to_remove`]).
pub fn files_to_keep(completed: &BTreeMap<CheckpointId, References>, retained: usize) -> Kept {
    let mut checkpoints: BTreeSet<CheckpointId> = completed
        .keys()
        .rev()
        .take(retained.max(1))
        .copied()
        .collect();
    let mut todo: Vec<CheckpointId> = checkpoints.iter().copied().collect();
    while let Some(id) = todo.pop() {
        for &link in completed.get(&id).into_iter().flat_map(|r| &r.links) {
            if completed.contains_key(&link) && checkpoints.insert(link) {
                todo.push(link);
            }
        }
    }
    let shared = checkpoints
        .iter()
        .filter_map(|id| completed.get(id))
        .flat_map(|references| references.shared.iter().cloned())
        .collect();
    Kept {
        checkpoints,
        shared,
    }
}

/// Which completed checkpoints to delete: those of `completed` that
/// [`files_to_keep`] does not keep. The result is sorted **newest first**: a
/// delta is removed before the images it builds on, so a crash part-way through
/// pruning never leaves a complete checkpoint whose chain is gone.
pub fn checkpoints_to_prune(
    completed: &BTreeMap<CheckpointId, References>,
    retained: usize,
) -> Vec<CheckpointId> {
    let keep = files_to_keep(completed, retained).checkpoints;
    completed
        .keys()
        .rev()
        .filter(|id| !keep.contains(id))
        .copied()
        .collect()
}

/// The files of the job's shared directory (`found`, as listed) a running job
/// can remove once checkpoint `completed` has completed: those no checkpoint
/// needs (`needed`: what [`files_to_keep`] keeps, and what the acknowledgements
/// of checkpoints in flight name), written by a checkpoint older than
/// `completed` that is not `in_flight`. Temporary files count as written by
/// the checkpoint their name begins with; a name no checkpoint writes
/// ([`CheckpointLayout::shared_file_writer`]) is never removed.
///
/// Why the writer's id decides: a task names again only files of checkpoints
/// it was told completed, and a checkpoint's own new files carry its id. So a
/// file of an older checkpoint that no completed checkpoint kept names can no
/// longer be named by anyone — the checkpoints that named it are pruned, and
/// any newer state that still holds it is in a kept checkpoint too, since
/// every checkpoint names all the files of its state — while a file of a
/// checkpoint in flight, or newer, may be named by an acknowledgement still to
/// come.
pub fn shared_files_to_remove(
    found: &[String],
    needed: &BTreeSet<String>,
    completed: CheckpointId,
    in_flight: &BTreeSet<CheckpointId>,
) -> Vec<String> {
    found
        .iter()
        .filter(|name| {
            let named = CheckpointLayout::temp_target(name).unwrap_or(name);
            !needed.contains(named)
                && CheckpointLayout::shared_file_writer(name)
                    .is_some_and(|writer| writer < completed && !in_flight.contains(&writer))
        })
        .cloned()
        .collect()
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
mod tests {
    use super::*;
    use crate::checkpoint::format::{FileKind, FormatError, FormatProblem};
    use crate::checkpoint::metadata::CheckpointMetadata;
    use crate::checkpoint::metadata::tests::sample;
    use crate::ids::TaskId;
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

    /// What the test verifier gives for a checkpoint that verifies.
    #[derive(Debug)]
    struct Verified {
        location: CheckpointLocation,
        metadata: CheckpointMetadata,
    }

    /// A verifier that accepts everything but the given locations.
    fn verifier(bad: &[&str]) -> impl FnMut(&CheckpointLocation) -> Result<Verified, StorageError> {
        let bad: Vec<String> = bad.iter().map(|s| s.to_string()).collect();
        move |location| {
            let (kind, id) = location.parsed_name().unwrap();
            if bad.contains(&location.name()) {
                Err(corrupt_error(&format!("{}/count-1.state", location.name())))
            } else {
                Ok(Verified {
                    location: location.clone(),
                    metadata: sample(kind, id.0),
                })
            }
        }
    }

    fn chosen(selection: &LatestSelection<Verified>) -> Option<String> {
        selection.chosen.as_ref().map(|point| point.location.name())
    }

    fn skipped(selection: &LatestSelection<Verified>) -> Vec<String> {
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
    fn completed(ids: &[u64], links: &[(u64, &[u64])]) -> BTreeMap<CheckpointId, References> {
        let mut map: BTreeMap<_, References> = ids
            .iter()
            .map(|&id| (CheckpointId(id), References::default()))
            .collect();
        for &(id, needs) in links {
            map.insert(CheckpointId(id), chained(needs));
        }
        map
    }

    /// What a state whose chain is `links` needs.
    fn chained(links: &[u64]) -> References {
        References {
            links: links.iter().copied().map(CheckpointId).collect(),
            shared: BTreeSet::new(),
        }
    }

    /// What a state naming the shared `files` needs.
    fn sharing(files: &[&str]) -> References {
        References {
            links: BTreeSet::new(),
            shared: files.iter().map(|f| f.to_string()).collect(),
        }
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
            on_disk.insert(CheckpointId(id), chained(links));
            let pruned = checkpoints_to_prune(&on_disk, 1);
            for id in &pruned {
                on_disk.remove(id);
            }
            pruned_at.push(ids(pruned));
        }
        let none: &[u64] = &[];
        assert_eq!(pruned_at, [none, none, none, none, &[4, 3, 2, 1], none]);
        assert_eq!(ids(on_disk.keys().copied()), [5, 6]);
    }

    #[test]
    fn a_checkpoint_kept_as_a_link_keeps_its_own_links() {
        // Task a: full at 4, delta at 5. Task b: full at 1, deltas 2..4, full at 5.
        // Retaining 5 keeps 4 (a's base); 4 keeps b's chain 1..3 so that it stays restorable.
        let on_disk = completed(&[1], &[(2, &[1]), (3, &[1, 2]), (4, &[1, 2, 3]), (5, &[4])]);
        assert_eq!(ids(files_to_keep(&on_disk, 1).checkpoints), [1, 2, 3, 4, 5]);
        // A link already gone is ignored.
        let on_disk = completed(&[], &[(4, &[1, 2, 3]), (5, &[4])]);
        assert_eq!(ids(files_to_keep(&on_disk, 1).checkpoints), [4, 5]);
        assert!(checkpoints_to_prune(&on_disk, 1).is_empty());
    }

    /// The shared file `local` of task `count-0`, written by checkpoint `writer`.
    fn shared(writer: u64, local: &str) -> String {
        CheckpointLayout::shared_file_name(CheckpointId(writer), &TaskId::new("count", 0), local)
            .unwrap()
    }

    #[test]
    fn shared_files_are_kept_while_a_kept_checkpoint_names_them() {
        // An LSM store's files: 1 writes a, b; 2 names a, b and writes c; 3 (after a
        // compaction of a and b into d) names c, d.
        let (a, b, c, d) = (
            shared(1, "a.sst"),
            shared(1, "b.sst"),
            shared(2, "c.sst"),
            shared(3, "d.sst"),
        );
        let mut on_disk = BTreeMap::new();
        on_disk.insert(CheckpointId(1), sharing(&[&a, &b]));
        on_disk.insert(CheckpointId(2), sharing(&[&a, &b, &c]));
        let kept = files_to_keep(&on_disk, 1);
        assert_eq!(ids(kept.checkpoints), [2]);
        assert_eq!(kept.shared, [a.clone(), b.clone(), c.clone()].into());
        on_disk.insert(CheckpointId(3), sharing(&[&c, &d]));
        assert_eq!(
            files_to_keep(&on_disk, 1).shared,
            [c.clone(), d.clone()].into()
        );
        // Retaining two keeps what either names.
        assert_eq!(files_to_keep(&on_disk, 2).shared, [a, b, c, d].into());
    }

    #[test]
    fn a_checkpoint_kept_as_a_link_keeps_its_shared_files() {
        let base = shared(1, "base.sst");
        let mut on_disk = BTreeMap::new();
        on_disk.insert(CheckpointId(1), sharing(&[&base]));
        on_disk.insert(CheckpointId(2), chained(&[1]));
        let kept = files_to_keep(&on_disk, 1);
        assert_eq!(ids(kept.checkpoints), [1, 2]);
        assert_eq!(kept.shared, [base].into());
    }

    #[test]
    fn shared_files_go_once_no_checkpoint_needs_them_and_their_writer_is_done() {
        let found = vec![
            shared(1, "a.sst"),                           // named by a kept checkpoint
            shared(1, "old.sst"),                         // nobody's any more: removed
            format!("{}.1234-0.tmp", shared(2, "x.sst")), // a crash's temporary file: removed
            shared(4, "aborted.sst"),                     // written by aborted 4: removed
            shared(5, "new.sst"),                         // 5 is in flight: kept
            shared(6, "newer.sst"),                       // written after the completed one: kept
            shared(5, "acked.sst"),                       // named by 5's acknowledgement: kept
            "notes.txt".to_string(),                      // not a name Weir writes: kept
        ];
        let needed = [shared(1, "a.sst"), shared(5, "acked.sst")].into();
        let in_flight = [CheckpointId(5)].into();
        let removed = shared_files_to_remove(&found, &needed, CheckpointId(6), &in_flight);
        assert_eq!(
            removed,
            [found[1].clone(), found[2].clone(), found[3].clone()]
        );
        // A temporary file of a file that is needed stays: its rename may be under way.
        let temp = format!("{}.tmp", shared(1, "a.sst"));
        assert!(shared_files_to_remove(&[temp], &needed, CheckpointId(6), &in_flight).is_empty());
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
}
