#!/usr/bin/env bash
# Builds a Python operator into a Weir component (abi/wit/operator.wit) with componentize-py:
#
#   bash guest-sdk/python/build.sh OUT.wasm OPERATOR.py[:ClassName]
#
# OPERATOR.py must define one weir.Operator subclass, or name the one to build after a colon.
# Relative paths are the caller's. Installs the pinned componentize-py first when it is missing
# (scripts/install-componentize-py.sh). Prints nothing on success but what componentize-py
# prints to stderr.
#
# The component holds the SDK (guest-sdk/python/weir), the operator file and what it imports:
# the standard library and the modules beside the operator file. No site-packages: the build
# does not depend on what the machine has installed. componentize-py runs the operator file's
# top-level code at build time and keeps its result in the component, so an import that fails
# (or a file with no operator class) fails the build.
#
# The world: `keyed-operator`, which imports the host's keyed state, when a Python file beside
# the operator (or below that directory) mentions ValueState; `operator` otherwise, so that an
# operator keeping no state on the host is given no store (componentize-py imports every
# function of its world, used or not).
set -euo pipefail
sdk="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$sdk/../.." && pwd)"
if [ $# -ne 2 ]; then
  echo "usage: bash guest-sdk/python/build.sh OUT.wasm OPERATOR.py[:ClassName]" >&2
  exit 2
fi
out="$1"
file="$2"
class=""
if [[ "$file" != *.py && "$file" == *:* ]]; then
  class="${file##*:}"
  file="${file%:*}"
  if ! [[ "$class" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
    echo "weir: \`$class\` (after the colon in $2) is not a Python class name" >&2
    exit 2
  fi
fi
if [[ "$file" != *.py ]] || [ ! -f "$file" ]; then
  echo "weir: $file is not a Python file (OPERATOR.py)" >&2
  exit 2
fi
operator_dir="$(cd "$(dirname "$file")" && pwd)"
operator_file="$(basename "$file")"
mkdir -p "$(dirname "$out")"
out="$(cd "$(dirname "$out")" && pwd)/$(basename "$out")"

world=operator
if grep -rqsw --include='*.py' ValueState "$operator_dir"; then
  world=keyed-operator
fi

bash "$root/scripts/install-componentize-py.sh"
venv="$sdk/.venv"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/app" "$work/no-venv/lib/python3/site-packages"
# The app module componentize-py wraps; the names are written with Python's repr.
"$venv/bin/python" - "$work/app/weir_app.py" "$operator_file" "$class" <<'PY'
import sys
path, operator_file, class_name = sys.argv[1:]
with open(path, "w") as f:
    f.write(
        '"""The app module of one operator\'s component, written by guest-sdk/python/build.sh."""\n'
        "from weir import _component\n"
        f"Guest = _component.guest_for_file(__file__, {operator_file!r}, {class_name or None!r})\n"
    )
PY
# The SDK first, so `weir` is always the SDK; then the app, then the operator's directory,
# which guest_for_file finds as the one after the app's. VIRTUAL_ENV names an environment with
# an empty site-packages: without it componentize-py would add the machine's. No Rust
# backtraces in componentize-py's error reports: the Python traceback is the useful part.
(cd "$work" && VIRTUAL_ENV="$work/no-venv" RUST_BACKTRACE=0 RUST_LIB_BACKTRACE=0 \
  "$venv/bin/componentize-py" -q -d "$root/abi/wit" -w "$world" componentize weir_app \
  -p "$sdk" -p "$work/app" -p "$operator_dir" -o "$out")
