//! [`GuestInstance`]: one running instance of an operator's module, and the only way the rest
//! of the host calls into a guest.

use std::borrow::Cow;
use std::fmt;

use wasmtime::Store;
use weir_abi::InitMessage;

use super::call::Call;
use super::component::instance::ComponentBody;
use super::core::CoreBody;
use super::engine::deadline_ticks;
use super::error::CallFailure;
use super::error::{GuestError, GuestFailure};
use super::image::delta::ImagePolicy;
use super::image::format::IMAGE_MAGIC;
use super::image::rewrite::ImageLayout;
use super::image::state::{GuestSnapshot, ImageState};
use super::inspection::Capabilities;
use super::limits::GuestLimits;
use super::module::{OperatorModule, Template};
use super::state::{GuestState, SideBatch};
use crate::ids::CheckpointId;
use crate::state::HostState;
use crate::state::time::GuestTime;

// The timer service: a child module, so that it reaches the instance's private members.
mod timers;

pub use timers::{MAX_TIMER_ROUNDS, MAX_TIMERS_PER_CALL};

/// What one guest call emitted: its main output and its side outputs, each in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestOutput {
    /// Batches on the main output (`emit`), as [`GuestInstance::process`] returns them.
    pub main: Vec<Vec<u8>>,
    /// Batches on side outputs (`emit_to`), in the order they were emitted.
    pub side: Vec<SideBatch>,
}

/// Who an instance is: what the init message tells the guest, and what errors name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceContext {
    /// The operator's name in the job.
    pub operator: String,
    /// Which of the operator's instances this is, from 0; below `parallelism`.
    pub subtask: u32,
    /// How many instances of the operator run.
    pub parallelism: u32,
}

impl InstanceContext {
    /// The only instance of `operator`: subtask 0 of 1, as a tool, a check or a benchmark
    /// that drives one instance outside a job starts it.
    pub fn single(operator: impl Into<String>) -> InstanceContext {
        InstanceContext {
            operator: operator.into(),
            subtask: 0,
            parallelism: 1,
        }
    }
}

/// What an instance calls: a core module's memory and exports, or a component's exports. Each
/// body makes the calls its kind speaks and reports a failure as a [`CallFailure`]; the instance
/// keeps the life around them (readiness, poisoning, capture), the same for either.
#[allow(
    clippy::large_enum_variant,
    reason = "one per instance, never moved on the hot path; boxing the core exports would add \
              a load to every call"
)]
enum Body {
    /// A core module speaking the ABI of `docs/ABI.md`.
    Core(CoreBody),
    /// A component implementing the world of `abi/wit/operator.wit`: its arguments and
    /// results are copied by the canonical ABI, so the host never touches its memories.
    Component(ComponentBody),
}

/// `$body`'s call `$method` on whichever body it is.
macro_rules! each_body {
    ($body:expr, $method:ident($($arg:expr),*)) => {
        match $body {
            Body::Core(core) => core.$method($($arg),*),
            Body::Component(component) => component.$method($($arg),*),
        }
    };
}

impl Body {
    /// Instantiates `module` for `context` in a new store, under `limits`.
    fn start(
        module: &OperatorModule,
        context: &InstanceContext,
        limits: GuestLimits,
        deadline_ticks: u64,
    ) -> Result<(Store<GuestState>, Body), CallFailure> {
        let (operator, subtask) = (context.operator.as_str(), context.subtask);
        match module.template() {
            Template::Core(pre) => {
                let (store, core) =
                    CoreBody::start(pre, operator, subtask, limits, deadline_ticks)?;
                Ok((store, Body::Core(core)))
            }
            Template::Component(pre) => {
                let (store, component) =
                    ComponentBody::start(pre, operator, subtask, limits, deadline_ticks)?;
                Ok((store, Body::Component(component)))
            }
        }
    }

