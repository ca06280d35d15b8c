#!/usr/bin/env bash
# Builds the C count written with the C library and no snapshot code: examples/c/image_count.c
# -> a wasm module that Weir checkpoints as an image (docs/ABI.md §14).
#
#   bash examples/c/build-libc.sh [OUT.wasm]      (default: target/c/image_count.wasm)
#
# Installs clang, lld, wasi-libc and clang's wasm32 builtins with apt-get first when they are
# missing (scripts/install-wasi-libc.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/c/image_count.wasm}"

bash "$root/scripts/install-wasi-libc.sh"
mkdir -p "$(dirname "$out")"
# The reactor model: `_initialize` runs the C constructors once, at instantiation.
clang --target=wasm32-wasi -mexec-model=reactor -O2 -std=c11 -Wall -Wextra -Werror \
  -o "$out" "$here/image_count.c"
