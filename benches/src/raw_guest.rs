//! [`RawGuest`]: a Weir guest on bare wasmtime, for profiling the code inside the guest.
//!
//! `perf` shows the host's own guest instances as anonymous `[JIT]` addresses: the host's
//! engine writes no perf map, and the benchmarks must not change the host. This runs the same
//! module on an engine configured like the host's plus `ProfilingStrategy::PerfMap`, with
//! minimal `weir` imports (`emit` copies the batch out; `save_state`, `fail`, `log` as the ABI
//! says), so `perf report` names the guest's functions (`guest-profile` binary).

use std::path::Path;

use wasmtime::{
    Caller, Config, Engine, Extern, Instance, Linker, Module, ProfilingStrategy, Store, Strategy,
    TypedFunc,
};
use weir_abi::InitMessage;

/// What the imports collect.
#[derive(Debug, Default)]
struct Collected {
    /// Output batches of the current call.
    output: Vec<Vec<u8>>,
    /// Snapshot bytes.
    state: Vec<u8>,
}

/// One instance of a guest module on bare wasmtime, with a perf map.
pub struct RawGuest {
    store: Store<Collected>,
    instance: Instance,
    alloc: TypedFunc<i32, i32>,
    process: TypedFunc<(i32, i32), i32>,
}

impl std::fmt::Debug for RawGuest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawGuest").finish_non_exhaustive()
    }
}

/// The guest's exported memory.
fn memory(caller: &mut Caller<'_, Collected>) -> wasmtime::Result<wasmtime::Memory> {
    match caller.get_export("memory") {
        Some(Extern::Memory(memory)) => Ok(memory),
        _ => Err(wasmtime::format_err!("no exported memory")),
    }
}

/// `ptr..ptr + len` of `data`, checked.
fn range(data: &[u8], ptr: i32, len: i32) -> wasmtime::Result<&[u8]> {
    let start = ptr as u32 as usize;
    data.get(start..start + len as u32 as usize)
        .ok_or_else(|| wasmtime::format_err!("out of bounds"))
}

/// Hands `ptr..ptr + len` of the guest's memory, checked, to `take` with what the store
/// collects: what the `emit` and `save_state` imports do with the bytes they are given.
fn take_bytes(
    caller: &mut Caller<'_, Collected>,
    ptr: i32,
    len: i32,
    take: impl FnOnce(&mut Collected, &[u8]),
) -> wasmtime::Result<()> {
    let memory = memory(caller)?;
    let (data, collected) = memory.data_and_store_mut(caller);
    take(collected, range(data, ptr, len)?);
    Ok(())
}

impl RawGuest {
    /// Compiles the module at `path` with a perf map, instantiates it and runs `weir_init`.
    pub fn load(path: &Path, operator: &str) -> wasmtime::Result<RawGuest> {
        let mut config = Config::new();
        config
            .strategy(Strategy::Cranelift)
            .epoch_interruption(true)
            .max_wasm_stack(512 * 1024)
            .profiler(ProfilingStrategy::PerfMap);
        let engine = Engine::new(&config)?;
        let module = Module::from_file(&engine, path)?;
        let mut linker = Linker::<Collected>::new(&engine);
        linker.func_wrap(
            "weir",
            "emit",
            |mut caller: Caller<'_, Collected>, ptr: i32, len: i32| {
                take_bytes(&mut caller, ptr, len, |collected, bytes| {
                    collected.output.push(bytes.to_vec())
                })
            },
        )?;
        linker.func_wrap(
            "weir",
            "save_state",
            |mut caller: Caller<'_, Collected>, ptr: i32, len: i32| {
                take_bytes(&mut caller, ptr, len, |collected, bytes| {
                    collected.state.extend_from_slice(bytes)
                })
            },
        )?;
        linker.func_wrap(
            "weir",
            "fail",
            |_: Caller<'_, Collected>, _: i32, _: i32| -> wasmtime::Result<()> {
                Err(wasmtime::format_err!("the guest failed"))
            },
        )?;
        linker.func_wrap(
            "weir",
            "log",
            |_: Caller<'_, Collected>, _: i32, _: i32, _: i32| {},
        )?;

        let mut store = Store::new(&engine, Collected::default());
        store.set_epoch_deadline(u64::MAX / 2);
        let instance = linker.instantiate(&mut store, &module)?;
        if let Ok(initialize) = instance.get_typed_func::<(), ()>(&mut store, "_initialize") {
            initialize.call(&mut store, ())?;
        }
        let alloc = instance.get_typed_func(&mut store, "weir_alloc")?;
        let process = instance.get_typed_func(&mut store, "weir_process")?;
        let mut guest = RawGuest {
            store,
            instance,
            alloc,
            process,
        };
        let init = guest
            .instance
            .get_typed_func::<(i32, i32), i32>(&mut guest.store, "weir_init")?;
        let message = InitMessage {
            operator,
            subtask: 0,
            parallelism: 1,
            config: b"",
        }
        .encode();
        let (ptr, len) = guest.write(&message)?;
        let status = init.call(&mut guest.store, (ptr, len))?;
        wasmtime::ensure!(status == 0, "weir_init returned {status}");
        Ok(guest)
    }

    /// Copies `bytes` into a buffer from `weir_alloc`.
    fn write(&mut self, bytes: &[u8]) -> wasmtime::Result<(i32, i32)> {
        let len = i32::try_from(bytes.len())?;
        let ptr = self.alloc.call(&mut self.store, len)?;
        let memory = self
            .instance
            .get_memory(&mut self.store, "memory")
            .ok_or_else(|| wasmtime::format_err!("no exported memory"))?;
        memory.write(&mut self.store, ptr as u32 as usize, bytes)?;
        Ok((ptr, len))
    }

    /// Runs `weir_process` on `batch` and returns the output batches.
    pub fn process(&mut self, batch: &[u8]) -> wasmtime::Result<Vec<Vec<u8>>> {
        let (ptr, len) = self.write(batch)?;
        let status = self.process.call(&mut self.store, (ptr, len))?;
        wasmtime::ensure!(status == 0, "weir_process returned {status}");
        Ok(std::mem::take(&mut self.store.data_mut().output))
    }
}
