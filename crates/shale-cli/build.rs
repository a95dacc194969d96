//! With the `rocksdb-api` feature, `shale` links ShaleDB's RocksDB-compatible librocksdb.so from
//! ROCKSDB_LIB_DIR (checked by shaledb-bench's build script) and gets an rpath to that
//! directory: the library has no soname, so without one the loader would take the first
//! `librocksdb.so` on its default path, Debian's if librocksdb-dev is installed.

fn main() {
    println!("cargo:rerun-if-env-changed=ROCKSDB_LIB_DIR");
    if std::env::var_os("CARGO_FEATURE_ROCKSDB_API").is_some() {
        if let Ok(dir) = std::env::var("ROCKSDB_LIB_DIR") {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
