//! Gives the host's binaries (`weir`) and its tests the run path of the prebuilt RocksDB library
//! when the build links one: `ROCKSDB_LIB_DIR` set without `ROCKSDB_STATIC`, as the scripts set
//! it (scripts/lib/rocksdb.sh). Then `weir` runs without LD_LIBRARY_PATH. A build that compiles
//! RocksDB from source (nothing set) links it statically and needs nothing.

fn main() {
    println!("cargo::rerun-if-env-changed=ROCKSDB_LIB_DIR");
    println!("cargo::rerun-if-env-changed=ROCKSDB_STATIC");
    if let Some(dir) = std::env::var_os("ROCKSDB_LIB_DIR")
        && std::env::var_os("ROCKSDB_STATIC").is_none()
    {
        println!("cargo::rustc-link-arg=-Wl,-rpath,{}", dir.to_string_lossy());
    }
}
