#!/usr/bin/env bash
# Installs componentize-py, which builds Python operators into WebAssembly components: PyPI's
# `componentize-py` package, at the version pinned in guest-sdk/python/requirements-build.txt,
# into the virtual environment guest-sdk/python/.venv (about 70 MB). Does nothing when that
# version is there. Creates the environment with `python3 -m venv`, installing Debian's
# python3-venv first when this Python lacks it (scripts/apt-install.sh); fails loudly, naming
# what to install, when it cannot.
#
# Afterwards the tool is `guest-sdk/python/.venv/bin/componentize-py` (what
# guest-sdk/python/build.sh runs).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/lib/venv.sh"
venv_for "$root/guest-sdk/python" requirements-build.txt componentize-py

if [ -x "$venv/bin/componentize-py" ] \
   && [ "$("$venv/bin/componentize-py" --version 2>/dev/null)" = "componentize-py $pinned" ]; then
  exit 0
fi

venv_install "$venv" "$requirements" "componentize-py $pinned for the Python guest SDK"
got="$("$venv/bin/componentize-py" --version)"
venv_require_pinned componentize-py "${got#componentize-py }" "$pinned"
