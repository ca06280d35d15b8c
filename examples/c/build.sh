#!/usr/bin/env bash
# Builds the C count operator: examples/c/count.c -> a wasm module for Weir.
#
#   bash examples/c/build.sh [OUT.wasm]      (default: target/c/count.wasm)
#
# Installs clang and lld with apt-get first when they are missing
# (scripts/install-c-toolchain.sh). No libc: weir.h and count.c are freestanding.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/c/count.wasm}"

bash "$root/scripts/install-c-toolchain.sh"
mkdir -p "$(dirname "$out")"
# The command of docs/ABI.md, "Languages: C", plus warnings as errors.
clang --target=wasm32 -O2 -std=c11 -Wall -Wextra -Werror \
  -ffreestanding -nostdlib -mbulk-memory -Wl,--no-entry \
  -o "$out" "$here/count.c"
