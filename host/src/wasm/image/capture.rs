//! Where images meet instances: choosing how an operator's state is checkpointed when its
//! module is loaded, and taking an image out of an instance or writing one back in.
//!
//! The [`rewrite`] module makes a module's memories and mutable globals reachable; the
//! [format](super::format) turns them into bytes. This module is the glue between those two and
//! wasmtime: `prepare` decides, from the job's [`StateCapture`] and the module's exports,
//! whether the module is checkpointed through its exports or as an image (rewriting it for the
//! latter), and `ImageExports` reads and writes the instance's state through the added exports.

use std::borrow::Cow;
use std::str::FromStr;
use std::sync::Arc;

use wasmparser::{Parser, Payload};
use wasmtime::{Global, Instance, Memory, Store, V128, Val};
use weir_abi::exports;

use super::delta::{Baseline, Snapshot as DeltaSnapshot};
use super::format::{
    GlobalBits, GlobalValue, ImageError, ImageRef, MemoryRef, ModuleIdentity, PAGE_SIZE,
    encode_full,
};
use super::rewrite::{self, GlobalValueType, ImageLayout};
use crate::ids::CheckpointId;
use crate::parallel;

/// How an operator's state is captured in checkpoints: the operator's `checkpoint` key in the
/// job file (docs/JOB.md; docs/CHECKPOINTS.md compares the two ways).
///
/// This is the request. Loading the module resolves it once ([`Auto`](Self::Auto) becomes one
/// of the other two), and each instance holds the result as its capture mode: the guest's
/// exports, or an image with its incremental state (`image/state.rs`). The
/// [`ImagePolicy`](super::delta::ImagePolicy) (`image_full_every`) is a setting of the image
/// mode alone, kept inside that state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StateCapture {
    /// The guest's own `weir_snapshot` / `weir_restore` exports (docs/ABI.md §7). A module
    /// without them has an empty state.
    Exports,
    /// An image of the instance: its linear memory and mutable globals, taken by the host
    /// between calls, with no code in the guest.
    Image,
    /// The exports when the module has either of them, an image otherwise.
    #[default]
    Auto,
}

impl StateCapture {
    /// The job file's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            StateCapture::Exports => "exports",
            StateCapture::Image => "image",
            StateCapture::Auto => "auto",
        }
    }
}

impl FromStr for StateCapture {
    type Err = ();

    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "exports" => Ok(StateCapture::Exports),
            "image" => Ok(StateCapture::Image),
            "auto" => Ok(StateCapture::Auto),
            _ => Err(()),
        }
    }
}

/// A module ready to compile: its binary, rewritten when it is checkpointed as an image.
#[derive(Debug)]
pub(crate) struct Prepared<'a> {
    /// What to compile.
    pub(crate) bytes: Cow<'a, [u8]>,
    /// The image layout, when the module is checkpointed as an image.
    pub(crate) image: Option<Arc<ImageLayout>>,
}

/// Why a module cannot be prepared as `capture` asks.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PrepareError {
    /// The text is not valid WAT, or the binary cannot be parsed.
    #[error("{0}")]
    Parse(String),
    /// An image cannot capture the module's state.
    #[error("{0}")]
    Refused(String),
}

/// Turns `bytes` (binary or WAT text) into the binary to compile under `capture`: the module
/// as it is for [`StateCapture::Exports`] (or [`StateCapture::Auto`] when it exports
/// `weir_snapshot` or `weir_restore`), otherwise the module rewritten to export its memories
/// and mutable globals, with its image layout.
pub(crate) fn prepare(bytes: &[u8], capture: StateCapture) -> Result<Prepared<'_>, PrepareError> {
    if capture == StateCapture::Exports {
        return Ok(Prepared {
            bytes: Cow::Borrowed(bytes),
            image: None,
        });
    }
    let binary = wat::parse_bytes(bytes).map_err(|e| PrepareError::Parse(e.to_string()))?;
    if capture == StateCapture::Auto && exports_state(&binary)? {
        return Ok(Prepared {
            bytes: binary,
            image: None,
        });
    }
    let analysis = rewrite::analyze(&binary).map_err(|e| {
        let why = match capture {
            StateCapture::Auto => {
                "it exports neither weir_snapshot nor weir_restore, so its state would be \
                 checkpointed as an image (checkpoint = \"auto\"), but"
            }
            _ => "it is to be checkpointed as an image (checkpoint = \"image\"), but",
        };
        PrepareError::Refused(format!("{why} {e}"))
    })?;
    let rewritten =
        rewrite::rewrite(&binary, &analysis).map_err(|e| PrepareError::Refused(e.to_string()))?;
    Ok(Prepared {
        bytes: Cow::Owned(rewritten),
        image: Some(Arc::new(analysis.into_layout())),
    })
}

