#!/usr/bin/env bash
# Builds the Zig count operator: examples/zig/count.zig -> a wasm module for Weir.
#
#   bash examples/zig/build.sh [OUT.wasm]      (default: target/zig/count.wasm)
#
# Installs the pinned Zig into examples/zig/.venv first when it is missing
# (scripts/install-zig.sh). No WASI: weir.zig and count.zig are freestanding.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/zig/count.wasm}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

bash "$root/scripts/install-zig.sh"
mkdir -p "$(dirname "$out")"
cd "$here"
# The command of docs/ABI.md, "Languages: Zig", with the caches kept in examples/zig.
.venv/bin/python -m ziglang build-exe count.zig -target wasm32-freestanding -fno-entry \
  -rdynamic -O ReleaseSmall --cache-dir .zig-cache --global-cache-dir .zig-cache/global \
  -femit-bin="$out"
