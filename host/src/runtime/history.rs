//! [`HistoryRecorder`]: keeps the job's checkpoint history
//! ([`crate::checkpoint::history`]) one id ahead of the coordinator, so no
//! checkpoint id is ever used twice, across crashes too.
//!
//! Before a barrier leaves, its id must be on disk as reserved. Writing that
//! on the trigger's path would add an fsync to every checkpoint, so the id
//! after each trigger is reserved in the background right away; by the next
//! trigger (an interval later) it is long durable and the trigger only checks.
//! A crash therefore skips at most one id. A run that ends settles the
//! reservation back to the last id it really used, so ids stay dense without
//! crashes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::task::JoinHandle;

use crate::checkpoint::history::CheckpointHistory;
use crate::checkpoint::storage::{CheckpointStorage, StorageError};
use crate::ids::CheckpointId;

/// Writes the job's checkpoint history as the run reserves and completes ids.
pub(crate) struct HistoryRecorder {
    storage: Arc<dyn CheckpointStorage>,
    /// What is on disk. Writes hold the lock while they write, so they are
    /// serialised and the file only ever grows (but for [`settle`](Self::settle)).
    written: Arc<Mutex<CheckpointHistory>>,
    /// The reservation at the start of the run: never settled below.
    floor: Option<CheckpointId>,
    /// The background reservation of the next id.
    ahead: Option<JoinHandle<()>>,
    /// The highest id this run triggered.
    last_used: Option<CheckpointId>,
    /// Whether a failed write was warned about and no write succeeded since.
    warned: Arc<AtomicBool>,
    /// Why the storage refused a write because a newer run claimed a generation
    /// ([`StorageError::Superseded`]): the run must stop.
    superseded: Arc<Mutex<Option<String>>>,
}

impl HistoryRecorder {
    /// A recorder for `storage`, whose history on disk is `written`.
    pub(crate) fn new(storage: Arc<dyn CheckpointStorage>, written: CheckpointHistory) -> Self {
        HistoryRecorder {
            storage,
            floor: written.reserved,
            written: Arc::new(Mutex::new(written)),
            ahead: None,
            last_used: None,
            warned: Arc::new(AtomicBool::new(false)),
            superseded: Arc::new(Mutex::new(None)),
        }
    }

    /// The history as written so far.
    pub(crate) fn history(&self) -> CheckpointHistory {
        *self.written.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Makes sure `id` is reserved on disk before it is triggered: waits for the
    /// background reservation, and writes it now if that did not cover `id`.
    /// A failing disk is warned about and the trigger goes on (its checkpoint cannot
    /// complete unless the id is reserved: see [`covers`](Self::covers)). `Err` names
    /// the newer generation when the storage refused the write because a newer run
    /// took over: the run must stop.
    pub(crate) async fn reserve(&mut self, id: CheckpointId) -> Result<(), String> {
        self.last_used = self.last_used.max(Some(id));
        if let Some(ahead) = self.ahead.take() {
            let _ = ahead.await;
        }
        if !self.history().covers(id) {
            let (storage, written, warned, superseded) = self.parts();
            let _ = tokio::task::spawn_blocking(move || {
                record(storage.as_ref(), &written, &warned, &superseded, |h| {
                    h.with_reserved(id)
                });
            })
            .await;
        }
        match self
            .superseded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            Some(reason) => Err(reason),
            None => Ok(()),
        }
    }

    /// Whether `id` is durably reserved: a checkpoint completes only then, so that a
    /// newer run, which reads the history after claiming its generation, numbers its
    /// checkpoints above every one an older run can still complete
    /// (`checkpoint/generation.rs`).
    pub(crate) fn covers(&self, id: CheckpointId) -> bool {
        self.history().covers(id)
    }

    /// Reserves `id` in the background: called right after a trigger for the next one.
    pub(crate) fn reserve_ahead(&mut self, id: CheckpointId) {
        // Writes merge under `written`'s lock and only grow: whichever of two reservations still
        // under way runs last, the file ends up covering `id`.
        let (storage, written, warned, superseded) = self.parts();
        self.ahead = Some(tokio::task::spawn_blocking(move || {
            record(storage.as_ref(), &written, &warned, &superseded, |h| {
                h.with_reserved(id)
            });
        }));
    }

    /// Records that `id` completed, in the background.
    pub(crate) fn completed(&self, id: CheckpointId) {
        let (storage, written, warned, superseded) = self.parts();
        tokio::task::spawn_blocking(move || {
            record(storage.as_ref(), &written, &warned, &superseded, |h| {
                h.with_completed(id)
            });
        });
    }

