//! The measurements behind the threading model (docs/ARCHITECTURE.md): what it
//! costs to move one batch between two tasks, and what it costs to run one
//! guest call on tokio's blocking pool instead of on the task's own thread.
//!
//! Run with `cargo bench -p weir --bench threading`.

// criterion's macros generate undocumented functions.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};

/// A batch of the size the router sends (32 KiB).
fn batch() -> Vec<u8> {
    vec![7u8; 32 * 1024]
}

/// Stands in for a guest call on a batch: touches every byte once.
fn work(batch: &[u8]) -> u64 {
    batch.iter().map(|&b| u64::from(b)).sum()
}

/// Dedicated threads with a bounded crossbeam channel (Weir's model): a
/// producer thread sends batches, the consumer works on each.
fn thread_handoff(n: u64) -> Duration {
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(16);
    let started = Instant::now();
    let producer = std::thread::spawn(move || {
        for _ in 0..n {
            tx.send(batch()).unwrap();
        }
    });
    let mut sum = 0;
    for b in rx.iter() {
        sum += work(&b);
    }
    producer.join().unwrap();
    black_box(sum);
    started.elapsed()
}

/// tokio tasks with a bounded mpsc channel. With `blocking`, each batch's work
/// moves to the blocking pool with `spawn_blocking` (what keeping guest calls
/// off the reactor costs in that model); without it, the work runs inline on
/// the async worker: the fastest tokio variant, and the one Weir must not use,
/// since a guest call may take up to its call timeout and would block the reactor.
fn tokio_handoff(rt: &tokio::runtime::Runtime, n: u64, blocking: bool) -> Duration {
    rt.block_on(async move {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<u8>>(16);
        let started = Instant::now();
        let producer = tokio::spawn(async move {
            for _ in 0..n {
                tx.send(batch()).await.unwrap();
            }
        });
        let mut sum = 0;
        while let Some(b) = rx.recv().await {
            sum += if blocking {
                tokio::task::spawn_blocking(move || work(&b)).await.unwrap()
            } else {
                work(&b)
            };
        }
        producer.await.unwrap();
        black_box(sum);
        started.elapsed()
    })
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let mut group = c.benchmark_group("batch handoff (32 KiB)");
    group.bench_function("threads + crossbeam", |b| b.iter_custom(thread_handoff));
    group.bench_function("tokio + spawn_blocking per batch", |b| {
        b.iter_custom(|n| tokio_handoff(&rt, n, true))
    });
    group.bench_function("tokio inline (blocks the reactor)", |b| {
        b.iter_custom(|n| tokio_handoff(&rt, n, false))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
