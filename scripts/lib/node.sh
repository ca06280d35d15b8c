# The steps every install script that takes packages from npm shares, sourced by them: make
# sure Node.js and npm are there (and new enough), tell whether a folder's node_modules holds
# what its package-lock.json pins, and run `npm ci` there. Each step fails loudly, naming what
# to do; the script that sources this keeps what is its own: which files show its packages are
# there, and what it prints.
#
# Every function writes its messages to stderr and expects `root` (the repository) to be set.
source "$root/scripts/lib/install.sh"

# Installs Debian's nodejs and npm (scripts/apt-install.sh) for `what` when either is missing.
install_node_if_missing() {
  local what="$1"
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    bash "$root/scripts/apt-install.sh" "$what" nodejs npm >&2
  fi
}

# Fails, naming `what` and the fix, unless node and npm are on PATH and Node.js is version
# `min_major` or newer (0: any).
require_node() {
  local what="$1" min_major="$2" need="Node.js with npm"
  if [ "$min_major" -gt 0 ]; then
    need="Node.js $min_major or newer with npm"
  fi
  require_commands "$what needs $need" \
    "install them (Debian: apt-get install -y nodejs npm)" node npm || return 1
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  if [ "$major" -lt "$min_major" ]; then
    echo "weir: $what needs Node.js $min_major or newer; this is $(node --version):" \
         "install a newer nodejs" >&2
    return 1
  fi
}

# Whether the folder `dir` has what its package-lock.json pins installed (npm's own record,
# node_modules/.package-lock.json, is no older than the lock file) and every path after the
# first argument, relative to `dir`, is there.
npm_installed() {
  local dir="$1" path
  shift
  local installed="$dir/node_modules/.package-lock.json"
  [ -f "$installed" ] && ! [ "$dir/package-lock.json" -nt "$installed" ] || return 1
  for path in "$@"; do
    [ -e "$dir/$path" ] || return 1
  done
}

# Runs `npm ci` in the folder `dir`, installing `what` (a phrase for messages), its output on
# stderr; fails naming the command to run by hand.
npm_ci() {
  local dir="$1" what="$2"
  local rel="${dir#"$root"/}"
  echo "weir: installing $what (npm ci in $rel)" >&2
  if ! (cd "$dir" && npm ci --no-audit --no-fund >&2); then
    echo "weir: npm could not install $what: run \`npm ci\` in $rel and fix what it reports" >&2
    return 1
  fi
}
