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
source "$root/scripts/lib/venv.sh"
venv_for "$root/tests/s3" requirements.txt 'moto[server]'
exe="$venv/bin/moto_server"

# The installed version, from the package's metadata, when the server's own modules (the
# `server` extra's Flask) import too.
installed() {
  "$venv/bin/python" -c \
    'import importlib.metadata as m, flask, flask_cors; print(m.version("moto"))' 2>/dev/null
}

if [ -x "$venv/bin/python" ] && [ "$(installed)" = "$pinned" ] && venv_runnable "$venv" "$exe"; then
  echo "$exe"
  exit 0
fi

venv_install "$venv" "$requirements" "the S3 test server moto $pinned (under a minute)"
venv_require_pinned moto "$(installed || true)" "$pinned" \
  "nothing, or without its server extra's Flask"
venv_require_runnable "$venv" "$exe" "moto $pinned" install-s3-server.sh
echo "$exe"
