# The checks the install and build scripts share, sourced by them: that the commands a step
# needs are on PATH, that an install is done (asked again under a lock, as test processes run
# the scripts at the same time), and a quiet Maven run that shows its output only when it fails.
# Each fails loudly, naming what to do; the script that sources this keeps what is its own:
# what it installs and what it prints.
#
# Every function writes its messages to stderr.

# Fails, saying that `what` needs them and `fix`, unless every command after the first two
# arguments is on PATH.
require_commands() {
  local what="$1" fix="$2" tool
  shift 2
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "weir: $what, and \`$tool\` is not on PATH: $fix" >&2
      return 1
    fi
  done
}

# Fails, naming `file` and what it is for (`why`), when it is missing.
require_file() {
  local file="$1" why="$2"
  if [ ! -f "$file" ]; then
    echo "weir: $file is missing ($why)" >&2
    return 1
  fi
}

# Whether the stamp file `stamp` holds `want` (a checksum of what the install was made from).
stamp_holds() {
  local stamp="$1" want="$2"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]
}

# Whether the command `"$@"` (after the first argument) says the install is done, asked again
# under an exclusive lock on the file `lock` when it is not: of the processes that run a script
# at the same time, one installs and the others wait and then find it done. When it is not done
# the lock stays held (descriptor 9) until the script exits.
done_or_locked() {
  local lock="$1"
  shift
  if "$@"; then
    return 0
  fi
  exec 9>"$lock"
  flock 9
  "$@"
}

# Runs Maven in batch mode, quietly, with the arguments after the first two, keeping what it
# prints aside: when it fails, shows the last 40 lines and says that Maven could not `what`,
# then `fix` (how to run it by hand).
mvn_quietly() {
  local what="$1" fix="$2" out status=0
  shift 2
  out="$(mktemp)"
  mvn -B -q "$@" >"$out" 2>&1 || status=$?
  if [ "$status" != 0 ]; then
    tail -40 "$out" >&2
    echo "weir: Maven could not $what (what it printed is above): $fix" >&2
  fi
  rm -f "$out"
  return "$status"
}
