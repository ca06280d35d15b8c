#!/usr/bin/env bash
# Installs the AssemblyScript compiler examples/assemblyscript needs: the npm package
# `assemblyscript`, at the version pinned in its package-lock.json, into
# examples/assemblyscript/node_modules. Does nothing when it is there and up to date; fails
# loudly, naming what to install, when node or npm is missing or npm cannot install it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/examples/assemblyscript"
source "$root/scripts/lib/node.sh"

require_node "the AssemblyScript compiler" 20
if npm_installed "$dir" node_modules/.bin/asc; then
  exit 0
fi
npm_ci "$dir" "the AssemblyScript compiler"
