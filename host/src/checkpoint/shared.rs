//! Files that the states of several checkpoints share, and what a checkpoint
//! needs kept on disk.
//!
//! Why a module of its own: an incremental state backend (an LSM store's
//! immutable files) uploads at each checkpoint only what is new and names the
//! rest again, so one file serves many checkpoints and belongs to none. The
//! handle a state names such a file by ([`SharedFile`]) and the sum of what a
//! checkpoint needs besides its directory ([`References`]) are read by the
//! tasks' acknowledgements, the metadata, the coordinator's retention and the
//! restore alike; here they depend on none of them. Which files are kept is
//! [`super::recovery::files_to_keep`]'s rule; docs/CHECKPOINTS.md §13 tells
//! the protocol.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::checkpoint::format::hex_u32;
use crate::ids::CheckpointId;

/// A file in the job's shared directory (`<job dir>/shared/`) that states
/// of several checkpoints may name: written once, by the checkpoint whose id
/// its name begins with, and kept as long as a retained checkpoint names it.
///
/// This is what an incremental state backend needs: a checkpoint uploads only
/// the files that are new since the last one and names the older ones again
/// (Flink's shared state registry). The storage writes it
/// ([`write_shared`](crate::checkpoint::storage::CheckpointStorage::write_shared)),
/// a restore reads it back and refuses one that does not match its handle,
/// and the coordinator removes it once no retained checkpoint names it
/// ([`files_to_keep`](crate::checkpoint::recovery::files_to_keep)).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SharedFile {
    /// The file's name in the shared directory
    /// ([`CheckpointLayout::shared_file_name`](crate::checkpoint::layout::CheckpointLayout::shared_file_name)): the writer's checkpoint id,
    /// the task, and the name the writer gave it.
    pub name: String,
    /// Length of the whole file in bytes (payload plus the 24-byte frame).
    pub length: u64,
    /// The CRC-32 stored in the file's trailer (see [`StateHandle::crc32`](crate::checkpoint::metadata::StateHandle::crc32)).
    #[serde(with = "hex_u32")]
    pub crc32: u32,
}

/// What a completed checkpoint needs on disk besides its own directory: the
/// checkpoints its image chains build on and the shared files its states
/// name. Retention keeps these while the checkpoint is kept
/// ([`files_to_keep`](crate::checkpoint::recovery::files_to_keep)).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct References {
    /// Every checkpoint some task's chain needs.
    pub links: BTreeSet<CheckpointId>,
    /// Every shared file some task's state names, by name.
    pub shared: BTreeSet<String>,
}

impl References {
    /// What the states of `tasks` (their chains and shared files) need.
    pub fn of<'a>(
        chains: impl IntoIterator<Item = (&'a [CheckpointId], &'a [SharedFile])>,
    ) -> Self {
        let mut references = References::default();
        for (chain, shared) in chains {
            references.links.extend(chain.iter().copied());
            references
                .shared
                .extend(shared.iter().map(|file| file.name.clone()));
        }
        references
    }
}
