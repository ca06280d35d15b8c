#!/usr/bin/env bash
# Installs the S3 server the object-storage tests run (tests/all/object_storage/mod.rs): PyPI's
# `moto` with its `server` extra, at the version pinned in tests/s3/requirements.txt, into the
# virtual environment tests/s3/.venv (about 300 MB, under a minute). Does nothing when that version
# is there. Creates the environment with `python3 -m venv`, installing Debian's python3-venv first
# when this Python lacks it (scripts/apt-install.sh); fails loudly, naming what to do, when it
# cannot.
#
# Prints one line on stdout (everything else goes to stderr): the path of the `moto_server`
# executable, a Python script that serves in its own process (signals reach the server).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/tests/s3"
venv="$dir/.venv"
exe="$venv/bin/moto_server"
requirements="$dir/requirements.txt"
if [ ! -f "$requirements" ]; then
  echo "weir: $requirements is missing (it pins the server: a line moto[server]==VERSION)" >&2
  exit 1
fi
pinned="$(sed -n 's/^moto\[server\]==\([^ ]*\).*/\1/p' "$requirements")"
if [ -z "$pinned" ]; then
  echo "weir: $requirements pins no moto version (a line moto[server]==VERSION)" >&2
  exit 1
fi

# The installed version, from the package's metadata, when the server's own modules (the
# `server` extra's Flask) import too.
installed() {
  "$venv/bin/python" -c \
    'import importlib.metadata as m, flask, flask_cors; print(m.version("moto"))' 2>/dev/null
}

# Whether the executable runs this environment's Python: pip writes the environment's path
# into its first line, so an environment that was moved or copied has an executable that
# cannot start.
runnable() {
  [ -x "$exe" ] && [ "$(head -n 1 "$exe")" = "#!$venv/bin/python" ]
}

if [ -x "$venv/bin/python" ] && [ "$(installed)" = "$pinned" ] && runnable; then
  echo "$exe"
  exit 0
fi

if ! command -v python3 >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the S3 test server (Python, to install PyPI's moto)" \
    python3 python3-venv
fi
# A Python without ensurepip (Debian's python3 without python3-venv) creates no pip.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the S3 test server (python3 -m venv)" python3-venv
fi

echo "weir: installing the S3 test server moto $pinned (pip install 'moto[server]==$pinned'" \
     "into tests/s3/.venv; under a minute)" >&2
rm -rf "$venv"
if ! python3 -m venv "$venv" >&2; then
  echo "weir: python3 -m venv could not create tests/s3/.venv: install Debian's" \
       "python3-venv (apt-get install -y python3-venv) and try again" >&2
  exit 1
fi
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
     -r "$requirements" >&2; then
  echo "weir: pip could not install moto[server]==$pinned from PyPI: run" \
       "\`tests/s3/.venv/bin/pip install -r tests/s3/requirements.txt\` and fix what it" \
       "reports" >&2
  exit 1
fi
got="$(installed || true)"
if [ "$got" != "$pinned" ]; then
  echo "weir: pip installed moto ${got:-(nothing, or without Flask)}," \
       "not the pinned $pinned with its server extra" >&2
  exit 1
fi
if ! runnable; then
  echo "weir: pip installed moto $pinned, but tests/s3/.venv/bin/moto_server is missing or" \
       "does not run tests/s3/.venv/bin/python: remove tests/s3/.venv and run" \
       "\`bash scripts/install-s3-server.sh\` again" >&2
  exit 1
fi
echo "$exe"
