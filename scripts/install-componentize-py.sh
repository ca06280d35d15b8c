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
dir="$root/guest-sdk/python"
venv="$dir/.venv"
requirements="$dir/requirements-build.txt"
pinned="$(sed -n 's/^componentize-py==\([^ ]*\).*/\1/p' "$requirements")"
if [ -z "$pinned" ]; then
  echo "weir: $requirements pins no componentize-py version (a line componentize-py==VERSION)" >&2
  exit 1
fi

if [ -x "$venv/bin/componentize-py" ] \
   && [ "$("$venv/bin/componentize-py" --version 2>/dev/null)" = "componentize-py $pinned" ]; then
  exit 0
fi

if ! command -v python3 >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the Python guest SDK (Python, to install PyPI's componentize-py)" \
    python3 python3-venv
fi
# A Python without ensurepip (Debian's python3 without python3-venv) creates no pip.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the Python guest SDK (python3 -m venv)" python3-venv
fi

echo "weir: installing componentize-py $pinned (pip install componentize-py==$pinned into" \
     "guest-sdk/python/.venv)" >&2
rm -rf "$venv"
if ! python3 -m venv "$venv" >&2; then
  echo "weir: python3 -m venv could not create guest-sdk/python/.venv: install Debian's" \
       "python3-venv (apt-get install -y python3-venv) and try again" >&2
  exit 1
fi
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
     -r "$requirements" >&2; then
  echo "weir: pip could not install componentize-py==$pinned from PyPI: run" \
       "\`guest-sdk/python/.venv/bin/pip install -r guest-sdk/python/requirements-build.txt\`" \
       "and fix what it reports" >&2
  exit 1
fi
got="$("$venv/bin/componentize-py" --version)"
if [ "$got" != "componentize-py $pinned" ]; then
  echo "weir: pip installed $got, not the pinned componentize-py $pinned" >&2
  exit 1
fi
