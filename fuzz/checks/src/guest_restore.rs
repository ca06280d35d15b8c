//! Restoring real guests from arbitrary bytes, through the host's wasm layer — what happens
//! when a state file verifies (its checksum is right) but its payload is not what the guest
//! wrote: a bug in the guest's snapshot, a module swapped under a checkpoint, or an attacker.
//!
//! The guests are the two `count` examples: the Rust one (`examples/rust/count`, its state
//! decoded by the SDK with serde and bincode) and the hand-written WAT one
//! (`examples/wat/count.wat`, which parses its own binary table). Both are compiled once, by
//! [`RestoreTarget::new`]; every input gets fresh instances.
//!
//! Properties, for any bytes and each guest:
//! - restoring them returns; a refusal is a [`GuestError`] of the restore (or of the
//!   allocation of its buffer) that names the operator, is not a timeout, and poisons the
//!   instance; the host never panics;
//! - a state the guest accepts can be snapshotted again, and that snapshot restores into
//!   another instance, which can snapshot in turn and processes a batch identically;
//! - afterwards a fresh instance of the same module still works: its first record of a key
//!   counts `1`.

use std::time::Duration;

use weir::ids::CheckpointId;
use weir::wasm::{
    GuestError, GuestFailure, GuestInstance, GuestLimits, InstanceContext, LoadOptions,
    ModuleSource, OperatorModule, WasmEngine,
};
use weir_abi::{Batch, BatchBuilder};

/// The Rust `count` guest, built for wasm32 by this crate's build script.
const RUST_COUNT: &[u8] = include_bytes!(env!("WEIR_GUEST_COUNT"));
/// The WAT `count` guest, as text (the host compiles WAT too).
const WAT_COUNT: &[u8] = include_bytes!("../../../examples/wat/count.wat");

/// The operator name the instances are given, which their errors must name.
const OPERATOR: &str = "count";

/// Limits tighter than the defaults, so that garbage asking for a huge allocation fails
/// fast, and a call that hangs is cut long before libFuzzer's own timeout.
const LIMITS: GuestLimits = GuestLimits {
    max_memory_bytes: 64 << 20,
    call_timeout: Duration::from_secs(5),
    max_output_bytes: 1 << 20,
    max_state_bytes: 64 << 20,
    max_timer_bytes: 1 << 20,
};

/// The guests to restore into, compiled once.
#[derive(Debug)]
pub struct RestoreTarget {
    /// The compiled `count` modules, with a name for messages.
    guests: Vec<(&'static str, OperatorModule)>,
}

impl RestoreTarget {
    /// Compiles the Rust and the WAT `count` guests.
    ///
    /// # Panics
    /// If the engine cannot start or a guest does not load: that is a broken set-up, not a
    /// finding.
    pub fn new() -> Self {
        let engine = WasmEngine::new().unwrap_or_else(|e| panic!("wasm engine: {e}"));
        let load = |name: &'static str, bytes: &[u8]| {
            let options = LoadOptions {
                limits: LIMITS,
                ..LoadOptions::default()
            };
            let module = OperatorModule::load(&engine, ModuleSource::bytes(name, bytes), options)
                .unwrap_or_else(|e| panic!("loading the {name} guest: {e}"));
            (name, module)
        };
        RestoreTarget {
            guests: vec![load("rust count", RUST_COUNT), load("wat count", WAT_COUNT)],
        }
    }

    /// Restores `bytes` into each guest; panics when a property fails.
    pub fn check(&self, bytes: &[u8]) {
        for (name, module) in &self.guests {
            check_guest(name, module, bytes);
        }
    }
}

impl Default for RestoreTarget {
    fn default() -> Self {
        Self::new()
    }
}

