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
source "$root/scripts/lib/venv.sh"
venv_for "$root/examples/zig" requirements.txt ziglang

if [ -x "$venv/bin/python" ] \
   && [ "$("$venv/bin/python" -m ziglang version 2>/dev/null)" = "$pinned" ]; then
  exit 0
fi

venv_install "$venv" "$requirements" "Zig $pinned"
venv_require_pinned Zig "$("$venv/bin/python" -m ziglang version)" "$pinned"
