# Sourced by every script that builds the host (`weir`, its tests, its benches): installs what
# that build needs where it is missing, and points it at RocksDB's prebuilt library:
# - the wasm32 Rust target, for the example guests the tests and benches load;
# - libclang, which bindgen loads to generate RocksDB's bindings;
# - RocksDB's prebuilt library (scripts/lib/rocksdb.sh, which sets the build's environment).
host_build_scripts="$(dirname "${BASH_SOURCE[0]}")/.."
bash "$host_build_scripts/ensure-wasm-target.sh"
bash "$host_build_scripts/ensure-libclang.sh"
source "$host_build_scripts/lib/rocksdb.sh"
