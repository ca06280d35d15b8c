#!/usr/bin/env bash
# Builds a Weir operator written in JavaScript (or TypeScript) into a WebAssembly component:
#
#   bash guest-sdk/js/build.sh OUT.wasm OPERATOR.js
#
# OPERATOR.js's default export is the Operator subclass (or its one exported subclass). Relative
# paths resolve against the current directory. Installs the SDK's packages first
# (scripts/install-componentize-js.sh), then runs build.mjs; silent on success.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ "$#" -ne 2 ]; then
  echo "usage: bash guest-sdk/js/build.sh OUT.wasm OPERATOR.js" >&2
  exit 2
fi
bash "$here/../../scripts/install-componentize-js.sh"
exec node "$here/build.mjs" "$1" "$2"
