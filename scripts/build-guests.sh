#!/usr/bin/env bash
# Builds the example operators for wasm32-unknown-unknown into
# target/wasm32-unknown-unknown/release/, where examples/jobs/*.toml expect them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-wasm-target.sh
cargo build --release --target wasm32-unknown-unknown \
  -p weir-example-split -p weir-example-count -p weir-example-dedup -p weir-example-uppercase \
  -p weir-example-window