    /// `call`'s name as the guest knows it: the core export's or the world function's.
    fn call_name(&self, call: Call) -> &'static str {
        match self {
            Body::Core(_) => call.name(),
            Body::Component(_) => call.component_name(),
        }
    }

    /// The exports an image of the instance is taken through (see [`ImageState::lookup`]).
    fn image_state(
        &self,
        layout: &std::sync::Arc<ImageLayout>,
        store: &mut Store<GuestState>,
    ) -> Result<ImageState, CallFailure> {
        let instantiation = |message: String| {
            CallFailure::new(Call::Instantiate, GuestFailure::Instantiation { message })
        };
        match self {
            Body::Core(core) => ImageState::lookup(layout, core.instance(), store)
                .map_err(|e| instantiation(e.to_string())),
            // Loading refuses to checkpoint a component as an image.
            Body::Component(_) => Err(instantiation(
                "a component is not checkpointed as an image".to_string(),
            )),
        }
    }

    /// Runs `_initialize`, for a core module that exports it.
    fn initialize(&self, store: &mut Store<GuestState>) -> Result<(), CallFailure> {
        match self {
            Body::Core(core) => core.initialize(store),
            Body::Component(_) => Ok(()),
        }
    }

    /// Checks a core module's `weir_abi_version` (a component's world version was checked at
    /// load).
    fn check_version(&self, store: &mut Store<GuestState>) -> Result<(), CallFailure> {
        match self {
            Body::Core(core) => core.check_version(store),
            Body::Component(_) => Ok(()),
        }
    }

    fn init(
        &self,
        store: &mut Store<GuestState>,
        message: InitMessage<'_>,
    ) -> Result<(), CallFailure> {
        each_body!(self, init(store, message))
    }

    fn process(&self, store: &mut Store<GuestState>, batch: &[u8]) -> Result<(), CallFailure> {
        each_body!(self, process(store, batch))
    }

    fn finish(&self, store: &mut Store<GuestState>) -> Result<(), CallFailure> {
        each_body!(self, finish(store))
    }

    /// Whether the guest heard of the watermark: a core module without `weir_on_watermark`
    /// does not.
    fn on_watermark(
        &self,
        store: &mut Store<GuestState>,
        watermark: i64,
    ) -> Result<bool, CallFailure> {
        each_body!(self, on_watermark(store, watermark))
    }

    fn on_timers(&self, store: &mut Store<GuestState>, batch: &[u8]) -> Result<(), CallFailure> {
        each_body!(self, on_timers(store, batch))
    }

    fn snapshot(
        &self,
        store: &mut Store<GuestState>,
        checkpoint_id: CheckpointId,
    ) -> Result<Vec<u8>, CallFailure> {
        each_body!(self, snapshot(store, checkpoint_id))
    }

    fn restore(&self, store: &mut Store<GuestState>, state: &[u8]) -> Result<(), CallFailure> {
        each_body!(self, restore(store, state))
    }

    fn checkpoint_complete(
        &self,
        store: &mut Store<GuestState>,
        checkpoint_id: CheckpointId,
    ) -> Result<(), CallFailure> {
        each_body!(self, checkpoint_complete(store, checkpoint_id))
    }
}

/// One instance of an operator's module, with its own store and memory.
///
/// The module is a core module or a component: every method is the same call of the guest's
/// life for either, so callers never learn which it is.
///
/// Every method is one call of the ABI (`docs/ABI.md` §2–§7), bounded by its module's
/// [`GuestLimits`]. A failed call poisons the instance: later calls return
/// [`GuestFailure::Poisoned`] without running guest code. Calls take `&mut self`, so they never
/// overlap; the instance is `Send` and may move between threads between calls.
pub struct GuestInstance {
    /// Who this instance is.
    context: InstanceContext,
    /// The store owning the instance and its [`GuestState`].
    store: Store<GuestState>,
    /// What it calls.
    body: Body,
    /// Which optional exports the module has.
    capabilities: Capabilities,
    /// The call that failed, once one has.
    failed: Option<&'static str>,
    /// The module's bounds (copied: read on every call).
    limits: GuestLimits,
    /// The module it is an instance of: a restore from an image starts a fresh instance, and
    /// the module's clone of its engine keeps the epoch ticker running.
    module: OperatorModule,
    /// How its state is checkpointed, as its module was loaded to.
    capture: Capture,
}

/// How an instance's state is checkpointed: the mode its module was loaded with, as data, so
/// that each checkpoint call is one `match` rather than a test of options.
#[derive(Debug)]
enum Capture {
    /// Through the guest's `weir_snapshot` and `weir_restore` exports (or an empty state
    /// without them).
    Exports,
    /// As an image of its memories and mutable globals, taken by the host. Boxed: it holds the
    /// incremental baseline's bookkeeping, which an instance checkpointed through its exports
    /// should not carry the size of; it is allocated once per instance.
    Image(Box<ImageState>),
}

