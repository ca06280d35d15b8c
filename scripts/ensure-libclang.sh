#!/usr/bin/env bash
# Installs libclang when it is missing: the RocksDB of host-kept keyed state (docs/STATE.md) is
# built from source, and its bindings are generated at build time by bindgen, which loads
# libclang. Debian's `libclang-dev` provides the `libclang.so` it looks for; a machine with only
# the versioned library (`libclang.so.1`, as clang's runtime packages leave) does not have it.
set -euo pipefail
have_libclang() {
  local dir
  for dir in ${LIBCLANG_PATH:-} /usr/lib/llvm-*/lib /usr/lib/x86_64-linux-gnu /usr/lib/aarch64-linux-gnu \
             /usr/lib64 /usr/lib /usr/local/lib; do
    compgen -G "$dir/libclang.so" >/dev/null || compgen -G "$dir/libclang-*.so" >/dev/null && return 0
  done
  return 1
}
if ! have_libclang; then
  bash "$(dirname "$0")/apt-install.sh" "building RocksDB (host-kept state; bindgen loads libclang)" libclang-dev
fi
