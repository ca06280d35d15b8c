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
source "$root/scripts/lib/venv.sh"
venv_for "$root/tests/kafka" requirements.txt noida-db
wrapper="$venv/bin/noida-db"

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

venv_install "$venv" "$requirements" "the Kafka test broker noida-db $pinned"
venv_require_pinned noida-db "$(installed || true)" "$pinned"
if ! native; then
  echo "weir: pip installed noida-db $pinned, but its package has no native noida-db" \
       "executable (noida_db/noida-db in tests/kafka/.venv); is there a wheel for this" \
       "platform? (pip may have installed a source distribution)" >&2
  exit 1
fi
