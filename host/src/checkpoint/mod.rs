//! Checkpoints: the coordinator that triggers and completes them, the barrier
//! bookkeeping, and the storage that makes them durable (docs/ARCHITECTURE.md, docs/CHECKPOINTS.md).

pub mod abort;
pub mod config;
pub(crate) mod coordinator;
pub mod format;
pub mod generation;
pub(crate) mod history;
pub mod layout;
pub mod metadata;
pub mod pending;
pub mod recovery;
pub mod rescale;
pub mod restore;
pub mod shared;
pub mod stats;
pub mod storage;
pub mod task_state;
