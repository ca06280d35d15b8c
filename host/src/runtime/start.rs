//! What a run starts from: the checkpoint or savepoint its options ask for, the one a failover
//! goes back to, and what taking it up means for the job (its states matched to the tasks, a
//! rescale, the checks its connectors make before a restore).
//!
//! Why a file of its own: the runner's lifecycle (load, run attempts, restart, end) asks one
//! question at each start — from where? — and the answer is its own set of rules: a restore
//! must not replay output an exactly-once sink already committed (so a silent start from the
//! beginning after earlier output is refused), a failover goes back along the job's own
//! lineage, and `on_cancel = "delete"` removes what it kept. Those rules read the storage and
//! the checkpoint history; the lifecycle in `runner.rs` only calls them.

use std::collections::HashMap;
use std::sync::Arc;

use super::RestoreFrom;
use super::error::RunError;
use super::monitor::RestoredCheckpoint;
use super::restore::{RestoreError, match_states};
use super::runner::{JobRunner, blocking};
use crate::checkpoint::format::FRAME_OVERHEAD;
use crate::checkpoint::history::CheckpointHistory;
use crate::checkpoint::recovery::SkipReason;
use crate::checkpoint::restore::{
    VerifiedCheckpoint, restore_from_path, restore_latest, restore_latest_since,
};
use crate::checkpoint::storage::StorageError;
use crate::checkpoint::task_state::RestoredState;
use crate::connectors::file_sink::committed_parts;
use crate::ids::{CheckpointId, CheckpointKind, TaskId};
use crate::job::{Job, SinkKind, VertexKind};

impl JobRunner {
    /// The states `job` restores from the checkpoint `p`, and the job as it runs from them (its
    /// operators keeping the key groups of their state); tells the monitor and the log what was
    /// restored, dropped and rescaled.
    pub(super) async fn restore(
        &self,
        p: VerifiedCheckpoint,
        job: &Job,
    ) -> Result<(Job, HashMap<TaskId, RestoredState>), RunError> {
        tracing::info!("restoring from {}", p.location.dir().display());
        log_local_copies(&p);
        let restored = RestoredCheckpoint {
            id: p.metadata.checkpoint_id,
            kind: p.metadata.kind,
            path: p.location.dir().to_path_buf(),
            restored_at: std::time::SystemTime::now(),
            rescaled: Vec::new(),
        };
        let name = p.location.name();
        let label = name.clone();
        let allow = self.options.allow_non_restored_state;
        let for_match = job.clone();
        // Decoding envelopes moves the states' bytes, and a rescale splits them: off the async
        // threads.
        let matched = blocking(move || {
            let tasks: Vec<TaskId> = p.metadata.tasks.iter().map(|e| e.task.clone()).collect();
            let metadata = p.metadata.clone();
            let states = p.into_task_states(&tasks)?;
            match_states(&metadata, &name, &for_match, allow, states)
        })
        .await?;
        self.check_restore(job, &matched.states, &label).await?;
        for vertex in &matched.dropped {
            tracing::warn!(
                "dropping the state of `{vertex}` from {label}: the job has no such vertex"
            );
        }
        for (vertex, old, new) in &matched.rescaled {
            tracing::info!(
                "rescaled the state of `{vertex}` from {old} to {new} subtasks, by key group, \
                 from {label}"
            );
        }
        self.monitor.set_restored(RestoredCheckpoint {
            rescaled: matched.changed.clone(),
            ..restored
        });
        Ok((job.with_key_groups(&matched.key_groups), matched.states))
    }

    /// Runs the sources' checks of a restore from the checkpoint `label`
    /// (`connectors::restore_checks`: a Kafka source refuses offsets that belong to a topic
    /// deleted and created again), off the async threads; the first that refuses stops the
    /// restore.
    async fn check_restore(
        &self,
        job: &Job,
        states: &HashMap<TaskId, RestoredState>,
        label: &str,
    ) -> Result<(), RunError> {
        let checks = crate::connectors::restore_checks(job, states, label);
        if checks.is_empty() {
            return Ok(());
        }
        blocking(move || {
            for check in checks {
                check()?;
            }
            Ok::<_, RunError>(())
        })
        .await
    }

    /// Reads and verifies the checkpoint or savepoint at `path`.
    pub(super) async fn read_checkpoint(
        &self,
        path: &std::path::Path,
    ) -> Result<VerifiedCheckpoint, RunError> {
        let storage = Arc::clone(&self.storage);
        let path = path.to_path_buf();
        let local = self.local_copies();
        blocking(move || restore_from_path(storage.as_ref(), &path, local.as_ref())).await
    }

