//! The keyed store in the host's memory: a sorted map, checkpointed whole into one file.
//!
//! It exists for tests (the conformance suite holds the embedded store to what this one does,
//! and unit tests of what sits above need a store without a directory full of table files) and
//! as the plainest statement of the [`KeyedStore`] contract. It holds no more than memory does,
//! and every checkpoint writes all of it: a job's store is [`super::rocks::RocksStore`].

use std::collections::BTreeMap;
use std::ops::{Bound, Range};
use std::path::Path;

use weir_abi::wire::{Reader, put_prefixed};

use super::{Backend, KeyedStore, StoreCheckpoint, StoreError, StoreKey, Writes, prepare_dir};

/// The one file of a memory store's checkpoint.
const FILE: &str = "entries";
/// The first bytes of that file.
const MAGIC: &[u8; 8] = b"WEIRKV01";

/// A keyed store in memory.
#[derive(Debug, Default)]
pub struct MemoryStore {
    entries: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl MemoryStore {
    /// The entries of the checkpoint file `bytes`, or why they cannot be read.
    fn decode(bytes: &[u8]) -> Option<BTreeMap<Vec<u8>, Vec<u8>>> {
        let mut reader = Reader::new(bytes.strip_prefix(MAGIC)?);
        let count = reader.u64().ok()?;
        let mut entries = BTreeMap::new();
        for _ in 0..count {
            let key = reader.prefixed().ok()?.to_vec();
            let value = reader.prefixed().ok()?.to_vec();
            entries.insert(key, value);
        }
        (reader.remaining() == 0).then_some(entries)
    }
}

impl KeyedStore for MemoryStore {
    fn read_many(
        &mut self,
        keys: &[&[u8]],
        found: &mut dyn FnMut(usize, Option<&[u8]>),
    ) -> Result<(), StoreError> {
        for (i, key) in keys.iter().enumerate() {
            found(i, self.entries.get(*key).map(Vec::as_slice));
        }
        Ok(())
    }

    fn write(&mut self, writes: &Writes) -> Result<(), StoreError> {
        for (key, value) in writes.iter() {
            match value {
                Some(value) => self.entries.insert(key.to_vec(), value.to_vec()),
                None => self.entries.remove(key),
            };
        }
        Ok(())
    }

    fn scan(
        &mut self,
        range: Range<&[u8]>,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<(), StoreError> {
        if range.start >= range.end {
            return Ok(());
        }
        let bounds = (Bound::Included(range.start), Bound::Excluded(range.end));
        for (key, value) in self.entries.range::<[u8], _>(bounds) {
            if !visit(key, value) {
                break;
            }
        }
        Ok(())
    }

    fn retain_groups(&mut self, groups: Range<u32>) -> Result<(), StoreError> {
        let start = StoreKey::group_start(groups.start);
        let end = StoreKey::group_start(groups.end);
        self.entries
            .retain(|key, _| key.as_slice() >= start.as_slice() && key.as_slice() < end.as_slice());
        Ok(())
    }

    fn checkpoint(&mut self, dir: &Path) -> Result<StoreCheckpoint, StoreError> {
        std::fs::create_dir(dir).map_err(|e| StoreError::io("create a checkpoint", dir, e))?;
        let mut bytes = MAGIC.to_vec();
        bytes.extend_from_slice(&(self.entries.len() as u64).to_le_bytes());
        for (key, value) in &self.entries {
            put_prefixed(&mut bytes, key);
            put_prefixed(&mut bytes, value);
        }
        let path = dir.join(FILE);
        std::fs::write(&path, bytes).map_err(|e| StoreError::io("write a checkpoint", &path, e))?;
        // Every checkpoint rewrites the file under the same name: nothing in it is immutable.
        StoreCheckpoint::list(dir, |_| false)
    }
}

/// The backend of [`MemoryStore`]s.
#[derive(Debug, Default, Clone, Copy)]
pub struct MemoryBackend;

impl Backend for MemoryBackend {
    fn create(&self, dir: &Path) -> Result<Box<dyn KeyedStore>, StoreError> {
        prepare_dir(dir)?;
        Ok(Box::new(MemoryStore::default()))
    }

    fn open_checkpoint(
        &self,
        checkpoint: &Path,
        dir: &Path,
    ) -> Result<Box<dyn KeyedStore>, StoreError> {
        prepare_dir(dir)?;
        let path = checkpoint.join(FILE);
        let bytes =
            std::fs::read(&path).map_err(|e| StoreError::io("read a checkpoint", &path, e))?;
        let entries = MemoryStore::decode(&bytes).ok_or_else(|| StoreError::NotACheckpoint {
            path: checkpoint.to_path_buf(),
            why: format!("{FILE} is not a memory store's entries, or is cut short"),
        })?;
        Ok(Box::new(MemoryStore { entries }))
    }
}
