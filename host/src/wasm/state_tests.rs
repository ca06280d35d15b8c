//! Tests of host-kept keyed state in the wasm layer (`docs/ABI.md` §17): the `state_get`,
//! `state_result` and `state_write` imports against a store, and the failure of each misuse,
//! through a small WAT guest.

use std::sync::Arc;
use std::time::Duration;

use tempfile::TempDir;
use weir_abi::BatchBuilder;

use super::*;
use crate::state::keyed::memory::MemoryBackend;
use crate::state::keyed::section::KeyedState;

/// A guest that does with keyed state what the value of its batch's first record says, by its
/// length:
/// - 1 byte: writes `k` = `v` in state 0 (the write request at 1024);
/// - 2 bytes: reads `k` and `x` in state 0 (the read request at 2048), copies the result out,
///   and writes it as the value of `copy`, so the test sees what the guest was given;
/// - 3 bytes: writes `k` = `v` and then an entry cut short (the request at 1024, 25 bytes);
/// - 4 bytes: copies a result out with no read before it.
const STATE: &str = r#"(module
  (import "weir" "state_get" (func $get (param i32 i32) (result i32)))
  (import "weir" "state_result" (func $result (param i32)))
  (import "weir" "state_write" (func $write (param i32 i32)))
  (memory (export "memory") 2)
  (data (i32.const 1024) "\01\00\00\01\00\00\00k\01\00\00\00v")
  (data (i32.const 1037) "\01\00\00\01\00\00\00y\01\00\00\00")
  (data (i32.const 2048) "\00\00\01\00\00\00k\00\00\01\00\00\00x")
  (data (i32.const 3000) "\01\00\00\04\00\00\00copy")
  (func (export "weir_abi_version") (result i32) (i32.const 1))
  (func (export "weir_alloc") (param i32) (result i32) (i32.const 8192))
  (func (export "weir_process") (param $p i32) (param $l i32) (result i32)
    (local $vlen i32) (local $n i32)
    (local.set $vlen (i32.load offset=20 (local.get $p)))
    (if (i32.eq (local.get $vlen) (i32.const 1))
      (then (call $write (i32.const 1024) (i32.const 13))))
    (if (i32.eq (local.get $vlen) (i32.const 2))
      (then
        (local.set $n (call $get (i32.const 2048) (i32.const 14)))
        (i32.store (i32.const 3011) (local.get $n))
        (call $result (i32.const 3015))
        (call $write (i32.const 3000) (i32.add (i32.const 15) (local.get $n)))))
    (if (i32.eq (local.get $vlen) (i32.const 3))
      (then (call $write (i32.const 1024) (i32.const 25))))
    (if (i32.eq (local.get $vlen) (i32.const 4))
      (then (call $result (i32.const 3015))))
    (i32.const 0)))"#;

/// An instance of [`STATE`], with keyed state in memory in `dir` when `keyed`.
fn start(dir: &TempDir, keyed: bool) -> GuestInstance {
    let options = LoadOptions {
        limits: GuestLimits {
            call_timeout: Duration::from_secs(5),
            ..GuestLimits::default()
        },
        ..LoadOptions::default()
    };
    let source = ModuleSource::bytes("state.wat", STATE.as_bytes());
    let module = OperatorModule::load(&WasmEngine::new().unwrap(), source, options).unwrap();
    assert!(module.capabilities().keyed_state);
    let mut instance = module
        .instantiate(InstanceContext::single("state"), b"")
        .unwrap();
    if keyed {
        let groups = weir_abi::key_group::KeyGroups::new(128, 1).unwrap();
        let state = KeyedState::create(Arc::new(MemoryBackend), dir.path().join("task"), 0, groups);
        instance.host_state().keyed = Some(state.unwrap());
    }
    instance
}

/// Runs `weir_process` on one record whose value is `len` bytes long.
fn command(guest: &mut GuestInstance, len: usize) -> Result<(), GuestError> {
    let mut batch = BatchBuilder::new(0);
    batch.push(b"key", &vec![b'.'; len], 0);
    guest.process(batch.as_bytes()).map(drop)
}

/// The value of `key` in state 0, read as a guest would (the component tests' too).
pub(super) fn value(guest: &mut GuestInstance, key: &[u8]) -> Option<Vec<u8>> {
    let mut request = Vec::new();
    weir_abi::state::put_read(&mut request, 0, key);
    let mut result = Vec::new();
    let keyed = guest.host_state().keyed.as_mut().unwrap();
    keyed.get(&request, &mut result).unwrap();
    let mut answers = weir_abi::state::results(&result);
    answers.next().unwrap().unwrap().map(<[u8]>::to_vec)
}

#[test]
fn a_guest_reads_what_it_wrote_and_an_absent_key_as_absent() {
    let dir = TempDir::new().unwrap();
    let mut guest = start(&dir, true);
    assert_reads_what_it_wrote(&mut guest);
}

/// Runs command 1 (`k` set to `v`) and command 2 (`k` and `x` read, the result written under
/// `copy`) of a test guest, core module or component, and checks what its state then holds.
pub(super) fn assert_reads_what_it_wrote(guest: &mut GuestInstance) {
    command(guest, 1).unwrap();
    assert_eq!(value(guest, b"k"), Some(b"v".to_vec()));
    command(guest, 2).unwrap();
    // `k` is `v`, `x` has no value: what the guest copied out and wrote back under `copy`.
    let mut expected = Vec::new();
    weir_abi::state::put_result(&mut expected, Some(b"v"));
    weir_abi::state::put_result(&mut expected, None);
    assert_eq!(value(guest, b"copy"), Some(expected));
}

#[test]
fn a_malformed_write_fails_the_guest_and_changes_nothing() {
    let dir = TempDir::new().unwrap();
    let mut guest = start(&dir, true);
    let err = command(&mut guest, 3).unwrap_err();
    assert!(
        matches!(
            &err.failure,
            GuestFailure::StateRequest {
                import: "state_write",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("§17"), "{err}");
    // Its first entry was well-formed, and is not applied either: a request is applied whole.
    let mut guest = start(&dir, true);
    assert_eq!(
        (command(&mut guest, 3).is_err(), value(&mut guest, b"k")),
        (true, None)
    );
}

#[test]
fn a_result_copied_with_no_read_before_it_fails_the_guest() {
    let dir = TempDir::new().unwrap();
    let mut guest = start(&dir, true);
    let err = command(&mut guest, 4).unwrap_err();
    assert_eq!(err.failure, GuestFailure::NoStateResult, "{err}");
    assert!(err.to_string().contains("state_get` first"), "{err}");
}

#[test]
fn a_guest_given_no_store_fails_naming_the_import() {
    let dir = TempDir::new().unwrap();
    let mut guest = start(&dir, false);
    let err = command(&mut guest, 1).unwrap_err();
    assert_eq!(
        err.failure,
        GuestFailure::NoKeyedState {
            import: "state_write"
        },
        "{err}"
    );
}