    /// What the run starts from: the restore its options ask for, refusing a silent replay
    /// from the beginning when an earlier run left evidence of committed output (see
    /// [`RestoreFrom::Latest`]).
    pub(super) async fn choose_start(
        &self,
        history: &CheckpointHistory,
    ) -> Result<Option<VerifiedCheckpoint>, RunError> {
        let storage = Arc::clone(&self.storage);
        let local = self.local_copies();
        match self.options.restore.clone() {
            Some(RestoreFrom::Path(path)) => {
                let asked = path.clone();
                let result =
                    blocking(move || restore_from_path(storage.as_ref(), &path, local.as_ref()))
                        .await;
                match result {
                    Ok(point) => Ok(Some(point)),
                    Err(e) => Err(self.with_alternative(e, &asked).await),
                }
            }
            Some(RestoreFrom::Latest) => {
                let selection =
                    blocking(move || restore_latest(storage.as_ref(), local.as_ref())).await?;
                for skipped in &selection.skipped {
                    tracing::warn!("{skipped}");
                }
                let damaged = selection
                    .skipped
                    .iter()
                    .filter(|s| matches!(s.reason, SkipReason::Corrupt(_)))
                    .count();
                if let Some(chosen) = selection.chosen {
                    if damaged > 0 {
                        tracing::warn!(
                            "restoring {} {}, older than the newest: {damaged} damaged \
                             checkpoint(s) skipped, so output they had committed may be written \
                             again",
                            chosen.metadata.kind,
                            chosen.metadata.checkpoint_id
                        );
                    }
                    return Ok(Some(chosen));
                }
                let mut evidence = Vec::new();
                if let Some(newest) = selection
                    .skipped
                    .iter()
                    .find(|s| matches!(s.reason, SkipReason::Corrupt(_)))
                {
                    evidence.push(format!(
                        "{damaged} damaged checkpoint(s) were found (the newest: {})",
                        newest.reason
                    ));
                }
                evidence.extend(self.earlier_output(history).await?);
                if evidence.is_empty() || self.options.fresh {
                    tracing::info!(
                        "no complete checkpoint to restore: starting from the beginning"
                    );
                    return Ok(None);
                }
                Err(RunError::FreshStartRefused {
                    evidence,
                    directory: self.job.checkpoint.storage_root(),
                })
            }
            None => {
                if !self.options.fresh {
                    let listings = blocking(move || storage.list()).await?;
                    let complete = listings.iter().filter(|l| l.metadata().is_some()).count();
                    let mut evidence = Vec::new();
                    if complete > 0 {
                        evidence.push(format!("{complete} complete checkpoint(s)"));
                    }
                    evidence.extend(self.earlier_output(history).await?);
                    if !evidence.is_empty() {
                        tracing::warn!(
                            "starting from the beginning, but an earlier run of this job left {}: \
                             output it committed will be written again. To continue where it \
                             stopped, run with --restore latest; --fresh starts from the \
                             beginning without this warning",
                            evidence.join("; ")
                        );
                    }
                }
                Ok(None)
            }
        }
    }

    /// What shows that an earlier run committed output, besides its checkpoints: the
    /// history's record of a completed checkpoint, and committed parts of file sinks.
    async fn earlier_output(&self, history: &CheckpointHistory) -> Result<Vec<String>, RunError> {
        let mut evidence = Vec::new();
        if let Some(id) = history.completed {
            evidence.push(format!(
                "the checkpoint history {} records that checkpoint {id} completed",
                self.storage.layout().history_file().display()
            ));
        }
        let sinks: Vec<(String, std::path::PathBuf)> = self
            .job
            .vertices
            .iter()
            .filter_map(|v| match &v.kind {
                VertexKind::Sink(SinkKind::File { directory }) => {
                    Some((v.name.clone(), directory.clone()))
                }
                _ => None,
            })
            .collect();
        let counts = blocking(move || {
            sinks
                .into_iter()
                .map(|(name, dir)| {
                    let parts = committed_parts(&dir).map_err(|e| {
                        RunError::Setup(format!(
                            "file sink `{name}`: cannot list its output directory {}: {e}",
                            dir.display()
                        ))
                    })?;
                    Ok((name, dir, parts))
                })
                .collect::<Result<Vec<_>, RunError>>()
        })
        .await?;
        for (name, dir, parts) in counts {
            if parts > 0 {
                evidence.push(format!(
                    "file sink `{name}` holds {parts} committed part file(s) in {}",
                    dir.display()
                ));
            }
        }
        Ok(evidence)
    }

