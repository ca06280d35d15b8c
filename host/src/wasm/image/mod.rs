//! Image checkpoints: the host checkpoints an operator by copying its instance's state itself.
//!
//! # Why this module exists
//!
//! A wasm instance's whole state between two calls is its linear memory plus its mutable
//! globals. If the host copies those (an **image**) it can checkpoint an operator written in any
//! language without a line of snapshot code in the guest, and restore it by copying the bytes
//! back instead of deserialising them. The alternative, the guest's own `weir_snapshot` and
//! `weir_restore` exports (`docs/ABI.md` §3), stays the default for guests that have them.
//!
//! Two things stand in the way, and this module deals with them:
//!
//! - wasmtime's public API reaches only *exported* globals and memories (its debug API reaches
//!   the rest, but makes guest code 1.6–2.6× slower). So the host rewrites each module when it
//!   loads it, adding exports under reserved names for every mutable global and every memory the
//!   module defines ([`rewrite`]). Every other section is copied byte for byte, so no index
//!   changes and the code runs exactly as before.
//! - Some modules keep state an image does not hold: tables the code mutates, dropped data or
//!   element segments, reference-typed mutable globals, shared or imported memories and mutable
//!   globals. Restoring an image of those would silently restore the wrong state, so they are
//!   refused at load time with the reason named ([`rewrite::analyze`]).
//!
//! The reserved export names and what an image-mode module must not do are normative in
//! `docs/ABI.md` §14.
//!
//! # The pieces
//!
//! [`rewrite`] makes a module's state reachable; [`format`](mod@format) and [`delta`] turn it into bytes
//! and back, knowing nothing of wasmtime; [`capture`] decides at load time whether a module is
//! imaged at all and reads and writes an instance's state through wasmtime; `state` is what one
//! imaged instance keeps between calls (its baseline, its chain), which
//! [`GuestInstance`](super::GuestInstance) holds as the image case of its capture mode.

pub mod capture;
pub mod delta;
pub mod format;
pub(crate) mod memcopy;
pub mod rewrite;
pub(crate) mod state;

pub use capture::StateCapture;

#[cfg(test)]
mod tests;
