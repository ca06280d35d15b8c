#!/usr/bin/env bash
# The demo: builds what it needs (the wasm target, the example operators, the
# `weir` binary) and runs the word-count job of examples/jobs/wordcount.toml
# with checkpoints on local files, then shows what it wrote.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-guests.sh
cargo build --release -p weir
job=examples/jobs/wordcount.toml
out=examples/jobs/out/wordcount
# A fresh start each time, so the output below is this run's.
rm -rf "$out" examples/jobs/checkpoints/wordcount
./target/release/weir run "$job"
echo
echo "== committed output in $out (word, running count); the ten most frequent words:"
cat "$out"/part-* | sort -t$'\t' -k2,2nr | awk -F'\t' '!seen[$1]++' | head -10
echo
echo "== checkpoints in examples/jobs/checkpoints/wordcount:"
ls examples/jobs/checkpoints/wordcount
