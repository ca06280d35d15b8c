//! [`WasmEngine`]: the wasmtime engine of one job, its linker, and the epoch ticker that
//! bounds every guest call.
//!
//! An engine may also keep a **pool of instances** for the modules checkpointed as images
//! ([`EngineOptions::image_pool`]). Restoring an image writes the guest's whole memory at once;
//! into memory freshly mapped from the OS, most of that time is page faults (a 174 MB image
//! restored in 59 ms, against 15.6 ms into resident memory, docs/BENCHMARKS.md §4).
//! wasmtime's pooling allocator with
//! `linear_memory_keep_resident` keeps each slot's pages resident when its instance ends (zeroed
//! with `memset` instead of returned to the OS), so the instance that takes the slot next — the
//! same task's after a restart — restores with a plain copy. The price is memory: a slot's pages
//! stay allocated until the engine is dropped. Modules checkpointed through their exports keep
//! the on-demand allocation: their restore is mostly the guest decoding its state (docs/BENCHMARKS.md
//! §4), and an operator that once grew its memory would hold it for the job's life.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use wasmtime::{
    Cache, CacheConfig, Config, Engine, InstanceAllocationStrategy, Linker,
    PoolingAllocationConfig, Strategy,
};

use super::component;
use super::error::EngineError;
use super::imports;
use super::limits::{GuestLimits, MAX_TABLE_ELEMENTS};
use super::state::GuestState;

/// How often the epoch advances. A call overrunning its time limit is stopped within about
/// one tick (`docs/ABI.md` §9).
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The wasm stack each guest call may use, in bytes (`docs/ABI.md` §9).
const MAX_WASM_STACK: usize = 512 * 1024;

/// The wasmtime engine of one job: compiles modules, and links them with the host imports.
///
/// Cloning is cheap and shares everything. A background thread advances the engine's epoch
/// every [`EPOCH_TICK`] so that call deadlines fire; it stops when the last clone — and the
/// last [`OperatorModule`](super::OperatorModule) and [`GuestInstance`](super::GuestInstance) made from it, which
/// hold clones — is dropped.
#[derive(Clone)]
pub struct WasmEngine {
    inner: Arc<Inner>,
}

/// How to build a [`WasmEngine`].
///
/// The engine itself has no limits: each [`OperatorModule`](super::OperatorModule) carries its own
/// [`GuestLimits`], so one engine serves every operator of a job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineOptions {
    /// Keep compiled modules in this directory (see [`WasmEngine::with_module_cache`]).
    pub module_cache: Option<PathBuf>,
    /// A pool for the instances of image-checkpointed modules whose slots keep their memory
    /// resident (see the module docs); `None` allocates them on demand like the others.
    pub image_pool: Option<ImagePool>,
}

/// The size of an engine's pool of image-checkpointed instances ([`EngineOptions::image_pool`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImagePool {
    /// How many instances the pool holds at once. More instances alive at once than this fail
    /// to start, so give at least the number of subtasks of such operators, with room for a
    /// restart's overlap and each module's load-time check.
    pub instances: u32,
    /// The largest memory of one slot, in bytes: at least the largest
    /// [`GuestLimits::max_memory_bytes`] of the modules meant for the pool. A module whose
    /// limit is larger is allocated on demand instead. Slots are address space, not memory,
    /// until a guest touches their pages.
    pub max_memory_bytes: usize,
}

/// A wasmtime engine with the `weir` imports linked into it.
struct Runtime {
    /// The compiler and runtime configuration (epoch interruption on).
    engine: Engine,
    /// The `weir` imports, defined once.
    linker: Linker<GuestState>,
}

impl Runtime {
    fn new(config: &Config) -> Result<Self, wasmtime::Error> {
        let engine = Engine::new(config)?;
        let mut linker = Linker::new(&engine);
        imports::add_to_linker(&mut linker)?;
        Ok(Self { engine, linker })
    }
}

/// What the clones share.
struct Inner {
    /// Where every module is compiled, unless it goes to the pool.
    runtime: Runtime,
    /// The linker of components, on the same engine: WASI and the world's `host` interface.
    component_linker: wasmtime::component::Linker<GuestState>,
    /// The engine of the pool of image-checkpointed instances, made when the first such module
    /// is loaded: `None` inside when there is no pool (or it could not be made).
    pool: Arc<OnceLock<Option<Runtime>>>,
    /// The configuration of the pool's engine and the largest memory of one of its slots;
    /// `None` without a pool.
    pool_config: Option<(Config, usize)>,
    /// The cache of compiled modules, if the engine has one.
    cache: Option<Cache>,
    /// Advances the epoch; dropped (and joined) with the last clone.
    _ticker: EpochTicker,
}

