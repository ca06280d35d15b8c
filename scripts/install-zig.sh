#!/usr/bin/env bash
# Installs the Zig compiler examples/zig needs: PyPI's `ziglang` package, at the version pinned
# in examples/zig/requirements.txt, into the virtual environment examples/zig/.venv (about
# 450 MB). Does nothing when that version is there. Creates the environment with
# `python3 -m venv`, installing Debian's python3-venv first when this Python lacks it
# (scripts/apt-install.sh); fails loudly, naming what to install, when it cannot.
#
# Afterwards the compiler is `examples/zig/.venv/bin/python -m ziglang` (what
# examples/zig/build.sh runs).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/examples/zig"
venv="$dir/.venv"
requirements="$dir/requirements.txt"
pinned="$(sed -n 's/^ziglang==\([^ ]*\).*/\1/p' "$requirements")"
if [ -z "$pinned" ]; then
  echo "weir: $requirements pins no ziglang version (a line ziglang==VERSION)" >&2
  exit 1
fi

if [ -x "$venv/bin/python" ] \
   && [ "$("$venv/bin/python" -m ziglang version 2>/dev/null)" = "$pinned" ]; then
  exit 0
fi

if ! command -v python3 >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the Zig guest (Python, to install PyPI's ziglang)" \
    python3 python3-venv
fi
# A Python without ensurepip (Debian's python3 without python3-venv) creates no pip.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the Zig guest (python3 -m venv)" python3-venv
fi

echo "weir: installing Zig $pinned (pip install ziglang==$pinned into examples/zig/.venv)" >&2
rm -rf "$venv"
if ! python3 -m venv "$venv" >&2; then
  echo "weir: python3 -m venv could not create examples/zig/.venv: install Debian's" \
       "python3-venv (apt-get install -y python3-venv) and try again" >&2
  exit 1
fi
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
     -r "$requirements" >&2; then
  echo "weir: pip could not install ziglang==$pinned from PyPI: run" \
       "\`examples/zig/.venv/bin/pip install -r examples/zig/requirements.txt\` and fix what" \
       "it reports" >&2
  exit 1
fi
got="$("$venv/bin/python" -m ziglang version)"
if [ "$got" != "$pinned" ]; then
  echo "weir: pip installed Zig $got, not the pinned $pinned" >&2
  exit 1
fi
