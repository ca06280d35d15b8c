//! Generations: which of several processes running the same job on the same
//! checkpoint storage may still complete checkpoints.
//!
//! Why a module of its own: on local files a lock keeps a second run off a
//! job's directory, but object storage has no locks, and a process that was
//! replaced (a paused VM, a pod partitioned from its node and rescheduled) can
//! run on beside its replacement — a zombie. A conditional create of
//! `_metadata` stops it from overwriting a checkpoint, not from completing
//! checkpoints of its own, and a sink commits its output when a checkpoint
//! completes. Fencing it needs a record both can see: the generation.
//!
//! # The rule
//!
//! - Each run of the job (a process, not an attempt: failovers inside the
//!   process keep it) **claims** a generation before it reads anything of
//!   the job's checkpoints: one more than the highest in `<job dir>/_generations/`,
//!   written with a create-if-absent, so two runs that race for the same number
//!   cannot both win (the loser lists again and takes the next).
//! - Before it completes a checkpoint (writes `_metadata`) or reserves an id
//!   (writes `_history`), a run looks for the generation after its own, one
//!   `HEAD` (a `stat` on local files). If it exists, a newer run has started:
//!   the write is refused with [`StorageError::Superseded`](super::storage::StorageError::Superseded)
//!   and the run stops without restarting. Generations are dense (each claim
//!   takes the highest + 1) and never removed, so "the one after mine" is the
//!   whole question.
//! - Each `_metadata` records the generation that wrote it, for the reader.
//!
//! # Why that is enough
//!
//! The check and the write are two requests, so a zombie can still complete
//! one checkpoint that it checked just before its replacement claimed. Such a
//! checkpoint is no newer than the replacement: the zombie reserved its id
//! (durably, before its barrier left) before it checked, so before the claim,
//! and the replacement reads the history only after claiming, so it numbers
//! its own checkpoints above that id. Any complete checkpoint is a consistent
//! cut, and output a sink commits is always covered by a newer complete
//! checkpoint of the same run (docs/CHECKPOINTS.md §8), so the newest by id is
//! still the right one to restore. The zombie's Kafka transactions are fenced
//! by their transactional ids when the replacement's sinks start.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The directory, in the job directory, that holds one empty file per
/// generation ever claimed.
pub const GENERATIONS_DIR: &str = "_generations";

/// How many times a claim lists again after losing a race for a number.
pub const CLAIM_ATTEMPTS: usize = 16;

/// One run of a job on its checkpoint storage; 0 for checkpoints written
/// before generations existed. See the module docs.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct Generation(pub u64);

impl Generation {
    /// The generation after this one.
    pub fn next(self) -> Generation {
        Generation(self.0 + 1)
    }

    /// Its file name in [`GENERATIONS_DIR`]: zero-padded, so names sort by number.
    pub fn file_name(self) -> String {
        format!("{:010}", self.0)
    }

    /// The generation a file of [`GENERATIONS_DIR`] names, if it is one.
    pub fn parse_file_name(name: &str) -> Option<Generation> {
        if name.len() < 10 || !name.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        name.parse().ok().map(Generation)
    }

    /// Whether this is the default of checkpoints from before generations.
    pub fn is_unknown(&self) -> bool {
        self.0 == 0
    }
}

impl fmt::Display for Generation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_sort_by_number_and_parse_back() {
        let names: Vec<String> = [Generation(9), Generation(10), Generation(123)]
            .iter()
            .map(|g| g.file_name())
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        assert_eq!(
            Generation::parse_file_name("0000000010"),
            Some(Generation(10))
        );
        for other in ["", "12", "00000000x1", "0000000001.tmp", "-000000001"] {
            assert_eq!(Generation::parse_file_name(other), None, "{other}");
        }
    }
}