/// The properties for one guest.
fn check_guest(name: &str, module: &OperatorModule, bytes: &[u8]) {
    let mut instance = start(name, module);
    match instance.restore(bytes) {
        Ok(()) => check_accepted(name, module, instance),
        Err(error) => check_refused(name, instance, &error),
    }
    let mut fresh = start(name, module);
    let output = records(fresh.process(&probe()));
    assert_eq!(
        output,
        [(b"k".to_vec(), b"1".to_vec(), 7)],
        "{name}: a fresh instance does not count from zero after a restore"
    );
}

/// A state the guest accepted survives a snapshot → restore cycle.
fn check_accepted(name: &str, module: &OperatorModule, mut restored: GuestInstance) {
    let snapshot = restored
        .snapshot(CheckpointId(1))
        .unwrap_or_else(|e| panic!("{name}: cannot snapshot a state it restored: {e}"));
    // Only the state must survive, not its bytes: a guest may write equal states
    // differently (the Rust count writes its hash table in table order).
    let mut copy = start(name, module);
    copy.restore(&snapshot)
        .unwrap_or_else(|e| panic!("{name}: refuses its own snapshot: {e}"));
    copy.snapshot(CheckpointId(2))
        .unwrap_or_else(|e| panic!("{name}: cannot snapshot its own snapshot: {e}"));
    let first = restored.process(&probe()).map_err(|e| e.failure);
    let second = copy.process(&probe()).map_err(|e| e.failure);
    assert_eq!(
        first, second,
        "{name}: two instances with the same state process a batch differently"
    );
}

/// A refused state is a typed, named restore failure that poisons the instance.
fn check_refused(name: &str, mut instance: GuestInstance, error: &GuestError) {
    assert!(
        matches!(error.call, "weir_restore" | "weir_alloc"),
        "{name}: restore failed in `{}`: {error}",
        error.call
    );
    assert!(
        !matches!(error.failure, GuestFailure::Timeout { .. }),
        "{name}: the restore of a state ran into the call timeout: {error}"
    );
    let message = error.to_string();
    assert!(
        error.operator == OPERATOR && message.contains(OPERATOR),
        "{name}: the error does not name the operator: {message}"
    );
    assert!(
        instance.is_poisoned(),
        "{name}: a failed restore left the instance usable"
    );
    let next = instance.process(&probe());
    assert!(
        matches!(
            next,
            Err(GuestError {
                failure: GuestFailure::Poisoned { .. },
                ..
            })
        ),
        "{name}: a poisoned instance ran another call: {next:?}"
    );
}

/// A fresh instance of `module`, initialised with an empty config.
fn start(name: &str, module: &OperatorModule) -> GuestInstance {
    module
        .instantiate(InstanceContext::single(OPERATOR), b"")
        .unwrap_or_else(|e| panic!("{name}: cannot instantiate: {e}"))
}

/// One record, key `k` at time 7.
fn probe() -> Vec<u8> {
    let mut batch = BatchBuilder::new(0);
    batch.push(b"k", b"v", 7);
    batch.into_bytes()
}

/// The records of the batches a call emitted, owned; panics if the call failed.
fn records(output: Result<Vec<Vec<u8>>, GuestError>) -> Vec<(Vec<u8>, Vec<u8>, i64)> {
    let batches = output.unwrap_or_else(|e| panic!("processing a batch failed: {e}"));
    batches
        .iter()
        .flat_map(|bytes| {
            let batch = Batch::decode(bytes).expect("the host checks emitted batches");
            batch
                .iter()
                .map(|r| (r.key.to_vec(), r.value.to_vec(), r.timestamp))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_refused_and_an_own_snapshot_accepted() {
        let target = RestoreTarget::new();
        target.check(b"");
        target.check(b"not a snapshot");
        for (name, module) in &target.guests {
            let mut instance = start(name, module);
            instance.process(&probe()).unwrap();
            let snapshot = instance.snapshot(CheckpointId(1)).unwrap();
            assert!(!snapshot.is_empty(), "{name}");
            check_guest(name, module, &snapshot);
        }
    }
}
