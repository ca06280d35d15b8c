#!/usr/bin/env bash
# Installs what examples/c needs to build a wasm32 operator: clang and wasm-ld
# (Debian's packages `clang` and `lld`). Does nothing when both are there; fails
# loudly, naming what to install, when it cannot install them.
set -euo pipefail

have_toolchain() {
  command -v clang >/dev/null 2>&1 && command -v wasm-ld >/dev/null 2>&1
}

if have_toolchain; then
  exit 0
fi

missing="the C guest needs clang and wasm-ld (Debian/Ubuntu packages: clang lld)"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "weir: $missing, and this machine has no apt-get: install them with its package manager" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "weir: $missing; run as root: apt-get update && apt-get install -y clang lld" >&2
    exit 1
  fi
  sudo=(sudo -n)
fi

echo "weir: installing clang and lld for the C guest (apt-get install clang lld)" >&2
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get update -q \
   || ! "${sudo[@]}" apt-get install -y -q --no-install-recommends clang lld; then
  echo "weir: $missing, and apt-get could not install them: run apt-get install -y clang lld" >&2
  exit 1
fi
if ! have_toolchain; then
  echo "weir: apt-get installed clang and lld but clang or wasm-ld is still not on PATH" >&2
  exit 1
fi
