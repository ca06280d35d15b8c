#!/usr/bin/env bash
# Installs the RocksDB library that host-kept keyed state links (docs/STATE.md, "Building it"),
# so a build need not compile RocksDB's C++: 343 files, about 18 minutes of both cores of a CI
# machine (sampled on one like it). The library is the RocksDB project's own release build of exactly
# the version the `librocksdb-sys` crate bundles (read from Cargo.lock), as published in its
# Java package (`org.rocksdb:rocksdbjni`, fetched with Maven): its Linux x86-64 library exports
# RocksDB's C API, the one the crate's bindings call. It is copied to
# target/rocksdb/VERSION/librocksdb.so.
#
# Prints that folder on stdout (for ROCKSDB_LIB_DIR), or nothing on a platform the package has
# no library for (then the crate compiles RocksDB from source, as it does when nothing is set).
# Everything else goes to stderr. Does nothing when the library is there. Fails loudly, naming
# what to do, when it cannot install it. Needs Java's Maven: installs Debian's maven if missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
lock="$root/Cargo.lock"
# "0.19.0+11.8.1": the crate's version, then the RocksDB version it bundles.
crate="$(awk '/^name = "librocksdb-sys"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$lock")"
version="${crate#*+}"
if [ -z "$crate" ] || [ "$version" = "$crate" ]; then
  echo "weir: Cargo.lock names no librocksdb-sys VERSION+ROCKSDB_VERSION: is the rocksdb crate" \
       "still a dependency of host/?" >&2
  exit 1
fi
if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ] || ! getconf GNU_LIBC_VERSION >/dev/null 2>&1; then
  echo "weir: no prebuilt RocksDB $version for $(uname -s) $(uname -m): it is compiled from source" >&2
  exit 0
fi
dir="$root/target/rocksdb/$version"
source "$root/scripts/lib/install.sh"
installed() { [ -f "$dir/librocksdb.so" ]; }
mkdir -p "$root/target/rocksdb"
if done_or_locked "$root/target/rocksdb/.install.lock" installed; then
  echo "$dir"
  exit 0
fi
missing=()
command -v mvn >/dev/null 2>&1 || missing+=(maven)
command -v unzip >/dev/null 2>&1 || missing+=(unzip)
command -v nm >/dev/null 2>&1 || missing+=(binutils)
if [ ${#missing[@]} -gt 0 ]; then
  bash "$root/scripts/apt-install.sh" "the prebuilt RocksDB (fetched with Maven, unpacked)" "${missing[@]}"
fi
echo "weir: installing RocksDB $version's library (org.rocksdb:rocksdbjni:$version, with Maven)" >&2
new="$dir.new"
rm -rf "$new"
mkdir -p "$new"
out="$(mktemp)"
trap 'rm -f "$out"; rm -rf "$new"' EXIT
mvn_quietly "fetch org.rocksdb:rocksdbjni:$version" \
  "fix what it reports (network, proxy in ~/.m2/settings.xml), or build RocksDB from source by leaving ROCKSDB_LIB_DIR unset" \
  dependency:copy -Dartifact="org.rocksdb:rocksdbjni:$version" -DoutputDirectory="$new"
jar="$new/rocksdbjni-$version.jar"
if ! (cd "$new" && unzip -q -o "$jar" librocksdbjni-linux64.so); then
  echo "weir: $jar holds no librocksdbjni-linux64.so: this version's Java package has no Linux" \
       "x86-64 library; build RocksDB from source by leaving ROCKSDB_LIB_DIR unset" >&2
  exit 1
fi
# The C API the crate calls must be there, or the build would fail at link time with a
# message that does not say why.
nm -D --defined-only "$new/librocksdbjni-linux64.so" >"$out"
if ! grep -q ' T rocksdb_open$' "$out"; then
  echo "weir: the library in $jar does not export RocksDB's C API (rocksdb_open);" \
       "build RocksDB from source by leaving ROCKSDB_LIB_DIR unset" >&2
  exit 1
fi
mv "$new/librocksdbjni-linux64.so" "$new/librocksdb.so"
rm -f "$jar"
rm -rf "$dir"
mv "$new" "$dir"
echo "$dir"
