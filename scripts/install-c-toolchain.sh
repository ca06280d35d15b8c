#!/usr/bin/env bash
# Installs what examples/c needs to build a wasm32 operator: clang and wasm-ld
# (Debian's packages `clang` and `lld`). Does nothing when both are there; fails
# loudly, naming what to install, when it cannot install them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

have_toolchain() {
  command -v clang >/dev/null 2>&1 && command -v wasm-ld >/dev/null 2>&1
}

if have_toolchain; then
  exit 0
fi
bash "$root/scripts/apt-install.sh" "the C guest (clang and wasm-ld)" clang lld
if ! have_toolchain; then
  echo "weir: apt-get installed clang and lld but clang or wasm-ld is still not on PATH" >&2
  exit 1
fi
