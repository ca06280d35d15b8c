#!/usr/bin/env bash
# Builds the AssemblyScript count operator: assembly/index.ts -> a wasm module for Weir.
#
#   bash examples/assemblyscript/build.sh [OUT.wasm] [RUNTIME]
#
# OUT defaults to target/assemblyscript/count.wasm; RUNTIME is AssemblyScript's runtime, `stub`
# (the default: a bump allocator, what docs/ABI.md shows), `minimal` or `incremental` (a TLSF
# allocator and a garbage collector; the tests check that image checkpoints carry their state).
#
# Runs `npm ci` first when node_modules is missing or older than package-lock.json (the
# compiler, `assemblyscript`, is pinned there); fails loudly when node or npm is missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/assemblyscript/count.wasm}"
runtime="${2:-stub}"
case "$runtime" in
  stub | minimal | incremental) ;;
  *) echo "build.sh: unknown runtime '$runtime': use stub, minimal or incremental" >&2; exit 2 ;;
esac
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac

bash "$root/scripts/install-assemblyscript.sh"
mkdir -p "$(dirname "$out")"
cd "$here"
# The command of docs/ABI.md, "Languages: AssemblyScript".
node_modules/.bin/asc assembly/index.ts --outFile "$out" \
  --runtime "$runtime" --optimizeLevel 3 --shrinkLevel 0 --noColors
