//! The component front door refuses, at load and naming the problem, what is not an operator
//! of this host's world: a component reaching for an interface outside the world and the
//! allowed WASI, one built against another version of the world, one exporting no `guest`, and
//! image checkpoints of any component. The components are a few lines of WAT each; the real
//! operators (Python, JavaScript, Rust) are run by the integration tests.
//!
//! It also runs components of two versions of the world, assembled here by wit-component (what
//! wit-bindgen's toolchains link with) from one core module (`fixtures/operator.wat`) and a
//! WIT file: one built against 1.0.0 (`fixtures/operator-1.0.0.wit`, the WIT of that version,
//! kept as it was released), which must keep running unchanged, and one against this host's
//! world `keyed-operator`, which reaches the task's keyed state.

use std::sync::Arc;
use std::time::Duration;

use tempfile::TempDir;
use weir_abi::BatchBuilder;

use crate::state::keyed::memory::MemoryBackend;
use crate::state::keyed::section::KeyedState;
use crate::wasm::state_tests::{assert_reads_what_it_wrote, value};
use crate::wasm::{
    GuestError, GuestFailure, GuestInstance, GuestLimits, InstanceContext, LoadOptions,
    ModuleProblem, ModuleSource, OperatorModule, StateCapture, WasmEngine,
};

/// The WIT of version 1.0.0 of the world, as it was released.
const WIT_1_0_0: &str = include_str!("fixtures/operator-1.0.0.wit");

/// This host's WIT.
const WIT: &str = include_str!("../../../../abi/wit/operator.wit");

/// The component of `fixtures/operator.wat` built against `world` of the WIT `wit`, whose
/// version is `version`; with the `keyed-state` imports when `keyed`.
fn component(wit: &str, version: &str, world: &str, keyed: bool) -> Vec<u8> {
    let keyed_imports = format!(
        r#"(import "weir:operator/keyed-state@{version}" "state-get" (func $get (param i32 i32 i32)))
  (import "weir:operator/keyed-state@{version}" "state-write" (func $write (param i32 i32)))"#
    );
    let stubs = r#"(func $get (param i32 i32 i32) unreachable)
  (func $write (param i32 i32) unreachable)"#;
    let wat = include_str!("fixtures/operator.wat")
        .replace("@VERSION@", version)
        .replace("@KEYED_FLAG@", if keyed { "1" } else { "0" })
        .replace("@KEYED@", if keyed { &keyed_imports } else { "" })
        .replace("@NO_KEYED@", if keyed { "" } else { stubs });
    let mut module = wat::parse_str(&wat).unwrap();
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve.push_source("operator.wit", wit).unwrap();
    let world = resolve.select_world(&[package], Some(world)).unwrap();
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .unwrap();
    wit_component::ComponentEncoder::default()
        .module(&module)
        .unwrap()
        .validate(true)
        .encode()
        .unwrap()
}

/// Loads the component `bytes` and gives it its init message.
fn start(bytes: &[u8]) -> (OperatorModule, GuestInstance) {
    let options = LoadOptions {
        limits: GuestLimits {
            call_timeout: Duration::from_secs(5),
            ..GuestLimits::default()
        },
        ..LoadOptions::default()
    };
    let engine = WasmEngine::new().unwrap();
    let module = OperatorModule::load(&engine, ModuleSource::bytes("c.wasm", bytes), options)
        .unwrap_or_else(|e| panic!("the component was refused: {e}"));
    let instance = module
        .instantiate(InstanceContext::single("c"), b"")
        .unwrap();
    (module, instance)
}

/// Gives `guest` a keyed state in memory, in `dir`.
fn give_store(guest: &mut GuestInstance, dir: &TempDir) {
    let groups = weir_abi::key_group::KeyGroups::new(128, 1).unwrap();
    let state = KeyedState::create(Arc::new(MemoryBackend), dir.path().join("task"), 0, groups);
    guest.host_state().keyed = Some(state.unwrap());
}

/// Runs `process` on one record whose value is `len` bytes long; returns what it emitted.
fn command(guest: &mut GuestInstance, len: usize) -> Result<Vec<Vec<u8>>, GuestError> {
    let mut batch = BatchBuilder::new(0);
    batch.push(b"key", &vec![b'.'; len], 7);
    guest.process(batch.as_bytes())
}

#[test]
fn a_component_built_against_world_1_0_0_runs_unchanged_with_no_keyed_state() {
    let bytes = component(WIT_1_0_0, "1.0.0", "operator", false);
    let (module, mut guest) = start(&bytes);
    assert!(!module.capabilities().keyed_state);
    let mut batch = BatchBuilder::new(0);
    batch.push(b"key", b"value", 7);
    let output = guest.process(batch.as_bytes()).unwrap();
    assert_eq!(output, vec![batch.as_bytes().to_vec()]);
    assert_eq!(guest.snapshot(crate::ids::CheckpointId(1)).unwrap(), b"");
    guest.finish().unwrap();
}

