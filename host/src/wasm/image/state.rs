//! [`ImageState`]: what an instance checkpointed as an image keeps beside its store, and the
//! taking and writing back of its images.
//!
//! # Why this module exists
//!
//! An instance is checkpointed one of two ways, decided when its module is loaded (see
//! [`StateCapture`](super::StateCapture)): through the guest's own exports, which needs nothing
//! beyond the ABI calls, or as an image, which needs the exports the rewrite added, the
//! incremental baseline, and the config an instance started for a restore waits with. This
//! module holds all of the second, so that [`GuestInstance`](crate::wasm::GuestInstance) is the
//! ABI calls plus one `match` on its capture mode, and a third mode (a component's own state
//! interface) would be one more variant, not more `if`s.
//!
//! The three notions stay apart on purpose: [`StateCapture`](super::StateCapture) is what the
//! job file asks for (with `auto`), resolved once per module into an image layout or none;
//! an [`ImageState`] exists only for an instance of a module that got one; and its
//! [`ImagePolicy`] (from `image_full_every`) only says when such an image may be a delta.

use std::borrow::Cow;
use std::sync::Arc;

use wasmtime::{Instance, Store};

use super::capture::{CaptureError, ImageExports};
use super::delta::{Baseline, ImagePolicy, reconstruct};
use super::format::{
    IMAGE_MAGIC, ImageError, ImageKind, decode_full_unchecked, into_checkpoint_image, read_header,
};
use super::memcopy::to_owned_memory;
use super::rewrite::ImageLayout;
use crate::ids::CheckpointId;
use crate::wasm::error::GuestFailure;
use crate::wasm::state::GuestState;

/// What [`GuestInstance::snapshot_incremental`](crate::wasm::GuestInstance::snapshot_incremental)
/// took: the state, and the earlier checkpoints whose states a restore needs with it.
///
/// It lives here, beside the images that make its chains, rather than with the instance: the
/// image code returns it, and would otherwise import the instance that imports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestSnapshot {
    /// The state bytes: the guest's own snapshot, a full image, or a delta.
    pub state: Vec<u8>,
    /// For a delta, the checkpoints whose images it builds on, base (the full image) first,
    /// its parent last; empty for any self-contained state.
    pub chain: Vec<CheckpointId>,
}

/// The image side of one instance checkpointed as an image.
#[derive(Debug)]
pub(crate) struct ImageState {
    /// The instance's memories and mutable globals, reached through the rewrite's exports.
    exports: ImageExports,
    /// When images may be deltas (`image_full_every` of the job file).
    policy: ImagePolicy,
    /// The previous image and its chain, when this instance's checkpoints are incremental
    /// images; `None` when every image is full.
    incremental: Option<Incremental>,
    /// For an instance started to have an image written into it (see
    /// [`OperatorModule::instantiate_for_restore`](crate::wasm::OperatorModule::instantiate_for_restore)):
    /// the config it is initialised with if it is not restored from an image after all.
    /// `None` once it holds an image or is initialised.
    awaiting: Option<Vec<u8>>,
}

/// What an instance keeps between two incremental image checkpoints.
#[derive(Debug)]
struct Incremental {
    /// The previous image, which the next delta is computed against.
    baseline: Baseline,
    /// The checkpoints whose images make up the previous image's chain, base first, the
    /// previous image's own last; empty when there is no previous image.
    chain: Vec<CheckpointId>,
}

/// `bytes` as an owned buffer: the buffer itself, or a copy made on every core.
fn owned(bytes: Cow<'_, [u8]>) -> Vec<u8> {
    match bytes {
        Cow::Owned(bytes) => bytes,
        Cow::Borrowed(bytes) => to_owned_memory(bytes),
    }
}

