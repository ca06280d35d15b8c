//! `state-bench`: the keyed store of host-kept state on its own (`weir::state::keyed`): how
//! fast a keyed count's read-modify-write runs against it, how long a checkpoint takes and how
//! many bytes it stores, full and after 1 % of the keys change, and how long a store takes to
//! open from its checkpoint. docs/BENCHMARKS.md §11 has the figures.
//!
//! ```text
//! source scripts/lib/rocksdb.sh
//! cargo build --release -p weir-benches --bin state-bench
//! target/release/state-bench --keys 1000000 --backend rocksdb
//! ```

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use weir::ids::CheckpointId;
use weir::state::keyed::cache::{CacheBudget, CachedBackend};
use weir::state::keyed::memory::MemoryBackend;
use weir::state::keyed::rocks::{RocksBackend, StoreBudget};
use weir::state::keyed::snapshot::Uploads;
use weir::state::keyed::{Backend, KeyedStore, StoreCheckpoint, StoreKey, Writes};
use weir_abi::key_group::{DEFAULT_MAX_PARALLELISM, key_group};
use weir_benches::report::load_average;
// The keys' order, seeded.
use weir_test_servers::rng::splitmix64_next as next;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Which {
    Rocksdb,
    Memory,
}

/// The keyed store under a keyed count's load.
#[derive(Debug, Parser)]
#[command(name = "state-bench")]
struct Args {
    /// Distinct keys.
    #[arg(long, default_value_t = 1_000_000)]
    keys: u64,
    /// Records counted, in batches (each a read of the batch's distinct keys and one write).
    #[arg(long, default_value_t = 2_000_000)]
    records: u64,
    /// Records per batch.
    #[arg(long, default_value_t = 1_024)]
    batch: usize,
    /// The store.
    #[arg(long, value_enum, default_value_t = Which::Rocksdb)]
    backend: Which,
    /// The memory budget of the RocksDB stores, MiB.
    #[arg(long, default_value_t = 512)]
    budget_mib: usize,
    /// The memory of a write-back cache of hot keys in front of the store, MiB; 0: none.
    #[arg(long, default_value_t = 0)]
    cache_mib: usize,
    /// The share of keys that change between the two checkpoints, percent.
    #[arg(long, default_value_t = 1.0)]
    change_percent: f64,
}

/// The store key of count key `n`: the word as the count example's keys look, in its group.
fn store_key(n: u64) -> Vec<u8> {
    let word = format!("word-{n:08x}");
    StoreKey::to_vec(
        key_group(word.as_bytes(), DEFAULT_MAX_PARALLELISM),
        0,
        word.as_bytes(),
    )
}

/// Counts `records` records drawn from `keys` keys into `store`, `batch` at a time: each batch
/// reads its distinct keys in one call and writes their new counts in one batch.
fn count(
    store: &mut dyn KeyedStore,
    keys: u64,
    records: u64,
    batch: usize,
    seed: &mut u64,
) -> Duration {
    let started = Instant::now();
    let mut done = 0;
    while done < records {
        let n = batch.min((records - done) as usize);
        let mut drawn: Vec<Vec<u8>> = (0..n).map(|_| store_key(next(seed) % keys)).collect();
        drawn.sort_unstable();
        // The batch grouped by key, as the host groups it: each distinct key and how often.
        let mut distinct: Vec<Vec<u8>> = Vec::with_capacity(n);
        let mut hits: Vec<u64> = Vec::with_capacity(n);
        for key in drawn {
            if distinct.last() == Some(&key) {
                *hits.last_mut().expect("a hit per key") += 1;
            } else {
                distinct.push(key);
                hits.push(1);
            }
        }
        let refs: Vec<&[u8]> = distinct.iter().map(Vec::as_slice).collect();
        let old = store.get_many(&refs).expect("read");
        let mut writes = Writes::new();
        for ((key, value), add) in distinct.iter().zip(old).zip(&hits) {
            let count = value.map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap())) + add;
            writes.put(key, &count.to_le_bytes());
        }
        store.write(&writes).expect("write");
        done += n as u64;
    }
    started.elapsed()
}

/// Writes every key once, in batches: the store as a job that has seen every key holds it.
fn load(store: &mut dyn KeyedStore, keys: u64, batch: usize) -> Duration {
    let started = Instant::now();
    let mut writes = Writes::new();
    for n in 0..keys {
        writes.put(&store_key(n), &1u64.to_le_bytes());
        if writes.len() == batch {
            store.write(&writes).expect("write");
            writes.clear();
        }
    }
    store.write(&writes).expect("write");
    started.elapsed()
}

