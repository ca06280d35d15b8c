#!/usr/bin/env bash
# Runs Weir's benchmark suite from release builds and writes every result to one JSON file
# (target/bench-results.json unless WEIR_BENCH_OUT says otherwise); docs/BENCHMARKS.md explains
# what is measured and shows the numbers of the last recorded run.
#
#   bash scripts/bench.sh                  # the whole suite; its job runs of 20 s or more are the longest part (8 cases took 17 min in BENCHMARKS §2)
#   bash scripts/bench.sh --min-seconds 0 --records 1000000 --state-bytes 1000000 --runs 1   # a quick pass
#
# Arguments are passed to runtime-bench (`cargo run -p weir-benches --bin runtime-bench --
# --help`). WEIR_BENCH_REPS (default 3) sets how many times the criterion suite is repeated:
# each repetition is saved as a criterion baseline run1, run2, …, and the JSON file holds the
# median and spread over them. Other work on the machine skews the numbers: the load is
# recorded before and after.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/lib/host-build.sh

# Absolute, because criterion runs with the bench crate as its working directory.
CARGO_TARGET_DIR="$(realpath -m "${CARGO_TARGET_DIR:-target}")"
export CARGO_TARGET_DIR
reps="${WEIR_BENCH_REPS:-3}"
out="$(realpath -m "${WEIR_BENCH_OUT:-$CARGO_TARGET_DIR/bench-results.json}")"

echo "== load before: $(cat /proc/loadavg)"
# The start-up benchmark runs the release `weir` binary as a child process.
cargo build --release -p weir --bin weir -p weir-benches --bin runtime-bench
cargo bench -p weir-benches --bench guest_call --no-run
baselines=()
for i in $(seq 1 "$reps"); do
  echo "== guest_call, repetition $i of $reps (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  cargo bench -p weir-benches --bench guest_call -- --save-baseline "run$i"
  baselines+=("run$i")
done
echo "== runtime-bench (load: $(cut -d' ' -f1-3 /proc/loadavg))"
cargo run --release -p weir-benches --bin runtime-bench -- \
  --json "$out" --criterion "$CARGO_TARGET_DIR/criterion" \
  --baselines "$(IFS=,; echo "${baselines[*]}")" "$@"
echo "== load after: $(cat /proc/loadavg)"
