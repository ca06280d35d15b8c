#!/usr/bin/env bash
# Installs the Azure Blob Storage emulator the object-storage tests run
# (tests/all/object_storage/mod.rs): npm's `azurite`, and `@azure/storage-blob` to create a
# container in it, at the versions pinned in tests/azure/package-lock.json, into
# tests/azure/node_modules (about 400 MB, under a minute). Does nothing when they are there and up
# to date. Installs Node.js and npm from Debian (scripts/apt-install.sh) when they are missing;
# fails loudly, naming what to do, when npm cannot install the packages.
#
# Prints one line on stdout (everything else goes to stderr): the path of the `azurite-blob`
# executable, a Node.js script that serves blobs in its own process.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/tests/azure"
exe="$dir/node_modules/.bin/azurite-blob"
source "$root/scripts/lib/node.sh"

install_node_if_missing "the Azure test server (Node.js, to install npm's azurite)"
require_node "the Azure test server" 0
if ! npm_installed "$dir" node_modules/.bin/azurite-blob \
     node_modules/@azure/storage-blob/package.json; then
  npm_ci "$dir" "the Azure test server (azurite, @azure/storage-blob)"
fi
echo "$exe"