    /// At the end of the run, when nothing triggers any more: lowers the reservation to
    /// the highest id this run triggered (never below what the run started with, nor below
    /// a completed id), so the next run continues right after it.
    pub(crate) async fn settle(&mut self) {
        let last_used = self.last_used;
        if let Some(ahead) = self.ahead.take() {
            let _ = ahead.await;
        }
        let (storage, written, warned, superseded) = self.parts();
        let floor = self.floor;
        let _ = tokio::task::spawn_blocking(move || {
            record(storage.as_ref(), &written, &warned, &superseded, |h| {
                CheckpointHistory {
                    reserved: last_used.max(floor).max(h.completed),
                    completed: h.completed,
                }
            });
        })
        .await;
    }

    fn parts(&self) -> Parts {
        (
            Arc::clone(&self.storage),
            Arc::clone(&self.written),
            Arc::clone(&self.warned),
            Arc::clone(&self.superseded),
        )
    }
}

/// What a background write needs of the recorder.
type Parts = (
    Arc<dyn CheckpointStorage>,
    Arc<Mutex<CheckpointHistory>>,
    Arc<AtomicBool>,
    Arc<Mutex<Option<String>>>,
);

/// Writes `update(history)` if it differs from what is written; blocking. A refusal
/// because a newer run took over is kept in `superseded`, not warned about.
fn record(
    storage: &dyn CheckpointStorage,
    written: &Mutex<CheckpointHistory>,
    warned: &AtomicBool,
    superseded: &Mutex<Option<String>>,
    update: impl FnOnce(CheckpointHistory) -> CheckpointHistory,
) {
    let mut current = written.lock().unwrap_or_else(PoisonError::into_inner);
    let next = update(*current);
    if next == *current {
        return;
    }
    match storage.write_history(&next) {
        Ok(()) => {
            *current = next;
            warned.store(false, Ordering::Relaxed);
        }
        Err(e @ StorageError::Superseded { .. }) => {
            *superseded.lock().unwrap_or_else(PoisonError::into_inner) = Some(e.to_string());
        }
        Err(e) => warn_once(warned, &e),
    }
}

fn warn_once(warned: &AtomicBool, e: &StorageError) {
    if !warned.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "cannot record the checkpoint history: {e}; no checkpoint can complete until an \
             id is recorded as reserved in it"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::layout::CheckpointLayout;
    use crate::checkpoint::storage::MemoryStorage;

    fn id(n: u64) -> CheckpointId {
        CheckpointId(n)
    }

    #[tokio::test]
    async fn reserves_ahead_records_completions_and_settles_to_the_last_id_used() {
        let storage = Arc::new(MemoryStorage::new(CheckpointLayout::new("/jobs/wc")));
        let mut recorder = HistoryRecorder::new(storage.clone(), CheckpointHistory::default());
        recorder.reserve(id(1)).await.unwrap();
        assert_eq!(storage.read_history().unwrap().reserved, Some(id(1)));
        recorder.reserve_ahead(id(2));
        recorder.reserve(id(2)).await.unwrap();
        assert_eq!(storage.read_history().unwrap().reserved, Some(id(2)));
        recorder.reserve_ahead(id(3));
        recorder.completed(id(2));
        recorder.settle().await;
        // The completion may land after the settle: either way the file ends at 2.
        for _ in 0..100 {
            if storage.read_history().unwrap().completed.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let on_disk = storage.read_history().unwrap();
        assert_eq!(on_disk.completed, Some(id(2)));
        assert_eq!(on_disk.reserved, Some(id(2)));
    }

    #[tokio::test]
    async fn settling_never_goes_below_the_start_of_the_run() {
        let storage = Arc::new(MemoryStorage::new(CheckpointLayout::new("/jobs/wc")));
        let start = CheckpointHistory::default().with_reserved(id(9));
        storage.write_history(&start).unwrap();
        let mut recorder = HistoryRecorder::new(storage.clone(), start);
        recorder.reserve_ahead(id(10));
        recorder.settle().await;
        assert_eq!(storage.read_history().unwrap().reserved, Some(id(9)));
    }

    #[tokio::test]
    async fn a_newer_generation_stops_the_reservations() {
        let layout = CheckpointLayout::new("/jobs/wc");
        let storage = Arc::new(MemoryStorage::new(layout.clone()));
        let ours = storage.claim_generation().unwrap();
        let mut recorder = HistoryRecorder::new(storage.clone(), CheckpointHistory::default());
        recorder.reserve(id(1)).await.unwrap();
        // Another process starts the job on the same storage.
        let newer = MemoryStorage::sharing(&storage);
        assert_eq!(newer.claim_generation().unwrap(), ours.next());
        recorder.reserve_ahead(id(2));
        let refused = recorder.reserve(id(2)).await.unwrap_err();
        assert!(refused.contains("generation 2"), "{refused}");
        assert!(!recorder.covers(id(2)));
        assert_eq!(storage.read_history().unwrap().reserved, Some(id(1)));
    }
}
