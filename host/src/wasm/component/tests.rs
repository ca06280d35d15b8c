//! The component front door refuses, at load and naming the problem, what is not an operator
//! of this host's world: a component reaching for an interface outside the world and the
//! allowed WASI, one built against another version of the world, one exporting no `guest`, and
//! image checkpoints of any component. The components are a few lines of WAT each; the real
//! operators (Python, JavaScript, Rust) are run by the integration tests.

use crate::wasm::{
    LoadOptions, ModuleProblem, ModuleSource, OperatorModule, StateCapture, WasmEngine,
};

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
        text.contains("version 2.0.0") && text.contains("version 1.0.0"),
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
        text.contains("weir:operator/guest@1.0.0") && text.contains("exports nothing"),
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