impl fmt::Debug for WasmEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WasmEngine")
            .field(
                "image_pool",
                &self.inner.pool_config.as_ref().map(|(_, max)| max),
            )
            .finish_non_exhaustive()
    }
}

impl WasmEngine {
    /// A new engine; starts the epoch ticker thread. Every module it loads is compiled.
    pub fn new() -> Result<Self, EngineError> {
        Self::with_options(&EngineOptions::default())
    }

    /// [`new`](Self::new), with compiled modules kept in the directory `cache` (created if
    /// missing): a module compiled once by any engine of the same configuration and wasmtime
    /// version is then loaded from there instead of compiled again — the difference between a
    /// job starting in milliseconds and in seconds. Entries are keyed by a hash of the module's
    /// bytes and of the compiler's settings, so a changed module or host is compiled anew.
    pub fn with_module_cache(cache: &Path) -> Result<Self, EngineError> {
        Self::with_options(&EngineOptions {
            module_cache: Some(cache.to_path_buf()),
            ..EngineOptions::default()
        })
    }

    /// A new engine built as `options` say.
    pub fn with_options(options: &EngineOptions) -> Result<Self, EngineError> {
        let cache = options.module_cache.as_deref();
        let wasmtime_error = |e: wasmtime::Error| EngineError::Wasmtime {
            message: format!("{e:#}"),
        };
        let mut config = Config::new();
        config
            .strategy(Strategy::Cranelift)
            .epoch_interruption(true)
            .max_wasm_stack(MAX_WASM_STACK);
        let cache = match cache {
            Some(dir) => {
                let cache_error = |e: wasmtime::Error| EngineError::ModuleCache {
                    dir: dir.to_path_buf(),
                    message: format!("{e:#}"),
                };
                let mut settings = CacheConfig::new();
                settings.with_directory(dir);
                Some(Cache::new(settings).map_err(cache_error)?)
            }
            None => None,
        };
        config.cache(cache.clone());
        let runtime = Runtime::new(&config).map_err(wasmtime_error)?;
        let mut component_linker = wasmtime::component::Linker::new(&runtime.engine);
        component::add_to_linker(&mut component_linker).map_err(wasmtime_error)?;
        let pool_config = options
            .image_pool
            .filter(|pool| pool.instances > 0)
            .map(|pool| {
                let mut pooled = config.clone();
                pooled
                    .allocation_strategy(InstanceAllocationStrategy::Pooling(pool_settings(&pool)));
                (pooled, pool.max_memory_bytes)
            });
        let pool = Arc::new(OnceLock::new());
        let ticker = EpochTicker::start(runtime.engine.clone(), Arc::clone(&pool))
            .map_err(EngineError::Ticker)?;
        Ok(Self {
            inner: Arc::new(Inner {
                runtime,
                component_linker,
                pool,
                pool_config,
                cache,
                _ticker: ticker,
            }),
        })
    }

    /// The engine of one job: built as `options` say, but when the cache of compiled modules
    /// cannot be used, without it, with a warning — the cache only saves time, and a job runs
    /// without it rather than not at all.
    pub fn for_job(options: &EngineOptions) -> Result<Self, EngineError> {
        Self::with_options(options).or_else(|e| match &options.module_cache {
            Some(_) => {
                tracing::warn!("{e}; compiling every module this run");
                Self::with_options(&EngineOptions {
                    module_cache: None,
                    ..options.clone()
                })
            }
            None => Err(e),
        })
    }

    /// How many modules this engine loaded from its cache of compiled modules, and how many it
    /// compiled (and stored there); `None` without a cache.
    pub fn module_cache_counts(&self) -> Option<(usize, usize)> {
        let cache = self.inner.cache.as_ref()?;
        Some((cache.cache_hits(), cache.cache_misses()))
    }

