#!/usr/bin/env bash
# Installs Debian packages for a build that needs them, loudly: as root, or through `sudo -n`.
#
#   bash scripts/apt-install.sh "WHAT NEEDS THEM" PACKAGE...
#
# Fails with a message naming the packages and the command to run by hand when this machine
# has no apt-get, no root and no password-less sudo, or when apt-get fails.
set -euo pipefail
why="$1"
shift
packages="$*"
missing="$why needs the Debian packages: $packages"
if ! command -v apt-get >/dev/null 2>&1; then
  echo "weir: $missing, and this machine has no apt-get: install them with its package manager" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "weir: $missing; run as root: apt-get update && apt-get install -y $packages" >&2
    exit 1
  fi
  sudo=(sudo -n)
fi
echo "weir: installing $packages for $why (apt-get install)" >&2
export DEBIAN_FRONTEND=noninteractive
# The package names are separate words on purpose.
# shellcheck disable=SC2086
if ! "${sudo[@]}" apt-get update -q \
   || ! "${sudo[@]}" apt-get install -y -q --no-install-recommends $packages; then
  echo "weir: $missing, and apt-get could not install them: run apt-get install -y $packages" >&2
  exit 1
fi