#[test]
fn a_component_of_the_keyed_world_has_keyed_state_and_reads_what_it_wrote() {
    let bytes = component(WIT, weir_abi::WORLD_VERSION, "keyed-operator", true);
    let (module, mut guest) = start(&bytes);
    assert!(module.capabilities().keyed_state);
    let dir = TempDir::new().unwrap();
    give_store(&mut guest, &dir);
    assert_reads_what_it_wrote(&mut guest);
}

#[test]
fn a_component_of_the_world_without_keyed_state_has_none() {
    let bytes = component(WIT, weir_abi::WORLD_VERSION, "operator", false);
    let (module, mut guest) = start(&bytes);
    assert!(!module.capabilities().keyed_state);
    assert_eq!(command(&mut guest, 1).unwrap().len(), 1);
}

#[test]
fn a_malformed_keyed_state_request_from_a_component_fails_it_naming_the_call() {
    let bytes = component(WIT, weir_abi::WORLD_VERSION, "keyed-operator", true);
    let (_, mut guest) = start(&bytes);
    let dir = TempDir::new().unwrap();
    give_store(&mut guest, &dir);
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
    // Applied whole or not at all: its first entry, well-formed, was not applied either.
    let (_, mut guest) = start(&bytes);
    give_store(&mut guest, &dir);
    assert_eq!(
        (command(&mut guest, 3).is_err(), value(&mut guest, b"k")),
        (true, None)
    );
}

#[test]
fn a_component_given_no_store_fails_naming_the_call() {
    let bytes = component(WIT, weir_abi::WORLD_VERSION, "keyed-operator", true);
    let (_, mut guest) = start(&bytes);
    let err = command(&mut guest, 1).unwrap_err();
    assert_eq!(
        err.failure,
        GuestFailure::NoKeyedState {
            import: "state_write"
        },
        "{err}"
    );
}

/// Loads the component written in `wat`, checkpointed as `capture` says, and returns why it
/// was refused.
fn refusal(wat: &str, capture: StateCapture) -> ModuleProblem {
    let bytes = wat::parse_str(wat).unwrap();
    assert!(super::is_component(&bytes));
    let engine = WasmEngine::new().unwrap();
    let options = LoadOptions {
        capture,
        ..LoadOptions::default()
    };
    match OperatorModule::load(&engine, ModuleSource::bytes("c.wasm", &bytes), options) {
        Ok(_) => panic!("the component was loaded"),
        Err(error) => error.problem,
    }
}

#[test]
fn a_component_importing_an_interface_outside_the_allowed_wasi_is_refused_naming_it() {
    for import in [
        "wasi:http/types@0.2.0",
        "wasi:keyvalue/store@0.2.0",
        "wasi:io/streams@0.3.0",
        "acme:net/raw",
    ] {
        let wat = format!(r#"(component (import "{import}" (instance (export "f" (func)))))"#);
        let problem = refusal(&wat, StateCapture::Exports);
        assert!(
            matches!(&problem, ModuleProblem::RefusedComponentImport { import: i } if i == import),
            "{import}: {problem:?}"
        );
        let text = problem.to_string();
        assert!(
            text.contains(import) && text.contains("docs/COMPONENTS.md"),
            "{text}"
        );
    }
}

#[test]
fn a_component_built_against_another_world_version_is_refused_naming_both() {
    let wat = r#"(component (import "weir:operator/host@2.0.0" (instance (export "log" (func)))))"#;
    let problem = refusal(wat, StateCapture::Exports);
    let text = problem.to_string();
    assert!(
        matches!(problem, ModuleProblem::WorldVersion { .. }),
        "{text}"
    );
    assert!(
        text.contains("version 2.0.0") && text.contains("version 1.1.0"),
        "{text}"
    );
}

#[test]
fn a_component_exporting_no_guest_interface_is_not_an_operator() {
    let problem = refusal("(component)", StateCapture::Exports);
    let text = problem.to_string();
    assert!(
        matches!(problem, ModuleProblem::NotAnOperatorComponent { .. }),
        "{text}"
    );
    assert!(
        text.contains("weir:operator/guest@1.1.0") && text.contains("exports nothing"),
        "{text}"
    );
}

#[test]
fn a_component_is_never_checkpointed_as_an_image() {
    let text = refusal("(component)", StateCapture::Image).to_string();
    assert!(
        text.contains("component") && text.contains("checkpoint = \"exports\""),
        "{text}"
    );
}

#[test]
fn weir_validate_reports_whether_a_component_keeps_keyed_state() {
    let engine = WasmEngine::new().unwrap();
    for (bytes, keyed) in [
        (component(WIT_1_0_0, "1.0.0", "operator", false), false),
        (
            component(WIT, weir_abi::WORLD_VERSION, "keyed-operator", true),
            true,
        ),
    ] {
        let report = crate::tools::validate_bytes(&engine, "c.wasm", &bytes);
        assert!(report.valid, "{:?}", report.problems);
        assert_eq!(
            report.capabilities.map(|c| c.keyed_state),
            Some(keyed),
            "keyed: {keyed}"
        );
    }
}
