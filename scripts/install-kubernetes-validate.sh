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
source "$root/scripts/lib/venv.sh"
venv_for "$root/tests/kubernetes" requirements.txt kubernetes-validate
exe="$venv/bin/kubernetes-validate"

# The installed version, from the package's metadata, when the validator and PyYAML import.
installed() {
  "$venv/bin/python" -c \
    'import importlib.metadata as m, kubernetes_validate, yaml; print(m.version("kubernetes-validate"))' \
    2>/dev/null
}

if [ -x "$venv/bin/python" ] && [ "$(installed)" = "$pinned" ] && venv_runnable "$venv" "$exe"; then
  echo "$exe"
  exit 0
fi

venv_install "$venv" "$requirements" \
  "the Kubernetes schema validator kubernetes-validate $pinned (seconds)"
venv_require_pinned kubernetes-validate "$(installed || true)" "$pinned" \
  "nothing, or without PyYAML"
venv_require_runnable "$venv" "$exe" "kubernetes-validate $pinned" \
  install-kubernetes-validate.sh
echo "$exe"