/// The failure of an image that is larger than `limits.max_state`.
fn too_large(what: &str, len: usize, limit: usize) -> GuestFailure {
    let message = format!(
        "the {what} of the guest's memory and globals is {len} bytes, more than \
         `limits.max_state` ({limit} bytes): raise `limits.max_state`, or checkpoint \
         the operator through its own exports (checkpoint = \"exports\")"
    );
    GuestFailure::Image { message }
}

/// An image failure in words.
fn failure(e: impl ToString) -> GuestFailure {
    GuestFailure::Image {
        message: e.to_string(),
    }
}

impl ImageState {
    /// The image side of `instance`, a new instance of a module rewritten to `layout`: its
    /// images are incremental under the default [`ImagePolicy`] until
    /// [`set_policy`](Self::set_policy) says otherwise.
    pub(crate) fn lookup(
        layout: &Arc<ImageLayout>,
        instance: &Instance,
        store: &mut Store<GuestState>,
    ) -> Result<Self, CaptureError> {
        let policy = ImagePolicy::default();
        let mut state = ImageState {
            exports: ImageExports::lookup(layout, instance, store)?,
            policy,
            incremental: None,
            awaiting: None,
        };
        state.set_policy(policy);
        Ok(state)
    }

    /// Sets when images may be deltas: with `policy.full_every` above 1 the previous image is
    /// kept and the next may be a delta on it; with 1 (or 0) every image is full and nothing
    /// is kept. The chain starts afresh.
    pub(crate) fn set_policy(&mut self, policy: ImagePolicy) {
        self.policy = policy;
        self.incremental = (policy.full_every > 1).then(|| Incremental {
            baseline: Baseline::new(policy),
            chain: Vec::new(),
        });
    }

    /// When images may be deltas.
    pub(crate) fn policy(&self) -> ImagePolicy {
        self.policy
    }

    /// Whether images may be deltas.
    pub(crate) fn is_incremental(&self) -> bool {
        self.incremental.is_some()
    }

    /// Marks the instance, started without `_initialize`, as waiting for an image; `config`
    /// initialises it if any other call comes first.
    pub(crate) fn await_image(&mut self, config: Vec<u8>) {
        self.awaiting = Some(config);
    }

    /// The config of an instance waiting for an image, which then waits no more.
    pub(crate) fn stop_awaiting(&mut self) -> Option<Vec<u8>> {
        self.awaiting.take()
    }

    /// A full image of the instance in `store`, taken at `checkpoint`, of at most `limit`
    /// bytes: self-contained, and without touching the incremental baseline.
    pub(crate) fn snapshot(
        &self,
        store: &mut Store<GuestState>,
        checkpoint: CheckpointId,
        limit: usize,
    ) -> Result<Vec<u8>, GuestFailure> {
        // Not sized in advance: the encoder allocates a full image so that its pages are
        // faulted in by the threads that copy into them.
        let mut out = Vec::new();
        self.exports
            .take(store, checkpoint, &mut out)
            .map_err(failure)?;
        if out.len() > limit {
            return Err(too_large("image", out.len(), limit));
        }
        Ok(out)
    }

    /// The image at `checkpoint`: a delta on the previous image when the policy allows one,
    /// with the chain a restore needs; a full image (as [`snapshot`](Self::snapshot)) when
    /// images are not incremental. At most `limit` bytes.
    pub(crate) fn snapshot_incremental(
        &mut self,
        store: &mut Store<GuestState>,
        checkpoint: CheckpointId,
        limit: usize,
    ) -> Result<GuestSnapshot, GuestFailure> {
        // Taken out, and put back once the image is taken: a failed image leaves none.
        let Some(mut incremental) = self.incremental.take() else {
            return Ok(GuestSnapshot {
                state: self.snapshot(store, checkpoint, limit)?,
                chain: Vec::new(),
            });
        };
        let mut out = Vec::new();
        let taken = self
            .exports
            .take_incremental(store, &mut incremental.baseline, checkpoint, &mut out)
            .map_err(failure)?;
        let chain = match taken.kind {
            ImageKind::Full => Vec::new(),
            ImageKind::Delta => {
                debug_assert_eq!(taken.parent, incremental.chain.last().copied());
                std::mem::take(&mut incremental.chain)
            }
        };
        incremental.chain.clone_from(&chain);
        incremental.chain.push(checkpoint);
        self.incremental = Some(incremental);
        if out.len() > limit {
            let what = match taken.kind {
                ImageKind::Full => "image",
                ImageKind::Delta => "image delta",
            };
            return Err(too_large(what, out.len(), limit));
        }
        Ok(GuestSnapshot { state: out, chain })
    }

