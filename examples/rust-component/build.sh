#!/usr/bin/env bash
# Builds the Rust count component: examples/rust-component -> a WebAssembly component for
# Weir's component front door.
#
#   bash examples/rust-component/build.sh [OUT.wasm]   (default: target/rust-component/count.wasm)
#
# A relative OUT is taken from the caller's directory. Cargo builds into CARGO_TARGET_DIR,
# target/rust-component-build under the repository unless the environment sets it. Adds the
# Rust target wasm32-wasip2 first when it is missing, as scripts/ensure-wasm-target.sh does for
# wasm32-unknown-unknown: a wasm32-wasip2 cdylib is a component, linked by wasm-component-ld.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target=wasm32-wasip2
crate=weir_example_rust_component

fail() {
  echo "rust-component: $*" >&2
  exit 1
}

absolute() {
  case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac
}

out="$(absolute "${1:-$root/target/rust-component/count.wasm}")"
CARGO_TARGET_DIR="$(absolute "${CARGO_TARGET_DIR:-$root/target/rust-component-build}")"
export CARGO_TARGET_DIR

if ! rustc --print target-libdir --target "$target" >/dev/null 2>&1 \
   || [ ! -d "$(rustc --print target-libdir --target "$target")" ]; then
  echo "rust-component: installing the Rust target $target (rustup target add $target)" >&2
  rustup target add "$target" || fail "could not add the Rust target $target"
fi

cd "$here"
cargo build --release --locked --target "$target" \
  || fail "cargo build --release --target $target failed in $here"
wasm="$CARGO_TARGET_DIR/$target/release/$crate.wasm"
[ -f "$wasm" ] || fail "cargo built no $wasm"
mkdir -p "$(dirname "$out")" || fail "cannot create the folder of $out"
cp "$wasm" "$out" || fail "cannot copy $wasm to $out"
echo "rust-component: $out ($(wc -c <"$out") bytes)"
