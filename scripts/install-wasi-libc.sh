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
# shellcheck disable=SC2086
bash "$root/scripts/apt-install.sh" "the C guest built with the C library" $packages
if ! links; then
  echo "weir: apt-get installed $packages but a test program still does not link for wasm32-wasi" >&2
  exit 1
fi