/// Whether the module exports `weir_snapshot` or `weir_restore`.
fn exports_state(binary: &[u8]) -> Result<bool, PrepareError> {
    for payload in Parser::new(0).parse_all(binary) {
        let payload = payload.map_err(|e| PrepareError::Parse(e.to_string()))?;
        if let Payload::ExportSection(section) = payload {
            for export in section {
                let export = export.map_err(|e| PrepareError::Parse(e.to_string()))?;
                if export.name == exports::SNAPSHOT || export.name == exports::RESTORE {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

/// The memories and mutable globals of one instance of a rewritten module, found through the
/// exports the rewrite added.
#[derive(Debug, Clone)]
pub(crate) struct ImageExports {
    layout: Arc<ImageLayout>,
    memories: Vec<(u32, Memory)>,
    globals: Vec<(u32, GlobalValueType, Global)>,
}

/// What went wrong taking or applying an image, in words for the operator's error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CaptureError {
    /// The image itself is wrong (corrupt, or from another module).
    #[error(transparent)]
    Image(#[from] ImageError),
    /// The instance does not match its layout (a bug: the rewrite added these exports).
    #[error("the instance has no {0} export, which the image rewrite adds")]
    MissingExport(String),
    /// The image does not fit the instance.
    #[error("{0}")]
    Mismatch(String),
}

impl ImageExports {
    /// Finds the exports `layout` names in `instance`.
    pub(crate) fn lookup<T>(
        layout: &Arc<ImageLayout>,
        instance: &Instance,
        store: &mut Store<T>,
    ) -> Result<Self, CaptureError> {
        let mut memories = Vec::with_capacity(layout.memories.len());
        for memory in &layout.memories {
            let handle = instance
                .get_memory(&mut *store, &memory.export)
                .ok_or_else(|| CaptureError::MissingExport(memory.export.clone()))?;
            memories.push((memory.index, handle));
        }
        let mut globals = Vec::with_capacity(layout.globals.len());
        for global in &layout.globals {
            let handle = instance
                .get_global(&mut *store, &global.export)
                .ok_or_else(|| CaptureError::MissingExport(global.export.clone()))?;
            globals.push((global.index, global.value_type, handle));
        }
        Ok(ImageExports {
            layout: Arc::clone(layout),
            memories,
            globals,
        })
    }

    /// The module an image must come from to be restored here.
    pub(crate) fn identity(&self) -> ModuleIdentity {
        ModuleIdentity {
            module_hash: self.layout.module_hash.0,
            rewrite_version: self.layout.rewrite_version,
        }
    }

    /// Encodes the instance's state, taken at `checkpoint`, as a full image into `out`: one
    /// copy of every memory, straight from the instance.
    pub(crate) fn take<T>(
        &self,
        store: &mut Store<T>,
        checkpoint: CheckpointId,
        out: &mut Vec<u8>,
    ) -> Result<(), CaptureError> {
        self.with_image(store, |image| encode_full(image, checkpoint, out))??;
        Ok(())
    }

    /// Encodes the instance's state, taken at `checkpoint`, through `baseline` into `out`: a
    /// delta against the previous image when its policy allows one, a full image otherwise
    /// (see [`Baseline::snapshot`]).
    pub(crate) fn take_incremental<T>(
        &self,
        store: &mut Store<T>,
        baseline: &mut Baseline,
        checkpoint: CheckpointId,
        out: &mut Vec<u8>,
    ) -> Result<DeltaSnapshot, CaptureError> {
        Ok(self.with_image(store, |image| baseline.snapshot(image, checkpoint, out))??)
    }

    /// Runs `f` on the instance's state as an image borrowing its memories: the globals'
    /// values are read first, then every memory is lent as it is, without a copy.
    fn with_image<T, R>(
        &self,
        store: &mut Store<T>,
        f: impl FnOnce(&ImageRef<'_>) -> R,
    ) -> Result<R, CaptureError> {
        let mut globals = Vec::with_capacity(self.globals.len());
        for (index, ty, global) in &self.globals {
            let value = bits(*ty, &global.get(&mut *store)).ok_or_else(|| {
                CaptureError::Mismatch(format!("global {index} does not hold a {ty}"))
            })?;
            globals.push(GlobalValue {
                index: *index,
                value,
            });
        }
        let identity = self.identity();
        let image = ImageRef {
            module_hash: identity.module_hash,
            rewrite_version: identity.rewrite_version,
            memories: self
                .memories
                .iter()
                .map(|(index, memory)| MemoryRef {
                    index: *index,
                    bytes: memory.data(&*store),
                })
                .collect(),
            globals: &globals,
        };
        Ok(f(&image))
    }

    /// Writes `image` into this instance, which must be fresh: grows every memory to the
    /// image's size (under the store's memory limit), copies its bytes in, and sets every
    /// mutable global.
    pub(crate) fn apply<T>(
        &self,
        store: &mut Store<T>,
        image: &ImageRef<'_>,
    ) -> Result<(), CaptureError> {
        self.identity().accepts(image.identity())?;
        if image.memories.len() != self.memories.len() {
            return Err(CaptureError::Mismatch(format!(
                "the image holds {} memories but the module defines {}",
                image.memories.len(),
                self.memories.len()
            )));
        }
        for ((index, memory), saved) in self.memories.iter().zip(&image.memories) {
            if saved.index != *index {
                return Err(CaptureError::Mismatch(format!(
                    "the image holds memory {} where the module has memory {index}",
                    saved.index
                )));
            }
            let current = memory.data_size(&*store);
            let wanted = saved.bytes.len();
            if wanted < current {
                return Err(CaptureError::Mismatch(format!(
                    "memory {index} of the image is {wanted} bytes, smaller than the {current} \
                     bytes a fresh instance starts with (memories never shrink)"
                )));
            }
            let grow = ((wanted - current) / PAGE_SIZE) as u64;
            if grow > 0 {
                memory.grow(&mut *store, grow).map_err(|e| {
                    CaptureError::Mismatch(format!(
                        "cannot grow memory {index} to the image's {wanted} bytes: {e:#} (raise \
                         `limits.max_memory`)"
                    ))
                })?;
            }
            parallel::copy(saved.bytes, &mut memory.data_mut(&mut *store)[..wanted]);
        }
        let saved_globals = image.globals;
        if saved_globals.len() != self.globals.len() {
            return Err(CaptureError::Mismatch(format!(
                "the image holds {} mutable globals but the module defines {}",
                saved_globals.len(),
                self.globals.len()
            )));
        }
        for ((index, ty, global), saved) in self.globals.iter().zip(saved_globals) {
            if saved.index != *index || bits_type(saved.value) != *ty {
                return Err(CaptureError::Mismatch(format!(
                    "the image holds global {} ({}) where the module has global {index} ({ty})",
                    saved.index,
                    saved.value.ty()
                )));
            }
            global
                .set(&mut *store, value(saved.value))
                .map_err(|e| CaptureError::Mismatch(format!("cannot set global {index}: {e:#}")))?;
        }
        Ok(())
    }
}

/// The raw bits of `value`, if it is of type `ty`.
fn bits(ty: GlobalValueType, value: &Val) -> Option<GlobalBits> {
    Some(match (ty, value) {
        (GlobalValueType::I32, Val::I32(v)) => GlobalBits::I32(*v as u32),
        (GlobalValueType::I64, Val::I64(v)) => GlobalBits::I64(*v as u64),
        (GlobalValueType::F32, Val::F32(v)) => GlobalBits::F32(*v),
        (GlobalValueType::F64, Val::F64(v)) => GlobalBits::F64(*v),
        (GlobalValueType::V128, Val::V128(v)) => GlobalBits::V128(v.as_u128()),
        _ => return None,
    })
}

/// The layout's name for the type of `bits`.
fn bits_type(bits: GlobalBits) -> GlobalValueType {
    match bits {
        GlobalBits::I32(_) => GlobalValueType::I32,
        GlobalBits::I64(_) => GlobalValueType::I64,
        GlobalBits::F32(_) => GlobalValueType::F32,
        GlobalBits::F64(_) => GlobalValueType::F64,
        GlobalBits::V128(_) => GlobalValueType::V128,
    }
}

/// The wasmtime value of `bits`.
fn value(bits: GlobalBits) -> Val {
    match bits {
        GlobalBits::I32(v) => Val::I32(v as i32),
        GlobalBits::I64(v) => Val::I64(v as i64),
        GlobalBits::F32(v) => Val::F32(v),
        GlobalBits::F64(v) => Val::F64(v),
        GlobalBits::V128(v) => Val::V128(V128::from(v)),
    }
}
