#!/usr/bin/env bash
# Installs the Kubernetes schema validator the deployment test runs (tests/all/deployment.rs):
# PyPI's `kubernetes-validate`, at the version pinned in tests/kubernetes/requirements.txt, into
# the virtual environment tests/kubernetes/.venv (about 150 MB, seconds). Does nothing when that
# version is there. Creates the environment with `python3 -m venv`, installing Debian's
# python3-venv first when this Python lacks it (scripts/apt-install.sh); fails loudly, naming
# what to do, when it cannot.
#
# Prints one line on stdout (everything else goes to stderr): the path of the
# `kubernetes-validate` executable. The environment's `python` beside it has PyYAML, which the
# test uses to read the manifests.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/tests/kubernetes"
venv="$dir/.venv"
exe="$venv/bin/kubernetes-validate"
requirements="$dir/requirements.txt"
if [ ! -f "$requirements" ]; then
  echo "weir: $requirements is missing (it pins the validator: a line kubernetes-validate==VERSION)" >&2
  exit 1
fi
pinned="$(sed -n 's/^kubernetes-validate==\([^ ]*\).*/\1/p' "$requirements")"
if [ -z "$pinned" ]; then
  echo "weir: $requirements pins no kubernetes-validate version (a line kubernetes-validate==VERSION)" >&2
  exit 1
fi

# The installed version, from the package's metadata, when the validator and PyYAML import.
installed() {
  "$venv/bin/python" -c \
    'import importlib.metadata as m, kubernetes_validate, yaml; print(m.version("kubernetes-validate"))' \
    2>/dev/null
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
  bash "$root/scripts/apt-install.sh" \
    "the Kubernetes schema validator (Python, to install PyPI's kubernetes-validate)" \
    python3 python3-venv
fi
# A Python without ensurepip (Debian's python3 without python3-venv) creates no pip.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the Kubernetes schema validator (python3 -m venv)" \
    python3-venv
fi

echo "weir: installing the Kubernetes schema validator kubernetes-validate $pinned" \
     "(pip install 'kubernetes-validate==$pinned' into tests/kubernetes/.venv; seconds)" >&2
rm -rf "$venv"
if ! python3 -m venv "$venv" >&2; then
  echo "weir: python3 -m venv could not create tests/kubernetes/.venv: install Debian's" \
       "python3-venv (apt-get install -y python3-venv) and try again" >&2
  exit 1
fi
if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
     -r "$requirements" >&2; then
  echo "weir: pip could not install kubernetes-validate==$pinned from PyPI: run" \
       "\`tests/kubernetes/.venv/bin/pip install -r tests/kubernetes/requirements.txt\` and" \
       "fix what it reports" >&2
  exit 1
fi
got="$(installed || true)"
if [ "$got" != "$pinned" ]; then
  echo "weir: pip installed kubernetes-validate ${got:-(nothing, or without PyYAML)}," \
       "not the pinned $pinned" >&2
  exit 1
fi
if ! runnable; then
  echo "weir: pip installed kubernetes-validate $pinned, but" \
       "tests/kubernetes/.venv/bin/kubernetes-validate is missing or does not run" \
       "tests/kubernetes/.venv/bin/python: remove tests/kubernetes/.venv and run" \
       "\`bash scripts/install-kubernetes-validate.sh\` again" >&2
  exit 1
fi
echo "$exe"
