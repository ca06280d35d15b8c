#!/usr/bin/env bash
# Installs what the JavaScript guest SDK (guest-sdk/js) needs to build components and run its
# tests: the npm packages pinned in its package-lock.json — componentize-js, rolldown, jco and
# preview2-shim — into guest-sdk/js/node_modules. Does nothing when they are there and up to
# date; installs Node.js and npm from Debian (scripts/apt-install.sh) when they are missing;
# fails loudly, naming what to do, when Node.js is too old or npm cannot install the packages.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/guest-sdk/js"
source "$root/scripts/lib/node.sh"

install_node_if_missing "the JavaScript guest SDK (guest-sdk/js)"
require_node "the JavaScript guest SDK" 20
if npm_installed "$dir" node_modules/@bytecodealliance/componentize-js/package.json; then
  exit 0
fi
npm_ci "$dir" "componentize-js and the JavaScript SDK's tools"
