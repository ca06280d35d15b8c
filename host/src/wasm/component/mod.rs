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
//! side of the world's `host` and `keyed-state` interfaces, which share every check with the
//! core imports.
//!
//! The bindings are generated from the WIT file itself, so the host cannot drift from it: from
//! its largest world, `keyed-operator`, whose imports cover every world's.
//!
//! # Versions
//!
//! The host implements [`WORLD_VERSION`] and runs components built against it or an earlier
//! minor version of the same major one: 1.1.0 only added the `keyed-state` interface, so a
//! 1.0.0 component's imports are a subset of what the linker defines. Wasmtime matches both
//! directions semver-compatibly: the linker's `weir:operator/host@1.1.0` satisfies an import
//! of `…@1.0.0`, and the bindings' lookup of the export `weir:operator/guest@1.1.0` finds a
//! component's `…@1.0.0` (both are looked up by the key `…@1`). [`check`] refuses every
//! other version by name before the linker sees it.

pub(crate) mod instance;
pub(crate) mod wasi;

use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker, types::ComponentItem};

use super::error::ModuleProblem;
use super::imports;
use super::inspection::Capabilities;
use super::state::{GuestState, StoreExtension};

pub use wasi::{ALLOWED, MAX_LOG_LINES_PER_SECOND, WASI_VERSION, WasiInterface};

/// The host's side of the world, generated from `abi/wit/operator.wit`: its world
/// `keyed-operator`, which imports every interface of the package.
pub(crate) mod bindings {
    wasmtime::component::bindgen!({
        world: "keyed-operator",
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

/// The imported interface of a component that keeps keyed state on the host (world
/// `keyed-operator`, since 1.1.0).
pub const KEYED_STATE_INTERFACE: &str = "weir:operator/keyed-state";

/// The guest's exports, looked up once per instance.
pub(crate) type ComponentExports = bindings::KeyedOperator;

/// The pre-linked template of a component's instances.
pub(crate) type ComponentPre = bindings::KeyedOperatorPre<GuestState>;

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
    bindings::KeyedOperator::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |state| state)
}

/// Checks a compiled component against the world: it exports the `guest` interface at a
/// version this host runs ([`check_world_version`]), and imports nothing but the world's
/// interfaces and the allowed WASI ([`wasi::ALLOWED`]). Returns its capabilities: a
/// component's, with keyed state when it imports `keyed-state`.
pub(crate) fn check(component: &Component, engine: &Engine) -> Result<Capabilities, ModuleProblem> {
    let ty = component.component_type();
    let mut keyed_state = false;
    // Imports first: a component that reaches for the network is refused for that, whatever
    // else is wrong with it.
    for (name, item) in ty.imports(engine) {
        let (interface, version) = split_version(name);
        if interface.starts_with(WORLD_PACKAGE) && interface.contains('/') {
            check_world_version(name, version)?;
            keyed_state |= interface == KEYED_STATE_INTERFACE;
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
    Ok(Capabilities {
        keyed_state,
        ..Capabilities::COMPONENT
    })
}

/// Refuses a world interface `name` whose version this host does not run: any but
/// [`WORLD_VERSION`] and the earlier versions of its major version (`1.0.0` for `1.1.0`), whose
/// interfaces are subsets of this one's. A later minor version may import calls this host
/// lacks, and another major version changes what the calls mean.
fn check_world_version(name: &str, version: &str) -> Result<(), ModuleProblem> {
    if let (Some(guest), Some(host)) = (semver(version), semver(WORLD_VERSION))
        && guest.0 == host.0
        && guest <= host
    {
        return Ok(());
    }
    Err(ModuleProblem::WorldVersion {
        interface: name.to_string(),
        guest: version.to_string(),
        host: WORLD_VERSION.to_string(),
    })
}

/// `1.0.0` → `(1, 0, 0)`; `None` for anything else (a pre-release, a missing part).
fn semver(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split('.').map(|part| {
        part.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| part.parse::<u64>().ok())
            .flatten()
    });
    let version = (parts.next()??, parts.next()??, parts.next()??);
    parts.next().is_none().then_some(version)
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

impl bindings::weir::operator::keyed_state::Host for GuestState {
    fn state_get(&mut self, request: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        imports::state_get_checked(self, &request)
    }

    fn state_write(&mut self, request: Vec<u8>) -> wasmtime::Result<()> {
        imports::state_write_checked(self, &request)
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
    fn the_host_runs_its_version_and_earlier_minor_versions_of_its_major_one() {
        let runs = |version: &str| check_world_version("weir:operator/host", version).is_ok();
        assert_eq!(WORLD_VERSION, "1.1.0", "update the versions below");
        for version in ["1.0.0", "1.1.0", "1.0.7"] {
            assert!(runs(version), "{version} is refused");
        }
        for version in [
            "1.2.0",
            "1.1.1",
            "2.0.0",
            "0.1.0",
            "1.0",
            "1.0.0-rc.1",
            "",
            "x.y.z",
        ] {
            assert!(!runs(version), "{version} is run");
        }
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
