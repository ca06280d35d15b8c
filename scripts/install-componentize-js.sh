#!/usr/bin/env bash
# Installs what the JavaScript guest SDK (guest-sdk/js) needs to build components and run its
# tests: the npm packages pinned in its package-lock.json — componentize-js, rolldown, jco and
# preview2-shim — into guest-sdk/js/node_modules. Does nothing when they are there and up to
# date; installs Node.js and npm from Debian (scripts/apt-install.sh) when they are missing;
# fails loudly, naming what to do, when Node.js is too old or npm cannot install the packages.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/guest-sdk/js"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the JavaScript guest SDK (guest-sdk/js)" nodejs npm
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "weir: the JavaScript guest SDK needs Node.js 20 or newer with npm, and \`$tool\` is" \
         "still not on PATH: install them (Debian: apt-get install -y nodejs npm)" >&2
    exit 1
  fi
done
major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$major" -lt 20 ]; then
  echo "weir: the JavaScript guest SDK needs Node.js 20 or newer; this is $(node --version):" \
       "install a newer nodejs" >&2
  exit 1
fi

installed="$dir/node_modules/.package-lock.json"
if [ -f "$dir/node_modules/@bytecodealliance/componentize-js/package.json" ] \
   && [ -f "$installed" ] && ! [ "$dir/package-lock.json" -nt "$installed" ]; then
  exit 0
fi
echo "weir: installing componentize-js and the JavaScript SDK's tools (npm ci in guest-sdk/js)" >&2
if ! (cd "$dir" && npm ci --no-audit --no-fund); then
  echo "weir: npm could not install the JavaScript SDK's packages: run \`npm ci\` in" \
       "guest-sdk/js and fix what it reports" >&2
  exit 1
fi
