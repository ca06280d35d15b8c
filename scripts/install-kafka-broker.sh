#!/usr/bin/env bash
# Installs the Kafka broker the end-to-end tests run (tests/all/kafka/mod.rs): PyPI's `noida-db`, a
# single-broker Kafka-protocol emulator, at the version pinned in tests/kafka/requirements.txt,
# into the virtual environment tests/kafka/.venv (about 40 MB). Does nothing when that version
# is there. Creates the environment with `python3 -m venv`, installing Debian's python3-venv
# first when this Python lacks it (scripts/apt-install.sh); fails loudly, naming what to do,
# when it cannot.
#
# Prints one line on stdout (everything else goes to stderr): the path of the broker's native
# executable inside the package. Run that, not the `tests/kafka/.venv/bin/noida-db` wrapper: the
# wrapper is a Python script that starts the executable as its child and does not pass signals
# on, so killing the wrapper leaves the broker running.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/tests/kafka"
venv="$dir/.venv"
wrapper="$venv/bin/noida-db"
requirements="$dir/requirements.txt"
if [ ! -f "$requirements" ]; then
  echo "weir: $requirements is missing (it pins the broker: a line noida-db==VERSION)" >&2
  exit 1
fi
pinned="$(sed -n 's/^noida-db==\([^ ]*\).*/\1/p' "$requirements")"
if [ -z "$pinned" ]; then
  echo "weir: $requirements pins no noida-db version (a line noida-db==VERSION)" >&2
  exit 1
fi

# The installed version, from the package's metadata.
installed() {
  "$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("noida-db"))' \
    2>/dev/null
}

# The native executable the wrapper runs (where its noida_db/cli.py finds it), made executable
# as the wrapper does; fails when it is not there.
native() {
  local exe
  exe="$("$venv/bin/python" -c \
    'from importlib.resources import files; print(files("noida_db").joinpath("noida-db"))')" \
    && [ -f "$exe" ] && chmod 755 "$exe" && echo "$exe"
}

if [ -x "$wrapper" ] && [ -x "$venv/bin/python" ] && [ "$(installed)" = "$pinned" ] \
   && native; then
  exit 0
fi

if ! command -v python3 >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the Kafka test broker (Python, to install PyPI's noida-db)" \
    python3 python3-venv
fi
# A Python without ensurepip (Debian's python3 without python3-venv) creates no pip.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the Kafka test broker (python3 -m venv)" python3-venv
fi

echo "weir: installing the Kafka test broker noida-db $pinned (pip install noida-db==$pinned" \
     "into tests/kafka/.venv)" >&2
rm -rf "$venv"
if ! python3 -m venv "$venv" >&2; then
  echo "weir: python3 -m venv could not create tests/kafka/.venv: install Debian's" \
       "python3-venv (apt-get install -y python3-venv) and try again" >&2
  exit 1
fi
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
     -r "$requirements" >&2; then
  echo "weir: pip could not install noida-db==$pinned from PyPI: run" \
       "\`tests/kafka/.venv/bin/pip install -r tests/kafka/requirements.txt\` and fix what" \
       "it reports" >&2
  exit 1
fi
got="$(installed || true)"
if [ "$got" != "$pinned" ]; then
  echo "weir: pip installed noida-db ${got:-(nothing)}, not the pinned $pinned" >&2
  exit 1
fi
if ! native; then
  echo "weir: pip installed noida-db $pinned, but its package has no native noida-db" \
       "executable (noida_db/noida-db in tests/kafka/.venv); is there a wheel for this" \
       "platform? (pip may have installed a source distribution)" >&2
  exit 1
fi