    /// The wasmtime engine.
    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.runtime.engine
    }

    /// The linker holding the `weir` imports.
    pub(crate) fn linker(&self) -> &Linker<GuestState> {
        &self.inner.runtime.linker
    }

    /// The linker of components: the denied WASI and the world's `host` interface.
    pub(crate) fn component_linker(&self) -> &wasmtime::component::Linker<GuestState> {
        &self.inner.component_linker
    }

    /// The engine and linker of the pool of image-checkpointed instances, made on first use,
    /// for a module whose instances run under `limits`; `None` when this engine has no pool,
    /// when its slots are smaller than `limits.max_memory_bytes`, or when making it failed (the
    /// reason is logged once). Such modules are allocated on demand.
    pub(crate) fn image_pool(
        &self,
        limits: &GuestLimits,
    ) -> Option<(&Engine, &Linker<GuestState>)> {
        let (config, max_memory_bytes) = self.inner.pool_config.as_ref()?;
        if limits.max_memory_bytes > *max_memory_bytes {
            return None;
        }
        let pool = self.inner.pool.get_or_init(|| {
            Runtime::new(config)
                .inspect_err(|e| {
                    tracing::warn!(
                        "cannot reserve the pool of image-checkpointed instances ({e:#}); their \
                         memory is allocated on demand, and restoring an image takes longer"
                    );
                })
                .ok()
        });
        pool.as_ref().map(|rt| (&rt.engine, &rt.linker))
    }
}

/// The epoch deadline, in ticks beyond the current epoch, that enforces `call_timeout`
/// ([`GuestLimits::call_timeout`]): the limit rounded up to whole ticks, plus one for the tick
/// already under way.
pub(crate) fn deadline_ticks(call_timeout: Duration) -> u64 {
    let ticks = call_timeout.as_nanos().div_ceil(EPOCH_TICK.as_nanos());
    u64::try_from(ticks)
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}

/// What a file is, for messages about one that should be a regular file: `"a directory"`,
/// `"a character device"`, …
pub fn file_kind(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_char_device() {
            return "a character device";
        }
        if file_type.is_block_device() {
            return "a block device";
        }
        if file_type.is_fifo() {
            return "a FIFO";
        }
        if file_type.is_socket() {
            return "a socket";
        }
    }
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_file() {
        "a regular file"
    } else if file_type.is_symlink() {
        "a symbolic link"
    } else {
        "not a file"
    }
}

/// The pooling allocator's settings for `pool`: every slot keeps the memory its instance
/// reached resident when the instance ends.
///
/// A slot holds one memory (the ABI allows no more: [`OperatorModule`](super::OperatorModule) refuses a module with
/// several) and up to 4 tables of up to [`MAX_TABLE_ELEMENTS`] each; a module with more tables
/// fails to compile for the pool and is allocated on demand instead ([`OperatorModule`](super::OperatorModule) falls
/// back). Slots are address space reserved when the first imaged module is loaded, not memory:
/// pages are committed only when a guest touches them.
fn pool_settings(pool: &ImagePool) -> PoolingAllocationConfig {
    /// Tables per module a pool slot has room for.
    const TABLES_PER_MODULE: u32 = 4;
    let instances = pool.instances;
    let max_memory_bytes = pool.max_memory_bytes;
    let mut pool = PoolingAllocationConfig::new();
    pool.total_core_instances(instances)
        .total_memories(instances)
        .total_tables(instances.saturating_mul(TABLES_PER_MODULE))
        .max_memories_per_module(1)
        .max_tables_per_module(TABLES_PER_MODULE)
        .table_elements(MAX_TABLE_ELEMENTS)
        .max_memory_size(max_memory_bytes)
        .linear_memory_keep_resident(max_memory_bytes);
    pool
}

/// The thread that advances an engine's epoch every [`EPOCH_TICK`].
///
/// Dropping it closes the channel the thread waits on, which wakes and ends the thread at
/// once; the drop then joins it, so no thread outlives its engine.
struct EpochTicker {
    /// Closing this stops the thread.
    stop: Option<mpsc::Sender<()>>,
    /// The thread, joined on drop.
    thread: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Ticks `engine`, and the pool's engine once it is made.
    fn start(engine: Engine, pool: Arc<OnceLock<Option<Runtime>>>) -> std::io::Result<Self> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("weir-epoch".to_string())
            .spawn(move || {
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(EPOCH_TICK) {
                    engine.increment_epoch();
                    if let Some(Some(pool)) = pool.get() {
                        pool.engine.increment_epoch();
                    }
                }
            })?;
        Ok(Self {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // The thread only loops and increments; it cannot panic, and if it somehow did
            // there is nothing left to clean up.
            let _ = thread.join();
        }
    }
}
