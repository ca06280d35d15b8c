#!/usr/bin/env bash
# Makes sure a Chromium the dashboard's browser test can drive is installed
# (tests/all/dashboard.rs loads the dashboard of a real job in headless
# Chromium). Looks for `chromium`, `chromium-browser` and `google-chrome` on the
# PATH; when none is there, installs Debian's `chromium` package (and
# fonts-liberation, so pages render with ordinary fonts) with apt-get
# (as root, or through sudo), saying so. Exits non-zero, with the reason, when it
# cannot. Names the browser it found or installed (on stderr).
set -euo pipefail

find_chromium() {
  local name
  for name in chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

if found=$(find_chromium); then
  echo "weir: chromium for the dashboard test: $found" >&2
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "weir: ERROR: no chromium, chromium-browser or google-chrome on the PATH, and no apt-get to install one;" >&2
  echo "weir: install Chromium yourself (the dashboard browser test needs it)" >&2
  exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  echo "weir: ERROR: chromium is missing and installing it needs root: run" >&2
  echo "weir:   apt-get update && apt-get install -y chromium" >&2
  echo "weir: as root (the dashboard browser test needs it)" >&2
  exit 1
fi

echo "weir: ========================================================================" >&2
echo "weir: chromium is missing: INSTALLING Debian's 'chromium' package with apt-get" >&2
echo "weir: (the dashboard browser test in tests/all/dashboard.rs needs it)" >&2
echo "weir: ========================================================================" >&2
export DEBIAN_FRONTEND=noninteractive
# The package lists may be missing or stale on a fresh machine: refresh them when
# the package is unknown, or when the first install attempt fails.
if ! apt-cache show chromium >/dev/null 2>&1; then
  echo "weir: apt-get update (the package lists do not know chromium)" >&2
  "${as_root[@]}" apt-get update -q >&2
fi
if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium fonts-liberation >&2; then
  echo "weir: apt-get install failed; refreshing the package lists and trying again" >&2
  "${as_root[@]}" apt-get update -q >&2
  if ! "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium fonts-liberation >&2; then
    echo "weir: ERROR: could not install chromium with apt-get (see above)" >&2
    exit 1
  fi
fi

if found=$(find_chromium); then
  echo "weir: installed chromium: $found" >&2
  exit 0
fi
echo "weir: ERROR: apt-get installed chromium but no chromium is on the PATH" >&2
exit 1