    /// Checkpoint `checkpoint` was aborted: when the previous image's chain holds it, the
    /// next image is full (a delta on it could never be restored).
    pub(crate) fn checkpoint_aborted(&mut self, checkpoint: CheckpointId) {
        if let Some(incremental) = &mut self.incremental
            && incremental.chain.contains(&checkpoint)
        {
            incremental.baseline.reset();
            incremental.chain.clear();
        }
    }

    /// Writes the image that `chain` and `state` make into the instance in `store`, which has
    /// not run guest code since it started. With `resume` and incremental images on, the
    /// image is kept as the baseline of the next delta. On failure the instance is half
    /// written, and the failure says so when the state was saved by the guest's exports.
    pub(crate) fn write(
        &mut self,
        store: &mut Store<GuestState>,
        chain: Vec<Cow<'_, [u8]>>,
        state: Cow<'_, [u8]>,
        resume: bool,
    ) -> Result<(), GuestFailure> {
        let saved_by_exports = !chain.first().unwrap_or(&state).starts_with(&IMAGE_MAGIC);
        self.write_chain(store, chain, state, resume)
            .map_err(|mut message| {
                if saved_by_exports {
                    message.push_str(
                        "; the state was saved by the guest's weir_snapshot, but the operator is \
                         now checkpointed as an image: restore it with checkpoint = \"exports\", \
                         then change the setting",
                    );
                }
                GuestFailure::Image { message }
            })
    }

    /// What [`write`](Self::write) does, failing with the message alone.
    fn write_chain(
        &mut self,
        store: &mut Store<GuestState>,
        chain: Vec<Cow<'_, [u8]>>,
        state: Cow<'_, [u8]>,
        resume: bool,
    ) -> Result<(), String> {
        let resume = resume && self.incremental.is_some();
        let text = |e: ImageError| e.to_string();
        if chain.is_empty() {
            // One full image, written straight from the bytes read. Its header is verified; its
            // pages are not hashed again: the storage verified every byte it read.
            let image = decode_full_unchecked(&state).map_err(text)?;
            self.exports
                .apply(store, &image.image_ref())
                .map_err(|e| e.to_string())?;
            if resume && let Some(incremental) = &mut self.incremental {
                let id = image.header.checkpoint;
                let kept = into_checkpoint_image(owned(state)).map_err(text)?;
                incremental.baseline = Baseline::resume(self.policy, kept);
                incremental.chain = vec![id];
            }
            return Ok(());
        }
        let mut links = chain.into_iter();
        let full = owned(links.next().expect("a chain has a full image"));
        let deltas: Vec<Cow<'_, [u8]>> = links.chain([state]).collect();
        let ids = std::iter::once(full.as_slice())
            .chain(deltas.iter().map(|delta| &**delta))
            .map(|bytes| read_header(bytes).map(|h| h.checkpoint))
            .collect::<Result<Vec<CheckpointId>, _>>()
            .map_err(text)?;
        let image = reconstruct(full, deltas.iter().map(|delta| &**delta)).map_err(text)?;
        self.exports
            .apply(store, &image.image.as_image_ref())
            .map_err(|e| e.to_string())?;
        if resume && let Some(incremental) = &mut self.incremental {
            incremental.baseline = Baseline::resume(self.policy, image);
            incremental.chain = ids;
        }
        Ok(())
    }
}