/// Checkpoint `id` of `store` into `dir`: how long it took, and the bytes it stores (the files
/// `uploads` has it upload plus the inline ones); the checkpoint then counts as completed.
fn checkpoint(
    store: &mut dyn KeyedStore,
    dir: &Path,
    uploads: &mut Uploads,
    id: u64,
) -> Result<(Duration, u64, StoreCheckpoint), String> {
    let started = Instant::now();
    let checkpoint = store
        .checkpoint(&dir.join(format!("checkpoint-{id}")))
        .map_err(|e| e.to_string())?;
    let took = started.elapsed();
    let bytes = stored_bytes(&checkpoint, uploads, id);
    uploads.completed(CheckpointId(id));
    Ok((took, bytes, checkpoint))
}

/// The bytes a checkpoint stores: the files `uploads` has it upload plus the inline ones.
fn stored_bytes(checkpoint: &StoreCheckpoint, uploads: &mut Uploads, id: u64) -> u64 {
    let plan = uploads.plan(CheckpointId(id), checkpoint);
    let len = |name: &String| {
        checkpoint
            .files
            .iter()
            .find(|f| &f.name == name)
            .map_or(0, |f| f.len)
    };
    plan.upload.iter().chain(&plan.inline).map(len).sum()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn run(args: &Args, dir: &Path) -> Result<(), String> {
    let rocksdb = || RocksBackend::new(StoreBudget::new(args.budget_mib << 20));
    let budget = || CacheBudget::new(args.cache_mib << 20);
    let backend: Box<dyn Backend> = match (args.backend, args.cache_mib) {
        (Which::Rocksdb, 0) => Box::new(rocksdb()),
        (Which::Memory, 0) => Box::new(MemoryBackend),
        (Which::Rocksdb, _) => Box::new(CachedBackend {
            inner: rocksdb(),
            budget: budget(),
        }),
        (Which::Memory, _) => Box::new(CachedBackend {
            inner: MemoryBackend,
            budget: budget(),
        }),
    };
    let mut store = backend
        .create(&dir.join("work"))
        .map_err(|e| e.to_string())?;
    let loaded = load(store.as_mut(), args.keys, args.batch);
    let mut seed = 42;
    let counted = count(
        store.as_mut(),
        args.keys,
        args.records,
        args.batch,
        &mut seed,
    );
    let mut uploads = Uploads::new();
    let (first_time, first_bytes, _) = checkpoint(store.as_mut(), dir, &mut uploads, 1)?;
    let changed = (args.keys as f64 * args.change_percent / 100.0) as u64;
    count(store.as_mut(), args.keys, changed, args.batch, &mut seed);
    let (second_time, second_bytes, second) = checkpoint(store.as_mut(), dir, &mut uploads, 2)?;
    let started = Instant::now();
    let mut restored = backend
        .open_checkpoint(&second.dir, &dir.join("restored"))
        .map_err(|e| e.to_string())?;
    let probe = store_key(args.keys / 2);
    restored.get(&probe).map_err(|e| e.to_string())?;
    let restore_time = started.elapsed();
    println!(
        "| {:?}{} | {} | {:.2} M/s | {:.2} M/s | {:.0} ms, {:.1} MiB | {:.0} ms, {:.2} MiB ({:.1} %) | {:.0} ms | {} |",
        args.backend,
        match args.cache_mib {
            0 => String::new(),
            n => format!(", cache of {n} MiB"),
        },
        args.keys,
        args.keys as f64 / loaded.as_secs_f64() / 1e6,
        args.records as f64 / counted.as_secs_f64() / 1e6,
        first_time.as_secs_f64() * 1e3,
        mib(first_bytes),
        second_time.as_secs_f64() * 1e3,
        mib(second_bytes),
        100.0 * second_bytes as f64 / first_bytes.max(1) as f64,
        restore_time.as_secs_f64() * 1e3,
        load_average().unwrap_or_else(|| "unknown".into()),
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let dir = match tempfile::TempDir::new() {
        Ok(dir) => dir,
        Err(e) => {
            eprintln!("state-bench: cannot create a temporary directory: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!(
        "| store | keys | load (keys/s) | count, {} records in batches of {} (records/s) | first checkpoint (time, stored) | after {} % of keys change (time, stored, of the first) | open from checkpoint, first read | load average |",
        args.records, args.batch, args.change_percent
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    match run(&args, dir.path()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("state-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
