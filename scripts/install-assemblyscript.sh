#!/usr/bin/env bash
# Installs the AssemblyScript compiler examples/assemblyscript needs: the npm package
# `assemblyscript`, at the version pinned in its package-lock.json, into
# examples/assemblyscript/node_modules. Does nothing when it is there and up to date; fails
# loudly, naming what to install, when node or npm is missing or npm cannot install it.
set -euo pipefail
dir="$(cd "$(dirname "$0")/../examples/assemblyscript" && pwd)"

for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "weir: the AssemblyScript guest needs Node.js 20 or newer with npm, and \`$tool\` is" \
         "not on PATH: install them (Debian: apt-get install -y nodejs npm)" >&2
    exit 1
  fi
done
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "weir: the AssemblyScript compiler needs Node.js 20 or newer; this is $(node --version)" >&2
  exit 1
fi

installed="$dir/node_modules/.package-lock.json"
if [ -x "$dir/node_modules/.bin/asc" ] && [ -f "$installed" ] \
   && ! [ "$dir/package-lock.json" -nt "$installed" ]; then
  exit 0
fi
echo "weir: installing the AssemblyScript compiler (npm ci in examples/assemblyscript)" >&2
if ! (cd "$dir" && npm ci --no-audit --no-fund); then
  echo "weir: npm could not install the AssemblyScript compiler: run \`npm ci\` in" \
       "examples/assemblyscript and fix what it reports" >&2
  exit 1
fi