    /// `error` (the checkpoint `asked` for with `--restore PATH` cannot be used), with the
    /// newest checkpoint or savepoint of the job that does verify, if there is one other than
    /// the one asked for.
    async fn with_alternative(&self, error: RunError, asked: &std::path::Path) -> RunError {
        let storage = Arc::clone(&self.storage);
        let selection = blocking(move || restore_latest(storage.as_ref(), None)).await;
        let RunError::Storage(error) = error else {
            return error;
        };
        // `asked` may be the directory or its `_metadata` file.
        let same = |dir: &std::path::Path| {
            let canonical = |p: &std::path::Path| std::fs::canonicalize(p).ok();
            let asked_dir = if asked.ends_with(crate::checkpoint::layout::METADATA_FILE) {
                asked.parent().unwrap_or(asked)
            } else {
                asked
            };
            canonical(dir).is_some_and(|d| Some(d) == canonical(asked_dir)) || dir == asked_dir
        };
        match selection.ok().and_then(|s| s.chosen) {
            Some(point) if !same(point.location.dir()) => {
                RunError::Restore(RestoreError::Unusable {
                    source: Box::new(error),
                    kind: point.metadata.kind,
                    alternative: point.location.dir().to_path_buf(),
                })
            }
            _ => RunError::Storage(error),
        }
    }

    /// The checkpoint a failover restores, read whole: the newest checkpoint or savepoint this
    /// run completed (ids from `run_first_id`), else the one the run started from (in
    /// `initial`), else none.
    pub(super) async fn resolve_failover(
        &self,
        run_first_id: CheckpointId,
        initial: Option<&std::path::Path>,
    ) -> Result<Option<VerifiedCheckpoint>, RunError> {
        let storage = Arc::clone(&self.storage);
        let local = self.local_copies();
        let selection =
            blocking(move || restore_latest_since(storage.as_ref(), run_first_id, local.as_ref()))
                .await?;
        for skipped in &selection.skipped {
            tracing::warn!("{skipped}");
        }
        if let Some(chosen) = selection.chosen {
            return Ok(Some(chosen));
        }
        match initial {
            Some(initial) => {
                let storage = Arc::clone(&self.storage);
                let dir = initial.to_path_buf();
                let local = self.local_copies();
                Ok(Some(
                    blocking(move || restore_from_path(storage.as_ref(), &dir, local.as_ref()))
                        .await?,
                ))
            }
            None => {
                tracing::info!("no checkpoint of this run to restore: starting from the beginning");
                Ok(None)
            }
        }
    }

    /// Deletes every completed checkpoint (not savepoints) and the files they
    /// share: `on_cancel = "delete"`.
    pub(super) async fn delete_checkpoints(&self) -> Result<(), RunError> {
        let storage = Arc::clone(&self.storage);
        blocking(move || {
            // Newest first: a delta goes before the images it builds on, so a crash part-way
            // through never leaves a complete checkpoint whose chain is gone.
            for listing in storage.list()?.into_iter().rev() {
                if listing.kind == CheckpointKind::Checkpoint {
                    storage.discard(listing.kind, listing.id)?;
                }
            }
            // Savepoints never name shared files: once no checkpoint is left, none is needed.
            storage.remove_shared(&storage.list_shared()?)?;
            Ok::<(), StorageError>(())
        })
        .await?;
        Ok(())
    }
}

/// Says how much of `p`'s keyed state the restore takes from local copies of its checkpoints and
/// how much it read from the checkpoint storage, if it has keyed state.
fn log_local_copies(p: &VerifiedCheckpoint) {
    let (mut local, mut read) = ((0, 0), (0, 0));
    for (handle, file) in p.states.values().flat_map(|state| &state.shared) {
        let sum = if file.is_local() {
            &mut local
        } else {
            &mut read
        };
        sum.0 += 1;
        sum.1 += handle.length.saturating_sub(FRAME_OVERHEAD as u64);
    }
    if local.0 + read.0 > 0 {
        tracing::info!(
            "keyed state: {} file(s) of {} bytes taken from local copies, {} file(s) of {} bytes \
             read from the checkpoint storage",
            local.0,
            local.1,
            read.0,
            read.1
        );
    }
}
