#!/usr/bin/env bash
# Benchmarks the count as a component — Python, JavaScript, Rust for WASI 0.2 — beside the
# core-module Rust count, from release builds (docs/BENCHMARKS.md §7):
#
#   bash scripts/bench-components.sh [RECORDS]        (default 2000000 records per job run)
#
# 1. component-bench, one process per module: compile time into an empty module cache and the
#    peak RSS it reached, the cached load, instantiation, records/s through `process` alone,
#    and snapshot and restore with 10 000 and 1 000 000 keys. One JSON line per module.
# 2. runtime-bench: the keyed-count job of §2 (generator → key-hash → count → blackhole) at
#    parallelism 1, checkpoints every second, with each count in the same run.
#
# Builds the components with their SDKs' scripts (which install componentize-py and
# componentize-js when missing) into target/bench-components. Results go to
# target/bench-components.json (module costs, one object per line) and
# target/bench-components-jobs.json (runtime-bench). Run it on a quiet machine: the load is
# printed before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
records="${1:-2000000}"
out_dir="$root/target/bench-components"
mkdir -p "$out_dir"

bash guest-sdk/python/build.sh "$out_dir/py-count.wasm" examples/python/count/count.py
bash guest-sdk/js/build.sh "$out_dir/js-count.wasm" examples/js/count/count.js
bash examples/rust-component/build.sh "$out_dir/rust-component-count.wasm"
source scripts/lib/host-build.sh
cargo build --release -p weir-benches --bin component-bench --bin runtime-bench

echo "== load before: $(cat /proc/loadavg)"
modules="$root/target/bench-components.json"
: > "$modules"
for name in rust-count rust-component-count py-count js-count; do
  # `-`: the core-module count component-bench was built with.
  if [ "$name" = rust-count ]; then module=-; else module="$out_dir/$name.wasm"; fi
  echo "== component-bench $name (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  target/release/component-bench "$name" "$module" >> "$modules"
done
echo "== runtime-bench (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
WEIR_BENCH_PY_COUNT="$out_dir/py-count.wasm" \
WEIR_BENCH_JS_COUNT="$out_dir/js-count.wasm" \
WEIR_BENCH_RUST_COMPONENT_COUNT="$out_dir/rust-component-count.wasm" \
  target/release/runtime-bench --records "$records" --runs 3 \
    --operators count,rust-component-count,py-count,js-count --parallelism 1 \
    --intervals-ms 1000 --no-state --no-startup --json "$root/target/bench-components-jobs.json"
echo "== load after: $(cat /proc/loadavg)"