impl fmt::Debug for GuestInstance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GuestInstance")
            .field("context", &self.context)
            .field("capabilities", &self.capabilities)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl GuestInstance {
    /// Instantiates `module`, runs `_initialize` if exported and checks the ABI version: the
    /// instance is then ready for `weir_init`.
    ///
    /// With `initialize` false, `_initialize` is not run: for an instance an image is about to
    /// be written into.
    pub(crate) fn start(
        module: &OperatorModule,
        context: InstanceContext,
        initialize: bool,
    ) -> Result<Self, GuestError> {
        let limits = *module.limits();
        let deadline_ticks = deadline_ticks(limits.call_timeout);
        let call_name = |call: Call| match module.template() {
            Template::Core(_) => call.name(),
            Template::Component(_) => call.component_name(),
        };
        let failed = |failure: CallFailure| GuestError {
            operator: context.operator.clone(),
            subtask: context.subtask,
            call: call_name(failure.call),
            failure: failure.failure,
            backtrace: failure.backtrace,
        };
        if context.subtask >= context.parallelism {
            let message = format!(
                "subtask {} is not below the parallelism {}",
                context.subtask, context.parallelism
            );
            let failure = GuestFailure::Instantiation { message };
            return Err(failed(CallFailure::new(Call::Instantiate, failure)));
        }

        let (mut store, body) =
            Body::start(module, &context, limits, deadline_ticks).map_err(failed)?;
        let capture = match module.image() {
            Some(layout) => Capture::Image(Box::new(
                body.image_state(layout, &mut store).map_err(failed)?,
            )),
            None => Capture::Exports,
        };

        let mut guest = GuestInstance {
            context,
            store,
            body,
            capabilities: module.capabilities(),
            failed: None,
            limits,
            module: module.clone(),
            capture,
        };
        if initialize {
            guest.initialize()?;
        } else {
            // Restoring an image: the image holds what `_initialize` did, and running it again
            // over the restored memory would redo it (C constructors, allocator set-up).
        }
        let checked = guest.body.check_version(&mut guest.store);
        checked.map_err(|failure| guest.fail(failure))?;
        Ok(guest)
    }

    /// Runs `_initialize`, if the module exports it.
    fn initialize(&mut self) -> Result<(), GuestError> {
        let initialized = self.body.initialize(&mut self.store);
        initialized.map_err(|failure| self.fail(failure))
    }

    /// Gives the guest its init message through `weir_init`, or refuses a non-empty `config`
    /// when the module has no `weir_init` (`docs/ABI.md` §3).
    pub(crate) fn init(&mut self, config: &[u8]) -> Result<(), GuestError> {
        self.check_ready(Call::Init)?;
        let message = InitMessage {
            operator: &self.context.operator,
            subtask: self.context.subtask,
            parallelism: self.context.parallelism,
            config,
        };
        let initialized = self.body.init(&mut self.store, message);
        initialized.map_err(|failure| self.fail(failure))
    }

    /// Runs `weir_process` on one encoded input batch (`docs/ABI.md` §5) and returns the
    /// records it emitted, in order, as well-formed batches with port 0. Batches the guest
    /// emitted one after another may come back joined into one (up to about 1 MiB each): the
    /// records and their order are what the guest emitted, the batch boundaries are not kept.
    ///
    /// `batch` must be a well-formed batch; its port is the input it arrived on.
    pub fn process(&mut self, batch: &[u8]) -> Result<Vec<Vec<u8>>, GuestError> {
        self.check_ready(Call::Process)?;
        if let Err(failure) = self.body.process(&mut self.store, batch) {
            return Err(self.fail(failure));
        }
        Ok(std::mem::take(&mut self.store.data_mut().output))
    }

    /// Runs `weir_finish` once every input has ended, and returns what it emitted, as
    /// [`process`](Self::process) does; no batches when the module has no `weir_finish`.
    pub fn finish(&mut self) -> Result<Vec<Vec<u8>>, GuestError> {
        self.check_ready(Call::Finish)?;
        if let Err(failure) = self.body.finish(&mut self.store) {
            return Err(self.fail(failure));
        }
        // Empty when the module has no `weir_finish`: every call that may emit leaves its
        // output taken, and every other call begins by clearing it.
        Ok(std::mem::take(&mut self.store.data_mut().output))
    }

    /// The side-output batches the last call that may emit (`weir_process`, `weir_finish`)
    /// emitted, in order; empty once taken.
    pub fn take_side_output(&mut self) -> Vec<SideBatch> {
        std::mem::take(&mut self.store.data_mut().side_output)
    }

    /// The instance's watermark and timers: host state, which a checkpoint of the task keeps
    /// besides the guest's own (`docs/ABI.md` §15).
    pub fn time(&self) -> &GuestTime {
        &self.store.data().host.time
    }

    /// What the host keeps for this instance (`state::HostState`), to snapshot, or to replace
    /// with a checkpoint's. Restore it after the guest's own state: an image restore starts a
    /// fresh instance.
    pub fn host_state(&mut self) -> &mut HostState {
        &mut self.store.data_mut().host
    }

    /// What the last call emitted, taken.
    fn take_output(&mut self) -> GuestOutput {
        let state = self.store.data_mut();
        GuestOutput {
            main: std::mem::take(&mut state.output),
            side: std::mem::take(&mut state.side_output),
        }
    }

    /// Runs `weir_snapshot` for `checkpoint_id` and returns the state it saved; an empty state
    /// when the module has no `weir_snapshot`. An instance checkpointed as an image returns its
    /// image instead (docs/CHECKPOINTS.md), without running guest code: always a full image,
    /// self-contained (what a savepoint needs), and without touching the baseline of
    /// [`snapshot_incremental`](Self::snapshot_incremental).
    pub fn snapshot(&mut self, checkpoint_id: CheckpointId) -> Result<Vec<u8>, GuestError> {
        self.check_ready(Call::Snapshot)?;
        if let Capture::Image(image) = &self.capture {
            let limit = self.limits.max_state_bytes;
            return image
                .snapshot(&mut self.store, checkpoint_id, limit)
                .map_err(|failure| self.poison(Call::Snapshot, failure, None));
        }
        let snapshot = self.body.snapshot(&mut self.store, checkpoint_id);
        snapshot.map_err(|failure| self.fail(failure))
    }

    /// Sets when this instance's image checkpoints may be deltas: with
    /// `policy.full_every` above 1, [`snapshot_incremental`](Self::snapshot_incremental) keeps
    /// the previous image (a copy of the instance's memory) and writes a delta against it
    /// when the policy allows; with 1 (or 0) every image is full and nothing is kept. The
    /// chain starts afresh. Nothing changes for an instance checkpointed through its exports.
    pub fn set_image_policy(&mut self, policy: ImagePolicy) {
        if let Capture::Image(image) = &mut self.capture {
            image.set_policy(policy);
        }
    }

    /// Whether checkpoints of this instance may be incremental images.
    pub fn is_incremental(&self) -> bool {
        match &self.capture {
            Capture::Exports => false,
            Capture::Image(image) => image.is_incremental(),
        }
    }

    /// The state at checkpoint `checkpoint_id`, as [`snapshot`](Self::snapshot) takes it, but
    /// for an instance with incremental images (see [`set_image_policy`](Self::set_image_policy))
    /// a delta against the previous image when the policy allows one. The delta is only
    /// restorable with the states of [`GuestSnapshot::chain`]: use it for checkpoints, never
    /// for savepoints, and call [`checkpoint_aborted`](Self::checkpoint_aborted) when a
    /// checkpoint is aborted.
    pub fn snapshot_incremental(
        &mut self,
        checkpoint_id: CheckpointId,
    ) -> Result<GuestSnapshot, GuestError> {
        self.check_ready(Call::Snapshot)?;
        let Capture::Image(image) = &mut self.capture else {
            return Ok(GuestSnapshot {
                state: self.snapshot(checkpoint_id)?,
                chain: Vec::new(),
            });
        };
        let limit = self.limits.max_state_bytes;
        image
            .snapshot_incremental(&mut self.store, checkpoint_id, limit)
            .map_err(|failure| self.poison(Call::Snapshot, failure, None))
    }

    /// Checkpoint `checkpoint_id` was aborted: its state will not exist, so when the previous
    /// image's chain holds it, the next image is full (a delta on it could never be
    /// restored). Nothing else changes.
    pub fn checkpoint_aborted(&mut self, checkpoint_id: CheckpointId) {
        if let Capture::Image(image) = &mut self.capture {
            image.checkpoint_aborted(checkpoint_id);
        }
    }

    /// Replaces the guest's state with `state`, taken by [`snapshot`](Self::snapshot) from an
    /// earlier instance of the same module, through `weir_restore`.
    ///
    /// An empty state is passed as `ptr = 0, len = 0`, and skipped when the module has no
    /// `weir_restore`; a non-empty one then fails with [`GuestFailure::NoRestoreExport`].
    pub fn restore(&mut self, state: &[u8]) -> Result<(), GuestError> {
        self.check_ready(Call::Restore)?;
        if let Capture::Image(_) = self.capture {
            return self.restore_image(Vec::new(), Cow::Borrowed(state), false);
        }
        if state.starts_with(&IMAGE_MAGIC) {
            let message = "the state to restore is an image of an earlier instance, but the \
                           operator is now checkpointed through its exports: restore it with \
                           checkpoint = \"image\" (or \"auto\" for a module without snapshot \
                           exports), then change the setting"
                .to_string();
            return Err(self.poison(Call::Restore, GuestFailure::Image { message }, None));
        }
        let restored = self.body.restore(&mut self.store, state);
        restored.map_err(|failure| self.fail(failure))
    }

    /// Replaces the guest's state with the one at the end of an image chain: `chain` holds
    /// the states of the earlier checkpoints [`GuestSnapshot::chain`] named, base first, and
    /// `state` the last. With `resume`, and incremental images on, the next checkpoint's
    /// image may be a delta on this one (give `false` for a savepoint, which may be moved:
    /// nothing may chain to it). An instance checkpointed through its exports takes `state`
    /// alone, as [`restore`](Self::restore) does, and refuses a chain.
    pub fn restore_chain(
        &mut self,
        chain: &[&[u8]],
        state: &[u8],
        resume: bool,
    ) -> Result<(), GuestError> {
        let chain = chain.iter().map(|link| Cow::Borrowed(*link)).collect();
        self.restore_states(chain, Cow::Borrowed(state), resume)
    }

    /// [`restore_chain`](Self::restore_chain) with the states given as read: the image an
    /// incremental instance keeps as the baseline of its next delta is then built in the full
    /// image's own buffer instead of a copy of it (what a job's restore does).
    pub fn restore_chain_owned(
        &mut self,
        chain: Vec<Vec<u8>>,
        state: Vec<u8>,
        resume: bool,
    ) -> Result<(), GuestError> {
        let chain = chain.into_iter().map(Cow::Owned).collect();
        self.restore_states(chain, Cow::Owned(state), resume)
    }

    /// What [`restore_chain`](Self::restore_chain) and
    /// [`restore_chain_owned`](Self::restore_chain_owned) do, the states borrowed or owned.
    fn restore_states(
        &mut self,
        chain: Vec<Cow<'_, [u8]>>,
        state: Cow<'_, [u8]>,
        resume: bool,
    ) -> Result<(), GuestError> {
        self.check_ready(Call::Restore)?;
        if let Capture::Exports = self.capture {
            if !chain.is_empty() {
                let message = format!(
                    "the state is an image delta on {} earlier images, but the module is not \
                     checkpointed as an image: restore it with checkpoint = \"image\", then \
                     change the setting",
                    chain.len()
                );
                return Err(self.poison(Call::Restore, GuestFailure::Image { message }, None));
            }
            return self.restore(&state);
        }
        self.restore_image(chain, state, resume)
    }

    /// Makes this instance hold the image that `chain` and `state` make (nothing for an empty
    /// state: the fresh start it already is). The image goes into this instance when it was
    /// started for one ([`OperatorModule::instantiate_for_restore`]), into a fresh instance
    /// that replaces it otherwise; neither runs `_initialize` nor `weir_init`: the image holds
    /// what they did.
    fn restore_image(
        &mut self,
        chain: Vec<Cow<'_, [u8]>>,
        state: Cow<'_, [u8]>,
        resume: bool,
    ) -> Result<(), GuestError> {
        let (awaiting, policy) = match &mut self.capture {
            Capture::Image(image) => (image.stop_awaiting(), image.policy()),
            Capture::Exports => {
                return Err(self.poison(Call::Restore, not_imaged(), None));
            }
        };
        if state.is_empty() && chain.is_empty() {
            // The fresh start it already is, initialised now if it was waiting for an image.
            return match awaiting {
                Some(config) => self.initialize_now(&config),
                None => Ok(()),
            };
        }
        // An instance waiting for an image takes it in place. Any other has run guest code (and
        // its memory may be larger than the image's: memories never shrink), so the image goes
        // into a fresh instance.
        if awaiting.is_some() {
            return self
                .write_image(chain, state, resume)
                .map_err(|failure| self.poison(Call::Restore, failure, None));
        }
        let mut fresh = GuestInstance::start(&self.module, self.context.clone(), false)?;
        fresh.set_image_policy(policy);
        match fresh.write_image(chain, state, resume) {
            Ok(()) => {
                // The keyed state is the task's, not the instance's: it stays.
                fresh.host_state().keyed = self.host_state().keyed.take();
                *self = fresh;
                Ok(())
            }
            Err(failure) => Err(self.poison(Call::Restore, failure, None)),
        }
    }

    /// Writes the image that `chain` and `state` make into this instance, which has not run
    /// guest code since it started (see [`ImageState::write`]).
    fn write_image(
        &mut self,
        chain: Vec<Cow<'_, [u8]>>,
        state: Cow<'_, [u8]>,
        resume: bool,
    ) -> Result<(), GuestFailure> {
        match &mut self.capture {
            Capture::Image(image) => image.write(&mut self.store, chain, state, resume),
            Capture::Exports => Err(not_imaged()),
        }
    }

    /// Tells the guest that every checkpoint up to `checkpoint_id` is complete, through
    /// `weir_checkpoint_complete`; nothing when the module does not export it.
    pub fn checkpoint_complete(&mut self, checkpoint_id: CheckpointId) -> Result<(), GuestError> {
        self.check_ready(Call::CheckpointComplete)?;
        let completed = self
            .body
            .checkpoint_complete(&mut self.store, checkpoint_id);
        completed.map_err(|failure| self.fail(failure))
    }

    /// Who this instance is.
    pub fn context(&self) -> &InstanceContext {
        &self.context
    }

    /// Which optional exports the module has.
    pub fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    /// Whether a call has failed, so that every further call is refused.
    pub fn is_poisoned(&self) -> bool {
        self.failed.is_some()
    }

    /// Refuses to run `call` on a poisoned instance.
    fn check_ready(&mut self, call: Call) -> Result<(), GuestError> {
        if let Some(failed_call) = self.failed {
            return Err(self.error(call, GuestFailure::Poisoned { failed_call }, None));
        }
        if call != Call::Restore
            && let Capture::Image(image) = &mut self.capture
            && let Some(config) = image.stop_awaiting()
        {
            // Started for an image that never came: initialise it as `instantiate` would have.
            self.initialize_now(&config)?;
        }
        Ok(())
    }

    /// Marks this instance, started without `_initialize`, as waiting for an image; `config`
    /// initialises it if any other call comes first.
    pub(crate) fn await_image(&mut self, config: Vec<u8>) {
        if let Capture::Image(image) = &mut self.capture {
            image.await_image(config);
        }
    }

    /// Runs `_initialize` (if exported) and `weir_init` with `config`: what
    /// [`OperatorModule::instantiate`] does after starting an instance.
    fn initialize_now(&mut self, config: &[u8]) -> Result<(), GuestError> {
        self.initialize()?;
        self.init(config)
    }

    /// Poisons the instance with the failure a body reported, and returns the error to report.
    fn fail(&mut self, failure: CallFailure) -> GuestError {
        self.poison(failure.call, failure.failure, failure.backtrace)
    }

    /// Marks the instance failed in `call` and returns the error to report.
    fn poison(
        &mut self,
        call: Call,
        failure: GuestFailure,
        backtrace: Option<String>,
    ) -> GuestError {
        let name = self.call_name(call);
        self.failed.get_or_insert(name);
        self.error(call, failure, backtrace)
    }

    /// The error naming this instance and `call`.
    fn error(&self, call: Call, failure: GuestFailure, backtrace: Option<String>) -> GuestError {
        GuestError {
            operator: self.context.operator.clone(),
            subtask: self.context.subtask,
            call: self.call_name(call),
            failure,
            backtrace,
        }
    }

    /// `call`'s name as the guest knows it: the core export's or the world function's.
    fn call_name(&self, call: Call) -> &'static str {
        self.body.call_name(call)
    }
}

/// The failure of an image restore into an instance checkpointed through its exports (the
/// callers check the mode first, so it names a bug rather than a user's mistake).
fn not_imaged() -> GuestFailure {
    GuestFailure::Image {
        message: "the module is not checkpointed as an image".to_string(),
    }
}
