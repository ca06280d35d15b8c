#!/usr/bin/env bash
# Installs what examples/c/build-libc.sh needs on top of clang and wasm-ld: the C library for
# wasm32 (Debian's `wasi-libc`) and clang's runtime builtins for wasm32
# (`libclang-rt-14-dev-wasm32`). Does nothing when a test compile links; fails loudly, naming
# what to install, when it cannot install them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/scripts/install-c-toolchain.sh"

links() {
  local dir
  dir="$(mktemp -d)"
  printf '#include <stdlib.h>\nvoid *f(unsigned n) { return malloc(n); }\n' > "$dir/t.c"
  clang --target=wasm32-wasi -mexec-model=reactor -O2 -o "$dir/t.wasm" "$dir/t.c" \
    >/dev/null 2>&1
  local ok=$?
  rm -rf "$dir"
  return $ok
}

if links; then
  exit 0
fi

packages="wasi-libc libclang-rt-14-dev-wasm32"
missing="the C guest built with the C library needs wasi-libc and clang's wasm32 builtins (Debian packages: $packages)"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "weir: $missing, and this machine has no apt-get: install them with its package manager" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "weir: $missing; run as root: apt-get update && apt-get install -y $packages" >&2
    exit 1
  fi
  sudo=(sudo -n)
fi

echo "weir: installing $packages for the C guest built with the C library" >&2
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
if ! "${sudo[@]}" apt-get update -q \
   || ! "${sudo[@]}" apt-get install -y -q --no-install-recommends $packages; then
  echo "weir: $missing, and apt-get could not install them: run apt-get install -y $packages" >&2
  exit 1
fi
if ! links; then
  echo "weir: apt-get installed $packages but a test program still does not link for wasm32-wasi" >&2
  exit 1
fi
