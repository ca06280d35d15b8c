# Sourced by scripts/lib/host-build.sh (so by every script that builds the host), and by hand
# before running cargo: links RocksDB's prebuilt library when this platform has one
# (scripts/install-rocksdb.sh), instead of compiling its C++ from source.
#
# Sets ROCKSDB_LIB_DIR for the `librocksdb-sys` crate's build, and LD_LIBRARY_PATH for the test
# and bench binaries it runs (the `weir` binary needs neither: host/build.rs gives it the
# folder as its run path). Before running cargo by hand, `source scripts/lib/rocksdb.sh` in the
# shell too: a build without these compiles RocksDB from source (and a build with them after one
# without, or the other way round, rebuilds what links it).
rocksdb_dir="$(bash "$(dirname "${BASH_SOURCE[0]}")/../install-rocksdb.sh")"
if [ -n "$rocksdb_dir" ]; then
  export ROCKSDB_LIB_DIR="$rocksdb_dir"
  export LD_LIBRARY_PATH="$rocksdb_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
