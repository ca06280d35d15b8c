# The steps every install script that takes a tool from PyPI shares, sourced by them: read the
# version a requirements file pins, make sure python3 and its venv module are there (installing
# Debian's packages through scripts/apt-install.sh when not), and create a project-local virtual
# environment with the pinned requirements in it. Each step fails loudly, naming what to do.
# The script that sources this keeps what is its own: how to tell the installed version, and
# what it prints.
#
# Every function writes its messages to stderr and expects `root` (the repository) to be set.

# The environment of a tool kept in the folder `dir`, as every install script keeps one: sets
# `venv` (DIR/.venv), `requirements` (DIR/`file`, what is installed into it) and `pinned` (the
# version of `package` that file pins; see `pinned_version`).
venv_for() {
  local dir="$1" file="$2" package="$3"
  venv="$dir/.venv"
  requirements="$dir/$file"
  pinned="$(pinned_version "$requirements" "$package")"
}

# The version `requirements` pins for `package` (a line `package==VERSION`), printed; fails
# naming the file when it is missing or pins none.
pinned_version() {
  local requirements="$1" package="$2"
  if [ ! -f "$requirements" ]; then
    echo "weir: $requirements is missing (it pins $package: a line $package==VERSION)" >&2
    return 1
  fi
  local pinned
  pinned="$(awk -v p="$package==" \
    'index($0, p) == 1 { v = substr($0, length(p) + 1); sub(/[ ;#].*/, "", v); print v; exit }' \
    "$requirements")"
  if [ -z "$pinned" ]; then
    echo "weir: $requirements pins no $package version (a line $package==VERSION)" >&2
    return 1
  fi
  printf '%s\n' "$pinned"
}

# Creates the virtual environment `venv` afresh and installs `requirements` into it, for `what`
# (a phrase for messages: "the S3 test server"). Installs python3 and python3-venv first when
# missing.
venv_install() {
  local venv="$1" requirements="$2" what="$3"
  local rel_venv="${venv#"$root"/}" rel_requirements="${requirements#"$root"/}"
  if ! command -v python3 >/dev/null 2>&1; then
    bash "$root/scripts/apt-install.sh" "$what (Python, to install from PyPI)" \
      python3 python3-venv
  fi
  # A Python without ensurepip (Debian's python3 without python3-venv) creates no pip.
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    bash "$root/scripts/apt-install.sh" "$what (python3 -m venv)" python3-venv
  fi
  echo "weir: installing $what (pip install -r $rel_requirements into $rel_venv)" >&2
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >&2; then
    echo "weir: python3 -m venv could not create $rel_venv: install Debian's python3-venv" \
         "(apt-get install -y python3-venv) and try again" >&2
    return 1
  fi
  if ! "$venv/bin/python" -m pip install --disable-pip-version-check --no-input -q \
       -r "$requirements" >&2; then
    echo "weir: pip could not install $rel_requirements from PyPI: run" \
         "\`$rel_venv/bin/pip install -r $rel_requirements\` and fix what it reports" >&2
    return 1
  fi
}

# Whether the executable `exe` of the environment `venv` runs that environment's Python: pip
# writes the environment's path into its first line, so an environment that was moved or
# copied has executables that cannot start.
venv_runnable() {
  local venv="$1" exe="$2"
  [ -x "$exe" ] && [ "$(head -n 1 "$exe")" = "#!$venv/bin/python" ]
}

# Fails unless `got`, the version of `package` found installed after `venv_install` (or
# nothing), is the `pinned` one; `missing` says what nothing means ("nothing" by default).
venv_require_pinned() {
  local package="$1" got="$2" pinned="$3" missing="${4:-nothing}"
  if [ "$got" != "$pinned" ]; then
    echo "weir: pip installed $package ${got:-($missing)}, not the pinned $pinned" >&2
    return 1
  fi
}

# Fails unless the executable `exe` of the environment `venv` runs ([`venv_runnable`]), after
# `venv_install` put `what` there; says to start again from a fresh environment with `script`.
venv_require_runnable() {
  local venv="$1" exe="$2" what="$3" script="$4"
  if ! venv_runnable "$venv" "$exe"; then
    local rel_venv="${venv#"$root"/}"
    echo "weir: pip installed $what, but ${exe#"$root"/} is missing or does not run" \
         "$rel_venv/bin/python: remove $rel_venv and run \`bash scripts/$script\` again" >&2
    return 1
  fi
}
