//! The component front door: operators that are WebAssembly **components** implementing the
//! WIT world `weir:operator/operator` (`abi/wit/operator.wit`, `docs/COMPONENTS.md`).
//!
//! # Why it exists
//!
//! Python and JavaScript compile only to components (componentize-py, componentize-js), and so
//! does Rust for `wasm32-wasip2`. The world has the life and the rules of the core ABI
//! (`docs/ABI.md`) — the same calls, batches in the same layout, the same limits — so behind
//! [`OperatorModule`](super::OperatorModule) and [`GuestInstance`](super::GuestInstance) a
//! component runs exactly where a core module does, and the dataflow and checkpoint code never
//! learn which it is. This module holds what differs: reading the world's version off a
//! component, refusing imports outside the world and the denied WASI of `wasi`, and the host
//! side of the world's `host` interface, which shares every check with the core imports.
//!
//! The bindings are generated from the WIT file itself, so the host cannot drift from it.

pub(crate) mod instance;
pub(crate) mod wasi;

use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker, types::ComponentItem};

use super::error::ModuleProblem;
use super::imports;
use super::state::{GuestState, StoreExtension};

pub use wasi::{ALLOWED, MAX_LOG_LINES_PER_SECOND, WASI_VERSION, WasiInterface};

/// The host's side of the world, generated from `abi/wit/operator.wit`.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        world: "operator",
        path: "../abi/wit",
        imports: { default: trappable },
    });
}

use bindings::weir::operator::types::{Level, TimeDomain as WitTimeDomain};

/// The world's package, without version.
pub const WORLD_PACKAGE: &str = "weir:operator";

/// The version of the world this host implements (`abi/wit/operator.wit`), defined beside the
/// core ABI's version in `weir-abi`.
pub use weir_abi::WORLD_VERSION;

/// The exported interface every operator component implements.
pub const GUEST_INTERFACE: &str = "weir:operator/guest";

/// The guest's exports, looked up once per instance.
pub(crate) type ComponentExports = bindings::Operator;

/// The pre-linked template of a component's instances.
pub(crate) type ComponentPre = bindings::OperatorPre<GuestState>;

/// What a component instance's store holds besides the host's state: its WASI context, which
/// gives `operator`'s `subtask` nothing to reach ([`wasi::ComponentWasi::denied`]).
pub(crate) fn store_extension(operator: &str, subtask: u32) -> Box<dyn StoreExtension> {
    Box::new(wasi::ComponentWasi::denied(operator, subtask))
}

/// Whether `bytes` are a binary component rather than a core module: the same `\0asm` magic,
/// then the component model's version and layer.
pub fn is_component(bytes: &[u8]) -> bool {
    wasmparser::Parser::is_component(bytes)
}

/// Defines WASI (every interface, most of which [`wasi::allowed`] then refuses) and the world's
/// `host` interface in `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    wasmtime_wasi::p2::add_to_linker_sync(linker)?;
    bindings::Operator::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |state| state)
}

/// Checks a compiled component against the world: it exports the `guest` interface at this
/// host's version, and imports nothing but the world's interfaces and the allowed WASI
/// ([`wasi::ALLOWED`]).
pub(crate) fn check(component: &Component, engine: &Engine) -> Result<(), ModuleProblem> {
    let ty = component.component_type();
    // Imports first: a component that reaches for the network is refused for that, whatever
    // else is wrong with it.
    for (name, item) in ty.imports(engine) {
        let (interface, version) = split_version(name);
        if interface.starts_with(WORLD_PACKAGE) && interface.contains('/') {
            check_world_version(name, version)?;
            continue;
        }
        if !matches!(item.ty, ComponentItem::ComponentInstance(_))
            || !wasi::allowed(interface, version)
        {
            return Err(ModuleProblem::RefusedComponentImport {
                import: name.to_string(),
            });
        }
    }
    let mut exports_guest = false;
    for (name, _) in ty.exports(engine) {
        let (interface, version) = split_version(name);
        if interface == GUEST_INTERFACE {
            check_world_version(name, version)?;
            exports_guest = true;
        }
    }
    if !exports_guest {
        return Err(ModuleProblem::NotAnOperatorComponent {
            exports: ty
                .exports(engine)
                .map(|(name, _)| name.to_string())
                .collect(),
        });
    }
    Ok(())
}

/// Refuses a world interface `name` whose version is not this host's.
fn check_world_version(name: &str, version: &str) -> Result<(), ModuleProblem> {
    if version == WORLD_VERSION {
        return Ok(());
    }
    Err(ModuleProblem::WorldVersion {
        interface: name.to_string(),
        guest: version.to_string(),
        host: WORLD_VERSION.to_string(),
    })
}

/// `wasi:io/streams@0.2.0` → (`wasi:io/streams`, `0.2.0`); a name without a version gives an
/// empty one.
fn split_version(name: &str) -> (&str, &str) {
    name.split_once('@').unwrap_or((name, ""))
}

impl bindings::weir::operator::types::Host for GuestState {}

impl bindings::weir::operator::host::Host for GuestState {
    fn emit(&mut self, batch: Vec<u8>) -> wasmtime::Result<()> {
        imports::emit_checked(self, &batch)
    }

    fn emit_to(&mut self, output: String, batch: Vec<u8>) -> wasmtime::Result<()> {
        imports::emit_to_checked(self, output.as_bytes(), &batch)
    }

    fn timer_set(
        &mut self,
        domain: WitTimeDomain,
        timestamp: i64,
        key: Vec<u8>,
    ) -> wasmtime::Result<()> {
        let import = weir_abi::imports::TIMER_SET;
        imports::change_timer_checked(self, import, domain_of(domain), timestamp, &key)
    }

    fn timer_delete(
        &mut self,
        domain: WitTimeDomain,
        timestamp: i64,
        key: Vec<u8>,
    ) -> wasmtime::Result<()> {
        let import = weir_abi::imports::TIMER_DELETE;
        imports::change_timer_checked(self, import, domain_of(domain), timestamp, &key)
    }

    fn current_time(&mut self, domain: WitTimeDomain) -> wasmtime::Result<i64> {
        Ok(imports::current_time_of(self, domain_of(domain)))
    }

    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let level = match level {
            Level::Error => weir_abi::log_level::ERROR,
            Level::Warn => weir_abi::log_level::WARN,
            Level::Info => weir_abi::log_level::INFO,
            Level::Debug => weir_abi::log_level::DEBUG,
            Level::Trace => weir_abi::log_level::TRACE,
        };
        imports::log_line(self, level, imports::message(message.as_bytes()));
        Ok(())
    }
}

/// The ABI's time domain of the world's.
fn domain_of(domain: WitTimeDomain) -> weir_abi::TimeDomain {
    match domain {
        WitTimeDomain::Event => weir_abi::TimeDomain::Event,
        WitTimeDomain::Processing => weir_abi::TimeDomain::Processing,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod unit_tests {
    use super::*;

    #[test]
    fn the_version_the_host_checks_is_the_one_the_wit_file_declares() {
        let wit = include_str!("../../../../abi/wit/operator.wit");
        let declared = format!("package {WORLD_PACKAGE}@{WORLD_VERSION};");
        assert!(
            wit.contains(&declared),
            "abi/wit/operator.wit lacks `{declared}`"
        );
    }

    #[test]
    fn interface_names_split_at_their_version() {
        assert_eq!(
            split_version("wasi:io/streams@0.2.0"),
            ("wasi:io/streams", "0.2.0")
        );
        assert_eq!(
            split_version("weir:operator/host"),
            ("weir:operator/host", "")
        );
    }
}
