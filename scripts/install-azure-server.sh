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

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  bash "$root/scripts/apt-install.sh" "the Azure test server (Node.js, to install npm's azurite)" \
    nodejs npm >&2
fi
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "weir: the Azure test server needs Node.js with npm, and \`$tool\` is still not on" \
         "PATH: install them (Debian: apt-get install -y nodejs npm)" >&2
    exit 1
  fi
done

installed="$dir/node_modules/.package-lock.json"
if [ -x "$exe" ] && [ -f "$dir/node_modules/@azure/storage-blob/package.json" ] \
   && [ -f "$installed" ] && ! [ "$dir/package-lock.json" -nt "$installed" ]; then
  echo "$exe"
  exit 0
fi
echo "weir: installing the Azure test server (npm ci in tests/azure: azurite, @azure/storage-blob)" >&2
if ! (cd "$dir" && npm ci --no-audit --no-fund >&2); then
  echo "weir: npm could not install the Azure test server: run \`npm ci\` in tests/azure and" \
       "fix what it reports" >&2
  exit 1
fi
echo "$exe"
