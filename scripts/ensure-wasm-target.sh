#!/usr/bin/env bash
# Adds the wasm32-unknown-unknown Rust target when it is missing: the example
# guests and the tests need it, and a fresh machine does not have it.
set -euo pipefail
target=wasm32-unknown-unknown
if ! rustc --print target-libdir --target "$target" >/dev/null 2>&1 \
   || [ ! -d "$(rustc --print target-libdir --target "$target")" ]; then
  echo "weir: installing the Rust target $target (rustup target add $target)" >&2
  rustup target add "$target"
fi
